"""Balanced accuracy with 95% CIs from a bootstrap over source clips, many curves at once.

Why our own bootstrap (not `vocalgrad.stats.summarise`): probe curves are dozens of
prediction vectors over the same items, and averaging seeds gives fractional correctness;
resampling the same clusters for every curve keeps their CIs comparable and costs one
matrix product. Clusters are source clips, as in `vocalgrad.stats` (the clips made from one
source share voice and sentence, so they are not independent). The few-cluster rule is that
module's `ci_method_for`: a bootstrap over fewer than BOOTSTRAP_MIN_CLUSTERS sources is
too narrow, so a probe curve then gets a jackknife t-interval, and with one
source no interval (NaN), never a degenerate one.
"""

from __future__ import annotations

import numpy as np

from vocalgrad.defaults import N_BOOT
from vocalgrad.stats import (
    BOOTSTRAP,
    JACKKNIFE,
    ci_method_for,
    jackknife_t_ci,
    leave_one_out_weights,
    resample_weights,
)

LEVEL = 0.95


def balanced_accuracy_ci(
    correct: np.ndarray,
    positive: np.ndarray,
    clusters: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Balanced accuracy of many prediction curves over the same items, with 95% CIs.

    With several seeds the point is the seed average and every bootstrap draw resamples the
    seeds as well as the source clips, so the interval also covers seed-to-seed variation
    (large for shuffled-label controls). With fewer than BOOTSTRAP_MIN_CLUSTERS sources: a
    delete-one-source jackknife t-interval on the seed average, widened by the seed-to-seed
    variance of that average (a Wilson interval on the source count where the sources agree
    exactly); with one source, NaN.

    Parameters
    ----------
    correct : ndarray
        (curves, items) or (curves, seeds, items), values in [0, 1] (0.5 = a guess).
    positive : ndarray
        (items,) bool: the "increase" items.
    clusters : ndarray
        (items,) int in 0..G-1: the source clip of each item.
    n_boot : int
        Bootstrap resamples (used with >= BOOTSTRAP_MIN_CLUSTERS sources).
    seed : int
        Seed of the resampling.

    Returns
    -------
    point, lo, hi : ndarray
        Each (curves,): balanced accuracy and its CI bounds (NaN where there is no CI).
    """
    correct = np.asarray(correct, np.float64)
    correct = correct.reshape((-1, 1, correct.shape[-1]) if correct.ndim < 3 else correct.shape)
    pos = np.asarray(positive, bool)
    g, n_seeds = int(clusters.max()) + 1, correct.shape[1]
    onehot = np.zeros((len(pos), g))
    onehot[np.arange(len(pos)), clusters] = 1.0
    pos_sum, neg_sum = (correct * pos) @ onehot, (correct * ~pos) @ onehot  # curves x seeds x G
    pos_n, neg_n = pos @ onehot, (~pos) @ onehot  # G

    def ba(seed_w: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Seed weights (draws x seeds, rows summing to 1), cluster weights (draws x G)."""
        p = np.einsum("csg,bs,bg->cb", pos_sum, seed_w, w)
        n = np.einsum("csg,bs,bg->cb", neg_sum, seed_w, w)
        with np.errstate(invalid="ignore", divide="ignore"):
            return 0.5 * (p / (w @ pos_n) + n / (w @ neg_n))

    seed_mean = np.full((1, n_seeds), 1 / n_seeds)
    point = ba(seed_mean, np.ones((1, g)))[:, 0]
    method = ci_method_for(g)
    if method == JACKKNIFE:
        replicates = ba(np.repeat(seed_mean, g, axis=0), leave_one_out_weights(g))  # curves x G
        per_seed = ba(np.eye(n_seeds), np.ones((n_seeds, g)))  # curves x seeds
        seed_var = per_seed.var(axis=1, ddof=1) / n_seeds if n_seeds > 1 else 0.0
        return (
            point,
            *jackknife_t_ci(point, replicates, LEVEL, proportion=True, extra_variance=seed_var),
        )
    if method != BOOTSTRAP:
        return point, np.full_like(point, np.nan), np.full_like(point, np.nan)
    rng = np.random.default_rng(seed)
    weights = resample_weights(rng, n_boot, g).astype(float)
    seed_w = resample_weights(rng, n_boot, n_seeds) / n_seeds
    boot = ba(seed_w, weights)  # curves x n_boot
    lo, hi = np.nanpercentile(boot, [50 * (1 - LEVEL), 50 * (1 + LEVEL)], axis=1)
    return point, lo, hi

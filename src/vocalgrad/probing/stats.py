"""Balanced accuracy with 95% CIs from a bootstrap over source clips, many curves at once.

Why our own bootstrap (not `vocalgrad.metrics.summarise`): probe curves are dozens of
prediction vectors over the same items, and averaging seeds gives fractional correctness;
resampling the same clusters for every curve keeps their CIs comparable and costs one
matrix product. Clusters are source clips, as in `vocalgrad.metrics` (the clips made from one
source share voice and sentence, so they are not independent).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

N_BOOT = 1000
LEVEL = 0.95


def cluster_ids(values: Sequence[object]) -> np.ndarray:
    _, ids = np.unique(np.asarray([str(v) for v in values]), return_inverse=True)
    return ids.reshape(-1)


def balanced_accuracy_ci(
    correct: np.ndarray,
    positive: np.ndarray,
    clusters: np.ndarray,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(point, lo, hi) per curve. `correct` is (curves x items) in [0, 1] (fractions when
    seeds are averaged), `positive` marks "increase" items, `clusters` the source of each."""
    correct = np.atleast_2d(np.asarray(correct, np.float64))
    pos = np.asarray(positive, bool)
    g = int(clusters.max()) + 1
    onehot = np.zeros((len(pos), g))
    onehot[np.arange(len(pos)), clusters] = 1.0
    pos_sum, neg_sum = (correct * pos) @ onehot, (correct * ~pos) @ onehot  # curves x G
    pos_n, neg_n = pos @ onehot, (~pos) @ onehot  # G

    def ba(w: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return 0.5 * (pos_sum @ w.T / (pos_n @ w.T) + neg_sum @ w.T / (neg_n @ w.T))

    point = ba(np.ones((1, g)))[:, 0]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, g, size=(n_boot, g))
    weights = np.apply_along_axis(np.bincount, 1, draws, minlength=g).astype(float)
    boot = ba(weights)  # curves x n_boot
    lo, hi = np.nanpercentile(boot, [50 * (1 - LEVEL), 50 * (1 + LEVEL)], axis=1)
    return point, lo, hi

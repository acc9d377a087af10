"""Per-category probes on cached features: leak-free splits, inner CV, controls, seeds.

For every stage: a linear probe (L2 logistic regression, C by grouped inner CV on log-loss),
a small MLP, and for both the shuffled-label control task (same recipe, training labels
randomised with half of each source's increase and decrease items per label; selectivity =
accuracy - control accuracy). Random-weight and DSP features are just
more stages here (named `random:...` and `dsp:...`), so every curve gets the same treatment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.model_selection import GroupKFold

from vocalgrad.defaults import N_BOOT
from vocalgrad.errors import ConfigError
from vocalgrad.probing import solver


@dataclass(frozen=True)
class ProbeSettings:
    """The probe recipe; goes into the output so a table can be reproduced."""

    cs: tuple[float, ...] = solver.DEFAULT_CS
    inner_folds: int = 3
    seeds: int = 3
    cv_folds: int = 5  # outer grouped folds when the dataset has no train split
    max_rank: int = 1024  # exact below this many training rows, top principal directions above
    # stopping rule in scikit-learn's scaling; its 1e-4 default stops large-C fits early enough
    # on real (ill-conditioned) features to flip the inner-CV choice of C
    tol: float = 1e-6
    mlp: bool = True
    mlp_rank: int = 64
    mlp_hidden: int = 64
    mlp_steps: int = 300
    mlp_lr: float = 1e-2
    mlp_weight_decay: float = 1e-3
    n_boot: int = N_BOOT


@dataclass
class StageFits:
    """Test-set logits of every probe: items are `test_index` (positions in the rows)."""

    stages: list[str]
    test_index: np.ndarray
    linear: np.ndarray  # stages x items
    linear_control: np.ndarray  # stages x seeds x items
    mlp: np.ndarray | None  # stages x seeds x items
    mlp_control: np.ndarray | None
    best_c: np.ndarray  # stages x outer folds
    split: str = ""
    notes: list[str] = field(default_factory=list)


def labels(rows: list[dict]) -> np.ndarray:
    return np.array([r["direction"] == "increase" for r in rows], dtype=np.float64)


def _groups(rows: list[dict], idx: np.ndarray, k: int) -> tuple[np.ndarray, str]:
    """Speakers when there are enough of them (stricter), else source clips."""
    for key in ("speaker_id", "source_id"):
        vals = np.array([str(rows[i][key]) for i in idx])
        if len(set(vals)) >= k:
            return vals, key
    raise ConfigError(f"need at least {k} distinct sources to split without leakage; got fewer")


def outer_splits(
    rows: list[dict], cv_folds: int
) -> tuple[list[tuple[np.ndarray, np.ndarray]], str]:
    """The dataset's speaker- and text-disjoint train -> test split when it has both, else
    grouped K-fold over the test split (never two clips of one speaker/source on both sides)."""
    split = np.array([r["split"] for r in rows])
    if (split == "train").any() and (split == "test").any():
        return [(split == "train", split == "test")], "train -> test (speaker/text-disjoint)"
    idx = np.arange(len(rows))
    groups, key = _groups(rows, idx, 2)
    k = min(cv_folds, len(set(groups)))
    folds = []
    for tr, te in GroupKFold(n_splits=k).split(idx, groups=groups):
        a, b = np.zeros(len(rows), bool), np.zeros(len(rows), bool)
        a[tr], b[te] = True, True
        folds.append((a, b))
    return folds, f"grouped {k}-fold CV by {key}"


def inner_splits(
    rows: list[dict], train: np.ndarray, k: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    idx = np.flatnonzero(train)
    groups, _ = _groups(rows, idx, 2)
    out = []
    for tr, va in GroupKFold(n_splits=min(k, len(set(groups)))).split(idx, groups=groups):
        a, b = np.zeros(len(rows), bool), np.zeros(len(rows), bool)
        a[idx[tr]], b[idx[va]] = True, True
        out.append((a, b))
    return out


def shuffled(
    y: np.ndarray, train: np.ndarray, seed: int, groups: np.ndarray | None = None
) -> np.ndarray:
    """Control-task labels for the training rows (test labels stay true): random, but within
    every (group, true label) cell half the items get each label (the odd one at random).

    Why not a plain permutation: it keeps a chance correlation of ~1/sqrt(n) with the truth
    (overall and per source clip), and a salient direction turns that into control accuracy
    far from chance (see the design notes). Balanced per source, the control labels carry no
    direction information at all."""
    out = y.copy()
    rng = np.random.default_rng([seed, 7])
    cells = np.zeros(len(y), int) if groups is None else np.unique(groups, return_inverse=True)[1]
    for cell in np.unique(cells[train]):
        for label in (0.0, 1.0):
            idx = np.flatnonzero(train & (cells == cell) & (y == label))
            fake = (np.arange(len(idx)) < len(idx) // 2).astype(float)
            if len(idx) % 2:
                fake[-1] = rng.integers(2)
            out[idx] = rng.permutation(fake)
    return out


def linear_cv(
    xs: list[np.ndarray],
    y_sets: np.ndarray,
    train: np.ndarray,
    inner: list[tuple[np.ndarray, np.ndarray]],
    settings: ProbeSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """All stages x label sets at once. Returns (logits S x P x n at the chosen C, chosen C
    index S x P); C maximises mean inner-fold validation log-likelihood, then a refit on all
    training rows (scikit-learn LogisticRegressionCV's rule).

    Stages of similar reduced rank are solved together (padding a 384-wide stage to a
    1,024-wide one would triple its cost): per group two batched solves, the inner folds
    along the whole C grid, then the refits, each only up to its chosen C. Only training
    rows enter the solves; the refit's weights are mapped back to feature space to score
    every row."""
    idx = np.flatnonzero(train)
    folds = [tr[idx] for tr, _ in inner]
    standard = [solver.standardise(x, train) for x in xs]
    reduced = [
        solver.reduce_tasks(xz[idx], [*folds, np.ones(len(idx), bool)], settings.max_rank)
        for xz in standard
    ]
    val = torch.as_tensor(np.stack([va[idx] for _, va in inner])).double()
    logits = np.empty((len(xs), *y_sets.shape))
    best = np.empty((len(xs), y_sets.shape[0]), int)
    for group in _rank_groups([max(r.rank for r in red) for red in reduced]):
        fits = _fit_group(
            [standard[i] for i in group],
            [reduced[i] for i in group],
            y_sets,
            idx,
            np.stack(folds),
            val,
            settings,
        )
        logits[group], best[group] = fits
    return logits, best


def _rank_groups(ranks: list[int], slack: float = 1.5) -> list[list[int]]:
    """Stage indices grouped so that no rank in a group exceeds slack x its smallest."""
    groups: list[list[int]] = []
    for i in sorted(range(len(ranks)), key=lambda i: ranks[i]):
        if groups and ranks[i] <= slack * max(ranks[groups[-1][0]], 1):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _fit_group(
    standard: list[torch.Tensor],
    reduced: list[list[solver.Reduced]],
    y_sets: np.ndarray,
    idx: np.ndarray,
    folds: np.ndarray,
    val: torch.Tensor,
    settings: ProbeSettings,
) -> tuple[np.ndarray, np.ndarray]:
    """`linear_cv` for stages whose reductions are padded together."""
    s_n, f_n, p_n, k = len(standard), len(folds), y_sets.shape[0], len(idx)
    y = torch.as_tensor(y_sets[:, idx])  # P x k
    fit = torch.as_tensor(folds).double()  # F x k
    z = solver.pad([r for red in reduced for r in red[:-1]])  # (S*F) x k x r
    path = solver.logistic_path(
        z,
        y.expand(s_n * f_n, p_n, k),
        fit[None, :, None, :].expand(s_n, f_n, p_n, k).reshape(s_n * f_n, p_n, k),
        settings.cs,
        tol=settings.tol,
    )
    yv = y.expand(s_n, f_n, p_n, k)
    losses = [
        solver.log_loss(
            solver.decision(z, w, b).reshape(s_n, f_n, p_n, k), yv, val[None, :, None, :]
        ).mean(1)
        for w, b in path
    ]
    best = torch.stack(losses).argmin(0)  # S x P: first (strongest C) among ties, as sklearn
    finals = [red[-1] for red in reduced]
    w, b = solver.logistic_path(
        solver.pad(finals),
        y.expand(s_n, p_n, k),
        torch.ones(s_n, p_n, k, dtype=torch.float64),
        settings.cs,
        stop=best,
        tol=settings.tol,
    )[-1]
    logits = [
        (xz @ red.feature_weights(xz[idx], w[i]).T.float()).T.double() + b[i][:, None]
        for i, (xz, red) in enumerate(zip(standard, finals, strict=True))
    ]
    return torch.stack(logits).numpy(), best.numpy()


def mlp_probe(
    xs: list[np.ndarray],
    y_sets: np.ndarray,
    train: np.ndarray,
    seeds: list[int],
    settings: ProbeSettings,
) -> np.ndarray:
    """Logits S x P x n of one MLP per stage and label set (label set p uses seed p)."""
    reduced = []
    for x in xs:
        reduced += solver.reduce_tasks(solver.standardise(x, train), [train], settings.mlp_rank)
    z = solver.pad(reduced)
    y = torch.as_tensor(y_sets).expand(len(xs), *y_sets.shape)
    m = torch.as_tensor(train).double().expand_as(y)
    return solver.mlp_fit(
        z,
        y,
        m,
        seeds,
        hidden=settings.mlp_hidden,
        steps=settings.mlp_steps,
        lr=settings.mlp_lr,
        weight_decay=settings.mlp_weight_decay,
    ).numpy()


def fit_category(
    features: dict[str, np.ndarray],
    rows: list[dict],
    settings: ProbeSettings,
    progress: Callable[[int, int], None] | None = None,
) -> StageFits:
    """Every probe and control for one category's stages (dict order is kept).

    Parameters
    ----------
    features : dict of str to ndarray
        Stage -> items x d features, rows in `rows` order.
    rows : list of dict
        The items' dataset rows (labels, split, source and speaker).
    settings : ProbeSettings
        Seeds, folds, the regularisation path and the MLP's budget.
    progress : callable, optional
        ``progress(done, total)`` after each fit of a fold (the linear probes of every stage,
        then the MLPs): a long fit is not silence.

    Returns
    -------
    StageFits
        Per stage the test items' logits of each probe and control, and the chosen C.
    """
    stages = list(features)
    xs = [np.asarray(features[s], np.float32) for s in stages]
    y = labels(rows)
    sources = np.array([str(r["source_id"]) for r in rows])
    folds, split = outer_splits(rows, settings.cv_folds)
    seeds = list(range(settings.seeds))
    test_index = np.concatenate([np.flatnonzero(te) for _, te in folds])
    pos = {i: k for k, i in enumerate(test_index)}
    s_n, n_test = len(stages), len(test_index)
    lin = np.zeros((s_n, n_test))
    lin_ctl = np.zeros((s_n, len(seeds), n_test))
    mlp = np.zeros((s_n, len(seeds), n_test)) if settings.mlp else None
    mlp_ctl = np.zeros_like(mlp) if mlp is not None else None
    best_c = np.zeros((s_n, len(folds)))
    steps = len(folds) * (2 if mlp is not None else 1)
    done = 0
    if progress is not None:
        progress(done, steps)
    for f_i, (train, test) in enumerate(folds):
        inner = inner_splits(rows, train, settings.inner_folds)
        control = [shuffled(y, train, s, sources) for s in seeds]
        y_sets = np.stack([y, *control])
        logits, best = linear_cv(xs, y_sets, train, inner, settings)
        cols = [pos[i] for i in np.flatnonzero(test)]
        lin[:, cols] = logits[:, 0][:, test]
        lin_ctl[:, :, cols] = logits[:, 1:][:, :, test]
        best_c[:, f_i] = np.asarray(settings.cs)[best[:, 0]]
        done += 1
        if progress is not None:
            progress(done, steps)
        if mlp is not None and mlp_ctl is not None:
            y_mlp = np.stack([*[y for _ in seeds], *control])
            out = mlp_probe(xs, y_mlp, train, seeds + seeds, settings)
            mlp[:, :, cols] = out[:, : len(seeds)][:, :, test]
            mlp_ctl[:, :, cols] = out[:, len(seeds) :][:, :, test]
            done += 1
            if progress is not None:
                progress(done, steps)
    return StageFits(stages, test_index, lin, lin_ctl, mlp, mlp_ctl, best_c, split)

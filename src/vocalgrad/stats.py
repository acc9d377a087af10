"""Scores for scored result rows: accuracy, bias-free sensitivity, and honest uncertainty.

A scored row is a dict with at least `item_id, category, direction` (the truth),
`predicted` (a label, or None when the answer was unparsed, ambiguous or empty),
`source_id, speaker_id`, optionally `llr` (log-likelihood of "increase" minus "decrease")
and breakdown keys such as `tier, curve, domain`.

Why more than accuracy: a listener that answers one word regardless of the audio scores at
chance on balanced items, so d' and criterion c (signal detection, "increase" is the signal)
separate hearing from bias. Why a clustered bootstrap: the clips made from one source share a
voice and a sentence, so they are not independent; resampling clips understates the
uncertainty, resampling sources does not. Every bootstrap draws its cluster weights through
`resample_weights`.

Why a rule for few clusters: a bootstrap's resamples can vary no more than the G clusters
drawn, so its percentile interval is too narrow exactly when the data say least: in
simulation its 95% interval covers the truth too rarely below about 50 clusters, while a
delete-one-cluster jackknife t-interval stays near nominal (`benchmarks/ci_coverage.py`;
the figures are in docs/explanations/statistics.md). Every CI here follows `ci_method_for`:
G >= BOOTSTRAP_MIN_CLUSTERS keeps the cluster bootstrap; 2 <= G < that uses the jackknife
t-interval with G - 1 degrees of freedom; one cluster gets no CI. Where the
clusters agree exactly an interval has zero width, which G clusters cannot justify:
accuracy-like proportions then get the Wilson interval with G as the sample size (the
effective sample size when every item of a cluster answers alike), d' and c no CI.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import numpy as np
from scipy.stats import binomtest, norm, permutation_test
from scipy.stats import t as student_t
from sklearn.metrics import roc_auc_score

from vocalgrad.records import LABELS

_CHUNK_CELLS = 4_000_000  # bootstrap weights held in memory at once (float64 cells)

# Columns of the per-item count matrix; every count metric is a function of their totals.
_N_INC, _N_DEC, _HIT, _CR, _FA, _ANS_INC, _ANS_DEC, _SAID_INC, _SAID_DEC, _UNPARSED = range(10)
_N_COLS = 10
_WITH_CI = ("accuracy", "balanced_accuracy", "dprime", "criterion", "auc")
_PROPORTIONS = ("accuracy", "balanced_accuracy", "auc")  # see `jackknife_t_ci(proportion=)`

# Fewer clusters (sources, by default) than this: the report and the probe diagnosis flag
# every number resting on them as indicative.
MIN_SOURCES = 10
# Fewer clusters than this: a jackknife t-interval (>= 2) or no CI (1), not the bootstrap,
# whose percentile interval covers the truth too rarely below it (module docstring).
BOOTSTRAP_MIN_CLUSTERS = 50
BOOTSTRAP, JACKKNIFE, SIGN_FLIP, NO_CI = (
    "cluster bootstrap",
    "cluster jackknife t",
    "sign-flip inversion",
    "none",
)
NO_CI_TEXT = "too few sources for a CI"


def ci_method_for(n_clusters: int) -> str:
    """The interval a group with `n_clusters` clusters gets (the module docstring says why).

    Parameters
    ----------
    n_clusters : int
        Distinct clusters (sources, by default) in the group.

    Returns
    -------
    str
        BOOTSTRAP from BOOTSTRAP_MIN_CLUSTERS clusters, JACKKNIFE from 2, NO_CI below.
    """
    if n_clusters >= BOOTSTRAP_MIN_CLUSTERS:
        return BOOTSTRAP
    return JACKKNIFE if n_clusters >= 2 else NO_CI


def jackknife_t_ci(
    point: np.ndarray,
    replicates: np.ndarray,
    level: float = 0.95,
    proportion: bool = False,
    extra_variance: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Delete-one-cluster jackknife t-interval, G - 1 df, per row of `replicates` (..., G).

    Why NaN where the clusters agree: zero width would claim a certainty G clusters cannot
    give.

    Parameters
    ----------
    point : ndarray, shape (...)
        The full-sample estimates.
    replicates : ndarray, shape (..., G)
        The estimate with each cluster left out in turn (`leave_one_out_weights`).
    level : float
        Coverage wanted, in (0, 1).
    proportion : bool
        The statistic is a proportion: the interval is clipped to [0, 1], and where the
        clusters agree exactly it is the Wilson interval with G as the sample size (what G
        clusters whose items all answer alike can support).
    extra_variance : ndarray of shape (...) or float
        Variance of an independent source of error (between probe seeds, say), in the
        statistic's squared unit, added to the jackknife's.

    Returns
    -------
    lo, hi : ndarray, shape (...)
        The interval's ends; NaN where G < 2, a replicate or the point is undefined, or
        (unless `proportion`) the clusters agree exactly.
    """
    replicates = np.asarray(replicates, dtype=float)
    point = np.asarray(point, dtype=float)
    g = replicates.shape[-1]
    nan = np.full(point.shape, np.nan)
    if g < 2:
        return nan, nan.copy()
    with np.errstate(invalid="ignore"):
        spread = replicates - replicates.mean(axis=-1, keepdims=True)
        se = np.sqrt((g - 1) / g * np.sum(spread**2, axis=-1) + extra_variance)
    half = float(student_t.ppf(0.5 + level / 2, g - 1)) * se
    ok = np.isfinite(point) & np.isfinite(se) & (se > 1e-12)
    lo, hi = np.where(ok, point - half, np.nan), np.where(ok, point + half, np.nan)
    if not proportion:
        return lo, hi
    agree = np.isfinite(point) & np.isfinite(se) & ~ok
    w_lo, w_hi = _wilson(point, g, level)
    lo, hi = np.where(agree, w_lo, lo), np.where(agree, w_hi, hi)
    return np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)


def _wilson(p: np.ndarray, n: float, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a proportion `p` observed on `n` (here: clusters)."""
    z = float(norm.ppf(0.5 + level / 2))
    with np.errstate(invalid="ignore"):
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def leave_one_out_weights(n_clusters: int) -> np.ndarray:
    """Cluster weights of the G jackknife replicates: all ones but the left-out cluster.

    Parameters
    ----------
    n_clusters : int
        G, the number of clusters.

    Returns
    -------
    ndarray, shape (G, G), float64
        Row g weighs every cluster 1 except cluster g, which weighs 0.
    """
    return 1.0 - np.eye(n_clusters)


def _counts(rows: Sequence[Mapping]) -> np.ndarray:
    """Per-item indicator matrix (n_items, _N_COLS) for increase/decrease rows."""
    truth = np.array([r["direction"] for r in rows], dtype=object)
    pred = np.array([r.get("predicted") for r in rows], dtype=object)
    inc, dec = truth == "increase", truth == "decrease"
    said_inc, said_dec = pred == "increase", pred == "decrease"
    answered = said_inc | said_dec
    k = np.zeros((len(rows), _N_COLS))
    k[:, _N_INC], k[:, _N_DEC] = inc, dec
    k[:, _HIT], k[:, _CR], k[:, _FA] = inc & said_inc, dec & said_dec, dec & said_inc
    k[:, _ANS_INC], k[:, _ANS_DEC] = inc & answered, dec & answered
    k[:, _SAID_INC], k[:, _SAID_DEC] = said_inc, said_dec
    k[:, _UNPARSED] = np.array([p is None for p in pred], dtype=bool)
    return k


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1), np.nan)


def _count_metrics(t: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics from count totals `t` (..., _N_COLS); works on one total or a bootstrap stack."""
    n = t[..., _N_INC] + t[..., _N_DEC]
    # Log-linear correction (Hautus 1995): +0.5 to counts, +1 to totals keeps z finite when a
    # listener is perfect or always says one word. Undefined (NaN) with no answered trials.
    ok = (t[..., _ANS_INC] > 0) & (t[..., _ANS_DEC] > 0)
    zh = norm.ppf((t[..., _HIT] + 0.5) / (t[..., _ANS_INC] + 1))
    zf = norm.ppf((t[..., _FA] + 0.5) / (t[..., _ANS_DEC] + 1))
    return {
        "accuracy": _div(t[..., _HIT] + t[..., _CR], n),
        "balanced_accuracy": 0.5
        * (_div(t[..., _HIT], t[..., _N_INC]) + _div(t[..., _CR], t[..., _N_DEC])),
        "increase_rate": _div(t[..., _SAID_INC], n),
        "decrease_rate": _div(t[..., _SAID_DEC], n),
        "unparsed_rate": _div(t[..., _UNPARSED], n),
        "dprime": np.where(ok, zh - zf, np.nan),
        "criterion": np.where(ok, -(zh + zf) / 2, np.nan),
    }


def cluster_ids(rows: Sequence[Mapping], cluster: str | None) -> np.ndarray:
    """Integer cluster index per row; None (or a missing value) makes each row its own cluster.

    Parameters
    ----------
    rows : sequence of mapping
        Result rows.
    cluster : str or None
        The field whose value names a row's cluster ("source_id", "speaker_id"); None makes
        every row a cluster of its own.

    Returns
    -------
    ndarray, shape (len(rows),), int
        Cluster indices 0 .. G - 1, numbered in sorted order of the cluster values (as
        text).
    """
    if cluster is None:
        return np.arange(len(rows))
    keys = [
        f"row:{i}" if r.get(cluster) is None else f"value:{r[cluster]}" for i, r in enumerate(rows)
    ]
    _, ids = np.unique(np.array(keys, dtype=object), return_inverse=True)
    return ids.reshape(-1)


def resample_weights(rng: np.random.Generator, n_rep: int, n_clusters: int) -> np.ndarray:
    """How often each cluster is drawn in each of `n_rep` with-replacement resamples.

    Parameters
    ----------
    rng : numpy.random.Generator
        The draws' source (`group_rng`, for a group's CI).
    n_rep : int
        Resamples to draw.
    n_clusters : int
        G, the clusters each resample draws G times from.

    Returns
    -------
    ndarray
        Shape (n_rep, n_clusters), int64, every row summing to `n_clusters`: the weights of
        one cluster-bootstrap resample each. Every bootstrap in the toolkit draws through here.
    """
    idx = rng.integers(0, n_clusters, size=(n_rep, n_clusters))
    idx += (np.arange(n_rep) * n_clusters)[:, None]
    return np.bincount(idx.ravel(), minlength=n_rep * n_clusters).reshape(n_rep, n_clusters)


def resample_chunks(
    rng: np.random.Generator, n_boot: int, n_clusters: int, width: int | None = None
) -> Iterator[np.ndarray]:
    """`resample_weights` for `n_boot` resamples in chunks, so that a statistic needing
    `width` float64 cells per resample (default: one per cluster) stays within a fixed
    memory budget; the draws are those of successive calls with the chunk sizes.

    Parameters
    ----------
    rng : numpy.random.Generator
        The draws' source.
    n_boot : int
        Resamples in all.
    n_clusters : int
        G, the clusters each resample draws from.
    width : int or None
        float64 cells the statistic holds per resample (the items, for an item-level
        AUC); None means one per cluster.

    Yields
    ------
    ndarray, shape (k, n_clusters), int64
        The next k resamples' weights (`resample_weights`); the k add up to `n_boot`.
    """
    chunk = max(1, min(n_boot, _CHUNK_CELLS // max(width or n_clusters, 1)))
    for begin in range(0, n_boot, chunk):
        yield resample_weights(rng, min(chunk, n_boot - begin), n_clusters)


class ClusterWeightedAUC:
    """Mann-Whitney AUC (ties count half) under many cluster-weight vectors at once.

    With few clusters the AUC of a resample is a quadratic form in the cluster weights w:
    w'Aw / ((w.p)(w.q)), where A[c, d] counts (positive in c, negative in d) pairs ranked
    correctly, so each resample costs O(G^2) instead of O(n). With many clusters (item-level
    bootstrap) the weighted rank sum is computed directly on the score-sorted items.

    Calling it with a weight matrix (R, G) gives the R AUCs.

    Parameters
    ----------
    scores : ndarray, shape (n,), float
        Each item's score (an `llr`, a classifier's output); higher means positive.
    positive : ndarray, shape (n,), bool
        Each item's truth.
    cid : ndarray, shape (n,), int
        Each item's cluster index in [0, n_clusters) (`cluster_ids`).
    n_clusters : int
        G, the number of clusters.

    Attributes
    ----------
    n_clusters : int
        As given.
    pos_count, neg_count : ndarray, shape (G,), float
        Positive and negative items per cluster.
    quadratic : bool
        Whether resamples are scored by the quadratic form (G * G <= 16 n) rather than the
        rank sum.
    """

    def __init__(self, scores: np.ndarray, positive: np.ndarray, cid: np.ndarray, n_clusters: int):
        self.n_clusters = n_clusters
        self.pos_count = np.bincount(cid[positive], minlength=n_clusters).astype(float)
        self.neg_count = np.bincount(cid[~positive], minlength=n_clusters).astype(float)
        self.quadratic = n_clusters * n_clusters <= 16 * len(scores)
        if self.quadratic:
            a = np.zeros((n_clusters, n_clusters))
            pos_scores, pos_cid = scores[positive], cid[positive]
            for d in range(n_clusters):
                neg = np.sort(scores[~positive & (cid == d)])
                if neg.size:
                    lo = np.searchsorted(neg, pos_scores, side="left")
                    hi = np.searchsorted(neg, pos_scores, side="right")
                    correct = lo + 0.5 * (hi - lo)
                    a[:, d] = np.bincount(pos_cid, weights=correct, minlength=n_clusters)
            self._a = a
        else:
            order = np.argsort(scores, kind="stable")
            s = scores[order]
            self._starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
            self._ties = self._starts.size < s.size
            self._cid_sorted = cid[order]
            self._pos_sorted = positive[order].astype(float)

    def __call__(self, w: np.ndarray) -> np.ndarray:
        """The AUC under each row of cluster weights `w` (R, G): (R,), NaN where a row weighs
        no positive or no negative item."""
        w = w.astype(float)
        den = (w @ self.pos_count) * (w @ self.neg_count)
        if self.quadratic:
            return _div(np.einsum("bc,cd,bd->b", w, self._a, w, optimize=True), den)
        ws = w[:, self._cid_sorted]
        p = ws * self._pos_sorted
        q = ws - p
        if self._ties:
            p = np.add.reduceat(p, self._starts, axis=1)
            q = np.add.reduceat(q, self._starts, axis=1)
        return _div(np.sum(p * (np.cumsum(q, axis=1) - 0.5 * q), axis=1), den)


def weighted_ci(
    statistic: Callable[[np.ndarray], np.ndarray],
    point: float,
    n_clusters: int,
    rng: np.random.Generator,
    n_boot: int = 2000,
    proportion: bool = True,
    level: float = 0.95,
) -> tuple[float, float, str]:
    """(lo, hi, method) of any statistic of cluster weights, under this module's rule.

    For callers with their own statistic (the shortcut audit's cue classifiers), so every CI
    in the toolkit follows one rule.

    Parameters
    ----------
    statistic : callable (ndarray (R, G)) -> ndarray (R,)
        The statistic under each row of cluster weights; all ones gives `point`.
    point : float
        The statistic on the data as they are.
    n_clusters : int
        G, the number of clusters.
    rng : numpy.random.Generator
        The bootstrap's draws (unused by the jackknife).
    n_boot : int
        Bootstrap resamples; 0 computes no interval.
    proportion : bool
        The statistic is a proportion (see `jackknife_t_ci`); a collapsed bootstrap interval
        then becomes the Wilson interval on the clusters.
    level : float
        Coverage wanted, in (0, 1).

    Returns
    -------
    lo : float
        Lower end, in the statistic's unit; NaN when there is no interval.
    hi : float
        Upper end; NaN when there is no interval.
    method : str
        BOOTSTRAP, JACKKNIFE or NO_CI (`ci_method_for`; NO_CI when `n_boot` is 0).
    """
    method = ci_method_for(n_clusters) if n_boot > 0 else NO_CI
    if method == BOOTSTRAP:
        weights = resample_weights(rng, n_boot, n_clusters).astype(float)
        lo, hi = _percentile_ci(statistic(weights), level)
        if proportion:
            lo, hi = _unless_collapsed(lo, hi, point, n_clusters, level)
        return lo, hi, method
    if method == JACKKNIFE:
        lo, hi = jackknife_t_ci(
            np.asarray(point), statistic(leave_one_out_weights(n_clusters)), level, proportion
        )
        return float(lo), float(hi), method
    return float("nan"), float("nan"), method


def _percentile_ci(samples: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    s = samples[np.isfinite(samples)]
    if s.size == 0:
        return float("nan"), float("nan")
    lo, hi = np.percentile(s, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def _unless_collapsed(
    lo: float, hi: float, point: float, n_clusters: int, level: float = 0.95
) -> tuple[float, float]:
    """A proportion's bootstrap interval, or where it has zero width (every cluster agrees
    exactly, so every resample gives the point) the Wilson interval on the clusters."""
    if np.isfinite(point) and np.isfinite(lo) and hi - lo <= 1e-12:
        w_lo, w_hi = _wilson(np.asarray(point, dtype=float), n_clusters, level)
        return float(np.clip(w_lo, 0.0, 1.0)), float(np.clip(w_hi, 0.0, 1.0))
    return lo, hi


def group_rng(seed: int, key: str) -> np.random.Generator:
    """A generator per (seed, group) so a group's CI does not depend on which others exist.

    Parameters
    ----------
    seed : int
        The run's seed.
    key : str
        The group's label ("overall", "volume|high").

    Returns
    -------
    numpy.random.Generator
        Seeded from `seed` and the CRC-32 of `key`: the same pair always draws the same.
    """
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def _llr_array(rows: Sequence[Mapping]) -> np.ndarray | None:
    vals = [r.get("llr") for r in rows]
    if not vals or any(v is None for v in vals):
        return None
    arr = np.asarray(vals, dtype=float)
    return arr if np.all(np.isfinite(arr)) else None


def _group_summary(
    rows: Sequence[Mapping], cluster: str | None, n_boot: int, rng: np.random.Generator
) -> dict:
    nan = float("nan")
    out: dict = {"n": len(rows)}
    if not rows:
        out |= {"n_increase": 0, "n_decrease": 0, "n_clusters": 0, "ci_method": NO_CI}
        out |= {"increase_rate": nan, "decrease_rate": nan, "unparsed_rate": nan}
        for name in _WITH_CI:
            out |= {name: nan, f"{name}_lo": nan, f"{name}_hi": nan}
        return out
    k = _counts(rows)
    cid = cluster_ids(rows, cluster)
    n_clusters = int(cid.max()) + 1
    kc = np.zeros((n_clusters, _N_COLS))
    np.add.at(kc, cid, k)
    point = {name: float(v) for name, v in _count_metrics(k.sum(axis=0)).items()}
    llr = _llr_array(rows)
    truth_inc = k[:, _N_INC].astype(bool)
    auc = nan
    if llr is not None and 0 < truth_inc.sum() < len(rows):
        auc = float(roc_auc_score(truth_inc, llr))

    out |= {
        "n_increase": int(k[:, _N_INC].sum()),
        "n_decrease": int(k[:, _N_DEC].sum()),
        "n_clusters": n_clusters,
        "increase_rate": point["increase_rate"],
        "decrease_rate": point["decrease_rate"],
        "unparsed_rate": point["unparsed_rate"],
    }
    point["auc"] = auc
    method = ci_method_for(n_clusters) if n_boot > 0 else NO_CI
    with_auc = bool(np.isfinite(auc)) and method != NO_CI
    if with_auc:
        boot_auc = ClusterWeightedAUC(llr, truth_inc, cid, n_clusters)
    ci: dict[str, tuple[float, float]] = {}
    if method == BOOTSTRAP:
        boot: dict[str, list[np.ndarray]] = {}
        width = len(rows) if with_auc and not boot_auc.quadratic else n_clusters
        for w in resample_chunks(rng, n_boot, n_clusters, width):
            for name, v in _count_metrics(w @ kc).items():
                boot.setdefault(name, []).append(v)
            if with_auc:
                boot.setdefault("auc", []).append(boot_auc(w))
        ci = {name: _percentile_ci(np.concatenate(v)) for name, v in boot.items()}
        for name in _PROPORTIONS:
            if name in ci:
                ci[name] = _unless_collapsed(*ci[name], point[name], n_clusters)
    elif method == JACKKNIFE:
        w = leave_one_out_weights(n_clusters)
        reps = _count_metrics(w @ kc) | ({"auc": boot_auc(w)} if with_auc else {})
        for name, v in reps.items():
            lo, hi = jackknife_t_ci(np.asarray(point[name]), v, proportion=name in _PROPORTIONS)
            ci[name] = (float(lo), float(hi))
    out["ci_method"] = method
    for name in _WITH_CI:
        lo, hi = ci.get(name, (nan, nan))
        out |= {name: point[name], f"{name}_lo": lo, f"{name}_hi": hi}
    return out


def _groups(rows: Sequence[Mapping], by: Sequence[str]) -> list[tuple[tuple[str, ...], list]]:
    grouped: dict[tuple[str, ...], list] = {}
    for r in rows:
        grouped.setdefault(tuple(str(r.get(k)) for k in by), []).append(r)
    return sorted(grouped.items())


def summarise(
    rows: Iterable[Mapping],
    by: Sequence[str] = ("category",),
    cluster: str | None = "source_id",
    n_boot: int = 2000,
    seed: int = 0,
) -> list[dict]:
    """One summary dict for all increase/decrease rows ("overall") and one per `by` group.

    Accuracy counts unparsed answers as wrong. d' and c use only answered trials ("increase"
    is the signal), so a listener that rarely answers is not mistaken for a biased one; the
    unparsed rate says how many were left out. AUC uses `llr` and needs it on every row.
    CIs are 95% intervals over whole clusters (`cluster`, e.g. "source_id" or "speaker_id";
    None makes each item a cluster): a percentile bootstrap with >= BOOTSTRAP_MIN_CLUSTERS
    clusters in the group, a jackknife t-interval with fewer, none with one; `ci_method` says
    which, `n_clusters` how many. `n_boot=0` computes no intervals. Constant-direction rows are
    left out here: see `constant_summary`.

    Parameters
    ----------
    rows : iterable of mapping
        Scored result rows (the module docstring lists their fields); rows whose
        ``direction`` is neither "increase" nor "decrease" are ignored.
    by : sequence of str
        Row fields to break the scores down by, one group per combination of their values;
        empty gives the overall summary only.
    cluster : str or None
        The row field whose value is the resampling unit; None resamples items.
    n_boot : int
        Bootstrap resamples per group (when the group has enough clusters); 0 gives no CIs.
    seed : int
        Seeds every group's draws (`group_rng`), so a group's CI is the same whichever other
        groups exist.

    Returns
    -------
    list of dict
        The overall summary first (its `by` fields read "overall"), then one per group in
        sorted order. Each holds the `by` fields, ``group`` (their values joined by "|"),
        ``n``, ``n_increase``, ``n_decrease``, ``n_clusters``, ``ci_method``, the rates
        ``increase_rate``, ``decrease_rate``, ``unparsed_rate`` (0-1), ``accuracy``,
        ``balanced_accuracy`` and ``auc`` (0-1), ``dprime`` and ``criterion`` (z units), each
        of the last five with ``_lo`` and ``_hi`` (NaN without an interval), and ``cluster``
        and ``n_boot`` as used.
    """
    rows = [r for r in rows if r.get("direction") in LABELS]
    by = tuple(by)
    meta = {"cluster": cluster or "item", "n_boot": n_boot}
    out = [
        {
            **dict.fromkeys(by, "overall"),
            "group": "overall",
            **_group_summary(rows, cluster, n_boot, group_rng(seed, "overall")),
            **meta,
        }
    ]
    if by:
        for key, members in _groups(rows, by):
            label = "|".join(key)
            out.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "group": label,
                    **_group_summary(members, cluster, n_boot, group_rng(seed, label)),
                    **meta,
                }
            )
    return out


def constant_summary(rows: Iterable[Mapping], by: Sequence[str] = ("category",)) -> list[dict]:
    """What the listener says when nothing changes: answer rates on constant-direction rows.

    A listener that hears should say "constant" (ternary) or "no" (change detection); one that
    says "increase" here shows the same bias that inflates its score on changed clips.

    Parameters
    ----------
    rows : iterable of mapping
        Scored result rows; only those whose ``direction`` is "constant" count.
    by : sequence of str
        Row fields to break the rates down by; empty gives the overall rates only.

    Returns
    -------
    list of dict
        The overall rates first (its `by` fields read "overall"), then one per group in
        sorted order, each with the `by` fields, ``group``, ``n``, and the share of answers
        (0-1; NaN for an empty group) in ``increase_rate``, ``decrease_rate``,
        ``constant_rate``, ``unparsed_rate``, and ``yes_rate`` / ``no_rate`` where any row
        answered so.
    """
    rows = [r for r in rows if r.get("direction") == "constant"]
    labels = ["increase", "decrease", "constant"]
    labels += [x for x in ("yes", "no") if any(r.get("predicted") == x for r in rows)]

    def rates(members: list) -> dict:
        n = len(members)
        said = Counter(r.get("predicted") for r in members)
        out: dict = {"n": n}
        for label in labels:
            out[f"{label}_rate"] = said[label] / n if n else float("nan")
        out["unparsed_rate"] = said[None] / n if n else float("nan")
        return out

    by = tuple(by)
    out = [{**dict.fromkeys(by, "overall"), "group": "overall", **rates(rows)}]
    if by:
        for key, members in _groups(rows, by):
            group = {**dict(zip(by, key, strict=True)), "group": "|".join(key)}
            out.append(group | rates(members))
    return out


def paired_comparison(
    rows_a: Iterable[Mapping],
    rows_b: Iterable[Mapping],
    cluster: str | None = "source_id",
    n_boot: int = 2000,
    seed: int = 0,
    n_perm: int = 9999,
) -> dict:
    """Compare two runs on the same items (joined by item_id; increase/decrease rows only).

    `difference` is accuracy_a - accuracy_b. Two tests: exact McNemar on discordant items
    (assumes independent items) and a sign-flip permutation test on per-cluster differences
    (swap the two runs' answers for all items of a cluster at once), which stays valid when
    items of a cluster are correlated. Exact when 2**n_clusters <= n_perm; with G clusters its
    p cannot go below 2 / 2**G (`permutation_min_p`: 0.5 with 2 clusters).

    The CI (`ci_method`) follows `ci_method_for` (a cluster bootstrap, or a jackknife
    t-interval below BOOTSTRAP_MIN_CLUSTERS), except under MIN_SOURCES clusters, where it
    inverts the exact sign-flip test, so CI and permutation p cannot disagree, and where that
    test cannot reject at 5% (<= 5 clusters) there is no CI at all.

    Parameters
    ----------
    rows_a, rows_b : iterable of mapping
        The two runs' scored rows; items are paired by ``item_id``, and only increase or
        decrease items present in both count.
    cluster : str or None
        The row field (of `rows_a`) whose value is the resampling and permutation unit;
        None makes each item one.
    n_boot : int
        Bootstrap resamples (with enough clusters); 0 gives no CI.
    seed : int
        Seeds the bootstrap's and the permutation test's draws.
    n_perm : int
        Sign vectors the permutation test draws when it cannot enumerate all 2**G.

    Returns
    -------
    dict
        ``n`` (pairs), ``n_clusters``, ``cluster``, ``n_boot``, ``ci_method``,
        ``accuracy_a``, ``accuracy_b``, ``difference`` with ``difference_lo`` and
        ``difference_hi`` (accuracy, 0-1; NaN without an interval), ``n_only_a_correct``,
        ``n_only_b_correct``, ``mcnemar_p``, ``permutation_p``, ``permutation_exact`` and
        ``permutation_min_p`` (the smallest p the test can give). With no pairs, the figures
        are NaN and the counts 0.

    Raises
    ------
    ValueError
        An item has a different direction in the two runs: they are not on one dataset.
    """
    nan = float("nan")
    b_by_id = {r["item_id"]: r for r in rows_b}
    pairs = [
        (a, b_by_id[a["item_id"]])
        for a in rows_a
        if a["item_id"] in b_by_id and a.get("direction") in LABELS
    ]
    for a, b in pairs:
        if a["direction"] != b.get("direction"):
            raise ValueError(
                f"item {a['item_id']!r} has direction {a['direction']!r} in one run and "
                f"{b.get('direction')!r} in the other: the runs are not on the same dataset"
            )
    out: dict = {"n": len(pairs), "cluster": cluster or "item", "n_boot": n_boot}
    if not pairs:
        return (
            out
            | dict.fromkeys(
                (
                    "accuracy_a",
                    "accuracy_b",
                    "difference",
                    "difference_lo",
                    "difference_hi",
                    "mcnemar_p",
                    "permutation_p",
                    "permutation_min_p",
                ),
                nan,
            )
            | {
                "n_only_a_correct": 0,
                "n_only_b_correct": 0,
                "n_clusters": 0,
                "ci_method": NO_CI,
                "permutation_exact": False,
            }
        )
    ca = np.array([a.get("predicted") == a["direction"] for a, _ in pairs], dtype=float)
    cb = np.array([b.get("predicted") == b["direction"] for _, b in pairs], dtype=float)
    cid = cluster_ids([a for a, _ in pairs], cluster)
    n_clusters = int(cid.max()) + 1
    sums = np.zeros((n_clusters, 3))
    np.add.at(sums, cid, np.column_stack([ca, cb, np.ones_like(ca)]))

    difference = float(ca.mean() - cb.mean())
    method = ci_method_for(n_clusters) if n_boot > 0 else NO_CI
    lo = hi = nan
    if method == BOOTSTRAP:
        rng = group_rng(seed, "paired")
        diffs = []
        for w in resample_chunks(rng, n_boot, n_clusters):
            t = w @ sums
            diffs.append(_div(t[:, 0] - t[:, 1], t[:, 2]))
        lo, hi = _percentile_ci(np.concatenate(diffs))
    elif method == JACKKNIFE and n_clusters < MIN_SOURCES:
        lo, hi = _sign_flip_interval(sums[:, 0] - sums[:, 1], sums[:, 2])
        method = SIGN_FLIP if np.isfinite(lo) else NO_CI
    elif method == JACKKNIFE:  # too many clusters to enumerate every sign vector
        t = leave_one_out_weights(n_clusters) @ sums
        replicates = (t[:, 0] - t[:, 1]) / t[:, 2]
        lo, hi = (float(v) for v in jackknife_t_ci(np.asarray(difference), replicates))

    only_a = int(np.sum((ca == 1) & (cb == 0)))
    only_b = int(np.sum((ca == 0) & (cb == 1)))
    mcnemar = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    if np.all(sums[:, 0] == sums[:, 1]):
        perm_p = 1.0
    else:
        perm_p = permutation_test(
            (sums[:, 0], sums[:, 1]),
            lambda x, y, axis: np.sum(x - y, axis=axis),
            permutation_type="samples",
            vectorized=True,
            n_resamples=n_perm,
            alternative="two-sided",
            random_state=group_rng(seed, "permutation"),
        ).pvalue
    exact = 2**n_clusters <= n_perm
    return out | {
        "n_clusters": n_clusters,
        "ci_method": method,
        "accuracy_a": float(ca.mean()),
        "accuracy_b": float(cb.mean()),
        "difference": difference,
        "difference_lo": lo,
        "difference_hi": hi,
        "n_only_a_correct": only_a,
        "n_only_b_correct": only_b,
        "mcnemar_p": float(mcnemar),
        "permutation_p": float(min(perm_p, 1.0)),
        "permutation_exact": exact,
        # two-sided: only the observed signs and their mirror image are as extreme
        "permutation_min_p": float(min(1.0, 2 / 2**n_clusters if exact else 2 / (n_perm + 1))),
    }


def _sign_flip_interval(
    diff: np.ndarray, size: np.ndarray, level: float = 0.95
) -> tuple[float, float]:
    """The shifts delta of the accuracy difference that the exact sign-flip test keeps.

    Inverts the permutation test of `paired_comparison` (per-cluster totals of a - b minus
    delta times the cluster size, all 2**G sign vectors) on a 0.001 grid, so the interval
    excludes 0 exactly when that test rejects at 1 - `level`. NaN when even the most extreme
    signs cannot reach that level (G <= 5 at 95%): no interval is then better than [-1, 1];
    NaN too when all clusters differ by the same share (the inversion would be one point).
    """
    g = len(diff)
    if 2 / 2**g > 1 - level:
        return float("nan"), float("nan")
    signs = 1 - 2 * ((np.arange(2**g)[:, None] >> np.arange(g)) & 1)
    delta = np.round(np.linspace(-1.0, 1.0, 2001), 3)
    resid = diff[None, :] - delta[:, None] * size[None, :]
    observed = np.abs(resid.sum(axis=1))
    flipped = np.abs(resid @ signs.T)
    p = np.mean(flipped >= observed[:, None] * (1 - 1e-9) - 1e-9, axis=1)
    kept = delta[p > 1 - level]
    if kept.max() == kept.min():  # every cluster differs by the same share: no spread to bound
        return float("nan"), float("nan")
    return float(kept.min()), float(kept.max())


def flip_rate(rows_forward: Iterable[Mapping], rows_reversed: Iterable[Mapping]) -> dict:
    """How often the answer flips when the clip is played backwards.

    Reversed rows name their forward clip in `reversed_of`. Reversing time turns an increase
    into a decrease, so a listener that hears must flip; one that answers from the words (or
    always says one word) does not. A flip is increase <-> decrease; `flip_rate` divides by all
    pairs (an unparsed answer is not a flip), `flip_rate_answered` by pairs answered both ways.

    Parameters
    ----------
    rows_forward : iterable of mapping
        Scored rows of the clips as built, keyed by ``item_id``.
    rows_reversed : iterable of mapping
        Scored rows of their time-reversed controls; a row whose ``reversed_of`` names no
        forward row is ignored.

    Returns
    -------
    dict
        ``n_pairs``, ``n_answered`` (both answered "increase" or "decrease"), ``n_flipped``,
        and the shares ``flip_rate`` and ``flip_rate_answered`` (0-1; NaN with no pairs).
    """
    forward = {r["item_id"]: r for r in rows_forward}
    pairs = [
        (forward[r["reversed_of"]].get("predicted"), r.get("predicted"))
        for r in rows_reversed
        if r.get("reversed_of") in forward
    ]
    answered = [(f, b) for f, b in pairs if f in LABELS and b in LABELS]
    flipped = sum(f != b for f, b in answered)
    return {
        "n_pairs": len(pairs),
        "n_answered": len(answered),
        "n_flipped": flipped,
        "flip_rate": flipped / len(pairs) if pairs else float("nan"),
        "flip_rate_answered": flipped / len(answered) if answered else float("nan"),
    }


def same_answer_alarm(
    rows: Iterable[Mapping], threshold: float = 0.95, min_items: int = 20
) -> str | None:
    """A warning when one answer (or no answer) covers >= `threshold` of the items.

    Such a listener scores near chance whatever it hears, and its accuracy mostly reflects
    the label balance; below `min_items` items the share says nothing and no alarm is raised.

    Parameters
    ----------
    rows : iterable of mapping
        Scored result rows (their ``predicted``, None for no parsable answer).
    threshold : float
        Share of the items (0-1) one answer must cover to raise the alarm.
    min_items : int
        Fewest rows that can raise it.

    Returns
    -------
    str or None
        A warning naming the answer, its share and what to read instead; None when no
        answer reaches the threshold or there are too few rows.
    """
    answers = [r.get("predicted") for r in rows]
    if len(answers) < min_items:
        return None
    answer, count = Counter(answers).most_common(1)[0]
    share = count / len(answers)
    if share < threshold:
        return None
    what = "no parsable answer" if answer is None else f'"{answer}"'
    return (
        f"same-answer alarm: the listener gave {what} to {share:.1%} of {len(answers)} items "
        f"(threshold {threshold:.0%}); its accuracy reflects response bias, not hearing. "
        "Read d' and criterion c, and check the swapped-options prompt."
    )

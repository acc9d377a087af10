"""The audit's gates as one calibrated test: permutation nulls, a family-wise correction and
the smallest leak a build can detect.

Why: a build gates up to three statistics a category (the direction classifier on the audited
cue families, the same on the order-free family, the constant-vs-changing AUC), 28 to 42 on an
all-14 build. Gated one by one on a 95% interval, a build with no leak at all failed one of
them about one time in three, and an interval below chance failed too. Here each gate is one-
sided (only prediction above chance is a leak) and all of a build's gates are one family:

* each gate's statistic is its classifier's figure over DEALS deals of the build's speakers
  into train and test (the build's own split, then random ones): one split of a few sources
  lines up the training sources with the test sources, or against them, by luck;
* each gate's null is its own statistic under `DRAWS` relabellings that keep everything but
  the label: a source's clips all turn their labels about or none do (direction gates; draw
  k turns a source about in every category at once), or which clips of a source are its
  constants moves among its clips (constant gate);
* the statistics are standardised by their null's mean and SD (over the draws and the
  observed value, so the test stays exact) and the build's critical value is the
  (1 - ALPHA) quantile of the largest standardised statistic of each draw, Westfall and
  Young's single-step max-T: with no leak anywhere, a build fails with probability at most
  ALPHA, at any size;
* a gate's critical value in its own units ("needed") is the smallest statistic that fails
  it: the size of leak this build can detect there.

The classifier refitted per draw is the audit's logistic regression (`fit_logistic`: all draws
in one batched Newton solve), so the whole null costs seconds on a demo-size build.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from vocalgrad.stats import group_rng

ALPHA = 0.05  # the build's family-wise error rate
DRAWS = 200  # relabellings a gate; a p-value's resolution is 1 / (DRAWS + 1)
MIN_SOURCES = 8  # the fewest sources whose relabellings make the direction gates' null
DEALS = 10  # deals of the build's speakers into train and test a gate's statistic averages
CHANCE = 0.5
SEED = 0  # the null's draws
# The leak a build should be able to detect: past these, the audit recommends a size.
TARGET_ACCURACY = 0.60  # direction and order-free gates (LR accuracy)
TARGET_AUC = 0.65  # constant gate (LR AUC)
C_LR = 1.0  # the audit's logistic regression: L2 penalty 1 / 2 |w|^2, unpenalised intercept


def standardiser(x_train: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, scale) of training columns as `StandardScaler` sets them (a constant column
    keeps scale 1)."""
    mean = x_train.mean(axis=0)
    scale = x_train.std(axis=0)
    scale[~(scale > 1e-12 * np.maximum(1.0, np.abs(mean)))] = 1.0
    return mean, scale


def fit_logistic(
    x: np.ndarray, y: np.ndarray, c: float = C_LR, max_iter: int = 50, tol: float = 1e-9
) -> tuple[np.ndarray, np.ndarray]:
    """L2-penalised logistic regressions of many label vectors on one design, in one solve.

    The audit's classifier (`LogisticRegression(C=c)` after standardising `x`): minimises
    |w|^2 / 2 + c * sum of log losses, intercept unpenalised, by Newton steps with step
    halving, every label vector at once; the design's outer products are formed once, so a
    draw costs one small matrix product per step. Why: the permutation null refits this
    classifier some hundreds of times a gate.

    Parameters
    ----------
    x : (n, p) standardised features.
    y : (n, B) 0/1 labels, one column a fit.
    c : inverse penalty strength, as sklearn's ``C``.

    Returns
    -------
    (coef (B, p), intercept (B,)). A column with one label only gets zero weights and an
    intercept at that label's log-odds clipped to +-30 (predicting the base rate).
    """
    n, p = x.shape
    y = np.asarray(y, dtype=float).reshape(n, -1)
    n_fits = y.shape[1]
    z = np.hstack([x, np.ones((n, 1))])
    q = p + 1
    upper = np.triu_indices(q)
    outer = z[:, upper[0]] * z[:, upper[1]]  # the Hessian is symmetric: its upper triangle
    penalty = np.r_[np.ones(p), 0.0]
    theta = np.zeros((n_fits, q))
    eta = np.zeros((n, n_fits))
    rate = y.mean(axis=0)
    one_class = (rate <= 0.0) | (rate >= 1.0)
    active = ~one_class
    current = _objective(eta, y, theta, penalty, c)
    for _ in range(max_iter):
        idx = np.flatnonzero(active)
        if not idx.size:
            break
        t, e, ya = theta[idx], eta[:, idx], y[:, idx]
        mu = 0.5 * (1.0 + np.tanh(0.5 * e))
        grad = c * (mu - ya).T @ z + t * penalty
        flat = c * (mu * (1.0 - mu)).T @ outer
        hess = np.empty((idx.size, q, q))
        hess[:, upper[0], upper[1]] = flat
        hess[:, upper[1], upper[0]] = flat
        hess += np.diag(penalty)
        hess[:, p, p] += 1e-12
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        size = np.ones(idx.size)
        new_t = t - step
        new_e = z @ new_t.T
        new = _objective(new_e, ya, new_t, penalty, c)
        old = current[idx]
        for _halving in range(30):
            worse = new > old + 1e-12 * np.maximum(1.0, np.abs(old))
            if not worse.any():
                break
            size[worse] *= 0.5
            new_t[worse] = t[worse] - size[worse, None] * step[worse]
            new_e[:, worse] = z @ new_t[worse].T
            new[worse] = _objective(new_e[:, worse], ya[:, worse], new_t[worse], penalty, c)
        theta[idx], eta[:, idx], current[idx] = new_t, new_e, new
        done = np.max(np.abs(size[:, None] * step), axis=1) < tol * (1.0 + np.abs(new_t).max(1))
        active[idx[done]] = False
    logit = np.log(np.clip(rate, 1e-13, 1 - 1e-13) / np.clip(1 - rate, 1e-13, 1))
    theta[one_class] = 0.0
    theta[one_class, p] = np.clip(logit[one_class], -30.0, 30.0)
    return theta[:, :p], theta[:, p]


def _objective(
    eta: np.ndarray, y: np.ndarray, t: np.ndarray, penalty: np.ndarray, c: float
) -> np.ndarray:
    """The penalised log loss of each fit (columns of `eta` and `y`, rows of `t`)."""
    return 0.5 * np.sum(t * t * penalty, axis=1) + c * np.sum(
        np.logaddexp(0.0, eta) - y * eta, axis=0
    )


def logistic_scores(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray) -> np.ndarray:
    """Decision values (log-odds of label 1) on `x_test` (n_test, B) of the audit's logistic
    regression fitted on `x_train` (finite, imputed) to each column of `y_train` (n, B)."""
    mean, scale = standardiser(x_train)
    coef, intercept = fit_logistic((x_train - mean) / scale, y_train)
    return ((x_test - mean) / scale) @ coef.T + intercept[None, :]


def pair_units(rows: Sequence[Mapping]) -> np.ndarray:
    """An index per row: the twin pair it belongs to (its source and `pair_id`, `pair_key`
    or tier and curve, whichever the rows carry). A pair's two clips swap labels together."""
    keys: dict[Hashable, int] = {}
    out = np.empty(len(rows), dtype=int)
    for i, r in enumerate(rows):
        out[i] = keys.setdefault(_twin(r), len(keys))
    return out


def _twin(row: Mapping) -> tuple:
    """A row's twin pair: its source and its `pair_id`, `pair_key` or tier and curve."""
    twin = row.get("pair_id") or row.get("pair_key") or (row.get("tier"), row.get("curve"))
    return row["source_id"], twin


def flip_units(rows: Sequence[Mapping]) -> tuple[list[str], str]:
    """(a key per row, the unit's name): what the direction gates' null turns about together.

    Whole sources ("sources") where the rows hold at least MIN_SOURCES of them: with no leak
    that carries from one source to another, a source's twins are as likely one way round
    as the other, whatever the source's own difference between them (which end of its words
    is the darker); relabelling twin pairs left the null as narrow as if no source had such
    a difference, and builds of 8 to 10 test sources failed far more often than ALPHA. Twin
    pairs ("twin pairs") below that: n sources have only 2^n relabellings, too few for a 5%
    test, and the pair null asks the stricter question of them, whether twins are
    exchangeable within each source."""
    if len({r["source_id"] for r in rows}) >= MIN_SOURCES:
        return [f"source|{r['source_id']}" for r in rows], "sources"
    return [f"pair|{_twin(r)}" for r in rows], "twin pairs"


def flipped_labels(y: np.ndarray, keys: Sequence[str], draws: int | None = None) -> np.ndarray:
    """(n, draws + 1) 0/1 labels: column 0 is `y`, each other column `y` with every unit's
    labels (rows that share a key) turned about (1 - y) or kept, at random; a unit's draws
    are seeded by its key alone, so draw k turns a source about in every gate and category
    of a build at once; `draws` defaults to DRAWS."""
    draws = DRAWS if draws is None else draws
    names = sorted(set(keys))
    flip = np.array([group_rng(SEED, k).integers(0, 2, draws).astype(bool) for k in names]).reshape(
        len(names), draws
    )
    index = np.searchsorted(names, np.asarray(keys))
    y = np.asarray(y, dtype=float)
    flipped = np.where(flip[index], 1.0 - y[:, None], y[:, None])
    return np.hstack([y[:, None], flipped])


def shuffled_within(
    y: np.ndarray, groups: np.ndarray, rng: np.random.Generator, draws: int | None = None
) -> np.ndarray:
    """(n, draws + 1) labels: column 0 is `y`, each other column `y` shuffled within each
    group (which clips of a source are its constants, the source's count kept); `draws`
    defaults to DRAWS."""
    draws = DRAWS if draws is None else draws
    out = np.empty((len(y), draws + 1))
    out[:, 0] = y
    for g in np.unique(groups):
        idx = np.flatnonzero(groups == g)
        keys = rng.random((len(idx), draws))
        out[idx, 1:] = y[idx][np.argsort(keys, axis=0)]
    return out


def accuracies(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Accuracy per column of predicting label 1 where the decision value is positive."""
    return np.mean((scores > 0) == (labels > 0.5), axis=0)


def aucs(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Mann-Whitney AUC per column (ties count half); NaN where a column has one class."""
    from scipy.stats import rankdata

    ranks = rankdata(scores, axis=0)
    pos = positive > 0.5
    n_pos = pos.sum(axis=0)
    n_neg = len(scores) - n_pos
    with np.errstate(divide="ignore", invalid="ignore"):
        return (np.sum(ranks * pos, axis=0) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class GateStatistic(NamedTuple):
    """A gate's statistic before its record (`gate_record`): its name ("LR accuracy", "LR
    AUC"), its value per column of the labels (column 0 observed, the rest relabellings),
    how many units its relabellings move, the smallest step it takes, and what a unit is
    ("sources" or "twin pairs")."""

    statistic: str
    values: np.ndarray
    units: int
    resolution: float
    unit: str = "sources"


def gate_record(
    name: str,
    statistic: str,
    values: np.ndarray,
    units: int,
    resolution: float,
    unit: str = "sources",
) -> dict:
    """A gate before the family's correction: its observed value (column 0 of `values`), its
    null (the rest), the units its relabellings move (`units` of them, each one of `unit`)
    and the smallest step its statistic takes (`resolution`: one clip of accuracy, one
    positive-negative pair of AUC), the floor of the null's SD."""
    values = np.asarray(values, dtype=float)
    null = values[1:]
    return {
        "gate": name,
        "statistic": statistic,
        "value": float(values[0]),
        "chance": CHANCE,
        "draws": int(null.size),
        "units": int(units),
        "unit": unit,
        "null_mean": float(null.mean()),
        "null_sd": float(null.std()),
        "null_p95": float(np.percentile(null, 95)),
        "p": float((1 + np.sum(null >= values[0] - 1e-12)) / (null.size + 1)),
        "resolution": float(resolution),
        "_values": values,
    }


def _moments(values: np.ndarray, floor: float) -> tuple[float, float]:
    return float(values.mean()), max(float(values.std()), floor)


def _z(values: np.ndarray, floor: float) -> np.ndarray:
    mean, sd = _moments(values, floor)
    return (values - mean) / sd


def _needed(null: np.ndarray, floor: float, critical: float, ceiling: float = 1.0) -> float | None:
    """The smallest statistic whose standardised value exceeds `critical`, its null's moments
    taken with it as the test takes them; None when not even `ceiling` does
    (`_needed_from_moments` of the null's size, mean and variance)."""
    return _needed_from_moments(
        null.size, float(null.mean()), float(null.var()), floor, critical, ceiling
    )


def _needed_from_moments(
    b: int, mean: float, variance: float, floor: float, critical: float, ceiling: float = 1.0
) -> float | None:
    """`_needed` of a null of `b` draws with this mean and variance.

    With B draws of mean m and variance v, a statistic m + d stands (d B / (B + 1)) / sd
    above the B + 1 values' mean, sd = max(sqrt((B v + B d^2 / (B + 1)) / (B + 1)), floor):
    over `critical` = c exactly when d exceeds both c sqrt((B + 1) v / (B - c^2)) and
    c floor (B + 1) / B (never where c^2 >= B)."""
    if critical <= 0:
        return max(mean, CHANCE)
    if critical * critical >= b:
        return None
    d = max(
        critical * math.sqrt((b + 1) * variance / (b - critical * critical)),
        critical * floor * (b + 1) / b,
    )
    return None if mean + d > ceiling else max(mean + d, CHANCE)


def distinct_figures(value: float, needed: float | None, digits: int = 3) -> tuple[str, str]:
    """`value` and `needed` printed with `digits` decimals, or with as many more (up to 8) as
    tell them apart, so a statistic just over its critical value never reads as
    "0.655 > 0.655"; two equal figures (a statistic exactly at its critical value, which
    does not fail) keep `digits`."""
    if needed is None:
        return f"{value:.{digits}f}", "n/a"
    for d in range(digits, 9):
        a, b = f"{value:.{d}f}", f"{needed:.{d}f}"
        if a != b:
            return a, b
    return f"{value:.{digits}f}", f"{needed:.{digits}f}"


def correct_family(gates: Sequence[dict], alpha: float = ALPHA) -> dict:
    """Westfall-Young single-step max-T over `gates` (each from `gate_record`, all with the
    same number of draws, draw k of every gate one joint relabelling of the build): sets each
    gate's `z`, `p_fwer`, `needed` and `fails`, drops its raw values, and returns the
    family's summary (gates, draws, alpha, critical z, p-value resolution).

    A gate fails when its statistic is above chance and its standardised value exceeds the
    (1 - alpha) quantile of the draws' largest standardised statistic; a clean build then
    fails with probability at most alpha (ties make it conservative)."""
    if not gates:
        return {"gates": 0, "draws": 0, "alpha": alpha, "critical_z": None, "p_resolution": None}
    draws = {g["draws"] for g in gates}
    if len(draws) != 1:
        raise ValueError(f"gates with different numbers of draws ({sorted(draws)})")
    n_draws = draws.pop()
    z = np.array([_z(g["_values"], g["resolution"]) for g in gates])  # (gates, draws + 1)
    largest = z[:, 1:].max(axis=0)
    # fail <=> fewer than alpha * (draws + 1) - 1 draws reach the gate's z, i.e. z above the
    # k-th largest draw maximum
    critical = _critical(largest, alpha)
    for g, zg in zip(gates, z, strict=True):
        observed = float(zg[0])
        g["z"] = observed
        g["p_fwer"] = float((1 + np.sum(largest >= observed - 1e-12)) / (n_draws + 1))
        g["fails"] = bool(g["value"] > CHANCE and observed > critical and g["p_fwer"] <= alpha)
        g["needed"] = (
            _needed(g["_values"][1:], g["resolution"], critical)
            if math.isfinite(critical)
            else None
        )
        del g["_values"]
    return {
        "method": "max-T permutation (Westfall-Young, single step), one-sided",
        "gates": len(gates),
        "draws": n_draws,
        "alpha": alpha,
        "critical_z": critical if math.isfinite(critical) else None,
        "p_resolution": 1.0 / (n_draws + 1),
        # each draw's largest standardised statistic: what joins this build's gates with
        # other builds' in one family (`joint_family`)
        "draw_maxima": [round(float(x), 6) for x in largest],
    }


def _critical(largest: np.ndarray, alpha: float) -> float:
    """The (1 - alpha) critical value of draw maxima, as `correct_family` takes it."""
    k = int(math.floor(alpha * (largest.size + 1))) - 1
    ordered = np.sort(largest)[::-1]
    return float(ordered[k]) if 0 <= k < ordered.size else float("inf")


def joint_family(audits: Mapping[str, Mapping], alpha: float = ALPHA) -> dict:
    """Every gate of several audited builds (a ladder's datasets) as one family.

    Westfall-Young single-step max-T over the builds' relabellings taken together: draw k
    of the joint null relabels every build at once, each by its own draw k. With no leak
    anywhere, each build's labels may be relabelled on its own, so these are relabellings of
    the whole; the joint critical value is the (1 - alpha) quantile of each joint draw's
    largest standardised statistic, and a clean set of builds then fails with probability
    at most alpha, however many builds it holds. Why: each build alone keeps its own
    family at alpha, and a ladder of nine datasets would then fail somewhere in about one
    clean build in three.

    Parameters
    ----------
    audits : mapping of str to mapping
        Build name -> its audit report (``audit.json``: ``family.draw_maxima`` and each
        category's ``gates`` with ``z``, ``value``, ``null_mean``, ``null_sd``, ``draws`` and
        ``resolution``).
    alpha : float
        The family-wise error rate.

    Returns
    -------
    dict
        ``method``, ``builds``, ``gates``, ``draws``, ``alpha``, ``critical_z``, ``passes``
        and ``failing``: build -> category -> ``{"gates": {gate: {"value", "needed",
        "p"}}}`` for every gate that fails in the joint family (``needed``: the statistic
        that fails it there, ``p``: its family-wise p-value), or ``{"reasons": [...]}`` for
        a category its build failed on a fact rather than a gate (`classifiers.judge`).
        ``passes`` is None, with a ``reason``, where a build that gates something records
        no draw maxima (audited before they were recorded).

    Raises
    ------
    ValueError
        Builds with different numbers of draws.
    """
    summary: dict = {
        "method": "max-T permutation (Westfall-Young, single step) over the builds together",
        "builds": sorted(audits),
        "alpha": alpha,
        "failing": {},
    }
    gated = {}
    for name, audit in audits.items():
        family = audit.get("family") or {}
        if not family.get("gates"):
            continue  # gates nothing: adds nothing to the family
        if not family.get("draw_maxima"):
            return summary | {
                "gates": None,
                "draws": None,
                "critical_z": None,
                "passes": None,
                "reason": f"{name}'s audit records no draw maxima (audit it again)",
            }
        gated[name] = family["draw_maxima"]
    if not gated:
        return summary | {"gates": 0, "draws": 0, "critical_z": None, "passes": True}
    sizes = {len(m) for m in gated.values()}
    if len(sizes) != 1:
        raise ValueError(f"builds with different numbers of draws ({sorted(sizes)})")
    largest = np.max(np.array(list(gated.values()), dtype=float), axis=0)
    critical = _critical(largest, alpha)
    n_gates = 0
    for name, audit in audits.items():
        for category, c in (audit.get("per_category") or {}).items():
            gates = c.get("gates") or {}
            if c.get("passes") is False and not any(g.get("fails") for g in gates.values()):
                # failed on a fact of the build, not a gate's estimate: it stays failed
                summary["failing"].setdefault(name, {})[category] = {"reasons": c["reasons"]}
            for gate_name, g in gates.items():
                if g.get("z") is None:  # outside its build's family
                    continue
                n_gates += 1
                p = float((1 + np.sum(largest >= g["z"] - 1e-12)) / (largest.size + 1))
                if g["value"] > CHANCE and g["z"] > critical and p <= alpha:
                    needed = _needed_from_moments(
                        int(g["draws"]),
                        float(g["null_mean"]),
                        float(g["null_sd"]) ** 2,
                        float(g["resolution"]),
                        critical,
                    )
                    failing = summary["failing"].setdefault(name, {}).setdefault(category, {})
                    failing.setdefault("gates", {})[gate_name] = {
                        "value": g["value"],
                        "needed": needed,
                        "p": p,
                    }
    return summary | {
        "gates": n_gates,
        "draws": int(largest.size),
        "critical_z": critical if math.isfinite(critical) else None,
        "passes": not summary["failing"],
    }


def recommended_sources(gates: Sequence[tuple[Mapping, int]]) -> int | None:
    """Test sources (and as many train) a build would need for every gate to detect a leak of
    TARGET_ACCURACY (TARGET_AUC for the constant gate), from (gate, its test sources) pairs: a
    null spreads as one over the square root of the sources, so a gate's margin over chance
    shrinks so. None where every gate already detects it; a gate that cannot fail at this
    size counts as needing four times its sources (at least)."""
    need = 0
    for g, sources in gates:
        target = TARGET_AUC if g["gate"] == "constant" else TARGET_ACCURACY
        if g.get("needed") is None:
            need = max(need, 4 * sources)
        elif g["needed"] > target:
            factor = ((g["needed"] - CHANCE) / (target - CHANCE)) ** 2
            need = max(need, int(math.ceil(sources * factor)))
    return need or None

"""The audit's classifiers: from cues to a label (direction, constant vs changing), trained on
the train split and scored on the test split, per category; the order-free family and the
one-end observer beside them. Each gated statistic comes with its permutation null
(`vocalgrad.stimuli.audit.gates`); the build's gates are judged together by `judge`."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np

from vocalgrad import formats
from vocalgrad.records import DIRECTIONS, LABELS
from vocalgrad.stats import (
    NO_CI_TEXT,
    ClusterWeightedAUC,
    cluster_ids,
    group_rng,
    weighted_ci,
)
from vocalgrad.stimuli.audit.cues import (
    CUE_NAMES,
    EDGE_FAMILIES,
    allowed_families,
    feature_names,
    format_families,
    rows_format,
    target_cue_names,
)
from vocalgrad.stimuli.audit.gates import (
    DEALS,
    TARGET_ACCURACY,
    TARGET_AUC,
    GateStatistic,
    accuracies,
    aucs,
    correct_family,
    distinct_figures,
    flip_units,
    flipped_labels,
    gate_record,
    logistic_scores,
    recommended_sources,
    shuffled_within,
)
from vocalgrad.stimuli.audit.redraw import redrawn_values, speaker_deals, summarise
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES

# Whether a format's order-free accuracy is gated is the format's
# (`QuestionFormat.order_free_gated`): the same for every dimension.
N_BOOT = 2000
SEED = 0


def _matrix(
    rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]], names: Sequence[str]
) -> np.ndarray:
    x = np.array([[cues[r["item_id"]].get(n, np.nan) for n in names] for r in rows], dtype=float)
    return x.reshape(len(rows), len(names))


def fill_values(x: np.ndarray) -> np.ndarray:
    """Per-column median of the finite training values (0 where a column has none)."""
    out = np.zeros(x.shape[1])
    for j in range(x.shape[1]):
        finite = x[:, j][np.isfinite(x[:, j])]
        out[j] = float(np.median(finite)) if finite.size else 0.0
    return out


def impute(x: np.ndarray, fill: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, fill[None, :])


def make_classifiers() -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {
        "lr": make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000)),
        "hgb": HistGradientBoostingClassifier(max_iter=100, random_state=0),
    }


def _fit_predict(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, which: Sequence[str]
) -> dict[str, np.ndarray]:
    """P(y = 1) on the test rows for each classifier (the training base rate when the
    training labels have one class only)."""
    fill = fill_values(x_train)
    x_train, x_test = impute(x_train, fill), impute(x_test, fill)
    out = {}
    for name, clf in make_classifiers().items():
        if name not in which:
            continue
        if len(np.unique(y_train)) < 2:
            out[name] = np.full(len(x_test), float(np.mean(y_train)) if len(y_train) else 0.5)
            continue
        if name == "lr":  # the solver the gates refit per draw, so the gated figure is this one
            out[name] = 1.0 / (
                1.0 + np.exp(-logistic_scores(x_train, y_train[:, None], x_test)[:, 0])
            )
            continue
        clf.fit(x_train, y_train)
        out[name] = clf.predict_proba(x_test)[:, 1]
    return out


@dataclass(frozen=True)
class DirectionModel:
    """The audit's logistic regression for one category, fitted on changing clips' cues:
    what `baseline:shortcut` answers with."""

    names: list[str]
    fill: np.ndarray
    model: object  # a fitted classifier, or the base rate when training had one label only

    def p_increase(self, cues: Mapping[str, float]) -> float:
        if isinstance(self.model, float):
            return self.model
        x = impute(np.array([[cues.get(n, np.nan) for n in self.names]], dtype=float), self.fill)
        return float(self.model.predict_proba(x)[0, 1])  # type: ignore[attr-defined]


def fit_direction_model(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> DirectionModel:
    """Fit the direction classifier on the changing clips of `category` among `rows`."""
    members = _sort_rows(r for r in rows if r["category"] == category and r["direction"] in LABELS)
    fmt = rows_format(members)
    partners = formats.get(fmt).cue_partners(members)
    names = feature_names(allowed_families(category, fmt, partners), category, fmt, partners)
    x = _matrix(members, cues, names)
    y = np.array([_is_increase(r) for r in members])
    fill = fill_values(x)
    if len(np.unique(y)) < 2:
        return DirectionModel(names, fill, float(y.mean()) if len(y) else 0.5)
    return DirectionModel(names, fill, make_classifiers()["lr"].fit(impute(x, fill), y))


def _n_groups(rows: Sequence[Mapping]) -> int:
    return len({r["source_id"] for r in rows})


def _predictions(
    train: Sequence[Mapping],
    test: Sequence[Mapping],
    label: Callable[[Mapping], int],
    cues: Mapping[str, Mapping[str, float]],
    names: Sequence[str],
    which: Sequence[str] = ("lr", "hgb"),
) -> tuple[str, dict[str, np.ndarray]] | None:
    """(protocol, classifier -> P(label = 1) per test row): train->test when the train split
    has two sources and both labels, else grouped cross-validation by source on test; None
    when neither is possible (fewer than two test sources)."""
    y_test = np.array([label(r) for r in test])
    y_train = np.array([label(r) for r in train])
    if _n_groups(train) >= 2 and len(np.unique(y_train)) == 2:
        return "train->test", _fit_predict(
            _matrix(train, cues, names), y_train, _matrix(test, cues, names), which
        )
    if _n_groups(test) < 2:
        return None
    from sklearn.model_selection import GroupKFold

    x = _matrix(test, cues, names)
    groups = np.array([str(r["source_id"]) for r in test])
    probs = {name: np.full(len(test), np.nan) for name in which}
    for fit_idx, held_idx in GroupKFold(n_splits=min(5, _n_groups(test))).split(x, y_test, groups):
        fold = _fit_predict(x[fit_idx], y_test[fit_idx], x[held_idx], which)
        for name in which:
            probs[name][held_idx] = fold[name]
    return "grouped-cv", probs


def _cross_fit(
    train: Sequence[Mapping],
    test: Sequence[Mapping],
    label: Callable[[Mapping], int],
    cues: Mapping[str, Mapping[str, float]],
    names: Sequence[str],
) -> tuple[str, list[Mapping], dict[str, np.ndarray]] | None:
    """(protocol, scored rows, classifier -> P(label = 1) per scored row): fitted on train to
    score test *and* on test to score train when both splits have two sources and both labels
    (every clip scored by a model that never saw its source), else `_predictions` on test.

    For the constant test: a build has few constants per source (`BuildConfig.constants`), so
    a small build's test split holds few; scored on those alone, the AUC of clips with no leak
    at all spreads as wide as the gate (see the design notes). Both splits double them."""
    y_train, y_test = [label(r) for r in train], [label(r) for r in test]
    if (
        _n_groups(train) >= 2
        and _n_groups(test) >= 2
        and len(set(y_train)) == 2
        and len(set(y_test)) == 2
    ):
        forward = _fit_predict(
            _matrix(train, cues, names),
            np.array(y_train),
            _matrix(test, cues, names),
            ("lr", "hgb"),
        )
        backward = _fit_predict(
            _matrix(test, cues, names), np.array(y_test), _matrix(train, cues, names), ("lr", "hgb")
        )
        return (
            "cross-fit",
            [*test, *train],
            {k: np.concatenate([forward[k], backward[k]]) for k in forward},
        )
    predicted = _predictions(train, test, label, cues, names)
    return None if predicted is None else (predicted[0], list(test), predicted[1])


class _Design(NamedTuple):
    """One category's clips as a gate fits them: cue matrix (clips, cues) and source ids."""

    x: np.ndarray
    sources: np.ndarray


def _design(
    rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]], names: Sequence[str]
) -> _Design:
    return _Design(_matrix(rows, cues, names), np.array([str(r["source_id"]) for r in rows]))


def _sides(rows: Sequence[Mapping], split: Mapping[str, str] | None) -> tuple[np.ndarray, ...]:
    """(train indices, test indices) of `rows` under one deal of the sources (`split`: source
    id -> "train" or "test"; None: the build's own)."""
    side = np.array([str(r["split"]) if split is None else split[r["source_id"]] for r in rows])
    return np.flatnonzero(side == "train"), np.flatnonzero(side == "test")


def _scores(d: _Design, y: np.ndarray, train: np.ndarray, test: np.ndarray) -> np.ndarray | None:
    """Decision values (test rows, columns of `y`) of the audit's logistic regression fitted to
    every column of the labels `y` (n, B): on the `train` rows where they hold two sources and
    column 0 both labels, else by grouped cross-validation by source on `test`
    (`_predictions`' protocol; the folds depend on the sources, not the labels); None where
    neither is possible."""
    if len(np.unique(d.sources[train])) >= 2 and len(np.unique(y[train, 0])) == 2:
        fill = fill_values(d.x[train])
        return logistic_scores(impute(d.x[train], fill), y[train], impute(d.x[test], fill))
    groups = d.sources[test]
    if len(np.unique(groups)) < 2:
        return None
    from sklearn.model_selection import GroupKFold

    scores = np.full((len(test), y.shape[1]), np.nan)
    folds = GroupKFold(n_splits=min(5, len(np.unique(groups))))
    for fit_idx, held_idx in folds.split(test, y[test, 0], groups):
        fit, held = test[fit_idx], test[held_idx]
        fill = fill_values(d.x[fit])
        scores[held_idx] = logistic_scores(impute(d.x[fit], fill), y[fit], impute(d.x[held], fill))
    return scores


def _direction_gates(
    changing: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    families: Mapping[str, Sequence[str]],
    splits: Sequence[Mapping[str, str] | None],
    draws: int | None = None,
) -> dict[str, GateStatistic]:
    """The direction classifier on each named cue set in `families`: its LR accuracy on test,
    over all the deals of the sources in `splits`, under the observed labels (column 0) and
    under `draws` relabellings (DRAWS by default) that turn whole sources' labels about, or
    twin pairs' on a category of few sources (`gates.flip_units`), one set of draws for all
    gates and deals."""
    keys, unit = flip_units(changing)
    labels = flipped_labels(np.array([_is_increase(r) for r in changing]), keys, draws)
    out = {}
    for gate, names in families.items():
        d = _design(changing, cues, names)
        hits, n_test = np.zeros(labels.shape[1]), []
        for split in splits:
            train, test = _sides(changing, split)
            if len(np.unique(labels[test, 0])) != 2:
                continue
            scores = _scores(d, labels, train, test)
            if scores is not None:
                hits += accuracies(scores, labels[test]) * len(test)
                n_test.append(len(test))
        if n_test:
            out[gate] = GateStatistic(
                "LR accuracy", hits / sum(n_test), len(set(keys)), 1.0 / sum(n_test), unit
            )
    return out


def _constant_gate(
    category: str,
    rows: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    names: Sequence[str],
    splits: Sequence[Mapping[str, str] | None],
    draws: int | None = None,
) -> GateStatistic | None:
    """The constant test (`_cross_fit`'s protocol: fitted on train to score test, and on test
    to score train where both splits can fit): the LR's AUC for "constant", averaged over
    the deals of the sources in `splits`, under the observed labels (column 0) and under
    `draws` relabellings (DRAWS by default) that move which of a source's clips are its
    constants among them."""
    d = _design(rows, cues, names)
    labels = shuffled_within(
        np.array([_is_constant(r) for r in rows], dtype=float),
        d.sources,
        group_rng(SEED, f"{category}|constants"),
        draws,
    )
    values, n_constant = [], []
    for split in splits:
        train, test = _sides(rows, split)
        if len(np.unique(labels[test, 0])) != 2:
            continue
        forward = _scores(d, labels, train, test)
        if forward is None:
            continue
        both = all(
            len(np.unique(labels[side, 0])) == 2 and len(np.unique(d.sources[side])) >= 2
            for side in (train, test)
        )
        backward = _scores(d, labels, test, train) if both else None
        scored = test if backward is None else np.r_[test, train]
        scores = forward if backward is None else np.vstack([forward, backward])
        values.append(aucs(scores, labels[scored]))
        n_constant.append(labels[scored, 0].sum())
    if not values:
        return None
    return GateStatistic(
        "LR AUC",
        np.mean(values, axis=0),
        len(np.unique(d.sources)),
        1.0 / max(1.0, float(np.sum(n_constant))),
    )


def _accuracy(correct: np.ndarray, rows: Sequence[Mapping], key: str) -> dict[str, float]:
    """Accuracy with a 95% CI clustered by source (the metrics module's rule; seeded by key)."""
    cid = cluster_ids(rows, "source_id")
    n_clusters = int(cid.max()) + 1
    k = np.bincount(cid, weights=correct.astype(float), minlength=n_clusters)
    n = np.bincount(cid, minlength=n_clusters).astype(float)

    def accuracy(w: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (w @ k) / (w @ n)

    point = float(correct.mean())
    lo, hi, method = weighted_ci(accuracy, point, n_clusters, group_rng(SEED, key), N_BOOT)
    return {
        "accuracy": point,
        "lo": lo,
        "hi": hi,
        "n": int(len(correct)),
        "n_clusters": n_clusters,
        "ci_method": method,
    }


def _auc(
    scores: np.ndarray, positive: np.ndarray, rows: Sequence[Mapping], key: str
) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    cid = cluster_ids(rows, "source_id")
    n_clusters = int(cid.max()) + 1
    point = float(roc_auc_score(positive, scores))
    lo, hi, method = weighted_ci(
        ClusterWeightedAUC(scores, positive, cid, n_clusters),
        point,
        n_clusters,
        group_rng(SEED, key),
        N_BOOT,
    )
    return {
        "auc": point,
        "lo": lo,
        "hi": hi,
        "n": int(len(scores)),
        "n_clusters": n_clusters,
        "ci_method": method,
    }


def _is_increase(row: Mapping) -> int:
    return int(row["direction"] == "increase")


def _is_constant(row: Mapping) -> int:
    return int(row["direction"] == "constant")


def _sort_rows(rows: Iterable[Mapping]) -> list[Mapping]:
    return sorted(rows, key=lambda r: str(r["item_id"]))


def _predict_direction(
    train: Sequence[Mapping],
    test: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    names: Sequence[str],
) -> tuple[np.ndarray, tuple[str, dict[str, np.ndarray]] | None]:
    """(test labels, `_predictions` of "increase"), the predictions None unless the test
    split holds both labels."""
    y_test = np.array([_is_increase(r) for r in test])
    if len(np.unique(y_test)) != 2:
        return y_test, None
    return y_test, _predictions(train, test, _is_increase, cues, names)


def _order_free_predictions(
    rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> tuple[list[Mapping], np.ndarray, tuple[str, dict[str, np.ndarray]] | None]:
    """(test rows, their labels, `_predictions` of "increase" from the order-free cues)."""
    train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in LABELS)
    test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in LABELS)
    return test, *_predict_direction(train, test, cues, list(ORDER_FREE_NAMES))


def order_free_report(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> dict:
    """The order-free family of one category (`vocalgrad.stimuli.order_free`): direction
    predicted from the whole file's order-free cues alone (classifiers as for the other
    families, train -> test), and each cue's AUC for "increase" on test. No cue is left out
    on any dimension: none can measure a direction. Returns {} when too small to audit."""
    names = list(ORDER_FREE_NAMES)
    test, y_test, predicted = _order_free_predictions(rows, cues)
    if predicted is None:
        return {}
    protocol, probs = predicted
    direction = {
        name: _accuracy((p > 0.5).astype(int) == y_test, test, f"{category}|order_free|{name}")
        for name, p in probs.items()
    }
    best = max(direction, key=lambda name: direction[name]["accuracy"])
    x = _matrix(test, cues, names)
    per_cue = {}
    for j, name in enumerate(names):
        column = x[:, j]
        if np.isfinite(column).all() and np.ptp(column) > 0:
            per_cue[name] = _auc(
                column, y_test.astype(bool), test, f"{category}|order_free_cue|{name}"
            )
    top = sorted(per_cue, key=lambda n: -abs(per_cue[n]["auc"] - 0.5))
    return {
        "protocol": protocol,
        "features": names,
        "direction": direction,
        "classifier": best,
        "accuracy": direction[best]["accuracy"],
        "ci": [direction[best]["lo"], direction[best]["hi"]],
        "per_cue_auc": {n: per_cue[n] for n in top},
    }


def _gate_statistics(
    category: str,
    rows: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    draws: int | None = None,
    only: Collection[str] | None = None,
    deals: int = DEALS,
) -> dict[str, GateStatistic]:
    """Each gate's statistic under the observed labels and `draws` relabellings (DRAWS by
    default): the direction classifier on the audited families, the order-free family
    (gradual and comparison items) and the constant test, each where the category has the
    clips for it; of the gates named in `only`, where given (a redraw reads its failing
    gates alone). Each is the mean over `deals` deals of the build's speakers into train
    and test: the build's own, then random ones (`redraw.speaker_deals`)."""
    fmt = rows_format(rows)
    partners = formats.get(fmt).cue_partners(rows)
    names = feature_names(allowed_families(category, fmt, partners), category, fmt, partners)
    changing = _sort_rows(r for r in rows if r["direction"] in LABELS)
    if len({_is_increase(r) for r in changing if r["split"] == "test"}) != 2:
        return {}
    gated = {"direction": names}
    if formats.get(fmt).order_free_gated:
        gated["order_free"] = list(ORDER_FREE_NAMES)
    wanted = set(gated) | {"constant"} if only is None else set(only)
    gated = {name: cue_names for name, cue_names in gated.items() if name in wanted}
    kept = _sort_rows(r for r in rows if r["direction"] in DIRECTIONS)
    splits = [
        None,
        *speaker_deals(kept, deals - 1, group_rng(SEED, f"{category}|deals")),
    ]
    out = _direction_gates(changing, cues, gated, splits, draws)
    test_constants = [_is_constant(r) for r in kept if r["split"] == "test"]
    if "constant" in wanted and any(test_constants) and not all(test_constants):
        constant = _constant_gate(category, kept, cues, names, splits, draws)
        if constant is not None:
            out["constant"] = constant
    return out


def category_gates(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> dict[str, dict]:
    """The gates of one category before the build's family-wise correction (`judge`): gate
    name -> `gates.gate_record` (observed value and permutation null) for the direction
    classifier on the audited families, the order-free family (gradual and comparison
    items) and the constant test, each where the category has the clips for it.

    Parameters
    ----------
    category : the dimension's name.
    rows : the category's dataset rows, both splits.
    cues : item id -> cues (`dataset_cues`).

    Returns
    -------
    dict of gate records, empty when the category has too few clips or sources to fit.
    """
    return {
        name: gate_record(name, g.statistic, g.values, g.units, g.resolution, g.unit)
        for name, g in _gate_statistics(category, rows, cues).items()
    }


def gate_values(
    category: str,
    rows: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    only: Collection[str] | None = None,
) -> dict[str, float]:
    """Each gate's observed statistic alone, without its null: what a redraw
    (`redraw.redrawn_values`) reads for every deal of the build's speakers.

    Parameters
    ----------
    category : the dimension's name.
    rows : the category's dataset rows, both splits (as dealt).
    cues : item id -> cues.
    only : the gates to read (default: every one).

    Returns
    -------
    dict
        Gate name -> its statistic (LR accuracy; LR AUC for the constant gate), for the
        gates asked for that the rows have the clips for.
    """
    return {
        name: float(g.values[0])
        for name, g in _gate_statistics(category, rows, cues, 0, only, deals=1).items()
    }


def audit_category(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> dict:
    """The audit of one category (see `audit_dataset`), with its gates' observed values and
    permutation nulls (`gates`); `passes` stays None until `judge` decides the build's gates
    together, unless a reason (too few clips or sources) already leaves it undecided."""
    fmt = rows_format(rows)
    partners = formats.get(fmt).cue_partners(rows)
    families = allowed_families(category, fmt, partners)
    cue_names = target_cue_names(category, fmt, partners)
    excluded = [f for f in format_families(fmt) if f not in families] + [
        n for f in families for n in CUE_NAMES[f] if n in cue_names
    ]
    names = feature_names(families, category, fmt, partners)
    train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in LABELS)
    test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in LABELS)
    out: dict = {
        "category": category,
        "families": list(families),
        "excluded_target_cues": excluded,
        "features": names,
        "n_items_test": len(test),
        "n_sources_test": _n_groups(test),
        "n_items_train": len(train),
        "n_sources_train": _n_groups(train),
        "protocol": None,
        "direction": None,
        "shortcut_accuracy": None,
        "shortcut_ci": None,
        "shortcut_classifier": None,
        "by_family_set": {},
        "per_curve": {},
        "worst_curve": None,
        "constant": None,
        "constant_auc": None,
        "constant_ci": None,
        "passes": None,
        "reasons": [],
        "gates": {},
        "order_free": order_free_report(category, rows, cues) or None,
        "order_free_gated": formats.get(fmt).order_free_gated,
        "order_free_limit": order_free_limit(category),
        "one_end": one_end_report(category, rows) or None,
        "second_direction": second_direction_report(rows),
    }
    y_test, predicted = _predict_direction(train, test, cues, names)
    if predicted is None:
        out["reasons"].append("too few changing clips or sources to audit")
        return out
    protocol, probs = predicted
    out["protocol"] = protocol
    direction = {
        name: _accuracy((p > 0.5).astype(int) == y_test, test, f"{category}|direction|{name}")
        for name, p in probs.items()
    }
    out["direction"] = direction
    best = max(direction, key=lambda name: direction[name]["accuracy"])
    out["shortcut_accuracy"] = direction[best]["accuracy"]
    out["shortcut_ci"] = [direction[best]["lo"], direction[best]["hi"]]
    out["shortcut_classifier"] = best

    edge = [f for f in families if f in EDGE_FAMILIES]
    for label, subset in (
        ("global", [f for f in families if f == "global"]),
        ("edge", edge),
        ("all", list(families)),
    ):
        if not subset:
            out["by_family_set"][label] = None
            continue
        _, sub = _predictions(
            train,
            test,
            _is_increase,
            cues,
            feature_names(subset, category, fmt, partners),
            which=("lr",),
        )  # type: ignore[misc]
        acc = _accuracy((sub["lr"] > 0.5).astype(int) == y_test, test, f"{category}|family|{label}")
        out["by_family_set"][label] = {**acc, "families": subset}

    curves: dict[str, list[int]] = {}
    for i, r in enumerate(test):
        curves.setdefault(str(r.get("curve")), []).append(i)
    for curve, idx in sorted(curves.items()):
        ix = np.array(idx)
        out["per_curve"][curve] = {
            "n": len(idx),
            **{
                name: float(((p[ix] > 0.5).astype(int) == y_test[ix]).mean())
                for name, p in probs.items()
            },
        }
    worst = max(out["per_curve"].items(), key=lambda kv: max(kv[1]["lr"], kv[1]["hgb"]))
    out["worst_curve"] = {
        "curve": worst[0],
        "accuracy": max(worst[1]["lr"], worst[1]["hgb"]),
        "n": worst[1]["n"],
    }

    constant_test = _sort_rows(
        r for r in rows if r["split"] == "test" and r["direction"] in DIRECTIONS
    )
    constant_train = _sort_rows(
        r for r in rows if r["split"] == "train" and r["direction"] in DIRECTIONS
    )
    c_predicted = None
    if any(map(_is_constant, constant_test)) and not all(map(_is_constant, constant_test)):
        c_predicted = _cross_fit(constant_train, constant_test, _is_constant, cues, names)
    if c_predicted is not None:
        c_protocol, scored, c_probs = c_predicted
        positive = np.array([_is_constant(r) for r in scored], dtype=bool)
        aucs = {
            name: _auc(p, positive, scored, f"{category}|constant|{name}")
            for name, p in c_probs.items()
        }
        c_best = max(aucs, key=lambda name: aucs[name]["auc"])
        out["constant"] = {"protocol": c_protocol, "n_constant_scored": int(positive.sum()), **aucs}
        out["constant_auc"] = aucs[c_best]["auc"]
        out["constant_ci"] = [aucs[c_best]["lo"], aucs[c_best]["hi"]]

    started = time.process_time()
    out["gates"] = category_gates(category, rows, cues)
    out["_seconds_gates"] = time.process_time() - started  # popped by `audit_dataset`
    lo, hi = out["shortcut_ci"]
    if not (np.isfinite(lo) and np.isfinite(hi)):
        out["reasons"].append(f"{NO_CI_TEXT}: cannot tell chance from a shortcut")
    return out  # `judge` decides `passes` over all of the build's gates at once


def second_direction_report(rows: Sequence[Mapping]) -> dict | None:
    """Where a clip carries a second dimension (``second_direction``, the two-dimension
    formats): how often its direction equals the label, over every changing clip, and the
    sources where it does not on exactly half. Every (source, pair) carries all combinations
    of both directions, so exactly half: the other dimension's course, and every cue of it,
    says nothing about the label. Gated like a shortcut, either way (always equal or always
    opposite both answer). None for rows without a second dimension."""
    members = [r for r in rows if r["direction"] in LABELS and r.get("second_direction") in LABELS]
    if not members:
        return None
    agree: dict[str, list[bool]] = {}
    for r in members:
        agree.setdefault(str(r["source_id"]), []).append(r["direction"] == r["second_direction"])
    return {
        "agreement": float(np.mean([a for v in agree.values() for a in v])),
        "n": len(members),
        "unbalanced_sources": sorted(s for s, v in agree.items() if np.mean(v) != 0.5),
    }


def one_end_report(category: str, rows: Sequence[Mapping]) -> dict:
    """How much an endpoint strategy answers without comparing over time: a logistic
    regression on the dimension's own measure at one end of the clip (`measured_start` or
    `measured_end`, recorded at build, relative to the source), fitted on train, scored on
    test; the better end is reported. {} when the rows lack the measures or are too few."""
    train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in LABELS)
    test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in LABELS)
    y_test = np.array([_is_increase(r) for r in test])
    if len(np.unique(y_test)) < 2:
        return {}
    out = {}
    for end in ("measured_start", "measured_end"):
        if any(r.get(end) is None for r in (*train, *test)):
            return {}
        values = {r["item_id"]: {end: float(r[end])} for r in (*train, *test)}
        predicted = _predictions(train, test, _is_increase, values, [end], which=("lr",))
        if predicted is None:
            return {}
        out[end] = _accuracy(
            (predicted[1]["lr"] > 0.5).astype(int) == y_test, test, f"{category}|one_end|{end}"
        )
    best = max(out, key=lambda end: out[end]["accuracy"])
    return {"end": best.removeprefix("measured_"), **out[best]}


def order_free_limit(category: str) -> str | None:
    """The dimension's documented order-free limit (`DimensionSpec.order_free_limit`), if any."""
    from vocalgrad.dimensions import get

    return get(category).SPEC.order_free_limit or None


def _gate_reasons(c: Mapping) -> list[str]:
    """Why a judged category fails: each failing gate, its statistic against the figure a
    build of this size reads by chance at most (`needed`), and its family-wise p-value; a
    documented order-free limit is named after the order-free reason (it never turns a
    failure into a pass)."""
    gates = c.get("gates") or {}
    reasons = []

    def against(g: Mapping) -> str:
        p = g["p_fwer"]
        value, needed = distinct_figures(g["value"], g["needed"])
        return f"{value} > {needed} needed at this size (family-wise p {p:.3f})"

    if (g := gates.get("direction")) and g["fails"]:
        reasons.append(f"direction predicted from cues with LR accuracy {against(g)}")
    if (g := gates.get("order_free")) and g["fails"]:
        per_cue = (c.get("order_free") or {}).get("per_cue_auc") or {}
        top = next(iter(per_cue), None)
        lead = f"; strongest cue {top} (AUC {per_cue[top]['auc']:.2f})" if top else ""
        reasons.append(
            f"direction predicted from order-free cues with LR accuracy {against(g)}{lead}"
        )
        if c.get("order_free_limit"):
            reasons.append(f"a documented limit of the dimension: {c['order_free_limit']}")
    if (g := gates.get("constant")) and g["fails"]:
        reasons.append(f"constant clips told apart with LR AUC {against(g)}")
    return reasons


def _second_direction_reason(second: Mapping | None) -> str | None:
    """Why a two-dimension category fails where the other dimension's direction equals the
    label (or its opposite) on more of the clips than a leak the audit is built to detect
    (`second_direction_report`; TARGET_ACCURACY), or None."""
    if second is None or abs(second["agreement"] - 0.5) <= TARGET_ACCURACY - 0.5:
        return None
    return (
        f"the other dimension's direction equals the label on {second['agreement']:.2f} "
        "of the items: its course would answer the question"
    )


def judge(per_category: Mapping[str, dict]) -> dict:
    """Decide every category of a build at once (`gates.correct_family` over all of its gates):
    sets each category's `passes` and `reasons` and each gate's family-wise figures, and
    returns the family's summary with the power figures: the largest `needed` of the
    accuracy and the AUC gates (the smallest leak this build detects everywhere) and the test
    sources a build would need to detect TARGET_ACCURACY (`gates.recommended_sources`).

    A category whose audit already has a reason (too few clips or sources) stays undecided
    (`passes` None) and its gates are reported outside the family. A two-dimension category
    whose other dimension's direction gives the label (`second_direction_report`) fails
    whatever its gates say: that is counted from the rows, not estimated."""
    judged = {cat: c for cat, c in per_category.items() if c.get("gates") and not c["reasons"]}
    family = [g for c in judged.values() for g in c["gates"].values()]
    summary = correct_family(family)
    for c in per_category.values():
        for g in (c.get("gates") or {}).values():
            if "_values" in g:  # outside the family
                del g["_values"]
                g.update(z=None, p_fwer=None, needed=None, fails=None)
    for c in judged.values():
        c["reasons"] = _gate_reasons(c)
        c["passes"] = not c["reasons"]
    for c in per_category.values():  # a fact of the build, not an estimate: outside the family
        if reason := _second_direction_reason(c.get("second_direction")):
            c["reasons"].append(reason)
            c["passes"] = False

    def largest(kind: str) -> float | None:
        values = [g["needed"] for g in family if g["statistic"] == kind]
        return None if not values or None in values else max(values)

    summary["needed"] = {"accuracy": largest("LR accuracy"), "auc": largest("LR AUC")}
    summary["cannot_fail"] = [
        f"{cat}/{name}"
        for cat, c in judged.items()
        for name, g in c["gates"].items()
        if g["needed"] is None
    ]
    summary["recommended_test_sources"] = recommended_sources(
        [(g, c["n_sources_test"]) for c in judged.values() for g in c["gates"].values()]
    )
    return summary


def redraw_failing(
    per_category: Mapping[str, dict],
    rows: Mapping[str, Sequence[Mapping]],
    cues: Mapping[str, Mapping[str, float]],
) -> None:
    """Beside each failing gate, how far its statistic moves with the draw of sources: the
    category's gates read again over the build's speakers dealt into train and test at
    random (`redraw.redrawn_values`), summarised on the failing gate's record as `redrawn`.
    A failure that other deals of the same sources undo is the draw's; one that stays is
    the renderer's or the sources'."""
    for category, c in per_category.items():
        failing = [name for name, g in (c.get("gates") or {}).items() if g.get("fails")]
        if not failing:
            continue
        deals = redrawn_values(
            rows[category], partial(gate_values, category, cues=cues, only=failing)
        )
        for name in failing:
            target = TARGET_AUC if name == "constant" else TARGET_ACCURACY
            c["gates"][name]["redrawn"] = summarise([d[name] for d in deals if name in d], target)

"""The audit's classifiers: from cues to a label (direction, constant vs changing), trained on
the train split and scored on the test split, per category; the order-free family and the
one-end observer beside them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

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
from vocalgrad.stimuli.audit.redraw import redrawn_accuracies, summarise
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES

MAX_SHORTCUT_ACCURACY = 0.60  # direction accuracy a cue classifier may reach on test
MAX_CONSTANT_AUC = 0.65  # constant-vs-changing AUC it may reach
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


def order_free_accuracy(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> float | None:
    """The better classifier's order-free accuracy on test, without CIs or per-cue AUCs:
    what a redraw (`redraw.redrawn_accuracies`) reads 30 times. None when too small."""
    _, y_test, predicted = _order_free_predictions(rows, cues)
    if predicted is None:
        return None
    return max(float(((p > 0.5).astype(int) == y_test).mean()) for p in predicted[1].values())


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


def audit_category(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> dict:
    """The audit of one category: see `audit_dataset`."""
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

    lo, hi = out["shortcut_ci"]
    second = out["second_direction"]
    if second is not None and abs(second["agreement"] - 0.5) > MAX_SHORTCUT_ACCURACY - 0.5:
        out["reasons"].append(
            f"the other dimension's direction equals the label on {second['agreement']:.2f} "
            "of the items: its course would answer the question"
        )
    if out["shortcut_accuracy"] > MAX_SHORTCUT_ACCURACY:
        out["reasons"].append(
            f"direction predicted from {best.upper()} cues with accuracy "
            f"{out['shortcut_accuracy']:.2f} "
            f"> {MAX_SHORTCUT_ACCURACY:.2f}"
        )
    if not (np.isfinite(lo) and np.isfinite(hi)):
        out["reasons"].append(f"{NO_CI_TEXT}: cannot tell chance from a shortcut")
        out["passes"] = None
        return out
    if not (lo <= 0.5 <= hi):
        out["reasons"].append(f"direction accuracy CI [{lo:.2f}, {hi:.2f}] excludes chance")
    order_free_reasons = _order_free_reasons(
        out["order_free"], out["order_free_gated"], out["order_free_limit"]
    )
    out["reasons"].extend(order_free_reasons)
    if order_free_reasons:  # beside a failure, how far the figure moves with the draw
        out["order_free"]["redrawn"] = summarise(
            redrawn_accuracies(category, rows, cues, order_free_accuracy), MAX_SHORTCUT_ACCURACY
        )
    if out["constant_auc"] is not None and out["constant_auc"] > MAX_CONSTANT_AUC:
        out["reasons"].append(
            f"constant clips told apart with AUC {out['constant_auc']:.2f} > {MAX_CONSTANT_AUC:.2f}"
        )
    out["passes"] = not out["reasons"]
    return out


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


def _order_free_reasons(report: Mapping | None, gated: bool, limit: str | None = None) -> list[str]:
    """Why the order-free family fails a category: accuracy over the threshold or a CI that
    excludes chance (nothing where the format is not gated or the family had too few clips).
    A documented limit is named after the reasons; it never turns a failure into a pass."""
    if not report or not gated:
        return []
    reasons = []
    acc, (lo, hi) = report["accuracy"], report["ci"]
    if acc > MAX_SHORTCUT_ACCURACY:
        top = next(iter(report["per_cue_auc"]), None)
        lead = f"; strongest cue {top} (AUC {report['per_cue_auc'][top]['auc']:.2f})" if top else ""
        reasons.append(
            f"direction predicted from order-free cues with accuracy {acc:.2f} > "
            f"{MAX_SHORTCUT_ACCURACY:.2f}{lead}"
        )
    if np.isfinite(lo) and np.isfinite(hi) and not lo <= 0.5 <= hi:
        reasons.append(f"order-free accuracy CI [{lo:.2f}, {hi:.2f}] excludes chance")
    if reasons and limit:
        reasons.append(f"a documented limit of the dimension: {limit}")
    return reasons

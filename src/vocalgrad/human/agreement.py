"""Inter-annotator agreement (Fleiss' kappa, Krippendorff's alpha) and per-person summaries.

Both coefficients are computed from counts with numpy, allowing a different number of raters
per item (an excluded annotator leaves holes): Fleiss' kappa in its unequal-n form, and
Krippendorff's alpha (nominal) from the coincidence matrix, which handles missing data.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence

import numpy as np

from vocalgrad.records import LABELS

NAN = float("nan")


def fleiss_kappa(counts: np.ndarray) -> float:
    """counts[i, j]: raters putting item i in category j. Items with < 2 ratings are ignored."""
    counts = np.asarray(counts, dtype=float)
    if counts.ndim != 2 or counts.size == 0:
        return NAN
    n_i = counts.sum(axis=1)
    counts, n_i = counts[n_i >= 2], n_i[n_i >= 2]
    if counts.shape[0] == 0:
        return NAN
    p_j = counts.sum(axis=0) / counts.sum()
    p_i = (np.sum(counts**2, axis=1) - n_i) / (n_i * (n_i - 1))
    p_e = float(np.sum(p_j**2))
    if p_e >= 1.0:
        return NAN
    return float((p_i.mean() - p_e) / (1.0 - p_e))


def krippendorff_alpha_nominal(units: Iterable[Sequence[Hashable]]) -> float:
    """Alpha for nominal labels; each unit is the list of labels it received (any length)."""
    units = [list(u) for u in units if len(u) >= 2]
    labels = sorted({v for u in units for v in u}, key=str)
    if not units or len(labels) < 1:
        return NAN
    index = {v: i for i, v in enumerate(labels)}
    o = np.zeros((len(labels), len(labels)))
    for u in units:
        c = np.bincount([index[v] for v in u], minlength=len(labels)).astype(float)
        o += (np.outer(c, c) - np.diag(c)) / (len(u) - 1)
    n_c = o.sum(axis=1)
    n = n_c.sum()
    expected = (n * n - np.sum(n_c**2)) / (n - 1)
    if expected <= 0:
        return NAN
    observed = n - np.trace(o)
    return float(1.0 - observed / expected)


def label_counts(rows: Iterable[Mapping], labels: Sequence[str] = LABELS
                 ) -> tuple[np.ndarray, list[list[str]]]:
    """Fleiss count matrix and Krippendorff units from per-annotator rows (None -> missing)."""
    by_item: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        if r.get("predicted") in labels:
            by_item[str(r["item_id"])].append(r["predicted"])
    units = [by_item[k] for k in sorted(by_item)]
    counts = np.array([[u.count(label) for label in labels] for u in units], dtype=float)
    return counts.reshape(len(units), len(labels)), units


def agreement(rows: Sequence[Mapping]) -> dict:
    counts, units = label_counts(rows)
    multi = sum(1 for u in units if len(u) >= 2)
    return {"fleiss_kappa": fleiss_kappa(counts), "krippendorff_alpha": krippendorff_alpha_nominal(units),
            "n_items": multi}


def rt_summary(values: Iterable[float | None]) -> dict:
    v = np.array([x for x in values if x is not None], dtype=float)
    if v.size == 0:
        return {"n": 0, "median_s": NAN, "q25_s": NAN, "q75_s": NAN, "mean_s": NAN}
    q25, med, q75 = np.percentile(v, [25, 50, 75])
    return {"n": int(v.size), "median_s": float(med), "q25_s": float(q25), "q75_s": float(q75),
            "mean_s": float(v.mean())}


def accuracy(rows: Sequence[Mapping]) -> dict:
    n = len(rows)
    ok = sum(1 for r in rows if r.get("correct"))
    return {"n": n, "correct": ok, "accuracy": ok / n if n else NAN}

"""Direction alignment: is "increase" one direction in the model, shared across categories?

Per category and answer-position stage, the direction vector is the mean hidden-state
difference increase − decrease over twin pairs (same source, tier and curve), so content,
speaker and magnitude cancel and only the direction of change remains. The cosine between
two categories' vectors says whether the model (or a tuned one) codes "the attribute went
up" the same way for both: after tuning on one category, transfer to another should follow
the alignment.

Every number has a control:
- a sign-flip null per pair of categories: each twin difference gets a random sign (seeded),
  which keeps its size and noise but destroys any shared direction; the 95th percentile of
  the null |cosine| is what chance alignment reaches with these pair counts;
- split-half reliability per category: the cosine between the directions from two disjoint
  halves of its sources, the ceiling a between-category cosine could reach.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence

import numpy as np

N_NULL = 200
ANSWER = "@answer"


def twin_differences(x: np.ndarray, items: Sequence[Mapping]) -> tuple[np.ndarray, list[str]]:
    """(pairs x d) increase − decrease per (source, tier, curve) twin, and each pair's source."""
    index: dict[tuple, dict[str, int]] = {}
    for i, row in enumerate(items):
        key = (row["source_id"], row.get("tier"), row.get("curve"))
        index.setdefault(key, {})[row["direction"]] = i
    keys = sorted(k for k, v in index.items() if {"increase", "decrease"} <= v.keys())
    x = np.asarray(x, np.float64)
    diffs = (
        np.stack([x[index[k]["increase"]] - x[index[k]["decrease"]] for k in keys])
        if keys
        else np.zeros((0, x.shape[1]))
    )
    return diffs, [str(k[0]) for k in keys]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan")


def _rng(stage: str, a: str, b: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(f"{stage}|{a}|{b}".encode()))


def split_half(diffs: np.ndarray, sources: Sequence[str]) -> float:
    """Cosine between the directions of two disjoint halves of the sources (alternating in
    sorted order); NaN with fewer than two sources."""
    names = sorted(set(sources))
    if len(names) < 2:
        return float("nan")
    first = {s for i, s in enumerate(names) if i % 2 == 0}
    mask = np.array([s in first for s in sources])
    return _cos(diffs[mask].mean(0), diffs[~mask].mean(0))


def alignment(
    per_category: Mapping[str, tuple[Mapping[str, np.ndarray], Sequence[Mapping]]],
) -> dict:
    """Cosines between category directions at every answer-position stage the categories
    share, with the sign-flip null and split-half reliability. `per_category` maps a category
    to (stage -> items x d features, item rows in the same order)."""
    cats = sorted(per_category)
    stages = (
        sorted(
            set.intersection(
                *[{s for s in per_category[c][0] if s.endswith(ANSWER)} for c in cats]
            ),
            key=_stage_key,
        )
        if cats
        else []
    )
    out: dict = {"categories": cats, "stages": stages, "n_pairs": {}, "rows": []}
    for stage in stages:
        diffs, sources = {}, {}
        for c in cats:
            feats, items = per_category[c]
            diffs[c], sources[c] = twin_differences(feats[stage], items)
            out["n_pairs"][c] = len(sources[c])
        direction = {c: diffs[c].mean(0) if len(diffs[c]) else None for c in cats}
        for i, a in enumerate(cats):
            for b in cats[i:]:
                if direction[a] is None or direction[b] is None:
                    continue
                if a == b:
                    out["rows"].append(
                        {
                            "stage": stage,
                            "category_a": a,
                            "category_b": b,
                            "cosine": split_half(diffs[a], sources[a]),
                            "null95": float("nan"),
                            "kind": "split-half reliability",
                        }
                    )
                    continue
                rng = _rng(stage, a, b)
                null = [
                    abs(
                        _cos(
                            (diffs[a] * rng.choice([-1.0, 1.0], (len(diffs[a]), 1))).mean(0),
                            (diffs[b] * rng.choice([-1.0, 1.0], (len(diffs[b]), 1))).mean(0),
                        )
                    )
                    for _ in range(N_NULL)
                ]
                out["rows"].append(
                    {
                        "stage": stage,
                        "category_a": a,
                        "category_b": b,
                        "cosine": _cos(direction[a], direction[b]),
                        "null95": float(np.nanpercentile(null, 95)),
                        "kind": "between categories",
                    }
                )
    return out


def _stage_key(name: str) -> tuple[str, int]:
    head = name.split("@")[0]
    family, _, index = head.rpartition(".")
    return (family, int(index)) if index.isdigit() else (head, 0)


def matrix(result: Mapping, stage: str) -> np.ndarray:
    """Category x category cosines at one stage (diagonal: split-half reliability)."""
    cats = list(result["categories"])
    m = np.full((len(cats), len(cats)), np.nan)
    for r in result["rows"]:
        if r["stage"] == stage:
            i, j = cats.index(r["category_a"]), cats.index(r["category_b"])
            m[i, j] = m[j, i] = r["cosine"]
    return m


def stage_summary(rows: Sequence[Mapping]) -> list[dict]:
    r"""Per stage, in first-seen order: how aligned the categories' directions are.

    Parameters
    ----------
    rows : sequence of mapping
        Alignment rows (``stage``, ``kind``, ``cosine``, ``null95``), as `alignment` returns
        them or ``alignment.csv`` holds them.

    Returns
    -------
    list of dict
        One per stage: ``stage``, ``pairs`` (category pairs), ``above_null`` (pairs whose
        \|cosine\| beats their null's 95th percentile), ``mean_cosine`` and ``mean_null95``
        over the pairs with finite values (NaN where none has one: no audio, no direction).
    """
    between = [r for r in rows if r.get("kind") == "between categories"]
    out = []
    for stage in dict.fromkeys(r["stage"] for r in rows):
        here = [r for r in between if r["stage"] == stage]
        cosines = [r["cosine"] for r in here if math.isfinite(r["cosine"])]
        nulls = [r["null95"] for r in here if math.isfinite(r["null95"])]
        out.append(
            {
                "stage": stage,
                "pairs": len(here),
                "above_null": sum(
                    abs(r["cosine"]) > r["null95"] for r in here if math.isfinite(r["null95"])
                ),
                "mean_cosine": float(np.mean(cosines)) if cosines else math.nan,
                "mean_null95": float(np.mean(nulls)) if nulls else math.nan,
            }
        )
    return out

"""A build's own speakers dealt into train and test again: what the gates average over, and
how far an audit figure moves with the draw of sources.

Why: a build draws a few sources and splits them once. On a small build the split moves a
figure: a difference between twins whose sign each source sets (which end of its words is
the darker) lines the training sources up with the test sources, or against them (how far:
docs/explanations/validity.md). The gates average over `gates.DEALS` deals
(`speaker_deals`); beside every failing gate the audit reports its statistic over 30 single
deals (`redrawn_values`), reported, never gated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

REDRAWS = 30

Statistics = Callable[[Sequence[Mapping]], Mapping[str, float]]


def deal(rows: Sequence[Mapping], train: Iterable[str], test: Iterable[str]) -> list[Mapping]:
    """The rows of the given sources, relabelled with the split each source is dealt to (the
    other sources' rows left out)."""
    split = {**{s: "train" for s in train}, **{s: "test" for s in test}}
    return [{**r, "split": split[r["source_id"]]} for r in rows if r["source_id"] in split]


def speaker_deals(rows: Sequence[Mapping], draws: int, rng: np.random.Generator) -> list[dict]:
    """`draws` random deals of the build's speakers, whole, into train and test, as many
    speakers to each as the build has.

    Parameters
    ----------
    rows : dataset rows, both splits (a speaker is its `speaker_id`, else its source).
    draws : deals to draw.
    rng : the deals' generator.

    Returns
    -------
    list of dict
        One source id -> "train" or "test" mapping per deal; empty when the build has no
        train or no test split.
    """
    speakers: dict[str, dict[str, set[str]]] = {}
    for r in rows:
        speaker = str(r.get("speaker_id") or r["source_id"])
        speakers.setdefault(str(r["split"]), {}).setdefault(speaker, set()).add(r["source_id"])
    if not {"train", "test"} <= set(speakers):
        return []
    n_test = len(speakers["test"])
    sources = {k: v for side in ("train", "test") for k, v in speakers[side].items()}
    out = []
    for _ in range(draws):
        order = rng.permutation(sorted(sources))
        out.append(
            {s: "test" if i < n_test else "train" for i, k in enumerate(order) for s in sources[k]}
        )
    return out


def redrawn_values(
    rows: Sequence[Mapping], statistics: Statistics, draws: int = REDRAWS, seed: int = 0
) -> list[Mapping[str, float]]:
    """`statistics` (a category's gates as the audit reads them: gate -> value) over `draws`
    random deals of the build's speakers (`speaker_deals`).

    Parameters
    ----------
    rows : one category's dataset rows, both splits.
    statistics : dealt rows -> gate name -> statistic (`classifiers.gate_values`).
    draws : deals to read.
    seed : the deals' seed.

    Returns
    -------
    list of dict
        One mapping per deal; empty when the build has no train or no test split.
    """
    out = []
    for split in speaker_deals(rows, draws, np.random.default_rng(seed)):
        dealt = [{**r, "split": split[r["source_id"]]} for r in rows]
        out.append(dict(statistics(dealt)))
    return out


def summarise(values: Sequence[float], gate: float) -> dict | None:
    """Mean, SD, range and the number of deals above `gate` (the audit's ceiling: the
    accuracy, or AUC, a leak worth detecting reaches)."""
    if not values:
        return None
    a = np.asarray(values, dtype=float)
    return {
        "draws": int(a.size),
        "mean": float(a.mean()),
        "sd": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "min": float(a.min()),
        "max": float(a.max()),
        "gate": gate,
        "above_gate": int((a > gate).sum()),
    }


def describe(summary: Mapping | None) -> str:
    """One line: 'redrawn 0.52 +- 0.03 [0.49, 0.57], above 0.60 in 0 of 30'."""
    if not summary:
        return "too few clips or sources to redraw"
    return (
        f"redrawn {summary['mean']:.2f} +- {summary['sd']:.2f} "
        f"[{summary['min']:.2f}, {summary['max']:.2f}], above {summary['gate']:.2f} in "
        f"{summary['above_gate']} of {summary['draws']}"
    )

"""The ladder's comparisons between rungs, from scored result rows.

`interference`: in the selective-attention rung (two dimensions change at once, the question
names one), congruent minus incongruent accuracy, paired by source, per ordered pair (named
dimension, distractor): which dimension a listener confuses with which. `reasoning_drops`: the
reasoning rung's cost, each reasoning prompt variant against the bare question on the same
items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vocalgrad.questions import reasoning
from vocalgrad.records import LABELS
from vocalgrad.stats import cluster_ids, group_rng, paired_comparison, weighted_ci

# -- two dimensions and reasoning


@dataclass(frozen=True)
class InterferenceCell:
    """One ordered pair's interference: accuracy on congruent items (both dimensions move the
    same way) minus accuracy on incongruent ones, over the sources that have both.

    Attributes
    ----------
    named, distractor
        The dimension the question names, and the other one changing in the clip.
    congruent, incongruent
        Accuracy (proportion correct) on each kind of item.
    effect, lo, hi
        Congruent minus incongruent (proportion), and its 95% CI clustered by source
        (`vocalgrad.stats.weighted_ci`'s rule: NaN with one source).
    ci_method
        The interval's method.
    n_congruent, n_incongruent, n_sources
        Items of each kind, and the sources that have both.
    """

    named: str
    distractor: str
    congruent: float
    incongruent: float
    effect: float
    lo: float
    hi: float
    ci_method: str
    n_congruent: int
    n_incongruent: int
    n_sources: int


@dataclass(frozen=True)
class Interference:
    """The interference matrix of one listener: a cell per ordered pair asked.

    Attributes
    ----------
    dimensions
        Every dimension named or distracting, sorted: the matrix's rows and columns.
    cells
        (named, distractor) -> `InterferenceCell`.
    """

    dimensions: tuple[str, ...]
    cells: Mapping[tuple[str, str], InterferenceCell] = field(default_factory=dict)

    def matrix(self, key: str = "effect") -> np.ndarray:
        """One field of every cell as a matrix: rows the named dimension, columns the
        distractor, in `dimensions` order; NaN where a pair was not asked."""
        index = {d: i for i, d in enumerate(self.dimensions)}
        out = np.full((len(index), len(index)), np.nan)
        for (named, distractor), cell in self.cells.items():
            out[index[named], index[distractor]] = getattr(cell, key)
        return out

    def to_dict(self) -> dict:
        """As plain data (JSON-ready): the dimensions and one record per cell."""
        return {
            "dimensions": list(self.dimensions),
            "cells": [vars(c) for c in self.cells.values()],
        }


def interference(rows: Iterable[Mapping], n_boot: int = 2000, seed: int = 0) -> Interference:
    """The interference effect of one listener, per ordered pair (named, distractor).

    Why: a listener that hears the named dimension alone answers congruent and incongruent
    items alike; one that confuses the distractor with it answers congruent items better
    (both move its way) and incongruent ones worse. Paired by source: every source carries
    both kinds of item for each pair, so the difference is not a difference of sources.

    Parameters
    ----------
    rows
        Scored result rows of one listener, prompt variant and mode (the main condition:
        rows with a ``control`` other than "none", an error, or no ``congruent`` field are
        left out), each with ``category``, ``second_category``, ``congruent``, ``source_id``
        and ``correct`` (an unparsed answer counts as wrong).
    n_boot
        Bootstrap replicates for the CI (with >= 50 sources; a jackknife t-interval below).
    seed
        Seeds the resampling, per pair.

    Returns
    -------
    Interference
        The cells, and the dimensions that index the matrix.
    """
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for r in rows:
        if r.get("control", "none") != "none" or r.get("error") or r.get("congruent") is None:
            continue
        if r.get("direction") not in LABELS:
            continue
        groups.setdefault((r["category"], r["second_category"]), []).append(r)
    cells = {}
    for pair, members in sorted(groups.items()):
        cell = _cell(pair, members, n_boot, seed)
        if cell is not None:
            cells[pair] = cell
    names = sorted({d for pair in cells for d in pair})
    return Interference(tuple(names), cells)


def _cell(
    pair: tuple[str, str], rows: Sequence[Mapping], n_boot: int, seed: int
) -> InterferenceCell | None:
    """One pair's cell over the sources with both kinds of item (None if none has both)."""
    kinds = {}
    for r in rows:
        kinds.setdefault(r["source_id"], set()).add(bool(r["congruent"]))
    paired = [r for r in rows if kinds[r["source_id"]] == {True, False}]
    if not paired:
        return None
    cid = cluster_ids(paired, "source_id")
    n_clusters = int(cid.max()) + 1
    correct = np.array([bool(r.get("correct")) for r in paired], dtype=float)
    congruent = np.array([bool(r["congruent"]) for r in paired])
    # per source: correct and count of congruent items, then of incongruent ones
    sums = np.zeros((n_clusters, 4))
    np.add.at(
        sums,
        cid,
        np.column_stack([correct * congruent, congruent, correct * ~congruent, ~congruent]),
    )

    def effect(w: np.ndarray) -> np.ndarray:
        t = w @ sums
        with np.errstate(divide="ignore", invalid="ignore"):
            return t[:, 0] / t[:, 1] - t[:, 2] / t[:, 3]

    k_c, n_c, k_i, n_i = sums.sum(axis=0)
    point = float(k_c / n_c - k_i / n_i)
    lo, hi, method = weighted_ci(
        effect,
        point,
        n_clusters,
        group_rng(seed, f"interference|{pair[0]}|{pair[1]}"),
        n_boot,
        proportion=False,
    )
    return InterferenceCell(
        named=pair[0],
        distractor=pair[1],
        congruent=float(k_c / n_c),
        incongruent=float(k_i / n_i),
        effect=point,
        lo=lo,
        hi=hi,
        ci_method=method,
        n_congruent=int(n_c),
        n_incongruent=int(n_i),
        n_sources=n_clusters,
    )


def reasoning_drops(
    rows: Iterable[Mapping], mode: str | None = None, n_boot: int = 2000, seed: int = 0
) -> dict[str, dict]:
    """The reasoning rung's cost for one listener: each reasoning variant's accuracy against
    the bare question's on the same items (`vocalgrad.stats.paired_comparison`, joined by
    item and clustered by source), and the three variants pooled (``"reasoning"``).

    Why: the clips are the same, so what a text step costs is the drop on the same items,
    not a difference between stimuli.

    Parameters
    ----------
    rows
        Result rows of one listener on one dataset, asked with the bare variant
        (`reasoning.BARE`) and reasoning variants; controls and errors are left out.
    mode
        Only rows of this mode ("choice" or "generate"); default: every mode, which must then
        be one.
    n_boot
        Bootstrap replicates (with >= 50 sources).
    seed
        Seeds the resampling.

    Returns
    -------
    dict
        variant -> `paired_comparison` of the variant (a) against the bare question (b),
        with ``drop``, ``drop_lo``, ``drop_hi``: bare minus reasoning accuracy and its CI
        (positive: the text step costs accuracy). Empty without bare or reasoning rows.

    Raises
    ------
    ValueError
        The rows hold several modes and none was chosen.
    """
    main = [
        r
        for r in rows
        if r.get("control", "none") == "none"
        and not r.get("error")
        and (mode is None or r.get("mode") == mode)
    ]
    modes = {r.get("mode") for r in main}
    if len(modes) > 1:
        raise ValueError(f"rows of several modes ({', '.join(sorted(map(str, modes)))}): pick one")
    bare = [r for r in main if r.get("variant") == reasoning.BARE]
    by_variant = {
        v: [r for r in main if r.get("variant") == v]
        for v in reasoning.NAMES
        if any(r.get("variant") == v for r in main)
    }
    if not bare or not by_variant:
        return {}
    by_variant[reasoning.RUNG] = [r for v in reasoning.NAMES for r in by_variant.get(v, [])]
    out = {}
    for variant, asked in by_variant.items():
        compared = paired_comparison(asked, bare, n_boot=n_boot, seed=seed)
        out[variant] = compared | {
            "drop": 0.0 - compared["difference"],
            "drop_lo": 0.0 - compared["difference_hi"],
            "drop_hi": 0.0 - compared["difference_lo"],
        }
    return out

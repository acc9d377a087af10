"""The report's ladder blocks for two dimensions and reasoning: the interference matrix of the
selective-attention rung (a heatmap per listener and a table), and the reasoning rung's drop
from the bare question on the same items. The ladder section (`section`) shows them; the rung
figure of the single-dimension rungs joins it there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from vocalgrad.evaluation.ladder import Interference, interference, reasoning_drops
from vocalgrad.questions import reasoning
from vocalgrad.report import figures
from vocalgrad.report.collect import is_reference, split_format
from vocalgrad.report.model import Block, Figure, Section, Table, Text
from vocalgrad.report.values import CI_RULE, few_sources, with_ci
from vocalgrad.stats import MIN_SOURCES

MAX_HEATMAPS = 6  # listeners drawn as a matrix (every one is in the table)


def _main(rows: Sequence[Mapping]) -> list[Mapping]:
    """A listener's main-condition rows of its most asked (variant, mode)."""
    main = [r for r in rows if r.get("control", "none") == "none" and not r.get("error")]
    combos = Counter((r.get("variant"), r.get("mode")) for r in main)
    if not combos:
        return []
    preferred = [c for c in (("default", "choice"), ("default", "generate")) if c in combos]
    pick = preferred[0] if preferred else combos.most_common(1)[0][0]
    return [r for r in main if (r.get("variant"), r.get("mode")) == pick]


def interference_blocks(
    by_listener: Mapping[str, Sequence[Mapping]], n_boot: int, seed: int
) -> tuple[list[Block], dict[str, int | None]]:
    """The interference matrix of every listener asked the selective-attention rung (rows
    that record whether their two dimensions move alike, ``congruent``): a heatmap per
    listener (models first, at most MAX_HEATMAPS) and one table of every cell.

    Parameters
    ----------
    by_listener
        Result rows per listener (`vocalgrad.report.collect.rows_by_listener`).
    n_boot
        Bootstrap replicates for the CIs.
    seed
        Seeds the resampling.

    Returns
    -------
    tuple
        (the blocks, none if no listener was asked; listener -> fewest sources of a cell).
    """
    matrices: dict[str, Interference] = {}
    for name, rows in by_listener.items():
        asked = [r for r in _main(rows) if r.get("congruent") is not None]
        if asked:
            found = interference(asked, n_boot=n_boot, seed=seed)
            if found.cells:
                matrices[name] = found
    if not matrices:
        return [], {}
    ordered = sorted(matrices, key=lambda n: (is_reference(n), n))
    table = Table(
        [
            "listener",
            "named",
            "distractor",
            "congruent",
            "incongruent",
            "interference [95% CI]",
            "sources",
        ],
        [],
        caption="Interference: accuracy when both dimensions move the same way minus when "
        "they move apart, over the sources that have both (paired by source). Positive: the "
        f"distractor pulls the answer its way. {CI_RULE}. References below the line.",
    )
    blocks: list[Block] = []
    fewest: dict[str, int | None] = {}
    for name in ordered:
        found = matrices[name]
        for cell in found.cells.values():
            row = [
                name,
                cell.named,
                cell.distractor,
                f"{cell.congruent:.2f}",
                f"{cell.incongruent:.2f}",
                with_ci(cell.effect, cell.lo, cell.hi),
                str(cell.n_sources),
            ]
            (table.references if is_reference(name) else table.rows).append(row)
            fewest[name] = min(fewest.get(name) or cell.n_sources, cell.n_sources)
    for name in ordered[:MAX_HEATMAPS]:
        found = matrices[name]
        fig = figures.heatmap(
            found.matrix(),
            found.dimensions,
            found.dimensions,
            f"{split_format(name)[0]}: interference",
            "congruent − incongruent accuracy",
        )
        fig.axes[0].set_ylabel("named")
        fig.axes[0].set_xlabel("distractor")
        slug = "".join(c if c.isalnum() else "-" for c in split_format(name)[0])
        blocks.append(
            Figure(
                f"interference-{slug}",
                fig,
                f"Interference matrix of {name}: rows the dimension the question names, "
                "columns the one changing with it; blank where the pair was not asked.",
                alt=f"interference heatmap of {name}",
                data=[vars(c) for c in found.cells.values()],
            )
        )
    return [Text("Interference (two dimensions, one named)", "h3"), *blocks, table], fewest


def reasoning_blocks(
    by_listener: Mapping[str, Sequence[Mapping]], n_boot: int, seed: int
) -> tuple[list[Block], dict[str, int | None]]:
    """The reasoning rung per listener asked the bare question and reasoning variants on the
    same items: each variant's accuracy and its drop from the bare question (paired by item,
    clustered by source), and the three pooled.

    Returns
    -------
    tuple
        (the blocks, none if no listener was asked; listener -> sources behind the drop).
    """
    table = Table(
        ["listener", "mode", "variant", "bare", "with the text step", "drop [95% CI]", "sources"],
        [],
        caption="Reasoning on top: the same clips asked with one text step added (answers "
        "mapped to labels, a negated question, a condition), against the bare question on the "
        "same items. Drop: bare minus reasoning accuracy (positive: the step costs). "
        f"{CI_RULE}; under {MIN_SOURCES} sources an exact sign-flip interval.",
    )
    fewest: dict[str, int | None] = {}
    for name in sorted(by_listener, key=lambda n: (is_reference(n), n)):
        rows = by_listener[name]
        for mode in sorted({str(r.get("mode")) for r in rows}):
            drops = reasoning_drops(
                [r for r in rows if r.get("mode") == mode], n_boot=n_boot, seed=seed
            )
            for variant in (*reasoning.NAMES, reasoning.RUNG):
                d = drops.get(variant)
                if d is None or not d["n"]:
                    continue
                row = [
                    name,
                    mode,
                    variant,
                    f"{d['accuracy_b']:.2f}",
                    f"{d['accuracy_a']:.2f}",
                    with_ci(d["drop"], d["drop_lo"], d["drop_hi"]),
                    str(d["n_clusters"]),
                ]
                (table.references if is_reference(name) else table.rows).append(row)
                fewest[name] = min(fewest.get(name) or d["n_clusters"], d["n_clusters"])
    if not table.rows and not table.references:
        return [], {}
    return [Text("Reasoning on top of direction", "h3"), table], fewest


def section(by_listener: Mapping[str, Sequence[Mapping]], n_boot: int, seed: int) -> Section:
    """The ladder section's two-dimension and reasoning blocks (`interference_blocks`,
    `reasoning_blocks`), or a line saying no run asked those rungs."""
    inter, few_inter = interference_blocks(by_listener, n_boot, seed)
    reason, few_reason = reasoning_blocks(by_listener, n_boot, seed)
    blocks = [*inter, *reason]
    if not blocks:
        return Section(
            "ladder",
            "Ladder",
            [Text("No run asked two dimensions at once or a reasoning variant.")],
            "no ladder rungs",
        )
    glance = ", ".join(
        part
        for part, shown in (
            (f"interference for {len(few_inter)} listener(s)", few_inter),
            (f"reasoning drop for {len(few_reason)} listener(s)", few_reason),
        )
        if shown
    )
    warnings = few_sources({**few_inter, **few_reason}, per=" per rung")
    return Section("ladder", "Ladder", blocks, glance, warnings)

"""The report's "Ladder" section: per listener, accuracy and d′ per rung with clustered CIs,
each rung's drop from the rung below paired by source (the reasoning rung's from direction on
the same items, paired by item), the ladder figure, the interference matrix of the
selective-attention rung (a heatmap per listener and a table) and the reasoning rung's drop
per variant. Every number comes from `vocalgrad.evaluation.ladder`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from vocalgrad.evaluation.ladder import (
    Interference,
    interference,
    ladder_rungs,
    ladder_scores,
    reasoning_drops,
)
from vocalgrad.questions import reasoning
from vocalgrad.report import figures
from vocalgrad.report.collect import is_human, is_reference, palette, split_format
from vocalgrad.report.model import Block, Figure, Section, Table, Text
from vocalgrad.report.values import CI_RULE, few_sources, with_ci
from vocalgrad.stats import MIN_SOURCES

TITLE = "Ladder"
MAX_HEATMAPS = 6  # listeners drawn as an interference matrix (every one is in the table)


def by_base(by_listener: Mapping[str, list[dict]]) -> dict[str, list[dict]]:
    """Every row of each listener, whatever question format it was asked in: the ladder
    follows one listener up the rungs."""
    out: dict[str, list[dict]] = {}
    for name, rows in by_listener.items():
        out.setdefault(split_format(name)[0], []).extend(rows)
    return dict(sorted(out.items(), key=lambda kv: (is_reference(kv[0]), is_human(kv[0]), kv[0])))


def ladder(by_listener: Mapping[str, list[dict]], n_boot: int, seed: int) -> Section:
    """The section: a table (listener x rung: items, sources, accuracy and d′ with CIs, the
    drop from the rung below, or for reasoning from direction on the same items), the figure,
    the interference matrix (`interference_blocks`) and the reasoning rung's drop per variant
    (`reasoning_blocks`); a note where the runs ask none of it."""
    based = by_base(by_listener)
    scored = {name: ladder_scores(rows, n_boot=n_boot, seed=seed) for name, rows in based.items()}
    scored = {name: rungs for name, rungs in scored.items() if rungs}
    asked = [r.name for r, _ in ladder_rungs() if any(r.name in _names(s) for s in scored.values())]
    inter, few_inter = interference_blocks(based, n_boot, seed)
    reason, few_reason = reasoning_blocks(based, n_boot, seed)
    if len(asked) < 2 and not inter and not reason:
        return Section(
            "ladder",
            TITLE,
            [
                Text(
                    "The runs ask fewer than two rungs of the ladder: nothing to climb. Build "
                    "one with `vocalgrad build --protocol ladder --out L` and ask it with "
                    "`vocalgrad eval L --listener X --out R`; `vocalgrad report R` shows it.",
                    "note",
                )
            ],
            "No ladder.",
        )
    blocks: list[Block] = []
    few: dict[str, int | None] = {}  # listener -> the fewest sources of a category on any rung
    glance: list[str] = []
    if len(asked) >= 2:
        blocks, few, climbed = _rung_blocks(scored, asked)
        glance.append(climbed)
    blocks += [*inter, *reason]
    glance += [
        part
        for part, shown in (
            (f"interference for {len(few_inter)} listener(s)", few_inter),
            (f"reasoning drop for {len(few_reason)} listener(s)", few_reason),
        )
        if shown
    ]
    # the headline's words for the same sources: the report shows one warning for both
    warned = few_sources(few) + few_sources({**few_inter, **few_reason}, per=" per rung")
    return Section("ladder", TITLE, blocks, "; ".join(glance) + ".", warned)


def _rung_blocks(
    scored: Mapping[str, Sequence[Mapping]], asked: Sequence[str]
) -> tuple[list[Block], dict[str, int | None], str]:
    """The rungs' table and figure, the fewest sources per listener, and the glance."""
    table = Table(
        [
            "listener",
            "rung",
            "items",
            "sources",
            "accuracy [95% CI]",
            "d′ [95% CI]",
            "drop [95% CI]",
        ],
        [],
        caption="Each listener up the rungs it was asked, in ladder order. Detection is "
        "scored as yes (something changes) against no on changing and constant clips; the "
        "other rungs as their two answers. Drop: the rung below's accuracy minus this "
        "rung's, on the sources both hold (paired by source; > 0: this rung is harder); "
        "reasoning's is from direction, on the same items (paired by item: the clips are "
        f"the same, only a text step is added). {CI_RULE}. References below the line; a "
        "reference that answers which way is not asked whether (no answer in the rung's "
        "words).",
    )
    colours = palette(scored)
    series, few = [], {}
    for name, rungs in scored.items():
        rows = []
        for entry in rungs:
            o = entry["score"]
            cells = [name, entry["rung"].replace("_", " "), str(o["n"])]
            cells.append(str(o.get("n_clusters", "–")))
            if not entry["answered"]:
                rows.append([*cells, "– (no answer in the rung's words)", "–", "–"])
                continue
            few[name] = min(few.get(name) or entry["fewest_sources"], entry["fewest_sources"])
            rows.append(
                [
                    *cells,
                    with_ci(o["accuracy"], o["accuracy_lo"], o["accuracy_hi"]),
                    with_ci(o["dprime"], o["dprime_lo"], o["dprime_hi"]),
                    _drop_cell(entry["drop"]),
                ]
            )
        if is_reference(name):
            table.references += rows
            table.reference_swatches += [colours.get(name)] * len(rows)
        else:
            table.rows += rows
            table.swatches += [colours.get(name)] * len(rows)
        series.append(
            {
                "listener": name,
                "colour": colours.get(name),
                "reference": is_reference(name),
                "values": {e["rung"]: e["score"] for e in rungs if e["answered"]},
            }
        )
    blocks: list[Block] = [
        Text(
            "The same sources asked ever more of: whether something changes (detection), "
            "which way (direction), how two held parts compare, where a held value lies "
            "(recognition), when a change happens, which of two changes is larger, which of "
            "two dimensions changing at once goes which way, whether they move together, the "
            "shape of a change, which of two changes comes first, and last the direction "
            "again behind one step of text (reasoning). A listener that hears the change "
            "climbs as far as the ideal observer; where a model falls off, the drop from the "
            "rung below says how much the new question costs on the same recordings."
        ),
        table,
        Figure(
            "ladder",
            figures.ladder(series, asked),
            "Accuracy (top) and d′ (bottom) per rung, in ladder order, with 95% CIs "
            "clustered by source; models in colour, references grey; dashed: chance.",
            "accuracy and d′ by rung",
            _ladder_data(scored),
        ),
    ]
    models = [n for n in scored if not is_reference(n)]
    glance = f"{len(asked)} rungs for {len(scored)} listener(s)"
    drops = [
        (entry["drop"]["drop"], name, entry["rung"])
        for name in models
        for entry in scored[name]
        if entry["drop"] is not None and entry["drop"]["drop"] == entry["drop"]["drop"]
    ]
    if drops:
        drop, name, rung = max(drops)
        glance += f"; the largest drop: {name} at {rung.replace('_', ' ')} ({drop:+.2f})"
    return blocks, few, glance


def _drop_cell(drop: Mapping | None) -> str:
    """A rung's drop with its CI and what it is paired over."""
    if drop is None:
        return "–"
    shown = with_ci(drop["drop"], drop["drop_lo"], drop["drop_hi"])
    if drop.get("paired") == "item":
        return shown + f" (from {drop['from']}, same items, {drop['n_clusters']} sources)"
    return shown + f" ({drop['n_clusters']} sources)"


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
        asked = _main([r for r in rows if r.get("congruent") is not None])
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


def _names(rungs: Sequence[Mapping]) -> set[str]:
    return {e["rung"] for e in rungs}


def _ladder_data(scored: Mapping[str, Sequence[Mapping]]) -> list[dict]:
    """One row per listener x rung: the figure's numbers, with the drop."""
    out = []
    for name, rungs in scored.items():
        for e in rungs:
            if not e["answered"]:
                continue
            o, drop = e["score"], e["drop"] or {}
            out.append(
                {
                    "listener": name,
                    "kind": "reference" if is_reference(name) else "model",
                    "rung": e["rung"],
                    "order": e["order"],
                    "n": o["n"],
                    "sources": o.get("n_clusters"),
                    **{k: o.get(k) for k in ("accuracy", "accuracy_lo", "accuracy_hi")},
                    **{k: o.get(k) for k in ("dprime", "dprime_lo", "dprime_hi")},
                    **{k: drop.get(k, "") for k in ("drop", "drop_lo", "drop_hi")},
                }
            )
    return out

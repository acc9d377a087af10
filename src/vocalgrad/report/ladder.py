"""The report's "Ladder" section: per listener, accuracy and d′ per rung with clustered CIs,
each rung's drop from the rung below paired by source, and the ladder figure. Every number
comes from `vocalgrad.evaluation.ladder`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from vocalgrad.evaluation.ladder import ladder_rungs, ladder_scores
from vocalgrad.report import figures
from vocalgrad.report.collect import is_human, is_reference, palette, split_format
from vocalgrad.report.model import Figure, Section, Table, Text
from vocalgrad.report.values import CI_RULE, few_sources, with_ci

TITLE = "Ladder"


def by_base(by_listener: Mapping[str, list[dict]]) -> dict[str, list[dict]]:
    """Every row of each listener, whatever question format it was asked in: the ladder
    follows one listener up the rungs."""
    out: dict[str, list[dict]] = {}
    for name, rows in by_listener.items():
        out.setdefault(split_format(name)[0], []).extend(rows)
    return dict(sorted(out.items(), key=lambda kv: (is_reference(kv[0]), is_human(kv[0]), kv[0])))


def ladder(by_listener: Mapping[str, list[dict]], n_boot: int, seed: int) -> Section:
    """The section: a table (listener x rung: items, sources, accuracy and d′ with CIs, the
    drop from the rung below), the figure, and the place of the interference matrix."""
    scored = {
        name: ladder_scores(rows, n_boot=n_boot, seed=seed)
        for name, rows in by_base(by_listener).items()
    }
    scored = {name: rungs for name, rungs in scored.items() if rungs}
    asked = [r.name for r, _ in ladder_rungs() if any(r.name in _names(s) for s in scored.values())]
    if len(asked) < 2:
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
    table = Table(
        [
            "listener",
            "rung",
            "items",
            "sources",
            "accuracy [95% CI]",
            "d′ [95% CI]",
            "drop from the rung below [95% CI]",
        ],
        [],
        caption="Each listener up the rungs it was asked, in ladder order. Detection is "
        "scored as yes (something changes) against no on changing and constant clips; the "
        "other rungs as their two answers. Drop: the rung below's accuracy minus this "
        "rung's, on the sources both hold (paired by source; > 0: this rung is harder). "
        f"{CI_RULE}. References below the line; a reference that answers which way "
        "is not asked whether (no answer in the rung's words).",
    )
    colours = palette(scored)
    series, few = [], {}  # listener -> the fewest sources of a category on any rung
    for name, rungs in scored.items():
        rows = []
        for entry in rungs:
            o, drop = entry["score"], entry["drop"]
            if not entry["answered"]:
                rows.append(
                    [
                        name,
                        entry["rung"].replace("_", " "),
                        str(o["n"]),
                        str(o.get("n_clusters", "–")),
                        "– (no answer in the rung's words)",
                        "–",
                        "–",
                    ]
                )
                continue
            few[name] = min(few.get(name) or entry["fewest_sources"], entry["fewest_sources"])
            rows.append(
                [
                    name,
                    entry["rung"].replace("_", " "),
                    str(o["n"]),
                    str(o.get("n_clusters", "–")),
                    with_ci(o["accuracy"], o["accuracy_lo"], o["accuracy_hi"]),
                    with_ci(o["dprime"], o["dprime_lo"], o["dprime_hi"]),
                    "–"
                    if drop is None
                    else with_ci(drop["drop"], drop["drop_lo"], drop["drop_hi"])
                    + f" ({drop['n_clusters']} sources)",
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
    blocks: list = [
        Text(
            "The same sources asked ever more of: whether something changes (detection), "
            "which way (direction), how two held parts compare, where a held value lies "
            "(recognition), when a change happens, which of two changes is larger, and the "
            "shape of a change. A listener that hears the change climbs as far as the "
            "ideal observer; where a model falls off, the drop from the rung below says how "
            "much the new question costs on the same recordings."
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
    # -- the interference matrix of the selective-attention rung goes here: blocks built
    # from `vocalgrad.evaluation.ladder.interference(rows)` per listener --
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
    # the headline's words for the same sources: the report shows one warning for both
    warned = few_sources(few)
    return Section("ladder", TITLE, blocks, glance + ".", warned)


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

"""The headline: a leaderboard of the models (references set apart, never ranked), one figure
comparing the models, and per model its accuracy and d′ per dimension in each question format
against chance and the ideal observer."""

from __future__ import annotations

import math
from collections.abc import Mapping

from vocalgrad import formats
from vocalgrad.report import figures
from vocalgrad.report.collect import is_human, kind_of, split_format, with_format
from vocalgrad.report.model import Figure, Section, Table, Text
from vocalgrad.report.values import CI_RULE, few_sources, fewest_sources, fmt, with_ci

IDEAL = "baseline:ideal"
LEADERBOARD = [
    "listener",
    "format",
    "accuracy [95% CI]",
    "d′ [95% CI]",
    "criterion c [95% CI]",
    "unparsed",
    "items",
    "sources",
]


def overall(summary: list[dict]) -> dict:
    return next(g for g in summary if g["group"] == "overall")


def _ci(g: Mapping, key: str) -> str:
    return with_ci(g.get(key), g.get(key + "_lo"), g.get(key + "_hi"))


def _by_category(summary: list[dict]) -> dict[str, dict]:
    return {g["group"]: g for g in summary if g["group"] != "overall"}


def _order(summaries: Mapping[str, list[dict]], names) -> list[str]:
    def key(n: str) -> tuple:
        return is_human(n), -_finite(overall(summaries[n])["accuracy"]), n

    return sorted(names, key=key)


def _finite(v: float) -> float:
    return v if math.isfinite(v) else -1.0


CHANCE = {"accuracy": 0.5, "dprime": 0.0}  # what a listener that does not hear scores


def _best(groups: Mapping[str, Mapping], key: str) -> set[str]:
    """The models to star as best on `key`: the highest finite value (ties share the mark),
    and only among several models and where its 95% CI lies above chance.

    Parameters
    ----------
    groups : mapping
        Model name -> its score row (``key``, ``key_lo``: accuracy 0-1 or d′).
    key : str
        "accuracy" or "dprime".

    Returns
    -------
    set of str
        Empty with fewer than two models or when the top one's CI reaches chance: a star on
        a lone model, or on one no better than guessing, would mark nothing.
    """
    finite = {n: g[key] for n, g in groups.items() if math.isfinite(g.get(key, math.nan))}
    if len(finite) < 2:
        return set()
    top = max(finite.values())
    best = {n for n, v in finite.items() if v == top}
    lows = [groups[n].get(f"{key}_lo") for n in best]
    if any(lo is None or not math.isfinite(lo) or lo <= CHANCE[key] for lo in lows):
        return set()
    return best


def leaderboard(summaries: Mapping[str, list[dict]], colours: Mapping[str, str]) -> Table:
    """One row per model (and human) in each question format, sortable; references below."""
    ranked = _order(summaries, [n for n in summaries if kind_of(n) != "reference"])
    models = [n for n in ranked if kind_of(n) == "model"]
    marks = {
        2: _best({n: overall(summaries[n]) for n in models}, "accuracy"),
        3: _best({n: overall(summaries[n]) for n in models}, "dprime"),
    }

    def row(name: str) -> list[str]:
        o = overall(summaries[name])
        base, form = split_format(name)
        return [
            base,
            form,
            _ci(o, "accuracy"),
            _ci(o, "dprime"),
            _ci(o, "criterion"),
            fmt(o["unparsed_rate"]),
            str(o["n"]),
            str(o.get("n_clusters", "–")),
        ]

    refs = sorted(n for n in summaries if kind_of(n) == "reference")
    return Table(
        LEADERBOARD,
        [row(n) for n in ranked],
        {(i, j) for i, n in enumerate(ranked) for j, best in marks.items() if n in best},
        [colours.get(n) for n in ranked],
        caption='Overall accuracy and d′ ("increase" as the signal), criterion c (< 0 '
        'leans "increase"), unparsed share; items: changing clips scored, '
        f"sources: the recordings they come from. {CI_RULE}. ★ best of several models, where "
        "its CI lies above chance; click "
        "a column header to sort. References, below the line, are never ranked.",
        references=[row(n) for n in refs],
        reference_swatches=[colours.get(n) for n in refs],
        sortable=True,
    )


def _per_category_table(summaries, colours, cats, untestable) -> Table:
    """Every listener x category (the full numbers), folded away: the figures show them."""
    columns = [*cats, "overall"]
    ranked = _order(summaries, [n for n in summaries if kind_of(n) != "reference"])
    refs = sorted(n for n in summaries if kind_of(n) == "reference")
    groups = {n: {g["group"]: g for g in summaries[n]} for n in summaries}

    def row(n: str) -> list[str]:
        o = groups[n]["overall"]
        cells = [
            "cannot be tested"
            if c in untestable.get(n, {})
            else _ci(groups[n][c], "accuracy")
            if c in groups[n]
            else "–"
            for c in columns
        ]
        return [n, kind_of(n), str(o["n"]), str(o.get("n_clusters", "–")), *cells]

    marked = set()
    for j, c in enumerate(columns):
        best = _best(
            {n: groups[n][c] for n in ranked if kind_of(n) == "model" and c in groups[n]},
            "accuracy",
        )
        marked |= {(i, j + 4) for i, n in enumerate(ranked) if n in best}
    return Table(
        ["listener", "kind", "items", "sources", *[c.replace("_", " ") for c in columns]],
        [row(n) for n in ranked],
        marked,
        [colours.get(n) for n in ranked],
        caption=f"Accuracy [95% CI] per dimension. {CI_RULE}. ★ best of several models in "
        "column, where its CI lies above chance; "
        "references below the line (chance is 0.50).",
        references=[row(n) for n in refs],
        reference_swatches=[colours.get(n) for n in refs],
        folded=f"Accuracy per dimension, every listener ({len(summaries)})",
    )


def _model_section(
    base: str, forms: Mapping[str, str], summaries, references, cats, untestable, colour: str | None
) -> list:
    """A model's accuracy and d′ per dimension, its question formats side by side, against
    chance and the ideal observer asked in the same format."""
    shown = sorted(forms, key=formats.rank)
    groups = {f: _by_category(summaries[forms[f]]) for f in shown}
    header = ["dimension"]
    for f in shown:
        header += [f"{f}: accuracy", f"{f}: d′"]
    rows = []
    for cat in [*cats, "overall"]:
        row = [cat.replace("_", " ")]
        for f in shown:
            g = overall(summaries[forms[f]]) if cat == "overall" else groups[f].get(cat)
            if cat in untestable.get(forms[f], {}):
                row += ["cannot be tested", "–"]
            else:
                row += ["–", "–"] if g is None else [_ci(g, "accuracy"), _ci(g, "dprime")]
        rows.append(row)
    series = [
        {
            "label": f,
            "colour": colour,
            "marker": formats.marker(f),
            "values": groups[f],
        }
        for f in shown
    ]
    asked = {f: with_format(IDEAL, f) for f in shown}
    ideal = [
        {
            "label": f"ideal observer ({f})",
            "name": IDEAL,
            "at": f,
            "values": _by_category(references[name]),
        }
        for f, name in asked.items()
        if name in references
    ]
    used = sorted({c for g in groups.values() for c in g})
    markers = ", ".join(f"{formats.symbol(f)} {f}" for f in shown)
    stem = "model-" + "".join(ch if ch.isalnum() else "-" for ch in base).strip("-")
    blocks: list = [
        Text(base, "h3"),
        Table(
            header,
            rows,
            caption=f"{base}: accuracy and d′ [95% CI] per dimension "
            f"in each question format asked. {CI_RULE}.",
        ),
    ]
    if used:
        blocks.append(
            Figure(
                stem,
                figures.dimensions_figure(
                    series, ideal, used, f"{base}: per dimension and question format"
                ),
                f"{base}: accuracy (top) and d′ (bottom) per dimension"
                + (f", one marker per question format ({markers})" if len(shown) > 1 else "")
                + "; bars 95% CIs clustered by source; black ticks: the ideal observer asked in "
                "the same format; dashed: chance.",
                f"accuracy and d′ per dimension for {base}",
                figures.dimensions_data(series, ideal, used),
            )
        )
    return blocks


def _comparison(bases: Mapping[str, Mapping[str, str]], summaries, references, colours) -> Figure:
    """The models side by side (each in its first-listed format where asked, the default
    format first), references (in the default format) as lines."""
    series = []
    for base, forms in bases.items():
        form = min(forms, key=formats.rank)
        series.append(
            {
                "label": with_format(base, form),
                "colour": colours.get(forms[form]),
                "values": _by_category(summaries[forms[form]]),
            }
        )
    refs = [
        {"label": n, "name": n, "values": _by_category(references[n])}
        for n in sorted(references)
        if split_format(n)[1] == formats.DEFAULT
    ]
    used = sorted({c for s in series for c in s["values"]})
    return Figure(
        "models",
        figures.dimensions_figure(series, refs, used, "Models compared"),
        f"The models per dimension ({formats.DEFAULT} format where asked): accuracy (top) and d′ "
        "(bottom) with 95% CIs clustered by source. Grey, the references: grey band, the "
        "random baseline's 95% CI; black line, the ideal observer; dashed, chance.",
        "models compared per dimension",
        figures.dimensions_data(series, refs, used),
    )


def headline(
    summaries: Mapping[str, list[dict]],
    colours: Mapping[str, str],
    note: str,
    untestable: Mapping[str, Mapping[str, str]] | None = None,
) -> Section:
    """The leaderboard, a figure comparing the models, and a headline per model. A category
    a listener could not be tested on (`untestable`: listener -> category -> why) says so in
    its cell, rather than a dash that reads as missing."""
    untestable = untestable or {}
    cats = sorted(
        {g["category"] for s in summaries.values() for g in s if g["group"] != "overall"}
        | {c for n in summaries for c in untestable.get(n, {})}
    )
    references = {n: s for n, s in summaries.items() if kind_of(n) == "reference"}
    models = [n for n in _order(summaries, summaries) if kind_of(n) == "model"]
    bases: dict[str, dict[str, str]] = {}
    for n in models:
        base, form = split_format(n)
        bases.setdefault(base, {})[form] = n
    blocks: list = []
    if summaries:
        blocks.append(leaderboard(summaries, colours))
    if len(bases) > 1:
        blocks.append(_comparison(bases, summaries, references, colours))
    for base, forms in bases.items():
        colour = colours.get(next(iter(forms.values())))
        blocks += _model_section(base, forms, summaries, references, cats, untestable, colour)
    if summaries:
        blocks.append(_per_category_table(summaries, colours, cats, untestable))
    reasons = sorted({why for n in summaries for why in untestable.get(n, {}).values()})
    note = " ".join([note.strip(), *(f"{why[0].upper()}{why[1:]}." for why in reasons)])
    if note.strip():
        blocks.append(Text(note.strip(), "note"))
    warned = few_sources({n: fewest_sources(s) for n, s in summaries.items()})
    return Section("headline", "Headline", blocks, _glance(summaries, models), warned)


def _glance(summaries: Mapping[str, list[dict]], models: list[str]) -> str:
    # the published question ranks models where it was asked: another format's entry (a
    # ladder rung on a few sources, say) is in its own section, not the headline's lead
    default = [n for n in models if split_format(n)[1] == formats.DEFAULT]
    ranked = default or models or _order(summaries, [n for n in summaries if is_human(n)])
    if not ranked:
        return (
            f"No model evaluated: {len(summaries)} reference(s) only."
            if summaries
            else "No scored rows."
        )
    top = overall(summaries[ranked[0]])
    who = "model" if models else "listener"
    if ranked[0] in _best({n: overall(summaries[n]) for n in ranked}, "accuracy"):
        lead = f"Best {who}"
    else:  # one entry, or the top one's CI reaches chance: nothing is shown best
        lead = f"One {who}" if len(ranked) == 1 else "Highest accuracy"
    text = (
        f"{lead}: {ranked[0]} at {fmt(top['accuracy'])} "
        f"accuracy, d′ {fmt(top['dprime'])} ({len(models)} model entr"
        f"{'y' if len(models) == 1 else 'ies'}"
    )
    ideal = summaries.get(IDEAL)
    if ideal:
        text += f"; the ideal observer {fmt(overall(ideal)['accuracy'])}"
    return text + ")."

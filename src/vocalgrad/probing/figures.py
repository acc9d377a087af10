"""Probe curves, the one place that draws them: `vocalgrad probe` saves one PNG per category
with it and the report embeds the same figures.

A figure is one category (one dimension): the verdicts are per category, and an average over
categories would hide the contrast they are about. Rows are in the long format of the report's
`layers.csv` (category, stage family, layer index, probe, balanced accuracy and its CI);
`long_rows` turns the pipeline's `curves.csv` and `lens.csv` rows into it. matplotlib's object
API only: no pyplot, no global backend switch.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from matplotlib.figure import Figure

PROBE_STYLES = {  # probe -> (colour, line style, label)
    "linear": ("#1f77b4", "-", "linear probe"),
    "mlp": ("#ff7f0e", "-", "MLP probe"),
    "lens": ("#2ca02c", "-.", "lens readout"),
    "shuffled": ("#7f7f7f", "--", "control: shuffled labels"),
    "random_weights": ("#bdbdbd", ":", "control: random weights"),
    "dsp": ("#000000", "--", "DSP features (no model)"),
}
PIPELINE_PROBES = {  # curves.csv kind -> (probe in the long format, column prefix)
    "model": (("linear", "linear"), ("mlp", "mlp"), ("shuffled", "linear_control")),
    "random": (("random_weights", "linear"),),
    "dsp": (("dsp", "linear"),),
}
LENS_FAMILY = "lens readout"  # lens layers of an older lens.csv, which names no stage
PROBE_COLUMNS = 3  # panels per row: ~330 px each at the report's 1064 px text width


def split_stage(name: str) -> tuple[str, int]:
    """ "encoder.3" -> ("encoder", 3); "lm.12@audio" -> ("lm@audio", 12); "projector" -> (.., 0)."""
    m = re.match(r"^(.*?)\.(\d+)(@.*)?$", name)
    return (m.group(1) + (m.group(3) or ""), int(m.group(2))) if m else (name, 0)


def long_rows(curves: Iterable[Mapping], lens: Iterable[Mapping] = ()) -> list[dict]:
    """The pipeline's stage rows (curves.csv) and lens rows (lens.csv) in the long format.

    A random-weights stage ("random:encoder.3") joins its model stage's family as a control;
    the DSP reference is one row; a lens layer joins the stage lens.csv names for it. Values
    are passed through as given (numbers from the pipeline, strings from a CSV file).

    Parameters
    ----------
    curves : iterable of mappings
        Rows with category, stage, kind and ``{linear,mlp,linear_control}_{ba,lo,hi}``.
    lens : iterable of mappings
        Rows with category, layer, stage and ba, ba_lo, ba_hi.

    Returns
    -------
    list of dict
        category, stage (the family), layer_index, probe, balanced_accuracy, ci_lo, ci_hi,
        and row (where it came from: ``curves.csv:N`` or ``lens.csv:N``).
    """
    out: list[dict] = []
    for i, r in enumerate(curves):
        kind = r.get("kind") or "model"
        stage, layer = (
            ("dsp", 0)
            if kind == "dsp"
            else split_stage(str(r.get("stage", "")).removeprefix("random:"))
        )
        for probe, col in PIPELINE_PROBES.get(kind, ((kind, "linear"),)):
            out.append(
                {
                    "category": r.get("category"),
                    "stage": stage,
                    "layer_index": layer,
                    "probe": probe,
                    "balanced_accuracy": r.get(f"{col}_ba"),
                    "ci_lo": r.get(f"{col}_lo"),
                    "ci_hi": r.get(f"{col}_hi"),
                    "row": f"curves.csv:{i + 2}",
                }
            )
    for i, r in enumerate(lens):
        stage, layer = split_stage(r["stage"]) if r.get("stage") else (LENS_FAMILY, r.get("layer"))
        out.append(
            {
                "category": r.get("category"),
                "stage": stage,
                "layer_index": layer,
                "probe": "lens",
                "balanced_accuracy": r.get("ba"),
                "ci_lo": r.get("ba_lo"),
                "ci_hi": r.get("ba_hi"),
                "row": f"lens.csv:{i + 2}",
            }
        )
    return out


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def _mean(values: Sequence[float]) -> float:
    """The mean of the finite values; NaN (without numpy's warning) when there are none."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _family_title(family: str) -> str:
    """ "lm@answer" -> "lm (answer position)": the panel title a reader can parse."""
    name, _, where = family.partition("@")
    return f"{name} ({where} position{'s' if where == 'audio' else ''})" if where else name


def curve_figure(layers: Sequence[Mapping], title: str) -> Figure:
    """One category's probe curves: one panel per stage family (e.g. encoder, decoder at the
    answer position) in a grid, balanced accuracy by layer for each probe with its 95% CI band.

    Controls of a family (shuffled labels, random weights) share its panel; the model-free DSP
    reference is a line on every panel. Rows without a number draw nothing, and a family with
    none is left out, so no panel is empty; the legend is drawn once, below the grid.

    Parameters
    ----------
    layers : sequence of mappings
        Long-format rows (see `long_rows`) of one category; balanced accuracies in 0-1.
    title : str
        The figure's title, e.g. "whisper:tiny.en · volume: not encoded".

    Returns
    -------
    matplotlib.figure.Figure
        Without axes when no row has a number.

    Raises
    ------
    ValueError
        When the rows hold more than one category: curves are never averaged over categories.
    """
    cats = {r["category"] for r in layers}
    if len(cats) > 1:
        raise ValueError(f"probe curves are drawn per category, got {sorted(cats)}")
    measured = [
        {
            **r,
            "layer_index": int(_number(r["layer_index"])),
            **{k: _number(r[k]) for k in ("balanced_accuracy", "ci_lo", "ci_hi")},
        }
        for r in layers
        if all(math.isfinite(_number(r[k])) for k in ("balanced_accuracy", "layer_index"))
    ]
    dsp = [r["balanced_accuracy"] for r in measured if r["probe"] == "dsp"]
    families: dict[str, list[Mapping]] = {}
    for r in measured:
        if r["probe"] != "dsp":
            families.setdefault(r["stage"], []).append(r)
    if not families:
        return Figure()
    n = len(families)
    ncols = 2 if n == 4 else min(PROBE_COLUMNS, n)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(4.3 * ncols, 3.2 * nrows + 1.1))
    grid = fig.add_gridspec(nrows, ncols)
    legend: dict[str, object] = {}
    for k, (family, rows) in enumerate(families.items()):
        ax = fig.add_subplot(grid[k // ncols, k % ncols])
        ticks: set[int] = set()
        probes = [
            p
            for p in dict.fromkeys([*PROBE_STYLES, *(r["probe"] for r in rows)])
            if any(r["probe"] == p for r in rows)
        ]
        for j, probe in enumerate(probes):
            pr = [r for r in rows if r["probe"] == probe]
            colour, style, label = PROBE_STYLES.get(probe, ("#9467bd", "-", probe))
            idx = sorted({int(r["layer_index"]) for r in pr})
            ticks |= set(idx)
            acc, lo, hi = (  # one row per layer; repeated rows (seeds, say) are averaged
                np.array([_mean([r[key] for r in pr if r["layer_index"] == i]) for i in idx])
                for key in ("balanced_accuracy", "ci_lo", "ci_hi")
            )
            if len(idx) == 1:  # a one-layer stage (input features, projector): points with CIs
                dodge = 0.12 * (j - (len(probes) - 1) / 2)
                err = np.nan_to_num([acc - lo, hi - acc]).clip(0)
                legend.setdefault(
                    label,
                    ax.errorbar(
                        np.add(idx, dodge), acc, yerr=err, color=colour, fmt="o", ms=5, capsize=3
                    ),
                )
            else:
                (line,) = ax.plot(idx, acc, color=colour, ls=style, marker="o", ms=3)
                ax.fill_between(idx, lo, hi, color=colour, alpha=0.12, lw=0)
                legend[label] = line  # a line shows the style better than a point
        if dsp:
            legend.setdefault(
                PROBE_STYLES["dsp"][2],
                ax.axhline(
                    float(np.mean(dsp)),
                    color=PROBE_STYLES["dsp"][0],
                    ls=PROBE_STYLES["dsp"][1],
                    lw=1.2,
                ),
            )
        ax.axhline(0.5, color="grey", lw=0.8)
        if len(ticks) == 1:
            ax.set_xticks(sorted(ticks))
            ax.set_xlim(min(ticks) - 1, max(ticks) + 1)
        ax.set_ylim(0.3, 1.02)
        ax.set_title(
            f"{_family_title(family)}: {len(ticks)} layer{'s' if len(ticks) > 1 else ''}",
            fontsize=10,
        )
        ax.set_xlabel("layer index")
        if k % ncols == 0:
            ax.set_ylabel("balanced accuracy")
        ax.grid(alpha=0.25)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0.8 / fig.get_figheight(), 1, 1))
    fig.legend(
        list(legend.values()),
        list(legend),
        loc="lower center",
        frameon=False,
        fontsize=9,
        ncol=min(len(legend), 4),
        title="grey line: chance (0.5)",
        title_fontsize=8,
    )
    return fig


def by_category(layers: Iterable[Mapping]) -> dict[str, list[Mapping]]:
    """Long-format rows grouped by category, categories in sorted order."""
    grouped: dict[str, list[Mapping]] = {}
    for r in sorted(layers, key=lambda r: str(r["category"])):
        grouped.setdefault(str(r["category"]), []).append(r)
    return grouped

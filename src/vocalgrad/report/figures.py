"""Report figures: matplotlib's object API (no pyplot, no global backend switch, no display),
labelled axes with units, one colour per model; references (chance, bias, shortcut, one-end and
ideal observers) as grey lines and bands. Each figure exports to PNG, SVG and PDF."""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_pdf import FigureCanvasPdf
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from vocalgrad import dimensions, formats
from vocalgrad.evaluation.psychometric import BELOW, OK, PsychometricFit
from vocalgrad.probing.figures import by_category, curve_figure
from vocalgrad.report.collect import split_format

DPI = 100


def marker_of(listener: str) -> str:
    """A listener's marker: a model keeps its colour in every question format, and its
    format's marker (`QuestionFormat.marker`) tells the formats apart."""
    return formats.marker(split_format(listener)[1])


CANVASES = {"png": FigureCanvasAgg, "svg": FigureCanvasSVG, "pdf": FigureCanvasPdf}
NO_DATES = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}


def export(fig: Figure, fmt: str) -> bytes:
    """The figure as PNG, SVG or PDF bytes; no creation date, so the same data gives the same
    files."""
    CANVASES[fmt](fig)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=DPI, bbox_inches="tight", metadata=NO_DATES[fmt])
    return buf.getvalue()


def _brief(parameter: str) -> str:
    """The parameter name without its parenthesised detail, to fit under a panel."""
    return parameter.split(" (")[0]


def _short(category: str) -> str:
    return category.replace("_", " ")


def bias(entries: Sequence[Mapping], colours: Mapping[str, str]) -> Figure:
    """Left: how often each listener says "increase". Right: d' against criterion c."""
    fig = Figure(figsize=(10, 3.8))
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.3]})
    names = [e["listener"] for e in entries]
    rates = [e["increase_rate"] for e in entries]
    left.barh(range(len(names)), rates, color=[colours.get(n) for n in names])
    left.axvline(0.5, color="black", ls="--", lw=1, label="unbiased (0.5)")
    left.set_yticks(range(len(names)), names, fontsize=8)
    left.invert_yaxis()
    left.set_xlim(0, 1)
    left.set_xlabel('share of answers that are "increase"')
    left.set_title("Response bias")
    left.legend(fontsize=8, loc="lower right")
    for e in entries:
        c = colours.get(e["listener"])
        pts = [
            (d, k) for d, k in e.get("per_category", []) if math.isfinite(d) and math.isfinite(k)
        ]
        if pts:
            d, k = zip(*pts, strict=True)
            right.scatter(k, d, s=14, color=c, alpha=0.35, lw=0, marker=marker_of(e["listener"]))
        if math.isfinite(e["dprime"]) and math.isfinite(e["criterion"]):
            right.scatter(
                [e["criterion"]],
                [e["dprime"]],
                s=70,
                color=c,
                edgecolor="white",
                marker=marker_of(e["listener"]),
                label=e["listener"],
                zorder=3,
            )
    right.axhline(0, color="grey", lw=0.8)
    right.axvline(0, color="grey", lw=0.8)
    right.set_xlabel('criterion c (< 0: leans "increase", > 0: leans "decrease")')
    right.set_ylabel("sensitivity d′ (0 = chance)")
    right.set_title("Sensitivity vs bias (large: overall, small: per dimension)")
    right.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig


def psychometric(
    fits: Mapping[str, Sequence[PsychometricFit]],
    colours: Mapping[str, str],
    references: frozenset[str] = frozenset(),
) -> Figure:
    """One panel per category: observed accuracy per magnitude, fitted curve, 75% threshold.
    A reference listener (`references`) is only its fitted curve, grey and dashed: one that
    never leaves chance draws nothing (the table says so)."""
    cats = list(fits)
    ncols = min(3, len(cats))
    nrows = math.ceil(len(cats) / ncols)
    fig = Figure(figsize=(3.6 * ncols, 3.0 * nrows + 0.8))  # 3 panels fit the page unscaled
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    handles: dict[str, object] = {}
    for ax, cat in zip(axes, cats, strict=False):
        spec = dimensions.get(cat).SPEC
        lo, hi = spec.psychometric_range
        for f in fits[cat]:
            lo, hi = min(lo, f.tested[0]), max(hi, f.tested[1])
        grid = np.geomspace(lo, hi, 200)
        k = len(fits[cat])
        for i, f in enumerate(fits[cat]):
            c = colours.get(f.listener)
            if f.listener in references:  # a reference is its fitted curve, if it has one
                if f.status in (OK, BELOW):
                    (h,) = ax.plot(grid, f.predict(grid), color=c, lw=1.3, ls="--")
                    handles.setdefault(f"{f.listener} (reference)", h)
                continue
            dodge = math.exp(0.03 * (i - (k - 1) / 2))  # listeners side by side at shared levels
            m = [lv.magnitude * dodge for lv in f.levels]
            acc = np.array([lv.accuracy for lv in f.levels])
            # clipped at 0: a Wilson bound of 1 computes as 1 - 1e-16 under an estimate of 1
            err = np.clip(
                [acc - [lv.lo for lv in f.levels], [lv.hi for lv in f.levels] - acc], 0, None
            )
            h = ax.errorbar(
                m, acc, yerr=err, fmt=marker_of(f.listener), ms=4, capsize=2, color=c, alpha=0.8
            )
            handles.setdefault(f.listener, h)
            if f.status in (OK, BELOW):  # no curve for a listener that never left chance
                ax.plot(grid, f.predict(grid), color=c, lw=1.5)
            if f.status == OK and f.threshold:
                ax.plot([f.threshold, f.threshold], [0.3, 0.75], color=c, ls=":", lw=1.2)
                ax.plot([f.threshold], [0.75], marker="v", color=c, ms=7)
        ax.axhline(0.5, color="grey", ls="--", lw=0.8)
        ax.axhline(0.75, color="grey", ls=":", lw=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        if fits[cat] and fits[cat][0].polarity < 0:
            ax.invert_xaxis()  # larger change to the right, whichever way the parameter runs
        ax.set_ylim(0.3, 1.02)
        ax.set_title(_short(cat), fontsize=10)
        ax.set_xlabel(
            textwrap.fill(f"{_brief(spec.parameter)} ({spec.unit}) → larger change", 42),
            fontsize=8.5,
        )
        ax.set_ylabel("P(correct)")
        ax.grid(alpha=0.25)
    for ax in axes[len(cats) :]:
        ax.set_visible(False)
    legend_rows = math.ceil(len(handles) / 3)
    fig.set_figheight(fig.get_figheight() + 0.22 * legend_rows)
    fig.tight_layout(rect=(0, (0.45 + 0.22 * legend_rows) / fig.get_figheight(), 1, 1))
    fig.legend(
        list(handles.values()),
        [f"{n}" for n in handles],
        loc="lower center",
        ncol=min(len(handles), 3),
        frameon=False,
        fontsize=9,
        title="listener (▼ 75% threshold; dashed: chance, dotted: 75%)",
        title_fontsize=9,
    )
    return fig


def probing(
    layers: Sequence[Mapping], title: str, verdicts: Mapping[str, str] | None = None
) -> list[tuple[str, Figure]]:
    """The probe curves per category (`vocalgrad.probing.figures.curve_figure`, which also
    draws the probe run's own PNGs), skipping categories with no number.

    Parameters
    ----------
    layers : sequence of mappings
        Long-format probe rows of one probe run, every category.
    title : str
        The run's name (its listener), put before each category in the figure titles.
    verdicts : mapping, optional
        category -> the probe's verdict, shown in the category's title.

    Returns
    -------
    list of (str, Figure)
        (category, figure) in category order.
    """
    drawn = []
    for category, rows in by_category(layers).items():
        verdict = (verdicts or {}).get(category)
        fig = curve_figure(
            rows, f"{title} · {_short(category)}" + (f": {verdict}" if verdict else "")
        )
        if fig.axes:
            drawn.append((category, fig))
    return drawn


def heatmap(
    matrix: np.ndarray,
    rows: Sequence[str],
    columns: Sequence[str],
    title: str,
    colour_label: str,
    limits: tuple[float, float] = (-1.0, 1.0),
    fmt: str = "{:.2f}",
) -> Figure:
    """A labelled matrix with its values written in the cells (NaN cells left blank): the
    direction-alignment cosines and the tuning generalisation map share it."""
    fig = Figure(figsize=(1.2 + 0.62 * len(columns), 1.0 + 0.5 * len(rows)))
    ax = fig.add_subplot()
    image = ax.imshow(
        np.ma.masked_invalid(matrix),
        cmap="RdBu_r" if limits[0] < 0 else "viridis",
        vmin=limits[0],
        vmax=limits[1],
        aspect="auto",
    )
    ax.set_xticks(range(len(columns)), [_short(c) for c in columns], rotation=35, ha="right")
    ax.set_yticks(range(len(rows)), [_short(r) for r in rows])
    for i in range(len(rows)):
        for j in range(len(columns)):
            if np.isfinite(matrix[i, j]):
                ax.text(j, i, fmt.format(matrix[i, j]), ha="center", va="center", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=colour_label, fraction=0.05)
    return fig


RANDOM = "baseline:random"
REFERENCE_STYLES = {  # reference listener -> (colour, line style, line width, legend label)
    "baseline:ideal": ("#212121", "-", 2.0, "ideal observer"),
    "baseline:shortcut": ("#795548", "--", 1.4, "shortcut listener"),
    "baseline:one-end": ("#616161", ":", 1.6, "one-end observer"),
    "baseline:always-increase": ("#9e9e9e", "-.", 1.0, 'always "increase"'),
    "baseline:always-decrease": ("#9e9e9e", (0, (5, 2, 1, 2, 1, 2)), 1.0, 'always "decrease"'),
}
METRICS = (("accuracy", "accuracy (proportion correct)", 0.5), ("dprime", "sensitivity d′", 0.0))
DPRIME_SPAN = (-1.5, 4.5)  # a perfect listener's d' is clipped here, and says so


def _metric(group: Mapping | None, key: str) -> tuple[float, float, float]:
    if group is None:
        return (math.nan,) * 3
    return tuple(float(group.get(k, math.nan)) for k in (key, key + "_lo", key + "_hi"))


def _reference_style(name: str) -> tuple[str, object, float, str]:
    return REFERENCE_STYLES.get(name, ("#757575", ":", 1.2, name))


def dimensions_figure(
    series: Sequence[Mapping], references: Sequence[Mapping], categories: Sequence[str], title: str
) -> Figure:
    """Accuracy (top) and d′ (bottom) per dimension: a point with its 95% CI per series (a
    model, or one model in one question format), side by side within each dimension.
    References are grey: a line across the dimension's slot, or (`at`: a series' label) a tick
    at that series' point, e.g. the ideal observer asked in the same format; the random
    baseline is its CI as a band; chance a dashed line. Each item of `series` and
    `references`: {"label", "values": {category: a `summarise` group}}, series with "colour",
    references with "name" (the listener id) and optionally "at"."""
    fig = Figure(figsize=(10.0, 6.4))
    top, bottom = fig.subplots(2, 1, sharex=True)
    n = max(len(series), 1)
    width = 0.8 / n
    slot = {s["label"]: i for i, s in enumerate(series)}

    def x(i: int, j: int) -> float:
        return j - 0.4 + width * (i + 0.5)

    clipped = False
    for ax, (key, label, chance) in zip((top, bottom), METRICS, strict=True):
        for ref in references:
            colour, style, lw, name = _reference_style(ref["name"])
            for j, cat in enumerate(categories):
                v, lo, hi = _metric(ref["values"].get(cat), key)
                if key == "dprime" and math.isfinite(v):
                    clipped |= not DPRIME_SPAN[0] <= v <= DPRIME_SPAN[1]
                    v = float(np.clip(v, *DPRIME_SPAN))
                if ref["name"] == RANDOM:
                    if math.isfinite(lo) and math.isfinite(hi):
                        ax.fill_between(
                            [j - 0.45, j + 0.45],
                            lo,
                            hi,
                            color="#bdbdbd",
                            alpha=0.45,
                            lw=0,
                            label="random baseline: 95% CI",
                        )
                elif not math.isfinite(v):
                    continue
                elif ref.get("at") in slot:  # a tick as wide as the series' point slot
                    mid = x(slot[ref["at"]], j)
                    ax.hlines(
                        v,
                        mid - 0.4 * width,
                        mid + 0.4 * width,
                        colors=colour,
                        lw=lw + 0.6,
                        label=name,
                    )
                else:
                    ax.hlines(
                        v, j - 0.45, j + 0.45, colors=colour, linestyles=style, lw=lw, label=name
                    )
        for i, s in enumerate(series):
            pts = [
                (x(i, j), *_metric(s["values"].get(cat), key)) for j, cat in enumerate(categories)
            ]
            pts = [p for p in pts if math.isfinite(p[1])]
            if key == "dprime":
                clipped |= any(not DPRIME_SPAN[0] <= p[1] <= DPRIME_SPAN[1] for p in pts)
                pts = [(p[0], *np.clip(p[1:], *DPRIME_SPAN)) for p in pts]
            if not pts:
                continue
            xs, ys, lo, hi = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
            err = np.nan_to_num([ys - lo, hi - ys]).clip(0)
            ax.errorbar(
                xs,
                ys,
                yerr=err,
                fmt=s.get("marker", "o"),
                ms=5,
                capsize=2,
                color=s["colour"],
                label=s["label"],
                zorder=3,
            )
        ax.axhline(chance, color="#9e9e9e", ls="--", lw=1, label="chance")
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    top.set_ylim(0, 1.02)
    bottom.set_ylim(DPRIME_SPAN[0] - 0.2, DPRIME_SPAN[1] + 0.2)
    bottom.set_xticks(
        range(len(categories)), [_short(c) for c in categories], rotation=30, ha="right"
    )
    bottom.set_xlim(-0.5, len(categories) - 0.5)
    if clipped:
        bottom.set_title(
            f"d′ beyond {DPRIME_SPAN[1]:g} drawn at the edge", fontsize=8, loc="right", color="#555"
        )
    drawn = dict(zip(*reversed(top.get_legend_handles_labels()), strict=True))
    first = [s["label"] for s in series if s["label"] in drawn]  # the models, then references
    handles = {lab: drawn[lab] for lab in [*first, *drawn]}
    height = fig.get_figheight()
    head = 0.12 + 0.24 * math.ceil(len(handles) / 5)  # inches for the title and the legend
    fig.suptitle(title, fontsize=11, y=1 - 0.05 / height, va="top")
    fig.tight_layout(rect=(0, 0, 1, 1 - (head + 0.05) / height))
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="upper center",
        bbox_to_anchor=(0.5, 1 - 0.3 / height),
        ncol=min(len(handles), 5),
        frameon=False,
        fontsize=8.5,
    )
    return fig


def dimensions_data(
    series: Sequence[Mapping], references: Sequence[Mapping], categories: Sequence[str]
) -> list[dict]:
    """The numbers `dimensions_figure` draws, one row per listener x dimension."""
    rows = []
    for kind, items in (("model", series), ("reference", references)):
        for s in items:
            for cat in categories:
                g = s["values"].get(cat)
                if g is None:
                    continue
                rows.append(
                    {
                        "series": s["label"],
                        "kind": kind,
                        "listener": s.get("name", s["label"]),
                        "category": cat,
                        "items": g.get("n"),
                        "sources": g.get("n_clusters"),
                        **{
                            f"{key}{end}": g.get(key + end)
                            for key in ("accuracy", "dprime")
                            for end in ("", "_lo", "_hi")
                        },
                    }
                )
    return rows


def ladder(series: Sequence[Mapping], rungs: Sequence[str]) -> Figure:
    """Accuracy (top) and d′ (bottom) per rung of the ladder, in ladder order: one line per
    listener with its 95% CIs; references grey (their own line styles), models in their
    colours; chance dashed. Each item of `series`: {"listener", "colour", "reference": bool,
    "values": {rung: a `summarise` overall row}}; a rung the listener was not asked is a gap."""
    fig = Figure(figsize=(max(6.0, 1.1 * len(rungs) + 3.0), 6.4))
    top, bottom = fig.subplots(2, 1, sharex=True)
    xs = np.arange(len(rungs))
    clipped = False
    for ax, (key, label, chance) in zip((top, bottom), METRICS, strict=True):
        for k, s in enumerate(series):
            values = [_metric(s["values"].get(rung), key) for rung in rungs]
            v = np.array([m[0] for m in values])
            lo = np.array([m[1] for m in values])
            hi = np.array([m[2] for m in values])
            if key == "dprime":
                clipped |= bool(np.any((v < DPRIME_SPAN[0]) | (v > DPRIME_SPAN[1])))
                v, lo, hi = (np.clip(a, *DPRIME_SPAN) for a in (v, lo, hi))
            if s["reference"]:
                colour, style, lw, _ = _reference_style(s["listener"])
                marker = None
            else:
                colour, style, lw, marker = s["colour"], "-", 2.0, "o"
            offset = (k - (len(series) - 1) / 2) * 0.04  # overlapping CIs side by side
            ax.plot(
                xs + offset,
                v,
                color=colour,
                ls=style,
                lw=lw,
                marker=marker,
                label=s["listener"] if ax is top else None,
            )
            ok = np.isfinite(v) & np.isfinite(lo) & np.isfinite(hi)
            if ok.any():
                ax.errorbar(
                    (xs + offset)[ok],
                    v[ok],
                    # a jackknife interval is centred on its own estimate: a point may lie
                    # just outside it, and the bar then starts at the point
                    yerr=np.maximum([v[ok] - lo[ok], hi[ok] - v[ok]], 0.0),
                    fmt="none",
                    ecolor=colour,
                    elinewidth=1,
                    capsize=2,
                    alpha=0.7,
                )
        ax.axhline(chance, color="black", ls="--", lw=0.8, label="chance" if ax is top else None)
        ax.set_ylabel(label)
    top.set_ylim(-0.02, 1.04)
    bottom.set_xticks(xs, [r.replace("_", " ") for r in rungs], rotation=20, ha="right")
    bottom.set_xlabel("rung (from hearing a change to reasoning about it)")
    title = "Accuracy and d′ by rung of the ladder"
    if clipped:
        title += f" (d′ clipped to {DPRIME_SPAN[0]}..{DPRIME_SPAN[1]})"
    top.set_title(title)
    top.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig

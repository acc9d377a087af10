"""Report figures as PNG bytes: matplotlib's object API on the Agg canvas (no pyplot, no
global backend switch, no display), labelled axes with units, one colour per listener."""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from vocalgrad import dimensions
from vocalgrad.evaluation.psychometric import BELOW, OK, PsychometricFit

DPI = 100
PROBE_STYLES = {  # probe -> (colour, line style, label)
    "linear": ("#1f77b4", "-", "linear probe"),
    "mlp": ("#ff7f0e", "-", "MLP probe"),
    "lens": ("#2ca02c", "-.", "lens readout"),
    "shuffled": ("#7f7f7f", "--", "control: shuffled labels"),
    "random_weights": ("#bdbdbd", ":", "control: random weights"),
    "dsp": ("#000000", "--", "DSP features (no model)"),
}


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def _brief(parameter: str) -> str:
    """The parameter name without its parenthesised detail, to fit under a panel."""
    return parameter.split(" (")[0]


def _short(category: str) -> str:
    return category.replace("_", " ")


def headline(acc: Mapping[str, Mapping[str, tuple[float, float, float]]], categories: Sequence[str],
             colours: Mapping[str, str]) -> bytes:
    """Accuracy per category (points, 95% clustered CI bars) for each listener; chance line."""
    fig = Figure(figsize=(max(6.0, 0.9 * len(categories) + 3), 3.6))
    ax = fig.add_subplot()
    listeners = list(acc)
    width = 0.7 / max(len(listeners), 1)
    for i, name in enumerate(listeners):
        xs, ys, lo, hi = [], [], [], []
        for j, cat in enumerate(categories):
            a = acc[name].get(cat)
            if a is None or not math.isfinite(a[0]):
                continue
            xs.append(j - 0.35 + width * (i + 0.5))
            ys.append(a[0])
            # max(0, .): a Wilson bound of 1 computes as 1 - 1e-16, under an estimate of 1
            lo.append(max(0.0, a[0] - a[1]) if math.isfinite(a[1]) else 0)
            hi.append(max(0.0, a[2] - a[0]) if math.isfinite(a[2]) else 0)
        ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", ms=5, capsize=2, color=colours.get(name), label=name)
    ax.axhline(0.5, color=colours.get("chance", "grey"), ls="--", lw=1, label="chance (0.5)")
    ax.set_xticks(range(len(categories)), [_short(c) for c in categories], rotation=30, ha="right")
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("accuracy (proportion correct)")
    ax.set_title("Accuracy per category, 95% CI clustered by source")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)
    return _png(fig)


def bias(entries: Sequence[Mapping], colours: Mapping[str, str]) -> bytes:
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
        pts = [(d, k) for d, k in e.get("per_category", []) if math.isfinite(d) and math.isfinite(k)]
        if pts:
            d, k = zip(*pts, strict=True)
            right.scatter(k, d, s=14, color=c, alpha=0.35, lw=0)
        if math.isfinite(e["dprime"]) and math.isfinite(e["criterion"]):
            right.scatter([e["criterion"]], [e["dprime"]], s=70, color=c, edgecolor="white",
                          label=e["listener"], zorder=3)
    right.axhline(0, color="grey", lw=0.8)
    right.axvline(0, color="grey", lw=0.8)
    right.set_xlabel('criterion c (< 0: leans "increase", > 0: leans "decrease")')
    right.set_ylabel("sensitivity d′ (0 = chance)")
    right.set_title("Sensitivity vs bias (large: overall, small: per category)")
    right.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return _png(fig)


def psychometric(fits: Mapping[str, Sequence[PsychometricFit]], colours: Mapping[str, str]) -> bytes:
    """One panel per category: observed accuracy per magnitude, fitted curve, 75% threshold."""
    cats = list(fits)
    ncols = min(3, len(cats))
    nrows = math.ceil(len(cats) / ncols)
    fig = Figure(figsize=(4.4 * ncols, 3.4 * nrows + 0.7))
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
            dodge = math.exp(0.03 * (i - (k - 1) / 2))  # listeners side by side at shared levels
            m = [lv.magnitude * dodge for lv in f.levels]
            acc = np.array([lv.accuracy for lv in f.levels])
            err = np.clip([acc - [lv.lo for lv in f.levels], [lv.hi for lv in f.levels] - acc], 0, None)
            h = ax.errorbar(m, acc, yerr=err, fmt="o", ms=4, capsize=2, color=c, alpha=0.8)
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
        ax.set_xlabel(f"{_brief(spec.parameter)} ({spec.unit}) → larger change", fontsize=9)
        ax.set_ylabel("P(correct)")
        ax.grid(alpha=0.25)
    for ax in axes[len(cats):]:
        ax.set_visible(False)
    fig.tight_layout(rect=(0, 0.1 / nrows, 1, 1))
    fig.legend(list(handles.values()), [f"{n}" for n in handles], loc="lower center",
               ncol=min(len(handles), 5), frameon=False, fontsize=9,
               title="listener (▼ 75% threshold; dashed: chance, dotted: 75%)", title_fontsize=9)
    return _png(fig)


PROBE_COLUMNS = 3  # panels per row: ~330 px each at the report's 1064 px text width


def _family_title(family: str) -> str:
    """"lm@answer" -> "lm (answer position)": the panel title a reader can parse."""
    name, _, where = family.partition("@")
    return f"{name} ({where} position{'s' if where == 'audio' else ''})" if where else name


def probing_figure(layers: Sequence[Mapping], title: str) -> Figure:
    """One panel per stage family (e.g. encoder, decoder at the answer position), laid out in
    a grid: balanced accuracy by layer for each probe, mean over categories with its CI band.
    Controls of a family (shuffled labels, random weights) share its panel; the model-free DSP
    reference is a line on every panel. Rows without a number draw nothing, and a family with
    none is left out, so no panel is empty; the legend is drawn once, below the grid."""
    measured = [r for r in layers if math.isfinite(r["balanced_accuracy"])]
    dsp = [r["balanced_accuracy"] for r in measured if r["probe"] == "dsp"]
    families: dict[str, list[Mapping]] = {}
    for r in measured:
        if r["probe"] != "dsp":
            families.setdefault(r["stage"], []).append(r)
    cats = sorted({r["category"] for r in measured})
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
        probes = [p for p in dict.fromkeys([*PROBE_STYLES, *(r["probe"] for r in rows)])
                  if any(r["probe"] == p for r in rows)]
        for j, probe in enumerate(probes):
            pr = [r for r in rows if r["probe"] == probe]
            colour, style, label = PROBE_STYLES.get(probe, ("#9467bd", "-", probe))
            idx = sorted({r["layer_index"] for r in pr})
            ticks |= set(idx)
            mean, lo, hi = (np.array([np.nanmean([r[key] for r in pr if r["layer_index"] == i])
                                      for i in idx]) for key in ("balanced_accuracy", "ci_lo", "ci_hi"))
            if len(idx) == 1:  # a one-layer stage (input features, projector): points with CIs
                dodge = 0.12 * (j - (len(probes) - 1) / 2)
                err = np.clip(np.nan_to_num([mean - lo, hi - mean]), 0, None)
                legend.setdefault(label, ax.errorbar(np.add(idx, dodge), mean, yerr=err, color=colour,
                                                     fmt="o", ms=5, capsize=3))
            else:
                (line,) = ax.plot(idx, mean, color=colour, ls=style, marker="o", ms=3)
                ax.fill_between(idx, lo, hi, color=colour, alpha=0.12, lw=0)
                legend[label] = line  # a line shows the style better than a point
        if dsp:
            legend.setdefault(PROBE_STYLES["dsp"][2], ax.axhline(
                float(np.mean(dsp)), color=PROBE_STYLES["dsp"][0], ls=PROBE_STYLES["dsp"][1], lw=1.2))
        ax.axhline(0.5, color="grey", lw=0.8)
        if len(ticks) == 1:
            ax.set_xticks(sorted(ticks))
            ax.set_xlim(min(ticks) - 1, max(ticks) + 1)
        ax.set_ylim(0.3, 1.02)
        ax.set_title(f"{_family_title(family)}: {len(ticks)} layer{'s' if len(ticks) > 1 else ''}",
                     fontsize=10)
        ax.set_xlabel("layer index")
        if k % ncols == 0:
            ax.set_ylabel("balanced accuracy")
        ax.grid(alpha=0.25)
    what = _short(cats[0]) if len(cats) == 1 else f"mean over {len(cats)} categories"
    fig.suptitle(f"{title}: probes per layer, one panel per stage ({what})", fontsize=11)
    fig.tight_layout(rect=(0, 0.8 / fig.get_figheight(), 1, 1))
    fig.legend(list(legend.values()), list(legend), loc="lower center", frameon=False, fontsize=9,
               ncol=min(len(legend), 4), title="grey line: chance (0.5)", title_fontsize=8)
    return fig


def probing(layers: Sequence[Mapping], title: str) -> bytes | None:
    """The probe figure as PNG bytes (see `probing_figure`); None when no row has a number."""
    fig = probing_figure(layers, title)
    return _png(fig) if fig.axes else None


def heatmap(matrix: np.ndarray, rows: Sequence[str], columns: Sequence[str], title: str,
            colour_label: str, limits: tuple[float, float] = (-1.0, 1.0), fmt: str = "{:.2f}") -> bytes:
    """A labelled matrix with its values written in the cells (NaN cells left blank): the
    direction-alignment cosines and the tuning generalisation map share it."""
    fig = Figure(figsize=(1.2 + 0.62 * len(columns), 1.0 + 0.5 * len(rows)))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap="RdBu_r" if limits[0] < 0 else "viridis",
                      vmin=limits[0], vmax=limits[1], aspect="auto")
    ax.set_xticks(range(len(columns)), [_short(c) for c in columns], rotation=35, ha="right")
    ax.set_yticks(range(len(rows)), [_short(r) for r in rows])
    for i in range(len(rows)):
        for j in range(len(columns)):
            if np.isfinite(matrix[i, j]):
                ax.text(j, i, fmt.format(matrix[i, j]), ha="center", va="center", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.colorbar(image, ax=ax, label=colour_label, fraction=0.05)
    return _png(fig)

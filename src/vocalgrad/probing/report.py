"""Tables (CSV + markdown) and per-layer curve plots (PNG) of a probe run."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from vocalgrad.probing.diagnose import MEANING, MIN_SOURCES, thresholds

CURVE_COLUMNS = (
    "category",
    "stage",
    "order",
    "kind",
    "late",
    "linear_ba",
    "linear_lo",
    "linear_hi",
    "linear_control_ba",
    "linear_control_lo",
    "linear_control_hi",
    "linear_selectivity",
    "mlp_ba",
    "mlp_lo",
    "mlp_hi",
    "mlp_control_ba",
    "mlp_control_lo",
    "mlp_control_hi",
    "mlp_selectivity",
    "best_c",
    "n_test",
)


def rests_on(data: dict) -> str:
    """ "16 items / 4 sources ⚠": what a category's verdict rests on, flagged below the minimum."""
    n, sources = data.get("n_test"), data.get("n_test_sources")
    if n is None or sources is None:
        return "-"
    return f"{n} items / {sources} sources" + (" ⚠" if sources < MIN_SOURCES else "")


def write_csv(path: Path, rows: Sequence[dict], columns: Sequence[str] | None = None) -> None:
    columns = list(columns or (rows[0].keys() if rows else []))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in r.items()})


def _ci(r: dict, p: str) -> str:
    v = r.get(f"{p}_ba")
    return "-" if v is None else f"{v:.2f} [{r[f'{p}_lo']:.2f}, {r[f'{p}_hi']:.2f}]"


def markdown(summary: dict) -> str:
    """Warnings, diagnosis table, thresholds, and per-category stage tables."""
    warned = summary.get("warnings", [])
    lines = [
        "# Probe diagnosis",
        "",
        f"listener `{summary['listener']}`, pooling `{summary['pooling']}`, "
        f"split: {summary['split']}, seeds {summary['seeds']}",
        "",
        *[f"**Warning:** {w}" + "  " for w in warned],
        *([""] if warned else []),
        "| category | verdict | test items / sources | behaviour BA [95% CI] | evidence |",
        "|---|---|---|---|---|",
    ]
    for cat, d in summary["categories"].items():
        b = d["behaviour"]
        beh = (
            "-"
            if b is None
            else f"{b['ba']:.2f} [{b['ba_lo']:.2f}, {b['ba_hi']:.2f}] ({b['source']})"
        )
        lines.append(
            f"| {cat} | **{d['diagnosis']['verdict']}** | {rests_on(d)} | {beh} | "
            + "; ".join(d["diagnosis"]["evidence"][1:])
            + " |"
        )
    lines += [
        "",
        "Thresholds: " + ", ".join(f"{k} = {v}" for k, v in thresholds().items()),
        "CIs: 95% percentile bootstrap over source clips; ⚠: fewer than "
        f"{MIN_SOURCES} test sources, so the CIs and the verdict are indicative only. Verdicts:",
    ]
    lines += [f"- *{k}*: {v}" for k, v in MEANING.items()]
    for cat, d in summary["categories"].items():
        lines += [
            "",
            f"## {cat}",
            "",
            "| stage | linear | shuffled | MLP | MLP shuffled | C |",
            "|---|---|---|---|---|---|",
        ]
        for r in d["curves"]:
            c = r.get("best_c")
            lines.append(
                f"| {r['stage']}{' (late)' if r['late'] else ''} | {_ci(r, 'linear')} | "
                f"{_ci(r, 'linear_control')} | {_ci(r, 'mlp')} | {_ci(r, 'mlp_control')} | "
                f"{'-' if c is None else f'{c:g}'} |"
            )
        if d["lens"]:
            lines += ["", "| lens layer | BA [95% CI] | AUC | says increase |", "|---|---|---|---|"]
            lines += [
                f"| {r['layer']} | {r['ba']:.2f} [{r['ba_lo']:.2f}, {r['ba_hi']:.2f}] | "
                f"{r['auc']:.2f} | {r['increase_rate']:.0%} |"
                for r in d["lens"]
            ]
    return "\n".join(lines) + "\n"


def plot_category(path: Path, category: str, data: dict) -> None:
    """Per-stage curves: linear and MLP with CIs, shuffled controls, random weights, DSP, lens."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model = [r for r in data["curves"] if r["kind"] == "model"]
    x = list(range(len(model)))
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(model) + 3), 4))

    def band(rows: list[dict], key: str, label: str, style: str) -> None:
        ys = [r.get(f"{key}_ba") for r in rows]
        if all(v is not None for v in ys):
            line = ax.plot(x[: len(ys)], ys, style, label=label)[0]
            ax.fill_between(
                x[: len(ys)],
                [r[f"{key}_lo"] for r in rows],
                [r[f"{key}_hi"] for r in rows],
                alpha=0.15,
                color=line.get_color(),
            )

    band(model, "linear", "linear probe", "o-")
    band(model, "mlp", "MLP probe", "s-")
    band(model, "linear_control", "shuffled labels (linear)", "--")
    random = {
        r["stage"].removeprefix("random:"): r for r in data["curves"] if r["kind"] == "random"
    }
    if random:
        ax.plot(
            x,
            [
                random[r["stage"]]["linear_ba"] if r["stage"] in random else float("nan")
                for r in model
            ],
            ":",
            label="random weights (linear)",
        )
    for r in data["curves"]:
        if r["kind"] == "dsp":
            ax.axhline(r["linear_ba"], color="grey", lw=1, ls="-.", label="DSP log-mel (linear)")
    lens = {r["stage"]: r for r in data.get("lens_by_stage", [])}
    if lens:
        ax.plot(
            x,
            [lens[r["stage"]]["ba"] if r["stage"] in lens else float("nan") for r in model],
            "^-",
            label="lens (answer tokens)",
        )
    ax.axhline(0.5, color="black", lw=0.8)
    ax.set_xticks(x, [r["stage"] for r in model], rotation=60, ha="right", fontsize=7)
    ax.set_ylim(0.0, 1.02)
    ax.set_ylabel("balanced accuracy (test)")
    ax.set_title(f"{category}: {data['diagnosis']['verdict']}")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

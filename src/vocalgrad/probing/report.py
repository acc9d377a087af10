"""Tables (CSV + markdown) and per-category curve plots (PNG) of a probe run."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from vocalgrad.probing import figures
from vocalgrad.probing.diagnose import MEANING, MIN_SOURCES, rule, thresholds

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


def _reason(diagnosis: dict) -> str:
    """The verdict's reason without the rule, which the table's footer states once."""
    return str(diagnosis.get("reason", "")).split(". Rule: ")[0].removesuffix(".")


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
        "| category | verdict | why (the rule applied) | test items / sources | "
        "answers' BA [95% CI] | evidence |",
        "|---|---|---|---|---|---|",
    ]
    for cat, d in summary["categories"].items():
        b = d["behaviour"]
        beh = (
            "-"
            if b is None
            else f"{b['ba']:.2f} [{b['ba_lo']:.2f}, {b['ba_hi']:.2f}] ({b['source']})"
        )
        lines.append(
            f"| {cat} | **{d['diagnosis']['verdict']}** | {_reason(d['diagnosis'])} | "
            f"{rests_on(d)} | {beh} | " + "; ".join(d["diagnosis"]["evidence"][1:]) + " |"
        )
    lines += [
        "",
        f"Rule: {rule()}. Thresholds: " + ", ".join(f"{k} = {v}" for k, v in thresholds().items()),
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


def save_curves(path: Path, listener: str, category: str, data: dict) -> None:
    """One category's probe curves as a PNG, drawn by `figures.curve_figure` (the figure the
    report shows): linear and MLP with CIs, shuffled controls, random weights, DSP, lens.

    Parameters
    ----------
    path : Path
        The PNG to write.
    listener : str
        The probed listener's id, for the title.
    category : str
        The category (dimension) drawn.
    data : dict
        The category's summary entry: ``curves``, ``lens``, ``lens_by_stage``, ``diagnosis``.
    """
    stage = {r["layer"]: r["stage"] for r in data.get("lens_by_stage", [])}
    lens = [{**r, "category": category, "stage": stage.get(r["layer"], "")} for r in data["lens"]]
    curves = [{**r, "category": category} for r in data["curves"]]
    fig = figures.curve_figure(
        figures.long_rows(curves, lens),
        f"{listener} · {category.replace('_', ' ')}: {data['diagnosis']['verdict']}",
    )
    fig.savefig(path, dpi=120)

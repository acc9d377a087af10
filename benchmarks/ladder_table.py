"""Per rung of a built ladder and per dimension: the clips kept, the build's verification, the
audit's verdict with its gated statistics, and each run's accuracy; one Markdown table.
The build agreement is the share of rendered clips whose measurement agreed with their label
(the others were dropped: every kept clip agrees).

    vocalgrad build --protocol ladder --out L [--source S ...]
    vocalgrad eval L --listener baseline:ideal --out R
    python benchmarks/ladder_table.py L R [R2 ...]

A gate cell reads "value / needed": the cue classifier's statistic against the figure it must
reach to fail at this size in its dataset's own family (`audit.json`); "–" where the rung does
not gate it. The audit column is the ladder's verdict, every rung's gates as one family
(`ladder_audit`), with the dataset's own verdict beside it where the two differ; the line
under the table gives the ladder's family. A run's cell is
its accuracy on the rung as the report's Ladder section scores it (detection as yes against
no, every prompt variant of the rung together), "no answer" where the listener gave none in
the rung's words.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vocalgrad.evaluation.ladder import ladder_audit, scorable
from vocalgrad.evaluation.score import score_rows
from vocalgrad.records import LABELS


def gate(cell: dict, name: str) -> str:
    g = (cell.get("gates") or {}).get(name)
    return "–" if not g else f"{g['value']:.2f} / {g['needed']:.2f}"


def accuracies(run: Path) -> dict[str, str]:
    """Dimension -> accuracy of a rung's run as the report's Ladder section scores it
    (detection as yes against no), as text."""
    results = run / "results.jsonl"
    if not results.is_file():
        return {}
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    out = {}
    for members in scorable(rows).values():
        if not any(r.get("predicted") in LABELS for r in members):
            return dict.fromkeys({r["category"] for r in members}, "no answer")
        table = score_rows(members, by=("category",), n_boot=200, seed=0).table
        out |= {g["group"]: f"{g['accuracy']:.2f}" for g in table}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("ladder", type=Path)
    p.add_argument("runs", type=Path, nargs="*")
    args = p.parse_args()
    index = json.loads((args.ladder / "ladder.json").read_text())
    names = [json.loads((r / "ladder.json").read_text()).get("listener", r.name) for r in args.runs]
    print(
        "| rung | dimension | clips kept | build agreement | audit | direction gate "
        "| order-free gate | " + " | ".join(names) + " |"
    )
    print("|" + "---|" * (7 + len(names)))
    joint = ladder_audit(args.ladder, index["datasets"]) or {}
    for rung in index["rungs"]:
        folder = args.ladder / rung["dataset"]
        failing = (joint.get("failing") or {}).get(rung["dataset"], {})
        audit = json.loads((folder / "audit.json").read_text())["per_category"]
        report = json.loads((folder / "build_report.json").read_text())
        scores = [accuracies(r / rung["rung"]) for r in args.runs]
        for dim, cell in sorted(audit.items()):
            kept = report["per_category"].get(dim, {}).get("kept", "–")
            verified = report["verification_agreement"].get(dim)
            print(
                f"| {rung['rung']} | {dim} | {kept} | "
                + ("–" if verified is None else f"{verified:.1%}")
                + f" | {verdict(cell, dim in failing, joint.get('passes') is not None)} | "
                + f"{gate(cell, 'direction')} | "
                + f"{gate(cell, 'order_free')} | "
                + " | ".join(s.get(dim, "–") for s in scores)
                + " |"
            )
    if joint.get("passes") is not None:
        print(
            f"\nOne family: {joint['gates']} gates of {len(joint['builds'])} datasets, "
            f"critical z {joint['critical_z']:.2f}: "
            + ("passes" if joint["passes"] else f"fails on {', '.join(joint['failing'])}")
        )


def verdict(cell: dict, fails_jointly: bool, joint: bool) -> str:
    """The ladder's verdict on a rung's dimension, with its dataset's own where they differ."""
    alone = "pass" if cell["passes"] is not False else "FAIL"
    if not joint:
        return alone
    together = "FAIL" if fails_jointly else "pass"
    return together if together == alone else f"{together} (alone: {alone})"


if __name__ == "__main__":
    main()

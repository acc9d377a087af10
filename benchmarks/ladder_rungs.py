"""Per rung of the ladder: build one format's dataset, verify it, audit it and ask the baselines;
print one table row per dimension.

    python benchmarks/ladder_rungs.py OUT --format when how_much contour \
        --source builtin folder:CORPORA/klettres/48k --n-test 10 --n-train 8

Each row: the clips kept, `vocalgrad verify`'s agreement, the audit's verdict with its
shortcut and order-free accuracies [95% CI] and the one-end observer, and the accuracy of
`baseline:ideal`, `baseline:one-end` and `baseline:shortcut` on the test split. Every step is
the CLI's, in a subprocess; a rerun resumes the builds and runs it finds in OUT.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

BASELINES = ("ideal", "one-end", "shortcut")


def run(cmd: list[str], log: Path) -> int:
    with log.open("a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False).returncode


def slug(source: str) -> str:
    return re.sub(r"\W+", "-", source.removeprefix("folder:")).strip("-")[-40:]


def accuracy(run_dir: Path) -> dict[str, str]:
    """Category -> accuracy of a run's summary (default variant, first mode), "no answer"
    where every answer was a tie (a cue classifier whose cues are the same for both
    answers), "failed" where the run left no summary (see the log)."""
    summary = run_dir / "summary.json"
    if not summary.is_file():
        return {}
    groups = json.loads(summary.read_text())["groups"]
    first = groups[sorted(groups)[0]]["table"]
    return {
        g["group"]: "no answer" if g["unparsed_rate"] == 1 else f"{g['accuracy']:.2f}"
        for g in first
    }


def ci(point, lo, hi) -> str:
    return "–" if point is None else f"{point:.2f} [{lo:.2f}, {hi:.2f}]"


def rows(dataset: Path, runs: dict[str, Path]) -> list[str]:
    audit = json.loads((dataset / "audit.json").read_text())["per_category"]
    verify = json.loads((dataset / "verify.json").read_text())["per_category"]
    report = json.loads((dataset / "build_report.json").read_text())
    scores = {name: accuracy(path) for name, path in runs.items()}
    out = []
    for category, a in sorted(audit.items()):
        free = a.get("order_free") or {}
        one = a.get("one_end") or {}
        shortcut = a.get("shortcut_ci") or (None, None)
        verdict = "pass" if a.get("passes") else "FAIL: " + "; ".join(a.get("reasons", []))
        kept = report["per_category"].get(category, {})
        out.append(
            f"| {category} | {kept.get('kept', '–')} ({kept.get('refused_inaudible', 0)} refused) "
            f"| {verify.get(category, {}).get('agreement', float('nan')):.1%} "
            f"| {ci(a.get('shortcut_accuracy'), *shortcut)} "
            f"| {ci(free.get('accuracy'), *(free.get('ci') or (None, None)))}"
            f"{'' if a.get('order_free_gated', True) else ' (reported)'} "
            f"| {ci(one.get('accuracy'), one.get('lo'), one.get('hi'))} | {verdict} | "
            + " | ".join(scores[b].get(category, "failed") for b in BASELINES)
            + " |"
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--format", nargs="+", default=["when", "how_much", "contour"])
    p.add_argument("--source", nargs="+", default=["builtin"])
    p.add_argument("--dimensions", default="volume,voice_pitch,speaking_speed,background_noise")
    p.add_argument("--n-test", type=int, default=10)
    p.add_argument("--n-train", type=int, default=8)
    p.add_argument("--sample-rate", type=int, default=16000)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "vocalgrad.cli"]
    header = (
        "| category | clips kept | verify | shortcut acc [CI] | order-free acc [CI] | "
        "one-end (audit) | audit | " + " | ".join(BASELINES) + " |"
    )
    for source in args.source:
        for fmt in args.format:
            name = f"{slug(source)}-{fmt}"
            dataset, log = args.out / name, args.out / f"{name}.log"
            rc = run(
                [
                    *cli, "build", "--out", str(dataset), "--source", source,
                    "--question-format", fmt, "--dimensions", args.dimensions,
                    "--n-test", str(args.n_test), "--n-train", str(args.n_train),
                    "--sample-rate", str(args.sample_rate), "--workers", str(args.workers),
                    "--allow-audit-failure",  # a failed audit is a row of the table
                ],
                log,
            )  # fmt: skip
            if rc != 0:
                print(f"{name}: build failed (rc {rc}); see {log}", flush=True)
                continue
            if not (dataset / "verify.json").is_file():  # a rerun reprints, resuming the rest
                run([*cli, "verify", str(dataset), "--json", str(dataset / "verify.json")], log)
            runs = {}
            for baseline in BASELINES:
                folder = args.out / f"{name}-runs" / baseline
                run(
                    [*cli, "eval", str(dataset), "--listener", f"baseline:{baseline}", "--out",
                     str(folder), "--no-cache"],
                    log,
                )  # fmt: skip
                runs[baseline] = folder
            print(f"\n{source}, {fmt} ({args.n_test} + {args.n_train} sources)\n", flush=True)
            print(header)
            print("|" + "---|" * (header.count("|") - 1))
            print("\n".join(rows(dataset, runs)), flush=True)


if __name__ == "__main__":
    main()

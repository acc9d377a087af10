"""The demo's padded Whisper step, old way against new, on the same items in one run.

    python benchmarks/bench_demo.py [--dataset out/demo/tiers] [--items 48] [--copies 2] [--no-old]

Old: one process, torch's default threads, every decoder row projecting its clip's 30 s
encoder memory for cross-attention, a batch's clips encoded in one pass (the way `make demo`
ran before). New: `--copies` local listener copies with one core each (`eval --workers 2`),
each clip's memory projected once for all its rows (both option orders), one padded clip per
encoder pass (`whisper.PASS_MEL_FRAMES`). Both run `vocalgrad.evaluate` with `--controls
reversed` on the same items, each with an empty answer cache. Prints items/s (wall and per
CPU-second, the CPU of this process and its copies), the speed-up, and how far the answers
agree: the chosen answers (the target: 100%, at least 99%) and the largest change of a
log-likelihood ratio. Then the demo's listener, `whisper:tiny.en+bf16` (bfloat16 autocast), the
same way against the new float32 one: its speed-up, and how many answers it keeps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate
from vocalgrad.executors import Executor, ListenerSpec
from vocalgrad.listeners import whisper
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig


def dataset_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    out = Path(tempfile.mkdtemp(prefix="bench-demo-")) / "ds"
    build(BuildConfig(n_test=2, n_train=0), out, workers=os.cpu_count() or 1, audit=False)
    return out


def cpu_seconds() -> float:
    """CPU of this process and of its reaped children (the listener copies)."""
    own, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@contextlib.contextmanager
def old_way():
    """The listener as it was: every decoder row projects its own copy of the encoder memory,
    and a batch's padded clips go through the encoder in one pass."""
    original, frames = whisper._shared_cross_attention, whisper.PASS_MEL_FRAMES

    @contextlib.contextmanager
    def per_row(decoder, memories):
        yield

    whisper._shared_cross_attention, whisper.PASS_MEL_FRAMES = per_row, 10**9
    try:
        yield
    finally:
        whisper._shared_cross_attention, whisper.PASS_MEL_FRAMES = original, frames


def run(
    dataset: Path, out: Path, config: EvalConfig, copies: int, spec: str = "whisper:tiny.en"
) -> tuple[float, float, list[dict]]:
    """(wall s, CPU s, result rows) of one evaluation into `out`."""
    load = ListenerSpec(spec, str(dataset))
    with Executor(copies, listener_copies=copies) as executor:
        listener = executor.listener(load)
        start, cpu = time.perf_counter(), cpu_seconds()
        evaluate(
            dataset,
            listener,
            out,
            config,
            cache=AnswerCache(out.parent / f"{out.name}.sqlite"),
            executor=executor,
        )
        wall = time.perf_counter() - start
    cpu = cpu_seconds() - cpu  # after the copies are reaped
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return wall, cpu, rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", help="a built dataset (default: a small builtin build)")
    parser.add_argument("--items", type=int, default=48, help="items asked (each also reversed)")
    parser.add_argument("--copies", type=int, default=2, help="listener copies of the new way")
    parser.add_argument("--no-old", action="store_true", help="skip the old way (the slowest)")
    args = parser.parse_args()

    dataset = dataset_dir(args.dataset)
    config = EvalConfig(controls=("reversed",), limit=args.items)
    tmp = Path(tempfile.mkdtemp(prefix="bench-demo-runs-"))
    ways = {}
    if not args.no_old:
        with old_way():
            ways["old: one process, per-row projections, batched encoder"] = run(
                dataset, tmp / "old", config, copies=1
            )
    new_name = f"new: {args.copies} copies x 1 thread, shared projections, 1 clip/pass"
    ways[new_name] = run(dataset, tmp / "new", config, copies=args.copies)
    ways["the demo's: the new way + bf16 autocast"] = run(
        dataset, tmp / "bf16", config, copies=args.copies, spec="whisper:tiny.en+bf16"
    )
    n = len(ways[new_name][2])
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"padded whisper:tiny.en, {args.items} items x (as is, reversed) = {n} answers, "
        f"{os.cpu_count()} CPUs, "
        f"load average {load}"
    )
    print(f"{'way':<66}{'wall s':>8}{'CPU s':>8}{'answers/s':>10}{'/CPU-s':>8}")
    for name, (wall, cpu, _) in ways.items():
        print(f"{name:<66}{wall:>8.1f}{cpu:>8.1f}{n / wall:>10.2f}{n / cpu:>8.2f}")
    (*before, new, bf16) = ways.values()
    pairs = [("new / old", before[0], new)] if before else []
    for label, (wall_a, cpu_a, rows_a), (wall_b, cpu_b, rows_b) in [
        *pairs,
        ("bf16 / new", new, bf16),
    ]:
        pairs_ab = list(zip(rows_a, rows_b, strict=True))
        moved = [abs(a["llr"]) for a, b in pairs_ab if a["predicted"] != b["predicted"]]
        shifts = [abs(a["llr"] - b["llr"]) for a, b in pairs_ab]
        keys = [r["key"] for r in rows_a] == [r["key"] for r in rows_b]
        print(
            f"{label}: {wall_a / wall_b:.2f}x answers per wall second, {cpu_a / cpu_b:.2f}x per "
            f"CPU-second; answers: {n - len(moved)} of {n} the same "
            f"({1 - len(moved) / n:.1%}; target >= 99%), |change of log-likelihood ratio| "
            f"median {statistics.median(shifts):.2e}, largest {max(shifts):.2e} nats; "
            f"rows in the same order: {keys}"
        )
        if moved:  # a tie moves either way: how close to one were the answers that moved?
            print(
                f"  the {len(moved)} that moved had |LLR| <= {max(moved):.3f} nats before "
                f"(every answer's median: {statistics.median(abs(a['llr']) for a in rows_a):.3f})"
            )


if __name__ == "__main__":
    main()

"""Benchmark a short command's start-up with and without compiled bytecode, in one run.

Why: the demo runs ~25 `vocalgrad` processes, and each imports scipy, torch or transformers.
Where Python cannot write `.pyc` files (`PYTHONDONTWRITEBYTECODE=1`, a read-only venv) it
compiles every imported module from source in every process. The Makefile's install writes
the bytecode of every module vocalgrad imports (`python -m vocalgrad.bytecode`).

    python benchmarks/bench_startup.py [--repeats 3] [DATASET]

Old way: `PYTHONDONTWRITEBYTECODE=1` with `PYTHONPYCACHEPREFIX` set to an empty folder, so no
compiled module is found or written (as in a venv installed without bytecode). New way: the
venv's own `.pyc` files. Each way runs the same commands `--repeats` times, alternating;
prints the median wall seconds and CPU seconds of each and their ratio. Without a dataset it
times `vocalgrad list dimensions`; with one, `vocalgrad eval DATASET --listener
baseline:random` into a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `cmd` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", nargs="?", help="a built dataset to answer with chance")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="bench-startup-")
    base = [sys.executable, "-m", "vocalgrad.cli"]
    cache = {**os.environ, "VOCALGRAD_CACHE": os.path.join(tmp, "cache")}
    ways = {
        "old: compiled from source": {
            **cache,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPYCACHEPREFIX": os.path.join(tmp, "no-pyc"),
        },
        "new: compiled bytecode": cache,
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(args.repeats):
        for name, env in ways.items():
            if args.dataset:
                out = os.path.join(tmp, f"run-{len(runs[name])}-{name[:3]}")
                cmd = [*base, "eval", args.dataset, "--listener", "baseline:random", "--out", out]
            else:
                cmd = [*base, "list", "dimensions"]
            runs[name].append(timed(cmd, env))
    what = f"eval {args.dataset} --listener baseline:random" if args.dataset else "list dimensions"
    print(f"`vocalgrad {what}`, median of {args.repeats}, load average {os.getloadavg()[0]:.1f}")
    medians = {
        name: (statistics.median(w for w, _ in r), statistics.median(c for _, c in r))
        for name, r in runs.items()
    }
    for name, (wall, cpu) in medians.items():
        print(f"{name:<28}{wall:>8.2f} s wall{cpu:>8.2f} s CPU")
    (old_wall, old_cpu), (new_wall, new_cpu) = medians.values()
    print(f"new / old: {old_wall / new_wall:.2f}x faster wall, {old_cpu / new_cpu:.2f}x less CPU")


if __name__ == "__main__":
    main()

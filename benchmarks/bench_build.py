"""Benchmark the dataset build: ours vs the published chunk-and-crossfade renderer.

Why: the toolkit claims to be faster than the published pipeline although it does more per
clip (continuous processing, verification, confound measurement). This script measures that
claim on the builtin sources, per dimension and for all nine together (and for every
dimension, the newer ones included: ours only), plus multi-process
scaling and peak memory (which must not grow with the number of sources).

    python benchmarks/bench_build.py [--sources N] [--repeat 3] [--workers-list 1,2] [--profile]

Throughput is per CPU-second of the rendering processes (time.process_time inside each
worker), so it does not depend on how many cores the machine has, and each job's least of
`--repeat` runs, so a busy neighbour does not decide the ratio (the published side's rate
swung from 42 to 66 clips/s between single runs); the scaling section reports wall-clock time.
Clips are written to a RAM disk where there is one (`--scratch`): creating a file in this
machine's /tmp cost 1.2 ms of CPU against 0.07 ms on its other file systems (2026-12-04),
more than a tenth of a clip's rendering, and that is the disk's figure, not the renderer's.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import published_renderer
from threadpoolctl import threadpool_limits

from vocalgrad.dataset import REFERENCES, SPLITS
from vocalgrad.dimensions import PUBLISHED_CATEGORIES, names
from vocalgrad.sources import Source
from vocalgrad.stimuli.build import SourceTask, build, prepare_sources, render_source
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import plan_conditions

ALL = "all nine"
ALL_DIMENSIONS = "all dimensions"
NEWER = tuple(
    c for c in names() if c not in PUBLISHED_CATEGORIES
)  # ours only: no published renderer
TARGET_RATIO = 2.0
TARGET_ALL_DIMENSIONS = 1.2  # CPU per clip with every dimension <= 1.2x the nine's
TARGET_RTF = 400.0
RAM_DISK = "/dev/shm"


def default_scratch() -> str | None:
    """A RAM disk where the machine has a writable one, else the system's temporary folder."""
    return RAM_DISK if os.path.isdir(RAM_DISK) and os.access(RAM_DISK, os.W_OK) else None


@dataclass(frozen=True)
class Job:
    """One timed unit: one source rendered by one implementation for one category (or all)."""

    impl: str  # "ours" or "published"
    category: str  # a category name or ALL
    source: Source
    split: str
    config: BuildConfig


@dataclass(frozen=True)
class Timing:
    impl: str
    category: str
    cpu_s: float
    clips: int
    audio_s: float
    verified: int


def _categories(category: str) -> tuple[str, ...]:
    return {ALL: PUBLISHED_CATEGORIES, ALL_DIMENSIONS: names()}.get(category, (category,))


def _run_ours(job: Job, out: str) -> tuple[int, float, int]:
    """The real worker entry point: render, verify, measure confounds, write FLAC."""
    config = job.config.replace(categories=_categories(job.category))
    conditions, _ = plan_conditions(config)
    for split in (*SPLITS, REFERENCES):
        Path(out, split).mkdir(parents=True, exist_ok=True)
    result = render_source(SourceTask(job.source, job.split, tuple(conditions), config, out))
    rows = [r for r in result["rows"] if "failed" not in r]
    return len(rows), sum(r["duration_s"] for r in rows), sum(bool(r["verified"]) for r in rows)


def _run_published(job: Job, out: str) -> tuple[int, float, int]:
    """Same source, rate and conditions; render and write only (BLAS held to one thread,
    as in our workers, so neither side gets hidden extra cores)."""
    config = job.config.replace(categories=_categories(job.category))
    conditions, _ = plan_conditions(config)
    with threadpool_limits(1):
        clips, seconds = published_renderer.render_source(
            job.source.path, conditions, config.sample_rate, Path(out)
        )
    return clips, seconds, 0


def measure(job: Job, repeat: int = 1, scratch: str | None = None) -> Timing:
    """Time one job on this process's CPU clock, the least of `repeat` runs (as `timeit`
    does: on a shared machine a run is only ever slowed down, never sped up, by its
    neighbours, so the least is the cost of the work itself); the files are thrown away."""
    run = _run_ours if job.impl == "ours" else _run_published
    cpu = float("inf")
    for _ in range(repeat):
        out = tempfile.mkdtemp(prefix="bench-", dir=scratch)
        try:
            start = time.process_time()
            clips, audio_s, verified = run(job, out)
            cpu = min(cpu, time.process_time() - start)
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return Timing(job.impl, job.category, cpu, clips, audio_s, verified)


def _warm_up(source: Source, split: str, config: BuildConfig, scratch: str | None = None) -> None:
    """Pay one-off costs (imports, numba JIT of DTW, FFT plans) before anything is timed."""
    small = config.replace(tiers=("mid",), curves=("linear",), constants=0)
    for impl in ("ours", "published"):
        measure(Job(impl, ALL, source, split, small), scratch=scratch)


def _jobs(selected: list[tuple[Source, str]], config: BuildConfig) -> list[Job]:
    """All-nine and the slow categories first, so the pool's last jobs are short."""
    order = (
        ALL,
        "speaking_speed",
        "voice_pitch",
        *[c for c in PUBLISHED_CATEGORIES if c not in ("speaking_speed", "voice_pitch")],
    )
    ours_only = (ALL_DIMENSIONS, *NEWER)
    return [
        Job(impl, cat, src, split, config)
        for cat in ours_only
        for impl in ("ours",)
        for src, split in selected
    ] + [
        Job(impl, cat, src, split, config)
        for cat in order
        for impl in ("ours", "published")
        for src, split in selected
    ]


def throughput(
    selected: list[tuple[Source, str]],
    config: BuildConfig,
    workers: int,
    repeat: int = 1,
    scratch: str | None = None,
) -> dict[tuple[str, str], Timing]:
    """Sum CPU time, clips and audio over sources, per (implementation, category)."""
    jobs = _jobs(selected, config)
    first_source, first_split = selected[0]
    with ProcessPoolExecutor(
        max_workers=workers,
        initializer=_warm_up,
        initargs=(first_source, first_split, config, scratch),
    ) as pool:
        timings = list(pool.map(functools.partial(measure, repeat=repeat, scratch=scratch), jobs))
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0, 0.0, 0])
    for t in timings:
        acc = totals[(t.impl, t.category)]
        acc[0] += t.cpu_s
        acc[1] += t.clips
        acc[2] += t.audio_s
        acc[3] += t.verified
    return {k: Timing(k[0], k[1], v[0], int(v[1]), v[2], int(v[3])) for k, v in totals.items()}


def print_throughput(results: dict[tuple[str, str], Timing]) -> None:
    print("\n[1-3] throughput per CPU-second: each job's least CPU time of --repeat runs (incl.")
    print("      source loading; ours also verifies and measures confounds; both write 16-bit")
    print("      FLAC). RTF = audio s / CPU s")
    header = (
        f"{'dimension':<18} {'clips':>5} | {'ours clip/s':>11} {'RTF':>7} {'verif':>6} | "
        f"{'pub clip/s':>10} {'RTF':>7} | {'ours/pub':>8}"
    )
    print(header)
    print("-" * len(header))
    for category in (*PUBLISHED_CATEGORIES, ALL):
        ours, pub = results[("ours", category)], results[("published", category)]
        ours_rate, pub_rate = ours.clips / ours.cpu_s, pub.clips / pub.cpu_s
        if category == ALL:
            print("-" * len(header))
        print(
            f"{category:<18} {ours.clips:>5} | {ours_rate:>11.1f} "
            f"{ours.audio_s / ours.cpu_s:>6.0f}x "
            f"{ours.verified / max(ours.clips, 1):>6.1%} | {pub_rate:>10.1f} "
            f"{pub.audio_s / pub.cpu_s:>6.0f}x | {ours_rate / pub_rate:>7.2f}x"
        )
    ours, pub = results[("ours", ALL)], results[("published", ALL)]
    ratio = (ours.clips / ours.cpu_s) / (pub.clips / pub.cpu_s)
    rtf = ours.audio_s / ours.cpu_s
    print(
        f"\n  nine together: ours/published = {ratio:.2f}x clips per CPU-s "
        f"(target >= {TARGET_RATIO:.0f}x: {'PASS' if ratio >= TARGET_RATIO else 'FAIL'})"
    )
    print(
        f"  nine together: ours RTF per core = {rtf:.0f}x "
        f"(target >= {TARGET_RTF:.0f}x: {'PASS' if rtf >= TARGET_RTF else 'FAIL'})"
    )
    print("\n[1b] the newer dimensions (ours only: the published pipeline has none of them)")
    for category in (*NEWER, ALL_DIMENSIONS):
        t = results[("ours", category)]
        print(
            f"{category:<18} {t.clips:>5} | {t.clips / t.cpu_s:>11.1f} "
            f"{t.audio_s / t.cpu_s:>6.0f}x "
            f"{t.verified / max(t.clips, 1):>6.1%}"
        )
    every = results[("ours", ALL_DIMENSIONS)]
    slowdown = (every.cpu_s / every.clips) / (ours.cpu_s / ours.clips)
    print(
        f"\n  all {len(names())} dimensions: CPU per clip = {slowdown:.2f}x the nine's "
        f"(target <= {TARGET_ALL_DIMENSIONS:.1f}x: "
        f"{'PASS' if slowdown <= TARGET_ALL_DIMENSIONS else 'FAIL'}); "
        f"RTF per core {every.audio_s / every.cpu_s:.0f}x"
    )


def run_build_subprocess(n_sources: int, workers: int, scratch: str | None = None) -> dict:
    """A full `build` in a fresh interpreter, so its peak RSS is its own and not the max
    over everything this benchmark ran before."""
    out = tempfile.mkdtemp(prefix="bench-build-", dir=scratch)
    try:
        cmd = [sys.executable, __file__, "--_build", str(n_sources), str(workers), out]
        done = subprocess.run(cmd, check=True, capture_output=True, text=True)
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _child_build(n_sources: int, workers: int, out: str) -> None:
    """Entry point of run_build_subprocess: build, then report wall time and peak RSS."""
    config = BuildConfig(n_test=n_sources, n_train=0)
    start = time.perf_counter()
    report = build(config, Path(out) / "ds", workers=workers)
    wall = time.perf_counter() - start
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        json.dumps(
            {
                "wall_s": wall,
                "clips": report["clips_rendered"],
                "kept": report["clips_kept"],
                "rss_main_kib": own,
                "rss_worker_kib": children,
            }
        )
    )


def print_scaling(
    n_sources: int, workers_list: list[int], scratch: str | None = None
) -> dict[int, dict]:
    print(
        f"\n[4] scaling: vocalgrad.stimuli.build.build, {n_sources} sources, all nine categories, "
        "fresh out dir (wall clock, incl. planning, card, metadata)"
    )
    print(f"{'workers':>7} {'wall s':>8} {'clips':>6} {'clips/s':>8} {'speed-up':>8}")
    runs: dict[int, dict] = {}
    for w in workers_list:
        runs[w] = run_build_subprocess(n_sources, w, scratch)
        r, base = runs[w], runs[workers_list[0]]
        print(
            f"{w:>7} {r['wall_s']:>8.2f} {r['clips']:>6} {r['clips'] / r['wall_s']:>8.1f} "
            f"{base['wall_s'] / r['wall_s']:>7.2f}x"
        )
    return runs


def print_memory(n_sources: int, workers: int, first: dict, scratch: str | None = None) -> None:
    second = run_build_subprocess(2 * n_sources, workers, scratch)
    print(
        f"\n[5] peak RSS of a build with {workers} worker(s) (MiB; main process / largest worker)"
    )
    for n, r in ((n_sources, first), (2 * n_sources, second)):
        print(
            f"  {n:>3} sources, {r['clips']:>5} clips: main {r['rss_main_kib'] / 1024:7.1f}   "
            f"worker {r['rss_worker_kib'] / 1024:7.1f}"
        )
    growth = max(second["rss_main_kib"], second["rss_worker_kib"]) / max(
        first["rss_main_kib"], first["rss_worker_kib"]
    )
    print(f"  peak(2N) / peak(N) = {growth:.3f} (1.0 = independent of dataset size)")


def print_profile(
    source: Source, split: str, config: BuildConfig, scratch: str | None, top: int = 15
) -> None:
    """cProfile of our worker on one source, all categories, after a warm-up run. The
    profiler's clock is process CPU time, the same clock as the throughput table, so waits
    on a busy machine or on the file system do not show up as hot functions."""
    _warm_up(source, split, config, scratch)
    out = tempfile.mkdtemp(prefix="bench-profile-", dir=scratch)
    profiler = cProfile.Profile(time.process_time)
    try:
        profiler.runcall(_run_ours, Job("ours", ALL, source, split, config), out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    for key in ("cumulative", "tottime"):
        stream = io.StringIO()
        pstats.Stats(profiler, stream=stream).strip_dirs().sort_stats(key).print_stats(top)
        lines = stream.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print(f"\n[profile] ours, one source, all nine categories, CPU s: top {top} by {key}")
        print("\n".join(lines[start : start + top + 1]))


def _positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (no run at all would time nothing)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=4, help="builtin test sources (default 4)")
    parser.add_argument(
        "--workers-list", default="1,2", help="worker counts for the scaling run (default 1,2)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="also print a cProfile of our worker on one source"
    )
    parser.add_argument(
        "--repeat",
        type=_positive_int,
        default=3,
        help="time each throughput job this many times and keep the least (default 3)",
    )
    parser.add_argument(
        "--scratch",
        default=default_scratch(),
        help=f"folder the timed clips are written to and deleted from (default: {RAM_DISK} "
        "where writable, else the system's temporary folder)",
    )
    parser.add_argument("--_build", nargs=3, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args._build:
        _child_build(int(args._build[0]), int(args._build[1]), args._build[2])
        return 0
    workers_list = [int(w) for w in args.workers_list.split(",") if w.strip()]
    config = BuildConfig(n_test=args.sources, n_train=0)  # the sources build() will pick
    selected = prepare_sources(config)
    audio_s = sum(
        published_renderer.load_source(s.path, config.sample_rate).duration_s for s, _ in selected
    )
    workers = max(workers_list)
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"vocalgrad build benchmark: {len(selected)} builtin sources ({audio_s:.1f} s of speech), "
        f"{config.sample_rate} Hz, {os.cpu_count()} CPUs, {workers} timing worker(s), "
        f"load average {load} (wall-clock numbers suffer if the machine is busy); clips written "
        f"to {args.scratch or tempfile.gettempdir()}"
    )
    started = time.perf_counter()
    print_throughput(throughput(selected, config, workers, args.repeat, args.scratch))
    runs = print_scaling(len(selected), workers_list, args.scratch)
    print_memory(len(selected), workers, runs[workers], args.scratch)
    if args.profile:
        print_profile(*selected[0], config, args.scratch)
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nbenchmark wall time {time.perf_counter() - started:.0f} s, load average {load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the Ray executor against local processes: build scaling and eval actors.

Why: Ray must cost little over local processes on one machine (target: <= 15% at equal
workers) and scale with workers; listener actors must scale eval throughput. Prints, in one
run: the builtin test split at the published protocol grid (48 kHz, 24 conditions x 9
dimensions per source) built locally and on Ray at 1 and 2 workers (wall time, clips/s,
scaling, Ray overhead), then Whisper tiny.en eval items/s with 1 vs 2 actors.

    python benchmarks/bench_ray.py [--n-test 4] [--protocol-size] [--eval-items 48]

`--protocol-size` builds the full 100-source test split (21,600 clips: minutes per
configuration on a 2-core machine). Sources are synthesised before timing; every build must
produce the same content hash.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from pathlib import Path

import ray

from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate
from vocalgrad.executors import Executor, ListenerSpec, RayExecutor
from vocalgrad.jit import warm_up
from vocalgrad.stimuli.build import build, prepare_sources
from vocalgrad.stimuli.config import load_config

TARGET_OVERHEAD = 0.15
BUILTIN_SPEAKERS = 8


def timed_build(config, out: Path, executor: Executor) -> tuple[float, int, str]:
    started = time.perf_counter()
    report = build(config, out, workers=executor.workers, audit=False, executor=executor)
    seconds = time.perf_counter() - started
    sha = json.loads((out / "build.json").read_text())["content_sha256"]
    return seconds, report["clips_rendered"], sha


def _warm() -> None:
    """What a fresh Ray worker pays once: importing the renderer and loading numba's caches."""
    import vocalgrad.stimuli.build  # noqa: F401
    from vocalgrad.jit import warm_up

    warm_up()


def start_workers(n: int) -> float:
    """Start `n` Ray worker processes (kept for the session's later tasks); seconds taken."""
    started = time.perf_counter()
    ray.get([ray.remote(num_cpus=1)(_warm).remote() for _ in range(n)])
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-test", type=int, default=4, help="test sources (protocol: 100)")
    ap.add_argument("--protocol-size", action="store_true", help="the full 100-source test split")
    ap.add_argument("--eval-items", type=int, default=96, help="items for the Whisper eval")
    args = ap.parse_args()
    n_test = 100 if args.protocol_size else args.n_test
    # the builtin voice has 8 speakers and 2-3 s utterances (the protocol's 3 s minimum is for
    # VCTK): as many test sources per speaker as the split needs, 2 s and longer
    config = load_config(
        None,
        protocol="vocalgrad",
        n_test=n_test,
        n_train=0,
        min_duration_s=2.0,
        per_speaker_test=max(2, math.ceil(n_test / BUILTIN_SPEAKERS)),
    )
    prepare_sources(config)  # synthesise the builtin sources once, outside the timings
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    try:
        started = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - started
        warm_up()  # the local runs find numba's caches loaded, as the Ray workers will
        runs: dict[tuple[str, int], tuple[float, int, str]] = {}
        worker_start = 0.0
        for name, workers in (("local", 1), ("local", 2), ("ray", 1), ("ray", 2)):
            if name == "ray" and workers == 1:
                worker_start = start_workers(2)
            executor = Executor(workers) if name == "local" else RayExecutor(workers=workers)
            runs[name, workers] = timed_build(config, tmp / f"{name}{workers}", executor)
        print(
            f"## build: builtin test split, protocol grid, {n_test} sources "
            f"({runs['local', 1][1]} clips, 48 kHz)"
        )
        print(
            f"One-off costs, in no row: Ray start {ray_start:.1f} s; starting 2 Ray workers "
            f"(imports, numba caches; once per worker process) {worker_start:.1f} s\n"
        )
        print(
            "| executor | workers | wall s | clips/s | scaling vs 1 worker | "
            "vs local at equal workers |"
        )
        print("|---|---|---|---|---|---|")
        for (name, workers), (seconds, clips, _) in runs.items():
            one = runs[name, 1][0]
            over = seconds / runs["local", workers][0] - 1
            print(
                f"| {name} | {workers} | {seconds:.1f} | {clips / seconds:.1f} | "
                f"{one / seconds:.2f}x | {'-' if name == 'local' else f'{over:+.1%}'} |"
            )
        hashes = {sha for _, _, sha in runs.values()}
        print(f"\nidentical content hash across all four builds: {len(hashes) == 1}")
        for workers in (1, 2):
            local = runs["local", workers][0]
            over = runs["ray", workers][0] / local - 1
            cold = (runs["ray", workers][0] + worker_start) / local - 1
            print(
                f"Ray overhead at {workers} worker(s): {over:+.1%} with started workers, "
                f"{cold:+.1%} counting the worker start (target <= {TARGET_OVERHEAD:.0%}: "
                f"{'met' if over <= TARGET_OVERHEAD else 'NOT met'})"
            )

        dataset = tmp / "local1"
        spec = ListenerSpec("whisper:tiny.en")
        eval_config = EvalConfig(batch_size=4, limit=args.eval_items)
        import torch

        print(
            f"\n## eval: Whisper tiny.en, {args.eval_items} items (choice mode, both option orders)"
        )
        print(
            f"local: in this process, {torch.get_num_threads()} torch threads; Ray: one CPU and "
            "one torch thread per actor; load s includes starting the actors; items/s after an "
            "untimed warm-up pass of 8 items per listener\n"
        )
        print("| executor | listeners | load s | items/s | scaling |")
        print("|---|---|---|---|---|")
        base = None
        for name, workers in (("local", 1), ("ray", 1), ("ray", 2)):
            executor = Executor() if name == "local" else RayExecutor(workers=workers)
            started = time.perf_counter()
            listener = executor.listener(spec)
            load = time.perf_counter() - started
            # one untimed pass first: each actor's first batches pay one-off costs (torch's first
            # kernels, the feature extractor's caches) that swamped a short timed run (measured:
            # 13 items/s for one actor cold on 48 items, against 47 in the warmed driver)
            warm = tmp / f"warm-{name}{workers}"
            evaluate(
                dataset,
                listener,
                warm,
                EvalConfig(batch_size=4, limit=8 * max(1, workers)),
                cache=AnswerCache(warm / "a.sqlite"),
                executor=executor,
            )
            out = tmp / f"eval-{name}{workers}"
            counts = evaluate(
                dataset,
                listener,
                out,
                eval_config,
                cache=AnswerCache(out / "a.sqlite"),
                executor=executor,
            )
            rate = counts["answered"] / counts["seconds"]
            if name == "ray" and workers == 1:
                base = rate
            print(
                f"| {name} | {workers} | {load:.1f} | {rate:.2f} | "
                f"{'-' if name == 'local' else f'{rate / base:.2f}x'} |"
            )
            executor.close()  # ends the listener actors (the Ray session stays up)
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

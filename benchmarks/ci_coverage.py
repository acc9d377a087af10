"""How often the toolkit's clustered 95% CIs cover the truth, by number of clusters.

Why: every accuracy, d' and audit gate reads a CI that resamples sources (clusters). A
percentile bootstrap over few clusters is too narrow (its resamples cannot be more varied
than the G clusters drawn), so `vocalgrad.stats.ci_method_for` switches to a delete-one-cluster
jackknife t-interval below `BOOTSTRAP_MIN_CLUSTERS`. This script measures both intervals on
the same simulated data, so the switch sits where the bootstrap reaches its nominal level.

    python benchmarks/ci_coverage.py [--runs 1000] [--clusters 5,8,10,12,15,20,25,30,40]

Simulation: G sources with `--items` items each (some sources with half as many, as when a
build refuses conditions); each source's true accuracy drawn from a beta distribution with
mean `--truth` and between-source SD `--spread` (voices and sentences differ); each item
right with its source's probability. The truth is the population mean (`--truth`, default
0.6). Both intervals see the same draws; the bootstrap uses 2,000 resamples, as the toolkit
does.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from vocalgrad.stats import (
    BOOTSTRAP_MIN_CLUSTERS,
    ci_method_for,
    jackknife_t_ci,
    leave_one_out_weights,
    resample_weights,
)

N_BOOT = 2000


def _beta(rng: np.random.Generator, mean: float, sd: float, size: int) -> np.ndarray:
    """Beta draws with this mean and SD (a source's true accuracy)."""
    k = mean * (1 - mean) / sd**2 - 1
    return rng.beta(mean * k, (1 - mean) * k, size)


def coverage(
    n_clusters: int, runs: int, items: int, spread: float, seed: int, truth: float = 0.6
) -> dict[str, float]:
    """Share of `runs` simulated datasets whose interval covers `truth`, per method, and the
    intervals' median width."""
    rng = np.random.default_rng([seed, n_clusters])
    hits = {"bootstrap": 0, "jackknife t": 0}
    widths: dict[str, list[float]] = {"bootstrap": [], "jackknife t": []}
    for _ in range(runs):
        n = np.where(np.arange(n_clusters) % 3 == 2, items // 2, items)
        right = rng.binomial(n, _beta(rng, truth, spread, n_clusters)).astype(float)
        point = right.sum() / n.sum()
        boot = resample_weights(rng, N_BOOT, n_clusters).astype(float)
        lo, hi = np.percentile((boot @ right) / (boot @ n), [2.5, 97.5])
        loo = leave_one_out_weights(n_clusters)
        j_lo, j_hi = jackknife_t_ci(np.asarray(point), (loo @ right) / (loo @ n), proportion=True)
        for name, (a, b) in (("bootstrap", (lo, hi)), ("jackknife t", (float(j_lo), float(j_hi)))):
            hits[name] += a <= truth <= b
            widths[name].append(b - a)
    return {
        **{name: hits[name] / runs for name in hits},
        **{f"{name} width": float(np.median(w)) for name, w in widths.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated datasets per G")
    parser.add_argument("--clusters", default="5,8,10,12,15,20,25,30,40")
    parser.add_argument("--items", type=int, default=24, help="items per source (default 24)")
    parser.add_argument(
        "--spread", type=float, default=0.15, help="between-source SD of accuracy (default 0.15)"
    )
    parser.add_argument(
        "--truth", type=float, default=0.6, help="population accuracy (default 0.6)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    counts = [int(g) for g in args.clusters.split(",") if g.strip()]
    started = time.perf_counter()
    print(
        f"95% CI coverage of a clustered accuracy (truth {args.truth}), {args.runs} runs per row, "
        f"{args.items} items a source (every third {args.items // 2}), between-source SD "
        f"{args.spread}; the toolkit uses the bootstrap from {BOOTSTRAP_MIN_CLUSTERS} clusters"
    )
    header = f"{'G':>4} | {'bootstrap':>9} {'width':>6} | {'jackknife t':>11} {'width':>6} | used"
    print(header)
    print("-" * len(header))
    for g in counts:
        c = coverage(g, args.runs, args.items, args.spread, args.seed, args.truth)
        print(
            f"{g:>4} | {c['bootstrap']:>9.3f} {c['bootstrap width']:>6.3f} | "
            f"{c['jackknife t']:>11.3f} {c['jackknife t width']:>6.3f} | {ci_method_for(g)}"
        )
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

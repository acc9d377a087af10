"""How often the toolkit's clustered 95% CIs cover the truth, by number of clusters.

Why: every accuracy, d', AUC and audit gate reads a CI that resamples sources (clusters). A
percentile bootstrap over few clusters is too narrow (its resamples cannot be more varied
than the G clusters drawn), so `vocalgrad.stats.ci_method_for` switches to a delete-one-cluster
jackknife t-interval below `BOOTSTRAP_MIN_CLUSTERS`. This script runs the toolkit's own
`vocalgrad.stats.summarise` on the same simulated answers under both intervals, so the switch
sits where the bootstrap reaches its nominal level.

    python benchmarks/ci_coverage.py [--runs 500] [--clusters 5,8,10,15,20,30,40,60]

Simulation, a signal-detection listener: G sources with `--items` items each (every third
source half as many, as when a build refuses conditions), half of them increases; each
source has its own sensitivity d (normal, mean `--dprime`, SD `--spread`) and criterion
(normal, SD 0.3), as voices and sentences differ; an item's evidence is normal with mean
+-d/2, its answer "increase" above the criterion, its `llr` the evidence. The truth of each
statistic is its value on 20,000 sources from the same population. The bootstrap uses 2,000
resamples, as the toolkit does.
"""

from __future__ import annotations

import argparse
import sys
import time
from unittest import mock

import numpy as np

from vocalgrad import stats

STATISTICS = ("accuracy", "dprime", "auc")
METHODS = {"bootstrap": 1, "jackknife t": 10**9}  # BOOTSTRAP_MIN_CLUSTERS that forces each


def listener_rows(
    rng: np.random.Generator, n_clusters: int, items: int, dprime: float, spread: float
) -> list[dict]:
    """Scored rows of one simulated benchmark (see the module docstring)."""
    sizes = np.where(np.arange(n_clusters) % 3 == 2, max(2, items // 2), items)
    d = rng.normal(dprime, spread, n_clusters)
    criterion = rng.normal(0.0, 0.3, n_clusters)
    rows = []
    for g, n in enumerate(sizes):
        sign = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)  # increase, decrease, ...
        evidence = rng.normal(sign * d[g] / 2, 1.0)
        for j in range(n):
            rows.append(
                {
                    "item_id": f"{g}-{j}",
                    "category": "volume",
                    "direction": "increase" if sign[j] > 0 else "decrease",
                    "predicted": "increase" if evidence[j] > criterion[g] else "decrease",
                    "llr": float(evidence[j]),
                    "source_id": f"s{g}",
                }
            )
    return rows


def truth(items: int, dprime: float, spread: float, seed: int) -> dict[str, float]:
    """Each statistic on one very large benchmark: the population value a CI should cover."""
    rows = listener_rows(np.random.default_rng([seed, 0]), 20_000, items, dprime, spread)
    overall = stats.summarise(rows, by=(), n_boot=0)[0]
    return {name: float(overall[name]) for name in STATISTICS}


def coverage(
    n_clusters: int,
    runs: int,
    items: int = 24,
    dprime: float = 1.0,
    spread: float = 0.5,
    seed: int = 0,
    truths: dict[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Per method and statistic: the share of `runs` simulated benchmarks whose 95% CI from
    `stats.summarise` covers the truth, and the median width."""
    truths = truths or truth(items, dprime, spread, seed)
    out: dict[str, dict[str, float]] = {}
    for method, threshold in METHODS.items():
        rng = np.random.default_rng([seed, n_clusters])  # both methods see the same draws
        hits = dict.fromkeys(STATISTICS, 0)
        widths: dict[str, list[float]] = {name: [] for name in STATISTICS}
        with mock.patch.object(stats, "BOOTSTRAP_MIN_CLUSTERS", threshold):
            for run in range(runs):
                rows = listener_rows(rng, n_clusters, items, dprime, spread)
                s = stats.summarise(rows, by=(), seed=run)[0]
                for name in STATISTICS:
                    lo, hi = s[f"{name}_lo"], s[f"{name}_hi"]
                    hits[name] += bool(lo <= truths[name] <= hi)  # a missing CI covers nothing
                    widths[name].append(hi - lo)
        out[method] = {
            **{name: hits[name] / runs for name in STATISTICS},
            **{f"{name} width": float(np.nanmedian(widths[name])) for name in STATISTICS},
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500, help="simulated benchmarks per G")
    parser.add_argument("--clusters", default="5,8,10,15,20,30,40,60")
    parser.add_argument("--items", type=int, default=24, help="items per source (default 24)")
    parser.add_argument("--dprime", type=float, default=1.0, help="mean sensitivity (default 1)")
    parser.add_argument(
        "--spread", type=float, default=0.5, help="between-source SD of d' (default 0.5)"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    counts = [int(g) for g in args.clusters.split(",") if g.strip()]
    started = time.perf_counter()
    truths = truth(args.items, args.dprime, args.spread, args.seed)
    print(
        f"95% CI coverage, vocalgrad.stats.summarise, {args.runs} simulated benchmarks a row: "
        f"{args.items} items a source (every third {max(2, args.items // 2)}), d' "
        f"{args.dprime} +- {args.spread} between sources; truth "
        + ", ".join(f"{k} {v:.3f}" for k, v in truths.items())
        + f"; the toolkit uses the bootstrap from {stats.BOOTSTRAP_MIN_CLUSTERS} clusters"
    )
    cells = [f"{m} {s}" for m in METHODS for s in STATISTICS]
    print(f"{'G':>4} | " + " | ".join(f"{c:>20}" for c in cells) + " | used")
    for g in counts:
        c = coverage(g, args.runs, args.items, args.dprime, args.spread, args.seed, truths)
        row = [f"{c[m][s]:.3f} ({c[m][f'{s} width']:.2f})" for m in METHODS for s in STATISTICS]
        print(f"{g:>4} | " + " | ".join(f"{v:>20}" for v in row) + f" | {stats.ci_method_for(g)}")
    print("coverage (median width)")
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

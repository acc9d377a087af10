"""How often does the shortcut audit fail a category with no leak at all?

Two nulls on a built dataset's own clips and cues, scored by the audit's own classifiers and
intervals (`vocalgrad.stimuli.audit.classifiers`):

* constant: the real constant clips left out, K changing clips of every source relabelled
  "constant" at random; the cross-fitted constant-vs-changing AUC of the better classifier.
  Nothing tells these "constants" apart, so every AUC over 0.5 is chance.
* direction: each twin pair's labels flipped at random (both clips swap), so the label says
  nothing about any cue; the direction accuracy of the better classifier (all the category's
  audited families, or the order-free family alone).

    python benchmarks/audit_null.py DATASET [CATEGORY ...] [--test constant|direction]
        [--draws 100] [--per-source 1] [--family audited|order_free]

Prints, per category, the spread of the statistic and how often it crosses the gate
(constant AUC > MAX_CONSTANT_AUC; direction accuracy > MAX_SHORTCUT_ACCURACY or a CI that
excludes 0.5). The rates are the audit's false-failure rates at the dataset's size.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from vocalgrad.dataset import load_rows
from vocalgrad.records import LABELS
from vocalgrad.stimuli.audit import classifiers as C
from vocalgrad.stimuli.audit.cache import dataset_cues
from vocalgrad.stimuli.audit.cues import allowed_families, feature_names, rows_format
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES

FLIP = {"increase": "decrease", "decrease": "increase"}


def pseudo_constants(
    rows: Sequence[Mapping], per_source: int, rng: np.random.Generator
) -> list[dict]:
    """The changing clips, `per_source` of each source relabelled "constant" at random."""
    changing = [dict(r) for r in rows if r["direction"] in LABELS]
    by_source: dict[str, list[dict]] = {}
    for r in changing:
        by_source.setdefault(r["source_id"], []).append(r)
    for clips in by_source.values():
        for i in rng.choice(len(clips), min(per_source, len(clips)), replace=False):
            clips[i]["direction"] = "constant"
    return changing


def flipped_pairs(rows: Sequence[Mapping], rng: np.random.Generator) -> list[dict]:
    """The changing clips with each twin pair's two labels swapped or not, at random."""
    changing = [dict(r) for r in rows if r["direction"] in LABELS]

    def pair(r: Mapping) -> tuple:
        return r["source_id"], r["tier"], r["curve"]

    flip = {p: bool(rng.integers(2)) for p in sorted({pair(r) for r in changing})}
    for r in changing:
        if flip[pair(r)]:
            r["direction"] = FLIP[r["direction"]]
    return changing


def constant_statistic(rows, cues, names, key: str) -> tuple[float, float, float]:
    """(better AUC, its CI lo, LR's AUC) of the audit's cross-fitted constant test."""
    train = C._sort_rows(r for r in rows if r["split"] == "train")
    test = C._sort_rows(r for r in rows if r["split"] == "test")
    _, scored, probs = C._cross_fit(train, test, C._is_constant, cues, names)
    positive = np.array([C._is_constant(r) for r in scored], dtype=bool)
    aucs = {m: C._auc(p, positive, scored, f"{key}|{m}") for m, p in probs.items()}
    best = max(aucs, key=lambda m: aucs[m]["auc"])
    return aucs[best]["auc"], aucs[best]["lo"], aucs["lr"]["auc"]


def direction_statistic(rows, cues, names, key: str) -> tuple[float, float, float]:
    """(better accuracy, its CI lo, its CI hi) of the audit's train -> test direction test."""
    train = C._sort_rows(r for r in rows if r["split"] == "train")
    test = C._sort_rows(r for r in rows if r["split"] == "test")
    y, predicted = C._predict_direction(train, test, cues, names)
    _, probs = predicted
    acc = {m: C._accuracy((p > 0.5).astype(int) == y, test, f"{key}|{m}") for m, p in probs.items()}
    best = max(acc, key=lambda m: acc[m]["accuracy"])
    return acc[best]["accuracy"], acc[best]["lo"], acc[best]["hi"]


def run(args: argparse.Namespace) -> None:
    rows = load_rows(args.dataset)
    categories = args.categories or sorted({r["category"] for r in rows})
    print(
        f"{args.dataset}: {args.test} null, {args.draws} draws a category"
        + (f", {args.per_source} a source" if args.test == "constant" else f", {args.family}")
    )
    if args.test == "constant":
        print(
            "| category | constants | LR AUC SD | better AUC mean | 95th pct | > gate "
            "| CI lo > 0.5 |"
        )
    else:
        print("| category | twins | accuracy SD | mean | 95th pct | > 0.60 | CI excludes 0.5 |")
    print("|---|---|---|---|---|---|---|")
    for category in categories:
        mine = [r for r in rows if r["category"] == category]
        cues = dataset_cues(args.dataset, mine)
        fmt = rows_format(mine)
        names = (
            list(ORDER_FREE_NAMES)
            if args.family == "order_free"
            else feature_names(allowed_families(category, fmt), category, fmt)
        )
        rng = np.random.default_rng(args.seed)
        stats = []
        for k in range(args.draws):
            if args.test == "constant":
                relabelled = pseudo_constants(mine, args.per_source, rng)
                stats.append(constant_statistic(relabelled, cues, names, f"{category}|{k}"))
            else:
                relabelled = flipped_pairs(mine, rng)
                stats.append(direction_statistic(relabelled, cues, names, f"{category}|{k}"))
        s = np.array(stats)
        n = sum(r["direction"] == "constant" for r in relabelled)
        if args.test == "constant":
            print(
                f"| {category} | {n} | {s[:, 2].std():.3f} | {s[:, 0].mean():.3f} | "
                f"{np.percentile(s[:, 0], 95):.3f} | {np.mean(s[:, 0] > C.MAX_CONSTANT_AUC):.0%} | "
                f"{np.mean(s[:, 1] > 0.5):.0%} |"
            )
        else:
            excludes = (s[:, 1] > 0.5) | (s[:, 2] < 0.5)
            print(
                f"| {category} | {len(relabelled) // 2} | {s[:, 0].std():.3f} | "
                f"{s[:, 0].mean():.3f} | {np.percentile(s[:, 0], 95):.3f} | "
                f"{np.mean(s[:, 0] > C.MAX_SHORTCUT_ACCURACY):.0%} | {excludes.mean():.0%} |"
            )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("categories", nargs="*", help="default: the dataset's")
    p.add_argument("--test", choices=("constant", "direction"), default="constant")
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--per-source", type=int, default=1, help="pseudo-constants a source")
    p.add_argument("--family", choices=("audited", "order_free"), default="audited")
    p.add_argument("--seed", type=int, default=0)
    warnings.filterwarnings("ignore", category=UserWarning)
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()

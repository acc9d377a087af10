r"""Can the label be read off order-free statistics of the whole file?

Why: a statistic that is the same when a clip plays backwards cannot measure a direction,
so on a valid benchmark it predicts none. Speech is not symmetric in time, and a renderer
that carries the asymmetry through leaks the label into such statistics (whole-file
loudness by any standard measure, percentiles, audible duration, the sum of the two edges'
cues). This trains classifiers on the train split's order-free cues and tests on the test
split; CIs resample test sources.

    python benchmarks/order_free_cues.py DATASET [DIMENSION ...] [--top 4] [--workers 2]
        [--disjoint-parts REGEX [--draws 10]] [--resplit DRAWS]

Prints, per category, the best classifier's direction accuracy [95% CI] and the cues whose
AUC for "increase" lies furthest from 0.5. Cues are measured from the files (not cached).

``--disjoint-parts`` asks whether the classifiers learn parts that sources share across the
splits (sources joined from a few recordings, such as the alsa-utils phrase pairs): REGEX's
named groups name each source's parts in its `source_id` (for the pairs
``'^folder/(?P<a>[^+/]+)\+(?P<b>[^/]+)/'``). Each draw splits the parts into two halves at
random and refits train -> test on the sources whose parts all lie in one half against those
in the other; the control splits the same sources at random into train and test of the same
sizes. Prints mean +- SD over draws of each classifier's accuracy, both ways.

``--resplit DRAWS`` asks how far the accuracy moves with the draw of sources, from one
build (`vocalgrad.stimuli.audit.redraw`, which the audit reports beside a failing gate):
each draw deals the build's own speakers, whole, into train and test at random, as many to
each as the build has, and refits. Prints the order-free gate's statistic (the LR's
accuracy) as mean +- SD, range and the number of draws above 0.60 (the leak the audit asks
a build to be able to detect).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from functools import partial

import numpy as np

from vocalgrad.audio import load_audio
from vocalgrad.dataset import load_rows
from vocalgrad.stimuli.audit import TARGET_ACCURACY, order_free_report
from vocalgrad.stimuli.audit.classifiers import gate_values
from vocalgrad.stimuli.audit.redraw import deal, describe, redrawn_values, summarise
from vocalgrad.stimuli.order_free import order_free_cues


def _cues(path: str) -> dict[str, float]:
    audio, sr = load_audio(path, mono=False)
    return order_free_cues(audio, sr)


def _disjoint_parts(
    category: str,
    rows: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    pattern: str,
    draws: int,
) -> str:
    """Train -> test accuracies with the parts disjoint across the splits, and with a random
    split of the same sources (the control), mean +- SD over `draws`."""
    regex = re.compile(pattern)
    parts = {}
    for r in rows:
        match = regex.search(str(r["source_id"]))
        if match is None:
            raise SystemExit(f"--disjoint-parts: no match in source_id {r['source_id']!r}")
        parts[r["source_id"]] = frozenset(match.groupdict().values())
    names = sorted(set().union(*parts.values()))
    rng = np.random.default_rng(0)
    results: dict[str, list[float]] = {}
    for _ in range(draws):
        half = set(rng.permutation(names)[: len(names) // 2])
        # sources with parts on both sides of the draw are left out of it
        test_sources = sorted(s for s, p in parts.items() if p <= half)
        train_sources = sorted(s for s, p in parts.items() if not p & half)
        shuffled = list(rng.permutation(sorted(parts)))
        control = (
            shuffled[: len(train_sources)],
            shuffled[len(train_sources) : len(train_sources) + len(test_sources)],
        )
        for way, (train, test) in (
            ("disjoint", (train_sources, test_sources)),
            ("random", control),
        ):
            for name, accuracy in _refit(category, rows, cues, train, test).items():
                results.setdefault(f"{way} {name}", []).append(accuracy)
    return ", ".join(
        f"{key} {np.mean(v):.2f} +- {np.std(v):.2f}" for key, v in sorted(results.items())
    )


def _refit(
    category: str,
    rows: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    train: Sequence[str],
    test: Sequence[str],
) -> dict[str, float]:
    """Each classifier's train -> test accuracy with the given sources in each split (the
    others left out)."""
    report = order_free_report(category, deal(rows, train, test), cues)
    return {name: d["accuracy"] for name, d in (report.get("direction") or {}).items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument(
        "categories", nargs="*", metavar="DIMENSION", help="default: every dimension of the dataset"
    )
    ap.add_argument("--top", type=int, default=4, help="cues to list per dimension")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--disjoint-parts", metavar="REGEX", help="see the module docstring")
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--resplit", type=int, metavar="DRAWS", help="see the module docstring")
    args = ap.parse_args()
    rows = [r for r in load_rows(args.dataset) if r["direction"] in ("increase", "decrease")]
    categories = args.categories or sorted({r["category"] for r in rows})
    rows = [r for r in rows if r["category"] in categories]
    with ProcessPoolExecutor(args.workers) as pool:
        measured = list(pool.map(_cues, [r["path"] for r in rows], chunksize=16))
    cues = {r["item_id"]: c for r, c in zip(rows, measured, strict=True)}
    fmt = {r.get("format") or "gradual" for r in rows}
    print(
        f"order-free cues of {args.dataset} ({', '.join(sorted(fmt))}): train -> test, "
        "best of LR/HGB"
    )
    print(
        "| category | n test | sources | accuracy [95% CI] | LR | HGB | "
        "top cues (AUC for increase) |"
    )
    print("|---|---|---|---|---|---|---|")
    for category in categories:
        report = order_free_report(category, [r for r in rows if r["category"] == category], cues)
        if not report:
            print(f"| {category} | too few clips or sources | | | | | |")
            continue
        d = report["direction"]
        lo, hi = report["ci"]
        tops = ", ".join(
            f"{name.removeprefix('of_')} {c['auc']:.2f}"
            for name, c in list(report["per_cue_auc"].items())[: args.top]
        )
        print(
            f"| {category} | {d['lr']['n']} | {d['lr']['n_clusters']} | {report['accuracy']:.2f} "
            f"[{lo:.2f}, {hi:.2f}] | {d['lr']['accuracy']:.2f} | {d['hgb']['accuracy']:.2f} | "
            f"{tops} |"
        )
    if args.disjoint_parts:
        for category in categories:
            chosen = [r for r in rows if r["category"] == category]
            text = _disjoint_parts(category, chosen, cues, args.disjoint_parts, args.draws)
            print(f"{category}, parts disjoint across the splits vs a random split: {text}")
    if args.resplit:
        for category in categories:
            chosen = [r for r in rows if r["category"] == category]
            deals = redrawn_values(
                chosen,
                partial(gate_values, category, cues=cues, only=("order_free",)),
                draws=args.resplit,
            )
            text = describe(
                summarise([d["order_free"] for d in deals if "order_free" in d], TARGET_ACCURACY)
            )
            print(f"{category}, the build's speakers dealt again: {text}")


if __name__ == "__main__":
    main()

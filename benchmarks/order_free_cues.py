"""Can the label be read off order-free statistics of the whole file?

Why: a statistic that is the same when a clip plays backwards cannot measure a direction,
so on a valid benchmark it predicts none. Speech is not symmetric in time, and a renderer
that carries the asymmetry through leaks the label into such statistics (whole-file
loudness by any standard measure, percentiles, audible duration, the sum of the two edges'
cues). This trains classifiers on the train split's order-free cues and tests on the test
split; CIs resample test sources.

    python benchmarks/order_free_cues.py DATASET [CATEGORY ...] [--top 4] [--workers 2]

Prints, per category, the best classifier's direction accuracy [95% CI] and the cues whose
AUC for "increase" lies furthest from 0.5. Cues are measured from the files (not cached).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

from vocalgrad.audio import load_audio
from vocalgrad.dataset import load_rows
from vocalgrad.stimuli.audit import order_free_report
from vocalgrad.stimuli.order_free import order_free_cues


def _cues(path: str) -> dict[str, float]:
    audio, sr = load_audio(path, mono=False)
    return order_free_cues(audio, sr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("categories", nargs="*", help="default: every category of the dataset")
    ap.add_argument("--top", type=int, default=4, help="cues to list per category")
    ap.add_argument("--workers", type=int, default=1)
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


if __name__ == "__main__":
    main()

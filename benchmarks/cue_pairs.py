"""Which audit cue tells an increase clip from its decrease twin, and how often.

Why: the shortcut audit says *whether* a category's cues leak the label; declaring a cue a
target cue (`SPEC.target_cues`) needs the mechanism, which starts with the cue that
separates twins (same source, tier and curve). The README's audit table quotes these shares.

    python benchmarks/cue_pairs.py DATASET [DIMENSION ...] [--min-share 0.58]

Prints, per category, each cue whose value is larger in the increase clip in a share of
twins away from 0.5 (ties left out), with the median increase-minus-decrease difference.
Cues come from the audit's cache (`DATASET/.audit/cues.jsonl`, measured when missing).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from vocalgrad.dataset import load_rows
from vocalgrad.stimuli.audit import CUE_NAMES, dataset_cues


def twin_shares(
    rows: list[dict], cues: dict[str, dict[str, float]], category: str
) -> dict[str, tuple[float, int, float]]:
    """cue -> (share of twins with the larger value in the increase clip, twins that differ,
    median difference increase - decrease)."""
    twins: dict[tuple, dict[str, dict[str, float]]] = defaultdict(dict)
    for r in rows:
        if r["category"] == category and r["direction"] in ("increase", "decrease"):
            twins[(r["source_id"], r["tier"], r["curve"])][r["direction"]] = cues[r["item_id"]]
    pairs = [t for t in twins.values() if len(t) == 2]
    out = {}
    for name in (n for family in CUE_NAMES.values() for n in family):
        diff = np.array(
            [t["increase"].get(name, np.nan) - t["decrease"].get(name, np.nan) for t in pairs]
        )
        diff = diff[np.isfinite(diff)]
        moved = diff[diff != 0]
        if len(moved):
            out[name] = (float(np.mean(moved > 0)), len(moved), float(np.median(diff)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument(
        "categories", nargs="*", metavar="DIMENSION", help="default: every dimension of the dataset"
    )
    ap.add_argument(
        "--min-share", type=float, default=0.58, help="print cues at least this far from 0.5"
    )
    args = ap.parse_args()
    rows = load_rows(args.dataset)
    cues = dataset_cues(args.dataset, rows)
    for category in args.categories or sorted({r["category"] for r in rows}):
        print(f"## {category}")
        for name, (share, n, median) in twin_shares(rows, cues, category).items():
            if abs(share - 0.5) >= args.min_share - 0.5:
                print(
                    f"  {name:<24} increase larger in {share:.0%} of {n} twins; median difference "
                    f"{median:+.4g}"
                )


if __name__ == "__main__":
    main()

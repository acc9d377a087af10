"""Which audit cue tells an increase clip from its decrease twin, or a constant clip from the
changing ones, and how often.

Why: the shortcut audit says *whether* a category's cues leak the label; declaring a cue a
target cue (`SPEC.target_cues`) or finding what the renderer leaves behind needs the
mechanism, which starts with the cue that separates twins (same source, tier and curve) or
constants. The README's audit table and the results page quote these figures.

    python benchmarks/cue_pairs.py DATASET [DIMENSION ...] [--min-share 0.58]
        [--constants] [--sources REGEX] [--by FIELD]

Prints, per category, each cue whose value is larger in the increase clip in a share of
twins away from 0.5 (ties left out), with the median increase-minus-decrease difference;
with ``--constants``, each cue whose AUC for "constant" among all the category's clips lies
as far from 0.5. ``--sources`` keeps the sources whose id matches REGEX (``/harmonic/`` for
`tones`' harmonic complexes); ``--by`` repeats the figures for each value of a row field
(``curve``, ``tier``). Cues come from the audit's cache (`DATASET/.audit/cues.jsonl`,
measured when missing).
"""

from __future__ import annotations

import argparse
import re
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


def constant_aucs(
    rows: list[dict], cues: dict[str, dict[str, float]], category: str
) -> dict[str, tuple[float, int, int]]:
    """cue -> (AUC for "constant" over the category's clips, constant clips, changing clips)."""
    from sklearn.metrics import roc_auc_score

    members = [r for r in rows if r["category"] == category]
    y = np.array([r["direction"] == "constant" for r in members])
    out = {}
    if y.all() or not y.any():
        return out
    for name in (n for family in CUE_NAMES.values() for n in family):
        x = np.array([cues[r["item_id"]].get(name, np.nan) for r in members], dtype=float)
        ok = np.isfinite(x)
        if ok.any() and len(set(y[ok])) == 2 and np.ptp(x[ok]) > 0:
            out[name] = (float(roc_auc_score(y[ok], x[ok])), int(y[ok].sum()), int((~y[ok]).sum()))
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
    ap.add_argument(
        "--constants", action="store_true", help="constant against changing clips, by AUC"
    )
    ap.add_argument("--sources", metavar="REGEX", help="only sources whose id matches")
    ap.add_argument("--by", metavar="FIELD", help="the figures for each value of a row field")
    args = ap.parse_args()
    rows = load_rows(args.dataset)
    if args.sources:
        rows = [r for r in rows if re.search(args.sources, r["source_id"])]
    cues = dataset_cues(args.dataset, rows)
    for category in args.categories or sorted({r["category"] for r in rows}):
        members = [r for r in rows if r["category"] == category]
        values = sorted({str(r.get(args.by)) for r in members}) if args.by else [None]
        for value in values:
            print(f"## {category}" + (f", {args.by} {value}" if args.by else ""))
            chosen = [r for r in members if value is None or str(r.get(args.by)) == value]
            _print_category(chosen, cues, category, args)


def _print_category(rows: list[dict], cues: dict, category: str, args: argparse.Namespace) -> None:
    """The figures of one category's rows (`main`'s options)."""
    if args.constants:
        found = sorted(
            constant_aucs(rows, cues, category).items(), key=lambda kv: -abs(kv[1][0] - 0.5)
        )
        for name, (auc, n_constant, n_changing) in found:
            if abs(auc - 0.5) >= args.min_share - 0.5:
                print(
                    f"  {name:<24} AUC for constant {auc:.2f} ({n_constant} constant, "
                    f"{n_changing} changing clips)"
                )
        return
    for name, (share, n, median) in twin_shares(rows, cues, category).items():
        if abs(share - 0.5) >= args.min_share - 0.5:
            print(
                f"  {name:<24} increase larger in {share:.0%} of {n} twins; median difference "
                f"{median:+.4g}"
            )


if __name__ == "__main__":
    main()

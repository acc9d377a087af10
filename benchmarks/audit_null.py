"""How often does the shortcut audit fail a build with no leak at all, and how often does it
catch a planted one?

family (the audit's gates as they decide a build): each simulated build is the dataset's own
clips and cues with every twin pair's labels swapped or not at random, and which clips of a
source are its constants drawn again within the source, so no cue says anything about a label;
the audit's gates (`vocalgrad.stimuli.audit.classifiers`: each against its permutation null,
all of them one family-wise test) then decide it. The share of simulated builds with a failing
gate is the build's false-alarm rate. With `--plant NAME` the same simulated builds carry a
leak: every clip labelled increase (constant, for the `constants_*` plants) has its cues
measured again on its audio changed (a louder file, a longer tail, a buried onset, a later
onset; `PLANTS`), and the share of builds whose gate catches it is the detection rate, per
category and for the build.

    python benchmarks/audit_null.py DATASET --test family [--sims 200] [--plant NAME ...]

Two older nulls score one category's statistic under the gates the audit had before its
family-wise gates (a CI per gate):

* constant: the real constant clips left out, K changing clips of every source relabelled
  "constant" at random; the cross-fitted constant-vs-changing AUC of the better classifier.
  Nothing tells these "constants" apart, so every AUC over 0.5 is chance.
* direction: each twin pair's labels flipped at random (both clips swap), so the label says
  nothing about any cue; the direction accuracy of the better classifier (all the category's
  audited families, or the order-free family alone).

    python benchmarks/audit_null.py DATASET [CATEGORY ...] [--test constant|direction]
        [--draws 100] [--per-source 1] [--family audited|order_free]

They print, per category, the spread of the statistic and how often it crosses the old gate
(constant AUC > 0.65; direction accuracy > 0.60 or a CI that excludes 0.5).
"""

from __future__ import annotations

import argparse
import io
import time
import warnings
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import soundfile as sf
from threadpoolctl import threadpool_limits

from vocalgrad.audio import load_audio
from vocalgrad.dataset import load_rows
from vocalgrad.records import DIRECTIONS, LABELS
from vocalgrad.stimuli.audit import classifiers as C
from vocalgrad.stimuli.audit import gates as G
from vocalgrad.stimuli.audit.cache import dataset_cues
from vocalgrad.stimuli.audit.cues import (
    allowed_families,
    clip_cues,
    feature_names,
    row_parts,
    row_span,
    rows_format,
)
from vocalgrad.stimuli.audit.gates import gate_record, pair_units
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES

FLIP = {"increase": "decrease", "decrease": "increase"}
OLD_MAX_ACCURACY, OLD_MAX_AUC = 0.60, 0.65  # the gates before the family-wise ones


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
    """The changing clips with each twin pair's two labels swapped or not, at random (the
    pairs the audit's null flips, `gates.pair_units`)."""
    changing = [dict(r) for r in rows if r["direction"] in LABELS]
    units = pair_units(changing)
    flip = rng.integers(0, 2, size=int(units.max()) + 1 if units.size else 0).astype(bool)
    for r, unit in zip(changing, units, strict=True):
        if flip[unit]:
            r["direction"] = FLIP[r["direction"]]
    return changing


def shuffled_constants(rows: Sequence[Mapping], rng: np.random.Generator) -> list[dict]:
    """All clips, each source's "constant" labels moved among its clips at random (the other
    clips keep their label, or take "increase" where they held a constant's: the constant
    test reads only constant or not)."""
    kept = [r for r in rows if r["direction"] in DIRECTIONS]
    out = [dict(r, direction=r["direction"] if r["direction"] in LABELS else "increase")
           for r in kept]  # fmt: skip
    by_source: dict[str, list[int]] = {}
    for i, r in enumerate(kept):
        by_source.setdefault(r["source_id"], []).append(i)
    for idx in by_source.values():
        k = sum(kept[i]["direction"] == "constant" for i in idx)
        for i in rng.choice(idx, k, replace=False):
            out[i]["direction"] = "constant"
    return out


# Leaks planted on one label's clips, each on the audio as the build wrote it: (audio
# (samples[, channels]), sample rate, row) -> (audio of the same length, speech span).
def _louder(db: float) -> Callable:
    def plant(audio: np.ndarray, sr: int, row: Mapping) -> tuple[np.ndarray, tuple | None]:
        return audio * np.float32(10 ** (db / 20)), row_span(row)

    return plant


def _longer_tail(seconds: float) -> Callable:
    """The speech's last `seconds` played again after its end, fading out: it stays audible
    that much longer (a tail, as a reverb's), in a file of the same length."""

    def plant(audio: np.ndarray, sr: int, row: Mapping) -> tuple[np.ndarray, tuple | None]:
        n = int(round(seconds * sr))
        off = int(round(row["speech_offset_s"] * sr))
        fade = np.linspace(1.0, 0.0, n, dtype=np.float32)
        tail = audio[off - n : off] * (fade if audio.ndim == 1 else fade[:, None])
        return np.concatenate([audio[:off], tail, audio[off : len(audio) - n]]), row_span(row)

    return plant


def _buried_onset(seconds: float) -> Callable:
    """The speech's first `seconds` rise from silence (a gain t^4): a far start (tests/
    test_audit.py's `_buried_onset`)."""

    def plant(audio: np.ndarray, sr: int, row: Mapping) -> tuple[np.ndarray, tuple | None]:
        n = int(round(seconds * sr))
        on = int(round(row["speech_onset_s"] * sr))
        out = audio.copy()
        ramp = np.linspace(0.0, 1.0, n, dtype=np.float32) ** 4
        out[on : on + n] *= ramp if audio.ndim == 1 else ramp[:, None]
        return out, row_span(row)

    return plant


def _later_onset(seconds: float) -> Callable:
    """The speech moved `seconds` later in the file (the room tone before it repeated): a
    longer leading and a shorter trailing silence (tests/test_audit.py's silence leak)."""

    def plant(audio: np.ndarray, sr: int, row: Mapping) -> tuple[np.ndarray, tuple | None]:
        n = int(round(seconds * sr))
        on = int(round(row["speech_onset_s"] * sr))
        out = np.concatenate([audio[:on], audio[max(0, on - n) : on], audio[on : len(audio) - n]])
        span = row_span(row)
        return out, None if span is None else (span[0] + seconds, span[1] + seconds)

    return plant


PLANTS: dict[str, tuple[str, Callable]] = {
    "loud_1db": ("increase", _louder(1.0)),
    "tail_50ms": ("increase", _longer_tail(0.05)),
    "onset_80ms": ("decrease", _buried_onset(0.08)),
    "lead_100ms": ("increase", _later_onset(0.10)),
    "constants_3db": ("constant", _louder(3.0)),
}


def _as_written(audio: np.ndarray, sr: int) -> np.ndarray:
    """The audio as a 16-bit FLAC of it reads back (what the build would have written)."""
    buffer = io.BytesIO()
    sf.write(buffer, audio, sr, format="FLAC", subtype="PCM_16")
    buffer.seek(0)
    out, _ = sf.read(buffer, dtype="float32", always_2d=audio.ndim == 2)
    return out


def planted_cues(rows: Sequence[Mapping], name: str) -> dict[str, dict[str, float]]:
    """item_id -> cues of every clip of `rows` with plant `name` applied to its audio."""
    _, plant = PLANTS[name]
    out = {}
    for r in rows:
        audio, sr = load_audio(r["path"], mono=False)
        audio = audio[:, 0] if audio.ndim == 2 and audio.shape[1] == 1 else audio
        changed, span = plant(audio, sr, r)
        out[r["item_id"]] = clip_cues(_as_written(changed, sr), sr, span, row_parts(r))
    return out


def simulated_gates(
    category: str,
    rows: Sequence[Mapping],
    cues: Mapping[str, Mapping[str, float]],
    rng: np.random.Generator,
    planted: tuple[str, Mapping[str, Mapping[str, float]]] | None = None,
) -> dict:
    """One simulated build's category as `classifiers.judge` reads it: the gates of
    `classifiers.category_gates` on relabelled clips (twin pairs flipped for the direction
    gates, constants drawn again within each source for the constant gate), with `planted`
    = (label, cues) replacing the cues of the clips that carry that label."""
    flipped = flipped_pairs(rows, rng)
    shuffled = shuffled_constants(rows, rng)

    def with_plant(relabelled: Sequence[Mapping]) -> Mapping[str, Mapping[str, float]]:
        if planted is None:
            return cues
        label, changed = planted
        return {**cues, **{r["item_id"]: changed[r["item_id"]] for r in relabelled
                           if r["direction"] == label}}  # fmt: skip

    statistics = C._gate_statistics(
        category, flipped, with_plant(flipped), only=("direction", "order_free")
    )
    statistics.update(
        C._gate_statistics(category, shuffled, with_plant(shuffled), only=("constant",))
    )
    test = [r for r in flipped if r["split"] == "test"]
    gates = {name: gate_record(name, *g) for name, g in statistics.items()}
    n_test = len({r["source_id"] for r in test})
    return {
        "gates": gates,
        "reasons": [] if gates and n_test >= 2 else ["too few sources"],
        "n_sources_test": n_test,
    }


def family_simulation(args: argparse.Namespace) -> None:
    """The build-level false-alarm rate (no plant) or detection rate (each plant)."""
    rows = load_rows(args.dataset)
    categories = args.categories or sorted({r["category"] for r in rows})
    rows = [r for r in rows if r["category"] in categories]
    cues = dataset_cues(args.dataset, rows)
    by_category = {c: [r for r in rows if r["category"] == c] for c in categories}
    sizes = {c: len({r["source_id"] for r in mine if r["split"] == "test"}) for c, mine in
             by_category.items()}  # fmt: skip
    print(
        f"{args.dataset}: {len(categories)} categories, test sources "
        f"{min(sizes.values())}-{max(sizes.values())}, {args.sims} simulated builds a row, "
        f"seed {args.seed}"
    )
    print(
        "| plant | builds failing | categories failing (min-max over categories) | gates | "
        "critical z (median) | needed accuracy (median) | CPU s a build |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.plant or ["none"]:
        planted = None
        if name != "none":
            started = time.process_time()
            label = PLANTS[name][0]
            planted = (label, planted_cues(rows, name))
            print(f"<!-- {name}: cues measured again in {time.process_time() - started:.0f} s -->")
        rng = np.random.default_rng(args.seed)
        failed, per_category, critical, needed, seconds = [], [], [], [], []
        for k in range(args.sims):
            # each simulated build its own relabellings and deals, as two real builds have
            C.SEED = G.SEED = args.seed * 1_000_003 + k + 1
            started = time.process_time()
            simulated = {c: simulated_gates(c, mine, cues, rng, planted)
                         for c, mine in by_category.items()}  # fmt: skip
            family = C.judge(simulated)
            seconds.append(time.process_time() - started)
            verdicts = {c: s["passes"] for c, s in simulated.items()}
            failed.append(any(v is False for v in verdicts.values()))
            per_category.append([verdicts[c] is False for c in categories])
            critical.append(family["critical_z"])
            needed.append(family["needed"]["accuracy"])
        rates = np.mean(per_category, axis=0)
        worst = categories[int(np.argmin(rates))] if name != "none" else categories[
            int(np.argmax(rates))]  # fmt: skip
        n = len(failed)
        share = float(np.mean(failed))
        se = np.sqrt(share * (1 - share) / n)
        print(
            f"| {name} | {share:.1%} (+- {se:.1%}, {sum(failed)} of {n}) | "
            f"{rates.min():.1%}-{rates.max():.1%} ({'lowest' if name != 'none' else 'highest'}: "
            f"{worst}) | {family['gates']} | {np.median(critical):.2f} | "
            f"{np.median([x for x in needed if x is not None]):.3f} | {np.mean(seconds):.1f} |"
        )
        if args.verbose:
            for c, rate in zip(categories, rates, strict=True):
                print(f"    {c}: {rate:.1%}")


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
                f"{np.percentile(s[:, 0], 95):.3f} | {np.mean(s[:, 0] > OLD_MAX_AUC):.0%} | "
                f"{np.mean(s[:, 1] > 0.5):.0%} |"
            )
        else:
            excludes = (s[:, 1] > 0.5) | (s[:, 2] < 0.5)
            print(
                f"| {category} | {len(relabelled) // 2} | {s[:, 0].std():.3f} | "
                f"{s[:, 0].mean():.3f} | {np.percentile(s[:, 0], 95):.3f} | "
                f"{np.mean(s[:, 0] > OLD_MAX_ACCURACY):.0%} | {excludes.mean():.0%} |"
            )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset")
    p.add_argument("categories", nargs="*", metavar="DIMENSION", help="default: the dataset's")
    p.add_argument("--test", choices=("family", "constant", "direction"), default="constant")
    p.add_argument("--sims", type=int, default=200, help="simulated builds (family)")
    p.add_argument(
        "--plant",
        action="append",
        choices=("none", *PLANTS),
        help="a leak to plant (family; repeatable; 'none' is the null)",
    )
    p.add_argument("--verbose", action="store_true", help="family: the rate per category")
    p.add_argument("--draws", type=int, default=100)
    p.add_argument("--per-source", type=int, default=1, help="pseudo-constants a source")
    p.add_argument("--family", choices=("audited", "order_free"), default="audited")
    p.add_argument("--seed", type=int, default=0)
    warnings.filterwarnings("ignore", category=UserWarning)
    args = p.parse_args(argv)
    with threadpool_limits(1):  # small fits: BLAS threads cost more than they save
        family_simulation(args) if args.test == "family" else run(args)


if __name__ == "__main__":
    main()

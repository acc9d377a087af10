"""Who hears which clip, in which order: balanced so no condition predicts the label.

The pool holds the same number of increase and decrease clips in every (category, tier,
curve) cell, and the dealing gives each annotator exactly as many increase as decrease clips
in every cell they hear; so neither tier nor curve nor position carries the answer (the
published human subset failed here). Sources are spread: a clip's source is reused in another
category only when the dataset has too few sources.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vocalgrad.human.study import StudyConfig, StudyError
from vocalgrad.records import LABELS

TIER_ORDER = {"none": 0, "low": 1, "mid": 2, "high": 3}


@dataclass(frozen=True)
class Slot:
    """One trial in an annotator's plan: kind is screening, practice, test or catch."""

    kind: str
    item_id: str | None = None
    seed: int | None = None


@dataclass
class Plan:
    """The pool and each annotator's ordered trials; `notes` lists balance compromises."""

    pool: dict[str, list[str]]
    trials: dict[str, list[Slot]]
    notes: list[str] = field(default_factory=list)


def _rng(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(key.encode())])


def _eligible(rows: Sequence[Mapping], split: str, categories: Sequence[str]) -> list[Mapping]:
    return [
        r for r in rows
        if r["split"] == split and r["category"] in categories
        and r["direction"] in LABELS and r.get("verified", True) is not False
    ]  # fmt: skip


def study_categories(rows: Sequence[Mapping], config: StudyConfig) -> list[str]:
    present = sorted({r["category"] for r in rows if r["split"] == config.split})
    if not config.categories:
        return present
    missing = [c for c in config.categories if c not in present]
    if missing:
        raise StudyError(f"dimensions {missing} have no {config.split} clips in this dataset")
    return list(config.categories)


def select_pool(
    rows: Sequence[Mapping], config: StudyConfig
) -> tuple[dict[str, list[Mapping]], list[str]]:
    """Per category, `items_per_cell` clips of each direction in each (tier, curve) cell.

    Greedy, category-interleaved: each pick prefers the source used least in other categories,
    then least in this one (so increase and decrease of a cell come from different voices).
    """
    categories = study_categories(rows, config)
    eligible = _eligible(rows, config.split, categories)
    cells: dict[tuple[str, str, str], dict[str, list[Mapping]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in sorted(eligible, key=lambda r: str(r["item_id"])):
        cells[(r["category"], r["tier"], r["curve"])][r["direction"]].append(r)
    notes: list[str] = []
    rng = _rng(config.seed, "pool")
    tiebreak = {str(r["item_id"]): float(rng.random()) for r in eligible}
    used_by: dict[str, Counter] = defaultdict(Counter)  # source -> category counts
    pool: dict[str, list[Mapping]] = {c: [] for c in categories}
    taken: set[str] = set()
    keys = sorted({(t, cu) for _, t, cu in cells}, key=lambda k: (TIER_ORDER.get(k[0], 9), k[1]))
    wanted = {}
    for cat in categories:
        for tier, curve in keys:
            by_dir = cells.get((cat, tier, curve))
            if not by_dir:
                continue
            n = min(config.items_per_cell, *(len(by_dir[d]) for d in LABELS))
            if n < config.items_per_cell:
                notes.append(f"{cat} {tier} {curve}: only {n} clip(s) per direction available")
            wanted[(cat, tier, curve)] = n
    for rep in range(max(wanted.values(), default=0)):  # no cell holds more than it has
        for tier, curve in keys:
            for direction in LABELS:
                for cat in categories:
                    if wanted.get((cat, tier, curve), 0) <= rep:
                        continue
                    options = [
                        r
                        for r in cells[(cat, tier, curve)][direction]
                        if str(r["item_id"]) not in taken
                    ]

                    def cost(r: Mapping, cat: str = cat) -> tuple[int, int, float]:
                        use = used_by[r["source_id"]]
                        return (sum(use.values()) - use[cat], use[cat], tiebreak[str(r["item_id"])])

                    best = min(options, key=cost)
                    taken.add(str(best["item_id"]))
                    used_by[best["source_id"]][cat] += 1
                    pool[cat].append(best)
    shared = [s for s, use in used_by.items() if len(use) > 1]
    if shared:
        notes.append(f"{len(shared)} source(s) appear in more than one dimension (too few sources)")
    return pool, notes


def annotator_ids(n: int) -> list[str]:
    width = max(2, len(str(n)))
    return [f"a{i + 1:0{width}d}" for i in range(n)]


def deal(pool: Mapping[str, Sequence[Mapping]], config: StudyConfig) -> dict[str, list[str]]:
    """k distinct annotators per item; per annotator and cell, as many increase as decrease.

    A running offset walks the annotators round-robin; the decrease clips of a cell restart at
    the offset the increase clips used, so both directions land on the same annotators.
    """
    ids = annotator_ids(config.n_annotators)
    n, k = len(ids), config.annotators_per_item
    out: dict[str, list[str]] = {a: [] for a in ids}
    offset = 0
    for cat in pool:
        cells: dict[tuple[str, str], dict[str, list[Mapping]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for r in pool[cat]:
            cells[(r["tier"], r["curve"])][r["direction"]].append(r)
        for key in sorted(cells):
            m = len(cells[key]["increase"])
            for direction in LABELS:
                for j, r in enumerate(cells[key][direction]):
                    for a in range(k):
                        out[ids[(offset + j * k + a) % n]].append(str(r["item_id"]))
            offset = (offset + m * k) % n
    return out


def _pick_balanced(
    candidates: Mapping[str, Mapping[str, list[Mapping]]],
    n: int,
    rng: np.random.Generator,
    exclude: set[str],
) -> list[str]:
    """n item ids cycling through categories and alternating directions, seeded."""
    cats = [c for c in candidates if any(candidates[c][d] for d in LABELS)]
    picks: list[str] = []
    if not cats:
        return picks
    start = int(rng.integers(2))
    for i in range(n):
        cat = cats[i % len(cats)]
        # alternate directions, and with an even number of categories shift every round so
        # that no category always gets the same direction
        shift = i // len(cats) if len(cats) % 2 == 0 else 0
        direction = LABELS[(start + i + shift) % 2]
        options = [r for r in candidates[cat][direction] if str(r["item_id"]) not in exclude]
        if not options:
            options = [
                r for d in LABELS for r in candidates[cat][d] if str(r["item_id"]) not in exclude
            ]
        if not options:
            continue
        choice = str(options[int(rng.integers(len(options)))]["item_id"])
        exclude.add(choice)
        picks.append(choice)
    return picks


def _strongest(
    rows: Sequence[Mapping], split: str | None, categories: Sequence[str], avoid: set[str]
) -> dict[str, dict[str, list[Mapping]]]:
    """Per category and direction, the clips of the largest tier (and magnitude) available."""
    out: dict[str, dict[str, list[Mapping]]] = {}
    for cat in categories:
        rs = [
            r
            for r in rows
            if r["category"] == cat
            and r["direction"] in LABELS
            and (split is None or r["split"] == split)
            and r.get("verified", True) is not False
            and str(r["item_id"]) not in avoid
        ]
        if not rs:
            continue
        top = max(TIER_ORDER.get(r["tier"], 0) for r in rs)
        rs = [r for r in rs if TIER_ORDER.get(r["tier"], 0) == top]
        mag = max(abs(float(r.get("magnitude") or 0.0)) for r in rs)
        rs = [r for r in rs if abs(float(r.get("magnitude") or 0.0)) >= mag - 1e-9] or rs
        out[cat] = {
            d: sorted((r for r in rs if r["direction"] == d), key=lambda r: str(r["item_id"]))
            for d in LABELS
        }
    return out


def _split_practice_catch(
    spare: Mapping[str, Mapping[str, list[Mapping]]],
    seed: int,
) -> tuple[dict[str, dict[str, list[Mapping]]], dict[str, dict[str, list[Mapping]]]]:
    """Study-wide disjoint practice and catch clips from one set (a build without a train split).

    Practice answers are shown, so a clip that is practice for one link must never be a catch
    trial for another: a second link or a colluding annotator would learn the catch answers.
    Per category and direction, a seeded half goes to practice and the rest (at least one clip)
    to catch; the split depends on the study seed and the clips only, so replacement slots
    planned later get the same one.
    """
    practice: dict[str, dict[str, list[Mapping]]] = {}
    catch: dict[str, dict[str, list[Mapping]]] = {}
    for cat, by_dir in spare.items():
        practice[cat], catch[cat] = {}, {}
        for d in LABELS:
            rs = list(by_dir[d])
            order = _rng(seed, f"practice:{cat}:{d}").permutation(len(rs))
            half = len(rs) // 2
            practice[cat][d] = sorted(
                (rs[i] for i in order[:half]), key=lambda r: str(r["item_id"])
            )
            catch[cat][d] = sorted((rs[i] for i in order[half:]), key=lambda r: str(r["item_id"]))
    return practice, catch


def plan_annotator(
    annotator: str,
    items: Sequence[str],
    rows: Sequence[Mapping],
    pool_ids: set[str],
    config: StudyConfig,
    categories: Sequence[str],
) -> list[Slot]:
    """Screening, then practice (train clips if any), then test and catch trials shuffled."""
    rng = _rng(config.seed, f"annotator:{annotator}")
    slots = [
        Slot("screening", seed=int(rng.integers(2**31))) for _ in range(config.screening_trials)
    ]
    spare = _strongest(rows, config.split, categories, avoid=set(pool_ids))
    if any(r["split"] == "train" for r in rows):
        practice_src, catch_src = _strongest(rows, "train", categories, avoid=set()), spare
    else:
        practice_src, catch_src = _split_practice_catch(spare, config.seed)
    used: set[str] = set(items)
    slots += [
        Slot("practice", i) for i in _pick_balanced(practice_src, config.n_practice, rng, used)
    ]
    if not catch_src:  # every strong clip is in the pool: use ones this annotator does not hear
        catch_src = _strongest(rows, config.split, categories, avoid=set(items))
    catches = _pick_balanced(catch_src, config.n_catch, rng, used)
    main = [Slot("test", i) for i in items] + [Slot("catch", i) for i in catches]
    order = rng.permutation(len(main))
    return slots + [main[i] for i in order]


def make_plan(rows: Sequence[Mapping], config: StudyConfig) -> Plan:
    """The whole study: pool, dealing, and every annotator's ordered trials."""
    pool, notes = select_pool(rows, config)
    if not any(pool.values()):
        raise StudyError(
            f"no {config.split} clips with both directions in any cell; nothing to ask"
        )
    config.check_size(pool=sum(len(rs) for rs in pool.values()))
    dealt = deal(pool, config)
    pool_ids = {str(r["item_id"]) for rs in pool.values() for r in rs}
    cats = list(pool)
    trials = {
        a: plan_annotator(a, items, rows, pool_ids, config, cats) for a, items in dealt.items()
    }
    return Plan({c: [str(r["item_id"]) for r in rs] for c, rs in pool.items()}, trials, notes)

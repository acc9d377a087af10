"""`eval --limit N`: a subset balanced over every label the score depends on.

A limited run must score a listener as the whole test split would, give or take the sampling
noise of fewer items. Accuracy, d′ and the criterion are read per category over changing
clips, and a listener's bias (always "increase") earns exactly half of a set with as many
increase as decrease clips: so the subset takes the two clips of a twin pair (same source,
tier, curve and magnitude, opposite directions) together. Within a category it spreads the
pairs over sources first (a run of 2 items per source rests on every source), then over
tiers, then over curves, each within one pair of even; categories share the limit equally.
Constant clips (their own line of the score) come after every source has a pair, in their
share of the category. The order depends on the labels and hashed names only, so the same
limit on the gradual, comparison and recognition builds of one source set asks about the
same sources and tiers.

Whatever cannot be balanced (a limit below two items per category, an odd share with no
constant to fill it, a category with fewer items than its share) is said in `problems`,
which the run prints and records in its manifest.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import zip_longest

CHANGING = ("increase", "decrease")


def _h(*parts: object) -> str:
    return hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()


def _tier(row: dict) -> str:
    """The magnitude label a row's tier stands for (the magnitude where it has no tier)."""
    tier = row.get("tier")
    return str(tier if tier not in (None, "") else row.get("magnitude"))


def _curve(row: dict) -> str:
    return str(row.get("curve"))


def _twin_key(row: dict) -> tuple:
    """What the two clips of a twin pair share: all labels but the direction."""
    if row.get("pair_id"):
        return (row["category"], row["pair_id"])
    return (row["category"], row["source_id"], _tier(row), _curve(row), row.get("magnitude"))


@dataclass
class _Category:
    """One category's candidates: twin pairs by source, constants, and the rest."""

    name: str
    rows: list[dict]
    pairs: dict[str, list[tuple[dict, dict]]] = field(default_factory=dict)
    constants: list[dict] = field(default_factory=list)
    others: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        twins: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
        for row in sorted(self.rows, key=lambda r: r["item_id"]):
            direction = row.get("direction")
            if direction in CHANGING:
                twins[_twin_key(row)][direction].append(row)
            elif direction == "constant":
                self.constants.append(row)
            else:
                self.others.append(row)
        for by_direction in twins.values():
            up, down = by_direction["increase"], by_direction["decrease"]
            for a, b in zip(up, down, strict=False):
                self.pairs.setdefault(a["source_id"], []).append((a, b))
            self.others += up[len(down) :] + down[len(up) :]  # a clip whose twin is missing

    @property
    def n_pairs(self) -> int:
        return sum(len(p) for p in self.pairs.values())

    def source_order(self) -> list[str]:
        sources = {r["source_id"] for r in self.rows}
        return sorted(sources, key=lambda s: _h(self.name, s))


def _budgets(sizes: dict[str, int], limit: int) -> dict[str, int]:
    """The limit shared equally over categories in whole twin pairs, round after round in name
    order (the last item of an odd limit alone); a category with fewer items than its share
    leaves the rest to the others."""
    budget = dict.fromkeys(sizes, 0)
    left = limit
    while left > 0:
        open_ = [c for c in sorted(sizes) if budget[c] < sizes[c]]
        if not open_:
            break
        step = 2 if left >= 2 else 1
        for cat in open_:
            take = min(step, sizes[cat] - budget[cat], left)
            budget[cat] += take
            left -= take
    return budget


def _pick_pairs(cat: _Category, n: int) -> list[tuple[dict, dict]]:
    """`n` twin pairs, one at a time: from a source with the fewest pairs taken so far (the
    first in hashed order that has it), the pair whose tier, then curve, then (tier, curve)
    cell is least used so far."""
    left: dict[str, dict[tuple[str, str], list[tuple[dict, dict]]]] = {}
    for source, pairs in cat.pairs.items():
        for pair in sorted(pairs, key=lambda p: (_h(cat.name, p[0]["item_id"]), p[0]["item_id"])):
            cell = (_tier(pair[0]), _curve(pair[0]))
            left.setdefault(source, {}).setdefault(cell, []).append(pair)
    order = [s for s in cat.source_order() if s in left]
    cell_names = sorted({cell for cells in left.values() for cell in cells})
    tier_hash = {t: _h(cat.name, t) for t, _ in cell_names}
    cell_hash = {cell: _h(cat.name, *cell) for cell in cell_names}
    taken: Counter = Counter()
    tiers: Counter = Counter()
    curves: Counter = Counter()
    cells: Counter = Counter()
    out: list[tuple[dict, dict]] = []
    while len(out) < n:
        open_ = [s for s in order if any(left[s].values())]
        if not open_:
            break
        fewest = min(taken[s] for s in open_)
        candidates = [s for s in open_ if taken[s] == fewest]
        ranked = sorted(
            cell_names,
            key=lambda c: (tiers[c[0]], tier_hash[c[0]], curves[c[1]], cells[c], cell_hash[c]),
        )
        source, cell = next((s, c) for c in ranked for s in candidates if left[s].get(c))
        out.append(left[source][cell].pop(0))
        taken[source] += 1
        tiers[cell[0]] += 1
        curves[cell[1]] += 1
        cells[cell] += 1
    return out


def _pick_singles(rows: list[dict], n: int, cat: str, taken: Counter) -> list[dict]:
    """`n` single clips, each from the source with the fewest items taken so far."""
    left = sorted(rows, key=lambda r: _h(cat, r["item_id"]))
    out: list[dict] = []
    while len(out) < n and left:
        best = min(left, key=lambda r: (taken[r["source_id"]], _h(cat, r["source_id"])))
        left.remove(best)
        taken[best["source_id"]] += 1
        out.append(best)
    return out


def _constant_count(cat: _Category, budget: int) -> int:
    """How many constant clips a category's share holds: their share of the category, after
    one pair per source, with an even rest for the pairs where it can."""
    n_const = len(cat.constants)
    if not n_const:
        return 0
    target = budget * n_const / len(cat.rows)
    first_round = min(len(cat.pairs), cat.n_pairs, budget // 2)
    top = min(n_const, max(0, budget - 2 * first_round))
    fits = [q for q in range(top + 1) if 2 * cat.n_pairs + len(cat.others) + q >= budget] or [top]
    even = [q for q in fits if (budget - q) % 2 == 0 and (budget - q) // 2 <= cat.n_pairs]
    return min(even or fits, key=lambda q: (abs(q - target), q))


def _category_subset(cat: _Category, budget: int) -> list[list[dict]]:
    """A category's units (a twin pair, or one clip) in the order they are asked."""
    if budget >= len(cat.rows):
        chosen_pairs = _pick_pairs(cat, cat.n_pairs)
        singles = sorted(cat.constants + cat.others, key=lambda r: _h(cat.name, r["item_id"]))
        return [[a, b] for a, b in chosen_pairs] + [[r] for r in singles]
    q = _constant_count(cat, budget)
    pairs = _pick_pairs(cat, min(cat.n_pairs, (budget - q) // 2))
    taken = Counter(r["source_id"] for pair in pairs for r in pair)
    rest = budget - q - 2 * len(pairs)
    others = _pick_singles(cat.others, rest, cat.name, taken)
    rest -= len(others)
    constants = _pick_singles(cat.constants, q + rest, cat.name, taken)
    rest = budget - 2 * len(pairs) - len(others) - len(constants)
    if rest > 0:  # an odd share and nothing single left: one clip of a pair, said below
        spare = [p for ps in cat.pairs.values() for p in ps if p not in pairs]
        others += [p[0] for p in sorted(spare, key=lambda p: _h(cat.name, p[0]["item_id"]))][:rest]
    units: list[list[dict]] = [[a, b] for a, b in pairs]
    singles = [[r] for r in constants + others]
    if singles:  # spread the single clips evenly through the pairs
        step = (len(units) + len(singles)) / len(singles)
        for k, unit in enumerate(singles):
            units.insert(min(len(units), round(k * step + step / 2)), unit)
    return units


def _spread(rows: Sequence[dict], key) -> dict[str, int]:
    return dict(sorted(Counter(key(r) for r in rows).items()))


def _problems(cat: str, chosen: list[dict], full: list[dict]) -> list[str]:
    """What keeps a category's subset from scoring as its full set would."""
    out = []
    up = sum(r.get("direction") == "increase" for r in chosen)
    down = sum(r.get("direction") == "decrease" for r in chosen)
    if up != down:
        out.append(f"{cat}: {up} increase vs {down} decrease clips")
    changing = [r for r in chosen if r.get("direction") in CHANGING]
    all_changing = [r for r in full if r.get("direction") in CHANGING]
    for label, key in (("tier", _tier), ("curve", _curve)):
        have, whole = Counter(map(key, changing)), Counter(map(key, all_changing))
        if not changing or len(whole) < 2:
            continue
        share = {v: len(changing) * n / len(all_changing) for v, n in whole.items()}
        even = len(changing) / len(whole)
        # counts go in pairs: the nearest even count is within 1 of a share, plus one pair;
        # a level is off when it is that far from both its share of the full set and an
        # even share (the two differ where the build refused a level for some sources)
        off = [v for v in whole if min(abs(have[v] - share[v]), abs(have[v] - even)) > 3]
        if off:
            spread = ", ".join(f"{v} {have[v]}" for v in sorted(whole))
            out.append(f"{cat}: {label}s {spread} (more than one pair off their shares)")
    return out


def balanced_subset(items: Sequence[dict], limit: int) -> tuple[list[dict], dict]:
    """At most `limit` items, balanced over what the score depends on (see the module).

    Parameters
    ----------
    items : sequence of dict
        The dataset rows a run would ask (one split, one format).
    limit : int
        How many items to ask at most (`eval --limit`).

    Returns
    -------
    list of dict
        The chosen rows, categories interleaved, the clips of a twin pair side by side.
    dict
        What was chosen: ``limit``, ``of`` (items available), ``n``, ``whole`` (the limit
        covers every item), ``balanced`` and its ``problems`` (empty when balanced),
        ``per_category`` (items, increase, decrease,
        constant, sources, tiers and curves of the changing clips) and ``items_sha256``
        (the chosen item ids, so a resumed run can tell a different selection).
    """
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for row in items:
        by_cat[row["category"]].append(row)
    cats = {name: _Category(name, rows) for name, rows in sorted(by_cat.items())}
    budgets = _budgets({name: len(c.rows) for name, c in cats.items()}, limit)
    units = {name: _category_subset(cats[name], budgets[name]) for name in cats}
    chosen = [
        row
        for turn in zip_longest(*units.values())
        for unit in turn
        if unit is not None
        for row in unit
    ]
    per_category: dict[str, dict] = {}
    problems: list[str] = []
    whole = limit >= len(items)  # not a subset: the split scores as itself
    if limit < 2 * len(cats):
        problems.append(
            f"a limit of {limit} is fewer than one twin pair in each of {len(cats)} "
            + ("category" if len(cats) == 1 else "categories")
        )
    most = max(budgets.values(), default=0)
    for name, cat in cats.items():
        rows = [r for unit in units[name] for r in unit]
        changing = [r for r in rows if r.get("direction") in CHANGING]
        per_category[name] = {
            "items": len(rows),
            "of": len(cat.rows),
            "increase": sum(r.get("direction") == "increase" for r in rows),
            "decrease": sum(r.get("direction") == "decrease" for r in rows),
            "constant": sum(r.get("direction") == "constant" for r in rows),
            "sources": len({r["source_id"] for r in changing}),
            "tiers": _spread(changing, _tier),
            "curves": _spread(changing, _curve),
        }
        problems += _problems(name, rows, cat.rows)
        if budgets[name] == len(cat.rows) and most - budgets[name] > 2:
            problems.append(
                f"{name}: only {len(cat.rows)} items, where other dimensions give {most}"
            )
    if whole:
        problems = []
    report = {
        "limit": limit,
        "of": len(items),
        "n": len(chosen),
        "whole": whole,
        "balanced": not problems,
        "problems": problems,
        "per_category": per_category,
        "items_sha256": _h(*sorted(r["item_id"] for r in chosen)),
    }
    return chosen, report


def describe(report: dict) -> str:
    """One line for the console: what a limited run asks, and whether it is balanced."""
    cats = report["per_category"].values()

    def span(values: list[int]) -> str:
        return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"

    if report.get("whole"):
        return f"--limit {report['limit']}: every one of the {report['n']} items"
    text = (
        f"--limit {report['limit']}: {report['n']} of {report['of']} items, "
        f"{span([c['items'] for c in cats])} per dimension: "
        f"{span([c['increase'] for c in cats])} increase and "
        f"{span([c['decrease'] for c in cats])} decrease clips (twin pairs) from "
        f"{span([c['sources'] for c in cats])} sources, "
        f"{span([c['constant'] for c in cats])} constant"
    )
    if report["balanced"]:
        return text + ", balanced over direction, tier and curve"
    return text + "; NOT balanced, the score may be biased: " + "; ".join(report["problems"])

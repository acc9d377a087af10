"""Which clips a config asks for: conditions per category and opaque, seeded item ids."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

from vocalgrad import dimensions, formats
from vocalgrad.signal.trajectories import progress
from vocalgrad.stimuli.config import BuildConfig


@dataclass(frozen=True)
class Condition:
    """One cell of the grid. Constant clips have tier = curve = "none"; [start, end] is the mid
    tier's range and `ranges` every planned tier's, which their held value is drawn from
    (`held_constant`); a source has `BuildConfig.constants` of them per category, told apart
    by `replicate`. A question format plans its own curves (`QuestionFormat.curves`): in a
    held format the curve is "held", the parameter held at start and end (comparison: the two
    parts) or at end only (recognition)."""

    category: str
    tier: str
    curve: str
    direction: str  # "increase", "decrease" or "constant"
    magnitude: float
    start: float
    end: float
    format: str = formats.DEFAULT
    # constant clips: the (start, end) of every planned tier; the held value is drawn from one of
    # them at random (`held_constant`). With an endpoint rove, each tier's rove window instead,
    # and a changing clip's own window (one range). Not part of the key: item ids do not
    # depend on it.
    ranges: tuple[tuple[float, float], ...] = ()
    # constant clips: the curves the dimension's changing clips follow; the held value is a
    # moment of one of them (`held_constant`). Not part of the key.
    curves: tuple[str, ...] = ()
    endpoint_rove: bool = False  # the path is placed at random within its window (`roved`)
    replicate: int = 0  # which of a source's constant clips (0 for every changing one)
    # Two-dimension formats: the second dimension's own condition, changing in the same clip
    # (`QuestionFormat.planned` pairs them), and the half of the speech span a change is
    # confined to ("first" or "second"; "" for the whole span). Part of the key when set.
    also: Condition | None = None
    half: str = ""
    # (slot, of n) of the overall level rove among a source's clips of this category and kind:
    # changing pairs by pair key, constants by replicate (`with_rove_strata`); None: drawn
    # alone from the rove key. Not part of the key.
    rove_stratum: tuple[int, int] | None = None

    @property
    def key(self) -> str:
        """The first constant's key is what it was when a source had one constant."""
        return (
            f"{self.category}|{self.tier}|{self.curve}|{self.direction}|"
            f"{self.magnitude:g}{self._layers}{self._fmt}"
            f"{f'|{self.replicate}' if self.replicate else ''}"
        )

    @property
    def pair_key(self) -> str:
        """Both directions of one (category, tier, curve) share this key; in a two-dimension
        format, every combination of both dimensions' directions and halves does."""
        second = f"|+{self.also.category}" if self.also is not None else ""
        return f"{self.category}|{self.tier}|{self.curve}{second}{self._fmt}"

    @property
    def _layers(self) -> str:
        """What a half and a second dimension add to the key (nothing for one whole-span
        dimension, so keys stay as they were before two-dimension formats)."""
        out = f"|{self.half}" if self.half else ""
        if self.also is not None:
            out += f"|+{self.also.category}|{self.also.direction}|{self.also.magnitude:g}"
            out += f"|{self.also.half}" if self.also.half else ""
        return out

    def twin(self) -> Condition:
        """The other direction of the same pair (a constant is its own)."""
        if self.direction == "constant":
            return self
        other = "decrease" if self.direction == "increase" else "increase"
        return dataclasses.replace(self, direction=other, start=self.end, end=self.start)

    @property
    def _fmt(self) -> str:
        """The format's key suffix (`QuestionFormat.key_suffix`): none for the default
        format, whose keys (and item ids) stay as they were before formats existed."""
        return formats.get(self.format).key_suffix


def plan_conditions(config: BuildConfig) -> tuple[list[Condition], list[dict]]:
    """All conditions, plus the ones refused because they would change nothing at the rate."""
    conditions: list[Condition] = []
    refused: list[dict] = []
    form = formats.get(config.format)
    curves = form.curves(config.curves)
    for name in config.categories:
        dim = dimensions.get(name)
        spec = dim.SPEC
        magnitudes = {**spec.tiers, **config.magnitudes.get(name, {})}
        if config.design == "psychometric":
            levels = design_magnitudes(name, config.levels, config.sample_rate)
            magnitudes = {**magnitudes, **{f"p{i + 1}": m for i, m in enumerate(levels)}}
        tiers = (
            [f"p{i + 1}" for i in range(config.levels)]
            if config.design == "psychometric"
            else config.tiers
        )
        for tier in tiers:
            magnitude = float(magnitudes[tier])
            reason = dim.inaudible_reason(magnitude, config.sample_rate)
            if reason:
                refused.append(
                    {"category": name, "tier": tier, "magnitude": magnitude, "reason": reason}
                )
                continue
            low, high = dim.endpoints(magnitude, config.sample_rate)
            rove = {}
            if config.rove_endpoints:
                rove = {
                    "ranges": (rove_window(name, low, high, config.sample_rate),),
                    "endpoint_rove": True,
                }
            for curve in curves:
                for direction, a, b in (("increase", low, high), ("decrease", high, low)):
                    conditions.append(
                        Condition(
                            name, tier, curve, direction, magnitude, a, b, config.format, **rove
                        )
                    )
        if config.constants and form.constants:
            low, high = dim.endpoints(float(magnitudes["mid"]), config.sample_rate)
            ranges = tuple(
                c.ranges[0] if config.rove_endpoints else (c.start, c.end)
                for c in conditions
                if c.category == name and c.direction == "increase" and c.curve == curves[0]
            )
            conditions.extend(
                Condition(
                    name,
                    "none",
                    "none",
                    "constant",
                    0.0,
                    low,
                    high,
                    ranges=ranges,
                    curves=tuple(curves),
                    endpoint_rove=config.rove_endpoints,
                    replicate=replicate,
                )
                for replicate in range(config.constants)
            )
    conditions, paired_refused = form.planned(conditions)
    return with_rove_strata(conditions), refused + paired_refused


def with_rove_strata(conditions: list[Condition]) -> list[Condition]:
    """The conditions with their level rove strata (`Condition.rove_stratum`): within each
    category, every changing pair (by pair key, in plan order) one slot of as many as there
    are pairs, and every constant (by replicate) one of as many as there are constants.
    Why: the render then spreads a source's pairs, and its constants, over the whole rove
    (`neutralise.stratified_rove_gain_db`), so neither kind comes out louder by chance.

    Parameters
    ----------
    conditions : list of Condition
        A build's planned conditions.

    Returns
    -------
    list of Condition
        The same conditions, in the same order, each with its `rove_stratum`.
    """
    pairs: dict[str, dict[str, int]] = {}
    constants: dict[str, int] = {}
    for c in conditions:
        if c.direction == "constant":
            constants[c.category] = max(constants.get(c.category, 0), c.replicate + 1)
        else:
            keys = pairs.setdefault(c.category, {})
            keys.setdefault(c.pair_key, len(keys))
    return [
        dataclasses.replace(
            c,
            rove_stratum=(c.replicate, constants[c.category])
            if c.direction == "constant"
            else (pairs[c.category][c.pair_key], len(pairs[c.category])),
        )
        for c in conditions
    ]


def design_magnitudes(category: str, levels: int = 6, sr: int = 16000) -> list[float]:
    """Log-spaced magnitudes over the dimension's declared psychometric range (from below a
    typical human threshold to beyond the published high tier), weakest change first."""
    lo, hi = dimensions.get(category).SPEC.psychometric_range
    magnitudes = [float(m) for m in np.geomspace(lo, hi, levels)]
    return sorted(
        magnitudes, key=lambda m: change_size(category, *dimensions.get(category).endpoints(m, sr))
    )


def change_size(category: str, start: float, end: float) -> float:
    """How big a change is, in the dimension's own terms: |end - start| on its scale
    (semitones, dB, ratio, bits...), or octaves for log-scale parameters. The common axis
    for psychometric functions, whichever way the raw parameter runs."""
    if dimensions.get(category).SPEC.scale == "log":
        return float(abs(np.log2(end / start)))
    return float(abs(end - start))


def stratified(condition: Condition, n_constants: int, seed: int, source_id: str) -> Condition:
    """A source's constant clips spread evenly over the planned tiers' ranges (`ranges`):
    systematic sampling from a start drawn per (seed, source, category), so with one constant
    per tier each tier is held once, and with fewer or more every range is equally likely.
    Why several constants: the audit's constant test is an AUC over the constant clips, and
    with one per source it spread so wide under no leak at all that a demo-size build
    often failed some category by chance
    (`benchmarks/audit_null.py`; the design notes)."""
    if condition.direction != "constant" or len(condition.ranges) < 2:
        return condition
    digest = hashlib.sha256(f"{seed}|{source_id}|{condition.category}".encode()).hexdigest()
    start = float(np.random.default_rng([seed, int(digest[:16], 16), 17]).uniform())
    n = len(condition.ranges)
    index = int((condition.replicate + start) * n / max(n_constants, 1)) % n
    return dataclasses.replace(condition, ranges=(condition.ranges[index],))


def held_constant(condition: Condition, seed: int, item: str) -> Condition:
    """The constant control holds one value, drawn per clip where the changing clips spend
    their time: one of `ranges` at random (a build leaves each constant one, `stratified`),
    then one of `curves` at random and a moment of its course, uniform over the speech span
    (on the dimension's scale: a point uniform within the range on a linear course, near an
    end on a jump). Without `curves`, or with an endpoint rove, a point uniform within the
    range; the mid tier's range without `ranges`. The dimension is present, it just does not
    change. A fixed value (the middle of the range) would make "a middling amount over the
    whole clip" a cue that tells constant clips from changing ones, the mid tier alone would
    leave out the high tier's extremes, and a point uniform within the range, where a jump
    spends its time at the ends, made any whole-file statistic that bends with the value (a
    file's compressed size under distortion) tell constants apart (see the design notes)."""
    rng = np.random.default_rng([seed, int(item, 16), 11])
    u = float(rng.uniform())
    lo, hi = condition.start, condition.end
    if condition.ranges:
        lo, hi = condition.ranges[int(rng.integers(len(condition.ranges)))]
    if condition.curves and not condition.endpoint_rove:
        curve = condition.curves[int(rng.integers(len(condition.curves)))]
        u = float(progress(curve, np.array([u]), 0.0, 1.0)[0])
    spec = dimensions.get(condition.category).SPEC
    if spec.rove and not condition.endpoint_rove:  # spread by the rove, as changing clips are
        value = (lo + hi) / 2
    elif spec.scale == "log":
        value = float(np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo))))
    else:
        value = lo + u * (hi - lo)
    return dataclasses.replace(condition, start=value, end=value)


def roved(condition: Condition, seed: int, key: str) -> Condition:
    """The condition shifted by a rove drawn from (global seed, the clip's rove key: see
    `render.rove_key`): with an endpoint rove, the path placed uniformly within its window
    (on the dimension's scale; a constant was already spread by `held_constant`), else
    shifted within +-SPEC.rove (linear scale)."""
    rng = np.random.default_rng([seed, int(key, 16), 13])
    if condition.endpoint_rove:
        if condition.direction == "constant":
            return condition
        ((low, high),) = condition.ranges
        start, end = (_to_scale(condition.category, v) for v in (condition.start, condition.end))
        offset = float(
            rng.uniform(
                _to_scale(condition.category, low) - min(start, end),
                _to_scale(condition.category, high) - max(start, end),
            )
        )
        return dataclasses.replace(
            condition,
            start=_from_scale(condition.category, start + offset),
            end=_from_scale(condition.category, end + offset),
        )
    rove = dimensions.get(condition.category).SPEC.rove
    if not rove:
        return condition
    offset = float(rng.uniform(-rove, rove))
    return dataclasses.replace(
        condition, start=condition.start + offset, end=condition.end + offset
    )


# An endpoint rove reaches this many changes beyond each end of a path. Placed uniformly in
# a window 7 changes wide, the path's start (or end) tells an observer reading one end the
# direction at most 0.5 + 1/(4 * 3) = 0.58 of the time, wherever the domain leaves room.
ENDPOINT_ROVE = 3.0


def rove_window(category: str, start: float, end: float, sr: int) -> tuple[float, float]:
    """Where an endpoint rove may place the path from `start` to `end`: ENDPOINT_ROVE
    changes beyond each of its ends (on the dimension's scale), cut to the dimension's
    `domain`, which never cuts into the path itself."""
    low, high = sorted(_to_scale(category, v) for v in (start, end))
    reach = ENDPOINT_ROVE * (high - low)
    d_low, d_high = (_to_scale(category, v) for v in dimensions.get(category).domain(sr))
    return (
        _from_scale(category, min(low, max(d_low, low - reach))),
        _from_scale(category, max(high, min(d_high, high + reach))),
    )


def _to_scale(category: str, value: float) -> float:
    """A parameter value on its dimension's interpolation scale (log: natural log)."""
    if dimensions.get(category).SPEC.scale != "log":
        return float(value)
    return float(np.log(value)) if value > 0 else -np.inf


def _from_scale(category: str, value: float) -> float:
    return float(np.exp(value)) if dimensions.get(category).SPEC.scale == "log" else float(value)


def item_id(seed: int, source_id: str, condition: Condition) -> str:
    """Opaque and stable: reveals nothing about the label, same for any build order."""
    return hashlib.sha256(f"{seed}|{source_id}|{condition.key}".encode()).hexdigest()[:16]


def item_rng(seed: int, item: str) -> np.random.Generator:
    """Every random choice of a clip derives from (global seed, item id) alone."""
    return np.random.default_rng([seed, int(item, 16)])

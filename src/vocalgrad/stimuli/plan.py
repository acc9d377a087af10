"""Which clips a config asks for: conditions per category and opaque, seeded item ids."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

import numpy as np

from vocalgrad import dimensions
from vocalgrad.stimuli.config import BuildConfig


@dataclass(frozen=True)
class Condition:
    """One cell of the grid. Constant clips have tier = curve = "none"; [start, end] is the mid
    tier's range and `ranges` every planned tier's, which their held value is drawn from
    (`held_constant`). In the comparison and recognition
    formats the curve is "held": the parameter is held at start and end (comparison: the two
    parts) or at end only (recognition)."""

    category: str
    tier: str
    curve: str
    direction: str  # "increase", "decrease" or "constant"
    magnitude: float
    start: float
    end: float
    format: str = "gradual"
    # constant clips: the (start, end) of every planned tier; the held value is drawn from one of
    # them at random (`held_constant`). Not part of the key: item ids do not depend on it.
    ranges: tuple[tuple[float, float], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.category}|{self.tier}|{self.curve}|{self.direction}|{self.magnitude:g}{self._fmt}"

    @property
    def pair_key(self) -> str:
        """Both directions of one (category, tier, curve) share this key."""
        return f"{self.category}|{self.tier}|{self.curve}{self._fmt}"

    def twin(self) -> Condition:
        """The other direction of the same pair (a constant is its own)."""
        if self.direction == "constant":
            return self
        other = "decrease" if self.direction == "increase" else "increase"
        return dataclasses.replace(self, direction=other, start=self.end, end=self.start)

    @property
    def _fmt(self) -> str:
        """Gradual keys stay as they were, so gradual item ids do not change."""
        return "" if self.format == "gradual" else f"|{self.format}"


def plan_conditions(config: BuildConfig) -> tuple[list[Condition], list[dict]]:
    """All conditions, plus the ones refused because they would change nothing at the rate."""
    conditions: list[Condition] = []
    refused: list[dict] = []
    for name in config.categories:
        dim = dimensions.get(name)
        spec = dim.SPEC
        magnitudes = {**spec.tiers, **config.magnitudes.get(name, {})}
        if config.design == "psychometric":
            levels = design_magnitudes(name, config.levels, config.sample_rate)
            magnitudes = {**magnitudes, **{f"p{i + 1}": m for i, m in enumerate(levels)}}
        tiers = [f"p{i + 1}" for i in range(config.levels)] if config.design == "psychometric" else config.tiers
        for tier in tiers:
            magnitude = float(magnitudes[tier])
            reason = dim.inaudible_reason(magnitude, config.sample_rate)
            if reason:
                refused.append({"category": name, "tier": tier, "magnitude": magnitude, "reason": reason})
                continue
            low, high = dim.endpoints(magnitude, config.sample_rate)
            held = config.format != "gradual"  # held parts have no course over time: one "curve"
            for curve in ("held",) if held else config.curves:
                conditions.append(Condition(name, tier, curve, "increase", magnitude, low, high, config.format))
                conditions.append(Condition(name, tier, curve, "decrease", magnitude, high, low, config.format))
        if config.include_constant and config.format == "gradual":
            low, high = dim.endpoints(float(magnitudes["mid"]), config.sample_rate)
            ranges = tuple((c.start, c.end) for c in conditions
                           if c.category == name and c.direction == "increase" and c.curve == config.curves[0])
            conditions.append(Condition(name, "none", "none", "constant", 0.0, low, high, ranges=ranges))
    return conditions, refused


def design_magnitudes(category: str, levels: int = 6, sr: int = 16000) -> list[float]:
    """Log-spaced magnitudes over the dimension's declared psychometric range (from below a
    typical human threshold to beyond the published high tier), weakest change first."""
    lo, hi = dimensions.get(category).SPEC.psychometric_range
    magnitudes = [float(m) for m in np.geomspace(lo, hi, levels)]
    return sorted(magnitudes, key=lambda m: change_size(category, *dimensions.get(category).endpoints(m, sr)))


def change_size(category: str, start: float, end: float) -> float:
    """How big a change is, in the dimension's own terms: |end - start| on its scale
    (semitones, dB, ratio, bits...), or octaves for log-scale parameters. The common axis
    for psychometric functions, whichever way the raw parameter runs."""
    if dimensions.get(category).SPEC.scale == "log":
        return float(abs(np.log2(end / start)))
    return float(abs(end - start))


def held_constant(condition: Condition, seed: int, item: str) -> Condition:
    """The constant control holds one value, drawn per clip the way a changing clip's values
    are spread: one of the planned tiers at random, then a point within its range (on the
    dimension's scale); the mid tier's range without `ranges`. The dimension is present, it
    just does not change. A fixed value (the middle of the range) would make "a middling
    amount over the whole clip" a cue that tells constant clips from changing ones, and the
    mid tier alone would leave out the high tier's extremes (see the design notes)."""
    rng = np.random.default_rng([seed, int(item, 16), 11])
    u = float(rng.uniform())
    lo, hi = condition.start, condition.end
    if condition.ranges:
        lo, hi = condition.ranges[int(rng.integers(len(condition.ranges)))]
    spec = dimensions.get(condition.category).SPEC
    if spec.rove:  # the spread comes from the rove, the same as for changing clips
        value = (lo + hi) / 2
    elif spec.scale == "log":
        value = float(np.exp(np.log(lo) + u * (np.log(hi) - np.log(lo))))
    else:
        value = lo + u * (hi - lo)
    return dataclasses.replace(condition, start=value, end=value)


def roved(condition: Condition, seed: int, key: str) -> Condition:
    """The condition shifted by its dimension's rove (SPEC.rove; linear scale), drawn from
    (global seed, the clip's rove key: see `render.rove_key`)."""
    rove = dimensions.get(condition.category).SPEC.rove
    if not rove:
        return condition
    offset = float(np.random.default_rng([seed, int(key, 16), 13]).uniform(-rove, rove))
    return dataclasses.replace(condition, start=condition.start + offset, end=condition.end + offset)


def item_id(seed: int, source_id: str, condition: Condition) -> str:
    """Opaque and stable: reveals nothing about the label, same for any build order."""
    return hashlib.sha256(f"{seed}|{source_id}|{condition.key}".encode()).hexdigest()[:16]


def item_rng(seed: int, item: str) -> np.random.Generator:
    """Every random choice of a clip derives from (global seed, item id) alone."""
    return np.random.default_rng([seed, int(item, 16)])

"""What every dimension declares: its parameter, unit, polarity and tiers are data."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np

from vocalgrad.signal.analysis import Analysis

# track(times_s) -> parameter values at those times (already on the right scale)
Track = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class DimensionSpec:
    """Everything about a dimension that metadata, the card and the builder need to know."""

    name: str
    parameter: str  # the physical quantity rendered
    unit: str
    increase_means: str  # what the label "increase" means, in words
    tiers: dict[str, float]  # published magnitudes, low/mid/high
    scale: str  # "linear" or "log": the scale on which the trajectory is interpolated
    measured: str  # what verification measures
    measured_unit: str
    # The audibility floor: the smallest realised change (in measured_unit; "increase"
    # clips change upward) a listener can hear, from a published JND (floor_basis cites it). A
    # clip whose measured change is smaller is refused as inaudible, never labelled.
    audibility_floor: float
    floor_basis: str
    psychometric_range: tuple[float, float]  # magnitudes a threshold sweep should span
    # How the trajectory is centred so that its time-average does not depend on curve x
    # direction (else a quadratic increase is lower on average than its decrease twin, and
    # mean F0, loudness or duration give the label away): "none", "mean" (arithmetic mean
    # over the speech span is the midpoint; geometric on a log scale), "energy" (the same,
    # weighted by the source's momentary loudness: see render.track_for), "harmonic" (mean of 1/value is 1: speed, so
    # every clip keeps the source's duration).
    centre: str = "none"
    neutral_value: float | None = None  # the parameter outside the speech span, if held neutral
    loudness_neutral: bool = True  # compensate loudness the processing changes as a side effect
    # The process acts on the speech only: outside the speech span (+- EDGE_GUARD_S) every clip
    # carries the source's own samples, so resynthesis residue in the silences (PSOLA copies
    # and overlap-adds them too) cannot differ between an increase clip and its decrease twin.
    source_edges: bool = False
    # Audit cue families that measure the target itself on this dimension (legitimate to
    # differ between directions): e.g. the level in the last 300 ms *is* a volume cue.
    target_cues: tuple[str, ...] = ()
    # Largest |change| a constant clip may show. Measures whose value depends on the speech
    # content (error or reverb level re the speech) vary between head and tail even when the
    # parameter is held, so they need more room than the audibility floor.
    constant_tolerance: float | None = None
    # Where the path sits is roved per clip: shifted by a value drawn uniformly within
    # +-rove (linear scale; constant clips hold the midpoint, shifted alike), so the clip's
    # average value tells nothing, as level roving does for loudness.
    rove: float = 0.0
    # Channels of the clip: 2 for a dimension that lives between the ears (stereo direction);
    # a listener that hears fewer cannot be tested on it.
    channels: int = 1

    @property
    def constant_limit(self) -> float:
        return self.constant_tolerance if self.constant_tolerance is not None else self.audibility_floor

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Measured:
    """The realised trajectory of the target quantity over the speech span."""

    start: float
    end: float

    @property
    def change(self) -> float:
        """end - start, in the measured unit; positive for an "increase" clip."""
        return self.end - self.start


@dataclass(frozen=True)
class Corroborated(Measured):
    """A measured change that counts only where a second cue of the same physical event
    moves the same way by at least its own floor (a source moving away loses direct level
    *and* gains reverberation; a source moving right gains level *and* leads in time at the
    right ear). One cue alone is another dimension, or a broken renderer."""

    corroboration: float = 0.0  # the second cue's change (its own unit)
    corroboration_floor: float = 0.0

    @property
    def change(self) -> float:
        change = self.end - self.start
        if not (np.isfinite(change) and np.isfinite(self.corroboration)):
            return float("nan")
        agrees = np.sign(self.corroboration) == np.sign(change) and abs(self.corroboration) >= self.corroboration_floor
        return float(change) if agrees else 0.0


class Dimension(Protocol):
    """The module-level contract of ``vocalgrad.dimensions.<name>``."""

    SPEC: DimensionSpec

    def endpoints(self, magnitude: float, sr: int) -> tuple[float, float]:
        """(start, end) of the parameter for an *increase* of the given magnitude."""

    def inaudible_reason(self, magnitude: float, sr: int) -> str | None:
        """Why this magnitude would change nothing at sample rate sr, or None if it is fine."""

    def render(self, ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
        """Apply the time-varying change; ``track`` maps source times (s) to parameter values."""

    def measure(self, clip: Analysis, ref: Analysis) -> Measured:
        """Recover start and end of the measured quantity, relative to the reference."""

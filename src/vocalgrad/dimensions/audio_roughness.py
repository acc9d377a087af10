"""Audio roughness: uniform requantisation at a time-varying bit depth."""

from __future__ import annotations

import numpy as np

from vocalgrad.analysis import Analysis
from vocalgrad.dimensions._shared import error_to_signal
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.trajectories import sample_times

SPEC = DimensionSpec(
    name="audio_roughness",
    parameter="quantiser bit depth",
    unit="bits",
    increase_means="rougher (coarser quantisation): the bit depth falls",
    tiers={"low": 8.0, "mid": 6.0, "high": 4.0},
    scale="linear",
    measured="error-to-signal ratio vs the source (speech-active frames)",
    measured_unit="dB",
    min_change=3.0,
    constant_tolerance=12.0,
    psychometric_range=(3.0, 14.0),
)
CLEAN_BITS = 16.0


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return CLEAN_BITS, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if magnitude >= CLEAN_BITS:
        return f"{magnitude:.0f}-bit quantisation changes nothing in 16-bit files"
    if magnitude < 1:
        return "fewer than 1 bit leaves no signal"
    return None


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Fractional bit depths are allowed, so the step size changes continuously."""
    bits = track(sample_times(len(ref.audio), ref.sr))
    step = 2.0 ** (1.0 - bits)
    return (np.round(ref.audio / step) * step).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    return Measured(*error_to_signal(clip, ref))

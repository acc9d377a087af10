"""Audio roughness: uniform requantisation at a time-varying bit depth."""

from __future__ import annotations

import numpy as np

from vocalgrad.analysis import Analysis
from vocalgrad.audio import frame_rms
from vocalgrad.dimensions._shared import active_window_mean, residual
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.trajectories import sample_times

SPEC = DimensionSpec(
    name="audio_roughness",
    parameter="quantiser bit depth (full scale = the source's peak)",
    unit="bits",
    increase_means="rougher (coarser quantisation): the bit depth falls",
    tiers={"low": 8.0, "mid": 6.0, "high": 4.0},
    scale="linear",
    measured="effective bit depth from the requantisation error level (speech-active frames)",
    measured_unit="bits",
    min_change=1.0,
    measured_polarity=-1,
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
    """Full scale is the source's peak, so "4 bits" means 16 levels across the speech
    whatever its recording level; fractional depths let the step change continuously."""
    bits = track(sample_times(len(ref.audio), ref.sr))
    step = 2.0 ** (1.0 - bits) * _peak(ref)
    return (np.round(ref.audio / step) * step).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """A uniform quantiser with step q leaves error RMS q / sqrt(12) whatever the signal,
    with q = 2^(1 - bits) x peak: so the error level reads out the bit depth. Only frames
    louder than the median active frame count, where the signal spans many steps."""
    err_power = frame_rms(residual(clip, ref), ref.sr) ** 2
    level = frame_rms(ref.audio, ref.sr)
    n = min(len(err_power), len(level))
    loud = level[:n] >= np.median(level[:n][ref.active[:n]])
    err_power = np.where(loud, err_power[:n], np.nan)
    head, tail = active_window_mean(err_power, ref)
    return Measured(_bits(head, ref), _bits(tail, ref))


def _peak(ref: Analysis) -> float:
    return float(np.max(np.abs(ref.audio))) or 1.0


def _bits(error_power: float, ref: Analysis) -> float:
    if not np.isfinite(error_power):
        return float("nan")
    step = max(np.sqrt(error_power * 12.0), 2.0**-16)
    return float(min(1.0 - np.log2(step / _peak(ref)), CLEAN_BITS))

"""Background noise: white noise whose level follows the curve over the whole clip."""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions._shared import added_rms_ratio
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.stimuli.analysis import Analysis
from vocalgrad.stimuli.trajectories import sample_times

SPEC = DimensionSpec(
    name="background_noise",
    parameter="noise RMS / speech RMS",
    unit="ratio",
    increase_means="more background noise",
    tiers={"low": 0.03, "mid": 0.07, "high": 0.12},
    scale="linear",
    measured="RMS of the added signal / speech RMS",
    measured_unit="ratio",
    min_change=0.005,
    psychometric_range=(0.003, 0.2),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a noise level of 0 adds nothing"


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Noise is present in pauses too, so the change is not hidden in the silences."""
    ratio = track(sample_times(len(ref.audio), ref.sr))
    noise = rng.standard_normal(len(ref.audio)) * ratio * ref.speech_rms
    return (ref.audio + noise).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    return Measured(*added_rms_ratio(clip, ref))

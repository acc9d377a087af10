"""Audio distortion: sample-and-hold decimation at a time-varying effective rate."""

from __future__ import annotations

import numpy as np

from vocalgrad.audio import FRAME_S
from vocalgrad.dimensions._shared import active_window_mean
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.stimuli.analysis import Analysis
from vocalgrad.stimuli.trajectories import sample_times

SPEC = DimensionSpec(
    name="audio_distortion",
    parameter="effective sample rate of a sample-and-hold decimator",
    unit="Hz",
    increase_means="more distorted: the effective rate falls",
    tiers={"low": 18000.0, "mid": 12000.0, "high": 6000.0},
    scale="log",
    measured="effective sample rate: sr x share of samples that are not a held repeat",
    measured_unit="Hz",
    min_change=0.1,
    measured_scale="log",
    measured_polarity=-1,
    psychometric_range=(3000.0, 15500.0),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return float(sr), magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if magnitude >= sr:
        return (
            f"decimation to {magnitude:.0f} Hz changes nothing at a {sr} Hz render rate "
            "(the published pipeline wrote such clips anyway)"
        )
    return None


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """A phase accumulator advancing rate(t)/sr per sample takes a new input sample each
    time it crosses an integer and holds it otherwise: continuous in time, vectorised."""
    step = track(sample_times(len(ref.audio), ref.sr)) / ref.sr
    ticks = np.floor(np.cumsum(np.minimum(step, 1.0)) + 1e-9)
    new = np.empty(len(ticks), dtype=bool)
    new[0] = True
    new[1:] = ticks[1:] > ticks[:-1]
    held_index = np.maximum.accumulate(np.where(new, np.arange(len(ticks)), 0))
    return ref.audio[held_index].astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """A sample-and-hold at rate r repeats each value so that a share 1 - r/sr of samples
    equal their predecessor; natural speech almost never does at speech level. This reads
    the effective rate from the clip alone, independent of the speech content."""
    audio = clip.audio
    repeats = np.zeros(len(audio))
    repeats[1:] = audio[1:] == audio[:-1]
    n = int(round(FRAME_S * clip.sr))
    usable = (len(audio) // n) * n
    share = repeats[:usable].reshape(-1, n).mean(axis=1)
    head, tail = active_window_mean(share, ref)
    return Measured(clip.sr * (1 - head), clip.sr * (1 - tail))

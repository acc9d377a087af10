"""Volume: a time-varying gain in dB (the clip is then limited, never clipped)."""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.stimuli.analysis import Analysis, head_tail
from vocalgrad.stimuli.trajectories import sample_times

SPEC = DimensionSpec(
    name="volume",
    parameter="gain",
    unit="dB",
    increase_means="the voice gets louder",
    tiers={"low": 6.0, "mid": 12.0, "high": 18.0},
    scale="linear",
    measured="frame level relative to the source (speech-active frames)",
    measured_unit="dB",
    min_change=2.0,
    psychometric_range=(0.5, 24.0),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return -magnitude, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a gain change of 0 dB changes nothing"


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    gain_db = track(sample_times(len(ref.audio), ref.sr))
    return (ref.audio * 10.0 ** (gain_db / 20.0)).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    n = min(len(clip.level_db), len(ref.level_db))
    diff = np.where(ref.active[:n], clip.level_db[:n] - ref.level_db[:n], np.nan)
    head, tail = ref.head_tail_frames(n)
    return Measured(*head_tail(diff, head, tail))


def blind_change(clip: Analysis) -> float:
    """Level change (dB, tail minus head) of the clip alone: the 90th percentile of frame
    levels in each window, i.e. the loud (voiced) frames, with no activity threshold that
    a large gain change would push a whole window under."""
    head, tail = clip.head_tail_frames(len(clip.level_db))
    h, t = head_tail(clip.level_db, head, tail, reduce=lambda x: np.percentile(x, 90))
    return t - h

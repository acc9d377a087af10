"""Voice vibration: amplitude tremolo whose depth follows the curve, power-preserving."""

from __future__ import annotations

import numpy as np

from vocalgrad.audio import frame_rms
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.stimuli.analysis import Analysis, head_tail
from vocalgrad.stimuli.trajectories import sample_times

SPEC = DimensionSpec(
    name="voice_vibration",
    parameter="tremolo depth (8 Hz sinusoidal amplitude modulation)",
    unit="depth",
    increase_means="stronger tremolo (more vibration)",
    tiers={"low": 0.60, "mid": 0.75, "high": 0.90},
    scale="linear",
    measured="modulation depth of the clip/source gain (5 ms frames)",
    measured_unit="depth",
    min_change=0.15,
    psychometric_range=(0.05, 0.95),
)
LFO_HZ = 8.0  # fixed: the published LFO rate ramp (0 -> 20 Hz) was a second, confounding cue
GAIN_FRAME_S = 0.005


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if not 0 < magnitude < 1:
        return f"tremolo depth {magnitude} must lie in (0, 1)"
    return None


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Gain (1 + d sin) / sqrt(1 + d^2/2) has unit mean power for any depth d, so the
    tremolo does not make the clip quieter (the published one did)."""
    t = sample_times(len(ref.audio), ref.sr)
    depth = track(t)
    gain = (1.0 + depth * np.sin(2 * np.pi * LFO_HZ * t)) / np.sqrt(1.0 + depth**2 / 2)
    return (ref.audio * gain).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Depth = (p95 - p5) / (p95 + p5) of the frame gain clip/source over active frames."""
    g_clip = frame_rms(clip.audio, clip.sr, GAIN_FRAME_S)
    g_ref = frame_rms(ref.audio, ref.sr, GAIN_FRAME_S)
    n = min(len(g_clip), len(g_ref))
    floor = g_ref.max() * 10 ** (-30 / 20)
    gain = np.where(g_ref[:n] > floor, g_clip[:n] / np.maximum(g_ref[:n], 1e-12), np.nan)
    head, tail = ref.head_tail_frames(n, GAIN_FRAME_S)
    return Measured(*head_tail(gain, head, tail, reduce=_depth))


def _depth(gain: np.ndarray) -> float:
    lo, hi = np.percentile(gain, [5, 95])
    return float((hi - lo) / (hi + lo)) if hi + lo > 0 else float("nan")

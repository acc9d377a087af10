"""Echo: reverberation whose send level follows the curve, so tails decay naturally."""

from __future__ import annotations

import numpy as np
from scipy.signal import fftconvolve

from vocalgrad.analysis import Analysis
from vocalgrad.dimensions._shared import added_level
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.trajectories import sample_times

SPEC = DimensionSpec(
    name="echo",
    parameter="reverb wet level (unit-energy room response)",
    unit="ratio",
    increase_means="more reverberant (echoey)",
    tiers={"low": 0.28, "mid": 0.40, "high": 0.52},
    scale="linear",
    measured="added-signal (reverb) level re speech RMS",
    measured_unit="dB",
    min_change=3.0,
    constant_tolerance=12.0,
    psychometric_range=(0.03, 0.7),
)
PREDELAY_S = 0.012


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a wet level of 0 adds nothing"


def rt60_for(magnitude: float) -> float:
    """Bigger rooms for bigger magnitudes, as in the published tiers (0.28 -> 0.64 s)."""
    return 0.3 + 1.2 * magnitude


def room_response(rt60_s: float, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Exponentially decaying Gaussian noise (a diffuse late field), unit energy."""
    n = int((PREDELAY_S + 1.2 * rt60_s) * sr)
    t = np.arange(n) / sr
    ir = rng.standard_normal(n) * np.exp(-6.908 * t / rt60_s)
    ir[: int(PREDELAY_S * sr)] = 0.0
    return ir / np.sqrt(np.sum(ir**2))


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Scale the *send* into the room: a tail started while the send was high keeps
    ringing after it falls, as a real room would, in both directions."""
    send = track(sample_times(len(ref.audio), ref.sr))
    magnitude = float(np.max(np.abs(send)))
    if magnitude == 0:
        return ref.audio.copy()
    ir = room_response(rt60_for(magnitude), ref.sr, rng)
    wet = fftconvolve(ref.audio * send, ir)[: len(ref.audio)]
    return (ref.audio + wet).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    return Measured(*added_level(clip, ref))

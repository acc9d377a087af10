"""Measurement helpers shared by several dimensions (residual level, error ratio)."""

from __future__ import annotations

import numpy as np

from vocalgrad.analysis import Analysis, head_tail
from vocalgrad.audio import FRAME_S, frame_rms

FLOOR_DB = -100.0


def residual(clip: Analysis, ref: Analysis) -> np.ndarray:
    """What the rendering added: clip minus the least-squares-scaled reference.

    The scale absorbs the one constant gain that peak limiting may have applied.
    """
    n = min(len(clip.audio), len(ref.audio))
    x = ref.audio[:n].astype(np.float64)
    y = clip.audio[:n].astype(np.float64)
    gain = float(np.dot(x, y) / max(np.dot(x, x), 1e-20))
    return (y - gain * x) / (gain if abs(gain) > 1e-6 else 1.0)


def added_level(clip: Analysis, ref: Analysis) -> tuple[float, float]:
    """Level of the added signal (noise, reverb) in dB re the reference speech RMS,
    over the head and tail windows, pauses included (mean power)."""
    power = frame_rms(residual(clip, ref), ref.sr) ** 2
    head, tail = ref.head_tail_frames(len(power))
    h, t = head_tail(power, head, tail, reduce=np.mean)
    denom = max(ref.speech_rms**2, 1e-20)
    return _db(h / denom), _db(t / denom)


def error_to_signal(clip: Analysis, ref: Analysis) -> tuple[float, float]:
    """Error-to-signal ratio (dB) over speech-active frames of the head and tail windows:
    for distortions that live where the speech is (decimation, quantisation)."""
    err = frame_rms(residual(clip, ref), ref.sr) ** 2
    sig = frame_rms(ref.audio, ref.sr) ** 2
    n = min(len(err), len(sig), len(ref.active))
    head, tail = ref.head_tail_frames(n)
    active = ref.active[:n]
    out = []
    for window in (head & active, tail & active):
        e, s = err[:n][window].sum(), sig[:n][window].sum()
        out.append(_db(e / s) if s > 0 else float("nan"))
    return out[0], out[1]


def _db(ratio: float) -> float:
    return float(max(10 * np.log10(ratio), FLOOR_DB)) if ratio > 0 else FLOOR_DB


def frame_centres(n_frames: int) -> np.ndarray:
    return (np.arange(n_frames) + 0.5) * FRAME_S


def psola(ref: Analysis, pitch_tier=None, duration_tier=None) -> np.ndarray:
    """Resynthesise the source by Praat overlap-add with the given tiers (None = unchanged).

    The Manipulation (pitch-mark analysis) is computed once per source and reused; both
    tiers are set on every call so conditions never leak into each other.
    """
    from parselmouth.praat import call

    from vocalgrad.analysis import F0_CEILING_HZ, F0_FLOOR_HZ, praat_tier

    if "manipulation" not in ref.cache:
        manip = call(ref.sound, "To Manipulation", FRAME_S, F0_FLOOR_HZ, F0_CEILING_HZ)
        ref.cache["manipulation"] = manip
        ref.cache["original_pitch_tier"] = call(manip, "Extract pitch tier")
        ref.cache["neutral_duration_tier"] = praat_tier(
            "DurationTier", np.array([0.0]), np.array([1.0]), ref.duration_s
        )
    manip = ref.cache["manipulation"]
    call([pitch_tier or ref.cache["original_pitch_tier"], manip], "Replace pitch tier")
    call([manip, duration_tier or ref.cache["neutral_duration_tier"]], "Replace duration tier")
    return call(manip, "Get resynthesis (overlap-add)").values[0].astype(np.float32)

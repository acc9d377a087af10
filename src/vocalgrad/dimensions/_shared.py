"""Measurement helpers shared by several dimensions (residual level, error ratio)."""

from __future__ import annotations

import numpy as np

from vocalgrad.audio import FRAME_S, frame_rms
from vocalgrad.stimuli.analysis import Analysis, head_tail


def residual(clip: Analysis, ref: Analysis) -> np.ndarray:
    """What the rendering added: clip minus the least-squares-scaled reference.

    The scale absorbs the one constant gain that peak limiting may have applied.
    """
    n = min(len(clip.audio), len(ref.audio))
    x = ref.audio[:n].astype(np.float64)
    y = clip.audio[:n].astype(np.float64)
    gain = float(np.dot(x, y) / max(np.dot(x, x), 1e-20))
    return (y - gain * x) / (gain if abs(gain) > 1e-6 else 1.0)


def added_rms_ratio(clip: Analysis, ref: Analysis) -> tuple[float, float]:
    """RMS of the added signal (noise, reverb) relative to the reference speech RMS, over
    the head and tail windows, pauses included: the noise parameter's own unit."""
    power = frame_rms(residual(clip, ref), ref.sr) ** 2
    head, tail = ref.head_tail_frames(len(power))
    h, t = head_tail(power, head, tail, reduce=np.mean)
    speech = max(ref.speech_rms, 1e-10)
    return float(np.sqrt(h)) / speech, float(np.sqrt(t)) / speech


def active_window_mean(per_frame: np.ndarray, ref: Analysis) -> tuple[float, float]:
    """Mean of a per-10-ms-frame quantity over the speech-active head and tail frames."""
    n = min(len(per_frame), len(ref.active))
    head, tail = ref.head_tail_frames(n)
    active = ref.active[:n]
    out = []
    for window in (head & active, tail & active):
        values = per_frame[:n][window]
        values = values[np.isfinite(values)]
        out.append(float(values.mean()) if values.size else float("nan"))
    return out[0], out[1]


def psola(ref: Analysis, rng: np.random.Generator, pitch_tier=None, duration_tier=None) -> np.ndarray:
    """Resynthesise the source by Praat overlap-add with the given tiers (None = unchanged).

    The Manipulation (pitch-mark analysis) is computed once per source and reused; both
    tiers are set on every call so conditions never leak into each other. Praat places
    pulses in unvoiced stretches at random, so its generator is seeded from the item's rng:
    without that, two renders of one condition differ.
    """
    from parselmouth.praat import call, run

    from vocalgrad.stimuli.analysis import F0_CEILING_HZ, F0_FLOOR_HZ, praat_tier

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
    run(f"random_initializeWithSeedUnsafelyButPredictably ({int(rng.integers(1, 2**31))})")
    return call(manip, "Get resynthesis (overlap-add)").values[0].astype(np.float32)

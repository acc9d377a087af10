"""Rendering and measurement helpers shared by several dimensions.

Measurements compare a clip with its *heard* source (the clean source plus the room-tone
floor every clip of it carries) and never see the rendering parameter. What a process
added is read from the residual after a slowly varying gain fit, so level roving, loudness
compensation or a volume ramp mislabelled as another dimension leave nothing behind.
"""

from __future__ import annotations

import librosa
import numpy as np

from vocalgrad.audio import FRAME_S, frame_rms
from vocalgrad.stimuli.analysis import Analysis, head_tail

GAIN_WINDOW_FRAMES = 4  # the gain fit pools 40 ms around each 10 ms frame
GAIN_ACTIVE_DB = 40.0  # only frames within 40 dB of the source's loudest inform the fit
QUIET_PERCENTILE = 1  # the source's floor: its quietest 1% of frames (room tone, mic noise)
N_MELS = 40


def gain_matched_residual(clip: Analysis, ref: Analysis) -> np.ndarray:
    """(clip - g(t) * source) / g(t), with g(t) a least-squares gain per 40 ms (10 ms hop)
    on the source's speech frames, interpolated across pauses. What remains is what the
    process added (noise, reverb, distortion error), at the source's scale."""
    key = f"residual:{id(ref)}"
    if key in clip.cache:
        return clip.cache[key]
    n = min(len(clip.audio), len(ref.audio))
    hop = int(round(FRAME_S * ref.sr))
    usable = (n // hop) * hop
    x = ref.audio[:usable].astype(np.float64).reshape(-1, hop)
    y = clip.audio[:usable].astype(np.float64).reshape(-1, hop)
    kernel = np.ones(GAIN_WINDOW_FRAMES)
    sxy = np.convolve((x * y).sum(axis=1), kernel, "same")
    sxx = np.convolve((x * x).sum(axis=1), kernel, "same")
    ok = sxx > sxx.max() * 10 ** (-GAIN_ACTIVE_DB / 10)
    centres = (np.arange(len(sxx)) + 0.5) * hop
    frame_gain = np.interp(centres, centres[ok], sxy[ok] / sxx[ok]) if ok.any() else np.ones_like(sxx)
    gain = np.interp(np.arange(len(clip.audio)), centres, frame_gain)
    source = np.zeros(len(clip.audio))
    source[:n] = ref.audio[:n]
    # at the source's scale moment by moment: what was added relative to the speech as heard
    # (never divided by a gain the fit could not pin down: floored at a quarter of the typical)
    typical = float(np.median(np.abs(frame_gain[ok]))) if ok.any() else 1.0
    scale = np.maximum(np.abs(gain), max(0.25 * typical, 1e-6))
    residual = (clip.audio - gain * source) / scale
    clip.cache[key] = residual
    return residual


def quiet_power(ref: Analysis) -> float:
    """Mean-square level of the source's floor (10 ms frames, quietest 5%)."""
    power = frame_rms(ref.audio, ref.sr) ** 2
    return float(np.percentile(power, QUIET_PERCENTILE)) if power.size else 0.0


def db(x: float) -> float:
    return float(10 * np.log10(x)) if x > 0 else float("nan")


def mel_power(a: Analysis) -> np.ndarray:
    """40-band mel power spectrogram, 10 ms hop: the band representation error and
    spectral measures are read in (cached per signal)."""
    if "mel_power" not in a.cache:
        a.cache["mel_power"] = _mel(a.audio, a.sr)
    return a.cache["mel_power"]


def _mel(audio: np.ndarray, sr: int) -> np.ndarray:
    hop = int(round(FRAME_S * sr))
    return librosa.feature.melspectrogram(
        y=np.asarray(audio, dtype=np.float32), sr=sr, n_fft=512 if sr <= 24000 else 2048, hop_length=hop,
        n_mels=N_MELS, center=False, power=2.0,
    )


def band_floor(ref: Analysis) -> np.ndarray:
    """Per-band power of the source's floor (quietest 1% of frames)."""
    if "band_floor" not in ref.cache:
        ref.cache["band_floor"] = np.percentile(mel_power(ref), QUIET_PERCENTILE, axis=1)
    return ref.cache["band_floor"]


def mel_centres(sr: int) -> np.ndarray:
    return librosa.mel_frequencies(n_mels=N_MELS + 2, fmax=sr / 2)[1:-1]


def windows(ref: Analysis, n_frames: int, active_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Head and tail frame masks (first and last 20% of the speech span), optionally
    limited to the source's speech-active frames."""
    head, tail = ref.head_tail_frames(n_frames)
    if active_only:
        active = np.zeros(n_frames, dtype=bool)
        m = min(n_frames, len(ref.active))
        active[:m] = ref.active[:m]
        head, tail = head & active, tail & active
    return head, tail


def noise_to_mask_db(clip: Analysis, ref: Analysis, mask_offset_db: float) -> tuple[float, float]:
    """Error-to-mask ratio over the head and tail: 10 log10(1 + mean E/M) over mel bands and
    speech frames, so 0 dB means the error hides under its mask everywhere.

    Error E = mel power of the gain-matched residual per 10 ms frame; mask M = the source's
    own power in that band and frame `mask_offset_db` down (speech masks error well below
    it in the same band) plus the source's floor in that band. Frame by frame, so the quiet
    stretches where an error is most audible are not averaged away by the loud vowels."""
    error = _mel(gain_matched_residual(clip, ref).astype(np.float32), ref.sr)
    signal = mel_power(ref)
    n = min(error.shape[1], signal.shape[1])
    mask = signal[:, :n] * 10 ** (-mask_offset_db / 10) + band_floor(ref)[:, None]
    per_frame = 10 * np.log10(1.0 + (error[:, :n] / mask).mean(axis=0))
    out = []
    for window in windows(ref, n, active_only=True):
        out.append(float(np.median(per_frame[window])) if window.any() else float("nan"))
    return out[0], out[1]


def active_window_mean(per_frame: np.ndarray, ref: Analysis) -> tuple[float, float]:
    """Mean of a per-10-ms-frame quantity over the speech-active head and tail frames."""
    head, tail = windows(ref, min(len(per_frame), len(ref.active)), active_only=True)
    return head_tail(per_frame, head, tail, reduce=np.mean)


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

"""Voice clarity: a time-varying low-pass whose cutoff moves on a log-frequency scale."""

from __future__ import annotations

import numpy as np
from scipy.signal import istft, stft

from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.stimuli.analysis import Analysis

SPEC = DimensionSpec(
    name="voice_clarity",
    parameter="low-pass cutoff (800 Hz raised-cosine transition)",
    unit="Hz",
    increase_means="the voice gets clearer (less muffled): the cutoff rises",
    tiers={"low": 5000.0, "mid": 2500.0, "high": 1200.0},
    scale="log",
    measured="effective cutoff (-6 dB point of clip/source spectrum ratio)",
    measured_unit="Hz",
    min_change=0.15,
    psychometric_range=(600.0, 7000.0),
    measured_scale="log",
)
TRANSITION_HZ = 800.0
N_FFT = 512
HOP = 128
MIN_CUTOFF_HZ = 200.0


def open_cutoff(sr: int) -> float:
    """The cutoff at which the filter passes everything up to Nyquist."""
    return sr / 2 + TRANSITION_HZ / 2


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return magnitude, open_cutoff(sr)


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if magnitude >= sr / 2 - TRANSITION_HZ / 2:
        return f"a {magnitude:.0f} Hz low-pass changes nothing audible at {sr} Hz (Nyquist {sr // 2} Hz)"
    if magnitude < MIN_CUTOFF_HZ:
        return f"a cutoff under {MIN_CUTOFF_HZ:.0f} Hz leaves no intelligible speech"
    return None


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """STFT masking (75% overlap, Hann): per frame a raised-cosine low-pass at cutoff(t).
    Overlap-add makes the filter change smoothly, with no chunk boundaries."""
    sr = ref.sr
    freqs, times, spec = _stft(ref, boundary="even")
    cutoff = track(np.clip(times, 0, ref.duration_s))
    x = (freqs[:, None] - (cutoff[None, :] - TRANSITION_HZ / 2)) / TRANSITION_HZ
    mask = 0.5 + 0.5 * np.cos(np.pi * np.clip(x, 0.0, 1.0))
    _, out = istft(spec * mask, fs=sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary=True)
    out = out[: len(ref.audio)]
    return np.pad(out, (0, len(ref.audio) - len(out))).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Effective cutoff in the head and tail windows, in Hz (compared in octaves)."""
    sr = ref.sr
    f, t, r = _stft(ref)
    _, _, c = stft(clip.audio[: len(ref.audio)], fs=sr, nperseg=N_FFT, noverlap=N_FFT - HOP)
    n = min(r.shape[1], c.shape[1])
    pr, pc = np.abs(r[:, :n]) ** 2, np.abs(c[:, :n]) ** 2
    onset, offset = ref.span.onset_s, ref.span.offset_s
    width = 0.2 * (offset - onset)
    cutoffs = []
    for lo, hi in ((onset, onset + width), (offset - width, offset)):
        window = (t[:n] >= lo) & (t[:n] <= hi)
        cutoffs.append(_cutoff(f, pr[:, window].sum(axis=1), pc[:, window].sum(axis=1), sr))
    return Measured(*cutoffs)


def _stft(ref: Analysis, boundary: str = "zeros") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source's STFT, computed once per source and reused by every clip rendered from it."""
    key = f"clarity_stft_{boundary}"
    if key not in ref.cache:
        ref.cache[key] = stft(ref.audio, fs=ref.sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary=boundary)
    return ref.cache[key]


def _cutoff(freqs: np.ndarray, ref_power: np.ndarray, clip_power: np.ndarray, sr: int) -> float:
    """Lowest frequency above which the clip stays >= 6 dB under the source (smoothed)."""
    kernel = np.ones(5) / 5
    ratio = np.convolve(clip_power, kernel, "same") / np.maximum(np.convolve(ref_power, kernel, "same"), 1e-20)
    usable = ref_power > 1e-7 * ref_power.max()
    below = (ratio < 10 ** (-6 / 10)) | ~usable
    below &= freqs >= MIN_CUTOFF_HZ
    above_cut = np.flatnonzero(~below & (freqs >= MIN_CUTOFF_HZ))
    last_pass = above_cut[-1] if above_cut.size else 0
    return float(min(freqs[min(last_pass + 1, len(freqs) - 1)], sr / 2))

"""Voice clarity: a time-varying low-pass whose cutoff moves on a log-frequency scale."""

from __future__ import annotations

import numpy as np
from scipy.signal import istft, stft

from vocalgrad.dimensions._shared import db, windows
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis, mel_centres
from vocalgrad.signal.evidence import high_band_kept_change

SPEC = DimensionSpec(
    name="voice_clarity",
    parameter="low-pass cutoff (800 Hz raised-cosine transition)",
    unit="Hz",
    increase_means="the voice gets clearer (less muffled): the cutoff rises",
    tiers={"low": 5000.0, "mid": 2500.0, "high": 1200.0},
    scale="log",
    measured="level above 1 kHz relative to the source (mel bands where the source has energy), "
             "re the 150-1000 Hz band",
    measured_unit="dB",
    audibility_floor=2.0,
    floor_basis=("spectral-shape (profile) discrimination ~1-2 dB for a level change of part of a "
                 "spectrum (Green 1988; Moore, Oldfield & Dooley 1989)"),
    psychometric_range=(600.0, 7000.0),
    constant_tolerance=2.0,
    # the low-pass acts on the whole recording, its background in the silences included,
    # a speech detector finds a muffled first or last syllable later, and FLAC needs fewer bits
    # where the high band is gone (the file size reads it)
    target_cues=("edge_silence", "edge_level", "edge_spectrum", "edge_zeros", "global_file_bytes"),
)
SPLIT_HZ = 1000.0
LOW_BAND_HZ = (150.0, 1000.0)
USABLE_DB = 15.0  # a band counts where the source is 15 dB above its own floor in both windows
KEPT_RANGE_DB = 15.0  # deeper losses read as -15 dB: the floor would swamp them anyway
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
    """How much of the source's high band (> 1 kHz) the clip keeps, in dB: mean over the
    mel bands where the source has energy of the clip/source band level, minus the same
    for the 150-1000 Hz band (so overall gain cancels), over the head and tail speech
    frames. Bands where the source has nothing (telephone speech above 4 kHz) do not count:
    a low-pass there changes nothing a listener could hear, and reads as no change."""
    c, r = clip.mel_power, ref.mel_power
    n = min(c.shape[1], r.shape[1])
    centres = mel_centres(ref.sr)
    floor = ref.band_floor
    sums = [(c[:, :n][:, w].sum(axis=1), r[:, :n][:, w].sum(axis=1), max(int(w.sum()), 1))
            for w in windows(ref, n, active_only=True)]
    # the same bands in both windows: those where the source stands well clear of its floor
    # in each, so the head and tail compare like with like whatever is being said
    usable = np.logical_and.reduce([rw > floor * k * 10 ** (USABLE_DB / 10) for _, rw, k in sums])
    low = usable & (centres >= LOW_BAND_HZ[0]) & (centres < LOW_BAND_HZ[1])
    high = usable & (centres >= SPLIT_HZ)
    if not low.any() or not high.any():
        return Measured(0.0, 0.0)
    out = []
    for cw, rw, _ in sums:
        offset = db(cw[low].sum() / rw[low].sum())
        kept = 10 * np.log10(np.maximum(cw[high], 1e-30) / rw[high]) - offset
        out.append(float(np.mean(np.clip(kept, -KEPT_RANGE_DB, 10.0))))
    return Measured(*out)


def _stft(ref: Analysis, boundary: str = "zeros") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source's STFT, computed once per source and reused by every clip rendered from it."""
    key = f"clarity_stft_{boundary}"
    if key not in ref.cache:
        ref.cache[key] = stft(ref.audio, fs=ref.sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary=boundary)
    return ref.cache[key]


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("voice", "clear", "muffled"))
evidence = high_band_kept_change

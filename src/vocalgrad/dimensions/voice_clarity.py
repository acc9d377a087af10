"""Voice clarity: a time-varying low-pass whose cutoff moves on a log-frequency scale."""

from __future__ import annotations

import numpy as np
from scipy.signal import istft, stft

from vocalgrad.dimensions._shared import band_sums, db, windows
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
    floor_basis=(
        "spectral-shape (profile) discrimination ~1-2 dB for a level change of part of a "
        "spectrum (Green 1988; Moore, Oldfield & Dooley 1989)"
    ),
    psychometric_range=(600.0, 7000.0),
    constant_tolerance=2.0,
    # the low-pass acts on the whole recording, its background in the silences included,
    # a speech detector finds a muffled first or last syllable later, and FLAC needs fewer bits
    # where the high band is gone (the file size reads it)
    target_cues=("edge_silence", "edge_level", "edge_spectrum", "edge_zeros", "global_file_bytes"),
    kinds=("speech",),  # a process on the voice itself: no other sound has one
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
        return (
            f"a {magnitude:.0f} Hz low-pass changes nothing audible at {sr} Hz "
            f"(Nyquist {sr // 2} Hz)"
        )
    if magnitude < MIN_CUTOFF_HZ:
        return f"a cutoff under {MIN_CUTOFF_HZ:.0f} Hz leaves no intelligible speech"
    return None


def domain(sr: int) -> tuple[float, float]:
    """From the lowest intelligible cutoff to the open filter."""
    return MIN_CUTOFF_HZ, open_cutoff(sr)


def source_inaudible_reason(magnitude: float, ref: Analysis) -> str | None:
    """Why a `magnitude` Hz low-pass would change nothing audible on this source, or None.

    The rate rule (`inaudible_reason`) only knows Nyquist; a source's real bandwidth is often
    narrower (telephone speech resampled up, or a recording whose speech holds little high up:
    five of 16 tuxpaint-stamps-default sources at 16 kHz, usable only to 4.0-6.4 kHz). The
    change is predicted in `measure`'s own terms on the source itself: the raised-cosine
    mask's level at each mel band above 1 kHz that `measure` would use
    (usable in the head and in the tail), floored at -KEPT_RANGE_DB, averaged: the change the
    condition's endpoint cutoffs would give, an upper bound on what a clip realises. Where
    that is under the audibility floor, every clip of the condition would be refused one by
    one (or kept by chance near the floor): the condition is refused for this source
    instead, with the bandwidth that makes it so."""
    if magnitude >= open_cutoff(ref.sr) - TRANSITION_HZ / 2:
        return None  # the rate rule refuses it already, for every source
    usable = _usable_bands(ref)
    if usable is None:
        return None  # no speech frames to judge by: leave it to the per-clip verdict
    centres = mel_centres(ref.sr)
    high = usable & (centres >= SPLIT_HZ)
    if not high.any():
        return f"the source has no usable band above {SPLIT_HZ:.0f} Hz for a low-pass to take away"
    x = (centres[high] - (magnitude - TRANSITION_HZ / 2)) / TRANSITION_HZ
    mask = 0.5 + 0.5 * np.cos(np.pi * np.clip(x, 0.0, 1.0))
    lost = max(
        0.0, float(-np.mean(np.maximum(20 * np.log10(np.maximum(mask, 1e-12)), -KEPT_RANGE_DB)))
    )
    if lost >= SPEC.audibility_floor:
        return None
    return (
        f"a {magnitude:.0f} Hz low-pass takes {lost:.1f} dB from this source's band above "
        f"{SPLIT_HZ:.0f} Hz (floor {SPEC.audibility_floor:.1f} dB): its speech has little above "
        f"{float(centres[high].max()):.0f} Hz"
    )


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
    n, sums = band_sums(clip, ref)
    centres = mel_centres(ref.sr)
    usable = _usable(ref, n)
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


def _usable(ref: Analysis, n: int) -> np.ndarray:
    """The same bands in both windows: those where the source stands well clear of its floor
    in each, so the head and tail compare like with like whatever is being said."""
    r, floor = ref.mel_power, ref.band_floor
    return np.logical_and.reduce(
        [
            r[:, :n][:, w].sum(axis=1) > floor * max(int(w.sum()), 1) * 10 ** (USABLE_DB / 10)
            for w in windows(ref, n, active_only=True)
        ]
    )


def _usable_bands(ref: Analysis) -> np.ndarray | None:
    """`_usable` over the whole source, or None where a window holds no speech frame."""
    n = ref.mel_power.shape[1]
    if not all(w.any() for w in windows(ref, n, active_only=True)):
        return None
    return _usable(ref, n)


def _stft(ref: Analysis, boundary: str = "zeros") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The source's STFT, computed once per source and reused by every clip rendered from it."""
    key = f"clarity_stft_{boundary}"
    if key not in ref.cache:
        ref.cache[key] = stft(
            ref.audio, fs=ref.sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary=boundary
        )
    return ref.cache[key]


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("voice", "clear", "muffled"))
evidence = high_band_kept_change

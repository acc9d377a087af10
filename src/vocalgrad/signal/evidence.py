"""Ideal-observer evidence: signed decision statistics measured on a clip against its source.

Each function takes ``(clip, ref, sr)``: the clip and its unprocessed source as float arrays at
``sr`` Hz (``clip`` mono ``(n,)``, or ``(n, channels)`` where stated; ``ref`` mono ``(m,)``,
time-aligned with the clip) and returns one float that is positive when the quantity it
reads rose over the clip: late speech against early speech. A dimension names the statistic
its ideal observer answers from (``evidence`` in its module, see
`vocalgrad.dimensions.base.Bound`).

They are deliberately independent of the builder's verification: librosa features (YIN F0,
RMS, MFCC alignment, band levels, envelope modulation) over the first and last thirds of the
clip, where verification uses Praat and 20% windows; so the ideal observer is a second,
independent reading of what the audio supports.

Each source is read as what it is (`reading`): its kind of sound and its pitch range. Pitch is
looked for in speech's 60-400 Hz unless the caller says otherwise for the source at hand (a 2
kHz tone), as the ideal observer does from the ceiling each reference records; a rate is read
from the phonetic content of speech, and from the onsets and level course of other sounds (a
sustained note has no phonemes to align). The reading is set around a call, not passed to
it, because the question formats call a dimension's evidence with the clip, the source and
the rate alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache

import librosa
import numpy as np
from scipy.signal import resample_poly

from vocalgrad.signal.analysis import mel_centres, mel_spectrogram, on_contour
from vocalgrad.signal.kinds import SPEECH, get_kind

SPEECH_PITCH_RANGE_HZ = (60.0, 400.0)  # where `f0_change` looks for speech's F0


@dataclass(frozen=True)
class Reading:
    """How the source at hand is read: its kind of sound (`vocalgrad.signal.kinds`) and the
    F0 range (Hz) its pitch is looked for in."""

    kind: str = SPEECH
    pitch_range_hz: tuple[float, float] = SPEECH_PITCH_RANGE_HZ


_READING: ContextVar[Reading | None] = ContextVar("reading", default=None)


@contextmanager
def reading(
    kind: str = SPEECH, pitch_range_hz: tuple[float, float] | None = None
) -> Iterator[Reading]:
    """Within the block, evidence reads its source as a sound of ``kind`` whose F0 lies in
    ``pitch_range_hz``: the source's own range (a tone's F0 lies far above speech's).

    Parameters
    ----------
    kind : str
        The source's kind of sound.
    pitch_range_hz : (float, float) or None
        The lowest and highest F0 to look for, Hz; None: speech's, SPEECH_PITCH_RANGE_HZ.

    Yields
    ------
    Reading
        The reading in force.

    Raises
    ------
    ConfigError
        The kind is unknown.
    """
    get_kind(kind)
    wanted = Reading(
        kind,
        SPEECH_PITCH_RANGE_HZ
        if pitch_range_hz is None
        else (float(pitch_range_hz[0]), float(pitch_range_hz[1])),
    )
    token = _READING.set(wanted)
    try:
        yield wanted
    finally:
        _READING.reset(token)


def current_reading() -> Reading:
    """The `Reading` in force (speech's outside any `reading` block)."""
    return _READING.get() or Reading()


def _thirds(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(x) // 3
    return x[:n], x[-n:]


def _db(x: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.maximum(x, 1e-12))


def _rms(y: np.ndarray) -> np.ndarray:
    return librosa.feature.rms(y=y, frame_length=512, hop_length=160, center=False)[0]


def _active(ref: np.ndarray) -> np.ndarray:
    level = _rms(ref)
    return level > level.max() * 10 ** (-30 / 20)


def _speech_thirds(values: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last thirds of the frames where the source has speech."""
    n = min(len(values), len(active))
    return _thirds(values[:n][active[:n]])


def level_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Frame level of the clip re the source (dB), median of the last third of the source's
    speech frames minus the first: a rising gain raises it."""
    n = min(len(clip), len(ref))
    diff = _db(_rms(clip[:n]) ** 2) - _db(_rms(ref[:n]) ** 2)
    first, last = _speech_thirds(diff, _active(ref[:n]))
    return float(np.median(last) - np.median(first))


OCTAVE_JUMP_ST = 8.0  # a clip/source F0 ratio this far from 1 is a tracker's octave jump
PERIODIC = 0.5  # a source frame this correlated with itself one period later is voiced
# a voiced source frame lies on a contour: runs of 3 frames (30 ms) or more, each frame
# within 2 semitones of the one before (a tracker's reading of noise jumps further)
CONTOUR_STEP_ST, CONTOUR_FRAMES = 2.0, 3
MIN_FRAMES = 6  # the fewest frames a reading rests on


# a source's F0 per frame, and which of its frames are voiced
_SOURCE_F0: dict[tuple[bytes, int, float, float], tuple[np.ndarray, np.ndarray]] = {}


def periodicity(
    y: np.ndarray, f0_hz: np.ndarray, sr: int, frame_length: int, hop_length: int
) -> np.ndarray:
    """Each frame's normalised correlation with itself one period (``sr / f0_hz``) later,
    on frames centred as `librosa.yin` centres them: near 1 where the sound repeats at the
    tracked F0 (voiced speech, a tone), near 0 in noise (a sibilant, which YIN gives an F0
    too). Why: a pitch shift moves voiced frames only, so a loud sibilant in the source
    reads the unshifted clip/source ratio of 0 semitones, which a level threshold keeps.

    Parameters
    ----------
    y : ndarray, shape (n,)
        The signal, float.
    f0_hz : ndarray, shape (frames,)
        Its F0 per frame, Hz (`librosa.yin` on the same framing).
    sr : int
        Sampling rate, Hz.
    frame_length, hop_length : int
        YIN's framing, samples.

    Returns
    -------
    ndarray, shape (frames,)
        The correlation per frame, in [-1, 1] (0 for a silent frame).
    """
    frames = librosa.util.frame(
        np.pad(y, frame_length // 2), frame_length=frame_length, hop_length=hop_length
    )[:, : len(f0_hz)]
    lag = np.clip(np.round(sr / f0_hz).astype(int), 1, frame_length // 2)
    span = frame_length - int(lag.max())
    cols = np.arange(frames.shape[1])
    now = frames[np.arange(span)[:, None], cols]
    later = frames[np.arange(span)[:, None] + lag, cols]
    energy = np.sqrt(np.sum(now**2, axis=0) * np.sum(later**2, axis=0))
    return np.divide(np.sum(now * later, axis=0), energy, out=np.zeros(len(cols)), where=energy > 0)


def f0_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """YIN F0 of the clip re the source (semitones) over the source's voiced frames, median
    of the last third minus the first: a rising pitch shift raises it. F0 is looked for in
    the source's range (`reading`; speech's by default). A range reaching above an eighth of
    ``sr`` is read at a multiple of it: YIN's lag grid is too coarse for a 3 kHz tone at
    16 kHz (five samples a period). A voiced frame is loud (within 25 dB of the source's
    loudest), periodic at its F0 (`periodicity` >= PERIODIC) and on a contour
    (`on_contour`): a sibilant or a noisy onset is not pitch, and a shift leaves it as it
    is. Frames more than OCTAVE_JUMP_ST apart are left out: YIN halves or
    doubles F0 in creaky stretches, in one signal and not the other, and where a clip holds
    a shifted value for long (a change placed early) such frames filled a third of a window.
    Where fewer than MIN_FRAMES frames remain, the loud frames are read."""
    n = min(len(clip), len(ref))
    low, high = current_reading().pitch_range_hz
    up = max(1, int(np.ceil(8 * high / sr)))
    rate = sr * up
    frame_length, hop_length = 1024 * up, 160 * up

    def at_rate(y: np.ndarray) -> np.ndarray:
        return resample_poly(y, up, 1).astype(np.float32) if up > 1 else y

    def yin(y: np.ndarray) -> np.ndarray:
        return librosa.yin(
            y, fmin=low, fmax=high, sr=rate, frame_length=frame_length, hop_length=hop_length
        )

    f_clip = yin(at_rate(clip[:n]))
    key = (hashlib.sha1(np.ascontiguousarray(ref[:n]).tobytes()).digest(), sr, low, high)
    if key not in _SOURCE_F0:  # a source is the reference of every clip made from it
        if len(_SOURCE_F0) >= 4:
            _SOURCE_F0.pop(next(iter(_SOURCE_F0)))
        y = at_rate(ref[:n])
        f0 = yin(y)
        periodic = periodicity(y, f0, rate, frame_length, hop_length) >= PERIODIC
        _SOURCE_F0[key] = (f0, on_contour(f0 * periodic, CONTOUR_STEP_ST, CONTOUR_FRAMES))
    f_ref, voiced = _SOURCE_F0[key]
    level = librosa.feature.rms(y=ref[:n], frame_length=1024, hop_length=160)[0]
    m = min(len(f_clip), len(f_ref), len(level))
    loud = level[:m] > level.max() * 10 ** (-25 / 20)
    diff = 12 * np.log2(f_clip[:m] / f_ref[:m])
    steady = np.abs(diff) <= OCTAVE_JUMP_ST
    for frames in (loud & voiced[:m] & steady, loud & steady, loud):
        if frames.sum() >= MIN_FRAMES:
            break
    first, last = _thirds(diff[frames])
    return float(np.median(last) - np.median(first))


MFCC_N_FFT = 2048  # librosa's default, which the MFCC alignment has always used


@lru_cache(maxsize=4)
def _mfcc_basis(sr: int, n_fft: int) -> np.ndarray:
    return librosa.filters.mel(sr=sr, n_fft=n_fft)


def _clip_mfcc(y: np.ndarray, sr: int) -> np.ndarray:
    """`librosa.feature.mfcc(y=y, sr=sr, n_mfcc=13, hop_length=160)`, the same numbers: its
    steps, but the mel filter bank applied by a matrix product instead of librosa's `np.einsum`
    (slower on numpy 2, and the ideal observer's largest cost)."""
    power = np.abs(librosa.stft(y, n_fft=MFCC_N_FFT, hop_length=160)) ** 2.0
    mel = _mfcc_basis(sr, MFCC_N_FFT) @ power
    return librosa.feature.mfcc(S=librosa.power_to_db(mel), n_mfcc=13)


_SOURCE_MFCC: dict[tuple[bytes, int], np.ndarray] = {}


def _mfcc(y: np.ndarray, sr: int, memo: bool = False) -> np.ndarray:
    """`_clip_mfcc`; with `memo`, kept for the last few signals (a source is the reference of
    every clip made from it, forwards and reversed)."""
    if not memo:
        return _clip_mfcc(y, sr)
    key = (hashlib.sha1(np.ascontiguousarray(y).tobytes()).digest(), sr)
    if key not in _SOURCE_MFCC:
        if len(_SOURCE_MFCC) >= 4:
            _SOURCE_MFCC.pop(next(iter(_SOURCE_MFCC)))
        _SOURCE_MFCC[key] = _clip_mfcc(y, sr)
    return _SOURCE_MFCC[key]


def _alignment(clip: np.ndarray, ref: np.ndarray, sr: int) -> np.ndarray:
    """The DTW path (source frame, clip frame), from the start, of a clip against its source:
    on MFCCs by cosine distance for speech (its phonetic content), on onset strength and
    log-mel levels by Euclidean distance for any other kind (`reading`): a sustained note has
    no phonemes, and its timing lies in its onsets and the course of its decay."""
    if current_reading().kind == SPEECH:
        _, path = librosa.sequence.dtw(
            X=_mfcc(ref, sr, memo=True), Y=_mfcc(clip, sr), metric="cosine"
        )
        return path[::-1]
    a, b = (_onsets_and_levels(y, sr) for y in (ref, clip))
    _, path = librosa.sequence.dtw(X=a, Y=b)
    return path[::-1]


def _onsets_and_levels(y: np.ndarray, sr: int) -> np.ndarray:
    """(41, frames): onset strength over 40 log-mel band levels, 10 ms hop at 16 kHz."""
    mel = librosa.feature.melspectrogram(y=y, sr=sr, n_fft=512, hop_length=160, n_mels=40)
    onsets = librosa.onset.onset_strength(S=librosa.power_to_db(mel), sr=sr)
    return np.vstack([onsets[None, :], np.log(mel + 1e-8)])


def rate_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Align the clip to its source by DTW (`_alignment`); compare the source-over-clip time
    slope in the first and last thirds: of the whole path for speech, of its stretch over the
    source's sound (within 30 dB of its loudest frame) for other kinds, whose silences are a
    larger share of the file."""
    path = _alignment(clip, ref, sr)
    if current_reading().kind != SPEECH:
        active = _active(ref)
        sounding = active[np.minimum(path[:, 0], len(active) - 1)]
        path = path[sounding] if sounding.sum() >= 10 else path
    first, last = _thirds(path)
    slopes = [np.polyfit(p[:, 1], p[:, 0], 1)[0] for p in (first, last)]
    return float(np.log(slopes[1] / slopes[0]))


def held_rate(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Log rate of a held clip: the source-over-clip time slope of the alignment
    (`_alignment`) over the source's speech frames (the silences around it, and any padding,
    left out). The thirds of `rate_change` cannot be used: padding after a fast part would
    fill the last third."""
    path = _alignment(clip, ref, sr)[::-1]
    active = _active(ref)
    speech = active[np.minimum(path[:, 0], len(active) - 1)]
    points = path[speech] if speech.sum() >= 5 else path
    return float(np.log(np.polyfit(points[:, 1], points[:, 0], 1)[0]))


def added_energy(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Energy of what was added (noise, reverb, distortion error), late vs early, in dB."""
    n = min(len(clip), len(ref))
    gain = np.dot(clip[:n], ref[:n]) / max(np.dot(ref[:n], ref[:n]), 1e-12)
    added = _rms(clip[:n] - gain * ref[:n]) ** 2
    first, last = _thirds(added)
    return float(_db(np.array([last.mean()]))[0] - _db(np.array([first.mean()]))[0])


def high_band_kept_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """High band kept relative to the source, band by band: the mean over the mel bands
    above 1 kHz where the source stands 10 dB clear of its floor of the clip/source level
    (dB), re the 150-1000 Hz band. Rising means clearer. Band by band, so the 5-8 kHz bands a
    5 kHz low-pass removes count as much as the loud 1-3 kHz ones, whose summed energy a
    low-pass barely moves."""
    n = min(len(clip), len(ref))
    c, r = mel_spectrogram(clip[:n], sr), mel_spectrogram(ref[:n], sr)
    m = min(c.shape[1], r.shape[1])
    c, r = c[:, :m], r[:, :m]
    centres = mel_centres(sr)
    floor = np.percentile(r, 1, axis=1, keepdims=True)
    clear = r > floor * 10.0
    low_band = (centres >= 150) & (centres < 1000)
    offset = _db(c[low_band].sum(axis=0)) - _db(r[low_band].sum(axis=0))
    high = clear & (centres >= 1000)[:, None]
    kept = np.where(high, np.clip(_db(c) - _db(r), -40.0, 10.0), 0.0)
    counted = high.sum(axis=0)
    per_frame = kept.sum(axis=0) / np.maximum(counted, 1) - offset
    active = _active(ref[:n])[:m] & (counted > 0)
    first, last = _thirds(per_frame[active])
    return float(np.median(last) - np.median(first))


def envelope_fluctuation_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Variance of the clip/source envelope ratio: tremolo makes it fluctuate."""
    n = min(len(clip), len(ref))
    c = librosa.feature.rms(y=clip[:n], frame_length=160, hop_length=80, center=False)[0]
    r = librosa.feature.rms(y=ref[:n], frame_length=160, hop_length=80, center=False)[0]
    ok = r > r.max() * 10 ** (-30 / 20)
    ratio = np.log(np.maximum(c[ok], 1e-9) / r[ok])
    first, last = _thirds(ratio)
    return float(np.std(last) - np.std(first))


TILT_RANGE_DB = 30.0  # a source's spectrum spans the bins within this of its strongest
TILT_BAND_HZ = (150.0, 6000.0)  # where the tilt is read


def spectral_tilt_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Level of the top third of the source's spectrum re its bottom third (in log
    frequency, over the bins within TILT_RANGE_DB of its strongest, in TILT_BAND_HZ), in the
    clip over the source: rising means brighter. The thirds are the source's own, so a 2
    kHz harmonic complex is read between its first and second partials (bands fixed for
    speech, 150-800 Hz and 2-6 kHz, read a sound with no energy below 800 Hz by its
    leakage)."""
    n = min(len(clip), len(ref))
    spec_c = np.abs(librosa.stft(clip[:n], n_fft=512, hop_length=160)) ** 2
    spec_r = np.abs(librosa.stft(ref[:n], n_fft=512, hop_length=160)) ** 2
    freqs = librosa.fft_frequencies(sr=sr, n_fft=512)
    power = spec_r.sum(axis=1)
    band = (freqs >= TILT_BAND_HZ[0]) & (freqs <= TILT_BAND_HZ[1])
    if not power[band].any():
        return 0.0
    strong = band & (power >= power[band].max() * 10 ** (-TILT_RANGE_DB / 10))
    edges = np.log2(freqs[strong])
    lowest, highest = edges.min(), edges.max()
    octaves = np.log2(np.maximum(freqs, 1.0))
    low = strong & (octaves <= lowest + (highest - lowest) / 3)
    high = strong & (octaves >= highest - (highest - lowest) / 3)
    tilt = (
        _db(spec_c[high].sum(axis=0))
        - _db(spec_c[low].sum(axis=0))
        - _db(spec_r[high].sum(axis=0))
        + _db(spec_r[low].sum(axis=0))
    )
    first, last = _speech_thirds(tilt, _active(ref[:n]))
    return float(np.median(last) - np.median(first))


def centroid_fall(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Log-frequency centroid (200-4000 Hz) of the clip re the source: formants going down
    (a longer tract) pull it down, so a falling centroid means "increase"."""
    n = min(len(clip), len(ref))
    freqs = librosa.fft_frequencies(sr=sr, n_fft=512)
    band = (freqs >= 200) & (freqs <= 4000)
    octaves = np.log2(freqs[band])

    def centroid(y: np.ndarray) -> np.ndarray:
        power = np.abs(librosa.stft(y, n_fft=512, hop_length=160))[band] ** 2
        return octaves @ power / np.maximum(power.sum(axis=0), 1e-12)

    first, last = _speech_thirds(centroid(clip[:n]) - centroid(ref[:n]), _active(ref[:n]))
    return float(np.median(first) - np.median(last))


def uncorrelated_energy_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """What the clip holds that the source does not: its energy uncorrelated with the source
    (1 - rho^2 of each 32 ms frame's energy, rho the clip/source correlation) over its
    correlated energy, summed over the first and the last third of the source's speech
    frames; dB, late minus early. Sums, not a median of frames: a breathy voice puts its
    noise in the voiced frames only, and where a third holds many fricatives and weak final
    frames, which take none, they set its median, and a rise in breathiness could read as a
    fall (CHANGELOG.md has a pair where it did)."""
    n = min(len(clip), len(ref))
    c = librosa.util.frame(clip[:n].astype(np.float64), frame_length=512, hop_length=160)
    r = librosa.util.frame(ref[:n].astype(np.float64), frame_length=512, hop_length=160)
    energy = (c * c).sum(axis=0)
    rho2 = (c * r).sum(axis=0) ** 2 / np.maximum(energy * (r * r).sum(axis=0), 1e-24)
    active = _active(ref[:n])
    (added_first, added_last), (kept_first, kept_last) = (
        _speech_thirds(energy * share, active) for share in (1.0 - rho2, rho2)
    )
    late = max(added_last.sum(), 1e-24) / max(kept_last.sum(), 1e-24)
    early = max(added_first.sum(), 1e-24) / max(kept_first.sum(), 1e-24)
    return float(10 * np.log10(late / early))


def interaural_level_change(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Right-over-left level above 1.5 kHz (dB), late third minus early third of the
    source's speech frames: moving right raises it. No second channel, no evidence."""
    if clip.ndim != 2 or clip.shape[1] < 2:
        return 0.0
    spec = [
        np.abs(librosa.stft(np.ascontiguousarray(clip[:, c]), n_fft=512, hop_length=160)) ** 2
        for c in (0, 1)
    ]
    high = librosa.fft_frequencies(sr=sr, n_fft=512) > 1500
    ild = _db(spec[1][high].sum(axis=0)) - _db(spec[0][high].sum(axis=0))
    first, last = _speech_thirds(ild, _active(ref[: len(clip)]))
    return float(np.median(last) - np.median(first))


def level_fall(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """`level_change` negated: the level re the source falling, as when a source moves away
    (the room's reverberation fills in, but less)."""
    return -level_change(clip, ref, sr)

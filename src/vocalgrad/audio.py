"""Audio I/O and the few signal helpers every stage shares.

All audio inside vocalgrad is float32 in [-1, 1] at an explicit sample rate: mono
(samples,), except the clips of a two-channel dimension (stereo direction), which are
(samples, 2); sources are always mono.
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass
from functools import lru_cache
from math import gcd
from pathlib import Path

import numpy as np
import pyloudnorm
import soundfile as sf
from scipy.signal import lfilter, resample_poly, sos2tf

from vocalgrad.errors import AudioError
from vocalgrad.files import atomic_write_bytes

AUDIO_EXTENSIONS = (".wav", ".flac", ".ogg", ".mp3")
MIN_SAMPLE_RATE = 8000
PEAK_CEILING = 10 ** (-1 / 20)  # -1 dBFS: headroom against inter-sample overs on encode
FRAME_S = 0.010
# How far outside the detected speech span the "edges" of a clip begin: a detector's onset is
# a threshold crossing, and the first phoneme's rise begins before it. The renderer keeps the
# source's own samples beyond it (`SPEC.source_edges`) and the audit's edge windows stop at it,
# so the two must agree: this is the one constant both read.
EDGE_GUARD_S = 0.1


def load_audio(path: str | os.PathLike, mono: bool = True) -> tuple[np.ndarray, int]:
    """Read any soundfile-readable file as float32, downmixed to mono unless mono=False;
    reject what cannot be speech.

    Why refuse here: a file every stage reads once is the one place to say, in one line,
    which file is unusable and what to do about it, before a build renders from it.

    Parameters
    ----------
    path : str or os.PathLike
        An audio file libsndfile reads (WAV, FLAC, OGG, MP3, ...).
    mono : bool
        Average the channels into one (default). False keeps a multi-channel file's
        channels apart; a mono file is returned as shape (n,) either way.

    Returns
    -------
    audio : ndarray, shape (n,) or (n, channels), float32
        The samples as stored (not rescaled), C-contiguous.
    sr : int
        The file's sample rate, Hz (at least MIN_SAMPLE_RATE).

    Raises
    ------
    AudioError
        The file does not exist, cannot be decoded, holds no samples, is sampled below
        MIN_SAMPLE_RATE, or holds NaN or infinite samples.
    """
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: no such audio file")
    try:
        data, sr = sf.read(path, dtype="float32", always_2d=True)
    except (sf.LibsndfileError, RuntimeError, TypeError) as err:
        raise AudioError(
            f"{path}: cannot decode audio ({err}); re-export it as WAV or FLAC"
        ) from err
    if data.size == 0:
        raise AudioError(f"{path}: file holds no samples")
    if sr < MIN_SAMPLE_RATE:
        raise AudioError(
            f"{path}: sample rate {sr} Hz is below {MIN_SAMPLE_RATE} Hz; use a wideband recording"
        )
    audio = (
        data.mean(axis=1)
        if mono and data.shape[1] > 1
        else (data if data.shape[1] > 1 else data[:, 0])
    )
    if not np.all(np.isfinite(audio)):
        raise AudioError(f"{path}: contains NaN or infinite samples")
    return np.ascontiguousarray(audio, dtype=np.float32), int(sr)


def resample(audio: np.ndarray, sr_from: int, sr_to: int) -> np.ndarray:
    """Polyphase resampling (scipy), exact for rational ratios such as 48k -> 16k.

    Parameters
    ----------
    audio : ndarray, shape (n,) or (n, channels)
        Samples, resampled along axis 0.
    sr_from : int
        The rate `audio` is sampled at, Hz.
    sr_to : int
        The rate wanted, Hz.

    Returns
    -------
    ndarray, shape (m,) or (m, channels), float32
        The resampled signal, m = ceil(n * sr_to / sr_from); `audio` itself (as float32,
        not copied) when the rates are equal.
    """
    if sr_from == sr_to:
        return audio.astype(np.float32, copy=False)
    g = gcd(int(sr_from), int(sr_to))
    return resample_poly(audio, sr_to // g, sr_from // g, axis=0).astype(np.float32)


@lru_cache(maxsize=8)
def _k_weighting(sr: int) -> tuple[np.ndarray, np.ndarray, float]:
    """pyloudnorm's BS.1770 K-weighting filters for this rate as one 4th-order transfer
    function (b, a) and the passband gain. Why one filter: a direct-form filter is faster than
    the two second-order sections (every clip is K-weighted three times) and agrees with them
    far below a clip's 16-bit resolution from 8 to 48 kHz (its poles lie at most 0.996 from 0,
    so the direct form stays well conditioned)."""
    sections, gain = [], 1.0
    for stage in pyloudnorm.Meter(sr)._filters.values():
        b, a = stage.generate_coefficients()
        sections.append(np.concatenate([b, a]))
        gain *= stage.passband_gain
    b, a = sos2tf(np.array(sections))
    return b, a, gain


def loudness_lufs(audio: np.ndarray, sr: int) -> float:
    """Integrated loudness (ITU-R BS.1770-4) in LUFS; -inf for silence.

    The same numbers as `pyloudnorm.Meter(sr).integrated_loudness` (`tests/test_audio.py`
    compares them), with its filters, block layout and two gates, but vectorised: it runs on
    every rendered clip, and pyloudnorm redesigns its filters and loops over blocks in Python
    on each call.

    Parameters
    ----------
    audio : ndarray, shape (n,) or (n, channels), float in [-1, 1]
        The signal; a multi-channel one sums the channels' energies (left and right weigh 1).
        One shorter than a 400 ms block is zero-padded to one block.
    sr : int
        Sample rate, Hz.

    Returns
    -------
    float
        Integrated loudness, LUFS; -inf when no block clears the -70 LUFS absolute gate.
    """
    if len(audio) < int(BLOCK_S * sr) + 1:  # the meter needs one 400 ms block
        pad = [(0, int(BLOCK_S * sr) + 1 - len(audio))] + [(0, 0)] * (audio.ndim - 1)
        audio = np.pad(audio, pad)
    return weighted_loudness_lufs(k_weight(audio, sr), sr)


BLOCK_S, BLOCK_STEP = 0.4, 0.25  # BS.1770 gating blocks: 400 ms, 75% overlap


def k_weight(audio: np.ndarray, sr: int) -> np.ndarray:
    """The BS.1770 K-weighted signal: what loudness and loudness-weighted energy are read from.

    Parameters
    ----------
    audio : ndarray, shape (n,) or (n, channels)
        The signal; channels (axis 1) are filtered apart.
    sr : int
        Sample rate, Hz.

    Returns
    -------
    ndarray, same shape as `audio`, float64
        The pre-filtered (high-shelf) and RLB-weighted (high-pass) signal, passband gain
        included.
    """
    b, a, gain = _k_weighting(sr)
    return gain * lfilter(b, a, audio.astype(np.float64), axis=0)


def weighted_loudness_lufs(weighted: np.ndarray, sr: int) -> float:
    """Integrated loudness of an already K-weighted signal (`k_weight`): the gating half of
    `loudness_lufs`, so a clip filtered once gives both its loudness and its frame energies.

    Parameters
    ----------
    weighted : ndarray, shape (n,) or (n, channels), float
        The output of `k_weight`; one shorter than a 400 ms block is zero-padded to one.
    sr : int
        Sample rate, Hz.

    Returns
    -------
    float
        Integrated loudness, LUFS; -inf when no block clears the -70 LUFS absolute gate.
    """
    if len(weighted) < int(BLOCK_S * sr) + 1:
        weighted = np.pad(
            weighted, [(0, int(BLOCK_S * sr) + 1 - len(weighted))] + [(0, 0)] * (weighted.ndim - 1)
        )
    n_blocks = int(np.round((len(weighted) / sr - BLOCK_S) / (BLOCK_S * BLOCK_STEP))) + 1
    j = np.arange(n_blocks)
    lower = (BLOCK_S * (j * BLOCK_STEP) * sr).astype(int)
    upper = (BLOCK_S * (j * BLOCK_STEP + 1) * sr).astype(int)
    power = weighted**2 if weighted.ndim == 1 else (weighted**2).sum(axis=1)
    energy = np.concatenate([[0.0], np.cumsum(power)])
    z = (energy[np.minimum(upper, len(weighted))] - energy[lower]) / (BLOCK_S * sr)
    with np.errstate(divide="ignore", invalid="ignore"):
        level = -0.691 + 10.0 * np.log10(z)
        above_absolute = level >= -70.0
        if not above_absolute.any():
            return float("-inf")
        relative = -0.691 + 10.0 * np.log10(z[above_absolute].mean()) - 10.0
        gated = (level > relative) & (level > -70.0)
        return float(
            -0.691 + 10.0 * np.log10(np.nan_to_num(z[gated].mean()) if gated.any() else 0.0)
        )


def k_weighted_frame_power(audio: np.ndarray, sr: int, frame_s: float = FRAME_S) -> np.ndarray:
    """Mean square of the BS.1770 K-weighted signal per frame: loudness-weighted energy.

    Parameters
    ----------
    audio : ndarray, shape (n,), float in [-1, 1]
        A mono signal.
    sr : int
        Sample rate, Hz.
    frame_s : float
        Frame length, seconds (default FRAME_S, 10 ms); frames do not overlap.

    Returns
    -------
    ndarray, shape (n // round(frame_s * sr),), float64
        Mean square of each whole frame of the K-weighted signal (linear power, full scale
        = 1); the last partial frame is dropped.
    """
    return frame_rms(k_weight(audio, sr), sr, frame_s) ** 2


def normalise(audio: np.ndarray, sr: int, target_lufs: float) -> np.ndarray:
    """Set integrated loudness, then pull the peak under -1 dBFS if needed (never clips).

    Parameters
    ----------
    audio : ndarray, shape (n,) or (n, channels), float32 in [-1, 1]
        The signal.
    sr : int
        Sample rate, Hz.
    target_lufs : float
        The integrated loudness wanted, LUFS.

    Returns
    -------
    ndarray, same shape as `audio`, float32
        `audio` under one constant gain: at `target_lufs` unless its peak would then pass
        PEAK_CEILING (-1 dBFS), in which case quieter, with the peak at the ceiling.

    Raises
    ------
    AudioError
        `audio` is silent (its loudness is -inf), so no gain reaches the target.
    """
    lufs = loudness_lufs(audio, sr)
    if not np.isfinite(lufs):
        raise AudioError("cannot loudness-normalise silence")
    out = audio * np.float32(10 ** ((target_lufs - lufs) / 20))
    return limit_peak(out)


def peak_gain(*clips: np.ndarray, ceiling: float = PEAK_CEILING) -> float:
    """The one constant gain (<= 1) that brings the loudest peak of the clips to the ceiling.

    Why one gain for several clips: clips compared with each other (a recognition item and
    its twin) must keep their level difference.

    Parameters
    ----------
    *clips : ndarray
        Signals of any shape, float in [-1, 1]; empty ones are ignored.
    ceiling : float
        The largest absolute sample value allowed, linear full scale (default PEAK_CEILING,
        -1 dBFS).

    Returns
    -------
    float
        Linear gain in (0, 1]: ``ceiling / peak`` when the loudest peak exceeds the ceiling,
        else 1.
    """
    peak = max((float(np.max(np.abs(c))) for c in clips if c.size), default=0.0)
    return ceiling / peak if peak > ceiling else 1.0


def limit_peak(audio: np.ndarray, ceiling: float = PEAK_CEILING) -> np.ndarray:
    """Scale the whole clip down (one constant gain) so its peak sits at or under ceiling.

    Parameters
    ----------
    audio : ndarray, float
        The signal, any shape.
    ceiling : float
        The largest absolute sample value allowed, linear full scale (default PEAK_CEILING).

    Returns
    -------
    ndarray, same shape as `audio`, float32
        `audio` scaled by `peak_gain`; unchanged (as float32) if its peak is under the ceiling.
    """
    gain = peak_gain(audio, ceiling=ceiling)
    return (audio * np.float32(gain) if gain < 1.0 else audio).astype(np.float32, copy=False)


def frame_rms(audio: np.ndarray, sr: int, frame_s: float = FRAME_S) -> np.ndarray:
    """RMS of consecutive non-overlapping frames (last partial frame dropped).

    Parameters
    ----------
    audio : ndarray, shape (n,), float
        A mono signal.
    sr : int
        Sample rate, Hz.
    frame_s : float
        Frame length, seconds (default FRAME_S, 10 ms; at least one sample).

    Returns
    -------
    ndarray, shape (n // round(frame_s * sr),), float64
        RMS of each whole frame, linear full scale; empty when `audio` is shorter than a frame.
    """
    n = max(1, int(round(frame_s * sr)))
    usable = (len(audio) // n) * n
    if usable == 0:
        return np.zeros(0, dtype=np.float64)
    frames = audio[:usable].astype(np.float64).reshape(-1, n)
    return np.sqrt(np.mean(frames**2, axis=1))


@dataclass(frozen=True)
class SpeechSpan:
    """Where speech starts and stops, and whether that looks like a usable utterance.

    Attributes
    ----------
    onset_s : float
        Start of the speech, seconds from the start of the file.
    offset_s : float
        End of the speech, seconds from the start of the file.
    plausible : bool
        Whether the span looks like one usable utterance (long enough, with level contrast or
        a speech-like spectrum).
    reason : str
        Why it is not plausible; empty when it is.
    """

    onset_s: float
    offset_s: float
    plausible: bool
    reason: str = ""

    @property
    def duration_s(self) -> float:
        """Length of the speech span, seconds."""
        return self.offset_s - self.onset_s


def speech_span(
    audio: np.ndarray,
    sr: int,
    min_run_s: float = 0.10,
    min_span_s: float = 0.8,
    min_dynamic_db: float = 15.0,
    pre_emphasis: float = 0.97,
) -> SpeechSpan:
    """Detect the speech span from the level distribution, not from leading silence.

    The published detector takes the first 200 ms as the noise floor, which fails on
    trimmed corpora where speech starts at sample 0. Here the floor is a low percentile of
    all 10 ms frame levels and the threshold sits between floor and loud speech, so clips
    with no leading (or trailing) silence still get a correct span. Levels are read on the
    signal pre-emphasised by ``pre_emphasis`` (speech's consonants count, its hum less); 0 reads
    the plain signal, as other kinds of sound need: a tone that stops dead in digital silence
    leaves one pre-emphasised sample past its end, loud enough to add a 10 ms frame to its span.

    Parameters
    ----------
    audio : ndarray, shape (n,), float32 in [-1, 1]
        A mono recording.
    sr : int
        Sample rate, Hz.
    min_run_s : float
        Shortest run of loud frames that counts as speech, seconds.
    min_span_s : float
        Shortest span from the first to the last such run that counts as an utterance,
        seconds.
    min_dynamic_db : float
        Level contrast between the quiet floor and the loudest frame (dB) under which the
        recording has no pauses to find; it is then speech edge to edge, or noise.
    pre_emphasis : float
        The first-order pre-emphasis coefficient the levels are read after (0: none).

    Returns
    -------
    SpeechSpan
        The span found (the whole file when none is found), with ``plausible`` false and a
        ``reason`` when the recording is silent, has no speech-like run, a span shorter than
        `min_span_s`, or neither level contrast nor a speech-like spectrum.
    """
    emphasised = np.concatenate([audio[:1], audio[1:] - pre_emphasis * audio[:-1]])
    rms = frame_rms(emphasised, sr)
    total_s = len(audio) / sr
    if rms.size == 0 or float(rms.max()) <= 1e-7:
        return SpeechSpan(0.0, total_s, False, "silent")
    level = 20 * np.log10(np.maximum(rms, 1e-9))
    floor = float(np.percentile(level, 10))
    loud = float(level.max())
    if loud - floor < min_dynamic_db:
        # No quiet frames: either speech fills the clip edge to edge, or it is all noise.
        active = np.ones_like(level, dtype=bool)
        dynamic_ok = False
    else:
        threshold = max(floor + 0.35 * (loud - floor), loud - 35.0)
        active = level > threshold
        dynamic_ok = True
    runs = _runs(active, int(round(min_run_s / FRAME_S)))
    if not runs:
        return SpeechSpan(0.0, total_s, False, "no speech-like run of frames")
    onset = runs[0][0] * FRAME_S
    offset = min(runs[-1][1] * FRAME_S, total_s)
    if offset - onset < min_span_s:
        return SpeechSpan(
            onset,
            offset,
            False,
            f"speech span {offset - onset:.2f} s is shorter than {min_span_s} s",
        )
    if not dynamic_ok:
        spectral_flatness = _flatness(audio)
        if spectral_flatness > 0.3:
            return SpeechSpan(
                onset, offset, False, "no level contrast and noise-like spectrum: not speech"
            )
    return SpeechSpan(onset, offset, True)


def _runs(active: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    """Start/stop frame indices of True runs at least min_len long."""
    padded = np.concatenate([[False], active, [False]])
    edges = np.flatnonzero(np.diff(padded.astype(np.int8)))
    starts, stops = edges[::2], edges[1::2]
    return [(int(a), int(b)) for a, b in zip(starts, stops, strict=True) if b - a >= min_len]


def _flatness(audio: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(audio[: 1 << 15].astype(np.float64))) ** 2 + 1e-20
    return float(np.exp(np.mean(np.log(spectrum))) / np.mean(spectrum))


def write_flac_atomic(path: Path, audio: np.ndarray, sr: int) -> str:
    """Write 16-bit FLAC via a temporary file + rename, so a kill never leaves half a file.

    Encodes in memory first and returns the file's sha256, so nothing is read back.

    Parameters
    ----------
    path : Path
        Where the file goes; an existing file is replaced by a rename once the new one is
        whole. Not synced to disk: a clip lost to a power cut is rendered again on resume.
    audio : ndarray, shape (n,) or (n, 2), float32 in [-1, 1]
        The clip; samples are quantised to 16 bits.
    sr : int
        Sample rate, Hz.

    Returns
    -------
    str
        SHA-256 of the written file's bytes, hex.
    """
    buffer = io.BytesIO()
    sf.write(buffer, audio, sr, format="FLAC", subtype="PCM_16")
    data = buffer.getvalue()
    atomic_write_bytes(path, data, sync=False)  # a clip is rendered again on resume if lost
    return hashlib.sha256(data).hexdigest()

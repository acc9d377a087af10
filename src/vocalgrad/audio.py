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
    """Read any soundfile-readable file as float32, downmixed to mono unless mono=False
    (then (samples, channels) for a multi-channel file); reject what cannot be speech."""
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
    """Polyphase resampling (scipy), exact for rational ratios such as 48k -> 16k."""
    if sr_from == sr_to:
        return audio.astype(np.float32, copy=False)
    g = gcd(int(sr_from), int(sr_to))
    return resample_poly(audio, sr_to // g, sr_from // g, axis=0).astype(np.float32)


@lru_cache(maxsize=8)
def _k_weighting(sr: int) -> tuple[np.ndarray, np.ndarray, float]:
    """pyloudnorm's BS.1770 K-weighting filters for this rate as one 4th-order transfer
    function (b, a) and the passband gain. One direct-form filter runs 2.3x faster than the
    two second-order sections (every clip is K-weighted three times), within 2e-10 of them
    relative to the signal's RMS from 8 to 48 kHz (its poles lie at most 0.996 from 0)."""
    sections, gain = [], 1.0
    for stage in pyloudnorm.Meter(sr)._filters.values():
        b, a = stage.generate_coefficients()
        sections.append(np.concatenate([b, a]))
        gain *= stage.passband_gain
    b, a = sos2tf(np.array(sections))
    return b, a, gain


def loudness_lufs(audio: np.ndarray, sr: int) -> float:
    """Integrated loudness (ITU-R BS.1770-4) in LUFS; -inf for silence.

    The same numbers as `pyloudnorm.Meter(sr).integrated_loudness` (tested to 1e-9), with its
    filters, block layout and two gates, but vectorised: it runs on every rendered clip, and
    pyloudnorm redesigns its filters and loops over blocks in Python on each call. A
    (samples, channels) array sums the channels' energies (left and right weigh 1).
    """
    if len(audio) < int(BLOCK_S * sr) + 1:  # the meter needs one 400 ms block
        pad = [(0, int(BLOCK_S * sr) + 1 - len(audio))] + [(0, 0)] * (audio.ndim - 1)
        audio = np.pad(audio, pad)
    return weighted_loudness_lufs(k_weight(audio, sr), sr)


BLOCK_S, BLOCK_STEP = 0.4, 0.25  # BS.1770 gating blocks: 400 ms, 75% overlap


def k_weight(audio: np.ndarray, sr: int) -> np.ndarray:
    """The BS.1770 K-weighted signal (float64; channels along axis 1 stay apart)."""
    b, a, gain = _k_weighting(sr)
    return gain * lfilter(b, a, audio.astype(np.float64), axis=0)


def weighted_loudness_lufs(weighted: np.ndarray, sr: int) -> float:
    """Integrated loudness of an already K-weighted signal (`k_weight`): the gating half of
    `loudness_lufs`, so a clip filtered once gives both its loudness and its frame energies."""
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
    """Mean square of the BS.1770 K-weighted signal per frame: loudness-weighted energy."""
    return frame_rms(k_weight(audio, sr), sr, frame_s) ** 2


def normalise(audio: np.ndarray, sr: int, target_lufs: float) -> np.ndarray:
    """Set integrated loudness, then pull the peak under -1 dBFS if needed (never clips)."""
    lufs = loudness_lufs(audio, sr)
    if not np.isfinite(lufs):
        raise AudioError("cannot loudness-normalise silence")
    out = audio * np.float32(10 ** ((target_lufs - lufs) / 20))
    return limit_peak(out)


def peak_gain(*clips: np.ndarray, ceiling: float = PEAK_CEILING) -> float:
    """The one constant gain (<= 1) that brings the loudest peak of the clips to the ceiling."""
    peak = max((float(np.max(np.abs(c))) for c in clips if c.size), default=0.0)
    return ceiling / peak if peak > ceiling else 1.0


def limit_peak(audio: np.ndarray, ceiling: float = PEAK_CEILING) -> np.ndarray:
    """Scale the whole clip down (one constant gain) so its peak sits at or under ceiling."""
    gain = peak_gain(audio, ceiling=ceiling)
    return (audio * np.float32(gain) if gain < 1.0 else audio).astype(np.float32, copy=False)


def frame_rms(audio: np.ndarray, sr: int, frame_s: float = FRAME_S) -> np.ndarray:
    """RMS of consecutive non-overlapping frames (last partial frame dropped)."""
    n = max(1, int(round(frame_s * sr)))
    usable = (len(audio) // n) * n
    if usable == 0:
        return np.zeros(0, dtype=np.float64)
    frames = audio[:usable].astype(np.float64).reshape(-1, n)
    return np.sqrt(np.mean(frames**2, axis=1))


@dataclass(frozen=True)
class SpeechSpan:
    """Where speech starts and stops, and whether that looks like a usable utterance."""

    onset_s: float
    offset_s: float
    plausible: bool
    reason: str = ""

    @property
    def duration_s(self) -> float:
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

    Encodes in memory first and returns the file's sha256, so nothing is read back."""
    buffer = io.BytesIO()
    sf.write(buffer, audio, sr, format="FLAC", subtype="PCM_16")
    data = buffer.getvalue()
    atomic_write_bytes(path, data, sync=False)  # a clip is rendered again on resume if lost
    return hashlib.sha256(data).hexdigest()

"""Lazy, cached acoustic analyses of one clip, shared by every measurement of that clip.

Rendering and verification ask for the same few analyses (F0 track, frame levels, log-mel,
speech span) many times per source; computing each once per signal is what keeps
verification cheap enough to run on every clip.
"""

from __future__ import annotations

import os
import tempfile
from functools import cached_property, lru_cache

import librosa
import numpy as np
import parselmouth
from scipy.signal import firwin, resample_poly

from vocalgrad.audio import (
    BLOCK_S,
    FRAME_S,
    SpeechSpan,
    frame_rms,
    k_weight,
    loudness_lufs,
    speech_span,
    weighted_loudness_lufs,
)
from vocalgrad.signal.kinds import SPEECH, get_kind

F0_FLOOR_HZ = 60.0
F0_STEP_S = 0.03
F0_CANDIDATES = 5  # Praat's default is 15; 5 is enough for speech, and cheaper
F0_CEILING_HZ = 500.0  # high female voices shifted up 4 semitones peak above 400 Hz
F0_ANALYSIS_SR = 4000  # F0 is tracked on a copy at about this rate (sr // this, decimated)
HEAD_TAIL_FRACTION = 0.2  # measurements compare the first and last 20% of the speech span
ACTIVE_RANGE_DB = 40.0  # frames within 40 dB of the loudest count as speech-active
LEVEL_FLOOR_DB = -120.0
N_MELS = 40
QUIET_PERCENTILE = 1  # a signal's floor: its quietest 1% of frames (room tone, mic noise)
EXTENT_BELOW_PEAK_DB = 40.0  # `Analysis.extent`: samples this close to the peak are the sound


# what `Analysis.with_span` computes again: the analyses that read the speech span
_SPAN_DEPENDENT = frozenset({"span", "f0", "median_f0", "level_slope_db"})

_TMP = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


class Analysis:
    """One float32 signal with its analyses computed on first use. A two-channel clip
    (samples, 2) keeps its channels in `channels`; every analysis here reads `audio`, their
    mean (what a listener that downmixes hears)."""

    def __init__(
        self,
        audio: np.ndarray,
        sr: int,
        span: SpeechSpan | None = None,
        pitch_ceiling_hz: float = F0_CEILING_HZ,
        kind: str = SPEECH,
    ) -> None:
        audio = np.asarray(audio, dtype=np.float32)
        self.pitch_ceiling_hz = float(pitch_ceiling_hz)  # `pitch_ceiling` of the kind of sound
        self.kind = kind  # the kind of sound (`vocalgrad.signal.kinds`): how a process treats it
        self.channels = np.ascontiguousarray(audio if audio.ndim == 2 else audio[:, None])
        self.audio = np.ascontiguousarray(audio.mean(axis=1) if audio.ndim == 2 else audio)
        self.sr = int(sr)
        if span is not None:
            self.__dict__["span"] = span
        self.cache: dict[str, object] = {}  # render-side per-source state (e.g. Praat objects)

    @property
    def duration_s(self) -> float:
        return len(self.audio) / self.sr

    def like(self, audio: np.ndarray, span: SpeechSpan | None = None) -> Analysis:
        """Another signal at this one's rate, analysed as this one is (the same pitch range
        and kind of sound): a clip rendered from a source, or the source processed."""
        return Analysis(
            audio, self.sr, span=span, pitch_ceiling_hz=self.pitch_ceiling_hz, kind=self.kind
        )

    @cached_property
    def span(self) -> SpeechSpan:
        return speech_span(self.audio, self.sr)

    @cached_property
    def extent(self) -> tuple[int, int]:
        """(first, one past the last) sample within EXTENT_BELOW_PEAK_DB of the peak: where
        the sound is, to the sample (a tone's hard onset and offset; a note up to the end of
        its audible decay). (0, 0) for digital silence."""
        magnitude = np.abs(self.audio)
        peak = float(magnitude.max()) if magnitude.size else 0.0
        inside = np.flatnonzero(magnitude >= peak * 10 ** (-EXTENT_BELOW_PEAK_DB / 20))
        return (int(inside[0]), int(inside[-1]) + 1) if peak > 0 else (0, 0)

    @cached_property
    def k_weighted(self) -> np.ndarray:
        """The K-weighted signal (`audio`, a two-channel clip's downmix), filtered once for
        both the loudness and the frame energies: the filter is a fair share of verifying
        every clip."""
        return k_weight(self.audio, self.sr)

    @cached_property
    def loudness_lufs(self) -> float:
        """BS.1770 loudness, a two-channel clip's as if both ears heard its downmix: what a
        model that sums to mono hears, on the scale of the two ears (a voice ahead reads as
        its ears do), the downmix the renderer levels (`render.span_loudness`, which also reads
        the speech backwards)."""
        n = self.channels.shape[1]
        if (
            len(self.audio) < int(BLOCK_S * self.sr) + 1
        ):  # padded before filtering, as the meter does
            return loudness_lufs(
                np.repeat(self.audio[:, None], n, axis=1) if n > 1 else self.audio, self.sr
            )
        weighted = self.k_weighted
        return weighted_loudness_lufs(
            np.repeat(weighted[:, None], n, axis=1) if n > 1 else weighted, self.sr
        )

    @cached_property
    def sound(self) -> parselmouth.Sound:
        return parselmouth.Sound(self.audio.astype(np.float64), self.sr)

    @cached_property
    def f0(self) -> tuple[np.ndarray, np.ndarray]:
        """(frame times s, F0 Hz with 0 where unvoiced) every 30 ms (Praat autocorrelation),
        over the speech span (+-0.1 s) only, at F0_ANALYSIS_SR (or 4x the pitch ceiling, where
        a kind of sound has a higher one than speech).

        F0 is the most expensive analysis and runs on every clip (it is a confound for all
        dimensions): a 30 ms hop, skipping the silences, and a copy at ~4 kHz (Praat's cost
        grows with the rate; F0 up to the 500 Hz ceiling and its first harmonics lie below
        2 kHz, so pitch verdicts and measured changes agree with the full rate's; figures on
        docs/results.md). Medians over head/tail windows need no more. Times
        are absolute, so signals compare by time, and the analysed stretch starts and ends
        on a 30 ms grid from the file's start, so its frames do too: a span that moves by a
        millisecond (as a dataset row rounds it) reads the same frames, where a frame grid
        that moved with it changed which frames were voiced, and so what `vocalgrad verify`
        measured against what the build had."""
        hop = int(round(F0_STEP_S * self.sr))
        lo = max(0.0, self.span.onset_s - 0.1)
        hi = min(self.duration_s, self.span.offset_s + 0.1)
        # in samples to a millionth, so that a span one rounding error away (0.43 - 0.1 is
        # 0.32999999999999996 s) reads the same stretch: Praat's path through it moves with
        # where the stretch starts
        lo_n, hi_n = round(lo * self.sr, 6), round(hi * self.sr, 6)
        first, last = (
            (int(lo_n) // hop * hop, -(-int(np.ceil(hi_n)) // hop) * hop)
            if hi - lo > 0.2
            else (0, len(self.audio))
        )
        if last > len(self.audio):  # a whole number of steps, within the file
            last = first + (len(self.audio) - first) // hop * hop
        step = max(1, self.sr // max(F0_ANALYSIS_SR, int(4 * self.pitch_ceiling_hz)))
        part = self.audio[first:last].astype(np.float64)
        if step > 1:
            part = resample_poly(part, 1, step, window=_decimator(step))
        sound = parselmouth.Sound(part, self.sr / step, start_time=first / self.sr)
        pitch = sound.to_pitch_ac(
            time_step=F0_STEP_S,
            pitch_floor=F0_FLOOR_HZ,
            pitch_ceiling=self.pitch_ceiling_hz,
            max_number_of_candidates=F0_CANDIDATES,
        )
        return pitch.xs(), pitch.selected_array["frequency"]

    @cached_property
    def level_db(self) -> np.ndarray:
        """Level of each 10 ms frame in dBFS (RMS)."""
        with np.errstate(divide="ignore"):
            return np.maximum(20 * np.log10(frame_rms(self.audio, self.sr)), LEVEL_FLOOR_DB)

    @cached_property
    def median_f0(self) -> float:
        """Median F0 of voiced frames (Hz), NaN when nothing is voiced."""
        _, f0 = self.f0
        voiced = f0[f0 > 0]
        return float(np.median(voiced)) if voiced.size else float("nan")

    @cached_property
    def level_slope_db(self) -> float:
        """Tail minus head level (dB) over speech-active frames: a source's value is compared
        with every clip rendered from it, so it is computed once."""
        level = np.where(self.active, self.level_db, np.nan)
        head, tail = self.head_tail_frames(len(level))
        h, t = head_tail(level, head, tail)
        return t - h

    @cached_property
    def active(self) -> np.ndarray:
        """10 ms frames that carry speech energy (within 40 dB of the loudest frame)."""
        level = self.level_db
        return level > (level.max() - ACTIVE_RANGE_DB) if level.size else level.astype(bool)

    @cached_property
    def speech_rms(self) -> float:
        """RMS over speech-active frames: the reference level for added noise and reverb."""
        rms = frame_rms(self.audio, self.sr)
        return float(np.sqrt(np.mean(rms[self.active] ** 2))) if self.active.any() else 0.0

    @cached_property
    def floor_power(self) -> float:
        """Mean-square level of the signal's floor (10 ms frames, quietest 1%)."""
        power = frame_rms(self.audio, self.sr) ** 2
        return float(np.percentile(power, QUIET_PERCENTILE)) if power.size else 0.0

    @cached_property
    def k_power(self) -> np.ndarray:
        """K-weighted (loudness-weighted) energy per 10 ms frame, a two-channel clip's as if
        both ears heard its downmix (see `loudness_lufs`)."""
        return self.channels.shape[1] * frame_rms(self.k_weighted, self.sr) ** 2

    @cached_property
    def mel_power(self) -> np.ndarray:
        """40-band mel power spectrogram at 10 ms hop: spectral measures and alignment."""
        return mel_spectrogram(self.audio, self.sr)

    @cached_property
    def band_floor(self) -> np.ndarray:
        """Per-band power of the signal's floor (quietest 1% of frames in each band)."""
        return np.percentile(self.mel_power, QUIET_PERCENTILE, axis=1)

    @cached_property
    def log_mel(self) -> np.ndarray:
        """40-band log-mel spectrogram at 10 ms hop, for time alignment."""
        return np.log(self.mel_power + 1e-8)

    def with_span(self, span: SpeechSpan) -> Analysis:
        """The same signal with another speech span (a window of the speech, say), sharing
        every analysis computed so far that does not depend on the span, and `cache`.

        Why: a measure over a part of the speech (where in the clip a change lies) reads the
        dimension's own head and tail windows of that part, without analysing the signal
        again. The render-side memos in `cache` are this signal's, made for its own span.

        Parameters
        ----------
        span
            The speech span to measure over, seconds from the first sample.

        Returns
        -------
        Analysis
            A view of the same samples; its span-dependent analyses (F0 over the span, the
            median F0, the level slope) are computed afresh over `span`.
        """
        out = Analysis.__new__(Analysis)
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _SPAN_DEPENDENT})
        out.__dict__["span"] = span
        return out

    def head_tail_frames(
        self, n_frames: int, frame_s: float = FRAME_S
    ) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks for frames in the first and last 20% of this signal's speech span."""
        return self.head_tail_at((np.arange(n_frames) + 0.5) * frame_s)

    def head_tail_at(self, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Boolean masks for times (s) in the first and last 20% of the speech span."""
        onset, offset = self.span.onset_s, self.span.offset_s
        width = HEAD_TAIL_FRACTION * (offset - onset)
        head = (centres >= onset) & (centres < onset + width)
        tail = (centres > offset - width) & (centres <= offset)
        return head, tail


def on_contour(f0_hz: np.ndarray, step_st: float, min_frames: int) -> np.ndarray:
    """Which frames of an F0 track lie on a pitch contour: a voice's pitch moves by small
    steps, a tracker's reading of noise or creak jumps.

    Parameters
    ----------
    f0_hz : ndarray
        F0 per frame (Hz), 0 where unvoiced.
    step_st : float
        The largest step from one frame to the next on a contour, semitones.
    min_frames : int
        The fewest frames a contour has.

    Returns
    -------
    ndarray of bool
        True for a voiced frame in a run of at least `min_frames` voiced frames, each within
        `step_st` semitones of the one before.
    """
    f0_hz = np.asarray(f0_hz, dtype=np.float64)
    voiced = f0_hz > 0
    semitones = 12 * np.log2(np.where(voiced, f0_hz, 1.0))
    linked = voiced[1:] & voiced[:-1] & (np.abs(np.diff(semitones)) <= step_st)
    # a run starts at every voiced frame not linked to the one before
    starts = voiced & ~np.concatenate([[False], linked])
    run_id = np.cumsum(starts)
    lengths = np.bincount(run_id[voiced], minlength=run_id.max() + 1)
    return voiced & (lengths[run_id] >= min_frames)


def pitch_ceiling(kind: str) -> float:
    """The highest F0 (Hz) the pitch tracker may look for in a kind of sound: the speech
    tracker's F0_CEILING_HZ unless the kind declares its own (tones reach 2.5 kHz)."""
    return get_kind(kind).pitch_ceiling_hz or F0_CEILING_HZ


PITCH_HEADROOM = 2 ** (10 / 12)  # a source's F0 may be shifted up to 9 semitones (a roved path)


def source_pitch_ceiling(audio: np.ndarray, sr: int, kind: str) -> float:
    """The F0 ceiling (Hz) one source of a kind is tracked with: for a kind with its own range
    (tones), 10 semitones above the source's strongest frequency, within the speech ceiling and
    the kind's; for speech, the speech ceiling. A ceiling far above the source's F0 lets the
    tracker read harmonics as F0: a 283 Hz harmonic complex tracked up to 3.2 kHz lost the
    frames of its lowered half to octave errors, and its jump clips read +2 st at both ends.

    Parameters
    ----------
    audio
        The source, mono float.
    sr
        Its sample rate, Hz.
    kind
        Its kind of sound.

    Returns
    -------
    float
        The ceiling, Hz.
    """
    highest = get_kind(kind).pitch_ceiling_hz
    if highest is None:
        return F0_CEILING_HZ
    return float(np.clip(PITCH_HEADROOM * strongest_hz(audio, sr), F0_CEILING_HZ, highest))


def strongest_hz(audio: np.ndarray, sr: int) -> float:
    """The frequency (Hz) of the strongest bin of the whole signal's spectrum: a tone's
    frequency, a harmonic complex's fundamental (its partials fall off as 1/k)."""
    spectrum = np.abs(np.fft.rfft(np.asarray(audio, dtype=np.float64)))
    return float(np.argmax(spectrum)) * sr / len(audio)


def source_pitch_floor(audio: np.ndarray, sr: int, kind: str) -> float:
    """The lowest F0 (Hz) to look for in one source of a kind with its own pitch range: 10
    semitones below its strongest frequency (`source_pitch_ceiling`'s span mirrored), never
    below F0_FLOOR_HZ; F0_FLOOR_HZ for speech and the kinds without a range of their own. A
    floor far below a high tone lets a tracker take two or three periods for one (a 2 kHz
    tone read at 640 Hz).

    Parameters
    ----------
    audio
        The source, mono float.
    sr
        Its sample rate, Hz.
    kind
        Its kind of sound.

    Returns
    -------
    float
        The floor, Hz.
    """
    if get_kind(kind).pitch_ceiling_hz is None:
        return F0_FLOOR_HZ
    return float(max(F0_FLOOR_HZ, strongest_hz(audio, sr) / PITCH_HEADROOM))


def mel_spectrogram(audio: np.ndarray, sr: int) -> np.ndarray:
    """40-band mel power spectrogram, 10 ms hop, frames not centred (frame i covers the
    10 ms frame i of `frame_rms` and what follows it). librosa's, with the filter bank built
    once per rate rather than on every call."""
    n_fft = 512 if sr <= 24000 else 2048
    power = (
        np.abs(
            librosa.stft(
                np.asarray(audio, dtype=np.float32),
                n_fft=n_fft,
                hop_length=int(round(FRAME_S * sr)),
                center=False,
            )
        )
        ** 2
    )
    return _mel_basis(sr, n_fft) @ power


@lru_cache(maxsize=8)
def _decimator(step: int) -> np.ndarray:
    """`resample_poly`'s own anti-alias filter for a 1/step rate, designed once, not per clip."""
    half = 10 * step
    return firwin(2 * half + 1, 1.0 / step, window=("kaiser", 5.0))


@lru_cache(maxsize=8)
def _mel_basis(sr: int, n_fft: int) -> np.ndarray:
    return librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=N_MELS)


def mel_centres(sr: int) -> np.ndarray:
    """Centre frequencies (Hz) of the bands of `mel_spectrogram`."""
    return librosa.mel_frequencies(n_mels=N_MELS + 2, fmax=sr / 2)[1:-1]


def praat_tier(kind: str, times: np.ndarray, values: np.ndarray, xmax: float) -> parselmouth.Data:
    """Build a Praat PitchTier / DurationTier from arrays.

    Praat has no array constructor for tiers and adding points one call at a time costs
    a call each; reading one short-text file is far faster for a few hundred points.
    """
    body = "\n".join(f"{t:.6f}\n{v:.6f}" for t, v in zip(times, values, strict=True))
    text = (
        f'File type = "ooTextFile"\nObject class = "{kind}"\n\n'
        f"0\n{xmax:.6f}\n{len(times)}\n{body}\n"
    )
    fd, path = tempfile.mkstemp(suffix=f".{kind}", dir=_TMP)
    try:
        os.write(fd, text.encode())
        os.close(fd)
        return parselmouth.read(path)
    finally:
        os.unlink(path)


def head_tail(
    series: np.ndarray, head: np.ndarray, tail: np.ndarray, reduce=np.median
) -> tuple[float, float]:
    """Summarise a per-frame series over the head and tail windows (NaN where empty)."""
    n = min(len(series), len(head))
    series, head, tail = series[:n], head[:n], tail[:n]
    ok = np.isfinite(series)
    h = series[head & ok]
    t = series[tail & ok]
    return (
        float(reduce(h)) if h.size else float("nan"),
        float(reduce(t)) if t.size else float("nan"),
    )

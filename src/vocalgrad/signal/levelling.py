"""Flatten a recording's slow level course over its speech: the source every clip starts from.

Speech is louder early (declination, a loud first stress, a quiet last syllable). Any process
laid over that course keeps the asymmetry: a gain ramp down leaves a loud start loud and
sinks a quiet end under the floor sooner, a ramp up does the opposite, so every level
statistic the renderer does not set (whole-file loudness, its percentiles, how long the clip
is audible) differs between an increase clip and its decrease twin, and declination biases a
listener toward "decrease". Under the flattening gain a ramp up and its twin down are each
other's mirror image in level.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
from scipy.signal import istft, stft

from vocalgrad.audio import FRAME_S, SpeechSpan
from vocalgrad.signal.analysis import Analysis

SLOW_LEVEL_S = 0.3  # a level course slower than this is words' and phrases', not a phoneme's
MAX_GAIN_DB = 12.0  # the flattening gain stays within +-12 dB
SMOOTH_S = 0.1  # the gain changes no faster than this


def flattening_gain(ref: Analysis) -> np.ndarray:
    """Per-sample gain (linear) that makes the K-weighted power over SLOW_LEVEL_S windows the
    same across the speech span; held across pauses, 1 outside the span.

    Parameters
    ----------
    ref : Analysis
        The source, with its speech span and speech-active frames.

    Returns
    -------
    np.ndarray, shape (n_samples,), float32
        The gain to multiply the samples by.
    """
    power = ref.k_power
    n = len(power)
    centres = (np.arange(n) + 0.5) * FRAME_S
    inside = (centres >= ref.span.onset_s) & (centres <= ref.span.offset_s)
    speech = (inside & ref.active[:n]).astype(np.float64)
    # the mean power of the speech frames within SLOW_LEVEL_S: pauses and the silences
    # beyond the span would pull it down next to them, and lift the speech there
    window = np.ones(max(1, int(round(SLOW_LEVEL_S / FRAME_S))))
    frames = np.convolve(speech, window, "same")
    slow = np.convolve(power * speech, window, "same") / np.maximum(frames, 1.0)
    active = speech.astype(bool) & (slow > 0)
    if active.sum() < 2:
        return np.ones(len(ref.audio), np.float32)
    target_db = 10 * np.log10(np.mean(slow[active]))
    index = np.arange(n)
    gain_db = np.zeros(n)
    gain_db[inside] = np.interp(
        index[inside], index[active], target_db - 10 * np.log10(slow[active])
    )
    gain_db = np.clip(gain_db, -MAX_GAIN_DB, MAX_GAIN_DB)
    smooth = max(1, int(round(SMOOTH_S / FRAME_S)))
    padded = np.pad(gain_db, smooth, mode="edge")
    gain_db = np.convolve(padded, np.ones(smooth) / smooth, "same")[smooth:-smooth]
    times = np.arange(len(ref.audio)) / ref.sr
    return np.interp(times, centres, 10 ** (gain_db / 20)).astype(np.float32)


def flatten_level_course(ref: Analysis) -> np.ndarray:
    """The source's samples under `flattening_gain`: a function of the source alone."""
    return (ref.audio * flattening_gain(ref)).astype(np.float32)


EDGE_FADE_S = 0.02  # the raised-cosine fade at both ends of the speech
MIN_SILENCE_S = 0.15  # each side's silence is at least this long (edge fades, the renderer's guard)
MAX_SILENCE_S = 0.5  # and at most this long


def symmetric_edges(audio: np.ndarray, sr: int, span: SpeechSpan) -> tuple[np.ndarray, SpeechSpan]:
    """The speech between span.onset_s and span.offset_s with equal silences on both sides,
    faded in and out over EDGE_FADE_S just outside the span, zero beyond.

    Why: speech starts abruptly and decays slowly, and recordings lead and trail with
    silences of different lengths, so any change laid over the speech shows at one edge of
    the file more than at the other, and edge statistics that playing the clip backwards
    leaves as they are (how long it is audible, the summed level of its first and last
    300 ms) tell the direction.

    Returns
    -------
    audio : np.ndarray, float32
        The new samples; each side's silence is the longer of the two, within
        [MIN_SILENCE_S, MAX_SILENCE_S].
    span : SpeechSpan
        The speech span in the new samples.
    """
    lead, trail = span.onset_s, len(audio) / sr - span.offset_s
    pad = int(round(min(max(lead, trail, MIN_SILENCE_S), MAX_SILENCE_S) * sr))
    onset, offset = int(round(span.onset_s * sr)), int(round(span.offset_s * sr))
    out = np.zeros(offset - onset + 2 * pad, np.float32)
    first, last = max(0, onset - pad), min(len(audio), offset + pad)
    out[first - (onset - pad) : last - (onset - pad)] = audio[first:last]
    t = (np.arange(len(out)) - pad) / sr  # 0 at the onset
    duration = (offset - onset) / sr
    rise = np.clip((t + EDGE_FADE_S) / EDGE_FADE_S, 0.0, 1.0)
    fall = np.clip((duration + EDGE_FADE_S - t) / EDGE_FADE_S, 0.0, 1.0)
    window = (0.5 - 0.5 * np.cos(np.pi * rise)) * (0.5 - 0.5 * np.cos(np.pi * fall))
    new_span = dataclasses.replace(span, onset_s=pad / sr, offset_s=(pad + offset - onset) / sr)
    return (out * window).astype(np.float32), new_span


EDGE_COURSE_S = 0.4  # how far into the speech the two ends' level courses are matched
EDGE_COURSE_HOP_S = 0.01  # the level course's frames
EDGE_COURSE_SMOOTH_S = 0.1  # the matching gain changes no faster than this
EDGE_COURSE_PASSES = 3  # each pass matches what the smooth gain of the last left apart


def matched_edge_courses(
    audio: np.ndarray, sr: int, span: SpeechSpan, smooth_s: float = EDGE_COURSE_SMOOTH_S
) -> np.ndarray:
    """Attenuate each end of the speech so that its level course, read inward from its edge,
    is the quieter of the two ends' at every distance from the edge (over EDGE_COURSE_S).

    Why: words start on a loud attack and end on a weak consonant or a decay, which the slow
    flattening (`flattening_gain`) leaves in place: the last 200 ms of speech are 2-3 dB
    weaker than the first. A level ramp that ends on the weak end sinks it under a listener's
    threshold sooner than its twin sinks the strong start, so how long the clip is audible,
    its loudness range and its quiet percentiles told volume and speaking speed apart
    without hearing the change. Attenuation only: raising the weak end would lift its peaks.

    Parameters
    ----------
    audio : np.ndarray
        The source's samples (float).
    sr : int
        Sample rate in Hz.
    span : SpeechSpan
        Where the speech starts and stops in `audio`.
    smooth_s : float
        How fast the matching gain may change (the courses are smoothed over this).

    Returns
    -------
    np.ndarray, float32
        The samples with both ends' level courses, and then their boundaries
        (`matched_boundaries`), matched; unchanged where the speech is shorter than six
        frames.
    """
    hop = int(round(EDGE_COURSE_HOP_S * sr))
    onset, offset = int(round(span.onset_s * sr)), int(round(span.offset_s * sr))
    k = min(int(round(EDGE_COURSE_S / EDGE_COURSE_HOP_S)), (offset - onset) // (2 * hop))
    if k < 3:
        return audio.astype(np.float32)
    x = audio.astype(np.float64)
    smooth = max(1, int(round(smooth_s / EDGE_COURSE_HOP_S)))
    kernel = np.ones(smooth) / smooth

    def course(frames: np.ndarray) -> np.ndarray:
        """Frame levels (dB) read inward from the edge, smoothed."""
        return np.convolve(np.pad(_levels_db(frames), smooth, mode="edge"), kernel, "same")[
            smooth:-smooth
        ]

    # a smooth gain leaves the smoothed courses nearer with each pass
    _attenuate_to_mirror(x, onset, offset, hop, k, course, EDGE_COURSE_PASSES)
    return matched_boundaries(x, sr, onset, offset).astype(np.float32)


def _levels_db(frames: np.ndarray) -> np.ndarray:
    """Level (dB) of each row of (frames, samples)."""
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def _exact_levels_db(frames: np.ndarray) -> np.ndarray:
    """`_levels_db` without its floor: near-silent frames outside the span are compared as
    they are (a digitally silent frame reads as -3000 dB, so its mirror is silenced too)."""
    return 10 * np.log10(np.maximum(np.mean(frames**2, axis=1), 1e-300))


def _attenuate_to_mirror(
    x: np.ndarray,
    first: int,
    last: int,
    hop: int,
    k: int,
    levels_db: Callable[[np.ndarray], np.ndarray],
    passes: int,
) -> None:
    """In place: the k frames of `hop` samples read forwards from `first` and the k read
    backwards from `last` each take the quieter of their own level and their mirror's
    (`levels_db` of the (k, hop) frames), by a gain interpolated between frame centres,
    applied `passes` times."""
    head_part, tail_part = slice(first, first + k * hop), slice(last - k * hop, last)
    centres = (np.arange(k) + 0.5) * hop
    n = np.arange(k * hop)
    for _ in range(passes):
        head = levels_db(x[head_part].reshape(k, hop))
        tail = levels_db(x[tail_part][::-1].reshape(k, hop))
        quieter = np.minimum(head, tail)
        x[head_part] *= np.interp(n, centres, 10 ** ((quieter - head) / 20))
        x[tail_part] *= np.interp(n, centres, 10 ** ((quieter - tail) / 20))[::-1]


BOUNDARY_OUT_S = EDGE_FADE_S  # the boundary matching starts this far outside the span
BOUNDARY_IN_S = 0.03  # and ends this far inside it
BOUNDARY_HOP_S = 0.0025  # unsmoothed frames: a detector's threshold crossing moves by less
BOUNDARY_PASSES = 8  # frames far apart in level need more passes of an interpolated gain


def matched_boundaries(x: np.ndarray, sr: int, onset: int, offset: int) -> np.ndarray:
    """Match the two speech boundaries frame by frame (BOUNDARY_HOP_S, no smoothing), from
    BOUNDARY_OUT_S outside the span to BOUNDARY_IN_S inside: each frame is attenuated to the
    quieter of its own level and its mirror's at the other end.

    Why: a recording's decay runs on past the detected offset while its onset rises from
    silence, so the faded margin outside the span holds more at the tail than at the
    head; the smoothed course matching
    (`matched_edge_courses`) works inside the span and over 100 ms, and the part whose noise
    was the quieter stayed audible one or two 10 ms frames longer at the file's end than at
    its start (comparison format: the edges' silence 45 dB under the loudest frame told
    background noise's direction). It takes a small share of the speech's energy (figures on
    docs/results.md)."""
    hop = max(1, int(round(BOUNDARY_HOP_S * sr)))
    k = int(round((BOUNDARY_OUT_S + BOUNDARY_IN_S) / BOUNDARY_HOP_S))
    start = onset - int(round(BOUNDARY_OUT_S * sr))
    stop = offset + int(round(BOUNDARY_OUT_S * sr))
    if start < 0 or stop > len(x) or stop - start < 2 * k * hop:
        return x
    x = x.copy()
    _attenuate_to_mirror(x, start, stop, hop, k, _exact_levels_db, BOUNDARY_PASSES)
    return x


EDGE_BANDS_HZ = (500.0, 1500.0, 4000.0)  # crossovers of the bands whose edge courses are matched
_CROSSOVER_OCTAVES = 2 / 3  # each crossover is a raised cosine this wide in log frequency
EDGE_SPECTRUM_FRAME_S = 0.032  # STFT frame (a quarter of it is the hop)
# how far into the speech the two ends' spectra are matched: the brighter end lies in the
# last 100-200 ms (docs/explanations/design-notes.md); matched over 400 ms, the builds'
# other cues moved more
EDGE_SPECTRUM_S = 0.2


def band_weights(freqs_hz: np.ndarray, crossovers_hz: tuple[float, ...]) -> np.ndarray:
    """(bands, freqs) weights of complementary bands split at `crossovers_hz`: each column
    sums to 1, so gains of 1 in every band leave the signal as it is."""
    log_f = np.log2(np.maximum(freqs_hz, 1.0))
    above = [
        0.5 - 0.5 * np.cos(np.pi * np.clip((log_f - np.log2(c)) / _CROSSOVER_OCTAVES + 0.5, 0, 1))
        for c in crossovers_hz
    ]
    if not above:
        return np.ones((1, len(freqs_hz)))
    inner = [above[i] - above[i + 1] for i in range(len(above) - 1)]
    return np.array([1 - above[0], *inner, above[-1]])


def matched_edge_spectra(audio: np.ndarray, sr: int, span: SpeechSpan) -> np.ndarray:
    """Give both ends of the speech one spectral course (over EDGE_SPECTRUM_S, read inward
    from each edge): in each band (EDGE_BANDS_HZ) the two ends' mean spectral shape at the
    quieter end's broadband level (`_shared_spectrum`).

    Why: speech starts on voiced, low attacks and ends on fricatives and breath, so its last
    200 ms are usually brighter than its first (a higher spectral centroid). A level ramp
    weighs one end of the speech far above the other, so the whole
    file's power spectrum, which playing the file backwards leaves as it is, was brighter in
    the increase clip than in its decrease twin and told the direction. A brightness or
    clarity ramp weighs one end above the other too (their order-free leaks went once every
    source had it; docs/explanations/design-notes.md), so `prepare_reference` applies
    it to every source.

    Parameters
    ----------
    audio : np.ndarray
        The source's samples (float).
    sr : int
        Sample rate in Hz.
    span : SpeechSpan
        Where the speech starts and stops in `audio`.

    Returns
    -------
    np.ndarray, float32
        The samples with both ends' band courses matched (a time-varying filter that is
        the identity outside the two ends); unchanged where the speech is too short.
    """
    n_fft = 1 << int(np.ceil(np.log2(EDGE_SPECTRUM_FRAME_S * sr)))
    hop = n_fft // 4
    freqs, times, spectrum = stft(audio.astype(np.float64), sr, nperseg=n_fft, noverlap=n_fft - hop)
    weights = band_weights(freqs, tuple(c for c in EDGE_BANDS_HZ if c < 0.45 * sr))
    first = int(np.searchsorted(times, span.onset_s))
    last = int(np.searchsorted(times, span.offset_s, side="right")) - 1
    k = min(int(round(EDGE_SPECTRUM_S * sr / hop)), (last - first + 1) // 2)
    if k < 3:
        return audio.astype(np.float32)
    smooth = max(1, int(round(EDGE_COURSE_SMOOTH_S * sr / hop)))
    kernel = np.ones(smooth) / smooth

    def course(power: np.ndarray) -> np.ndarray:
        """Band levels (dB) of k frames read inward from the edge, smoothed along time."""
        level = 10 * np.log10(power + 1e-20)
        padded = np.pad(level, ((0, 0), (smooth, smooth)), mode="edge")
        return np.stack([np.convolve(row, kernel, "same") for row in padded])[:, smooth:-smooth]

    gains = np.ones((len(weights), spectrum.shape[1]))
    head, tail = slice(first, first + k), slice(last - k + 1, last + 1)
    for _ in range(EDGE_COURSE_PASSES):  # a smooth gain leaves the smoothed courses nearer
        power = weights @ (np.abs(spectrum * (weights.T @ gains)) ** 2)
        head_db, tail_db = course(power[:, head]), course(power[:, tail][:, ::-1])
        target = _shared_spectrum(head_db, tail_db)
        gains[:, head] *= 10 ** ((target - head_db) / 20)
        gains[:, tail] *= (10 ** ((target - tail_db) / 20))[:, ::-1]
    _, out = istft(spectrum * (weights.T @ gains), sr, nperseg=n_fft, noverlap=n_fft - hop)
    return out[: len(audio)].astype(np.float32)


def _shared_spectrum(head_db: np.ndarray, tail_db: np.ndarray) -> np.ndarray:
    """(bands, frames) band levels both ends are given: at each distance from the edge, the
    two ends' mean spectral shape at the quieter end's total level, so the broadband course
    is the one `matched_edge_courses` sets and no end is attenuated beyond it."""
    head, tail = 10 ** (head_db / 10), 10 ** (tail_db / 10)
    head_total, tail_total = head.sum(axis=0), tail.sum(axis=0)
    shape = (head / head_total + tail / tail_total) / 2
    return 10 * np.log10(shape * np.minimum(head_total, tail_total) + 1e-20)


def prepared_edges(ref: Analysis) -> tuple[np.ndarray, SpeechSpan]:
    """The source's slow level course flattened (`flattening_gain`), equal silences on both
    sides (`symmetric_edges`), and its two ends given one spectral course
    (`matched_edge_spectra`) and matched level courses and boundaries
    (`matched_edge_courses`): what `vocalgrad.stimuli.render.prepare_reference` does to a
    speech source before normalising it.

    Parameters
    ----------
    ref : Analysis
        The loudness-normalised source with its speech span.

    Returns
    -------
    audio : np.ndarray, float32
        The prepared samples.
    span : SpeechSpan
        The speech span in them.
    """
    levelled, span = symmetric_edges(flatten_level_course(ref), ref.sr, ref.span)
    levelled = matched_edge_spectra(levelled, ref.sr, span)
    return matched_edge_courses(levelled, ref.sr, span), span


def mirror_prepared_edges(ref: Analysis) -> tuple[np.ndarray, SpeechSpan]:
    """`prepared_edges` made exactly time-symmetric: the mean of the steps applied to the
    source and, played backwards, to the source played backwards.

    Why: the steps are meant to leave the two ends alike, but each reads the file from its
    start (STFT frames laid from sample 0, the causal K-weighting filter in the level
    course), so they treat the two ends a little differently. On speech that is small beside
    the speech's own asymmetry; on a sound that is already the same at both ends (a
    synthetic tone's hard onset and offset) it is all the asymmetry there is, and the
    published beeps' volume clips kept it: the loud end of an increase clip held its last
    millisecond above the loud start of its decrease twin, so the whole file's peak and
    crest factor, which playing a clip backwards leaves as they are, told the direction
    (docs/results.md). The mean of the two readings treats both ends alike by construction:
    the result for the source played backwards is this result played backwards.

    Parameters
    ----------
    ref : Analysis
        The loudness-normalised source with its speech span.

    Returns
    -------
    audio : np.ndarray, float32
        The prepared samples.
    span : SpeechSpan
        The speech span in them (the one `prepared_edges` gives).
    """
    forward, span = prepared_edges(ref)
    duration = ref.duration_s
    mirrored = dataclasses.replace(
        ref.span, onset_s=duration - ref.span.offset_s, offset_s=duration - ref.span.onset_s
    )
    backward, _ = prepared_edges(ref.like(np.ascontiguousarray(ref.audio[::-1]), span=mirrored))
    both = forward.astype(np.float64) + backward[::-1].astype(np.float64)
    return (both / 2).astype(np.float32), span

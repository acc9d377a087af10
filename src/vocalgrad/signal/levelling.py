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

import numpy as np

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


def matched_edge_courses(audio: np.ndarray, sr: int, span: SpeechSpan) -> np.ndarray:
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

    Returns
    -------
    np.ndarray, float32
        The samples with both ends' level courses matched; unchanged where the speech is
        shorter than six frames.
    """
    hop = int(round(EDGE_COURSE_HOP_S * sr))
    onset, offset = int(round(span.onset_s * sr)), int(round(span.offset_s * sr))
    k = min(int(round(EDGE_COURSE_S / EDGE_COURSE_HOP_S)), (offset - onset) // (2 * hop))
    if k < 3:
        return audio.astype(np.float32)
    x = audio.astype(np.float64)
    smooth = max(1, int(round(EDGE_COURSE_SMOOTH_S / EDGE_COURSE_HOP_S)))
    kernel = np.ones(smooth) / smooth

    def course(segment: np.ndarray) -> np.ndarray:
        """Frame levels (dB) read inward from the edge, smoothed."""
        level = 10 * np.log10(np.mean(segment.reshape(k, hop) ** 2, axis=1) + 1e-12)
        return np.convolve(np.pad(level, smooth, mode="edge"), kernel, "same")[smooth:-smooth]

    centres = (np.arange(k) + 0.5) * hop
    n = np.arange(k * hop)
    for _ in range(EDGE_COURSE_PASSES):  # a smooth gain leaves the smoothed courses nearer
        head = course(x[onset : onset + k * hop])
        tail = course(x[offset - k * hop : offset][::-1])
        quieter = np.minimum(head, tail)
        x[onset : onset + k * hop] *= np.interp(n, centres, 10 ** ((quieter - head) / 20))
        x[offset - k * hop : offset] *= np.interp(n, centres, 10 ** ((quieter - tail) / 20))[::-1]
    return x.astype(np.float32)

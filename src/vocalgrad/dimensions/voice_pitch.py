"""Voice pitch: a time-varying F0 shift by PSOLA (formants kept, timing untouched)."""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions._shared import psola
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.errors import RenderRefused
from vocalgrad.signal.analysis import (
    F0_STEP_S,
    HEAD_TAIL_FRACTION,
    Analysis,
    head_tail,
    on_contour,
    praat_tier,
)
from vocalgrad.signal.evidence import f0_change
from vocalgrad.signal.kinds import SPEECH

SPEC = DimensionSpec(
    name="voice_pitch",
    parameter="pitch shift",
    unit="semitones",
    increase_means="the voice gets higher",
    tiers={"low": 1.0, "mid": 2.0, "high": 3.0},
    scale="linear",
    measured="F0 relative to the source (voiced frames)",
    measured_unit="semitones",
    audibility_floor=0.5,
    floor_basis=(
        "F0 DL for steady vowels 0.3-0.5% (Flanagan & Saslow 1958) and 1.5-3 semitones for "
        "intonation movements ('t Hart 1981): 0.5 semitone between the two"
    ),
    psychometric_range=(0.1, 4.0),
    centre="energy",
    source_edges=True,
    # the median F0 over voiced frames weighs whichever stretch has more of them, and the peak
    # reads the pitch where the speech is loudest (a lower voice has a higher crest factor);
    # onset strength is spectral flux, and moving harmonics are flux: where the onsets lie
    # follows where, and how far, the pitch moves (CHANGELOG.md has the figures)
    target_cues=("global_f0_hz", "global_peak_dbfs", "position_onset", "position_onsets"),
    kinds=("speech", "tone", "music"),
)


# larger than any published shift (4 st), smaller than an octave: frames further from the
# source's F0 are a tracker's octave errors. An endpoint rove may place a path up to `domain`'s
# 9 st out, where this also drops true frames (a few roved clips read as inaudible); a
# cut-off centred on the clip's own shift kept errors that the fixed one drops on
# telephone-band speech (docs/results.md, "Endpoint rove"), so it stays fixed.
OCTAVE_ERROR_ST = 8.0


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return -magnitude, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a pitch shift of 0 semitones changes nothing"


def domain(sr: int) -> tuple[float, float]:
    """Within 9 semitones of the speaker's own pitch: further, low male and high female voices
    leave the F0 tracker's 60-500 Hz range and more roved clips read as inaudible
    (CHANGELOG.md has the figures)."""
    return -9.0, 9.0


# A voice's tracked F0 moves in runs: from one 30 ms frame to the next by far less than 2
# semitones. Frames that form no such run of three are a tracker's guesses on noise (a word
# whispered or in creak). On the 144 speech sources of three 24 + 24 builds (builtin,
# klettres, ktuberling) the share of voiced frames on a contour is 0.39-1.0, except
# ktuberling's whispered en-05 at 0.14, whose measured pitch changes were the tracker's
# (docs/explanations/validity.md, "A whisper has no pitch to shift").
CONTOUR_STEP_ST = 2.0
CONTOUR_MIN_FRAMES = 3
CONTOUR_MIN_SHARE = 0.25


def source_inaudible_reason(magnitude: float, ref: Analysis) -> str | None:
    """Why no pitch change can be heard (or measured) on this source, or None.

    A shift moves the pitch a voice has. Where fewer than CONTOUR_MIN_SHARE of the frames the
    tracker calls voiced lie on a contour (`on_contour`), the source has no pitch to move
    (a whisper): the shift is inaudible, and `measure` would read the tracker's scatter
    as the change. The condition is refused for this source before rendering."""
    _, f0 = ref.f0
    voiced = int((f0 > 0).sum())
    contour = int(on_contour(f0, CONTOUR_STEP_ST, CONTOUR_MIN_FRAMES).sum())
    if voiced and contour >= CONTOUR_MIN_SHARE * voiced:
        return None
    return (
        f"the source has no pitch contour to shift: {contour} of its {voiced} voiced frames "
        f"lie on one (under {CONTOUR_MIN_SHARE:.0%}; a whisper or creak)"
    )


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Replace the source's pitch tier by F0(t) * 2^(shift(t)/12) and resynthesise.

    A sound that is not speech is resynthesised from itself continued past both ends of its
    extent (`continued`), and keeps its own samples outside that extent: overlap-add at a
    hard onset or offset (a synthetic tone's) overshot the first periods and spilled a few
    ms into the silence, by amounts that depend on the pitch at that end and differ between
    the start and the end, so the file's peak and how long it was audible told an increase
    from its decrease twin (docs/results.md). Speech keeps the resynthesis up to the
    renderer's edge guard (`SPEC.source_edges`), as it always has."""
    times, f0 = ref.f0
    voiced = f0 > 0
    if not voiced.any():
        raise RenderRefused("source has no voiced frames: pitch cannot be shifted")
    t = times[voiced]
    shifted = f0[voiced] * 2.0 ** (track(t) / 12.0)
    tier = praat_tier("PitchTier", t, shifted, ref.duration_s)
    out = psola(ref if ref.kind == SPEECH else continued(ref), rng, pitch_tier=tier)
    out = (
        out[: len(ref.audio)]
        if len(out) >= len(ref.audio)
        else np.pad(out, (0, len(ref.audio) - len(out)))
    )
    if ref.kind != SPEECH:
        first, last = ref.extent
        out = np.concatenate([ref.audio[:first], out[first:last], ref.audio[last:]])
    return out


CONTINUATION_S = 0.05  # how far `continued` carries a sound past each end of its extent


def continued(ref: Analysis) -> Analysis:
    """The source with its sound carried on past each end of its extent (`Analysis.extent`)
    for up to CONTINUATION_S, by reflecting the sound's first and last stretch through its
    first and last sample (a sine that starts and stops in phase 0 continues as the same
    sine), computed once per source. What the resynthesis reads, so that no pitch pulse
    meets an edge; what lies outside the extent is cut off afterwards.

    Parameters
    ----------
    ref : Analysis
        The source (mono), with its speech span.

    Returns
    -------
    Analysis
        The continued signal, analysed as the source is (the same span and pitch range).
    """
    if "continued" not in ref.cache:
        audio = ref.audio.astype(np.float64)
        first, last = ref.extent
        n = min(int(round(CONTINUATION_S * ref.sr)), first, len(audio) - last, (last - first) // 2)
        if n > 0:
            audio[first - n : first] = 2 * audio[first] - audio[first + 1 : first + n + 1][::-1]
            audio[last : last + n] = 2 * audio[last - 1] - audio[last - n - 1 : last - 1][::-1]
        ref.cache["continued"] = ref.like(audio.astype(np.float32), span=ref.span)
    return ref.cache["continued"]


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Median semitone difference to the source F0 over voiced head and tail frames
    (frames matched by time; pitch leaves timing untouched)."""
    t_ref, f_ref = ref.f0
    f_match = f0_at(clip, t_ref)
    both = (f_match > 0) & (f_ref > 0)
    diff = np.full(len(t_ref), np.nan)
    diff[both] = 12 * np.log2(f_match[both] / f_ref[both])
    diff[np.abs(diff) > OCTAVE_ERROR_ST] = np.nan  # tracker octave jumps, not the shift
    matched = diff[np.isfinite(diff)]
    n = int(np.ceil(HEAD_TAIL_FRACTION * matched.size))
    if matched.size < 4:
        return Measured(float("nan"), float("nan"))
    # the first and last 20% of the frames voiced in both signals: F0 exists only there, and
    # an utterance ending on a long unvoiced consonant would leave a time window empty
    return Measured(float(np.median(matched[:n])), float(np.median(matched[-n:])))


def f0_at(a: Analysis, times: np.ndarray) -> np.ndarray:
    """F0 of `a` at the given times, interpolated on a log scale between two voiced
    neighbouring frames; 0 where either neighbour is unvoiced or out of range."""
    t, f = a.f0
    right = np.searchsorted(t, times)
    left = right - 1
    ok = (left >= 0) & (right < len(t))
    left, right = np.clip(left, 0, len(t) - 1), np.clip(right, 0, len(t) - 1)
    ok &= (f[left] > 0) & (f[right] > 0) & (t[right] - t[left] <= 1.5 * F0_STEP_S)
    span = np.where(t[right] > t[left], t[right] - t[left], 1.0)
    w = np.clip((times - t[left]) / span, 0.0, 1.0)
    logf = (1 - w) * np.log(np.maximum(f[left], 1e-9)) + w * np.log(np.maximum(f[right], 1e-9))
    return np.where(ok, np.exp(logf), 0.0)


def blind_change(clip: Analysis) -> float:
    """F0 change (semitones, tail minus head) from the clip alone, for datasets without
    sources. Frames more than half an octave from the clip's median F0 are dropped as
    likely octave errors. Natural declination pulls it down: weaker evidence than the
    source-relative measure."""
    times, f0 = clip.f0
    voiced = f0 > 0
    if voiced.sum() < 5:
        return float("nan")
    semis = np.full(len(f0), np.nan)
    semis[voiced] = 12 * np.log2(f0[voiced] / np.median(f0[voiced]))
    semis[np.abs(semis) > 6] = np.nan
    head, tail = clip.head_tail_at(times)
    h, t = head_tail(semis, head, tail)
    return t - h


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    recognition=("voice pitch", "high", "low"),
    paraphrases=(
        "Does the speaker's voice get higher or lower in pitch over time?",
        "Does the pitch of the voice go up or down over the course of the clip?",
        "Is the speaker's pitch rising or falling as the clip goes on?",
    ),
    other_kinds="pitch of the {noun}",
)
evidence = f0_change

# Two-dimension clips (`vocalgrad.formats.which`, ...): the pitch shift first, with its own
# loudness compensation, then the other process onto it (a level change rendered before would
# be undone by that compensation).
pairs_with = {
    "volume": (
        "F0 does not move with level, and the K-weighted level course does not move with the shift"
    ),
}
not_paired_with = {
    "speaking_speed": (
        "F0 is measured frame by frame against the source at the same moment, and a speed "
        "change moves every moment (5 of 32 builtin clips misread)"
    ),
}

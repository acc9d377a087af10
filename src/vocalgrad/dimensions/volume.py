"""Volume: a time-varying gain in dB (the clip is then limited, never clipped)."""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions._shared import (
    LEVEL_COURSE_CUES,
    db,
    edge_matched,
    edge_matched_analysis,
    windows,
)
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import HEAD_TAIL_FRACTION, Analysis, head_tail
from vocalgrad.signal.evidence import level_change
from vocalgrad.signal.trajectories import sample_times

SPEC = DimensionSpec(
    name="volume",
    parameter="gain",
    unit="dB",
    increase_means="the voice gets louder",
    tiers={"low": 6.0, "mid": 12.0, "high": 18.0},
    scale="linear",
    measured="K-weighted frame level relative to the source (speech-active frames)",
    measured_unit="dB",
    audibility_floor=1.0,
    floor_basis="intensity JND for broadband sounds 0.5-1.5 dB "
    "(Jesteadt, Wier & Green 1977; Miller 1947)",
    psychometric_range=(0.5, 24.0),
    centre="mean",
    loudness_neutral=False,  # loudness is the target
    # the gain acts on the whole recording, so the silences at each end, the peak, the FLAC
    # size, the median F0 (fewer voiced frames where quiet) and the centroid (speech over the
    # fixed room-tone floor) all follow the level course, i.e. the target
    target_cues=(*LEVEL_COURSE_CUES, "global_centroid_hz"),
    kinds=("speech", "tone", "noise", "music", "everyday"),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return -magnitude, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a gain change of 0 dB changes nothing"


def domain(sr: int) -> tuple[float, float]:
    """No room beyond the change itself: every clip's speech is levelled to its source's
    loudness, so a gain path shifted up or down would be levelled back. Volume is not roved;
    its one-end cue stays (see the validity page)."""
    return 0.0, 0.0


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """The gain course over the source with its ends' level courses matched at 20 ms
    (`edge_matched`)."""
    gain_db = track(sample_times(len(ref.audio), ref.sr))
    return (edge_matched(ref) * 10.0 ** (gain_db / 20.0)).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """K-weighted (loudness-weighted) energy of the clip over the source's, summed over the
    source's speech frames in the head and tail: what the ear hears as louder or softer.
    Energy, not a median of frame levels: added noise lifts quiet frames a lot but the
    loudness of the speech hardly at all."""
    c, r = clip.k_power, edge_matched_analysis(ref).k_power
    n = min(len(c), len(r), len(ref.active))
    out = []
    for window in windows(ref, n, active_only=True):
        out.append(db(c[:n][window].sum() / r[:n][window].sum()) if window.any() else float("nan"))
    return Measured(*out)


BLIND_ABOVE_FLOOR_DB = 10.0  # a frame this far above the file's quietest tenth holds sound


def blind_change(clip: Analysis) -> float:
    """Level change (dB, tail minus head) of the clip alone: the 90th percentile of frame
    levels in the first and last 20% of what is audible above the file's floor, i.e. the
    loud (voiced) frames. Not the detected speech span: a large gain change (a 36 dB jump)
    sinks the quiet half under the speech detector, and both windows then lie in the loud
    half."""
    level = clip.level_db
    sounding = np.flatnonzero(level > np.percentile(level, 10) + BLIND_ABOVE_FLOOR_DB)
    if sounding.size < 2:
        return float("nan")
    first, last = sounding[0], sounding[-1]
    width = max(1, int(round(HEAD_TAIL_FRACTION * (last - first + 1))))
    frames = np.arange(len(level))
    head = (frames >= first) & (frames < first + width)
    tail = (frames > last - width) & (frames <= last)
    h, t = head_tail(level, head, tail, reduce=lambda x: np.percentile(x, 90))
    return t - h


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    recognition=("voice", "loud", "quiet"),
    paraphrases=(
        "Does the speaker get louder or quieter over time?",
        "Does the loudness of the voice go up or down over the course of the clip?",
        "Is the sound level of the speech rising or falling as the clip goes on?",
    ),
    other_kinds="volume of the {noun}",
)
evidence = level_change

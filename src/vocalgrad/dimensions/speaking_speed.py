"""Speaking speed: a time-varying tempo change by PSOLA that keeps pitch and formants."""

from __future__ import annotations

import librosa
import numpy as np

from vocalgrad.audio import FRAME_S
from vocalgrad.dimensions._shared import psola
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis, praat_tier
from vocalgrad.signal.evidence import held_rate, rate_change

SPEC = DimensionSpec(
    name="speaking_speed",
    parameter="tempo (rate relative to the source)",
    unit="x",
    increase_means="speech gets faster",
    tiers={"low": 0.20, "mid": 0.30, "high": 0.40},
    scale="linear",
    measured="local speaking rate relative to the source, from DTW alignment",
    measured_unit="x",
    audibility_floor=0.15,
    floor_basis=(
        "speech tempo JND ~5% (Quene 2007, J. Phonetics 35); 0.15 between the start and end "
        "rates because DTW alignment of short utterances with little silence reads up to ~0.14 "
        "from stretched edges alone (measured with a planted silence-only renderer)"
    ),
    psychometric_range=(0.02, 0.50),
    centre="harmonic",  # every clip keeps the source's speech duration
    neutral_value=1.0,  # silences before and after the speech are not stretched
    source_edges=True,
    warps_time=True,  # output_time / source_time below
    # every time average weighs the slowed part more (F0, level and spectrum decline over an
    # utterance), so the median F0, the centroid and the peak (the loudness, unnormalised) read
    # where the speech is slow, and a detector finds a slowed first or last phoneme later
    target_cues=(
        "global_f0_hz",
        "global_centroid_hz",
        "global_loudness_lufs",
        "global_peak_dbfs",
        "edge_silence",
    ),
    kinds=("speech", "music"),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 1.0 - magnitude, 1.0 + magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if not 0 < magnitude < 1:
        return f"rate change {magnitude} must lie in (0, 1): the rate would not stay positive"
    return None


def domain(sr: int) -> tuple[float, float]:
    """Rates between 0.4x and 2.5x the source's, where time stretching still sounds like
    speech."""
    return 0.4, 2.5


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Relative duration 1/rate along source time, resynthesised by overlap-add (PSOLA)."""
    times = np.arange(0.0, ref.duration_s, FRAME_S)
    return psola(
        ref,
        rng,
        duration_tier=praat_tier("DurationTier", times, 1.0 / track(times), ref.duration_s),
    )


def output_time(track: Track, times_s: np.ndarray) -> np.ndarray:
    """Where source times land in the rendered clip: the integral of 1/rate."""
    step = FRAME_S / 4
    grid = np.arange(0.0, float(np.max(times_s)) + 2 * step, step)
    elapsed = np.concatenate([[0.0], np.cumsum(step / track(grid[:-1] + step / 2))])
    return np.interp(times_s, grid, elapsed)


def source_time(track: Track, clip_times_s: np.ndarray) -> np.ndarray:
    """Where clip times came from in the source: the inverse of output_time."""
    clip_times_s = np.asarray(clip_times_s, dtype=np.float64)
    top = float(np.max(clip_times_s)) * 2 + 1.0
    grid = np.arange(0.0, top, FRAME_S / 4)
    return np.interp(clip_times_s, output_time(track, grid), grid)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Align clip to source by DTW on log-mel frames; the slope of source time over clip
    time within the head and tail of the source's speech span is the local rate."""
    _, path = librosa.sequence.dtw(X=ref.log_mel, Y=clip.log_mel, backtrack=True)
    path = path[::-1]
    head, tail = ref.head_tail_frames(ref.log_mel.shape[1])
    rates = []
    for window in (head, tail):
        points = path[window[path[:, 0]]]
        if len(points) < 5 or np.ptp(points[:, 1]) == 0:
            rates.append(float("nan"))
            continue
        slope = np.polyfit(points[:, 1].astype(float), points[:, 0].astype(float), 1)[0]
        rates.append(float(slope))
    return Measured(rates[0], rates[1])


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    recognition=("speech", "fast", "slow"),
    paraphrases=(
        "Does the speaker talk faster or slower over time?",
        "Does the speech rate go up or down over the course of the clip?",
        "Is the speaker speeding up or slowing down as the clip goes on?",
    ),
    other_kinds="tempo of the {noun}",
)
evidence = rate_change
held_evidence = held_rate

# Two-dimension clips (`vocalgrad.formats.which`, ...): the time warp first, and the other
# process onto the warped clip along the same source moments.
pairs_with = {
    "volume": (
        "the rate is measured, and heard by the ideal observer, on the clip with its slow "
        "level course flattened (`vocalgrad.formats._two.flattened`): alignment on log-mel "
        "frames follows a 36 dB gain ramp (unflattened, 4 of 32 builtin clips were misread); "
        "the level course is read over the source's frames, which the warp moves by less "
        "than the change"
    ),
}

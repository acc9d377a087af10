"""Audio distortion: sample-and-hold decimation at a time-varying effective rate."""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions._shared import ERROR_TO_MASK_SPEC, error_to_mask_db
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.trajectories import sample_times

SPEC = DimensionSpec(
    name="audio_distortion",
    parameter="effective sample rate of a sample-and-hold decimator",
    unit="Hz",
    increase_means="more distorted: the effective rate falls",
    tiers={"low": 18000.0, "mid": 12000.0, "high": 6000.0},
    scale="log",
    **{
        **ERROR_TO_MASK_SPEC,
        "measured": ERROR_TO_MASK_SPEC["measured"] + "; each band's floor at least the frame's "
        "speech power 60 dB down",
    },
    # the speech content moves a held error level by several dB (tiers: ~15 dB)
    constant_tolerance=8.0,
    psychometric_range=(3000.0, 15500.0),
    # the held samples' aliases make speech less periodic, so a pitch tracker drops voiced frames
    # where the distortion is strong and the median F0 weighs the cleaner part; the hold acts on
    # the whole recording, and at 48 kHz its images lift the quiet rise of the first (or last)
    # phoneme and the background before it over a speech detector's threshold one or two 10 ms
    # frames sooner at the distorted end (tuxpaint, 48 kHz: 45 of 180 twin pairs, the increase
    # clip's leading silence the longer in all 45), so the edge silences read the target
    target_cues=("global_f0_hz", "edge_silence"),
    kinds=("speech", "tone", "noise", "music", "everyday"),
)


# The hold's images scale with the speech, so each band's mask floor follows the frame's speech
# level, this far down: a masking skirt rarely reaches further below its masker.
IMAGE_FLOOR_BELOW_SPEECH_DB = 60.0


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return float(sr), magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if magnitude >= sr:
        return (
            f"decimation to {magnitude:.0f} Hz changes nothing at a {sr} Hz render rate "
            "(the published pipeline wrote such clips anyway)"
        )
    return None


def domain(sr: int) -> tuple[float, float]:
    """From a 2 kHz sample-and-hold (telephone speech is 8 kHz) to none at all."""
    return 2000.0, float(sr)


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """A phase accumulator advancing rate(t)/sr per sample takes a new input sample each
    time it crosses an integer and holds it otherwise: continuous in time, vectorised."""
    step = track(sample_times(len(ref.audio), ref.sr)) / ref.sr
    ticks = np.floor(np.cumsum(np.minimum(step, 1.0)) + 1e-9)
    new = np.empty(len(ticks), dtype=bool)
    new[0] = True
    new[1:] = ticks[1:] > ticks[:-1]
    held_index = np.maximum.accumulate(np.where(new, np.arange(len(ticks)), 0))
    return ref.audio[held_index].astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Error-to-mask ratio of the clip against the source in a mel-band representation:
    what the hold adds (images, droop) where the speech does not mask it, with a mask floor
    tied to the frame's speech level (the images grow with it)."""
    return Measured(*error_to_mask_db(clip, ref, floor_below_speech_db=IMAGE_FLOOR_BELOW_SPEECH_DB))


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("audio", "distorted", "clean"))
# evidence: the default, the energy added to the source (late vs early)

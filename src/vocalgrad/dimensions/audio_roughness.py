"""Audio roughness: uniform requantisation at a time-varying bit depth."""

from __future__ import annotations

import numpy as np

from vocalgrad.audio import FRAME_S
from vocalgrad.dimensions._shared import ERROR_TO_MASK_SPEC, error_to_mask_db
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis

SPEC = DimensionSpec(
    name="audio_roughness",
    parameter="quantiser bit depth (full scale = the source's peak)",
    unit="bits",
    increase_means="rougher (coarser quantisation): the bit depth falls",
    tiers={"low": 8.0, "mid": 6.0, "high": 4.0},
    scale="linear",
    **ERROR_TO_MASK_SPEC,
    # the speech content moves a held error-to-mask ratio: little above 10 bits, by several
    # dB at 4-10 bits (docs/results.md), where a held depth is heard rougher
    # where the speech is quiet and verification drops the constant
    constant_tolerance=4.0,
    psychometric_range=(3.0, 14.0),
    # a coarse quantiser gates the recording's background in its pauses and the quiet rise of
    # the first (or last) phoneme, and its broadband error lifts the centroid and the bits FLAC
    # needs: the edges and both globals follow the bit depth where it is coarse
    target_cues=(
        "edge_silence",
        "edge_level",
        "edge_spectrum",
        "edge_zeros",
        "global_centroid_hz",
        "global_file_bytes",
    ),
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
CLEAN_BITS = 16.0


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return CLEAN_BITS, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if magnitude >= CLEAN_BITS:
        return f"{magnitude:.0f}-bit quantisation changes nothing in 16-bit files"
    if magnitude < 1:
        return "fewer than 1 bit leaves no signal"
    return None


def domain(sr: int) -> tuple[float, float]:
    """From 2 bits (still speech) to the file's own 16."""
    return 2.0, CLEAN_BITS


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Full scale is the source's peak, so "4 bits" means 16 levels across the speech
    whatever its recording level. A quantiser has no memory, so the step can change at any
    sample without a click; it is updated every 10 ms (fractional depths allowed), which
    keeps one grid per measurement frame and makes the realised depth exactly readable."""
    n = int(round(FRAME_S * ref.sr))
    frames = np.arange(len(ref.audio)) // n
    bits = track((frames + 0.5) * FRAME_S)
    step = 2.0 ** (1.0 - bits) * _peak(ref)
    return (np.round(ref.audio / step) * step).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Error-to-mask ratio of the clip against the source in a mel-band representation.
    A requantisation finer than the 16-bit grid's noise or the room tone is masked and
    reads 0 dB: a 14-bit "change" on 16-bit speech is refused as inaudible."""
    return Measured(*error_to_mask_db(clip, ref))


def _peak(ref: Analysis) -> float:
    return float(np.max(np.abs(ref.audio))) or 1.0


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("audio", "rough", "smooth"))
# evidence: the default, the energy added to the source (late vs early)

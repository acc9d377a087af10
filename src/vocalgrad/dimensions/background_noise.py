"""Background noise: white noise whose level follows the curve over the whole clip."""

from __future__ import annotations

import numpy as np

from vocalgrad.audio import frame_rms
from vocalgrad.dimensions._shared import db, gain_matched_residual, windows
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis, head_tail
from vocalgrad.signal.trajectories import sample_times

SPEC = DimensionSpec(
    name="background_noise",
    parameter="noise RMS / speech RMS",
    unit="ratio",
    increase_means="more background noise",
    tiers={"low": 0.03, "mid": 0.07, "high": 0.12},
    scale="linear",
    measured="level of what the clip adds to the gain-matched source, above its floor, re speech",
    measured_unit="dB",
    audibility_floor=3.0,
    floor_basis=(
        "noise-level JND ~1 dB (Miller 1947); 3 dB (the noise heard over the source's own "
        "floor doubles) so that noise under the room tone is refused"
    ),
    psychometric_range=(0.003, 0.2),
    constant_tolerance=3.0,
    # white noise lifts each frame's spectral centroid, and FLAC needs more bits per second the
    # more noise there is: the median centroid and the file size read where the noise is loud
    target_cues=(
        "edge_level",
        "edge_spectrum",
        "edge_zeros",
        "edge_silence",
        "global_centroid_hz",
        "global_file_bytes",
    ),
    # The noise fades in and out over NOISE_FADE_S at the speech's edges, so the file's
    # silences (and the source's asymmetric edges) are the source's in every clip.
    source_edges=True,
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
NOISE_FADE_S = 0.08  # inside the renderer's 0.1 s edge guard


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a noise level of 0 adds nothing"


def domain(sr: int) -> tuple[float, float]:
    """From no noise to noise as loud as the speech (0 dB SNR)."""
    return 0.0, 1.0


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Noise is present in pauses too, so the change is not hidden in the silences; it
    fades in over NOISE_FADE_S before the speech onset and out over NOISE_FADE_S after the
    offset (raised cosines), so both twins' silences are the source's."""
    t = sample_times(len(ref.audio), ref.sr)
    ratio = track(t)
    span = ref.span
    fade_in = np.clip((t - span.onset_s + NOISE_FADE_S) / NOISE_FADE_S, 0.0, 1.0)
    fade_out = np.clip((span.offset_s + NOISE_FADE_S - t) / NOISE_FADE_S, 0.0, 1.0)
    window = (0.5 - 0.5 * np.cos(np.pi * fade_in)) * (0.5 - 0.5 * np.cos(np.pi * fade_out))
    noise = rng.standard_normal(len(ref.audio)) * ratio * window * ref.speech_rms
    return (ref.audio + noise).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Residual power (clip minus the gain-matched source) over the head and tail of the
    speech span, pauses included, plus the source's own floor, in dB re the speech: noise
    quieter than the floor already there reads as the floor."""
    power = frame_rms(gain_matched_residual(clip, ref), ref.sr) ** 2
    head, tail = windows(ref, len(power))
    floor, speech = ref.floor_power, max(ref.speech_rms, 1e-10) ** 2
    h, t = head_tail(power, head, tail, reduce=np.mean)
    return Measured(db((h + floor) / speech), db((t + floor) / speech))


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("recording", "noisy", "clean"))
# evidence: the default, the energy added to the source (late vs early)

# Two-dimension clips (`vocalgrad.formats.which`, ...): no pair, measured on the builtin speech.
not_paired_with = {
    "volume": (
        "the noise is measured relative to the speech, whose level the volume changes: the "
        "two labels are not independent (the room-tone floor alone lifts the quiet end)"
    ),
    "voice_pitch": (
        "the noise is measured as what the clip adds to the source, and a pitch shift changes "
        "the whole waveform: the residual is the shift, not the noise"
    ),
    "speaking_speed": (
        "the noise is measured as what the clip adds to the source, and a time warp moves "
        "every sample: the residual is the warp, not the noise"
    ),
}

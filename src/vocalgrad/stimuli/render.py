"""Render one source's clips: prepare the reference, apply each condition, measure, verify.

Runs inside build workers. Measurement happens on exactly the 16-bit samples written to
disk, so `vocalgrad verify` re-reading the files gets the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import SpeechSpan, limit_peak, load_audio, normalise, resample
from vocalgrad.dimensions.base import DimensionSpec, Measured
from vocalgrad.errors import AudioError
from vocalgrad.stimuli.analysis import Analysis
from vocalgrad.stimuli.confounds import measure_confounds
from vocalgrad.stimuli.plan import Condition, item_rng
from vocalgrad.stimuli.trajectories import parameter_track

INT16_SCALE = 32768.0


def quantise16(audio: np.ndarray) -> np.ndarray:
    """What a 16-bit file will hold, as the float32 values soundfile reads back."""
    q = np.clip(np.round(audio.astype(np.float64) * INT16_SCALE), -32768, 32767)
    return (q / INT16_SCALE).astype(np.float32)


def prepare_reference(path: str, sr: int, target_lufs: float) -> Analysis:
    """Load, downmix, resample and loudness-normalise a source; reject unusable speech."""
    audio, source_sr = load_audio(path)
    if len(audio) < 0.5 * source_sr:
        raise AudioError(f"{path}: only {len(audio) / source_sr:.2f} s long; sources need >= 0.5 s")
    peak = float(np.max(np.abs(audio)))
    if peak < 1e-4:
        raise AudioError(f"{path}: silent (peak {peak:.1e}); remove it from the source folder")
    clipped = float(np.mean(np.abs(audio) >= 0.999 * peak)) if peak >= 0.99 else 0.0
    if clipped > 0.001:
        raise AudioError(f"{path}: {clipped:.2%} of samples are clipped; use an unclipped recording")
    audio = quantise16(normalise(resample(audio, source_sr, sr), sr, target_lufs))
    ref = Analysis(audio, sr)
    if not ref.span.plausible:
        raise AudioError(f"{path}: no plausible speech span ({ref.span.reason})")
    return ref


def track_for(condition: Condition, scale: str, onset_s: float, offset_s: float):
    """The parameter as a function of source time, interpolated on the dimension's scale."""
    start, end = condition.start, condition.end
    curve = "linear" if condition.direction == "constant" else condition.curve
    if scale == "log":
        lo, hi = np.log(start), np.log(end)
        return lambda t: np.exp(parameter_track(curve, lo, hi, t, onset_s, offset_s))
    return lambda t: parameter_track(curve, start, end, t, onset_s, offset_s)


def verdict(direction: str, change: float, spec: DimensionSpec) -> bool:
    """Does the measured change agree with the label?"""
    if not np.isfinite(change):
        return False
    signed = change * spec.measured_polarity
    if direction == "increase":
        return signed >= spec.min_change
    if direction == "decrease":
        return signed <= -spec.min_change
    return abs(change) < spec.constant_limit


@dataclass(frozen=True)
class ClipResult:
    audio: np.ndarray
    clip: Analysis
    measured: Measured
    change: float
    verified: bool
    confounds: dict[str, float]
    blind_change: float | None


def clip_span(dim, track, ref: Analysis) -> SpeechSpan:
    """The clip's speech span is the source's, moved by any time warp. Detecting it on the
    clip instead would be wrong by design: a -18 dB start or a noisy end hides speech."""
    warp = getattr(dim, "output_time", None)
    if warp is None:
        return ref.span
    onset, offset = warp(track, np.array([ref.span.onset_s, ref.span.offset_s]))
    return SpeechSpan(float(onset), float(offset), ref.span.plausible, ref.span.reason)


def render_condition(ref: Analysis, condition: Condition, seed: int, item: str) -> ClipResult:
    dim = dimensions.get(condition.category)
    spec = dim.SPEC
    track = track_for(condition, spec.scale, ref.span.onset_s, ref.span.offset_s)
    audio = quantise16(limit_peak(dim.render(ref, track, item_rng(seed, item))))
    clip = Analysis(audio, ref.sr, span=clip_span(dim, track, ref))
    measured = dim.measure(clip, ref)
    change = measured.change(spec.measured_scale)
    blind = getattr(dim, "blind_change", None)
    return ClipResult(
        audio=audio,
        clip=clip,
        measured=measured,
        change=change,
        verified=verdict(condition.direction, change, spec),
        confounds=measure_confounds(clip, ref),
        blind_change=blind(clip) if blind else None,
    )



"""Render one source's clips: prepare the source, apply each condition, neutralise every
cue but the target, measure, verify.

Runs inside build workers. Measurement happens on exactly the 16-bit samples written to
disk, so `vocalgrad verify` re-reading the files gets the same numbers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import (
    FRAME_S,
    SpeechSpan,
    limit_peak,
    load_audio,
    loudness_lufs,
    normalise,
    resample,
)
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.errors import AudioError
from vocalgrad.stimuli.analysis import Analysis
from vocalgrad.stimuli.confounds import measure_confounds
from vocalgrad.stimuli.neutralise import (
    compensate_loudness,
    momentary_power,
    room_tone,
    room_tone_rms,
    rove_gain_db,
)
from vocalgrad.stimuli.plan import Condition, held_constant, item_rng, roved
from vocalgrad.stimuli.trajectories import parameter_track

INT16_SCALE = 32768.0


def quantise16(audio: np.ndarray) -> np.ndarray:
    """What a 16-bit file will hold, as the float32 values soundfile reads back."""
    q = np.clip(np.round(audio.astype(np.float64) * INT16_SCALE), -32768, 32767)
    return (q / INT16_SCALE).astype(np.float32)


@dataclass
class PreparedSource:
    """One source, ready to render from and to measure against.

    ``clean`` is the loudness-normalised source the dimensions process (and what
    `references/` stores); ``heard`` is the same with the source's room-tone floor added,
    which is what every clip of the source sounds like before processing and what
    verification compares clips with.
    """

    clean: Analysis
    heard: Analysis
    tone_seed: int
    tone_rms: float
    tone: np.ndarray = field(repr=False)  # the room tone, as long as the longest clip so far

    @property
    def sr(self) -> int:
        return self.clean.sr

    @cached_property
    def speech_loudness(self) -> float:
        """Integrated loudness of the source's speech span: what every clip is set to."""
        return span_loudness(self.clean.audio, self.sr, self.clean.span)

    def room_tone(self, n_samples: int) -> np.ndarray:
        """The source's room tone, generated again only when a longer clip asks for it
        (the generator is prefix-stable: every clip gets the same samples)."""
        if len(self.tone) < n_samples:
            self.tone = room_tone(n_samples, self.tone_seed, self.tone_rms)
        return self.tone[:n_samples]


def span_loudness(audio: np.ndarray, sr: int, span: SpeechSpan) -> float:
    """Integrated loudness over a speech span: silences and tails do not set the level."""
    onset, offset = int(round(span.onset_s * sr)), int(round(span.offset_s * sr))
    return loudness_lufs(audio[onset:offset] if offset - onset >= sr // 2 else audio, sr)


def tone_seed_for(seed: int, source_id: str) -> int:
    """The room-tone generator seed of one source, from (global seed, source id) alone."""
    return int(hashlib.sha256(f"{seed}|{source_id}|room-tone".encode()).hexdigest()[:8], 16)


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


def prepare_source(clean: Analysis, tone_seed: int, tone_rms: float | None = None) -> PreparedSource:
    """Attach the room-tone floor (ROOM_TONE_DB under the speech) to a clean source."""
    rms = room_tone_rms(clean.speech_rms) if tone_rms is None else tone_rms
    tone = room_tone(len(clean.audio), tone_seed, rms)
    heard = Analysis(quantise16(clean.audio + tone), clean.sr, span=clean.span)
    return PreparedSource(clean, heard, tone_seed, rms, tone)


def track_for(condition: Condition, spec: DimensionSpec, onset_s: float, offset_s: float,
              source: Analysis | None = None) -> Track:
    """The parameter as a function of source time: interpolated on the dimension's scale,
    centred so its time-average over the speech span does not depend on curve x direction,
    and held at the neutral value outside the span where the dimension asks for it.

    Centre "energy" weighs that average by the source's momentary loudness (`source` is
    needed): speech is louder early (declination), so a plain time-average leaves the
    energy-weighted one, what whole-clip level or stereo-image summaries see, on the side
    of the start value, and those summaries then tell the direction."""
    start, end = condition.start, condition.end
    curve = "linear" if condition.direction == "constant" else condition.curve
    log = spec.scale == "log"
    lo, hi = (np.log(start), np.log(end)) if log else (start, end)

    def base(t: np.ndarray) -> np.ndarray:
        values = parameter_track(curve, lo, hi, t, onset_s, offset_s)
        return np.exp(values) if log else values

    times = np.linspace(onset_s, offset_s, 4001)
    grid = base(times)
    weights = None
    if spec.centre == "energy":
        if source is None:
            raise ValueError(f"{spec.name}: energy-weighted centring needs the source")
        power = momentary_power(source.k_power)
        weights = np.interp(times, (np.arange(len(power)) + 0.5) * FRAME_S, power) + 1e-20
    factor, shift = 1.0, 0.0
    if spec.centre == "harmonic":
        factor = float(np.mean(1.0 / grid))
    elif spec.centre in ("mean", "energy") and log:  # on a log scale the mean is geometric
        factor = float(np.sqrt(start * end) / np.exp(np.average(np.log(grid), weights=weights)))
    elif spec.centre in ("mean", "energy"):
        shift = float(np.average(grid, weights=weights)) - (start + end) / 2
    neutral = spec.neutral_value

    def track(t):
        t = np.asarray(t, dtype=np.float64)
        values = base(t) * factor - shift
        if neutral is None:
            return values
        return np.where((t >= onset_s) & (t <= offset_s), values, neutral)

    return track


def verdict(direction: str, change: float, spec: DimensionSpec) -> str:
    """verified: the measured change has the label's sign and clears the audibility floor;
    inaudible: a changing clip whose realised change is under the floor (refused, counted);
    disagrees: anything else (the wrong sign, or a constant clip that moves)."""
    if not np.isfinite(change):
        return "disagrees"
    if direction == "constant":
        return "verified" if abs(change) < spec.constant_limit else "disagrees"
    signed = change if direction == "increase" else -change
    if signed >= spec.audibility_floor:
        return "verified"
    if abs(change) < spec.audibility_floor:
        return "inaudible"
    return "disagrees"


@dataclass(frozen=True)
class ClipResult:
    audio: np.ndarray
    clip: Analysis
    measured: Measured
    change: float
    verdict: str
    confounds: dict[str, float]
    param_start: float  # the realised trajectory's values at speech onset and offset
    param_end: float
    rove_db: float

    @property
    def verified(self) -> bool:
        return self.verdict == "verified"


def clip_span(dim, track, ref: Analysis) -> SpeechSpan:
    """The clip's speech span is the source's, moved by any time warp. Detecting it on the
    clip instead would be wrong by design: a -18 dB start or a noisy end hides speech."""
    warp = getattr(dim, "output_time", None)
    if warp is None:
        return ref.span
    onset, offset = warp(track, np.array([ref.span.onset_s, ref.span.offset_s]))
    return SpeechSpan(float(onset), float(offset), ref.span.plausible, ref.span.reason)


def finish(source: PreparedSource, category: str, processed: np.ndarray, track: Track, span: SpeechSpan,
           seed: int, item: str) -> tuple[np.ndarray, float]:
    """From processed audio to the 16-bit clip a listener hears: loudness compensation
    where the dimension asks for it, the source's speech loudness (over the clip's speech
    span), the room-tone floor, a roved overall level, peak limiting. Returns (audio, rove
    dB)."""
    dim = dimensions.get(category)
    sr = source.sr
    if dim.SPEC.loudness_neutral:
        warp = getattr(dim, "source_time", None)
        to_source = (lambda times: warp(track, times)) if warp else None
        processed = compensate_loudness(processed, source.clean.k_power, sr, to_source)
    loudness = span_loudness(processed, sr, span)
    if np.isfinite(loudness):
        processed = processed * np.float32(10 ** ((source.speech_loudness - loudness) / 20))
    tone = source.room_tone(len(processed))
    audio = processed + (tone[:, None] if processed.ndim == 2 else tone)  # the same floor in both ears
    rove = rove_gain_db(seed, item)
    audio = limit_peak(audio * np.float32(10 ** (rove / 20)))
    return quantise16(audio), rove


def measure_clip(source: PreparedSource, category: str, audio: np.ndarray, span: SpeechSpan,
                 direction: str) -> tuple[Analysis, Measured, float, str]:
    """Verification: the clip against the heard source, never the rendering parameter."""
    dim = dimensions.get(category)
    clip = Analysis(audio, source.sr, span=span)
    measured = dim.measure(clip, source.heard)
    change = measured.change
    return clip, measured, change, verdict(direction, change, dim.SPEC)


def render_condition(source: PreparedSource, condition: Condition, seed: int, item: str) -> ClipResult:
    dim = dimensions.get(condition.category)
    spec = dim.SPEC
    if condition.direction == "constant":
        condition = held_constant(condition, seed, item)
    condition = roved(condition, seed, item)
    span = source.clean.span
    track = track_for(condition, spec, span.onset_s, span.offset_s, source.clean)
    heard_span = clip_span(dim, track, source.clean)
    processed = dim.render(source.clean, track, item_rng(seed, item))
    audio, rove = finish(source, condition.category, processed, track, heard_span, seed, item)
    clip, measured, change, result = measure_clip(source, condition.category, audio, heard_span, condition.direction)
    ends = track(np.array([span.onset_s, span.offset_s]))
    midpoint = np.array([(span.onset_s + span.offset_s) / 2])
    warp = getattr(dim, "output_time", None)
    clip_mid = float(warp(track, midpoint)[0]) if warp else float(midpoint[0])
    return ClipResult(
        audio=audio,
        clip=clip,
        measured=measured,
        change=change,
        verdict=result,
        confounds=measure_confounds(clip, source.heard, clip_mid),
        param_start=float(ends[0]),
        param_end=float(ends[1]),
        rove_db=rove,
    )

"""Render one source's clips: prepare the source, apply each condition, neutralise every
cue but the target, measure, verify.

Runs inside build workers. Measurement happens on exactly the 16-bit samples written to
disk, so `vocalgrad verify` re-reading the files gets the same numbers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from vocalgrad import dimensions, formats
from vocalgrad.audio import (
    EDGE_GUARD_S,
    FRAME_S,
    SpeechSpan,
    load_audio,
    loudness_lufs,
    normalise,
    peak_gain,
    resample,
    speech_span,
)
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.errors import AudioError
from vocalgrad.formats.base import (
    Assembled,
    ClipResult,
    Course,
    measure_against,
    measure_windows,
    verdict,
)
from vocalgrad.signal.analysis import Analysis, source_pitch_ceiling
from vocalgrad.signal.kinds import SPEECH
from vocalgrad.signal.levelling import mirror_prepared_edges, prepared_edges
from vocalgrad.signal.trajectories import parameter_track
from vocalgrad.stimuli.confounds import high_minus_low_db, late_minus_early_db, measure_confounds
from vocalgrad.stimuli.neutralise import (
    cancel_course,
    cancel_drift,
    compensate_loudness,
    momentary_power,
    room_tone,
    room_tone_rms,
    rove_gain_db,
    stratified_rove_gain_db,
)
from vocalgrad.stimuli.plan import Condition, held_constant, item_rng, roved

INT16_SCALE = 32768.0
# Bumped when the same config renders other clips: a build resumed across it would mix them,
# and caches are keyed on it. CHANGELOG.md lists what each revision changed;
# tests/test_renderer_revision.py fails when a golden set's bytes change without a bump.
RENDERER_REVISION = 24


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
    held: dict = field(default_factory=dict, repr=False)
    # Memos of pure functions: an entry is what the same call would compute again, so evicting
    # it when read (as both do, to bound memory) changes the cost of a later call, never its
    # result. `held`: (category, value) -> the held render; `twins`: (item, twin item) -> the
    # item's clip, limited with its twin, left by the twin's call `render_condition(twin, item)`.
    twins: dict = field(default_factory=dict, repr=False)
    fill: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.float32), repr=False
    )  # `tone_under`'s fresh tone

    @property
    def sr(self) -> int:
        return self.clean.sr

    @cached_property
    def speech_loudness(self) -> float:
        """Integrated loudness of the source's speech span: what every clip is set to."""
        return span_loudness(self.clean.audio, self.sr, self.clean.span)

    @cached_property
    def speech_midpoint_s(self) -> float:
        return (self.clean.span.onset_s + self.clean.span.offset_s) / 2

    @cached_property
    def late_minus_early_db(self) -> float:
        """The heard source's late-minus-early loudness: what every loudness-neutral clip keeps."""
        span = self.heard.span
        return late_minus_early_db(
            self.heard.k_power, span.onset_s, self.speech_midpoint_s, span.offset_s
        )

    def room_tone(self, n_samples: int) -> np.ndarray:
        """The source's room tone, generated again only when a longer clip asks for it
        (the generator is prefix-stable: every clip gets the same samples)."""
        if len(self.tone) < n_samples:
            self.tone = room_tone(n_samples, self.tone_seed, self.tone_rms)
        return self.tone[:n_samples]

    def tone_under(self, n_part: int, n_total: int) -> np.ndarray:
        """The room tone under a part whose edges are the source's own samples
        (`SPEC.source_edges`) but whose length is not (a held speaking rate), continued to
        n_total: the source's tone with its middle cut out (a shorter part) or fresh tone
        spliced in (a longer one), so both of the part's edges lie on the tone that lay under
        the source's edges (laid from the file's start, a part of another length would end on
        another stretch of tone than its twin). The splices lie mid-file, under speech at
        ROOM_TONE_DB, as equal-power crossfades of SPLICE_S."""
        n_source = len(self.clean.audio)
        if n_part == n_source:
            return self.room_tone(n_total)
        shift = (
            n_source - n_part
        )  # the part's sample i lies on the source's tone at i + shift after the middle
        middle = min(n_part, n_source) // 2
        tone = self.room_tone(n_total + max(shift, 0))
        head = tone[:n_total]
        tail = tone[shift : shift + n_total] if shift >= 0 else np.pad(tone, (-shift, 0))[:n_total]
        fade = max(1, int(round(SPLICE_S * self.sr)))
        i = np.arange(n_total)
        into_fill = np.clip((i - middle + fade / 2) / fade, 0, 1) * (
            np.pi / 2
        )  # 0 -> pi/2 around the middle
        if shift >= 0:
            return (np.cos(into_fill) * head + np.sin(into_fill) * tail).astype(np.float32)
        into_tail = np.clip((i - middle + shift + fade / 2) / fade, 0, 1) * (
            np.pi / 2
        )  # after the -shift fresh samples
        if len(self.fill) < n_total:  # generated once per source, like the tone
            self.fill = room_tone(n_total, [self.tone_seed, 1], self.tone_rms)
        fill = self.fill[:n_total]
        fresh = np.sin(into_fill) * np.cos(into_tail)
        return (np.cos(into_fill) * head + fresh * fill + np.sin(into_tail) * tail).astype(
            np.float32
        )


def span_loudness(audio: np.ndarray, sr: int, span: SpeechSpan) -> float:
    """Integrated loudness over a speech span, the mean of its readings forwards and
    backwards: silences and tails do not set the level, and a clip and its mirror image read
    the same. A two-channel clip is measured as if both ears heard its downmix: levelled on
    the sum of its ears, a voice off to one side came out quieter in the mono a model hears
    (`vocalgrad.dimensions.stereo_direction`).

    Why both ways: the meter lays its 400 ms blocks from the span's start and drops the part
    of the last block that does not fit, so a gain ramp up and its twin ramp down read
    apart by a share of a dB that depends on the span's length, and were levelled apart:
    on tones, whose spans are a few lengths, a volume increase clip came out louder than its
    twin over the whole file (docs/results.md).

    Parameters
    ----------
    audio : np.ndarray, shape (n,) or (n, 2)
        The clip (float).
    sr : int
        Sample rate in Hz.
    span : SpeechSpan
        Where the speech lies; a span shorter than 0.5 s is measured over the whole clip.

    Returns
    -------
    float
        Loudness in LUFS; -inf for silence.
    """
    onset, offset = int(round(span.onset_s * sr)), int(round(span.offset_s * sr))
    if audio.ndim == 2:
        audio = np.repeat(audio.mean(axis=1, keepdims=True), audio.shape[1], axis=1)
    body = audio[onset:offset] if offset - onset >= sr // 2 else audio
    forwards, backwards = loudness_lufs(body, sr), loudness_lufs(body[::-1], sr)
    if not (np.isfinite(forwards) and np.isfinite(backwards)):
        return max(forwards, backwards)
    return (forwards + backwards) / 2


def tone_seed_for(seed: int, source_id: str) -> int:
    """The room-tone generator seed of one source, from (global seed, source id) alone."""
    return int(hashlib.sha256(f"{seed}|{source_id}|room-tone".encode()).hexdigest()[:8], 16)


def prepare_reference(path: str, sr: int, target_lufs: float, kind: str = SPEECH) -> Analysis:
    """Load, downmix, resample and loudness-normalise a source, flatten its slow level course
    over the speech (`flatten_level_course`), give it equal silences (`symmetric_edges`), one
    spectral course (`matched_edge_spectra`) and matched level courses and boundaries
    (`matched_edge_courses`) at its two ends; reject unusable speech. ``kind`` is the kind of
    sound (`vocalgrad.signal.kinds`): it sets the pitch range the source and every clip of it
    are analysed in (`source_pitch_ceiling`); a sound that is not speech has its span found
    on its plain levels (`speech_span`'s ``pre_emphasis``) and these steps made exactly
    time-symmetric (`mirror_prepared_edges`: a synthetic tone is the same at both ends, and
    the steps' own reading from the file's start was all that told them apart)."""
    audio, source_sr = load_audio(path)
    if len(audio) < 0.5 * source_sr:
        raise AudioError(f"{path}: only {len(audio) / source_sr:.2f} s long; sources need >= 0.5 s")
    peak = float(np.max(np.abs(audio)))
    if peak < 1e-4:
        raise AudioError(f"{path}: silent (peak {peak:.1e}); remove it from the source folder")
    clipped = float(np.mean(np.abs(audio) >= 0.999 * peak)) if peak >= 0.99 else 0.0
    if clipped > 0.001:
        raise AudioError(
            f"{path}: {clipped:.2%} of samples are clipped; use an unclipped recording"
        )
    audio = normalise(resample(audio, source_sr, sr), sr, target_lufs)
    span = None if kind == SPEECH else speech_span(audio, sr, pre_emphasis=0.0)
    ref = Analysis(
        audio, sr, span=span, pitch_ceiling_hz=source_pitch_ceiling(audio, sr, kind), kind=kind
    )
    if not ref.span.plausible:
        raise AudioError(f"{path}: no plausible speech span ({ref.span.reason})")
    levelled, span = prepared_edges(ref) if kind == SPEECH else mirror_prepared_edges(ref)
    return ref.like(quantise16(normalise(levelled, sr, target_lufs)), span=span)


def prepare_source(
    clean: Analysis, tone_seed: int, tone_rms: float | None = None
) -> PreparedSource:
    """Attach the room-tone floor (ROOM_TONE_DB under the speech) to a clean source."""
    rms = room_tone_rms(clean.speech_rms) if tone_rms is None else tone_rms
    tone = room_tone(len(clean.audio), tone_seed, rms)
    heard = clean.like(quantise16(clean.audio + tone), span=clean.span)
    return PreparedSource(clean, heard, tone_seed, rms, tone)


def track_for(
    condition: Condition,
    spec: DimensionSpec,
    onset_s: float,
    offset_s: float,
    source: Analysis | None = None,
    centred: bool = True,
    course: Course | None = None,
    window: tuple[float, float] | None = None,
) -> Track:
    """The parameter as a function of source time: interpolated on the dimension's scale,
    centred so its time-average over the speech span does not depend on curve x direction,
    and held at the neutral value outside the span where the dimension asks for it. A
    `window` (source seconds within the span) confines the course to it: the start value
    holds before it and the end value after it, and the centring still runs over the span.

    A `course` (a question format's own shape: a change placed early or late, a peak) gives
    the progress from start to end value against the fraction of the speech span (of the
    `window`, where given) in place of the condition's curve.

    Centre "energy" weighs that average by the source's momentary loudness (`source` is
    needed): speech is louder early (declination), so a plain time-average leaves the
    energy-weighted one, what whole-clip level or stereo-image summaries see, on the side
    of the start value, and those summaries then tell the direction.

    A held part (``centred=False``) keeps its value: centring a held speed would bring every
    part back to the source's rate."""
    start, end = condition.start, condition.end
    curve = "linear" if condition.direction == "constant" else condition.curve
    log = spec.scale == "log"
    lo, hi = (np.log(start), np.log(end)) if log else (start, end)

    stretch = window or (onset_s, offset_s)

    def base(t: np.ndarray) -> np.ndarray:
        if course is None:
            values = parameter_track(curve, lo, hi, t, *stretch)
        else:
            t0, t1 = stretch
            u = np.clip((np.asarray(t, dtype=np.float64) - t0) / (t1 - t0), 0, 1)
            values = lo + (hi - lo) * course(u)
        return np.exp(values) if log else values

    times = np.linspace(onset_s, offset_s, 4001)
    grid = base(times)
    weights = None
    if spec.centre == "energy" and centred:
        if source is None:
            raise ValueError(f"{spec.name}: energy-weighted centring needs the source")
        power = momentary_power(source.k_power)
        weights = np.interp(times, (np.arange(len(power)) + 0.5) * FRAME_S, power) + 1e-20
    centre = spec.centre if centred else "none"
    factor, shift = 1.0, 0.0
    if centre == "harmonic":  # the source's duration; a roved path's, at its midpoint rate
        factor = float(np.mean(1.0 / grid)) * ((start + end) / 2 if condition.endpoint_rove else 1)
    elif centre in ("mean", "energy") and log:  # on a log scale the mean is geometric
        factor = float(np.sqrt(start * end) / np.exp(np.average(np.log(grid), weights=weights)))
    elif centre in ("mean", "energy"):
        shift = float(np.average(grid, weights=weights)) - (start + end) / 2
    neutral = spec.neutral_value

    def track(t):
        t = np.asarray(t, dtype=np.float64)
        values = base(t) * factor - shift
        if neutral is None:
            return values
        return np.where((t >= onset_s) & (t <= offset_s), values, neutral)

    return track


def clip_span(dim, track, ref: Analysis, n_samples: int) -> SpeechSpan:
    """The clip's speech span is the source's, moved by any time warp. Detecting it on the
    clip instead would be wrong by design: a -18 dB start or a noisy end hides speech. A
    warp leaves the silences unstretched, so the offset lies as far from the end of the
    rendered clip (`n_samples` long) as it does in the source, to the sample (the warp's
    integral misses it by the resynthesis' few ms, differently in a fast and a slow twin)."""
    if not dim.SPEC.warps_time:
        return ref.span
    onset = float(dim.output_time(track, np.array([ref.span.onset_s]))[0])
    trail = len(ref.audio) - int(round(ref.span.offset_s * ref.sr))
    return SpeechSpan(onset, (n_samples - trail) / ref.sr, ref.span.plausible, ref.span.reason)


def clip_time(dim, track, source_s: float) -> float:
    """Where a moment of the source lies in the clip (moved only by a time warp)."""
    if not dim.SPEC.warps_time:
        return float(source_s)
    return float(dim.output_time(track, np.array([source_s]))[0])


SPLICE_S = 0.01  # raised-cosine crossfade between processed speech and source edges


def with_source_edges(
    processed: np.ndarray, clean: np.ndarray, span: SpeechSpan, sr: int
) -> np.ndarray:
    """`processed` with everything before (onset - guard) and after (offset + guard) taken from
    the source, sample for sample, crossfaded over SPLICE_S inside the guard: the audit's edge
    windows stop at the guard, so no processed residue reaches them. The trailing
    edge is aligned from the end: a time warp keeps the silences' lengths, so the file's last
    n samples are the source's last n."""
    out = processed.astype(np.float32, copy=True)
    fade = max(1, int(round(SPLICE_S * sr)))
    ramp = (0.5 - 0.5 * np.cos(np.pi * (np.arange(fade) + 0.5) / fade)).astype(np.float32)  # 0 -> 1
    lead = min(int(round((span.onset_s - EDGE_GUARD_S) * sr)), len(out), len(clean))
    if lead > 0:
        stop = min(lead + fade, len(out), len(clean))
        w = ramp[: stop - lead]
        out[:lead] = clean[:lead]
        out[lead:stop] = (1 - w) * clean[lead:stop] + w * out[lead:stop]
    trail = min(len(out) - int(round((span.offset_s + EDGE_GUARD_S) * sr)), len(clean))
    if trail > 0:
        a, b = len(out) - trail, len(clean) - trail  # where the edge begins in clip and source
        n = min(fade, a, b)
        w = ramp[:n]
        out[a - n : a] = (1 - w) * out[a - n : a] + w * clean[b - n : b]
        out[a:] = clean[b:]
    return out


def unlimited(
    source: PreparedSource,
    category: str,
    processed: np.ndarray,
    track: Track,
    span: SpeechSpan,
    rove_db: float,
) -> np.ndarray:
    """From processed audio to the clip a listener hears, up to its peak limit (in float; the
    file takes `to_file`): loudness compensation where the dimension asks for it, the source's
    speech loudness (over the clip's speech span), the room-tone floor and the overall level
    offset `rove_db` (`level_rove_db`)."""
    edges = dimensions.get(category).SPEC.source_edges
    audio, _, _ = assemble(
        source,
        [level(source, category, processed, track, span)],
        rove_db,
        source_edges=edges,
    )
    return audio


def level(
    source: PreparedSource,
    category: str,
    processed: np.ndarray,
    track: Track,
    span: SpeechSpan,
    held: bool = False,
    gain_db: float | None = None,
    to_source: Callable[[np.ndarray], np.ndarray] | None = None,
    midpoint_s: float | None = None,
) -> np.ndarray:
    """Loudness compensation where the dimension asks for it, then the source's speech
    loudness over the clip's speech span. A held part of a dimension whose target is
    loudness keeps its gain: setting it to the source's loudness would undo the target.
    `gain_db`, where given for such a dimension, is the gain applied in place of the one
    that levels this clip alone (clips levelled together: `render_changing`). `to_source` and
    `midpoint_s` (clip times to source times, and where the source's speech midpoint lies in
    the clip) are given where an earlier layer of a two-dimension clip warped time
    (`layered`); else they follow the dimension's own warp."""
    dim = dimensions.get(category)
    sr = source.sr
    power = None
    if dim.SPEC.loudness_neutral:
        if to_source is None and dim.SPEC.warps_time:
            to_source = lambda times: dim.source_time(track, times)  # noqa: E731
        processed, power = compensate_loudness(processed, source.clean.k_power, sr, to_source)
    elif held:
        return processed
    if gain_db is not None and not dim.SPEC.loudness_neutral:
        processed = processed * np.float32(10 ** (gain_db / 20))
    elif np.isfinite(loudness := span_loudness(processed, sr, span)):
        processed = processed * np.float32(10 ** ((source.speech_loudness - loudness) / 20))
    if dim.SPEC.loudness_neutral:
        processed = cancel_drift(
            processed,
            sr,
            span.onset_s,
            clip_time(dim, track, source.speech_midpoint_s) if midpoint_s is None else midpoint_s,
            span.offset_s,
            source.late_minus_early_db,
            power,
        )  # the span's gain is one factor: it leaves the ratio as it is
    if dim.SPEC.source_edges:  # last: no gain of the speech's reaches the source's edges
        processed = with_source_edges(processed, source.clean.audio, span, sr)
    return processed


def assemble(
    source: PreparedSource,
    parts: list[np.ndarray],
    rove_db: float,
    gap_s: float = 0.0,
    source_edges: bool = False,
) -> tuple[np.ndarray, float, list[tuple[int, int]], list[int]]:
    """One file from levelled parts: each part padded to the longest (so part lengths carry
    nothing), the room-tone floor under every part (the same samples as under the source,
    so each part measures against the heard source as a single clip does) and in the gaps
    between them (its continuation: no exact digital silence anywhere), one overall level
    offset `rove_db` for the whole file (so parts keep their level difference); not yet peak-limited
    or quantised (`to_file`). Parts whose edges are the source's (`source_edges`) get the
    tone that lay under the source's edges at both ends (`PreparedSource.tone_under`).
    Every pad faces a gap: the last of several parts is padded before its speech, the
    others after it, so the file's edges are the parts' own whichever part is shorter (a
    held speaking rate) and the order of a pair's parts leaves no trace at the edges.
    Returns (audio, [(start, end) sample of each part's slot], [samples of padding before
    each part within its slot])."""
    length = max(len(p) for p in parts)
    gap = int(round(gap_s * source.sr))
    last = len(parts) - 1
    leads = [length - len(p) if 0 < i == last else 0 for i, p in enumerate(parts)]
    n_tone = length + gap + max(leads)  # a part's tone runs on through the gap and a lead-in
    tones = [
        source.tone_under(len(p), n_tone) if source_edges else source.room_tone(n_tone)
        for p in parts
    ]
    pieces, bounds, at = [], [], 0
    for i, (part, tone, lead) in enumerate(zip(parts, tones, leads, strict=True)):
        if i:  # the tone of the part before continues through the gap and this lead-in
            pieces.append(_like(part, tones[i - 1][length : length + gap + lead]))
            at += gap
        n = length - lead
        padded = np.pad(part, ((0, n - len(part)),) + ((0, 0),) * (part.ndim - 1))
        pieces.append(padded + _like(part, tone[:n]))
        bounds.append((at, at + length))
        at += length
    return np.concatenate(pieces) * np.float32(10 ** (rove_db / 20)), bounds, leads


def _like(part: np.ndarray, tone: np.ndarray) -> np.ndarray:
    """Mono tone shaped like a part: repeated to every channel (both ears alike)."""
    return np.repeat(tone[:, None], part.shape[1], axis=1) if part.ndim == 2 else tone


def to_file(audio: np.ndarray, gain: float | None = None) -> np.ndarray:
    """The 16-bit samples written: scaled by `gain`, or by the clip's own peak limit."""
    return quantise16(audio * np.float32(peak_gain(audio) if gain is None else gain))


def measure_against_source(
    heard: Analysis, category: str, audio: np.ndarray, span: SpeechSpan
) -> tuple[Analysis, Measured]:
    """A clip, a held clip or one part of a comparison against the heard source: the
    dimension's own measure, never the rendering parameter (`formats.base.measure_against`)."""
    return measure_against(heard, category, audio, span)


def measure_clip(
    source: PreparedSource, category: str, audio: np.ndarray, span: SpeechSpan, direction: str
) -> tuple[Analysis, Measured, float, str]:
    """Verification: the clip against the heard source, never the rendering parameter."""
    clip, measured = measure_against_source(source.heard, category, audio, span)
    return (
        clip,
        measured,
        measured.change,
        verdict(direction, measured.change, dimensions.get(category).SPEC),
    )


def rove_key(source: PreparedSource, condition: Condition, item: str) -> str:
    """What a clip's roves (`SPEC.rove`; its overall level where it has no stratum) are drawn
    from: for a changing clip its pair's key, so an increase clip and its decrease twin get
    the same rove and no rove follows the direction even by chance; a constant clip's own
    item."""
    if condition.direction == "constant":
        return item
    return hashlib.sha256(f"{source.tone_seed}|{condition.pair_key}".encode()).hexdigest()[:16]


def level_rove_db(source: PreparedSource, condition: Condition, seed: int, key: str) -> float:
    """The clip's overall level offset.

    Parameters
    ----------
    source : PreparedSource
        The clip's source.
    condition : Condition
        The clip's condition; its `rove_stratum` places it among the source's clips of its
        category and kind (`neutralise.stratified_rove_gain_db`).
    seed : int
        The build's seed.
    key : str
        The clip's `rove_key`: the offset is drawn from it alone where the condition has
        no stratum.

    Returns
    -------
    float
        The offset, dB; a twin pair's two clips share it (one pair key, one stratum), so it
        never follows the direction.
    """
    if condition.rove_stratum is None:
        return rove_gain_db(seed, key)
    slot, n_slots = condition.rove_stratum
    group = hashlib.sha256(f"{source.tone_seed}|{condition.category}".encode()).hexdigest()[:16]
    kind = "constant" if condition.direction == "constant" else "change"
    return stratified_rove_gain_db(seed, group, kind, slot, n_slots)


def render_condition(
    source: PreparedSource, condition: Condition, seed: int, item: str, twin_item: str | None = None
) -> ClipResult:
    """One clip, as its question format assembles it (`QuestionFormat.render`) from this
    engine's steps. `twin_item` is the item id of the same pair's other direction, where it
    is planned: a format may render both at once (a gradual pair shares one peak limit) and
    leave the twin's result in `source.twins` until it is asked for."""
    return formats.get(condition.format).render(Engine(source, seed), condition, item, twin_item)


@dataclass(frozen=True)
class Engine:
    """The stimulus engine as a question format sees it (`vocalgrad.formats.base.Engine`): one
    prepared source at one seed, and the steps a clip is made of."""

    source: PreparedSource
    seed: int

    @property
    def sr(self) -> int:
        return self.source.sr

    @property
    def twins(self) -> dict:
        return self.source.twins

    @property
    def heard(self) -> Analysis:
        return self.source.heard

    def rove_key(self, condition: Condition, item: str) -> str:
        return rove_key(self.source, condition, item)

    def roved(self, condition: Condition, key: str) -> Condition:
        return roved(condition, self.seed, key)

    def unlimited(self, condition: Condition, item: str) -> _Unlimited:
        return _render_unlimited(self.source, condition, self.seed, item)

    def finish(self, unlimited: _Unlimited, gain: float) -> ClipResult:
        return _finished(self.source, unlimited, gain)

    def held(self, condition: Condition, value: float) -> tuple[np.ndarray, SpeechSpan]:
        return render_held(self.source, condition, value)

    def level_rove_db(self, condition: Condition, key: str) -> float:
        return level_rove_db(self.source, condition, self.seed, key)

    def assemble(
        self,
        parts: list[np.ndarray],
        rove_db: float,
        gap_s: float = 0.0,
        source_edges: bool = False,
    ) -> Assembled:
        return assemble(self.source, parts, rove_db, gap_s, source_edges)

    def to_file(self, audio: np.ndarray, gain: float | None = None) -> np.ndarray:
        return to_file(audio, gain)

    def measure(
        self, category: str, audio: np.ndarray, span: SpeechSpan
    ) -> tuple[Analysis, Measured]:
        return measure_against_source(self.source.heard, category, audio, span)

    def changing(
        self, members: Sequence[tuple[Condition, str, Course | None]], centred: bool = True
    ) -> list[tuple[np.ndarray, SpeechSpan]]:
        return render_changing(self.source, self.seed, members, centred)

    def level_along(
        self, category: str, audio: np.ndarray, span: SpeechSpan, course: Course
    ) -> np.ndarray:
        if not dimensions.get(category).SPEC.loudness_neutral:
            return audio
        heard = self.source.heard.span
        target = high_minus_low_db(self.source.heard.k_power, heard.onset_s, heard.offset_s, course)
        return cancel_course(audio, self.sr, span.onset_s, span.offset_s, course, target)

    def measure_windows(
        self,
        category: str,
        audio: np.ndarray,
        span: SpeechSpan,
        windows: Sequence[tuple[float, float]],
    ) -> tuple[Analysis, Measured, list[Measured]]:
        clip = self.source.clean.like(audio, span=span)
        whole, parts = measure_windows(self.source.heard, category, clip, windows)
        return clip, whole, parts

    def confounds(self, clip: Analysis, clip_mid_s: float | None = None) -> dict[str, float]:
        return measure_confounds(clip, self.source.heard, clip_mid_s)

    def analysis(self, audio: np.ndarray, span: SpeechSpan) -> Analysis:
        return self.source.clean.like(audio, span=span)

    def layered(
        self,
        layers: Sequence[Condition],
        item: str,
        named: int = 0,
        windows: Sequence[tuple[float, float] | None] | None = None,
    ) -> _Unlimited:
        return render_layers(self.source, layers, self.seed, item, named, windows)


@dataclass(frozen=True)
class _Unlimited:
    """A gradual clip rendered up to its peak limit: levelled, roved, room tone under it."""

    condition: Condition  # as rendered: a constant's held value and any rove applied
    audio: np.ndarray
    track: Track
    span: SpeechSpan
    rove_db: float
    # a clip of several layers (`render_layers`): where the source's speech midpoint lies in
    # it, and every layer's condition and track (source time), in the order applied
    midpoint_s: float | None = None
    layers: tuple[tuple[Condition, Track], ...] = ()


def _render_unlimited(
    source: PreparedSource, condition: Condition, seed: int, item: str
) -> _Unlimited:
    dim = dimensions.get(condition.category)
    if condition.direction == "constant":
        condition = held_constant(condition, seed, item)
    key = rove_key(source, condition, item)
    condition = roved(condition, seed, key)
    span = source.clean.span
    track = track_for(condition, dim.SPEC, span.onset_s, span.offset_s, source.clean)
    processed = dim.render(source.clean, track, item_rng(seed, item))
    heard_span = clip_span(dim, track, source.clean, len(processed))
    rove_db = level_rove_db(source, condition, seed, key)
    audio = unlimited(source, condition.category, processed, track, heard_span, rove_db)
    return _Unlimited(condition, audio, track, heard_span, rove_db)


def render_layers(
    source: PreparedSource,
    layers: Sequence[Condition],
    seed: int,
    item: str,
    named: int = 0,
    windows: Sequence[tuple[float, float] | None] | None = None,
) -> _Unlimited:
    """One clip along several dimensions' tracks (`Engine.layered`), up to its peak limit.

    Each layer's dimension renders onto the previous layer's levelled output, as if that were
    its source: its track (source time, centred over the source's speech as a clip of its own
    would be) is read through the clip-to-source time map of the warps before it, and its own
    loudness compensation, drift cancellation and source edges follow the same map. So the
    order matters, and is the caller's: a time warp first (every later track follows it), a
    dimension whose target is level last (a later loudness compensation would undo it). The
    clip then gets the room-tone floor and one rove, drawn from the named layer's rove key
    (the pair key every combination of the layers' directions shares).

    Parameters
    ----------
    source
        The prepared source.
    layers
        The conditions, in the order applied; none constant.
    seed
        The build seed.
    item
        The clip's item id: its draws derive from it (one generator per layer).
    named
        The index of the layer whose condition, track and measure `_finished` reports.
    windows
        Per layer, the stretch of the speech span its change is confined to, as fractions of
        the span (start, end), or None for the whole span.

    Returns
    -------
    _Unlimited
        The clip before its peak limit, with every layer's condition and track.
    """
    span = source.clean.span
    windows = list(windows) if windows is not None else [None] * len(layers)
    key = rove_key(source, layers[named], item)
    current = source.clean
    to_source: Callable[[np.ndarray], np.ndarray] | None = None  # clip -> source time
    midpoint = source.speech_midpoint_s
    done: list[tuple[Condition, Track]] = []
    edges = False
    for i, (condition, window) in enumerate(zip(layers, windows, strict=True)):
        dim = dimensions.get(condition.category)
        condition = roved(condition, seed, key)
        seconds = None
        if window is not None:
            length = span.offset_s - span.onset_s
            seconds = (span.onset_s + window[0] * length, span.onset_s + window[1] * length)
        track = track_for(
            condition, dim.SPEC, span.onset_s, span.offset_s, source.clean, window=seconds
        )
        here = track if to_source is None else _through(track, to_source)
        rng = item_rng(seed, item) if i == 0 else np.random.default_rng([seed, int(item, 16), i])
        processed = dim.render(current, here, rng)
        heard_span = clip_span(dim, here, current, len(processed))
        if dim.SPEC.warps_time:
            to_source = _after_warp(dim, here, to_source)
        midpoint = clip_time(dim, here, midpoint)
        levelled = level(
            source,
            condition.category,
            processed,
            here,
            heard_span,
            to_source=to_source,
            midpoint_s=midpoint,
        )
        current = source.clean.like(levelled, span=heard_span)
        edges = edges or dim.SPEC.source_edges
        done.append((condition, track))
    rove_db = level_rove_db(source, layers[named], seed, key)
    audio, _, _ = assemble(source, [current.audio], rove_db, source_edges=edges)
    condition, track = done[named]
    return _Unlimited(condition, audio, track, current.span, rove_db, midpoint, tuple(done))


def _through(track: Track, to_source: Callable[[np.ndarray], np.ndarray]) -> Track:
    """A source-time track read at clip times (through a warp's time map)."""
    return lambda t: track(to_source(np.asarray(t, dtype=np.float64)))


def _after_warp(
    dim, track: Track, before: Callable[[np.ndarray], np.ndarray] | None
) -> Callable[[np.ndarray], np.ndarray]:
    """The clip-to-source time map once a warping layer has rendered along `track`."""
    if before is None:
        return lambda t: dim.source_time(track, t)
    return lambda t: before(dim.source_time(track, t))


def _finished(source: PreparedSource, clip: _Unlimited, gain: float) -> ClipResult:
    """The 16-bit clip at `gain`, measured against the source."""
    dim = dimensions.get(clip.condition.category)
    audio = to_file(clip.audio, gain)
    analysis, measured, change, result = measure_clip(
        source, clip.condition.category, audio, clip.span, clip.condition.direction
    )
    span = source.clean.span
    ends = clip.track(np.array([span.onset_s, span.offset_s]))
    return ClipResult(
        audio=audio,
        clip=analysis,
        measured=measured,
        change=change,
        verdict=result,
        confounds=measure_confounds(
            analysis,
            source.heard,
            clip_time(dim, clip.track, source.speech_midpoint_s)
            if clip.midpoint_s is None
            else clip.midpoint_s,
        ),
        param_start=float(ends[0]),
        param_end=float(ends[1]),
        rove_db=clip.rove_db,
        extra=_layer_ends(clip, span),
    )


def render_changing(
    source: PreparedSource,
    seed: int,
    members: Sequence[tuple[Condition, str, Course | None]],
    centred: bool = True,
) -> list[tuple[np.ndarray, SpeechSpan]]:
    """Clips of one dimension rendered along their conditions' tracks, or along a format's
    `course`, and levelled together, without floor or rove (the parts of a file `assemble`
    makes, or clips before them): each as a gradual clip is rendered, with its random draws
    from its item id. The conditions are taken as given (a format applies its roves).
    `centred=False` keeps the values a course gives (a change placed early or late ends where
    its twin does).

    Levelled together: where the dimension's level is its target (not
    ``SPEC.loudness_neutral``), every member gets one gain, the mean in dB of the gains that
    would set each one's speech to the source's loudness, so the members keep the level
    differences their courses make (a clip that stays loud longer is louder, as its twin's
    gain course says) and their held ends stay equal; elsewhere each member is levelled alone.

    Parameters
    ----------
    source
        The prepared source.
    seed
        The build seed.
    members
        (condition, item id, course or None) of each clip, all of one dimension.
    centred
        Shift each track so its time-average does not depend on its course (`track_for`).

    Returns
    -------
    list
        (float32 samples at the source's rate, the speech span in them) per member.
    """
    rendered = []
    for condition, item, course in members:
        dim = dimensions.get(condition.category)
        span = source.clean.span
        track = track_for(
            condition, dim.SPEC, span.onset_s, span.offset_s, source.clean, centred, course
        )
        processed = dim.render(source.clean, track, item_rng(seed, item))
        rendered.append(
            (condition, processed, track, clip_span(dim, track, source.clean, len(processed)))
        )
    gain_db = None
    spec = dimensions.get(members[0][0].category).SPEC
    if not spec.loudness_neutral and len(rendered) > 1:
        gains = [
            source.speech_loudness - span_loudness(p, source.sr, span) for _, p, _, span in rendered
        ]
        finite = [g for g in gains if np.isfinite(g)]
        gain_db = float(np.mean(finite)) if finite else None
    return [
        (level(source, c.category, p, track, span, gain_db=gain_db), span)
        for c, p, track, span in rendered
    ]


def _layer_ends(clip: _Unlimited, span: SpeechSpan) -> dict:
    """A clip of several layers: each layer's realised parameter at the speech's onset and
    offset (source time), by category."""
    if not clip.layers:
        return {}
    times = np.array([span.onset_s, span.offset_s])
    return {
        "param_ends": {
            c.category: tuple(float(v) for v in track(times)) for c, track in clip.layers
        }
    }


# ---------------------------------------------------------------------------------------
# Held renders: the parts of the held formats (comparison, recognition)


def render_held(
    source: PreparedSource, condition: Condition, value: float
) -> tuple[np.ndarray, SpeechSpan]:
    """The source with the condition's parameter held at `value` over the whole clip,
    levelled, without floor or rove. Seeded by (source, category, value) alone, so the parts
    of an increase item and its decrease twin are the same audio in the other order (and
    rendered once: both wait in `source.held`)."""
    key = (condition.category, value)
    if key in source.held:
        return source.held.pop(key)
    source.held[key] = _render_held(source, condition, value)
    return source.held[key]


def _render_held(
    source: PreparedSource, condition: Condition, value: float
) -> tuple[np.ndarray, SpeechSpan]:
    dim = dimensions.get(condition.category)
    held = dataclasses.replace(condition, direction="constant", start=value, end=value)
    span = source.clean.span
    track = track_for(held, dim.SPEC, span.onset_s, span.offset_s, centred=False)
    rng = np.random.default_rng(
        [source.tone_seed, zlib.crc32(f"{condition.category}|{value:.9g}".encode())]
    )
    processed = dim.render(source.clean, track, rng)
    heard_span = clip_span(dim, track, source.clean, len(processed))
    return level(source, condition.category, processed, track, heard_span, held=True), heard_span

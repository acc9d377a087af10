"""The contract of a question format, and what every format shares.

A question format (a task family) is one kind of question asked of the same stimulus engine:
a change within one clip (gradual), two held parts (comparison), one held clip (recognition).
`QuestionFormat` declares everything about one: how its conditions are planned, how its clip
is assembled from a dimension's renders, the row fields it adds, what verification measures to
check its label, its audit's cue families, whether a time-reversed control exists, its
question's words, how the ideal observer answers it, and its text in the card, the listing
and the report. Code outside a format's module asks the format object; it never branches on
a format's name.

This layer sits below the stimulus engine, so what a format needs from the engine and from
the listeners is handed to it: an `Engine` (one prepared source and the steps a clip is made
of) to `render`, a confounds function to `measure`, an `Observer` to `evidence`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import SpeechSpan
from vocalgrad.dimensions.base import DimensionSpec, Measured
from vocalgrad.records import CONSTANT, LABELS
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.kinds import SPEECH, get_kind

if TYPE_CHECKING:
    from vocalgrad.stimuli.plan import Condition

Assembled = tuple[np.ndarray, list[tuple[int, int]], list[int]]
"""(audio, [(start, end) sample of each part's slot], [samples padded before each part]):
what `Engine.assemble` returns."""

EDGES = ("edge_silence", "edge_level", "edge_spectrum", "edge_zeros")
"""The audit's families that read a file's leading and trailing edges: every format's audit
reads them (a format adds its own, e.g. ``("global", *EDGES, "parts")``)."""

HELD = "held"
"""The curve of a held format's conditions: the parameter has no course over time."""

Course = Callable[[np.ndarray], np.ndarray]
"""A format's own course of a changing clip: the progress from the condition's start value (0)
to its end value (1) at each fraction of the speech span (0 at onset, 1 at offset)."""


@dataclass(frozen=True)
class ClipResult:
    """One rendered clip, measured: what a format's `render` returns to the build.

    Samples are the 16-bit values written (float32 in [-1, 1)), times in seconds, levels in
    dB; ``measured`` is in the dimension's ``measured_unit``.

    Attributes
    ----------
    audio : ndarray, shape (n,) or (n, channels), float32 at the engine's rate
        The 16-bit samples written, as float32 in [-1, 1).
    clip : Analysis
        The clip (for comparison: the whole file) analysed as its source is, with its speech
        span.
    measured : Measured
        The measured start and end values (comparison: first and second part; recognition:
        the clip's head and tail), in the dimension's ``measured_unit``.
    change : float
        The measured change the verdict reads, in ``measured_unit``; NaN while the verdict
        is "pending" (recognition, until `QuestionFormat.settle`).
    verdict : str
        "verified", "inaudible", "disagrees", or "pending" until `settle` gives it.
    confounds : dict of str to float
        What differs from the heard source besides the target (comparison: second part minus
        first), by confound name (``loudness_change_db``, ``f0_change_st``, ...), each in the
        unit its name ends in (dB, semitones, ratio).
    param_start, param_end : float
        The rendering parameter realised at speech onset and offset, in the dimension's
        ``unit`` (a held clip: the held value twice).
    rove_db : float
        The overall level rove applied, dB.
    value : float
        Held formats: the measured held value of a recognition clip, in ``measured_unit``;
        NaN otherwise.
    parts : tuple of (int, int)
        Comparison: (start, end) sample of each part's slot in the file; empty otherwise.
    part_spans : tuple of (float, float)
        Comparison: each part's speech span in the file, seconds; empty otherwise.
    """

    audio: np.ndarray
    clip: Analysis
    measured: Measured
    change: float
    verdict: str
    confounds: dict[str, float]
    param_start: float  # the realised trajectory's values at speech onset and offset
    param_end: float
    rove_db: float
    value: float = float("nan")  # held formats: the measured value of a recognition clip
    parts: tuple[tuple[int, int], ...] = ()  # comparison: (start, end) sample of each part
    part_spans: tuple[
        tuple[float, float], ...
    ] = ()  # comparison: each part's speech span in the file (s)
    # what a format drew or measured for its own row fields (`QuestionFormat.row_fields`)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def verified(self) -> bool:
        """The verdict is "verified": the clip may be labelled."""
        return self.verdict == "verified"


class Wording(NamedTuple):
    """One question as a listener reads it: the question line, the instruction line, the
    answer words in the order offered, and the label (increase / decrease / ...) each word
    means.

    Attributes
    ----------
    question : str
        The question line ("Does the voice pitch increase or decrease over time?").
    instruction : str
        The instruction line (which words to answer with).
    options : tuple of str
        The answer words, in the order offered.
    labels : tuple of str
        The label each of `options` means ("increase", "decrease", ...), same order.
    """

    question: str
    instruction: str
    options: tuple[str, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Asked:
    """One item as the ideal observer hears it (`QuestionFormat.evidence`).

    Attributes
    ----------
    category : str
        The dimension asked about.
    clip : ndarray, shape (n,) or (n, channels), float
        The item's audio at the observer's ``sample_rate``, played backwards where
        `reversed_`.
    ref : ndarray, shape (m,), float
        Its source at the same rate, mono, played backwards where `reversed_`.
    row : Mapping
        The item's dataset row (its layout fields, ``sample_rate``, ...).
    reversed_ : bool
        The clip is the item played backwards (a reversed control).
    """

    category: str  # the dimension asked about
    clip: np.ndarray  # at the observer's rate, (n,) or (n, channels)
    ref: np.ndarray  # its source at the same rate, mono, played backwards where `reversed_`
    row: Mapping[str, Any]  # the item's dataset row
    reversed_: bool  # the clip is the item played backwards (a reversed control)


class Variant(Protocol):
    """A prompt variant as a format words it (`vocalgrad.questions.prompts.Variant`)."""

    name: str
    question: Any  # a template with {attribute}, or a paraphrase table (`.table()`)
    instruction: str
    options: tuple[str, ...]
    labels: tuple[str, ...]  # the label each option means; empty: the options are the labels


class Engine(Protocol):
    """The stimulus engine as a format's `render` sees it: one prepared source at one seed,
    and the steps a clip is made of (`vocalgrad.stimuli.render.Engine` implements it)."""

    @property
    def sr(self) -> int:
        """The rendering rate, Hz."""
        ...

    @property
    def twins(self) -> dict:
        """A memo of clips rendered with their twin: (item, twin item) -> `ClipResult`."""
        ...

    @property
    def heard(self) -> Analysis:
        """The heard source: what every clip of it is measured against."""
        ...

    def rove_key(self, condition: Condition, item: str) -> str:
        """What a clip's roves are drawn from (a twin pair shares it).

        Parameters
        ----------
        condition : Condition
            The clip's condition.
        item : str
            The clip's item id.

        Returns
        -------
        str
            A hex key: the pair's for a changing clip (an increase clip and its decrease twin
            get the same roves, so no rove follows the direction), the item's own for a
            constant one.
        """
        ...

    def roved(self, condition: Condition, key: str) -> Condition:
        """The condition with its endpoint or parameter rove applied.

        Parameters
        ----------
        condition : Condition
            The planned condition.
        key : str
            Its `rove_key`.

        Returns
        -------
        Condition
            The same condition with ``start`` and ``end`` (in the dimension's ``unit``)
            shifted by the rove drawn from the seed and `key`; unchanged where the dimension
            and the config rove nothing.
        """
        ...

    def unlimited(self, condition: Condition, item: str) -> Any:
        """A changing clip rendered along its track, levelled, floored and roved, before its
        peak limit (the input of `finish`).

        Parameters
        ----------
        condition : Condition
            What to render; a constant's held value and any rove are applied here.
        item : str
            The clip's item id (its random draws derive from it).

        Returns
        -------
        object
            An opaque float clip with its ``audio`` (float32 at `sr` Hz, not yet limited or
            quantised), to pass to `finish`; a format may read its ``audio`` to choose a gain.
        """
        ...

    def finish(self, unlimited: Any, gain: float) -> ClipResult:
        """An `unlimited` clip at `gain`, quantised and measured against the source.

        Parameters
        ----------
        unlimited : object
            What `unlimited` returned.
        gain : float
            Linear factor the samples are scaled by before quantising (a peak limit, e.g.
            `vocalgrad.audio.peak_gain` of the clip and its twin).

        Returns
        -------
        ClipResult
            The 16-bit clip, measured by the dimension's own measure, with its verdict and
            confounds.
        """
        ...

    def held(self, condition: Condition, value: float) -> tuple[np.ndarray, SpeechSpan]:
        """The source with the parameter held at `value` over the whole clip, levelled,
        without floor or rove, and its speech span.

        Parameters
        ----------
        condition : Condition
            The condition whose dimension is held (its direction is ignored).
        value : float
            The parameter's value, in the dimension's ``unit`` (usually the condition's
            ``start`` or ``end``).

        Returns
        -------
        audio : ndarray, shape (n,) or (n, channels), float32 at `sr` Hz
            The held render, levelled to the source's speech loudness (unless loudness is the
            target); ``n`` differs from the source's where the dimension warps time.
        span : SpeechSpan
            Its speech span, seconds from its first sample.
        """
        ...

    def level_rove_db(self, condition: Condition, key: str) -> float:
        """The file's overall level offset.

        Parameters
        ----------
        condition : Condition
            The clip's condition (its `rove_stratum` places it among the source's clips).
        key : str
            Its `rove_key`.

        Returns
        -------
        float
            The offset, dB, the same for a twin pair's two clips.
        """
        ...

    def assemble(
        self,
        parts: list[np.ndarray],
        rove_db: float,
        gap_s: float = 0.0,
        source_edges: bool = False,
    ) -> Assembled:
        """One file from levelled parts, `gap_s` s of room tone between them: (audio,
        [(start, end) sample of each part's slot], [samples padded before each part]).

        Parameters
        ----------
        parts : list of ndarray, each shape (n_i,) or (n_i, channels), float32 at `sr` Hz
            Levelled parts (from `held`, say), in the order they play.
        rove_db : float
            The file's overall level offset, dB (`level_rove_db`).
        gap_s : float
            Room tone between consecutive parts, seconds.
        source_edges : bool
            The parts' edges are the source's own samples (``SPEC.source_edges``): lay
            under them the tone that lay under the source's edges.

        Returns
        -------
        Assembled
            (audio float32 at `sr` Hz, each part padded to the longest with the room-tone
            floor under all of it, roved but neither limited nor quantised; each part's
            slot as (start, end) samples; the samples padded before each part
            within its slot).
        """
        ...

    def to_file(self, audio: np.ndarray, gain: float | None = None) -> np.ndarray:
        """The 16-bit samples written: scaled by `gain`, or by the clip's own peak limit.

        Parameters
        ----------
        audio : ndarray, shape (n,) or (n, channels), float32
            An assembled file.
        gain : float or None
            Linear scale factor; None: the clip's own peak limit
            (`vocalgrad.audio.peak_gain`).

        Returns
        -------
        ndarray, same shape, float32
            The samples a 16-bit file holds, as the float32 values soundfile reads back.
        """
        ...

    def measure(
        self, category: str, audio: np.ndarray, span: SpeechSpan
    ) -> tuple[Analysis, Measured]:
        """A clip or a part against the heard source, by the dimension's own measure.

        Parameters
        ----------
        category : str
            The dimension.
        audio : ndarray, shape (n,) or (n, channels), float32 at `sr` Hz
            The samples (a file from `to_file`, or one part's slot of it).
        span : SpeechSpan
            Their speech span, seconds from their first sample.

        Returns
        -------
        clip : Analysis
            The samples analysed as the source is.
        measured : Measured
            Their start and end values re the heard source, in ``measured_unit``.
        """
        ...

    def confounds(self, clip: Analysis, clip_mid_s: float | None = None) -> dict[str, float]:
        """What differs between the clip and the heard source besides the target.

        Parameters
        ----------
        clip : Analysis
            The clip or part (from `measure`).
        clip_mid_s : float or None
            Where the source's speech midpoint lies in the clip, seconds; None: the source's
            own (a clip that does not warp time).

        Returns
        -------
        dict of str to float
            Each confound by name (``loudness_change_db``, ``f0_change_st``, ...), clip
            against source, in the unit its name ends in (dB, semitones, ratio).
        """
        ...

    def analysis(self, audio: np.ndarray, span: SpeechSpan) -> Analysis:
        """Samples analysed as the source is (in its kind's pitch range), with `span`.

        Parameters
        ----------
        audio : ndarray, shape (n,) or (n, channels), float32 at `sr` Hz
            The samples.
        span : SpeechSpan
            Their speech span, seconds from their first sample.

        Returns
        -------
        Analysis
            The samples at `sr` Hz, with the source's pitch ceiling and `span`.
        """
        ...

    def changing(
        self, members: Sequence[tuple[Condition, str, Course | None]], centred: bool = True
    ) -> list[tuple[np.ndarray, SpeechSpan]]:
        """Clips of one dimension, each (condition, item id, course or None) rendered along
        its track (or course) and levelled together, without floor or rove: the parts
        `assemble` joins, or the clips of a pair. Where level is the dimension's target, one
        gain for all, so they keep their level differences; `centred=False` keeps the
        courses' values (no shift of the time-average).

        Parameters
        ----------
        members : sequence of (Condition, str, Course or None)
            Each clip's condition, item id (its random draws derive from it) and the
            format's own course, or None for the condition's curve; all of one dimension.
        centred : bool
            Shift each track so its time-average does not depend on its course.

        Returns
        -------
        list of (ndarray, SpeechSpan)
            Per member, float32 samples at `sr` Hz and the speech span in them (seconds).
        """
        ...

    def level_along(
        self, category: str, audio: np.ndarray, span: SpeechSpan, course: Course
    ) -> np.ndarray:
        """A clip from `changing` with its loudness where `course` is high against where it
        is low set to the source's (`vocalgrad.stimuli.neutralise.cancel_course`), where the
        dimension keeps loudness (``SPEC.loudness_neutral``); else unchanged. For a course
        that turns (a contour): the loudness compensation follows the source only as
        closely as its smoothing allows, and left a peak's middle louder than its dip's.

        Parameters
        ----------
        category : str
            The clip's dimension.
        audio : ndarray
            Float32 samples at `sr` Hz, as `changing` returned them.
        span : SpeechSpan
            The speech span in them (s).
        course : Course
            Fractions of the span -> the course's value in [0, 1].

        Returns
        -------
        ndarray
            Float32 samples at `sr` Hz.
        """
        ...

    def measure_windows(
        self,
        category: str,
        audio: np.ndarray,
        span: SpeechSpan,
        windows: Sequence[tuple[float, float]],
    ) -> tuple[Analysis, Measured, list[Measured]]:
        """A clip against the heard source, by the dimension's own measure, over the whole
        speech and over each window of it (`measure_windows`).

        Parameters
        ----------
        category : str
            The dimension.
        audio : ndarray, shape (n,) or (n, channels), float32 at `sr` Hz
            The clip's samples.
        span : SpeechSpan
            Its speech span, seconds from its first sample.
        windows : sequence of (float, float)
            (start, end) of each window as fractions of the source's speech span.

        Returns
        -------
        tuple of (Analysis, Measured, list of Measured)
            The clip analysed as the source is, the whole span's measure and one per window,
            in the dimension's ``measured_unit``.
        """
        ...

    def layered(
        self,
        layers: Sequence[Condition],
        item: str,
        named: int = 0,
        windows: Sequence[tuple[float, float] | None] | None = None,
    ) -> Any:
        """One clip along several dimensions' tracks at once (the input of `finish`, as
        `unlimited`): each layer renders onto the previous one's levelled output, in the order
        given, its track mapped into the clip's time through the time warps before it (each
        layer's own loudness neutralisation applied as it would be alone), then the floor and
        one rove. Why one general step: a format that asks about two dimensions needs both
        changes in one clip, each still measurable by its own dimension's measure.

        Parameters
        ----------
        layers : sequence of Condition
            The dimensions' conditions, in the order rendered (a time warp first, a level
            change last); none constant.
        item : str
            The clip's item id: every random draw derives from it.
        named : int
            The index of the layer whose condition, track and measure `finish` reports.
        windows : sequence of (float, float) or None, or None
            Per layer, the stretch of the speech span its change is confined to (fractions
            of the span, start and end; held before and after), or None for the whole span.

        Returns
        -------
        object
            The clip before its peak limit (what `unlimited` returns), with every layer's
            condition and track: the input of `finish`.
        """
        ...


Confounds = Callable[[Analysis, Analysis, "float | None"], dict[str, float]]
"""``confounds(clip, ref, clip_mid_s)``: `vocalgrad.stimuli.confounds.measure_confounds`."""


class Observer(Protocol):
    """The ideal observer as a format's `evidence` sees it
    (`vocalgrad.listeners.baselines.IdealObserver`).

    Attributes
    ----------
    sample_rate : int
        The rate the observer hears at, Hz (clips and references are resampled to it).
    rows : Mapping of str to Mapping
        Item id -> dataset row, over every split.
    memo : dict
        What a format computed from the dataset once (a recognition boundary, say), by
        format name.
    """

    sample_rate: int
    rows: Mapping[str, Mapping[str, Any]]  # item id -> dataset row, every split
    memo: dict  # what a format computed from the dataset once, by format name

    def held(self, category: str, clip: np.ndarray, ref: np.ndarray) -> float:
        """Where a held clip lies on the dimension, relative to its source.

        Parameters
        ----------
        category : str
            The dimension.
        clip : ndarray, shape (n,) or (n, channels), float at `sample_rate` Hz
            The held clip, or one part of a comparison file.
        ref : ndarray, shape (m,), float at `sample_rate` Hz
            Its source, mono.

        Returns
        -------
        float
            Evidence, larger for a clip further towards "increase" (`Bound.held`).
        """
        ...

    def reference(self, source_id: str) -> np.ndarray:
        """A source's reference audio at `sample_rate`.

        Parameters
        ----------
        source_id : str
            A row's ``source_id``.

        Returns
        -------
        ndarray, shape (m,), float32 at `sample_rate` Hz
            The source as the dataset's ``references/`` stores it, mono.
        """
        ...


def verdict(direction: str, change: float, spec: DimensionSpec) -> str:
    """The label check every format's verification ends in. verified: the measured change has
    the label's sign and clears the audibility floor; inaudible: a changing clip whose realised
    change is under the floor (refused, counted); disagrees: anything else (the wrong sign, or
    a constant clip that moves).

    Parameters
    ----------
    direction : str
        The label: "increase", "decrease" or "constant".
    change : float
        The measured change, in the dimension's ``measured_unit``.
    spec : DimensionSpec
        The dimension's declaration (floor and constant limit).

    Returns
    -------
    str
        "verified", "inaudible" or "disagrees".
    """
    if not np.isfinite(change):
        return "disagrees"
    if direction == CONSTANT:
        return "verified" if abs(change) < spec.constant_limit else "disagrees"
    signed = change if direction == "increase" else -change
    if signed >= spec.audibility_floor:
        return "verified"
    if abs(change) < spec.audibility_floor:
        return "inaudible"
    return "disagrees"


def attribute_name(category: str, kind: str = SPEECH) -> str:
    """The words a question uses for a dimension: its ``QUESTION.attribute``, else its name
    with underscores as spaces (the published wording); for a sound that is not speech, its
    ``QUESTION.other_kinds`` with the kind's noun ("pitch of the tone"), where it declares one.

    Parameters
    ----------
    category : str
        The dimension.
    kind : str
        The kind of sound asked about (a row's ``source_kind``).

    Returns
    -------
    str
        The attribute's words, e.g. "voice pitch" or "pitch of the tone".
    """
    question = dimensions.get(category).QUESTION
    if kind != SPEECH and question.other_kinds:
        return question.other_kinds.format(noun=get_kind(kind).noun)
    return question.attribute or category.replace("_", " ")


def two_words(question: str, up: str, down: str, variant: str) -> Wording:
    """A question answered by one of two words, `up` meaning increase and `down` decrease; the
    "swapped" variant offers them in the other order, in the question and the instruction.

    Why shared: the held formats word their questions this way, so a swap cannot be done one
    way in one format and another way in the other.

    Parameters
    ----------
    question : str
        The question line, naming the words as ``"<up> or <down>"``.
    up : str
        The word that means "increase" ("higher").
    down : str
        The word that means "decrease" ("lower").
    variant : str
        The prompt variant's name; "swapped" reverses the words' order.

    Returns
    -------
    Wording
        The question, an instruction to answer with one of the two words, the words in the
        order offered and their labels.
    """
    words, labels = (up, down), LABELS
    if variant == "swapped":
        question = question.replace(f"{up} or {down}", f"{down} or {up}")
        words, labels = words[::-1], labels[::-1]
    return Wording(
        question, f'Answer with only one word: "{words[0]}" or "{words[1]}".', words, labels
    )


def measure_against(
    ref: Analysis, category: str, audio: np.ndarray, span: SpeechSpan
) -> tuple[Analysis, Measured]:
    """A clip, a held clip or one part against the heard source `ref`: the dimension's own
    measure, never the rendering parameter.

    Parameters
    ----------
    ref : Analysis
        The heard source.
    category : str
        The dimension.
    audio : ndarray, shape (n,) or (n, channels), float32 at ``ref.sr`` Hz
        The samples.
    span : SpeechSpan
        Their speech span, seconds from the first sample.

    Returns
    -------
    clip : Analysis
        The samples, analysed as the source is (its kind's pitch range).
    measured : Measured
        Their start and end values, in the dimension's ``measured_unit``.
    """
    clip = ref.like(audio, span=span)  # analysed as the source is (its kind's pitch range)
    return clip, dimensions.get(category).measure(clip, ref)


def measure_windows(
    ref: Analysis, category: str, clip: Analysis, windows: Sequence[tuple[float, float]]
) -> tuple[Measured, list[Measured]]:
    """The dimension's own measure of a clip over its whole speech span and over windows of
    it: each window read as the speech of a clip of its own (the head and tail of the window).

    Why: where in a clip a change lies, and how it turns, is read with the same measure that
    checks the change of a whole clip, never with the rendering parameter.

    Parameters
    ----------
    ref
        The heard source, with its speech span.
    category
        The dimension.
    clip
        The clip, with its speech span.
    windows
        (start, end) of each window as fractions of the source's speech span (0: onset, 1:
        offset), in source time: a time-warping dimension's measure aligns the clip itself.

    Returns
    -------
    tuple
        (the whole span's `Measured`, one `Measured` per window), in ``measured_unit``.
    """
    dim = dimensions.get(category)
    # first: what a measure memoises of the source (in `ref.cache`) is made for its own span
    whole = dim.measure(clip, ref)
    onset, offset = ref.span.onset_s, ref.span.offset_s
    parts = []
    for a, b in windows:
        span = SpeechSpan(onset + a * (offset - onset), onset + b * (offset - onset), True)
        parts.append(dim.measure(clip, ref.with_span(span)))
    return whole, parts


RISE, FALL = "rise", "fall"
"""The curves of a format whose two answers share the way a change goes (a change placed
early or late, two changes of different size): towards the dimension's increase endpoint, or
away from it. Both are planned, so every answer holds as many of each."""

HALVES = ((0.0, 0.5), (0.5, 1.0))
"""The two halves of the speech span (`measure_windows`)."""


def path_of(condition: Condition) -> tuple[float, float]:
    """(start, end) parameter values of a `RISE` or `FALL` condition's change, whichever
    answer its label slot holds: the plan gives an "increase" condition the increase
    endpoints and its twin the other way round; the curve says which way the change goes.

    Parameters
    ----------
    condition
        A planned condition of a format with `RISE` / `FALL` curves.

    Returns
    -------
    tuple
        (start, end), in the dimension's unit.
    """
    up = (condition.start, condition.end)
    if condition.direction != "increase":
        up = up[::-1]
    return up if condition.curve == RISE else (up[1], up[0])


def change_sign(row: Mapping[str, Any]) -> float:
    """+1 where a row's change rises (``change_direction`` "increase"), -1 where it falls:
    what turns a measured change into a change along the row's own way.

    Parameters
    ----------
    row : Mapping
        A dataset row with ``change_direction``.

    Returns
    -------
    float
        +1.0 or -1.0.
    """
    return 1.0 if row["change_direction"] == "increase" else -1.0


def windows_of(
    asked: Asked, sample_rate: int, windows: Sequence[tuple[float, float]]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """(clip, source) of windows of an item's speech as the ideal observer hears it, each
    window given as fractions of the speech span (0: onset, 1: offset) and cut from each
    signal within its own span: a time warp keeps the silences' lengths, so the source's
    span ends as far before its end as the clip's does. Played backwards, the spans are
    mirrored: a window is still read in playing order (0.25 is a quarter into the playing).

    Parameters
    ----------
    asked
        The item (its row gives the clip's speech span, seconds).
    sample_rate
        The observer's rate, Hz.
    windows
        (start, end) of each window, fractions of the speech span.

    Returns
    -------
    list
        (the clip's samples, the source's samples) of each window.
    """
    clip, ref, row = asked.clip, asked.ref, asked.row
    onset, offset = float(row["speech_onset_s"]), float(row["speech_offset_s"])
    clip_s, ref_s = len(clip) / sample_rate, len(ref) / sample_rate
    spans = [(onset, offset), (onset, ref_s - (clip_s - offset))]  # the same trailing silence
    if asked.reversed_:
        spans = [
            (clip_s - spans[0][1], clip_s - spans[0][0]),
            (ref_s - spans[1][1], ref_s - spans[1][0]),
        ]
    (c_on, c_off), (r_on, r_off) = spans
    at = sorted({f for window in windows for f in window})
    clip_at = {f: c_on + f * (c_off - c_on) for f in at}
    if dimensions.get(asked.category).SPEC.warps_time:  # where the clip's moment came from
        source_at = dict(
            zip(at, aligned(clip, ref, sample_rate, list(clip_at.values())), strict=True)
        )
    else:
        source_at = {f: r_on + f * (r_off - r_on) for f in at}
    out = []
    for a, b in windows:
        c = clip[max(round(clip_at[a] * sample_rate), 0) : round(clip_at[b] * sample_rate)]
        r = ref[max(round(source_at[a] * sample_rate), 0) : round(source_at[b] * sample_rate)]
        out.append((c, r))
    return out


ALIGN_HOP_S = 0.01


def aligned(
    clip: np.ndarray, ref: np.ndarray, sample_rate: int, times: Sequence[float]
) -> list[float]:
    """Where moments of a time-warped clip came from in its source: an MFCC alignment (DTW,
    cosine distance, 10 ms frames) of the whole clip with the whole source, read at `times`
    (seconds in the clip). Content, not the warp's parameter: the observer hears both.

    Parameters
    ----------
    clip, ref
        The clip (mono or (n, channels), downmixed) and its source, at `sample_rate` Hz.
    sample_rate
        Their rate, Hz.
    times
        Moments of the clip, seconds.

    Returns
    -------
    list of float
        The matching moments of the source, seconds.
    """
    import librosa

    hop = max(1, round(ALIGN_HOP_S * sample_rate))
    mono = clip.mean(axis=1) if clip.ndim == 2 else clip
    x = librosa.feature.mfcc(
        y=np.asarray(ref, np.float32), sr=sample_rate, n_mfcc=13, hop_length=hop
    )
    y = librosa.feature.mfcc(
        y=np.asarray(mono, np.float32), sr=sample_rate, n_mfcc=13, hop_length=hop
    )
    _, path = librosa.sequence.dtw(X=x, Y=y, metric="cosine", backtrack=True)
    path = path[::-1]
    clip_frames, order = np.unique(path[:, 1], return_index=True)
    source_frames = path[order, 0]
    frames = np.interp(np.asarray(times) / ALIGN_HOP_S, clip_frames, source_frames)
    return [float(f * ALIGN_HOP_S) for f in frames]


def source_median(
    observer: Observer, asked: Asked, name: str, reading: Callable[[Asked], np.ndarray]
) -> np.ndarray:
    """The median of `reading` over every clip of the item's source and dimension in its
    split, played the same way (forwards, or backwards for a reversed control), computed once
    per format `name` (`Observer.memo`). Reads no label.

    Why: what a source's preparation does alike to each of its clips is the source's, not the
    change's: a dimension whose level is the target renders from its source with the ends'
    level courses matched once more, so a window at the onset reads a rise in every clip of
    it. A reading of one clip less this median keeps only what the clip's own course adds,
    where the clips of a source hold each answer and each way of change alike (and the
    readings of the clips whose change lies elsewhere agree: where they spread with the
    parameter's value, as F0 readings of creaky speech do, the median is no bias to remove).

    Parameters
    ----------
    observer
        The ideal observer (rows, references, rate, memo).
    asked
        The item whose source is read.
    name
        The format's name (its memo).
    reading
        What is read of one clip: an array of readings (one per window, say).

    Returns
    -------
    np.ndarray
        The per-element median of the readings.
    """
    from vocalgrad.audio import load_audio, resample

    row = asked.row
    key = (row["source_id"], asked.category, row["split"], asked.reversed_)
    memo = observer.memo.setdefault(name, {})
    if key not in memo:
        readings = []
        for member in observer.rows.values():
            if (member["source_id"], member["category"], member["split"]) != key[:3]:
                continue
            audio, sr = load_audio(member["path"], mono=False)
            clip = resample(audio, sr, observer.sample_rate)
            if asked.reversed_:
                clip = np.ascontiguousarray(clip[::-1])
            readings.append(
                reading(Asked(asked.category, clip, asked.ref, member, asked.reversed_))
            )
        memo[key] = np.nanmedian(np.array(readings, dtype=float), axis=0)
    return memo[key]


def window_evidence(
    evidence: Callable[[np.ndarray, np.ndarray, int], float],
    windows: Sequence[tuple[np.ndarray, np.ndarray]],
    sample_rate: int,
) -> np.ndarray:
    """A dimension's evidence in each (clip, source) window (`windows_of`); NaN where a
    window's evidence cannot be read (an alignment of too few frames that a fit cannot
    solve): the caller weighs such a window as no evidence.

    Parameters
    ----------
    evidence
        ``evidence(clip, ref, sr)``: the dimension's ideal-observer statistic.
    windows
        (clip, source) samples of each window.
    sample_rate
        Their rate, Hz.

    Returns
    -------
    np.ndarray
        One reading per window, in the dimension's evidence units.
    """
    out = []
    for clip, ref in windows:
        try:
            with np.errstate(all="ignore"):
                out.append(float(evidence(clip, ref, sample_rate)))
        except (np.linalg.LinAlgError, ValueError):
            out.append(float("nan"))
    return np.array(out, dtype=float)


SLIDING = ((0.0, 0.5), (0.25, 0.75), (0.5, 1.0))
"""Windows half the speech span wide, a quarter apart: where a change lies, read from the
dimension's evidence in each (`windows_of`). Half the span, so that an evidence reading its
window's first and last thirds has as many voiced frames there as a gradual clip's sixths."""


@dataclass(frozen=True)
class Rung:
    """One rung of the ladder (`QuestionFormat.rungs`): a name, its place, and the prompt
    variants its items are asked with.

    Attributes
    ----------
    name
        The rung's name (a run folder of a ladder evaluation is named after it).
    order
        Its place on the ladder, ascending from hearing a change to reasoning about it.
    variants
        The prompt variants asked (`vocalgrad eval --variants`).
    against
        The rung its drop is measured from on the same items (paired by item): a rung that
        adds a text step to another rung's question, on that rung's clips (reasoning on
        direction). None: the rung below it that the listener answered, paired by source.
    """

    name: str
    order: float
    variants: tuple[str, ...] = ("default",)
    against: str | None = None


class QuestionFormat:
    """One question format: subclass it in one module of `vocalgrad.formats` (or of a plug-in
    package, entry-point group ``vocalgrad.formats``) and declare what differs.

    Attributes
    ----------
    name
        The format's name, as `vocalgrad build --question-format` and every row's ``format``
        field give it.
    summary
        One line: what is asked (`vocalgrad list formats`).
    card_note
        What the dataset card says about the format's clips and fields.
    marker, symbol
        Its matplotlib marker and the same shape as a character, in the report's figures
        and captions (a model keeps its colour across formats; the marker tells them apart).
    order
        Where it is listed (ascending), in listings, tables and figures.
    tagged
        Its condition keys (hence item ids) and the listener names of its runs carry its
        name. Only the default format, which predates formats, is untagged.
    constants
        Constant control clips are planned (`BuildConfig.constants`).
    changes_over_time
        Its clip carries the change over time, so a source-free measure of the clip's course
        (`Dimension.blind_change`) and an observer of one end (`baseline:one-end`) apply.
    reversible
        A time-reversed control exists: played backwards, the item's label flips.
    rove_refusal
        Why an endpoint rove (`BuildConfig.rove_endpoints`) cannot be used, or None.
    variants
        The prompt variants it is asked with, or None for every one.
    audit_families
        The shortcut audit's cue families (`vocalgrad.stimuli.audit.cues.CUE_NAMES`).
    warp_target_families
        The families that measure the target where a dimension warps time (a held speaking
        rate sets what pads its speech).
    order_free_gated
        The audit's order-free family is gated, not only reported.
    rungs
        Its rungs of the ladder (`Rung`), in order; none: it is not on the ladder.
    answers_by_direction
        Where an answer names none of the answer words, the direction lexicon reads it ("it
        got louder" answers "higher or lower?"). False where the words are not directions
        (early or late, same or different, one dimension or the other): "it rises" would be
        read as the first word.
    blind_change_answers
        A clip's source-free change (`Dimension.blind_change`, where it `changes_over_time`)
        says its label; False where the label is not the way the clip changes (where a
        change lies), so verification does not read it as one.
    level_target_families
        The cue families (or single cues) that measure the target where the dimension's level
        course is its target (its ``SPEC.target_cues`` hold ``edge_level``): where in a clip
        the energy lies follows a change of level placed early or late.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    card_note: ClassVar[str]
    marker: ClassVar[str] = "D"
    symbol: ClassVar[str] = "◇"
    order: ClassVar[int] = 100
    tagged: ClassVar[bool] = True
    constants: ClassVar[bool] = False
    changes_over_time: ClassVar[bool] = False
    reversible: ClassVar[bool] = True
    rove_refusal: ClassVar[str | None] = None
    variants: ClassVar[tuple[str, ...] | None] = ("default", "swapped")
    audit_families: ClassVar[tuple[str, ...]]
    warp_target_families: ClassVar[tuple[str, ...]] = ()
    order_free_gated: ClassVar[bool] = True
    rungs: ClassVar[tuple[Rung, ...]] = ()
    answers_by_direction: ClassVar[bool] = True
    level_target_families: ClassVar[tuple[str, ...]] = ()
    blind_change_answers: ClassVar[bool] = True

    def __repr__(self) -> str:
        return f"<question format {self.name!r}>"

    # -- planning

    @property
    def key_suffix(self) -> str:
        """What a condition key ends in, so the same cell in two formats has two item ids."""
        return f"|{self.name}" if self.tagged else ""

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        """The curves its conditions are planned with, given the config's. A held format has
        one: the parameter does not move.

        Parameters
        ----------
        curves : sequence of str
            The curves the build config asks for (`BuildConfig.curves`).

        Returns
        -------
        tuple of str
            The curves to plan; by default ``(HELD,)``. A format whose clip changes over time
            returns `curves` itself.
        """
        return (HELD,)

    # -- building

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """One clip of `condition` from the engine's source.

        Parameters
        ----------
        engine : Engine
            The prepared source and the engine's steps.
        condition : Condition
            What to render (category, direction, start and end values in the dimension's
            ``unit``, ...).
        item : str
            The clip's item id (its random draws derive from it).
        twin_item : str or None
            The item id of the same pair's other direction, where it is planned.

        Returns
        -------
        ClipResult
            The 16-bit samples, measured, with its verdict ("pending" if `settle` gives it).

        Raises
        ------
        NotImplementedError
            The format declares no render (every format must).
        """
        raise NotImplementedError(f"format {self.name!r} declares no render")

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The fields it adds to a dataset row (after ``format``); `pair_id` is an opaque id
        the two directions of a pair share.

        Parameters
        ----------
        condition : Condition
            The clip's condition.
        clip : ClipResult
            What `render` returned for it.
        pair_id : str
            An opaque id the two directions of a pair share.

        Returns
        -------
        dict of str to object
            JSON-ready fields, times in seconds and positions in samples as the other row
            fields are; by default none.
        """
        return {}

    def settle(self, rows: list[dict]) -> None:
        """Give the rows of one source the verdicts that need more than one clip (in place).
        Rows without ``file_name`` are refusals or failures.

        Parameters
        ----------
        rows : list of dict
            Every row of one source's task, in the order rendered; an implementation updates
            ``measured_change``, ``verdict`` and ``verified`` of its "pending" rows. The
            default does nothing.
        """

    # -- verification

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """What `vocalgrad verify` measures of one row's audio against its heard source: the
        value its verdict reads (in ``measured_unit``) and the confounds.

        Parameters
        ----------
        row : Mapping
            The dataset row (its layout fields included).
        clip : Analysis
            The row's audio as written, with the row's speech span.
        ref : Analysis
            The heard source at the clip's rate.
        confounds : Confounds
            ``confounds(clip, ref, clip_mid_s)`` -> confounds by name.

        Returns
        -------
        value : float
            What `verdicts` reads, in the dimension's ``measured_unit``: by default the
            measured change within the clip.
        confounds : dict of str to float
            What differs from the source besides the target, by name, as `Engine.confounds`
            gives them.
        """
        return dimensions.get(row["category"]).measure(clip, ref).change, confounds(clip, ref, None)

    def verdicts(
        self, measured: Sequence[tuple[Mapping[str, Any], float]]
    ) -> list[tuple[int, float, str]]:
        """Verdicts of measured rows (row, `measure`'s value) of this format: (index into
        `measured`, change, verdict), in the order to report them.

        Parameters
        ----------
        measured : sequence of (Mapping, float)
            Each row of this format with the value `measure` gave it.

        Returns
        -------
        list of (int, float, str)
            One per row: its index into `measured`, the change the verdict reads (in
            ``measured_unit``) and the verdict ("verified", "inaudible" or "disagrees"). By
            default each row on its own, by `verdict`.
        """
        return [
            (i, value, verdict(row["direction"], value, dimensions.get(row["category"]).SPEC))
            for i, (row, value) in enumerate(measured)
        ]

    # -- asking

    def asks(self, variant: str) -> bool:
        """Whether its items can be asked with this prompt variant.

        Parameters
        ----------
        variant : str
            A prompt variant's name.

        Returns
        -------
        bool
            True where `variants` is None or lists it.
        """
        return self.variants is None or variant in self.variants

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        """The question about `category` in this format and `variant` (one it `asks`), of a
        sound of `kind` (`vocalgrad.signal.kinds`). A format whose question names two
        dimensions takes the other as a keyword, ``second`` (the row's ``second_category``,
        `vocalgrad.questions.prompts.second_of`).

        Parameters
        ----------
        category : str
            The dimension asked about.
        variant : Variant
            The prompt variant (its name, question template, instruction and options).
        kind : str
            The kind of sound (a row's ``source_kind``).

        Returns
        -------
        Wording
            The question, the instruction, the answer words in the order offered and the
            label each means.

        Raises
        ------
        NotImplementedError
            The format declares no wording (every format must).
        ConfigError
            An implementation's refusal: the variant cannot word this dimension or kind.
        """
        raise NotImplementedError(f"format {self.name!r} declares no wording")

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The ideal observer's signed statistic for one item (> 0: "increase").

        Parameters
        ----------
        observer : Observer
            The observer (rate, rows, the held-value measure, references).
        asked : Asked
            The item as the observer hears it: dimension, audio, source, row.

        Returns
        -------
        float
            The evidence, in the dimension's evidence units.

        Raises
        ------
        NotImplementedError
            The format declares no evidence (every format must).
        """
        raise NotImplementedError(f"format {self.name!r} declares no ideal-observer evidence")

    # -- added for the ladder's two-dimension rungs (members with defaults, at the end)

    def planned(self, conditions: list[Condition]) -> tuple[list[Condition], list[dict]]:
        """The conditions a build renders, from those planned per dimension: a two-dimension
        format pairs them here (`Condition.also`). Default: as planned.

        Parameters
        ----------
        conditions : list of Condition
            Those planned per dimension (both directions of every tier and curve, and
            constants where `constants`).

        Returns
        -------
        tuple of (list of Condition, list of dict)
            The conditions to render, and what was refused (rows of the build report's
            ``refused_conditions``: category, tier, magnitude, reason).
        """
        return conditions, []

    def cue_partners(self, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The other dimensions whose target cues are target cues of these rows too (the
        audit leaves them out): those a question asks about beside its ``category``.
        Default: none.

        Parameters
        ----------
        rows : sequence of Mapping
            The dataset rows of one category audited together.

        Returns
        -------
        tuple of str
            The other dimensions' names.
        """
        return ()


def checked(declared: object) -> QuestionFormat:
    """A declared format (an instance, or a module holding one as ``FORMAT``), checked against
    the contract.

    Why: the registry calls it on every built-in and plug-in format, so a broken plug-in is
    refused by name at load time, not halfway through a build.

    Parameters
    ----------
    declared : object
        A `QuestionFormat` instance, or a module with one as ``FORMAT``.

    Returns
    -------
    QuestionFormat
        The format.

    Raises
    ------
    TypeError
        It is not a `QuestionFormat`, or lacks a name, texts or audit families.
    """
    fmt = getattr(declared, "FORMAT", declared)
    if not isinstance(fmt, QuestionFormat):
        raise TypeError(f"{declared!r}: a question format is a QuestionFormat instance")
    for member in ("name", "summary", "card_note", "audit_families"):
        if not getattr(fmt, member, None):
            raise TypeError(f"question format {fmt!r} lacks {member}")
    if "|" in fmt.name or not fmt.name.strip():
        raise TypeError(f"question format name {fmt.name!r}: a non-empty name without '|'")
    return fmt

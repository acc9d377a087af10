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

if TYPE_CHECKING:
    from vocalgrad.stimuli.plan import Condition

Assembled = tuple[np.ndarray, float, list[tuple[int, int]], list[int]]
"""(audio, rove dB, [(start, end) sample of each part's slot], [samples padded before each
part]): what `Engine.assemble` returns."""

HELD = "held"
"""The curve of a held format's conditions: the parameter has no course over time."""


@dataclass(frozen=True)
class ClipResult:
    """One rendered clip, measured: what a format's `render` returns to the build.

    Samples are the 16-bit values written (float32 in [-1, 1)), times in seconds, levels in
    dB; ``measured`` is in the dimension's ``measured_unit``."""

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
        return self.verdict == "verified"


class Wording(NamedTuple):
    """One question as a listener reads it: the question line, the instruction line, the
    answer words in the order offered, and the label (increase / decrease / ...) each word
    means."""

    question: str
    instruction: str
    options: tuple[str, ...]
    labels: tuple[str, ...]


@dataclass(frozen=True)
class Asked:
    """One item as the ideal observer hears it (`QuestionFormat.evidence`)."""

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
        """What a clip's roves are drawn from (a twin pair shares it)."""
        ...

    def roved(self, condition: Condition, key: str) -> Condition:
        """The condition with its endpoint or parameter rove applied."""
        ...

    def unlimited(self, condition: Condition, item: str) -> Any:
        """A changing clip rendered along its track, levelled, floored and roved, before its
        peak limit (the input of `finish`)."""
        ...

    def finish(self, unlimited: Any, gain: float) -> ClipResult:
        """An `unlimited` clip at `gain`, quantised and measured against the source."""
        ...

    def held(self, condition: Condition, value: float) -> tuple[np.ndarray, SpeechSpan]:
        """The source with the parameter held at `value` over the whole clip, levelled,
        without floor or rove, and its speech span."""
        ...

    def assemble(
        self, parts: list[np.ndarray], rove_key: str, gap_s: float = 0.0, source_edges: bool = False
    ) -> Assembled:
        """One file from levelled parts, `gap_s` s of room tone between them: (audio, rove
        dB, [(start, end) sample of each part's slot], [samples padded before each part])."""
        ...

    def to_file(self, audio: np.ndarray, gain: float | None = None) -> np.ndarray:
        """The 16-bit samples written: scaled by `gain`, or by the clip's own peak limit."""
        ...

    def measure(
        self, category: str, audio: np.ndarray, span: SpeechSpan
    ) -> tuple[Analysis, Measured]:
        """A clip or a part against the heard source, by the dimension's own measure."""
        ...

    def confounds(self, clip: Analysis, clip_mid_s: float | None = None) -> dict[str, float]:
        """What differs between the clip and the heard source besides the target."""
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
        one rove. `named` is the layer whose measure `finish` reports; `windows` confines a
        layer's change to a stretch of the speech span (fractions of it, start and end), held
        before and after."""
        ...


Confounds = Callable[[Analysis, Analysis, "float | None"], dict[str, float]]
"""``confounds(clip, ref, clip_mid_s)``: `vocalgrad.stimuli.confounds.measure_confounds`."""


class Observer(Protocol):
    """The ideal observer as a format's `evidence` sees it
    (`vocalgrad.listeners.baselines.IdealObserver`)."""

    sample_rate: int
    rows: Mapping[str, Mapping[str, Any]]  # item id -> dataset row, every split
    memo: dict  # what a format computed from the dataset once, by format name

    def held(self, category: str, clip: np.ndarray, ref: np.ndarray) -> float:
        """Where a held clip lies on the dimension, relative to its source."""
        ...

    def reference(self, source_id: str) -> np.ndarray:
        """A source's reference audio at `sample_rate`."""
        ...


def verdict(direction: str, change: float, spec: DimensionSpec) -> str:
    """The label check every format's verification ends in. verified: the measured change has
    the label's sign and clears the audibility floor; inaudible: a changing clip whose realised
    change is under the floor (refused, counted); disagrees: anything else (the wrong sign, or
    a constant clip that moves).

    Parameters
    ----------
    direction
        The label: "increase", "decrease" or "constant".
    change
        The measured change, in the dimension's ``measured_unit``.
    spec
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


def attribute_name(category: str) -> str:
    """The words a question uses for a dimension: its ``QUESTION.attribute``, else its name
    with underscores as spaces (the published wording)."""
    return dimensions.get(category).QUESTION.attribute or category.replace("_", " ")


def two_words(question: str, up: str, down: str, variant: str) -> Wording:
    """A question answered by one of two words, `up` meaning increase and `down` decrease; the
    "swapped" variant offers them in the other order, in the question and the instruction."""
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
    ref
        The heard source.
    category
        The dimension.
    audio
        The samples, ``(n,)`` or ``(n, channels)``, at ``ref.sr`` Hz.
    span
        Their speech span, seconds from the first sample.

    Returns
    -------
    tuple
        (the samples as an `Analysis`, the measured start and end values).
    """
    clip = Analysis(audio, ref.sr, span=span)
    return clip, dimensions.get(category).measure(clip, ref)


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
    answers_by_direction
        Where an answer names none of the answer words, the direction lexicon reads it ("it
        got louder" answers "higher or lower?"). False where the words are not directions
        (same or different, one dimension or the other): "it rises" would be read as the
        first word.
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
    answers_by_direction: ClassVar[bool] = True

    def __repr__(self) -> str:
        return f"<question format {self.name!r}>"

    # -- planning

    @property
    def key_suffix(self) -> str:
        """What a condition key ends in, so the same cell in two formats has two item ids."""
        return f"|{self.name}" if self.tagged else ""

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        """The curves its conditions are planned with, given the config's. A held format has
        one: the parameter does not move."""
        return (HELD,)

    # -- building

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """One clip of `condition` from the engine's source.

        Parameters
        ----------
        engine
            The prepared source and the engine's steps.
        condition
            What to render (category, direction, start and end values, ...).
        item
            The clip's item id (its random draws derive from it).
        twin_item
            The item id of the same pair's other direction, where it is planned.

        Returns
        -------
        ClipResult
            The 16-bit samples, measured, with its verdict ("pending" if `settle` gives it).
        """
        raise NotImplementedError(f"format {self.name!r} declares no render")

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The fields it adds to a dataset row (after ``format``); `pair_id` is an opaque id
        the two directions of a pair share."""
        return {}

    def settle(self, rows: list[dict]) -> None:
        """Give the rows of one source the verdicts that need more than one clip (in place).
        Rows without ``file_name`` are refusals or failures."""

    # -- verification

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """What `vocalgrad verify` measures of one row's audio against its heard source: the
        value its verdict reads (in ``measured_unit``) and the confounds."""
        return dimensions.get(row["category"]).measure(clip, ref).change, confounds(clip, ref, None)

    def verdicts(
        self, measured: Sequence[tuple[Mapping[str, Any], float]]
    ) -> list[tuple[int, float, str]]:
        """Verdicts of measured rows (row, `measure`'s value) of this format: (index into
        `measured`, change, verdict), in the order to report them."""
        return [
            (i, value, verdict(row["direction"], value, dimensions.get(row["category"]).SPEC))
            for i, (row, value) in enumerate(measured)
        ]

    # -- asking

    def asks(self, variant: str) -> bool:
        """Whether its items can be asked with this prompt variant."""
        return self.variants is None or variant in self.variants

    def wording(self, category: str, variant: Variant) -> Wording:
        """The question about `category` in this format and `variant` (one it `asks`). A
        format whose question names two dimensions takes the other as a keyword, ``second``
        (the row's ``second_category``, `vocalgrad.questions.prompts.second_of`)."""
        raise NotImplementedError(f"format {self.name!r} declares no wording")

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The ideal observer's signed statistic for one item (> 0: "increase").

        Parameters
        ----------
        observer
            The observer (rate, rows, the held-value measure, references).
        asked
            The item as the observer hears it: dimension, audio, source, row.

        Returns
        -------
        float
            The evidence, in the dimension's evidence units.
        """
        raise NotImplementedError(f"format {self.name!r} declares no ideal-observer evidence")

    # -- added for the ladder's two-dimension rungs (members with defaults, at the end)

    def planned(self, conditions: list[Condition]) -> tuple[list[Condition], list[dict]]:
        """The conditions a build renders, from those planned per dimension (both directions
        of every tier and curve, and constants where `constants`), and what it refused (rows
        of the build report's ``refused_conditions``: category, tier, magnitude, reason): a
        two-dimension format pairs them here (`Condition.also`). Default: as planned."""
        return conditions, []

    def cue_partners(self, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """The other dimensions whose target cues are target cues of these rows too (the
        audit leaves them out): those a question asks about beside its ``category``.
        Default: none."""
        return ()


def checked(declared: object) -> QuestionFormat:
    """A declared format (an instance, or a module holding one as ``FORMAT``), checked against
    the contract.

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

"""What the two-dimension formats (`which`, `together`, `sequence`) share: which pairs of
dimensions one clip may carry and in what order they are rendered, the conditions that pair
them, and both dimensions' courses measured against their own labels.

A clip carries two dimensions only where each one's measure still reads its own course with
the other one applied, so both labels are verified by measurement: a dimension's module
declares the dimensions that may be rendered onto it and why (``pairs_with``), and the pairs it
refuses with the measured reason (``not_paired_with``). Every other pair is refused too, and
a build asked for one says so in its report.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.ndimage import uniform_filter1d

from vocalgrad import dimensions
from vocalgrad.audio import FRAME_S, SpeechSpan, k_weighted_frame_power, peak_gain
from vocalgrad.dimensions.base import Measured
from vocalgrad.errors import ConfigError
from vocalgrad.formats.base import EDGES, ClipResult, QuestionFormat, measure_against, verdict
from vocalgrad.records import LABELS
from vocalgrad.signal.analysis import Analysis

if TYPE_CHECKING:
    from vocalgrad.formats.base import Engine
    from vocalgrad.stimuli.plan import Condition


@dataclass(frozen=True)
class Pairing:
    """Two dimensions one clip may carry: `first` is rendered first, `second` onto it."""

    first: str
    second: str
    why: str


def pairing(a: str, b: str) -> Pairing | None:
    """How dimensions `a` and `b` share a clip, where either declares it (``pairs_with`` in
    its module: that dimension's process first, the other's onto it), else None."""
    for first, second in ((a, b), (b, a)):
        why = dimensions.get(first).pairs_with.get(second)
        if why:
            return Pairing(first, second, why)
    return None


def refusal(a: str, b: str) -> str:
    """Why dimensions `a` and `b` cannot share a clip: the reason either declares
    (``not_paired_with``), else that neither declares a pairing."""
    for x, y in ((a, b), (b, a)):
        why = dimensions.get(x).not_paired_with.get(y)
        if why:
            return why
    return (
        "neither dimension declares that its measure reads its own course with the other "
        f"applied (declared pairs: {allowed_text()})"
    )


def declared_pairs() -> list[Pairing]:
    """Every pairing the registered dimensions declare."""
    return [
        Pairing(dim.name, other, why)
        for dim in dimensions.bound()
        for other, why in dim.pairs_with.items()
    ]


def allowed_text() -> str:
    """The declared pairs, as text ("first then second")."""
    return ", ".join(f"{p.first} then {p.second}" for p in declared_pairs()) or "none"


# -- planning


def paired_conditions(
    conditions: Sequence[Condition],
    fmt: str,
    ordered: bool,
    refuse: Callable[[Pairing], str | None] | None = None,
) -> tuple[list[Condition], list[dict]]:
    """Every allowed pair of the planned dimensions, in every combination of both
    directions, tier by tier and curve by curve (the named dimension's condition with the
    other's as `Condition.also`), and the refused pairs (`refused_conditions` rows).

    Parameters
    ----------
    conditions
        The conditions planned per dimension (both directions of every tier and curve).
    fmt
        The format's name (for the error).
    ordered
        Both orders of a pair are planned (a question names one of the two): `which`. Else
        each pair once, named by the dimension planned first.
    refuse
        Why this format cannot ask a declared pair, or None (default: it asks every one).

    Returns
    -------
    tuple
        (the paired conditions, the refused pairs).

    Raises
    ------
    ConfigError
        No planned pair can be combined.
    """
    by_cell: dict[tuple[str, str, str, str], Condition] = {}
    categories: list[str] = []
    for c in conditions:
        if c.direction in LABELS:
            by_cell[(c.category, c.tier, c.curve, c.direction)] = c
            if c.category not in categories:
                categories.append(c.category)
    out: list[Condition] = []
    refused: list[dict] = []
    combos = itertools.permutations if ordered else itertools.combinations
    for a, b in combos(categories, 2):
        both = pairing(a, b)
        reason = refusal(a, b) if both is None else (refuse(both) if refuse else None)
        if reason:
            if ordered and categories.index(a) > categories.index(b):
                continue  # refused once per pair
            refused.append(
                {"category": f"{a}+{b}", "tier": "every tier", "magnitude": 0.0, "reason": reason}
            )
            continue
        for (category, tier, curve, _), named in by_cell.items():
            if category != a:
                continue
            for other in LABELS:
                partner = by_cell.get((b, tier, curve, other))
                if partner is not None:
                    out.append(dataclasses.replace(named, also=partner))
    if not out:
        reasons = "; ".join(f"{r['category']}: {r['reason']}" for r in refused) or (
            "it needs two dimensions"
        )
        raise ConfigError(
            f"the {fmt} format asks about two dimensions in one clip, and no pair of "
            f"{', '.join(categories)} can be combined ({reasons}); declared pairs: "
            f"{allowed_text()}"
        )
    return out, refused


# -- rendering


def layers(condition: Condition) -> tuple[list[Condition], int]:
    """The clip's conditions in the order they are rendered (`Pairing`), and the index of
    the named one."""
    assert condition.also is not None
    declared = pairing(condition.category, condition.also.category)
    assert declared is not None, "planned only where a pairing is declared"
    both = {condition.category: condition, condition.also.category: condition.also}
    order = [both[declared.first], both[declared.second]]
    return order, [c.category for c in order].index(condition.category)


Measure = Callable[[str, np.ndarray, SpeechSpan], Measured]
"""``measure(category, audio, span)``: a dimension's own measure of the clip against the
heard source."""


def render_pair(
    engine: Engine,
    condition: Condition,
    item: str,
    twin_item: str | None,
    judge: Callable[[Condition, ClipResult, Analysis, str], ClipResult],
    windows: Callable[[Condition, str], Mapping[str, tuple[float, float]]] | None = None,
) -> ClipResult:
    """A two-dimension clip, peak-limited by one gain with its twin (the same layers with the
    named direction flipped, rendered at once and left in `engine.twins`, as a gradual pair
    is), then judged by the format (`judge`: both courses measured, the verdict set).

    Parameters
    ----------
    engine
        The stimulus engine.
    condition
        The named dimension's condition, the other's as ``also``.
    item, twin_item
        The clip's and its twin's item ids.
    judge
        ``judge(condition, clip, heard, item)``: the clip with its verdict and fields, both
        courses measured against the heard source.
    windows
        ``windows(condition, item)``: the stretch of the speech span each dimension's change
        is confined to (fractions), by category; default: the whole span.

    Returns
    -------
    ClipResult
        The named dimension's clip result, judged.
    """
    if (item, twin_item) in engine.twins:
        return engine.twins.pop((item, twin_item))

    def unlimited(c: Condition, i: str) -> Any:
        order, named = layers(c)
        confined = windows(c, i) if windows is not None else {}
        return engine.layered(order, i, named, [confined.get(x.category) for x in order])

    heard = engine.heard
    mine = unlimited(condition, item)
    if twin_item is None:
        return judge(condition, engine.finish(mine, peak_gain(mine.audio)), heard, item)
    twin = condition.twin()
    other = unlimited(twin, twin_item)
    gain = peak_gain(mine.audio, other.audio)
    engine.twins[(twin_item, item)] = judge(twin, engine.finish(other, gain), heard, twin_item)
    return judge(condition, engine.finish(mine, gain), heard, item)


# -- measuring


LEVEL_WINDOW_S = 0.4  # the momentary-loudness window the flattening follows
LEVEL_SMOOTHING_S = 0.2
LEVEL_ACTIVE_DB = 30.0


def flattened(audio: np.ndarray, sr: int) -> np.ndarray:
    """The clip with its slow level course flattened: a gain, smooth over 200 ms, that sets
    its momentary loudness (400 ms) on the frames within 30 dB of the loudest to their
    median, held across pauses. What a dimension whose target is not level is measured on
    where the other dimension of the clip is a level change: the sources' own slow level
    course is flattened when they are prepared, so this takes out the other dimension's gain,
    not the speech's. Mono or (n, channels) float samples at `sr` Hz."""
    mono = audio.mean(axis=1) if audio.ndim == 2 else audio
    power = k_weighted_frame_power(mono, sr)
    momentary = uniform_filter1d(
        power, max(1, int(round(LEVEL_WINDOW_S / FRAME_S))), mode="nearest"
    )
    active = momentary > momentary.max() * 10 ** (-LEVEL_ACTIVE_DB / 10)
    if not active.any():
        return audio
    gain_db = np.full(len(momentary), np.nan)
    gain_db[active] = 10 * np.log10(np.median(momentary[active]) / momentary[active])
    index = np.arange(len(momentary))
    gain_db = np.interp(index, index[active], gain_db[active])
    gain_db = uniform_filter1d(
        gain_db, max(1, int(round(LEVEL_SMOOTHING_S / FRAME_S))), mode="nearest"
    )
    factor = np.interp(np.arange(len(mono)) / sr, (index + 0.5) * FRAME_S, 10 ** (gain_db / 20))
    if audio.ndim == 2:
        factor = factor[:, None]
    return (audio * factor).astype(np.float32)


def as_heard(
    category: str, other: str, clip: np.ndarray, ref: np.ndarray, sr: int
) -> tuple[np.ndarray, np.ndarray]:
    """A clip and its source as the ideal observer compares them on `category`: both with
    their slow level course flattened where `other` changes level (`needs_flattening`), so
    the two level courses are alike (the source's own is flattened when it is prepared, not
    exactly flat); as they are otherwise. Float samples at `sr` Hz."""
    if not needs_flattening(category, (other,)):
        return clip, ref
    return flattened(clip, sr), flattened(ref, sr)


def needs_flattening(category: str, others: Iterable[str]) -> bool:
    """Whether `category` is measured on the flattened clip (`flattened`): its target is not
    level, and another dimension of the clip changes level."""
    return dimensions.get(category).SPEC.loudness_neutral and any(
        not dimensions.get(o).SPEC.loudness_neutral for o in others
    )


@dataclass(frozen=True)
class Course:
    """One dimension's course in a two-dimension clip, measured against its own label."""

    category: str
    direction: str
    measured: Measured
    change: float
    verdict: str


def course(
    measure: Measure,
    category: str,
    direction: str,
    other: str,
    audio: np.ndarray,
    sr: int,
    span: SpeechSpan,
) -> Course:
    """One dimension's course over the whole speech span, by its own measure (on the
    flattened clip where the other dimension changes level), and its verdict."""
    heard = flattened(audio, sr) if needs_flattening(category, (other,)) else audio
    measured = measure(category, heard, span)
    spec = dimensions.get(category).SPEC
    return Course(
        category, direction, measured, measured.change, verdict(direction, measured.change, spec)
    )


def clip_courses(condition: Condition, clip: ClipResult, heard: Analysis) -> tuple[Course, Course]:
    """A rendered clip's two courses, each against the direction it was made with.

    Parameters
    ----------
    condition : Condition
        The named dimension's condition; ``condition.also`` is the other dimension's.
    clip : ClipResult
        The rendered clip (samples at ``clip.clip.sr`` Hz, its speech span).
    heard : Analysis
        The source as heard, which each dimension's measure reads the clip against.

    Returns
    -------
    tuple of (Course, Course)
        The named dimension's course, then the other's.
    """
    assert condition.also is not None
    measure, other = measure_with(heard), condition.also.category
    audio, sr, span = clip.audio, clip.clip.sr, clip.clip.span
    named = course(measure, condition.category, condition.direction, other, audio, sr, span)
    second = course(measure, other, condition.also.direction, condition.category, audio, sr, span)
    return named, second


def row_courses(
    row: Mapping[str, Any], clip: Analysis, ref: Analysis, direction: str
) -> tuple[Course, Course]:
    """A dataset row's two courses, measured on its clip as verification reads it.

    Parameters
    ----------
    row : mapping
        The row: ``category``, ``second_category`` and ``second_direction``.
    clip : Analysis
        The clip as read from its file.
    ref : Analysis
        The source as heard.
    direction : str
        The direction the named dimension was made with (a row field that differs by
        format: the label itself, or ``change_direction``).

    Returns
    -------
    tuple of (Course, Course)
        The named dimension's course, then the other's.
    """
    measure = measure_with(ref)
    audio, span, sr = samples(clip), clip.span, clip.sr
    category, other = row["category"], row["second_category"]
    named = course(measure, category, direction, other, audio, sr, span)
    second = course(measure, other, row["second_direction"], category, audio, sr, span)
    return named, second


def require_second(fmt: str, second: str | None) -> str:
    """The other dimension a two-dimension question names, or a clear error.

    Parameters
    ----------
    fmt : str
        The format asking (for the message).
    second : str or None
        The row's ``second_category``.

    Returns
    -------
    str
        `second`, present.

    Raises
    ------
    ConfigError
        It is missing.
    """
    if not second:
        raise ConfigError(
            f"{fmt} items name two dimensions: the question needs the row's second_category"
        )
    return second


def combined(slot: str, named: Course, courses: Sequence[Course]) -> tuple[float, str]:
    """The verdict of a two-dimension clip from its courses, and the value `verdict` reads
    as that same verdict for the row's label (`slot`): verified only where every course is;
    disagrees where any course disagrees (NaN), else inaudible where any is (0.0). So the
    contract's one-value verification (`QuestionFormat.measure`, `verdicts`) checks both."""
    results = [c.verdict for c in courses]
    if "disagrees" in results:
        return float("nan"), "disagrees"
    if "inaudible" in results:
        return 0.0, "inaudible"
    floor = dimensions.get(named.category).SPEC.audibility_floor
    size = max(abs(named.change), floor)
    return (size if slot == "increase" else -size), "verified"


def judged(
    clip: ClipResult, value: float, result: str, fields: Mapping[str, Any], measured: Measured
) -> ClipResult:
    """A clip result with its combined verdict, the named dimension's measure as its course
    read it, and the fields its format measured."""
    return dataclasses.replace(
        clip, measured=measured, change=value, verdict=result, extra=dict(fields)
    )


def second_fields(condition: Condition, second: Course, track_ends: tuple[float, float]) -> dict:
    """The row fields of the other dimension: its name and direction, its realised parameter
    at the speech's ends and its own measure."""
    assert condition.also is not None
    return {
        "second_category": condition.also.category,
        "second_direction": condition.also.direction,
        "second_magnitude": condition.also.magnitude,
        "second_param_start": round(track_ends[0], 6),
        "second_param_end": round(track_ends[1], 6),
        "second_measured_start": round(second.measured.start, 4),
        "second_measured_end": round(second.measured.end, 4),
        "second_measured_change": round(second.change, 4),
        "second_verdict": second.verdict,
    }


def measure_with(ref: Analysis) -> Measure:
    """Each dimension's own measure against the heard source `ref` (`measure_against`): what
    both the build and `vocalgrad verify` read a clip's courses with."""

    def measure(category: str, audio: np.ndarray, span: SpeechSpan) -> Measured:
        return measure_against(ref, category, audio, span)[1]

    return measure


def samples(clip: Analysis) -> np.ndarray:
    """A verifier's clip as samples (both channels where it has two)."""
    return clip.channels if clip.channels.shape[1] > 1 else clip.audio


# what `with_span` analyses again: the analyses that read the speech span
SPAN_DEPENDENT = frozenset({"span", "f0", "median_f0", "level_slope_db"})


def with_span(signal: Analysis, span: SpeechSpan) -> Analysis:
    """The same analysed signal with another speech span (a half of the speech), sharing
    every analysis computed so far that does not read the span, and `cache` (so the memos a
    measure keeps of the source, e.g. a level dimension's edge-matched source, stay those of
    its whole span: measure the whole span first)."""
    out = Analysis.__new__(Analysis)
    out.__dict__.update({k: v for k, v in signal.__dict__.items() if k not in SPAN_DEPENDENT})
    out.__dict__["span"] = span
    return out


def halves(span: SpeechSpan) -> dict[str, SpeechSpan]:
    """The two halves of a speech span, cut at its midpoint."""
    mid = (span.onset_s + span.offset_s) / 2
    return {
        "first": SpeechSpan(span.onset_s, mid, True),
        "second": SpeechSpan(mid, span.offset_s, True),
    }


def half_measures(
    ref: Analysis, category: str, audio: np.ndarray, span: SpeechSpan
) -> tuple[Measured, dict[str, Measured]]:
    """A dimension's own measure of a clip over its whole speech span, and over each half of
    it (the clip and the source read over the same half)."""
    dim = dimensions.get(category)
    clip = ref.like(audio, span=span)
    whole = dim.measure(clip, ref)  # first: the source's memos are made for its own span
    return whole, {
        half: dim.measure(with_span(clip, part), with_span(ref, part))
        for half, part in halves(span).items()
    }


class AtOnce(QuestionFormat):
    """What the formats share whose two dimensions change together over one clip (`which`,
    `together`): every tier and curve asked, the allowed pairs planned with all four
    combinations of both directions, each clip rendered by `render_pair` and judged by the
    format's own ``_judge``.

    Why: the two formats differ only in what they ask and how they read the two courses.

    Attributes
    ----------
    ordered : bool
        Each pair planned in both orders (each dimension named once: `which`), or once,
        named by the dimension planned first (`together`).
    """

    ordered: bool = True
    changes_over_time = True
    variants = ("default", "swapped")
    # every cue of a clip and its edges
    audit_families = ("global", *EDGES)

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return tuple(curves)

    def planned(self, conditions: list[Condition]) -> tuple[list[Condition], list[dict]]:
        """The allowed pairs (`paired_conditions`), the four combinations of both directions
        per tier and curve.

        Parameters
        ----------
        conditions : list of Condition
            The one-dimension conditions planned for the build.

        Returns
        -------
        tuple of (list of Condition, list of dict)
            The paired conditions, and what was refused and why.
        """
        return paired_conditions(conditions, self.name, ordered=self.ordered)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """Both dimensions along their tracks in one clip (`pairing` gives the order),
        peak-limited with its twin (the first dimension's direction flipped).

        Parameters
        ----------
        engine : Engine
            Renders and measures for one source.
        condition : Condition
            The named dimension's condition; ``condition.also`` the other's.
        item, twin_item : str, str or None
            The clip's item id and its twin's.

        Returns
        -------
        ClipResult
            The clip, judged by the format's ``_judge``.
        """
        return render_pair(engine, condition, item, twin_item, self._judge)

    def _judge(
        self, condition: Condition, clip: ClipResult, heard: Analysis, item: str
    ) -> ClipResult:
        raise NotImplementedError

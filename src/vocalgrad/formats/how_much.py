"""The "how much" format (magnitude): two parts of the same source in one file, room tone between
them, each changing the same way, one by more than the other, asked "In which part does the
<attribute> change more, first or second?"."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import SpeechSpan
from vocalgrad.dimensions.base import Measured
from vocalgrad.formats import base
from vocalgrad.formats.base import (
    EDGES,
    FALL,
    RISE,
    ClipResult,
    QuestionFormat,
    Rung,
    attribute_name,
    change_sign,
    path_of,
    two_words,
    verdict,
)
from vocalgrad.formats.comparison import confound_difference, part_mid, part_span, shifted
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Engine, Observer, Variant, Wording
    from vocalgrad.stimuli.plan import Condition

GAP_S = 0.5  # room tone between the two parts, as in the comparison format
QUESTION = "In which part does the {attribute} change more, first or second?"
OPTIONS = ("first", "second")  # "first" = the first part changes more = increase
RATIO = 1 / 3  # the smaller change, as a share of the larger, on the dimension's scale


def smaller(category: str, start: float, end: float) -> tuple[float, float]:
    """The smaller change of a pair: RATIO of the larger one's span on the dimension's scale,
    about the same middle and the same way, so both parts average the same value.

    Parameters
    ----------
    category
        The dimension.
    start, end
        The larger change's start and end values, in the dimension's unit.

    Returns
    -------
    tuple
        (start, end) of the smaller change.
    """
    log = dimensions.get(category).SPEC.scale == "log"
    a, b = (np.log(start), np.log(end)) if log else (start, end)
    mid, half = (a + b) / 2, (b - a) / 2 * RATIO
    lo, hi = mid - half, mid + half
    return (float(np.exp(lo)), float(np.exp(hi))) if log else (float(lo), float(hi))


def part_key(key: str, which: str) -> str:
    """The item id a part is rendered (and roved) from: the pair's rove key and which part
    (`larger` or `smaller`), so both orders hold the same two parts."""
    return hashlib.sha256(f"{key}|{which}".encode()).hexdigest()[:16]


def magnitude_difference(row: Mapping[str, Any], changes: Sequence[float], floor: float) -> float:
    """The first part's measured change minus the second's, along the row's way of change:
    > 0 where the first changes more. NaN where a part audibly changes the other way (the
    question's premise, both change the same way, fails)."""
    first, second = (change_sign(row) * c for c in changes)
    if not (np.isfinite(first) and np.isfinite(second)) or min(first, second) <= -floor:
        return float("nan")
    return first - second


class HowMuch(QuestionFormat):
    name = "how_much"
    summary = "two parts changing the same way, the first or the second by more (first = increase)"
    card_note = (
        "two parts of the same source in one file, 0.5 s of room tone between them (the "
        "comparison format's layout: `part_bounds`, `part_spans_s`, `gap_s`), each changing "
        "linearly the same way (`change_direction`; both ways are built, `curve` rise or "
        "fall), one over the tier's change and the other over a third of it on the "
        "dimension's scale, about the same middle value. Label `increase` = the first part "
        "changes more (`answer` first), `decrease` = the second; both orders of every pair "
        "are built. Verification measures each part's change against the source "
        "(`part_changes`): the first's minus the second's along the way of change "
        "(`measured_change`) must clear the audibility floor with the label's sign, and "
        "neither part may audibly change the other way; `measured_start` is the first part's "
        "start, `measured_end` the second part's end"
    )
    marker = "X"
    symbol = "✖"
    order = 5
    changes_over_time = True
    # played backwards, the parts swap places and each changes the other way: the part that
    # changes more comes second
    reversible = True
    audit_families = (
        "global",
        *EDGES,
        "parts",
        "position",
    )
    warp_target_families = EDGES
    # played backwards, a larger rise first is a larger fall second: both are built
    order_free_gated = True
    rungs = (Rung("how_much", 5),)
    answers_by_direction = False
    level_target_families = ("position",)
    blind_change_answers = False  # the file's course says the way of change, not how much

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return (RISE, FALL)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """Two parts, the larger change and the smaller, rendered once per pair (each from
        its own part key, roved apart) and levelled together; this item's order of them, with
        GAP_S of room tone between. The twin is the same parts in the other order, so it
        gets the same peak limit alone."""
        spec = dimensions.get(condition.category).SPEC
        key = engine.rove_key(condition, item)
        start, end = path_of(condition)
        larger = dataclasses.replace(condition, start=start, end=end)
        low, high = smaller(condition.category, start, end)
        less = dataclasses.replace(larger, start=low, end=high)
        keys = {which: part_key(key, which) for which in ("larger", "smaller")}
        roved = [engine.roved(larger, keys["larger"]), engine.roved(less, keys["smaller"])]
        members = [(c, keys[w], _linear) for c, w in zip(roved, ("larger", "smaller"), strict=True)]
        parts = engine.changing(members)
        if condition.direction != "increase":  # the second part changes more
            parts = parts[::-1]
        rove_db = engine.level_rove_db(condition, key)
        audio, bounds, leads = engine.assemble(
            [p for p, _ in parts],
            rove_db,
            GAP_S,
            source_edges=spec.source_edges,
        )
        audio = engine.to_file(audio)
        in_slot = [
            shifted(span, lead / engine.sr) for (_, span), lead in zip(parts, leads, strict=True)
        ]
        clips, measures = [], []
        for (a, b), span in zip(bounds, in_slot, strict=True):
            clip, measured = engine.measure(condition.category, audio[a:b], span)
            clips.append(clip)
            measures.append(measured)
        row = {"change_direction": "increase" if condition.curve == RISE else "decrease"}
        changes = [m.change for m in measures]
        change = magnitude_difference(row, changes, spec.audibility_floor)
        spans = tuple(
            part_span(bound, span, engine.sr) for bound, span in zip(bounds, in_slot, strict=True)
        )
        whole = engine.analysis(audio, SpeechSpan(spans[0][0], spans[1][1], True))
        first, second = (engine.confounds(c, part_mid(c)) for c in clips)
        ordered = roved if condition.direction == "increase" else roved[::-1]
        return ClipResult(
            audio=audio,
            clip=whole,
            measured=Measured(measures[0].start, measures[1].end),
            change=change,
            verdict=verdict(condition.direction, change, spec),
            confounds=confound_difference(first, second),
            param_start=ordered[0].start,
            param_end=ordered[1].end,
            rove_db=rove_db,
            parts=tuple(bounds),
            part_spans=spans,
            extra={"changes": changes, "paths": [[c.start, c.end] for c in ordered]},
        )

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The pair id, the answer word, the way of change, the part layout (as the
        comparison format writes it), each part's parameter path and measured change."""
        return {
            "pair_id": pair_id,
            "answer": OPTIONS[0] if condition.direction == "increase" else OPTIONS[1],
            "change_direction": "increase" if condition.curve == RISE else "decrease",
            "part_bounds": [list(b) for b in clip.parts],
            "part_spans_s": [[round(a, 5), round(b, 5)] for a, b in clip.part_spans],
            "gap_s": GAP_S,
            "part_paths": [[round(v, 6) for v in path] for path in clip.extra["paths"]],
            "part_changes": [round(float(c), 4) for c in clip.extra["changes"]],
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """The first part's change minus the second's along the row's way of change
        (`magnitude_difference`), each part measured alone against the source; confounds:
        second minus first."""
        changes, confs = [], []
        samples = clip.channels if clip.channels.shape[1] > 1 else clip.audio
        for (a, b), (onset, offset) in zip(row["part_bounds"], row["part_spans_s"], strict=True):
            span = SpeechSpan(onset - a / clip.sr, offset - a / clip.sr, True)
            part, measured = base.measure_against(ref, row["category"], samples[a:b], span)
            changes.append(measured.change)
            confs.append(confounds(part, ref, part_mid(part)))
        floor = dimensions.get(row["category"]).SPEC.audibility_floor
        return magnitude_difference(row, changes, floor), confound_difference(*confs)

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        up, down = OPTIONS
        return two_words(
            QUESTION.format(attribute=attribute_name(category, kind)), up, down, variant.name
        )

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """How much more the first part changes than the second: the size of the dimension's
        own evidence in each part (the gap cut out), first minus second; played backwards,
        the parts are mirrored and in the other order. It reads no way of change."""
        clip, dim = asked.clip, dimensions.get(asked.category)
        scale = observer.sample_rate / asked.row["sample_rate"]
        bounds = [(round(a * scale), round(b * scale)) for a, b in asked.row["part_bounds"]]
        if asked.reversed_:
            bounds = [(len(clip) - b, len(clip) - a) for a, b in reversed(bounds)]
        first, second = (
            abs(float(dim.evidence(clip[a:b], asked.ref, observer.sample_rate))) for a, b in bounds
        )
        return first - second


def _linear(u: np.ndarray) -> np.ndarray:
    """A part's course: linear from its start value to its end value over the speech."""
    return u


FORMAT = HowMuch()

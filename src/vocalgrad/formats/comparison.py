"""The comparison format: two parts of the same source, the parameter held within each at the
two endpoints of the gradual condition, room tone between them, asked whether the second part
is higher or lower than the first."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vocalgrad import dimensions
from vocalgrad.audio import SpeechSpan
from vocalgrad.dimensions.base import Measured, held_value
from vocalgrad.formats import base
from vocalgrad.formats.base import EDGES, ClipResult, QuestionFormat, Rung, two_words, verdict
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Engine, Observer, Variant, Wording
    from vocalgrad.stimuli.plan import Condition

GAP_S = 0.5  # room tone between the two parts
QUESTION = "Is the {attribute} higher or lower in the second part than in the first?"
OPTIONS = ("higher", "lower")  # "higher" = the second part is higher = increase


def part_span(bound: tuple[int, int], span: SpeechSpan, sr: int) -> tuple[float, float]:
    """A part's speech span in file time, seconds."""
    return bound[0] / sr + span.onset_s, bound[0] / sr + span.offset_s


def shifted(span: SpeechSpan, by_s: float) -> SpeechSpan:
    """A speech span moved later by `by_s` seconds (a part padded before its speech)."""
    return dataclasses.replace(span, onset_s=span.onset_s + by_s, offset_s=span.offset_s + by_s)


def part_mid(part: Analysis) -> float:
    """Where the source's speech midpoint lies in a held part, seconds: the middle of its
    speech span (a held rate moves it uniformly)."""
    return (part.span.onset_s + part.span.offset_s) / 2


def confound_difference(first: dict[str, float], second: dict[str, float]) -> dict[str, float]:
    """What differs between the two parts besides the target: second minus first."""
    return {k: round(float(second[k] - first[k]), 4) for k in first}


class Comparison(QuestionFormat):
    name = "comparison"
    summary = "two held parts, the second higher or lower than the first"
    card_note = (
        "two parts of the same source, the parameter held within each at the two "
        "endpoints of the gradual condition, 0.5 s of room tone between them, in one file "
        "(`part_bounds`: start and end sample of each part, both the same length, a shorter "
        "part padded on the side that faces the gap; `part_spans_s`: each part's speech). "
        "Label `increase` = the second part is higher; both orders of every pair are built, "
        "and verification measures each part against the source (`measured_start`, "
        "`measured_end` = first and second part, `measured_change` = second minus first)"
    )
    marker = "s"
    symbol = "□"
    order = 1
    # played backwards, the parts swap places: the label flips
    reversible = True
    # A comparison item's whole-file summaries hold both parts in either order, and its part
    # layout must tell nothing.
    audit_families = (
        "global",
        *EDGES,
        "parts",
    )
    # a held rate sets how long a part's speech lasts, so what follows the second part's
    # speech (the file's trailing edge) measures it
    warp_target_families = EDGES
    order_free_gated = True
    rungs = (Rung("comparison", 2),)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """Two held parts, at the condition's start and end values, with GAP_S of room tone
        between them. Verified by measuring each part against the source: the second part's
        value minus the first's is the measured change, checked like a gradual clip's. The
        twin is the same parts in the other order, so it gets the same peak limit alone."""
        spec = dimensions.get(condition.category).SPEC
        key = engine.rove_key(condition, item)
        condition = engine.roved(condition, key)
        held = [engine.held(condition, v) for v in (condition.start, condition.end)]
        rove_db = engine.level_rove_db(condition, key)
        audio, bounds, leads = engine.assemble(
            [p for p, _ in held],
            rove_db,
            GAP_S,
            source_edges=spec.source_edges,
        )
        audio = engine.to_file(audio)
        in_slot = [
            shifted(span, lead / engine.sr) for (_, span), lead in zip(held, leads, strict=True)
        ]
        clips, measures = [], []
        for (a, b), span in zip(bounds, in_slot, strict=True):
            clip, measured = engine.measure(condition.category, audio[a:b], span)
            clips.append(clip)
            measures.append(held_value(measured))
        measured = Measured(*measures)
        spans = tuple(
            part_span(bound, span, engine.sr) for bound, span in zip(bounds, in_slot, strict=True)
        )
        whole = engine.analysis(audio, SpeechSpan(spans[0][0], spans[1][1], True))
        first, second = (engine.confounds(c, part_mid(c)) for c in clips)
        return ClipResult(
            audio=audio,
            clip=whole,
            measured=measured,
            change=measured.change,
            verdict=verdict(condition.direction, measured.change, spec),
            confounds=confound_difference(first, second),
            param_start=condition.start,
            param_end=condition.end,
            rove_db=rove_db,
            parts=tuple(bounds),
            part_spans=spans,
        )

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The pair id, the part layout in samples and each part's speech span (as speech
        spans are written), and the gap."""
        return {
            "pair_id": pair_id,
            "part_bounds": [list(b) for b in clip.parts],
            "part_spans_s": [[round(a, 5), round(b, 5)] for a, b in clip.part_spans],
            "gap_s": GAP_S,
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """The second part's held value minus the first's, each part measured alone against
        the source (a stereo part keeps both ears); confounds: second minus first."""
        values, confs = [], []
        samples = clip.channels if clip.channels.shape[1] > 1 else clip.audio
        for (a, b), (onset, offset) in zip(row["part_bounds"], row["part_spans_s"], strict=True):
            span = SpeechSpan(onset - a / clip.sr, offset - a / clip.sr, True)
            part, measured = base.measure_against(ref, row["category"], samples[a:b], span)
            values.append(held_value(measured))
            confs.append(confounds(part, ref, part_mid(part)))
        return values[1] - values[0], confound_difference(*confs)

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        up, down = OPTIONS
        return two_words(
            QUESTION.format(attribute=base.attribute_name(category, kind)), up, down, variant.name
        )

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The second part's held value minus the first's (the gap cut out); played
        backwards, the parts are mirrored and in the other order."""
        clip = asked.clip
        scale = observer.sample_rate / asked.row["sample_rate"]
        bounds = [(round(a * scale), round(b * scale)) for a, b in asked.row["part_bounds"]]
        if asked.reversed_:
            bounds = [(len(clip) - b, len(clip) - a) for a, b in reversed(bounds)]
        first, second = (observer.held(asked.category, clip[a:b], asked.ref) for a, b in bounds)
        return second - first


FORMAT = Comparison()

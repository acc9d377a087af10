"""The contour format (shape): one clip whose parameter rises then falls (a peak) or falls then
rises (a dip), turning near the middle of the speech, asked "Does the <attribute> rise then
fall (a peak), or fall then rise (a dip)?"."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import peak_gain
from vocalgrad.formats.base import (
    EDGES,
    HALVES,
    ClipResult,
    Course,
    QuestionFormat,
    Rung,
    Wording,
    attribute_name,
    measure_windows,
    source_median,
    verdict,
    window_evidence,
    windows_of,
)
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Engine, Observer, Variant
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.plan import Condition

CURVE = "contour"
QUESTION = "Does the {attribute} rise then fall (a peak), or fall then rise (a dip)?"
SWAPPED = "Does the {attribute} fall then rise (a dip), or rise then fall (a peak)?"
OPTIONS = ("peak", "dip")  # "peak" = rises then falls = increase
TURN = (0.4, 0.6)  # where the contour turns, as a fraction of the speech span


def turn_at(item: str) -> float:
    """Where one clip's contour turns, a fraction of the speech span drawn uniformly within
    TURN from the item id alone."""
    return float(np.random.default_rng([int(item, 16), 29]).uniform(*TURN))


def turn_course(turn: float) -> Course:
    """A raised-cosine hump from the start value (0) to the end value (1) at `turn` and back
    (0) at the offset. Each limb is half a cosine period, so the course averages 0.5 over
    the span wherever it turns: a peak and a dip between the same values average the same."""

    def course(u: np.ndarray) -> np.ndarray:
        phase = np.where(u <= turn, 0.5 * u / turn, 0.5 + 0.5 * (u - turn) / (1 - turn))
        return 0.5 - 0.5 * np.cos(2 * np.pi * phase)

    return course


def contour_change(halves: Sequence[float], floor: float) -> float:
    """The measured contour: > 0 a peak, < 0 a dip, its size the smaller of its two limbs
    (each half's measured change, `measure_windows`). 0.0 where neither limb turns and both
    halves are under the floor (nothing is heard: refused as inaudible); NaN where the
    clip audibly goes one way only (neither a peak nor a dip: it disagrees with both
    answers)."""
    first, second = halves
    if not (math.isfinite(first) and math.isfinite(second)):
        return float("nan")
    peak, dip = min(first, -second), min(-first, second)
    if peak > 0:
        return float(peak)
    if dip > 0:
        return float(-dip)
    return 0.0 if max(abs(first), abs(second)) < floor else float("nan")


class Contour(QuestionFormat):
    name = "contour"
    summary = "one clip that rises then falls, or falls then rises (peak = increase)"
    card_note = (
        "one clip whose parameter goes from one endpoint of the tier's change to the other "
        "and back (raised-cosine limbs), turning at a point drawn per clip within 40-60% of "
        "the speech span (`turn_at`). Label `increase` = a peak (rises then falls, `answer` "
        "peak), `decrease` = a dip; the twin (`pair_id`) is the same change the other way "
        "round. Each track is centred as a gradual clip's is, so a peak and its dip have the "
        "same time-average of the parameter. Verification measures each half of the speech "
        "with the dimension's own measure (`measured_halves`); the smaller of the two limbs, "
        "signed (+ a peak, - a dip; `measured_change`), must clear the audibility floor "
        "with the label's sign. Played backwards a contour keeps its shape: no time-reversed "
        "control"
    )
    marker = "h"
    symbol = "⬡"
    order = 8
    changes_over_time = True
    # played backwards, a peak is a peak
    reversible = False
    # Its whole-clip summaries must not tell a peak from a dip (the parameter's time-average is
    # the same), nor its edges, nor where the energy and onsets lie beyond the target
    audit_families = (
        "global",
        *EDGES,
        "position",
    )
    warp_target_families = ("position",)
    # A peak played backwards is a peak: statistics that ignore the order of time may read the
    # shape itself (loud at the ends), so the order-free family is reported, not gated
    order_free_gated = False
    rungs = (Rung("contour", 8),)
    answers_by_direction = False
    level_target_families = ("position",)
    blind_change_answers = False  # the clip starts and ends at one value

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return (CURVE,)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """The clip and its twin (the other shape between the same values), each levelled to
        the source's loudness, one peak limit for both; the twin's result waits in
        `engine.twins`."""
        if (item, twin_item) in engine.twins:
            return engine.twins.pop((item, twin_item))
        key = engine.rove_key(condition, item)
        members = [(item, engine.roved(condition, key))]
        if twin_item is not None:
            members.append((twin_item, engine.roved(condition.twin(), key)))
        turns = [turn_at(it) for it, _ in members]
        # each levelled alone: a peak of level and its dip hold it at different moments of the
        # speech, and levelled together the one whose loud stretch meets louder speech would be
        # louder as a whole
        rendered = []
        for (it, c), t in zip(members, turns, strict=True):
            course = turn_course(t)
            audio, span = engine.changing([(c, it, course)])[0]
            rendered.append((engine.level_along(c.category, audio, span, course), span))
        edges = dimensions.get(condition.category).SPEC.source_edges
        rove_db = engine.level_rove_db(condition, key)
        assembled = [
            engine.assemble([audio], rove_db, source_edges=edges)[0] for audio, _ in rendered
        ]
        gain = peak_gain(*assembled)
        spec = dimensions.get(condition.category).SPEC
        results = []
        for (_, c), t, (_, span), audio in zip(members, turns, rendered, assembled, strict=True):
            audio = engine.to_file(audio, gain)
            clip, whole, halves = engine.measure_windows(c.category, audio, span, HALVES)
            changes = [h.change for h in halves]
            change = contour_change(changes, spec.audibility_floor)
            results.append(
                ClipResult(
                    audio=audio,
                    clip=clip,
                    measured=whole,
                    change=change,
                    verdict=verdict(c.direction, change, spec),
                    confounds=engine.confounds(clip),
                    param_start=c.start,
                    param_end=c.start,
                    rove_db=rove_db,
                    extra={"turn": t, "halves": changes, "extreme": c.end},
                )
            )
        if twin_item is not None:
            engine.twins[(twin_item, item)] = results[1]
        return results[0]

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The pair id, the answer word, where the contour turns, the value it turns at and
        each half's measured change."""
        return {
            "pair_id": pair_id,
            "answer": OPTIONS[0] if condition.direction == "increase" else OPTIONS[1],
            "turn_at": round(clip.extra["turn"], 4),
            "param_turn": round(float(clip.extra["extreme"]), 6),
            "measured_halves": [round(float(h), 4) for h in clip.extra["halves"]],
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """The contour's smaller limb, signed (`contour_change`), each half measured by the
        dimension's own measure."""
        _, halves = measure_windows(ref, row["category"], clip, HALVES)
        floor = dimensions.get(row["category"]).SPEC.audibility_floor
        return contour_change([h.change for h in halves], floor), confounds(clip, ref, None)

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        """Both shapes named and described; the "swapped" variant names the dip first."""
        attribute = attribute_name(category, kind)
        words, labels = OPTIONS, ("increase", "decrease")
        question = QUESTION
        if variant.name == "swapped":
            words, labels, question = words[::-1], labels[::-1], SWAPPED
        return Wording(
            question.format(attribute=attribute),
            f'Answer with only one word: "{words[0]}" or "{words[1]}".',
            words,
            labels,
        )

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The dimension's own evidence over the first half of the speech minus that over the
        second: rising then falling gives > 0. Halves, not inner thirds: on syllables around
        long consonants an inner third holds too few voiced frames (docs/results.md, "The
        ladder"). Where level is the target, less its median over the source's clips
        (`source_median`: the source's ends, whose level courses such a dimension matches once
        more, read alike in every clip of it, peak or dip). Played backwards, a peak's windows
        swap and each turns the other way: it stays a peak."""
        sr = observer.sample_rate
        dim = dimensions.get(asked.category)

        def reading(item: Asked) -> np.ndarray:
            first, second = window_evidence(dim.evidence, windows_of(item, sr, HALVES), sr)
            return np.array([first - second])

        value = float(reading(asked)[0])
        if not dim.SPEC.loudness_neutral:  # see `source_median`
            value -= float(source_median(observer, asked, self.name, reading)[0])
        return value if np.isfinite(value) else 0.0  # no reading: no evidence either way


FORMAT = Contour()

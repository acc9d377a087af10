"""The together format (co-variation): two dimensions change at once in one clip, asked
"Do the {a} and the {b} move in the same direction?" (answers "same" = increase, "different"
= decrease).

A listener must follow both courses and compare them: every (source, pair) carries all four
combinations of the two directions, so either dimension's course alone is at chance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from vocalgrad import dimensions
from vocalgrad.formats import _two
from vocalgrad.formats.base import (
    ClipResult,
    Rung,
    attribute_name,
    two_words,
)
from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Observer, Variant, Wording
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.plan import Condition

QUESTION = "Do the {a} and the {b} move in the same direction?"
OPTIONS = ("same", "different")  # "same" = increase


def slot(direction: str, second_direction: str) -> str:
    """The label of a clip whose dimensions move `direction` and `second_direction`:
    increase (the "same" answer) where they agree."""
    return LABELS[0] if direction == second_direction else LABELS[1]


class Together(_two.AtOnce):
    name = "together"
    summary = "two dimensions change at once; do they move in the same direction?"
    card_note = (
        "one clip in which two dimensions change at once over the speech span, asked "
        '"Do the {a} and the {b} move in the same direction?": `increase` = "same" (both '
        'increase or both decrease), `decrease` = "different" (`answer` holds the word). '
        "`category` is {a} and `change_direction` its direction, `second_category` is {b} and "
        "`second_direction` its direction; every source carries all four combinations for "
        "each pair, so either course alone says nothing about the label. Verification "
        "measures both courses against their own directions (`measured_start`, "
        "`measured_end`: {a}; `second_measured_*`: {b}); `measured_change` is {a}'s change "
        "signed by the label where both agree. Pairs a clip may carry: "
        "those a dimension's module declares (`pairs_with`; the ladder page lists them), the "
        "first rendered first"
    )
    marker = "X"
    symbol = "✖"
    order = 7  # listed in ladder order: after which (6)
    # played backwards both courses reverse, so whether they agree does not change: no
    # time-reversed control flips the label
    reversible = False
    # whether two courses agree survives playing the clip backwards, so a statistic that is
    # unchanged by it (how level and pitch co-vary over the file) may read the label by
    # measuring the target: the order-free family is reported, not gated
    order_free_gated = False
    rungs = (Rung("together", 7),)
    ordered = False  # each pair once, named by the dimension planned first

    def cue_partners(self, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Both courses are asked about: the other dimension's target cues are targets."""
        return tuple(sorted({r["second_category"] for r in rows if r.get("second_category")}))

    def _judge(
        self, condition: Condition, clip: ClipResult, heard: Analysis, item: str
    ) -> ClipResult:
        assert condition.also is not None
        other = condition.also.category
        first, second = _two.clip_courses(condition, clip, heard)
        label = slot(condition.direction, condition.also.direction)
        value, result = _two.combined(label, first, (first, second))
        fields = _two.second_fields(condition, second, clip.extra["param_ends"][other])
        return _two.judged(clip, value, result, fields, first.measured)

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The label (same = increase) and its word, the first dimension's own direction, and
        the other dimension (name, direction, realised parameter, its own measure)."""
        assert condition.also is not None
        label = slot(condition.direction, condition.also.direction)
        return {
            "direction": label,
            "answer": OPTIONS[LABELS.index(label)],
            "change_direction": condition.direction,
            "pair_id": pair_id,
            **{k: v for k, v in clip.extra.items() if k != "param_ends"},
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """Both courses against their own directions; the value reads as the combined
        verdict for the label (`vocalgrad.formats._two.combined`)."""
        first, second = _two.row_courses(row, clip, ref, row["change_direction"])
        value, _ = _two.combined(row["direction"], first, (first, second))
        return value, confounds(clip, ref, None)

    def wording(
        self, category: str, variant: Variant, kind: str = SPEECH, second: str | None = None
    ) -> Wording:
        """ "Do the {a} and the {b} move in the same direction?", both dimensions worded for
        the kind of sound; "same" is the `increase` slot."""
        second = _two.require_second(self.name, second)
        question = QUESTION.format(a=attribute_name(category, kind), b=attribute_name(second, kind))
        return two_words(question, *OPTIONS, variant.name)

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The product of both dimensions' own evidence of a change along the clip (each read
        on the clip and source flattened where the other changes level, `_two.as_heard`):
        positive where they agree."""
        other = asked.row["second_category"]
        sr = observer.sample_rate
        out = 1.0
        for category, partner in ((asked.category, other), (other, asked.category)):
            clip, ref = _two.as_heard(category, partner, asked.clip, asked.ref, sr)
            out *= float(dimensions.get(category).evidence(clip, ref, sr))
        return out


FORMAT = Together()

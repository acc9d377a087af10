"""The which format (selective attention): two dimensions change at once in one clip,
congruent (both up or both down) or incongruent (pitch rises while loudness falls), and the
question names one: "Does the {attribute} increase or decrease?".

Every (source, pair, named dimension) carries all four combinations of the two directions, so
the other dimension's course says nothing about the named one's label. Congruent minus
incongruent accuracy, paired by source, is the interference effect
(`vocalgrad.evaluation.ladder.interference`): which dimension a listener confuses with which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from vocalgrad import dimensions
from vocalgrad.formats import _two
from vocalgrad.formats.base import (
    ClipResult,
    Rung,
    attribute_name,
    two_words,
)
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Observer, Variant, Wording
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.plan import Condition

QUESTION = "Does the {attribute} increase or decrease?"
OPTIONS = ("increase", "decrease")


class Which(_two.AtOnce):
    name = "which"
    summary = "two dimensions change at once; the question names one (selective attention)"
    card_note = (
        "one clip in which two dimensions change at once over the speech span, congruent "
        "(both increase or both decrease) or incongruent, asked about one of them: "
        '"Does the {attribute} increase or decrease?" (`increase` = increase). `category` is '
        "the dimension asked about, `second_category` the other one and `second_direction` "
        "its direction; every source carries all four combinations of both directions for "
        "each pair and named dimension, so the other dimension's course says nothing about "
        "the label. Verification measures both dimensions' courses against their labels "
        "(`measured_*` the named one, `second_measured_*` the other); a clip is kept only "
        "where both agree. Pairs a clip may carry: "
        "those a dimension's module declares (`pairs_with`; the ladder page lists them), the "
        "first rendered first"
    )
    marker = "P"
    symbol = "✚"
    order = 6  # listed in ladder order: after how_much (5)
    # played backwards, both dimensions' changes reverse: the named label flips
    reversible = True
    # the other dimension's cues are not the target, and by construction they cannot tell
    # the named dimension's label
    order_free_gated = True
    rungs = (Rung("which", 6),)
    ordered = True  # each dimension of a pair named once

    def _judge(
        self, condition: Condition, clip: ClipResult, heard: Analysis, item: str
    ) -> ClipResult:
        assert condition.also is not None
        other = condition.also.category
        named, second = _two.clip_courses(condition, clip, heard)
        value, result = _two.combined(condition.direction, named, (named, second))
        ends = clip.extra["param_ends"][other]
        fields = _two.second_fields(condition, second, ends)
        return _two.judged(clip, value, result, fields, named.measured)

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The answer word, the other dimension (name, direction, realised parameter, its own
        measure) and whether the two move the same way."""
        assert condition.also is not None
        return {
            "pair_id": pair_id,
            "answer": condition.direction,
            **{k: v for k, v in clip.extra.items() if k != "param_ends"},
            "congruent": condition.direction == condition.also.direction,
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """Both dimensions' courses against their labels, each by its own measure; the value
        is the named one's change where both agree (`vocalgrad.formats._two.combined`)."""
        named, second = _two.row_courses(row, clip, ref, row["direction"])
        value, _ = _two.combined(row["direction"], named, (named, second))
        return value, confounds(clip, ref, None)

    def wording(
        self, category: str, variant: Variant, kind: str = SPEECH, second: str | None = None
    ) -> Wording:
        """The named dimension's question, worded for the kind of sound; the other one is
        not named (`second` is accepted and left out)."""
        up, down = OPTIONS
        return two_words(
            QUESTION.format(attribute=attribute_name(category, kind)), up, down, variant.name
        )

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The named dimension's own evidence of a change along the clip, read on the clip
        and source flattened where the other dimension changes level (`_two.as_heard`)."""
        sr = observer.sample_rate
        clip, ref = _two.as_heard(
            asked.category, asked.row["second_category"], asked.clip, asked.ref, sr
        )
        return float(dimensions.get(asked.category).evidence(clip, ref, sr))


FORMAT = Which()

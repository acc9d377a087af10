"""The gradual format (the published one): one clip whose parameter changes over the speech
span, asked "Does the <attribute> increase or decrease over time?"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vocalgrad import dimensions
from vocalgrad.audio import peak_gain
from vocalgrad.errors import ConfigError
from vocalgrad.formats.base import EDGES, QuestionFormat, Rung, Wording, attribute_name
from vocalgrad.records import CONSTANT
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, ClipResult, Engine, Observer, Variant
    from vocalgrad.stimuli.plan import Condition


class Gradual(QuestionFormat):
    name = "gradual"
    summary = "one clip in which the dimension changes over time (the published format)"
    card_note = (
        "one clip whose parameter changes over the speech span; "
        '"Does the {attribute} increase or decrease over time?"'
    )
    marker = "o"
    symbol = "○"
    order = 0
    tagged = False  # its keys, item ids and listener names are those from before formats
    constants = True
    changes_over_time = True
    reversible = True
    variants = None  # every prompt variant
    # every cue of a clip and its edges
    audit_families = ("global", *EDGES)
    warp_target_families = ()
    order_free_gated = True
    # asked whether anything changes (the "vary" variant, against the constant clips), then
    # which way; last, the same clips behind one text step (`vocalgrad.questions.reasoning`'s
    # variants), measured against direction on the same items
    rungs = (
        Rung("detection", 0, ("vary",)),
        Rung("direction", 1),
        Rung("reasoning", 10, ("mapped", "negated", "conditional"), against="direction"),
    )

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return tuple(curves)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """One clip along the condition's track. A changing clip given its twin's item id
        (the same source and pair, the other direction) is peak-limited by one gain with its
        twin: both are rendered, and the twin's result waits in `engine.twins` until it is
        asked for. Limited alone, the clip whose loud burst passed the ceiling would come out
        quieter than its twin, and overall loudness would tell the direction."""
        if (item, twin_item) in engine.twins:
            return engine.twins.pop((item, twin_item))
        mine = engine.unlimited(condition, item)
        if condition.direction == CONSTANT or twin_item is None:
            return engine.finish(mine, peak_gain(mine.audio))
        other = engine.unlimited(condition.twin(), twin_item)
        gain = peak_gain(mine.audio, other.audio)
        engine.twins[(twin_item, item)] = engine.finish(other, gain)
        return engine.finish(mine, gain)

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        """The variant's own question: its template with the dimension's words, or the
        dimension's paraphrase (which words a voice: speech only); its answer words mean its
        labels (the reasoning variants' "A" means increase), or are the labels."""
        if isinstance(variant.question, str):
            question = variant.question.format(attribute=attribute_name(category, kind))
        elif kind != SPEECH:
            raise ConfigError(
                f"prompt variant {variant.name!r} words a voice: it asks about speech, not "
                f"{kind}; use 'default' or 'clip'"
            )
        elif category in variant.question.table():
            question = variant.question.table()[category]
        else:
            raise ConfigError(
                f"prompt variant {variant.name!r} exists only for "
                f"{', '.join(variant.question.table())}, not {category!r}; use 'default' or "
                "'clip' for this dimension"
            )
        return Wording(
            question, variant.instruction, variant.options, variant.labels or variant.options
        )

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The dimension's own evidence of a change along the clip (`Dimension.evidence`)."""
        return float(
            dimensions.get(asked.category).evidence(asked.clip, asked.ref, observer.sample_rate)
        )


FORMAT = Gradual()

"""The sequence format (order): two dimensions change one after the other in one clip, one
in the first half of the speech and the other in the second, asked "Which changes first, the
{a} or the {b}?" (answers "{a}" = increase, "{b}" = decrease).

Each change lies at a roved position within its half, and goes up or down independently of
the order: every (source, pair) carries all eight combinations of the order and both
directions, so neither dimension's direction, nor whether they agree, tells the order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad import dimensions
from vocalgrad.formats import _two
from vocalgrad.formats.base import EDGES, ClipResult, QuestionFormat, Rung, Wording, attribute_name
from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.audio import SpeechSpan
    from vocalgrad.dimensions.base import Measured
    from vocalgrad.formats.base import Asked, Confounds, Engine, Observer, Variant
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.plan import Condition

QUESTION = "Which changes first, the {a} or the {b}?"
HALVES = ("first", "second")
# Where a change may lie: a stretch WIDTH of the speech span wide (drawn per clip), inside
# its half with MARGIN of the span kept free at both ends of the half.
WIDTH = (0.25, 0.4)
MARGIN = 0.03


def refused(pairing: _two.Pairing) -> str | None:
    """Why a declared pair cannot be asked in order: a dimension that warps time moves the
    other's change, and the speech, between the halves each half is measured over."""
    warps = [d for d in (pairing.first, pairing.second) if dimensions.get(d).SPEC.warps_time]
    if warps:
        return (
            f"{warps[0]} warps time, which moves the other change and the speech between the "
            "halves that verification measures apart"
        )
    return None


def other_half(half: str) -> str:
    """The half that is not `half`."""
    return HALVES[1 - HALVES.index(half)]


def change_windows(condition: Condition, item: str) -> dict[str, tuple[float, float]]:
    """Where each dimension's change lies, as fractions of the speech span: a stretch of
    width drawn from WIDTH, placed uniformly within its half (MARGIN kept free at the half's
    ends). Drawn from the item id, which derives from (seed, source, condition)."""
    assert condition.also is not None
    rng = np.random.default_rng([int(item, 16), 31])
    out = {}
    for c in (condition, condition.also):
        width = float(rng.uniform(*WIDTH))
        low = MARGIN if c.half == "first" else 0.5 + MARGIN
        high = 0.5 - MARGIN - width if c.half == "first" else 1.0 - MARGIN - width
        start = float(rng.uniform(low, high))
        out[c.category] = (round(start, 6), round(start + width, 6))
    return out


def half_course(
    ref: Analysis,
    category: str,
    direction: str,
    half: str,
    other: str,
    audio: np.ndarray,
    span: SpeechSpan,
) -> tuple[_two.Course, Measured, tuple[float, float]]:
    """One dimension's change in each half, by its own measure against the same half of the
    source (on the flattened clip where the other dimension changes level), and its verdict:
    verified where the change in its own half has the label's direction, clears the floor,
    and exceeds the change in the other half by the floor too (the change lies where the
    label says); inaudible where its own half's change is under the floor.

    Returns
    -------
    tuple
        (the course, its measure over the whole span, (first half's change, second half's)).
    """
    heard = _two.flattened(audio, ref.sr) if _two.needs_flattening(category, (other,)) else audio
    whole, parts = _two.half_measures(ref, category, heard, span)
    own, rest = parts[half].change, parts[other_half(half)].change
    spec = dimensions.get(category).SPEC
    signed = own if direction == "increase" else -own
    if not (np.isfinite(own) and np.isfinite(rest)):
        result = "disagrees"
    elif signed >= spec.audibility_floor and signed - abs(rest) >= spec.audibility_floor:
        result = "verified"
    elif abs(own) < spec.audibility_floor:
        result = "inaudible"
    else:
        result = "disagrees"
    changes = (parts["first"].change, parts["second"].change)
    return _two.Course(category, direction, parts[half], own, result), whole, changes


class SequenceFormat(QuestionFormat):
    name = "sequence"
    summary = "two dimensions change one after the other; which changes first?"
    card_note = (
        "one clip in which one dimension changes in the first half of the speech and the "
        "other in the second, each at a roved position within its half (`change_window`, "
        "`second_change_window`: fractions of the speech span) and up or down independently, "
        'asked "Which changes first, the {a} or the {b}?": `increase` = {a} first (`answer` '
        "names the dimension that changes first). `category` is {a} (`half`: where it "
        "changes, `change_direction`: which way), `second_category` {b}. Every source "
        "carries all eight combinations of the order and both directions for each pair. "
        "Verification measures each dimension "
        "in both halves against the same half of the source (`half_changes`, "
        "`second_half_changes`: first, second): its change must lie in its own half, in its "
        "direction, clear of the floor and of the other half's change by the floor. Pairs: "
        "those the dimensions declare, less any with a time warp"
    )
    marker = "*"
    symbol = "✱"
    order = 9  # listed in ladder order: after contour (8)
    changes_over_time = True
    # played backwards, the change of the second half comes first: the label flips
    reversible = True
    variants = ("default", "swapped")
    audit_families = ("global", *EDGES)
    order_free_gated = True
    rungs = (Rung("sequence", 9),)

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return tuple(curves)

    def planned(self, conditions: list[Condition]) -> tuple[list[Condition], list[dict]]:
        """Each allowed pair once (named by the dimension planned first), the four
        combinations of both directions, each in both orders, per tier and curve."""
        paired, refusals = _two.paired_conditions(conditions, self.name, False, refused)
        out = []
        for c in paired:
            assert c.also is not None
            for half in HALVES:
                also = dataclasses.replace(c.also, half=other_half(half))
                out.append(dataclasses.replace(c, half=half, also=also))
        return out, refusals

    def cue_partners(self, rows: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
        """Both changes are asked about: the other dimension's target cues are targets."""
        return tuple(sorted({r["second_category"] for r in rows if r.get("second_category")}))

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """Both dimensions in one clip, each changing within its roved window
        (`change_windows`) and held before and after it, peak-limited with its twin."""
        return _two.render_pair(
            engine, condition, item, twin_item, self._judge, windows=change_windows
        )

    def _judge(
        self, condition: Condition, clip: ClipResult, heard: Analysis, item: str
    ) -> ClipResult:
        assert condition.also is not None
        other = condition.also.category
        audio, span = clip.audio, clip.clip.span
        first, _, first_halves = half_course(
            heard, condition.category, condition.direction, condition.half, other, audio, span
        )
        second, second_whole, second_halves = half_course(
            heard,
            other,
            condition.also.direction,
            condition.also.half,
            condition.category,
            audio,
            span,
        )
        label = LABELS[HALVES.index(condition.half)]
        value, result = _two.combined(label, first, (first, second))
        windows = change_windows(condition, item)
        course = _two.Course(
            other, condition.also.direction, second_whole, second_whole.change, second.verdict
        )
        fields = {
            **_two.second_fields(condition, course, clip.extra["param_ends"][other]),
            "change_window": list(windows[condition.category]),
            "second_change_window": list(windows[other]),
            "half_changes": [round(v, 4) for v in first_halves],
            "second_half_changes": [round(v, 4) for v in second_halves],
        }
        return _two.judged(clip, value, result, fields, clip.measured)

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        assert condition.also is not None
        label = LABELS[HALVES.index(condition.half)]
        return {
            "direction": label,
            # the dimension changing first, by name: the words asked depend on the kind of
            # sound (`attribute_name`), which the row's ``source_kind`` gives
            "answer": condition.category if label == LABELS[0] else condition.also.category,
            "change_direction": condition.direction,
            "half": condition.half,
            "pair_id": pair_id,
            **{k: v for k, v in clip.extra.items() if k != "param_ends"},
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """Each dimension in both halves against the same half of the source
        (`half_course`); the value reads as the combined verdict for the label."""
        audio, span = _two.samples(clip), clip.span
        category, other = row["category"], row["second_category"]
        half = row["half"]
        first, _, _ = half_course(ref, category, row["change_direction"], half, other, audio, span)
        second, _, _ = half_course(
            ref, other, row["second_direction"], other_half(half), category, audio, span
        )
        value, _ = _two.combined(row["direction"], first, (first, second))
        return value, confounds(clip, ref, None)

    def wording(
        self, category: str, variant: Variant, kind: str = SPEECH, second: str | None = None
    ) -> Wording:
        """ "Which changes first, the {a} or the {b}?": the answers are the two dimensions'
        words for the kind of sound, `category` first (the `increase` slot) unless swapped."""
        second = _two.require_second(self.name, second)
        a, b = attribute_name(category, kind), attribute_name(second, kind)
        words = (a, b) if variant.name != "swapped" else (b, a)
        labels = LABELS if variant.name != "swapped" else LABELS[::-1]
        question = QUESTION.format(a=words[0], b=words[1])
        return Wording(question, f'Answer with only "{words[0]}" or "{words[1]}".', words, labels)

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """How much of each dimension's own evidence of a change lies in the first half of
        the speech rather than the second (first / (first + second)), the named dimension's
        share minus the other's: positive where the named one changes first. Each half's
        evidence counts along the whole clip's way of change only (evidence the other way
        is no part of the change: a held half reads a few dB of level, or a few tenths of a
        semitone, either way) and is capped at the whole clip's (a held half's outliers, an
        F0 tracker's octave jumps at the utterance's end, cannot outweigh the change). The
        halves are the speech span's (mirrored in a reversed control)."""
        sr = observer.sample_rate
        row = asked.row
        onset, offset = float(row["speech_onset_s"]), float(row["speech_offset_s"])
        if asked.reversed_:
            duration = len(asked.clip) / sr
            onset, offset = duration - offset, duration - onset
        on, off = round(onset * sr), round(offset * sr)
        mid = (on + off) // 2
        other = row["second_category"]
        shares = []
        for category, partner in ((asked.category, other), (other, asked.category)):
            clip, ref = _two.as_heard(category, partner, asked.clip, asked.ref, sr)
            evidence = dimensions.get(category).evidence
            whole = float(evidence(clip, ref, sr))
            way = -1.0 if whole < 0 else 1.0  # read from the clip, not from its label
            first, second = (
                min(max(way * float(evidence(clip[a:b], ref[a:b], sr)), 0.0), abs(whole))
                for a, b in ((on, mid), (mid, off))
            )
            shares.append(first / max(first + second, 1e-12))
        return shares[0] - shares[1]


FORMAT = SequenceFormat()

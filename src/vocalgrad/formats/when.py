"""The "when" format (localisation): one clip whose parameter changes within a short window in
the first or the second half of the speech, held at its start value before and at its end
value after, asked "Does the <attribute> change early or late in the clip?"."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import peak_gain
from vocalgrad.formats.base import (
    EDGES,
    FALL,
    HALVES,
    RISE,
    SLIDING,
    ClipResult,
    Course,
    QuestionFormat,
    Rung,
    attribute_name,
    change_sign,
    measure_windows,
    path_of,
    source_median,
    two_words,
    verdict,
    window_evidence,
    windows_of,
)
from vocalgrad.signal.kinds import SPEECH

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Engine, Observer, Variant, Wording
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.plan import Condition

QUESTION = "Does the {attribute} change early or late in the clip?"
OPTIONS = ("early", "late")  # "early" = the change lies in the first half = increase
WIDTH = 0.15  # the change's window, as a fraction of the speech span
# Where an early change's window may lie (fractions of the span); a late one's mirrors it. Both
# keep a tenth of the span clear at the end they face, and the half's own head and tail
# windows (`measure_windows`' 20% of a half) clear of the change.
EARLY = (0.1, 0.4)


def change_window(item: str, early: bool) -> tuple[float, float]:
    """Where one clip's change lies, as fractions of the speech span: a window WIDTH wide drawn
    uniformly within EARLY (or its mirror image, for a late clip), from the item id alone.

    Parameters
    ----------
    item
        The clip's item id (hex).
    early
        The clip's change lies in the first half.

    Returns
    -------
    tuple
        (start, end) of the window, fractions of the speech span.
    """
    lo, hi = EARLY if early else (1 - EARLY[1], 1 - EARLY[0])
    start = float(np.random.default_rng([int(item, 16), 23]).uniform(lo, hi - WIDTH))
    return start, start + WIDTH


def window_course(window: tuple[float, float]) -> Course:
    """A raised-cosine step from start (0) to end value (1) within `window`: held before and
    after it, so the clip's ends are its twin's."""
    a, b = window

    def course(u: np.ndarray) -> np.ndarray:
        x = np.clip((u - a) / (b - a), 0.0, 1.0)
        return 0.5 - 0.5 * np.cos(np.pi * x)

    return course


HELD_SHARE = 1 / 3  # a held half may read up to this share of the other half's change


def position_change(row: Mapping[str, Any], halves: Sequence[float], floor: float) -> float:
    """Where the change lies, read from each half's measured change along the row's way of
    change (`change_sign`): the first half's minus the second's, > 0 where the change lies
    early. A half counts as holding the change where it reads it at or above the
    audibility floor while the other half reads as held (under the floor, or under
    HELD_SHARE of that change); where neither half does, where the change lies is not
    heard (0.0: the clip is refused as inaudible). Read from the halves alone, the
    reading needs no label. Why both halves: a word of two syllables around a long
    consonant, whose pitch change fell in the consonant, read tracker noise in both
    halves, and their difference alone verified such clips.

    Parameters
    ----------
    row : Mapping
        The row (its ``change_direction``).
    halves : sequence of float
        Each half's measured change, in the dimension's measured unit.
    floor : float
        The dimension's audibility floor, same unit.

    Returns
    -------
    float
        > 0 early, < 0 late, 0.0 where neither half alone holds the change.
    """
    first, second = (change_sign(row) * h for h in halves)
    for changed, held in ((first, second), (second, first)):
        if changed >= floor and abs(held) <= max(floor, HELD_SHARE * changed):
            return first - second
    return 0.0


class When(QuestionFormat):
    name = "when"
    summary = "one clip whose change lies early or late in the speech (early = increase)"
    card_note = (
        "one clip whose parameter holds its start value, changes within a window of 15% of "
        "the speech span (a raised cosine) and holds its end value after it; the window lies "
        "in the first half (`early`, label `increase`) or the second (`late`, label "
        "`decrease`), drawn per clip within 10-40% (or 60-90%) of the span (`change_window`). "
        "An early clip and its late twin (`pair_id`) share source, magnitude and way of "
        "change (`change_direction`; both ways are built, `curve` rise or fall), so their "
        "ends are the same. `answer`: the answer word. Verification measures each half of "
        "the speech with the dimension's own measure (`measured_halves`): the first half's "
        "change minus the second's, along the way of change (`measured_change`), must clear "
        "the audibility floor with the label's sign; `measured_start` and `measured_end` are "
        "the whole clip's"
    )
    marker = "P"
    symbol = "✚"
    order = 4
    changes_over_time = True  # one end of the clip holds the same value in both answers
    reversible = True  # played backwards, an early change lies late (and goes the other way)
    # its whole-clip and edge cues as a gradual clip's, and where in the speech the energy
    # and the onsets lie
    audit_families = (
        "global",
        *EDGES,
        "position",
    )
    # a warped rate sets the clip's length, and where its speech lies, by where it is fast
    warp_target_families = ("duration", "position")
    # played backwards, an early rise is a late fall: both are built, so no statistic that
    # ignores the order of time can tell early from late
    order_free_gated = True
    rungs = (Rung("when", 4),)
    answers_by_direction = False
    # where the level is the target, where in the speech the energy lies, and how loud the
    # clip is as a whole (its twins levelled together, the one that holds its louder value
    # longer is louder), follow where the change lies
    level_target_families = ("position", "global_loudness_lufs")
    blind_change_answers = False  # the clip's course says the way of change, not where

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return (RISE, FALL)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """The clip and its twin (the change in the other half), one peak limit for both:
        their ends hold the same values, and the twin's result waits in `engine.twins`."""
        if (item, twin_item) in engine.twins:
            return engine.twins.pop((item, twin_item))
        key = engine.rove_key(condition, item)
        start, end = path_of(condition)
        path = engine.roved(dataclasses.replace(condition, start=start, end=end), key)
        members = [(item, condition)]
        if twin_item is not None:
            members.append((twin_item, condition.twin()))
        edges = dimensions.get(condition.category).SPEC.source_edges
        windows = [change_window(it, cond.direction == "increase") for it, cond in members]
        rendered = engine.changing(
            [(path, it, window_course(w)) for (it, _), w in zip(members, windows, strict=True)],
            centred=False,  # the twins' ends hold the same values
        )
        rove_db = engine.level_rove_db(condition, key)
        made = []
        for (it, cond), window, (audio, span) in zip(members, windows, rendered, strict=True):
            assembled = engine.assemble([audio], rove_db, source_edges=edges)[0]
            made.append((it, cond, window, assembled, span))
        gain = peak_gain(*(m[3] for m in made))
        results = [self._finish(engine, path, *m[1:], rove_db, gain) for m in made]
        if twin_item is not None:
            engine.twins[(twin_item, item)] = results[1]
        return results[0]

    def _finish(
        self,
        engine: Engine,
        path: Condition,
        condition: Condition,
        window: tuple[float, float],
        assembled: np.ndarray,
        span,
        rove_db: float,
        gain: float,
    ) -> ClipResult:
        spec = dimensions.get(condition.category).SPEC
        audio = engine.to_file(assembled, gain)
        clip, whole, halves = engine.measure_windows(condition.category, audio, span, HALVES)
        row = {"change_direction": "increase" if condition.curve == RISE else "decrease"}
        change = position_change(row, [h.change for h in halves], spec.audibility_floor)
        return ClipResult(
            audio=audio,
            clip=clip,
            measured=whole,
            change=change,
            verdict=verdict(condition.direction, change, spec),
            confounds=engine.confounds(clip),
            param_start=path.start,
            param_end=path.end,
            rove_db=rove_db,
            extra={"window": window, "halves": [h.change for h in halves]},
        )

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The pair id, the answer word, the way of change, the change's window and each
        half's measured change."""
        window, halves = clip.extra["window"], clip.extra["halves"]
        return {
            "pair_id": pair_id,
            "answer": OPTIONS[0] if condition.direction == "increase" else OPTIONS[1],
            "change_direction": "increase" if condition.curve == RISE else "decrease",
            "change_window": [round(window[0], 4), round(window[1], 4)],
            "measured_halves": [round(float(h), 4) for h in halves],
        }

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """The first half's change minus the second's along the row's way of change
        (`position_change`), each half measured by the dimension's own measure."""
        _, halves = measure_windows(ref, row["category"], clip, HALVES)
        floor = dimensions.get(row["category"]).SPEC.audibility_floor
        return position_change(row, [h.change for h in halves], floor), confounds(clip, ref, None)

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        up, down = OPTIONS
        return two_words(
            QUESTION.format(attribute=attribute_name(category, kind)), up, down, variant.name
        )

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """Where the change lies: the centroid of the size of the dimension's own evidence
        in windows half the speech wide, a quarter apart (`SLIDING`), 0.5 minus the centroid
        (> 0: early). Where level is the target, each window's reading less its median over
        the source's clips (`source_median`: the source's ends, whose level courses such a
        dimension matches once more, read alike in every clip of it). It reads no label and
        no way of change."""
        sr = observer.sample_rate
        dim = dimensions.get(asked.category)

        def reading(item: Asked) -> np.ndarray:
            return window_evidence(dim.evidence, windows_of(item, sr, SLIDING), sr)

        readings = reading(asked)
        if not dim.SPEC.loudness_neutral:  # see `source_median`
            readings = readings - source_median(observer, asked, self.name, reading)
        sizes = np.abs(readings)
        sizes = np.where(np.isfinite(sizes), sizes, 0.0)
        if sizes.sum() <= 0:
            return 0.0
        centres = np.array([(a + b) / 2 for a, b in SLIDING])
        return float(0.5 - centres @ sizes / sizes.sum())


FORMAT = When()

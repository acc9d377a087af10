"""The recognition format: one clip held at one endpoint of the gradual condition, asked which
of two named categories it belongs to ("Is the voice pitch high or low?")."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import load_audio, peak_gain, resample
from vocalgrad.dimensions.base import held_value
from vocalgrad.formats.base import (
    EDGES,
    ClipResult,
    QuestionFormat,
    Rung,
    attribute_name,
    two_words,
    verdict,
)
from vocalgrad.signal.kinds import SPEECH, get_kind

if TYPE_CHECKING:
    from vocalgrad.formats.base import Asked, Confounds, Engine, Observer, Variant, Wording
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.plan import Condition


# what a recognition question judges in speech, said of another kind of sound by its noun
_VOICE_SUBJECTS = ("voice", "speaker", "speech")


def recognition_words(category: str, kind: str = SPEECH) -> tuple[str, str, str]:
    """(what is judged, the "increase" category, the "decrease" category) for one dimension:
    its ``QUESTION.recognition``, else (its attribute name, "high", "low"). For a sound that is
    not speech, a voice, speaker or the speech judged is the kind's noun ("Is the tone loud or
    quiet?"), and the speech attribute judged is the kind's attribute ("pitch of the tone")."""
    declared = dimensions.get(category).QUESTION.recognition
    if not declared:
        return attribute_name(category, kind), "high", "low"
    subject, up, down = declared
    if kind != SPEECH and subject in _VOICE_SUBJECTS:
        subject = get_kind(kind).noun
    elif kind != SPEECH and subject == attribute_name(category):
        subject = attribute_name(category, kind)
    return subject, up, down


def twin_verdict(
    category: str, direction: str, value: float, twin_value: float
) -> tuple[float, str]:
    """A recognition clip against its twin at the other endpoint (same source, same tier):
    its measured value minus the twin's must have the label's sign and clear the audibility
    floor. Relative to the twin, not to a fixed boundary: both endpoints of most dimensions
    lie on one side of the source (noise at two SNRs), so no source-relative value splits
    them; the pair does, without the rendering parameter.

    Parameters
    ----------
    category
        The dimension.
    direction
        The clip's label.
    value, twin_value
        The held values measured of the clip and of its twin, in ``measured_unit``.

    Returns
    -------
    tuple
        (change = value - twin_value, verdict).
    """
    change = value - twin_value
    return change, verdict(direction, change, dimensions.get(category).SPEC)


class Recognition(QuestionFormat):
    name = "recognition"
    summary = "one held clip to name as high or low"
    card_note = (
        "one clip held at one endpoint of the gradual condition, asked which of two "
        'named categories it belongs to ("Is the voice pitch high or low?"). Label `increase` = '
        "the endpoint an increase moves towards (high, loud, fast, noisy, reverberant, "
        "distorted, rough, clear, trembling), `decrease` = the other; both endpoints of every "
        "pair are built. Verification measures the clip against the source (`measured_value`) "
        "and requires it to differ from its twin at the other endpoint (`pair_id`) by the "
        "audibility floor, in the label's direction (`measured_change` = this clip minus its "
        "twin)"
    )
    marker = "^"
    symbol = "△"
    order = 2
    # played backwards, a held clip keeps its value: the label would not flip
    reversible = False
    rove_refusal = (
        "a recognition item asks where its one held value lies, so roving it would change the "
        "answer; use the gradual or comparison format"
    )
    # A recognition clip holds one value, so every whole-clip summary (level, centroid, F0,
    # size) measures the target: only its length and its edges are audited.
    audit_families = ("duration", *EDGES)
    # a held rate sets the clip's length
    warp_target_families = ("duration",)
    # which end of the change the clip holds is the question: any summary of the file
    # measures it, so the order-free family is reported, not gated (the same for every
    # dimension)
    order_free_gated = False
    rungs = (Rung("recognition", 3),)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        """One clip held at the condition's end value (the "increase" endpoint for an
        increase item, the other for its decrease twin), peak-limited by one gain with its
        twin (as a gradual pair is). Its verdict needs the twin (`settle`): "pending" until
        the build pairs them."""
        part, span = engine.held(condition, condition.end)
        twin_part, _ = engine.held(condition, condition.start)  # the twin's: it waits, memoised
        key = engine.rove_key(condition, item)
        edges = dimensions.get(condition.category).SPEC.source_edges
        rove_db = engine.level_rove_db(condition, key)
        audio = engine.assemble([part], rove_db, source_edges=edges)[0]
        twin_audio = engine.assemble([twin_part], rove_db, source_edges=edges)[0]
        audio = engine.to_file(audio, peak_gain(audio, twin_audio))  # one limit per pair
        clip, measured = engine.measure(condition.category, audio, span)
        return ClipResult(
            audio=audio,
            clip=clip,
            measured=measured,
            change=float("nan"),
            verdict="pending",
            confounds=engine.confounds(clip),
            param_start=condition.end,
            param_end=condition.end,
            rove_db=rove_db,
            value=held_value(measured),
        )

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        """The pair id its twin shares, and the measured held value."""
        return {"pair_id": pair_id, "measured_value": round(clip.value, 4)}

    def settle(self, rows: list[dict]) -> None:
        """Verdicts of recognition clips, each against its twin (`twin_verdict`). A clip whose
        twin is missing (pending from a killed run, or failed) stays "pending", i.e. is dropped
        with its pair. Both twins are always planned in one source task."""
        by_pair: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            if "file_name" in row:
                by_pair[row["pair_key"]].append(row)
        for pair in by_pair.values():
            if len(pair) != 2:
                continue
            for row, twin in ((pair[0], pair[1]), (pair[1], pair[0])):
                change, result = twin_verdict(
                    row["category"], row["direction"], row["measured_value"], twin["measured_value"]
                )
                row.update(
                    measured_change=round(change, 4), verdict=result, verified=result == "verified"
                )

    def measure(
        self, row: Mapping[str, Any], clip: Analysis, ref: Analysis, confounds: Confounds
    ) -> tuple[float, dict[str, float]]:
        """The clip's held value against the source (its verdict needs the twin)."""
        measured = dimensions.get(row["category"]).measure(clip, ref)
        return held_value(measured), confounds(clip, ref, None)

    def verdicts(
        self, measured: Sequence[tuple[Mapping[str, Any], float]]
    ) -> list[tuple[int, float, str]]:
        """Each clip against its twin (same source and `pair_id`); a clip whose twin is not
        among the rows (left out of the dataset, or cut off by a limit) disagrees: there is
        nothing to compare it with. Reported pair by pair."""
        pairs: dict[tuple, list[int]] = defaultdict(list)
        for i, (row, _) in enumerate(measured):
            pairs[(row["source_id"], row["pair_id"])].append(i)
        out = []
        for members in pairs.values():
            for i in members:
                row, value = measured[i]
                twins = [measured[j][1] for j in members if j != i]
                if len(twins) == 1:
                    change, result = twin_verdict(
                        row["category"], row["direction"], value, twins[0]
                    )
                else:
                    change, result = float("nan"), "disagrees"
                out.append((i, change, result))
        return out

    def wording(self, category: str, variant: Variant, kind: str = SPEECH) -> Wording:
        subject, up, down = recognition_words(category, kind)
        return two_words(f"Is the {subject} {up} or {down}?", up, down, variant.name)

    def evidence(self, observer: Observer, asked: Asked) -> float:
        """The clip's held value against the median of its (split, category, magnitude)
        family (`boundary`)."""
        held = observer.held(asked.category, asked.clip, asked.ref)
        return held - self.boundary(observer, asked.row)

    def boundary(self, observer: Observer, row: Mapping[str, Any]) -> float:
        """The category boundary of a recognition family (split, category, magnitude): the
        median held value of its clips. Both endpoints are built for every source, so half of
        the family lies on each side; no label is read."""
        memo = observer.memo.setdefault(self.name, {})
        key = (row["split"], row["category"], row["magnitude"])
        if key not in memo:
            values = []
            for member in observer.rows.values():
                if (member["split"], member["category"], member["magnitude"]) == key:
                    audio, sr = load_audio(member["path"])
                    values.append(
                        observer.held(
                            member["category"],
                            resample(audio, sr, observer.sample_rate),
                            observer.reference(member["source_id"]),
                        )
                    )
            memo[key] = float(np.median(values))
        return memo[key]


FORMAT = Recognition()

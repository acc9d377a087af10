"""The "when" rung (localisation): a change placed early or late in the speech, asked which.

Labels come from construction and are checked by measurement (each half of the speech measured
with the dimension's own measure); an early clip and its late twin share their ends; the ideal
observer answers it; a leak only this rung has (an early change that also leaves the file's
first 100 ms louder) fails the audit; the listening-test app asks it in its own words."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_chromium
from ladder_helpers import (
    first_trial_in_browser,
    ideal_accuracy,
    louder,
    no_op,
    planted,
    rows_of,
    tiny_build,
)

from vocalgrad import formats
from vocalgrad.dimensions import get as dimension
from vocalgrad.formats.base import verdict
from vocalgrad.formats.when import EARLY, WIDTH, change_window, position_change, window_course
from vocalgrad.questions.parsing import parse_labelled
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.stimuli.audit import audit_dataset
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import plan_conditions
from vocalgrad.stimuli.verify import verify_dataset

pytestmark = pytest.mark.usefixtures("builtin_cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir):
    import os

    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    return tiny_build(tmp_path_factory.mktemp("when") / "ds", "when")


def test_the_change_window_is_drawn_within_its_half_from_the_item_alone():
    items = [f"{i:016x}" for i in range(1, 400, 7)]
    early = [change_window(i, True) for i in items]
    late = [change_window(i, False) for i in items]
    assert all(EARLY[0] <= a and b <= EARLY[1] and b - a == pytest.approx(WIDTH) for a, b in early)
    assert all(1 - EARLY[1] <= a and b <= 1 - EARLY[0] for a, b in late)
    assert change_window(items[3], True) == change_window(items[3], True)  # from the id alone
    starts = [a for a, _ in early]
    assert max(starts) - min(starts) > 0.1  # roved: not one place


def test_the_course_holds_its_ends_before_and_after_the_window():
    course = window_course((0.2, 0.35))
    u = np.linspace(0, 1, 101)
    p = course(u)
    assert np.all(p[u <= 0.2] == 0) and np.all(p[u >= 0.35] == 1)
    assert np.all(np.diff(p) >= 0) and 0 < course(np.array([0.275]))[0] < 1


def test_the_verdict_reads_which_half_changes_and_refuses_an_ambiguous_clip():
    spec = dimension("volume").SPEC  # floor 1 dB
    floor = spec.audibility_floor
    rise, fall = {"change_direction": "increase"}, {"change_direction": "decrease"}

    def heard(row: dict, halves: list[float], label: str) -> str:
        return verdict(label, position_change(row, halves, floor), spec)

    assert heard(rise, [12.0, 0.1], "increase") == "verified"
    assert heard(rise, [0.1, 12.0], "decrease") == "verified"
    assert heard(fall, [-12.0, 0.0], "increase") == "verified"
    assert heard(rise, [0.1, 12.0], "increase") == "disagrees"
    assert heard(rise, [36.0, 2.8], "increase") == "verified"  # a large change spills a little
    # the change spread over both halves: where it lies is not heard
    assert heard(rise, [6.2, 5.8], "increase") == "inaudible"
    assert heard(rise, [0.3, 0.1], "increase") == "inaudible"
    # a change read against its way in the held half, or in no half along it (a pitch change
    # that fell in a long consonant, read on tracker noise): not placed, whichever the label
    for halves in ([4.9, -3.1], [0.05, 3.0], [-0.8, 2.0]):
        assert heard(fall, halves, "increase") == heard(fall, halves, "decrease") == "inaudible"


def test_it_plans_both_ways_of_change_for_both_answers():
    planned, _ = plan_conditions(
        BuildConfig(format="when", categories=("volume",), tiers=("high",))
    )
    assert sorted((c.curve, c.direction) for c in planned) == [
        ("fall", "decrease"), ("fall", "increase"), ("rise", "decrease"), ("rise", "increase"),
    ]  # fmt: skip
    assert all(c.key.endswith("|when") for c in planned)


def test_it_is_asked_early_or_late_and_read_without_the_direction_lexicon():
    assert question_text("voice_pitch", fmt="when") == (
        "Does the voice pitch change early or late in the clip?\n\n"
        'Answer with only one word: "early" or "late".'
    )
    prompt = build_prompt("volume", "swapped", fmt="when")
    assert prompt.options == ("late", "early") and prompt.label_of["early"] == "increase"
    fmt = formats.get("when")
    assert fmt.rungs[0].name == "when" and not fmt.answers_by_direction
    assert parse_labelled("Late.", prompt.label_of, False).label == "decrease"
    # "it rises" says which way, not when: unparsed, where a comparison reads it as higher
    assert parse_labelled("The pitch rises.", prompt.label_of, False).status == "unparsed"
    assert parse_labelled("The pitch rises.", prompt.label_of).label == "increase"


def test_labels_are_verified_by_measurement_and_twins_share_their_ends(built):
    rows = rows_of(built) + rows_of(built, "train")
    assert {r["answer"] for r in rows} == {"early", "late"}
    assert {r["change_direction"] for r in rows} == {"increase", "decrease"}
    for r in rows:
        a, b = r["change_window"]
        assert (b <= 0.5) == (r["direction"] == "increase")
        sign = 1 if r["change_direction"] == "increase" else -1
        first, second = r["measured_halves"]
        changing = first if r["answer"] == "early" else second
        assert sign * changing > dimension(r["category"]).SPEC.audibility_floor
    pairs: dict[tuple, list[dict]] = {}
    for r in rows:
        pairs.setdefault((r["source_id"], r["pair_id"]), []).append(r)
    for twins in pairs.values():
        early, late = sorted(twins, key=lambda r: r["answer"])
        assert (early["param_start"], early["param_end"]) == (
            late["param_start"],
            late["param_end"],
        )
        if early["category"] == "volume":  # its measure reads the span's first and last 20%
            assert abs(early["measured_start"] - late["measured_start"]) < 1.0
            assert abs(early["measured_end"] - late["measured_end"]) < 1.0
    report = verify_dataset(built)
    for category, entry in report["per_category"].items():
        assert entry["agreement"] >= 0.99, (category, entry)
        assert "blind_agreement" not in entry  # the clip's slope says the way, not when


def test_a_clip_labelled_the_other_way_or_unchanged_is_caught(built, tmp_path):
    def swapped(row, audio, sr):
        return None

    wrong = planted(built, tmp_path / "wrong", swapped)
    for split in ("test", "train"):
        meta = wrong / split / "metadata.jsonl"
        rows = [json.loads(line) for line in meta.read_text().splitlines()]
        for r in rows:
            r["direction"] = "decrease" if r["direction"] == "increase" else "increase"
        meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = verify_dataset(wrong)
    assert all(e["agreement"] == 0.0 for e in report["per_category"].values())

    def unchanged(row, audio, sr):  # what the dimension renders from, left as it is
        return no_op(built, row, len(audio))

    flat = verify_dataset(planted(built, tmp_path / "flat", unchanged))
    assert all(e.get("refused_inaudible") == e["clips"] for e in flat["per_category"].values())


def test_the_ideal_observer_answers_it(built, tmp_path):
    accuracy = ideal_accuracy(built, tmp_path / "ideal", controls=("reversed",))
    assert accuracy["overall"] >= 0.98 and accuracy["volume"] >= 0.98
    assert accuracy["voice_pitch"] >= 0.98


def test_an_early_change_that_leaves_the_first_100_ms_louder_fails_the_audit(tmp_path):
    """A build of its own, 4 + 2 sources of voice pitch: on 2 test sources the calibrated
    gates cannot fail (even a cue that answers every item is within what chance gives)."""

    def leak(row, audio, sr):
        return louder(audio, sr, 0.0, 0.1, 12.0) if row["answer"] == "early" else None

    built = tiny_build(tmp_path / "ds", "when", categories=("voice_pitch",), n_test=4)
    leaked = planted(built, tmp_path / "leak", leak)
    report = audit_dataset(leaked)
    pitch = report["per_category"]["voice_pitch"]
    assert pitch["passes"] is False and pitch["shortcut_accuracy"] > 0.6
    assert report["passes"] is False


def test_position_cues_are_audited_unless_the_level_course_is_the_target():
    from vocalgrad.stimuli.audit.cues import allowed_families

    assert "position" in allowed_families("voice_pitch", "when")
    assert "position" not in allowed_families("volume", "when")  # where it is loud is the change
    from vocalgrad.stimuli.audit.cues import target_cue_names

    assert "global_loudness_lufs" in target_cue_names("volume", "when")  # how long it is loud
    assert "global_loudness_lufs" not in target_cue_names("voice_pitch", "when")
    assert "position" not in allowed_families("speaking_speed", "when")  # a warp moves speech
    assert "position" not in allowed_families("voice_pitch", "gradual")


@pytest.mark.slow
@needs_chromium
def test_the_listening_test_app_asks_it(built, browser, tmp_path, capsys):
    shown = first_trial_in_browser(browser, built, tmp_path, capsys, "volume")
    assert shown["question"].split() == question_text("volume", fmt="when").split()
    assert [w.split()[0] for w in shown["words"]] == ["early", "late"]
    assert shown["labels"] == ["increase", "decrease"]
    assert shown["stored"] == shown["truth"]


def test_the_pitch_evidence_leaves_a_trackers_octave_jump_out():
    """A clip held 2 semitones above its source, whose last third a tracker reads an octave
    down (creaky voice in one signal only), holds no change: the ideal observer's F0
    evidence must not read one (it read about -12 semitones before octave jumps were left
    out, and a change placed early then looked late)."""
    from vocalgrad.signal.evidence import f0_change

    sr = 16000
    t = np.arange(3 * sr) / sr
    ref = 0.3 * np.sin(2 * np.pi * 150 * t) + 0.1 * np.sin(2 * np.pi * 300 * t)
    f = np.where(t < 2.0, 150 * 2 ** (2 / 12), 150 * 2 ** (2 / 12) / 2)
    phase = 2 * np.pi * np.cumsum(f) / sr
    clip = 0.3 * np.sin(phase) + 0.1 * np.sin(2 * phase)
    assert abs(f0_change(clip.astype(np.float32), ref.astype(np.float32), sr)) < 1.0


def test_the_pitch_evidence_reads_voiced_frames_not_a_loud_sibilant():
    """A source that opens on a loud hiss (a sibilant) and goes on voiced, and its clip held
    3 semitones down where voiced: no change. The hiss is in both alike, so a tracker reads
    it as no shift; read among the loud frames, it made the clip read a 3-semitone change
    (3.0), and where a word's change lay could not be told from its sibilants."""
    from vocalgrad.signal.evidence import f0_change

    sr = 16000
    hiss = np.random.default_rng(0).normal(0, 0.15, int(0.6 * sr))
    t = np.arange(int(1.4 * sr)) / sr

    def voiced(f0: float) -> np.ndarray:
        return 0.3 * np.sin(2 * np.pi * f0 * t) + 0.1 * np.sin(2 * np.pi * 2 * f0 * t)

    ref = np.concatenate([hiss, voiced(150.0)]).astype(np.float32)
    clip = np.concatenate([hiss, voiced(150.0 * 2 ** (-3 / 12))]).astype(np.float32)
    assert abs(f0_change(clip, ref, sr)) < 1.0


def test_a_warped_clips_windows_are_cut_where_its_content_came_from():
    """Where a dimension warps time, a window of the clip is matched with the part of the
    source its content came from (an MFCC alignment), not the same fraction of the source's
    span: the first half of the clip spoken slowly holds less of the source."""
    from vocalgrad.formats.base import aligned

    sr = 16000
    notes = [220 * 2 ** (k / 4) for k in range(12)]  # a 12-step sequence, 0.25 s a step

    def tones(durations):
        out = []
        for f, d in zip(notes, durations, strict=True):
            t = np.arange(int(d * sr)) / sr
            out.append(0.3 * np.sin(2 * np.pi * f * t) * np.hanning(len(t)))
        return np.concatenate(out).astype(np.float32)

    ref = tones([0.25] * 12)
    clip = tones([0.5] * 6 + [0.25] * 6)  # its first six steps at half the rate
    (at,) = aligned(clip, ref, sr, [3.0])  # the end of the slow part: step 6 of the source
    assert at == pytest.approx(1.5, abs=0.08)

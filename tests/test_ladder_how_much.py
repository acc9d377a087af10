"""The "how much" rung (magnitude): two parts that change the same way, one by more, asked which.

Labels come from construction and are checked by measuring each part's change; the two orders
of a pair hold the same parts; the ideal observer answers it; a leak only this rung has (the
part that changes more is also louder) fails the audit; the listening-test app asks it."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import needs_chromium
from ladder_helpers import first_trial_in_browser, ideal_accuracy, planted, rows_of, tiny_build

from vocalgrad.dimensions import get as dimension
from vocalgrad.formats.base import verdict
from vocalgrad.formats.how_much import RATIO, magnitude_difference, smaller
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.stimuli.audit import audit_dataset
from vocalgrad.stimuli.verify import verify_dataset

pytestmark = pytest.mark.usefixtures("builtin_cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir):
    import os

    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    # 4 train sources: the audit's classifiers learn 23 cues from its clips; 3 test sources:
    # on 2 the planted leak's gate read p 0.005-0.05 over 10 build seeds (accuracy 1.0, but
    # so are many relabellings), on 3 p 0.005 at every seed
    return tiny_build(tmp_path_factory.mktemp("how_much") / "ds", "how_much", n_test=3, n_train=4)


def test_the_smaller_change_is_a_share_of_the_larger_about_the_same_middle():
    assert smaller("volume", -9.0, 9.0) == pytest.approx((-3.0, 3.0))
    assert smaller("volume", 9.0, -9.0) == pytest.approx((3.0, -3.0))  # the same way
    low, high = smaller("voice_clarity", 5000.0, 1200.0)  # a log-scale parameter
    assert np.log(low / high) == pytest.approx(RATIO * np.log(5000 / 1200))
    assert np.sqrt(low * high) == pytest.approx(np.sqrt(5000 * 1200))


def test_the_verdict_reads_which_part_changes_more_and_its_premise():
    spec = dimension("volume").SPEC  # floor 1 dB
    rise, fall = {"change_direction": "increase"}, {"change_direction": "decrease"}
    assert verdict("increase", magnitude_difference(rise, [12, 4], 1.0), spec) == "verified"
    assert verdict("decrease", magnitude_difference(fall, [-4, -12], 1.0), spec) == "verified"
    assert verdict("increase", magnitude_difference(rise, [4, 12], 1.0), spec) == "disagrees"
    assert verdict("increase", magnitude_difference(rise, [8.4, 8.0], 1.0), spec) == "inaudible"
    # a part that audibly goes the other way breaks the question's premise
    assert np.isnan(magnitude_difference(rise, [12, -3], 1.0))
    assert verdict("increase", magnitude_difference(rise, [12, -3], 1.0), spec) == "disagrees"


def test_it_is_asked_first_or_second():
    assert question_text("volume", fmt="how_much") == (
        "In which part does the volume change more, first or second?\n\n"
        'Answer with only one word: "first" or "second".'
    )
    assert build_prompt("volume", "swapped", fmt="how_much").options == ("second", "first")


def test_labels_are_verified_by_measuring_each_part(built):
    rows = rows_of(built) + rows_of(built, "train")
    assert {r["answer"] for r in rows} == {"first", "second"}
    assert {r["change_direction"] for r in rows} == {"increase", "decrease"}
    for r in rows:
        floor = dimension(r["category"]).SPEC.audibility_floor
        sign = 1 if r["change_direction"] == "increase" else -1
        first, second = (sign * c for c in r["part_changes"])
        assert (first - second >= floor) == (r["answer"] == "first")
        (a, b), (c, d) = r["part_paths"]
        larger = (a, b) if r["answer"] == "first" else (c, d)
        less = (c, d) if r["answer"] == "first" else (a, b)
        assert abs(larger[1] - larger[0]) > abs(less[1] - less[0])
    pairs: dict[tuple, list[dict]] = {}
    for r in rows:
        pairs.setdefault((r["source_id"], r["pair_id"]), []).append(r)
    for twins in pairs.values():  # the same two parts, in the other order
        one, other = twins
        assert one["part_paths"] == other["part_paths"][::-1]
        assert one["part_changes"] == pytest.approx(other["part_changes"][::-1], abs=1e-3)
    report = verify_dataset(built)
    for category, entry in report["per_category"].items():
        assert entry["agreement"] >= 0.99, (category, entry)


def test_parts_in_the_wrong_order_are_caught(built, tmp_path):
    wrong = planted(built, tmp_path / "wrong", lambda row, audio, sr: None)
    for split in ("test", "train"):
        meta = wrong / split / "metadata.jsonl"
        rows = [json.loads(line) for line in meta.read_text().splitlines()]
        for r in rows:
            r["direction"] = "decrease" if r["direction"] == "increase" else "increase"
        meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = verify_dataset(wrong)
    assert all(e["agreement"] == 0.0 for e in report["per_category"].values())


def test_the_ideal_observer_answers_it(built, tmp_path):
    accuracy = ideal_accuracy(built, tmp_path / "ideal", controls=("reversed",))
    assert accuracy["overall"] >= 0.98
    assert accuracy["volume"] >= 0.98 and accuracy["voice_pitch"] >= 0.98


def test_the_part_that_changes_more_also_louder_fails_the_audit(built, tmp_path):
    def leak(row, audio, sr):
        a, b = row["part_bounds"][0 if row["answer"] == "first" else 1]
        out = audio.copy()
        out[a:b] *= np.float32(10 ** (6 / 20))
        return out

    report = audit_dataset(planted(built, tmp_path / "leak", leak))
    pitch = report["per_category"]["voice_pitch"]
    assert pitch["passes"] is False and pitch["shortcut_accuracy"] > 0.6
    assert "position" in pitch["families"]


@pytest.mark.slow
@needs_chromium
def test_the_listening_test_app_asks_it(built, browser, tmp_path, capsys):
    shown = first_trial_in_browser(browser, built, tmp_path, capsys, "voice_pitch")
    assert shown["question"].split() == question_text("voice_pitch", fmt="how_much").split()
    assert [w.split()[0] for w in shown["words"]] == ["first", "second"]
    assert shown["labels"] == ["increase", "decrease"]
    assert shown["stored"] == shown["truth"]

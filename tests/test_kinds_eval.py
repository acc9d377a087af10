"""Every kind of sound through evaluation: the ideal observer reads each source as what it is
(its pitch range, its kind), everything that builds a prompt names the row's kind, result rows
carry it, and the report splits speech from other sounds with paired differences.

One tiny tones build and one tiny speech build (same dimensions, same tier), each answered by
the ideal observer and by chance, serve the module."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vocalgrad import api
from vocalgrad.evaluation.kinds import GENERAL, SPEECH_SPECIFIC, kind_contrasts
from vocalgrad.listeners import load_listener
from vocalgrad.signal.evidence import current_reading, f0_change, reading

SR = 16000
pytestmark = pytest.mark.usefixtures("builtin_cache")  # builds share one synthesised-speech cache


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> dict:
    """Tones and speech, pitch and distance at the high tier, 3 sources each; the ideal
    observer and chance on both."""
    root = tmp_path_factory.mktemp("kinds-eval")
    common = dict(
        n_test=3, n_train=0, categories="voice_pitch,distance", tiers="high",
        curves="linear,jump", per_speaker_test=1, constants=0, audit=False, workers=1,
    )  # fmt: skip
    out: dict = {"root": root}
    for name, source in (("tones", "tones:pure"), ("speech", "builtin")):
        out[name] = api.build(root / name, source=source, **common)
        for spec in ("baseline:ideal", "baseline:random"):
            folder = root / "runs" / f"{name}-{spec.split(':')[1]}"
            out[(name, spec)] = api.evaluate(out[name], spec, folder, use_cache=False)
    return out


# ---------------------------------------------------------------------------------------
# The ideal observer on every kind


def test_the_ideal_observer_hears_a_tone_in_its_own_pitch_range(pair):
    rows = [r for r in pair[("tones", "baseline:ideal")].rows() if r["direction"] != "constant"]
    high = {r["source_id"] for r in rows if float(r["source_id"].split("/")[-1][:-2]) > 400}
    assert high, "a tone above speech's 400 Hz range is among the sources"
    for category in ("voice_pitch", "distance"):
        asked = [r for r in rows if r["category"] == category]
        assert asked and all(r["correct"] for r in asked), [
            (r["source_id"], r["direction"], r["llr"]) for r in asked if not r["correct"]
        ]


def test_pitch_evidence_reads_the_range_it_is_given_and_speech_by_default():
    t = np.arange(2 * SR) / SR
    ref = np.sin(2 * np.pi * 2000 * t).astype(np.float32)
    shift = np.linspace(-3, 3, len(t))  # semitones, rising
    clip = np.sin(2 * np.pi * np.cumsum(2000 * 2 ** (shift / 12)) / SR).astype(np.float32)
    assert current_reading().pitch_range_hz == (60.0, 400.0)
    with reading("tone", (1200.0, 3600.0)) as r:
        assert r.kind == "tone" and current_reading() == r
        # the thirds' medians of a -3..+3 semitone glide lie 4 semitones apart
        assert f0_change(clip, ref, SR) == pytest.approx(4.0, abs=0.3)
    assert current_reading().kind == "speech"  # the block ends with it
    assert not f0_change(clip, ref, SR) > 3  # speech's range cannot follow a 2 kHz tone


# ---------------------------------------------------------------------------------------
# Prompts name the row's kind; results carry it


def test_result_rows_carry_the_kind_and_the_manifest_words_the_tone(pair):
    tone_rows = pair[("tones", "baseline:random")].rows()
    assert {r["source_kind"] for r in tone_rows} == {"tone"}
    assert {r["source_kind"] for r in pair[("speech", "baseline:random")].rows()} == {"speech"}
    prompts = pair[("tones", "baseline:random")].manifest["prompts"]
    assert "of the tone" in prompts["default"] and "voice" not in prompts["default"]


def test_harness_items_and_probe_keys_word_each_kind(pair):
    from vocalgrad.harness.items import Selection, answer_row, item_metadata, question, select_items
    from vocalgrad.probing.features import feature_key
    from vocalgrad.remedies.finetune import option_targets, requests_for

    items = select_items(pair["tones"].path, Selection(split="test"))
    row = next(r for r in items if r["category"] == "voice_pitch")
    assert "pitch of the tone" in question(row)
    meta = item_metadata(row, "default")
    assert meta["source_kind"] == "tone"
    answered = answer_row(meta, row["direction"], "me")
    assert answered["correct"] and answered["source_kind"] == "tone"
    requests, _ = requests_for(row | {"audio": np.zeros(SR, np.float32)}, SR)
    assert all("pitch of the tone" in r.prompt.text for r in requests)
    assert len(option_targets(row)) == 2
    listener = load_listener("baseline:random")
    ids = [row["item_id"]]
    speech_key = feature_key("sha", listener, "voice_pitch", "default", "mean", ids)
    tone_key = feature_key("sha", listener, "voice_pitch", "default", "mean", ids, ["tone"])
    assert speech_key != tone_key  # the question asked is part of what the features are


def test_adaptive_trials_render_a_tone_as_built_and_ask_about_the_tone(pair):
    from vocalgrad.evaluation.evaluate_adaptive import TrialRenderer
    from vocalgrad.listeners.baselines import IdealObserver

    class Recorder(IdealObserver):
        asked: list = []

        def score_choices(self, requests):
            self.asked.extend(r.prompt.text for r in requests)
            return super().score_choices(requests)

    ask = TrialRenderer(pair["tones"].path, Recorder(pair["tones"].path), seed=0)
    _, source = ask._reference(0)
    assert source.clean.kind == "tone" and source.clean.pitch_ceiling_hz >= 500
    assert all(ask("voice_pitch", 3.0, d, trial) is True for d in ("increase", "decrease")
               for trial in range(3))  # fmt: skip
    assert Recorder.asked and all("pitch of the tone" in text for text in Recorder.asked)


# ---------------------------------------------------------------------------------------
# Speech against other sounds


def _rows(listener: str, kind: str, right: tuple[int, int], n_sources: int) -> list[dict]:
    """8 items a source (4 a tier), the sources answering ``right`` of them by turns."""
    rows = []
    for s in range(n_sources):
        for i in range(8):
            direction = ("increase", "decrease")[i % 2]
            correct = i < right[s % 2]
            rows.append({
                "item_id": f"{kind}-{s}-{i}", "listener": listener, "category": "volume",
                "tier": ("low", "high")[i // 4], "direction": direction, "source_kind": kind,
                "source_id": f"{kind}-{s}",
                "predicted": direction if correct else ("decrease", "increase")[i % 2],
            })  # fmt: skip
    return rows


def test_speech_specific_and_general_deficits_are_told_apart_on_synthetic_rows():
    rows = {
        "deaf-to-speech": _rows("deaf-to-speech", "speech", (3, 5), 20)
        + _rows("deaf-to-speech", "tone", (7, 8), 20),
        "deaf": _rows("deaf", "speech", (3, 5), 20) + _rows("deaf", "tone", (5, 3), 20),
        "hears": _rows("hears", "speech", (7, 8), 20) + _rows("hears", "tone", (8, 7), 20),
        "perfect": _rows("perfect", "speech", (8, 8), 3) + _rows("perfect", "tone", (8, 8), 3),
        "speech-only": _rows("speech-only", "speech", (7, 7), 20),
    }
    # speech rows from before kinds had a name are speech
    for r in rows["hears"][:160]:
        del r["source_kind"]
    found = {c.listener: c for c in kind_contrasts(rows, n_boot=200, seed=0)}
    assert set(found) == {"deaf-to-speech", "deaf", "hears", "perfect"}  # speech-only: no pair
    c = found["deaf-to-speech"]
    assert c.verdict == SPEECH_SPECIFIC and c.difference_hi < 0 < c.accuracy_other - 0.5
    assert c.tiers == ("high", "low") and (c.sources_speech, c.sources_other) == (20, 20)
    assert c.ci_method == "cluster jackknife t"  # 20 sources: under the bootstrap's 50
    assert found["deaf"].verdict == GENERAL
    assert found["hears"].verdict == "" and found["hears"].difference == 0.0
    assert found["hears"].difference_lo < 0 < found["hears"].difference_hi
    # three sources answered perfectly: the CI reaches 0.5, but that is not near chance
    assert found["perfect"].accuracy_speech_lo < 0.5 and found["perfect"].verdict == ""


def test_a_tier_only_one_kind_was_asked_at_is_left_out_of_the_difference():
    speech = _rows("m", "speech", (7, 8), 12)
    tone = [r for r in _rows("m", "tone", (7, 8), 12) if r["tier"] == "high"]
    (c,) = kind_contrasts({"m": speech + tone}, n_boot=0)
    assert c.tiers == ("high",) and c.n_speech == 48 and np.isnan(c.difference_lo)


def test_the_report_splits_speech_from_other_sounds_on_real_runs(pair, tmp_path):
    from vocalgrad.report import build_sections, write_report

    runs = [pair[(k, s)].path for k in ("speech", "tones") for s in ("baseline:ideal",
            "baseline:random")]  # fmt: skip
    (section,) = [s for s in build_sections(runs, n_boot=200) if s.id == "kinds"]
    table = next(b for b in section.blocks if hasattr(b, "references"))
    listed = {(r[0], r[1], r[2]) for r in table.references}
    assert {("baseline:ideal", c, "tone") for c in ("distance", "voice_pitch")} <= listed
    ideal = [r for r in table.references if r[0] == "baseline:ideal"]
    assert all(r[5].startswith("1.00") and r[6].startswith("1.00") for r in ideal), ideal
    assert all(r[8] == "–" for r in ideal)  # hears both kinds: no deficit
    figure = next(b for b in section.blocks if getattr(b, "name", "") == "kinds")
    assert {d["listener"] for d in figure.data} == {"baseline:ideal", "baseline:random"}
    html = write_report(runs, tmp_path / "r.html", n_boot=100).read_text()
    assert '<section id="kinds">' in html and "Speech and other sounds" in html
    data = (tmp_path / "r-kinds.csv").read_text().splitlines()
    assert data[0].startswith("listener,category,kind,tiers") and len(data) == 5


def test_the_report_says_when_there_is_nothing_to_compare(pair):
    from vocalgrad.report import build_sections

    runs = [pair[("speech", "baseline:ideal")].path]
    (section,) = [s for s in build_sections(runs, n_boot=50) if s.id == "kinds"]
    assert "nothing to compare" in section.blocks[0].text


def test_an_old_result_row_without_a_kind_is_speech(pair, tmp_path):
    rows = [json.loads(line) for line in (Path(pair[("speech", "baseline:ideal")].path) /
            "results.jsonl").read_text().splitlines()]  # fmt: skip
    for r in rows:
        r.pop("source_kind", None)
    tones = pair[("tones", "baseline:ideal")].rows()
    found = kind_contrasts({"i": rows + tones}, n_boot=0)
    assert {(c.category, c.kind) for c in found} == {("distance", "tone"), ("voice_pitch", "tone")}


def test_rows_without_a_kind_are_asked_and_filed_as_speech(pair):
    from vocalgrad.harness.items import answer_row, item_metadata, question
    from vocalgrad.human.export import _annotator_row

    row = next(r for r in pair["speech"].rows() if r["category"] == "voice_pitch")
    old = {k: v for k, v in row.items() if k != "source_kind"}
    assert question(old) == question(row)
    meta = item_metadata(old, "default")
    assert meta["source_kind"] == "speech"
    assert answer_row(meta, row["direction"], "me")["source_kind"] == "speech"
    tone = next(r for r in pair["tones"].rows() if r["category"] == "voice_pitch")
    trial = {"item_id": tone["item_id"], "answer": tone["direction"], "annotator_id": "a",
             "kind": "test", "rt_s": 1.0, "server_rt_s": 1.0, "plays": 1,
             "annotator_flagged": 0}  # fmt: skip
    exported = _annotator_row(trial, tone, "default")
    assert exported["source_kind"] == "tone" and "pitch of the tone" in exported["prompt"]

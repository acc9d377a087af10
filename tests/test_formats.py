"""Question formats from one stimulus engine: comparison (two held parts with a room-tone gap)
and recognition (one held clip, two named categories), end to end on builtin speech: build,
verification by measurement (and its mutation), shortcut audit, ideal observer, prompts and
parsing, the listening-test app and the report's format table."""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad import dimensions
from vocalgrad.dataset import load_rows
from vocalgrad.dimensions.base import Question
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate, load_results
from vocalgrad.evaluation.score import score_run
from vocalgrad.formats.recognition import recognition_words
from vocalgrad.listeners.baselines import ConstantListener, IdealObserver
from vocalgrad.questions.parsing import parse_labelled
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.stimuli.audit import allowed_families
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import plan_conditions
from vocalgrad.stimuli.verify import verify_dataset

SR = 16000
TINY = {"n_test": 2, "n_train": 2, "tiers": ("high",)}


pytestmark = pytest.mark.usefixtures("builtin_cache")  # builds share one synthesised-speech cache


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    root = tmp_path_factory.mktemp("formats")
    return {
        fmt: (root / fmt, build(BuildConfig(format=fmt, **TINY), root / fmt, workers=2))
        for fmt in ("comparison", "recognition")
    }


def _rows(path: Path, split: str = "test") -> list[dict]:
    return [r for r in load_rows(path) if r["split"] == split]


def _zero_run(x: np.ndarray) -> int:
    """Longest run of exact 16-bit zeros."""
    zero = np.round(x * 32768) == 0
    best = run = 0
    for z in zero:
        run = run + 1 if z else 0
        best = max(best, run)
    return best


def test_plan_holds_parts_and_keeps_gradual_ids():
    held, _ = plan_conditions(BuildConfig(format="comparison", **TINY))
    assert {c.curve for c in held} == {"held"} and {c.direction for c in held} == {
        "increase",
        "decrease",
    }
    assert all(c.key.endswith("|comparison") for c in held)
    gradual, _ = plan_conditions(BuildConfig(**TINY))
    assert not any("|gradual" in c.key for c in gradual)  # gradual item ids are unchanged
    sweep, _ = plan_conditions(
        BuildConfig(format="recognition", design="psychometric", levels=3, **TINY)
    )
    assert {c.tier for c in sweep} == {"p1", "p2", "p3"} and {c.curve for c in sweep} == {"held"}
    with pytest.raises(ConfigError, match="unknown format"):
        BuildConfig(format="oddball")


def test_comparison_rows_parts_and_room_tone_gap(built):
    path, report = built["comparison"]
    rows = _rows(path)
    assert report["clips_kept"] == 2 * 2 * 2 * 9  # sources x splits-worth x directions x categories
    assert {r["format"] for r in rows} == {"comparison"}
    by_pair = Counter((r["source_id"], r["pair_id"]) for r in rows)
    assert set(by_pair.values()) == {2}  # both orders of every pair
    for r in rows:
        (a0, a1), (b0, b1) = r["part_bounds"]
        assert a0 == 0 and a1 - a0 == b1 - b0, "both parts as long"
        assert b0 - a1 == int(0.5 * SR) == round(r["gap_s"] * SR)
        audio, sr = sf.read(path / "test" / r["file_name"], dtype="float32")
        assert sr == SR and len(audio) == b1
        gap = audio[a1:b0]
        assert 1e-5 < np.sqrt(np.mean(gap**2)) < 3e-3, "room tone in the gap, far below the speech"
        assert _zero_run(audio) < 32, "no exact digital silence anywhere"
        (s0, e0), (s1, e1) = r["part_spans_s"]
        assert a0 / SR <= s0 < e0 <= a1 / SR and b0 / SR <= s1 < e1 <= b1 / SR
        assert r["measured_change"] == pytest.approx(
            r["measured_end"] - r["measured_start"], abs=1e-3
        )
        assert (r["measured_change"] > 0) == (r["direction"] == "increase") and r["verified"]


def _twins(rows: list[dict]) -> list[tuple[dict, dict]]:
    """Every comparison pair as (increase, decrease)."""
    pairs: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        pairs.setdefault((r["source_id"], r["pair_id"]), []).append(r)
    return [tuple(sorted(p, key=lambda r: r["direction"] != "increase")) for p in pairs.values()]


def test_comparison_twins_hold_the_same_parts_in_the_other_order(built):
    path, _ = built["comparison"]
    for inc, dec in _twins(_rows(path)):
        x, _ = sf.read(path / "test" / inc["file_name"], dtype="float32")
        y, _ = sf.read(path / "test" / dec["file_name"], dtype="float32")
        for (s0, e0), (s1, e1) in zip(inc["part_spans_s"], dec["part_spans_s"][::-1], strict=True):
            assert e0 - s0 == pytest.approx(e1 - s1, abs=1e-4)
            first = x[int(round(s0 * SR)) : int(round(e0 * SR))]
            second = y[int(round(s1 * SR)) : int(round(s1 * SR)) + len(first)]
            assert np.corrcoef(first, second)[0, 1] > 0.999  # the same audio, up to the level


def test_comparison_edges_do_not_follow_the_order_of_the_parts(built):
    """A faster part is shorter; its padding faces the gap, so the file's edges are the parts'
    own and equal between twins. Padded at its end, a faster second part left trailing
    silence that gave the answer away (order-free accuracy 1.00 on speaking speed)."""
    path, _ = built["comparison"]
    speed = [t for t in _twins(_rows(path)) if t[0]["category"] == "speaking_speed"]
    assert speed
    for inc, dec in speed:
        end = inc["part_bounds"][1][1] / SR
        spans = [r["part_spans_s"] for r in (inc, dec)]
        edges = [s[0][0] + end - s[1][1] for s in spans]  # silence before and after the speech
        padding = abs(np.diff([e - s for s, e in spans[0]])[0])  # the parts' length difference
        assert padding > 0.3  # at the high tier: enough to give the order away at an edge
        assert abs(edges[0] - edges[1]) < 0.01
        inner = [s[1][0] - s[0][1] for s in spans]
        assert inner[0] == pytest.approx(inner[1], abs=0.01)  # all the padding lies between


def test_recognition_rows_are_balanced_and_verified_against_the_twin(built):
    path, report = built["recognition"]
    rows = _rows(path)
    assert {r["format"] for r in rows} == {"recognition"} and all(r["verified"] for r in rows)
    assert Counter(r["direction"] for r in rows)["increase"] == len(rows) // 2
    values = {(r["source_id"], r["pair_id"], r["direction"]): r["measured_value"] for r in rows}
    for (source, pair, direction), value in values.items():
        if direction == "increase":
            twin = values[(source, pair, "decrease")]
            row = next(
                r
                for r in rows
                if (r["source_id"], r["pair_id"], r["direction"]) == (source, pair, direction)
            )
            assert row["measured_change"] == pytest.approx(value - twin, abs=1e-3) and value > twin
    assert "question format: `recognition`" in (path / "README.md").read_text()


@pytest.mark.parametrize("fmt", ["comparison", "recognition"])
def test_verify_remeasures_every_held_item(built, fmt):
    path, _ = built[fmt]
    report = verify_dataset(path)
    assert not report["failures"]
    assert {e["agreement"] for e in report["per_category"].values()} == {1.0}


def test_swapped_parts_with_the_label_kept_fail_verification(built, tmp_path):
    path, _ = built["comparison"]
    copy = tmp_path / "ds"
    shutil.copytree(path, copy)
    rows = _rows(copy)
    victims = [r for r in rows if r["direction"] == "increase"][:3]
    for r in victims:
        file = copy / "test" / r["file_name"]
        audio, sr = sf.read(file, dtype="float32")
        (a0, a1), (b0, b1) = r["part_bounds"]
        swapped = np.concatenate([audio[b0:b1], audio[a1:b0], audio[a0:a1]])
        sf.write(file, swapped, sr, subtype="PCM_16")
    failed = {f["item_id"] for f in verify_dataset(copy)["failures"]}
    assert failed == {r["item_id"] for r in victims}


def test_recognition_twin_audio_swapped_fails_verification(built, tmp_path):
    path, _ = built["recognition"]
    copy = tmp_path / "ds"
    shutil.copytree(path, copy)
    rows = _rows(copy)
    a = rows[0]
    b = next(
        r
        for r in rows
        if r["pair_id"] == a["pair_id"] and r["source_id"] == a["source_id"] and r is not a
    )
    fa, fb = copy / "test" / a["file_name"], copy / "test" / b["file_name"]
    tmp = tmp_path / "x.flac"
    shutil.copy(fa, tmp)
    shutil.copy(fb, fa)
    shutil.copy(tmp, fb)
    failed = {f["item_id"] for f in verify_dataset(copy)["failures"]}
    assert failed == {a["item_id"], b["item_id"]}


def test_audit_runs_on_held_formats_with_their_own_cue_families(built):
    comparison = json.loads((built["comparison"][0] / "audit.json").read_text())
    recognition = json.loads((built["recognition"][0] / "audit.json").read_text())
    assert "parts" in comparison["per_category"]["voice_pitch"]["families"]
    assert "global" not in recognition["per_category"]["voice_pitch"]["families"]
    # a held rate sets how long the speech in a part lasts: what pads it is the target for speed
    assert allowed_families("speaking_speed", "comparison") == ("global", "parts")
    assert "duration" not in allowed_families("speaking_speed", "recognition")
    layouts: dict[tuple, set] = {}
    for r in _rows(built["comparison"][0]) + _rows(built["comparison"][0], "train"):
        layouts.setdefault((r["source_id"], r["pair_id"]), set()).add(json.dumps(r["part_bounds"]))
    assert {len(v) for v in layouts.values()} == {1}, "an item and its twin share the part layout"


@pytest.mark.parametrize("fmt", ["comparison", "recognition"])
def test_ideal_observer_answers_held_formats(built, fmt, tmp_path):
    path, _ = built[fmt]
    out = tmp_path / "run"
    evaluate(
        path,
        IdealObserver(path),
        out,
        EvalConfig(mode="choice"),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    manifest, rows = load_results(out)
    assert manifest["format"] == fmt and {r["format"] for r in rows} == {fmt}
    assert {r["predicted"] for r in rows} == {"increase", "decrease"}  # labels, not answer words
    assert np.mean([r["correct"] for r in rows]) >= 0.9
    groups = {
        g["group"]: g
        for g in score_run(out, by=("format", "category"), n_boot=0)["groups"]["default/choice"][
            "table"
        ]
    }
    assert groups[f"{fmt}|volume"]["n"] == 4 and groups[f"{fmt}|volume"]["accuracy"] >= 0.9


def test_choice_scoring_maps_answer_words_to_labels(built, tmp_path):
    path, _ = built["recognition"]
    out = tmp_path / "run"
    evaluate(
        path,
        ConstantListener("increase"),
        out,
        EvalConfig(mode="both", controls=("reversed",)),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    _, rows = load_results(out)
    assert {r["control"] for r in rows} == {"none"}  # a held clip played backwards keeps its label
    choice = [r for r in rows if r["mode"] == "choice"]
    generated = [r for r in rows if r["mode"] == "generate"]
    assert {r["predicted"] for r in choice} == {"increase"} and set(choice[0]["logprobs"]) == {
        "increase",
        "decrease",
    }
    assert {r["response"] for r in generated if r["category"] == "volume"} == {"loud"}
    assert {r["predicted"] for r in generated} == {"increase"}
    assert np.mean([r["correct"] for r in rows]) == 0.5


def test_prompts_per_format(request):
    assert question_text("volume") == (
        "Does the volume increase or decrease over time?\n\n"
        'Answer with only one word: "increase" or "decrease".'
    )
    comparison = build_prompt("voice_pitch", fmt="comparison")
    assert comparison.text.startswith(
        "Is the voice pitch higher or lower in the second part than in the first?"
    )
    assert comparison.options == ("higher", "lower") and comparison.label_of == {
        "higher": "increase",
        "lower": "decrease",
    }
    recognition = build_prompt("volume", fmt="recognition")
    assert (
        recognition.text
        == 'Is the voice loud or quiet?\n\nAnswer with only one word: "loud" or "quiet".'
    )
    swapped = build_prompt("volume", "swapped", fmt="recognition")
    assert swapped.options == ("quiet", "loud") and "quiet or loud" in swapped.text
    assert swapped.label_of == {"quiet": "decrease", "loud": "increase"}
    assert recognition_words("brightness") == ("voice", "bright", "dark")
    # a dimension that declares no recognition words (a new one) is asked generically
    plain = dataclasses.replace(dimensions.get("breathiness"), QUESTION=Question())
    original = dimensions.get("breathiness")
    dimensions.register(plain, replace=True)
    request.addfinalizer(lambda: dimensions.register(original, replace=True))
    assert recognition_words("breathiness") == ("breathiness", "high", "low")
    with pytest.raises(ConfigError, match="variants default, swapped"):
        build_prompt("volume", "ternary", fmt="recognition")
    few = build_prompt("echo", fmt="recognition", few_shot=[({"item_id": "a"}, "decrease")])
    assert few.turns[1].text == "dry"  # examples are answered in the format's words


@pytest.mark.parametrize(
    ("text", "words", "label", "status"),
    [
        ("quiet", {"loud": "increase", "quiet": "decrease"}, "decrease", "ok"),
        ("It sounds loud.", {"loud": "increase", "quiet": "decrease"}, "increase", "ok"),
        ("Loud or quiet? Quiet.", {"loud": "increase", "quiet": "decrease"}, "decrease", "ok"),
        ("not loud", {"loud": "increase", "quiet": "decrease"}, "decrease", "ok"),
        ("loud and quiet", {"loud": "increase", "quiet": "decrease"}, None, "ambiguous"),
        ("steady", {"trembling": "increase", "steady": "decrease"}, "decrease", "ok"),
        ("It gets louder", {"loud": "increase", "quiet": "decrease"}, "increase", "ok"),
        ("banana", {"loud": "increase", "quiet": "decrease"}, None, "unparsed"),
        ("Lower.", {"higher": "increase", "lower": "decrease"}, "decrease", "ok"),
        (
            "Higher or lower? The second part is higher.",
            {"higher": "increase", "lower": "decrease"},
            "increase",
            "ok",
        ),
        ("", {"higher": "increase", "lower": "decrease"}, None, "empty"),
    ],
)
def test_parse_labelled(text, words, label, status):
    parsed = parse_labelled(text, words)
    assert (parsed.label, parsed.status) == (label, status)


def test_listening_test_serves_a_comparison_item_whole(built, tmp_path):
    from e2e.human_helpers import Env, do_trial

    path, _ = built["comparison"]
    env = Env(tmp_path, path)
    items = env.store.items()
    _, c = env.annotator()
    seen = 0
    while (s := c.get("/api/state").json())["phase"] != "done":
        t = s["trial"]
        if s["phase"] in ("test", "practice"):
            with sqlite3.connect(env.db) as con:
                item_id = con.execute(
                    "SELECT item_id FROM trials WHERE id=?", (t["id"],)
                ).fetchone()[0]
            row = items[item_id]
            assert t["question"] == question_text(row["category"], "default", "comparison")
            assert t["options"] == ["higher", "lower"] and t["labels"] == ["increase", "decrease"]
            served = sf.info(io.BytesIO(c.get(t["audio"]).content))
            assert served.frames == row["part_bounds"][1][1], "both parts and the gap in one file"
            seen += 1
        do_trial(c, env.db, env.clock.advance)
    assert seen
    from vocalgrad.human.export import annotator_rows

    answered = annotator_rows(env.store)
    assert answered and {r["format"] for r in answered} == {"comparison"}
    assert all(r["predicted"] == r["direction"] and "second part" in r["prompt"] for r in answered)


def test_report_compares_formats_on_the_same_cells(tmp_path):
    from vocalgrad.report import build_sections

    runs = []
    for fmt, p_correct in (("gradual", 0.6), ("comparison", 0.9)):
        rng = np.random.default_rng(len(fmt))
        rows = []
        for source in range(12):
            for direction in ("increase", "decrease"):
                correct = bool(rng.uniform() < p_correct)
                predicted = (
                    direction
                    if correct
                    else {"increase": "decrease", "decrease": "increase"}[direction]
                )
                rows.append(
                    {
                        "key": f"{fmt}{source}{direction}",
                        "item_id": f"{fmt}{source}{direction}",
                        "listener": "model-a",
                        "variant": "default",
                        "control": "none",
                        "mode": "choice",
                        "category": "volume",
                        "direction": direction,
                        "tier": "high",
                        "curve": "linear",
                        "magnitude": 18.0,
                        "source_id": f"src{source}",
                        "split": "test",
                        "format": fmt,
                        "predicted": predicted,
                        "llr": 1.0,
                        "correct": correct,
                        "error": None,
                    }
                )
        rows.append({**rows[0], "key": "extra", "item_id": "extra", "source_id": f"only-{fmt}"})
        folder = tmp_path / fmt
        folder.mkdir()
        (folder / "manifest.json").write_text(
            json.dumps(
                {
                    "listener": {"listener": "model-a"},
                    "format": fmt,
                    "config": {},
                    "modes": ["choice"],
                }
            )
        )
        (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(folder)
    sections = {s.id: s for s in build_sections(runs, n_boot=100, fit_boot=20)}
    table = sections["formats"].blocks[0]
    assert table.header[-2:] == ["gradual", "comparison"]
    (row,) = table.rows
    assert row[:4] == [
        "model-a",
        "volume",
        "12",
        "12",
    ]  # the cells only one format has are left out
    assert float(row[5].split()[0]) > float(row[4].split()[0])
    leaderboard = sections["headline"].blocks[0]  # listener, format, accuracy, ...
    assert {tuple(r[:2]) for r in leaderboard.rows} >= {
        ("model-a", "gradual"),
        ("model-a", "comparison"),
    }


def test_ideal_observer_recognises_held_distance_despite_the_level_rove(tmp_path):
    """A held clip's level re its source mixes the distance with its +-3 dB rove; the ideal
    observer reads a held distance from its reverberant-to-direct ratio instead (from level
    alone it named 0.71 of a demo-size build's recognition items)."""
    path = tmp_path / "ds"
    build(
        BuildConfig(
            format="recognition", n_test=6, n_train=0, categories=("distance",), tiers=("low",)
        ),
        path,
        workers=2,
        audit=False,
    )
    out = tmp_path / "run"
    evaluate(
        path,
        IdealObserver(path),
        out,
        EvalConfig(mode="choice"),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    _, rows = load_results(out)
    assert len(rows) == 12 and np.mean([r["correct"] for r in rows]) >= 0.9

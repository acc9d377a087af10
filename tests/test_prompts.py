"""Prompt variants as data: the published wording verbatim, variants, turns and few-shot picks."""

from __future__ import annotations

import pytest

from vocalgrad.errors import ConfigError
from vocalgrad.questions.parsing import parse_answer
from vocalgrad.questions.prompts import (
    TARGET,
    Variant,
    build_prompt,
    choice_options,
    expected_answer,
    few_shot_examples,
    get_variant,
    question_text,
    register_variant,
    to_chat,
    unregister_variant,
    variant_names,
    variants,
)

CATEGORIES = (
    "speaking_speed",
    "voice_pitch",
    "volume",
    "background_noise",
    "echo",
    "voice_clarity",
    "audio_distortion",
    "audio_roughness",
    "voice_vibration",
)


def test_default_prompt_is_the_published_text_verbatim():
    expected = (
        "Does the voice pitch increase or decrease over time?\n\n"
        'Answer with only one word: "increase" or "decrease".'
    )
    assert question_text("voice_pitch") == expected
    prompt = build_prompt("voice_pitch")
    assert prompt.text == expected
    assert prompt.options == ("increase", "decrease") == choice_options(prompt)
    assert prompt.audio_position == "after"  # published: text before audio


def test_newer_dimensions_are_asked_about_by_name():
    """The published template names each category by its words: the newer dimensions too."""
    for category, words in (
        ("brightness", "brightness"),
        ("breathiness", "breathiness"),
        ("vocal_tract_length", "apparent size of the speaker (vocal tract length)"),
    ):
        assert question_text(category).startswith(
            f"Does the {words} increase or decrease over time?"
        )


def test_swapped_reverses_both_lines_and_the_options():
    text = question_text("volume", "swapped")
    assert text == (
        "Does the volume decrease or increase over time?\n\n"
        'Answer with only one word: "decrease" or "increase".'
    )
    assert build_prompt("volume", "swapped").options == ("decrease", "increase")


def test_clip_ternary_and_vary_wording():
    assert question_text("echo", "clip").startswith(
        "Does the echo of this audio clip increase or decrease over time?\n\n"
    )
    assert question_text("echo", "ternary") == (
        "Does the echo increase, decrease, or stay constant over time?\n\n"
        'Answer with only one word: "increase", "decrease" or "constant".'
    )
    assert build_prompt("echo", "ternary").options == ("increase", "decrease", "constant")
    assert question_text("background_noise", "vary") == (
        'Does the background noise change over time?\n\nAnswer with only one word: "yes" or "no".'
    )
    assert build_prompt("echo", "vary").options == ("yes", "no")


@pytest.mark.parametrize("variant", ["paraphrase1", "paraphrase2", "paraphrase3"])
def test_paraphrases_keep_the_answer_words(variant):
    texts = set()
    for category in ("volume", "voice_pitch", "speaking_speed"):
        question, instruction = question_text(category, variant).split("\n\n")
        assert '"increase"' in instruction and '"decrease"' in instruction
        assert "{" not in question
        texts.add(question)
    assert len(texts) == 3
    with pytest.raises(ConfigError, match="only for"):
        question_text("echo", variant)


def test_every_general_variant_works_for_every_category():
    for variant in variants():
        if variant.categories() is None:
            for category in CATEGORIES:
                text = question_text(category, variant.name)
                assert category.replace("_", " ") in text and "_" not in text


def test_unknown_variant_names_the_valid_ones():
    with pytest.raises(ConfigError, match="default"):
        build_prompt("volume", "nonsense")
    with pytest.raises(
        ConfigError, match=r"unknown prompt variant 'swaped' \(did you mean 'swapped'"
    ):
        build_prompt("volume", "swaped")


def test_variants_are_a_registry_listed_in_their_order_and_extended_at_run_time():
    assert variant_names()[:4] == ("default", "swapped", "clip", "paraphrase1")
    assert variant_names()[-3:] == ("mapped", "negated", "conditional")
    mine = Variant("aaa-mine", "Is the {attribute} going up?", "Answer yes or no.", ("yes", "no"))
    assert register_variant(mine) is mine
    try:
        assert variant_names()[-1] == "aaa-mine"  # after the package's own, by name
        assert get_variant("aaa-mine") is mine
        assert question_text("volume", "aaa-mine") == "Is the volume going up?\n\nAnswer yes or no."
        with pytest.raises(ConfigError, match="exists"):
            register_variant(mine)
        with pytest.raises(TypeError, match="not a prompt Variant"):
            register_variant("aaa-mine")  # type: ignore[arg-type]
    finally:
        unregister_variant("aaa-mine")
    assert "aaa-mine" not in variant_names()


def test_turns_and_audio_position():
    prompt = build_prompt("volume")
    assert len(prompt.turns) == 1
    turn = prompt.turns[0]
    assert turn.role == "user" and turn.audio == TARGET
    assert [kind for kind, _ in turn.parts()] == ["text", "audio"]
    first = build_prompt("volume", audio_first=True)
    assert first.audio_position == "before"
    assert [kind for kind, _ in first.turns[0].parts()] == ["audio", "text"]
    concrete = prompt.for_item("vg-000123")
    assert concrete.turns[-1].audio == "vg-000123"
    assert build_prompt("volume", item_id="vg-000123") == concrete


def _train_rows(n_sources: int = 6) -> list[dict]:
    rows = []
    for s in range(n_sources):
        for direction in ("increase", "decrease", "constant"):
            for tier in ("low", "high"):
                for category in ("volume", "echo"):
                    rows.append(
                        {
                            "item_id": f"tr-{category}-{s}-{direction}-{tier}",
                            "category": category,
                            "direction": direction,
                            "tier": tier,
                            "source_id": f"src{s}",
                            "split": "train",
                        }
                    )
    rows.append(
        {
            "item_id": "te-1",
            "category": "volume",
            "direction": "increase",
            "source_id": "srcT",
            "split": "test",
        }
    )
    return rows


def test_few_shot_examples_are_balanced_deterministic_and_from_train():
    rows = _train_rows()
    picked = few_shot_examples(rows, "volume", k_per_label=2, seed=3)
    assert len(picked) == 4
    answers = [a for _, a in picked]
    assert sorted(answers) == ["decrease", "decrease", "increase", "increase"]
    for row, answer in picked:
        assert row["split"] == "train" and row["category"] == "volume"
        assert row["direction"] == answer
    for label in ("increase", "decrease"):  # distinct sources within a label when possible
        assert len({r["source_id"] for r, a in picked if a == label}) == 2
    again = few_shot_examples(list(reversed(rows)), "volume", k_per_label=2, seed=3)
    assert [r["item_id"] for r, _ in again] == [r["item_id"] for r, _ in picked]
    seeds = {
        tuple(r["item_id"] for r, _ in few_shot_examples(rows, "volume", seed=s)) for s in range(10)
    }
    assert len(seeds) > 1


def test_few_shot_for_ternary_and_vary_formats():
    rows = _train_rows()
    ternary = few_shot_examples(rows, "echo", k_per_label=1, variant="ternary")
    assert sorted(a for _, a in ternary) == ["constant", "decrease", "increase"]
    vary = few_shot_examples(rows, "echo", k_per_label=2, variant="vary")
    assert sorted(a for _, a in vary) == ["no", "no", "yes", "yes"]
    for row, answer in vary:
        assert answer == expected_answer(row["direction"], "vary")
    with pytest.raises(ConfigError, match="train"):
        few_shot_examples(rows, "volume", k_per_label=50)


def test_build_prompt_with_few_shot_turns():
    rows = _train_rows()
    shots = few_shot_examples(rows, "volume", k_per_label=2, seed=0)
    prompt = build_prompt("volume", few_shot=shots, item_id="te-1")
    assert [t.role for t in prompt.turns] == ["user", "assistant"] * 4 + ["user"]
    pairs = zip(prompt.turns[0:8:2], prompt.turns[1:8:2], strict=True)
    for (row, answer), (user, assistant) in zip(shots, pairs, strict=True):
        assert user.audio == row["item_id"] and user.text == prompt.text
        assert assistant.text == answer and assistant.audio is None
        assert parse_answer(assistant.text, prompt.options).label == answer
    chat = to_chat(prompt)
    assert chat[-1] == {
        "role": "user",
        "content": [{"type": "text", "text": prompt.text}, {"type": "audio", "item_id": "te-1"}],
    }
    assert chat[1] == {"role": "assistant", "content": [{"type": "text", "text": shots[0][1]}]}
    with pytest.raises(ConfigError):
        build_prompt("volume", few_shot=[(rows[0], "louder")])


def test_expected_answer():
    assert expected_answer("increase") == "increase"
    assert expected_answer("constant", "ternary") == "constant"
    assert expected_answer("decrease", "vary") == "yes"
    assert expected_answer("constant", "vary") == "no"
    with pytest.raises(ConfigError):
        expected_answer("constant", "default")


def test_new_dimensions_say_which_way_increase_runs():
    assert question_text("distance").startswith(
        "Does the distance of the speaker increase or decrease over time?"
    )
    assert question_text("stereo_direction").startswith(
        "Does the stereo position (from left to right) increase or decrease over time?"
    )

"""The reasoning rung: the gradual items behind one text step (answers mapped to labels, a
negated question, a condition), words mapped onto the label slots, only the answer words
read, and scored on the same items as the bare question."""

from __future__ import annotations

import numpy as np
import pytest
from e2e.human_helpers import make_dataset

from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import EvalConfig, evaluate, load_results
from vocalgrad.evaluation.ladder import reasoning_drops
from vocalgrad.listeners.baselines import ConstantListener, RandomListener
from vocalgrad.questions import reasoning
from vocalgrad.questions.parsing import parse_labelled
from vocalgrad.questions.prompts import (
    build_prompt,
    expected_answer,
    few_shot_examples,
    get_variant,
    question_text,
    reads_directions,
)


def test_the_variants_are_registered_with_their_words_and_labels():
    assert reasoning.NAMES == ("mapped", "negated", "conditional")
    for name in reasoning.NAMES:
        assert get_variant(name).strict and len(get_variant(name).labels) == 2
    assert build_prompt("volume", "mapped").label_of == {"A": "increase", "B": "decrease"}
    assert build_prompt("volume", "negated").label_of == {"yes": "decrease", "no": "increase"}
    assert build_prompt("volume", "conditional").label_of == {
        "blue": "increase",
        "green": "decrease",
    }
    assert question_text("voice_pitch", "negated") == (
        'Does the voice pitch NOT increase over time?\n\nAnswer with only one word: "yes" or "no".'
    )
    assert question_text("volume", "conditional").startswith(
        'If the volume increases over time, answer "blue"; otherwise, answer "green".'
    )
    # the labels are what a correct answer means, whatever the words
    assert expected_answer("decrease", "negated") == "decrease"
    assert expected_answer("increase", "mapped") == "increase"
    with pytest.raises(ConfigError, match="no answer among"):
        expected_answer("constant", "conditional")
    # asked of the gradual items only: the other formats keep their own variants
    with pytest.raises(ConfigError, match="asked with the variants default, swapped"):
        build_prompt("volume", "mapped", fmt="comparison")


@pytest.mark.parametrize(
    ("variant", "answer", "label"),
    [
        ("mapped", "A", "increase"),
        ("mapped", "B.", "decrease"),
        ("mapped", "The answer is B", "decrease"),
        ("mapped", "a", "increase"),  # the whole answer is the letter
        ("mapped", "A or B? A", "increase"),  # a restatement of the options is no answer
        ("mapped", "It is a decrease", None),  # the article is no answer; nor is a direction
        ("mapped", "A and B", None),
        ("negated", "Yes.", "decrease"),
        ("negated", "No, it does not.", "increase"),
        ("negated", "It increases.", None),  # the text step skipped: unparsed
        ("conditional", "blue", "increase"),
        ("conditional", "Green!", "decrease"),
        ("conditional", "not blue", "decrease"),
        ("conditional", "it goes up", None),
    ],
)
def test_only_the_answer_words_are_read(variant, answer, label):
    prompt = build_prompt("volume", variant)
    parsed = parse_labelled(answer, prompt.label_of, reads_directions(variant))
    assert parsed.label == label, parsed


def test_the_bare_question_still_reads_directions():
    assert reads_directions("default") and not reads_directions("negated")
    prompt = build_prompt("volume", "default")
    assert parse_labelled("It increases.", prompt.label_of).label == "increase"


@pytest.fixture(scope="module")
def tones(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("tones") / "ds", n_sources=4, n_train=4)


def test_few_shot_examples_answer_in_the_variants_words(tones):
    from vocalgrad.dataset import load_rows

    rows = load_rows(tones)
    examples = few_shot_examples(rows, "volume", 1, variant="mapped")
    assert sorted(label for _, label in examples) == ["decrease", "increase"]
    prompt = build_prompt("volume", "mapped", few_shot=examples, item_id="x")
    said = [t.text for t in prompt.turns if t.role == "assistant"]
    assert sorted(said) == ["A", "B"]


def test_the_same_items_are_scored_under_every_variant(tones, tmp_path):
    variants = ("default", *reasoning.NAMES)
    config = EvalConfig(mode="both", variants=variants)
    evaluate(tones, ConstantListener("increase"), tmp_path / "up", config)
    _, rows = load_results(tmp_path / "up")
    for variant in variants:
        for mode in ("choice", "generate"):
            mine = [r for r in rows if r["variant"] == variant and r["mode"] == mode]
            assert {r["predicted"] for r in mine} == {"increase"}, (variant, mode)
            assert np.mean([r["correct"] for r in mine]) == 0.5
    said = {r["response"] for r in rows if r["mode"] == "generate"}
    assert said == {"increase", "A", "no", "blue"}  # each variant's word for "increase"
    drops = reasoning_drops([r for r in rows if r["mode"] == "choice"])
    assert drops["reasoning"]["drop"] == 0.0 and drops["negated"]["n"] == len(mine)
    evaluate(tones, RandomListener(), tmp_path / "random", EvalConfig(variants=variants))
    _, rows = load_results(tmp_path / "random")
    assert {r["parse_status"] for r in rows} == {"ok"}

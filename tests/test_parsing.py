"""The answer parser on real-looking model outputs, and the published parser's behaviour."""

from __future__ import annotations

import pytest

from vocalgrad.questions.parsing import ParsedAnswer, parse_answer, parse_published

BINARY = ("increase", "decrease")
TERNARY = ("increase", "decrease", "constant")
YES_NO = ("yes", "no")

# (response, options, expected label, expected status)
CASES = [
    # plain answers, case, quotes, markdown and "Answer:" prefixes
    ("increase", BINARY, "increase", "ok"),
    ("Decrease.", BINARY, "decrease", "ok"),
    ('"increase"', BINARY, "increase", "ok"),
    ("\u201cDecrease\u201d", BINARY, "decrease", "ok"),
    ("**Increase**", BINARY, "increase", "ok"),
    ("Answer: decrease", BINARY, "decrease", "ok"),
    ("Final answer: INCREASE", BINARY, "increase", "ok"),
    ("  increases\n", BINARY, "increase", "ok"),
    # morphology
    ("The volume is increasing.", BINARY, "increase", "ok"),
    ("The pitch increased over time.", BINARY, "increase", "ok"),
    ("It decreases.", BINARY, "decrease", "ok"),
    ("The speed is decreasing throughout the clip.", BINARY, "decrease", "ok"),
    # synonyms
    ("The pitch rises.", BINARY, "increase", "ok"),
    ("The volume goes up towards the end.", BINARY, "increase", "ok"),
    ("The speaker's voice went up.", BINARY, "increase", "ok"),
    ("It gets louder.", BINARY, "increase", "ok"),
    ("The speaker talks faster at the end.", BINARY, "increase", "ok"),
    ("The background noise grows.", BINARY, "increase", "ok"),
    ("There is more echo later in the clip.", BINARY, "increase", "ok"),
    ("The speaker is speeding up.", BINARY, "increase", "ok"),
    ("The pitch falls.", BINARY, "decrease", "ok"),
    ("The volume dropped.", BINARY, "decrease", "ok"),
    ("The pitch goes down.", BINARY, "decrease", "ok"),
    ("The voice becomes quieter and softer.", BINARY, "decrease", "ok"),
    ("The speaker slows down.", BINARY, "decrease", "ok"),
    ("There is less distortion at the end.", BINARY, "decrease", "ok"),
    ("The clarity declines.", BINARY, "decrease", "ok"),
    ("The noise level is reduced over time.", BINARY, "decrease", "ok"),
    ("The vibration diminishes.", BINARY, "decrease", "ok"),
    ("The pitch gets lower.", BINARY, "decrease", "ok"),
    # negation
    ("The volume does not increase.", BINARY, "decrease", "ok"),
    ("It doesn't increase.", BINARY, "decrease", "ok"),
    ("It doesn\u2019t decrease.", BINARY, "increase", "ok"),
    ("The pitch is not increasing.", BINARY, "decrease", "ok"),
    ("The echo never decreases.", BINARY, "increase", "ok"),
    ("No increase.", BINARY, "decrease", "ok"),
    ("It does not increase, it decreases.", BINARY, "decrease", "ok"),
    ("It doesn't decrease; rather it increases.", BINARY, "increase", "ok"),
    ("The volume increases, not decreases.", BINARY, "increase", "ok"),
    ("It neither increases nor decreases.", BINARY, None, "unparsed"),
    ("It neither increases nor decreases.", TERNARY, "constant", "ok"),
    ("The volume does not increase or decrease.", TERNARY, "constant", "ok"),
    ("The pitch is not increasing.", TERNARY, None, "ambiguous"),
    # both directions asserted
    ("It increases then decreases.", BINARY, None, "ambiguous"),
    ("The pitch rises at first and falls at the end.", BINARY, None, "ambiguous"),
    ("Increase or decrease", BINARY, None, "unparsed"),
    # echoes of the question do not count as an answer
    ("Does the volume increase or decrease? It decreases.", BINARY, "decrease", "ok"),
    ("Whether it increases or decreases: increase.", BINARY, "increase", "ok"),
    (
        "It could increase, decrease, or stay constant; here it stays constant.",
        TERNARY,
        "constant",
        "ok",
    ),
    # ternary
    ("constant", TERNARY, "constant", "ok"),
    ("The volume stays the same.", TERNARY, "constant", "ok"),
    ("The pitch remains unchanged.", TERNARY, "constant", "ok"),
    ("The speed does not change.", TERNARY, "constant", "ok"),
    ("It remains steady throughout.", TERNARY, "constant", "ok"),
    ("No change.", TERNARY, "constant", "ok"),
    ("The noise is more or less constant.", TERNARY, "constant", "ok"),
    ("It stays flat at first and then increases.", TERNARY, "increase", "ok"),
    ("The volume stays the same.", BINARY, None, "unparsed"),  # not an offered option
    # yes / no (change detection)
    ("Yes", YES_NO, "yes", "ok"),
    ("No.", YES_NO, "no", "ok"),
    ("Yes, the volume changes.", YES_NO, "yes", "ok"),
    ("No, it stays the same.", YES_NO, "no", "ok"),
    ("The answer is yes.", YES_NO, "yes", "ok"),
    ("The pitch does not change.", YES_NO, "no", "ok"),
    ("The speaker gets louder over time.", YES_NO, "yes", "ok"),
    ("It rises and then falls.", YES_NO, "yes", "ok"),
    # refusals, chatter, empty
    ("I'm sorry, I cannot listen to audio.", BINARY, None, "unparsed"),
    ("I don't know.", BINARY, None, "unparsed"),
    ("I would need more information to answer.", BINARY, None, "unparsed"),
    ("It is more likely to decrease.", BINARY, "decrease", "ok"),
    ("", BINARY, None, "empty"),
    ("   \n", BINARY, None, "empty"),
    (None, BINARY, None, "empty"),
    ("...", BINARY, None, "empty"),
]


@pytest.mark.parametrize(("text", "options", "label", "status"), CASES)
def test_parse_answer(text, options, label, status):
    assert parse_answer(text, options) == ParsedAnswer(label, status)


def test_yes_no_both_words_is_ambiguous_unless_answer_leads():
    # "yes and no" starts with yes: the leading word is the answer.
    assert parse_answer("yes and no", YES_NO).label == "yes"
    assert parse_answer("Hard to say: yes, or maybe no.", YES_NO).status == "ambiguous"


def test_case_table_is_large_and_covers_every_status():
    assert len(CASES) >= 40
    assert {status for *_, status in CASES} == {"ok", "unparsed", "ambiguous", "empty"}


def test_label_is_none_unless_ok():
    for text, options, *_ in CASES:
        parsed = parse_answer(text, options)
        assert (parsed.label is not None) == parsed.ok


PUBLISHED = [
    ("increase", "increase", "ok"),
    ("Decreases.", "decrease", "ok"),
    ("It increases and increases.", "increase", "ok"),
    ("increasing", None, "unparsed"),  # whole-word only: no -ing / -ed forms
    ("The pitch increased.", None, "unparsed"),
    ("It goes up.", None, "unparsed"),  # no synonyms
    ("It does not increase.", "increase", "ok"),  # no negation handling
    ("It increases then decreases.", None, "ambiguous"),
    ("Does it increase or decrease? Decrease.", None, "ambiguous"),
    ("", None, "empty"),
]


@pytest.mark.parametrize(("text", "label", "status"), PUBLISHED)
def test_parse_published(text, label, status):
    assert parse_published(text) == ParsedAnswer(label, status)

"""Question templates and their variants, kept as data so a run manifest can name them.

The published default prompt is reproduced verbatim (reference protocol, section 2). Every
variant is a named member of `REGISTRY` (the package's own, listed in `BUILTIN_VARIANTS`
order; a third-party package adds one through the ``vocalgrad.variants`` entry-point group, a
test or a notebook through `register_variant`); a listener never formats prompts itself but
turns the `Prompt` built here into its own chat messages, so every model sees the same words.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from vocalgrad import dimensions, formats
from vocalgrad.errors import ConfigError
from vocalgrad.formats.base import Wording
from vocalgrad.questions import reasoning
from vocalgrad.records import LABELS
from vocalgrad.registry import Registry
from vocalgrad.signal.kinds import SPEECH

TARGET = "<target>"
"""Audio placeholder for the clip under test when `build_prompt` is called without an item id."""

BINARY_INSTRUCTION = 'Answer with only one word: "increase" or "decrease".'
SWAPPED_INSTRUCTION = 'Answer with only one word: "decrease" or "increase".'
TERNARY_INSTRUCTION = 'Answer with only one word: "increase", "decrease" or "constant".'
VARY_INSTRUCTION = 'Answer with only one word: "yes" or "no".'

# Question formats (`vocalgrad build --question-format`, `vocalgrad.formats`) word their
# questions themselves (`QuestionFormat.wording`) from a variant below: the gradual format asks
# every variant's own question; a held format asks the variants it lists (`variants`) in its
# own words. Every format's answer words map onto the labels increase / decrease, so parsing,
# scoring, d' and c are the same for every format (comparison: "higher" = the second part is
# higher = increase; recognition: the category an increase moves towards = increase).


@dataclass(frozen=True)
class Variant:
    """One question format: question template, instruction line and answer options.

    `question` is either one template with an `{attribute}` field or a `Paraphrase`: a fixed
    question per category, for the categories that declare paraphrases.
    """

    name: str
    question: str | Paraphrase
    instruction: str
    options: tuple[str, ...]
    description: str = ""
    # the label (increase / decrease) each option means, where the words are not the labels
    # (the reasoning variants' "A" / "B"); empty: the options are the labels
    labels: tuple[str, ...] = ()
    # only the answer words count: an answer in the direction lexicon is not read
    strict: bool = False

    def categories(self) -> tuple[str, ...] | None:
        """Categories this variant supports; None means any."""
        if isinstance(self.question, str):
            return None
        return tuple(self.question.table())


@dataclass(frozen=True)
class Paraphrase:
    """The question of variant ``paraphraseN``: the N-th of the everyday wordings a dimension
    declares (``QUESTION.paraphrases`` in its module), 0-based ``index``."""

    index: int

    def table(self) -> dict[str, str]:
        """Category -> question, over the dimensions that declare this paraphrase."""
        return {
            dim.name: dim.QUESTION.paraphrases[self.index]
            for dim in dimensions.bound()
            if len(dim.QUESTION.paraphrases) > self.index
        }


BUILTIN_VARIANTS: tuple[Variant, ...] = (
    Variant(
        "default",
        "Does the {attribute} increase or decrease over time?",
        BINARY_INSTRUCTION,
        LABELS,
        "published default prompt, verbatim",
    ),
    Variant(
        "swapped",
        "Does the {attribute} decrease or increase over time?",
        SWAPPED_INSTRUCTION,
        ("decrease", "increase"),
        "option order reversed in question and instruction: exposes first-option bias",
    ),
    Variant(
        "clip",
        "Does the {attribute} of this audio clip increase or decrease over time?",
        BINARY_INSTRUCTION,
        LABELS,
        "names the audio clip explicitly",
    ),
    *(
        Variant(
            f"paraphrase{i + 1}",
            Paraphrase(i),
            BINARY_INSTRUCTION,
            LABELS,
            "everyday wording; only dimensions that declare paraphrases",
        )
        for i in range(3)
    ),
    Variant(
        "ternary",
        "Does the {attribute} increase, decrease, or stay constant over time?",
        TERNARY_INSTRUCTION,
        ("increase", "decrease", "constant"),
        "three-way answer; lets 'nothing changes' be said",
    ),
    Variant(
        "vary",
        "Does the {attribute} change over time?",
        VARY_INSTRUCTION,
        ("yes", "no"),
        "binary change detection, no direction",
    ),
    *(Variant(**spec, strict=True) for spec in reasoning.SPECS),
)
"""The package's own variants, in listing order."""


@dataclass(frozen=True)
class Turn:
    """One chat turn: optional audio (an item id, or `TARGET`) and optional text.

    `audio_position` says whether the audio comes before or after the text inside the turn.
    """

    role: str
    text: str | None = None
    audio: str | None = None
    audio_position: str = "after"

    def parts(self) -> list[tuple[str, str]]:
        """Ordered ("audio", item_id) / ("text", text) parts, the order the model sees them."""
        audio = [("audio", self.audio)] if self.audio is not None else []
        text = [("text", self.text)] if self.text else []
        return audio + text if self.audio_position == "before" else text + audio


@dataclass(frozen=True)
class Prompt:
    """A fully specified question for one category: what to say, what answers to expect."""

    text: str
    options: tuple[str, ...]
    variant: str
    category: str
    audio_position: str = "after"
    turns: tuple[Turn, ...] = field(default_factory=tuple)
    labels: tuple[str, ...] = ()  # the label each option means, where the words differ from labels

    @property
    def label_of(self) -> dict[str, str]:
        """Answer word -> label (increase / decrease / ...): the same words for gradual items."""
        return dict(zip(self.options, self.labels or self.options, strict=True))

    def for_item(self, item_id: str) -> Prompt:
        """The same prompt with the `TARGET` placeholder replaced by a concrete item id."""
        turns = tuple(replace(t, audio=item_id) if t.audio == TARGET else t for t in self.turns)
        return replace(self, turns=turns)


def _variant(declared: object) -> Variant:
    """A plug-in's or `register_variant`'s variant, checked to be one."""
    if not isinstance(declared, Variant):
        raise TypeError(f"{declared!r} is not a prompt Variant")
    return declared


_RANK = {v.name: i for i, v in enumerate(BUILTIN_VARIANTS)}
REGISTRY: Registry[Variant] = Registry(
    "prompt variant",
    lambda: BUILTIN_VARIANTS,
    group="vocalgrad.variants",
    check=_variant,
    sort_key=lambda v: _RANK.get(v.name, len(_RANK)),
)
"""Every prompt variant: the package's own (`BUILTIN_VARIANTS`, in their order), plug-ins'
(entry-point group ``vocalgrad.variants``, each entry a `Variant`) and run-time ones
(`register_variant`), these last two after the package's own, by name."""


def get_variant(name: str) -> Variant:
    """The prompt variant called `name`: the one lookup by name.

    Parameters
    ----------
    name : str
        The variant's name (``default``, ``swapped``, ...).

    Returns
    -------
    Variant
        The variant.

    Raises
    ------
    ConfigError
        None has that name; the message suggests the closest and lists every name.
    """
    return REGISTRY.get(name)


def variant_names() -> tuple[str, ...]:
    """Every prompt variant's name, in listing order (the package's own first).

    Returns
    -------
    tuple of str
        The names.
    """
    return REGISTRY.names()


def variants() -> tuple[Variant, ...]:
    """Every prompt variant, in listing order (the package's own first).

    Returns
    -------
    tuple of Variant
        The variants.
    """
    return REGISTRY.values()


def register_variant(variant: Variant, *, replace: bool = False) -> Variant:
    """Add a prompt variant in this process (a test's, or one defined in a notebook).

    Parameters
    ----------
    variant : Variant
        The variant; its ``name`` is what ``--variant`` and `get_variant` take.
    replace : bool
        Allow a variant of the same name to be replaced.

    Returns
    -------
    Variant
        The variant, now found by `get_variant` and listed by `variants`.

    Raises
    ------
    ConfigError
        A variant of that name exists and ``replace`` is false.
    TypeError
        It is not a `Variant`.
    """
    return REGISTRY.register(variant, replace=replace)


def unregister_variant(name: str) -> None:
    """Remove a variant added with `register_variant` (no error if it is not there).

    Parameters
    ----------
    name : str
        The variant's name.
    """
    REGISTRY.unregister(name)


def _wording(
    category: str, variant: str, fmt: str, kind: str = SPEECH, second: str | None = None
) -> Wording:
    """(question, instruction, answer words, their labels) of one category, variant, format
    and kind of sound (and the second dimension a two-dimension question names)."""
    form = formats.get(fmt)
    v = get_variant(variant)
    if not form.asks(variant):
        raise ConfigError(
            f"{fmt} items are asked with the variants {', '.join(form.variants or ())}, "
            f"not {variant!r}"
        )
    # a format that names one dimension keeps its three-argument `wording`
    if second:
        return form.wording(category, v, kind, second=second)
    return form.wording(category, v, kind)


def reads_directions(variant: str, fmt: str = formats.DEFAULT) -> bool:
    """Whether an answer naming none of the answer words is read by the direction lexicon
    (`parse_labelled`'s ``lexicon``): the format's answers are directions
    (`QuestionFormat.answers_by_direction`) and the variant counts more than its own words
    (a reasoning variant's "it increases" has skipped its text step: `Variant.strict`)."""
    return formats.get(fmt).answers_by_direction and not get_variant(variant).strict


def second_of(row: Mapping) -> str | None:
    """The second dimension a row's question names (two-dimension formats), or None."""
    return row.get("second_category") or None


def question_text(
    category: str,
    variant: str = "default",
    fmt: str = formats.DEFAULT,
    kind: str = SPEECH,
    second: str | None = None,
) -> str:
    """Question line plus blank line plus instruction line, exactly as the model reads it."""
    question, instruction, _, _ = _wording(category, variant, fmt, kind, second)
    return f"{question}\n\n{instruction}"


def expected_answer(direction: str, variant: str = "default") -> str:
    """What a correct answer to a clip of this direction means under this variant: its label
    (increase / decrease / constant), or "yes" / "no" where those words are the labels (change
    detection)."""
    v = get_variant(variant)
    labels = v.labels or v.options
    if labels == ("yes", "no"):
        return "no" if direction == "constant" else "yes"
    if direction not in labels:
        raise ConfigError(
            f"direction {direction!r} has no answer among {labels} (variant {variant!r})"
        )
    return direction


def build_prompt(
    category: str,
    variant: str = "default",
    audio_first: bool = False,
    few_shot: Sequence[tuple[Mapping, str]] = (),
    item_id: str | None = None,
    fmt: str = formats.DEFAULT,
    kind: str = SPEECH,
    second: str | None = None,
) -> Prompt:
    """Build the turns for one question, optionally preceded by answered examples.

    Each few-shot example becomes a user turn (question + the example's audio) followed by an
    assistant turn with its answer (given as a label, written as the format's answer word),
    so the model sees the format answered before the real question. The published default
    puts the text before the audio (`audio_first=False`). ``kind`` is the kind of sound asked
    about (a row's ``source_kind``): the question names a tone as a tone. `second` is the other
    dimension a two-dimension question names (the row's ``second_category``, `second_of`).
    """
    question, instruction, options, labels = _wording(category, variant, fmt, kind, second)
    text = f"{question}\n\n{instruction}"
    word = dict(zip(labels, options, strict=True))
    position = "before" if audio_first else "after"
    turns: list[Turn] = []
    for row, answer in few_shot:
        if answer not in word:
            raise ConfigError(
                f"few-shot answer {answer!r} is not one of {labels} (variant {variant!r})"
            )
        turns.append(Turn("user", text, str(row["item_id"]), position))
        turns.append(Turn("assistant", word[answer]))
    turns.append(Turn("user", text, TARGET if item_id is None else item_id, position))
    return Prompt(
        text,
        options,
        variant,
        category,
        position,
        tuple(turns),
        labels if labels != options else (),
    )


def choice_options(prompt: Prompt) -> tuple[str, ...]:
    """The answer strings to score by log-likelihood, in the order presented to the model.

    Returned bare (no leading space or quotes); tokenisation is the listener's business.
    """
    return prompt.options


def to_chat(prompt: Prompt) -> list[dict]:
    """Hugging Face style chat messages; audio parts carry the item id to be resolved."""
    messages = []
    for turn in prompt.turns:
        content = [
            {"type": "audio", "item_id": value}
            if kind == "audio"
            else {"type": "text", "text": value}
            for kind, value in turn.parts()
        ]
        messages.append({"role": turn.role, "content": content})
    return messages


def few_shot_examples(
    train_rows: Iterable[Mapping],
    category: str,
    k_per_label: int = 2,
    seed: int = 0,
    variant: str = "default",
    second: str | None = None,
) -> list[tuple[Mapping, str]]:
    """Pick `k_per_label` train examples per answer, balanced and deterministic.

    Only rows with split "train" of this category are used (and, for a two-dimension question,
    of the same `second` dimension: the examples are asked the same question). The choice
    depends only on the seed and the set of candidate item ids (not on row order), prefers
    distinct sources so the examples do not all share one voice and sentence, and interleaves
    the answers in a seeded order so the last example does not always carry the same label.
    """
    v = get_variant(variant)
    candidates = sorted(
        (
            r
            for r in train_rows
            if r.get("split") == "train"
            and r.get("category") == category
            and second_of(r) == (second or None)
        ),
        key=lambda r: str(r["item_id"]),
    )
    rng = np.random.default_rng([seed, zlib.crc32(f"{category}|{variant}".encode())])
    by_answer: dict[str, list[Mapping]] = {}
    for row in candidates:
        try:
            answer = expected_answer(str(row.get("direction")), variant)
        except ConfigError:
            continue
        by_answer.setdefault(answer, []).append(row)
    picked: dict[str, list[Mapping]] = {}
    answers = v.labels or v.options
    for answer in answers:
        pool = by_answer.get(answer, [])
        if len(pool) < k_per_label:
            raise ConfigError(
                f"need {k_per_label} train examples answered {answer!r} for {category!r}, "
                f"found {len(pool)}; build a train split or lower k_per_label"
            )
        order = rng.permutation(len(pool))
        chosen, sources = [], set()
        for i in order:  # first pass: distinct sources; second pass: fill up
            if pool[i].get("source_id") not in sources:
                chosen.append(pool[i])
                sources.add(pool[i].get("source_id"))
            if len(chosen) == k_per_label:
                break
        for i in order:
            if len(chosen) == k_per_label:
                break
            if not any(pool[i] is c for c in chosen):
                chosen.append(pool[i])
        picked[answer] = chosen
    examples = []
    for round_ in range(k_per_label):
        for j in rng.permutation(len(answers)):
            answer = answers[j]
            examples.append((picked[answer][round_], answer))
    return examples

"""The reasoning rung: the gradual format's own clips behind an instruction that adds one text
step to the question, so that the drop from the bare question, paired by item, is the cost of
reasoning about what was heard, not of hearing it.

Three steps, each a prompt variant (`vocalgrad.questions.prompts.REGISTRY`) whose answer words
map onto the label slots as any format's words do (`Variant.labels`):

- ``mapped``: the answers are arbitrary labels ("A" if it increases, "B" if it decreases);
- ``negated``: the question is negated ("Does the pitch NOT increase?"; "yes" = decrease);
- ``conditional``: a condition picks the answer word ("If it increases, answer 'blue';
  otherwise 'green'").

Only the answer words count (`Variant.strict`): an answer that names the direction instead
("it increases") has skipped the text step, and is unparsed rather than read as a direction.
The bare rung they are paired with is `BARE` on the same items.
"""

from __future__ import annotations

from vocalgrad.records import LABELS

RUNG = "reasoning"
"""The ladder rung these variants make (declared with its place on the gradual format's
``rungs``, `vocalgrad.formats.base.Rung`: last, measured against direction)."""
BARE = "default"
"""The variant of the same items each reasoning variant's drop is measured against."""

INCREASE, DECREASE = LABELS

SPECS: tuple[dict, ...] = (
    {
        "name": "mapped",
        "question": (
            "Does the {attribute} increase or decrease over time? "
            'Answer "A" if it increases and "B" if it decreases.'
        ),
        "instruction": 'Answer with only one letter: "A" or "B".',
        "options": ("A", "B"),
        "labels": (INCREASE, DECREASE),
        "description": "reasoning: the answers mapped to arbitrary labels (A = increase)",
    },
    {
        "name": "negated",
        "question": "Does the {attribute} NOT increase over time?",
        "instruction": 'Answer with only one word: "yes" or "no".',
        "options": ("yes", "no"),
        "labels": (DECREASE, INCREASE),
        "description": "reasoning: the question negated (yes = it does not increase = decrease)",
    },
    {
        "name": "conditional",
        "question": (
            'If the {attribute} increases over time, answer "blue"; otherwise, answer "green".'
        ),
        "instruction": 'Answer with only one word: "blue" or "green".',
        "options": ("blue", "green"),
        "labels": (INCREASE, DECREASE),
        "description": "reasoning: a condition picks the answer word (blue = increase)",
    },
)
"""The reasoning variants, as `Variant` fields (each ``strict``: only its words count)."""

NAMES: tuple[str, ...] = tuple(spec["name"] for spec in SPECS)
"""The reasoning variants' names, in the order listed."""

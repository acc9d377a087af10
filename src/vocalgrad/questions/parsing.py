"""Free text -> increase / decrease / constant / yes / no, or an honest "could not tell".

The published parser (whole-word `increase(s)` / `decrease(s)`, exactly one must appear) is
kept as `parse_published` for comparability. `parse_answer` understands what models actually
write: inflections and synonyms ("went up", "quieter"), negation ("does not increase"),
echoes of the question ("increase or decrease? ... decrease") and hedges that assert both
directions. It never guesses: an answer it cannot resolve is "unparsed" or "ambiguous" and
is scored as wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from vocalgrad.records import LABELS

STATUSES = ("ok", "unparsed", "ambiguous", "empty")

_INCREASE = """
increase increases increasing increased
rise rises rising rose risen
grow grows growing grew grown
climb climbs climbing climbed
higher louder faster stronger more
intensify intensifies intensifying intensified
go up|goes up|going up|went up|gone up|moves up|moving up|ramps up|ramping up|ramped up
speeds up|speeding up|sped up|speed up|turns up|turned up|builds up|building up
"""

_DECREASE = """
decrease decreases decreasing decreased
fall falls falling fell fallen
drop drops dropping dropped
decline declines declining declined
reduce reduces reducing reduced reduction
diminish diminishes diminishing diminished
lessen lessens lessening lessened
fade fades fading faded
lower lowers lowering lowered
quieter softer slower weaker less
go down|goes down|going down|went down|gone down|moves down|moving down
slows down|slowing down|slowed down|slow down|dies down|died down|dying down|turns down|turned down
"""

_CONSTANT = """
constant constantly unchanged unchanging steady steadily stable flat consistent
same|the same
stay the same|stays the same|stayed the same|staying the same|remain the same|remains the same
"""

# "change" is not a direction: negated it means constant, asserted it means "yes" in the
# change-detection format.
_CHANGE = """
change changes changed changing
vary varies varied varying variation
fluctuate fluctuates fluctuating fluctuated
"""

_NEGATORS = frozenset({"not", "never", "no", "neither", "nor", "without", "cannot", "hardly"})
# Words that end a negation's reach: "does not increase, it decreases" / "not X but Y".
_BOUNDARIES = frozenset(
    {
        ".",
        ",",
        ";",
        ":",
        "!",
        "?",
        "but",
        "rather",
        "instead",
        "then",
        "it",
        "which",
        "so",
        "while",
        "whereas",
        "although",
        "though",
        "however",
    }
)
_NEGATION_WINDOW = 3  # words between a negator and what it negates
_FILLER = (("more", "or", "less"),)  # idioms whose words must not count as directions
# "more" / "less" before these words is about the answerer, not the audio ("I need more
# information", "more likely to decrease").
_HEDGE_AFTER = frozenset(
    {
        "information",
        "info",
        "context",
        "details",
        "detail",
        "data",
        "likely",
        "certain",
        "confident",
        "specific",
        "precise",
        "time",
    }
)
_CHOICES = frozenset({"increase", "decrease", "constant"})
# Words allowed between the options of a restated question ("increase, decrease, or stay").
_LIST_GLUE = frozenset({",", "or", "stay", "stays", "remain", "remains"})


def _phrases(spec: str) -> list[tuple[str, ...]]:
    out = []
    for line in spec.strip().splitlines():
        chunks = line.split("|") if "|" in line else line.split()
        out.extend(tuple(c.split()) for c in chunks if c.strip())
    return out


_LEXICON: list[tuple[tuple[str, ...], str]] = sorted(
    [
        (p, concept)
        for concept, spec in (
            ("increase", _INCREASE),
            ("decrease", _DECREASE),
            ("constant", _CONSTANT),
            ("change", _CHANGE),
        )
        for p in _phrases(spec)
    ],
    key=lambda pc: -len(pc[0]),  # longest match first: "stays the same" before "same"
)
_MAX_PHRASE = max(len(p) for p, _ in _LEXICON)
_BY_FIRST: dict[str, list[tuple[tuple[str, ...], str]]] = {}
for _phrase, _concept in _LEXICON:
    _BY_FIRST.setdefault(_phrase[0], []).append((_phrase, _concept))

_OPPOSITE = {"increase": "decrease", "decrease": "increase"}
_PUBLISHED = re.compile(r"\b(increase|decrease)s?\b", re.IGNORECASE)


@dataclass(frozen=True)
class ParsedAnswer:
    """The label read from a response (None unless status is "ok") and why."""

    label: str | None
    status: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class _Mention:
    concept: str
    start: int
    negated: bool


def _normalise(text: str) -> list[str]:
    """Lower-case word and punctuation tokens, contractions expanded, quotes dropped."""
    t = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    t = re.sub(r"^\W*(final\s+)?answer\s*(is)?\s*[:\-]?", " ", t)
    t = re.sub(r"\bwon't\b", "will not", t)
    t = re.sub(r"\bcan't\b", "can not", t)
    t = re.sub(r"n't\b", " not", t)
    return re.findall(r"[a-z]+|[.,;:!?]", t)


def _mentions(tokens: list[str]) -> list[_Mention]:
    found: list[tuple[str, int]] = []
    i = 0
    while i < len(tokens):
        if any(tuple(tokens[i : i + len(f)]) == f for f in _FILLER):
            i += 3
            continue
        if tokens[i] in ("more", "less") and i + 1 < len(tokens) and tokens[i + 1] in _HEDGE_AFTER:
            i += 2
            continue
        for phrase, concept in _BY_FIRST.get(tokens[i], ()):
            if tuple(tokens[i : i + len(phrase)]) == phrase:
                found.append((concept, i))
                i += len(phrase)
                break
        else:
            i += 1
    mentions = [_Mention(concept, start, _negated(tokens, start)) for concept, start in found]
    return _drop_echoes(tokens, mentions)


def _negated(tokens: list[str], start: int) -> bool:
    """A negator within _NEGATION_WINDOW words before `start`, with no boundary between."""
    for j in range(start - 1, max(start - 1 - _NEGATION_WINDOW, -1), -1):
        if tokens[j] in _BOUNDARIES:
            return False
        if tokens[j] in _NEGATORS:
            return True
    return False


def _drop_echoes(tokens: list[str], mentions: list[_Mention]) -> list[_Mention]:
    """Remove un-negated lists like "increase or decrease" / "increase, decrease, or stay
    constant": a restatement of the question, not an answer. Negated lists ("does not
    increase or decrease") are kept: they mean constant."""
    drop: set[int] = set()
    k = 0
    while k < len(mentions):
        end = k
        while (
            end + 1 < len(mentions)
            and mentions[end + 1].concept != mentions[end].concept
            and set(tokens[mentions[end].start + 1 : mentions[end + 1].start]) <= _LIST_GLUE
            and {mentions[end].concept, mentions[end + 1].concept} <= _CHOICES
        ):
            end += 1
        run = mentions[k : end + 1]
        glue = tokens[run[0].start : run[-1].start]
        if end > k and "or" in glue and not any(m.negated for m in run):
            drop.update(range(k, end + 1))
        k = end + 1
    return [m for k, m in enumerate(mentions) if k not in drop]


def _direction(mentions: list[_Mention], options: tuple[str, ...]) -> ParsedAnswer:
    pos = {m.concept for m in mentions if not m.negated}
    neg = {m.concept for m in mentions if m.negated}
    if "increase" in pos and "decrease" in pos:
        return ParsedAnswer(None, "ambiguous")
    for d in LABELS:
        if d in pos:
            return _within(d, options)
    if "constant" in pos or "change" in neg or {"increase", "decrease"} <= neg:
        return _within("constant", options)
    negated_dirs = neg & {"increase", "decrease"}
    if len(negated_dirs) == 1:
        if "constant" in options:  # "does not increase" could be decrease or constant
            return ParsedAnswer(None, "ambiguous")
        return _within(_OPPOSITE[negated_dirs.pop()], options)
    return ParsedAnswer(None, "unparsed")


def _within(label: str, options: tuple[str, ...]) -> ParsedAnswer:
    return ParsedAnswer(label, "ok") if label in options else ParsedAnswer(None, "unparsed")


def _yes_no(tokens: list[str], mentions: list[_Mention]) -> ParsedAnswer:
    if tokens[0] in ("yes", "no"):
        return ParsedAnswer(tokens[0], "ok")
    said = {t for t in tokens if t in ("yes", "no")}
    if len(said) == 2:
        return ParsedAnswer(None, "ambiguous")
    if said:
        return ParsedAnswer(said.pop(), "ok")
    content = _direction(mentions, ("increase", "decrease", "constant"))
    if content.status == "ambiguous" and any(not m.negated for m in mentions):
        return ParsedAnswer("yes", "ok")  # "rises then falls" is still a change
    changed = any(m.concept == "change" and not m.negated for m in mentions) or content.label in (
        "increase",
        "decrease",
    )
    steady = content.label == "constant"
    if changed and not steady:
        return ParsedAnswer("yes", "ok")
    if steady and not changed:
        return ParsedAnswer("no", "ok")
    return ParsedAnswer(None, "ambiguous" if changed else "unparsed")


def parse_answer(text: str | None, options: tuple[str, ...] = LABELS) -> ParsedAnswer:
    """Read a model's free-text answer as one of `options`.

    `options` selects the format: a subset of increase / decrease / constant, or yes / no for
    change detection. A label outside `options` (e.g. "stays the same" when only increase and
    decrease were offered) is "unparsed", not mapped to the nearest option.
    """
    tokens = _normalise(text or "")
    if not any(t.isalpha() for t in tokens):
        return ParsedAnswer(None, "empty")
    mentions = _mentions(tokens)
    if "yes" in options and "no" in options:
        return _yes_no(tokens, mentions)
    return _direction(mentions, tuple(options))


def parse_labelled(
    text: str | None, label_of: Mapping[str, str], lexicon: bool = True
) -> ParsedAnswer:
    """Read an answer given in a format's own words (recognition: "loud" / "quiet";
    comparison: "higher" / "lower") as the label the word means (`Prompt.label_of`).

    One answer word asserted (or the other one negated) decides; a restatement of the
    options ("loud or quiet? quiet") is not an answer; two words asserted are ambiguous.
    An answer of several words ("voice pitch") counts where its words stand together; a
    one-letter answer ("A") only as a capital standing alone (the article "a" is no answer).
    Without an answer word the direction lexicon reads it within the labels ("it sounds
    louder" -> increase), unless `lexicon` is false: where the words are not directions
    (early / late, same / different, `QuestionFormat.answers_by_direction`) or only the
    words count (a reasoning variant, `Variant.strict`), "it rises" says nothing about the
    answer and is unparsed. Where the words are the labels this is `parse_answer`."""
    labels = tuple(dict.fromkeys(label_of.values()))
    if all(word == label for word, label in label_of.items()):
        return parse_answer(text, labels)
    tokens = _normalise(text or "")
    if not any(t.isalpha() for t in tokens):
        return ParsedAnswer(None, "empty")
    letters = {w: label for w, label in label_of.items() if len(w) == 1 and w.isalpha()}
    phrases = {tuple(_normalise(w)): label for w, label in label_of.items() if w not in letters}
    said: set[str] = set()
    denied: set[str] = set()
    i = 0
    while i < len(tokens):
        found = _phrase_at(tokens, i, phrases)
        if found is not None:
            after = i + len(found)
            echo = after < len(tokens) and tokens[after] == "or"
            if echo and _phrase_at(tokens, after + 1, phrases) is not None:
                i = after + 1 + len(_phrase_at(tokens, after + 1, phrases) or ())
                continue  # an echo of the question's "X or Y"
            (denied if _negated(tokens, i) else said).add(phrases[found])
            i = after
            continue
        i += 1
    said |= _capitals(text or "", letters)
    if len(said) > 1:
        return ParsedAnswer(None, "ambiguous")
    if said:
        return ParsedAnswer(said.pop(), "ok")
    if len(denied) == 1 and len(labels) == 2:
        return ParsedAnswer(next(label for label in labels if label not in denied), "ok")
    if not lexicon:
        return ParsedAnswer(None, "unparsed")
    return parse_answer(text, labels)


def _phrase_at(
    tokens: list[str], i: int, phrases: Mapping[tuple[str, ...], str]
) -> tuple[str, ...] | None:
    """The longest answer phrase starting at token `i`, if any."""
    best = None
    for phrase in phrases:
        if phrase and tuple(tokens[i : i + len(phrase)]) == phrase:
            if best is None or len(phrase) > len(best):
                best = phrase
    return best


def _capitals(text: str, letters: Mapping[str, str]) -> set[str]:
    """The labels of one-letter answers standing alone as capitals ("A", "(B)", "A."), a
    restatement of the options ("A or B") left out."""
    if not letters:
        return set()
    whole = re.fullmatch(r"\W*([A-Za-z])\W*", text)
    if whole and whole.group(1).upper() in letters:  # the whole answer is the letter
        return {letters[whole.group(1).upper()]}
    alone = re.compile(r"(?<![A-Za-z'])([A-Z])(?![A-Za-z'])")
    echo = re.compile(r"(?<![A-Za-z'])[A-Z][\"')]*\s+or\s+[\"'(]*[A-Z](?![A-Za-z'])")
    return {letters[m] for m in alone.findall(echo.sub(" ", text)) if m in letters}


def parse_published(text: str | None) -> ParsedAnswer:
    """The published parser: whole-word, case-insensitive `increase(s)` / `decrease(s)`;
    valid only if exactly one of the two directions appears. No negation, no synonyms."""
    if not text or not text.strip():
        return ParsedAnswer(None, "empty")
    found = {m.lower() for m in _PUBLISHED.findall(text)}
    if len(found) == 1:
        return ParsedAnswer(found.pop(), "ok")
    return ParsedAnswer(None, "ambiguous" if found else "unparsed")

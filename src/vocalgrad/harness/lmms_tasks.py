"""The functions behind the lmms-eval tasks that `vocalgrad export lmms-eval` writes.

The exported YAML names them with `!function vocalgrad.harness.lmms_tasks.NAME`, so a task
folder holds no code of its own and an upgrade of vocalgrad upgrades every exported task.

Two of lmms-eval's traps are closed here:
- audio is typed as audio: `doc_to_messages` (chat models) sends the question then a content part
  of type "audio" (a dict without a type would be sent as video), and `doc_to_visual` (simple
  models) returns the decoded clip as `{"array", "sampling_rate", "type": "audio"}`;
- an adapter that turns a generation error into an empty answer is not silently scored as a
  wrong answer: `unparsed_rate` and `empty_rate` are metrics of every task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from vocalgrad.audio import load_audio
from vocalgrad.harness.items import answer_row, question, summary
from vocalgrad.questions.prompts import build_prompt, second_of
from vocalgrad.signal.kinds import row_kind

LISTENER = "lmms-eval"
# metric -> the `summarise` column it reports (overall); per category "<metric>_<category>"
SUMMARY_METRICS = {
    "accuracy": "accuracy",
    "accuracy_lo": "accuracy_lo",
    "accuracy_hi": "accuracy_hi",
    "balanced_accuracy": "balanced_accuracy",
    "dprime": "dprime",
    "criterion": "criterion",
    "unparsed_rate": "unparsed_rate",
    "increase_rate": "increase_rate",
}
PER_CATEGORY = ("accuracy", "dprime", "criterion")


def in_export(doc: Mapping, export: str | Path) -> dict:
    """The doc with its clip's path made absolute: docs.jsonl names it relative to the
    export folder, so the folder can move (an absolute path, from an older export, is kept).

    Parameters
    ----------
    doc : mapping
        One line of a task's docs.jsonl.
    export : str or Path
        The export folder, wherever it lies now.

    Returns
    -------
    dict
        A copy of the doc whose ``path`` is absolute.
    """
    return {**doc, "path": str(Path(export) / doc["path"])}


def doc_to_visual(doc: Mapping) -> list[dict]:
    """The clip for simple (non-chat) models, decoded as Hugging Face audio is: mono float32."""
    audio, sr = load_audio(doc["path"])
    return [{"array": audio, "sampling_rate": sr, "type": "audio"}]


def doc_to_text(doc: Mapping, lmms_eval_specific_kwargs: Mapping | None = None) -> str:
    """The question `vocalgrad eval` asks (pre/post prompts only when a model's kwargs add them)."""
    kwargs = lmms_eval_specific_kwargs or {}
    return (
        f"{kwargs.get('pre_prompt', '')}{question(doc, doc['variant'])}"
        f"{kwargs.get('post_prompt', '')}"
    )


def doc_to_messages(doc: Mapping, lmms_eval_specific_kwargs: Mapping | None = None) -> list[dict]:
    """One user turn for chat models, text then audio as `vocalgrad eval` sends it; the audio
    part is the clip's WAV path (chat adapters load paths themselves)."""
    return [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": doc_to_text(doc, lmms_eval_specific_kwargs)},
                {"type": "audio", "url": doc["path"]},
            ],
        }
    ]


def doc_to_target(doc: Mapping) -> str:
    """The answer word that is right for this clip ("increase", "higher", "loud", ...).

    Parameters
    ----------
    doc : mapping
        The lmms-eval document: a dataset row with its ``variant`` and ``format``.

    Returns
    -------
    str
        The option word of the clip's direction, as the question for its kind words it.
    """
    prompt = build_prompt(
        doc["category"],
        doc["variant"],
        fmt=doc["format"],
        kind=row_kind(doc),
        second=second_of(doc),
    )
    return {label: word for word, label in prompt.label_of.items()}[doc["direction"]]


def process_results(doc: Mapping, results: Sequence[str]) -> dict[str, dict]:
    """The answer read by our parser, as a `results.jsonl` row under every metric. Only the
    accuracy metrics carry a `score`, so lmms-eval's clustered stderr is computed for them alone."""
    row = answer_row(doc, results[0] if results else None, listener=LISTENER)
    scored = {**row, "score": float(row["correct"])}
    out = {name: (scored if name == "accuracy" else row) for name in SUMMARY_METRICS}
    out["empty_rate"] = row
    for name in PER_CATEGORY:
        out[f"{name}_{doc['category']}"] = scored if name == "accuracy" else row
    return out


@lru_cache(maxsize=32)
def _table(rows: tuple[tuple[tuple[str, object], ...], ...]) -> tuple[dict, ...]:
    return tuple(summary([dict(r) for r in rows]))


def _overall(items: Sequence[Mapping], column: str) -> float:
    """One column of `vocalgrad score`'s overall row; every metric's aggregation computes the
    same table once (memoised on the answers)."""
    frozen = tuple(tuple(sorted((k, v) for k, v in r.items() if k != "score")) for r in items)
    value = _table(frozen)[0][column]
    return float(value) if value is not None else float("nan")


def accuracy(items: Sequence[Mapping]) -> float:
    return _overall(items, "accuracy")


def accuracy_lo(items: Sequence[Mapping]) -> float:
    """Lower end of the 95% CI over source clusters (`vocalgrad score`'s rule)."""
    return _overall(items, "accuracy_lo")


def accuracy_hi(items: Sequence[Mapping]) -> float:
    return _overall(items, "accuracy_hi")


def balanced_accuracy(items: Sequence[Mapping]) -> float:
    return _overall(items, "balanced_accuracy")


def dprime(items: Sequence[Mapping]) -> float:
    return _overall(items, "dprime")


def criterion(items: Sequence[Mapping]) -> float:
    return _overall(items, "criterion")


def unparsed_rate(items: Sequence[Mapping]) -> float:
    """Answers our parser could not read (counted wrong in accuracy, left out of d' and c)."""
    return _overall(items, "unparsed_rate")


def increase_rate(items: Sequence[Mapping]) -> float:
    return _overall(items, "increase_rate")


def empty_rate(items: Sequence[Mapping]) -> float:
    """Empty answers: what some adapters return for a failed generation. Where it is not 0,
    the accuracy counts failures as wrong answers and should not be reported as is."""
    return (
        sum(r.get("parse_status") == "empty" for r in items) / len(items) if items else float("nan")
    )

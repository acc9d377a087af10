"""Run a listener over a dataset: prompts, controls, batching, caching, resumable results.

A run folder holds `manifest.json` and `results.jsonl` (one row per item x variant x
control x mode). Rows are appended and fsynced per batch, so a killed run resumes where
it stopped; an answer cache keyed by everything an answer depends on (`answer_key`: the
clips, the listener's identity and fitted state, its options and decoding, the prompt, the
mode) makes reruns and overlapping runs free, and says so: each row records whether its
answer came from the cache, and `use_cache=False` asks afresh. Per-item errors are recorded,
never scored as wrong.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import shlex
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import load_audio, resample
from vocalgrad.dataset import (
    content_sha256,
    dumps,
    is_official,
    load_rows,
    read_json,
    read_jsonl,
    repair_tail,
)
from vocalgrad.errors import (
    ConfigError,
    DatasetError,
    PartialBatchError,
    VocalgradError,
    did_you_mean,
)
from vocalgrad.evaluation.subset import balanced_subset
from vocalgrad.evaluation.subset import describe as describe_subset
from vocalgrad.executors import Executor
from vocalgrad.files import atomic_write_text, exclusive, naming
from vocalgrad.formats import of_row, row_format
from vocalgrad.listeners import Listener, Request
from vocalgrad.listeners.baselines import REVERSED_SUFFIX
from vocalgrad.progress import progress
from vocalgrad.provenance import versions
from vocalgrad.questions.parsing import parse_labelled
from vocalgrad.questions.prompts import (
    build_prompt,
    expected_answer,
    few_shot_examples,
    get_variant,
    reads_directions,
    second_of,
)
from vocalgrad.records import LABELS, EvalCounts, ResultRow
from vocalgrad.signal.kinds import row_kind
from vocalgrad.sources import default_cache_dir

log = logging.getLogger("vocalgrad")

CONTROLS = ("reversed", "silence", "text_only")
RERUN_HINT = "rerun the same `vocalgrad eval` command to ask its item again"
DAMAGED_RUN = "the run folder is damaged: restore the file, or move the folder away and rerun"
FLIP = {"increase": "decrease", "decrease": "increase", "constant": "constant"}
RUN_IDENTITY = ("listener", "dataset_sha256", "config")
"""The manifest fields that make a run folder one run: resuming with any other is refused."""
ORDER_PAIRS = {"default": "swapped", "swapped": "default"}


@dataclass(frozen=True)
class EvalConfig:
    """What a run asks; every field goes into the manifest (the run's identity), and what
    shapes a question (prompt, few-shot examples, decoding) into its `answer_key`.

    Attributes
    ----------
    mode : str
        ``choice`` (log-likelihoods of the answer options), ``generate`` (free text),
        ``both``, or ``auto``: choice when the listener can score, else generate.
    variants : tuple of str
        The prompt variants asked (`vocalgrad list variants`).
    controls : tuple of str
        Controls asked besides the main condition: ``reversed``, ``silence``, ``text_only``.
    split : str
        The dataset split asked (``test`` or ``train``).
    categories : tuple of str
        The dimensions asked; empty: every one in the split.
    limit : int or None
        Ask at most this many items, balanced over what the score depends on
        (`vocalgrad.evaluation.subset.balanced_subset`); None: every item.
    batch_size : int
        Requests per listener call.
    max_new_tokens : int
        Most tokens per free-text answer (generate mode).
    few_shot : int
        Examples per label from the train split, shown before each question; 0 for none.
    audio_first : bool
        Put the clip before the question text rather than after it.
    both_orders : bool
        Choice mode, ``default`` and ``swapped`` variants: average each option's
        log-likelihood over both option orders (a listener's preference for the first
        option then cancels).
    seed : int
        Seeds the few-shot examples' draw.

    Raises
    ------
    ConfigError
        On construction: an unknown mode or control, or a count that is not a whole number
        in range (`batch_size` and `max_new_tokens` >= 1, `few_shot` >= 0, `limit` >= 1).
    """

    mode: str = "auto"  # "choice", "generate", "both" or "auto" (choice when the listener can)
    variants: tuple[str, ...] = ("default",)
    controls: tuple[str, ...] = ()
    split: str = "test"
    categories: tuple[str, ...] = ()
    limit: int | None = None
    batch_size: int = 16
    max_new_tokens: int = 16
    few_shot: int = 0  # examples per label from the train split
    audio_first: bool = False
    both_orders: bool = True  # choice mode: average log-likelihoods over both option orders
    seed: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("auto", "choice", "generate", "both"):
            raise ConfigError(f"mode {self.mode!r}: use choice, generate, both or auto")
        unknown = sorted(set(self.controls) - set(CONTROLS))
        if unknown:
            hints = "".join(did_you_mean(c, CONTROLS) for c in unknown[:1])
            raise ConfigError(
                f"unknown control(s) {unknown}{hints}; choose from {', '.join(CONTROLS)}"
            )
        for name, low in (("batch_size", 1), ("max_new_tokens", 1), ("few_shot", 0), ("limit", 1)):
            value = getattr(self, name)
            if value is None and name == "limit":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{name} = {value!r}: expected a whole number >= {low}")


@dataclass
class Task:
    """One question to ask: a dataset row under one variant, control and mode."""

    row: dict
    variant: str
    control: str
    mode: str
    key: str = ""
    extra: dict = field(default_factory=dict)


def run_key(row: dict, variant: str, control: str, mode: str) -> str:
    return f"{row['item_id']}|{variant}|{control}|{mode}"


class AnswerCache:
    """SQLite map from an answer's key (`answer_key`) to the answer: raw log-likelihoods or
    text, never an error."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT)")

    def get(self, key: str) -> dict | None:
        row = self.db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put_many(self, items: list[tuple[str, dict]]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO answers VALUES (?, ?)",
                [(k, json.dumps(v)) for k, v in items],
            )


def evaluate(
    dataset: str | Path,
    listener: Listener,
    out: str | Path,
    config: EvalConfig,
    cache: AnswerCache | None = None,
    executor: Executor | None = None,
    retry_errors: bool = True,
    use_cache: bool = True,
    audit_verdict: Sequence[str] | None = None,
) -> EvalCounts:
    """Answer every selected item; returns counts. Resumes from `out/results.jsonl`.

    Items whose last answer was an error are asked again unless `retry_errors` is False.
    With `use_cache` False every question goes to the listener and its answer replaces the
    cached one (a model redeployed under the same name); either way each row's ``cached``
    says where its answer came from, and the counts' ``from_cache`` how many did.
    Batches are answered on `executor` (default: here); only this process writes the cache
    and the results file, so a batch is recorded once whichever worker answered it. The run
    folder is locked meanwhile: a second writer fails at once instead of duplicating rows.
    The manifest records the dimensions whose shortcut audit fails (``audit_failed``): those
    of `audit_verdict` where given (a ladder's rung, judged in the ladder's family, recorded
    as ``audit_family``: "ladder"), else those of the dataset's own report."""
    dataset, out = Path(dataset), Path(out)
    rows = load_rows(dataset)
    check_categories(rows, config.categories, dataset)
    items = [
        r
        for r in rows
        if r["split"] == config.split
        and (not config.categories or r["category"] in config.categories)
    ]
    if not items:
        raise ConfigError(
            f"{dataset}: no {config.split} items"
            + (f" in {config.categories}" if config.categories else "")
        )
    untestable = untestable_categories(items, listener)
    items = [r for r in items if r["category"] not in untestable]
    if not items:
        raise ConfigError(
            f"{listener.listener_id} cannot be tested on {', '.join(untestable)}: "
            + "; ".join(untestable.values())
        )
    subset = None
    if config.limit is not None:
        items, subset = balanced_subset(items, config.limit)
        if not subset["balanced"]:
            log.warning("warning: %s", describe_subset(subset))
    train = [r for r in rows if r["split"] == "train"]
    if config.few_shot and not train:
        raise ConfigError(
            f"{dataset}: --few-shot needs a train split and the dataset has none; "
            "build with --n-train > 0 or drop --few-shot"
        )
    mode = _mode(config.mode, listener)
    manifest = {
        **_manifest(dataset, listener, config, mode, items, audit_verdict),
        "untestable": untestable,
    }
    if subset is not None:
        manifest["subset"] = subset
    if out.exists() and not out.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(out))
    out.mkdir(parents=True, exist_ok=True)
    with exclusive(out, "run folder"):
        return _evaluate(
            out,
            listener,
            config,
            manifest,
            items,
            mode,
            train,
            cache,
            executor,
            retry_errors,
            use_cache,
        )


def _evaluate(
    out: Path,
    listener: Listener,
    config: EvalConfig,
    manifest: dict,
    items: list[dict],
    mode: tuple[str, ...],
    train: list[dict],
    cache: AnswerCache | None,
    executor: Executor | None,
    retry_errors: bool,
    use_cache: bool,
) -> dict:
    _check_manifest(out, manifest)
    results = out / "results.jsonl"
    note = repair_tail(results)
    if note:
        log.warning("%s; its item is asked again", note)
    failed = (  # key -> the error of its last answer (None: answered)
        {r["key"]: r.get("error") for r in read_jsonl(results, torn="skip", hint=RERUN_HINT)}
        if results.is_file()
        else {}
    )
    done = {k for k, bad in failed.items() if not (bad and retry_errors)}
    every = list(_tasks(items, config, mode))
    tasks = [t for t in every if t.key not in done]
    retried = sum(1 for t in tasks if failed.get(t.key))
    cache = cache or AnswerCache(default_cache_dir() / "answers.sqlite")
    started = time.time()
    errors = from_cache = 0
    spent: dict | None = None  # what the listener's answers cost in this call (usage())
    held: dict[int, list[Prepared]] = {}

    def questions() -> Iterator[tuple[dict, int]]:
        """Batches prepared on the driver as the executor asks for them; only what the
        cache lacks goes to the listener."""
        for i, batch in enumerate(_batches(tasks, config.batch_size)):
            held[i] = _prepare(batch, listener, config, train)
            yield _missing(held[i], cache if use_cache else None), config.max_new_tokens

    with (
        naming(results),
        results.open("a") as log_file,
        progress(len(tasks), f"eval {listener.listener_id}") as bar,
        _recording_usage(out, lambda: spent),
    ):
        for i, (fresh, cost) in (executor or Executor()).map_batches(listener, _ask, questions()):
            spent = add_usage(spent, cost)
            keyed = held.pop(i)
            cache.put_many([(k, v) for k, v in fresh.items() if "error" not in v])
            lines = []
            for p in keyed:
                answers = [fresh.get(k) or cache.get(k) or {} for k in p.keys]
                result = _result_row(p.task, listener, answers, p.error, time.time() - p.started)
                result["cached"] = bool(p.keys) and not any(k in fresh for k in p.keys)
                from_cache += result["cached"]
                errors += result.get("error") is not None
                failed[p.task.key] = result.get("error")
                lines.append(dumps(result) + "\n")
            log_file.write("".join(lines))  # one write per batch: a crash tears one line at most
            log_file.flush()
            os.fsync(log_file.fileno())
            bar.update(len(keyed))
    return {
        "answered": len(tasks),
        "skipped_done": len(every) - len(tasks),
        "retried": retried,
        "errors": errors,
        "from_cache": from_cache,
        "total": len(every),
        "failed": sum(bool(failed.get(t.key)) for t in every),
        "failure_reasons": failure_reasons([failed[t.key] for t in every if failed.get(t.key)]),
        "seconds": round(time.time() - started, 2),
        "subset": manifest.get("subset"),
        "usage": spent,
    }


def failure_reasons(errors: Sequence[str], top: int = 3) -> list[tuple[str, int]]:
    """The most common causes among per-item errors, for the console.

    Parameters
    ----------
    errors : sequence of str
        The recorded error of each unanswered item; the item they name (``item 'x': ``) is
        left out, so one cause on many items counts once.
    top : int
        How many causes to return.

    Returns
    -------
    list of (str, int)
        (cause, items) pairs, most items first.
    """
    causes = Counter(re.sub(r"^item '[^']*': ", "", e) for e in errors)
    return causes.most_common(top)


def add_usage(total: dict | None, more: dict | None) -> dict | None:
    """Two tallies of `Listener.usage` added key by key (None: nothing tallied).

    Parameters
    ----------
    total, more : dict or None
        Counts (tokens, requests, retries, failures) and ``cost_usd`` (USD, or None where
        no price was given).

    Returns
    -------
    dict or None
        Their sum; ``cost_usd`` is None unless both have one.
    """
    if more is None:
        return total
    if total is None:
        return dict(more)
    out = dict(total)
    for key, value in more.items():
        if key == "cost_usd":
            mine = total.get("cost_usd")
            out[key] = None if value is None or mine is None else mine + value
        elif isinstance(value, int | float):
            out[key] = total.get(key, 0) + value
    return out


@contextmanager
def _recording_usage(out: Path, spent: Callable[[], dict | None]) -> Iterator[None]:
    """Add what this call's answers cost to the manifest's `usage` when it ends, however it
    ends (tokens spent before Ctrl-C were spent): a resumed run adds its own."""
    try:
        yield
    finally:
        cost = spent()
        if cost is not None:
            path = out / "manifest.json"
            saved = read_json(path, DAMAGED_RUN)
            saved["usage"] = add_usage(saved.get("usage"), cost)
            atomic_write_text(path, json.dumps(saved, indent=2) + "\n")


def check_categories(rows: Sequence[dict], categories: Sequence[str], dataset: Path) -> None:
    """Refuse a category the dataset does not hold, naming the ones it does.

    Parameters
    ----------
    rows : sequence of dict
        The dataset's rows (every split).
    categories : sequence of str
        The categories asked for (empty: all).
    dataset : Path
        The dataset folder, for the message.

    Raises
    ------
    ConfigError
        A category is not in the dataset; the message suggests the closest one it has.
    """
    present = sorted({r["category"] for r in rows})
    for category in categories:
        if category not in present:
            raise ConfigError(
                f"{dataset}: no dimension {category!r}{did_you_mean(category, present)}; "
                f"this dataset has {', '.join(present)}"
            )


def untestable_categories(items: Sequence[dict], listener: Listener) -> dict[str, str]:
    """category -> why, for the categories whose clips need more channels than the listener
    hears: never asked (a downmix has no left and right), reported as "cannot be tested"."""
    out = {}
    for category in sorted({r["category"] for r in items}):
        needed = dimensions.get(category).SPEC.channels
        if needed > listener.channels:
            out[category] = (
                f"cannot be tested: {listener.listener_id} hears {listener.channels} channel(s), "
                f"{category} needs {needed}"
            )
    return out


def _mode(requested: str, listener: Listener) -> tuple[str, ...]:
    if requested == "auto":
        return ("choice",) if listener.can_score else ("generate",)
    if requested in ("choice", "both") and not listener.can_score:
        raise ConfigError(
            f"{listener.listener_id} cannot score choices by likelihood; use --mode generate"
        )
    return ("choice", "generate") if requested == "both" else (requested,)


def _tasks(items: list[dict], config: EvalConfig, modes: tuple[str, ...]) -> Iterator[Task]:
    controls = ("none", *config.controls)
    for row in items:
        for variant in config.variants:
            for control in controls:
                if control == "reversed" and not of_row(row).reversible:
                    # played backwards, the item keeps its label (a held clip its value)
                    continue
                for mode in modes:
                    yield Task(row, variant, control, mode, run_key(row, variant, control, mode))


def _batches(tasks: list[Task], size: int) -> Iterator[list[Task]]:
    for start in range(0, len(tasks), size):
        yield tasks[start : start + size]


class Prepared(NamedTuple):
    """One task ready to ask: its requests (one per option order) and their cache keys, or
    the error that kept it from being asked."""

    task: Task
    requests: list[Request]
    started: float  # time.time() when it was prepared: its answer's `seconds` count from here
    error: str | None
    keys: list[str]


def _prepare(
    batch: list[Task], listener: Listener, config: EvalConfig, train: list[dict]
) -> list[Prepared]:
    """Each task of a batch, prepared on the driver."""
    audio_memo: dict[str, np.ndarray] = {}
    identity = listener.manifest()
    prepared = []
    for task in batch:
        started = time.time()
        try:
            reqs, err = _requests(task, listener, config, train, audio_memo), None
        except VocalgradError as error:
            reqs, err = [], str(error)
        keys = [answer_key(identity, task.mode, r, config.max_new_tokens) for r in reqs]
        prepared.append(Prepared(task, reqs, started, err, keys))
    return prepared


def _missing(
    keyed: list[Prepared], cache: AnswerCache | None
) -> dict[str, list[tuple[Request, str]]]:
    """mode -> (request, cache key) for the answers the cache lacks (all of them without a
    cache)."""
    todo: dict[str, list[tuple[Request, str]]] = {}
    for p in keyed:
        if p.error is None:
            for r, k in zip(p.requests, p.keys, strict=True):
                if cache is None or cache.get(k) is None:
                    todo.setdefault(p.task.mode, []).append((r, k))
    return todo


def _ask(
    listener: Listener, question: tuple[dict[str, list[tuple[Request, str]]], int]
) -> tuple[dict[str, dict], dict | None]:
    """Cache key -> answer for one batch, and what answering it cost (`Listener.usage` after
    minus before; None where the listener tallies nothing): the only step that needs the
    model (so the one an executor may run elsewhere, where the listener's tally lives)."""
    todo_by_mode, max_new_tokens = question
    before = listener.usage()
    fresh: dict[str, dict] = {}
    for mode, todo in todo_by_mode.items():
        try:
            if mode == "choice":
                answers = [{"logprobs": lp} for lp in listener.score_choices([r for r, _ in todo])]
            else:
                answers = [
                    {"response": text}
                    for text in listener.generate([r for r, _ in todo], max_new_tokens)
                ]
        except PartialBatchError as err:  # some requests failed: keep the answers that arrived
            key = "logprobs" if mode == "choice" else "response"
            answers = [
                {"error": str(err.failures.get(i, err))} if a is None else {key: a}
                for i, a in enumerate(err.answers)
            ]
        except VocalgradError as err:  # the whole batch failed: record it per item, go on
            answers = [{"error": str(err)} for _ in todo]
        fresh.update({k: a for (_, k), a in zip(todo, answers, strict=True)})
    after = listener.usage()
    if before is None or after is None:
        return fresh, None
    cost = {
        k: v - before.get(k, 0)
        for k, v in after.items()
        if k != "cost_usd" and isinstance(v, int | float)
    }
    if "cost_usd" in after:
        paid = (after["cost_usd"], before.get("cost_usd"))
        cost["cost_usd"] = None if None in paid else paid[0] - paid[1]
    return fresh, cost


def _requests(
    task: Task,
    listener: Listener,
    config: EvalConfig,
    train: list[dict],
    memo: dict[str, np.ndarray],
) -> list[Request]:
    """One request per option order (choice mode with both orders), else one."""
    row = task.row
    variants = [task.variant]
    if task.mode == "choice" and config.both_orders and task.variant in ORDER_PAIRS:
        variants.append(ORDER_PAIRS[task.variant])
    second = second_of(row)
    examples = (
        few_shot_examples(
            train, row["category"], config.few_shot, config.seed, task.variant, second
        )
        if config.few_shot
        else []
    )
    target = _control_audio(task.control, _audio(row, listener, memo))
    item_id = row["item_id"] + (REVERSED_SUFFIX if task.control == "reversed" else "")
    audio: dict[str, np.ndarray | None] = {item_id: target}
    for ex, _ in examples:
        audio[ex["item_id"]] = _audio(ex, listener, memo)
    return [
        Request(
            item_id,
            build_prompt(
                row["category"],
                v,
                config.audio_first,
                examples,
                item_id,
                row_format(row),
                row_kind(row),
                second,
            ),
            audio,
            row["source_id"],
        )
        for v in variants
    ]


def _audio(row: dict, listener: Listener, memo: dict[str, np.ndarray]) -> np.ndarray:
    """The clip at the listener's rate, downmixed unless the listener hears two channels."""
    if row["item_id"] not in memo:
        audio, file_sr = load_audio(row["path"], mono=listener.channels == 1)
        memo[row["item_id"]] = resample(audio, file_sr, listener.sample_rate)
    return memo[row["item_id"]]


def _control_audio(control: str, audio: np.ndarray) -> np.ndarray | None:
    if control == "reversed":
        return audio[::-1].copy()
    if control == "silence":
        return np.zeros_like(audio)
    if control == "text_only":
        return None
    return audio


ANSWER_KEY_VERSION = 2
"""Bumped whenever `answer_key` changes what it covers: older cache entries are never read."""


def answer_key(identity: dict, mode: str, request: Request, max_new_tokens: int) -> str:
    """The answer cache's key: the one definition of everything an answer depends on.

    Two questions share a cached answer only when all of these are equal (the file
    reference, ``docs/reference/files.md``, lists them for users):

    - the listener's identity, ``Listener.manifest()``: id, revision (weights or code),
      sample rate, every option that changes its answers (decoding settings, precision,
      dtype, the endpoint) and ``fitted_on``, the hash of the data a baseline learnt from
      (a dataset's rows with their labels and audio hashes: two builds that share test clips
      but not their train split never share answers);
    - the mode (``choice`` or ``generate``) and, for ``generate``, ``max_new_tokens``;
    - the whole prompt: its text and turns (few-shot examples with their answers, where the
      audio sits), answer options and their labels, variant and category;
    - the clips by content: a SHA-256 of each audio array the prompt refers to, as the
      listener hears it (rate, channels), under its item id, and the request's source id.

    Parameters
    ----------
    identity : dict
        ``listener.manifest()``.
    mode : str
        ``choice`` or ``generate``.
    request : Request
        The question, with its audio at the listener's rate.
    max_new_tokens : int
        The generation limit (counts in ``generate`` mode only).

    Returns
    -------
    str
        64 hex digits.
    """
    audio = {
        item_id: None
        if clip is None
        else [hashlib.sha256(clip.tobytes()).hexdigest(), list(clip.shape), str(clip.dtype)]
        for item_id, clip in request.audio.items()
    }
    key = {
        "version": ANSWER_KEY_VERSION,
        "listener": identity,
        "mode": mode,
        "decoding": {"max_new_tokens": max_new_tokens} if mode == "generate" else {},
        "prompt": asdict(request.prompt),
        "source_id": request.source_id,
        "audio": audio,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


def _result_row(
    task: Task, listener: Listener, answers: list[dict], error: str | None, seconds: float
) -> ResultRow:
    row = task.row
    truth = FLIP[row["direction"]] if task.control == "reversed" else row["direction"]
    if task.control in ("silence", "text_only"):
        truth = "none"
    result: ResultRow = {
        "key": task.key,
        "item_id": row["item_id"],
        "listener": listener.listener_id,
        "revision": listener.revision,
        "variant": task.variant,
        "control": task.control,
        "mode": task.mode,
        "direction": truth,
        **{
            k: row.get(k)
            for k in (
                "category",
                "tier",
                "curve",
                "magnitude",
                "source_id",
                "speaker_id",
                "split",
                "domain",
            )
        },
        "source_kind": row_kind(row),
        "format": row_format(row),
        # a two-dimension item: the other dimension and whether the two move alike (what the
        # interference effect is read from)
        **{k: row[k] for k in ("second_category", "second_direction", "congruent") if k in row},
        "response": None,
        "parse_status": None,
        "predicted": None,
        "llr": None,
        "logprobs": None,
        "error": error or next((a["error"] for a in answers if "error" in a), None),
        "seconds": round(seconds, 4),
    }
    if task.control == "reversed":
        result["reversed_of"] = row["item_id"]
    if result["error"]:
        return result
    prompt = build_prompt(
        row["category"],
        task.variant,
        fmt=row_format(row),
        kind=row_kind(row),
        second=second_of(row),
    )
    if task.mode == "generate":
        text = answers[0].get("response", "")
        parsed = parse_labelled(
            text, prompt.label_of, reads_directions(task.variant, row_format(row))
        )
        result.update(response=text, parse_status=parsed.status, predicted=parsed.label)
    else:
        # option words -> labels (the same map in both option orders): "loud" scores increase
        logprobs = [
            {prompt.label_of.get(o, o): v for o, v in a["logprobs"].items()} for a in answers
        ]
        options = sorted(set().union(*logprobs))
        mean = {o: float(np.mean([lp[o] for lp in logprobs if o in lp])) for o in options}
        best = max(mean.values())
        winners = [o for o in options if mean[o] == best]
        # an exact tie is no answer at all (e.g. silence for a measuring observer): never guessed
        predicted = winners[0] if len(winners) == 1 else None
        result.update(logprobs=mean, predicted=predicted, parse_status="ok" if predicted else "tie")
        if "increase" in mean and "decrease" in mean:
            result["llr"] = round(mean["increase"] - mean["decrease"], 6)
    options = tuple(prompt.label_of.values())
    if truth in LABELS or (truth == "constant" and ("constant" in options or "no" in options)):
        result["correct"] = result["predicted"] == expected_answer(truth, task.variant)
    return result


def _manifest(
    dataset: Path,
    listener: Listener,
    config: EvalConfig,
    mode: tuple[str, ...],
    items: Sequence[dict],
    audit_verdict: Sequence[str] | None,
) -> dict:
    official = is_official(dataset)
    formats = {row_format(r) for r in items}
    if len(formats) > 1:
        raise ConfigError(
            f"{dataset}: items of several formats ({', '.join(sorted(formats))}); "
            "evaluate one format per run"
        )
    fmt = formats.pop()
    failed = audit_failed(dataset) if audit_verdict is None else sorted(audit_verdict)
    return {
        **({"audit_failed": failed} if failed else {}),
        **({"audit_family": "ladder"} if audit_verdict is not None else {}),
        "listener": listener.manifest(),
        "listener_channels": listener.channels,
        "dataset": str(dataset.resolve()),
        "dataset_sha256": content_sha256(dataset),
        "dataset_layout": "official-release" if official else "vocalgrad",
        **({"release_prompts": release_prompt_check(items)} if official else {}),
        "config": asdict(config),
        "modes": list(mode),
        "format": fmt,
        "prompts": {v: _shown_prompt(_asked(items, v), v, fmt) for v in config.variants},
        "versions": versions(),
        "command": shlex.join(["vocalgrad", *sys.argv[1:]])
        if sys.argv and "vocalgrad" in sys.argv[0]
        else None,
    }


def audit_failed(dataset: str | Path) -> list[str]:
    """The dimensions a dataset's shortcut audit fails, from its ``audit.json``.

    A listener may score above chance on them without hearing the change: `vocalgrad eval`
    warns before asking, and the run's manifest records them (``audit_failed``).

    Parameters
    ----------
    dataset : str or Path
        A dataset folder.

    Returns
    -------
    list of str
        The failing dimensions, sorted; empty when the dataset has no (readable) audit
        report or its audit passed.
    """
    try:
        report = json.loads((Path(dataset) / "audit.json").read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(report, dict) or report.get("passes") is not False:
        return []
    per_category = report.get("per_category") or {}
    return sorted(d for d, c in per_category.items() if c.get("passes") is False) or ["all"]


def release_prompt_check(items: Sequence[dict]) -> dict:
    """How many of the release's own prompts equal the question we ask (the published
    default, verbatim, worded for the row's kind of sound): the release's answers are
    comparable with ours only where they do.

    Parameters
    ----------
    items : sequence of dict
        Dataset rows; those with an ``official_prompt`` are compared.

    Returns
    -------
    dict
        ``items_with_prompt``, ``differ_from_default`` and up to five ``examples`` (item
        ids that differ).
    """
    with_prompt = [r for r in items if r.get("official_prompt")]
    differ = [
        r["item_id"]
        for r in with_prompt
        if " ".join(r["official_prompt"].split())
        != " ".join(build_prompt(r["category"], kind=row_kind(r)).text.split())
    ]
    return {
        "items_with_prompt": len(with_prompt),
        "differ_from_default": len(differ),
        "examples": differ[:5],
    }


def _check_manifest(out: Path, manifest: dict) -> None:
    """A run folder belongs to one (dataset, listener, config): refuse to mix results, and
    say which of the three differs."""
    path = out / "manifest.json"
    if path.is_file():
        saved = read_json(path, DAMAGED_RUN)
        wanted = json.loads(json.dumps({k: manifest[k] for k in RUN_IDENTITY}))
        differ = [k for k in RUN_IDENTITY if saved.get(k) != wanted[k]]
        if "dataset_sha256" in differ:
            raise ConfigError(
                f"{out} holds a run on another dataset (content sha256 "
                f"{str(saved.get('dataset_sha256'))[:12]}…, now {wanted['dataset_sha256'][:12]}…"
                f" for {manifest['dataset']}): its clips or labels changed since that run "
                "began, so its answers would not match; choose another --out"
            )
        if differ:
            what = {"listener": "listener", "config": "config"}
            raise ConfigError(
                f"{out} holds a run with another {' and '.join(what[k] for k in differ)}; "
                "choose another --out"
            )
        chosen = (manifest.get("subset") or {}).get("items_sha256")
        if chosen and (saved.get("subset") or {}).get("items_sha256") != chosen:
            raise ConfigError(
                f"{out} holds a --limit run over other items (chosen by an older vocalgrad, "
                "before limits were balanced over direction, tier and curve); choose another --out"
            )
        return
    atomic_write_text(path, json.dumps(manifest, indent=2) + "\n")


def load_results(run: str | Path) -> tuple[dict, list[ResultRow]]:
    """(manifest, rows) of a run folder (or its results.jsonl); the last row wins per key.

    Raises
    ------
    ConfigError
        The folder holds no results.jsonl.
    DatasetError
        It holds no answers, or is incomplete: no manifest.json (every producer writes it,
        an eval before its first answer, an export last), or a file its manifest lists is
        missing; or a file is damaged.
    """
    run = Path(run)
    if run.name == "results.jsonl":
        run = run.parent
    if not (run / "results.jsonl").is_file():
        raise ConfigError(f"{run}: no results.jsonl; is this a `vocalgrad eval` output folder?")
    manifest = (
        read_json(run / "manifest.json", DAMAGED_RUN) if (run / "manifest.json").is_file() else {}
    )
    lacking = [
        name for name in ("manifest.json", *manifest.get("files", ())) if not (run / name).is_file()
    ]
    if lacking and (run / "results.jsonl").stat().st_size:
        raise DatasetError(
            f"{run}: incomplete, {', '.join(lacking)} missing beside results.jsonl (an "
            "interrupted `vocalgrad eval` or `human export`?); run the command that made it "
            "again"
        )
    rows = {}
    for r in read_jsonl(run / "results.jsonl", torn="skip", hint=RERUN_HINT):
        # rows from other producers (e.g. the listening test) may omit run-only fields
        r.setdefault("control", "none")
        r.setdefault("mode", "generate")
        r.setdefault("error", None)
        rows[
            r.get("key")
            or f"{r['item_id']}|{r['listener']}|{r['variant']}|{r['control']}|{r['mode']}"
        ] = r
    if not rows:
        raise DatasetError(
            f"{run / 'results.jsonl'}: no answers yet; run `vocalgrad eval` into "
            f"{run} first (it resumes where it stopped)"
        )
    return manifest, list(rows.values())


def _shown_prompt(item: Mapping, variant: str, fmt: str) -> str:
    """The question a manifest shows for a variant, as `item` is asked it (worded for its
    kind of sound)."""
    return build_prompt(
        item["category"],
        variant,
        fmt=fmt,
        kind=row_kind(item),
        second=second_of(item),
    ).text


def _asked(items: Sequence[Mapping], variant: str) -> Mapping:
    """The item whose question a manifest shows for a variant: the first that the variant
    asks about."""
    supported = get_variant(variant).categories()
    return next(
        (r for r in items if supported is None or r["category"] in supported),
        items[0],
    )


def listener_slug(spec: str) -> str:
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in spec)


def selected(rows: Sequence[dict], **where: str) -> list[dict]:
    return [r for r in rows if all(r.get(k) == v for k, v in where.items())]

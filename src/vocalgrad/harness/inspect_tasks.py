"""inspect-ai tasks: `inspect eval vocalgrad/gradual -T dataset=PATH --model ...`.

Registered through the `inspect_ai` entry point (package name `vocalgrad`), one task per question
format. Each sample is one user turn holding the question `vocalgrad eval` asks and the clip as
WAV (`ContentAudio`; FLAC clips are converted once into the cache). The scorer reads the answer
with our parser, and the metrics are `vocalgrad score`'s: accuracy with its source-clustered CI,
d', c and the unparsed rate, overall and per category, next to inspect's own accuracy with a
source-clustered standard error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageUser, Content, ContentAudio, ContentText, GenerateConfig
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    Metric,
    SampleScore,
    Score,
    Target,
    accuracy,
    grouped,
    metric,
    scorer,
    stderr,
)
from inspect_ai.solver import TaskState, generate

from vocalgrad.harness.items import (
    Selection,
    answer_row,
    as_tuple,
    item_metadata,
    question,
    select_items,
    summary,
    wav_copy,
    write_run,
)

MAX_TOKENS = 16  # `vocalgrad eval`'s max_new_tokens; `--max-tokens` overrides it
SUMMARY_KEYS = ("accuracy_lo", "accuracy_hi", "dprime", "criterion", "unparsed_rate", "n_clusters")


def _rows(scores: Sequence[SampleScore]) -> list[dict]:
    """Scored samples back as `results.jsonl` rows (the scorer keeps the whole row)."""
    return [dict(s.score.metadata or {}) for s in scores if s.score.metadata]


@metric
def vocalgrad_summary() -> Metric:
    """`vocalgrad score`'s numbers: the accuracy CI over source clusters, d', c and the unparsed
    rate overall, and d' and c per category (keys `<metric>_<category>`)."""

    def compute(scores: list[SampleScore]) -> dict[str, float | int | None]:
        table = summary(_rows(scores))
        out: dict[str, float | int | None] = {k: table[0][k] for k in SUMMARY_KEYS}
        for g in table[1:]:
            for name in ("dprime", "criterion"):
                out[f"{name}_{g['category']}"] = g[name]
        return out

    return compute


@scorer(
    metrics=[
        accuracy(),
        stderr(cluster="source_id"),
        grouped(accuracy(), "category", all=False, name_template="accuracy_{group_name}"),
        vocalgrad_summary(),
    ]
)
def vocalgrad_answer():
    """Correct when our parser reads the right label; unparsed answers count as wrong (and
    show in `unparsed_rate`), as in `vocalgrad score`."""

    async def score(state: TaskState, target: Target) -> Score:
        row = answer_row(state.metadata, state.output.completion, listener=str(state.model))
        return Score(
            value=CORRECT if row["correct"] else INCORRECT,
            answer=row["response"],
            explanation=f"parse: {row['parse_status']}, read as {row['predicted']}",
            metadata=row,
        )

    return score


def samples(dataset: str | Path, selection: Selection, cache: Path | None = None) -> list[Sample]:
    """One sample per changing clip: the question and the clip, in `vocalgrad eval`'s order."""
    from vocalgrad.sources import default_cache_dir

    cache = Path(cache) if cache else default_cache_dir() / "wav"
    out = []
    for row in select_items(dataset, selection):
        audio = ContentAudio(audio=str(wav_copy(row["path"], cache)), format="wav")
        text = ContentText(text=question(row, selection.variant))
        parts: list[Content] = [audio, text] if selection.audio_first else [text, audio]
        out.append(
            Sample(
                input=[ChatMessageUser(content=parts)],
                target=row["direction"],
                id=row["item_id"],
                metadata=item_metadata(row, selection.variant),
            )
        )
    return out


def vocalgrad_task(
    fmt: str,
    dataset: str,
    category: str | Sequence[str] | None = None,
    variant: str = "default",
    tiers: str | Sequence[str] | None = None,
    split: str = "test",
    audio_first: bool = False,
    cache: str | None = None,
) -> Task:
    selection = Selection(fmt, variant, as_tuple(category), as_tuple(tiers), split, audio_first)
    items = samples(dataset, selection, Path(cache) if cache else None)
    return Task(
        dataset=MemoryDataset(items, name=f"vocalgrad_{selection.name}"),
        solver=generate(),
        scorer=vocalgrad_answer(),
        config=GenerateConfig(max_tokens=MAX_TOKENS, temperature=0.0),
        metadata={"dataset": str(dataset), "format": fmt, "variant": variant},
    )


@task
def gradual(dataset: str, category: str | None = None, variant: str = "default",
            tiers: str | None = None, split: str = "test", audio_first: bool = False,
            cache: str | None = None) -> Task:  # fmt: skip
    """A change within one clip: "Does the <attribute> increase or decrease over time?"."""
    return vocalgrad_task("gradual", dataset, category, variant, tiers, split, audio_first, cache)


@task
def comparison(dataset: str, category: str | None = None, variant: str = "default",
               tiers: str | None = None, split: str = "test", audio_first: bool = False,
               cache: str | None = None) -> Task:  # fmt: skip
    """Two held parts:
    "Is the <attribute> higher or lower in the second part than in the first?"."""
    return vocalgrad_task(
        "comparison", dataset, category, variant, tiers, split, audio_first, cache
    )


@task
def recognition(dataset: str, category: str | None = None, variant: str = "default",
                tiers: str | None = None, split: str = "test", audio_first: bool = False,
                cache: str | None = None) -> Task:  # fmt: skip
    """One held clip named as one of two categories ("Is the voice loud or quiet?")."""
    return vocalgrad_task(
        "recognition", dataset, category, variant, tiers, split, audio_first, cache
    )


def log_rows(log_path: str | Path) -> list[dict]:
    """The `results.jsonl` rows of an inspect log; a sample that errored is kept as an error
    row (never scored as wrong), as `vocalgrad eval` records a failed request."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(log_path))
    model = log.eval.model
    rows = []
    for sample in log.samples or []:
        score = next(iter((sample.scores or {}).values()), None)
        if score is not None and score.metadata:
            rows.append(dict(score.metadata))
        else:
            error = str(sample.error.message) if sample.error else "not scored"
            rows.append(answer_row(sample.metadata, None, listener=model, error=error))
    return rows


def log_to_run(log_path: str | Path, out: str | Path) -> Path:
    """Write an inspect log as a vocalgrad run folder (`vocalgrad score OUT` reads it)."""
    from inspect_ai.log import read_eval_log

    header = read_eval_log(str(log_path), header_only=True)
    return write_run(
        out,
        header.eval.task_args.get("dataset") or header.eval.metadata["dataset"],
        log_rows(log_path),
        listener=header.eval.model,
        harness="inspect_ai",
    )

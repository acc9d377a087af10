"""`vocalgrad export lmms-eval DATASET --out DIR`: lmms-eval task folders for a dataset.

One task per question format and prompt variant (`vocalgrad_gradual`, `vocalgrad_gradual_swapped`,
`vocalgrad_comparison`, ...), each a folder with its YAML and a `docs.jsonl` of the clips'
metadata; the clips are written once as WAV under `DIR/audio`. Run them with
`lmms-eval --include_path DIR --tasks vocalgrad_gradual ...`. The tasks' functions live in
`vocalgrad.harness.lmms_tasks`, so vocalgrad must be importable where lmms-eval runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vocalgrad import dimensions, formats
from vocalgrad.dataset import dumps, load_rows, resolve
from vocalgrad.errors import ConfigError
from vocalgrad.formats import row_format
from vocalgrad.harness.items import Selection, item_metadata, select_items, wav_copy
from vocalgrad.harness.lmms_tasks import PER_CATEGORY, SUMMARY_METRICS
from vocalgrad.questions.prompts import VARIANTS
from vocalgrad.records import LABELS

FUNCTIONS = "vocalgrad.harness.lmms_tasks"
MAX_NEW_TOKENS = 16  # as `vocalgrad eval`
LOWER_IS_BETTER = {"unparsed_rate", "empty_rate", "criterion", "increase_rate"}


@dataclass
class Exported:
    """What an export wrote: task names, and categories left out and why."""

    tasks: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def direction_variants(fmt: str) -> tuple[str, ...]:
    """The variants a format is asked with whose answers are directions (all but change
    detection)."""
    form = formats.get(fmt)
    return tuple(
        name for name, v in VARIANTS.items() if form.asks(name) and set(LABELS) <= set(v.options)
    )


def export_lmms_eval(
    dataset: str | Path,
    out: str | Path,
    variants: Sequence[str] = (),
    categories: Sequence[str] = (),
    tiers: Sequence[str] = (),
    split: str = "test",
) -> Exported:
    """Write one lmms-eval task per (format, variant) the dataset can be asked in."""
    out, root = Path(out).resolve(), resolve(dataset)
    rows = load_rows(root, splits=(split,))
    wanted = set(categories) or {r["category"] for r in rows}
    result = Exported()
    mono: list[str] = []
    for category in sorted(wanted):
        if dimensions.get(category).SPEC.channels > 1:
            result.skipped[category] = (
                "needs two channels; lmms-eval's audio adapters take mono "
                "(ask it with `vocalgrad eval` or inspect)"
            )
        else:
            mono.append(category)
    held = sorted({row_format(r) for r in rows if r["category"] in mono})  # the formats it holds
    if not held:
        raise ConfigError(
            f"{dataset}: nothing to export in the {split} split"
            + (
                f" ({'; '.join(f'{k}: {v}' for k, v in result.skipped.items())})"
                if result.skipped
                else ""
            )
        )
    for fmt in held:
        for variant in variants or direction_variants(fmt):
            if not formats.get(fmt).asks(variant):
                continue
            asked = VARIANTS[variant].categories()
            cats = tuple(c for c in mono if asked is None or c in asked)
            if not cats:
                continue
            selection = Selection(fmt, variant, cats, tuple(tiers), split)
            try:
                items = select_items(root, selection)
            except ConfigError:
                continue  # none of this format among the chosen categories and tiers
            result.tasks.append(
                _write_task(out, f"vocalgrad_{selection.name}", items, selection, root)
            )
    if not result.tasks:
        raise ConfigError(f"{dataset}: no items match the chosen variants, categories and tiers")
    (out / "vocalgrad_export.json").write_text(
        json.dumps(
            {
                "dataset": str(root.resolve()),
                "split": split,
                "tasks": result.tasks,
                "skipped_categories": result.skipped,
            },
            indent=2,
        )
        + "\n"
    )
    return result


def _write_task(out: Path, name: str, items: list[dict], selection: Selection, root: Path) -> str:
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    docs = folder / "docs.jsonl"
    with docs.open("w") as f:
        for row in items:
            wav = str(wav_copy(row["path"], out / "audio"))
            f.write(dumps({**item_metadata(row, selection.variant), "path": wav}) + "\n")
    categories = sorted({r["category"] for r in items})
    (folder / f"{name}.yaml").write_text(task_yaml(name, docs, categories, selection, root))
    return name


def task_yaml(
    name: str, docs: Path, categories: Sequence[str], selection: Selection, root: Path
) -> str:
    """The task's YAML; `!function` tags need a loader that knows them, so it is written as text."""
    metrics = [*SUMMARY_METRICS, "empty_rate"]
    aggregation = {m: m for m in metrics}
    for category in categories:
        for metric in PER_CATEGORY:
            aggregation[f"{metric}_{category}"] = metric
    lines = [
        f"# vocalgrad {selection.fmt} items, prompt variant {selection.variant!r}, from "
        f"{root.resolve()}",
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {json.dumps(str(docs))}",
        "test_split: test",
        "output_type: generate_until",
        *(
            f"{key}: !function {FUNCTIONS}.{key}"
            for key in (
                "doc_to_visual",
                "doc_to_text",
                "doc_to_messages",
                "doc_to_target",
                "process_results",
            )
        ),
        "generation_kwargs:",
        f"  max_new_tokens: {MAX_NEW_TOKENS}",
        "  temperature: 0",
        "  do_sample: false",
        "cluster_key: source_id",
        "score_key: score",
        "metric_list:",
    ]
    for metric, function in aggregation.items():
        base = metric if metric in SUMMARY_METRICS or metric == "empty_rate" else function
        lines += [
            f"  - metric: {metric}",
            f"    aggregation: !function {FUNCTIONS}.{function}",
            f"    higher_is_better: {'false' if base in LOWER_IS_BETTER else 'true'}",
        ]
    lines += [
        "metadata:",
        "  version: 1",
        f"  format: {selection.fmt}",
        f"  variant: {selection.variant}",
        "",
    ]
    return "\n".join(lines)

"""`vocalgrad export lmms-eval DATASET --out DIR`: lmms-eval task folders for a dataset.

One task per question format and prompt variant (`vocalgrad_gradual`, `vocalgrad_gradual_swapped`,
`vocalgrad_comparison`, ...), each a folder with its YAML and a `docs.jsonl` of the clips'
metadata; the clips are written once as WAV under `DIR/audio`. Run them with
`lmms-eval --include_path DIR --tasks vocalgrad_gradual ...`. The tasks' functions live in
`vocalgrad.harness.lmms_tasks`, so vocalgrad must be importable where lmms-eval runs.

Nothing in the folder names an absolute path, so it can be copied or moved (to the GPU
machine) as a whole: `docs.jsonl` names each clip relative to `DIR`, and a small
`vocalgrad_task.py` beside each YAML, which lmms-eval imports by its path, finds `docs.jsonl`
and the clips from wherever the folder lies.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vocalgrad import dimensions, formats
from vocalgrad.dataset import content_sha256, dumps, load_rows, resolve
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import check_categories
from vocalgrad.formats import row_format
from vocalgrad.harness.items import Selection, item_metadata, select_items, wav_copy
from vocalgrad.harness.lmms_tasks import PER_CATEGORY, SUMMARY_METRICS
from vocalgrad.questions.prompts import get_variant, variants
from vocalgrad.records import LABELS

FUNCTIONS = "vocalgrad.harness.lmms_tasks"
LOCAL = "vocalgrad_task"  # the module beside each YAML: what needs the folder's location
LOCAL_FUNCTIONS = ("doc_to_visual", "doc_to_messages")
MAX_NEW_TOKENS = 16  # as `vocalgrad eval`
LOCAL_MODULE = '''"""This task's files, wherever its folder lies (`vocalgrad export lmms-eval`).

lmms-eval imports this file by its path (`!function vocalgrad_task.NAME` in the YAML beside
it). The YAML and docs.jsonl name no absolute path; what needs one asks here. The task's
functions themselves live in vocalgrad.harness.lmms_tasks.
"""

from pathlib import Path

from vocalgrad.harness import lmms_tasks

HERE = Path(__file__).resolve().parent
DOCS = str(HERE / "docs.jsonl")
EXPORT = HERE.parent


def doc_to_visual(doc):
    return lmms_tasks.doc_to_visual(lmms_tasks.in_export(doc, EXPORT))


def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    return lmms_tasks.doc_to_messages(lmms_tasks.in_export(doc, EXPORT), lmms_eval_specific_kwargs)
'''
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
    return tuple(v.name for v in variants() if form.asks(v.name) and set(LABELS) <= set(v.options))


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
    check_categories(rows, mono, root)
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
            asked = get_variant(variant).categories()
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
        raise ConfigError(f"{dataset}: no items match the chosen variants, dimensions and tiers")
    (out / "vocalgrad_export.json").write_text(
        json.dumps(
            {
                "dataset": str(root.resolve()),  # where it came from (provenance only)
                "dataset_sha256": content_sha256(root),
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
            wav = _clip_in(out / "audio", row["path"]).relative_to(out).as_posix()
            f.write(dumps({**item_metadata(row, selection.variant), "path": wav}) + "\n")
    categories = sorted({r["category"] for r in items})
    (folder / f"{LOCAL}.py").write_text(LOCAL_MODULE)
    (folder / f"{name}.yaml").write_text(task_yaml(name, categories, selection, root))
    return name


def _clip_in(audio: Path, path: str | Path) -> Path:
    """The clip as WAV inside the export's `audio` folder (a WAV clip is copied in too, so the
    folder holds everything it names)."""
    wav = wav_copy(path, audio)
    if wav.parent.resolve() == audio.resolve():
        return wav
    target = audio / f"{hashlib.sha256(wav.read_bytes()).hexdigest()[:20]}.wav"
    if not target.is_file():
        audio.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        shutil.copyfile(wav, tmp)
        tmp.replace(target)
    return target


def task_yaml(name: str, categories: Sequence[str], selection: Selection, root: Path) -> str:
    """The task's YAML; `!function` tags need a loader that knows them, so it is written as
    text. It names no absolute path: `docs.jsonl` and the clips are found by `vocalgrad_task.py`
    beside it, wherever the folder lies."""
    metrics = [*SUMMARY_METRICS, "empty_rate"]
    aggregation = {m: m for m in metrics}
    for category in categories:
        for metric in PER_CATEGORY:
            aggregation[f"{metric}_{category}"] = metric
    lines = [
        f"# vocalgrad {selection.fmt} items, prompt variant {selection.variant!r}, from the "
        f"dataset {root.name!r}",
        f"task: {name}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: !function {LOCAL}.DOCS  # the docs.jsonl beside this file",
        "test_split: test",
        "output_type: generate_until",
        *(
            f"{key}: !function {LOCAL if key in LOCAL_FUNCTIONS else FUNCTIONS}.{key}"
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

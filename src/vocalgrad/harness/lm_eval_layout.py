"""A run's scores in lm-evaluation-harness' output layout, for the tools that read it.

    OUT/<model, "/" as "__">/results_<date>.json           one per run
    OUT/<model, "/" as "__">/samples_<task>_<date>.jsonl   one per task

A task is one (format, prompt variant[, mode]) of the run, named as `vocalgrad export lmms-eval`
names it (`vocalgrad_gradual`, `vocalgrad_gradual_swapped`, ...). Results hold
`"<metric>,none"` values computed by `vocalgrad score` (with the CI bounds and the per-category
accuracy, d' and c); lm-eval's `_stderr` fields say "N/A", as lm-eval does for a metric without
one: our uncertainty is the clustered CI, not a standard error.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

from vocalgrad.dataset import clean
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import load_results
from vocalgrad.evaluation.score import score_run
from vocalgrad.formats import row_format
from vocalgrad.harness.items import N_BOOT
from vocalgrad.harness.lmms_tasks import PER_CATEGORY, SUMMARY_METRICS
from vocalgrad.questions.prompts import build_prompt, second_of
from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import row_kind

FILTER = "none"
HIGHER_IS_BETTER = {
    "accuracy": True,
    "accuracy_lo": True,
    "accuracy_hi": True,
    "balanced_accuracy": True,
    "dprime": True,
    "criterion": False,
    "unparsed_rate": False,
    "increase_rate": False,
}


def task_name(fmt: str, variant: str, mode: str) -> str:
    name = f"vocalgrad_{fmt}" + ("" if variant == "default" else f"_{variant}")
    return name + ("" if mode == "generate" else f"_{mode}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_lm_eval_layout(
    run: str | Path, out: str | Path, listener: str | None = None, date: str | None = None
) -> list[Path]:
    """Write `results_<date>.json` and one `samples_<task>_<date>.jsonl` per task of a run
    folder (from `vocalgrad eval`, the human export or a harness); returns the files. A run
    holding several listeners (the human export) needs `listener` to say which one."""
    manifest, rows = load_results(run)
    listeners = sorted({r["listener"] for r in rows})
    listener = listener or (listeners[0] if len(listeners) == 1 else None)
    if listener not in listeners:
        raise ConfigError(f"{run}: choose one listener of {', '.join(listeners)}")
    rows = [r for r in rows if r["listener"] == listener]
    scored = score_run(run, n_boot=N_BOOT)
    sanitized = listener.replace("/", "__")
    date = date or datetime.now().isoformat().replace(":", "-")
    folder = Path(out) / sanitized
    folder.mkdir(parents=True, exist_ok=True)
    fmt = manifest.get("format") or row_format(rows[0])
    results, configs, n_samples, written = {}, {}, {}, []
    for key, group in scored["groups"].items():
        who, _, prompt_mode = key.rpartition("|")
        if who and who != listener:
            continue
        variant, mode = prompt_mode.split("/")
        task = task_name(fmt, variant, mode)
        overall, per_category = group["table"][0], group["table"][1:]
        entry: dict = {"alias": task}
        for metric in SUMMARY_METRICS:
            entry[f"{metric},{FILTER}"] = overall[metric]
        entry[f"accuracy_stderr,{FILTER}"] = "N/A"
        for g in per_category:
            for metric in PER_CATEGORY:
                entry[f"{metric}_{g['category']},{FILTER}"] = g[metric]
        entry[f"n_clusters,{FILTER}"] = overall["n_clusters"]
        entry[f"ci_method,{FILTER}"] = overall["ci_method"]
        results[task] = entry
        members = [
            r
            for r in rows
            if r["variant"] == variant
            and r["mode"] == mode
            and r["control"] == "none"
            and r.get("error") is None
            and r["direction"] in LABELS
        ]
        n_samples[task] = {"original": len(members), "effective": len(members)}
        configs[task] = {
            "task": task,
            "output_type": "generate_until" if mode == "generate" else "multiple_choice",
            "metric_list": [
                {"metric": m, "higher_is_better": h} for m, h in HIGHER_IS_BETTER.items()
            ],
            "metadata": {"version": 1, "format": fmt, "variant": variant, "mode": mode},
        }
        path = folder / f"samples_{task}_{date}.jsonl"
        with path.open("w") as f:
            for doc_id, r in enumerate(members):
                f.write(json.dumps(clean(_sample(doc_id, r, fmt)), sort_keys=True) + "\n")
        written.append(path)
    doc = {
        "results": results,
        "group_subtasks": {task: [] for task in results},
        "configs": configs,
        "versions": dict.fromkeys(results, 1),
        "n-shot": dict.fromkeys(results, 0),
        "higher_is_better": {task: HIGHER_IS_BETTER for task in results},
        "n-samples": n_samples,
        "config": {
            "model": listener,
            "model_args": None,
            "batch_size": None,
            "limit": None,
            "bootstrap_iters": N_BOOT,
        },
        "model_name": listener,
        "model_name_sanitized": sanitized,
        "date": date,
        "vocalgrad": {
            "run": str(Path(run).resolve()),
            "dataset": manifest.get("dataset"),
            "dataset_sha256": manifest.get("dataset_sha256"),
            "alarms": scored["alarms"],
            "untestable": scored["untestable"],
        },
    }
    path = folder / f"results_{date}.json"
    path.write_text(json.dumps(clean(doc), indent=2, sort_keys=False) + "\n")
    return [path, *written]


def _sample(doc_id: int, row: dict, fmt: str) -> dict:
    prompt = build_prompt(
        row["category"],
        row["variant"],
        fmt=row.get("format") or fmt,
        kind=row_kind(row),
        second=second_of(row),
    )
    target = {label: word for word, label in prompt.label_of.items()}.get(
        row["direction"], row["direction"]
    )
    response = row.get("response") if row.get("response") is not None else row.get("predicted")
    doc = {
        k: row.get(k)
        for k in (
            "item_id",
            "category",
            "direction",
            "tier",
            "curve",
            "magnitude",
            "source_id",
            "speaker_id",
        )
    } | {"source_kind": row_kind(row)}
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": target,
        "arguments": {"gen_args_0": {"arg_0": prompt.text, "arg_1": {"max_gen_toks": 16}}},
        "resps": [[response]],
        "filtered_resps": [response],
        "filter": FILTER,
        "metrics": ["accuracy"],
        "accuracy": float(row.get("predicted") == row["direction"]),
        "predicted": row.get("predicted"),
        "parse_status": row.get("parse_status"),
        "doc_hash": _sha(json.dumps(doc, sort_keys=True, default=str)),
        "prompt_hash": _sha(prompt.text),
        "target_hash": _sha(target),
    }

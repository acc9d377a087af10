"""Shortcut audit: can a label be read off cues that are not the target's course over time?

The benchmark promises that a listener who answers right has heard the gradual change. If
increase clips were, say, louder overall, longer, or had more leading silence than their
decrease twins, a listener could answer right without following the change at all. The
audit measures direction-invariant cues of every clip (whole-clip level, duration, spectral
centroid, F0, file size, digital silence, and what the first and last 300 ms look like),
trains simple classifiers on the train split and reports how well they predict the label on
the test split. A clean benchmark keeps them at chance.

Some cue families measure the target itself on some dimensions (the level of the last
300 ms *is* the volume at the end): each dimension declares those in
`DimensionSpec.target_cues`, and they are left out of its audit.

The order-free family (`vocalgrad.stimuli.order_free`: whole-file statistics that playing the
clip backwards leaves as they are) is audited apart, on every dimension and format, with no
exclusions: none of its cues can measure a direction, so none is a target cue, and the
renderer's equalised statistic is only one of its several level measures. It is gated for
gradual and comparison items. Beside it the audit reports the one-end observer: the
dimension's own measure at one end of the clip, which shows how much of a benchmark an
endpoint strategy answers without comparing over time (reported, not gated).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from threadpoolctl import threadpool_limits

from vocalgrad.dataset import clean, load_rows
from vocalgrad.files import atomic_write_text
from vocalgrad.parallel import TaskPool
from vocalgrad.records import AuditReport
from vocalgrad.stimuli.audit.cache import cached_cues, dataset_cues
from vocalgrad.stimuli.audit.classifiers import (
    N_BOOT,
    SEED,
    DirectionModel,
    audit_category,
    fit_direction_model,
    judge,
    one_end_report,
    order_free_report,
    redraw_failing,
)
from vocalgrad.stimuli.audit.cues import (
    CUE_NAMES,
    CUES_VERSION,
    FAMILIES,
    allowed_families,
    clip_cues,
    feature_names,
    format_families,
    row_parts,
    row_span,
    target_cue_names,
)
from vocalgrad.stimuli.audit.gates import ALPHA, DEALS, DRAWS, TARGET_ACCURACY, TARGET_AUC
from vocalgrad.stimuli.audit.report import failed_dimensions, format_audit

REPORT_FILE = "audit.json"


def _audit_task(task: tuple[str, list, dict]) -> tuple[str, dict]:
    """One category's audit, in a worker: tiny fits, so OpenMP threads cost more than they save."""
    category, rows, cues = task
    with threadpool_limits(1):
        return category, audit_category(category, rows, cues)


def audit_dataset(
    root: str | Path,
    *,
    cache: bool = True,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> AuditReport:
    """Shortcut audit of a dataset folder; writes `root/audit.json` and returns the report.

    Per category, classifiers (standardised logistic regression, gradient-boosted trees) are
    trained on the train split's cues (all families but the dimension's target cues) and
    predict the test split's labels: direction on changing clips, and constant vs changing
    where constant clips exist. Without a usable train split they are scored by grouped
    cross-validation over test sources. CIs resample sources (reported). The gates are the
    logistic regression's direction accuracy on the audited families and on the order-free
    family (gradual and comparison items) and its constant AUC, each against its permutation
    null, all of the build's gates one family (`classifiers.judge`): a build with no leak
    fails with probability at most ALPHA. A category too small to audit gets passes = None
    and does not fail the dataset.

    Parameters
    ----------
    root : the dataset folder.
    cache : keep measured cues in ``root/.audit`` and reuse them.
    workers : processes for measuring cues and fitting categories.
    progress : called with (done, total) clips while cues are measured.

    Returns
    -------
    The report written to ``audit.json`` (`AuditReport`); ``seconds_gates`` is the CPU time
    (s, summed over processes' fits) that the permutation nulls took.
    """
    started = time.time()
    root = Path(root)
    rows = load_rows(root)
    cues = dataset_cues(root, rows, cache=cache, workers=workers, compact=True, progress=progress)
    measured = time.time() - started
    tasks = []
    for category in sorted({r["category"] for r in rows}):
        chosen = [r for r in rows if r["category"] == category]
        tasks.append(
            (
                category,
                chosen,
                {r["item_id"]: cues[r["item_id"]] for r in chosen if r["item_id"] in cues},
            )
        )
    # categories are independent: their fits run in `workers` processes, the largest first so
    # that the last to start are short
    tasks.sort(key=lambda task: len(task[1]), reverse=True)
    done = dict(TaskPool(workers).map_tasks(_audit_task, tasks))
    per_category = {category: done[category] for category in sorted(done)}
    seconds_gates = sum(c.pop("_seconds_gates", 0.0) for c in per_category.values())
    family = judge(per_category)
    redraw_failing(per_category, {task[0]: task[1] for task in tasks}, cues)
    protocols = {c["protocol"] for c in per_category.values() if c["protocol"]}
    report = {
        "dataset": str(root),
        "protocol": protocols.pop() if len(protocols) == 1 else ("mixed" if protocols else None),
        "thresholds": {
            "alpha": ALPHA,
            "draws": DRAWS,
            "deals": DEALS,
            "target_accuracy": TARGET_ACCURACY,
            "target_auc": TARGET_AUC,
        },
        "family": family,
        "n_boot": N_BOOT,
        "seed": SEED,
        "cues_version": CUES_VERSION,
        "n_clips": len(rows),
        "seconds_cues": round(measured, 2),
        "seconds_gates": round(seconds_gates, 2),
        "seconds": round(time.time() - started, 2),
        "per_category": per_category,
        "passes": all(c["passes"] is not False for c in per_category.values()),
    }
    report = clean(report)
    atomic_write_text(root / REPORT_FILE, json.dumps(report, indent=2) + "\n")
    return report


__all__ = [
    "CUES_VERSION",
    "CUE_NAMES",
    "FAMILIES",
    "ALPHA",
    "DEALS",
    "DRAWS",
    "N_BOOT",
    "REPORT_FILE",
    "SEED",
    "TARGET_ACCURACY",
    "TARGET_AUC",
    "DirectionModel",
    "allowed_families",
    "audit_category",
    "audit_dataset",
    "cached_cues",
    "clip_cues",
    "dataset_cues",
    "failed_dimensions",
    "feature_names",
    "fit_direction_model",
    "format_audit",
    "format_families",
    "judge",
    "one_end_report",
    "order_free_report",
    "row_parts",
    "row_span",
    "target_cue_names",
]

"""The report's remedies section: tuned models (`vocalgrad finetune` runs) per method, the
category x category generalisation map, and whether the probe diagnosis predicted which
tuning works.

The prediction: where the direction is *present but unused*, retraining the readout (the LM
head) alone should recover it; where it is *lost across layers*, not encoded, or only
nonlinearly decodable, the head alone cannot, and only deeper adaptation (LoRA, full) can.
"Recovered" means the in-domain accuracy's CI lies above chance. The head reads only the
last answer-position state, so the table also shows the linear probe there: the most a
retrained head can reach, whatever earlier layers hold.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from vocalgrad.evaluation.score import score_rows
from vocalgrad.records import LABELS
from vocalgrad.report import figures
from vocalgrad.report.collect import Probe, Run, primary
from vocalgrad.report.model import Figure, Section, Table, Text
from vocalgrad.report.values import with_ci

METHODS = ("head", "lora", "full")
HEAD_RECOVERS = "present but unused"
HEAD_CANNOT = ("lost across layers", "not encoded", "only nonlinearly decodable")


def tuning_of(run: Run) -> dict | None:
    """The run's `finetune` manifest entry, if it is a tuned model's evaluation."""
    entry = run.manifest.get("finetune")
    return entry if isinstance(entry, dict) else None


def _base_id(tuning: Mapping) -> str | None:
    """The untuned listener's id (`finetune.base.listener_id`)."""
    base = tuning.get("base")
    return base.get("listener_id") if isinstance(base, Mapping) else base


def _by_category(run: Run, n_boot: int, seed: int) -> dict[str, dict]:
    rows, _ = primary(run.rows)
    changing = [r for r in rows if r.get("direction") in LABELS]
    return {
        g["group"]: g
        for g in score_rows(changing, n_boot=n_boot, seed=seed).table
        if g["group"] != "overall"
    }


def _cell(g: Mapping | None) -> str:
    return "–" if g is None else with_ci(g["accuracy"], g["accuracy_lo"], g["accuracy_hi"])


def _recovered(g: Mapping | None) -> bool | None:
    if g is None or not np.isfinite(g.get("accuracy_lo", np.nan)):
        return None
    return bool(g["accuracy_lo"] > 0.5)


def _last_answer_probe(probe: Probe) -> dict[str, str]:
    """Category -> the linear probe's balanced accuracy [CI] at the deepest answer-position
    stage: what the LM head, which reads only that state, can use."""
    out: dict[str, str] = {}
    for cat in {str(r["category"]) for r in probe.layers}:
        answer = [
            r
            for r in probe.layers
            if r["category"] == cat
            and r["probe"] == "linear"
            and str(r["stage"]).endswith("@answer")
        ]
        if answer:
            last = max(answer, key=lambda r: r["layer_index"])
            out[cat] = (
                f"{with_ci(last['balanced_accuracy'], last['ci_lo'], last['ci_hi'])} "
                f"({last['stage'].split('@')[0]}.{last['layer_index']})"
            )
    return out


def remedies(runs: Sequence[Run], probes: Sequence[Probe], n_boot: int, seed: int) -> Section:
    tuned = [(r, t) for r in runs if (t := tuning_of(r))]
    if not tuned:
        return Section(
            "remedies",
            "Remedies: tuning",
            [
                Text(
                    "No tuned runs given (`vocalgrad finetune` output folders): section skipped.",
                    "note",
                )
            ],
            "No tuning runs.",
        )
    results = {r.name: _by_category(r, n_boot, seed) for r, _ in tuned}
    base_runs = {
        r.manifest.get("listener", {}).get("listener"): r for r in runs if not tuning_of(r)
    }
    blocks: list = [
        Text(
            "Training on one dimension's train split, tested on every dimension's "
            "test split. head: the LM output projection only; lora: low-rank "
            "adapters on all linear layers; full: every weight."
        )
    ]

    # in-domain accuracy per method, with the untuned base alongside
    single = {
        (t["method"], cats[0]): r.name
        for r, t in tuned
        if len(cats := sorted(t["train_categories"])) == 1
    }
    trained = sorted({c for _, c in single})
    methods = [m for m in METHODS if any(k[0] == m for k in single)]
    base = {_base_id(t) for _, t in tuned}
    base_run = next((base_runs[b] for b in base if b in base_runs), None)
    base_acc = _by_category(base_run, n_boot, seed) if base_run else {}
    rows = [
        [
            c,
            _cell(base_acc.get(c)) if base_run else "–",
            *[_cell(results[single[(m, c)]].get(c)) if (m, c) in single else "–" for m in methods],
        ]
        for c in trained
    ]
    blocks.append(
        Table(
            ["trained on", "before tuning", *methods],
            rows,
            caption="In-domain accuracy [95% CI, clustered by source] on the trained "
            "dimension's test split.",
        )
    )

    # generalisation maps: train category x test category, one per method
    tested = sorted({c for res in results.values() for c in res})
    for m in methods:
        train_cats = [c for c in trained if (m, c) in single]
        grid = np.array(
            [
                [results[single[(m, c)]].get(t, {}).get("accuracy", np.nan) for t in tested]
                for c in train_cats
            ],
            dtype=float,
        )
        blocks.append(
            Figure(
                f"generalisation-{m}",
                figures.heatmap(
                    grid,
                    train_cats,
                    tested,
                    f"{m}: trained on (rows) -> tested on (columns)",
                    "accuracy",
                    limits=(0.0, 1.0),
                ),
                f"Generalisation map ({m}): accuracy on each dimension's test split "
                "after training on one dimension; 0.5 is chance.",
                f"generalisation map {m}",
                [
                    {"method": m, "trained_on": c, "tested_on": t, "accuracy": grid[i, j]}
                    for i, c in enumerate(train_cats)
                    for j, t in enumerate(tested)
                ],
            )
        )

    # did the diagnosis predict which tuning works?
    verdicts, ceilings = {}, {}
    for p in probes:
        if p.listener in base:
            verdicts |= {str(d.get("category")): str(d.get("verdict")) for d in p.diagnosis}
            ceilings |= _last_answer_probe(p)
    rows = []
    for c in trained:
        verdict = verdicts.get(c)
        head = results[single[("head", c)]].get(c) if ("head", c) in single else None
        deeper = next(
            (results[single[(m, c)]].get(c) for m in ("lora", "full") if (m, c) in single), None
        )
        predicted = (
            "head recovers"
            if verdict == HEAD_RECOVERS
            else "head cannot; deeper can"
            if verdict in HEAD_CANNOT
            else "no prediction"
        )
        recovered = _recovered(head)
        if predicted == "no prediction" or recovered is None:
            held = "–"
        else:
            held = "yes" if recovered == (predicted == "head recovers") else "NO"
        rows.append(
            [
                c,
                verdict or "– (no probe of the base model)",
                ceilings.get(c, "–"),
                predicted,
                _cell(head),
                _cell(deeper),
                held,
            ]
        )
    blocks.append(
        Table(
            [
                "category",
                "diagnosis of the base model",
                "linear probe at the last answer state (the head's ceiling)",
                "predicted",
                "head",
                "LoRA/full",
                "prediction held",
            ],
            rows,
            caption="The diagnosis (probing the untuned model) predicts which remedy "
            "works; the head 'recovers' when its CI lies above 0.5.",
        )
    )
    held = sum(r[-1] == "yes" for r in rows)
    judged = sum(r[-1] in ("yes", "NO") for r in rows)
    return Section(
        "remedies",
        "Remedies: tuning",
        blocks,
        f"{len(tuned)} tuned run(s); the diagnosis predicted the tuning outcome for "
        f"{held} of {judged} judged dimensions.",
    )

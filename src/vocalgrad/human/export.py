"""Answers -> the evaluation result format, so people are scored exactly like models.

`results.jsonl` holds one row per (item, listener, variant) for test trials: listener
`human:<annotator>` for each person who passed screening, and a pooled listener `human`
(majority vote; a tie is left unparsed, i.e. counted wrong). Catch, practice and screening
trials go to `trials.jsonl` for audit only; `agreement.json` and `manifest.json` complete it.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

import numpy as np

from vocalgrad._version import __version__
from vocalgrad.files import HUMAN_EXPORT, atomic_write_text, claim_output
from vocalgrad.formats import DEFAULT, row_format
from vocalgrad.human import agreement as ag
from vocalgrad.human.store import Store
from vocalgrad.questions.prompts import question_text, second_of
from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import row_kind

ITEM_KEYS = (
    "category",
    "direction",
    "tier",
    "curve",
    "magnitude",
    "unit",
    "source_id",
    "speaker_id",
    "split",
)


def _versions() -> dict[str, str]:
    out = {"vocalgrad": __version__, "python": platform.python_version()}
    for name in ("numpy", "fastapi", "uvicorn", "pydantic"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _prompts(store: Store, categories: list[str], variant: str, fmt: str) -> dict[str, str]:
    """The questions of a study by category; where a question names two dimensions, by
    "category+second_category"."""
    pairs = sorted({(i["category"], second_of(i) or "") for i in store.items().values()})
    if not any(second for _, second in pairs):
        return {c: question_text(c, variant, fmt) for c in categories}
    return {
        f"{c}+{second}": question_text(c, variant, fmt, second=second)
        for c, second in pairs
        if second
    }


def _annotator_row(t: Mapping, item: Mapping, variant: str) -> dict:
    predicted = t["answer"] if t["answer"] in LABELS else None
    return {
        "item_id": t["item_id"],
        "listener": f"human:{t['annotator_id']}",
        "annotator": t["annotator_id"],
        "variant": variant,
        "kind": t["kind"],
        **{k: item.get(k) for k in ITEM_KEYS},
        "source_kind": row_kind(item),
        "prompt": question_text(
            item["category"], variant, row_format(item), row_kind(item), second_of(item)
        ),
        "format": row_format(item),
        "response": t["answer"],
        "predicted": predicted,
        "correct": predicted == item["direction"],
        "rt_s": t["rt_s"],
        "server_rt_s": t["server_rt_s"],
        "plays": t["plays"],
        "flagged": bool(t["annotator_flagged"]),
    }


def _pooled(rows: Sequence[Mapping]) -> list[dict]:
    by_item: dict[str, list[Mapping]] = defaultdict(list)
    for r in rows:
        by_item[r["item_id"]].append(r)
    out = []
    for item_id in sorted(by_item):
        members = by_item[item_id]
        votes = Counter(r["predicted"] for r in members if r["predicted"] in LABELS)
        top = votes.most_common()
        predicted = top[0][0] if top and (len(top) == 1 or top[0][1] > top[1][1]) else None
        first = members[0]
        rts = [r["rt_s"] for r in members if r["rt_s"] is not None]
        out.append(
            {
                **{
                    k: first[k]
                    for k in (
                        "item_id",
                        "variant",
                        "kind",
                        "source_kind",
                        "prompt",
                        "format",
                        *ITEM_KEYS,
                    )
                },
                "listener": "human",
                "annotator": None,
                "response": ",".join(f"{d}:{votes[d]}" for d in LABELS),
                "predicted": predicted,
                "correct": predicted == first["direction"],
                "rt_s": float(np.median(rts)) if rts else None,
                "plays": sum(r["plays"] for r in members),
                "n_annotators": len(members),
                "annotators": sorted(r["annotator"] for r in members),
            }
        )
    return out


def annotator_rows(store: Store, kinds: Sequence[str] = ("test",)) -> list[dict]:
    """Per-annotator rows of the given trial kinds, from annotators who were not excluded."""
    items, variant = store.items(), store.config().variant
    return [
        _annotator_row(t, items[t["item_id"]], variant)
        for t in store.answered_trials()
        if t["kind"] in kinds and t["annotator_status"] != "excluded"
    ]


def result_rows(store: Store, include_flagged: bool = False) -> list[dict]:
    """Per-annotator rows plus pooled rows (flagged annotators pooled only on request)."""
    rows = annotator_rows(store)
    pooled = _pooled([r for r in rows if include_flagged or not r["flagged"]])
    return rows + pooled


def uncovered_items(
    store: Store, rows: Sequence[Mapping], pooled: Sequence[Mapping]
) -> dict[str, str]:
    """Pool items without a pooled row, each with why: a pooled score over fewer items than
    the study asked must say which ones are missing, not cover fewer in silence."""
    covered = {r["item_id"] for r in pooled}
    answered = {r["item_id"] for r in rows}
    return {
        i: (
            "answered only by annotators flagged on catch trials"
            if i in answered
            else "no answer (yet) from an annotator who passed the headphone screen"
        )
        for i in store.meta()["pool"]
        if i not in covered
    }


def agreement_report(store: Store, include_flagged: bool = False) -> dict:
    rows = annotator_rows(store)
    catch = annotator_rows(store, ("catch",))
    pool_rows = [r for r in rows if include_flagged or not r["flagged"]]
    pooled = _pooled(pool_rows)
    missing = uncovered_items(store, rows, pooled)
    progress = {p["annotator"]: p for p in store.progress()}
    per: dict[str, dict] = {}
    for a in sorted({r["annotator"] for r in rows} | {r["annotator"] for r in catch}):
        mine = [r for r in rows if r["annotator"] == a]
        per[a] = {
            **ag.accuracy(mine),
            "catch": ag.accuracy([r for r in catch if r["annotator"] == a]),
            "rt": ag.rt_summary(r["rt_s"] for r in mine),
            "plays_mean": float(np.mean([r["plays"] for r in mine])) if mine else None,
            "status": progress[a]["status"],
            "flagged": progress[a]["flagged"],
            "flag_reason": progress[a]["flag_reason"],
        }
    categories = sorted({r["category"] for r in pool_rows})
    return {
        "agreement": {
            "overall": ag.agreement(pool_rows),
            "by_category": {
                c: ag.agreement([r for r in pool_rows if r["category"] == c]) for c in categories
            },
        },
        "pooled_accuracy": ag.accuracy(pooled),
        "pooled_coverage": {
            "pool": len(store.meta()["pool"]),
            "pooled": len(pooled),
            "missing": missing,
        },
        "per_annotator": per,
        "catch": ag.accuracy(catch),
        "rt": {
            "overall": ag.rt_summary(r["rt_s"] for r in pool_rows),
            "by_category": {
                c: ag.rt_summary(r["rt_s"] for r in pool_rows if r["category"] == c)
                for c in categories
            },
        },
        "excluded": {a: p["reason"] for a, p in progress.items() if p["status"] == "excluded"},
        "flagged": {a: p["flag_reason"] for a, p in progress.items() if p["flagged"]},
        "included_flagged_in_pool": include_flagged,
    }


def _nan_to_none(value: object) -> object:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _nan_to_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_to_none(v) for v in value]
    return value


def export(
    store: Store, out: str | Path, include_flagged: bool = False, overwrite: bool = False
) -> dict:
    """Write results.jsonl, trials.jsonl, agreement.json and manifest.json into `out`.

    Atomic: the files are written into a temporary sibling folder, which becomes `out` by one
    rename (or, over an earlier export, whose files are replaced one by one by rename, the
    old manifest removed first and the new one moved in last). A kill at any moment leaves
    no `out`, the earlier export whole, or files without a manifest, which `score` and
    `report` refuse as incomplete: never a half-written file read as an export.

    `out` must be new, empty or an earlier export, whole or left so by a kill
    (`files.claim_output`): a model's run folder there would lose its results. `overwrite`
    writes there anyway. A `summary.json` beside the export scored the answers it replaces,
    so it is removed.
    """
    out = claim_output(out, HUMAN_EXPORT, reads=[store.meta().get("dataset")], overwrite=overwrite)
    rows = result_rows(store, include_flagged)
    items = store.items()
    audit = [
        {
            "annotator": t["annotator_id"],
            "kind": t["kind"],
            "seq": t["seq"],
            "item_id": t["item_id"],
            "answer": t["answer"],
            "truth": t["truth"],
            "correct": t["answer"] == t["truth"],
            "rt_s": t["rt_s"],
            "plays": t["plays"],
            "fetches": t["fetches"],
            "play_rejects": t["play_rejects"],
            "answered_at": t["answered_at"],
            "category": items[t["item_id"]]["category"] if t["item_id"] else None,
        }
        for t in store.answered_trials()
    ]
    report = agreement_report(store, include_flagged)
    meta, config = store.meta(), store.config()
    fmt = next((i.get("format") for i in store.items().values() if i.get("format")), DEFAULT)
    manifest = {
        "listener": "human",
        "listeners": sorted({r["listener"] for r in rows}),
        "kind": "human listening test",
        "dataset": meta["dataset"],
        "dataset_sha256": meta["dataset_sha256"],
        "study": config.to_dict(),
        "variant": config.variant,
        "format": fmt,
        "prompts": _prompts(store, meta["categories"], config.variant, fmt),
        "pooling": "majority vote over annotators who passed screening"
        + ("" if include_flagged else " and were not flagged on catch trials")
        + "; ties are unparsed (predicted null, counted wrong)",
        "annotators": store.progress(),
        "notes": meta.get("notes", []),
        "warnings": meta.get("warnings", []),
        "versions": _versions(),
        "created_at": meta["created_at"],
        "exported_at": time.time(),
        "pooled_coverage": report["pooled_coverage"],
        "n_rows": len(rows),
        "files": ["results.jsonl", "trials.jsonl", "agreement.json"],
    }
    texts = {
        name: "".join(json.dumps(_nan_to_none(r), sort_keys=True) + "\n" for r in data)
        for name, data in (("results.jsonl", rows), ("trials.jsonl", audit))
    }
    texts["agreement.json"] = json.dumps(_nan_to_none(report), indent=2, sort_keys=True) + "\n"
    texts[MANIFEST] = json.dumps(_nan_to_none(manifest), indent=2, sort_keys=True) + "\n"
    _write_all(out, texts)
    (out / "summary.json").unlink(missing_ok=True)
    return {"rows": len(rows), "out": str(out), "report": report}


MANIFEST = "manifest.json"


def _write_all(out: Path, texts: dict[str, str]) -> None:
    """Write `texts` (file name -> text, the manifest last) into `out` as one step: see
    `export`."""
    if out.exists() and not out.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    stage = out.with_name(f".tmp-{out.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    stage.mkdir()  # the umask's mode, as `out` would get (a temporary folder's is private)
    try:
        for name, text in texts.items():
            atomic_write_text(stage / name, text)
        try:
            os.rename(stage, out)  # `out` absent or an empty folder: all at once
            return
        except OSError as err:
            if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise type(err)(err.errno, err.strerror, str(out)) from err
        (out / MANIFEST).unlink(missing_ok=True)  # the folder reads as incomplete meanwhile
        for name in texts:  # the manifest last: it marks the export complete
            os.replace(stage / name, out / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)

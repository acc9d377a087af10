"""Extract every stage of every item once, pool it, and keep it on disk for all later analyses.

One folder per (dataset content, listener manifest, prompt, pooling, items): `index.json` plus
one float16 memory-mapped `.npy` per stage (items x features) and `lens.npy` (items x layers,
float32). Rows are written in a fixed item order and `index.json` records how many are done
after each flushed batch, so a killed extraction resumes at the first unfinished item.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vocalgrad.audio import load_audio, resample
from vocalgrad.executors import Executor
from vocalgrad.files import atomic_write_text
from vocalgrad.listeners.base import Listener, Request
from vocalgrad.probing.pooling import pool
from vocalgrad.progress import progress
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import SPEECH, row_kind

FORMAT = "vocalgrad-features-v1"
FLOAT16_MAX = float(np.finfo(np.float16).max)
LENS_OPTIONS = LABELS


@dataclass
class Features:
    """Pooled features of one item list: stage -> (items x d) float16 memmap, in stage order."""

    item_ids: list[str]
    stages: dict[str, np.ndarray]
    lens: np.ndarray | None  # items x lens layers: log p(increase) - log p(decrease)
    lens_note: str  # why there is no lens, or how it was computed
    folder: Path


def feature_key(
    dataset_sha: str,
    listener: Listener,
    category: str,
    variant: str,
    pooling: str,
    item_ids: Sequence[str],
    kinds: Sequence[str] = (SPEECH,),
) -> str:
    """The cache key of one feature extraction: any change to what the features depend on
    gives a new folder.

    Parameters
    ----------
    dataset_sha : str
        Content hash of the dataset the items come from.
    listener : Listener
        Its `manifest` (id, revision, settings) is part of the key.
    category, variant : str
        The question asked while the states are read.
    pooling : str
        How sequence stages are pooled.
    item_ids : sequence of str
        The items, in row order.
    kinds : sequence of str
        The kinds of sound among the items (`row_kind`): the question names each.

    Returns
    -------
    str
        20 hex digits.
    """
    prompts = [build_prompt(category, variant, kind=kind) for kind in sorted(set(kinds))]
    parts = {
        "format": FORMAT,
        "dataset": dataset_sha,
        "listener": listener.manifest(),
        # speech alone keeps the key it had before sounds had kinds
        "prompt": [[p.text, list(p.options), p.audio_position] for p in prompts]
        if set(kinds) != {SPEECH}
        else [prompts[0].text, list(prompts[0].options), prompts[0].audio_position],
        "pooling": pooling,
        "items": hashlib.sha256("\n".join(item_ids).encode()).hexdigest(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:20]


def _file(stage: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stage) + ".npy"


def _audio(row: dict, sr: int) -> np.ndarray:
    """In-memory `audio` (synthetic organisms) or the clip file, at the listener's rate."""
    if row.get("audio") is not None:
        return np.asarray(row["audio"], np.float32)
    audio, file_sr = load_audio(row["path"])
    return resample(audio, file_sr, sr)


def _lens(
    listener: Listener, requests: list[Request], states: list[dict]
) -> tuple[list | None, str]:
    """Lens rows of one batch (read from `states` where the listener can), or None and why."""
    if not listener.can_lens:
        return None, f"{listener.listener_id} has no logit lens"
    return listener.answer_lens(requests, LENS_OPTIONS, states), "listener.answer_lens"


def _write_index(folder: Path, index: dict) -> None:
    atomic_write_text(folder / "index.json", json.dumps(index, indent=1))


def _open(folder: Path, index: dict, mode: str) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    n = len(index["item_ids"])
    arrays = {
        s: np.lib.format.open_memmap(
            folder / _file(s), mode=mode, dtype=np.float16, shape=(n, d) if mode == "w+" else None
        )
        for s, d in index["stages"].items()
    }
    lens = None
    if index.get("lens_layers"):
        lens = np.lib.format.open_memmap(
            folder / "lens.npy",
            mode=mode,
            dtype=np.float32,
            shape=(n, index["lens_layers"]) if mode == "w+" else None,
        )
    return arrays, lens


def _features(
    listener: Listener, batch: tuple[list[Request], str, bool]
) -> tuple[list, list | None, str]:
    """Pooled stages and lens rows of one batch: the model step, which an executor may run
    in a listener actor elsewhere (the arrays come back; only the driver writes the cache)."""
    requests, pooling, with_lens = batch
    states = listener.hidden_states(requests)
    lens_rows, note = _lens(listener, requests, states) if with_lens else (None, "not asked")
    pooled = [{k: pool(v, pooling) for k, v in st.items()} for st in states]
    return pooled, lens_rows, note


def extract(
    rows: Sequence[dict],
    listener: Listener,
    folder: str | Path,
    *,
    category: str,
    pooling: str = "segments16",
    variant: str = "default",
    batch_size: int = 8,
    with_lens: bool = True,
    executor: Executor | None = None,
) -> Features:
    """Features for `rows` (one category), reusing and completing what `folder` holds.

    Batches run on `executor` (default: here) and may finish in any order; rows are written
    at their fixed positions and `done` advances over the finished prefix only, so a killed
    extraction resumes at the first unfinished item.

    Parameters
    ----------
    rows : sequence of dict
        Items with ``item_id`` and ``path`` or in-memory ``audio``.
    listener : Listener
        Declares `can_probe`; the lens is read where it declares `can_lens`.
    folder : str or Path
        The cache folder of this extraction (see `feature_key`).
    category, variant : str
        The question asked while the states are read.
    pooling : str
        How each sequence stage becomes one vector (one of `POOLINGS`).
    batch_size : int
        Items per model pass.
    with_lens : bool
        Also read the lens (log p(increase) - log p(decrease) per layer).
    executor : Executor, optional
        Where the model passes run.

    Returns
    -------
    Features
        Per stage an (items, d) float16 memory map (values beyond float16 clipped, counted in
        index.json), and the lens as (items, layers) float32 or None with the reason.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    item_ids = [r["item_id"] for r in rows]
    index_path = folder / "index.json"
    index = json.loads(index_path.read_text()) if index_path.is_file() else None
    if index is not None and index.get("item_ids") != item_ids:
        index = None  # a different item list in a reused folder: start over
    arrays, lens = _open(folder, index, "r+") if index and index.get("stages") else ({}, None)
    done = index["done"] if index and index.get("stages") else 0
    # each item is asked about in its kind's words (a tone as a tone)
    prompts = {kind: build_prompt(category, variant, kind=kind) for kind in {*map(row_kind, rows)}}
    starts = list(range(done, len(rows), batch_size))

    def batches():
        for start in starts:
            requests = [
                Request(
                    r["item_id"],
                    prompts[row_kind(r)].for_item(r["item_id"]),
                    {r["item_id"]: _audio(r, listener.sample_rate)},
                )
                for r in rows[start : start + batch_size]
            ]
            yield requests, pooling, with_lens

    finished: set[int] = set()
    with progress(len(rows), f"features {listener.listener_id} {category}", initial=done) as bar:
        for b, (pooled, lens_rows, note) in (executor or Executor()).map_batches(
            listener, _features, batches()
        ):
            start = starts[b]
            if not arrays:
                index = {
                    "format": FORMAT,
                    "item_ids": item_ids,
                    "done": 0,
                    "pooling": pooling,
                    "stages": {k: int(v.size) for k, v in pooled[0].items()},
                    "lens_layers": len(lens_rows[0]) if lens_rows else 0,
                    "lens_note": note,
                    "clipped_values": 0,
                }
                arrays, lens = _open(folder, index, "w+")
            for i, feats in enumerate(pooled):
                for k, arr in arrays.items():
                    v = feats[k]
                    index["clipped_values"] += int(np.sum(np.abs(v) > FLOAT16_MAX))
                    arr[start + i] = np.clip(v, -FLOAT16_MAX, FLOAT16_MAX)
                if lens is not None and lens_rows is not None:
                    lens[start + i] = lens_rows[i]
            for arr in [*arrays.values(), *([lens] if lens is not None else [])]:
                arr.flush()
            finished.add(start)
            while index["done"] in finished:
                index["done"] = min(index["done"] + batch_size, len(rows))
            _write_index(folder, index)
            bar.update(len(pooled))
    assert index is not None
    arrays, lens = _open(folder, index, "r")
    return Features(item_ids, arrays, lens, index.get("lens_note", ""), folder)

"""The audit's cue cache: the cues of every clip of a dataset, measured in parallel and kept
in ``.audit/cues.jsonl`` so a re-audit measures only what changed."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path

from threadpoolctl import threadpool_limits

from vocalgrad.audio import load_audio
from vocalgrad.dataset import dumps, load_references, load_rows
from vocalgrad.files import atomic_path
from vocalgrad.parallel import process_pool
from vocalgrad.stimuli.audit.cues import (
    CUE_NAMES,
    CUES_VERSION,
    clip_cues,
    measures_position,
    row_parts,
    row_span,
    rows_format,
)
from vocalgrad.stimuli.verify import row_pitch_ceiling

CACHE_DIR = ".audit"
CACHE_FILE = "cues.jsonl"
_BATCH = 128  # clips per appended cache batch


def _cache_key(row: Mapping) -> str:
    return f"{row['item_id']}|{row.get('audio_sha256') or ''}"


def _read_cache(path: Path) -> tuple[dict[str, dict[str, float]], int, bool]:
    """(key -> cues, number of lines, whether the file needs rewriting: torn or stale lines)."""
    if not path.is_file():
        return {}, 0, False
    cues: dict[str, dict[str, float]] = {}
    text = path.read_text(errors="replace")
    dirty = bool(text) and not text.endswith("\n")
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        try:
            entry = json.loads(line)
            if entry.get("v") != CUES_VERSION:
                raise ValueError("another cue version")
            cues[entry["key"]] = {
                k: (float("nan") if v is None else float(v)) for k, v in entry["cues"].items()
            }
        except (ValueError, KeyError, TypeError, AttributeError):  # torn, foreign or stale line
            dirty = True
    return cues, len(lines), dirty or len(lines) != len(cues)


def _write_cache(path: Path, entries: Mapping[str, Mapping[str, float]]) -> None:
    """Replace the cache atomically (temporary file + rename)."""
    with atomic_path(path) as tmp, tmp.open("w") as f:
        for key, cues in entries.items():
            f.write(dumps({"key": key, "v": CUES_VERSION, "cues": dict(cues)}) + "\n")


def _append_cache(path: Path, entries: Mapping[str, Mapping[str, float]]) -> None:
    """Append one batch in a single write (a killed run leaves at most a torn last line,
    which the next read skips and rewrites)."""
    text = "".join(
        dumps({"key": k, "v": CUES_VERSION, "cues": dict(c)}) + "\n" for k, c in entries.items()
    )
    with path.open("a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _try(write: Callable[[Path, Mapping], None], path: Path, entries: Mapping) -> bool:
    """Write to the cache if the dataset folder allows it (a read-only release does not:
    the cues are then measured on every run)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, entries)
        return True
    except OSError as err:
        warnings.warn(
            f"{path}: cannot write the cue cache ({err}); cues will be remeasured next time",
            stacklevel=3,
        )
        return False


def _init_worker() -> None:
    threadpool_limits(1)


def _cues_of_file(
    job: tuple[str, tuple[float, float] | None, list | None, float, bool],
) -> dict[str, float]:
    path, span, parts, pitch_ceiling_hz, position = job
    audio, sr = load_audio(path, mono=False)
    return clip_cues(audio, sr, span, parts, pitch_ceiling_hz, position)


def _chunksize(n_jobs: int, workers: int) -> int:
    """Clips a worker takes at a time: few enough that the last ones spread over the workers."""
    return max(1, min(16, n_jobs // (8 * workers)))


def dataset_cues(
    root: str | Path,
    rows: Sequence[Mapping] | None = None,
    *,
    cache: bool = True,
    workers: int = 1,
    compact: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, float]]:
    """item_id -> cues for `rows` (default: every clip of the dataset at `root`).

    Cues are cached in `root/.audit/cues.jsonl`, keyed by item id and audio sha256, and the
    cache is appended batch by batch, so a rerun reads instead of measuring and an
    interrupted run resumes. `compact` drops cached entries of clips not in `rows` (only
    sensible when `rows` is the whole dataset). Each clip's F0 cue is tracked in its source's
    pitch range (`row_pitch_ceiling`). The position family is measured only for a format
    whose audit reads it (`measures_position`); a cached clip without it is measured anew
    where it is needed."""
    root = Path(root)
    rows = list(load_rows(root) if rows is None else rows)
    path = root / CACHE_DIR / CACHE_FILE
    cached, _, dirty = _read_cache(path) if cache else ({}, 0, False)
    position = measures_position(rows_format(rows))
    if position:
        cached = {k: v for k, v in cached.items() if CUE_NAMES["position"][0] in v}
    wanted = {_cache_key(r) for r in rows}
    writable = cache
    if cache and (dirty or (compact and any(k not in wanted for k in cached))):
        if compact:
            cached = {k: v for k, v in cached.items() if k in wanted}
        writable = _try(_write_cache, path, cached)
    todo: dict[str, tuple[str, tuple[float, float] | None, list | None, float, bool]] = {}
    references = load_references(root) if any(_cache_key(r) not in cached for r in rows) else {}
    for r in rows:
        key = _cache_key(r)
        if key not in cached:
            ceiling = row_pitch_ceiling(r, references.get(r.get("source_id")))
            todo.setdefault(key, (r["path"], row_span(r), row_parts(r), ceiling, position))
    if todo:
        keys = list(todo)
        jobs = [todo[k] for k in keys]
        with ExitStack() as stack:
            # every clip is queued at once and results are taken in order as they come, so no
            # worker waits for a batch's slowest clip; the cache grows a batch at a time
            if workers > 1:
                pool = stack.enter_context(process_pool(workers, initializer=_init_worker))
                measured = pool.map(_cues_of_file, jobs, chunksize=_chunksize(len(jobs), workers))
            else:
                stack.enter_context(threadpool_limits(1))
                measured = map(_cues_of_file, jobs)
            fresh: dict[str, dict[str, float]] = {}
            for done, (key, cues) in enumerate(zip(keys, measured, strict=True), start=1):
                fresh[key] = cues
                if len(fresh) == _BATCH or done == len(keys):
                    cached.update(fresh)
                    if writable:
                        writable = _try(_append_cache, path, fresh)
                    fresh = {}
                    if progress is not None:
                        progress(done, len(keys))
    return {r["item_id"]: cached[_cache_key(r)] for r in rows}


def cached_cues(root: str | Path, rows: Sequence[Mapping]) -> dict[str, dict[str, float]]:
    """item_id -> cues of the `rows` whose cues the cache at `root` already holds (the build's
    audit measured every clip), measuring nothing: a reader that answers many clips looks
    them up instead of measuring them again."""
    cached, _, _ = _read_cache(Path(root) / CACHE_DIR / CACHE_FILE)
    return {r["item_id"]: cached[k] for r in rows if (k := _cache_key(r)) in cached}

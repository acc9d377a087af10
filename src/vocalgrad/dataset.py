"""The on-disk dataset schema (HF audiofolder layout): read, write, validate, card.

    DATASET/
      README.md              dataset card
      build.json             config, versions, seed, content hashes
      build_report.json      counts, refused conditions, skipped sources, dropped clips
      test/metadata.jsonl    one row per clip; audio next to it with opaque names
      train/metadata.jsonl
      references/            the normalised sources (what measurements compare against)

The official VocalGrad release uses the plain Hugging Face audio layout instead (a root
`metadata.csv`, audio under `audio/`, test split only, no references): `load_rows` reads it
into the same row schema, and `resolve` turns `hf:NAME[@SPLIT]` into such a folder from the
local datasets cache, so every stage takes either.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from vocalgrad.errors import DatasetError
from vocalgrad.files import atomic_path
from vocalgrad.records import DatasetRow, schema_fields, validator

log = logging.getLogger("vocalgrad")

SPLITS = ("test", "train")
REBUILD_HINT = (
    "the dataset is damaged: rebuild it (vocalgrad build --overwrite) or restore the file"
)
REFERENCES = "references"


def clean(value: Any) -> Any:
    """JSON has no NaN: write missing or undefined numbers as null (numpy scalars as plain
    numbers), through dicts, lists and tuples."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def dumps(row: dict) -> str:
    return json.dumps(clean(row), sort_keys=True, separators=(",", ":"))


def write_jsonl(path: Path, rows: Iterable[dict]) -> None:
    """Atomic: write a temporary file, then rename (removed again if the write fails)."""
    with atomic_path(path) as tmp, tmp.open("w") as f:
        for row in rows:
            f.write(dumps(row) + "\n")


def read_jsonl(path: Path, *, torn: str = "error", hint: str = "") -> Iterator[dict]:
    """Rows of a JSONL file. A line that does not parse (a torn write: a killed writer, a
    full disk) is never passed over in silence: `torn="error"` raises `DatasetError`,
    `torn="skip"` logs one warning per line and goes on, for logs whose rows a rerun makes
    again. `hint` says what to do and ends either message."""
    for _, row in numbered_jsonl(path, torn=torn, hint=hint):
        yield row


def numbered_jsonl(
    path: Path, *, torn: str = "error", hint: str = ""
) -> Iterator[tuple[int, dict]]:
    """(line number from 1, row) of a JSONL file, as `read_jsonl` reads it: an error about a
    row can name its line."""
    with path.open("rb") as f:
        lines = f.read().split(b"\n")
    for i, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            where = "last line" if i == len(lines) else f"line {i}"
            problem = f"{path}:{i}: the {where} is not valid JSON (a torn write?: {err})"
            if torn == "skip":
                log.warning("%s; skipped%s", problem, f"; {hint}" if hint else "")
                continue
            raise DatasetError(problem + (f"; {hint}" if hint else "")) from None
        if not isinstance(row, dict):
            raise DatasetError(
                f"{path}:{i}: a row must be a JSON object, not {type(row).__name__}"
                + (f"; {hint}" if hint else "")
            )
        yield i, row


def read_json(path: Path, hint: str) -> dict:
    """A JSON object file (a manifest, a summary); a damaged one is one clear error."""
    try:
        data = json.loads(path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DatasetError(f"{path}: not valid JSON ({err}); {hint}") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object, not {type(data).__name__}; {hint}")
    return data


def repair_tail(path: Path) -> str | None:
    """Make a JSONL log safe to append to: a last line without its newline (a writer killed
    mid-row, a full disk) is cut off and kept in `<name>.torn`, so the next row starts on a
    line of its own. Returns a message saying what was done, or None if nothing was."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        cut = size
        while cut > 0:
            start = max(0, cut - 65536)
            f.seek(start)
            chunk = f.read(cut - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                cut = start + newline + 1
                break
            cut = start
        if cut == size:
            return None
        f.seek(cut)
        tail = f.read()
        try:
            whole = isinstance(json.loads(tail), dict)
        except (json.JSONDecodeError, UnicodeDecodeError):
            whole = False
        if whole:  # a complete row that only lacks its newline: keep it
            f.seek(size)
            f.write(b"\n")
            return None
        quarantine = path.with_name(path.name + ".torn")
        with quarantine.open("ab") as q:
            q.write(tail + b"\n")
            q.flush()
            os.fsync(q.fileno())
        f.truncate(cut)
        f.flush()
        os.fsync(f.fileno())
    return (
        f"{path}: cut a torn last line ({len(tail)} bytes, left by an interrupted write) "
        f"and kept it in {quarantine}"
    )


def check_row(row: dict, where: str) -> None:
    """Validate a dataset row against `vocalgrad.records.DatasetRow`.

    Parameters
    ----------
    row : dict
        One ``metadata.jsonl`` row.
    where : str
        How the message names the row (file, line and item id).

    Raises
    ------
    DatasetError
        One line naming the row, the field and what is wrong (a missing field, a label that
        is not one of the three, a number that is text, ...).
    """
    try:
        validator(DatasetRow).validate_python(row)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'row'}: {e['msg'].lower()}"
            + ("" if e["type"] == "missing" else f" (found {e['input']!r})")
            for e in err.errors()
        )
        raise DatasetError(f"{where}: {problems}; {REBUILD_HINT}") from None


def hf_features(columns: Iterable[str], sample_rate: int | None = None) -> Any:
    """The Hugging Face `datasets.Features` of a dataset's metadata, from
    `vocalgrad.records.DatasetRow`, for ``load_dataset("audiofolder", features=...)``.

    Parameters
    ----------
    columns : iterable of str
        The metadata columns present (a split's rows all carry the same ones).
    sample_rate : int, optional
        Decode the audio at this rate (Hz); None keeps each file's own.

    Returns
    -------
    datasets.Features
        ``audio`` plus one feature per column, typed as `DatasetRow` declares it.

    Raises
    ------
    DatasetError
        A column the row schema does not declare.
    """
    import datasets

    declared = {f["name"]: f["type"] for f in schema_fields(DatasetRow)}
    unknown = sorted(set(columns) - set(declared))
    if unknown:
        raise DatasetError(f"metadata columns {unknown} are not in the dataset row schema")
    features = {"audio": datasets.Audio(sampling_rate=sample_rate)}
    for name in columns:
        if name != "file_name":  # audiofolder turns it into `audio`
            features[name] = _feature(declared[name])
    return datasets.Features(features)


def _feature(tp: Any) -> Any:
    """A `datasets` feature for one declared Python type (None allowed in every column)."""
    import typing

    import datasets

    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Literal:
        return datasets.Value("string")
    if args and type(None) in args:  # X | None
        return _feature(next(a for a in args if a is not type(None)))
    if origin is list:
        return datasets.Sequence(_feature(args[0]))
    if origin is dict:
        return {key: _feature(args[1]) for key in ("increase", "decrease")}
    kinds = {str: "string", int: "int64", float: "float64", bool: "bool"}
    return datasets.Value(kinds[tp])


def load_rows(root: str | Path, splits: Iterable[str] = SPLITS) -> list[DatasetRow]:
    """All clip rows of a dataset folder, each with an absolute `path`, validated as read.

    A dataset is checked when it is opened, so every command that reads one (verify, eval,
    human create, ...) refuses the same bad rows with the same one line: a missing required
    field, an `item_id` that occurs twice, a `direction` that is no label, a row filed under
    another split, a `file_name` outside its split's folder.

    Parameters
    ----------
    root : str or Path
        The dataset folder (ours, or the official release layout).
    splits : iterable of str
        The splits to read (``test``, ``train``).

    Returns
    -------
    list of dict
        One row per clip, in file order, with ``path`` added.

    Raises
    ------
    DatasetError
        The folder holds no dataset, or a row breaks the schema; the message names the file
        and line.
    """
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset folder not found")
    rows: list[dict] = []
    seen: dict[str, str] = {}  # item_id -> where it was first read ("file:line")
    found = False
    for split in splits:
        meta = root / split / "metadata.jsonl"
        if not meta.is_file():
            continue
        found = True
        for line, row in numbered_jsonl(meta, hint=REBUILD_HINT):
            where = f"{meta}:{line}"
            _check_row(row, split, where, seen)
            seen[row["item_id"]] = where
            row["path"] = str(root / split / row["file_name"])
            rows.append(row)
    if not found:
        if is_official(root):
            return [r for r in official_rows(root) if r["split"] in splits]
        raise DatasetError(
            f"{root}: no test/metadata.jsonl or train/metadata.jsonl (a vocalgrad build) and no "
            "metadata.csv (the official release layout); point at a dataset folder"
        )
    return rows


def _check_row(row: dict, split: str, where: str, seen: dict[str, str]) -> None:
    """Raise `DatasetError` naming `where` (file:line) if a metadata row breaks the schema
    (`check_row`), repeats an `item_id`, sits under another split or names a file outside it."""
    check_row(row, f"{where} ({row.get('item_id', '?')})")
    item_id, file_name = row["item_id"], row["file_name"]
    for name, value in (("item_id", item_id), ("file_name", file_name)):
        if not value.strip():
            raise DatasetError(f"{where}: {name} {value!r} must be a non-empty string")
    if item_id in seen:
        raise DatasetError(
            f"{where}: item_id {item_id!r} occurs twice (first at {seen[item_id]}); every clip "
            "needs its own id, or its answers and scores would be mixed up"
        )
    if row["split"] != split:
        raise DatasetError(
            f"{where}: row {item_id} says split {row['split']!r} but is listed in {split}/; "
            "move it to its split's metadata.jsonl"
        )
    name = Path(file_name)
    if name.is_absolute() or ".." in name.parts:
        raise DatasetError(
            f"{where}: row {item_id}: file_name {file_name!r} must name a file inside "
            f"{split}/ (no absolute path, no '..')"
        )


# --- the official release (Hugging Face audio layout) -------------------------------------

OFFICIAL_METADATA = "metadata.csv"
OFFICIAL_DIRECTIONS = {
    "up": "increase",
    "down": "decrease",
    "increase": "increase",
    "decrease": "decrease",
}
OFFICIAL_REQUIRED = ("file_name", "category", "source_clip_id")


def is_official(root: str | Path) -> bool:
    """A folder in the release's layout (and not one of our builds)."""
    root = Path(root)
    return (root / OFFICIAL_METADATA).is_file() and not any(
        (root / split / "metadata.jsonl").is_file() for split in SPLITS
    )


def official_rows(root: str | Path) -> list[dict]:
    """Rows of the official release in our schema. The release records no magnitudes, no
    sample rate and no verification: those fields are None, and the source clip is the
    cluster (`source_id`), as in our builds."""
    root = Path(root)
    meta = root / OFFICIAL_METADATA
    rows = []
    seen: dict[str, int] = {}
    with meta.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in OFFICIAL_REQUIRED if c not in (reader.fieldnames or ())]
        if missing or not {"label", "direction"} & set(reader.fieldnames or ()):
            raise DatasetError(
                f"{meta}: the release layout needs columns {', '.join(OFFICIAL_REQUIRED)} and "
                f"label or direction; missing: {', '.join(missing) or 'label/direction'}"
            )
        for line, rec in enumerate(reader, start=2):
            direction = OFFICIAL_DIRECTIONS.get(
                (rec.get("label") or rec.get("direction") or "").strip().lower()
            )
            if direction is None or not rec["file_name"] or not rec["category"]:
                raise DatasetError(
                    f"{meta}:{line}: needs file_name, category and "
                    "an increase/decrease (up/down) label"
                )
            item_id = Path(rec["file_name"]).stem
            if item_id in seen:
                raise DatasetError(
                    f"{meta}:{line}: item id {item_id!r} (the file name's stem) occurs twice "
                    f"(first at line {seen[item_id]}); every clip needs its own name"
                )
            seen[item_id] = line
            rows.append(
                {
                    **{k: v for k, v in rec.items() if k not in ("label", "direction")},
                    "item_id": item_id,
                    "direction": direction,
                    "tier": rec.get("tier") or None,
                    "curve": rec.get("curve") or None,
                    "magnitude": None,
                    "unit": None,
                    "source_id": rec["source_clip_id"],
                    "speaker_id": rec.get("speaker_id") or rec["source_clip_id"],
                    "split": rec.get("split") or "test",
                    "sample_rate": None,
                    "duration_s": _number(rec.get("duration_sec")),
                    "speech_onset_s": _number(rec.get("onset_sec")),
                    "speech_offset_s": _number(rec.get("offset_sec")),
                    "verified": None,
                    "official_prompt": rec.get("prompt") or None,
                    "path": str(root / rec["file_name"]),
                }
            )
    if not rows:
        raise DatasetError(f"{meta}: no rows")
    return rows


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


HASHED = (*SPLITS, REFERENCES)
"""The folders whose `metadata.jsonl` rows make up a dataset's content hash."""


def content_sha256(root: str | Path) -> str:
    """A dataset's identity: one SHA-256 over every row of its metadata.

    The one definition of what a dataset *is*, read from the files as they are now (not from
    the value `build.json` recorded at build time): every field of every row of
    ``test/``, ``train/`` and ``references/metadata.jsonl``, so each clip's labels, its
    grouping fields and its audio hash (``audio_sha256``), and each reference source's audio
    hash. Rows are compared as JSON values (the order of rows and of keys does not count), so
    an edited label, an added or removed clip, or a changed clip makes another dataset: a run
    refuses to resume on it and a report refuses to show its card for a run made on the old
    one. The official release layout has no audio hashes: there, the bytes of
    ``metadata.csv`` (every clip's name and label).

    Parameters
    ----------
    root : str or Path
        The dataset folder.

    Returns
    -------
    str
        64 hex digits.
    """
    root = Path(root)
    digest = hashlib.sha256()
    found = False
    for part in HASHED:
        meta = root / part / "metadata.jsonl"
        if meta.is_file():
            found = True
            digest.update(f"{part}/\n".encode())
            for line in sorted(dumps(row) for row in read_jsonl(meta, hint=REBUILD_HINT)):
                digest.update(line.encode() + b"\n")
    if not found and (root / OFFICIAL_METADATA).is_file():
        digest.update((root / OFFICIAL_METADATA).read_bytes())
    return digest.hexdigest()


def resolve(spec: str | Path, cache_dir: Path | None = None) -> Path:
    """The folder a dataset argument names: a local folder as given, or `hf:NAME[@SPLIT]`
    (hub id from the local datasets cache, a save_to_disk folder or an audiofolder) written
    once into the release layout under the vocalgrad cache, so later stages take file paths."""
    text = str(spec)
    if not text.startswith("hf:"):
        return Path(text).expanduser()
    name, _, split = text[3:].partition("@")
    if is_official(Path(name).expanduser()):  # already a release folder: nothing to write
        return Path(name).expanduser()
    from vocalgrad.sources import default_cache_dir

    return materialise_hf(
        name, split or "test", Path(cache_dir or default_cache_dir()) / "datasets"
    )


def materialise_hf(name: str, split: str, cache_root: Path) -> Path:
    """Write one split of a Hugging Face dataset in the release layout (metadata.csv +
    audio files). Resumable: audio files are written by atomic rename and kept, and the
    folder becomes visible only when complete."""
    import datasets

    from vocalgrad.sources.hf import load_split

    ds = load_split(name, split)
    if "audio" not in ds.column_names:
        raise DatasetError(f"hf:{name}@{split}: no 'audio' column (columns: {ds.column_names})")
    ds = ds.cast_column("audio", datasets.Audio(decode=False))
    key = hashlib.sha256(f"{name}|{split}|{getattr(ds, '_fingerprint', '')}".encode()).hexdigest()[
        :16
    ]
    final = cache_root / f"{Path(name).name or 'dataset'}-{split}-{key}"
    if (final / OFFICIAL_METADATA).is_file():
        return final
    work = final.with_name(final.name + ".partial")
    (work / "audio").mkdir(parents=True, exist_ok=True)
    columns = [c for c in ds.column_names if c != "audio"]
    records = []
    for index, row in enumerate(ds):
        audio = row["audio"] or {}
        stored = Path(audio.get("path") or f"{index:06d}.wav").name
        file_name = row.get("file_name") or f"audio/{stored}"
        target = work / file_name
        if not target.is_file():
            if not (audio.get("bytes") or (audio.get("path") and Path(audio["path"]).is_file())):
                raise DatasetError(
                    f"hf:{name}@{split}: row {index} has neither audio bytes nor a readable path"
                )
            with atomic_path(target) as tmp:
                if audio.get("bytes"):
                    tmp.write_bytes(audio["bytes"])
                else:
                    shutil.copyfile(audio["path"], tmp)
        records.append({**{c: row[c] for c in columns}, "file_name": file_name})
    fields = ["file_name", *[c for c in columns if c != "file_name"]]
    with atomic_path(work / OFFICIAL_METADATA) as tmp, tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(records)
    os.replace(work, final)
    return final


def load_references(root: str | Path) -> dict[str, dict]:
    """source_id -> reference row (with absolute path), empty if the folder has none."""
    meta = Path(root) / REFERENCES / "metadata.jsonl"
    if not meta.is_file():
        return {}
    refs = {}
    for row in read_jsonl(meta, hint=REBUILD_HINT):
        row["path"] = str(Path(root) / REFERENCES / row["file_name"])
        refs[row["source_id"]] = row
    return refs

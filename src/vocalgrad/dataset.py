"""The on-disk dataset schema (HF audiofolder layout): read, write, validate, card.

    DATASET/
      README.md              dataset card
      build.json             config, versions, seed, content hashes
      build_report.json      counts, refused conditions, skipped sources, dropped clips
      test/metadata.jsonl    one row per clip; audio next to it with opaque names
      train/metadata.jsonl
      references/            the normalised sources (what measurements compare against)
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from vocalgrad.errors import DatasetError

SPLITS = ("test", "train")
REFERENCES = "references"
REQUIRED_FIELDS = (
    "file_name", "item_id", "category", "direction", "tier", "curve", "magnitude", "unit",
    "source_id", "speaker_id", "split", "sample_rate", "duration_s", "speech_onset_s",
    "speech_offset_s", "verified",
)  # fmt: skip


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
    """Atomic: write a temporary file, then rename."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w") as f:
        for row in rows:
            f.write(dumps(row) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> Iterator[dict]:
    """Rows of a JSONL file; a torn last line (killed writer) is skipped, others must parse."""
    with path.open() as f:
        lines = f.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError as err:
            if i == len(lines) - 1 and not line.endswith("\n"):
                return
            raise DatasetError(f"{path}:{i + 1}: malformed JSON ({err})") from err


def load_rows(root: str | Path, splits: Iterable[str] = SPLITS) -> list[dict]:
    """All clip rows of a dataset folder, each with an absolute `path`."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError(f"{root}: dataset folder not found")
    rows: list[dict] = []
    found = False
    for split in splits:
        meta = root / split / "metadata.jsonl"
        if not meta.is_file():
            continue
        found = True
        for row in read_jsonl(meta):
            missing = [k for k in REQUIRED_FIELDS if k not in row]
            if missing:
                raise DatasetError(f"{meta}: row {row.get('item_id', '?')} lacks {', '.join(missing)}")
            row["path"] = str(root / split / row["file_name"])
            rows.append(row)
    if not found:
        raise DatasetError(
            f"{root}: no test/metadata.jsonl or train/metadata.jsonl; is this a vocalgrad dataset "
            "(or the official release, which `vocalgrad verify` reads from metadata.csv)?"
        )
    return rows


def load_references(root: str | Path) -> dict[str, dict]:
    """source_id -> reference row (with absolute path), empty if the folder has none."""
    meta = Path(root) / REFERENCES / "metadata.jsonl"
    if not meta.is_file():
        return {}
    refs = {}
    for row in read_jsonl(meta):
        row["path"] = str(Path(root) / REFERENCES / row["file_name"])
        refs[row["source_id"]] = row
    return refs

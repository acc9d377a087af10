"""Speech from a Hugging Face dataset: a hub id, a ``save_to_disk`` folder or an audiofolder.

Rows are materialised as WAV files in ``cache_dir/hf`` (named by a hash of dataset name,
split, dataset fingerprint and row index, and reused when present) because build workers only
take file paths. Audio is read with ``datasets.Audio(decode=False)`` plus soundfile, so no
torch/torchcodec decoder is needed. Materialisation is eager: pass ``max_rows`` for large
hub datasets.

Speaker, text and gender come from the first matching column (see the *_COLUMNS tuples).
Without a speaker column every row is speaker "unknown", so speaker-disjoint selection will
refuse the dataset rather than silently leak speakers across splits.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from vocalgrad.errors import SourceError
from vocalgrad.sources.base import Source
from vocalgrad.sources.builtin import write_wav_atomic
from vocalgrad.sources.folder import normalise_text, text_key

SPEAKER_COLUMNS = ("speaker_id", "speaker", "client_id")
TEXT_COLUMNS = ("text", "sentence", "transcription", "normalized_text")
GENDER_COLUMNS = ("gender",)
DEFAULT_LICENCE = "see dataset card"


def hf_sources(
    name: str,
    cache_dir: str | Path,
    *,
    split: str = "train",
    audio_column: str = "audio",
    max_rows: int | None = None,
) -> list[Source]:
    """Load a dataset split and materialise its audio rows as cached WAV files."""
    from datasets import Audio

    ds = load_split(name, split)
    if audio_column not in ds.column_names:
        raise SourceError(
            f"{name}: split {split!r} has no column {audio_column!r} (columns: {ds.column_names}); "
            "pass the audio column name"
        )
    ds = ds.cast_column(audio_column, Audio(decode=False))
    speaker_col = _first(ds.column_names, SPEAKER_COLUMNS)
    text_col = _first(ds.column_names, TEXT_COLUMNS)
    gender_col = _first(ds.column_names, GENDER_COLUMNS)
    local = Path(name).expanduser()
    label = local.resolve().name if local.exists() else name
    origin = str(local.resolve()) if local.exists() else name
    identity = f"{origin}|{split}|{getattr(ds, '_fingerprint', '')}"
    licence = (getattr(ds.info, "license", None) or "").strip() or DEFAULT_LICENCE
    out_dir = Path(cache_dir).expanduser() / "hf"
    n_rows = len(ds) if max_rows is None else min(len(ds), max_rows)
    sources = []
    for index in range(n_rows):
        row = ds[index]
        path = out_dir / f"{hashlib.sha256(f'{identity}|{index}'.encode()).hexdigest()[:24]}.wav"
        if not path.exists():
            audio, sr = _decode(row[audio_column], name, index)
            write_wav_atomic(path, audio, sr)
        text = " ".join(str(row[text_col]).split()) if text_col and row[text_col] else ""
        sources.append(
            Source(
                source_id=f"hf/{label}/{split}/{index:06d}",
                path=str(path),
                speaker_id=str(row[speaker_col])
                if speaker_col and row[speaker_col] not in (None, "")
                else "unknown",
                text_id=f"hf-{text_key(text)}" if normalise_text(text) else f"hf-row-{index:06d}",
                gender=_gender(row[gender_col]) if gender_col else None,
                domain="hf",
                licence=licence,
                attribution=f"Hugging Face dataset {label}",
                text=text,
            )
        )
    if not sources:
        raise SourceError(
            f"{name}: split {split!r} has no rows; choose another split with hf:NAME@SPLIT"
        )
    return sources


def load_split(name: str, split: str) -> Any:
    """Local save_to_disk folder, local audiofolder, or hub id, in that order."""
    import datasets

    local = Path(name).expanduser()
    try:
        if local.is_dir() and (
            (local / "dataset_dict.json").is_file() or (local / "state.json").is_file()
        ):
            loaded = datasets.load_from_disk(str(local))
            if isinstance(loaded, datasets.DatasetDict):
                if split not in loaded:
                    raise SourceError(
                        f"{local}: no split {split!r} (available: {sorted(loaded)}); "
                        "use hf:PATH@SPLIT"
                    )
                return loaded[split]
            return loaded
        if local.is_dir():
            return datasets.load_dataset("audiofolder", data_dir=str(local), split=split)
        if local.suffix or name.startswith((".", "/", "~")):
            raise SourceError(f"{name}: local dataset path does not exist; check the hf: path")
        return datasets.load_dataset(name, split=split)
    except SourceError:
        raise
    except Exception as err:  # datasets raises many unrelated types for a bad name/split
        raise SourceError(
            f"{name}: cannot load Hugging Face dataset split {split!r} ({type(err).__name__}: "
            f"{err}); check the dataset id or path, the split name and network access"
        ) from err


def _decode(value: Any, name: str, index: int) -> tuple[np.ndarray, int]:
    """Read one undecoded Audio cell ({'bytes', 'path'}) as mono float32."""
    data = value.get("bytes") if isinstance(value, dict) else None
    path = value.get("path") if isinstance(value, dict) else value
    try:
        if data:
            audio, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
        elif path:
            audio, sr = sf.read(path, dtype="float32", always_2d=True)
        else:
            raise SourceError(f"{name}: row {index} has no audio bytes or path; fix the dataset")
    except (sf.LibsndfileError, RuntimeError, TypeError) as err:
        raise SourceError(
            f"{name}: row {index} audio cannot be decoded ({err}); re-encode it as WAV/FLAC"
        ) from err
    if audio.size == 0:
        raise SourceError(f"{name}: row {index} holds no audio samples; drop or fix that row")
    mono = audio.mean(axis=1)
    return np.clip(mono, -1.0, 1.0).astype(np.float32), int(sr)


def _first(columns: list[str], candidates: tuple[str, ...]) -> str | None:
    return next((c for c in candidates if c in columns), None)


def _gender(value: Any) -> str | None:
    """Map 'female'/'F'/'woman'/1-letter codes to 'F'/'M'; anything else is unknown."""
    text = str(value or "").strip().lower()
    if text in ("f", "female", "woman", "w"):
        return "F"
    if text in ("m", "male", "man"):
        return "M"
    return None

"""A folder corpus's speaker table: `speakers.csv` or `speakers.tsv` in the folder, one row per
speaker with the columns `speaker` and `gender`.

A folder carries no metadata, so without it every speaker's gender is unknown and the test
split cannot be balanced by gender (`selection`). The table names speakers as the folder does
(the top-level sub-folder, or the `speaker` group of `--speaker-pattern`); its gender is F or
M (also female/male, woman/man, any case), or empty / `unknown` / `?` for unknown.
"""

from __future__ import annotations

import csv
from pathlib import Path

from vocalgrad.errors import SourceError

SPEAKER_TABLES = ("speakers.csv", "speakers.tsv")
GENDERS = {"f": "F", "female": "F", "woman": "F", "m": "M", "male": "M", "man": "M"}
UNKNOWN = {"", "?", "unknown", "na", "n/a"}


def speaker_genders(root: Path) -> dict[str, str | None]:
    """speaker -> "F", "M" or None, from the folder's speaker table (empty without one).

    Parameters
    ----------
    root : Path
        The folder corpus.

    Returns
    -------
    dict
        Every speaker the table names, with its gender.

    Raises
    ------
    SourceError
        Both tables exist, a column is missing, a gender is not understood, or a speaker is
        listed twice with different genders.
    """
    found = [root / name for name in SPEAKER_TABLES if (root / name).is_file()]
    if not found:
        return {}
    if len(found) > 1:
        raise SourceError(f"{root}: both speakers.csv and speakers.tsv; keep one of them")
    path = found[0]
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, delimiter="\t" if path.suffix == ".tsv" else ",")
        columns = {(c or "").strip().lower(): c for c in reader.fieldnames or []}
        if not {"speaker", "gender"} <= set(columns):
            raise SourceError(
                f"{path}: needs a header line with the columns speaker and gender (found: "
                f"{', '.join(reader.fieldnames or []) or 'none'})"
            )
        genders: dict[str, str | None] = {}
        for line, row in enumerate(reader, 2):
            speaker = (row[columns["speaker"]] or "").strip()
            value = (row[columns["gender"]] or "").strip().lower()
            if not speaker:
                raise SourceError(f"{path}:{line}: the speaker is empty")
            if value not in GENDERS and value not in UNKNOWN:
                raise SourceError(
                    f"{path}:{line}: gender {value!r} of {speaker!r} is not understood; write F "
                    "or M (female/male), or leave it empty when unknown"
                )
            gender = GENDERS.get(value)
            if genders.get(speaker, gender) != gender:
                raise SourceError(f"{path}:{line}: speaker {speaker!r} is listed twice, as F and M")
            genders[speaker] = gender
    return genders

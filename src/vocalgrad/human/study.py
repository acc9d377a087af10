"""The study configuration (`study.toml`, a `[study]` table) and the package's error type."""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from vocalgrad import registry
from vocalgrad.errors import StudyError
from vocalgrad.questions.prompts import get_variant
from vocalgrad.records import LABELS

PRIVATE_SEED_MIN = 2**32  # smaller build seeds (0, the default, 1, 42, a date...) are guessable
RATE_PER_S = 10.0  # requests per token: a person sends a few per trial, and trials take seconds
RATE_BURST = 40.0
MAX_STUDY_ROWS = 1_000_000
"""Database rows (annotator slots and their trials) a study may plan without
``allow_large``: a large crowd study (1,000 annotators, 15 trials of screening, practice
and catch each, 3,600 pool clips heard 5 times) needs about 33,000, so only a typo
(``n_annotators = 1000000000``) reaches a million, and planning it would hang the machine."""
TOML_TABLES = ("study", "build")  # a study file may share its TOML with the build's config
_KINDS = {
    "int": "a whole number",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
    "tuple[str, ...]": 'a list of names, e.g. ["volume", "echo"]',
}


@dataclass(frozen=True)
class StudyConfig:
    """Everything that fixes who hears what; stored in the database at `create` time.

    Sizes: the pool holds `items_per_cell` clips per (category, tier, curve, direction), each
    heard by `annotators_per_item` of the `n_annotators` slots.
    """

    name: str = "study"
    seed: int = 0
    split: str = "test"
    categories: tuple[str, ...] = ()  # empty: every category in the dataset
    variant: str = "default"
    items_per_cell: int = 1
    annotators_per_item: int = 3
    n_annotators: int = 3
    n_practice: int = 4
    n_catch: int = 4
    catch_threshold: float = 0.75
    screening_trials: int = 6
    screening_pass: int = 5
    screening_interval_s: float = 1.0
    link_expiry_days: float = 0.0  # an invite link stops working this long after issue; 0: never
    allow_large: bool = False  # plan more than MAX_STUDY_ROWS database rows

    def __post_init__(self) -> None:
        self._check_types()
        if self.seed < 0:
            raise StudyError(f"seed = {self.seed}: expected a whole number >= 0")
        variant = get_variant(self.variant)
        # the answers may be other words (a reasoning variant's "A" / "B"), not other labels
        if (variant.labels or variant.options) not in (
            LABELS,
            ("decrease", "increase"),
        ):
            raise StudyError(f"variant {self.variant!r} does not ask increase/decrease")
        if self.items_per_cell < 1 or self.n_annotators < 1:
            raise StudyError("items_per_cell and n_annotators must be >= 1")
        if not 1 <= self.annotators_per_item <= self.n_annotators:
            raise StudyError(
                f"annotators_per_item ({self.annotators_per_item}) must be between 1 and "
                f"n_annotators ({self.n_annotators})"
            )
        if self.n_practice < 0 or self.n_catch < 0 or self.screening_trials < 0:
            raise StudyError("n_practice, n_catch and screening_trials must be >= 0")
        if not 0 <= self.screening_pass <= self.screening_trials:
            raise StudyError("screening_pass must be between 0 and screening_trials")
        if not 0.0 <= self.catch_threshold <= 1.0:
            raise StudyError("catch_threshold must be a fraction in [0, 1]")
        if not 0.1 <= self.screening_interval_s <= 5.0:
            raise StudyError("screening_interval_s must be between 0.1 and 5 seconds")
        if not 0.0 <= self.link_expiry_days <= 3650.0:
            raise StudyError("link_expiry_days must be between 0 (links never expire) and 3650")
        self.check_size(pool=2 * self.items_per_cell)  # at least one cell's clips

    def _check_types(self) -> None:
        """Each setting has its declared type; a bool is not a number (`n_annotators = true`
        would otherwise read as 1). Lists of names become tuples."""
        if isinstance(self.categories, list):
            object.__setattr__(self, "categories", tuple(self.categories))
        for f in dataclasses.fields(self):
            value, kind = getattr(self, f.name), str(f.type)
            if kind == "int":
                ok = isinstance(value, int) and not isinstance(value, bool)
            elif kind == "float":
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                ok = ok and math.isfinite(value)
            elif kind == "tuple[str, ...]":
                ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
            else:
                ok = isinstance(value, {"str": str, "bool": bool}[kind])
            if not ok:
                raise StudyError(f"study setting {f.name} = {value!r}: expected {_KINDS[kind]}")

    def check_size(self, pool: int) -> None:
        """Refuse a study whose database would hold more than `MAX_STUDY_ROWS` rows, before
        anything is planned or written (unless `allow_large`).

        Parameters
        ----------
        pool : int
            Clips in the pool (each heard by `annotators_per_item` annotators); before the
            dataset is read, the least the settings ask for.

        Raises
        ------
        StudyError
            One line with the implied rows, how they arise and the limit.
        """
        per_slot = 1 + self.screening_trials + self.n_practice + self.n_catch
        rows = self.n_annotators * per_slot + pool * self.annotators_per_item
        if rows > MAX_STUDY_ROWS and not self.allow_large:
            raise StudyError(
                f"this study implies {rows:,} database rows ({self.n_annotators:,} annotators x "
                f"{per_slot} rows of slot, screening, practice and catch, plus {pool:,} pool "
                f"clips x {self.annotators_per_item} annotators each), above the limit of "
                f"{MAX_STUDY_ROWS:,}; check n_annotators and items_per_cell, or set "
                "allow_large = true in [study] (--allow-large) to go past it"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StudyConfig:
        known = {f.name for f in dataclasses.fields(cls)} | {"db"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise StudyError(
                "; ".join(registry.unknown("study setting", k, sorted(known)) for k in unknown)
            )
        values = {k: v for k, v in data.items() if k != "db"}
        if isinstance(values.get("categories"), list):
            values["categories"] = tuple(values["categories"])
        try:
            return cls(**values)
        except TypeError as err:
            raise StudyError(f"bad study settings: {err}") from err

    def fingerprint(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def load_study(path: str | Path, allow_large: bool = False) -> tuple[StudyConfig, Path]:
    """The config in `path` and its database path (`db` setting, default `<stem>.sqlite`).

    Parameters
    ----------
    path : str or Path
        A TOML file with a ``[study]`` table; any other table but ``[build]`` is refused, so
        a misspelt ``[studdy]`` is an error rather than a study run on the defaults.
    allow_large : bool
        ``--allow-large``: as ``allow_large = true`` in the table.

    Returns
    -------
    tuple
        (the `StudyConfig`, the database path).
    """
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"{path}: study file not found; write a TOML file with a [study] table")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise StudyError(f"{path}: not valid TOML ({err})") from err
    unknown = [k for k in data if k not in TOML_TABLES]
    if unknown or "study" not in data:
        what = "; ".join(registry.unknown("table", k, TOML_TABLES) for k in unknown)
        raise StudyError(
            f"{path}: {what or 'no [study] table'}; a study file holds a [study] table (and "
            "may hold [build])"
        )
    table = data["study"]
    if not isinstance(table, dict):
        raise StudyError(f"{path}: [study] must be a table")
    if not isinstance(table.get("db", ""), str):
        raise StudyError(f"{path}: study setting db = {table['db']!r}: expected a path string")
    db = Path(table.get("db", f"{path.stem}.sqlite"))
    if not db.is_absolute():
        db = path.parent / db
    if "dimensions" in table:  # the `categories` setting under its user-facing name
        if "categories" in table:
            raise StudyError(
                f"{path}: [study] sets both dimensions and categories, two names for one "
                "setting; keep one (dimensions)"
            )
        table = {("categories" if k == "dimensions" else k): v for k, v in table.items()}
    if allow_large:
        table = {**table, "allow_large": True}
    try:
        return StudyConfig.from_dict(table), db
    except StudyError as err:
        raise StudyError(f"{path}: {err}") from None


def public_build_warning(root: str | Path) -> str | None:
    """Why anyone could hold this dataset's audio and labels, or None for a private build.

    A deterministic build is public when its seed is the default or guessable (anyone with
    the sources rebuilds it bit for bit); a dataset without build.json is a download.
    """
    build = Path(root) / "build.json"
    seed = json.loads(build.read_text()).get("seed") if build.is_file() else None
    if isinstance(seed, int) and seed >= PRIVATE_SEED_MIN:
        return None
    origin = (
        "has no build.json: a downloaded release is public"
        if seed is None
        else f"was built with seed {seed}, which anyone can guess and rebuild"
    )
    return (
        f"dataset {origin}, so an annotator with a copy can look up every answer. Served "
        "clips get a small per-annotator gain and dither, which defeats exact hash lookup "
        "but not matching by ear or by correlation. For a study whose answers must stay "
        f"private, rebuild with a secret seed (e.g. `vocalgrad build ... --seed "
        f"{secrets.randbits(63)}`), keep the seed and the dataset private, and create the "
        "study on that build."
    )


def base_url(value: str) -> str:
    """An http(s) origin (optionally with a path prefix) for invite links, without a slash."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise StudyError(f"base URL {value!r}: give the server's public address, e.g. https://host")
    return value.rstrip("/")

"""Build configuration: defaults, the published-protocol preset, TOML loading, validation."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from vocalgrad import formats, registry
from vocalgrad.dimensions import DIMENSIONS, LADDER_CATEGORIES, PUBLISHED_CATEGORIES
from vocalgrad.errors import ConfigError
from vocalgrad.signal.trajectories import CURVE_NAMES

TIERS = ("low", "mid", "high")


Names = Annotated[tuple[str, ...], Field(min_length=1)]


class BuildConfig(BaseModel):
    """Everything that determines a benchmark's bytes (together with the package versions).

    Validated strictly: a TOML file is user input, so a string where a number or a boolean
    belongs, a fraction where a count belongs or an empty list is refused with a line naming
    the key, the value and what is allowed, never coerced into a different benchmark."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid")

    source: str = "builtin"
    categories: Names = PUBLISHED_CATEGORIES  # the others are opt-in
    tiers: Names = TIERS
    curves: Names = CURVE_NAMES
    # constant control clips per source and category (gradual format), spread over the
    # planned tiers (`plan.stratified`); 0 for none, as in the published protocol
    constants: int = Field(3, ge=0)
    n_test: int = Field(8, ge=1)
    n_train: int = Field(8, ge=0)
    per_speaker_test: int = Field(2, ge=1)
    min_duration_s: float = Field(2.0, gt=0, allow_inf_nan=False)
    sample_rate: int = Field(16000, ge=8000, le=96000)
    target_lufs: float = Field(-26.0, ge=-70, le=-5, allow_inf_nan=False)
    seed: int = Field(0, ge=0)
    speaker_pattern: str | None = None
    # overrides per category: {category: {tier: magnitude}}
    magnitudes: dict[str, dict[str, Annotated[float, Field(allow_inf_nan=False)]]] = {}
    design: str = "tiers"  # "tiers" (published grid) or "psychometric" (a magnitude sweep)
    levels: int = Field(6, ge=2)  # magnitudes per dimension in the psychometric design
    drop_unverified: bool = True  # drop clips (and their pair) whose measurement disagrees
    format: str = formats.DEFAULT  # the question format (`vocalgrad list formats`)
    # Place each changing path at random within a window around the tier's endpoints, so
    # that one end of a clip does not say the direction (`plan.rove_window`); off by default,
    # as in the published protocol.
    rove_endpoints: bool = False

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(
                **{
                    k: tuple(v) if k in _LISTS and isinstance(v, list) else v
                    for k, v in values.items()
                }
            )
        except ValidationError as err:
            raise ConfigError(describe(err)) from None

    @field_validator("categories")
    @classmethod
    def _known_categories(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return _known(names, DIMENSIONS, "category")  # registered ones too

    @field_validator("tiers")
    @classmethod
    def _known_tiers(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return _known(names, TIERS, "tier")

    @field_validator("curves")
    @classmethod
    def _known_curves(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        return _known(names, CURVE_NAMES, "curve")

    @field_validator("design")
    @classmethod
    def _known_design(cls, name: str) -> str:
        return _known((name,), DESIGNS, "design")[0]

    @field_validator("format")
    @classmethod
    def _known_format(cls, name: str) -> str:
        if name not in formats.REGISTRY:  # registered ones too
            raise ValueError(registry.unknown("format", name, formats.names()))
        return name

    @field_validator("magnitudes")
    @classmethod
    def _known_magnitude_categories(cls, table: dict[str, dict[str, float]]) -> dict:
        _known(tuple(table), DIMENSIONS, "category in magnitudes")
        return table

    @model_validator(mode="after")
    def _rove_has_a_course(self) -> BuildConfig:
        refusal = formats.get(self.format).rove_refusal
        if self.rove_endpoints and refusal:
            raise ValueError(f"rove_endpoints: {refusal}")
        return self

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    def replace(self, **changes: Any) -> BuildConfig:
        given = {k: v for k, v in changes.items() if v is not None}
        return BuildConfig(**{**self.model_dump(), **given})


_LISTS = ("categories", "tiers", "curves")


def _known(names: tuple[str, ...], allowed: Iterable[str], what: str) -> tuple[str, ...]:
    allowed = tuple(allowed)
    for name in names:
        if name not in allowed:
            raise ValueError(f"unknown {what} {name!r}; choose from {', '.join(allowed)}")
    return names


_EXPECTED = {
    "bool_type": "expected true or false",
    "int_type": "expected a whole number",
    "int_from_float": "expected a whole number",
    "float_type": "expected a number",
    "finite_number": "expected a finite number",
    "string_type": "expected a string",
    "dict_type": "expected a table",
    "tuple_type": 'expected a list of names, e.g. ["volume", "echo"]',
    "too_short": "expected a list with at least one entry",
    "extra_forbidden": "not a config key",
    "greater_than": "expected a number > {gt}",
    "greater_than_equal": "expected a number >= {ge}",
    "less_than_equal": "expected a number <= {le}",
}

# keys a config may still carry from an earlier release: what to write instead
_RENAMED = {"include_constant": "`constants = N` (constant clips per source; 0 for none)"}


def _renamed(key: str) -> str:
    return f"no longer a config key: write {_RENAMED[key]}"


def describe(err: ValidationError) -> str:
    """A validation error as one line: each bad key, its value and what is allowed."""
    parts = []
    for e in err.errors(include_url=False):
        key = ".".join(str(x) for x in e["loc"])
        if e["type"] == "value_error":
            what = str(e["ctx"]["error"])
        elif e["type"] == "extra_forbidden" and key in _RENAMED:
            what = _renamed(key)
        else:
            what = _EXPECTED.get(e["type"], e["msg"]).format(**e.get("ctx", {}))
        value = list(e["input"]) if isinstance(e["input"], tuple) else e["input"]
        parts.append(f"config key {key} = {value!r}: {what}" if key else what)
    return "; ".join(parts)


DESIGNS: dict[str, dict[str, Any]] = {
    "tiers": {},
    # A magnitude sweep per dimension for threshold fits. Clips below threshold are hard to
    # measure too, so they are kept and flagged rather than dropped: dropping them would
    # select stimuli by the measurement and bias the fitted threshold.
    "psychometric": {"curves": ("linear",), "drop_unverified": False},
}

PROTOCOLS: dict[str, dict[str, Any]] = {
    # The published VocalGrad grid: 100 test sources (50 speakers x 2) and 500 train
    # sources, 24 conditions each, no constant clips, rendered at VCTK's 48 kHz.
    "vocalgrad": {
        "n_test": 100,
        "n_train": 500,
        "per_speaker_test": 2,
        "min_duration_s": 3.0,
        "sample_rate": 48000,
        "constants": 0,
    },
}


LADDER = "ladder"
"""The protocol that builds one dataset per rung of the ladder (`vocalgrad build --protocol
ladder`), from the shared settings in `PROTOCOLS`."""
PROTOCOLS[LADDER] = {
    # Every rung on the same sources and dimensions, small by default (each setting can be
    # given): 4 + 4 sources, volume and voice pitch, the linear curve of the gradual rungs.
    "n_test": 4,
    "n_train": 4,
    "categories": LADDER_CATEGORIES,
    "curves": ("linear",),
}


def protocol(name: str) -> dict[str, Any]:
    try:
        return dict(PROTOCOLS[name])
    except KeyError:
        raise ConfigError(
            f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}"
        ) from None


def load_config(path: str | Path | None, **overrides: Any) -> BuildConfig:
    """Defaults <- protocol preset <- design preset <- TOML [build] table <- CLI overrides."""
    values: dict[str, Any] = {}
    if overrides.get("protocol"):
        values.update(protocol(overrides["protocol"]))
    overrides.pop("protocol", None)
    design = overrides.get("design")
    if design:
        if design not in DESIGNS:
            raise ConfigError(f"unknown design {design!r}; choose from {', '.join(DESIGNS)}")
        values.update(DESIGNS[design])
    if path is not None:
        values.update(_read_toml(Path(path)))
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = set(BuildConfig.model_fields)
    unknown = sorted(set(values) - known)
    if unknown:
        renamed = "".join(f"; {k}: {_renamed(k)}" for k in unknown if k in _RENAMED)
        raise ConfigError(
            f"unknown config key(s) {', '.join(unknown)}{renamed}; "
            f"known keys: {', '.join(sorted(known))}"
        )
    return BuildConfig(**values)


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML ({err})") from err
    table = data.get("build", data)
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: expected a [build] table")
    return table

"""Build configuration: defaults, the published-protocol preset, TOML loading, validation."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from vocalgrad.dimensions import CATEGORIES, PUBLISHED_CATEGORIES
from vocalgrad.errors import ConfigError
from vocalgrad.signal.trajectories import CURVE_NAMES

TIERS = ("low", "mid", "high")
# Question formats from the same stimulus engine (see `vocalgrad.stimuli.formats`).
FORMATS = ("gradual", "comparison", "recognition")


@dataclass(frozen=True)
class BuildConfig:
    """Everything that determines a benchmark's bytes (together with the package versions)."""

    source: str = "builtin"
    categories: tuple[str, ...] = PUBLISHED_CATEGORIES  # the others are opt-in
    tiers: tuple[str, ...] = TIERS
    curves: tuple[str, ...] = CURVE_NAMES
    include_constant: bool = True
    n_test: int = 8
    n_train: int = 8
    per_speaker_test: int = 2
    min_duration_s: float = 2.0
    sample_rate: int = 16000
    target_lufs: float = -26.0
    seed: int = 0
    speaker_pattern: str | None = None
    magnitudes: dict[str, dict[str, float]] = field(default_factory=dict)  # overrides per category
    design: str = "tiers"  # "tiers" (published grid) or "psychometric" (a magnitude sweep)
    levels: int = 6  # magnitudes per dimension in the psychometric design
    drop_unverified: bool = True  # drop clips (and their pair) whose measurement disagrees
    format: str = "gradual"  # "gradual" (a change within one clip), "comparison" or "recognition"

    def __post_init__(self) -> None:
        for name in self.categories:
            if name not in CATEGORIES:
                raise ConfigError(f"unknown category {name!r}; choose from {', '.join(CATEGORIES)}")
        for tier in self.tiers:
            if tier not in TIERS:
                raise ConfigError(f"unknown tier {tier!r}; choose from {', '.join(TIERS)}")
        for curve in self.curves:
            if curve not in CURVE_NAMES:
                raise ConfigError(f"unknown curve {curve!r}; choose from {', '.join(CURVE_NAMES)}")
        if not self.categories:
            raise ConfigError("no categories selected")
        if self.design not in DESIGNS:
            raise ConfigError(f"unknown design {self.design!r}; choose from {', '.join(DESIGNS)}")
        if self.format not in FORMATS:
            raise ConfigError(f"unknown format {self.format!r}; choose from {', '.join(FORMATS)}")
        if self.design == "psychometric" and self.levels < 2:
            raise ConfigError("a psychometric design needs levels >= 2")
        if self.n_test < 1 or self.n_train < 0:
            raise ConfigError(f"n_test must be >= 1 and n_train >= 0 (got {self.n_test}, {self.n_train})")
        if not 8000 <= self.sample_rate <= 96000:
            raise ConfigError(f"sample_rate {self.sample_rate} Hz is outside 8000..96000")
        for name, tiers in self.magnitudes.items():
            if name not in CATEGORIES or not isinstance(tiers, dict):
                raise ConfigError(f"magnitudes.{name}: expected a table of tier = value for a known category")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> BuildConfig:
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


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
        "include_constant": False,
    },
}


def protocol(name: str) -> dict[str, Any]:
    try:
        return dict(PROTOCOLS[name])
    except KeyError:
        raise ConfigError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}") from None


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
    known = {f.name for f in fields(BuildConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown config key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
    for key in ("categories", "tiers", "curves"):
        if key in values:
            values[key] = tuple(values[key])
    try:
        return BuildConfig(**values)
    except TypeError as err:
        raise ConfigError(f"malformed config: {err}") from err


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

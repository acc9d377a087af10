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

from vocalgrad import dimensions, formats, registry
from vocalgrad.dimensions import CATEGORY_SETS, LADDER_CATEGORIES, PUBLISHED_CATEGORIES
from vocalgrad.errors import ConfigError, SourceError, did_you_mean
from vocalgrad.signal.trajectories import CURVE_NAMES
from vocalgrad.sources import SCHEMES, spec_kind

TIERS = ("low", "mid", "high")


Names = Annotated[tuple[str, ...], Field(min_length=1)]

MAX_BUILD_CLIPS = 5_000_000
"""Clips a build may plan without ``allow_large``. The published protocol renders 129,600
(600 sources x 9 dimensions x 24 conditions); 5 million is 38 times that, days of rendering,
and past it a typo in --levels or --constants would hang the machine before a clip is written."""
MAX_BUILD_BYTES = 10**12
"""Bytes of 16-bit audio a build may imply without ``allow_large``: 1 TB, 27 times the
published protocol's (129,600 clips of at least 3 s at 48 kHz)."""


class BuildConfig(BaseModel):
    """Everything that determines a benchmark's bytes (together with the package versions).

    Validated strictly: a TOML file is user input, so a string where a number or a boolean
    belongs, a fraction where a count belongs or an empty list is refused with a line naming
    the key, the value and what is allowed, never coerced into a different benchmark.

    Attributes
    ----------
    source : str
        Where the sources come from: ``builtin``, ``folder:PATH``, ``vctk:PATH``,
        ``hf:NAME[@split]``, or another scheme's spec (`vocalgrad.sources`).
    categories : tuple of str
        The dimensions to build (default: the published ones).
    tiers : tuple of str
        Magnitude tiers: ``low``, ``mid``, ``high``.
    curves : tuple of str
        Progress curves of a changing clip (`vocalgrad.signal.trajectories`).
    constants : int
        Constant control clips per source and category (formats that plan them), spread over
        the planned tiers; 0 for none, as in the published protocol.
    n_test, n_train : int
        Test sources (at least 1) and train sources (0: no train split).
    per_speaker_test : int
        Test sources per speaker.
    min_duration_s : float
        Shortest source accepted, seconds.
    sample_rate : int
        Rendering rate, Hz (8000 to 96000).
    target_lufs : float
        Loudness every source is normalised to, LUFS (-70 to -5).
    seed : int
        Global seed; every random choice derives from (seed, item id).
    speaker_pattern : str or None
        A regex with a ``(?P<speaker>...)`` group (optional ``text`` group) on a folder
        source's relative paths; None: a file's speaker is its top-level sub-folder.
    magnitudes : dict of str to dict of str to float
        Overrides of a category's tier magnitudes, ``{category: {tier: value}}``, in the
        dimension's ``unit``.
    design : str
        ``tiers`` (the published grid) or ``psychometric`` (a magnitude sweep).
    levels : int
        Magnitudes per dimension in the psychometric design (at least 2).
    drop_unverified : bool
        Drop clips (and their pair) whose measurement disagrees with the label.
    format : str
        The question format (`vocalgrad list formats`).
    rove_endpoints : bool
        Place each changing path at random within a window around its tier's endpoints, so
        that one end of a clip does not say the direction.
    allow_large : bool
        Plan more than `MAX_BUILD_CLIPS` clips or `MAX_BUILD_BYTES` of audio; not part of
        what the bytes depend on, so not saved with the config.

    Raises
    ------
    ConfigError
        On construction, for any invalid value: one line naming each bad key, its value and
        what is allowed (`describe`).
    """

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
    # Plan more than MAX_BUILD_CLIPS clips or MAX_BUILD_BYTES of audio. Not part of what the
    # bytes depend on, so not saved with the config (a resume needs it again).
    allow_large: bool = Field(False, exclude=True)

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
        return _known(names, dimensions.names(), "dimension")  # registered ones too

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
        _known(tuple(table), dimensions.names(), "dimension in magnitudes")
        return table

    @model_validator(mode="after")
    def _defined_for_the_kind(self) -> BuildConfig:
        """Refuse a dimension that is not defined for the source's kind of sound (voice
        clarity of a tone) before any work: its clips would ask about nothing."""
        try:
            kind = spec_kind(self.source)
        except SourceError:  # a malformed spec: resolving it says why, in the same words
            return self
        missing = [c for c in self.categories if kind not in dimensions.get(c).SPEC.kinds]
        if missing:
            defined = [d.name for d in dimensions.bound() if kind in d.SPEC.kinds]
            raise ValueError(
                f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not defined for "
                f"{kind} (source {self.source!r}); choose --dimensions from those defined for "
                f"{kind}: {', '.join(defined) or 'none'}"
            )
        return self

    @model_validator(mode="after")
    def _rove_has_a_course(self) -> BuildConfig:
        refusal = formats.get(self.format).rove_refusal
        if self.rove_endpoints and refusal:
            raise ValueError(f"rove_endpoints: {refusal}")
        return self

    @model_validator(mode="after")
    def _size_is_sane(self) -> BuildConfig:
        clips, least_bytes = self.implied_size()
        if (clips > MAX_BUILD_CLIPS or least_bytes > MAX_BUILD_BYTES) and not self.allow_large:
            per_source = clips // ((self.n_test + self.n_train) * len(self.categories))
            raise ValueError(
                f"this build implies {clips:,} clips ({self.n_test + self.n_train:,} sources x "
                f"{len(self.categories)} dimensions x {per_source:,} per source and dimension) "
                f"and at least {least_bytes / 1e9:,.1f} GB of audio, above the limit of "
                f"{MAX_BUILD_CLIPS:,} clips and {MAX_BUILD_BYTES / 1e9:,.0f} GB; check "
                "levels, constants, n_test and n_train, or pass --allow-large "
                "(allow_large = true) to go past it"
            )
        return self

    def implied_size(self) -> tuple[int, int]:
        """What the config asks to render, computed before anything is planned.

        Returns
        -------
        tuple of int
            (clips: sources x categories x (magnitudes x curves x 2 directions + constants),
            the least bytes of 16-bit audio they hold: each clip at least `min_duration_s`
            long, at `sample_rate`, with the category's channels).
        """
        form = formats.get(self.format)
        magnitudes = self.levels if self.design == "psychometric" else len(self.tiers)
        curves = len(form.curves(self.curves))  # a held format has one, "held"
        constants = self.constants if form.constants else 0
        per_category = (self.n_test + self.n_train) * (magnitudes * curves * 2 + constants)
        samples = int(self.min_duration_s * self.sample_rate) * 2  # bytes of one 16-bit channel
        least_bytes = sum(
            per_category * samples * dimensions.get(c).SPEC.channels for c in self.categories
        )
        return per_category * len(self.categories), least_bytes

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data: what ``build.json`` records and a resume rebuilds from.

        Returns
        -------
        dict
            Every field but `allow_large`, by name, in the units above (lists as tuples).
        """
        return self.model_dump()

    def replace(self, **changes: Any) -> BuildConfig:
        """A copy with some fields changed, validated again (the model is frozen).

        Parameters
        ----------
        **changes
            Fields to change; a None value leaves its field as it is (an unset CLI flag).

        Returns
        -------
        BuildConfig
            The new config; `allow_large` is carried over unless changed.

        Raises
        ------
        ConfigError
            A changed value is invalid.
        """
        given = {k: v for k, v in changes.items() if v is not None}
        return BuildConfig(**{**self.model_dump(), "allow_large": self.allow_large, **given})


_LISTS = ("categories", "tiers", "curves")
_FIELDS = tuple(BuildConfig.model_fields)


def _known(names: tuple[str, ...], allowed: Iterable[str], what: str) -> tuple[str, ...]:
    allowed = tuple(allowed)
    for name in names:
        if name not in allowed:
            raise ValueError(registry.unknown(what, name, allowed))
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


_SHOWN_KEYS = {"categories": "dimensions"}
"""Config keys an error names by their user-facing spelling (`categories` is the internal
name of the setting `--dimensions` and the TOML key `dimensions` set)."""


def describe(err: ValidationError) -> str:
    """A validation error as one line: each bad key, its value and what is allowed.

    Why: a config is user input, so pydantic's multi-line report is turned into the one line
    the CLI prints.

    Parameters
    ----------
    err : pydantic.ValidationError
        The error `BuildConfig` raised.

    Returns
    -------
    str
        ``config key <key> = <value>: <what is allowed>``, one per error, joined by "; ".
    """
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
        key = _SHOWN_KEYS.get(key, key)
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
    """The fields a named protocol preset sets (``--protocol``).

    Parameters
    ----------
    name : str
        A key of `PROTOCOLS` (``vocalgrad``: the published grid).

    Returns
    -------
    dict
        Field name -> value, a copy the caller may change.

    Raises
    ------
    ConfigError
        No protocol has that name; the message suggests the nearest.
    """
    try:
        return dict(PROTOCOLS[name])
    except KeyError:
        raise ConfigError(
            f"unknown protocol {name!r}{did_you_mean(name, PROTOCOLS)}; "
            f"choose from {', '.join(PROTOCOLS)}"
        ) from None


def source_protocol(source: str, name: str) -> dict[str, Any]:
    """What a source's scheme sets to reproduce a protocol on it (the published beep ablation's
    layout for ``beeps``); empty for most, and for a spec that does not parse (resolving it
    says why).

    Parameters
    ----------
    source : str
        A source spec (``builtin``, ``beeps``, ``folder:PATH``, ...).
    name : str
        The protocol's name.

    Returns
    -------
    dict
        Field name -> value the scheme declares for that protocol, a named category set
        expanded to its names; empty when it declares none.
    """
    scheme = SCHEMES.get(source.strip().partition(":")[0].partition("?")[0])
    values = dict(scheme.protocols.get(name, {})) if scheme else {}
    if isinstance(values.get("categories"), str):  # a named set
        values["categories"] = CATEGORY_SETS[values["categories"]]
    return values


def load_config(path: str | Path | None, **overrides: Any) -> BuildConfig:
    """Defaults <- protocol preset (and the source's own for that protocol) <- design preset
    <- TOML [build] table <- CLI overrides.

    Parameters
    ----------
    path : str or Path or None
        A TOML file holding a ``[build]`` table (and perhaps ``[study]``), or the table's
        keys at the top level; None for none.
    **overrides
        Fields from the command line, plus ``protocol`` (a preset's name) and ``design``;
        a None value is not set.

    Returns
    -------
    BuildConfig
        The validated config.

    Raises
    ------
    ConfigError
        The file is missing or not valid TOML, holds an unknown table, a key is unknown or
        renamed (the message says what to write instead), it sets both ``dimensions`` and
        ``categories`` (one setting, two spellings), a preset is unknown, or a value is
        invalid.
    """
    values: dict[str, Any] = {}
    table = _read_toml(Path(path)) if path is not None else {}
    if overrides.get("protocol"):
        values.update(protocol(overrides["protocol"]))
        source = overrides.get("source") or table.get("source") or "builtin"
        if isinstance(source, str):
            values.update(source_protocol(source, overrides["protocol"]))
    overrides.pop("protocol", None)
    design = overrides.get("design")
    if design:
        if design not in DESIGNS:
            raise ConfigError(
                f"unknown design {design!r}{did_you_mean(design, DESIGNS)}; "
                f"choose from {', '.join(DESIGNS)}"
            )
        values.update(DESIGNS[design])
    values.update(table)
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = set(BuildConfig.model_fields)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            "; ".join(
                f"config key {k}: {_renamed(k)}"
                if k in _RENAMED
                else registry.unknown("config key", k, sorted(known))
                for k in unknown
            )
        )
    return BuildConfig(**values)


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{path}: not valid TOML ({err})") from err
    tables = ("build", "study")  # a study may share the file
    if "build" not in data:  # the file is the [build] table itself: a table there is misspelt
        others = [k for k, v in data.items() if isinstance(v, dict) and k not in _FIELDS]
    else:
        others = [k for k in data if k not in tables]
    if others:
        raise ConfigError(
            f"{path}: "
            + "; ".join(registry.unknown("table", k, tables) for k in others)
            + "; a build config holds a [build] table (and may hold [study])"
        )
    if "build" not in data:
        return _dimensions_key(path, data)
    table = data["build"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: expected a [build] table")
    return _dimensions_key(path, table)


def _dimensions_key(path: Path, table: dict[str, Any]) -> dict[str, Any]:
    """`dimensions = [...]` is the `categories` setting under its user-facing name."""
    if "dimensions" not in table:
        return table
    if "categories" in table:
        raise ConfigError(
            f"{path}: the build config sets both dimensions and categories, two names for "
            "one setting; keep one (dimensions)"
        )
    return {("categories" if k == "dimensions" else k): v for k, v in table.items()}

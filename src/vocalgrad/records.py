"""The records that flow between stages, declared once: a dataset row, a result row, a run
summary and an audit report, and the few constants every stage shares about them.

They are `TypedDict`s, not classes: every record is read from and written to JSON (JSONL rows,
``summary.json``, ``audit.json``), so a record *is* a dict with a declared schema, and old files
with fewer fields load unchanged (``total=False`` where fields were added over time).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

LABELS: tuple[str, str] = ("increase", "decrease")
"""The two directions of a changing clip, and the answer labels of a binary question."""
CONSTANT = "constant"
DIRECTIONS: tuple[str, str, str] = (*LABELS, CONSTANT)
"""Every value of a row's ``direction``."""
FORMATS: tuple[str, str, str] = ("gradual", "comparison", "recognition")
"""The question formats (`vocalgrad build --format`)."""
DEFAULT_FORMAT = "gradual"
"""The format of rows that name none (rows built before formats existed)."""


def row_format(row: Mapping[str, Any]) -> str:
    """The question format of a dataset or result row (`DEFAULT_FORMAT` where it names none)."""
    return row.get("format") or DEFAULT_FORMAT


class DatasetRow(TypedDict, total=False):
    """One clip of a dataset: a line of ``<split>/metadata.jsonl`` (`vocalgrad.dataset.load_rows`
    adds ``path``). Times in seconds, levels in dB; ``confound_*`` and format fields vary."""

    file_name: str
    item_id: str
    category: str  # the dimension's name
    direction: str  # one of DIRECTIONS
    tier: str
    curve: str
    magnitude: float  # in `unit`
    unit: str
    change_size: float
    change_unit: str
    param_start: float
    param_end: float
    level_rove_db: float
    source_id: str
    speaker_id: str
    text_id: str
    gender: str
    domain: str
    split: str  # "train" or "test"
    sample_rate: int  # Hz
    duration_s: float
    channels: int
    speech_onset_s: float
    speech_offset_s: float
    measured_start: float  # in `measured_unit`
    measured_end: float
    measured_change: float
    measured_unit: str
    verified: bool
    verdict: str
    reference_file: str
    audio_sha256: str
    pair_key: str
    format: str  # one of FORMATS; absent means DEFAULT_FORMAT
    pair_id: str  # comparison and recognition twins share it
    part_bounds: list[list[int]]  # comparison: [start, end) samples of each part
    measured_value: float  # recognition: the held value
    path: str  # added on load: the absolute audio path


class ResultRow(TypedDict, total=False):
    """One answer: a line of a run's ``results.jsonl`` per (item, listener, variant, mode,
    control)."""

    key: str
    item_id: str
    listener: str
    revision: str
    variant: str
    control: str  # "none", "reversed", "silence" or "text_only"
    mode: str  # "generate" or "choice"
    direction: str  # the truth asked about: a DIRECTIONS value, or "none" for a control
    category: str
    tier: str
    curve: str
    magnitude: float
    source_id: str
    speaker_id: str
    split: str
    domain: str
    format: str
    response: str | None
    parse_status: str | None
    predicted: str | None  # a label, or None when no answer was parsed
    llr: float | None  # log p(increase) - log p(decrease), choice mode
    logprobs: dict[str, float] | None  # by label
    error: str | None
    seconds: float
    correct: bool
    reversed_of: str


class RunSummary(TypedDict):
    """What `vocalgrad score` prints, as written to a run's ``summary.json``."""

    run: str
    config: dict[str, Any]  # the run's manifest
    groups: dict[str, dict[str, Any]]  # "<variant>/<mode>" -> table, constant, errors
    controls: dict[str, dict[str, Any]]
    alarms: list[str]
    untestable: dict[str, Any]
    results: dict[str, dict[str, float]]  # lm-evaluation-harness style
    # "n-samples" (per group) is also present; a key that is not an identifier


class AuditReport(TypedDict):
    """The shortcut audit of a dataset, as written to ``audit.json``."""

    dataset: str
    protocol: str | None
    thresholds: dict[str, float]  # alpha, draws, target_accuracy, target_auc
    # the build's gates as one test: method, gates, draws, alpha, critical_z, p_resolution,
    # needed (accuracy, auc), cannot_fail, recommended_test_sources
    family: dict[str, Any]
    n_boot: int
    seed: int
    cues_version: int
    n_clips: int
    seconds_cues: float
    seconds_gates: float  # CPU seconds of the gates' permutation nulls
    seconds: float
    per_category: dict[str, dict[str, Any]]  # each with `gates`: gate name -> its figures
    passes: bool

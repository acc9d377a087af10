"""The records that flow between stages, declared once: the dataset row, the result row, and
every stage's result (`BuildReport`, `EvalCounts`, `RunSummary`, `AuditReport`,
`VerifyReport`, `ProbeResult`, `TuneResult`), with the few constants every stage shares.

They are `TypedDict`s, not classes: every record is read from and written to JSON (JSONL rows,
``summary.json``, ``audit.json``), so a record *is* a dict with a declared schema, and old files
with fewer fields load unchanged (``total=False`` where fields were added over time). The two
row schemas carry each field's meaning and unit (`doc`): the row validation (`validator`), the
Hugging Face features (`vocalgrad.dataset.hf_features`) and the file reference's tables
(`schema_table`) are generated from them.
"""

import functools
import types
import typing
from typing import Annotated, Any, Literal, Required, get_args, get_origin

from pydantic import Field, TypeAdapter
from pydantic.fields import FieldInfo
from typing_extensions import TypedDict  # pydantic validates only this one on Python 3.11

LABELS: tuple[str, str] = ("increase", "decrease")
"""The two directions of a changing clip, and the answer labels of a binary question."""
CONSTANT = "constant"
DIRECTIONS: tuple[str, str, str] = (*LABELS, CONSTANT)
"""Every value of a row's ``direction``."""


def doc(meaning: str, unit: str = "") -> FieldInfo:
    """A record field's meaning and unit, read by the validation, the Hugging Face `Features`
    and the file reference (`schema_table`).

    Parameters
    ----------
    meaning : str
        What the field holds, in words (Markdown; the file reference prints it).
    unit : str
        Its unit (``s``, ``Hz``, ``dB``), or where the unit varies by row the name of the
        field that holds it, in backquotes (`` `measured_unit` ``); empty for none.

    Returns
    -------
    pydantic.fields.FieldInfo
        For ``Annotated[type, doc(...)]``: the meaning as its description, the unit under
        ``json_schema_extra["unit"]``.
    """
    return Field(description=meaning, json_schema_extra={"unit": unit} if unit else None)


Label = Literal["increase", "decrease", "constant"]
Split = Literal["train", "test"]
Seconds = Annotated[float, Field(ge=0)]


class DatasetRow(TypedDict, total=False):
    """One clip of a dataset: a line of ``<split>/metadata.jsonl``.

    The one definition of the row: `vocalgrad.dataset.load_rows` validates every row against
    it, `vocalgrad.dataset.hf_features` derives the Hugging Face `Features` from it, and the
    file reference's table is generated from it (`schema_table`)."""

    file_name: Required[
        Annotated[str, doc("the clip's file, relative to the split folder (an opaque hash)")]
    ]
    item_id: Required[Annotated[str, doc("the clip's opaque id (seeds derive from it)")]]
    category: Required[Annotated[str, doc("the dimension")]]
    direction: Required[Annotated[Label, doc("the label: `increase`, `decrease` or `constant`")]]
    tier: Required[Annotated[str, doc("the magnitude's tier (`none` for a constant clip)")]]
    curve: Required[
        Annotated[str, doc("the progress curve (`held` for held formats, `none` for constants)")]
    ]
    magnitude: Required[Annotated[float, doc("the condition's magnitude, in `unit`")]]
    unit: Required[Annotated[str, doc("the dimension parameter's unit")]]
    change_size: Annotated[
        float, doc("the size of the change in the dimension's own terms", "`change_unit`")
    ]
    change_unit: Annotated[str, doc("semitones, dB, ratio; octaves for log-scale parameters")]
    param_start: Annotated[float, doc("the realised parameter where the speech starts", "`unit`")]
    param_end: Annotated[float, doc("the realised parameter where the speech ends", "`unit`")]
    level_rove_db: Annotated[float, doc("the clip's overall level offset (its twin's too)", "dB")]
    source_id: Required[Annotated[str, doc("the recording it was made from; clusters every CI")]]
    speaker_id: Required[
        Annotated[
            str,
            doc(
                "the source's group (a speaker, a tone band, an instrument family); the split is "
                "group-disjoint"
            ),
        ]
    ]
    text_id: Annotated[str, doc("what was said; the split is text-disjoint")]
    gender: Annotated[str | None, doc("the speaker's gender: `F`, `M` or null when unknown")]
    domain: Annotated[str, doc("where the source came from (`builtin-tts`, `folder`, ...)")]
    source_kind: Annotated[
        str,
        doc("the kind of sound: `speech`, `tone`, `noise`, `music` or `everyday`; absent: speech"),
    ]
    split: Required[Annotated[Split, doc("`test` or `train`")]]
    sample_rate: Required[Annotated[int, Field(gt=0), doc("the audio's rate", "Hz")]]
    duration_s: Required[Annotated[Seconds, doc("the clip's length", "s")]]
    channels: Annotated[int, Field(gt=0), doc("audio channels")]
    speech_onset_s: Required[
        Annotated[Seconds, doc("where the source's speech starts (moved by a time warp)", "s")]
    ]
    speech_offset_s: Required[Annotated[Seconds, doc("where the source's speech ends", "s")]]
    measured_start: Annotated[
        float | None, doc("verification's measure at the start", "`measured_unit`")
    ]
    measured_end: Annotated[
        float | None, doc("verification's measure at the end", "`measured_unit`")
    ]
    measured_change: Annotated[
        float | None, doc("verification's measured change", "`measured_unit`")
    ]
    measured_unit: Annotated[str, doc("the unit of the measures")]
    blind_change: Annotated[float | None, doc("the source-free slope check, where made")]
    confound_loudness_change_db: Annotated[
        float | None, doc("loudness change against the source (non-target)", "LU")
    ]
    confound_loudness_drift_db: Annotated[
        float | None, doc("late-minus-early loudness drift against the source", "dB")
    ]
    confound_level_slope_change_db: Annotated[
        float | None, doc("level-slope change against the source", "dB")
    ]
    confound_duration_change_ratio: Annotated[
        float | None, doc("clip length over source length", "ratio")
    ]
    confound_clipping_ratio: Annotated[float | None, doc("share of clipped samples", "ratio")]
    confound_peak_dbfs: Annotated[float | None, doc("the clip's peak", "dBFS")]
    confound_f0_change_st: Annotated[
        float | None, doc("median F0 change against the source", "semitones")
    ]
    verified: Required[Annotated[bool, doc("whether the measurement agrees with the label")]]
    verdict: Annotated[str, doc("`verified`, or why not")]
    reference_file: Annotated[str, doc("the source under `references/`")]
    audio_sha256: Annotated[str, doc("the clip's content hash")]
    format: Annotated[
        str, doc("the question format (`vocalgrad list formats`); absent means `gradual`")
    ]
    pair_id: Annotated[str, doc("held formats: the id both twins share")]
    part_bounds: Annotated[
        list[list[int]], doc("comparison: each part's [start, end) (equal lengths)", "samples")
    ]
    part_spans_s: Annotated[list[list[float]], doc("comparison: each part's speech span", "s")]
    gap_s: Annotated[float, doc("comparison: the silence between the parts", "s")]
    measured_value: Annotated[
        float, doc("recognition: the held value measured against the source", "`measured_unit`")
    ]
    answer: Annotated[
        str,
        doc(
            "the answer word the label means where the format's words are not the labels "
            "(the format's first answer word is `increase`; when: `early`/`late`; how_much: "
            "`first`/`second`; contour: `peak`/`dip`; which: `increase`/`decrease`; together: "
            "`same`/`different`; sequence: the dimension that changes first)"
        ),
    ]
    change_direction: Annotated[
        Label,
        doc(
            "when, how_much, together, sequence: the way the parameter changes (`increase` or "
            "`decrease`), apart from the label"
        ),
    ]
    change_window: Annotated[
        list[float],
        doc(
            "when, sequence: where the (named dimension's) change lies, [start, end] of the "
            "speech span",
            "0-1",
        ),
    ]
    measured_halves: Annotated[
        list[float],
        doc("when, contour: each half of the speech's measured change", "`measured_unit`"),
    ]
    part_paths: Annotated[
        list[list[float]], doc("how_much: each part's [start, end] parameter value", "`unit`")
    ]
    part_changes: Annotated[
        list[float], doc("how_much: each part's measured change", "`measured_unit`")
    ]
    turn_at: Annotated[float, doc("contour: where the contour turns, in the speech span", "0-1")]
    param_turn: Annotated[float, doc("contour: the parameter where the contour turns", "`unit`")]
    second_category: Annotated[
        str, doc("two-dimension formats: the other dimension changing in the clip")
    ]
    second_direction: Annotated[
        Label, doc("two-dimension formats: the other dimension's direction")
    ]
    second_magnitude: Annotated[
        float, doc("two-dimension formats: the other dimension's magnitude", "its `unit`")
    ]
    second_param_start: Annotated[
        float, doc("the other dimension's realised parameter where the speech starts", "its `unit`")
    ]
    second_param_end: Annotated[
        float, doc("the other dimension's realised parameter where the speech ends", "its `unit`")
    ]
    second_measured_start: Annotated[
        float | None, doc("the other dimension's own measure at the start", "its `measured_unit`")
    ]
    second_measured_end: Annotated[
        float | None, doc("the other dimension's own measure at the end", "its `measured_unit`")
    ]
    second_measured_change: Annotated[
        float | None, doc("the other dimension's measured change", "its `measured_unit`")
    ]
    second_verdict: Annotated[str, doc("the other dimension's course against its own direction")]
    congruent: Annotated[bool, doc("which: both dimensions move the same way")]
    half: Annotated[str, doc("sequence: the half of the speech the named dimension changes in")]
    second_change_window: Annotated[
        list[float],
        doc(
            "sequence: where the other dimension's change lies, [start, end] of the speech span",
            "0-1",
        ),
    ]
    half_changes: Annotated[
        list[float],
        doc("sequence: the named dimension's measured change in each half", "`measured_unit`"),
    ]
    second_half_changes: Annotated[
        list[float],
        doc("sequence: the other dimension's measured change in each half", "its `measured_unit`"),
    ]
    path: Annotated[str, doc("added on load, never written: the clip's absolute path")]


class ResultRow(TypedDict, total=False):
    """One answer: a line of a run's ``results.jsonl`` per (item, listener, variant, mode,
    control). Its file-reference table is generated from this definition (`schema_table`)."""

    key: Required[
        Annotated[str, doc("`item_id|variant|control|mode`: the resume key (the last row wins)")]
    ]
    item_id: Required[Annotated[str, doc("the dataset row's id")]]
    listener: Required[Annotated[str, doc("the listener's id")]]
    revision: Annotated[str, doc("the listener's revision")]
    variant: Required[Annotated[str, doc("the prompt variant")]]
    control: Required[Annotated[str, doc("`none`, `reversed`, `silence` or `text_only`")]]
    mode: Required[Annotated[str, doc("`choice` (log-likelihoods) or `generate` (free text)")]]
    direction: Required[
        Annotated[str, doc("the truth for this question (flipped for a reversed control)")]
    ]
    category: Annotated[str, doc("copied from the dataset row")]
    tier: Annotated[str, doc("copied from the dataset row")]
    curve: Annotated[str, doc("copied from the dataset row")]
    magnitude: Annotated[float, doc("copied from the dataset row")]
    source_id: Annotated[str, doc("copied from the dataset row")]
    speaker_id: Annotated[str, doc("copied from the dataset row")]
    split: Annotated[str, doc("copied from the dataset row")]
    domain: Annotated[str, doc("copied from the dataset row")]
    source_kind: Annotated[
        str, doc("the kind of sound asked about, copied from the dataset row (speech if absent)")
    ]
    format: Annotated[str, doc("copied from the dataset row")]
    second_category: Annotated[str, doc("copied from the dataset row, where it has one")]
    second_direction: Annotated[str, doc("copied from the dataset row, where it has one")]
    congruent: Annotated[bool, doc("copied from the dataset row, where it has one")]
    response: Annotated[str | None, doc("the raw text answer (generate mode)")]
    parse_status: Annotated[str | None, doc("`ok`, or why the answer could not be read")]
    predicted: Annotated[str | None, doc("the parsed label, or null")]
    llr: Annotated[float | None, doc("choice mode: log p(increase) − log p(decrease)", "nats")]
    logprobs: Annotated[
        dict[str, float] | None,
        doc("choice mode: each label's log-likelihood, averaged over both option orders", "nats"),
    ]
    error: Annotated[str | None, doc("the per-item error, or null; errored rows are not scored")]
    seconds: Annotated[float, doc("time for the batch the item was in", "s")]
    cached: Annotated[
        bool, doc("the answer came from the answer cache, not from the listener in this run")
    ]
    correct: Annotated[bool | None, doc("whether `predicted` equals `direction`")]
    reversed_of: Annotated[str, doc("reversed control: the original item")]


class RunSummary(TypedDict):
    """What `vocalgrad score` prints, as written to a run's ``summary.json``."""

    run: str
    config: dict[str, Any]  # the run's manifest
    groups: dict[str, dict[str, Any]]  # "<variant>/<mode>" -> table, constant, errors
    controls: dict[str, dict[str, Any]]
    alarms: list[str]
    untestable: dict[str, Any]
    answered_from_cache: int  # rows whose answer came from the answer cache
    results: dict[str, dict[str, float]]  # lm-evaluation-harness style
    # "n-samples" (per group) is also present; a key that is not an identifier


class AuditReport(TypedDict):
    """The shortcut audit of a dataset, as written to ``audit.json``."""

    dataset: str
    protocol: str | None
    thresholds: dict[str, float]  # alpha, draws, target_accuracy, target_auc
    # the build's gates as one test: method, gates, draws, alpha, critical_z, p_resolution,
    # draw_maxima, needed (accuracy, auc), cannot_fail, recommended_test_sources
    family: dict[str, Any]
    n_boot: int
    seed: int
    cues_version: int
    n_clips: int
    seconds_cues: float
    seconds_gates: float  # processor time of the gates' permutation nulls, s
    seconds: float
    per_category: dict[str, dict[str, Any]]  # each with `gates`: gate name -> its figures
    passes: bool


class EvalCounts(TypedDict):
    """What one `vocalgrad eval` call did (`vocalgrad.api.Run.counts`)."""

    answered: int  # questions answered in this call
    from_cache: int  # of those, answered from the answer cache
    skipped_done: int  # already answered in the run folder
    retried: int  # asked again after an error
    errors: int  # answered with an error in this call
    failed: int  # items still without an answer
    total: int  # questions the run asks
    seconds: float  # wall time of this call


class BuildReport(TypedDict, total=False):
    """What a build did, as written to ``build_report.json`` (`vocalgrad.stimuli.build.build`)."""

    clips_rendered: int
    clips_kept: int
    clips_dropped: int
    constants_dropped_with_changes: dict[str, int]  # per dimension, within clips_dropped
    seconds: float
    sources_selected: int
    skipped_sources: list[dict[str, str]]  # source_id, reason
    refused_conditions: list[dict[str, Any]]  # category, tier, magnitude, reason
    refused_for_source: list[dict[str, Any]]  # source_id, category, tier, clips, reason
    render_errors: list[dict[str, Any]]
    verification_agreement: dict[str, float]  # per dimension
    per_category: dict[str, dict[str, int]]  # kept, dropped, failed_verification, ...
    source_shortfall: str | None
    source_conversions: list[str]
    source_duplicates: dict[str, Any]  # byte-identical source files left out
    shortcut_audit: AuditReport  # when the build was audited


class VerifyReport(TypedDict):
    """`vocalgrad verify`: every clip measured again (`vocalgrad.stimuli.verify.verify_dataset`)."""

    dataset: str
    official: bool  # the release's layout: blind measures only
    per_category: dict[str, dict[str, Any]]  # clips, agreement, medians, refused_inaudible, ...
    failures: list[dict[str, Any]]  # item_id, category, why


class ProbeResult(TypedDict, total=False):
    """`vocalgrad probe`'s summary, as written to a probe folder's ``summary.json``."""

    listener: str
    revision: str
    pooling: str
    seeds: int
    settings: dict[str, Any]  # the probe settings (`ProbeSettings`)
    threads: int
    thresholds: dict[str, float]  # the diagnosis rule's thresholds
    warnings: list[str]
    train_dataset: str | None  # where the probes' train split came from, if not the dataset
    categories: dict[str, dict[str, Any]]  # curves, lens, behaviour, counts, diagnosis
    alignment: dict[str, Any]  # direction alignment between categories
    seconds: float


class TuneResult(TypedDict):
    """`vocalgrad finetune`: the tuning record, the evaluation of the tuned listener."""

    tuning: dict[str, Any]  # tuning.json
    counts: EvalCounts
    summary: RunSummary
    listener: Any  # the tuned `Listener`


# --- schemas: validation, Hugging Face features and the file reference from one definition


@functools.cache
def validator(record: type) -> TypeAdapter:
    """A pydantic validator for a record type (fields it does not declare are let through).

    Parameters
    ----------
    record : type
        A `TypedDict` of this module (`DatasetRow`, `ResultRow`, ...).

    Returns
    -------
    pydantic.TypeAdapter
        Its validator, built once per type and cached: ``validate_python(row)`` raises
        `pydantic.ValidationError` on a row that breaks the schema.
    """
    return TypeAdapter(record)


def schema_fields(record: type) -> list[dict[str, Any]]:
    """The declared fields of a record, in order.

    Parameters
    ----------
    record : type
        A `TypedDict` of this module whose fields are ``Annotated`` with `doc`.

    Returns
    -------
    list of dict
        Per field: ``name``, ``type`` (the Python type, `Annotated` and `Required` removed),
        ``required`` (bool), ``meaning`` and ``unit`` (str, "" when none).
    """
    hints = typing.get_type_hints(record, include_extras=True)
    out = []
    for name, hint in hints.items():
        meaning, unit = "", ""
        base = hint
        while get_origin(base) in (Annotated, Required):
            if get_origin(base) is Annotated:
                for extra in base.__metadata__:
                    if isinstance(extra, FieldInfo) and extra.description:
                        meaning = extra.description
                        unit = (extra.json_schema_extra or {}).get("unit", "")
            base = get_args(base)[0]
        out.append(
            {
                "name": name,
                "type": base,
                "required": name in record.__required_keys__,
                "meaning": meaning,
                "unit": unit,
            }
        )
    return out


def type_text(tp: Any) -> str:
    """A field type as the file reference prints it: ``str``, ``float or null``, ...

    Parameters
    ----------
    tp : type or typing form
        A field's type, `Annotated` and `Required` removed (`schema_fields`' ``type``).

    Returns
    -------
    str
        Markdown: a class's name, ``A or B`` (``or null`` for None), ``list of A``,
        ``map of A`` (a dict's values), or a `Literal`'s values in backquotes joined by
        " / ".
    """
    origin = get_origin(tp)
    if origin is Literal:
        return " / ".join(f"`{a}`" for a in get_args(tp))
    args = get_args(tp)
    if origin in (types.UnionType, typing.Union):
        kinds = [type_text(a) for a in args if a is not type(None)]
        return " or ".join(kinds) + (" or null" if type(None) in args else "")
    if origin is list:
        return f"list of {type_text(args[0])}"
    if origin is dict:
        return f"map of {type_text(args[1])}"
    if get_origin(tp) is Annotated:
        return type_text(get_args(tp)[0])
    return getattr(tp, "__name__", str(tp))


def schema_table(record: type) -> str:
    """The Markdown table of a record's fields the file reference shows (generated, and
    checked against the page by the tests).

    Parameters
    ----------
    record : type
        A `TypedDict` of this module whose fields are ``Annotated`` with `doc`.

    Returns
    -------
    str
        A table with the columns field (``(required)`` marked), type (`type_text`), unit and
        meaning, one line per field in declaration order.
    """
    lines = ["| field | type | unit | meaning |", "|---|---|---|---|"]
    for f in schema_fields(record):
        name = f"`{f['name']}`" + (" (required)" if f["required"] else "")
        meaning = f["meaning"].replace("|", "\\|")
        lines.append(f"| {name} | {type_text(f['type'])} | {f['unit']} | {meaning} |")
    return "\n".join(lines)

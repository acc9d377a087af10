"""Plan -> render -> verify -> write, in parallel, resumable, deterministic.

Work is split by source: a worker prepares one reference and renders all of its
conditions, so per-source analyses (pitch marks, F0, log-mel) are computed once. The main
process appends each finished source's rows to `.build/rows.jsonl`; a rerun skips every
clip recorded there, and clips are written by rename, so a kill never leaves half a file.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import math
import os
import shutil
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from threadpoolctl import threadpool_limits

from vocalgrad import dimensions, formats
from vocalgrad.audio import write_flac_atomic
from vocalgrad.dataset import (
    REFERENCES,
    SPLITS,
    content_sha256,
    dumps,
    read_jsonl,
    repair_tail,
    write_jsonl,
)
from vocalgrad.errors import AudioError, ConfigError, RenderRefused, SourceError
from vocalgrad.files import atomic_write_text, exclusive, naming
from vocalgrad.parallel import TaskPool
from vocalgrad.progress import progress, progress_callback
from vocalgrad.provenance import versions
from vocalgrad.records import BuildReport, DatasetRow
from vocalgrad.signal.analysis import Analysis
from vocalgrad.sources import (
    Source,
    drop_duplicates,
    ensure_rendered,
    resolve_sources,
    select_sources,
    source_folders,
    spec_kind,
)
from vocalgrad.sources.check import SourceCheck, conversions, skipped_files
from vocalgrad.stimuli.audit import audit_dataset
from vocalgrad.stimuli.card import append_audit, write_card
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import (
    Condition,
    change_size,
    item_id,
    plan_conditions,
    stratified,
)
from vocalgrad.stimuli.render import (
    RENDERER_REVISION,
    prepare_reference,
    prepare_source,
    render_condition,
    tone_seed_for,
)

STATE_DIR = ".build"
RERENDER_HINT = "rerun the same build to render its clips again"
log = logging.getLogger("vocalgrad")


@dataclass(frozen=True)
class SourceTask:
    source: Source
    split: str
    conditions: tuple[Condition, ...]
    config: BuildConfig
    out: str


def render_source(task: SourceTask) -> dict:
    """Worker: all pending clips of one source. Returns rows, or why the source was skipped.

    BLAS is held to one thread: parallelism comes from processes, and spinning BLAS threads
    in every worker oversubscribe the cores.
    """
    with threadpool_limits(1):
        return _render_source(task)


def _render_source(task: SourceTask) -> dict:
    config, source = task.config, task.source
    try:
        clean = prepare_reference(source.path, config.sample_rate, config.target_lufs, source.kind)
    except AudioError as err:
        return {
            "source_id": source.source_id,
            "skipped": str(err),
            "rows": [],
            "n": len(task.conditions),
        }
    out = Path(task.out)
    ref_name = f"{item_id(config.seed, source.source_id, _REFERENCE)}.flac"
    ref_path = out / REFERENCES / ref_name
    prepared = prepare_source(clean, tone_seed_for(config.seed, source.source_id))
    reference_row = {
        "file_name": ref_name,
        "source_id": source.source_id,
        "sample_rate": clean.sr,
        "duration_s": round(clean.duration_s, 4),
        # as exact as a clip row's (under a sample at 48 kHz): verification reads the source's
        # head and tail windows from it, and a span rounded to the millisecond moved them
        "speech_onset_s": round(clean.span.onset_s, 5),
        "speech_offset_s": round(clean.span.offset_s, 5),
        "room_tone_seed": prepared.tone_seed,
        "room_tone_rms": float(prepared.tone_rms),
        "source_kind": source.kind,
        "pitch_ceiling_hz": clean.pitch_ceiling_hz,
        "audio_sha256": write_flac_atomic(ref_path, clean.audio, clean.sr),
    }
    rows = []
    refused = refused_ranges(task.conditions, prepared.heard)
    for condition in task.conditions:
        item = item_id(config.seed, source.source_id, condition)
        condition = constant_range(condition, refused, config, source.source_id)
        reason = source_refusal(condition, prepared.heard) or constant_refusal(condition, refused)
        if (
            reason
        ):  # inaudible on this source (its bandwidth, say): refused and counted, not rendered
            rows.append(
                {
                    "item_id": item,
                    "refused": reason,
                    "pair_key": condition.pair_key,
                    "source_id": source.source_id,
                    "category": condition.category,
                    "tier": condition.tier,
                }
            )
            continue
        try:
            result = render_condition(
                prepared,
                condition,
                config.seed,
                item,
                item_id(config.seed, source.source_id, condition.twin()),
            )
        except RenderRefused as err:  # e.g. no voiced frames to shift
            rows.append(
                {
                    "item_id": item,
                    "failed": str(err),
                    "pair_key": condition.pair_key,
                    "source_id": source.source_id,
                    "category": condition.category,
                }
            )
            continue
        file_name = f"{item}.flac"
        sha = write_flac_atomic(out / task.split / file_name, result.audio, clean.sr)
        rows.append(_row(task, condition, item, file_name, sha, ref_name, result))
    formats.get(config.format).settle(rows)  # verdicts that need more than one clip
    return {
        "source_id": source.source_id,
        "reference": reference_row,
        "rows": rows,
        "n": len(task.conditions),
    }


def source_refusal(condition: Condition, heard: Analysis) -> str | None:
    """Why a changing condition would be inaudible on this source, where the dimension can
    tell before rendering (`source_inaudible_reason`); the rate rule is `plan_conditions`'."""
    if condition.direction == "constant":
        return None
    return dimensions.get(condition.category).source_inaudible_reason(condition.magnitude, heard)


def refused_ranges(
    planned: Sequence[Condition], heard: Analysis
) -> dict[tuple[str, float, float], str]:
    """(category, start, end) -> why, for every planned change inaudible on this source."""
    refused = {}
    for c in planned:
        if c.direction == "increase" and (why := source_refusal(c, heard)):
            refused[(c.category, c.start, c.end)] = why
    return refused


def constant_refusal(
    condition: Condition, refused: Mapping[tuple[str, float, float], str]
) -> str | None:
    """Why a constant clip is not rendered on this source, or None: every change of its
    dimension is refused here (`refused_ranges`). Rendered anyway, the source's constants
    would be the only clips of the dimension it gives, and what marks the source (a tail in
    creak, a narrow band) would mark them as constant; and they held values that no changing
    clip of the source reaches, so most failed verification (docs/explanations/validity.md
    has the figures)."""
    if condition.direction != "constant" or not condition.ranges:
        return None
    why = [refused.get((condition.category, *r)) for r in condition.ranges]
    if not all(why):
        return None
    return f"every change of this dimension is refused on this source ({why[0]})"


def constant_range(
    condition: Condition,
    refused: Mapping[tuple[str, float, float], str],
    config: BuildConfig,
    source_id: str,
) -> Condition:
    """The range a constant clip draws its held value from: the planned tiers' ranges less
    those `refused` on this source (`refused_ranges`), spread over the source's constants
    (`plan.stratified`).
    Without the refused ones: else a constant holds a refused tier's value (clarity's 5 kHz
    low-pass on telephone-band speech: no change at all) that no changing clip of the source
    holds, and the audit tells constants apart (on telephone-band speech, past its limit).
    The item id does not depend on the ranges."""
    if condition.direction != "constant" or not condition.ranges:
        return condition
    kept = tuple(r for r in condition.ranges if (condition.category, *r) not in refused)
    if not kept:  # every range refused: `constant_refusal` refuses the clip
        return condition
    return stratified(
        dataclasses.replace(condition, ranges=kept), config.constants, config.seed, source_id
    )


# Reference files get opaque names from the same hash as clips, under a reserved condition.
_REFERENCE = Condition("reference", "none", "none", "none", 0.0, 0.0, 0.0)


def _row(
    task: SourceTask,
    condition: Condition,
    item: str,
    file_name: str,
    sha: str,
    ref_name: str,
    result,
) -> DatasetRow:
    spec = dimensions.get(condition.category).SPEC
    source = task.source
    sr = task.config.sample_rate
    span = result.clip.span
    return {
        "file_name": file_name,
        "item_id": item,
        "category": condition.category,
        "direction": condition.direction,
        "tier": condition.tier,
        "curve": condition.curve,
        "magnitude": condition.magnitude,
        "unit": spec.unit,
        "change_size": round(change_size(condition.category, condition.start, condition.end), 6),
        "change_unit": "octaves" if spec.scale == "log" else spec.unit,
        "param_start": round(result.param_start, 6),
        "param_end": round(result.param_end, 6),
        "level_rove_db": round(result.rove_db, 3),
        "source_id": source.source_id,
        "speaker_id": source.speaker_id,
        "text_id": source.text_id,
        "gender": source.gender,
        "domain": source.domain,
        "source_kind": source.kind,
        "split": task.split,
        "sample_rate": sr,
        "duration_s": round(len(result.audio) / sr, 4),
        "channels": result.clip.channels.shape[1],
        "speech_onset_s": round(
            span.onset_s, 5
        ),  # under a sample at 48 kHz: the audit's edge windows
        "speech_offset_s": round(span.offset_s, 5),  # start where the renderer's source edges do
        "measured_start": round(result.measured.start, 4),
        "measured_end": round(result.measured.end, 4),
        "measured_change": round(result.change, 4),
        "measured_unit": spec.measured_unit,
        **{f"confound_{k}": v for k, v in result.confounds.items()},
        "verified": bool(result.verified),
        "verdict": result.verdict,
        "reference_file": f"{REFERENCES}/{ref_name}",
        "audio_sha256": sha,
        "pair_key": condition.pair_key,
        "format": condition.format,
        **formats.get(condition.format).row_fields(condition, result, _pair_id(task, condition)),
    }


def _pair_id(task: SourceTask, condition: Condition) -> str:
    """An opaque id both directions of a pair share (the same for both, unlike the item id)."""
    return item_id(
        task.config.seed, task.source.source_id, dataclasses.replace(condition, direction="pair")
    )


def build(
    config: BuildConfig,
    out: str | Path,
    workers: int = 1,
    overwrite: bool = False,
    cache_dir: Path | None = None,
    audit: bool = True,
    executor: TaskPool | None = None,
) -> BuildReport:
    """Build (or resume building) a dataset into `out`, then audit it for shortcuts (the
    audit's table goes into the dataset card); returns the build report.

    Sources render on `executor` (default: `workers` local processes); on Ray, `out` must be
    a path every node sees, since workers write the clips and the driver the metadata."""
    out = Path(out)
    started = time.time()
    state = out / STATE_DIR
    if out.exists() and not out.is_dir():
        raise FileExistsError(errno.EEXIST, "exists and is not a folder", str(out))
    _check_apart(out, config.source)
    _check_resume(out, state, config, overwrite)
    with exclusive(state, "build folder"):
        report = _build(config, out, state, started, workers, cache_dir, executor)
        if audit:
            with progress_callback("audit cues", unit="clip") as measured:
                report["shortcut_audit"] = audit_dataset(out, workers=workers, progress=measured)
            append_audit(out, report["shortcut_audit"])
    return report


def _build(
    config: BuildConfig,
    out: Path,
    state: Path,
    started: float,
    workers: int,
    cache_dir: Path | None,
    executor: TaskPool | None,
) -> dict:
    for stale in out.rglob(".tmp-*"):  # a SIGKILL between create and rename leaves these
        stale.unlink()
    conditions, refused = plan_conditions(config)
    if not conditions:
        raise ConfigError(
            "every requested condition was refused: " + "; ".join(r["reason"] for r in refused)
        )
    choice = choose_sources(config, cache_dir=cache_dir)
    selected = choice.selected
    done = _done_items(state / "rows.jsonl", out)
    tasks = []
    for source, split in selected:
        pending = tuple(
            c for c in conditions if item_id(config.seed, source.source_id, c) not in done
        )
        if pending:
            tasks.append(SourceTask(source, split, pending, config, str(out)))
    for split in (*SPLITS, REFERENCES):
        (out / split).mkdir(parents=True, exist_ok=True)
    total = sum(len(t.conditions) for t in tasks)
    note = repair_tail(state / "rows.jsonl")
    if note:
        log.warning("%s; its clips are rendered again", note)
    with (
        naming(state / "rows.jsonl"),
        (state / "rows.jsonl").open("a") as log_file,
        progress(total, "build", unit="clip") as bar,
    ):
        for result in (executor or TaskPool(workers)).map_tasks(render_source, tasks):
            if result.get("skipped"):
                lines = [dumps({"source_id": result["source_id"], "skipped": result["skipped"]})]
            else:
                lines = [dumps({"reference": result["reference"]}), *map(dumps, result["rows"])]
            log_file.write("".join(line + "\n" for line in lines))
            log_file.flush()
            os.fsync(log_file.fileno())  # the log is the resume point: make it durable per source
            bar.update(result["n"])
    for stale in out.rglob(".tmp-*"):  # left by a worker killed mid-write whose task then reran
        stale.unlink()
    return _finalise(out, state, config, choice, refused, time.time() - started)


def _check_apart(out: Path, source: str) -> None:
    """Refuse an output folder inside a source folder (a rerun would read the build's own
    clips as new sources) or around one (`--overwrite` would delete the sources)."""
    where = out.resolve()
    for folder in source_folders(source):
        if where.is_relative_to(folder) or folder.is_relative_to(where):
            inside = where.is_relative_to(folder)
            raise ConfigError(
                f"--out {out} is {'inside' if inside else 'around'} the source folder {folder}: "
                + (
                    "a rerun would read this build's clips as new sources"
                    if inside
                    else "replacing the build would delete the sources"
                )
                + "; choose an --out outside it"
            )


@dataclass
class SourceChoice:
    """The chosen (source, split) pairs and what choosing them found."""

    selected: list[tuple[Source, str]]
    refused: dict[str, str]  # source_id -> why it is not usable as its kind of sound
    shortfall: str | None  # why fewer sources than asked, if so
    conversions: list[str]  # resampling and downmixing done to the chosen sources
    duplicates: dict[str, str] = field(default_factory=dict)  # left out -> the id kept
    kind: str = "speech"  # the kind of sound of the spec (`vocalgrad.signal.kinds`)


def prepare_sources(config: BuildConfig, cache_dir: Path | None = None) -> list[tuple[Source, str]]:
    """Resolve the source spec and pick the speaker- and text-disjoint test/train sources."""
    return choose_sources(config, cache_dir).selected


def choose_sources(config: BuildConfig, cache_dir: Path | None = None) -> SourceChoice:
    """Pick sources that pass their kind's check (`SourceCheck`): a picked source that fails
    it (silent, unreadable, speech that is a tone or noise, a tone that is speech) is left out
    and the pick made again from the rest, so it is replaced by the next eligible one; if the
    rest cannot fill the request, the usable part of the last pick is built and the shortfall
    says why."""
    pool, duplicates = drop_duplicates(
        resolve_sources(config.source, cache_dir=cache_dir, speaker_pattern=config.speaker_pattern)
    )
    check = SourceCheck()
    kind = spec_kind(config.source)
    selected: list[tuple[Source, str]] | None = None
    shortfall = None
    while True:
        try:
            picked = select_sources(
                [s for s in pool if s.source_id not in check.refused],
                n_test=config.n_test,
                n_train=config.n_train,
                min_duration_s=config.min_duration_s,
                per_speaker_test=config.per_speaker_test,
                seed=config.seed,
            )
        except SourceError as err:
            if selected is None:
                raise
            example = next(iter(check.refused.items()))
            shortfall = (
                f"{len(check.refused)} source file(s) refused by the {kind} check (e.g. "
                f"{example[0]}: {example[1]}) leave too few to replace them ({err})"
            )
            break
        ensure_rendered([s for s, _ in picked])
        selected = picked
        if not any([check(s) for s, _ in picked]):  # every pick checked, not just up to the first
            break
    kept = [(s, split) for s, split in selected if s.source_id not in check.refused]
    if not kept:
        raise SourceError(f"no usable {kind} among the chosen sources: {shortfall}")
    files = [check.formats[s.source_id] for s, _ in kept if s.source_id in check.formats]
    return SourceChoice(
        kept,
        dict(check.refused),
        shortfall,
        conversions(files, config.sample_rate),
        duplicates,
        kind,
    )


def _check_resume(out: Path, state: Path, config: BuildConfig, overwrite: bool) -> None:
    """Refuse to resume a build of another config, or one begun by another renderer revision
    (its clips would not match); both are saved in one file, written at once."""
    saved = state / "config.json"
    wanted = {**config.to_dict(), "renderer_revision": RENDERER_REVISION}
    text = json.dumps(wanted, sort_keys=True)
    if saved.is_file() and overwrite:
        shutil.rmtree(out)  # a finished build too: the same config on changed code renders anew
    elif saved.is_file() and saved.read_text() != text:
        found = json.loads(saved.read_text())
        revision = found.pop("renderer_revision", 1)  # builds begun before it was recorded
        if json.dumps({**found, "renderer_revision": RENDERER_REVISION}, sort_keys=True) == text:
            raise ConfigError(
                f"{out} was begun by renderer revision {revision} and this vocalgrad renders "
                f"revision {RENDERER_REVISION}: its clips would not match; pass --overwrite to "
                "build it anew or choose another --out"
            )
        raise ConfigError(
            f"{out} holds a build with a different config; pass --overwrite to replace it "
            "or choose another --out"
        )
    elif out.exists() and not saved.is_file() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not a vocalgrad build; choose an empty --out")
    state.mkdir(parents=True, exist_ok=True)
    atomic_write_text(saved, text)


def _done_items(log: Path, out: Path) -> set[str]:
    if not log.is_file():
        return set()
    done = set()
    for row in read_jsonl(log, torn="skip", hint=RERENDER_HINT):
        if "file_name" in row and (out / row["split"] / row["file_name"]).is_file():
            done.add(row["item_id"])
        elif "failed" in row or "refused" in row:
            done.add(row["item_id"])
    return done


def _finalise(
    out: Path,
    state: Path,
    config: BuildConfig,
    choice: SourceChoice,
    refused: list[dict],
    seconds: float,
) -> dict:
    """Keep verified clips whose pair partner also verified; write metadata, card, manifest."""
    rows: dict[str, dict] = {}
    references: dict[str, dict] = {}
    skipped: dict[str, str] = {}
    failed: list[dict] = []
    refused_here: list[dict] = []  # conditions refused for one source before rendering
    for entry in read_jsonl(state / "rows.jsonl", torn="skip", hint=RERENDER_HINT):
        if "reference" in entry:
            references[entry["reference"]["source_id"]] = entry["reference"]
        elif "skipped" in entry:
            skipped[entry["source_id"]] = entry["skipped"]
        elif "failed" in entry:
            failed.append(entry)
        elif "refused" in entry:
            refused_here.append(entry)
        else:
            rows[entry["item_id"]] = entry
    bad_pairs = {(r["source_id"], r["pair_key"]) for r in (*failed, *refused_here)}
    if config.drop_unverified:
        bad_pairs |= {(r["source_id"], r["pair_key"]) for r in rows.values() if not r["verified"]}
    kept, dropped = [], []
    for row in rows.values():
        if row["direction"] != "constant" and (row["source_id"], row["pair_key"]) in bad_pairs:
            dropped.append(row)
        elif row["direction"] == "constant" and not row["verified"] and config.drop_unverified:
            dropped.append(row)
        else:
            kept.append(row)
    surplus = surplus_constants(kept, rows.values())
    if surplus:
        gone = {r["item_id"] for r in surplus}
        kept = [r for r in kept if r["item_id"] not in gone]
        dropped.extend(surplus)
    for row in dropped:
        (out / row["split"] / row["file_name"]).unlink(missing_ok=True)
    kept.sort(
        key=lambda r: (
            r["split"],
            r["source_id"],
            r["category"],
            r["tier"],
            r["curve"],
            r["direction"],
        )
    )
    for split in SPLITS:
        split_rows = [_public(r) for r in kept if r["split"] == split]
        if split_rows:
            write_jsonl(out / split / "metadata.jsonl", split_rows)
        elif (out / split).is_dir() and not any((out / split).iterdir()):
            (out / split).rmdir()
    write_jsonl(
        out / REFERENCES / "metadata.jsonl",
        sorted(references.values(), key=lambda r: r["source_id"]),
    )
    selected = choice.selected
    for source_id, reason in choice.refused.items():
        skipped.setdefault(source_id, f"refused by the {choice.kind} check: {reason}")
    report = _report(
        config, kept, dropped, failed, refused, skipped, selected, seconds, refused_here
    )
    report["constants_dropped_with_changes"] = dict(
        sorted(Counter(r["category"] for r in surplus).items())
    )
    report["source_shortfall"] = choice.shortfall
    report["source_conversions"] = choice.conversions
    report["source_duplicates"] = choice.duplicates
    report["skipped_files"] = [
        {"reason": reason, "files": files} for reason, files in skipped_files(config.source).items()
    ]
    manifest = {
        "vocalgrad_build": 1,
        "config": config.to_dict(),
        "seed": config.seed,
        "versions": versions(),
        "content_sha256": content_sha256(out),  # of the metadata just written
        "n_clips": len(kept),
        "source_duplicates_dropped": len(choice.duplicates),
    }
    atomic_write_text(out / "build.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    atomic_write_text(
        out / "build_report.json", json.dumps(report, indent=2, sort_keys=True) + "\n"
    )
    write_card(out, config, kept, report, selected)
    return report


def _public(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "pair_key"}


def surplus_constants(kept: list[dict], rendered: Iterable[dict]) -> list[dict]:
    """The constant clips a source keeps beyond the share of its changes that it kept.

    Verification drops changes unevenly across sources (stereo direction is read above
    1.5 kHz, so every change of a 200 Hz pure tone is measured inaudible) while their
    constants verify. Such a source then gives the build more constants than its share, and
    whatever marks the source (a low pure tone) marks constant clips, which the constant
    gate reads. The same reason as `constant_refusal`, for changes lost after rendering.

    Parameters
    ----------
    kept : list of dict
        The clip rows kept so far (verified, their pair partner too).
    rendered : iterable of dict
        Every rendered clip row, kept or not.

    Returns
    -------
    list of dict
        Per source and category, the kept constants past ``round(n x k / r)`` (n its kept
        constants, k and r its kept and rendered changing clips), the last ones by item id;
        none where every rendered change was kept.
    """
    changes: Counter = Counter()
    for row in rendered:
        if row["direction"] != "constant":
            changes[(row["source_id"], row["category"])] += 1
    kept_changes: Counter = Counter()
    constants: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in kept:
        key = (row["source_id"], row["category"])
        if row["direction"] == "constant":
            constants[key].append(row)
        else:
            kept_changes[key] += 1
    surplus = []
    for key, rows in constants.items():
        if not changes[key] or kept_changes[key] == changes[key]:
            continue
        share = math.floor(len(rows) * kept_changes[key] / changes[key] + 0.5)
        surplus.extend(sorted(rows, key=lambda r: r["item_id"])[share:])
    return surplus


def _report(
    config, kept, dropped, failed, refused, skipped, selected, seconds, refused_here=()
) -> dict:
    per_category: dict[str, dict] = defaultdict(
        lambda: {"kept": 0, "dropped": 0, "failed_verification": 0, "refused_inaudible": 0}
    )
    for row in kept:
        per_category[row["category"]]["kept"] += 1
    for row in dropped:
        per_category[row["category"]]["dropped"] += 1
    for row in (*kept, *dropped):
        verdict = row.get("verdict", "verified" if row["verified"] else "disagrees")
        per_category[row["category"]]["failed_verification"] += verdict == "disagrees"
        per_category[row["category"]]["refused_inaudible"] += verdict == "inaudible"
    per_source: dict[tuple, dict] = {}
    for row in refused_here:  # never rendered: inaudible on that source, counted with the rest
        per_category[row["category"]]["refused_inaudible"] += 1
        entry = per_source.setdefault(
            (row["source_id"], row["category"], row["tier"]),
            {
                "source_id": row["source_id"],
                "category": row["category"],
                "tier": row["tier"],
                "clips": 0,
                "reason": row["refused"],
            },
        )
        entry["clips"] += 1
    rendered = len(kept) + len(dropped)
    # agreement among the clips whose realised change a listener could hear at all: the
    # inaudible ones are refused (and counted) rather than counted as disagreements
    agreement = {
        c: round(
            1
            - v["failed_verification"] / max(v["kept"] + v["dropped"] - v["refused_inaudible"], 1),
            4,
        )
        for c, v in per_category.items()
    }
    return {
        "clips_kept": len(kept),
        "clips_rendered": rendered,
        "clips_dropped": len(dropped),
        "render_errors": failed,
        "refused_conditions": refused,
        "refused_for_source": [per_source[k] for k in sorted(per_source)],
        "skipped_sources": [{"source_id": k, "reason": v} for k, v in sorted(skipped.items())],
        "sources_selected": len(selected),
        "per_category": dict(per_category),
        "verification_agreement": agreement,
        "seconds": round(seconds, 2),
    }

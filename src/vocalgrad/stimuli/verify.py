"""Re-measure an existing dataset, ours or the official VocalGrad release.

Our datasets carry their references, so every clip is measured relative to its source.
The official release has no references: there only the blind measures apply (F0 and level
slope) plus the label-independent checks (clipping, silence).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np

from vocalgrad import dimensions, formats
from vocalgrad.audio import SpeechSpan, load_audio, resample
from vocalgrad.dataset import is_official, load_references, load_rows
from vocalgrad.errors import AudioError
from vocalgrad.progress import tracked
from vocalgrad.records import VerifyReport
from vocalgrad.signal.analysis import Analysis, pitch_ceiling
from vocalgrad.signal.kinds import row_kind
from vocalgrad.stimuli.confounds import measure_confounds
from vocalgrad.stimuli.render import prepare_source


def verify_dataset(root: str | Path, limit: int | None = None) -> VerifyReport:
    """Measure every clip again; returns per-category agreement, magnitudes and confounds."""
    root = Path(root)
    official = is_official(root)
    rows = load_rows(root)
    refs = load_references(root)  # the release has none: blind measures only
    if limit:
        rows = rows[:limit]
    ref_cache: dict[str, Analysis] = {}
    results: dict[str, dict] = defaultdict(lambda: defaultdict(list))
    failures = []
    # measured rows by format: a format's verdicts may need more than one clip (recognition
    # compares each clip with its twin), so they are given once every clip is measured
    measured: dict[str, list[tuple[dict, float, dict]]] = defaultdict(list)

    def record(row: dict, change: float, result: str, conf: dict) -> None:
        bucket = results[row["category"]]
        if result == "inaudible":
            bucket["inaudible"].append(1)
        else:
            bucket["agree"].append(result == "verified")
        bucket[f"change_{row.get('tier', 'none')}"].append(
            abs(change) if np.isfinite(change) else np.nan
        )
        for key in (
            "loudness_change_db",
            "level_slope_change_db",
            "duration_change_ratio",
            "f0_change_st",
        ):
            bucket[key].append(conf[key])
        if result != "verified":
            failures.append(
                {
                    "item_id": row["item_id"],
                    "category": row["category"],
                    "verdict": result,
                    "direction": row["direction"],
                    "measured_change": change,
                }
            )

    for row in tracked(rows, "verify", unit="clip"):
        category = row["category"]
        dim = dimensions.get(category)
        try:
            audio, sr = load_audio(row["path"], mono=False)
        except AudioError as err:
            failures.append({"item_id": row["item_id"], "error": str(err)})
            continue
        bucket = results[category]
        ref_row = refs.get(row.get("source_id"))
        clip = clip_analysis(row, audio, sr, ref_row)
        if ref_row is not None:
            ref = ref_cache.get(ref_row["path"])
            if ref is None:
                ref_cache.clear()  # rows are grouped by source: keep one reference in memory
                ref = ref_cache[ref_row["path"]] = heard_reference(ref_row, sr)
            value, conf = measure_row(row, clip, ref)
            measured[formats.row_format(row)].append((row, value, conf))
        fmt = formats.of_row(row)
        asked = (
            row["direction"] != "constant" and fmt.changes_over_time and fmt.blind_change_answers
        )
        blind = dim.blind_change(clip) if asked else None
        if blind is not None:
            bucket["blind"].append((blind, 1 if row["direction"] == "increase" else -1))
        bucket["clipping_ratio"].append(float(np.mean(np.abs(audio) >= 0.999)))
        bucket["n"].append(1)
    for fmt, members in measured.items():
        judged = formats.get(fmt).verdicts([(row, value) for row, value, _ in members])
        for i, change, result in judged:
            record(members[i][0], change, result, members[i][2])
    summary = {}
    for category, b in results.items():
        entry = {"clips": len(b["n"]), "max_clipping_ratio": float(np.max(b["clipping_ratio"]))}
        if b["agree"]:
            entry["agreement"] = float(np.mean(b["agree"]))
            for tier in ("low", "mid", "high", "none"):
                vals = [v for v in b[f"change_{tier}"] if np.isfinite(v)]
                if vals:
                    entry[f"median_abs_change_{tier}"] = float(np.median(vals))
            for key in ("loudness_change_db", "level_slope_change_db", "f0_change_st"):
                vals = np.abs(np.array([v for v in b[key] if v is not None and np.isfinite(v)]))
                if vals.size:
                    entry[f"median_abs_{key}"] = float(np.median(vals))
            entry["unit"] = dimensions.get(category).SPEC.measured_unit
        if b["inaudible"]:
            entry["refused_inaudible"] = len(b["inaudible"])
        if b["blind"]:
            entry["blind_agreement"] = blind_agreement(b["blind"])
        summary[category] = entry
    return {
        "dataset": str(root),
        "official": official,
        "per_category": summary,
        "failures": failures,
    }


def clip_analysis(row: dict, audio: np.ndarray, sr: int, ref_row: dict | None) -> Analysis:
    """A row's clip analysed as the build analysed it: with the speech span the row records
    (a clip's own detection is unreliable by design: a -18 dB start or a noisy end hides
    speech), its source's pitch range and its kind of sound.

    Parameters
    ----------
    row : dict
        The clip's dataset row.
    audio : ndarray, shape (n,) or (n, channels)
        Its samples.
    sr : int
        Their rate, Hz.
    ref_row : dict or None
        Its source's row of ``references/metadata.jsonl``, where the dataset has one.

    Returns
    -------
    Analysis
        The clip.
    """
    return Analysis(
        audio,
        sr,
        span=row_span(row),
        pitch_ceiling_hz=row_pitch_ceiling(row, ref_row),
        kind=row_kind(row),
    )


def measure_row(row: dict, clip: Analysis, ref: Analysis) -> tuple[float, dict]:
    """(measured value, confounds) of one row's audio against its heard source, as its
    question format measures it (`QuestionFormat.measure`): gradual, the change within the
    clip; comparison, the second part's value minus the first's; recognition, the clip's held
    value (its verdict needs the twin)."""
    return formats.of_row(row).measure(row, clip, ref, measure_confounds)


def row_pitch_ceiling(row: dict, ref_row: dict | None) -> float:
    """The F0 ceiling (Hz) a clip and its source were measured with at build time: the one
    its reference records, else its kind's (speech's for rows without one)."""
    if ref_row is not None and ref_row.get("pitch_ceiling_hz") is not None:
        return float(ref_row["pitch_ceiling_hz"])
    return pitch_ceiling(row_kind(row))


def row_span(row: dict) -> SpeechSpan | None:
    """The speech span a row records (the source's, moved by any time warp), if any."""
    if row.get("speech_onset_s") is None or row.get("speech_offset_s") is None:
        return None
    return SpeechSpan(float(row["speech_onset_s"]), float(row["speech_offset_s"]), True)


def reference_analysis(ref_row: dict, sr: int | None = None) -> Analysis:
    """The stored clean source of a reference row, analysed as the build analysed it: its
    speech span, pitch range and kind of sound, so a clip rendered from it again (an adaptive
    run) or measured against it (verification, the one-end observer) is treated as built.

    Parameters
    ----------
    ref_row : dict
        A row of ``references/metadata.jsonl`` (with its absolute ``path``).
    sr : int, optional
        The rate to analyse it at, Hz (a stored reference is at the build's rate); default:
        the file's.

    Returns
    -------
    Analysis
        The clean source.
    """
    audio, file_sr = load_audio(ref_row["path"])
    return Analysis(
        audio if sr is None else resample(audio, file_sr, sr),
        file_sr if sr is None else sr,
        span=row_span(ref_row),
        pitch_ceiling_hz=row_pitch_ceiling(ref_row, ref_row),
        kind=row_kind(ref_row),
    )


def heard_reference(ref_row: dict, sr: int) -> Analysis:
    """The source as every clip of it sounds before processing: the stored clean source
    plus its room-tone floor (seed and level recorded in the reference row)."""
    clean = reference_analysis(ref_row, sr)
    if ref_row.get("room_tone_seed") is None:  # built before room tone existed
        return clean
    return prepare_source(
        clean, int(ref_row["room_tone_seed"]), float(ref_row["room_tone_rms"])
    ).heard


def blind_agreement(pairs: list[tuple[float, int]]) -> float:
    """Share of clips whose blind (source-free) slope lies on the label's side of the
    category median. Natural declination makes almost every clip's raw F0 and level slope
    negative, so the sign alone sits at chance; with both directions equally often in the
    set, the median is the declination-corrected decision point. Weak evidence: it reads
    the slope of the clip alone, content included."""
    values = np.array([v for v, _ in pairs], dtype=float)
    signs = np.array([s for _, s in pairs])
    ok = np.isfinite(values)
    if not ok.any():
        return float("nan")
    centre = float(np.median(values[ok]))
    return float(np.mean((values[ok] - centre) * signs[ok] > 0))


def format_report(report: dict) -> str:
    lines = [
        "| category | clips | agreement | refused (inaudible) | |change| low / mid / high | "
        "constant | blind agreement (declination-corrected) | |loudness Δ| dB | |level-slope Δ| "
        "dB | max clipping |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for category, e in report["per_category"].items():

        def f(key: str, fmt: str = "{:.2f}", e: dict = e) -> str:
            return fmt.format(e[key]) if key in e else "–"

        tiers = " / ".join(f(f"median_abs_change_{t}") for t in ("low", "mid", "high"))
        lines.append(
            f"| {category} | {e['clips']} | {f('agreement', '{:.2%}')} | "
            f"{e.get('refused_inaudible', 0)} "
            f"| {tiers} {e.get('unit', '')} | "
            f"{f('median_abs_change_none')} | {f('blind_agreement', '{:.2%}')} | "
            f"{f('median_abs_loudness_change_db')} | "
            f"{f('median_abs_level_slope_change_db')} | {e['max_clipping_ratio']:.4f} |"
        )
    lines.append(
        f"\n{len(report['failures'])} clip(s) disagree with their label or could not be read."
    )
    return "\n".join(lines)

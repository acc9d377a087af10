"""Non-target changes of a rendered clip: what a listener could hear besides the target.

Stored for every clip so a reviewer can check that, say, tremolo did not make the clip
quieter, pitch shifting did not make the end louder, or noise did not move the pitch
tracker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from vocalgrad.audio import FRAME_S
from vocalgrad.signal.analysis import Analysis

CLIP_LEVEL = 0.999
SUMMARISED = (  # dataset-row field, label, how its size is read ("abs": |x|, "ratio": |x - 1|)
    ("confound_loudness_change_db", "loudness change dB", "abs"),
    ("confound_loudness_drift_db", "late-minus-early loudness drift dB", "abs"),
    ("confound_level_slope_change_db", "level-slope change dB", "abs"),
    ("confound_duration_change_ratio", "duration change (ratio − 1)", "ratio"),
    ("confound_f0_change_st", "F0 change st", "abs"),
)
"""The confounds a dataset summary reports, in its column order."""


def summarise_confounds(rows: Iterable[Mapping]) -> dict[str, dict[str, float | int | None]]:
    """Per dimension: how many clips, the share kept as verified, the median size of each
    `SUMMARISED` confound and the largest clipping ratio, over a dataset's rows.

    Parameters
    ----------
    rows : iterable of mapping
        Dataset rows (`vocalgrad.records.DatasetRow`) with their ``confound_*`` fields.

    Returns
    -------
    dict
        Dimension name -> {"clips": int, "verified": share in [0, 1], one entry per
        `SUMMARISED` field (median of its size, in the field's unit; None where no clip has
        it), "max_clipping_ratio": float or None}.
    """
    by_dim: dict[str, list[Mapping]] = {}
    for r in rows:
        by_dim.setdefault(str(r["category"]), []).append(r)
    out: dict[str, dict[str, float | int | None]] = {}
    for name, members in sorted(by_dim.items()):
        entry: dict[str, float | int | None] = {
            "clips": len(members),
            "verified": float(np.mean([bool(r.get("verified")) for r in members])),
        }
        for key, _, how in SUMMARISED:
            vals = np.array(
                [r[key] for r in members if isinstance(r.get(key), (int, float))], float
            )
            vals = np.abs(vals - 1) if how == "ratio" else np.abs(vals)
            entry[key] = float(np.median(vals)) if vals.size else None
        clip = [
            float(r["confound_clipping_ratio"])
            for r in members
            if isinstance(r.get("confound_clipping_ratio"), (int, float))
        ]
        entry["max_clipping_ratio"] = max(clip) if clip else None
        out[name] = entry
    return out


def measure_confounds(
    clip: Analysis, ref: Analysis, clip_mid_s: float | None = None
) -> dict[str, float]:
    """Loudness, loudness drift, level slope, duration, clipping and F0 changes of clip vs
    its source. ``clip_mid_s`` is where the source's speech midpoint lies in the clip
    (moved only by a time warp)."""
    f_clip, f_ref = clip.median_f0, ref.median_f0
    return {
        "loudness_change_db": round(clip.loudness_lufs - ref.loudness_lufs, 3),
        "loudness_drift_db": round(loudness_drift_db(clip, ref, clip_mid_s), 3),
        "level_slope_change_db": round(clip.level_slope_db - ref.level_slope_db, 3),
        "duration_change_ratio": round(len(clip.audio) / len(ref.audio), 4),
        "clipping_ratio": float(np.mean(np.abs(clip.audio) >= CLIP_LEVEL)),
        "peak_dbfs": round(float(20 * np.log10(max(np.max(np.abs(clip.audio)), 1e-9))), 2),
        "f0_change_st": round(float(12 * np.log2(f_clip / f_ref)), 3)
        if f_clip > 0 and f_ref > 0
        else float("nan"),
    }


def loudness_drift_db(clip: Analysis, ref: Analysis, clip_mid_s: float | None = None) -> float:
    """Late-minus-early loudness of the clip minus the same of its source (dB): K-weighted
    energy of the second half of the speech span over the first half. A loudness-neutral
    process keeps it near 0 whatever the direction of the target."""
    mid_ref = (ref.span.onset_s + ref.span.offset_s) / 2
    mid_clip = mid_ref if clip_mid_s is None else clip_mid_s
    return late_minus_early_db(
        clip.k_power, clip.span.onset_s, mid_clip, clip.span.offset_s
    ) - late_minus_early_db(ref.k_power, ref.span.onset_s, mid_ref, ref.span.offset_s)


def late_minus_early_db(
    frame_power: np.ndarray, onset_s: float, mid_s: float, offset_s: float
) -> float:
    """Mean frame energy of [mid, offset] over [onset, mid) in dB (nan if either is empty)."""
    early_frames, late_frames = early_late_frames(len(frame_power), onset_s, mid_s, offset_s)
    early, late = frame_power[early_frames], frame_power[late_frames]
    if not early.size or not late.size or early.mean() <= 0 or late.mean() <= 0:
        return float("nan")
    return float(10 * np.log10(late.mean() / early.mean()))


def early_late_frames(
    n_frames: int, onset_s: float, mid_s: float, offset_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Masks of the 10 ms frames `late_minus_early_db` reads: [onset, mid) and [mid, offset]."""
    t = (np.arange(n_frames) + 0.5) * FRAME_S
    return (t >= onset_s) & (t < mid_s), (t >= mid_s) & (t <= offset_s)


def high_minus_low_db(
    frame_power: np.ndarray,
    onset_s: float,
    offset_s: float,
    course: Callable[[np.ndarray], np.ndarray],
) -> float:
    """Mean frame energy where a course is high over where it is low, in dB (nan if either
    is empty): the frames of [onset, offset] whose course value (at their place in the span,
    0 at onset, 1 at offset) is at least 0.5, over the others. For a contour's hump, the
    loudness of its middle against its ends.

    Parameters
    ----------
    frame_power : ndarray
        Energy per 10 ms frame (`FRAME_S`), e.g. K-weighted.
    onset_s, offset_s : float
        The speech span (s).
    course : callable
        Fractions of the span -> the course's value in [0, 1].

    Returns
    -------
    float
        dB.
    """
    t = (np.arange(len(frame_power)) + 0.5) * FRAME_S
    inside = (t >= onset_s) & (t <= offset_s)
    high = np.zeros(len(t), bool)
    high[inside] = course((t[inside] - onset_s) / (offset_s - onset_s)) >= 0.5
    up, down = frame_power[high], frame_power[inside & ~high]
    if not up.size or not down.size or up.mean() <= 0 or down.mean() <= 0:
        return float("nan")
    return float(10 * np.log10(up.mean() / down.mean()))

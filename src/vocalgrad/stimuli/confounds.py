"""Non-target changes of a rendered clip: what a listener could hear besides the target.

Stored for every clip so a reviewer can check that, say, tremolo did not make the clip
quieter or noise did not move the pitch tracker.
"""

from __future__ import annotations

import numpy as np

from vocalgrad.stimuli.analysis import Analysis

CLIP_LEVEL = 0.999


def measure_confounds(clip: Analysis, ref: Analysis) -> dict[str, float]:
    """Loudness, level slope, duration, clipping and F0 changes of clip vs its source."""
    f_clip, f_ref = clip.median_f0, ref.median_f0
    return {
        "loudness_change_db": round(clip.loudness_lufs - ref.loudness_lufs, 3),
        "level_slope_change_db": round(clip.level_slope_db - ref.level_slope_db, 3),
        "duration_change_ratio": round(len(clip.audio) / len(ref.audio), 4),
        "clipping_ratio": float(np.mean(np.abs(clip.audio) >= CLIP_LEVEL)),
        "peak_dbfs": round(float(20 * np.log10(max(np.max(np.abs(clip.audio)), 1e-9))), 2),
        "f0_change_st": round(float(12 * np.log2(f_clip / f_ref)), 3) if f_clip > 0 and f_ref > 0 else float("nan"),
    }

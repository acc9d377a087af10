"""Order-free cues: statistics of a whole file that do not change when it plays backwards.

No such statistic can measure a direction, so none may predict one: were the clips closed
under time reversal, every one of them would sit at chance. Speech is not symmetric in time
(loud onsets, declination, reverberation that only rings forward), and a process that
carries that asymmetry through leaks the label into them. The shortcut audit therefore
measures them on the whole file, as a listener hears it, with several standard level
measures (never only the one the renderer equalises), and with no per-dimension
exclusions: a cue that cannot tell a direction is never the target.

Every cue is a symmetric function of the file: whole-file summaries, percentiles, how long
the file is audible, and *sums* (never differences) of the two edges' cues.
"""

from __future__ import annotations

import math

import numpy as np

from vocalgrad.audio import BLOCK_S, k_weight, loudness_lufs, weighted_loudness_lufs

FAMILY = "order_free"
EDGE_S = 0.3  # each edge window: the file's first and last 300 ms
MOMENTARY_S = 0.4  # BS.1770 momentary-loudness window
HOP_S = 0.01
PERCENTILES = (10, 50, 90, 95)
# audible: frames within this many dB of the file's loudest momentary level
AUDIBLE_BELOW_MAX_DB = (30.0, 45.0)
ZERO_RUN_S = 0.001
FLOOR_DB = -120.0

NAMES: tuple[str, ...] = (
    "of_duration_s", "of_loudness_lufs", "of_rms_db", "of_peak_dbfs", "of_crest_db",
    "of_centroid_median_hz", "of_centroid_power_hz",
    *(f"of_momentary_p{p}" for p in PERCENTILES), "of_loudness_range_db",
    "of_zero_share",
    *(f"of_audible_s_{int(t)}" for t in AUDIBLE_BELOW_MAX_DB),
    *(f"of_edge_silence_s_{int(t)}" for t in AUDIBLE_BELOW_MAX_DB),
    "of_edge_level_sum_db", "of_edge_zeros_sum", "of_edge_centroid_sum_hz", "of_ild_db",
)  # fmt: skip


def _db(power: float) -> float:
    return max(FLOOR_DB, 10 * math.log10(power)) if power > 0 else FLOOR_DB


def _frame_spectra(x: np.ndarray, sr: int) -> tuple[np.ndarray, np.ndarray]:
    """Power spectra of Hann frames of ~32 ms (hop 50%) and their frequencies."""
    n_fft = 1 << max(6, int(math.ceil(math.log2(0.032 * sr))))
    x = np.asarray(x, dtype=np.float64)
    if len(x) < n_fft:
        x = np.pad(x, (0, n_fft - len(x)))
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[:: n_fft // 2]
    return np.abs(np.fft.rfft(frames * np.hanning(n_fft), axis=1)) ** 2, np.fft.rfftfreq(
        n_fft, 1 / sr
    )


def _centroids(x: np.ndarray, sr: int) -> tuple[float, float]:
    """(median of frame centroids, power-weighted mean centroid); 0 for silence."""
    power, freqs = _frame_spectra(x, sr)
    total = power.sum(axis=1)
    ok = total > 1e-20
    if not ok.any():
        return 0.0, 0.0
    frame = power[ok] @ freqs / total[ok]
    return float(np.median(frame)), float(power.sum(axis=0) @ freqs / total.sum())


def zero_share(x: np.ndarray, sr: int) -> float:
    """Share of samples in digital silence: runs of >= 1 ms (ZERO_RUN_S) that a 16-bit file
    holds as exact zeros. A lone zero amid a low room tone is one bin of the amplitude
    histogram (how much of the clip is quiet, which on noise is the target), not the silence
    no listener hears."""
    if not x.size:
        return 1.0
    zero = np.concatenate([[False], np.round(x.astype(np.float64) * 32768) == 0, [False]])
    edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
    lengths = edges[1::2] - edges[0::2]
    return float(lengths[lengths >= max(1, round(ZERO_RUN_S * sr))].sum() / x.size)


def momentary_db(audio: np.ndarray, sr: int, weighted: np.ndarray | None = None) -> np.ndarray:
    """BS.1770 momentary loudness (K-weighted, 400 ms windows) every 10 ms, in LUFS. Windows
    run from the file's start to its end at every hop, so the reversed file has the same
    windows up to one hop. `weighted`: the file's `k_weight`, when the caller has it."""
    power = (k_weight(audio, sr) if weighted is None else weighted) ** 2
    win, hop = max(1, int(round(MOMENTARY_S * sr))), max(1, int(round(HOP_S * sr)))
    if len(power) < win:
        power = np.pad(power, (0, win - len(power)))
    energy = np.concatenate([[0.0], np.cumsum(power)])
    starts = np.arange(0, len(power) - win + 1, hop)
    mean = (energy[starts + win] - energy[starts]) / win
    with np.errstate(divide="ignore"):
        return np.maximum(FLOOR_DB, -0.691 + 10 * np.log10(mean))


def _frame_levels(audio: np.ndarray, sr: int) -> np.ndarray:
    """RMS level (dB) of 10 ms frames, laid from the start; the reversed file's frames differ
    by under one frame at each end."""
    hop = max(1, int(round(HOP_S * sr)))
    n = len(audio) // hop
    if n == 0:
        return np.array([FLOOR_DB])
    frames = audio[: n * hop].astype(np.float64).reshape(n, hop)
    with np.errstate(divide="ignore"):
        return np.maximum(FLOOR_DB, 10 * np.log10(np.mean(frames**2, axis=1)))


def order_free_cues(audio: np.ndarray, sr: int) -> dict[str, float]:
    """The order-free cues of one file (`NAMES`), from its samples alone (no speech span):
    a two-channel file gives its level difference between the ears and every other cue
    from its mono downmix. Each cue is the mean of its value on the file and on the file
    played backwards, so it is order-free exactly, not only up to the frame grids and the
    causal K-weighting filter."""
    audio = np.asarray(audio, dtype=np.float32)
    both = (_one_way(audio, sr), _one_way(np.ascontiguousarray(audio[::-1]), sr))
    return {k: float((both[0][k] + both[1][k]) / 2) for k in NAMES}


def _one_way(audio: np.ndarray, sr: int) -> dict[str, float]:
    ears = audio if audio.ndim == 2 else None
    mono = np.ascontiguousarray(audio.mean(axis=1) if ears is not None else audio).astype(
        np.float64
    )
    duration = len(mono) / sr
    power = float(np.mean(mono**2)) if mono.size else 0.0
    peak = float(np.max(np.abs(mono))) if mono.size else 0.0
    weighted = k_weight(mono, sr)  # filtered once for the loudness and the momentary levels
    lufs = (
        weighted_loudness_lufs(weighted, sr)
        if len(mono) > int(BLOCK_S * sr)
        else loudness_lufs(mono, sr)  # zero-padded to one block before it is filtered
    )
    momentary = momentary_db(mono, sr, weighted)
    pct = {p: float(np.percentile(momentary, p)) for p in PERCENTILES}
    median_c, power_c = _centroids(mono, sr)
    frames = _frame_levels(mono, sr)
    out = {
        "of_duration_s": duration,
        "of_loudness_lufs": max(FLOOR_DB, lufs) if math.isfinite(lufs) else FLOOR_DB,
        "of_rms_db": _db(power),
        "of_peak_dbfs": _db(peak**2),
        "of_crest_db": _db(peak**2) - _db(power),
        "of_centroid_median_hz": median_c,
        "of_centroid_power_hz": power_c,
        **{f"of_momentary_p{p}": v for p, v in pct.items()},
        "of_loudness_range_db": pct[95] - pct[10],
        "of_zero_share": zero_share(mono, sr),
    }
    hop = HOP_S
    for below in AUDIBLE_BELOW_MAX_DB:
        audible = frames > frames.max() - below
        out[f"of_audible_s_{int(below)}"] = float(audible.sum() * hop)
        idx = np.flatnonzero(audible)
        total = len(frames) * hop
        out[f"of_edge_silence_s_{int(below)}"] = (
            float(total - (idx[-1] - idx[0] + 1) * hop) if idx.size else total
        )
    n_edge = max(1, min(len(mono), int(round(EDGE_S * sr))))
    first, last = mono[:n_edge], mono[len(mono) - n_edge :]
    out["of_edge_level_sum_db"] = _db(float(np.mean(first**2))) + _db(float(np.mean(last**2)))
    out["of_edge_zeros_sum"] = zero_share(first, sr) + zero_share(last, sr)
    out["of_edge_centroid_sum_hz"] = _centroids(first, sr)[0] + _centroids(last, sr)[0]
    out["of_ild_db"] = (
        0.0
        if ears is None
        else (
            _db(float(np.mean(ears[:, 1].astype(np.float64) ** 2)))
            - _db(float(np.mean(ears[:, 0].astype(np.float64) ** 2)))
        )
    )
    return out

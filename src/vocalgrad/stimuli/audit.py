"""Shortcut audit: can a label be read off cues that are not the target's course over time?

The benchmark promises that a listener who answers right has heard the gradual change. If
increase clips were, say, louder overall, longer, or had more leading silence than their
decrease twins, a listener could answer right without following the change at all. The
audit measures direction-invariant cues of every clip (whole-clip level, duration, spectral
centroid, F0, file size, digital silence, and what the first and last 300 ms look like),
trains simple classifiers on the train split and reports how well they predict the label on
the test split. A clean benchmark keeps them at chance.

Some cue families measure the target itself on some dimensions (the level of the last
300 ms *is* the volume at the end): each dimension declares those in
`DimensionSpec.target_cues`, and they are left out of its audit.

The order-free family (`vocalgrad.stimuli.order_free`: whole-file statistics that playing the
clip backwards leaves as they are) is audited apart, on every dimension and format, with no
exclusions: none of its cues can measure a direction, so none is a target cue, and the
renderer's equalised statistic is only one of its several level measures. It is gated for
gradual and comparison items. Beside it the audit reports the one-end observer: the
dimension's own measure at one end of the clip, which shows how much of a benchmark an
endpoint strategy answers without comparing over time (reported, not gated).
"""

from __future__ import annotations

import io
import json
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
from threadpoolctl import threadpool_limits

from vocalgrad.audio import SpeechSpan, load_audio, loudness_lufs, speech_span
from vocalgrad.dataset import clean, dumps, load_rows
from vocalgrad.records import DIRECTIONS, LABELS, row_format
from vocalgrad.signal.analysis import Analysis
from vocalgrad.stats import (
    MIN_SOURCES,
    NO_CI_TEXT,
    ClusterWeightedAUC,
    cluster_ids,
    group_rng,
    weighted_ci,
)
from vocalgrad.stimuli.order_free import FAMILY as ORDER_FREE
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES
from vocalgrad.stimuli.order_free import order_free_cues

FAMILIES = ("global", "edge_silence", "edge_level", "edge_spectrum", "edge_zeros")
CUE_NAMES: dict[str, tuple[str, ...]] = {
    "global": (
        "global_duration_s", "global_loudness_lufs", "global_peak_dbfs", "global_centroid_hz",
        "global_f0_hz", "global_file_bytes", "global_zero_share", "global_ild_db",
    ),
    "edge_silence": ("edge_silence_lead_s", "edge_silence_trail_s"),
    "edge_level": ("edge_level_first_db", "edge_level_last_db"),
    "edge_spectrum": ("edge_spectrum_first_hz", "edge_spectrum_last_hz"),
    "edge_zeros": ("edge_zeros_first", "edge_zeros_last"),
    # comparison items: where the parts and the gap lie, and the level of the gap. The silence
    # a detector finds around each part's speech is not audited: where it ends follows the
    # target (the last syllable's level; measured: 0.77-1.0 on vibration, volume, speed)
    "parts": ("parts_first_s", "parts_gap_s", "parts_second_s", "parts_gap_db"),
    # recognition items: the clip's length alone
    "duration": ("global_duration_s",),
    # statistics of the whole file that playing it backwards leaves as they are: audited apart,
    # on every dimension and format, never a target cue (`vocalgrad.stimuli.order_free`)
    ORDER_FREE: ORDER_FREE_NAMES,
}  # fmt: skip
EDGE_FAMILIES = tuple(f for f in FAMILIES if f.startswith("edge_"))
# Cue families audited per question format. A recognition clip holds one value, so every
# whole-clip summary (level, centroid, F0, size) measures the target: only its length and
# its edges are audited. A comparison item's whole-file summaries hold both parts in either
# order, and its part layout must tell nothing.
FORMAT_FAMILIES = {
    "gradual": FAMILIES,
    "comparison": (*FAMILIES, "parts"),
    "recognition": ("duration", *EDGE_FAMILIES),
}
# A held rate sets how long the speech of a part lasts, so what pads it (comparison: what
# follows the second part's speech; recognition: the clip's length).
WARP_TARGET_FAMILIES = {"gradual": (), "comparison": EDGE_FAMILIES, "recognition": ("duration",)}

MAX_SHORTCUT_ACCURACY = 0.60  # direction accuracy a cue classifier may reach on test
MAX_CONSTANT_AUC = 0.65  # constant-vs-changing AUC it may reach
# Formats whose order-free accuracy is gated. A recognition clip holds one value at one end of
# the change, and which end is the question: any summary of the file measures it, so there the
# family is reported, not gated (a format's definition, the same for every dimension).
ORDER_FREE_GATED = ("gradual", "comparison")
CUES_VERSION = 8  # bump when clip_cues changes: cached cues of another version are recomputed
EDGE_S = 0.3
EDGE_GUARD_S = 0.1  # edge windows stop this far from the speech: a detector's onset is a threshold
# crossing, and the first phoneme's rise (processed like the rest of the speech) begins before it
ZERO_RUN_S = 0.001  # exact zeros this long or longer are digital silence
FLOOR_DB = -120.0
N_BOOT = 2000
SEED = 0
CACHE_DIR = ".audit"
CACHE_FILE = "cues.jsonl"
REPORT_FILE = "audit.json"
_BATCH = 128  # clips per appended cache batch


# ---------------------------------------------------------------------------------------
# Cues of one clip


def _centroid_hz(x: np.ndarray, sr: int) -> float:
    """Median of the per-frame spectral centroids over Hann frames of ~32 ms (hop 50%); 0 for
    silence. Each frame counts once, whatever its level: a power-weighted centroid reads the
    spectrum of the loudest stretch, which on a volume ramp is *where* the loud part is (the
    target), not the clip's overall spectral balance."""
    n_fft = 1 << max(6, int(math.ceil(math.log2(0.032 * sr))))
    x = np.asarray(x, dtype=np.float64)
    if len(x) < n_fft:
        x = np.pad(x, (0, n_fft - len(x)))
    hop = n_fft // 2
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop]
    power = np.abs(np.fft.rfft(frames * np.hanning(n_fft), axis=1)) ** 2
    total = power.sum(axis=1)
    ok = total > 1e-20
    if not ok.any():
        return 0.0
    centroids = power[ok] @ np.fft.rfftfreq(n_fft, 1 / sr) / total[ok]
    return float(np.median(centroids))


def _rms_db(x: np.ndarray) -> float:
    if x.size == 0:
        return FLOOR_DB
    rms = float(np.sqrt(np.mean(np.square(x, dtype=np.float64))))
    return max(FLOOR_DB, 20 * math.log10(rms)) if rms > 0 else FLOOR_DB


def _flac_bytes(audio: np.ndarray, sr: int) -> int:
    buffer = io.BytesIO()
    sf.write(buffer, audio, sr, format="FLAC", subtype="PCM_16")
    return len(buffer.getvalue())


def clip_cues(audio: np.ndarray, sr: int, span: tuple[float, float] | None = None,
              parts: Sequence[Sequence[float]] | None = None) -> dict[str, float]:
    """Direction-invariant cues of one clip, each named `<family>_<cue>` (see CUE_NAMES).

    None of them follows the course of the clip over time: they summarise the clip, or what
    lies before and after the speech. With the speech span (onset, offset) in seconds, the
    level, spectrum, F0, size and zero cues summarise the speech span, and the edge cues the
    silences in the first and last 300 ms only: an edge window that reached into speech
    would measure the target itself at the start or end (recordings trimmed close to the
    speech have no silence there; those cues are then NaN), stopping EDGE_GUARD_S short of the
    speech, where the first and last phonemes fade in and out. Without a span, the whole clip
    and its first and last 300 ms. A two-part item (`parts`) summarises the whole file in both
    orders of its parts. NaN cues are filled with the training median. A
    two-channel clip adds its whole-clip level difference between the ears (0 for mono)
    and gives every other cue from its mono downmix."""
    audio = np.asarray(audio, dtype=np.float32)
    ears = audio if audio.ndim == 2 else None
    audio = np.ascontiguousarray(audio.mean(axis=1) if ears is not None else audio)
    duration = len(audio) / sr
    detected = speech_span(audio, sr)
    n_edge = max(1, min(len(audio), int(round(EDGE_S * sr))))
    if span is None:
        body, first, last = audio, audio[:n_edge], audio[len(audio) - n_edge:]
    else:
        onset, offset = (int(round(t * sr)) for t in span)
        onset, offset = min(max(onset, 0), len(audio)), min(max(offset, onset), len(audio))
        body = audio[onset:offset] if offset - onset > sr // 10 else audio
        guard = int(round(EDGE_GUARD_S * sr))
        first = audio[:min(max(onset - guard, 0), n_edge)]
        last = audio[max(offset + guard, len(audio) - n_edge):]
    if parts:  # both parts whole, in both orders (`_both_orders`)
        summary = _both_orders(audio, sr, parts, detected)
    else:
        summary = _summary(body, audio, sr, detected)
    return {**(part_cues(audio, sr, parts) if parts else {}),
        "global_duration_s": duration,
        **summary,
        "global_ild_db": 0.0 if ears is None else _rms_db(ears[:, 1]) - _rms_db(ears[:, 0]),
        "edge_silence_lead_s": float(detected.onset_s),
        "edge_silence_trail_s": float(max(0.0, duration - detected.offset_s)),
        "edge_level_first_db": _edge(first, sr, _rms_db),
        "edge_level_last_db": _edge(last, sr, _rms_db),
        "edge_spectrum_first_hz": _edge(first, sr, lambda x: _centroid_hz(x, sr)),
        "edge_spectrum_last_hz": _edge(last, sr, lambda x: _centroid_hz(x, sr)),
        "edge_zeros_first": _edge(first, sr, lambda x: _zero_share(x, sr)),
        "edge_zeros_last": _edge(last, sr, lambda x: _zero_share(x, sr)),
        **order_free_cues(ears if ears is not None else audio, sr),
    }


def _summary(body: np.ndarray, audio: np.ndarray, sr: int, detected: SpeechSpan) -> dict[str, float]:
    """The whole-clip summaries: level, peak, spectrum, F0, size and digital silence."""
    peak = float(np.max(np.abs(body))) if body.size else 0.0
    lufs = loudness_lufs(body, sr)
    return {
        "global_loudness_lufs": max(FLOOR_DB, lufs) if math.isfinite(lufs) else FLOOR_DB,
        "global_peak_dbfs": max(FLOOR_DB, 20 * math.log10(peak)) if peak > 0 else FLOOR_DB,
        "global_centroid_hz": _centroid_hz(body, sr),
        "global_f0_hz": Analysis(audio, sr, span=detected).median_f0,
        "global_file_bytes": float(_flac_bytes(body, sr)),
        "global_zero_share": _zero_share(body, sr),
    }


def _both_orders(audio: np.ndarray, sr: int, parts: Sequence[Sequence[float]], detected: SpeechSpan) -> dict[str, float]:
    """The summaries of a two-part item, averaged over the file and the file with its parts
    swapped, so that no summary reads which part comes first. The whole file, not the speech
    spans: a first part's tail and a second's lead would differ with the order (a reverb
    tail, a held rate). Summaries are not quite order-free on their own: BS.1770's 100 ms
    block grid starts at the file's start, and on the recordings' distance items, exact swaps
    of each other, it made the file with the near part first 0.28 dB quieter in 90% of
    168 twins (the sign turns with a shift of the grid), which a classifier read (0.58)."""
    (a0, a1), (b0, b1) = ((int(round(x * sr)) for x in part) for part in parts)
    swapped = np.concatenate([audio[:a0], audio[b0:b1], audio[a1:b0], audio[a0:a1], audio[b1:]])
    both = [_summary(audio, audio, sr, detected), _summary(swapped, swapped, sr, speech_span(swapped, sr))]
    return {k: float(np.mean([b[k] for b in both])) for k in both[0]}


def part_cues(audio: np.ndarray, sr: int, parts: Sequence[Sequence[float]]) -> dict[str, float]:
    """Layout cues of a two-part item (`parts`: start and end of each part, in seconds):
    the parts' and the gap's lengths and the gap's level."""
    (a0, a1), (b0, b1) = parts
    gap = audio[int(round(a1 * sr)):int(round(b0 * sr))]
    return {"parts_first_s": a1 - a0, "parts_gap_s": b0 - a1, "parts_second_s": b1 - b0, "parts_gap_db": _rms_db(gap)}


def row_parts(row: Mapping) -> list[list[float]] | None:
    """A comparison row's part bounds in seconds, if any."""
    bounds = row.get("part_bounds")
    return [[a / row["sample_rate"], b / row["sample_rate"]] for a, b in bounds] if bounds else None


def _zero_share(x: np.ndarray, sr: int) -> float:
    """Share of samples in digital silence: runs of >= 1 ms that a 16-bit file holds as exact
    zeros. A lone zero amid a low room tone is one bin of the amplitude histogram (how much
    of the clip is quiet, which on noise is the target), not the silence no listener hears."""
    if not x.size:
        return 1.0
    zero = np.concatenate([[False], np.round(x.astype(np.float64) * 32768) == 0, [False]])
    edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
    lengths = edges[1::2] - edges[0::2]
    return float(lengths[lengths >= max(1, round(ZERO_RUN_S * sr))].sum() / x.size)


def _edge(x: np.ndarray, sr: int, cue: Callable[[np.ndarray], float]) -> float:
    """A cue of an edge window, NaN where the window holds under 20 ms of silence."""
    return cue(x) if len(x) >= 0.02 * sr else float("nan")


def row_span(row: Mapping) -> tuple[float, float] | None:
    """The speech span a dataset row records, if any."""
    onset, offset = row.get("speech_onset_s"), row.get("speech_offset_s")
    return None if onset is None or offset is None else (float(onset), float(offset))


def target_cue_names(category: str, fmt: str = "gradual") -> set[str]:
    """Cues that measure the target on `category` in a question format, left out of its
    audit: `SPEC.target_cues` (whole families or single cues), and what pads held speech
    where the dimension warps time."""
    from vocalgrad.dimensions import get

    dim = get(category)
    declared = set(dim.SPEC.target_cues)
    if dim.SPEC.warps_time:
        declared.update(WARP_TARGET_FAMILIES[fmt])
    names = {n for f in CUE_NAMES if f in declared for n in CUE_NAMES[f]} | (declared - set(CUE_NAMES))
    return names - {ORDER_FREE, *ORDER_FREE_NAMES}  # never a target: no order-free cue reads a direction


def rows_format(rows: Iterable[Mapping]) -> str:
    """The one question format of a set of rows (old rows are gradual)."""
    formats = {row_format(r) for r in rows}
    if len(formats) > 1:
        raise ValueError(f"rows of several question formats ({', '.join(sorted(formats))}) audited together")
    return formats.pop() if formats else "gradual"


def allowed_families(category: str, fmt: str = "gradual") -> tuple[str, ...]:
    """Cue families the audit of `category` uses in a format: those with a cue that is not a
    target cue."""
    excluded = target_cue_names(category, fmt)
    return tuple(f for f in FORMAT_FAMILIES[fmt] if any(n not in excluded for n in CUE_NAMES[f]))


def feature_names(families: Iterable[str], category: str | None = None, fmt: str = "gradual") -> list[str]:
    """The cues of `families`, less the target cues of `category` (in `fmt`) if one is given."""
    excluded = target_cue_names(category, fmt) if category else set()
    return [name for family in families for name in CUE_NAMES[family] if name not in excluded]


# ---------------------------------------------------------------------------------------
# Cue cache


def _cache_key(row: Mapping) -> str:
    return f"{row['item_id']}|{row.get('audio_sha256') or ''}"


def _read_cache(path: Path) -> tuple[dict[str, dict[str, float]], int, bool]:
    """(key -> cues, number of lines, whether the file needs rewriting: torn or stale lines)."""
    if not path.is_file():
        return {}, 0, False
    cues: dict[str, dict[str, float]] = {}
    text = path.read_text(errors="replace")
    dirty = bool(text) and not text.endswith("\n")
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        try:
            entry = json.loads(line)
            if entry.get("v") != CUES_VERSION:
                raise ValueError("another cue version")
            cues[entry["key"]] = {k: (float("nan") if v is None else float(v)) for k, v in entry["cues"].items()}
        except (ValueError, KeyError, TypeError, AttributeError):  # torn, foreign or stale line
            dirty = True
    return cues, len(lines), dirty or len(lines) != len(cues)


def _write_cache(path: Path, entries: Mapping[str, Mapping[str, float]]) -> None:
    """Replace the cache atomically (temporary file + rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as f:
        for key, cues in entries.items():
            f.write(dumps({"key": key, "v": CUES_VERSION, "cues": dict(cues)}) + "\n")
    os.replace(tmp, path)


def _append_cache(path: Path, entries: Mapping[str, Mapping[str, float]]) -> None:
    """Append one batch in a single write (a killed run leaves at most a torn last line,
    which the next read skips and rewrites)."""
    text = "".join(dumps({"key": k, "v": CUES_VERSION, "cues": dict(c)}) + "\n" for k, c in entries.items())
    with path.open("a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _try(write: Callable[[Path, Mapping], None], path: Path, entries: Mapping) -> bool:
    """Write to the cache if the dataset folder allows it (a read-only release does not:
    the cues are then measured on every run)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path, entries)
        return True
    except OSError as err:
        warnings.warn(f"{path}: cannot write the cue cache ({err}); cues will be remeasured next time",
                      stacklevel=3)
        return False


def _init_worker() -> None:
    threadpool_limits(1)


def _cues_of_file(job: tuple[str, tuple[float, float] | None, list | None]) -> dict[str, float]:
    path, span, parts = job
    audio, sr = load_audio(path, mono=False)
    return clip_cues(audio, sr, span, parts)


def dataset_cues(
    root: str | Path,
    rows: Sequence[Mapping] | None = None,
    *,
    cache: bool = True,
    workers: int = 1,
    compact: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, dict[str, float]]:
    """item_id -> cues for `rows` (default: every clip of the dataset at `root`).

    Cues are cached in `root/.audit/cues.jsonl`, keyed by item id and audio sha256, and the
    cache is appended batch by batch, so a rerun reads instead of measuring and an
    interrupted run resumes. `compact` drops cached entries of clips not in `rows` (only
    sensible when `rows` is the whole dataset)."""
    root = Path(root)
    rows = list(load_rows(root) if rows is None else rows)
    path = root / CACHE_DIR / CACHE_FILE
    cached, _, dirty = _read_cache(path) if cache else ({}, 0, False)
    wanted = {_cache_key(r) for r in rows}
    writable = cache
    if cache and (dirty or (compact and any(k not in wanted for k in cached))):
        if compact:
            cached = {k: v for k, v in cached.items() if k in wanted}
        writable = _try(_write_cache, path, cached)
    todo: dict[str, tuple[str, tuple[float, float] | None, list | None]] = {}
    for r in rows:
        key = _cache_key(r)
        if key not in cached:
            todo.setdefault(key, (r["path"], row_span(r), row_parts(r)))
    if todo:
        keys = list(todo)
        pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker) if workers > 1 else None
        try:
            for begin in range(0, len(keys), _BATCH):
                batch = keys[begin:begin + _BATCH]
                jobs = [todo[k] for k in batch]
                if pool is None:
                    with threadpool_limits(1):
                        measured = [_cues_of_file(job) for job in jobs]
                else:
                    measured = list(pool.map(_cues_of_file, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
                fresh = dict(zip(batch, measured, strict=True))
                cached.update(fresh)
                if writable:
                    writable = _try(_append_cache, path, fresh)
                if progress is not None:
                    progress(begin + len(batch), len(keys))
        finally:
            if pool is not None:
                pool.shutdown()
    return {r["item_id"]: cached[_cache_key(r)] for r in rows}


# ---------------------------------------------------------------------------------------
# Classifiers


def _matrix(rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    x = np.array([[cues[r["item_id"]].get(n, np.nan) for n in names] for r in rows], dtype=float)
    return x.reshape(len(rows), len(names))


def fill_values(x: np.ndarray) -> np.ndarray:
    """Per-column median of the finite training values (0 where a column has none)."""
    out = np.zeros(x.shape[1])
    for j in range(x.shape[1]):
        finite = x[:, j][np.isfinite(x[:, j])]
        out[j] = float(np.median(finite)) if finite.size else 0.0
    return out


def impute(x: np.ndarray, fill: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(x), x, fill[None, :])


def make_classifiers() -> dict:
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return {
        "lr": make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000)),
        "hgb": HistGradientBoostingClassifier(max_iter=100, random_state=0),
    }


def _fit_predict(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, which: Sequence[str]) -> dict[str, np.ndarray]:
    """P(y = 1) on the test rows for each classifier (the training base rate when the
    training labels have one class only)."""
    fill = fill_values(x_train)
    x_train, x_test = impute(x_train, fill), impute(x_test, fill)
    out = {}
    for name, clf in make_classifiers().items():
        if name not in which:
            continue
        if len(np.unique(y_train)) < 2:
            out[name] = np.full(len(x_test), float(np.mean(y_train)) if len(y_train) else 0.5)
            continue
        clf.fit(x_train, y_train)
        out[name] = clf.predict_proba(x_test)[:, 1]
    return out


@dataclass(frozen=True)
class DirectionModel:
    """The audit's logistic regression for one category, fitted on changing clips' cues:
    what `baseline:shortcut` answers with."""

    names: list[str]
    fill: np.ndarray
    model: object  # a fitted classifier, or the base rate when training had one label only

    def p_increase(self, cues: Mapping[str, float]) -> float:
        if isinstance(self.model, float):
            return self.model
        x = impute(np.array([[cues.get(n, np.nan) for n in self.names]], dtype=float), self.fill)
        return float(self.model.predict_proba(x)[0, 1])  # type: ignore[attr-defined]


def fit_direction_model(category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]) -> DirectionModel:
    """Fit the direction classifier on the changing clips of `category` among `rows`."""
    members = _sort_rows(r for r in rows if r["category"] == category and r["direction"] in LABELS)
    fmt = rows_format(members)
    names = feature_names(allowed_families(category, fmt), category, fmt)
    x = _matrix(members, cues, names)
    y = np.array([_is_increase(r) for r in members])
    fill = fill_values(x)
    if len(np.unique(y)) < 2:
        return DirectionModel(names, fill, float(y.mean()) if len(y) else 0.5)
    return DirectionModel(names, fill, make_classifiers()["lr"].fit(impute(x, fill), y))


def _n_groups(rows: Sequence[Mapping]) -> int:
    return len({r["source_id"] for r in rows})


def _predictions(
    train: Sequence[Mapping], test: Sequence[Mapping], label: Callable[[Mapping], int],
    cues: Mapping[str, Mapping[str, float]], names: Sequence[str], which: Sequence[str] = ("lr", "hgb"),
) -> tuple[str, dict[str, np.ndarray]] | None:
    """(protocol, classifier -> P(label = 1) per test row): train->test when the train split
    has two sources and both labels, else grouped cross-validation by source on test; None
    when neither is possible (fewer than two test sources)."""
    y_test = np.array([label(r) for r in test])
    y_train = np.array([label(r) for r in train])
    if _n_groups(train) >= 2 and len(np.unique(y_train)) == 2:
        return "train->test", _fit_predict(_matrix(train, cues, names), y_train, _matrix(test, cues, names), which)
    if _n_groups(test) < 2:
        return None
    from sklearn.model_selection import GroupKFold

    x = _matrix(test, cues, names)
    groups = np.array([str(r["source_id"]) for r in test])
    probs = {name: np.full(len(test), np.nan) for name in which}
    for fit_idx, held_idx in GroupKFold(n_splits=min(5, _n_groups(test))).split(x, y_test, groups):
        fold = _fit_predict(x[fit_idx], y_test[fit_idx], x[held_idx], which)
        for name in which:
            probs[name][held_idx] = fold[name]
    return "grouped-cv", probs


def _cross_fit(
    train: Sequence[Mapping], test: Sequence[Mapping], label: Callable[[Mapping], int],
    cues: Mapping[str, Mapping[str, float]], names: Sequence[str],
) -> tuple[str, list[Mapping], dict[str, np.ndarray]] | None:
    """(protocol, scored rows, classifier -> P(label = 1) per scored row): fitted on train to
    score test *and* on test to score train when both splits have two sources and both labels
    (every clip scored by a model that never saw its source), else `_predictions` on test.

    For the constant test: a build has one constant per source, so a demo build's test split
    holds 8. Scored on those alone, the AUC of clips with no leak at all spread so wide that
    0.65 was its 95th percentile (40 label permutations of an 8 + 8 build), and one of nine
    categories failed by chance about every third build; both splits double the positives."""
    y_train, y_test = [label(r) for r in train], [label(r) for r in test]
    if _n_groups(train) >= 2 and _n_groups(test) >= 2 and len(set(y_train)) == 2 and len(set(y_test)) == 2:
        forward = _fit_predict(_matrix(train, cues, names), np.array(y_train), _matrix(test, cues, names), ("lr", "hgb"))
        backward = _fit_predict(_matrix(test, cues, names), np.array(y_test), _matrix(train, cues, names), ("lr", "hgb"))
        return "cross-fit", [*test, *train], {k: np.concatenate([forward[k], backward[k]]) for k in forward}
    predicted = _predictions(train, test, label, cues, names)
    return None if predicted is None else (predicted[0], list(test), predicted[1])


def _accuracy(correct: np.ndarray, rows: Sequence[Mapping], key: str) -> dict[str, float]:
    """Accuracy with a 95% CI clustered by source (the metrics module's rule; seeded by key)."""
    cid = cluster_ids(rows, "source_id")
    n_clusters = int(cid.max()) + 1
    k = np.bincount(cid, weights=correct.astype(float), minlength=n_clusters)
    n = np.bincount(cid, minlength=n_clusters).astype(float)

    def accuracy(w: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (w @ k) / (w @ n)

    point = float(correct.mean())
    lo, hi, method = weighted_ci(accuracy, point, n_clusters, group_rng(SEED, key), N_BOOT)
    return {"accuracy": point, "lo": lo, "hi": hi, "n": int(len(correct)), "n_clusters": n_clusters,
            "ci_method": method}


def _auc(scores: np.ndarray, positive: np.ndarray, rows: Sequence[Mapping], key: str) -> dict[str, float]:
    from sklearn.metrics import roc_auc_score

    cid = cluster_ids(rows, "source_id")
    n_clusters = int(cid.max()) + 1
    point = float(roc_auc_score(positive, scores))
    lo, hi, method = weighted_ci(ClusterWeightedAUC(scores, positive, cid, n_clusters), point, n_clusters,
                                 group_rng(SEED, key), N_BOOT)
    return {"auc": point, "lo": lo, "hi": hi, "n": int(len(scores)), "n_clusters": n_clusters,
            "ci_method": method}


def _is_increase(row: Mapping) -> int:
    return int(row["direction"] == "increase")


def _is_constant(row: Mapping) -> int:
    return int(row["direction"] == "constant")


def _sort_rows(rows: Iterable[Mapping]) -> list[Mapping]:
    return sorted(rows, key=lambda r: str(r["item_id"]))


def order_free_report(category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]) -> dict:
    """The order-free family of one category (`vocalgrad.stimuli.order_free`): direction
    predicted from the whole file's order-free cues alone (classifiers as for the other
    families, train -> test), and each cue's AUC for "increase" on test. No cue is left out
    on any dimension: none can measure a direction. Returns {} when too small to audit."""
    names = list(ORDER_FREE_NAMES)
    train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in LABELS)
    test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in LABELS)
    y_test = np.array([_is_increase(r) for r in test])
    predicted = _predictions(train, test, _is_increase, cues, names) if len(np.unique(y_test)) == 2 else None
    if predicted is None:
        return {}
    protocol, probs = predicted
    direction = {name: _accuracy((p > 0.5).astype(int) == y_test, test, f"{category}|order_free|{name}")
                 for name, p in probs.items()}
    best = max(direction, key=lambda name: direction[name]["accuracy"])
    x = _matrix(test, cues, names)
    per_cue = {}
    for j, name in enumerate(names):
        column = x[:, j]
        if np.isfinite(column).all() and np.ptp(column) > 0:
            per_cue[name] = _auc(column, y_test.astype(bool), test, f"{category}|order_free_cue|{name}")
    top = sorted(per_cue, key=lambda n: -abs(per_cue[n]["auc"] - 0.5))
    return {
        "protocol": protocol, "features": names, "direction": direction, "classifier": best,
        "accuracy": direction[best]["accuracy"], "ci": [direction[best]["lo"], direction[best]["hi"]],
        "per_cue_auc": {n: per_cue[n] for n in top},
    }


def audit_category(
    category: str, rows: Sequence[Mapping], cues: Mapping[str, Mapping[str, float]]
) -> dict:
    """The audit of one category: see `audit_dataset`."""
    fmt = rows_format(rows)
    families = allowed_families(category, fmt)
    cue_names = target_cue_names(category, fmt)
    excluded = [f for f in FORMAT_FAMILIES[fmt] if f not in families] + [
        n for f in families for n in CUE_NAMES[f] if n in cue_names]
    names = feature_names(families, category, fmt)
    train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in LABELS)
    test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in LABELS)
    out: dict = {
        "category": category,
        "families": list(families),
        "excluded_target_cues": excluded,
        "features": names,
        "n_items_test": len(test),
        "n_sources_test": _n_groups(test),
        "n_items_train": len(train),
        "n_sources_train": _n_groups(train),
        "protocol": None,
        "direction": None,
        "shortcut_accuracy": None,
        "shortcut_ci": None,
        "shortcut_classifier": None,
        "by_family_set": {},
        "per_curve": {},
        "worst_curve": None,
        "constant": None,
        "constant_auc": None,
        "constant_ci": None,
        "passes": None,
        "reasons": [],
        "order_free": order_free_report(category, rows, cues) or None,
        "order_free_gated": fmt in ORDER_FREE_GATED,
        "one_end": one_end_report(category, rows) or None,
    }
    y_test = np.array([_is_increase(r) for r in test])
    predicted = _predictions(train, test, _is_increase, cues, names) if len(np.unique(y_test)) == 2 else None
    if predicted is None:
        out["reasons"].append("too few changing clips or sources to audit")
        return out
    protocol, probs = predicted
    out["protocol"] = protocol
    direction = {
        name: _accuracy((p > 0.5).astype(int) == y_test, test, f"{category}|direction|{name}")
        for name, p in probs.items()
    }
    out["direction"] = direction
    best = max(direction, key=lambda name: direction[name]["accuracy"])
    out["shortcut_accuracy"] = direction[best]["accuracy"]
    out["shortcut_ci"] = [direction[best]["lo"], direction[best]["hi"]]
    out["shortcut_classifier"] = best

    edge = [f for f in families if f in EDGE_FAMILIES]
    for label, subset in (("global", [f for f in families if f == "global"]), ("edge", edge), ("all", list(families))):
        if not subset:
            out["by_family_set"][label] = None
            continue
        _, sub = _predictions(train, test, _is_increase, cues, feature_names(subset, category, fmt), which=("lr",))  # type: ignore[misc]
        acc = _accuracy((sub["lr"] > 0.5).astype(int) == y_test, test, f"{category}|family|{label}")
        out["by_family_set"][label] = {**acc, "families": subset}

    curves: dict[str, list[int]] = {}
    for i, r in enumerate(test):
        curves.setdefault(str(r.get("curve")), []).append(i)
    for curve, idx in sorted(curves.items()):
        ix = np.array(idx)
        out["per_curve"][curve] = {
            "n": len(idx),
            **{name: float(((p[ix] > 0.5).astype(int) == y_test[ix]).mean()) for name, p in probs.items()},
        }
    worst = max(out["per_curve"].items(), key=lambda kv: max(kv[1]["lr"], kv[1]["hgb"]))
    out["worst_curve"] = {"curve": worst[0], "accuracy": max(worst[1]["lr"], worst[1]["hgb"]), "n": worst[1]["n"]}

    constant_test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in DIRECTIONS)
    constant_train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in DIRECTIONS)
    c_predicted = None
    if any(map(_is_constant, constant_test)) and not all(map(_is_constant, constant_test)):
        c_predicted = _cross_fit(constant_train, constant_test, _is_constant, cues, names)
    if c_predicted is not None:
        c_protocol, scored, c_probs = c_predicted
        positive = np.array([_is_constant(r) for r in scored], dtype=bool)
        aucs = {name: _auc(p, positive, scored, f"{category}|constant|{name}") for name, p in c_probs.items()}
        c_best = max(aucs, key=lambda name: aucs[name]["auc"])
        out["constant"] = {"protocol": c_protocol, "n_constant_scored": int(positive.sum()), **aucs}
        out["constant_auc"] = aucs[c_best]["auc"]
        out["constant_ci"] = [aucs[c_best]["lo"], aucs[c_best]["hi"]]

    lo, hi = out["shortcut_ci"]
    if out["shortcut_accuracy"] > MAX_SHORTCUT_ACCURACY:
        out["reasons"].append(
            f"direction predicted from {best.upper()} cues with accuracy {out['shortcut_accuracy']:.2f} "
            f"> {MAX_SHORTCUT_ACCURACY:.2f}"
        )
    if not (np.isfinite(lo) and np.isfinite(hi)):
        out["reasons"].append(f"{NO_CI_TEXT}: cannot tell chance from a shortcut")
        out["passes"] = None
        return out
    if not (lo <= 0.5 <= hi):
        out["reasons"].append(f"direction accuracy CI [{lo:.2f}, {hi:.2f}] excludes chance")
    out["reasons"].extend(_order_free_reasons(out["order_free"], out["order_free_gated"]))
    if out["constant_auc"] is not None and out["constant_auc"] > MAX_CONSTANT_AUC:
        out["reasons"].append(f"constant clips told apart with AUC {out['constant_auc']:.2f} > {MAX_CONSTANT_AUC:.2f}")
    out["passes"] = not out["reasons"]
    return out


def one_end_report(category: str, rows: Sequence[Mapping]) -> dict:
    """How much an endpoint strategy answers without comparing over time: a logistic
    regression on the dimension's own measure at one end of the clip (`measured_start` or
    `measured_end`, recorded at build, relative to the source), fitted on train, scored on
    test; the better end is reported. {} when the rows lack the measures or are too few."""
    train = _sort_rows(r for r in rows if r["split"] == "train" and r["direction"] in LABELS)
    test = _sort_rows(r for r in rows if r["split"] == "test" and r["direction"] in LABELS)
    y_test = np.array([_is_increase(r) for r in test])
    if len(np.unique(y_test)) < 2:
        return {}
    out = {}
    for end in ("measured_start", "measured_end"):
        if any(r.get(end) is None for r in (*train, *test)):
            return {}
        values = {r["item_id"]: {end: float(r[end])} for r in (*train, *test)}
        predicted = _predictions(train, test, _is_increase, values, [end], which=("lr",))
        if predicted is None:
            return {}
        out[end] = _accuracy((predicted[1]["lr"] > 0.5).astype(int) == y_test, test, f"{category}|one_end|{end}")
    best = max(out, key=lambda end: out[end]["accuracy"])
    return {"end": best.removeprefix("measured_"), **out[best]}


def _order_free_reasons(report: Mapping | None, gated: bool) -> list[str]:
    """Why the order-free family fails a category: accuracy over the threshold or a CI that
    excludes chance (nothing where the format is not gated or the family had too few clips)."""
    if not report or not gated:
        return []
    reasons = []
    acc, (lo, hi) = report["accuracy"], report["ci"]
    if acc > MAX_SHORTCUT_ACCURACY:
        top = next(iter(report["per_cue_auc"]), None)
        lead = f"; strongest cue {top} (AUC {report['per_cue_auc'][top]['auc']:.2f})" if top else ""
        reasons.append(f"direction predicted from order-free cues with accuracy {acc:.2f} > "
                       f"{MAX_SHORTCUT_ACCURACY:.2f}{lead}")
    if np.isfinite(lo) and np.isfinite(hi) and not lo <= 0.5 <= hi:
        reasons.append(f"order-free accuracy CI [{lo:.2f}, {hi:.2f}] excludes chance")
    return reasons


def audit_dataset(
    root: str | Path,
    *,
    cache: bool = True,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Shortcut audit of a dataset folder; writes `root/audit.json` and returns the report.

    Per category, classifiers (standardised logistic regression, gradient-boosted trees) are
    trained on the train split's cues (all families but the dimension's target cues) and
    predict the test split's labels: direction on changing clips, and constant vs changing
    where constant clips exist. Without a usable train split they are scored by grouped
    cross-validation over test sources. CIs resample sources. A category passes when the
    best direction accuracy is at most MAX_SHORTCUT_ACCURACY with a CI that includes chance,
    and the constant AUC (if any) is at most MAX_CONSTANT_AUC; a category too small to
    audit gets passes = None and does not fail the dataset.
    """
    started = time.time()
    root = Path(root)
    rows = load_rows(root)
    cues = dataset_cues(root, rows, cache=cache, workers=workers, compact=True, progress=progress)
    measured = time.time() - started
    with threadpool_limits(1):  # tiny fits: OpenMP threads cost more than they save
        per_category = {
            category: audit_category(category, [r for r in rows if r["category"] == category], cues)
            for category in sorted({r["category"] for r in rows})
        }
    protocols = {c["protocol"] for c in per_category.values() if c["protocol"]}
    report = {
        "dataset": str(root),
        "protocol": protocols.pop() if len(protocols) == 1 else ("mixed" if protocols else None),
        "thresholds": {"max_shortcut_accuracy": MAX_SHORTCUT_ACCURACY, "max_constant_auc": MAX_CONSTANT_AUC},
        "n_boot": N_BOOT,
        "seed": SEED,
        "cues_version": CUES_VERSION,
        "n_clips": len(rows),
        "seconds_cues": round(measured, 2),
        "seconds": round(time.time() - started, 2),
        "per_category": per_category,
        "passes": all(c["passes"] is not False for c in per_category.values()),
    }
    report = clean(report)
    out = root / REPORT_FILE
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, out)
    return report


# ---------------------------------------------------------------------------------------
# Report


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _verdict(passes: bool | None) -> str:
    return "n/a (too few sources)" if passes is None else ("yes" if passes else "NO")


def _order_free_cell(c: Mapping) -> str:
    """The order-free family's accuracy [CI] and its strongest cue; marked where not gated."""
    of = c.get("order_free")
    if not of:
        return "n/a"
    lo, hi = of["ci"]
    top = next(iter(of["per_cue_auc"]), None)
    cue = f" ({top.removeprefix('of_')} {of['per_cue_auc'][top]['auc']:.2f})" if top else ""
    gated = "" if c.get("order_free_gated", True) else " (held value: not gated)"
    return f"{of['accuracy']:.2f} [{_pct(lo)}, {_pct(hi)}]{cue}{gated}"


def _one_end_cell(one_end: Mapping | None) -> str:
    """The one-end observer's accuracy [CI] and the end it reads (reported, not gated)."""
    if not one_end:
        return "n/a"
    return f"{one_end['accuracy']:.2f} [{_pct(one_end['lo'])}, {_pct(one_end['hi'])}] ({one_end['end']})"


def format_audit(report: Mapping) -> str:
    """Markdown table of an audit report, with a legend of the excluded target cues."""
    lines = [
        f"Shortcut audit of {report['dataset']} (protocol {report.get('protocol') or 'n/a'}; "
        f"pass: accuracy <= {MAX_SHORTCUT_ACCURACY:.2f} with a CI including 0.5, "
        f"constant AUC <= {MAX_CONSTANT_AUC:.2f})",
        "",
        "| category | items | sources | shortcut acc [CI] | LR | HGB | global-only | edge-only | "
        "worst curve | constant AUC | order-free acc [CI] (top cue AUC) | one-end acc [CI] | pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    excluded = []
    for category, c in report["per_category"].items():
        if c["excluded_target_cues"]:
            excluded.append(f"{category}: {', '.join(c['excluded_target_cues'])}")
        if c["shortcut_accuracy"] is None:
            lines.append(f"| {category} | {c['n_items_test']} | {c['n_sources_test']} | n/a | | | | | | | | | "
                         f"n/a ({'; '.join(c['reasons'])}) |")
            continue
        lo, hi = c["shortcut_ci"]
        fam = c["by_family_set"]
        worst = c["worst_curve"]
        constant = "n/a" if c["constant_auc"] is None else (
            f"{c['constant_auc']:.2f} [{_pct(c['constant_ci'][0])}, {_pct(c['constant_ci'][1])}]")
        lines.append(
            f"| {category} | {c['n_items_test']} | {c['n_sources_test']} | "
            f"{c['shortcut_accuracy']:.2f} [{_pct(lo)}, {_pct(hi)}] ({c['shortcut_classifier'].upper()}) | "
            f"{c['direction']['lr']['accuracy']:.2f} | {c['direction']['hgb']['accuracy']:.2f} | "
            f"{_pct((fam.get('global') or {}).get('accuracy'))} | {_pct((fam.get('edge') or {}).get('accuracy'))} | "
            f"{worst['curve']} {worst['accuracy']:.2f} | {constant} | {_order_free_cell(c)} | "
            f"{_one_end_cell(c.get('one_end'))} | {_verdict(c['passes'])} |"
        )
    lines.append("")
    lines.append(f"CIs resample test sources (cluster bootstrap with >= {MIN_SOURCES} sources, a "
                 f"jackknife t-interval below, none with one source: the audit then cannot pass).")
    lines.append("Order-free cues (whole file, unchanged when played backwards) are audited on every "
                 "category with no exclusions; the one-end observer (the dimension's own measure at "
                 "one end, learnt on train) is reported, not gated.")
    others = len(report["per_category"]) > len(excluded)
    lines.append("Cue families excluded as target cues: " + "; ".join(excluded or ["none"])
                 + ("; other categories: none." if excluded and others else "."))
    return "\n".join(lines)

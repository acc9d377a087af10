"""The audit's cues of one clip: direction-invariant measures of the whole clip and its edges,
grouped in families, and which of them measure the target on a dimension and format."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

import numpy as np
import soundfile as sf

from vocalgrad import formats
from vocalgrad.audio import EDGE_GUARD_S, SpeechSpan, loudness_lufs, speech_span
from vocalgrad.errors import ConfigError
from vocalgrad.signal.analysis import F0_CEILING_HZ, Analysis
from vocalgrad.stimuli.order_free import FAMILY as ORDER_FREE
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES
from vocalgrad.stimuli.order_free import order_free_cues, zero_share

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
    # target (the last syllable's level)
    "parts": ("parts_first_s", "parts_gap_s", "parts_second_s", "parts_gap_db"),
    # recognition items: the clip's length alone
    "duration": ("global_duration_s",),
    # items asked where or how a change runs (a change early or late, a peak or a dip): where
    # in the speech span the energy lies (its centroid and spread, the loudest 100 ms) and
    # where the onsets are (the strongest, and their centroid), as fractions of the span
    "position": (
        "position_energy", "position_spread", "position_peak", "position_onset",
        "position_onsets",
    ),
    # statistics of the whole file that playing it backwards leaves as they are: audited apart,
    # on every dimension and format, never a target cue (`vocalgrad.stimuli.order_free`)
    ORDER_FREE: ORDER_FREE_NAMES,
}  # fmt: skip
EDGE_FAMILIES = tuple(f for f in FAMILIES if f.startswith("edge_"))
# Which families a question format audits, and which of them measure the target where a
# dimension warps time, are the format's (`QuestionFormat.audit_families`,
# `QuestionFormat.warp_target_families`).
CUES_VERSION = 9  # bump when clip_cues changes: cached cues of another version are recomputed
EDGE_S = 0.3
FLOOR_DB = -120.0


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


def clip_cues(
    audio: np.ndarray,
    sr: int,
    span: tuple[float, float] | None = None,
    parts: Sequence[Sequence[float]] | None = None,
    pitch_ceiling_hz: float = F0_CEILING_HZ,
    position: bool = True,
) -> dict[str, float]:
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
    and gives every other cue from its mono downmix. The F0 cue is tracked up to
    ``pitch_ceiling_hz`` (Hz), the clip's source's own range (`row_pitch_ceiling`): speech's
    ceiling read a tone above it as unvoiced or as a subharmonic. ``position=False`` leaves
    out the position family (`position_cues`), a third of the measuring time, for a format
    that does not audit it (`measures_position`)."""
    audio = np.asarray(audio, dtype=np.float32)
    ears = audio if audio.ndim == 2 else None
    audio = np.ascontiguousarray(audio.mean(axis=1) if ears is not None else audio)
    duration = len(audio) / sr
    detected = speech_span(audio, sr)
    n_edge = max(1, min(len(audio), int(round(EDGE_S * sr))))
    if span is None:
        body, first, last = audio, audio[:n_edge], audio[len(audio) - n_edge :]
    else:
        onset, offset = (int(round(t * sr)) for t in span)
        onset, offset = min(max(onset, 0), len(audio)), min(max(offset, onset), len(audio))
        body = audio[onset:offset] if offset - onset > sr // 10 else audio
        guard = int(round(EDGE_GUARD_S * sr))
        first = audio[: min(max(onset - guard, 0), n_edge)]
        last = audio[max(offset + guard, len(audio) - n_edge) :]
    if parts:  # both parts whole, in both orders (`_both_orders`)
        summary = _both_orders(audio, sr, parts, detected, pitch_ceiling_hz)
    else:
        summary = _summary(body, audio, sr, detected, pitch_ceiling_hz)
    return {
        **(part_cues(audio, sr, parts) if parts else {}),
        "global_duration_s": duration,
        **summary,
        "global_ild_db": 0.0 if ears is None else _rms_db(ears[:, 1]) - _rms_db(ears[:, 0]),
        "edge_silence_lead_s": float(detected.onset_s),
        "edge_silence_trail_s": float(max(0.0, duration - detected.offset_s)),
        "edge_level_first_db": _edge(first, sr, _rms_db),
        "edge_level_last_db": _edge(last, sr, _rms_db),
        "edge_spectrum_first_hz": _edge(first, sr, lambda x: _centroid_hz(x, sr)),
        "edge_spectrum_last_hz": _edge(last, sr, lambda x: _centroid_hz(x, sr)),
        "edge_zeros_first": _edge(first, sr, lambda x: zero_share(x, sr)),
        "edge_zeros_last": _edge(last, sr, lambda x: zero_share(x, sr)),
        **(position_cues(audio, sr, span) if position else {}),
        **order_free_cues(ears if ears is not None else audio, sr),
    }


POSITION_FRAME_S = 0.01
POSITION_PEAK_S = 0.1  # the loudest stretch: 100 ms


def position_cues(
    audio: np.ndarray, sr: int, span: tuple[float, float] | None = None
) -> dict[str, float]:
    """Where in the speech span (the whole clip without one) the energy and the onsets lie,
    as fractions of the span (0: onset, 1: offset): the power-weighted centroid and spread
    of its 10 ms frames, the middle of its loudest 100 ms, the strongest onset (librosa's
    onset strength) and the onset-strength-weighted centroid.

    Why: a question about where a change lies is answered by any process that leaves energy
    or a transient where the change is; these cues read that without following the target.
    Where a dimension's level course is its target they measure it
    (`QuestionFormat.level_target_families`)."""
    import librosa

    onset, offset = (0.0, len(audio) / sr) if span is None else span
    a, b = int(round(onset * sr)), int(round(offset * sr))
    body = audio[a:b] if b - a > sr // 10 else audio
    hop = max(1, int(round(POSITION_FRAME_S * sr)))
    n = len(body) // hop
    nan = float("nan")
    if n < 4:
        return dict.fromkeys(CUE_NAMES["position"], nan)
    power = np.square(body[: n * hop].astype(np.float64)).reshape(n, hop).mean(axis=1)
    where = (np.arange(n) + 0.5) / n
    total = power.sum()
    if total <= 0:
        return dict.fromkeys(CUE_NAMES["position"], nan)
    centroid = float(where @ power / total)
    spread = float(np.sqrt(((where - centroid) ** 2) @ power / total))
    width = max(1, int(round(POSITION_PEAK_S / POSITION_FRAME_S)))
    smooth = np.convolve(power, np.ones(width) / width, mode="same")
    strength = librosa.onset.onset_strength(
        y=body.astype(np.float32), sr=sr, hop_length=hop, feature=_onset_mel_power
    )
    strength = strength[:n]
    at = (np.arange(len(strength)) + 0.5) / max(len(strength), 1)
    onsets = float(at @ strength / strength.sum()) if strength.sum() > 0 else nan
    return {
        "position_energy": centroid,
        "position_spread": spread,
        "position_peak": float(where[int(np.argmax(smooth))]),
        "position_onset": float(at[int(np.argmax(strength))]) if len(strength) else nan,
        "position_onsets": onsets,
    }


def _onset_mel_power(y: np.ndarray, sr: int, n_fft: int, hop_length: int) -> np.ndarray:
    """librosa's default onset feature (`librosa.feature.melspectrogram` with its defaults,
    up to half the rate), with its mel filter bank designed once per rate, not per clip."""
    import librosa

    power = np.abs(librosa.stft(y, n_fft=n_fft, hop_length=hop_length, pad_mode="constant")) ** 2
    return np.einsum("...ft,mf->...mt", power, _onset_mel_basis(sr, n_fft), optimize=True)


@lru_cache(maxsize=8)
def _onset_mel_basis(sr: int, n_fft: int) -> np.ndarray:
    import librosa

    return librosa.filters.mel(sr=sr, n_fft=n_fft, fmax=0.5 * sr)


def _summary(
    body: np.ndarray,
    audio: np.ndarray,
    sr: int,
    detected: SpeechSpan,
    pitch_ceiling_hz: float = F0_CEILING_HZ,
) -> dict[str, float]:
    """The whole-clip summaries: level, peak, spectrum, F0, size and digital silence."""
    peak = float(np.max(np.abs(body))) if body.size else 0.0
    lufs = loudness_lufs(body, sr)
    return {
        "global_loudness_lufs": max(FLOOR_DB, lufs) if math.isfinite(lufs) else FLOOR_DB,
        "global_peak_dbfs": max(FLOOR_DB, 20 * math.log10(peak)) if peak > 0 else FLOOR_DB,
        "global_centroid_hz": _centroid_hz(body, sr),
        "global_f0_hz": Analysis(
            audio, sr, span=detected, pitch_ceiling_hz=pitch_ceiling_hz
        ).median_f0,
        "global_file_bytes": float(_flac_bytes(body, sr)),
        "global_zero_share": zero_share(body, sr),
    }


def _both_orders(
    audio: np.ndarray,
    sr: int,
    parts: Sequence[Sequence[float]],
    detected: SpeechSpan,
    pitch_ceiling_hz: float = F0_CEILING_HZ,
) -> dict[str, float]:
    """The summaries of a two-part item, averaged over the file and the file with its parts
    swapped, so that no summary reads which part comes first. The whole file, not the speech
    spans: a first part's tail and a second's lead would differ with the order (a reverb
    tail, a held rate). Summaries are not quite order-free on their own: BS.1770's 100 ms
    block grid starts at the file's start, so two files that are exact swaps of each other
    can differ in loudness by a fraction of a dB, enough for a classifier to read."""
    (a0, a1), (b0, b1) = ((int(round(x * sr)) for x in part) for part in parts)
    swapped = np.concatenate([audio[:a0], audio[b0:b1], audio[a1:b0], audio[a0:a1], audio[b1:]])
    both = [
        _summary(audio, audio, sr, detected, pitch_ceiling_hz),
        _summary(swapped, swapped, sr, speech_span(swapped, sr), pitch_ceiling_hz),
    ]
    return {k: float(np.mean([b[k] for b in both])) for k in both[0]}


def part_cues(audio: np.ndarray, sr: int, parts: Sequence[Sequence[float]]) -> dict[str, float]:
    """Layout cues of a two-part item (`parts`: start and end of each part, in seconds):
    the parts' and the gap's lengths and the gap's level."""
    (a0, a1), (b0, b1) = parts
    gap = audio[int(round(a1 * sr)) : int(round(b0 * sr))]
    return {
        "parts_first_s": a1 - a0,
        "parts_gap_s": b0 - a1,
        "parts_second_s": b1 - b0,
        "parts_gap_db": _rms_db(gap),
    }


def row_parts(row: Mapping) -> list[list[float]] | None:
    """A comparison row's part bounds in seconds, if any."""
    bounds = row.get("part_bounds")
    return [[a / row["sample_rate"], b / row["sample_rate"]] for a, b in bounds] if bounds else None


def _edge(x: np.ndarray, sr: int, cue: Callable[[np.ndarray], float]) -> float:
    """A cue of an edge window, NaN where the window holds under 20 ms of silence."""
    return cue(x) if len(x) >= 0.02 * sr else float("nan")


def row_span(row: Mapping) -> tuple[float, float] | None:
    """The speech span a dataset row records, if any."""
    onset, offset = row.get("speech_onset_s"), row.get("speech_offset_s")
    return None if onset is None or offset is None else (float(onset), float(offset))


def target_cue_names(
    category: str, fmt: str = formats.DEFAULT, partners: Iterable[str] = ()
) -> set[str]:
    """Cues that measure the target on `category` in a question format, left out of its
    audit: `SPEC.target_cues` (whole families or single cues), and what pads held speech
    where the dimension warps time; and those of the `partners`, the other dimensions a
    question asks about beside it (`QuestionFormat.cue_partners`)."""
    from vocalgrad.dimensions import get

    if partners:
        return set().union(
            target_cue_names(category, fmt), *(target_cue_names(p, fmt) for p in partners)
        )
    dim = get(category)
    declared = set(dim.SPEC.target_cues)
    if dim.SPEC.warps_time:
        declared.update(formats.get(fmt).warp_target_families)
    if "edge_level" in declared:  # its level course is the target
        declared.update(formats.get(fmt).level_target_families)
    names = {n for f in CUE_NAMES if f in declared for n in CUE_NAMES[f]} | (
        declared - set(CUE_NAMES)
    )
    return names - {
        ORDER_FREE,
        *ORDER_FREE_NAMES,
    }  # never a target: no order-free cue reads a direction


def rows_format(rows: Iterable[Mapping]) -> str:
    """The one question format of a set of rows (old rows are gradual)."""
    found = {formats.row_format(r) for r in rows}
    if len(found) > 1:
        raise ValueError(
            f"rows of several question formats ({', '.join(sorted(found))}) audited together"
        )
    return found.pop() if found else formats.DEFAULT


def format_families(fmt: str) -> tuple[str, ...]:
    """The cue families a question format audits (`QuestionFormat.audit_families`).

    Raises
    ------
    ConfigError
        The format is unknown, or names a family the audit does not measure (or the
        order-free family, which every format's audit measures apart).
    """
    families = formats.get(fmt).audit_families
    choices = [f for f in CUE_NAMES if f != ORDER_FREE]  # audited apart, in every format
    unknown = [f for f in families if f not in choices]
    if unknown:
        raise ConfigError(
            f"question format {fmt!r} audits unknown cue families {', '.join(unknown)}; "
            f"choose from {', '.join(choices)}"
        )
    return families


def measures_position(fmt: str) -> bool:
    """Whether the audit of a question format reads the position family (its
    `QuestionFormat.audit_families` name it)."""
    return "position" in format_families(fmt)


def allowed_families(
    category: str, fmt: str = formats.DEFAULT, partners: Iterable[str] = ()
) -> tuple[str, ...]:
    """Cue families the audit of `category` uses in a format: those with a cue that is not a
    target cue (of it or of its `partners`)."""
    excluded = target_cue_names(category, fmt, partners)
    return tuple(f for f in format_families(fmt) if any(n not in excluded for n in CUE_NAMES[f]))


def feature_names(
    families: Iterable[str],
    category: str | None = None,
    fmt: str = formats.DEFAULT,
    partners: Iterable[str] = (),
) -> list[str]:
    """The cues of `families`, less the target cues of `category` (in `fmt`, and of its
    `partners`) if one is given."""
    excluded = target_cue_names(category, fmt, partners) if category else set()
    return [name for family in families for name in CUE_NAMES[family] if name not in excluded]

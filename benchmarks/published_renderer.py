"""The published VocalGrad way of rendering, re-implemented as a speed baseline.

Why it exists: `bench_build.py` needs a fair "before" to compare our continuous renderer
against. The published pipeline cuts the audio into 50 ms chunks, processes each chunk (with
context on both sides) at that chunk's parameter value and crossfades the pieces back
together; it neither verifies nor measures confounds, it only renders and writes 16-bit
FLAC. The progress curves and tier endpoints are vocalgrad's own (`track_for`,
`plan_conditions`), so only the processing method differs from `vocalgrad.stimuli.build`.

This is a baseline, not a reference: its artefacts (phase-vocoder smearing, shortened
speech, 20 Hz tremolo jumps, chunk-edge clicks) are the flaws our toolkit fixes.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import librosa
import numpy as np
import soundfile as sf
from scipy.signal import butter, lfilter, sosfilt

from vocalgrad import dimensions
from vocalgrad.audio import load_audio, resample
from vocalgrad.dimensions.echo import rt60_for
from vocalgrad.stimuli.plan import Condition
from vocalgrad.stimuli.render import track_for

CHUNK_S = 0.050  # the published processing step
CONTEXT_S = 0.050  # audio processed on each side of a chunk, then discarded
FADE_S = 0.005  # half-length of the linear crossfade at every chunk boundary

# Schroeder reverb: delays (s) of the 4 parallel combs and 2 series allpasses, per unit room.
COMB_DELAYS_S = (0.0297, 0.0371, 0.0411, 0.0437)
ALLPASS_DELAYS_S = (0.0050, 0.0017)
ALLPASS_GAIN = 0.7

# process(segment, value, offset of the segment in the source) -> processed segment
Process = Callable[[np.ndarray, float, int], np.ndarray]


@dataclass
class PublishedSource:
    """One source as the published pipeline holds it: audio, span and a per-source cache."""

    audio: np.ndarray
    sr: int
    onset_s: float
    offset_s: float
    speech_rms: float
    cache: dict[tuple[str, float], np.ndarray] = field(default_factory=dict)

    @property
    def duration_s(self) -> float:
        return len(self.audio) / self.sr


def load_source(path: str | Path, sr: int) -> PublishedSource:
    """Load and resample; no loudness normalisation and no plausibility checks, as published."""
    audio, source_sr = load_audio(path)
    audio = resample(audio, source_sr, sr).astype(np.float64)
    onset, offset = published_span(audio, sr)
    span = audio[int(onset * sr) : max(int(offset * sr), int(onset * sr) + 1)]
    return PublishedSource(audio, sr, onset, offset, float(np.sqrt(np.mean(span**2))))


def published_span(audio: np.ndarray, sr: int) -> tuple[float, float]:
    """The published detector: 10 ms RMS of pre-emphasised audio, floor = median of the
    first 200 ms, threshold max(1.8 floor, 0.003 peak, 5e-5), runs of >= 100 ms."""
    emphasised = np.concatenate([audio[:1], audio[1:] - 0.97 * audio[:-1]])
    n = int(0.010 * sr)
    usable = (len(emphasised) // n) * n
    rms = np.sqrt(np.mean(emphasised[:usable].reshape(-1, n) ** 2, axis=1))
    floor = float(np.median(rms[:20])) if rms.size else 0.0
    threshold = max(1.8 * floor, 0.003 * float(np.max(np.abs(audio))), 5e-5)
    above = np.concatenate([[False], rms > threshold, [False]])
    edges = np.flatnonzero(np.diff(above.astype(np.int8)))
    runs = [(a, b) for a, b in zip(edges[::2], edges[1::2], strict=True) if b - a >= 10]
    if not runs:
        return 0.0, len(audio) / sr
    return runs[0][0] * 0.010, runs[-1][1] * 0.010


def chunk_values(src: PublishedSource, condition: Condition, n_samples: int) -> np.ndarray:
    """The parameter at each chunk's centre, from vocalgrad's own curve and endpoints (not
    centred: the published pipeline runs every curve from its start value to its end value)."""
    track = track_for(
        condition, dimensions.get(condition.category).SPEC, src.onset_s, src.offset_s, centred=False
    )
    centres = (np.arange(0, n_samples, int(CHUNK_S * src.sr)) + 0.5 * CHUNK_S * src.sr) / src.sr
    return np.asarray(track(np.minimum(centres, src.duration_s)), dtype=np.float64)


def _boundaries(n: int, chunk: int, fade: int) -> list[int]:
    """Chunk starts; a last chunk shorter than one crossfade is merged into its neighbour."""
    starts = list(range(0, n, chunk))
    if len(starts) > 1 and n - starts[-1] < 2 * fade:
        starts.pop()
    return starts


def chunked(audio: np.ndarray, sr: int, values: np.ndarray, process: Process) -> np.ndarray:
    """Length-preserving chunk-and-crossfade: every chunk is processed with CONTEXT_S on
    both sides at its own value, then overlap-added with linear fades that sum to one."""
    n = len(audio)
    chunk, ctx, fade = int(CHUNK_S * sr), int(CONTEXT_S * sr), int(FADE_S * sr)
    ramp = (np.arange(2 * fade) + 0.5) / (2 * fade)
    out = np.zeros(n)
    starts = _boundaries(n, chunk, fade)
    for k, s in enumerate(starts):
        e = starts[k + 1] if k + 1 < len(starts) else n
        a, b = max(0, s - ctx), min(n, e + ctx)
        seg = process(audio[a:b], float(values[min(k, len(values) - 1)]), a)
        lo, hi = max(0, s - fade), min(n, e + fade)
        weight = np.ones(hi - lo)
        if s > 0:
            weight[: 2 * fade] = ramp
        if e < n:
            weight[-2 * fade :] *= 1.0 - ramp
        out[lo:hi] += seg[lo - a : hi - a] * weight
    return out


def stretched(audio: np.ndarray, sr: int, rates: np.ndarray) -> np.ndarray:
    """Per-chunk phase-vocoder time stretch: each chunk plus context is stretched at its
    rate and its middle, now chunk/rate long, is crossfaded onto the end of the output."""
    n = len(audio)
    chunk, ctx, fade = int(CHUNK_S * sr), int(CONTEXT_S * sr), int(FADE_S * sr)
    ramp = (np.arange(2 * fade) + 0.5) / (2 * fade)
    starts = _boundaries(n, chunk, fade)
    ends = [*starts[1:], n]
    lengths = [
        max(2 * fade, round((e - s) / float(r)))
        for s, e, r in zip(starts, ends, rates, strict=False)
    ]
    out = np.zeros(sum(lengths) + fade)
    cursor = 0
    for s, e, rate, length in zip(starts, ends, rates, lengths, strict=False):
        a, b = max(0, s - ctx), min(n, e + ctx)
        y = librosa.effects.time_stretch(audio[a:b], rate=float(rate))
        fade_in, fade_out = (fade if s > 0 else 0), (fade if e < n else 0)
        first = round((s - a) / float(rate)) - fade_in
        size = fade_in + length + fade_out
        piece = y[first : first + size]
        piece = np.pad(piece, (0, size - len(piece)))
        if fade_in:
            piece[: 2 * fade] *= ramp
        if fade_out:
            piece[-2 * fade :] *= 1.0 - ramp
        out[cursor - fade_in : cursor - fade_in + size] += piece
        cursor += length
    return out[:cursor]


def schroeder_reverb(audio: np.ndarray, sr: int, rt60_s: float) -> np.ndarray:
    """4 parallel feedback combs + 2 series allpasses (scipy lfilter), scaled to the dry RMS."""
    scale = rt60_s / 0.6  # bigger rooms for bigger tiers: delays grow with the decay time
    wet = np.zeros_like(audio)
    for delay_s in COMB_DELAYS_S:
        d = max(1, int(delay_s * scale * sr))
        g = 10.0 ** (-3.0 * d / (rt60_s * sr))
        a = np.zeros(d + 1)
        a[0], a[d] = 1.0, -g
        wet += lfilter([1.0], a, audio)
    for delay_s in ALLPASS_DELAYS_S:
        d = max(1, int(delay_s * sr))
        b = np.zeros(d + 1)
        b[0], b[d] = -ALLPASS_GAIN, 1.0
        a = np.zeros(d + 1)
        a[0], a[d] = 1.0, -ALLPASS_GAIN
        wet = lfilter(b, a, wet)
    dry_rms = float(np.sqrt(np.mean(audio**2)))
    wet_rms = float(np.sqrt(np.mean(wet**2)))
    return wet * (dry_rms / wet_rms) if wet_rms > 0 else wet


def render_condition(
    src: PublishedSource, condition: Condition, rng: np.random.Generator
) -> np.ndarray:
    """One clip the published way; returns float64 audio (not yet limited or quantised)."""
    sr, audio, name = src.sr, src.audio, condition.category
    values = chunk_values(src, condition, len(audio))
    if name == "speaking_speed":
        return stretched(audio, sr, values)
    magnitude = max(abs(condition.start), abs(condition.end))
    process: Process
    if name == "voice_pitch":

        def process(seg: np.ndarray, v: float, _: int) -> np.ndarray:
            return librosa.effects.pitch_shift(seg, sr=sr, n_steps=v)
    elif name == "volume":

        def process(seg: np.ndarray, v: float, _: int) -> np.ndarray:
            return seg * 10.0 ** (v / 20.0)
    elif name == "background_noise":

        def process(seg: np.ndarray, v: float, _: int) -> np.ndarray:
            return seg + rng.standard_normal(len(seg)) * v * src.speech_rms
    elif name == "echo":
        key = ("echo", magnitude)
        if key not in src.cache:  # one reverb per source and room, mixed per chunk
            src.cache[key] = schroeder_reverb(audio, sr, rt60_for(magnitude))
        wet = src.cache[key]

        def process(seg: np.ndarray, v: float, offset: int) -> np.ndarray:
            return seg + v * wet[offset : offset + len(seg)]
    elif name == "voice_clarity":

        def process(seg: np.ndarray, v: float, _: int) -> np.ndarray:
            if v >= 0.99 * sr / 2:
                return seg
            return sosfilt(butter(4, v, btype="low", fs=sr, output="sos"), seg)
    elif name == "audio_distortion":

        def process(seg: np.ndarray, v: float, _: int) -> np.ndarray:
            if v >= sr:
                return seg
            factor = sr / v
            return seg[np.floor(np.floor(np.arange(len(seg)) / factor) * factor).astype(int)]
    elif name == "audio_roughness":

        def process(seg: np.ndarray, v: float, _: int) -> np.ndarray:
            levels = 2.0 ** (v - 1.0)
            return np.round(seg * levels) / levels
    elif name == "voice_vibration":

        def process(seg: np.ndarray, v: float, offset: int) -> np.ndarray:
            rate_hz = 20.0 * v / magnitude if magnitude > 0 else 0.0  # LFO 0 -> 20 Hz with depth
            t = (offset + np.arange(len(seg))) / sr
            return seg * (1.0 - v * 0.5 * (1.0 + np.sin(2 * np.pi * rate_hz * t)))
    else:
        raise ValueError(f"no published renderer for {name!r}")
    return chunked(audio, sr, values, process)


def write_flac16(path: Path, audio: np.ndarray, sr: int) -> None:
    """Hard-clipped 16-bit FLAC, as published (+18 dB volume clips do clip)."""
    sf.write(path, np.clip(audio, -1.0, 1.0), sr, format="FLAC", subtype="PCM_16")


def render_source(
    path: str | Path, conditions: Sequence[Condition], sr: int, out: Path, seed: int = 0
) -> tuple[int, float]:
    """Render and write every condition of one source; returns (clips, seconds of audio)."""
    src = load_source(path, sr)
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    clips, seconds = 0, 0.0
    for k, condition in enumerate(conditions):
        with warnings.catch_warnings():
            # librosa's default n_fft (2048) exceeds the edge chunks (1600 samples at 16 kHz);
            # the published code ran with these defaults, so keep them and stay quiet
            warnings.filterwarnings("ignore", message="n_fft=.* is too large")
            audio = render_condition(src, condition, rng)
        write_flac16(out / f"{k:04d}.flac", audio, sr)
        clips += 1
        seconds += len(audio) / sr
    return clips, seconds

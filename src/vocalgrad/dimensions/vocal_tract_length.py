"""Vocal-tract length: a time-varying formant shift with F0 untouched (spectral-envelope warp).

Per STFT frame (75% overlap) the magnitude is multiplied by E(f x L) / E(f), with E the
source frame's cepstral envelope and L(t) the vocal-tract length ratio: the formants move
to 1/L of their frequency while the harmonics (F0) and the phases stay where they were.
A longer tract (L > 1) lowers the formants and the voice sounds larger. One STFT per
source, one per clip: no pitch marks, no resampling, smooth at any rate of change.

Tiers from published JNDs: listeners discriminate resonance scale (vocal-tract length) at
~5% in vowels and syllables (Smith, Patterson, Turner, Kawahara & Irino 2005, JASA 117;
Ives, Smith & Patterson 2005, JASA 118), and single formant frequencies at 3-5% (Flanagan
1955). The low tier moves the tract 12% from start to end, the high tier 26% (nominal: the
warp of a smoothed envelope realises ~80-90% of it, as the verifier's envelope alignment
reads, which reads Praat's "Change gender" at its nominal ratio).
"""

from __future__ import annotations

import librosa
import numpy as np

from vocalgrad.audio import FRAME_S
from vocalgrad.dimensions._shared import inverse_stft, log_envelope, stft_frames
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.dimensions.voice_pitch import f0_at
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.evidence import centroid_fall

SPEC = DimensionSpec(
    name="vocal_tract_length",
    parameter="vocal-tract length ratio L (formant frequencies scale by 1/L, F0 kept)",
    unit="x",
    increase_means="the vocal tract gets longer: the formants go down and the voice sounds larger",
    tiers={"low": 0.06, "mid": 0.10, "high": 0.14},
    scale="log",
    measured="vocal-tract length re the source, 100 ln L, L from the log-frequency shift that "
    "best aligns the clip's LPC envelope (400-3500 Hz) with the source's over voiced frames",
    measured_unit="%",
    audibility_floor=4.0,
    floor_basis=(
        "vocal-tract length (resonance scale) JND ~5% (Smith et al. 2005; Ives, Smith & Patterson "
        "2005), formant-frequency DL 3-5% (Flanagan 1955): 4%"
    ),
    psychometric_range=(0.005, 0.2),
    centre="mean",
    constant_tolerance=4.0,
    # the warp runs on every STFT frame and would colour the recording's background, so the
    # silences stay the source's own samples
    source_edges=True,
    # the detected speech end moves with the last phoneme's formants, as a slowed last phoneme
    # does for speed
    target_cues=("edge_silence",),
    kinds=("speech",),  # a process on the voice itself: no other sound has one
)
MAX_GAIN = np.log(10.0)  # the warp gain is kept within +-20 dB: an envelope valley is not a hole
LPC_FRAME_S = 0.025
STEPS_PER_OCTAVE = 96  # the envelope grid: 1/96 octave (0.7%) per step
MAX_SHIFT = 36  # trial shifts up to +-3/8 octave (+-30%), beyond any tier
GRID_HZ = (
    400.0 * 2 ** (-MAX_SHIFT / STEPS_PER_OCTAVE),
    3500.0 * 2 ** (MAX_SHIFT / STEPS_PER_OCTAVE),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 1.0 / (1.0 + magnitude), 1.0 + magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if not 0 < magnitude < 0.5:
        return f"a vocal-tract change of {magnitude} must lie in (0, 0.5)"
    return None


def domain(sr: int) -> tuple[float, float]:
    """Lengths within the range ``inaudible_reason`` allows a change to reach."""
    return 1.0 / 1.5, 1.5


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Warp each frame's envelope by its own L(t): gain exp(E(f L) - E(f)), E in natural log."""
    freqs, times, spec = stft_frames(ref)
    envelope = log_envelope(ref)
    length = track(np.clip(times, 0, ref.duration_s))
    position = np.clip(np.arange(len(freqs))[:, None] * length[None, :], 0, len(freqs) - 1)
    below = np.minimum(position.astype(int), len(freqs) - 2)
    frac = position - below
    columns = np.arange(len(times))[None, :]
    warped = envelope[below, columns] * (1 - frac) + envelope[below + 1, columns] * frac
    return inverse_stft(spec * np.exp(np.clip(warped - envelope, -MAX_GAIN, MAX_GAIN)), ref)


LOUD_DB = 40.0  # frames this close to the loudest stand in for voiced ones at a quiet end


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """The log-frequency shift that best aligns the clip's LPC envelope with the source's,
    as 100 ln L (positive: formants lower, tract longer): per source-voiced frame, the
    correlation of the two envelopes (dB, 400-3500 Hz) at every trial shift, summed over
    the head and tail frames, peak located to a fraction of a step. Gain and loudness
    compensation move no envelope shape; added noise flattens both peaks alike."""
    times, env_ref = lpc_envelopes(ref)
    _, env_clip = lpc_envelopes(clip)
    n = min(len(times), env_clip.shape[0])
    voiced = f0_at(ref, times[:n]) > 0
    out = []
    loud = _loud(ref, times[:n])
    for window in ref.head_tail_at(times[:n]):
        frames = window & voiced
        if not frames.any():  # a quiet end the pitch tracker calls unvoiced: its loud frames
            frames = window & loud
        if not frames.any():
            out.append(float("nan"))
            continue
        curve = _shift_correlation(env_clip[:n][frames], env_ref[:n][frames]).sum(axis=0)
        i = int(np.clip(np.argmax(curve), 1, len(curve) - 2))
        a, b, c = curve[i - 1 : i + 2]
        peak = i - MAX_SHIFT + (0.5 * (a - c) / (a - 2 * b + c) if a - 2 * b + c < 0 else 0.0)
        out.append(float(100 * np.log(2) * peak / STEPS_PER_OCTAVE))
    return Measured(*out)


def _loud(ref: Analysis, times_s: np.ndarray) -> np.ndarray:
    """Frames within LOUD_DB of the source's loudest (K-weighted power)."""
    level = 10 * np.log10(np.maximum(ref.k_power, 1e-30))
    index = np.clip((times_s / FRAME_S).astype(int), 0, len(level) - 1)
    return level[index] > level.max() - LOUD_DB


def _shift_correlation(clip: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """(frames, shifts) Pearson correlation of the clip's inner envelope with the source's
    envelope shifted by -MAX_SHIFT..MAX_SHIFT grid steps."""
    width = ref.shape[1] - 2 * MAX_SHIFT
    inner = clip[:, MAX_SHIFT : MAX_SHIFT + width]
    inner = inner - inner.mean(axis=1, keepdims=True)
    inner /= np.maximum(np.linalg.norm(inner, axis=1, keepdims=True), 1e-9)
    segments = np.lib.stride_tricks.sliding_window_view(
        ref, width, axis=1
    )  # (frames, shifts, width)
    dot = np.matmul(segments, inner[:, :, None])[
        :, :, 0
    ]  # inner has zero mean: the segments' means drop out
    total = np.cumsum(np.pad(ref, ((0, 0), (1, 0))), axis=1)
    squares = np.cumsum(np.pad(ref**2, ((0, 0), (1, 0))), axis=1)
    sums, sq = total[:, width:] - total[:, :-width], squares[:, width:] - squares[:, :-width]
    spread = np.sqrt(np.maximum(sq - sums**2 / width, 1e-18))
    return dot / spread


def lpc_envelopes(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """(frame times, LPC envelope in dB on a log-frequency grid) every 10 ms over the head
    and tail of the speech span: 25 ms Hann frames, pre-emphasised, order sr/1 kHz + 2.
    Cached on the analysis (a source is measured against every clip of it)."""
    if "lpc_envelopes" not in a.cache:
        frame, hop = int(round(LPC_FRAME_S * a.sr)), int(round(FRAME_S * a.sr))
        audio = np.append(a.audio[0], a.audio[1:] - 0.97 * a.audio[:-1]).astype(np.float64)
        frames = librosa.util.frame(
            np.pad(audio, (0, max(0, frame - len(audio)))), frame_length=frame, hop_length=hop
        ).T
        times = (np.arange(len(frames)) * hop + frame / 2) / a.sr
        head, tail = a.head_tail_at(times)
        frames = frames[head | tail] * np.hanning(frame)
        frames += 1e-9 * np.random.default_rng(0).standard_normal(
            frames.shape
        )  # silent frames stay solvable
        coeffs = librosa.lpc(frames, order=int(a.sr / 1000) + 2, axis=-1)
        grid = 2.0 ** np.arange(np.log2(GRID_HZ[0]), np.log2(GRID_HZ[1]), 1 / STEPS_PER_OCTAVE)
        phase = 2 * np.pi * np.outer(np.arange(coeffs.shape[1]), grid / a.sr)
        coeffs = np.ascontiguousarray(
            coeffs
        )  # librosa returns a strided view: BLAS needs it packed
        response = np.hypot(coeffs @ np.cos(phase), coeffs @ np.sin(phase))  # |A(e^jw)| on the grid
        envelope = -20 * np.log10(np.maximum(response, 1e-9))
        a.cache["lpc_envelopes"] = (times[head | tail], envelope)
    return a.cache["lpc_envelopes"]


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    attribute="apparent size of the speaker (vocal tract length)",
    recognition=("voice", "large", "small"),
)
evidence = centroid_fall

"""Echo: reverberation whose return level follows the curve (the room's output, faded)."""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.signal import fftconvolve, lfilter

from vocalgrad.audio import FRAME_S, frame_rms
from vocalgrad.dimensions._shared import db, gain_matched_residual, spectrum_span_octaves, windows
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.trajectories import sample_times

SPEC = DimensionSpec(
    name="echo",
    parameter="reverb return level (unit-energy room response)",
    unit="ratio",
    increase_means="more reverberant (echoey)",
    tiers={"low": 0.28, "mid": 0.40, "high": 0.52},
    scale="linear",
    measured="reverberant energy (gain-matched residual, above the floor) re the source energy "
    "passed through a generic 0.6 s decay",
    measured_unit="dB",
    audibility_floor=3.0,
    floor_basis="direct-to-reverberant ratio JND 2-3 dB near 0-10 dB DRR "
    "(Larsen, Iyer, Lutfi & Hartmann 2008)",
    constant_tolerance=7.0,  # the speech content moves it (tiers change it by ~25 dB)
    psychometric_range=(0.03, 0.7),
    # the reverb is the tail after the last word (edge cues), drops voiced frames where it is
    # strong (the median F0), and, ringing only forward, fills the speech span more in one
    # direction (the FLAC size, the centroid and the crest factor it flattens read that amount)
    target_cues=(
        "edge_silence",
        "edge_level",
        "edge_spectrum",
        "edge_zeros",
        "global_f0_hz",
        "global_file_bytes",
        "global_centroid_hz",
        "global_peak_dbfs",
    ),
    # The reverberation starts and ends with the speech (`WET_FADE_S`): the file's silences are
    # the source's in every clip, so no twin rings on longer than the other.
    source_edges=True,
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
PREDELAY_S = 0.012
INAUDIBLE_RATIO = 10 ** (-25 / 10)  # reverb 25 dB under the expected energy reads as none
# The wet signal fades in over the first and out over the last WET_FADE_S of the speech: a room
# rings only forward, so a tail left to ring would outlast the speech longer where the return
# ends high, and a return high at the start meets the room still building up (`render`).
WET_FADE_S = 0.2
PAUSE_S = 0.08  # a pause at least this long is left dry
RATIO_WINDOW_S = 0.2  # the room's output is held at one ratio to the speech over this window
EDGE_HOLD_S = 0.3  # `held_at_edges`: this near either end of the speech, its own window
EDGE_BLEND_S = 0.1  # and crossfaded to RATIO_WINDOW_S over this much beyond
MAX_RATIO_GAIN_DB = 30.0  # where the speech starts, the room has barely begun to ring
PAUSE_FADE_S = 0.02
MODEL_RT60_S = 0.6  # decay assumed by measure(); the exact room need not be known
MIN_SPAN_OCTAVES = 0.5  # a source's spectrum spans this at least to hear a room on it


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a wet level of 0 adds nothing"


def source_inaudible_reason(magnitude: float, ref: Analysis) -> str | None:
    """Why a reverb change could not be heard as reverberation on this source, or None.

    A room's steady return of one partial (a pure tone) is that partial again, at another
    level and phase: over the sound it adds no tail and no colouring, and the clip's
    levelling takes the level out. What was left to hear was the room building up at a
    reverberant start, which a fade at the end never matches, and the file's peak told an
    increase from a decrease (docs/explanations/design-notes.md). The source's long-term
    spectrum (`_shared.spectrum_span_octaves`) must span MIN_SPAN_OCTAVES.

    Parameters
    ----------
    magnitude : float
        The condition's magnitude (return level; not used: no level makes it heard).
    ref : Analysis
        The source as heard.

    Returns
    -------
    str or None
        The reason, naming the source's span in octaves; None where reverb is heard.
    """
    span = spectrum_span_octaves(ref, (20.0, ref.sr / 2))
    if span is not None and span >= MIN_SPAN_OCTAVES:
        return None
    return (
        "a room's steady return of one partial is that partial again, at another level: "
        f"this source's energy spans {span or 0.0:.1f} octaves (under {MIN_SPAN_OCTAVES:g})"
    )


def domain(sr: int) -> tuple[float, float]:
    """From dry to as much reverberation as direct sound."""
    return 0.0, 1.0


def rt60_for(magnitude: float) -> float:
    """Bigger rooms for bigger magnitudes, as in the published tiers (0.28 -> 0.64 s)."""
    return 0.3 + 1.2 * magnitude


def room_response(rt60_s: float, sr: int, rng: np.random.Generator) -> np.ndarray:
    """Exponentially decaying Gaussian noise (a diffuse late field), unit energy."""
    n = int((PREDELAY_S + 1.2 * rt60_s) * sr)
    t = np.arange(n) / sr
    ir = rng.standard_normal(n) * np.exp(-6.908 * t / rt60_s)
    ir[: int(PREDELAY_S * sr)] = 0.0
    return ir / np.sqrt(np.sum(ir**2))


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Scale the room's *return*, not the send into it: the reverberation of the whole source
    is faded in and out along the curve, so the twins differ only in where along the speech
    it is loud. Why not the send: the reverb heard at a moment rings from what was sent
    before it, so its level lagged the curve, above it on the way down and below it on the
    way up. A decrease clip held more reverb than its increase twin, filled more of the quiet
    frames between words, and how much of the file lay within 30 dB of its loudest frame told
    the direction (fewer such frames in the increase clip in most linear and jump twins;
    docs/explanations/design-notes.md). The room's output is held at one ratio
    to the speech (`held_ratio`) before the curve scales it. The reverberation fades in and
    out over the first and last WET_FADE_S of the speech span (raised cosines), stays out of
    pauses, and the file keeps the source's length and silences. Why fades at both ends:
    faded out at the end alone, a decrease clip met the room at full return where it was
    still building up, and its increase twin met it only rung in; on a steady complex the
    file's peak told the two apart (docs/explanations/design-notes.md)."""
    n = len(ref.audio)
    dry = ref.audio.astype(np.float64)
    level = track(sample_times(n, ref.sr))
    magnitude = float(np.max(np.abs(level)))
    if magnitude == 0:
        return dry.astype(np.float32)
    ir = room_response(rt60_for(magnitude), ref.sr, rng)
    wet = room_return(fftconvolve(ref.audio, ir)[:n], ref, WET_FADE_S) * level
    return (dry + wet).astype(np.float32)


def room_return(
    room: np.ndarray, ref: Analysis, fade_s: float, edge_window_s: float | None = None
) -> np.ndarray:
    """The room's output (`room`, as long as `ref`) as every reverberant clip plays it: held at
    one ratio to the speech (`held_ratio`), out of the speech's pauses, and faded in and out
    over the first and last `fade_s` seconds of the speech span (raised cosines), so it never
    rings past the speech and the speech's two ends hold the same share of it. Each step
    removes a way in which a room, ringing only forward, would make a clip differ from its
    reversal in a way that tells the direction.

    Where `edge_window_s` is given, the return within EDGE_HOLD_S of either end of the span
    is held over that shorter window (`held_at_edges`): over RATIO_WINDOW_S, a sound's first
    100 ms met a room still ringing in and its last 100 ms one ringing on.

    Parameters
    ----------
    room : np.ndarray
        The source through the room's response, as many samples as ``ref``.
    ref : Analysis
        The source (its speech span and pauses).
    fade_s : float
        Length of each end's raised-cosine fade, s.
    edge_window_s : float or None
        Window over which the room's energy is held at its ratio to the source's near the
        span's ends, s; None holds it over RATIO_WINDOW_S throughout.

    Returns
    -------
    np.ndarray
        The return, float64, as long as ``room``.
    """
    t = sample_times(len(room), ref.sr)
    u = np.clip((t - ref.span.offset_s + fade_s) / fade_s, 0.0, 1.0)
    v = np.clip((ref.span.onset_s + fade_s - t) / fade_s, 0.0, 1.0)
    fade = (0.5 + 0.5 * np.cos(np.pi * u)) * (0.5 + 0.5 * np.cos(np.pi * v))
    held = (
        held_ratio(room, ref) if edge_window_s is None else held_at_edges(room, ref, edge_window_s)
    )
    return held * fade * _outside_pauses(ref)


def held_at_edges(room: np.ndarray, ref: Analysis, edge_window_s: float) -> np.ndarray:
    """`held_ratio` over `edge_window_s` (s) within EDGE_HOLD_S of either end of the speech
    span, over RATIO_WINDOW_S beyond EDGE_HOLD_S + EDGE_BLEND_S, and crossfaded linearly in
    between: the same rule at both ends, so a clip and its reversal meet the room alike."""
    t = sample_times(len(room), ref.sr)
    from_end = np.minimum(np.abs(t - ref.span.onset_s), np.abs(ref.span.offset_s - t))
    near = np.clip(1.0 - (from_end - EDGE_HOLD_S) / EDGE_BLEND_S, 0.0, 1.0)
    return near * held_ratio(room, ref, edge_window_s) + (1.0 - near) * held_ratio(room, ref)


def held_ratio(room: np.ndarray, ref: Analysis, window_s: float = RATIO_WINDOW_S) -> np.ndarray:
    """The room's output (`room`, as long as `ref`) under a slow gain that holds its energy at
    one ratio to the speech's (their ratio over the speech span) in every `window_s` (s), the
    gain at most MAX_RATIO_GAIN_DB.

    Why: a room rings forwards, so its output builds up over each phrase from nothing at
    the onset and is strongest where a phrase ends. A return that rises toward the end meets
    more of it than one that falls from the start, and the whole file held more reverberant
    energy in the increase clip, the same played backwards, so the renderer's and not the
    speech's (`benchmarks/reversal_control.py`; whole-file RMS higher in the increase clip
    in most twins, on the recordings and on them reversed). Held at one ratio, the
    curve alone sets how reverberant each moment is; tails into gaps shorter than PAUSE_S
    keep their decay within the window."""
    width = max(1, int(round(window_s * ref.sr)))
    room = room.astype(np.float64)
    dry_energy = uniform_filter1d(ref.audio.astype(np.float64) ** 2, width, mode="constant")
    room_energy = uniform_filter1d(room**2, width, mode="constant")
    onset, offset = int(ref.span.onset_s * ref.sr), int(ref.span.offset_s * ref.sr)
    ratio = room_energy[onset:offset].sum() / max(dry_energy[onset:offset].sum(), 1e-30)
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.sqrt(ratio * dry_energy / room_energy)
    gain = np.minimum(np.nan_to_num(gain, nan=0.0, posinf=0.0), 10 ** (MAX_RATIO_GAIN_DB / 20))
    return room * gain


def _outside_pauses(ref: Analysis) -> np.ndarray:
    """Per-sample weight, 0 within the speech's pauses of PAUSE_S or more, 1 elsewhere (raised
    cosines of PAUSE_FADE_S at their edges): a room rings only forward, so a pause after loud
    speech would ring and one before it would not, and which pauses ring follows the direction."""
    active = ref.active.copy()
    frames = np.arange(len(active))
    centres = (frames + 0.5) * FRAME_S
    inside = (centres >= ref.span.onset_s) & (centres <= ref.span.offset_s)
    quiet = inside & ~active
    edges = np.flatnonzero(np.diff(np.concatenate([[0], quiet.astype(np.int8), [0]])))
    keep = np.ones(len(active))
    for start, stop in zip(edges[0::2], edges[1::2], strict=True):
        if (stop - start) * FRAME_S >= PAUSE_S:
            keep[start:stop] = 0.0
    fade = max(1, int(round(PAUSE_FADE_S / FRAME_S)))
    keep = np.convolve(
        np.pad(keep, fade, mode="edge"),
        np.hanning(2 * fade + 1) / np.hanning(2 * fade + 1).sum(),
        "same",
    )[fade:-fade]
    keep = np.minimum(keep, 1.0)
    return np.interp(np.arange(len(ref.audio)) / ref.sr, centres, keep)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """The return level, read from energies: reverb energy at t integrates the source energy
    of the last second or so. Dividing the clip's reverb energy by the source energy
    passed through a generic exponential decay cancels that memory (build-up at the start,
    ringing after loud words), so a held level reads as held and a ramp as a ramp."""
    wet = frame_rms(gain_matched_residual(clip, ref), ref.sr) ** 2
    dry = frame_rms(ref.audio, ref.sr) ** 2
    a = np.exp(-6.908 * 2 * FRAME_S / MODEL_RT60_S)  # energy decays at twice the amplitude rate
    expected = lfilter([1 - a], [1, -a], dry)
    n = min(len(wet), len(expected))
    floor = ref.floor_power
    out = []
    for window in windows(ref, n):
        w, e = wet[:n][window].sum() + floor * window.sum(), expected[:n][window].sum()
        out.append(db(w / e + INAUDIBLE_RATIO) if e > 0 else float("nan"))
    return Measured(out[0], out[1])


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("recording", "reverberant", "dry"))
# evidence: the default, the energy added to the source (late vs early)

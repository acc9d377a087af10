"""Make every clip of a source alike in everything but the target dimension.

A clip leaks its label through cues no listener should use when those cues differ between
an increase clip and its decrease twin: exact digital silence at one end, absolute level
or peak, loudness that a process changes as a side effect. Three steps remove them:

- a **room-tone floor**: the same low, steady pink noise under every clip of a source (and
  under its reference), added after processing, so no clip has exact digital silence and
  the edges differ only by the target;
- **loudness compensation**: a slow gain that makes the clip's momentary loudness follow
  the source's, for dimensions whose processing changes loudness as a side effect;
- **drift cancellation**: a last, very slow gain (one sine period over the speech, zero at
  its ends) that sets the clip's late-minus-early loudness to the source's exactly, so the
  compensation's small residue (0.1 dB on speed, its sign following the direction) is gone;
  a clip whose course turns (a contour's peak or dip) has the same done along its course
  (`cancel_course`);
- **level roving**: each clip's overall level is drawn at random (seeded by the item), so
  absolute level and peak carry nothing.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.optimize import brentq
from scipy.signal import lfilter

from vocalgrad.audio import FRAME_S, k_weighted_frame_power
from vocalgrad.stimuli.confounds import early_late_frames, high_minus_low_db

ROOM_TONE_DB = -50.0  # room-tone RMS relative to the source's speech RMS
ROVE_DB = 3.0  # overall level drawn uniformly from +-ROVE_DB
MOMENTARY_S = 0.4  # BS.1770 momentary-loudness window: the loudness the gain follows
GAIN_SMOOTHING_S = 0.2  # extra smoothing so the compensation itself is a slow gain
ACTIVE_DB = 30.0  # frames within 30 dB of the loudest momentary level count as speech

# Paul Kellet's 3-pole approximation of a -3 dB/octave (pink) spectrum.
_PINK_B = np.array([0.049922035, -0.095993537, 0.050612699, -0.004408786])
_PINK_A = np.array([1.0, -2.494956002, 2.017265875, -0.522189400])
_WARM_UP = 4096  # samples the pink filter settles on before the output starts


def room_tone(n_samples: int, seed: int | list[int], rms: float) -> np.ndarray:
    """Pink noise of the given RMS. Deterministic and prefix-stable: the first n samples
    are the same whatever length is asked, so a clip with a reverb tail and its reference
    share the same floor sample for sample."""
    white = np.random.default_rng(seed).standard_normal(n_samples + _WARM_UP)
    pink = lfilter(_PINK_B, _PINK_A, white)[_WARM_UP:]
    return (pink * (rms / _PINK_RMS)).astype(np.float32)


def _pink_rms() -> float:
    white = np.random.default_rng(12345).standard_normal(1 << 18)
    return float(np.sqrt(np.mean(lfilter(_PINK_B, _PINK_A, white)[_WARM_UP:] ** 2)))


_PINK_RMS = _pink_rms()


def room_tone_rms(speech_rms: float) -> float:
    return float(speech_rms * 10 ** (ROOM_TONE_DB / 20))


def rove_gain_db(seed: int, key: str) -> float:
    """The clip's overall level offset (dB), from (global seed, its rove key) alone."""
    return float(np.random.default_rng([seed, int(key, 16), 7]).uniform(-ROVE_DB, ROVE_DB))


def stratified_rove_gain_db(seed: int, group: str, kind: str, slot: int, n_slots: int) -> float:
    """One of `n_slots` overall level offsets (dB) that split +-ROVE_DB into equal strata.

    Systematic sampling: slot k takes stratum order[k] at one start drawn per (seed, group),
    in an order drawn per (seed, group, kind). Each offset is uniform over +-ROVE_DB, and
    the group's slots average within ROVE_DB / n_slots of 0 dB.
    Why: drawn apart, a source's constants and its changing clips differed in mean level by
    about 1 dB (SD over sources), and a build's constant gate read it where one dimension's
    constants came out quieter over all sources (docs/results.md).

    Parameters
    ----------
    seed : int
        The build's seed.
    group : str
        Hex key of the slots sharing one start (a source's clips of one category).
    kind : str
        Which slots of the group (changing pairs or constants): each kind its own order.
    slot : int
        This clip's slot, 0 <= slot < n_slots.
    n_slots : int
        Slots of this kind in the group.

    Returns
    -------
    float
        The offset, dB.
    """
    if not 0 <= slot < n_slots:
        raise ValueError(f"rove slot {slot} outside 0..{n_slots - 1}")
    start = np.random.default_rng([seed, int(group, 16), 7]).uniform()
    order = np.random.default_rng([seed, int(group, 16), zlib.crc32(kind.encode()), 8])
    stratum = int(order.permutation(n_slots)[slot])
    return float(-ROVE_DB + 2 * ROVE_DB * (stratum + start) / n_slots)


def momentary_power(frame_power: np.ndarray) -> np.ndarray:
    """K-weighted power over a sliding 400 ms window (the momentary-loudness window)."""
    return uniform_filter1d(frame_power, max(1, int(round(MOMENTARY_S / FRAME_S))), mode="nearest")


def compensate_loudness(
    clip: np.ndarray,
    ref_frame_power: np.ndarray,
    sr: int,
    to_source_time: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Apply a slow gain so the clip's momentary loudness follows the source's. Returns the
    clip and its K-weighted 10 ms frame power after the gain (the gain is slow enough to
    scale each frame's power by its own value), which `cancel_drift` reuses.

    ``ref_frame_power`` is the source's K-weighted 10 ms frame power; ``to_source_time``
    maps clip times to source times where the clip is time-warped (speaking speed). The
    gain is estimated on speech frames only and held across pauses (0 dB before and after the
    speech, so the background at the file edges is alike in every clip), so a reverb tail or
    the room tone in a pause is never pumped up or down.
    """
    clip_power = k_weighted_frame_power(clip, sr)
    n = len(clip_power)
    centres = (np.arange(n) + 0.5) * FRAME_S
    ref_times = centres if to_source_time is None else to_source_time(centres)
    ref_centres = (np.arange(len(ref_frame_power)) + 0.5) * FRAME_S
    ref_power = np.interp(ref_times, ref_centres, ref_frame_power, left=0.0, right=0.0)
    ref_m, clip_m = momentary_power(ref_power), momentary_power(clip_power)
    active = ref_m > ref_m.max() * 10 ** (-ACTIVE_DB / 10)
    active &= clip_m > 0
    if not active.any():
        return clip, clip_power
    gain_db = np.full(n, np.nan)
    gain_db[active] = 10 * np.log10(ref_m[active] / clip_m[active])
    index = np.arange(n)
    gain_db = np.interp(index, index[active], gain_db[active])  # held across pauses
    # none before the first speech frame or after the last: the source's own background at the
    # file edges stays as it is in every clip, not raised or lowered with the nearest syllable
    gain_db[: index[active][0]] = 0.0
    gain_db[index[active][-1] + 1 :] = 0.0
    gain_db = uniform_filter1d(
        gain_db, max(1, int(round(GAIN_SMOOTHING_S / FRAME_S))), mode="nearest"
    )
    # interpolated between frames as a factor, so no per-sample power is taken (it runs on
    # every clip); for a 200 ms-smooth gain this is within 0.005 dB of interpolating dB even
    # across a 12 dB step
    sample_gain = np.interp(np.arange(len(clip)) / sr, centres, 10 ** (gain_db / 20))
    return (clip * sample_gain).astype(np.float32), clip_power * 10 ** (gain_db / 10)


MAX_DRIFT_GAIN_DB = (
    1.0  # the cancelling sine's largest amplitude; the residues it removes are < 0.3 dB
)


def cancel_drift(
    clip: np.ndarray,
    sr: int,
    onset_s: float,
    mid_s: float,
    offset_s: float,
    target_db: float,
    power: np.ndarray | None = None,
) -> np.ndarray:
    """`clip` under a gain of a * sin(2 pi u) dB, u running 0 -> 1 over [onset, offset] (0 dB
    outside, so the edges keep their level), with a chosen so that the clip's late-minus-
    early loudness (`late_minus_early_db` about `mid_s`) equals `target_db`, the source's.
    Solved on the K-weighted frame energies (`power`, up to a constant factor; measured if
    not given), which a gain this slow scales frame by frame."""
    if not np.isfinite(target_db) or offset_s - onset_s < 4 * FRAME_S:
        return clip
    if power is None:
        power = k_weighted_frame_power(clip, sr)
    centres = (np.arange(len(power)) + 0.5) * FRAME_S

    def shape(t: np.ndarray) -> np.ndarray:
        u = (t - onset_s) / (offset_s - onset_s)
        return np.where((u >= 0) & (u <= 1), np.sin(2 * np.pi * np.clip(u, 0, 1)), 0.0)

    frame_shape = shape(centres)
    # late_minus_early_db of the gained energies, on the frames it reads (solved ~7 times a clip)
    early, late = early_late_frames(len(power), onset_s, mid_s, offset_s)
    p_early, s_early, p_late, s_late = (
        power[early],
        frame_shape[early],
        power[late],
        frame_shape[late],
    )
    if not p_early.size or not p_late.size or p_early.sum() <= 0 or p_late.sum() <= 0:
        return clip

    def residue(a: float) -> float:
        late_mean = np.mean(p_late * 10 ** (a * s_late / 10))
        early_mean = np.mean(p_early * 10 ** (a * s_early / 10))
        return float(10 * np.log10(late_mean / early_mean)) - target_db

    return _slow_gain(clip, sr, onset_s, offset_s, _amplitude(residue), shape)


def _amplitude(residue: Callable[[float], float]) -> float:
    """The amplitude (dB, within +-MAX_DRIFT_GAIN_DB) at which `residue` is 0: the nearer
    bound where it lies beyond them, 0.0 (no gain) where the residue cannot be read."""
    low, high = residue(-MAX_DRIFT_GAIN_DB), residue(MAX_DRIFT_GAIN_DB)
    if not (np.isfinite(low) and np.isfinite(high)):
        return 0.0
    if low * high > 0:  # beyond the allowed amplitude: go as far as allowed
        return -MAX_DRIFT_GAIN_DB if abs(low) < abs(high) else MAX_DRIFT_GAIN_DB
    return float(brentq(residue, -MAX_DRIFT_GAIN_DB, MAX_DRIFT_GAIN_DB, xtol=1e-5))


def _slow_gain(
    clip: np.ndarray,
    sr: int,
    onset_s: float,
    offset_s: float,
    amplitude_db: float,
    shape: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """`clip` (float32) under a gain of amplitude_db * shape(t) dB over [onset, offset] s,
    0 dB beyond; the clip itself where the amplitude is 0."""
    if amplitude_db == 0.0:
        return clip
    first = min(len(clip), max(0, int(np.floor(onset_s * sr))))
    last = min(len(clip), max(first, int(np.ceil(offset_s * sr)) + 1))  # the shape is 0 dB beyond
    out = clip.astype(np.float32, copy=True)
    # the gain on a 10 ms grid from onset to offset, interpolated per sample (a shape as slow as
    # a sine over the speech: at the 1 dB cap over 2.5 s, a 10 ms chord misses it by < 1e-4 dB)
    grid = np.linspace(onset_s, offset_s, max(2, int(np.ceil((offset_s - onset_s) / FRAME_S)) + 1))
    factor = np.interp(np.arange(first, last) / sr, grid, 10 ** (amplitude_db * shape(grid) / 20))
    out[first:last] *= factor.astype(np.float32)
    return out


def cancel_course(
    clip: np.ndarray,
    sr: int,
    onset_s: float,
    offset_s: float,
    course: Callable[[np.ndarray], np.ndarray],
    target_db: float,
) -> np.ndarray:
    """`clip` under a gain of a * course(u) dB, u running 0 -> 1 over [onset, offset] (0 dB
    outside), with a chosen so that the clip's loudness where the course is high over where
    it is low (`high_minus_low_db`, K-weighted) equals `target_db`, the source's.

    Why: the loudness compensation follows the source's momentary loudness only as closely
    as a 400 ms window and a 200 ms smoothing allow, so a pitch contour's peak left its
    middle 0.14 LU louder than its dip's (median over 24 sources), a course that the audit's
    position cues read within a source.

    Parameters
    ----------
    clip : ndarray
        Float samples at `sr` Hz, levelled (`level`).
    sr : int
        Sample rate, Hz.
    onset_s, offset_s : float
        The clip's speech span, s.
    course : callable
        Fractions of the span -> the course's value in [0, 1] (0 at both ends for a contour).
    target_db : float
        The source's `high_minus_low_db` under the same course, dB.

    Returns
    -------
    ndarray
        The clip (float32); unchanged where the contrast cannot be read, and at most
        MAX_DRIFT_GAIN_DB of gain.
    """
    if not np.isfinite(target_db) or offset_s - onset_s < 4 * FRAME_S:
        return clip
    power = k_weighted_frame_power(clip, sr)
    centres = (np.arange(len(power)) + 0.5) * FRAME_S

    def shape(t: np.ndarray) -> np.ndarray:
        u = (t - onset_s) / (offset_s - onset_s)
        return np.where((u >= 0) & (u <= 1), course(np.clip(u, 0, 1)), 0.0)

    frame_shape = shape(centres)

    def residue(a: float) -> float:
        gained = power * 10 ** (a * frame_shape / 10)
        return high_minus_low_db(gained, onset_s, offset_s, course) - target_db

    return _slow_gain(clip, sr, onset_s, offset_s, _amplitude(residue), shape)

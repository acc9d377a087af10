"""Progress curves p(t): how a change unfolds across the speech span.

p runs from 0 to 1 over the detected speech span; before onset the start value holds,
after offset the end value. A parameter follows ``start + (end - start) * p(t)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

JUMP_RAMP_S = 0.010  # a step smoothed over 10 ms: audibly a jump, but no click


def _linear(t: np.ndarray) -> np.ndarray:
    return t


def _quad_first_flat(t: np.ndarray) -> np.ndarray:
    return t**2


def _quad_last_flat(t: np.ndarray) -> np.ndarray:
    return 2 * t - t**2


SMOOTH_CURVES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "linear": _linear,
    "quad_first_flat": _quad_first_flat,
    "quad_last_flat": _quad_last_flat,
}
CURVE_NAMES = (*SMOOTH_CURVES, "jump")


def progress(curve: str, times_s: np.ndarray, onset_s: float, offset_s: float) -> np.ndarray:
    """p(t) at the given times (seconds), clamped to [0, 1] outside the speech span.

    Why the speech span and not the file: a change that unfolded over leading or trailing
    silence would be partly inaudible, and by a different share in each clip.

    Parameters
    ----------
    curve : str
        One of CURVE_NAMES: ``linear``, ``quad_first_flat`` (t**2: flat first, steep last),
        ``quad_last_flat`` (2t - t**2: steep first, flat last) or ``jump`` (a step at the
        span's midpoint, smoothed by a raised cosine over JUMP_RAMP_S).
    times_s : ndarray, shape (n,)
        Times, seconds from the start of the file.
    onset_s : float
        Start of the speech span, seconds.
    offset_s : float
        End of the speech span, seconds (a span under 1 us is taken as 1 us).

    Returns
    -------
    ndarray, shape (n,), float64
        Progress in [0, 1]: 0 up to `onset_s`, 1 from `offset_s`.

    Raises
    ------
    ValueError
        `curve` is not one of CURVE_NAMES.
    """
    if curve not in CURVE_NAMES:
        raise ValueError(f"unknown curve {curve!r}; choose from {', '.join(CURVE_NAMES)}")
    span = max(offset_s - onset_s, 1e-6)
    t = np.clip((np.asarray(times_s, dtype=np.float64) - onset_s) / span, 0.0, 1.0)
    if curve == "jump":
        half_ramp = 0.5 * JUMP_RAMP_S / span
        x = np.clip((t - 0.5 + half_ramp) / (2 * half_ramp), 0.0, 1.0)
        return 0.5 - 0.5 * np.cos(np.pi * x)
    return SMOOTH_CURVES[curve](t)


def parameter_track(
    curve: str,
    start: float,
    end: float,
    times_s: np.ndarray,
    onset_s: float,
    offset_s: float,
) -> np.ndarray:
    """The parameter value at each time: start + (end - start) * p(t).

    Parameters
    ----------
    curve : str
        One of CURVE_NAMES (see `progress`).
    start : float
        The parameter's value up to the speech onset, in the dimension's unit.
    end : float
        Its value from the speech offset, in the same unit.
    times_s : ndarray, shape (n,)
        Times, seconds from the start of the file.
    onset_s : float
        Start of the speech span, seconds.
    offset_s : float
        End of the speech span, seconds.

    Returns
    -------
    ndarray, shape (n,), float64
        The parameter at each time, in the unit of `start` and `end`.

    Raises
    ------
    ValueError
        `curve` is not one of CURVE_NAMES.
    """
    return start + (end - start) * progress(curve, times_s, onset_s, offset_s)


def sample_times(n_samples: int, sr: int) -> np.ndarray:
    """The time of each sample of a signal: where a track is evaluated for sample-wise gains.

    Parameters
    ----------
    n_samples : int
        The signal's length, samples.
    sr : int
        Sample rate, Hz.

    Returns
    -------
    ndarray, shape (n_samples,), float64
        ``i / sr`` for each sample index i, seconds.
    """
    return np.arange(n_samples, dtype=np.float64) / sr

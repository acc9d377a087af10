import numpy as np
import pytest

from vocalgrad.signal.trajectories import CURVE_NAMES, parameter_track, progress

T = np.linspace(0.0, 4.0, 4001)
ONSET, OFFSET = 0.5, 3.5


@pytest.mark.parametrize("curve", CURVE_NAMES)
def test_curves_hold_before_onset_and_after_offset(curve):
    p = progress(curve, T, ONSET, OFFSET)
    assert np.all(p[T <= ONSET] == 0.0)
    assert np.all(p[T >= OFFSET] == 1.0)
    assert np.all(np.diff(p) >= -1e-12), "progress never goes backwards"


def test_curve_shapes_at_midpoint():
    mid = np.array([(ONSET + OFFSET) / 2])
    assert progress("linear", mid, ONSET, OFFSET)[0] == pytest.approx(0.5)
    assert progress("quad_first_flat", mid, ONSET, OFFSET)[0] == pytest.approx(0.25)
    assert progress("quad_last_flat", mid, ONSET, OFFSET)[0] == pytest.approx(0.75)


def test_jump_is_a_short_smooth_step():
    p = progress("jump", T, ONSET, OFFSET)
    moving = T[(p > 0.01) & (p < 0.99)]
    assert moving.size > 0 and moving.max() - moving.min() <= 0.011
    assert abs(moving.mean() - 2.0) < 0.01


def test_parameter_track_interpolates_and_reverses():
    up = parameter_track("linear", -3.0, 3.0, T, ONSET, OFFSET)
    down = parameter_track("linear", 3.0, -3.0, T, ONSET, OFFSET)
    assert up[0] == -3.0 and up[-1] == 3.0
    np.testing.assert_allclose(up, -down)


def test_unknown_curve_is_rejected():
    with pytest.raises(ValueError, match="unknown curve"):
        progress("zigzag", T, ONSET, OFFSET)

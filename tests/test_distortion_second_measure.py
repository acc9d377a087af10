"""benchmarks/distortion_second_measure.py: its readings see a hold and its rate."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_benchmark


def test_a_hold_repeats_one_minus_its_rate_over_the_sample_rate():
    bench = load_benchmark("distortion_second_measure")
    sr = 16000
    x = np.round(8000 * np.random.default_rng(0).standard_normal(sr)).astype(np.int16)
    assert bench.held_share(x) < 0.01
    for rate in (12000.0, 6000.0):
        held = bench.probe_hold(x, sr, rate)
        assert bench.held_share(held) == pytest.approx(1 - rate / sr, abs=0.01), rate


def test_the_error_grows_as_the_hold_slows_and_ignores_a_gain():
    bench = load_benchmark("distortion_second_measure")
    sr = 16000
    t = np.arange(sr) / sr
    x = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((200, 900, 2500, 5000), 1))
    slow, fast = bench.probe_hold(x, sr, 6000.0), bench.probe_hold(x, sr, 12000.0)
    assert bench.error_db(slow, x, sr) > bench.error_db(fast, x, sr) + 3
    assert bench.error_db(0.5 * x, x, sr) == -np.inf  # a gain alone is no error

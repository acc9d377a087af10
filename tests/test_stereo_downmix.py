"""Stereo direction's pan law (benchmarks/stereo_downmix.py): the renderer holds the sum of
the ears wherever the voice is, so the mono downmix of a voice off to one side is quieter;
holding the downmix instead moves the loss onto the ears (issue #24: the constant clips'
AUC, traced to its mechanism)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import arctic_path, load_benchmark

from vocalgrad.stimuli.render import prepare_reference


@pytest.fixture(scope="module")
def bench_and_source():
    return load_benchmark("stereo_downmix"), prepare_reference(str(arctic_path()), 16000, -23.0)


def _relative_to_ahead(bench, ears: np.ndarray, ahead: np.ndarray, sr: int) -> np.ndarray:
    return np.subtract(bench.loudness_pair(ears, sr), bench.loudness_pair(ahead, sr))


def test_the_renderer_holds_the_ears_and_the_downmix_of_a_side_voice_is_quieter(
    bench_and_source,
):
    bench, ref = bench_and_source
    ahead = bench.render_current(ref, np.array([0.0, 0.0]))
    mono, ears = _relative_to_ahead(
        bench, bench.render_current(ref, np.array([45.0, 45.0])), ahead, ref.sr
    )
    assert abs(ears) < 0.1
    assert mono < -1.5
    left = bench.render_current(ref, np.array([-45.0, -45.0]))
    assert bench.loudness_pair(left, ref.sr) == pytest.approx(
        bench.loudness_pair(bench.render_current(ref, np.array([45.0, 45.0])), ref.sr), abs=0.05
    )  # the head is symmetric: either side alike


def test_holding_the_downmix_moves_the_loss_onto_the_ears(bench_and_source):
    bench, ref = bench_and_source
    side = np.array([45.0, 45.0])
    ahead_current = bench.render_current(ref, np.array([0.0, 0.0]))
    exact = bench.render_mid_capped(ref, side, cap_db=60.0)
    ahead = bench.render_mid_capped(ref, np.array([0.0, 0.0]), cap_db=60.0)
    assert bench.loudness_pair(ahead, ref.sr) == pytest.approx(
        bench.loudness_pair(ahead_current, ref.sr), abs=0.05
    )  # ahead both laws agree
    mono, ears = _relative_to_ahead(bench, exact, ahead, ref.sr)
    assert abs(mono) < 0.1 and ears > 2.0
    capped_mono, capped_ears = _relative_to_ahead(
        bench, bench.render_mid_capped(ref, side, cap_db=3.0), ahead, ref.sr
    )
    current_mono, _ = _relative_to_ahead(
        bench, bench.render_current(ref, side), ahead_current, ref.sr
    )
    assert current_mono < capped_mono < mono  # the cap splits the loss between the two
    assert 0.0 < capped_ears < ears

"""Stereo direction's pan law (benchmarks/stereo_downmix.py): since renderer revision 18 the
renderer holds the mono downmix of the ears per octave band, so a voice off to one side is as
loud to a model that sums to mono as one ahead, and the sum of the ears rises instead; the
revision-17 law held the ears and lost level in the downmix (issue #54: stereo direction's
constant clips were told from its sweeps by that loss)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import arctic_path, load_benchmark

from vocalgrad.stimuli.render import prepare_reference


@pytest.fixture(scope="module")
def bench_and_source():
    return load_benchmark("stereo_downmix"), prepare_reference(str(arctic_path()), 16000, -23.0)


def _relative_to_ahead(bench, render, ref, azimuth_deg: float) -> np.ndarray:
    side = render(ref, np.array([azimuth_deg, azimuth_deg]))
    ahead = render(ref, np.array([0.0, 0.0]))
    return np.subtract(bench.loudness_pair(side, ref.sr), bench.loudness_pair(ahead, ref.sr))


def test_the_renderer_holds_the_downmix_and_the_ears_rise_off_to_one_side(bench_and_source):
    bench, ref = bench_and_source
    mono, ears = _relative_to_ahead(bench, bench.render_current, ref, 45.0)
    assert abs(mono) < 0.5
    assert ears > 1.5
    right = bench.render_current(ref, np.array([45.0, 45.0]))
    left = bench.render_current(ref, np.array([-45.0, -45.0]))
    assert bench.loudness_pair(left, ref.sr) == pytest.approx(
        bench.loudness_pair(right, ref.sr), abs=0.05
    )  # the head is symmetric: either side alike


def test_the_revision_17_law_held_the_ears_and_lost_level_in_the_downmix(bench_and_source):
    bench, ref = bench_and_source
    mono, ears = _relative_to_ahead(bench, bench.render_ears_held, ref, 45.0)
    assert abs(ears) < 0.1 and mono < -1.5
    held_mono, _ = _relative_to_ahead(bench, bench.render_current, ref, 45.0)
    assert held_mono > mono + 1.5
    ahead = np.array([0.0, 0.0])
    assert bench.loudness_pair(bench.render_current(ref, ahead), ref.sr) == pytest.approx(
        bench.loudness_pair(bench.render_ears_held(ref, ahead), ref.sr), abs=0.05
    )  # ahead both laws agree

"""The renderer's remedies for order-free leaks, on real recorded speech: a level-like
dimension starts from the levelled source, and echo ends its reverberation with the speech."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RENDER_SR

from vocalgrad.audio import FRAME_S
from vocalgrad.dimensions import echo, volume
from vocalgrad.dimensions._shared import flatten_gain, levelled
from vocalgrad.signal.analysis import Analysis
from vocalgrad.stimuli.order_free import momentary_db
from vocalgrad.stimuli.plan import Condition, item_id
from vocalgrad.stimuli.render import prepare_reference, prepare_source, render_condition


@pytest.fixture(scope="module")
def sources(real_speech_paths):
    return [prepare_source(prepare_reference(str(p), RENDER_SR, -26.0), i + 1)
            for i, p in enumerate(real_speech_paths)]


def _half_levels(audio: np.ndarray, ref: Analysis) -> tuple[float, float]:
    """Mean K-weighted power (dB) of the speech frames in each half of the span."""
    clip = Analysis(audio, ref.sr, span=ref.span)
    power = clip.k_power[: len(ref.active)]
    centres = (np.arange(len(power)) + 0.5) * FRAME_S
    mid = (ref.span.onset_s + ref.span.offset_s) / 2
    active = ref.active[: len(power)] & (centres >= ref.span.onset_s) & (centres <= ref.span.offset_s)
    early, late = active & (centres < mid), active & (centres >= mid)
    return tuple(10 * np.log10(power[m].mean()) for m in (early, late))  # type: ignore[return-value]


def test_levelled_source_has_no_slow_level_course(sources):
    """Declination gone: the two halves of the speech within 1.5 dB (they were apart by more
    on some source), silences untouched (0 dB outside the span), a pure function of the source."""
    spread_before, spread_after = [], []
    for s in sources:
        ref = s.clean
        early, late = _half_levels(ref.audio, ref)
        spread_before.append(abs(late - early))
        early, late = _half_levels(levelled(ref), ref)
        spread_after.append(abs(late - early))
        gain = flatten_gain(ref)
        outside = np.arange(len(gain)) / ref.sr < ref.span.onset_s - 0.2
        assert np.allclose(gain[outside], 1.0, atol=1e-3)
        assert np.array_equal(gain, flatten_gain(Analysis(ref.audio.copy(), ref.sr)))
    assert max(spread_after) < 1.5, spread_after
    assert max(spread_before) > max(spread_after)


def _pair(source, category: str, start: float, end: float, curve: str = "linear"):
    up = Condition(category, "high", curve, "increase", end - start, start, end)
    down = up.twin()
    ids = item_id(0, "s", up), item_id(0, "s", down)
    return (render_condition(source, up, 0, ids[0], ids[1]), render_condition(source, down, 0, ids[1], ids[0]))


def test_volume_twins_mirror_each_other_in_level_and_constants_stay_constant(sources):
    """The loud end of an increase and of its decrease twin lie within 2 dB of each other
    (the source's loud start no longer makes the decrease louder), and a held gain reads as
    held against the levelled source: verification stays exact."""
    for s in sources:
        up, down = _pair(s, "volume", -9.0, 9.0)
        assert up.verified and down.verified
        p_up, p_down = (np.percentile(momentary_db(r.audio, RENDER_SR), 95) for r in (up, down))
        assert abs(p_up - p_down) < 2.0, (p_up, p_down)
        held = Condition("volume", "none", "none", "constant", 0.0, 3.0, 3.0)
        result = render_condition(s, held, 0, item_id(0, "s", held))
        assert abs(result.change) < volume.SPEC.audibility_floor, result.change


def test_echo_rings_only_within_the_speech(sources):
    """Both twins keep the source's length, and after the speech (plus the guard) both are
    the source's own edge: no twin stays audible longer than the other."""
    for s in sources:
        up, down = _pair(s, "echo", 0.0, echo.SPEC.tiers["high"])
        assert len(up.audio) == len(down.audio) == len(s.clean.audio)
        span = s.clean.span
        after = int(round((span.offset_s + 0.12) * RENDER_SR))
        tail_up, tail_down = up.audio[after:], down.audio[after:]
        if tail_up.size > RENDER_SR // 100:
            rms = [float(np.sqrt(np.mean(t.astype(np.float64) ** 2))) for t in (tail_up, tail_down)]
            assert abs(20 * np.log10(rms[0] / rms[1])) < 1.0, rms


def test_background_noise_leaves_both_twins_silences_as_the_source_s(sources):
    """Beyond the speech (and its edge guard) both twins carry the source's own samples
    under the same room tone, so no edge reads which end is noisy; inside, the noise is there."""
    for s in sources:
        up, down = _pair(s, "background_noise", 0.0, 0.12)
        span = s.clean.span
        lead = int(round((span.onset_s - 0.1) * RENDER_SR))
        trail = int(round((span.offset_s + 0.1) * RENDER_SR))
        assert np.array_equal(up.audio[:lead], down.audio[:lead])
        assert np.array_equal(up.audio[trail:], down.audio[trail:])
        assert not np.array_equal(up.audio[lead:trail], down.audio[lead:trail])

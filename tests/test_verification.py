"""Verification is independent of the renderer: planted broken renderers must fail it, and
changes a listener could not hear must be refused, on real recorded speech."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RENDER_SR
from scipy.signal import butter, sosfiltfilt

from vocalgrad import dimensions
from vocalgrad.signal.analysis import Analysis
from vocalgrad.stimuli.neutralise import rove_gain_db
from vocalgrad.stimuli.plan import Condition
from vocalgrad.stimuli.render import (
    PreparedSource,
    clip_span,
    measure_clip,
    prepare_reference,
    prepare_source,
    quantise16,
    render_condition,
    to_file,
    track_for,
    unlimited,
)

ITEM = "00000000000000cd"


@pytest.fixture(scope="module")
def sources(real_speech_paths) -> list[PreparedSource]:
    """ARCTIC and one joined ALSA phrase: two real voices, two recording chains."""
    return [
        prepare_source(prepare_reference(str(p), RENDER_SR, -26.0), i + 1)
        for i, p in enumerate(real_speech_paths[:2])
    ]


def condition(category: str, direction: str = "increase", tier: str = "high") -> Condition:
    dim = dimensions.get(category)
    magnitude = dim.SPEC.tiers[tier]
    low, high = dim.endpoints(magnitude, RENDER_SR)
    start, end = (low, high) if direction == "increase" else (high, low)
    return Condition(category, tier, "linear", direction, magnitude, start, end)


def mutated_verdict(source: PreparedSource, labelled: Condition, kind: str) -> str:
    """Render with a planted broken renderer, finish the clip as the builder does, and ask
    the verifier (which only sees the clip, the source and the label)."""
    dim = dimensions.get(labelled.category)
    span = source.clean.span
    track = track_for(labelled, dim.SPEC, span.onset_s, span.offset_s, source.clean)
    rng = np.random.default_rng(0)
    if kind == "no-op":
        raw = source.clean.audio.copy()
    elif kind == "reversed":
        flipped = Condition(
            labelled.category,
            labelled.tier,
            labelled.curve,
            "decrease",
            labelled.magnitude,
            labelled.end,
            labelled.start,
        )
        raw = dim.render(
            source.clean,
            track_for(flipped, dim.SPEC, span.onset_s, span.offset_s, source.clean),
            rng,
        )
    elif kind == "wrong dimension":
        # noise for volume; for the others a plain level ramp over the source (volume's own
        # renderer also gives the two ends of the speech one spectrum, a fixed filter that
        # error-based verifiers rightly read as a change growing with the level)
        other_name = "background_noise" if labelled.category == "volume" else "volume"
        other = dimensions.get(other_name)
        wrong = track_for(
            condition(other_name, labelled.direction),
            other.SPEC,
            span.onset_s,
            span.offset_s,
            source.clean,
        )
        if other_name == "volume":
            gain_db = wrong(np.arange(len(source.clean.audio)) / source.sr)
            raw = (source.clean.audio * 10 ** (gain_db / 20)).astype(np.float32)
        else:
            raw = other.render(source.clean, wrong, rng)
    elif kind == "outside the speech span":
        neutral = NEUTRAL.get(labelled.category, labelled.start)

        def outside(t):  # untouched speech; the change lives in the leading and trailing silences
            t = np.asarray(t, dtype=np.float64)  # (100 ms clear of the detected span's edges)
            before, after = t < span.onset_s - 0.1, t > span.offset_s + 0.1
            return np.where(before, labelled.start, np.where(after, labelled.end, neutral))

        raw = dim.render(source.clean, outside, rng)
    else:
        raise ValueError(kind)
    span = clip_span(dim, track, source.clean, len(raw))
    audio = to_file(unlimited(source, labelled.category, raw, track, span, rove_gain_db(0, ITEM)))
    return measure_clip(source, labelled.category, audio, span, labelled.direction)[3]


# the parameter value that leaves the speech untouched (where it is not the increase's start)
NEUTRAL = {
    "speaking_speed": 1.0,
    "voice_pitch": 0.0,
    "volume": 0.0,
    "brightness": 0.0,
    "vocal_tract_length": 1.0,
}
MUTATIONS = ("no-op", "reversed", "wrong dimension", "outside the speech span")


@pytest.mark.parametrize("category", dimensions.names())
def test_every_planted_broken_renderer_fails_verification(sources, category):
    honest = [render_condition(s, condition(category), 0, ITEM).verdict for s in sources]
    assert honest == ["verified"] * len(sources), honest  # the verifier accepts the real renderer
    for source in sources:
        for kind in MUTATIONS:
            assert mutated_verdict(source, condition(category), kind) != "verified", (
                category,
                kind,
            )


def telephone(source: PreparedSource) -> PreparedSource:
    """The same recording through a 300-3400 Hz telephone band."""
    sos = butter(8, [300, 3400], btype="bandpass", fs=RENDER_SR, output="sos")
    narrow = quantise16(sosfiltfilt(sos, source.clean.audio).astype(np.float32))
    return prepare_source(Analysis(narrow, RENDER_SR, span=source.clean.span), source.tone_seed)


def test_clarity_low_tier_is_refused_on_telephone_speech(sources):
    """A 5 kHz low-pass changes nothing in speech that has no energy above 4 kHz: refused
    as inaudible, never labelled; the high tier (1.2 kHz) still verifies."""
    for source in sources:
        narrow = telephone(source)
        for direction in ("increase", "decrease"):
            low = render_condition(narrow, condition("voice_clarity", direction, "low"), 0, ITEM)
            assert low.verdict == "inaudible", (direction, low.measured)
            high = render_condition(narrow, condition("voice_clarity", direction, "high"), 0, ITEM)
            assert high.verdict == "verified", (direction, high.measured)


def test_a_14_bit_requantisation_of_16_bit_speech_is_refused(sources):
    for source in sources:
        c = Condition("audio_roughness", "p1", "linear", "increase", 14.0, 16.0, 14.0)
        result = render_condition(source, c, 0, ITEM)
        assert result.verdict == "inaudible", result.measured


def test_noise_under_the_room_tone_is_refused(sources):
    for source in sources:
        c = Condition("background_noise", "p1", "linear", "increase", 0.001, 0.0, 0.001)
        assert render_condition(source, c, 0, ITEM).verdict == "inaudible"


def test_a_held_decimation_reads_constant_when_the_sentence_gets_louder(sources):
    """Telephone speech, its second half 15 dB louder, held at one decimation rate: the
    images above 3.4 kHz grow with the speech, and only the speech, so the verifier must
    read no change (against the room tone alone they read ~10 dB more distortion)."""
    for source in sources:
        audio = source.clean.audio.copy()
        half = (source.clean.span.onset_s + source.clean.span.offset_s) / 2
        audio[int(half * RENDER_SR) :] *= 10 ** (15 / 20)
        louder = Analysis(audio / 10 ** (15 / 20), RENDER_SR, span=source.clean.span)
        narrow = telephone(prepare_source(louder, source.tone_seed))
        held = Condition("audio_distortion", "p1", "linear", "constant", 12000.0, 12000.0, 12000.0)
        result = render_condition(narrow, held, 0, ITEM)
        # up to 3.6 dB: a source's first 400 ms are attenuated to match its end's level
        # course (`matched_edge_courses`), so the head's images lie nearer the room tone
        assert abs(result.change) < 4.0, result.measured
        assert result.verdict == "verified"

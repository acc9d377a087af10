"""Every dimension, rendered on real recorded speech, must be measurably what its label says."""

import dataclasses
from collections import defaultdict

import numpy as np
import pytest
from conftest import RENDER_SR
from scipy.special import erf

from vocalgrad import dimensions
from vocalgrad.audio import PEAK_CEILING, k_weighted_frame_power
from vocalgrad.dimensions import background_noise, voice_pitch
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.trajectories import CURVE_NAMES, progress
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.confounds import late_minus_early_db, measure_confounds
from vocalgrad.stimuli.neutralise import ROVE_DB, cancel_drift, rove_gain_db
from vocalgrad.stimuli.plan import Condition, held_constant, item_id, plan_conditions
from vocalgrad.stimuli.render import (
    PreparedSource,
    prepare_reference,
    prepare_source,
    render_condition,
    track_for,
)

CONFIG = BuildConfig(sample_rate=RENDER_SR, categories=dimensions.names())
LSB = 2.0**-15  # one 16-bit quantisation step


@pytest.fixture(scope="module")
def references(real_speech_paths) -> list[PreparedSource]:
    return [
        prepare_source(prepare_reference(str(p), RENDER_SR, -26.0), i + 1)
        for i, p in enumerate(real_speech_paths)
    ]


@pytest.fixture(scope="module")
def rendered(references):
    """(condition, result) for the whole published grid on every real recording."""
    conditions, _ = plan_conditions(CONFIG)
    out = []
    for i, ref in enumerate(references):
        for condition in conditions:
            out.append(
                (i, condition, render_condition(ref, condition, 0, item_id(0, str(i), condition)))
            )
    return out


def test_measured_direction_agrees_with_label_on_real_speech(rendered):
    """The issue's bar: >= 99% agreement in every category on real recordings, among the
    clips whose realised change clears the audibility floor; few are refused."""
    agree, refused = defaultdict(list), defaultdict(list)
    for _, condition, result in rendered:
        if condition.direction != "constant":
            refused[condition.category].append(result.verdict == "inaudible")
            if result.verdict != "inaudible":
                agree[condition.category].append(result.verified)
    assert set(agree) == set(dimensions.names())
    rates = {c: float(np.mean(v)) for c, v in agree.items()}
    assert all(r >= 0.99 for r in rates.values()), rates
    assert all(np.mean(v) <= 0.1 for v in refused.values()), {
        c: np.mean(v) for c, v in refused.items()
    }


def test_measured_size_grows_with_tier(rendered):
    """The change grows with the tier, or (for log-level measures of something added from
    nothing: noise, reverb, error) the level at the degraded end does."""
    by = defaultdict(list)
    for _, c, r in rendered:
        if c.direction != "constant" and r.verdict == "verified":
            by[(c.category, c.tier)].append((abs(r.change), max(r.measured.start, r.measured.end)))
    for category in dimensions.names():
        tiers = [t for t in ("low", "mid", "high") if (category, t) in by]
        change = [np.median([a for a, _ in by[(category, t)]]) for t in tiers]
        degraded = [np.median([b for _, b in by[(category, t)]]) for t in tiers]
        assert change == sorted(change) or degraded == sorted(degraded), (
            category,
            change,
            degraded,
        )


def test_constant_clips_do_not_change(rendered):
    results = defaultdict(list)
    for _, c, r in rendered:
        if c.direction == "constant":
            results[c.category].append(r.verified)
    rates = {c: float(np.mean(v)) for c, v in results.items()}
    # echo and distortion measures still move with the content on short real phrases
    assert all(r >= 0.6 for r in rates.values()), rates


def test_no_clip_ever_clips(rendered):
    for _, c, r in rendered:
        assert r.confounds["clipping_ratio"] == 0.0, c
        assert np.max(np.abs(r.audio)) < 0.9


def test_duration_is_the_same_for_every_clip_of_a_source_and_category(rendered):
    """Speed keeps the source's duration (its silences are not stretched); nothing else
    changes length (echo ends its reverberation with the speech)."""
    lengths = defaultdict(set)
    for i, c, r in rendered:
        lengths[(i, c.category)].add(len(r.audio))
    for (_, category), values in lengths.items():
        if category == "speaking_speed":
            assert max(values) - min(values) <= 0.01 * max(values), values
        else:
            assert len(values) == 1, (category, values)


def floor_zero_share(rms: float) -> float:
    """Share of exact zeros that 16-bit quantisation leaves in a Gaussian floor of this RMS:
    the chance that a sample rounds to 0, P(|x| < half a step)."""
    return float(erf(0.5 * LSB / (rms * np.sqrt(2))))


def test_no_exact_digital_silence_and_edges_alike(references, rendered):
    """Every clip carries the room-tone floor: its first and last 300 ms hold no more exact
    zeros than that floor alone leaves after 16-bit quantisation (about 10% for a -50 dB
    floor at the lowest rove), and no edge is quieter than the floor (unless the pair was
    peak-limited, which lowers the floor with it). Increase and decrease
    have alike edges, except where the target itself reaches into the pauses (a coarse
    quantiser or a quiet volume end silences a recording's own background there, leaving the
    bare floor: the audit counts edge zeros as a target cue of those categories); there the
    twins may differ by at most what the bare floor holds."""
    n = int(0.3 * RENDER_SR)
    shares = defaultdict(list)
    for i, c, r in rendered:
        floor = references[i].tone_rms * 10 ** (r.rove_db / 20)
        bound = floor_zero_share(references[i].tone_rms * 10 ** (-ROVE_DB / 20)) + 0.02
        for edge, part in (("first", r.audio[:n]), ("last", r.audio[-n:])):
            zeros = float(np.mean(part == 0))
            shares[(c.category, c.direction, edge)].append(zeros)
            assert zeros < bound, (c, edge, zeros, bound)
            limited = (
                np.max(np.abs(r.audio)) >= 0.99 * PEAK_CEILING
            )  # the tone went down with the pair
            assert limited or np.sqrt(np.mean(np.square(part, dtype=np.float64))) > 0.9 * floor, (
                c,
                edge,
            )
    bare = max(floor_zero_share(ref.tone_rms * 10 ** (-ROVE_DB / 20)) for ref in references)
    for category in dimensions.names():
        gated = "edge_zeros" in dimensions.get(category).SPEC.target_cues
        for edge in ("first", "last"):
            up = np.mean(shares[(category, "increase", edge)])
            down = np.mean(shares[(category, "decrease", edge)])
            assert abs(up - down) < (bare if gated else 0.05), (category, edge, up, down)


def test_level_roving_and_loudness_neutrality(rendered):
    """Overall level is roved per twin pair (an increase clip and its decrease twin share one
    rove, so no rove can follow the direction by chance; constants draw their own);
    non-volume processing keeps the late-minus-early loudness of the source: the drift
    cancellation leaves nothing a direction could follow (before it, speed drifted -0.10 dB
    for increase and +0.03 dB for decrease)."""
    roves = [r.rove_db for _, _, r in rendered]
    assert -3.0 <= min(roves) < -1.0 and 1.0 < max(roves) <= 3.0
    pairs = defaultdict(dict)
    for i, c, r in rendered:
        pairs[(i, c.pair_key)][c.direction] = r.rove_db
    twins = [p for p in pairs.values() if "increase" in p]
    assert twins and all(p["increase"] == p["decrease"] for p in twins)
    assert len({p["increase"] for p in twins}) > 0.9 * len(twins)  # drawn anew for every pair
    constants = [p["constant"] for p in pairs.values() if "constant" in p]
    assert constants and not set(constants) & {p["increase"] for p in twins}
    drift = defaultdict(list)
    for _, c, r in rendered:
        if c.direction != "constant" and np.isfinite(r.confounds["loudness_drift_db"]):
            drift[c.category].append(r.confounds["loudness_drift_db"])
    for category, values in drift.items():
        if not dimensions.get(category).SPEC.loudness_neutral:  # level is (part of) the target
            continue
        assert np.max(np.abs(values)) < 0.02, (category, np.max(np.abs(values)))


def test_twins_share_one_peak_limit(real_speech_paths):
    """A loud source (-14 LUFS) drives one twin's loud end past the ceiling. Limited alone,
    that clip came out quieter than its twin (2-6 dB over the speech span: overall loudness
    told the direction); limited with its twin, the two differ by nothing but the course of
    the gain, and the twin asked for next is the one already rendered. Loudness is read both
    ways, as the renderer levels (`span_loudness`): read forwards alone, a ramp up and its
    mirror image read apart by the meter's block layout."""
    from vocalgrad.stimuli.render import span_loudness

    def speech_loudness(result) -> float:
        return span_loudness(result.audio, RENDER_SR, result.clip.span)

    path = real_speech_paths[0]
    (up, _), _ = plan_conditions(
        BuildConfig(categories=("volume",), tiers=("high",), curves=("linear",), constants=0)
    )
    down = up.twin()
    assert (
        down.direction == "decrease"
        and (down.start, down.end) == (up.end, up.start)
        and down.twin() == up
    )
    items = {c.direction: item_id(0, "loud", c) for c in (up, down)}
    gaps = {}
    for paired in (False, True):
        source = prepare_source(prepare_reference(str(path), RENDER_SR, -14.0), 1)
        twin = (lambda c: items[c.twin().direction]) if paired else (lambda c: None)
        results = {
            c.direction: render_condition(source, c, 0, items[c.direction], twin(c))
            for c in (up, down)
        }
        assert results["increase"].rove_db == results["decrease"].rove_db
        assert (
            max(np.max(np.abs(r.audio)) for r in results.values()) > 0.88
        )  # at the -1 dBFS ceiling
        gaps[paired] = speech_loudness(results["increase"]) - speech_loudness(results["decrease"])
        assert not source.twins  # the twin waited, and was handed over when asked for
    assert abs(gaps[False]) > 2.0 and abs(gaps[True]) < 0.05, gaps


def test_a_clip_does_not_depend_on_the_order_it_is_asked_in(real_speech_paths):
    """`PreparedSource`'s memos hold what the same call computes again: a clip asked first or
    second, with its twin or alone, after its twin was rendered or not, is the same audio."""
    path = real_speech_paths[0]
    config = BuildConfig(categories=("volume",), tiers=("high",), curves=("linear",), constants=0)
    (up, _), _ = plan_conditions(config)
    down = up.twin()
    items = {c.direction: item_id(0, "order", c) for c in (up, down)}
    reference = prepare_reference(str(path), RENDER_SR, -14.0)

    def ask(order, paired=True):
        source = prepare_source(reference, 1)
        twin = (lambda c: items[c.twin().direction]) if paired else (lambda c: None)
        return {
            c.direction: render_condition(source, c, 0, items[c.direction], twin(c)).audio
            for c in order
        }

    forward, backward = ask((up, down)), ask((down, up))
    again = ask((up, up, down, down))  # an item asked twice gets its clip twice
    for d in ("increase", "decrease"):
        assert np.array_equal(forward[d], backward[d]) and np.array_equal(forward[d], again[d])
    source = prepare_source(reference, 1)
    render_condition(source, down, 0, items["decrease"], items["increase"])  # leaves its twin
    alone = render_condition(source, up, 0, items["increase"]).audio
    assert np.array_equal(alone, ask((up,), paired=False)["increase"])  # never the paired memo


def test_drift_cancellation_sets_the_sources_late_minus_early_loudness():
    """A clip whose second half is 0.5 dB louder than its source's gets it back to the source's
    late-minus-early loudness, by a gain that is 0 dB outside the speech span."""
    sr = 16000
    rng = np.random.default_rng(0)
    t = np.arange(3 * sr) / sr
    speech = (rng.standard_normal(len(t)) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))).astype(
        np.float32
    )
    speech[: sr // 2] *= 0.01
    speech[-sr // 2 :] *= 0.01
    onset, offset = 0.5, 2.5
    tilted = speech * np.where(t >= 1.5, 10 ** (0.5 / 20), 1.0).astype(np.float32)
    target = late_minus_early_db(k_weighted_frame_power(speech, sr), onset, 1.5, offset)
    before = late_minus_early_db(k_weighted_frame_power(tilted, sr), onset, 1.5, offset)
    fixed = cancel_drift(tilted, sr, onset, 1.5, offset, target)
    after = late_minus_early_db(k_weighted_frame_power(fixed, sr), onset, 1.5, offset)
    assert abs(before - target) > 0.4
    assert abs(after - target) < 0.005
    outside = (t < onset) | (t > offset)
    np.testing.assert_array_equal(fixed[outside], tilted[outside])


def test_speed_keeps_the_source_silences(references):
    ref = references[0]
    span = ref.clean.span
    for start, end in ((0.6, 1.4), (1.4, 0.6)):
        c = Condition(
            "speaking_speed",
            "high",
            "linear",
            "increase" if end > start else "decrease",
            0.4,
            start,
            end,
        )
        r = render_condition(ref, c, 0, "00000000000000ac")
        assert r.clip.span.onset_s == pytest.approx(span.onset_s, abs=1e-6)
        assert r.clip.span.offset_s == pytest.approx(span.offset_s, abs=0.02)
        assert len(r.audio) == pytest.approx(len(ref.clean.audio), rel=0.005)


def test_a_held_tremolo_reads_alike_at_both_ends_of_builtin_speech(cache_dir, builtin_cache):
    """A constant clip's tremolo must measure the same in the head and the tail, whichever
    phases of it the speech happens to be active at: the RMS of a 4-12 Hz band read 12 of 192
    builtin constants more than the 1.5 dB tolerance apart (up to 3.7 dB), so their
    verification failed at random; the fit of the tremolo's rate reads none (at most 1.35)."""
    from vocalgrad.sources import builtin_sources, ensure_rendered

    sources = ensure_rendered(builtin_sources(cache_dir, max_sentences=3))
    limit = dimensions.get("voice_vibration").SPEC.constant_limit
    apart = []
    for i, src in enumerate(sources):
        prepared = prepare_source(prepare_reference(src.path, RENDER_SR, -26.0), i + 1)
        for depth in (0.6, 0.75, 0.9):
            held = Condition("voice_vibration", "mid", "linear", "constant", 0.75, depth, depth)
            result = render_condition(prepared, held, 11, f"{i:08x}{int(depth * 100):08x}")
            apart.append(abs(result.change))
    assert len(apart) >= 60 and max(apart) <= limit, sorted(apart)[-5:]


def test_a_held_tremolo_meets_both_ends_of_the_speech_at_one_phase(references):
    """The speech's onset and offset see the same tremolo gain, so how deep it is cannot move
    a detector's start of the speech more than its end: in a comparison item that told which
    part trembled from the edges' summed silence (builtin 32 + 32: order-free 0.59)."""
    dim = dimensions.get("voice_vibration")
    for source in references:
        ref = source.clean
        held = Condition("voice_vibration", "high", "linear", "constant", 0.9, 0.9, 0.9)
        track = track_for(held, dim.SPEC, ref.span.onset_s, ref.span.offset_s, centred=False)
        out = dim.render(ref, track, np.random.default_rng(0))
        voiced = np.abs(ref.audio) > 1e-3 * np.max(np.abs(ref.audio))
        gain = np.where(voiced, out / np.where(voiced, ref.audio, 1.0), np.nan)
        on, off = (int(round(t * ref.sr)) for t in (ref.span.onset_s, ref.span.offset_s))
        n = int(0.125 * ref.sr)  # one tremolo period into the speech from either end
        first, last = gain[on : on + n], gain[off - n : off][::-1]
        both = np.isfinite(first) & np.isfinite(last)
        assert both.sum() > n // 4
        assert np.max(np.abs(first[both] - last[both])) < 0.02, source.clean.span
        assert np.nanmax(gain) / np.nanmin(gain) > 10  # and it is a deep tremolo


def test_tremolo_keeps_loudness_and_noise_fills_the_speech_to_its_end(references):
    ref = references[0].clean
    dim = dimensions.get("voice_vibration")
    flat = Condition("voice_vibration", "high", "linear", "constant", 0.9, 0.9, 0.9)
    track = track_for(flat, dim.SPEC, ref.span.onset_s, ref.span.offset_s)
    deep = dim.render(ref, track, np.random.default_rng(0))
    conf = measure_confounds(Analysis(deep, ref.sr), ref)
    assert abs(conf["loudness_change_db"]) < 1.0, "power-normalised tremolo must not lower loudness"

    noise = dimensions.get("background_noise")
    up = Condition("background_noise", "high", "linear", "increase", 0.12, 0.0, 0.12)
    out = noise.render(
        ref,
        track_for(up, noise.SPEC, ref.span.onset_s, ref.span.offset_s),
        np.random.default_rng(0),
    )
    tail = slice(
        int((ref.span.offset_s - 0.3) * ref.sr), int(ref.span.offset_s * ref.sr)
    )  # the speech's end
    added = out[tail] - ref.audio[tail]
    assert np.sqrt(np.mean(added**2)) > 0.5 * 0.12 * ref.speech_rms
    # the noise ends with the speech: the file's trailing silence is the source's in both twins
    after = slice(int((ref.span.offset_s + background_noise.NOISE_FADE_S) * ref.sr) + 1, None)
    assert np.array_equal(out[after], ref.audio[after])


def test_speed_keeps_pitch_and_pitch_keeps_timing(references):
    ref = references[0]
    fast = Condition("speaking_speed", "high", "none", "constant", 0.4, 1.4, 1.4)
    r = render_condition(ref, fast, 0, "00000000000000aa")
    assert abs(r.confounds["f0_change_st"]) < 1.0  # PSOLA keeps F0; the tracker sees shorter vowels
    high = Condition("voice_pitch", "high", "linear", "increase", 3.0, -3.0, 3.0)
    r = render_condition(ref, high, 0, "00000000000000ab")
    assert r.confounds["duration_change_ratio"] == 1.0
    assert abs(r.confounds["level_slope_change_db"]) < 4.0  # PSOLA tilts the spectrum a little


def test_inaudible_conditions_are_refused_not_written():
    conditions, refused = plan_conditions(BuildConfig(sample_rate=16000))
    assert {(r["category"], r["tier"]) for r in refused} == {("audio_distortion", "low")}
    assert "changes nothing" in refused[0]["reason"]
    assert not [c for c in conditions if c.category == "audio_distortion" and c.tier == "low"]
    _, refused_48k = plan_conditions(BuildConfig(sample_rate=48000))
    assert refused_48k == []
    _, refused_8k = plan_conditions(BuildConfig(sample_rate=8000))
    assert ("voice_clarity", "low") in {(r["category"], r["tier"]) for r in refused_8k}


def test_specs_declare_units_polarity_and_ranges():
    for dim in dimensions.bound():
        name = dim.name
        spec = dim.SPEC
        assert spec.name == name and spec.unit and spec.measured_unit and spec.increase_means
        assert set(spec.tiers) == {"low", "mid", "high"}
        lo, hi = spec.psychometric_range
        assert 0 < lo < hi
    assert "clearer" in dimensions.get("voice_clarity").SPEC.increase_means
    assert "falls" in dimensions.get("audio_distortion").SPEC.increase_means
    assert "larger" in dimensions.get("vocal_tract_length").SPEC.increase_means


def test_builds_default_to_the_published_nine():
    """Newer dimensions are registered (and accepted) but opt-in: a default build is the
    published benchmark's nine categories, in its order."""
    assert BuildConfig().categories == dimensions.PUBLISHED_CATEGORIES
    assert len(dimensions.PUBLISHED_CATEGORIES) == 9
    assert dimensions.names()[:9] == dimensions.PUBLISHED_CATEGORIES
    extra = tuple(c for c in dimensions.names() if c not in dimensions.PUBLISHED_CATEGORIES)
    assert {"brightness", "vocal_tract_length", "breathiness"} <= set(extra)
    assert BuildConfig(categories=extra).categories == extra


def test_constant_clips_hold_a_value_drawn_per_clip(references):
    """A fixed middle value made "a middling amount" mark the constant clips: each now holds
    its own value, recorded in param_start/param_end, drawn the way a changing clip's values
    are spread: a planned tier at random, then a value a changing clip passes through there
    (next test). (Drawn from the mid
    tier alone, constants missed the high tier's muffled stretches: on telephone-band speech
    the spectral centroid told them apart, AUC 0.78.)"""
    conditions, _ = plan_conditions(BuildConfig(categories=("voice_clarity",)))
    constant = next(c for c in conditions if c.direction == "constant")
    tiers = {(c.start, c.end) for c in conditions if c.direction == "increase"}
    assert set(constant.ranges) == tiers and len(constant.ranges) == 3
    held = [held_constant(constant, 0, f"{i:016x}") for i in range(1, 301)]
    values = np.array([c.start for c in held])
    assert all(c.start == c.end for c in held)
    low_tier = min(s for s, _ in tiers)  # the high tier's muffled start (1,200 Hz)
    assert values.min() < 2000 < 4000 < values.max() and values.min() >= low_tier
    inner = [v for v in values if not any(np.isclose(v, e) for e in np.ravel(constant.ranges))]
    assert len(set(inner)) == len(inner) > 150  # a jump's clips sit at the ends
    rendered = [render_condition(references[0], constant, 0, f"{i:016x}") for i in (1, 2, 3)]
    assert all(r.param_start == r.param_end for r in rendered)
    assert all(r.verified for r in rendered)


def test_constant_clips_hold_values_where_changing_clips_spend_their_time():
    """A point uniform within a range matched a linear course only: a jump spends its time at
    the two ends, a quadratic course near one. Whatever whole-file statistic bends with the
    value (here p**3 of the value's place p in the range, on the dimension's scale) then
    averaged otherwise over constant clips than over changing ones: on `tones` 24 + 24 the
    compressed file's size under distortion told the constants apart (constant gate AUC
    0.611, 0.441 with values held where changing clips spend their time)."""
    conditions, _ = plan_conditions(BuildConfig(categories=("voice_clarity",), tiers=("mid",)))
    constant = next(c for c in conditions if c.direction == "constant")
    assert set(constant.curves) == set(CURVE_NAMES) and len(constant.ranges) == 1
    ((lo, hi),) = constant.ranges
    values = np.array([held_constant(constant, 0, f"{i:016x}").start for i in range(1, 4001)])
    held = np.log(values / lo) / np.log(hi / lo)  # the place in the range, on the log scale
    t = np.linspace(0.0, 1.0, 20001)
    over_changes = np.mean([np.mean(progress(c, t, 0.0, 1.0) ** 3) for c in CURVE_NAMES])
    assert abs(np.mean(held**3) - over_changes) < 0.02, (np.mean(held**3), over_changes)
    assert abs(np.mean(np.linspace(0.0, 1.0, 4000) ** 3) - over_changes) > 0.05  # uniform
    assert -1e-9 <= held.min() and held.max() <= 1.0 + 1e-9


def held(category: str, value: float, ref: Analysis):
    """The dimension's track held at one value over the whole clip."""
    flat = Condition(category, "p1", "linear", "constant", 0.0, value, value)
    return track_for(flat, dimensions.get(category).SPEC, ref.span.onset_s, ref.span.offset_s)


def test_vocal_tract_length_moves_formants_and_keeps_f0(references):
    """Formants move the labelled way (a longer tract lowers them), F0 stays within 10 cents
    frame by frame, and the pitch verifier reads no pitch change."""
    from vocalgrad.dimensions import voice_pitch

    vtl = dimensions.get("vocal_tract_length")
    for source in references[:2]:
        ref = source.clean
        for length, sign in ((1.14, 1), (1 / 1.14, -1)):
            out = Analysis(
                vtl.render(ref, held("vocal_tract_length", length, ref), np.random.default_rng(0)),
                ref.sr,
                span=ref.span,
            )
            formant = vtl.measure(out, ref)
            floor = vtl.SPEC.audibility_floor
            assert sign * formant.start > floor and sign * formant.end > floor, (length, formant)
            pitch = voice_pitch.measure(out, ref)
            assert abs(pitch.start) < 0.1 and abs(pitch.end) < 0.1, (length, pitch)


def test_vocal_tract_length_reads_an_end_the_pitch_tracker_calls_unvoiced(references):
    """A source whose last 35% is 30 dB quieter (a matched edge course can cut an end by
    20 dB) has no frame there that the pitch tracker calls voiced; the measure reads that end
    from its loud frames instead of giving up (84.4% of builtin 32 + 32 clips verified
    before, 100% after)."""
    from vocalgrad.dimensions import vocal_tract_length as module

    vtl = dimensions.get("vocal_tract_length")
    ref = references[0].clean
    audio = ref.audio.copy()
    audio[int((ref.span.offset_s - 0.35 * ref.span.duration_s) * ref.sr) :] *= 10 ** (-30 / 20)
    quiet = Analysis(audio, ref.sr, span=ref.span)
    times, _ = module.lpc_envelopes(quiet)
    _, tail = quiet.head_tail_at(times)
    assert not np.any(tail & (module.f0_at(quiet, times) > 0))
    longer = vtl.render(quiet, held("vocal_tract_length", 1.1, quiet), np.random.default_rng(0))
    measured = vtl.measure(Analysis(longer, ref.sr, span=ref.span), quiet)
    floor = vtl.SPEC.audibility_floor
    assert measured.start > floor and measured.end > floor, measured  # NaN fails too


def test_brightness_tilts_the_spectrum_and_keeps_loudness(references):
    """The raw tilt moves loudness (speech's energy lies below the 1 kHz pivot, so the
    brighter end is quieter); the built clip follows the source's loudness course within
    0.3 dB and still measures the tilt."""
    ref = references[0]
    span = ref.clean.span
    brightness = dimensions.get("brightness")
    up = Condition("brightness", "high", "linear", "increase", 3.0, -3.0, 3.0)
    raw = brightness.render(
        ref.clean,
        track_for(up, brightness.SPEC, span.onset_s, span.offset_s, ref.clean),
        np.random.default_rng(0),
    )
    drift_raw = measure_confounds(Analysis(raw, ref.sr, span=span), ref.clean)["loudness_drift_db"]
    built = render_condition(ref, up, 0, "00000000000000b1")
    assert abs(drift_raw) > 1.0, drift_raw
    assert abs(built.confounds["loudness_drift_db"]) < 0.3, built.confounds
    assert built.verified and built.change > 4.0, built.measured


def test_breathiness_lowers_hnr_in_voiced_speech_only(references):
    """Aspiration noise at 0.75 of the voice lowers the harmonics-to-noise ratio: the
    verifier reads the added aperiodic energy within a few dB of -2.5 dB re the voice (none
    reads as the -25 dB mask), and the pauses (no voicing) are left untouched."""
    from vocalgrad.dimensions.breathiness import MASKED_DB

    breathiness = dimensions.get("breathiness")
    ref = references[0].clean
    clean = breathiness.measure(Analysis(ref.audio, ref.sr, span=ref.span), ref)
    assert clean.start == clean.end == pytest.approx(MASKED_DB)
    out = breathiness.render(ref, held("breathiness", 0.75, ref), np.random.default_rng(0))
    added = breathiness.measure(Analysis(out, ref.sr, span=ref.span), ref)
    assert -8 < added.start < 0 and -8 < added.end < 0, added
    lead = slice(0, int(max(ref.span.onset_s - 0.05, 0.0) * ref.sr))
    assert lead.stop > 0.1 * ref.sr
    assert np.sqrt(np.mean((out[lead] - ref.audio[lead]) ** 2)) < 1e-3 * ref.speech_rms


def test_breathiness_adds_nothing_outside_the_detected_span_where_the_voice_runs_on(references):
    """A voice often sounds before the detector's onset (and seldom past its offset), so
    noise on every voiced frame would show one edge of the speech and not the other. With
    the span moved 150 ms into the voiced speech at both ends, the voice runs on past it;
    the noise stays inside it (over 40 dB under the speech from 40 ms past each edge of the
    span; -11 dB before the onset up to renderer revision 12), and within it is added as
    ever."""
    breathiness = dimensions.get("breathiness")
    source = references[0].clean
    inner = dataclasses.replace(
        source.span, onset_s=source.span.onset_s + 0.15, offset_s=source.span.offset_s - 0.15
    )
    ref = Analysis(source.audio, source.sr, span=inner)
    out = breathiness.render(ref, held("breathiness", 0.75, ref), np.random.default_rng(0))
    added = out - ref.audio
    sr = ref.sr

    def level_db(a: float, b: float) -> float:
        part = added[int(a * sr) : int(b * sr)].astype(np.float64)
        return float(20 * np.log10(np.sqrt(np.mean(part**2)) / source.speech_rms + 1e-12))

    voiced = voice_pitch.f0_at(source, np.array([inner.onset_s - 0.07, inner.offset_s + 0.07]))
    assert (voiced > 0).all()  # the voice does run on past the moved span, at both ends
    assert level_db(inner.onset_s - 0.15, inner.onset_s - 0.04) < -40
    assert level_db(inner.offset_s + 0.04, inner.offset_s + 0.15) < -40
    assert level_db(inner.onset_s + 0.1, inner.offset_s - 0.1) > -20  # 0.75 of the voice


@pytest.mark.parametrize("category", ("brightness", "vocal_tract_length", "breathiness"))
def test_ideal_observer_reads_the_newer_dimensions(references, category):
    """baseline:ideal's own evidence (librosa features, not the verifier's) has the label's
    sign on built clips, against the clean source it reads from references/."""
    dim = dimensions.get(category)
    for i, source in enumerate(references[:2]):
        for direction in ("increase", "decrease"):
            low, high = dim.endpoints(dim.SPEC.tiers["mid"], RENDER_SR)
            start, end = (low, high) if direction == "increase" else (high, low)
            c = Condition(category, "mid", "linear", direction, dim.SPEC.tiers["mid"], start, end)
            result = render_condition(source, c, 0, item_id(0, str(i), c))
            evidence = dim.evidence(result.audio, source.clean.audio, RENDER_SR)
            assert evidence * (1 if direction == "increase" else -1) > 0, (
                category,
                i,
                direction,
                evidence,
            )


def test_ideal_observer_hears_a_5_khz_low_pass_band_by_band(references):
    """Clarity's low tier (cutoff 5 -> 8.4 kHz) moves only the quiet bands above 5 kHz: the
    ideal's evidence must follow them band by band (summed high-band energy barely moved, and
    the ideal answered this tier on the recordings at 0.52)."""
    dim = dimensions.get("voice_clarity")
    for i, source in enumerate(references[:6]):
        for direction in ("increase", "decrease"):
            low, high = dim.endpoints(dim.SPEC.tiers["low"], RENDER_SR)
            start, end = (low, high) if direction == "increase" else (high, low)
            c = Condition(
                "voice_clarity",
                "low",
                "quad_first_flat",
                direction,
                dim.SPEC.tiers["low"],
                start,
                end,
            )
            result = render_condition(source, c, 0, item_id(0, str(i), c))
            if result.verdict != "verified":
                continue  # refused as inaudible on this source: no answer to hear
            evidence = dim.evidence(result.audio, source.clean.audio, RENDER_SR)
            assert evidence * (1 if direction == "increase" else -1) > 0, (i, direction, evidence)


def test_distance_moves_level_reverb_and_highs_together(references):
    """A source moving away loses direct level and DRR by the same dB and gets duller; an
    echo ramp at a steady level (or a level ramp in a dry room) is not a source moving."""
    from vocalgrad.stimuli.render import measure_clip, to_file, unlimited

    dim = dimensions.get("distance")
    near, far = dim.endpoints(dim.SPEC.tiers["high"], RENDER_SR)
    duller = []
    for ref in references:
        highs = {}
        for direction, (a, b), sign in (
            ("increase", (near, far), 1),
            ("decrease", (far, near), -1),
        ):
            r = render_condition(
                ref,
                Condition("distance", "high", "linear", direction, far, a, b),
                0,
                "00000000000000ad",
            )
            m = r.measured
            assert r.verified, (direction, m)
            assert sign * m.corroboration > 10 and sign * (m.end - m.start) > 10, m
            assert abs(m.corroboration - (m.end - m.start)) < 4, m  # one source: the same dB
            highs[direction] = m.high_band_change
        # farther is duller (the content moves the high band too: compare the twins)
        assert highs["increase"] < highs["decrease"], highs
        duller.append(highs["decrease"] - highs["increase"])
        echo = dimensions.get("echo")
        ramp = Condition("echo", "high", "linear", "increase", 0.52, 0.0, 0.52)
        span = ref.clean.span
        track = track_for(ramp, echo.SPEC, span.onset_s, span.offset_s)
        raw = echo.render(ref.clean, track, np.random.default_rng(0))
        audio = to_file(unlimited(ref, "distance", raw, track, span, rove_gain_db(0, "ae")))
        assert measure_clip(ref, "distance", audio, span, "increase")[3] != "verified"
    # farther is duller on every recording, by 0.4-4.4 dB (what the words put in each end's
    # high band varies as much)
    assert np.mean(duller) > 1.0, duller


@pytest.mark.parametrize(
    "category", [c for c in dimensions.names() if dimensions.get(c).SPEC.source_edges]
)
def test_speech_only_dimensions_keep_the_source_edges_sample_for_sample(references, category):
    """Outside the speech (+- the guard) an increase clip and its decrease twin hold the
    source's own samples, before the room tone and the rove: resynthesis residue (PSOLA
    re-synthesises the silences too) once made their edges differ in level and spectrum with the
    direction."""
    from vocalgrad.stimuli.render import EDGE_GUARD_S, clip_span, level

    dim = dimensions.get(category)
    checked = 0
    for source in references:
        span, sr = source.clean.span, source.sr
        for direction in ("increase", "decrease"):
            low, high = dim.endpoints(dim.SPEC.tiers["high"], sr)
            start, end = (low, high) if direction == "increase" else (high, low)
            c = Condition(category, "high", "linear", direction, dim.SPEC.tiers["high"], start, end)
            track = track_for(c, dim.SPEC, span.onset_s, span.offset_s, source.clean)
            raw = dim.render(source.clean, track, np.random.default_rng(0))
            heard_span = clip_span(dim, track, source.clean, len(raw))
            lead = int(
                round((heard_span.onset_s - EDGE_GUARD_S) * sr)
            )  # the audit's edge windows stop here
            out = level(source, category, raw, track, heard_span)
            tail = min(
                len(out) - int(round((heard_span.offset_s + EDGE_GUARD_S) * sr)),
                len(source.clean.audio),
            )
            for n, clip_part, source_part in (
                (lead, out[: max(lead, 0)], source.clean.audio[: max(lead, 0)]),
                (
                    tail,
                    out[len(out) - max(tail, 0) :],
                    source.clean.audio[len(source.clean.audio) - max(tail, 0) :],
                ),
            ):
                if n > 0:  # (a recording trimmed at its speech has no edge to keep)
                    np.testing.assert_array_equal(clip_part, source_part)
                    checked += 1
    assert checked >= 4


def test_held_speed_twins_end_on_the_same_room_tone(references):
    """A held rate changes the clip's length but not its silences: the faster recognition
    twin and the slower one must open and close on the same samples (the source's edges and
    the tone that lay under them), or the trailing edge tells the rate. Laid from the file's
    start, the tone under a shorter clip's last silence was another stretch than its twin's."""
    from vocalgrad.stimuli.render import EDGE_GUARD_S

    dim = dimensions.get("speaking_speed")
    magnitude = dim.SPEC.tiers["high"]
    low, high = dim.endpoints(magnitude, RENDER_SR)
    checked = 0
    for source in references:
        span, sr = source.clean.span, source.sr
        fast = Condition(
            "speaking_speed", "high", "held", "increase", magnitude, low, high, format="recognition"
        )
        clips = [
            render_condition(source, fast, 0, "00000000000000f1"),
            render_condition(source, fast.twin(), 0, "00000000000000f2"),
        ]
        a, b = (c.audio for c in clips)
        assert abs(len(a) - len(b)) > 0.1 * sr  # the rate is held: the lengths differ
        lead = int(round((span.onset_s - EDGE_GUARD_S) * sr))
        trail = min(
            len(c.audio) - int(round((c.clip.span.offset_s + EDGE_GUARD_S) * sr)) for c in clips
        )  # each clip's own guard
        if lead > 0:
            np.testing.assert_array_equal(a[:lead], b[:lead])
            checked += 1
        if trail > 0:
            np.testing.assert_array_equal(a[-trail:], b[-trail:])
            checked += 1
    assert checked >= 2


def test_breathiness_reads_the_same_whatever_the_span_rounding(references):
    """The dataset stores spans to 10 us (a comparison part's is a difference of two): a
    measure cut where the span says put Praat's frames on another grid than the source's
    at 50 us off, and a 21.6 dB breathier part read as masked on re-verification."""
    from dataclasses import replace

    from vocalgrad.stimuli.render import measure_against_source

    dim = dimensions.get("breathiness")
    low, high = dim.endpoints(dim.SPEC.tiers["high"], RENDER_SR)
    for source in references[:2]:
        c = Condition(
            "breathiness", "high", "linear", "increase", dim.SPEC.tiers["high"], low, high
        )
        r = render_condition(source, c, 0, "00000000000000b7")
        assert r.verified
        for shift in (-5e-5, 5e-5, 0.004):
            span = replace(
                r.clip.span,
                onset_s=r.clip.span.onset_s + shift,
                offset_s=r.clip.span.offset_s + shift,
            )
            _, m = measure_against_source(source.heard, "breathiness", r.audio, span)
            assert m.change == pytest.approx(r.change, abs=0.5), (shift, m, r.measured)


def test_breathiness_refuses_a_source_whose_speech_ends_without_periodic_voice(arctic):
    """Aspiration noise sits in periodic voice. Real speech that ends in a long fricative-like
    hiss has no periodic frame in the tail window the measure reads: an increase there would
    read as a decrease, so the condition is refused for that source, with why; the speech
    alone is not."""
    from scipy.signal import butter, sosfilt

    from vocalgrad.dimensions import breathiness

    audio, sr = arctic
    speech = Analysis(audio, sr)
    assert breathiness.source_inaudible_reason(0.75, speech) is None
    rng = np.random.default_rng(3)
    band = butter(4, (2500, 6000), "bandpass", fs=sr, output="sos")
    hiss = sosfilt(band, rng.standard_normal(sr))
    hiss *= speech.speech_rms / np.sqrt(np.mean(hiss**2))
    end = int(round(speech.span.offset_s * sr))
    joined = np.concatenate([audio[:end], hiss.astype(np.float32), audio[end:]])
    reason = breathiness.source_inaudible_reason(0.75, Analysis(joined, sr))
    assert reason is not None and "at its end" in reason, reason


def _steady(partials_hz: list[float], sr: int) -> np.ndarray:
    """A steady sound of the given partials (amplitudes 1/k), 2.4 s between 0.5 s silences."""
    t = np.arange(int(2.4 * sr)) / sr
    sound = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate(partials_hz, 1))
    ramp = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.01)
    quiet = np.zeros(sr // 2)
    return np.concatenate([quiet, 0.3 * ramp * sound, quiet]).astype(np.float32)


def test_brightness_refuses_a_source_with_too_narrow_a_spectrum_to_tilt(arctic):
    """A tilt on a pure tone is a change of level, which the loudness compensation takes
    out: the source is refused, with why, even at the high tier. A harmonic complex and
    speech are not."""
    from vocalgrad.dimensions import brightness

    sr = RENDER_SR
    audio, arctic_sr = arctic
    assert brightness.source_inaudible_reason(1.0, Analysis(audio, arctic_sr)) is None
    assert (
        brightness.source_inaudible_reason(
            1.0, Analysis(_steady([200.0 * k for k in range(1, 20)], sr), sr)
        )
        is None
    )
    reason = brightness.source_inaudible_reason(3.0, Analysis(_steady([1000.0], sr), sr))
    assert reason is not None and "spans 0.0 octaves" in reason, reason


def test_echo_refuses_one_steady_partial_and_hears_a_room_on_a_complex(arctic):
    """A room's steady return of a pure tone is the same tone at another level: refused at
    every tier, with why. A harmonic complex (the room colours its partials) and speech are
    not refused."""
    from vocalgrad.dimensions import echo

    sr = RENDER_SR
    audio, arctic_sr = arctic
    assert echo.source_inaudible_reason(0.52, Analysis(audio, arctic_sr)) is None
    complex_tone = Analysis(_steady([300.0 * k for k in range(1, 12)], sr), sr)
    assert echo.source_inaudible_reason(0.28, complex_tone) is None
    for magnitude in (0.28, 0.52):
        reason = echo.source_inaudible_reason(magnitude, Analysis(_steady([700.0], sr), sr))
        assert reason is not None and "spans 0.0 octaves" in reason, reason


def test_echo_fades_its_return_alike_at_both_ends_of_the_sound():
    """The return fades in over the sound's first WET_FADE_S and out over its last: held at
    one ratio to the sound in between, it is silent at both ends, and a steady complex's
    return is as strong just inside its onset as just inside its offset."""
    from vocalgrad.dimensions import echo

    sr = RENDER_SR
    ref = Analysis(_steady([220.0 * k for k in range(1, 10)], sr), sr)
    room = np.convolve(
        ref.audio.astype(np.float64), echo.room_response(1.0, sr, np.random.default_rng(3))
    )
    wet = echo.room_return(room[: len(ref.audio)], ref, echo.WET_FADE_S)
    onset, offset = (int(round(s * sr)) for s in (ref.span.onset_s, ref.span.offset_s))
    assert np.max(np.abs(wet[:onset])) == 0 and np.max(np.abs(wet[offset:])) == 0
    fade = int(echo.WET_FADE_S * sr)
    head = np.sqrt(np.mean(wet[onset + fade // 2 : onset + fade] ** 2))
    tail = np.sqrt(np.mean(wet[offset - fade : offset - fade // 2] ** 2))
    middle = np.sqrt(np.mean(wet[onset + 2 * fade : offset - 2 * fade] ** 2))
    assert abs(20 * np.log10(head / tail)) < 1.0
    assert 0.2 < head / middle < 0.9  # faded, not cut


def _ramped_complex(sr: int) -> Analysis:
    """A steady 220 Hz complex that swells in over 150 ms and dies away over the mirror image
    of that, between 0.5 s silences: its two ends are each other's reversal."""
    t = np.arange(int(2.4 * sr)) / sr
    sound = sum(np.sin(2 * np.pi * 220.0 * k * t) / k for k in range(1, 10))
    edge = np.minimum(1.0, np.minimum(t, t[::-1]) / 0.15) ** 2
    quiet = np.zeros(sr // 2)
    return Analysis(np.concatenate([quiet, 0.3 * edge * sound, quiet]).astype(np.float32), sr)


def test_a_sound_moving_away_and_its_twin_coming_near_meet_the_room_alike(monkeypatch):
    """On a sound whose two ends mirror each other, the clip moving away (0.25 -> 3 m) and
    its twin coming near have the same order-free edge cues and loudness range: the room's
    field is held to the sound over 50 ms near its ends. Held over 200 ms there, the field
    was still ringing in at the start and ringing on at the end, and the far end of the
    clip moving away was 4 dB less compressed than its twin's far start."""
    from vocalgrad.dimensions import distance
    from vocalgrad.stimuli.order_free import order_free_cues

    sr = RENDER_SR
    ref = _ramped_complex(sr)

    def path(start_m: float, end_m: float):
        def track(t):
            u = np.clip(
                (np.asarray(t) - ref.span.onset_s) / (ref.span.offset_s - ref.span.onset_s), 0, 1
            )
            return start_m * (end_m / start_m) ** u

        return track

    def twin_differences() -> dict[str, float]:
        cues = []
        for track in (path(0.25, 3.0), path(3.0, 0.25)):
            ref.cache.clear()
            cues.append(order_free_cues(distance.render(ref, track, None), sr))
        return {
            k: cues[0][k] - cues[1][k] for k in ("of_edge_silence_s_30", "of_loudness_range_db")
        }

    held = twin_differences()
    assert abs(held["of_edge_silence_s_30"]) < 0.005, held
    assert abs(held["of_loudness_range_db"]) < 0.2, held
    monkeypatch.setattr(distance, "FIELD_EDGE_WINDOW_S", None)
    ringing = twin_differences()
    assert ringing["of_loudness_range_db"] < -2.0, ringing


def test_the_brightness_evidence_reads_a_sound_with_no_energy_below_800_hz():
    """A 2 kHz complex whose second partial grows re its first gets brighter: the ideal
    observer's tilt is read between the source's own lowest and highest partials (bands
    fixed at 150-800 Hz and 2-6 kHz read only its leakage)."""
    from vocalgrad.signal.evidence import spectral_tilt_change

    sr = RENDER_SR
    ref = _steady([2000.0, 4000.0], sr)
    t = np.arange(len(ref)) / sr
    second = np.sin(2 * np.pi * 4000.0 * t) * np.interp(t, [0, t[-1]], [0.25, 1.0])
    clip = np.where(ref != 0, 0.3 * np.sin(2 * np.pi * 2000.0 * t) + 0.3 * second, 0.0)
    assert spectral_tilt_change(clip.astype(np.float32), ref, sr) > 3.0
    assert spectral_tilt_change(clip[::-1].astype(np.float32), ref[::-1], sr) < -3.0


def test_voice_pitch_refuses_a_whispered_source_whose_voiced_frames_form_no_contour(arctic):
    """A whisper has no pitch to shift, yet the tracker calls a few of its frames voiced, at
    scattered F0s: a change measured there is the tracker's. The same speech with its phase
    randomised (its spectral envelope kept, its periodicity gone) is refused, with why; the
    speech itself is not."""
    from scipy.signal import istft, stft

    from vocalgrad.dimensions import voice_pitch

    audio, sr = arctic
    assert voice_pitch.source_inaudible_reason(1.0, Analysis(audio, sr)) is None
    _, _, spec = stft(audio, sr, nperseg=512)
    phase = np.exp(2j * np.pi * np.random.default_rng(0).random(spec.shape))
    _, whisper = istft(np.abs(spec) * phase, sr, nperseg=512)
    whispered = Analysis(whisper[: len(audio)].astype(np.float32), sr)
    assert (whispered.f0[1] > 0).sum() > 10  # the tracker still finds "voiced" frames
    reason = voice_pitch.source_inaudible_reason(1.0, whispered)
    assert reason is not None and "no pitch contour" in reason, reason


def test_on_contour_keeps_runs_of_three_close_frames_only():
    """A frame is on a contour in a run of three or more voiced frames, each within two
    semitones of the one before; an octave jump or a gap ends the run."""
    from vocalgrad.dimensions.voice_pitch import CONTOUR_MIN_FRAMES, CONTOUR_STEP_ST
    from vocalgrad.signal.analysis import on_contour

    f0 = np.array([0, 100, 101, 102, 0, 100, 300, 0, 200, 201, 202, 203, 400, 0.0])
    contour = on_contour(f0, CONTOUR_STEP_ST, CONTOUR_MIN_FRAMES)
    assert contour.astype(int).tolist() == [0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0]
    assert not on_contour(np.zeros(5), CONTOUR_STEP_ST, CONTOUR_MIN_FRAMES).any()

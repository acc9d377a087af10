"""Psychometric fits: design magnitudes, threshold recovery with honest CIs, chance listeners."""

from __future__ import annotations

import numpy as np
import pytest

from vocalgrad.evaluation.adaptive import SimulatedObserver
from vocalgrad.evaluation.psychometric import (
    BELOW,
    INSUFFICIENT,
    NONE,
    OK,
    fit_psychometric,
    fit_rows,
    format_magnitude,
    polarity,
)
from vocalgrad.stimuli.plan import design_magnitudes


def sweep(
    observer: SimulatedObserver, category: str, n_sources: int = 8, reps: int = 4, seed: int = 0
):
    """A full sweep: every design magnitude, both directions, `reps` per source."""
    rng = np.random.default_rng(seed)
    mags, correct, sources = [], [], []
    for source in range(n_sources):
        for m in design_magnitudes(category):
            for _ in range(2 * reps):
                mags.append(m)
                correct.append(bool(rng.random() < observer.p_correct(m)))
                sources.append(f"s{source}")
    return mags, correct, sources


def fit_sweep(data, category: str, **options):
    mags, correct, sources = data
    return fit_psychometric(mags, correct, category, sources, **options)


def test_design_magnitudes_span_the_declared_range_weakest_first():
    for category, sign in (
        ("voice_pitch", 1),
        ("volume", 1),
        ("voice_clarity", -1),
        ("audio_distortion", -1),
        ("audio_roughness", -1),
    ):
        mags = design_magnitudes(category, 6)
        assert len(mags) == 6
        assert polarity(category) == sign
        strength = sign * np.log(mags)
        assert np.all(np.diff(strength) > 0), category  # weakest change first
        ratios = np.diff(np.log(sorted(mags)))
        assert np.allclose(ratios, ratios[0])  # log-spaced


@pytest.mark.parametrize(
    ("category", "threshold"), [("voice_pitch", 0.7), ("volume", 3.0), ("voice_clarity", 2500.0)]
)
def test_threshold_recovered_within_tolerance_over_seeds(category, threshold):
    errors, covered = [], 0
    for seed in range(6):
        obs = SimulatedObserver(category, threshold, beta=0.4, lapse=0.02)
        fit = fit_sweep(sweep(obs, category, seed=seed), category, n_boot=150, seed=seed)
        assert fit.status == OK
        lo, hi = fit.ci
        assert lo < fit.threshold < hi
        covered += lo <= threshold <= hi
        errors.append(np.log(fit.threshold / threshold))
        assert fit.unit in fit.label()
    assert np.mean(np.abs(errors)) < 0.2  # within ~20% on average
    assert covered >= 4  # a 95% CI should rarely miss


def test_chance_listener_gets_no_threshold_not_a_number():
    obs = SimulatedObserver("voice_pitch", None)
    fit = fit_sweep(sweep(obs, "voice_pitch"), "voice_pitch")
    assert fit.status == NONE and fit.threshold is None
    assert fit.label() == "no threshold within range"
    assert fit.p_value > 0.05


def test_threshold_beyond_the_strongest_change_is_no_threshold():
    obs = SimulatedObserver("volume", 60.0, beta=0.3)  # needs far more than 24 dB
    fit = fit_sweep(sweep(obs, "volume"), "volume")
    assert fit.status == NONE


def test_listener_already_good_at_the_weakest_change_is_below_range():
    obs = SimulatedObserver("voice_clarity", 9000.0, beta=0.2)  # hears even a 7000 Hz low-pass
    fit = fit_sweep(sweep(obs, "voice_clarity"), "voice_clarity")
    assert fit.status == BELOW and fit.threshold is None
    assert "below tested range" in fit.label() and fit.label().startswith(">")


def test_weibull_and_fixed_lapse_options():
    obs = SimulatedObserver("volume", 3.0, beta=0.4, lapse=0.0, function="weibull")
    data = sweep(obs, "volume", seed=3)
    fit = fit_sweep(data, "volume", function="weibull", lapse=0.0, n_boot=50)
    assert fit.status == OK and fit.lapse == 0.0
    assert abs(np.log(fit.threshold / 3.0)) < 0.3
    assert fit.threshold_at(0.75) == pytest.approx(fit.threshold)
    assert fit.predict([fit.threshold])[0] == pytest.approx(0.75)


def test_fit_rows_uses_only_scored_changing_rows_per_listener_and_category():
    obs = SimulatedObserver("voice_pitch", 0.7)
    mags, correct, sources = sweep(obs, "voice_pitch", n_sources=4)
    rows = [
        {
            "listener": "a",
            "category": "voice_pitch",
            "direction": "increase",
            "control": "none",
            "magnitude": m,
            "correct": c,
            "source_id": s,
            "error": None,
        }
        for m, c, s in zip(mags, correct, sources, strict=True)
    ]
    noise = [
        {**rows[0], "control": "reversed"},
        {**rows[0], "error": "boom", "correct": None},
        {**rows[0], "direction": "constant", "magnitude": 0.0},
        {**rows[0], "listener": "b"},
    ]  # one level only: skipped
    fits = fit_rows(rows + noise, n_boot=30)
    assert [(f.listener, f.category) for f in fits] == [("a", "voice_pitch")]
    assert fits[0].n == len(rows) and fits[0].n_sources == 4
    assert [lv.n for lv in fits[0].levels] == [len(rows) // 6] * 6
    few = fit_psychometric([0.1, 0.2, 0.4], [True, False, True], "voice_pitch")
    assert few.status == INSUFFICIENT
    d = fits[0].to_dict()
    assert d["label"] == fits[0].label()


def test_format_magnitude_avoids_e_notation():
    assert format_magnitude(2461.3) == "2460"
    assert format_magnitude(0.7853) == "0.785"
    assert format_magnitude(12.34) == "12.3"
    assert format_magnitude(None) == "–"


def test_threshold_ci_with_few_sources_is_honest_or_absent():
    """One source: a bootstrap redraws the same source every time and returned [t, t]."""
    obs = SimulatedObserver("volume", 3.0, beta=0.4, lapse=0.02)
    one = fit_sweep(sweep(obs, "volume", n_sources=1, reps=8), "volume", n_boot=100)
    assert one.status == OK and one.ci == (None, None) and one.ci_method == "none"
    assert one.label().endswith("dB")  # a number without a bracket, not "x [x, x]"
    few = fit_sweep(sweep(obs, "volume", n_sources=3), "volume", n_boot=100)
    assert few.ci_method == "cluster jackknife t" and few.n_boot == 0
    assert few.ci[0] < few.threshold < few.ci[1]
    some = fit_sweep(sweep(obs, "volume", n_sources=12), "volume", n_boot=100)
    assert some.ci_method == "cluster jackknife t" and some.ci[0] < some.threshold < some.ci[1]
    many = fit_sweep(sweep(obs, "volume", n_sources=50), "volume", n_boot=100)
    assert many.ci_method == "cluster bootstrap" and many.n_boot == 100
    assert fit_sweep(sweep(obs, "volume", n_sources=3), "volume", n_boot=0).ci == (None, None)

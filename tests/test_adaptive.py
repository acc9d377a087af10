"""Adaptive thresholds: far fewer trials than a sweep, same answer on the same listener."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_psychometric import fit_sweep, sweep

from vocalgrad.evaluation.adaptive import (
    TIE,
    UNPARSED,
    QuestPlus,
    SimulatedObserver,
    Staircase,
    balanced_directions,
    run_adaptive,
    save_adaptive,
)
from vocalgrad.evaluation.psychometric import BELOW, NONE, OK, polarity
from vocalgrad.listeners import Listener

CASES = [("voice_pitch", 0.6), ("volume", 3.0), ("voice_clarity", 2500.0)]


@pytest.mark.parametrize(("category", "threshold"), CASES)
def test_adaptive_agrees_with_the_full_sweep_on_the_same_listener(category, threshold):
    """The issue's check: adaptive estimate vs full-sweep fit on one simulated listener."""
    errors = {"quest": [], "staircase": [], "sweep_vs_quest": [], "sweep_vs_staircase": []}
    trials = {"quest": [], "staircase": []}
    for seed in range(5):
        sweep_data = sweep(SimulatedObserver(category, threshold, seed=seed), category, seed=seed)
        full = fit_sweep(sweep_data, category, n_boot=0)
        assert full.status == OK
        for method in ("quest", "staircase"):
            listener = SimulatedObserver(category, threshold, seed=100 + seed)
            result = run_adaptive(category, listener, method=method, seed=seed, n_boot=0)
            assert result.status == OK, (method, seed)
            trials[method].append(result.n_trials)
            errors[method].append(abs(np.log(result.threshold / threshold)))
            errors[f"sweep_vs_{method}"].append(abs(np.log(result.threshold / full.threshold)))
    n_sweep = len(sweep_data[0])
    assert np.mean(trials["quest"]) <= n_sweep / 8 and np.mean(trials["staircase"]) <= n_sweep / 4
    for key, errs in errors.items():
        assert np.mean(errs) < 0.3, (key, errs)  # within ~30% of the truth and of the sweep


def test_staircase_converges_on_its_target_and_reports_it():
    st = Staircase("volume", n_down=3)
    assert st.target == pytest.approx(0.7937, abs=1e-4)
    obs = SimulatedObserver("volume", 3.0, beta=0.3, lapse=0.0, seed=4)
    estimates = []
    for seed in range(6):
        obs = SimulatedObserver("volume", 3.0, beta=0.3, lapse=0.0, seed=seed)
        result = run_adaptive("volume", obs, method="staircase", seed=seed, n_boot=0)
        estimates.append(np.log(result.procedure_estimate))
    truth = obs.p_correct(np.geomspace(0.5, 24, 400))
    at_target = np.geomspace(0.5, 24, 400)[np.argmin(np.abs(truth - st.target))]
    assert abs(np.mean(estimates) - np.log(at_target)) < 0.25


def test_chance_and_superhuman_listeners():
    for method in ("quest", "staircase"):
        deaf = run_adaptive(
            "voice_pitch", SimulatedObserver("voice_pitch", None, seed=1), method=method, n_boot=0
        )
        assert deaf.status == NONE and deaf.threshold is None
        keen = run_adaptive(
            "voice_pitch", SimulatedObserver("voice_pitch", 0.01, seed=1), method=method, n_boot=0
        )
        assert keen.status == BELOW and keen.threshold is None


def test_ask_callback_contract_and_balanced_directions():
    calls = []

    def ask(category, magnitude, direction, trial_index):
        calls.append((category, magnitude, direction, trial_index))
        return magnitude > 1.0

    result = run_adaptive("voice_pitch", ask, method="quest", max_trials=20)
    assert [c[3] for c in calls] == list(range(20)) and result.n_trials == 20
    assert {c[0] for c in calls} == {"voice_pitch"}
    assert all(0.1 - 1e-9 <= c[1] <= 4.0 + 1e-9 for c in calls)  # inside the declared range
    directions = [c[2] for c in calls]
    assert directions.count("increase") == directions.count("decrease") == 10
    assert balanced_directions(7, np.random.default_rng(0)).count("increase") in (3, 4)


def test_quest_places_trials_near_threshold_and_handles_reversed_polarity():
    q = QuestPlus("voice_clarity", max_trials=30)
    obs = SimulatedObserver("voice_clarity", 2000.0, seed=2)
    for i in range(30):
        m = q.next_magnitude()
        q.update(m, obs("voice_clarity", m, "increase", i))
    median, lo, hi, _, _ = q.threshold()
    assert lo <= median <= hi
    assert polarity("voice_clarity") == -1
    assert abs(np.exp(-median) - 2000.0) / 2000.0 < 0.5


def test_save_adaptive_writes_json_and_results_rows(tmp_path):
    result = run_adaptive("volume", SimulatedObserver("volume", 3.0, seed=0), max_trials=12)
    save_adaptive(tmp_path, "model-x", [result], manifest={"listener": {"listener": "model-x"}})
    payload = json.loads((tmp_path / "adaptive.json").read_text())
    assert payload["listener"] == "model-x" and payload["results"][0]["n_trials"] == 12
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and {r["tier"] for r in rows} == {"adaptive"}
    assert all((r["predicted"] == r["direction"]) == r["correct"] for r in rows)
    assert {r["parse_status"] for r in rows} == {"ok"} and not any(r["guessed"] for r in rows)


def test_ties_are_guessed_not_counted_wrong_so_thresholds_are_not_pushed_up():
    """An observer that ties whenever it does not hear: guessing keeps the 2AFC threshold where
    it is; counting ties as wrong (the old behaviour) moves it up, towards stronger changes."""
    for method in ("quest", "staircase"):
        guessed, as_wrong = [], []
        for seed in range(6):
            obs = SimulatedObserver("volume", 3.0, seed=200 + seed, ties=True)
            result = run_adaptive("volume", obs, method=method, seed=seed, n_boot=0)
            assert result.status == OK and result.n_ties > 0 and result.n_unparsed == 0
            assert result.n_ties == sum(t.no_answer == TIE for t in result.trials)
            guessed.append(np.log(result.threshold / 3.0))
            obs = SimulatedObserver("volume", 3.0, seed=200 + seed, ties=True)
            wrong = run_adaptive(
                "volume", lambda *a, o=obs: o(*a) is True, method=method, seed=seed, n_boot=0
            )
            as_wrong.append(np.log(wrong.threshold / 3.0))
        assert abs(np.mean(guessed)) < 0.15, (method, guessed)
        assert np.mean(as_wrong) > np.mean(guessed) + 0.15, (method, as_wrong, guessed)


def test_no_answers_are_counted_reported_and_guessed_reproducibly(tmp_path):
    from vocalgrad.evaluation.evaluate_adaptive import describe

    def ask(category, magnitude, direction, trial):
        return (TIE, UNPARSED, magnitude > 1.0)[trial % 3]

    result = run_adaptive("voice_pitch", ask, method="quest", max_trials=30, seed=3)
    again = run_adaptive("voice_pitch", ask, method="quest", max_trials=30, seed=3)
    assert (result.n_ties, result.n_unparsed) == (10, 10)
    assert [t.correct for t in result.trials] == [t.correct for t in again.trials]
    guesses = [t.correct for t in result.trials if t.no_answer]
    assert 0 < sum(guesses) < len(guesses)  # a coin, not "wrong"
    assert "(10 tied and 10 unparsed answered by a random guess)" in describe(result)
    save_adaptive(tmp_path, "model-x", [result])
    payload = json.loads((tmp_path / "adaptive.json").read_text())
    assert "random guess" in payload["no_answer"]
    assert payload["results"][0]["n_ties"] == 10 and payload["results"][0]["n_unparsed"] == 10
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["parse_status"] for r in rows[:3]] == ["tie", "unparsed", "ok"]
    assert rows[0]["predicted"] is None and rows[0]["guessed"] and not rows[2]["guessed"]
    with pytest.raises(ValueError, match="ask returned None"):
        run_adaptive("voice_pitch", lambda *a: None, max_trials=2)


class _Undecided(Listener):
    """A model that cannot tell: equal option scores (can_score) or a reply naming neither."""

    listener_id = "undecided"

    def __init__(self, can_score: bool) -> None:
        self.can_score = can_score

    def score_choices(self, requests):
        return [{"increase": -1.0, "decrease": -1.0} for _ in requests]

    def generate(self, requests, max_new_tokens=16):
        return ["I cannot say." for _ in requests]


def test_rendered_trials_report_ties_and_unparsed_replies(tmp_path, cache_dir, monkeypatch):
    from vocalgrad.evaluation.evaluate_adaptive import evaluate_adaptive
    from vocalgrad.stimuli.build import build
    from vocalgrad.stimuli.config import BuildConfig

    monkeypatch.setenv("VOCALGRAD_CACHE", str(cache_dir))
    dataset = tmp_path / "ds"
    build(
        BuildConfig(
            n_test=1,
            n_train=0,
            categories=("volume",),
            tiers=("low",),
            curves=("linear",),
            constants=0,
        ),
        dataset,
        workers=1,
    )
    for can_score, key in ((True, "n_ties"), (False, "n_unparsed")):
        out = tmp_path / key
        [result] = evaluate_adaptive(dataset, _Undecided(can_score), out, ("volume",), max_trials=6)
        assert getattr(result, key) == 6 and result.n_ties + result.n_unparsed == 6
        saved = json.loads((out / "adaptive.json").read_text())["results"][0]
        assert saved[key] == 6

"""Units of the probing package: pooling, batched solver vs scikit-learn, CIs, cache resume."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegressionCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from test_probing_organisms import BLOCKS, Organism, listener, synthetic_rows

from vocalgrad.cli.probe import add_parsers as add_parser
from vocalgrad.errors import ConfigError
from vocalgrad.probing.diagnose import late_stages, stage_order
from vocalgrad.probing.features import extract
from vocalgrad.probing.pooling import pool
from vocalgrad.probing.probes import (
    ProbeSettings,
    inner_splits,
    labels,
    linear_cv,
    outer_splits,
    shuffled,
)
from vocalgrad.probing.stats import balanced_accuracy_ci
from vocalgrad.questions.prompts import build_prompt


def test_pooling_keeps_or_destroys_direction() -> None:
    ramp = np.linspace(0, 1, 50, dtype=np.float32)[:, None] * np.ones((1, 3), np.float32)
    seg = pool(ramp, "segments16").reshape(16, 3)
    assert seg.shape == (16, 3) and np.all(np.diff(seg[:, 0]) > 0)
    assert pool(ramp, "halves")[0] > 0 > pool(ramp[::-1], "halves")[0]
    np.testing.assert_allclose(pool(ramp, "mean"), pool(ramp[::-1], "mean"), atol=1e-6)
    assert pool(np.ones((3, 2)), "segments16").shape == (32,)  # shorter than 16 frames
    assert pool(np.ones(7), "mean").shape == (7,)
    with pytest.raises(ConfigError):
        pool(ramp, "max")


def test_batched_solver_matches_sklearn() -> None:
    rng = np.random.default_rng(0)
    rows = [
        {
            "item_id": f"{s}-{k}",
            "source_id": f"s{s}",
            "speaker_id": f"s{s}",
            "split": "train" if s < 12 else "test",
            "direction": "increase" if k % 2 else "decrease",
        }
        for s in range(24)
        for k in range(6)
    ]
    y = labels(rows)
    xs = [
        rng.normal(size=(len(rows), d)) + np.outer(y - 0.5, rng.normal(size=d)) * a
        for d, a in ((300, 0.15), (20, 0.6), (300, 0.0))
    ]
    train, test = outer_splits(rows, 5)[0][0]
    settings = ProbeSettings()
    inner = inner_splits(rows, train, 3)
    logits, best = linear_cv(xs, y[None], train, inner, settings)
    cv = [(np.flatnonzero(a[train]), np.flatnonzero(b[train])) for a, b in inner]
    for k, x in enumerate(xs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf = make_pipeline(
                StandardScaler(),
                LogisticRegressionCV(
                    Cs=list(settings.cs), cv=cv, scoring="neg_log_loss", max_iter=5000, tol=1e-8
                ),
            )
            clf.fit(x[train], y[train])
        assert settings.cs[best[k, 0]] == pytest.approx(float(clf[-1].C_[0]))
        np.testing.assert_allclose(logits[k, 0][test], clf.decision_function(x[test]), atol=2e-3)


def test_control_labels_carry_no_direction_within_any_source() -> None:
    rng = np.random.default_rng(1)
    sources = np.repeat(np.arange(12), 10)
    y = np.tile(np.r_[np.ones(5), np.zeros(5)], 12)
    rng.shuffle(y[:10])
    y[10:15] = [1, 1, 1, 0, 0]  # an odd cell: 3 increase, 7 decrease in source 1
    y[15:20] = 0
    train = sources < 8
    ctl = shuffled(y, train, 0, sources)
    np.testing.assert_array_equal(ctl[~train], y[~train])  # test labels stay true
    for s in range(8):
        for label in (0, 1):
            cell = ctl[(sources == s) & (y == label)]
            assert abs(cell.sum() - len(cell) / 2) <= 0.5  # half of every cell each way
    assert not np.array_equal(ctl, shuffled(y, train, 1, sources))
    np.testing.assert_array_equal(ctl, shuffled(y, train, 0, sources))
    plain = shuffled(y, train, 0)  # without groups: balanced over the whole training split
    assert abs(plain[train & (y == 1)].mean() - 0.5) < 0.05


def test_clustered_ci_covers_point_and_widens_with_clusters() -> None:
    pos = np.tile([True, False], 40)
    correct = np.repeat([1.0, 1.0, 0.0, 1.0], 20)  # constant within each coarse cluster
    fine, coarse = np.arange(80) // 2, np.arange(80) // 20
    p1, lo1, hi1 = balanced_accuracy_ci(correct, pos, fine)
    p2, lo2, hi2 = balanced_accuracy_ci(correct, pos, coarse)
    assert p1[0] == p2[0] == pytest.approx(0.75)
    assert lo1[0] <= 0.75 <= hi1[0] and (hi2[0] - lo2[0]) >= (hi1[0] - lo1[0]) - 1e-9


def test_seed_resampling_widens_ci_when_seeds_disagree() -> None:
    rng = np.random.default_rng(0)
    pos = np.tile([True, False], 60)
    clusters = np.arange(120) // 4
    agree = np.repeat((rng.random((1, 1, 120)) < 0.7).astype(float), 3, axis=1)
    disagree = np.stack([rng.random(120) < q for q in (0.3, 0.5, 0.9)]).astype(float)[None]
    for correct in (agree, disagree):
        point, lo, hi = balanced_accuracy_ci(correct, pos, clusters)
        mean_only = balanced_accuracy_ci(correct.mean(1), pos, clusters)
        assert point[0] == pytest.approx(mean_only[0][0])  # the point is the seed average
        width, width_mean = hi[0] - lo[0], mean_only[2][0] - mean_only[1][0]
        if correct is agree:  # identical seeds: nothing to add
            assert width == pytest.approx(width_mean, rel=0.15)
        else:  # seeds at 0.3 / 0.5 / 0.9 correct: the interval must say so
            assert width > 2 * width_mean


def test_stage_order_and_late_stages() -> None:
    names = [
        "mel",
        "encoder.10",
        "encoder.2",
        "decoder.1@answer",
        "decoder.0@answer",
        "decoder.4@answer",
    ]
    order = stage_order(names)
    assert order == [
        "mel",
        "encoder.2",
        "encoder.10",
        "decoder.0@answer",
        "decoder.1@answer",
        "decoder.4@answer",
    ]
    assert late_stages(order) == {"decoder.4@answer"}
    assert late_stages([f"block.{i}" for i in range(6)]) == {"block.4", "block.5"}


class Crashing:
    """Wraps a listener and raises after `allowed` hidden_states calls (a killed run)."""

    def __init__(self, inner, allowed: int) -> None:
        self.inner, self.allowed, self.seen = inner, allowed, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def hidden_states(self, requests):
        if len(self.seen) >= self.allowed:
            raise KeyboardInterrupt
        self.seen.append([r.item_id for r in requests])
        return self.inner.hidden_states(requests)


def test_feature_cache_is_float16_memmap_and_resumes(tmp_path: Path) -> None:
    rows = synthetic_rows("linear", n_sources=2, per_source=4)[:12]
    base = listener(Organism(head_dim=0), "cache")
    crashing = Crashing(base, allowed=1)
    with pytest.raises(KeyboardInterrupt):
        extract(rows, crashing, tmp_path, category="volume", batch_size=5)
    assert json.loads((tmp_path / "index.json").read_text())["done"] == 5
    again = Crashing(base, allowed=10)
    feats = extract(rows, again, tmp_path, category="volume", batch_size=5)
    assert [i for b in again.seen for i in b] == [r["item_id"] for r in rows[5:]]
    arr = feats.stages["block.0"]
    assert isinstance(arr, np.memmap) and arr.dtype == np.float16 and arr.shape == (12, 16)
    np.testing.assert_allclose(arr[7], rows[7]["audio"], atol=1e-2)
    assert feats.lens is not None and feats.lens.shape == (12, BLOCKS)


def test_adapter_answers_and_random_twin() -> None:
    torch.manual_seed(0)
    lis = listener(Organism(head_dim=0), "answers")
    row = synthetic_rows("linear", n_sources=1, per_source=2)[0]
    from vocalgrad.listeners.base import Request

    req = Request(
        row["item_id"],
        build_prompt("volume", item_id=row["item_id"]),
        {row["item_id"]: row["audio"]},
    )
    scores = lis.score_choices([req])[0]
    assert set(scores) == {"increase", "decrease"}
    assert lis.generate([req]) == [max(scores, key=scores.get)]
    twin = lis.with_random_weights(1)
    assert twin.revision != lis.revision
    assert not np.allclose(
        twin.hidden_states([req])[0]["block.0"], lis.hidden_states([req])[0]["block.0"]
    )


def test_cli_parser_registers_probe() -> None:
    p = argparse.ArgumentParser()
    add_parser(p.add_subparsers(dest="command"))
    args = p.parse_args(
        [
            "probe",
            "ds",
            "--listener",
            "whisper:tiny.en",
            "--dimensions",
            "volume,echo",
            "--pooling",
            "halves",
            "--seeds",
            "2",
        ]
    )
    assert args.categories == ("volume", "echo") and args.pooling == "halves" and args.seeds == 2
    assert callable(args.func)


def test_logistic_path_matches_sklearn_per_c_for_every_label_set() -> None:
    """Newton-CG path: each (problem, label set, C) equals an exact scikit-learn fit; rows
    with zero weight are ignored (packed away), features wider than the rows work, and a
    label set told to stop early holds its solution at that C."""
    from sklearn.linear_model import LogisticRegression

    from vocalgrad.probing import solver

    rng = np.random.default_rng(3)
    n, cs = 60, (1e-2, 1.0, 100.0)
    xs = [rng.normal(size=(n, d)) for d in (8, 80)]
    masks = [rng.random(n) < 0.7 for _ in xs]
    z = solver.pad(
        [solver.Reduced(torch.as_tensor(x), x.shape[1], torch.eye(x.shape[1])) for x in xs]
    )
    y = torch.as_tensor((rng.random((2, 2, n)) < 0.5).astype(float))
    m = torch.stack([torch.as_tensor(mk).double().expand(2, n) for mk in masks])
    path = solver.logistic_path(z, y, m, cs, tol=1e-10)
    stop = torch.tensor([[0, 2], [1, 0]])  # each label set ends at its own C
    w_stop, b_stop = solver.logistic_path(z, y, m, cs, stop=stop, tol=1e-10)[-1]
    for k in range(2):
        for p in range(2):
            w_ref, b_ref = path[int(stop[k, p])]
            np.testing.assert_allclose(w_stop[k, p], w_ref[k, p], atol=1e-4)
            assert float(b_stop[k, p]) == pytest.approx(float(b_ref[k, p]), abs=1e-4)
    for ci, c in enumerate(cs):
        w, b = path[ci]
        for k, x in enumerate(xs):
            for p in range(2):
                keep = masks[k]
                ref = LogisticRegression(C=c, tol=1e-10, max_iter=10000)
                ref.fit(x[keep], y[k, p].numpy()[keep])
                got = x @ w[k, p, : x.shape[1]].numpy() + float(b[k, p])
                np.testing.assert_allclose(got, ref.decision_function(x), atol=2e-3)


def test_lens_tie_is_no_answer_scored_as_a_guess() -> None:
    """A lens score of exactly 0 (or NaN) used to read as "decrease": now it is no answer,
    counted, and scores 0.5 in balanced accuracy, whichever way the item went."""
    from vocalgrad.probing.lens import behaviour_from_lens, lens_curve

    assert behaviour_from_lens(np.array([2.0, -1.0, 0.0, np.nan])) == [
        "increase",
        "decrease",
        None,
        None,
    ]
    y = np.tile([1.0, 0.0], 10)
    clusters = np.arange(20) // 2
    right = np.where(y > 0.5, 1.0, -1.0)
    lens = np.stack([np.zeros(20), right, np.where(np.arange(20) < 10, 0.0, right)], axis=1)
    rows = lens_curve(lens, y, clusters, n_boot=50)
    assert [r["ties"] for r in rows] == [20, 0, 10]
    assert [r["ba"] for r in rows] == pytest.approx([0.5, 1.0, 0.75])


def _stage(stage: str, ba: float, lo: float, hi: float, control: float, late: bool) -> dict:
    return {
        "stage": stage,
        "kind": "model",
        "late": late,
        "linear_ba": ba,
        "linear_lo": lo,
        "linear_hi": hi,
        "linear_control_ba": control,
    }


def test_not_encoded_verdict_states_the_rule_it_applied_to_the_figures() -> None:
    """The demo's voice pitch read "not encoded" beside "best linear: encoder.3 0.88 [0.48,
    1.00]": the verdict now says why a 0.88 does not count, in the rule's own words."""
    from vocalgrad.probing.diagnose import diagnose, rule

    records = [
        _stage("encoder.3", 0.88, 0.48, 1.00, 0.56, False),
        _stage("decoder.3@answer", 0.55, 0.40, 0.70, 0.52, True),
    ]
    behaviour = {"ba": 0.5, "ba_lo": 0.4, "ba_hi": 0.6, "source": "results"}
    result = diagnose(records, behaviour)
    assert result["verdict"] == "not encoded"
    assert result["reason"].startswith(
        "not shown encoded: no stage passes the rule; the best linear probe, encoder.3 at "
        "0.88, fails it: its 95% CI [0.48, 1.00] reaches chance (0.50)."
    )
    assert result["reason"].endswith(f"Rule: {rule()}.")
    assert "95% CI lies above chance (0.50)" in rule() and "at least 0.60" in rule()
    # each failed part is named with its figures
    weak = diagnose([_stage("encoder.1", 0.58, 0.52, 0.64, 0.55, False)], behaviour)["reason"]
    assert "it is under 0.60" in weak and "beats its shuffled-label control (0.55) by 0.03" in weak
    assert "reaches chance" not in weak.split("Rule:")[0]
    # a decodable late stage with answers at chance says both halves of its verdict
    unused = diagnose([_stage("decoder.3@answer", 0.9, 0.8, 1.0, 0.5, True)], behaviour)
    assert unused["verdict"] == "present but unused"
    assert "decodable at late stage(s) decoder.3@answer" in unused["reason"]
    assert "[0.40, 0.60] includes chance" in unused["reason"]
    heard = diagnose(records, {"ba": 0.8, "ba_lo": 0.7, "ba_hi": 0.9, "source": "results"})
    assert heard["reason"] == (
        "heard and used: the answers' balanced accuracy 0.80 has a 95% CI [0.70, 0.90] above "
        "chance (0.50)."
    )


def test_the_probing_tutorial_states_the_rule_the_code_applies() -> None:
    """docs/tutorials/probing.md said "no stage beats the chance and shuffled-label controls";
    the code asks for a CI above chance, 0.60 and 0.10 over the control."""
    from vocalgrad.probing.diagnose import MEANING, rule

    page = " ".join((Path(__file__).parents[1] / "docs/tutorials/probing.md").read_text().split())
    assert rule() in page
    for verdict, meaning in MEANING.items():
        assert f"| *{verdict}* | {meaning} |" in page, verdict


def test_probe_run_saves_its_curves_with_the_reports_figure(tmp_path, monkeypatch) -> None:
    """One function draws probe curves: the probe run's PNG per category is the report's
    figure (it was a pyplot figure of its own)."""
    from vocalgrad.probing import figures
    from vocalgrad.probing import report as probe_report

    drawn = []
    real = figures.curve_figure

    def recorded(rows, title):
        drawn.append((rows, title))
        return real(rows, title)

    monkeypatch.setattr(figures, "curve_figure", recorded)
    data = {
        "curves": [
            {**_stage(f"encoder.{i}", 0.6 + 0.05 * i, 0.5, 0.8, 0.5, i == 2), "mlp_ba": None}
            for i in range(3)
        ],
        "lens": [{"layer": 0, "ba": 0.5, "ba_lo": 0.4, "ba_hi": 0.6}],
        "lens_by_stage": [{"layer": 0, "stage": "encoder.0"}],
        "diagnosis": {"verdict": "lost across layers"},
    }
    probe_report.save_curves(tmp_path / "curves_volume.png", "model", "volume", data)
    assert (tmp_path / "curves_volume.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ((rows, title),) = drawn
    assert title == "model · volume: lost across layers"
    assert {r["probe"] for r in rows} == {"linear", "mlp", "shuffled", "lens"}
    assert not hasattr(probe_report, "plot_category")
    with pytest.raises(ValueError, match="per category"):
        figures.curve_figure([*rows, {**rows[0], "category": "echo"}], "mixed")

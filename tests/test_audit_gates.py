"""The audit's calibrated gates (`vocalgrad.stimuli.audit.gates`, `classifiers.judge`): one-sided,
one family-wise test over a build's gates, and the statistic each gate needs to fail.

On synthetic cue matrices: the null is exact by construction only if the code keeps twins,
draws and the max-T correction straight, which is what these tests check; tests/test_audit.py
and tests/test_audit_planted.py check the gates on rendered audio."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from vocalgrad import formats
from vocalgrad.stimuli.audit import gates as G
from vocalgrad.stimuli.audit.classifiers import (
    audit_category,
    category_gates,
    gate_values,
    judge,
    redraw_failing,
)
from vocalgrad.stimuli.audit.cues import CUE_NAMES, ORDER_FREE
from vocalgrad.stimuli.audit.report import format_audit, gate_rows

# the cues a gradual build's audit reads (its families and the order-free one): a family
# another format adds leaves these synthetic builds, and the draws that make them, as they are
ALL_CUES = sorted(
    {n for f in (*formats.get("gradual").audit_families, ORDER_FREE) for n in CUE_NAMES[f]}
)


def test_fit_logistic_is_sklearns_logistic_regression():
    """The batched solve reaches the optimum sklearn's LogisticRegression(C=1) converges to,
    for every label vector at once, separable ones and one-label ones included."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 6)) * rng.uniform(0.1, 50, size=6) + rng.normal(size=6) * 20
    x_test = rng.normal(size=(40, 6)) * 10
    y = (rng.random((120, 5)) < 0.5).astype(float)
    y[:, 1] = (x[:, 0] > np.median(x[:, 0])).astype(float)  # separable
    y[:, 2] = 1.0  # one label only: the base rate
    scores = G.logistic_scores(x, y, x_test)
    for k in (0, 1, 3, 4):
        model = make_pipeline(
            StandardScaler(), LogisticRegression(C=1.0, tol=1e-12, max_iter=50000)
        )
        model.fit(x, y[:, k])
        assert scores[:, k] == pytest.approx(model.decision_function(x_test), abs=1e-5), k
    assert (scores[:, 2] > 0).all()


def _rows_and_cues(
    rng: np.random.Generator,
    category: str,
    n_sources: int = 8,
    pairs: int = 3,
    leak: float = 0.0,
    sign_by_split: dict[str, float] | None = None,
    constants: int = 1,
    sign_by_source: bool = False,
) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """Twin pairs whose clips share their source's and their pair's cue values plus clip
    noise; an increase clip's `global_duration_s` and `of_duration_s` sit `leak` x the
    split's sign above its twin's, or x a sign drawn per source (`sign_by_source`: no leak
    that carries from one source to another). No leak: twins exchangeable, which clip is
    "increase" is a coin."""
    rows, cues = [], {}
    for split in ("train", "test"):
        for s in range(n_sources):
            sign = (sign_by_split or {}).get(split, 1.0)
            sign = float(rng.choice([-1.0, 1.0])) if sign_by_source else sign
            source = f"{category}-{split}-{s}"
            base = rng.normal(size=len(ALL_CUES)) * 3
            clips = []
            for p in range(pairs):
                pair = base + rng.normal(size=len(ALL_CUES))
                for direction in rng.permutation(["increase", "decrease"]):
                    clips.append((f"t{p}", direction, pair + 0.5 * rng.normal(size=len(ALL_CUES))))
            for _ in range(constants):
                clips.append(("none", "constant", base + rng.normal(size=len(ALL_CUES))))
            for i, (tier, direction, values) in enumerate(clips):
                item = f"{source}-{i}"
                cue = dict(zip(ALL_CUES, values.tolist(), strict=True))
                if direction != "constant":
                    side = 0.5 if direction == "increase" else -0.5
                    for name in ("global_duration_s", "of_duration_s"):
                        cue[name] += side * leak * sign
                cues[item] = cue
                rows.append(
                    {
                        "item_id": item,
                        "category": category,
                        "source_id": source,
                        "split": split,
                        "direction": direction,
                        "tier": tier,
                        "curve": "linear",
                    }
                )
    return rows, cues


def test_below_chance_accuracy_is_reported_and_never_fails():
    """Cues that say "increase" on the train sources and "decrease" on the test sources
    make a classifier anti-generalise: accuracy near 0 with a CI far below 0.5 on the
    build's split (reported), below chance over the deals of its sources (the gate), which
    the two-sided gate failed. It is no shortcut, and no gate fails on it."""
    rows, cues = _rows_and_cues(
        np.random.default_rng(1), "voice_pitch", leak=6.0, sign_by_split={"test": -1.0}
    )
    c = audit_category("voice_pitch", rows, cues)
    family = judge({"voice_pitch": c})
    assert c["direction"]["lr"]["accuracy"] < 0.35 and c["direction"]["lr"]["hi"] < 0.5
    assert c["order_free"]["accuracy"] < 0.5 and c["order_free"]["ci"][1] < 0.5
    for name in ("direction", "order_free"):
        gate = c["gates"][name]
        assert gate["value"] < 0.5 and gate["fails"] is False and gate["p_fwer"] > G.ALPHA, gate
    assert c["passes"] is True and c["reasons"] == [] and family["gates"] == 3
    # the same leak with one sign in both splits is caught
    rows, cues = _rows_and_cues(np.random.default_rng(1), "voice_pitch", leak=6.0)
    c = audit_category("voice_pitch", rows, cues)
    judge({"voice_pitch": c})
    assert c["passes"] is False and c["gates"]["direction"]["fails"] is True
    assert any("order-free" in r for r in c["reasons"]), c["reasons"]


def test_every_failing_gate_is_dealt_again_and_a_passing_one_is_not():
    """A leak every source shares fails the direction and order-free gates, and each failing
    gate carries its statistic over 30 deals of the build's speakers, which stays high; the
    constant gate passes and carries none. The redraw reads the gate's own statistic: on the
    build's own split it is the first of the deals the gate averages."""
    rows, cues = _rows_and_cues(np.random.default_rng(1), "voice_pitch", leak=6.0)
    c = audit_category("voice_pitch", rows, cues)
    judge({"voice_pitch": c})
    own = gate_values("voice_pitch", rows, cues)
    assert set(own) == set(c["gates"]) and own["direction"] > 0.75
    redraw_failing({"voice_pitch": c}, {"voice_pitch": rows}, cues)
    for name in ("direction", "order_free"):
        gate = c["gates"][name]
        assert gate["fails"] is True and gate["redrawn"]["draws"] == 30, gate
        assert gate["redrawn"]["mean"] > 0.75 and gate["redrawn"]["gate"] == 0.60
    assert c["gates"]["constant"]["fails"] is False and "redrawn" not in c["gates"]["constant"]
    rows_shown = {row[1]: row[-1] for row in gate_rows({"per_category": {"voice_pitch": c}})}
    assert rows_shown["direction"].startswith("redrawn 0.") and rows_shown["constant"] == "–"


def test_a_gate_below_chance_never_fails_whatever_its_null():
    """The one-sided rule holds in the correction itself: a statistic below chance fails no
    gate even where its null sits lower still."""
    rng = np.random.default_rng(2)
    low = np.r_[0.45, 0.30 + 0.01 * rng.standard_normal(200)]
    gate = G.gate_record("direction", "LR accuracy", low, 10, 0.01)
    G.correct_family([gate])
    assert gate["z"] > 10 and gate["fails"] is False


def test_max_t_family_fails_a_null_build_at_most_alpha():
    """Gates whose observed value is one more draw of their null (what a build with no leak
    is): the share of builds with a failing gate stays at alpha, for one gate or forty."""
    rng = np.random.default_rng(3)
    for n_gates in (1, 40):
        failed = []
        for _ in range(1000):
            shift = rng.normal(size=(n_gates, 1))
            values = 0.5 + 0.02 * (rng.standard_normal((n_gates, 201)) + shift)
            values[:, :] += 0.01 * rng.standard_exponential((n_gates, 201))  # skewed nulls
            gates = [G.gate_record("direction", "LR accuracy", v, 20, 0.001) for v in values]
            G.correct_family(gates)
            failed.append(any(g["fails"] for g in gates))
        rate = np.mean(failed)
        assert rate <= G.ALPHA + 2.6 * np.sqrt(G.ALPHA * (1 - G.ALPHA) / 1000), (n_gates, rate)
        assert rate >= 0.02, (n_gates, rate)  # and not far below: the family is not Bonferroni


def test_needed_is_the_smallest_statistic_that_fails():
    """A gate fails exactly when its statistic is over the `needed` its family reports, and
    `needed` is the figure a build of that size detects (over its null's spread)."""
    rng = np.random.default_rng(4)
    null = 0.5 + 0.02 * rng.standard_normal(500)
    other = np.r_[0.5, 0.5 + 0.02 * rng.standard_normal(500)]
    verdicts = []
    for value in np.linspace(0.52, 0.60, 81):
        gates = [
            G.gate_record("direction", "LR accuracy", np.r_[value, null], 20, 0.004),
            G.gate_record("order_free", "LR accuracy", other, 20, 0.004),
        ]
        summary = G.correct_family(gates)
        gate = gates[0]
        assert gate["fails"] is bool(value > gate["needed"]), (value, gate)
        assert 0.5 + 0.02 * summary["critical_z"] == pytest.approx(gate["needed"], abs=0.003)
        verdicts.append(gate["fails"])
    assert not verdicts[0] and verdicts[-1]


@pytest.mark.slow  # 150 builds, each its gates over ten deals: about 40 s
def test_a_build_with_no_leak_fails_at_most_alpha_of_the_time(monkeypatch):
    """Synthetic builds of three categories, twin labels a coin toss within each pair (the
    null the audit's permutations draw from), each decided by the audit's own gates and
    family: the share failing stays at alpha within its Monte Carlo error."""
    monkeypatch.setattr(G, "DRAWS", 100)
    rng = np.random.default_rng(5)
    sims, failed, n_gates = 150, [], set()
    for _ in range(sims):
        per_category = {}
        for category in ("voice_pitch", "volume", "echo"):
            rows, cues = _rows_and_cues(rng, category, n_sources=5, pairs=2)
            gates = category_gates(category, rows, cues)
            per_category[category] = {"gates": gates, "reasons": [], "n_sources_test": 5}
        n_gates.add(judge(per_category)["gates"])
        failed.append(any(c["passes"] is False for c in per_category.values()))
    assert n_gates == {9}
    rate = float(np.mean(failed))
    assert rate <= G.ALPHA + 2.6 * np.sqrt(G.ALPHA * (1 - G.ALPHA) / sims), rate


@pytest.mark.slow
def test_a_difference_between_twins_whose_sign_each_source_sets_is_no_leak(monkeypatch):
    """Each source's increase clips differ from their twins by a large step whose sign the
    source sets (which end of its words is the darker): nothing carries from the training
    sources to the test sources, and builds of such sources fail at most alpha of the time.
    Relabelling twin pairs on the build's one split failed 18 of these 100: that null has
    no room for the spread of the sources' signs."""
    monkeypatch.setattr(G, "DRAWS", 100)
    rng = np.random.default_rng(8)
    sims, failed = 100, []
    for _ in range(sims):
        rows, cues = _rows_and_cues(rng, "voice_pitch", n_sources=10, pairs=3, leak=6.0,
                                    sign_by_source=True)  # fmt: skip
        per_category = {"voice_pitch": {"gates": category_gates("voice_pitch", rows, cues),
                                        "reasons": [], "n_sources_test": 10}}  # fmt: skip
        judge(per_category)
        failed.append(per_category["voice_pitch"]["passes"] is False)
    rate = float(np.mean(failed))
    assert rate <= G.ALPHA + 2.6 * np.sqrt(G.ALPHA * (1 - G.ALPHA) / sims), rate


def test_a_small_build_relabels_twin_pairs_and_a_larger_one_whole_sources():
    """Fewer than MIN_SOURCES sources have too few relabellings for a 5% test: their
    direction gates turn twin pairs about, and a leak every source shares still fails them;
    from MIN_SOURCES on, whole sources turn about. The constant gate moves constants within
    sources at any size."""
    for n_sources, unit in ((3, "twin pairs"), (G.MIN_SOURCES // 2, "sources")):
        rows, cues = _rows_and_cues(np.random.default_rng(9), "voice_pitch",
                                    n_sources=n_sources, leak=6.0)  # fmt: skip
        c = audit_category("voice_pitch", rows, cues)
        judge({"voice_pitch": c})
        assert c["gates"]["direction"]["unit"] == unit
        assert c["gates"]["constant"]["unit"] == "sources"
        assert c["gates"]["direction"]["fails"] is True, (n_sources, c["gates"]["direction"])


def _pitch_audit_text() -> tuple[dict, dict, str]:
    """One toy voice-pitch audit (3 sources, 2 pairs each): its category record, its report,
    and the table as `vocalgrad audit` prints it."""
    rows, cues = _rows_and_cues(np.random.default_rng(6), "voice_pitch", n_sources=3, pairs=2)
    c = audit_category("voice_pitch", rows, cues)
    report = {"dataset": "toy", "protocol": c["protocol"], "per_category": {"voice_pitch": c},
              "family": judge({"voice_pitch": c})}  # fmt: skip
    return c, report, format_audit(report)


def test_the_report_states_each_gates_null_p_value_and_power():
    """`vocalgrad audit` and the card: per gate the statistic, its null's 95th percentile,
    the statistic needed to fail, the family-wise p-value; below the table the smallest leak
    this build detects and the size to build where that is over 0.60."""
    c, report, text = _pitch_audit_text()
    family = report["family"]
    assert (
        "| category | gate | statistic | null 95th pct | needed to fail | p (family-wise) |" in text
    )
    gate = c["gates"]["direction"]
    assert (
        f"| voice_pitch | direction | LR accuracy {gate['value']:.3f} | {gate['null_p95']:.3f} |"
        in text
    )
    needed = family["needed"]["accuracy"]
    assert f"must reach at least LR accuracy {needed:.3f}" in text
    small = {**report, "family": {**family, "recommended_test_sources": 23}}
    assert "build about 23 test sources (and as many train)" in format_audit(small)
    assert "Every gate detects a leak of accuracy 0.60 (AUC 0.65)" in format_audit(
        {**report, "family": {**family, "recommended_test_sources": None}}
    )


def test_recommended_sources_scale_with_the_margin_squared():
    gate = {"gate": "direction", "needed": 0.70}
    assert G.recommended_sources([(gate, 10)]) == 40  # (0.20 / 0.10)^2 x 10
    assert G.recommended_sources([({"gate": "constant", "needed": 0.60}, 10)]) is None
    assert G.recommended_sources([({"gate": "direction", "needed": None}, 6)]) == 24


def test_a_statistic_and_its_needed_figure_never_print_alike():
    """Where the statistic and the figure it needs to fail round alike at 3 decimals, the
    gate table and the failure reason print as many more as tell them apart."""
    assert G.distinct_figures(0.6551, 0.6549) == ("0.6551", "0.6549")
    assert G.distinct_figures(0.712, 0.655) == ("0.712", "0.655")
    assert G.distinct_figures(0.7, None) == ("0.700", "n/a")
    assert G.distinct_figures(6 / 11, 6 / 11) == ("0.545", "0.545")  # at, not over: no digit run
    from vocalgrad.stimuli.audit.classifiers import _gate_reasons
    from vocalgrad.stimuli.audit.report import gate_rows

    gate = {"statistic": "LR AUC", "value": 0.65512, "null_p95": 0.6, "needed": 0.65498,
            "p_fwer": 0.04, "fails": True}  # fmt: skip
    c = {"gates": {"constant": gate}}
    [row] = gate_rows({"per_category": {"volume": c}})
    assert row[2:5] == ["LR AUC 0.6551", "0.600", "0.6550"]
    [reason] = _gate_reasons(c)
    assert "LR AUC 0.6551 > 0.6550 needed" in reason


def test_the_constant_auc_column_names_its_classifier_and_the_gate_its_statistic():
    """The table's constant AUC is the better of LR and HGB (named in the cell) while the gate
    reads the LR's AUC: the header and the legend say so, and the numbers are unchanged."""
    c, _, text = _pitch_audit_text()
    assert "| constant AUC, best of LR/HGB [CI] |" in text
    assert "the constant gate's statistic is the LR's AUC alone" in text
    if c["constant_auc"] is not None:
        best = max(("lr", "hgb"), key=lambda n: c["constant"][n]["auc"])
        assert f"{c['constant_auc']:.2f} [" in text
        assert f"] ({best.upper()}) |" in text


def test_failed_dimensions_gives_a_short_reason_per_failing_dimension():
    from vocalgrad.stimuli.audit import failed_dimensions

    report = {
        "per_category": {
            "volume": {"passes": True, "reasons": [], "gates": {}},
            "rate": {"passes": None, "reasons": ["too few sources for a CI: ..."], "gates": {}},
            "voice_pitch": {
                "passes": False,
                "reasons": [
                    "direction predicted from order-free cues with LR accuracy 0.6 > 0.55",
                    "constant clips told apart with LR AUC 0.7 > 0.6",
                ],
                "gates": {"order_free": {"fails": True}, "constant": {"fails": True}},
            },
            "which": {
                "passes": False,
                "reasons": ["the other dimension's direction equals the label on 0.90 of ..."],
                "gates": {"direction": {"fails": False}},
            },
        }
    }
    assert failed_dimensions(report) == {
        "voice_pitch": "order-free gate, constant gate",
        "which": "other dimension's direction",
    }
    assert failed_dimensions({"passes": True, "per_category": {}}) == {}


def _null_build(rng: np.random.Generator, n_gates: int = 4, shift: float = 0.0) -> dict:
    """An audit report of a build with no leak: each gate's observed accuracy (on 24 items)
    exchangeable with its 200 relabelled ones (`shift` added to the first gate's)."""
    gates = []
    for k in range(n_gates):
        values = rng.binomial(24, 0.5, size=G.DRAWS + 1) / 24
        values[0] += shift if k == 0 else 0.0
        gates.append(G.gate_record("direction", "LR accuracy", values, 12, 1 / 24))
    summary = G.correct_family(gates)
    per_category = {
        f"dim{k}": {"passes": not g["fails"], "reasons": [], "gates": {"direction": g}}
        for k, g in enumerate(gates)
    }
    return {"family": summary, "per_category": per_category}


def test_a_ladders_datasets_fail_together_at_most_at_alpha():
    """Nine clean builds, each holding its own family at 5%: some build fails alone in about
    a third of such ladders, the nine as one family (`joint_family`) in at most 5%."""
    rng = np.random.default_rng(5)
    ladders = 300
    alone = joint = 0
    for _ in range(ladders):
        builds = {f"b{i}": _null_build(rng) for i in range(9)}
        alone += any(not c["passes"] for b in builds.values() for c in b["per_category"].values())
        verdict = G.joint_family(builds)
        assert verdict["gates"] == 36 and verdict["builds"] == sorted(builds)
        joint += not verdict["passes"]
    assert alone / ladders > 0.2
    assert joint / ladders <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / ladders)


def test_the_joint_family_still_fails_a_leak_and_keeps_a_failure_of_fact():
    rng = np.random.default_rng(6)
    builds = {f"b{i}": _null_build(rng) for i in range(5)}
    builds["leaky"] = _null_build(rng, shift=0.5)
    verdict = G.joint_family(builds)
    assert verdict["passes"] is False and "leaky" in verdict["failing"]
    failed = verdict["failing"]["leaky"]["dim0"]["gates"]["direction"]
    assert failed["p"] <= 0.01 and 0.5 < failed["needed"] < failed["value"]
    assert verdict["critical_z"] >= max(b["family"]["critical_z"] for b in builds.values())
    # a category failed on a fact of its build (no gate of its own fails) stays failed
    fact = _null_build(rng, n_gates=1)
    fact["per_category"]["dim0"].update(passes=False, reasons=["the other dimension's ..."])
    verdict = G.joint_family({"fact": fact})
    assert verdict["failing"]["fact"]["dim0"] == {"reasons": ["the other dimension's ..."]}
    # an audit from before draw maxima were recorded cannot join: no verdict, and why
    del fact["family"]["draw_maxima"]
    verdict = G.joint_family({"old": fact, **builds})
    assert verdict["passes"] is None and "old" in verdict["reason"]

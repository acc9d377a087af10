"""Metrics on synthetic listeners whose true behaviour is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_equal
from scipy.stats import norm
from scipy.stats import t as student_t
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from vocalgrad.stats import (
    BOOTSTRAP_MIN_CLUSTERS,
    ClusterWeightedAUC,
    constant_summary,
    flip_rate,
    paired_comparison,
    same_answer_alarm,
    summarise,
    weighted_ci,
)

CATEGORIES = ("volume", "voice_pitch", "echo", "speaking_speed")


def make_items(n_sources: int = 100, per_source: int = 20) -> list[dict]:
    """Balanced increase/decrease items, `per_source` clips per source, 2 sources per speaker."""
    rows = []
    for s in range(n_sources):
        for j in range(per_source):
            rows.append(
                {
                    "item_id": f"it-{s:03d}-{j:02d}",
                    "category": CATEGORIES[j % len(CATEGORIES)],
                    "direction": "increase" if j % 2 == 0 else "decrease",
                    "tier": ("low", "mid", "high")[j % 3],
                    "curve": "linear",
                    "source_id": f"src{s:03d}",
                    "speaker_id": f"spk{s // 2:03d}",
                }
            )
    return rows


def answer(rows: list[dict], predicted, **extra) -> list[dict]:
    return [{**r, "predicted": p, **extra} for r, p in zip(rows, predicted, strict=True)]


def overall(rows, **kw) -> dict:
    return summarise(rows, **kw)[0]


def test_random_listener_is_at_chance():
    items = make_items()
    rng = np.random.default_rng(0)
    s = overall(answer(items, rng.choice(["increase", "decrease"], size=len(items))))
    assert s["n"] == 2000 and s["group"] == "overall"
    assert abs(s["accuracy"] - 0.5) < 0.04
    assert s["accuracy_lo"] < 0.5 < s["accuracy_hi"]
    assert abs(s["dprime"]) < 0.15
    assert s["dprime_lo"] < 0 < s["dprime_hi"]


def test_always_increase_is_pure_bias():
    items = make_items()
    s = overall(answer(items, ["increase"] * len(items)))
    assert s["accuracy"] == 0.5 and s["balanced_accuracy"] == 0.5
    assert s["increase_rate"] == 1.0 and s["decrease_rate"] == 0.0
    assert abs(s["dprime"]) < 1e-12
    assert s["criterion"] < -1.5  # liberal: says "increase" whatever it hears
    assert same_answer_alarm(answer(items, ["increase"] * len(items))) is not None


def test_perfect_listener_has_finite_large_dprime():
    items = make_items()
    s = overall(answer(items, [r["direction"] for r in items]))
    assert s["accuracy"] == 1.0 and s["balanced_accuracy"] == 1.0
    assert math.isfinite(s["dprime"]) and s["dprime"] > 3
    assert abs(s["criterion"]) < 1e-12


def test_planted_bias_and_sensitivity_match_closed_form():
    items = make_items()
    inc = [r for r in items if r["direction"] == "increase"]
    dec = [r for r in items if r["direction"] == "decrease"]
    n_hit, n_fa = round(0.95 * len(inc)), round(0.6 * len(dec))
    rows = answer(inc, ["increase"] * n_hit + ["decrease"] * (len(inc) - n_hit))
    rows += answer(dec, ["increase"] * n_fa + ["decrease"] * (len(dec) - n_fa))
    s = overall(rows)
    h = (n_hit + 0.5) / (len(inc) + 1)
    f = (n_fa + 0.5) / (len(dec) + 1)
    assert s["dprime"] == pytest.approx(norm.ppf(h) - norm.ppf(f), abs=1e-12)
    assert s["criterion"] == pytest.approx(-(norm.ppf(h) + norm.ppf(f)) / 2, abs=1e-12)
    assert s["dprime"] == pytest.approx(norm.ppf(0.95) - norm.ppf(0.6), abs=0.02)
    assert s["criterion"] < 0  # biased towards "increase"
    assert s["dprime_lo"] < s["dprime"] < s["dprime_hi"]
    truth = [r["direction"] for r in rows]
    said = [r["predicted"] for r in rows]
    assert s["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(truth, said))


def test_unparsed_answers_are_wrong_but_left_out_of_dprime():
    items = make_items()
    preds = [r["direction"] if i % 4 else None for i, r in enumerate(items)]
    s = overall(answer(items, preds))
    assert s["unparsed_rate"] == pytest.approx(0.25)
    assert s["accuracy"] == pytest.approx(0.75)
    assert s["dprime"] > 3  # every answered trial is right


def test_cluster_bootstrap_is_wider_when_answers_share_a_source():
    items = make_items(n_sources=100, per_source=20)
    rng = np.random.default_rng(1)
    hears = {f"src{s:03d}": rng.random() < 0.6 for s in range(100)}
    flip = {"increase": "decrease", "decrease": "increase"}
    preds = [r["direction"] if hears[r["source_id"]] else flip[r["direction"]] for r in items]
    rows = answer(items, preds)
    clustered = overall(rows, cluster="source_id")
    speaker = overall(rows, cluster="speaker_id")
    item = overall(rows, cluster=None)
    width = {
        k: s["accuracy_hi"] - s["accuracy_lo"]
        for k, s in (("source", clustered), ("speaker", speaker), ("item", item))
    }
    assert clustered["n_clusters"] == 100 and item["n_clusters"] == 2000
    assert item["cluster"] == "item" and speaker["n_clusters"] == 50
    assert width["source"] > 2.5 * width["item"]
    assert width["speaker"] > 2 * width["item"]
    assert clustered["dprime_hi"] - clustered["dprime_lo"] > item["dprime_hi"] - item["dprime_lo"]


def test_auc_from_llr_matches_sklearn_and_has_a_ci():
    items = make_items()
    rng = np.random.default_rng(2)
    llr = [rng.normal(0.8 if r["direction"] == "increase" else 0.0) for r in items]
    llr[:50] = [0.0] * 50  # ties
    rows = [
        {**r, "llr": v} for r, v in zip(answer(items, ["increase"] * len(items)), llr, strict=True)
    ]
    truth = [r["direction"] == "increase" for r in rows]
    for cluster in ("source_id", None):
        s = overall(rows, cluster=cluster)
        assert s["auc"] == pytest.approx(roc_auc_score(truth, llr), abs=1e-12)
        assert s["auc_lo"] < s["auc"] < s["auc_hi"]
    rows[3]["llr"] = None
    assert math.isnan(overall(rows)["auc"])


@pytest.mark.parametrize("n_clusters", [3, 40, 400])
def test_weighted_auc_equals_sklearn_under_weights(n_clusters):
    """Both the quadratic-form and the direct path equal sklearn on the expanded sample."""
    rng = np.random.default_rng(n_clusters)
    n = 400
    scores = np.round(rng.normal(size=n), 1)  # many ties
    positive = rng.random(n) < 0.5
    cid = rng.integers(0, n_clusters, size=n)
    cid[:n_clusters] = np.arange(n_clusters)
    w = rng.integers(0, 3, size=(5, n_clusters))
    got = ClusterWeightedAUC(scores, positive, cid, n_clusters)(w)
    for b in range(5):
        reps = w[b, cid]
        want = roc_auc_score(np.repeat(positive, reps), np.repeat(scores, reps))
        assert got[b] == pytest.approx(want, abs=1e-12)


def test_groups_and_constant_rows():
    items = make_items(n_sources=20, per_source=8)
    rows = answer(items, [r["direction"] for r in items])
    rows += [
        {
            "item_id": f"c{i}",
            "category": "volume",
            "direction": "constant",
            "predicted": ("increase", "constant", None, "increase")[i % 4],
            "source_id": f"src{i:03d}",
            "speaker_id": "x",
        }
        for i in range(8)
    ]
    table = summarise(rows, by=("category", "tier"), n_boot=200)
    assert table[0]["category"] == "overall" and table[0]["n"] == 160
    assert sum(t["n"] for t in table[1:]) == 160
    assert table[1]["group"] == "echo|high" and {"category", "tier"} <= table[1].keys()
    const = constant_summary(rows)
    assert const[0]["n"] == 8
    assert const[0]["increase_rate"] == 0.5 and const[0]["constant_rate"] == 0.25
    assert const[0]["unparsed_rate"] == 0.25 and const[1]["category"] == "volume"


def test_degenerate_groups_give_nan_not_errors():
    assert math.isnan(overall([])["accuracy"])
    items = make_items(n_sources=5, per_source=4)
    only_inc = answer([r for r in items if r["direction"] == "increase"], ["increase"] * 10)
    s = overall(only_inc)
    assert s["accuracy"] == 1.0
    assert math.isnan(s["balanced_accuracy"]) and math.isnan(s["dprime"])
    assert math.isnan(s["auc"])
    s = overall(answer(items, [None] * len(items)))
    assert s["accuracy"] == 0.0 and s["unparsed_rate"] == 1.0 and math.isnan(s["dprime"])
    assert math.isnan(s["dprime_lo"])
    s = overall(answer(items, ["increase"] * len(items)), n_boot=0)
    assert s["accuracy"] == 0.5 and math.isnan(s["accuracy_lo"])
    no_cluster = [
        {k: v for k, v in r.items() if k != "source_id"}
        for r in answer(items, ["increase"] * len(items))
    ]
    assert overall(no_cluster)["n_clusters"] == len(items)  # missing cluster -> own cluster
    assert constant_summary([])[0]["n"] == 0
    assert math.isnan(paired_comparison([], [])["difference"])


def test_results_are_deterministic_and_group_cis_independent_of_other_groups():
    items = make_items()
    rng = np.random.default_rng(3)
    rows = answer(items, rng.choice(["increase", "decrease", None], size=len(items)))
    assert_equal(summarise(rows, seed=5), summarise(rows, seed=5))  # NaN == NaN here
    assert summarise(rows, seed=5)[1]["dprime_lo"] != summarise(rows, seed=6)[1]["dprime_lo"]
    volume = [r for r in rows if r["category"] == "volume"]
    assert_equal(summarise(volume, seed=5)[1], summarise(rows, seed=5)[-1])


def _listener(items, p_correct, rng):
    flip = {"increase": "decrease", "decrease": "increase"}
    return answer(
        items, [r["direction"] if rng.random() < p_correct else flip[r["direction"]] for r in items]
    )


def test_paired_comparison_detects_a_real_difference_and_not_a_null_one():
    items = make_items()
    rng = np.random.default_rng(4)
    a, b = _listener(items, 0.75, rng), _listener(items, 0.65, rng)
    real = paired_comparison(a, b, n_boot=1000, seed=0)
    assert real["n"] == 2000 and real["n_clusters"] == 100
    assert real["difference"] == pytest.approx(real["accuracy_a"] - real["accuracy_b"])
    assert 0 < real["difference_lo"] < real["difference"] < real["difference_hi"]
    assert real["mcnemar_p"] < 0.001 and real["permutation_p"] < 0.01

    a, b = _listener(items, 0.7, rng), _listener(items, 0.7, rng)
    null = paired_comparison(a, b, n_boot=1000, seed=0)
    assert null["difference_lo"] < 0 < null["difference_hi"]
    assert null["mcnemar_p"] > 0.05 and null["permutation_p"] > 0.05

    same = paired_comparison(a, a)
    assert same["difference"] == 0 and same["mcnemar_p"] == 1 and same["permutation_p"] == 1

    bad = [
        {**r, "direction": "constant" if r["direction"] == "increase" else "increase"} for r in b
    ]
    with pytest.raises(ValueError, match="same dataset"):
        paired_comparison(a, bad)


def test_paired_permutation_is_exact_with_few_clusters():
    items = make_items(n_sources=4, per_source=10)
    a = answer(items, [r["direction"] for r in items])
    b = answer(items, ["increase"] * len(items))
    res = paired_comparison(a, b, n_boot=100)
    assert res["permutation_p"] == pytest.approx(2 / 16)  # all-positive and all-negative signs


def test_flip_rate():
    items = make_items(n_sources=5, per_source=4)
    forward = answer(items, ["increase"] * 20)
    flip = {"increase": "decrease", "decrease": "increase"}
    reversed_rows = [
        {
            "item_id": f"rev-{r['item_id']}",
            "reversed_of": r["item_id"],
            "direction": flip[r["direction"]],
            "predicted": ("decrease", "increase", None, "decrease")[i % 4],
        }
        for i, r in enumerate(forward)
    ]
    out = flip_rate(forward, reversed_rows)
    assert out["n_pairs"] == 20 and out["n_answered"] == 15 and out["n_flipped"] == 10
    assert out["flip_rate"] == pytest.approx(0.5)
    assert out["flip_rate_answered"] == pytest.approx(10 / 15)
    assert math.isnan(flip_rate(forward, [])["flip_rate"])


def test_same_answer_alarm():
    items = make_items()
    rng = np.random.default_rng(5)
    assert same_answer_alarm(answer(items, rng.choice(["increase", "decrease"], 2000))) is None
    mostly = ["decrease"] * 1950 + ["increase"] * 50
    message = same_answer_alarm(answer(items, mostly))
    assert message is not None and '"decrease"' in message and "97.5%" in message
    assert same_answer_alarm(answer(items, mostly), threshold=0.99) is None
    assert "no parsable answer" in same_answer_alarm(answer(items, [None] * 2000))
    assert same_answer_alarm(answer(items[:5], ["increase"] * 5)) is None


def _spread_listener(items: list[dict], rng: np.random.Generator, key: str = "speaker_id"):
    """Each cluster hears with its own probability, so clusters really differ."""
    hears = {k: rng.uniform(0.3, 0.9) for k in sorted({r[key] for r in items})}
    flip = {"increase": "decrease", "decrease": "increase"}
    return answer(
        items,
        [r["direction"] if rng.random() < hears[r[key]] else flip[r["direction"]] for r in items],
    )


@pytest.mark.parametrize("n_speakers", [1, 2, 3, 5, 9, 10, 12, 49, 50])
def test_few_clusters_never_give_a_degenerate_interval(n_speakers):
    """The issue's case: `--cluster speaker_id` on one or two speakers printed
    0.375 [0.375, 0.375]."""
    items = make_items(n_sources=2 * n_speakers, per_source=20)
    rows = _spread_listener(items, np.random.default_rng(100 + n_speakers))
    s = overall(rows, cluster="speaker_id", n_boot=500)
    assert s["n_clusters"] == n_speakers
    want = (
        "none"
        if n_speakers == 1
        else ("cluster jackknife t" if n_speakers < BOOTSTRAP_MIN_CLUSTERS else "cluster bootstrap")
    )
    assert s["ci_method"] == want
    for name in ("accuracy", "balanced_accuracy", "dprime", "criterion"):
        lo, hi = s[f"{name}_lo"], s[f"{name}_hi"]
        if n_speakers == 1:
            assert math.isnan(lo) and math.isnan(hi)
        else:
            assert lo < s[name] < hi, (name, lo, s[name], hi)
    if n_speakers == 2:  # a t with 1 df: two clusters bound almost nothing
        assert s["accuracy_hi"] - s["accuracy_lo"] > 0.5


def test_few_cluster_interval_is_the_t_interval_on_cluster_means():
    items = make_items(n_sources=12, per_source=20)  # 6 speakers of 40 items each
    rows = _spread_listener(items, np.random.default_rng(7))
    s = overall(rows, cluster="speaker_id")
    means = [
        np.mean([r["predicted"] == r["direction"] for r in rows if r["speaker_id"] == k])
        for k in sorted({r["speaker_id"] for r in rows})
    ]
    half = student_t.ppf(0.975, len(means) - 1) * np.std(means, ddof=1) / math.sqrt(len(means))
    assert s["accuracy"] == pytest.approx(np.mean(means))
    assert s["accuracy_lo"] == pytest.approx(max(0.0, np.mean(means) - half))
    assert s["accuracy_hi"] == pytest.approx(min(1.0, np.mean(means) + half))


def test_few_cluster_interval_covers_the_truth():
    """5 clusters that differ a lot: the jackknife t keeps ~95% coverage of the true mean."""
    rng = np.random.default_rng(8)
    items = make_items(n_sources=10, per_source=10)
    covered = 0
    for _ in range(200):
        s = overall(_spread_listener(items, rng), by=(), cluster="speaker_id", n_boot=1)
        covered += s["accuracy_lo"] <= 0.6 <= s["accuracy_hi"]  # uniform(0.3, 0.9) averages 0.6
    assert covered / 200 > 0.9


def test_clusters_that_agree_exactly_get_a_wilson_interval_on_the_cluster_count():
    """Three perfect speakers: the jackknife has no spread; [1, 1] would claim certainty."""
    items = make_items(n_sources=6, per_source=20)
    s = overall(answer(items, [r["direction"] for r in items]), cluster="speaker_id")
    assert s["accuracy"] == 1.0 and s["n_clusters"] == 3
    z2 = norm.ppf(0.975) ** 2
    assert s["accuracy_lo"] == pytest.approx(3 / (3 + z2)) and s["accuracy_hi"] == 1.0
    assert s["balanced_accuracy_lo"] == pytest.approx(3 / (3 + z2))
    assert math.isnan(s["dprime_lo"]) and math.isnan(s["dprime_hi"])  # not a proportion: no CI


def test_many_clusters_that_agree_exactly_get_the_wilson_interval_too():
    """56 perfect sources: every bootstrap resample is perfect, and [1, 1] would claim a
    certainty 56 sources cannot give; so would [0.5, 0.5] for a listener right on exactly
    half of every source's items. An audit classifier's CI follows the same rule."""
    items = make_items(n_sources=56, per_source=20)
    s = overall(answer(items, [r["direction"] for r in items]))
    z2 = norm.ppf(0.975) ** 2
    assert s["ci_method"] == "cluster bootstrap" and s["n_clusters"] == 56
    assert s["accuracy_lo"] == pytest.approx(56 / (56 + z2)) and s["accuracy_hi"] == pytest.approx(
        1.0
    )
    half = overall(answer(items, ["increase"] * len(items)))
    assert half["accuracy_lo"] < 0.4 and half["accuracy_hi"] > 0.6
    rng = np.random.default_rng(0)
    lo, hi, method = weighted_ci(lambda w: np.full(len(w), 0.5), 0.5, 56, rng)
    assert method == "cluster bootstrap" and lo < 0.4 and hi > 0.6
    spread = overall(
        answer(items, [r["direction"] if i % 3 else "increase" for i, r in enumerate(items)])
    )
    assert (
        spread["accuracy_hi"] - spread["accuracy_lo"] < 0.15
    )  # clusters that differ keep the bootstrap


def test_paired_ci_with_few_clusters_agrees_with_the_permutation_test():
    """The issue's case: 2 clusters printed [+0.457, +0.529] next to permutation p = 0.5."""
    rng = np.random.default_rng(9)
    for n_sources, expect_ci in ((2, False), (5, False), (7, True), (9, True)):
        items = make_items(n_sources=n_sources, per_source=20)
        a, b = _listener(items, 0.95, rng), _listener(items, 0.5, rng)
        res = paired_comparison(a, b, cluster="source_id")
        assert res["n_clusters"] == n_sources
        assert res["permutation_min_p"] == pytest.approx(2 / 2**n_sources)
        assert res["permutation_p"] >= res["permutation_min_p"] - 1e-12
        if not expect_ci:  # even the most extreme signs give p > 0.05: no CI can exclude 0
            assert res["ci_method"] == "none" and math.isnan(res["difference_lo"])
            continue
        assert res["ci_method"] == "sign-flip inversion"
        assert res["difference_lo"] < res["difference"] < res["difference_hi"]
        assert (res["difference_lo"] > 0) == (res["permutation_p"] <= 0.05)
    items = make_items(n_sources=8, per_source=20)
    a, b = _listener(items, 0.7, rng), _listener(items, 0.7, rng)
    null = paired_comparison(a, b)
    assert null["permutation_p"] > 0.05 and null["difference_lo"] < 0 < null["difference_hi"]
    same_share = paired_comparison(
        answer(items, [r["direction"] for r in items]), answer(items, ["increase"] * len(items))
    )
    assert same_share["difference"] == 0.5 and same_share["permutation_p"] < 0.01
    assert math.isnan(same_share["difference_lo"])  # not [0.5, 0.5]


def test_paired_ci_between_the_sign_flip_and_the_bootstrap_is_a_jackknife():
    """20 clusters: too many sign vectors to enumerate, too few for the bootstrap's percentile
    interval to cover (`benchmarks/ci_coverage.py`): the jackknife t of the difference."""
    rng = np.random.default_rng(4)
    items = make_items(n_sources=20, per_source=20)
    better = paired_comparison(_listener(items, 0.9, rng), _listener(items, 0.5, rng))
    assert better["n_clusters"] == 20 and better["ci_method"] == "cluster jackknife t"
    assert 0 < better["difference_lo"] < better["difference"] < better["difference_hi"]
    alike = paired_comparison(_listener(items, 0.7, rng), _listener(items, 0.7, rng))
    assert alike["difference_lo"] < 0 < alike["difference_hi"]

"""The coverage simulation behind `stats.BOOTSTRAP_MIN_CLUSTERS` (benchmarks/ci_coverage.py)."""

from __future__ import annotations

from conftest import load_benchmark

from vocalgrad.stats import BOOTSTRAP_MIN_CLUSTERS, MIN_SOURCES, ci_method_for


def test_the_jackknife_covers_where_the_bootstrap_falls_short():
    """At 8 sources the toolkit's own `summarise` under the percentile bootstrap misses the
    truth more often than under the jackknife t, for accuracy, d' and AUC alike, because its
    intervals are narrower. The reason the toolkit switches below 50."""
    coverage = load_benchmark("ci_coverage").coverage
    few = coverage(8, runs=150, seed=1)
    boot, jack = few["bootstrap"], few["jackknife t"]
    for name in ("accuracy", "dprime", "auc"):
        assert boot[f"{name} width"] < jack[f"{name} width"]
        assert boot[name] <= jack[name]
    assert jack["accuracy"] > 0.9
    assert MIN_SOURCES < BOOTSTRAP_MIN_CLUSTERS
    assert ci_method_for(BOOTSTRAP_MIN_CLUSTERS - 1) == "cluster jackknife t"


def test_the_script_prints_a_row_per_cluster_count(capsys):
    load_benchmark("ci_coverage").main(["--runs", "5", "--clusters", "4,60", "--items", "8"])
    out = capsys.readouterr().out
    assert "cluster jackknife t" in out and "cluster bootstrap" in out
    assert "the toolkit uses the bootstrap from 50 clusters" in out

"""The coverage simulation behind `stats.BOOTSTRAP_MIN_CLUSTERS` (benchmarks/ci_coverage.py)."""

from __future__ import annotations

from conftest import load_benchmark

from vocalgrad.stats import BOOTSTRAP_MIN_CLUSTERS, MIN_SOURCES


def test_the_jackknife_covers_where_the_bootstrap_falls_short():
    """At 8 sources the percentile bootstrap misses the truth about twice as often as the
    nominal 5%; the jackknife t does not. The reason the toolkit switches below 50."""
    coverage = load_benchmark("ci_coverage").coverage
    few = coverage(8, runs=400, items=24, spread=0.15, seed=1)
    assert few["bootstrap"] < 0.92 < few["jackknife t"]
    assert few["jackknife t width"] > few["bootstrap width"]
    assert MIN_SOURCES < BOOTSTRAP_MIN_CLUSTERS


def test_the_script_prints_a_row_per_cluster_count(capsys):
    load_benchmark("ci_coverage").main(["--runs", "20", "--clusters", "4,60"])
    out = capsys.readouterr().out
    assert "cluster jackknife t" in out and "cluster bootstrap" in out
    assert "the toolkit uses the bootstrap from 50 clusters" in out

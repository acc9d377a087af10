"""The cue study (benchmarks/cue_pairs.py): the twin shares and the constants' AUC read what
the cues hold, per category."""

from __future__ import annotations

from conftest import load_benchmark


def _rows_and_cues():
    rows, cues = [], {}
    for s in range(6):
        for i, direction in enumerate(("increase", "decrease", "constant")):
            item = f"{s}{i}"
            rows.append(
                {"item_id": item, "category": "echo", "direction": direction,
                 "source_id": f"tones/harmonic/{s}", "tier": "high", "curve": "linear"}
            )  # fmt: skip
            peak = {"increase": -3.0, "decrease": -4.0, "constant": -6.0}[direction] + 0.1 * s
            cues[item] = {"global_peak_dbfs": peak, "of_crest_db": 7.0}
    return rows, cues


def test_a_cue_that_sets_constants_apart_reads_auc_zero_and_a_flat_one_is_left_out():
    study = load_benchmark("cue_pairs")
    rows, cues = _rows_and_cues()
    found = study.constant_aucs(rows, cues, "echo")
    assert found["global_peak_dbfs"] == (0.0, 6, 12)  # every constant under every sweep
    assert "of_crest_db" not in found  # the same everywhere: no AUC to read
    assert study.constant_aucs(rows, cues, "volume") == {}


def test_twin_shares_count_each_pair_once():
    study = load_benchmark("cue_pairs")
    rows, cues = _rows_and_cues()
    share, n, median = study.twin_shares(rows, cues, "echo")["global_peak_dbfs"]
    assert (share, n) == (1.0, 6) and abs(median - 1.0) < 1e-9

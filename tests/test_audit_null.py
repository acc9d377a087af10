"""The audit's null (benchmarks/audit_null.py): relabelled clips carry no label, and the
statistics are the gate's own, so a planted difference reads as one and none reads as none."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from conftest import load_benchmark


def _rows(n_sources: int = 12) -> list[dict]:
    return [
        {
            "item_id": f"{s:02d}-{tier}-{curve}-{d}",
            "source_id": f"s{s}",
            "split": "test" if s % 2 else "train",
            "category": "echo",
            "tier": tier,
            "curve": curve,
            "direction": d,
        }
        for s in range(n_sources)
        for tier in ("low", "high")
        for curve in ("linear", "jump")
        for d in ("increase", "decrease")
    ]


def test_pseudo_constants_are_k_changing_clips_of_every_source():
    null = load_benchmark("audit_null")
    rows = _rows()
    relabelled = null.pseudo_constants(rows, 3, np.random.default_rng(0))
    per_source = Counter(r["source_id"] for r in relabelled if r["direction"] == "constant")
    assert set(per_source.values()) == {3} and len(per_source) == 12
    assert all(r["direction"] != "constant" for r in rows)  # the input is left as it was


def test_flipped_pairs_keep_twins_opposite_and_flip_about_half():
    null = load_benchmark("audit_null")
    rows = _rows(40)
    relabelled = null.flipped_pairs(rows, np.random.default_rng(1))
    twins: dict[tuple, set] = {}
    for r in relabelled:
        twins.setdefault((r["source_id"], r["tier"], r["curve"]), set()).add(r["direction"])
    assert all(d == {"increase", "decrease"} for d in twins.values())
    moved = sum(a["direction"] != b["direction"] for a, b in zip(rows, relabelled, strict=True))
    assert 0.35 < moved / len(rows) < 0.65


def test_the_constant_statistic_sees_a_planted_difference_and_not_its_absence():
    null = load_benchmark("audit_null")
    rng = np.random.default_rng(2)
    rows = null.pseudo_constants(_rows(), 2, rng)
    plain = {r["item_id"]: {"cue": float(rng.normal())} for r in rows}
    auc, _, _ = null.constant_statistic(rows, plain, ["cue"], "plain")
    assert abs(auc - 0.5) < 0.2
    planted = {
        k: {"cue": v["cue"] + 3.0 * (r["direction"] == "constant")}
        for r in rows
        for k, v in plain.items()
        if k == r["item_id"]
    }
    auc, lo, _ = null.constant_statistic(rows, planted, ["cue"], "planted")
    assert auc > 0.95 and lo > 0.65


def test_shuffled_constants_keep_each_sources_count_and_move_them():
    null = load_benchmark("audit_null")
    rows = [
        {**r, "direction": "constant"} if r["tier"] == "low" and r["curve"] == "linear"
        and r["direction"] == "increase" else r
        for r in _rows()
    ]  # fmt: skip
    moved = []
    for seed in range(20):
        shuffled = null.shuffled_constants(rows, np.random.default_rng(seed))
        per_source = Counter(r["source_id"] for r in shuffled if r["direction"] == "constant")
        assert set(per_source.values()) == {1} and len(per_source) == 12
        moved.append(
            sum(
                a["direction"] == "constant" and b["direction"] != "constant"
                for a, b in zip(rows, shuffled, strict=True)
            )  # fmt: skip
        )
    assert 0 < np.mean(moved) < 12  # a source's constant lands on any of its eight clips


def test_plants_keep_the_file_and_change_what_they_name():
    null = load_benchmark("audit_null")
    sr = 16000
    rng = np.random.default_rng(3)
    speech = (0.1 * rng.standard_normal(sr)).astype(np.float32)
    audio = np.concatenate([np.zeros(sr // 2, np.float32), speech, np.zeros(sr // 2, np.float32)])
    row = {"speech_onset_s": 0.5, "speech_offset_s": 1.5}
    for name, (_, plant) in null.PLANTS.items():
        out, span = plant(audio, sr, row)
        assert out.shape == audio.shape, name
    louder, _ = null.PLANTS["loud_1db"][1](audio, sr, row)
    assert 20 * np.log10(np.abs(louder).max() / np.abs(audio).max()) == pytest.approx(1.0)
    tail, _ = null.PLANTS["tail_50ms"][1](audio, sr, row)
    assert np.abs(tail[int(1.5 * sr) : int(1.54 * sr)]).max() > 0.01  # sounds after the offset
    assert not tail[int(1.56 * sr) :].any()
    later, span = null.PLANTS["lead_100ms"][1](audio, sr, row)
    assert span == pytest.approx((0.6, 1.6)) and not later[: int(0.6 * sr)].any()

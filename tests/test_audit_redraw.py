"""The audit's redraw (`vocalgrad.stimuli.audit.redraw`): how far a gate's statistic moves
when a build's speakers are dealt into train and test again (issue #24: a small build's figure
is much of it its draw of sources). On synthetic cues through the audit's own `gate_values`;
tests/test_audit.py checks it on rendered audio."""

from __future__ import annotations

from functools import partial

import numpy as np

from vocalgrad.stimuli.audit.classifiers import gate_values
from vocalgrad.stimuli.audit.redraw import describe, redrawn_values, summarise
from vocalgrad.stimuli.order_free import NAMES

SPEAKERS, PER_SPEAKER, PAIRS = 8, 2, 6


def _build(sign_of_source) -> tuple[list[dict], dict[str, dict[str, float]]]:
    """An 8 + 8 build's rows (four speakers a split, two sources each, six twin pairs a
    source) and order-free cues: the increase clip's power centroid sits 60 Hz from its
    twin's, on the side `sign_of_source` gives; every other cue is noise."""
    rng = np.random.default_rng(3)
    rows, cues = [], {}
    for k in range(SPEAKERS):
        for j in range(PER_SPEAKER):
            source = f"spk{k}/utt{j}"
            sign = sign_of_source(k * PER_SPEAKER + j)
            for p in range(PAIRS):
                for direction, side in (("increase", 1), ("decrease", -1)):
                    item = f"{source}/{p}/{direction}"
                    rows.append(
                        {
                            "item_id": item,
                            "source_id": source,
                            "speaker_id": f"spk{k}",
                            "split": "test" if k < SPEAKERS // 2 else "train",
                            "category": "volume",
                            "direction": direction,
                        }
                    )
                    cue = {n: float(rng.normal()) for n in NAMES}
                    cue["of_centroid_power_hz"] = 1000.0 + 30.0 * side * sign + rng.normal(0, 5)
                    cues[item] = cue
    return rows, cues


def _order_free(rows, cues, draws: int) -> list[float]:
    """The order-free gate's statistic over `draws` deals of the build's speakers."""
    deals = redrawn_values(rows, partial(gate_values, "volume", cues=cues), draws=draws)
    return [d["order_free"] for d in deals]


def test_a_leak_every_source_shares_survives_every_redraw():
    rows, cues = _build(lambda i: 1)
    accuracies = _order_free(rows, cues, draws=6)
    assert len(accuracies) == 6 and min(accuracies) > 0.95


def test_a_leak_whose_sign_each_source_sets_swings_with_the_draw():
    signs = np.random.default_rng(5).permutation([1] * 8 + [-1] * 8)
    rows, cues = _build(lambda i: int(signs[i]))
    accuracies = _order_free(rows, cues, draws=12)
    summary = summarise(accuracies, 0.60)
    assert summary["draws"] == 12 and summary["sd"] > 0.05  # lined up with the test, or not
    assert abs(summary["mean"] - 0.5) < 0.2
    assert summary["min"] <= summary["mean"] <= summary["max"]
    assert summary["above_gate"] == sum(a > 0.60 for a in accuracies)
    assert describe(summary).startswith(f"redrawn {summary['mean']:.2f} +- {summary['sd']:.2f} [")


def test_each_redraw_keeps_speakers_whole_and_the_builds_sizes():
    rows, cues = _build(lambda i: 1)
    seen = []

    def record(rows):
        splits = {}
        for r in rows:
            splits.setdefault(r["split"], set()).add(r["source_id"])
        seen.append(splits)
        return {"order_free": 0.5}

    assert redrawn_values(rows, record, draws=5) == [{"order_free": 0.5}] * 5
    assert len({frozenset(s["test"]) for s in seen}) > 1
    for splits in seen:
        assert len(splits["test"]) == len(splits["train"]) == SPEAKERS // 2 * PER_SPEAKER
        speakers = [{s.split("/")[0] for s in splits[side]} for side in ("train", "test")]
        assert not speakers[0] & speakers[1]


def test_a_build_without_a_train_split_has_nothing_to_redraw():
    rows, cues = _build(lambda i: 1)
    only_test = [{**r, "split": "test"} for r in rows]
    assert redrawn_values(only_test, partial(gate_values, "volume", cues=cues), draws=2) == []
    assert summarise([], 0.60) is None
    assert describe(None) == "too few clips or sources to redraw"

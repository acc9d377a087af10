"""benchmarks/order_free_cues.py --resplit: how far an order-free accuracy moves with the draw
of sources (issue #24: a small build's figure is mostly its draw of sources)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_benchmark

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


@pytest.fixture(scope="module")
def script():
    return load_benchmark("order_free_cues")


def test_a_leak_every_source_shares_survives_every_redraw(script):
    rows, cues = _build(lambda i: 1)
    best = script.resplit("volume", rows, cues, draws=6)["best"]
    assert len(best) == 6 and min(best) > 0.95


def test_a_leak_whose_sign_each_source_sets_swings_with_the_draw(script):
    signs = np.random.default_rng(5).permutation([1] * 8 + [-1] * 8)
    rows, cues = _build(lambda i: int(signs[i]))
    best = np.asarray(script.resplit("volume", rows, cues, draws=12)["best"])
    assert best.std() > 0.05  # the training sources line up with the test ones, or not
    assert abs(np.mean(best) - 0.5) < 0.2
    text = script.describe_resplit({"best": list(best), "lr": list(best)})
    assert text.startswith(f"best {best.mean():.2f} +- ") and "of 12 draws" in text


def test_each_redraw_keeps_speakers_whole_and_the_builds_sizes(script, monkeypatch):
    rows, cues = _build(lambda i: 1)
    seen = []

    def record(category, rows, cues, train, test):
        seen.append((train, test))
        return {"lr": 0.5}

    monkeypatch.setattr(script, "_refit", record)
    script.resplit("volume", rows, cues, draws=5)
    assert len(seen) == 5 and len({tuple(test) for _, test in seen}) > 1
    for train, test in seen:
        assert len(test) == len(train) == SPEAKERS // 2 * PER_SPEAKER
        speakers = [{s.split("/")[0] for s in side} for side in (train, test)]
        assert not speakers[0] & speakers[1]


def test_a_build_without_a_train_split_is_refused(script):
    rows, cues = _build(lambda i: 1)
    with pytest.raises(SystemExit, match="train and a test split"):
        script.resplit("volume", [{**r, "split": "test"} for r in rows], cues, draws=2)

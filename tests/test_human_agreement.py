"""Agreement coefficients against published worked examples, and edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from vocalgrad.human.agreement import (
    agreement,
    fleiss_kappa,
    krippendorff_alpha_nominal,
    rt_summary,
)


def test_fleiss_kappa_wikipedia_example():
    """Fleiss (1971) as worked on Wikipedia: 10 subjects, 14 raters, 5 categories -> 0.210."""
    counts = np.array([
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ])  # fmt: skip
    assert fleiss_kappa(counts) == pytest.approx(0.20993, abs=5e-5)


def test_krippendorff_alpha_reference_example():
    """Krippendorff (2011), 4 observers x 12 units with missing values: nominal alpha 0.743."""
    n = None
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    units = [[row[u] for row in data if row[u] is not None] for u in range(12)]
    assert krippendorff_alpha_nominal(units) == pytest.approx(0.743, abs=5e-4)


def test_perfect_and_chance_agreement():
    perfect = [["increase"] * 3, ["decrease"] * 3, ["increase"] * 3]
    assert krippendorff_alpha_nominal(perfect) == pytest.approx(1.0)
    assert fleiss_kappa(np.array([[3, 0], [0, 3], [3, 0]])) == pytest.approx(1.0)
    assert math.isnan(fleiss_kappa(np.array([[3, 0], [3, 0]])))  # one category: undefined
    assert math.isnan(krippendorff_alpha_nominal([["a"]]))  # nothing pairable
    rng = np.random.default_rng(0)
    random_units = [list(rng.choice(["increase", "decrease"], 3)) for _ in range(4000)]
    assert abs(krippendorff_alpha_nominal(random_units)) < 0.05


def test_unequal_raters_per_item():
    """Items with fewer raters (an excluded annotator) still count; single ratings do not."""
    rows = [
        {"item_id": "a", "predicted": "increase"},
        {"item_id": "a", "predicted": "increase"},
        {"item_id": "a", "predicted": "increase"},
        {"item_id": "b", "predicted": "decrease"},
        {"item_id": "b", "predicted": "decrease"},
        {"item_id": "c", "predicted": "increase"},
        {"item_id": "d", "predicted": "increase"},
        {"item_id": "d", "predicted": "decrease"},
    ]
    out = agreement(rows)
    assert out["n_items"] == 3
    assert 0 < out["fleiss_kappa"] < 1 and 0 < out["krippendorff_alpha"] < 1


def test_rt_summary():
    s = rt_summary([1.0, 2.0, 3.0, None, 4.0])
    assert s["n"] == 4 and s["median_s"] == 2.5 and s["mean_s"] == 2.5
    assert rt_summary([])["n"] == 0

"""Direction alignment between categories, with its sign-flip null and split-half ceiling."""

from __future__ import annotations

import numpy as np

from vocalgrad.probing.alignment import alignment, matrix, twin_differences

D = 32


def _category(direction: np.ndarray, seed: int, n_sources: int = 12, noise: float = 1.0):
    """Twin items whose answer state moves along `direction` with the label, plus a
    per-source content vector shared by both twins (it must cancel) and noise."""
    rng = np.random.default_rng(seed)
    rows, x = [], []
    for s in range(n_sources):
        content = rng.normal(0, 5, D)
        for curve in ("linear", "jump"):
            for sign, label in ((1, "increase"), (-1, "decrease")):
                rows.append(
                    {"source_id": f"s{s}", "tier": "high", "curve": curve, "direction": label}
                )
                x.append(content + 0.5 * sign * direction + rng.normal(0, noise, D))
    return np.array(x), rows


def test_shared_direction_is_found_and_unrelated_one_is_at_the_null():
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=D), rng.normal(size=D)
    v -= (v @ u) / (u @ u) * u  # orthogonal to u
    data = {}
    for name, direction, seed in (("volume", u, 1), ("voice_pitch", u, 2), ("echo", v, 3)):
        x, rows = _category(direction, seed)
        data[name] = ({"decoder.1@answer": x, "encoder.1": x}, rows)
    result = alignment(data)
    assert result["stages"] == ["decoder.1@answer"]  # answer-position stages only
    assert result["n_pairs"] == {"echo": 24, "voice_pitch": 24, "volume": 24}
    rows = {(r["category_a"], r["category_b"]): r for r in result["rows"]}
    shared = rows[("voice_pitch", "volume")]
    assert shared["cosine"] > 0.8 and shared["cosine"] > shared["null95"]
    unrelated = rows[("echo", "volume")]
    assert abs(unrelated["cosine"]) < unrelated["null95"] + 0.1 and unrelated["null95"] < 0.6
    for c in ("echo", "voice_pitch", "volume"):
        assert rows[(c, c)]["kind"] == "split-half reliability" and rows[(c, c)]["cosine"] > 0.6
    m = matrix(result, "decoder.1@answer")
    assert m.shape == (3, 3) and np.allclose(m, m.T, equal_nan=True)


def test_content_cancels_in_twin_differences():
    """A huge per-source content vector must not leak into the direction."""
    u = np.eye(D)[0]
    x, rows = _category(u, seed=4, noise=0.0)
    diffs, sources = twin_differences(x, rows)
    assert diffs.shape == (24, D) and len(set(sources)) == 12
    np.testing.assert_allclose(diffs, np.tile(u, (24, 1)), atol=1e-9)


def test_no_direction_means_chance_alignment():
    x1, r1 = _category(np.zeros(D), seed=5)
    x2, r2 = _category(np.zeros(D), seed=6)
    result = alignment({"a": ({"lm.0@answer": x1}, r1), "b": ({"lm.0@answer": x2}, r2)})
    between = next(r for r in result["rows"] if r["kind"] == "between categories")
    assert abs(between["cosine"]) <= between["null95"] + 0.15

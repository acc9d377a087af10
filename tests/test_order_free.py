"""Order-free cues: unchanged when a file plays backwards, and each reads what it names."""

from __future__ import annotations

import numpy as np
import pytest

from vocalgrad.audio import loudness_lufs, normalise
from vocalgrad.stimuli.order_free import NAMES, order_free_cues

SR = 16000


def _speech_like(seed: int, seconds: float = 2.0) -> np.ndarray:
    """Harmonics of a wandering F0 under 4 Hz syllables with abrupt onsets and slow decays
    (asymmetric in time, as speech is)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    f0 = rng.uniform(100, 220) * (1 + 0.05 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(k**-1.2 * np.sin(k * phase) for k in range(1, 20))
    cycle = (t * 4.0) % 1.0
    envelope = np.exp(-6 * cycle) * np.linspace(
        1.0, 0.3, len(t)
    )  # sharp attack, decay, declination
    return normalise((x * envelope).astype(np.float32), SR, -26.0)


def test_every_cue_is_the_same_backwards():
    x = np.concatenate(
        [np.zeros(SR // 4, np.float32), _speech_like(1), np.zeros(SR // 2, np.float32)]
    )
    x = x + (1e-4 * np.random.default_rng(2).standard_normal(len(x))).astype(np.float32)
    forward, backward = order_free_cues(x, SR), order_free_cues(x[::-1].copy(), SR)
    assert list(forward) == list(NAMES)
    for name in NAMES:
        assert forward[name] == pytest.approx(backward[name], abs=1e-9), name
    stereo = np.stack([x, 0.5 * x], axis=1)
    forward, backward = order_free_cues(stereo, SR), order_free_cues(stereo[::-1].copy(), SR)
    assert forward["of_ild_db"] == pytest.approx(20 * np.log10(0.5), abs=0.01)
    assert all(forward[n] == pytest.approx(backward[n], abs=1e-9) for n in NAMES)


def test_cues_read_level_duration_and_edges():
    voice = _speech_like(3)
    lead, trail = np.zeros(SR // 2, np.float32), np.zeros(SR // 4, np.float32)
    x = np.concatenate([lead, voice, trail])
    cues = order_free_cues(x, SR)
    assert cues["of_duration_s"] == pytest.approx(len(x) / SR)
    assert cues["of_loudness_lufs"] == pytest.approx(
        loudness_lufs(x, SR), abs=0.2
    )  # BS.1770 blocks: a grid
    assert cues["of_zero_share"] == pytest.approx(0.75 / (len(x) / SR), abs=0.01)
    assert 0.74 <= cues["of_edge_silence_s_45"] <= 0.95  # the silences and the last decay
    assert cues["of_edge_zeros_sum"] == pytest.approx(
        1 + 0.25 / 0.3, abs=1e-3
    )  # 300 + 250 ms silent
    louder = order_free_cues(x * np.float32(2.0), SR)
    for name in ("of_rms_db", "of_peak_dbfs", "of_loudness_lufs", "of_momentary_p50"):
        assert louder[name] - cues[name] == pytest.approx(20 * np.log10(2.0), abs=0.05), name
    assert louder["of_crest_db"] == pytest.approx(cues["of_crest_db"], abs=0.01)

"""Headphone-screening stimuli: the Huggins tone lives only in the interaural difference."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from vocalgrad.human import screening


def _intervals(audio: np.ndarray, interval: float) -> list[np.ndarray]:
    n, gap = int(interval * screening.SAMPLE_RATE), int(screening.GAP_S * screening.SAMPLE_RATE)
    return [audio[i * (n + gap) : i * (n + gap) + n].astype(float) for i in range(3)]


def test_huggins_trial_structure():
    sr, interval = screening.SAMPLE_RATE, 0.5
    targets = set()
    for seed in range(12):
        audio, target = screening.huggins_trial(seed, interval)
        targets.add(target)
        assert target == screening.huggins_target(seed)
        assert audio.dtype == np.float32 and audio.shape[1] == 2
        n, gap = int(interval * sr), int(screening.GAP_S * sr)
        assert audio.shape[0] == 3 * n + 2 * gap
        assert abs(audio.shape[0] / sr - screening.duration_s(interval)) < 1e-3
        for i, seg in enumerate(_intervals(audio, interval)):
            left, right = seg[:, 0], seg[:, 1]
            diff = np.abs(np.fft.rfft(left - right))
            freqs = np.fft.rfftfreq(n, 1 / sr)
            # each ear alone is plain noise at the same level in every interval
            assert abs(np.sqrt(np.mean(left**2)) - screening.LEVEL_RMS) < 0.02
            peak = freqs[np.argmax(diff)]
            if i + 1 == target:  # the inverted band is where binaural pitch exists
                assert 500 * (1 - screening.BANDWIDTH) <= peak <= 700 * (1 + screening.BANDWIDTH)
                band = diff[(freqs > 400) & (freqs < 800)].sum()
            else:  # the foils' band is far above it
                lo, hi = screening.FOIL_BAND_HZ
                assert lo - 50 <= peak <= hi + 50
                band = diff[(freqs > lo - 100) & (freqs < hi + 100)].sum()
            assert band / diff.sum() > 0.99  # the difference is confined to the narrow band
    assert targets == {1, 2, 3}


def test_no_channel_comparison_finds_the_target():
    """A script comparing the ears (equal? how different? how correlated?) is at chance."""
    hits = {"unequal": 0, "diff_level": 0, "correlation": 0}
    seeds = range(60)
    for seed in seeds:
        audio, target = screening.huggins_trial(seed, 0.3)
        segs = _intervals(audio, 0.3)
        assert all(np.max(np.abs(s[:, 0] - s[:, 1])) > 1e-3 for s in segs)  # no diotic foil
        unequal = [not np.allclose(s[:, 0], s[:, 1], atol=1e-6) for s in segs]
        level = [np.sqrt(np.mean((s[:, 0] - s[:, 1]) ** 2)) for s in segs]
        corr = [np.corrcoef(s[:, 0], s[:, 1])[0, 1] for s in segs]
        hits["unequal"] += unequal.index(True) + 1 == target and unequal.count(True) == 1
        hits["diff_level"] += int(np.argmax(level)) + 1 == target
        hits["correlation"] += int(np.argmin(corr)) + 1 == target
    for name, n in hits.items():
        assert n / len(seeds) < 0.55, (name, n)  # chance is 1/3; diotic foils gave 100%


def test_huggins_is_deterministic_per_seed():
    a, ta = screening.huggins_trial(5, 0.3)
    b, tb = screening.huggins_trial(5, 0.3)
    assert ta == tb and np.array_equal(a, b)


def test_wav_bytes_has_only_format_and_data():
    data = screening.wav_bytes(screening.calibration_sound(seconds=0.5), screening.SAMPLE_RATE)
    assert data[:4] == b"RIFF" and data[12:16] == b"fmt " and data[36:40] == b"data"
    audio, sr = sf.read(io.BytesIO(data))
    assert (
        sr == screening.SAMPLE_RATE and abs(np.sqrt(np.mean(audio**2)) - screening.LEVEL_RMS) < 0.01
    )

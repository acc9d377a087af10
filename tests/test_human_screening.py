"""Headphone-screening stimuli: the Huggins tone lives only in the interaural difference."""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

from vocalgrad.human import screening


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
        for i in range(3):
            seg = audio[i * (n + gap): i * (n + gap) + n]
            left, right = seg[:, 0].astype(float), seg[:, 1].astype(float)
            diff = np.abs(np.fft.rfft(left - right))
            # each ear alone is plain noise at the same level in every interval
            assert abs(np.sqrt(np.mean(left**2)) - screening.LEVEL_RMS) < 0.02
            if i + 1 == target:
                freqs = np.fft.rfftfreq(n, 1 / sr)
                peak = freqs[np.argmax(diff)]
                assert 500 * (1 - screening.BANDWIDTH) <= peak <= 700 * (1 + screening.BANDWIDTH)
                band = diff[(freqs > 400) & (freqs < 800)].sum()
                assert band / diff.sum() > 0.99  # the difference is confined to the narrow band
            else:
                assert np.max(np.abs(left - right)) < 1e-6  # diotic foils
    assert targets == {1, 2, 3}


def test_huggins_is_deterministic_per_seed():
    a, ta = screening.huggins_trial(5, 0.3)
    b, tb = screening.huggins_trial(5, 0.3)
    assert ta == tb and np.array_equal(a, b)


def test_wav_bytes_has_only_format_and_data():
    data = screening.wav_bytes(screening.calibration_sound(seconds=0.5), screening.SAMPLE_RATE)
    assert data[:4] == b"RIFF" and data[12:16] == b"fmt " and data[36:40] == b"data"
    audio, sr = sf.read(io.BytesIO(data))
    assert sr == screening.SAMPLE_RATE and abs(np.sqrt(np.mean(audio**2)) - screening.LEVEL_RMS) < 0.01

"""Headphone screening (Huggins pitch) and the volume-calibration sound, made with numpy.

Huggins pitch (Milne et al. 2021): the same white noise goes to both ears, except that one
ear's noise has its phase inverted in a narrow band around f0. Over headphones the band is
heard as a faint tone; over loudspeakers the two ears' signals mix and nothing stands out.
Each trial has three noise intervals, one with the tone: the answer is its number (1-3).

The two foils are not diotic: the same manipulation (a phase-inverted band of the same width in
Hz, hence the same interaural difference energy) sits at 6-8 kHz, above the ~1.5 kHz limit of
the ear's use of interaural fine structure, where it makes no pitch. So no channel comparison
(equality, difference level, correlation) tells the target apart; only where the difference lies
relative to what binaural hearing can use does, which is what listening over headphones tests.
"""

from __future__ import annotations

import io

import numpy as np
import soundfile as sf

SAMPLE_RATE = 44100
LEVEL_RMS = 0.05  # about -26 dBFS, the level dataset clips are normalised to
BANDWIDTH = 0.06  # relative half-width of the phase-inverted band (Milne et al.: +-6%)
RAMP_S = 0.02
GAP_S = 0.4
FOIL_BAND_HZ = (6000.0, 8000.0)  # centre of the foils' inverted band: no binaural pitch up here


def _ramp(n: int, sr: int) -> np.ndarray:
    k = min(int(RAMP_S * sr), n // 2)
    env = np.ones(n)
    if k > 0:
        r = 0.5 - 0.5 * np.cos(np.pi * np.arange(k) / k)
        env[:k], env[n - k :] = r, r[::-1]
    return env


def huggins_interval(
    rng: np.random.Generator, n: int, sr: int, centre: float, half_width: float
) -> np.ndarray:
    """(n, 2) noise whose right ear has the band centre +- half_width Hz phase-inverted."""
    left = rng.standard_normal(n)
    spec = np.fft.rfft(left)
    freqs = np.fft.rfftfreq(n, 1.0 / sr)
    spec[np.abs(freqs - centre) <= half_width] *= -1.0
    right = np.fft.irfft(spec, n)
    stereo = np.stack([left, right], axis=1) * _ramp(n, sr)[:, None]
    return stereo * (LEVEL_RMS / np.sqrt(np.mean(stereo**2)))


def huggins_target(seed: int) -> int:
    """The 1-based interval holding the tone (the first draw of the trial's generator)."""
    return int(np.random.default_rng(seed).integers(3)) + 1


def huggins_trial(
    seed: int, interval_s: float = 1.0, sr: int = SAMPLE_RATE
) -> tuple[np.ndarray, int]:
    """Three intervals separated by silence and the 1-based number of the one with the tone."""
    rng = np.random.default_rng(seed)
    target = int(rng.integers(3)) + 1
    f0 = float(rng.uniform(500.0, 700.0))
    n, gap = int(interval_s * sr), np.zeros((int(GAP_S * sr), 2))
    parts = []
    for i in range(1, 4):
        centre = f0 if i == target else float(rng.uniform(*FOIL_BAND_HZ))
        parts.append(huggins_interval(rng, n, sr, centre, BANDWIDTH * f0))
        if i < 3:
            parts.append(gap)
    audio = np.concatenate(parts).astype(np.float32)
    return np.clip(audio, -1.0, 1.0), target


def calibration_sound(sr: int = SAMPLE_RATE, seconds: float = 2.5) -> np.ndarray:
    """Pink-ish noise at the clips' level, to set a comfortable volume before screening."""
    rng = np.random.default_rng(12345)
    n = int(seconds * sr)
    spec = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n, 1.0 / sr)
    spec /= np.sqrt(np.maximum(freqs, 50.0))
    x = np.fft.irfft(spec, n) * _ramp(n, sr)
    x *= LEVEL_RMS / np.sqrt(np.mean(x**2))
    return np.clip(x, -1, 1).astype(np.float32)


def wav_bytes(audio: np.ndarray, sr: int) -> bytes:
    """16-bit PCM WAV with no metadata chunks: nothing but samples reaches the browser."""
    buf = io.BytesIO()
    sf.write(buf, audio, sr, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def duration_s(interval_s: float) -> float:
    return 3 * interval_s + 2 * GAP_S

"""Breathiness: aspiration noise mixed into the voiced speech, its level following the curve.

Per STFT frame (75% overlap), white noise is shaped by the source frame's own spectral
envelope (so it sits in the voice's formants, as turbulence at the glottis does), scaled to
a fixed ratio of the frame's voice level and gated by voicing: unvoiced consonants and
pauses get none, so this is a breathier voice, not background noise.

Tiers from published difference limens: changes in the aspiration-noise level of a vowel
are heard at 11-21 dB when the standard has little noise, less when it has more (Kreiman &
Gerratt 2005, JASA 117; Shrivastav & Sapienza 2006, JASA 120). Every tier starts from the
voice as recorded and ends well above those limens; the measure is the harmonics-to-noise
ratio, which drops by about as much as the aperiodic energy rises.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.signal import stft

from vocalgrad.dimensions._shared import inverse_stft, log_envelope, stft_frames, stft_size
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.dimensions.voice_pitch import f0_at
from vocalgrad.stimuli.analysis import Analysis, head_tail

SPEC = DimensionSpec(
    name="breathiness",
    parameter="aspiration noise RMS / voice RMS in voiced frames (noise shaped by the voice's envelope)",
    unit="ratio",
    increase_means="the voice gets breathier: more aspiration noise in the voiced speech",
    tiers={"low": 0.3, "mid": 0.5, "high": 0.75},
    scale="linear",
    measured="harmonics-to-noise ratio drop re the source (Praat cross-correlation harmonicity, "
             "frames voiced in the source)",
    measured_unit="dB",
    audibility_floor=3.0,
    floor_basis=("aspiration-noise level DLs 11-21 dB for low-noise vowels, smaller for noisier ones "
                 "(Kreiman & Gerratt 2005; Shrivastav & Sapienza 2006); HNR drops by about the rise in "
                 "aperiodic energy over the voice's own: 3 dB (that energy doubles) to count at all"),
    psychometric_range=(0.03, 1.0),
    constant_tolerance=3.0,
)
GATE_SMOOTHING_S = 0.03  # voicing gate ramps over ~30 ms: no clicks at voicing onsets
HNR_STEP_S = 0.01
HNR_FLOOR_HZ = 75.0
UNVOICED_HNR = -199.0  # Praat's harmonicity is -200 dB where it finds no periodicity
NOISE_ONLY_HNR = 0.0  # a clip frame drowned in noise (periodicity lost) reads as 0 dB


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "an aspiration-noise level of 0 adds nothing"


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Source STFT plus envelope-shaped noise at ratio(t) of each voiced frame's RMS."""
    freqs, times, spec = stft_frames(ref)
    n_fft = stft_size(ref.sr)
    _, _, noise = stft(rng.standard_normal(len(ref.audio)), fs=ref.sr, nperseg=n_fft,
                       noverlap=n_fft - n_fft // 4, boundary="even")
    noise = noise[:, : spec.shape[1]] * np.exp(log_envelope(ref))
    voice_power = np.sum(np.abs(spec) ** 2, axis=0)
    noise_power = np.maximum(np.sum(np.abs(noise) ** 2, axis=0), 1e-30)
    hop_s = (times[1] - times[0]) if len(times) > 1 else 1.0
    gate = uniform_filter1d((f0_at(ref, times) > 0).astype(float), max(1, int(round(GATE_SMOOTHING_S / hop_s))))
    ratio = track(np.clip(times, 0, ref.duration_s)) * gate
    return inverse_stft(spec + noise * (ratio * np.sqrt(voice_power / noise_power))[None, :], ref)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Median over the source's voiced head and tail frames of HNR(source) - HNR(clip), in
    dB, frames matched by time. Level and loudness compensation leave HNR alone; a pitch or
    formant change keeps the voice periodic."""
    times, h_ref = harmonicity(ref)
    _, h_clip = harmonicity(clip)
    n = min(len(h_ref), len(h_clip))
    times, drop = times[:n], h_ref[:n] - np.maximum(h_clip[:n], NOISE_ONLY_HNR)
    drop[(h_ref[:n] <= UNVOICED_HNR) | (f0_at(ref, times) <= 0)] = np.nan
    head, tail = ref.head_tail_at(times)
    return Measured(*head_tail(drop, head, tail))


def harmonicity(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """(frame times, HNR dB) every 10 ms, cached on the analysis."""
    if "harmonicity" not in a.cache:
        hnr = a.sound.to_harmonicity_cc(time_step=HNR_STEP_S, minimum_pitch=HNR_FLOOR_HZ)
        a.cache["harmonicity"] = (np.asarray(hnr.xs()), hnr.values[0].astype(np.float64))
    return a.cache["harmonicity"]

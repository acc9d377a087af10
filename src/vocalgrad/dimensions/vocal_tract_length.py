"""Vocal-tract length: a time-varying formant shift with F0 untouched (spectral-envelope warp).

Per STFT frame (75% overlap) the magnitude is multiplied by E(f x L) / E(f), with E the
source frame's cepstral envelope and L(t) the vocal-tract length ratio: the formants move
to 1/L of their frequency while the harmonics (F0) and the phases stay where they were.
A longer tract (L > 1) lowers the formants and the voice sounds larger. One STFT per
source, one per clip: no pitch marks, no resampling, smooth at any rate of change.

Tiers from published JNDs: listeners discriminate resonance scale (vocal-tract length) at
~5% in vowels and syllables (Smith, Patterson, Turner, Kawahara & Irino 2005, JASA 117;
Ives, Smith & Patterson 2005, JASA 118), and single formant frequencies at 3-5% (Flanagan
1955). The low tier moves the tract 12% from start to end, the high tier 28%.
"""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions._shared import inverse_stft, log_envelope, stft_frames
from vocalgrad.dimensions.base import DimensionSpec, Measured, Track
from vocalgrad.dimensions.voice_pitch import f0_at
from vocalgrad.stimuli.analysis import Analysis, head_tail

SPEC = DimensionSpec(
    name="vocal_tract_length",
    parameter="vocal-tract length ratio L (formant frequencies scale by 1/L, F0 kept)",
    unit="x",
    increase_means="the vocal tract gets longer: the formants go down and the voice sounds larger",
    tiers={"low": 0.06, "mid": 0.10, "high": 0.14},
    scale="log",
    measured="vocal-tract length re the source, -100 ln(F_clip / F_source) over F1-F3 (Praat Burg "
             "formants, voiced frames); LPC tracking reads about 2/3 of a nominal shift (Praat's own "
             "Change gender at +-10% reads +6 / -9)",
    measured_unit="%",
    audibility_floor=3.0,
    floor_basis=("vocal-tract length (resonance scale) JND ~5% (Smith et al. 2005; Ives, Smith & Patterson "
                 "2005), formant-frequency DL 3-5% (Flanagan 1955): 3% as measured, which reads about "
                 "2/3 of the shift, so ~4.5% of nominal length"),
    psychometric_range=(0.005, 0.2),
    centre="mean",
    constant_tolerance=3.0,
)
MAX_GAIN = np.log(10.0)  # the warp gain is kept within +-20 dB: an envelope valley is not a hole
FORMANT_CEILING_HZ = 5500.0  # Praat's advice for adult voices; shifts of <= 15% stay well inside
N_FORMANTS = 3
TRACKER_ERROR = 0.35  # |ln ratio| beyond this (a 42% jump) is a swapped or lost formant, not the shift


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 1.0 / (1.0 + magnitude), 1.0 + magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if not 0 < magnitude < 0.5:
        return f"a vocal-tract change of {magnitude} must lie in (0, 0.5)"
    return None


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Warp each frame's envelope by its own L(t): gain exp(E(f L) - E(f)), E in natural log."""
    freqs, times, spec = stft_frames(ref)
    envelope = log_envelope(ref)
    length = track(np.clip(times, 0, ref.duration_s))
    position = np.clip(np.arange(len(freqs))[:, None] * length[None, :], 0, len(freqs) - 1)
    below = np.minimum(position.astype(int), len(freqs) - 2)
    frac = position - below
    columns = np.arange(len(times))[None, :]
    warped = envelope[below, columns] * (1 - frac) + envelope[below + 1, columns] * frac
    return inverse_stft(spec * np.exp(np.clip(warped - envelope, -MAX_GAIN, MAX_GAIN)), ref)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Median over the source's voiced head and tail frames of -100 ln(F_clip / F_source),
    pooled over F1-F3 matched by time and formant number. Level, loudness compensation and
    added noise move no formant; a tracker slip (a formant lost or swapped) is dropped."""
    times, f_ref = formants(ref)
    _, f_clip = formants(clip)
    n = min(f_ref.shape[1], f_clip.shape[1])
    times, f_ref, f_clip = times[:n], f_ref[:, :n], f_clip[:, :n]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = -np.log(f_clip / f_ref)
    ratio[~np.isfinite(ratio) | (np.abs(ratio) > TRACKER_ERROR)] = np.nan
    ratio[:, f0_at(ref, times) <= 0] = np.nan
    head, tail = ref.head_tail_at(times)
    h, t = head_tail(ratio.T.ravel(), np.repeat(head, N_FORMANTS), np.repeat(tail, N_FORMANTS))
    return Measured(100 * h, 100 * t)


def formants(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """(frame times, F1-F3 in Hz, NaN where undefined) every 10 ms, cached on the analysis
    (a source is measured against every clip of it)."""
    if "formants" not in a.cache:
        track = a.sound.to_formant_burg(time_step=0.01, max_number_of_formants=5,
                                        maximum_formant=FORMANT_CEILING_HZ)
        times = np.asarray(track.xs())
        values = np.array([[track.get_value_at_time(i, t) for t in times] for i in range(1, N_FORMANTS + 1)])
        a.cache["formants"] = (times, values)
    return a.cache["formants"]

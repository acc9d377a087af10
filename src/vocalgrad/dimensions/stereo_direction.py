"""Stereo direction: the voice moves across the front, from left to right or back, with the
interaural level and time differences of a head.

Each ear gets the source through Brown & Duda's (1998) spherical-head model: a one-pole,
one-zero head-shadow filter (high frequencies boosted up to 6 dB at the near ear, cut up to
20 dB at the far one) and a Woodworth delay (0.26 ms x (theta + sin theta) between the
ears). Both are applied per STFT frame, so the azimuth moves smoothly.

The pan law holds the mono downmix, the mean of the two ears, which is what a model that
sums its input to one channel hears. Summed to mono, a voice off to one side is
comb-filtered by the interaural delay: with the ears' sum held instead, its
downmix was 2.9 dB quieter at 45 degrees than ahead and a sweep's downmix swelled and sank
where a held voice's stayed flat, so constant clips were told from changing ones by level
alone. Here the pair is first power-normalised per frequency, then each octave band of both
ears gets one gain that holds the downmix's power there (weighted by the source's own
spectrum) to what it is ahead (`downmix_gain`). What stays is the comb's fine ripple within
a band, the mono trace of the interaural delay; the two ears' sum instead rises off to one
side, most in the octave that holds the comb's first notch (2-4 kHz at 15 degrees, down to
0.5-1 kHz at 45).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.signal import butter, istft, sosfilt, stft

from vocalgrad.audio import frame_rms
from vocalgrad.dimensions._shared import db, windows
from vocalgrad.dimensions.base import Corroborated, DimensionSpec, Question, Track
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.evidence import interaural_level_change

SPEC = DimensionSpec(
    name="stereo_direction",
    parameter="azimuth (0 = ahead, positive = right)",
    unit="deg",
    increase_means="the voice moves to the right",
    tiers={"low": 10.0, "mid": 25.0, "high": 45.0},  # the path runs from -tier to +tier
    scale="linear",
    measured="interaural level difference above 1.5 kHz, right re left (dB, speech frames), "
    "counted only where the interaural time difference (GCC-PHAT lag) moves the same way by at "
    "least 20 us",
    measured_unit="dB",
    audibility_floor=1.0,
    floor_basis=(
        "ILD JND ~0.5-1 dB (Mills 1960; Yost & Dye 1988); ITD JND ~10-20 us (Klumpp & Eady "
        "1956); minimum audible angle ~1-2 deg ahead (Mills 1958)"
    ),
    psychometric_range=(1.0, 60.0),
    centre="energy",  # the loudness-weighted azimuth is ahead whatever the curve x direction
    # the pan law holds the downmix itself (`downmix_gain`): no loudness compensation
    loudness_neutral=False,
    constant_tolerance=1.0,
    rove=15.0,  # where the voice sits on average (left or right of ahead) carries nothing
    channels=2,
    # summed to mono, a voice off to one side is comb-filtered by the interaural delay (and
    # shadowed at one ear): the downmix's spectral centroid reads how far off-centre it is
    target_cues=("global_centroid_hz",),
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
HEAD_RADIUS_M = 0.0875
SPEED_OF_SOUND = 343.0
ALPHA_MIN, THETA_MIN_DEG = 0.1, 150.0  # Brown & Duda's head-shadow constants
ITD_FLOOR_S = 20e-6
MAX_ITD_S = 1e-3  # the lag search: wider than any head
ITD_BAND_HZ = (200.0, 4000.0)
ILD_FROM_HZ = 1500.0  # the head shadows highs: below ~1 kHz the ears differ in time, not level
N_FFT = 512
HOP = 128
# the downmix is held per octave band, from 125 Hz up (below, the band of 125-250 Hz's gain)
OCTAVES_FROM_HZ = 125.0
# a band's boost is capped: the ears rise by less (held at 45 degrees +3.7 dB, not +3.9; at 60
# +3.9, not +6.1) and the constant gate reads the same (benchmarks/stereo_downmix.py; results)
MAX_BOOST_DB = 6.0


@dataclass(frozen=True)
class StereoMeasured(Corroborated):
    """start/end: ILD (dB, right re left) over the head and tail; corroboration: the ITD
    change (s, positive = the right ear leads more)."""


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return -magnitude, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a source that stays straight ahead does not move"


def domain(sr: int) -> tuple[float, float]:
    """From hard left to hard right."""
    return -90.0, 90.0


def ear_response(freqs: np.ndarray, azimuth_deg: np.ndarray, side: int) -> np.ndarray:
    """(freqs x frames) complex64 response of the ear on `side` (-1 left, +1 right): Brown &
    Duda's head shadow (1 + j alpha w/2) / (1 + j w/2), written out in real arithmetic, times
    the delay's phase, in single precision (the phase reaches ~40 rad: an error under 1e-5 rad)."""
    theta = np.deg2rad(
        90.0 - side * np.asarray(azimuth_deg, np.float64)
    )  # angle between source and ear axis
    alpha = (1 + ALPHA_MIN / 2) + (1 - ALPHA_MIN / 2) * np.cos(
        theta / np.deg2rad(THETA_MIN_DEG) * np.pi
    )
    half_w = (np.pi * np.asarray(freqs, np.float64) * HEAD_RADIUS_M / SPEED_OF_SOUND).astype(
        np.float32
    )[:, None]
    alpha = alpha.astype(np.float32)[None, :]
    a_c = HEAD_RADIUS_M / SPEED_OF_SOUND
    delay = np.where(theta < np.pi / 2, -a_c * np.cos(theta), a_c * (theta - np.pi / 2)).astype(
        np.float32
    )
    phase = np.float32(2 * np.pi) * np.asarray(freqs, np.float32)[:, None] * delay[None, :]
    denominator = 1 + half_w**2
    real = (1 + alpha * half_w**2) / denominator
    imag = (alpha - 1) * half_w / denominator
    cos, sin = np.cos(phase), np.sin(phase)
    return (real * cos + imag * sin) + 1j * (imag * cos - real * sin)


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    sr = ref.sr
    if "stereo_stft" not in ref.cache:
        freqs, times, spec = stft(
            ref.audio, fs=sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary="even"
        )
        ref.cache["stereo_stft"] = freqs, times, spec, (np.abs(spec) ** 2).sum(axis=1)
    freqs, times, spec, weight = ref.cache["stereo_stft"]
    azimuth = track(np.clip(times, 0, ref.duration_s))
    left, right = ear_response(freqs, azimuth, -1), ear_response(freqs, azimuth, 1)
    norm = np.sqrt(2.0 / (np.abs(left) ** 2 + np.abs(right) ** 2))
    norm = norm * downmix_gain(freqs, left * norm, right * norm, weight)
    ears = []
    for response in (left, right):
        _, out = istft(
            spec * response * norm, fs=sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary=True
        )
        out = out[: len(ref.audio)]
        ears.append(np.pad(out, (0, len(ref.audio) - len(out))))
    return np.stack(ears, axis=1).astype(np.float32)


def downmix_gain(
    freqs: np.ndarray, left: np.ndarray, right: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """The gain, common to both ears, that holds the downmix's power in every octave band.

    Parameters
    ----------
    freqs : ndarray, shape (n_freqs,)
        STFT bin frequencies, Hz, from 0 to the Nyquist frequency.
    left, right : ndarray, shape (n_freqs, n_frames), complex
        Each ear's response, power-normalised so that ``|left|^2 + |right|^2 == 2``.
    weight : ndarray, shape (n_freqs,)
        The source's long-term power spectrum: how much each bin counts in its band.

    Returns
    -------
    ndarray, shape (n_freqs, n_frames), float32
        One gain per octave band and frame (`octave_bands`): the inverse square root of the
        band's downmix power ``|(left + right) / 2|^2`` weighted by ``weight``, which is 1
        ahead, so the band's downmix is what it is ahead; where that would take a boost of
        more than MAX_BOOST_DB, that boost. Why per band and not per bin: a bin at a comb
        notch would need an unbounded boost, and an octave holds whole periods of the comb
        above its first notch.
    """
    band = octave_bands(freqs)
    down = np.abs(left + right) ** 2 / 4
    gains = np.ones((band.max() + 1, down.shape[1]), np.float32)
    for b in range(len(gains)):
        inside = band == b
        if weight[inside].sum() > 0:
            held = weight[inside] @ down[inside] / weight[inside].sum()
            gains[b] = np.maximum(held, 10 ** (-MAX_BOOST_DB / 10)) ** -0.5
    return gains[band]


def octave_bands(freqs: np.ndarray) -> np.ndarray:
    """Each frequency's octave band, counted from OCTAVES_FROM_HZ (band 0 takes the
    frequencies below it too). The last band runs to the highest frequency; where it would
    span under half an octave it is joined to the one below."""
    top = float(np.max(freqs))
    n_octaves = max(1, int(np.ceil(np.log2(top / OCTAVES_FROM_HZ))))
    edges = OCTAVES_FROM_HZ * 2.0 ** np.arange(n_octaves)
    if len(edges) > 1 and top / edges[-1] < np.sqrt(2):
        edges = edges[:-1]
    return np.maximum(np.searchsorted(edges, freqs, side="right") - 1, 0)


def measure(clip: Analysis, ref: Analysis) -> StereoMeasured:
    """Over the source's speech frames in the head and tail windows: ILD = right over left
    energy above 1.5 kHz (where the head casts its shadow), and ITD = the lag of the GCC-PHAT
    peak between the ears (200 Hz - 4 kHz, 1/8 sample resolution).
    A one-channel clip has neither."""
    ears = clip.channels
    if ears.shape[1] < 2:
        return StereoMeasured(0.0, 0.0, 0.0, ITD_FLOOR_S)
    highs = sosfilt(_ild_highpass(clip.sr), ears, axis=0)
    left, right = frame_rms(highs[:, 0], clip.sr) ** 2, frame_rms(highs[:, 1], clip.sr) ** 2
    n = min(len(left), len(ref.active))
    hop = len(ears) // len(left) if len(left) else 1
    ild, itd = [], []
    for window in windows(ref, n, active_only=True):
        if not window.any():
            return StereoMeasured(float("nan"), float("nan"), float("nan"), ITD_FLOOR_S)
        ild.append(db(right[:n][window].sum() / left[:n][window].sum()))
        samples = np.repeat(window, hop)
        itd.append(interaural_delay(ears[: len(samples)][samples], clip.sr))
    return StereoMeasured(ild[0], ild[1], itd[1] - itd[0], ITD_FLOOR_S)


@lru_cache(maxsize=8)
def _ild_highpass(sr: int) -> np.ndarray:
    return butter(4, ILD_FROM_HZ, "highpass", fs=sr, output="sos")


def interaural_delay(ears: np.ndarray, sr: int, oversample: int = 8) -> float:
    """How much earlier the right ear hears the signal than the left (s), by GCC-PHAT."""
    n = 1 << int(np.ceil(np.log2(2 * len(ears))))
    spec_l, spec_r = np.fft.rfft(ears[:, 0], n), np.fft.rfft(ears[:, 1], n)
    cross = spec_l * np.conj(spec_r)
    freqs = np.fft.rfftfreq(n, 1 / sr)
    band = (freqs >= ITD_BAND_HZ[0]) & (freqs <= ITD_BAND_HZ[1])
    cross = np.where(band, cross / np.maximum(np.abs(cross), 1e-20), 0.0)
    cc = np.fft.irfft(
        cross, n * oversample
    )  # cc[k]: left delayed by k / (sr * oversample) re right
    max_lag = int(MAX_ITD_S * sr * oversample)
    lags = np.concatenate([np.arange(0, max_lag + 1), np.arange(-max_lag, 0)])
    values = np.concatenate([cc[: max_lag + 1], cc[-max_lag:]])
    return float(lags[np.argmax(values)] / (sr * oversample))


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    attribute="stereo position (from left to right)",
    recognition=("voice", "right", "left"),
    other_kinds="stereo position of the {noun} (from left to right)",
)
evidence = interaural_level_change

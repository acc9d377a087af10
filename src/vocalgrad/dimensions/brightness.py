"""Brightness: a time-varying spectral tilt (dB/octave about 1 kHz), loudness-neutral.

The tilt is a gain linear in log frequency, applied per STFT frame (75% overlap, so it
changes smoothly); the renderer's loudness compensation then holds the clip's momentary
loudness on the source's, so "brighter" is never "louder".

Tiers from published spectral-shape JNDs: a level change of part of a spectrum is heard at
1-2 dB (profile analysis, Green 1988), and the JND of a voice's source spectral slope
(H1-H2) is ~3 dB (Kreiman & Gerratt 2010, JASA 128). Between the 150-1000 Hz and 1-6 kHz
bands (~2.6 octaves apart) 0.75 dB/octave moves the level of one re the other by ~2 dB; the
low tier (a 2 dB/octave change from start to end) is ~2.7 such steps.
"""

from __future__ import annotations

import numpy as np

from vocalgrad.dimensions._shared import (
    band_sums,
    db,
    inverse_stft,
    spectrum_span_octaves,
    stft_frames,
)
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis, mel_centres
from vocalgrad.signal.evidence import spectral_tilt_change

SPEC = DimensionSpec(
    name="brightness",
    parameter="spectral tilt about 1 kHz (gain linear in log frequency, 125 Hz to Nyquist)",
    unit="dB/octave",
    increase_means="the voice gets brighter: more high-frequency energy relative to low",
    tiers={"low": 1.0, "mid": 2.0, "high": 3.0},
    scale="linear",
    measured="slope of the clip/source mel-band level against log2 frequency "
    "(bands where the source has energy, speech frames)",
    measured_unit="dB/octave",
    audibility_floor=0.75,
    floor_basis=(
        "spectral-shape (profile) discrimination ~1-2 dB for a level change of part of a spectrum "
        "(Green 1988); H1-H2 JND ~3 dB (Kreiman & Gerratt 2010): 0.75 dB/octave moves the 1-6 kHz "
        "band ~2 dB re the 150-1000 Hz band"
    ),
    psychometric_range=(0.1, 4.0),
    # loudness-weighted: speech is louder early (declination), so with a plain time-average a
    # clip dark at the start would be darker overall (spectral centroid) than its twin
    centre="energy",
    constant_tolerance=0.75,
    # the tilt acts on the whole recording: the spectrum and level of its own background in
    # the silences at each end follow the tilt there, and a speech detector finds a bright
    # last syllable later than a dark one; the spectral centroid is the brightness itself
    target_cues=("edge_silence", "edge_level", "edge_spectrum", "global_centroid_hz"),
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
PIVOT_HZ = 1000.0
LOW_HZ = 125.0  # the tilt is held flat below: no boost of hum and rumble
FIT_BAND_HZ = (150.0, 7000.0)  # bands the measured slope is fitted over (where speech has energy)
USABLE_DB = 15.0  # a band counts where the source is 15 dB above its own floor in both windows
KEPT_RANGE_DB = 20.0
# the level change of one end of a spectrum re the other that is heard (profile analysis,
# Green 1988; the floor's basis: 0.75 dB/octave over the 2.6 octaves of speech's two bands)
PROFILE_JND_DB = 2.0
MIN_BANDS = 4  # the fewest bands `measure` fits a slope to


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return -magnitude, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a tilt change of 0 dB/octave changes nothing"


def source_inaudible_reason(magnitude: float, ref: Analysis) -> str | None:
    """Why a tilt change of `magnitude` could not be heard on this source, or None.

    A tilt moves the level of a spectrum's high end re its low end by the tilt times the
    octaves between them. On a source whose energy spans few octaves (a pure tone: one
    partial) it is a change of level, which the loudness compensation takes out: such
    clips were kept on the measure's scatter of a few leaking bands. The change from start
    to end (2 x `magnitude` dB/octave) over the octaves that the source's spectrum spans
    (its long-term spectrum within `_shared.SPAN_RANGE_DB` of its strongest, in the band `measure`
    fits) must move its ends re each other by PROFILE_JND_DB.

    Parameters
    ----------
    magnitude : float
        The condition's magnitude, dB/octave (the tilt goes from -magnitude to +magnitude).
    ref : Analysis
        The source as heard.

    Returns
    -------
    str or None
        The reason, naming the source's span in octaves; None where the change is
        audible.
    """
    span = spectrum_span_octaves(ref, FIT_BAND_HZ)
    if span is None:
        return "the source has no energy in the band a tilt is measured over"
    moved = 2 * magnitude * span
    if moved >= PROFILE_JND_DB:
        return None
    return (
        f"a tilt change of {2 * magnitude:g} dB/octave moves this source's spectrum end to end "
        f"by {moved:.1f} dB (under {PROFILE_JND_DB:g} dB): its energy spans {span:.1f} octaves"
    )


def domain(sr: int) -> tuple[float, float]:
    """Tilts within +-6 dB/octave (a telephone's roll-off is steeper than any voice's)."""
    return -6.0, 6.0


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Gain tilt(t) x log2(f / 1 kHz) dB per STFT bin and frame (flat below 125 Hz)."""
    freqs, times, spec = stft_frames(ref)
    octaves = np.log2(np.maximum(freqs, LOW_HZ) / PIVOT_HZ)
    tilt = track(np.clip(times, 0, ref.duration_s))
    return inverse_stft(spec * 10 ** (octaves[:, None] * tilt[None, :] / 20), ref)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Least-squares slope (dB/octave) of the clip/source level per mel band against the
    band's log2 centre frequency, over the head and tail speech frames. Overall gain (level
    roving, loudness compensation) moves every band alike and leaves the slope; noise or
    reverb fill the bands only where the source is weak, which the usable-band rule skips."""
    n, sums = band_sums(clip, ref)
    centres = mel_centres(ref.sr)
    usable = np.logical_and.reduce(
        [rw > ref.band_floor * k * 10 ** (USABLE_DB / 10) for _, rw, k in sums]
    )
    usable &= (centres >= FIT_BAND_HZ[0]) & (centres <= FIT_BAND_HZ[1])
    if usable.sum() < MIN_BANDS:
        return Measured(float("nan"), float("nan"))
    x = np.log2(centres[usable])
    out = []
    for cw, rw, _ in sums:
        level = np.array(
            [
                db(a / b) if a > 0 else -KEPT_RANGE_DB
                for a, b in zip(cw[usable], rw[usable], strict=True)
            ]
        )
        level = np.clip(level - np.median(level), -KEPT_RANGE_DB, KEPT_RANGE_DB)
        out.append(float(np.polyfit(x, level, 1)[0]))
    return Measured(*out)


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("voice", "bright", "dark"), other_kinds="brightness of the {noun}")
evidence = spectral_tilt_change

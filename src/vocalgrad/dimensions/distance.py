"""Distance: one source moving in one room, so level, direct-to-reverberant ratio (DRR) and
air absorption move together.

The direct sound follows the inverse-distance law (-6 dB per doubling) and loses high
frequencies to air absorption over its path; the reverberant field of the room stays put
(in a diffuse field its level hardly depends on where the source stands), so the DRR falls
6 dB per doubling too. The room is fixed: a two-band exponential decay whose highs die
faster than its lows, as in a furnished room, which is what makes a far voice duller (air
absorption itself is physical and so small here: 0.25 dB at 8 kHz over 3 m).

Distance perception rests on level and DRR together (Zahorik 2002, "Assessing auditory
distance perception using virtual acoustics", J. Acoust. Soc. Am. 111:1832); the verifier
asks both to move, each past its JND.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.signal import butter, fftconvolve, get_window, istft, lfilter, sosfilt, stft

from vocalgrad.audio import FRAME_S
from vocalgrad.dimensions import echo, voice_clarity
from vocalgrad.dimensions._shared import LEVEL_COURSE_CUES, db, edge_matched_analysis, windows
from vocalgrad.dimensions.base import Corroborated, DimensionSpec, Question, Track, held_value
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.evidence import current_reading, level_fall
from vocalgrad.signal.kinds import SPEECH

SPEC = DimensionSpec(
    name="distance",
    parameter="source distance in a room "
    "(critical distance 1 m; the source starts or ends at 0.25 m)",
    unit="m",
    increase_means="the voice moves away (gets farther)",
    # far end of the path from 0.25 m: level and DRR change by 9.5, 15.6, 21.6 dB, so that
    # even the low tier moves both by more than the DRR JND between the head and tail windows
    tiers={"low": 0.75, "mid": 1.5, "high": 3.0},
    scale="log",
    measured="reverberant-to-direct ratio (dB), counted only where the direct-sound attenuation "
    "re the source moves the same way by at least as much as the floor",
    measured_unit="dB",
    audibility_floor=5.0,
    floor_basis=(
        "both cues clear their JND: DRR 5-6 dB (Zahorik 2002, J. Acoust. Soc. Am. 112:2110), "
        "level ~1 dB (Jesteadt, Wier & Green 1977)"
    ),
    psychometric_range=(0.3, 4.0),
    # geometric, loudness-weighted: the heard level and DRR on average do not tell the direction
    centre="energy",
    loudness_neutral=False,  # level is part of the target
    # the level and reverberation at each end of the speech, and where a detector finds it,
    # follow the distance there, as for volume; and as for volume, the peak and the FLAC size
    # are statistics of the level course and the median F0 weighs the loud part
    target_cues=LEVEL_COURSE_CUES,
    constant_tolerance=4.0,
    # The room's field ends with the speech (`echo.room_return`): the file's silences are the
    # source's in every clip, so no twin rings on longer than the other.
    source_edges=True,
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
NEAR_M = 0.25
CRITICAL_M = 1.0  # direct = reverberant energy at this distance
AIR_DB_PER_M_HZ2 = 1.3e-9  # air absorption ~ f^2: 0.08 dB/m at 8 kHz (ISO 9613-1, 20 C, 50% RH)
RT60_S = (0.6, 0.3)  # the room's decay below and above SPLIT_HZ
SPLIT_HZ = 2000.0
PREDELAY_S = 0.005
FIELD_FADE_S = 0.1  # the field fades in and out over the speech's first and last 100 ms
# near the sound's ends the field's energy follows the source's over 50 ms (`echo.held_at_edges`)
FIELD_EDGE_WINDOW_S = 0.05
ROOM_SEED = 14
WELCH_S = 0.064  # cross-spectrum segments: longer than the early reflections
BAND_DB = 30.0
N_FFT = 512
HOP = 128


@dataclass(frozen=True)
class DistanceMeasured(Corroborated):
    """start/end: reverberant-to-direct ratio (dB) over the head and tail, corroborated by
    the direct-sound attenuation (a level ramp without more reverb, or more reverb at a
    steady level, is not a source moving away)."""

    high_band_change: float = 0.0  # high band kept re the source, tail minus head (dB); not gated


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return NEAR_M, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return (
        None
        if magnitude > NEAR_M
        else f"a source that never gets farther than {NEAR_M} m does not move"
    )


def domain(sr: int) -> tuple[float, float]:
    """From NEAR_M to 8 m, inside the modelled room."""
    return NEAR_M, 8.0


def room_response(sr: int) -> np.ndarray:
    """The room: unit-energy exponentially decaying noise, the highs decaying faster."""
    rng = np.random.default_rng(ROOM_SEED)
    n = int((PREDELAY_S + 1.2 * max(RT60_S)) * sr)
    t = np.arange(n) / sr
    low = sosfilt(butter(4, SPLIT_HZ, "lowpass", fs=sr, output="sos"), rng.standard_normal(n))
    high = sosfilt(butter(4, SPLIT_HZ, "highpass", fs=sr, output="sos"), rng.standard_normal(n))
    ir = low * np.exp(-6.908 * t / RT60_S[0]) + high * np.exp(-6.908 * t / RT60_S[1])
    ir[: int(PREDELAY_S * sr)] = 0.0
    return ir / np.sqrt(np.sum(ir**2))


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Direct path: per STFT frame (75% overlap) the gain CRITICAL_M / r(t) and air
    absorption over r(t); plus the room's reverberant field at a fixed level (computed once
    per source). Direct and reverberant energy are equal at CRITICAL_M.

    The field is played as echo plays its return (`echo.room_return`): held at one ratio to
    the speech, out of its pauses, faded in and out over the speech's first and last
    FIELD_FADE_S, and held over FIELD_EDGE_WINDOW_S near those ends. Left to build up and
    ring on, it made a far start rise out of silence later than a near one while the ringing
    set both twins' ends, and the sum of the two edges' levels told the direction
    (docs/explanations/design-notes.md); held over 200 ms there too, a far start still met
    less of it than a far end, and a clip moving away stayed audible longer. Both paths start from
    the source with its ends' level courses matched at 20 ms (`edge_matched_analysis`), as volume's
    gain does: a level that falls toward a word's weak last decay sank it sooner than its
    twin sank the strong first attack."""
    sr = ref.sr
    n = len(ref.audio)
    if "distance_stft" not in ref.cache:
        source = edge_matched_analysis(ref)
        ref.cache["distance_stft"] = stft(
            source.audio, fs=sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary="even"
        )
        room = fftconvolve(source.audio.astype(np.float64), room_response(sr))[:n]
        ref.cache["distance_reverb"] = echo.room_return(
            room, source, FIELD_FADE_S, FIELD_EDGE_WINDOW_S
        )
    freqs, times, spec = ref.cache["distance_stft"]
    r = track(np.clip(times, 0, ref.duration_s))
    gain_db = (
        20 * np.log10(CRITICAL_M / r)[None, :] - AIR_DB_PER_M_HZ2 * freqs[:, None] ** 2 * r[None, :]
    )
    _, direct = istft(
        spec * 10 ** (gain_db / 20), fs=sr, nperseg=N_FFT, noverlap=N_FFT - HOP, boundary=True
    )
    out = np.array(ref.cache["distance_reverb"])
    m = min(len(direct), n)
    out[:m] += direct[:m]
    return out.astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> DistanceMeasured:
    """Per head and tail window of the speech span, from the clip and the source alone:

    - direct gain g: the clip-over-source transfer function (Welch cross-spectrum over the
      window) averaged over the band where the source has energy, i.e. the lag-0 tap of the
      room's response re the source. A plain lag-0 correlation would not do: speech is
      correlated over tens of ms, so early reflections leak into it by +-60% of their level;
    - reverberant energy: what remains after subtracting g x (minus the clip's own floor),
      over the source's energy through a generic 0.6 s decay (as echo reads it), so the
      energy each frame's reverberation rings from is divided out;
    - high band: the clip's level above 1 kHz re the source, as voice clarity reads it.

    The direct gain and the expected reverberation are read against the edge-matched source
    that `render` starts from, so the matching does not read as a change of distance."""
    hop = int(round(FRAME_S * ref.sr))
    frames = min(len(clip.audio), len(ref.audio)) // hop
    x = edge_matched_analysis(ref).audio[: frames * hop].astype(np.float64)
    y = clip.audio[: frames * hop].astype(np.float64)
    a = np.exp(-6.908 * 2 * FRAME_S / echo.MODEL_RT60_S)
    expected = lfilter([1 - a], [1, -a], (x.reshape(frames, hop) ** 2).sum(axis=1))
    attenuation, ratio = [], []
    for window in windows(ref, frames):
        idx = np.flatnonzero(window)
        if idx.size < 10:
            return DistanceMeasured(float("nan"), float("nan"), float("nan"), SPEC.audibility_floor)
        lo, hi = idx[0] * hop, (idx[-1] + 1) * hop
        gain = direct_gain(x[lo:hi], y[lo:hi], ref.sr)
        residual = ((y[lo:hi] - gain * x[lo:hi]) ** 2).sum() - clip.floor_power * (hi - lo)
        attenuation.append(-db(gain**2) if gain > 0 else float("nan"))
        ratio.append(
            db(max(residual, 0.0) / (gain**2 * expected[idx].sum()) + echo.INAUDIBLE_RATIO)
        )
    return DistanceMeasured(
        ratio[0],
        ratio[1],
        attenuation[1] - attenuation[0],
        SPEC.audibility_floor,
        high_band_change=voice_clarity.measure(clip, ref).change,
    )


def direct_gain(x: np.ndarray, y: np.ndarray, sr: int) -> float:
    """Median over the bins within 30 dB of the source's strongest of Re(Pyx / Pxx), Welch's
    estimates (Hann segments, half overlapping, each segment's mean removed) from one FFT of
    each signal's segments: scipy's `welch` and `csd` would transform the source twice, and
    their scaling cancels in the ratio."""
    nperseg = min(1 << int(np.ceil(np.log2(WELCH_S * sr))), len(x))
    spec_x, spec_y = (_welch_segments(v, nperseg) for v in (x, y))
    pxx = np.mean(np.abs(spec_x) ** 2, axis=0)
    pyx = np.mean(np.conj(spec_x) * spec_y, axis=0)
    band = pxx > pxx.max() * 10 ** (-BAND_DB / 10)
    return float(np.median(np.real(pyx[band] / pxx[band])))


def _welch_segments(v: np.ndarray, nperseg: int) -> np.ndarray:
    step = nperseg // 2
    starts = np.arange(0, len(v) - nperseg + 1, step)
    segments = v[starts[:, None] + np.arange(nperseg)]
    return np.fft.rfft(
        (segments - segments.mean(axis=1, keepdims=True)) * get_window("hann", nperseg), axis=1
    )


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    attribute="distance of the speaker",
    recognition=("speaker", "far", "near"),
    other_kinds="distance of the {noun}",
)


def evidence(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """The ideal observer's reading of a gradual clip: for speech, the level re the source
    falling (`level_fall`); for any other kind of sound (`vocalgrad.signal.evidence.reading`),
    the direct sound's attenuation re the source, late third minus early third of the
    source's sound, from the clip/source cross-spectrum (`direct_gain`). A decaying note's
    last third is mostly the room's ringing of its louder attack, at any distance, so its
    level re the source rose late in a clip moving away as well as in one coming nearer;
    the direct path alone still follows the distance."""
    if current_reading().kind == SPEECH:
        return level_fall(clip, ref, sr)
    n = min(len(clip), len(ref))
    x, y = ref[:n].astype(np.float64), clip[:n].astype(np.float64)
    level = np.array([np.sum(x[i : i + N_FFT] ** 2) for i in range(0, n - N_FFT + 1, HOP)])
    sounding = np.flatnonzero(level > level.max() * 10 ** (-BAND_DB / 10))
    if sounding.size < 3:
        return 0.0
    start, stop = sounding[0] * HOP, sounding[-1] * HOP + N_FFT
    third = (stop - start) // 3
    gains = [direct_gain(x[a : a + third], y[a : a + third], sr) for a in (start, stop - third)]
    return float(db(max(gains[0], 1e-12) ** 2) - db(max(gains[1], 1e-12) ** 2))


def held_evidence(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Reverberant-to-direct ratio of a held clip re its source (dB; rises with distance), as
    `measure` reads it. A held clip's level re the source mixes the distance with the clip's
    level rove, which the gradual evidence cancels and a held one cannot."""
    source = Analysis(ref.astype(np.float32), sr)
    return held_value(measure(Analysis(clip.astype(np.float32), sr, span=source.span), source))

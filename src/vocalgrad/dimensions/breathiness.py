"""Breathiness: aspiration noise mixed into the voiced speech, its level following the curve.

Per STFT frame (75% overlap), white noise is shaped by the source frame's own spectral
envelope (so it sits in the voice's formants, as turbulence at the glottis does), scaled to
a fixed ratio of the frame's voice level and gated by voicing within the detected speech
span: unvoiced consonants and pauses get none, so this is a breathier voice, not background
noise.

Tiers from published difference limens: changes in the aspiration-noise level of a vowel
are heard at 11-21 dB when the standard has little noise, less when it has more (Kreiman &
Gerratt 2005, JASA 117; Shrivastav & Sapienza 2006, JASA 120). Every tier starts from the
voice as recorded and ends 10-2.5 dB under the voice, 15-22 dB above the -25 dB at which
added aperiodic energy is taken as masked by the voice's own (measured as the clip's
noise-to-harmonics ratio, from Praat's HNR, minus the source's).
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter1d

from vocalgrad.dimensions._shared import db, forward_stft, inverse_stft, log_envelope, stft_frames
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.dimensions.voice_pitch import f0_at
from vocalgrad.signal.analysis import (
    F0_CANDIDATES,
    F0_CEILING_HZ,
    HEAD_TAIL_FRACTION,
    Analysis,
    head_tail,
)
from vocalgrad.signal.evidence import uncorrelated_energy_change

SPEC = DimensionSpec(
    name="breathiness",
    parameter="aspiration noise RMS / voice RMS in voiced frames "
    "(noise shaped by the voice's envelope)",
    unit="ratio",
    increase_means="the voice gets breathier: more aspiration noise in the voiced speech",
    tiers={"low": 0.3, "mid": 0.5, "high": 0.75},
    scale="linear",
    measured="aperiodic energy added re the voice: noise-to-harmonics ratio of the clip minus the "
    "source's (Praat cross-correlation HNR, frames voiced and periodic in the source), "
    "above -25 dB",
    measured_unit="dB",
    audibility_floor=6.0,
    floor_basis=(
        "aspiration-noise level DLs 11-21 dB for vowels with little noise, a few dB for noisier "
        "ones (Kreiman & Gerratt 2005; Shrivastav & Sapienza 2006): 6 dB (four times the "
        "added aperiodic energy) between the start and end"
    ),
    psychometric_range=(0.03, 1.0),
    # a held level reads lower where the voice's own aperiodicity (creak at a phrase end)
    # masks it: the content moves it by up to ~6 dB (tiers move it by 10-20 dB)
    constant_tolerance=6.0,
    # the noise goes into voiced speech only, so the file's silences can be the source's own
    # samples and are not levelled with the speech (whose loudness gain the noise lowers)
    source_edges=True,
    # a detector finds a breathy last phoneme's end later (its noise stays above the threshold)
    target_cues=("edge_silence",),
    kinds=("speech",),  # a process on the voice itself: no other sound has one
)
GATE_SMOOTHING_S = 0.03  # voicing gate ramps over ~30 ms: no clicks at voicing onsets
HNR_STEP_S = 0.02
HNR_MARGIN_S = 0.05  # analysis reaches this far past each window, so its edge frames are whole
HNR_FLOOR_HZ = 75.0
PERIODIC_HNR_DB = 3.0  # source frames this periodic or more can show added noise; creak cannot
SILENT_HNR = -200.0  # Praat's value where a frame is silent
NOISE_ONLY_HNR = 0.0  # a clip frame drowned in noise (periodicity lost) reads as 0 dB
MASKED_DB = (
    -25.0
)  # added aperiodic energy this far under the voice reads as none (a modal voice's own)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "an aspiration-noise level of 0 adds nothing"


def domain(sr: int) -> tuple[float, float]:
    """From no aspiration noise to as much as voice."""
    return 0.0, 1.0


def source_inaudible_reason(magnitude: float, ref: Analysis) -> str | None:
    """Why no change of aspiration noise can be heard on this source, or None.

    Aspiration sits in periodic voice. Where an end of the source's speech (the head or tail
    window `measure` reads) holds no voiced frame periodic enough to show added noise (an
    utterance ending on a consonant or in creak), that end of every path reads as masked: an
    increase would end at the masked level and measure as a decrease (every clip of a build
    that disagreed did so), and a decrease would verify only because its end is
    masked. The condition is refused for this source before rendering instead."""
    times, h_ref = harmonicity(ref)
    readable = np.where((h_ref >= PERIODIC_HNR_DB) & (f0_at(ref, times) > 0), 1.0, np.nan)
    head, tail = head_tail(readable, *ref.head_tail_at(times))
    ends = [name for name, x in (("start", head), ("end", tail)) if not np.isfinite(x)]
    if not ends:
        return None
    return (
        f"the source has no periodic voiced frame at its {' or '.join(ends)}, where aspiration "
        "noise would be masked"
    )


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Source STFT plus envelope-shaped noise at ratio(t) of each voiced frame's RMS, in the
    detected speech span only. Why the span: a voice often starts before the detector's
    onset and seldom sounds past its offset (a final consonant, a devoiced end), so noise
    on every voiced frame reached the 100 ms before the speech and hardly the 100 ms after
    it; the file's first 300 ms then showed the start's breathiness more than its last
    showed the end's, and the sum of their centroids told the direction (noise in the span
    alone keeps the same clips; CHANGELOG.md has the figures)."""
    freqs, times, spec = stft_frames(ref)
    _, _, noise = forward_stft(rng.standard_normal(len(ref.audio)), ref.sr)
    noise = noise * np.exp(log_envelope(ref))
    voice_power = np.sum(np.abs(spec) ** 2, axis=0)
    noise_power = np.maximum(np.sum(np.abs(noise) ** 2, axis=0), 1e-30)
    hop_s = (times[1] - times[0]) if len(times) > 1 else 1.0
    voiced = (f0_at(ref, times) > 0) & (times >= ref.span.onset_s) & (times <= ref.span.offset_s)
    gate = uniform_filter1d(voiced.astype(float), max(1, int(round(GATE_SMOOTHING_S / hop_s))))
    ratio = track(np.clip(times, 0, ref.duration_s)) * gate
    return inverse_stft(spec + noise * (ratio * np.sqrt(voice_power / noise_power))[None, :], ref)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Aperiodic energy the clip adds re its voice, in dB: per source frame that is voiced
    and periodic (HNR >= 3 dB: creak and breath already mask added noise) the
    noise-to-harmonics ratio 10^(-HNR/10) of the clip minus that of the source (frames
    matched by time), median over the head and tail, plus a masked level MASKED_DB.
    Independent of the source's own HNR (a clean and a hoarse voice given the same noise
    read alike), of level and of loudness compensation; a pitch or formant change keeps
    the voice periodic and adds nothing."""
    times, h_ref = harmonicity(ref)
    t_clip, h_clip = harmonicity(clip)
    match = np.clip(np.searchsorted(t_clip, times), 0, len(t_clip) - 1)
    added = noise_ratio(h_clip[match]) - noise_ratio(h_ref)
    same = np.abs(t_clip[match] - times) < HNR_STEP_S / 4
    added[~same | (h_ref < PERIODIC_HNR_DB) | (f0_at(ref, times) <= 0)] = np.nan
    h, t = head_tail(added, *ref.head_tail_at(times))
    # a window with no periodic voice (an utterance ending on a consonant) has nowhere to
    # hear aspiration: it reads as masked
    return Measured(
        *(db(max(x, 0.0) + 10 ** (MASKED_DB / 10)) if np.isfinite(x) else MASKED_DB for x in (h, t))
    )


def noise_ratio(hnr_db: np.ndarray) -> np.ndarray:
    """Noise-to-harmonics power ratio; a frame whose periodicity is lost reads 1 (0 dB)."""
    return 10 ** (-np.maximum(hnr_db, NOISE_ONLY_HNR) / 10)


def harmonicity(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """(frame times, HNR dB; -200 where silent) every 20 ms over the head and tail of the
    speech span only (the measure reads nothing else), cached on the analysis.

    Praat's cross-correlation harmonicity is 10 log10(r / (1 - r)) of the best pitch
    candidate's strength r with no voicing threshold; read here from "To Pitch (cc)" with
    5 candidates instead of its 15, which gives the same values at a quarter of the cost."""
    if "harmonicity" not in a.cache:
        onset, offset = a.span.onset_s, a.span.offset_s
        width = HEAD_TAIL_FRACTION * (offset - onset)
        times, values = [], []
        for lo, hi in ((onset, onset + width), (offset - width, offset)):
            # both ends on whole steps from the file's start, so a clip's frames and its source's
            # fall on one grid whatever the span: cut where the span said, a span 50 us off (a
            # comparison part's, as the dataset stores it) moved Praat's centred frames by half
            # a step, no frame matched the source's, and a part 21.6 dB breathier read as masked
            lo = np.floor(max(0.0, lo - HNR_MARGIN_S) / HNR_STEP_S + 1e-9) * HNR_STEP_S
            hi = (
                lo
                + np.floor((min(a.duration_s, hi + HNR_MARGIN_S) - lo) / HNR_STEP_S + 1e-9)
                * HNR_STEP_S
            )
            pitch = a.sound.extract_part(lo, hi, preserve_times=True).to_pitch_cc(
                time_step=HNR_STEP_S,
                pitch_floor=HNR_FLOOR_HZ,
                pitch_ceiling=F0_CEILING_HZ,
                max_number_of_candidates=F0_CANDIDATES,
                silence_threshold=0.1,
                voicing_threshold=0.0,
            )
            best = pitch.selected_array
            r = np.clip(best["strength"], 1e-6, 1 - 1e-6)
            times.append(np.asarray(pitch.xs()))
            values.append(np.where(best["frequency"] > 0, 10 * np.log10(r / (1 - r)), SILENT_HNR))
        a.cache["harmonicity"] = (np.concatenate(times), np.concatenate(values))
    return a.cache["harmonicity"]


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(recognition=("voice", "breathy", "clear"))
evidence = uncorrelated_energy_change

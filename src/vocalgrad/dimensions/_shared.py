"""Rendering and measurement helpers shared by several dimensions.

Measurements compare a clip with its *heard* source (the clean source plus the room-tone
floor every clip of it carries) and never see the rendering parameter. What a process
added is read from the residual after a slowly varying gain fit, so level roving, loudness
compensation or a volume ramp mislabelled as another dimension leave nothing behind.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import welch

from vocalgrad.audio import FRAME_S
from vocalgrad.signal.analysis import Analysis, mel_spectrogram
from vocalgrad.signal.levelling import matched_edge_courses

GAIN_WINDOW_FRAMES = 4  # the gain fit pools 40 ms around each 10 ms frame
GAIN_ACTIVE_DB = 40.0  # only frames within 40 dB of the source's loudest inform the fit
MASK_OFFSET_DB = 20.0  # speech masks an error this far below it in the same band

# What audio_distortion and audio_roughness share: both are verified as an error a process
# adds to the speech, read as an error-to-mask ratio (`error_to_mask_db`).
ERROR_TO_MASK_SPEC = {
    "measured": "error-to-mask ratio, 10 log10(1 + mean E/M) over mel bands and speech frames: "
    "gain-matched residual over the source's in-band level 20 dB down plus its floor "
    "(0 dB = masked)",
    "measured_unit": "dB",
    "audibility_floor": 3.0,
    "floor_basis": (
        "an error is audible once its noise-to-mask ratio exceeds 0 dB (the NMR criterion of "
        "perceptual codec measurement, ITU-R BS.1387); 3 dB above the mask to count"
    ),
}


EDGE_ONSET_SMOOTH_S = 0.02  # the second level-course matching follows onsets and offsets


def edge_matched(ref: Analysis) -> np.ndarray:
    """The source with its ends' level courses matched once more, smoothed over 20 ms, not
    the 100 ms of `prepare_reference`; computed once per source. Why, for the dimensions
    whose level is the target (volume, distance): a level ramp weighs one end of the speech
    far above the other, so how long a file's edges stay under -30 dB re its loudest frame,
    and its quiet momentary-loudness percentiles, follow the onsets and offsets there and
    told twins apart (volume, comparison format: the leak shrank with 100 ms smoothing and
    went with 20 ms; docs/explanations/design-notes.md)."""
    if "edge_matched" not in ref.cache:
        ref.cache["edge_matched"] = matched_edge_courses(
            ref.audio, ref.sr, ref.span, smooth_s=EDGE_ONSET_SMOOTH_S
        )
    return ref.cache["edge_matched"]


def edge_matched_analysis(ref: Analysis) -> Analysis:
    """`edge_matched` as an Analysis: what a level dimension's `measure` compares a clip with,
    since its process acts on that signal (against the plain source, an end's K-weighted
    level moves with the matching as if the gain had, by a few dB at the end that moves more;
    `benchmarks/alsa_pairs.py`, figures on docs/results.md)."""
    if "edge_matched_analysis" not in ref.cache:
        ref.cache["edge_matched_analysis"] = ref.like(edge_matched(ref), span=ref.span)
    return ref.cache["edge_matched_analysis"]


def gain_matched_residual(clip: Analysis, ref: Analysis) -> np.ndarray:
    """(clip - g(t) * source) / g(t), with g(t) a least-squares gain per 40 ms (10 ms hop)
    on the source's speech frames, interpolated across pauses. What remains is what the
    process added (noise, reverb, distortion error), at the source's scale."""
    n = min(len(clip.audio), len(ref.audio))
    hop = int(round(FRAME_S * ref.sr))
    usable = (n // hop) * hop
    x = ref.audio[:usable].astype(np.float64).reshape(-1, hop)
    y = clip.audio[:usable].astype(np.float64).reshape(-1, hop)
    kernel = np.ones(GAIN_WINDOW_FRAMES)
    sxy = np.convolve((x * y).sum(axis=1), kernel, "same")
    sxx = np.convolve((x * x).sum(axis=1), kernel, "same")
    ok = sxx > sxx.max() * 10 ** (-GAIN_ACTIVE_DB / 10)
    centres = (np.arange(len(sxx)) + 0.5) * hop
    frame_gain = (
        np.interp(centres, centres[ok], sxy[ok] / sxx[ok]) if ok.any() else np.ones_like(sxx)
    )
    gain = np.interp(np.arange(len(clip.audio)), centres, frame_gain)
    source = np.zeros(len(clip.audio))
    source[:n] = ref.audio[:n]
    # at the source's scale moment by moment: what was added relative to the speech as heard
    # (never divided by a gain the fit could not pin down: floored at a quarter of the typical)
    typical = float(np.median(np.abs(frame_gain[ok]))) if ok.any() else 1.0
    scale = np.maximum(np.abs(gain), max(0.25 * typical, 1e-6))
    return (clip.audio - gain * source) / scale


def db(x: float) -> float:
    return float(10 * np.log10(x)) if x > 0 else float("nan")


# Cues that follow the level course at each end: where a detector finds the speech, the edge
# levels, spectra and zeros, the peak, the FLAC size and the median F0 (which weighs the loud
# part). A dimension that moves the level counts them as its target.
LEVEL_COURSE_CUES = (
    "edge_silence", "edge_level", "edge_spectrum", "edge_zeros", "global_peak_dbfs",
    "global_file_bytes", "global_f0_hz",
)  # fmt: skip


def band_sums(
    clip: Analysis, ref: Analysis
) -> tuple[int, list[tuple[np.ndarray, np.ndarray, int]]]:
    """The number of frames clip and source share and, per head and tail window over the
    source's speech frames, the clip's and the source's summed mel-band power and the
    window's frame count."""
    c, r = clip.mel_power, ref.mel_power
    n = min(c.shape[1], r.shape[1])
    sums = [
        (c[:, :n][:, w].sum(axis=1), r[:, :n][:, w].sum(axis=1), max(int(w.sum()), 1))
        for w in windows(ref, n, active_only=True)
    ]
    return n, sums


def windows(
    ref: Analysis, n_frames: int, active_only: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Head and tail frame masks (first and last 20% of the speech span), optionally
    limited to the source's speech-active frames."""
    head, tail = ref.head_tail_frames(n_frames)
    if active_only:
        active = np.zeros(n_frames, dtype=bool)
        m = min(n_frames, len(ref.active))
        active[:m] = ref.active[:m]
        head, tail = head & active, tail & active
    return head, tail


def error_to_mask_db(
    clip: Analysis, ref: Analysis, floor_below_speech_db: float | None = None
) -> tuple[float, float]:
    """Error-to-mask ratio over the head and tail: 10 log10(1 + E/M) per speech frame, E/M
    averaged over mel bands, median over the window's frames; 0 dB means the error hides
    under its mask everywhere.

    Error E = mel power of the gain-matched residual per 10 ms frame; mask M = the source's
    own power in that band and frame MASK_OFFSET_DB down plus the source's floor in that
    band. Frame by frame, so the quiet stretches where an error is most audible are not
    averaged away by the loud vowels.

    `floor_below_speech_db` raises each band's floor to the frame's whole speech power that
    many dB down: for an error that scales with the signal (a decimator's images), so that
    images landing in a band the source leaves empty (telephone speech above 3.4 kHz) count
    by their level relative to the speech that made them, not against the room tone, which
    would make a louder sentence read as a stronger distortion."""
    error = mel_spectrogram(gain_matched_residual(clip, ref), ref.sr)
    signal = ref.mel_power
    n = min(error.shape[1], signal.shape[1])
    floor = ref.band_floor[:, None]
    if floor_below_speech_db is not None:
        floor = np.maximum(floor, signal[:, :n].sum(axis=0) * 10 ** (-floor_below_speech_db / 10))
    mask = signal[:, :n] * 10 ** (-MASK_OFFSET_DB / 10) + floor
    per_frame = 10 * np.log10(1.0 + (error[:, :n] / mask).mean(axis=0))
    out = []
    for window in windows(ref, n, active_only=True):
        out.append(float(np.median(per_frame[window])) if window.any() else float("nan"))
    return out[0], out[1]


def psola(
    ref: Analysis, rng: np.random.Generator, pitch_tier=None, duration_tier=None
) -> np.ndarray:
    """Resynthesise the source by Praat overlap-add with the given tiers (None = unchanged).

    The Manipulation (pitch-mark analysis) is computed once per source and reused; both
    tiers are set on every call so conditions never leak into each other. Praat places
    pulses in unvoiced stretches at random, so its generator is seeded from the item's rng:
    without that, two renders of one condition differ.
    """
    from parselmouth.praat import call, run

    from vocalgrad.signal.analysis import F0_FLOOR_HZ, praat_tier

    if "manipulation" not in ref.cache:
        manip = call(ref.sound, "To Manipulation", FRAME_S, F0_FLOOR_HZ, ref.pitch_ceiling_hz)
        ref.cache["manipulation"] = manip
        ref.cache["original_pitch_tier"] = call(manip, "Extract pitch tier")
        ref.cache["neutral_duration_tier"] = praat_tier(
            "DurationTier", np.array([0.0]), np.array([1.0]), ref.duration_s
        )
    manip = ref.cache["manipulation"]
    call([pitch_tier or ref.cache["original_pitch_tier"], manip], "Replace pitch tier")
    call([manip, duration_tier or ref.cache["neutral_duration_tier"]], "Replace duration tier")
    run(f"random_initializeWithSeedUnsafelyButPredictably ({int(rng.integers(1, 2**31))})")
    return call(manip, "Get resynthesis (overlap-add)").values[0].astype(np.float32)


STFT_WINDOW_S = 0.032  # ~32 ms Hann frames (512 at 16 kHz), 75% overlap: resolves 100 Hz harmonics
# cepstral envelope keeps quefrencies under 1.8 ms: below any voice's period (F0 < 550 Hz)
LIFTER_S = 0.0018


def stft_frames(ref: Analysis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bin Hz, frame times s, complex STFT) of the source, computed once per source and
    reused by every clip the spectral dimensions render from it."""
    if "stft" not in ref.cache:
        ref.cache["stft"] = forward_stft(ref.audio, ref.sr)
    return ref.cache["stft"]


def forward_stft(audio: np.ndarray, sr: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The STFT every spectral dimension uses: Hann frames of ~32 ms, 75% overlap."""
    from scipy.signal import stft

    n_fft = stft_size(sr)
    return stft(audio, fs=sr, nperseg=n_fft, noverlap=n_fft - n_fft // 4, boundary="even")


def stft_size(sr: int) -> int:
    return 1 << int(np.ceil(np.log2(STFT_WINDOW_S * sr)))


def inverse_stft(spec: np.ndarray, ref: Analysis) -> np.ndarray:
    """Overlap-add back to a signal exactly as long as the source."""
    from scipy.signal import istft

    n_fft = stft_size(ref.sr)
    _, out = istft(spec, fs=ref.sr, nperseg=n_fft, noverlap=n_fft - n_fft // 4, boundary=True)
    out = out[: len(ref.audio)]
    return np.pad(out, (0, len(ref.audio) - len(out))).astype(np.float32)


def log_envelope(ref: Analysis) -> np.ndarray:
    """Natural-log spectral envelope of each STFT frame of the source by cepstral smoothing
    (the harmonics removed, the formants kept), cached per source."""
    if "log_envelope" not in ref.cache:
        _, _, spec = stft_frames(ref)
        log_mag = np.log(np.abs(spec) + 1e-9)
        cepstrum = np.fft.irfft(log_mag, axis=0)
        keep = int(round(LIFTER_S * ref.sr))
        cepstrum[keep + 1 : cepstrum.shape[0] - keep] = 0.0
        ref.cache["log_envelope"] = np.fft.rfft(cepstrum, axis=0).real[: spec.shape[0]]
    return ref.cache["log_envelope"]


SPAN_RANGE_DB = 30.0  # a spectrum spans the frequencies within this of its strongest
# the spectrum's span is read at this resolution, through a window whose side lobes (-92 dB)
# leave a partial its own width: at 200 Hz, a pure tone spans under 0.2 octaves
SPAN_RESOLUTION_HZ = 4.0


def spectrum_span_octaves(ref: Analysis, band_hz: tuple[float, float]) -> float | None:
    """The octaves between the lowest and highest frequencies of `band_hz` (Hz) where the
    source's long-term spectrum lies within SPAN_RANGE_DB of its strongest; None where the
    band holds no energy. Read once per source (cached on `ref`).

    Why: a change that acts across the spectrum (a tilt, a room's colouring) is heard on a
    source with many partials; on one steady partial it is a change of level and phase."""
    key = ("spectrum_span", band_hz)
    if key not in ref.cache:
        segment = 2 ** int(np.ceil(np.log2(ref.sr / SPAN_RESOLUTION_HZ)))
        freqs, power = welch(ref.audio, ref.sr, window="blackmanharris", nperseg=segment)
        fitted = (freqs >= band_hz[0]) & (freqs <= band_hz[1])
        if not power[fitted].any():
            ref.cache[key] = None
        else:
            strong = fitted & (power >= power[fitted].max() * 10 ** (-SPAN_RANGE_DB / 10))
            ref.cache[key] = float(np.log2(freqs[strong].max() / freqs[strong].min()))
    return ref.cache[key]

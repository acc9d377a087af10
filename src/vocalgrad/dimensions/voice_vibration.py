"""Voice vibration: amplitude tremolo whose depth follows the curve, power-preserving."""

from __future__ import annotations

import numpy as np

from vocalgrad.audio import frame_rms
from vocalgrad.dimensions.base import DimensionSpec, Measured, Question, Track
from vocalgrad.signal.analysis import Analysis
from vocalgrad.signal.evidence import envelope_fluctuation_change
from vocalgrad.signal.trajectories import sample_times

SPEC = DimensionSpec(
    name="voice_vibration",
    parameter="tremolo depth (8 Hz sinusoidal amplitude modulation)",
    unit="depth",
    increase_means="stronger tremolo (more vibration)",
    tiers={"low": 0.60, "mid": 0.75, "high": 0.90},
    scale="linear",
    measured="8 Hz (the tremolo's rate) component of the clip/source envelope ratio, "
    "least-squares over speech frames (amplitude, dB; 0.8 dB = inaudible)",
    measured_unit="dB",
    audibility_floor=1.0,
    floor_basis=(
        "AM detection threshold ~-25 dB (m ~ 0.06, ~0.5 dB) at 4-16 Hz on broadband carriers "
        "(Viemeister 1979); speech's own modulation masks more, so 1 dB"
    ),
    psychometric_range=(0.05, 0.95),
    # a held depth's head and tail read up to ~1 dB apart (speech's own modulation), about the
    # depth-discrimination JND (~2 dB in 20 log m, Wakefield & Viemeister 1990: 1-1.5 dB of
    # this amplitude at depth 0.5); changing clips move >= 4 dB
    constant_tolerance=1.5,
    # an 8 Hz tremolo of depth 0.6-0.9 dips the envelope 8-20 dB eight times a second: where
    # it is deep, a speech detector ends (or starts) the speech at a dip, and the peak sits on
    # a modulation crest: both read where the tremolo is strong, i.e. the target
    target_cues=("edge_silence", "global_peak_dbfs"),
    kinds=("speech", "tone", "noise", "music", "everyday"),
)
MIN_FIT_FRAMES = 10  # speech frames a window needs for its fit (50 ms)
MASKED_AMPLITUDE_DB = 0.8  # modulation below this reads as none
LFO_HZ = 8.0  # fixed: the published LFO rate ramp (0 -> 20 Hz) was a second, confounding cue
GAIN_FRAME_S = 0.005


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    if not 0 < magnitude < 1:
        return f"tremolo depth {magnitude} must lie in (0, 1)"
    return None


def domain(sr: int) -> tuple[float, float]:
    """From none to full-depth tremolo."""
    return 0.0, 1.0


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    """Gain (1 + d cos) / sqrt(1 + d^2/2) has unit mean power for any depth d, so the
    tremolo does not make the clip quieter (the published one did). The cosine is centred on
    the speech's midpoint, so the speech's two ends sit at one phase of it: with a phase set
    by the file's start, a deep tremolo moved where a detector found the speech begin and end
    by different amounts, and in a comparison item (the same two parts in either order) the
    sum of the file's edge silences told which part trembled (CHANGELOG.md has the
    figures)."""
    t = sample_times(len(ref.audio), ref.sr)
    depth = track(t)
    mid = (ref.span.onset_s + ref.span.offset_s) / 2
    gain = (1.0 + depth * np.cos(2 * np.pi * LFO_HZ * (t - mid))) / np.sqrt(1.0 + depth**2 / 2)
    return (ref.audio * gain).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    """Amplitude (dB) of the tremolo's rate (LFO_HZ) in the log ratio of the clip's 5 ms
    envelope to the source's, fitted by least squares over the source's speech frames of the
    head and tail (with a level and a linear trend, so a slow level change or a noise floor
    reads as no tremolo). A fit reads the same amplitude whichever of its phases the speech
    is active at; the RMS of the 4-12 Hz band it replaces did not (the speech's own
    modulation and the sampled phases moved a held depth's head and tail up to 3.7 dB apart:
    12 of 192 builtin constants over the 1.5 dB tolerance; 6 with the fit alone, none with
    the fit and the tremolo centred on the speech, `render`)."""
    g_clip = frame_rms(clip.audio, clip.sr, GAIN_FRAME_S)
    g_ref = frame_rms(ref.audio, ref.sr, GAIN_FRAME_S)
    n = min(len(g_clip), len(g_ref))
    active = g_ref[:n] > g_ref.max() * 10 ** (-30 / 20)
    ratio = 20 * np.log10(np.maximum(g_clip[:n], 1e-12) / np.maximum(g_ref[:n], 1e-12))
    t = (np.arange(n) + 0.5) * GAIN_FRAME_S
    out = []
    for window in ref.head_tail_frames(n, GAIN_FRAME_S):
        frames = window[:n] & active
        if frames.sum() < MIN_FIT_FRAMES:
            out.append(float("nan"))
            continue
        x = t[frames]
        phase = 2 * np.pi * LFO_HZ * x
        design = np.stack([np.ones_like(x), x - x.mean(), np.cos(phase), np.sin(phase)], axis=1)
        coef = np.linalg.lstsq(design, ratio[frames], rcond=None)[0]
        out.append(max(float(np.hypot(coef[2], coef[3])), MASKED_AMPLITUDE_DB))
    return Measured(*out)


# How the dimension is asked about, and what its ideal observer answers from (the
# dimension contract's optional members: `vocalgrad.dimensions.base.Bound`).
QUESTION = Question(
    recognition=("voice", "trembling", "steady"), other_kinds="vibration of the {noun}"
)
evidence = envelope_fluctuation_change

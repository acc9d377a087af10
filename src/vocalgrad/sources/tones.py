"""Synthetic sources: pure tones, harmonic complexes, band-limited noise, and the published
beep-only ablation's ten beeps.

Specs: ``tones`` (pure tones and harmonic complexes), ``tones:pure``, ``tones:harmonic``,
``tones:noise`` (band-limited noise, kind "noise") and ``beeps``.

Tones and noise bands (kind "tone", "noise"). Each sits in one of `BANDS`, half-octave bands
centred at 200 * 2^(k/2) Hz (200 ... 2263 Hz); a band is the source *group*, so a split that
keeps groups apart keeps train and test apart in frequency. A band holds three sources per
family, at its centre and 1/6 octave either side. Every other parameter is drawn from a
generator seeded by the source id alone (`source_rng`), so a source is the same file on every
machine: the sound lasts `DURATION_RANGE_S` (uniform, to 10 ms), between `SILENCE_S` of
digital silence on either side, rises and falls over `RAMP_S` raised-cosine ramps, and peaks
at `PEAK_DBFS`. A pure tone is a cosine about the sound's middle; a harmonic complex sums
harmonics 1..K of its fundamental (all below `HARMONIC_CEILING_HZ`) at amplitudes 1/k, each a
cosine about the middle with a random sign, and each above the first off its place k x f0 by
a drift drawn within +-`PHASE_DRIFT_HZ`, so the complex's waveform changes shape slowly. Why:
in fixed (sine) phase the waveform never changed, so any change that moves the partials'
relative phases or levels (a sweep across the stereo image summed to mono, a tilt) made the
file's peak, a maximum over the clip, exceed a held constant's, and the crest factor told
constants from sweeps (docs/results.md); cosines about the middle make every tone the same
played backwards, as a clip's twin is. A noise band is Gaussian noise cut to one octave
around its centre in the frequency domain. Files are 16-bit mono WAV at
`SAMPLE_RATE`, rendered lazily into ``<cache>/tones`` like builtin speech, named by a hash of
everything that sets their samples.

Beeps (kind "tone"): the published ablation's sources as its repository's generator makes
them (`BEEP_FREQUENCIES_HZ`; 48 kHz mono 16-bit; 0.75 s digital silence, a 2.10 s sine at
0.65 of full scale starting in phase 0 with no ramp at either end, 0.75 s silence; samples
rounded from x * 32767). The release puts all ten under one speaker ("beep"); here each beep
is its own group (``beep-0700Hz``), so a split can also keep beeps apart in frequency. With
``--protocol vocalgrad`` the build takes the published layout: all ten in test, no train
split, four categories, 24 conditions each: 960 clips (`PROTOCOLS`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad.errors import SourceError
from vocalgrad.files import atomic_path
from vocalgrad.sources.base import Source

SAMPLE_RATE = 48000
BANDS_HZ = tuple(round(200.0 * 2 ** (k / 2), 1) for k in range(8))  # half-octave band centres
OFFSETS_OCT = (-1 / 6, 0.0, 1 / 6)  # a band's three sources, re its centre
DURATION_RANGE_S = (2.0, 2.8)  # the sound's length, drawn per source
SILENCE_S = 0.5  # digital silence before and after the sound
RAMP_S = 0.01  # raised-cosine onset and offset ramps
PEAK_DBFS = -6.0
HARMONIC_CEILING_HZ = 5000.0  # a harmonic complex's partials stay below this
NOISE_BANDWIDTH_OCT = 1.0  # a noise band spans one octave around its centre
FAMILIES = {"pure": "tone", "harmonic": "tone", "noise": "noise"}  # family -> kind
PHASE_DRIFT_HZ = 1.0  # a harmonic's offset from k * f0 is drawn within +-this (Hz)
TONES_VERSION = 2  # bump when the synthesis changes, to invalidate the cache

BEEP_FREQUENCIES_HZ = tuple(range(700, 2051, 150))
BEEP_SAMPLE_RATE = 48000
BEEP_LEAD_S = 0.75
BEEP_TONE_S = 2.10
BEEP_TAIL_S = 0.75
BEEP_AMPLITUDE = 0.65

TONES_LICENCE = "CC0-1.0 (synthesised by vocalgrad)"
BEEPS_ATTRIBUTION = (
    "the beep-only ablation of VocalGrad (ynklab/vocalgrad, CC-BY-4.0), synthesised anew "
    "from its published parameters"
)

# The published beep ablation's layout, merged into the protocol preset of the same name when
# the source is `beeps`: all ten in test, no train split, its four categories (a named set of
# `vocalgrad.dimensions.CATEGORY_SETS`).
PROTOCOLS = {
    "vocalgrad": {
        "n_test": len(BEEP_FREQUENCIES_HZ),
        "n_train": 0,
        "per_speaker_test": 1,
        "categories": "beep-ablation",
    }
}

_ID = re.compile(r"^tones/(?P<family>[a-z]+)/(?P<hz>\d+\.\d)Hz$")
_BEEP_ID = re.compile(r"^beeps/beep_(?P<index>\d\d)$")


@dataclass(frozen=True)
class ToneParams:
    """Everything that sets one synthetic source's samples."""

    family: str
    frequency_hz: float  # the pure tone's, the complex's fundamental, the noise band's centre
    duration_s: float
    seed: int

    def key(self) -> str:
        settings = (
            TONES_VERSION, SAMPLE_RATE, SILENCE_S, RAMP_S, PEAK_DBFS, HARMONIC_CEILING_HZ,
            NOISE_BANDWIDTH_OCT, PHASE_DRIFT_HZ,
        )  # fmt: skip
        return f"{settings}|{self}"


def tone_sources(
    cache_dir: str | Path, families: tuple[str, ...] = ("pure", "harmonic")
) -> list[Source]:
    """The synthetic sources of the given families (`FAMILIES`), paths in ``<cache>/tones``.

    Cheap: nothing is synthesised until `ensure_rendered` asks (see the module docstring).

    Parameters
    ----------
    cache_dir
        The cache folder; files go to its ``tones`` sub-folder.
    families
        Which families to list.

    Returns
    -------
    list[Source]
        One source per (family, band, offset), grouped by band.
    """
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SourceError(f"unknown tone family {unknown[0]!r}; choose from {', '.join(FAMILIES)}")
    out_dir = Path(cache_dir).expanduser() / "tones"
    sources = []
    for family in families:
        for band in BANDS_HZ:
            for offset in OFFSETS_OCT:
                hz = round(band * 2**offset, 1)
                source_id = f"tones/{family}/{hz:.1f}Hz"
                params = tone_params(source_id)
                sources.append(
                    Source(
                        source_id=source_id,
                        path=str(out_dir / f"{_hash(params.key())}.wav"),
                        speaker_id=f"band-{band:.0f}Hz",
                        text_id=f"{family}-{hz:.1f}Hz",
                        gender=None,
                        domain="tones",
                        licence=TONES_LICENCE,
                        attribution="synthesised by vocalgrad (sources.tones)",
                        text=f"{family} {FAMILIES[family]}, {hz:.1f} Hz, {params.duration_s} s",
                        kind=FAMILIES[family],
                    )
                )
    return sources


def beep_sources(cache_dir: str | Path) -> list[Source]:
    """The published beep ablation's ten sources, paths in ``<cache>/tones`` (lazy)."""
    out_dir = Path(cache_dir).expanduser() / "tones"
    sources = []
    for index, hz in enumerate(BEEP_FREQUENCIES_HZ, 1):
        sources.append(
            Source(
                source_id=f"beeps/beep_{index:02d}",
                path=str(out_dir / f"{_hash(f'beep|{hz}|{_beep_settings()}')}.wav"),
                speaker_id=f"beep-{hz:04d}Hz",
                text_id=f"beep-{index:02d}",
                gender=None,
                domain="beeps",
                licence="CC-BY-4.0",
                attribution=BEEPS_ATTRIBUTION,
                text=f"synthetic machine beep clip {index:02d} ({hz} Hz)",
                kind="tone",
            )
        )
    return sources


def source_rng(source_id: str) -> np.random.Generator:
    """The generator a synthetic source's drawn parameters come from: its id alone."""
    return np.random.default_rng(int(hashlib.sha256(source_id.encode()).hexdigest()[:16], 16))


def tone_params(source_id: str) -> ToneParams:
    """A tone source's parameters, from its id (see the module docstring)."""
    match = _ID.match(source_id)
    if match is None or match["family"] not in FAMILIES:
        raise SourceError(f"{source_id!r} is not a tone source id")
    rng = source_rng(source_id)
    lo, hi = DURATION_RANGE_S
    duration = round(float(rng.uniform(lo, hi)), 2)
    return ToneParams(match["family"], float(match["hz"]), duration, int(rng.integers(2**31)))


def synthesise(params: ToneParams) -> np.ndarray:
    """One tone source's samples (float64, peak at PEAK_DBFS), silences included."""
    sr = SAMPLE_RATE
    n = int(round(params.duration_s * sr))
    centred = (np.arange(n) - (n - 1) / 2) / sr  # s, about the sound's middle: x(-t) = x(t)
    if params.family == "pure":
        sound = np.cos(2 * np.pi * params.frequency_hz * centred)
    elif params.family == "harmonic":
        top = min(HARMONIC_CEILING_HZ, 0.45 * sr)
        ks = np.arange(1, max(1, int(top // params.frequency_hz)) + 1)
        rng = np.random.default_rng(params.seed)
        signs = rng.choice((-1.0, 1.0), len(ks))
        drift_hz = rng.uniform(-PHASE_DRIFT_HZ, PHASE_DRIFT_HZ, len(ks))
        drift_hz[0] = 0.0  # the fundamental stays at its frequency
        sound = np.sum(
            [
                sign * np.cos(2 * np.pi * (k * params.frequency_hz + d) * centred) / k
                for k, d, sign in zip(ks, drift_hz, signs, strict=True)
            ],
            axis=0,
        )
    else:
        noise = np.random.default_rng(params.seed).standard_normal(n)
        spectrum = np.fft.rfft(noise)
        freqs = np.fft.rfftfreq(n, 1 / sr)
        half = 2 ** (NOISE_BANDWIDTH_OCT / 2)
        spectrum[(freqs < params.frequency_hz / half) | (freqs > params.frequency_hz * half)] = 0
        sound = np.fft.irfft(spectrum, n)
    sound = sound * _ramps(n, sr)
    silence = np.zeros(int(round(SILENCE_S * sr)))
    out = np.concatenate([silence, sound, silence])
    return out * (10 ** (PEAK_DBFS / 20) / np.max(np.abs(out)))


def synthesise_beep(frequency_hz: float) -> np.ndarray:
    """One published beep as the int16 samples its generator writes."""
    sr = BEEP_SAMPLE_RATE
    lead, tone, tail = (int(round(s * sr)) for s in (BEEP_LEAD_S, BEEP_TONE_S, BEEP_TAIL_S))
    audio = np.zeros(lead + tone + tail)
    audio[lead : lead + tone] = BEEP_AMPLITUDE * np.sin(
        2 * np.pi * frequency_hz * np.arange(tone) / sr
    )
    return np.round(np.clip(audio, -1.0, 1.0) * 32767.0).astype(np.int16)


def render_missing(source: Source) -> None:
    """Synthesise one tone or beep source into its cache path (atomically)."""
    match = _BEEP_ID.match(source.source_id)
    if match is not None:
        index = int(match["index"])
        if not 1 <= index <= len(BEEP_FREQUENCIES_HZ):
            raise SourceError(f"{source.source_id!r}: there are {len(BEEP_FREQUENCIES_HZ)} beeps")
        _write(Path(source.path), synthesise_beep(BEEP_FREQUENCIES_HZ[index - 1]), BEEP_SAMPLE_RATE)
        return
    audio = synthesise(tone_params(source.source_id))
    _write(Path(source.path), np.round(audio * 32767.0).astype(np.int16), SAMPLE_RATE)


def _write(path: Path, samples: np.ndarray, sr: int) -> None:
    with atomic_path(path, suffix=".wav") as tmp:
        sf.write(tmp, samples, sr, format="WAV", subtype="PCM_16")


def _ramps(n: int, sr: int) -> np.ndarray:
    """Raised-cosine onset and offset ramps of RAMP_S over n samples."""
    env = np.ones(n)
    m = min(int(round(RAMP_S * sr)), n // 2)
    if m > 0:
        rise = 0.5 - 0.5 * np.cos(np.pi * (np.arange(m) + 0.5) / m)
        env[:m] = rise
        env[n - m :] = rise[::-1]
    return env


def _beep_settings() -> str:
    return f"{BEEP_SAMPLE_RATE}|{BEEP_LEAD_S}|{BEEP_TONE_S}|{BEEP_TAIL_S}|{BEEP_AMPLITUDE}"


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]

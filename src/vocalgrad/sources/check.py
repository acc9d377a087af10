"""Is a source file usable speech? Checked before a source is chosen, so an unusable file is
replaced by the next eligible one instead of leaving the build a source short.

A benchmark clip is speech with a change applied; a tone, noise or silence would make every
question about something else. Speech rises and falls with its syllables and pauses, and its
spectrum is neither one line (a tone) nor flat (noise): three cheap measures on 30 ms frames
separate it from those. The file's own rate and channels are kept, so the build can report
what it resampled or downmixed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import butter, sosfiltfilt

from vocalgrad.audio import load_audio, resample
from vocalgrad.errors import AudioError
from vocalgrad.signal.analysis import Analysis
from vocalgrad.sources.base import SpeechSource
from vocalgrad.sources.folder import FOLDER_EXTENSIONS, HEADERLESS_EXTENSIONS
from vocalgrad.sources.speakers import SPEAKER_TABLES

CHECK_SR = 16000
MIN_LEVEL_SPREAD_DB = 6.0  # speech: syllables and pauses span 15-30 dB between these percentiles
# share of the power within 1 % of the strongest frequency: a steady tone is caught by its level
# spread already; a real recorded word (ALSA "Front Left", played twice) holds 0.51 at its F0
MAX_TONE_SHARE = 0.8
MAX_FLATNESS = 0.35  # median spectral flatness of the louder frames (white noise ~0.5-0.6)
# what a listener cannot hear is taken out before measuring: a DC offset (ktuberling-data's
# Galician words sit 0.07-0.20 of full scale off zero) put most of every frame's power at
# 0 Hz, so real speech read as "a steady level ... like a tone at 0 Hz" (spread 4.9-5.4 dB)
INFRASONIC_HZ = 40.0


@dataclass(frozen=True)
class SourceFormat:
    """A source file as found: its rate and channel count."""

    sample_rate: int
    channels: int


def speech_problem(audio: np.ndarray, sr: int) -> str | None:
    """Why a mono signal is not usable speech, or None if it is."""
    if not np.all(np.isfinite(audio)):
        return "holds NaN or infinite samples"
    if len(audio) < 0.5 * sr:
        return f"only {len(audio) / sr:.2f} s long; sources need >= 0.5 s"
    peak = float(np.max(np.abs(audio)))
    if peak < 1e-4:
        return f"silent (peak {peak:.1e})"
    x = _without_infrasound(resample(audio / peak, sr, CHECK_SR).astype(np.float64))
    if float(np.max(np.abs(x))) < 1e-3:  # -60 dB re the file's peak: the filter's edge residue
        return "silent apart from a DC offset or sub-audio drift"
    frame, hop = int(0.03 * CHECK_SR), int(0.01 * CHECK_SR)
    frames = np.lib.stride_tricks.sliding_window_view(x, frame)[::hop] * np.hanning(frame)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-20
    level = 10 * np.log10(power.sum(axis=1))
    loud = level > level.max() - 40
    spread = float(np.percentile(level[loud], 90) - np.percentile(level[loud], 10))
    spectrum = power[loud].sum(axis=0)
    freqs = np.fft.rfftfreq(frame, 1 / CHECK_SR)
    top = int(np.argmax(spectrum))
    near = np.abs(freqs - freqs[top]) <= max(0.01 * freqs[top], CHECK_SR / frame)
    share = float(spectrum[near].sum() / spectrum.sum())
    if spread < MIN_LEVEL_SPREAD_DB:
        kind = (
            "noise" if _flatness(power[loud]) > MAX_FLATNESS else f"a tone at {freqs[top]:.0f} Hz"
        )
        return (
            f"not speech: a steady level throughout ({spread:.1f} dB between quiet and loud "
            f"frames; speech rises and falls with its syllables), like {kind}"
        )
    if share > MAX_TONE_SHARE:
        return f"not speech: a tone at {freqs[top]:.0f} Hz carries {share:.0%} of the power"
    flatness = _flatness(power[loud])
    if flatness > MAX_FLATNESS:
        return f"not speech: a noise-like spectrum (median flatness {flatness:.2f})"
    return None


def _without_infrasound(x: np.ndarray) -> np.ndarray:
    """x less its DC offset and drift under INFRASONIC_HZ (zero-phase 2nd-order high-pass)."""
    sos = butter(2, INFRASONIC_HZ, btype="highpass", fs=CHECK_SR, output="sos")
    return sosfiltfilt(sos, x - np.mean(x))


def _flatness(power: np.ndarray) -> float:
    """Median over frames of geometric / arithmetic mean power: 1 for white noise, ~0 for a tone."""
    return float(np.median(np.exp(np.mean(np.log(power), axis=1)) / np.mean(power, axis=1)))


class SpeechCheck:
    """Memoised `source -> why it is unusable (or None)`; remembers each file's format."""

    def __init__(self) -> None:
        self.refused: dict[str, str] = {}
        self.formats: dict[str, SourceFormat] = {}
        self._seen: set[str] = set()

    def __call__(self, source: SpeechSource) -> str | None:
        if source.source_id not in self._seen:
            self._seen.add(source.source_id)
            problem = self._problem(source)
            if problem:
                self.refused[source.source_id] = problem
        return self.refused.get(source.source_id)

    def _problem(self, source: SpeechSource) -> str | None:
        try:
            info = sf.info(source.path)
            audio, sr = load_audio(source.path)
        except (AudioError, sf.LibsndfileError, RuntimeError) as err:
            return str(err).removeprefix(f"{source.path}: ")
        self.formats[source.source_id] = SourceFormat(int(info.samplerate), int(info.channels))
        problem = speech_problem(audio, sr)
        if problem is None and not Analysis(resample(audio, sr, CHECK_SR), CHECK_SR).span.plausible:
            problem = "no plausible speech span"
        return problem


def conversions(formats: list[SourceFormat], sample_rate: int) -> list[str]:
    """What the build did to the sources to render at `sample_rate` in mono, one note each."""
    notes = []
    rates: dict[int, int] = {}
    for f in formats:
        if f.sample_rate != sample_rate:
            rates[f.sample_rate] = rates.get(f.sample_rate, 0) + 1
    for rate, n in sorted(rates.items()):
        way = "up" if rate < sample_rate else "down"
        notes.append(
            f"{n} source(s) resampled {way} from {rate} Hz to {sample_rate} Hz"
            + (" (no content above the original band: narrowband speech)" if way == "up" else "")
        )
    downmixed: dict[int, int] = {}
    for f in formats:
        if f.channels > 1:
            downmixed[f.channels] = downmixed.get(f.channels, 0) + 1
    for channels, n in sorted(downmixed.items()):
        notes.append(f"{n} source(s) downmixed from {channels} channels to mono")
    return notes


@dataclass
class SourceCheck:
    """What a build would make of a list of sources, before it picks any."""

    refused: dict[str, str]  # source_id -> why a build would not use it
    unchecked: int  # sources not on disk yet (builtin speech, synthesised when picked)


def check_sources(sources: Sequence[SpeechSource], min_duration_s: float) -> SourceCheck:
    """Apply the build's own checks to every source on disk: long enough for the build
    (`min_duration_s`), readable, and speech (`SpeechCheck`). Why: a count of sources that
    includes a 0-byte file or a 1 s clip promises a build more than it can take.

    Parameters
    ----------
    sources : sequence of SpeechSource
        What a source spec resolved to.
    min_duration_s : float
        The build's shortest usable source, in seconds.

    Returns
    -------
    SourceCheck
        The refused sources with their reasons, and how many could not be checked because
        their files do not exist yet.
    """
    speech = SpeechCheck()
    refused: dict[str, str] = {}
    unchecked = 0
    for source in sources:
        path = Path(source.path)
        if not path.is_file():
            unchecked += 1
            continue
        try:
            seconds = float(sf.info(str(path)).duration)
        except (sf.LibsndfileError, RuntimeError) as err:  # the message without the path
            why = getattr(err, "error_string", None) or str(err).replace(str(path), "the file")
            refused[source.source_id] = f"unreadable: {why.rstrip('.')}"
            continue
        if seconds < min_duration_s:
            refused[source.source_id] = (
                f"{seconds:.2f} s long; a build needs at least {min_duration_s:g} s "
                "(min_duration_s)"
            )
            continue
        problem = speech(source)
        if problem:
            refused[source.source_id] = problem
    return SourceCheck(refused, unchecked)


def skipped_files(spec: str) -> dict[str, list[str]]:
    """The files under a `folder:` source that are not taken as sources, by reason (nothing
    for other specs). Why: a `.raw` dump or an `.m4a` beside real audio must not vanish
    without a word.

    Parameters
    ----------
    spec : str
        A source spec; only ``folder:PATH`` has files to skip.

    Returns
    -------
    dict
        reason -> the skipped files' paths relative to the folder, sorted.
    """
    scheme, _, arg = spec.strip().partition(":")
    root = Path(arg).expanduser()
    if scheme != "folder" or not root.is_dir():
        return {}
    skipped: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or any(part.startswith(".") for part in rel.parts):
            continue
        suffix = path.suffix.lower()
        if suffix in FOLDER_EXTENSIONS or rel.as_posix() in SPEAKER_TABLES:
            continue
        reason = (
            f"no header ({suffix}): its rate and encoding would be guesses; convert it to WAV, "
            "e.g. `sox -t raw -r 16000 -e signed -b 16 -c 1 x.raw x.wav`"
            if suffix in HEADERLESS_EXTENSIONS
            else "not an audio format it reads (WAV, FLAC, Ogg, Opus, MP3, AIFF, AU, CAF, W64, "
            "RF64, NIST SPHERE)"
        )
        skipped.setdefault(reason, []).append(rel.as_posix())
    return skipped

"""Is a source file usable as its kind of sound? Checked before a source is chosen, so an
unusable file is replaced by the next eligible one instead of leaving the build a source short.

Each kind has its check (`PROBLEMS`): a file of any kind must be finite, at least 0.5 s long and
not silent; speech must also sound like speech (below), a tone or a noise band must hold a steady
level and be a tone (power on a few peaks) or noise (power filling its band), and music or an
everyday recording has no signature checked beyond that.

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
from vocalgrad.signal.kinds import SPEECH
from vocalgrad.sources.base import Source
from vocalgrad.sources.folder import FOLDER_EXTENSIONS, HEADERLESS_EXTENSIONS
from vocalgrad.sources.speakers import SPEAKER_TABLES

CHECK_SR = 16000
FRAME = int(0.03 * CHECK_SR)  # 30 ms: a syllable's scale
MIN_LEVEL_SPREAD_DB = 6.0  # speech: syllables and pauses span 15-30 dB between these percentiles
# share of the power within 1 % of the strongest frequency: a steady tone is caught by its level
# spread already; a real recorded word can hold half its power at its F0 (docs/results.md)
MAX_TONE_SHARE = 0.8
MAX_FLATNESS = 0.35  # median spectral flatness of the louder frames (white noise ~0.5-0.6)
# what a listener cannot hear is taken out before measuring: a DC offset (some corpora's
# recordings sit far off zero) put most of every frame's power at
# 0 Hz, so real speech read as "a steady level ... like a tone at 0 Hz" (docs/results.md)
INFRASONIC_HZ = 40.0


@dataclass(frozen=True)
class SourceFormat:
    """A source file as found: its rate and channel count."""

    sample_rate: int
    channels: int


def basic_problem(audio: np.ndarray, sr: int) -> str | None:
    """Why a mono signal is unusable as a source of any kind, or None: not finite, too
    short, or silent."""
    if not np.all(np.isfinite(audio)):
        return "holds NaN or infinite samples"
    if len(audio) < 0.5 * sr:
        return f"only {len(audio) / sr:.2f} s long; sources need >= 0.5 s"
    peak = float(np.max(np.abs(audio)))
    if peak < 1e-4:
        return f"silent (peak {peak:.1e})"
    return None


@dataclass(frozen=True)
class _Frames:
    """The speech check's measures of one signal on 30 ms frames (a syllable's scale)."""

    power: np.ndarray  # (frames, bins) power spectra of the frames within 40 dB of the loudest
    freqs: np.ndarray  # bin frequencies, Hz
    spread_db: float  # 90th minus 10th percentile of those frames' levels

    @property
    def spectrum(self) -> np.ndarray:
        return self.power.sum(axis=0)


def _frames(audio: np.ndarray, sr: int) -> _Frames | str:
    """The measures, or why there is nothing to measure (only a DC offset or drift)."""
    peak = float(np.max(np.abs(audio)))
    x = _without_infrasound(resample(audio / peak, sr, CHECK_SR).astype(np.float64))
    if float(np.max(np.abs(x))) < 1e-3:  # -60 dB re the file's peak: the filter's edge residue
        return "silent apart from a DC offset or sub-audio drift"
    hop = int(0.01 * CHECK_SR)
    frames = np.lib.stride_tricks.sliding_window_view(x, FRAME)[::hop] * np.hanning(FRAME)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2 + 1e-20
    level = 10 * np.log10(power.sum(axis=1))
    loud = level > level.max() - 40
    spread = float(np.percentile(level[loud], 90) - np.percentile(level[loud], 10))
    return _Frames(power[loud], np.fft.rfftfreq(FRAME, 1 / CHECK_SR), spread)


def speech_problem(audio: np.ndarray, sr: int) -> str | None:
    """Why a mono signal is not usable speech, or None if it is."""
    problem = basic_problem(audio, sr)
    if problem:
        return problem
    measured = _frames(audio, sr)
    if isinstance(measured, str):
        return measured
    spectrum, freqs = measured.spectrum, measured.freqs
    top = int(np.argmax(spectrum))
    near = np.abs(freqs - freqs[top]) <= max(0.01 * freqs[top], CHECK_SR / FRAME)
    share = float(spectrum[near].sum() / spectrum.sum())
    if measured.spread_db < MIN_LEVEL_SPREAD_DB:
        kind = (
            "noise"
            if _flatness(measured.power) > MAX_FLATNESS
            else f"a tone at {freqs[top]:.0f} Hz"
        )
        return (
            f"not speech: a steady level throughout ({measured.spread_db:.1f} dB between quiet "
            f"and loud frames; speech rises and falls with its syllables), like {kind}"
        )
    if share > MAX_TONE_SHARE:
        return f"not speech: a tone at {freqs[top]:.0f} Hz carries {share:.0%} of the power"
    flatness = _flatness(measured.power)
    if flatness > MAX_FLATNESS:
        return f"not speech: a noise-like spectrum (median flatness {flatness:.2f})"
    return None


# Synthetic sources are steady: a tone or a noise band holds its level (ramps aside) over 100 ms
# frames, where speech and music rise and fall by 15-30 dB between these percentiles (a one-
# octave noise band at 178 Hz, the narrowest `tones` makes, spans ~3 dB).
STEADY_FRAME_S = 0.1
MAX_STEADY_SPREAD_DB = 6.0
# How widely a sound's power spreads: the bandwidth its strongest bins need to hold 90% of the
# power (whole-signal spectrum). A tone's sits on lines (a pure tone's ~1 Hz; a harmonic
# complex with 1/k partials ~2 Hz a partial, 7 partials); noise fills its band (a one-octave
# band at 178 Hz, 126 Hz wide, needs ~80 Hz).
MAX_TONE_WIDTH_HZ = 40.0


def _steady_problem(audio: np.ndarray, sr: int, what: str) -> str | None:
    """Why a signal is not a steady sound (what: "tone", "noise band"), or None."""
    problem = basic_problem(audio, sr)
    if problem:
        return problem
    x = _without_infrasound(
        resample(audio / np.max(np.abs(audio)), sr, CHECK_SR).astype(np.float64)
    )
    if float(np.max(np.abs(x))) < 1e-3:
        return "silent apart from a DC offset or sub-audio drift"
    n = int(STEADY_FRAME_S * CHECK_SR)
    frames = x[: len(x) // n * n].reshape(-1, n)
    level = 10 * np.log10(np.mean(frames**2, axis=1) + 1e-20)
    loud = level[level > level.max() - 40]
    spread = float(np.percentile(loud, 90) - np.percentile(loud, 10))
    if spread > MAX_STEADY_SPREAD_DB:
        return (
            f"not a steady {what}: its level spans {spread:.1f} dB between quiet and loud 100 ms "
            "frames, like speech or music; resolve it as their kind"
        )
    return None


def power_width_hz(audio: np.ndarray, sr: int) -> float:
    """The bandwidth (Hz) the strongest bins of the whole signal's spectrum need to hold 90% of
    its power: ~1 Hz a line for a tone, most of its band for noise."""
    x = resample(audio, sr, CHECK_SR).astype(np.float64)
    power = np.abs(np.fft.rfft(x * np.hanning(len(x)))) ** 2
    ranked = np.sort(power)[::-1]
    needed = int(np.searchsorted(np.cumsum(ranked), 0.9 * ranked.sum())) + 1
    return needed * CHECK_SR / len(x)


def tone_problem(audio: np.ndarray, sr: int) -> str | None:
    """Why a mono signal is not a usable tone (kind "tone"), or None if it is."""
    problem = _steady_problem(audio, sr, "tone")
    if problem:
        return problem
    width = power_width_hz(audio, sr)
    if width > MAX_TONE_WIDTH_HZ:
        return f"not a tone: 90% of its power spreads over {width:.0f} Hz, like noise"
    return None


def noise_problem(audio: np.ndarray, sr: int) -> str | None:
    """Why a mono signal is not a usable noise band (kind "noise"), or None if it is."""
    problem = _steady_problem(audio, sr, "noise band")
    if problem:
        return problem
    width = power_width_hz(audio, sr)
    if width <= MAX_TONE_WIDTH_HZ:
        return f"not noise: 90% of its power lies on lines {width:.0f} Hz wide in all, like a tone"
    return None


def sound_problem(audio: np.ndarray, sr: int) -> str | None:
    """Why a mono signal is not a usable sound of a kind without a signature of its own
    (music, everyday recordings): not finite, too short, silent, or only a DC offset."""
    problem = basic_problem(audio, sr)
    if problem:
        return problem
    measured = _frames(audio, sr)
    return measured if isinstance(measured, str) else None


PROBLEMS = {
    "speech": speech_problem,
    "tone": tone_problem,
    "noise": noise_problem,
    "music": sound_problem,
    "everyday": sound_problem,
}
"""Kind of sound -> why a signal is not usable as that kind (`vocalgrad.signal.kinds`)."""


def _without_infrasound(x: np.ndarray) -> np.ndarray:
    """x less its DC offset and drift under INFRASONIC_HZ (zero-phase 2nd-order high-pass)."""
    sos = butter(2, INFRASONIC_HZ, btype="highpass", fs=CHECK_SR, output="sos")
    return sosfiltfilt(sos, x - np.mean(x))


def _flatness(power: np.ndarray) -> float:
    """Median over frames of geometric / arithmetic mean power: 1 for white noise, ~0 for a tone."""
    return float(np.median(np.exp(np.mean(np.log(power), axis=1)) / np.mean(power, axis=1)))


class SourceCheck:
    """Memoised `source -> why it is unusable as its kind of sound (or None)`; remembers each
    file's format."""

    def __init__(self) -> None:
        self.refused: dict[str, str] = {}
        self.formats: dict[str, SourceFormat] = {}
        self._seen: set[str] = set()

    def __call__(self, source: Source) -> str | None:
        if source.source_id not in self._seen:
            self._seen.add(source.source_id)
            problem = self._problem(source)
            if problem:
                self.refused[source.source_id] = problem
        return self.refused.get(source.source_id)

    def _problem(self, source: Source) -> str | None:
        path = Path(source.path)
        if path.is_file() and path.stat().st_size == 0:
            return EMPTY_FILE
        try:
            info = sf.info(source.path)
            audio, sr = load_audio(source.path)
        except (AudioError, sf.LibsndfileError, RuntimeError) as err:
            return str(err).removeprefix(f"{source.path}: ")
        self.formats[source.source_id] = SourceFormat(int(info.samplerate), int(info.channels))
        problem = PROBLEMS.get(source.kind, sound_problem)(audio, sr)
        if problem is None and not Analysis(resample(audio, sr, CHECK_SR), CHECK_SR).span.plausible:
            problem = "no plausible speech span" if source.kind == SPEECH else "no plausible span"
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


EMPTY_FILE = "empty file (0 bytes)"
"""Why a 0-byte source is refused (libsndfile would call it an unrecognised format)."""


def refusal_kind(reason: str) -> str:
    """A refusal's reason less its figures, to count refusals by kind: "too short",
    "empty file", "unreadable", "silent", "not speech", ... (the text before any colon,
    semicolon or bracket otherwise)."""
    if reason == EMPTY_FILE:
        return "empty file"
    if " s long; " in reason:
        return "too short"
    for stop in (":", ";", " ("):
        reason = reason.split(stop)[0]
    return reason.strip()


def refusal_counts(refused: dict[str, str]) -> str:
    """One line counting refusals per kind, most first: "277 too short, 1 empty file"."""
    counts: dict[str, int] = {}
    for reason in refused.values():
        kind = refusal_kind(reason)
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(
        f"{n} {kind}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


@dataclass
class Checked:
    """What a build would make of a list of sources, before it picks any."""

    refused: dict[str, str]  # source_id -> why a build would not use it
    unchecked: int  # sources not on disk yet (builtin speech, synthesised when picked)


def check_sources(sources: Sequence[Source], min_duration_s: float) -> Checked:
    """Apply the build's own checks to every source on disk: long enough for the build
    (`min_duration_s`), readable, and of its kind of sound (`SourceCheck`). Why: a count of
    sources that includes a 0-byte file or a 1 s clip promises a build more than it can take.

    Parameters
    ----------
    sources : sequence of Source
        What a source spec resolved to.
    min_duration_s : float
        The build's shortest usable source, in seconds.

    Returns
    -------
    Checked
        The refused sources with their reasons, and how many could not be checked because
        their files do not exist yet.
    """
    check = SourceCheck()
    refused: dict[str, str] = {}
    unchecked = 0
    for source in sources:
        path = Path(source.path)
        if not path.is_file():
            unchecked += 1
            continue
        if path.stat().st_size == 0:
            refused[source.source_id] = EMPTY_FILE
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
        problem = check(source)
        if problem:
            refused[source.source_id] = problem
    return Checked(refused, unchecked)


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

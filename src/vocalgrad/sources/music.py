"""Music sources: notes and short phrases played by real instrument samples.

Spec: ``music``. The instruments are the General MIDI SoundFont that the ``pretty-midi``
wheel ships (``pretty_midi/TimGM6mb.sf2``, 6 MB of sampled instruments), played by FluidSynth
through ``pyfluidsynth`` (install the ``sounds`` extra and Debian's ``libfluidsynth3``);
nothing is downloaded at run time.

`INSTRUMENTS` holds eight families of two General MIDI programs each; a family is the source
*group*, so a split that keeps groups apart tests on instruments the train split never played.
Each instrument plays `ITEMS` sources: sustained notes and short melodic phrases (a seeded walk
on the major scale), with every drawn parameter (notes, durations) from a generator seeded by
the source id alone. Notes lie within `NOTE_RANGE` (MIDI numbers; 110-392 Hz), inside the
range the pitch tracker follows. Reverb and chorus are off (echo is a dimension of its own),
the stereo output is averaged to mono, each sound is faded out over `FADE_S` after its
release, padded with `SILENCE_S` of digital silence on both sides, peak-normalised to
`PEAK_DBFS` and written as 16-bit WAV at `SAMPLE_RATE` into ``<cache>/music``, named by a hash
of the FluidSynth version, the SoundFont and every setting, rendered lazily like builtin
speech.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad.errors import SourceError
from vocalgrad.files import atomic_path
from vocalgrad.sources.base import Source
from vocalgrad.sources.tones import source_rng

SAMPLE_RATE = 44100
SILENCE_S = 0.4
RELEASE_S = 0.5  # kept after the last note-off
FADE_S = 0.05  # raised-cosine fade at the end of the release
PEAK_DBFS = -6.0
VELOCITY = 100
SYNTH_GAIN = 0.5
NOTE_RANGE = (45, 67)  # A2 .. G4
NOTE_S = (2.0, 2.8)  # a sustained note's length, drawn per source
PHRASE_NOTES = (5, 7)  # notes in a phrase, drawn per source
PHRASE_NOTE_S = (0.32, 0.5)  # each phrase note's length, drawn per note
MAJOR = (0, 2, 4, 5, 7, 9, 11)
MUSIC_VERSION = 1  # bump when the rendering changes, to invalidate the cache

# family (the source group) -> two General MIDI programs (0-based) and their names
INSTRUMENTS: dict[str, tuple[tuple[int, str], ...]] = {
    "piano": ((0, "acoustic grand piano"), (4, "electric piano")),
    "chromatic-percussion": ((11, "vibraphone"), (12, "marimba")),
    "organ": ((16, "drawbar organ"), (19, "church organ")),
    "guitar": ((24, "nylon guitar"), (26, "jazz guitar")),
    "strings": ((40, "violin"), (42, "cello")),
    "brass": ((56, "trumpet"), (57, "trombone")),
    "reed": ((65, "alto sax"), (71, "clarinet")),
    "pipe": ((73, "flute"), (75, "pan flute")),
}
ITEMS = ("note1", "note2", "phrase1", "phrase2")
LICENCE = "GPL-2.0 (TimGM6mb SoundFont by Tim Brechbill, shipped in the pretty-midi wheel)"

_ID = re.compile(r"^music/(?P<family>[a-z-]+)/(?P<program>\d+)/(?P<item>[a-z]+\d)$")


@dataclass(frozen=True)
class Performance:
    """What one music source plays: a program and (MIDI note, seconds) pairs in sequence."""

    program: int
    notes: tuple[tuple[int, float], ...]


def music_sources(cache_dir: str | Path) -> list[Source]:
    """Every music source, paths in ``<cache>/music`` (nothing is rendered until
    `ensure_rendered` asks).

    Parameters
    ----------
    cache_dir
        The cache folder; files go to its ``music`` sub-folder.

    Returns
    -------
    list[Source]
        ``len(ITEMS)`` sources per instrument, grouped by instrument family.
    """
    out_dir = Path(cache_dir).expanduser() / "music"
    sources = []
    for family, programs in INSTRUMENTS.items():
        for program, name in programs:
            for item in ITEMS:
                source_id = f"music/{family}/{program}/{item}"
                plan = performance(source_id)
                sources.append(
                    Source(
                        source_id=source_id,
                        path=str(out_dir / f"{_hash(plan)}.wav"),
                        speaker_id=family,
                        text_id=f"{name}-{item}",
                        gender=None,
                        domain="music",
                        licence=LICENCE,
                        attribution=f"{name} (General MIDI program {program + 1}), TimGM6mb",
                        text=f"{name}: {'a held note' if item.startswith('note') else 'a phrase'}",
                        kind="music",
                    )
                )
    return sources


def performance(source_id: str) -> Performance:
    """The notes one music source plays, drawn from its id (see the module docstring)."""
    match = _ID.match(source_id)
    if match is None or match["family"] not in INSTRUMENTS:
        raise SourceError(f"{source_id!r} is not a music source id")
    rng = source_rng(source_id)
    lo, hi = NOTE_RANGE
    if match["item"].startswith("note"):
        return Performance(
            int(match["program"]),
            ((int(rng.integers(lo, hi + 1)), round(float(rng.uniform(*NOTE_S)), 2)),),
        )
    tonic = int(rng.integers(lo, hi - 11))
    degree = int(rng.integers(0, 4))
    notes = []
    for _ in range(int(rng.integers(PHRASE_NOTES[0], PHRASE_NOTES[1] + 1))):
        degree = int(np.clip(degree + rng.choice((-2, -1, 1, 2)), 0, 2 * len(MAJOR) - 1))
        pitch = tonic + 12 * (degree // len(MAJOR)) + MAJOR[degree % len(MAJOR)]
        notes.append((min(pitch, hi), round(float(rng.uniform(*PHRASE_NOTE_S)), 2)))
    return Performance(int(match["program"]), tuple(notes))


def render_missing(source: Source) -> None:
    """Play one music source into its cache path (atomically)."""
    audio = play(performance(source.source_id))
    with atomic_path(Path(source.path), suffix=".wav") as tmp:
        sf.write(
            tmp,
            np.round(audio * 32767.0).astype(np.int16),
            SAMPLE_RATE,
            format="WAV",
            subtype="PCM_16",
        )


def play(plan: Performance) -> np.ndarray:
    """The performance's samples, mono float64, padded and peak-normalised."""
    fluidsynth = _fluidsynth()
    synth = fluidsynth.Synth(
        gain=SYNTH_GAIN,
        samplerate=float(SAMPLE_RATE),
        **{"synth.reverb.active": 0, "synth.chorus.active": 0},
    )
    try:
        font = synth.sfload(str(soundfont()))
        synth.program_select(0, font, 0, plan.program)
        chunks = []
        for pitch, seconds in plan.notes:
            synth.noteon(0, pitch, VELOCITY)
            chunks.append(synth.get_samples(int(round(seconds * SAMPLE_RATE))))
            synth.noteoff(0, pitch)
        chunks.append(synth.get_samples(int(round(RELEASE_S * SAMPLE_RATE))))
    finally:
        synth.delete()
    audio = np.concatenate(chunks).astype(np.float64).reshape(-1, 2).mean(axis=1)
    fade = int(round(FADE_S * SAMPLE_RATE))
    audio[-fade:] *= 0.5 + 0.5 * np.cos(np.pi * (np.arange(fade) + 0.5) / fade)
    peak = float(np.max(np.abs(audio)))
    if peak <= 0:
        raise SourceError(f"FluidSynth played silence for program {plan.program}")
    silence = np.zeros(int(round(SILENCE_S * SAMPLE_RATE)))
    return np.concatenate([silence, audio * (10 ** (PEAK_DBFS / 20) / peak), silence])


@cache
def soundfont() -> Path:
    """The General MIDI SoundFont inside the installed pretty-midi wheel."""
    spec = importlib.util.find_spec("pretty_midi")
    if spec is None or not spec.submodule_search_locations:
        raise SourceError(
            "music sources need pretty-midi's SoundFont: pip install 'vocalgrad[sounds]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "TimGM6mb.sf2"
    if not path.is_file():
        raise SourceError(f"{path}: pretty-midi's SoundFont is missing; reinstall pretty-midi")
    return path


def _fluidsynth():  # noqa: ANN202 - the module is imported lazily
    try:
        import fluidsynth
    except ImportError as err:
        raise SourceError(
            "music sources play through FluidSynth: pip install 'vocalgrad[sounds]' and install "
            f"the FluidSynth library (Debian: apt-get install libfluidsynth3) ({err})"
        ) from None
    return fluidsynth


@cache
def _fingerprint() -> str:
    """FluidSynth's version, the SoundFont's size and the settings: changes when the sound does."""
    from ctypes import c_int

    fluidsynth = _fluidsynth()
    parts = (c_int(), c_int(), c_int())
    fluidsynth.fluid_version(*parts)
    version = ".".join(str(p.value) for p in parts)
    settings = (
        MUSIC_VERSION,
        SAMPLE_RATE,
        SILENCE_S,
        RELEASE_S,
        FADE_S,
        PEAK_DBFS,
        VELOCITY,
        SYNTH_GAIN,
    )
    return f"{version}|{soundfont().stat().st_size}|{settings}"


def _hash(plan: Performance) -> str:
    return hashlib.sha256(f"{_fingerprint()}|{plan}".encode()).hexdigest()[:24]

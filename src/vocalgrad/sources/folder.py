"""Sounds from a plain folder (user-supplied recordings): speech, unless the spec names another
kind (`folder:PATH?kind=KIND`, `vocalgrad.sources.schemes`).

Every container that carries its own sample rate and that libsndfile reads is taken: WAV,
FLAC, Ogg (Vorbis, Opus), MP3, AIFF, AU, CAF, W64, RF64 and NIST SPHERE. Headerless sample
dumps (``.raw``, ``.pcm``, ``.ulaw``, ``.sln``, ``.gsm``, ...) hold no rate or encoding to
read: a folder of only those is refused with the conversion to run, never guessed at.

Speaker identity comes from the path, because folders carry no metadata. By default the
speaker is the top-level sub-folder under the root (``root/<speaker>/.../clip.wav``); taking the
top-level folder rather than the immediate parent can only merge speakers, never split one, so
speaker-disjoint splits stay safe for nested layouts such as ``speaker/chapter/clip.flac``.
Files directly in the root get speaker ``"unknown"``.

Gender comes from an optional speaker table in the folder, ``speakers.csv`` or ``speakers.tsv``
with the columns ``speaker`` and ``gender`` (`speakers`); without it genders are unknown, and the
test split is not balanced by gender.

Text identity is usually unknown for a folder. Then ``text_id`` is the file stem, so
text-disjoint splitting degrades to clip-disjoint splitting (files with equal stems are treated
as the same text, which is conservative). A ``speaker_pattern`` with a ``text`` group supplies
real text ids.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from vocalgrad.errors import SourceError
from vocalgrad.sources.base import Source
from vocalgrad.sources.speakers import speaker_genders

# containers whose header gives the rate and encoding, all read by the libsndfile that
# soundfile's wheels bundle (>= 1.1 for MP3)
FOLDER_EXTENSIONS = (
    ".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".aifc", ".au", ".snd",
    ".caf", ".w64", ".rf64", ".sph", ".nist",
)  # fmt: skip
# sample dumps without a header: their rate and encoding would be guesses
HEADERLESS_EXTENSIONS = (
    ".raw", ".pcm", ".sln", ".sln16", ".ulaw", ".alaw", ".ul", ".al", ".gsm", ".vox", ".g722",
    ".g729",
)  # fmt: skip
FOLDER_LICENCE = "unknown (user-supplied)"


def normalise_text(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace: equal sentences compare equal."""
    text = re.sub(r"[^\w\s]", "", text.lower().replace("_", " "))
    return " ".join(text.split())


def text_key(text: str) -> str:
    """Short stable id for a transcript; the same sentence always gets the same key."""
    return hashlib.sha1(normalise_text(text).encode("utf-8")).hexdigest()[:16]


def scan_audio_files(root: Path, extensions: tuple[str, ...] = FOLDER_EXTENSIONS) -> list[Path]:
    """All files under root with one of `extensions`, recursively, in a deterministic
    (sorted) order."""
    files = [
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix.lower() in extensions and not p.name.startswith(".")
    ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def folder_sources(root: str | Path, speaker_pattern: str | None = None) -> list[Source]:
    """Resolve every audio file under root (`FOLDER_EXTENSIONS`) into a Source.

    speaker_pattern is a regex searched in the path relative to root (POSIX separators); it
    must define a named group ``speaker`` and may define ``text``.
    """
    root = Path(root).expanduser()
    if not root.exists():
        raise SourceError(
            f"{root}: folder does not exist; pass folder:PATH with an existing folder"
        )
    if not root.is_dir():
        raise SourceError(f"{root}: not a folder; pass folder:PATH pointing at a directory")
    pattern = _compile(speaker_pattern)
    genders = speaker_genders(root)
    files = scan_audio_files(root)
    if not files:
        headerless = scan_audio_files(root, HEADERLESS_EXTENSIONS)
        if headerless:
            kinds = ", ".join(sorted({p.suffix.lower() for p in headerless}))
            raise SourceError(
                f"{root}: {len(headerless)} file(s) without a header ({kinds}) and no audio "
                "file that states its sample rate; convert them to WAV with their rate and "
                "encoding, e.g. `sox -t raw -r 16000 -e signed -b 16 -c 1 x.raw x.wav` or "
                "`sox -t ul -r 8000 -c 1 x.ulaw x.wav`"
            )
        raise SourceError(
            f"{root}: no audio files found (searched recursively for "
            f"{' '.join(FOLDER_EXTENSIONS)}); add audio files or point folder: at the right "
            "directory"
        )
    sources = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        speaker, text = _speaker_and_text(rel, pattern, root)
        sources.append(
            Source(
                source_id=f"folder/{rel}",
                path=str(path.resolve()),
                speaker_id=speaker,
                text_id=f"text-{text_key(text)}" if text else f"clip-{path.stem}",
                gender=genders.get(speaker),
                domain="folder",
                licence=FOLDER_LICENCE,
                attribution=f"user-supplied recordings from {root.name or root}",
                text=text,
            )
        )
    return sources


def _compile(speaker_pattern: str | None) -> re.Pattern[str] | None:
    if speaker_pattern is None:
        return None
    try:
        pattern = re.compile(speaker_pattern)
    except re.error as err:
        raise SourceError(
            f"speaker pattern {speaker_pattern!r} is not a valid regex ({err})"
        ) from err
    if "speaker" not in pattern.groupindex:
        raise SourceError(
            f"speaker pattern {speaker_pattern!r} has no named group 'speaker'; "
            r"write it like '(?P<speaker>[^/]+)/'"
        )
    return pattern


def _speaker_and_text(rel: str, pattern: re.Pattern[str] | None, root: Path) -> tuple[str, str]:
    if pattern is None:
        parts = rel.split("/")
        return (parts[0] if len(parts) > 1 else "unknown"), ""
    match = pattern.search(rel)
    if match is None or not match.group("speaker"):
        raise SourceError(
            f"{root / rel}: speaker pattern {pattern.pattern!r} does not match this path "
            f"(relative path {rel!r}); fix the pattern or move the file"
        )
    text = match.group("text") if "text" in pattern.groupindex else None
    return match.group("speaker"), (text or "").strip()

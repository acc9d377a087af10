"""Speech from a plain folder of WAV/FLAC files (user-supplied recordings).

Speaker identity comes from the path, because folders carry no metadata. By default the
speaker is the top-level sub-folder under the root (``root/<speaker>/.../clip.wav``); taking the
top-level folder rather than the immediate parent can only merge speakers, never split one, so
speaker-disjoint splits stay safe for nested layouts such as ``speaker/chapter/clip.flac``.
Files directly in the root get speaker ``"unknown"``.

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
from vocalgrad.sources.base import SpeechSource

FOLDER_EXTENSIONS = (".wav", ".flac")
FOLDER_LICENCE = "unknown (user-supplied)"


def normalise_text(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace: equal sentences compare equal."""
    text = re.sub(r"[^\w\s]", "", text.lower().replace("_", " "))
    return " ".join(text.split())


def text_key(text: str) -> str:
    """Short stable id for a transcript; the same sentence always gets the same key."""
    return hashlib.sha1(normalise_text(text).encode("utf-8")).hexdigest()[:16]


def scan_audio_files(root: Path) -> list[Path]:
    """All WAV/FLAC files under root, recursively, in a deterministic (sorted) order."""
    files = [
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix.lower() in FOLDER_EXTENSIONS and not p.name.startswith(".")
    ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def folder_sources(root: str | Path, speaker_pattern: str | None = None) -> list[SpeechSource]:
    """Resolve every WAV/FLAC under root into a SpeechSource.

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
    files = scan_audio_files(root)
    if not files:
        raise SourceError(
            f"{root}: no .wav or .flac files found (searched recursively); "
            "add audio files or point folder: at the right directory"
        )
    sources = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        speaker, text = _speaker_and_text(rel, pattern, root)
        sources.append(
            SpeechSource(
                source_id=f"folder/{rel}",
                path=str(path.resolve()),
                speaker_id=speaker,
                text_id=f"text-{text_key(text)}" if text else f"clip-{path.stem}",
                gender=None,
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

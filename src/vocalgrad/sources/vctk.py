"""The CSTR VCTK corpus, in both published layouts.

* 0.80: ``wav48/p225/p225_001.wav`` with ``txt/p225/p225_001.txt``
* 0.92: ``wav48_silence_trimmed/p225/p225_001_mic1.flac`` (only mic1 is used, so one
  recording per utterance) with the same ``txt/`` tree

Many VCTK sentences are read by several speakers, so ``text_id`` is a hash of the normalised
transcript: equal sentences get equal ids across speakers, which is what text-disjoint splits
need. Without a transcript the utterance number stands in: numbers up to 24 are the shared
elicitation texts (mapped to the text id other speakers have for that number when known),
higher numbers are speaker-specific newspaper texts.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from vocalgrad.errors import SourceError
from vocalgrad.sources.base import Source
from vocalgrad.sources.folder import normalise_text, text_key

VCTK_LICENCE = "CC-BY-4.0"
VCTK_ATTRIBUTION = "CSTR VCTK Corpus (Yamagishi, Veaux, MacDonald), University of Edinburgh"
SHARED_UTTERANCES = 24  # utterances 001..024 are the texts every speaker reads

_LAYOUTS = (
    ("wav48_silence_trimmed", re.compile(r"^(?P<spk>[ps]\d+)_(?P<num>\d+)_mic1\.flac$")),
    ("wav48", re.compile(r"^(?P<spk>[ps]\d+)_(?P<num>\d+)\.wav$")),
)


def vctk_sources(root: str | Path) -> list[Source]:
    """Every mic1 (0.92) or wav48 (0.80) utterance under a VCTK root, sorted by id."""
    root = _find_root(Path(root).expanduser())
    genders = parse_speaker_info(root / "speaker-info.txt")
    wav_dir, name_re = next((root / d, r) for d, r in _LAYOUTS if (root / d).is_dir())
    found: list[tuple[str, int, Path, str]] = []
    for path in sorted(wav_dir.glob("*/*")):
        match = name_re.match(path.name)
        if match is None:
            continue
        speaker, num = match.group("spk"), int(match.group("num"))
        txt = root / "txt" / speaker / f"{speaker}_{match.group('num')}.txt"
        text = _read_text(txt)
        found.append((speaker, num, path, text))
    if not found:
        raise SourceError(
            f"{wav_dir}: no VCTK audio found (expected p225/p225_001.wav or "
            "p225/p225_001_mic1.flac); check the corpus was fully extracted"
        )
    shared = _shared_text_ids(found)
    sources = []
    for speaker, num, path, text in found:
        if text:
            text_id = f"vctk-{text_key(text)}"
        elif num <= SHARED_UTTERANCES:
            text_id = shared.get(num, f"vctk-utt{num:03d}")
        else:
            text_id = f"vctk-{speaker}-{num:03d}"
        sources.append(
            Source(
                source_id=f"vctk/{speaker}_{num:03d}",
                path=str(path.resolve()),
                speaker_id=speaker,
                text_id=text_id,
                gender=genders.get(speaker),
                domain="vctk",
                licence=VCTK_LICENCE,
                attribution=VCTK_ATTRIBUTION,
                text=text,
            )
        )
    return sorted(sources, key=lambda s: s.source_id)


def parse_speaker_info(path: Path) -> dict[str, str]:
    """Map speaker id ('p225') to 'F'/'M' from speaker-info.txt; tolerant of both versions.

    0.80 writes bare numbers ('225'), 0.92 writes 'p225'; headers and trailing comment
    columns differ, so only the first and third whitespace-separated fields are used.
    """
    if not path.is_file():
        return {}
    genders: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split()
        if len(fields) < 3 or not re.fullmatch(r"[ps]?\d+", fields[0], re.IGNORECASE):
            continue
        speaker = fields[0].lower()
        if speaker[0].isdigit():
            speaker = f"p{speaker}"
        gender = fields[2].upper()
        if gender in ("F", "M"):
            genders[speaker] = gender
    return genders


def _find_root(root: Path) -> Path:
    """Accept the corpus root or a folder directly above it (archives nest one level)."""
    if not root.is_dir():
        raise SourceError(
            f"{root}: VCTK folder does not exist; pass vctk:PATH to the extracted corpus"
        )
    candidates = [root] + sorted(p for p in root.iterdir() if p.is_dir())
    for cand in candidates:
        if any((cand / d).is_dir() for d, _ in _LAYOUTS):
            return cand
    raise SourceError(
        f"{root}: not a VCTK corpus (no wav48/ or wav48_silence_trimmed/ folder); "
        "pass vctk:PATH to the folder that contains speaker-info.txt"
    )


def _read_text(path: Path) -> str:
    if not path.is_file():
        return ""
    return " ".join(path.read_text(encoding="utf-8", errors="replace").split())


def _shared_text_ids(found: list[tuple[str, int, Path, str]]) -> dict[int, str]:
    """Most common transcript id per shared utterance number, for speakers lacking txt files."""
    votes: dict[int, Counter[str]] = {}
    for _speaker, num, _path, text in found:
        if text and num <= SHARED_UTTERANCES and normalise_text(text):
            votes.setdefault(num, Counter())[f"vctk-{text_key(text)}"] += 1
    return {num: counter.most_common(1)[0][0] for num, counter in votes.items()}

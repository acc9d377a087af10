"""What a speech source is: one recorded (or synthesised) utterance on disk plus who said what."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class SpeechSource:
    """One utterance that benchmark clips are rendered from.

    Every source resolves to an audio file on disk (builtin speech and Hugging Face rows are
    materialised into the cache first), so build workers only ever need a path.
    """

    source_id: str  # stable and unique within a source spec, e.g. "vctk/p225_001"
    path: str  # audio file on disk
    speaker_id: str
    text_id: str  # equal for equal texts: the key for text-disjoint splits
    gender: str | None  # "F", "M" or None when unknown
    domain: str  # "builtin-tts", "vctk", "folder", "hf"
    licence: str
    attribution: str
    text: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

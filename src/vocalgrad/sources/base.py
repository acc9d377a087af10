"""What a source is: one recording (or synthesised sound) on disk, its kind and its group."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from vocalgrad.signal.kinds import SPEECH


@dataclass(frozen=True)
class Source:
    """One sound that benchmark clips are rendered from.

    Every source resolves to an audio file on disk (builtin speech, tones, music and Hugging
    Face rows are materialised into the cache first), so build workers only ever need a path.
    ``speaker_id`` is the source's *group*: the cluster whose members must all land in one
    split and which the statistics resample together (a speaker for speech, a frequency band
    for tones, an instrument family for music, a recording's origin for everyday sound).

    Attributes
    ----------
    source_id : str
        Stable and unique within a source spec, e.g. ``vctk/p225_001``: the rows'
        ``source_id``, which every CI resamples by default.
    path : str
        The audio file on disk.
    speaker_id : str
        The source's group (see above); the split is group-disjoint.
    text_id : str
        Equal for equal texts (or equal content): the key of text-disjoint splits.
    gender : str or None
        ``F``, ``M``, or None when unknown (or not a voice).
    domain : str
        Where it came from: ``builtin-tts``, ``vctk``, ``folder``, ``hf``, ``tones``,
        ``music``, ...
    licence : str
        The licence the audio is under, as the dataset card lists it.
    attribution : str
        Whom the card credits for it.
    text : str
        What is said, where known; empty otherwise.
    kind : str
        The kind of sound (`vocalgrad.signal.kinds.KINDS`): ``speech`` unless declared.
    """

    source_id: str  # stable and unique within a source spec, e.g. "vctk/p225_001"
    path: str  # audio file on disk
    speaker_id: str  # the source group (see the class docstring)
    text_id: str  # equal for equal texts (or equal content): the key for text-disjoint splits
    gender: str | None  # "F", "M" or None when unknown (or not a voice)
    domain: str  # "builtin-tts", "vctk", "folder", "hf", "tones", "music", ...
    licence: str
    attribution: str
    text: str = ""
    kind: str = SPEECH  # the kind of sound (`vocalgrad.signal.kinds.KINDS`)

    @property
    def group(self) -> str:
        """The source group: clusters for the split and the statistics (``speaker_id``)."""
        return self.speaker_id

    def to_dict(self) -> dict:
        """The source as plain data (JSON-ready).

        Returns
        -------
        dict
            Every field above by name.
        """
        return asdict(self)

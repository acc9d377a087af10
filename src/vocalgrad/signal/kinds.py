"""The kinds of sound a benchmark can be built from, and what analysing each one needs.

A clip's kind is a property of its source (`vocalgrad.sources`): speech, a synthetic tone, a
band of noise, music, or an everyday recording. Dimensions declare the kinds they are defined
for (``DimensionSpec.kinds``), questions name the sound by its kind ("the pitch of the tone"),
and the source check refuses a file that is not of its kind. The vocabulary sits here, below
sources, dimensions and questions, because all three speak it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vocalgrad.errors import ConfigError

SPEECH = "speech"


@dataclass(frozen=True)
class SoundKind:
    """One kind of sound.

    Parameters
    ----------
    name
        The kind's name, as rows (``source_kind``) and ``DimensionSpec.kinds`` spell it.
    noun
        How a question names the sound ("Does the pitch of the {noun} ...").
    description
        One line for listings and the docs.
    pitch_ceiling_hz
        The highest F0 the pitch tracker may look for in this kind (Hz; each source is tracked
        up to 10 semitones above its strongest frequency, within this); None: the speech
        tracker's (`vocalgrad.signal.analysis.F0_CEILING_HZ`).
    """

    name: str
    noun: str
    description: str
    pitch_ceiling_hz: float | None = None


KINDS: dict[str, SoundKind] = {
    k.name: k
    for k in (
        SoundKind(SPEECH, "speech", "spoken words (the published benchmark's only kind)"),
        # the highest tone (2540 Hz) shifted up 9 semitones, the most a roved path goes
        SoundKind("tone", "tone", "synthetic pure tones and harmonic complexes", 4300.0),
        SoundKind("noise", "noise", "synthetic band-limited noise"),
        SoundKind("music", "music", "notes and phrases played by real instrument samples"),
        SoundKind("everyday", "sound", "recordings of everyday non-speech sound"),
    )
}


def get_kind(name: str) -> SoundKind:
    """The kind called ``name``.

    Raises
    ------
    ConfigError
        No kind has that name; the message lists the known ones.
    """
    try:
        return KINDS[name]
    except KeyError:
        raise ConfigError(
            f"unknown kind of sound {name!r}; choose from {', '.join(KINDS)}"
        ) from None


def row_kind(row: Mapping) -> str:
    """The kind of sound a dataset or result row records.

    Parameters
    ----------
    row : mapping
        A dataset, result or harness row.

    Returns
    -------
    str
        Its ``source_kind``; speech for rows written before sounds had kinds, and for rows
        that do not say.
    """
    return row.get("source_kind") or SPEECH

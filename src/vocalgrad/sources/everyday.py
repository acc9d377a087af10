"""Everyday sounds: real recordings of machines, water, fire, traffic, trains, farms, crowds
and workshops, the sound effects of the city game LinCity-NG as Debian's ``lincity-ng-data``
ships them (``/usr/share/games/lincity-ng/sounds``; GPL-2+, dual CC BY-SA 2.0).

Spec: ``everyday``. Nothing is downloaded: without the package the spec is refused with the
command that installs it (``apt-get install lincity-ng-data``), and ``folder:PATH?kind=everyday``
takes a user's own recordings instead.

A source's *group* is the first word of its file name (``Water``, ``Industry``, ``Rail``,
``Residential``, ...): the variants of one place (``ResidentialHigh2``, ``ResidentialLow1``)
may share a recording, so a group keeps them in one split and the statistics resample them
together. Most files are mono at 11025 Hz, about 4 s long; what the build's checks refuse
(too short, too quiet) is counted and said like any other refusal.
"""

from __future__ import annotations

import re
from pathlib import Path

from vocalgrad.errors import SourceError
from vocalgrad.sources.base import Source
from vocalgrad.sources.folder import scan_audio_files

EVERYDAY_DIR = Path("/usr/share/games/lincity-ng/sounds")
PACKAGE = "lincity-ng-data"
LICENCE = "GPL-2+ (LinCity-NG sound effects, also CC BY-SA 2.0; Debian's lincity-ng-data)"
_FIRST_WORD = re.compile(r"^[A-Z]?[a-z]+")


def everyday_sources(root: str | Path = EVERYDAY_DIR) -> list[Source]:
    """Every recording in `root`, grouped by the first word of its name.

    Parameters
    ----------
    root
        The folder of LinCity-NG's sounds (default: where Debian installs them).

    Returns
    -------
    list[Source]
        One source per audio file, of kind ``everyday``, in file-name order.

    Raises
    ------
    SourceError
        The folder is missing (the package is not installed) or holds no audio.
    """
    root = Path(root)
    if not root.is_dir():
        raise SourceError(
            f"everyday sources are the recordings Debian's {PACKAGE} installs in {root}, which "
            f"is missing: install it (`apt-get install {PACKAGE}`), or give your own "
            "recordings as folder:PATH?kind=everyday"
        )
    files = scan_audio_files(root)
    if not files:
        raise SourceError(f"{root}: no audio files; reinstall {PACKAGE}")
    return [
        Source(
            source_id=f"everyday/{path.stem}",
            path=str(path),
            speaker_id=group_of(path.stem),
            text_id=f"everyday-{path.stem}",
            gender=None,
            domain="everyday",
            licence=LICENCE,
            attribution=f"LinCity-NG sound effect {path.name} (Debian's {PACKAGE})",
            kind="everyday",
        )
        for path in files
    ]


def group_of(stem: str) -> str:
    """The group of a LinCity-NG sound: the first word of its CamelCase name, lower case
    (``ResidentialHigh2`` -> ``residential``)."""
    match = _FIRST_WORD.match(stem)
    return (match.group(0) if match else stem).lower()

"""The acoustic dimensions: one module each, found and bound to the contract here.

Every module of this package whose name does not start with ``_`` (and is not ``base``) is a
dimension: adding one is adding its file. Third-party packages add theirs through the
``vocalgrad.dimensions`` entry-point group (each entry a dimension module), tests through
`register`.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points
from types import ModuleType

from vocalgrad.dimensions.base import Bound, Dimension, DimensionSpec, Measured, Question, bind
from vocalgrad.errors import ConfigError, did_you_mean

# the published benchmark's nine, in its order: what a build asks for by default (the
# others are opt-in with --categories until their human data exist)
PUBLISHED_CATEGORIES = (
    "speaking_speed",
    "voice_pitch",
    "volume",
    "background_noise",
    "echo",
    "voice_clarity",
    "audio_distortion",
    "audio_roughness",
    "voice_vibration",
)
# the published beep-only ablation's four (its repository's generate_ablation_beep_benchmarks.py)
BEEP_ABLATION_CATEGORIES = ("voice_pitch", "volume", "background_noise", "voice_vibration")
# named sets of categories that a source's protocol preset may ask for by name
CATEGORY_SETS = {"published": PUBLISHED_CATEGORIES, "beep-ablation": BEEP_ABLATION_CATEGORIES}
LADDER_CATEGORIES = ("volume", "voice_pitch")
"""The dimensions a ladder is built on unless told (`vocalgrad build --protocol ladder`): two
whose every rung the ideal observer answers on any speech."""
# the order of listings and the card: the published nine, then the rest as they were added;
# a dimension missing here (a new file) follows in name order
_ORDER = (
    *PUBLISHED_CATEGORIES,
    "brightness",
    "vocal_tract_length",
    "breathiness",
    "distance",
    "stereo_direction",
)


def _package_modules() -> list[ModuleType]:
    names = [
        m.name
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_") and m.name != "base"
    ]
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def _plugin_modules() -> list[ModuleType]:
    return [entry.load() for entry in entry_points(group="vocalgrad.dimensions")]


def _discover() -> dict[str, Bound]:
    bound = [bind(m) for m in (*_package_modules(), *_plugin_modules())]
    rank = {name: i for i, name in enumerate(_ORDER)}
    bound.sort(key=lambda d: (rank.get(d.name, len(rank)), d.name))
    return {d.name: d for d in bound}


DIMENSIONS: dict[str, Bound] = _discover()
CATEGORIES = tuple(DIMENSIONS)


def register(module: ModuleType | object, *, replace: bool = False) -> Bound:
    """Add a dimension at run time (a test-only one, or one built in a notebook).

    Parameters
    ----------
    module
        A module or namespace with the members of `Dimension` (see `bind`).
    replace
        Allow a dimension of the same name to be replaced.

    Returns
    -------
    Bound
        The bound dimension, now in `DIMENSIONS` and `CATEGORIES`.

    Raises
    ------
    ConfigError
        A dimension of that name exists and ``replace`` is false.
    TypeError
        The module does not meet the contract (`bind`).
    """
    global CATEGORIES
    dim = bind(module)
    if dim.name in DIMENSIONS and not replace:
        raise ConfigError(f"a dimension named {dim.name!r} exists; pass replace=True to replace it")
    DIMENSIONS[dim.name] = dim
    CATEGORIES = tuple(DIMENSIONS)
    return dim


def unregister(name: str) -> None:
    """Remove a dimension added with `register` (no error if it is not there)."""
    global CATEGORIES
    DIMENSIONS.pop(name, None)
    CATEGORIES = tuple(DIMENSIONS)


def get(name: str) -> Bound:
    """The bound dimension called ``name``.

    Raises
    ------
    ConfigError
        No dimension has that name; the message lists the known ones.
    """
    try:
        return DIMENSIONS[name]
    except KeyError:
        known = ", ".join(DIMENSIONS)
        raise ConfigError(
            f"unknown category {name!r}{did_you_mean(name, DIMENSIONS)}; choose from {known}"
        ) from None


__all__ = [
    "BEEP_ABLATION_CATEGORIES",
    "CATEGORIES",
    "CATEGORY_SETS",
    "DIMENSIONS",
    "PUBLISHED_CATEGORIES",
    "Bound",
    "Dimension",
    "DimensionSpec",
    "Measured",
    "Question",
    "bind",
    "get",
    "register",
    "unregister",
]

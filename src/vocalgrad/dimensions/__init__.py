"""The acoustic dimensions: one module each, found and bound to the contract here.

Every module of this package whose name does not start with ``_`` (and is not ``base``) is a
dimension: adding one is adding its file. Third-party packages add theirs through the
``vocalgrad.dimensions`` entry-point group (each entry a dimension module), tests through
`register`.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

from vocalgrad.dimensions.base import Bound, Dimension, DimensionSpec, Measured, Question, bind
from vocalgrad.registry import Registry

# the published benchmark's nine, in its order: what a build asks for by default (the
# others are opt-in with --dimensions until their human data exist)
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


def _bound(declared: object) -> Bound:
    """A dimension module (or namespace) bound to the contract; a `Bound` as it is."""
    return declared if isinstance(declared, Bound) else bind(declared)


_RANK = {name: i for i, name in enumerate(_ORDER)}
REGISTRY: Registry[Bound] = Registry(
    "dimension",
    _package_modules,
    group="vocalgrad.dimensions",
    check=_bound,
    sort_key=lambda d: _RANK.get(d.name, len(_RANK)),
)
"""Every dimension: this package's modules, plug-ins' (entry-point group
``vocalgrad.dimensions``, each entry a dimension module) and run-time ones (`register`)."""


def names() -> tuple[str, ...]:
    """Every dimension's name, in listing order (the published nine first).

    Returns
    -------
    tuple of str
        The names, e.g. ``("speaking_speed", "voice_pitch", ...)``.
    """
    return REGISTRY.names()


def bound() -> tuple[Bound, ...]:
    """Every dimension bound to the contract, in listing order.

    Returns
    -------
    tuple of Bound
        One per dimension, in the order of `names`.
    """
    return REGISTRY.values()


def get(name: str) -> Bound:
    """The bound dimension called `name`.

    Parameters
    ----------
    name : str
        A dimension's name, e.g. ``voice_pitch``.

    Returns
    -------
    Bound
        Its members, the protocol's defaults where it declares none.

    Raises
    ------
    ConfigError
        No dimension has that name; the message suggests the closest and lists them all.
    """
    return REGISTRY.get(name)


def register(module: ModuleType | object, *, replace: bool = False) -> Bound:
    """Add a dimension at run time (a test-only one, or one built in a notebook).

    Parameters
    ----------
    module : module or object
        A module or namespace with the members of `Dimension` (see `bind`), or a `Bound`.
    replace : bool
        Allow a dimension of the same name to be replaced.

    Returns
    -------
    Bound
        The bound dimension, now among `names`.

    Raises
    ------
    ConfigError
        A dimension of that name exists and ``replace`` is false.
    TypeError
        The module does not meet the contract (`bind`).
    """
    return REGISTRY.register(module, replace=replace)


def unregister(name: str) -> None:
    """Remove a dimension added with `register` (no error if it is not there).

    Parameters
    ----------
    name : str
        The dimension's name.
    """
    REGISTRY.unregister(name)


__all__ = [
    "BEEP_ABLATION_CATEGORIES",
    "CATEGORY_SETS",
    "LADDER_CATEGORIES",
    "PUBLISHED_CATEGORIES",
    "REGISTRY",
    "Bound",
    "Dimension",
    "DimensionSpec",
    "Measured",
    "Question",
    "bind",
    "bound",
    "get",
    "names",
    "register",
    "unregister",
]

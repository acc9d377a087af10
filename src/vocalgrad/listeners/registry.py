"""Listener families by spec scheme: `scheme:rest` -> a Listener.

Every family registers the same way, the built-in ones included: an entry point in the group
``vocalgrad.listeners`` whose name is the scheme and whose value is a factory
``factory(rest: str, *, dataset: str | Path | None = None, **options) -> Listener``. A
third-party package adds a family by declaring one in its own metadata::

    [project.entry-points."vocalgrad.listeners"]
    mymodel = "my_package.listener:from_spec"

after which ``vocalgrad eval DATASET --listener mymodel:whatever`` finds it. In a running
process, `register` adds a family without packaging (a notebook, a test). Factories are
imported only when their scheme is asked for, so no backend loads unasked.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from vocalgrad.errors import ConfigError
from vocalgrad.listeners.base import Listener

ENTRY_POINT_GROUP = "vocalgrad.listeners"
Factory = Callable[..., Listener]

_registered: dict[str, Factory] = {}


def register(scheme: str, factory: Factory) -> None:
    """Make `scheme:...` specs resolve through `factory` in this process (overrides a plug-in)."""
    if not scheme or ":" in scheme:
        raise ConfigError(f"listener scheme {scheme!r}: a non-empty name without ':'")
    _registered[scheme] = factory


def families() -> dict[str, str]:
    """Scheme -> where its factory lives, for every family this process can load."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    found.update({name: f"{f.__module__}:{f.__qualname__}" for name, f in _registered.items()})
    return dict(sorted(found.items()))


def _factory(scheme: str) -> Factory:
    if scheme in _registered:
        return _registered[scheme]
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=scheme):
        return ep.load()
    known = ", ".join(f"{name}:..." for name in families()) or (
        "none: vocalgrad's package metadata is missing; install it with `pip install -e .`"
    )
    raise ConfigError(f"unknown listener scheme {scheme!r}; known: {known}")


def load_listener(spec: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """The listener a spec string names, e.g. ``baseline:ideal`` or ``whisper:tiny.en``."""
    scheme, sep, rest = spec.partition(":")
    if not sep:
        raise ConfigError(f"listener spec {spec!r}: expected SCHEME:NAME, e.g. baseline:random")
    return _factory(scheme)(rest, dataset=dataset, **options)

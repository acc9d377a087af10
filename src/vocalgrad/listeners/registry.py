"""Listener families by spec scheme: `scheme:rest` -> a Listener.

Every family registers the same way, the built-in ones included: an entry point in the group
``vocalgrad.listeners`` whose name is the scheme and whose value is a factory
``factory(rest: str, *, dataset: str | Path | None = None, **options) -> Listener``. A
third-party package adds a family by declaring one in its own metadata::

    [project.entry-points."vocalgrad.listeners"]
    mymodel = "my_package.listener:from_spec"

after which ``vocalgrad eval DATASET --listener mymodel:whatever`` finds it. In a running
process, `register` adds a family without packaging (a notebook, a test). The families are
a lazy `vocalgrad.registry.Registry` (`REGISTRY`): the schemes are read from the package
metadata and a factory is imported only when its scheme is asked for, so no backend loads
unasked.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vocalgrad.errors import ConfigError, did_you_mean
from vocalgrad.listeners.base import Listener
from vocalgrad.registry import Registry

ENTRY_POINT_GROUP = "vocalgrad.listeners"
Factory = Callable[..., Listener]


@dataclass(frozen=True)
class ListenerFamily:
    """A family's factory with what an executor must know before the listener loads.

    A plain factory is a family with the defaults; a family module that needs more wraps its
    factory (``from_spec = ListenerFamily(_load, wants_gpu=True)``).

    Parameters
    ----------
    make
        ``make(rest, *, dataset=None, **options) -> Listener``.
    wants_gpu
        Its listeners run far faster on an accelerator: on a cluster, each listener actor
        asks for one GPU where there is one (`Listener.wants_gpu`, known before loading).
    options
        The ``-O KEY=VALUE`` options its listeners take (`keyword_options` of the listener
        class): any other key is a usage error naming these, not a ``TypeError`` deep in
        the factory. None: not declared, nothing checked.
    """

    make: Factory
    wants_gpu: bool = False
    options: tuple[str, ...] | None = None

    def __call__(self, rest: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
        if self.options is not None:
            unknown = sorted(set(options) - set(self.options))
            if unknown:
                raise ConfigError(
                    f"unknown listener option {unknown[0]!r}"
                    f"{did_you_mean(unknown[0], self.options)}; this family takes "
                    + (", ".join(self.options) if self.options else "no options")
                )
        return self.make(rest, dataset=dataset, **options)


def keyword_options(cls: type) -> tuple[str, ...]:
    """The keyword-only parameters of a listener class's constructor: its ``-O`` options.

    Parameters
    ----------
    cls : type
        A listener class whose ``__init__(spec, *, option=default, ...)`` takes its options
        as keyword-only parameters (private ones, named with a leading underscore, left out).

    Returns
    -------
    tuple of str
        The option names, in signature order.
    """
    params = inspect.signature(cls.__init__).parameters.values()
    return tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY and not p.name.startswith("_"))


def register(scheme: str, factory: Factory) -> None:
    """Make `scheme:...` specs resolve through `factory` in this process (overrides a plug-in).

    Why: a notebook or a test can add a family without packaging it as an entry point.

    Parameters
    ----------
    scheme : str
        The spec prefix before ``:`` (``mymodel`` for ``mymodel:whatever``).
    factory : callable or ListenerFamily
        ``factory(rest, *, dataset=None, **options) -> Listener``; a `ListenerFamily` to
        declare `wants_gpu` or the options it takes.

    Raises
    ------
    ConfigError
        `scheme` is empty or holds a ``:``.
    TypeError
        `factory` is not callable.
    """
    if not scheme or ":" in scheme:
        raise ConfigError(f"listener scheme {scheme!r}: a non-empty name without ':'")
    REGISTRY.register(factory, name=scheme, replace=True)


def unregister(scheme: str) -> None:
    """Remove a family added with `register` (no error if it is not there).

    Parameters
    ----------
    scheme : str
        The spec prefix before ``:``. A plug-in's family is removed too, for this process.
    """
    REGISTRY.unregister(scheme)


def families() -> dict[str, str]:
    """Scheme -> where its factory lives, for every family this process can load.

    Returns
    -------
    dict of str to str
        Scheme -> ``module:attribute`` of its factory, sorted by scheme: every entry point of
        the group (read from the metadata, not imported), and what `register` added in this
        process (which wins over an entry point of the same scheme).
    """
    found = {}
    for scheme in REGISTRY.names():
        where = REGISTRY.origin(scheme)
        if where is None:  # registered at run time: already loaded
            make = REGISTRY.get(scheme).make
            where = f"{make.__module__}:{make.__qualname__}"
        found[scheme] = where
    return found


def _factory(scheme: str) -> ListenerFamily:
    found = REGISTRY.find(scheme)
    if found is not None:
        return found
    known = ", ".join(f"{name}:..." for name in families()) or (
        "none: vocalgrad's package metadata is missing; install it with `pip install -e .`"
    )
    raise ConfigError(
        f"unknown listener scheme {scheme!r}{did_you_mean(scheme, families())}; known: {known}"
    )


def _spec_hint(spec: str) -> str:
    """`did_you_mean` over the named specs first, then over the bare schemes."""
    named = [s for s in known_specs() if not s.endswith(":")]
    return did_you_mean(spec, named) or did_you_mean(spec, [f"{s}:" for s in families()])


def known_specs() -> list[str]:
    """Spec strings a user may have meant: every family's ``scheme:``, each baseline and each
    packaged Whisper model (for the hint of a mistyped spec; imports no model code).

    Returns
    -------
    list of str
        ``baseline:<name>`` per baseline, ``whisper:<name>`` per packaged model, then
        ``<scheme>:`` per family.
    """
    from vocalgrad.listeners.baselines import BASELINES
    from vocalgrad.listeners.ct2_whisper import PACKAGED_WHEELS

    return [
        *(f"baseline:{name}" for name in BASELINES),
        *(f"whisper:{name}" for name in PACKAGED_WHEELS),
        *(f"{scheme}:" for scheme in families()),
    ]


def family_of(factory: Factory) -> ListenerFamily:
    """A registered factory as a `ListenerFamily` (a plain function gets the defaults).

    Parameters
    ----------
    factory : callable or ListenerFamily
        What an entry point or `register` holds.

    Returns
    -------
    ListenerFamily
        `factory` itself where it is one, else a family wrapping it (no GPU wanted, options
        not checked).
    """
    return factory if isinstance(factory, ListenerFamily) else ListenerFamily(factory)


def _checked(declared: object) -> ListenerFamily:
    """What an entry point or `register` holds, as a family; `TypeError` if not callable."""
    if not callable(declared):
        raise TypeError(f"{declared!r} is not a listener factory (a callable or a ListenerFamily)")
    return family_of(declared)


REGISTRY: Registry[ListenerFamily] = Registry(
    "listener scheme", lambda: (), group=ENTRY_POINT_GROUP, check=_checked, lazy=True
)
"""Every listener family by scheme: the entry points of ``vocalgrad.listeners`` (the
built-in families' included), each imported when its scheme is first asked for, and those
`register` adds."""


def family(scheme: str) -> ListenerFamily:
    """The family registered under `scheme` (imports its module; loads no model).

    Why: an executor must know whether a listener wants a GPU and which options it takes
    before it loads the model.

    Parameters
    ----------
    scheme : str
        The spec prefix before ``:``.

    Returns
    -------
    ListenerFamily
        Its factory with what is known before loading.

    Raises
    ------
    ConfigError
        No family has that scheme; the message lists the known ones.
    """
    return _factory(scheme)


def load_listener(spec: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """The listener a spec string names, e.g. ``baseline:ideal`` or ``whisper:tiny.en``.

    Parameters
    ----------
    spec : str
        ``SCHEME:NAME``: a family's scheme and what its factory reads (a model id, a
        baseline's name).
    dataset : str or Path or None
        The dataset folder the listener will answer about, for families that read it (the
        baselines fitted on its train split, the ideal observer's references); None where
        none is needed.
    **options
        The family's ``-O KEY=VALUE`` options, passed to its factory.

    Returns
    -------
    Listener
        The listener, ready to answer.

    Raises
    ------
    ConfigError
        The spec has no ``:``, its scheme is unknown (the message suggests the nearest known
        spec), or its family takes no such option.
    """
    scheme, sep, rest = spec.partition(":")
    if not sep:
        raise ConfigError(
            f"listener spec {spec!r}{_spec_hint(spec)}: expected SCHEME:NAME, "
            "e.g. baseline:random (`vocalgrad list listeners`)"
        )
    factory = _factory(scheme)
    try:
        return factory(rest, dataset=dataset, **options)
    except TypeError as err:  # a family whose constructor has no such keyword
        if options and "unexpected keyword argument" in str(err):
            raise ConfigError(
                f"{spec}: an option its family does not take ({err}); the listeners "
                "reference lists each family's options"
            ) from None
        raise

"""The question formats: one module each, found and registered here.

Every module of this package whose name does not start with ``_`` (and is not ``base``)
declares one format as ``FORMAT``, an instance of a `QuestionFormat` subclass: adding a format
is adding its file. Third-party packages add theirs through the ``vocalgrad.formats``
entry-point group (each entry a format, or a module holding one as ``FORMAT``), a test or a
notebook through `register`. Nothing outside a format's module branches on its name.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Mapping
from typing import Any

from vocalgrad.formats.base import (
    HELD,
    ClipResult,
    Engine,
    Observer,
    QuestionFormat,
    Wording,
    attribute_name,
    checked,
    verdict,
)
from vocalgrad.registry import Registry

ENTRY_POINT_GROUP = "vocalgrad.formats"
DEFAULT = "gradual"
"""The format a build asks for when it names none, and of rows that name none (rows built
before formats existed)."""


def _package_formats() -> list[QuestionFormat]:
    names = [
        m.name
        for m in pkgutil.iter_modules(__path__)
        if not m.name.startswith("_") and m.name != "base"
    ]
    return [checked(importlib.import_module(f"{__name__}.{name}")) for name in names]


def _check(declared: object) -> QuestionFormat:
    fmt = checked(declared)
    if not fmt.tagged and fmt.name != DEFAULT:
        # two untagged formats would give the same condition keys, hence the same item ids
        raise TypeError(f"question format {fmt.name!r}: only {DEFAULT!r} may be untagged")
    return fmt


REGISTRY: Registry[QuestionFormat] = Registry(
    "format",
    _package_formats,
    group=ENTRY_POINT_GROUP,
    check=_check,
    sort_key=lambda fmt: fmt.order,
)


def get(name: str) -> QuestionFormat:
    """The question format called `name`.

    Raises
    ------
    ConfigError
        No format has that name; the message suggests the closest and lists them all.
    """
    return REGISTRY.get(name)


def find(name: str) -> QuestionFormat | None:
    """The format called `name`, or None (a run's file may name a plug-in's format that this
    process lacks)."""
    return REGISTRY.find(name)


def names() -> tuple[str, ...]:
    """Every format's name, in listing order."""
    return REGISTRY.names()


def listed() -> tuple[QuestionFormat, ...]:
    """Every format, in listing order."""
    return REGISTRY.values()


def register(fmt: QuestionFormat | object, *, replace: bool = False) -> QuestionFormat:
    """Add a format in this process (a test's, or one defined in a notebook).

    Parameters
    ----------
    fmt
        A `QuestionFormat` instance, or a module holding one as ``FORMAT``.
    replace
        Allow a format of the same name to be replaced.

    Returns
    -------
    QuestionFormat
        The format, now found by `get` and listed by `listed`.

    Raises
    ------
    ConfigError
        A format of that name exists and ``replace`` is false.
    TypeError
        It does not meet the contract (`vocalgrad.formats.base.checked`).
    """
    return REGISTRY.register(fmt, replace=replace)


def unregister(name: str) -> None:
    """Remove a format added with `register` (no error if it is not there)."""
    REGISTRY.unregister(name)


def row_format(row: Mapping[str, Any]) -> str:
    """The question format of a dataset or result row (`DEFAULT` where it names none)."""
    return row.get("format") or DEFAULT


def of_row(row: Mapping[str, Any]) -> QuestionFormat:
    """The format object of a dataset or result row (`get` of `row_format`)."""
    return get(row_format(row))


# What a report shows of a format it may not have registered (a plug-in's run): the
# registered format's look, else the defaults of `QuestionFormat`, listed last.


def is_tagged(name: str) -> bool:
    """Whether listener names of runs in this format carry the format's name."""
    fmt = find(name)
    return True if fmt is None else fmt.tagged


def marker(name: str) -> str:
    """The format's matplotlib marker in the report's figures."""
    fmt = find(name)
    return QuestionFormat.marker if fmt is None else fmt.marker


def symbol(name: str) -> str:
    """The format's marker as a character, for captions."""
    fmt = find(name)
    return QuestionFormat.symbol if fmt is None else fmt.symbol


def rank(name: str) -> tuple[float, str]:
    """A sort key: registered formats in listing order, then the rest by name."""
    fmt = find(name)
    return (math.inf if fmt is None else fmt.order, name)


__all__ = [
    "DEFAULT",
    "ENTRY_POINT_GROUP",
    "HELD",
    "REGISTRY",
    "ClipResult",
    "Engine",
    "Observer",
    "QuestionFormat",
    "Wording",
    "attribute_name",
    "find",
    "get",
    "is_tagged",
    "listed",
    "marker",
    "names",
    "of_row",
    "rank",
    "register",
    "row_format",
    "symbol",
    "unregister",
    "verdict",
]

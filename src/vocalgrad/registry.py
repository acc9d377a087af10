"""Named things of one kind, found in one way: the package's own, third-party packages'
through an entry-point group, and run-time additions.

A contributor extends vocalgrad by adding a module (a question format, say) rather than by
editing the code that uses it; this is how the code finds it. The built-in members and the
plug-ins are loaded on first use, so importing a registry costs nothing, and a name that is
not there is refused with one line that suggests the nearest known names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar

from vocalgrad.errors import ConfigError

T = TypeVar("T")


def unknown(kind: str, name: str, known: Iterable[str]) -> str:
    """The message for a name that is not among `known`: the closest matches first, then
    every choice.

    Parameters
    ----------
    kind
        What was asked for, as the user would say it ("format", "category").
    name
        The name given.
    known
        Every valid name, in the order to list them.

    Returns
    -------
    str
        One line, e.g. ``unknown colour 'gren' (did you mean 'green'?); choose from ...``.
    """
    known = list(known)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return f"unknown {kind} {name!r}{hint}; choose from {', '.join(known) or 'nothing'}"


class Registry(Generic[T]):
    """The members of one kind by name, in a stable order.

    Why one mechanism: every kind a contributor adds (question formats today) is then found,
    listed, extended by plug-ins and refused on a typo the same way.

    Parameters
    ----------
    kind
        What a member is called in messages ("format").
    builtins
        Returns the package's own members; called once, on first use.
    group
        The entry-point group third-party packages declare members in (each entry's value
        is a member, or whatever `check` accepts), or None for none.
    check
        Turns what a module or entry point declares into a member, raising `TypeError`
        when it does not meet the contract; identity by default.
    name_of
        A member's name (default: its ``name`` attribute).
    sort_key
        The listing order (default: by name); members are listed by it, then by name.
    """

    def __init__(
        self,
        kind: str,
        builtins: Callable[[], Iterable[object]],
        *,
        group: str | None = None,
        check: Callable[[object], T] = lambda member: member,  # type: ignore[assignment, return-value]
        name_of: Callable[[T], str] = lambda member: member.name,  # type: ignore[attr-defined]
        sort_key: Callable[[T], object] = lambda member: 0,
    ) -> None:
        self.kind = kind
        self.group = group
        self._builtins = builtins
        self._check = check
        self._name_of = name_of
        self._sort_key = sort_key
        self._members: dict[str, T] | None = None

    def _loaded(self) -> dict[str, T]:
        if self._members is None:
            found: dict[str, T] = {}
            for declared in self._builtins():
                member = self._check(declared)
                found[self._name_of(member)] = member
            for entry in entry_points(group=self.group) if self.group else ():
                try:
                    member = self._check(entry.load())
                except Exception as err:  # a broken plug-in: say which, in one line
                    raise ConfigError(
                        f"{self.kind} plug-in {entry.name!r} ({entry.value}, entry-point group "
                        f"{self.group}) failed to load: {err}"
                    ) from err
                found.setdefault(self._name_of(member), member)  # a built-in wins
            self._members = found
        return self._members

    def _ordered(self) -> list[T]:
        return sorted(self._loaded().values(), key=lambda m: (self._sort_key(m), self._name_of(m)))

    def names(self) -> tuple[str, ...]:
        """Every member's name, in listing order."""
        return tuple(self._name_of(m) for m in self._ordered())

    def values(self) -> tuple[T, ...]:
        """Every member, in listing order."""
        return tuple(self._ordered())

    def __iter__(self) -> Iterator[T]:
        return iter(self._ordered())

    def __contains__(self, name: object) -> bool:
        return name in self._loaded()

    def find(self, name: str) -> T | None:
        """The member called `name`, or None: for readers of files that may name a member
        this process does not have (a plug-in's, say)."""
        return self._loaded().get(name)

    def get(self, name: str) -> T:
        """The member called `name`.

        Raises
        ------
        ConfigError
            None has that name; the message suggests the closest and lists every name.
        """
        member = self.find(name)
        if member is None:
            raise ConfigError(unknown(self.kind, name, self.names()))
        return member

    def register(self, declared: object, *, replace: bool = False) -> T:
        """Add a member in this process (a test's, or one defined in a notebook).

        Parameters
        ----------
        declared
            The member, or what `check` turns into one.
        replace
            Allow a member of the same name to be replaced.

        Returns
        -------
        T
            The member as registered.

        Raises
        ------
        ConfigError
            A member of that name exists and ``replace`` is false.
        TypeError
            It does not meet the contract (`check`).
        """
        member = self._check(declared)
        name = self._name_of(member)
        members = self._loaded()
        if name in members and not replace:
            raise ConfigError(
                f"a {self.kind} named {name!r} exists; pass replace=True to replace it"
            )
        members[name] = member
        return member

    def unregister(self, name: str) -> None:
        """Remove a member added with `register` (no error if it is not there)."""
        self._loaded().pop(name, None)

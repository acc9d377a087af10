"""Named things of one kind, found in one way: the package's own, third-party packages'
through an entry-point group, and run-time additions.

A contributor extends vocalgrad by adding a module (a question format, say) rather than by
editing the code that uses it; this is how the code finds it. The built-in members and the
plug-ins are loaded on first use (a lazy registry's plug-ins each when it is asked for), so
importing a registry costs nothing, and a name that is not there is refused with one line
that suggests the nearest known names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from vocalgrad.errors import ConfigError, did_you_mean

T = TypeVar("T")


def unknown(kind: str, name: str, known: Iterable[str]) -> str:
    """The message for a name that is not among `known`: the closest matches first, then
    every choice.

    Parameters
    ----------
    kind : str
        What was asked for, as the user would say it ("format", "category").
    name : str
        The name given.
    known : iterable of str
        Every valid name, in the order to list them.

    Returns
    -------
    str
        One line, e.g. ``unknown colour 'gren' (did you mean 'green'?); choose from ...``.
    """
    known = list(known)
    return f"unknown {kind} {name!r}{did_you_mean(name, known)}; choose from " + (
        ", ".join(known) or "nothing"
    )


class _Pending:
    """An entry point of a lazy registry whose value is not loaded yet."""

    __slots__ = ("entry",)

    def __init__(self, entry: EntryPoint) -> None:
        self.entry = entry


class Registry(Generic[T]):
    """The members of one kind by name, in a stable order.

    Why one mechanism: every kind a contributor adds (question formats, dimensions, prompt
    variants, listener families) is then found, listed, extended by plug-ins and refused on a
    typo the same way.

    Parameters
    ----------
    kind : str
        What a member is called in messages ("format").
    builtins : callable () -> iterable
        Returns the package's own members; called once, on first use.
    group : str or None
        The entry-point group third-party packages declare members in (each entry's value
        is a member, or whatever `check` accepts), or None for none.
    check : callable (object) -> T
        Turns what a module or entry point declares into a member, raising `TypeError`
        when it does not meet the contract; identity by default.
    name_of : callable (T) -> str
        A member's name (default: its ``name`` attribute).
    sort_key : callable (T) -> object or None
        The listing order; members are listed by it, then by name. None (the default): by
        name alone.
    lazy : bool
        Load an entry point's value only when its member is asked for (`find`, `get`,
        `values`), not on first use: the member's name is the entry point's name, read from
        the package metadata, so listing the names imports nothing. For members whose
        modules are heavy (a listener family imports its model library). A name not found
        is looked for again in the metadata, so a package installed since the first use is
        found. A lazy registry lists by name (it takes no `sort_key`: sorting would load
        every member), and a missing module (`ModuleNotFoundError`) while loading an entry
        point that was asked for by name propagates as it is, so that the caller can name
        the extra to install.

    Attributes
    ----------
    kind : str
        As given.
    group : str or None
        As given.
    lazy : bool
        As given.

    Raises
    ------
    ConfigError
        When a plug-in's entry point fails to load or to pass `check` (the message names the
        entry point and its group): on first use, or, in a lazy registry, when it is asked
        for.
    ValueError
        `lazy` with a `sort_key`.
    """

    def __init__(
        self,
        kind: str,
        builtins: Callable[[], Iterable[object]],
        *,
        group: str | None = None,
        check: Callable[[object], T] = lambda member: member,  # type: ignore[assignment, return-value]
        name_of: Callable[[T], str] = lambda member: member.name,  # type: ignore[attr-defined]
        sort_key: Callable[[T], object] | None = None,
        lazy: bool = False,
    ) -> None:
        if lazy and sort_key is not None:
            raise ValueError(f"{kind} registry: a lazy registry lists by name; no sort_key")
        self.kind = kind
        self.group = group
        self.lazy = lazy
        self._builtins = builtins
        self._check = check
        self._name_of = name_of
        self._sort_key: Callable[[T], object] = sort_key or (lambda member: 0)
        self._members: dict[str, T | _Pending] | None = None
        self._origins: dict[str, str] = {}  # name -> entry point value, for plug-ins' members
        self._seen: set[str] = set()  # entry-point names read (lazy)

    def _loaded(self) -> dict[str, T | _Pending]:
        if self._members is None:
            found: dict[str, T | _Pending] = {}
            for declared in self._builtins():
                member = self._check(declared)
                found[self._name_of(member)] = member
            self._members = found
            self._scan(found)
        return self._members

    def _scan(self, members: dict[str, T | _Pending]) -> None:
        """Add the group's entry points (in a lazy registry, those not read before)."""
        for entry in entry_points(group=self.group) if self.group else ():
            if self.lazy:
                if entry.name in self._seen:
                    continue
                self._seen.add(entry.name)
                name, member = entry.name, _Pending(entry)
            else:
                member = self._load(entry)
                name = self._name_of(member)
            if name not in members:  # a built-in, or one registered before, wins
                members[name] = member
                self._origins[name] = entry.value

    def _load(self, entry: EntryPoint) -> T:
        try:
            return self._check(entry.load())
        except Exception as err:  # a broken plug-in: say which, in one line
            if self.lazy and isinstance(err, ModuleNotFoundError):
                raise  # asked for by name: the caller names the extra to install
            raise ConfigError(
                f"{self.kind} plug-in {entry.name!r} ({entry.value}, entry-point group "
                f"{self.group}) failed to load: {err}"
            ) from err

    def _looked_up(self, name: str) -> dict[str, T | _Pending]:
        """The members, the metadata read again first where a lazy registry lacks `name`."""
        members = self._loaded()
        if name not in members and self.lazy:
            self._scan(members)
        return members

    def _member(self, name: str) -> T | None:
        members = self._looked_up(name)
        member = members.get(name)
        if isinstance(member, _Pending):
            member = members[name] = self._load(member.entry)
        return member

    def _order(self) -> list[str]:
        members = self._loaded()
        if self.lazy:
            return sorted(members)
        return sorted(members, key=lambda n: (self._sort_key(members[n]), n))  # type: ignore[arg-type]

    def names(self) -> tuple[str, ...]:
        """Every member's name, in listing order (in a lazy registry, loading none).

        Returns
        -------
        tuple of str
            The names, ordered by `sort_key`, then by name.
        """
        return tuple(self._order())

    def values(self) -> tuple[T, ...]:
        """Every member, in listing order (in a lazy registry, this loads every one).

        Returns
        -------
        tuple of T
            The members, ordered by `sort_key`, then by name.
        """
        return tuple(m for m in map(self._member, self._order()) if m is not None)

    def __iter__(self) -> Iterator[T]:
        return iter(self.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._looked_up(name)

    def origin(self, name: str) -> str | None:
        """Where a plug-in's member is declared, without loading it.

        Parameters
        ----------
        name : str
            The member's name.

        Returns
        -------
        str or None
            The value of its entry point (``module:attribute``), or None for a built-in
            member, one added with `register`, or a name not there.
        """
        self._loaded()
        return self._origins.get(name)

    def find(self, name: str) -> T | None:
        """The member called `name`, or None: for readers of files that may name a member
        this process does not have (a plug-in's, say).

        Parameters
        ----------
        name : str
            The member's name, exactly.

        Returns
        -------
        T or None
            The member, or None when none has that name.
        """
        return self._member(name)

    def get(self, name: str) -> T:
        """The member called `name`.

        Parameters
        ----------
        name : str
            The member's name, exactly (as a user typed it, say).

        Returns
        -------
        T
            The member.

        Raises
        ------
        ConfigError
            None has that name; the message suggests the closest and lists every name.
        """
        member = self.find(name)
        if member is None:
            raise ConfigError(unknown(self.kind, name, self.names()))
        return member

    def register(self, declared: object, *, name: str | None = None, replace: bool = False) -> T:
        """Add a member in this process (a test's, or one defined in a notebook).

        Parameters
        ----------
        declared : object
            The member, or what `check` turns into one.
        name : str or None
            The name to register it under; None (the default): `name_of` the member. For
            members that do not carry their name (a listener family's factory).
        replace : bool
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
        name = self._name_of(member) if name is None else name
        members = self._loaded()
        if name in members and not replace:
            raise ConfigError(
                f"a {self.kind} named {name!r} exists; pass replace=True to replace it"
            )
        members[name] = member
        self._origins.pop(name, None)
        return member

    def unregister(self, name: str) -> None:
        """Remove a member added with `register` (no error if it is not there).

        Parameters
        ----------
        name : str
            The member's name. A built-in or plug-in member can be removed too, for this
            process only.
        """
        self._loaded().pop(name, None)
        self._origins.pop(name, None)

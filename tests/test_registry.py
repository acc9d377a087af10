"""The one registry mechanism: built-ins, plug-ins by entry point and run-time members, one
stable order, and a name that is not there refused in one line with the nearest names."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint

import pytest

from vocalgrad import registry
from vocalgrad.errors import ConfigError
from vocalgrad.registry import Registry, unknown


@dataclass(frozen=True)
class Thing:
    name: str
    order: int = 0


def _check(declared: object) -> Thing:
    if not isinstance(declared, Thing):
        raise TypeError(f"{declared!r} is not a Thing")
    return declared


BUILTINS = (Thing("beta", 1), Thing("alpha", 2), Thing("gamma", 1))
PLUGIN = Thing("delta", 0)


def things(monkeypatch, plugins=()) -> Registry[Thing]:
    loaded = []

    def builtins():
        loaded.append(1)
        return BUILTINS

    group = "test.things"
    found = [EntryPoint(name, f"{__name__}:{attr}", group) for name, attr in plugins]
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [e for e in found if e.group == group]
    )
    reg = Registry("thing", builtins, group=group, check=_check, sort_key=lambda t: t.order)
    reg.loaded = loaded  # type: ignore[attr-defined]
    return reg


def test_members_load_on_first_use_and_list_in_a_stable_order(monkeypatch):
    reg = things(monkeypatch, plugins=[("delta", "PLUGIN")])
    assert reg.loaded == []  # nothing is imported until asked
    assert reg.names() == ("delta", "beta", "gamma", "alpha")  # by order, then name
    assert reg.get("beta") is BUILTINS[0] and "delta" in reg and "omega" not in reg
    assert reg.find("omega") is None
    reg.names()
    assert reg.loaded == [1]


def test_an_unknown_name_is_refused_with_the_nearest_ones(monkeypatch):
    reg = things(monkeypatch)
    with pytest.raises(ConfigError, match=r"unknown thing 'bta' \(did you mean 'beta'\?\); "):
        reg.get("bta")
    with pytest.raises(ConfigError) as err:
        reg.get("zzz")
    assert str(err.value) == "unknown thing 'zzz'; choose from beta, gamma, alpha"
    assert unknown("format", "x", []) == "unknown format 'x'; choose from nothing"


def test_members_are_added_and_removed_at_run_time(monkeypatch):
    reg = things(monkeypatch)
    added = reg.register(Thing("epsilon", -1))
    assert reg.get("epsilon") is added and reg.names()[0] == "epsilon"
    with pytest.raises(ConfigError, match="a thing named 'epsilon' exists"):
        reg.register(Thing("epsilon"))
    replaced = reg.register(Thing("epsilon", 9), replace=True)
    assert reg.get("epsilon") is replaced and reg.names()[-1] == "epsilon"
    with pytest.raises(TypeError, match="is not a Thing"):
        reg.register("epsilon")
    reg.unregister("epsilon")
    reg.unregister("epsilon")  # no error the second time
    assert "epsilon" not in reg


BROKEN = "not a thing"


def test_a_broken_plugin_is_named_in_one_line(monkeypatch):
    reg = things(monkeypatch, plugins=[("broken", "BROKEN")])
    with pytest.raises(ConfigError, match=r"thing plug-in 'broken' \(.*:BROKEN, entry-point group"):
        reg.names()


def test_a_builtin_wins_over_a_plugin_of_its_name(monkeypatch):
    reg = things(monkeypatch, plugins=[("beta", "SHADOW")])
    assert reg.get("beta") is BUILTINS[0]


SHADOW = Thing("beta", 5)


def lazy_things(monkeypatch, plugins) -> tuple[Registry[Thing], list[EntryPoint]]:
    group = "test.lazy"
    found = [EntryPoint(name, value, group) for name, value in plugins]
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [e for e in found if e.group == group]
    )
    return Registry("thing", lambda: (), group=group, check=_check, lazy=True), found


def test_a_lazy_registry_loads_only_the_entry_point_asked_for(monkeypatch):
    missing = "vocalgrad_no_such_module_anywhere"
    reg, found = lazy_things(
        monkeypatch,
        [("delta", f"{__name__}:PLUGIN"), ("heavy", f"{missing}:X"), ("bad", f"{__name__}:BROKEN")],
    )
    # the names come from the metadata: listing them, or asking for another, imports nothing
    assert reg.names() == ("bad", "delta", "heavy") and "heavy" in reg
    assert reg.origin("heavy") == f"{missing}:X" and reg.origin("omega") is None
    assert reg.get("delta") is PLUGIN
    with pytest.raises(ModuleNotFoundError, match=missing):  # the caller names the extra
        reg.get("heavy")
    with pytest.raises(ConfigError, match=r"thing plug-in 'bad' \(.*:BROKEN, entry-point group"):
        reg.get("bad")
    with pytest.raises(ConfigError, match=r"unknown thing 'delt' \(did you mean 'delta'\?\)"):
        reg.get("delt")
    # a package installed since the first use is found by its name
    found.append(EntryPoint("late", f"{__name__}:SHADOW", "test.lazy"))
    assert reg.get("late") is SHADOW and reg.names()[-1] == "late"
    # a member that does not carry its name is registered under one; it wins over the plug-in
    added = reg.register(Thing("whatever"), name="delta", replace=True)
    assert reg.get("delta") is added and reg.origin("delta") is None
    reg.unregister("delta")
    assert "delta" not in reg  # removed for this process, not read back from the metadata
    with pytest.raises(ValueError, match="lists by name"):
        Registry("thing", lambda: (), lazy=True, sort_key=lambda t: 0)

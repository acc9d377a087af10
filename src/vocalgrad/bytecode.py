"""Write the bytecode of what vocalgrad imports, once, before many processes start.

    python -m vocalgrad.bytecode [LISTENER ...]

Why: compiling every installed package at install time (`uv pip install --compile-bytecode`)
compiles every module of every package, a small share of which vocalgrad and Whisper import.
Importing those once writes just their .pyc files, also where writing is off by default
(PYTHONDONTWRITEBYTECODE, a CI setting); otherwise every later process would compile scipy,
torch and transformers anew, seconds each. Listeners import much of their backend only when
they load (transformers resolves its classes lazily), so the listeners named are loaded too,
which also leaves a packaged model converted in the cache.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Sequence

import vocalgrad


def write_bytecode(listeners: Sequence[str] = ()) -> list[str]:
    """Import every vocalgrad module and load `listeners` with bytecode writing on; returns
    the modules that could not be imported (their optional dependencies are not installed)."""
    sys.dont_write_bytecode = False  # before the imports below, which bring numpy and scipy
    from vocalgrad.listeners import load_listener

    missing = []
    for module in pkgutil.walk_packages(vocalgrad.__path__, "vocalgrad."):
        if module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:
            missing.append(module.name)
    for spec in listeners:
        load_listener(spec)
    return missing


if __name__ == "__main__":
    write_bytecode(sys.argv[1:])

"""vocalgrad: does an audio language model hear gradual acoustic change?

The public API (`vocalgrad.build`, `evaluate`, `score`, ...) lives in `vocalgrad.api` and is
imported on first use, so importing one submodule stays cheap.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from vocalgrad._version import __version__

_API = (
    "Dataset", "EvalConfig", "Run", "audit", "build", "build_ladder", "evaluate",
    "evaluate_ladder", "finetune", "load_dataset", "open_run", "probe", "report", "score",
    "verify",
)  # fmt: skip
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    if name in _API:
        return getattr(importlib.import_module("vocalgrad.api"), name)
    raise AttributeError(f"module 'vocalgrad' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


class _Namesake(types.ModuleType):
    """A subpackage that shares its name with a public function (`vocalgrad.report`): calling
    it calls the function, so the name stays callable once the subpackage is imported."""

    @property
    def __wrapped__(self) -> Any:  # what `inspect.signature` and `help` read
        return __getattr__(self.__name__.rpartition(".")[2])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)


class _Package(types.ModuleType):
    """The package's module type. Importing a subpackage binds it on its parent under its own
    name; where that name is also a public function (`report`), the subpackage is made
    callable as the function (`_Namesake`), so `vocalgrad.report(...)` works however often
    it is called, and `vocalgrad.report.render` is still the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _API and type(value) is types.ModuleType:
            value.__class__ = _Namesake
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

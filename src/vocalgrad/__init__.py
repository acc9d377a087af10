"""vocalgrad: does an audio language model hear gradual acoustic change?

The public API (`vocalgrad.build`, `evaluate`, `score`, ...) lives in `vocalgrad.api` and is
imported on first use, so importing one submodule stays cheap.
"""

from __future__ import annotations

import importlib
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

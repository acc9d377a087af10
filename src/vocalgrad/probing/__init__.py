"""Look inside listeners: features per stage, probes with controls, lens readout, diagnosis.

features.py   one forward pass per item -> pooled float16 memmaps, cached, resumable
pooling.py    sequence (time x d) -> vector, keeping (or, for `mean`, destroying) direction
solver.py     batched L2 logistic regression (Newton, C path) and batched MLP probes
probes.py     per-category fits: splits, inner CV, shuffled-label / random / DSP controls
stats.py      balanced accuracy with CIs from a bootstrap over source clips
lens.py       answer-token lens per layer, and the per-item link to behaviour
diagnose.py   verdicts with evidence and the rule applied, thresholds as named constants
figures.py    probe curves per category: the one figure the probe run and the report draw
report.py     CSV / markdown tables and the per-category PNG curves
pipeline.py   `probe_dataset` / `probe_rows`: the whole analysis
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "ProbeConfig": "pipeline",
    "probe_dataset": "pipeline",
    "probe_rows": "pipeline",
}


def __getattr__(name: str) -> Any:
    """Import on first use: `vocalgrad probe --help` should not wait for torch."""
    if name in _LAZY:
        return getattr(importlib.import_module(f"vocalgrad.probing.{_LAZY[name]}"), name)
    raise AttributeError(name)


__all__ = [
    "ProbeConfig",
    "probe_dataset",
    "probe_rows",
]

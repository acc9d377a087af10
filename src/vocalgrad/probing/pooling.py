"""Sequence stages (time x d) -> one vector per item, by a named, configurable method.

Direction is a property of time, so the pooling decides what a probe can possibly see:
`segments16` (the published recipe) keeps coarse temporal order, `halves` keeps only the
second-half minus first-half change, and `mean` destroys direction (kept to show exactly that).
"""

from __future__ import annotations

import numpy as np

from vocalgrad.errors import ConfigError, did_you_mean

N_SEGMENTS = 16
POOLINGS = ("segments16", "halves", "mean")


def _segment_means(x: np.ndarray, k: int) -> np.ndarray:
    """Mean of k equal time segments (k x d); short sequences repeat frames instead of failing."""
    t = x.shape[0]
    edges = np.linspace(0, t, k + 1)
    starts = np.minimum(np.floor(edges[:-1]).astype(int), t - 1)
    stops = np.maximum(np.ceil(edges[1:]).astype(int), starts + 1)
    csum = np.concatenate([np.zeros((1, x.shape[1])), np.cumsum(x, axis=0, dtype=np.float64)])
    return (csum[stops] - csum[starts]) / (stops - starts)[:, None]


def pool(x: np.ndarray, method: str = "segments16") -> np.ndarray:
    """A 1-D float32 vector: vectors pass through, 2-D (time x d) sequences are pooled."""
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        return x
    if x.ndim != 2 or x.shape[0] == 0:
        raise ConfigError(f"cannot pool a stage of shape {x.shape}; expected (time x d) or (d,)")
    if method == "segments16":
        return _segment_means(x, N_SEGMENTS).astype(np.float32).reshape(-1)
    if method == "halves":
        first, second = _segment_means(x, 2)
        return (second - first).astype(np.float32)
    if method == "mean":
        return x.mean(axis=0, dtype=np.float64).astype(np.float32)
    raise ConfigError(
        f"unknown pooling {method!r}{did_you_mean(method, POOLINGS)}; "
        f"choose from {', '.join(POOLINGS)}"
    )

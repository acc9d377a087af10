"""Everything that answers: spec strings -> Listener objects.

    baseline:random[:SEED]  baseline:always-increase  baseline:always-decrease  baseline:ideal
    baseline:shortcut  (answers from cues other than the change over time; needs a train split)
    baseline:one-end  (the dimension's own measure at one end of the clip; needs a train split)
    whisper:tiny.en | whisper:base | whisper:<local HF folder> | whisper:<hub id in local cache>
        (+trimmed: the encoder runs on the clip's frames only, not a 30 s window)
    hf:<local path or hub id in local cache>   (Qwen2-Audio, Qwen2.5-Omni thinker, Audio Flamingo 3,
                                               Voxtral, Gemma 3n, Phi-4-multimodal)
    openai:<model>  (with base_url=...)
    tuned:<run>/adapter  (a `vocalgrad finetune` adapter on its base listener)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vocalgrad.errors import ConfigError
from vocalgrad.listeners.base import Listener, Request

__all__ = ["Listener", "Request", "load_listener"]


def load_listener(spec: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """Resolve a spec string; heavy backends are imported only when asked for."""
    scheme, _, rest = spec.partition(":")
    if scheme == "baseline":
        from vocalgrad.listeners import baselines

        name, _, arg = rest.partition(":")
        if name == "random":
            return baselines.RandomListener(seed=int(arg or 0))
        if name in ("always-increase", "always-decrease"):
            return baselines.ConstantListener(name.removeprefix("always-"))
        if name == "ideal":
            if dataset is None:
                raise ConfigError("baseline:ideal needs the dataset it answers about")
            return baselines.IdealObserver(dataset)
        if name == "shortcut":
            if dataset is None:
                raise ConfigError("baseline:shortcut needs the dataset whose train split it learns from")
            return baselines.ShortcutListener(dataset)
        if name == "one-end":
            if dataset is None:
                raise ConfigError("baseline:one-end needs the dataset whose train split it learns from")
            return baselines.OneEndObserver(dataset)
        raise ConfigError(
            f"unknown baseline {name!r}; use random, always-increase, always-decrease, ideal, shortcut or one-end"
        )
    if scheme == "whisper":
        from vocalgrad.listeners.whisper import WhisperListener

        return WhisperListener(rest, **options)
    if scheme == "hf":
        from vocalgrad.listeners.hf import HFListener

        return HFListener(rest, **options)
    if scheme == "openai":
        from vocalgrad.listeners.openai_api import OpenAIListener

        return OpenAIListener(rest, **options)
    if scheme == "tuned":
        from vocalgrad.remedies.tuned import load_tuned

        return load_tuned(rest, **options)
    raise ConfigError(
        f"unknown listener spec {spec!r}; use baseline:..., whisper:..., hf:..., openai:... or tuned:..."
    )

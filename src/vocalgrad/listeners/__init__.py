"""Everything that answers: spec strings -> Listener objects.

    baseline:random[:SEED]  baseline:always-increase  baseline:always-decrease  baseline:ideal
    baseline:shortcut  (answers from cues other than the change over time; needs a train split)
    baseline:one-end  (the dimension's own measure at one end of the clip; needs a train split)
    whisper:tiny.en | whisper:base | whisper:<local HF folder> | whisper:<hub id in local cache>
        (+trimmed: the encoder runs on the clip's frames only, not a 30 s window;
         +bf16: encoder and decoder under bfloat16 autocast)
    hf:<local path or hub id in local cache>   (Qwen2-Audio, Qwen2.5-Omni thinker, Audio Flamingo 3,
                                               Voxtral, Gemma 3n, Phi-4-multimodal)
    openai:<model>  (with base_url=...)
    tuned:<run>/adapter  (a `vocalgrad finetune` adapter on its base listener)

Each scheme is a family in `vocalgrad.listeners.registry`; plug-ins add more.
"""

from __future__ import annotations

from vocalgrad.listeners.base import Listener, Request
from vocalgrad.listeners.registry import families, load_listener, register, unregister

__all__ = ["Listener", "Request", "families", "load_listener", "register", "unregister"]

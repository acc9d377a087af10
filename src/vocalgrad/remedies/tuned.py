"""Tuning helpers over the listener interface, and `tuned:DIR/adapter` listeners.

A listener is tunable when it declares `can_tune` and implements `tunable_module`,
`output_head` and `option_logprobs` (see `vocalgrad.listeners.base`): Whisper, every
transformers family, `TorchModuleListener` and any plug-in family that does the same. Nothing
here asks which class a listener is.

LoRA targets every `nn.Linear` of the module except the head (peft's "all linear layers").
A tied head (Whisper's `proj_out` shares its weight with the decoder's token embeddings) is
untied before head-only tuning, so only the head changes and the input embeddings keep theirs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from torch import nn

from vocalgrad.errors import CapabilityError, ConfigError
from vocalgrad.listeners import load_listener
from vocalgrad.listeners.base import Listener
from vocalgrad.listeners.registry import ListenerFamily

WEIGHTS_FILE = "tuned.safetensors"  # head / full: the changed parameters, by name
META_FILE = "tuning.json"


def require_tunable(listener: Listener) -> None:
    """Raise `CapabilityError` unless the listener declares `can_tune`."""
    if not listener.can_tune:
        raise CapabilityError(
            f"{listener.listener_id} cannot be tuned: it declares no torch parameters with "
            "differentiable option scores (can_tune)"
        )


def linear_names(listener: Listener) -> list[str]:
    """LoRA targets: qualified names of every `nn.Linear` in `tunable_module` but the head."""
    heads = set(listener.head_names())
    module = listener.tunable_module()
    return [n for n, m in module.named_modules() if isinstance(m, nn.Linear) and n not in heads]


# ---- adapters ---------------------------------------------------------------------------


def adapter_sha256(folder: Path) -> str:
    """Checksum of an adapter folder's weight and config files (not tuning.json)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != META_FILE):
        digest.update(path.name.encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def tuned_id(base_id: str, method: str, categories: Sequence[str], sha: str) -> str:
    """E.g. `whisper:tiny.en+lora[volume]@1a2b3c4d`: never equal to the base's id."""
    return f"{base_id}+{method}[{','.join(categories)}]@{sha[:8]}"


def apply_adapter(listener: Listener, folder: Path, method: str) -> None:
    """Load saved tuned weights onto a freshly loaded base listener, in place.

    Parameters
    ----------
    listener : Listener
        The base listener the adapter was tuned from (`can_tune`).
    folder : Path
        An adapter folder written by `vocalgrad finetune` (OUT/adapter).
    method : {"head", "lora", "full"}
        How it was tuned (tuning.json's ``method``).

    Raises
    ------
    CapabilityError
        When the listener is not tunable.
    ConfigError
        When the saved weights name parameters the model lacks.
    """
    require_tunable(listener)
    module = listener.tunable_module()
    if method == "lora":
        from peft import PeftModel

        PeftModel.from_pretrained(module, str(folder))  # injects the LoRA layers in place
    else:
        from safetensors.torch import load_file

        if method == "head":
            listener.untie_head()
        missing, unexpected = module.load_state_dict(load_file(str(folder / WEIGHTS_FILE)), strict=False)
        if unexpected:
            raise ConfigError(f"{folder}: weights for parameters the model lacks: {unexpected[:5]}")
    module.eval()


def load_tuned(path: str | Path, **options: Any) -> Listener:
    """`tuned:DIR/adapter`: the base listener named in tuning.json with the adapter applied.

    Parameters
    ----------
    path : str or Path
        An adapter folder, or the finetune run folder holding it.
    **options
        Passed to the base listener's factory (e.g. ``device``).

    Returns
    -------
    Listener
        The base listener, tuned, with the tuned id and revision.

    Raises
    ------
    ConfigError
        When the folder holds no tuning record, its files changed since tuning, or the base
        spec now resolves to another revision than the one tuned.
    """
    folder = Path(path).expanduser()
    if (folder / "adapter" / META_FILE).is_file():  # the run folder given instead of its adapter
        folder = folder / "adapter"
    if not (folder / META_FILE).is_file():
        raise ConfigError(f"{folder}: no {META_FILE}; point tuned: at a `vocalgrad finetune` adapter folder")
    meta = json.loads((folder / META_FILE).read_text())
    sha = adapter_sha256(folder)
    if sha != meta["adapter_sha256"]:
        raise ConfigError(f"{folder}: adapter files changed since tuning (checksum {sha[:12]} != recorded)")
    listener = load_listener(meta["base"]["spec"], **options)
    if listener.revision != meta["base"]["revision"]:
        raise ConfigError(
            f"{folder} was tuned from {meta['base']['listener_id']} revision {meta['base']['revision']}, "
            f"but {meta['base']['spec']} now resolves to revision {listener.revision}"
        )
    apply_adapter(listener, folder, meta["method"])
    listener.listener_id = tuned_id(listener.listener_id, meta["method"], meta["train_categories"], sha)
    listener.revision = sha[:12]
    return listener


def _load(rest: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """The `tuned:` listener family, registered like every other family."""
    return load_tuned(rest, **options)


from_spec = ListenerFamily(_load, wants_gpu=True)
"""The `tuned:` listener family, registered like every other family (its bases, `whisper:` and
`hf:` models, want an accelerator)."""

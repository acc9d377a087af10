"""What makes a listener tunable, and `tuned:DIR/adapter` listeners.

A listener is tunable when three things are known about it, all implemented here for
`WhisperListener`, `HFListener` (every transformers family the harness supports) and
`TorchModuleListener` (planted organisms):

- `tunable_module(listener)`: the torch module whose parameters change;
- `head_names(listener)`: the output head (the LM projection to the vocabulary, or the
  organism's readout head), what `--method head` trains and what LoRA leaves alone;
- `option_logprobs(listener, requests)`: the summed log-likelihood of each answer option, the
  quantity `score_choices` reports, but differentiable (one row per request, options in the
  prompt's order). It reuses each listener's own prompt encoding and position arithmetic, so
  training asks the model exactly what `eval` asks it (the tests check equality in eval mode).

LoRA targets every `nn.Linear` of the module except the head (peft's "all linear layers").
A tied head (Whisper's `proj_out` shares its weight with the decoder's token embeddings) is
untied before head-only tuning, so only the head changes and the input embeddings keep theirs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from vocalgrad.errors import ConfigError
from vocalgrad.listeners import load_listener
from vocalgrad.listeners.base import Listener, Request

WEIGHTS_FILE = "tuned.safetensors"  # head / full: the changed parameters, by name
META_FILE = "tuning.json"


def _kind(listener: Listener) -> str:
    """Which implementation applies; imports stay lazy so no backend loads unasked."""
    name = type(listener).__name__
    if name in ("WhisperListener", "HFListener", "TorchModuleListener"):
        return name
    raise ConfigError(
        f"{listener.listener_id} cannot be tuned: only whisper:, hf: and torch-module listeners can"
    )


def tunable_module(listener: Listener) -> nn.Module:
    """The torch module whose parameters tuning changes."""
    return listener.module if _kind(listener) == "TorchModuleListener" else listener.model  # type: ignore[attr-defined]


def head_names(listener: Listener) -> list[str]:
    """Qualified names (inside `tunable_module`) of the output head's modules."""
    module = tunable_module(listener)
    kind = _kind(listener)
    if kind == "WhisperListener":
        head = module.proj_out
    elif kind == "HFListener":
        head = module.get_output_embeddings()
    else:
        head = listener.lens_head  # type: ignore[attr-defined]
    names = [n for n, m in module.named_modules() if m is head]
    if not names:
        raise ConfigError(f"{listener.listener_id}: its output head is not a module of the model")
    return names


def linear_names(listener: Listener) -> list[str]:
    """LoRA targets: every linear layer except the head."""
    heads = set(head_names(listener))
    module = tunable_module(listener)
    return [n for n, m in module.named_modules() if isinstance(m, nn.Linear) and n not in heads]


def untie_head(listener: Listener) -> bool:
    """Give the head its own weight when it shares one with another module; True if it did."""
    module = tunable_module(listener)
    shared = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        shared.setdefault(id(p), []).append(name)
    untied = False
    for head in head_names(listener):
        sub = module.get_submodule(head)
        for pname, p in list(sub.named_parameters(recurse=False)):
            if len(shared[id(p)]) > 1:
                setattr(sub, pname, nn.Parameter(p.detach().clone(), requires_grad=p.requires_grad))
                untied = True
    config = getattr(module, "config", None)
    if untied and config is not None and hasattr(config, "tie_word_embeddings"):
        config.tie_word_embeddings = False  # transformers must not tie them back
    return untied


# ---- differentiable option log-likelihoods ------------------------------------------------


def option_logprobs(listener: Listener, requests: Sequence[Request]) -> torch.Tensor:
    """(requests x options) summed log p of each option's tokens, with grad; the requests of
    one call must have equally many options."""
    kind = _kind(listener)
    if not requests:
        return torch.zeros(0, 0)
    if len({len(r.prompt.options) for r in requests}) > 1:
        raise ConfigError("option_logprobs: ask requests with equally many answer options together")
    if kind == "WhisperListener":
        return torch.stack(listener.option_logprobs(requests))  # type: ignore[attr-defined]
    if kind == "HFListener":
        return _hf_logprobs(listener, requests)
    return _torch_logprobs(listener, requests)


def _hf_logprobs(listener: Any, requests: Sequence[Request], read: list | None = None) -> torch.Tensor:
    """As `HFListener.score_choices`: each option written as the assistant's reply, rows
    right-padded, the option's tokens read at the positions before them (appended to `read`
    as (row, positions, tokens) when given)."""
    rows = [(r, o) for r in requests for o in r.prompt.options]
    enc = listener._encode([r for r, _ in rows], [o for _, o in rows], "right")
    logits = listener.model(**listener._to_device(enc.inputs), use_cache=False).logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    ids = enc.inputs["input_ids"]
    scores = []
    for k, (request, option) in enumerate(rows):
        n_opt = listener._reply_ids(request, option)
        end = enc.lengths[k]
        positions = torch.arange(end - n_opt, end)
        picked = logp[k, positions - 1].gather(-1, ids[k, positions].to(logp.device)[:, None])
        scores.append(picked.sum())
        if read is not None:
            read.append((k, positions - 1, ids[k, positions]))
    return torch.stack(scores).reshape(len(requests), -1).cpu()


def _torch_logprobs(listener: Any, requests: Sequence[Request]) -> torch.Tensor:
    """As `TorchModuleListener.score_choices`: log-softmax over the readout's two logits."""
    from vocalgrad.listeners.adapters import OPTIONS

    out = []
    for r in requests:
        logits = torch.as_tensor(listener.readout(listener.module(listener._inputs(r)))).reshape(-1)[:2]
        lp = torch.log_softmax(logits.float(), -1)
        out.append(torch.stack([lp[OPTIONS.index(o)] for o in r.prompt.options]))
    return torch.stack(out)


# ---- the head's inputs, read once -------------------------------------------------------


@dataclass
class HeadInputs:
    """What the frozen trunk hands the head when it scores a set of requests' options.

    With only the head trainable, these never change, so head-only tuning reads them once and
    trains on them alone (`score_head_inputs`) instead of running the model every step."""

    states: torch.Tensor  # (n, d): the head's input at each position that scores an option token
    tokens: torch.Tensor  # (n,): the output index each position scores
    slot: torch.Tensor  # (n,): its (request, option), request-major
    shape: tuple[int, int]  # (requests, options)
    reference: torch.Tensor  # (requests, options): the whole model's option scores

    def requests(self, start: int, stop: int) -> HeadInputs:
        """The part that belongs to requests start..stop-1."""
        n = self.shape[1]
        keep = (self.slot >= start * n) & (self.slot < stop * n)
        return HeadInputs(self.states[keep], self.tokens[keep], self.slot[keep] - start * n,
                          (stop - start, n), self.reference[start:stop])

    @staticmethod
    def concat(parts: Sequence[HeadInputs]) -> HeadInputs:
        """One batch from several, requests in the order given."""
        offsets = np.cumsum([0] + [p.shape[0] * p.shape[1] for p in parts])
        return HeadInputs(
            torch.cat([p.states for p in parts]), torch.cat([p.tokens for p in parts]),
            torch.cat([p.slot + int(o) for p, o in zip(parts, offsets, strict=False)]),
            (sum(p.shape[0] for p in parts), parts[0].shape[1]), torch.cat([p.reference for p in parts]),
        )


def _head_module(listener: Listener) -> nn.Module:
    return tunable_module(listener).get_submodule(head_names(listener)[0])


def _capture_head_input(listener: Listener) -> tuple[list[torch.Tensor], Any]:
    """A forward pre-hook on the head that keeps every input it is called with."""
    seen: list[torch.Tensor] = []
    handle = _head_module(listener).register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    return seen, handle


@torch.no_grad()
def head_inputs(listener: Listener, requests: Sequence[Request]) -> HeadInputs:
    """The head's inputs for the requests' options, read in one pass of the model as it is
    (with the scores the whole model gives, to check `score_head_inputs` against: a model
    that transforms its logits after the head, such as Gemma's soft-capping, fails that check)."""
    kind = _kind(listener)
    n_options = len(requests[0].prompt.options)
    states, tokens, slots = [], [], []
    if kind == "WhisperListener":  # its scores are `proj_out` on these states by construction
        for b, options in enumerate(listener.option_states(requests)):  # type: ignore[attr-defined]
            for o, (h, toks) in enumerate(options):
                states.append(h)
                tokens += toks
                slots += [b * n_options + o] * len(toks)
        reference = None
    elif kind == "HFListener":
        seen, handle = _capture_head_input(listener)
        read: list = []
        try:
            reference = _hf_logprobs(listener, requests, read)
        finally:
            handle.remove()
        for k, before, toks in read:
            states.append(seen[-1][k, before])
            tokens += toks.tolist()
            slots += [k] * len(toks)
    else:
        from vocalgrad.listeners.adapters import OPTIONS

        seen, handle = _capture_head_input(listener)
        try:
            reference = _torch_logprobs(listener, requests)
        finally:
            handle.remove()
        for b, request in enumerate(requests):
            for o, option in enumerate(request.prompt.options):
                states.append(seen[b].reshape(1, -1))
                tokens.append(OPTIONS.index(option))
                slots.append(b * n_options + o)
    device = next(_head_module(listener).parameters()).device
    inputs = HeadInputs(torch.cat(states).to(device), torch.tensor(tokens, device=device),
                        torch.tensor(slots, device=device), (len(requests), n_options), torch.empty(0))
    inputs.reference = (score_head_inputs(listener, inputs) if reference is None else reference).detach().cpu()
    return inputs


def score_head_inputs(listener: Listener, inputs: HeadInputs) -> torch.Tensor:
    """(requests x options) summed log p of each option's tokens from the head alone, with
    grad: what `option_logprobs` gives while everything but the head is frozen."""
    logits = _head_module(listener)(inputs.states).float()
    picked = torch.log_softmax(logits, dim=-1).gather(-1, inputs.tokens[:, None])[:, 0]
    total = torch.zeros(inputs.shape[0] * inputs.shape[1], device=picked.device).index_add(0, inputs.slot, picked)
    return total.reshape(inputs.shape).cpu()


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
    """Load saved tuned weights onto a freshly loaded base listener, in place."""
    module = tunable_module(listener)
    if method == "lora":
        from peft import PeftModel

        PeftModel.from_pretrained(module, str(folder))  # injects the LoRA layers in place
    else:
        from safetensors.torch import load_file

        if method == "head":
            untie_head(listener)
        missing, unexpected = module.load_state_dict(load_file(str(folder / WEIGHTS_FILE)), strict=False)
        if unexpected:
            raise ConfigError(f"{folder}: weights for parameters the model lacks: {unexpected[:5]}")
    module.eval()


def load_tuned(path: str | Path, **options: Any) -> Listener:
    """`tuned:DIR/adapter`: the base listener named in tuning.json with the adapter applied."""
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


def from_spec(rest: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """The `tuned:` listener family, registered like every other family."""
    return load_tuned(rest, **options)

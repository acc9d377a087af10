"""Torch pieces shared by tunable listeners: the head's inputs read once, and untying a head.

A listener that declares `can_tune` implements `option_logprobs`; where it can also say which
head-input rows score which option tokens, it returns them from `head_inputs` as a
`HeadInputs`, and head-only tuning trains on those alone instead of running the frozen trunk
every step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass
class HeadInputs:
    """What the frozen trunk hands the head when it scores a set of requests' options.

    With only the head trainable, these never change, so head-only tuning reads them once and
    trains on them alone (`score`) instead of running the model every step.

    Attributes
    ----------
    states : torch.Tensor
        Shape (n, d): the head's input at each position that scores an option token.
    tokens : torch.Tensor
        Shape (n,), int: the output index each position scores.
    slot : torch.Tensor
        Shape (n,), int: the (request, option) each position belongs to, request-major
        (request * options + option).
    shape : (int, int)
        (requests, options).
    reference : torch.Tensor
        Shape (requests, options): the whole model's option scores (nats), to check `score`
        against (a model that transforms its logits after the head fails that check).
    """

    states: torch.Tensor
    tokens: torch.Tensor
    slot: torch.Tensor
    shape: tuple[int, int]
    reference: torch.Tensor

    def requests(self, start: int, stop: int) -> HeadInputs:
        """The part that belongs to requests start..stop-1."""
        n = self.shape[1]
        keep = (self.slot >= start * n) & (self.slot < stop * n)
        return HeadInputs(
            self.states[keep],
            self.tokens[keep],
            self.slot[keep] - start * n,
            (stop - start, n),
            self.reference[start:stop],
        )

    @staticmethod
    def concat(parts: Sequence[HeadInputs]) -> HeadInputs:
        """One batch from several, requests in the order given."""
        offsets = np.cumsum([0] + [p.shape[0] * p.shape[1] for p in parts])
        return HeadInputs(
            torch.cat([p.states for p in parts]),
            torch.cat([p.tokens for p in parts]),
            torch.cat([p.slot + int(o) for p, o in zip(parts, offsets, strict=False)]),
            (sum(p.shape[0] for p in parts), parts[0].shape[1]),
            torch.cat([p.reference for p in parts]),
        )

    def score(self, head: nn.Module) -> torch.Tensor:
        """Summed log p (nats) of each option's tokens from `head` alone, with grad: what
        `option_logprobs` gives while everything but the head is frozen.

        Returns
        -------
        torch.Tensor
            Shape `shape` = (requests, options), on the CPU.
        """
        logits = head(self.states).float()
        picked = torch.log_softmax(logits, dim=-1).gather(-1, self.tokens[:, None])[:, 0]
        n = self.shape[0] * self.shape[1]
        total = torch.zeros(n, device=picked.device).index_add(0, self.slot, picked)
        return total.reshape(self.shape).cpu()


def gather(
    head: nn.Module,
    states: Sequence[torch.Tensor],
    tokens: Sequence[int],
    slots: Sequence[int],
    shape: tuple[int, int],
    reference: torch.Tensor | None,
) -> HeadInputs:
    """A `HeadInputs` on the head's device from per-option pieces; `reference` None: the
    head's own scores (for a listener whose option scores are the head on these states by
    construction)."""
    device = next(head.parameters()).device
    inputs = HeadInputs(
        torch.cat(list(states)).to(device),
        torch.tensor(list(tokens), device=device),
        torch.tensor(list(slots), device=device),
        shape,
        torch.empty(0),
    )
    inputs.reference = (inputs.score(head) if reference is None else reference).detach().cpu()
    return inputs


@contextmanager
def head_input_recorder(head: nn.Module) -> Iterator[list[torch.Tensor]]:
    """Within the block, every input `head` is called with is appended (detached) to the
    yielded list, by a forward pre-hook removed on exit."""
    seen: list[torch.Tensor] = []
    handle = head.register_forward_pre_hook(lambda _m, args: seen.append(args[0].detach()))
    try:
        yield seen
    finally:
        handle.remove()


def untie(module: nn.Module, head_names: Sequence[str]) -> bool:
    """Give every parameter of the named head modules that is shared with another module a
    copy of its own; True if any was shared."""
    shared: dict[int, list[str]] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        shared.setdefault(id(p), []).append(name)
    untied = False
    for head in head_names:
        sub = module.get_submodule(head)
        for pname, p in list(sub.named_parameters(recurse=False)):
            if len(shared[id(p)]) > 1:
                setattr(sub, pname, nn.Parameter(p.detach().clone(), requires_grad=p.requires_grad))
                untied = True
    return untied

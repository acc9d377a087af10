"""What a listener is: anything that answers benchmark items (models, baselines, people).

The interface follows lm-evaluation-harness: one batched method for free-text generation,
one for scoring fixed answer options by log-likelihood, and (where the model allows it)
hidden states by named stage for probing. Prompts are built once in `vocalgrad.questions.prompts`;
a listener only turns a `Prompt` into its own input format, so every model sees the same
words.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from vocalgrad.questions.prompts import Prompt


@dataclass(frozen=True)
class Request:
    """One question about one clip.

    `audio` maps every item id the prompt's turns refer to (the clip under test and any
    few-shot examples) to float32 audio at the listener's sample rate: mono (samples,), or
    (samples, 2) for a two-channel clip given to a listener with `channels` = 2. A value of None
    means "ask without audio" (the text-only control that measures the textual prior).
    """

    item_id: str
    prompt: Prompt
    audio: Mapping[str, np.ndarray | None] = field(default_factory=dict)
    source_id: str | None = None  # the unprocessed source, for listeners that compare to it

    @property
    def target_audio(self) -> np.ndarray | None:
        return self.audio.get(self.item_id)


class Listener(ABC):
    """Base class. Subclasses set `listener_id`, `revision` and `sample_rate`."""

    listener_id: str = "listener"
    revision: str = "unversioned"
    sample_rate: int = 16000
    can_score: bool = False  # True when score_choices gives real log-likelihoods
    # Channels the listener hears: 1 = it gets (and its model takes) a mono downmix, so a
    # dimension that lives between the ears (stereo direction) cannot be tested on it.
    channels: int = 1

    @abstractmethod
    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """Free-text answers, one per request, greedy decoding."""

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        """Total log-likelihood of each answer option given the request (option -> log p)."""
        raise NotImplementedError(f"{self.listener_id} cannot score answer options by likelihood")

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        """Per request, stage name -> array (time x features, or features) for probing."""
        raise NotImplementedError(f"{self.listener_id} exposes no hidden states")

    def manifest(self) -> dict:
        """What identifies this listener's answers: goes into run manifests and cache keys."""
        return {"listener": self.listener_id, "revision": self.revision, "sample_rate": self.sample_rate}

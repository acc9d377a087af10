"""What a listener is: anything that answers benchmark items (models, baselines, people).

The interface follows lm-evaluation-harness: one batched method for free-text generation,
one for scoring fixed answer options by log-likelihood, and (where the model allows it)
hidden states by named stage for probing. Prompts are built once in `vocalgrad.questions.prompts`;
a listener only turns a `Prompt` into its own input format, so every model sees the same
words.

Capabilities are part of the interface: each listener declares what it can do with the
``can_*`` flags and implements the methods each flag names. Evaluation, probing, the lens and
tuning read the flags and call the methods; they never ask which class a listener is, so a new
model family (a plug-in registered under ``vocalgrad.listeners``) is tunable and probeable by
implementing these methods in its own module. A method a listener does not implement raises
`CapabilityError` with its id.

========================  ==============================================================
flag                      methods it promises
========================  ==============================================================
``can_generate``          `generate`
``can_score``             `score_choices`
``can_probe``             `hidden_states` (and `with_random_weights` where it can)
``can_lens``              `answer_lens`, with `lens_stages` naming its layers when known
``can_tune``              `tunable_module`, `output_head`, `option_logprobs`
                          (`head_names`, `untie_head` and `head_inputs` have defaults)
========================  ==============================================================
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad.errors import CapabilityError, ConfigError
from vocalgrad.questions.prompts import Prompt

if TYPE_CHECKING:
    import torch
    from torch import nn

    from vocalgrad.listeners.tuning import HeadInputs


@dataclass(frozen=True)
class Request:
    """One question about one clip.

    `audio` maps every item id the prompt's turns refer to (the clip under test and any
    few-shot examples) to float32 audio at the listener's sample rate: mono (samples,), or
    (samples, 2) for a two-channel clip given to a listener with `channels` = 2. A value of None
    means "ask without audio" (the text-only control that measures the textual prior).

    Attributes
    ----------
    item_id : str
        The dataset row's id of the clip under test.
    prompt : Prompt
        The question, its answer options and its turns (built by
        `vocalgrad.questions.prompts`), the same words for every listener.
    audio : Mapping of str to (ndarray or None)
        Item id -> float32 audio in [-1, 1] at the listener's `sample_rate`: shape
        (samples,), or (samples, 2) for a two-channel clip to a two-channel listener; None
        for the text-only control.
    source_id : str or None
        The unprocessed source's id, for listeners that compare the clip with it (the ideal
        observer); None where not given.
    """

    item_id: str
    prompt: Prompt
    audio: Mapping[str, np.ndarray | None] = field(default_factory=dict)
    source_id: str | None = None  # the unprocessed source, for listeners that compare to it

    @property
    def target_audio(self) -> np.ndarray | None:
        """The clip under test, or None for the text-only control."""
        return self.audio.get(self.item_id)


def option_count(requests: Sequence[Request]) -> int:
    """How many answer options every request has (0 for no requests).

    Parameters
    ----------
    requests : sequence of Request
        The requests of one batch.

    Returns
    -------
    int
        The number of answer options each prompt offers; 0 when `requests` is empty.

    Raises
    ------
    ConfigError
        When the requests differ in their number of options: option scores of one call form
        a (requests x options) matrix.
    """
    counts = {len(r.prompt.options) for r in requests}
    if len(counts) > 1:
        raise ConfigError("option_logprobs: ask requests with equally many answer options together")
    return counts.pop() if counts else 0


class Listener(ABC):
    """Base class. Subclasses set `listener_id`, `revision` and `sample_rate`, and the
    capability flags of what they implement (see the module docstring).

    Attributes
    ----------
    listener_id : str
        The listener's id, as runs and results name it (``baseline:random``, a model id).
    revision : str
        What version of it answered (a model's weights revision); part of every answer-cache
        key.
    sample_rate : int
        The rate, Hz, the listener takes its audio at: requests carry audio resampled to it.
    channels : int
        Channels it hears: 1 gets (and its model takes) a mono downmix, so a dimension that
        lives between the ears cannot be tested on it; 2 gets two-channel clips as
        (samples, 2).
    can_generate : bool
        `generate` answers in free text.
    can_score : bool
        `score_choices` gives real log-likelihoods.
    can_probe : bool
        `hidden_states` gives named stages.
    can_lens : bool
        `answer_lens` reads the answer off every layer.
    can_tune : bool
        It has torch parameters and a differentiable `option_logprobs`.
    wants_gpu : bool
        It runs far faster on an accelerator.
    lens_stages : list of str or None
        The stage name of each lens layer, in depth order; None: its ``@answer`` stages.
    fitted_on : str or None
        A hash of the data it learnt from or reads while answering (a baseline fitted on a
        dataset's train split: `vocalgrad.dataset.content_sha256`); part of `manifest` and of
        every answer-cache key. None for a listener that reads no data.
    """

    listener_id: str = "listener"
    revision: str = "unversioned"
    sample_rate: int = 16000
    # Channels the listener hears: 1 = it gets (and its model takes) a mono downmix, so a
    # dimension that lives between the ears (stereo direction) cannot be tested on it.
    channels: int = 1
    can_generate: bool = True  # `generate` answers in free text
    can_score: bool = False  # `score_choices` gives real log-likelihoods
    can_probe: bool = False  # `hidden_states` gives named stages
    can_lens: bool = False  # `answer_lens` reads the answer off every layer
    can_tune: bool = False  # torch parameters and differentiable `option_logprobs`
    wants_gpu: bool = False  # a model that runs far faster on an accelerator
    lens_stages: list[str] | None = None  # the stage of each lens layer; None: the `@answer` stages
    # A hash of the data the listener learnt from or reads while answering (a baseline fitted
    # on a dataset's train split: `vocalgrad.dataset.content_sha256`): answers of the same
    # clip differ when it differs, so it is part of `manifest` and of every answer-cache key.
    fitted_on: str | None = None

    def _unable(self, what: str) -> CapabilityError:
        return CapabilityError(f"{self.listener_id} cannot {what}; choose a listener that can")

    # ---- answering --------------------------------------------------------------------

    @abstractmethod
    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """Free-text answers, one per request, greedy decoding.

        Parameters
        ----------
        requests : sequence of Request
            The questions, each with its clip(s) at `sample_rate`.
        max_new_tokens : int
            Most tokens (or words, for a non-model listener) to produce per answer.

        Returns
        -------
        list of str
            One answer per request, in request order.
        """

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        """Total log-likelihood of each answer option given the request.

        Parameters
        ----------
        requests : sequence of Request
            The questions, each with its clip(s) at `sample_rate`.

        Returns
        -------
        list of dict
            Per request, option -> summed natural-log probability of its tokens (<= 0).

        Raises
        ------
        CapabilityError
            When the listener does not declare `can_score`.
        """
        raise self._unable("score answer options by likelihood")

    # ---- probing ----------------------------------------------------------------------

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        """Internal states by named stage, for probing.

        Parameters
        ----------
        requests : sequence of Request
            The questions, each with its clip(s) at `sample_rate`.

        Returns
        -------
        list of dict
            Per request, stage name -> float array of shape (time, features) for a sequence
            stage or (features,) for one position (e.g. ``decoder.3@answer``).

        Raises
        ------
        CapabilityError
            When the listener does not declare `can_probe`.
        """
        raise self._unable("expose hidden states")

    def answer_lens(
        self,
        requests: Sequence[Request],
        options: tuple[str, str] | None = None,
        states: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> list[np.ndarray]:
        """Logit lens: the model's own head read off every layer's answer-position state.

        Parameters
        ----------
        requests : sequence of Request
            The questions.
        options : (str, str), optional
            The two options A and B compared; default: each prompt's first two.
        states : sequence of dict, optional
            `hidden_states` of these same requests, already computed: a listener may read the
            lens from them instead of running its model again.

        Returns
        -------
        list of ndarray
            Per request, shape (layers,): log p(A) - log p(B) of the options' first tokens
            (nats), one value per lens layer in depth order.

        Raises
        ------
        CapabilityError
            When the listener does not declare `can_lens`.
        """
        raise self._unable("read a logit lens")

    def with_random_weights(self, seed: int = 0) -> Listener:
        """The same architecture with every parameter re-drawn by its layer's initialiser:
        the control that shows what a probe finds without training.

        Parameters
        ----------
        seed : int
            Seeds the re-drawn weights: the same seed gives the same listener.

        Returns
        -------
        Listener
            A new listener whose `revision` differs from this one's (its features cache apart).

        Raises
        ------
        CapabilityError
            When the listener has no weights to re-draw.
        """
        raise self._unable("be re-initialised with random weights")

    # ---- tuning -----------------------------------------------------------------------

    def tunable_module(self) -> nn.Module:
        """The torch module whose parameters tuning changes.

        Returns
        -------
        torch.nn.Module
            The model itself (not a copy): tuning changes its parameters in place.

        Raises
        ------
        CapabilityError
            When the listener does not declare `can_tune`.
        """
        raise self._unable("be tuned")

    def output_head(self) -> nn.Module:
        """The output head inside `tunable_module` (the projection to the vocabulary or to
        the answer logits): what ``--method head`` trains and LoRA leaves alone.

        Returns
        -------
        torch.nn.Module
            A module of `tunable_module` (the same object, not a copy).

        Raises
        ------
        CapabilityError
            When the listener does not declare `can_tune`.
        """
        raise self._unable("be tuned")

    def option_logprobs(self, requests: Sequence[Request]) -> torch.Tensor:
        """`score_choices` as a differentiable tensor: tuning's training signal.

        Parameters
        ----------
        requests : sequence of Request
            Requests with equally many answer options (see `option_count`).

        Returns
        -------
        torch.Tensor
            Shape (requests, options), float, on the CPU, with grad where parameters require
            it: the summed log p (nats) of each option's tokens, options in prompt order. In
            eval mode it equals `score_choices` to float precision.

        Raises
        ------
        ConfigError
            When the requests differ in their number of options.
        CapabilityError
            When the listener does not declare `can_tune`.
        """
        raise self._unable("be tuned")

    def head_names(self) -> list[str]:
        """Qualified names, inside `tunable_module`, of the modules that are the output head.

        Returns
        -------
        list of str
            Every name under which `output_head` appears in ``tunable_module().named_modules()``
            (more than one where it is shared).

        Raises
        ------
        ConfigError
            When `output_head` is not a module of `tunable_module`.
        """
        module, head = self.tunable_module(), self.output_head()
        names = [n for n, m in module.named_modules() if m is head]
        if not names:
            raise ConfigError(f"{self.listener_id}: its output head is not a module of the model")
        return names

    def untie_head(self) -> bool:
        """Give the head its own weights where it shares them with another module (a tied
        embedding), so head-only tuning changes the head alone.

        Returns
        -------
        bool
            True when some head parameter was shared and is now a copy of its own.
        """
        from vocalgrad.listeners.tuning import untie

        return untie(self.tunable_module(), self.head_names())

    def head_inputs(self, requests: Sequence[Request]) -> HeadInputs | None:
        """What the frozen trunk hands the head when it scores the requests' options, read
        in one pass, so head-only tuning can train on them without running the model.

        Parameters
        ----------
        requests : sequence of Request
            Requests with equally many answer options (see `option_count`).

        Returns
        -------
        HeadInputs or None
            None (the default) when the listener cannot say which head positions score which
            option tokens: tuning then runs the whole model every step, which is slower but
            the same objective.
        """
        return None

    def usage(self) -> dict[str, Any] | None:
        """What answering has cost so far, for a listener that pays per request, or None.

        A run records the growth of this tally over each batch in its manifest (``usage``)
        and prints it, so an API run's tokens and cost are never only in memory.

        Returns
        -------
        dict or None
            Counts that only grow (e.g. ``requests``, ``prompt_tokens``, ``audio_tokens``,
            ``completion_tokens``, ``retries``) and ``cost_usd`` (USD, None without prices);
            None: this listener tallies nothing (the default).
        """
        return None

    # ---- identity ---------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """The capability flags and channel count, e.g. for a stand-in of a remote listener.

        Returns
        -------
        dict
            ``channels``, ``can_generate``, ``can_score``, ``can_probe``, ``can_lens``,
            ``can_tune``, ``wants_gpu`` and ``lens_stages``, as the attributes hold them.
        """
        return {
            "channels": self.channels,
            "can_generate": self.can_generate,
            "can_score": self.can_score,
            "can_probe": self.can_probe,
            "can_lens": self.can_lens,
            "can_tune": self.can_tune,
            "wants_gpu": self.wants_gpu,
            "lens_stages": self.lens_stages,
        }

    def manifest(self) -> dict:
        """What identifies this listener's answers: goes into run manifests and answer-cache
        keys, so it must name everything its answers depend on besides the request itself
        (weights revision, decoding settings, options that change answers, and `fitted_on`).

        Returns
        -------
        dict
            ``listener``, ``revision``, ``sample_rate`` (Hz), plus ``fitted_on`` where set.
        """
        return {
            "listener": self.listener_id,
            "revision": self.revision,
            "sample_rate": self.sample_rate,
            **({"fitted_on": self.fitted_on} if self.fitted_on else {}),
        }

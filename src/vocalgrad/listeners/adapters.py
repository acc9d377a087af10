"""Adapters that make things probe-able: any torch module, plain DSP features, random weights.

Register any torch module (your own model, a checkpoint you load yourself) with
`TorchModuleListener`: name the submodules whose outputs are stages, give a readout that turns
the model output into logits for ("increase", "decrease"), and, for a lens, a head that does
the same for one answer-position state:

    listener = TorchModuleListener(
        model, stages={"frames": "encoder.block2", "answer": model.pool},
        readout=lambda out: out, lens_head=model.head, preprocess=my_log_mel,
    )
    probe_rows(rows, listener, out="probe-out")

Outputs are read by forward hooks in one pass per item: a hooked output of shape (1, time, d)
becomes a sequence stage (pooled later), (1, d) an answer-position vector.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from vocalgrad.errors import AudioError, ConfigError
from vocalgrad.listeners.base import Listener, Request, option_count
from vocalgrad.records import LABELS

OPTIONS = LABELS


def _reinit(module: Any, seed: int) -> None:
    """Re-draw every parameter with the layer's own initialiser (reset_parameters)."""
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for sub in module.modules():
            reset = getattr(sub, "reset_parameters", None)
            if callable(reset):
                reset()


def randomised(listener: Listener, seed: int = 0) -> Listener:
    """The same architecture with random weights (a control): `Listener.with_random_weights`.

    Raises
    ------
    CapabilityError
        When the listener has no weights to re-draw (a ConfigError: callers warn and go on).
    """
    return listener.with_random_weights(seed)


def random_twin(listener: Any, seed: int = 0) -> Any:
    """A shallow copy of a listener that keeps its network in `.model`, with a deep copy of
    that network re-drawn and a revision of its own (so its features cache apart)."""
    twin = copy.copy(listener)
    twin.model = copy.deepcopy(listener.model)
    _reinit(twin.model, seed)
    twin.revision = f"{listener.revision}+random{seed}"
    return twin


def _state_hash(module: Any) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


class TorchModuleListener(Listener):
    """A torch module as a listener: stages from forward hooks, answers from a readout.

    It scores, probes and tunes; it has a lens when given `lens_head`, which is also the
    output head tuning trains with ``--method head``.

    Parameters
    ----------
    module : torch.nn.Module
        The model; called on one item's input with a leading batch axis of 1.
    stages : mapping of str to str or module
        Stage name -> the submodule (or its qualified name) whose output is that stage.
    readout : callable
        Model output -> logits whose first two are (increase, decrease).
    lens_head : callable, optional
        One answer-position state -> the same two logits; a submodule of `module` for
        head-only tuning.
    lens_stages : sequence of str, optional
        The stages the lens reads, in depth order; default every one-position stage.
    preprocess : callable, optional
        Audio (samples,) -> the module's input for one item (e.g. a log-mel).
    name : str
        The listener id is ``torch:NAME``.
    sample_rate : int
        Hz of the audio it is given.
    random_weights : bool
        Re-draw the module's parameters first (seeded by `seed`).
    """

    can_score = True
    can_probe = True
    can_tune = True

    def __init__(
        self,
        module: Any,
        stages: Mapping[str, Any],
        readout: Callable[[Any], Any],
        *,
        lens_head: Callable[[Any], Any] | None = None,
        lens_stages: Sequence[str] | None = None,
        preprocess: Callable[[np.ndarray], np.ndarray] | None = None,
        name: str = "module",
        sample_rate: int = 16000,
        random_weights: bool = False,
        seed: int = 0,
    ) -> None:
        if random_weights:
            module = copy.deepcopy(module)
            _reinit(module, seed)
        self.module = module.eval()
        self.stage_modules = {
            k: module.get_submodule(v) if isinstance(v, str) else v for k, v in stages.items()
        }
        self._stage_specs = dict(stages)
        self.readout = readout
        self.lens_head = lens_head
        self.can_lens = lens_head is not None
        self.lens_stages = list(lens_stages) if lens_stages is not None else None
        self.preprocess = preprocess
        self.listener_id = f"torch:{name}"
        self.sample_rate = sample_rate
        self.revision = _state_hash(module)
        self._init = {
            "name": name,
            "sample_rate": sample_rate,
            "lens_head": lens_head,
            "lens_stages": lens_stages,
            "preprocess": preprocess,
            "readout": readout,
        }

    def _inputs(self, request: Request) -> Any:
        import torch

        audio = request.target_audio
        if audio is None:
            raise ConfigError(f"{self.listener_id} needs audio (item {request.item_id})")
        x = self.preprocess(audio) if self.preprocess else audio
        return torch.as_tensor(np.asarray(x, np.float32))[None]

    def _forward(self, request: Request) -> tuple[Any, dict[str, np.ndarray]]:
        import torch

        store: dict[str, np.ndarray] = {}
        handles = []
        for key, sub in self.stage_modules.items():

            def hook(_m: Any, _a: Any, out: Any, key: str = key) -> None:
                t = out[0] if isinstance(out, tuple) else out
                store[key] = t.detach().float().cpu().numpy()[0].copy()

            handles.append(sub.register_forward_hook(hook))
        try:
            with torch.inference_mode():
                out = self.module(self._inputs(request))
        finally:
            for h in handles:
                h.remove()
        return out, {k: store[k] for k in self.stage_modules}

    def _logprobs(self, out: Any) -> Any:
        """log p of (increase, decrease) from the model output, through the readout."""
        return _two_way(self.readout(out))

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        """Per request, stage -> the hooked module's output for batch row 0: (time, d) or (d,)."""
        return [self._forward(r)[1] for r in requests]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        """Per request, option -> log p from the readout (options other than OPTIONS omitted)."""
        out = []
        for r in requests:
            lp = self._logprobs(self._forward(r)[0]).numpy()
            out.append({o: float(lp[OPTIONS.index(o)]) for o in r.prompt.options if o in OPTIONS})
        return out

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """The option with the higher score."""
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def option_logprobs(self, requests: Sequence[Request]) -> Any:
        """(requests x options) readout log p, differentiable; options must be in OPTIONS."""
        import torch

        if option_count(requests) == 0:
            return torch.zeros(0, 0)
        out = []
        for r in requests:
            lp = self._logprobs(self.module(self._inputs(r)))
            out.append(torch.stack([lp[OPTIONS.index(o)] for o in r.prompt.options]))
        return torch.stack(out)

    def tunable_module(self) -> Any:
        return self.module

    def output_head(self) -> Any:
        """`lens_head`, which must be a submodule of the module to be tuned alone."""
        if self.lens_head is None:
            raise ConfigError(f"{self.listener_id}: no output head; register it as lens_head=")
        return self.lens_head

    def head_inputs(self, requests: Sequence[Request]) -> Any:
        """The head's input for each request (one position scores every option)."""
        import torch

        from vocalgrad.listeners.tuning import gather, head_input_recorder

        n = option_count(requests)
        with torch.no_grad(), head_input_recorder(self.output_head()) as seen:
            reference = self.option_logprobs(requests)
        states, tokens, slots = [], [], []
        for b, request in enumerate(requests):
            for o, option in enumerate(request.prompt.options):
                states.append(seen[b].reshape(1, -1))
                tokens.append(OPTIONS.index(option))
                slots.append(b * n + o)
        return gather(self.output_head(), states, tokens, slots, (len(requests), n), reference)

    def answer_lens(
        self,
        requests: Sequence[Request],
        options: tuple[str, str] | None = None,
        states: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> list[np.ndarray]:
        """log p(increase) - log p(decrease) from `lens_head` on each lens stage, in order
        (`lens_stages`, else every one-position stage); `states` from `hidden_states` are
        reused when given."""
        import torch

        if self.lens_head is None:
            raise self._unable("read a logit lens (no lens_head)")
        sign = -1.0 if options is not None and tuple(options) == OPTIONS[::-1] else 1.0
        out = []
        for i, r in enumerate(requests):
            st = states[i] if states is not None else self._forward(r)[1]
            names = self.lens_stages or [k for k, v in st.items() if v.ndim == 1]
            with torch.inference_mode():
                lps = [_two_way(self.lens_head(torch.as_tensor(st[k]))) for k in names]
            out.append(np.asarray([sign * float(lp[0] - lp[1]) for lp in lps]))
        return out

    def with_random_weights(self, seed: int = 0) -> TorchModuleListener:
        """Same module, stages and readout; parameters re-drawn (lens head kept as given)."""
        twin = copy.deepcopy(self.module)
        _reinit(twin, seed)
        stages = {
            k: v if isinstance(v, str) else _find(self.module, twin, v)
            for k, v in self._stage_specs.items()
        }
        return TorchModuleListener(twin, stages, **self._init)

    def manifest(self) -> dict:
        return {**super().manifest(), "stages": list(self.stage_modules)}


def _two_way(logits: Any) -> Any:
    """log-softmax over the first two logits: log p of (increase, decrease)."""
    import torch

    return torch.log_softmax(torch.as_tensor(logits).reshape(-1)[:2].float(), -1)


def _find(old_root: Any, new_root: Any, sub: Any) -> Any:
    """The submodule of `new_root` at the path `sub` has inside `old_root`."""
    for name, mod in old_root.named_modules():
        if mod is sub:
            return new_root.get_submodule(name)
    raise ConfigError("a stage module is not part of the registered module; pass its name instead")


class DSPListener(Listener):
    """Plain log-mel features (80 bins, 10 ms hop): the reference every probe curve is read
    against. What a probe gets from here needs no model at all."""

    listener_id = "dsp:logmel80"
    revision = "librosa-logmel80-v1"
    sample_rate = 16000
    stage = "dsp:logmel"
    can_generate = False
    can_probe = True

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        """Per request, ``dsp:logmel`` -> (frames, 80) log10 mel power, float32.

        Raises
        ------
        ConfigError
            For a request without audio.
        AudioError
            When librosa cannot analyse a clip (e.g. not mono float audio).
        """
        import librosa

        out = []
        for r in requests:
            audio = r.target_audio
            if audio is None:
                raise ConfigError("DSP features need audio")
            try:
                mel = librosa.feature.melspectrogram(
                    y=np.asarray(audio, np.float32),
                    sr=self.sample_rate,
                    n_fft=400,
                    hop_length=160,
                    n_mels=80,
                )
            except librosa.util.exceptions.ParameterError as err:
                raise AudioError(f"{r.item_id}: no log-mel features ({err})") from err
            out.append({self.stage: np.log10(np.maximum(mel, 1e-10)).T.astype(np.float32)})
        return out

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """Never: the DSP reference only provides features."""
        raise self._unable("answer: the DSP reference only provides features")

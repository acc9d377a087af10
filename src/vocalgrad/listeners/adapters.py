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

from vocalgrad.errors import ConfigError
from vocalgrad.listeners.base import Listener, Request

OPTIONS = ("increase", "decrease")


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
    """The same architecture with random weights (a control), or ConfigError if impossible.

    Works for `TorchModuleListener` and for any listener keeping its network in `.model` (the
    Whisper and transformers listeners); the copy gets a revision of its own, so its features
    are cached apart from the trained model's.
    """
    own = getattr(listener, "with_random_weights", None)
    if callable(own):
        return own(seed)
    model = getattr(listener, "model", None)
    try:
        import torch
    except ImportError as err:  # pragma: no cover - torch is part of the models extra
        raise ConfigError(
            "random-weight controls need torch (pip install 'vocalgrad[models]')"
        ) from err
    if not isinstance(model, torch.nn.Module):
        raise ConfigError(f"{listener.listener_id} cannot be re-initialised (no torch `.model`)")
    twin = copy.copy(listener)
    twin.model = copy.deepcopy(model)
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
    """A torch module as a listener: stages from forward hooks, answers from a readout."""

    can_score = True

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

    def with_random_weights(self, seed: int = 0) -> TorchModuleListener:
        """Same module, stages and readout; parameters re-drawn (lens head kept as given)."""
        twin = copy.deepcopy(self.module)
        _reinit(twin, seed)
        stages = {
            k: v if isinstance(v, str) else _find(self.module, twin, v)
            for k, v in self._stage_specs.items()
        }
        return TorchModuleListener(twin, stages, **self._init)

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

    def _logprobs(self, out: Any) -> np.ndarray:
        import torch

        logits = torch.as_tensor(self.readout(out)).reshape(-1)[:2].float()
        return torch.log_softmax(logits, -1).numpy()

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        return [self._forward(r)[1] for r in requests]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            lp = self._logprobs(self._forward(r)[0])
            out.append({o: float(lp[OPTIONS.index(o)]) for o in r.prompt.options if o in OPTIONS})
        return out

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def answer_lens(
        self, requests: Sequence[Request], options: tuple[str, str] | None = None
    ) -> list[np.ndarray]:
        """log p(increase) - log p(decrease) from `lens_head` on each lens stage, in order."""
        import torch

        if self.lens_head is None:
            raise NotImplementedError(f"{self.listener_id} has no lens head")
        sign = -1.0 if options is not None and tuple(options) == OPTIONS[::-1] else 1.0
        out = []
        for r in requests:
            _, states = self._forward(r)
            names = self.lens_stages or [k for k, v in states.items() if v.ndim == 1]
            diffs = []
            with torch.inference_mode():
                for k in names:
                    lp = torch.log_softmax(
                        torch.as_tensor(self.lens_head(torch.as_tensor(states[k])))
                        .reshape(-1)[:2]
                        .float(),
                        -1,
                    )
                    diffs.append(sign * float(lp[0] - lp[1]))
            out.append(np.asarray(diffs))
        return out

    def manifest(self) -> dict:
        return {**super().manifest(), "stages": list(self.stage_modules)}


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

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        import librosa

        out = []
        for r in requests:
            audio = r.target_audio
            if audio is None:
                raise ConfigError("DSP features need audio")
            mel = librosa.feature.melspectrogram(
                y=np.asarray(audio, np.float32),
                sr=self.sample_rate,
                n_fft=400,
                hop_length=160,
                n_mels=80,
            )
            out.append({self.stage: np.log10(np.maximum(mel, 1e-10)).T.astype(np.float32)})
        return out

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        raise ConfigError("the DSP reference only provides features; it does not answer")

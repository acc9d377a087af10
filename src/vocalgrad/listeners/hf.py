"""Hugging Face transformers audio-language models as listeners.

Spec `hf:<hub id or local path>`. The family (Qwen2-Audio, Qwen2.5-Omni thinker, Audio Flamingo
3, Voxtral, Gemma 3n, Phi-4-multimodal) is read from the config's `model_type`; a hub id is
resolved only from the local cache (`local_files_only=True`), so evaluation never downloads
behind the user's back. One `Prompt` is turned into the family's own chat format, so every
model sees the same words; answer options are scored as the assistant's reply, and hidden
states are returned by named stage for probing (see `HFListener.hidden_states`).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from vocalgrad.errors import ConfigError, ModelError
from vocalgrad.listeners.adapters import random_twin
from vocalgrad.listeners.base import Listener, Request, option_count
from vocalgrad.listeners.hf_families import FAMILIES, Family, PromptBatch, _Voxtral, family_for
from vocalgrad.listeners.registry import ListenerFamily
from vocalgrad.questions.prompts import to_chat

if TYPE_CHECKING:
    import torch
    from torch import nn

    from vocalgrad.listeners.tuning import HeadInputs

PREFIX = "hf:"


def _resolve(name: str) -> tuple[Path, str | None]:
    """Local folder holding config.json, plus the commit hash when it came from the HF cache."""
    path = Path(name).expanduser()
    if (path / "config.json").is_file():
        return path, None
    try:
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(name, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any failure means "not in the local cache"
        raise ModelError(
            f"{name!r} is neither a folder with config.json nor in the local Hugging Face "
            f"cache; fetch it first (`huggingface-cli download {name}`) or pass a local path"
        ) from exc
    return folder, folder.name if len(folder.name) == 40 else None


def _fingerprint(folder: Path) -> str:
    """Revision for folders without a commit: config text plus weight file names and sizes."""
    digest = hashlib.sha256((folder / "config.json").read_bytes())
    for file in sorted(folder.iterdir()):
        if file.suffix in {".safetensors", ".bin", ".pt", ".json"} and file.is_file():
            digest.update(f"{file.name}:{file.stat().st_size}".encode())
    return "sha256:" + digest.hexdigest()[:16]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class HFListener(Listener):
    """A transformers audio-LM: greedy `generate`, `score_choices`, `hidden_states`, a logit
    lens, and tuning of the whole model (its head is the LM output projection).

    Parameters
    ----------
    spec : str
        ``hf:`` + a local folder with config.json, or a hub id already in the local cache.
    device : str, optional
        Torch device; default CUDA when available, else CPU.
    dtype : str, optional
        Torch dtype name (e.g. ``"float32"``); default bfloat16 on CUDA, float32 on CPU.

    Raises
    ------
    ConfigError
        When the config's ``model_type`` is no supported family.
    ModelError
        When the model is not local, or transformers or an extra package is missing.
    """

    can_score = True
    can_probe = True
    can_lens = True
    can_tune = True
    wants_gpu = True

    def __init__(self, spec: str, device: str | None = None, dtype: str | None = None) -> None:
        import torch
        import transformers

        name = spec[len(PREFIX) :] if spec.startswith(PREFIX) else spec
        folder, commit = _resolve(name)
        config = json.loads((folder / "config.json").read_text())
        model_type = str(config.get("model_type", ""))
        family = family_for(model_type)
        if family is None:
            known = ", ".join(t for f in FAMILIES for t in f.model_types)
            raise ConfigError(f"{name!r} has model_type {model_type!r}; supported: {known}")
        self.family: Family = family
        self.listener_id = PREFIX + name
        self.revision = commit or _fingerprint(folder)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = (
            getattr(torch, dtype)
            if dtype
            else (torch.bfloat16 if self.device.startswith("cuda") else torch.float32)
        )
        self.dtype = str(torch_dtype).removeprefix("torch.")  # answers depend on it
        cls = getattr(transformers, family.model_class, None)
        if cls is None:
            raise ModelError(
                f"transformers {transformers.__version__} lacks {family.model_class}; upgrade it"
            )
        try:
            self.processor = transformers.AutoProcessor.from_pretrained(
                folder, local_files_only=True
            )
            self.model = cls.from_pretrained(folder, dtype=torch_dtype, local_files_only=True)
        except ImportError as exc:
            raise ModelError(f"loading {name!r} needs an extra package: {exc}") from exc
        self.model.to(self.device).eval()
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.audio_token_id = family.audio_token_id(self.model, self.processor)
        self.sample_rate = int(getattr(self.processor.feature_extractor, "sampling_rate", 16000))
        self.warnings: list[str] = []
        self.encoder_layers = self._find_encoder_layers()

    def _find_encoder_layers(self) -> Any:
        """The audio encoder's layers for hooks, looked up once. When the module tree differs
        from what the family expects (another transformers version), probing goes on with the
        language-model stages only, and the warning says so here and in the manifest."""
        try:
            return self.family.encoder_layer_list(self.model)
        except AttributeError as exc:
            message = (
                f"{type(self.model).__name__}: audio-encoder layers not found "
                f"(family {self.family.name} expects `{self.family.encoder_path}."
                f"{self.family.encoder_layers}`: {exc}); hidden states have no "
                "audio_encoder.* stages"
            )
            warnings.warn(message, stacklevel=3)
            self.warnings.append(message)
            return []

    # -- inputs ------------------------------------------------------------------------------

    def _messages(self, request: Request) -> tuple[list[dict], list[np.ndarray], int | None]:
        """Chat messages with audio entries, the clips in order, and the target clip's index."""
        messages, clips, target = [], [], None
        for message in to_chat(request.prompt):
            content = []
            for part in message["content"]:
                if part["type"] != "audio":
                    content.append(part)
                    continue
                clip = request.audio.get(part["item_id"])
                if clip is None:  # text-only control: the audio is left out entirely
                    continue
                if part["item_id"] == request.item_id:
                    target = len(clips)
                clips.append(np.asarray(clip, dtype=np.float32))
                content.append({"type": "audio"})
            messages.append({"role": message["role"], "content": content})
        return messages, clips, target

    def _encode(
        self, requests: Sequence[Request], suffixes: Sequence[str] | None, padding_side: str
    ) -> PromptBatch:
        """Tokenise prompts (+ optional assistant-reply suffix) and extract audio features."""
        if self.family.manual_format:
            return self._encode_voxtral(requests, suffixes, padding_side)
        texts, clips = [], []
        for i, request in enumerate(requests):
            messages, row_clips, _ = self._messages(request)
            texts.append(
                self.family.render(self.processor, messages) + (suffixes[i] if suffixes else "")
            )
            clips.append(row_clips)
        kwargs: dict[str, Any] = {
            "text": texts,
            "return_tensors": "pt",
            # padding is for the text only: audio keeps each family's own padding rules
            "text_kwargs": {
                "padding": True,
                "padding_side": padding_side,
                "add_special_tokens": False,
            },
        }
        audio = self.family.audio_argument(clips)
        if audio is not None:
            kwargs["audio"] = audio
            kwargs["sampling_rate"] = self.sample_rate
        batch = self.family.process(self.processor, **kwargs)
        for key in ("num_audio_tokens", "mm_token_type_ids", "token_type_ids"):
            if key == "token_type_ids" and self.family.name == "gemma3n":
                continue
            batch.pop(key, None)
        lengths = batch["attention_mask"].sum(-1).tolist()
        return PromptBatch(batch, [int(n) for n in lengths], padding_side)

    def _encode_voxtral(
        self, requests: Sequence[Request], suffixes: Sequence[str] | None, padding_side: str
    ) -> PromptBatch:
        """Mistral instruct format built from token ids; see `_Voxtral` for why."""
        import torch

        assert isinstance(self.family, _Voxtral)
        tok = self.tokenizer
        ids_of = tok.convert_tokens_to_ids
        per_window = self.family.tokens_per_window(self.model)
        fe = self.processor.feature_extractor
        rows, features = [], []
        for i, request in enumerate(requests):
            messages, clips, _ = self._messages(request)
            ids: list[int] = [ids_of("<s>")]
            clip_iter = iter(clips)
            for message in messages:
                if message["role"] == "user":
                    ids.append(ids_of("[INST]"))
                for part in message["content"]:
                    if part["type"] == "audio":
                        clip = next(clip_iter)
                        n_win = max(1, -(-len(clip) // fe.n_samples))
                        padded = np.zeros(n_win * fe.n_samples, dtype=np.float32)
                        padded[: len(clip)] = clip
                        mel = fe(padded, sampling_rate=self.sample_rate, return_tensors="pt")
                        mel = mel["input_features"].reshape(fe.feature_size, n_win, -1)
                        features.append(mel.transpose(0, 1))
                        ids += [ids_of("[BEGIN_AUDIO]")] + [self.audio_token_id] * (
                            per_window * n_win
                        )
                    else:
                        ids += tok.encode(part["text"], add_special_tokens=False)
                if message["role"] == "user":
                    ids.append(ids_of("[/INST]"))
                else:
                    ids.append(ids_of("</s>"))
            if suffixes:
                ids += tok.encode(suffixes[i], add_special_tokens=False)
            rows.append(ids)
        batch = self._pad(rows, padding_side)
        if features:
            batch["input_features"] = torch.cat(features).to(torch.float32)
        return PromptBatch(batch, [len(r) for r in rows], padding_side)

    def _pad(self, rows: list[list[int]], padding_side: str) -> dict[str, Any]:
        import torch

        pad = self.tokenizer.pad_token_id
        pad = 0 if pad is None else pad
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            sl = slice(width - len(row), width) if padding_side == "left" else slice(0, len(row))
            ids[i, sl] = torch.tensor(row)
            mask[i, sl] = 1
        return {"input_ids": ids, "attention_mask": mask}

    def _to_device(self, batch: dict[str, Any]) -> dict[str, Any]:
        import torch

        out = {}
        for key, value in batch.items():
            if isinstance(value, torch.Tensor):
                value = value.to(self.device)
                if value.is_floating_point():
                    value = value.to(self.model.dtype)
            out[key] = value
        return out

    def _reply_ids(self, request: Request, option: str) -> int:
        """How many tokens the option adds when written as the start of the assistant's reply.

        The prompt and prompt + option are tokenised as text and compared, so the option gets
        exactly the tokens the assistant would produce right after the generation prompt.
        """
        if self.family.manual_format:
            return len(self.tokenizer.encode(option, add_special_tokens=False))
        messages, _, _ = self._messages(request)
        prompt = self.family.render(self.processor, messages)
        a = self.tokenizer.encode(prompt, add_special_tokens=False)
        b = self.tokenizer.encode(prompt + option, add_special_tokens=False)
        return len(b) - _common_prefix(a, b)

    # -- Listener API ------------------------------------------------------------------------

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """Greedy answers; left padding so every row continues from its own last token."""
        import torch

        if not requests:
            return []
        enc = self._encode(requests, None, "left")
        inputs = self._to_device(enc.inputs)
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=self.tokenizer.pad_token_id,
            )
        if not isinstance(out, torch.Tensor):
            out = out.sequences
        new = out[:, inputs["input_ids"].shape[1] :]
        return [t.strip() for t in self.tokenizer.batch_decode(new, skip_special_tokens=True)]

    def _option_rows(self, requests: Sequence[Request], read: list | None = None) -> torch.Tensor:
        """Summed log p of each (request, option) pair's option tokens, request-major (1-D).

        Each option is written as the assistant's reply; rows are right-padded, so every real
        token keeps the positions it has unbatched. With `read`, each row's (row, positions
        before the option's tokens, those tokens) is appended: where the head scored them.
        """
        import torch

        rows = [(r, o) for r in requests for o in r.prompt.options]
        enc = self._encode([r for r, _ in rows], [o for _, o in rows], "right")
        logits = self.model(**self._to_device(enc.inputs), use_cache=False).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        ids = enc.inputs["input_ids"]
        scores = []
        for k, (request, option) in enumerate(rows):
            n_opt = self._reply_ids(request, option)
            end = enc.lengths[k]
            positions = torch.arange(end - n_opt, end)
            picked = logp[k, positions - 1].gather(-1, ids[k, positions].to(logp.device)[:, None])
            scores.append(picked.sum())
            if read is not None:
                read.append((k, positions - 1, ids[k, positions]))
        return torch.stack(scores).cpu()

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        """Summed log p (nats) of each option's tokens, written as the assistant's reply.

        Returns
        -------
        list of dict
            Per request, option -> log p; requests may differ in their options.
        """
        import torch

        if not any(r.prompt.options for r in requests):
            return [{} for _ in requests]
        with torch.inference_mode():
            flat = self._option_rows(requests).tolist()
        scores, k = [], 0
        for request in requests:
            options = request.prompt.options
            scores.append(dict(zip(options, flat[k : k + len(options)], strict=True)))
            k += len(options)
        return scores

    def option_logprobs(self, requests: Sequence[Request]) -> torch.Tensor:
        """(requests x options) `score_choices`, differentiable; see `Listener.option_logprobs`."""
        import torch

        n = option_count(requests)
        if not requests:
            return torch.zeros(0, 0)
        return self._option_rows(requests).reshape(len(requests), n)

    def tunable_module(self) -> nn.Module:
        """The whole transformers model."""
        return self.model

    def output_head(self) -> nn.Module:
        """The LM projection to the vocabulary (`get_output_embeddings`)."""
        return self.model.get_output_embeddings()

    def untie_head(self) -> bool:
        """As `Listener.untie_head`, and tells transformers not to tie the head back."""
        untied = super().untie_head()
        if untied:
            self.model.config.get_text_config().tie_word_embeddings = False
        return untied

    def head_inputs(self, requests: Sequence[Request]) -> HeadInputs:
        """The LM head's inputs at every option-token position, in one pass of the model."""
        import torch

        from vocalgrad.listeners.tuning import gather, head_input_recorder

        states, tokens, slots, read = [], [], [], []
        with torch.no_grad(), head_input_recorder(self.output_head()) as seen:
            reference = self._option_rows(requests, read)
        for k, before, toks in read:
            states.append(seen[-1][k, before])
            tokens += toks.tolist()
            slots += [k] * len(toks)
        shape = (len(requests), option_count(requests))
        return gather(self.output_head(), states, tokens, slots, shape, reference.reshape(shape))

    def with_random_weights(self, seed: int = 0) -> HFListener:
        """The same model with every parameter re-drawn (a probing control)."""
        return random_twin(self, seed)

    def _states(self, request: Request) -> tuple[dict[str, np.ndarray], list[Any], Any]:
        """One forward pass with hooks: stage arrays, per-layer answer states, input ids."""
        import torch

        _, clips, target = self._messages(request)
        enc = self._encode([request], None, "right")
        inputs = self._to_device(enc.inputs)
        text_model = self.model.get_decoder()
        captured: dict[str, Any] = {}
        hooks = []

        def keep(name: str, pre: bool = False) -> Any:
            def hook(module: Any, args: Any, output: Any = None) -> None:
                value = args[0] if pre else output
                captured[name] = value[0] if isinstance(value, tuple) else value

            return hook

        layers = text_model.layers
        hooks.append(layers[0].register_forward_pre_hook(keep("lm.0", pre=True)))
        for i, layer in enumerate(layers):
            hooks.append(layer.register_forward_hook(keep(f"lm.{i + 1}")))
        if clips:
            for i, layer in enumerate(self.encoder_layers):
                hooks.append(layer.register_forward_hook(keep(f"audio_encoder.{i}")))
        try:
            with torch.inference_mode():
                self.model(**inputs, use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        ids = enc.inputs["input_ids"][0, : enc.lengths[0]]
        audio_pos = self._target_positions(ids, len(clips), target)
        out: dict[str, np.ndarray] = {}
        answer_states = []
        samples = [len(c) for c in clips]
        for name, value in captured.items():
            if name.startswith("audio_encoder.") and target is not None:
                out[name] = self.family.encoder_frames(
                    value.detach().cpu(), samples, target, enc.inputs
                )
        for i in range(len(layers) + 1):
            raw = captured[f"lm.{i}"]
            state = self.family.stream(raw, text_model)[0].float().cpu()
            if audio_pos is not None and len(audio_pos):
                out[f"lm.{i}@audio"] = state[audio_pos].numpy()
            out[f"lm.{i}@answer"] = state[enc.lengths[0] - 1].numpy()
            answer_states.append(raw[..., enc.lengths[0] - 1, :])
        if audio_pos is not None and len(audio_pos):
            out["projector"] = out["lm.0@audio"]
        return out, answer_states, ids

    def _target_positions(self, ids: Any, n_clips: int, target: int | None) -> Any:
        """Positions of the target clip's audio tokens (all audio tokens if runs are ambiguous)."""
        import torch

        if target is None:
            return None
        pos = torch.nonzero(ids == self.audio_token_id).flatten()
        if len(pos) == 0:
            return pos
        breaks = torch.nonzero(pos[1:] != pos[:-1] + 1).flatten() + 1
        runs = torch.tensor_split(pos, breaks.tolist())
        return runs[target] if len(runs) == n_clips else pos

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        """Per request: `audio_encoder.{i}` (target clip, real audio frames only), `projector`
        (LM input embeddings at the target clip's audio positions), `lm.{i}@audio` and
        `lm.{i}@answer` (residual stream entering layer 0 for i=0, leaving layer i otherwise,
        at the last prompt position, which predicts the first answer token).
        """
        return [self._states(r)[0] for r in requests]

    def answer_lens(
        self,
        requests: Sequence[Request],
        options: tuple[str, str] | None = None,
        states: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> list[np.ndarray]:
        """Logit lens: per layer, log p(first token of option A) - log p(first token of B).

        See `Listener.answer_lens`. The family's own final norm and head read each layer's raw
        answer-position state (embeddings first), so the model runs again: `states` (merged
        streams) is not enough. The last layer's value equals the model's own next-token
        log-probability difference.
        """
        import torch

        results = []
        for request in requests:
            a, b = options or request.prompt.options[:2]
            first = []
            for option in (a, b):
                n = self._reply_ids(request, option)
                enc = self._encode([request], [option], "right")
                first.append(int(enc.inputs["input_ids"][0, enc.lengths[0] - n]))
            _, states, _ = self._states(request)
            diffs = []
            with torch.inference_mode():
                for state in states:
                    logp = torch.log_softmax(self.family.to_logits(self.model, state).float(), -1)
                    logp = logp.reshape(-1, logp.shape[-1])[0]
                    diffs.append(float(logp[first[0]] - logp[first[1]]))
            results.append(np.asarray(diffs, dtype=np.float64))
        return results

    def manifest(self) -> dict:
        out = {
            **super().manifest(),
            "family": self.family.name,
            "device": self.device,
            "dtype": self.dtype,
        }
        return out | ({"warnings": list(self.warnings)} if self.warnings else {})


def _load(rest: str, *, dataset: str | Path | None = None, **options: Any) -> HFListener:
    """The `hf:` listener family (the dataset is not needed to load it)."""
    return HFListener(rest, **options)


from_spec = ListenerFamily(_load, wants_gpu=True)
"""The `hf:` listener family (the dataset is not needed to load it)."""

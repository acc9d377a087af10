"""Per-family knowledge for Hugging Face audio-language models.

Each family differs in three places that matter for evaluation and probing: how a chat with
audio becomes token ids plus audio features, which token ids mark audio positions, and how the
language model's residual stream turns into logits (for the logit lens). Everything else is
shared in `vocalgrad.listeners.hf`. Families are keyed by the config's `model_type`, so a
checkpoint is recognised without downloading anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

WHISPER_WINDOW = 480_000  # 30 s at 16 kHz: Whisper-style encoders see fixed windows

Messages = list[dict[str, Any]]


@dataclass(frozen=True)
class PromptBatch:
    """Model inputs for one batch plus what is needed to find positions inside them."""

    inputs: dict[str, Any]
    lengths: list[int]  # real (unpadded) length of each row
    padding_side: str


@dataclass(frozen=True)
class Family:
    """What differs between audio-LM families; see the module docstring for why."""

    name: str
    model_types: tuple[str, ...]
    model_class: str
    encoder_path: str  # dotted module-name suffix of the audio encoder inside the model
    encoder_layers: str = "layers"  # attribute of the encoder holding its layer list
    window_samples: int | None = WHISPER_WINDOW  # None: encoder sees the clip unpadded
    rows_per_window: bool = False  # True: long clips become several encoder rows
    flat_encoder: bool = False  # True: encoder layers see (time, d) with clips concatenated
    manual_format: bool = False  # True: the processor cannot take audio; build ids here

    # -- prompt formatting -------------------------------------------------------------

    def render(self, processor: Any, messages: Messages) -> str:
        """The prompt text up to and including the assistant's generation prompt."""
        return processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def audio_argument(self, per_row: list[list[np.ndarray]]) -> Any:
        """The processor's `audio=` argument: a flat list in placeholder order."""
        flat = [a for row in per_row for a in row]
        return flat or None

    def process(self, processor: Any, **kwargs: Any) -> dict[str, Any]:
        """Run the processor: expands audio placeholders and extracts features."""
        return dict(processor(**kwargs))

    # -- model structure -----------------------------------------------------------------

    def audio_token_id(self, model: Any, processor: Any) -> int:
        """The id the processor repeats once per audio embedding."""
        config = model.config
        for key in ("audio_token_id", "audio_token_index"):
            value = getattr(config, key, None)
            if value is not None:
                return int(value)
        audio_config = getattr(config, "audio_config", None)
        value = getattr(audio_config, "audio_token_id", None)
        if value is None:
            value = processor.audio_token_id
        return int(value)

    def encoder_layer_list(self, model: Any) -> Any:
        """The audio encoder's layer list, for forward hooks."""
        path = self.encoder_path
        module = next(
            (m for n, m in model.named_modules() if n == path or n.endswith("." + path)), None
        )
        if module is None:
            raise AttributeError(f"no module {path!r} in {type(model).__name__}")
        for part in self.encoder_layers.split("."):
            module = getattr(module, part)
        return module

    def stream(self, state: torch.Tensor, text_model: Any) -> torch.Tensor:
        """The residual stream of a decoder layer's output as (batch, time, d)."""
        return state

    def to_logits(self, model: Any, state: torch.Tensor) -> torch.Tensor:
        """Final norm + lm_head (+ soft-capping) applied to residual states (..., d)."""
        text_model = model.get_decoder()
        logits = model.get_output_embeddings()(text_model.norm(state))
        cap = getattr(_text_config(model), "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def encoder_frames(
        self, state: torch.Tensor, clip_samples: list[int], target: int, inputs: dict[str, Any]
    ) -> np.ndarray:
        """One encoder layer's output for the target clip, trimmed to real (unpadded) audio."""
        if self.rows_per_window:
            rows = [max(1, math.ceil(n / WHISPER_WINDOW)) for n in clip_samples]
        else:
            rows = [1] * len(clip_samples)
        start = sum(rows[:target])
        block = state[start : start + rows[target]]
        block = block.reshape(-1, block.shape[-1])
        if self.window_samples is not None:
            padded = rows[target] * self.window_samples
        else:
            padded = max(clip_samples)
        keep = max(1, math.ceil(block.shape[0] * clip_samples[target] / padded))
        return block[:keep].float().numpy()


def _text_config(model: Any) -> Any:
    config = model.config
    return getattr(config, "text_config", None) or config


class _AudioFlamingo3(Family):
    """Audio Flamingo 3: its processor insists on one clip per text, which few-shot breaks.

    The model itself fills audio positions in order from all clips, so only the 1:1 check is
    skipped (the generic placeholder-count check still runs).
    """

    def process(self, processor: Any, **kwargs: Any) -> dict[str, Any]:
        from transformers.processing_utils import ProcessorMixin

        def validate(**kw: Any) -> None:
            ProcessorMixin.validate_inputs(processor, **kw)

        processor.validate_inputs = validate
        try:
            return dict(processor(**kwargs))
        finally:
            del processor.validate_inputs


class _Qwen25Omni(Family):
    """Qwen2.5-Omni thinker: its audio encoder concatenates clips along time (no batch axis)."""

    def encoder_frames(
        self, state: torch.Tensor, clip_samples: list[int], target: int, inputs: dict[str, Any]
    ) -> np.ndarray:
        mel = inputs["feature_attention_mask"].sum(-1).tolist()
        lengths = [(int(n) - 1) // 2 + 1 for n in mel]  # after the stride-2 conv
        start = sum(lengths[:target])
        return state[start : start + lengths[target]].float().numpy()


class _Gemma3n(Family):
    """Gemma 3n: decoder layers carry several AltUp streams; the lens must merge them."""

    def audio_argument(self, per_row: list[list[np.ndarray]]) -> Any:
        flat = [a for row in per_row for a in row]
        return flat or None

    def stream(self, state: torch.Tensor, text_model: Any) -> torch.Tensor:
        return state[0] if state.dim() == 4 else state

    def to_logits(self, model: Any, state: torch.Tensor) -> torch.Tensor:
        """Merge AltUp streams exactly as the model does after its last layer."""
        text_model = model.get_decoder()
        if state.dim() >= 3 and state.shape[0] == text_model.config.altup_num_inputs:
            first = state[0]
            target = torch.mean(first**2, dim=-1, keepdim=True) ** 0.5
            merged = [first]
            eps = torch.tensor(1e-5, dtype=first.dtype)
            for i in range(1, state.shape[0]):
                proj = text_model.altup_unembed_projections[i - 1](state[i])
                norm = torch.sqrt(torch.maximum(torch.mean(proj**2, dim=-1, keepdim=True), eps))
                merged.append(proj * target / norm)
            state = torch.mean(torch.stack(merged), dim=0)
        return super().to_logits(model, state)


class _Voxtral(Family):
    """Voxtral: the Mistral tokenizer's chat format, written out token by token.

    The processor only accepts audio through mistral-common's chat template, which needs the
    `mistral-common` package and its own message objects; building the ids here keeps one
    code path for both tokenizer backends. Format (Mistral instruct):
    `<s>[INST][BEGIN_AUDIO][AUDIO]*n text[/INST]answer</s>[INST]...[/INST]`.
    """

    def tokens_per_window(self, model: Any) -> int:
        audio = model.config.audio_config
        return audio.max_source_positions * audio.hidden_size // audio.intermediate_size


FAMILIES: tuple[Family, ...] = (
    Family(
        "qwen2_audio",
        ("qwen2_audio",),
        "Qwen2AudioForConditionalGeneration",
        "audio_tower",
    ),
    _Qwen25Omni(
        "qwen2_5_omni",
        ("qwen2_5_omni", "qwen2_5_omni_thinker"),
        "Qwen2_5OmniThinkerForConditionalGeneration",
        "audio_tower",
        window_samples=None,
        flat_encoder=True,
    ),
    _AudioFlamingo3(
        "audioflamingo3",
        ("audioflamingo3",),
        "AudioFlamingo3ForConditionalGeneration",
        "audio_tower",
        rows_per_window=True,
    ),
    _Voxtral(
        "voxtral",
        ("voxtral",),
        "VoxtralForConditionalGeneration",
        "audio_tower",
        rows_per_window=True,
        manual_format=True,
    ),
    _Gemma3n(
        "gemma3n",
        ("gemma3n",),
        "Gemma3nForConditionalGeneration",
        "audio_tower",
        encoder_layers="conformer",
        window_samples=None,
    ),
    Family(
        "phi4_multimodal",
        ("phi4_multimodal",),
        "Phi4MultimodalForCausalLM",
        "audio_embed.encoder",
        encoder_layers="encoders",
        window_samples=None,
    ),
)


def family_for(model_type: str) -> Family | None:
    """The family that handles this config `model_type`, or None."""
    for family in FAMILIES:
        if model_type in family.model_types:
            return family
    return None

"""HFListener on tiny, randomly initialised models of every supported family.

Nothing is downloaded: each test builds a small model from its config class and a processor
from a tokenizer trained here on a few hundred words, saves both with `save_pretrained` and
loads them back through `HFListener("hf:" + path)`, the same code path a real checkpoint takes.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from collections.abc import Callable  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from vocalgrad.listeners.base import Request  # noqa: E402
from vocalgrad.listeners.hf import HFListener  # noqa: E402
from vocalgrad.questions.prompts import build_prompt, to_chat  # noqa: E402

WORDS = (
    "increase decrease constant yes no does the volume voice pitch speaking speed over time "
    "answer with only one word or of this audio clip change stay system user assistant model "
    "you are a helpful is speaker get louder quieter higher lower in go up down"
).split()
TEXT = dict(
    vocab_size=512,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=4096,
)
WHISPER_ENC = dict(
    num_mel_bins=128, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=32, d_model=16
)

# tiny sub-configs shared by the processor-path builders and the model-only adapter checks
OMNI_TEXT = dict(
    **TEXT,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [1, 1, 2]},
)
OMNI_VISION = dict(depth=1, hidden_size=16, intermediate_size=16, num_heads=2, out_hidden_size=32)
PHI4_AUDIO = dict(
    hidden_size=16,
    intermediate_size=16,
    num_blocks=2,
    num_attention_heads=2,
    ext_pw_out_channel=16,
    depthwise_separable_out_channel=16,
    nemo_conv_channels=16,
)
PHI4_VISION = dict(hidden_size=16, intermediate_size=16, num_hidden_layers=1)


def make_tokenizer(specials: list[str], extra: dict[str, str], **kwargs: str) -> object:
    """A byte-level BPE tokenizer trained on the benchmark's words, specials at ids 0.."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [" ".join(WORDS)] * 3 + WORDS + ['Answer with only one word: "increase" or "x".\n\n']
    tok.train_from_iterator(corpus, trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, extra_special_tokens=extra, **kwargs
    )


def whisper_fe(**kwargs: int) -> object:
    return transformers.WhisperFeatureExtractor(feature_size=128, **kwargs)


QWEN_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'audio' %}AUDIO_PLACEHOLDER"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_qwen2_audio(folder: Path) -> None:
    specials = QWEN_SPECIALS + ["<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"]
    tok = make_tokenizer(specials, {}, pad_token="<|endoftext|>", eos_token="<|im_end|>")
    proc = transformers.Qwen2AudioProcessor(whisper_fe(), tok)  # its default chat template
    config = transformers.Qwen2AudioConfig(
        audio_config=WHISPER_ENC,
        text_config=dict(model_type="qwen2", **TEXT),
        audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"),
    )
    save(transformers.Qwen2AudioForConditionalGeneration(config), proc, folder)


def build_audioflamingo3(folder: Path) -> None:
    specials = QWEN_SPECIALS + ["<sound>"]
    tok = make_tokenizer(specials, {}, pad_token="<|endoftext|>", eos_token="<|im_end|>")
    template = QWEN_TEMPLATE.replace("AUDIO_PLACEHOLDER", "<sound>")
    proc = transformers.AudioFlamingo3Processor(whisper_fe(), tok, chat_template=template)
    config = transformers.AudioFlamingo3Config(
        audio_config=dict(
            num_mel_bins=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=32,
            hidden_size=16,
        ),
        text_config=dict(model_type="qwen2", **TEXT),
        audio_token_id=tok.convert_tokens_to_ids("<sound>"),
    )
    save(transformers.AudioFlamingo3ForConditionalGeneration(config), proc, folder)


def build_qwen2_5_omni(folder: Path) -> None:
    names = dict(
        audio_token="<|AUDIO|>",
        image_token="<|IMAGE|>",
        video_token="<|VIDEO|>",
        audio_bos_token="<|audio_bos|>",
        audio_eos_token="<|audio_eos|>",
        vision_bos_token="<|vision_bos|>",
        vision_eos_token="<|vision_eos|>",
    )
    tok = make_tokenizer(
        QWEN_SPECIALS + list(names.values()),
        names,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
    )
    template = QWEN_TEMPLATE.replace("AUDIO_PLACEHOLDER", "<|audio_bos|><|AUDIO|><|audio_eos|>")
    proc = transformers.Qwen2_5OmniProcessor(
        transformers.Qwen2VLImageProcessor(),
        transformers.Qwen2VLVideoProcessor(),
        whisper_fe(),
        tok,
        chat_template=template,
    )
    ids = {k: tok.convert_tokens_to_ids(v) for k, v in names.items()}
    config = transformers.Qwen2_5OmniThinkerConfig(
        audio_config=dict(**WHISPER_ENC, output_dim=32, n_window=50),
        vision_config=dict(**OMNI_VISION, fullatt_block_indexes=[0]),
        text_config=OMNI_TEXT,
        audio_token_index=ids["audio_token"],
        image_token_index=ids["image_token"],
        video_token_index=ids["video_token"],
        audio_start_token_id=ids["audio_bos_token"],
        audio_end_token_id=ids["audio_eos_token"],
    )
    save(transformers.Qwen2_5OmniThinkerForConditionalGeneration(config), proc, folder)


def build_voxtral(folder: Path) -> None:
    specials = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]"]
    specials += [f"<SPECIAL_{i}>" for i in range(5, 24)] + ["[AUDIO]", "[BEGIN_AUDIO]"]
    tok = make_tokenizer(specials, {}, pad_token="<unk>", eos_token="</s>", bos_token="<s>")
    proc = transformers.VoxtralProcessor(whisper_fe(), tok)
    config = transformers.VoxtralConfig(
        audio_config=dict(
            num_mel_bins=128,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,  # 4 x hidden, as in the real model: 375 tokens per 30 s
            hidden_size=16,
        ),
        text_config=dict(model_type="llama", head_dim=8, **TEXT),
        audio_token_id=24,
    )
    save(transformers.VoxtralForConditionalGeneration(config), proc, folder)


PHI4_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'audio' %}<|audio|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def build_phi4_multimodal(folder: Path) -> None:
    names = dict(audio_token="<|audio|>", image_token="<|image|>")
    specials = ["<|endoftext|>", "<|user|>", "<|assistant|>", "<|end|>", *names.values()]
    tok = make_tokenizer(specials, names, pad_token="<|endoftext|>", eos_token="<|end|>")
    proc = transformers.Phi4MultimodalProcessor(
        transformers.Phi4MultimodalImageProcessor(),
        transformers.Phi4MultimodalFeatureExtractor(),
        tok,
        chat_template=PHI4_TEMPLATE,
    )
    config = transformers.Phi4MultimodalConfig(
        **TEXT,
        vision_config=dict(**PHI4_VISION, num_attention_heads=2, image_token_id=tok.image_token_id),
        audio_config=dict(**PHI4_AUDIO, audio_token_id=tok.audio_token_id),
        pad_token_id=0,
        eos_token_id=tok.eos_token_id,
        bos_token_id=0,
    )
    save(transformers.Phi4MultimodalForCausalLM(config), proc, folder)


def save(model: object, processor: object, folder: Path) -> None:
    model.save_pretrained(folder)
    processor.save_pretrained(folder)


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


BUILDERS: dict[str, Callable[[Path], None]] = {
    "qwen2_audio": build_qwen2_audio,
    "audioflamingo3": build_audioflamingo3,
    "voxtral": build_voxtral,
    "qwen2_5_omni": build_qwen2_5_omni,
    "phi4_multimodal": build_phi4_multimodal,
}
NEEDS_VISION = pytest.mark.skipif(
    not (_has("PIL") and _has("torchvision")),
    reason="Qwen2_5OmniProcessor requires an image processor (pillow) and a video processor "
    "(torchvision); neither package is installed",
)
NEEDS_PHI4_VISION = pytest.mark.skipif(
    not (_has("PIL") and _has("torchvision")),
    reason="Phi4MultimodalProcessor requires Phi4MultimodalImageProcessor, which needs pillow "
    "and torchvision; they are not installed",
)
MARKS = {"qwen2_5_omni": [NEEDS_VISION], "phi4_multimodal": [NEEDS_PHI4_VISION]}


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=MARKS.get(name, [])) for name in BUILDERS],
)
def listener(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> HFListener:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(request.param)
    BUILDERS[request.param](folder)
    return HFListener("hf:" + str(folder), device="cpu")


def clip(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32)


def requests() -> list[Request]:
    """Zero-shot (text then audio), audio-first, few-shot with two examples, text-only."""
    plain = build_prompt("volume", item_id="a")
    first = build_prompt("voice_pitch", audio_first=True, item_id="b")
    shots = [({"item_id": "s1"}, "increase"), ({"item_id": "s2"}, "decrease")]
    few = build_prompt("volume", few_shot=shots, item_id="c")
    return [
        Request("a", plain, {"a": clip(1.0, 1)}),
        Request("b", first, {"b": clip(0.6, 2)}),
        Request("c", few, {"c": clip(0.8, 3), "s1": clip(0.5, 4), "s2": clip(0.7, 5)}),
        Request("d", build_prompt("volume", item_id="d"), {"d": None}),
    ]


def test_identity(listener: HFListener) -> None:
    assert listener.listener_id.startswith("hf:")
    assert listener.revision.startswith("sha256:")
    assert listener.can_score and listener.sample_rate == 16000


def test_generate(listener: HFListener) -> None:
    reqs = requests()
    batched = listener.generate(reqs, max_new_tokens=3)
    assert len(batched) == len(reqs) and all(isinstance(t, str) for t in batched)
    assert batched[0] == listener.generate(reqs[:1], max_new_tokens=3)[0]


def test_score_choices_batched_equals_unbatched(listener: HFListener) -> None:
    reqs = requests()
    batched = listener.score_choices(reqs)
    for request, scores in zip(reqs, batched, strict=True):
        assert set(scores) == set(request.prompt.options)
        assert all(np.isfinite(v) and v < 0 for v in scores.values())
        alone = listener.score_choices([request])[0]
        for option, value in scores.items():
            assert value == pytest.approx(alone[option], abs=1e-4)


def _user_messages(request: Request) -> tuple[list[dict], list[np.ndarray]]:
    """The prompt as chat messages the way a model card writes them: `{"type": "audio"}` per
    clip, clips in order; a clip that is None (text-only control) is left out."""
    messages, clips = [], []
    for message in to_chat(request.prompt):
        content = []
        for part in message["content"]:
            if part["type"] == "text":
                content.append(part)
            elif request.audio.get(part["item_id"]) is not None:
                clips.append(request.audio[part["item_id"]])
                content.append({"type": "audio"})
        messages.append({"role": message["role"], "content": content})
    return messages, clips


def _processor_inputs(processor: object, text: str, clips: list[np.ndarray]) -> dict:
    """`processor(text=..., audio=...)` as the Qwen2-Audio and Audio Flamingo 3 cards call it."""
    audio = dict(audio=clips, sampling_rate=16000) if clips else {}
    return dict(processor(text=text, return_tensors="pt", **audio))


def _audioflamingo3_inputs(processor: object, text: str, clips: list[np.ndarray]) -> dict:
    """Audio Flamingo 3's processor takes one clip per text, so several clips (few-shot) go in
    as a batch of bare `<sound>` texts: its features and each clip's expanded token count are
    kept, and the prompt's `<sound>` placeholders are expanded by hand in order."""
    if len(clips) <= 1:
        return _processor_inputs(processor, text, clips)
    sound = processor.audio_token
    per_clip = processor(text=[sound] * len(clips), audio=clips, sampling_rate=16000)
    counts = (per_clip["input_ids"] == processor.audio_token_id).sum(-1).tolist()
    pieces = text.split(sound)
    assert len(pieces) == len(clips) + 1
    expanded = pieces[0] + "".join(sound * n + p for n, p in zip(counts, pieces[1:], strict=True))
    ids = processor.tokenizer(expanded, add_special_tokens=False, return_tensors="pt")
    return {
        **ids,
        "input_features": per_clip["input_features"],
        "input_features_mask": per_clip["input_features_mask"],
    }


def _voxtral_inputs(processor: object, model: object, messages: list[dict], clips: list) -> dict:
    """Voxtral's processor takes audio only through mistral-common's chat template (not
    installed), so the Mistral instruct format is written out as text:
    `<s>[INST][BEGIN_AUDIO][AUDIO]*n text[/INST]answer</s>[INST]...[/INST]`, each clip padded
    to whole 30 s windows, n = the number of embeddings the model makes of those windows."""
    fe = processor.feature_extractor
    text, features, pending = "<s>", [], iter(clips)
    for message in messages:
        text += "[INST]" if message["role"] == "user" else ""
        for part in message["content"]:
            if part["type"] == "text":
                text += part["text"]
                continue
            mel = fe(
                next(pending),
                sampling_rate=16000,
                padding=True,
                pad_to_multiple_of=480000,
                truncation=False,
                return_tensors="pt",
            )["input_features"]
            windows = mel.reshape(fe.feature_size, -1, 3000).transpose(0, 1)
            with torch.inference_mode():
                n = model.get_audio_features(windows).pooler_output.shape[0]
            features.append(windows)
            text += "[BEGIN_AUDIO]" + processor.audio_token * n
        text += "[/INST]" if message["role"] == "user" else "</s>"
    inputs = dict(processor.tokenizer(text, add_special_tokens=False, return_tensors="pt"))
    if features:
        inputs["input_features"] = torch.cat(features)
    return inputs


def _reference_loglik(
    model: object, processor: object, name: str, request: Request
) -> dict[str, float]:
    """Summed log p of each option's tokens after the prompt, from one plain teacher-forced
    forward pass per option (no batching, no cache, no listener code)."""
    messages, clips = _user_messages(request)
    if name == "voxtral":
        prompt = _voxtral_inputs(processor, model, messages, clips)
    else:
        text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        build = _audioflamingo3_inputs if name == "audioflamingo3" else _processor_inputs
        prompt = build(processor, text, clips)
    prompt.pop("num_audio_tokens", None)  # AF3 reports it; its forward does not take it
    out = {}
    for option in request.prompt.options:
        answer = torch.tensor([processor.tokenizer.encode(option, add_special_tokens=False)])
        ids = torch.cat([prompt["input_ids"], answer], dim=1)
        inputs = {**prompt, "input_ids": ids, "attention_mask": torch.ones_like(ids)}
        with torch.inference_mode():
            logp = torch.log_softmax(model(**inputs).logits[0].float(), dim=-1)
        start = prompt["input_ids"].shape[1]  # the first option token; logits at t predict t+1
        picked = logp[start - 1 : ids.shape[1] - 1].gather(-1, answer[0][:, None])
        out[option] = float(picked.sum())
    return out


def test_score_choices_equal_plain_forward_reference(listener: HFListener) -> None:
    """The adapter's (batched) option log-likelihoods equal a teacher-forced forward pass built
    with the family's own processor on a freshly loaded copy of the model; the added
    multi-token option checks every scored position, not just the first."""
    import json

    folder = Path(listener.listener_id.removeprefix("hf:"))
    processor = transformers.AutoProcessor.from_pretrained(folder, local_files_only=True)
    architecture = json.loads((folder / "config.json").read_text())["architectures"][0]
    model = getattr(transformers, architecture).from_pretrained(folder, local_files_only=True)
    model.eval()
    reqs = [
        replace(r, prompt=replace(r.prompt, options=(*r.prompt.options, "stays the same")))
        for r in requests()
    ]
    assert len(processor.tokenizer.encode("stays the same", add_special_tokens=False)) > 2
    for request, scores in zip(reqs, listener.score_choices(reqs), strict=True):
        want = _reference_loglik(model, processor, listener.family.name, request)
        assert scores == pytest.approx(want, abs=1e-4), request.item_id


def test_hidden_states(listener: HFListener) -> None:
    reqs = requests()
    n_layers = len(listener.model.get_decoder().layers)
    for request in reqs[:3]:
        states = listener.hidden_states([request])[0]
        n_audio = states["projector"].shape[0]
        assert n_audio > 0
        d = listener.model.get_decoder().config.hidden_size
        for i in range(n_layers + 1):
            assert states[f"lm.{i}@audio"].shape == (n_audio, d)
            assert states[f"lm.{i}@answer"].shape == (d,)
        encoder = [k for k in states if k.startswith("audio_encoder.")]
        assert len(encoder) >= 2 and all(states[k].ndim == 2 for k in encoder)
    # audio positions = the audio tokens of the target clip
    enc = listener._encode(reqs[:1], None, "right")
    n_tokens = int((enc.inputs["input_ids"] == listener.audio_token_id).sum())
    assert listener.hidden_states(reqs[:1])[0]["projector"].shape[0] == n_tokens
    assert "projector" not in listener.hidden_states(reqs[3:])[0]


def test_lens_final_layer_matches_model(listener: HFListener) -> None:
    request = requests()[0]
    lens = listener.answer_lens([request])[0]
    n_layers = len(listener.model.get_decoder().layers)
    assert lens.shape == (n_layers + 1,) and np.all(np.isfinite(lens))
    enc = listener._encode([request], None, "right")
    with torch.inference_mode():
        out = listener.model(**listener._to_device(enc.inputs), use_cache=False)
    logits = out.logits.float()[0, enc.lengths[0] - 1]
    logp = torch.log_softmax(logits, -1)
    a, b = request.prompt.options[:2]
    first = []
    for option in (a, b):
        n = listener._reply_ids(request, option)
        with_option = listener._encode([request], [option], "right")
        first.append(int(with_option.inputs["input_ids"][0, with_option.lengths[0] - n]))
    assert lens[-1] == pytest.approx(float(logp[first[0]] - logp[first[1]]), abs=1e-4)


def tiny_model(name: str) -> object:
    """Families whose processors need vision packages: the model alone, for adapter checks."""
    if name == "qwen2_5_omni":
        config = transformers.Qwen2_5OmniThinkerConfig(
            audio_config=dict(**WHISPER_ENC, output_dim=32, n_window=50),
            vision_config=OMNI_VISION,
            text_config=OMNI_TEXT,
        )
        return transformers.Qwen2_5OmniThinkerForConditionalGeneration(config)
    config = transformers.Phi4MultimodalConfig(
        **TEXT,
        vision_config=PHI4_VISION,
        audio_config=PHI4_AUDIO,
        pad_token_id=0,
    )
    return transformers.Phi4MultimodalForCausalLM(config)


@pytest.mark.parametrize("name", ["qwen2_5_omni", "phi4_multimodal"])
def test_adapter_structure_without_processor(name: str) -> None:
    """Family detection, encoder hooks and the lens, on the model alone (no vision packages)."""
    from vocalgrad.listeners.hf_families import family_for

    torch.manual_seed(0)
    model = tiny_model(name).eval()
    family = family_for(model.config.model_type)
    assert family is not None and family.name == name
    assert len(family.encoder_layer_list(model)) == 2
    assert family.audio_token_id(model, None) > 0
    layers = model.get_decoder().layers
    captured = {}
    hook = layers[-1].register_forward_hook(lambda m, a, o: captured.update(out=o))
    ids = torch.randint(10, 400, (1, 12))
    with torch.inference_mode():
        logits = model(input_ids=ids, use_cache=False).logits[0, -1]
    hook.remove()
    state = captured["out"][0] if isinstance(captured["out"], tuple) else captured["out"]
    with torch.inference_mode():
        lens = family.to_logits(model, family.stream(state, None)[0, -1])
    assert torch.allclose(lens, logits, atol=1e-4)


def test_unknown_family_and_missing_model(tmp_path: Path) -> None:
    from vocalgrad.errors import ConfigError
    from vocalgrad.listeners.hf import ModelError

    (tmp_path / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ConfigError, match="supported"):
        HFListener("hf:" + str(tmp_path))
    with pytest.raises(ModelError, match="local Hugging Face cache"):
        HFListener("hf:nobody/no-such-model-vocalgrad")


def test_gemma3n_lens_merges_altup_streams() -> None:
    """Gemma3nForConditionalGeneration needs timm (vision tower); its text model does not, so
    the AltUp-merging lens is checked on Gemma3nForCausalLM, which shares the decoder."""
    from vocalgrad.listeners.hf_families import family_for

    torch.manual_seed(0)
    config = transformers.Gemma3nTextConfig(
        vocab_size=512,
        vocab_size_per_layer_input=512,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        hidden_size_per_layer_input=8,
        num_kv_shared_layers=0,
        laurel_rank=4,
        layer_types=["sliding_attention", "full_attention"],
        activation_sparsity_pattern=[0.0, 0.0],
    )
    model = transformers.Gemma3nForCausalLM(config).eval()
    family = family_for("gemma3n")
    captured = {}
    hook = (
        model.get_decoder()
        .layers[-1]
        .register_forward_hook(
            lambda m, a, o: captured.update(out=o[0] if isinstance(o, tuple) else o)
        )
    )
    with torch.inference_mode():
        logits = model(input_ids=torch.randint(3, 500, (1, 9)), use_cache=False).logits[0, -1]
    hook.remove()
    raw = captured["out"]
    assert raw.dim() == 4 and family.stream(raw, None).shape == raw.shape[1:]
    with torch.inference_mode():
        lens = family.to_logits(model, raw[..., -1, :])
    assert torch.allclose(lens.reshape(-1), logits, atol=1e-4)

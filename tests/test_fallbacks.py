"""Audio-encoder stages of a transformers listener are never dropped without a word.

Uses the tiny random Qwen2-Audio checkpoint that tests/test_hf_listeners.py builds (nothing is
downloaded). The family is told to look for an encoder path the model does not have, as a
transformers release with a renamed module tree would present it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from test_hf_listeners import build_qwen2_audio, requests  # noqa: E402

from vocalgrad.listeners import hf  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("qwen2_audio")
    build_qwen2_audio(folder)
    return folder


def test_missing_audio_encoder_warns_and_is_recorded(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = hf.HFListener("hf:" + str(checkpoint), device="cpu")
    assert "warnings" not in found.manifest() and len(found.encoder_layers) == 2
    family = found.family
    monkeypatch.setattr(
        hf, "family_for", lambda _: dataclasses.replace(family, encoder_path="audio_encoder_v2")
    )
    with pytest.warns(
        UserWarning,
        match="Qwen2AudioForConditionalGeneration: audio-encoder "
        "layers not found .*audio_encoder_v2.layers",
    ):
        listener = hf.HFListener("hf:" + str(checkpoint), device="cpu")
    [message] = listener.manifest()["warnings"]
    assert "hidden states have no audio_encoder.* stages" in message
    states = listener.hidden_states(requests()[:1])[0]
    assert not any(k.startswith("audio_encoder.") for k in states) and "lm.0@answer" in states

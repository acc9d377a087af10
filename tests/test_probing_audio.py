"""The probe pipeline on real built audio: an audio organism through the adapter, and Whisper."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from vocalgrad.listeners.adapters import DSPListener, TorchModuleListener
from vocalgrad.probing import ProbeConfig, probe_dataset
from vocalgrad.probing.diagnose import VERDICTS
from vocalgrad.probing.probes import ProbeSettings
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

FAST = ProbeSettings(seeds=2, n_boot=300, mlp_steps=150)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cache_dir) -> Path:
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("probe") / "ds"
    build(
        BuildConfig(
            n_test=4,
            n_train=4,
            categories=("volume", "voice_pitch"),
            tiers=("high",),
            curves=("linear", "jump"),
        ),
        out,
        workers=2,
    )
    return out


class MeanPoolModel(nn.Module):
    """Frame-wise projection of log-mel, then mean over time: the frames keep the direction,
    the pooled answer state cannot (a model that averages time loses it by construction)."""

    def __init__(self) -> None:
        super().__init__()
        self.frames = nn.Linear(80, 8)
        self.pool = nn.Identity()
        self.head = nn.Linear(8, 2)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        pooled = self.pool(self.frames(mel).mean(1))
        return self.head(pooled)


def log_mel(audio: np.ndarray) -> np.ndarray:
    return DSPListener().hidden_states([_req(audio)])[0][DSPListener.stage]


def _req(audio: np.ndarray):
    from vocalgrad.listeners.base import Request
    from vocalgrad.questions.prompts import build_prompt

    return Request("x", build_prompt("volume", item_id="x"), {"x": audio})


def test_audio_organism_loses_direction_by_mean_pooling(dataset: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MeanPoolModel()
    lis = TorchModuleListener(
        model,
        stages={"frames": "frames", "pool.0@answer": "pool"},
        readout=lambda out: out,
        lens_head=model.head,
        lens_stages=["pool.0@answer"],
        preprocess=log_mel,
        name="meanpool",
    )
    summary = probe_dataset(
        dataset,
        lis,
        tmp_path / "out",
        ProbeConfig(categories=("volume",), settings=FAST),
        cache=tmp_path / "cache",
    )
    vol = summary["categories"]["volume"]
    kinds = {r["kind"] for r in vol["curves"]}
    assert kinds == {"model", "random", "dsp"}
    frames = next(r for r in vol["curves"] if r["stage"] == "frames")
    pooled = next(r for r in vol["curves"] if r["stage"] == "pool.0@answer")
    assert frames["linear_lo"] > 0.5 and pooled["linear_ba"] < frames["linear_ba"] - 0.1
    assert vol["diagnosis"]["verdict"] == "lost across layers", vol["diagnosis"]["evidence"]
    items = (tmp_path / "out" / "items.csv").read_text().splitlines()
    assert items[0].startswith("category,item_id") and len(items) == 1 + vol["n_test"]


@pytest.mark.slow
def test_whisper_tiny_probe_two_categories(dataset: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from vocalgrad.errors import ConfigError
    from vocalgrad.listeners.whisper import WhisperListener

    try:  # the trimmed encoder context, as the demo probes (padded states: test_whisper.py)
        lis = WhisperListener("whisper:tiny.en+trimmed")
    except ConfigError as err:
        pytest.skip(str(err))
    summary = probe_dataset(
        dataset,
        lis,
        tmp_path / "out",
        ProbeConfig(settings=FAST, random_control=False),
        cache=tmp_path / "cache",
    )
    assert set(summary["categories"]) == {"volume", "voice_pitch"}
    for data in summary["categories"].values():
        stages = [r["stage"] for r in data["curves"]]
        assert "mel" in stages and "encoder.4" in stages and "decoder.4@answer" in stages
        assert len(data["lens"]) == 5 and data["behaviour"]["source"] == "lens at the last layer"
        assert data["diagnosis"]["verdict"] in VERDICTS
    assert (tmp_path / "out" / "curves_volume.png").is_file()

"""Planted model organisms: small torch models whose failure mode is known by construction.

Each organism reads a synthetic 16-dim "clip" (no audio, for speed) through six blocks and a
head that answers increase/decrease. The diagnosis must name how each one fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from vocalgrad.probing import ProbeConfig, TorchModuleListener, probe_rows
from vocalgrad.probing.probes import ProbeSettings

D, BLOCKS = 16, 6


class Organism(nn.Module):
    """Six linear blocks (identity unless told otherwise) and a two-logit head."""

    def __init__(self, head_dim: int, erase_from: int | None = None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(D, D) for _ in range(BLOCKS))
        self.head = nn.Linear(D, 2)
        with torch.no_grad():
            for i, block in enumerate(self.blocks):
                keep = torch.ones(D)
                if erase_from is not None and i >= erase_from:
                    keep[:2] = 0.0  # the direction feature is destroyed from here on
                block.weight.copy_(torch.diag(keep))
                block.bias.zero_()
            self.head.weight.zero_()
            self.head.bias.zero_()
            self.head.weight[0, head_dim], self.head.weight[1, head_dim] = 2.0, -2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def synthetic_rows(
    signal: str, seed: int = 0, n_sources: int = 16, per_source: int = 8
) -> list[dict]:
    """Rows with in-memory feature "audio"; half the sources train, half test, 50/50 labels.
    signal: "linear" (dim 0 carries the direction), "xor" (only sign(x0 * x1) does), "none"."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(2 * n_sources):
        offset = rng.normal(0, 0.5, D)
        for k in range(per_source):
            label = 1.0 if k % 2 == 0 else -1.0
            x = offset + rng.normal(0, 1, D)
            if signal == "linear":
                x[0] += 1.2 * label
            elif signal == "xor":
                a = rng.choice([-1.0, 1.0]) * (np.abs(rng.normal()) + 0.8)
                x[0], x[1] = a, label * np.sign(a) * (np.abs(rng.normal()) + 0.8)
            rows.append(
                {
                    "item_id": f"{signal}-{s:02d}-{k}",
                    "category": "volume",
                    "direction": "increase" if label > 0 else "decrease",
                    "source_id": f"src{s}",
                    "speaker_id": f"spk{s}",
                    "split": "train" if s < n_sources else "test",
                    "audio": x.astype(np.float32),
                }
            )
    return rows


def listener(model: Organism, name: str) -> TorchModuleListener:
    return TorchModuleListener(
        model,
        stages={f"block.{i}": f"blocks.{i}" for i in range(BLOCKS)},
        readout=lambda out: out,
        lens_head=model.head,
        name=name,
    )


ORGANISMS = {
    "present but unused": ("linear", dict(head_dim=5)),
    "lost across layers": ("linear", dict(head_dim=5, erase_from=3)),
    "only nonlinearly decodable": ("xor", dict(head_dim=5)),
    "heard and used": ("linear", dict(head_dim=0)),
    "not encoded": ("none", dict(head_dim=0)),
}
FAST = ProbeSettings(seeds=2, n_boot=300, mlp_steps=250)


@pytest.mark.parametrize("expected", list(ORGANISMS))
def test_diagnosis_names_each_planted_failure(expected: str, tmp_path: Path) -> None:
    signal, kw = ORGANISMS[expected]
    torch.manual_seed(0)
    model = Organism(**kw)
    summary = probe_rows(
        synthetic_rows(signal),
        listener(model, expected.replace(" ", "-")),
        tmp_path / "out",
        ProbeConfig(settings=FAST, dsp_control=False),
        sha="synthetic",
        cache=tmp_path / "cache",
    )
    result = summary["categories"]["volume"]
    assert result["diagnosis"]["verdict"] == expected, result["diagnosis"]["evidence"]
    assert (tmp_path / "out" / "curves_volume.png").stat().st_size > 0
    assert "Thresholds" in (tmp_path / "out" / "diagnosis.md").read_text()
    # every stage has its shuffled-label control near chance and a random-weights twin
    curves = result["curves"]
    assert {r["kind"] for r in curves} == {"model", "random"}
    assert all(abs(r["linear_control_ba"] - 0.5) < 0.15 for r in curves)

"""Planted model organisms: small torch models whose failure mode is known by construction.

Each organism reads a synthetic 16-dim "clip" (no audio, for speed) through six blocks and a
head that answers increase/decrease. The diagnosis must name how each one fails."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from vocalgrad.listeners.adapters import TorchModuleListener
from vocalgrad.probing import ProbeConfig, probe_rows
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


def test_fallbacks_are_warned_and_recorded(tmp_path: Path) -> None:
    """Eval results that lack test items used to hand behaviour to the last-layer lens without a
    word, and a lens tie (a head with no preference) used to read as "decrease": now the
    fallback warns and is recorded, a tie is no answer scored 0.5, and each verdict says how
    many items and sources it rests on (here 6 test sources, below the minimum of 10)."""
    torch.manual_seed(0)
    model = Organism(head_dim=5)
    with torch.no_grad():
        model.head.weight.zero_()  # both words equally likely everywhere: every lens score ties
    rows = synthetic_rows("linear", n_sources=6, per_source=4)
    partial = {r["item_id"]: "increase" for r in rows if r["split"] == "test"}
    missing = sorted(partial)[-1]
    del partial[missing]
    tied = TorchModuleListener(
        model,
        stages={f"block.{i}": f"blocks.{i}" for i in range(BLOCKS)},
        readout=lambda out: out,
        lens_head=model.head,
        lens_stages=[f"block.{i}" for i in range(BLOCKS)],
        name="tied",
    )
    with pytest.warns(UserWarning) as caught:
        summary = probe_rows(
            rows,
            tied,
            tmp_path / "out",
            ProbeConfig(settings=FAST, dsp_control=False),
            sha="synthetic",
            cache=tmp_path / "cache",
            behaviour=partial,
        )
    result = summary["categories"]["volume"]
    lack = (
        f"volume: the eval results lack 1 of 24 test items (e.g. {missing}); "
        "the lens at the last layer"
    )
    assert any(w.startswith(lack) for w in summary["warnings"])
    assert any("no answer for 24 of 24 test items" in w for w in summary["warnings"])
    assert {str(w.message) for w in caught} >= set(summary["warnings"])
    behaviour = result["behaviour"]
    assert behaviour["source"] == "lens at the last layer" and behaviour["n_no_answer"] == 24
    assert behaviour["ba"] == 0.5  # a tie is a guess: not "decrease", not below chance
    assert result["diagnosis"]["verdict"] != "heard and used"
    assert all(r["ties"] == 24 and r["ba"] == 0.5 for r in result["lens"])
    assert (result["n_test"], result["n_test_sources"]) == (24, 6)
    saved = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert saved["warnings"] == summary["warnings"]
    md = (tmp_path / "out" / "diagnosis.md").read_text()
    assert f"**Warning:** {lack}" in md and "| 24 items / 6 sources ⚠ |" in md
    diagnosis = (tmp_path / "out" / "diagnosis.csv").read_text().splitlines()
    assert diagnosis[0].split(",")[6:8] == ["n_test", "n_test_sources"]
    # the report reads it back: lens layers join their stage's panel, warnings come along
    from vocalgrad.report.collect import load_probe

    probe = load_probe(tmp_path / "out")
    assert probe.warnings == summary["warnings"] and probe.listener == "torch:tied"
    assert {(r["stage"], r["layer_index"]) for r in probe.layers if r["probe"] == "lens"} == {
        ("block", i) for i in range(BLOCKS)
    }

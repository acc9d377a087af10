"""The report's remedies section on tuned runs written in the run-folder format."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from test_report import _row, _write_run

from vocalgrad.report import build_sections

CATS = ("voice_pitch", "volume")
SOURCES = 12


def _answers(listener: str, accuracy: dict[str, float], seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        _row(listener, cat, "mid", 1.0, d, s, bool(rng.random() < accuracy[cat]))
        for cat in CATS
        for s in range(SOURCES)
        for d in ("increase", "decrease")
        for _ in range(2)
    ]


def _tuned(folder: Path, method: str, trained: str, accuracy: dict[str, float], seed: int) -> Path:
    listener = f"whisper:tiny.en+{method}[{trained}]"
    run = _write_run(folder, listener, _answers(listener, accuracy, seed))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["finetune"] = {
        "base": {"spec": "whisper:tiny.en", "listener_id": "whisper:tiny.en", "revision": "r"},
        "method": method,
        "train_categories": [trained],
    }
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def _diagnosis(folder: Path, verdicts: dict[str, str]) -> Path:
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"listener": "whisper:tiny.en"}))
    with (folder / "diagnosis.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, ["category", "verdict", "n_test", "n_test_sources"])
        w.writeheader()
        w.writerows(
            {"category": c, "verdict": v, "n_test": 48, "n_test_sources": SOURCES}
            for c, v in verdicts.items()
        )
    with (folder / "layers.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["category", "stage", "layer_index", "probe", "balanced_accuracy", "ci_lo", "ci_hi"]
        )
        w.writerow(["voice_pitch", "decoder@answer", 2, "linear", 0.6, 0.5, 0.7])
        w.writerow(["voice_pitch", "decoder@answer", 4, "linear", 0.9, 0.8, 0.97])
        w.writerow(["voice_pitch", "encoder", 4, "linear", 0.99, 0.95, 1.0])
    return folder


def test_remedies_section_tables_maps_and_prediction(tmp_path):
    base = _write_run(
        tmp_path / "base", "whisper:tiny.en", _answers("whisper:tiny.en", {c: 0.5 for c in CATS}, 0)
    )
    runs = [
        base,
        # pitch: present but unused -> the head recovers it; volume: lost -> the head cannot
        _tuned(
            tmp_path / "head-pitch", "head", "voice_pitch", {"voice_pitch": 0.95, "volume": 0.5}, 1
        ),
        _tuned(tmp_path / "head-volume", "head", "volume", {"voice_pitch": 0.5, "volume": 0.5}, 2),
        _tuned(tmp_path / "lora-volume", "lora", "volume", {"voice_pitch": 0.7, "volume": 0.97}, 3),
    ]
    probe = _diagnosis(
        tmp_path / "probe", {"voice_pitch": "present but unused", "volume": "lost across layers"}
    )
    section = next(
        s for s in build_sections(runs, probe_dirs=[probe], n_boot=200) if s.id == "remedies"
    )
    tables = [b for b in section.blocks if hasattr(b, "rows") and b.header]
    in_domain, prediction = tables[0], tables[-1]
    assert in_domain.header == ["trained on", "before tuning", "head", "lora"]
    assert [r[0] for r in in_domain.rows] == ["voice_pitch", "volume"]
    assert in_domain.rows[1][3].startswith("0.9") and in_domain.rows[1][2] != "–"
    held = {r[0]: r for r in prediction.rows}
    assert held["voice_pitch"][3] == "head recovers" and held["voice_pitch"][-1] == "yes"
    assert held["volume"][3] == "head cannot; deeper can" and held["volume"][-1] == "yes"
    # the head reads only the last answer state: its probe there is the head's ceiling
    assert held["voice_pitch"][2] == "0.90 [0.80, 0.97] (decoder.4)" and held["volume"][2] == "–"
    figures = [b for b in section.blocks if getattr(b, "png", None)]
    assert len(figures) == 2  # one generalisation map per method
    assert "2 of 2" in section.glance


def test_remedies_section_says_when_there_is_nothing_to_show(tmp_path):
    base = _write_run(
        tmp_path / "base", "whisper:tiny.en", _answers("whisper:tiny.en", {c: 0.5 for c in CATS}, 0)
    )
    section = next(s for s in build_sections([base], n_boot=50) if s.id == "remedies")
    assert "No tuned runs" in section.blocks[0].text

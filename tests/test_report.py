"""The report: every section and figure present, self-contained, markdown too, and a real
headless-browser render that is not blank."""

from __future__ import annotations

import base64
import csv
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from vocalgrad.evaluation.adaptive import SimulatedObserver, run_adaptive, save_adaptive
from vocalgrad.report import SECTION_IDS, write_report
from vocalgrad.stimuli.plan import design_magnitudes

CATEGORIES = ("voice_pitch", "volume", "voice_clarity")
TIERS = {"voice_pitch": (1.0, 2.0, 3.0), "volume": (6.0, 12.0, 18.0), "voice_clarity": (5000.0, 2500.0, 1200.0)}
THRESHOLDS = {"voice_pitch": 0.8, "volume": 3.0, "voice_clarity": 2500.0}
FLIP = {"increase": "decrease", "decrease": "increase"}
N_SOURCES = 6


def _row(listener: str, cat: str, tier: str, magnitude: float, direction: str, source: int,
         correct: bool, control: str = "none") -> dict:
    predicted = direction if correct else FLIP[direction]
    item = f"{cat}-{tier}-{direction}-{source}"
    return {
        "key": f"{item}|default|{control}|choice", "item_id": item, "listener": listener,
        "revision": "test", "variant": "default", "control": control, "mode": "choice",
        "category": cat, "direction": direction, "tier": tier, "curve": "linear",
        "magnitude": magnitude, "source_id": f"src{source}", "speaker_id": f"spk{source // 2}",
        "split": "test", "predicted": predicted, "llr": 1.0 if predicted == "increase" else -1.0,
        "correct": correct, "error": None,
    }


def _write_run(folder: Path, listener: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    manifest = {"listener": {"listener": listener, "revision": "test", "sample_rate": 16000},
                "dataset": str(folder.parent / "dataset"), "dataset_sha256": "ab" * 32,
                "config": {"mode": "choice", "variants": ["default"], "controls": ["reversed"]},
                "modes": ["choice"], "versions": {"vocalgrad": "0.1.0", "numpy": np.__version__},
                "command": f"vocalgrad eval dataset --listener {listener}"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _listener_rows(listener: str, observe, seed: int, bias: float = 0.0) -> list[dict]:
    """Tiered rows (low/mid/high) and a 6-level sweep (p1..p6) answered by `observe`."""
    rng = np.random.default_rng(seed)
    rows = []
    for cat in CATEGORIES:
        levels = [*zip(("low", "mid", "high"), TIERS[cat], strict=True),
                  *((f"p{i + 1}", m) for i, m in enumerate(design_magnitudes(cat)))]
        for tier, magnitude in levels:
            for source in range(N_SOURCES):
                for direction in ("increase", "decrease"):
                    reps = 3 if tier.startswith("p") else 1
                    for rep in range(reps):
                        correct = observe(cat, magnitude, rng)
                        if bias and rng.random() < bias:  # leans towards "increase"
                            correct = direction == "increase"
                        r = _row(listener, cat, tier, magnitude, direction, source, correct)
                        r["key"] += f"|{rep}"
                        r["item_id"] += f"-{rep}"
                        rows.append(r)
    return rows


def _dataset(folder: Path) -> Path:
    rng = np.random.default_rng(5)
    (folder / "test").mkdir(parents=True)
    rows = []
    for cat in CATEGORIES:
        for source in range(N_SOURCES):
            for direction in ("increase", "decrease"):
                rows.append({"item_id": f"{cat}{source}{direction}", "category": cat, "direction": direction,
                             "tier": "mid", "split": "test", "source_id": f"src{source}",
                             "speaker_id": f"spk{source // 2}", "domain": "builtin", "verified": True,
                             "measured_change": float(rng.normal(1, 0.2)),
                             "confound_loudness_change_db": float(rng.normal(0, 0.3)),
                             "confound_level_slope_change_db": float(rng.normal(0, 0.5)),
                             "confound_duration_change_ratio": float(1 + rng.normal(0, 0.01)),
                             "confound_f0_change_st": float(rng.normal(0, 0.1)),
                             "confound_clipping_ratio": 0.0})
    (folder / "test" / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "build.json").write_text(json.dumps({"config": {"source": "builtin", "sample_rate": 16000},
                                                   "seed": 0, "content_sha256": "cd" * 32}))
    (folder / "build_report.json").write_text(json.dumps(
        {"verification_agreement": {"voice_pitch": 0.98, "volume": 1.0, "voice_clarity": 0.85}}))
    (folder / "README.md").write_text("# card\n\nLicence: see https://example.org/licence\n")
    return folder


def _probe(folder: Path) -> Path:
    folder.mkdir()
    with (folder / "layers.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["category", "stage", "layer_index", "probe", "balanced_accuracy", "ci_lo", "ci_hi"])
        for cat in CATEGORIES:
            for stage, n in (("encoder", 5), ("decoder", 4)):
                for i in range(n):
                    for probe, acc in (("linear", 0.6 + 0.06 * i), ("mlp", 0.62 + 0.06 * i),
                                       ("shuffled", 0.5), ("random_weights", 0.55), ("lens", 0.5 + 0.03 * i)):
                        w.writerow([cat, stage, i, probe, acc, acc - 0.05, acc + 0.05])
                w.writerow([cat, stage, 0, "dsp", 0.9, 0.85, 0.95])
    (folder / "diagnosis.csv").write_text(
        "category,verdict,best_stage,best_layer\nvoice_pitch,lost in decoder,encoder,4\n"
        "volume,represented and used,encoder,3\nvoice_clarity,never encoded,encoder,0\n")
    (folder / "manifest.json").write_text(json.dumps({"listener": {"listener": "model-a"}}))
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("report")
    good = {c: SimulatedObserver(c, THRESHOLDS[c], beta=0.4, lapse=0.02) for c in CATEGORIES}
    human = {c: SimulatedObserver(c, THRESHOLDS[c] * (0.6 if c != "voice_clarity" else 1.4), beta=0.3)
             for c in CATEGORIES}

    def hears(observers):
        return lambda cat, m, rng: bool(rng.random() < observers[cat].p_correct(m))

    model_rows = _listener_rows("model-a", hears(good), 1)
    model_rows += [{**r, "key": r["key"] + "|rev", "item_id": r["item_id"] + "~r", "control": "reversed",
                    "reversed_of": r["item_id"], "direction": FLIP[r["direction"]],
                    "predicted": FLIP[r["predicted"]]} for r in model_rows[:60]]
    runs = [
        _write_run(root / "run-model", "model-a", model_rows),
        _write_run(root / "run-chance", "baseline:random",
                   _listener_rows("baseline:random", lambda c, m, rng: bool(rng.random() < 0.5), 2, bias=0.8)),
        _write_run(root / "run-human", "human", _listener_rows("human", hears(human), 3)),
    ]
    adaptive_dir = root / "run-adaptive"
    results = [run_adaptive(c, SimulatedObserver(c, THRESHOLDS[c], seed=9), "quest", max_trials=30)
               for c in CATEGORIES]
    save_adaptive(adaptive_dir, "model-a", results, manifest={"listener": {"listener": "model-a"}})
    runs.append(adaptive_dir)
    return {"runs": runs, "dataset": _dataset(root / "dataset"), "probe": _probe(root / "probe"),
            "root": root}


@pytest.fixture(scope="module")
def html_report(inputs) -> Path:
    return write_report(inputs["runs"], inputs["root"] / "report.html", dataset=inputs["dataset"],
                        probe_dirs=[inputs["probe"]], n_boot=200, fit_boot=100)


def test_html_has_every_section_and_figure_and_is_self_contained(html_report):
    text = html_report.read_text()
    for sid in SECTION_IDS:
        assert f'<section id="{sid}">' in text, sid
    figures = re.findall(r'<figure id="fig-([\w-]+)"><img alt="[^"]*" src="data:image/png;base64,([^"]+)"', text)
    names = {name for name, _ in figures}
    assert {"headline", "bias", "psychometric", "probing-1"} <= names
    for _, data in figures:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"https?://", text), "the report must reference nothing outside itself"
    assert "<script" not in text and "<link" not in text
    # content a reviewer looks for
    assert "<td>human</td>" in text and "<td>reference</td>" in text and "★" in text
    assert "no threshold within range" in text  # the chance-level listener
    assert "semitones" in text and "dB" in text and "Hz" in text
    assert "model-a (adaptive)" in text and "quest, 30 trials" in text
    thresholds = text.split('<section id="psychometric">')[1].split("<figure")[0]
    assert "e+0" not in thresholds and "Hz [" in thresholds  # 2460 Hz, not 2.46e+03 Hz
    assert "lost in decoder" in text  # the diagnosis table
    assert "verification below 90% for voice_clarity" in text
    assert "vocalgrad eval dataset --listener model-a" in text  # commands in provenance


def test_markdown_report_writes_pngs_next_to_it(inputs, tmp_path):
    out = write_report(inputs["runs"][:3], tmp_path / "report.md", fmt="md", n_boot=100, fit_boot=50)
    text = out.read_text()
    for sid in SECTION_IDS:
        assert f'<a id="{sid}"></a>' in text
    pngs = sorted(p.name for p in tmp_path.glob("report-*.png"))
    assert {"report-headline.png", "report-bias.png", "report-psychometric.png"} <= set(pngs)
    for name in pngs:
        assert f"]({name})" in text
    assert "No probe output given" in text  # skipped gracefully
    assert "| model-a |" in text or "model-a" in text


def test_report_without_psychometric_or_probe_data_still_has_all_sections(inputs, tmp_path):
    rows = [json.loads(line) for line in (inputs["runs"][1] / "results.jsonl").read_text().splitlines()]
    tiered = [r for r in rows if not r["tier"].startswith("p")]
    run = _write_run(tmp_path / "run", "baseline:random", tiered)
    text = write_report([run], tmp_path / "r.html", n_boot=50).read_text()
    for sid in SECTION_IDS:
        assert f'<section id="{sid}">' in text
    assert "section skipped" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install -y chromium)")
def test_headless_browser_renders_the_report(html_report, tmp_path):
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1200,4000", html_report.as_uri()],
                   check=True, capture_output=True, timeout=60)
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[0] >= 4000 and img.shape[1] >= 1200
    grey = img[..., :3].mean(axis=2)
    # not blank: a real page has text, tables and figures, i.e. many distinct tones
    assert grey.std() > 0.05 and (grey < 0.5).mean() > 0.01
    if os.environ.get("VOCALGRAD_SCREENSHOT"):  # keep it to look at
        shutil.copy(shot, os.environ["VOCALGRAD_SCREENSHOT"])


def test_probe_pipeline_output_is_read_in_long_format(tmp_path):
    from vocalgrad.report.collect import load_probe

    (tmp_path / "curves.csv").write_text(
        "category,stage,order,kind,linear_ba,linear_lo,linear_hi,linear_control_ba,linear_control_lo,"
        "linear_control_hi,mlp_ba,mlp_lo,mlp_hi\n"
        "volume,encoder.2,2,model,0.8,0.7,0.9,0.5,0.4,0.6,0.82,0.72,0.92\n"
        "volume,lm.12@audio,5,model,0.6,0.5,0.7,0.5,0.4,0.6,0.61,0.51,0.71\n"
        "volume,dsp,0,dsp,0.95,0.9,1.0,,,,,,\n")
    (tmp_path / "lens.csv").write_text("category,layer,ba,ba_lo,ba_hi\nvolume,lm.12@audio,0.55,0.45,0.65\n")
    probe = load_probe(tmp_path)
    got = {(r["stage"], r["layer_index"], r["probe"]): r["balanced_accuracy"] for r in probe.layers}
    assert got[("encoder", 2, "linear")] == 0.8 and got[("encoder", 2, "shuffled")] == 0.5
    assert got[("lm@audio", 12, "mlp")] == 0.61 and got[("lm@audio", 12, "lens")] == 0.55
    assert got[("dsp", 0, "dsp")] == 0.95
    assert load_probe(tmp_path / "missing") is None

"""The report: every section and figure present, self-contained, markdown too, and a real
headless-browser render that is not blank."""

from __future__ import annotations

import base64
import csv
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import chromium_path, needs_chromium

from vocalgrad.dataset import content_sha256
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.adaptive import SimulatedObserver, run_adaptive, save_adaptive
from vocalgrad.probing.figures import by_category, curve_figure
from vocalgrad.report import SECTION_IDS, write_report
from vocalgrad.report.collect import load_probe
from vocalgrad.stimuli.plan import design_magnitudes

CATEGORIES = ("voice_pitch", "volume", "voice_clarity")
TIERS = {
    "voice_pitch": (1.0, 2.0, 3.0),
    "volume": (6.0, 12.0, 18.0),
    "voice_clarity": (5000.0, 2500.0, 1200.0),
}
THRESHOLDS = {"voice_pitch": 0.8, "volume": 3.0, "voice_clarity": 2500.0}
FLIP = {"increase": "decrease", "decrease": "increase"}
N_SOURCES = 6


def _row(
    listener: str,
    cat: str,
    tier: str,
    magnitude: float,
    direction: str,
    source: int,
    correct: bool,
    control: str = "none",
) -> dict:
    predicted = direction if correct else FLIP[direction]
    item = f"{cat}-{tier}-{direction}-{source}"
    return {
        "key": f"{item}|default|{control}|choice",
        "item_id": item,
        "listener": listener,
        "revision": "test",
        "variant": "default",
        "control": control,
        "mode": "choice",
        "category": cat,
        "direction": direction,
        "tier": tier,
        "curve": "linear",
        "magnitude": magnitude,
        "source_id": f"src{source}",
        "speaker_id": f"spk{source // 2}",
        "split": "test",
        "predicted": predicted,
        "llr": 1.0 if predicted == "increase" else -1.0,
        "correct": correct,
        "error": None,
    }


def _write_run(folder: Path, listener: str, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    dataset = folder.parent / "dataset"
    manifest = {
        "listener": {"listener": listener, "revision": "test", "sample_rate": 16000},
        "dataset": str(dataset),
        # made on the dataset beside it, where there is one
        "dataset_sha256": content_sha256(dataset) if dataset.is_dir() else "ab" * 32,
        "config": {"mode": "choice", "variants": ["default"], "controls": ["reversed"]},
        "modes": ["choice"],
        "versions": {"vocalgrad": "0.1.0", "numpy": np.__version__},
        "command": f"vocalgrad eval dataset --listener {listener}",
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def _listener_rows(listener: str, observe, seed: int, bias: float = 0.0) -> list[dict]:
    """Tiered rows (low/mid/high) and a 6-level sweep (p1..p6) answered by `observe`."""
    rng = np.random.default_rng(seed)
    rows = []
    for cat in CATEGORIES:
        levels = [
            *zip(("low", "mid", "high"), TIERS[cat], strict=True),
            *((f"p{i + 1}", m) for i, m in enumerate(design_magnitudes(cat))),
        ]
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
                rows.append(
                    {
                        "item_id": f"{cat}{source}{direction}",
                        "category": cat,
                        "direction": direction,
                        "tier": "mid",
                        "split": "test",
                        "source_id": f"src{source}",
                        "speaker_id": f"spk{source // 2}",
                        "domain": "builtin",
                        "verified": True,
                        "measured_change": float(rng.normal(1, 0.2)),
                        "confound_loudness_change_db": float(rng.normal(0, 0.3)),
                        "confound_level_slope_change_db": float(rng.normal(0, 0.5)),
                        "confound_duration_change_ratio": float(1 + rng.normal(0, 0.01)),
                        "confound_f0_change_st": float(rng.normal(0, 0.1)),
                        "confound_clipping_ratio": 0.0,
                    }
                )
    (folder / "test" / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "build.json").write_text(
        json.dumps(
            {
                "config": {"source": "builtin", "sample_rate": 16000},
                "seed": 0,
                "content_sha256": "cd" * 32,
            }
        )
    )
    (folder / "build_report.json").write_text(
        json.dumps(
            {"verification_agreement": {"voice_pitch": 0.98, "volume": 1.0, "voice_clarity": 0.85}}
        )
    )
    (folder / "README.md").write_text("# card\n\nLicence: see https://example.org/licence\n")

    def audited(accuracy: float, passes: bool, reasons: list[str]) -> dict:
        return {
            "shortcut_accuracy": 0.51,
            "shortcut_ci": [0.47, 0.55],
            "constant_auc": 0.52,
            "order_free": {"accuracy": accuracy, "ci": [accuracy - 0.06, accuracy + 0.06]},
            "one_end": {"end": "start", "accuracy": 0.97, "lo": 0.93, "hi": 1.0},
            "passes": passes,
            "reasons": reasons,
        }

    volume = audited(0.7, False, ["order-free accuracy 0.70 > 0.60"])
    volume["gates"] = {
        "order_free": {
            "gate": "order_free", "statistic": "LR accuracy", "value": 0.7, "null_p95": 0.531,
            "needed": 0.556, "p_fwer": 0.002, "fails": True,
            "redrawn": {
                "draws": 30, "mean": 0.66, "sd": 0.03, "min": 0.6, "max": 0.71, "gate": 0.6,
                "above_gate": 25,
            },
        },
    }  # fmt: skip
    family = {
        "method": "max-T permutation (Westfall-Young, single step), one-sided",
        "gates": 5, "draws": 200, "alpha": 0.05, "critical_z": 3.1, "p_resolution": 1 / 201,
        "needed": {"accuracy": 0.556, "auc": 0.64}, "cannot_fail": [],
        "recommended_test_sources": None,
    }  # fmt: skip
    (folder / "audit.json").write_text(
        json.dumps(
            {
                "per_category": {"voice_pitch": audited(0.52, True, []), "volume": volume},
                "family": family,
            }
        )
    )
    return folder


def _probe(folder: Path) -> Path:
    folder.mkdir()
    with (folder / "layers.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["category", "stage", "layer_index", "probe", "balanced_accuracy", "ci_lo", "ci_hi"]
        )
        for cat in CATEGORIES:
            for stage, n in (("encoder", 5), ("decoder", 4)):
                for i in range(n):
                    for probe, acc in (
                        ("linear", 0.6 + 0.06 * i),
                        ("mlp", 0.62 + 0.06 * i),
                        ("shuffled", 0.5),
                        ("random_weights", 0.55),
                        ("lens", 0.5 + 0.03 * i),
                    ):
                        w.writerow([cat, stage, i, probe, acc, acc - 0.05, acc + 0.05])
                w.writerow([cat, stage, 0, "dsp", 0.9, 0.85, 0.95])
    (folder / "diagnosis.csv").write_text(
        "category,verdict,best_stage,best_layer,n_test,n_test_sources\n"
        "voice_pitch,lost in decoder,encoder,4,96,24\nvolume,represented and used,encoder,3,96,24\n"
        "voice_clarity,never encoded,encoder,0,96,24\n"
    )
    (folder / "manifest.json").write_text(json.dumps({"listener": {"listener": "model-a"}}))
    return folder


WHISPER_STAGES = [
    "mel",
    *(f"encoder.{i}" for i in range(5)),
    *(f"decoder.{i}@answer" for i in range(5)),
]
LENS_WARNING = "volume: the eval results lack 3 of 16 test items (e.g. x); the lens is used instead"


def _pipeline_probe(folder: Path) -> Path:
    """`vocalgrad probe` output shaped like the demo's Whisper run (mel, 5 encoder and 5 decoder
    layers, their random-weights twins, a DSP reference, lens per decoder layer): it drew twelve
    panels in one row, five of them empty."""
    folder.mkdir()
    cols = [
        "category",
        "stage",
        "order",
        "kind",
        "late",
        "linear_ba",
        "linear_lo",
        "linear_hi",
        "linear_control_ba",
        "linear_control_lo",
        "linear_control_hi",
        "mlp_ba",
        "mlp_lo",
        "mlp_hi",
        "n_test",
    ]
    curves, lens = [], []
    for cat in ("voice_pitch", "volume"):
        for k, stage in enumerate(WHISPER_STAGES):
            ba = 0.6 + 0.03 * k
            curves.append(
                [
                    cat,
                    stage,
                    k,
                    "model",
                    k > 7,
                    ba,
                    ba - 0.1,
                    ba + 0.1,
                    0.5,
                    0.4,
                    0.6,
                    ba + 0.01,
                    ba - 0.09,
                    ba + 0.11,
                    16,
                ]
            )
            curves.append(
                [
                    cat,
                    f"random:{stage}",
                    -1,
                    "random",
                    False,
                    0.55,
                    0.45,
                    0.65,
                    "",
                    "",
                    "",
                    "",
                    "",
                    "",
                    16,
                ]
            )
        curves.append(
            [cat, "dsp:logmel", -1, "dsp", False, 0.8, 0.7, 0.9, "", "", "", "", "", "", 16]
        )
        lens += [
            [cat, i, f"decoder.{i}@answer", 0.5 + 0.02 * i, 0.45, 0.6, 0.5, 0.5, 0]
            for i in range(5)
        ]
    for name, header, rows in (
        ("curves.csv", cols, curves),
        (
            "lens.csv",
            ["category", "layer", "stage", "ba", "ba_lo", "ba_hi", "auc", "increase_rate", "ties"],
            lens,
        ),
    ):
        with (folder / name).open("w", newline="") as f:
            csv.writer(f).writerows([header, *rows])
    (folder / "diagnosis.csv").write_text(
        "category,verdict,behaviour_ba,n_test,n_test_sources,evidence\n"
        "voice_pitch,present but unused,0.5,16,4,x\nvolume,heard and used,0.8,16,4,y\n"
    )
    (folder / "summary.json").write_text(
        json.dumps({"listener": "whisper:tiny.en", "warnings": [LENS_WARNING]})
    )
    return folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("report")
    good = {c: SimulatedObserver(c, THRESHOLDS[c], beta=0.4, lapse=0.02) for c in CATEGORIES}
    human = {
        c: SimulatedObserver(c, THRESHOLDS[c] * (0.6 if c != "voice_clarity" else 1.4), beta=0.3)
        for c in CATEGORIES
    }

    def hears(observers):
        return lambda cat, m, rng: bool(rng.random() < observers[cat].p_correct(m))

    dataset = _dataset(root / "dataset")  # first: the runs record its content hash

    model_rows = _listener_rows("model-a", hears(good), 1)
    model_rows += [
        {
            **r,
            "key": r["key"] + "|rev",
            "item_id": r["item_id"] + "~r",
            "control": "reversed",
            "reversed_of": r["item_id"],
            "direction": FLIP[r["direction"]],
            "predicted": FLIP[r["predicted"]],
        }
        for r in model_rows[:60]
    ]
    runs = [
        _write_run(root / "run-model", "model-a", model_rows),
        _write_run(
            root / "run-chance",
            "baseline:random",
            _listener_rows(
                "baseline:random", lambda c, m, rng: bool(rng.random() < 0.5), 2, bias=0.8
            ),
        ),
        _write_run(root / "run-human", "human", _listener_rows("human", hears(human), 3)),
    ]
    adaptive_dir = root / "run-adaptive"
    results = [
        run_adaptive(c, SimulatedObserver(c, THRESHOLDS[c], seed=9), "quest", max_trials=30)
        for c in CATEGORIES
    ]
    save_adaptive(adaptive_dir, "model-a", results, manifest={"listener": {"listener": "model-a"}})
    runs.append(adaptive_dir)
    return {
        "runs": runs,
        "dataset": dataset,
        "probe": _probe(root / "probe"),
        "pipeline_probe": _pipeline_probe(root / "pipeline-probe"),
        "root": root,
    }


@pytest.fixture(scope="module")
def html_report(inputs) -> Path:
    return write_report(
        inputs["runs"],
        inputs["root"] / "report.html",
        dataset=inputs["dataset"],
        probe_dirs=[inputs["probe"], inputs["pipeline_probe"]],
        n_boot=200,
        fit_boot=100,
    )


def test_html_has_every_section_and_figure_and_is_self_contained(html_report):
    text = html_report.read_text()
    for sid in SECTION_IDS:
        assert f'<section id="{sid}">' in text, sid
    figures = re.findall(
        r'<figure id="fig-([\w-]+)"><img alt="[^"]*" src="data:image/png;base64,([^"]+)"', text
    )
    names = {name for name, _ in figures}
    assert {"model-model-a", "bias", "psychometric", "probing-1-volume"} <= names
    assert {"probing-2-voice_pitch", "probing-2-volume"} <= names  # one figure per category
    for _, data in figures:
        assert base64.b64decode(data)[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"https?://", text), "the report must reference nothing outside itself"
    # one inline script (the leaderboard's sorting), nothing loaded from elsewhere
    assert text.count("<script") == 1 and "<script>" in text and "<link" not in text
    # content a reviewer looks for
    assert "<td>human</td>" in text and "<td>reference</td>" in text and "★" in text
    assert "no threshold within range" in text  # the chance-level listener
    assert "semitones" in text and "dB" in text and "Hz" in text
    assert "model-a (adaptive)" in text and "quest, 30 trials" in text
    thresholds = text.split('<section id="psychometric">')[1].split("<figure")[0]
    assert "e+0" not in thresholds and "Hz [" in thresholds  # 2460 Hz, not 2.46e+03 Hz
    assert "lost in decoder" in text  # the diagnosis table
    assert "verification below 90% for voice_clarity" in text
    # the build's shortcut audit, failures named where a reader looks first
    assert "The shortcut audit fails volume." in text
    audit = _section(text, "dataset").split("The shortcut audit of this build")[0]
    assert "0.70 [0.64, 0.76]" in audit and "fails: order-free accuracy 0.70 &gt; 0.60" in audit
    assert "redrawn" not in audit  # a failing gate's redraw is the gates table's
    assert "0.97 [0.93, 1.00] (start)" in audit
    # each gate: its statistic, its null at this size, what fails it, its family-wise p
    gates = _section(text, "dataset").split("The shortcut audit of this build")[1]
    assert "<td>volume</td><td>order-free</td><td>LR accuracy 0.700</td><td>0.531</td>" in gates
    assert "<td>0.556</td><td>0.002</td><td>FAIL</td>" in gates
    assert (
        "<td>FAIL</td><td>redrawn 0.66 +- 0.03 [0.60, 0.71], above 0.60 in 25 of 30</td>" in gates
    )
    assert "must reach at least LR accuracy 0.556" in gates
    assert "vocalgrad eval dataset --listener model-a" in text  # commands in provenance


def test_the_warnings_box_lists_a_failed_shortcut_audit(html_report):
    """The fixture's build fails its audit on volume: the Warnings box at the top says so and
    points to the dataset card, not only the card's own glance line."""
    text = html_report.read_text()
    top = text.split('<div class="warnings" id="warnings">')[1].split("</div>")[0]
    failed = "The dataset fails its shortcut audit on volume: a listener may score above chance"
    assert top.count(failed) == 1
    assert '<a href="#dataset">' in top.split(failed)[1].split("</li>")[0]


def _section(text: str, sid: str) -> str:
    return text.split(f'<section id="{sid}">')[1].split("</section>")[0]


def test_report_says_what_each_number_rests_on_and_warns_below_the_minimum(html_report):
    """Every accuracy, d' and verdict table has its items and sources; the fixture's runs have
    6 sources and the Whisper-like probe 4, below the stated minimum of 10: the report warns
    once per distinct problem, at the top, naming the sections it affects (each section only
    points to it), and the probe run's own warnings travel with it."""
    text = html_report.read_text()
    top = text.split('<div class="warnings" id="warnings">')[1].split("</div>")[0]
    few = "6 sources per dimension for every listener (under 10)"
    assert top.count(few) == 1 and text.count(few) == 1
    where = top.split(few)[1].split("</li>")[0]
    assert '<a href="#headline">Headline</a>' in where and '<a href="#bias">' in where
    for sid in ("headline", "bias"):
        section = _section(text, sid)
        assert "<th>items</th><th>sources</th>" in section
        assert f"<td>{N_SOURCES}</td>" in section  # the sources column
        assert 'class="warnref"' in section and 'href="#warning-1"' in section
    probing = _section(text, "probing")
    assert "<td>16 / 4 ⚠</td>" in probing and "<td>96 / 24</td>" in probing
    assert "whisper:tiny.en probe verdicts: 4 sources for every dimension (under 10)" in top
    assert f"whisper:tiny.en: {LENS_WARNING}" in top and "model-a probe verdicts" not in top
    # sources of the runs, of the probe, the probe's own note, the dataset's failed audit
    assert top.count("<li") == 4


def test_probe_figure_is_a_grid_of_stage_families_without_empty_panels(inputs):
    """The demo's 12-in-a-row figure, 5 panels empty: now one panel per stage family (mel,
    encoder, decoder at the answer position; random weights and lens join their family, the
    DSP reference is a line on each), every panel with data, readable widths."""
    probe = load_probe(inputs["pipeline_probe"])
    fig = curve_figure(by_category(probe.layers)["volume"], probe.listener)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["mel: 1 layer", "encoder: 5 layers", "decoder (answer position): 5 layers"]
    for ax in fig.axes:
        chance = [ln for ln in ax.lines if list(ln.get_ydata()) == [0.5, 0.5]]
        assert len(ax.lines) - len(chance) >= 2, ax.get_title()  # a probe and the DSP line
        assert ax.get_window_extent().width >= 300  # figure pixels (the report scales by <= 1)
    assert fig.get_figwidth() * fig.dpi <= 1600 and len(fig.legends) == 1
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(labels) == len(set(labels)) and "control: random weights" in labels
    assert "lens readout" in labels and "DSP features (no model)" in labels


def test_markdown_report_writes_pngs_next_to_it(inputs, tmp_path):
    out = write_report(
        inputs["runs"][:3], tmp_path / "report.md", fmt="md", n_boot=100, fit_boot=50
    )
    text = out.read_text()
    for sid in SECTION_IDS:
        assert f'<a id="{sid}"></a>' in text
    pngs = sorted(p.name for p in tmp_path.glob("report-*.png"))
    assert {"report-model-model-a.png", "report-bias.png", "report-psychometric.png"} <= set(pngs)
    for name in pngs:
        assert f"]({name})" in text
        stem = tmp_path / name.removesuffix(".png")  # every figure for papers, with its numbers
        assert stem.with_suffix(".svg").read_bytes().lstrip().startswith(b"<?xml")
        assert stem.with_suffix(".pdf").read_bytes().startswith(b"%PDF")
        assert len(stem.with_suffix(".csv").read_text().splitlines()) >= 2
    assert "No probe output given" in text  # skipped gracefully
    assert "| model-a |" in text or "model-a" in text


def test_a_figure_file_that_cannot_be_written_fails_the_report(inputs, tmp_path, monkeypatch):
    """The SVGs and PDFs are written by child processes beside the page: a child that fails
    fails the report, which names the kind, and the other kind is still written."""
    import vocalgrad.report.render as render

    drawn = render.export

    def export(figure, kind):
        if kind == "pdf":
            raise OSError(28, "No space left on device")
        return drawn(figure, kind)

    monkeypatch.setattr(render, "export", export)
    with pytest.raises(OSError, match=r"pdf \(exit status 1\)"):
        write_report(inputs["runs"][:2], tmp_path / "report.html", n_boot=50, fit_boot=20)
    assert list(tmp_path.glob("report-*.svg")) and not list(tmp_path.glob("report-*.pdf"))


def test_report_without_psychometric_or_probe_data_still_has_all_sections(inputs, tmp_path):
    rows = [
        json.loads(line) for line in (inputs["runs"][1] / "results.jsonl").read_text().splitlines()
    ]
    tiered = [r for r in rows if not r["tier"].startswith("p")]
    run = _write_run(tmp_path / "run", "baseline:random", tiered)
    text = write_report([run], tmp_path / "r.html", n_boot=50).read_text()
    for sid in SECTION_IDS:
        assert f'<section id="{sid}">' in text
    assert "section skipped" in text


@needs_chromium
def test_headless_browser_renders_the_report(html_report, tmp_path):
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            str(chromium_path()),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1200,4000",
            html_report.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    from matplotlib.image import imread

    img = imread(shot)
    assert img.shape[0] >= 4000 and img.shape[1] >= 1200
    grey = img[..., :3].mean(axis=2)
    # not blank: a real page has text, tables and figures, i.e. many distinct tones
    assert grey.std() > 0.05 and (grey < 0.5).mean() > 0.01
    if os.environ.get("VOCALGRAD_SCREENSHOT"):  # keep it to look at
        shutil.copy(shot, os.environ["VOCALGRAD_SCREENSHOT"])


MEASURE = """<script>
const out = [...document.querySelectorAll("figure img")].map(img => ({
  id: img.parentElement.id, width: img.getBoundingClientRect().width,
  height: img.getBoundingClientRect().height, natural: img.naturalWidth}));
document.body.insertAdjacentHTML("beforeend", "<pre id=sizes>" + JSON.stringify(out) + "</pre>");
</script>"""


@needs_chromium
def test_headless_browser_shows_probe_panels_at_a_readable_size(html_report, inputs, tmp_path):
    """The browser's own layout of the probe figure (a measuring script added to a copy of the
    report, which itself has no script): it fits the page, and each panel, at the scale it is
    shown, is at least 250 px wide (the old figure was 5,208 px wide, shrunk to ~17%)."""
    page = tmp_path / "measured.html"
    page.write_text(html_report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = subprocess.run(
        [
            str(chromium_path()),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1200,4000",
            "--dump-dom",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    sizes = {
        f["id"]: f
        for f in json.loads(
            html.unescape(re.search(r"<pre id=\"sizes\">(.*?)</pre>", dom, re.S)[1])
        )
    }
    shown = sizes["fig-probing-2-volume"]
    assert shown["natural"] <= 1600 and shown["width"] <= 1200 and shown["height"] <= 900
    scale = shown["width"] / shown["natural"]
    probe = load_probe(inputs["pipeline_probe"])
    for ax in curve_figure(by_category(probe.layers)["volume"], probe.listener).axes:
        assert ax.get_window_extent().width * scale >= 250, ax.get_title()


def test_probe_pipeline_output_is_read_in_long_format(tmp_path):
    from vocalgrad.report.collect import load_probe

    (tmp_path / "curves.csv").write_text(
        "category,stage,order,kind,linear_ba,linear_lo,linear_hi,linear_control_ba,linear_control_lo,"
        "linear_control_hi,mlp_ba,mlp_lo,mlp_hi\n"
        "volume,encoder.2,2,model,0.8,0.7,0.9,0.5,0.4,0.6,0.82,0.72,0.92\n"
        "volume,lm.12@audio,5,model,0.6,0.5,0.7,0.5,0.4,0.6,0.61,0.51,0.71\n"
        "volume,dsp,0,dsp,0.95,0.9,1.0,,,,,,\n"
    )
    (tmp_path / "lens.csv").write_text(
        "category,layer,stage,ba,ba_lo,ba_hi\n"
        "volume,12,lm.12@audio,0.55,0.45,0.65\n"
        "volume,3,,0.52,0.45,0.6\n"
    )  # lens.csv before stages
    probe = load_probe(tmp_path)
    got = {(r["stage"], r["layer_index"], r["probe"]): r["balanced_accuracy"] for r in probe.layers}
    assert got[("encoder", 2, "linear")] == 0.8 and got[("encoder", 2, "shuffled")] == 0.5
    assert got[("lm@audio", 12, "mlp")] == 0.61 and got[("lm@audio", 12, "lens")] == 0.55
    assert got[("dsp", 0, "dsp")] == 0.95 and got[("lens readout", 3, "lens")] == 0.52
    assert probe.warnings == []
    with pytest.raises(ConfigError, match="no layers.csv, curves.csv, diagnosis.csv"):
        load_probe(tmp_path / "missing")  # a wrong --probe folder is an error, not "no probe"


def test_unreadable_probe_rows_are_left_out_with_a_warning_in_the_report(inputs, tmp_path):
    """Rows load_probe cannot parse used to vanish; now each is named, warned about and listed
    in the report's warnings."""
    folder = tmp_path / "probe"
    shutil.copytree(inputs["probe"], folder)
    with (folder / "layers.csv").open("a") as f:
        f.write("volume,encoder,five,linear,0.7,0.6,0.8\nvolume,encoder,2,linear,high,0.6,0.8\n")
    with pytest.warns(UserWarning, match="2 of 143 probe rows could not be read") as caught:
        probe = load_probe(folder)
    assert (
        "layers.csv:143 (ValueError" in str(caught[0].message)
        and "layers.csv:144" in probe.warnings[0]
    )
    assert len(probe.layers) == 141
    with pytest.warns(UserWarning):
        text = write_report(
            [inputs["runs"][0]], tmp_path / "r.html", probe_dirs=[folder], n_boot=20, fit_boot=10
        ).read_text()
    top = text.split('<div class="warnings" id="warnings">')[1]
    assert "model-a: " + probe.warnings[0].split(":")[0] in top and "could not be read" in top


def test_enough_sources_raise_no_warning(tmp_path):
    rng = np.random.default_rng(0)
    rows = [
        _row("model-a", "volume", "mid", 12.0, d, s, bool(rng.random() < 0.8))
        for s in range(12)
        for d in ("increase", "decrease")
    ]
    text = write_report(
        [_write_run(tmp_path / "run", "model-a", rows)], tmp_path / "r.html", n_boot=20
    ).read_text()
    assert '<div class="warnings"' not in text and "<td>12</td>" in _section(text, "bias")


def test_few_sources_warning_is_one_compact_line():
    """One line per problem, whatever the number of listeners: every listener with one count,
    a span of counts, or the few names (then "and N more") when only some are short."""
    from vocalgrad.report.values import few_sources

    assert few_sources({"a": 12, "b": 10}) == []
    assert few_sources({"a": 8, "b": 8})[0].startswith(
        "8 sources per dimension for every listener (under 10):"
    )
    assert few_sources({"a": 6, "b": 8})[0].startswith("6–8 sources per dimension for every")
    named = few_sources({f"m{i}": 3 + i for i in range(5)} | {"ok": 12})[0]
    assert named.startswith("Under 10 sources per dimension for m0 (3), m1 (4), m2 (5) and 2 more:")
    assert few_sources({"x": 4}, "category", "p: ", "")[0].startswith(
        "p: Under 10 sources for x (4)"
    )


def test_probe_curves_are_drawn_per_category_not_averaged(html_report, inputs):
    """The report averaged the curves over categories, hiding the contrast the verdicts are
    about: one figure per category now, titled with its verdict."""
    from vocalgrad.report import figures

    probe = load_probe(inputs["pipeline_probe"])
    drawn = figures.probing(probe.layers, "whisper", {"volume": "heard and used"})
    assert [c for c, _ in drawn] == ["voice_pitch", "volume"]
    titles = [fig._suptitle.get_text() for _, fig in drawn]
    assert titles == ["whisper · voice pitch", "whisper · volume: heard and used"]
    probing = _section(html_report.read_text(), "probing")
    assert "mean over" not in probing
    for cat in CATEGORIES:  # the layers.csv probe: three categories, three figures
        assert f'id="fig-probing-1-{cat}"' in probing


def test_diagnosis_table_reads_as_words_with_two_decimals(inputs, tmp_path):
    """Raw CSV columns (behaviour_ba, behaviour_lo) with four decimals became words, one cell
    per accuracy with its CI, two decimals, and the verdict's reason beside it."""
    folder = tmp_path / "probe"
    shutil.copytree(inputs["pipeline_probe"], folder)
    (folder / "diagnosis.csv").write_text(
        "category,verdict,reason,behaviour_ba,behaviour_lo,behaviour_hi,behaviour_source,"
        "n_test,n_test_sources,evidence\n"
        'voice_pitch,not encoded,"not shown encoded: no stage passes the rule",0.5123,0.4012,'
        "0.6234,results,16,4,best linear: encoder.3 0.88\n"
        "volume,heard and used,heard,0.8000,0.7000,0.9000,lens,16,4,x\n"
    )
    text = write_report(
        [inputs["runs"][0]], tmp_path / "r.html", probe_dirs=[folder], n_boot=20, fit_boot=10
    ).read_text()
    table = _section(text, "probing").split("diagnosis.")[0].rsplit("<table", 1)[1]
    header = re.findall(r"<th(?: [^>]*)?>(.*?)</th>", table)
    assert header == [
        "category",
        "verdict",
        "test items / sources",
        "why (the rule applied)",
        "answers&#x27; balanced accuracy [95% CI]",
        "answers from",
        "evidence",
    ]
    assert "0.51 [0.40, 0.62]" in table and "0.5123" not in table and "behaviour_" not in table
    assert "not shown encoded: no stage passes the rule" in table


def _one_model_report(tmp_path, correct) -> str:
    rows = [
        _row("model-a", "volume", "mid", 12.0, d, s, correct(s, d))
        for s in range(12)
        for d in ("increase", "decrease")
    ]
    runs = [_write_run(tmp_path / "run-a", "model-a", rows)]
    return write_report(runs, tmp_path / "r.html", n_boot=50).read_text()


def test_a_single_model_at_chance_is_not_starred_best(tmp_path):
    """A lone model at chance got a ★ "best model" in the leaderboard, the per-category table
    and the glance line: a best needs several models and a CI above chance."""
    text = _one_model_report(tmp_path, lambda s, d: d == "increase")  # always "increase"
    headline = _section(text, "headline")
    assert 'class="best' not in headline and " ★</td>" not in headline
    glance = text.split('<div class="glance">')[1].split("</div>")[0]
    assert "Best model" not in glance and "One model: model-a at 0.50" in glance


def test_best_marker_needs_several_models_and_a_ci_above_chance():
    from vocalgrad.report.headline import _best

    good = {"accuracy": 0.9, "accuracy_lo": 0.8}
    chance = {"accuracy": 0.55, "accuracy_lo": 0.4}
    assert _best({"a": good}, "accuracy") == set()  # one model: nothing to be best among
    assert _best({"a": good, "b": chance}, "accuracy") == {"a"}
    assert _best({"a": chance, "b": {"accuracy": 0.5, "accuracy_lo": 0.3}}, "accuracy") == set()
    assert _best({"a": {"dprime": 1.0, "dprime_lo": None}, "b": {"dprime": 0.2}}, "dprime") == set()


def test_the_headline_leads_with_the_published_question_not_another_formats_entry():
    """A ladder rung on four sources may score higher by chance; the glance ranks the models
    where the published (gradual) question was asked."""
    from vocalgrad.report.headline import _glance

    def summary(acc):
        return [{"group": "overall", "accuracy": acc, "accuracy_lo": acc - 0.05, "dprime": 0.1}]

    summaries = {"m:a": summary(0.52), "m:a [contour]": summary(0.62), "m:b": summary(0.55)}
    line = _glance(summaries, ["m:a [contour]", "m:b", "m:a"])
    assert line.startswith(("Best model: m:b", "Highest accuracy: m:b")), line
    assert _glance({"m:a [contour]": summary(0.62)}, ["m:a [contour]"]).startswith(
        "One model: m:a [contour]"
    )

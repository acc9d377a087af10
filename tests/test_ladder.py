"""The ladder as one command and one report section: `vocalgrad build --protocol ladder` builds
every rung's dataset with an index, `vocalgrad eval LADDER` asks every rung (resumable, a rung a
listener cannot answer skipped and said), and the report's "Ladder" section shows each
listener's accuracy and d′ per rung with the drop from the rung below, paired by source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import needs_chromium

from vocalgrad.cli import main
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.ladder import (
    INDEX,
    detection_rows,
    ladder_rungs,
    ladder_scores,
    run_folders,
    rung_drop,
    rung_of,
)
from vocalgrad.report import build_sections, write_report
from vocalgrad.report.model import Figure, Table
from vocalgrad.stimuli.config import load_config

pytestmark = pytest.mark.usefixtures("builtin_cache")
OURS = ["detection", "direction", "comparison", "recognition", "when", "how_much", "contour"]


def test_the_rungs_are_in_ladder_order_and_rows_find_theirs():
    names = [rung.name for rung, _ in ladder_rungs()]
    assert [n for n in names if n in OURS] == OURS  # another helper's rungs fall in between
    orders = [rung.order for rung, _ in ladder_rungs()]
    assert orders == sorted(orders)
    assert rung_of({"variant": "vary"}) == "detection"  # the gradual format, no format field
    assert rung_of({"variant": "default"}) == "direction"
    assert rung_of({"format": "when", "variant": "default"}) == "when"
    assert rung_of({"format": "when", "variant": "swapped"}) is None  # no rung asks it
    assert rung_of({"format": "a plug-in's", "variant": "default"}) is None


def test_the_ladder_preset_is_small_and_settable():
    config = load_config(None, protocol="ladder")
    assert (config.n_test, config.n_train) == (4, 4)
    assert config.categories == ("volume", "voice_pitch") and config.curves == ("linear",)
    assert load_config(None, protocol="ladder", n_test=10).n_test == 10


def _row(source: str, truth: str, said: str | None, **extra) -> dict:
    return {"source_id": source, "direction": truth, "predicted": said, **extra}


def test_detection_is_scored_as_yes_against_no():
    rows = detection_rows(
        [
            _row("a", "increase", "yes"),
            _row("a", "constant", "no"),
            _row("a", "decrease", "no"),
            _row("a", "constant", "yes"),
            _row("a", "increase", "maybe"),
        ]
    )
    assert [(r["direction"], r["predicted"]) for r in rows] == [
        ("increase", "increase"), ("decrease", "decrease"), ("increase", "decrease"),
        ("decrease", "increase"), ("increase", None),
    ]  # fmt: skip


def test_a_negated_question_is_scored_by_its_labels_not_as_detection():
    """The negated reasoning variant answers yes / no, as detection does; its words mean
    decrease / increase, so its rows keep their labels."""
    from vocalgrad.evaluation.ladder import scorable

    rows = [
        _row(s, d, d, variant="negated", item_id=f"{s}{d}")
        for s in "ab"
        for d in ("increase", "decrease")
    ]
    scored = scorable(rows)
    assert list(scored) == ["reasoning"]
    assert [r["direction"] for r in scored["reasoning"]] == [r["direction"] for r in rows]


def test_the_drop_is_paired_by_source_with_a_clustered_interval():
    lower = [_row(s, "increase", "increase") for s in "abcdef" for _ in range(4)]
    upper = [  # source k gets k % 3 + 1 of its 4 right; source g has no lower rung: left out
        _row(s, "increase", "increase" if i <= k % 3 else "decrease")
        for k, s in enumerate("abcdefg")
        for i in range(4)
    ]
    drop = rung_drop(upper, lower, n_boot=200)
    assert drop["n_clusters"] == 6 and drop["n_upper"] == 24 and drop["n_lower"] == 24
    assert drop["accuracy_upper"] == pytest.approx(12 / 24) and drop["accuracy_lower"] == 1.0
    assert drop["drop"] == pytest.approx(0.5)
    assert drop["ci_method"] == "cluster jackknife t"  # 6 sources
    assert drop["drop_lo"] < 0.5 < drop["drop_hi"]
    nothing = rung_drop(upper, [_row("z", "increase", "increase")])
    assert nothing["n_clusters"] == 0 and nothing["drop"] != nothing["drop"]  # NaN: none shared


def test_a_rung_not_answered_in_its_words_is_said_and_skipped_by_the_drops():
    rows = [
        {**_row(s, d, None, variant="vary"), "key": f"{s}{d}v"}  # a which-way observer
        for s in "abc"
        for d in ("increase", "constant")
    ] + [
        {**_row(s, d, d, variant="default"), "key": f"{s}{d}"}
        for s in "abc"
        for d in ("increase", "decrease")
    ] + [
        {**_row(s, d, "increase", variant="default", format="comparison"), "key": f"{s}{d}c"}
        for s in "abc"
        for d in ("increase", "decrease")
    ]  # fmt: skip
    scored = ladder_scores(rows, n_boot=100)
    assert [e["rung"] for e in scored] == ["detection", "direction", "comparison"]
    assert [e["answered"] for e in scored] == [False, True, True]
    assert scored[1]["drop"] is None  # nothing answered below it
    assert scored[2]["drop"]["drop"] == pytest.approx(0.5)  # 1.0 - 0.5, from direction


def test_a_rung_that_cannot_be_planned_is_skipped_and_none_raises(tmp_path, monkeypatch):
    from vocalgrad.evaluation.ladder import build_ladder
    from vocalgrad.stimuli.config import BuildConfig

    built: list[str] = []

    def build(config: BuildConfig, folder: Path) -> dict:
        built.append(config.format)
        return {"clips_kept": 1}

    index = build_ladder(BuildConfig(categories=("volume",)), tmp_path / "L", build)
    skipped = {name: d["skipped"] for name, d in index["datasets"].items() if "skipped" in d}
    assert set(skipped) == {"which", "together", "sequence"}  # two dimensions, one given
    assert "no pair of volume can be combined" in skipped["which"]
    assert set(built) == set(index["datasets"]) - set(skipped)
    assert json.loads((tmp_path / "L" / INDEX).read_text())["datasets"] == index["datasets"]
    built.clear()

    def refuse(config: BuildConfig) -> None:
        raise ConfigError(f"nothing to plan in {config.format}")

    monkeypatch.setattr("vocalgrad.evaluation.ladder.plan_conditions", refuse)
    with pytest.raises(ConfigError, match="nothing to plan in gradual"):  # the first's reason
        build_ladder(BuildConfig(categories=("volume",)), tmp_path / "L2", build)
    assert built == []


@pytest.fixture(scope="module")
def ladder(tmp_path_factory, cache_dir) -> Path:
    import os

    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("ladder") / "L"
    args = ["build", "--protocol", "ladder", "--out", str(out), "--dimensions", "volume"]
    args += ["--tiers", "high", "--n-test", "2", "--n-train", "2", "--no-audit", "--workers", "1"]
    assert main(args) == 0
    return out


def test_one_command_builds_every_rung_with_an_index(ladder, capsys):
    index = json.loads((ladder / INDEX).read_text())
    rungs = [e["rung"] for e in index["rungs"]]
    assert [r for r in rungs if r in OURS] == OURS
    # the rungs that ask about two dimensions cannot be built from one: skipped, with why
    skipped = {name: d["skipped"] for name, d in index["datasets"].items() if "skipped" in d}
    assert set(skipped) == {"which", "together", "sequence"}
    assert all("two dimensions" in why for why in skipped.values())
    for entry in index["rungs"]:
        if entry["dataset"] in skipped:
            assert not (ladder / entry["dataset"]).exists()
            continue
        assert (ladder / entry["dataset"] / "test" / "metadata.jsonl").is_file()
        rows = (ladder / entry["dataset"] / "test" / "metadata.jsonl").read_text().splitlines()
        assert {json.loads(r).get("format", "gradual") for r in rows} == {entry["format"]}
    detection = next(e for e in index["rungs"] if e["rung"] == "detection")
    assert detection["dataset"] == "gradual" and detection["variants"] == ["vary"]
    # the reasoning rung is the gradual dataset behind its variants' text step, last
    assert index["rungs"][-1] == {
        "rung": "reasoning",
        "order": 10,
        "format": "gradual",
        "dataset": "gradual",
        "variants": ["mapped", "negated", "conditional"],
    }
    assert index["datasets"]["gradual"]["clips_kept"] > 0
    assert index["config"]["categories"] == ["volume"] and index["config"]["n_test"] == 2
    with pytest.raises(ConfigError, match="leave out --question-format"):
        main(
            ["--debug", "build", "--protocol", "ladder", "--out", str(ladder)]
            + ["--question-format", "when"]
        )


@pytest.fixture(scope="module")
def runs(ladder, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ladder-runs")
    out = {}
    for listener in ("random", "one-end"):
        folder = root / listener
        main(["eval", str(ladder), "--listener", f"baseline:{listener}", "--out", str(folder)])
        out[listener] = folder
    return out


def test_eval_asks_every_rung_resumably_and_says_what_it_skips(ladder, runs, capsys):
    index = json.loads((runs["random"] / INDEX).read_text())
    unbuilt = {e["rung"] for e in index["rungs"] if e.get("skipped", "").startswith("not built")}
    assert unbuilt == {"which", "together", "sequence"}  # said, not asked
    assert all("counts" in e for e in index["rungs"] if e["rung"] not in unbuilt)
    detection = next(e for e in index["rungs"] if e["rung"] == "detection")
    rows = (runs["random"] / "detection" / "results.jsonl").read_text().splitlines()
    assert {json.loads(r)["variant"] for r in rows} == {"vary"}
    again = ["eval", str(ladder), "--listener", "baseline:random", "--out", str(runs["random"])]
    assert main(again) == 0
    again = json.loads((runs["random"] / INDEX).read_text())
    assert all(e["counts"]["answered"] == 0 for e in again["rungs"] if "counts" in e)  # resumed
    assert detection["counts"]["total"] > 0
    one_end = json.loads((runs["one-end"] / INDEX).read_text())["rungs"]
    skipped = {e["rung"]: e["skipped"] for e in one_end if "skipped" in e}
    assert set(skipped) == {"comparison", "recognition"} | unbuilt
    assert all("held clip" in skipped[rung] for rung in ("comparison", "recognition"))
    capsys.readouterr()
    resumed = ["eval", str(ladder), "--listener", "baseline:one-end", "--out", str(runs["one-end"])]
    assert main(resumed) == 0
    said = capsys.readouterr().out
    assert "comparison: skipped: baseline:one-end answers" in said and "5 skipped" in said
    asked = [p.name for p in run_folders(runs["one-end"])]  # the rungs asked, in order
    assert [r for r in asked if r in OURS] == [r for r in OURS if r not in skipped]
    with pytest.raises(ConfigError, match="give --out"):
        main(["--debug", "eval", str(ladder), "--listener", "baseline:random"])


def test_the_reasoning_rung_asks_the_gradual_clips_and_drops_from_direction(runs):
    from vocalgrad.evaluation.evaluate import load_results

    _, reasoned = load_results(runs["random"] / "reasoning")
    _, direction = load_results(runs["random"] / "direction")
    assert {r["variant"] for r in reasoned} == {"mapped", "negated", "conditional"}
    assert {r["item_id"] for r in reasoned} == {r["item_id"] for r in direction}  # same clips
    rows = [r for run in run_folders(runs["random"]) for r in load_results(run)[1]]
    scored = {e["rung"]: e for e in ladder_scores(rows, n_boot=50)}
    assert list(scored)[-1] == "reasoning"
    drop = scored["reasoning"]["drop"]
    assert drop["from"] == "direction" and drop["paired"] == "item"  # not from the rung below
    assert drop["n_upper"] == 3 * scored["direction"]["score"]["n"]  # each variant, each item
    assert scored["contour"]["drop"]["paired"] == "source"


def test_the_report_shows_the_ladder(runs, tmp_path):
    sections = build_sections([runs["random"], runs["one-end"]], n_boot=100)
    ladder = next(s for s in sections if s.id == "ladder")
    assert ladder.title == "Ladder"
    table = next(b for b in ladder.blocks if isinstance(b, Table))
    shown = {(r[0], r[1]) for r in table.references}
    assert ("baseline:random", "detection") in shown and ("baseline:one-end", "how much") in shown
    assert ("baseline:one-end", "comparison") not in shown  # skipped: never asked
    assert any("(2 sources)" in r[-1] for r in table.references)  # drops paired by source
    figure = next(b for b in ladder.blocks if isinstance(b, Figure))
    assert figure.name == "ladder" and {d["rung"] for d in figure.data} >= {"when", "contour"}
    # the run folders one by one, the index file among them (R/*), give the same ladder
    every = [*sorted(runs["random"].iterdir()), *runs["one-end"].iterdir()]
    again = next(s for s in build_sections(every, n_boot=100) if s.id == "ladder")
    assert next(b for b in again.blocks if isinstance(b, Table)).references == table.references
    out = write_report([runs["random"]], tmp_path / "report.md", fmt="md", n_boot=100)
    assert "## Ladder" in out.read_text()


@pytest.mark.slow
@needs_chromium
def test_the_ladder_section_in_a_real_browser(runs, browser, tmp_path):
    html = write_report([runs["random"], runs["one-end"]], tmp_path / "report.html", n_boot=100)
    assert (tmp_path / "report-ladder.svg").is_file() and (tmp_path / "report-ladder.csv").is_file()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(html.as_uri())
    section = page.locator("section#ladder")
    assert section.locator("h2").inner_text() == "Ladder"
    assert page.locator("nav a[href='#ladder']").inner_text() == "Ladder"
    loaded = page.eval_on_selector(
        "#fig-ladder img", "img => img.complete && img.naturalWidth > 300"
    )
    assert loaded
    cells = section.locator("tbody.refs td").all_inner_texts()
    assert "when" in cells and "contour" in cells
    box = section.bounding_box()
    assert box and box["width"] <= 1280
    assert not errors, errors
    page.close()


@pytest.mark.parametrize("fmt", ["when", "how_much", "contour"])
def test_the_rungs_with_a_magnitude_plan_a_threshold_sweep(fmt):
    from vocalgrad.stimuli.config import BuildConfig
    from vocalgrad.stimuli.plan import plan_conditions

    config = load_config(None, design="psychometric", levels=3, format=fmt)
    planned, _ = plan_conditions(
        BuildConfig(**{**config.to_dict(), "categories": ("voice_pitch",)})
    )
    assert {c.tier for c in planned} == {"p1", "p2", "p3"}
    assert len({c.magnitude for c in planned}) == 3
    for tier in ("p1", "p2", "p3"):  # both answers at every magnitude
        assert {c.direction for c in planned if c.tier == tier} == {"increase", "decrease"}


def test_a_window_of_the_speech_shares_the_analyses_that_do_not_read_the_span(arctic):
    from vocalgrad.audio import SpeechSpan
    from vocalgrad.signal.analysis import Analysis

    audio, sr = arctic
    whole = Analysis(audio, sr)
    power, _ = whole.k_power, whole.f0
    half = whole.with_span(SpeechSpan(whole.span.onset_s, whole.span.offset_s / 2, True))
    assert half.k_power is power and half.cache is whole.cache
    assert half.span.offset_s == whole.span.offset_s / 2 and whole.span.offset_s > 1
    times, _ = half.f0  # F0 is tracked over the window's own span
    assert times.max() < whole.f0[0].max()


def test_a_ladder_with_a_failing_rung_exits_4_unless_allowed(tmp_path, monkeypatch, capsys):
    """As a single build: a rung whose shortcut audit fails makes `build --protocol ladder`
    exit 4 with one stderr line naming the rung, its dimensions and why (from its
    audit.json); the rung's summary line says the same; --allow-audit-failure warns, exits 0."""
    out = tmp_path / "L"

    def audit(passes: bool, gate: str | None = None) -> dict:
        gates = {g: {"fails": g == gate} for g in ("direction", "order_free", "constant")}
        reasons = [] if passes else ["direction predicted from cues with LR accuracy 0.583 > ..."]
        return {"passes": passes, "reasons": reasons, "gates": gates}

    def fake_build_ladder(folder, source=None, **_) -> dict:
        folder = Path(folder)
        audits = {
            "gradual": {"volume": audit(True), "voice_pitch": audit(True)},
            "contour": {"volume": audit(True), "voice_pitch": audit(False, "direction")},
        }
        datasets = {}
        for name, per_category in audits.items():
            (folder / name).mkdir(parents=True, exist_ok=True)
            passes = all(c["passes"] for c in per_category.values())
            report = {"passes": passes, "per_category": per_category}
            (folder / name / "audit.json").write_text(json.dumps(report))
            datasets[name] = {"clips_kept": 8, "audit_passes": passes, "notes": []}
        rungs = [
            {"rung": "direction", "dataset": "gradual", "variants": ["default"]},
            {"rung": "contour", "dataset": "contour", "variants": ["default"]},
        ]
        return {"rungs": rungs, "datasets": datasets}

    monkeypatch.setattr("vocalgrad.api.build_ladder", fake_build_ladder)
    argv = ["build", "--protocol", "ladder", "--out", str(out), "--workers", "1"]
    assert main(argv) == 4
    captured = capsys.readouterr()
    assert "audit FAILS: voice_pitch (direction gate)" in captured.out
    assert "direction: gradual/ asked with default; 8 clips, audit passes" in captured.out
    err = [line for line in captured.err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("vocalgrad: error: shortcut audit failed on 1 of 2 rungs: ")
    assert "contour: voice_pitch (direction gate)" in err[0] and "--allow-audit-failure" in err[0]
    assert main([*argv, "--allow-audit-failure"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("vocalgrad: warning: shortcut audit failed on 1 of 2 rungs")
    assert "contour: voice_pitch (direction gate)" in err


def test_each_rung_is_asked_with_the_ladders_own_audit_verdict(tmp_path):
    """A rung's run records the ladder's verdict on its dataset (the joint family), not the
    dataset's own report: a rung that fails alone but not in the ladder's family is no
    failure, one the family fails is, and a ladder without a joint verdict leaves each
    dataset to its own report."""
    from vocalgrad.evaluation.evaluate import EvalConfig
    from vocalgrad.evaluation.ladder import evaluate_ladder

    ladder = tmp_path / "L"
    for name in ("gradual", "how_much"):
        (ladder / name / "test").mkdir(parents=True)
        (ladder / name / "test" / "metadata.jsonl").write_text("")
    rungs = [
        {"rung": "direction", "dataset": "gradual", "variants": ["default"]},
        {"rung": "how_much", "dataset": "how_much", "variants": ["default"]},
    ]
    asked: dict[str, dict] = {}

    def run(dataset, listener, folder, config, **options):
        asked[Path(dataset).name] = options
        return {"total": 1, "failed": 0}

    def ask(audit: dict | None) -> dict[str, dict]:
        index = {"rungs": rungs, "datasets": {}, **({"audit": audit} if audit else {})}
        (ladder / "ladder.json").write_text(json.dumps(index))
        asked.clear()
        evaluate_ladder(ladder, lambda d: None, tmp_path / "R", EvalConfig(), run=run)
        return {name: options.get("audit_verdict") for name, options in asked.items()}

    joint = {"builds": ["gradual", "how_much"], "passes": True, "failing": {}}
    assert ask(joint) == {"gradual": [], "how_much": []}
    failing = {"how_much": {"voice_pitch": {"gates": {"direction": {"p": 0.01}}}}}
    assert ask(joint | {"passes": False, "failing": failing}) == {
        "gradual": [],
        "how_much": ["voice_pitch"],
    }
    assert ask(None) == {"gradual": None, "how_much": None}
    assert ask({"passes": None, "reason": "how_much/audit.json cannot be read"}) == {
        "gradual": None,
        "how_much": None,
    }


def test_a_ladder_is_judged_as_one_family_of_gates(tmp_path, monkeypatch, capsys):
    """Where the index holds the ladder's joint family (`ladder_audit`), it decides: a rung
    whose dataset fails its own gates alone but not the ladder's family passes, and says
    what fails alone; a rung failing the joint family fails the command."""
    from vocalgrad.stimuli.audit.report import failed_dimensions

    out = tmp_path / "L"
    own = {
        "passes": False,
        "per_category": {
            "voice_pitch": {
                "passes": False,
                "reasons": ["direction predicted from cues with LR accuracy 0.592 > ..."],
                "gates": {"direction": {"fails": True}},
            }
        },
    }
    assert failed_dimensions(own) == {"voice_pitch": "direction gate"}
    joint = {"builds": ["gradual", "how_much"], "gates": 8, "alpha": 0.05, "critical_z": 2.9}
    verdicts = {
        "passes": {"passes": True, "failing": {}},
        "fails": {
            "passes": False,
            "failing": {"how_much": {"voice_pitch": {"gates": {"direction": {"p": 0.01}}}}},
        },
    }

    def fake_build_ladder(folder, source=None, *, verdict: str, **_) -> dict:
        folder = Path(folder)
        for name, report in (("gradual", {"passes": True, "per_category": {}}), ("how_much", own)):
            (folder / name).mkdir(parents=True, exist_ok=True)
            (folder / name / "audit.json").write_text(json.dumps(report))
        datasets = {
            "gradual": {"clips_kept": 8, "audit_passes": True, "notes": []},
            "how_much": {"clips_kept": 8, "audit_passes": False, "notes": []},
        }
        rungs = [
            {"rung": "direction", "dataset": "gradual", "variants": ["default"]},
            {"rung": "how_much", "dataset": "how_much", "variants": ["default"]},
        ]
        return {"rungs": rungs, "datasets": datasets, "audit": joint | verdicts[verdict]}

    argv = ["build", "--protocol", "ladder", "--out", str(out), "--workers", "1"]
    monkeypatch.setattr(
        "vocalgrad.api.build_ladder", lambda *a, **k: fake_build_ladder(*a, verdict="passes", **k)
    )
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert (
        "how_much: how_much/ asked with default; 8 clips, audit passes (its dataset's own "
        "gates alone fail: voice_pitch (direction gate))"
    ) in printed
    assert "audit: 8 gates of 2 datasets as one family" in printed and "2.90): passes" in printed
    monkeypatch.setattr(
        "vocalgrad.api.build_ladder", lambda *a, **k: fake_build_ladder(*a, verdict="fails", **k)
    )
    assert main(argv) == 4
    captured = capsys.readouterr()
    assert "how_much: how_much/ asked with default; 8 clips, audit FAILS: voice_pitch" in (
        captured.out
    )
    assert "shortcut audit failed on 1 of 2 rungs: how_much: voice_pitch (direction gate)" in (
        captured.err
    )

"""Fault sweep, round 2: outputs that cannot overwrite inputs, sizes that cannot hang the
machine, settings that are never ignored in silence, and no tracebacks.

Each case asserts the message (one line, no traceback), the exit code and that nothing was
lost. The datasets are the listening tests' synthetic one (tones, milliseconds to write) and,
where a clip must be measured against its source, a tiny real build.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from pathlib import Path

import pytest
from e2e.human_helpers import Env, make_dataset, write_study

import vocalgrad
from vocalgrad.cli import main
from vocalgrad.dataset import load_rows
from vocalgrad.errors import ConfigError, StudyError
from vocalgrad.human.assign import make_plan
from vocalgrad.human.study import MAX_STUDY_ROWS, StudyConfig, load_study
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import MAX_BUILD_CLIPS, BuildConfig, load_config

TINY = BuildConfig(
    n_test=2, n_train=0, categories=("volume",), tiers=("high",), curves=("linear",), constants=1
)


@pytest.fixture(autouse=True)
def answer_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    """The synthetic dataset (2 categories, 4 test and 2 train sources, tones)."""
    return make_dataset(tmp_path_factory.mktemp("synth") / "ds")


@pytest.fixture(scope="module")
def built(tmp_path_factory, cache_dir) -> Path:
    """A real build with references, for `verify` (6 clips of volume)."""
    import os

    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("built") / "ds"
    build(TINY, out, workers=1, audit=False)
    return out


def one_line_error(text: str, *needles: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert "Traceback" not in text, text
    errors = [line for line in lines if line.startswith("vocalgrad: error")]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def model_run(dataset: Path, out: Path, capsys) -> Path:
    assert main(["eval", str(dataset), "--listener", "baseline:random", "--out", str(out)]) == 0
    assert main(["score", str(out)]) == 0
    capsys.readouterr()
    assert (out / "summary.json").is_file()
    return out


# --- 2. outputs never overwrite inputs ----------------------------------------------------


def test_a_human_export_over_a_models_run_is_refused_and_overwrite_leaves_no_stale_summary(
    tmp_path, capsys
):
    env = Env(tmp_path, n_annotators=2, annotators_per_item=1)
    run = model_run(env.dataset, tmp_path / "run", capsys)
    before = snapshot(run)
    args = ["human", "export", "--study", str(env.study), "--out", str(run)]
    assert main(args) == 2
    one_line_error(capsys.readouterr().err, str(run), "run folder", "--overwrite")
    assert snapshot(run) == before  # the model's results, manifest and summary untouched

    assert main([*args, "--overwrite"]) == 0
    assert json.loads((run / "manifest.json").read_text())["kind"] == "human listening test"
    assert not (run / "summary.json").exists()  # it scored the model's answers

    export = tmp_path / "export"
    assert main(["human", "export", "--study", str(env.study), "--out", str(export)]) == 0
    (export / "manifest.json").unlink()  # killed while replacing it: no manifest yet
    assert main(["human", "export", "--study", str(env.study), "--out", str(export)]) == 0
    assert (export / "manifest.json").is_file()
    capsys.readouterr()
    # and a model's run never goes into the export
    assert main(["eval", str(env.dataset), "--listener", "baseline:random", "--out", str(export)])
    one_line_error(capsys.readouterr().err, "listening-test export")


def test_a_report_never_writes_over_a_datasets_metadata_or_a_foreign_file(synth, tmp_path, capsys):
    run = model_run(synth, tmp_path / "run", capsys)
    meta = synth / "test" / "metadata.jsonl"
    before = snapshot(synth)
    assert main(["report", str(run), "--out", str(meta)]) == 2
    one_line_error(capsys.readouterr().err, str(meta), f"inside the dataset {synth}")
    assert snapshot(synth) == before  # no figure beside it either

    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>\n")
    assert main(["report", str(run), "--out", str(notes)]) == 2
    one_line_error(capsys.readouterr().err, "a file vocalgrad did not write", "--overwrite")
    assert notes.read_text() == "<p>my notes</p>\n"

    for fmt in ("html", "md"):  # a report over an earlier report: the same purpose
        out = tmp_path / f"report.{fmt}"
        for _ in range(2):
            assert main(["report", str(run), "--out", str(out), "--output-format", fmt]) == 0
    assert main(["report", str(run), "--out", str(notes), "--overwrite"]) == 0
    assert "vocalgrad report" in notes.read_text()
    # the API, with the dataset named for the card
    with pytest.raises(ConfigError, match="inside the dataset"):
        vocalgrad.report([run], synth / "card.html", dataset=synth)


def test_verify_and_audit_json_never_write_inside_the_dataset(built, tmp_path, capsys):
    before = (built / "build.json").read_bytes()
    started = time.monotonic()
    assert main(["verify", str(built), "--json", str(built / "build.json")]) == 2
    one_line_error(capsys.readouterr().err, "build.json", "inside the dataset")
    assert (built / "build.json").read_bytes() == before
    assert main(["audit", str(built), "--json", str(built / "test" / "audit.json")]) == 2
    one_line_error(capsys.readouterr().err, "inside the dataset")
    assert time.monotonic() - started < 30  # refused before measuring a clip

    mine = tmp_path / "verify.json"
    mine.write_text('{"my": "notes"}\n')
    assert main(["verify", str(built), "--json", str(mine)]) == 2
    one_line_error(capsys.readouterr().err, "not a verify report")
    assert main(["verify", str(built), "--json", str(mine), "--overwrite"]) == 0
    assert main(["verify", str(built), "--json", str(mine)]) == 0  # now its own report
    assert "per_category" in json.loads(mine.read_text())


def test_every_other_writer_goes_through_the_same_gate(synth, tmp_path, capsys):
    run = model_run(synth, tmp_path / "run", capsys)
    before = snapshot(run)
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("chapter 1\n")
    cases = [
        (["eval", str(synth), "--listener", "baseline:random", "--out", str(synth / "r")], 2),
        (["eval", str(synth), "--listener", "baseline:random", "--out", str(foreign)], 2),
        (["probe", str(synth), "--listener", "whisper:tiny.en", "--out", str(run)], 2),
        (["probe", str(synth), "--listener", "whisper:tiny.en", "--out", str(synth / "p")], 2),
        (
            [
                "probe",
                str(synth),
                "--listener",
                "whisper:tiny.en",
                "--out",
                str(tmp_path / "probe"),
                "--cache",
                str(synth / "features"),
            ],
            2,
        ),
        (
            [
                "finetune",
                str(synth),
                "--listener",
                "whisper:tiny.en",
                "--train-dimensions",
                "volume",
                "--out",
                str(synth / "tuned"),
            ],
            2,
        ),
        (["export", "lmms-eval", str(synth), "--out", str(synth / "tasks")], 2),
        (["export", "lmms-eval", str(synth), "--out", str(run)], 2),
        (["export", "lm-eval", str(run), "--out", str(foreign)], 2),
        (["export", "inspect-run", str(tmp_path / "x.eval"), "--out", str(run)], 2),
        (
            [
                "eval",
                str(synth),
                "--listener",
                "baseline:random",
                "--adaptive",
                "quest",
                "--out",
                str(run),
            ],
            2,
        ),
    ]
    for args, code in cases:
        assert main(args) == code, args
        one_line_error(capsys.readouterr().err, "choose another path")
    assert snapshot(run) == before and [p.name for p in foreign.iterdir()] == ["thesis.tex"]
    assert not any(p.name in ("r", "p", "tuned", "tasks", "features") for p in synth.iterdir())
    assert not (tmp_path / "probe").exists()

    # a build never starts in a folder that is not a build (the same rule, older code)
    assert main(["build", "--out", str(foreign), "--n-test", "1", "--n-train", "0"]) == 2
    one_line_error(capsys.readouterr().err, "not a vocalgrad build")

    # nor does a study database go inside the dataset it plays
    study = write_study(tmp_path / "study.toml", db=str(synth / "study.sqlite"))
    assert main(["human", "create", str(synth), "--study", str(study)]) == 2
    one_line_error(capsys.readouterr().err, "inside the dataset")
    assert not (synth / "study.sqlite").exists()


# --- 3. sizes cannot hang the machine -----------------------------------------------------


@pytest.mark.parametrize(
    "options, needle",
    [
        ({"design": "psychometric", "levels": 1_000_000_000}, "2,000,000,003 per source"),
        ({"constants": 100_000_000_000}, "100,000,000,024 per source"),
        ({"n_test": 10**9}, "1,000,000,008 sources"),
    ],
)
def test_a_build_size_is_checked_before_anything_is_planned(tmp_path, capsys, options, needle):
    with pytest.raises(ConfigError) as info:
        load_config(None, **options)
    message = str(info.value)
    assert "\n" not in message and needle in message and f"{MAX_BUILD_CLIPS:,} clips" in message
    assert "GB of audio" in message and "--allow-large" in message
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in options.items()]
    started = time.monotonic()
    out = tmp_path / "ds"
    assert main(["build", "--out", str(out), *flags]) == 2
    one_line_error(capsys.readouterr().err, "implies", "limit")
    assert time.monotonic() - started < 30 and not out.exists()
    # past the limit only on request, from the API or a config file
    assert load_config(None, **options, allow_large=True).allow_large
    config = tmp_path / "big.toml"
    config.write_text("[build]\n" + "".join(f"{k} = {v!r}\n" for k, v in options.items()))
    with pytest.raises(ConfigError, match="implies"):
        load_config(config)
    config.write_text(config.read_text() + "allow_large = true\n")
    big = load_config(config)
    assert big.allow_large and "allow_large" not in big.to_dict()  # not part of the bytes
    assert big.replace(seed=3).allow_large


def test_bootstrap_resamples_are_bounded_before_any_is_drawn(synth, tmp_path, capsys):
    run = model_run(synth, tmp_path / "run", capsys)
    for command in (["score", str(run)], ["report", str(run)]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--n-boot", "1000000000"])
        assert exit_.value.code == 2
        assert "1,000,000,000 is above the limit of 1,000,000" in capsys.readouterr().err
    started = time.monotonic()
    with pytest.raises(ConfigError, match="n_boot = 1,000,000,000: expected 0 to 1,000,000"):
        vocalgrad.score(run, n_boot=10**9, write=False)
    assert time.monotonic() - started < 30


def test_a_published_size_build_is_far_below_the_limit():
    clips, least_bytes = load_config(None, protocol="vocalgrad").implied_size()
    assert clips == 600 * 9 * 24 and clips * 30 < MAX_BUILD_CLIPS
    assert least_bytes == clips * 3 * 48000 * 2


@pytest.mark.parametrize(
    "settings, needle",
    [
        ({"n_annotators": 1_000_000_000, "annotators_per_item": 2}, "1,000,000,000 annotators"),
        ({"items_per_cell": 100_000_000}, "200,000,000 pool clips"),
    ],
)
def test_a_study_size_is_checked_before_anything_is_planned(
    synth, tmp_path, capsys, settings, needle
):
    study = write_study(tmp_path / "study.toml", **settings)
    started = time.monotonic()
    assert main(["human", "create", str(synth), "--study", str(study)]) == 2
    one_line_error(capsys.readouterr().err, "implies", needle, f"{MAX_STUDY_ROWS:,}")
    assert time.monotonic() - started < 30 and not (tmp_path / "study.sqlite").exists()
    write_study(study, **settings, allow_large=True)
    assert load_study(study)[0].allow_large
    assert load_study(write_study(study, **settings), allow_large=True)[0].allow_large


def test_a_large_items_per_cell_plans_only_the_clips_there_are(synth):
    started = time.monotonic()
    plan = make_plan(load_rows(synth), StudyConfig(items_per_cell=10**8, allow_large=True))
    assert time.monotonic() - started < 30
    assert sum(len(ids) for ids in plan.pool.values()) == 64  # every test clip once
    assert any("only 4 clip(s) per direction" in note for note in plan.notes)
    # within the limit before the dataset is read (one cell), past it once the pool is known
    config = StudyConfig(n_annotators=60_000, annotators_per_item=5_000, items_per_cell=4)
    with pytest.raises(StudyError, match=r"implies 1,220,000 database rows"):
        make_plan(load_rows(synth), config)


# --- 4. settings are never ignored in silence ---------------------------------------------


def test_a_misspelt_study_table_or_key_is_an_error_that_suggests_the_fix(synth, tmp_path, capsys):
    study = tmp_path / "study.toml"
    for text, needles in (
        ("[studdy]\nn_annotators = 4\n", ("'studdy'", "did you mean 'study'")),
        ("[study]\nn_anotators = 4\n", ("'n_anotators'", "did you mean 'n_annotators'")),
        ("[study]\nn_annotators = 4\n[stduy]\nseed = 1\n", ("'stduy'",)),
        ("# nothing here\n", ("no [study] table",)),
        ("[study]\nn_annotators = true\n", ("n_annotators = True", "whole number")),
        ("[study]\ncatch_threshold = 'high'\n", ("catch_threshold", "expected a number")),
        ("[study]\ncategories = 'volume'\n", ("categories", "list of names")),
        ("[study]\nseed = -5\n", ("seed = -5", ">= 0")),
    ):
        study.write_text(text)
        with pytest.raises(StudyError):
            load_study(study)
        assert main(["human", "create", str(synth), "--study", str(study)]) == 2
        one_line_error(capsys.readouterr().err, str(study), *needles)
    assert not (tmp_path / "study.sqlite").exists()
    with pytest.raises(StudyError, match="n_annotators = True"):
        StudyConfig(n_annotators=True)  # the API too
    study.write_text("[study]\nn_annotators = 4\nannotators_per_item = 2\n[build]\nn_test = 2\n")
    assert load_study(study)[0].n_annotators == 4  # a study may share the build's file


def test_a_misspelt_build_table_or_key_is_an_error_that_suggests_the_fix(tmp_path):
    config = tmp_path / "build.toml"
    for text, needles in (
        ("[biuld]\nn_test = 2\n", ("biuld", "did you mean 'build'")),
        ("[build]\nn_tset = 2\n", ("n_tset", "did you mean 'n_test'")),
        ("[build]\nn_test = 2\n[studdy]\nseed = 1\n", ("'studdy'", "did you mean 'study'")),
    ):
        config.write_text(text)
        with pytest.raises(ConfigError) as info:
            load_config(config)
        assert "\n" not in str(info.value)
        assert all(n in str(info.value) for n in needles), info.value
    config.write_text("[build]\nn_test = 2\n[study]\nn_annotators = 4\n")
    assert load_config(config).n_test == 2


def test_baseline_listeners_refuse_unknown_or_ill_typed_options(synth, tmp_path, capsys):
    def ask(*options: str, listener: str = "baseline:random") -> int:
        out = tmp_path / "run"
        shutil.rmtree(out, ignore_errors=True)
        return main(["eval", str(synth), "--listener", listener, "--out", str(out), *options])

    for listener, option, needles in (
        ("baseline:random", "seed=abc", ("seed = 'abc'", "whole number", "it takes seed")),
        ("baseline:random", "seed=true", ("seed = True",)),
        ("baseline:random", "sed=3", ("unknown option 'sed'", "did you mean 'seed'")),
        ("baseline:always-increase", "seed=3", ("it takes no options",)),
        ("baseline:random:4", "seed=5", ("two seeds",)),
    ):
        assert ask("-O", option, listener=listener) == 2
        one_line_error(capsys.readouterr().err, *needles)
    assert ask("-O", "seed=7") == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["listener"]["revision"] == "seed7"
    with pytest.raises(ConfigError, match="unknown option 'device'"):
        vocalgrad.evaluate(
            synth, "baseline:random", tmp_path / "api", listener_options={"device": 1}
        )


def test_a_family_without_the_keyword_is_a_usage_error_not_a_traceback(synth, tmp_path, capsys):
    from vocalgrad.listeners import register, unregister
    from vocalgrad.listeners.baselines import ConstantListener

    class Fixed(ConstantListener):
        def __init__(self, answer: str, *, temperature: float = 0.0) -> None:
            super().__init__(answer)

    register("fixed-safety", lambda rest, *, dataset=None, **options: Fixed(rest, **options))
    try:  # the registry is the process's: a family left behind shows in other tests' errors
        args = [
            "eval",
            str(synth),
            "--listener",
            "fixed-safety:increase",
            "--out",
            str(tmp_path / "r"),
        ]
        assert main([*args, "-O", "temprature=0.5"]) == 2
        one_line_error(capsys.readouterr().err, "fixed-safety:increase", "'temprature'")
        assert main([*args, "-O", "temperature=0.5"]) == 0
    finally:
        unregister("fixed-safety")


def test_score_fields_and_clusters_are_checked(synth, tmp_path, capsys):
    run = model_run(synth, tmp_path / "run", capsys)
    assert main(["score", str(run), "--by", "nonexistent"]) == 2
    one_line_error(capsys.readouterr().err, "'nonexistent'", "category", "tier", "curve")
    assert main(["score", str(run), "--by", "teir"]) == 2
    one_line_error(capsys.readouterr().err, "did you mean 'tier'")
    summary = vocalgrad.score(run, by="tier", write=False)
    groups = {g["group"] for g in next(iter(summary["groups"].values()))["table"]}
    assert groups == {"overall", "low", "high"}  # one field, not the letters t, i, e, r
    assert set(vocalgrad.open_run(run).table(by="curve")["group"]) == {"overall", "linear", "jump"}
    with pytest.raises(ConfigError, match="cluster field 'nope'.*source_id, speaker_id"):
        vocalgrad.score(run, cluster="nope", write=False)
    items = vocalgrad.score(run, cluster="item", write=False)
    assert next(iter(items["groups"].values()))["table"][0]["cluster"] == "item"


# --- 4. tracebacks --------------------------------------------------------------------------


def test_vocalgrad_report_stays_callable_after_its_subpackage_is_imported(synth, tmp_path, capsys):
    run = model_run(synth, tmp_path / "run", capsys)
    first = vocalgrad.report([run], tmp_path / "a.html")
    import vocalgrad.report.render as render  # the subpackage, by its full name

    second = vocalgrad.report([run], tmp_path / "b.html")
    assert first.is_file() and second.is_file() and callable(render.to_html)
    from vocalgrad.report import write_report

    assert callable(write_report) and callable(vocalgrad.report)


def test_evaluate_without_a_listener_is_a_clear_error(synth, tmp_path):
    with pytest.raises(ConfigError, match="listener = None: give a spec string"):
        vocalgrad.evaluate(synth, None, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fault", ["duplicate item_id", "missing clip"])
def test_human_create_on_a_broken_dataset_is_one_line(tmp_path, capsys, fault):
    ds = make_dataset(tmp_path / "ds", n_sources=2, categories=("volume",))
    meta = ds / "test" / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    if fault == "duplicate item_id":
        rows[1]["item_id"] = rows[0]["item_id"]
        meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        for r in rows:
            (ds / "test" / r["file_name"]).unlink()
    study = write_study(tmp_path / "study.toml", n_annotators=2, annotators_per_item=1)
    assert main(["human", "create", str(ds), "--study", str(study)]) == 2
    error = one_line_error(capsys.readouterr().err)
    named = [rows[0]["item_id"]] if fault == "duplicate item_id" else [r["file_name"] for r in rows]
    assert any(n in error for n in named), error
    assert not (tmp_path / "study.sqlite").exists()  # nothing half made


def test_human_serve_on_a_busy_port_fails_before_it_says_serving(synth, tmp_path, capsys):
    study = write_study(tmp_path / "study.toml")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = ["human", "serve", str(synth), "--study", str(study), "--port", str(port), "--dev"]
        assert main(args) == 2
    captured = capsys.readouterr()
    one_line_error(captured.err, f"127.0.0.1:{port}", "--port")
    assert "serving" not in captured.out and not (tmp_path / "study.sqlite").exists()


def test_verify_exits_non_zero_when_clips_disagree_or_cannot_be_read(built, tmp_path, capsys):
    assert main(["verify", str(built)]) == 0
    copy = tmp_path / "flipped"
    shutil.copytree(built, copy)
    meta = copy / "test" / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    flip = {"increase": "decrease", "decrease": "increase"}
    changing = next(r for r in rows if r["direction"] in flip)
    changing["direction"] = flip[changing["direction"]]
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["verify", str(copy)]) == 1
    assert "verify failed: 1 clip(s)" in capsys.readouterr().out

    unreadable = tmp_path / "unreadable"
    shutil.copytree(built, unreadable)
    (unreadable / "test" / rows[-1]["file_name"]).write_bytes(b"not audio")
    assert main(["verify", str(unreadable)]) == 1
    assert "verify failed" in capsys.readouterr().out

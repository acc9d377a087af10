"""Identity faults: what an answer, a run, a dataset and a source *are* must not be confused.

The answer cache's key covers everything an answer depends on (a baseline's train split and
its labels included), and a cache hit is said out loud; the dataset hash covers the labels;
a dataset is validated when opened; a report refuses another dataset's card; byte-identical
sources are kept once; a build never writes inside its sources; a killed `human export`
never leaves a torn export that `score` or `report` would read. Builds are tiny (volume, one
tier and curve, 2 test sources), listeners are baselines, a spy or a stub server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import arctic_path
from e2e.human_helpers import Env, do_trial, write_study
from fault_helpers import ROOT, StubServer, jsonl_rows

from vocalgrad.audio import load_audio
from vocalgrad.cli import main
from vocalgrad.dataset import content_sha256, load_rows
from vocalgrad.errors import ConfigError, DatasetError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, answer_key, evaluate
from vocalgrad.listeners import Listener, Request
from vocalgrad.listeners.baselines import OneEndObserver, ShortcutListener
from vocalgrad.listeners.openai_api import OpenAIListener
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.sources import default_cache_dir
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

TINY = BuildConfig(
    n_test=2, n_train=2, categories=("volume",), tiers=("high",), curves=("linear",), constants=1
)
N_TEST = 6  # 2 sources x (increase, decrease, constant)


@pytest.fixture(scope="module")
def builds(tmp_path_factory, cache_dir) -> dict[str, Path]:
    """Two builds that differ only in --n-train (2 and 6): the same test clips."""
    root = tmp_path_factory.mktemp("identity")
    out = {}
    for name, n_train in (("a", 2), ("b", 6)):
        out[name] = root / name
        build(TINY.replace(n_train=n_train), out[name], workers=1, audit=False, cache_dir=cache_dir)
    return out


@pytest.fixture(autouse=True)
def answer_cache(tmp_path, monkeypatch):
    """A fresh answer cache per test: what a test shares, it shares on purpose."""
    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "cache"))


def one_line_error(text: str, *needles: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert "Traceback" not in text, text
    errors = [line for line in lines if line.startswith("vocalgrad: ")]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


def copy_with(dataset: Path, dest: Path, split: str, edit) -> Path:
    """A copy of `dataset` whose `split` metadata rows went through `edit(rows) -> rows`."""
    shutil.copytree(dataset, dest)
    meta = dest / split / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    meta.write_text("".join(json.dumps(r) + "\n" for r in edit(rows)))
    return dest


def flip_first_label(rows: list[dict]) -> list[dict]:
    victim = next(r for r in rows if r["direction"] in ("increase", "decrease"))
    victim["direction"] = {"increase": "decrease", "decrease": "increase"}[victim["direction"]]
    return rows


def eval_cli(dataset: Path, out: Path, listener: str, *extra: str) -> int:
    return main(["eval", str(dataset), "--listener", listener, "--out", str(out), *extra])


def llrs(run: Path) -> dict[str, float]:
    return {r["item_id"]: r["llr"] for r in jsonl_rows(run / "results.jsonl")}


# --- the answer cache's key ---------------------------------------------------------------


def test_two_builds_sharing_test_clips_never_share_a_fitted_baselines_answers(
    builds, tmp_path, capsys, monkeypatch
):
    """The issue's case: `baseline:one-end` learns on the train split, so build B's answers
    are not build A's, though the test clips are byte-identical; nor are those of B with
    one train label flipped."""
    a, b = builds["a"], builds["b"]
    test_a, test_b = (
        {r["item_id"]: r["audio_sha256"] for r in load_rows(d, ("test",))} for d in (a, b)
    )
    assert test_a == test_b  # the same test clips, byte for byte
    assert eval_cli(a, tmp_path / "a", "baseline:one-end") == 0
    assert eval_cli(b, tmp_path / "b", "baseline:one-end") == 0  # the same cache
    assert "answered from cache" not in capsys.readouterr().out
    assert not any(r["cached"] for r in jsonl_rows(tmp_path / "b" / "results.jsonl"))
    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "empty-cache"))
    assert eval_cli(b, tmp_path / "b-fresh", "baseline:one-end") == 0
    assert llrs(tmp_path / "b") == llrs(tmp_path / "b-fresh") != llrs(tmp_path / "a")
    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "cache"))  # the shared one again

    flipped = copy_with(b, tmp_path / "b-flipped", "train", flip_first_label)
    assert eval_cli(flipped, tmp_path / "flipped", "baseline:one-end") == 0
    assert "answered from cache" not in capsys.readouterr().out
    assert not any(r["cached"] for r in jsonl_rows(tmp_path / "flipped" / "results.jsonl"))


def test_a_fitted_baselines_identity_names_its_train_data_and_labels(builds, tmp_path):
    a, b = builds["a"], builds["b"]
    flipped = copy_with(a, tmp_path / "flipped", "train", flip_first_label)
    for make in (OneEndObserver, ShortcutListener):
        seen = {make(d).manifest()["fitted_on"] for d in (a, b, flipped)}
        assert len(seen) == 3, make
        assert make(a).manifest() == make(a).manifest()  # the same data: the same identity


class Spy(Listener):
    """Answers anything; `option` stands for a listener option that changes its answers."""

    listener_id = "spy"
    can_score = True

    def __init__(self, option: int = 0, fitted_on: str | None = None) -> None:
        self.option, self.fitted_on = option, fitted_on

    def manifest(self) -> dict:
        return {**super().manifest(), "option": self.option}

    def score_choices(self, requests):
        return [{o: -float(i) for i, o in enumerate(r.prompt.options)} for r in requests]

    def generate(self, requests, max_new_tokens=16):
        return [r.prompt.options[0] for r in requests]


def test_each_input_of_the_answer_key_changes_it_and_a_change_is_a_cache_miss(builds, tmp_path):
    a = builds["a"]
    cache = AnswerCache(tmp_path / "answers.sqlite")
    runs = iter(range(100))

    def from_cache(listener: Listener, dataset: Path = a, **config) -> int:
        counts = evaluate(
            dataset, listener, tmp_path / f"run{next(runs)}", EvalConfig(**config), cache=cache
        )
        assert counts["answered"] == N_TEST
        return counts["from_cache"]

    assert from_cache(Spy()) == 0
    assert from_cache(Spy()) == N_TEST  # nothing changed: every answer from the cache
    assert from_cache(Spy(option=1)) == 0  # a listener option
    assert from_cache(Spy(fitted_on="train-v2")) == 0  # what the listener learnt from
    assert from_cache(Spy(), variants=("clip",)) == 0  # the prompt
    assert from_cache(Spy(), few_shot=1) == 0  # the prompt's examples (from the train split)
    assert from_cache(Spy(), mode="generate") == 0  # the mode
    assert from_cache(Spy(), mode="generate") == N_TEST
    assert from_cache(Spy(), mode="generate", max_new_tokens=4) == 0  # decoding
    # the clip: one file changed, one item asked again
    changed = tmp_path / "changed"
    shutil.copytree(a, changed)
    row = load_rows(changed, ("test",))[0]
    audio, sr = load_audio(row["path"])
    sf.write(row["path"], audio * 0.5, sr)
    assert from_cache(Spy(), dataset=changed) == N_TEST - 1


def test_the_key_names_options_prompt_decoding_mode_and_audio():
    """`answer_key` directly: each input on its own changes the key."""
    clip = np.linspace(-0.1, 0.1, 1600, dtype=np.float32)
    prompt = build_prompt("volume").for_item("x")

    def key(identity=None, mode="choice", prompt=prompt, audio=clip, tokens=16, source="s"):
        request = Request("x", prompt, {"x": audio}, source)
        return answer_key(identity or {"listener": "l", "revision": "1"}, mode, request, tokens)

    base = key()
    endpoint = "http://127.0.0.1:9/v1"
    seeds = [OpenAIListener("openai:m", base_url=endpoint, seed=s).manifest() for s in (1, 2)]
    changed = [
        key(identity={"listener": "l", "revision": "2"}),
        key(identity={"listener": "l", "revision": "1", "fitted_on": "abc"}),
        key(identity=seeds[0]),
        key(identity=seeds[1]),
        key(mode="generate"),
        key(prompt=build_prompt("volume", "clip").for_item("x")),
        key(prompt=build_prompt("voice_pitch").for_item("x")),
        key(audio=clip * 0.5),
        key(audio=np.stack([clip, clip], axis=1)),
        key(audio=None),
        key(source="t"),
    ]
    assert len({base, *changed}) == len(changed) + 1
    assert key(mode="generate", tokens=8) != key(mode="generate")
    assert key(tokens=8) == base  # choice mode generates nothing: the limit plays no part


# --- the dataset's identity ----------------------------------------------------------------


def test_the_dataset_hash_covers_labels_and_an_edited_copy_does_not_resume_the_old_run(
    builds, tmp_path, capsys
):
    a = builds["a"]
    assert json.loads((a / "build.json").read_text())["content_sha256"] == content_sha256(a)
    copy = tmp_path / "copy"
    shutil.copytree(a, copy)
    run = tmp_path / "run"
    assert eval_cli(copy, run, "baseline:ideal") == 0
    before = json.loads((run / "manifest.json").read_text())["dataset_sha256"]
    capsys.readouterr()
    meta = copy / "test" / "metadata.jsonl"
    meta.write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in flip_first_label([json.loads(x) for x in meta.read_text().splitlines()])
        )
    )
    assert content_sha256(copy) != before
    assert eval_cli(copy, run, "baseline:ideal") == 2
    one_line_error(capsys.readouterr().err, str(run), "another dataset", "labels changed")
    assert len(jsonl_rows(run / "results.jsonl")) == N_TEST  # nothing added to the old run


@pytest.mark.parametrize(
    "edit, needles",
    [
        (lambda rows: [*rows, dict(rows[0])], ("item_id", "occurs twice", "first at")),
        (
            lambda rows: [{**rows[0], "direction": "up"}, *rows[1:]],
            ("direction: input should be 'increase', 'decrease' or 'constant'", "'up'"),
        ),
        (
            lambda rows: [{k: v for k, v in rows[0].items() if k != "tier"}, *rows[1:]],
            ("tier: field required",),
        ),
        (lambda rows: [{**rows[0], "split": "train"}, *rows[1:]], ("split 'train'",)),
        (lambda rows: [{**rows[0], "file_name": "../../x.flac"}, *rows[1:]], ("file_name",)),
    ],
    ids=["duplicate-id", "invalid-label", "missing-field", "wrong-split", "outside"],
)
def test_a_bad_row_is_refused_when_the_dataset_is_opened(builds, tmp_path, capsys, edit, needles):
    bad = copy_with(builds["a"], tmp_path / "bad", "test", edit)
    n = len((bad / "test" / "metadata.jsonl").read_text().splitlines())
    line = n if "first at" in needles else 1
    where = f"{bad / 'test' / 'metadata.jsonl'}:{line}"
    with pytest.raises(DatasetError, match="metadata.jsonl"):
        load_rows(bad)
    study = write_study(tmp_path / "study.toml")
    for args in (
        ["verify", str(bad)],
        ["eval", str(bad), "--listener", "baseline:ideal", "--out", str(tmp_path / "run")],
        ["human", "create", str(bad), "--study", str(study)],
    ):
        assert main(args) == 2, args
        one_line_error(capsys.readouterr().err, where, *needles)
    assert not (tmp_path / "run" / "results.jsonl").exists()
    assert not (tmp_path / "study.sqlite").exists()


def test_a_report_refuses_the_card_of_another_dataset_unless_told(builds, tmp_path, capsys):
    a, b = builds["a"], builds["b"]
    run = tmp_path / "run"
    assert eval_cli(a, run, "baseline:random") == 0
    out = tmp_path / "r.md"
    report = ["report", str(run), "--output-format", "md", "--out", str(out), "--n-boot", "20"]
    capsys.readouterr()
    assert main([*report, "--dataset", str(b)]) == 2
    one_line_error(capsys.readouterr().err, f"--dataset {b} is not the dataset", "run", "mismatch")
    assert not out.exists()
    assert main([*report, "--dataset", str(b), "--allow-dataset-mismatch"]) == 0
    assert "Not the dataset of the runs" in out.read_text()
    assert main([*report, "--dataset", str(a)]) == 0
    assert "Not the dataset of the runs" not in out.read_text()


def test_a_report_shows_the_card_of_one_of_several_builds_but_not_of_a_changed_one(
    builds, tmp_path, capsys
):
    """Runs on two builds (a demo's tiers beside its sweep): the card of either is shown, and
    says the other runs were on other builds; a build edited since its run is refused."""
    a, b = builds["a"], builds["b"]
    assert eval_cli(a, tmp_path / "on-a", "baseline:random") == 0
    assert eval_cli(b, tmp_path / "on-b", "baseline:random") == 0
    out = tmp_path / "r.md"
    report = ["report", str(tmp_path / "on-a"), str(tmp_path / "on-b"), "--output-format", "md"]
    report += ["--out", str(out), "--n-boot", "20", "--overwrite"]
    capsys.readouterr()
    assert main([*report, "--dataset", str(a)]) == 0
    assert "1 of the runs were evaluated; the other 1 were evaluated on other builds" in (
        out.read_text()
    )
    edited = copy_with(a, tmp_path / "edited", "test", flip_first_label)
    assert eval_cli(edited, tmp_path / "on-edited", "baseline:random") == 0
    meta = edited / "test" / "metadata.jsonl"
    meta.write_text("".join(json.dumps(r) + "\n" for r in flip_first_label(jsonl_rows(meta))))
    capsys.readouterr()
    changed = ["report", str(tmp_path / "on-edited"), str(tmp_path / "on-b"), "--dataset"]
    assert main([*changed, str(edited), "--out", str(tmp_path / "c.md")]) == 2
    one_line_error(capsys.readouterr().err, "it changed since", "--allow-dataset-mismatch")


# --- sources ---------------------------------------------------------------------------------


def _corpus(root: Path) -> Path:
    """Four speakers' folders; b's recording is a's file under another name."""
    speech, sr = load_audio(arctic_path())
    for name, gain in (("a", 0.5), ("c", 0.7), ("d", 0.9)):
        (root / name).mkdir(parents=True)
        sf.write(root / name / f"{name}1.wav", speech * gain, sr)
    (root / "b").mkdir()
    shutil.copyfile(root / "a" / "a1.wav", root / "b" / "b1.wav")
    return root


def _build_folder(out: Path, root: Path, *more: str) -> list[str]:
    config = out.parent / f"{out.name}.toml"
    config.write_text("[build]\nper_speaker_test = 1\n")
    return [
        "build", "--out", str(out), "--source", f"folder:{root}", "--n-test", "2",
        "--n-train", "1", "--config", str(config), "--dimensions", "volume", "--tiers", "high",
        "--curves", "linear", "--constants", "1", "--no-audit", "--workers", "1", *more,
    ]  # fmt: skip


def test_byte_identical_sources_under_two_names_are_kept_once_and_counted(tmp_path, capsys):
    root = _corpus(tmp_path / "corpus")
    assert main(["sources", f"folder:{root}"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("3 sources, 3 speakers")
    assert "1 duplicate source file(s) left out" in text and "folder/b/b1.wav" in text
    out = tmp_path / "ds"
    assert main(_build_folder(out, root)) == 0
    assert "1 duplicate source file(s) left out" in capsys.readouterr().out
    assert json.loads((out / "build.json").read_text())["source_duplicates_dropped"] == 1
    report = json.loads((out / "build_report.json").read_text())
    assert report["source_duplicates"] == {"folder/b/b1.wav": "folder/a/a1.wav"}
    used = {r["source_id"] for r in load_rows(out)}
    assert "folder/b/b1.wav" not in used and len(used) == 3


def test_a_build_never_writes_inside_or_around_its_source_folder(tmp_path, capsys):
    root = _corpus(tmp_path / "corpus")
    inside = root / "out"
    assert main(_build_folder(inside, root)) == 2
    one_line_error(capsys.readouterr().err, "inside the source folder", "this build's clips")
    assert not inside.exists()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main([*_build_folder(tmp_path, root), "--overwrite"]) == 2
    one_line_error(capsys.readouterr().err, "around the source folder", "delete the sources")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


# --- a listening-test export ------------------------------------------------------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Env:
    """A study whose one annotator answered every trial right."""
    env = Env(tmp_path_factory.mktemp("study"), n_annotators=1, annotators_per_item=1)
    _, client = env.annotator("a01")
    while client.get("/api/state").json()["phase"] not in ("done", "excluded"):
        do_trial(client, env.db, env.clock.advance)
    return env


def test_a_torn_export_is_refused_by_score_and_report(study, tmp_path, capsys):
    torn = tmp_path / "torn"
    assert main(["human", "export", "--study", str(study.study), "--out", str(torn)]) == 0
    (torn / "manifest.json").unlink()  # as a kill -9 left it before the fix
    (torn / "agreement.json").write_text("")
    capsys.readouterr()
    assert main(["score", str(torn)]) == 2
    one_line_error(capsys.readouterr().err, "incomplete", "manifest.json missing")
    assert main(["report", str(torn), "--out", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys.readouterr().err, "incomplete")
    assert not (tmp_path / "r.html").exists()


KILLER = """
import os, signal, sys
from vocalgrad.human import export
from vocalgrad.cli import main
calls, where, n = {{"n": 0}}, {where!r}, {n}
real = getattr(export, where) if where != "replace" else export.os.replace
def dying(*args, **kwargs):
    calls["n"] += 1
    if calls["n"] == n:
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
if where == "replace":
    export.os.replace = dying
else:
    setattr(export, where, dying)
sys.exit(main(sys.argv[1:]))
"""


def _killed_export(study: Env, out: Path, where: str, n: int) -> int:
    """`vocalgrad human export` killed with SIGKILL at the n-th call of `where`."""
    path = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT / "src")])
    done = subprocess.run(
        [
            sys.executable, "-c", KILLER.format(where=where, n=n),
            "human", "export", "--study", str(study.study), "--out", str(out),
        ],
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    return done.returncode


@pytest.mark.slow  # starts, kills and restarts the CLI
def test_a_killed_export_leaves_no_torn_export(study, tmp_path, capsys):
    out = tmp_path / "export"
    for n in (1, 3, 4):  # before, between and after the files are written
        assert _killed_export(study, out, "atomic_write_text", n) == -signal.SIGKILL
        assert not out.exists()  # nothing half made, only a temporary folder to sweep
    assert main(["human", "export", "--study", str(study.study), "--out", str(out)]) == 0
    whole = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(whole) == {"results.jsonl", "trials.jsonl", "agreement.json", "manifest.json"}
    # exported again over it: calls 1-4 of os.replace write the temporary folder's files,
    # 5-8 move them in (the old manifest is removed before the first move)
    for n in (2, 5, 6, 8):
        assert _killed_export(study, out, "replace", n) == -signal.SIGKILL
        now = {p.name: p.read_bytes() for p in out.iterdir()}
        if n <= 4:
            assert now == whole  # the earlier export, untouched
            continue
        assert set(now) == set(whole) - {"manifest.json"} and all(now.values())
        capsys.readouterr()
        assert main(["score", str(out)]) == 2
        one_line_error(capsys.readouterr().err, "incomplete", "manifest.json missing")
    assert main(["human", "export", "--study", str(study.study), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == set(whole)
    rows = jsonl_rows(out / "results.jsonl")
    assert rows == [json.loads(line) for line in whole["results.jsonl"].decode().splitlines()]


# --- the cache is visible (issue 55) ----------------------------------------------------------


def test_answers_from_the_cache_are_said_and_recorded_and_no_cache_asks_afresh(
    builds, tmp_path, capsys
):
    server = StubServer("ok")
    try:
        listener = ("openai:stub", "-O", f"base_url={server.url}")
        assert eval_cli(builds["a"], tmp_path / "first", *listener) == 0
        asked = server.calls
        assert asked == N_TEST and "answered from cache" not in capsys.readouterr().out
        second = tmp_path / "second"
        assert eval_cli(builds["a"], second, *listener) == 0
        assert server.calls == asked  # the server heard nothing: say so
        assert f"{N_TEST} answered from cache" in capsys.readouterr().out
        assert all(r["cached"] for r in jsonl_rows(second / "results.jsonl"))
        assert json.loads((second / "summary.json").read_text())["answered_from_cache"] == N_TEST
        fresh = tmp_path / "fresh"
        assert eval_cli(builds["a"], fresh, *listener, "--no-cache") == 0
        assert server.calls == 2 * asked
        assert "answered from cache" not in capsys.readouterr().out
        assert not any(r["cached"] for r in jsonl_rows(fresh / "results.jsonl"))
        assert json.loads((fresh / "summary.json").read_text())["answered_from_cache"] == 0
    finally:
        server.close()


def test_an_unusable_cache_variable_is_one_line(builds, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("VOCALGRAD_CACHE", "~nosuchuser-vocalgrad/x")
    with pytest.raises(ConfigError, match="VOCALGRAD_CACHE"):
        default_cache_dir()
    assert eval_cli(builds["a"], tmp_path / "run", "baseline:random") == 2
    one_line_error(capsys.readouterr().err, "VOCALGRAD_CACHE='~nosuchuser-vocalgrad/x'")

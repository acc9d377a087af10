"""A researcher's first week (issue 55): what tripped a new user, each on a real small build.

Balanced --limit subsets, `score` on a listening-study export, progress in terminals and
logs, the openai: listener's options and usage, portable harness exports, a failed audit's
exit status, and a suggestion for every mistyped name.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import soundfile as sf

from vocalgrad.cli import main
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

pytestmark = pytest.mark.usefixtures("builtin_cache")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cache_dir) -> Path:
    """Two categories, four test sources, every tier and curve, constants: 216 test items."""
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("first-week") / "ds"
    build(
        BuildConfig(n_test=4, n_train=2, categories=("volume", "voice_pitch")),
        out,
        workers=2,
        audit=False,
    )
    return out


def one_line_error(err: str) -> str:
    """The one error line of stderr (a progress line, on a slow machine, or a warning, such as
    the shared build's audit failing by chance, may stand beside it)."""
    lines = [line for line in err.splitlines() if line.startswith("vocalgrad: error: ")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# -- 10. typos get help ------------------------------------------------------------------


def test_did_you_mean_finds_close_names_and_only_those():
    from vocalgrad.errors import did_you_mean

    assert did_you_mean("pitch", ["volume", "voice_pitch"]) == " (did you mean 'voice_pitch'?)"
    assert did_you_mean("idael", ["random", "ideal"]) == " (did you mean 'ideal'?)"
    assert did_you_mean("zzz", ["volume", "voice_pitch"]) == ""
    assert did_you_mean("", ["volume"]) == ""


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--listener", "whisper-tiny"], "did you mean 'whisper:tiny.en'?"),
        (["--listener", "baseline:idael"], "did you mean 'ideal'?"),
        (["--listener", "whsper:tiny.en"], "did you mean 'whisper'?"),
        (["--listener", "baseline:ideal", "--dimensions", "pitch"], "did you mean 'voice_pitch'?"),
        (["--listener", "baseline:ideal", "--variants", "swaped"], "did you mean 'swapped'"),
        (["--listener", "baseline:ideal", "--controls", "revesed"], "did you mean 'reversed'?"),
        (
            ["--listener", "openai:m", "-O", "base_url=http://127.0.0.1:9/v1", "-O", "seeed=1"],
            "did you mean 'seed'?",
        ),
        (["--listener", "baseline:always-increase", "-O", "seed=1"], "takes no options"),
    ],
)
def test_a_mistyped_name_is_one_line_with_a_suggestion(dataset, tmp_path, capsys, argv, expected):
    code = main(["eval", str(dataset), "--out", str(tmp_path / "run"), *argv])
    line = one_line_error(capsys.readouterr().err)
    assert code == 2 and expected in line, line
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_an_unknown_category_names_the_datasets_dimensions(dataset, tmp_path, capsys):
    assert main(["eval", str(dataset), "--listener", "baseline:ideal", "--dimensions", "echo"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "no dimension 'echo'" in line and "this dataset has voice_pitch, volume" in line
    assert main(["build", "--out", str(tmp_path / "b"), "--dimensions", "pitch"]) == 2
    assert "did you mean 'voice_pitch'?" in one_line_error(capsys.readouterr().err)
    assert main(["sources", "foldr:/tmp"]) == 2
    assert "did you mean 'folder'?" in one_line_error(capsys.readouterr().err)
    assert main(["build", "--out", str(tmp_path / "b"), "--protocol", "vocalgrd"]) == 2
    assert "did you mean 'vocalgrad'?" in one_line_error(capsys.readouterr().err)


def test_list_listeners_shows_every_baseline_the_error_names(capsys):
    from vocalgrad.listeners.baselines import BASELINES

    assert main(["eval", "x", "--listener", "baseline:nope"]) == 2
    named = capsys.readouterr().err
    assert main(["list", "listeners"]) == 0
    listed = capsys.readouterr().out
    assert "one-end" in named and len(BASELINES) == 6
    for name in BASELINES:
        assert name in named and f"baseline:{name}" in listed, name


# -- 3. `score` on a listening-study export ----------------------------------------------


def test_score_reads_a_listening_study_export_in_both_formats(tmp_path, capsys):
    """The export's manifest names its listener as text and its groups hold several
    listeners (the pool and each annotator): both writers read both."""
    pytest.importorskip("fastapi", reason="pip install -e '.[human]'")
    from e2e.human_helpers import Env

    env = Env(tmp_path, n_annotators=2, annotators_per_item=2)
    for who in ("a01", "a02"):
        _, client = env.annotator(who)
        env.run(client)  # every answer right
    out = tmp_path / "export"
    assert main(["human", "export", "--study", str(env.study), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["score", str(out), "--n-boot", "50"]) == 0
    table = capsys.readouterr().out
    for who in ("human", "human:a01", "human:a02"):
        assert f"### {who} — default/generate" in table, table
    assert json.loads((out / "summary.json").read_text())["groups"]
    assert main(["score", str(out), "--output-format", "csv", "--n-boot", "50"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {r["listener"] for r in rows} == {"human", "human:a01", "human:a02"}
    assert {r["prompt"] for r in rows} == {"default/generate"}
    overall = [r for r in rows if r["group"] == "overall"]
    assert len(overall) == 3 and all(float(r["accuracy"]) == 1.0 for r in overall)


# -- 7. a build that fails its audit exits non-zero --------------------------------------


def test_a_failed_audit_stops_a_pipeline_unless_allowed(tmp_path, capsys):
    """Increase clips made 12 dB quieter than their twins: loudness tells the direction, so
    the audit fails, and `build` (resuming the finished build) and `audit` exit 4 with one
    line naming the failing category; --allow-audit-failure goes on with a warning."""
    out = tmp_path / "leaky"
    argv = ["build", "--out", str(out), "--n-test", "4", "--n-train", "2"]
    argv += ["--dimensions", "voice_pitch", "--tiers", "high", "--curves", "linear,jump"]
    assert main([*argv, "--no-audit"]) == 0
    for split in ("test", "train"):
        for line in (out / split / "metadata.jsonl").read_text().splitlines():
            row = json.loads(line)
            if row["direction"] == "increase":
                path = out / split / row["file_name"]
                audio, sr = sf.read(path)
                sf.write(path, audio * 0.25, sr, subtype=sf.info(path).subtype)
    capsys.readouterr()
    assert main(argv) == 4
    line = one_line_error(capsys.readouterr().err)
    assert "shortcut audit failed for 1 of 1 dimensions: voice_pitch (" in line
    assert "--allow-audit-failure" in line
    assert main([*argv, "--allow-audit-failure"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("vocalgrad: warning: shortcut audit failed") and "voice_pitch" in err
    assert main(["audit", str(out)]) == 4
    assert "voice_pitch (" in one_line_error(capsys.readouterr().err)
    assert main(["audit", str(out), "--allow-audit-failure"]) == 0


def test_audit_exit_status_follows_its_report(dataset, capsys):
    code = main(["audit", str(dataset)])
    report = json.loads((dataset / "audit.json").read_text())
    failing = [c for c, r in report["per_category"].items() if r["passes"] is False]
    assert code == (4 if failing else 0)
    if not failing:
        assert "shortcut audit passed" in capsys.readouterr().out


# -- 1. --limit must not bias the score ---------------------------------------------------


def _summary(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())


def test_limit_scores_a_biased_listener_at_chance(dataset, tmp_path, capsys):
    """Always "increase" earns exactly half of every category and overall under --limit 40:
    the subset holds as many increase as decrease clips (twin pairs), over every source,
    tier and curve, and the run says so and records it."""
    run = tmp_path / "inc"
    argv = ["eval", str(dataset), "--listener", "baseline:always-increase", "--limit", "40"]
    assert main([*argv, "--out", str(run)]) == 0
    out = capsys.readouterr().out
    assert "--limit 40: 40 of 216 items" in out and "balanced over direction, tier and curve" in out
    table = _summary(run)["groups"]["default/choice"]["table"]
    assert {g["group"] for g in table} == {"overall", "volume", "voice_pitch"}
    for group in table:
        assert group["accuracy"] == 0.5 and group["increase_rate"] == 1.0, group
    subset = json.loads((run / "manifest.json").read_text())["subset"]
    assert subset["balanced"] and subset["n"] == 40
    for counts in subset["per_category"].values():
        assert counts["increase"] == counts["decrease"] and counts["sources"] == 4
        assert max(counts["tiers"].values()) - min(counts["tiers"].values()) <= 2
        assert max(counts["curves"].values()) - min(counts["curves"].values()) <= 2


def test_a_limit_that_cannot_be_balanced_is_said_and_recorded(dataset, tmp_path, capsys, caplog):
    """Said before the run (a warning: the console's, or the application's logging) and
    again under the scores."""
    run = tmp_path / "three"
    argv = ["eval", str(dataset), "--listener", "baseline:always-increase", "--limit", "3"]
    assert main([*argv, "--out", str(run)]) == 0
    assert "NOT balanced" in caplog.text and "fewer than one twin pair" in caplog.text
    err = capsys.readouterr().err
    assert "the scores above rest on an unbalanced --limit subset" in err
    subset = json.loads((run / "manifest.json").read_text())["subset"]
    assert not subset["balanced"] and subset["problems"]


def test_a_run_limited_by_another_selection_is_not_mixed(dataset, tmp_path, capsys):
    """A run folder whose --limit chose other items (an older vocalgrad) is refused, not
    topped up with this version's choice."""
    run = tmp_path / "old"
    argv = ["eval", str(dataset), "--listener", "baseline:random", "--limit", "8"]
    assert main([*argv, "--out", str(run)]) == 0
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["subset"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    rows_before = (run / "results.jsonl").read_text()
    assert main([*argv, "--out", str(run)]) == 2
    assert "over other items" in one_line_error(capsys.readouterr().err)
    assert (run / "results.jsonl").read_text() == rows_before


# -- 4. progress: a bar in a terminal, a line now and then in a log ----------------------


def _eval_argv(dataset: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "vocalgrad.cli",
        "eval",
        str(dataset),
        "--listener",
        "baseline:ideal",
        "--limit",
        "40",
        "--batch-size",
        "8",
        "--out",
        str(out),
    ]


def test_eval_draws_a_bar_in_a_terminal_and_none_in_a_log(dataset, tmp_path):
    import fcntl
    import pty
    import select
    import struct
    import termios

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("VOCALGRAD_PROGRESS", None)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        _eval_argv(dataset, tmp_path / "tty"), stdout=subprocess.DEVNULL, stderr=slave, env=env
    )
    os.close(slave)
    seen = b""
    while select.select([master], [], [], 120)[0]:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    text = seen.decode(errors="replace")
    assert "eval baseline:ideal:" in text and "40/40" in text and "item/s" in text, text
    logged = subprocess.run(
        _eval_argv(dataset, tmp_path / "log"), capture_output=True, text=True, env=env, timeout=120
    )
    assert logged.returncode == 0, logged.stderr
    assert "\r" not in logged.stderr and "%|" not in logged.stderr and "item/s" not in logged.stderr


def test_a_log_gets_a_line_while_a_long_step_runs(dataset, tmp_path, monkeypatch, capsys):
    """No bar where stderr is no terminal, but a line every NOTE_EVERY_S seconds, also while
    one slow batch runs (no step ends meanwhile)."""
    import time

    from vocalgrad import progress
    from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate
    from vocalgrad.listeners import Listener

    class Slow(Listener):
        listener_id = "slow"

        def generate(self, requests, max_new_tokens=16):
            time.sleep(0.6)
            return ["increase"] * len(requests)

    monkeypatch.delenv("VOCALGRAD_PROGRESS", raising=False)
    monkeypatch.setattr(progress, "NOTE_EVERY_S", 0.2)
    evaluate(
        dataset,
        Slow(),
        tmp_path / "run",
        EvalConfig(limit=8, batch_size=4),
        cache=AnswerCache(tmp_path / "answers.sqlite"),
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("eval slow")]
    assert len(lines) >= 3, lines  # ~1.2 s of batches, a line every 0.2 s
    assert any(line.startswith("eval slow: 0/8 items (0%)") for line in lines), lines
    assert any("4/8 items (50%)" in line and "left" in line for line in lines), lines
    monkeypatch.setenv("VOCALGRAD_PROGRESS", "off")
    evaluate(
        dataset,
        Slow(),
        tmp_path / "quiet",
        EvalConfig(limit=4, batch_size=4),
        cache=AnswerCache(tmp_path / "quiet.sqlite"),
    )
    assert "eval slow" not in capsys.readouterr().err


def test_probe_fits_report_progress_and_a_deaf_stage_does_not_warn():
    """The probes' fits call back after each fold's linear and MLP fits; a stage the audio
    never reaches (one state for every clip) has a NaN alignment, without numpy's
    "All-NaN slice" warning."""
    import warnings

    import numpy as np

    from vocalgrad.probing.alignment import alignment
    from vocalgrad.probing.probes import ProbeSettings, fit_category

    rng = np.random.default_rng(0)
    rows = [
        {
            "item_id": f"{split}{s}{d}{t}",
            "split": split,
            "source_id": f"{split}{s}",
            "speaker_id": f"{split}{s}",
            "direction": d,
            "tier": t,
            "curve": "linear",
        }
        for split in ("train", "test")
        for s in range(4)
        for t in ("low", "high")
        for d in ("increase", "decrease")
    ]
    signal = np.array([1.0 if r["direction"] == "increase" else -1.0 for r in rows])
    features = {
        "encoder.1": (rng.standard_normal((len(rows), 6)) + signal[:, None]).astype(np.float32),
        "decoder.0@answer": np.ones((len(rows), 6), np.float32),
    }
    calls: list[tuple[int, int]] = []
    settings = ProbeSettings(seeds=1, mlp_steps=20, n_boot=10)
    fit_category(features, rows, settings, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, calls[0][1]) and calls[-1] == (calls[0][1], calls[0][1]) >= (2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        states = {s: v for s, v in features.items() if s.endswith("@answer")}
        result = alignment({"volume": (states, rows), "voice_pitch": (states, rows)})
    between = [r for r in result["rows"] if r["kind"] == "between categories"]
    assert between and all(np.isnan(r["null95"]) and np.isnan(r["cosine"]) for r in between)


# -- 5. the openai: listener's options, usage and errors -----------------------------------


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The chat-completions test server of test_openai_listener (it answers from the audio,
    reports usage and logprobs), and an answer cache of this test's own."""
    pytest.importorskip("httpx", reason="pip install -e '.[api]'")
    import test_openai_listener as served

    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "cache"))
    fixture = served.server.__wrapped__()
    state = next(fixture)
    state.model = served.MODEL
    yield state
    next(fixture, None)


def _openai(dataset: Path, api, out: Path, *more: str) -> list[str]:
    return [
        "eval",
        str(dataset),
        "--listener",
        f"openai:{api.model}",
        "-O",
        f"base_url={api.url}",
        "--dimensions",
        "volume",
        "--out",
        str(out),
        *more,
    ]


def test_token_usage_and_cost_reach_the_console_and_the_run_folder(dataset, api, tmp_path, capsys):
    run = tmp_path / "run"
    prices = ["-O", "input_price_per_m=2.5", "-O", "output_price_per_m=10"]
    prices += ["-O", "audio_input_price_per_m=40"]
    argv = _openai(dataset, api, run, "--limit", "8", "--mode", "generate", *prices)
    assert main(argv) == 0
    out = capsys.readouterr().out
    usage = json.loads((run / "manifest.json").read_text())["usage"]
    assert usage["requests"] == 8 == api.calls and usage["audio_tokens"] == 8 * 100
    assert usage["prompt_tokens"] == 8 * (20 + 100) and usage["completion_tokens"] == 8
    expected = (8 * 20 * 2.5 + 800 * 40.0 + 8 * 10.0) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected)
    assert f"openai:{api.model}: 8 requests (0 retries), 960 prompt tokens (800 audio)" in out
    assert f"cost ${expected:.4f} at the prices given" in out
    assert json.loads((run / "summary.json").read_text())["config"]["usage"] == usage
    assert main(argv) == 0  # nothing left to ask: nothing spent, the total stays
    assert json.loads((run / "manifest.json").read_text())["usage"] == usage


def test_choice_scoring_by_logprobs_from_the_command_line(dataset, api, tmp_path, capsys):
    run = tmp_path / "choice"
    argv = _openai(dataset, api, run, "--limit", "4", "--mode", "choice", "-O", "logprobs=true")
    assert main(argv) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert list(summary["groups"]) == ["default/choice"]
    assert all(b.get("logprobs") is True for b in api.bodies)
    assert "no cost (give prices" in capsys.readouterr().out


def test_a_server_without_logprobs_says_why_on_the_console(dataset, api, tmp_path, capsys):
    api.logprobs_supported = False
    run = tmp_path / "nolp"
    argv = _openai(dataset, api, run, "--limit", "4", "--mode", "choice", "-O", "logprobs=true")
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "4 of 4 items have no answer" in out
    assert "returned no top_logprobs" in out and "use logprobs=False" in out, out


def test_concurrency_beyond_a_batch_is_said_and_extra_body_is_json(dataset, api, tmp_path, capsys):
    api.delay = 0.05
    run = tmp_path / "conc"
    more = ["--limit", "8", "--mode", "generate", "--batch-size", "4", "-O", "concurrency=32"]
    more += ["-O", 'extra_body={"top_k": 1}']
    assert main(_openai(dataset, api, run, *more)) == 0
    err = capsys.readouterr().err
    assert "keeps at most 4 requests in flight, not its concurrency 32" in err
    assert "--batch-size 32" in err and api.max_inflight <= 4
    assert all(b["top_k"] == 1 for b in api.bodies)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["listener"]["decoding"]["top_k"] == 1
    assert main(_openai(dataset, api, tmp_path / "bad", "-O", "extra_body={top_k: 1}")) == 2
    assert "is not JSON" in one_line_error(capsys.readouterr().err)
    assert main(_openai(dataset, api, tmp_path / "typo", "-O", "max_token=5")) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "(did you mean 'max_tokens'" in line and "max_tokens_field" in line and "seed" in line


# -- 6. portable, offline harness exports -------------------------------------------------


def test_an_lmms_eval_export_moves_as_a_whole(dataset, tmp_path):
    """No absolute path in any YAML or docs.jsonl; moved elsewhere, each task's
    vocalgrad_task.py (which lmms-eval imports by its path) finds its docs and clips there,
    and the clips are the dataset's, sample for sample. (tests/test_lmms_eval_harness.py runs
    lmms-eval itself on a moved export.)"""
    import importlib.util
    import shutil

    import numpy as np

    from vocalgrad.audio import load_audio
    from vocalgrad.dataset import load_rows

    first = tmp_path / "first"
    argv = ["export", "lmms-eval", str(dataset), "--out", str(first), "--dimensions", "volume"]
    assert main(argv) == 0
    for path in first.rglob("*"):
        if path.suffix in (".yaml", ".jsonl", ".py"):
            assert str(tmp_path) not in path.read_text(), path
    moved = tmp_path / "elsewhere" / "tasks"
    shutil.move(first, moved)
    rows = {r["item_id"]: r for r in load_rows(dataset)}
    folder = moved / "vocalgrad_gradual"
    spec = importlib.util.spec_from_file_location("vocalgrad_task", folder / "vocalgrad_task.py")
    local = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(local)
    assert Path(local.DOCS) == folder / "docs.jsonl"
    docs = [json.loads(line) for line in Path(local.DOCS).read_text().splitlines()]
    assert docs and {d["category"] for d in docs} == {"volume"}
    for doc in docs[:4]:
        (clip,) = local.doc_to_visual(doc)
        original, sr = load_audio(rows[doc["item_id"]]["path"])
        assert clip["sampling_rate"] == sr and np.allclose(clip["array"], original, atol=1e-4)
        (message,) = local.doc_to_messages(doc)
        audio = next(p for p in message["content"] if p["type"] == "audio")
        assert Path(audio["url"]).is_file() and Path(audio["url"]).is_relative_to(moved)

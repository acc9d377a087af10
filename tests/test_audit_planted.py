"""Leaks planted in a real build are caught by the calibrated gates, and the clean build passes.

One builtin build of voice pitch at the demo's size (10 test + 8 train sources); each test
plants one leak of benchmarks/audit_null.py's `PLANTS` in a copy of it (the audio of every clip
with the plant's label rewritten, its row's hash and span updated) and runs the audit. The
benchmark measures the same plants' detection rate over many simulated builds of all 14
dimensions (results page)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import load_benchmark

from vocalgrad.audio import load_audio, write_flac_atomic
from vocalgrad.dataset import read_jsonl, write_jsonl
from vocalgrad.stimuli.audit import audit_dataset
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("builtin_cache")]
CATEGORY = "voice_pitch"


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("planted") / "clean"
    build(BuildConfig(n_test=10, n_train=8, categories=(CATEGORY,)), out, workers=2, audit=False)
    return out


def planted(clean: Path, out: Path, name: str) -> Path:
    """A copy of `clean` with plant `name` applied to every clip that carries its label."""
    label, plant = load_benchmark("audit_null").PLANTS[name]
    shutil.copytree(clean, out, ignore=shutil.ignore_patterns(".audit", "audit.json"))
    for split in ("train", "test"):
        rows = list(read_jsonl(out / split / "metadata.jsonl"))
        for row in rows:
            if row["direction"] != label:
                continue
            audio, sr = load_audio(out / split / row["file_name"], mono=False)
            audio = audio[:, 0] if audio.ndim == 2 and audio.shape[1] == 1 else audio
            changed, span = plant(audio, sr, row)
            row["audio_sha256"] = write_flac_atomic(out / split / row["file_name"], changed, sr)
            if span is not None:
                row["speech_onset_s"], row["speech_offset_s"] = span
        write_jsonl(out / split / "metadata.jsonl", rows)
    return out


def test_the_clean_build_passes(clean):
    report = audit_dataset(clean)
    c = report["per_category"][CATEGORY]
    assert report["passes"] is True and c["passes"] is True, c["reasons"]
    assert report["family"]["gates"] == 3
    assert report["family"]["needed"]["accuracy"] < 0.6  # detects a leak of 0.60 at this size


@pytest.mark.parametrize(
    ("name", "gates"),
    [
        ("loud_1db", {"direction", "order_free"}),  # the whole file 1 dB louder
        ("tail_50ms", {"direction", "order_free"}),  # audible 50 ms longer after the speech
        ("onset_80ms", {"direction", "order_free"}),  # the first 80 ms of speech buried
        ("lead_100ms", {"direction", "order_free"}),  # the speech 100 ms later in the file
        ("constants_3db", {"constant"}),  # constant clips 3 dB louder
    ],
)
def test_a_planted_leak_fails_the_gate_that_reads_it(clean, tmp_path, name, gates):
    report = audit_dataset(planted(clean, tmp_path / name, name))
    c = report["per_category"][CATEGORY]
    failing = {gate for gate, g in c["gates"].items() if g["fails"]}
    # a plant on changing clips sets them apart from the constants too: that gate may fail
    assert c["passes"] is False and failing & gates, (failing, c["reasons"])
    for gate in failing:
        g = c["gates"][gate]
        assert g["value"] > g["needed"] and g["p_fwer"] <= 0.05, g


def test_the_null_simulation_runs_on_the_build_and_catches_a_plant(clean, capsys):
    """benchmarks/audit_null.py's family simulation, the results page's false-alarm and
    detection figures, decides simulated builds with the audit's own gates."""
    load_benchmark("audit_null").main(
        [str(clean), "--test", "family", "--sims", "4", "--plant", "none", "--plant", "loud_1db"]
    )
    lines = capsys.readouterr().out.splitlines()
    share = {
        line.split(" | ")[0].strip("| "): float(line.split(" | ")[1].split("%")[0]) / 100
        for line in lines
        if line.startswith(("| none |", "| loud_1db |"))
    }
    assert set(share) == {"none", "loud_1db"}, lines
    assert share["loud_1db"] >= 0.75 and 0.0 <= share["none"] <= 1.0

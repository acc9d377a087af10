"""`vocalgrad verify` on our datasets and on the official layout; the CLI's error paths."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import alsa_paths, arctic_path, needs_alsa

from vocalgrad import dimensions
from vocalgrad.audio import SpeechSpan, load_audio
from vocalgrad.cli import main
from vocalgrad.dataset import load_references, load_rows
from vocalgrad.signal.analysis import Analysis
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.verify import (
    clip_analysis,
    heard_reference,
    measure_row,
    verify_dataset,
)

CONFIG = BuildConfig(n_test=2, n_train=0, tiers=("high",), curves=("linear", "jump"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cache_dir) -> Path:
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("verify") / "ds"
    build(CONFIG, out, workers=2, audit=False)
    return out


def test_verify_agrees_with_the_build(dataset):
    report = verify_dataset(dataset)
    assert not report["official"]
    for category, entry in report["per_category"].items():
        assert entry["agreement"] == 1.0, category
        assert entry["max_clipping_ratio"] == 0.0
    # blind measures fight natural declination of F0 and level, so they are weaker
    assert report["per_category"]["volume"]["blind_agreement"] >= 0.9
    assert report["per_category"]["voice_pitch"]["blind_agreement"] >= 0.5
    assert report["failures"] == []


def test_verify_measures_every_clip_as_the_build_did(tmp_path, cache_dir):
    """Verification re-measures each clip against its stored source: every dimension's
    measured change must come out as the build recorded it (to the row's 4 decimals), not
    only on the same side of the floor. The references' speech span, rounded to the
    millisecond, moved the source's head and tail windows: 38 of 426 changes differed, by up
    to 0.28 dB (volume and distance)."""
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    config = BuildConfig(n_test=2, n_train=0, tiers=("low",), categories=dimensions.names())
    build(config, tmp_path / "ds", workers=1, audit=False)
    refs = load_references(tmp_path / "ds")
    rows = load_rows(tmp_path / "ds")
    assert {r["category"] for r in rows} == set(dimensions.names())
    for row in rows:
        ref_row = refs[row["source_id"]]
        audio, sr = load_audio(row["path"], mono=False)
        clip = clip_analysis(row, audio, sr, ref_row)
        value, _ = measure_row(row, clip, heard_reference(ref_row, sr))
        assert value == pytest.approx(row["measured_change"], abs=1e-4, nan_ok=True), row


def test_a_span_one_rounding_error_away_reads_the_same_f0(arctic):
    """A part's span reaches verification as file time less the part's start (3.52 s - 3.09 s
    is 0.43000000000000016, the build had 0.43): Praat's analysed stretch, and with it the
    F0 track, must not move with it. It did: 0.43 - 0.1 s is 0.32999999999999996, truncated
    to sample 5279, a 30 ms step before 5280, and the part of a `how_much` pitch item read a
    change of 2.74 semitones at build and 2.34 at verify."""
    audio, sr = arctic
    offset = len(audio) / sr - 0.5
    tracks = [
        Analysis(audio, sr, span=SpeechSpan(onset, offset, True)).f0
        for onset in (0.43, 3.52 - 49440 / 16000)
    ]
    assert 3.52 - 49440 / 16000 != 0.43
    (t0, f0), (t1, f1) = tracks
    assert np.array_equal(t0, t1) and np.array_equal(f0, f1)


def test_verify_catches_a_wrong_label(dataset, tmp_path):
    copy = tmp_path / "tampered"
    shutil.copytree(dataset, copy)
    meta = copy / "test" / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    victim = next(r for r in rows if r["category"] == "volume" and r["direction"] == "increase")
    victim["direction"] = "decrease"
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = verify_dataset(copy)
    assert [f["item_id"] for f in report["failures"]] == [victim["item_id"]]
    assert report["per_category"]["volume"]["agreement"] < 1.0


def test_verify_reads_the_official_release_layout(dataset, tmp_path):
    """metadata.csv + audio folder, labels up/down, no references: blind checks only."""
    official = tmp_path / "official"
    (official / "audio").mkdir(parents=True)
    rows = [
        r
        for r in load_rows(dataset)
        if r["category"] in ("voice_pitch", "volume") and r["direction"] != "constant"
    ]
    with (official / "metadata.csv").open("w", newline="") as f:
        writer = csv.DictWriter(
            f, fieldnames=["file_name", "category", "direction", "source_clip_id"]
        )
        writer.writeheader()
        for i, r in enumerate(rows):
            shutil.copy(r["path"], official / "audio" / f"{i}.flac")
            writer.writerow(
                {
                    "file_name": f"audio/{i}.flac",
                    "category": r["category"],
                    "direction": "up" if r["direction"] == "increase" else "down",
                    "source_clip_id": r["source_id"],
                }
            )
    report = verify_dataset(official)
    assert report["official"]
    # a 36 dB jump sinks the quiet half under the speech detector; the blind measure reads
    # what sounds above the file's floor, so both halves count (0.5 when it read the span)
    assert report["per_category"]["volume"]["blind_agreement"] >= 0.9
    assert "agreement" not in report["per_category"]["volume"]


def test_cli_info_verify_and_dimension_table(dataset, capsys):
    assert main(["info", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "voice_clarity" in out and "content sha256" in out
    assert main(["info"]) == 0
    assert "semitones" in capsys.readouterr().out
    assert main(["verify", str(dataset), "--limit", "20"]) == 0
    assert "agreement" in capsys.readouterr().out


def test_cli_errors_are_one_line_without_traceback(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "vocalgrad.cli", *args], capture_output=True, text=True
        )

    result = run("build", "--out", str(tmp_path / "x"), "--dimensions", "loudness")
    assert result.returncode == 2
    assert "unknown dimension 'loudness'" in result.stderr and "Traceback" not in result.stderr
    result = run("verify", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "not found" in result.stderr
    result = run(
        "build", "--out", str(tmp_path / "y"), "--source", "folder:" + str(tmp_path / "missing")
    )
    assert (
        result.returncode == 2 and "missing" in result.stderr and "Traceback" not in result.stderr
    )
    result = run("sources", "tape:/dev/null")
    assert result.returncode == 2 and "tape" in result.stderr


def _speaker_folder(tmp_path: Path) -> Path:
    """Real recordings as a folder source: one speaker per sub-folder, plus bad files."""
    root = tmp_path / "corpus"
    for i, path in enumerate([arctic_path(), *alsa_paths()[:3]]):
        audio, sr = sf.read(path, dtype="float32")
        speaker = root / f"spk{i}"
        speaker.mkdir(parents=True)
        sf.write(
            speaker / "take.wav",
            np.concatenate([audio, audio]) if len(audio) < 3 * sr else audio,
            sr,
        )
    silent = root / "spk8"
    silent.mkdir()
    sf.write(silent / "silence.wav", np.zeros(48000 * 3, np.float32), 48000)
    broken = root / "spk9"
    broken.mkdir()
    (broken / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    return root


@needs_alsa
def test_folder_source_with_bad_files_skips_them_with_reasons(tmp_path):
    root = _speaker_folder(tmp_path)
    config = BuildConfig(
        source=f"folder:{root}",
        n_test=5,
        n_train=0,
        per_speaker_test=1,
        categories=("volume",),
        tiers=("high",),
        curves=("linear",),
        constants=1,
    )
    out = tmp_path / "ds"
    report = build(config, out, workers=1)
    skipped = {s["source_id"]: s["reason"] for s in report["skipped_sources"]}
    assert any("silent" in reason for reason in skipped.values()), skipped
    rows = load_rows(out)
    assert {r["speaker_id"] for r in rows} <= {"spk0", "spk1", "spk2", "spk3"}
    assert len(rows) == 4 * 3  # four good speakers x (up, down, constant)


def test_multichannel_and_odd_rate_sources_are_accepted(tmp_path):
    audio, sr = sf.read(arctic_path(), dtype="float32")
    root = tmp_path / "odd"
    for i, (rate, channels) in enumerate([(22050, 2), (44100, 1), (11025, 1)]):
        from vocalgrad.audio import resample

        x = resample(audio, sr, rate)
        data = np.stack([x, x * 0.8], axis=1) if channels == 2 else x
        (root / f"s{i}").mkdir(parents=True)
        sf.write(root / f"s{i}" / "a.wav", data, rate)
    config = BuildConfig(
        source=f"folder:{root}",
        n_test=3,
        n_train=0,
        per_speaker_test=1,
        categories=("voice_pitch",),
        tiers=("high",),
        curves=("jump",),
        constants=0,
    )
    report = build(config, tmp_path / "ds", workers=1)
    assert report["clips_kept"] == 6 and report["verification_agreement"]["voice_pitch"] == 1.0


@needs_alsa
def test_vctk_protocol_preset_through_the_cli(tmp_path):
    """A VCTK 0.92 layout made of real recordings; the published preset renders at 48 kHz."""
    root = tmp_path / "VCTK-Corpus-0.92"
    speakers = {"p225": "F", "p226": "M", "p227": "M", "p228": "F"}
    (root / "speaker-info.txt").parent.mkdir(parents=True)
    lines = ["ID  AGE  GENDER  ACCENTS  REGION  COMMENTS"]
    lines += [f"{spk}  23  {g}  English  Southern  England" for spk, g in speakers.items()]
    (root / "speaker-info.txt").write_text("\n".join(lines) + "\n")
    recordings = [arctic_path(), *alsa_paths()]
    for n, spk in enumerate(speakers):
        folder = root / "wav48_silence_trimmed" / spk
        folder.mkdir(parents=True)
        for k in range(2):
            audio, sr = sf.read(recordings[(2 * n + k) % len(recordings)], dtype="float32")
            audio = np.tile(
                audio, int(np.ceil(3.2 * sr / len(audio)))
            )  # >= 3 s as the protocol needs
            sf.write(folder / f"{spk}_{k + 1:03d}_mic1.flac", audio, sr)
    out = tmp_path / "ds"
    code = main(
        [
            "build",
            "--protocol",
            "vocalgrad",
            "--source",
            f"vctk:{root}",
            "--out",
            str(out),
            "--n-test",
            "4",
            "--n-train",
            "0",
            "--dimensions",
            "volume",
            "--workers",
            "1",
        ]
    )
    assert code == 0
    rows = load_rows(out)
    assert {r["sample_rate"] for r in rows} == {48000}
    assert len(rows) == 4 * 24 and not [r for r in rows if r["direction"] == "constant"]
    assert {r["gender"] for r in rows} == {"F", "M"}

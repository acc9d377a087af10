"""The official release layout end to end: eval, score, probe (train split from our build)
and report on a fixture written in exactly the published layout, from a local folder and as
`hf:` from the local datasets cache."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from test_probing_audio import FAST, MeanPoolModel, log_mel

from vocalgrad.cli import main
from vocalgrad.dataset import content_sha256, is_official, load_rows, resolve
from vocalgrad.errors import DatasetError
from vocalgrad.evaluation.evaluate import load_results
from vocalgrad.listeners.adapters import TorchModuleListener
from vocalgrad.probing import ProbeConfig, probe_dataset
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.report import write_report
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

COLUMNS = (
    "file_name", "category", "benchmark_clip_id", "attribute", "prompt", "label", "direction",
    "curve", "tier", "source_clip_id", "speaker_id", "sentence_id", "duration_sec", "onset_sec",
    "offset_sec", "split",
)  # fmt: skip


@pytest.fixture(scope="module")
def ours(tmp_path_factory, cache_dir) -> Path:
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("release") / "ours"
    config = BuildConfig(
        n_test=4,
        n_train=4,
        categories=("volume", "voice_pitch"),
        tiers=("high",),
        curves=("linear", "jump"),
        constants=0,
    )
    build(config, out, workers=2, audit=False)
    return out


@pytest.fixture(scope="module")
def release(ours, tmp_path_factory) -> Path:
    """Our test split rewritten exactly as the public release lays it out: WAV under audio/,
    metadata.csv with the published columns, up/down labels, no references, no train split."""
    root = tmp_path_factory.mktemp("release") / "vocalgrad"
    (root / "audio").mkdir(parents=True)
    rows = load_rows(ours, splits=("test",))
    with (root / "metadata.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for i, r in enumerate(rows):
            name = f"audio/{r['category']}__{i:05d}.wav"
            audio, sr = sf.read(r["path"], dtype="int16")
            sf.write(root / name, audio, sr, subtype="PCM_16")
            writer.writerow(
                {
                    "file_name": name,
                    "category": r["category"],
                    "benchmark_clip_id": f"{i:05d}",
                    "attribute": r["category"].replace("_", " "),
                    "prompt": build_prompt(r["category"]).text,
                    "label": r["direction"],
                    "direction": "up" if r["direction"] == "increase" else "down",
                    "curve": r["curve"],
                    "tier": r["tier"],
                    "source_clip_id": r["source_id"],
                    "speaker_id": r["speaker_id"],
                    "sentence_id": r.get("text_id", ""),
                    "duration_sec": r["duration_s"],
                    "onset_sec": r["speech_onset_s"],
                    "offset_sec": r["speech_offset_s"],
                    "split": "test",
                }
            )
    return root


def test_release_rows_read_into_our_schema(release, ours):
    rows = load_rows(release)
    src = {r["item_id"]: r for r in load_rows(ours, splits=("test",))}
    assert is_official(release) and not is_official(ours)
    assert len(rows) == len(src) and {r["split"] for r in rows} == {"test"}
    first = rows[0]
    assert first["item_id"] == Path(first["file_name"]).stem and Path(first["path"]).is_file()
    assert {r["direction"] for r in rows} == {"increase", "decrease"}
    assert {r["source_id"] for r in rows} == {r["source_id"] for r in src.values()}
    assert first["magnitude"] is None and first["verified"] is None
    assert content_sha256(release) == content_sha256(release) != content_sha256(ours)
    assert load_rows(release, splits=("train",)) == []


def test_eval_score_and_report_on_the_release_folder(release, tmp_path, capsys):
    run = tmp_path / "random"
    assert main(["eval", str(release), "--listener", "baseline:random", "--out", str(run)]) == 0
    manifest, results = load_results(run)
    assert manifest["dataset_layout"] == "official-release"
    assert manifest["release_prompts"]["differ_from_default"] == 0
    assert (
        manifest["release_prompts"]["items_with_prompt"] == len(results) == len(load_rows(release))
    )
    summary = json.loads((run / "summary.json").read_text())
    table = next(iter(summary["groups"].values()))["table"]
    overall = next(g for g in table if g["group"] == "overall")
    assert overall["n_clusters"] == len({r["source_clip_id"] for r in load_rows(release)})
    capsys.readouterr()
    html = tmp_path / "report.html"
    assert main(["report", str(run), "--dataset", str(release), "--out", str(html)]) == 0
    assert html.is_file() and "official release" in html.read_text()


def test_what_needs_sources_says_so_on_the_release(release, tmp_path, capsys):
    """No references: the ideal observer and the source-relative verification cannot run."""
    assert (
        main(["eval", str(release), "--listener", "baseline:ideal", "--out", str(tmp_path / "i")])
        == 2
    )
    assert "reference" in capsys.readouterr().err
    assert main(["verify", str(release)]) == 0
    out = capsys.readouterr().out
    assert "blind" in out


def test_probe_release_with_train_split_of_our_build(release, ours, tmp_path):
    torch.manual_seed(0)
    model = MeanPoolModel()
    lis = TorchModuleListener(
        model,
        stages={"frames": "frames", "pool.0@answer": "pool"},
        readout=lambda out: out,
        lens_head=model.head,
        lens_stages=["pool.0@answer"],
        preprocess=log_mel,
        name="meanpool",
    )
    config = ProbeConfig(settings=FAST, random_control=False, dsp_control=False)
    summary = probe_dataset(
        release, lis, tmp_path / "out", config, cache=tmp_path / "cache", train_from=ours
    )
    assert summary["train_dataset"] == str(ours.resolve())
    assert summary["split"].startswith("train -> test")
    assert summary["categories"]["volume"]["n_test"] == len(load_rows(release)) // 2
    html = tmp_path / "report.html"
    assert (
        main(
            ["eval", str(release), "--listener", "baseline:random", "--out", str(tmp_path / "run")]
        )
        == 0
    )
    write_report([tmp_path / "run"], html, dataset=release, probe_dirs=[tmp_path / "out"])
    text = html.read_text()
    assert f"train split of {ours.resolve()}" in text
    # direction alignment of the two categories at the answer stage, with its null
    alignment = (tmp_path / "out" / "alignment.csv").read_text().splitlines()
    assert alignment[0].startswith("stage,category_a,category_b,kind,cosine,null95")
    assert any("between categories" in line for line in alignment) and "direction alignment" in text
    alone = probe_dataset(
        release,
        lis,
        tmp_path / "cv",
        replace(config, categories=("volume",)),
        cache=tmp_path / "cache",
    )
    assert alone["train_dataset"] is None and "fold" in alone["split"].lower()


def _hub_cache(release: Path, work: Path, repo: str) -> Path:
    """A datasets cache holding `repo` as `load_dataset(repo)` leaves it after a download."""
    import datasets

    stage = work / "stage"
    shutil.copytree(release / "audio", stage / "audio")
    with (
        (release / "metadata.csv").open(newline="") as f,
        (stage / "metadata.jsonl").open("w") as out,
    ):
        for rec in csv.DictReader(f):
            out.write(json.dumps(rec) + "\n")
    builder = datasets.load_dataset_builder(
        "audiofolder", data_files={"test": [str(stage / "**")]}, cache_dir=str(work / "build")
    )
    builder.download_and_prepare()
    owner, name = repo.split("/")
    version, fingerprint = Path(builder.cache_dir).parts[-2:]
    cache = work / "hf-cache"
    target = cache / f"{owner}___{name}" / "default" / version / fingerprint
    shutil.copytree(builder.cache_dir, target)
    for arrow in target.glob("audiofolder-*.arrow"):  # a hub download names shards after the repo
        arrow.rename(target / arrow.name.replace("audiofolder-", f"{name}-"))
    return cache


@pytest.mark.slow  # four CLI processes through the offline hub cache: ~40 s
def test_hf_release_from_the_local_datasets_cache(release, tmp_path):
    cache = _hub_cache(release, tmp_path, "ynklab/vocalgrad")
    env = {
        **os.environ,
        "HF_DATASETS_CACHE": str(cache),
        "HF_HUB_OFFLINE": "1",
        "VOCALGRAD_CACHE": str(tmp_path / "vg"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "vocalgrad.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    hub_run, local_run = tmp_path / "hub", tmp_path / "local"
    for spec, run in (("hf:ynklab/vocalgrad", hub_run), (str(release), local_run)):
        done = cli("eval", spec, "--listener", "baseline:random", "--out", str(run))
        assert done.returncode == 0, done.stderr
    (_, hub), (_, local) = load_results(hub_run), load_results(local_run)
    assert {(r["item_id"], r["direction"], r["predicted"]) for r in hub} == {
        (r["item_id"], r["direction"], r["predicted"]) for r in local
    }
    written = [p for p in (tmp_path / "vg" / "datasets").iterdir()]
    assert len(written) == 1 and is_official(written[0])
    again = cli("info", "hf:ynklab/vocalgrad")  # reuses the written folder
    assert again.returncode == 0 and "official release layout" in again.stdout
    assert [p.name for p in (tmp_path / "vg" / "datasets").iterdir()] == [written[0].name]
    missing = cli(
        "eval", "hf:nobody/nothing", "--listener", "baseline:random", "--out", str(tmp_path / "x")
    )
    assert (
        missing.returncode == 2
        and "nobody/nothing" in missing.stderr
        and "Traceback" not in missing.stderr
    )


def test_hf_save_to_disk_with_embedded_bytes_is_written_out(release, tmp_path):
    """Hub parquet and save_to_disk folders carry the audio bytes, not a path."""
    import datasets

    rows = list(csv.DictReader((release / "metadata.csv").open(newline="")))
    ds = datasets.Dataset.from_dict(
        {
            "audio": [
                {
                    "bytes": (release / r["file_name"]).read_bytes(),
                    "path": Path(r["file_name"]).name,
                }
                for r in rows
            ],
            **{c: [r[c] for r in rows] for c in COLUMNS if c != "file_name"},
        }
    )
    ds.save_to_disk(str(tmp_path / "saved"))
    folder = resolve(f"hf:{tmp_path / 'saved'}", cache_dir=tmp_path / "vg")
    got = {r["item_id"]: r for r in load_rows(folder)}
    want = {r["item_id"]: r for r in load_rows(release)}
    assert got.keys() == want.keys()
    some = next(iter(want))
    assert np.array_equal(sf.read(got[some]["path"])[0], sf.read(want[some]["path"])[0])
    assert resolve(f"hf:{tmp_path / 'saved'}", cache_dir=tmp_path / "vg") == folder
    # a run killed while writing: the partial folder is completed, nothing duplicated
    partial = folder.with_name(folder.name + ".partial")
    folder.rename(partial)
    (partial / "metadata.csv").unlink()
    victim = sorted((partial / "audio").iterdir())[3]
    victim.unlink()
    assert resolve(f"hf:{tmp_path / 'saved'}", cache_dir=tmp_path / "vg") == folder
    assert not partial.exists() and victim.name in {p.name for p in (folder / "audio").iterdir()}
    assert len(list((folder / "audio").iterdir())) == len(want) and len(load_rows(folder)) == len(
        want
    )


def test_release_with_missing_columns_is_refused(tmp_path):
    (tmp_path / "metadata.csv").write_text(
        "file_name,category,label\naudio/a.wav,volume,increase\n"
    )
    with pytest.raises(DatasetError, match="source_clip_id"):
        load_rows(tmp_path)
    (tmp_path / "metadata.csv").write_text(
        "file_name,category,label,source_clip_id\naudio/a.wav,volume,louder,s1\n"
    )
    with pytest.raises(DatasetError, match=":2:"):
        load_rows(tmp_path)

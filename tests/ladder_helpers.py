"""What the ladder's rung tests share: a tiny build of one format, a copy with a leak planted,
and one trial of the listening-test app in a real browser."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad.dataset import content_sha256, load_rows
from vocalgrad.evaluation.evaluate import EvalConfig, evaluate
from vocalgrad.evaluation.score import score_run
from vocalgrad.listeners.baselines import IdealObserver
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig

CATEGORIES = ("volume", "voice_pitch")


def tiny_build(root: Path, fmt: str, categories=CATEGORIES, **settings) -> Path:
    """2 + 2 builtin sources (unless said), the high tier, no audit: what a rung's tests
    read."""
    config = BuildConfig(
        format=fmt,
        categories=categories,
        n_test=settings.pop("n_test", 2),
        n_train=settings.pop("n_train", 2),
        tiers=settings.pop("tiers", ("high",)),
        **settings,
    )
    report = build(config, root, workers=1, audit=False)
    assert report["clips_kept"] > 0, report
    return root


def ideal_accuracy(dataset: Path, out: Path, **config) -> dict[str, float]:
    """Category (and "overall") -> accuracy of `baseline:ideal` on the test split."""
    evaluate(dataset, IdealObserver(dataset), out, EvalConfig(mode="choice", **config))
    table = score_run(out)["groups"]["default/choice"]["table"]
    return {g["group"]: g["accuracy"] for g in table}


def planted(
    dataset: Path, out: Path, leak: Callable[[dict, np.ndarray, int], np.ndarray | None]
) -> Path:
    """A copy of `dataset` with `leak(row, audio, sr)` applied to every clip it returns new
    samples for (the metadata's hashes follow, as a build would write them)."""
    shutil.copytree(dataset, out)
    for split in ("test", "train"):
        meta = out / split / "metadata.jsonl"
        rows = [json.loads(line) for line in meta.read_text().splitlines()]
        for row in rows:
            path = out / split / row["file_name"]
            audio, sr = sf.read(path, dtype="float32")
            new = leak(row, audio, sr)
            if new is not None:
                sf.write(path, np.clip(new, -1, 1), sr, subtype="PCM_16")
                row.pop("audio_sha256", None)
        meta.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    build_json = out / "build.json"
    record = json.loads(build_json.read_text())
    record["content_sha256"] = content_sha256(out)
    build_json.write_text(json.dumps(record))
    for stale in ("audit.json", ".audit"):
        path = out / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    return out


def louder(audio: np.ndarray, sr: int, start_s: float, end_s: float, db: float) -> np.ndarray:
    """`audio` with `db` added between two times (seconds)."""
    out = audio.copy()
    a, b = int(start_s * sr), int(end_s * sr)
    out[a:b] *= np.float32(10 ** (db / 20))
    return out


def first_trial_in_browser(browser, dataset: Path, tmp_path: Path, capsys, category: str) -> dict:
    """One study of one annotator on `dataset` (no screening, practice or catch trials),
    served by `vocalgrad human serve`: the first test trial as the page shows it, answered
    with the button of its true label. Returns the question, the buttons' words and labels,
    the truth and the answer the server stored."""
    from e2e.human_helpers import invited_page, start_server, stop_server, write_study

    study = write_study(
        tmp_path / "study.toml",
        categories=[category],
        n_annotators=1,
        annotators_per_item=1,
        n_practice=0,
        n_catch=0,
        screening_trials=0,
        screening_pass=0,
    )
    db = tmp_path / "study.sqlite"
    proc, base = start_server(dataset, study)
    try:
        with invited_page(browser, study, base, capsys) as (page, errors):
            page.wait_for_selector("#play:not([disabled])", timeout=15_000)
            trial = page.eval_on_selector("#trial", "t => t.dataset.trial")
            with sqlite3.connect(db) as con:
                truth = con.execute("SELECT truth FROM trials WHERE id=?", (trial,)).fetchone()[0]
            shown = {
                "question": page.inner_text("#question"),
                "words": page.eval_on_selector_all(
                    "#answers button", "bs => bs.map(b => b.innerText)"
                ),
                "labels": page.eval_on_selector_all(
                    "#answers button", "bs => bs.map(b => b.dataset.answer)"
                ),
                "truth": truth,
            }
            page.click("#play")
            page.wait_for_selector("#answers button:not([disabled])", timeout=15_000)
            page.click(f"#answers button[data-answer='{truth}']")
            deadline = time.monotonic() + 10
            while True:
                with sqlite3.connect(db) as con:
                    stored = con.execute(
                        "SELECT answer FROM trials WHERE id=?", (trial,)
                    ).fetchone()[0]
                if stored is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert not errors, errors
    finally:
        stop_server(proc)
    return {**shown, "stored": stored}


def no_op(dataset: Path, row: dict, n: int) -> np.ndarray:
    """What a renderer that changes nothing would write for a row: the source its dimension
    processes (the reference; volume's with its ends' level courses matched once more, which
    it scales), `n` samples."""
    from vocalgrad.audio import SpeechSpan
    from vocalgrad.dimensions._shared import edge_matched
    from vocalgrad.signal.analysis import Analysis

    ref, sr = sf.read(dataset / row["reference_file"], dtype="float32")
    if row["category"] == "volume":
        meta = dataset / "references" / "metadata.jsonl"
        found = next(
            json.loads(line)
            for line in meta.read_text().splitlines()
            if json.loads(line)["source_id"] == row["source_id"]
        )
        span = SpeechSpan(found["speech_onset_s"], found["speech_offset_s"], True)
        ref = edge_matched(Analysis(ref, sr, span=span))
    return ref[:n]


def rows_of(dataset: Path, split: str = "test") -> list[dict]:
    return load_rows(dataset, splits=(split,))

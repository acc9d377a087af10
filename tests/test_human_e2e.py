"""A real browser end to end: Debian's Chromium driven by Playwright (no browser download).

Logs in through an invite link, sets the volume, passes the headphone check, plays clips
(the answer buttons must stay locked until a clip has played to the end), answers with mouse
and keyboard, reloads mid-study and mid-trial, finishes, and checks the exported results.
Screenshots of every page go to $VOCALGRAD_SCREENSHOTS when set.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest
from e2e.human_helpers import (
    invited_page,
    make_dataset,
    start_server,
    stop_server,
    write_study,
)

from vocalgrad.cli import main

pytestmark = pytest.mark.slow  # a real browser through a whole study (20 s)

KEY = {"increase": "i", "decrease": "ArrowDown"}


def _next(db: Path) -> tuple[str, str, str]:
    with sqlite3.connect(db) as con:
        return con.execute(
            "SELECT id, kind, truth FROM trials WHERE annotator_id='a01' AND "
            "answer IS NULL ORDER BY seq LIMIT 1"
        ).fetchone()


def _poll(page, expression: str, timeout_s: float = 15.0) -> None:
    """wait_for_function compiles strings with eval, which our CSP forbids: poll instead."""
    deadline = time.monotonic() + timeout_s
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            seen = page.evaluate(
                "[document.body.dataset.page, "
                "document.querySelector('#trial').dataset.trial, "
                "document.querySelector('#play-status').textContent, "
                "document.querySelector('#notice').textContent]"
            )
            raise TimeoutError(f"timed out waiting for {expression}; page shows {seen}")
        time.sleep(0.05)


def test_browser_study_end_to_end(browser, tmp_path, capsys):
    shots = Path(os.environ.get("VOCALGRAD_SCREENSHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    dataset = make_dataset(tmp_path / "ds", seconds=0.4)
    study = write_study(
        tmp_path / "study.toml",
        categories=["volume"],
        n_annotators=1,
        annotators_per_item=1,
        n_practice=1,
        n_catch=1,
        screening_trials=2,
        screening_pass=2,
        screening_interval_s=0.2,
    )
    db = tmp_path / "study.sqlite"
    proc, base = start_server(dataset, study)
    try:
        assert main(["human", "invite", "--study", str(study), "--public-url", base]) == 0
        link = capsys.readouterr().out.split()[1]
        with browser.new_context(viewport={"width": 1000, "height": 720}) as context:
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(link)
            assert page.url == f"{base}/study"  # token gone from the address bar
            page.wait_for_selector("#welcome:not([hidden])")
            page.screenshot(path=str(shots / "1-welcome.png"))
            page.keyboard.press("Enter")
            page.wait_for_selector("#volume:not([hidden])")
            assert page.is_disabled("#volume-done")
            page.click("#volume-play")
            page.wait_for_selector("#volume-done:not([disabled])", timeout=10_000)
            page.screenshot(path=str(shots / "2-volume.png"))
            page.click("#volume-done")

            answered, reloaded_mid_trial, shot = 0, False, set()
            while True:
                nxt = _next(db)
                if nxt is None:
                    break
                trial_id, kind, truth = nxt
                _poll(
                    page,
                    f"document.querySelector('#trial').dataset.trial === '{trial_id}' "
                    "&& document.body.dataset.page === 'trial' "
                    "&& !document.querySelector('#play').disabled",
                )
                locked = page.eval_on_selector_all(
                    "#answers button", "bs => bs.every(b => b.disabled)"
                )
                already = "Played" in page.inner_text("#play-status")
                assert locked or already, "answers unlocked before the clip was played"
                if not already:
                    page.keyboard.press(" ") if answered % 2 else page.click("#play")
                    page.wait_for_selector("#answers button:not([disabled])", timeout=10_000)
                if kind not in shot:
                    page.screenshot(path=str(shots / f"3-{kind}.png"))
                    shot.add(kind)
                if answered == 5 and not reloaded_mid_trial:  # played, not answered: reload
                    reloaded_mid_trial = True
                    page.reload()
                    continue
                if kind == "screening":
                    page.keyboard.press(truth)
                elif answered % 2:
                    page.keyboard.press(KEY[truth])
                else:
                    page.click(f"#answers button[data-answer='{truth}']")
                answered += 1
                deadline = time.monotonic() + 10  # wait until the server has stored it
                while (_next(db) or ("",))[0] == trial_id:
                    assert time.monotonic() < deadline, "answer never stored"
                    time.sleep(0.05)
                if kind == "practice":
                    page.wait_for_selector("#feedback:not([hidden])")
                    assert "Correct" in page.inner_text("#feedback-text")
                    page.screenshot(path=str(shots / "4-practice-feedback.png"))
                    page.keyboard.press("Enter")
                if answered == 7:  # reload between trials, once the answer is stored
                    _poll(
                        page,
                        "document.body.dataset.page === 'trial' && "
                        f"document.querySelector('#trial').dataset.trial !== '{trial_id}'",
                    )
                    page.reload()
            page.wait_for_selector("#done:not([hidden])")
            page.screenshot(path=str(shots / "5-done.png"))
            html = page.content()
        assert not errors, errors
        assert reloaded_mid_trial and answered == 2 + 1 + 8 + 1
    finally:
        stop_server(proc)

    with sqlite3.connect(db) as con:
        items = {r[0]: json.loads(r[1]) for r in con.execute("SELECT item_id, row_json FROM items")}
        plays = con.execute("SELECT MIN(plays), MAX(fetches) FROM trials").fetchone()
    assert plays[0] >= 1
    assert not [i for i in items if i in html]
    out = tmp_path / "export"
    assert main(["human", "export", "--study", str(study), "--out", str(out)]) == 0
    rows = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    mine = [r for r in rows if r["listener"] == "human:a01"]
    pooled = [r for r in rows if r["listener"] == "human"]
    assert len(mine) == 8 and len(pooled) == 8
    assert all(r["correct"] and r["category"] == "volume" for r in mine)
    assert all(r["rt_s"] is not None and 0 <= r["rt_s"] < 30 and r["plays"] >= 1 for r in mine)
    report = json.loads((out / "agreement.json").read_text())
    assert report["per_annotator"]["a01"]["catch"]["accuracy"] == 1.0
    assert report["pooled_accuracy"]["accuracy"] == 1.0


def _rung_dataset(root: Path, fmt: str) -> Path:
    """The tones dataset made into one rung's items: the format, and where it asks about two
    dimensions, the other one (the app words its question from the row)."""
    make_dataset(root, seconds=0.4, categories=("volume",), tiers=("high",), curves=("linear",))
    flip = {"increase": "decrease", "decrease": "increase"}
    for split in ("test", "train"):
        path = root / split / "metadata.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        for i, r in enumerate(rows):
            r["format"] = fmt
            if fmt == "gradual":
                continue
            other = r["direction"] if i % 4 < 2 else flip[r["direction"]]
            r |= {"second_category": "voice_pitch", "second_direction": other}
            r["congruent"] = other == r["direction"]
            if fmt == "sequence":
                r["half"] = "first" if r["direction"] == "increase" else "second"
        path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return root


@pytest.mark.parametrize(
    ("fmt", "variant"),
    [
        ("which", "default"),
        ("together", "default"),
        ("sequence", "swapped"),
        ("gradual", "mapped"),
    ],
)
def test_browser_serves_each_ladder_rung_in_its_own_words(browser, tmp_path, capsys, fmt, variant):
    """Each rung of the ladder above direction is served with its format's (or its reasoning
    variant's) question and answer words, and a click answers with the word's label."""
    from vocalgrad.questions.prompts import build_prompt

    dataset = _rung_dataset(tmp_path / "ds", fmt)
    study = write_study(
        tmp_path / "study.toml",
        categories=["volume"],
        variant=variant,
        n_annotators=1,
        annotators_per_item=1,
        n_practice=1,
        n_catch=1,
        screening_trials=2,
        screening_pass=2,
        screening_interval_s=0.2,
    )
    db = tmp_path / "study.sqlite"
    second = None if fmt == "gradual" else "voice_pitch"
    expected = build_prompt("volume", variant, fmt=fmt, second=second)
    proc, base = start_server(dataset, study)
    try:
        with invited_page(browser, study, base, capsys) as (page, errors):
            while True:
                trial_id, kind, truth = _next(db)
                _poll(
                    page,
                    f"document.querySelector('#trial').dataset.trial === '{trial_id}' "
                    "&& !document.querySelector('#play').disabled",
                )
                page.click("#play")
                page.wait_for_selector("#answers button:not([disabled])", timeout=10_000)
                if kind == "screening":
                    page.keyboard.press(truth)
                    deadline = time.monotonic() + 10
                    while (_next(db) or ("",))[0] == trial_id:
                        assert time.monotonic() < deadline, "answer never stored"
                        time.sleep(0.05)
                    continue
                assert page.inner_text("#question") == expected.text
                words = page.eval_on_selector_all(
                    "#answers button",
                    "bs => bs.map(b => [b.firstChild.textContent.trim(), b.dataset.answer])",
                )
                assert words == [list(pair) for pair in expected.label_of.items()]
                page.click(f"#answers button[data-answer='{truth}']")
                page.wait_for_selector("#feedback:not([hidden])")
                assert "Correct" in page.inner_text("#feedback-text")
                break
        assert not errors, errors
    finally:
        stop_server(proc)

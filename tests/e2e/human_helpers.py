"""Synthetic datasets, study files, a uvicorn server in a subprocess, and a scripted annotator.

The dataset is tiny and fast (tones, not speech): the listening-test tests exercise the app,
not the stimuli, and short clips keep the play-to-end waits short.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from vocalgrad.dataset import content_sha256

SR = 16000
ADMIN_TOKEN = "test-admin-token-0123456789-abcdefghijklmnop"
PUBLIC_URL = "https://study.example/lab"


def make_dataset(
    root: Path,
    seconds: float = 0.4,
    n_sources: int = 4,
    categories: tuple[str, ...] = ("volume", "voice_pitch"),
    tiers: tuple[str, ...] = ("low", "high"),
    curves: tuple[str, ...] = ("linear", "jump"),
    n_train: int = 2,
) -> Path:
    """A dataset folder with the real schema: every condition for every source, opaque names."""
    rng = np.random.default_rng(7)
    rows: dict[str, list[dict]] = {"test": [], "train": []}
    t = np.arange(int(seconds * SR)) / SR
    mags = {"low": 6.0, "mid": 12.0, "high": 18.0}
    for split, n in (("test", n_sources), ("train", n_train)):
        (root / split).mkdir(parents=True, exist_ok=True)
        for s in range(n):
            source = f"{split}-src{s}"
            for cat in categories:
                for tier in tiers if split == "test" else ("high",):
                    for curve in curves:
                        for direction in ("increase", "decrease"):
                            item = rng.bytes(8).hex()
                            p = (
                                t / seconds
                                if curve == "linear"
                                else (t >= seconds / 2).astype(float)
                            )
                            p = p if direction == "increase" else 1 - p
                            gain = 10 ** ((p - 0.5) * mags[tier] / 20)
                            f0 = 150 + 20 * s
                            audio = 0.1 * gain * np.sin(2 * np.pi * f0 * t)
                            name = f"{item}.flac"
                            sf.write(root / split / name, audio.astype(np.float32), SR)
                            rows[split].append(
                                {
                                    "file_name": name,
                                    "item_id": item,
                                    "category": cat,
                                    "direction": direction,
                                    "tier": tier,
                                    "curve": curve,
                                    "magnitude": mags[tier],
                                    "unit": "dB",
                                    "source_id": source,
                                    "speaker_id": f"spk{s % 2}",
                                    "split": split,
                                    "sample_rate": SR,
                                    "duration_s": seconds,
                                    "speech_onset_s": 0.0,
                                    "speech_offset_s": seconds,
                                    "verified": True,
                                }
                            )
    for split, rs in rows.items():
        text = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rs)
        (root / split / "metadata.jsonl").write_text(text)
    sha = content_sha256(root)  # as a build records it
    (root / "build.json").write_text(json.dumps({"content_sha256": sha, "seed": 0}))
    return root


def write_study(path: Path, **settings: Any) -> Path:
    """A study TOML file; values are written with json.dumps (valid TOML for these types)."""
    base = {
        "name": "e2e",
        "n_annotators": 3,
        "annotators_per_item": 2,
        "n_practice": 2,
        "n_catch": 2,
        "screening_trials": 2,
        "screening_pass": 2,
        "screening_interval_s": 0.2,
    }
    base.update(settings)
    lines = ["[study]"] + [f"{k} = {json.dumps(v)}" for k, v in base.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    dataset: Path, study: Path, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen, str]:
    """`vocalgrad human serve` in a subprocess on a free loopback port; waits for /healthz."""
    import httpx

    port = free_port()
    env = {**os.environ, "VOCALGRAD_ADMIN_TOKEN": ADMIN_TOKEN}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vocalgrad.cli",
            "human",
            "serve",
            str(dataset),
            "--study",
            str(study),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("server did not start within 30 s")


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def trial_truth(db: Path, trial_id: str) -> tuple[str, float]:
    """The stored answer and duration of a trial (tests only: read from the database)."""
    import sqlite3

    with sqlite3.connect(db) as c:
        truth, dur = c.execute(
            "SELECT truth, duration_s FROM trials WHERE id=?", (trial_id,)
        ).fetchone()
    return truth, dur


def do_trial(
    client: Any,
    db: Path,
    wait: Callable[[float], None],
    choose: Callable[[str], str] | None = None,
    submission: str | None = None,
) -> dict:
    """Fetch, play to the end, answer (the truth unless `choose` says otherwise).

    Returns the state."""
    state = client.get("/api/state").json()
    t = state["trial"]
    truth, dur = trial_truth(db, t["id"])
    assert client.get(t["audio"]).status_code == 200
    assert client.post(f"/api/trials/{t['id']}/play", json={"event": "start"}).status_code == 200
    wait(dur)
    r = client.post(f"/api/trials/{t['id']}/play", json={"event": "ended", "played_s": dur})
    assert r.status_code == 200, r.text
    answer = choose(truth) if choose else truth
    body = {"answer": answer, "rt_s": 0.5, "submission_id": submission or os.urandom(8).hex()}
    r = client.post(f"/api/trials/{t['id']}/answer", json=body)
    assert r.status_code == 200, r.text
    return {
        "state": state,
        "trial": t,
        "answer": answer,
        "truth": truth,
        "body": body,
        "response": r.json(),
    }


class Clock:
    """A settable clock for the app: play-to-end waits cost no real time in API tests."""

    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class Env:
    """Dataset + study + store + app (fake clock) for in-process API tests."""

    def __init__(self, tmp: Path, dataset: Path | None = None, **study: Any):
        from vocalgrad.cli import main

        self.tmp = tmp
        self.dataset = dataset or make_dataset(tmp / "ds")
        self.study = write_study(tmp / "study.toml", **study)
        assert main(["human", "create", str(self.dataset), "--study", str(self.study)]) == 0
        self.db = tmp / "study.sqlite"
        self.clock = Clock()
        # the fake clock makes a whole session take milliseconds: far above any person's
        # request rate, so the limit is raised here (tests of the limit set their own)
        self.app_options: dict[str, Any] = {
            "public_url": PUBLIC_URL,
            "rate_per_s": 1e4,
            "rate_burst": 1e4,
        }
        self.store, self.app = None, None
        self.restart()

    def restart(self) -> None:
        """A new store and app on the same database, as after a server restart."""
        from vocalgrad.human.app import create_app
        from vocalgrad.human.store import Store

        self.store = Store(self.db)
        self.app = create_app(
            self.store, self.dataset, ADMIN_TOKEN, clock=self.clock, **self.app_options
        )

    def client(self, token: str | None = None) -> Any:
        from fastapi.testclient import TestClient

        c = TestClient(self.app)
        if token:
            c.cookies.set("vg_session", token)
        return c

    def admin(self) -> Any:
        c = self.client()
        c.headers["Authorization"] = f"Bearer {ADMIN_TOKEN}"
        return c

    def annotator(self, name: str | None = None, ready: bool = True) -> tuple[str, Any]:
        """Invite a slot and (optionally) get it past the welcome and volume pages."""
        who, token = self.store.invite(name)
        c = self.client(token)
        if ready:
            assert c.post("/api/begin", json={}).status_code == 200
            assert c.post("/api/volume", json={}).status_code == 200
        return who, c

    def run(self, c: Any, choose: Callable[[str, str], str] | None = None) -> list[dict]:
        """Answer every remaining trial; `choose(kind_phase, truth)` picks the answer."""
        done = []
        while c.get("/api/state").json()["phase"] not in ("done", "excluded"):
            phase = c.get("/api/state").json()["phase"]
            pick = (lambda truth, p=phase: choose(p, truth)) if choose else None
            done.append(do_trial(c, self.db, self.clock.advance, pick))
        return done


@contextmanager
def invited_page(browser: Any, study: Path, base: str, capsys: Any) -> Iterator[tuple[Any, list]]:
    """A participant's page past the welcome and the volume check: `human invite` for one
    participant, the link opened in a fresh browser context. Yields the page and the list
    its JavaScript errors collect in."""
    from vocalgrad.cli import main

    assert main(["human", "invite", "--study", str(study), "--public-url", base]) == 0
    link = capsys.readouterr().out.split()[1]
    with browser.new_context(viewport={"width": 1000, "height": 720}) as context:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(link)
        page.wait_for_selector("#welcome:not([hidden])")
        page.keyboard.press("Enter")
        page.wait_for_selector("#volume:not([hidden])")
        page.click("#volume-play")
        page.wait_for_selector("#volume-done:not([disabled])", timeout=10_000)
        page.click("#volume-done")
        yield page, errors

"""20 simulated annotators answer in parallel over HTTP against a real uvicorn server.

Afterwards every trial holds exactly one answer, the one its annotator sent (duplicates sent
on purpose are recognised), and the export has one row per answered test trial.
"""

from __future__ import annotations

import sqlite3
import statistics
import threading
import time
import uuid

import httpx
import pytest
from e2e.human_helpers import ADMIN_TOKEN, make_dataset, start_server, stop_server, write_study

from vocalgrad.human.store import Store

N_ANNOTATORS = 20
FLIP = {"increase": "decrease", "decrease": "increase"}


@pytest.fixture()
def server(tmp_path):
    dataset = make_dataset(tmp_path / "ds", seconds=0.2, n_sources=8)
    study = write_study(
        tmp_path / "study.toml",
        n_annotators=N_ANNOTATORS,
        annotators_per_item=3,
        items_per_cell=4,
        n_practice=1,
        n_catch=2,
        screening_trials=0,
        screening_pass=0,
    )
    proc, base = start_server(dataset, study)
    try:
        yield base, tmp_path / "study.sqlite"
    finally:
        stop_server(proc)


class _Polite(httpx.Client):
    """A client that does what the page does on a 429: wait Retry-After, send again (the
    limiter refuses before the route does any work, so a refused request changed nothing).
    How many requests a trial takes outruns the per-annotator rate on a fast machine."""

    def request(self, *args, **kwargs):  # type: ignore[override]
        while True:
            response = super().request(*args, **kwargs)
            if response.status_code != 429:
                return response
            time.sleep(float(response.headers.get("Retry-After", "1")))


def _annotator(base: str, token: str, sent: dict, latencies: list, errors: list) -> None:
    try:
        with _Polite(base_url=base, timeout=30) as c:
            c.cookies.set("vg_session", token)
            assert c.post("/api/begin", json={}).status_code == 200
            assert c.post("/api/volume", json={}).status_code == 200
            n = 0
            while True:
                s = c.get("/api/state").json()
                if s["phase"] == "done":
                    return
                t = s["trial"]
                audio = c.get(t["audio"])
                assert audio.status_code == 200 and audio.content[:4] == b"RIFF"
                dur = (len(audio.content) - 44) / (2 * 16000)
                assert (
                    c.post(f"/api/trials/{t['id']}/play", json={"event": "start"}).status_code
                    == 200
                )
                time.sleep(dur)
                r = c.post(f"/api/trials/{t['id']}/play", json={"event": "ended", "played_s": dur})
                assert r.status_code == 200, r.text
                n += 1
                answer = "increase" if (n + len(token)) % 3 else "decrease"
                body = {"answer": answer, "rt_s": 0.3, "submission_id": str(uuid.uuid4())}
                t0 = time.perf_counter()
                r = c.post(f"/api/trials/{t['id']}/answer", json=body)
                latencies.append(time.perf_counter() - t0)
                assert r.status_code == 200 and r.json()["replayed"] is False, r.text
                sent[t["id"]] = (answer, body["submission_id"])
                # a retry of the same submission, and a double click (new submission id)
                again = c.post(f"/api/trials/{t['id']}/answer", json=body)
                assert again.status_code == 200 and again.json()["replayed"] is True
                if n % 3 == 0:
                    dbl = body | {"submission_id": str(uuid.uuid4())}
                    assert c.post(f"/api/trials/{t['id']}/answer", json=dbl).json()["replayed"]
    except BaseException as err:  # reported by the main thread
        errors.append(repr(err))


def test_parallel_annotators_lose_and_duplicate_nothing(server, capsys):
    base, db = server
    store = Store(db)
    tokens = [store.invite()[1] for _ in range(N_ANNOTATORS)]
    sent: dict = {}
    latencies: list = []
    errors: list = []
    threads = [
        threading.Thread(target=_annotator, args=(base, tok, sent, latencies, errors))
        for tok in tokens
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    wall = time.perf_counter() - t0
    assert not errors, errors[:3]

    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT id, answer, submission_id FROM trials").fetchall()
        done = con.execute("SELECT COUNT(*) FROM annotators WHERE status='done'").fetchone()[0]
    assert done == N_ANNOTATORS
    assert len(rows) == len(sent)  # every trial answered exactly once (primary key per trial)
    for trial_id, answer, submission in rows:
        assert sent[trial_id] == (answer, submission)

    r = httpx.get(f"{base}/admin/api/results", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    results = r.json()["rows"]
    per_annotator = [x for x in results if x["listener"] != "human"]
    with sqlite3.connect(db) as con:
        n_test = con.execute("SELECT COUNT(*) FROM trials WHERE kind='test'").fetchone()[0]
    assert len(per_annotator) == n_test
    assert len({(x["item_id"], x["listener"]) for x in per_annotator}) == n_test

    lat = sorted(latencies)
    p95 = lat[int(0.95 * (len(lat) - 1))]
    with capsys.disabled():
        print(
            f"\n[human concurrency] {N_ANNOTATORS} annotators, {len(sent)} answers in "
            f"{wall:.2f} s = {len(sent) / wall:.1f} answers/s end to end (each trial waits "
            f"for its 0.2 s clip); answer POST latency median "
            f"{statistics.median(lat) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms; server "
            f"capacity estimate {N_ANNOTATORS / statistics.mean(lat):.0f} answers/s "
            f"(20 / mean latency)"
        )

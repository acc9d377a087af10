"""API tests for every route of the listening-test app, including the failure paths."""

from __future__ import annotations

import io
import json
import sqlite3

import numpy as np
import pytest
import soundfile as sf
from e2e.human_helpers import ADMIN_TOKEN, PUBLIC_URL, Env, do_trial, make_dataset, trial_truth

from vocalgrad.human.app import MAX_GAIN_DB, create_app
from vocalgrad.human.store import Store, hash_token
from vocalgrad.human.study import StudyConfig, StudyError
from vocalgrad.questions.prompts import question_text


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("human-ds"))


@pytest.fixture()
def env(tmp_path, dataset) -> Env:
    return Env(tmp_path, dataset)


def _current(c) -> dict:
    return c.get("/api/state").json()["trial"]


def _skip_screening(env: Env, c) -> None:
    while c.get("/api/state").json()["phase"] == "screening":
        do_trial(c, env.db, env.clock.advance)


def _db(env: Env, sql: str, *args) -> list[tuple]:
    with sqlite3.connect(env.db) as con:
        return con.execute(sql, args).fetchall()


def test_login_link_sets_cookie_and_bad_links_fail(env):
    who, token = env.store.invite()
    c = env.client()
    r = c.get(f"/s/{token}", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/study"
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert c.get("/api/state").json()["phase"] == "welcome"
    for bad in ("x" * 43, token[:-1] + ("A" if token[-1] != "A" else "B"), "short", "../../etc"):
        assert env.client().get(f"/s/{bad}", follow_redirects=False).status_code == 404
    # only the hash is stored
    stored = _db(env, "SELECT token_hash FROM annotators WHERE id=?", who)[0][0]
    assert stored == hash_token(token) and token not in env.db.read_bytes().decode("latin-1")


def test_reinvite_invalidates_old_token(env):
    who, old = env.store.invite()
    _, new = env.store.invite(who)
    assert env.client(old).get("/api/state").status_code == 401
    assert env.client(new).get("/api/state").status_code == 200
    with pytest.raises(StudyError):
        env.store.invite("nobody")


def test_annotator_routes_need_a_session(env):
    c = env.client()
    assert c.get("/api/state").status_code == 401
    assert c.post("/api/begin", json={}).status_code == 401
    assert c.get("/api/calibration").status_code == 401
    c.headers["Authorization"] = "Bearer " + "A" * 43
    assert c.get("/api/state").status_code == 401
    assert c.get("/study").status_code == 200  # the page itself is public and generic


def test_flow_pages_and_calibration(env):
    _, c = env.annotator(ready=False)
    assert c.get("/api/state").json()["phase"] == "welcome"
    assert c.post("/api/volume", json={}).status_code == 409  # start first
    assert c.post("/api/begin", json={}).json()["phase"] == "volume"
    r = c.get("/api/calibration")
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav"
    assert c.post("/api/volume", json={}).json()["phase"] == "screening"
    assert c.get("/").status_code == 200 and c.get("/healthz").json() == {"ok": True}


def test_posts_must_be_json(env):
    _, c = env.annotator(ready=False)
    r = c.post("/api/begin", content=b"{}", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = c.post("/api/begin", data={"a": "b"})
    assert r.status_code == 415


def test_audio_needs_volume_and_own_current_trial(env):
    _, a = env.annotator(ready=False)
    a.post("/api/begin", json={})
    _, b = env.annotator()
    t_b = _current(b)
    assert a.get(t_b["audio"]).status_code == 409  # a has not set the volume yet
    a.post("/api/volume", json={})
    t_a = _current(a)
    assert a.get(t_b["audio"]).status_code == 404  # someone else's audio
    r = a.get(t_a["audio"])
    assert r.status_code == 200 and r.content[:4] == b"RIFF"
    # a later trial of one's own is not served before its turn
    later = _db(
        env,
        "SELECT audio_key FROM trials WHERE annotator_id=(SELECT annotator_id FROM "
        "trials WHERE id=?) ORDER BY seq DESC LIMIT 1",
        t_a["id"],
    )[0][0]
    assert a.get(f"/api/audio/{later}").status_code == 404


@pytest.mark.parametrize(
    "path",
    [
        "/api/audio/..%2F..%2F..%2Fetc%2Fpasswd",
        "/api/audio/../../etc/passwd",
        "/api/audio/%2e%2e%2fstudy.sqlite",
        "/api/audio/" + "A" * 31 + "/",
        "/api/audio/" + "." * 32,
        "/static/../store.py",
        "/static/%2e%2e/store.py",
        "/static/..%2Fstore.py",
    ],
)
def test_path_traversal_is_rejected(env, path):
    _, c = env.annotator()
    r = c.get(path)
    assert r.status_code in (404, 422)
    assert b"sqlite" not in r.content and b"def " not in r.content


def test_dataset_files_outside_root_are_not_served(env):
    _, c = env.annotator()
    _skip_screening(env, c)
    t = _current(c)
    item = _db(env, "SELECT item_id FROM trials WHERE id=?", t["id"])[0][0]
    with sqlite3.connect(env.db) as con:  # a tampered database pointing outside the dataset
        con.execute("UPDATE items SET file_name='../../study.toml' WHERE item_id=?", (item,))
    assert c.get(t["audio"]).status_code == 404


def test_trials_of_others_are_invisible(env):
    _, a = env.annotator()
    _, b = env.annotator()
    t_b = _current(b)
    assert a.post(f"/api/trials/{t_b['id']}/play", json={"event": "start"}).status_code == 404
    body = {"answer": "1", "rt_s": 1.0, "submission_id": "abcdefgh"}
    assert a.post(f"/api/trials/{t_b['id']}/answer", json=body).status_code == 404
    assert a.post("/api/trials/" + "Z" * 24 + "/answer", json=body).status_code == 404
    assert a.post("/api/trials/short/answer", json=body).status_code == 422


def test_play_to_end_is_enforced(env):
    _, c = env.annotator()
    t = _current(c)
    _, dur = trial_truth(env.db, t["id"])
    body = {"answer": "1", "rt_s": 1.0, "submission_id": "sub-00001"}
    play = f"/api/trials/{t['id']}/play"
    assert c.post(play, json={"event": "start"}).status_code == 409  # audio never fetched
    assert c.post(f"/api/trials/{t['id']}/answer", json=body).status_code == 409
    c.get(t["audio"])
    assert c.post(play, json={"event": "ended", "played_s": dur}).status_code == 409  # no start
    c.post(play, json={"event": "start"})
    env.clock.advance(dur / 3)
    r = c.post(play, json={"event": "ended", "played_s": dur})  # claims a full play too early
    assert r.status_code == 409 and "play" in r.json()["detail"]
    c.post(play, json={"event": "start"})
    env.clock.advance(dur)
    assert c.post(play, json={"event": "ended", "played_s": dur / 2}).status_code == 409
    assert c.post(f"/api/trials/{t['id']}/answer", json=body).status_code == 409
    c.post(play, json={"event": "start"})
    env.clock.advance(dur)
    r = c.post(play, json={"event": "ended", "played_s": dur})
    assert r.json() == {"plays": 1, "answerable": True}
    assert c.get("/api/state").json()["trial"]["answerable"] is True
    c.post(play, json={"event": "start"})  # a replay is counted
    env.clock.advance(dur)
    assert c.post(play, json={"event": "ended", "played_s": dur}).json()["plays"] == 2
    env.clock.advance(0.7)
    truth, _ = trial_truth(env.db, t["id"])
    assert c.post(f"/api/trials/{t['id']}/answer", json=body | {"answer": truth}).status_code == 200
    plays, rejects, server_rt = _db(
        env, "SELECT plays, play_rejects, server_rt_s FROM trials WHERE id=?", t["id"]
    )[0]
    assert (plays, rejects) == (2, 3) and server_rt == pytest.approx(0.7)
    assert c.post(play, json={"event": "start"}).status_code == 409  # answered: no more plays


@pytest.mark.parametrize(
    "body,code",
    [
        ({"answer": "up", "rt_s": 1.0, "submission_id": "abcdefgh"}, 409),
        ({"answer": "", "rt_s": 1.0, "submission_id": "abcdefgh"}, 422),
        ({"answer": "x" * 17, "rt_s": 1.0, "submission_id": "abcdefgh"}, 422),
        ({"answer": "increase", "rt_s": -1.0, "submission_id": "abcdefgh"}, 422),
        ({"answer": "increase", "rt_s": "1", "submission_id": "abcdefgh"}, 422),
        ({"answer": "increase", "rt_s": 1e9, "submission_id": "abcdefgh"}, 422),
        ({"answer": "increase", "rt_s": 1.0, "submission_id": "bad id!"}, 422),
        ({"answer": "increase", "rt_s": 1.0}, 422),
        ({"answer": "increase", "rt_s": 1.0, "submission_id": "abcdefgh", "correct": True}, 422),
        (["increase"], 422),
    ],
)
def test_answer_payload_validation(env, body, code):
    _, c = env.annotator()
    _skip_screening(env, c)
    t = _current(c)
    _, dur = trial_truth(env.db, t["id"])
    c.get(t["audio"])
    c.post(f"/api/trials/{t['id']}/play", json={"event": "start"})
    env.clock.advance(dur)
    c.post(f"/api/trials/{t['id']}/play", json={"event": "ended", "played_s": dur})
    assert c.post(f"/api/trials/{t['id']}/answer", json=body).status_code == code
    assert _db(env, "SELECT answer FROM trials WHERE id=?", t["id"])[0][0] is None


def test_play_payload_validation_and_size_limit(env):
    _, c = env.annotator()
    t = _current(c)
    url = f"/api/trials/{t['id']}/play"
    assert c.post(url, json={"event": "paused"}).status_code == 422
    assert c.post(url, json={"event": "ended", "played_s": -1}).status_code == 422
    assert c.post(url, json={"event": "ended", "played_s": 1e6}).status_code == 422
    big = json.dumps({"event": "start", "pad": "x" * 10_000})
    r = c.post(url, content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413

    def chunks():  # no Content-Length: the streamed body is counted
        for _ in range(20):
            yield b" " * 1000

    r = c.post(url, content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_submissions_are_idempotent(env):
    _, c = env.annotator()
    out = do_trial(c, env.db, env.clock.advance, submission="same-submission")
    t, body = out["trial"], out["body"]
    again = c.post(f"/api/trials/{t['id']}/answer", json=body)
    assert again.status_code == 200 and again.json()["replayed"] is True
    other = {"1": "2", "2": "3", "3": "1"}[body["answer"]]
    assert c.post(f"/api/trials/{t['id']}/answer", json=body | {"answer": other}).status_code == 409
    rows = _db(env, "SELECT answer, submission_id FROM trials WHERE id=?", t["id"])
    assert rows == [(body["answer"], "same-submission")]


def test_answers_in_order_only(env):
    who, c = env.annotator()
    later = _db(env, "SELECT id FROM trials WHERE annotator_id=? ORDER BY seq DESC LIMIT 1", who)[
        0
    ][0]
    body = {"answer": "increase", "rt_s": 1.0, "submission_id": "abcdefgh"}
    assert c.post(f"/api/trials/{later}/answer", json=body).status_code == 409


def test_resume_after_reload_and_restart(env):
    who, token = env.store.invite()
    c = env.client(token)
    c.post("/api/begin", json={})
    c.post("/api/volume", json={})
    do_trial(c, env.db, env.clock.advance)
    t = _current(c)
    c.get(t["audio"])
    c.post(f"/api/trials/{t['id']}/play", json={"event": "start"})
    _, dur = trial_truth(env.db, t["id"])
    env.clock.advance(dur)
    c.post(f"/api/trials/{t['id']}/play", json={"event": "ended", "played_s": dur})
    env.restart()  # server restart; then a fresh browser with the same cookie
    c2 = env.client(token)
    s = c2.get("/api/state").json()
    assert s["trial"]["id"] == t["id"] and s["trial"]["plays"] == 1 and s["trial"]["answerable"]
    assert s["step"] == {"index": 2, "of": 2}
    body = {"answer": trial_truth(env.db, t["id"])[0], "rt_s": 1.0, "submission_id": "resume-1"}
    assert c2.post(f"/api/trials/{t['id']}/answer", json=body).status_code == 200
    assert c2.get("/api/state").json()["phase"] == "practice"


def test_practice_gives_feedback_test_does_not(env):
    _, c = env.annotator()
    outs = env.run(c)
    kinds = [o["state"]["phase"] for o in outs]
    assert kinds[:2] == ["screening", "screening"] and kinds[2:4] == ["practice", "practice"]
    for o in outs:
        fb = o["response"]["feedback"]
        if o["state"]["phase"] == "practice":
            assert fb == {"correct": True, "answer": o["truth"]}
        else:
            assert fb is None
    assert c.get("/api/state").json() == {"phase": "done", "trial": None, "step": None}


def test_screening_failure_excludes_with_reason(env):
    who, c = env.annotator()
    wrong = {"1": "2", "2": "3", "3": "1"}
    do_trial(c, env.db, env.clock.advance, choose=lambda truth: wrong[truth])
    do_trial(c, env.db, env.clock.advance)
    s = c.get("/api/state").json()
    assert s == {"phase": "excluded", "trial": None, "step": None}
    p = {r["annotator"]: r for r in env.store.progress()}[who]
    assert p["status"] == "excluded" and "headphone screening failed: 1/2" in p["reason"]
    t = _db(env, "SELECT id FROM trials WHERE annotator_id=? AND answer IS NULL LIMIT 1", who)[0][0]
    body = {"answer": "increase", "rt_s": 1.0, "submission_id": "abcdefgh"}
    assert c.post(f"/api/trials/{t}/answer", json=body).status_code == 403


def test_low_catch_accuracy_is_flagged(env):
    who, c = env.annotator()
    flip = {"increase": "decrease", "decrease": "increase"}

    def choose(phase, truth):
        return truth if phase == "screening" else flip[truth]

    env.run(c, choose)
    p = {r["annotator"]: r for r in env.store.progress()}[who]
    assert p["status"] == "done" and p["flagged"] and p["catch_accuracy"] == 0.0
    assert "catch accuracy 0/2" in p["flag_reason"]


def test_nothing_reveals_the_label(env):
    who, c = env.annotator()
    items = env.store.items()
    secrets_ = set()
    for item_id, row in items.items():
        secrets_ |= {item_id, row["file_name"], row["source_id"]}
    bodies = [c.get("/study").text, c.get("/static/app.js").text]
    forbidden_keys = {
        "item_id",
        "kind",
        "tier",
        "curve",
        "direction",
        "category",
        "truth",
        "catch",
        "magnitude",
        "source_id",
        "file_name",
        "seq",
    }
    while True:
        r = c.get("/api/state")
        bodies.append(r.text)
        s = r.json()
        if s["phase"] == "done":
            break
        t = s["trial"]
        assert set(t) == {"id", "audio", "question", "options", "labels", "plays", "answerable"}
        assert not forbidden_keys & set(s)
        if s["phase"] == "test":
            cat = items[_db(env, "SELECT item_id FROM trials WHERE id=?", t["id"])[0][0]][
                "category"
            ]
            assert t["question"] == question_text(cat, "default")
            assert t["options"] == t["labels"] == ["increase", "decrease"]
        audio = c.get(t["audio"]).content
        info = sf.info(io.BytesIO(audio))
        assert info.format == "WAV" and b"LIST" not in audio[:200]
        assert [audio[12:16], audio[36:40]] == [b"fmt ", b"data"]  # no other chunks
        out = do_trial(c, env.db, env.clock.advance)
        bodies.append(json.dumps(out["response"]))
    text = "\n".join(bodies)
    leaks = [s for s in secrets_ if s in text]
    assert not leaks
    r = c.get("/api/state")
    assert r.headers["cache-control"] == "no-store"
    assert "default-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"


def test_admin_routes_need_the_admin_token(env):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN_TOKEN}):
        c = env.client()
        assert c.get("/admin/api/progress", headers=headers).status_code == 401
        assert c.post("/admin/api/invite", json={}, headers=headers).status_code == 401
        assert c.get("/admin/api/results", headers=headers).status_code == 401
    # an annotator session is not an admin session
    _, token = env.store.invite()
    c = env.client(token)
    c.headers["Authorization"] = f"Bearer {token}"
    assert c.get("/admin/api/progress").status_code == 401
    admin = env.admin()
    p = admin.get("/admin/api/progress").json()
    assert [a["annotator"] for a in p["annotators"]] == ["a01", "a02", "a03"]
    link = admin.post("/admin/api/invite", json={}).json()
    assert link["annotator"] == "a02" and "/s/" in link["link"]
    token = link["link"].rsplit("/", 1)[1]
    assert env.client(token).get("/api/state").status_code == 200
    assert admin.post("/admin/api/invite", json={"annotator": "../a01"}).status_code == 422
    assert admin.post("/admin/api/invite", json={"annotator": "zz"}).status_code == 400
    rep = admin.post("/admin/api/invite", json={"replace": "a01"}).json()
    assert rep["annotator"] == "a01r1"
    assert admin.get("/admin/api/results").json() == {"rows": []}


def test_replacement_slot_gets_same_items(env):
    new = env.store.replace("a02")
    q = "SELECT item_id FROM trials WHERE annotator_id=? AND kind='test' ORDER BY item_id"
    assert _db(env, q, new) == _db(env, q, "a02")


def test_no_default_secret_in_production(env):
    with pytest.raises(StudyError, match="VOCALGRAD_ADMIN_TOKEN"):
        create_app(Store(env.db), env.dataset, admin_token=None)
    with pytest.raises(StudyError, match="at least 32"):
        create_app(Store(env.db), env.dataset, admin_token="short-secret")
    dev = create_app(Store(env.db), env.dataset, admin_token=None, production=False)
    assert len(dev.state.admin_token) >= 32


def test_wrong_dataset_is_refused(tmp_path):
    env = Env(tmp_path)
    meta = env.dataset / "test" / "metadata.jsonl"
    rows = [json.loads(line) for line in meta.read_text().splitlines()]
    rows[0]["direction"] = "decrease" if rows[0]["direction"] == "increase" else "increase"
    meta.write_text("".join(json.dumps(r) + "\n" for r in rows))  # one label edited
    with pytest.raises(StudyError, match="not the dataset"):
        create_app(Store(env.db), env.dataset, ADMIN_TOKEN)


@pytest.mark.parametrize("field", ["rt_s", "played_s"])
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999"])
def test_non_finite_numbers_are_422_not_500(env, field, number):
    """Python's JSON parser accepts these; the error response must not try to echo them."""
    _, c = env.annotator()
    _skip_screening(env, c)
    t = _current(c)
    if field == "rt_s":
        url = f"/api/trials/{t['id']}/answer"
        body = f'{{"answer": "increase", "rt_s": {number}, "submission_id": "abcdefgh"}}'
    else:
        url = f"/api/trials/{t['id']}/play"
        body = f'{{"event": "ended", "played_s": {number}}}'
    r = c.post(url, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", field]
    assert _db(env, "SELECT answer, plays, play_rejects FROM trials WHERE id=?", t["id"]) == [
        (None, 0, 0)
    ]


def _served_test_audio(env: Env, c, item: str | None = None) -> tuple[str, bytes]:
    """The current clip trial's item and served bytes; with `item`, that trial is made to play
    `item` (so two annotators can be compared on the same clip)."""
    _skip_screening(env, c)
    t = _current(c)
    if item is not None:
        with sqlite3.connect(env.db) as con:
            con.execute("UPDATE trials SET item_id=? WHERE id=?", (item, t["id"]))
    item = _db(env, "SELECT item_id FROM trials WHERE id=?", t["id"])[0][0]
    r = c.get(t["audio"])
    assert r.status_code == 200
    return item, r.content


def test_served_audio_differs_per_annotator_but_not_to_the_ear(env):
    """Exact-hash lookup in a copy of the dataset fails; level and course are kept."""
    _, a = env.annotator()
    _, b = env.annotator()
    item, wav_a = _served_test_audio(env, a)
    _, wav_b = _served_test_audio(env, b, item)
    split, name = _db(env, "SELECT split, file_name FROM items WHERE item_id=?", item)[0]
    stored, sr = sf.read(env.dataset / split / name, dtype="int16")
    plain = io.BytesIO()
    sf.write(plain, stored, sr, format="WAV", subtype="PCM_16")  # the stored clip, re-encoded
    assert len({wav_a, wav_b, plain.getvalue()}) == 3
    for wav in (wav_a, wav_b):
        served, served_sr = sf.read(io.BytesIO(wav), dtype="int16")
        assert served_sr == sr and served.shape == stored.shape
        x, y = stored.astype(float), served.astype(float)
        level_db = 10 * np.log10(np.mean(y**2) / np.mean(x**2))
        assert abs(level_db) < 0.5 and abs(level_db) <= MAX_GAIN_DB + 0.05
        assert np.corrcoef(x, y)[0, 1] > 0.999
        assert np.max(np.abs(y - x * np.sqrt(np.mean(y**2) / np.mean(x**2)))) <= 3  # gain + dither
    # the same annotator and clip: the same bytes, also after a server restart (resume)
    assert a.get(_current(a)["audio"]).content == wav_a
    env.restart()
    assert a.get(_current(a)["audio"]).content == wav_a


def test_screening_audio_is_perturbed_too(env):
    _, a = env.annotator()
    _, b = env.annotator()
    t_a, t_b = _current(a), _current(b)
    seed = _db(env, "SELECT seed FROM trials WHERE id=?", t_a["id"])[0][0]
    with sqlite3.connect(env.db) as con:  # same screening stimulus for both
        con.execute("UPDATE trials SET seed=? WHERE id=?", (seed, t_b["id"]))
    wav_a, wav_b = a.get(t_a["audio"]).content, b.get(t_b["audio"]).content
    assert wav_a != wav_b
    x, y = (sf.read(io.BytesIO(w))[0] for w in (wav_a, wav_b))
    assert np.corrcoef(x.ravel(), y.ravel())[0, 1] > 0.999


def test_runaway_token_is_rate_limited_and_others_are_not(env):
    # a slow refill (one token per 100 s) keeps the test independent of machine load
    env.app_options |= {"rate_per_s": 0.01, "rate_burst": 5.0}
    env.restart()
    _, runaway = env.annotator(ready=False)
    _, calm = env.annotator(ready=False)
    codes = [runaway.get("/api/state").status_code for _ in range(30)]
    assert codes[:5] == [200] * 5 and codes[5:] == [429] * 25
    r = runaway.get("/api/state")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1
    assert runaway.post("/api/begin", json={}).status_code == 429
    assert runaway.get("/api/audio/" + "A" * 32).status_code == 429  # audio is limited too
    assert [calm.get("/api/state").status_code for _ in range(4)] == [200] * 4
    assert calm.post("/api/begin", json={}).status_code == 200
    assert env.store.annotator("a01")["began_at"] is None  # the limited request did nothing


def test_invite_links_use_the_configured_base_url(env):
    admin = env.admin()
    for headers in (
        {"Host": "evil.example"},
        {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "http"},
    ):
        link = admin.post("/admin/api/invite", json={}, headers=headers).json()["link"]
        assert link.startswith(PUBLIC_URL + "/s/") and "evil" not in link
    env.app_options["public_url"] = None
    env.restart()
    r = env.admin().post("/admin/api/invite", json={}, headers={"Host": "evil.example"})
    assert r.status_code == 409 and "--public-url" in r.json()["detail"]
    for bad in ("evil.example", "ftp://x", "https://x/?next=y", "https://"):
        env.app_options["public_url"] = bad
        with pytest.raises(StudyError, match="base URL"):
            env.restart()


def test_links_expire_when_configured(tmp_path, dataset):
    env = Env(tmp_path, dataset, link_expiry_days=2)
    who, token = env.store.invite(None, env.clock())
    c = env.client(token)
    assert c.get("/api/state").status_code == 200
    assert env.client().get(f"/s/{token}", follow_redirects=False).status_code == 303
    env.clock.advance(2 * 86400 + 1)
    r = c.get("/api/state")
    assert r.status_code == 410 and "expired" in r.json()["detail"]
    r = env.client().get(f"/s/{token}", follow_redirects=False)
    assert r.status_code == 410 and "expired" in r.text and "set-cookie" not in r.headers
    _, fresh = env.store.invite(who, env.clock())  # a new link for the same slot works again
    assert env.client(fresh).get("/api/state").status_code == 200
    with pytest.raises(StudyError, match="link_expiry_days"):
        StudyConfig(link_expiry_days=-1)

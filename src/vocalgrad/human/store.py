"""SQLite store of one study: items, annotators (hashed tokens) and trials with answers.

WAL mode lets the web server, `invite`, `progress` and `export` share the file while people
answer; every write is one short `BEGIN IMMEDIATE` transaction, so a restart loses nothing
and a repeated submission can be recognised (idempotent answers). Truth (`truth`) lives only
here and never leaves through the annotator API.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import soundfile as sf

from vocalgrad.human import screening
from vocalgrad.human.assign import Plan
from vocalgrad.human.study import StudyConfig, StudyError
from vocalgrad.records import LABELS

SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE items(item_id TEXT PRIMARY KEY, split TEXT NOT NULL, file_name TEXT NOT NULL,
  duration_s REAL NOT NULL, row_json TEXT NOT NULL);
CREATE TABLE annotators(id TEXT PRIMARY KEY, token_hash TEXT UNIQUE, invited_at REAL,
  began_at REAL, volume_at REAL, status TEXT NOT NULL DEFAULT 'new', reason TEXT,
  flagged INTEGER NOT NULL DEFAULT 0, flag_reason TEXT, finished_at REAL, replaces TEXT);
CREATE TABLE trials(id TEXT PRIMARY KEY, annotator_id TEXT NOT NULL REFERENCES annotators(id),
  seq INTEGER NOT NULL, kind TEXT NOT NULL, item_id TEXT REFERENCES items(item_id),
  seed INTEGER, truth TEXT NOT NULL, duration_s REAL NOT NULL, audio_key TEXT UNIQUE NOT NULL,
  fetched_at REAL, fetches INTEGER NOT NULL DEFAULT 0, play_started_at REAL,
  plays INTEGER NOT NULL DEFAULT 0, play_rejects INTEGER NOT NULL DEFAULT 0,
  last_ended_at REAL, answer TEXT, rt_s REAL, server_rt_s REAL, answered_at REAL,
  submission_id TEXT, UNIQUE(annotator_id, seq));
CREATE INDEX trials_next ON trials(annotator_id, answer, seq);
"""
SCHEMA_VERSION = "1"
DIRECTION_ANSWERS = LABELS
SCREENING_ANSWERS = ("1", "2", "3")
PLAY_TOLERANCE_S = 0.1  # reported play may fall this short of the clip (decoder rounding)


class NotFound(StudyError):
    """No such trial / audio for this annotator (also used for other people's ids)."""


class Conflict(StudyError):
    """The request is well formed but not allowed now (not played, answered differently...)."""


class Forbidden(StudyError):
    """The annotator may not do this any more (excluded, finished)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """256 random bits, URL-safe: unguessable, and only its hash is stored."""
    return secrets.token_urlsafe(32)


def min_listen_s(duration: float) -> float:
    """Server wall time that must pass between play start and end (allows network jitter)."""
    return max(0.0, 0.85 * duration - 0.05)


@dataclass(frozen=True)
class AnswerResult:
    replayed: bool
    correct: bool
    truth: str
    kind: str


class Store:
    """Thread-safe access: one SQLite connection per thread, short write transactions."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise StudyError(f"{self.path}: study database not found; run `vocalgrad human create`")
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            c.row_factory = sqlite3.Row
            c.execute("PRAGMA busy_timeout=30000")
            c.execute("PRAGMA foreign_keys=ON")
            c.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = c
        return c

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        c = self.conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            yield c
        except BaseException:
            c.execute("ROLLBACK")
            raise
        c.execute("COMMIT")

    # -- study-level -----------------------------------------------------------------------
    def meta(self) -> dict[str, Any]:
        return {r["key"]: json.loads(r["value"]) for r in self.conn().execute("SELECT * FROM meta")}

    def config(self) -> StudyConfig:
        return StudyConfig.from_dict(self.meta()["config"])

    def audio_secret(self) -> bytes:
        """The key of the per-annotator audio perturbation: made once, kept here, never served."""
        with self.tx() as c:
            c.execute(
                "INSERT OR IGNORE INTO meta VALUES('audio_secret', ?)",
                (json.dumps(secrets.token_hex(32)),),
            )
            value = c.execute("SELECT value FROM meta WHERE key='audio_secret'").fetchone()[0]
        return bytes.fromhex(json.loads(value))

    def items(self) -> dict[str, dict]:
        return {
            r["item_id"]: json.loads(r["row_json"])
            for r in self.conn().execute("SELECT item_id, row_json FROM items")
        }

    def item_file(self, item_id: str) -> tuple[str, str]:
        r = (
            self.conn()
            .execute("SELECT split, file_name FROM items WHERE item_id=?", (item_id,))
            .fetchone()
        )
        if r is None:
            raise NotFound("unknown item")
        return r["split"], r["file_name"]

    # -- tokens ----------------------------------------------------------------------------
    def annotator_by_token(self, token: str) -> dict | None:
        r = (
            self.conn()
            .execute("SELECT * FROM annotators WHERE token_hash=?", (hash_token(token),))
            .fetchone()
        )
        return dict(r) if r else None

    def invite(self, annotator: str | None = None, now: float | None = None) -> tuple[str, str]:
        """A fresh token for `annotator` (or the next uninvited slot); old tokens stop working."""
        token = new_token()
        with self.tx() as c:
            if annotator is None:
                r = c.execute(
                    "SELECT id FROM annotators WHERE token_hash IS NULL AND status='new' "
                    "ORDER BY id LIMIT 1"
                ).fetchone()
                if r is None:
                    raise StudyError(
                        "every annotator slot has an invite; re-issue one with "
                        "--annotator ID or add a slot with --replace ID"
                    )
                annotator = r["id"]
            elif c.execute("SELECT 1 FROM annotators WHERE id=?", (annotator,)).fetchone() is None:
                raise StudyError(f"no annotator {annotator!r} in this study")
            c.execute(
                "UPDATE annotators SET token_hash=?, invited_at=? WHERE id=?",
                (hash_token(token), now or time.time(), annotator),
            )
        return annotator, token

    def replace(self, annotator: str) -> str:
        """A new slot with `annotator`'s test items (fresh order, screening, catch, practice)."""
        from vocalgrad.human.assign import plan_annotator

        config = self.config()
        c = self.conn()
        if c.execute("SELECT 1 FROM annotators WHERE id=?", (annotator,)).fetchone() is None:
            raise StudyError(f"no annotator {annotator!r} in this study")
        items = [
            r["item_id"]
            for r in c.execute(
                "SELECT item_id FROM trials WHERE annotator_id=? AND kind='test' ORDER BY item_id",
                (annotator,),
            )
        ]
        taken = {r["id"] for r in c.execute("SELECT id FROM annotators")}
        new_id = next(f"{annotator}r{i}" for i in range(1, 1000) if f"{annotator}r{i}" not in taken)
        rows = list(self.items().values())
        pool_ids = set(self.meta()["pool"])
        cats = list(self.meta()["categories"])
        slots = plan_annotator(new_id, items, rows, pool_ids, config, cats)
        with self.tx() as c:
            c.execute("INSERT INTO annotators(id, replaces) VALUES(?, ?)", (new_id, annotator))
            _insert_trials(c, new_id, slots, config, self._durations(c))
        return new_id

    @staticmethod
    def _durations(c: sqlite3.Connection) -> dict[str, float]:
        return {
            r["item_id"]: r["duration_s"]
            for r in c.execute("SELECT item_id, duration_s FROM items")
        }

    # -- annotator flow --------------------------------------------------------------------
    def annotator(self, annotator: str) -> dict:
        r = self.conn().execute("SELECT * FROM annotators WHERE id=?", (annotator,)).fetchone()
        if r is None:
            raise NotFound("unknown annotator")
        return dict(r)

    def next_trial(self, annotator: str) -> dict | None:
        r = (
            self.conn()
            .execute(
                "SELECT * FROM trials WHERE annotator_id=? AND answer IS NULL ORDER BY seq LIMIT 1",
                (annotator,),
            )
            .fetchone()
        )
        return dict(r) if r else None

    def counts(self, annotator: str) -> dict[str, tuple[int, int]]:
        """kind -> (answered, total) for one annotator."""
        out = {}
        for r in self.conn().execute(
            "SELECT kind, COUNT(answer) AS done, COUNT(*) AS total FROM trials "
            "WHERE annotator_id=? GROUP BY kind",
            (annotator,),
        ):
            out[r["kind"]] = (r["done"], r["total"])
        return out

    def begin(self, annotator: str, now: float) -> None:
        with self.tx() as c:
            c.execute(
                "UPDATE annotators SET began_at=COALESCE(began_at, ?), "
                "status=CASE status WHEN 'new' THEN 'active' ELSE status END WHERE id=?",
                (now, annotator),
            )

    def set_volume(self, annotator: str, now: float) -> None:
        with self.tx() as c:
            r = c.execute("SELECT began_at FROM annotators WHERE id=?", (annotator,)).fetchone()
            if r is None or r["began_at"] is None:
                raise Conflict("read the instructions and press Start first")
            c.execute(
                "UPDATE annotators SET volume_at=COALESCE(volume_at, ?) WHERE id=?",
                (now, annotator),
            )

    def trial_for_audio(self, annotator: str, key: str, now: float) -> dict:
        """The annotator's current trial behind an audio key; counts the fetch."""
        with self.tx() as c:
            r = c.execute(
                "SELECT * FROM trials WHERE audio_key=? AND annotator_id=?", (key, annotator)
            ).fetchone()
            current = c.execute(
                "SELECT id FROM trials WHERE annotator_id=? AND answer IS NULL "
                "ORDER BY seq LIMIT 1",
                (annotator,),
            ).fetchone()
            if r is None or current is None or current["id"] != r["id"]:
                raise NotFound("no such audio")
            c.execute(
                "UPDATE trials SET fetched_at=COALESCE(fetched_at, ?), fetches=fetches+1 "
                "WHERE id=?",
                (now, r["id"]),
            )
        return dict(r)

    def _own_open_trial(self, c: sqlite3.Connection, annotator: str, trial_id: str) -> sqlite3.Row:
        r = c.execute(
            "SELECT * FROM trials WHERE id=? AND annotator_id=?", (trial_id, annotator)
        ).fetchone()
        if r is None:
            raise NotFound("no such trial")
        a = c.execute("SELECT status FROM annotators WHERE id=?", (annotator,)).fetchone()
        if a["status"] == "excluded":
            raise Forbidden("this session has ended")
        return r

    def record_play(
        self, annotator: str, trial_id: str, event: str, played_s: float, now: float
    ) -> dict:
        """Count a full play only if the audio was served and the clip's length has elapsed."""
        reject: str | None = None
        with self.tx() as c:
            r = self._own_open_trial(c, annotator, trial_id)
            if r["answer"] is not None:
                raise Conflict("this trial is already answered")
            if r["fetched_at"] is None:
                raise Conflict("the audio of this trial was never loaded")
            if event == "start":
                c.execute("UPDATE trials SET play_started_at=? WHERE id=?", (now, trial_id))
            else:
                dur = r["duration_s"]
                if r["play_started_at"] is None:
                    reject = "playback end without a start"
                elif played_s < dur - PLAY_TOLERANCE_S:
                    reject = f"played {played_s:.2f} s of a {dur:.2f} s clip"
                elif now - r["play_started_at"] < min_listen_s(dur):
                    reject = "playback ended sooner than the clip lasts"
                if reject:
                    c.execute(
                        "UPDATE trials SET play_rejects=play_rejects+1 WHERE id=?", (trial_id,)
                    )
                else:
                    c.execute(
                        "UPDATE trials SET plays=plays+1, last_ended_at=?, play_started_at=NULL "
                        "WHERE id=?",
                        (now, trial_id),
                    )
            plays = c.execute("SELECT plays FROM trials WHERE id=?", (trial_id,)).fetchone()[
                "plays"
            ]
        if reject:
            raise Conflict(f"play not counted: {reject}; play the clip to the end")
        return {"plays": plays, "answerable": plays > 0}

    def answer(
        self,
        annotator: str,
        trial_id: str,
        answer: str,
        rt_s: float,
        submission_id: str,
        now: float,
    ) -> AnswerResult:
        """Store an answer once; the same answer again is a no-op, a different one a conflict."""
        with self.tx() as c:
            r = self._own_open_trial(c, annotator, trial_id)
            if r["answer"] is not None:
                if r["answer"] != answer:
                    raise Conflict("this trial was already answered differently")
                return AnswerResult(True, r["answer"] == r["truth"], r["truth"], r["kind"])
            nxt = c.execute(
                "SELECT id FROM trials WHERE annotator_id=? AND answer IS NULL "
                "ORDER BY seq LIMIT 1",
                (annotator,),
            ).fetchone()
            if nxt is None or nxt["id"] != trial_id:
                raise Conflict("answer the trials in order")
            allowed = SCREENING_ANSWERS if r["kind"] == "screening" else DIRECTION_ANSWERS
            if answer not in allowed:
                raise Conflict(f"allowed answers here: {', '.join(allowed)}")
            if r["plays"] < 1:
                raise Conflict("play the clip to the end before answering")
            server_rt = now - r["last_ended_at"] if r["last_ended_at"] else None
            c.execute(
                "UPDATE trials SET answer=?, rt_s=?, server_rt_s=?, answered_at=?, "
                "submission_id=? WHERE id=?",
                (answer, rt_s, server_rt, now, submission_id, trial_id),
            )
            if r["kind"] == "screening":
                self._check_screening(c, annotator, now)
            if (
                c.execute(
                    "SELECT 1 FROM trials WHERE annotator_id=? AND answer IS NULL", (annotator,)
                ).fetchone()
                is None
            ):
                self._finish(c, annotator, now)
        return AnswerResult(False, answer == r["truth"], r["truth"], r["kind"])

    def _check_screening(self, c: sqlite3.Connection, annotator: str, now: float) -> None:
        r = c.execute(
            "SELECT COUNT(*) AS n, COUNT(answer) AS done, SUM(answer=truth) AS ok "
            "FROM trials WHERE annotator_id=? AND kind='screening'",
            (annotator,),
        ).fetchone()
        if r["done"] < r["n"]:
            return
        need = self.config().screening_pass
        if (r["ok"] or 0) < need:
            c.execute(
                "UPDATE annotators SET status='excluded', finished_at=?, reason=? WHERE id=?",
                (
                    now,
                    f"headphone screening failed: {r['ok'] or 0}/{r['n']} correct, {need} needed",
                    annotator,
                ),
            )

    def _finish(self, c: sqlite3.Connection, annotator: str, now: float) -> None:
        r = c.execute(
            "SELECT COUNT(*) AS n, SUM(answer=truth) AS ok FROM trials "
            "WHERE annotator_id=? AND kind='catch'",
            (annotator,),
        ).fetchone()
        threshold = self.config().catch_threshold
        flagged, why = 0, None
        if r["n"] and (r["ok"] or 0) / r["n"] < threshold:
            flagged = 1
            why = f"catch accuracy {(r['ok'] or 0)}/{r['n']} below {threshold:.0%}"
        c.execute(
            "UPDATE annotators SET status=CASE status WHEN 'excluded' THEN status ELSE 'done' "
            "END, finished_at=?, flagged=?, flag_reason=? WHERE id=?",
            (now, flagged, why, annotator),
        )

    # -- admin -----------------------------------------------------------------------------
    def progress(self) -> list[dict]:
        """Per annotator: status, reasons, answered/total per kind, catch accuracy."""
        out = []
        for a in self.conn().execute("SELECT * FROM annotators ORDER BY id"):
            counts = self.counts(a["id"])
            catch = (
                self.conn()
                .execute(
                    "SELECT COUNT(answer) AS n, SUM(answer=truth) AS ok FROM trials "
                    "WHERE annotator_id=? AND kind='catch'",
                    (a["id"],),
                )
                .fetchone()
            )
            out.append(
                {
                    "annotator": a["id"],
                    "status": a["status"],
                    "invited": a["token_hash"] is not None,
                    "reason": a["reason"],
                    "flagged": bool(a["flagged"]),
                    "flag_reason": a["flag_reason"],
                    "replaces": a["replaces"],
                    "answered": sum(d for d, _ in counts.values()),
                    "total": sum(t for _, t in counts.values()),
                    "by_kind": {k: {"answered": d, "total": t} for k, (d, t) in counts.items()},
                    "catch_accuracy": (catch["ok"] or 0) / catch["n"] if catch["n"] else None,
                }
            )
        return out

    def answered_trials(self) -> list[dict]:
        rows = self.conn().execute(
            "SELECT t.*, a.status AS annotator_status, a.flagged AS annotator_flagged "
            "FROM trials t JOIN annotators a ON a.id=t.annotator_id "
            "WHERE t.answer IS NOT NULL ORDER BY t.annotator_id, t.seq"
        )
        return [dict(r) for r in rows]


def _insert_trials(
    c: sqlite3.Connection,
    annotator: str,
    slots: Sequence,
    config: StudyConfig,
    durations: Mapping[str, float],
) -> None:
    items = {r["item_id"]: json.loads(r["row_json"]) for r in c.execute("SELECT * FROM items")}
    for seq, slot in enumerate(slots):
        if slot.kind == "screening":
            truth = str(screening.huggins_target(slot.seed))
            dur = screening.duration_s(config.screening_interval_s)
        else:
            truth, dur = items[slot.item_id]["direction"], durations[slot.item_id]
        c.execute(
            "INSERT INTO trials(id, annotator_id, seq, kind, item_id, seed, truth, duration_s, "
            "audio_key) VALUES(?,?,?,?,?,?,?,?,?)",
            (
                secrets.token_urlsafe(18),
                annotator,
                seq,
                slot.kind,
                slot.item_id,
                slot.seed,
                truth,
                dur,
                secrets.token_urlsafe(24),
            ),
        )


def create_study(
    db: str | Path,
    config: StudyConfig,
    plan: Plan,
    rows: Sequence[Mapping],
    dataset: Path,
    dataset_hash: str,
    warnings: Sequence[str] = (),
) -> Store:
    """Write a new study database; refuses to overwrite one (answers would be lost).

    `warnings` (e.g. that the dataset is a public build) are kept and exported with results.
    """
    db = Path(db)
    if db.exists():
        raise StudyError(f"{db} already exists; a study is created once (delete it to start over)")
    seen: dict[str, Mapping] = {}
    for r in rows:  # one id, two clips: an annotator's answer would be filed under the wrong one
        first = seen.setdefault(str(r["item_id"]), r)
        if first is not r:
            raise StudyError(
                f"{dataset}: item_id {r['item_id']} names two clips ({first.get('split')}/"
                f"{first.get('file_name')} and {r.get('split')}/{r.get('file_name')}); "
                "each clip needs its own id: rebuild the dataset or fix its metadata"
            )
    db.parent.mkdir(parents=True, exist_ok=True)
    needed = set(plan_item_ids(plan))
    c = sqlite3.connect(db, isolation_level=None)
    try:
        c.execute("PRAGMA journal_mode=WAL")
        c.executescript(SCHEMA)
        c.execute("BEGIN")
        meta = {
            "schema": SCHEMA_VERSION,
            "config": config.to_dict(),
            "dataset": str(dataset.resolve()),
            "dataset_sha256": dataset_hash,
            "created_at": time.time(),
            "pool": [i for ids in plan.pool.values() for i in ids],
            "categories": list(plan.pool),
            "notes": plan.notes,
            "warnings": list(warnings),
        }
        c.executemany(
            "INSERT INTO meta VALUES(?, ?)", [(k, json.dumps(v)) for k, v in meta.items()]
        )
        for r in rows:
            row = {k: v for k, v in r.items() if k != "path"}
            dur = _duration(r) if str(r["item_id"]) in needed else float(r.get("duration_s") or 0.0)
            c.execute(
                "INSERT INTO items VALUES(?,?,?,?,?)",
                (str(r["item_id"]), r["split"], r["file_name"], dur, json.dumps(row)),
            )
        c.row_factory = sqlite3.Row
        durations = Store._durations(c)
        for annotator, slots in plan.trials.items():
            c.execute("INSERT INTO annotators(id) VALUES(?)", (annotator,))
            _insert_trials(c, annotator, slots, config, durations)
        c.execute("COMMIT")
    except BaseException:
        c.close()
        db.unlink(missing_ok=True)
        raise
    c.close()
    return Store(db)


def _duration(row: Mapping) -> float:
    """A planned clip's duration in seconds, read from its file: a clip that is missing or
    unreadable stops the study's creation with one line naming it."""
    try:
        return float(sf.info(row["path"]).duration)
    except (OSError, RuntimeError) as err:  # soundfile's LibsndfileError is a RuntimeError
        raise StudyError(
            f"{row['path']}: the clip of item {row['item_id']} cannot be read "
            f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); restore it "
            "or rebuild the dataset"
        ) from None


def plan_item_ids(plan: Plan) -> list[str]:
    return sorted({s.item_id for slots in plan.trials.values() for s in slots if s.item_id})

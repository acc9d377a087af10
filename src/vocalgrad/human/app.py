"""The listening-test web app: annotator API, audio, static page, and token-guarded admin API.

What the browser may learn is decided here: a trial is an opaque id, an opaque audio URL,
the question text models get and the answer options; never the item id, file name, tier,
curve, direction or whether it is a catch trial. The server, not the page, decides when an
answer may be given (audio served, play reported to the end, clip length elapsed).

Served audio is never the stored file's bytes: each (annotator, clip) gets its own small gain
and dither from a server-side secret, so looking a clip up by hash in a rebuilt or downloaded
copy of the dataset fails. Tokens are rate limited, never logged, and links are built from the
configured base URL (not the request's Host header) and may expire.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import logging
import math
import re
import secrets
import threading
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import soundfile as sf
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field

from vocalgrad.dataset import content_sha256
from vocalgrad.formats import row_format
from vocalgrad.human import screening
from vocalgrad.human.store import Conflict, Forbidden, NotFound, Store, hash_token
from vocalgrad.human.study import RATE_BURST, RATE_PER_S, StudyError, base_url
from vocalgrad.questions.prompts import build_prompt, second_of
from vocalgrad.signal.kinds import row_kind

COOKIE = "vg_session"
MAX_BODY = 4096  # bytes; every legitimate request body is well under 200
TOKEN_RE = re.compile(r"[A-Za-z0-9_-]{32,64}")
STATIC = Path(__file__).parent / "static"
SCREENING_QUESTION = (
    "Which of the three noises contains a faint tone?\n\n"
    "Listen with headphones; over loudspeakers the tone cannot be heard."
)
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; media-src 'self' blob:; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'none'"
)
TrialId = Annotated[str, PathParam(pattern=r"^[A-Za-z0-9_-]{24}$")]
AudioKey = Annotated[str, PathParam(pattern=r"^[A-Za-z0-9_-]{32}$")]
MAX_GAIN_DB = 0.4  # per-annotator gain: well under the ~1 dB just-noticeable level difference


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Empty(_Strict):
    pass


class PlayEvent(_Strict):
    event: Literal["start", "ended"]
    played_s: float = Field(default=0.0, ge=0.0, le=600.0)


class AnswerIn(_Strict):
    answer: str = Field(min_length=1, max_length=16)
    rt_s: float = Field(ge=0.0, le=3600.0)
    submission_id: str = Field(pattern=r"^[A-Za-z0-9-]{8,64}$")


class InviteIn(_Strict):
    annotator: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,32}$")
    replace: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,32}$")


class BodyLimit:
    """ASGI middleware: 413 for bodies over `limit` bytes, declared or streamed."""

    def __init__(self, app: Any, limit: int = MAX_BODY):
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await JSONResponse({"detail": "request body too large"}, 413)(scope, receive, send)
            return
        seen = 0

        async def limited() -> dict:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, "request body too large")
            return message

        await self.app(scope, limited, send)


class TokenBuckets:
    """In-process token bucket per key (annotator or admin): past its rate a client gets 429s
    before the route does any work (audio decoding, queries). Keys are annotator ids, so memory
    is bounded by the study; a flood of bad tokens is for a proxy in front to stop."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        if rate <= 0 or burst < 1:
            raise StudyError("the rate limit needs rate > 0 per second and a burst >= 1")
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        """0.0 if a request of `key` may go ahead now, else the seconds until one may."""
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.get(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate
            self._buckets[key] = (tokens - 1.0 if tokens >= 1.0 else tokens, now)
        return wait


def _throttle(request: Request, key: str) -> None:
    wait = request.app.state.limiter.take(key)
    if wait > 0:
        raise HTTPException(
            429, "too many requests; slow down", headers={"Retry-After": str(math.ceil(wait))}
        )


class RedactTokens(logging.Filter):
    """Blanks token-shaped strings in every record that passes, at every level: access lines
    carry `/s/<token>` and query strings, trace lines carry the cookie and Authorization."""

    PATTERN = re.compile(r"(?i)(bearer\s+)\S+|(vg_session=)[^;'\"\s]+|[A-Za-z0-9_-]{32,}")

    @classmethod
    def redact(cls, text: str) -> str:
        return cls.PATTERN.sub(lambda m: (m.group(1) or m.group(2) or "") + "[redacted]", text)

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):  # uvicorn's access formatter unpacks the args
            record.msg = self.redact(str(record.msg))
            record.args = tuple(
                a if isinstance(a, (int, float)) else self.redact(str(a)) for a in record.args
            )
        else:
            record.msg, record.args = self.redact(record.getMessage()), None
        return True


def log_config() -> dict:
    """uvicorn's logging config with `RedactTokens` on every handler (records of child loggers
    reach handlers, not their parents' filters, so the handlers are where it must sit)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["redact_tokens"] = {"()": RedactTokens}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("redact_tokens")
    return config


def _bearer(request: Request) -> str | None:
    value = request.headers.get("authorization", "")
    return value[7:].strip() if value.lower().startswith("bearer ") else None


def _expired(request: Request, annotator: dict) -> bool:
    lifetime = request.app.state.link_lifetime_s
    invited = annotator["invited_at"]
    return bool(lifetime) and invited is not None and request.app.state.clock() > invited + lifetime


def current_annotator(request: Request) -> dict:
    """The annotator behind the session cookie (or a Bearer token), within its request rate and
    link lifetime; POSTs must be JSON."""
    store: Store = request.app.state.store
    token = request.cookies.get(COOKIE) or _bearer(request)
    found = store.annotator_by_token(token) if token and TOKEN_RE.fullmatch(token) else None
    if found is None:
        raise HTTPException(401, "open the link you were sent to start or resume")
    if _expired(request, found):
        raise HTTPException(410, "this link has expired; ask the study team for a new one")
    _throttle(request, f"annotator:{found['id']}")
    content_type = request.headers.get("content-type", "").split(";")[0].strip()
    if request.method == "POST" and content_type != "application/json":
        raise HTTPException(415, "send JSON")  # no cross-site form posts
    return found


def require_admin(request: Request) -> None:
    given = _bearer(request) or ""
    if not hmac.compare_digest(hash_token(given), request.app.state.admin_hash):
        raise HTTPException(401, "admin token required (Authorization: Bearer ...)")
    _throttle(request, "admin")


Annotator = Annotated[dict, Depends(current_annotator)]


def create_app(
    store: Store,
    dataset: str | Path,
    admin_token: str | None = None,
    production: bool = True,
    cookie_secure: bool = False,
    clock: Callable[[], float] = time.time,
    public_url: str | None = None,
    rate_per_s: float = RATE_PER_S,
    rate_burst: float = RATE_BURST,
) -> FastAPI:
    """Build the app. Production needs an admin token of >= 32 characters: no default secret.

    `public_url` is the base of invite links made by the admin API (without it that route
    refuses: the request's Host header is the client's to choose); `rate_per_s` and
    `rate_burst` size each token's bucket.
    """
    if admin_token is None and not production:
        admin_token = secrets.token_urlsafe(32)
    if not admin_token or len(admin_token) < 32:
        raise StudyError(
            "set VOCALGRAD_ADMIN_TOKEN to a random string of at least 32 characters "
            "(python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            "or use --dev for a local try-out with a generated token"
        )
    admin_hash = hash_token(admin_token)
    root = Path(dataset).resolve()
    meta = store.meta()
    if content_sha256(root) != meta["dataset_sha256"]:
        raise StudyError(
            f"{root} is not the dataset this study was created from "
            f"(content hash differs from {meta['dataset_sha256'][:12]}...)"
        )
    config = store.config()
    items = store.items()
    audio_secret = store.audio_secret()
    links = base_url(public_url) if public_url else None

    app = FastAPI(
        title="vocalgrad listening test",
        docs_url=None,
        redoc_url=None,
        openapi_url=None if production else "/openapi.json",
    )
    app.state.admin_token = admin_token
    app.state.admin_hash = admin_hash
    app.state.store = store
    app.state.clock = clock
    app.state.link_lifetime_s = config.link_expiry_days * 86400.0
    app.state.limiter = TokenBuckets(rate_per_s, rate_burst)
    app.add_middleware(BodyLimit)

    @app.middleware("http")
    async def headers(request: Request, call_next: Callable) -> Response:
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        if not request.url.path.startswith("/static/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    @app.exception_handler(StudyError)
    async def study_error(request: Request, err: StudyError) -> JSONResponse:
        code = {NotFound: 404, Conflict: 409, Forbidden: 403}.get(type(err), 400)
        return JSONResponse({"detail": str(err)}, code)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        """422 without echoing the input: a non-finite number (1e999, NaN) is no valid JSON."""
        detail = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in err.errors()]
        return JSONResponse({"detail": detail}, 422)

    def trial_view(t: dict) -> dict:
        if t["kind"] == "screening":
            question, opts = SCREENING_QUESTION, ["1", "2", "3"]
            labels = opts
        else:
            item = items[t["item_id"]]
            prompt = build_prompt(
                item["category"],
                config.variant,
                fmt=row_format(item),
                kind=row_kind(item),
                second=second_of(item),
            )
            question, opts, labels = (
                prompt.text,
                list(prompt.options),
                list(prompt.label_of.values()),
            )
        # the buttons show the format's words ("loud", "higher") and answer with their labels
        return {
            "id": t["id"],
            "audio": f"/api/audio/{t['audio_key']}",
            "question": question,
            "options": opts,
            "labels": labels,
            "plays": t["plays"],
            "answerable": t["plays"] > 0,
        }

    def state(a: dict) -> dict:
        a = store.annotator(a["id"])
        phase, trial, step = "done", None, None
        if a["status"] == "excluded":
            phase = "excluded"
        elif a["began_at"] is None:
            phase = "welcome"
        elif a["volume_at"] is None:
            phase = "volume"
        else:
            t = store.next_trial(a["id"])
            if t is not None:
                phase = {"catch": "test"}.get(t["kind"], t["kind"])
                trial = trial_view(t)
                counts = store.counts(a["id"])
                kinds = ("test", "catch") if phase == "test" else (phase,)
                done = sum(counts.get(k, (0, 0))[0] for k in kinds)
                step = {"index": done + 1, "of": sum(counts.get(k, (0, 0))[1] for k in kinds)}
        return {"phase": phase, "trial": trial, "step": step}

    @app.get("/", response_class=HTMLResponse)
    def home() -> str:
        return "<!doctype html><title>Listening test</title><p>Open the link you were sent.</p>"

    @app.get("/healthz")
    def healthz() -> dict:
        return {"ok": True}

    @app.get("/s/{token}")
    def login(request: Request, token: str) -> Response:
        found = store.annotator_by_token(token) if TOKEN_RE.fullmatch(token) else None
        if found is None:
            return HTMLResponse(
                "<!doctype html><title>Invalid link</title>"
                "<p>This link is not valid. Ask for a new one.</p>",
                404,
            )
        if _expired(request, found):
            return HTMLResponse(
                "<!doctype html><title>Expired link</title>"
                "<p>This link has expired. Ask for a new one.</p>",
                410,
            )
        response = RedirectResponse("/study", 303)
        response.set_cookie(
            COOKIE,
            token,
            max_age=60 * 60 * 24 * 30,
            httponly=True,
            samesite="strict",
            secure=cookie_secure,
            path="/",
        )
        return response

    @app.get("/study")
    def page() -> FileResponse:
        return FileResponse(STATIC / "study.html", media_type="text/html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/api/state")
    def get_state(a: Annotator) -> dict:
        return state(a)

    @app.post("/api/begin")
    def begin(a: Annotator, body: Empty) -> dict:
        store.begin(a["id"], clock())
        return state(a)

    @app.get("/api/calibration")
    def calibration(a: Annotator) -> Response:
        return Response(_calibration_wav(), media_type="audio/wav")

    @app.post("/api/volume")
    def volume(a: Annotator, body: Empty) -> dict:
        store.set_volume(a["id"], clock())
        return state(a)

    @app.get("/api/audio/{key}")
    def audio(a: Annotator, key: AudioKey) -> Response:
        if store.annotator(a["id"])["volume_at"] is None:
            raise HTTPException(409, "set the volume first")
        t = store.trial_for_audio(a["id"], key, clock())
        if t["kind"] == "screening":
            samples, sr = _screening_samples(t["seed"], config.screening_interval_s)
            clip = f"screening:{t['seed']}"
        else:
            split, name = store.item_file(t["item_id"])
            path = (root / split / name).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                raise HTTPException(404, "no such audio")
            (samples, sr), clip = _clip_samples(str(path)), f"item:{t['item_id']}"
        key = hmac.new(audio_secret, f"{a['id']}\n{clip}".encode(), hashlib.sha256).digest()
        return Response(perturbed_wav(samples, sr, key), media_type="audio/wav")

    @app.post("/api/trials/{trial_id}/play")
    def play(a: Annotator, trial_id: TrialId, body: PlayEvent) -> dict:
        return store.record_play(a["id"], trial_id, body.event, body.played_s, clock())

    @app.post("/api/trials/{trial_id}/answer")
    def answer(a: Annotator, trial_id: TrialId, body: AnswerIn) -> dict:
        result = store.answer(
            a["id"], trial_id, body.answer, body.rt_s, body.submission_id, clock()
        )
        feedback = None
        if result.kind == "practice":
            feedback = {"correct": result.correct, "answer": result.truth}
        return {"ok": True, "replayed": result.replayed, "feedback": feedback}

    @app.get("/admin/api/progress", dependencies=[Depends(require_admin)])
    def progress() -> dict:
        return {"study": config.name, "annotators": store.progress()}

    @app.post("/admin/api/invite", dependencies=[Depends(require_admin)])
    def invite(body: InviteIn) -> dict:
        if links is None:
            raise HTTPException(
                409,
                "serve with --public-url https://your-host to make links here "
                "(or use `vocalgrad human invite --public-url ...`)",
            )
        target = store.replace(body.replace) if body.replace else body.annotator
        who, token = store.invite(target, clock())
        return {"annotator": who, "link": f"{links}/s/{token}"}

    @app.get("/admin/api/results", dependencies=[Depends(require_admin)])
    def results() -> dict:
        from vocalgrad.human.export import result_rows

        return {"rows": result_rows(store)}

    return app


@lru_cache(maxsize=1)
def _calibration_wav() -> bytes:
    return screening.wav_bytes(screening.calibration_sound(), screening.SAMPLE_RATE)


@lru_cache(maxsize=64)
def _screening_samples(seed: int, interval_s: float) -> tuple[np.ndarray, int]:
    audio, _ = screening.huggins_trial(seed, interval_s)
    samples = audio.astype(np.float64) * 32767.0
    samples.setflags(write=False)
    return samples, screening.SAMPLE_RATE


@lru_cache(maxsize=256)
def _clip_samples(path: str) -> tuple[np.ndarray, int]:
    """The stored clip as 16-bit sample values (decoded: no tag or chunk of the file survives)."""
    samples, sr = sf.read(path, dtype="int16", always_2d=False)
    samples.setflags(write=False)
    return samples, sr


def perturbed_wav(samples: np.ndarray, sr: int, key: bytes) -> bytes:
    """16-bit WAV of `samples` (in 16-bit steps) under a gain and a dither drawn from `key`.

    One constant gain within +-MAX_GAIN_DB over the whole clip (the clip's course, hence its
    label, is untouched; the level change is below what people notice) and triangular dither
    of +-1 step per sample and channel: the bytes differ per annotator, so an exact-hash lookup
    in a copy of the dataset fails. Deterministic per key: a replay or resume gets the same bytes.
    """
    rng = np.random.default_rng(int.from_bytes(key, "big"))
    gain = 10.0 ** (rng.uniform(-MAX_GAIN_DB, MAX_GAIN_DB) / 20.0)
    dither = rng.random(samples.shape) - rng.random(samples.shape)
    out = np.clip(np.rint(samples * gain + dither), -32768, 32767).astype(np.int16)
    return screening.wav_bytes(out, sr)

"""OpenAIListener against a real local HTTP server that speaks chat completions.

The server validates every request body (model, message structure, base64 WAV at 16 kHz
mono 16-bit), answers from the audio itself ("increase" when the second half of the last clip
is louder), reports usage and logprobs, and fails on request: 429 with Retry-After, 500s,
responses slower than the client's timeout, malformed JSON. Loopback only, bounded waits.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import math
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf

from vocalgrad.errors import ConfigError, VocalgradError
from vocalgrad.listeners.base import Request
from vocalgrad.listeners.openai_api import (
    APIError,
    OpenAIListener,
    _retry_after,
    option_logprobs,
)
from vocalgrad.questions.prompts import build_prompt

MODEL = "test-audio-model"
REPORTED = "test-audio-model-2024-10-01"
SR = 16000
AUDIO_TOKENS = 100  # per clip, reported by the fake server
TEXT_TOKENS = 20  # per request


def _reply(
    handler: BaseHTTPRequestHandler,
    status: int,
    payload: Any,
    headers: dict[str, str] | None = None,
) -> None:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(raw)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
        pass


class Invalid(Exception):
    """A request body that breaks the protocol: answered with HTTP 400."""


class FakeServer:
    """State and behaviour of the fake endpoint; `script` lists faults for the next calls."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.script: list[str] = []
        self.retry_after = "2"
        self.delay = 0.0
        self.slow_s = 1.0
        self.require_key: str | None = None
        self.logprobs_supported = True
        self.calls = 0
        self.inflight = 0
        self.max_inflight = 0
        self.bodies: list[dict] = []
        self.auth: list[str | None] = []
        self.silent_calls = 0
        self.url = ""

    # -- protocol checks ---------------------------------------------------------------
    @staticmethod
    def decode_wav(part: dict) -> np.ndarray:
        if part.get("input_audio", {}).get("format") != "wav":
            raise Invalid("input_audio.format must be wav")
        raw = base64.b64decode(part["input_audio"]["data"], validate=True)
        with sf.SoundFile(io.BytesIO(raw)) as f:
            if (f.samplerate, f.channels, f.subtype, f.format) != (SR, 1, "PCM_16", "WAV"):
                raise Invalid(f"bad wav: {f.samplerate} Hz, {f.channels} ch, {f.subtype}")
            return f.read(dtype="float32")

    def validate(self, body: dict) -> list[np.ndarray]:
        """Check the body; return the clips of the last user turn (in order)."""
        if body.get("model") != MODEL:
            raise Invalid(f"unknown model {body.get('model')!r}")
        if body.get("temperature") != 0 or not isinstance(body.get("max_tokens"), int):
            raise Invalid("expected temperature 0 and an integer max_tokens")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or messages[-1].get("role") != "user":
            raise Invalid("messages must be a non-empty list ending with a user turn")
        clips: list[np.ndarray] = []
        for message in messages:
            role, content = message.get("role"), message.get("content")
            if role == "assistant":
                if not isinstance(content, str):
                    raise Invalid("assistant content must be a string")
                continue
            if role != "user" or not isinstance(content, list) or not content:
                raise Invalid(f"bad message {role!r}")
            clips = []
            for part in content:
                if part.get("type") == "text":
                    if not isinstance(part.get("text"), str):
                        raise Invalid("text part without text")
                elif part.get("type") == "input_audio":
                    clips.append(self.decode_wav(part))
                else:
                    raise Invalid(f"unknown part type {part.get('type')!r}")
        return clips

    # -- answering ---------------------------------------------------------------------
    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length", 0))
        raw = handler.rfile.read(length)
        if handler.path != "/v1/chat/completions":
            return _reply(handler, 404, {"error": {"message": "not found"}})
        with self.lock:
            self.calls += 1
            self.inflight += 1
            self.max_inflight = max(self.max_inflight, self.inflight)
            fault = self.script.pop(0) if self.script else None
            self.auth.append(handler.headers.get("Authorization"))
        try:
            self.respond(handler, raw, fault)
        finally:
            with self.lock:
                self.inflight -= 1

    def respond(self, handler: BaseHTTPRequestHandler, raw: bytes, fault: str | None) -> None:
        if (
            self.require_key
            and handler.headers.get("Authorization") != f"Bearer {self.require_key}"
        ):
            return _reply(handler, 401, {"error": {"message": "Incorrect API key provided"}})
        if fault == "429":
            return _reply(
                handler,
                429,
                {"error": {"message": "rate limited"}},
                {"Retry-After": self.retry_after},
            )
        if fault == "500":
            return _reply(handler, 500, {"error": {"message": "internal"}})
        if fault == "malformed":
            return _reply(handler, 200, b'{"choices": [ {"message": ')
        if fault == "slow":
            time.sleep(self.slow_s)
        try:
            body = json.loads(raw)
            clips = self.validate(body)
        except (Invalid, ValueError, KeyError, TypeError, RuntimeError) as err:
            return _reply(handler, 400, {"error": {"message": f"invalid request: {err}"}})
        with self.lock:
            self.bodies.append(body)
        if self.delay:
            time.sleep(self.delay)
        if clips and float(np.max(np.abs(clips[-1]))) == 0.0:
            with self.lock:
                self.silent_calls += 1
            return _reply(handler, 500, {"error": {"message": "cannot process silence"}})
        if clips:
            x = clips[-1]
            half = len(x) // 2
            louder = np.sqrt(np.mean(x[half:] ** 2)) > np.sqrt(np.mean(x[:half] ** 2))
            answer = "increase" if louder else "decrease"
        else:
            answer = "no audio"
        n_audio = sum(
            1
            for m in body["messages"]
            if isinstance(m["content"], list)
            for p in m["content"]
            if p["type"] == "input_audio"
        )
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": answer},
            "finish_reason": "stop",
        }
        if body.get("logprobs") and self.logprobs_supported:
            other = "decrease" if answer == "increase" else "increase"
            top = [
                {"token": answer, "logprob": -0.05},
                {"token": " " + answer.capitalize()[:4], "logprob": -3.0},
                {"token": other, "logprob": -4.0},
                {"token": '"', "logprob": -6.0},
            ][: int(body.get("top_logprobs", 0))]
            choice["logprobs"] = {
                "content": [{"token": answer, "logprob": -0.05, "top_logprobs": top}]
            }
        usage = {
            "prompt_tokens": TEXT_TOKENS + AUDIO_TOKENS * n_audio,
            "completion_tokens": 1,
            "total_tokens": TEXT_TOKENS + AUDIO_TOKENS * n_audio + 1,
            "prompt_tokens_details": {"audio_tokens": AUDIO_TOKENS * n_audio},
        }
        _reply(
            handler,
            200,
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "model": REPORTED,
                "choices": [choice],
                "usage": usage,
            },
        )


@pytest.fixture
def server() -> Iterator[FakeServer]:
    state = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            state.handle(self)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.handle_error = lambda *a: None  # type: ignore[method-assign]
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def clip(direction: str, seed: int = 0, seconds: float = 0.5) -> np.ndarray:
    """Noise whose amplitude ramps up or down (or stays at zero for "silent")."""
    n = int(seconds * SR)
    if direction == "silent":
        return np.zeros(n, np.float32)
    noise = np.random.default_rng(seed).standard_normal(n).astype(np.float32) * 0.2
    ramp = np.linspace(0.1, 1.0, n, dtype=np.float32)
    return noise * (ramp if direction == "increase" else ramp[::-1])


def request(item_id: str, direction: str, variant: str = "default", **kw: Any) -> Request:
    prompt = build_prompt("volume", variant, item_id=item_id, **kw)
    return Request(item_id, prompt, {item_id: clip(direction, seed=len(item_id))})


def make(server: FakeServer, **kw: Any) -> OpenAIListener:
    options: dict[str, Any] = {"base_url": server.url, "backoff_base": 0.01, "timeout": 5.0, **kw}
    return OpenAIListener(MODEL, **options)


@pytest.mark.parametrize("concurrency,n", [(8, 40), (3, 12)])
def test_answers_correct_in_order_and_concurrency_bounded(server, concurrency, n):
    server.delay = 0.05
    directions = ["increase" if (i * 7) % 3 else "decrease" for i in range(n)]
    requests = [request(f"item{i:02d}", d) for i, d in enumerate(directions)]
    with make(server, concurrency=concurrency) as listener:
        assert listener.listener_id == f"openai:{MODEL}" and listener.revision == MODEL
        before = listener.manifest()
        answers = listener.generate(requests)
        assert answers == directions
        assert listener.revision == REPORTED  # the snapshot the server says it ran
        assert listener.manifest() == before  # cache keys stay stable across the first answer
    assert server.calls == n
    assert 2 <= server.max_inflight <= concurrency


def test_message_structure_few_shot_audio_first_and_text_only(server):
    few = [({"item_id": "ex1"}, "increase"), ({"item_id": "ex2"}, "decrease")]
    prompt = build_prompt("volume", few_shot=few, item_id="t1", audio_first=True)
    audio = {"ex1": clip("increase", 1), "ex2": clip("decrease", 2), "t1": clip("decrease", 3)}
    control = Request("t2", build_prompt("volume", item_id="t2"), {"t2": None})
    with make(server, seed=7, max_tokens=5) as listener:
        assert listener.generate([Request("t1", prompt, audio), control], 16) == [
            "decrease",
            "no audio",
        ]
    by_len = sorted(server.bodies, key=lambda b: len(b["messages"]))
    plain, shot = by_len
    assert [m["role"] for m in shot["messages"]] == ["user", "assistant"] * 2 + ["user"]
    assert [m["content"] for m in shot["messages"][1::2]] == ["increase", "decrease"]
    for m in shot["messages"][0::2]:
        assert [p["type"] for p in m["content"]] == ["input_audio", "text"]
        assert m["content"][1]["text"] == prompt.text
    assert plain["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": prompt.text}]}
    ]
    for body in (plain, shot):
        assert body["seed"] == 7 and body["max_tokens"] == 5 and body["temperature"] == 0


def test_default_order_is_text_then_audio(server):
    with make(server) as listener:
        assert listener.generate([request("a", "increase")]) == ["increase"]
    (body,) = server.bodies
    assert [p["type"] for p in body["messages"][0]["content"]] == ["text", "input_audio"]


def test_retries_recover_and_honour_retry_after(server, caplog):
    server.script = ["429", "429", "500", "malformed", "slow"]
    server.slow_s = 1.0
    delays: list[float] = []
    requests = [request(f"r{i}", "increase" if i % 2 else "decrease") for i in range(6)]
    with (
        caplog.at_level(logging.WARNING),
        make(server, timeout=0.3, sleep=delays.append) as listener,
    ):
        answers = listener.generate(requests)
    assert answers == ["decrease", "increase"] * 3
    assert server.calls == 6 + 5
    assert len(delays) == 5 and sum(d >= 2.0 for d in delays) == 2  # Retry-After: 2
    assert all(d < 1.0 for d in delays if d < 2.0)  # plain backoff stays small
    assert listener.usage()["retries"] == 5 and listener.usage()["requests"] == 6
    assert "retry" in caplog.text


def test_real_backoff_sleeps_and_grows(server):
    server.script = ["500", "500"]
    start = time.monotonic()
    with make(server, backoff_base=0.1, concurrency=1) as listener:
        assert listener.generate([request("x", "increase")]) == ["increase"]
    # equal jitter: attempt 0 waits 0.05-0.1 s, attempt 1 waits 0.1-0.2 s
    assert 0.15 <= time.monotonic() - start < 3.0


def test_persistent_failure_raises_per_item_error(server):
    requests = [request("a", "increase"), request("silent", "decrease"), request("c", "decrease")]
    requests[1] = Request("silent", requests[1].prompt, {"silent": clip("silent")})
    with make(server, max_retries=2) as listener, pytest.raises(APIError) as info:
        listener.generate(requests)
    err = info.value
    assert isinstance(err, VocalgradError)
    assert err.item_id == "silent" and err.status_code == 500 and err.attempts == 3
    assert "silent" in str(err) and "cannot process silence" in str(err)
    assert err.answers == ["increase", None, "decrease"]
    assert set(err.failures) == {1}
    assert server.silent_calls == 3
    assert listener.usage()["failures"] == 1


def test_timeouts_exhausted_raise(server):
    server.script = ["slow"] * 2
    server.slow_s = 0.6
    with make(server, timeout=0.2, max_retries=1) as listener, pytest.raises(APIError) as info:
        listener.generate([request("late", "increase")])
    assert info.value.item_id == "late" and "timed out" in str(info.value)
    assert info.value.status_code is None


def test_auth_error_not_retried_and_key_never_leaks(server, monkeypatch, caplog):
    secret = "sk-secret-0123456789"
    monkeypatch.setenv("VG_TEST_KEY", secret)
    server.require_key = "sk-something-else"
    with caplog.at_level(logging.DEBUG):
        listener = make(server, api_key_env="VG_TEST_KEY")
        with pytest.raises(APIError) as info:
            listener.generate([request("k", "increase")])
    assert info.value.status_code == 401 and info.value.attempts == 1 and server.calls == 1
    assert "API key" in str(info.value)
    for text in (str(info.value), repr(listener), json.dumps(listener.manifest()), caplog.text):
        assert secret not in text
    server.require_key = secret
    assert listener.generate([request("k", "increase")]) == ["increase"]
    assert server.auth[-1] == f"Bearer {secret}"
    listener.close()


def test_no_key_on_loopback_sends_no_auth_header(server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with make(server) as listener:
        listener.generate([request("n", "decrease")])
    assert server.auth == [None]


def test_usage_and_cost_tally(server):
    few = [({"item_id": "ex1"}, "increase"), ({"item_id": "ex2"}, "decrease")]
    shot = Request(
        "s",
        build_prompt("volume", few_shot=few, item_id="s"),
        {"ex1": clip("increase"), "ex2": clip("decrease"), "s": clip("increase")},
    )
    plain = [request(f"p{i}", "increase") for i in range(5)]
    prices = {"input_price_per_m": 2.5, "output_price_per_m": 10.0, "audio_input_price_per_m": 40.0}
    with make(server, **prices) as listener:
        listener.generate([*plain, shot])
        usage = listener.usage()
        audio = AUDIO_TOKENS * (5 + 3)
        assert usage["requests"] == 6
        assert usage["audio_tokens"] == audio
        assert usage["prompt_tokens"] == TEXT_TOKENS * 6 + audio
        assert usage["completion_tokens"] == 6
        assert usage["total_tokens"] == usage["prompt_tokens"] + 6
        expected = (TEXT_TOKENS * 6 * 2.5 + audio * 40.0 + 6 * 10.0) / 1e6
        assert usage["cost_usd"] == pytest.approx(expected)
        listener.reset_usage()
        assert listener.usage()["requests"] == 0
    with make(server, input_price_per_m=1.0) as listener:  # audio billed as text input
        listener.generate(plain[:1])
        assert listener.usage()["cost_usd"] == pytest.approx((TEXT_TOKENS + AUDIO_TOKENS) / 1e6)
    with make(server) as listener:
        listener.generate(plain[:1])
        assert listener.usage()["cost_usd"] is None


def test_score_choices_from_top_logprobs(server):
    requests = [
        request("u", "increase"),
        request("d", "decrease"),
        request("t", "increase", variant="ternary"),
    ]
    with make(server, logprobs=True, top_logprobs=4) as listener:
        assert listener.can_score
        scores = listener.score_choices(requests)
    both = math.log(math.exp(-0.05) + math.exp(-3.0))  # "increase" + " Incr"
    assert scores[0] == pytest.approx({"increase": both, "decrease": -4.0})
    assert scores[1] == pytest.approx(
        {"decrease": math.log(math.exp(-0.05) + math.exp(-3.0)), "increase": -4.0}
    )
    assert scores[2] == pytest.approx({"increase": both, "decrease": -4.0, "constant": -6.0})
    for body in server.bodies:
        assert body["logprobs"] is True and body["top_logprobs"] == 4 and body["max_tokens"] == 1


def test_score_choices_unsupported(server):
    with make(server) as listener:
        assert not listener.can_score
        with pytest.raises(NotImplementedError):
            listener.score_choices([request("u", "increase")])
    server.logprobs_supported = False
    with make(server, logprobs=True) as listener, pytest.raises(APIError, match="logprobs=False"):
        listener.score_choices([request("u", "increase")])
    assert server.calls == 1  # a missing feature is not retried


def test_option_logprobs_matching_and_floor():
    top = [("in", -1.0), (" Increase", -2.0), ("", -3.0), ("de", -4.0), ("x", -9.0)]
    got = option_logprobs(top, ("increase", "decrease", "constant"))
    assert got["increase"] == pytest.approx(math.log(math.exp(-1.0) + math.exp(-2.0)))
    assert got["decrease"] == -4.0 and got["constant"] == -9.0
    assert option_logprobs(top, ("yes", "no"), floor=-50.0) == {"yes": -50.0, "no": -50.0}
    assert option_logprobs([], ("yes", "no")) == {"yes": -100.0, "no": -100.0}
    # a token that begins both options does not discriminate between them
    assert option_logprobs([("d", -0.1), ("x", -5.0)], ("decrease", "down"))["down"] == -5.0


def test_retry_after_parsing():
    assert _retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert _retry_after(httpx.Headers({"retry-after-ms": "1500", "Retry-After": "9"})) == 1.5
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25.0 < _retry_after(httpx.Headers({"Retry-After": future})) <= 30.0
    assert _retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert _retry_after(httpx.Headers({})) is None


def test_insecure_url_refused(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with pytest.raises(ConfigError, match="allow_insecure"):
        OpenAIListener(MODEL, base_url="http://192.168.1.20:8000/v1")
    with pytest.raises(ConfigError, match="http"):
        OpenAIListener(MODEL, base_url="ftp://example.com/v1")
    with pytest.raises(ConfigError, match="credentials"):
        OpenAIListener(MODEL, base_url="https://user:pw@example.com/v1")
    OpenAIListener(MODEL, base_url="http://192.168.1.20:8000/v1", allow_insecure=True).close()
    OpenAIListener(MODEL, base_url="http://localhost:8000/v1").close()
    OpenAIListener(MODEL, base_url="https://example.com/v1").close()
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIListener(MODEL)


def test_spec_and_missing_audio(server):
    listener = OpenAIListener.from_spec(f"openai:{MODEL}", base_url=server.url)
    assert listener.listener_id == f"openai:{MODEL}" and listener.model == MODEL
    with pytest.raises(ConfigError):
        OpenAIListener.from_spec("hf:foo")
    prompt = build_prompt("volume", item_id="m")
    with pytest.raises(ConfigError, match="no such clip"):
        listener.generate([Request("m", prompt, {})])
    assert server.calls == 0  # nothing sent before every request is encodable
    listener.close()

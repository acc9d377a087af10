"""Listener for OpenAI-compatible chat completions with audio input (OpenAI, vLLM, ...).

Spec: `openai:<model>` with `base_url` (default the OpenAI API) and the key read from an
environment variable, so it never sits in a config file or a run manifest. Each `Prompt` turn
becomes one chat message; audio parts are sent as base64 16-bit WAV `input_audio` entries in
the order `Turn.parts()` gives, so few-shot turns and audio-before/after-text survive intact.

Remote APIs fail in ordinary ways (rate limits, 5xx, timeouts), so every request is retried
with exponential backoff plus jitter, honouring `Retry-After`; what still fails is raised as
`APIError` carrying the item id, so the evaluation runner can record it per item. Decoding is
greedy (temperature 0, optional seed) and every response's token usage is tallied for cost.
"""

from __future__ import annotations

import base64
import email.utils
import io
import logging
import math
import os
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import numpy as np
import soundfile as sf

from vocalgrad.errors import APIBatchError, APIError, ConfigError
from vocalgrad.listeners.base import Listener, Request
from vocalgrad.questions.prompts import TARGET, Prompt

__all__ = [
    "DEFAULT_BASE_URL",
    "APIError",
    "OpenAIListener",
    "build_messages",
    "encode_wav_base64",
    "option_logprobs",
]

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})  # plus every 5xx
EMPTY_TOP_FLOOR = -100.0
"""Log-prob given to every option when the server returned no top tokens at all."""

T = TypeVar("T")


class _Malformed(ValueError):
    """A 200 response whose body is not a usable completion: retried like a transient fault."""


def encode_wav_base64(audio: np.ndarray, sample_rate: int) -> str:
    """Float mono audio -> base64 of a 16-bit PCM WAV, the format every audio API accepts."""
    x = np.asarray(audio, dtype=np.float32)
    if x.ndim != 1 or x.size == 0:
        raise ConfigError(f"audio must be a non-empty mono 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ConfigError("audio holds NaN or infinite samples; check the clip before sending it")
    buf = io.BytesIO()
    sf.write(buf, np.clip(x, -1.0, 1.0), sample_rate, format="WAV", subtype="PCM_16")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def build_messages(
    prompt: Prompt,
    audio: Mapping[str, np.ndarray | None],
    sample_rate: int,
    target_id: str | None = None,
) -> list[dict[str, Any]]:
    """One chat message per prompt turn, parts in `Turn.parts()` order.

    A clip mapped to None is left out (the text-only control); a clip the request does not
    carry at all is a caller bug and raises `ConfigError` before anything is sent. User turns
    carry a list of parts; other roles carry plain text, which every compatible server accepts.
    """
    encoded: dict[str, str] = {}  # few-shot clips repeat within a prompt only rarely, but cheaply
    messages: list[dict[str, Any]] = []
    for turn in prompt.turns:
        parts: list[dict[str, Any]] = []
        for kind, value in turn.parts():
            if kind == "text":
                parts.append({"type": "text", "text": value})
                continue
            clip_id = target_id if value == TARGET and target_id is not None else value
            if clip_id not in audio:
                raise ConfigError(
                    f"prompt refers to audio {clip_id!r} but the request carries no such clip; "
                    "put it in Request.audio (None asks without audio)"
                )
            clip = audio[clip_id]
            if clip is None:
                continue
            if clip_id not in encoded:
                encoded[clip_id] = encode_wav_base64(clip, sample_rate)
            parts.append(
                {"type": "input_audio", "input_audio": {"data": encoded[clip_id], "format": "wav"}}
            )
        if turn.role == "user":
            messages.append({"role": turn.role, "content": parts})
        elif any(p["type"] != "text" for p in parts):
            raise ConfigError(f"a {turn.role!r} turn cannot carry audio in a chat request")
        else:
            messages.append({"role": turn.role, "content": "".join(p["text"] for p in parts)})
    return messages


def option_logprobs(
    top: Sequence[tuple[str, float]],
    options: Sequence[str],
    floor: float | None = None,
) -> dict[str, float]:
    """First-token log-probability of each option from the first generated token's top list.

    Without the model's tokenizer a token counts for an option when, stripped of whitespace
    and lower-cased, it is a prefix of the option or starts with it ("incre", " Increase",
    "increase."); tokens matching several options say nothing about the choice and are
    skipped. Matching tokens are summed (log-sum-exp): they are alternative ways to start the
    same answer. An option with no matching token gets `floor`; by default the smallest
    returned log-prob, a true upper bound for a token outside the top list, so the ranking
    stays honest. If the server returned no tokens at all, every option gets -100.
    """
    matched: dict[str, list[float]] = {o: [] for o in options}
    for token, logprob in top:
        text = token.strip().lower()
        if not text:
            continue
        hits = [o for o in options if o.lower().startswith(text) or text.startswith(o.lower())]
        if len(hits) == 1:
            matched[hits[0]].append(float(logprob))
    if floor is None:
        floor = min((float(lp) for _, lp in top), default=EMPTY_TOP_FLOOR)
    out: dict[str, float] = {}
    for option, values in matched.items():
        if values:
            peak = max(values)
            out[option] = peak + math.log(sum(math.exp(v - peak) for v in values))
        else:
            out[option] = floor
    return out


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, or `Retry-After` (secs or date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _snippet(response: httpx.Response, limit: int = 300) -> str:
    """The server's error message, short: enough to act on, never a wall of HTML."""
    try:
        data = response.json()
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            text = str(data["error"].get("message", data["error"]))
        else:
            text = response.text
    except ValueError:
        text = response.text
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


def _first_choice(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise _Malformed("response body is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _Malformed("response has no choices")
    return choices[0]


class OpenAIListener(Listener):
    """A model behind an OpenAI-compatible `/chat/completions` endpoint that accepts audio.

    Requests of one batch run on a thread pool of `concurrency` workers (the number of
    requests in flight). `logprobs=True` says the server returns `top_logprobs` on chat
    completions; only then can options be scored. `max_tokens`, when set, replaces the
    runner's `max_new_tokens` (reasoning models need a larger budget than the answer word).
    Prices are USD per million tokens; audio input tokens use `audio_input_price_per_m` when
    given (OpenAI bills them apart), otherwise the text input price.
    """

    sample_rate = 16000

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str | None = DEFAULT_KEY_ENV,
        allow_insecure: bool = False,
        concurrency: int = 8,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        max_retry_after: float = 120.0,
        seed: int | None = None,
        max_tokens: int | None = None,
        max_tokens_field: str = "max_tokens",
        logprobs: bool = False,
        top_logprobs: int = 20,
        logprob_floor: float | None = None,
        input_price_per_m: float | None = None,
        output_price_per_m: float | None = None,
        audio_input_price_per_m: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        model = model.removeprefix("openai:").strip()
        if not model:
            raise ConfigError("openai listener needs a model name: openai:<model>")
        if concurrency < 1 or max_retries < 0 or timeout <= 0 or top_logprobs < 1:
            raise ConfigError(
                "openai listener: concurrency and top_logprobs must be >= 1, max_retries >= 0 "
                "and timeout > 0"
            )
        parts = urlsplit(base_url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            raise ConfigError(f"base_url {base_url!r} must be an http(s) URL with a host")
        if parts.username or parts.password:
            raise ConfigError(
                "base_url must not carry credentials (they would land in manifests and logs); "
                "put the key in the environment variable named by api_key_env"
            )
        if parts.scheme != "https" and host not in LOOPBACK_HOSTS and not allow_insecure:
            raise ConfigError(
                f"refusing to send audio over plain http to {host!r}; use https, a localhost "
                "server, or pass allow_insecure=True if the network is trusted"
            )
        key = os.environ.get(api_key_env) if api_key_env else None
        if api_key_env and not key and host not in LOOPBACK_HOSTS:
            raise ConfigError(
                f"no API key: set the environment variable {api_key_env} (or choose another "
                "variable with api_key_env=...)"
            )

        self.model = model
        self.listener_id = f"openai:{model}"
        self.revision = model  # replaced by the model the server reports on first answer
        self.base_url = base_url.rstrip("/")
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_tokens_field = max_tokens_field
        self.logprobs = logprobs
        self.can_score = logprobs
        self.top_logprobs = top_logprobs
        self.logprob_floor = logprob_floor
        self.prices = {
            "input": input_price_per_m,
            "output": output_price_per_m,
            "audio_input": audio_input_price_per_m,
        }
        self.extra_body = dict(extra_body or {})
        self._sleep = sleep  # None: wait on the batch's stop event, so Ctrl-C ends a backoff
        self._jitter = random.Random()  # jitter only de-synchronises clients; results unaffected
        self._lock = threading.Lock()
        self._tally = self._empty_tally()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency),
        )

    @classmethod
    def from_spec(cls, spec: str, **options: Any) -> OpenAIListener:
        """Build from `openai:<model>`, the form the CLI and run manifests use."""
        scheme, _, model = spec.partition(":")
        if scheme != "openai":
            raise ConfigError(f"not an openai spec: {spec!r}; write openai:<model>")
        return cls(model, **options)

    def __repr__(self) -> str:  # the key lives only in the client's headers, never here
        return f"OpenAIListener(model={self.model!r}, base_url={self.base_url!r})"

    def close(self) -> None:
        """Release pooled connections."""
        self._client.close()

    def __enter__(self) -> OpenAIListener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def manifest(self) -> dict:
        """Identity plus decoding settings: two runs with equal manifests asked the same way.

        Its `revision` is the requested model, not the served snapshot in `self.revision`:
        the manifest feeds cache keys and run identity, which must not change mid-run (or on
        resume) when the first answer reveals the snapshot; result rows record that instead.
        """
        return {
            **super().manifest(),
            "revision": self.model,
            "base_url": self.base_url,
            "decoding": {
                "temperature": 0.0,
                "seed": self.seed,
                "max_tokens": self.max_tokens,
                "top_logprobs": self.top_logprobs if self.logprobs else None,
                "logprob_floor": self.logprob_floor if self.logprobs else None,
                **self.extra_body,
            },
        }

    # -- usage ---------------------------------------------------------------------------

    @staticmethod
    def _empty_tally() -> dict[str, int]:
        return dict.fromkeys(
            (
                "requests",
                "prompt_tokens",
                "completion_tokens",
                "audio_tokens",
                "retries",
                "failures",
            ),
            0,
        )

    def usage(self) -> dict[str, Any]:
        """Tokens spent so far (successful responses) and their cost in USD.

        `cost_usd` is None until at least one price is given; a missing price counts as 0.
        """
        with self._lock:
            tally: dict[str, Any] = dict(self._tally)
        tally["total_tokens"] = tally["prompt_tokens"] + tally["completion_tokens"]
        if all(p is None for p in self.prices.values()):
            tally["cost_usd"] = None
            return tally
        audio_price = self.prices["audio_input"]
        text_prompt = tally["prompt_tokens"] - (
            tally["audio_tokens"] if audio_price is not None else 0
        )
        tally["cost_usd"] = (
            text_prompt * (self.prices["input"] or 0.0)
            + (tally["audio_tokens"] * audio_price if audio_price is not None else 0.0)
            + tally["completion_tokens"] * (self.prices["output"] or 0.0)
        ) / 1e6
        return tally

    def reset_usage(self) -> None:
        """Start a fresh tally (e.g. per evaluation run)."""
        with self._lock:
            self._tally = self._empty_tally()

    def _record(self, data: Mapping[str, Any]) -> None:
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        details = usage.get("prompt_tokens_details") or {}
        with self._lock:
            self._tally["requests"] += 1
            self._tally["prompt_tokens"] += int(usage.get("prompt_tokens") or 0)
            self._tally["completion_tokens"] += int(usage.get("completion_tokens") or 0)
            self._tally["audio_tokens"] += int(details.get("audio_tokens") or 0)
        if isinstance(data.get("model"), str) and data["model"]:
            self.revision = data["model"]

    # -- requests ------------------------------------------------------------------------

    def _body(self, request: Request, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": build_messages(
                request.prompt, request.audio, self.sample_rate, request.item_id
            ),
            "temperature": 0.0,
            "n": 1,
            self.max_tokens_field: max_tokens,
            **self.extra_body,
        }
        if self.seed is not None:
            body["seed"] = self.seed
        return body

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with equal jitter; never shorter than the server's Retry-After."""
        step = min(self.backoff_max, self.backoff_base * 2.0**attempt)
        delay = step / 2 + self._jitter.uniform(0.0, step / 2)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay

    def _call(
        self,
        item_id: str,
        body: dict[str, Any],
        parse: Callable[[Any], T],
        stop: threading.Event | None = None,
    ) -> T:
        """POST one completion, retrying transient faults; raise `APIError` when out of tries
        or when `stop` is set (the batch was interrupted)."""
        reason, status = "no attempt made", None
        attempts = self.max_retries + 1
        stop = stop or threading.Event()
        for attempt in range(attempts):
            if stop.is_set():
                raise APIError(
                    f"item {item_id!r}: stopped before an answer came (interrupted)",
                    item_id=item_id,
                    attempts=attempt,
                )
            retry_after: float | None = None
            try:
                response = self._client.post("/chat/completions", json=body)
            except httpx.TimeoutException:
                reason, status = f"timed out after {self.timeout:g} s", None
            except httpx.TransportError as err:
                reason, status = f"connection error ({type(err).__name__})", None
            else:
                status = response.status_code
                if status == 200:
                    try:
                        data = response.json()
                        _first_choice(data)
                    except ValueError as err:  # JSONDecodeError and _Malformed
                        reason = f"malformed response: {err}"
                    else:
                        self._record(data)
                        try:
                            return parse(data)
                        except _Malformed as err:
                            reason = f"malformed response: {err}"
                elif status in RETRYABLE_STATUS or status >= 500:
                    reason = f"HTTP {status}: {_snippet(response)}"
                    retry_after = _retry_after(response.headers)
                else:
                    hint = " (check the API key)" if status in (401, 403) else ""
                    raise APIError(
                        f"item {item_id!r}: HTTP {status} from {self.base_url}{hint}: "
                        f"{_snippet(response)}",
                        item_id=item_id,
                        status_code=status,
                        attempts=attempt + 1,
                    )
            if attempt + 1 < attempts:
                delay = self._delay(attempt, retry_after)
                log.warning(
                    "item %s: %s; retry %d/%d in %.2f s",
                    item_id,
                    reason,
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                with self._lock:
                    self._tally["retries"] += 1
                if self._sleep is not None:
                    self._sleep(delay)
                else:
                    stop.wait(delay)
        raise APIError(
            f"item {item_id!r}: request to {self.base_url} failed after {attempts} attempts: "
            f"{reason}; try again later, lower concurrency, or raise --timeout / --max-retries",
            item_id=item_id,
            status_code=status,
            attempts=attempts,
        )

    def _map(
        self,
        requests: Sequence[Request],
        bodies: Sequence[dict[str, Any]],
        parsers: Sequence[Callable[[Any], T]],
    ) -> list[T]:
        """Run all requests concurrently; results in request order or one `APIError`."""
        results: list[Any] = [None] * len(requests)
        failures: dict[int, APIError] = {}
        if not requests:
            return []
        workers = min(self.concurrency, len(requests))
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openai-listener")
        try:
            futures = {
                pool.submit(self._call, r.item_id, body, parse, stop): i
                for i, (r, body, parse) in enumerate(zip(requests, bodies, parsers, strict=True))
            }
            for future in as_completed(futures):
                i = futures[future]
                try:
                    results[i] = future.result()
                except APIError as err:
                    failures[i] = err
        except BaseException:
            # Ctrl-C (or any escape): no new attempt starts, no backoff keeps sleeping, queued
            # requests are dropped; a request already on the wire ends by its own timeout
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        if failures:
            with self._lock:
                self._tally["failures"] += len(failures)
            first = failures[min(failures)]
            raise APIBatchError(
                f"{first} ({len(failures)} of {len(requests)} requests failed)"
                if len(failures) > 1
                else str(first),
                answers=results,
                failures=failures,
                item_id=first.item_id,
                status_code=first.status_code,
                attempts=first.attempts,
            ) from first
        return results

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        """Greedy answers in request order; a refusal comes back as its text."""
        max_tokens = self.max_tokens if self.max_tokens is not None else max_new_tokens
        bodies = [self._body(r, max_tokens) for r in requests]  # encode first: fail before spending

        def parse(data: Any) -> str:
            message = _first_choice(data).get("message") or {}
            return str(message.get("content") or message.get("refusal") or "")

        return self._map(requests, bodies, [parse] * len(requests))

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        """First-token log-probabilities of each option (see `option_logprobs`).

        Asks for one token with `top_logprobs`; only the first token of each option is
        scored, which is what separates single-word answers like increase / decrease.
        """
        if not self.logprobs:
            return super().score_choices(requests)
        bodies = []
        for r in requests:
            body = self._body(r, 1)
            body.update(logprobs=True, top_logprobs=self.top_logprobs)
            bodies.append(body)

        def parser(options: tuple[str, ...], item_id: str) -> Callable[[Any], dict[str, float]]:
            def parse(data: Any) -> dict[str, float]:
                logprobs = _first_choice(data).get("logprobs")
                content = logprobs.get("content") if isinstance(logprobs, dict) else None
                if (
                    not content
                    or not isinstance(content[0], dict)
                    or not content[0].get("top_logprobs")
                ):
                    raise APIError(
                        f"item {item_id!r}: {self.base_url} returned no top_logprobs; the server "
                        "may not support logprobs on chat completions: use logprobs=False",
                        item_id=item_id,
                        status_code=200,
                        attempts=1,
                    )
                try:
                    top = [
                        (str(t["token"]), float(t["logprob"])) for t in content[0]["top_logprobs"]
                    ]
                except (KeyError, TypeError, ValueError) as err:
                    raise _Malformed(f"unreadable top_logprobs ({err})") from None
                return option_logprobs(top, options, self.logprob_floor)

            return parse

        parsers = [parser(r.prompt.options, r.item_id) for r in requests]
        return self._map(requests, bodies, parsers)


def from_spec(rest: str, *, dataset: str | Path | None = None, **options: Any) -> OpenAIListener:
    """The `openai:` listener family (the dataset is not needed to load it)."""
    return OpenAIListener(rest, **options)

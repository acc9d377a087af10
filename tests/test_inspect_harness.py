"""The inspect-ai tasks on real builds: inspect's mockllm and its openai-api provider (against a
stub server on 127.0.0.1) answer from the audio they were sent, so these tests check the audio
path end to end, the question asked, our scorer, and that the numbers equal `vocalgrad score`."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip(
    "inspect_ai",
    reason="inspect-ai is not installed: pip install -c constraints/cpu-torch.txt -e '.[inspect]'",
)

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai._util.registry import registry_info  # noqa: E402
from inspect_ai.model import ContentAudio, ContentText, ModelOutput, ModelUsage, get_model  # noqa: E402

from vocalgrad.dataset import load_rows  # noqa: E402
from vocalgrad.errors import ConfigError, DatasetError  # noqa: E402
from vocalgrad.evaluation.score import score_run  # noqa: E402
from vocalgrad.harness import inspect_tasks  # noqa: E402
from vocalgrad.harness.items import question  # noqa: E402
from vocalgrad.questions.prompts import build_prompt  # noqa: E402
from vocalgrad.stimuli.build import build  # noqa: E402
from vocalgrad.stimuli.config import BuildConfig  # noqa: E402

pytestmark = pytest.mark.usefixtures("builtin_cache")
FORMATS = ("gradual", "comparison", "recognition")
FLIP = {"increase": "decrease", "decrease": "increase"}
# inspect names a package's tasks "vocalgrad/..." only when the imported vocalgrad is the
# installed distribution that declares the entry point
REGISTERED = (
    any(ep.name == "vocalgrad" for ep in entry_points(group="inspect_ai"))
    and registry_info(inspect_tasks.gradual).name == "vocalgrad/gradual"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("inspect")
    out = {}
    for fmt in FORMATS:
        config = BuildConfig(
            format=fmt,
            n_test=2,
            n_train=0,
            categories=("volume", "voice_pitch"),
            tiers=("high",),
            constants=0,
        )
        build(config, root / fmt, workers=1, audit=False)
        out[fmt] = root / fmt
    return out


def _pcm_key(audio: np.ndarray, sr: int) -> str:
    return hashlib.sha256(np.ascontiguousarray(audio).tobytes() + str(sr).encode()).hexdigest()


def clips(dataset: Path) -> dict[str, dict]:
    """Decoded 16-bit PCM of every clip -> its row: what the model must have been sent."""
    out = {}
    for row in load_rows(dataset):
        audio, sr = sf.read(row["path"], dtype="int16")
        out[_pcm_key(audio, sr)] = row
    assert len(out) == len(load_rows(dataset)), "two clips decode alike: the oracle could not tell"
    return out


def decode(data: bytes) -> tuple[np.ndarray, int]:
    audio, sr = sf.read(io.BytesIO(data), dtype="int16")
    return audio, sr


def word_for(row: dict, label: str) -> str:
    prompt = build_prompt(row["category"], "default", fmt=row.get("format") or "gradual")
    return {lab: word for word, lab in prompt.label_of.items()}[label]


class Listener:
    """Answers from the clip it hears (looked up by its exact samples), and records what it got."""

    def __init__(self, dataset: Path, kind: str, variant: str = "default") -> None:
        self.clips, self.kind, self.variant, self.heard = clips(dataset), kind, variant, []

    def answer(self, wav: bytes, text: str) -> str:
        audio, sr = decode(wav)
        row = self.clips.get(_pcm_key(audio, sr))
        assert row is not None, "the audio sent is not any clip of the dataset, sample for sample"
        assert text == question(row, self.variant), "not the question `vocalgrad eval` asks"
        self.heard.append(row["item_id"])
        if self.kind == "mixed":  # right on pitch; on volume half wrong, half unparsable
            if row["category"] == "voice_pitch":
                return word_for(row, row["direction"])
            return "I cannot tell." if row["direction"] == "increase" else word_for(row, "increase")
        label = {"oracle": row["direction"], "anti": FLIP[row["direction"]], "always": "increase"}[
            self.kind
        ]
        return word_for(row, label)

    def __call__(self, messages, tools, tool_choice, config) -> ModelOutput:
        parts = messages[-1].content
        audio = [p for p in parts if isinstance(p, ContentAudio)]
        text = [p.text for p in parts if isinstance(p, ContentText)]
        assert len(audio) == 1 and len(text) == 1
        assert isinstance(parts[0], ContentText), (
            "the question comes before the clip, as in `vocalgrad eval`"
        )
        assert audio[0].format == "wav" and audio[0].audio.startswith("data:audio/")
        wav = base64.b64decode(audio[0].audio.split("base64,", 1)[1])
        out = ModelOutput.from_content("mockllm", self.answer(wav, text[0]))
        out.usage = ModelUsage(
            input_tokens=1, output_tokens=1, total_tokens=2
        )  # no tokenizer download
        return out


def run(task, listener: Listener, log_dir: Path):
    (log,) = inspect_eval(
        task,
        model=get_model("mockllm/model", custom_outputs=listener),
        log_dir=str(log_dir),
        display="none",
    )
    assert log.status == "success", log.error
    return log, {k: v.value for k, v in log.results.scores[0].metrics.items()}


@pytest.mark.parametrize("kind, accuracy", [("oracle", 1.0), ("anti", 0.0), ("always", 0.5)])
def test_oracle_anti_oracle_and_always_increase(built, tmp_path, kind, accuracy):
    listener = Listener(built["gradual"], kind)
    log, m = run(inspect_tasks.gradual(dataset=str(built["gradual"])), listener, tmp_path)
    changing = [r for r in load_rows(built["gradual"]) if r["direction"] in FLIP]
    assert sorted(listener.heard) == sorted(r["item_id"] for r in changing)  # each clip once
    assert m["accuracy"] == accuracy
    assert m["accuracy_volume"] == m["accuracy_voice_pitch"] == accuracy
    assert m["unparsed_rate"] == 0.0 and m["n_clusters"] == 2
    if kind == "oracle":
        assert m["dprime"] > 2 and abs(m["criterion"]) < 1e-9
    elif kind == "anti":
        assert m["dprime"] < -2
    else:  # says "increase" whatever it hears: no sensitivity, all bias
        assert m["dprime"] == 0.0 and m["criterion"] < -0.5


@pytest.mark.parametrize("fmt", ["comparison", "recognition"])
def test_held_formats_are_asked_in_their_own_words(built, tmp_path, fmt):
    listener = Listener(built[fmt], "oracle", "swapped")
    task = getattr(inspect_tasks, fmt)(dataset=str(built[fmt]), variant="swapped")
    log, m = run(task, listener, tmp_path)
    assert m["accuracy"] == 1.0 and len(listener.heard) == len(load_rows(built[fmt]))
    first = log.samples[0]
    row = next(r for r in load_rows(built[fmt]) if r["item_id"] == first.id)
    assert first.input[0].content[0].text == question(row, "swapped")  # swapped wording sent


def test_numbers_equal_vocalgrad_score(built, tmp_path):
    """A mixed answerer (right, wrong and unparsable answers over 2 sources): the harness'
    metrics and `vocalgrad score` on the same answers agree to the last digit."""
    log, m = run(
        inspect_tasks.gradual(dataset=str(built["gradual"])),
        Listener(built["gradual"], "mixed"),
        tmp_path / "logs",
    )
    run_dir = inspect_tasks.log_to_run(log.location, tmp_path / "run")
    table = next(iter(score_run(run_dir)["groups"].values()))["table"]
    overall = table[0]
    assert 0 < overall["unparsed_rate"] < 1 and 0 < overall["accuracy"] < 1
    for key in ("accuracy", "accuracy_lo", "accuracy_hi", "dprime", "criterion", "unparsed_rate"):
        assert same(m[key], overall[key]), key
    for g in table[1:]:
        for key in ("accuracy", "dprime", "criterion"):
            assert same(m[f"{key}_{g['category']}"], g[key]), (key, g["category"])
    assert math.isnan(m["dprime_volume"])  # volume's increases were never answered: no d'


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-12)


def test_options_select_items_and_bad_options_say_why(built):
    only = inspect_tasks.gradual(dataset=str(built["gradual"]), category="volume", tiers="high")
    assert {s.metadata["category"] for s in only.dataset} == {"volume"}
    assert all(s.target == s.metadata["direction"] for s in only.dataset)
    with pytest.raises(ConfigError, match="asks no direction"):
        inspect_tasks.gradual(dataset=str(built["gradual"]), variant="vary")
    with pytest.raises(ConfigError, match="no gradual increase/decrease items.*tiers low"):
        inspect_tasks.gradual(dataset=str(built["gradual"]), tiers="low")
    with pytest.raises(ConfigError, match="the dataset holds: recognition"):
        inspect_tasks.gradual(dataset=str(built["recognition"]))
    with pytest.raises(ConfigError, match="asked with the variants default, swapped, not 'clip'"):
        inspect_tasks.comparison(dataset=str(built["comparison"]), variant="clip")
    with pytest.raises(DatasetError, match="not found"):
        inspect_tasks.gradual(dataset=str(built["gradual"] / "missing"))


def test_flac_is_converted_once_into_the_cache(built, tmp_path):
    cache = tmp_path / "wav"
    a = inspect_tasks.gradual(dataset=str(built["gradual"]), cache=str(cache))
    stamps = {p: p.stat().st_mtime_ns for p in cache.iterdir()}
    inspect_tasks.gradual(dataset=str(built["gradual"]), cache=str(cache))
    assert (
        len(stamps) == len(a.dataset)
        and {p: p.stat().st_mtime_ns for p in cache.iterdir()} == stamps
    )


class _Stub(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat endpoint that answers like the oracle."""

    listener: Listener

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        parts = body["messages"][-1]["content"]
        audio = [p["input_audio"] for p in parts if p["type"] == "input_audio"]
        text = [p["text"] for p in parts if p["type"] == "text"]
        try:
            assert len(audio) == 1 and audio[0]["format"] == "wav"
            answer, status = self.listener.answer(base64.b64decode(audio[0]["data"]), text[0]), 200
        except AssertionError as err:
            answer, status = str(err), 400
        reply = json.dumps(
            {
                "id": "stub",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": answer},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args) -> None:
        pass


def test_openai_api_provider_against_a_local_server(built, tmp_path):
    """`inspect eval` as a researcher types it, through inspect's openai-api provider."""
    listener = Listener(built["recognition"], "oracle")
    handler = type("Handler", (_Stub,), {"listener": listener})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    task = (
        "vocalgrad/recognition" if REGISTERED else f"{Path(inspect_tasks.__file__)}@recognition"
    )  # package metadata not installed
    env = {
        **os.environ,
        "LOCAL_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1",
        "LOCAL_API_KEY": "unused",
        "INSPECT_LOG_DIR": str(tmp_path),
    }
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "inspect_ai",
                "eval",
                task,
                "-T",
                f"dataset={built['recognition']}",
                "--model",
                "openai-api/local/stub",
                "--display",
                "plain",
                "--max-retries",
                "0",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(listener.heard) == sorted(r["item_id"] for r in load_rows(built["recognition"]))
    (log,) = list(tmp_path.glob("*.eval"))
    run_dir = inspect_tasks.log_to_run(log, tmp_path / "run")
    overall = next(iter(score_run(run_dir)["groups"].values()))["table"][0]
    assert overall["accuracy"] == 1.0 and overall["n"] == len(listener.heard)


@pytest.mark.skipif(
    not REGISTERED,
    reason="vocalgrad's inspect_ai entry point is not installed "
    "(or another copy of vocalgrad shadows it): pip install -e .",
)
def test_tasks_are_found_by_registry_name(built, tmp_path):
    listener = Listener(built["comparison"], "oracle")
    (log,) = inspect_eval(
        "vocalgrad/comparison",
        task_args={"dataset": str(built["comparison"])},
        model=get_model("mockllm/model", custom_outputs=listener),
        log_dir=str(tmp_path),
        display="none",
    )
    assert (
        log.eval.task == "vocalgrad/comparison"
        and log.results.scores[0].metrics["accuracy"].value == 1.0
    )

"""The listener contract: a model family defined only here, registered in-process, is
evaluated, tuned (head, LoRA), reloaded as `tuned:` and probed (with its lens and a random-
weights control) with no edits anywhere else; a listener that does not declare a capability
is refused with a `CapabilityError` that names it."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from torch import nn  # noqa: E402

from vocalgrad.errors import CapabilityError, ConfigError  # noqa: E402
from vocalgrad.listeners import Listener, Request, load_listener, register  # noqa: E402
from vocalgrad.listeners.base import option_count  # noqa: E402
from vocalgrad.probing import ProbeConfig, probe_rows  # noqa: E402
from vocalgrad.probing.probes import ProbeSettings  # noqa: E402
from vocalgrad.questions.prompts import build_prompt  # noqa: E402
from vocalgrad.remedies.finetune import TuneConfig, requests_for, tune  # noqa: E402

SR = 16000
SEGMENTS = 8
OPTIONS = ("increase", "decrease")
SCHEME = "contracttest"


def loudness_course(audio: np.ndarray) -> np.ndarray:
    """Log RMS (dB) of SEGMENTS equal parts of the clip, its mean removed: (SEGMENTS,)."""
    parts = np.array_split(np.asarray(audio, np.float64), SEGMENTS)
    db = np.array([10 * np.log10(np.mean(p**2) + 1e-12) for p in parts])
    return (db - db.mean()).astype(np.float32)


class TinyNet(nn.Module):
    """Two hidden layers and a two-logit head over a clip's loudness course."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(SEGMENTS, 16)
        self.mid = nn.Linear(16, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        h1 = torch.tanh(self.encoder(x))
        h2 = torch.tanh(self.mid(h1))
        return self.head(h2), [h1, h2]


class TinyListener(Listener):
    """A family known only to this test file: it declares and implements every capability."""

    can_score = True
    can_probe = True
    can_lens = True
    can_tune = True

    def __init__(self, name: str, net: TinyNet | None = None) -> None:
        if net is None:
            torch.manual_seed(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))
            net = TinyNet()
        self.net = net.eval()
        self.name = name
        self.listener_id = f"{SCHEME}:{name}"
        digest = hashlib.sha256()
        for key, value in sorted(net.state_dict().items()):
            digest.update(key.encode() + value.detach().numpy().tobytes())
        self.revision = digest.hexdigest()[:12]

    def _features(self, requests: Sequence[Request]) -> torch.Tensor:
        clips = [r.target_audio for r in requests]
        if any(c is None for c in clips):
            raise ConfigError(f"{self.listener_id} needs audio")
        return torch.from_numpy(np.stack([loudness_course(c) for c in clips]))

    def option_logprobs(self, requests: Sequence[Request]) -> torch.Tensor:
        n = option_count(requests)
        if not requests:
            return torch.zeros(0, 0)
        logits, _ = self.net(self._features(requests))
        logp = torch.log_softmax(logits.float(), -1)
        index = torch.tensor([[OPTIONS.index(o) for o in r.prompt.options] for r in requests])
        return logp.gather(1, index).reshape(len(requests), n)

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        with torch.no_grad():
            scores = self.option_logprobs(requests).tolist()
        return [
            dict(zip(r.prompt.options, s, strict=True))
            for r, s in zip(requests, scores, strict=True)
        ]

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def hidden_states(self, requests: Sequence[Request]) -> list[dict[str, np.ndarray]]:
        x = self._features(requests)
        with torch.no_grad():
            _, (h1, h2) = self.net(x)
        return [
            {
                "course": x[i, :, None].numpy(),
                "encoder@answer": h1[i].numpy(),
                "mid@answer": h2[i].numpy(),
            }
            for i in range(len(requests))
        ]

    def answer_lens(
        self,
        requests: Sequence[Request],
        options: tuple[str, str] | None = None,
        states: Sequence[Mapping[str, np.ndarray]] | None = None,
    ) -> list[np.ndarray]:
        states = states if states is not None else self.hidden_states(requests)
        out = []
        for request, st in zip(requests, states, strict=True):
            a, b = (OPTIONS.index(o) for o in (options or request.prompt.options[:2]))
            with torch.no_grad():
                logp = torch.log_softmax(
                    self.net.head(
                        torch.from_numpy(np.stack([st["encoder@answer"], st["mid@answer"]]))
                    ),
                    -1,
                ).numpy()
            out.append((logp[:, a] - logp[:, b]).astype(np.float64))
        return out

    def with_random_weights(self, seed: int = 0) -> TinyListener:
        twin = copy.deepcopy(self.net)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for layer in (twin.encoder, twin.mid, twin.head):
                layer.reset_parameters()
        return TinyListener(f"{self.name}+random{seed}", twin)

    def tunable_module(self) -> nn.Module:
        return self.net

    def output_head(self) -> nn.Module:
        return self.net.head


class MuteListener(Listener):
    """Answers, and declares nothing else."""

    listener_id = f"{SCHEME}-mute:x"

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return ["increase" for _ in requests]


def from_spec(rest: str, *, dataset: str | Path | None = None, **options: object) -> Listener:
    return TinyListener(rest)


@pytest.fixture(autouse=True)
def _family() -> None:
    register(SCHEME, from_spec)


def ramp_rows(n_sources: int, per_source: int, seed: int = 0) -> list[dict]:
    """Noise clips (0.4 s) whose level ramps 12 dB up or down; half the sources train."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(2 * n_sources):
        level = rng.uniform(0.02, 0.2)
        for k in range(per_source):
            direction = OPTIONS[k % 2]
            ramp_db = np.linspace(-6, 6, int(0.4 * SR)) * (1 if direction == "increase" else -1)
            audio = level * rng.standard_normal(ramp_db.size) * 10 ** (ramp_db / 20)
            rows.append(
                {
                    "item_id": f"s{s:02d}-{k}",
                    "category": "volume",
                    "direction": direction,
                    "source_id": f"src{s}",
                    "speaker_id": f"spk{s}",
                    "split": "train" if s < n_sources else "test",
                    "audio": audio.astype(np.float32),
                }
            )
    return rows


def _scores(listener: Listener, rows: list[dict]) -> torch.Tensor:
    reqs = [r for row in rows for r in requests_for(row, SR)[0]]
    return torch.tensor(
        [
            [s[o] for o in r.prompt.options]
            for s, r in zip(listener.score_choices(reqs), reqs, strict=True)
        ]
    )


def test_a_family_defined_here_is_loaded_by_spec_and_scores_as_it_trains() -> None:
    listener = load_listener(f"{SCHEME}:a")
    assert isinstance(listener, TinyListener) and listener.capabilities()["can_tune"]
    reqs = [r for row in ramp_rows(1, 2) for r in requests_for(row, SR)[0]]
    with torch.no_grad():
        differentiable = listener.option_logprobs(reqs)
    torch.testing.assert_close(differentiable, _scores(listener, ramp_rows(1, 2)))
    assert listener.head_names() == ["head"]
    three = build_prompt("volume", "ternary", item_id="c")
    mixed = [reqs[0], Request("c", three, {"c": reqs[0].target_audio})]
    with pytest.raises(ConfigError, match="equally many"):
        listener.option_logprobs(mixed)


@pytest.mark.parametrize("method", ["head", "lora"])
def test_the_family_tunes_and_reloads_as_tuned(method: str, tmp_path: Path) -> None:
    rows = ramp_rows(4, 4)
    train = [r for r in rows if r["split"] == "train"]
    listener = load_listener(f"{SCHEME}:a")
    before = _scores(listener, train)
    config = TuneConfig(
        method=method, categories=("volume",), lr=0.05, epochs=6, batch_items=8, micro_batch=4
    )
    meta = tune(listener, rows, tmp_path, config, base_spec=f"{SCHEME}:a")
    assert meta["final_loss"] < meta["first_loss"]
    assert meta["head"] == ["head"] and not meta["head_inputs_read_once"]  # no head_inputs here
    assert listener.listener_id.startswith(f"{SCHEME}:a+{method}[volume]@")
    after = _scores(listener, train)
    targets = torch.cat(
        [torch.tensor([0, 1] if r["direction"] == "increase" else [1, 0]) for r in train]
    )
    loss = torch.nn.functional.cross_entropy
    assert loss(after.reshape(-1, 2), targets) < loss(before.reshape(-1, 2), targets)
    reloaded = load_listener(f"tuned:{tmp_path / 'adapter'}")
    assert reloaded.listener_id == listener.listener_id
    torch.testing.assert_close(_scores(reloaded, train), after, rtol=0, atol=1e-6)


def test_the_family_is_probed_with_its_lens_and_a_random_twin(tmp_path: Path) -> None:
    summary = probe_rows(
        ramp_rows(6, 4),
        load_listener(f"{SCHEME}:a"),
        tmp_path / "out",
        ProbeConfig(settings=ProbeSettings(seeds=2, n_boot=200, mlp_steps=100), dsp_control=False),
        sha="synthetic",
        cache=tmp_path / "cache",
    )
    result = summary["categories"]["volume"]
    stages = {r["stage"]: r for r in result["curves"]}
    assert {"course", "encoder@answer", "mid@answer"} <= set(stages)
    assert {"random:encoder@answer", "random:mid@answer"} <= set(stages)
    assert stages["course"]["linear_ba"] > 0.9  # the loudness course carries the direction
    assert [r["stage"] for r in result["lens_by_stage"]] == ["encoder@answer", "mid@answer"]
    assert result["behaviour"]["source"] == "lens at the last layer"


def test_undeclared_capabilities_are_refused_by_name(tmp_path: Path) -> None:
    mute = MuteListener()
    rows = ramp_rows(2, 2)
    with pytest.raises(CapabilityError, match=f"{SCHEME}-mute:x cannot be tuned"):
        tune(mute, rows, tmp_path / "tune", TuneConfig(method="head", categories=("volume",)))
    with pytest.raises(CapabilityError, match="exposes no hidden states"):
        probe_rows(
            rows,
            mute,
            tmp_path / "probe",
            ProbeConfig(dsp_control=False),
            sha="synthetic",
            cache=tmp_path / "cache",
        )
    reqs = requests_for(rows[0], SR)[0]
    for call in (mute.score_choices, mute.hidden_states, mute.answer_lens, mute.option_logprobs):
        with pytest.raises(CapabilityError, match=f"{SCHEME}-mute:x cannot"):
            call(reqs)
    with pytest.raises(NotImplementedError):  # callers that predate CapabilityError still work
        mute.score_choices(reqs)
    assert not (tmp_path / "tune" / "adapter").exists() and not (tmp_path / "probe").exists()

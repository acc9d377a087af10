"""Fine-tune a listener on the train split with the choice-scoring objective, then evaluate it.

Objective: for every train item of the chosen categories, the question `eval` asks
(`build_prompt`, variants "default" and "swapped", i.e. both option orders), and cross-entropy
over the answer options' summed log-likelihoods (`option_logprobs`, the differentiable twin of
`score_choices`). Items whose answer is not an option (constant clips under the two-way
question) are left out.

Published recipe (the defaults): LoRA r=8, alpha=16, dropout 0.05 on all linear layers but the
head; AdamW (torch defaults: betas 0.9/0.999, weight decay 0.01); lr 2e-4; one epoch;
effective batch 16 prompts = 8 items x both option orders, accumulated over micro-batches of
`micro_batch` items; seed 0. `--method head` trains only the LM output projection (Whisper's
`proj_out`, untied from the decoder's token embeddings first) at the same lr; `--method full`
trains every parameter at lr 1e-5. Head-only tuning runs the frozen model once: the head's
inputs at the answer positions never change, so they are read up front (`HeadInputs`) and
every step trains the head on them alone, unless the head alone does not reproduce the
model's option scores.

Resumable: the trainable state, optimizer, step and torch RNG are checkpointed every
`checkpoint_every` steps to OUT/checkpoint/state.pt (written to a temporary name, then renamed),
so a killed run resumes from its last checkpoint; a finished run (OUT/adapter/tuning.json with
the same settings) is reused without retraining. The data order of each epoch is a
permutation drawn from (seed, epoch), so a resumed run sees the batches it would have seen.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vocalgrad.audio import load_audio, resample
from vocalgrad.dataset import content_sha256, load_rows
from vocalgrad.errors import ConfigError
from vocalgrad.files import atomic_path, atomic_write_text
from vocalgrad.listeners.base import Listener, Request
from vocalgrad.listeners.tuning import HeadInputs
from vocalgrad.questions.prompts import build_prompt, expected_answer
from vocalgrad.records import TuneResult
from vocalgrad.remedies.config import ORDERS, TuneConfig
from vocalgrad.remedies.tuned import (
    META_FILE,
    WEIGHTS_FILE,
    adapter_sha256,
    apply_adapter,
    linear_names,
    require_tunable,
    tuned_id,
)
from vocalgrad.signal.kinds import row_kind


def train_items(rows: Sequence[dict], categories: Sequence[str]) -> list[dict]:
    """Train-split rows of `categories` whose answer is one of the two-way options (constant
    clips are left out), in row order.

    Parameters
    ----------
    rows : sequence of dict
        Dataset rows.
    categories : sequence of str
        The dimensions to tune on.

    Returns
    -------
    list of dict
        The rows kept, each asked in the words of its kind of sound.
    """
    return [
        r
        for r in rows
        if r["split"] == "train"
        and r["category"] in categories
        and r["direction"] in build_prompt(r["category"], kind=row_kind(r)).options
    ]


def _audio(row: dict, sr: int) -> np.ndarray:
    """In-memory `audio` (synthetic rows) or the clip file, at the listener's rate."""
    if row.get("audio") is not None:
        return np.asarray(row["audio"], np.float32)
    audio, file_sr = load_audio(row["path"])
    return resample(audio, file_sr, sr)


def requests_for(row: dict, sr: int) -> tuple[list[Request], torch.Tensor]:
    """The item under both option orders, exactly as `evaluate` asks it (in the words of
    its kind of sound).

    Parameters
    ----------
    row : dict
        A dataset row, with its clip's ``path`` or an in-memory ``audio`` array.
    sr : int
        The listener's sample rate (Hz).

    Returns
    -------
    requests : list of Request
        One per option order (`ORDERS`), the clip at `sr` Hz.
    targets : torch.Tensor
        (2,) int: the index of the correct option in each request.
    """
    audio = {row["item_id"]: _audio(row, sr)}
    reqs = [
        Request(
            row["item_id"],
            build_prompt(row["category"], variant, False, (), row["item_id"], kind=row_kind(row)),
            audio,
            row.get("source_id"),
        )
        for variant in ORDERS
    ]
    return reqs, option_targets(row)


def option_targets(row: dict) -> torch.Tensor:
    """The index of the correct option under each option order.

    Parameters
    ----------
    row : dict
        A dataset row (its ``category``, ``direction``, ``item_id`` and kind of sound).

    Returns
    -------
    torch.Tensor
        (2,) int: one index per order of `ORDERS`.
    """
    return torch.tensor(
        [
            build_prompt(
                row["category"], v, False, (), row["item_id"], kind=row_kind(row)
            ).options.index(expected_answer(row["direction"], v))
            for v in ORDERS
        ]
    )


def _prepare(
    listener: Listener, config: TuneConfig
) -> tuple[list[tuple[str, torch.nn.Parameter]], bool, Any]:
    """Freeze everything, then make trainable what the method trains. Returns the trainable
    (name, parameter) pairs, whether the head was untied, and the peft model (LoRA)."""
    module = listener.tunable_module()
    module.requires_grad_(False)
    untied, peft_model = False, None
    if config.method == "head":
        untied = listener.untie_head()
        for name in listener.head_names():
            module.get_submodule(name).requires_grad_(True)
    elif config.method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=linear_names(listener),
            bias="none",
        )
        peft_model = get_peft_model(module, lora)  # injects into `module` in place
    else:
        module.requires_grad_(True)
    return [(n, p) for n, p in module.named_parameters() if p.requires_grad], untied, peft_model


def _read_head_inputs(
    listener: Listener, items: Sequence[dict], config: TuneConfig
) -> dict[str, HeadInputs] | None:
    """Head-only tuning: every train item's head inputs (both option orders), read once with
    the trunk in eval mode, or None where the head alone does not reproduce the model's option
    scores (logits transformed after the head): then every step runs the whole model."""
    module = listener.tunable_module()
    module.eval()
    head = listener.output_head()
    cached: dict[str, HeadInputs] = {}
    for start in range(0, len(items), config.micro_batch):
        chunk = items[start : start + config.micro_batch]
        reqs = [r for row in chunk for r in requests_for(row, listener.sample_rate)[0]]
        inputs = listener.head_inputs(reqs)
        if inputs is None:  # the listener cannot split off its head's inputs
            return None
        with torch.no_grad():
            if not torch.allclose(inputs.score(head), inputs.reference, atol=1e-4, rtol=1e-4):
                return None
        for i, row in enumerate(chunk):
            cached[row["item_id"]] = inputs.requests(i * len(ORDERS), (i + 1) * len(ORDERS))
    return cached


def _save_checkpoint(folder: Path, state: dict) -> None:
    with atomic_path(folder / "state.pt") as tmp:
        torch.save(state, tmp)


def _identity(listener: Listener, base_spec: str, config: TuneConfig, data_sha: str) -> dict:
    """What a finished adapter must match to be reused."""
    return {
        "base": {
            "spec": base_spec,
            "listener_id": listener.listener_id,
            "revision": listener.revision,
        },
        "config": asdict(config),
        "data_sha256": data_sha,
    }


def tune(
    listener: Listener,
    rows: Sequence[dict],
    out: str | Path,
    config: TuneConfig,
    *,
    base_spec: str | None = None,
    data_sha: str = "",
    on_step: Callable[[int, float], None] | None = None,
) -> dict:
    """Tune `listener` in place on the rows' train split; write OUT/adapter.

    Parameters
    ----------
    listener : Listener
        A listener that declares `can_tune`; its parameters change in place, and its
        `listener_id` and `revision` become the tuned ones.
    rows : sequence of dict
        Dataset rows (train rows of `config.categories` are used), each with ``path`` or
        in-memory ``audio`` (float32 samples at the listener's rate).
    out : str or Path
        Folder for ``adapter/`` and the resumable ``checkpoint/``.
    config : TuneConfig
        Method and hyperparameters.
    base_spec : str, optional
        The spec that loads the base listener again (recorded for ``tuned:``); default its id.
    data_sha : str
        The dataset's content hash, recorded so a finished adapter is reused only for it.
    on_step : callable, optional
        ``on_step(step, loss)`` after every optimizer step (progress; tests interrupt there).

    Returns
    -------
    dict
        The tuning record written to ``adapter/tuning.json`` (losses in nats per prompt).

    Raises
    ------
    CapabilityError
        When the listener is not tunable.
    ConfigError
        When there are no train items, or OUT holds another run's adapter or checkpoint.
    """
    require_tunable(listener)
    out = Path(out)
    adapter = out / "adapter"
    identity = json.loads(
        json.dumps(_identity(listener, base_spec or listener.listener_id, config, data_sha))
    )
    meta_path = adapter / META_FILE
    if meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        if {k: meta.get(k) for k in identity} == identity:
            apply_adapter(listener, adapter, config.method)
            _rename(listener, meta)
            return meta
        raise ConfigError(
            f"{out} holds an adapter tuned with other settings or data; choose another --out"
        )
    items = train_items(rows, config.categories)
    if not items:
        raise ConfigError(f"no train items in dimensions {list(config.categories)}")
    torch.manual_seed(config.seed)
    module = listener.tunable_module()
    trainable, untied, peft_model = _prepare(listener, config)
    optimizer = torch.optim.AdamW(
        [p for _, p in trainable], lr=config.learning_rate, weight_decay=config.weight_decay
    )
    per_epoch = math.ceil(len(items) / config.batch_items)
    total = per_epoch * config.epochs
    step, losses, elapsed = 0, [], 0.0
    ckpt = out / "checkpoint" / "state.pt"
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        if state["identity"] != identity:
            raise ConfigError(
                f"{ckpt} belongs to another tuning run; remove it or choose another --out"
            )
        params = dict(trainable)
        with torch.no_grad():
            for name, value in state["trainable"].items():
                params[name].copy_(value)
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        step, losses, elapsed = state["step"], state["losses"], state["elapsed"]
    started = time.time() - elapsed
    cached = _read_head_inputs(listener, items, config) if config.method == "head" else None
    module.train()
    while step < total:
        epoch, index = divmod(step, per_epoch)
        order = np.random.default_rng([config.seed, epoch]).permutation(len(items))
        batch = [
            items[i] for i in order[index * config.batch_items : (index + 1) * config.batch_items]
        ]
        optimizer.zero_grad(set_to_none=True)
        loss_sum = 0.0
        for start in range(0, len(batch), config.micro_batch):
            chunk = batch[start : start + config.micro_batch]
            targets = torch.cat([option_targets(row) for row in chunk])
            if cached is None:
                logits = listener.option_logprobs(
                    [r for row in chunk for r in requests_for(row, listener.sample_rate)[0]]
                )
            else:
                inputs = HeadInputs.concat([cached[row["item_id"]] for row in chunk])
                logits = inputs.score(listener.output_head())
            loss = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
            (loss / (len(batch) * len(ORDERS))).backward()
            loss_sum += float(loss.detach())
        optimizer.step()
        step += 1
        losses.append(loss_sum / (len(batch) * len(ORDERS)))
        if step % config.checkpoint_every == 0 and step < total:
            _save_checkpoint(
                ckpt.parent,
                {
                    "identity": identity,
                    "step": step,
                    "losses": losses,
                    "elapsed": time.time() - started,
                    "trainable": {n: p.detach().clone() for n, p in trainable},
                    "optimizer": optimizer.state_dict(),
                    "torch_rng": torch.get_rng_state(),
                },
            )
        if on_step is not None:
            on_step(step, losses[-1])
    module.eval()
    wall = time.time() - started
    tmp = out / "adapter.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if peft_model is not None:
        peft_model.save_pretrained(str(tmp))
    else:
        from safetensors.torch import save_file

        save_file(
            {n: p.detach().contiguous().clone() for n, p in trainable}, str(tmp / WEIGHTS_FILE)
        )
    sha = adapter_sha256(tmp)
    import peft

    meta = {
        **identity,
        "method": config.method,
        "hyperparameters": config.hyperparameters(),
        "seed": config.seed,
        "train_categories": list(config.categories),
        "train_items": len(items),
        "train_prompts": len(items) * len(ORDERS),
        "trainable_parameters": sum(p.numel() for _, p in trainable),
        "head": listener.head_names(),
        "head_untied": untied,
        "head_inputs_read_once": cached is not None,
        "steps": step,
        "wall_seconds": round(wall, 2),
        "first_loss": losses[0],
        "final_loss": losses[-1],
        "losses": losses,
        "adapter_sha256": sha,
        "adapter_files": sorted(p.name for p in tmp.iterdir()),
        "peft_version": peft.__version__,
        "torch_version": torch.__version__,
    }
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(adapter, ignore_errors=True)
    os.replace(tmp, adapter)
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    _rename(listener, meta)
    return meta


def _rename(listener: Listener, meta: dict) -> None:
    """A tuned listener's id and revision differ from its base's, so runs and caches differ."""
    listener.listener_id = tuned_id(
        meta["base"]["listener_id"],
        meta["method"],
        meta["train_categories"],
        meta["adapter_sha256"],
    )
    listener.revision = meta["adapter_sha256"][:12]


def finetune(
    dataset: str | Path,
    spec: str,
    out: str | Path,
    config: TuneConfig,
    *,
    batch_size: int = 16,
    cache: Any = None,
    on_step: Callable[[int, float], None] | None = None,
) -> TuneResult:
    """`vocalgrad finetune`: tune `spec` on the dataset's train split, then evaluate it
    (choice mode, both option orders) on the test split of every category.

    Parameters
    ----------
    dataset : str or Path
        A dataset folder with a train split.
    spec : str
        The base listener's spec (e.g. ``whisper:tiny.en``); it must declare `can_tune`.
    out : str or Path
        An ordinary run folder whose manifest also carries the tuning record under
        ``finetune``, with the adapter in ``adapter/``.
    config : TuneConfig
        Method, categories and hyperparameters.
    batch_size : int
        Requests per model pass in the evaluation.
    cache : optional
        The evaluation's answer cache.
    on_step : callable, optional
        ``on_step(step, loss)`` after every optimizer step.

    Returns
    -------
    dict
        ``tuning`` (the tuning record), ``counts`` (evaluation counts), ``summary`` (the
        scored run) and ``listener`` (the tuned listener).

    Raises
    ------
    CapabilityError
        When the listener is not tunable.
    ConfigError
        When a category is missing from the dataset or cannot be heard by the listener.
    """
    from vocalgrad.evaluation.evaluate import EvalConfig, evaluate, untestable_categories
    from vocalgrad.evaluation.score import score_run, write_summary
    from vocalgrad.listeners import load_listener

    out = Path(out)
    rows = load_rows(dataset)
    known = sorted({r["category"] for r in rows})
    unknown = sorted(set(config.categories) - set(known))
    if unknown:
        raise ConfigError(f"{dataset} has no dimensions {unknown}; it has {', '.join(known)}")
    listener = load_listener(spec, dataset=dataset)
    untestable = untestable_categories(
        [r for r in rows if r["category"] in config.categories], listener
    )
    if untestable:  # a downmix of a left-to-right pan has nothing to learn from
        raise ConfigError(
            f"cannot tune {listener.listener_id} on {', '.join(untestable)}: "
            + "; ".join(untestable.values())
        )
    meta = tune(
        listener,
        rows,
        out,
        config,
        base_spec=spec,
        data_sha=content_sha256(dataset),
        on_step=on_step,
    )
    counts = evaluate(
        dataset, listener, out, EvalConfig(mode="choice", batch_size=batch_size), cache=cache
    )
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["finetune"] = {k: v for k, v in meta.items() if k != "losses"} | {
        "adapter": str((out / "adapter").resolve())
    }
    atomic_write_text(manifest_path, json.dumps(manifest, indent=2) + "\n")
    summary = score_run(out)
    write_summary(out, summary)
    return {"tuning": meta, "counts": counts, "summary": summary, "listener": listener}


__all__ = ["TuneConfig", "finetune", "requests_for", "train_items", "tune"]

"""Evaluation throughput for Whisper tiny.en on CPU: batched choice scoring vs batched
free-text generation vs one-item-at-a-time generation (the published way: one
`model.generate` call per clip), with the padded 30 s encoder context and the trimmed one.

    python benchmarks/bench_eval.py [--items 32] [--batch-size 16] [--dataset DIR]

Prints items/s for each way on the same items and the ratios. Choice mode scores both
option orders (two requests per item), as `vocalgrad eval` does by default. For the trimmed
context it also prints how far its answers move from the padded model's: the change of the
increase-minus-decrease log-likelihood ratio, how often the chosen option flips, and the
accuracy of both on these items.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from vocalgrad.audio import load_audio, resample
from vocalgrad.dataset import load_rows
from vocalgrad.listeners import Request
from vocalgrad.listeners.whisper import WhisperListener, prompt_text
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig


def dataset_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    out = Path(tempfile.mkdtemp(prefix="bench-eval-")) / "ds"
    build(BuildConfig(n_test=2, n_train=0, tiers=("high",)), out, workers=os.cpu_count() or 1)
    return out


def requests_for(rows: list[dict], sr: int, variants: tuple[str, ...]) -> list[Request]:
    out = []
    for row in rows:
        audio, file_sr = load_audio(row["path"])
        clip = resample(audio, file_sr, sr)
        for variant in variants:
            prompt = build_prompt(row["category"], variant, item_id=row["item_id"])
            out.append(Request(row["item_id"], prompt, {row["item_id"]: clip}))
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@torch.inference_mode()
def one_at_a_time(listener: WhisperListener, requests: list[Request], max_new: int) -> None:
    """The published loop: feature extraction + `generate` with a text prompt, per clip."""
    for r in requests:
        feats = listener.feature_extractor(
            r.target_audio, sampling_rate=16000, return_tensors="pt"
        ).input_features
        prompt_ids = torch.tensor(listener.tokenizer.get_prompt_ids(prompt_text(r.prompt)))
        listener.model.generate(feats, prompt_ids=prompt_ids, max_new_tokens=max_new)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--dataset")
    args = parser.parse_args()

    rows = [r for r in load_rows(dataset_dir(args.dataset)) if r["direction"] != "constant"]
    rows = [rows[i] for i in np.linspace(0, len(rows) - 1, min(args.items, len(rows))).astype(int)]
    listener = WhisperListener("tiny.en", batch_size=args.batch_size)
    trimmed = WhisperListener("tiny.en+trimmed", batch_size=args.batch_size)
    both_orders = requests_for(rows, listener.sample_rate, ("default", "swapped"))
    single = requests_for(rows, listener.sample_rate, ("default",))
    listener.score_choices(both_orders[:2])  # warm-up: first-call allocations
    trimmed.score_choices(both_orders[:2])
    n = len(rows)
    padded_scores: list = []
    trimmed_scores: list = []
    t_choice = timed(lambda: padded_scores.extend(listener.score_choices(both_orders)))
    t_generate = timed(lambda: listener.generate(single, args.max_new_tokens))
    t_single = timed(lambda: one_at_a_time(listener, single, args.max_new_tokens))
    t_trim_choice = timed(lambda: trimmed_scores.extend(trimmed.score_choices(both_orders)))
    t_trim_generate = timed(lambda: trimmed.generate(single, args.max_new_tokens))
    seconds = np.mean([len(r.target_audio) / 16000 for r in single])
    print(
        f"whisper:tiny.en on CPU ({torch.get_num_threads()} threads), {n} items of {seconds:.1f} s "
        f"on average, batch size {args.batch_size}"
    )
    print(f"{'way':<56}{'seconds':>9}{'items/s':>10}")
    for name, secs in (
        ("choice scoring, batched, both option orders", t_choice),
        ("free-text generation, batched", t_generate),
        ("free-text generation, one at a time (published)", t_single),
        ("trimmed context: choice scoring, both option orders", t_trim_choice),
        ("trimmed context: free-text generation, batched", t_trim_generate),
    ):
        print(f"{name:<56}{secs:>9.2f}{n / secs:>10.2f}")
    print(f"choice batched / one-at-a-time generation: {t_single / t_choice:.2f}x (target >= 5x)")
    print(f"batched generation / one-at-a-time generation: {t_single / t_generate:.2f}x")
    print(
        f"trimmed / padded context, choice scoring: {t_choice / t_trim_choice:.2f}x (target >= "
        f"5x); generation: {t_generate / t_trim_generate:.2f}x"
    )
    truth = [r["direction"] for r in rows for _ in ("default", "swapped")]
    llr = {
        name: np.array([s["increase"] - s["decrease"] for s in scores])
        for name, scores in (("padded", padded_scores), ("trimmed", trimmed_scores))
    }
    shift = np.abs(llr["trimmed"] - llr["padded"])
    flips = np.mean(np.sign(llr["trimmed"]) != np.sign(llr["padded"]))
    acc = {
        k: np.mean([(v > 0) == (t == "increase") for v, t in zip(a, truth, strict=True)])
        for k, a in llr.items()
    }
    print(
        "trimmed vs padded answers: |change of log-likelihood ratio| median "
        f"{np.median(shift):.3f}, max {shift.max():.3f} nats (padded |ratio| median "
        f"{np.median(np.abs(llr['padded'])):.3f}); chosen option flips on {flips:.1%} of requests; "
        f"accuracy {acc['padded']:.3f} padded, {acc['trimmed']:.3f} trimmed"
    )


if __name__ == "__main__":
    main()

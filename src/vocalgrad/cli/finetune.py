"""`vocalgrad finetune DATASET --listener SPEC --train-dimensions D --method M`, wired in by
`add_parser`."""

from __future__ import annotations

import argparse

from vocalgrad.cli.options import add_deprecated_alias, csv_list


def cmd_finetune(args: argparse.Namespace) -> int:
    from vocalgrad.api import finetune
    from vocalgrad.evaluation.score import markdown

    def progress(step: int, loss: float) -> None:
        print(f"step {step}: loss {loss:.4f}", flush=True)

    run = finetune(
        args.dataset,
        args.listener,
        args.out,
        categories=args.train_categories,
        method=args.method,
        batch_size=args.batch_size,
        on_step=progress,
        lr=args.lr,
        epochs=args.epochs,
        batch_items=args.batch_items,
        micro_batch=args.micro_batch,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        lora_dropout=args.lora_dropout,
        seed=args.seed,
        checkpoint_every=args.checkpoint_every,
    )
    tuning = run.tuning
    adapter = run.path / "adapter"
    print(
        f"{run.manifest['listener']['listener']}: {tuning['steps']} steps on "
        f"{tuning['train_items']} items in "
        f"{tuning['wall_seconds']:.0f} s, loss {tuning['first_loss']:.4f} -> "
        f"{tuning['final_loss']:.4f}; "
        f"adapter in {adapter} (listener spec tuned:{adapter})"
    )
    print(markdown(run.summary))
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `finetune` on the main parser's sub-parsers."""
    from vocalgrad.remedies.config import DEFAULT_LR, TuneConfig

    d = TuneConfig(categories=("x",))
    p = subparsers.add_parser(
        "finetune",
        help="tune a listener on train dimensions (head, LoRA or full), then eval every one",
    )
    p.add_argument("dataset", help="a dataset folder with a train split")
    p.add_argument(
        "--listener", required=True, help="whisper:tiny.en, optionally +trimmed and +bf16 | hf:PATH"
    )
    train = p.add_mutually_exclusive_group(required=True)
    train.add_argument(
        "--train-dimensions",
        dest="train_categories",
        type=csv_list,
        metavar="DIMENSIONS",
        help="comma-separated dimensions to train on",
    )
    add_deprecated_alias(
        train, "--train-categories", "--train-dimensions", "train_categories", type=csv_list
    )
    p.add_argument("--method", default=d.method, choices=("head", "lora", "full"))
    p.add_argument(
        "--out", help="run folder (default runs/finetune/<listener>-<method>-<dimensions>)"
    )
    p.add_argument("--lr", type=float, help=f"learning rate (default {DEFAULT_LR})")
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument(
        "--batch-items",
        type=int,
        default=d.batch_items,
        help="items per optimizer step, each asked in both option orders (8 -> 16 prompts)",
    )
    p.add_argument(
        "--micro-batch", type=int, default=d.micro_batch, help="items per forward/backward pass"
    )
    p.add_argument("--lora-r", type=int, default=d.lora_r)
    p.add_argument("--lora-alpha", type=int, default=d.lora_alpha)
    p.add_argument("--lora-dropout", type=float, default=d.lora_dropout)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument(
        "--checkpoint-every", type=int, default=d.checkpoint_every, help="optimizer steps"
    )
    p.add_argument("--batch-size", type=int, default=16, help="evaluation batch size")
    p.set_defaults(func=cmd_finetune)
    return p

"""`vocalgrad probe DATASET --listener SPEC`: the sub-command, wired in by `add_parser`."""

from __future__ import annotations

import argparse
from pathlib import Path

from vocalgrad.cli.options import (
    add_dimensions,
    add_executor_options,
    add_listener_options,
    add_overwrite,
    executor_from_args,
    whole,
)
from vocalgrad.defaults import MAX_N_BOOT, N_BOOT


def cmd_probe(args: argparse.Namespace) -> int:
    from vocalgrad.api import default_run_folder, probe
    from vocalgrad.probing.report import markdown

    out = (
        Path(args.out)
        if args.out
        else Path("runs") / "probe" / default_run_folder(args.listener).name
    )
    with executor_from_args(args) as executor:
        summary = probe(
            args.dataset,
            args.listener,
            out,
            categories=args.categories or (),
            pooling=args.pooling,
            seeds=args.seeds,
            n_boot=args.n_boot,
            mlp=not args.no_mlp,
            random_control=not args.no_random,
            dsp_control=not args.no_dsp,
            batch_size=args.batch_size,
            threads=args.threads,
            results=args.results,
            train_from=args.train_from,
            cache=args.cache,
            executor=executor,
            listener_options=dict(args.listener_options),
            overwrite=args.overwrite,
        )
    print(markdown(summary).split("\n## ")[0])
    print(f"{summary['seconds']:.1f} s; tables, curves and items in {out}")
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `probe` on the main parser's sub-parsers."""
    p = subparsers.add_parser(
        "probe", help="layer-wise probes, controls, lens readout and diagnosis"
    )
    p.add_argument(
        "dataset", help="a dataset folder (ours or the official release layout) or hf:NAME[@SPLIT]"
    )
    p.add_argument(
        "--train-from",
        help="take the probes' train split from this build (for the official release, which has "
        "none; without it, grouped K-fold over the test split)",
    )
    add_listener_options(p, "whisper:tiny.en | hf:PATH (anything with hidden states)")
    p.add_argument("--results", help="a `vocalgrad eval` run folder: the model's actual answers")
    p.add_argument("--out", help="output folder (default runs/probe/<listener>)")
    add_dimensions(
        p,
        "comma-separated dimensions (default: all in the dataset)",
    )
    p.add_argument("--pooling", default="segments16", choices=("segments16", "halves", "mean"))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument(
        "--n-boot",
        type=whole(0, MAX_N_BOOT),
        default=N_BOOT,
        help=f"bootstrap resamples (default {N_BOOT})",
    )
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for the probe solvers (more: faster; MLP results then depend "
        "slightly on the thread count)",
    )
    p.add_argument("--cache", help="feature cache folder (default: $VOCALGRAD_CACHE/features)")
    p.add_argument("--no-mlp", action="store_true", help="skip the nonlinear probe")
    p.add_argument("--no-random", action="store_true", help="skip the random-weights control")
    p.add_argument("--no-dsp", action="store_true", help="skip the log-mel DSP reference")
    add_overwrite(p, "into an --out that holds something other than a probe's output")
    add_executor_options(
        p, "on Ray: listener actors extracting features (default: one per cluster CPU)"
    )
    p.set_defaults(func=cmd_probe)
    return p

"""Options and helpers shared by several `vocalgrad` commands."""

from __future__ import annotations

import argparse
import os


def csv_list(value: str) -> tuple[str, ...]:
    """A comma-separated option as a tuple of its non-empty items."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def executor_from_args(args: argparse.Namespace):
    """The executor the run's options ask for (local processes unless Ray is named)."""
    from vocalgrad.executors import make_executor

    return make_executor(args.executor, workers=args.workers, address=args.ray_address,
                         gpus_per_actor=getattr(args, "gpus_per_actor", None))


def add_executor_options(p: argparse.ArgumentParser, workers_help: str) -> None:
    """`--executor`, `--ray-address` and `--workers`, shared by build, eval and probe."""
    p.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local processes (default) or a Ray cluster (pip install 'vocalgrad[ray]')")
    p.add_argument("--ray-address", default=os.environ.get("RAY_ADDRESS"),
                   help="HOST:PORT or ray://HOST:PORT of a running Ray cluster (implies --executor ray; "
                   "default $RAY_ADDRESS)")
    p.add_argument("--workers", type=int, help=workers_help)

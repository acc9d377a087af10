"""Options and helpers shared by several `vocalgrad` commands."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable


def csv_list(value: str) -> tuple[str, ...]:
    """A comma-separated option as a tuple of its non-empty items."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def whole(low: int = 0) -> Callable[[str], int]:
    """An argparse type: a whole number >= `low`; anything else is a one-line usage error
    naming the value (argparse adds the option's name)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a whole number (expected >= {low})"
            ) from None
        if value < low:
            raise argparse.ArgumentTypeError(
                f"{value} is below {low}; expected a whole number >= {low}"
            )
        return value

    parse.__name__ = f"whole number >= {low}"
    return parse


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds > 0")
    return value


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
    p.add_argument("--workers", type=whole(1), help=workers_help)

"""The `vocalgrad` command: sub-commands mirror the pipeline, one module per command group."""

from __future__ import annotations

import argparse
import sys

from vocalgrad._version import __version__
from vocalgrad.cli import data, evaluate, export, finetune, human, listing, probe, report
from vocalgrad.cli.options import missing_extra
from vocalgrad.errors import VocalgradError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vocalgrad", description=__doc__)
    p.add_argument("--version", action="version", version=f"vocalgrad {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    for group in (data, evaluate, report, probe, finetune, human, export, listing):
        group.add_parsers(sub)
    return p


def _resolve_datasets(args: argparse.Namespace) -> None:
    """Every dataset argument may be `hf:NAME[@SPLIT]`: turn it into a local folder once,
    here, so each command takes a path."""
    from vocalgrad.dataset import resolve

    for name in ("dataset", "train_from"):
        value = getattr(args, name, None)
        if isinstance(value, str) and value.startswith("hf:"):
            setattr(args, name, str(resolve(value)))


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        _resolve_datasets(args)
        return args.func(args)
    except VocalgradError as err:
        if args.debug:
            raise
        print(f"vocalgrad: error: {err}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as err:
        hint = missing_extra(err)
        if hint is None or args.debug:
            raise
        print(f"vocalgrad: error: {hint}", file=sys.stderr)
        return 1


"""Options and helpers shared by several `vocalgrad` commands."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable

EXIT_AUDIT = 4
"""Exit status of `build` and `audit` when the shortcut audit fails (the dataset is written)."""

AUDIT_FAILURE_HELP = (
    "exit 0 when the shortcut audit fails, for an exploratory build (default: exit 4, "
    "naming the failing dimensions)"
)


def audit_failures(report: dict) -> list[str]:
    """One ``category (reason; reason)`` entry per category that fails the shortcut audit.

    Parameters
    ----------
    report : dict
        An audit report (``per_category`` with ``passes`` and ``reasons``).

    Returns
    -------
    list of str
        Empty when every category passes.
    """
    return [
        f"{category} ({'; '.join(r.get('reasons') or ['failed'])})"
        for category, r in report.get("per_category", {}).items()
        if r.get("passes") is False
    ]


def audit_status(report: dict, allow_failure: bool) -> int:
    """0, or `EXIT_AUDIT` after one line on stderr naming the failing dimensions.

    A failing category is a benchmark that can be answered without hearing the change: a
    pipeline must be able to stop on it, and an exploratory build may go on
    (`allow_failure`), with the same line printed as a warning.

    Parameters
    ----------
    report : dict
        The audit report.
    allow_failure : bool
        ``--allow-audit-failure``: report the failure, exit 0.

    Returns
    -------
    int
        The command's exit status.
    """
    failing = audit_failures(report)
    if not failing:
        return 0
    total = len(report.get("per_category", {}))
    line = f"shortcut audit failed for {len(failing)} of {total} dimensions: " + ", ".join(failing)
    return failed_audit_status(line, allow_failure)


def failed_audit_status(line: str, allow_failure: bool, written: str = "the dataset is") -> int:
    """One stderr line for a failed audit, and the exit status: `EXIT_AUDIT`, or a warning and
    0 with ``--allow-audit-failure``. `written` names what is on disk all the same ("the
    datasets are" for a ladder)."""
    if allow_failure:
        print(f"vocalgrad: warning: {line} (--allow-audit-failure: exit 0)", file=sys.stderr)
        return 0
    them = "them" if written.endswith("are") else "it"
    print(
        f"vocalgrad: error: {line}; {written} written: rerun with --allow-audit-failure "
        f"to accept {them} for exploration",
        file=sys.stderr,
    )
    return EXIT_AUDIT


def csv_list(value: str) -> tuple[str, ...]:
    """A comma-separated option as a tuple of its non-empty items."""
    return tuple(v.strip() for v in value.split(",") if v.strip())


def whole(low: int = 0, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number >= `low` (and <= `high`, where given); anything else
    is a one-line usage error naming the value (argparse adds the option's name)."""

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
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{value:,} is above the limit of {high:,}")
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

    return make_executor(
        args.executor,
        workers=args.workers,
        address=args.ray_address,
        gpus_per_actor=getattr(args, "gpus_per_actor", None),
    )


def add_executor_options(p: argparse.ArgumentParser, workers_help: str) -> None:
    """`--executor`, `--ray-address` and `--workers`, shared by build, eval and probe."""
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local processes (default) or a Ray cluster (pip install 'vocalgrad[ray]')",
    )
    p.add_argument(
        "--ray-address",
        default=os.environ.get("RAY_ADDRESS"),
        help="HOST:PORT or ray://HOST:PORT of a running Ray cluster (implies --executor ray; "
        "default $RAY_ADDRESS)",
    )
    p.add_argument("--workers", type=whole(1), help=workers_help)


class _DeprecatedAlias(argparse.Action):
    """An old spelling that still works for one release, with a warning naming the new one."""

    def __init__(self, option_strings: list[str], dest: str, new: str, **kwargs) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(
            f"vocalgrad: warning: {option_string} is deprecated and goes in the next release; "
            f"use {self.new}",
            file=sys.stderr,
        )
        flag = True if self.const is None else self.const
        setattr(namespace, self.dest, flag if self.nargs == 0 else values)


def add_dimensions(parser: argparse.ArgumentParser, help: str) -> None:
    """``--dimensions A,B`` (stored as ``categories``, the on-disk name) and its deprecated
    spelling ``--categories``, as every command that narrows dimensions takes them.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    help : str
        What the option selects and its default, for ``--help``.
    """
    parser.add_argument(
        "--dimensions", dest="categories", type=csv_list, metavar="DIMENSIONS", help=help
    )
    add_deprecated_alias(parser, "--categories", "--dimensions", "categories", type=csv_list)


def add_deprecated_alias(
    p: argparse.ArgumentParser, old: str, new: str, dest: str, **kwargs
) -> None:
    """Accept `old` as a hidden alias of the option `new` (same `dest`)."""
    p.add_argument(
        old, dest=dest, action=_DeprecatedAlias, new=new, help=argparse.SUPPRESS, **kwargs
    )


def add_overwrite(p: argparse.ArgumentParser, what: str) -> None:
    """`--overwrite`: write the output where it would replace something else (`what`)."""
    p.add_argument(
        "--overwrite",
        action="store_true",
        help=f"write {what} (refused without it: the output never replaces what it did not write)",
    )


def _option_value(text: str) -> object:
    """`true`/`false`/`none`, an int, a float, or the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def key_value(text: str) -> tuple[str, object]:
    """`KEY=VALUE` -> (key, typed value); keys use underscores (`base-url` == `base_url`)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE, e.g. device=cuda")
    return key.strip().replace("-", "_"), _option_value(value.strip())


def add_listener_options(p: argparse.ArgumentParser, spec_help: str) -> None:
    """`--listener SPEC` and repeatable `-O KEY=VALUE` options for the listener it names."""
    p.add_argument("--listener", required=True, help=spec_help + " (`vocalgrad list listeners`)")
    p.add_argument(
        "-O",
        "--listener-option",
        dest="listener_options",
        type=key_value,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of the listener, repeatable: e.g. -O device=cuda -O dtype=bfloat16 "
        "(hf:), -O context=trimmed (whisper:), -O base_url=URL -O logprobs=true "
        "-O timeout=30 (openai:)",
    )


# The optional extra that brings each heavy module (pyproject.toml's optional-dependencies).
EXTRAS = {
    "torch": "models",
    "transformers": "models",
    "safetensors": "models",
    "tokenizers": "models",
    "ctranslate2": "models",
    "peft": "tune",
    "ray": "ray",
    "httpx": "api",
    "fastapi": "human",
    "uvicorn": "human",
}


def missing_extra(err: ModuleNotFoundError) -> str | None:
    """One line naming the extra to install, when `err` is a heavy optional module's absence."""
    module = (err.name or "").split(".")[0]
    if module not in EXTRAS:
        return None
    return (
        f"this command needs {module}, which the core install leaves out: "
        f"pip install 'vocalgrad[{EXTRAS[module]}]'"
    )

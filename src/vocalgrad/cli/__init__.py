"""The `vocalgrad` command: sub-commands mirror the pipeline, one module per command group."""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import sys
import warnings
from typing import TextIO

from vocalgrad._version import __version__
from vocalgrad.cli import data, evaluate, export, finetune, human, listing, probe, report
from vocalgrad.cli.options import missing_extra
from vocalgrad.errors import VocalgradError


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vocalgrad",
        description=__doc__,
        epilog="exit status: 0 done (every item answered), 1 nothing answered, a failed check "
        "(verify) or an OS error (permission, full disk), 2 bad input or usage, 3 some items "
        "unanswered (rerun to ask them again), 4 the shortcut audit failed (build, audit: the "
        "dataset is written; --allow-audit-failure exits 0), 130 interrupted (rerun to resume)",
    )
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


EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PARTIAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
"""Exit codes: every item answered; no item answered, a failed check (a clip `verify` finds
disagreeing or unreadable, a category the audit fails), or an OS error (permission, full
disk); bad input or usage (argparse's code too); some items unanswered (rerun to ask them
again); stopped by Ctrl-C. `options.EXIT_AUDIT` (4): the shortcut audit failed."""

_OS_FIXES = {
    errno.EACCES: "no permission: choose a folder you can write or fix its permissions",
    errno.EPERM: "not permitted: choose a folder you can write or fix its permissions",
    errno.EROFS: "read-only file system: choose a writable --out",
    errno.ENOSPC: "disk full: free some space (or choose another --out) and rerun the same "
    "command, which resumes",
    errno.EDQUOT: "disk quota exceeded: free some space and rerun the same command, which resumes",
    errno.EEXIST: "a file is in the way: choose another path or move the file",
    errno.ENOTDIR: "a file is in the way where a folder is needed: choose another path",
    errno.EISDIR: "a folder is in the way where a file is needed: choose another path",
    errno.ENOENT: "no such file or folder: check the path",
}


def os_error_line(err: OSError) -> str:
    """One line for an OS error: the path, what went wrong and what to do."""
    path = err.filename if err.filename is not None else "?"
    fix = _OS_FIXES.get(err.errno or 0, "check the path and try again")
    return f"{path}: {err.strerror or err}; {fix}"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.debug:
        warnings.showwarning = _show_warning
    try:
        _resolve_datasets(args)
        return args.func(args)
    except VocalgradError as err:
        if args.debug:
            raise
        print(f"vocalgrad: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as err:
        hint = missing_extra(err)
        if hint is None or args.debug:
            raise
        print(f"vocalgrad: error: {hint}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as err:
        if args.debug:
            raise
        print(f"vocalgrad: error: {os_error_line(err)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        if args.debug:
            raise
        command = shlex.join(["vocalgrad", *(sys.argv[1:] if argv is None else argv)])
        print(
            f"vocalgrad: interrupted; finished work is kept: rerun `{command}` to resume",
            file=sys.stderr,
            flush=True,
        )
        if argv is None:  # the console command, not a caller in this process
            _leave_now()
        return EXIT_INTERRUPTED


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A warning vocalgrad raises reads as one line, like its errors ("vocalgrad: warning:
    ..."); other packages' warnings keep Python's form, which names where they come from."""
    if os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
        print(f"vocalgrad: warning: {message}", file=file or sys.stderr)
        return
    (file or sys.stderr).write(warnings.formatwarning(message, category, filename, lineno, line))


def _leave_now() -> None:
    """End the process at once after Ctrl-C. Everything finished is on disk already (rows
    are fsynced per batch, files written by rename); what is left would only delay: worker
    threads blocked on a stalled server until their timeout, and tearing down a large
    module graph (seconds on a busy machine)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)

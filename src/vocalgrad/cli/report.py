"""`vocalgrad report`: one self-contained HTML (or markdown) report."""

from __future__ import annotations

import argparse
import shlex
import sys

from vocalgrad.cli.options import add_deprecated_alias, add_overwrite, whole
from vocalgrad.defaults import MAX_N_BOOT, N_BOOT


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("report", help="one self-contained HTML (or markdown) report")
    r.add_argument("results", nargs="+", help="run folders from eval / human export")
    r.add_argument("--out", default="report.html", help="the report file (default report.html)")
    r.add_argument("--output-format", default="html", choices=("html", "md"))
    add_deprecated_alias(r, "--format", "--output-format", "output_format", choices=("html", "md"))
    r.add_argument("--dataset", help="dataset folder for the card section (default: from the runs)")
    r.add_argument(
        "--allow-dataset-mismatch",
        action="store_true",
        help="show --dataset's card even when the runs were evaluated on another dataset "
        "(the section says so)",
    )
    r.add_argument("--probe", action="append", default=[], help="probe output folder (repeatable)")
    r.add_argument(
        "--n-boot",
        type=whole(0, MAX_N_BOOT),
        default=N_BOOT,
        help=f"bootstrap resamples (default {N_BOOT})",
    )
    add_overwrite(r, "the report over a file that is not a report, or inside a dataset it reads")
    r.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from vocalgrad.api import report

    out = report(
        args.results,
        args.out,
        dataset=args.dataset,
        probes=args.probe,
        output_format=args.output_format,
        n_boot=args.n_boot,
        command=shlex.join(["vocalgrad", *sys.argv[1:]]),
        allow_dataset_mismatch=args.allow_dataset_mismatch,
        overwrite=args.overwrite,
    )
    print(f"report: {out}")
    return 0

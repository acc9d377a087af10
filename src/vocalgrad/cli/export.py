"""`vocalgrad export ...`: hand a dataset or a run to the harnesses researchers use.

vocalgrad export lmms-eval DATASET --out DIR   lmms-eval tasks (run with --include_path DIR)
vocalgrad export lm-eval RUN --out DIR         a run's scores in lm-evaluation-harness' layout
vocalgrad export inspect-run LOG --out RUN     an inspect-ai log as a run (for score, report)
"""

from __future__ import annotations

import argparse

from vocalgrad.cli.options import add_dimensions, add_overwrite, csv_list
from vocalgrad.files import HARNESS_RUN, LM_EVAL, LMMS_TASKS, claim_output


def cmd_lmms_eval(args: argparse.Namespace) -> int:
    from vocalgrad.harness.export import export_lmms_eval

    claim_output(args.out, LMMS_TASKS, reads=[args.dataset], overwrite=args.overwrite)
    done = export_lmms_eval(
        args.dataset,
        args.out,
        variants=args.variants or (),
        categories=args.categories or (),
        tiers=args.tiers or (),
        split=args.split,
    )
    print(f"wrote {len(done.tasks)} lmms-eval task(s) to {args.out}: {', '.join(done.tasks)}")
    for category, why in done.skipped.items():
        print(f"  not exported: {category}: {why}")
    print(f"run: lmms-eval --include_path {args.out} --tasks {done.tasks[0]} --model MODEL ...")
    return 0


def cmd_lm_eval(args: argparse.Namespace) -> int:
    from vocalgrad.harness.lm_eval_layout import write_lm_eval_layout

    claim_output(args.out, LM_EVAL, overwrite=args.overwrite)
    paths = write_lm_eval_layout(args.run, args.out, listener=args.listener)
    print("\n".join(str(p) for p in paths))
    return 0


def cmd_inspect_run(args: argparse.Namespace) -> int:
    claim_output(args.out, HARNESS_RUN, overwrite=args.overwrite)
    from vocalgrad.harness.inspect_tasks import log_to_run

    run = log_to_run(args.log, args.out)
    (run / "summary.json").unlink(missing_ok=True)  # it scored the answers just replaced
    print(f"wrote {run}; score it with `vocalgrad score {args.out}`")
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> None:
    """The `export` command group."""
    export = subparsers.add_parser(
        "export", help="hand a dataset or a run to lmms-eval, lm-eval or inspect-ai"
    )
    sub = export.add_subparsers(dest="target", required=True)

    lmms = sub.add_parser("lmms-eval", help="write lmms-eval tasks for a dataset")
    lmms.add_argument(
        "dataset", help="a dataset folder (ours or the official release layout) or hf:NAME[@SPLIT]"
    )
    lmms.add_argument(
        "--out", required=True, help="task folder to pass to lmms-eval --include_path"
    )
    lmms.add_argument(
        "--variants",
        type=csv_list,
        help="prompt variants (default: every one that asks a direction)",
    )
    add_dimensions(
        lmms,
        "comma-separated (default: all)",
    )
    lmms.add_argument("--tiers", type=csv_list)
    lmms.add_argument("--split", default="test")
    add_overwrite(lmms, "into an --out that holds something other than lmms-eval tasks")
    lmms.set_defaults(func=cmd_lmms_eval)

    lm = sub.add_parser(
        "lm-eval", help="write a run's scores as lm-evaluation-harness results and samples"
    )
    lm.add_argument("run", help="a run folder (vocalgrad eval, human export or export inspect-run)")
    lm.add_argument("--out", required=True)
    lm.add_argument("--listener", help="which listener, when the run holds several")
    add_overwrite(lm, "into an --out that holds something other than lm-eval results")
    lm.set_defaults(func=cmd_lm_eval)

    ins = sub.add_parser(
        "inspect-run", help="turn an inspect-ai log of a vocalgrad task into a run folder"
    )
    ins.add_argument("log", help="an inspect .eval or .json log")
    ins.add_argument("--out", required=True, help="run folder to write")
    add_overwrite(ins, "into an --out that holds something other than an inspect run")
    ins.set_defaults(func=cmd_inspect_run)

"""`vocalgrad eval | score`: asking a listener every item, and scoring runs."""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from vocalgrad.cli.options import (
    add_deprecated_alias,
    add_dimensions,
    add_executor_options,
    add_listener_options,
    csv_list,
    executor_from_args,
    positive_seconds,
    whole,
)
from vocalgrad.defaults import MAX_N_BOOT, N_BOOT
from vocalgrad.errors import ConfigError


def add_parsers(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("eval", help="ask a listener every item of a dataset (resumable)")
    e.add_argument(
        "dataset", help="a dataset folder (ours or the official release layout) or hf:NAME[@SPLIT]"
    )
    add_listener_options(
        e, "baseline:ideal | whisper:tiny.en | hf:PATH | openai:MODEL | tuned:DIR | ..."
    )
    e.add_argument("--out", help="run folder (default runs/<listener>)")
    e.add_argument("--mode", default="auto", choices=("auto", "choice", "generate", "both"))
    e.add_argument(
        "--variants",
        type=csv_list,
        default=("default",),
        help="prompt variants, e.g. default,clip,ternary",
    )
    e.add_argument("--controls", type=csv_list, default=(), help="reversed,silence,text_only")
    e.add_argument("--split", default="test")
    add_dimensions(
        e,
        "comma-separated dimensions, among the dataset's own (default: all of them)",
    )
    e.add_argument(
        "--limit",
        type=whole(1),
        help="ask at most this many items, chosen to score as the whole split would: shared "
        "equally over dimensions, increase and decrease twins together, spread over sources, "
        "tiers and curves (printed, and recorded in the manifest's `subset`; a limit that "
        "cannot be balanced is said so)",
    )
    e.add_argument("--batch-size", type=whole(1), default=16)
    e.add_argument(
        "--few-shot", type=whole(0), default=0, help="examples per label from the train split"
    )
    e.add_argument(
        "--retry-errors",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="ask again the items whose last answer was an error (default: yes)",
    )
    e.add_argument("--audio-first", action="store_true", help="play the audio before the question")
    e.add_argument(
        "--max-new-tokens",
        type=whole(1),
        default=16,
        help="generate mode: the longest answer a listener may write, in tokens",
    )
    e.add_argument(
        "--both-orders",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="choice mode: average the log-likelihoods over both option orders (default: yes)",
    )
    e.add_argument("--seed", type=whole(0), default=0, help="seed of the few-shot examples")
    e.add_argument(
        "--no-cache",
        action="store_true",
        help="ask the listener afresh instead of taking answers from the answer cache, and "
        "replace the cached ones (e.g. a model redeployed under the same name)",
    )
    add_deprecated_alias(e, "--base-url", "-O base_url=URL", "base_url")
    e.add_argument(
        "--timeout",
        type=positive_seconds,
        help="for openai: listeners, seconds one request may wait for the server (default 60)",
    )
    e.add_argument(
        "--max-retries",
        type=whole(0),
        help="for openai: listeners, retries of a failed request (default 5)",
    )
    e.add_argument(
        "--adaptive",
        choices=("quest", "staircase"),
        help="estimate a threshold per dimension with few trials, rendering clips on demand",
    )
    e.add_argument(
        "--max-trials", type=whole(1), default=40, help="trials per dimension for --adaptive"
    )
    add_executor_options(
        e,
        "listener copies answering batches: 1 locally (default); on Ray, "
        "actors (default: one per cluster CPU, or per GPU for model listeners)",
    )
    e.add_argument(
        "--gpus-per-actor",
        type=float,
        help="on Ray: GPUs each listener actor reserves (default: 1 for model listeners "
        "when the cluster has GPUs, else 0)",
    )
    e.set_defaults(func=cmd_eval)

    sc = sub.add_parser(
        "score",
        help="tables with clustered CIs, d', criterion and controls",
        description="Score run folders: one table per run. To compare two runs item by item "
        "(a paired difference with its CI and tests), add --compare.",
        epilog="example: vocalgrad score runs/a runs/b --compare",
    )
    sc.add_argument("runs", nargs="+", help="run folders written by `vocalgrad eval`")
    sc.add_argument(
        "--by",
        type=csv_list,
        default=("category",),
        help="result fields to group each table by, comma-separated (default: category), e.g. "
        "category,tier; others: curve, direction, magnitude, speaker_id, source_id",
    )
    sc.add_argument("--cluster", default="source_id", choices=("source_id", "speaker_id", "item"))
    sc.add_argument(
        "--n-boot",
        type=whole(0, MAX_N_BOOT),
        default=N_BOOT,
        help=f"bootstrap resamples (default {N_BOOT})",
    )
    sc.add_argument("--output-format", default="md", choices=("md", "csv"))
    add_deprecated_alias(sc, "--format", "--output-format", "output_format", choices=("md", "csv"))
    sc.add_argument(
        "--compare",
        action="store_true",
        help="with two runs: also their paired comparison on the items both answered (the "
        "difference in accuracy with a CI clustered by source, McNemar and cluster "
        "permutation tests)",
    )
    sc.set_defaults(func=cmd_score)


def count_line(listener_id: str, counts: Mapping, out: Path) -> str:
    """What one eval call did, in one line: how many were asked afresh and how many answered
    from the answer cache (a cached answer asks nobody, so "asked" counts only the fresh)."""
    cached = counts["from_cache"]
    fresh = counts["answered"] - cached
    asked = f"asked {fresh} afresh and {cached} answered from cache" if cached else f"asked {fresh}"
    return (
        f"{listener_id}: {asked} ({counts['skipped_done']} already done, {counts['retried']} "
        f"asked again after an error, {counts['errors']} errors) in {counts['seconds']:.1f} s "
        f"-> {out}"
    )


def cmd_eval(args: argparse.Namespace) -> int:
    from vocalgrad.executors import ListenerSpec

    options = dict(args.listener_options)
    if getattr(args, "base_url", None):
        options["base_url"] = args.base_url
    for name in ("timeout", "max_retries"):
        if getattr(args, name) is not None:
            if not args.listener.startswith("openai:"):
                raise ConfigError(f"--{name.replace('_', '-')} applies to openai: listeners only")
            options[name] = getattr(args, name)
    if args.adaptive and (args.executor == "ray" or args.ray_address):
        raise ConfigError(
            "--adaptive asks one trial at a time and runs locally; drop --executor/--ray-address"
        )
    from vocalgrad.evaluation.ladder import is_ladder

    if is_ladder(args.dataset):
        return _eval_ladder(args, options)
    with executor_from_args(args) as executor:
        listener = executor.listener(ListenerSpec(args.listener, args.dataset, options))
        note = in_flight_note(listener, args.batch_size, args.mode)
        if note:
            print(f"vocalgrad: note: {note}", file=sys.stderr)
        _warn_audit_failed(args.dataset)
        return _eval(args, listener, executor)


def _warn_audit_failed(dataset: str) -> None:
    """One stderr line before asking a dataset whose shortcut audit failed."""
    from vocalgrad.evaluation.evaluate import audit_failed

    if failed := audit_failed(dataset):
        print(
            f"vocalgrad: warning: {dataset} failed its shortcut audit (dims "
            f"{', '.join(failed)}): a listener may score above chance without hearing the "
            "change",
            file=sys.stderr,
        )


def _eval_ladder(args: argparse.Namespace, options: dict) -> int:
    """`vocalgrad eval LADDER`: every rung into OUT/<rung>/, one line per rung."""
    from vocalgrad.api import evaluate_ladder
    from vocalgrad.evaluation.ladder import INDEX

    if args.adaptive:
        raise ConfigError("--adaptive asks one dataset; give a rung's folder, not a ladder")
    if args.out is None:
        raise ConfigError("a ladder is asked into a folder of runs, one per rung: give --out")
    if tuple(args.variants) != ("default",):
        print(
            f"note: each rung is asked with its own prompt variants; --variants "
            f"{','.join(args.variants)} is not used",
            file=sys.stderr,
        )
    fields = {k: v for k, v in vars(eval_config_from(args)).items() if k != "variants"}

    def progress(rung: str, what: str) -> None:
        print(f"  {rung}: {what}", flush=True)

    print(f"{args.listener}: asking the ladder {args.dataset} -> {args.out}", flush=True)
    with executor_from_args(args) as executor:
        index = evaluate_ladder(
            args.dataset,
            args.listener,
            args.out,
            retry_errors=args.retry_errors,
            executor=executor,
            listener_options=options,
            use_cache=not args.no_cache,
            progress=progress,
            **fields,
        )
    asked = [e for e in index["rungs"] if "counts" in e]
    failed = sum(e["counts"]["failed"] for e in asked)
    total = sum(e["counts"]["total"] for e in asked)
    skipped = len(index["rungs"]) - len(asked)
    print(
        f"{len(asked)} of {len(index['rungs'])} rungs asked ({skipped} skipped, "
        f"{failed} of {total} items without an answer); index: {Path(args.out) / INDEX}"
    )
    if not asked:
        return 1
    return run_status({"failed": failed, "total": total})


def eval_config_from(args: argparse.Namespace):
    """The `EvalConfig` the parsed `vocalgrad eval` options ask for: every field has an option
    of the same name (``--max-new-tokens`` for ``max_new_tokens``)."""
    from vocalgrad.api import EvalConfig, eval_config

    fields = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(EvalConfig)
        if getattr(args, f.name, None) is not None
    }
    return eval_config(**fields)


def in_flight_note(listener, batch_size: int, mode: str) -> str | None:
    """Say so when a listener's `concurrency` cannot be reached: the runner hands it one
    batch at a time, so at most a batch's requests are in flight (--batch-size items, each
    asked in both option orders in choice mode).

    Parameters
    ----------
    listener : Listener
        The listener a run asks (one with a `concurrency` attribute, e.g. `openai:`).
    batch_size : int
        ``--batch-size``.
    mode : str
        ``--mode``.

    Returns
    -------
    str or None
        The note, or None when the concurrency can be reached.
    """
    concurrency = getattr(listener, "concurrency", None)
    if not isinstance(concurrency, int):
        return None
    choice = mode in ("choice", "both") or (mode == "auto" and listener.can_score)
    per_batch = batch_size * (2 if choice else 1)
    if concurrency <= per_batch:
        return None
    return (
        f"{listener.listener_id} keeps at most {per_batch} requests in flight, not its "
        f"concurrency {concurrency}: a batch holds --batch-size {batch_size} items"
        + (", each asked in both option orders" if choice else "")
        + f"; use --batch-size {-(-concurrency // (2 if choice else 1))} to reach it"
    )


def _eval(args: argparse.Namespace, listener, executor) -> int:
    from vocalgrad.api import default_run_folder, evaluate
    from vocalgrad.evaluation.score import markdown
    from vocalgrad.sources import default_cache_dir

    out = Path(args.out) if args.out else default_run_folder(args.listener)
    if args.adaptive:
        from vocalgrad.evaluation.evaluate_adaptive import describe, evaluate_adaptive
        from vocalgrad.files import ADAPTIVE_RUN, claim_output

        claim_output(out, ADAPTIVE_RUN, reads=[args.dataset], overwrite=None)
        results = evaluate_adaptive(
            args.dataset,
            listener,
            out,
            args.categories or (),
            method=args.adaptive,
            max_trials=args.max_trials,
        )
        print(f"{listener.listener_id}: adaptive ({args.adaptive}) thresholds -> {out}")
        for result in results:
            print("  " + describe(result))
        return 0
    run = evaluate(
        args.dataset,
        listener,
        out,
        eval_config_from(args),
        retry_errors=args.retry_errors,
        executor=executor,
        use_cache=not args.no_cache,
    )
    counts = run.counts
    subset = counts.get("subset")
    if subset and subset["balanced"]:  # an unbalanced one was a warning before the run
        from vocalgrad.evaluation.subset import describe

        print(describe(subset))
    print(count_line(listener.listener_id, counts, out))
    if counts["from_cache"]:
        print(
            f"  the cache: {default_cache_dir() / 'answers.sqlite'} (answers given before to the "
            "same question by the same listener); --no-cache asks afresh"
        )
    if counts.get("usage") is not None:
        print(usage_line(listener.listener_id, counts["usage"], out))
    if counts["failed"]:
        print(
            f"{counts['failed']} of {counts['total']} items have no answer; fix the cause and "
            f"rerun the same command to ask them again. Why (each item's error is in "
            f"{out / 'results.jsonl'}):"
        )
        for reason, n in counts.get("failure_reasons", []):
            print(f"  {n} item(s): {reason}")
    if counts["failed"] < counts["total"]:
        print(markdown(run.summary), flush=True)
        if subset and not subset["balanced"]:
            print(
                "vocalgrad: warning: the scores above rest on an unbalanced --limit subset: "
                + "; ".join(subset["problems"]),
                file=sys.stderr,
            )
    return run_status(counts)


def usage_line(listener_id: str, usage: dict, out: Path) -> str:
    """What this call's answers cost: requests, tokens and, where prices were given, USD.

    Parameters
    ----------
    listener_id : str
        Who answered.
    usage : dict
        The call's tally (`Listener.usage` growth): counts, and ``cost_usd`` or None.
    out : Path
        The run folder, whose manifest keeps the total over every call.

    Returns
    -------
    str
        One line for the console.
    """
    cost = usage.get("cost_usd")
    paid = (
        f"cost ${cost:.4f} at the prices given"
        if cost is not None
        else "no cost (give prices: -O input_price_per_m=... -O output_price_per_m=... "
        "-O audio_input_price_per_m=..., USD per million tokens)"
    )
    return (
        f"{listener_id}: {usage.get('requests', 0)} requests ({usage.get('retries', 0)} "
        f"retries), {usage.get('prompt_tokens', 0)} prompt tokens "
        f"({usage.get('audio_tokens', 0)} audio), {usage.get('completion_tokens', 0)} "
        f"completion tokens, {paid}; the run's total is `usage` in {out / 'manifest.json'}"
    )


def run_status(counts: dict) -> int:
    """The exit code of an eval: 0 every item answered, 1 none, 3 some (partial)."""
    if not counts["failed"]:
        return 0
    return 1 if counts["failed"] == counts["total"] else 3


def cmd_score(args: argparse.Namespace) -> int:
    from vocalgrad.api import score
    from vocalgrad.evaluation.score import (
        compare_runs,
        comparison_text,
        markdown,
        to_csv,
        write_summary,
    )

    if args.compare and len(args.runs) != 2:
        raise ConfigError(f"--compare needs exactly two runs, got {len(args.runs)}")
    for run in args.runs:
        summary = score(
            run,
            by=args.by,
            cluster=None if args.cluster == "item" else args.cluster,
            n_boot=args.n_boot,
            write=False,
        )
        print(to_csv(summary) if args.output_format == "csv" else markdown(summary), flush=True)
        write_summary(run, summary)  # after printing: a read-only run still shows its table
    if args.compare:
        print(comparison_text(compare_runs(*args.runs, cluster=args.cluster)))
    elif len(args.runs) == 2:
        print(
            "hint: to compare these two runs item by item (a paired difference with its CI), "
            f"add --compare: {shlex.join(['vocalgrad', 'score', *args.runs, '--compare'])}",
            file=sys.stderr,  # not in a CSV on stdout
        )
    return 0

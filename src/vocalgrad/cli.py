"""The `vocalgrad` command: sub-commands mirror the pipeline."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections import Counter
from pathlib import Path

from vocalgrad import __version__
from vocalgrad.errors import ConfigError, VocalgradError


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _executor(args: argparse.Namespace):
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


def cmd_build(args: argparse.Namespace) -> int:
    from vocalgrad.build import build
    from vocalgrad.config import load_config

    config = load_config(
        args.config,
        protocol=args.protocol,
        source=args.source,
        categories=args.categories,
        tiers=args.tiers,
        curves=args.curves,
        n_test=args.n_test,
        n_train=args.n_train,
        sample_rate=args.sample_rate,
        seed=args.seed,
        speaker_pattern=args.speaker_pattern,
        include_constant=False if args.no_constant else None,
        design=args.design,
        levels=args.levels,
        format=args.format,
    )
    with _executor(args) as executor:
        report = build(config, args.out, workers=min(executor.workers, os.cpu_count() or 1),
                       overwrite=args.overwrite, audit=not args.no_audit, executor=executor)
    print(f"wrote {report['clips_kept']} clips to {args.out} in {report['seconds']:.1f} s "
          f"({report['clips_dropped']} dropped after verification, "
          f"{len(report['refused_conditions'])} refused conditions, "
          f"{len(report['skipped_sources'])} skipped sources)")
    for r in report["refused_conditions"]:
        print(f"  refused {r['category']} {r['tier']}: {r['reason']}")
    for s in report["skipped_sources"]:
        print(f"  skipped {s['source_id']}: {s['reason']}")
    failed: dict[str, list[str]] = {}
    for e in report["render_errors"]:
        failed.setdefault(e["category"], []).append(e["failed"])
    for category, messages in failed.items():
        print(f"  could not render {len(messages)} {category} clip(s), left out with their twins: {messages[0]}")
    print("verification agreement: " + ", ".join(f"{k} {v:.1%}" for k, v in report["verification_agreement"].items()))
    refused = {k: v["refused_inaudible"] for k, v in report["per_category"].items() if v["refused_inaudible"]}
    if refused:
        print("refused as inaudible: " + ", ".join(f"{k} {v}" for k, v in refused.items()))
    if "shortcut_audit" in report:
        from vocalgrad.stimuli.audit import format_audit

        print(format_audit(report["shortcut_audit"]))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from vocalgrad.stimuli.verify import format_report, verify_dataset

    report = verify_dataset(args.dataset, limit=args.limit)
    print(format_report(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from vocalgrad.stimuli.audit import audit_dataset, format_audit

    report = audit_dataset(args.dataset, workers=args.workers)
    print(format_audit(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    failing = [c for c, r in report["per_category"].items() if r["passes"] is False]
    for category in failing:
        print(f"FAIL {category}: {'; '.join(report['per_category'][category]['reasons'])}")
    if failing:
        print(f"shortcut audit failed for {len(failing)} of {len(report['per_category'])} categories")
        return 1
    print("shortcut audit passed: no label is recoverable from cues other than the change over time")
    return 0


def cmd_sources(args: argparse.Namespace) -> int:
    from vocalgrad.sources import resolve_sources

    sources = resolve_sources(args.spec, speaker_pattern=args.speaker_pattern)
    speakers = Counter(s.speaker_id for s in sources)
    genders = Counter(s.gender or "?" for s in sources)
    texts = {s.text_id for s in sources}
    print(f"{len(sources)} sources, {len(speakers)} speakers, {len(texts)} distinct texts, "
          f"gender: {dict(genders)}")
    for s in sources[: args.show]:
        print(f"  {s.source_id}\t{s.speaker_id}\t{s.gender or '?'}\t{s.text[:60]}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from vocalgrad.stimuli.card import dimension_table

    if args.dataset is None:
        print(dimension_table(args.sample_rate))
        return 0
    from vocalgrad.dataset import content_sha256, is_official, load_rows

    rows = load_rows(args.dataset)
    by = Counter((r["split"], r["category"], r["direction"]) for r in rows)
    print(f"{len(rows)} clips in {args.dataset}")
    print("| split | category | increase | decrease | constant |\n|---|---|---|---|---|")
    for split, category in sorted({(s, c) for s, c, _ in by}):
        print(f"| {split} | {category} | {by[(split, category, 'increase')]} | "
              f"{by[(split, category, 'decrease')]} | {by[(split, category, 'constant')]} |")
    manifest = Path(args.dataset) / "build.json"
    seed = f", seed {json.loads(manifest.read_text())['seed']}" if manifest.is_file() else ""
    layout = " (official release layout: no references, magnitudes or train split)" if is_official(args.dataset) else ""
    print(f"content sha256 {content_sha256(args.dataset)}{seed}{layout}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from vocalgrad.executors import ListenerSpec

    options = {}
    if args.base_url:
        options["base_url"] = args.base_url
    if args.adaptive and (args.executor == "ray" or args.ray_address):
        raise ConfigError("--adaptive asks one trial at a time and runs locally; drop --executor/--ray-address")
    with _executor(args) as executor:
        listener = executor.listener(ListenerSpec(args.listener, args.dataset, options))
        return _eval(args, listener, executor)


def _eval(args: argparse.Namespace, listener, executor) -> int:
    from vocalgrad.evaluation.evaluate import EvalConfig, evaluate, listener_slug
    from vocalgrad.evaluation.score import markdown, score_run, write_summary

    out = Path(args.out or Path("runs") / listener_slug(args.listener))
    if args.adaptive:
        from vocalgrad.evaluation.evaluate_adaptive import describe, evaluate_adaptive

        results = evaluate_adaptive(args.dataset, listener, out, args.categories or (),
                                    method=args.adaptive, max_trials=args.max_trials)
        print(f"{listener.listener_id}: adaptive ({args.adaptive}) thresholds -> {out}")
        for result in results:
            print("  " + describe(result))
        return 0
    config = EvalConfig(
        mode=args.mode,
        variants=args.variants,
        controls=args.controls,
        split=args.split,
        categories=args.categories or (),
        limit=args.limit,
        batch_size=args.batch_size,
        few_shot=args.few_shot,
        audio_first=args.audio_first,
    )
    counts = evaluate(args.dataset, listener, out, config, executor=executor)
    print(f"{listener.listener_id}: answered {counts['answered']} ({counts['skipped_done']} already done, "
          f"{counts['errors']} errors) in {counts['seconds']:.1f} s -> {out}")
    summary = score_run(out)
    write_summary(out, summary)
    print(markdown(summary))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from vocalgrad.report import write_report

    out = write_report(args.results, args.out, dataset=args.dataset, probe_dirs=args.probe, fmt=args.format,
                       n_boot=args.n_boot, command=shlex.join(["vocalgrad", *sys.argv[1:]]))
    print(f"report: {out}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from vocalgrad.evaluation.score import (
        compare_runs,
        comparison_text,
        markdown,
        score_run,
        to_csv,
        write_summary,
    )

    by = args.by
    for run in args.runs:
        summary = score_run(run, by=by, cluster=None if args.cluster == "item" else args.cluster, n_boot=args.n_boot)
        write_summary(run, summary)
        print(to_csv(summary) if args.format == "csv" else markdown(summary))
    if args.compare:
        if len(args.runs) != 2:
            raise ConfigError("--compare needs exactly two runs")
        print(comparison_text(compare_runs(*args.runs, cluster=args.cluster)))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vocalgrad", description=__doc__)
    p.add_argument("--version", action="version", version=f"vocalgrad {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="render, verify and write a benchmark")
    b.add_argument("--out", required=True, help="dataset folder to create or resume")
    b.add_argument("--source", help="builtin | folder:PATH | vctk:PATH | hf:NAME[@split]")
    b.add_argument("--config", help="TOML file with a [build] table")
    b.add_argument("--protocol", help="preset, e.g. 'vocalgrad' (published grid and sizes)")
    b.add_argument("--categories", type=_csv,
                   help="comma-separated; default: the published nine (newer dimensions such as "
                        "brightness are opt-in)")
    b.add_argument("--tiers", type=_csv)
    b.add_argument("--curves", type=_csv)
    b.add_argument("--n-test", type=int)
    b.add_argument("--n-train", type=int)
    b.add_argument("--sample-rate", type=int)
    b.add_argument("--seed", type=int)
    b.add_argument("--speaker-pattern", help="regex with a (?P<speaker>...) group, for folder sources")
    b.add_argument("--no-constant", action="store_true", help="omit the constant control clips")
    b.add_argument("--design", choices=("tiers", "psychometric"), help="published tiers (default) or a magnitude sweep")
    b.add_argument("--levels", type=int, help="magnitudes per dimension for --design psychometric")
    b.add_argument("--format", choices=("gradual", "comparison", "recognition"),
                   help="question format: a change within one clip (default), two held parts to compare, "
                        "or one held clip to name")
    add_executor_options(b, "local processes (default: all cores), or Ray tasks in flight "
                         "(default: the cluster's CPUs)")
    b.add_argument("--overwrite", action="store_true", help="replace a finished or different build")
    b.add_argument("--no-audit", action="store_true", help="skip the shortcut audit at the end")
    b.set_defaults(func=cmd_build)

    v = sub.add_parser("verify", help="re-measure a dataset and report label agreement and confounds")
    v.add_argument("dataset", help="a dataset folder (ours or the official release layout) or hf:NAME[@SPLIT]")
    v.add_argument("--limit", type=int)
    v.add_argument("--json", help="also write the full report here")
    v.set_defaults(func=cmd_verify)

    a = sub.add_parser("audit", help="check that no label is recoverable from cues other than the change over time")
    a.add_argument("dataset")
    a.add_argument("--json", help="also write the full report here (always written to DATASET/audit.json)")
    a.add_argument("--workers", type=int, default=1, help="processes measuring clip cues")
    a.set_defaults(func=cmd_audit)

    s = sub.add_parser("sources", help="list what a source spec resolves to")
    s.add_argument("spec")
    s.add_argument("--speaker-pattern")
    s.add_argument("--show", type=int, default=10)
    s.set_defaults(func=cmd_sources)

    e = sub.add_parser("eval", help="ask a listener every item of a dataset (resumable)")
    e.add_argument("dataset", help="a dataset folder (ours or the official release layout) or hf:NAME[@SPLIT]")
    e.add_argument("--listener", required=True, help="baseline:random | baseline:ideal | baseline:shortcut | whisper:tiny.en | hf:PATH | openai:MODEL")
    e.add_argument("--out", help="run folder (default runs/<listener>)")
    e.add_argument("--mode", default="auto", choices=("auto", "choice", "generate", "both"))
    e.add_argument("--variants", type=_csv, default=("default",), help="prompt variants, e.g. default,clip,ternary")
    e.add_argument("--controls", type=_csv, default=(), help="reversed,silence,text_only")
    e.add_argument("--split", default="test")
    e.add_argument("--categories", type=_csv)
    e.add_argument("--limit", type=int)
    e.add_argument("--batch-size", type=int, default=16)
    e.add_argument("--few-shot", type=int, default=0, help="examples per label from the train split")
    e.add_argument("--audio-first", action="store_true")
    e.add_argument("--base-url", help="for openai: listeners")
    e.add_argument("--adaptive", choices=("quest", "staircase"),
                   help="estimate a threshold per category with few trials, rendering clips on demand")
    e.add_argument("--max-trials", type=int, default=40, help="trials per category for --adaptive")
    add_executor_options(e, "listener copies answering batches: 1 locally (default); on Ray, "
                         "actors (default: one per cluster CPU, or per GPU for model listeners)")
    e.add_argument("--gpus-per-actor", type=float,
                   help="on Ray: GPUs each listener actor reserves (default: 1 for model listeners "
                   "when the cluster has GPUs, else 0)")
    e.set_defaults(func=cmd_eval)

    sc = sub.add_parser("score", help="tables with clustered CIs, d', criterion and controls")
    sc.add_argument("runs", nargs="+")
    sc.add_argument("--by", type=_csv, default=("category",))
    sc.add_argument("--cluster", default="source_id", choices=("source_id", "speaker_id", "item"))
    sc.add_argument("--n-boot", type=int, default=2000)
    sc.add_argument("--format", default="md", choices=("md", "csv"))
    sc.add_argument("--compare", action="store_true", help="paired comparison of two runs")
    sc.set_defaults(func=cmd_score)

    r = sub.add_parser("report", help="one self-contained HTML (or markdown) report")
    r.add_argument("results", nargs="+", help="run folders from eval / human export")
    r.add_argument("--out", default="report.html")
    r.add_argument("--format", default="html", choices=("html", "md"))
    r.add_argument("--dataset", help="dataset folder for the card section (default: from the runs)")
    r.add_argument("--probe", action="append", default=[], help="probe output folder (repeatable)")
    r.add_argument("--n-boot", type=int, default=1000)
    r.set_defaults(func=cmd_report)

    from vocalgrad.human.cli import add_parser as add_human_parser
    from vocalgrad.probing.cli import add_parser as add_probe_parser
    from vocalgrad.remedies.cli import add_parser as add_finetune_parser

    add_probe_parser(sub)
    add_finetune_parser(sub)
    add_human_parser(sub)

    i = sub.add_parser("info", help="summarise a dataset, or print the dimensions table")
    i.add_argument("dataset", nargs="?")
    i.add_argument("--sample-rate", type=int, default=16000)
    i.set_defaults(func=cmd_info)
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


if __name__ == "__main__":
    sys.exit(main())

"""`vocalgrad build | verify | audit | sources | info`: making and inspecting benchmarks."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from vocalgrad import formats
from vocalgrad.cli.options import (
    AUDIT_FAILURE_HELP,
    add_deprecated_alias,
    add_dimensions,
    add_executor_options,
    add_overwrite,
    audit_failures,
    audit_status,
    csv_list,
    executor_from_args,
    failed_audit_status,
    positive_seconds,
    whole,
)
from vocalgrad.errors import ConfigError
from vocalgrad.files import AUDIT_REPORT, VERIFY_REPORT, atomic_write_text, claim_output

# the kinds of sound (`vocalgrad.signal.kinds.KINDS`), spelled here so the parser builds
# without importing numpy; a test keeps the two equal
KIND_NAMES = ("speech", "tone", "noise", "music", "everyday")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("build", help="render, verify and write a benchmark")
    b.add_argument("--out", required=True, help="dataset folder to create or resume")
    b.add_argument(
        "--source",
        help="builtin | folder:PATH | vctk:PATH | hf:NAME[@split] | tones | noise | beeps | "
        "music | everyday (`vocalgrad list sources`)",
    )
    b.add_argument(
        "--kind",
        choices=KIND_NAMES,
        help="the kind of sound a folder: or hf: source holds (default speech); the same as "
        "ending its spec in ?kind=KIND",
    )
    b.add_argument("--config", help="TOML file with a [build] table")
    b.add_argument(
        "--protocol",
        help="preset: 'vocalgrad' (published grid and sizes), or 'ladder' (one dataset per "
        "rung of the ladder into OUT/<format>/, indexed in OUT/ladder.json; small by default)",
    )
    add_dimensions(
        b,
        "comma-separated dimensions; default: the published nine (newer ones such as "
        "brightness are opt-in)",
    )
    b.add_argument("--tiers", type=csv_list)
    b.add_argument("--curves", type=csv_list)
    b.add_argument("--n-test", type=whole(1))
    b.add_argument("--n-train", type=whole(0))
    b.add_argument(
        "--per-speaker-test",
        type=whole(1),
        metavar="N",
        help="test sources taken from each test speaker (default 2): raise it where a corpus "
        "has few speakers",
    )
    b.add_argument(
        "--min-duration",
        type=positive_seconds,
        metavar="SECONDS",
        help="the shortest usable source in seconds (default 2; 3 under --protocol vocalgrad)",
    )
    b.add_argument("--sample-rate", type=whole(8000))
    b.add_argument("--seed", type=whole(0))
    b.add_argument(
        "--speaker-pattern", help="regex with a (?P<speaker>...) group, for folder sources"
    )
    b.add_argument(
        "--constants",
        type=whole(0),
        help="constant control clips per source and dimension (default 3, one a tier; 0: none)",
    )
    b.add_argument(
        "--design",
        choices=("tiers", "psychometric"),
        help="published tiers (default) or a magnitude sweep",
    )
    b.add_argument(
        "--levels", type=whole(2), help="magnitudes per dimension for --design psychometric"
    )
    b.add_argument(
        "--rove-endpoints",
        action="store_true",
        help="place each change at random within a window around its tier, so one end of a "
        "clip does not give the direction away (off: the published protocol)",
    )
    b.add_argument(
        "--question-format",
        choices=formats.names(),
        help="what each clip asks: "
        + "; ".join(f"{f.name}, {f.summary}" for f in formats.listed())
        + f" (default {formats.DEFAULT}; `vocalgrad list formats`)",
    )
    add_deprecated_alias(
        b, "--format", "--question-format", "question_format", choices=formats.names()
    )
    add_deprecated_alias(b, "--no-constant", "--constants 0", "constants", nargs=0, const=0)
    add_executor_options(
        b,
        "local processes (default: all cores), or Ray tasks in flight "
        "(default: the cluster's CPUs)",
    )
    b.add_argument("--overwrite", action="store_true", help="replace a finished or different build")
    b.add_argument("--no-audit", action="store_true", help="skip the shortcut audit at the end")
    b.add_argument("--allow-audit-failure", action="store_true", help=AUDIT_FAILURE_HELP)
    b.add_argument(
        "--allow-large",
        action="store_true",
        help="build more than 5,000,000 clips or 1 TB of audio (refused without it: a typo in "
        "--levels or --constants would fill the disk)",
    )
    b.set_defaults(func=cmd_build)

    v = sub.add_parser(
        "verify", help="re-measure a dataset and report label agreement and confounds"
    )
    v.add_argument(
        "dataset", help="a dataset folder (ours or the official release layout) or hf:NAME[@SPLIT]"
    )
    v.add_argument("--limit", type=whole(1))
    v.add_argument("--json", help="also write the full report here")
    add_overwrite(v, "--json over a file that is not a verify report, or inside the dataset")
    v.set_defaults(func=cmd_verify)

    a = sub.add_parser(
        "audit", help="check that no label is recoverable from cues other than the change over time"
    )
    a.add_argument("dataset")
    a.add_argument(
        "--json", help="also write the full report here (always written to DATASET/audit.json)"
    )
    a.add_argument(
        "--workers",
        type=whole(1),
        default=1,
        help="processes measuring clip cues and fitting the dimensions' classifiers",
    )
    a.add_argument("--allow-audit-failure", action="store_true", help=AUDIT_FAILURE_HELP)
    add_overwrite(a, "--json over a file that is not an audit report, or inside the dataset")
    a.set_defaults(func=cmd_audit)

    s = sub.add_parser(
        "sources",
        help="list what a source spec resolves to, and how many sources a build could use",
    )
    s.add_argument(
        "spec",
        help="builtin | folder:PATH | vctk:PATH | hf:NAME[@split] | tones | music | everyday | ...",
    )
    s.add_argument("--kind", choices=KIND_NAMES, help="the kind of sound a folder: or hf: holds")
    s.add_argument(
        "--speaker-pattern", help="regex with a (?P<speaker>...) group, for folder sources"
    )
    s.add_argument(
        "--min-duration",
        type=positive_seconds,
        help="the build's shortest usable source in seconds (default: the build's, 2; 3 "
        "under --protocol vocalgrad)",
    )
    s.add_argument(
        "--check",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="apply the build's checks to the files: length, readable, of its kind (default: yes; "
        "--no-check only lists)",
    )
    s.add_argument(
        "--check-limit",
        type=whole(0),
        default=1000,
        help="check at most this many sources, the first in the listing (default 1000, about "
        "half a minute; 0: all of them)",
    )
    s.add_argument("--show", type=whole(0), default=10, help="sources and refusals listed")
    s.set_defaults(func=cmd_sources)

    i = sub.add_parser("info", help="summarise a dataset, or print the dimensions table")
    i.add_argument("dataset", nargs="?")
    i.add_argument("--sample-rate", type=int, default=16000)
    i.set_defaults(func=cmd_info)


def cmd_build(args: argparse.Namespace) -> int:
    from vocalgrad.api import build

    options = {
        "categories": args.categories,
        "tiers": args.tiers,
        "curves": args.curves,
        "n_test": args.n_test,
        "n_train": args.n_train,
        "per_speaker_test": args.per_speaker_test,
        "min_duration_s": args.min_duration,
        "sample_rate": args.sample_rate,
        "seed": args.seed,
        "speaker_pattern": args.speaker_pattern,
        "constants": args.constants,
        "design": args.design,
        "levels": args.levels,
        "format": args.question_format,
        "rove_endpoints": True if args.rove_endpoints else None,
        "allow_large": True if args.allow_large else None,
    }
    source = args.source
    if args.kind is not None:
        from vocalgrad.sources import with_kind

        if source is None:
            raise ConfigError("--kind names the kind of a --source folder: or hf: spec; give one")
        source = with_kind(source, args.kind)
    from vocalgrad.stimuli.config import LADDER

    if args.protocol == LADDER:
        return _build_ladder(args, source, options)
    with executor_from_args(args) as executor:
        report = build(
            args.out,
            source,
            config=args.config,
            protocol=args.protocol,
            overwrite=args.overwrite,
            audit=not args.no_audit,
            executor=executor,
            **{k: v for k, v in options.items() if v is not None},
        ).report
    print(
        f"wrote {report['clips_kept']} clips to {args.out} in {report['seconds']:.1f} s "
        f"({report['clips_dropped']} dropped after verification, "
        f"{len(report['refused_conditions'])} refused conditions, "
        f"{len(report['skipped_sources'])} skipped sources)"
    )
    if dropped := report.get("constants_dropped_with_changes"):
        print(
            "  constants dropped with their sources' changes (a source keeps constants in the "
            "share of its changes that verified): "
            + ", ".join(f"{category} {n}" for category, n in dropped.items())
        )
    for r in report["refused_conditions"]:
        print(f"  refused {r['category']} {r['tier']}: {r['reason']}")
    for r in report.get("refused_for_source", []):
        print(
            f"  refused {r['category']} {r['tier']} on {r['source_id']} ({r['clips']} clips): "
            f"{r['reason']}"
        )
    for s in report["skipped_sources"]:
        print(f"  skipped {s['source_id']}: {s['reason']}")
    if report.get("source_shortfall"):
        print(
            f"  fewer sources than asked ({report['sources_selected']}): "
            f"{report['source_shortfall']}"
        )
    for note in report.get("source_conversions", []):
        print(f"  {note}")
    if report.get("source_duplicates"):
        from vocalgrad.sources import duplicates_note

        print(f"  {duplicates_note(report['source_duplicates'])}")
    for skipped in report.get("skipped_files", []):
        files = skipped["files"]
        print(
            f"  skipped {len(files)} file(s) in the source folder, {skipped['reason']}: "
            f"{', '.join(files[:3])}{' ...' if len(files) > 3 else ''}"
        )
    failed: dict[str, list[str]] = {}
    for e in report["render_errors"]:
        failed.setdefault(e["category"], []).append(e["failed"])
    for category, messages in failed.items():
        print(
            f"  could not render {len(messages)} {category} clip(s), left out with their twins: "
            f"{messages[0]}"
        )
    print(
        "verification agreement: "
        + ", ".join(f"{k} {v:.1%}" for k, v in report["verification_agreement"].items())
    )
    refused = {
        k: v["refused_inaudible"]
        for k, v in report["per_category"].items()
        if v["refused_inaudible"]
    }
    if refused:
        print("refused as inaudible: " + ", ".join(f"{k} {v}" for k, v in refused.items()))
    if "shortcut_audit" in report:
        from vocalgrad.stimuli.audit import format_audit

        print(format_audit(report["shortcut_audit"]), flush=True)
        return audit_status(report["shortcut_audit"], args.allow_audit_failure)
    return 0


def _build_ladder(args: argparse.Namespace, source: str | None, options: dict) -> int:
    """`vocalgrad build --protocol ladder`: every rung's dataset, then one line per rung."""
    from vocalgrad.api import build_ladder
    from vocalgrad.evaluation.ladder import INDEX

    if options.get("format"):
        raise ConfigError(
            "--protocol ladder builds every rung's question format; leave out --question-format"
        )
    with executor_from_args(args) as executor:
        index = build_ladder(
            args.out,
            source,
            config=args.config,
            overwrite=args.overwrite,
            audit=not args.no_audit,
            executor=executor,
            **{k: v for k, v in options.items() if v is not None},
        )
    print(f"ladder of {len(index['rungs'])} rungs in {args.out} ({INDEX}):")
    joint = index.get("audit") or {}
    failing = joint.get("failing") or {}
    failed: dict[str, dict[str, str]] = {}  # rung -> failing dimension -> short reason
    for entry in index["rungs"]:
        built = index["datasets"].get(entry["dataset"], {})
        if built.get("skipped"):
            print(f"  {entry['rung']}: not built: {built['skipped']}")
            continue
        own = built.get("audit_passes")
        if own is None:
            audit = "not audited"
        elif joint.get("passes") is None:  # no joint family: each dataset's own verdict
            audit = "audit passes" if own else "audit FAILS"
            if not own:
                failed[entry["rung"]] = _failed_dimensions(Path(args.out) / entry["dataset"])
                audit += ": " + _dims_text(failed[entry["rung"]])
        elif entry["dataset"] in failing:
            failed[entry["rung"]] = _joint_failures(failing[entry["dataset"]])
            audit = "audit FAILS: " + _dims_text(failed[entry["rung"]])
        else:
            audit = "audit passes"
            if not own:
                alone = _dims_text(_failed_dimensions(Path(args.out) / entry["dataset"]))
                audit += f" (its dataset's own gates alone fail: {alone})"
        print(
            f"  {entry['rung']}: {entry['dataset']}/ asked with {','.join(entry['variants'])}; "
            f"{built.get('clips_kept', 0)} clips, {audit}"
        )
    for name, built in index["datasets"].items():
        for note in built.get("notes", []):
            print(f"  {name}: {note}")
    if joint:
        print(f"  audit: {_joint_text(joint)}")
    return _ladder_audit_status(failed, len(index["rungs"]), args.allow_audit_failure)


def _joint_failures(categories: dict[str, dict]) -> dict[str, str]:
    """A dataset's failures in the ladder's family: dimension -> short reason."""
    from vocalgrad.stimuli.audit.report import GATE_NAMES

    return {
        dim: ", ".join(
            [GATE_NAMES.get(gate, gate) for gate in entry.get("gates", {})]
            + [reason.split(":")[0] for reason in entry.get("reasons", [])]
        )
        for dim, entry in categories.items()
    }


def _joint_text(joint: dict) -> str:
    """One line on the ladder's family: its size, its critical value and its verdict."""
    if joint.get("passes") is None:
        return f"no joint verdict ({joint.get('reason', 'unknown')}); each dataset's own is shown"
    if not joint.get("gates"):
        return "no gate to decide"
    verdict = "passes" if joint["passes"] else f"fails on {len(joint['failing'])} dataset(s)"
    return (
        f"{joint['gates']} gates of {len(joint['builds'])} datasets as one family "
        f"(family-wise alpha {joint['alpha']:g}, critical z {joint['critical_z']:.2f}): {verdict}"
    )


def _failed_dimensions(dataset: Path) -> dict[str, str]:
    """A built rung's failing dimensions with a short reason each, from its `audit.json`."""
    from vocalgrad.stimuli.audit import REPORT_FILE, failed_dimensions

    try:
        report = json.loads((dataset / REPORT_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return failed_dimensions(report)


def _dims_text(dims: dict[str, str]) -> str:
    return ", ".join(f"{dim} ({reason})" for dim, reason in dims.items()) or "see its audit.json"


def _ladder_audit_status(failed: dict[str, dict[str, str]], total: int, allow: bool) -> int:
    """As `audit_status` for a ladder: 0, or `EXIT_AUDIT` after one stderr line naming each
    failing rung's dimensions (a warning and 0 with ``--allow-audit-failure``)."""
    if not failed:
        return 0
    line = f"shortcut audit failed on {len(failed)} of {total} rungs: " + "; ".join(
        f"{rung}: {_dims_text(dims)}" for rung, dims in failed.items()
    )
    return failed_audit_status(line, allow, written="the datasets are")


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit status 1 when a clip disagrees with its label or cannot be read (a failed check,
    as for `audit`), so a script that verifies a dataset stops on a broken one."""
    from vocalgrad.api import verify
    from vocalgrad.stimuli.verify import format_report

    if args.json:
        claim_output(args.json, VERIFY_REPORT, reads=[args.dataset], overwrite=args.overwrite)
    report = verify(args.dataset, limit=args.limit)
    print(format_report(report))
    _write_json(args.json, report)
    if report["failures"]:
        print(f"verify failed: {len(report['failures'])} clip(s) (listed under failures in --json)")
        return 1
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from vocalgrad.api import audit
    from vocalgrad.stimuli.audit import format_audit

    if args.json:
        claim_output(args.json, AUDIT_REPORT, reads=[args.dataset], overwrite=args.overwrite)
    report = audit(args.dataset, workers=args.workers)
    print(format_audit(report))
    _write_json(args.json, report)
    if audit_failures(report):
        return audit_status(report, args.allow_audit_failure)
    print(
        "shortcut audit passed: no label is recoverable from cues other than the change over time"
    )
    return 0


def cmd_sources(args: argparse.Namespace) -> int:
    from vocalgrad.sources import (
        drop_duplicates,
        duplicates_note,
        resolve_sources,
        spec_kind,
        with_kind,
    )
    from vocalgrad.sources.builtin import BUILTIN_DOMAIN
    from vocalgrad.sources.check import check_sources, refusal_counts, skipped_files

    spec = with_kind(args.spec, args.kind)
    sources, dropped = drop_duplicates(resolve_sources(spec, speaker_pattern=args.speaker_pattern))
    speakers = Counter(s.speaker_id for s in sources)
    genders = Counter(s.gender or "?" for s in sources)
    texts = {s.text_id for s in sources}
    kind = spec_kind(spec)
    what, groups = ("sources", "speakers") if kind == "speech" else (f"{kind} sources", "groups")
    print(
        f"{len(sources)} {what}, {len(speakers)} {groups}, {len(texts)} distinct texts, "
        f"gender: {dict(genders)}"
    )
    if dropped:
        print(f"  {duplicates_note(dropped)}")
    recorded = [s for s in sources if s.domain != BUILTIN_DOMAIN]  # builtin: synthesised here
    if args.check and recorded:
        from vocalgrad.stimuli.config import BuildConfig

        least = args.min_duration or BuildConfig.model_fields["min_duration_s"].default
        limit = args.check_limit or len(recorded)
        checked = check_sources(recorded[:limit], least)
        usable = min(limit, len(recorded)) - len(checked.refused) - checked.unchecked
        of = (
            f"the first {limit} checked of {len(recorded)} (--check-limit 0 checks all)"
            if limit < len(recorded)
            else f"{len(recorded)}"
        )
        line = f"usable by a build: {usable} of {of} (at least {least:g} s, readable, {kind})"
        if checked.unchecked:
            line += f"; {checked.unchecked} not on disk yet, checked when a build picks them"
        print(line)
        if checked.refused:
            print(f"  refused: {refusal_counts(checked.refused)}")
        for source_id, reason in list(checked.refused.items())[: args.show]:
            print(f"  refused {source_id}: {reason}")
        if 0 < args.show < len(checked.refused):
            print(f"  ... and {len(checked.refused) - args.show} more refused")
    for reason, files in skipped_files(args.spec).items():
        shown = files[: args.show]
        print(
            f"skipped {len(files)} file(s), {reason}"
            + (f": {', '.join(shown)}{' ...' if len(files) > len(shown) else ''}" if shown else "")
        )
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
        print(
            f"| {split} | {category} | {by[(split, category, 'increase')]} | "
            f"{by[(split, category, 'decrease')]} | {by[(split, category, 'constant')]} |"
        )
    manifest = Path(args.dataset) / "build.json"
    seed = f", seed {json.loads(manifest.read_text())['seed']}" if manifest.is_file() else ""
    layout = (
        " (official release layout: no references, magnitudes or train split)"
        if is_official(args.dataset)
        else ""
    )
    print(f"content sha256 {content_sha256(args.dataset)}{seed}{layout}")
    return 0


def _write_json(path: str | None, report: dict) -> None:
    """`--json PATH`: the full report, written whole or not at all."""
    if path:
        atomic_write_text(path, json.dumps(report, indent=2) + "\n")

"""`vocalgrad human ...`: create a study, serve it, invite annotators, watch progress, export.

Every command names the study file (`--study study.toml`); its database sits next to it
unless `[study] db` says otherwise. The admin works on the database file directly, so
`invite`, `progress` and `export` run while the server is up (SQLite WAL).
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import os
import socket
import sys
from collections import Counter
from pathlib import Path

from vocalgrad.cli.options import add_deprecated_alias, add_overwrite
from vocalgrad.dataset import content_sha256
from vocalgrad.human.study import (
    MAX_STUDY_ROWS,
    RATE_BURST,
    RATE_PER_S,
    StudyError,
    base_url,
    load_study,
    public_build_warning,
)

ADMIN_ENV = "VOCALGRAD_ADMIN_TOKEN"


def _db(args: argparse.Namespace) -> Path:
    _, db = load_study(args.study, allow_large=getattr(args, "allow_large", False))
    return Path(args.db) if args.db else db


def cmd_create(args: argparse.Namespace) -> int:
    from vocalgrad.dataset import load_rows
    from vocalgrad.files import STUDY_DB, claim_output
    from vocalgrad.human.assign import make_plan
    from vocalgrad.human.store import create_study

    config, db = load_study(args.study, allow_large=args.allow_large)
    db = claim_output(args.db or db, STUDY_DB, reads=[args.dataset], overwrite=None)
    rows = load_rows(args.dataset)
    plan = make_plan(rows, config)
    warning = public_build_warning(args.dataset)
    create_study(
        db,
        config,
        plan,
        rows,
        Path(args.dataset),
        content_sha256(args.dataset),
        warnings=[warning] if warning else [],
    )
    if warning:
        print(f"vocalgrad: warning: {warning}", file=sys.stderr)
    sizes = {c: len(ids) for c, ids in plan.pool.items()}
    per = {a: sum(s.kind == "test" for s in slots) for a, slots in plan.trials.items()}
    print(
        f"created {db}: {sum(sizes.values())} items "
        f"({', '.join(f'{c} {n}' for c, n in sizes.items())}), "
        f"{len(per)} annotator slots, {min(per.values())}-{max(per.values())} test trials each"
    )
    for note in plan.notes:
        print(f"  note: {note}")
    return 0


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _bind(host: str, port: int) -> socket.socket:
    """The server's listening socket, bound before anything is created or printed, so a busy
    port is one line and a failed exit, not a traceback after "serving on"."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET  # as uvicorn's own socket
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:  # socket.gaierror too: a host name that does not resolve
        sock.close()
        fix = {
            errno.EADDRINUSE: "stop what holds the port or choose another --port",
            errno.EACCES: "a port below 1024 needs privileges; choose another --port",
        }.get(err.errno, "check --host and --port")
        raise StudyError(f"cannot serve on {host}:{port}: {err.strerror}; {fix}") from None
    return sock


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from vocalgrad.human.app import create_app, log_config
    from vocalgrad.human.store import Store

    db = _db(args)
    sock = _bind(args.host, args.port)
    if not db.exists():
        cmd_create(args)
    token = os.environ.get(ADMIN_ENV) or None
    secure = args.secure_cookies if args.secure_cookies is not None else not _is_loopback(args.host)
    app = create_app(
        Store(db),
        args.dataset,
        admin_token=token,
        production=not args.dev,
        cookie_secure=secure,
        public_url=args.public_url,
        rate_per_s=args.rate_limit,
        rate_burst=args.rate_burst,
    )
    if args.dev and token is None:
        print(f"dev mode: admin token {app.state.admin_token}")
    print(f"serving {db} on http://{args.host}:{args.port}/ (invite with `vocalgrad human invite`)")
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        log_config=log_config(),
        proxy_headers=args.proxy_headers,
    )
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    if not server.started:
        raise StudyError("the server did not start; its log above says why")
    return 0


def cmd_invite(args: argparse.Namespace) -> int:
    from vocalgrad.human.store import Store

    store = Store(_db(args))
    targets: list[str | None]
    if args.replace:
        targets = [store.replace(args.replace)]
    elif args.annotator:
        targets = list(args.annotator)
    else:
        targets = [None] * args.n
    if not args.public_url:
        raise StudyError("human invite needs --public-url, e.g. https://host")
    base = base_url(args.public_url)
    for target in targets:
        who, token = store.invite(target)
        print(f"{who}\t{base}/s/{token}")
    return 0


def cmd_progress(args: argparse.Namespace) -> int:
    from vocalgrad.human.store import Store

    rows = Store(_db(args)).progress()
    if args.output_format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print("| annotator | status | answered | catch | note |\n|---|---|---|---|---|")
    for p in rows:
        catch = "-" if p["catch_accuracy"] is None else f"{p['catch_accuracy']:.0%}"
        note = "; ".join(
            x
            for x in (p["reason"], p["flag_reason"], "not invited" if not p["invited"] else None)
            if x
        )
        print(
            f"| {p['annotator']} | {p['status']} | {p['answered']}/{p['total']} | "
            f"{catch} | {note} |"
        )
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from vocalgrad.human.export import export
    from vocalgrad.human.store import Store

    summary = export(
        Store(_db(args)), args.out, include_flagged=args.include_flagged, overwrite=args.overwrite
    )
    pooled = summary["report"]["pooled_accuracy"]
    agree = summary["report"]["agreement"]["overall"]
    print(
        f"wrote {summary['rows']} rows to {Path(args.out) / 'results.jsonl'}; pooled accuracy "
        f"{pooled['accuracy']:.1%} over {pooled['n']} items, Fleiss kappa "
        f"{agree['fleiss_kappa']:.3f}, Krippendorff alpha {agree['krippendorff_alpha']:.3f}"
    )
    coverage = summary["report"]["pooled_coverage"]
    if coverage["missing"]:
        reasons = Counter(coverage["missing"].values())
        print(
            f"vocalgrad: warning: {len(coverage['missing'])} of {coverage['pool']} study items "
            f"have no pooled answer ({'; '.join(f'{n} {why}' for why, n in reasons.items())}); "
            "listed under pooled_coverage.missing in agreement.json and manifest.json",
            file=sys.stderr,
        )
    return 0


def add_parsers(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register `human` and its sub-commands on the main CLI's sub-parsers."""
    h = subparsers.add_parser("human", help="run a listening test with people (web app)")
    sub = h.add_subparsers(dest="human_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--study", required=True, help="study TOML file with a [study] table")
        p.add_argument("--db", help="study database (default: from the study file)")

    def allow_large(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--allow-large",
            action="store_true",
            help=f"plan a study of more than {MAX_STUDY_ROWS:,} database rows "
            "(as allow_large = true in [study])",
        )

    c = sub.add_parser("create", help="plan the balanced assignment and create the study database")
    c.add_argument("dataset")
    common(c)
    allow_large(c)
    c.set_defaults(func=cmd_create)

    s = sub.add_parser("serve", help="serve the listening test (FastAPI under uvicorn)")
    s.add_argument("dataset")
    common(s)
    allow_large(s)
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument(
        "--dev",
        action="store_true",
        help=f"allow a generated admin token when ${ADMIN_ENV} is unset",
    )
    s.add_argument(
        "--secure-cookies",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="mark the session cookie Secure (default: unless serving on loopback)",
    )
    s.add_argument(
        "--proxy-headers", action="store_true", help="trust X-Forwarded-* (behind a proxy)"
    )
    s.add_argument(
        "--public-url",
        help="public URL of the server, for links made by the admin API "
        "(never taken from a request's Host header)",
    )
    add_deprecated_alias(s, "--base-url", "--public-url", "public_url")
    s.add_argument(
        "--rate-limit",
        type=float,
        default=RATE_PER_S,
        help="requests per second per token (token bucket; 429 with Retry-After)",
    )
    s.add_argument(
        "--rate-burst",
        type=float,
        default=RATE_BURST,
        help="requests a token may send at once before the rate applies",
    )
    s.add_argument(
        "--log-level", default="warning", help="uvicorn's; tokens are redacted at every level"
    )
    s.set_defaults(func=cmd_serve)

    i = sub.add_parser("invite", help="print one login link per annotator (tokens stored hashed)")
    common(i)
    i.add_argument("--public-url", help="public URL of the server, e.g. https://host (required)")
    add_deprecated_alias(i, "--base-url", "--public-url", "public_url")
    group = i.add_mutually_exclusive_group()
    group.add_argument("--n", type=int, default=1, help="invite the next N uninvited slots")
    group.add_argument("--annotator", action="append", help="(re-)issue the link of this slot")
    group.add_argument("--replace", help="add a slot with this annotator's items and invite it")
    i.set_defaults(func=cmd_invite)

    p = sub.add_parser("progress", help="per-annotator status, answers, catch accuracy")
    common(p)
    p.add_argument("--output-format", default="md", choices=("md", "json"))
    add_deprecated_alias(
        p, "--json", "--output-format json", "output_format", nargs=0, const="json"
    )
    p.set_defaults(func=cmd_progress)

    e = sub.add_parser("export", help="write results in the evaluation format plus agreement")
    common(e)
    e.add_argument("--out", required=True, help="folder for results.jsonl, manifest.json, ...")
    e.add_argument(
        "--include-flagged", action="store_true", help="pool annotators flagged on catch trials too"
    )
    add_overwrite(e, "into an --out that holds something other than a listening-test export")
    e.set_defaults(func=cmd_export)
    return h

"""`vocalgrad list listeners | dimensions | formats | prompts | sources`: what a spec or option
may name."""

from __future__ import annotations

import argparse

WHAT = ("listeners", "dimensions", "formats", "prompts", "sources")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "list", help="list listener families, dimensions, question formats, prompts or sources"
    )
    p.add_argument("what", choices=WHAT)
    p.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    print("\n".join(_LINES[args.what]()))
    return 0


def _listeners() -> list[str]:
    import vocalgrad.listeners
    from vocalgrad.listeners import families

    lines = [f"{scheme}:...\t{where}" for scheme, where in families().items()]
    grammar = (vocalgrad.listeners.__doc__ or "").split("\n\n")[1]
    return [
        *lines,
        "",
        "Specs:",
        grammar,
        "",
        "Options of a family's listener: -O KEY=VALUE on `eval` and `probe`.",
    ]


def _dimensions() -> list[str]:
    from vocalgrad import dimensions
    from vocalgrad.dimensions import PUBLISHED_CATEGORIES

    return [
        f"{dim.name}{'' if dim.name in PUBLISHED_CATEGORIES else '  (opt-in)'}\t"
        f"kinds: {', '.join(dim.SPEC.kinds)}"
        for dim in dimensions.bound()
    ]


def _formats() -> list[str]:
    from vocalgrad import formats

    return [f"{fmt.name}\t{fmt.summary}" for fmt in formats.listed()]


def _prompts() -> list[str]:
    from vocalgrad.questions.prompts import variants

    return [f"{variant.name}\t{variant.description}" for variant in variants()]


def _sources() -> list[str]:
    from vocalgrad.signal.kinds import KINDS
    from vocalgrad.sources import SCHEMES

    lines = [
        f"{s.usage}\t{s.kind or 'any kind (?kind=KIND; default speech)'}\t{s.help}"
        for s in SCHEMES.values()
    ]
    return [
        *lines,
        "",
        "Kinds of sound:",
        *(f"{k.name}\t{k.description}" for k in KINDS.values()),
    ]


_LINES = {
    "listeners": _listeners,
    "dimensions": _dimensions,
    "formats": _formats,
    "prompts": _prompts,
    "sources": _sources,
}

"""Generate the reference pages from the code (run by mkdocs-gen-files at build time).

Every page here is derived from what the package says about itself, so the reference cannot
drift from the code: the CLI from the argparse parser, the API from docstrings (mkdocstrings
reads the source statically, so modules that import torch cost nothing), the dimensions from
their `SPEC`, the question formats from their registry, the build config from `BuildConfig`'s
fields, and the environment variables from the source's own `os.environ` reads. A thing the
code has and the docs cannot describe is a warning, which `mkdocs build --strict` turns into a
failed build.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import importlib.util
import io
import logging
import os
import tokenize
from pathlib import Path

import mkdocs_gen_files

log = logging.getLogger("mkdocs.plugins.vocalgrad_docs")
PACKAGE = "vocalgrad"
# argparse wraps usage lines at the terminal width; fix it so the pages do not depend on it
os.environ["COLUMNS"] = "80"


def md(text: object) -> str:
    """Plain text for a markdown table cell: no raw HTML, no column breaks."""
    s = " ".join(str(text).split())
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def first_module(*names: str):
    """The first of these modules that imports (modules move between releases)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(f"none of {', '.join(names)} could be imported")


# ---------------------------------------------------------------------------------- CLI


def _subparsers(p: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def _option_rows(p: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in p._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if a.help == argparse.SUPPRESS:
            continue
        name = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest.upper()}`"
        if a.option_strings and a.nargs != 0:
            name += f" `{a.metavar or a.dest.upper()}`"
        default = a.default
        shown = ""
        if a.required:
            shown = "required"
        elif default not in (None, False, argparse.SUPPRESS) and a.nargs != 0:
            shown = (
                "`"
                + (
                    ",".join(map(str, default))
                    if isinstance(default, (list, tuple))
                    else str(default)
                )
                + "`"
            )
        text = md(a.help or "")
        if text and text[-1] not in ".)":
            text += "."
        if a.choices:
            text += f" One of: {', '.join(f'`{c}`' for c in a.choices)}."
        rows.append(f"| {name} | {shown} | {text.strip()} |")
    return rows


def _command_page(
    lines: list[str], prog: str, help_: str, p: argparse.ArgumentParser, depth: int
) -> None:
    lines += [f"{'#' * depth} `{prog}`", ""]
    if help_:
        lines += [md(help_[0].upper() + help_[1:]) + ".", ""]
    lines += ["```text", p.format_usage().strip().removeprefix("usage: "), "```", ""]
    rows = _option_rows(p)
    if rows:
        lines += ["| argument | default | what |", "|---|---|---|", *rows, ""]
    for name, sub_help, sub in _subparsers(p):
        _command_page(lines, f"{prog} {name}", sub_help, sub, min(depth + 1, 4))


def cli_page() -> str:
    from vocalgrad.cli import parser  # the one parser `vocalgrad` runs, wherever it lives

    root = parser()
    lines = [
        "# Command line",
        "",
        "Generated from the `vocalgrad` argument parser at build time: every command, option and",
        "default below is what the installed version accepts. `vocalgrad COMMAND --help` prints",
        "the same.",
        "",
        "```text",
        root.format_usage().strip().removeprefix("usage: "),
        "```",
        "",
        md(root.epilog[0].upper() + root.epilog[1:]) + ".",
        "",
        "| argument | default | what |",
        "|---|---|---|",
        *_option_rows(root),
        "",
    ]
    for name, help_, sub in _subparsers(root):
        _command_page(lines, f"vocalgrad {name}", help_, sub, 2)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- API


# The modules the Python API reference renders: what a user calls and what a contributor
# implements (the contracts of a dimension, a question format, a source and a listener, and the
# registries that find them). Everything else is internal: read its source. Every public
# function and class these modules render has numpydoc sections (tests/test_docstrings.py).
REFERENCE_MODULES = (
    "vocalgrad.api",
    "vocalgrad.records",
    "vocalgrad.errors",
    "vocalgrad.registry",
    "vocalgrad.audio",
    "vocalgrad.stats",
    "vocalgrad.signal.trajectories",
    "vocalgrad.dimensions.base",
    "vocalgrad.formats.base",
    "vocalgrad.sources.base",
    "vocalgrad.listeners.base",
    "vocalgrad.listeners.registry",
    "vocalgrad.evaluation.score",
    "vocalgrad.stimuli.config",
)


def api_pages() -> None:
    summary = []
    with mkdocs_gen_files.open("reference/api/index.md", "w") as f:
        f.write(
            "# Python API\n\n`import vocalgrad` gives the functions of `vocalgrad.api` "
            "(`vocalgrad.build`, `vocalgrad.evaluate`, ...). These pages render the modules a "
            "user calls and a contributor implements; the rest is internal.\n\n"
            + "".join(
                f"- [`{name}`]({name.split('.', 1)[1].replace('.', '/')}.md)\n"
                for name in REFERENCE_MODULES
            )
        )
    summary.append("* [Python API](index.md)")
    for name in REFERENCE_MODULES:
        path = Path("reference", "api", *name.split(".")[1:]).with_suffix(".md")
        with mkdocs_gen_files.open(path, "w") as f:
            f.write(f"# `{name}`\n\n::: {name}\n")
        rel = path.relative_to("reference/api").as_posix()
        summary.append(f"    * [{name}]({rel})")
    with mkdocs_gen_files.open("reference/api/SUMMARY.md", "w") as f:
        f.write("\n".join(summary) + "\n")


# ---------------------------------------------------------------------------------- dimensions


def dimensions_page() -> str:
    dims = importlib.import_module(f"{PACKAGE}.dimensions")
    published = set(getattr(dims, "PUBLISHED_CATEGORIES", ()))
    lines = [
        "# Dimensions",
        "",
        "Generated from each dimension's `SPEC` (`vocalgrad.dimensions.<name>.SPEC`), the data",
        "that also goes into every metadata row and dataset card. Tiers are the parameter's start",
        "and end for an *increase* at 16 kHz (a decrease swaps them); `vocalgrad info` prints the",
        "same table for any rate. A build asks for the published nine unless `--dimensions`",
        "names others (marked opt-in).",
        "",
        '| dimension | "increase" means | unit | low | mid | high | floor |',
        "|---|---|---|---|---|---|---|",
    ]
    details = []
    for module in dims.bound():
        name = module.name
        s = module.SPEC
        tiers = []
        for tier in ("low", "mid", "high"):
            start, end = module.endpoints(s.tiers[tier], 16000)
            refused = module.inaudible_reason(s.tiers[tier], 16000)
            refused = " (refused at 16 kHz)" if refused else ""
            tiers.append(f"{round(start, 3):g} → {round(end, 3):g}{refused}")
        opt_in = "" if name in published else " (opt-in)"
        lines.append(
            f"| [`{name}`](#{name}){opt_in} | {md(s.increase_means)} | {md(s.unit)} | "
            f"{' | '.join(tiers)} | {s.audibility_floor:g} {md(s.measured_unit)} |"
        )
        spec = s.to_dict()
        details += [
            f"## {name}",
            "",
            f"{md(s.parameter).capitalize()}, in {md(s.unit)}. "
            f"An increase: {md(s.increase_means)}.",
            "",
            "| field | value |",
            "|---|---|",
        ]
        for field in dataclasses.fields(s):
            value = spec[field.name]
            if isinstance(value, (tuple, list)):
                value = ", ".join(map(str, value)) or "—"
            elif isinstance(value, dict):
                value = ", ".join(f"{k} {v:g}" for k, v in value.items())
            details.append(f"| `{field.name}` | {md(value)} |")
        details.append("")
    return "\n".join(lines + [""] + details)


# ---------------------------------------------------------------------------------- formats


def formats_page() -> str:
    formats = importlib.import_module(f"{PACKAGE}.formats")
    lines = [
        "# Question formats",
        "",
        "Generated from the format registry (`vocalgrad.formats`): one module per format, each a",
        "`QuestionFormat` that declares everything about it. `vocalgrad build --question-format`",
        "picks one (default `" + formats.DEFAULT + "`); `vocalgrad list formats` prints the same",
        "names. A third-party package adds one under the entry-point group",
        f"`{formats.ENTRY_POINT_GROUP}` (see [architecture](../explanations/architecture.md)).",
        "",
        "| format | what each clip asks | constants | reversed control | prompt variants |",
        "|---|---|---|---|---|",
    ]
    details = []
    for fmt in formats.listed():
        variants = ", ".join(f"`{v}`" for v in fmt.variants) if fmt.variants else "every one"
        yes = {True: "yes", False: "no"}
        lines.append(
            f"| [`{fmt.name}`](#{fmt.name}) | {md(fmt.summary)} | {yes[fmt.constants]} "
            f"| {yes[fmt.reversible]} | {variants} |"
        )
        details += [
            f"## {fmt.name}",
            "",
            md(fmt.card_note[0].upper() + fmt.card_note[1:]) + ".",
            "",
            "| declared | value |",
            "|---|---|",
            f"| audited cue families | {', '.join(f'`{f}`' for f in fmt.audit_families)} |",
            "| target families where a dimension warps time | "
            f"{', '.join(f'`{f}`' for f in fmt.warp_target_families) or '—'} |",
            f"| order-free family gated | {'yes' if fmt.order_free_gated else 'reported only'} |",
            f"| blind measure and one-end observer apply | {yes[fmt.changes_over_time]} |",
            f"| endpoint rove | {md(fmt.rove_refusal) if fmt.rove_refusal else 'allowed'} |",
            f"| item ids tagged with the format | {yes[fmt.tagged]} |",
            f"| marker in figures | {md(fmt.symbol)} |",
            "",
        ]
    return "\n".join(lines + [""] + details)


# ---------------------------------------------------------------------------------- config

# Fields whose definition carries no comment of its own.
CONFIG_NOTES = {
    "source": "where the speech comes from: `builtin`, `folder:PATH`, `vctk:PATH` or "
    "`hf:NAME[@split]` (see the [sources](../tutorials/own-corpus.md))",
    "categories": "dimensions to build (default: the published nine); in a TOML file also "
    "spelt `dimensions`",
    "tiers": "magnitude tiers: `low`, `mid`, `high`",
    "curves": "progress curves p(t): `linear`, `quad_first_flat`, `quad_last_flat`, `jump`",
    "constants": "constant control clips per source and dimension, spread over the tiers (0: none)",
    "n_test": "test sources (speaker- and text-disjoint from train)",
    "n_train": "train sources (0: no train split; the audit then uses grouped CV)",
    "per_speaker_test": "test sources per speaker",
    "min_duration_s": "shortest source accepted, seconds",
    "sample_rate": "rendering rate, Hz (the listener's rate; 8000 to 96000)",
    "target_lufs": "loudness every source is normalised to",
    "magnitudes": "overrides of a dimension's tier magnitudes, `{dimension: {tier: value}}`, "
    "in the dimension's unit",
    "seed": "global seed; every random choice derives from (seed, item id)",
    "speaker_pattern": "regex with a `(?P<speaker>...)` group (optional `text` group) on a "
    "folder source's relative paths",
    "rove_endpoints": "place each changing path at random within three changes of its tier's "
    "endpoints, inside the dimension's domain, so one end of a clip does not give the "
    "direction away (gradual and comparison; see [validity](../explanations/validity.md))",
    "allow_large": "build more than 5,000,000 clips or 1 TB of audio (`--allow-large`); "
    "refused without it, before anything is planned. Not saved in `build.json`",
}


def _field_comments(cls: type) -> dict[str, str]:
    """Trailing `# ...` comments of a dataclass's field lines, read from its source."""
    import inspect

    source = inspect.getsource(cls)
    comments: dict[str, str] = {}
    current = None
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.start[1] == 4 and current is None:
            current = tok.string
        elif tok.type == tokenize.COMMENT and current:
            comments[current] = tok.string.lstrip("# ").strip()
        elif tok.type == tokenize.NEWLINE:
            current = None
    return comments


def _type_name(annotation: object) -> str:
    """`int`, `str | None`, `tuple[str, ...]`: the annotation as a reader writes it."""
    name = getattr(annotation, "__name__", None)
    text = name if name and not getattr(annotation, "__args__", None) else str(annotation)
    return text.replace("typing.", "").replace("Annotated[", "").split(", FieldInfo")[0]


def config_page() -> str:
    module = first_module(f"{PACKAGE}.stimuli.config", f"{PACKAGE}.config")
    cls = module.BuildConfig
    comments = _field_comments(cls)
    lines = [
        "# Build configuration",
        "",
        f"Generated from the fields of `{module.__name__}.BuildConfig`: everything that",
        "determines a benchmark's bytes, together with the package versions recorded in",
        "`build.json`. Values come, in this order of precedence, from the defaults, a",
        "`--protocol` preset, a `--design` preset, a TOML file's `[build]` table (`--config`)",
        "and the command-line flags.",
        "",
        "| field | type | default | what |",
        "|---|---|---|---|",
    ]
    for name, f in cls.model_fields.items():  # a pydantic model: validated field by field
        default = f.get_default(call_default_factory=True) if not f.is_required() else "required"
        if isinstance(default, tuple):
            default = ", ".join(default)
        note = CONFIG_NOTES.get(name) or comments.get(name)
        if note is None:
            log.warning(
                "BuildConfig.%s has no description: add one to CONFIG_NOTES in %s", name, __file__
            )
            note = ""
        type_ = _type_name(f.annotation)
        lines.append(f"| `{name}` | {md(type_)} | {md(default)} | {note} |")
    lines += ["", "## Presets", ""]
    for title, table in (
        ("`--protocol`", getattr(module, "PROTOCOLS", {})),
        ("`--design`", getattr(module, "DESIGNS", {})),
    ):
        for name, values in table.items():
            shown = ", ".join(f"`{k} = {v!r}`" for k, v in values.items()) or "the defaults"
            lines.append(f"- {title} `{name}`: {md(shown)}")
    lines += [
        "",
        "## A config file",
        "",
        "Any field may be set in a `[build]` table; `magnitudes` overrides a dimension's tiers:",
        "",
        "```toml",
        "[build]",
        'source = "folder:/data/my-recordings"',
        'speaker_pattern = "(?P<speaker>[^/]+)/"',
        'dimensions = ["voice_pitch", "volume"]  # or categories, the field\'s name',
        "n_test = 40",
        "n_train = 40",
        "[build.magnitudes.volume]",
        "high = 20.0",
        "```",
        "",
        "An unknown key or table is an error that lists the known ones and suggests the",
        "closest; a file may also hold a study's `[study]` table.",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- environment

ENVIRONMENT = {
    "VOCALGRAD_CACHE": "Cache folder: synthesised builtin speech, converted Whisper weights, "
    "the answer cache, probe features, official-release splits. Default "
    "`$XDG_CACHE_HOME/vocalgrad`, else `~/.cache/vocalgrad`. On a Ray "
    "cluster, a path every node sees for `build` from the builtin source.",
    "XDG_CACHE_HOME": "Parent of the default cache folder when `VOCALGRAD_CACHE` is unset.",
    "RAY_ADDRESS": "Default of `--ray-address`: run `build`, `eval` and `probe` on this Ray "
    "cluster (implies `--executor ray`).",
    "VOCALGRAD_ADMIN_TOKEN": "Admin token of `vocalgrad human serve` (at least 32 characters; "
    "`--dev` generates one when it is unset).",
    "VOCALGRAD_PROGRESS": "`bar`, `log` or `off`: how `build`, `verify`, `audit`, `eval` and "
    "`probe` show progress. Default: a bar with ETA where stderr is a terminal or in a "
    "notebook, else (`log`) one line every 30 s while a step runs.",
    "OPENAI_API_KEY": "Key the `openai:` listener sends (Python: `api_key_env=` names another "
    "variable). Not needed for a server on loopback.",
}
LIBRARY_ENVIRONMENT = {
    "HF_HUB_OFFLINE": "`1` keeps `hf:` datasets and models to the local Hugging Face cache "
    "(vocalgrad never downloads; this makes the libraries agree).",
    "HF_HOME": "Where the Hugging Face cache lives (`hf:` hub ids are looked up there).",
    "CUDA_VISIBLE_DEVICES": "Which GPUs torch sees; `hf:` and `whisper:` listeners use CUDA "
    "when torch finds one.",
    "TIKTOKEN_CACHE_DIR": "Where tiktoken keeps its encodings: inspect's `mockllm` model needs "
    "`o200k_base` there to run offline ([harnesses](../harnesses.md#offline)).",
}


def environment_names() -> dict[str, list[str]]:
    """Environment variables the package reads: literal names in `os.environ` / `os.getenv`
    reads, plus module constants named `*_ENV` (names passed to such reads)."""
    spec = importlib.util.find_spec(PACKAGE)
    found: dict[str, list[str]] = {}
    for root in spec.submodule_search_locations:
        for path in sorted(Path(root).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            where = f"{PACKAGE}/{path.relative_to(root).as_posix()}"
            for node in ast.walk(tree):
                name = None
                if isinstance(node, ast.Subscript) and _is_environ(node.value):
                    name = _const(node.slice)
                elif isinstance(node, ast.Call) and node.args:
                    func = node.func
                    if (
                        isinstance(func, ast.Attribute)
                        and func.attr in ("get", "pop")
                        and _is_environ(func.value)
                    ) or (isinstance(func, ast.Attribute) and func.attr == "getenv"):
                        name = _const(node.args[0])
                elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target = node.targets[0]
                    if isinstance(target, ast.Name) and target.id.endswith("_ENV"):
                        name = _const(node.value)
                if name:
                    found.setdefault(name, [])
                    if where not in found[name]:
                        found[name].append(where)
    return found


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _const(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def environment_page() -> str:
    found = environment_names()
    lines = [
        "# Environment variables",
        "",
        "Read by vocalgrad itself (found in the source at build time):",
        "",
        "| variable | read in | what |",
        "|---|---|---|",
    ]
    for name in sorted(found):
        note = ENVIRONMENT.get(name)
        if note is None:
            log.warning(
                "environment variable %s is read in %s but not described in %s",
                name,
                ", ".join(found[name]),
                __file__,
            )
            note = ""
        lines.append(f"| `{name}` | {', '.join(f'`{w}`' for w in found[name])} | {note} |")
    for name in sorted(set(ENVIRONMENT) - set(found)):
        log.warning("environment variable %s is described in %s but no longer read", name, __file__)
    lines += [
        "",
        "Honoured by the libraries vocalgrad uses:",
        "",
        "| variable | what |",
        "|---|---|",
    ]
    lines += [f"| `{k}` | {v} |" for k, v in LIBRARY_ENVIRONMENT.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- write

for page, make in (
    ("reference/cli.md", cli_page),
    ("reference/dimensions.md", dimensions_page),
    ("reference/formats.md", formats_page),
    ("reference/config.md", config_page),
    ("reference/environment.md", environment_page),
):
    with mkdocs_gen_files.open(page, "w") as f:
        f.write(make())
    mkdocs_gen_files.set_edit_path(page, "scripts/gen_ref.py")
api_pages()

"""The documentation stays true: every documented command parses with the real parser, the
site builds with `mkdocs build --strict`, and the README stays short."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MAX_README_LINES = 200
# Fenced blocks in these languages hold output, config or code, not shell commands.
NOT_SHELL = {"text", "toml", "python", "py", "bibtex", "yaml", "json", "ini"}
# A line whose arguments include this token stands for "more arguments here": a placeholder,
# not a command to parse.
PLACEHOLDER = "..."
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def shell_blocks(text: str) -> list[tuple[int, list[str]]]:
    """(first line number, lines) of every fenced shell block in a Markdown text."""
    blocks: list[tuple[int, list[str]]] = []
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None and match:
            fence = (match.group(2), match.group(3).lower())
            start, body = number + 1, []
        elif fence is not None and line.strip() == fence[0]:
            if fence[1] not in NOT_SHELL:
                blocks.append((start, body))
            fence = None
        elif fence is not None:
            body.append(line)
    return blocks


def documented_commands(path: Path, root: Path = ROOT) -> list[tuple[str, list[str]]]:
    """Every `vocalgrad ...` command line in the file's shell blocks, as (where, argv)."""
    found = []
    for start, lines in shell_blocks(path.read_text()):
        logical: list[tuple[int, str]] = []
        pending = ""
        for offset, raw in enumerate(lines):
            line = raw.strip().removeprefix("$ ")
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            logical.append((start + offset, pending + line))
            pending = ""
        for number, line in logical:
            words = shlex.split(line, comments=True)
            while words and ENV_ASSIGNMENT.match(words[0]):
                words = words[1:]  # `RAY_ADDRESS=head:6379 vocalgrad ...`
            if not words or words[0] != "vocalgrad" or PLACEHOLDER in words:
                continue
            found.append((f"{path.relative_to(root)}:{number}", words[1:]))
    return found


ALL_COMMANDS = [c for path in markdown_files() for c in documented_commands(path)]


def test_the_docs_document_commands():
    """The extraction finds the commands (a broken extractor would make the next test vacuous)."""
    where = {w.split(":")[0] for w, _ in ALL_COMMANDS}
    assert "README.md" in where and "docs/getting-started/quickstart.md" in where
    commands = {argv[0] for _, argv in ALL_COMMANDS if argv}
    assert {"build", "eval", "score", "report", "probe", "finetune", "human", "verify"} <= commands


@pytest.mark.parametrize("where,argv", ALL_COMMANDS, ids=[w for w, _ in ALL_COMMANDS])
def test_documented_command_parses(where, argv):
    from vocalgrad.cli import parser

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            parser().parse_args(argv)
    except SystemExit as exit_:
        if exit_.code not in (0, None):  # --help and --version exit 0
            pytest.fail(
                f"{where}: `vocalgrad {shlex.join(argv)}` does not parse:\n{stderr.getvalue()}"
            )


def makefile_commands(targets: tuple[str, ...] = ("demo", "remedies")) -> list[list[str]]:
    """The argv of every `vocalgrad` command the Makefile's targets run, as make expands them
    (`make -n -B`: printed, not run). A loop variable stands for its loop's first value, an
    arithmetic expansion for 1; a command substitution (optional arguments) is left out."""
    done = subprocess.run(
        ["make", "-n", "-B", "--no-print-directory", *targets],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    text = re.sub(r"\\\n\s*", " ", done.stdout)
    found = []
    for line in text.splitlines():
        if "bin/vocalgrad " not in line:
            continue
        loops = {v: words.split()[0] for v, words in re.findall(r"for (\w+) in ([^;]+);", line)}
        command = line.split("bin/vocalgrad ", 1)[1]
        command = re.sub(r"\$\(\([^)]*\)\)", "1", command)
        command = re.sub(r"\$\([^)]*\)", "", command)
        command = re.sub(r"\$(\w+)", lambda m, loops=loops: loops.get(m.group(1), "1"), command)
        found.append(shlex.split(re.split(r";|&&|\|\|", command)[0]))
    return found


def test_the_makefile_commands_parse():
    """`make demo` and `make remedies` run these: an option renamed in the CLI must be renamed
    there too (the demo once called a removed flag)."""
    from vocalgrad.cli import parser

    commands = makefile_commands()
    assert {"build", "eval", "probe", "report", "finetune"} <= {argv[0] for argv in commands}
    for argv in commands:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"Makefile: `vocalgrad {shlex.join(argv)}`:\n{stderr.getvalue()}")
        assert "deprecated" not in stderr.getvalue(), (argv, stderr.getvalue())


def test_extractor_joins_continuations_and_skips_output_and_placeholders(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```sh\n$ vocalgrad build --out x \\\n    --n-test 2   # a comment\n"
        "RAY_ADDRESS=h:1 vocalgrad eval x --listener baseline:ideal\n"
        "vocalgrad build ...\n```\n"
        "```text\nvocalgrad: error: not a command\n```\n"
        "    ```sh\n    vocalgrad score runs/a\n    ```\n"
    )
    found = documented_commands(page, root=tmp_path)
    assert [argv for _, argv in found] == [
        ["build", "--out", "x", "--n-test", "2"],
        ["eval", "x", "--listener", "baseline:ideal"],
        ["score", "runs/a"],
    ]


def test_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md: {len(lines)} lines (max {MAX_README_LINES})"


LINK = re.compile(r"\]\((?!https?://|#|mailto:)([^)\s#]+)(?:#[^)]*)?\)")


def test_markdown_links_resolve_in_the_source_tree():
    """The README invites reading the Markdown under docs/: every relative link of every page
    must lead to a file there (links to the generated reference pages were dead: those pages
    now exist as stubs that say where to read the same, and the site build replaces them)."""
    missing = []
    for page in markdown_files():
        if "scripts" in page.relative_to(ROOT).parts:
            continue
        text = re.sub(r"^(\s*)(`{3,}|~{3,}).*?^\1\2", "", page.read_text(), flags=re.S | re.M)
        targets = LINK.findall(text)
        missing += [
            f"{page.relative_to(ROOT)}: {t}" for t in targets if not (page.parent / t).exists()
        ]
    assert not missing, "links to missing files:\n" + "\n".join(missing)
    assert LINK.findall(README.read_text())  # the pattern finds links at all


def test_readme_keeps_the_make_commands():
    blocks = "\n".join("\n".join(lines) for _, lines in shell_blocks(README.read_text()))
    assert re.search(r"^make demo\b", blocks, re.M) and re.search(r"^make test\b", blocks, re.M)


def test_site_builds_strict(tmp_path):
    """The documentation site builds with every warning an error (`make test` runs it here,
    beside the other tests, not before them)."""
    needed = (
        "mkdocs",
        "material",
        "mkdocstrings_handlers.python",
        "mkdocs_gen_files",
        "mkdocs_literate_nav",
    )
    missing = [m for m in needed if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        pytest.skip(f"docs packages not installed ({', '.join(missing)}): pip install -e '.[docs]'")
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    # the notices mkdocs-material and a plugin print about MkDocs 2 are not build warnings
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "NO_MKDOCS_2_WARNING": "1",
        "DISABLE_MKDOCS_2_WARNING": "true",
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    site = tmp_path / "site"
    for page in (
        "reference/cli",
        "reference/dimensions",
        "reference/config",
        "reference/environment",
        "reference/api/evaluation/score",
    ):
        assert (site / page / "index.html").is_file(), f"{page} was not generated"
    cli = (site / "reference/cli/index.html").read_text()
    assert "--n-test" in cli and "vocalgrad finetune" in cli
    # the generated pages replace the Markdown stubs that stand in for them in the source tree
    for page in ("reference/cli", "reference/config", "reference/api"):
        assert "generated from the code when" not in (site / page / "index.html").read_text()

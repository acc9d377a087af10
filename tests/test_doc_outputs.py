"""The docs run: every command block of the README and the tutorials is executed, and what it
prints must match the output block the page shows, so a stale hash or line cannot land again.

A page opts in block by block with an HTML comment on the line before a fenced block (invisible
on the site and on GitHub):

- `<!-- doc-test: run -->`: run the block's commands, in order, in the page's own working folder
  (``exit=N``: the last command's expected exit status, 0 by default). `vocalgrad ...` runs in
  this process; any other line (or one with a pipe or a redirect) runs in bash.
- `<!-- doc-test: output -->`: what the last run block printed (stdout and stderr together). A
  line `...` stands for any number of lines; ``volatile="REGEX"`` (repeatable) marks parts that
  change from run to run, such as timings, which then match whatever the run printed there.
- `<!-- doc-test: file PATH -->`: write the block's text to PATH in the working folder (a
  config file the next command reads).
- `<!-- doc-test: skip REASON -->`: not run, and REASON says why (a GPU, a server, minutes).
- `<!-- doc-test: setup NAME PATH -->`, on its own line: make the test input NAME (see
  `SETUPS`) at PATH before the page's first block runs.

Every shell, text, Python, TOML and CSV block of these pages carries one marker, or the
`test_every_block_is_marked` test fails. `VOCALGRAD_DOCS_UPDATE=1 pytest tests/test_doc_outputs.py`
rewrites every output block that no longer matches with what the commands printed now (keeping
its `...` lines at the top and bottom); read the diff before committing it. See
docs/explanations/architecture.md ("Docs that run").
"""

from __future__ import annotations

import contextlib
import difflib
import gc
import io
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs" / "getting-started").glob("*.md")),
    *sorted((ROOT / "docs" / "tutorials").glob("*.md")),
]
UPDATE = os.environ.get("VOCALGRAD_DOCS_UPDATE") == "1"
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
KINDS = ("run", "output", "file", "skip", "setup")
# fenced blocks that must carry a marker: commands, their output, code and files
MARKED_LANGUAGES = {"", "sh", "bash", "shell", "console", "text", "python", "py", "toml", "csv"}
SHELL_ONLY = re.compile(r"[|<>;&`]|\$\(")  # pipes, redirects, sequences, substitutions
ELLIPSIS = "..."
VOLATILE = "<volatile>"
TIMEOUT_S = 300


@dataclass
class Block:
    """One fenced block of a page and its marker (kind None: unmarked)."""

    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    kind: str | None
    args: str
    body: list[str]  # the lines inside the fence, without the fence's indentation
    span: tuple[int, int]  # 0-based [start, end) of the body in the page's lines
    indent: str = ""

    @property
    def where(self) -> str:
        return f"{_shown(self.page)}:{self.line}"


@dataclass
class Parsed:
    blocks: list[Block] = field(default_factory=list)
    setups: list[tuple[str, str]] = field(default_factory=list)  # (name, path)
    errors: list[str] = field(default_factory=list)


def _shown(page: Path) -> str:
    return str(page.relative_to(ROOT) if page.is_relative_to(ROOT) else page)


def parse(page: Path) -> Parsed:
    """The page's fenced blocks with their markers, its setup lines, and marker errors."""
    lines = page.read_text().splitlines()
    out = Parsed()
    pending: tuple[int, str, str] | None = None  # (line, kind, args) waiting for its block
    i = 0
    while i < len(lines):
        line = lines[i]
        marker = MARKER.match(line)
        fence = FENCE.match(line)
        where = f"{_shown(page)}:{i + 1}"
        if marker:
            kind, args = marker.group(1), marker.group(2)
            if kind not in KINDS:
                out.errors.append(f"{where}: unknown doc-test marker {kind!r} (one of {KINDS})")
            elif kind == "setup":
                words = shlex.split(args)
                if len(words) != 2 or words[0] not in SETUPS:
                    out.errors.append(
                        f"{where}: write `setup NAME PATH`, NAME one of {list(SETUPS)}"
                    )
                else:
                    out.setups.append((words[0], words[1]))
            else:
                if pending:
                    out.errors.append(f"{where}: two markers before one block")
                pending = (i + 1, kind, args)
            i += 1
            continue
        if fence:
            indent, ticks, lang = fence.group(1), fence.group(2), fence.group(3).lower()
            end = i + 1
            while end < len(lines) and lines[end].strip() != ticks:
                end += 1
            body = [
                b[len(indent) :] if b.startswith(indent) else b.lstrip() for b in lines[i + 1 : end]
            ]
            kind, args = (pending[1], pending[2]) if pending else (None, "")
            out.blocks.append(Block(page, i + 1, lang, kind, args, body, (i + 1, end), indent))
            pending = None
            i = end + 1
            continue
        if pending and line.strip():
            out.errors.append(
                f"{_shown(page)}:{pending[0]}: a marker must come right before a block"
            )
            pending = None
        i += 1
    if pending:
        out.errors.append(f"{_shown(page)}:{pending[0]}: a doc-test marker with no block after it")
    return out


def commands(body: list[str]) -> list[str]:
    """The logical command lines of a shell block: continuations joined, prompts and comment
    lines dropped."""
    out, pending = [], ""
    for raw in body:
        line = raw.strip().removeprefix("$ ")
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line and not line.startswith("#"):
            out.append(line)
    return out


def volatile_patterns(args: str) -> list[re.Pattern[str]]:
    found = []
    for word in shlex.split(args):
        key, _, value = word.partition("=")
        if key != "volatile" or not value:
            raise ValueError(f"an output marker takes only volatile=REGEX, got {word!r}")
        found.append(re.compile(value))
    return found


def _normal(lines: list[str], volatile: list[re.Pattern[str]]) -> list[str]:
    """Lines without trailing spaces, the volatile parts replaced, blank lines at the ends
    dropped."""
    out = []
    for line in lines:
        line = line.rstrip()
        for pattern in volatile:
            line = pattern.sub(VOLATILE, line)
        out.append(line)
    while out and not out[0]:
        out.pop(0)
    while out and not out[-1]:
        out.pop()
    return out


def matches(expected: list[str], actual: list[str], volatile: list[re.Pattern[str]]) -> bool:
    """Whether the printed lines are what the doc shows: `...` lines match any lines, volatile
    parts match whatever was printed there."""
    pattern = "".join(
        r"(?:[^\n]*\n)*?" if line.strip() == ELLIPSIS else re.escape(line) + r"\n"
        for line in _normal(expected, volatile)
    )
    text = "".join(line + "\n" for line in _normal(actual, volatile))
    return re.fullmatch(pattern, text) is not None


def updated(expected: list[str], actual: list[str]) -> list[str]:
    """The new body of an output block: the printed lines, with the doc's `...` lines kept
    at its top and bottom (the lines they stand for left out)."""
    actual = _normal(actual, [])
    stripped = [line.strip() for line in _normal(expected, [])]
    if ELLIPSIS in stripped[1:-1]:
        raise ValueError("an output block with `...` between shown lines: update it by hand")
    head = stripped[:1] == [ELLIPSIS]
    tail = stripped[-1:] == [ELLIPSIS] and len(stripped) > 1
    shown = len(stripped) - head - tail
    if head and tail:  # keep the lines the doc showed: find them by their first line
        first = next((k for k, line in enumerate(actual) if line == stripped[1]), 0)
        return [ELLIPSIS, *actual[first : first + shown], ELLIPSIS]
    if head:
        return [ELLIPSIS, *actual[-shown:]]
    if tail:
        return [*actual[:shown], ELLIPSIS]
    return actual


# ----------------------------------------------------------------------------- test inputs


def make_corpus(folder: Path, cache: Path) -> None:
    """A folder of recordings as a user has one: six speakers (three female, three male: the
    builtin voices under other names), each reading two Harvard sentences of their own, one
    sub-folder per speaker, plus what real folders hold too: a headerless dump, a 0-byte file,
    a one-second cough and notes."""
    from vocalgrad.sources import builtin_sources, ensure_rendered

    names = {"builtin-f1": "ana", "builtin-m1": "ben", "builtin-f2": "cleo", "builtin-m2": "dev",
             "builtin-f3": "eva", "builtin-m3": "finn"}  # fmt: skip
    pool = builtin_sources(cache, speakers=list(names), max_sentences=2 * len(names))
    chosen = [
        source
        for k, speaker in enumerate(names)
        for source in [s for s in pool if s.speaker_id == speaker][2 * k : 2 * k + 2]
    ]
    for source in ensure_rendered(chosen):
        path = folder / names[source.speaker_id] / f"{source.source_id.rsplit('/', 1)[1]}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.path, path)
    speech, sr = sf.read(folder / "ana" / "h01-01.wav", dtype="float32")
    sf.write(folder / "ben" / "cough.wav", speech[int(0.3 * sr) : int(1.3 * sr)], sr)
    (folder / "cleo" / "broken.wav").write_bytes(b"")
    (folder / "dev" / "take2.raw").write_bytes(np.zeros(sr, np.int16).tobytes())
    (folder / "notes.txt").write_text("session notes\n")


SETUPS = {"corpus": make_corpus}


# ----------------------------------------------------------------------------- running a page


class Session:
    """One page's working folder, environment and captured output."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, builds: dict) -> None:
        self.folder = folder
        self.monkeypatch = monkeypatch
        self.builds = builds
        self.env: dict[str, str] = {}

    def run(self, line: str) -> tuple[int, str]:
        """Run one command line; its exit status and what it printed."""
        words = shlex.split(line, comments=True)
        if words and words[0] == "export" and not SHELL_ONLY.search(line):
            for assignment in words[1:]:
                name, _, value = assignment.partition("=")
                self.env[name] = value
                self.monkeypatch.setenv(name, value)
            return 0, ""
        if words and words[0] == "vocalgrad" and not SHELL_ONLY.search(line):
            return self._vocalgrad(words[1:])
        return self._bash(line)

    def _vocalgrad(self, argv: list[str]) -> tuple[int, str]:
        key = tuple(argv)
        out = _option(argv, "--out")
        if argv[:1] == ["build"] and out and _builtin_build(argv) and key in self.builds:
            code, text, built = self.builds[key]  # the same deterministic build: copied
            shutil.copytree(built, self.folder / out)
            return code, text
        code, text = capture(lambda: _main(argv))
        if argv[:1] == ["build"] and out and _builtin_build(argv) and code == 0:
            kept = Path(self.builds["root"]) / f"build-{len(self.builds)}"
            shutil.copytree(self.folder / out, kept)
            self.builds[key] = (code, text, kept)
        return code, text

    def _bash(self, line: str) -> tuple[int, str]:
        env = {
            **os.environ,
            **self.env,
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])
            ),
        }
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=self.folder,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=TIMEOUT_S,
        )
        return done.returncode, done.stdout

    def python(self, code: str, where: str) -> tuple[int, str]:
        namespace: dict = {"__name__": "__doc_test__"}
        return capture(lambda: exec(compile(code, where, "exec"), namespace) or 0)


def _option(argv: list[str], name: str) -> str | None:
    for k, word in enumerate(argv):
        if word == name and k + 1 < len(argv):
            return argv[k + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def _builtin_build(argv: list[str]) -> bool:
    """A build from the builtin speech and flags alone: the same argv, the same bytes."""
    return _option(argv, "--config") is None and _option(argv, "--source") in (None, "builtin")


def _main(argv: list[str]) -> int:
    from vocalgrad.cli import main

    try:
        return main(argv)
    except SystemExit as exit_:  # argparse: --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)


def capture(call) -> tuple[int, str]:
    """Run `call` as a terminal would show it: stdout, stderr, Python warnings and log records
    (which pytest would otherwise keep to itself) in one text, in the order they came. What
    earlier tests in this process left unreachable is collected first: its ResourceWarning,
    shown at whatever moment the collector ran, is not the command's (an unclosed file from
    another test appeared once in the quickstart's build output)."""
    gc.collect()
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setLevel(logging.WARNING)
    root = logging.getLogger()
    root.addHandler(handler)

    def show(message, category, filename, lineno, file=None, line=None):
        buffer.write(warnings.formatwarning(message, category, filename, lineno, line))

    try:
        with (
            contextlib.redirect_stdout(buffer),
            contextlib.redirect_stderr(buffer),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("default")
            warnings.showwarning = show
            code = call()
    finally:
        root.removeHandler(handler)
    return int(code or 0), buffer.getvalue()


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict:
    """Builtin builds done by an earlier page, kept to be copied: the README and the quickstart
    run the same build."""
    return {"root": str(tmp_path_factory.mktemp("doc-builds"))}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, cache_dir) -> dict[str, Path]:
    """Each test input (SETUPS) made once for the module, copied into the pages that use it."""
    made = {}
    root = tmp_path_factory.mktemp("doc-inputs")
    for name, make in SETUPS.items():
        make(root / name, cache_dir)
        made[name] = root / name
    return made


def run_page(page: Path, folder: Path, session: Session, inputs: dict[str, Path]) -> list[str]:
    """Run a page's marked blocks in order; the mismatches, each with its diff."""
    parsed = parse(page)
    assert not parsed.errors, "\n".join(parsed.errors)
    for name, path in parsed.setups:
        shutil.copytree(inputs[name], folder / path)
    failures: list[str] = []
    replacements: list[tuple[tuple[int, int], str, list[str]]] = []
    last: tuple[Block, str] | None = None
    for block in parsed.blocks:
        if block.kind == "file":
            target = folder / block.args.strip()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(block.body) + "\n")
        elif block.kind == "run":
            expected_exit = int(_option(shlex.split(block.args), "exit") or 0)
            printed = []
            if block.lang in ("python", "py"):
                code, text = session.python("\n".join(block.body) + "\n", block.where)
                printed.append(text)
                codes = [code]
            else:
                codes = []
                for line in commands(block.body):
                    code, text = session.run(line)
                    codes.append(code)
                    printed.append(text)
                    if code and code != expected_exit:
                        break
            want = [0] * (len(codes) - 1) + [expected_exit]
            if codes != want:
                failures.append(
                    f"{block.where}: exit status {codes} (expected {want}); it printed:\n"
                    + "".join(printed)[-3000:]
                )
            last = (block, "".join(printed))
        elif block.kind == "output":
            if last is None:
                failures.append(f"{block.where}: an output block before any run block")
                continue
            volatile = volatile_patterns(block.args)
            actual = last[1].splitlines()
            if matches(block.body, actual, volatile):
                continue
            if UPDATE:
                replacements.append((block.span, block.indent, updated(block.body, actual)))
                continue
            diff = difflib.unified_diff(
                _normal(block.body, volatile),
                _normal(actual, volatile),
                "the doc",
                "printed now",
                lineterm="",
            )
            failures.append(
                f"{block.where}: the output of {last[0].where} no longer matches the doc "
                "(VOCALGRAD_DOCS_UPDATE=1 rewrites it):\n" + "\n".join(diff)
            )
    if replacements:
        lines = page.read_text().splitlines()
        for (start, end), indent, body in sorted(replacements, reverse=True):
            lines[start:end] = [indent + line if line else line for line in body]
        page.write_text("\n".join(lines) + "\n")
    return failures


RUN_PAGES = [p for p in PAGES if any(b.kind == "run" for b in parse(p).blocks)]


@pytest.mark.parametrize("page", RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUN_PAGES])
def test_doc_page_runs_as_shown(page, tmp_path, monkeypatch, builds, inputs, cache_dir):
    """Every run block of the page runs, in its own folder with a fresh answer cache (the
    synthesised builtin speech is shared), and prints what the page shows."""
    folder = tmp_path / "work"
    cache = tmp_path / "cache"
    folder.mkdir()
    cache.mkdir()
    (cache_dir / "builtin").mkdir(exist_ok=True)
    (cache / "builtin").symlink_to(cache_dir / "builtin")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("VOCALGRAD_CACHE", str(cache))
    monkeypatch.setenv("COLUMNS", "100")  # argparse's help wraps at the terminal width
    failures = run_page(page, folder, Session(folder, monkeypatch, builds), inputs)
    assert not failures, "\n\n".join(failures)


def test_every_block_is_marked():
    """A command or an output a page shows is run, or says why not: a new block without a
    marker fails here, so nothing unchecked lands."""
    problems = []
    for page in PAGES:
        parsed = parse(page)
        problems += parsed.errors
        for block in parsed.blocks:
            if block.kind is None and block.lang in MARKED_LANGUAGES:
                problems.append(f"{block.where}: a ```{block.lang} block without a doc-test marker")
            if block.kind == "skip" and not block.args.strip():
                problems.append(f"{block.where}: `skip` needs a reason")
            if (
                block.kind == "run"
                and not commands(block.body)
                and block.lang not in ("python", "py")
            ):
                problems.append(f"{block.where}: a run block with no command")
            if block.kind == "output":
                try:
                    volatile_patterns(block.args)
                except (ValueError, re.error) as err:
                    problems.append(f"{block.where}: {err}")
    assert not problems, "\n".join(problems)
    assert len(RUN_PAGES) >= 5, RUN_PAGES  # the README, the quickstart and tutorials run


def test_the_runner_compares_and_updates(tmp_path, monkeypatch):
    """The comparison is not vacuous: a changed line fails with a diff, `...` and volatile
    parts match, and the update mode rewrites the block in place."""
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- doc-test: run -->\n```sh\nprintf 'a\\nb 1.5 s\\nc\\nd\\n'\n```\n\n"
        '<!-- doc-test: output volatile="[0-9.]+ s" -->\n```text\na\nb 9.9 s\n...\n```\n\n'
        "<!-- doc-test: run -->\n```sh\necho new\n```\n"
        "<!-- doc-test: output -->\n```text\nold\n```\n"
    )
    session = Session(tmp_path, monkeypatch, {"root": str(tmp_path)})
    failures = run_page(page, tmp_path, session, {})
    assert (
        len(failures) == 1
        and "-old\n+new" in failures[0]
        and "VOCALGRAD_DOCS_UPDATE" in failures[0]
    )
    monkeypatch.setattr(sys.modules[__name__], "UPDATE", True)
    assert run_page(page, tmp_path, session, {}) == []
    text = page.read_text()
    assert "```text\nnew\n```" in text and "b 9.9 s\n...\n```" in text  # the matching one kept
    monkeypatch.setattr(sys.modules[__name__], "UPDATE", False)
    assert run_page(page, tmp_path, session, {}) == []
    assert not matches(["a", "..."], ["b", "a"], []) and matches(["...", "a"], ["b", "a"], [])
    assert updated(["...", "x", "y"], ["1", "2", "3"]) == ["...", "2", "3"]
    assert updated(["...", "b", "..."], ["a", "b", "c"]) == ["...", "b", "..."]
    with pytest.raises(ValueError, match="by hand"):
        updated(["a", "...", "b"], ["a", "b"])

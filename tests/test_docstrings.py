"""Docstrings are contracts: every public function, method and class the API reference renders
has numpydoc sections (Parameters for what it takes, Returns for what it gives), read the way
the reference's renderer (griffe, under mkdocstrings) reads them, and no docstring of the
package is a measurement diary."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import griffe
import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
GEN_REF = ROOT / "docs" / "scripts" / "gen_ref.py"


def reference_modules() -> tuple[str, ...]:
    """`REFERENCE_MODULES` of the reference generator, read without importing it."""
    tree = ast.parse(GEN_REF.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "REFERENCE_MODULES" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("gen_ref.py defines no REFERENCE_MODULES")


def _public(obj: griffe.Object) -> list[griffe.Object]:
    """The members the reference renders: not private (its filter `!^_`), defined here (an
    imported name is rendered only when the module's `__all__` lists it)."""
    exported = set(getattr(obj, "exports", None) or ())
    out = []
    for name, member in obj.members.items():
        if name.startswith("_"):
            continue
        if member.is_alias:
            if name not in exported:
                continue
            try:
                member = member.final_target
            except (griffe.AliasResolutionError, griffe.CyclicAliasError):
                continue
        out.append(member)
    return out


def _sections(obj: griffe.Object) -> set[str]:
    if not obj.docstring:
        return set()
    return {s.kind.value for s in obj.docstring.parse("numpy")}


def _missing(obj: griffe.Object) -> list[str]:
    """What a rendered object's docstring lacks, as `path: what` lines."""
    if not obj.docstring or not obj.docstring.value.strip():
        return [f"{obj.path}: no docstring"]
    found = _sections(obj)
    needs = set()
    if obj.is_function:
        if "property" in obj.labels:
            return []  # read as an attribute: one line says what it is
        params = [p for p in obj.parameters if p.name not in ("self", "cls")]
        if params:
            needs.add("parameters")
        returns = str(obj.returns) if obj.returns is not None else ""
        if returns not in ("", "None", "NoReturn") and not obj.name.startswith("__"):
            needs.add("returns" if "Iterator" not in returns else "yields")
    elif obj.is_class:
        typed_dict = any("TypedDict" in str(b) or "Protocol" in str(b) for b in obj.bases)
        enum_like = any(str(b).endswith(("Enum", "Exception", "Error")) for b in obj.bases)
        fields = [m for m in obj.members.values() if m.is_attribute and not m.name.startswith("_")]
        if fields and not typed_dict and not enum_like:
            needs.add("attributes" if "attributes" in found else "parameters")
    return [f"{obj.path}: no {kind.title()} section" for kind in sorted(needs - found)]


def undocumented() -> tuple[int, list[str]]:
    """(objects the reference renders, what their docstrings lack)."""
    package = griffe.load("vocalgrad", search_paths=[str(SRC)], resolve_aliases=False)
    count, problems = 0, []
    for name in reference_modules():
        module = package[name.removeprefix("vocalgrad.")] if name != "vocalgrad" else package
        for obj in _public(module):
            if not (obj.is_function or obj.is_class):
                continue
            count += 1
            problems += _missing(obj)
            if obj.is_class:
                for method in _public(obj):
                    if method.is_function:
                        count += 1
                        problems += _missing(method)
    return count, problems


def test_every_rendered_definition_has_numpydoc_sections():
    count, problems = undocumented()
    assert count > 100, count  # the reference is not empty
    assert not problems, f"{len(problems)} of {count}:\n" + "\n".join(problems)


def test_the_check_sees_a_missing_section(tmp_path):
    """The check above is not vacuous: a function whose docstring names no parameter fails."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(
        'def f(x: int) -> int:\n    """Twice x."""\n    return 2 * x\n\n\n'
        'def g(x: int) -> int:\n    """Twice x.\n\n    Parameters\n    ----------\n'
        "    x : int\n        A number.\n\n    Returns\n    -------\n    int\n"
        '        Twice it.\n    """\n    return 2 * x\n'
    )
    package = griffe.load("pkg", search_paths=[str(tmp_path)])
    assert _missing(package["f"]) == ["pkg.f: no Parameters section", "pkg.f: no Returns section"]
    assert _missing(package["g"]) == []


# A measurement diary: a figure measured on some day, a speed-up, a revision's story, a
# corpus and build size a figure was read on. These belong on docs/results.md (with date,
# commit, machine and command) or in CHANGELOG.md; the code keeps the reason in words.
DIARY = [
    re.compile(p)
    for p in (
        r"\b\d+(\.\d+)? ?x (faster|slower|fewer|more|cheaper)\b",
        r"\brevision \d+\b",
        r"\b(measured|rendered) (at|on) (revision|20\d\d)",
        r"\b\d+ of (its|the) \d+ (dropped|kept|clips|sources)",
        r"\b20\d\d-\d\d-\d\d\b",
        r"\b\d+(\.\d+)?% of (the |its )?(linear|jump|twins|clips|pairs|sources|draws|builtin)",
        r"\b(builtin|klettres|ktuberling|tuxpaint|ALSA)( \w+)? \d+ \+ \d+\b",
        r"\border-free (accuracy )?0\.\d+",
        r"\bAUC:? 0\.\d\d",
        r"\bCPU[- ]s(econds?)?\b|\bms of CPU\b",
    )
]


def _docstrings(tree: ast.AST) -> list[tuple[int, str]]:
    return [
        (node.body[0].lineno, node.body[0].value.value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
        and isinstance(node.body[0].value.value, str)
    ]


def _comments(text: str) -> list[tuple[int, str]]:
    """Every comment, trailing ones included, with comments on consecutive lines joined into
    one (a figure may wrap): (first line, text)."""
    blocks: list[tuple[int, str]] = []
    last = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type != tokenize.COMMENT:
            continue
        line, body = tok.start[0], tok.string.lstrip("#").strip()
        if blocks and line == last + 1:
            blocks[-1] = (blocks[-1][0], f"{blocks[-1][1]} {body}")
        else:
            blocks.append((line, body))
        last = line
    return blocks


def diaries(root: Path = SRC / "vocalgrad") -> list[str]:
    """Docstrings and comments of the package that read as measurement diaries."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        for line, body in [*_docstrings(ast.parse(text)), *_comments(text)]:
            body = " ".join(body.split())  # a figure wrapped over two lines is one figure
            for pattern in DIARY:
                match = pattern.search(body)
                if match:
                    found.append(f"{path.relative_to(root)}:{line}: {match.group(0)!r}")
    return found


def test_no_docstring_or_comment_is_a_measurement_diary():
    found = diaries()
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        "One direct-form filter runs 2.3x faster than the two sections.",
        "rendered at revision 11, 72% of linear twins agree",
        "30 of its 35 dropped constants",
        "the edges told the direction (builtin 32 + 32, seed 11)",
        "order-free 0.59 [0.53, 0.66] once matched",
        "the constants stood apart (AUC 0.65, over the limit)",
        "compiling everything takes ~60 CPU-s",
        "opening each file twice cost 0.2 ms\n    of CPU a clip",
        "higher in 69% of the pairs",
    ],
)
def test_the_diary_check_sees_a_diary(tmp_path, text):
    (tmp_path / "m.py").write_text(f'"""{text}"""\n')
    assert diaries(tmp_path)


def test_the_diary_check_reads_every_comment(tmp_path):
    """Trailing comments and comments that wrap count; a string that holds a '#' does not."""
    (tmp_path / "a.py").write_text("x = 1  # integer indexing: 3.6x faster than a mask\n")
    (tmp_path / "b.py").write_text("# the brighter end (builtin 32\n# + 32, two seeds)\nx = 1\n")
    (tmp_path / "c.py").write_text('x = "# 2.3x faster"\n')
    assert [f.split(":")[0] for f in diaries(tmp_path)] == ["a.py", "b.py"]


@pytest.mark.parametrize(
    "text",
    [
        "Boolean masks for frames in the first and last 20% of the speech span.",
        'One line: "0.62 [0.55, 0.70]", kept together.',
        "Bigger rooms for bigger magnitudes (0.28 -> 0.64 s).",
        "Rates between 0.4x and 2.5x the source's.",
        "5 is enough for speech, and cheaper",
    ],
)
def test_the_diary_check_passes_a_reason(tmp_path, text):
    """What a docstring may say: a definition, a format, a range, a reason in words."""
    (tmp_path / "m.py").write_text(f'"""{text}"""\n')
    assert not diaries(tmp_path)

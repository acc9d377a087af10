"""Docstrings are contracts: every public function, method and class the API reference renders
has numpydoc sections (Parameters for what it takes, Returns for what it gives), read the way
the reference's renderer (griffe, under mkdocstrings) reads them, and no docstring of the
package is a measurement diary."""

from __future__ import annotations

import ast
import re
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


# A measurement diary: a figure measured on some day, a speed-up, a revision's story. These
# belong on docs/results.md (with date, commit, machine and command) or in CHANGELOG.md.
DIARY = [
    re.compile(p)
    for p in (
        r"\b\d+(\.\d+)?x (faster|slower|fewer|more)\b",
        r"\brevision \d+\b",
        r"\b(measured|rendered) (at|on) (revision|20\d\d)",
        r"\b\d+ of (its|the) \d+ (dropped|kept|clips|sources)",
        r"\b20\d\d-\d\d-\d\d\b",
        r"\b\d+(\.\d+)?% of (linear|jump|twins|clips)",
    )
]


def diaries(root: Path = SRC / "vocalgrad") -> list[str]:
    """Docstrings and comments of the package that read as measurement diaries."""
    found = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        docs = [
            (node.body[0].lineno, node.body[0].value.value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)
        ]
        comments = [
            (i, line.split("#", 1)[1])
            for i, line in enumerate(text.splitlines(), start=1)
            if "#" in line and line.lstrip().startswith("#")
        ]
        for line, body in [*docs, *comments]:
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
    ],
)
def test_the_diary_check_sees_a_diary(tmp_path, text):
    (tmp_path / "m.py").write_text(f'"""{text}"""\n')
    assert diaries(tmp_path)

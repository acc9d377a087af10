"""One of each: no block of six or more code lines appears twice in src/ (docstrings, comments,
imports and blank lines aside). A signature counts as one line however it is wrapped, and a
lone signature is never a block: a class implementing an interface method, or a function
forwarding to another, repeats its parameters by design."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
BLOCK = 6
CLOSERS = {")", "]", "}", "),", "],", "},"}


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped text) of the lines that count: no docstrings, comments,
    imports, blank lines or lone closing brackets; a wrapped signature joined into one."""
    out, in_doc, signature, in_import = [], False, None, False
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if in_import:
            in_import = not line.startswith(")")
            continue
        if line.startswith(("import ", "from ")) and line.endswith("("):
            in_import = True
            continue
        if signature is not None:
            signature[1].append(line)
            if line.endswith(":") and line.startswith(")"):
                out.append((signature[0], " ".join(signature[1])))
                signature = None
            continue
        if not in_doc and line.startswith(("def ", "async def ")) and line.endswith("("):
            signature = (number, [line])
            continue
        if line.count('"""') == 1:
            in_doc = not in_doc
            continue
        if (
            in_doc
            or not line
            or line.startswith(("#", '"""', "import ", "from "))
            or line in CLOSERS
        ):
            continue
        out.append((number, line))
    return out


def repeated_blocks(root: Path = SRC) -> list[list[tuple[str, int]]]:
    seen: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        lines = code_lines(path)
        for k in range(len(lines) - BLOCK + 1):
            block = tuple(text for _, text in lines[k : k + BLOCK])
            seen[block].append((str(path.relative_to(root)), lines[k][0]))
    return [where for where in seen.values() if len(where) > 1]


def test_no_block_of_six_lines_is_repeated_in_src():
    assert repeated_blocks() == []


def test_the_check_finds_a_copied_block(tmp_path):
    body = "\n".join(f"    x{i} = f(x{i - 1}, {i})" for i in range(1, 8))
    (tmp_path / "a.py").write_text(f"def a(x0):\n{body}\n    return x7\n")
    (tmp_path / "b.py").write_text(f'def b(x0):\n    """Same body."""\n{body}\n    return x7\n')
    found = repeated_blocks(tmp_path)
    assert found and {path for where in found for path, _ in where} == {"a.py", "b.py"}


def test_a_wrapped_signature_repeated_is_one_line(tmp_path):
    params = "\n".join(f"    p{i}: int," for i in range(8))
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(f"def f(\n{params}\n) -> int:\n    return {name!r}\n")
    assert repeated_blocks(tmp_path) == []

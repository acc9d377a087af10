"""One of each: no block of six or more code lines appears twice in src/ (docstrings, comments,
imports and blank lines aside). The one exception is a method's signature repeated where a
class implements an interface method (same parameters by design)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
BLOCK = 6
CLOSERS = {")", "]", "}", "),", "],", "},"}


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, stripped text) of the lines that count: no docstrings, comments,
    imports, blank lines or lone closing brackets."""
    out, in_doc = [], False
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
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


def is_signature(block: tuple[str, ...]) -> bool:
    return block[0].startswith("def ") and block[-1].startswith(")") and block[-1].endswith(":")


def repeated_blocks(root: Path = SRC) -> list[list[tuple[str, int]]]:
    seen: dict[tuple[str, ...], list[tuple[str, int]]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        lines = code_lines(path)
        for k in range(len(lines) - BLOCK + 1):
            block = tuple(text for _, text in lines[k : k + BLOCK])
            if not is_signature(block):
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

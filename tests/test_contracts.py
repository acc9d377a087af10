"""Contracts, not special cases: shared code names no dimension and no question format, and
asks no dimension module what it has; everything a dimension needs comes from its own module
through `bind`, everything a question format needs from its own module's `QuestionFormat`."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from vocalgrad import dimensions, formats

SRC = Path(__file__).resolve().parents[1] / "src" / "vocalgrad"
# Where a dimension's name is only an example or another word: an API docstring's example,
# an error message's example, and the listening test's volume-setting phase.
ALLOWED = {
    ("api.py", 'categories=["volume"]'),
    ("stimuli/config.py", 'e.g. ["volume", "echo"]'),
    ("human/study.py", 'e.g. ["volume", "echo"]'),
    ("human/app.py", 'phase = "volume"'),
}


# Where a question format's name is not a branch: inspect-ai finds a task by its function's
# name, so each built-in format has a named task that passes its name on; "which" is also an
# English word that ends a negation's reach in the answer parser.
FORMAT_ALLOWED = {
    ("questions/parsing.py", '"which",'),
    ("harness/inspect_tasks.py", 'return vocalgrad_task("gradual", dataset,'),
    ("harness/inspect_tasks.py", '"comparison", dataset, category,'),
    ("harness/inspect_tasks.py", '"recognition", dataset, category,'),
}


def shared_modules(package: str = "dimensions") -> list[Path]:
    """The modules outside `package` (whose modules may name their own members)."""
    return [p for p in sorted(SRC.rglob("*.py")) if package not in p.relative_to(SRC).parts]


def quoted_names(names: Iterable[str], package: str, allowed: set) -> list[str]:
    """Lines outside `package` that quote one of `names` and are not `allowed`."""
    quoted = re.compile(rf"""(['"])({"|".join(map(re.escape, names))})\1""")
    found = []
    for path in shared_modules(package):
        rel = path.relative_to(SRC).as_posix()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if quoted.search(line) and not any(rel == f and s in line for f, s in allowed):
                found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_shared_code_names_no_dimension():
    assert quoted_names(dimensions.names(), "dimensions", ALLOWED) == []


def test_shared_code_names_no_question_format():
    """No code outside `vocalgrad.formats` branches on a format's name or keeps a table keyed
    by one (`== "gradual"`, `{"comparison": ...}`): it asks the format object."""
    assert {"gradual", "comparison", "recognition"} <= set(formats.names())
    assert quoted_names(formats.names(), "formats", FORMAT_ALLOWED) == []


def test_no_module_is_asked_what_it_has():
    probe = re.compile(r"\b(getattr|hasattr)\((dim|dimension|dimensions\.get\([^)]*\))\b")
    found = [
        f"{p.relative_to(SRC)}:{n}"
        for p in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if probe.search(line)
    ]
    assert found == []


def test_every_dimension_is_bound_with_every_member():
    for dim in dimensions.bound():
        name = dim.name
        assert dim.name == name
        for member in (
            "endpoints",
            "inaudible_reason",
            "render",
            "measure",
            "output_time",
            "source_time",
            "blind_change",
            "evidence",
        ):
            assert callable(getattr(dim, member)), (name, member)
        assert dim.SPEC.warps_time == (dim.output_time is not dimensions.base.Bound.output_time)


def test_a_family_says_whether_it_wants_an_accelerator_before_it_loads():
    from vocalgrad.executors import ListenerSpec
    from vocalgrad.listeners import register, unregister
    from vocalgrad.listeners.registry import family

    assert family("baseline").wants_gpu is False  # a plain factory: the defaults
    assert family("whisper").wants_gpu and family("hf").wants_gpu and family("tuned").wants_gpu
    assert (
        ListenerSpec("whisper:tiny.en").wants_gpu and not ListenerSpec("baseline:random").wants_gpu
    )
    register("plain-test-family", lambda rest, *, dataset=None, **options: None)
    try:
        assert ListenerSpec("plain-test-family:x").wants_gpu is False
    finally:
        unregister("plain-test-family")

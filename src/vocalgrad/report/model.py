"""The report's content model: sections of text, tables and figures, rendered to HTML or md.

Sections are built once and rendered twice, so the HTML and the markdown never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Text:
    text: str
    kind: str = "p"  # "p" (paragraph), "note" (a muted aside) or "code" (a command)


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    marked: set[tuple[int, int]] = field(default_factory=set)  # (row, col) cells to highlight
    swatches: list[str | None] = field(default_factory=list)  # colour chip before a row's label
    caption: str = ""


@dataclass
class Figure:
    name: str  # file stem for markdown output; also the HTML element id
    png: bytes
    caption: str
    alt: str = ""


@dataclass
class Details:
    """Long raw text (manifests, the dataset card) folded away by default."""

    summary: str
    text: str


Block = Text | Table | Figure | Details


@dataclass
class Section:
    id: str  # stable anchor: tests and links rely on it
    title: str
    blocks: list[Block] = field(default_factory=list)
    glance: str = ""  # one line for the "at a glance" list at the top
    # what a reader must know before trusting the section's numbers: listed at the top of the
    # report and again at the section's start
    warnings: list[str] = field(default_factory=list)

"""The report's content model: sections of text, tables and figures, rendered to HTML or md.

Sections are built once and rendered twice, so the HTML and the markdown never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from matplotlib.figure import Figure as MplFigure


@dataclass
class Text:
    text: str
    kind: str = "p"  # "p" (paragraph), "note" (a muted aside), "code" (a command), "h3" (heading)


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    marked: set[tuple[int, int]] = field(default_factory=set)  # (row, col) cells to highlight
    swatches: list[str | None] = field(default_factory=list)  # colour chip before a row's label
    caption: str = ""
    # rows of reference listeners: set apart below the ranked rows, never marked or sorted
    references: list[list[str]] = field(default_factory=list)
    reference_swatches: list[str | None] = field(default_factory=list)
    sortable: bool = False  # the ranked rows sort by a click on a column header (HTML only)
    folded: str = ""  # when set, the table is folded away under this summary line


@dataclass(eq=False)
class Figure:
    """A figure drawn once, exported as PNG (shown), SVG and PDF (for papers), with the
    numbers it draws kept as rows for a CSV beside it."""

    name: str  # file stem for the exported files; also the HTML element id
    figure: MplFigure
    caption: str
    alt: str = ""
    data: list[dict] = field(default_factory=list)

    @cached_property
    def png(self) -> bytes:
        from vocalgrad.report.figures import export

        return export(self.figure, "png")


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
    # what a reader must know before trusting the section's numbers: each distinct warning is
    # listed once at the top of the report, naming the sections it affects
    warnings: list[str] = field(default_factory=list)

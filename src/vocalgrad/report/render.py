"""Sections -> one self-contained HTML file (inline CSS and one tiny sorting script, base64
PNGs, no URLs) or markdown; each figure also as SVG, PDF and CSV files beside it."""

from __future__ import annotations

import base64
import csv
import html
import io
import multiprocessing
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from vocalgrad.files import atomic_write_bytes
from vocalgrad.report.figures import export
from vocalgrad.report.model import Details, Figure, Section, Table, Text

FIGURE_FILES = ("svg", "pdf", "csv")
VECTOR_KINDS = ("svg", "pdf")  # the figure files for papers, drawn beside the page's PNGs
NUMBER = re.compile(r"-?\d[\d.]* \[")  # "0.62 [0.55, 0.70]": kept on one line

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d1d1f;
 margin:0;background:#fafafa}
main{max-width:1120px;margin:0 auto;padding:24px 28px 60px;background:#fff}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 10px;padding-top:10px;
 border-top:2px solid #eee}
nav{margin:10px 0 18px;font-size:14px}nav a{margin-right:14px;color:#0b5cad;text-decoration:none}
.glance{background:#f3f7fb;border-left:4px solid #0b5cad;padding:10px 16px;margin:12px 0}
.glance li{margin:3px 0}
table{border-collapse:collapse;margin:10px 0 4px;font-size:13px;width:auto;max-width:100%}
th,td{border-bottom:1px solid #e4e4e4;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#f4f4f4;font-weight:600}tr:nth-child(even) td{background:#fcfcfc}
td.best{font-weight:700;background:#fff6d6 !important}
.chip{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px}
.caption{font-size:12.5px;color:#555;margin:2px 0 14px}
.note{font-size:13px;color:#6b4e00;background:#fffaf0;border-left:3px solid #e0b000;
 padding:6px 10px}
.warnings{background:#fff4f2;border-left:4px solid #c62828;padding:10px 16px;margin:12px 0}
.warnings li{margin:3px 0}p.warning{font-size:13px;color:#8e1b1b;background:#fff4f2;
 border-left:3px solid #c62828;padding:6px 10px}
figure{margin:12px 0 18px}figure img{max-width:100%;height:auto;border:1px solid #eee;
 box-sizing:border-box}
figcaption{font-size:12.5px;color:#555}
details{margin:8px 0}summary{cursor:pointer;color:#0b5cad;font-size:14px}
pre{background:#f6f6f6;padding:10px;font-size:12px;overflow-x:auto;max-height:420px}
.scroll{overflow-x:auto}td.n{white-space:nowrap}h3{font-size:16px;margin:22px 0 6px}
.warnings ol{margin:4px 0;padding-left:22px}.where{color:#6d6d6d;font-size:13px}
p.warnref{font-size:13px;color:#8e1b1b;margin:4px 0 10px}
tbody.refs td{color:#555;font-style:italic;background:#f7f7f7}
tbody.refs tr.label td{font-style:normal;font-weight:600;font-size:12px;color:#6d6d6d;
 border-top:2px solid #bdbdbd;background:#fff}
table.sortable th{cursor:pointer;white-space:nowrap}table.sortable th:after{content:" ↕";color:#aaa}
table.sortable th[data-dir=asc]:after{content:" ↑";color:#333}
table.sortable th[data-dir=desc]:after{content:" ↓";color:#333}
.figlinks{font-size:12px;margin-left:6px}.figlinks a{color:#0b5cad;margin-right:6px}
@media print{
 @page{size:A4;margin:14mm 12mm}
 body{background:#fff;font-size:10pt}main{max-width:none;padding:0}
 nav,.figlinks,details{display:none}
 h2{break-after:avoid;border-top:1px solid #ccc;margin-top:16pt}h3{break-after:avoid}
 figure,tr,.glance,.warnings{break-inside:avoid}
 figure img{max-width:100%;border:none}
 .scroll{overflow:visible}table{font-size:8pt;width:100%}
 td,th{padding:2px 5px;overflow-wrap:break-word}
 #provenance td,#provenance th,#dataset td{overflow-wrap:anywhere}
 #psychometric table{font-size:7pt}
 pre{white-space:pre-wrap;overflow-wrap:anywhere;max-height:none}
 a{color:inherit;text-decoration:none}table.sortable th:after{content:""}
}
"""

# Sorts the ranked rows of a sortable table by the clicked column: numbers (a cell's leading
# number) numerically, other cells as text, dashes last; the reference rows stay below.
SORT_SCRIPT = """document.querySelectorAll("table.sortable").forEach(t => {
 const body = t.tBodies[0], heads = [...t.tHead.rows[0].cells];
 heads.forEach((th, i) => th.addEventListener("click", () => {
  const dir = th.dataset.dir === "desc" ? "asc" : "desc";
  heads.forEach(h => delete h.dataset.dir); th.dataset.dir = dir;
  const key = r => { const s = r.cells[i].textContent.trim(), v = parseFloat(s);
   return isNaN(v) ? (s === "–" ? null : s) : v; };
  const rows = [...body.rows].sort((a, b) => { const x = key(a), y = key(b);
   if (x === null || y === null) return (x === null) - (y === null);
   const o = typeof x === "number" && typeof y === "number" ? x - y
    : String(x).localeCompare(String(y));
   return dir === "asc" ? o : -o; });
  rows.forEach(r => body.append(r)); }));
});"""


def _e(text: str) -> str:
    """Escaped text. URLs quoted in text (licences, API base URLs) keep their look but lose
    the literal "://", so the file provably references nothing outside itself."""
    return re.sub(r"(https?):(?=//)", r"\1&#58;", html.escape(text, quote=True))


def _breakable(text: str) -> str:
    """Escaped, with a line-break opportunity after ":", "+", "/" and "_" inside a name
    ("whisper:<wbr>tiny.en+<wbr>trimmed"), so a narrow column or a printed page wraps a
    listener id at its joints rather than overflowing or splitting it anywhere."""
    return re.sub(r"([:+/_])(?=\w)", r"\1<wbr>", _e(text))


def _rows_html(
    rows: Sequence[Sequence[str]],
    swatches: Sequence[str | None],
    marked: set[tuple[int, int]] = frozenset(),
    nowrap: bool = True,
) -> str:
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, cell in enumerate(row):
            number = nowrap and NUMBER.match(cell)
            text = (_e(cell) if number else _breakable(cell)) + (" ★" if (i, j) in marked else "")
            if j == 0 and i < len(swatches) and swatches[i]:
                text = f'<span class="chip" style="background:{_e(swatches[i])}"></span>' + text
            cls = " ".join(c for c, on in (("best", (i, j) in marked), ("n", number)) if on)
            cls = f' class="{cls}"' if cls else ""
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return "".join(body)


def _table_html(t: Table) -> str:
    head = "".join(f"<th>{_breakable(h)}</th>" for h in t.header)
    head = f"<thead><tr>{head}</tr></thead>" if head else ""
    wide = not t.folded  # a folded table of many columns may wrap its numbers to fit
    body = f"<tbody>{_rows_html(t.rows, t.swatches, t.marked, wide)}</tbody>"
    if t.references:
        width = max(len(t.header), *(len(r) for r in t.references))
        body += (
            '<tbody class="refs"><tr class="label">'
            f'<td colspan="{width}">References (not ranked)</td></tr>'
            f"{_rows_html(t.references, t.reference_swatches, nowrap=wide)}</tbody>"
        )
    cls = ' class="sortable"' if t.sortable else ""
    caption = f'<div class="caption">{_e(t.caption)}</div>' if t.caption else ""
    table = f'<div class="scroll"><table{cls}>{head}{body}</table></div>{caption}'
    return f"<details><summary>{_e(t.folded)}</summary>{table}</details>" if t.folded else table


def _block_html(block, files: Mapping[str, Mapping[str, str]]) -> str:
    if isinstance(block, Text):
        if block.kind == "code":
            return f"<pre>{_e(block.text)}</pre>"
        if block.kind == "h3":
            return f"<h3>{_e(block.text)}</h3>"
        cls = ' class="note"' if block.kind == "note" else ""
        return f"<p{cls}>{_e(block.text)}</p>"
    if isinstance(block, Table):
        return _table_html(block)
    if isinstance(block, Figure):
        data = base64.b64encode(block.png).decode("ascii")
        links = "".join(
            f'<a href="{_e(name)}" download>{kind.upper()}</a>'
            for kind, name in files.get(block.name, {}).items()
        )
        links = f'<span class="figlinks">{links}</span>' if links else ""
        return (
            f'<figure id="fig-{_e(block.name)}"><img alt="{_e(block.alt or block.caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_e(block.caption)}{links}'
            "</figcaption></figure>"
        )
    if isinstance(block, Details):
        return (
            f"<details><summary>{_e(block.summary)}</summary><pre>{_e(block.text)}</pre></details>"
        )
    raise TypeError(f"unknown block {type(block).__name__}")


def distinct_warnings(sections: Sequence[Section]) -> list[tuple[str, list[Section]]]:
    """Each distinct warning once, with the sections it affects, in order of first mention."""
    seen: dict[str, list[Section]] = {}
    for s in sections:
        for w in dict.fromkeys(s.warnings):
            seen.setdefault(w, []).append(s)
    return list(seen.items())


def to_html(
    title: str,
    subtitle: str,
    sections: Sequence[Section],
    files: Mapping[str, Mapping[str, str]] | None = None,
) -> str:
    """The page; `files` (figure name -> kind -> file name beside the page) adds download links."""
    files = files or {}
    nav = "".join(f'<a href="#{s.id}">{_e(s.title)}</a>' for s in sections)
    glance = "".join(f"<li><b>{_e(s.title)}:</b> {_e(s.glance)}</li>" for s in sections if s.glance)
    warned = distinct_warnings(sections)
    number = {w: i + 1 for i, (w, _) in enumerate(warned)}
    items = "".join(
        f'<li id="warning-{number[w]}">{_e(w)} <span class="where">('
        + ", ".join(f'<a href="#{_e(s.id)}">{_e(s.title)}</a>' for s in where)
        + ")</span></li>"
        for w, where in warned
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>",
        f'<h1>{_e(title)}</h1><div class="caption">{_e(subtitle)}</div>',
        f"<nav>{nav}</nav>",
        f'<div class="glance"><b>At a glance</b><ul>{glance}</ul></div>',
    ]
    if warned:
        parts.append(f'<div class="warnings" id="warnings"><b>Warnings</b><ol>{items}</ol></div>')
    for s in sections:
        parts.append(f'<section id="{_e(s.id)}"><h2>{_e(s.title)}</h2>')
        refs = ", ".join(
            f'<a href="#warning-{number[w]}">{number[w]}</a>' for w in dict.fromkeys(s.warnings)
        )
        if refs:
            parts.append(
                f'<p class="warnref">⚠ Read with warning{"s" * (len(s.warnings) > 1)} '
                f"{refs} above.</p>"
            )
        parts += [_block_html(b, files) for b in s.blocks]
        parts.append("</section>")
    if any(isinstance(b, Table) and b.sortable for s in sections for b in s.blocks):
        parts.append(f"<script>{SORT_SCRIPT}</script>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_md(t: Table) -> str:
    header = t.header or [" "] * max((len(r) for r in t.rows), default=1)
    lines = [
        "| " + " | ".join(_md_cell(h) or " " for h in header) + " |",
        "|" + "---|" * len(header),
    ]
    for i, row in enumerate(t.rows):
        cells = [
            f"**{_md_cell(c)}** ★" if (i, j) in t.marked else _md_cell(c) for j, c in enumerate(row)
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if t.references:
        lines.append("| *references (not ranked)* |" + " |" * (len(header) - 1))
        lines += ["| " + " | ".join(f"*{_md_cell(c)}*" for c in row) + " |" for row in t.references]
    if t.caption:
        lines += ["", f"*{t.caption}*"]
    return "\n".join(lines)


def to_markdown(title: str, subtitle: str, sections: Sequence[Section], out: Path) -> str:
    """Markdown text; figures are written as PNG files next to `out` and linked relatively."""
    lines = [f"# {title}", "", subtitle, "", "**At a glance**", ""]
    lines += [f"- **{s.title}:** {s.glance}" for s in sections if s.glance]
    warned = distinct_warnings(sections)
    if warned:
        lines += ["", "**Warnings**", ""]
        lines += [
            f"{i + 1}. {w} ({', '.join(s.title for s in where)})"
            for i, (w, where) in enumerate(warned)
        ]
    for s in sections:
        lines += ["", f'<a id="{s.id}"></a>', "", f"## {s.title}", ""]
        for b in s.blocks:
            if isinstance(b, Text) and b.kind == "h3":
                lines += [f"### {b.text}", ""]
            elif isinstance(b, Text) and b.kind == "code":
                lines += ["```", b.text, "```", ""]
            elif isinstance(b, Text):
                lines += [f"> {b.text}" if b.kind == "note" else b.text, ""]
            elif isinstance(b, Table):
                lines += [_table_md(b), ""]
            elif isinstance(b, Figure):
                name = f"{out.stem}-{b.name}.png"
                (out.parent / name).write_bytes(b.png)
                lines += [f"![{b.alt or b.caption}]({name})", "", f"*{b.caption}*", ""]
            elif isinstance(b, Details):
                lines += [
                    f"<details><summary>{b.summary}</summary>",
                    "",
                    "```",
                    b.text.rstrip(),
                    "```",
                    "",
                    "</details>",
                    "",
                ]
    return "\n".join(lines).rstrip() + "\n"


def figure_files(sections: Sequence[Section], out: Path) -> dict[str, dict[str, str]]:
    """The file names of each figure beside `out` (`<stem>-<name>.svg`, `.pdf` and `.csv`),
    for the page's links; writes the CSVs, the numbers each figure draws.

    Parameters
    ----------
    sections
        The report's sections.
    out
        The report's path; the files lie beside it.

    Returns
    -------
    dict
        Figure name -> kind ("svg", "pdf", "csv") -> file name.
    """
    written: dict[str, dict[str, str]] = {}
    for block in _figures(sections):
        names = {kind: f"{out.stem}-{block.name}.{kind}" for kind in FIGURE_FILES}
        atomic_write_bytes(out.parent / names["csv"], _csv(block.data).encode("utf-8"))
        written[block.name] = names
    return written


@contextmanager
def exporting_figures(sections: Sequence[Section], out: Path) -> Iterator[None]:
    """Within the block, each figure is written beside `out` as SVG and PDF
    (`figure_files` names them), one child process per kind; on leaving, the children are
    waited for. Why: each export draws the figure anew (about 0.3 s on the 2-core machine),
    and the report, the demo's last step, has the machine to itself while the page's PNGs
    are drawn. Where processes cannot be forked, the files are written before the block.

    Parameters
    ----------
    sections
        The report's sections.
    out
        The report's path.

    Raises
    ------
    OSError
        A child failed (a full disk, say); what it printed above says why.
    """
    figures = _figures(sections)
    if "fork" not in multiprocessing.get_all_start_methods():
        for kind in VECTOR_KINDS:
            _export_all(figures, out, kind)
        yield
        return
    fork = multiprocessing.get_context("fork")
    children = {
        kind: fork.Process(target=_export_all, args=(figures, out, kind), daemon=True)
        for kind in VECTOR_KINDS
    }
    for child in children.values():
        child.start()
    try:
        yield
    finally:
        for child in children.values():
            child.join()
    failed = [f"{kind} (exit status {c.exitcode})" for kind, c in children.items() if c.exitcode]
    if failed:
        raise OSError(f"writing the figures' files failed: {', '.join(failed)}")


def _figures(sections: Sequence[Section]) -> list[Figure]:
    return [b for s in sections for b in s.blocks if isinstance(b, Figure)]


def _export_all(figures: Sequence[Figure], out: Path, kind: str) -> None:
    for block in figures:
        atomic_write_bytes(
            out.parent / f"{out.stem}-{block.name}.{kind}", export(block.figure, kind)
        )


def _csv(rows: Sequence[Mapping]) -> str:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _write(path: Path, data: bytes) -> None:
    """Atomically: a reader never sees half a file."""
    atomic_write_bytes(path, data)

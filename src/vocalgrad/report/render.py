"""Sections -> one self-contained HTML file (inline CSS, base64 PNGs, no URLs) or markdown."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

from vocalgrad.report.model import Details, Figure, Section, Table, Text

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
figure{margin:12px 0 18px}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:12.5px;color:#555}
details{margin:8px 0}summary{cursor:pointer;color:#0b5cad;font-size:14px}
pre{background:#f6f6f6;padding:10px;font-size:12px;overflow-x:auto;max-height:420px}
.scroll{overflow-x:auto}
"""


def _e(text: str) -> str:
    """Escaped text. URLs quoted in text (licences, API base URLs) keep their look but lose
    the literal "://", so the file provably references nothing outside itself."""
    return re.sub(r"(https?):(?=//)", r"\1&#58;", html.escape(text, quote=True))


def _table_html(t: Table) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in t.header)
    head = f"<thead><tr>{head}</tr></thead>" if head else ""
    body = []
    for i, row in enumerate(t.rows):
        cells = []
        for j, cell in enumerate(row):
            text = _e(cell) + (" ★" if (i, j) in t.marked else "")
            if j == 0 and i < len(t.swatches) and t.swatches[i]:
                text = f'<span class="chip" style="background:{_e(t.swatches[i])}"></span>' + text
            cls = ' class="best"' if (i, j) in t.marked else ""
            cells.append(f"<td{cls}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    caption = f'<div class="caption">{_e(t.caption)}</div>' if t.caption else ""
    return (f'<div class="scroll"><table>{head}<tbody>{"".join(body)}'
            f"</tbody></table></div>{caption}")


def _block_html(block) -> str:
    if isinstance(block, Text):
        if block.kind == "code":
            return f"<pre>{_e(block.text)}</pre>"
        cls = ' class="note"' if block.kind == "note" else ""
        return f"<p{cls}>{_e(block.text)}</p>"
    if isinstance(block, Table):
        return _table_html(block)
    if isinstance(block, Figure):
        data = base64.b64encode(block.png).decode("ascii")
        return (f'<figure id="fig-{_e(block.name)}"><img alt="{_e(block.alt or block.caption)}" '
                f'src="data:image/png;base64,{data}"><figcaption>{_e(block.caption)}'
                "</figcaption></figure>")
    if isinstance(block, Details):
        return f"<details><summary>{_e(block.summary)}</summary><pre>{_e(block.text)}</pre></details>"
    raise TypeError(f"unknown block {type(block).__name__}")


def to_html(title: str, subtitle: str, sections: Sequence[Section]) -> str:
    nav = "".join(f'<a href="#{s.id}">{_e(s.title)}</a>' for s in sections)
    glance = "".join(f"<li><b>{_e(s.title)}:</b> {_e(s.glance)}</li>" for s in sections if s.glance)
    warned = "".join(f'<li><a href="#{_e(s.id)}">{_e(s.title)}</a>: {_e(w)}</li>'
                     for s in sections for w in s.warnings)
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body><main>",
        f"<h1>{_e(title)}</h1><div class=\"caption\">{_e(subtitle)}</div>",
        f"<nav>{nav}</nav>", f'<div class="glance"><b>At a glance</b><ul>{glance}</ul></div>',
    ]
    if warned:
        parts.append(f'<div class="warnings" id="warnings"><b>Warnings</b><ul>{warned}</ul></div>')
    for s in sections:
        parts.append(f'<section id="{_e(s.id)}"><h2>{_e(s.title)}</h2>')
        parts += [f'<p class="warning">Warning: {_e(w)}</p>' for w in s.warnings]
        parts += [_block_html(b) for b in s.blocks]
        parts.append("</section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_md(t: Table) -> str:
    header = t.header or [" "] * max((len(r) for r in t.rows), default=1)
    lines = ["| " + " | ".join(_md_cell(h) or " " for h in header) + " |", "|" + "---|" * len(header)]
    for i, row in enumerate(t.rows):
        cells = [f"**{_md_cell(c)}** ★" if (i, j) in t.marked else _md_cell(c) for j, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    if t.caption:
        lines += ["", f"*{t.caption}*"]
    return "\n".join(lines)


def to_markdown(title: str, subtitle: str, sections: Sequence[Section], out: Path) -> str:
    """Markdown text; figures are written as PNG files next to `out` and linked relatively."""
    lines = [f"# {title}", "", subtitle, "", "**At a glance**", ""]
    lines += [f"- **{s.title}:** {s.glance}" for s in sections if s.glance]
    warned = [f"- **{s.title}:** {w}" for s in sections for w in s.warnings]
    if warned:
        lines += ["", "**Warnings**", "", *warned]
    for s in sections:
        lines += ["", f'<a id="{s.id}"></a>', "", f"## {s.title}", ""]
        lines += [f"> **Warning:** {w}\n" for w in s.warnings]
        for b in s.blocks:
            if isinstance(b, Text) and b.kind == "code":
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
                lines += [f"<details><summary>{b.summary}</summary>", "", "```", b.text.rstrip(),
                          "```", "", "</details>", ""]
    return "\n".join(lines).rstrip() + "\n"

"""The report as a reviewer meets it: a demo-like set of runs (two models, one in three question
formats, every reference listener, 12 sources), opened in Debian's Chromium through Playwright
at 1280 px and printed to PDF. References are never ranked; warnings are one line per problem;
every figure is readable and has its SVG, PDF and CSV beside the page."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import CHROMIUM_ARGS, chromium_path, needs_chromium
from test_report import _row, _write_run

from vocalgrad.report import build_sections, write_report
from vocalgrad.report.model import Figure

ARGS = CHROMIUM_ARGS
CATS = ("volume", "voice_pitch", "voice_clarity", "echo")
TIERS = (("low", 1.0), ("mid", 2.0), ("high", 3.0))
MODELS = {  # listener -> format -> P(correct)
    "whisper:tiny.en+trimmed": {"gradual": 0.62, "comparison": 0.7, "recognition": 0.55},
    "whisper:tiny.en": {"gradual": 0.58},
}
REFERENCES = {  # the references answer better than any model: none may be marked best
    "baseline:ideal": {"gradual": 0.99, "comparison": 0.98, "recognition": 0.97},
    "baseline:random": {"gradual": 0.5, "comparison": 0.5, "recognition": 0.5},
    "baseline:shortcut": {"gradual": 0.56},
    "baseline:one-end": {"gradual": 0.8},
    "baseline:always-increase": {"gradual": None},  # says "increase" to everything
}
VIEW = 1280
PRINT_WIDTH = 700  # CSS px across an A4 page inside 12 mm margins (186 mm at 96 dpi: 703)


def needs_browser(test):
    """A test in Chromium: in the slow end-to-end run (`make test SLOW=1`, CI), skipped
    without the browser."""
    return pytest.mark.slow(needs_chromium(test))


def _answers(listener: str, form: str, p: float | None, n_sources: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for cat in CATS:
        for tier, magnitude in TIERS:
            for source in range(n_sources):
                for direction in ("increase", "decrease"):
                    correct = direction == "increase" if p is None else bool(rng.random() < p)
                    r = _row(listener, cat, tier, magnitude, direction, source, correct)
                    r["format"] = form
                    r["key"] += f"|{form}"
                    rows.append(r)
    return rows


def _runs(root: Path, n_sources: int) -> list[Path]:
    runs, seed = [], 0
    for listener, forms in {**MODELS, **REFERENCES}.items():
        for form, p in forms.items():
            seed += 1
            name = re.sub(r"\W+", "-", f"{listener}-{form}")
            rows = _answers(listener, form, p, n_sources, seed)
            runs.append(_write_run(root / name, listener, rows))
    return runs


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("demo")
    runs = _runs(root / "runs", 12)
    html = write_report(runs, root / "out" / "report.html", n_boot=200, fit_boot=20)
    return {"runs": runs, "html": html}


def _section(text: str, sid: str) -> str:
    return text.split(f'<section id="{sid}">')[1].split("</section>")[0]


def test_no_reference_is_ever_marked_best(demo):
    """The ideal observer and the one-end observer beat every model here; still no star, no
    highlighted cell and no "best" line names a reference; they sit in the references rows."""
    text = demo["html"].read_text()
    for row in re.findall(r"<tr>.*?</tr>", text, re.S):
        if re.search(r"</span>baseline:|<td>baseline:", row):
            assert "★" not in row and 'class="best' not in row, row
    for sid in ("headline", "formats", "bias"):
        section = _section(text, sid)
        ranked = [t.split('<tbody class="refs">')[0] for t in section.split("<table")[1:]]
        assert not any("baseline:" in t.split("</thead>")[-1] for t in ranked), sid
        assert '<tbody class="refs">' in section, sid
    assert "★" in _section(text, "headline") and "★" in _section(text, "formats")
    glance = text.split('<div class="glance">')[1].split("</div>")[0]
    # the glance leads with the published (gradual) question's entries
    assert "Best model: whisper:tiny.en+trimmed at " in glance
    assert "the ideal observer 0.99" in glance


def test_demo_sized_report_has_no_source_warning_and_every_figure_file(demo):
    text = demo["html"].read_text()
    assert '<div class="warnings"' not in text  # 12 sources everywhere: nothing to warn about
    names = re.findall(r'<figure id="fig-([\w-]+)">', text)
    assert {"models", "model-whisper-tiny-en-trimmed", "model-whisper-tiny-en", "bias"} <= set(
        names
    )
    out = demo["html"].parent
    for name in names:
        stem = out / f"report-{name}"
        assert stem.with_suffix(".svg").read_bytes().lstrip().startswith(b"<?xml"), name
        assert stem.with_suffix(".pdf").read_bytes().startswith(b"%PDF"), name
        lines = stem.with_suffix(".csv").read_text().splitlines()
        assert len(lines) >= 2 and "," in lines[0], name
        assert f'href="report-{name}.svg"' in text and f'href="report-{name}.csv"' in text
    models = (out / "report-models.csv").read_text()
    assert "baseline:ideal" in models and ",reference," in models and ",model," in models


def test_every_axes_of_every_figure_draws_data(demo):
    """No empty axes: each visible panel has a point, bar, band or curve besides its guides."""
    parts = build_sections(demo["runs"], n_boot=50, fit_boot=10)
    figures = [b for s in parts for b in s.blocks if isinstance(b, Figure)]
    assert len(figures) >= 4
    for fig in figures:
        for ax in (a for a in fig.figure.axes if a.get_visible()):
            lines = [
                ln
                for ln in ax.lines
                if len(set(map(float, ln.get_ydata()))) > 1 or list(ln.get_xdata()) != [0, 1]
            ]
            drawn = len(lines) + len(ax.collections) + len(ax.patches) + len(ax.images)
            assert drawn > 0, f"{fig.name}: empty axes {ax.get_title()!r}"


def test_few_sources_make_one_short_warning(tmp_path):
    """Six sources behind every listener in three sections: one warning, one line."""
    runs = _runs(tmp_path / "runs", 6)
    text = write_report(runs, tmp_path / "r.html", n_boot=50, fit_boot=10).read_text()
    box = text.split('<div class="warnings" id="warnings">')[1].split("</div>")[0]
    assert box.count("<li") == 1 and "6 sources per dimension for every listener (under 10)" in box
    assert all(f'href="#{s}"' in box for s in ("headline", "formats", "bias"))


@needs_browser
def test_browser_at_1280px_fits_reads_and_sorts(demo, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium_path()), args=ARGS)
        page = browser.new_page(viewport={"width": VIEW, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(demo["html"].as_uri())
        assert page.evaluate("document.documentElement.scrollWidth") <= VIEW  # no sideways scroll
        for sid in ("headline", "formats", "bias"):  # the tables a reviewer reads fit too
            over = page.evaluate(f"""[...document.querySelectorAll('#{sid} .scroll')]
                .filter(d => d.closest('details') === null)
                .map(d => d.scrollWidth - d.clientWidth)""")
            assert over and max(over) <= 1, (sid, over)
        shown = page.evaluate("""[...document.querySelectorAll('figure img')].map(i => ({
            id: i.parentElement.id, w: i.getBoundingClientRect().width,
            h: i.getBoundingClientRect().height, natural: i.naturalWidth, ok: i.complete}))""")
        text_width = page.evaluate("document.querySelector('main').clientWidth")
        for f in shown:
            assert f["ok"] and f["natural"] > 0, f
            assert f["w"] <= text_width and f["h"] >= 200, f
            assert f["w"] / f["natural"] >= 0.75, f  # labels shrink by at most a quarter
        # sort the leaderboard by accuracy, both ways; the references stay below
        board = "#headline table.sortable"
        acc = lambda: page.evaluate(  # noqa: E731
            f"[...document.querySelector('{board}').tBodies[0].rows]"
            ".map(r => parseFloat(r.cells[2].textContent))"
        )
        page.click(f"{board} th:nth-child(3)")
        assert acc() == sorted(acc(), reverse=True)
        page.click(f"{board} th:nth-child(3)")
        assert acc() == sorted(acc())
        assert page.evaluate(f"document.querySelector('{board}').tBodies[1].className") == "refs"
        page.click(f"{board} th:nth-child(1)")
        names = page.evaluate(
            f"[...document.querySelector('{board}').tBodies[0].rows]"
            ".map(r => r.cells[0].textContent)"
        )
        assert names == sorted(names, reverse=True) and not any("baseline" in n for n in names)
        assert errors == []
        browser.close()


@needs_browser
def test_warnings_box_is_a_few_lines_in_the_browser(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    html = write_report(_runs(tmp_path / "runs", 6), tmp_path / "r.html", n_boot=50, fit_boot=10)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium_path()), args=ARGS)
        page = browser.new_page(viewport={"width": VIEW, "height": 900})
        page.goto(html.as_uri())
        lines = page.evaluate("""(() => { const ol = document.querySelector('#warnings ol');
            return ol.getBoundingClientRect().height /
                   parseFloat(getComputedStyle(ol.querySelector('li')).lineHeight); })()""")
        assert lines <= 2.2, lines
        top = page.evaluate("document.querySelector('#headline').getBoundingClientRect().top")
        assert top < 900  # the results start on the first screen
        browser.close()


@needs_browser
def test_printed_pdf_is_clean(demo, tmp_path):
    """Printed with the report's print stylesheet: A4 pages, nothing wider than the page, the
    results' text present and every page carrying text."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    pypdf = pytest.importorskip("pypdf", reason="pip install pypdf")
    pdf = tmp_path / "report.pdf"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(chromium_path()), args=ARGS)
        page = browser.new_page(viewport={"width": PRINT_WIDTH, "height": 1000})
        page.goto(demo["html"].as_uri())
        page.emulate_media(media="print")
        assert page.evaluate("document.documentElement.scrollWidth") <= PRINT_WIDTH + 1
        assert page.evaluate("getComputedStyle(document.querySelector('nav')).display") == "none"
        page.pdf(path=str(pdf), format="A4", print_background=True)
        browser.close()
    reader = pypdf.PdfReader(pdf)
    assert 3 <= len(reader.pages) <= 20, len(reader.pages)
    for pg in reader.pages:
        assert abs(float(pg.mediabox.width) - 595.3) < 2  # A4 portrait
    texts = [pg.extract_text() for pg in reader.pages]
    assert all(t.strip() for t in texts)
    whole = re.sub(r"\s+", " ", " ".join(texts))
    for needle in (
        "vocalgrad report",
        "Headline",
        "whisper:tiny.en+trimmed",
        "References (not ranked)",
        "Bias vs sensitivity",
        "Provenance",
    ):
        assert needle in whole, needle

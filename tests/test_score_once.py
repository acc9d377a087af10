"""Scoring happens once: `vocalgrad score` and the report take every metric from
`vocalgrad.evaluation.score.score_rows`, and no module of `vocalgrad.report` computes one."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np

import vocalgrad.report
from vocalgrad.evaluation.score import score_rows, score_run
from vocalgrad.report import build_sections

REPORT = Path(vocalgrad.report.__file__).parent
# numpy functions that reduce numbers to a statistic
REDUCTIONS = {
    "mean",
    "nanmean",
    "median",
    "nanmedian",
    "average",
    "std",
    "nanstd",
    "var",
    "percentile",
    "nanpercentile",
    "quantile",
    "corrcoef",
    "histogram",
}


def _violations(path: Path) -> list[str]:
    """Imports of a metric from `vocalgrad.stats` and calls of numpy reductions in one file."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "vocalgrad.stats":
            found += [
                f"{path.name}:{node.lineno} imports {a.name} from vocalgrad.stats"
                for a in node.names
                if not a.name.isupper()  # constants (MIN_SOURCES, ...) are not metrics
            ]
        if isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno} imports vocalgrad.stats"
                for a in node.names
                if a.name == "vocalgrad.stats"
            ]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("np", "numpy", "statistics")
            and node.func.attr in REDUCTIONS
        ):
            found.append(f"{path.name}:{node.lineno} calls {node.func.value.id}.{node.func.attr}")
    return found


def test_the_report_package_computes_no_metric():
    """Every statistic the report shows comes from evaluation (or the stage that owns it)."""
    found = [v for p in sorted(REPORT.glob("*.py")) for v in _violations(p)]
    assert not found, found


def test_the_checker_sees_a_metric_computed_in_place(tmp_path):
    """The scan above is not vacuous: a report module that averages, or imports a metric
    function, is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import numpy as np\nfrom vocalgrad.stats import MIN_SOURCES, summarise\n"
        "x = np.mean([1, 2])\n"
    )
    found = _violations(bad)
    assert any("summarise" in v for v in found) and any("np.mean" in v for v in found)
    assert not any("MIN_SOURCES" in v for v in found)


def _rows(seed: int) -> list[dict]:
    """One listener's answers on 12 sources x 2 categories, both directions, a reversed
    control on half of them and constant clips: a listener that hears now and then."""
    rng = np.random.default_rng(seed)
    rows = []
    for cat in ("volume", "voice_pitch"):
        for source in range(12):
            for direction in ("increase", "decrease", "constant"):
                item = f"{cat}-{source}-{direction}"
                heard = rng.random() < 0.7
                said = (
                    direction
                    if heard and direction != "constant"
                    else str(rng.choice(["increase", "decrease"]))
                )
                base = {
                    "item_id": item,
                    "listener": "model-a",
                    "variant": "default",
                    "mode": "choice",
                    "category": cat,
                    "direction": direction,
                    "tier": "none" if direction == "constant" else "mid",
                    "curve": "linear",
                    "magnitude": 1.0,
                    "source_id": f"src{source}",
                    "speaker_id": f"spk{source}",
                    "split": "test",
                    "error": None,
                }
                rows.append(
                    {
                        **base,
                        "key": f"{item}|none",
                        "control": "none",
                        "predicted": said,
                        "correct": said == direction,
                    }
                )
                if direction != "constant" and source % 2 == 0:
                    flipped = (
                        said
                        if rng.random() < 0.3
                        else {"increase": "decrease"}.get(said, "increase")
                    )
                    rows.append(
                        {
                            **base,
                            "key": f"{item}|reversed",
                            "item_id": f"{item}-rev",
                            "control": "reversed",
                            "reversed_of": item,
                            "predicted": flipped,
                            "correct": None,
                        }
                    )
    return rows


def test_score_and_report_show_the_same_figures(tmp_path):
    """The report's bias table shows exactly what `score_run` wrote for the same answers:
    items, sources, d′ and c with their CIs, the flip rate and the constant-clip rate."""
    run = tmp_path / "run"
    run.mkdir()
    rows = _rows(3)
    (run / "manifest.json").write_text(
        json.dumps(
            {
                "listener": {"listener": "model-a", "revision": "test", "sample_rate": 16000},
                "config": {"mode": "choice", "variants": ["default"], "controls": ["reversed"]},
                "modes": ["choice"],
            }
        )
    )
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = score_run(run, n_boot=200, seed=0)
    group = summary["groups"]["default/choice"]
    direct = score_rows(rows, n_boot=200, seed=0)
    assert json.dumps(group["table"]) == json.dumps(direct.table)  # NaN-safe equality
    bias = next(s for s in build_sections([run], n_boot=200, seed=0) if s.id == "bias")
    table = next(b for b in bias.blocks if getattr(b, "header", None))
    row = next(r for r in table.rows if r[0] == "model-a")
    overall = group["table"][0]
    assert row[1] == str(overall["n"]) and row[2] == str(overall["n_clusters"])
    assert row[4].startswith(f"{overall['dprime']:.2f}")
    flip = summary["controls"]["default/choice"]["reversed"]["flip_rate"]
    assert row[7] == f"{flip:.2f}" and 0 < flip < 1
    assert row[8] == f"{group['constant'][0]['increase_rate']:.2f}"


def test_a_paired_comparison_refuses_runs_of_several_answers_per_item(tmp_path):
    """Items pair by id: a run answering each item under two variants would pair every answer
    with one of the other run's, so the comparison is refused, not silently mispaired."""
    import pytest

    from vocalgrad.errors import ConfigError
    from vocalgrad.evaluation.score import compare_runs

    runs = []
    for name, variants in (("one", ("default",)), ("two", ("default", "swapped"))):
        run = tmp_path / name
        run.mkdir()
        rows = [
            {**r, "variant": v, "key": f"{r['key']}|{v}"}
            for r in _rows(1)
            if r["control"] == "none"
            for v in variants
        ]
        (run / "manifest.json").write_text(json.dumps({"listener": {"listener": "model-a"}}))
        (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        runs.append(run)
    assert compare_runs(runs[0], runs[0])["n"] > 0
    with pytest.raises(ConfigError, match="answers each item in 2 ways"):
        compare_runs(runs[0], runs[1])

"""Few sources: `vocalgrad score` shows the cluster count and never a zero-width interval;
probe curves follow the same rule."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from vocalgrad.cli import main
from vocalgrad.probing.stats import balanced_accuracy_ci

FLIP = {"increase": "decrease", "decrease": "increase"}


def write_run(folder, p_correct: float, seed: int) -> None:
    """80 answered items: 4 sources, 2 speakers (the issue's "one or two speakers" build)."""
    rng = np.random.default_rng(seed)
    rows = []
    for s in range(4):
        for j in range(20):
            direction = "increase" if j % 2 else "decrease"
            rows.append(
                {
                    "item_id": f"it-{s}-{j}",
                    "listener": "toy",
                    "variant": "default",
                    "mode": "generate",
                    "control": "none",
                    "error": None,
                    "category": ("volume", "voice_pitch")[j % 4 // 2],
                    "direction": direction,
                    "source_id": f"src{s}",
                    "speaker_id": f"spk{s // 2}",
                    "predicted": direction if rng.random() < p_correct else FLIP[direction],
                }
            )
    folder.mkdir()
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "manifest.json").write_text(json.dumps({"listener": {"listener": "toy"}}))


def test_score_shows_clusters_and_never_a_zero_width_interval(tmp_path, capsys):
    write_run(tmp_path / "random", 0.5, seed=1)
    assert (
        main(
            [
                "score",
                str(tmp_path / "random"),
                "--cluster",
                "speaker_id",
                "--by",
                "speaker_id",
                "--n-boot",
                "200",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "| group | n | clusters | accuracy [95% CI]" in table
    rows = {
        line.split("|")[1].strip(): line
        for line in table.splitlines()
        if line.startswith("| overall") or line.startswith("| spk")
    }
    assert rows["overall"].split("|")[3].strip() == "2"
    for speaker in ("spk0", "spk1"):  # one speaker each: no interval at all
        assert rows[speaker].split("|")[3].strip() == "1"
        assert "too few sources for a CI" in rows[speaker]
    for lo, hi in re.findall(r"\[(-?[\d.]+), (-?[\d.]+)\]", table):
        assert float(lo) < float(hi)  # the 0.375 [0.375, 0.375] cannot appear
    assert "jackknife t-interval" in table and "speaker_id clusters" in table
    summary = json.loads((tmp_path / "random" / "summary.json").read_text())
    methods = {g["group"]: g["ci_method"] for g in summary["groups"]["default/generate"]["table"]}
    assert methods == {"overall": "cluster jackknife t", "spk0": "none", "spk1": "none"}

    assert (
        main(
            [
                "score",
                str(tmp_path / "random"),
                "--cluster",
                "speaker_id",
                "--format",
                "csv",
                "--n-boot",
                "200",
            ]
        )
        == 0
    )
    header, overall = capsys.readouterr().out.splitlines()[:2]
    fields = dict(zip(header.split(","), overall.split(","), strict=True))
    assert fields["n_clusters"] == "2" and fields["ci_method"] == "cluster jackknife t"


def test_compare_with_two_clusters_prints_no_ci_next_to_p_half(tmp_path, capsys):
    """The issue's case: [+0.457, +0.529] next to a permutation p = 0.5."""
    write_run(tmp_path / "good", 0.97, seed=2)
    write_run(tmp_path / "random", 0.5, seed=3)
    assert (
        main(
            [
                "score",
                str(tmp_path / "good"),
                str(tmp_path / "random"),
                "--compare",
                "--cluster",
                "speaker_id",
                "--n-boot",
                "200",
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("paired difference")
    assert "in 2 speaker_id clusters" in line and "too few sources for a CI" in line
    assert "cluster permutation p = 0.5 " in line and "smallest attainable p = 0.5" in line
    assert not re.search(r"\[[+-][\d.]+, [+-][\d.]+\]", line)


def test_probe_curves_with_few_sources_get_an_honest_interval_or_none():
    rng = np.random.default_rng(4)
    pos = np.tile([True, False], 30)
    correct = (rng.random((2, 60)) < [[0.8], [0.5]]).astype(float)  # two curves
    one = balanced_accuracy_ci(correct, pos, np.zeros(60, int))
    assert np.all(np.isnan(one[1])) and np.all(np.isnan(one[2]))  # one source: no interval
    point, lo, hi = balanced_accuracy_ci(correct, pos, np.arange(60) // 20)  # three sources
    assert np.all(lo < point) and np.all(point < hi) and np.all(hi - lo > 0.1)
    other = (rng.random((2, 60)) < [[0.3], [0.9]]).astype(float)
    seeds = np.stack([correct, other], axis=1)  # seeds that disagree a lot
    _, lo_s, hi_s = balanced_accuracy_ci(seeds, pos, np.arange(60) // 20)
    assert np.all(hi_s - lo_s > hi - lo)  # seed-to-seed variation widens the interval
    many = balanced_accuracy_ci(correct, pos, np.arange(60))  # 60 sources: bootstrap
    assert many[1][0] == pytest.approx(
        np.percentile(  # unchanged: still the percentile bootstrap
            _bootstrap_reference(correct[0], pos, np.arange(60)), 2.5
        )
    )


def _bootstrap_reference(correct, pos, clusters, n_boot=1000, seed=0):
    """The cluster bootstrap of balanced accuracy, written out plainly, same draws."""
    rng = np.random.default_rng(seed)
    g = clusters.max() + 1
    draws = rng.integers(0, g, size=(n_boot, g))
    out = []
    for d in draws:
        w = np.bincount(d, minlength=g)[clusters]
        out.append(
            0.5
            * (
                np.sum(w * correct * pos) / np.sum(w * pos)
                + np.sum(w * correct * ~pos) / np.sum(w * ~pos)
            )
        )
    return np.array(out)


def test_two_runs_without_compare_point_to_it(tmp_path, capsys):
    """`score a b` printed two tables where a user expected the paired comparison: the
    paired comparison is named in the help and hinted at on stderr (stdout stays a table)."""
    from vocalgrad.cli import parser

    write_run(tmp_path / "a", 0.97, seed=2)
    write_run(tmp_path / "b", 0.5, seed=3)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    assert main(["score", a, b, "--n-boot", "50", "--output-format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert "paired difference" not in out and "hint" not in out
    assert err.strip() == (
        "hint: to compare these two runs item by item (a paired difference with its CI), "
        f"add --compare: vocalgrad score {a} {b} --compare"
    )
    assert main(["score", a, "--n-boot", "50"]) == 0 and "hint" not in capsys.readouterr().err
    assert main(["score", a, b, "--n-boot", "50", "--compare"]) == 0
    out, err = capsys.readouterr()
    assert "paired difference" in out and "hint" not in err
    assert main(["score", a, "--compare"]) == 2
    assert "--compare needs exactly two runs, got 1" in capsys.readouterr().err
    sub = next(a for a in parser()._actions if a.dest == "command").choices["score"]
    text = sub.format_help()
    assert "paired comparison" in text and "--compare" in sub.description
    by = next(a for a in sub._actions if a.dest == "by")
    assert by.help and "category,tier" in by.help  # `--by` had no help at all

"""The Python API: the README's snippet as written, and the CLI writing what the API writes."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import vocalgrad
from vocalgrad.cli import main
from vocalgrad.errors import ConfigError, DatasetError


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The README's quickstart, run from a fresh working folder."""
    cwd = tmp_path_factory.mktemp("api")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        ds = vocalgrad.build("out/x", source="builtin", n_test=2, n_train=0, categories=["volume"])
        res = vocalgrad.evaluate(ds, "baseline:ideal")
    return cwd, ds, res


def test_the_readme_snippet_works_as_written(built):
    cwd, ds, res = built
    assert isinstance(ds, vocalgrad.Dataset) and ds.categories == ("volume",)
    assert ds.report["clips_kept"] == len(ds) > 0
    assert (cwd / "runs" / "baseline_ideal" / "results.jsonl").is_file()  # the default run folder
    assert isinstance(res.accuracy, float) and res.accuracy >= 0.9  # the ideal observer hears it
    table = res.table()
    assert isinstance(table, pd.DataFrame)
    volume = table[table["group"] == "volume"].iloc[0]
    assert volume["n"] == res.counts["answered"] - sum(
        1 for r in res.rows() if r["direction"] == "constant"
    )
    assert volume["sources"] == 2
    assert volume["accuracy_lo"] <= volume["accuracy"] <= volume["accuracy_hi"]
    assert volume["accuracy"] == pytest.approx(res.accuracy)  # one category: overall == volume
    assert {"dprime", "criterion", "unparsed_rate", "ci_method"} <= set(table.columns)


def test_reopened_objects_read_what_is_on_disk(built):
    cwd, ds, res = built
    again = vocalgrad.load_dataset(cwd / "out" / "x")
    assert again.content_sha256 == ds.content_sha256
    assert len(again.rows("test")) == len(ds)
    run = vocalgrad.open_run(cwd / res.path)
    assert run.accuracy == res.accuracy
    assert run.manifest["listener"]["listener"] == "baseline:ideal"
    with pytest.raises(DatasetError):
        vocalgrad.load_dataset(cwd / "nothing-here")
    with pytest.raises(ConfigError):
        vocalgrad.open_run(cwd / "out")


def test_the_cli_calls_the_api_and_writes_the_same_summary(built, tmp_path):
    cwd, ds, res = built
    out = tmp_path / "cli-run"
    assert (
        main(["eval", str(cwd / ds.path), "--listener", "baseline:ideal", "--out", str(out)]) == 0
    )
    api_summary = vocalgrad.score(cwd / res.path, write=False)
    cli_summary = json.loads((out / "summary.json").read_text())
    api_table = api_summary["groups"]["default/choice"]["table"]
    cli_table = cli_summary["groups"]["default/choice"]["table"]
    for a, c in zip(api_table, cli_table, strict=True):
        for key in ("n", "accuracy", "accuracy_lo", "accuracy_hi", "dprime", "criterion"):
            same = (math.isnan(a[key]) and math.isnan(c[key])) or a[key] == pytest.approx(c[key])
            assert same, key


def test_score_writes_csv_and_markdown(built, capsys):
    cwd, _, res = built
    assert main(["score", str(res.path), "--output-format", "csv"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("listener,prompt,group,n,accuracy")
    assert any(",volume," in line for line in lines[1:])
    assert main(["score", str(res.path)]) == 0
    assert "| volume |" in capsys.readouterr().out


def test_listener_objects_and_options(built, tmp_path):
    cwd, ds, _ = built
    from vocalgrad.listeners.baselines import ConstantListener

    run = vocalgrad.evaluate(cwd / ds.path, ConstantListener("increase"), tmp_path / "inc")
    assert run.accuracy == pytest.approx(0.5)  # balanced twins: always-increase is at chance
    with pytest.raises(ConfigError, match="spec string"):
        vocalgrad.evaluate(
            cwd / ds.path,
            ConstantListener("increase"),
            tmp_path / "x",
            listener_options={"device": "cpu"},
        )
    with pytest.raises(ConfigError, match="unknown listener scheme"):
        vocalgrad.evaluate(cwd / ds.path, "nosuch:model", tmp_path / "y")


def test_every_eval_setting_is_reachable_from_the_api_and_the_cli(built, tmp_path):
    """Each `EvalConfig` field can be set from `vocalgrad.evaluate` (a config object or a
    keyword) and from `vocalgrad eval` (an option of the same name), and lands in the run's
    manifest; a mistyped setting is refused with the closest name."""
    import dataclasses

    from vocalgrad.cli import parser
    from vocalgrad.cli.evaluate import eval_config_from

    cwd, ds, _ = built
    fields = [f.name for f in dataclasses.fields(vocalgrad.EvalConfig)]
    sub = next(a for a in parser()._actions if hasattr(a, "choices") and a.choices)
    dests = {a.dest for a in sub.choices["eval"]._actions}
    assert set(fields) <= dests, set(fields) - dests
    args = parser().parse_args(
        [
            "eval", str(ds.path), "--listener", "baseline:random", "--max-new-tokens", "7",
            "--no-both-orders", "--seed", "3", "--few-shot", "1", "--audio-first",
        ]
    )  # fmt: skip
    config = eval_config_from(args)
    assert (config.max_new_tokens, config.both_orders, config.seed) == (7, False, 3)
    assert (config.few_shot, config.audio_first) == (1, True)

    run = vocalgrad.evaluate(
        cwd / ds.path,
        "baseline:random",
        tmp_path / "run",
        vocalgrad.EvalConfig(seed=5),
        max_new_tokens=9,
        both_orders=False,
        variants=["default"],
    )
    asked = run.manifest["config"]
    assert (asked["seed"], asked["max_new_tokens"], asked["both_orders"]) == (5, 9, False)
    with pytest.raises(ConfigError, match="did you mean 'max_new_tokens'"):
        vocalgrad.evaluate(cwd / ds.path, "baseline:random", tmp_path / "x", max_new_token=9)

"""Export: people land in the evaluation result format; agreement and exclusions reported."""

from __future__ import annotations

import json

import pytest
from e2e.human_helpers import Env, do_trial, make_dataset, write_study

from vocalgrad.cli import main
from vocalgrad.human.store import Store
from vocalgrad.stats import summarise

FLIP = {"increase": "decrease", "decrease": "increase"}
WRONG = {"1": "2", "2": "3", "3": "1"}
REQUIRED = (
    "item_id",
    "listener",
    "variant",
    "category",
    "direction",
    "tier",
    "curve",
    "source_id",
    "speaker_id",
    "split",
    "response",
    "predicted",
    "correct",
    "rt_s",
)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """4 slots, 2 raters per item: a01 right, a02 half wrong, a03 wrong on catches, a04 fails
    the headphone check."""
    env = Env(tmp_path_factory.mktemp("export"), n_annotators=4, annotators_per_item=2)
    flips = {"n": 0}

    def half(kind, truth):
        if kind != "test":
            return truth
        flips["n"] += 1
        return FLIP[truth] if flips["n"] % 2 else truth

    choosers = {
        "a01": lambda kind, truth: truth,
        "a02": half,
        "a03": lambda kind, truth: FLIP[truth] if kind == "catch" else truth,
        "a04": lambda kind, truth: WRONG[truth],
    }
    for who, choose in choosers.items():
        _, c = env.annotator(who)
        while c.get("/api/state").json()["phase"] not in ("done", "excluded"):
            tid = c.get("/api/state").json()["trial"]["id"]
            kind = (
                env.store.conn().execute("SELECT kind FROM trials WHERE id=?", (tid,)).fetchone()[0]
            )
            do_trial(c, env.db, env.clock.advance, lambda t, k=kind, f=choose: f(k, t))
    return env


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_writes_result_rows(finished, tmp_path, capsys):
    env = finished
    out = tmp_path / "out"
    assert main(["human", "export", "--study", str(env.study), "--out", str(out)]) == 0
    assert "pooled accuracy" in capsys.readouterr().out
    rows = _read(out / "results.jsonl")
    listeners = {r["listener"] for r in rows}
    assert listeners == {"human", "human:a01", "human:a02", "human:a03"}  # a04 excluded
    for r in rows:
        assert all(k in r for k in REQUIRED), r
        assert r["predicted"] in ("increase", "decrease", None)
        assert r["correct"] == (r["predicted"] == r["direction"])
    a01 = [r for r in rows if r["listener"] == "human:a01"]
    assert all(r["correct"] for r in a01) and all(r["plays"] == 1 for r in a01)
    assert all(r["prompt"].startswith(f"Does the {r['category'].replace('_', ' ')}") for r in a01)
    # metrics treat people like models
    s = summarise(a01, by=("category",), cluster="source_id", n_boot=50)
    assert s[0]["accuracy"] == 1.0 and s[0]["n"] == len(a01)
    a02 = summarise([r for r in rows if r["listener"] == "human:a02"], n_boot=0)[0]
    assert 0.3 < a02["accuracy"] < 0.7
    pooled = [r for r in rows if r["listener"] == "human"]
    assert len({r["item_id"] for r in pooled}) == len(pooled)
    assert all("a03" not in r["annotators"] for r in pooled)  # flagged: not pooled
    summarise(pooled, by=("category", "tier", "curve"), n_boot=20)
    ties = [r for r in pooled if r["response"] == "increase:1,decrease:1"]
    assert all(r["predicted"] is None and not r["correct"] for r in ties)

    manifest = json.loads((out / "manifest.json").read_text())
    build = json.loads((env.dataset / "build.json").read_text())
    assert manifest["dataset_sha256"] == build["content_sha256"]
    assert manifest["listener"] == "human" and manifest["study"]["annotators_per_item"] == 2
    assert manifest["versions"]["vocalgrad"] and manifest["versions"]["fastapi"]
    assert manifest["prompts"]["volume"].startswith("Does the volume increase or decrease")

    report = json.loads((out / "agreement.json").read_text())
    assert report["per_annotator"]["a01"]["accuracy"] == 1.0
    assert report["per_annotator"]["a03"]["catch"]["accuracy"] == 0.0
    assert report["flagged"] == {"a03": "catch accuracy 0/2 below 75%"}
    assert "headphone screening failed" in report["excluded"]["a04"]
    assert report["agreement"]["overall"]["n_items"] > 0
    assert report["agreement"]["overall"]["krippendorff_alpha"] is not None
    assert report["rt"]["overall"]["median_s"] == pytest.approx(0.5)
    trials = _read(out / "trials.jsonl")
    assert {t["kind"] for t in trials} == {"screening", "practice", "test", "catch"}


def test_include_flagged_pools_everyone(finished, tmp_path):
    out = tmp_path / "out"
    main(
        ["human", "export", "--study", str(finished.study), "--out", str(out), "--include-flagged"]
    )
    pooled = [r for r in _read(out / "results.jsonl") if r["listener"] == "human"]
    assert any("a03" in r["annotators"] for r in pooled)


def test_progress_and_invite_commands(finished, capsys):
    assert main(["human", "progress", "--study", str(finished.study)]) == 0
    text = capsys.readouterr().out
    assert "| a04 | excluded |" in text and "catch accuracy 0/2" in text
    assert (
        main(["human", "progress", "--study", str(finished.study), "--output-format", "json"]) == 0
    )
    assert len(json.loads(capsys.readouterr().out)) == 4
    assert (
        main(
            [
                "human",
                "invite",
                "--study",
                str(finished.study),
                "--public-url",
                "https://x/",
                "--replace",
                "a04",
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.strip()
    assert line.startswith("a04r1\thttps://x/s/")
    assert (
        main(
            [
                "human",
                "invite",
                "--study",
                str(finished.study),
                "--public-url",
                "https://x",
                "--n",
                "1",
            ]
        )
        == 2
    )  # every original slot is already invited
    assert "every annotator slot has an invite" in capsys.readouterr().err


def test_create_refuses_to_overwrite(finished, capsys):
    assert main(["human", "create", str(finished.dataset), "--study", str(finished.study)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_serve_refuses_without_admin_token(finished, monkeypatch, capsys):
    monkeypatch.delenv("VOCALGRAD_ADMIN_TOKEN", raising=False)
    code = main(
        ["human", "serve", str(finished.dataset), "--study", str(finished.study), "--port", "1"]
    )
    assert code == 2 and "VOCALGRAD_ADMIN_TOKEN" in capsys.readouterr().err


def _answer_all(env: Env, who: str, choose) -> None:
    _, c = env.annotator(who)
    while c.get("/api/state").json()["phase"] not in ("done", "excluded"):
        tid = c.get("/api/state").json()["trial"]["id"]
        kind = env.store.conn().execute("SELECT kind FROM trials WHERE id=?", (tid,)).fetchone()[0]
        do_trial(c, env.db, env.clock.advance, lambda t, k=kind: choose(k, t))


def test_pooled_export_names_items_without_an_unflagged_annotator(tmp_path, capsys):
    """One rater per item: a02 is flagged and a03 never starts, so their items have no pooled
    row; the export lists them with the reason instead of covering fewer items in silence."""
    env = Env(tmp_path, n_annotators=3, annotators_per_item=1)
    _answer_all(env, "a01", lambda kind, truth: truth)
    _answer_all(env, "a02", lambda kind, truth: FLIP[truth] if kind == "catch" else truth)
    raters = dict(
        env.store.conn()
        .execute("SELECT item_id, annotator_id FROM trials WHERE kind='test'")
        .fetchall()
    )
    out = tmp_path / "out"
    assert main(["human", "export", "--study", str(env.study), "--out", str(out)]) == 0
    orphans = {i for i, who in raters.items() if who != "a01"}
    err = capsys.readouterr().err
    assert f"{len(orphans)} of {len(raters)} study items have no pooled answer" in err
    coverage = json.loads((out / "agreement.json").read_text())["pooled_coverage"]
    assert coverage["pool"] == len(raters) and coverage["pooled"] == len(raters) - len(orphans)
    assert coverage["missing"] == {
        i: "answered only by annotators flagged on catch trials"
        if raters[i] == "a02"
        else "no answer (yet) from an annotator who passed the headphone screen"
        for i in orphans
    }
    assert json.loads((out / "manifest.json").read_text())["pooled_coverage"] == coverage
    main(["human", "export", "--study", str(env.study), "--out", str(out), "--include-flagged"])
    missing = json.loads((out / "agreement.json").read_text())["pooled_coverage"]["missing"]
    assert set(missing) == {i for i in orphans if raters[i] == "a03"}


def test_create_warns_about_a_public_build(tmp_path, capsys):
    """Seed 0 is the default: anyone can rebuild the clips, so `create` says so and offers a
    seed."""
    public = make_dataset(tmp_path / "public", n_sources=2, tiers=("high",))
    study = write_study(tmp_path / "study.toml")
    assert main(["human", "create", str(public), "--study", str(study)]) == 0
    err = capsys.readouterr().err
    assert "warning: dataset was built with seed 0" in err and "--seed " in err
    seed = int(err.split("--seed ")[1].split("`")[0])
    assert seed >= 2**32  # the offered seed is itself private
    warnings = Store(tmp_path / "study.sqlite").meta()["warnings"]
    assert len(warnings) == 1 and "seed 0" in warnings[0]
    out = tmp_path / "out"
    assert main(["human", "export", "--study", str(study), "--out", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["warnings"] == warnings
    capsys.readouterr()

    build = json.loads((public / "build.json").read_text())
    (public / "build.json").write_text(json.dumps(build | {"seed": seed}))  # now a private build
    assert (
        main(
            [
                "human",
                "create",
                str(public),
                "--study",
                str(study),
                "--db",
                str(tmp_path / "private.sqlite"),
            ]
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err
    assert Store(tmp_path / "private.sqlite").meta()["warnings"] == []
    (public / "build.json").unlink()  # no build.json: a downloaded release
    assert (
        main(
            [
                "human",
                "create",
                str(public),
                "--study",
                str(study),
                "--db",
                str(tmp_path / "download.sqlite"),
            ]
        )
        == 0
    )
    assert "has no build.json" in capsys.readouterr().err

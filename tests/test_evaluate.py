"""The evaluation harness on a small builtin benchmark with the reference listeners."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from vocalgrad.errors import ConfigError, VocalgradError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate, load_results
from vocalgrad.evaluation.score import score_run
from vocalgrad.listeners import Listener, Request, load_listener
from vocalgrad.listeners.baselines import RandomListener
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, cache_dir) -> Path:
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    out = tmp_path_factory.mktemp("eval") / "ds"
    build(
        BuildConfig(n_test=4, n_train=2, tiers=("low", "high"), curves=("linear", "jump")),
        out,
        workers=2,
        audit=False,  # not asked here: the audit's own tests audit
    )
    return out


def run(dataset: Path, spec: str, out: Path, **kw) -> dict:
    listener = load_listener(spec, dataset=dataset)
    evaluate(
        dataset,
        listener,
        out,
        EvalConfig(**kw),
        cache=AnswerCache(out.parent / f"{out.name}.sqlite"),
    )
    return score_run(out, n_boot=500)


def overall(summary: dict, key: str = "default/choice") -> dict:
    return summary["groups"][key]["table"][0]


def test_baselines_behave_as_they_must(dataset, tmp_path):
    rnd = overall(run(dataset, "baseline:random", tmp_path / "random"))
    assert 0.4 < rnd["accuracy"] < 0.6 and rnd["accuracy_lo"] < 0.5 < rnd["accuracy_hi"]
    assert abs(rnd["dprime"]) < 0.5
    inc = overall(run(dataset, "baseline:always-increase", tmp_path / "inc"))
    assert inc["accuracy"] == 0.5 and inc["increase_rate"] == 1.0 and abs(inc["criterion"]) > 1.5
    assert abs(inc["dprime"]) < 1e-9
    summary = run(dataset, "baseline:ideal", tmp_path / "ideal", controls=("reversed", "silence"))
    table = summary["groups"]["default/choice"]["table"]
    assert table[0]["accuracy"] >= 0.9 and table[0]["dprime"] > 2.5
    for group in table[1:]:
        assert group["accuracy_lo"] > 0.5, group["group"]
    controls = summary["controls"]["default/choice"]
    assert controls["reversed"]["flip_rate"] > 0.9
    assert controls["silence"]["unparsed_rate"] == 1.0  # ties on silence are no answer, not a guess
    assert any(
        "same-answer alarm" in a
        for a in run(dataset, "baseline:always-decrease", tmp_path / "dec")["alarms"]
    )


def test_generate_mode_parses_free_text(dataset, tmp_path):
    summary = run(
        dataset,
        "baseline:random",
        tmp_path / "gen",
        mode="generate",
        variants=("default", "swapped"),
    )
    assert set(summary["groups"]) == {"default/generate", "swapped/generate"}
    _, rows = load_results(tmp_path / "gen")
    assert all(
        r["parse_status"] == "ok" and r["response"] in ("increase", "decrease") for r in rows
    )


class CountingListener(RandomListener):
    """Random answers, counting how often the model is actually asked; fails on request."""

    def __init__(self, fail_on: set[str] = frozenset()) -> None:
        super().__init__(seed=3)
        self.asked = 0
        self.fail_on = set(fail_on)

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        if any(r.item_id in self.fail_on for r in requests):
            raise VocalgradError("backend refused this batch")
        self.asked += len(requests)
        return super().score_choices(requests)


def test_cache_makes_reruns_free_and_errors_are_recorded(dataset, tmp_path):
    cache = AnswerCache(tmp_path / "cache.sqlite")
    first = CountingListener()
    evaluate(dataset, first, tmp_path / "a", EvalConfig(batch_size=8), cache=cache)
    assert first.asked > 0
    second = CountingListener()
    evaluate(dataset, second, tmp_path / "b", EvalConfig(batch_size=8), cache=cache)
    assert second.asked == 0, "an identical run in a new folder must come from the cache"
    _, rows = load_results(tmp_path / "a")
    victim = rows[0]["item_id"]
    failing = CountingListener(fail_on={victim})
    evaluate(
        dataset,
        failing,
        tmp_path / "c",
        EvalConfig(batch_size=1),
        cache=AnswerCache(tmp_path / "other.sqlite"),
    )
    _, rows = load_results(tmp_path / "c")
    errored = [r for r in rows if r["error"]]
    assert [r["item_id"] for r in errored] == [victim] and errored[0]["predicted"] is None
    assert score_run(tmp_path / "c", n_boot=100)["groups"]["default/choice"]["errors"] == 1


class SlowListener(RandomListener):
    """Random answers, 20 ms per batch."""

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        time.sleep(0.02)
        return super().score_choices(requests)


def test_reported_seconds_cover_the_whole_run(dataset, tmp_path):
    """The run's wall time, not the last batch's (a loop variable once shadowed the start
    time, and the Ray benchmark read 108 Whisper items/s where 4 were answered)."""
    counts = evaluate(
        dataset,
        SlowListener(seed=3),
        tmp_path / "a",
        EvalConfig(batch_size=1, limit=10),
        cache=AnswerCache(tmp_path / "cache.sqlite"),
    )
    assert counts["answered"] == 10 and counts["seconds"] >= 10 * 0.02


def test_run_folder_refuses_a_different_config(dataset, tmp_path):
    evaluate(
        dataset,
        RandomListener(),
        tmp_path / "r",
        EvalConfig(limit=10),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    with pytest.raises(ConfigError, match="another config"):
        evaluate(
            dataset,
            RandomListener(),
            tmp_path / "r",
            EvalConfig(limit=11),
            cache=AnswerCache(tmp_path / "c.sqlite"),
        )


@pytest.mark.slow  # starts, kills and restarts the CLI
def test_killed_eval_resumes_without_duplicates(dataset, tmp_path):
    env = {**os.environ, "VOCALGRAD_CACHE": str(tmp_path / "cache")}
    args = [
        sys.executable,
        "-m",
        "vocalgrad.cli",
        "eval",
        str(dataset),
        "--listener",
        "baseline:ideal",
        "--batch-size",
        "4",
        "--controls",
        "reversed",
        "--limit",  # 72 items and their 72 reversed controls: 36 batches of 4 for the kill to cut
        "72",
    ]
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [*args, "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    results = out / "results.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and not (
        results.is_file() and results.read_text().count("\n") >= 8
    ):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = results.read_text().count("\n")
    subprocess.run([*args, "--out", str(out)], env=env, check=True, capture_output=True)
    clean = tmp_path / "clean"
    subprocess.run(
        [*args, "--out", str(clean)],
        env={**env, "VOCALGRAD_CACHE": str(tmp_path / "cache2")},
        check=True,
        capture_output=True,
    )
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    keys = [r["key"] for r in lines]
    assert len(keys) == len(set(keys)), "no row may be written twice"

    def strip(rows):
        return sorted(
            json.dumps(
                {k: v for k, v in r.items() if k not in ("seconds", "cached")}, sort_keys=True
            )
            for r in rows
        )

    assert strip(lines) == strip(load_results(clean)[1])
    assert 0 < partial < len(lines)


def test_unknown_listener_specs_are_clear():
    with pytest.raises(
        ConfigError, match="unknown listener scheme .gpt.; known: baseline:..., hf:"
    ):
        load_listener("gpt:foo")
    with pytest.raises(ConfigError, match="expected SCHEME:NAME"):
        load_listener("baseline")
    with pytest.raises(ConfigError, match="seed must be"):
        load_listener("baseline:random:abc")
    with pytest.raises(ConfigError, match="unknown baseline"):
        load_listener("baseline:oracle")
    with pytest.raises(ConfigError, match="needs the dataset"):
        load_listener("baseline:ideal")


def test_a_family_registered_at_run_time_is_found_by_its_scheme(dataset):
    from vocalgrad.listeners import families, register, unregister
    from vocalgrad.listeners.baselines import ConstantListener

    seen = {}

    def factory(rest, *, dataset=None, **options):
        seen.update(rest=rest, dataset=dataset, **options)
        return ConstantListener("decrease")

    register("mine", factory)
    try:
        listener = load_listener("mine:model-a", dataset=dataset, temperature=0.5)
        assert listener.listener_id == "baseline:always-decrease"
        assert seen == {"rest": "model-a", "dataset": dataset, "temperature": 0.5}
        assert families()["mine"].endswith("factory")
    finally:
        unregister("mine")
    assert {"baseline", "whisper", "hf", "openai", "tuned"} <= set(families())
    with pytest.raises(ConfigError, match="without ':'"):
        register("a:b", factory)


def test_text_only_requests_carry_no_audio(dataset, tmp_path):
    seen: list[Request] = []

    class Spy(Listener):
        listener_id = "spy"

        def generate(self, requests, max_new_tokens=16):
            seen.extend(requests)
            return ["It decreases." for _ in requests]

    evaluate(
        dataset,
        Spy(),
        tmp_path / "spy",
        EvalConfig(controls=("text_only",), limit=4),
        cache=AnswerCache(tmp_path / "spy.sqlite"),
    )
    assert any(r.target_audio is None for r in seen) and any(
        r.target_audio is not None for r in seen
    )
    _, rows = load_results(tmp_path / "spy")
    assert {r["predicted"] for r in rows} == {"decrease"}


def test_adaptive_eval_and_report_through_the_cli(dataset, tmp_path, capsys):
    from vocalgrad.cli import main

    out = tmp_path / "adaptive"
    assert (
        main(
            [
                "eval",
                str(dataset),
                "--listener",
                "baseline:ideal",
                "--adaptive",
                "quest",
                "--max-trials",
                "16",
                "--dimensions",
                "volume",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    adaptive = json.loads((out / "adaptive.json").read_text())
    assert adaptive["results"][0]["n_trials"] == 16
    assert adaptive["results"][0]["status"] in ("ok", "below_range")  # the ideal observer hears it
    run = tmp_path / "run"
    assert (
        main(
            [
                "eval",
                str(dataset),
                "--listener",
                "baseline:random",
                "--limit",
                "40",
                "--out",
                str(run),
            ]
        )
        == 0
    )
    report = tmp_path / "report.html"
    assert main(["report", str(run), str(out), "--out", str(report), "--n-boot", "100"]) == 0
    html = report.read_text()
    for section in ("headline", "bias", "psychometric", "dataset", "provenance"):
        assert f'id="{section}"' in html
    assert "baseline:random" in html and "http://" not in html and "https://" not in html


def _demo_rows(fmt: str) -> list[dict]:
    """The demo's test split in miniature: 5 categories x 10 sources (two a speaker), each
    source with every tier (x curve for gradual clips) in both directions, and three constants
    a source for gradual clips."""
    curves = (
        ("linear", "jump", "quad_first_flat", "quad_last_flat") if fmt == "gradual" else ("held",)
    )
    rows = []
    for c in ("echo", "volume", "voice_pitch", "voice_clarity", "audio_roughness"):
        for s in range(10):
            source = f"builtin/spk{s // 2}/src{s}"
            for tier, mag in (("low", 1.0), ("mid", 2.0), ("high", 3.0)):
                for curve in curves:
                    for d in ("increase", "decrease"):
                        rows.append(
                            {
                                "item_id": f"{fmt}-{c}-{s}-{tier}-{curve}-{d}",
                                "category": c,
                                "source_id": source,
                                "tier": tier,
                                "curve": curve,
                                "magnitude": mag,
                                "direction": d,
                                "format": fmt,
                            }
                        )
            for k in range(3 if fmt == "gradual" else 0):
                rows.append(
                    {
                        "item_id": f"{fmt}-{c}-{s}-constant-{k}",
                        "category": c,
                        "source_id": source,
                        "tier": "none",
                        "curve": "none",
                        "magnitude": 0.0,
                        "direction": "constant",
                        "format": fmt,
                    }
                )
    return rows


def test_a_limited_run_is_balanced_over_what_the_score_reads():
    """Two items per source and category (the demo's --limit): one twin pair from every
    source, tiers and curves within one pair of even, the same whatever the row order."""
    from vocalgrad.evaluation.subset import balanced_subset

    items = _demo_rows("gradual")
    head, report = balanced_subset(items, 2 * 10 * 5)
    assert len(head) == 100 and len({r["item_id"] for r in head}) == 100
    assert report["balanced"] and not report["problems"]
    for category, counts in report["per_category"].items():
        mine = [r for r in head if r["category"] == category]
        assert counts["increase"] == counts["decrease"] == 10 and counts["constant"] == 0
        assert len({r["source_id"] for r in mine}) == 10, category
        assert sorted(counts["tiers"].values()) == [6, 6, 8]
        assert sorted(counts["curves"].values()) == [4, 4, 6, 6]
        pairs = Counter((r["source_id"], r["tier"], r["curve"]) for r in mine)
        assert set(pairs.values()) == {2}  # both clips of each twin pair
    assert balanced_subset(items[::-1], 100)[0] == head  # the same items whatever the order
    everything, whole = balanced_subset(items, 10_000)
    assert len(everything) == len(items) and whole["whole"] and whole["balanced"]


def test_limited_runs_on_the_formats_of_one_source_set_ask_the_same_cells():
    from vocalgrad.evaluation.subset import balanced_subset

    cells = {}
    for fmt in ("gradual", "comparison"):
        head, report = balanced_subset(_demo_rows(fmt), 100)
        assert report["balanced"]
        cells[fmt] = {(r["category"], r["source_id"], r["tier"], r["direction"]) for r in head}
    assert cells["gradual"] == cells["comparison"]


def test_constants_take_their_share_after_one_pair_per_source():
    from vocalgrad.evaluation.subset import balanced_subset

    _, report = balanced_subset(_demo_rows("gradual"), 5 * 60)
    for counts in report["per_category"].values():  # 60 a category: 1/9 of it constant
        assert counts["constant"] in (6, 8) and counts["increase"] == counts["decrease"]
        assert counts["sources"] == 10


def test_a_limit_that_cannot_be_balanced_says_why():
    from vocalgrad.evaluation.subset import balanced_subset, describe

    items = [r for r in _demo_rows("comparison") if r["category"] in ("echo", "volume")]
    head, report = balanced_subset(items, 3)
    assert len(head) == 3 and not report["balanced"]
    assert any("fewer than one twin pair" in p for p in report["problems"])
    assert any(
        "volume: 1 increase vs 0 decrease" in p or "volume: 0 increase vs 1" in p
        for p in report["problems"]
    )
    assert "NOT balanced" in describe(report)


def test_a_partly_failed_batch_keeps_the_answers_that_arrived(dataset, tmp_path):
    from vocalgrad.errors import PartialBatchError

    class HalfDeaf(Listener):
        listener_id = "half-deaf"

        def generate(self, requests, max_new_tokens=16):
            answers = ["increase" if i % 2 == 0 else None for i in range(len(requests))]
            raise PartialBatchError(
                "some requests failed",
                answers=answers,
                failures={i: ValueError(f"lost {i}") for i, a in enumerate(answers) if a is None},
            )

    counts = evaluate(
        dataset,
        HalfDeaf(),
        tmp_path / "run",
        EvalConfig(limit=8, batch_size=4),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    _, rows = load_results(tmp_path / "run")
    answered = [r for r in rows if r["error"] is None]
    failed = [r for r in rows if r["error"] is not None]
    assert len(answered) == len(failed) == 4 == counts["failed"]
    assert {r["predicted"] for r in answered} == {"increase"}
    assert all(r["error"].startswith("lost ") for r in failed)


def test_local_listener_copies_give_the_in_process_run(dataset, tmp_path):
    """`eval --workers 2` locally: two processes each load the listener from its spec and
    answer batches; the run (rows, their order, the manifest) is the one a single in-process
    listener writes, and the copies are gone afterwards."""
    from vocalgrad.executors import Executor, ListenerSpec, LocalListenerCopies

    config = EvalConfig(batch_size=8, controls=("reversed",))
    load = ListenerSpec("baseline:ideal", str(dataset))
    evaluate(
        dataset, load(), tmp_path / "here", config, cache=AnswerCache(tmp_path / "here.sqlite")
    )
    with Executor(2, listener_copies=2) as executor:
        copies = executor.listener(load)
        assert isinstance(copies, LocalListenerCopies) and copies.copies == 2
        assert copies.manifest() == load().manifest() and copies.channels == 2
        evaluate(
            dataset,
            copies,
            tmp_path / "there",
            config,
            cache=AnswerCache(tmp_path / "there.sqlite"),
            executor=executor,
        )
        pool = copies._pool
    assert pool._shutdown_thread
    rows = {}
    for name in ("here", "there"):
        lines = (tmp_path / name / "results.jsonl").read_text().splitlines()
        rows[name] = [json.loads(line) for line in lines]
    assert len(rows["there"]) == len(rows["here"]) > 16
    # a copy holds BLAS to its share of the cores, which moves a float sum's last bits: the
    # same answers, the same rows in the same order, measures equal to 1e-5
    numeric = ("seconds", "llr", "logprobs")
    for there, here in zip(rows["there"], rows["here"], strict=True):
        assert {k: v for k, v in there.items() if k not in numeric} == {
            k: v for k, v in here.items() if k not in numeric
        }
        assert there["llr"] == pytest.approx(here["llr"], abs=1e-5)
    assert (
        json.loads((tmp_path / "there" / "manifest.json").read_text())["listener"]
        == load().manifest()
    )
    assert Executor(2).listener(load).__class__.__name__ == "IdealObserver"  # one copy: in process


def test_eval_warns_and_records_a_failed_shortcut_audit(tmp_path, cache_dir, capsys):
    """A dataset whose audit.json fails: one stderr warning before asking, naming the
    dimensions, and ``audit_failed`` in the manifest; nothing without an audit or when it
    passes."""
    from ladder_helpers import tiny_build

    from vocalgrad.cli import main

    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    ds = tiny_build(tmp_path / "ds", "gradual", categories=("volume",), n_train=0)
    audit = {"passes": False, "per_category": {"volume": {"passes": False, "reasons": ["x"]}}}
    (ds / "audit.json").write_text(json.dumps(audit))

    def ask(out: str) -> tuple[dict, str]:
        argv = ["eval", str(ds), "--listener", "baseline:always-increase", "--no-cache"]
        assert main([*argv, "--out", str(tmp_path / out)]) == 0
        err = capsys.readouterr().err
        return json.loads((tmp_path / out / "manifest.json").read_text()), err

    manifest, err = ask("failed")
    warnings = [line for line in err.splitlines() if "shortcut audit" in line]
    assert warnings == [
        f"vocalgrad: warning: {ds} failed its shortcut audit (dims volume): a listener may "
        "score above chance without hearing the change"
    ]
    assert manifest["audit_failed"] == ["volume"]
    for name, report in (("passed", {"passes": True, "per_category": {}}), ("none", None)):
        if report is None:
            (ds / "audit.json").unlink()
        else:
            (ds / "audit.json").write_text(json.dumps(report))
        manifest, err = ask(name)
        assert "shortcut audit" not in err and "audit_failed" not in manifest
    # a ladder's rung: the ladder's family decides, whatever the dataset's own report says
    (ds / "audit.json").write_text(json.dumps(audit))
    listener = load_listener("baseline:always-increase", dataset=ds)
    for verdict in ([], ["volume"]):
        run = tmp_path / f"rung-{len(verdict)}"
        evaluate(ds, listener, run, EvalConfig(), use_cache=False, audit_verdict=verdict)
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest.get("audit_failed", []) == verdict
        assert manifest["audit_family"] == "ladder"

"""Adding a question format is one new module: a test-only format, defined in this file and
registered at run time, is built, verified, audited, evaluated by the baselines and reported,
with no other source file touched.

`Step` below is that module: a `QuestionFormat` subclass declaring what differs from the
contract's defaults. Its clip holds the parameter at the start value up to the speech's
midpoint and at the end value after it (a step, spliced from two of the dimension's held
renders), asked "Is the <attribute> higher or lower at the end than at the start?".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from vocalgrad import dimensions, formats
from vocalgrad.cli import main
from vocalgrad.dataset import load_rows
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import EvalConfig, evaluate, load_results
from vocalgrad.evaluation.score import score_run
from vocalgrad.formats.base import (
    Asked,
    ClipResult,
    Engine,
    Observer,
    QuestionFormat,
    Variant,
    Wording,
    attribute_name,
    two_words,
    verdict,
)
from vocalgrad.listeners.baselines import IdealObserver, RandomListener
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.report import write_report
from vocalgrad.report.figures import marker_of
from vocalgrad.stimuli.audit import format_families
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import Condition, plan_conditions
from vocalgrad.stimuli.verify import verify_dataset

pytestmark = pytest.mark.usefixtures("builtin_cache")

# --8<-- [start:module]
SPLICE_S = 0.02  # raised-cosine crossfade at the step


class Step(QuestionFormat):
    name = "step"
    summary = "one clip held at one value, then at another from the speech's midpoint on"
    card_note = (
        "one clip held at the start value up to the speech's midpoint and at the end value "
        "after it (`step_s`: where the step lies); label `increase` = higher at the end"
    )
    marker = "v"
    symbol = "▽"
    order = 10
    changes_over_time = True  # a blind measure of the clip's course and one-end observers apply
    reversible = True  # played backwards, the step goes the other way
    audit_families = ("global", "edge_silence", "edge_level", "edge_spectrum", "edge_zeros")

    def curves(self, curves: Sequence[str]) -> tuple[str, ...]:
        return ("step",)

    def render(
        self, engine: Engine, condition: Condition, item: str, twin_item: str | None
    ) -> ClipResult:
        spec = dimensions.get(condition.category).SPEC
        key = engine.rove_key(condition, item)
        (first, span), (second, _) = (
            engine.held(condition, v) for v in (condition.start, condition.end)
        )
        n = min(len(first), len(second))
        at = int(round((span.onset_s + span.offset_s) / 2 * engine.sr))
        fade = int(round(SPLICE_S * engine.sr))
        ramp = np.clip((np.arange(n) - at + fade / 2) / fade, 0, 1)
        into = (0.5 - 0.5 * np.cos(np.pi * ramp)).astype(np.float32)
        if first.ndim == 2:
            into = into[:, None]
        spliced = first[:n] * (1 - into) + second[:n] * into
        rove_db = engine.level_rove_db(condition, key)
        audio = engine.assemble([spliced], rove_db, source_edges=spec.source_edges)[0]
        audio = engine.to_file(audio)
        clip, measured = engine.measure(condition.category, audio, span)
        return ClipResult(
            audio=audio,
            clip=clip,
            measured=measured,
            change=measured.change,
            verdict=verdict(condition.direction, measured.change, spec),
            confounds=engine.confounds(clip),
            param_start=condition.start,
            param_end=condition.end,
            rove_db=rove_db,
        )

    def row_fields(self, condition: Condition, clip: ClipResult, pair_id: str) -> dict[str, Any]:
        span = clip.clip.span
        return {"pair_id": pair_id, "step_s": round((span.onset_s + span.offset_s) / 2, 5)}

    def wording(self, category: str, variant: Variant, kind: str = "speech") -> Wording:
        question = (
            f"Is the {attribute_name(category)} higher or lower at the end than at the start?"
        )
        return two_words(question, "higher", "lower", variant.name)

    def evidence(self, observer: Observer, asked: Asked) -> float:
        dim = dimensions.get(asked.category)  # a change over time, as gradual clips carry
        return float(dim.evidence(asked.clip, asked.ref, observer.sample_rate))


FORMAT = Step()
# --8<-- [end:module]

CATEGORIES = ("volume", "voice_pitch")


@pytest.fixture(scope="module")
def step() -> QuestionFormat:
    # --8<-- [start:register]
    fmt = formats.register(FORMAT)
    # --8<-- [end:register]
    yield fmt
    formats.unregister(FORMAT.name)


@pytest.fixture(scope="module")
def built(step, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("step")
    config = BuildConfig(format="step", categories=CATEGORIES, n_test=2, n_train=2, tiers=("high",))
    report = build(config, root, workers=1)
    assert report["clips_kept"] > 0, report
    return root


def test_it_is_registered_listed_and_refused_on_a_typo(step, capsys):
    assert formats.get("step") is step and "step" in formats.names()
    assert formats.names()[:3] == ("gradual", "comparison", "recognition")  # listed by order
    with pytest.raises(ConfigError, match=r"unknown format 'stpe' \(did you mean 'step'\?\)"):
        formats.get("stpe")
    with pytest.raises(ConfigError, match="did you mean 'step'"):
        BuildConfig(format="stpe")
    with pytest.raises(ConfigError, match="exists"):
        formats.register(FORMAT)
    assert main(["list", "formats"]) == 0
    assert f"step\t{Step.summary}" in capsys.readouterr().out.splitlines()


def test_a_broken_format_is_refused_when_registered():
    with pytest.raises(TypeError, match="QuestionFormat"):
        formats.register(SimpleNamespace(name="loose"))

    class Nameless(Step):
        summary = ""

    with pytest.raises(TypeError, match="lacks summary"):
        formats.register(Nameless())

    class Untagged(Step):
        name = "untagged"
        tagged = False  # it would share the default format's item ids

    with pytest.raises(TypeError, match="only 'gradual' may be untagged"):
        formats.register(Untagged())
    assert "untagged" not in formats.names()


def test_its_audit_families_are_checked(step):
    assert format_families("step") == Step.audit_families

    class Misspelt(Step):
        name = "misspelt"
        audit_families = ("global", "edge_silense")

    class OrderFree(Step):
        name = "order_free_too"
        audit_families = ("global", "order_free")  # audited apart already

    for bad, named in ((Misspelt(), "edge_silense"), (OrderFree(), "order_free")):
        formats.register(bad)
        try:
            with pytest.raises(ConfigError, match=f"audits unknown cue families {named}"):
                format_families(bad.name)
        finally:
            formats.unregister(bad.name)


def test_its_conditions_and_ids_are_its_own(step):
    planned, _ = plan_conditions(
        BuildConfig(format="step", categories=("volume",), tiers=("high",))
    )
    gradual, _ = plan_conditions(BuildConfig(categories=("volume",), tiers=("high",), constants=0))
    assert {c.curve for c in planned} == {"step"} and {c.direction for c in planned} == {
        "increase",
        "decrease",
    }  # no constants: the format plans none
    assert all(c.key.endswith("|step") for c in planned)
    assert not {c.key for c in planned} & {c.key for c in gradual}


def test_it_is_asked_in_its_own_words(step):
    assert question_text("voice_pitch", fmt="step") == (
        "Is the voice pitch higher or lower at the end than at the start?\n\n"
        'Answer with only one word: "higher" or "lower".'
    )
    swapped = build_prompt("voice_pitch", "swapped", fmt="step")
    assert swapped.label_of == {"lower": "decrease", "higher": "increase"}
    with pytest.raises(
        ConfigError, match="step items are asked with the variants default, swapped"
    ):
        question_text("voice_pitch", "ternary", fmt="step")


def test_it_is_built_verified_and_audited(built):
    rows = load_rows(built)
    assert {r["format"] for r in rows} == {"step"} and {r["curve"] for r in rows} == {"step"}
    assert {r["category"] for r in rows} == set(CATEGORIES)
    assert all(0 < r["step_s"] < r["duration_s"] and r["pair_id"] for r in rows)
    for r in rows:  # the measured change has the label's sign: the step is heard
        assert np.sign(r["measured_change"]) == (1 if r["direction"] == "increase" else -1)
    assert "one clip held at the start value" in (built / "README.md").read_text()
    verified = verify_dataset(built)
    assert {c: e["agreement"] for c, e in verified["per_category"].items()} == dict.fromkeys(
        CATEGORIES, 1.0
    )
    audit = json.loads((built / "audit.json").read_text())
    for category in CATEGORIES:
        entry = audit["per_category"][category]
        assert set(entry["families"]) <= set(Step.audit_families)
        assert entry["order_free_gated"] is True


def test_the_baselines_answer_it_and_the_report_shows_it(built, tmp_path):
    config = EvalConfig(mode="choice", controls=("reversed",))
    ideal = evaluate(built, IdealObserver(built), tmp_path / "ideal", config)
    assert ideal["answered"] > 0
    manifest, results = load_results(tmp_path / "ideal")
    assert manifest["format"] == "step" and {r["format"] for r in results} == {"step"}
    assert {r["control"] for r in results} == {"none", "reversed"}  # it is reversible
    summary = score_run(tmp_path / "ideal")
    overall = next(
        g for g in summary["groups"]["default/choice"]["table"] if g["group"] == "overall"
    )
    assert overall["accuracy"] == 1.0  # the dimensions' own evidence reads a step
    evaluate(built, RandomListener(), tmp_path / "random", EvalConfig(mode="choice"))
    assert score_run(tmp_path / "random")["groups"]["default/choice"]["table"]
    html = write_report([tmp_path / "ideal", tmp_path / "random"], tmp_path / "report.html")
    text = html.read_text()
    # the references in the step format, tagged with its name (a break opportunity after ":")
    assert "ideal [step]" in text and "random [step]" in text
    assert marker_of("some-model [step]") == Step.marker

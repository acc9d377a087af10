"""The two-dimension rungs (which, together, sequence): pairs declared and refused, plans
balanced, both courses verified on real builds, the ideal observer answers every rung, a
planted leak specific to each rung is caught, and the interference effect is recovered."""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import RENDER_SR, arctic_path

from vocalgrad.dataset import load_rows, write_jsonl
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import EvalConfig, evaluate, load_results
from vocalgrad.evaluation.ladder import interference, reasoning_drops
from vocalgrad.formats import _two
from vocalgrad.listeners.baselines import IdealObserver, OneEndObserver
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.stimuli.audit import audit_dataset
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import Condition, item_id, plan_conditions
from vocalgrad.stimuli.render import (
    _render_unlimited,
    prepare_reference,
    prepare_source,
    render_layers,
)
from vocalgrad.stimuli.verify import verify_dataset

pytestmark = [pytest.mark.usefixtures("builtin_cache"), pytest.mark.slow]

PAIR = ("volume", "voice_pitch")


def _config(fmt: str, **kw) -> BuildConfig:
    return BuildConfig(
        format=fmt,
        categories=kw.pop("categories", PAIR),
        n_test=kw.pop("n_test", 3),
        n_train=kw.pop("n_train", 2),
        tiers=("high",),
        curves=("linear",),
        **kw,
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    """A small build of each rung (no audit: the tests audit what they need)."""
    out = {}
    # together on 4 + 3 sources and sequence on 6 + 6: the smallest builds whose planted
    # leaks below are caught at every build seed tried (16 of 16; sequence on 3 + 2 sources
    # caught its 20 dB trace at 6 of 16 seeds, on 4 + 4 at 15)
    sizes = {"together": {"n_test": 4, "n_train": 3}, "sequence": {"n_test": 6, "n_train": 6}}
    for fmt in ("which", "together", "sequence"):
        root = tmp_path_factory.mktemp(fmt)
        report = build(_config(fmt, **sizes.get(fmt, {})), root, workers=1, audit=False)
        assert report["clips_kept"] > 0, report
        out[fmt] = root
    return out


# -- planning


def test_pairs_are_declared_by_the_dimensions_and_refused_with_reasons():
    assert _two.pairing("volume", "voice_pitch") == _two.pairing("voice_pitch", "volume")
    assert _two.pairing("volume", "voice_pitch").first == "voice_pitch"  # the gain last
    assert _two.pairing("volume", "speaking_speed").first == "speaking_speed"  # the warp first
    assert _two.pairing("voice_pitch", "background_noise") is None
    assert "residual" in _two.refusal("voice_pitch", "background_noise")
    conditions, refused = plan_conditions(
        _config("which", categories=("volume", "voice_pitch", "background_noise"))
    )
    assert {c.category for c in conditions} == {"volume", "voice_pitch"}
    assert {r["category"] for r in refused} == {
        "volume+background_noise",
        "voice_pitch+background_noise",
    }
    assert all(r["reason"] for r in refused)
    with pytest.raises(ConfigError, match="no pair of volume, background_noise can be combined"):
        plan_conditions(_config("which", categories=("volume", "background_noise")))
    # sequence refuses a time warp: it would move changes between the halves
    with pytest.raises(ConfigError, match="speaking_speed warps time"):
        plan_conditions(_config("sequence", categories=("speaking_speed", "volume")))


def test_plans_are_balanced_and_keys_are_their_own():
    which, _ = plan_conditions(_config("which"))
    cells = Counter((c.category, c.also.category) for c in which)
    assert cells == {("volume", "voice_pitch"): 4, ("voice_pitch", "volume"): 4}
    for named in PAIR:
        combos = {(c.direction, c.also.direction) for c in which if c.category == named}
        assert combos == set(itertools.product(("increase", "decrease"), repeat=2))
        assert len({c.pair_key for c in which if c.category == named}) == 1  # dropped together
    sequence, _ = plan_conditions(_config("sequence"))
    assert len(sequence) == 8 and {(c.half, c.also.half) for c in sequence} == {
        ("first", "second"),
        ("second", "first"),
    }
    together, _ = plan_conditions(_config("together"))
    assert len(together) == 4 and {c.category for c in together} == {"volume"}
    keys = [c.key for c in (*which, *sequence, *together)]
    assert len(keys) == len(set(keys))
    # a one-dimension condition keeps the key it had before two dimensions existed
    single = Condition("volume", "high", "linear", "increase", 18.0, -18.0, 18.0)
    assert single.key == "volume|high|linear|increase|18"
    assert single.pair_key == "volume|high|linear"


def test_one_layer_renders_what_a_gradual_clip_is():
    """The engine's layered step with one layer is the gradual clip, sample for sample."""
    source = prepare_source(prepare_reference(str(arctic_path()), RENDER_SR, -26.0), 1)
    condition = Condition("voice_pitch", "high", "linear", "increase", 3.0, -3.0, 3.0)
    item = item_id(11, "arctic", condition)
    alone = _render_unlimited(source, condition, 11, item)
    layered = render_layers(source, [condition], 11, item)
    assert np.array_equal(alone.audio, layered.audio) and alone.rove_db == layered.rove_db


# -- built rungs


def test_both_courses_are_verified_and_the_other_direction_is_balanced(built):
    for fmt, root in built.items():
        rows = load_rows(root)
        assert {r["format"] for r in rows} == {fmt}
        assert all(r["second_verdict"] == "verified" for r in rows), fmt
        report = verify_dataset(root)
        agreement = [e["agreement"] for e in report["per_category"].values()]
        assert min(agreement) >= 0.99, (fmt, report["failures"][:3])
        # every (source, named, other) carries each direction of the other one equally often
        counts = defaultdict(Counter)
        for r in rows:
            counts[(r["source_id"], r["category"], r["second_category"])][
                r["direction"] == r["second_direction"]
            ] += 1
        assert all(c[True] == c[False] for c in counts.values()), fmt
    which = load_rows(built["which"])
    assert all(r["answer"] == r["direction"] for r in which)
    assert all(r["congruent"] == (r["direction"] == r["second_direction"]) for r in which)
    sequence = load_rows(built["sequence"])
    for r in sequence:  # the change lies in its own half, at a roved place
        lo, hi = r["change_window"]
        assert (hi <= 0.5) == (r["half"] == "first") and 0 < lo < hi < 1
    assert len({tuple(r["change_window"]) for r in sequence}) == len(sequence)


def test_a_broken_second_course_fails_verification(built, tmp_path):
    """Verification reads the other dimension too: a row whose second direction is wrong
    disagrees, though the named one is right."""
    root = tmp_path / "which"
    shutil.copytree(built["which"], root)
    rows = [json.loads(line) for line in (root / "test" / "metadata.jsonl").open()]
    flip = {"increase": "decrease", "decrease": "increase"}
    rows[0]["second_direction"] = flip[rows[0]["second_direction"]]
    write_jsonl(root / "test" / "metadata.jsonl", rows)
    report = verify_dataset(root)
    failed = [f["item_id"] for f in report["failures"]]
    assert failed == [rows[0]["item_id"]]


def test_the_ideal_observer_answers_every_rung_and_one_end_does_not_answer_two(built, tmp_path):
    for fmt, root in built.items():
        evaluate(root, IdealObserver(root), tmp_path / fmt, EvalConfig(mode="choice"))
        _, results = load_results(tmp_path / fmt)
        accuracy = np.mean([r["correct"] for r in results])
        assert accuracy >= 0.98, (fmt, accuracy)
    for fmt in ("together", "sequence"):  # one end of one dimension says nothing of the label
        root = built[fmt]
        evaluate(root, OneEndObserver(root), tmp_path / f"{fmt}-one", EvalConfig(mode="choice"))
        _, results = load_results(tmp_path / f"{fmt}-one")
        assert np.mean([r["correct"] for r in results]) <= 0.75, fmt


def test_questions_name_both_dimensions():
    assert question_text("voice_pitch", fmt="which") == (
        "Does the voice pitch increase or decrease?\n\n"
        'Answer with only one word: "increase" or "decrease".'
    )
    together = build_prompt("volume", fmt="together", second="voice_pitch")
    assert together.text.startswith("Do the volume and the voice pitch move in the same")
    assert together.label_of == {"same": "increase", "different": "decrease"}
    sequence = build_prompt("volume", "swapped", fmt="sequence", second="voice_pitch")
    assert sequence.text.startswith("Which changes first, the voice pitch or the volume?")
    assert sequence.label_of == {"voice pitch": "decrease", "volume": "increase"}
    with pytest.raises(ConfigError, match="needs the row's second_category"):
        build_prompt("volume", fmt="together")


# -- planted leaks, one per rung


def _planted(
    root: Path, out: Path, keep=None, louder=None, tail_s: float | None = 0.4, db: float = 10
) -> Path:
    """A copy of a build with a leak planted: rows left out (`keep`), or the last `tail_s`
    of the clips `louder` picks (all of it: None) raised by `db`; the cue cache is not
    copied."""
    shutil.copytree(root, out, ignore=shutil.ignore_patterns(".audit", ".build"))
    for split in ("test", "train"):
        path = out / split / "metadata.jsonl"
        rows = [json.loads(line) for line in path.open()]
        if keep is not None:
            rows = [r for r in rows if keep(r)]
            write_jsonl(path, rows)
        for r in rows if louder is not None else ():
            if louder(r):
                audio, sr = sf.read(out / split / r["file_name"], dtype="float32")
                start = 0 if tail_s is None else len(audio) - int(tail_s * sr)
                audio[start:] *= 10 ** (db / 20)
                sf.write(out / split / r["file_name"], np.clip(audio, -1, 1), sr)
    return out


def test_which_leak_the_distractor_giving_the_label_is_caught(built, tmp_path):
    """Only congruent items: the distractor's direction is the named one's label."""
    leak = _planted(built["which"], tmp_path / "leak", keep=lambda r: r["congruent"])
    audit = audit_dataset(leak, cache=False)
    pitch = audit["per_category"]["voice_pitch"]
    assert pitch["second_direction"]["agreement"] == 1.0
    assert pitch["passes"] is False
    assert any("other dimension's direction" in reason for reason in pitch["reasons"])
    clean = audit_dataset(built["which"], cache=False)["per_category"]["voice_pitch"]
    assert clean["second_direction"] == {
        "agreement": 0.5,
        "n": clean["second_direction"]["n"],
        "unbalanced_sources": [],
    }
    assert not any("other dimension" in reason for reason in clean["reasons"])


def test_sequence_leak_the_first_change_ending_louder_is_caught(built, tmp_path):
    """The named dimension changing first always ends louder (a trace after the speech).
    20 dB on 6 + 6 sources: over 16 build seeds the gates needed an accuracy of 0.63-0.73
    (the audit's `needed`) and the trace gave 0.76-0.96."""
    leak = _planted(
        built["sequence"],
        tmp_path / "leak",
        louder=lambda r: r["direction"] == "increase",
        db=20,
    )
    entry = audit_dataset(leak, cache=False)["per_category"]["volume"]
    assert entry["passes"] is False, entry["reasons"]


def test_together_leak_the_same_answer_louder_overall_is_caught(built, tmp_path):
    """Clips whose dimensions move alike come out louder (as a peak limit shared by the wrong
    clips would make them): the whole file's level answers "same"."""
    leak = _planted(
        built["together"],
        tmp_path / "leak",
        louder=lambda r: r["direction"] == "increase",
        tail_s=None,
        db=6,
    )
    entry = audit_dataset(leak, cache=False)["per_category"]["volume"]
    assert entry["passes"] is False, entry["reasons"]


# -- the interference effect, on synthetic answers


def _answers(effects: dict, n_sources: int = 60, per_cell: int = 8, seed: int = 0) -> list[dict]:
    """Answers whose congruent items are right with p_c and incongruent ones with p_i, per
    source a random offset shared by both (what pairing by source removes)."""
    rng = np.random.default_rng(seed)
    rows = []
    for (named, distractor), (p_c, p_i) in effects.items():
        for s in range(n_sources):
            shift = rng.uniform(-0.1, 0.1)
            for congruent, p in ((True, p_c), (False, p_i)):
                for k in range(per_cell):
                    rows.append(
                        {
                            "item_id": f"{named}-{s}-{congruent}-{k}",
                            "category": named,
                            "second_category": distractor,
                            "congruent": congruent,
                            "direction": "increase" if k % 2 else "decrease",
                            "source_id": f"s{s}",
                            "control": "none",
                            "correct": bool(rng.uniform() < p + shift),
                        }
                    )
    return rows


def test_interference_recovers_a_known_effect_with_a_ci_covering_it():
    truth = {("voice_pitch", "volume"): (0.9, 0.6), ("volume", "voice_pitch"): (0.8, 0.8)}
    found = interference(_answers(truth))
    assert found.dimensions == ("voice_pitch", "volume")
    pitch = found.cells[("voice_pitch", "volume")]
    assert pitch.lo <= 0.3 <= pitch.hi and abs(pitch.effect - 0.3) < 0.08
    assert pitch.lo > 0.1 and pitch.ci_method == "cluster bootstrap"
    none = found.cells[("volume", "voice_pitch")]
    assert none.lo <= 0.0 <= none.hi
    matrix = found.matrix()
    assert matrix.shape == (2, 2) and np.isnan(matrix[0, 0]) and np.isnan(matrix[1, 1])
    assert matrix[0, 1] == pytest.approx(pitch.effect)
    # controls, errors and rows without a second dimension are left out; few sources: a
    # jackknife interval
    extra = [{**r, "control": "reversed"} for r in _answers(truth)[:50]]
    few = interference(_answers(truth, n_sources=5) + extra)
    assert few.cells[("voice_pitch", "volume")].ci_method == "cluster jackknife t"
    assert interference([{"category": "volume", "direction": "increase"}]).cells == {}


def test_reasoning_drops_are_paired_by_item():
    rows = []
    for i in range(40):
        base = {"item_id": f"i{i}", "source_id": f"s{i % 20}", "direction": "increase"}
        rows.append({**base, "variant": "default", "mode": "choice", "predicted": "increase"})
        right = i % 4 != 0  # a quarter wrong with the text step
        rows.append(
            {
                **base,
                "variant": "negated",
                "mode": "choice",
                "predicted": "increase" if right else "decrease",
            }
        )
    drops = reasoning_drops(rows)
    assert set(drops) == {"negated", "reasoning"}
    assert drops["negated"]["drop"] == pytest.approx(0.25)
    assert drops["negated"]["accuracy_b"] == 1.0 and drops["negated"]["n"] == 40
    with pytest.raises(ValueError, match="several modes"):
        reasoning_drops([*rows, {**rows[0], "mode": "generate"}])
    assert reasoning_drops([r for r in rows if r["variant"] == "default"]) == {}


def test_the_ladder_section_shows_the_interference_matrix_and_the_reasoning_drop():
    from vocalgrad.report.ladder import ladder
    from vocalgrad.report.model import Figure, Table
    from vocalgrad.report.render import to_html

    truth = {("voice_pitch", "volume"): (0.9, 0.6), ("volume", "voice_pitch"): (0.8, 0.8)}
    answers = [
        {**r, "variant": "default", "mode": "choice", "format": "which"} for r in _answers(truth)
    ]
    bare = [
        {"item_id": f"g{i}", "source_id": f"s{i % 12}", "direction": "increase", "mode": "choice"}
        for i in range(24)
    ]
    reasoned = [{**r, "variant": "default", "predicted": "increase"} for r in bare] + [
        {**r, "variant": "mapped", "predicted": "decrease" if i % 3 == 0 else "increase"}
        for i, r in enumerate(bare)
    ]
    section = ladder(
        {"some-model [which]": answers, "baseline:ideal": reasoned}, n_boot=200, seed=0
    )
    assert section.id == "ladder" and section.title == "Ladder"
    figures = [b for b in section.blocks if isinstance(b, Figure)]
    # the ideal observer climbed two rungs (direction, reasoning): the rung figure first
    assert [f.name for f in figures] == ["ladder", "interference-some-model"]
    tables = [b for b in section.blocks if isinstance(b, Table)]
    rungs, interference_rows, reasoning_rows = tables[0], tables[1].rows, tables[2].references
    reasoning_rung = next(r for r in rungs.references if r[1] == "reasoning")
    # a rung measured from direction on the same items: a third wrong with the text step
    assert (
        reasoning_rung[-1].startswith("0.33")
        and "from direction, same items" in (reasoning_rung[-1])
    )
    assert [r[1:3] for r in interference_rows] == [
        ["voice_pitch", "volume"],
        ["volume", "voice_pitch"],
    ]
    assert interference_rows[0][5].startswith("0.3")
    assert [r[2] for r in reasoning_rows] == ["mapped", "reasoning"]
    assert reasoning_rows[0][5].startswith("0.33")  # a third wrong with the text step
    html = to_html("t", "s", [section])
    assert 'id="ladder"' in html and "Interference" in html and "interference-some-model" in html
    empty = ladder({"m": bare}, n_boot=0, seed=0)
    assert "fewer than two rungs" in empty.blocks[0].text

"""Balanced assignment: no condition predicts the label, k raters per item, spread sources."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest
from e2e.human_helpers import make_dataset

from vocalgrad.dataset import load_rows
from vocalgrad.human.assign import make_plan
from vocalgrad.human.study import StudyConfig, StudyError


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    return load_rows(
        make_dataset(
            tmp_path_factory.mktemp("assign-ds"), n_sources=6, tiers=("low", "mid", "high")
        )
    )


def _check_balance(plan, rows, config):
    by_id = {r["item_id"]: r for r in rows}
    raters: Counter = Counter()
    for annotator, slots in plan.trials.items():
        test = [s.item_id for s in slots if s.kind == "test"]
        assert len(test) == len(set(test))  # nobody hears an item twice
        raters.update(test)
        cells: Counter = Counter()
        for i in test:
            r = by_id[i]
            cells[(r["category"], r["tier"], r["curve"], r["direction"])] += 1
        for (cat, tier, curve, direction), n in cells.items():
            other = "decrease" if direction == "increase" else "increase"
            assert cells[(cat, tier, curve, other)] == n, (annotator, cat, tier, curve)
    pool = [i for ids in plan.pool.values() for i in ids]
    assert set(raters) == set(pool)
    assert set(raters.values()) == {config.annotators_per_item}
    return pool


@pytest.mark.parametrize("n_annotators,k,per_cell", [(3, 2, 1), (5, 3, 2), (4, 4, 1), (7, 2, 3)])
def test_each_annotator_is_balanced(rows, n_annotators, k, per_cell):
    config = StudyConfig(n_annotators=n_annotators, annotators_per_item=k, items_per_cell=per_cell)
    plan = make_plan(rows, config)
    pool = _check_balance(plan, rows, config)
    by_id = {r["item_id"]: r for r in rows}
    for cat, ids in plan.pool.items():
        assert len(ids) == per_cell * 3 * 2 * 2  # tiers x curves x directions
        assert {by_id[i]["category"] for i in ids} == {cat}
    assert len(pool) == len(set(pool))


def test_sources_differ_across_categories_when_possible(tmp_path):
    rows = load_rows(make_dataset(tmp_path, n_sources=8, tiers=("high",)))
    plan = make_plan(rows, StudyConfig(n_annotators=2, annotators_per_item=2))
    by_id = {r["item_id"]: r for r in rows}
    cats_of_source = defaultdict(set)
    sources_in_cell = defaultdict(set)
    for cat, ids in plan.pool.items():
        for i in ids:
            r = by_id[i]
            cats_of_source[r["source_id"]].add(cat)
            sources_in_cell[(cat, r["curve"])].add(r["source_id"])
    assert all(len(c) == 1 for c in cats_of_source.values())
    assert all(len(s) == 2 for s in sources_in_cell.values())  # inc and dec: different voices
    assert not plan.notes


def test_orders_catch_and_practice(rows):
    config = StudyConfig(
        n_annotators=3,
        annotators_per_item=2,
        n_catch=4,
        n_practice=4,
        screening_trials=3,
        screening_pass=3,
    )
    plan = make_plan(rows, config)
    by_id = {r["item_id"]: r for r in rows}
    pool = {i for ids in plan.pool.values() for i in ids}
    orders = []
    for slots in plan.trials.values():
        kinds = [s.kind for s in slots]
        assert kinds[:3] == ["screening"] * 3 and kinds[3:7] == ["practice"] * 4
        assert set(kinds[7:]) == {"test", "catch"}
        catch = [by_id[s.item_id] for s in slots if s.kind == "catch"]
        practice = [by_id[s.item_id] for s in slots if s.kind == "practice"]
        assert len(catch) == 4 and all(
            r["tier"] == "high" and r["item_id"] not in pool for r in catch
        )
        assert Counter(r["direction"] for r in catch) == {"increase": 2, "decrease": 2}
        assert all(r["split"] == "train" for r in practice)
        assert Counter((r["category"], r["direction"]) for r in practice) == dict.fromkeys(
            [
                ("volume", "increase"),
                ("volume", "decrease"),
                ("voice_pitch", "increase"),
                ("voice_pitch", "decrease"),
            ],
            1,
        )
        orders.append([s.item_id for s in slots if s.kind == "test"])
    assert orders[0] != sorted(orders[0]) or orders[1] != sorted(orders[1])
    again = make_plan(rows, config)
    assert again.trials == plan.trials  # deterministic from the seed


def test_bad_configs(rows):
    with pytest.raises(StudyError):
        StudyConfig(n_annotators=2, annotators_per_item=3)
    with pytest.raises(StudyError):
        StudyConfig(variant="vary")
    with pytest.raises(StudyError):
        StudyConfig(variant="ternary")
    with pytest.raises(StudyError):
        make_plan(rows, StudyConfig(categories=("echo",)))


def test_real_built_dataset(tmp_path, cache_dir, monkeypatch):
    """On a dataset made by the builder: balanced pool, catch from the top tier, metrics-ready."""
    from vocalgrad.stimuli.build import build
    from vocalgrad.stimuli.config import BuildConfig

    monkeypatch.setenv("VOCALGRAD_CACHE", str(cache_dir))
    out = tmp_path / "built"
    build(
        BuildConfig(
            n_test=2,
            n_train=0,
            tiers=("high",),
            curves=("linear", "jump"),
            categories=("volume", "voice_pitch", "echo"),
        ),
        out,
        workers=1,
    )
    rows = load_rows(out)
    config = StudyConfig(n_annotators=3, annotators_per_item=2, n_catch=2, n_practice=2)
    plan = make_plan(rows, config)
    _check_balance(plan, rows, config)
    assert set(plan.pool) == {"volume", "voice_pitch", "echo"}


def test_practice_and_catch_are_disjoint_without_a_train_split(tmp_path):
    """Practice feedback must not reveal any link's catch answers (`--n-train 0` builds)."""
    rows = load_rows(make_dataset(tmp_path, n_sources=6, tiers=("low", "mid", "high"), n_train=0))
    config = StudyConfig(n_annotators=8, annotators_per_item=2, n_catch=4, n_practice=4)
    plan = make_plan(rows, config)
    practice = {s.item_id for slots in plan.trials.values() for s in slots if s.kind == "practice"}
    catch = {s.item_id for slots in plan.trials.values() for s in slots if s.kind == "catch"}
    pool = {i for ids in plan.pool.values() for i in ids}
    assert practice and catch and not practice & catch and not (practice | catch) & pool
    assert all(sum(s.kind == "practice" for s in slots) == 4 for slots in plan.trials.values())
    assert all(sum(s.kind == "catch" for s in slots) == 4 for slots in plan.trials.values())

"""Adaptive threshold runs for costly listeners: render each trial's clip on demand.

A staircase or QUEST+ procedure (`vocalgrad.evaluation.adaptive`) chooses the next magnitude; the
clip is rendered from one of the dataset's stored references with the builder's own
`render_condition`, so adaptive trials are the same stimuli a sweep would contain.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import resample
from vocalgrad.dataset import load_references, load_rows
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.adaptive import TIE, UNPARSED, AdaptiveResult, run_adaptive, save_adaptive
from vocalgrad.listeners import Listener, Request
from vocalgrad.questions.parsing import parse_answer
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.stimuli.plan import Condition
from vocalgrad.stimuli.render import PreparedSource, prepare_source, render_condition, tone_seed_for
from vocalgrad.stimuli.verify import reference_analysis


class TrialRenderer:
    """`ask(category, magnitude, direction, trial)` for `run_adaptive`: render, ask, score.

    Returns whether the answer was right, or TIE / UNPARSED when there was none (the
    procedure then guesses, see `vocalgrad.evaluation.adaptive`)."""

    def __init__(
        self, dataset: str | Path, listener: Listener, split: str = "test", seed: int = 0
    ) -> None:
        refs = load_references(dataset)
        if not refs:
            raise ConfigError(
                f"{dataset}: adaptive runs render from references/; this dataset has none"
            )
        sources = sorted({r["source_id"] for r in load_rows(dataset) if r["split"] == split})
        self.references = [refs[s] for s in sources if s in refs]
        if not self.references:
            raise ConfigError(f"{dataset}: no references for the {split} split")
        self.listener = listener
        self.seed = seed
        self._loaded: dict[str, PreparedSource] = {}

    def _reference(self, index: int) -> tuple[str, PreparedSource]:
        row = self.references[index % len(self.references)]
        if row["source_id"] not in self._loaded:
            tone_seed = row.get("room_tone_seed", tone_seed_for(self.seed, row["source_id"]))
            self._loaded[row["source_id"]] = prepare_source(
                reference_analysis(row), tone_seed, row.get("room_tone_rms")
            )
        return row["source_id"], self._loaded[row["source_id"]]

    def __call__(self, category: str, magnitude: float, direction: str, trial: int) -> bool | str:
        source_id, ref = self._reference(trial)
        dim = dimensions.get(category)
        low, high = dim.endpoints(magnitude, ref.sr)
        start, end = (low, high) if direction == "increase" else (high, low)
        condition = Condition(category, "adaptive", "linear", direction, magnitude, start, end)
        item, twin = (
            hashlib.sha256(f"{self.seed}|{source_id}|{c.key}|{trial}".encode()).hexdigest()[:16]
            for c in (condition, condition.twin())
        )
        clip = render_condition(
            ref, condition, self.seed, item, twin
        ).audio  # limited with its twin, as built
        ref.twins.pop((twin, item), None)  # never asked for: an adaptive run draws each trial anew
        audio = resample(clip, ref.sr, self.listener.sample_rate)
        prompt = build_prompt(category, "default", item_id=item, kind=ref.clean.kind)
        request = Request(item, prompt, {item: audio}, source_id)
        if self.listener.can_score:
            scores = self.listener.score_choices([request])[0]
            winners = [o for o, v in scores.items() if v == max(scores.values())]
            if len(winners) > 1:
                return TIE
            answer = winners[0]
        else:
            answer = parse_answer(self.listener.generate([request])[0], prompt.options).label
            if answer is None:
                return UNPARSED
        return answer == direction


def evaluate_adaptive(
    dataset: str | Path,
    listener: Listener,
    out: str | Path,
    categories: tuple[str, ...],
    method: str = "quest",
    max_trials: int = 40,
    seed: int = 0,
) -> list[AdaptiveResult]:
    """One adaptive threshold estimate per category; writes adaptive.json + results rows."""
    categories = categories or dimensions.PUBLISHED_CATEGORIES
    for category in categories:
        if dimensions.get(category).SPEC.channels > listener.channels:
            raise ConfigError(
                f"{listener.listener_id} hears {listener.channels} channel(s): {category} "
                "cannot be tested on it"
            )
    ask = TrialRenderer(dataset, listener, seed=seed)
    results = [
        run_adaptive(category, ask, method=method, seed=seed, max_trials=max_trials)
        for category in categories
    ]
    manifest = {
        "listener": listener.manifest(),
        "dataset": str(Path(dataset).resolve()),
        "adaptive": {"method": method, "max_trials": max_trials, "seed": seed},
    }
    save_adaptive(out, listener.listener_id, results, manifest)
    return results


def describe(result: AdaptiveResult) -> str:
    value = "–" if result.threshold is None else f"{result.threshold:.3g} {result.unit}"
    lo, hi = result.ci
    ci = "" if lo is None or not np.isfinite(lo) else f" [{lo:.3g}, {hi:.3g}]"
    guessed = [
        f"{n} {what}" for n, what in ((result.n_ties, "tied"), (result.n_unparsed, "unparsed")) if n
    ]
    note = f" ({' and '.join(guessed)} answered by a random guess)" if guessed else ""
    return f"{result.category}: {result.status} {value}{ci} after {result.n_trials} trials{note}"

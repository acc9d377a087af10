"""Adaptive threshold estimation for costly listeners (APIs, people): far fewer trials.

A full magnitude sweep asks every level many times, most of them far from threshold where
the answer is a foregone conclusion. Adaptive procedures place each trial where it is most
informative:

- `Staircase`: a transformed up-down staircase (Levitt 1971). n-down-1-up converges on the
  magnitude with P(correct) = 0.5 ** (1 / n): 70.7% for 2-down, 79.4% for 3-down. Steps are
  multiplicative (on log magnitude) and halve after the first reversals.
- `QuestPlus`: Bayesian placement (Watson 2017) over a grid of psychometric parameters
  (alpha, beta, lapse); each trial goes to the magnitude that minimises the expected entropy
  of the posterior, and the threshold is read from the posterior at 75% correct.

Both talk to the listener through one callback, `ask(category, magnitude, direction,
trial_index) -> correct`, so the caller decides how a clip of that magnitude is rendered and
answered. Magnitudes stay inside the dimension's `psychometric_range`; directions are
balanced in random pairs. The model is the one of `vocalgrad.evaluation.psychometric`.

No answer is not a wrong answer: `ask` may return TIE (the options scored exactly alike) or
UNPARSED (the reply named neither option). Counting those as wrong would pull P(correct)
below the 2AFC model's 0.5 floor and push thresholds up, so, following the 2AFC convention,
each is replaced by a random guess (seeded, so a run is reproducible), counted, and reported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from vocalgrad import dimensions
from vocalgrad.dataset import clean, write_jsonl
from vocalgrad.evaluation.psychometric import (
    BELOW,
    FUNCTIONS,
    LAPSE_MAX,
    NONE,
    OK,
    TARGET,
    PsychometricFit,
    _p,
    _x_at,
    fit_psychometric,
    polarity,
)

TIE, UNPARSED = "tie", "unparsed"  # what `ask` returns when the listener gave no answer
NO_ANSWER_RULE = "ties and unparsed answers are replaced by a seeded random guess (2AFC convention)"
Ask = Callable[[str, float, str, int], bool | str]
_FLIP = {"increase": "decrease", "decrease": "increase"}


@dataclass(frozen=True)
class Trial:
    index: int
    magnitude: float
    direction: str
    correct: bool  # for a trial without an answer: the random guess the procedure counted
    no_answer: str | None = None  # TIE or UNPARSED


@dataclass
class AdaptiveResult:
    """What an adaptive run found for one category. `threshold` is the 75%-correct magnitude
    (None unless status is "ok"); `ci` a 95% interval (credible for QUEST+, bootstrap over
    trials of the ML fit for the staircase). `n_ties` and `n_unparsed` count the trials
    answered by a random guess instead (see the module docstring)."""

    category: str
    method: str
    unit: str
    status: str
    threshold: float | None
    ci: tuple[float | None, float | None]
    n_trials: int
    trials: list[Trial] = field(default_factory=list)
    procedure_estimate: float | None = None  # the staircase's own reversal mean (at its target)
    procedure_target: float = TARGET
    fit: PsychometricFit | None = None
    n_ties: int = 0
    n_unparsed: int = 0

    def to_dict(self) -> dict:
        d = asdict(self)
        d["fit"] = self.fit.to_dict() if self.fit else None
        return d


class _Axis:
    """Magnitudes of a category on the strength axis x = polarity * ln(magnitude)."""

    def __init__(self, category: str, magnitude_range: tuple[float, float] | None = None) -> None:
        self.category = category
        self.sign = polarity(category)
        lo, hi = magnitude_range or dimensions.get(category).SPEC.psychometric_range
        xs = sorted(self.sign * math.log(m) for m in (lo, hi))
        self.lo, self.hi = xs
        self.span = self.hi - self.lo

    def magnitude(self, x: float) -> float:
        return float(math.exp(self.sign * x))

    def x(self, magnitude: float) -> float:
        return self.sign * math.log(magnitude)


class Staircase:
    """n-down-1-up staircase on log magnitude, starting from the strongest (easiest) change."""

    def __init__(
        self,
        category: str,
        n_down: int = 3,
        n_reversals: int = 12,
        discard_reversals: int = 4,
        max_trials: int = 80,
        step: float | None = None,
        magnitude_range: tuple[float, float] | None = None,
    ) -> None:
        self.axis = _Axis(category, magnitude_range)
        self.n_down, self.n_reversals, self.discard = n_down, n_reversals, discard_reversals
        self.max_trials = max_trials
        self.step = step if step is not None else self.axis.span / 6
        self.x = self.axis.hi
        self.run = 0  # consecutive correct answers
        self.last_move = 0  # +1 up (easier), -1 down (harder)
        self.reversals: list[float] = []
        self.n = 0

    @property
    def target(self) -> float:
        """P(correct) the staircase converges on."""
        return 0.5 ** (1 / self.n_down)

    @property
    def done(self) -> bool:
        return len(self.reversals) >= self.n_reversals or self.n >= self.max_trials

    def next_magnitude(self) -> float:
        return self.axis.magnitude(self.x)

    def update(self, magnitude: float, correct: bool) -> None:
        self.n += 1
        move = 0
        if correct:
            self.run += 1
            if self.run >= self.n_down:
                move, self.run = -1, 0
        else:
            move, self.run = 1, 0
        if move == 0:
            return
        if self.last_move and move != self.last_move:
            self.reversals.append(self.x)
        self.last_move = move
        step = self.step if len(self.reversals) < 2 else self.step / 2
        self.x = float(np.clip(self.x + move * step, self.axis.lo, self.axis.hi))

    def estimate(self) -> float | None:
        """Geometric mean of the reversal magnitudes after the first `discard` (None if none)."""
        used = self.reversals[self.discard :] or self.reversals[-2:]
        return self.axis.magnitude(float(np.mean(used))) if used else None


class QuestPlus:
    """Bayesian adaptive placement over a (alpha, beta, lapse) grid, minimum expected entropy."""

    def __init__(
        self,
        category: str,
        max_trials: int = 40,
        function: str = "normal",
        n_stimuli: int = 25,
        n_alpha: int = 41,
        n_beta: int = 10,
        lapses: tuple[float, ...] = (0.0, 0.02, 0.04, LAPSE_MAX),
        magnitude_range: tuple[float, float] | None = None,
    ) -> None:
        self.axis = ax = _Axis(category, magnitude_range)
        self.max_trials, self.dist, self.n = max_trials, FUNCTIONS[function], 0
        self.stimuli = np.linspace(ax.lo, ax.hi, n_stimuli)
        alpha = np.linspace(ax.lo - 0.5 * ax.span, ax.hi + 0.5 * ax.span, n_alpha)
        beta = np.geomspace(ax.span / 40, ax.span / 2, n_beta)
        grid = np.array(np.meshgrid(alpha, beta, np.asarray(lapses), indexing="ij")).reshape(3, -1)
        self.alpha, self.beta, self.lapse = grid
        # P(correct | stimulus, theta): (n_stimuli, n_theta)
        self.table = _p(self.stimuli[:, None], self.alpha, self.beta, self.lapse, self.dist)
        self.log_post = np.zeros(grid.shape[1])  # flat prior on the grid (log-spaced beta)
        self.x75 = _x_at(TARGET, self.alpha, self.beta, self.lapse, self.dist)

    @property
    def done(self) -> bool:
        return self.n >= self.max_trials

    @property
    def posterior(self) -> np.ndarray:
        p = np.exp(self.log_post - self.log_post.max())
        return p / p.sum()

    def next_magnitude(self) -> float:
        post = self.posterior
        pc = self.table @ post  # predictive P(correct) per stimulus
        ent = np.zeros(len(self.stimuli))
        for outcome, prob in ((self.table, pc), (1 - self.table, 1 - pc)):
            joint = outcome * post
            cond = joint / np.maximum(prob[:, None], 1e-300)
            with np.errstate(divide="ignore", invalid="ignore"):
                h = -np.sum(np.where(cond > 0, cond * np.log(cond), 0.0), axis=1)
            ent += prob * h
        return self.axis.magnitude(float(self.stimuli[int(np.argmin(ent))]))

    def update(self, magnitude: float, correct: bool) -> None:
        self.n += 1
        p = _p(self.axis.x(magnitude), self.alpha, self.beta, self.lapse, self.dist)
        self.log_post += np.log(np.clip(p if correct else 1 - p, 1e-12, 1.0))

    def threshold(self) -> tuple[float, float, float, float, float]:
        """(posterior median, 2.5%, 97.5% of the 75% point on x, P(x75 < lo), P(x75 > hi))."""
        post = self.posterior
        x = np.where(np.isfinite(self.x75), self.x75, np.inf)
        order = np.argsort(x)
        cdf = np.cumsum(post[order])
        q = [float(x[order][min(np.searchsorted(cdf, p), len(x) - 1)]) for p in (0.5, 0.025, 0.975)]
        return (*q, float(post[x < self.axis.lo].sum()), float(post[x > self.axis.hi].sum()))


def balanced_directions(n: int, rng: np.random.Generator) -> list[str]:
    """Increase and decrease in randomly ordered pairs: balanced at every even trial count."""
    out: list[str] = []
    while len(out) < n:
        pair = ["increase", "decrease"]
        rng.shuffle(pair)
        out += pair
    return out[:n]


def run_adaptive(
    category: str, ask: Ask, method: str = "quest", seed: int = 0, n_boot: int = 200, **options
) -> AdaptiveResult:
    """Run one adaptive procedure to its end through `ask`; `options` go to the procedure
    (`max_trials`, `n_down`, `function`, `magnitude_range`...)."""
    if method == "quest":
        proc: Staircase | QuestPlus = QuestPlus(category, **options)
    elif method == "staircase":
        proc = Staircase(category, **options)
    else:
        raise ValueError(f"method {method!r}: use 'quest' or 'staircase'")
    rng = np.random.default_rng([seed, 0xADA])
    guesses = np.random.default_rng([seed, 0x6E55])  # own stream: directions stay as they were
    trials: list[Trial] = []
    directions: list[str] = []
    while not proc.done:
        if not directions:
            directions = balanced_directions(2, rng)
        magnitude = proc.next_magnitude()
        direction = directions.pop(0)
        answer = ask(category, magnitude, direction, len(trials))
        if answer not in (TIE, UNPARSED) and not isinstance(answer, bool | np.bool_):
            raise ValueError(f"ask returned {answer!r}: use True, False, {TIE!r} or {UNPARSED!r}")
        no_answer = answer if isinstance(answer, str) else None
        correct = bool(guesses.random() < 0.5) if no_answer else bool(answer)
        trials.append(Trial(len(trials), magnitude, direction, correct, no_answer))
        proc.update(magnitude, correct)
    spec = dimensions.get(category).SPEC
    counts = {
        "n_ties": sum(t.no_answer == TIE for t in trials),
        "n_unparsed": sum(t.no_answer == UNPARSED for t in trials),
    }
    if isinstance(proc, QuestPlus):
        return _quest_result(proc, category, spec.unit, trials, counts)
    ax = proc.axis
    # The staircase's trials, fitted by maximum likelihood, give the 75% point on the same
    # footing as the full sweep (the reversal mean estimates the staircase's own target).
    fit = fit_psychometric(
        [t.magnitude for t in trials],
        [t.correct for t in trials],
        category,
        n_boot=n_boot,
        seed=seed,
        listener="staircase",
        bounds=(ax.magnitude(ax.lo), ax.magnitude(ax.hi)),
    )
    estimate = proc.estimate()
    status = fit.status
    if estimate is not None and ax.x(estimate) > ax.hi - proc.step / 2:
        status = NONE  # the staircase sat at the strongest change: never reliably heard
    return AdaptiveResult(
        category,
        "staircase",
        spec.unit,
        status,
        fit.threshold if status == OK else None,
        fit.ci if status == OK else (None, None),
        len(trials),
        trials,
        procedure_estimate=estimate,
        procedure_target=proc.target,
        fit=fit,
        **counts,
    )


def _quest_result(
    proc: QuestPlus, category: str, unit: str, trials: list[Trial], counts: dict[str, int]
) -> AdaptiveResult:
    median, lo, hi, p_below, p_above = proc.threshold()
    ax = proc.axis
    if p_above > 0.5:
        status = NONE
    elif p_below > 0.5:
        status = BELOW
    else:
        status = OK
    if status != OK:
        return AdaptiveResult(
            category, "quest", unit, status, None, (None, None), len(trials), trials, **counts
        )
    bounds = sorted(
        ax.magnitude(float(np.clip(v, ax.lo - ax.span, ax.hi + ax.span))) for v in (lo, hi)
    )
    return AdaptiveResult(
        category,
        "quest",
        unit,
        status,
        ax.magnitude(median),
        (bounds[0], bounds[1]),
        len(trials),
        trials,
        procedure_estimate=ax.magnitude(median),
        **counts,
    )


class SimulatedObserver:
    """A listener with a known psychometric function, for tests and demos: `threshold` is the
    magnitude answered correctly 75% of the time; `beta` the spread on ln(magnitude).

    With `ties`, a trial it does not hear gets no answer (TIE) instead of a guess, like a
    scoring model whose options tie on an inaudible change: it hears with probability
    2 * p_correct - 1, so with ties guessed its P(correct) is still `p_correct`."""

    def __init__(
        self,
        category: str,
        threshold: float | None,
        beta: float = 0.4,
        lapse: float = 0.02,
        function: str = "normal",
        seed: int = 0,
        ties: bool = False,
    ) -> None:
        self.sign = polarity(category)
        self.dist = FUNCTIONS[function]
        self.beta, self.lapse, self.ties = beta, lapse, ties
        self.chance = threshold is None
        self.alpha = 0.0
        if threshold is not None:
            x75 = self.sign * math.log(threshold)
            q = (TARGET - 0.5) / (0.5 - lapse)
            self.alpha = x75 - beta * float(self.dist.ppf(q))
        self.rng = np.random.default_rng(seed)

    def p_correct(self, magnitude: float | np.ndarray) -> np.ndarray:
        if self.chance:
            return np.full(np.shape(magnitude), 0.5)
        x = self.sign * np.log(np.asarray(magnitude, dtype=float))
        return _p(x, self.alpha, self.beta, self.lapse, self.dist)

    def __call__(
        self, category: str, magnitude: float, direction: str, trial_index: int
    ) -> bool | str:
        p = float(self.p_correct(magnitude))
        if self.ties:
            return True if self.rng.random() < 2 * p - 1 else TIE
        return bool(self.rng.random() < p)


def trial_rows(
    result: AdaptiveResult, listener: str, source_ids: list[str] | None = None
) -> list[dict]:
    """The trials as results.jsonl-style rows (tier "adaptive"), so the same tools read them.

    A trial without an answer has `predicted` None and `parse_status` "tie" or "unparsed", as in
    a sweep; its `correct` is the guess the procedure counted (`guessed` True)."""
    rows = []
    for t in result.trials:
        source = source_ids[t.index % len(source_ids)] if source_ids else None
        rows.append(
            {
                "key": f"adaptive|{result.method}|{result.category}|{t.index}",
                "item_id": f"adaptive-{result.category}-{t.index}",
                "listener": listener,
                "variant": "default",
                "control": "none",
                "mode": result.method,
                "category": result.category,
                "direction": t.direction,
                "tier": "adaptive",
                "curve": "linear",
                "magnitude": t.magnitude,
                "source_id": source,
                "speaker_id": None,
                "llr": None,
                "correct": t.correct,
                "predicted": None
                if t.no_answer
                else t.direction
                if t.correct
                else _FLIP[t.direction],
                "parse_status": t.no_answer or "ok",
                "guessed": t.no_answer is not None,
                "error": None,
            }
        )
    return rows


def save_adaptive(
    run_dir: str | Path, listener: str, results: list[AdaptiveResult], manifest: dict | None = None
) -> Path:
    """Write `adaptive.json` (what `vocalgrad report` reads) and the trials as results rows."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    payload = {
        "listener": listener,
        "manifest": manifest or {},
        "no_answer": NO_ANSWER_RULE,
        "results": [r.to_dict() for r in results],
    }
    path = run_dir / "adaptive.json"
    path.write_text(json.dumps(clean(payload), indent=2) + "\n")
    write_jsonl(
        run_dir / "results.jsonl", [row for r in results for row in trial_rows(r, listener)]
    )
    if manifest is not None and not (run_dir / "manifest.json").is_file():
        (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return path

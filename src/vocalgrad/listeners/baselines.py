"""Reference listeners: chance, fixed answers, an ideal observer that measures the audio,
and a shortcut listener that answers from cues other than the change over time.

They bracket every model's score: `random` and the fixed answers show what bias alone
earns (50% accuracy, d' = 0), and the ideal observer is the acoustic ceiling: what a
listener that really measures the signal can reach on this dataset. The shortcut listener
is what a listener can earn without hearing the change at all (overall level, duration,
silences, the first and last 300 ms): on a clean dataset it stays at chance.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vocalgrad import dimensions, formats, registry
from vocalgrad.audio import load_audio, resample
from vocalgrad.dataset import content_sha256, load_references, load_rows
from vocalgrad.dimensions.base import Measured
from vocalgrad.errors import ConfigError, did_you_mean
from vocalgrad.formats.base import Asked
from vocalgrad.listeners.base import Listener, Request
from vocalgrad.records import LABELS
from vocalgrad.signal.analysis import source_pitch_floor
from vocalgrad.signal.evidence import reading
from vocalgrad.signal.kinds import SPEECH, row_kind

REVERSED_SUFFIX = "#reversed"
BASELINES = ("random", "always-increase", "always-decrease", "ideal", "shortcut", "one-end")
"""Every `baseline:` name, for the spec's error and `vocalgrad list listeners`."""


class RandomListener(Listener):
    """Answers by a coin seeded from (seed, item id): same answer on every rerun."""

    can_score = True
    channels = 2  # never listens, so loses nothing

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.listener_id = "baseline:random"
        self.revision = f"seed{seed}"

    def _draw(self, request: Request) -> float:
        digest = hashlib.sha256(
            f"{self.seed}|{request.item_id}|{request.prompt.variant}".encode()
        ).digest()
        return np.random.default_rng(list(digest[:8])).standard_normal()

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [r.prompt.options[0] if self._draw(r) > 0 else r.prompt.options[1] for r in requests]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            x = self._draw(r)
            first, second = r.prompt.options[:2]
            out.append(
                {
                    first: float(x / 2),
                    second: float(-x / 2),
                    **{o: -10.0 for o in r.prompt.options[2:]},
                }
            )
        return out


class ConstantListener(Listener):
    """Always gives the same answer: the pure-bias reference (|criterion| large, d' = 0)."""

    can_score = True
    channels = 2  # never listens, so loses nothing

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.listener_id = f"baseline:always-{answer}"
        self.revision = "1"

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [
            next((o for o, label in r.prompt.label_of.items() if label == self.answer), self.answer)
            for r in requests
        ]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        return [
            {o: (0.0 if label == self.answer else -5.0) for o, label in r.prompt.label_of.items()}
            for r in requests
        ]


class IdealObserver(Listener):
    """Answers from acoustic measurement of the clip against its unprocessed source.

    Deliberately independent of the builder's verification code: librosa features
    (YIN F0, RMS, MFCC alignment, spectral roll-off, envelope modulation) compared between
    the first and last thirds of the clip, where the builder uses Praat and 20% windows.
    It is an upper reference for what the audio supports, not a model of a human.

    Every question format says how it answers its items (`QuestionFormat.evidence`): a
    comparison item from the held value of each part (second minus first), a recognition clip
    from its held value against the median of its (split, category, magnitude) family.
    """

    can_score = True
    listener_id = "baseline:ideal"
    # 2: held distance from its reverberant-to-direct ratio, held stereo from straight ahead;
    # 3: clarity band by band; 4: F0 evidence leaves octave jumps out; 5: sequence reads each
    # half's evidence along the clip's way of change; 6: pitch read in the source's own range;
    # 7: contour read over the speech's halves; 8: F0 read on the source's voiced frames, a
    # tilt between the thirds of the source's own spectrum
    revision = "8"
    channels = 2

    def __init__(self, dataset: str | Path) -> None:
        self.root = Path(dataset)
        # its answers read the references and (recognition) the dataset's other clips
        self.fitted_on = content_sha256(self.root)
        self.references = _references(self.root, "the ideal observer")
        self.rows = {
            r["item_id"]: r for r in load_rows(self.root)
        }  # for requests without source_id
        self._ref_cache: dict[str, np.ndarray] = {}
        self._ranges: dict[str, tuple[float, float]] = {}  # `pitch_range` per source
        self.memo: dict[str, dict] = {}  # what a format learnt of the dataset, by format

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            evidence = self.evidence(r)
            scores = {"increase": evidence / 2, "decrease": -evidence / 2}
            out.append(by_option(r, scores, -abs(evidence) - 1.0))
        return out

    def evidence(self, request: Request) -> float:
        """Signed decision statistic: > 0 means the category increased."""
        clip = request.target_audio
        if clip is None or not np.any(clip):
            return 0.0
        base_id = request.item_id.removesuffix(REVERSED_SUFFIX)
        row = self.rows.get(base_id)
        source_id = request.source_id or (row or {}).get("source_id")
        if source_id not in self.references:
            raise ConfigError(f"item {base_id}: no reference source in {self.root}")
        ref = self.reference(source_id)
        reversed_ = request.item_id.endswith(REVERSED_SUFFIX)
        if reversed_:
            ref = ref[::-1].copy()
        asked = Asked(request.prompt.category, clip, ref, row or {}, reversed_)
        with reading(row_kind(self.references[source_id]), self.pitch_range(source_id)):
            return formats.of_row(row or {}).evidence(self, asked)

    def pitch_range(self, source_id: str) -> tuple[float, float] | None:
        """The F0 range (Hz) to look for in clips of a source that is not speech: up to the
        ceiling its reference records, from 10 semitones below its strongest frequency (a
        tone's own range; `source_pitch_floor`); None (speech's range) for speech and for
        references from before kinds."""
        reference = self.references[source_id]
        kind = row_kind(reference)
        if kind == SPEECH or reference.get("pitch_ceiling_hz") is None:
            return None
        if source_id not in self._ranges:
            floor = source_pitch_floor(self.reference(source_id), self.sample_rate, kind)
            self._ranges[source_id] = (floor, float(reference["pitch_ceiling_hz"]))
        return self._ranges[source_id]

    def held(self, category: str, clip: np.ndarray, ref: np.ndarray) -> float:
        """Where a held clip lies on the dimension, relative to its source (`Bound.held`), with
        pitch read in that source's range where `ref` is a reference this observer handed out
        (a recognition family's other clips); else in the range of the item asked about."""
        source_id = next((s for s, audio in self._ref_cache.items() if audio is ref), None)
        if source_id is None:
            return dimensions.get(category).held(clip, ref, self.sample_rate)
        with reading(row_kind(self.references[source_id]), self.pitch_range(source_id)):
            return dimensions.get(category).held(clip, ref, self.sample_rate)

    def reference(self, source_id: str) -> np.ndarray:
        """A source's reference audio at the observer's rate (the last one is kept)."""
        if source_id not in self._ref_cache:
            audio, sr = load_audio(self.references[source_id]["path"])
            self._ref_cache = {source_id: resample(audio, sr, self.sample_rate)}
        return self._ref_cache[source_id]


def _references(root: Path, who: str) -> dict[str, dict]:
    """The dataset's reference rows by source id; a `ConfigError` naming `who` if it has none."""
    references = load_references(root)
    if not references:
        raise ConfigError(f"{root}: {who} needs the dataset's references/ folder")
    return references


def by_option(request: Request, scores: dict[str, float], low: float) -> dict[str, float]:
    """Scores by label (increase / decrease) as scores by the prompt's answer words."""
    return {o: float(scores.get(label, low)) for o, label in request.prompt.label_of.items()}


class _ProbabilityListener(Listener):
    """A baseline that answers from p(increase) (`p_increase`, per request): it generates the
    likelier option and scores both options by their log-probabilities."""

    can_score = True

    def p_increase(self, request: Request) -> float:
        raise NotImplementedError

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            p = float(np.clip(self.p_increase(r), 1e-6, 1 - 1e-6))
            scores = {"increase": float(np.log(p)), "decrease": float(np.log1p(-p))}
            out.append(by_option(r, scores, min(scores.values()) - 5.0))
        return out


class ShortcutListener(_ProbabilityListener):
    """Answers from direction-invariant cues only (`vocalgrad.stimuli.audit.clip_cues`).

    Per category it fits the shortcut audit's logistic regression on the train split's
    changing clips, using every cue family except the dimension's target cues, and answers
    P(increase) from the clip's cues. It never sees the clip's course over time, so any
    accuracy above chance is a shortcut the dataset leaves open (reversed controls are
    answered from their audio like any other clip).
    """

    can_score = True
    listener_id = "baseline:shortcut"

    def __init__(self, dataset: str | Path, workers: int = 1) -> None:
        from vocalgrad.stimuli import audit
        from vocalgrad.stimuli.verify import row_pitch_ceiling

        self.root = Path(dataset)
        if not (self.root / "train" / "metadata.jsonl").is_file():
            raise ConfigError(
                f"{self.root}: baseline:shortcut learns its cues from the train split, and this "
                "dataset has none (train/metadata.jsonl); build it with --n-train > 0"
            )
        rows = load_rows(self.root, splits=("train",))
        changing = [r for r in rows if r["direction"] in LABELS]
        if not changing:
            raise ConfigError(
                f"{self.root}: the train split has no increase/decrease clips to learn cues from"
            )
        rates = Counter(int(r["sample_rate"]) for r in rows)
        self.sample_rate = rates.most_common(1)[0][0]
        self.revision = f"cues{audit.CUES_VERSION}"
        # answers depend on what was learnt: the train split's clips and labels
        self.fitted_on = content_sha256(self.root)
        cues = audit.dataset_cues(self.root, changing, workers=workers)
        self._models = {
            c: audit.fit_direction_model(c, changing, cues)
            for c in sorted({r["category"] for r in changing})
        }
        all_rows = load_rows(self.root)
        references = load_references(self.root)
        self._spans = {r["item_id"]: audit.row_span(r) for r in all_rows}
        self._ceilings = {
            r["item_id"]: row_pitch_ceiling(r, references.get(r.get("source_id"))) for r in all_rows
        }
        self._parts = {r["item_id"]: audit.row_parts(r) for r in all_rows}
        self._paths = {r["item_id"]: r["path"] for r in all_rows}
        self._measured = audit.cached_cues(self.root, all_rows)
        self._cues: dict[str, dict[str, float]] = {}

    def _span(self, item_id: str, duration_s: float) -> tuple[float, float] | None:
        """The item's speech span, mirrored for a time-reversed control."""
        span = self._spans.get(item_id.removesuffix(REVERSED_SUFFIX))
        if span is None or not item_id.endswith(REVERSED_SUFFIX):
            return span
        return duration_s - span[1], duration_s - span[0]

    def _audited(self, item_id: str, clip: np.ndarray) -> dict[str, float] | None:
        """The cues the dataset's audit measured for this clip, if `clip` is that item's file
        as the audit read it (not a reversed control, a downmix or a resampled copy)."""
        cues = self._measured.get(item_id)
        if cues is None:
            return None
        audio, sr = load_audio(self._paths[item_id], mono=False)
        return cues if sr == self.sample_rate and np.array_equal(audio, clip) else None

    def p_increase(self, request: Request) -> float:
        """P(increase) from the clip's cues; 0.5 without audio (text-only and silence controls).
        A clip the build's audit measured is looked up, not measured again."""
        from vocalgrad.signal.analysis import F0_CEILING_HZ
        from vocalgrad.stimuli.audit import clip_cues

        category = request.prompt.category
        if category not in self._models:
            raise ConfigError(
                f"baseline:shortcut: the train split of {self.root} has no {category} clips"
            )
        clip = request.target_audio
        if clip is None or not np.any(clip):
            return 0.5
        key = hashlib.sha1(np.ascontiguousarray(clip, dtype=np.float32).tobytes()).hexdigest()
        cues = self._cues.get(key)
        if cues is None:  # the same clip comes back once per prompt variant and option order
            # a reversed control's parts would be mirrored: its layout cues are left to the fill
            # values
            parts = (
                None
                if request.item_id.endswith(REVERSED_SUFFIX)
                else self._parts.get(request.item_id)
            )
            base_id = request.item_id.removesuffix(REVERSED_SUFFIX)
            cues = self._audited(request.item_id, clip) or clip_cues(
                clip,
                self.sample_rate,
                self._span(request.item_id, len(clip) / self.sample_rate),
                parts,
                self._ceilings.get(base_id, F0_CEILING_HZ),
            )
            if len(self._cues) >= 4096:
                self._cues.clear()
            self._cues[key] = cues
        return self._models[category].p_increase(cues)


class OneEndObserver(_ProbabilityListener):
    """Answers from one end of the clip only: the dimension's own measure (the builder's
    verification measure, against the heard source) at the start or the end of the speech,
    placed in the population of that end learnt on the train split.

    It never compares the two ends, so what it earns is what an endpoint strategy earns
    without following the change over time: unless the endpoints are roved
    (`rove_endpoints`), the value at one end says which end of the tier it is. Per category
    it measures the train split's changing clips, keeps the end whose values separate the
    labels better, and answers from a logistic regression on that value. Only items whose
    clip changes over time (`QuestionFormat.changes_over_time`): a held clip has one value,
    which recognition asks for by design.
    """

    can_score = True
    listener_id = "baseline:one-end"
    # 2: the source analysed as built (its recorded span, pitch range and kind of sound)
    revision = "2"
    channels = 2

    def __init__(self, dataset: str | Path) -> None:
        import json

        self.root = Path(dataset)
        rows = load_rows(self.root)
        self.rows = {r["item_id"]: r for r in rows}
        self.references = _references(self.root, "baseline:one-end")
        self.train = [r for r in rows if r["split"] == "train" and r["direction"] in LABELS]
        if not self.train:
            raise ConfigError(
                f"{self.root}: baseline:one-end learns from the train split's changing clips, "
                "and this dataset has none; build it with --n-train > 0"
            )
        if any(not formats.of_row(r).changes_over_time for r in self.train):
            changing = ", ".join(f.name for f in formats.listed() if f.changes_over_time)
            raise ConfigError(
                f"baseline:one-end answers {changing} items only (a held clip has one value)"
            )
        build = json.loads((self.root / "build.json").read_text())
        self.seed = int(build["config"]["seed"])
        self.sample_rate = int(build["config"]["sample_rate"])
        # answers depend on the train split's clips and labels, and on the build seed (the
        # room tone of the heard source is drawn again from it)
        self.fitted_on = hashlib.sha256(
            f"{content_sha256(self.root)}|seed {self.seed}|{self.sample_rate} Hz".encode()
        ).hexdigest()
        self._models: dict[str, tuple[str, object]] = {}
        self._heard: dict[str, object] = {}

    def model(self, category: str) -> tuple[str, object]:
        """(the end read, its logistic regression or a base rate), learnt on first use from
        the train split's clips of `category`, measured as the test clips are."""
        from sklearn.linear_model import LogisticRegression

        if category not in self._models:
            members = [r for r in self.train if r["category"] == category]
            if not members:
                raise ConfigError(
                    f"baseline:one-end: the train split of {self.root} has no {category} clips"
                )
            y = np.array([r["direction"] == "increase" for r in members], dtype=int)
            measured = []
            for r in sorted(members, key=lambda m: m["source_id"]):  # one heard source at a time
                audio, sr = load_audio(r["path"], mono=False)
                measured.append(
                    (r, self._measure(category, resample(audio, sr, self.sample_rate), r, False))
                )
            y = np.array([r["direction"] == "increase" for r, _ in measured], dtype=int)
            best: tuple[float, str, object] | None = None
            for end in ("start", "end"):
                x = np.array([[_at(m, end)] for _, m in measured], dtype=float)
                finite = np.isfinite(x[:, 0])
                if len(np.unique(y[finite])) < 2:
                    candidate: tuple[float, str, object] = (0.5, end, float(y.mean()))
                else:
                    fitted = LogisticRegression(max_iter=1000).fit(x[finite], y[finite])
                    candidate = (float(fitted.score(x[finite], y[finite])), end, fitted)
                if best is None or candidate[0] > best[0]:
                    best = candidate
            self._models[category] = (best[1], best[2])  # type: ignore[index]
        return self._models[category]

    def _heard_source(self, source_id: str):
        """The source as every clip of it was measured against: the reference (analysed as
        built: its span, pitch range and kind) plus the build's room-tone floor (regenerated
        from the build seed)."""
        from vocalgrad.stimuli.render import prepare_source, tone_seed_for
        from vocalgrad.stimuli.verify import reference_analysis

        if source_id not in self._heard:
            clean = reference_analysis(self.references[source_id], self.sample_rate)
            self._heard = {
                source_id: prepare_source(clean, tone_seed_for(self.seed, source_id)).heard
            }
        return self._heard[source_id]

    def _measure(self, category: str, clip: np.ndarray, row: dict, reversed_: bool):
        from vocalgrad.audio import SpeechSpan

        heard = self._heard_source(row["source_id"])
        if reversed_:
            mirrored = dataclasses.replace(
                heard.span,
                onset_s=heard.duration_s - heard.span.offset_s,
                offset_s=heard.duration_s - heard.span.onset_s,
            )
            heard = heard.like(np.ascontiguousarray(heard.audio[::-1]), span=mirrored)
        span = SpeechSpan(float(row["speech_onset_s"]), float(row["speech_offset_s"]), True)
        return dimensions.get(category).measure(heard.like(clip, span=span), heard)

    def p_increase(self, request: Request) -> float:
        """P(increase) from the measure at the category's chosen end; 0.5 without audio."""
        category = request.prompt.category
        end, model = self.model(category)
        clip = request.target_audio
        row = self.rows.get(request.item_id.removesuffix(REVERSED_SUFFIX))
        if clip is None or not np.any(clip) or row is None:
            return 0.5
        if isinstance(model, float):
            return model
        reversed_ = request.item_id.endswith(REVERSED_SUFFIX)
        value = _at(self._measure(category, clip, row, reversed_), end)
        if not np.isfinite(value):
            return 0.5
        return float(model.predict_proba(np.array([[value]]))[0, 1])  # type: ignore[attr-defined]


def _at(measured: Measured, end: str) -> float:
    """The measure at one end of the clip: ``end`` is "start" or "end"."""
    return float(measured.start if end == "start" else measured.end)


OPTIONS: dict[str, dict[str, int]] = {"random": {"seed": 0}, "shortcut": {"workers": 1}}
"""The `-O KEY=VALUE` options each baseline takes, with the least value each may have (all
are whole numbers); the others take none."""


def _options(name: str, options: dict[str, Any]) -> dict[str, int]:
    """`options` checked against what baseline `name` takes: an unknown or ill-typed option
    is a usage error, never dropped (`-O seed=abc` once ran with seed 0 in silence)."""
    accepted = OPTIONS.get(name, {})
    takes = f"it takes {', '.join(accepted)}" if accepted else "it takes no options"
    for key, value in options.items():
        if key not in accepted:
            raise ConfigError(
                f"baseline:{name}: "
                + (registry.unknown("option", key, accepted) if accepted else f"{takes}, not {key}")
            )
        low = accepted[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(
                f"baseline:{name}: option {key} = {value!r}: expected a whole number >= {low}; "
                f"{takes}"
            )
    return options


def from_spec(rest: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """The `baseline:` family: `random[:SEED]`, `always-increase`, `always-decrease`, `ideal`,
    `shortcut`, `one-end` (the last three read the dataset they answer about).

    Options (`-O KEY=VALUE`, `OPTIONS`): ``seed`` for `random` (as `random:SEED`),
    ``workers`` for `shortcut`; any other is refused."""
    name, _, arg = rest.partition(":")
    observers = {"ideal": IdealObserver, "shortcut": ShortcutListener, "one-end": OneEndObserver}
    if name not in ("random", "always-increase", "always-decrease", *observers):
        raise ConfigError(
            f"unknown baseline {name!r}{did_you_mean(name, BASELINES)}; use "
            f"{', '.join(BASELINES[:-1])} or {BASELINES[-1]}"
        )
    options = _options(name, options)
    if name == "random":
        if arg and not arg.isdigit():
            raise ConfigError(f"baseline:random:{arg}: the seed must be a non-negative integer")
        if arg and "seed" in options and int(arg) != options["seed"]:
            raise ConfigError(
                f"baseline:random:{arg} and -O seed={options['seed']} name two seeds; give one"
            )
        return RandomListener(seed=int(arg) if arg else options.get("seed", 0))
    if name in ("always-increase", "always-decrease"):
        return ConstantListener(name.removeprefix("always-"))
    if dataset is None:
        raise ConfigError(f"baseline:{name} needs the dataset it answers about")
    return observers[name](dataset, **options)

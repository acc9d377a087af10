"""Adding a dimension is one new module: a test-only dimension, defined in this file and
registered at run time, is built, verified, audited, evaluated by the baselines and asked in
all three question formats, with no other source file touched.

`HUM` below is that module: the members of `vocalgrad.dimensions.base.Dimension` and nothing
else (the optional ones take the protocol's defaults). The docs page "Add a dimension" walks
through the same code.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from vocalgrad import dimensions
from vocalgrad.audio import frame_rms
from vocalgrad.dataset import load_rows
from vocalgrad.dimensions.base import Bound, DimensionSpec, Measured, Question, Track, bind
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import EvalConfig, evaluate
from vocalgrad.evaluation.score import score_run
from vocalgrad.formats import names as format_names
from vocalgrad.listeners.baselines import IdealObserver, RandomListener
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.signal.analysis import Analysis, head_tail
from vocalgrad.signal.trajectories import sample_times
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.verify import verify_dataset

pytestmark = pytest.mark.usefixtures("builtin_cache")

# --8<-- [start:module]
HUM_HZ = 120.0

SPEC = DimensionSpec(
    name="mains_hum",
    parameter="hum RMS / speech RMS",
    unit="ratio",
    increase_means="the mains hum gets louder",
    tiers={"low": 0.05, "mid": 0.1, "high": 0.3},
    scale="linear",
    measured="level of what the clip adds to the gain-matched source, re speech",
    measured_unit="dB",
    audibility_floor=3.0,
    floor_basis="a level JND of ~1 dB, with room for the source's own floor (test-only)",
    psychometric_range=(0.01, 0.5),
    constant_tolerance=3.0,
    # the hum is there in the pauses too: what the edges and the spectrum hold is the target
    target_cues=(
        "edge_level",
        "edge_spectrum",
        "edge_zeros",
        "edge_silence",
        "global_centroid_hz",
        "global_file_bytes",
    ),
)


def endpoints(magnitude: float, sr: int) -> tuple[float, float]:
    return 0.0, magnitude


def inaudible_reason(magnitude: float, sr: int) -> str | None:
    return None if magnitude > 0 else "a hum level of 0 adds nothing"


def render(ref: Analysis, track: Track, rng: np.random.Generator) -> np.ndarray:
    times = sample_times(len(ref.audio), ref.sr)
    phase = rng.uniform(0, 2 * np.pi)
    hum = np.sqrt(2) * np.sin(2 * np.pi * HUM_HZ * times + phase) * track(times) * ref.speech_rms
    return (ref.audio + hum).astype(np.float32)


def measure(clip: Analysis, ref: Analysis) -> Measured:
    n = min(len(clip.audio), len(ref.audio))
    x, y = ref.audio[:n].astype(np.float64), clip.audio[:n].astype(np.float64)
    gain = float(np.dot(x, y) / max(np.dot(x, x), 1e-12))
    power = frame_rms((y - gain * x).astype(np.float32), ref.sr) ** 2
    head, tail = ref.head_tail_frames(len(power))
    h, t = head_tail(power, head, tail, reduce=np.mean)
    speech = max(ref.speech_rms, 1e-10) ** 2
    return Measured(*(10 * np.log10((p + ref.floor_power) / speech) for p in (h, t)))


QUESTION = Question(recognition=("recording", "humming", "quiet"))
# --8<-- [end:module]

# The module, as `vocalgrad.dimensions` would import it from src/vocalgrad/dimensions/mains_hum.py
HUM = SimpleNamespace(
    SPEC=SPEC,
    endpoints=endpoints,
    inaudible_reason=inaudible_reason,
    render=render,
    measure=measure,
    QUESTION=QUESTION,
)


@pytest.fixture(scope="module")
def hum() -> Bound:
    # --8<-- [start:register]
    dim = dimensions.register(HUM)
    # --8<-- [end:register]
    yield dim
    dimensions.unregister(SPEC.name)


@pytest.fixture(scope="module")
def built(hum, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hum")
    config = BuildConfig(categories=(SPEC.name,), n_test=2, n_train=2, tiers=("high",))
    report = build(config, root, workers=1)
    assert report["clips_kept"] > 0
    return root


def test_the_protocol_fills_in_what_the_module_leaves_out(hum):
    assert hum.name == "mains_hum" and SPEC.name in dimensions.names()
    times = np.array([0.0, 0.5, 1.0])
    assert np.array_equal(hum.output_time(lambda t: t, times), times)  # no time warp
    assert hum.blind_change(None) is None  # no source-free measure declared
    assert hum.held_evidence is None and hum.evidence is not None


def test_a_broken_module_is_refused_when_bound():
    with pytest.raises(TypeError, match="lacks measure"):
        bind(
            SimpleNamespace(
                SPEC=SPEC, endpoints=endpoints, inaudible_reason=inaudible_reason, render=render
            )
        )
    with pytest.raises(TypeError, match="SPEC must be a DimensionSpec"):
        bind(SimpleNamespace(**{**vars(HUM), "SPEC": {"name": "x"}}))
    warped = dataclasses.replace(SPEC, warps_time=True)
    with pytest.raises(TypeError, match="warps_time"):
        bind(SimpleNamespace(**{**vars(HUM), "SPEC": warped}))


def test_a_name_is_registered_once(hum):
    with pytest.raises(ConfigError, match="exists"):
        dimensions.register(HUM)
    with pytest.raises(ConfigError, match="unknown dimension 'no_such_dimension'"):
        dimensions.get("no_such_dimension")


def test_it_is_asked_in_all_three_formats(hum):
    assert question_text(SPEC.name) == (
        "Does the mains hum increase or decrease over time?\n\n"
        'Answer with only one word: "increase" or "decrease".'
    )
    assert question_text(SPEC.name, fmt="comparison").startswith(
        "Is the mains hum higher or lower in the second part than in the first?"
    )
    recognition = build_prompt(SPEC.name, fmt="recognition")
    assert recognition.text.startswith("Is the recording humming or quiet?")
    assert recognition.label_of == {"humming": "increase", "quiet": "decrease"}

    def prompt(fmt):
        try:
            return build_prompt(SPEC.name, fmt=fmt)
        except ConfigError:  # a two-dimension format: it names volume as the other dimension
            return build_prompt(SPEC.name, fmt=fmt, second="volume")

    asked = {fmt: prompt(fmt) for fmt in format_names()}
    assert {fmt: p.variant for fmt, p in asked.items()} == dict.fromkeys(format_names(), "default")
    with pytest.raises(ConfigError, match="exists only for"):  # it declares no paraphrases
        question_text(SPEC.name, "paraphrase1")


def test_it_is_built_verified_and_audited(built):
    rows = load_rows(built)
    assert {r["category"] for r in rows} == {SPEC.name}
    assert {r["direction"] for r in rows} >= {"increase", "decrease"}
    increase = [r["measured_change"] for r in rows if r["direction"] == "increase"]
    assert min(increase) > SPEC.audibility_floor
    verified = verify_dataset(built)
    assert verified["per_category"][SPEC.name]["agreement"] == 1.0
    audit = json.loads((built / "audit.json").read_text())
    assert SPEC.name in audit["per_category"]


def test_the_baselines_answer_it(built, tmp_path):
    ideal = evaluate(built, IdealObserver(built), tmp_path / "ideal", EvalConfig(mode="choice"))
    assert ideal["answered"] > 0
    summary = score_run(tmp_path / "ideal")
    overall = next(
        g for g in summary["groups"]["default/choice"]["table"] if g["group"] == "overall"
    )
    assert overall["accuracy"] == 1.0  # the default evidence (added energy) reads a hum ramp
    evaluate(built, RandomListener(), tmp_path / "random", EvalConfig(mode="choice"))
    assert score_run(tmp_path / "random")["groups"]["default/choice"]["table"]

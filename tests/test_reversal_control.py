"""The reversal control (benchmarks/reversal_control.py): the same items rendered from a
source played forwards and backwards split an order-free leak into the speech's part and
the renderer's (issue #24: trace each failure to its mechanism)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from conftest import arctic_path, load_benchmark

from vocalgrad.audio import load_audio
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import plan_conditions


def _plan(category: str) -> tuple[BuildConfig, list]:
    config = BuildConfig(categories=(category,), tiers=("high",), curves=("linear",))
    return config, [c for c in plan_conditions(config)[0] if c.direction == "increase"]


def test_a_leak_that_flips_with_the_source_is_the_speechs_one_that_stays_the_renderers():
    control = load_benchmark("reversal_control")
    assert control.split_leak(0.70, 0.30) == pytest.approx((0.20, 0.0))  # flips: content
    assert control.split_leak(0.70, 0.70) == pytest.approx((0.0, 0.20))  # keeps: renderer
    assert control.share([0.3, -0.1, 0.0, 2.0, np.nan]) == (2 / 3, 3)  # ties and NaN left out
    table = control.report(
        "volume",
        {"of_rms_db": [1.0] * 30, "of_peak_dbfs": [0.0] * 30},
        {"of_rms_db": [-1.0] * 30, "of_peak_dbfs": [0.0] * 30},
        top=4,
    )
    assert "| of_rms_db | 1.00 (30, p=1.9e-09) | 0.00 | +0.50 | +0.00 |" in table
    assert "of_peak_dbfs" not in table  # no twin differs: nothing to report


def test_a_palindrome_reads_the_same_both_ways_and_real_speech_does_not(tmp_path):
    """Reversal changes the source and nothing else: a palindromic source gives the same twin
    differences forwards and backwards (no content part), a real sentence does not."""
    control = load_benchmark("reversal_control")
    speech, sr = load_audio(arctic_path())
    palindrome = tmp_path / "palindrome.wav"
    sf.write(palindrome, np.concatenate([speech, speech[::-1]]), sr, subtype="PCM_16")
    config, conditions = _plan("volume")
    assert len(conditions) == 1
    fwd, rev = control._one_source((str(palindrome), "speech", None, "p", config, conditions))
    assert fwd == rev and len(fwd["volume"]["of_rms_db"]) == 1
    fwd, rev = control._one_source((str(arctic_path()), "speech", None, "a", config, conditions))
    changed = [n for n in fwd["volume"] if fwd["volume"][n] != rev["volume"][n]]
    assert len(changed) >= len(fwd["volume"]) // 2, changed


def test_a_tone_is_prepared_as_a_tone_and_passes_the_reference_check(tmp_path):
    """The control prepares each source as its kind of sound: a tone prepared as a tone
    reproduces the dataset's reference and gives its twins; prepared as speech it does not,
    and the control stops (as it did on every tone and note)."""
    from vocalgrad.api import build
    from vocalgrad.sources import ensure_rendered, resolve_sources

    root = tmp_path / "tones"
    build(
        root, "tones", n_test=2, n_train=0, categories=("volume",), tiers=("high",),
        curves=("linear",), audit=False, workers=1,
    )  # fmt: skip
    control = load_benchmark("reversal_control")
    config = BuildConfig(**json.loads((root / "build.json").read_text())["config"])
    reference = json.loads((root / "references" / "metadata.jsonl").read_text().splitlines()[0])
    [tone] = [
        s
        for s in ensure_rendered(resolve_sources("tones"))
        if s.source_id == reference["source_id"]
    ]
    _, conditions = _plan("volume")
    stored = str(root / "references" / reference["file_name"])

    def task(kind: str) -> tuple:
        return (tone.path, kind, stored, tone.source_id, config, conditions)

    fwd, rev = control._one_source(task(tone.kind))
    assert tone.kind != "speech" and len(fwd["volume"]["of_rms_db"]) == 1
    with pytest.raises(SystemExit, match="differs from the dataset's reference"):
        control._one_source(task("speech"))

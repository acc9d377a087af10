"""The renderer revision cannot go stale: a small golden set of clips is rendered from a real
recording and its bytes are compared with the hashes recorded for the current
`RENDER_REVISION`. Caches and resumed builds are keyed on the revision, so clips that change
while the revision stays would be mixed with the old ones without a word.

When this fails because you changed what the renderer writes: bump
`vocalgrad.stimuli.render.RENDERER_REVISION`, list the change in CHANGELOG.md, and regenerate
the golden file with ``VOCALGRAD_GOLDEN_UPDATE=1 pytest tests/test_renderer_revision.py``
(the update refuses to record new bytes under an unchanged revision).
"""

from __future__ import annotations

import hashlib
import json
import os
import pkgutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from conftest import RENDER_SR, arctic_path

from vocalgrad import dimensions
from vocalgrad.sources import tones
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import item_id, plan_conditions
from vocalgrad.stimuli.render import (
    RENDERER_REVISION,
    prepare_reference,
    prepare_source,
    render_condition,
)

GOLDEN = Path(__file__).parent / "data" / "renderer_golden.json"
SEED = 11
SOURCE_ID = "arctic_a0007"
FORMATS = ("gradual", "comparison", "recognition")
# bytes that differ while no segment's level moves by more than this are another platform's
# last-bit floating-point differences, not a renderer change (a 0.5 dB room-tone change moves
# the silent segments by ~0.5 dB)
PLATFORM_NOISE_DB = 0.02


def _shipped_dimensions() -> list[str]:
    """The dimension modules in the package (not ones a test registered at run time)."""
    path = Path(dimensions.__file__).parent
    return sorted(
        m.name
        for m in pkgutil.iter_modules([str(path)])
        if not m.name.startswith("_") and m.name != "base"
    )


def _fingerprint(samples: np.ndarray) -> list[float]:
    """RMS (dB re full scale, 0.01 dB steps) of 32 equal segments of a clip's samples."""
    segments = np.array_split(samples / 32768.0, 32)
    return [round(10 * float(np.log10(np.mean(s**2) + 1e-20)), 2) for s in segments]


def _render_golden(names: list[str], tone_dir: Path) -> dict[str, dict]:
    """sha256 and level fingerprint of the 16-bit samples of every golden clip, by condition
    key.

    Per dimension and format: the high tier's linear increase (the held pair in the two held
    formats), and in the gradual format one constant clip. A sound that is not speech takes
    its own steps (`prepare_reference`'s kind): per dimension defined for tones, the gradual
    clips of a harmonic complex, keyed ``tone/<key>``."""
    reference = prepare_reference(str(arctic_path()), RENDER_SR, -26.0)
    out: dict[str, str] = {}
    for fmt in FORMATS:
        out |= _render_set(reference, names, fmt, "")
    tone = tone_dir / "tone.wav"
    samples = tones.synthesise(tones.ToneParams("harmonic", 220.0, 1.5, 0))
    sf.write(tone, np.round(samples * 32767).astype(np.int16), tones.SAMPLE_RATE)
    tone_reference = prepare_reference(str(tone), RENDER_SR, -26.0, kind="tone")
    for_tones = [n for n in names if "tone" in dimensions.get(n).SPEC.kinds]
    out |= _render_set(tone_reference, for_tones, "gradual", "tone/")
    return dict(sorted(out.items()))


def _render_set(reference, names: list[str], fmt: str, prefix: str) -> dict[str, dict]:
    config = BuildConfig(
        categories=tuple(names),
        tiers=("high",),
        curves=("linear",),
        constants=1,
        format=fmt,
        sample_rate=RENDER_SR,
    )
    conditions, _ = plan_conditions(config)
    source = prepare_source(reference, 1)
    out = {}
    for condition in conditions:
        if condition.direction == "decrease":
            continue
        item = item_id(SEED, SOURCE_ID, condition)
        twin = None
        if condition.direction == "increase" and fmt == "gradual":
            twin = item_id(SEED, SOURCE_ID, condition.twin())
        clip = render_condition(source, condition, SEED, item, twin)
        samples = np.round(np.asarray(clip.audio, dtype=np.float64) * 32768.0)
        out[prefix + condition.key] = {
            "sha256": hashlib.sha256(samples.astype("<i2").tobytes()).hexdigest(),
            "n": len(samples),
            "levels_db": _fingerprint(samples),
        }
    return out


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


def test_every_shipped_dimension_is_in_the_golden_set(golden):
    """A new dimension joins the golden set (regenerate it), so its bytes are pinned too."""
    assert sorted(golden["dimensions"]) == _shipped_dimensions()


def test_rendered_bytes_match_the_revision(golden, tmp_path):
    """The same revision renders the same bytes; new bytes need a new revision."""
    rendered = _render_golden(golden["dimensions"], tmp_path)
    if os.environ.get("VOCALGRAD_GOLDEN_UPDATE"):
        if golden["revision"] == RENDERER_REVISION and rendered != golden["clips"]:
            pytest.fail(
                "refusing to record new bytes under the unchanged renderer revision "
                f"{RENDERER_REVISION}: bump RENDERER_REVISION first"
            )
        GOLDEN.write_text(
            json.dumps(
                {
                    "revision": RENDERER_REVISION,
                    "source": "CMU ARCTIC a0007 (tests/data); a 220 Hz harmonic complex",
                    "sample_rate": RENDER_SR,
                    "seed": SEED,
                    "dimensions": golden["dimensions"],
                    "clips": rendered,
                },
                indent=1,
            )
            + "\n"
        )
        return
    assert golden["revision"] == RENDERER_REVISION, (
        f"RENDERER_REVISION is {RENDERER_REVISION} but the golden clips were recorded at "
        f"{golden['revision']}: regenerate them (VOCALGRAD_GOLDEN_UPDATE=1)"
    )
    assert set(rendered) == set(golden["clips"]), "the golden set's conditions changed"
    changed = [k for k in golden["clips"] if rendered[k]["sha256"] != golden["clips"][k]["sha256"]]
    moved = {k: _moved_db(rendered[k], golden["clips"][k]) for k in changed}
    real = sorted(k for k, db in moved.items() if db > PLATFORM_NOISE_DB)
    assert not real, (
        f"{len(real)} golden clip(s) render other sounds at unchanged revision "
        f"{RENDERER_REVISION} (e.g. {real[:3]}, levels moved by up to "
        f"{max(moved[k] for k in real):.2f} dB): bump RENDERER_REVISION, list the change in "
        "CHANGELOG.md and regenerate (VOCALGRAD_GOLDEN_UPDATE=1)"
    )
    if changed:  # last-bit float differences of another CPU or library build
        warnings.warn(
            f"{len(changed)} golden clip(s) differ in bytes but not in level (within "
            f"{PLATFORM_NOISE_DB} dB): floating-point differences of this platform",
            stacklevel=1,
        )


def _moved_db(new: dict, old: dict) -> float:
    """How far a clip's level fingerprint moved (dB); infinite when its length changed."""
    if new["n"] != old["n"]:
        return float("inf")
    return max(abs(a - b) for a, b in zip(new["levels_db"], old["levels_db"], strict=True))

"""Shared fixtures: real recorded speech from installed packages, and small built datasets."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad.audio import load_audio, normalise, resample
from vocalgrad.stimuli.render import quantise16

RENDER_SR = 16000


def arctic_path() -> Path:
    """CMU ARCTIC utterance a0007 (speaker BDL), shipped inside the pysptk wheel.

    Located without importing pysptk (its import needs pkg_resources, gone from new setuptools)."""
    import importlib.util

    spec = importlib.util.find_spec("pysptk")
    assert spec is not None and spec.origin, "pysptk is a test dependency: pip install -e '.[test]'"
    return Path(spec.origin).parent / "example_audio_data" / "arctic_a0007.wav"


def alsa_paths() -> list[Path]:
    """Short human-voice recordings shipped by Debian's alsa-utils (installed by .ci/run)."""
    return [Path(p) for p in sorted(glob.glob("/usr/share/sounds/alsa/*.wav")) if "Noise" not in p]


@pytest.fixture(scope="session")
def real_speech_paths(tmp_path_factory) -> list[Path]:
    """ARCTIC plus the ALSA phrases joined in pairs ("Front Left ... Front Right", 0.25 s
    apart): each ALSA file is ~1.4 s, shorter than any benchmark source (>= 2 s)."""
    folder = tmp_path_factory.mktemp("real-speech")
    paths = [arctic_path()]
    alsa = alsa_paths()
    for a, b in zip(alsa[0::2], alsa[1::2], strict=False):
        (x, sr), (y, _) = load_audio(a), load_audio(b)
        joined = folder / f"{a.stem}+{b.stem}.wav"
        sf.write(joined, np.concatenate([x, np.zeros(int(0.25 * sr), np.float32), y]), sr)
        paths.append(joined)
    return paths


@pytest.fixture(scope="session")
def arctic() -> tuple[np.ndarray, int]:
    """The ARCTIC clip as a prepared reference signal at the render rate."""
    audio, sr = load_audio(arctic_path())
    return quantise16(normalise(resample(audio, sr, RENDER_SR), RENDER_SR, -26.0)), RENDER_SR


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """One builtin-speech cache for the whole session, so sources are synthesised once."""
    return tmp_path_factory.mktemp("vocalgrad-cache")


@pytest.fixture(scope="session")
def builtin_cache(cache_dir):
    """Builds and CLI subprocesses share one synthesised-speech cache."""
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    yield
    os.environ.pop("VOCALGRAD_CACHE", None)

"""Shared fixtures: real recorded speech from installed packages, and small built datasets."""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad.audio import load_audio, normalise, resample
from vocalgrad.stimuli.render import quantise16

# the Ray test modules' cluster and dataset fixtures
pytest_plugins = ("ray_helpers",)

RENDER_SR = 16000


def load_benchmark(name: str):
    """A script of `benchmarks/` as a module (they are scripts, not a package)."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def arctic_path() -> Path:
    """CMU ARCTIC utterance a0007 (speaker BDL), kept in tests/data with its licence
    (arctic_a0007.COPYING: free for any use, the notice retained)."""
    return Path(__file__).resolve().parent / "data" / "arctic_a0007.wav"


def alsa_paths() -> list[Path]:
    """Short human-voice recordings shipped by Debian's alsa-utils (installed by .ci/run)."""
    return [Path(p) for p in sorted(glob.glob("/usr/share/sounds/alsa/*.wav")) if "Noise" not in p]


NEEDS_ALSA = (
    "needs the human-voice recordings of Debian's alsa-utils: apt-get install alsa-utils "
    "(.ci/run installs it)"
)


def needs_alsa(test):
    """Skip a test that reads the alsa-utils recordings themselves where they are missing."""
    return pytest.mark.skipif(not alsa_paths(), reason=NEEDS_ALSA)(test)


def chromium_path() -> Path | None:
    """Debian's Chromium (`apt-get install chromium`; .ci/run installs it), if installed."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    return Path(found) if found else None


NEEDS_CHROMIUM = "needs Debian's Chromium: apt-get install chromium (.ci/run installs it)"
needs_chromium = pytest.mark.skipif(chromium_path() is None, reason=NEEDS_CHROMIUM)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--mute-audio",
    "--autoplay-policy=no-user-gesture-required",
]


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium per test file, driven by Playwright (which downloads no browser
    of its own); each test opens its own page or context on it. Not per session: while open,
    Playwright's sync API keeps an event loop running in the thread, and a later file's
    `asyncio.run` (inspect-ai's) on the same pytest worker would fail."""
    path = chromium_path()
    if path is None:
        pytest.skip(NEEDS_CHROMIUM)
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="pip install -e '.[test]' (playwright)"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(path), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


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
    """One builtin-speech cache for the whole run, shared by pytest-xdist's workers (sources
    and converted models are written under temporary names and moved into place), so each
    source is synthesised once, not once per worker."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    path = root / "vocalgrad-cache"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def builtin_cache(cache_dir):
    """Builds and CLI subprocesses share one synthesised-speech cache."""
    os.environ["VOCALGRAD_CACHE"] = str(cache_dir)
    yield
    os.environ.pop("VOCALGRAD_CACHE", None)


# The files that take longest when the slow tests are left out (`make test`; their
# `--durations` on the 2-core machine), longest first.
LONG_FILES = (
    "test_dimensions.py", "test_evaluate.py", "test_build.py", "test_first_week.py",
    "test_report_browser.py", "test_release.py", "test_report.py", "test_audit.py",
    "test_whisper.py", "test_finetune.py", "test_verify_and_cli.py", "test_doc_outputs.py",
)  # fmt: skip


def pytest_collection_modifyitems(config, items):
    """The longest files run first: pytest-xdist hands whole files to its workers in this
    order, so the session does not end on a long one with the other workers idle. With the
    slow tests in the session, the files that hold them are the longest."""
    if "not slow" in (config.getoption("markexpr") or ""):
        rank = {name: i for i, name in enumerate(LONG_FILES)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable otherwise
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable within each group

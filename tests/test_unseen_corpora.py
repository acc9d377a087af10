"""Speech the toolkit was not tuned on: recordings of Debian's ktuberling-data and
tuxpaint-stamps-default, and what they showed (issue #24, part 4)."""

from __future__ import annotations

import glob

import numpy as np
import pytest

from tests.conftest import arctic_path
from vocalgrad.audio import load_audio
from vocalgrad.sources.check import speech_problem

GALICIAN = sorted(glob.glob("/usr/share/ktuberling/sounds/gl/*.ogg"))
NEEDS_KTUBERLING = ("needs the Galician words of Debian's ktuberling-data: "
                    "apt-get install ktuberling-data")


def test_a_dc_offset_does_not_make_speech_read_as_a_tone():
    """A DC offset is inaudible, but it put most of every frame's power at 0 Hz: real speech
    read as 'a steady level ... like a tone at 0 Hz'. The check now measures what a listener
    hears; a DC offset alone is still refused, as silence."""
    speech, sr = load_audio(arctic_path())
    speech = 0.5 * speech / np.max(np.abs(speech))
    for offset in (0.1, -0.2):
        assert speech_problem((speech + offset).astype(np.float32), sr) is None
    t = np.arange(3 * sr) / sr
    drift = (0.3 + 0.05 * np.sin(2 * np.pi * 0.5 * t)).astype(np.float32)
    assert "DC offset" in speech_problem(drift, sr)
    tone = (0.2 + 0.3 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    assert "tone at 1000 Hz" in speech_problem(tone, sr)


@pytest.mark.skipif(len(GALICIAN) < 10, reason=NEEDS_KTUBERLING)
def test_ktuberlings_galician_words_pass_the_speech_check_despite_their_dc_offset():
    joined = []
    for path in GALICIAN[:6]:
        audio, sr = load_audio(path)
        assert abs(float(np.mean(audio))) > 0.005  # the recordings really are off zero
        joined += [audio, np.zeros(int(0.3 * sr), np.float32)]
    x = np.concatenate(joined)
    assert speech_problem(0.5 * x / np.max(np.abs(x)), sr) is None

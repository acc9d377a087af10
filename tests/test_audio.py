import numpy as np
import pytest
import soundfile as sf
from conftest import alsa_paths, arctic_path, needs_alsa

from vocalgrad.audio import (
    PEAK_CEILING,
    limit_peak,
    load_audio,
    loudness_lufs,
    normalise,
    resample,
    speech_span,
    write_flac_atomic,
)
from vocalgrad.errors import AudioError


def test_load_real_speech_downmixes_and_keeps_rate(tmp_path):
    audio, sr = load_audio(arctic_path())
    assert sr == 16000 and audio.dtype == np.float32 and audio.ndim == 1
    stereo = tmp_path / "stereo.wav"
    sf.write(stereo, np.stack([audio, audio * 0.5], axis=1), sr)
    mono, _ = load_audio(stereo)
    np.testing.assert_allclose(mono, audio * 0.75, atol=1e-4)


@pytest.mark.parametrize(
    "content, match",
    [(b"", "cannot decode"), (b"RIFF\x00\x00garbage-not-audio", "cannot decode")],
)
def test_corrupt_files_get_a_clear_error(tmp_path, content, match):
    bad = tmp_path / "bad.wav"
    bad.write_bytes(content)
    with pytest.raises(AudioError, match=match) as err:
        load_audio(bad)
    assert "bad.wav" in str(err.value)


def test_missing_empty_and_low_rate_files(tmp_path):
    with pytest.raises(AudioError, match="no such audio file"):
        load_audio(tmp_path / "nope.wav")
    empty = tmp_path / "empty.wav"
    sf.write(empty, np.zeros(0, dtype=np.float32), 16000)
    with pytest.raises(AudioError, match="no samples"):
        load_audio(empty)
    low = tmp_path / "low.wav"
    sf.write(low, np.zeros(4000, dtype=np.float32), 4000)
    with pytest.raises(AudioError, match="below 8000"):
        load_audio(low)


def test_resample_preserves_duration_and_tone():
    sr = 48000
    t = np.arange(sr) / sr
    tone = np.sin(2 * np.pi * 440 * t).astype(np.float32)
    out = resample(tone, sr, 16000)
    assert len(out) == 16000
    spectrum = np.abs(np.fft.rfft(out))
    assert abs(np.argmax(spectrum) - 440) <= 1


def test_normalise_hits_target_and_never_clips(arctic):
    audio, sr = arctic
    loud = normalise(audio * 0.01, sr, -20.0)
    assert loudness_lufs(loud, sr) == pytest.approx(-20.0, abs=0.5)
    hot = normalise(audio, sr, 0.0)  # impossible without clipping: the limiter must win
    assert np.max(np.abs(hot)) <= PEAK_CEILING + 1e-6
    assert np.max(np.abs(limit_peak(audio * 100))) <= PEAK_CEILING + 1e-6


def test_speech_span_on_real_speech_with_and_without_leading_silence(arctic):
    audio, sr = arctic
    span = speech_span(audio, sr)
    assert span.plausible
    assert 0.2 < span.onset_s < 0.6 and 3.0 < span.offset_s < 3.8
    trimmed = audio[int(span.onset_s * sr) :]  # speech starts at sample 0
    span2 = speech_span(trimmed, sr)
    assert span2.plausible and span2.onset_s < 0.05, "no leading silence must not break detection"
    assert span2.offset_s == pytest.approx(span.offset_s - span.onset_s, abs=0.05)


def test_speech_span_flags_silence_noise_and_blips():
    sr = 16000
    assert not speech_span(np.zeros(sr * 2, dtype=np.float32), sr).plausible
    noise = np.random.default_rng(0).standard_normal(sr * 3).astype(np.float32) * 0.1
    assert not speech_span(noise, sr).plausible
    click = np.zeros(sr * 3, dtype=np.float32)
    click[sr : sr + 800] = 0.5 * np.sin(np.arange(800) / 3)  # 50 ms: not even one speech run
    assert not speech_span(click, sr).plausible
    blip = np.zeros(sr * 3, dtype=np.float32)
    blip[sr : sr + 4800] = 0.5 * np.sin(np.arange(4800) / 3)  # 300 ms: a run, but no utterance
    result = speech_span(blip, sr)
    assert not result.plausible and "shorter" in result.reason


@needs_alsa
def test_speech_span_on_other_real_recordings():
    for path in alsa_paths():
        audio, sr = load_audio(path)
        span = speech_span(audio, sr)
        assert span.plausible, path
        assert span.duration_s > 0.6


def test_flac_write_is_atomic_and_exact(tmp_path):
    audio = (np.round(np.linspace(-0.5, 0.5, 1000) * 32768) / 32768).astype(np.float32)
    path = tmp_path / "a" / "clip.flac"
    write_flac_atomic(path, audio, 16000)
    back, sr = sf.read(path, dtype="float32")
    assert sr == 16000
    np.testing.assert_array_equal(back, audio)
    assert [p.name for p in path.parent.iterdir()] == ["clip.flac"]


def test_loudness_equals_pyloudnorm(arctic):
    """Our vectorised BS.1770 gating must give pyloudnorm's numbers exactly."""
    import pyloudnorm

    audio, sr = arctic
    rng = np.random.default_rng(1)
    signals = [
        (audio, sr),
        (audio * 0.01, sr),
        (audio[:9000], sr),
        (rng.standard_normal(96000) * 0.05, 48000),
        (np.concatenate([audio, np.zeros(32000, np.float32)]), sr),
    ]
    for signal, rate in signals:
        padded = np.pad(signal.astype(np.float64), (0, max(0, int(0.4 * rate) + 1 - len(signal))))
        expected = pyloudnorm.Meter(rate).integrated_loudness(padded)
        assert loudness_lufs(signal.astype(np.float32), rate) == pytest.approx(expected, abs=1e-6)
    assert loudness_lufs(np.zeros(20000, np.float32), sr) == float("-inf")

"""Speech the toolkit was not tuned on: recordings of Debian's ktuberling-data and
tuxpaint-stamps-default, and what they showed (issue #24, part 4)."""

from __future__ import annotations

import glob
import json

import numpy as np
import pytest
import soundfile as sf
from conftest import arctic_path, load_benchmark

from vocalgrad.audio import load_audio
from vocalgrad.sources.check import speech_problem

GALICIAN = sorted(glob.glob("/usr/share/ktuberling/sounds/gl/*.ogg"))
NEEDS_KTUBERLING = (
    "needs the Galician words of Debian's ktuberling-data: apt-get install ktuberling-data"
)


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


def _telephone(x: np.ndarray, sr: int) -> np.ndarray:
    from scipy.signal import butter, sosfiltfilt

    return sosfiltfilt(butter(8, (300, 3400), btype="bandpass", fs=sr, output="sos"), x).astype(
        np.float32
    )


def _heard(audio: np.ndarray, sr: int):
    from vocalgrad.audio import normalise
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.render import prepare_source, quantise16

    clean = Analysis(quantise16(normalise(audio, sr, -26.0)), sr)
    return prepare_source(clean, 1).heard


def test_a_clarity_low_pass_above_the_sources_own_band_is_refused_for_that_source():
    """16 kHz speech that is telephone band (300-3400 Hz) loses nothing to a 5000 Hz low-pass:
    the low tier is refused for the source, as the rate rule refuses it at 8 kHz; the mid tier
    (2500 Hz) cuts into the band and stays. Wideband 16 kHz ARCTIC keeps every tier."""
    from vocalgrad.audio import resample
    from vocalgrad.dimensions import voice_clarity

    audio, sr = load_audio(arctic_path())
    wide = resample(audio, sr, 16000)
    tiers = voice_clarity.SPEC.tiers
    heard = _heard(wide, 16000)
    assert all(voice_clarity.source_inaudible_reason(m, heard) is None for m in tiers.values())
    narrow = _heard(_telephone(wide, 16000), 16000)
    reason = voice_clarity.source_inaudible_reason(tiers["low"], narrow)
    assert reason and "5000 Hz low-pass takes 0.0 dB" in reason
    top = float(reason.rsplit("above ", 1)[1].split()[0])
    assert 3000 < top < 4500  # the band it reports is the telephone band's top
    assert voice_clarity.source_inaudible_reason(tiers["mid"], narrow) is None
    assert voice_clarity.source_inaudible_reason(tiers["high"], narrow) is None
    assert voice_clarity.source_inaudible_reason(8000.0, narrow) is None  # the rate rule's case


def test_a_build_on_telephone_band_speech_at_16k_refuses_and_counts_the_clarity_low_tier(
    tmp_path, capsys
):
    from vocalgrad.audio import resample
    from vocalgrad.cli import main
    from vocalgrad.dataset import load_rows

    audio, sr = load_audio(arctic_path())
    root = tmp_path / "tel16"
    for speaker, gain in (("a", 0.5), ("b", 0.3)):
        (root / speaker).mkdir(parents=True)
        x = _telephone(resample(audio, sr, 16000), 16000)
        sf.write(root / speaker / f"{speaker}.wav", gain * x / np.max(np.abs(x)), 16000)
    config = tmp_path / "one.toml"
    config.write_text("[build]\nper_speaker_test = 1\n")
    out = tmp_path / "ds"
    argv = ["build", "--out", str(out), "--source", f"folder:{root}", "--config", str(config)]
    argv += ["--n-test", "2", "--n-train", "0", "--dimensions", "voice_clarity"]
    argv += ["--tiers", "low,mid", "--curves", "linear", "--constants", "0", "--no-audit"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "refused voice_clarity low on folder/a/a.wav (2 clips)" in printed
    report = json.loads((out / "build_report.json").read_text())
    refused = report["refused_for_source"]
    assert [(r["source_id"], r["tier"], r["clips"]) for r in refused] == [
        ("folder/a/a.wav", "low", 2),
        ("folder/b/b.wav", "low", 2),
    ]
    assert report["per_category"]["voice_clarity"]["refused_inaudible"] >= 4
    rows = load_rows(out)
    assert rows and {r["tier"] for r in rows} == {"mid"}  # the mid tier is audible and kept
    assert "Conditions refused on one source" in (out / "README.md").read_text()
    # resuming the finished build renders nothing again and keeps the count
    assert main(argv) == 0
    again = json.loads((out / "build_report.json").read_text())
    assert again["refused_for_source"] == refused


def test_the_unseen_corpora_benchmark_skips_a_missing_package_and_downloads_nothing(
    tmp_path, monkeypatch, capsys
):
    bench = load_benchmark("unseen_corpora")
    monkeypatch.setattr(
        bench,
        "CORPORA",
        {
            "tuxpaint": bench.Corpus(
                "vocalgrad-no-such-package", tmp_path / "none", bench.tuxpaint_utterances
            )
        },
    )
    monkeypatch.setattr(
        "sys.argv", ["unseen_corpora.py", str(tmp_path / "out"), "--corpus", "tuxpaint"]
    )
    bench.main()
    printed = capsys.readouterr().out
    assert "tuxpaint: skipped" in printed and "apt-get install vocalgrad-no-such-package" in printed
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(len(GALICIAN) < 10, reason=NEEDS_KTUBERLING)
def test_the_benchmark_prepares_telephone_band_speech_from_the_installed_package(tmp_path):
    bench = load_benchmark("unseen_corpora")
    info = bench.prepare("ktuberling", tmp_path, ["tel", "48k"], per_speaker=2)
    assert len(info["speakers"]) >= 8 and set(info["speakers"].values()) == {2}
    tel = sorted((tmp_path / "ktuberling" / "tel").rglob("*.wav"))
    assert len(tel) == 2 * len(info["speakers"])
    x, sr = load_audio(tel[0])
    assert sr == 8000 and len(x) > 1.5 * sr  # three words joined
    spectrum = np.abs(np.fft.rfft(x)) ** 2
    freqs = np.fft.rfftfreq(len(x), 1 / sr)
    inside = spectrum[(freqs > 500) & (freqs < 3000)].mean()
    assert (
        spectrum[freqs > 3800].mean() < inside * 1e-3
        and spectrum[freqs < 150].mean() < inside * 1e-3
    )
    assert load_audio(sorted((tmp_path / "ktuberling" / "48k").rglob("*.wav"))[0])[1] == 48000


def test_a_constant_clip_holds_only_values_of_the_tiers_kept_on_its_source():
    """With clarity's low tier refused on telephone-band speech, a constant clip drawing from
    the low tier's range would hold 'no change at all' where no changing clip of the source
    does (ktuberling's telephone band at 16 kHz: constants told apart with AUC 0.65)."""
    from vocalgrad.audio import resample
    from vocalgrad.stimuli.build import constant_range, refused_ranges
    from vocalgrad.stimuli.config import BuildConfig
    from vocalgrad.stimuli.plan import item_id, plan_conditions

    config = BuildConfig(sample_rate=16000, categories=("voice_clarity",), tiers=("low", "mid"))
    planned = plan_conditions(config)[0]
    constants = [c for c in planned if c.direction == "constant"]
    constant = constants[0]
    assert constant.ranges == ((5000.0, 8400.0), (2500.0, 8400.0))
    audio, sr = load_audio(arctic_path())
    wide = resample(audio, sr, 16000)
    wide_refused = refused_ranges(planned, _heard(wide, 16000))
    held = [constant_range(c, wide_refused, config, "s").ranges for c in constants]
    assert sorted(set(held)) == [((2500.0, 8400.0),), ((5000.0, 8400.0),)]  # both tiers held
    telephone = _heard(_telephone(wide, 16000), 16000)
    narrow = constant_range(constant, refused_ranges(planned, telephone), config, "s")
    assert narrow.ranges == ((2500.0, 8400.0),)
    assert item_id(0, "s", narrow) == item_id(0, "s", constant)  # the same clip, resumable


def test_a_source_with_every_change_refused_gives_no_constant_either():
    """Clarity's low tier alone on telephone-band speech: every change is refused, so a
    constant would be the only clarity clip of the source (and hold a value no changing clip
    reaches); on wide-band speech nothing is refused and the constant is rendered."""
    from vocalgrad.audio import resample
    from vocalgrad.stimuli.build import constant_range, constant_refusal, refused_ranges
    from vocalgrad.stimuli.config import BuildConfig
    from vocalgrad.stimuli.plan import plan_conditions

    config = BuildConfig(sample_rate=16000, categories=("voice_clarity",), tiers=("low",))
    planned = plan_conditions(config)[0]
    constant = next(c for c in planned if c.direction == "constant")
    audio, sr = load_audio(arctic_path())
    wide = resample(audio, sr, 16000)
    for heard, refused_too in (
        (_heard(wide, 16000), False),
        (_heard(_telephone(wide, 16000), 16000), True),
    ):
        refused = refused_ranges(planned, heard)
        reason = constant_refusal(constant_range(constant, refused, config, "s"), refused)
        assert (reason is not None) == refused_too
        if refused_too:
            assert reason.startswith("every change of this dimension is refused")
            assert refused[(constant.category, *constant.ranges[0])] in reason


def test_joining_trims_each_recordings_own_silence_only_where_asked(tmp_path):
    """klettres-data holds one syllable in up to 2 s of silence a file: joined untrimmed, a
    phrase would be mostly pauses. Trimming cuts each file's edges to its sound and keeps
    the gap between the parts as asked."""
    bench = load_benchmark("unseen_corpora")
    speech, sr = load_audio(arctic_path())
    padded = np.concatenate([np.zeros(sr, np.float32), speech, np.zeros(2 * sr, np.float32)])
    path = tmp_path / "padded.wav"
    sf.write(path, padded, sr, subtype="FLOAT")
    whole, _ = bench.joined([path, path], gap_s=0.3)
    trimmed, rate = bench.joined([path, path], gap_s=0.3, trim_top_db=40.0)
    assert rate == sr and len(whole) == 2 * len(padded) + int(0.3 * sr)
    # each part loses its 3 s of padding but for what librosa's 2048-sample frames leave at
    # each edge, and none of its speech but quiet edges
    part = (len(trimmed) - int(0.3 * sr)) / 2
    assert len(speech) - 0.3 * sr < part <= len(speech) + 2 * 2048
    gap = trimmed[int(part) : int(part) + int(0.3 * sr)]
    assert np.all(gap == 0)

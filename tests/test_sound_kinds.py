"""Sources of other kinds of sound (tones, noise bands, the published beeps, music), the kinds each
dimension is defined for, the per-kind source checks, the question wording per kind, and a
planted non-speech leak that the audit must catch."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad import dimensions
from vocalgrad.audio import normalise, write_flac_atomic
from vocalgrad.dataset import write_jsonl
from vocalgrad.errors import ConfigError, SourceError
from vocalgrad.questions.prompts import build_prompt, question_text
from vocalgrad.signal.kinds import KINDS
from vocalgrad.sources import (
    SCHEMES,
    Source,
    ensure_rendered,
    resolve_sources,
    select_sources,
    spec_kind,
    tones,
    with_kind,
)
from vocalgrad.sources.check import SourceCheck, noise_problem, speech_problem, tone_problem
from vocalgrad.sources.everyday import EVERYDAY_DIR, PACKAGE, everyday_sources, group_of
from vocalgrad.sources.tones import BANDS_HZ, BEEP_FREQUENCIES_HZ
from vocalgrad.stimuli.audit import audit_dataset
from vocalgrad.stimuli.config import BuildConfig, load_config
from vocalgrad.stimuli.plan import plan_conditions

SR = 16000


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------
# Sources


def test_tone_sources_render_the_same_bytes_into_any_cache(tmp_path):
    a = resolve_sources("tones", cache_dir=tmp_path / "a")
    b = resolve_sources("tones", cache_dir=tmp_path / "b")
    assert [s.source_id for s in a] == [s.source_id for s in b]
    picked = [0, 7, 25, 47]
    assert not any(Path(a[i].path).exists() for i in picked)  # resolving renders nothing
    ensure_rendered([a[i] for i in picked] + [b[i] for i in picked])
    for i in picked:
        assert _sha(a[i].path) == _sha(b[i].path)
        audio, sr = sf.read(a[i].path)
        assert sr == 48000 and audio.ndim == 1
        assert abs(20 * np.log10(np.max(np.abs(audio))) - -6.0) < 0.01
        assert np.all(audio[:100] == 0) and np.all(audio[-100:] == 0)  # silences on both sides


def test_a_tone_is_the_same_played_backwards_and_a_complex_changes_shape():
    """Every tone mirrors about its middle (a clip's twin is its mirror), and a harmonic
    complex's waveform changes shape over the sound while its fundamental stays put: in
    fixed phase a sweep's peak, a maximum over the clip, exceeded a held constant's."""
    for family in ("pure", "harmonic"):
        audio = tones.synthesise(tones.tone_params(f"tones/{family}/400.0Hz"))
        assert np.max(np.abs(audio - audio[::-1])) < 1e-9
    params = tones.tone_params("tones/harmonic/400.0Hz")
    audio = tones.synthesise(params)
    sr, period = tones.SAMPLE_RATE, int(round(tones.SAMPLE_RATE / 400.0)) * 4  # 10 ms
    sound = audio[int(tones.SILENCE_S * sr) + 2 * period : -int(tones.SILENCE_S * sr) - 2 * period]
    windows = sound[: len(sound) // period * period].reshape(-1, period)
    crest_db = 20 * np.log10(np.max(np.abs(windows), axis=1) / np.sqrt(np.mean(windows**2, axis=1)))
    assert np.ptp(crest_db) > 1.0  # the shape moves (fixed sine phase: under 0.01 dB)
    spectrum = np.abs(np.fft.rfft(sound * np.hanning(len(sound))))
    freqs = np.fft.rfftfreq(len(sound), 1 / sr)
    assert abs(freqs[np.argmax(spectrum * (freqs < 600))] - 400.0) < sr / len(sound)


def test_tone_groups_are_bands_so_a_split_is_disjoint_in_frequency(tmp_path):
    sources = resolve_sources("tones", cache_dir=tmp_path)
    assert len(sources) == 2 * 3 * len(BANDS_HZ)
    assert {s.kind for s in sources} == {"tone"}
    by_group: dict[str, list[float]] = {}
    for s in sources:
        by_group.setdefault(s.group, []).append(float(s.text_id.split("-")[1].removesuffix("Hz")))
    assert len(by_group) == len(BANDS_HZ)
    bands = sorted((min(f), max(f)) for f in by_group.values())
    assert all(hi < next_lo for (_, hi), (next_lo, _) in zip(bands, bands[1:], strict=False))
    picked = select_sources(
        sources, n_test=4, n_train=4, per_speaker_test=2, min_duration_s=2.0, seed=3
    )
    test = {s.group for s, split in picked if split == "test"}
    train = {s.group for s, split in picked if split == "train"}
    assert test and train and not test & train


def test_too_few_groups_are_named_groups_not_speakers(tmp_path):
    tones = resolve_sources("tones", cache_dir=tmp_path)
    with pytest.raises(SourceError, match=r"8 source group\(s\) available .* per source group"):
        select_sources(tones, n_test=24, n_train=24)


def test_noise_sources_are_their_own_kind(tmp_path):
    sources = resolve_sources("noise", cache_dir=tmp_path)
    assert {s.kind for s in sources} == {"noise"} and len(sources) == 3 * len(BANDS_HZ)
    ensure_rendered(sources[:1])
    audio, sr = sf.read(sources[0].path)
    assert noise_problem(audio, sr) is None and "not a tone" in tone_problem(audio, sr)


def test_beeps_are_the_published_ablations_sources(tmp_path):
    beeps = ensure_rendered(resolve_sources("beeps", cache_dir=tmp_path))
    assert [s.source_id for s in beeps] == [f"beeps/beep_{i:02d}" for i in range(1, 11)]
    assert BEEP_FREQUENCIES_HZ == tuple(range(700, 2051, 150))
    for source, hz in zip(beeps, BEEP_FREQUENCIES_HZ, strict=True):
        samples, sr = sf.read(source.path, dtype="int16")
        assert sr == 48000 and len(samples) == int(3.6 * 48000)
        lead, tone = 36000, 100800  # 0.75 s of digital silence, then 2.10 s of tone
        assert not samples[:lead].any() and not samples[lead + tone :].any()
        expected = np.round(0.65 * np.sin(2 * np.pi * hz * np.arange(tone) / sr) * 32767)
        assert np.array_equal(samples[lead : lead + tone], expected.astype(np.int16))
        assert source.kind == "tone" and source.group == f"beep-{hz:04d}Hz"


music_needs_fluidsynth = pytest.mark.skipif(
    importlib.util.find_spec("fluidsynth") is None
    or importlib.util.find_spec("pretty_midi") is None,
    reason="music sources need the sounds extra (pretty-midi, pyfluidsynth) and libfluidsynth3",
)


def _fluidsynth_loads() -> bool:
    try:
        import fluidsynth  # noqa: F401
    except ImportError:
        return False
    return True


@music_needs_fluidsynth
def test_music_sources_are_real_instruments_grouped_by_family(tmp_path):
    if not _fluidsynth_loads():
        pytest.skip("the FluidSynth library is not installed (Debian: libfluidsynth3)")
    a = resolve_sources("music", cache_dir=tmp_path / "a")
    b = resolve_sources("music", cache_dir=tmp_path / "b")
    assert {s.kind for s in a} == {"music"} and len({s.group for s in a}) == 8
    ensure_rendered([a[0], a[3], b[0], b[3]])
    assert _sha(a[0].path) == _sha(b[0].path) and _sha(a[3].path) == _sha(b[3].path)
    check = SourceCheck()
    for source in (a[0], a[3]):
        audio, sr = sf.read(source.path)
        assert sr == 44100 and 2.0 < len(audio) / sr < 4.5
        assert check(source) is None
    # a sustained note is an instrument's sound, not a steady synthetic tone
    audio, sr = sf.read(a[0].path)
    assert "not a steady tone" in tone_problem(audio, sr)


everyday_installed = pytest.mark.skipif(
    not EVERYDAY_DIR.is_dir(), reason=f"everyday sources need Debian's {PACKAGE}"
)


@everyday_installed
def test_everyday_sources_are_real_recordings_grouped_by_what_makes_the_sound():
    sources = resolve_sources("everyday")
    assert len(sources) >= 100 and {s.kind for s in sources} == {"everyday"}
    groups = {s.group for s in sources}
    assert {"water", "rail", "residential", "industry"} <= groups
    by_id = {s.source_id: s for s in sources}
    # a place's variants share a group, so a split never puts one of them on each side
    assert by_id["everyday/ResidentialHigh2"].group == by_id["everyday/ResidentialLow1"].group
    check = SourceCheck()
    water = by_id["everyday/Water1"]
    audio, sr = sf.read(water.path)
    assert len(audio) / sr > 2.0 and check(water) is None
    assert tone_problem(audio, sr) is not None  # running water is no steady tone


def test_everyday_without_its_package_names_the_install_and_the_folder_route(tmp_path):
    with pytest.raises(
        SourceError, match=f"apt-get install {PACKAGE}.*folder:PATH\\?kind=everyday"
    ):
        everyday_sources(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no audio files"):
        everyday_sources(tmp_path / "empty")
    assert group_of("PowerCoalFull") == "power" and group_of("Water4") == "water"


def test_specs_name_their_kind_and_refuse_what_does_not_parse():
    assert spec_kind("builtin") == "speech" and spec_kind("tones:pure") == "tone"
    assert spec_kind("noise") == "noise" and spec_kind("beeps") == "tone"
    assert spec_kind("music") == "music" and spec_kind("folder:/x") == "speech"
    assert (
        spec_kind("folder:/x?kind=everyday") == "everyday" and spec_kind("everyday") == "everyday"
    )
    assert with_kind("folder:/x?kind=tone", "music") == "folder:/x?kind=music"
    assert {s.kind for s in SCHEMES.values()} - {None} <= set(KINDS)
    for bad, words in (
        ("tones:chirp", "tones:pure"),
        ("beeps:3", "write 'beeps' alone"),
        ("folder:/x?kind=birdsong", "unknown kind"),
        ("tones?kind=music", "tones sources are tone"),
        ("nope", "music"),
    ):
        with pytest.raises(SourceError, match=words):
            resolve_sources(bad)


def test_folder_sources_take_the_kind_their_spec_names(tmp_path):
    t = np.arange(SR) / SR
    (tmp_path / "g1").mkdir()
    sf.write(tmp_path / "g1" / "a.wav", 0.3 * np.sin(2 * np.pi * 440 * t), SR)
    sources = resolve_sources(f"folder:{tmp_path}?kind=tone")
    assert [s.kind for s in sources] == ["tone"] and sources[0].group == "g1"
    assert Source is Source


# ---------------------------------------------------------------------------------------
# Per-kind checks


def _speechlike(seconds: float = 2.0) -> np.ndarray:
    """Harmonics with 4 Hz syllables and pauses: speech to the checks, neither tone nor noise."""
    t = np.arange(int(seconds * SR)) / SR
    f0 = 140 * (1 + 0.05 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / SR
    x = sum(k**-1.2 * np.sin(k * phase) for k in range(1, 25))
    return (x * (0.5 * (1 - np.cos(2 * np.pi * 4 * t))) ** 2).astype(np.float32)


def test_each_kind_refuses_silence_short_files_and_the_wrong_kind():
    t = np.arange(2 * SR) / SR
    tone = (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32)
    noise = np.random.default_rng(0).standard_normal(2 * SR).astype(np.float32) * 0.1
    speech = _speechlike()
    assert tone_problem(tone, SR) is None and noise_problem(noise, SR) is None
    for check in (tone_problem, noise_problem, speech_problem):
        assert "silent" in check(np.zeros(2 * SR, np.float32), SR)
        assert "0.30 s long" in check(tone[: int(0.3 * SR)], SR)
        assert "NaN" in check(np.full(2 * SR, np.nan, np.float32), SR)
    assert "not a steady tone" in tone_problem(speech, SR)  # speech is not a tone
    assert "not a tone" in tone_problem(noise, SR)
    assert "not noise" in noise_problem(tone, SR)
    assert "like a tone" in speech_problem(tone, SR)  # and a tone is not speech


def test_the_source_check_reads_each_source_by_its_kind(tmp_path):
    t = np.arange(2 * SR) / SR
    path = tmp_path / "beep.wav"
    sf.write(path, np.concatenate([np.zeros(SR // 2), 0.5 * np.sin(2 * np.pi * 600 * t)]), SR)
    as_tone = Source("t", str(path), "g", "t", None, "folder", "", "", kind="tone")
    as_speech = Source("s", str(path), "g", "s", None, "folder", "", "")
    check = SourceCheck()
    assert check(as_tone) is None
    assert "not speech" in check(as_speech)  # the speech check does refuse a tone


# ---------------------------------------------------------------------------------------
# Dimensions and kinds


def test_every_dimension_declares_known_kinds_and_the_speech_only_ones_say_so():
    for dim in dimensions.bound():
        name = dim.name
        assert "speech" in dim.SPEC.kinds and set(dim.SPEC.kinds) <= set(KINDS), name
    for name in ("voice_clarity", "breathiness", "vocal_tract_length"):
        assert dimensions.get(name).SPEC.kinds == ("speech",)
    for name in ("voice_pitch", "volume", "background_noise", "echo", "audio_distortion"):
        assert {"tone", "music"} <= set(dimensions.get(name).SPEC.kinds)
    assert "music" in dimensions.get("speaking_speed").SPEC.kinds
    assert "tone" not in dimensions.get("speaking_speed").SPEC.kinds


def test_a_build_of_an_undefined_pair_is_refused_with_one_line():
    with pytest.raises(ConfigError) as err:
        BuildConfig(source="tones", categories=("volume", "voice_clarity"))
    message = str(err.value)
    assert "\n" not in message and "voice_clarity is not defined for tone" in message
    assert "volume" in message.split("defined for tone:")[1]  # what may be asked instead
    with pytest.raises(ConfigError, match="speaking_speed, voice_pitch, voice_clarity are not"):
        load_config(None, source="noise")  # the default nine hold speech-only dimensions
    with pytest.raises(ConfigError, match="breathiness is not defined for music"):
        BuildConfig(source="folder:/x?kind=music", categories=("breathiness",))
    assert BuildConfig(source="tones", categories=("volume", "voice_pitch")).source == "tones"


def test_the_published_beep_layout_counts_960_clips():
    config = load_config(None, protocol="vocalgrad", source="beeps")
    assert (config.n_test, config.n_train, config.constants, config.sample_rate) == (
        10,
        0,
        0,
        48000,
    )
    assert set(config.categories) == {
        "voice_pitch",
        "volume",
        "background_noise",
        "voice_vibration",
    }
    conditions, refused = plan_conditions(config)
    assert not refused and len(conditions) * config.n_test == 960
    speech = load_config(None, protocol="vocalgrad")  # speech keeps the published grid
    assert (speech.n_test, speech.n_train, len(speech.categories)) == (100, 500, 9)
    chosen = select_sources(
        resolve_sources("beeps"),
        n_test=config.n_test,
        n_train=config.n_train,
        per_speaker_test=config.per_speaker_test,
        min_duration_s=0.0,
        durations={f"beeps/beep_{i:02d}": 3.6 for i in range(1, 11)},
    )
    assert len(chosen) == 10 and {split for _, split in chosen} == {"test"}


def test_questions_name_the_kind_and_keep_the_speech_wording():
    assert question_text("voice_pitch") == (
        "Does the voice pitch increase or decrease over time?\n\n"
        'Answer with only one word: "increase" or "decrease".'
    )
    assert question_text("voice_pitch", kind="speech") == question_text("voice_pitch")
    assert question_text("voice_pitch", kind="tone").startswith(
        "Does the pitch of the tone increase or decrease over time?"
    )
    assert question_text("speaking_speed", kind="music").startswith(
        "Does the tempo of the music increase"
    )
    assert question_text("echo", kind="tone") == question_text("echo")  # no voice in it
    assert build_prompt("volume", fmt="recognition", kind="tone").text.startswith(
        "Is the tone loud or quiet?"
    )
    with pytest.raises(ConfigError, match="words a voice"):
        question_text("volume", "paraphrase1", kind="tone")


# ---------------------------------------------------------------------------------------
# A planted non-speech leak


def _tone_dataset(root: Path, category: str, click: bool) -> Path:
    """Twin tone clips per source (a level ramp and the same clip played backwards: every
    order-free cue is equal between twins); with `click`, each increase clip carries a click at
    the change point, as a tone restarted there in phase would."""
    for s_index, split in enumerate(("train", "test")):
        rows = []
        for i in range(12):
            rng = np.random.default_rng([11, s_index, i])
            t = np.arange(2 * SR) / SR
            tone = np.sin(2 * np.pi * rng.uniform(200, 2000) * t) * np.hanning(len(t)) ** 0.1
            ramp = 10 ** (6 * np.linspace(-1, 1, len(t)) / 20)
            rising = normalise((tone * ramp).astype(np.float32), SR, -26.0)
            rising *= np.float32(10 ** (rng.uniform(-3, 3) / 20))  # one level rove a pair
            for direction in ("increase", "decrease"):
                x = rising.copy() if direction == "increase" else rising[::-1].copy()
                if click and direction == "increase":
                    x[len(x) // 2] = 0.9
                audio = np.concatenate(
                    [np.zeros(SR // 2, np.float32), x, np.zeros(SR // 2, np.float32)]
                )
                item = f"{category}-{split}-{i}-{direction}"
                sha = write_flac_atomic(root / split / f"{item}.flac", audio, SR)
                rows.append({
                    "file_name": f"{item}.flac", "item_id": item, "category": category,
                    "direction": direction, "tier": "high", "curve": "linear", "magnitude": 12.0,
                    "unit": "dB", "source_id": f"{split}-{i}", "speaker_id": f"band-{split}-{i}",
                    "split": split, "sample_rate": SR, "duration_s": len(audio) / SR,
                    "speech_onset_s": 0.5, "speech_offset_s": 2.5, "verified": True,
                    "audio_sha256": sha, "source_kind": "tone",
                })  # fmt: skip
        write_jsonl(root / split / "metadata.jsonl", rows)
    return root


def test_a_click_at_a_tones_change_point_is_caught_by_the_audit(tmp_path):
    clean = audit_dataset(_tone_dataset(tmp_path / "clean", "volume", click=False))
    assert clean["per_category"]["volume"]["passes"], clean["per_category"]["volume"]["reasons"]
    leaky = audit_dataset(_tone_dataset(tmp_path / "click", "volume", click=True))
    c = leaky["per_category"]["volume"]
    assert c["passes"] is False and any("order-free" in r for r in c["reasons"]), c["reasons"]
    auc = c["order_free"]["per_cue_auc"]
    assert auc["of_peak_dbfs"]["auc"] > 0.9 or auc["of_crest_db"]["auc"] > 0.9, auc


# ---------------------------------------------------------------------------------------
# The command line


def test_list_sources_names_every_scheme_and_kind(capsys):
    from vocalgrad.cli import main
    from vocalgrad.cli.data import KIND_NAMES

    assert KIND_NAMES == tuple(KINDS)  # the parser's copy, kept without importing numpy
    assert main(["list", "sources"]) == 0
    out = capsys.readouterr().out
    for scheme in SCHEMES.values():
        assert scheme.usage in out
    for kind in KINDS:
        assert f"\n{kind}\t" in out


def test_kind_option_names_a_folders_kind(tmp_path, capsys):
    from vocalgrad.cli import main

    t = np.arange(SR) / SR
    (tmp_path / "g1").mkdir()
    sf.write(tmp_path / "g1" / "a.wav", 0.3 * np.sin(2 * np.pi * 440 * t), SR)
    assert main(["sources", f"folder:{tmp_path}", "--kind", "tone"]) == 0
    assert "1 tone sources, 1 groups" in capsys.readouterr().out
    assert main(["build", "--out", str(tmp_path / "out"), "--kind", "tone"]) != 0
    assert "--kind names the kind" in capsys.readouterr().err
    folder = f"folder:{tmp_path}"
    code = main(
        ["build", "--out", str(tmp_path / "o2"), "--source", folder, "--kind", "music",
         "--dimensions", "voice_clarity"]
    )  # fmt: skip
    assert code != 0 and "voice_clarity is not defined for music" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()  # refused before any work


def test_a_tone_is_tracked_up_to_its_own_pitch_range_and_speech_as_before():
    from vocalgrad.signal.analysis import F0_CEILING_HZ, Analysis, source_pitch_ceiling
    from vocalgrad.stimuli.verify import row_pitch_ceiling

    t = np.arange(2 * SR) / SR
    assert source_pitch_ceiling(_speechlike(), SR, "speech") == F0_CEILING_HZ
    low = np.sin(2 * np.pi * 250 * t)  # within speech's range: the speech ceiling
    assert source_pitch_ceiling(low, SR, "tone") == F0_CEILING_HZ
    high = np.sin(2 * np.pi * 1500 * t)
    ceiling = source_pitch_ceiling(high, SR, "tone")
    assert ceiling == pytest.approx(1500 * 2 ** (10 / 12), rel=0.01)
    assert source_pitch_ceiling(high, SR, "music") == F0_CEILING_HZ  # music keeps speech's
    times, f0 = Analysis(high.astype(np.float32), SR, pitch_ceiling_hz=ceiling).f0
    assert np.median(f0[f0 > 0]) == pytest.approx(1500, rel=0.01)
    _, speech_f0 = Analysis(high.astype(np.float32), SR).f0  # the speech tracker cannot
    assert not np.any(np.abs(speech_f0 - 1500) < 15)
    # verification reads the ceiling the build recorded for the source, else the kind's
    assert row_pitch_ceiling({"source_kind": "tone"}, {"pitch_ceiling_hz": 2000.0}) == 2000.0
    assert row_pitch_ceiling({"source_kind": "tone"}, None) == 4300.0
    assert row_pitch_ceiling({}, None) == F0_CEILING_HZ


def test_a_beeps_span_is_its_tone_and_its_prepared_ends_mirror_each_other(tmp_path):
    from vocalgrad.audio import load_audio, speech_span
    from vocalgrad.stimuli.render import prepare_reference

    beep = ensure_rendered(resolve_sources("beeps", cache_dir=tmp_path))[0]
    audio, sr = load_audio(beep.path)
    plain = speech_span(audio, sr, pre_emphasis=0.0)
    assert (plain.onset_s, plain.offset_s) == (0.75, 2.85)
    assert speech_span(audio, sr).offset_s == 2.86  # speech's reading: one frame too many
    ref = prepare_reference(beep.path, SR, -26.0, "tone")
    on, off = (int(round(t * SR)) for t in (ref.span.onset_s, ref.span.offset_s))
    assert (off - on) / SR == pytest.approx(2.10, abs=0.005)
    frames = ref.audio[on:off][: (off - on) // 160 * 160].reshape(-1, 160)
    level = 10 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=1))
    assert np.allclose(level[:10], level[::-1][:10], atol=0.5)  # the two ends alike


# ---------------------------------------------------------------------------------------
# The published beeps: an increase clip and its decrease twin are each other's mirror image


def _beep_pair(cache: Path, category: str, curve: str = "linear", sr: int = 48000):
    """(increase, decrease) clips of one pair rendered from the fourth published beep."""
    from vocalgrad.dimensions import get
    from vocalgrad.stimuli.plan import Condition, item_id
    from vocalgrad.stimuli.render import (
        prepare_reference,
        prepare_source,
        render_condition,
        tone_seed_for,
    )

    beep = ensure_rendered(resolve_sources("beeps", cache_dir=cache))[3]
    source = prepare_source(prepare_reference(beep.path, sr, -23.0, "tone"), tone_seed_for(0, "b"))
    dim = get(category)
    low, high = dim.endpoints(dim.SPEC.tiers["high"], sr)
    up = Condition(category, "high", curve, "increase", dim.SPEC.tiers["high"], low, high)
    down = up.twin()
    ids = [item_id(0, beep.source_id, c) for c in (up, down)]
    return (
        render_condition(source, up, 0, ids[0], ids[1]).audio,
        render_condition(source, down, 0, ids[1], ids[0]).audio,
    )


@pytest.mark.parametrize("category", ["volume", "voice_pitch"])
def test_a_beeps_twins_mirror_each_other_in_every_order_free_cue(tmp_path, category):
    """A beep is the same at both ends, so a linear increase and its decrease twin must be
    mirror images: no statistic that playing a clip backwards leaves as it is may tell them
    apart. The preparation's steps read the file from its start (a volume clip's loud end
    held 0.4 dB above its twin's loud start), and overlap-add at a hard edge overshot and
    spilled by amounts that differ between the ends (a pitch clip's peak by up to 5 dB)."""
    from vocalgrad.stimuli.order_free import order_free_cues

    up, down = (order_free_cues(x, 48000) for x in _beep_pair(tmp_path, category))
    assert abs(up["of_peak_dbfs"] - down["of_peak_dbfs"]) < 0.1, (up, down)
    assert abs(up["of_crest_db"] - down["of_crest_db"]) < 0.1
    for audible in ("of_audible_s_30", "of_audible_s_45"):
        assert up[audible] == down[audible]
    assert abs(up["of_loudness_range_db"] - down["of_loudness_range_db"]) < 0.05

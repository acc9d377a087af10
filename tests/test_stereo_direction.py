"""Stereo direction: two-channel clips from mono sources, verified between the ears, written
and read back as two channels, and refused to a listener that hears a mono downmix."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
from conftest import RENDER_SR

from vocalgrad import dimensions
from vocalgrad.audio import load_audio, write_flac_atomic
from vocalgrad.dataset import load_rows
from vocalgrad.dimensions import stereo_direction as STEREO
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import AnswerCache, EvalConfig, evaluate, load_results
from vocalgrad.evaluation.score import markdown, score_run
from vocalgrad.listeners.adapters import DSPListener
from vocalgrad.listeners.baselines import IdealObserver, RandomListener
from vocalgrad.probing.pipeline import ProbeConfig, probe_dataset
from vocalgrad.remedies.config import TuneConfig
from vocalgrad.remedies.finetune import finetune
from vocalgrad.report import build_sections
from vocalgrad.stimuli.build import build
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.confounds import loudness_drift_db
from vocalgrad.stimuli.neutralise import rove_gain_db
from vocalgrad.stimuli.plan import Condition
from vocalgrad.stimuli.render import (
    measure_clip,
    prepare_reference,
    prepare_source,
    render_condition,
    to_file,
    unlimited,
)
from vocalgrad.stimuli.verify import verify_dataset

DIM = dimensions.get("stereo_direction")


@pytest.fixture(scope="module")
def sources(real_speech_paths):
    return [
        prepare_source(prepare_reference(str(p), RENDER_SR, -26.0), i + 1)
        for i, p in enumerate(real_speech_paths[:3])
    ]


def test_level_and_time_differences_move_together(sources):
    """Moving right raises the right ear's level (above 1.5 kHz) and makes it lead in time;
    the downmix stays as loud and as long as the source."""
    for source in sources:
        drifts = []
        for direction, sign in (("increase", 1), ("decrease", -1)):
            lo, hi = DIM.endpoints(DIM.SPEC.tiers["high"], RENDER_SR)
            start, end = (lo, hi) if direction == "increase" else (hi, lo)
            r = render_condition(
                source,
                Condition("stereo_direction", "high", "linear", direction, hi, start, end),
                0,
                "00000000000000ad",
            )
            m = r.measured
            assert r.verified and r.audio.shape == (len(source.clean.audio), 2), (direction, m)
            assert sign * (m.end - m.start) > 8, m  # ILD, dB
            assert sign * m.corroboration > 400e-6, m  # ITD: ~0.75 ms from 45 deg left to right
            downmix = source.clean.like(r.audio.mean(axis=1))
            drifts.append(loudness_drift_db(downmix, source.heard))
            assert abs(drifts[-1]) < 0.5, drifts
        # what a model that sums to mono hears drifts alike whichever way the voice moves (the
        # sum of the ears rises at whichever end of the roved path lies farther out)
        assert drifts[0] == pytest.approx(drifts[1], abs=0.2), drifts


def test_the_downmix_gain_holds_every_octave_and_leaves_the_ears_differences_alone(
    sources, monkeypatch
):
    """Ahead the gain is 1. Off to one side (as far as 60 degrees), after it, the downmix's
    power in each octave band (weighted by the source's spectrum) is what it is ahead (or, where
    the comb took more than the gain's cap gives back, that much nearer it), and the
    ears differ in level and time at every frequency as they do without it: the gain is
    common to both."""
    from scipy.signal import stft

    ref = sources[0].clean
    freqs, _, spec = stft(
        ref.audio, fs=RENDER_SR, nperseg=STEREO.N_FFT, noverlap=STEREO.N_FFT - STEREO.HOP
    )
    weight = (np.abs(spec) ** 2).sum(axis=1)

    def normalised(azimuth_deg: float) -> tuple[np.ndarray, np.ndarray]:
        azimuth = np.full(3, azimuth_deg)
        left, right = (
            STEREO.ear_response(freqs, azimuth, -1),
            STEREO.ear_response(freqs, azimuth, 1),
        )
        norm = np.sqrt(2.0 / (np.abs(left) ** 2 + np.abs(right) ** 2))
        return left * norm, right * norm

    assert np.allclose(STEREO.downmix_gain(freqs, *normalised(0.0), weight), 1.0, atol=1e-5)
    band = STEREO.octave_bands(freqs)
    assert band.max() == 5  # 8 kHz: 125-250 Hz ... 4-8 kHz, the last one to the Nyquist bin
    for azimuth in (10.0, 30.0, 45.0, 60.0):
        left, right = normalised(azimuth)
        gain = STEREO.downmix_gain(freqs, left, right, weight)
        down = np.abs(left * gain + right * gain) ** 2 / 4
        assert gain.max() > 1.3, azimuth  # the comb took up to half the power of a band
        for b in range(band.max() + 1):
            inside = band == b
            before = weight[inside] @ (np.abs(left + right) ** 2 / 4)[inside] / weight[inside].sum()
            held = weight[inside] @ down[inside] / weight[inside].sum()
            cap = 10 ** (STEREO.MAX_BOOST_DB / 10)  # where the comb took more, the most it gives
            assert np.allclose(held, np.minimum(1.0, before * cap), atol=1e-3), (azimuth, b)
            assert (held <= 1.0 + 1e-3).all()

    track = lambda t: np.full(np.shape(t), 30.0)  # noqa: E731
    with_gain = STEREO.render(ref, track, np.random.default_rng(0))
    monkeypatch.setattr(STEREO, "downmix_gain", lambda f, lt, rt, w: np.ones(lt.shape, np.float32))
    ears_held = STEREO.render(ref.like(ref.audio), track, np.random.default_rng(0))

    def interaural(ears: np.ndarray) -> np.ndarray:
        """Right re left per bin (complex): the level and phase differences between the ears."""
        _, _, (left_spec, right_spec) = stft(ears.T, fs=RENDER_SR, nperseg=STEREO.N_FFT)
        return (right_spec * left_spec.conj()).sum(axis=1) / (np.abs(left_spec) ** 2).sum(axis=1)

    heard = weight > weight.max() * 1e-6
    ratio = interaural(with_gain)[heard] / interaural(ears_held)[heard]
    deviation = np.abs(ratio - 1)  # at a band edge the gain steps, and re-analysis leaks it
    assert np.median(deviation) < 1e-4 and deviation.max() < 0.05, deviation.max()  # 0.4 dB
    assert STEREO.interaural_delay(with_gain, RENDER_SR) == STEREO.interaural_delay(
        ears_held, RENDER_SR
    )


def test_a_held_voice_is_levelled_on_its_downmix_wherever_it_sits(sources):
    """A constant clip's downmix (less its drawn rove) is as loud held at the side as ahead,
    and the clip's recorded loudness change is the downmix's: what a model that sums to mono
    hears does not tell where the voice sits."""
    from vocalgrad.audio import loudness_lufs

    for source in sources[:2]:
        levels, changes = [], []
        for i, azimuth in enumerate((0.0, 20.0, 40.0, -40.0)):
            r = render_condition(
                source,
                Condition("stereo_direction", "none", "none", "constant", 0.0, azimuth, azimuth),
                0,
                f"{0xC0 + i:016x}",
            )
            levels.append(loudness_lufs(r.audio.mean(axis=1), RENDER_SR) - r.rove_db)
            changes.append(r.confounds["loudness_change_db"] - r.rove_db)
        assert np.ptp(levels) < 0.3, levels
        assert np.ptp(changes) < 0.3, changes


def test_a_level_only_pan_is_not_a_direction_change(sources):
    """Turning one ear up and the other down (no time difference) is refused as a move."""
    for source in sources:
        span = source.clean.span
        ramp = np.clip(
            (np.arange(len(source.clean.audio)) / RENDER_SR - span.onset_s) / span.duration_s, 0, 1
        )
        gains = 10 ** (np.stack([-6 * ramp + 3, 6 * ramp - 3], axis=1) / 20)
        raw = (source.clean.audio[:, None] * gains).astype(np.float32)
        audio = to_file(
            unlimited(source, "stereo_direction", raw, np.zeros_like, span, rove_gain_db(0, "ae"))
        )
        measured = measure_clip(source, "stereo_direction", audio, span, "increase")
        assert measured[1].end - measured[1].start > 5 and measured[3] != "verified", measured[1]


def test_two_channel_flac_round_trip(tmp_path, sources):
    clip = render_condition(
        sources[0],
        Condition("stereo_direction", "mid", "linear", "increase", 25.0, -25.0, 25.0),
        0,
        "00000000000000af",
    ).audio
    path = tmp_path / "clip.flac"
    write_flac_atomic(path, clip, RENDER_SR)
    assert sf.info(path).channels == 2
    back, sr = load_audio(path, mono=False)
    assert sr == RENDER_SR and back.shape == clip.shape and np.array_equal(back, clip)
    mono, _ = load_audio(path)
    assert mono.ndim == 1 and np.allclose(mono, clip.mean(axis=1), atol=1e-6)


class MonoSpy(RandomListener):
    """A listener that hears a downmix; records the shapes it was given."""

    channels = 1

    def __init__(self) -> None:
        super().__init__()
        self.listener_id = "spy:mono"
        self.shapes: list[tuple[int, ...]] = []

    def score_choices(self, requests):
        self.shapes += [r.target_audio.shape for r in requests if r.target_audio is not None]
        return super().score_choices(requests)


@pytest.mark.usefixtures("builtin_cache")
def test_mono_listener_cannot_be_tested_and_ideal_observer_can(tmp_path):
    config = BuildConfig(
        source="builtin",
        n_test=3,
        n_train=0,
        per_speaker_test=1,
        categories=("stereo_direction", "volume"),
        tiers=("high",),
        curves=("linear",),
    )
    data = tmp_path / "ds"
    report = build(config, data, workers=1, audit=False)
    assert report["verification_agreement"]["stereo_direction"] == 1.0
    rows = load_rows(data)
    assert {r["channels"] for r in rows if r["category"] == "stereo_direction"} == {2}
    assert {r["channels"] for r in rows if r["category"] == "volume"} == {1}

    spy = MonoSpy()
    evaluate(data, spy, tmp_path / "mono", EvalConfig(), cache=AnswerCache(tmp_path / "c.sqlite"))
    manifest, results = load_results(tmp_path / "mono")
    assert manifest["listener_channels"] == 1 and "stereo_direction" in manifest["untestable"]
    assert {r["category"] for r in results} == {"volume"} and all(len(s) == 1 for s in spy.shapes)
    summary = score_run(tmp_path / "mono", n_boot=0)
    assert "cannot be tested" in summary["untestable"]["stereo_direction"]
    assert "stereo_direction:** cannot be tested" in markdown(summary)

    evaluate(
        data,
        IdealObserver(data),
        tmp_path / "ideal",
        EvalConfig(),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    manifest, results = load_results(tmp_path / "ideal")
    assert manifest["listener_channels"] == 2 and manifest["untestable"] == {}
    stereo = [
        r for r in results if r["category"] == "stereo_direction" and r["direction"] != "constant"
    ]
    assert stereo and all(r["correct"] for r in stereo)

    # probing a model that hears a downmix on the stereo category, or tuning one on it, is
    # refused before any feature is extracted or any step trained
    with pytest.raises(ConfigError, match="cannot be probed on stereo_direction"):
        probe_dataset(
            data,
            DSPListener(),
            tmp_path / "probe-stereo",
            ProbeConfig(categories=("stereo_direction",)),
        )
    with pytest.raises(ConfigError, match="cannot tune .* on stereo_direction"):
        finetune(
            data,
            "whisper:tiny.en+trimmed",
            tmp_path / "tuned",
            TuneConfig(categories=("stereo_direction",)),
        )

    headline = build_sections([tmp_path / "mono", tmp_path / "ideal"], n_boot=0, fit_boot=0)[0]
    table = next(b for b in headline.blocks if getattr(b, "folded", ""))  # per category, everyone
    column = table.header.index("stereo direction")
    cells = {row[0]: row[column] for row in [*table.rows, *table.references]}
    assert cells["spy:mono"] == "cannot be tested" and cells["baseline:ideal"].startswith("1.00")


def test_the_audit_sees_where_the_image_sits(sources):
    """The shortcut audit reads the whole-clip level difference between the ears (0 for
    mono), and every other cue from the downmix."""
    from vocalgrad.stimuli.audit import clip_cues

    held = render_condition(
        sources[0],
        Condition("stereo_direction", "none", "none", "constant", 0.0, 30.0, 30.0),
        0,
        "00000000000000b1",
    )
    stereo = clip_cues(held.audio, RENDER_SR)
    mono = clip_cues(held.audio.mean(axis=1), RENDER_SR)
    assert stereo["global_ild_db"] > 1.0 and mono["global_ild_db"] == 0.0
    assert stereo["global_duration_s"] == mono["global_duration_s"]


@pytest.mark.parametrize("fmt", ["comparison", "recognition"])
@pytest.mark.usefixtures("builtin_cache")
def test_held_formats_render_two_channels_and_the_ideal_observer_reads_them(tmp_path, fmt):
    """Two stereo parts with the room tone between them (it was mono, and every stereo
    comparison item failed to render, silently); the ideal observer's held evidence starts
    from the source straight ahead."""
    config = BuildConfig(
        source="builtin",
        n_test=3,
        n_train=0,
        per_speaker_test=1,
        categories=("stereo_direction",),
        tiers=("high",),
        format=fmt,
    )
    data = tmp_path / "ds"
    report = build(config, data, workers=1, audit=False)
    assert (
        report["render_errors"] == []
        and report["verification_agreement"]["stereo_direction"] == 1.0
    )
    rows = load_rows(data)
    assert rows and {r["channels"] for r in rows} == {2}
    audio, _ = sf.read(data / "test" / rows[0]["file_name"])
    assert audio.ndim == 2 and audio.shape[1] == 2
    again = verify_dataset(data)["per_category"][
        "stereo_direction"
    ]  # re-read from the files, both ears
    assert again["agreement"] == 1.0 and "refused_inaudible" not in again, again
    evaluate(
        data,
        IdealObserver(data),
        tmp_path / "ideal",
        EvalConfig(mode="choice"),
        cache=AnswerCache(tmp_path / "c.sqlite"),
    )
    _, results = load_results(tmp_path / "ideal")
    assert len(results) == len(rows) and np.mean([r["correct"] for r in results]) >= 0.9

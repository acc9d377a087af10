"""The shortcut audit on tiny hand-built datasets: leaks are caught, clean twins pass.

Each dataset is written directly (FLAC + metadata.jsonl), with speech-like signals: a
harmonic complex on a random F0 with a 4 Hz syllabic envelope, one voice per source. The
increase and decrease clips of a source are twins: the same signal under a gain ramp up or
down, loudness-matched, with the same silences, unless a test plants a leak.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad import cli, dimensions
from vocalgrad.audio import load_audio, loudness_lufs, normalise, write_flac_atomic
from vocalgrad.dataset import read_jsonl, write_jsonl
from vocalgrad.dimensions import get
from vocalgrad.errors import ConfigError
from vocalgrad.listeners import Request, load_listener
from vocalgrad.questions.prompts import build_prompt
from vocalgrad.stimuli.audit import (
    CUE_NAMES,
    FAMILIES,
    allowed_families,
    audit_dataset,
    clip_cues,
    dataset_cues,
    feature_names,
    format_audit,
)
from vocalgrad.stimuli.audit.cache import CACHE_DIR, CACHE_FILE
from vocalgrad.stimuli.audit.cues import _centroid_hz
from vocalgrad.stimuli.order_free import NAMES as ORDER_FREE_NAMES
from vocalgrad.stimuli.order_free import zero_share as _zero_share

SR = 16000
N_SOURCES = 12
RAMP_DB = 6.0
DIRECTIONS = ("increase", "decrease")


def _voice(rng: np.random.Generator, seconds: float = 2.0) -> np.ndarray:
    """A sustained voiced 'utterance': harmonics of a slowly wandering F0, 4 Hz syllables."""
    t = np.arange(int(seconds * SR)) / SR
    f0 = rng.uniform(95, 230) * (
        1 + 0.04 * np.sin(2 * np.pi * rng.uniform(0.4, 0.9) * t + rng.uniform(0, 6.3))
    )
    phase = 2 * np.pi * np.cumsum(f0) / SR
    tilt = rng.uniform(0.9, 1.6)
    x = sum(
        k**-tilt * np.sin(k * phase + rng.uniform(0, 6.3))
        for k in range(1, 30)
        if k * f0.max() < 0.45 * SR
    )
    syllables = (
        0.5 * (1 - np.cos(2 * np.pi * rng.uniform(3.5, 4.5) * t + rng.uniform(0, 6.3)))
    ) ** 1.5
    edges = np.minimum(1.0, np.minimum(t, t[-1] - t) / 0.05)  # 50 ms fades at the utterance edges
    return (x * syllables * edges).astype(np.float32)


def make_dataset(
    root: Path,
    category: str,
    *,
    silences: dict[str, tuple[float, float]] | None = None,
    gain_db: dict[str, float] | None = None,
    splits: tuple[str, ...] = ("train", "test"),
    constant: bool = False,
    plant: Callable[[str, np.ndarray, int, int, np.random.Generator], np.ndarray] | None = None,
) -> Path:
    """Twin clips per source; `silences` (lead, trail s) and `gain_db` per direction plant
    leaks, and so does `plant(direction, audio, onset, offset, rng)` (samples), which returns
    the clip's audio (the same length: the span and the file's length stay as they were)."""
    directions = DIRECTIONS + (("constant",) if constant else ())
    for s_index, split in enumerate(splits):
        rows = []
        for i in range(N_SOURCES):
            rng = np.random.default_rng([7, s_index, i])
            half = _voice(rng, seconds=1.0)
            # a palindrome: each increase twin is its decrease twin played backwards, so every
            # cue that ignores time order is identical between them (a clean benchmark's ideal)
            base = np.concatenate([half, half[::-1]])
            source_id = f"{split}-src{i:02d}"
            curve = ("linear", "quadratic")[i % 2]
            for direction in directions:
                sign = {"increase": 1.0, "decrease": -1.0, "constant": 0.0}[direction]
                ramp_db = sign * RAMP_DB * np.linspace(-1, 1, len(base))
                x = normalise(base * (10 ** (ramp_db / 20)).astype(np.float32), SR, -26.0)
                rove_db = rng.uniform(-3.0, 3.0)  # level roving, as the builder does
                x = x * np.float32(10 ** (((gain_db or {}).get(direction, 0.0) + rove_db) / 20))
                lead, trail = (silences or {}).get(direction, (0.4, 0.4))
                audio = np.concatenate(
                    [np.zeros(int(lead * SR), np.float32), x, np.zeros(int(trail * SR), np.float32)]
                )
                if plant is not None:
                    audio = plant(direction, audio, int(lead * SR), int(lead * SR) + len(x), rng)
                item_id = f"{category}-{source_id}-{direction}"
                file_name = f"{item_id}.flac"
                sha = write_flac_atomic(root / split / file_name, audio, SR)
                rows.append({
                    "file_name": file_name, "item_id": item_id, "category": category,
                    "direction": direction, "tier": "high", "curve": curve,
                    "magnitude": RAMP_DB * 2,
                    "unit": "dB", "source_id": source_id, "speaker_id": f"spk-{source_id}",
                    "split": split, "sample_rate": SR, "duration_s": len(audio) / SR,
                    "speech_onset_s": lead, "speech_offset_s": lead + len(x) / SR, "verified": True,
                    "audio_sha256": sha,
                })  # fmt: skip
        write_jsonl(root / split / "metadata.jsonl", rows)
    return root


# lead, trail: increase clips start with 0.6 s of silence, decrease clips with 0.2 s (same length)
SILENCE_LEAK = {"increase": (0.6, 0.2), "decrease": (0.2, 0.6)}


@pytest.fixture(scope="module")
def silence_leak(tmp_path_factory) -> Path:
    category = "voice_pitch"
    assert "edge_silence" not in get(category).SPEC.target_cues
    return make_dataset(
        tmp_path_factory.mktemp("audit") / "silence-leak", category, silences=SILENCE_LEAK
    )


@pytest.fixture(scope="module")
def level_leak(tmp_path_factory) -> Path:
    return make_dataset(
        tmp_path_factory.mktemp("audit") / "level-leak",
        "volume",
        gain_db={"increase": 6.0},
        constant=True,
    )


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    assert {"edge_level", "edge_silence"} <= set(get("volume").SPEC.target_cues)
    return make_dataset(tmp_path_factory.mktemp("audit") / "clean", "volume")


def test_clip_cues_names_and_values():
    audio = np.concatenate(
        [
            np.zeros(SR // 2, np.float32),
            normalise(_voice(np.random.default_rng(1)), SR, -26.0),
            np.zeros(SR // 4, np.float32),
        ]
    )
    cues = clip_cues(audio, SR)
    assert list(cues) == [
        *(n for f in FAMILIES for n in CUE_NAMES[f]),
        *CUE_NAMES["position"],
        *CUE_NAMES["order_free"],
    ]
    # without a span, positions are fractions of the whole clip: its speech lies in 0.18-0.91
    assert 0.18 < cues["position_energy"] < 0.91 and 0.18 < cues["position_peak"] < 0.91
    assert all(name.startswith(family) for family in FAMILIES for name in CUE_NAMES[family])
    assert cues["global_duration_s"] == pytest.approx(2.75)
    assert cues["global_loudness_lufs"] == pytest.approx(-26.0, abs=1.0)  # gating sees the silences
    assert 90 < cues["global_f0_hz"] < 240
    # the detector finds the first and last syllable, at most one syllable (~0.25 s) inside
    assert (
        0.5 <= cues["edge_silence_lead_s"] <= 0.8 and 0.25 <= cues["edge_silence_trail_s"] <= 0.55
    )
    assert cues["edge_zeros_first"] == 1.0 and cues["edge_level_first_db"] == -120.0
    assert cues["edge_spectrum_first_hz"] == 0.0
    assert 0.1 < cues["global_zero_share"] < 0.5 and cues["global_file_bytes"] > 1000
    silent = clip_cues(np.zeros(SR, np.float32), SR)
    assert np.isnan(silent["global_f0_hz"]) and silent["global_zero_share"] == 1.0


def test_two_part_summaries_do_not_read_the_order_of_the_parts():
    """A comparison item and its twin are the same parts in the other order: no summary may
    tell them apart. Over the file as it lies, BS.1770's block grid (from the file's start)
    meets each part at another phase, and the integrated loudness turns with the order."""
    rng = np.random.default_rng(3)
    floor = (1e-4 * rng.standard_normal(SR // 2)).astype(np.float32)
    loud = normalise(_voice(rng), SR, -20.0)
    quiet = normalise(_voice(rng), SR, -32.0)[: len(loud)]
    loud = loud[: len(quiet)]
    n = len(loud)
    parts = [[0.0, n / SR], [(n + len(floor)) / SR, (2 * n + len(floor)) / SR]]
    first, second = (np.concatenate(x) for x in ((loud, floor, quiet), (quiet, floor, loud)))
    assert (
        abs(loudness_lufs(first, SR) - loudness_lufs(second, SR)) > 0.01
    )  # the meter alone reads the order
    a, b = clip_cues(first, SR, parts=parts), clip_cues(second, SR, parts=parts)
    for name in CUE_NAMES["global"]:
        assert a[name] == pytest.approx(b[name], abs=1e-9), name


def test_zero_share_counts_digital_silence_not_lone_zeros_in_a_room_tone():
    """Exact zeros a room tone hits by chance are one bin of the amplitude histogram (how
    much of the clip is quiet); digital silence is runs of them, which the cue counts."""
    tone = (np.random.default_rng(2).standard_normal(SR) * 3 / 32768).astype(np.float32)
    lone = float(np.mean(np.round(tone * 32768) == 0))
    assert lone > 0.05  # a 3-LSB room tone rounds to zero often
    assert _zero_share(tone, SR) == 0.0
    gap = tone.copy()
    gap[SR // 4 : SR // 2] = 0.0  # 250 ms of digital silence inside it
    assert _zero_share(gap, SR) == pytest.approx(0.25, abs=0.01)


def test_centroid_is_the_spectral_balance_not_the_spectrum_of_the_loudest_stretch():
    """A volume ramp moves where the loud part is; a power-weighted centroid followed it (the
    spectrum of whichever half was boosted), the per-frame median does not."""
    rng = np.random.default_rng(3)
    low = np.sin(2 * np.pi * 300 * np.arange(SR) / SR).astype(np.float32)
    high = (rng.standard_normal(SR) * 0.5).astype(np.float32)
    ramp = np.linspace(0.05, 1.0, 2 * SR).astype(np.float32)
    x = np.concatenate([low, high])
    rising, falling = _centroid_hz(x * ramp, SR), _centroid_hz(x * ramp[::-1], SR)
    assert rising == pytest.approx(falling, rel=0.05)


def test_target_cues_may_name_single_cues():
    """Volume's peak, FLAC size and centroid are statistics of its level course: left out of
    its audit one by one, the rest of the global family stays in."""
    names = feature_names(allowed_families("volume"), "volume")
    assert not {"global_peak_dbfs", "global_file_bytes", "global_centroid_hz"} & set(names)
    assert {"global_loudness_lufs", "global_duration_s", "global_zero_share"} <= set(names)
    assert "global_peak_dbfs" in feature_names(allowed_families("voice_clarity"), "voice_clarity")
    assert "global_peak_dbfs" not in feature_names(allowed_families("voice_pitch"), "voice_pitch")


def test_with_a_span_edge_cues_read_only_the_silences():
    """An edge window that reached into the speech would measure the target itself; with the
    row's span, edge cues see the silence only (NaN where a recording has none), and the
    level cues summarise the speech span."""
    voice = normalise(_voice(np.random.default_rng(2)), SR, -26.0)
    hiss = (1e-3 * np.random.default_rng(3).standard_normal(SR // 5)).astype(np.float32)
    audio = np.concatenate([hiss, voice, hiss])
    span = (0.2, 0.2 + len(voice) / SR)
    cues = clip_cues(audio, SR, span)
    assert cues["edge_level_first_db"] == pytest.approx(-60.0, abs=1.0)  # the hiss, not the voice
    assert cues["global_loudness_lufs"] == pytest.approx(-26.0, abs=0.5)
    tight = clip_cues(voice, SR, (0.0, len(voice) / SR))
    assert np.isnan(tight["edge_level_first_db"]) and np.isnan(tight["edge_zeros_last"])


def test_leading_silence_leak_is_flagged(silence_leak):
    report = audit_dataset(silence_leak, workers=2)
    c = report["per_category"]["voice_pitch"]
    assert report["protocol"] == "train->test" and c["protocol"] == "train->test"
    assert c["shortcut_accuracy"] >= 0.9 and c["passes"] is False and report["passes"] is False
    assert c["shortcut_ci"][0] > 0.5
    assert c["n_items_test"] == 2 * N_SOURCES and c["n_sources_test"] == N_SOURCES
    assert c["by_family_set"]["edge"]["accuracy"] >= 0.9
    assert set(c["per_curve"]) == {"linear", "quadratic"}
    assert json.loads((silence_leak / "audit.json").read_text())["passes"] is False


def test_overall_level_leak_is_flagged(level_leak):
    report = audit_dataset(level_leak)
    c = report["per_category"]["volume"]
    assert c["excluded_target_cues"] == [
        "edge_silence",
        "edge_level",
        "edge_spectrum",
        "edge_zeros",
        "global_peak_dbfs",
        "global_centroid_hz",
        "global_f0_hz",
        "global_file_bytes",
    ]
    assert not any(f.startswith("edge_") for f in c["features"])
    assert c["shortcut_accuracy"] >= 0.9 and c["passes"] is False
    assert c["by_family_set"]["global"]["accuracy"] >= 0.9
    # constants of both splits are scored, each by a model fitted on the other split
    assert c["constant"]["protocol"] == "cross-fit"
    assert c["constant"]["n_constant_scored"] == 2 * N_SOURCES and 0.0 <= c["constant_auc"] <= 1.0
    table = format_audit(report)
    assert "| volume | 24 | 12 |" in table and "NO |" in table
    assert "volume: edge_silence, edge_level" in table


def add_constants(root: Path, gain_db: float) -> Path:
    """Give every source a "constant" clip: a copy of its increase clip, `gain_db` louder."""
    for split in ("train", "test"):
        rows = list(read_jsonl(root / split / "metadata.jsonl"))
        extra = []
        for row in rows:
            if row["direction"] != "increase":
                continue
            audio, sr = sf.read(root / split / row["file_name"], dtype="float32")
            item_id = row["item_id"].replace("increase", "constant")
            file_name = f"{item_id}.flac"
            sha = write_flac_atomic(
                root / split / file_name, audio * np.float32(10 ** (gain_db / 20)), sr
            )
            extra.append(
                {
                    **row,
                    "item_id": item_id,
                    "file_name": file_name,
                    "direction": "constant",
                    "tier": "none",
                    "curve": "none",
                    "audio_sha256": sha,
                }
            )
        write_jsonl(root / split / "metadata.jsonl", rows + extra)
    return root


def test_constants_told_apart_by_level_fail_the_audit(tmp_path):
    """Constant clips 8 dB louder than the changing ones (past the +-3 dB rove) are found by
    the cross-fitted constant test, which scores the constants of both splits; constants
    that are plain copies of changing clips pass."""
    leak = add_constants(make_dataset(tmp_path / "leak", "voice_pitch"), 8.0)
    c = audit_dataset(leak)["per_category"]["voice_pitch"]
    assert (
        c["constant"]["protocol"] == "cross-fit"
        and c["constant"]["n_constant_scored"] == 2 * N_SOURCES
    )
    assert c["constant_auc"] > 0.8 and c["passes"] is False
    assert any("constant clips told apart" in r for r in c["reasons"])
    fair = add_constants(make_dataset(tmp_path / "fair", "voice_pitch"), 0.0)
    c = audit_dataset(fair)["per_category"]["voice_pitch"]
    assert c["constant_auc"] <= 0.65, c["constant"]


def test_clean_twins_pass(clean):
    report = audit_dataset(clean)
    c = report["per_category"]["volume"]
    lo, hi = c["shortcut_ci"]
    assert c["shortcut_accuracy"] <= 0.70 and lo <= 0.5 <= hi, c
    assert c["passes"] is True and report["passes"] is True
    assert "yes |" in format_audit(report)


def test_cues_are_cached_and_resumed(tmp_path):
    root = make_dataset(tmp_path / "ds", "volume", splits=("test",))
    first = audit_dataset(root)
    assert first["protocol"] == "grouped-cv"  # no train split
    cache = root / CACHE_DIR / CACHE_FILE
    content = cache.read_bytes()
    lines = content.splitlines(keepends=True)
    assert len(lines) == 2 * N_SOURCES
    # the second run must not need the audio: its cues are cached, and the cache is untouched
    victim = json.loads(lines[0])["key"].split("|")[0]
    (root / "test" / f"{victim}.flac").unlink()
    second = audit_dataset(root)
    assert cache.read_bytes() == content
    assert second["per_category"] == first["per_category"]
    # an interrupted writer leaves a torn last line: it is dropped, and only that clip remeasured
    cache.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    third = audit_dataset(root)
    assert third["per_category"] == first["per_category"]
    assert sorted(cache.read_bytes().splitlines()) == sorted(content.splitlines())


def test_position_cues_are_measured_only_where_the_format_audits_them(tmp_path, builtin_cache):
    """A gradual build's cue cache leaves out the position family, which no gradual gate
    reads; a "when" build measures it, and a cached clip without it is measured anew."""
    from ladder_helpers import tiny_build

    position = set(CUE_NAMES["position"])
    for fmt, wanted in (("gradual", False), ("when", True)):
        root = tiny_build(tmp_path / fmt, fmt, categories=("volume",), n_train=0)
        first = dataset_cues(root)
        assert all((position <= set(c)) is wanted for c in first.values()), fmt
        assert all(ORDER_FREE_NAMES[0] in c for c in first.values())
    cache = tmp_path / "when" / CACHE_DIR / CACHE_FILE
    lines = [json.loads(line) for line in cache.read_text().splitlines()]
    for entry in lines:
        entry["cues"] = {k: v for k, v in entry["cues"].items() if k not in position}
    cache.write_text("".join(json.dumps(e) + "\n" for e in lines))
    again = dataset_cues(tmp_path / "when")
    assert again == first  # measured anew, the same values


def test_grouped_cv_without_train_split_still_flags(tmp_path):
    root = make_dataset(tmp_path / "ds", "voice_pitch", silences=SILENCE_LEAK, splits=("test",))
    c = audit_dataset(root)["per_category"]["voice_pitch"]
    assert c["protocol"] == "grouped-cv" and c["shortcut_accuracy"] >= 0.9 and c["passes"] is False


def _requests(root: Path, category: str) -> tuple[list[Request], list[str]]:
    rows = [
        json.loads(line) for line in (root / "test" / "metadata.jsonl").read_text().splitlines()
    ]
    requests, truth = [], []
    for row in rows:
        audio, _ = load_audio(root / "test" / row["file_name"])
        item_id = row["item_id"]
        requests.append(
            Request(
                item_id, build_prompt(category, item_id=item_id), {item_id: audio}, row["source_id"]
            )
        )
        truth.append(row["direction"])
    return requests, truth


def test_shortcut_listener_exploits_the_leak(silence_leak, tmp_path):
    listener = load_listener("baseline:shortcut", dataset=silence_leak)
    assert (
        listener.listener_id == "baseline:shortcut"
        and listener.can_score
        and listener.sample_rate == SR
    )
    requests, truth = _requests(silence_leak, "voice_pitch")
    answers = listener.generate(requests)
    assert np.mean([a == t for a, t in zip(answers, truth, strict=True)]) >= 0.9
    scores = listener.score_choices(requests[:1])[0]
    assert set(scores) == {"increase", "decrease"}
    assert np.exp(scores["increase"]) + np.exp(scores["decrease"]) == pytest.approx(1.0)
    # reversed controls are answered from their audio; ternary options get a low score
    r = requests[0]
    rev_id = r.item_id + "#reversed"
    reversed_request = Request(
        rev_id,
        build_prompt("voice_pitch", "ternary", item_id=rev_id),
        {rev_id: r.target_audio[::-1].copy()},
        r.source_id,
    )
    rev_scores = listener.score_choices([reversed_request])[0]
    assert set(rev_scores) == {"increase", "decrease", "constant"}
    assert rev_scores["constant"] < min(rev_scores["increase"], rev_scores["decrease"])
    silent = Request("s", build_prompt("voice_pitch", item_id="s"), {"s": None})
    assert listener.score_choices([silent])[0]["increase"] == pytest.approx(np.log(0.5))

    no_train = make_dataset(tmp_path / "no-train", "voice_pitch", splits=("test",))
    with pytest.raises(ConfigError, match="train split"):
        load_listener("baseline:shortcut", dataset=no_train)
    with pytest.raises(ConfigError, match="needs the dataset"):
        load_listener("baseline:shortcut")


def test_shortcut_listener_reads_the_audits_cues_for_the_datasets_own_clips(tmp_path):
    """The build's audit measured every clip: the listener looks those cues up (the same
    answers as measuring them) but measures any other audio, e.g. an edited copy."""
    root = make_dataset(tmp_path / "ds", "voice_pitch", silences=SILENCE_LEAK)
    audit_dataset(root)
    requests, _ = _requests(root, "voice_pitch")
    measured = load_listener("baseline:shortcut", dataset=root)
    measured._measured = {}  # as if the dataset had no cue cache
    expected = measured.score_choices(requests)
    listener = load_listener("baseline:shortcut", dataset=root)
    assert listener.score_choices(requests) == expected
    # the lookup is what answers: cached cues that say "silent edges" move the answer
    cache = root / CACHE_DIR / CACHE_FILE
    entries = [json.loads(line) for line in cache.read_text().splitlines()]
    victim = requests[0].item_id
    for entry in entries:
        if entry["key"].startswith(victim + "|"):
            entry["cues"] = {k: 0.0 for k in entry["cues"]}
    cache.write_text("".join(json.dumps(e) + "\n" for e in entries))
    edited = load_listener("baseline:shortcut", dataset=root)
    assert edited.score_choices(requests[:1]) != expected[:1]
    assert edited.score_choices(requests[1:]) == expected[1:]
    # other samples under the same item id are measured, not looked up
    louder = requests[0].target_audio * np.float32(0.5)
    other = Request(victim, requests[0].prompt, {victim: louder}, requests[0].source_id)
    fresh = load_listener("baseline:shortcut", dataset=root)
    fresh._measured = {}
    assert edited.score_choices([other]) == fresh.score_choices([other])


def test_cli_audit_exit_codes(silence_leak, clean, tmp_path, capsys):
    out = tmp_path / "audit.json"
    assert cli.main(["audit", str(silence_leak), "--json", str(out)]) == 4  # audit failed
    printed = capsys.readouterr()
    assert "| category | items | sources | shortcut acc [CI]" in printed.out
    assert "shortcut audit failed for 1 of 1 dimensions: voice_pitch (" in printed.err
    # per gate: its statistic, its null at this size, what fails it, its family-wise p-value
    assert "| category | gate | statistic | null 95th pct | needed to fail | p (family-wise) |" in (
        printed.out
    )
    assert "| voice_pitch | direction | LR accuracy 1.000 |" in printed.out
    assert "Power: to fail a gate at this size a cue classifier must reach" in printed.out
    assert json.loads(out.read_text())["per_category"]["voice_pitch"]["passes"] is False
    assert cli.main(["audit", str(clean)]) == 0
    assert "shortcut audit passed" in capsys.readouterr().out
    assert cli.main(["audit", str(tmp_path / "missing")]) == 2


def test_audit_cis_follow_the_few_sources_rule():
    """One source: no CI, so the audit cannot claim a pass; a few: a jackknife/Wilson
    interval that is never zero-width, as for every accuracy in the toolkit."""
    from vocalgrad.stimuli.audit.classifiers import _accuracy

    one = _accuracy(np.array([1, 0, 1, 1]), [{"source_id": "a"}] * 4, "k")
    assert one["n_clusters"] == 1 and np.isnan(one["lo"]) and np.isnan(one["hi"])
    rows = [{"source_id": s} for s in "aabbcc"]
    perfect = _accuracy(np.ones(6, int), rows, "k")
    assert (
        perfect["ci_method"] == "cluster jackknife t"
        and perfect["lo"] < 0.6
        and perfect["hi"] == 1.0
    )
    mixed = _accuracy(np.array([1, 0, 1, 1, 0, 0]), rows, "k")
    assert mixed["lo"] < mixed["accuracy"] < mixed["hi"]


# ---------------------------------------------------------------------------------------
# Auditing the audit: order-free leaks the span-based families cannot see


def _murmur_at_the_edges(direction, audio, onset, offset, rng):
    """Decrease clips louder over the whole file, equal over the speech span: a quiet voice
    (20 dB under the speech) fills their silences, as a level course leaks past the span."""
    if direction != "decrease":
        return audio
    out = audio.copy()
    murmur = _voice(rng, seconds=len(audio) / SR) * np.float32(
        np.sqrt(np.mean(audio[onset:offset] ** 2)) * 0.1
    )
    out[:onset] += murmur[:onset]
    out[offset:] += murmur[offset:]
    return out


def _ringing_tail(direction, audio, onset, offset, rng):
    """Increase clips ring on after the speech (a decaying noise tail, -15 dB), decrease
    clips stop: the same length and span, a longer audible tail."""
    if direction != "increase":
        return audio
    out = audio.copy()
    n = len(audio) - offset
    level = np.sqrt(np.mean(audio[onset:offset] ** 2)) * 10 ** (-15 / 20)
    decay = np.exp(-6.9 * np.arange(n) / (0.35 * SR))
    out[offset:] += (rng.standard_normal(n) * level * decay).astype(np.float32)
    return out


def _order_free_fails(report: dict, category: str) -> dict:
    c = report["per_category"][category]
    of = c["order_free"]
    assert of["features"] == list(CUE_NAMES["order_free"]), "the family has no exclusions"
    assert of["accuracy"] >= 0.8 and of["ci"][0] > 0.5, of
    assert c["passes"] is False and any("order-free" in r for r in c["reasons"]), c["reasons"]
    redrawn = c["gates"]["order_free"]["redrawn"]  # a leak stays when the speakers are dealt again
    assert redrawn["draws"] == 30 and redrawn["mean"] >= 0.75, redrawn
    return of


def test_order_free_family_catches_decrease_twins_louder_over_the_whole_file(tmp_path):
    """Equal over the span, where the span-based level cue and the renderer look; volume
    leaves every edge family out as a target cue, so only the whole file shows the leak."""
    root = make_dataset(tmp_path / "murmur", "volume", plant=_murmur_at_the_edges)
    report = audit_dataset(root)
    c = report["per_category"]["volume"]
    assert not any(f.startswith("edge_") for f in c["features"])
    of = _order_free_fails(report, "volume")
    assert of["per_cue_auc"]["of_edge_level_sum_db"]["auc"] < 0.2  # decrease louder at its edges
    assert "order-free" in format_audit(report)
    redrawn = c["gates"]["order_free"]["redrawn"]
    assert f"| FAIL | redrawn {redrawn['mean']:.2f} +- " in format_audit(report)


def test_order_free_family_catches_a_longer_tail(tmp_path):
    root = make_dataset(tmp_path / "tail", "echo", plant=_ringing_tail)
    of = _order_free_fails(audit_dataset(root), "echo")
    assert of["per_cue_auc"]["of_edge_silence_s_45"]["auc"] < 0.2  # increase audible longer


def test_order_free_family_catches_a_leak_in_the_equalised_statistic(tmp_path):
    """A leak in the very statistic the renderer sets (the speech's loudness) is caught too:
    the family measures it alongside the others, never only it, and never leaves it out."""
    root = make_dataset(tmp_path / "equalised", "volume", gain_db={"increase": 4.0})
    of = _order_free_fails(audit_dataset(root), "volume")
    assert of["per_cue_auc"]["of_loudness_lufs"]["auc"] > 0.75


def _buried_onset(
    direction: str, audio: np.ndarray, onset: int, offset: int, rng: np.random.Generator
) -> np.ndarray:
    """A far start: the decrease clip's first 80 ms of speech rise out of a room's build-up,
    and nothing rings before them (what distance's renderer did up to revision 11)."""
    if direction != "decrease":
        return audio
    out = audio.copy()
    n = int(0.08 * SR)
    out[onset : onset + n] *= np.linspace(0.0, 1.0, n, dtype=np.float32) ** 4
    return out


LIMIT = "reverberation rings after speech, never before it (planted by this test)"


def test_a_documented_order_free_limit_is_named_and_the_audit_still_fails(clean, tmp_path, request):
    """A dimension may declare an order-free cue that its physics keeps
    (`SPEC.order_free_limit`). Planted, the audit fails it as any leak and names the limit
    after its reasons; where the family passes, no reason names it, and the report lists it
    apart. No shipped dimension declares one since renderer revision 12."""
    assert not any(d.SPEC.order_free_limit for d in dimensions.bound())
    bound = dimensions.get("distance")
    limited = dataclasses.replace(
        bound, SPEC=dataclasses.replace(bound.SPEC, order_free_limit=LIMIT)
    )
    dimensions.register(limited, replace=True)
    request.addfinalizer(lambda: dimensions.register(bound, replace=True))
    report = audit_dataset(make_dataset(tmp_path / "far-start", "distance", plant=_buried_onset))
    _order_free_fails(report, "distance")
    c = report["per_category"]["distance"]
    assert c["order_free_limit"] == LIMIT
    assert c["reasons"][-1] == f"a documented limit of the dimension: {LIMIT}", c["reasons"]
    assert "Documented order-free limits" in format_audit(report)
    twins = audit_dataset(make_dataset(tmp_path / "clean", "distance"))["per_category"]
    assert twins["distance"]["order_free"]["accuracy"] <= 0.7, twins["distance"]["order_free"]
    assert not any("documented limit" in r for r in twins["distance"]["reasons"])
    volume = audit_dataset(clean)
    assert volume["per_category"]["volume"]["order_free_limit"] is None
    assert "Documented order-free limits" not in format_audit(volume)


def test_palindromic_twins_pass_the_order_free_family(clean):
    """Each increase clip is its decrease twin backwards (up to the level rove): chance."""
    c = audit_dataset(clean)["per_category"]["volume"]
    lo, hi = c["order_free"]["ci"]
    assert c["order_free"]["accuracy"] <= 0.7 and lo <= 0.5 <= hi, c["order_free"]
    assert not any("redrawn" in g for g in c["gates"].values())  # dealt again beside a failure


def test_order_free_family_has_no_exclusions():
    """No dimension and no format may leave out an order-free cue: none reads a direction.
    It is gated exactly where the label flips when the clip is played backwards (a reversed
    control exists); formats whose label survives time reversal report it without gating it:
    recognition (a held clip's value is what it asks), contour (a rise-fall is its own time
    reversal) and together (whether two courses agree survives reversal)."""
    from vocalgrad import formats
    from vocalgrad.dimensions import names
    from vocalgrad.stimuli.audit import format_families, target_cue_names

    order_free = set(CUE_NAMES["order_free"])
    for category in names():
        assert "order_free" not in get(category).SPEC.target_cues
        for fmt in formats.names():
            assert "order_free" not in format_families(fmt)  # audited apart, always
            assert not target_cue_names(category, fmt) & order_free, (category, fmt)
    # gated exactly where playing the clip backwards flips its label: there no statistic that
    # ignores the order of time can tell the answers apart (a held value, a contour, keep it)
    gated = {f.name for f in formats.listed() if f.order_free_gated}
    assert gated == {f.name for f in formats.listed() if f.reversible}
    assert {"gradual", "comparison"} <= gated
    assert not {"recognition", "contour", "together"} & gated


def _one_end_rows(rng: np.random.Generator, spread: float) -> list[dict]:
    """Twin rows whose end measures lie at +-6 dB about a source-relative offset drawn from
    +-spread: a wide spread hides which end a clip is at."""
    rows = []
    for split in ("train", "test"):
        for i in range(N_SOURCES):
            offset = rng.uniform(-spread, spread)
            for direction, sign in (("increase", 1), ("decrease", -1)):
                rows.append(
                    {
                        "item_id": f"{split}{i}{direction}",
                        "split": split,
                        "direction": direction,
                        "source_id": f"{split}{i}",
                        "measured_start": offset - sign * 6 + rng.normal(0, 0.5),
                        "measured_end": offset + sign * 6 + rng.normal(0, 0.5),
                    }
                )
    return rows


def test_one_end_observer_reads_an_endpoint_and_fails_when_it_is_roved():
    from vocalgrad.stimuli.audit import one_end_report

    fixed = one_end_report("volume", _one_end_rows(np.random.default_rng(0), 0.0))
    assert fixed["accuracy"] >= 0.95 and fixed["lo"] > 0.5
    roved = one_end_report("volume", _one_end_rows(np.random.default_rng(0), 60.0))
    assert roved["accuracy"] <= 0.75
    assert (
        one_end_report(
            "volume",
            [{**r, "measured_end": None} for r in _one_end_rows(np.random.default_rng(0), 0.0)],
        )
        == {}
    )

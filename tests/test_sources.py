"""Source resolution and split selection, on fixtures built in tmp_path (no downloads)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from vocalgrad.errors import SourceError
from vocalgrad.sources import (
    Source,
    builtin_sources,
    default_cache_dir,
    ensure_rendered,
    resolve_sources,
    select_sources,
)
from vocalgrad.sources.builtin import harvard_sentences
from vocalgrad.sources.vctk import parse_speaker_info

SR = 16000


def _tone(seconds: float = 0.5, freq: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def _write(path: Path, seconds: float = 0.5) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, _tone(seconds), SR)
    return path


def _src(speaker: str, n: int, gender: str | None, text: str | None = None) -> Source:
    return Source(
        source_id=f"t/{speaker}_{n:03d}",
        path=f"/nonexistent/{speaker}_{n}.wav",
        speaker_id=speaker,
        text_id=text or f"text-{n}",
        gender=gender,
        domain="test",
        licence="test",
        attribution="test",
    )


def _pool(n_f: int = 4, n_m: int = 4, n_utts: int = 10) -> list[Source]:
    """Every speaker reads the same n_utts texts, like the builtin corpus."""
    out = []
    for g, count in (("F", n_f), ("M", n_m)):
        for i in range(count):
            out += [_src(f"{g.lower()}{i}", n, g) for n in range(n_utts)]
    return out


def _durations(sources: list[Source], seconds: float = 4.0) -> dict[str, float]:
    return {s.source_id: seconds for s in sources}


# --- spec parsing -------------------------------------------------------------------------


def test_unknown_scheme_and_malformed_specs() -> None:
    for spec in ("ftp:/x", "nonsense", "folder:", "builtin:zero", "hf:@train"):
        with pytest.raises(SourceError):
            resolve_sources(spec)


def test_default_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VOCALGRAD_CACHE", str(tmp_path / "vc"))
    assert default_cache_dir() == tmp_path / "vc"
    monkeypatch.delenv("VOCALGRAD_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "vocalgrad"


# --- folder -------------------------------------------------------------------------------


def test_folder_default_speakers(tmp_path: Path) -> None:
    _write(tmp_path / "bob" / "a.wav")
    _write(tmp_path / "alice" / "sub" / "b.flac")
    _write(tmp_path / "loose.wav")
    (tmp_path / "notes.txt").write_text("not audio")
    sources = resolve_sources(f"folder:{tmp_path}")
    assert [s.source_id for s in sources] == [
        "folder/alice/sub/b.flac",
        "folder/bob/a.wav",
        "folder/loose.wav",
    ]
    assert [s.speaker_id for s in sources] == ["alice", "bob", "unknown"]
    assert [s.text_id for s in sources] == ["clip-b", "clip-a", "clip-loose"]
    assert all(s.domain == "folder" and s.licence == "unknown (user-supplied)" for s in sources)
    assert all(Path(s.path).is_file() for s in sources)


def test_folder_speaker_pattern_with_text(tmp_path: Path) -> None:
    _write(tmp_path / "spkA__hello_world.wav")
    _write(tmp_path / "spkB__Hello world.wav")
    pattern = r"(?P<speaker>[^/_]+)__(?P<text>[^/]+)\.\w+$"
    sources = resolve_sources(f"folder:{tmp_path}", speaker_pattern=pattern)
    assert {s.speaker_id for s in sources} == {"spkA", "spkB"}
    assert sources[0].text_id == sources[1].text_id  # same sentence, different speakers
    with pytest.raises(SourceError, match="named group 'speaker'"):
        resolve_sources(f"folder:{tmp_path}", speaker_pattern=r"(\w+)")
    with pytest.raises(SourceError, match="does not match"):
        resolve_sources(f"folder:{tmp_path}", speaker_pattern=r"(?P<speaker>zzz)")


def test_folder_missing_and_empty(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        resolve_sources(f"folder:{tmp_path / 'nope'}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("x")
    with pytest.raises(SourceError, match="no audio files found"):
        resolve_sources(f"folder:{tmp_path / 'empty'}")


def test_folder_reads_compressed_containers_and_builds_from_them(
    tmp_path: Path, cache_dir: Path, builtin_cache
) -> None:
    """Corpora ship Ogg and MP3 as often as WAV: the folder takes every container whose header
    states its rate, decodes it to the same speech, and a build renders and verifies from it."""
    from vocalgrad import api
    from vocalgrad.audio import load_audio, resample

    speakers = ["builtin-f1", "builtin-m1", "builtin-f2", "builtin-m2"]
    spoken = ensure_rendered(
        builtin_sources(cache_dir, speakers=speakers, max_sentences=2, sentences_per_clip=2)
    )
    folder = tmp_path / "corpus"
    formats = [("OGG", "VORBIS", "ogg"), ("OGG", "OPUS", "opus"), ("MP3", "MPEG_LAYER_III", "mp3"),
               ("AIFF", "PCM_16", "aiff")]  # fmt: skip
    originals = {}
    for src, (fmt, subtype, ext) in zip(spoken, formats, strict=True):
        speech, sr = load_audio(src.path)
        rate = 48000 if subtype == "OPUS" else sr  # Opus runs at 8, 12, 16, 24 or 48 kHz
        path = folder / src.speaker_id / f"{src.speaker_id}.{ext}"  # one text per file
        path.parent.mkdir(parents=True)
        sf.write(path, resample(speech, sr, rate), rate, format=fmt, subtype=subtype)
        originals[path.suffix] = speech, sr
    sources = resolve_sources(f"folder:{folder}")
    assert sorted(Path(s.path).suffix for s in sources) == [".aiff", ".mp3", ".ogg", ".opus"]
    for s in sources:
        speech, sr = originals[Path(s.path).suffix]
        decoded, rate = load_audio(s.path)
        assert abs(len(decoded) / rate - len(speech) / sr) < 0.1, s.path
        level = np.sqrt(np.mean(decoded**2)) / np.sqrt(np.mean(speech**2))
        assert 0.8 < level < 1.25, (s.path, level)  # the speech, not silence or noise
    (folder / "builtin-f1" / "take2.raw").write_bytes(bytes(3200))  # said, not silently left
    dataset = api.build(
        tmp_path / "ds", source=f"folder:{folder}", n_test=2, n_train=2, categories="volume",
        tiers="high", curves="linear", per_speaker_test=1, audit=False, workers=1,
    )  # fmt: skip
    changing = [r for r in dataset.rows("test") if r["direction"] != "constant"]
    assert len({r["source_id"] for r in changing}) == 2 and all(r["verified"] for r in changing)
    (skipped,) = dataset.report["skipped_files"]
    assert skipped["files"] == ["builtin-f1/take2.raw"] and "no header (.raw)" in skipped["reason"]


def test_folder_of_headerless_samples_says_how_to_convert(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.raw").write_bytes(np.zeros(16000, np.int16).tobytes())
    (tmp_path / "a" / "y.ulaw").write_bytes(bytes(8000))
    with pytest.raises(SourceError, match=r"2 file\(s\) without a header \(\.raw, \.ulaw\).*sox"):
        resolve_sources(f"folder:{tmp_path}")


# --- VCTK ---------------------------------------------------------------------------------


def _vctk_080(root: Path) -> None:
    (root / "speaker-info.txt").parent.mkdir(parents=True, exist_ok=True)
    (root / "speaker-info.txt").write_text(
        "ID  AGE  GENDER  ACCENTS  REGION\n"
        "225  23  F    English    Southern  England\n"
        "226  22  M    English    Surrey\n"
    )
    for spk in ("p225", "p226"):
        for num, text in ((1, "Please call Stella."), (30, f"Private text of {spk}.")):
            _write(root / "wav48" / spk / f"{spk}_{num:03d}.wav")
            (root / "txt" / spk).mkdir(parents=True, exist_ok=True)
            (root / "txt" / spk / f"{spk}_{num:03d}.txt").write_text(text + "\n")


def _vctk_092(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "speaker-info.txt").write_text(
        "ID  AGE  GENDER  ACCENTS  REGION COMMENTS \n"
        "p225  23  F    English    Southern  England  (mic2 files unavailable)\n"
        "p315  23  M    American    Connecticut    \n"
    )
    _write(root / "wav48_silence_trimmed" / "p225" / "p225_001_mic1.flac")
    _write(root / "wav48_silence_trimmed" / "p225" / "p225_001_mic2.flac")
    _write(root / "wav48_silence_trimmed" / "p225" / "p225_002_mic1.flac")
    _write(root / "wav48_silence_trimmed" / "p315" / "p315_001_mic1.flac")  # no txt for p315
    _write(root / "wav48_silence_trimmed" / "p315" / "p315_040_mic1.flac")
    (root / "txt" / "p225").mkdir(parents=True)
    (root / "txt" / "p225" / "p225_001.txt").write_text("Please call Stella.\n")


def test_vctk_080_layout(tmp_path: Path) -> None:
    _vctk_080(tmp_path / "VCTK-Corpus")
    sources = resolve_sources(f"vctk:{tmp_path}")  # one level above the corpus root
    by_id = {s.source_id: s for s in sources}
    assert sorted(by_id) == ["vctk/p225_001", "vctk/p225_030", "vctk/p226_001", "vctk/p226_030"]
    assert by_id["vctk/p225_001"].gender == "F" and by_id["vctk/p226_001"].gender == "M"
    assert by_id["vctk/p225_001"].text_id == by_id["vctk/p226_001"].text_id
    assert by_id["vctk/p225_030"].text_id != by_id["vctk/p226_030"].text_id
    assert by_id["vctk/p225_001"].text == "Please call Stella."
    assert all(s.licence == "CC-BY-4.0" and "Edinburgh" in s.attribution for s in sources)


def test_vctk_092_layout_mic1_only_and_text_fallback(tmp_path: Path) -> None:
    _vctk_092(tmp_path)
    sources = {s.source_id: s for s in resolve_sources(f"vctk:{tmp_path}")}
    assert sorted(sources) == ["vctk/p225_001", "vctk/p225_002", "vctk/p315_001", "vctk/p315_040"]
    assert sources["vctk/p225_001"].path.endswith("_mic1.flac")
    assert sources["vctk/p315_001"].gender == "M"
    # p315 has no transcripts: shared utterance 001 borrows p225's text id, 040 is its own
    assert sources["vctk/p315_001"].text_id == sources["vctk/p225_001"].text_id
    assert sources["vctk/p315_040"].text_id == "vctk-p315-040"
    assert sources["vctk/p225_002"].text_id == "vctk-utt002"


def test_speaker_info_both_id_styles(tmp_path: Path) -> None:
    info = tmp_path / "speaker-info.txt"
    info.write_text(
        "ID AGE GENDER\n225 23 F English\np226 22 M English Surrey ## comment\nbad line\n"
    )
    assert parse_speaker_info(info) == {"p225": "F", "p226": "M"}


def test_vctk_not_a_corpus(tmp_path: Path) -> None:
    _write(tmp_path / "x" / "a.wav")
    with pytest.raises(SourceError, match="not a VCTK corpus"):
        resolve_sources(f"vctk:{tmp_path}")


# --- Hugging Face (local only) ------------------------------------------------------------


def _wav_bytes(seconds: float) -> bytes:
    import io

    buf = io.BytesIO()
    sf.write(buf, _tone(seconds), SR, format="WAV")
    return buf.getvalue()


def test_hf_local_save_to_disk(tmp_path: Path) -> None:
    from datasets import Audio, Dataset, Features, Value

    features = Features(
        {
            "audio": Audio(),
            "speaker_id": Value("string"),
            "sentence": Value("string"),
            "gender": Value("string"),
        }
    )
    ds = Dataset.from_dict(
        {
            "audio": [
                {"bytes": _wav_bytes(0.5), "path": None},
                {"bytes": _wav_bytes(0.7), "path": None},
            ],
            "speaker_id": ["s1", "s2"],
            "sentence": ["Hello there.", "hello, there"],
            "gender": ["female", "male"],
        },
        features=features,
    )
    ds.save_to_disk(str(tmp_path / "ds"))
    cache = tmp_path / "cache"
    sources = resolve_sources(f"hf:{tmp_path / 'ds'}", cache_dir=cache)
    assert [s.speaker_id for s in sources] == ["s1", "s2"]
    assert [s.gender for s in sources] == ["F", "M"]
    assert sources[0].text_id == sources[1].text_id
    assert sources[0].licence == "see dataset card"
    info = sf.info(sources[1].path)
    assert info.samplerate == SR and abs(info.duration - 0.7) < 1e-3
    mtime = os.stat(sources[0].path).st_mtime_ns
    again = resolve_sources(f"hf:{tmp_path / 'ds'}@train", cache_dir=cache)
    assert again == sources and os.stat(sources[0].path).st_mtime_ns == mtime
    with pytest.raises(SourceError, match="no column"):
        resolve_sources(f"hf:{tmp_path / 'ds'}", cache_dir=cache, hf_audio_column="wave")


def test_hf_local_audiofolder_with_metadata_csv(tmp_path: Path) -> None:
    """The most common audiofolder form: WAVs with a metadata.csv (broke with pandas 3)."""
    folder = tmp_path / "af"
    folder.mkdir()
    for i in range(2):
        (folder / f"{i}.wav").write_bytes(_wav_bytes(0.5 + 0.2 * i))
    (folder / "metadata.csv").write_text(
        "file_name,speaker_id,text\n0.wav,s1,Hello there.\n1.wav,s2,Good day.\n"
    )
    sources = resolve_sources(f"hf:{folder}@train", cache_dir=tmp_path / "cache")
    assert [s.speaker_id for s in sources] == ["s1", "s2"] and sources[1].text == "Good day."


def test_hf_missing_local_path(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="does not exist"):
        resolve_sources(f"hf:{tmp_path / 'missing.ds'}", cache_dir=tmp_path)


# --- selection ----------------------------------------------------------------------------


def _check_split(result: list[tuple[Source, str]]) -> None:
    test = [s for s, split in result if split == "test"]
    train = [s for s, split in result if split == "train"]
    assert not {s.speaker_id for s in test} & {s.speaker_id for s in train}
    assert not {s.text_id for s in test} & {s.text_id for s in train}


def test_select_disjoint_and_gender_balanced() -> None:
    pool = _pool(n_utts=30)
    result = select_sources(pool, n_test=8, n_train=20, durations=_durations(pool))
    _check_split(result)
    test = [s for s, split in result if split == "test"]
    assert len(test) == 8 and len([s for s, split in result if split == "train"]) == 20
    assert sorted(s.gender for s in test) == ["F"] * 4 + ["M"] * 4
    per_speaker = {
        spk: sum(s.speaker_id == spk for s in test) for spk in {s.speaker_id for s in test}
    }
    assert set(per_speaker.values()) == {2}


def test_select_deterministic_under_shuffle() -> None:
    pool = _pool()
    durations = _durations(pool)
    first = select_sources(pool, n_test=4, n_train=10, seed=3, durations=durations)
    shuffled = pool[:]
    random.Random(1).shuffle(shuffled)
    assert select_sources(shuffled, n_test=4, n_train=10, seed=3, durations=durations) == first
    other = select_sources(pool, n_test=4, n_train=10, seed=4, durations=durations)
    assert other != first


def test_select_duration_filter_and_zero_train() -> None:
    pool = _pool(2, 2, 6)
    durations = {s.source_id: (1.0 if s.text_id in ("text-0", "text-1") else 5.0) for s in pool}
    result = select_sources(pool, n_test=4, n_train=0, durations=durations)
    assert len(result) == 4 and all(split == "test" for _, split in result)
    assert all(durations[s.source_id] >= 3.0 for s, _ in result)


def test_select_too_few_speakers_and_sources() -> None:
    pool = _pool(1, 1, 5)
    with pytest.raises(SourceError, match="2 speaker"):
        select_sources(pool, n_test=4, n_train=1, durations=_durations(pool))
    pool = _pool(2, 2, 3)
    with pytest.raises(SourceError, match="train split needs 50"):
        select_sources(pool, n_test=2, n_train=50, durations=_durations(pool))
    with pytest.raises(SourceError, match="qualify"):
        select_sources(pool, n_test=2, n_train=1, durations=_durations(pool, 1.0))


def test_select_unknown_gender_and_real_durations(tmp_path: Path) -> None:
    for spk in ("a", "b", "c"):
        for n in range(3):
            _write(tmp_path / spk / f"{spk}{n}.wav", seconds=3.5 if n else 0.5)
    pool = resolve_sources(f"folder:{tmp_path}")
    result = select_sources(pool, n_test=2, n_train=2)
    _check_split(result)
    assert all(sf.info(s.path).duration >= 3.0 for s, _ in result)


# --- builtin ------------------------------------------------------------------------------


def test_harvard_sentences_bundled() -> None:
    sentences = harvard_sentences()
    assert len(sentences) >= 120
    assert sentences[0].text == "The birch canoe slid on the smooth planks."
    assert len({(s.list_number, s.index) for s in sentences}) == len(sentences)


def test_builtin_resolve_is_cheap_and_lazy(tmp_path: Path) -> None:
    sources = resolve_sources("builtin", cache_dir=tmp_path)
    assert len(sources) == 8 * len(harvard_sentences())
    assert {s.gender for s in sources} == {"F", "M"}
    assert len({s.speaker_id for s in sources}) == 8
    assert not (tmp_path / "builtin").exists()
    pairs = resolve_sources("builtin:2", cache_dir=tmp_path)
    assert pairs[0].source_id.endswith("h01-01+02") and pairs[0].text_id == "harvard-1-1+2"


def test_builtin_render_f0_and_cache(tmp_path: Path) -> None:
    import parselmouth

    sources = builtin_sources(tmp_path, speakers=["builtin-f2", "builtin-m2"], max_sentences=2)
    assert len(sources) == 4
    ensure_rendered(sources)
    f0: dict[str, list[float]] = {}
    for src in sources:
        audio, sr = sf.read(src.path)
        assert sr == 22050 and sf.info(src.path).subtype == "PCM_16"
        assert abs(np.max(np.abs(audio)) - 10 ** (-3 / 20)) < 0.01
        lead = audio[: int(0.25 * sr)]
        assert np.max(np.abs(lead)) < 0.01  # padded silence before speech
        pitch = parselmouth.Sound(audio, sr).to_pitch_ac(pitch_floor=60, pitch_ceiling=500)
        freq = pitch.selected_array["frequency"]
        f0.setdefault(src.speaker_id, []).append(float(np.median(freq[freq > 0])))
    female, male = np.median(f0["builtin-f2"]), np.median(f0["builtin-m2"])
    assert 165 <= female <= 255 and 85 <= male <= 155 and female > male * 1.4
    mtimes = [os.stat(s.path).st_mtime_ns for s in sources]
    again = builtin_sources(
        tmp_path, speakers=["builtin-f2", "builtin-m2"], max_sentences=2, render=True
    )
    assert again == sources
    assert [os.stat(s.path).st_mtime_ns for s in again] == mtimes


# --- speaker table, usable count and skipped files (`vocalgrad sources`) ------------------


def _corpus(root: Path) -> Path:
    """Two speakers with real speech (ARCTIC, 4 s), a 0-byte WAV, a 1 s clip of it, a headerless
    dump and a text file: what a real corpus folder holds."""
    from conftest import arctic_path

    speech, sr = sf.read(arctic_path(), dtype="float32")
    for i, speaker in enumerate(("ann", "bob")):
        for k in range(2):
            path = root / speaker / f"{speaker}-{k}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            sf.write(path, speech * (0.5 + 0.1 * k + 0.05 * i), sr)  # no two files alike
    (root / "ann" / "empty.wav").write_bytes(b"")
    sf.write(root / "bob" / "short.wav", speech[:sr], sr)
    (root / "bob" / "take.raw").write_bytes(np.zeros(16000, np.int16).tobytes())
    (root / "notes.txt").write_text("session notes")
    return root


def test_folder_reads_speaker_genders_from_a_speaker_table(tmp_path: Path) -> None:
    """A folder could not declare genders, so the gender-balanced test split the own-corpus
    page describes could not happen."""
    root = _corpus(tmp_path / "corpus")
    assert {s.gender for s in resolve_sources(f"folder:{root}")} == {None}
    (root / "speakers.csv").write_text("speaker,gender\nann,female\nbob,M\nzed,\n")
    by_speaker = {s.speaker_id: s.gender for s in resolve_sources(f"folder:{root}")}
    assert by_speaker == {"ann": "F", "bob": "M"}
    # with genders known, selection balances the test split (test_select_disjoint_and_gender...)
    (root / "speakers.csv").unlink()
    (root / "speakers.tsv").write_text("Speaker\tGender\nann\tF\nbob\tX\n")
    with pytest.raises(SourceError, match=r"speakers.tsv:3: gender 'x' of 'bob' is not understood"):
        resolve_sources(f"folder:{root}")
    (root / "speakers.tsv").write_text("name\tsex\nann\tF\n")
    with pytest.raises(
        SourceError, match="needs a header line with the columns speaker and gender"
    ):
        resolve_sources(f"folder:{root}")
    (root / "speakers.csv").write_text("speaker,gender\n")
    with pytest.raises(SourceError, match="both speakers.csv and speakers.tsv"):
        resolve_sources(f"folder:{root}")


def test_sources_counts_what_a_build_can_use_and_names_skipped_files(tmp_path, capsys) -> None:
    """`sources` counted a 0-byte file and a 1 s file as usable and skipped a `.raw` file
    without a word: it now applies the build's checks and reports what it skipped, by reason."""
    from vocalgrad.cli import main

    root = _corpus(tmp_path / "corpus")
    assert main(["sources", f"folder:{root}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "6 sources, 2 speakers, 6 distinct texts, gender: {'?': 6}"
    assert out[1] == "usable by a build: 4 of 6 (at least 2 s, readable, speech)"
    refused = {line.split(": ")[0]: line for line in out if line.startswith("  refused")}
    assert refused["  refused folder/ann/empty.wav"].endswith(": empty file (0 bytes)")
    assert out[2] == "  refused: 1 empty file, 1 too short"
    assert "1.00 s long; a build needs at least 2 s" in refused["  refused folder/bob/short.wav"]
    skipped = [line for line in out if line.startswith("skipped")]
    assert skipped == [
        "skipped 1 file(s), no header (.raw): its rate and encoding would be guesses; convert it "
        "to WAV, e.g. `sox -t raw -r 16000 -e signed -b 16 -c 1 x.raw x.wav`: bob/take.raw",
        "skipped 1 file(s), not an audio format it reads (WAV, FLAC, Ogg, Opus, MP3, AIFF, AU, "
        "CAF, W64, RF64, NIST SPHERE): notes.txt",
    ]
    assert main(["sources", f"folder:{root}", "--min-duration", "0.5", "--no-check"]) == 0
    assert "usable" not in capsys.readouterr().out
    assert main(["sources", f"folder:{root}", "--check-limit", "3"]) == 0  # a large corpus
    assert "usable by a build: 2 of the first 3 checked of 6 (--check-limit 0 checks all)" in (
        capsys.readouterr().out
    )
    assert main(["sources", f"folder:{root}", "--min-duration", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "(at least 0.5 s" in out and "needs at least" not in out  # long enough now


def test_refusals_are_counted_by_kind() -> None:
    """`sources` prints one count per kind of refusal, most first, so a long list hidden
    under "... and N more refused" still says why."""
    from vocalgrad.sources.check import EMPTY_FILE, refusal_counts, refusal_kind

    refused = {
        "a": "1.00 s long; a build needs at least 2 s (min_duration_s)",
        "b": "0.50 s long; a build needs at least 2 s (min_duration_s)",
        "c": EMPTY_FILE,
        "d": "unreadable: Format not recognised",
        "e": "silent (peak 1.0e-06)",
        "f": "not speech: a noise-like spectrum (median flatness 0.80)",
    }
    assert refusal_kind(refused["d"]) == "unreadable"
    assert refusal_counts(refused) == (
        "2 too short, 1 empty file, 1 not speech, 1 silent, 1 unreadable"
    )

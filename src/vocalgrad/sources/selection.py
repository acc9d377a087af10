"""Pick test and train utterances so the two splits share neither speakers nor texts.

Protocol: the test split takes ``per_speaker_test`` utterances from each of
``ceil(n_test / per_speaker_test)`` speakers, half female and half male whenever both genders
are known in the pool (speakers of unknown gender are then left out of test). The train split
round-robins over all other speakers and skips every utterance whose ``text_id`` occurs in
the test split. Utterances shorter than ``min_duration_s`` are never chosen.

Durations come from ``durations`` when given, else from the file header. Lazily rendered
sources (builtin TTS, tones, music) whose files do not exist yet are rendered
(``schemes.ensure_rendered``) at the moment their
duration is needed: candidates are visited lazily in seeded random order, so only what is
looked at gets synthesised, and every selected source exists on disk afterwards.

The result depends only on the set of sources and the seed, not on the input order.

Before any of this, `drop_duplicates` keeps one of each set of byte-identical audio files:
the same recording under two names (in two speakers' folders) would otherwise be picked for
both splits.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable

import numpy as np
import soundfile as sf

from vocalgrad.errors import SourceError
from vocalgrad.signal.kinds import SPEECH
from vocalgrad.sources.base import Source
from vocalgrad.sources.schemes import ensure_rendered


def select_sources(
    sources: Iterable[Source],
    *,
    n_test: int,
    n_train: int,
    min_duration_s: float = 3.0,
    per_speaker_test: int = 2,
    seed: int = 0,
    durations: dict[str, float] | None = None,
) -> list[tuple[Source, str]]:
    """Return (source, split) pairs, test first, each split sorted by source_id."""
    if n_test < 1 or per_speaker_test < 1 or n_train < 0:
        raise SourceError(
            f"need n_test >= 1, per_speaker_test >= 1 and n_train >= 0 "
            f"(got {n_test}, {per_speaker_test}, {n_train})"
        )
    pool = sorted(sources, key=lambda s: s.source_id)
    ids = [s.source_id for s in pool]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise SourceError(
            f"source id {dup!r} occurs more than once; resolve each source spec only once"
        )
    rng = np.random.default_rng(seed)
    by_speaker: dict[str, list[Source]] = {}
    for src in pool:
        by_speaker.setdefault(src.speaker_id, []).append(src)
    speakers = [sorted(by_speaker)[i] for i in rng.permutation(len(by_speaker))]
    order = {
        spk: [by_speaker[spk][i] for i in rng.permutation(len(by_speaker[spk]))]
        for spk in sorted(by_speaker)
    }
    n_test_speakers = math.ceil(n_test / per_speaker_test)
    needed = n_test_speakers + (1 if n_train > 0 else 0)
    if len(speakers) < needed:
        group = "speaker" if all(s.kind == SPEECH for s in pool) else "source group"
        raise SourceError(
            f"{len(speakers)} {group}(s) available ({len(pool)} sources) but {n_test} test "
            f"sources at {per_speaker_test} per {group} need {n_test_speakers} test {group}(s)"
            + (f" plus at least one train {group}" if n_train > 0 else "")
            + f"; add {group}s, lower n_test (--n-test) or raise per_speaker_test "
            "(--per-speaker-test)"
        )
    long_enough = _DurationCheck(durations, min_duration_s)

    test = _pick_test(speakers, order, n_test, per_speaker_test, n_test_speakers, long_enough, rng)
    test_speakers = {s.speaker_id for s in test}
    test_texts = {s.text_id for s in test}
    train = _pick_train(
        [s for s in speakers if s not in test_speakers], order, test_texts, n_train, long_enough
    )
    return [(s, "test") for s in sorted(test, key=lambda s: s.source_id)] + [
        (s, "train") for s in sorted(train, key=lambda s: s.source_id)
    ]


def drop_duplicates(
    sources: Iterable[Source],
) -> tuple[list[Source], dict[str, str]]:
    """The sources with byte-identical audio files kept once: the same recording under two
    names would otherwise land in the test and the train split, or count as two speakers.

    Of each set of identical files the source with the smallest id is kept. Only files of
    equal size are read (a corpus of distinct files costs one `stat` a file); files not on
    disk yet (builtin speech, synthesised on demand and distinct by construction) and empty
    files (refused by the speech check anyway) are left as they are.

    Parameters
    ----------
    sources : iterable of Source
        What a source spec resolved to.

    Returns
    -------
    kept : list of Source
        The sources in their given order, duplicates left out.
    dropped : dict of str to str
        Source id of each left-out duplicate -> the id of the source kept in its place.
    """
    pool = list(sources)
    by_size: dict[int, list[Source]] = {}
    for src in sorted(pool, key=lambda s: s.source_id):
        try:
            size = os.stat(src.path).st_size
        except OSError:
            continue
        if size:
            by_size.setdefault(size, []).append(src)
    dropped: dict[str, str] = {}
    for same_size in by_size.values():
        if len(same_size) < 2:
            continue
        first: dict[str, str] = {}
        for src in same_size:
            with open(src.path, "rb") as f:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
            if digest in first:
                dropped[src.source_id] = first[digest]
            else:
                first[digest] = src.source_id
    return [s for s in pool if s.source_id not in dropped], dropped


def duplicates_note(dropped: dict[str, str]) -> str:
    """One line on the duplicates `drop_duplicates` left out ("" when none)."""
    if not dropped:
        return ""
    example, kept = next(iter(sorted(dropped.items())))
    return (
        f"{len(dropped)} duplicate source file(s) left out (byte-identical audio under another "
        f"name, e.g. {example} = {kept})"
    )


class _DurationCheck:
    """Memoised 'is this source at least min_duration_s long', rendering builtin files on demand."""

    def __init__(self, durations: dict[str, float] | None, min_duration_s: float) -> None:
        self.durations = dict(durations or {})
        self.min_duration_s = min_duration_s
        self.unreadable: list[str] = []

    def __call__(self, src: Source) -> bool:
        if src.source_id not in self.durations:
            self.durations[src.source_id] = self._measure(src)
        return self.durations[src.source_id] >= self.min_duration_s

    def _measure(self, src: Source) -> float:
        ensure_rendered([src])  # no-op for existing files; SourceError for missing, unrenderable
        try:
            return float(sf.info(src.path).duration)
        except (sf.LibsndfileError, RuntimeError) as err:
            self.unreadable.append(f"{src.path} ({err})")
            return 0.0

    def note(self) -> str:
        if not self.unreadable:
            return ""
        return f"; {len(self.unreadable)} unreadable file(s), e.g. {self.unreadable[0]}"


def _pick_test(
    speakers: list[str],
    order: dict[str, list[Source]],
    n_test: int,
    per_speaker: int,
    n_speakers: int,
    long_enough: _DurationCheck,
    rng: np.random.Generator,
) -> list[Source]:
    gender = {spk: order[spk][0].gender for spk in speakers}
    known = {g for g in gender.values() if g in ("F", "M")}
    if known == {"F", "M"}:
        n_f = n_speakers // 2 + (n_speakers % 2 if rng.random() < 0.5 else 0)
        quotas = [("F", n_f), ("M", n_speakers - n_f)]
    else:
        quotas = [(None, n_speakers)]
    chosen: list[Source] = []
    for want_gender, quota in quotas:
        pool = [s for s in speakers if want_gender is None or gender[s] == want_gender]
        picked = 0
        for spk in pool:
            if picked == quota:
                break
            take = min(per_speaker, n_test - len(chosen) - (quota - picked - 1) * per_speaker)
            clips = _first_n(order[spk], take, long_enough)
            if len(clips) == take:
                chosen.extend(clips)
                picked += 1
        if picked < quota:
            label = f"{want_gender} " if want_gender else ""
            raise SourceError(
                f"test split needs {quota} {label}speaker(s) with {per_speaker} source(s) of at "
                f"least {long_enough.min_duration_s} s each, but only {picked} of {len(pool)} "
                f"{label}speaker(s) qualify{long_enough.note()}; lower n_test or min_duration_s, "
                "or add speakers"
            )
    return chosen


def _pick_train(
    speakers: list[str],
    order: dict[str, list[Source]],
    test_texts: set[str],
    n_train: int,
    long_enough: _DurationCheck,
) -> list[Source]:
    queues = {spk: [s for s in order[spk] if s.text_id not in test_texts] for spk in speakers}
    chosen: list[Source] = []
    active = list(speakers)
    while len(chosen) < n_train and active:
        still = []
        for spk in active:
            if len(chosen) == n_train:
                break
            queue = queues[spk]
            while queue:
                src = queue.pop(0)
                if long_enough(src):
                    chosen.append(src)
                    break
            if queue:
                still.append(spk)
        active = still
    if len(chosen) < n_train:
        raise SourceError(
            f"train split needs {n_train} source(s) but only {len(chosen)} from {len(speakers)} "
            f"non-test speaker(s) are at least {long_enough.min_duration_s} s long and share no "
            f"text with the test split{long_enough.note()}; lower n_train or min_duration_s, or "
            "add sources"
        )
    return chosen


def _first_n(candidates: list[Source], n: int, long_enough: _DurationCheck) -> list[Source]:
    out = []
    for src in candidates:
        if len(out) == n:
            break
        if long_enough(src):
            out.append(src)
    return out

"""Reference listeners: chance, fixed answers, an ideal observer that measures the audio,
and a shortcut listener that answers from cues other than the change over time.

They bracket every model's score: `random` and the fixed answers show what bias alone
earns (50% accuracy, d' = 0), and the ideal observer is the acoustic ceiling: what a
listener that really measures the signal can reach on this dataset. The shortcut listener
is what a listener can earn without hearing the change at all (overall level, duration,
silences, the first and last 300 ms): on a clean dataset it stays at chance.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import librosa
import numpy as np

from vocalgrad import dimensions
from vocalgrad.audio import load_audio, resample
from vocalgrad.dataset import load_references, load_rows
from vocalgrad.errors import ConfigError
from vocalgrad.listeners.base import Listener, Request
from vocalgrad.signal.analysis import mel_centres, mel_spectrogram

REVERSED_SUFFIX = "#reversed"
MFCC_N_FFT = 2048  # librosa's default, which the MFCC alignment has always used


class RandomListener(Listener):
    """Answers by a coin seeded from (seed, item id): same answer on every rerun."""

    can_score = True
    channels = 2  # never listens, so loses nothing

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.listener_id = "baseline:random"
        self.revision = f"seed{seed}"

    def _draw(self, request: Request) -> float:
        digest = hashlib.sha256(f"{self.seed}|{request.item_id}|{request.prompt.variant}".encode()).digest()
        return np.random.default_rng(list(digest[:8])).standard_normal()

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [r.prompt.options[0] if self._draw(r) > 0 else r.prompt.options[1] for r in requests]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            x = self._draw(r)
            first, second = r.prompt.options[:2]
            out.append({first: float(x / 2), second: float(-x / 2), **{o: -10.0 for o in r.prompt.options[2:]}})
        return out


class ConstantListener(Listener):
    """Always gives the same answer: the pure-bias reference (|criterion| large, d' = 0)."""

    can_score = True
    channels = 2  # never listens, so loses nothing

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.listener_id = f"baseline:always-{answer}"
        self.revision = "1"

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [next((o for o, label in r.prompt.label_of.items() if label == self.answer), self.answer)
                for r in requests]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        return [{o: (0.0 if label == self.answer else -5.0) for o, label in r.prompt.label_of.items()}
                for r in requests]


class IdealObserver(Listener):
    """Answers from acoustic measurement of the clip against its unprocessed source.

    Deliberately independent of the builder's verification code: librosa features
    (YIN F0, RMS, MFCC alignment, spectral roll-off, envelope modulation) compared between
    the first and last thirds of the clip, where the builder uses Praat and 20% windows.
    It is an upper reference for what the audio supports, not a model of a human.

    Held formats: a comparison item is answered from the held value of each part (second
    minus first), a recognition clip from its held value against the median of its
    (split, category, magnitude) family (`_boundary`).
    """

    can_score = True
    listener_id = "baseline:ideal"
    revision = "3"  # 2: held distance from its reverberant-to-direct ratio, held stereo from straight ahead;
    # 3: clarity band by band
    channels = 2

    def __init__(self, dataset: str | Path) -> None:
        self.root = Path(dataset)
        self.references = load_references(self.root)
        if not self.references:
            raise ConfigError(f"{self.root}: the ideal observer needs the dataset's references/ folder")
        self.rows = {r["item_id"]: r for r in load_rows(self.root)}  # for requests without source_id
        self._ref_cache: dict[str, np.ndarray] = {}
        self._boundaries: dict[tuple, float] = {}

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            evidence = self.evidence(r)
            scores = {"increase": evidence / 2, "decrease": -evidence / 2}
            out.append(by_option(r, scores, -abs(evidence) - 1.0))
        return out

    def evidence(self, request: Request) -> float:
        """Signed decision statistic: > 0 means the category increased."""
        clip = request.target_audio
        if clip is None or not np.any(clip):
            return 0.0
        base_id = request.item_id.removesuffix(REVERSED_SUFFIX)
        row = self.rows.get(base_id)
        source_id = request.source_id or (row or {}).get("source_id")
        if source_id not in self.references:
            raise ConfigError(f"item {base_id}: no reference source in {self.root}")
        ref = self._reference(source_id)
        reversed_ = request.item_id.endswith(REVERSED_SUFFIX)
        if reversed_:
            ref = ref[::-1].copy()
        fmt = (row or {}).get("format") or "gradual"
        if fmt == "comparison":
            return self._compare(request.prompt.category, clip, ref, row, reversed_)
        if fmt == "recognition":
            return self._held(request.prompt.category, clip, ref) - self._boundary(row)
        return float(_EVIDENCE[request.prompt.category](clip, ref, self.sample_rate))

    def _compare(self, category: str, clip: np.ndarray, ref: np.ndarray, row: dict, reversed_: bool) -> float:
        """The second part's held value minus the first's (gap cut out)."""
        scale = self.sample_rate / row["sample_rate"]
        bounds = [(int(round(a * scale)), int(round(b * scale))) for a, b in row["part_bounds"]]
        if reversed_:  # the file played backwards: parts mirrored and in the other order
            bounds = [(len(clip) - b, len(clip) - a) for a, b in reversed(bounds)]
        first, second = (self._held(category, clip[a:b], ref) for a, b in bounds)
        return second - first

    def _held(self, category: str, clip: np.ndarray, ref: np.ndarray) -> float:
        """Where a held clip lies on the dimension, relative to its source: the gradual
        evidence of the source (at the clip's level, unless level is the target) followed
        by the clip, so the first third sees no change and the last third the held value."""
        if category in _HELD:
            return float(_HELD[category](clip, ref, self.sample_rate))
        gain = 1.0
        if dimensions.get(category).SPEC.loudness_neutral:
            n = min(len(clip), len(ref))
            gain = float(np.dot(clip[:n], ref[:n]) / max(np.dot(ref[:n], ref[:n]), 1e-12))
        lead = gain * ref if clip.ndim == 1 else np.repeat(ref[:, None], clip.shape[1], axis=1)  # straight ahead
        return float(_EVIDENCE[category](np.concatenate([lead, clip]), np.concatenate([ref, ref]),
                                         self.sample_rate))

    def _boundary(self, row: dict) -> float:
        """The category boundary of a recognition family (split, category, magnitude): the
        median held value of its clips. Both endpoints are built for every source, so half
        of the family lies on each side; no label is read."""
        key = (row["split"], row["category"], row["magnitude"])
        if key not in self._boundaries:
            values = []
            for member in self.rows.values():
                if (member["split"], member["category"], member["magnitude"]) == key:
                    audio, sr = load_audio(member["path"])
                    ref = self._reference(member["source_id"])
                    values.append(self._held(member["category"], resample(audio, sr, self.sample_rate), ref))
            self._boundaries[key] = float(np.median(values))
        return self._boundaries[key]

    def _reference(self, source_id: str) -> np.ndarray:
        if source_id not in self._ref_cache:
            audio, sr = load_audio(self.references[source_id]["path"])
            self._ref_cache = {source_id: resample(audio, sr, self.sample_rate)}
        return self._ref_cache[source_id]


def by_option(request: Request, scores: dict[str, float], low: float) -> dict[str, float]:
    """Scores by label (increase / decrease) as scores by the prompt's answer words."""
    return {o: float(scores.get(label, low)) for o, label in request.prompt.label_of.items()}


def _thirds(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(x) // 3
    return x[:n], x[-n:]


def _db(x: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.maximum(x, 1e-12))


def _rms(y: np.ndarray) -> np.ndarray:
    return librosa.feature.rms(y=y, frame_length=512, hop_length=160, center=False)[0]


def _active(ref: np.ndarray) -> np.ndarray:
    level = _rms(ref)
    return level > level.max() * 10 ** (-30 / 20)


def _speech_thirds(values: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last thirds of the frames where the source has speech."""
    n = min(len(values), len(active))
    return _thirds(values[:n][active[:n]])


def _volume(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    n = min(len(clip), len(ref))
    diff = _db(_rms(clip[:n]) ** 2) - _db(_rms(ref[:n]) ** 2)
    first, last = _speech_thirds(diff, _active(ref[:n]))
    return float(np.median(last) - np.median(first))


def _pitch(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    n = min(len(clip), len(ref))
    f_clip = librosa.yin(clip[:n], fmin=60, fmax=400, sr=sr, frame_length=1024, hop_length=160)
    f_ref = librosa.yin(ref[:n], fmin=60, fmax=400, sr=sr, frame_length=1024, hop_length=160)
    level = librosa.feature.rms(y=ref[:n], frame_length=1024, hop_length=160)[0]
    m = min(len(f_clip), len(f_ref), len(level))
    voiced = level[:m] > level.max() * 10 ** (-25 / 20)
    diff = 12 * np.log2(f_clip[:m] / f_ref[:m])
    first, last = _thirds(diff[voiced])
    return float(np.median(last) - np.median(first))


@lru_cache(maxsize=4)
def _mel_basis(sr: int, n_fft: int) -> np.ndarray:
    return librosa.filters.mel(sr=sr, n_fft=n_fft)


def _clip_mfcc(y: np.ndarray, sr: int) -> np.ndarray:
    """`librosa.feature.mfcc(y=y, sr=sr, n_mfcc=13, hop_length=160)`, the same numbers: its
    steps, but the mel filterbank applied by a matrix product instead of librosa's
    `np.einsum` (4x slower on numpy 2 and the ideal observer's largest cost)."""
    power = np.abs(librosa.stft(y, n_fft=MFCC_N_FFT, hop_length=160)) ** 2.0
    return librosa.feature.mfcc(S=librosa.power_to_db(_mel_basis(sr, MFCC_N_FFT) @ power), n_mfcc=13)


_SOURCE_MFCC: dict[tuple[bytes, int], np.ndarray] = {}


def _mfcc(y: np.ndarray, sr: int, memo: bool = False) -> np.ndarray:
    """`_clip_mfcc`; with `memo`, kept for the last few signals (a source is the reference of
    every clip made from it, forwards and reversed)."""
    if not memo:
        return _clip_mfcc(y, sr)
    key = (hashlib.sha1(np.ascontiguousarray(y).tobytes()).digest(), sr)
    if key not in _SOURCE_MFCC:
        if len(_SOURCE_MFCC) >= 4:
            _SOURCE_MFCC.pop(next(iter(_SOURCE_MFCC)))
        _SOURCE_MFCC[key] = _clip_mfcc(y, sr)
    return _SOURCE_MFCC[key]


def _speed(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Align MFCCs by DTW; compare the source-over-clip time slope in first and last thirds."""
    a = _mfcc(ref, sr, memo=True)
    b = _mfcc(clip, sr)
    _, path = librosa.sequence.dtw(X=a, Y=b, metric="cosine")
    path = path[::-1]
    first, last = _thirds(path)
    slopes = [np.polyfit(p[:, 1], p[:, 0], 1)[0] for p in (first, last)]
    return float(np.log(slopes[1] / slopes[0]))


def _held_speed(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Log rate of a held clip: the source-over-clip time slope of the MFCC alignment over the
    source's speech frames (the silences around it, and any padding, left out). The thirds of
    `_speed` cannot be used: padding after a fast part would fill the last third."""
    a = _mfcc(ref, sr, memo=True)
    b = _mfcc(clip, sr)
    _, path = librosa.sequence.dtw(X=a, Y=b, metric="cosine")
    active = _active(ref)
    speech = active[np.minimum(path[:, 0], len(active) - 1)]
    points = path[speech] if speech.sum() >= 5 else path
    return float(np.log(np.polyfit(points[:, 1], points[:, 0], 1)[0]))


def _added(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Energy of what was added (noise, reverb, distortion error), late vs early, in dB."""
    n = min(len(clip), len(ref))
    gain = np.dot(clip[:n], ref[:n]) / max(np.dot(ref[:n], ref[:n]), 1e-12)
    added = _rms(clip[:n] - gain * ref[:n]) ** 2
    first, last = _thirds(added)
    return float(_db(np.array([last.mean()]))[0] - _db(np.array([first.mean()]))[0])


def _clarity(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """High band kept relative to the source, band by band: the mean over the mel bands
    above 1 kHz where the source stands 10 dB clear of its floor of the clip/source level
    (dB), re the 150-1000 Hz band. Rising means clearer. Band by band, so the 5-8 kHz bands a
    5 kHz low-pass removes count as much as the loud 1-3 kHz ones (summed energy barely
    moved: the ideal answered the low tier on recordings at 0.52)."""
    n = min(len(clip), len(ref))
    c, r = mel_spectrogram(clip[:n], sr), mel_spectrogram(ref[:n], sr)
    m = min(c.shape[1], r.shape[1])
    c, r = c[:, :m], r[:, :m]
    centres = mel_centres(sr)
    floor = np.percentile(r, 1, axis=1, keepdims=True)
    clear = r > floor * 10.0
    low_band = (centres >= 150) & (centres < 1000)
    offset = _db(c[low_band].sum(axis=0)) - _db(r[low_band].sum(axis=0))
    high = clear & (centres >= 1000)[:, None]
    kept = np.where(high, np.clip(_db(c) - _db(r), -40.0, 10.0), 0.0)
    counted = high.sum(axis=0)
    per_frame = kept.sum(axis=0) / np.maximum(counted, 1) - offset
    active = _active(ref[:n])[:m] & (counted > 0)
    first, last = _thirds(per_frame[active])
    return float(np.median(last) - np.median(first))


def _vibration(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Variance of the clip/source envelope ratio: tremolo makes it fluctuate."""
    n = min(len(clip), len(ref))
    c = librosa.feature.rms(y=clip[:n], frame_length=160, hop_length=80, center=False)[0]
    r = librosa.feature.rms(y=ref[:n], frame_length=160, hop_length=80, center=False)[0]
    ok = r > r.max() * 10 ** (-30 / 20)
    ratio = np.log(np.maximum(c[ok], 1e-9) / r[ok])
    first, last = _thirds(ratio)
    return float(np.std(last) - np.std(first))


def _brightness(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Level of 2-6 kHz re 150-800 Hz in the clip over the source: rising means brighter."""
    n = min(len(clip), len(ref))
    spec_c = np.abs(librosa.stft(clip[:n], n_fft=512, hop_length=160)) ** 2
    spec_r = np.abs(librosa.stft(ref[:n], n_fft=512, hop_length=160)) ** 2
    freqs = librosa.fft_frequencies(sr=sr, n_fft=512)
    high, low = (freqs >= 2000) & (freqs <= 6000), (freqs >= 150) & (freqs <= 800)
    tilt = (_db(spec_c[high].sum(axis=0)) - _db(spec_c[low].sum(axis=0))
            - _db(spec_r[high].sum(axis=0)) + _db(spec_r[low].sum(axis=0)))
    first, last = _speech_thirds(tilt, _active(ref[:n]))
    return float(np.median(last) - np.median(first))


def _tract_length(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Log-frequency centroid (200-4000 Hz) of the clip re the source: formants going down
    (a longer tract) pull it down, so a falling centroid means "increase"."""
    n = min(len(clip), len(ref))
    freqs = librosa.fft_frequencies(sr=sr, n_fft=512)
    band = (freqs >= 200) & (freqs <= 4000)
    octaves = np.log2(freqs[band])

    def centroid(y: np.ndarray) -> np.ndarray:
        power = np.abs(librosa.stft(y, n_fft=512, hop_length=160))[band] ** 2
        return octaves @ power / np.maximum(power.sum(axis=0), 1e-12)

    first, last = _speech_thirds(centroid(clip[:n]) - centroid(ref[:n]), _active(ref[:n]))
    return float(np.median(first) - np.median(last))


def _aperiodic(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """What the clip holds that the source does not, per frame: 1/rho^2 - 1 with rho the
    clip/source correlation in 32 ms frames (level-free), in dB, late vs early speech."""
    n = min(len(clip), len(ref))
    c = librosa.util.frame(clip[:n].astype(np.float64), frame_length=512, hop_length=160)
    r = librosa.util.frame(ref[:n].astype(np.float64), frame_length=512, hop_length=160)
    rho2 = (c * r).sum(axis=0) ** 2 / np.maximum((c * c).sum(axis=0) * (r * r).sum(axis=0), 1e-24)
    added = _db(1.0 / np.maximum(rho2, 1e-12) - 1.0)
    first, last = _speech_thirds(added, _active(ref[:n]))
    return float(np.median(last) - np.median(first))


def _stereo(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Right-over-left level above 1.5 kHz (dB), late third minus early third of the
    source's speech frames: moving right raises it. No second channel, no evidence."""
    if clip.ndim != 2 or clip.shape[1] < 2:
        return 0.0
    spec = [np.abs(librosa.stft(np.ascontiguousarray(clip[:, c]), n_fft=512, hop_length=160)) ** 2 for c in (0, 1)]
    high = librosa.fft_frequencies(sr=sr, n_fft=512) > 1500
    ild = _db(spec[1][high].sum(axis=0)) - _db(spec[0][high].sum(axis=0))
    first, last = _speech_thirds(ild, _active(ref[: len(clip)]))
    return float(np.median(last) - np.median(first))


def _distance(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Level re the source falling: moving away (the room's reverb fills in, but less)."""
    return -_volume(clip, ref, sr)


class _ProbabilityListener(Listener):
    """A baseline that answers from p(increase) (`p_increase`, per request): it generates the
    likelier option and scores both options by their log-probabilities."""

    can_score = True

    def p_increase(self, request: Request) -> float:
        raise NotImplementedError

    def generate(self, requests: Sequence[Request], max_new_tokens: int = 16) -> list[str]:
        return [max(s, key=s.get) for s in self.score_choices(requests)]

    def score_choices(self, requests: Sequence[Request]) -> list[dict[str, float]]:
        out = []
        for r in requests:
            p = float(np.clip(self.p_increase(r), 1e-6, 1 - 1e-6))
            scores = {"increase": float(np.log(p)), "decrease": float(np.log1p(-p))}
            out.append(by_option(r, scores, min(scores.values()) - 5.0))
        return out


class ShortcutListener(_ProbabilityListener):
    """Answers from direction-invariant cues only (`vocalgrad.stimuli.audit.clip_cues`).

    Per category it fits the shortcut audit's logistic regression on the train split's
    changing clips, using every cue family except the dimension's target cues, and answers
    P(increase) from the clip's cues. It never sees the clip's course over time, so any
    accuracy above chance is a shortcut the dataset leaves open (reversed controls are
    answered from their audio like any other clip).
    """

    can_score = True
    listener_id = "baseline:shortcut"

    def __init__(self, dataset: str | Path, workers: int = 1) -> None:
        from vocalgrad.stimuli import audit

        self.root = Path(dataset)
        if not (self.root / "train" / "metadata.jsonl").is_file():
            raise ConfigError(
                f"{self.root}: baseline:shortcut learns its cues from the train split, and this "
                "dataset has none (train/metadata.jsonl); build it with --n-train > 0"
            )
        rows = load_rows(self.root, splits=("train",))
        changing = [r for r in rows if r["direction"] in ("increase", "decrease")]
        if not changing:
            raise ConfigError(f"{self.root}: the train split has no increase/decrease clips to learn cues from")
        rates = Counter(int(r["sample_rate"]) for r in rows)
        self.sample_rate = rates.most_common(1)[0][0]
        # answers depend on what was learnt: the revision names the training clips
        learnt = hashlib.sha256("\n".join(sorted(
            f"{r['item_id']}:{r.get('audio_sha256') or ''}" for r in changing)).encode()).hexdigest()
        self.revision = f"cues{audit.CUES_VERSION}-train{learnt[:12]}"
        cues = audit.dataset_cues(self.root, changing, workers=workers)
        self._models = {c: audit.fit_direction_model(c, changing, cues) for c in sorted({r["category"] for r in changing})}
        all_rows = load_rows(self.root)
        self._spans = {r["item_id"]: audit.row_span(r) for r in all_rows}
        self._parts = {r["item_id"]: audit.row_parts(r) for r in all_rows}
        self._cues: dict[str, dict[str, float]] = {}


    def _span(self, item_id: str, duration_s: float) -> tuple[float, float] | None:
        """The item's speech span, mirrored for a time-reversed control."""
        span = self._spans.get(item_id.removesuffix(REVERSED_SUFFIX))
        if span is None or not item_id.endswith(REVERSED_SUFFIX):
            return span
        return duration_s - span[1], duration_s - span[0]

    def p_increase(self, request: Request) -> float:
        """P(increase) from the clip's cues; 0.5 without audio (text-only and silence controls)."""
        from vocalgrad.stimuli.audit import clip_cues

        category = request.prompt.category
        if category not in self._models:
            raise ConfigError(f"baseline:shortcut: the train split of {self.root} has no {category} clips")
        clip = request.target_audio
        if clip is None or not np.any(clip):
            return 0.5
        key = hashlib.sha1(np.ascontiguousarray(clip, dtype=np.float32).tobytes()).hexdigest()
        cues = self._cues.get(key)
        if cues is None:  # the same clip comes back once per prompt variant and option order
            # a reversed control's parts would be mirrored: its layout cues are left to the fill values
            parts = None if request.item_id.endswith(REVERSED_SUFFIX) else self._parts.get(request.item_id)
            cues = clip_cues(clip, self.sample_rate, self._span(request.item_id, len(clip) / self.sample_rate), parts)
            if len(self._cues) >= 4096:
                self._cues.clear()
            self._cues[key] = cues
        return self._models[category].p_increase(cues)


# Held clips (comparison, recognition) where the gradual evidence cannot be reused (see
# `IdealObserver._held`): the held value itself.
def _held_distance(clip: np.ndarray, ref: np.ndarray, sr: int) -> float:
    """Reverberant-to-direct ratio of a held clip re its source (dB; rises with distance), as
    the distance dimension measures it. A held clip's level re the source mixes the distance
    with the clip's level rove (+-3 dB), which the gradual evidence cancels and a held one
    cannot (recognition read from level alone: 0.71 on the demo-size build)."""
    from vocalgrad.dimensions import get
    from vocalgrad.signal.analysis import Analysis
    from vocalgrad.stimuli.render import held_value

    source = Analysis(ref.astype(np.float32), sr)
    return held_value(get("distance").measure(Analysis(clip.astype(np.float32), sr, span=source.span), source))


_HELD = {"speaking_speed": _held_speed, "distance": _held_distance}

_EVIDENCE = {
    "volume": _volume,
    "voice_pitch": _pitch,
    "speaking_speed": _speed,
    "background_noise": _added,
    "echo": _added,
    "audio_distortion": _added,
    "audio_roughness": _added,
    "voice_clarity": _clarity,
    "voice_vibration": _vibration,
    "brightness": _brightness,
    "vocal_tract_length": _tract_length,
    "breathiness": _aperiodic,
    "distance": _distance,
    "stereo_direction": _stereo,
}


class OneEndObserver(_ProbabilityListener):
    """Answers from one end of the clip only: the dimension's own measure (the builder's
    verification measure, against the heard source) at the start or the end of the speech,
    placed in the population of that end learnt on the train split.

    It never compares the two ends, so what it earns is what an endpoint strategy earns
    without following the change over time: unless the endpoints are roved
    (`rove_endpoints`), the value at one end says which end of the tier it is. Per category
    it measures the train split's changing clips, keeps the end whose values separate the
    labels better, and answers from a logistic regression on that value. Gradual items
    only: a held clip has one value, which recognition asks for by design.
    """

    can_score = True
    listener_id = "baseline:one-end"
    revision = "1"
    channels = 2

    def __init__(self, dataset: str | Path) -> None:
        import json

        self.root = Path(dataset)
        rows = load_rows(self.root)
        self.rows = {r["item_id"]: r for r in rows}
        self.references = load_references(self.root)
        if not self.references:
            raise ConfigError(f"{self.root}: baseline:one-end needs the dataset's references/ folder")
        self.train = [r for r in rows if r["split"] == "train" and r["direction"] in ("increase", "decrease")]
        if not self.train:
            raise ConfigError(f"{self.root}: baseline:one-end learns from the train split's changing clips, "
                              "and this dataset has none; build it with --n-train > 0")
        if any((r.get("format") or "gradual") != "gradual" for r in self.train):
            raise ConfigError("baseline:one-end answers gradual items only (a held clip has one value)")
        build = json.loads((self.root / "build.json").read_text())
        self.seed = int(build["config"]["seed"])
        self.sample_rate = int(build["config"]["sample_rate"])
        self._models: dict[str, tuple[str, object]] = {}
        self._heard: dict[str, object] = {}


    def model(self, category: str) -> tuple[str, object]:
        """(the end read, its logistic regression or a base rate), learnt on first use from
        the train split's clips of `category`, measured as the test clips are."""
        from sklearn.linear_model import LogisticRegression

        if category not in self._models:
            members = [r for r in self.train if r["category"] == category]
            if not members:
                raise ConfigError(f"baseline:one-end: the train split of {self.root} has no {category} clips")
            y = np.array([r["direction"] == "increase" for r in members], dtype=int)
            measured = []
            for r in sorted(members, key=lambda m: m["source_id"]):  # one heard source at a time
                audio, sr = load_audio(r["path"], mono=False)
                measured.append((r, self._measure(category, resample(audio, sr, self.sample_rate), r, False)))
            y = np.array([r["direction"] == "increase" for r, _ in measured], dtype=int)
            best: tuple[float, str, object] | None = None
            for end in ("start", "end"):
                x = np.array([[getattr(m, end)] for _, m in measured], dtype=float)
                finite = np.isfinite(x[:, 0])
                if len(np.unique(y[finite])) < 2:
                    candidate: tuple[float, str, object] = (0.5, end, float(y.mean()))
                else:
                    fitted = LogisticRegression(max_iter=1000).fit(x[finite], y[finite])
                    candidate = (float(fitted.score(x[finite], y[finite])), end, fitted)
                if best is None or candidate[0] > best[0]:
                    best = candidate
            self._models[category] = (best[1], best[2])  # type: ignore[index]
        return self._models[category]

    def _heard_source(self, source_id: str):
        """The source as every clip of it was measured against: the reference plus the
        build's room-tone floor (regenerated from the build seed)."""
        from vocalgrad.signal.analysis import Analysis
        from vocalgrad.stimuli.render import prepare_source, tone_seed_for

        if source_id not in self._heard:
            audio, sr = load_audio(self.references[source_id]["path"])
            clean = Analysis(resample(audio, sr, self.sample_rate), self.sample_rate)
            self._heard = {source_id: prepare_source(clean, tone_seed_for(self.seed, source_id)).heard}
        return self._heard[source_id]

    def _measure(self, category: str, clip: np.ndarray, row: dict, reversed_: bool):
        from vocalgrad.audio import SpeechSpan
        from vocalgrad.signal.analysis import Analysis

        heard = self._heard_source(row["source_id"])
        if reversed_:
            heard = Analysis(np.ascontiguousarray(heard.audio[::-1]), heard.sr)
        span = SpeechSpan(float(row["speech_onset_s"]), float(row["speech_offset_s"]), True)
        return dimensions.get(category).measure(Analysis(clip, self.sample_rate, span=span), heard)

    def p_increase(self, request: Request) -> float:
        """P(increase) from the measure at the category's chosen end; 0.5 without audio."""
        category = request.prompt.category
        end, model = self.model(category)
        clip = request.target_audio
        row = self.rows.get(request.item_id.removesuffix(REVERSED_SUFFIX))
        if clip is None or not np.any(clip) or row is None:
            return 0.5
        if isinstance(model, float):
            return model
        value = float(getattr(self._measure(category, clip, row, request.item_id.endswith(REVERSED_SUFFIX)), end))
        if not np.isfinite(value):
            return 0.5
        return float(model.predict_proba(np.array([[value]]))[0, 1])  # type: ignore[attr-defined]


def from_spec(rest: str, *, dataset: str | Path | None = None, **options: Any) -> Listener:
    """The `baseline:` family: `random[:SEED]`, `always-increase`, `always-decrease`, `ideal`,
    `shortcut`, `one-end` (the last three read the dataset they answer about)."""
    name, _, arg = rest.partition(":")
    if name == "random":
        if arg and not arg.isdigit():
            raise ConfigError(f"baseline:random:{arg}: the seed must be a non-negative integer")
        return RandomListener(seed=int(arg or 0))
    if name in ("always-increase", "always-decrease"):
        return ConstantListener(name.removeprefix("always-"))
    observers = {"ideal": IdealObserver, "shortcut": ShortcutListener, "one-end": OneEndObserver}
    if name in observers:
        if dataset is None:
            raise ConfigError(f"baseline:{name} needs the dataset it answers about")
        return observers[name](dataset)
    raise ConfigError(f"unknown baseline {name!r}; use random, always-increase, always-decrease, "
                      "ideal, shortcut or one-end")

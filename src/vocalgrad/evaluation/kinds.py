"""Speech against other kinds of sound: does a listener fail on speech only, or on any sound?

A listener evaluated on a speech benchmark and on one built from tones or music (the same
dimensions, the same tiers) answers the question the study's beep-only ablation asked. For
each listener, dimension and kind of sound besides speech, `kind_contrasts` compares the
accuracy on speech with the accuracy on that kind over the tiers both were asked at, each
tier weighing alike (a paired difference: same dimension, same tier), with CIs that resample
each kind's own sources (speakers, tone bands, instruments), and labels the pair:

- **speech-specific deficit**: speech accuracy below the other kind's, the CI of the
  difference (speech minus other) wholly below 0;
- **general deficit**: both kinds near chance: each accuracy under NEAR_CHANCE with a CI
  that includes 0.5 (a CI alone would call three sources answered perfectly "near chance");
- neither (an empty label): the listener hears both, or the data cannot tell.

The two kinds come from different recordings, so the difference is unpaired in its items:
its CI resamples the speech sources and the other kind's sources independently (a cluster
bootstrap when both kinds have at least `vocalgrad.stats.BOOTSTRAP_MIN_CLUSTERS` sources,
else a delete-one-source jackknife t-interval whose variance sums the two kinds' and whose
degrees of freedom are the smaller kind's sources minus one; no interval with a single
source on either side).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import SPEECH, row_kind
from vocalgrad.stats import (
    BOOTSTRAP,
    JACKKNIFE,
    NO_CI,
    ci_method_for,
    group_rng,
    jackknife_t_ci,
    leave_one_out_weights,
    resample_weights,
)

SPEECH_SPECIFIC = "speech-specific deficit"
GENERAL = "general deficit"
CHANCE = 0.5
NEAR_CHANCE = 0.6  # an accuracy under this, with a CI including CHANCE, is near chance


@dataclass(frozen=True)
class KindContrast:
    """One listener's accuracy on speech against one other kind of sound, for one dimension.

    Accuracies are means over ``tiers`` of each tier's accuracy (fractions, 0-1); the
    difference is speech minus the other kind. Interval ends are NaN where there is none.

    Attributes
    ----------
    listener : str
        The listener id (as the report names it).
    category : str
        The dimension.
    kind : str
        The other kind of sound ("tone", "music", ...).
    tiers : tuple of str
        The tiers both kinds were asked at.
    n_speech, n_other : int
        Items (changing clips) on speech and on the other kind at those tiers.
    sources_speech, sources_other : int
        Sources (the clusters every CI resamples) of each kind.
    accuracy_speech, accuracy_speech_lo, accuracy_speech_hi : float
        Accuracy on speech (fraction, 0-1) and its 95% CI.
    accuracy_other, accuracy_other_lo, accuracy_other_hi : float
        The same on the other kind.
    difference, difference_lo, difference_hi : float
        Speech minus the other kind (fraction, -1 to 1) and its 95% CI.
    ci_method : str
        How the CIs were computed (`vocalgrad.stats.ci_method_for` of the kind with fewer
        sources; none when no resampling was asked for).
    verdict : str
        SPEECH_SPECIFIC, GENERAL or "" (neither).
    """

    listener: str
    category: str
    kind: str
    tiers: tuple[str, ...]
    n_speech: int
    n_other: int
    sources_speech: int
    sources_other: int
    accuracy_speech: float
    accuracy_speech_lo: float
    accuracy_speech_hi: float
    accuracy_other: float
    accuracy_other_lo: float
    accuracy_other_hi: float
    difference: float
    difference_lo: float
    difference_hi: float
    ci_method: str
    verdict: str

    def to_dict(self) -> dict:
        """The contrast as plain data.

        Returns
        -------
        dict
            Every field by name, ``tiers`` joined with commas (a CSV row).
        """
        return {**asdict(self), "tiers": ",".join(self.tiers)}


@dataclass(frozen=True)
class _Cells:
    """One kind's answers as per-source, per-tier counts: what every CI resamples."""

    correct: np.ndarray  # (sources, tiers)
    total: np.ndarray  # (sources, tiers)

    @property
    def n_sources(self) -> int:
        return self.correct.shape[0]

    def accuracy(self, weights: np.ndarray) -> np.ndarray:
        """Mean over tiers of each tier's accuracy, under each row of source weights (R, G)."""
        right, asked = weights @ self.correct, weights @ self.total
        with np.errstate(invalid="ignore", divide="ignore"):
            per_tier = np.where(asked > 0, right / np.where(asked > 0, asked, 1), np.nan)
        return per_tier.mean(axis=1)


def _cells(rows: Sequence[Mapping], tiers: Sequence[str]) -> _Cells:
    sources = sorted({str(r["source_id"]) for r in rows})
    at = {s: i for i, s in enumerate(sources)}
    column = {t: j for j, t in enumerate(tiers)}
    correct = np.zeros((len(sources), len(tiers)))
    total = np.zeros_like(correct)
    for r in rows:
        i, j = at[str(r["source_id"])], column[r["tier"]]
        total[i, j] += 1
        correct[i, j] += r.get("predicted") == r["direction"]
    return _Cells(correct, total)


def _jackknife(cells: _Cells) -> tuple[np.ndarray, float]:
    """(delete-one-source replicates, their jackknife variance) of a kind's accuracy."""
    replicates = cells.accuracy(leave_one_out_weights(cells.n_sources))
    g = cells.n_sources
    variance = (g - 1) / g * float(np.sum((replicates - replicates.mean()) ** 2))
    return replicates, variance


def _contrast(
    listener: str,
    category: str,
    kind: str,
    speech_rows: Sequence[Mapping],
    other_rows: Sequence[Mapping],
    n_boot: int,
    seed: int,
) -> KindContrast | None:
    tiers = tuple(
        sorted({r["tier"] for r in speech_rows} & {r["tier"] for r in other_rows}, key=str)
    )
    if not tiers:
        return None
    speech_rows = [r for r in speech_rows if r["tier"] in tiers]
    other_rows = [r for r in other_rows if r["tier"] in tiers]
    speech, other = _cells(speech_rows, tiers), _cells(other_rows, tiers)
    acc_s = float(speech.accuracy(np.ones((1, speech.n_sources)))[0])
    acc_o = float(other.accuracy(np.ones((1, other.n_sources)))[0])
    method = ci_method_for(min(speech.n_sources, other.n_sources)) if n_boot > 0 else NO_CI
    nan = float("nan")
    lo_s = hi_s = lo_o = hi_o = lo_d = hi_d = nan
    if method == BOOTSTRAP:
        rng = group_rng(seed, f"kinds|{listener}|{category}|{kind}")
        s = speech.accuracy(resample_weights(rng, n_boot, speech.n_sources).astype(float))
        o = other.accuracy(resample_weights(rng, n_boot, other.n_sources).astype(float))
        (lo_s, hi_s), (lo_o, hi_o), (lo_d, hi_d) = (
            (float(a), float(b))
            for a, b in (np.nanpercentile(x, [2.5, 97.5]) for x in (s, o, s - o))
        )
    elif method == JACKKNIFE:
        rep_s, var_s = _jackknife(speech)
        rep_o, var_o = _jackknife(other)
        lo_s, hi_s = (float(v) for v in jackknife_t_ci(np.asarray(acc_s), rep_s, proportion=True))
        lo_o, hi_o = (float(v) for v in jackknife_t_ci(np.asarray(acc_o), rep_o, proportion=True))
        # the difference's variance is the two kinds' summed; its degrees of freedom are the
        # kind with fewer sources' (its replicates are passed, the other's variance added)
        if speech.n_sources <= other.n_sources:
            replicates, rest = rep_s - acc_o, var_o
        else:
            replicates, rest = acc_s - rep_o, var_s
        lo_d, hi_d = (
            float(v)
            for v in jackknife_t_ci(np.asarray(acc_s - acc_o), replicates, extra_variance=rest)
        )
    verdict = ""
    if np.isfinite(hi_d) and hi_d < 0:
        verdict = SPEECH_SPECIFIC
    elif all(_near_chance(*a) for a in ((acc_s, lo_s, hi_s), (acc_o, lo_o, hi_o))):
        verdict = GENERAL
    return KindContrast(
        listener,
        category,
        kind,
        tiers,
        len(speech_rows),
        len(other_rows),
        speech.n_sources,
        other.n_sources,
        acc_s,
        lo_s,
        hi_s,
        acc_o,
        lo_o,
        hi_o,
        acc_s - acc_o,
        lo_d,
        hi_d,
        method,
        verdict,
    )


def _near_chance(accuracy: float, lo: float, hi: float) -> bool:
    """Under NEAR_CHANCE, with a CI that includes CHANCE."""
    return bool(
        np.isfinite(lo) and np.isfinite(hi) and accuracy < NEAR_CHANCE and lo <= CHANCE <= hi
    )


def kind_contrasts(
    rows_by_listener: Mapping[str, Sequence[Mapping]], n_boot: int = 2000, seed: int = 0
) -> list[KindContrast]:
    """Speech against every other kind of sound each listener was asked about, per dimension.

    Parameters
    ----------
    rows_by_listener : mapping of str to sequence of mapping
        Each listener's scored result rows (one prompt and mode; controls and errors left
        out), pooled over its runs: a speech benchmark's and another kind's. A row's kind is
        its ``source_kind`` (speech where absent); only increase and decrease items count,
        an unparsed answer as wrong.
    n_boot : int
        Bootstrap resamples where both kinds have enough sources; 0 computes no interval.
    seed : int
        Seeds the bootstrap (per listener, dimension and kind: `vocalgrad.stats.group_rng`).

    Returns
    -------
    list of KindContrast
        One per (listener, dimension, other kind) with speech and that kind at a common
        tier, in listener, dimension and kind order.
    """
    out = []
    for listener in sorted(rows_by_listener):
        changing = [r for r in rows_by_listener[listener] if r.get("direction") in LABELS]
        by_cell: dict[tuple[str, str], list[Mapping]] = {}
        for r in changing:
            by_cell.setdefault((r["category"], row_kind(r)), []).append(r)
        for category in sorted({c for c, _ in by_cell}):
            speech = by_cell.get((category, SPEECH))
            if not speech:
                continue
            for kind in sorted(k for c, k in by_cell if c == category and k != SPEECH):
                found = _contrast(
                    listener, category, kind, speech, by_cell[(category, kind)], n_boot, seed
                )
                if found is not None:
                    out.append(found)
    return out

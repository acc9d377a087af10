"""Audio distortion's labels under two measures written apart from its verifier.

The verifier (`vocalgrad.dimensions.audio_distortion.measure`) reads an error-to-mask ratio in
mel bands against the levelled source. Two other readings of each kept changing clip, early
third of the speech against late third; a clip agrees when the later third reads the more
distorted exactly where its label says "increase":

* held: the share of the speech's samples (16-bit, |x| > 50 LSB) equal to the sample before
  them. A sample-and-hold at an effective rate r repeats about 1 - r / sr of them, whatever
  the speech says: a reading of the hold itself.
* error: the energy of the clip minus the source (gain-matched every 50 ms, so the build's
  slow gains cancel) over the source's energy, in dB. What the hold adds, weighted by what the
  speech holds at the frequencies it folds: fricatives make far more of it than vowels.
* relative: `error` less the error a constant hold at half the sample rate makes on the same
  stretch of the source (a plain index hold, not the renderer's phase accumulator): the
  error with the speech's own share taken out.
* pesq: the quality a standard objective listener gives each third against the source's same
  third, ITU-T P.862.2 (wideband PESQ, MOS-LQO, through the `pesq` package at 16 kHz; a clip
  at another rate is resampled first): the field's own model of how distorted speech sounds,
  written by neither side. Read as its drop, 4.64 - MOS-LQO (higher: more distorted). Only
  when `pip install pesq` has been run; a third PESQ cannot read (no utterance) is skipped.
* pesq_relative: that drop less the drop PESQ gives the same third of the source under the
  constant hold of `relative`: how much worse than the speech's own susceptibility.

    python benchmarks/distortion_second_measure.py DATASET [--show 10]

Prints the agreement of each measure per tier and per curve, and the first disagreements.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import soundfile as sf

from vocalgrad.dataset import load_rows

CATEGORY = "audio_distortion"
LOUD_LSB = 50  # samples quieter than this (16-bit) are room tone, where a repeat means little
FRAME_S = 0.05
PESQ_SR = 16000  # wideband PESQ reads 16 kHz


def held_share(samples: np.ndarray) -> float:
    """Share of the loud 16-bit samples equal to the one before them (NaN with none)."""
    x = samples.astype(np.int64)
    loud = np.abs(x[1:]) > LOUD_LSB
    return float(np.mean(np.diff(x)[loud] == 0)) if loud.any() else float("nan")


def error_db(clip: np.ndarray, source: np.ndarray, sr: int) -> float:
    """Energy of clip - g * source over that of g * source, g fitted per 50 ms frame (dB;
    -inf where the clip is the source up to those gains, NaN where the source is silent)."""
    n = int(FRAME_S * sr)
    error = signal = 0.0
    for i in range(0, len(clip) - n + 1, n):
        a, b = clip[i : i + n], source[i : i + n]
        bb = float(b @ b)
        if bb <= 0:
            continue
        g = float(a @ b) / bb
        e = a - g * b
        error += float(e @ e)
        signal += g * g * bb
    if signal <= 0:
        return float("nan")
    return 10 * np.log10(error / signal) if error > 0 else float("-inf")


def probe_hold(x: np.ndarray, sr: int, rate: float) -> np.ndarray:
    """`x` held at a constant `rate` (Hz): each sample repeats the last one taken."""
    taken = np.floor(np.floor(np.arange(len(x)) * rate / sr) * sr / rate).astype(int)
    return x[np.minimum(taken, len(x) - 1)]


def pesq_drop(clip: np.ndarray, source: np.ndarray, sr: int) -> float:
    """4.64 - wideband PESQ MOS-LQO of `clip` against `source` (NaN where PESQ finds no
    utterance)."""
    from math import gcd

    from pesq import NoUtterancesError, pesq
    from scipy.signal import resample_poly

    if sr != PESQ_SR:
        g = gcd(sr, PESQ_SR)
        clip, source = (resample_poly(x, PESQ_SR // g, sr // g) for x in (clip, source))
    try:
        return 4.64 - float(pesq(PESQ_SR, source, clip, "wb"))
    except NoUtterancesError:
        return float("nan")


def readings(root: Path, row: Mapping) -> dict[str, tuple[float, float]]:
    """Measure -> (early third, late third) of one clip's speech."""
    ints, sr = sf.read(row["path"], dtype="int16", always_2d=True)
    clip, _ = sf.read(row["path"], dtype="float64", always_2d=True)
    source, _ = sf.read(root / row["reference_file"], dtype="float64", always_2d=True)
    ints, clip, source = ints[:, 0], clip.mean(axis=1), source.mean(axis=1)
    n = min(len(clip), len(source))
    on, off = int(row["speech_onset_s"] * sr), min(int(row["speech_offset_s"] * sr), n)
    third = (off - on) // 3
    early, late = slice(on, on + third), slice(off - third, off)
    probe = probe_hold(source, sr, sr / 2)
    error = [error_db(clip[part], source[part], sr) for part in (early, late)]
    probed = [error_db(probe[part], source[part], sr) for part in (early, late)]
    out = {
        "held": (held_share(ints[early]), held_share(ints[late])),
        "error": (error[0], error[1]),
        "relative": (error[0] - probed[0], error[1] - probed[1]),
    }
    if importlib.util.find_spec("pesq") is not None:
        drop = [pesq_drop(clip[part], source[part], sr) for part in (early, late)]
        floor = [pesq_drop(probe[part], source[part], sr) for part in (early, late)]
        out["pesq"] = (drop[0], drop[1])
        out["pesq_relative"] = (drop[0] - floor[0], drop[1] - floor[1])
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("--show", type=int, default=10, help="disagreements to list")
    args = p.parse_args(argv)
    rows = [
        r
        for r in load_rows(args.dataset)
        if r["category"] == CATEGORY and r["direction"] in ("increase", "decrease")
    ]
    agree: dict[str, dict[tuple[str, str], list[bool]]] = defaultdict(lambda: defaultdict(list))
    disagreements = []
    for r in rows:
        increase = r["direction"] == "increase"
        for name, (a, b) in readings(args.dataset, r).items():
            if np.isnan(a) or np.isnan(b):
                continue  # a third the measure cannot read
            ok = bool((b > a) == increase)
            for key in (("tier", r["tier"]), ("curve", r["curve"]), ("all", "all")):
                agree[name][key].append(ok)
            if not ok:
                disagreements.append((name, r["source_id"], r["tier"], r["curve"], r["direction"],
                                      round(a, 3), round(b, 3)))  # fmt: skip
    print(f"{args.dataset}: {len(rows)} kept changing {CATEGORY} clips")
    print("| measure | all | " + " | ".join(k[1] for k in sorted(agree["held"]) if k[0] != "all")
          + " |")  # fmt: skip
    print("|---" * (2 + sum(k[0] != "all" for k in agree["held"])) + "|")
    for name, table in agree.items():
        cells = [f"{np.mean(v):.1%} ({len(v)})" for k, v in sorted(table.items()) if k[0] != "all"]
        print(f"| {name} | {np.mean(table['all', 'all']):.1%} | " + " | ".join(cells) + " |")
    for d in disagreements[: args.show]:
        print("disagrees:", *d)


if __name__ == "__main__":
    main()

"""Write the "ALSA pairs": the alsa-utils test phrases joined two by two into sources.

Why: Debian's alsa-utils ships eight short recordings of one voice ("Front Center", "Rear
Left", ...), ~1.4 s each, shorter than a benchmark source (>= 2 s). Joined in every ordered
pair of two different phrases, 0.25 s of silence apart (as tests/conftest.py joins them),
they give 56 real-speech sources, 28 + 28 with one "speaker" per first phrase. The results
page's order-free audit builds them with

    python benchmarks/alsa_pairs.py PAIRS
    vocalgrad build --out X --source folder:PAIRS --speaker-pattern '^(?P<speaker>[^+/]+)\\+' \\
        --config sizes28.toml --n-test 28 --n-train 28 --sample-rate 16000 ...

(`sizes28.toml`: `[build] per_speaker_test = 7`). Every pair starts on a position word and
ends on a side word, and its phrases recur across the splits: a corpus that shows how the
audit reads content shared between sources (`order_free_cues.py --disjoint-parts`).

    python benchmarks/alsa_pairs.py OUT [--gap-s 0.25]

Install with ``apt-get install alsa-utils``; nothing is downloaded.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import soundfile as sf
from unseen_corpora import joined

ALSA_ROOT = Path("/usr/share/sounds/alsa")
GAP_S = 0.25


def phrases(root: Path = ALSA_ROOT) -> list[Path]:
    """The spoken phrases (every .wav but the noise file), in name order."""
    return sorted(p for p in root.glob("*.wav") if "Noise" not in p.name)


def write_pairs(out: Path, root: Path = ALSA_ROOT, gap_s: float = GAP_S) -> list[Path]:
    """OUT/<first>+<second>.wav for every ordered pair of two different phrases (16-bit WAV
    at the recordings' own rate); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for first, second in itertools.permutations(phrases(root), 2):
        audio, sr = joined([first, second], gap_s)
        path = out / f"{first.stem}+{second.stem}.wav"
        sf.write(path, audio, sr, subtype="PCM_16")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--gap-s", type=float, default=GAP_S, help="silence between the phrases")
    args = ap.parse_args(argv)
    if len(phrases()) < 2:
        print(f"no alsa-utils phrases under {ALSA_ROOT}: apt-get install alsa-utils")
        return 1
    written = write_pairs(args.out, gap_s=args.gap_s)
    print(f"wrote {len(written)} pairs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Is an order-free leak the renderer's or the speech's? Render the same items from every
source played forwards and played backwards, and compare twins.

Why: an order-free cue that tells an increase clip from its decrease twin comes from one of
two places. Either the renderer treats the two ends of a clip differently (a reverb that
rings only forwards, a gain that follows onsets and offsets differently), or the speech is
not the same at its two ends (onsets and offsets, a sentence's last words), and the change
weighs one end above the other. Reversing the source tells them apart: the source's
asymmetry trades ends, so its part of the leak changes sign, while the renderer's stays.
With `fwd` and `rev` the shares of twins whose increase clip has the larger value:

    content  = (fwd - rev) / 2      renderer = (fwd + rev) / 2 - 0.5

(each on the share scale; 0 for no leak). This renders the dataset's own plan (its
format, tiers and curves; changing conditions only) from the sources it was built from,
prepared as the build prepares them (each forward preparation must reproduce the stored
reference sample for sample, or the script stops: the dataset was built by another
renderer); the reversed sources are the recordings played backwards, prepared the same way.

    python benchmarks/reversal_control.py DATASET [DIMENSION ...] [--sources N] [--top 4]
        [--question-format gradual|comparison] [--workers 2]

Prints, per category, the cues whose forward share lies furthest from 0.5, with a two-sided
sign test, the reversed share and the split into content and renderer.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.stats import binomtest

from vocalgrad.audio import load_audio
from vocalgrad.signal.analysis import Analysis
from vocalgrad.sources import ensure_rendered, resolve_sources
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.order_free import NAMES, order_free_cues
from vocalgrad.stimuli.plan import Condition, plan_conditions
from vocalgrad.stimuli.render import (
    prepare_reference,
    prepare_source,
    render_condition,
    tone_seed_for,
)

Differences = dict[str, list[float]]  # category -> cue -> increase minus decrease, per twin


def _twin_differences(
    clean: Analysis, source_id: str, config: BuildConfig, conditions: Sequence[Condition]
) -> dict[str, Differences]:
    """Order-free cue differences (increase minus decrease) of every twin of one source."""
    source = prepare_source(clean, tone_seed_for(config.seed, source_id))
    out: dict[str, Differences] = defaultdict(lambda: defaultdict(list))
    for i, condition in enumerate(conditions):
        item, twin = f"{2 * i:016x}", f"{2 * i + 1:016x}"
        up = render_condition(source, condition, config.seed, item, twin)
        down = render_condition(source, condition.twin(), config.seed, twin, item)
        cues_up = order_free_cues(up.audio, config.sample_rate)
        cues_down = order_free_cues(down.audio, config.sample_rate)
        for name in NAMES:
            out[condition.category][name].append(cues_up[name] - cues_down[name])
    return {k: dict(v) for k, v in out.items()}


def _one_source(task: tuple) -> tuple[dict[str, Differences], dict[str, Differences]]:
    path, kind, reference, source_id, config, conditions = task
    forward = prepare_reference(path, config.sample_rate, config.target_lufs, kind)
    if reference is not None and not np.array_equal(forward.audio, load_audio(reference)[0]):
        raise SystemExit(
            f"{source_id}: prepared anew it differs from the dataset's reference "
            f"({reference}); the dataset was built by another renderer revision"
        )
    audio, sr = load_audio(path)
    with tempfile.TemporaryDirectory() as tmp:
        backwards = Path(tmp) / "reversed.wav"
        sf.write(backwards, np.ascontiguousarray(audio[::-1]), sr, subtype="FLOAT")
        backward = prepare_reference(str(backwards), config.sample_rate, config.target_lufs, kind)
    return (
        _twin_differences(forward, source_id, config, conditions),
        _twin_differences(backward, source_id, config, conditions),
    )


def share(differences: Sequence[float]) -> tuple[float, int]:
    """(share of twins whose increase clip has the larger value, twins that differ)."""
    d = np.asarray(differences, dtype=float)
    d = d[np.isfinite(d) & (np.abs(d) > 1e-9)]
    return (float(np.mean(d > 0)) if d.size else 0.5), int(d.size)


def split_leak(forward: float, backward: float) -> tuple[float, float]:
    """(content, renderer) parts of a forward share, from the share on reversed sources."""
    return (forward - backward) / 2, (forward + backward) / 2 - 0.5


def report(category: str, fwd: Differences, rev: Differences, top: int) -> str:
    rows = []
    for name in NAMES:
        f, n = share(fwd.get(name, []))
        if n < 10:
            continue
        b, _ = share(rev.get(name, []))
        p = binomtest(int(round(f * n)), n).pvalue
        rows.append((abs(f - 0.5), name, f, n, p, b, *split_leak(f, b)))
    rows.sort(reverse=True)
    lines = [
        f"\n{category}: {len(next(iter(fwd.values()), []))} twins",
        "| cue | forward share (n, sign test p) | reversed share | content | renderer |",
        "|---|---|---|---|---|",
    ]
    for _, name, f, n, p, b, content, renderer in rows[:top]:
        lines.append(
            f"| {name} | {f:.2f} ({n}, p={p:.2g}) | {b:.2f} | {content:+.2f} | {renderer:+.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dataset", type=Path)
    ap.add_argument("categories", nargs="*", metavar="DIMENSION", help="default: the dataset's")
    ap.add_argument("--sources", type=int, default=0, help="at most this many (0: all)")
    ap.add_argument(
        "--question-format",
        choices=("gradual", "comparison"),
        help="render the plan in this format instead of the dataset's (same sources)",
    )
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    config = BuildConfig(**json.loads((args.dataset / "build.json").read_text())["config"])
    if args.categories:
        config = config.model_copy(update={"categories": tuple(args.categories)})
    if args.question_format:
        config = config.model_copy(update={"format": args.question_format})
    if config.format == "recognition":
        raise SystemExit("recognition clips hold one value: there is no order to reverse")
    conditions = [c for c in plan_conditions(config)[0] if c.direction == "increase"]
    refs = [
        json.loads(line)
        for line in (args.dataset / "references" / "metadata.jsonl").read_text().splitlines()
    ]
    refs = refs[: args.sources] if args.sources else refs
    wanted = {r["source_id"] for r in refs}
    sources = [
        s
        for s in resolve_sources(config.source, speaker_pattern=config.speaker_pattern)
        if s.source_id in wanted
    ]
    if len(sources) < len(wanted):
        raise SystemExit(f"{len(wanted) - len(sources)} of the sources are not in {config.source}")
    rendered = {s.source_id: s for s in ensure_rendered(sources)}
    tasks = [
        (
            rendered[r["source_id"]].path,
            rendered[r["source_id"]].kind,
            str(args.dataset / "references" / r["file_name"]),
            r["source_id"],
            config,
            conditions,
        )
        for r in refs
    ]
    fwd: dict[str, Differences] = defaultdict(lambda: defaultdict(list))
    rev: dict[str, Differences] = defaultdict(lambda: defaultdict(list))
    with ProcessPoolExecutor(args.workers) as pool:
        for forward, backward in pool.map(_one_source, tasks):
            for into, got in ((fwd, forward), (rev, backward)):
                for category, cues in got.items():
                    for name, values in cues.items():
                        into[category][name].extend(values)
    print(
        f"{args.dataset}: {len(refs)} sources, {config.format} format, seed {config.seed}; "
        "shares: twins whose increase clip has the larger value"
    )
    for category in config.categories:
        if category in fwd:
            print(report(category, fwd[category], rev[category], args.top))


if __name__ == "__main__":
    main()

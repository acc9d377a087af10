"""Build, audit and verify on recorded human speech the toolkit was not tuned on.

Why: a benchmark must hold on speech it was not developed against: other corpora, languages,
sample rates and the telephone band (design.md, "Stimulus validity"). The builtin speech,
ARCTIC (tests/data) and the alsa-utils phrases are what the toolkit was developed on; this takes
human recordings that Debian packages ship and runs the whole pipeline on them:

- ``tuxpaint``: spoken stamp descriptions of Debian's tuxpaint-stamps-default
  (``/usr/share/tuxpaint/stamps/**/<stamp>_desc_<lang>.ogg``), one speaker folder per
  language; only descriptions 2-8 s long are taken, whole.
- ``ktuberling``: object names spoken in many languages, Debian's ktuberling-data
  (``/usr/share/ktuberling/sounds/<lang>/*.ogg``); each word is ~0.8 s, so consecutive words
  of one language are joined 0.3 s apart into ~3 s phrases (as tests/conftest.py joins the
  alsa-utils phrases).
- ``klettres``: syllables ("ba", "be", ...) spoken one at a time, Debian's klettres-data
  (``/usr/share/klettres/<lang>/syllab/*.ogg``; the eight languages with at least 40). A
  file holds one syllable in up to 2 s of silence, so each is trimmed to its sound
  (librosa, 40 dB under its peak: 0.43-2.65 s, 10th-90th percentile of the 964 files) and
  four consecutive ones are joined 0.3 s apart: spelled-out speech, a syllable at a time.

Install with ``apt-get install tuxpaint-stamps-default ktuberling-data klettres-data``. A
corpus whose package is missing is skipped with a message; nothing is downloaded.

Each corpus is prepared once per variant: ``48k``, ``16k`` and ``8k`` (resampled from the
package's own rate), ``tel`` (300-3400 Hz band-pass at 8 kHz, the telephone band) rendered at
8 kHz, and ``tel16`` (the same telephone-band files) rendered at 16 kHz: narrowband speech in a
wideband pipeline. Then per variant: ``vocalgrad build`` (folder source, speaker = language),
``vocalgrad audit`` and ``vocalgrad verify`` (and ``benchmarks/order_free_cues.py`` with
``--order-free-script``: it gives the audit's order-free accuracy and CI to the digit, the
same function on the same files, so by default it is not run twice).

    python benchmarks/unseen_corpora.py OUT [--corpus tuxpaint ktuberling]
        [--variant 48k 16k 8k tel tel16] [--n-test 8] [--n-train 8] [--workers 1] [--seed 0]
        [--prepare-only] [--order-free-script] [--summary]

Prints one markdown table per corpus and variant (and writes OUT/<corpus>-<variant>.md):
per category the build's kept / refused-as-inaudible counts and agreement, the audit's
verdict and worst AUC, verify's agreement, and the order-free accuracy with its 95% CI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import librosa
import numpy as np
import soundfile as sf
from scipy.signal import butter, sosfiltfilt

from vocalgrad.audio import load_audio, resample

TUXPAINT_ROOT = Path("/usr/share/tuxpaint/stamps")
KTUBERLING_ROOT = Path("/usr/share/ktuberling/sounds")
KLETTRES_ROOT = Path("/usr/share/klettres")
VARIANTS = {
    "48k": (48000, 48000),
    "16k": (16000, 16000),
    "8k": (8000, 8000),
    "tel": (8000, 8000),
    "tel16": (8000, 16000),
}  # name: (file rate, render rate)
TELEPHONE_BAND_HZ = (300.0, 3400.0)
PER_SPEAKER = 6  # utterances kept per speaker: enough for 8 test + 8 train at 2 per test speaker
DESC = re.compile(r"_desc_(?P<lang>[a-z]{2})\.ogg$")


def package_version(package: str) -> str | None:
    """The installed Debian package's version, or None where it is not installed."""
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", package],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def tuxpaint_utterances(root: Path = TUXPAINT_ROOT) -> dict[str, list[list[Path]]]:
    """Language -> descriptions 2-8 s long, each one utterance (a list of one file)."""
    by_lang: dict[str, list[list[Path]]] = {}
    for path in sorted(root.rglob("*_desc_*.ogg")):
        match = DESC.search(path.name)
        if not match:
            continue
        duration = sf.info(str(path)).duration
        if 2.0 <= duration <= 8.0:
            by_lang.setdefault(match["lang"], []).append([path])
    return by_lang


def ktuberling_utterances(
    root: Path = KTUBERLING_ROOT, words: int = 3
) -> dict[str, list[list[Path]]]:
    """Language -> groups of `words` consecutive words, one joined phrase each. Languages
    whose words come at 8 kHz or 22 kHz (fewer than 60 files) are mostly left out by the
    count: the big sets are 44.1 kHz."""
    by_lang: dict[str, list[list[Path]]] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and "@" not in p.name):
        files = sorted(folder.glob("*.ogg"))
        if len(files) < 60:
            continue
        by_lang[folder.name] = [
            files[i : i + words] for i in range(0, len(files) - words + 1, words)
        ]
    return by_lang


def klettres_utterances(
    root: Path = KLETTRES_ROOT, syllables: int = 4
) -> dict[str, list[list[Path]]]:
    """Language -> groups of `syllables` consecutive syllables, one joined phrase each
    (languages with at least 40 recorded syllables)."""
    by_lang: dict[str, list[list[Path]]] = {}
    for folder in sorted(p for p in root.glob("*/syllab") if p.is_dir()):
        files = sorted(folder.glob("*.ogg"))
        if len(files) < 40:
            continue
        by_lang[folder.parent.name] = [
            files[i : i + syllables] for i in range(0, len(files) - syllables + 1, syllables)
        ]
    return by_lang


class Corpus(NamedTuple):
    """A Debian package's recordings: where they lie, how they group into utterances, and
    the level (dB under each file's peak) below which a file's own edges are trimmed (None:
    kept whole)."""

    package: str
    root: Path
    utterances: Callable[[Path], dict[str, list[list[Path]]]]
    trim_top_db: float | None = None


CORPORA = {
    "tuxpaint": Corpus("tuxpaint-stamps-default", TUXPAINT_ROOT, tuxpaint_utterances),
    "ktuberling": Corpus("ktuberling-data", KTUBERLING_ROOT, ktuberling_utterances),
    "klettres": Corpus("klettres-data", KLETTRES_ROOT, klettres_utterances, trim_top_db=40.0),
}


def telephone_band(audio: np.ndarray, sr: int) -> np.ndarray:
    """300-3400 Hz band-pass (8th-order Butterworth, zero phase), as a telephone channel."""
    sos = butter(8, TELEPHONE_BAND_HZ, btype="bandpass", fs=sr, output="sos")
    return sosfiltfilt(sos, audio).astype(np.float32)


def joined(
    paths: list[Path], gap_s: float = 0.3, trim_top_db: float | None = None
) -> tuple[np.ndarray, int]:
    """The files of one utterance, mono, at the first file's rate, `gap_s` of silence apart;
    with `trim_top_db`, each file's leading and trailing silence (that far under its peak)
    cut first."""
    parts, rate = [], None
    for path in paths:
        audio, sr = load_audio(path)
        if trim_top_db is not None:
            audio, _ = librosa.effects.trim(audio, top_db=trim_top_db)
        rate = rate or sr
        parts.append(resample(audio, sr, rate))
        parts.append(np.zeros(int(gap_s * rate), np.float32))
    return np.concatenate(parts[:-1]), int(rate)


def prepare(corpus: str, out: Path, variants: list[str], per_speaker: int = PER_SPEAKER) -> dict:
    """Write OUT/<corpus>/<variant>/<speaker>/<n>.wav for every variant; returns counts."""
    source = CORPORA[corpus]
    utterances = source.utterances(source.root)
    rng = np.random.default_rng(0)
    counts: dict[str, int] = {}
    rates: dict[int, int] = {}
    for lang, groups in sorted(utterances.items()):
        chosen = [groups[i] for i in sorted(rng.permutation(len(groups))[:per_speaker])]
        if len(chosen) < 2:
            continue
        counts[lang] = len(chosen)
        for n, group in enumerate(chosen):
            audio, sr = joined(group, trim_top_db=source.trim_top_db)
            rates[sr] = rates.get(sr, 0) + 1
            for variant in variants:
                file_sr, _ = VARIANTS[variant]
                path = (
                    out / corpus / variant / lang / f"{lang}-{n:02d}.wav"
                )  # stems are text ids: unique
                if path.exists():
                    continue
                x = resample(audio, sr, file_sr)
                if variant.startswith("tel"):
                    x = telephone_band(x, file_sr)
                x = x * np.float32(0.5 / max(float(np.max(np.abs(x))), 1e-9))  # -6 dBFS peak
                path.parent.mkdir(parents=True, exist_ok=True)
                sf.write(path, x, file_sr, subtype="PCM_16")
    return {"speakers": counts, "source_rates": rates}


def _run(cmd: list[str], log: Path) -> int:
    with log.open("a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False).returncode


def evaluate(
    corpus: str,
    variant: str,
    out: Path,
    n_test: int,
    n_train: int,
    workers: int,
    order_free_script: bool = False,
    seed: int = 0,
) -> str:
    """Build, audit, verify and order-free audit one prepared variant; the markdown table."""
    folder = out / corpus / variant
    dataset = out / f"{corpus}-{variant}-ds"
    log = out / f"{corpus}-{variant}.log"
    _, render_sr = VARIANTS[variant]
    vocalgrad = [sys.executable, "-m", "vocalgrad.cli"]
    here = Path(__file__).resolve().parent
    rc = _run(
        [
            *vocalgrad,
            "build",
            "--out",
            str(dataset),
            "--source",
            f"folder:{folder}",
            "--n-test",
            str(n_test),
            "--n-train",
            str(n_train),
            "--sample-rate",
            str(render_sr),
            "--workers",
            str(workers),
            "--seed",
            str(seed),
            "--no-audit",
        ],
        log,
    )
    if rc != 0:
        return f"{corpus} {variant}: build failed (rc {rc}); see {log}\n"
    _run([*vocalgrad, "audit", str(dataset), "--workers", str(workers)], log)
    _run([*vocalgrad, "verify", str(dataset), "--json", str(dataset / "verify_cli.json")], log)
    order_free = out / f"{corpus}-{variant}-order-free.md"
    if not order_free_script:  # the audit's order-free column is the same computation
        return table(corpus, variant, dataset, order_free)
    with order_free.open("w") as f:
        subprocess.run(
            [
                sys.executable,
                str(here / "order_free_cues.py"),
                str(dataset),
                "--top",
                "2",
                "--workers",
                str(workers),
            ],
            stdout=f,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return table(corpus, variant, dataset, order_free)


def table(corpus: str, variant: str, dataset: Path, order_free: Path) -> str:
    build = json.loads((dataset / "build_report.json").read_text())
    audit = (_load(dataset / "audit.json") or {}).get("per_category", {})
    verify = (_load(dataset / "verify_cli.json") or {}).get("per_category", {})
    free = _order_free_rows(order_free)
    file_sr, render_sr = VARIANTS[variant]
    refused_plan: dict[str, list[str]] = {}
    for r in build.get("refused_conditions", []):
        refused_plan.setdefault(r["category"], []).append(r["tier"])
    per_source: dict[tuple[str, str], int] = {}
    for r in build.get("refused_for_source", []):
        per_source[(r["category"], r["tier"])] = per_source.get((r["category"], r["tier"]), 0) + 1
    for (category, tier), n in sorted(per_source.items()):
        refused_plan.setdefault(category, []).append(f"{tier} on {n} source(s)")
    lines = [
        f"{corpus}, {variant} (files {file_sr} Hz, rendered {render_sr} Hz): "
        f"{build.get('sources_selected')} sources, {build['clips_kept']} clips kept of "
        f"{build['clips_rendered']} rendered",
        "",
        "| category | kept | refused inaudible | refused tiers | verify agreement | shortcut acc "
        "[CI] | constant AUC | order-free acc [CI] (audit) | order_free_cues.py | audit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cat, c in sorted(build.get("per_category", {}).items()):
        a = audit.get(cat, {})
        ofr = a.get("order_free") or {}
        lines.append(
            f"| {cat} | {c['kept']} | {c['refused_inaudible']} | "
            f"{', '.join(refused_plan.get(cat, [])) or '-'} "
            f"| {_pct(verify.get(cat, {}).get('agreement'))} "
            f"| {_ci(a.get('shortcut_accuracy'), a.get('shortcut_ci'))} | "
            f"{_num(a.get('constant_auc'))} "
            f"| {_ci(ofr.get('accuracy'), ofr.get('ci'))} | {free.get(cat, 'n/a')} "
            f"| {'n/a' if 'passes' not in a else ('pass' if a['passes'] else 'FAIL')} |"
        )
    return "\n".join(lines) + "\n"


def summary(out: Path, corpus: str, variants: list[str]) -> str:
    """One table per corpus over the variants already evaluated under OUT: per category and
    variant the audit's order-free accuracy, the clips refused as inaudible and the verdict."""
    done = [v for v in variants if (out / f"{corpus}-{v}-ds" / "audit.json").is_file()]
    if not done:
        return f"{corpus}: nothing evaluated under {out} yet\n"
    cells: dict[str, dict[str, str]] = {}
    notes = []
    for v in done:
        ds = out / f"{corpus}-{v}-ds"
        build = json.loads((ds / "build_report.json").read_text())
        audit = json.loads((ds / "audit.json").read_text())["per_category"]
        verify = (_load(ds / "verify_cli.json") or {}).get("per_category", {})
        agreement = [e["agreement"] for e in verify.values() if "agreement" in e]
        notes.append(
            f"{v}: {build['sources_selected']} sources, {build['clips_kept']} clips, lowest verify "
            f"agreement of a category {_pct(min(agreement)) if agreement else 'n/a'}"
        )
        for cat, c in build["per_category"].items():
            a = audit.get(cat, {})
            of = a.get("order_free") or {}
            refused = [
                r["tier"] for r in build.get("refused_conditions", []) if r["category"] == cat
            ]
            cells.setdefault(cat, {})[v] = (
                f"{_ci(of.get('accuracy'), of.get('ci'))}; {c['refused_inaudible']} refused"
                + (f" + tier {','.join(refused)}" if refused else "")
                + ("" if a.get("passes", True) else "; **FAIL**")
            )
    head = "| category | " + " | ".join(done) + " |"
    lines = [
        f"{corpus}: order-free accuracy [95% CI]; clips refused as inaudible (+ tiers refused "
        "by the rate rule); audit verdict where it fails",
        "",
        head,
        "|---|" + "---|" * len(done),
    ]
    lines += [
        f"| {cat} | " + " | ".join(cells[cat].get(v, "n/a") for v in done) + " |"
        for cat in sorted(cells)
    ]
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _ci(x, ci) -> str:
    if x is None:
        return "n/a"
    return f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else f"{x:.2f}"


def _load(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _order_free_rows(path: Path) -> dict[str, str]:
    rows = {}
    if not path.exists():
        return rows
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] not in ("category", "---"):
            rows[cells[0]] = cells[3] if cells[3] else cells[1]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--corpus", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    ap.add_argument("--variant", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--n-test", type=int, default=8)
    ap.add_argument("--n-train", type=int, default=8)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="the builds' seed: at 8 + 8 a cell near a gate passes or fails with it, so "
        "compare several (one OUT per seed)",
    )
    ap.add_argument("--prepare-only", action="store_true")
    ap.add_argument(
        "--summary",
        action="store_true",
        help="only print the per-corpus summary of what OUT already holds",
    )
    ap.add_argument(
        "--order-free-script",
        action="store_true",
        help="also run benchmarks/order_free_cues.py (its accuracy and CI equal the "
        "audit's order-free column: the same function on the same files)",
    )
    args = ap.parse_args()
    os.environ.setdefault("PYTHONHASHSEED", "0")
    for corpus in args.corpus:
        package = CORPORA[corpus].package
        version = package_version(package)
        if version is None or not CORPORA[corpus].root.is_dir():
            print(
                f"{corpus}: skipped: Debian package {package} is not installed "
                f"(apt-get install {package}); nothing is downloaded"
            )
            continue
        if args.summary:
            print(summary(args.out, corpus, args.variant))
            continue
        info = prepare(corpus, args.out, args.variant)
        print(
            f"{corpus}: {package} {version}; {len(info['speakers'])} speakers (languages), "
            f"{sum(info['speakers'].values())} utterances {info['speakers']}; "
            f"package rates of the chosen files {info['source_rates']}"
        )
        if args.prepare_only:
            continue
        for variant in args.variant:
            text = evaluate(
                corpus,
                variant,
                args.out,
                args.n_test,
                args.n_train,
                args.workers,
                args.order_free_script,
                args.seed,
            )
            (args.out / f"{corpus}-{variant}.md").write_text(text)
            print(text, flush=True)


if __name__ == "__main__":
    main()

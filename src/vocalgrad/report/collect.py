"""Read what the report shows: run folders, listeners, their colours, probe and dataset files."""

from __future__ import annotations

import csv
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vocalgrad import formats
from vocalgrad.dataset import is_official, official_rows, read_json, read_jsonl
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import load_results
from vocalgrad.evaluation.ladder import INDEX as LADDER_INDEX
from vocalgrad.evaluation.ladder import run_folders
from vocalgrad.probing.figures import long_rows

HUMAN_PREFIX = "human"
ADAPTIVE_TIER = "adaptive"
SWEEP_TIER = re.compile(r"p\d+$")  # tiers of the psychometric design (plan.py: p1..pN)
CHANCE_COLOUR = "#9e9e9e"
# tab10 without its grey, so grey stays free for chance; humans get dark, distinct tones
MODEL_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)
HUMAN_COLOURS = ("#111111", "#5d4037", "#37474f")
# references are drawn as lines and bands, in greys, never as a competing listener's colour
REFERENCE_COLOURS = ("#424242", "#757575", "#616161", "#8d8d8d", "#333333", "#a8a8a8")
# listener schemes that are references, not models: the baselines (random, always-increase/
# -decrease, shortcut, one-end, ideal) and the human-free acoustic observers
REFERENCE_SCHEMES = ("baseline", "acoustic")
PREFERRED = (("default", "choice"), ("default", "generate"))


@dataclass
class Run:
    path: Path
    manifest: dict
    rows: list[dict]
    adaptive: list[dict] = field(default_factory=list)  # adaptive.json entries, if any

    @property
    def name(self) -> str:
        return self.path.name


def expand_runs(dirs: Iterable[str | Path]) -> list[Path]:
    """Run folders from the report's arguments: a ladder run folder (``vocalgrad eval LADDER``)
    stands for its rungs' run folders, and its index given as a file (``R/*``) for nothing,
    since its runs are given beside it; each folder once."""
    out: list[Path] = []
    for d in dirs:
        path = Path(d)
        if path.name == LADDER_INDEX and path.is_file():
            continue
        out.extend(run_folders(path))
    return list(dict.fromkeys(out))


def load_runs(dirs: Iterable[str | Path]) -> list[Run]:
    runs = []
    for d in dirs:
        manifest, rows = load_results(d)
        adaptive_path = Path(d) / "adaptive.json"
        adaptive = _read_json(adaptive_path)
        entries = [
            {**e, "listener": e.get("listener") or adaptive.get("listener") or Path(d).name}
            for e in adaptive.get("results", [])
        ]
        runs.append(Run(Path(d), manifest, rows, entries))
    return runs


def untestable(runs: Sequence[Run]) -> dict[str, dict[str, str]]:
    """listener -> category -> why it was not asked (a mono listener, a stereo dimension)."""
    out: dict[str, dict[str, str]] = {}
    for run in runs:
        if run.manifest.get("untestable"):
            name = run.manifest.get("listener", {}).get("listener") or run.name
            out.setdefault(name, {}).update(run.manifest["untestable"])
    return out


def is_human(listener: str) -> bool:
    return listener.startswith(HUMAN_PREFIX)


def is_reference(listener: str) -> bool:
    """A reference (chance, bias, shortcut, one-end or ideal observer): shown for comparison,
    set apart in tables, drawn as lines in figures and never ranked among the models."""
    return split_format(listener)[0].partition(":")[0] in REFERENCE_SCHEMES


def kind_of(listener: str) -> str:
    """ "human", "reference" or "model": how a listener is shown and whether it is ranked."""
    return "human" if is_human(listener) else "reference" if is_reference(listener) else "model"


FORMAT_TAG = " [{}]"  # "baseline:ideal [comparison]": one listener in another question format


def listener_of(row: dict, run: Run) -> str:
    """The listener id, tagged with the question format where it is not gradual: the same
    model asked in two formats is two rows of every table, never pooled."""
    name = str(row.get("listener") or run.manifest.get("listener", {}).get("listener") or run.name)
    fmt = row.get("format") or run.manifest.get("format") or formats.DEFAULT
    return with_format(name, fmt)


def with_format(listener: str, fmt: str) -> str:
    """A listener's name in one question format: tagged with the format's name unless the
    format is untagged (`QuestionFormat.tagged`: the default format)."""
    return listener + FORMAT_TAG.format(fmt) if formats.is_tagged(fmt) else listener


def split_format(name: str) -> tuple[str, str]:
    """(listener, question format) from a listener name: "baseline:ideal [comparison]" is
    baseline:ideal in the comparison format; an untagged name is in the default format."""
    if name.endswith("]") and " [" in name:
        base, fmt = name[:-1].rsplit(" [", 1)
        return base, fmt
    return name, formats.DEFAULT


def rows_by_listener(runs: Sequence[Run]) -> dict[str, list[dict]]:
    """All rows per listener id, pooled over runs. When the pooled `human` listener is present,
    per-annotator `human:<id>` listeners are folded into it (they would crowd every table)."""
    out: dict[str, list[dict]] = {}
    for run in runs:
        for r in run.rows:
            out.setdefault(listener_of(r, run), []).append(r)
    if HUMAN_PREFIX in out:
        out = {k: v for k, v in out.items() if not k.startswith(HUMAN_PREFIX + ":")}
    return dict(sorted(out.items(), key=lambda kv: (is_human(kv[0]), kv[0])))


def primary(rows: Sequence[dict]) -> tuple[list[dict], str]:
    """Main-condition rows (no control, no error) of the listener's primary prompt and mode."""
    main = [r for r in rows if r.get("control", "none") == "none" and r.get("error") is None]
    combos = Counter((r.get("variant"), r.get("mode")) for r in main)
    if not combos:
        return [], ""
    pick = next((c for c in PREFERRED if c in combos), combos.most_common(1)[0][0])
    chosen = [r for r in main if (r.get("variant"), r.get("mode")) == pick]
    return chosen, f"{pick[0]}/{pick[1]}"


def is_sweep(row: dict) -> bool:
    return bool(SWEEP_TIER.match(str(row.get("tier", ""))))


def palette(listeners: Iterable[str]) -> dict[str, str]:
    """One colour per listener, fixed by name order so every figure and table agrees; the
    models take the bright colours, references greys, humans dark tones."""
    names = set(listeners)
    by_kind = {
        k: sorted(x for x in names if kind_of(x) == k) for k in ("model", "reference", "human")
    }
    bases = sorted({split_format(m)[0] for m in by_kind["model"]})  # a model keeps its colour
    colours = {
        m: MODEL_COLOURS[bases.index(split_format(m)[0]) % len(MODEL_COLOURS)]
        for m in by_kind["model"]
    }  # in every question format
    colours |= {
        r: REFERENCE_COLOURS[i % len(REFERENCE_COLOURS)] for i, r in enumerate(by_kind["reference"])
    }
    colours |= {h: HUMAN_COLOURS[i % len(HUMAN_COLOURS)] for i, h in enumerate(by_kind["human"])}
    colours["chance"] = CHANCE_COLOUR
    return colours


@dataclass
class Probe:
    path: Path
    listener: str
    layers: list[dict]
    diagnosis: list[dict]
    warnings: list[str] = field(default_factory=list)  # the probe run's own, and reading it
    train_dataset: str | None = (
        None  # where the probes' train split came from, if not the probed set
    )
    alignment: list[dict] = field(default_factory=list)  # alignment.csv rows: direction cosines


PROBE_FILES = ("layers.csv", "curves.csv", "diagnosis.csv")


def _read_json(path: Path) -> dict:
    """A probe or run file that may be absent; a damaged one is one clear error."""
    hint = "rerun the command that wrote it (or remove the file)"
    return read_json(path, hint) if path.is_file() else {}


def _read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _number(value: str | None) -> float:
    """A CSV cell as a float; empty means not measured (NaN), anything else must parse."""
    return float("nan") if value in (None, "") else float(value)


def load_probe(path: str | Path) -> Probe:
    """A probe output folder: layers.csv (long format) or the pipeline's curves.csv and lens.csv
    (+ summary.json), plus diagnosis.csv and an optional manifest.json. Rows that cannot be read
    are left out with a warning, kept in `Probe.warnings` for the report."""
    path = Path(path)
    if not any((path / name).is_file() for name in PROBE_FILES):
        raise ConfigError(
            f"--probe {path}: no {', '.join(PROBE_FILES)}; is this a "
            "`vocalgrad probe` output folder?"
        )
    layers_csv = path / "layers.csv"
    raw = (
        [{**r, "row": f"layers.csv:{i + 2}"} for i, r in enumerate(_read_csv(layers_csv))]
        if layers_csv.is_file()
        else _from_pipeline(path)
    )
    layers, bad = [], []
    for r in raw:
        try:
            layer = {
                **r,
                "layer_index": int(float(r["layer_index"])),
                **{k: _number(r.get(k)) for k in ("balanced_accuracy", "ci_lo", "ci_hi")},
            }
            if not all(r.get(k) for k in ("category", "stage", "probe")):
                raise ValueError("category, stage or probe is empty")
        except (KeyError, TypeError, ValueError) as err:
            bad.append(f"{r['row']} ({type(err).__name__}: {err})")
            continue
        layers.append(layer)
    summary, manifest = _read_json(path / "summary.json"), _read_json(path / "manifest.json")
    who = manifest.get("listener") or summary.get("listener")
    listener = str(who.get("listener") if isinstance(who, dict) else who) if who else path.name
    notes = [str(w) for w in summary.get("warnings", [])]
    if bad:
        message = (
            f"{path}: {len(bad)} of {len(raw)} probe rows could not be read and are "
            f"left out: {'; '.join(bad[:5])}{' ...' if len(bad) > 5 else ''}"
        )
        warnings.warn(message, stacklevel=2)
        notes.append(message)
    diagnosis_csv = path / "diagnosis.csv"
    diagnosis = _read_csv(diagnosis_csv) if diagnosis_csv.is_file() else []
    alignment_csv = path / "alignment.csv"
    alignment = (
        [
            {**r, "cosine": _number(r.get("cosine")), "null95": _number(r.get("null95"))}
            for r in _read_csv(alignment_csv)
        ]
        if alignment_csv.is_file()
        else []
    )
    return Probe(path, listener, layers, diagnosis, notes, summary.get("train_dataset"), alignment)


def _from_pipeline(path: Path) -> list[dict]:
    """`vocalgrad probe` output (curves.csv, lens.csv) in the layers.csv long format."""
    curves, lens = path / "curves.csv", path / "lens.csv"
    return long_rows(
        _read_csv(curves) if curves.is_file() else [], _read_csv(lens) if lens.is_file() else []
    )


@dataclass
class DatasetInfo:
    path: Path
    build: dict
    report: dict
    rows: list[dict]
    card: str
    official: bool = False  # the published release: no references, provenance or verification
    audit: dict = field(default_factory=dict)  # the build's audit.json, if any


def load_dataset_info(path: str | Path) -> DatasetInfo | None:
    """The dataset folder's rows, build records and card; None when it holds none of them."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"--dataset {path}: no such folder")
    if is_official(path):
        return DatasetInfo(path, {}, {}, official_rows(path), "", official=True)
    rows = []
    for split in ("test", "train"):
        meta = path / split / "metadata.jsonl"
        if meta.is_file():
            rows += list(read_jsonl(meta))
    card = (path / "README.md").read_text() if (path / "README.md").is_file() else ""
    if not rows and not card:
        return None
    return DatasetInfo(
        path,
        _read_json(path / "build.json"),
        _read_json(path / "build_report.json"),
        rows,
        card,
        audit=_read_json(path / "audit.json"),
    )

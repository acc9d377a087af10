"""Read what the report shows: run folders, listeners, their colours, probe and dataset files."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vocalgrad.dataset import is_official, official_rows, read_jsonl
from vocalgrad.evaluation.evaluate import load_results

HUMAN_PREFIX = "human"
ADAPTIVE_TIER = "adaptive"
SWEEP_TIER = re.compile(r"p\d+$")  # tiers of the psychometric design (plan.py: p1..pN)
CHANCE_COLOUR = "#9e9e9e"
# tab10 without its grey, so grey stays free for chance; humans get dark, distinct tones
MODEL_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#bcbd22", "#17becf")
HUMAN_COLOURS = ("#111111", "#5d4037", "#37474f")
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


def load_runs(dirs: Iterable[str | Path]) -> list[Run]:
    runs = []
    for d in dirs:
        manifest, rows = load_results(d)
        adaptive_path = Path(d) / "adaptive.json"
        adaptive = json.loads(adaptive_path.read_text()) if adaptive_path.is_file() else {}
        entries = [{**e, "listener": e.get("listener") or adaptive.get("listener") or Path(d).name}
                   for e in adaptive.get("results", [])]
        runs.append(Run(Path(d), manifest, rows, entries))
    return runs


def is_human(listener: str) -> bool:
    return listener.startswith(HUMAN_PREFIX)


def listener_of(row: dict, run: Run) -> str:
    return str(row.get("listener") or run.manifest.get("listener", {}).get("listener") or run.name)


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
    """One colour per listener, fixed by name order so every figure and table agrees."""
    models = sorted(x for x in set(listeners) if not is_human(x))
    humans = sorted(x for x in set(listeners) if is_human(x))
    colours = {m: MODEL_COLOURS[i % len(MODEL_COLOURS)] for i, m in enumerate(models)}
    colours |= {h: HUMAN_COLOURS[i % len(HUMAN_COLOURS)] for i, h in enumerate(humans)}
    colours["chance"] = CHANCE_COLOUR
    return colours


@dataclass
class Probe:
    path: Path
    listener: str
    layers: list[dict]
    diagnosis: list[dict]


def _read_csv(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def load_probe(path: str | Path) -> Probe | None:
    """A probe output folder, or None: layers.csv (long format) or the pipeline's curves.csv and
    lens.csv, plus diagnosis.csv and an optional manifest.json."""
    path = Path(path)
    layers_csv, diagnosis_csv = path / "layers.csv", path / "diagnosis.csv"
    curves_csv = path / "curves.csv"
    if not layers_csv.is_file() and not curves_csv.is_file() and not diagnosis_csv.is_file():
        return None
    raw = _read_csv(layers_csv) if layers_csv.is_file() else _from_pipeline(path)
    layers = []
    for r in raw:
        try:
            layers.append({**r, "layer_index": int(float(r["layer_index"])),
                           **{k: float(r[k]) if r.get(k) not in (None, "") else float("nan")
                              for k in ("balanced_accuracy", "ci_lo", "ci_hi")}})
        except (KeyError, ValueError):
            continue
    manifest = path / "manifest.json"
    listener = path.name
    if manifest.is_file():
        meta = json.loads(manifest.read_text())
        listener = str(meta.get("listener", {}).get("listener") if isinstance(meta.get("listener"), dict)
                       else meta.get("listener") or listener)
    diagnosis = _read_csv(diagnosis_csv) if diagnosis_csv.is_file() else []
    return Probe(path, listener, layers, diagnosis)


def _split_stage(name: str) -> tuple[str, int]:
    """"encoder.3" -> ("encoder", 3); "lm.12@audio" -> ("lm@audio", 12); "projector" -> (.., 0)."""
    m = re.match(r"^(.*?)\.(\d+)(@.*)?$", name)
    return (m.group(1) + (m.group(3) or ""), int(m.group(2))) if m else (name, 0)


def _from_pipeline(path: Path) -> list[dict]:
    """`vocalgrad probe` output (curves.csv, lens.csv) in the layers.csv long format."""
    out: list[dict] = []
    curves = path / "curves.csv"
    for r in _read_csv(curves) if curves.is_file() else []:
        stage, layer = _split_stage(r["stage"])
        kind = r.get("kind", "model")
        probes = {"model": (("linear", "linear"), ("mlp", "mlp"), ("shuffled", "linear_control"))}
        for probe, col in probes.get(kind, ((kind, "linear"),)):
            out.append({"category": r["category"], "stage": stage, "layer_index": layer,
                        "probe": probe, "balanced_accuracy": r.get(f"{col}_ba"),
                        "ci_lo": r.get(f"{col}_lo"), "ci_hi": r.get(f"{col}_hi")})
    lens = path / "lens.csv"
    for r in _read_csv(lens) if lens.is_file() else []:
        stage, layer = _split_stage(r["layer"])
        out.append({"category": r["category"], "stage": stage, "layer_index": layer, "probe": "lens",
                    "balanced_accuracy": r.get("ba"), "ci_lo": r.get("ba_lo"), "ci_hi": r.get("ba_hi")})
    return out


@dataclass
class DatasetInfo:
    path: Path
    build: dict
    report: dict
    rows: list[dict]
    card: str
    official: bool = False  # the published release: no references, provenance or verification


def load_dataset_info(path: str | Path) -> DatasetInfo | None:
    path = Path(path)
    if not path.is_dir():
        return None
    def read_json(name: str) -> dict:
        f = path / name
        return json.loads(f.read_text()) if f.is_file() else {}
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
    return DatasetInfo(path, read_json("build.json"), read_json("build_report.json"), rows, card)

"""The ladder: from hearing a change to reasoning about it, one rung per question format (and
prompt variant) on the same sources, built, asked and scored as one.

A ladder folder holds one dataset per format that declares rungs (`QuestionFormat.rungs`),
``<format>/``, and an index ``ladder.json`` naming the rungs in order: each rung's dataset
and the prompt variants it is asked with (detection is the gradual dataset asked "does it
change?", direction the same dataset asked which way). A ladder run folder holds one run
folder per rung, ``<rung>/``, and its own ``ladder.json``. Scores come from
`vocalgrad.evaluation.score.score_rows`; each rung's drop from the rung below is a paired
difference over the sources both rungs hold (`rung_drop`).

The two-dimension and reasoning rungs add their own comparisons: `interference`, congruent
minus incongruent accuracy in the selective-attention rung (two dimensions change at once, the
question names one), paired by source, per ordered pair (named dimension, distractor): which
dimension a listener confuses with which; and `reasoning_drops`, each reasoning prompt variant
against the bare question on the same items (the reasoning rung's own drop is measured so,
`Rung.against`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vocalgrad import formats
from vocalgrad.dataset import content_sha256
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import EvalConfig, evaluate
from vocalgrad.evaluation.score import ListenerScore, score_rows
from vocalgrad.files import atomic_write_text
from vocalgrad.formats.base import QuestionFormat, Rung
from vocalgrad.listeners.base import Listener
from vocalgrad.questions import reasoning
from vocalgrad.records import CONSTANT, LABELS
from vocalgrad.stats import cluster_ids, group_rng, paired_comparison, weighted_ci
from vocalgrad.stimuli.audit import REPORT_FILE
from vocalgrad.stimuli.audit.gates import joint_family
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.plan import plan_conditions

INDEX = "ladder.json"
INDEX_VERSION = 1
DETECTION_WORDS = ("yes", "no")  # a detection question's answers: something changed, or not


def ladder_rungs() -> list[tuple[Rung, QuestionFormat]]:
    """Every rung of every registered format, in ladder order (`Rung.order`)."""
    found = [(rung, fmt) for fmt in formats.listed() for rung in fmt.rungs]
    return sorted(found, key=lambda pair: (pair[0].order, pair[0].name))


def rung_of(row: Mapping[str, Any]) -> str | None:
    """The rung a result row answers: its format's rung asked with the row's prompt variant,
    or None (a variant no rung asks, a format off the ladder or unknown here)."""
    fmt = formats.find(formats.row_format(row))
    if fmt is None:
        return None
    variant = row.get("variant", "default")
    return next((rung.name for rung in fmt.rungs if variant in rung.variants), None)


def rung_order() -> dict[str, float]:
    """Rung name -> its place on the ladder."""
    return {rung.name: rung.order for rung, _ in ladder_rungs()}


def is_ladder(path: str | Path) -> bool:
    """Whether `path` is a ladder folder (built or evaluated): it holds ``ladder.json``."""
    return (Path(path) / INDEX).is_file()


def read_index(path: str | Path) -> dict:
    """A ladder folder's index.

    Raises
    ------
    ConfigError
        It holds no index, or one that cannot be read.
    """
    index = Path(path) / INDEX
    if not index.is_file():
        raise ConfigError(
            f"{path}: no {INDEX}; build a ladder with `vocalgrad build --protocol ladder`"
        )
    try:
        data = json.loads(index.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"{index}: not a readable ladder index ({err}); build it again") from err
    if not isinstance(data, dict) or not isinstance(data.get("rungs"), list):
        raise ConfigError(f"{index}: not a ladder index (no list of rungs); build it again")
    return data


def _write_index(path: Path, data: Mapping[str, Any]) -> None:
    atomic_write_text(path / INDEX, json.dumps(data, indent=2, default=str) + "\n")


def build_ladder(
    config: BuildConfig,
    out: str | Path,
    build: Callable[[BuildConfig, Path], Mapping[str, Any]],
) -> dict:
    """Build every rung's dataset into ``out/<format>/`` and index them in ``out/ladder.json``.

    One dataset per format that declares rungs, all from `config` with its format set; a
    format that refuses the config's endpoint rove (`QuestionFormat.rove_refusal`) is built
    without it, and the index says so. A format that cannot plan a single item from the
    config (a two-dimension format given one dimension) is skipped, its reason in the index
    (``datasets[format]["skipped"]``) and said by the caller; where no format can, the first
    reason is raised. Each build resumes as a single build does, so a rerun of the same
    command resumes the ladder.

    Parameters
    ----------
    config
        The shared build settings (sources, sizes, dimensions, seed, ...).
    out
        The ladder folder.
    build
        ``build(config, folder) -> build report``: how one dataset is built (the API's
        `vocalgrad.stimuli.build.build` with the caller's executor, audit and overwrite).

    Returns
    -------
    dict
        The index as written: ``rungs`` in order (rung, order, format, dataset folder,
        variants), per dataset its content hash, clips kept, its own audit verdict and
        notes, or why it was skipped, and ``audit``: every dataset's gates as one family
        (`ladder_audit`), which decides the ladder's verdict.

    Raises
    ------
    ConfigError
        No format can plan an item from `config` (the reason of the first).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rungs = ladder_rungs()
    names = list(dict.fromkeys(fmt.name for _, fmt in rungs))
    index: dict[str, Any] = {
        "protocol": "ladder",
        "version": INDEX_VERSION,
        "config": config.to_dict() | {"format": None},
        "rungs": [
            {
                "rung": rung.name,
                "order": rung.order,
                "format": fmt.name,
                "dataset": fmt.name,
                "variants": list(rung.variants),
            }
            for rung, fmt in rungs
        ],
        "datasets": {},
    }
    _write_index(out, index)  # first: an interrupted ladder is still recognised and resumed
    refused: dict[str, ConfigError] = {}
    for name in names:
        fmt = formats.get(name)
        notes = []
        settings = config.replace(format=name)
        if config.rove_endpoints and fmt.rove_refusal:
            settings = BuildConfig(**{**settings.to_dict(), "rove_endpoints": False})
            notes.append(f"built without the endpoint rove: {fmt.rove_refusal}")
        try:
            plan_conditions(settings)  # what this format can ask of the config's dimensions
        except ConfigError as err:
            refused[name] = err
            index["datasets"][name] = {"skipped": str(err), "notes": notes}
            _write_index(out, index)
            continue
        report = build(settings, out / name)
        audit = report.get("shortcut_audit") or {}
        index["datasets"][name] = {
            "content_sha256": content_sha256(out / name),
            "clips_kept": report.get("clips_kept"),
            "audit_passes": audit.get("passes"),
            "notes": notes,
        }
        _write_index(out, index)
    if len(refused) == len(names) and names:
        raise next(iter(refused.values()))
    index["audit"] = ladder_audit(out, index["datasets"])
    _write_index(out, index)
    return index


def ladder_audit(out: Path, datasets: Mapping[str, Mapping[str, Any]]) -> dict | None:
    """Every audited dataset's gates as one family (`gates.joint_family`): a ladder is one
    build, and its verdict holds its false alarms at the audit's alpha however many rungs it
    has. None where no dataset was audited.

    Parameters
    ----------
    out
        The ladder folder.
    datasets
        The index's ``datasets`` entries (``audit_passes`` None: not audited).

    Returns
    -------
    dict or None
        `joint_family`'s summary; ``passes`` None, with a ``reason``, where an audited
        dataset's report cannot be read.
    """
    reports = {}
    for name, entry in datasets.items():
        if entry.get("skipped") or entry.get("audit_passes") is None:
            continue
        try:
            reports[name] = json.loads((out / name / REPORT_FILE).read_text())
        except (OSError, ValueError) as err:
            return {"passes": None, "reason": f"{name}/{REPORT_FILE} cannot be read: {err}"}
    return joint_family(reports) if reports else None


def evaluate_ladder(
    ladder: str | Path,
    listener: Callable[[Path], Listener],
    out: str | Path,
    config: EvalConfig,
    *,
    run: Callable[..., Mapping[str, Any]] | None = None,
    progress: Callable[[str, str], None] | None = None,
    **options: Any,
) -> dict:
    """Ask one listener every rung of a ladder folder: rung ``r`` into ``out/r/``, with the
    rung's prompt variants (the config's other settings as given). Resumable: each rung is a
    run folder that resumes. A rung the listener cannot answer (a baseline that reads one end
    of a changing clip, asked about held clips) is skipped, and the index says why.

    Parameters
    ----------
    ladder
        A ladder folder (`build_ladder`).
    listener
        ``listener(dataset folder) -> Listener``: baselines learn from the dataset they
        answer about, so each rung gets its own.
    out
        The ladder run folder.
    config
        What to ask (its ``variants`` are each rung's).
    run
        ``run(dataset, listener, folder, config, **options) -> counts``; default
        `vocalgrad.evaluation.evaluate.evaluate`.
    progress
        Called with (rung, what happened: the items answered, or why it was skipped) after
        each rung.
    **options
        Passed to `run` (executor, retry_errors, use_cache), with each rung's
        ``audit_verdict`` where the index holds the ladder's joint audit.

    Returns
    -------
    dict
        The run index as written to ``out/ladder.json``: per rung its run folder, variants and
        counts, or why it was skipped.
    """
    ladder, out = Path(ladder), Path(out)
    index = read_index(ladder)
    run = run or evaluate
    joint = index.get("audit") or {}
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Any] = {
        "protocol": "ladder",
        "version": INDEX_VERSION,
        "ladder": str(ladder.absolute()),
        "rungs": [],
    }
    for entry in index["rungs"]:
        dataset = ladder / entry["dataset"]
        record = {**entry, "run": entry["rung"]}
        skipped = index.get("datasets", {}).get(entry["dataset"], {}).get("skipped")
        if skipped:
            record["skipped"] = f"not built: {skipped}"
        elif not (dataset / "test" / "metadata.jsonl").is_file():
            record["skipped"] = f"{dataset} holds no built dataset (rerun the ladder's build)"
        else:
            try:
                asked = listener(dataset)
                counts = run(
                    dataset,
                    asked,
                    out / entry["rung"],
                    dataclasses.replace(config, variants=tuple(entry["variants"])),
                    **options,
                    **_verdict(joint, entry["dataset"]),
                )
                record["counts"] = dict(counts)
            except ConfigError as err:
                record["skipped"] = str(err)
        written["rungs"].append(record)
        _write_index(out, written)
        if progress:
            counts = record.get("counts", {})
            progress(
                entry["rung"],
                f"skipped: {record['skipped']}"
                if "skipped" in record
                else f"{counts.get('total', 0) - counts.get('failed', 0)} of "
                f"{counts.get('total', 0)} items answered -> {out / entry['rung']}",
            )
    return written


def _verdict(joint: Mapping[str, Any], dataset: str) -> dict[str, list[str]]:
    """``audit_verdict`` for `evaluate`: the dimensions of `dataset` that fail the ladder's
    joint family (`ladder_audit`), where the index holds its verdict on the dataset; its
    own report alone would flag a rung of a clean ladder in about one build of three."""
    if joint.get("passes") is None or dataset not in joint.get("builds", ()):
        return {}
    return {"audit_verdict": sorted(joint.get("failing", {}).get(dataset, {}))}


def run_folders(path: str | Path) -> list[Path]:
    """The run folders of a ladder run folder (its rungs that were asked), in ladder order;
    any other folder as itself."""
    path = Path(path)
    if not is_ladder(path):
        return [path]
    index = read_index(path)
    return [
        path / entry["run"]
        for entry in index["rungs"]
        if "run" in entry and (path / entry["run"] / "results.jsonl").is_file()
    ]


def detection_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict]:
    """Detection answers ("does it change?", yes / no) as two-label rows that `score_rows`
    scores: a changing clip is the signal (``increase``), a constant clip the noise
    (``decrease``), "yes" says ``increase`` and "no" ``decrease``; anything else is
    unparsed. So accuracy, d′ and c of detection come from the one scoring code.

    Parameters
    ----------
    rows
        Result rows asked with a yes / no variant.

    Returns
    -------
    list of dict
        The rows with ``direction`` and ``predicted`` mapped (``correct`` as before).
    """
    said = {"yes": LABELS[0], "no": LABELS[1]}
    out = []
    for row in rows:
        truth = row.get("direction")
        if truth not in (*LABELS, CONSTANT):
            continue
        out.append(
            {
                **row,
                "direction": LABELS[1] if truth == CONSTANT else LABELS[0],
                "predicted": said.get(row.get("predicted") or ""),
                "llr": None,
            }
        )
    return out


def scorable(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict]]:
    """A listener's main-condition answers (no control, no error) by rung, detection rows
    mapped (`detection_rows`)."""
    by_rung: dict[str, list[dict]] = {}
    for row in rows:
        if row.get("control", "none") != "none" or row.get("error") is not None:
            continue
        rung = rung_of(row)
        if rung is not None:
            by_rung.setdefault(rung, []).append(dict(row))
    for rung, members in by_rung.items():
        if _asks_detection(members):
            by_rung[rung] = detection_rows(members)
    order = rung_order()
    return dict(sorted(by_rung.items(), key=lambda kv: order.get(kv[0], np.inf)))


def _asks_detection(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether rows were asked a yes / no (change detection) question."""
    from vocalgrad.questions.prompts import get_variant

    variants = {r.get("variant", "default") for r in rows}
    # the words' labels: a negated question's "yes" / "no" mean decrease / increase
    return all(
        (get_variant(v).labels or get_variant(v).options) == DETECTION_WORDS for v in variants
    )


def rung_drop(
    upper: Sequence[Mapping[str, Any]],
    lower: Sequence[Mapping[str, Any]],
    cluster: str = "source_id",
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
    """The drop in accuracy from one rung to the next, paired by source: over the sources both
    rungs hold, the lower rung's accuracy minus the upper's (> 0: the upper rung is harder),
    each rung's accuracy pooled over its items of those sources, with a 95% CI resampling the
    sources whole (`vocalgrad.stats.weighted_ci`: bootstrap, or a jackknife with few).

    Paired by source, not by item: the rungs ask different clips of the same recordings, so
    what a recording makes easy or hard is held fixed and only the question differs.

    Parameters
    ----------
    upper, lower
        Scored rows (``direction`` increase / decrease, ``predicted``) of the upper and the
        lower rung.
    cluster
        The field that pairs and clusters: ``source_id`` (or ``speaker_id``).
    n_boot
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resampling.

    Returns
    -------
    dict
        ``drop``, ``drop_lo``, ``drop_hi`` (accuracy points, 0-1), ``accuracy_upper``,
        ``accuracy_lower`` on the shared sources, ``n_upper``, ``n_lower`` (items),
        ``n_clusters`` and ``ci_method``.
    """
    nan = float("nan")
    up = [r for r in upper if r.get("direction") in LABELS]
    low = [r for r in lower if r.get("direction") in LABELS]
    shared = {r.get(cluster) for r in up} & {r.get(cluster) for r in low}
    up = [r for r in up if r.get(cluster) in shared]
    low = [r for r in low if r.get(cluster) in shared]
    out: dict[str, Any] = {"n_upper": len(up), "n_lower": len(low), "n_clusters": len(shared)}
    if not shared:
        return (
            out
            | dict.fromkeys(("drop", "drop_lo", "drop_hi", "accuracy_upper", "accuracy_lower"), nan)
            | {"ci_method": "none"}
        )
    ids = cluster_ids([*up, *low], cluster)
    n = int(ids.max()) + 1
    sums = np.zeros((n, 4))  # correct and items, upper then lower, per source
    for i, row in zip(ids[: len(up)], up, strict=True):
        sums[i] += (row.get("predicted") == row["direction"], 1, 0, 0)
    for i, row in zip(ids[len(up) :], low, strict=True):
        sums[i] += (0, 0, row.get("predicted") == row["direction"], 1)

    def statistic(w: np.ndarray) -> np.ndarray:
        t = w @ sums
        with np.errstate(divide="ignore", invalid="ignore"):
            return t[..., 2] / t[..., 3] - t[..., 0] / t[..., 1]

    total = sums.sum(axis=0)
    point = float(total[2] / total[3] - total[0] / total[1])
    lo, hi, method = weighted_ci(
        statistic, point, n, group_rng(seed, "rung_drop"), n_boot, proportion=False
    )
    return out | {
        "drop": point,
        "drop_lo": lo,
        "drop_hi": hi,
        "accuracy_upper": float(total[0] / total[1]),
        "accuracy_lower": float(total[2] / total[3]),
        "ci_method": method,
    }


def item_drop(
    upper: Sequence[Mapping[str, Any]],
    lower: Sequence[Mapping[str, Any]],
    n_boot: int = 2000,
    seed: int = 0,
) -> dict:
    """The drop in accuracy from one rung to another asked on the same items (a text step
    added to the lower rung's question: reasoning on direction), paired by item (and mode),
    with a 95% CI clustered by source (`vocalgrad.stats.paired_comparison`).

    Paired by item, not by source: the clips are the same, so the difference is what the
    question costs and nothing of the stimuli.

    Parameters
    ----------
    upper, lower
        Scored rows of the upper rung and of the rung it is measured from; an upper rung
        asked with several variants pairs each of its rows with the lower rung's row.
    n_boot
        Bootstrap resamples (0: no interval).
    seed
        Seed of the resampling.

    Returns
    -------
    dict
        `rung_drop`'s keys (``drop``, ``drop_lo``, ``drop_hi`` in accuracy points, 0-1;
        ``accuracy_upper``, ``accuracy_lower`` over the paired items; ``n_upper``, ``n_lower``:
        pairs; ``n_clusters``; ``ci_method``) and ``paired``: "item".
    """

    def keyed(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
        return [{**r, "item_id": f"{r['item_id']}|{r.get('mode')}"} for r in rows]

    compared = paired_comparison(keyed(upper), keyed(lower), n_boot=n_boot, seed=seed)
    return _as_drop(compared) | {
        "accuracy_upper": compared["accuracy_a"],
        "accuracy_lower": compared["accuracy_b"],
        "n_upper": compared["n"],
        "n_lower": compared["n"],
        "n_clusters": compared["n_clusters"],
        "ci_method": compared["ci_method"],
        "paired": "item",
    }


def _as_drop(compared: Mapping[str, Any]) -> dict:
    """A `paired_comparison` of an upper rung (a) against a lower one (b) as a drop: lower
    minus upper accuracy and its CI (a drop of nothing reads 0.0, not -0.0)."""
    return {
        "drop": 0.0 - compared["difference"],
        "drop_lo": 0.0 - compared["difference_hi"],
        "drop_hi": 0.0 - compared["difference_lo"],
    }


def ladder_scores(
    rows: Iterable[Mapping[str, Any]], n_boot: int = 2000, seed: int = 0
) -> list[dict]:
    """One listener's ladder: per rung it was asked, in order, the `score_rows` overall row
    (accuracy, d′ with clustered CIs, ...) and its drop: from the rung below it that the
    listener also answered, paired by source (`rung_drop`; None on the lowest), or, for a
    rung measured against another on the same items (`Rung.against`: reasoning against
    direction), from that rung, paired by item (`item_drop`; None where it was not answered).

    Parameters
    ----------
    rows
        The listener's result rows, every rung together.
    n_boot
        Bootstrap resamples per interval.
    seed
        Seed of the resampling.

    Returns
    -------
    list of dict
        ``{"rung", "order", "answered", "score": overall row, "fewest_sources": the fewest
        sources of any category, "drop": the drop's dict or None}``; a drop names the rung it
        is from (``from``) and how it is paired (``paired``: "source" or "item").
        ``answered`` is False where no answer was one of the rung's words (a reference that
        answers which way, asked whether): its drop is None, and the next rung's drop is from
        the rung below that was answered.
    """
    order = rung_order()
    against = {rung.name: rung.against for rung, _ in ladder_rungs()}
    by_rung = scorable(rows)
    out: list[dict] = []
    answered_rungs: dict[str, list[dict]] = {}
    below: str | None = None
    for rung, members in by_rung.items():
        answered = any(r.get("predicted") in LABELS for r in members)
        score: ListenerScore = score_rows(members, by=("category",), n_boot=n_boot, seed=seed)
        groups = [g.get("n_clusters") for g in score.table[1:] if g.get("n_clusters")]
        drop = None
        base = against.get(rung)
        if answered and base is not None:
            if base in answered_rungs:
                drop = item_drop(members, answered_rungs[base], n_boot, seed) | {"from": base}
        elif answered and below is not None:
            drop = rung_drop(members, answered_rungs[below], n_boot=n_boot, seed=seed) | {
                "from": below,
                "paired": "source",
            }
        out.append(
            {
                "rung": rung,
                "order": order.get(rung),
                "answered": answered,
                "score": score.overall,
                "fewest_sources": min(groups) if groups else score.overall.get("n_clusters"),
                "drop": drop,
            }
        )
        if answered:
            below = rung
            answered_rungs[rung] = members
    return out


# -- two dimensions and reasoning


@dataclass(frozen=True)
class InterferenceCell:
    """One ordered pair's interference: accuracy on congruent items (both dimensions move the
    same way) minus accuracy on incongruent ones, over the sources that have both.

    Attributes
    ----------
    named, distractor
        The dimension the question names, and the other one changing in the clip.
    congruent, incongruent
        Accuracy (proportion correct) on each kind of item.
    effect, lo, hi
        Congruent minus incongruent (proportion), and its 95% CI clustered by source
        (`vocalgrad.stats.weighted_ci`'s rule: NaN with one source).
    ci_method
        The interval's method.
    n_congruent, n_incongruent, n_sources
        Items of each kind, and the sources that have both.
    """

    named: str
    distractor: str
    congruent: float
    incongruent: float
    effect: float
    lo: float
    hi: float
    ci_method: str
    n_congruent: int
    n_incongruent: int
    n_sources: int


@dataclass(frozen=True)
class Interference:
    """The interference matrix of one listener: a cell per ordered pair asked.

    Attributes
    ----------
    dimensions
        Every dimension named or distracting, sorted: the matrix's rows and columns.
    cells
        (named, distractor) -> `InterferenceCell`.
    """

    dimensions: tuple[str, ...]
    cells: Mapping[tuple[str, str], InterferenceCell] = field(default_factory=dict)

    def matrix(self, key: str = "effect") -> np.ndarray:
        """One field of every cell as a matrix: rows the named dimension, columns the
        distractor, in `dimensions` order; NaN where a pair was not asked."""
        index = {d: i for i, d in enumerate(self.dimensions)}
        out = np.full((len(index), len(index)), np.nan)
        for (named, distractor), cell in self.cells.items():
            out[index[named], index[distractor]] = getattr(cell, key)
        return out

    def to_dict(self) -> dict:
        """As plain data (JSON-ready): the dimensions and one record per cell."""
        return {
            "dimensions": list(self.dimensions),
            "cells": [vars(c) for c in self.cells.values()],
        }


def interference(rows: Iterable[Mapping], n_boot: int = 2000, seed: int = 0) -> Interference:
    """The interference effect of one listener, per ordered pair (named, distractor).

    Why: a listener that hears the named dimension alone answers congruent and incongruent
    items alike; one that confuses the distractor with it answers congruent items better
    (both move its way) and incongruent ones worse. Paired by source: every source carries
    both kinds of item for each pair, so the difference is not a difference of sources.

    Parameters
    ----------
    rows
        Scored result rows of one listener, prompt variant and mode (the main condition:
        rows with a ``control`` other than "none", an error, or no ``congruent`` field are
        left out), each with ``category``, ``second_category``, ``congruent``, ``source_id``
        and ``correct`` (an unparsed answer counts as wrong).
    n_boot
        Bootstrap replicates for the CI (with >= 50 sources; a jackknife t-interval below).
    seed
        Seeds the resampling, per pair.

    Returns
    -------
    Interference
        The cells, and the dimensions that index the matrix.
    """
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for r in rows:
        if r.get("control", "none") != "none" or r.get("error") or r.get("congruent") is None:
            continue
        if r.get("direction") not in LABELS:
            continue
        groups.setdefault((r["category"], r["second_category"]), []).append(r)
    cells = {}
    for pair, members in sorted(groups.items()):
        cell = _cell(pair, members, n_boot, seed)
        if cell is not None:
            cells[pair] = cell
    names = sorted({d for pair in cells for d in pair})
    return Interference(tuple(names), cells)


def _cell(
    pair: tuple[str, str], rows: Sequence[Mapping], n_boot: int, seed: int
) -> InterferenceCell | None:
    """One pair's cell over the sources with both kinds of item (None if none has both)."""
    kinds = {}
    for r in rows:
        kinds.setdefault(r["source_id"], set()).add(bool(r["congruent"]))
    paired = [r for r in rows if kinds[r["source_id"]] == {True, False}]
    if not paired:
        return None
    cid = cluster_ids(paired, "source_id")
    n_clusters = int(cid.max()) + 1
    correct = np.array([bool(r.get("correct")) for r in paired], dtype=float)
    congruent = np.array([bool(r["congruent"]) for r in paired])
    # per source: correct and count of congruent items, then of incongruent ones
    sums = np.zeros((n_clusters, 4))
    np.add.at(
        sums,
        cid,
        np.column_stack([correct * congruent, congruent, correct * ~congruent, ~congruent]),
    )

    def effect(w: np.ndarray) -> np.ndarray:
        t = w @ sums
        with np.errstate(divide="ignore", invalid="ignore"):
            return t[:, 0] / t[:, 1] - t[:, 2] / t[:, 3]

    k_c, n_c, k_i, n_i = sums.sum(axis=0)
    point = float(k_c / n_c - k_i / n_i)
    lo, hi, method = weighted_ci(
        effect,
        point,
        n_clusters,
        group_rng(seed, f"interference|{pair[0]}|{pair[1]}"),
        n_boot,
        proportion=False,
    )
    return InterferenceCell(
        named=pair[0],
        distractor=pair[1],
        congruent=float(k_c / n_c),
        incongruent=float(k_i / n_i),
        effect=point,
        lo=lo,
        hi=hi,
        ci_method=method,
        n_congruent=int(n_c),
        n_incongruent=int(n_i),
        n_sources=n_clusters,
    )


def reasoning_drops(
    rows: Iterable[Mapping], mode: str | None = None, n_boot: int = 2000, seed: int = 0
) -> dict[str, dict]:
    """The reasoning rung's cost for one listener: each reasoning variant's accuracy against
    the bare question's on the same items (`vocalgrad.stats.paired_comparison`, joined by
    item and clustered by source), and the three variants pooled (``"reasoning"``).

    Why: the clips are the same, so what a text step costs is the drop on the same items,
    not a difference between stimuli.

    Parameters
    ----------
    rows
        Result rows of one listener on one dataset, asked with the bare variant
        (`reasoning.BARE`) and reasoning variants; controls and errors are left out.
    mode
        Only rows of this mode ("choice" or "generate"); default: every mode, which must then
        be one.
    n_boot
        Bootstrap replicates (with >= 50 sources).
    seed
        Seeds the resampling.

    Returns
    -------
    dict
        variant -> `paired_comparison` of the variant (a) against the bare question (b),
        with ``drop``, ``drop_lo``, ``drop_hi``: bare minus reasoning accuracy and its CI
        (positive: the text step costs accuracy). Empty without bare or reasoning rows.

    Raises
    ------
    ValueError
        The rows hold several modes and none was chosen.
    """
    main = [
        r
        for r in rows
        if r.get("control", "none") == "none"
        and not r.get("error")
        and (mode is None or r.get("mode") == mode)
    ]
    modes = {r.get("mode") for r in main}
    if len(modes) > 1:
        raise ValueError(f"rows of several modes ({', '.join(sorted(map(str, modes)))}): pick one")
    bare = [r for r in main if r.get("variant") == reasoning.BARE]
    by_variant = {
        v: [r for r in main if r.get("variant") == v]
        for v in reasoning.NAMES
        if any(r.get("variant") == v for r in main)
    }
    if not bare or not by_variant:
        return {}
    by_variant[reasoning.RUNG] = [r for v in reasoning.NAMES for r in by_variant.get(v, [])]
    out = {}
    for variant, asked in by_variant.items():
        compared = paired_comparison(asked, bare, n_boot=n_boot, seed=seed)
        out[variant] = compared | _as_drop(compared)
    return out

"""The whole analysis for one listener: features -> probes + controls -> lens -> diagnosis.

Outputs (in `out`): `summary.json`, `curves.csv`, `lens.csv`, `diagnosis.csv`, `diagnosis.md`,
`items.csv` (per item: probe prediction, lens readout, model answer) and `curves_<cat>.png`.

Anything that changes what a number means (a control or the lens unavailable, behaviour read
from the lens because the eval results lack items, lens ties, stages the listener could not
find) is a warning: printed with `warnings.warn` and kept in `summary.json` ("warnings") and
`diagnosis.md`, so it travels with the numbers.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from vocalgrad.dataset import content_sha256, load_rows
from vocalgrad.errors import CapabilityError, ConfigError, VocalgradError, did_you_mean
from vocalgrad.executors import Executor
from vocalgrad.listeners.adapters import DSPListener, randomised
from vocalgrad.listeners.base import Listener
from vocalgrad.probing import report
from vocalgrad.probing.alignment import ANSWER, alignment
from vocalgrad.probing.diagnose import diagnose, late_stages, stage_order, thresholds
from vocalgrad.probing.features import Features, extract, feature_key
from vocalgrad.probing.lens import behaviour_from_lens, behaviour_from_results, lens_curve
from vocalgrad.probing.pooling import POOLINGS
from vocalgrad.probing.probes import ProbeSettings, fit_category, labels
from vocalgrad.probing.stats import balanced_accuracy_ci
from vocalgrad.progress import progress_callback
from vocalgrad.records import LABELS, ProbeResult
from vocalgrad.signal.kinds import row_kind
from vocalgrad.stats import cluster_ids


@dataclass(frozen=True)
class ProbeConfig:
    """Every setting of a probing run.

    Attributes
    ----------
    categories : tuple of str
        Categories to probe; empty: every category in the rows.
    pooling : str
        How a sequence stage becomes one vector per item (one of `POOLINGS`).
    variant : str
        The prompt variant the listener hears while its states are read.
    settings : ProbeSettings
        Probe seeds, bootstrap draws and MLP steps.
    random_control, dsp_control : bool
        Also probe the random-weights twin / the plain log-mel reference.
    batch_size : int
        Items per model pass.
    threads : int
        Torch threads for the solvers; 1 keeps results identical on every machine (the
        MLP's float32 sums depend on the thread count).
    """

    categories: tuple[str, ...] = ()
    pooling: str = "segments16"
    variant: str = "default"
    settings: ProbeSettings = field(default_factory=ProbeSettings)
    random_control: bool = True
    dsp_control: bool = True
    batch_size: int = 8
    threads: int = 1

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ConfigError(
                f"unknown pooling {self.pooling!r}{did_you_mean(self.pooling, POOLINGS)}; "
                f"choose from {', '.join(POOLINGS)}"
            )


def _items(rows: Sequence[dict], category: str) -> list[dict]:
    items = [r for r in rows if r["category"] == category and r["direction"] in LABELS]
    return sorted(items, key=lambda r: (r["split"], r["item_id"]))


def _extract(
    items: list[dict],
    listener: Listener,
    cache: Path,
    sha: str,
    category: str,
    config: ProbeConfig,
    with_lens: bool,
    executor: Executor | None,
) -> Features:
    key = feature_key(
        sha,
        listener,
        category,
        config.variant,
        config.pooling,
        [r["item_id"] for r in items],
        [row_kind(r) for r in items],
    )
    return extract(
        items,
        listener,
        cache / key,
        category=category,
        pooling=config.pooling,
        variant=config.variant,
        batch_size=config.batch_size,
        with_lens=with_lens,
        executor=executor,
    )


def _curve_records(
    fits,
    stages_kind: dict[str, str],
    late: set[str],
    order: list[str],
    y: np.ndarray,
    clusters: np.ndarray,
    n_boot: int,
) -> list[dict]:
    pos = y > 0.5
    blocks = {
        "linear": (fits.linear > 0)[:, None] == pos,
        "linear_control": (fits.linear_control > 0) == pos,
    }
    if fits.mlp is not None:
        blocks["mlp"] = (fits.mlp > 0) == pos
        blocks["mlp_control"] = (fits.mlp_control > 0) == pos
    stats = {k: balanced_accuracy_ci(v, pos, clusters, n_boot, seed=2) for k, v in blocks.items()}
    records = []
    for i, stage in enumerate(fits.stages):
        rec: dict = {
            "stage": stage,
            "order": order.index(stage) if stage in order else -1,
            "kind": stages_kind[stage],
            "late": stage in late,
            "n_test": len(y),
            "best_c": float(np.exp(np.mean(np.log(fits.best_c[i])))),
        }
        for k, (ba, lo, hi) in stats.items():
            rec |= {f"{k}_ba": float(ba[i]), f"{k}_lo": float(lo[i]), f"{k}_hi": float(hi[i])}
        for p in ("linear", "mlp"):
            if f"{p}_ba" in rec:
                rec[f"{p}_selectivity"] = rec[f"{p}_ba"] - rec[f"{p}_control_ba"]
        records.append(rec)
    return records


def probe_rows(
    rows: Sequence[dict],
    listener: Listener,
    out: str | Path,
    config: ProbeConfig,
    *,
    sha: str,
    cache: str | Path,
    behaviour: dict[str, str | None] | None = None,
    train_dataset: str | None = None,
    executor: Executor | None = None,
) -> ProbeResult:
    """Probe every selected category of `rows` and write the outputs to `out`.

    Parameters
    ----------
    rows : sequence of dict
        Dataset rows with ``item_id, category, direction, split, source_id`` and either
        ``path`` or in-memory ``audio`` (float32 samples at the listener's rate, or any
        array the listener reads). Only increase/decrease items are probed.
    listener : Listener
        A listener that declares `can_probe`; its lens is read where it declares `can_lens`.
    out : str or Path
        Output folder (see the module docstring for its files).
    config : ProbeConfig
        What to probe and how.
    sha : str
        Content hash of the rows' dataset: part of every feature-cache key.
    cache : str or Path
        Feature-cache folder, shared between runs.
    behaviour : dict, optional
        item_id -> the model's answer in an eval run; default: its last-layer lens.
    train_dataset : str, optional
        Where the train split came from, when it is not the probed dataset (recorded).
    executor : Executor, optional
        Where the model passes run; default here.

    Returns
    -------
    dict
        The summary written to ``summary.json``: per category the probe curves (balanced
        accuracy with 95% CIs clustered by source), lens, behaviour and diagnosis.

    Raises
    ------
    CapabilityError
        When the listener exposes no hidden states.
    ConfigError
        When a category has no increase/decrease items.
    """
    if not listener.can_probe:
        raise CapabilityError(
            f"{listener.listener_id} exposes no hidden states, so it cannot be "
            "probed; probe a whisper:, hf: or torch listener"
        )
    out, cache = Path(out), Path(cache)
    out.mkdir(parents=True, exist_ok=True)
    cats = config.categories or tuple(sorted({r["category"] for r in rows}))
    started = time.time()
    warned: list[str] = []
    for message in listener.manifest().get("warnings", []):
        _warn(warned, f"{listener.listener_id}: {message}")
    twin = None
    if config.random_control:
        try:
            twin = randomised(listener, seed=0)
        except ConfigError as err:
            _warn(warned, f"random-weights control unavailable: {err}")
    summary: ProbeResult = {
        "listener": listener.listener_id,
        "revision": listener.revision,
        "pooling": config.pooling,
        "seeds": config.settings.seeds,
        "settings": asdict(config.settings),
        "threads": config.threads,  # MLP results depend slightly on it
        "thresholds": thresholds(),
        "warnings": warned,
        "train_dataset": train_dataset,  # where the probes' train split came from, if not here
        "categories": {},
    }
    items_out: list[dict] = []
    answer_states: dict[str, tuple[dict[str, np.ndarray], list[dict]]] = {}
    previous = torch.get_num_threads()
    for cat in cats:
        items = _items(rows, cat)
        if not items:
            raise ConfigError(f"no increase/decrease items for dimension {cat!r}")
        feats = _extract(
            items, listener, cache, sha, cat, config, with_lens=True, executor=executor
        )
        order = stage_order(list(feats.stages))
        late = late_stages(order)
        x = {s: feats.stages[s] for s in order}
        answer_states[cat] = (
            {s: np.asarray(v, np.float32) for s, v in x.items() if s.endswith(ANSWER)},
            items,
        )
        kind = dict.fromkeys(order, "model")
        if twin is not None:
            rnd = _extract(items, twin, cache, sha, cat, config, with_lens=False, executor=executor)
            x |= {f"random:{s}": rnd.stages[s] for s in stage_order(list(rnd.stages))}
            kind |= {f"random:{s}": "random" for s in rnd.stages}
        if config.dsp_control:
            try:
                dsp = _extract(
                    items,
                    DSPListener(),
                    cache,
                    sha,
                    cat,
                    config,
                    with_lens=False,
                    executor=executor,
                )
                x |= dict(dsp.stages)
                kind |= dict.fromkeys(dsp.stages, "dsp")
            except VocalgradError as err:
                _warn(warned, f"DSP reference unavailable: {err}")
        torch.set_num_threads(config.threads)
        try:
            with progress_callback(f"probes {listener.listener_id} {cat}", unit="fit") as fitted:
                fits = fit_category(x, items, config.settings, progress=fitted)
        finally:
            torch.set_num_threads(previous)
        summary["split"] = fits.split
        test_rows = [items[i] for i in fits.test_index]
        y = labels(test_rows)
        clusters = cluster_ids(test_rows, "source_id")
        records = _curve_records(fits, kind, late, order, y, clusters, config.settings.n_boot)
        lens_rows: list[dict] = []
        lens_test = None
        if feats.lens is not None and feats.lens.shape[1]:
            lens_test = np.asarray(feats.lens[fits.test_index], np.float64)
            lens_rows = lens_curve(lens_test, y, clusters, config.settings.n_boot)
            ties = sum(r["ties"] for r in lens_rows)
            if ties:
                _warn(
                    warned,
                    f"{cat}: {ties} lens scores of {lens_test.size} are ties (both "
                    "words equally likely): no answer, scored 0.5 like a guess",
                )
        else:
            _warn(warned, f"lens unavailable: {feats.lens_note}")
        answers, source = _behaviour(test_rows, behaviour, lens_test, cat, warned)
        beh = None
        if answers is not None:
            no_answer = sum(a not in LABELS for a in answers)
            if no_answer:
                _warn(
                    warned,
                    f"{cat}: behaviour ({source}) has no answer for {no_answer} of "
                    f"{len(answers)} test items (unparsed or a lens tie): scored 0.5 like a "
                    "guess, so they pull the balanced accuracy to chance, not below it",
                )
            correct = np.array(
                [
                    float(a == r["direction"]) if a in LABELS else 0.5
                    for a, r in zip(answers, test_rows, strict=True)
                ]
            )
            ba, lo, hi = balanced_accuracy_ci(
                correct[None], y > 0.5, clusters, config.settings.n_boot, seed=3
            )
            beh = {
                "ba": float(ba[0]),
                "ba_lo": float(lo[0]),
                "ba_hi": float(hi[0]),
                "source": source,
                "n_no_answer": no_answer,
            }
        lens_stages = _lens_stages(listener, order, len(lens_rows))
        data = {
            "curves": records,
            "lens": lens_rows,
            "behaviour": beh,
            "lens_by_stage": [
                {**r, "stage": s} for r, s in zip(lens_rows, lens_stages, strict=False)
            ],
            "n_items": len(items),
            "n_test": len(test_rows),
            "n_test_sources": len(set(clusters.tolist())),
        }
        data["diagnosis"] = diagnose(records, beh)
        summary["categories"][cat] = data
        items_out += _item_rows(cat, test_rows, fits, records, lens_test, answers)
    summary["alignment"] = alignment(answer_states)
    summary["seconds"] = round(time.time() - started, 2)
    _write(out, summary, items_out)
    return summary


def _warn(recorded: list[str], message: str) -> None:
    """Print `message` as a warning and keep it (once) in the summary's warnings."""
    if message not in recorded:
        warnings.warn(message, stacklevel=2)
        recorded.append(message)


def _behaviour(
    test_rows: list[dict],
    results: dict | None,
    lens: np.ndarray | None,
    category: str,
    recorded: list[str],
) -> tuple[list | None, str]:
    """The model's answers on the test items: from the eval results when they cover every
    item (a partial run would score a different item set), else from the last-layer lens,
    with a warning that says which and why."""
    if results is not None:
        missing = [r["item_id"] for r in test_rows if r["item_id"] not in results]
        if not missing:
            return [results[r["item_id"]] for r in test_rows], "eval results"
        instead = (
            "the lens at the last layer is used instead"
            if lens is not None
            else ("behaviour is not measured (no lens either)")
        )
        _warn(
            recorded,
            f"{category}: the eval results lack {len(missing)} of {len(test_rows)} "
            f"test items (e.g. {missing[0]}); {instead}",
        )
    if lens is not None:
        return behaviour_from_lens(lens[:, -1]), "lens at the last layer"
    return None, ""


def _lens_stages(listener: Listener, order: list[str], n: int) -> list[str]:
    """The stage each of the n lens layers reads: the listener's `lens_stages`, else its
    ``@answer`` stages in depth order, else none known."""
    named = listener.lens_stages
    if named and len(named) == n:
        return list(named)
    answer = [s for s in order if s.endswith("@answer")]
    return answer if len(answer) == n else []


def _item_rows(
    cat: str,
    test_rows: list[dict],
    fits,
    records: list[dict],
    lens: np.ndarray | None,
    answers: list | None,
) -> list[dict]:
    model = [i for i, r in enumerate(records) if r["kind"] == "model"]
    best = max(model, key=lambda i: records[i]["linear_ba"])
    last = model[-1]
    out = []
    for k, r in enumerate(test_rows):
        out.append(
            {
                "category": cat,
                "item_id": r["item_id"],
                "source_id": r["source_id"],
                "direction": r["direction"],
                "probe_best_stage": fits.stages[best],
                "probe_best": "increase" if fits.linear[best, k] > 0 else "decrease",
                "probe_last_stage": fits.stages[last],
                "probe_last": "increase" if fits.linear[last, k] > 0 else "decrease",
                "lens_last": None if lens is None else round(float(lens[k, -1]), 4),
                "lens_best_layer": None if lens is None else int(np.argmax(np.abs(lens[k]))),
                "model_answer": None if answers is None else answers[k],
            }
        )
    return out


def _write(out: Path, summary: dict, items: list[dict]) -> None:
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=float) + "\n")
    curves = [{"category": c, **r} for c, d in summary["categories"].items() for r in d["curves"]]
    report.write_csv(out / "curves.csv", curves, report.CURVE_COLUMNS)
    lens_rows = []
    for c, d in summary["categories"].items():
        stage = {r["layer"]: r["stage"] for r in d["lens_by_stage"]}
        lens_rows += [{"category": c, **r, "stage": stage.get(r["layer"], "")} for r in d["lens"]]
    report.write_csv(
        out / "lens.csv",
        lens_rows,
        ["category", "layer", "stage", "ba", "ba_lo", "ba_hi", "auc", "increase_rate", "ties"],
    )
    diag = []
    for c, d in summary["categories"].items():
        b = d["behaviour"] or {}
        diag.append(
            {
                "category": c,
                "verdict": d["diagnosis"]["verdict"],
                "behaviour_ba": b.get("ba"),
                "behaviour_lo": b.get("ba_lo"),
                "behaviour_hi": b.get("ba_hi"),
                "behaviour_source": b.get("source"),
                "n_test": d["n_test"],
                "n_test_sources": d["n_test_sources"],
                "evidence": " | ".join(d["diagnosis"]["evidence"]),
                "reason": d["diagnosis"]["reason"],
            }
        )
    report.write_csv(out / "diagnosis.csv", diag)
    report.write_csv(out / "items.csv", items)
    report.write_csv(
        out / "alignment.csv",
        [
            {
                **r,
                "n_pairs_a": summary["alignment"]["n_pairs"].get(r["category_a"]),
                "n_pairs_b": summary["alignment"]["n_pairs"].get(r["category_b"]),
            }
            for r in summary["alignment"]["rows"]
        ],
        ["stage", "category_a", "category_b", "kind", "cosine", "null95", "n_pairs_a", "n_pairs_b"],
    )
    (out / "diagnosis.md").write_text(report.markdown(summary))
    for c, d in summary["categories"].items():
        report.save_curves(out / f"curves_{c}.png", summary["listener"], c, d)


def probe_dataset(
    dataset: str | Path,
    listener: Listener | str,
    out: str | Path,
    config: ProbeConfig | None = None,
    *,
    results: str | Path | None = None,
    cache: str | Path | None = None,
    train_from: str | Path | None = None,
    executor: Executor | None = None,
) -> ProbeResult:
    """`vocalgrad probe`: probe a dataset folder with a listener (object or spec string).

    Parameters
    ----------
    dataset : str or Path
        A dataset folder.
    listener : Listener or str
        A listener, or a spec such as ``whisper:tiny.en`` loaded with `load_listener`.
    out : str or Path
        Output folder.
    config : ProbeConfig, optional
        Default `ProbeConfig()`.
    results : str or Path, optional
        An eval run of the same listener: its answers are the behaviour the probes are read
        against (default: the last-layer lens).
    cache : str or Path, optional
        Feature cache; default the vocalgrad cache's ``features`` folder.
    train_from : str or Path, optional
        Another dataset whose train split trains the probes, for a dataset without one;
        without it such a dataset is probed by grouped K-fold over its test split, as the
        summary's ``split`` says.
    executor : Executor, optional
        Where the model passes run.

    Returns
    -------
    dict
        As `probe_rows`.

    Raises
    ------
    ConfigError
        When no selected category can be probed (e.g. a stereo dimension on a mono model).
    """
    from vocalgrad.sources import default_cache_dir

    config = config or ProbeConfig()
    root = Path(dataset)
    rows = load_rows(root)
    sha = content_sha256(root)
    if train_from is not None:
        train = load_rows(train_from, splits=("train",))
        rows = [r for r in rows if r["split"] == "test"] + train
        sha = hashlib.sha256(f"{sha}|train:{content_sha256(train_from)}".encode()).hexdigest()
    if isinstance(listener, str):
        from vocalgrad.listeners import load_listener

        listener = load_listener(listener, dataset=root)
    from vocalgrad.evaluation.evaluate import check_categories, untestable_categories

    check_categories(rows, config.categories, root)
    asked = [r for r in rows if not config.categories or r["category"] in config.categories]
    untestable = untestable_categories(asked, listener)
    if untestable:  # the model hears a downmix: its states cannot hold a left-to-right course
        rows = [r for r in rows if r["category"] not in untestable]
        if not any(r["category"] not in untestable for r in asked):
            raise ConfigError(
                f"{listener.listener_id} cannot be probed on {', '.join(untestable)}: "
                + "; ".join(untestable.values())
            )
        warnings.warn(
            "not probed: " + "; ".join(f"{c} ({why})" for c, why in untestable.items()),
            stacklevel=2,
        )
    behaviour = behaviour_from_results(results) if results else None
    return probe_rows(
        rows,
        listener,
        out,
        config,
        sha=sha,
        cache=Path(cache) if cache else default_cache_dir() / "features",
        behaviour=behaviour,
        train_dataset=str(Path(train_from).resolve()) if train_from is not None else None,
        executor=executor,
    )

"""The Python API: every step of the pipeline as a function that returns an object.

The `vocalgrad` command is a thin layer over these functions, so a notebook and the CLI run
the same code and write the same folders::

    import vocalgrad
    ds = vocalgrad.build("out/x", source="builtin", n_test=2, n_train=0, categories=["volume"])
    run = vocalgrad.evaluate(ds, "baseline:ideal")
    run.accuracy      # overall accuracy, a float
    run.table()       # a pandas DataFrame per category: n, sources, accuracy and CI, d', c

Heavy dependencies (torch, transformers, ray) are imported only by the steps that need them.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vocalgrad.dataset import content_sha256, load_rows, resolve
from vocalgrad.defaults import N_BOOT
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import EvalConfig
from vocalgrad.files import FEATURE_CACHE, PROBE, REPORT, RUN, claim_output
from vocalgrad.listeners import Listener, load_listener
from vocalgrad.records import AuditReport, RunSummary

if TYPE_CHECKING:
    import pandas as pd

    from vocalgrad.parallel import TaskPool

__all__ = [
    "Dataset",
    "EvalConfig",
    "Run",
    "audit",
    "build",
    "build_ladder",
    "evaluate",
    "evaluate_ladder",
    "finetune",
    "load_dataset",
    "open_run",
    "probe",
    "report",
    "score",
    "verify",
]

PathLike = str | os.PathLike
TABLE_COLUMNS = (
    "n",
    "n_clusters",
    "accuracy",
    "accuracy_lo",
    "accuracy_hi",
    "dprime",
    "dprime_lo",
    "dprime_hi",
    "criterion",
    "criterion_lo",
    "criterion_hi",
    "unparsed_rate",
    "ci_method",
)


@dataclass(frozen=True)
class Dataset:
    """A benchmark folder on disk (ours, or the official release layout).

    Attributes
    ----------
    path : Path
        The folder: ``metadata.jsonl`` per split, audio, ``README.md`` card and ``build.json``.
    report : dict or None
        What `build` reported (clips kept and dropped, refusals, verification, the audit);
        None for a dataset opened with `load_dataset`.
    """

    path: Path
    report: dict | None = field(default=None, compare=False, repr=False)

    def __fspath__(self) -> str:
        return str(self.path)

    def rows(self, split: str | None = None) -> list[dict]:
        """Metadata rows (one per clip), of one split or of all.

        Parameters
        ----------
        split : str or None
            ``test`` or ``train``; None for both.

        Returns
        -------
        list of dict
            `vocalgrad.records.DatasetRow`s in file order, validated, each with its clip's
            absolute ``path`` added (times in seconds, rates in Hz, measures in the row's
            ``measured_unit``).

        Raises
        ------
        DatasetError
            The folder holds no dataset, or a row breaks the schema.
        """
        return load_rows(self.path) if split is None else load_rows(self.path, splits=(split,))

    def __len__(self) -> int:
        return len(self.rows())

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories (dimensions) the dataset holds, sorted."""
        return tuple(sorted({r["category"] for r in self.rows()}))

    @property
    def content_sha256(self) -> str:
        """The hash of the dataset's content (audio and metadata), as recorded at build time."""
        return content_sha256(self.path)

    def to_pandas(self) -> pd.DataFrame:
        """The metadata rows as a DataFrame.

        Returns
        -------
        pandas.DataFrame
            One row per clip of every split, one column per row field (`rows`).
        """
        import pandas as pd

        return pd.DataFrame(self.rows())


@dataclass(frozen=True)
class Run:
    """A run folder written by `evaluate` (or `finetune`, or a listening-test export).

    Attributes
    ----------
    path : Path
        The folder: ``results.jsonl`` (one row per question), ``manifest.json``, ``summary.json``.
    counts : dict or None
        From `evaluate`: questions answered now, already done, errors, seconds.
    """

    path: Path
    counts: dict | None = field(default=None, compare=False, repr=False)

    def __fspath__(self) -> str:
        return str(self.path)

    def rows(self) -> list[dict]:
        """Result rows, the last answer per question (a resumed run never counts one twice).

        Returns
        -------
        list of dict
            `vocalgrad.records.ResultRow`s, one per (item, listener, variant, mode,
            control): the answer, the parsed label, ``llr`` (nats) in choice mode, whether it
            is ``correct``.

        Raises
        ------
        ConfigError, DatasetError
            The folder is not a run, or is incomplete or damaged.
        """
        from vocalgrad.evaluation.evaluate import load_results

        return load_results(self.path)[1]

    @property
    def manifest(self) -> dict:
        """Listener, revision, decoding settings, prompt, dataset hash and versions."""
        from vocalgrad.evaluation.evaluate import load_results

        return load_results(self.path)[0]

    @cached_property
    def summary(self) -> dict:
        """`score` with its defaults (per category, source-clustered CIs); nothing is written."""
        return score(self, write=False)

    @property
    def tuning(self) -> dict | None:
        """For a `finetune` run: what was tuned, how long, and the loss
        (``adapter/tuning.json``)."""
        meta = self.path / "adapter" / "tuning.json"
        return json.loads(meta.read_text()) if meta.is_file() else None

    @property
    def accuracy(self) -> float:
        """Overall accuracy on increase/decrease items, for the run's first prompt variant and
        mode (unparsed answers count as wrong); NaN for a run with no scored answer."""
        groups = self.summary["groups"]
        if not groups:
            return math.nan
        first = groups[sorted(groups)[0]]["table"][0]
        return float(first["accuracy"])

    def table(
        self,
        by: str | Sequence[str] = ("category",),
        cluster: str | None = "source_id",
        n_boot: int = N_BOOT,
    ) -> pd.DataFrame:
        """One row per (prompt variant and mode, group): n, sources, accuracy and its 95% CI,
        d′ and criterion c with CIs, the unparsed rate and how the CI was made.

        Parameters
        ----------
        by : str or sequence of str
            Row keys to group by (``category``, ``tier``, ``curve``, ``format``, ...); one
            string is one key.
        cluster : str or None
            What a CI resamples: ``source_id`` (default), ``speaker_id``, or None for items.
        n_boot : int
            Bootstrap resamples (0: no intervals).

        Returns
        -------
        pandas.DataFrame
            Columns ``run`` (``<variant>/<mode>``), ``group`` ("overall" first), ``n``,
            ``sources`` (clusters), ``accuracy`` with ``accuracy_lo`` / ``accuracy_hi``
            (fractions, 95% CI), ``dprime`` and ``criterion`` with theirs (z units),
            ``unparsed_rate`` and ``ci_method``; a bound is NaN or None where no interval
            was made.

        Raises
        ------
        ConfigError
            A `by` field or a `cluster` that no result row has.
        """
        import pandas as pd

        by = (by,) if isinstance(by, str) else tuple(by)
        summary = (
            self.summary
            if (tuple(by), cluster, n_boot) == (("category",), "source_id", N_BOOT)
            else score(self, by=by, cluster=cluster, n_boot=n_boot, write=False)
        )
        records = []
        for key, group in summary["groups"].items():
            for g in group["table"]:
                records.append(
                    {"run": key, "group": g["group"], **{k: g.get(k) for k in TABLE_COLUMNS}}
                )
        frame = pd.DataFrame.from_records(records, columns=["run", "group", *TABLE_COLUMNS])
        return frame.rename(columns={"n_clusters": "sources"})


def load_dataset(path: PathLike) -> Dataset:
    """Open a dataset folder, or fetch ``hf:NAME[@SPLIT]`` into the local cache first.

    Parameters
    ----------
    path : str or os.PathLike or Dataset
        A dataset folder (ours, or the official release layout), ``hf:NAME[@SPLIT]`` (split
        ``test`` by default), or a `Dataset`, returned as it is.

    Returns
    -------
    Dataset
        The folder, absolute, its rows validated once; ``report`` None.

    Raises
    ------
    DatasetError
        When the folder holds no dataset.
    """
    if isinstance(path, Dataset):
        return path
    folder = resolve(str(path)) if str(path).startswith("hf:") else Path(path)
    load_rows(folder)  # fails with a clear message on a folder that is not a dataset
    return Dataset(folder.absolute())


def _run_dataset(run: Path) -> str | None:
    """The dataset a run's manifest names, if any (a report reads its card)."""
    try:
        manifest = json.loads((run / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    found = manifest.get("dataset") if isinstance(manifest, dict) else None
    return found if isinstance(found, str) else None


def open_run(path: PathLike) -> Run:
    """Open a run folder written earlier (by `evaluate`, `finetune` or a listening study).

    Parameters
    ----------
    path : str or os.PathLike
        The run folder (``results.jsonl``, ``manifest.json``).

    Returns
    -------
    Run
        The folder, absolute, its results read once; ``counts`` None.

    Raises
    ------
    ConfigError
        The folder holds no ``results.jsonl``.
    DatasetError
        The run is incomplete (no manifest, a listed file missing) or damaged.
    """
    run = Run(Path(path).absolute())
    run.rows()  # fails with a clear message on a folder that is not a run
    return run


def build(
    out: PathLike,
    source: str | None = None,
    *,
    config: PathLike | None = None,
    protocol: str | None = None,
    overwrite: bool = False,
    audit: bool = True,
    workers: int | None = None,
    executor: TaskPool | None = None,
    **options: Any,
) -> Dataset:
    """Render, verify, audit and write a benchmark into `out` (resuming an unfinished build).

    Parameters
    ----------
    out : path
        The dataset folder to create or resume.
    source : str, optional
        ``builtin`` (the default, unless `config` names one), ``folder:PATH``, ``vctk:PATH``
        or ``hf:NAME[@SPLIT]``; ``tones``, ``noise``, ``beeps`` or ``music`` for other kinds
        of sound, and ``folder:PATH?kind=KIND`` for your own (`vocalgrad.sources.SCHEMES`).
    config : path, optional
        A TOML file with a ``[build]`` table; keyword options override it.
    protocol : str, optional
        A preset such as ``vocalgrad`` (the published grid and sizes).
    overwrite : bool
        Replace a finished or different build in `out`.
    audit : bool
        Run the shortcut audit at the end (its report is in ``Dataset.report``).
    workers : int, optional
        Local processes (default: all cores); ignored when `executor` is given.
    executor : TaskPool, optional
        Where sources render, e.g. ``vocalgrad.executors.make_executor("ray")``.
    **options
        Any `BuildConfig` field: ``categories``, ``tiers``, ``curves``, ``n_test``,
        ``n_train``, ``sample_rate``, ``seed``, ``format``, ``design``, ...

    Returns
    -------
    Dataset
        The written dataset, with the build's report.
    """
    from vocalgrad.parallel import TaskPool
    from vocalgrad.stimuli.build import build as build_dataset
    from vocalgrad.stimuli.config import LADDER

    if protocol == LADDER:
        raise ConfigError(
            "protocol 'ladder' builds one dataset per rung: call vocalgrad.build_ladder "
            "(on the command line: vocalgrad build --protocol ladder --out FOLDER)"
        )
    settings = _build_config(config, protocol, source, options)
    pool = executor or TaskPool(workers or os.cpu_count() or 1)
    report = build_dataset(
        settings,
        out,
        workers=min(pool.workers, os.cpu_count() or 1),
        overwrite=overwrite,
        audit=audit,
        executor=pool,
    )
    return Dataset(Path(out).absolute(), report=report)


def _build_config(config: PathLike | None, protocol: str | None, source: str | None, options):
    """The `BuildConfig` of a build call: the preset, the TOML file, then the options (a
    comma-separated string where a list belongs is split)."""
    from vocalgrad.stimuli.config import load_config

    for key in ("categories", "tiers", "curves"):
        if isinstance(options.get(key), str):
            options[key] = tuple(v.strip() for v in options[key].split(",") if v.strip())
    return load_config(config, protocol=protocol, source=source, **options)


def build_ladder(
    out: PathLike,
    source: str | None = None,
    *,
    config: PathLike | None = None,
    overwrite: bool = False,
    audit: bool = True,
    workers: int | None = None,
    executor: TaskPool | None = None,
    **options: Any,
) -> dict:
    """Build the ladder: one verified, audited dataset per rung's format, on the same
    sources and dimensions, into ``out/<format>/``, with the index ``out/ladder.json`` naming
    the rungs in order (resuming an unfinished ladder).

    Parameters
    ----------
    out : path
        The ladder folder.
    source : str, optional
        As for `build`.
    config : path, optional
        A TOML file with a ``[build]`` table; keyword options override it.
    overwrite : bool
        Replace finished or different builds in `out`.
    audit : bool
        Audit each rung's dataset (its verdict is in the index).
    workers : int, optional
        Local processes (default: all cores); ignored when `executor` is given.
    executor : TaskPool, optional
        Where sources render.
    **options
        `BuildConfig` fields over the ladder's preset (4 + 4 sources, volume and voice
        pitch, the linear curve); ``format`` is each rung's own.

    Returns
    -------
    dict
        The index (`vocalgrad.evaluation.ladder.build_ladder`).
    """
    from vocalgrad.evaluation.ladder import build_ladder as build_rungs
    from vocalgrad.parallel import TaskPool
    from vocalgrad.stimuli.build import build as build_dataset
    from vocalgrad.stimuli.config import LADDER

    if options.get("format"):
        raise ConfigError(
            "a ladder builds every rung's question format; leave out --question-format"
        )
    settings = _build_config(config, LADDER, source, options)
    pool = executor or TaskPool(workers or os.cpu_count() or 1)

    def one(rung_config, folder: Path) -> dict:
        return build_dataset(
            rung_config,
            folder,
            workers=min(pool.workers, os.cpu_count() or 1),
            overwrite=overwrite,
            audit=audit,
            executor=pool,
        )

    return build_rungs(settings, out, one)


def _listener(listener: Listener | str, dataset: Path, options: dict) -> Listener:
    if not isinstance(listener, (str, Listener)) and not hasattr(listener, "listener_id"):
        raise ConfigError(
            f"listener = {listener!r}: give a spec string such as 'baseline:ideal' "
            "(`vocalgrad list listeners`) or a Listener object"
        )
    if isinstance(listener, str):
        return load_listener(listener, dataset=dataset, **options)
    if options:
        raise ConfigError("listener options apply to a spec string, not to a Listener object")
    return listener


def default_run_folder(listener: Listener | str) -> Path:
    """Where a run goes when no folder is named: ``runs/<listener>``.

    Parameters
    ----------
    listener : Listener or str
        A listener, or its spec string.

    Returns
    -------
    Path
        ``runs/<slug>``, relative to the working directory: the spec (or the listener's
        id) with every character but letters, digits, ``-``, ``.`` and ``_`` as ``_``.
    """
    from vocalgrad.evaluation.evaluate import listener_slug

    return Path("runs") / listener_slug(
        listener if isinstance(listener, str) else listener.listener_id
    )


def evaluate(
    dataset: Dataset | PathLike,
    listener: Listener | str,
    out: PathLike | None = None,
    config: EvalConfig | None = None,
    *,
    retry_errors: bool = True,
    executor: Any = None,
    listener_options: dict | None = None,
    use_cache: bool = True,
    **fields: Any,
) -> Run:
    """Ask a listener every item of a dataset; resumable (a rerun answers only what is missing).

    Parameters
    ----------
    dataset : Dataset or path
        A dataset folder (ours or the official release layout) or ``hf:NAME[@SPLIT]``.
    listener : Listener or str
        A Listener object, or a spec such as ``baseline:ideal``, ``whisper:tiny.en``,
        ``hf:Qwen/Qwen2-Audio-7B-Instruct``, ``openai:gpt-4o-audio-preview``
        (``vocalgrad list listeners`` shows every family).
    out : path, optional
        The run folder (default ``runs/<listener>``).
    config : EvalConfig, optional
        What to ask (`vocalgrad.evaluation.evaluate.EvalConfig`; default: its defaults).
    retry_errors : bool
        Ask again the items whose last answer was an error (a rerun after a fix).
    executor : Executor, optional
        ``vocalgrad.executors.make_executor(...)`` to answer on a Ray cluster.
    listener_options : dict, optional
        Keyword options for a spec's listener (``device``, ``dtype``, ``base_url``, ...).
    use_cache : bool
        Take answers the answer cache already holds (default). False asks the listener
        afresh and replaces the cached answers: a model redeployed under the same name and
        endpoint answers anew. Each row's ``cached`` says where its answer came from.
    **fields
        Any `EvalConfig` field (``mode``, ``variants``, ``controls``, ``split``,
        ``categories``, ``limit``, ``batch_size``, ``max_new_tokens``, ``few_shot``,
        ``audio_first``, ``both_orders``, ``seed``, ...), over `config`; sequences may be
        lists.

    Returns
    -------
    Run
        The run folder, with this call's counts (``answered``, ``from_cache``: of those, how
        many came from the answer cache, ``skipped_done``, ``retried``, ``errors``,
        ``failed``: items still without an answer, and ``failure_reasons``, the commonest
        errors with their item counts, ``total``, ``seconds``), ``subset``: what a `limit`
        chose (see `vocalgrad.evaluation.subset`), and ``usage``: the tokens and cost of this
        call's requests for a listener that tallies them (else None).
    """
    from vocalgrad.evaluation.evaluate import evaluate as run_questions
    from vocalgrad.evaluation.score import write_summary
    from vocalgrad.executors import Executor

    config = eval_config(config, **fields)
    data = load_dataset(dataset).path
    who = _listener(listener, data, dict(listener_options or {}))
    folder = claim_output(
        out if out is not None else default_run_folder(listener), RUN, reads=[data], overwrite=None
    )
    counts = run_questions(
        data,
        who,
        folder,
        config,
        executor=executor or Executor(),
        retry_errors=retry_errors,
        use_cache=use_cache,
    )
    run = Run(folder.absolute(), counts=counts)
    if counts["failed"] < counts["total"]:  # a run with no answer has nothing to score
        write_summary(folder, run.summary)
    return run


def evaluate_ladder(
    ladder: PathLike,
    listener: str,
    out: PathLike,
    config: EvalConfig | None = None,
    *,
    retry_errors: bool = True,
    executor: Any = None,
    listener_options: dict | None = None,
    use_cache: bool = True,
    progress: Callable[[str, str], None] | None = None,
    **fields: Any,
) -> dict:
    """Ask a listener every rung of a ladder folder (`build_ladder`): rung ``r`` into
    ``out/r/`` with the rung's prompt variants, resumable; ``out/ladder.json`` indexes the
    runs. A rung the listener cannot answer is skipped, and the index says why.

    Parameters
    ----------
    ladder : path
        The ladder folder.
    listener : str
        A listener spec (each rung's dataset is given to it: baselines learn from it).
    out : path
        The ladder run folder.
    config : EvalConfig, optional
        What to ask; its ``variants`` are each rung's own.
    retry_errors, executor, listener_options, use_cache
        As for `evaluate`.
    progress : callable, optional
        Called with (rung, what happened) after each rung.
    **fields
        `EvalConfig` fields over `config`.

    Returns
    -------
    dict
        The run index: per rung its run folder, variants and counts, or why it was skipped.
    """
    from vocalgrad.evaluation.evaluate import evaluate as run_questions
    from vocalgrad.evaluation.ladder import evaluate_ladder as ask_rungs
    from vocalgrad.evaluation.score import score_run, write_summary
    from vocalgrad.executors import Executor, ListenerSpec

    config = eval_config(config, **fields)
    pool = executor or Executor()

    def make(dataset: Path) -> Listener:
        return pool.listener(ListenerSpec(listener, str(dataset), dict(listener_options or {})))

    def run(dataset, who, folder, rung_config, **options):
        counts = run_questions(dataset, who, folder, rung_config, **options)
        if counts["failed"] < counts["total"]:
            write_summary(folder, score_run(folder))
        return counts

    return ask_rungs(
        ladder,
        make,
        out,
        config,
        run=run,
        progress=progress,
        executor=pool,
        retry_errors=retry_errors,
        use_cache=use_cache,
    )


def eval_config(config: EvalConfig | None = None, **fields: Any) -> EvalConfig:
    """`config` (default: `EvalConfig()`) with `fields` replaced, validated.

    Parameters
    ----------
    config : EvalConfig, optional
        The starting point.
    **fields
        `EvalConfig` fields to replace; lists become tuples.

    Returns
    -------
    EvalConfig
        The validated configuration.

    Raises
    ------
    ConfigError
        A name that is no `EvalConfig` field (with the closest one), or an invalid value.
    """
    known = {f.name: f for f in dataclasses.fields(EvalConfig)}
    for name in fields:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"{name!r} is no evaluation setting{hint}; settings: {', '.join(known)}"
            )
    values = {
        k: tuple(v) if isinstance(v, list) or (k in _TUPLE_FIELDS and v is not None) else v
        for k, v in fields.items()
    }
    return dataclasses.replace(config or EvalConfig(), **values)


_TUPLE_FIELDS = ("variants", "controls", "categories")


def score(
    run: Run | PathLike,
    by: str | Sequence[str] = ("category",),
    cluster: str | None = "source_id",
    n_boot: int = N_BOOT,
    write: bool = True,
) -> RunSummary:
    """Accuracy, d′, criterion c and AUC with source-clustered 95% CIs, controls and alarms.

    Parameters
    ----------
    run : Run or path
        A run folder written by `evaluate`.
    by : str or sequence of str
        Result-row fields to group by (``category``, ``tier``, ``curve``, ...); one string
        is one field.
    cluster : str or None
        The field whose values are resampled together for the CIs: ``source_id``,
        ``speaker_id``, or None (or ``item``) for single items.
    n_boot : int
        Bootstrap resamples per CI.
    write : bool
        Also write the summary to ``RUN/summary.json``.

    Returns
    -------
    RunSummary
        What `vocalgrad score` prints: ``groups[variant/mode]["table"]`` holds one dict per
        group.

    Raises
    ------
    DatasetError
        The folder holds no answers yet.
    ConfigError
        A `by` field or a `cluster` that no result row has.
    """
    from vocalgrad.evaluation.score import score_run, write_summary

    summary = score_run(Path(run), by=by, cluster=cluster, n_boot=n_boot)
    if write:
        write_summary(Path(run), summary)
    return summary


def audit(dataset: Dataset | PathLike, workers: int = 1) -> AuditReport:
    """The shortcut audit: can a classifier tell the direction from cues other than the
    change over time? A dataset that passes leaves no such shortcut open.

    Parameters
    ----------
    dataset : Dataset or path
        The dataset folder.
    workers : int
        Processes measuring the clips' cues.

    Returns
    -------
    AuditReport
        Per category the classifiers' accuracies with CIs and whether it passes; also
        written to ``DATASET/audit.json``.
    """
    from vocalgrad.progress import progress_callback
    from vocalgrad.stimuli.audit import audit_dataset

    with progress_callback("audit cues", unit="clip") as measured:
        return audit_dataset(load_dataset(dataset).path, workers=workers, progress=measured)


def verify(dataset: Dataset | PathLike, limit: int | None = None) -> dict:
    """Re-measure every clip against its source: label agreement, refusals and confounds.

    Parameters
    ----------
    dataset : Dataset or path
        The dataset folder (the official release, which has no sources, gets the blind
        measures only).
    limit : int, optional
        Measure at most this many clips.

    Returns
    -------
    dict
        ``per_category``: agreement with the labels, median changes per tier, refusals and
        confounds; ``failures``: the clips that disagree.
    """
    from vocalgrad.stimuli.verify import verify_dataset

    return verify_dataset(load_dataset(dataset).path, limit=limit)


def probe(
    dataset: Dataset | PathLike,
    listener: Listener | str,
    out: PathLike | None = None,
    *,
    categories: Sequence[str] = (),
    pooling: str = "segments16",
    seeds: int = 3,
    n_boot: int = N_BOOT,
    mlp: bool = True,
    random_control: bool = True,
    dsp_control: bool = True,
    batch_size: int = 8,
    threads: int = 1,
    results: Run | PathLike | None = None,
    train_from: PathLike | None = None,
    cache: PathLike | None = None,
    executor: Any = None,
    listener_options: dict | None = None,
    overwrite: bool = False,
) -> dict:
    """Layer-wise linear (and MLP) probes with controls, the lens readout and a diagnosis of
    where the direction is lost. Returns the summary also written to ``OUT/summary.json``;
    `overwrite` writes into a folder that holds something other than a probe's output.

    Parameters
    ----------
    dataset : Dataset or path
        The dataset folder.
    listener : Listener or str
        A listener that declares ``can_probe``, or its spec (``whisper:tiny.en``).
    out : path, optional
        The probe folder (default ``runs/probe/<listener>``).
    categories : sequence of str
        Dimensions to probe; empty: every one with increase or decrease items.
    pooling : str
        How a sequence stage becomes one vector per item: ``segments16``, ``halves`` or
        ``mean``.
    seeds : int
        Seeds per stage: of the shuffled-label control probes and of the MLP's fits.
    n_boot : int
        Bootstrap resamples per CI.
    mlp : bool
        Also fit a nonlinear (MLP) probe.
    random_control : bool
        Also probe the same architecture with random weights.
    dsp_control : bool
        Also probe a plain log-mel reference.
    batch_size : int
        Items per model pass.
    threads : int
        Torch threads for the probe solvers; 1 (the CLI's default) gives identical results
        on every machine, more is faster.
    results : Run or path, optional
        An eval run of the same listener: its answers are the behaviour the probes are read
        against (default: the last-layer lens).
    train_from : path, optional
        Another dataset whose train split trains the probes, for a dataset without one.
    cache : path, optional
        The feature cache (default: the vocalgrad cache's ``features`` folder).
    executor : Executor, optional
        Where the model passes run.
    listener_options : dict, optional
        Keyword options for a spec's listener.
    overwrite : bool
        Write into a folder that holds something other than a probe's output.

    Returns
    -------
    ProbeResult
        Per category the layer-wise probe curves (balanced accuracy with 95% CIs clustered
        by source), the lens, the behaviour and the diagnosis; the settings, warnings and
        ``seconds`` (wall time).

    Raises
    ------
    CapabilityError
        The listener exposes no hidden states.
    ConfigError
        No selected category can be probed, an unknown pooling, or an output folder that
        may not be written.
    """
    from vocalgrad.executors import Executor
    from vocalgrad.probing.pipeline import ProbeConfig, probe_dataset
    from vocalgrad.probing.probes import ProbeSettings

    config = ProbeConfig(
        categories=tuple(categories),
        pooling=pooling,
        settings=ProbeSettings(seeds=seeds, mlp=mlp, n_boot=n_boot),
        random_control=random_control,
        dsp_control=dsp_control,
        batch_size=batch_size,
        threads=threads,
    )
    folder = (
        Path(out) if out is not None else Path("runs") / "probe" / default_run_folder(listener).name
    )
    data = load_dataset(dataset).path
    claim_output(folder, PROBE, reads=[data, train_from], overwrite=overwrite)
    if cache is not None:
        claim_output(cache, FEATURE_CACHE, reads=[data, train_from], overwrite=overwrite)
    if listener_options:
        listener = _listener(listener, data, dict(listener_options))
    return probe_dataset(
        data,
        listener,
        folder,
        config,
        results=None if results is None else str(results),
        cache=cache,
        train_from=None if train_from is None else str(train_from),
        executor=executor or Executor(),
    )


def finetune(
    dataset: Dataset | PathLike,
    listener: str,
    out: PathLike | None = None,
    *,
    categories: Sequence[str],
    method: str = "lora",
    batch_size: int = 16,
    on_step: Callable[[int, float], None] | None = None,
    **settings: Any,
) -> Run:
    """Tune a listener on the train split of `categories` (``head``, ``lora`` or ``full``), then
    evaluate it on every category's test split. The adapter is in ``OUT/adapter`` (the listener
    spec ``tuned:OUT/adapter``); `settings` are `TuneConfig` fields (lr, epochs, ...).

    Parameters
    ----------
    dataset : Dataset or path
        A dataset folder with a train split.
    listener : str
        The base listener's spec; it must declare ``can_tune``.
    out : path, optional
        The run folder (default ``runs/finetune/<listener>-<method>-<categories>``).
    categories : sequence of str
        The dimensions whose train split it is tuned on.
    method : str
        ``head`` (the output head alone), ``lora`` (low-rank adapters) or ``full``.
    batch_size : int
        Requests per model pass in the evaluation.
    on_step : callable (int, float) -> None, optional
        Called after every optimizer step with the step and its loss (nats per prompt).
    **settings
        `vocalgrad.remedies.config.TuneConfig` fields: ``lr``, ``epochs``,
        ``batch_items``, ``lora_r``, ``seed``, ...

    Returns
    -------
    Run
        The evaluation of the tuned listener, with this call's counts; ``Run.tuning`` holds
        the tuning record.

    Raises
    ------
    CapabilityError
        The listener is not tunable.
    ConfigError
        A setting is invalid, a category is missing from the dataset or cannot be heard by
        the listener, or the output folder may not be written.
    """
    from vocalgrad.remedies.config import TuneConfig
    from vocalgrad.remedies.finetune import finetune as tune

    config = TuneConfig(method=method, categories=tuple(categories), **settings)
    name = f"{default_run_folder(listener).name}-{method}-{'_'.join(config.categories)}"
    folder = Path(out) if out is not None else Path("runs") / "finetune" / name
    data = load_dataset(dataset).path
    claim_output(folder, RUN, reads=[data], overwrite=None)
    result = tune(data, listener, folder, config, batch_size=batch_size, on_step=on_step)
    return Run(folder.absolute(), counts=result["counts"])


def report(
    runs: Iterable[Run | PathLike],
    out: PathLike = "report.html",
    *,
    dataset: Dataset | PathLike | None = None,
    probes: Iterable[PathLike] = (),
    output_format: str = "html",
    n_boot: int = N_BOOT,
    command: str = "",
    allow_dataset_mismatch: bool = False,
    overwrite: bool = False,
) -> Path:
    """One self-contained report (HTML, or markdown with figures beside it) of runs, probes
    and the dataset card. Returns the report's path.

    A `dataset` whose content hash differs from the one a run recorded (another build, or
    labels edited since) is refused with a `ConfigError`, unless `allow_dataset_mismatch`:
    then the dataset section says the card is not the runs' dataset. The report is never
    written inside a dataset it reads (the card's, or a run's) nor over a file that is not a
    report, unless `overwrite`.

    Parameters
    ----------
    runs : iterable of Run or path
        The run folders to report.
    out : path
        The report file.
    dataset : Dataset or path, optional
        The dataset the runs answered, for its card.
    probes : iterable of path
        Probe folders (`probe`) to include.
    output_format : str
        ``html`` (one self-contained file) or ``md`` (markdown, figures beside it).
    n_boot : int
        Bootstrap resamples per CI.
    command : str
        The command line that made the report, shown in it.
    allow_dataset_mismatch : bool
        Report a `dataset` whose content hash differs from the runs' (the report says so).
    overwrite : bool
        Write over a file that is not a report.

    Returns
    -------
    Path
        The report written (each figure is also written beside it as SVG, PDF and CSV).

    Raises
    ------
    ConfigError
        An unknown output format, a dataset that is not the runs', or an output that may not
        be written there.
    """
    from vocalgrad.report import write_report

    runs = [Path(r) for r in runs]
    read = [dataset, *(_run_dataset(r) for r in runs)]
    claim_output(out, REPORT, reads=read, overwrite=overwrite)
    return write_report(
        runs,
        out,
        dataset=None if dataset is None else Path(dataset),
        probe_dirs=[Path(p) for p in probes],
        fmt=output_format,
        n_boot=n_boot,
        command=command,
        allow_dataset_mismatch=allow_dataset_mismatch,
    )

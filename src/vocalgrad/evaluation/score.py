"""Score run folders: tables with clustered CIs, bias vs sensitivity, controls, comparisons.

`summary.json` follows lm-evaluation-harness' results layout (results per task, the
configuration, versions, sample counts), with CIs and the control diagnostics added.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vocalgrad import registry
from vocalgrad.defaults import MAX_N_BOOT
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import load_results, selected
from vocalgrad.files import atomic_write_text
from vocalgrad.records import LABELS, RunSummary
from vocalgrad.stats import (
    BOOTSTRAP_MIN_CLUSTERS,
    MIN_SOURCES,
    NO_CI_TEXT,
    constant_summary,
    flip_rate,
    paired_comparison,
    same_answer_alarm,
    summarise,
)

COLUMNS = ("accuracy", "balanced_accuracy", "dprime", "criterion", "auc")
CLUSTERS = ("source_id", "speaker_id", "item")
"""What a CI may resample: whole sources (the default), whole speakers, or single items."""


def grouping(
    rows: list[dict], by: str | Sequence[str], cluster: str | None
) -> tuple[tuple[str, ...], str | None]:
    """`by` and `cluster` checked against the rows they group, as `summarise` takes them.

    A field no row has would put every row in one group named None, and a cluster field no
    row has would resample single items while the table says sources: both are refused.

    Parameters
    ----------
    rows : list of dict
        The run's result rows.
    by : str or sequence of str
        Row fields to group by; one string is one field.
    cluster : str or None
        ``source_id``, ``speaker_id``, or ``item`` / None for single items.

    Returns
    -------
    tuple
        (the fields as a tuple, the cluster field or None for items).

    Raises
    ------
    ConfigError
        A field or cluster that no row has, naming the ones it could be.
    """
    by = (by,) if isinstance(by, str) else tuple(by)
    fields = sorted(
        {k for r in rows for k, v in r.items() if v is None or isinstance(v, (str, int, float))}
    )
    for name in by:
        if not any(name in r for r in rows):
            raise ConfigError(registry.unknown("field to group by", name, fields))
    if cluster is None or cluster == "item":
        return by, None
    if cluster not in CLUSTERS:
        raise ConfigError(registry.unknown("cluster field", cluster, CLUSTERS) + " (None: items)")
    if not any(r.get(cluster) is not None for r in rows):
        raise ConfigError(
            f"cluster {cluster!r}: no result row has a {cluster}; cluster by "
            f"{' or '.join(c for c in CLUSTERS if c != cluster)}"
        )
    return by, cluster


@dataclass(frozen=True)
class ListenerScore:
    """One listener's answers to one set of questions, scored once: what `vocalgrad score`
    writes per prompt/mode group and what the report shows. Every metric in either comes from
    `score_rows`, so the two cannot disagree.

    Attributes
    ----------
    table : list of dict
        `vocalgrad.stats.summarise` rows over the changing clips: "overall" first, then one
        per group (accuracy, balanced accuracy, d′, c, AUC, rates, each with a clustered CI).
    constant : list of dict
        `vocalgrad.stats.constant_summary` rows over the constant clips, "overall" first.
    controls : dict
        Per control asked: "reversed" -> `vocalgrad.stats.flip_rate`'s record, "silence" and
        "text_only" -> answer rates (``n``, ``increase_rate``, ``decrease_rate``,
        ``unparsed_rate``).
    alarm : str or None
        The same-answer alarm over the changing clips, None when it is not raised.
    errors : int
        Rows that failed with an error (not scored).
    """

    table: list[dict]
    constant: list[dict]
    controls: dict[str, dict]
    alarm: str | None
    errors: int

    @property
    def overall(self) -> dict:
        """The "overall" row of `table`."""
        return self.table[0]

    @property
    def flip_rate(self) -> float:
        """Share of time-reversed pairs whose answer flipped; NaN without that control."""
        return float(self.controls.get("reversed", {}).get("flip_rate", math.nan))


def score_rows(
    rows: Iterable[Mapping],
    by: tuple[str, ...] = ("category",),
    cluster: str | None = "source_id",
    n_boot: int = 2000,
    seed: int = 0,
) -> ListenerScore:
    """Score one listener's result rows (one prompt variant and mode, every control).

    Parameters
    ----------
    rows : iterable of mapping
        Result rows (`vocalgrad.records.ResultRow`) of one listener, variant and mode, main
        condition and controls together; rows with an ``error`` are counted, not scored.
    by : tuple of str
        Result fields the table is split by, besides "overall".
    cluster : str or None
        The field whose values are resampled whole for CIs (None: every item alone).
    n_boot : int
        Bootstrap resamples per interval (0: no intervals).
    seed : int
        Seed of the resampling.

    Returns
    -------
    ListenerScore
        The table, the constant-clip rates, the controls and the same-answer alarm.
    """
    rows = list(rows)
    answered = [r for r in rows if r.get("error") is None]
    main = [r for r in answered if r.get("control", "none") == "none"]
    changing = [r for r in main if r.get("direction") in LABELS]
    controls: dict[str, dict] = {}
    reversed_rows = [
        r for r in answered if r.get("control") == "reversed" and r.get("direction") != "constant"
    ]
    if reversed_rows:
        controls["reversed"] = flip_rate(changing, reversed_rows)
    for control in ("silence", "text_only"):
        asked = [r for r in answered if r.get("control") == control]
        if asked:
            controls[control] = _answer_rates(asked)
    return ListenerScore(
        table=summarise(changing, by=by, cluster=cluster, n_boot=n_boot, seed=seed),
        constant=constant_summary([r for r in main if r.get("direction") == "constant"]),
        controls=controls,
        alarm=same_answer_alarm(changing),
        errors=sum(1 for r in rows if r.get("error")),
    )


def score_run(
    run: str | Path,
    by: str | Sequence[str] = ("category",),
    cluster: str | None = "source_id",
    n_boot: int = 2000,
    seed: int = 0,
) -> RunSummary:
    """Everything `vocalgrad score` prints, as one record (also written as summary.json).

    `by` and `cluster` are checked by `grouping` (a string `by` is one field), `n_boot`
    against `defaults.MAX_N_BOOT` before any resample is drawn.

    Why one record: the printed table, ``summary.json``, the report and the API read the same
    numbers, scored once per group by `score_rows`.

    Parameters
    ----------
    run : str or Path
        A run folder (or its ``results.jsonl``).
    by : str or sequence of str
        Result fields each table is split by, besides "overall".
    cluster : str or None
        ``source_id`` (default), ``speaker_id``, or ``item`` / None: what a CI resamples
        whole.
    n_boot : int
        Bootstrap resamples per interval, 0 to `defaults.MAX_N_BOOT` (0: no intervals).
    seed : int
        Seed of the resampling.

    Returns
    -------
    RunSummary
        ``run``, ``config`` (the run's manifest), ``groups`` (per ``<variant>/<mode>``, or
        ``<listener>|<variant>/<mode>`` in a run of several listeners: ``table``,
        ``constant``, ``errors``), ``controls`` (same keys), ``alarms``, ``untestable``,
        ``answered_from_cache``, the lm-evaluation-harness ``results`` and ``n-samples``.
        Accuracies and rates are fractions (0-1), d′ and c in z units.

    Raises
    ------
    ConfigError
        `n_boot` is out of range, a `by` field or the cluster is on no row, or the folder
        holds no ``results.jsonl``.
    DatasetError
        The run is incomplete or damaged (`load_results`).
    """
    if not 0 <= n_boot <= MAX_N_BOOT:
        raise ConfigError(f"n_boot = {n_boot:,}: expected 0 to {MAX_N_BOOT:,} resamples")
    manifest, rows = load_results(run)
    by, cluster = grouping(rows, by, cluster)
    # categories the listener was never asked (a mono listener and a two-channel dimension)
    out: dict = {
        "run": str(run),
        "config": manifest,
        "groups": {},
        "controls": {},
        "alarms": [],
        "untestable": manifest.get("untestable", {}),
        # answers taken from the answer cache rather than asked of the listener in this run
        "answered_from_cache": sum(1 for r in rows if r.get("cached")),
    }
    listeners = sorted({r["listener"] for r in rows})
    for listener, variant, mode in sorted({(r["listener"], r["variant"], r["mode"]) for r in rows}):
        key = f"{variant}/{mode}" if len(listeners) == 1 else f"{listener}|{variant}/{mode}"
        scored = score_rows(
            selected(rows, listener=listener, variant=variant, mode=mode),
            by=by,
            cluster=cluster,
            n_boot=n_boot,
            seed=seed,
        )
        out["groups"][key] = {
            "table": scored.table,
            "constant": scored.constant,
            "errors": scored.errors,
        }
        if scored.alarm:
            out["alarms"].append(f"{key}: {scored.alarm}")
        out["controls"][key] = scored.controls
    out["results"] = _harness_results(out, by)
    out["n-samples"] = {
        k: sum(g["n"] for g in v["table"] if g["group"] != "overall")
        for k, v in out["groups"].items()
    }
    return out


def _answer_rates(rows: list[dict]) -> dict:
    n = len(rows)
    said = [r["predicted"] for r in rows]
    return {
        "n": n,
        "increase_rate": said.count("increase") / n,
        "decrease_rate": said.count("decrease") / n,
        "unparsed_rate": said.count(None) / n,
    }


def _harness_results(summary: dict, by: tuple[str, ...]) -> dict:
    """lm-evaluation-harness style: results[task]["metric,filter"] = value, where the filter
    names the prompt variant and mode (and the listener when a file holds several)."""
    results: dict = {}
    for key, group in summary["groups"].items():
        for g in group["table"]:
            task = f"vocalgrad_{g['group']}" if g["group"] != "overall" else "vocalgrad"
            entry = results.setdefault(task, {"alias": g["group"]})
            for metric in COLUMNS:
                if metric in g:
                    entry[f"{metric},{key}"] = g[metric]
                    entry[f"{metric}_ci,{key}"] = [g.get(f"{metric}_lo"), g.get(f"{metric}_hi")]
            entry[f"increase_rate,{key}"] = g.get("increase_rate")
            entry[f"unparsed_rate,{key}"] = g.get("unparsed_rate")
            entry[f"n_clusters,{key}"] = g.get("n_clusters")
            entry[f"ci_method,{key}"] = g.get("ci_method")
    return results


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _with_ci(g: dict, metric: str, digits: int = 3) -> str:
    """`value [lo, hi]`; where a few-cluster group has no interval, say so instead of a dash."""
    value, lo, hi = g.get(metric), g.get(f"{metric}_lo"), g.get(f"{metric}_hi")
    if _finite(lo) and _finite(hi):
        return f"{_fmt(value, digits)} [{_fmt(lo, digits)}, {_fmt(hi, digits)}]"
    if _finite(value) and g.get("n_boot", 0) > 0 and g.get("n_clusters", 0) < MIN_SOURCES:
        return f"{_fmt(value, digits)} ({NO_CI_TEXT})"
    return _fmt(value, digits)


def ci_note(cluster: str, n_boot: int) -> str:
    """How the intervals of a table were made (the rule of `vocalgrad.stats.ci_method_for`).

    Parameters
    ----------
    cluster : str
        What the CIs resample whole (``source_id``, ``speaker_id``, ``item``).
    n_boot : int
        Bootstrap resamples per interval; 0 or less: no intervals.

    Returns
    -------
    str
        One sentence for under the table: which interval a group of how many clusters gets.
    """
    if n_boot <= 0:
        return "No CIs (n_boot = 0)."
    m = BOOTSTRAP_MIN_CLUSTERS
    return (
        f"95% CIs over {cluster} clusters: bootstrap ({n_boot} resamples) for groups with ≥ {m} "
        f"clusters; jackknife t-interval (G − 1 df) for 2–{m - 1}; where the clusters agree "
        "exactly (any number of them), a Wilson interval on G for accuracy (none for d′); with 1 "
        "cluster: " + NO_CI_TEXT + "."
    )


def group_listener(summary: dict, key: str) -> tuple[str, str]:
    """(listener, prompt/mode) of one group of a summary.

    A run of several listeners (the listening study's export: the pool and each annotator)
    names the listener in the group's key (``human:a01|default/generate``); a run of one
    names it in its manifest, as a record (`vocalgrad eval`) or a plain string (the export).

    Parameters
    ----------
    summary : dict
        A `score_run` summary.
    key : str
        One of its ``groups``.

    Returns
    -------
    tuple of str
        The listener's id (``"?"`` when nothing names it) and the prompt variant / mode.
    """
    who, _, prompt = key.rpartition("|")
    if who:
        return who, prompt
    listener = summary["config"].get("listener")
    if isinstance(listener, dict):
        listener = listener.get("listener")
    return (str(listener) if listener else "?"), prompt


def markdown(summary: dict) -> str:
    """The summary as `vocalgrad score` prints it: one Markdown table per listener and
    prompt/mode group, with the CI rule, constant clips, controls, errors and alarms.

    Parameters
    ----------
    summary : dict
        A `score_run` summary.

    Returns
    -------
    str
        Markdown: accuracy and d′ with their 95% CIs (or why there is none), balanced
        accuracy, rates and AUC per group, three decimals (two for d′ and c).
    """
    lines = []
    for key, group in summary["groups"].items():
        listener, prompt = group_listener(summary, key)
        lines += [
            f"### {listener} — {prompt}",
            "",
            "| group | n | clusters | accuracy [95% CI] | bal. acc. | increase rate | unparsed | "
            "d′ [95% CI] | c | AUC |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for g in group["table"]:
            lines.append(
                f"| {g['group']} | {g['n']} | {g.get('n_clusters', '–')} | "
                f"{_with_ci(g, 'accuracy')} | {_fmt(g.get('balanced_accuracy'))} | "
                f"{_fmt(g.get('increase_rate'))} | {_fmt(g.get('unparsed_rate'))} | "
                f"{_with_ci(g, 'dprime', 2)} | {_fmt(g.get('criterion'), 2)} | "
                f"{_fmt(g.get('auc'))} |"
            )
        if group["table"]:
            first = group["table"][0]
            lines.append(f"\n{ci_note(first.get('cluster', 'item'), first.get('n_boot', 0))}")
        constant = group["constant"]
        if constant and constant[0].get("n"):
            c = constant[0]
            lines.append(
                f"\nConstant clips (nothing changes, n={c['n']}): says increase "
                f"{_fmt(c.get('increase_rate'))}, "
                f"decrease {_fmt(c.get('decrease_rate'))}, constant {_fmt(c.get('constant_rate'))}."
            )
        for name, ctl in summary["controls"].get(key, {}).items():
            if name == "reversed":
                lines.append(
                    f"Time-reversed clips: answer flips for {_fmt(ctl['flip_rate'])} of "
                    f"{ctl['n_pairs']} pairs (a listener that hears must flip)."
                )
            else:
                lines.append(
                    f"{name.replace('_', ' ').capitalize()} control (n={ctl['n']}): says increase "
                    f"{_fmt(ctl['increase_rate'])}, decrease {_fmt(ctl['decrease_rate'])}."
                )
        if group["errors"]:
            lines.append(
                f"{group['errors']} item(s) failed with errors "
                "(listed in results.jsonl, not scored)."
            )
        lines.append("")
    lines += [
        f"**{category}:** {why} (not scored)."
        for category, why in summary.get("untestable", {}).items()
    ]
    lines += [f"**Alarm:** {a}" for a in summary["alarms"]]
    if summary.get("answered_from_cache"):
        lines.append(
            f"{summary['answered_from_cache']} answer(s) came from the answer cache (given "
            "before to the same question by the same listener); `vocalgrad eval --no-cache` "
            "asks afresh."
        )
    return "\n".join(lines)


def to_csv(summary: dict) -> str:
    """The summary's tables as CSV (`vocalgrad score --output-format csv`), for a spreadsheet
    or another tool.

    Parameters
    ----------
    summary : dict
        A `score_run` summary.

    Returns
    -------
    str
        A header row, then one row per (listener, prompt/mode, group): ``n``, each metric
        with its ``_lo`` and ``_hi`` bounds (fractions; d′ and c in z units; empty without an
        interval), ``increase_rate``, ``unparsed_rate``, ``n_clusters`` and ``ci_method``.
    """
    buf = io.StringIO()
    writer = csv.writer(buf)
    header = [
        "listener",
        "prompt",
        "group",
        "n",
        *[f"{m}{s}" for m in COLUMNS for s in ("", "_lo", "_hi")],
        "increase_rate",
        "unparsed_rate",
        "n_clusters",
        "ci_method",
    ]
    writer.writerow(header)
    for key, group in summary["groups"].items():
        listener, prompt = group_listener(summary, key)
        for g in group["table"]:
            writer.writerow([listener, prompt, g["group"], g["n"], *[g.get(h) for h in header[4:]]])
    return buf.getvalue()


def compare_runs(
    run_a: str | Path, run_b: str | Path, cluster: str = "source_id", seed: int = 0
) -> dict:
    """Paired comparison on the items both runs answered (main condition, every answered
    increase or decrease item), paired by ``item_id``.

    Each run must hold one prompt variant and mode among those answers: with several, an
    item has several answers and the pairing would be ambiguous, so it is refused.

    Parameters
    ----------
    run_a, run_b : str or Path
        The two run folders, on the same dataset.
    cluster : str
        The result field resampled and permuted whole (``source_id`` by default).
    seed : int
        Seeds the bootstrap and the permutation test.

    Returns
    -------
    dict
        `vocalgrad.stats.paired_comparison`'s record: ``difference`` = accuracy of `run_a`
        minus `run_b` (fraction), its CI, the McNemar and cluster-permutation p values, the
        counts.

    Raises
    ------
    ConfigError, DatasetError
        A folder is not a complete run (`load_results`).
    ValueError
        An item has another direction in the other run: they are not on one dataset.
    """
    _, a = load_results(run_a)
    _, b = load_results(run_b)

    def pick(rows: list[dict]) -> list[dict]:
        return [
            r
            for r in rows
            if r["control"] == "none" and r["error"] is None and r["direction"] in LABELS
        ]

    for run, rows in ((run_a, a), (run_b, b)):
        asked = sorted({f"{r['variant']}/{r['mode']}" for r in pick(rows)})
        if len(asked) > 1:
            raise ConfigError(
                f"{run} answers each item in {len(asked)} ways ({', '.join(asked)}): a paired "
                "comparison needs one answer per item; compare runs of one variant and mode"
            )
    return paired_comparison(pick(a), pick(b), cluster=cluster, seed=seed)


def comparison_text(result: dict) -> str:
    """One line for `score --compare`: the difference, its CI (or why there is none), both tests.

    Parameters
    ----------
    result : dict
        A `compare_runs` record.

    Returns
    -------
    str
        The signed difference (first minus second, fraction, three decimals) with its CI,
        the pairs and clusters it rests on, and both p values; "no items in common" when
        no item pairs.
    """
    if not result["n"]:
        return "paired difference: no items in common"
    lo, hi = result["difference_lo"], result["difference_hi"]
    ci = f"[{lo:+.3f}, {hi:+.3f}]" if _finite(lo) and _finite(hi) else f"({NO_CI_TEXT})"
    exact = "exact" if result["permutation_exact"] else "sampled"
    return (
        f"paired difference (first - second): {result['difference']:+.3f} {ci} over {result['n']} "
        f"items in {result['n_clusters']} {result['cluster']} clusters (CI: "
        f"{result['ci_method']}), McNemar p = {result['mcnemar_p']:.3g}, cluster permutation p = "
        f"{result['permutation_p']:.3g} ({exact}; smallest attainable p = "
        f"{result['permutation_min_p']:.3g})"
    )


def write_summary(run: str | Path, summary: dict) -> Path:
    """Write a summary as the run's ``summary.json``, atomically (a reader never sees half a
    file).

    Parameters
    ----------
    run : str or Path
        The run folder.
    summary : dict
        A `score_run` summary (NaN written as ``NaN``).

    Returns
    -------
    Path
        The file written, ``<run>/summary.json``.
    """
    return atomic_write_text(
        Path(run) / "summary.json", json.dumps(summary, indent=2, default=float) + "\n"
    )

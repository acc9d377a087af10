"""The report: one self-contained HTML file (or markdown) a reviewer reads in two minutes,
every figure also written beside it as SVG, PDF and the CSV of the numbers it draws.

Sections, with stable ids: `headline` (the leaderboard, the models compared, a headline per
model), `formats` (question formats on the same cells), `ladder` (each listener up the rungs,
the drop at each, the interference matrix and the reasoning rung's drop), `kinds` (speech
against tones, music and other sounds on the same dimensions), `bias` (response
bias vs sensitivity), `psychometric` (curves and thresholds), `probing` (per-layer probes and
the diagnosis), `remedies` (tuning), `dataset` (the card: sources, verification, confounds)
and `provenance`. References (chance, bias, shortcut, one-end and ideal observers) are set apart
and never ranked.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from vocalgrad._version import __version__
from vocalgrad.dataset import content_sha256
from vocalgrad.defaults import N_BOOT
from vocalgrad.errors import ConfigError
from vocalgrad.files import atomic_write_text
from vocalgrad.report import sections
from vocalgrad.report.collect import (
    expand_runs,
    load_dataset_info,
    load_probe,
    load_runs,
    palette,
    rows_by_listener,
    untestable,
)
from vocalgrad.report.headline import headline
from vocalgrad.report.kinds import kinds
from vocalgrad.report.ladder import ladder
from vocalgrad.report.model import Section
from vocalgrad.report.remedies import remedies
from vocalgrad.report.render import exporting_figures, figure_files, to_html, to_markdown

SECTION_IDS = (
    "headline",
    "formats",
    "ladder",
    "kinds",
    "bias",
    "psychometric",
    "probing",
    "remedies",
    "dataset",
    "provenance",
)
__all__ = ["SECTION_IDS", "build_sections", "write_report"]


def build_sections(
    results_dirs: Sequence[str | Path],
    dataset: str | Path | None = None,
    probe_dirs: Iterable[str | Path] = (),
    n_boot: int = N_BOOT,
    fit_boot: int = 300,
    seed: int = 0,
    command: str = "",
    allow_dataset_mismatch: bool = False,
) -> list[Section]:
    """Every section, in order. `n_boot` for accuracy CIs, `fit_boot` for threshold CIs.

    A `dataset` given whose content hash differs from the one a run recorded is refused
    (its card would describe other clips or labels than the runs were scored on) unless
    `allow_dataset_mismatch`, and then the dataset section says so."""
    if not results_dirs:
        raise ConfigError("report: give at least one results folder (a `vocalgrad eval` output)")
    runs = load_runs(expand_runs(results_dirs))
    by_listener = rows_by_listener(runs)
    colours = palette([*by_listener, *(e["listener"] for r in runs for e in r.adaptive)])
    scored, note = sections.headline_rows(by_listener)
    scores = sections.scores_for(scored, by_listener, n_boot, seed)
    summaries = {n: s.table for n, s in scores.items()}
    adaptive: dict[str, list[dict]] = {}
    for run in runs:
        for entry in run.adaptive:
            adaptive.setdefault(entry["listener"], []).append(entry)
    psych, _ = sections.psychometric(by_listener, adaptive, colours, fit_boot, seed)
    probes = [load_probe(d) for d in probe_dirs]
    dataset_note = ""
    chosen = dataset is not None
    if dataset is None:  # fall back on the dataset the first run was evaluated on
        recorded = next(
            (r.manifest.get("dataset") for r in runs if r.manifest.get("dataset")), None
        )
        if recorded and Path(recorded).is_dir():
            dataset = recorded
        elif recorded:
            dataset_note = (
                f"The runs were evaluated on {recorded}, which is not here: section skipped."
            )
    info = load_dataset_info(dataset) if dataset is not None else None
    if dataset is not None and info is None:
        dataset_note = f"{dataset} holds no metadata.jsonl and no README.md: section skipped."
    recorded_all = list(dict.fromkeys(r.manifest.get("dataset") for r in runs))
    if info is not None and not chosen and len(recorded_all) > 1:  # a ladder's runs, say
        dataset_note = (
            f"The runs were evaluated on {len(recorded_all)} datasets (a ladder's rungs, or "
            f"several builds); the card below describes the first run's, {dataset} (--dataset "
            "chooses another)."
        )
    elif info is not None:
        dataset_note = _dataset_mismatch(runs, dataset, chosen, allow_dataset_mismatch)
    generated = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        headline(summaries, colours, note, untestable(runs)),
        sections.formats(scored, n_boot, seed),
        ladder(by_listener, n_boot, seed),
        kinds(scored, n_boot, seed),
        sections.bias(scores, colours),
        psych,
        sections.probing(probes),
        remedies(runs, probes, n_boot, seed),
        sections.dataset(info, dataset_note),
        sections.provenance(
            runs, command or _command(results_dirs, dataset, probe_dirs), generated
        ),
    ]


def _dataset_mismatch(runs: Sequence, dataset: str | Path, chosen: bool, allow: bool) -> str:
    """What the dataset section says about `dataset` against the runs' recorded hashes.

    The card may describe one of several builds the runs were evaluated on (a demo's tiers
    beside its sweep and ladder); it may not describe clips no run was asked about, nor a
    dataset changed since a run was made on it.

    Parameters
    ----------
    runs : sequence of Run
        The runs reported; those that recorded ``dataset_sha256`` are checked.
    dataset : path
        The dataset whose card the report shows.
    chosen : bool
        The user named it (``--dataset``); else it is the first run's.
    allow : bool
        Show a mismatching card anyway (``--allow-dataset-mismatch``), with a note.

    Returns
    -------
    str
        "" when the card describes a dataset as some run saw it and no run saw it otherwise;
        a sentence for the section when other runs were on other builds, or when `allow`.

    Raises
    ------
    ConfigError
        A chosen dataset that no run was evaluated on, or that changed since a run on it.
    """
    sha, here = content_sha256(dataset), Path(dataset).resolve()
    recorded = [run for run in runs if run.manifest.get("dataset_sha256")]
    if not recorded:
        return ""
    on_it = [run for run in recorded if run.manifest["dataset_sha256"] == sha]
    changed = [
        run
        for run in recorded
        if run.manifest["dataset_sha256"] != sha
        and run.manifest.get("dataset")
        and Path(run.manifest["dataset"]).resolve() == here
    ]
    if on_it and not changed:
        others = len(recorded) - len(on_it)
        return (
            f"The card describes {dataset}, on which {len(on_it)} of the runs were evaluated; "
            f"the other {others} were evaluated on other builds."
            if others
            else ""
        )
    other = changed or recorded
    names = ", ".join(run.name for run in other[:3]) + (" ..." if len(other) > 3 else "")
    first, where = other[0].manifest["dataset_sha256"], other[0].manifest.get("dataset")
    what = (
        f"{dataset} is not the dataset {names} {'was' if len(other) == 1 else 'were'} "
        f"evaluated on (content sha256 {sha[:12]}…, the run recorded {first[:12]}…"
        + (f" for {where})" if where else ")")
        + ("; it changed since" if changed else "")
    )
    if chosen and not allow:
        raise ConfigError(
            f"--dataset {what}: its card would describe other clips or labels; pass the run's "
            "dataset, or --allow-dataset-mismatch to show this one anyway"
        )
    return f"Not the dataset of the runs: {what}; the card below describes {dataset} as it is now."


def write_report(
    results_dirs: Sequence[str | Path],
    out_html: str | Path,
    dataset: str | Path | None = None,
    probe_dirs: Iterable[str | Path] = (),
    fmt: str = "html",
    n_boot: int = N_BOOT,
    fit_boot: int = 300,
    seed: int = 0,
    command: str = "",
    allow_dataset_mismatch: bool = False,
) -> Path:
    """Write the report to `out_html` (markdown plus PNGs next to it with fmt="md"), and
    beside it each figure as `<stem>-<figure>.svg`, `.pdf` and `.csv`."""
    if fmt not in ("html", "md"):
        raise ConfigError(f"report format {fmt!r}: use html or md")
    probe_dirs = list(probe_dirs)
    parts = build_sections(
        results_dirs,
        dataset,
        probe_dirs,
        n_boot,
        fit_boot,
        seed,
        command,
        allow_dataset_mismatch=allow_dataset_mismatch,
    )
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    title = "vocalgrad report"
    subtitle = (
        f"Do listeners hear gradual acoustic change? {len(results_dirs)} run(s), "
        f"vocalgrad {__version__}."
    )
    files = figure_files(parts, out)
    with exporting_figures(parts, out):
        text = (
            to_html(title, subtitle, parts, files)
            if fmt == "html"
            else to_markdown(title, subtitle, parts, out)
        )
    atomic_write_text(out, text)
    return out


def _command(results_dirs, dataset, probe_dirs) -> str:
    args = ["vocalgrad", "report", *map(str, results_dirs)]
    if dataset is not None:
        args += ["--dataset", str(dataset)]
    for p in probe_dirs:
        args += ["--probe", str(p)]
    return shlex.join(args)

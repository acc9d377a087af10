"""The report's "Speech and other sounds" section: per listener and dimension, the accuracy
on speech against the accuracy on tones, music or other sounds (`vocalgrad.evaluation.kinds`),
and whether a failure is the speech's or the hearing's."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure as MplFigure

from vocalgrad.evaluation.kinds import (
    CHANCE,
    GENERAL,
    NEAR_CHANCE,
    SPEECH_SPECIFIC,
    KindContrast,
    kind_contrasts,
)
from vocalgrad.report.collect import is_reference
from vocalgrad.report.model import Figure, Section, Table, Text
from vocalgrad.report.values import CI_RULE, few_sources, with_ci

VERDICT_COLOURS = {SPEECH_SPECIFIC: "#d62728", GENERAL: "#7f7f7f", "": "#1f77b4"}


def kinds(scored: Mapping[str, list[dict]], n_boot: int, seed: int) -> Section:
    """Speech against each other kind of sound a listener was asked about, per dimension.

    Parameters
    ----------
    scored : mapping of str to list of dict
        Each listener's scored rows (`sections.headline_rows`), pooled over its runs: a
        speech benchmark's and a tone or music benchmark's.
    n_boot : int
        Bootstrap resamples for the CIs.
    seed : int
        Seeds them.

    Returns
    -------
    Section
        ``kinds``: a table and a figure of the paired differences, or a line saying why
        there is nothing to compare.
    """
    contrasts = kind_contrasts(scored, n_boot=n_boot, seed=seed)
    title = "Speech and other sounds"
    if not contrasts:
        return Section(
            "kinds",
            title,
            [
                Text(
                    "No listener was asked about one dimension in speech and in another kind "
                    "of sound (a tones or music build, `vocalgrad build --source tones`): "
                    "nothing to compare."
                )
            ],
            "no listener heard speech and another kind of sound",
        )
    table = Table(
        [
            "listener",
            "dimension",
            "other kind",
            "tiers",
            "sources (speech / other)",
            "speech acc. [95% CI]",
            "other acc. [95% CI]",
            "speech − other [95% CI]",
            "reading",
        ],
        [],
        caption="Accuracy on changing clips, each tier both kinds were asked at weighing "
        "alike; the difference's CI resamples each kind's own sources. "
        f"{CI_RULE}. Speech-specific deficit: speech below the other kind, the CI of the "
        "difference wholly below 0. General deficit: both kinds near chance (each accuracy "
        f"under {NEAR_CHANCE:g} with a CI that includes {CHANCE:g}). References below the line.",
    )
    for c in contrasts:
        row = [
            c.listener,
            c.category,
            c.kind,
            ", ".join(c.tiers),
            f"{c.sources_speech} / {c.sources_other}",
            with_ci(c.accuracy_speech, c.accuracy_speech_lo, c.accuracy_speech_hi),
            with_ci(c.accuracy_other, c.accuracy_other_lo, c.accuracy_other_hi),
            with_ci(c.difference, c.difference_lo, c.difference_hi),
            c.verdict or "–",
        ]
        if is_reference(c.listener):
            table.references.append(row)
        else:
            table.rows.append(row)
            if c.verdict:
                table.marked.add((len(table.rows) - 1, 8))
    blocks: list = [
        Text(
            "A listener at chance on speech raises the next question: is it the speech, or the "
            "hearing? The same dimensions asked about tones or music tell the two apart."
        ),
        table,
        Figure(
            "kinds",
            kinds_figure(contrasts),
            "Accuracy on speech minus accuracy on the other kind of sound, per listener and "
            "dimension, with its 95% CI; red: speech-specific deficit, grey: general deficit.",
            "speech against other sounds",
            [c.to_dict() for c in contrasts],
        ),
    ]
    fewest: dict[str, int | None] = {}
    for c in contrasts:
        least = min(c.sources_speech, c.sources_other)
        fewest[c.listener] = min(fewest.get(c.listener, least), least)
    return Section("kinds", title, blocks, _glance(contrasts), few_sources(fewest))


def _glance(contrasts: Sequence[KindContrast]) -> str:
    """One line: which models fail on speech alone, and which on every kind."""
    models = [c for c in contrasts if not is_reference(c.listener)]
    named = {
        verdict: [
            f"{c.listener} on {c.category} ({c.kind})" for c in models if c.verdict == verdict
        ]
        for verdict in (SPEECH_SPECIFIC, GENERAL)
    }
    parts = [f"{verdict}: {', '.join(who)}" for verdict, who in named.items() if who]
    if not parts:
        return f"No model fails on speech alone ({len(models)} model × dimension pairs compared)."
    line = "; ".join(parts)
    return f"{line[0].upper()}{line[1:]}."


def kinds_figure(contrasts: Sequence[KindContrast]) -> MplFigure:
    """The paired differences, one row per (listener, dimension, other kind).

    Parameters
    ----------
    contrasts : sequence of KindContrast
        What `vocalgrad.evaluation.kinds.kind_contrasts` found.

    Returns
    -------
    matplotlib.figure.Figure
        Each difference, speech minus other (accuracy, -1 to 1), with its CI where there
        is one, coloured by its verdict; a dashed line at 0 (no difference).
    """
    fig = MplFigure(figsize=(7, 0.9 + 0.32 * len(contrasts)))
    ax = fig.subplots()
    labels = []
    for i, c in enumerate(contrasts):
        colour = VERDICT_COLOURS[c.verdict]
        if math.isfinite(c.difference_lo) and math.isfinite(c.difference_hi):
            ax.plot([c.difference_lo, c.difference_hi], [i, i], color=colour, lw=2)
        ax.scatter([c.difference], [i], color=colour, zorder=3, s=24)
        labels.append(f"{c.listener} · {c.category.replace('_', ' ')} · {c.kind}")
    ax.axvline(0.0, color="black", ls="--", lw=1)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(-1, 1)
    ax.set_xlabel("accuracy on speech − accuracy on the other kind")
    ax.set_title("Speech against other sounds")
    return fig

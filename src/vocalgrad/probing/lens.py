"""Lens readout per layer and the per-item link between probe, lens and the model's answer.

The lens applies the model's own final norm and LM head to each layer's answer-position state
and scores log p("increase") - log p("decrease"): where a probe decodes the direction but the
lens does not, the model's readout is what fails. Balanced accuracy (sign of the score) shows
what the model would answer; AUC (threshold-free) shows information the lens carries despite
a bias towards one word.

A score of exactly 0 (both words equally likely, e.g. in bfloat16 or when both options start
with the same token) is a tie: the lens gives no answer. Ties are never read as either word;
they are counted (`ties`) and score 0.5, the expected score of a guess (the two-alternative
convention), so a lens without a preference sits at chance, not below it (which the diagnosis
would read as an inverted answer).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.metrics import roc_auc_score

from vocalgrad.probing.stats import balanced_accuracy_ci


def lens_curve(lens: np.ndarray, y: np.ndarray, clusters: np.ndarray, n_boot: int) -> list[dict]:
    """Per lens layer, how well the sign of the lens score answers the question.

    Parameters
    ----------
    lens : ndarray
        (items, layers): log p(increase) - log p(decrease) in nats; 0 or NaN is a tie.
    y : ndarray
        (items,): 1 for an increase item, 0 for a decrease item.
    clusters : ndarray
        (items,) int: the source clip of each item (see `vocalgrad.stats.cluster_ids`).
    n_boot : int
        Bootstrap resamples of the clusters.

    Returns
    -------
    list of dict
        One per layer: ``layer``, balanced accuracy ``ba`` with its 95% CI ``ba_lo``,
        ``ba_hi`` (a tie scores 0.5), threshold-free ``auc``, ``increase_rate`` and ``ties``.
    """
    pos = y > 0.5
    tie = ~((lens > 0) | (lens < 0))  # 0 or NaN: no answer
    correct = np.where(tie, 0.5, np.where(lens > 0, pos[:, None], ~pos[:, None])).T
    ba, lo, hi = balanced_accuracy_ci(correct, pos, clusters, n_boot, seed=1)
    rows = []
    for i in range(lens.shape[1]):
        auc = float(roc_auc_score(pos, lens[:, i])) if 0 < pos.sum() < len(pos) else float("nan")
        rows.append(
            {
                "layer": i,
                "ba": float(ba[i]),
                "ba_lo": float(lo[i]),
                "ba_hi": float(hi[i]),
                "auc": auc,
                "increase_rate": float(np.mean(lens[:, i] > 0)),
                "ties": int(tie[:, i].sum()),
            }
        )
    return rows


def behaviour_from_results(run: str | Path) -> dict[str, str | None]:
    """item_id -> the model's answer in a `vocalgrad eval` run folder (default prompt, no
    control; choice mode preferred over free text; None where unparsed)."""
    from vocalgrad.evaluation.evaluate import load_results

    _, rows = load_results(run)
    out: dict[str, str | None] = {}
    for mode in ("generate", "choice"):  # choice last so it wins
        for r in rows:
            if (
                r.get("mode") == mode
                and r.get("control") == "none"
                and r.get("variant") == "default"
            ):
                out[r["item_id"]] = r.get("predicted")
    return out


def behaviour_from_lens(lens_last: np.ndarray) -> list[str | None]:
    """The model's first-token preference at the last layer: its own answer between the two,
    None for a tie (no preference; see the module docstring)."""
    return ["increase" if v > 0 else "decrease" if v < 0 else None for v in lens_last]

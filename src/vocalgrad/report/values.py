"""How the report writes numbers and what they rest on: values with CIs, and the one warning
when too few source recordings stand behind them."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from vocalgrad.stats import BOOTSTRAP_MIN_CLUSTERS, MIN_SOURCES, NO_CI_TEXT

CI_RULE = (
    f"95% CIs resample sources: a cluster bootstrap with ≥ {BOOTSTRAP_MIN_CLUSTERS} sources, "
    f"a jackknife t-interval with 2–{BOOTSTRAP_MIN_CLUSTERS - 1}, none with one"
)
NAMED = 3  # names a few-sources warning spells out before "+N more"


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


def with_ci(point: float | None, lo: float | None, hi: float | None, digits: int = 2) -> str:
    """ "0.62 [0.55, 0.70]"; a number without an interval says why instead of "[–, –]"."""
    if fmt(point) == "–":
        return "–"
    if fmt(point) != "–" and (fmt(lo) == "–" or fmt(hi) == "–"):
        return f"{fmt(point, digits)} ({NO_CI_TEXT})"
    return f"{fmt(point, digits)} [{fmt(lo, digits)}, {fmt(hi, digits)}]"


def fewest_sources(summary: Sequence[Mapping]) -> int | None:
    """The fewest sources any group of a `summarise` result rests on (None if not recorded)."""
    counts = [g["n_clusters"] for g in summary if g.get("n_clusters") is not None]
    return min(counts) if counts else None


def few_sources(
    sources: Mapping[str, int | None],
    noun: str = "listener",
    whose: str = "",
    per: str = " per dimension",
) -> list[str]:
    """At most one compact warning for everything in `sources` (name -> fewest sources) under
    MIN_SOURCES: "8 sources per dimension for every listener ...", or the few names with their
    counts (`per`: what a count is the fewest of). The same problem in several sections gives
    the same text, which the report shows once."""
    few = {n: c for n, c in sources.items() if c is not None and c < MIN_SOURCES}
    if not few:
        return []
    counts = sorted(set(few.values()))
    if len(few) == len(sources) and len(few) > 1:
        span = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
        lead = f"{span} sources{per} for every {noun} (under {MIN_SOURCES})"
    else:
        named = [f"{n} ({c})" for n, c in sorted(few.items(), key=lambda kv: (kv[1], kv[0]))]
        lead = (
            f"Under {MIN_SOURCES} sources{per} for "
            + ", ".join(named[:NAMED])
            + (f" and {len(named) - NAMED} more" if len(named) > NAMED else "")
        )
    return [f"{whose}{lead}: too few to trust their CIs; read those numbers as indicative."]

"""The audit report as text: the table that goes into the dataset card and `vocalgrad audit`'s
output."""

from __future__ import annotations

from collections.abc import Mapping

from vocalgrad.stats import BOOTSTRAP_MIN_CLUSTERS
from vocalgrad.stimuli.audit.gates import (
    ALPHA,
    DEALS,
    MIN_SOURCES,
    TARGET_ACCURACY,
    TARGET_AUC,
    distinct_figures,
)
from vocalgrad.stimuli.audit.redraw import describe


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _verdict(passes: bool | None) -> str:
    return "n/a (too few sources)" if passes is None else ("yes" if passes else "NO")


def _order_free_cell(c: Mapping) -> str:
    """The order-free family's accuracy [CI] and its strongest cue; marked where not gated."""
    of = c.get("order_free")
    if not of:
        return "n/a"
    lo, hi = of["ci"]
    top = next(iter(of["per_cue_auc"]), None)
    cue = f" ({top.removeprefix('of_')} {of['per_cue_auc'][top]['auc']:.2f})" if top else ""
    # a label that survives playing the clip backwards (a held value, whether two courses
    # agree) may be read by an order-free cue that measures the target
    gated = (
        "" if c.get("order_free_gated", True) else " (not gated: played backwards, the label stays)"
    )
    return f"{of['accuracy']:.2f} [{_pct(lo)}, {_pct(hi)}]{cue}{gated}"


def _one_end_cell(one_end: Mapping | None) -> str:
    """The one-end observer's accuracy [CI] and the end it reads (reported, not gated)."""
    if not one_end:
        return "n/a"
    ci = f"[{_pct(one_end['lo'])}, {_pct(one_end['hi'])}]"
    return f"{one_end['accuracy']:.2f} {ci} ({one_end['end']})"


GATE_VERDICT = {True: "FAIL", False: "pass", None: "not judged"}


def gate_rows(report: Mapping) -> list[list[str]]:
    """Per gate: category, gate, statistic, its null's 95th percentile at this size, the
    statistic needed to fail (family-wise), the family-wise p-value, the verdict and, for a
    failing gate, its statistic over the build's speakers dealt again (`redraw.describe`)."""
    rows = []
    for category, c in report["per_category"].items():
        for name, g in (c.get("gates") or {}).items():
            p = g.get("p_fwer")
            value, needed = distinct_figures(g["value"], g.get("needed"))
            rows.append(
                [
                    category,
                    name.replace("_", "-"),
                    f"{g['statistic']} {value}",
                    f"{g['null_p95']:.3f}",
                    "cannot fail at this size"
                    if g.get("needed") is None and g.get("fails") is not None
                    else needed,
                    _pct3(p),
                    GATE_VERDICT[g.get("fails")],
                    describe(g.get("redrawn")) if g.get("fails") else "–",
                ]
            )
    return rows


def _constant_classifier(c: Mapping) -> str:
    """ " (LR)" or " (HGB)": which classifier's AUC the table's constant cell is (the better
    of the two; the constant gate is the LR's alone, with its own relabelling protocol)."""
    per = c.get("constant") or {}
    for name in ("lr", "hgb"):
        if isinstance(per.get(name), Mapping) and per[name].get("auc") == c["constant_auc"]:
            return f" ({name.upper()})"
    return ""


def _pct3(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def power_lines(report: Mapping) -> list[str]:
    """What the build's gates could detect, and the size to build where that is over
    TARGET_ACCURACY (TARGET_AUC for constants)."""
    if "family" not in report:  # an audit.json written before the gates were calibrated
        return []
    family = report["family"]
    if not family.get("gates"):
        return ["No gate could be judged: too few clips or sources."]
    needed = family.get("needed") or {}
    parts = []
    if needed.get("accuracy") is not None:
        parts.append(f"LR accuracy {needed['accuracy']:.3f} (direction and order-free gates)")
    if needed.get("auc") is not None:
        parts.append(f"LR AUC {needed['auc']:.3f} (constant gates)")
    lines = [
        f"Gates: {family['gates']} in one family ({family['method']}); "
        f"each statistic over {DEALS} deals of the build's speakers into train and test, its "
        f"null from {family['draws']} relabellings (a source's clips all turn their labels "
        f"about or none do, a twin pair's where a dimension has fewer than {MIN_SOURCES} "
        f"sources; a source's constants move among its clips); family-wise alpha "
        f"{family['alpha']:.2f}, "
        f"p-values in steps of {family['p_resolution']:.3f}. Below chance never fails."
    ]
    if parts:
        lines.append(
            "Power: to fail a gate at this size a cue classifier must reach at least "
            + " and ".join(parts)
            + " (the largest over the gates; each gate's figure is 'needed')."
        )
    if family.get("cannot_fail"):
        lines.append(
            "No statistic can fail these gates at this size: " + ", ".join(family["cannot_fail"])
        )
    more = family.get("recommended_test_sources")
    if more:
        lines.append(
            f"This build cannot detect every leak of accuracy {TARGET_ACCURACY:.2f} (AUC "
            f"{TARGET_AUC:.2f}): build about {more} test sources (and as many train) for that."
        )
    else:
        lines.append(
            f"Every gate detects a leak of accuracy {TARGET_ACCURACY:.2f} (AUC {TARGET_AUC:.2f})."
        )
    return lines


def format_audit(report: Mapping) -> str:
    """Markdown tables of an audit report (the figures per category, then the gates with
    their nulls, family-wise p-values and power), with a legend of the excluded target cues."""
    lines = [
        f"Shortcut audit of {report['dataset']} (protocol {report.get('protocol') or 'n/a'}; "
        f"a dimension fails where one of its gates does, the build's gates family-wise at "
        f"{ALPHA:.2f})",
        "",
        "| category | items | sources | shortcut acc [CI] | LR | HGB | global-only | edge-only | "
        "worst curve | constant AUC, best of LR/HGB [CI] | order-free acc [CI] (top cue AUC) "
        "| one-end acc [CI] | pass |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    excluded = []
    for category, c in report["per_category"].items():
        if c["excluded_target_cues"]:
            excluded.append(f"{category}: {', '.join(c['excluded_target_cues'])}")
        if c["shortcut_accuracy"] is None:
            lines.append(
                f"| {category} | {c['n_items_test']} | {c['n_sources_test']} "
                "| n/a | | | | | | | | | "
                f"n/a ({'; '.join(c['reasons'])}) |"
            )
            continue
        lo, hi = c["shortcut_ci"]
        fam = c["by_family_set"]
        worst = c["worst_curve"]
        constant = (
            "n/a"
            if c["constant_auc"] is None
            else f"{c['constant_auc']:.2f} [{_pct(c['constant_ci'][0])}, "
            f"{_pct(c['constant_ci'][1])}]{_constant_classifier(c)}"
        )
        lines.append(
            f"| {category} | {c['n_items_test']} | {c['n_sources_test']} | "
            f"{c['shortcut_accuracy']:.2f} [{_pct(lo)}, {_pct(hi)}] "
            f"({c['shortcut_classifier'].upper()}) | "
            f"{c['direction']['lr']['accuracy']:.2f} | {c['direction']['hgb']['accuracy']:.2f} | "
            f"{_pct((fam.get('global') or {}).get('accuracy'))} | "
            f"{_pct((fam.get('edge') or {}).get('accuracy'))} | "
            f"{worst['curve']} {worst['accuracy']:.2f} | {constant} | {_order_free_cell(c)} | "
            f"{_one_end_cell(c.get('one_end'))} | {_verdict(c['passes'])} |"
        )
    lines += [
        "",
        "| category | gate | statistic | null 95th pct | needed to fail | p (family-wise) | gate "
        "| failing: dealt again |",
        "|---|---|---|---|---|---|---|---|",
        *("| " + " | ".join(row) + " |" for row in gate_rows(report)),
        "",
        *power_lines(report),
    ]
    lines.append(
        f"CIs resample test sources (cluster bootstrap with >= {BOOTSTRAP_MIN_CLUSTERS} sources, a "
        f"jackknife t-interval below, none with one source: the audit then cannot pass); they "
        "are reported, the gates decide. HGB, global-only, edge-only and the worst curve are "
        "reported, not gated. The constant AUC column is the better of the LR's and the HGB's "
        "(named in brackets); the constant gate's statistic is the LR's AUC alone, from the "
        "gate's own fit that its relabellings repeat, so the two figures can differ for one "
        "category."
    )
    lines.append(
        "Order-free cues (whole file, unchanged when played backwards) are audited on every "
        "dimension with no exclusions; the one-end observer (the dimension's own measure at "
        "one end, learnt on train) is reported, not gated. Beside a failing gate, 'redrawn' is "
        "its statistic over 30 single deals of the build's speakers into train and test "
        "(mean +- SD [range]): how far one deal moves it; reported, not gated."
    )
    limits = [
        f"{category}: {c['order_free_limit']}"
        for category, c in report["per_category"].items()
        if c.get("order_free_limit")
    ]
    if limits:
        lines.append(
            "Documented order-free limits (physics keeps these cues; the audit fails on them "
            "all the same): " + "; ".join(limits)
        )
    others = len(report["per_category"]) > len(excluded)
    lines.append(
        "Cue families excluded as target cues: "
        + "; ".join(excluded or ["none"])
        + ("; other dimensions: none." if excluded and others else ".")
    )
    return "\n".join(lines)


GATE_NAMES = {  # a gate's key -> how a one-line message names it
    "direction": "direction gate",
    "order_free": "order-free gate",
    "constant": "constant gate",
}


def failed_dimensions(report: Mapping) -> dict[str, str]:
    """The dimensions an audit report fails, each with a short reason for a one-line message.

    The reason names the failing gates (``direction gate``, ``order-free gate``, ``constant
    gate``), or the other dimension's direction where that gives the label; any other reason
    is the start of its text. A dimension too small to judge (``passes`` None) is not listed.

    Parameters
    ----------
    report : Mapping
        An audit report (``audit.json``): ``per_category`` with ``passes``, ``reasons`` and
        ``gates``.

    Returns
    -------
    dict of str to str
        Failing dimension -> short reason, in the report's order; empty when none fails.
    """
    failed = {}
    for dim, c in (report.get("per_category") or {}).items():
        if c.get("passes") is not False:
            continue
        short = [
            name
            for key, name in GATE_NAMES.items()
            if ((c.get("gates") or {}).get(key) or {}).get("fails")
        ]
        for reason in c.get("reasons") or []:
            if reason.startswith("the other dimension's direction"):
                short.append("other dimension's direction")
            elif not reason.startswith(("direction predicted", "constant clips", "a documented")):
                short.append(reason.split(":")[0][:60])
        failed[dim] = ", ".join(short) or "failed"
    return failed

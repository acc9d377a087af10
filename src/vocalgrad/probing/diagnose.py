"""Per-category verdicts from probe curves, controls, lens and behaviour, with the evidence.

Thresholds are named constants and printed with every table, so a reader can see exactly
why a category got its verdict. "Decodable" means: CI lower bound above chance, at least
MIN_ABOVE_CHANCE above chance, and at least MIN_SELECTIVITY above the shuffled-label control.
Verdicts are tried in this order: heard and used, not encoded, present but unused, lost
across layers, only nonlinearly decodable; otherwise inconclusive. Each verdict comes with
`reason`: one sentence that applies the rule to the figures, so a high accuracy beside "not
encoded" (a wide CI that reaches chance) reads as what it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from vocalgrad.stats import MIN_SOURCES

CHANCE = 0.5
MIN_ABOVE_CHANCE = 0.10  # "well above chance": balanced accuracy >= 0.60
MIN_SELECTIVITY = 0.10  # probe minus shuffled-label control
NONLINEAR_GAP = 0.10  # MLP minus linear at the same stage
MIN_DECLINE = 0.10  # best early linear minus best late linear
LATE_FRACTION = 1 / 3  # without answer-position stages: the last third of stages is "late"

VERDICTS = (
    "heard and used",
    "present but unused",
    "lost across layers",
    "only nonlinearly decodable",
    "not encoded",
    "inconclusive",
)
MEANING = {  # docs/tutorials/probing.md's table says the same, word for word (a test checks)
    "heard and used": "the answers' 95% CI lies above chance (or below it: the direction heard, "
    "inverted)",
    "present but unused": "a late stage (the answer position, or the last layers) is linearly "
    "decodable, but the answers are at chance: the readout ignores it",
    "lost across layers": "decodable in early stages only, the best late stage at least 0.10 "
    "lower: gone before the answer is formed",
    "only nonlinearly decodable": "an MLP decodes the direction, a linear probe does not, by at "
    "least 0.10",
    "not encoded": "no stage is shown decodable: no probe passes the rule (95% CI above "
    "chance, at least 0.60, at least 0.10 above its shuffled-label control)",
    "inconclusive": "the evidence fits no verdict cleanly (read the numbers)",
}


def thresholds() -> dict[str, float]:
    return {
        "CHANCE": CHANCE,
        "MIN_ABOVE_CHANCE": MIN_ABOVE_CHANCE,
        "MIN_SELECTIVITY": MIN_SELECTIVITY,
        "NONLINEAR_GAP": NONLINEAR_GAP,
        "MIN_DECLINE": MIN_DECLINE,
        "LATE_FRACTION": round(LATE_FRACTION, 3),
        "MIN_SOURCES": MIN_SOURCES,
    }


_NAME = re.compile(r"^(?P<family>.*?)(?:\.(?P<index>\d+))?(?P<pos>@\w+)?$")


def stage_order(names: Sequence[str]) -> list[str]:
    """Model stages by depth: families (prefix + position) in the order the listener emits
    them, layers by index within a family (so `encoder.10` follows `encoder.9`)."""
    families: dict[tuple[str, str], int] = {}
    keyed = []
    for i, name in enumerate(names):
        m = _NAME.match(name)
        assert m is not None
        fam = (m["family"], m["pos"] or "")
        families.setdefault(fam, len(families))
        keyed.append((families[fam], int(m["index"]) if m["index"] else -1, i, name))
    return [k[-1] for k in sorted(keyed)]


def late_stages(ordered: Sequence[str]) -> set[str]:
    """Answer-position stages in the upper half of their stack, else the last third."""
    answer = [s for s in ordered if s.endswith("@answer")]
    if answer:
        idx = {s: int(_NAME.match(s)["index"] or 0) for s in answer}  # type: ignore[index]
        top = max(idx.values())
        return {s for s, i in idx.items() if i >= top / 2}
    k = max(1, round(LATE_FRACTION * len(ordered)))
    return set(ordered[-k:])


def rule() -> str:
    """The decodability rule in words, with its thresholds."""
    return (
        f"a stage counts as decodable when its probe's 95% CI lies above chance "
        f"({CHANCE:.2f}), its balanced accuracy is at least {CHANCE + MIN_ABOVE_CHANCE:.2f} and "
        f"it beats its shuffled-label control by at least {MIN_SELECTIVITY:.2f}"
    )


def shortfalls(rec: dict, probe: str) -> list[str]:
    """Which parts of the decodability rule a stage's probe fails, each with its figures
    (empty: decodable). Why: a verdict must say why a high accuracy does not count.

    Parameters
    ----------
    rec : dict
        One stage's record: ``{probe}_ba``, ``{probe}_lo``, ``{probe}_hi`` and
        ``{probe}_control_ba`` (balanced accuracies, 0-1).
    probe : str
        ``"linear"`` or ``"mlp"``.

    Returns
    -------
    list of str
        One clause per failed condition, e.g. "its 95% CI [0.48, 1.00] reaches chance (0.50)".
    """
    ba, lo, hi = rec.get(f"{probe}_ba"), rec.get(f"{probe}_lo"), rec.get(f"{probe}_hi")
    ctl = rec.get(f"{probe}_control_ba")
    if ba is None or lo is None or ba != ba:
        return ["not measured"]
    ctl = CHANCE if ctl is None or ctl != ctl else ctl
    failed = []
    if not lo > CHANCE:
        failed.append(
            f"its 95% CI [{lo:.2f}, {hi:.2f}] reaches chance ({CHANCE:.2f})"
            if hi is not None
            else f"its CI's lower bound {lo:.2f} is not above chance ({CHANCE:.2f})"
        )
    if ba - CHANCE < MIN_ABOVE_CHANCE:
        failed.append(f"it is under {CHANCE + MIN_ABOVE_CHANCE:.2f}")
    if ba - ctl < MIN_SELECTIVITY:
        failed.append(
            f"it beats its shuffled-label control ({ctl:.2f}) by {ba - ctl:.2f}, under "
            f"{MIN_SELECTIVITY:.2f}"
        )
    return failed


def decodable(rec: dict, probe: str) -> bool:
    return not shortfalls(rec, probe)


def _fmt(rec: dict, probe: str) -> str:
    return (
        f"{rec['stage']} {probe} {rec[f'{probe}_ba']:.2f} [{rec[f'{probe}_lo']:.2f}, "
        f"{rec[f'{probe}_hi']:.2f}] (shuffled control {rec[f'{probe}_control_ba']:.2f})"
    )


def diagnose(records: list[dict], behaviour: dict | None) -> dict:
    """Verdict for one category, with the sentence that applies the rule to the figures.

    Parameters
    ----------
    records : list of dict
        One per stage (see pipeline): model stages have kind "model" and a `late` flag.
    behaviour : dict or None
        The answers' balanced accuracy ``{ba, ba_lo, ba_hi, source}`` (0-1), if measured.

    Returns
    -------
    dict
        ``verdict``, ``reason`` (the rule applied to this category's figures, then the rule
        itself: a verdict beside a high accuracy must say why), ``meaning``, ``evidence``
        and the decodable stages per probe.
    """
    model = [r for r in records if r["kind"] == "model"]
    mlp_on = any(r.get("mlp_ba") is not None for r in model)
    lin = [r for r in model if decodable(r, "linear")]
    nonlin = [r for r in model if mlp_on and decodable(r, "mlp")]
    evidence: list[str] = []
    if behaviour:
        evidence.append(
            f"behaviour ({behaviour['source']}): balanced accuracy {behaviour['ba']:.2f} "
            f"[{behaviour['ba_lo']:.2f}, {behaviour['ba_hi']:.2f}]"
        )
    else:
        evidence.append("behaviour: not measured (no results and no lens)")
    if model:
        best = max(model, key=lambda r: r["linear_ba"])
        evidence.append("best linear: " + _fmt(best, "linear"))
        late = [r for r in model if r["late"]]
        if late:
            evidence.append(
                "best late linear: " + _fmt(max(late, key=lambda r: r["linear_ba"]), "linear")
            )
        if mlp_on:
            evidence.append("best MLP: " + _fmt(max(model, key=lambda r: r["mlp_ba"]), "mlp"))
    for r in records:
        if r["kind"] == "dsp":
            evidence.append("DSP reference: " + _fmt(r, "linear"))
    randoms = [r for r in records if r["kind"] == "random"]
    if randoms:
        rb = max(randoms, key=lambda r: r["linear_ba"])
        evidence.append("random-weights best: " + _fmt(rb, "linear"))
    inverted = behaviour is not None and behaviour["ba_hi"] < CHANCE
    if behaviour is not None and (behaviour["ba_lo"] > CHANCE or inverted):
        verdict = "heard and used"
        side = "below" if inverted else "above"
        reason = (
            f"heard and used: the answers' balanced accuracy {behaviour['ba']:.2f} has a 95% CI "
            f"[{behaviour['ba_lo']:.2f}, {behaviour['ba_hi']:.2f}] {side} chance ({CHANCE:.2f})"
        )
        if inverted:
            evidence.append(
                "note: behaviour is below chance (the answers follow the direction, inverted)"
            )
    elif not lin and not nonlin:
        verdict = "not encoded"
        reason = "not shown encoded: no stage passes the rule"
        if model:
            best = max(model, key=lambda r: r["linear_ba"])
            reason += (
                f"; the best linear probe, {best['stage']} at {best['linear_ba']:.2f}, fails it: "
                + " and ".join(shortfalls(best, "linear"))
            )
        if mlp_on:
            top = max(model, key=lambda r: r["mlp_ba"])
            reason += (
                f"; the best MLP, {top['stage']} at {top['mlp_ba']:.2f}, fails it: "
                + " and ".join(shortfalls(top, "mlp"))
            )
    elif any(r["late"] for r in lin):
        late_lin = [r["stage"] for r in lin if r["late"]]
        verdict = "present but unused" if behaviour is not None else "inconclusive"
        reason = f"decodable at late stage(s) {', '.join(late_lin)}"
        if behaviour is None:
            evidence.append("present at late stages, but behaviour was not measured")
            reason = f"inconclusive: {reason}, but behaviour was not measured"
        else:
            reason = (
                f"present but unused: {reason}, while the answers' 95% CI "
                f"[{behaviour['ba_lo']:.2f}, {behaviour['ba_hi']:.2f}] includes chance"
            )
    elif lin:
        peak = max(lin, key=lambda r: r["linear_ba"])
        late_best = max((r["linear_ba"] for r in model if r["late"]), default=CHANCE)
        verdict = (
            "lost across layers" if peak["linear_ba"] - late_best >= MIN_DECLINE else "inconclusive"
        )
        evidence.append(
            f"decline: peak {peak['linear_ba']:.2f} at {peak['stage']} -> best late {late_best:.2f}"
        )
        reason = (
            f"{verdict}: decodable early (peak {peak['linear_ba']:.2f} at {peak['stage']}), "
            f"not at late stages (best {late_best:.2f}, {peak['linear_ba'] - late_best:.2f} "
            f"lower; lost means at least {MIN_DECLINE:.2f} lower)"
        )
    else:
        gaps = [r["mlp_ba"] - r["linear_ba"] for r in nonlin]
        verdict = "only nonlinearly decodable" if max(gaps) >= NONLINEAR_GAP else "inconclusive"
        evidence.append(f"largest MLP - linear gap at an MLP-decodable stage: {max(gaps):+.2f}")
        reason = (
            f"{verdict}: only the MLP passes the rule, at {', '.join(r['stage'] for r in nonlin)}"
            f"; the largest MLP - linear gap there is {max(gaps):+.2f} (needs "
            f"{NONLINEAR_GAP:.2f})"
        )
    if lin and nonlin and verdict != "only nonlinearly decodable":
        late_nl = [r for r in nonlin if r["late"] and not decodable(r, "linear")]
        if late_nl:
            evidence.append(
                "also: late stages decodable only by the MLP: "
                + ", ".join(r["stage"] for r in late_nl)
            )
    return {
        "verdict": verdict,
        "reason": f"{reason}." if verdict == "heard and used" else f"{reason}. Rule: {rule()}.",
        "meaning": MEANING[verdict],
        "evidence": evidence,
        "decodable_linear": [r["stage"] for r in lin],
        "decodable_mlp": [r["stage"] for r in nonlin],
    }

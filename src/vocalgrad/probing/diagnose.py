"""Per-category verdicts from probe curves, controls, lens and behaviour, with the evidence.

Thresholds are named constants and printed with every table, so a reader can see exactly
why a category got its verdict. "Decodable" means: CI lower bound above chance, at least
MIN_ABOVE_CHANCE above chance, and at least MIN_SELECTIVITY above the shuffled-label control.
Verdicts are tried in this order: heard and used, not encoded, present but unused, lost
across layers, only nonlinearly decodable; otherwise inconclusive.
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
MEANING = {
    "heard and used": "the model's answers follow the direction (behaviour above chance)",
    "present but unused": "the direction is linearly decodable at the answer position / last "
    "layers, but the answers are at chance: the readout ignores it",
    "lost across layers": "decodable in early stages, then fades with depth: gone before the "
    "answer is formed",
    "only nonlinearly decodable": "an MLP decodes the direction, a linear probe does not",
    "not encoded": "no stage beats the chance and shuffled-label controls",
    "inconclusive": "the evidence fits no verdict cleanly (see the numbers)",
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


def decodable(rec: dict, probe: str) -> bool:
    ba, lo, ctl = rec.get(f"{probe}_ba"), rec.get(f"{probe}_lo"), rec.get(f"{probe}_control_ba")
    if ba is None or lo is None or ba != ba:
        return False
    ctl = CHANCE if ctl is None or ctl != ctl else ctl
    return lo > CHANCE and ba - CHANCE >= MIN_ABOVE_CHANCE and ba - ctl >= MIN_SELECTIVITY


def _fmt(rec: dict, probe: str) -> str:
    return (
        f"{rec['stage']} {probe} {rec[f'{probe}_ba']:.2f} [{rec[f'{probe}_lo']:.2f}, "
        f"{rec[f'{probe}_hi']:.2f}] (shuffled control {rec[f'{probe}_control_ba']:.2f})"
    )


def diagnose(records: list[dict], behaviour: dict | None) -> dict:
    """Verdict for one category. `records`: one per stage (see pipeline), model stages have
    kind "model" and a `late` flag; `behaviour`: {ba, ba_lo, ba_hi, source} or None."""
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
        if inverted:
            evidence.append(
                "note: behaviour is below chance (the answers follow the direction, inverted)"
            )
    elif not lin and not nonlin:
        verdict = "not encoded"
    elif any(r["late"] for r in lin):
        verdict = "present but unused" if behaviour is not None else "inconclusive"
        if behaviour is None:
            evidence.append("present at late stages, but behaviour was not measured")
    elif lin:
        peak = max(lin, key=lambda r: r["linear_ba"])
        late_best = max((r["linear_ba"] for r in model if r["late"]), default=CHANCE)
        verdict = (
            "lost across layers" if peak["linear_ba"] - late_best >= MIN_DECLINE else "inconclusive"
        )
        evidence.append(
            f"decline: peak {peak['linear_ba']:.2f} at {peak['stage']} -> best late {late_best:.2f}"
        )
    else:
        gaps = [r["mlp_ba"] - r["linear_ba"] for r in nonlin]
        verdict = "only nonlinearly decodable" if max(gaps) >= NONLINEAR_GAP else "inconclusive"
        evidence.append(f"largest MLP - linear gap at an MLP-decodable stage: {max(gaps):+.2f}")
    if lin and nonlin and verdict != "only nonlinearly decodable":
        late_nl = [r for r in nonlin if r["late"] and not decodable(r, "linear")]
        if late_nl:
            evidence.append(
                "also: late stages decodable only by the MLP: "
                + ", ".join(r["stage"] for r in late_nl)
            )
    return {
        "verdict": verdict,
        "meaning": MEANING[verdict],
        "evidence": evidence,
        "decodable_linear": [r["stage"] for r in lin],
        "decodable_mlp": [r["stage"] for r in nonlin],
    }

"""The dataset card (README.md with HF YAML header): what is in the folder and how far to trust
it."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection
from pathlib import Path

import numpy as np

from vocalgrad import dimensions, formats
from vocalgrad.stimuli.audit import format_audit
from vocalgrad.stimuli.config import BuildConfig
from vocalgrad.stimuli.neutralise import ROOM_TONE_DB, ROVE_DB
from vocalgrad.stimuli.plan import ENDPOINT_ROVE


def dimension_table(sr: int | None = None, only: Collection[str] | None = None) -> str:
    """Markdown table of the dimensions: parameter, unit, polarity, tiers, measurement.

    Parameters
    ----------
    sr : int, optional
        Sample rate in Hz at which tiers are checked for audibility (16 kHz endpoints if
        None, unchecked).
    only : collection of str, optional
        The dimensions to list (a dataset card lists those built, not every one known);
        None lists every dimension.

    Returns
    -------
    str
        The Markdown table.
    """
    lines = [
        '| category | parameter | unit | "increase" means | low | mid | high | verified by |',
        "|---|---|---|---|---|---|---|---|",
    ]
    for dim in dimensions.bound():
        name = dim.name
        if only is not None and name not in only:
            continue
        s = dim.SPEC
        tiers = []
        for tier in ("low", "mid", "high"):
            start, end = dim.endpoints(s.tiers[tier], sr or 16000)
            note = dim.inaudible_reason(s.tiers[tier], sr) if sr else None
            tiers.append(f"{start:g} → {end:g}" + (" (refused)" if note else ""))
        lines.append(
            f"| `{name}` | {s.parameter} | {s.unit} | {s.increase_means} | {' | '.join(tiers)} "
            f"| {s.measured} ({s.measured_unit}) |"
        )
    return "\n".join(lines)


def write_card(out: Path, config: BuildConfig, rows: list[dict], report: dict, selected) -> None:
    licences = Counter((s.domain, s.licence, s.attribution) for s, _ in selected)
    splits = Counter(r["split"] for r in rows)
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    lines = [
        "---",
        "license: other",
        "task_categories: [audio-classification]",
        "configs:",
        "- config_name: default",
        "  data_files:",
        *[f"  - split: {s}\n    path: {s}/*" for s in ("test", "train") if splits.get(s)],
        "---",
        "",
        "# vocalgrad benchmark",
        "",
        "Speech clips in which one acoustic dimension increases, decreases or stays constant "
        "over the speech span. Labels come from how each clip was rendered and were **checked "
        "by measuring every clip** against its source; clips whose measured change disagreed "
        "with the label were dropped together with their opposite-direction partner, so both "
        "directions stay exactly balanced.",
        "",
        f"- clips: {len(rows)} ({', '.join(f'{k}: {v}' for k, v in sorted(splits.items()))})",
        f"- sample rate: {config.sample_rate} Hz, 16-bit FLAC, sources normalised to "
        f"{config.target_lufs} LUFS",
        f"- every clip carries its source's room-tone floor (pink noise {-ROOM_TONE_DB:.0f} dB "
        "under the speech; no exact digital silence) and a random overall level offset (level "
        f"roving, uniform ±{ROVE_DB:g} dB, one draw per increase/decrease twin pair, "
        "stratified over a source's pairs and its constants in each dimension, "
        "`level_rove_db`), so absolute level and peak carry no label",
        "- trajectories are centred (volume: mean over the speech span; pitch, brightness, "
        "distance, stereo direction: mean weighted by the source's loudness; speed: every clip "
        "keeps the source's duration and silences) and non-volume processing is "
        "loudness-compensated",
        *[
            "- endpoints roved: each changing path is placed at random (one draw per twin pair) "
            f"within {ENDPOINT_ROVE:g} changes of its tier's endpoints, inside the dimension's "
            "domain (`param_start`, `param_end`), so one end of a clip does not say the direction"
        ]
        * config.rove_endpoints,
        f"- source spec: `{config.source}`, seed {config.seed}",
        *[f"- sources converted: {'; '.join(report['source_conversions'])}"]
        * bool(report.get("source_conversions")),
        "- file names are opaque hashes; labels live only in `metadata.jsonl`",
        f"- question format: `{config.format}` (column `format`) — "
        + formats.get(config.format).card_note,
        "",
        'Load it with `datasets.load_dataset("audiofolder", data_dir=...)`.',
        "",
        "## Dimensions",
        "",
        '"increase" is the label for the `increase` direction. Note the polarity: for noise, '
        "distortion, roughness, echo and vibration it means *more degradation*; for clarity "
        "it means *less* (the low-pass cutoff rises).",
        "",
        dimension_table(config.sample_rate, only=by_cat),
        "",
        "## Verification and confounds",
        "",
        "Verification measures each clip against its source (never the rendering parameter) and "
        "requires the realised change to clear an audibility floor taken from published JNDs; "
        "clips under it are refused as inaudible and counted, not labelled.",
        "",
        "| category | clips | agreement | refused (inaudible) | median measured change by tier "
        "(low / mid / high) | median abs. loudness drift dB | median abs. level-slope change dB | "
        "max clipping ratio |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, cat_rows in by_cat.items():
        unit = dimensions.get(name).SPEC.measured_unit
        by_tier = []
        for tier in ("low", "mid", "high"):
            changes = [
                abs(r["measured_change"])
                for r in cat_rows
                if r["tier"] == tier and r["measured_change"] is not None
            ]
            by_tier.append(f"{np.median(changes):.2f}" if changes else "–")
        drift = [
            abs(r["confound_loudness_drift_db"])
            for r in cat_rows
            if r.get("confound_loudness_drift_db") is not None
        ]
        slope = [
            abs(r["confound_level_slope_change_db"])
            for r in cat_rows
            if r["confound_level_slope_change_db"] is not None
        ]
        clip = [r["confound_clipping_ratio"] for r in cat_rows]
        lines.append(
            f"| `{name}` | {len(cat_rows)} | "
            f"{report['verification_agreement'].get(name, float('nan')):.2%} "
            f"| {report['per_category'].get(name, {}).get('refused_inaudible', 0)} "
            f"| {' / '.join(by_tier)} {unit} | {np.median(drift) if drift else float('nan'):.2f} "
            f"| {np.median(slope) if slope else float('nan'):.2f} "
            f"| {max(clip):.4f} |"
        )
    lines += ["", "Audibility floors (smallest realised change that counts):", ""]
    lines += [
        f"- `{d.name}`: {d.SPEC.audibility_floor:g} {d.SPEC.measured_unit} — {d.SPEC.floor_basis}"
        for d in dimensions.bound()
        if d.name in by_cat
    ]
    if report["refused_conditions"]:
        lines += ["", "Refused conditions (they would change nothing at this sample rate):", ""]
        lines += [
            f"- `{r['category']}` {r['tier']}: {r['reason']}" for r in report["refused_conditions"]
        ]
    if report.get("refused_for_source"):
        lines += [
            "",
            "Conditions refused on one source (inaudible on its own bandwidth), counted above:",
            "",
        ]
        lines += [
            f"- `{r['category']}` {r['tier']} on `{r['source_id']}` ({r['clips']} clips): "
            f"{r['reason']}"
            for r in report["refused_for_source"]
        ]
    lines += ["", "## Sources and licences", ""]
    lines += [
        f"- {domain}: {n} sources. Licence: {lic}. {attr}"
        for (domain, lic, attr), n in licences.items()
    ]
    lines += ["", "Provenance: `build.json` (config, versions, content hash); `build_report.json`."]
    (out / "README.md").write_text("\n".join(lines) + "\n")


def append_audit(out: Path, audit: dict) -> None:
    """Add the shortcut audit (`audit.json`) to the dataset card."""
    verdict = {
        True: "every audited dimension passes",
        False: "some dimensions FAIL",
        None: "too small to audit",
    }
    text = [
        "",
        "## Shortcut audit",
        "",
        "Classifiers on cues that should carry no direction (duration, loudness, peak, centroid, "
        "F0, file size, exact zeros, edge silences and edge levels/spectra, minus the cue "
        "families that *are* the target on a dimension), trained on the train split and tested on "
        "the test split, CIs clustered by source: "
        f"{verdict.get(audit.get('passes'), 'see audit.json')}.",
        "",
        format_audit(audit),
    ]
    with (out / "README.md").open("a") as f:
        f.write("\n".join(text) + "\n")

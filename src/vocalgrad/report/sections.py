"""The report's sections, each built from loaded runs, probes and the dataset."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from vocalgrad import dimensions
from vocalgrad.evaluation.psychometric import BELOW, OK, PsychometricFit, fit_rows, format_magnitude
from vocalgrad.evaluation.score import ListenerScore, score_rows
from vocalgrad.formats import names as format_names
from vocalgrad.probing.alignment import stage_summary
from vocalgrad.records import LABELS
from vocalgrad.report import figures
from vocalgrad.report.collect import (
    ADAPTIVE_TIER,
    DatasetInfo,
    Probe,
    Run,
    is_human,
    is_reference,
    is_sweep,
    kind_of,
    primary,
    split_format,
)
from vocalgrad.report.model import Details, Figure, Section, Table, Text
from vocalgrad.report.values import CI_RULE, few_sources, fewest_sources, fmt, with_ci
from vocalgrad.stats import MIN_SOURCES
from vocalgrad.stimuli.audit.gates import DEALS
from vocalgrad.stimuli.confounds import SUMMARISED, summarise_confounds


def _changing(rows: Sequence[dict]) -> list[dict]:
    return [r for r in rows if r.get("direction") in LABELS]


def headline_rows(by_listener: Mapping[str, list[dict]]) -> tuple[dict[str, list[dict]], str]:
    """Rows the headline scores per listener: the tiered benchmark where there is one (sweep
    and adaptive trials answer a different question), else the sweep."""
    picked = {name: primary(rows) for name, rows in by_listener.items()}
    tiered = {
        n: [r for r in rows if not is_sweep(r) and r.get("tier") != ADAPTIVE_TIER]
        for n, (rows, _) in picked.items()
    }
    note = ""
    if not any(_changing(v) for v in tiered.values()):
        tiered = {
            n: [r for r in rows if r.get("tier") != ADAPTIVE_TIER]
            for n, (rows, _) in picked.items()
        }
        note = "Only magnitude-sweep runs were given: accuracy is over the whole sweep."
    modes = {n: m for n, (_, m) in picked.items() if m}
    if len(set(modes.values())) == 1:
        note += f" Prompt/mode: {next(iter(modes.values()))} for every listener."
    elif modes:
        note += (
            " Prompt/mode per listener: " + ", ".join(f"{n}: {m}" for n, m in modes.items()) + "."
        )
    return {n: rows for n, rows in tiered.items() if _changing(rows)}, note


def formats(scored: Mapping[str, list[dict]], n_boot: int, seed: int) -> Section:
    """Accuracy per dimension in each question format, per listener asked in several: on the
    (source, magnitude) cells every format of that listener and dimension has, so the formats
    differ in the question only, not in the stimuli sampled. The best format is marked for
    models only: a reference's differences between formats are noise or design."""
    by_base: dict[str, dict[str, list[dict]]] = {}
    for name, rows in scored.items():
        base, fmt_ = split_format(name)
        by_base.setdefault(base, {})[fmt_] = _changing(rows)
    several = {b: f for b, f in by_base.items() if len(f) > 1}
    if not several:
        return Section(
            "formats",
            "Question formats",
            [Text("All runs ask one question format: nothing to compare.")],
            "one question format",
        )
    shown = [f for f in format_names() if any(f in fs for fs in several.values())]
    table = Table(
        ["listener", "category", "cells", "sources", *shown],
        [],
        caption="Accuracy [95% CI] per question format on the same sources and magnitudes "
        f"(cells: source × magnitude pairs every format has). {CI_RULE}. ★ best "
        f"format of a model, on rows with ≥ {MIN_SOURCES} sources; references "
        "below the line, pooled over dimensions.",
    )
    few: dict[str, int | None] = {}
    ordered = sorted(several.items(), key=lambda kv: (is_reference(kv[0]), kv[0]))
    for base, fmts in ordered:
        cats = sorted({r["category"] for rows in fmts.values() for r in rows})
        # a reference in one row over every category: its format differences are by design
        groups = [("all dimensions", set(cats))] if is_reference(base) else [(c, {c}) for c in cats]
        for label, members in groups:
            cells = [{_cell(r) for r in rows if r["category"] in members} for rows in fmts.values()]
            common = set.intersection(*cells)
            if not common:
                continue
            accs: dict[str, tuple] = {}
            for f, rows in fmts.items():
                kept = [r for r in rows if r["category"] in members and _cell(r) in common]
                o = score_rows(kept, by=(), n_boot=n_boot, seed=seed).overall
                accs[f] = (o["accuracy"], o["accuracy_lo"], o["accuracy_hi"])
                few[base] = min(few.get(base, o["n_clusters"]), o["n_clusters"])
            sources = len({c[1] for c in common})
            row = [base, label, str(len(common)), str(sources)]
            row += [with_ci(*accs[f]) if f in accs else "–" for f in shown]
            if is_reference(base):
                table.references.append(row)
                continue
            table.rows.append(row)
            if sources < MIN_SOURCES:
                continue  # a star on a handful of sources would mark noise
            best = max(a[0] for a in accs.values())
            table.marked |= {
                (len(table.rows) - 1, j + 4)
                for j, f in enumerate(shown)
                if f in accs and accs[f][0] == best
            }
    glance = f"{len(several)} listener(s) asked in {', '.join(shown)}."
    return Section("formats", "Question formats", [table], glance, few_sources(few))


def _cell(row: Mapping) -> tuple:
    """The stimulus cell a question format asks about: category, source and magnitude."""
    return row["category"], row["source_id"], row.get("magnitude")


def bias(scores: Mapping[str, ListenerScore], colours: Mapping[str, str]) -> Section:
    """Increase-response rate, d′ and c per listener, with controls and same-answer alarms.
    References are listed below the line and left out of the figure."""
    entries, rows_out, ref_rows, alarms = [], [], [], []
    for name in sorted(scores, key=lambda n: (kind_of(n) == "reference", is_human(n), n)):
        score = scores[name]
        o = score.overall
        per_cat = [(g["dprime"], g["criterion"]) for g in score.table if g["group"] != "overall"]
        row = [
            name,
            str(o["n"]),
            str(o.get("n_clusters", "–")),
            fmt(o["increase_rate"]),
            with_ci(o["dprime"], o["dprime_lo"], o["dprime_hi"]),
            with_ci(o["criterion"], o["criterion_lo"], o["criterion_hi"]),
            fmt(o["unparsed_rate"]),
            fmt(score.flip_rate),
            fmt(score.constant[0].get("increase_rate")),
        ]
        if is_reference(name):
            ref_rows.append(row)
            continue
        rows_out.append(row)
        entries.append(
            {
                "listener": name,
                "increase_rate": o["increase_rate"],
                "dprime": o["dprime"],
                "criterion": o["criterion"],
                "per_category": per_cat,
            }
        )
        if score.alarm:
            alarms.append(f"{name}: {score.alarm}")
    table = Table(
        [
            "listener",
            "items",
            "sources",
            "says increase",
            "d′ [95% CI]",
            "criterion c [95% CI]",
            "unparsed",
            "reversed: flip rate",
            "constant clips: says increase",
        ],
        rows_out,
        swatches=[colours.get(e["listener"]) for e in entries],
        caption='d′ and c from answered trials, "increase" as the signal; items: '
        f"changing clips, sources: the recordings they come from. {CI_RULE}. "
        "A listener that hears flips its answer on time-reversed clips. "
        "References below the line.",
        references=ref_rows,
        reference_swatches=[colours.get(r[0]) for r in ref_rows],
    )
    blocks: list = [
        Text(
            "Accuracy mixes hearing and habit: a listener that always says one word "
            "scores 50% whatever it hears. d′ measures hearing, c the lean."
        )
    ]
    blocks.append(table)
    if entries:
        blocks.append(
            Figure(
                "bias",
                figures.bias(entries, colours),
                'Left: share of "increase" answers (0.5 = unbiased). Right: '
                "sensitivity d′ against criterion c (references: see the table).",
                "bias and sensitivity",
                _bias_data(entries),
            )
        )
    blocks += [Text(a, "note") for a in alarms]
    biased = [
        e["listener"]
        for e in entries
        if math.isfinite(e["increase_rate"]) and abs(e["increase_rate"] - 0.5) > 0.2
    ]
    glance = (
        f"Strong response bias: {', '.join(biased)}."
        if biased
        else "No model leans strongly to one answer."
    )
    warned = few_sources({n: fewest_sources(s.table) for n, s in scores.items()})
    if biased and warned:
        glance += " (few sources: see the warning)"
    return Section("bias", "Bias vs sensitivity", blocks, glance, warned)


def _bias_data(entries: Sequence[Mapping]) -> list[dict]:
    rows = []
    for e in entries:
        rows.append(
            {
                "listener": e["listener"],
                "group": "overall",
                "increase_rate": e["increase_rate"],
                "dprime": e["dprime"],
                "criterion": e["criterion"],
            }
        )
        rows += [
            {
                "listener": e["listener"],
                "group": "category",
                "increase_rate": "",
                "dprime": d,
                "criterion": c,
            }
            for d, c in e["per_category"]
        ]
    return rows


def psychometric(
    by_listener: Mapping[str, list[dict]],
    adaptive: Mapping[str, list[dict]],
    colours: Mapping[str, str],
    n_boot: int,
    seed: int,
) -> tuple[Section, list[PsychometricFit]]:
    """Fitted psychometric curves and 75% thresholds per listener x category, in units."""
    fits: list[PsychometricFit] = []
    for name, rows in by_listener.items():
        main, _ = primary(rows)
        for f in fit_rows(
            [r for r in main if r.get("tier") != ADAPTIVE_TIER], n_boot=n_boot, seed=seed
        ):
            f.listener = name  # pooled/folded listener name, as in every other section
            fits.append(f)
    by_cat: dict[str, list[PsychometricFit]] = {}
    for f in fits:
        by_cat.setdefault(f.category, []).append(f)
    if not by_cat and not adaptive:
        return Section(
            "psychometric",
            "Psychometric thresholds",
            [
                Text(
                    "No run had at least three magnitudes per dimension: build a sweep with "
                    "`vocalgrad build --design psychometric` and evaluate it.",
                    "note",
                )
            ],
            "No psychometric data.",
        ), fits
    listeners = sorted(
        {f.listener for f in fits} | set(adaptive), key=lambda n: (is_reference(n), is_human(n), n)
    )
    at_chance = [
        n
        for n in listeners
        if is_reference(n)
        and n not in adaptive
        and all(f.status not in (OK, BELOW) for f in fits if f.listener == n)
    ]
    columns = [n for n in listeners if n not in at_chance]  # a column of "no threshold" says little
    suffix = {"human": " [human]", "reference": " (reference)", "model": ""}
    header = ["category", "unit", *[n + suffix[kind_of(n)] for n in columns]]
    adaptive_cols = [(n, e) for n, es in adaptive.items() for e in es]
    cats = sorted(set(by_cat) | {e["category"] for _, e in adaptive_cols})
    table = Table(
        header + [f"{n} (adaptive)" for n in adaptive],
        [],
        caption='75%-correct threshold [95% CI, bootstrap over sources]; "no threshold '
        'within range" when the listener never leaves chance. References '
        "(grey, dashed in the figure) are not ranked.",
    )
    for cat in cats:
        spec = dimensions.get(cat).SPEC
        cell = {f.listener: f.label() for f in by_cat.get(cat, [])}
        row = [cat.replace("_", " "), spec.unit, *[cell.get(n, "–") for n in columns]]
        for n in adaptive:
            e = next((e for e in adaptive[n] if e["category"] == cat), None)
            row.append(_adaptive_label(e) if e else "–")
        table.rows.append(row)
    blocks: list = [
        Text(
            "P(correct) against change magnitude for a two-alternative task "
            "(guess 0.5, fitted lapse ≤ 0.06), fitted by maximum likelihood on log "
            "magnitude. The threshold is the magnitude answered correctly 75% of the "
            "time, in the dimension's physical unit."
        ),
        table,
    ]
    if at_chance:
        blocks.append(
            Text(
                "No threshold within range in any dimension, as expected of these "
                f"references: {', '.join(at_chance)}.",
                "note",
            )
        )
    refs = frozenset(n for n in listeners if is_reference(n))
    drawn = {
        c: fs
        for c, fs in by_cat.items()  # no panel of references at chance only
        if any(f.listener not in refs or f.status in (OK, BELOW) for f in fs)
    }
    if drawn:
        blocks.append(
            Figure(
                "psychometric",
                figures.psychometric(drawn, colours, refs),
                "Observed accuracy per magnitude (Wilson 95% CIs), fitted curves, "
                "and thresholds (▼). Dashed: chance; dotted: 75%; grey dashed "
                "curves: references that leave chance.",
                "psychometric curves per dimension",
                _psychometric_data(fits),
            )
        )
    ok = [f for f in fits if f.status == OK]
    glance = (
        f"{len(ok)} of {len(fits)} listener × dimension fits reach a threshold within range."
        if fits
        else "Adaptive thresholds only."
    )
    return Section("psychometric", "Psychometric thresholds", blocks, glance), fits


def _psychometric_data(fits: Sequence[PsychometricFit]) -> list[dict]:
    """One row per listener x category x magnitude, with the fit's threshold on every row."""
    return [
        {
            "listener": f.listener,
            "kind": kind_of(f.listener),
            "category": f.category,
            "unit": f.unit,
            "magnitude": lv.magnitude,
            "n": lv.n,
            "correct": lv.k,
            "accuracy": lv.accuracy,
            "accuracy_lo": lv.lo,
            "accuracy_hi": lv.hi,
            "status": f.status,
            "threshold": f.threshold if f.threshold is not None else "",
        }
        for f in fits
        for lv in f.levels
    ]


def _adaptive_label(entry: Mapping) -> str:
    n, method, t = entry.get("n_trials", 0), entry.get("method"), entry.get("threshold")
    guessed = int(entry.get("n_ties", 0)) + int(entry.get("n_unparsed", 0))
    trials = f"{method}, {n} trials" + (
        f", {guessed} tied/unparsed answered by a random guess" if guessed else ""
    )
    if t is None:
        what = {"below_range": "below tested range", "no_threshold": "no threshold within range"}
        return f"{what.get(entry.get('status'), entry.get('status'))} ({trials})"
    lo, hi = entry.get("ci") or (None, None)
    ci = (
        f" [{format_magnitude(lo)}, {format_magnitude(hi)}]"
        if lo is not None and hi is not None
        else ""
    )
    return f"{format_magnitude(t)} {entry.get('unit', '')}{ci} ({trials})"


def probing(probes: Sequence[Probe]) -> Section:
    """Per-layer probe curves per stage, controls and lens, and the diagnosis table."""
    if not probes:
        return Section(
            "probing",
            "Probing",
            [
                Text(
                    "No probe output given (pass --probe DIR with layers.csv and diagnosis.csv): "
                    "section skipped.",
                    "note",
                )
            ],
            "No probing results.",
        )
    blocks: list = [
        Text(
            "Can the information be read from the model's hidden states, stage by "
            "stage? Probes well above their controls at a layer mean the change is "
            "represented there; a gap between the probes and the answers points to "
            "where it is lost."
        )
    ]
    warned: list[str] = []
    for i, p in enumerate(probes):
        warned += [f"{p.listener}: {w}" for w in p.warnings]
        if p.train_dataset:
            blocks.append(
                Text(
                    f"{p.listener}: probes trained on the train split of {p.train_dataset} "
                    "(the probed dataset has none), tested on the probed dataset's test split."
                )
            )
        verdicts = {str(r.get("category")): str(r.get("verdict", "")) for r in p.diagnosis}
        for category, drawn in figures.probing(p.layers, p.listener, verdicts):
            blocks.append(
                Figure(
                    f"probing-{i + 1}-{category}",
                    drawn,
                    f"{p.listener}, {category.replace('_', ' ')}: balanced accuracy per layer, "
                    "one panel per stage; shaded: 95% CI; grey: controls; black dashed: DSP "
                    "features.",
                    f"probe curves for {p.listener}, {category}",
                    [
                        {k: r.get(k) for k in LAYER_COLUMNS}
                        for r in p.layers
                        if r.get("category") == category
                    ],
                )
            )
        blocks += _alignment_blocks(p, i)
        if p.diagnosis:
            table, sources = _diagnosis_table(p)
            blocks.append(table)
            if any(n is None for n in sources.values()):
                warned.append(
                    f"{p.listener}: diagnosis.csv does not say how many test items and "
                    "sources its verdicts rest on (an older `vocalgrad probe`; rerun it)"
                )
            warned += few_sources(sources, "dimension", f"{p.listener} probe verdicts: ", "")
    return Section(
        "probing", "Probing", blocks, f"Probing results for {len(probes)} model(s).", warned
    )


LAYER_COLUMNS = ("category", "stage", "layer_index", "probe", "balanced_accuracy", "ci_lo", "ci_hi")


def _alignment_blocks(p: Probe, i: int) -> list:
    """Direction alignment: a heatmap at the last answer stage, a per-stage summary."""
    between = [r for r in p.alignment if r.get("kind") == "between categories"]
    if not between:
        return []
    stages = list(dict.fromkeys(r["stage"] for r in p.alignment))
    cats = sorted({r["category_a"] for r in p.alignment} | {r["category_b"] for r in p.alignment})
    last = stages[-1]
    m = np.full((len(cats), len(cats)), np.nan)
    for r in p.alignment:
        if r["stage"] == last:
            a, b = cats.index(r["category_a"]), cats.index(r["category_b"])
            m[a, b] = m[b, a] = r["cosine"]
    rows = []
    for entry in stage_summary(p.alignment):
        stage, pairs = entry["stage"], entry["pairs"]
        if not math.isfinite(entry["mean_cosine"]):
            # e.g. the token embedding at the answer position: no audio, no direction
            rows.append([stage, "– (identical states for every twin)", "–", f"0 / {pairs}"])
            continue
        null = entry["mean_null95"]
        rows.append(
            [
                stage,
                fmt(entry["mean_cosine"]),
                fmt(null) if math.isfinite(null) else "–",
                f"{entry['above_null']} / {pairs}",
            ]
        )
    return [
        Figure(
            f"alignment-{i + 1}",
            figures.heatmap(m, cats, cats, f"{p.listener}: {last}", "cosine"),
            f"{p.listener}: cosine between the dimensions' increase − decrease directions "
            f"(twin pairs: same source, tier, curve) at {last}; diagonal: split-half "
            "reliability (the ceiling).",
            f"direction alignment for {p.listener}",
            [
                {
                    k: r.get(k)
                    for k in ("stage", "kind", "category_a", "category_b", "cosine", "null95")
                }
                for r in p.alignment
            ],
        ),
        Table(
            ["stage", "mean cosine between dimensions", "mean null 95th pct", "pairs above null"],
            rows,
            caption='Is "increase" one direction across dimensions? A pair counts when '
            "its |cosine| beats the 95th percentile of a sign-flip null (random "
            "signs per twin pair: same noise, no shared direction).",
        ),
    ]


DIAGNOSIS_HEADERS = {  # diagnosis.csv column (or "rests on": the counts) -> the report's
    "rests on": "test items / sources",
    "reason": "why (the rule applied)",
    "behaviour_ba": "answers' balanced accuracy [95% CI]",
    "behaviour_source": "answers from",
}


def _diagnosis_cell(value: object) -> str:
    """A diagnosis.csv cell for reading: a decimal number to 2 places, anything else as is."""
    text = str(value if value is not None else "")
    try:
        number = float(text)
    except ValueError:
        return text
    return f"{number:.2f}" if "." in text or "e" in text.lower() else text


def _diagnosis_table(p: Probe) -> tuple[Table, dict[str, int | None]]:
    """The diagnosis with what each verdict rests on, and category -> test sources. Column
    names are words, numbers have 2 decimals and the answers' accuracy is one cell with its
    CI: the CSV keeps the raw columns for programs."""
    counts = ("n_test", "n_test_sources")
    behaviour = ("behaviour_ba", "behaviour_lo", "behaviour_hi")
    columns = [h for h in p.diagnosis[0] if h not in {*counts, *behaviour[1:], "reason"}]
    after = columns.index("verdict") + 1 if "verdict" in columns else len(columns)
    columns[after:after] = ["rests on", *(["reason"] if "reason" in p.diagnosis[0] else [])]
    header = [DIAGNOSIS_HEADERS.get(h, h.replace("_", " ")) for h in columns]
    rows, sources = [], {}
    for r in p.diagnosis[:60]:
        n, k = (int(r[c]) if str(r.get(c, "")).isdigit() else None for c in counts)
        sources[str(r.get("category", ""))] = k
        rests = "–" if n is None or k is None else f"{n} / {k}" + (" ⚠" if k < MIN_SOURCES else "")
        row = []
        for h in columns:
            if h == "rests on":
                row.append(rests)
            elif h == "behaviour_ba":
                ba, lo, hi = (r.get(c) or "" for c in behaviour)
                ci = f" [{_diagnosis_cell(lo)}, {_diagnosis_cell(hi)}]" if lo and hi else ""
                row.append(f"{_diagnosis_cell(ba)}{ci}" if ba else "–")
            else:
                row.append(_diagnosis_cell(r.get(h, "")))
        rows.append(row)
    return Table(
        header,
        rows,
        caption=f"{p.listener}: diagnosis. Test items / sources: what each "
        f"verdict rests on; ⚠ fewer than {MIN_SOURCES} sources.",
    ), sources


def dataset(info: DatasetInfo | None, note: str = "") -> Section:
    """The dataset card: sources, verification agreement per category, confound statistics."""
    if info is None:
        return Section(
            "dataset",
            "Dataset",
            [Text(note or "No dataset folder given (--dataset): section skipped.", "note")],
            "No dataset card.",
        )
    rows, cfg = info.rows, info.build.get("config", {})
    splits = Counter(r.get("split") for r in rows)
    facts = [
        ["folder", str(info.path)],
        ["source", str(cfg.get("source", "–"))],
        ["design", str(cfg.get("design", "tiers"))],
        [
            "clips",
            ", ".join(f"{k}: {v}" for k, v in sorted(splits.items(), key=lambda kv: str(kv[0]))),
        ],
        ["sources", str(len({r.get("source_id") for r in rows}))],
        ["speakers", str(len({r.get("speaker_id") for r in rows}))],
        [
            "domains",
            ", ".join(f"{k} ({v})" for k, v in Counter(r.get("domain") for r in rows).items()),
        ],
        ["sample rate", f"{cfg.get('sample_rate', '–')} Hz"],
        ["seed", str(info.build.get("seed", cfg.get("seed", "–")))],
        ["content sha256", str(info.build.get("content_sha256", "–"))[:16]],
    ]
    if info.official:
        facts.insert(
            1,
            [
                "layout",
                "the official release (metadata.csv): it carries no references, "
                "magnitudes or build provenance, so labels cannot be verified against the "
                "sources and no shortcut audit against references is possible; "
                "`vocalgrad verify` runs the blind checks only",
            ],
        )
    agreement = info.report.get("verification_agreement", {})
    header = [
        "category",
        "clips",
        "verification agreement",
        "verified (kept)",
        *[f"median |{label}|" for _, label, _ in SUMMARISED],
        "max clipping ratio",
    ]
    table_rows = []
    for cat, summary in summarise_confounds(rows).items():
        row = [
            cat.replace("_", " "),
            str(summary["clips"]),
            f"{agreement[cat]:.1%}" if cat in agreement else "–",
            "–" if info.official else f"{summary['verified']:.1%}",
        ]
        for key, _, _ in SUMMARISED:
            row.append("–" if summary[key] is None else fmt(summary[key], 3))
        clipping = summary["max_clipping_ratio"]
        row.append("–" if clipping is None else fmt(clipping, 4))
        table_rows.append(row)
    blocks: list = [
        *([Text(note, "note")] if note else []),
        Table([], facts, caption="What the benchmark is made of."),
        Table(
            header,
            table_rows,
            caption="Per dimension: how often measurement agreed "
            "with the label, and what else changed (confounds a listener could hear).",
        ),
    ]
    failing = []
    if info.audit.get("per_category"):
        table, failing = _audit_table(info.audit)
        blocks.append(table)
        if info.audit.get("family"):
            blocks.append(_gates_table(info.audit))
    if info.card:
        blocks.append(Details("Dataset card (README.md)", info.card))
    low = [c for c, a in agreement.items() if a < 0.9]
    glance = f"{len(rows)} clips from {len({r.get('source_id') for r in rows})} sources; " + (
        f"verification below 90% for {', '.join(low)}." if low else "verification ≥ 90% everywhere."
    )
    if failing:
        glance += f" The shortcut audit fails {', '.join(failing)}."
    if note:
        glance = f"{note} {glance}"
    failed = sorted(
        c.replace("_", " ")
        for c, r in (info.audit.get("per_category") or {}).items()
        if r.get("passes") is False
    )
    warned = (
        [
            f"The dataset fails its shortcut audit on {', '.join(failed)}: a listener may score "
            "above chance there without hearing the change."
        ]
        if failed
        else []
    )
    return Section("dataset", "Dataset card", blocks, glance, warned)


def _audit_table(audit: Mapping) -> tuple[Table, list[str]]:
    """The build's shortcut audit per category (`audit.json`), and the categories it fails:
    a right answer there may not need hearing the change, and the report says so."""
    header = [
        "category",
        "shortcut accuracy",
        "order-free accuracy",
        "constant AUC",
        "one-end observer (reported, not gated)",
        "audit",
    ]
    rows, failing = [], []
    for cat, c in sorted(audit["per_category"].items()):
        free = c.get("order_free") or {}
        one = c.get("one_end") or {}
        ci, free_ci = c.get("shortcut_ci") or (None, None), free.get("ci") or (None, None)
        if not c.get("passes"):
            failing.append(cat.replace("_", " "))
        rows.append(
            [
                cat.replace("_", " "),
                with_ci(c.get("shortcut_accuracy"), *ci),
                with_ci(free.get("accuracy"), *free_ci),
                fmt(c.get("constant_auc")),
                f"{with_ci(one.get('accuracy'), one.get('lo'), one.get('hi'))} ({one['end']})"
                if one
                else "–",
                "passes" if c.get("passes") else "fails: " + "; ".join(c.get("reasons", [])),
            ]
        )
    caption = (
        "The shortcut audit of this build (audit.json): classifiers that never hear the "
        "change (cues that tell the direction without following it over time, and cues "
        "unchanged when the clip plays backwards) must stay at chance: a dimension fails where "
        "one of its gates (below) reads above what the build reads by chance, all of the "
        "build's gates taken together. Where a dimension fails, a listener's right answers "
        "there may not need hearing the change."
    )
    return Table(header, rows, caption=caption), failing


def _gates_table(audit: Mapping) -> Table:
    """The audit's gates (`audit.json`'s `gates` and `family`): per gate the statistic, its
    null's 95th percentile at this size, the statistic needed to fail and the family-wise
    p-value; the caption says what this build can detect and what size would detect more."""
    from vocalgrad.stimuli.audit.report import gate_rows, power_lines

    header = [
        "category",
        "gate",
        "statistic",
        "null 95th percentile",
        "needed to fail",
        "p (family-wise)",
        "gate",
        "failing: dealt again",
    ]
    rows = [[row[0].replace("_", " "), *row[1:]] for row in gate_rows(audit)]
    caption = " ".join(
        [
            *power_lines(audit),
            f"Each statistic is read over {DEALS} deals of the build's speakers into train and "
            "test. Beside a failing gate, 'redrawn' is its statistic over 30 single deals "
            "(mean ± SD [range]): how far one deal moves it.",
        ]
    )
    return Table(header, rows, caption=caption)


def provenance(runs: Sequence[Run], command: str, generated: str) -> Section:
    """Run manifests, package versions and the commands that made each file."""
    rows = []
    for run in runs:
        m = run.manifest
        lst = m.get("listener", {}) if isinstance(m.get("listener"), dict) else {}
        cfg = m.get("config", {})
        errors = sum(1 for r in run.rows if r.get("error"))
        rows.append(
            [
                run.name,
                str(lst.get("listener", "–")),
                str(lst.get("revision", "–")),
                str(m.get("dataset", "–")),
                str(m.get("dataset_sha256") or "–")[:12],
                ",".join(m.get("modes", [])) or "–",
                ",".join(cfg.get("variants", [])) or "–",
                ",".join(cfg.get("controls", [])) or "none",
                str(len(run.rows)),
                str(errors),
                str(m.get("command", "not recorded")),
            ]
        )
    versions = sorted({k for r in runs for k in r.manifest.get("versions", {})})
    version_rows = [
        [k, *[str(r.manifest.get("versions", {}).get(k, "–")) for r in runs]] for k in versions
    ]
    blocks: list = [
        Text(f"Generated {generated} by:"),
        Text(command, "code"),
        Table(
            [
                "run",
                "listener",
                "revision",
                "dataset",
                "dataset sha256",
                "modes",
                "variants",
                "controls",
                "rows",
                "errors",
                "command",
            ],
            rows,
            caption="Run manifests.",
        ),
    ]
    if version_rows:
        blocks.append(
            Table(
                ["package", *[r.name for r in runs]],
                version_rows,
                caption="Package versions recorded in each run manifest.",
            )
        )
    for run in runs:
        blocks.append(
            Details(f"manifest.json of {run.name}", json.dumps(run.manifest, indent=2, default=str))
        )
    return Section("provenance", "Provenance", blocks, f"{len(runs)} run(s); manifests below.")


def scores_for(
    scored: Mapping[str, list[dict]], by_listener: Mapping[str, list[dict]], n_boot: int, seed: int
) -> dict[str, ListenerScore]:
    """Each listener's headline rows scored once (`vocalgrad.evaluation.score.score_rows`),
    with its time-reversed control rows beside them for the flip rate."""
    return {
        n: score_rows(
            [*rows, *(r for r in by_listener[n] if r.get("control") == "reversed")],
            n_boot=n_boot,
            seed=seed,
        )
        for n, rows in scored.items()
    }

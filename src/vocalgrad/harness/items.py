"""What every harness asks and how it scores, taken from vocalgrad itself.

A harness (inspect-ai, lmms-eval) only carries audio and text to a model; the items come from
`load_rows`, the question from `build_prompt` (the words `vocalgrad eval` sends), the answer is
read by `parse_labelled` and every number comes from `metrics.summarise`. So a harness run and
`vocalgrad eval` + `vocalgrad score` on the same answers agree to the last digit.

Only clips that change (increase / decrease) are asked: `summarise` scores exactly those, and a
harness' own mean over samples then equals our accuracy. Constant clips stay with `vocalgrad eval`.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from vocalgrad import formats
from vocalgrad.audio import load_audio
from vocalgrad.dataset import content_sha256, dumps, load_rows, resolve
from vocalgrad.errors import ConfigError
from vocalgrad.evaluation.evaluate import run_key
from vocalgrad.formats import row_format
from vocalgrad.provenance import versions
from vocalgrad.questions.parsing import parse_labelled
from vocalgrad.questions.prompts import build_prompt, get_variant, reads_directions, second_of
from vocalgrad.records import LABELS
from vocalgrad.signal.kinds import row_kind
from vocalgrad.stats import summarise

# Fields a sample carries to the scorer: enough to rebuild the row `vocalgrad score` reads.
ITEM_FIELDS = ("item_id", "category", "direction", "tier", "curve", "magnitude", "source_id",
               "speaker_id", "split", "domain", "source_kind")  # fmt: skip
N_BOOT = 2000  # `vocalgrad score`'s default, so the CIs match too
SEED = 0


@dataclass(frozen=True)
class Selection:
    """Which items a harness task asks, and how (one format and one prompt variant per task)."""

    fmt: str = formats.DEFAULT
    variant: str = "default"
    categories: tuple[str, ...] = ()
    tiers: tuple[str, ...] = ()
    split: str = "test"
    audio_first: bool = False

    def __post_init__(self) -> None:
        formats.get(self.fmt)  # an unknown format is refused, with the known ones
        if set(get_variant(self.variant).options) & set(LABELS) != set(LABELS):
            raise ConfigError(
                f"variant {self.variant!r} asks no direction; the harness tasks score "
                "increase/decrease answers (use `vocalgrad eval` for it)"
            )

    @property
    def name(self) -> str:
        return self.fmt if self.variant == "default" else f"{self.fmt}_{self.variant}"


def as_tuple(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """A comma-separated option (`-T tiers=high,medium`) or a list, as a tuple."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    return tuple(str(v) for v in value)


def select_items(dataset: str | Path, selection: Selection) -> list[dict]:
    """The changing clips of one format, in file order, each checked to have the question asked."""
    rows = load_rows(resolve(dataset), splits=(selection.split,))
    held = sorted({row_format(r) for r in rows})  # the formats the split holds
    chosen = [
        r
        for r in rows
        if row_format(r) == selection.fmt
        and r["direction"] in LABELS
        and (not selection.categories or r["category"] in selection.categories)
        and (not selection.tiers or r.get("tier") in selection.tiers)
    ]
    if not chosen:
        raise ConfigError(
            f"{dataset}: no {selection.fmt} increase/decrease items in the {selection.split} split"
            + (f" for dimensions {','.join(selection.categories)}" if selection.categories else "")
            + (f" and tiers {','.join(selection.tiers)}" if selection.tiers else "")
            + f" (the dataset holds: {', '.join(held) or 'nothing'})"
        )
    asked = {(r["category"], row_kind(r), second_of(r) or "") for r in chosen}
    for category, kind, second in sorted(asked):
        # a clear error if unasked
        build_prompt(
            category, selection.variant, fmt=selection.fmt, kind=kind, second=second or None
        )
    return chosen


def question(row: Mapping, variant: str = "default") -> str:
    """The user turn's text, word for word what `vocalgrad eval` sends with the clip.

    Parameters
    ----------
    row : mapping
        A dataset row: its ``category``, format, ``source_kind`` (speech where absent) and
        a two-dimension item's ``second_category`` choose the wording.
    variant : str
        The prompt variant.

    Returns
    -------
    str
        The question and its instruction, naming the row's kind of sound ("the tone").
    """
    return build_prompt(
        row["category"], variant, fmt=row_format(row), kind=row_kind(row), second=second_of(row)
    ).text


def item_metadata(row: Mapping, variant: str) -> dict:
    """What a harness sample carries to the scorer.

    Parameters
    ----------
    row : mapping
        A dataset row.
    variant : str
        The prompt variant it is asked under.

    Returns
    -------
    dict
        ``ITEM_FIELDS`` copied from the row (``source_kind`` speech where the row does not
        say), a two-dimension item's ``second_category`` (its question names it), its
        ``format`` and the ``variant``.
    """
    fields = {k: row.get(k) for k in ITEM_FIELDS}
    second = {"second_category": row["second_category"]} if second_of(row) else {}
    return {
        **fields,
        **second,
        "source_kind": row_kind(row),
        "format": row_format(row),
        "variant": variant,
    }


def answer_row(
    item: Mapping, response: str | None, listener: str, error: str | None = None
) -> dict:
    """One `results.jsonl` row of a generated answer: our parser, our labels, our schema.

    Parameters
    ----------
    item : mapping
        The sample's metadata (`item_metadata`).
    response : str or None
        The harness model's raw text answer.
    listener : str
        The listener id the row is filed under.
    error : str or None
        Why no answer came, if none did.

    Returns
    -------
    dict
        A result row (`vocalgrad.records.ResultRow`), its answer read in the words the
        question used for the item's kind of sound.
    """
    variant = item["variant"]
    row = {
        **{k: item.get(k) for k in ITEM_FIELDS},
        "source_kind": row_kind(item),
        "format": item["format"],
        "variant": variant,
        "control": "none",
        "mode": "generate",
        "listener": listener,
        "revision": None,
        "key": run_key(item, variant, "none", "generate"),
        "response": response,
        "parse_status": None,
        "predicted": None,
        "llr": None,
        "logprobs": None,
        "error": error,
    }
    if error is None:
        prompt = build_prompt(
            item["category"],
            variant,
            fmt=item["format"],
            kind=row_kind(item),
            second=second_of(item),
        )
        parsed = parse_labelled(
            response, prompt.label_of, reads_directions(variant, item["format"])
        )
        row |= {
            "parse_status": parsed.status,
            "predicted": parsed.label,
            "correct": parsed.label == item["direction"],
        }
    return row


def summary(rows: Sequence[Mapping], n_boot: int = N_BOOT) -> list[dict]:
    """`vocalgrad score`'s table for answered rows: overall first, then one per category."""
    return summarise(
        [r for r in rows if r.get("error") is None],
        by=("category",),
        cluster="source_id",
        n_boot=n_boot,
        seed=SEED,
    )


def write_run(
    out: str | Path, dataset: str | Path, rows: Sequence[Mapping], listener: str, harness: str
) -> Path:
    """A `vocalgrad eval` run folder holding a harness' answers, for `vocalgrad score` and
    `vocalgrad report`."""
    out, path = Path(out), resolve(dataset)
    out.mkdir(parents=True, exist_ok=True)
    held = sorted({r["format"] for r in rows})
    variants = sorted({r["variant"] for r in rows})
    manifest = {
        "listener": {"listener": listener, "harness": harness},
        "dataset": str(path.resolve()),
        "dataset_sha256": content_sha256(path),
        "modes": ["generate"],
        "format": held[0] if held else None,
        "config": {"variants": variants, "controls": [], "mode": "generate"},
        # each variant's question as asked of its first row
        "prompts": {v: question(next(r for r in rows if r["variant"] == v), v) for v in variants},
        "versions": versions(),
        "command": shlex.join(sys.argv),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    with (out / "results.jsonl").open("w") as f:
        f.writelines(dumps({**r, "listener": listener}) + "\n" for r in rows)
    return out


def wav_copy(path: str | Path, cache: Path) -> Path:
    """The clip as 16-bit PCM WAV (what audio chat APIs take); FLAC is converted once into
    `cache`, under a name from the file's content so a changed clip is never served stale."""
    path = Path(path)
    if path.suffix.lower() == ".wav":
        return path
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:20]
    target = cache / f"{digest}.wav"
    if not target.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        audio, sr = load_audio(path, mono=False)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        sf.write(tmp, audio, sr, subtype="PCM_16", format="WAV")
        tmp.replace(target)
    return target

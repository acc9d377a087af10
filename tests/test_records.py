"""One typed definition per record: the dataset row's validation, its Hugging Face features
and the file reference's tables all come from `vocalgrad.records`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from vocalgrad import records
from vocalgrad.dataset import check_row, hf_features, load_rows
from vocalgrad.errors import DatasetError
from vocalgrad.records import DatasetRow, ResultRow, schema_fields, schema_table

FILES_MD = Path(__file__).parents[1] / "docs" / "reference" / "files.md"
BLOCK = re.compile(r"(<!-- schema: (\w+) -->\n)(.*?)(<!-- end schema -->)", re.S)


def test_the_file_reference_tables_are_generated_from_the_records():
    """Each `<!-- schema: X -->` block of the file reference is `schema_table(X)`;
    ``VOCALGRAD_DOCS_UPDATE=1`` rewrites them."""
    text = FILES_MD.read_text()
    blocks = BLOCK.findall(text)
    assert {name for _, name, _, _ in blocks} == {"DatasetRow", "ResultRow"}
    if os.environ.get("VOCALGRAD_DOCS_UPDATE"):
        text = BLOCK.sub(lambda m: f"{m[1]}{schema_table(getattr(records, m[2]))}\n{m[4]}", text)
        FILES_MD.write_text(text)
        blocks = BLOCK.findall(text)
    for _, name, table, _ in blocks:
        assert table.strip() == schema_table(getattr(records, name)), (
            f"files.md's {name} table is stale: VOCALGRAD_DOCS_UPDATE=1 pytest {__file__}"
        )


def test_every_field_is_documented_with_a_meaning():
    for record in (DatasetRow, ResultRow):
        undocumented = [f["name"] for f in schema_fields(record) if not f["meaning"]]
        assert not undocumented, (record.__name__, undocumented)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A comparison build: the format with the most fields."""
    from vocalgrad.stimuli.build import build
    from vocalgrad.stimuli.config import BuildConfig

    out = tmp_path_factory.mktemp("records") / "ds"
    config = BuildConfig(
        categories=("volume",), n_test=2, n_train=0, tiers=("high",), format="comparison"
    )
    build(config, out, audit=False)
    return out


@pytest.mark.usefixtures("builtin_cache")
def test_built_rows_carry_only_declared_fields_and_validate(small):
    """What the build writes is what the schema declares (none missing, none extra), so
    the schema cannot drift from the writer."""
    declared = {f["name"] for f in schema_fields(DatasetRow)}
    rows = load_rows(small)
    assert rows
    for r in rows:
        assert set(r) <= declared, set(r) - declared
    assert {"part_bounds", "part_spans_s", "gap_s", "pair_id"} <= set(rows[0])


@pytest.mark.usefixtures("builtin_cache")
def test_the_hf_features_come_from_the_schema_and_load(small):
    import datasets

    meta = small / "test" / "metadata.jsonl"
    columns = list(json.loads(meta.read_text().splitlines()[0]))
    features = hf_features(columns)
    assert features["part_bounds"] == datasets.Sequence(datasets.Sequence(datasets.Value("int64")))
    assert features["direction"] == datasets.Value("string")
    ds = datasets.load_dataset(
        "audiofolder", data_dir=str(small), features=features, cache_dir=str(small.parent / "hf")
    )
    assert ds["test"][0]["gap_s"] > 0 and ds["test"].features == features
    with pytest.raises(DatasetError, match="not in the dataset row schema"):
        hf_features([*columns, "mystery"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"direction": "up"}, r"direction: input should be 'increase', 'decrease' or 'constant'"),
        ({"sample_rate": "fast"}, r"sample_rate: input should be a valid integer"),
        ({"split": None}, r"split: input should be 'train' or 'test'"),
        ({"verified": "maybe"}, r"verified: input should be a valid boolean"),
    ],
)
def test_a_bad_row_is_refused_naming_row_and_field(change, message):
    row = {
        "file_name": "a.flac", "item_id": "abc", "category": "volume", "direction": "increase",
        "tier": "high", "curve": "linear", "magnitude": 18.0, "unit": "dB", "source_id": "s",
        "speaker_id": "k", "split": "test", "sample_rate": 16000, "duration_s": 3.0,
        "speech_onset_s": 0.5, "speech_offset_s": 2.5, "verified": True,
    }  # fmt: skip
    check_row(row, "metadata.jsonl: row 1")
    with pytest.raises(DatasetError, match=rf"metadata.jsonl: row 7 \(abc\): {message}"):
        check_row({**row, **change}, "metadata.jsonl: row 7 (abc)")
    missing = dict(row)
    del missing["speaker_id"]
    with pytest.raises(DatasetError, match="speaker_id: field required"):
        check_row(missing, "row 2")

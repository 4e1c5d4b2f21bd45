"""The streamed evaluate writes the bytes the whole-run path wrote (issue 20).

The oracle is the frozen whole-run path (tests/metrics/summary_oracle.py): the run's
rows in memory, ``to_parquet`` of the whole table and of each config's rows, the summary
from the table in memory. On the bundled example and a synthetic study, the table, the
dataset files and the summary written by ``evaluate_run`` are byte-identical to it; a
table longer than a row group has the same content and metadata in several row groups;
text columns that are not all strings take the whole-run path and still match.
"""

from __future__ import annotations

import io
import math
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import retrieval_lib.metrics.summary as summary_module
import retrieval_lib.metrics.table_stream as table_stream
from retrieval_lib.events.document import find_documents
from retrieval_lib.io import dumps_json
from retrieval_lib.metrics.summary import (
    DATASET_DIRNAME,
    EVALUATE_BATCH,
    WRITE_NDIGITS,
    evaluate_document_files,
    evaluate_run,
    read_left_out,
)
from retrieval_lib.normalize import normalize_paths
from tests.metrics.summary_oracle import OldRunTable

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def normalised(tmp_path_factory) -> dict[str, Path]:
    from retrieval_lib.synth import generate_runs

    root = tmp_path_factory.mktemp("oracle")
    data = root / "synth"
    generate_runs(data, n_tasks=24, seed=5)
    out = {"synth": root / "synth_out", "example": root / "example_out"}
    normalize_paths([data / "runs"], data / "benchmarks", out=out["synth"], workers=1)
    report = normalize_paths([EXAMPLES / "runs"], EXAMPLES / "benchmarks", out=out["example"])
    assert report.failed == 0
    return out


def _runs(tree: Path) -> list[Path]:
    return sorted(p.parent for p in tree.rglob("retrieval_events") if p.is_dir())


def _oracle(run: Path) -> tuple[str, bytes, dict[str, bytes]]:
    """What the old code wrote for one run: summary text, table bytes, dataset bytes."""
    events = run / "retrieval_events"
    docs = find_documents([events])
    table = OldRunTable()
    for start in range(0, len(docs), EVALUATE_BATCH):
        outcomes = evaluate_document_files(docs[start : start + EVALUATE_BATCH], (1, 3, 5, 10))
        assert all(error is None for _, error in outcomes)
        table.add([record for record, _ in outcomes])
    summary, data, parts = table.outputs()
    summary["counts"]["invalid_documents"] = []
    left_out = read_left_out(events)
    if left_out:
        summary["counts"]["left_out"] = left_out
    return dumps_json(summary, ndigits=WRITE_NDIGITS), data, parts


def _dataset(events: Path) -> dict[str, bytes]:
    folder = events / DATASET_DIRNAME
    return {p.name.removesuffix(".parquet"): p.read_bytes() for p in sorted(folder.iterdir())}


def _copy(normalised: dict[str, Path], tmp_path: Path, label: str) -> list[Path]:
    runs = []
    for name, tree in normalised.items():
        shutil.copytree(tree, tmp_path / label / name)
        runs += _runs(tmp_path / label / name)
    return runs


def test_streamed_outputs_are_byte_identical_to_the_whole_run_path(normalised, tmp_path):
    old_runs = _copy(normalised, tmp_path, "old")
    new_runs = _copy(normalised, tmp_path, "new")
    assert len(new_runs) >= 4
    configs = 0
    for old, new in zip(old_runs, new_runs, strict=True):
        summary, table, parts = _oracle(old)
        result = evaluate_run(new)
        assert result.summary_path.read_text() == summary, new
        assert result.table_path.read_bytes() == table, new
        assert _dataset(result.events_dir) == parts, new
        configs += len(parts)
    assert configs > len(new_runs)  # runs with several configs among them


def _reason_for_first_config(monkeypatch, config: str) -> None:
    """Rows of ``config`` get a text in a column that is None elsewhere."""
    original = summary_module._record_row

    def record_row(record, names):
        row = original(record, names)
        if row["config_name"] == config:
            row["harness_version_unknown_reason"] = "not recorded"
        return row

    monkeypatch.setattr(summary_module, "_record_row", record_row)


def test_a_long_table_has_the_same_content_in_several_row_groups(normalised, tmp_path, monkeypatch):
    old_runs = _copy(normalised, tmp_path, "old")
    new_runs = _copy(normalised, tmp_path, "new")
    run_old, run_new = old_runs[0], new_runs[0]
    configs = sorted(p.name for p in (run_old / "retrieval_events").iterdir() if p.is_dir())
    assert len(configs) >= 2
    _reason_for_first_config(monkeypatch, configs[0])
    monkeypatch.setattr(table_stream, "ROW_GROUP_ROWS", 7)
    summary, table, parts = _oracle(run_old)
    result = evaluate_run(run_new)
    assert result.summary_path.read_text() == summary
    written = pq.ParquetFile(result.table_path)
    rows = written.metadata.num_rows
    assert written.metadata.num_row_groups == math.ceil(rows / 7) > 1
    expected = pq.ParquetFile(io.BytesIO(table))
    assert expected.metadata.num_row_groups == 1
    assert written.schema_arrow.equals(expected.schema_arrow, check_metadata=True)
    pd.testing.assert_frame_equal(
        pd.read_parquet(result.table_path), pd.read_parquet(io.BytesIO(table))
    )
    dataset = _dataset(result.events_dir)
    assert sorted(dataset) == sorted(parts) == configs
    for config, data in parts.items():
        got = pq.ParquetFile(io.BytesIO(dataset[config]))
        want = pq.ParquetFile(io.BytesIO(data))
        # text in the first config's part; in the others all None: typed as the run's
        # column (pandas 3) or as null (pandas 2); either way as the oracle wrote it
        kind = str(want.schema_arrow.field("harness_version_unknown_reason").type)
        if config == configs[0]:
            assert kind in ("string", "large_string"), kind
        assert got.schema_arrow.equals(want.schema_arrow, check_metadata=True), config
        pd.testing.assert_frame_equal(
            pd.read_parquet(io.BytesIO(dataset[config])), pd.read_parquet(io.BytesIO(data))
        )


def test_a_table_with_non_text_values_is_written_whole_as_before(normalised, tmp_path, monkeypatch):
    original = summary_module._record_row

    def record_row(record, names):
        row = original(record, names)
        row["model"] = 7  # a number where text is expected: typed over the whole run
        return row

    monkeypatch.setattr(summary_module, "_record_row", record_row)
    old_runs = _copy(normalised, tmp_path, "old")
    new_runs = _copy(normalised, tmp_path, "new")
    summary, table, parts = _oracle(old_runs[0])
    result = evaluate_run(new_runs[0])
    assert pq.ParquetFile(io.BytesIO(table)).schema_arrow.field("model").type == "int64"
    assert result.table_path.read_bytes() == table
    assert result.summary_path.read_text() == summary
    assert _dataset(result.events_dir) == parts

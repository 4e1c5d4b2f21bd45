"""impact reads only the columns its analysis uses, and writes what a whole read gives.

The reference is the whole table read as before (``pd.read_parquet`` / ``read_csv`` of
every column) analysed by ``analyze_impact``: the JSON ``run_impact`` writes from the
projected read is byte-identical, per run and pooled, for the key family, all metrics
and a list, on a synthetic study and the bundled example, from Parquet and from CSV.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from retrieval_lib.io import atomic_write_json
from retrieval_lib.metrics.summary import evaluate_run
from retrieval_lib.metrics.table_files import read_metrics_table, table_column_names
from retrieval_lib.normalize import normalize_paths
from retrieval_lib.stats.impact import (
    analyze_impact,
    impact_columns,
    impact_to_json,
    run_impact,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
OPTIONS = {"n_boot": 200, "seed": 3}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory) -> list[Path]:
    from retrieval_lib.synth import generate_runs

    root = tmp_path_factory.mktemp("impact_columns")
    generate_runs(root / "synth", n_tasks=12, seed=5)
    normalize_paths([root / "synth" / "runs"], root / "synth" / "benchmarks", out=root / "out")
    normalize_paths([EXAMPLES / "runs"], EXAMPLES / "benchmarks", out=root / "out" / "example")
    runs = sorted(p.parent for p in (root / "out").rglob("retrieval_events") if p.is_dir())
    for run in runs:
        evaluate_run(run)
    return runs


def _whole(table: Path) -> pd.DataFrame:
    """The table as read before: every column."""
    if table.suffix == ".parquet":
        return pd.read_parquet(table)
    return read_metrics_table(table)  # columns=None: the whole-read path, unchanged


def _expected(tables: list[Path], metrics, folder: Path) -> tuple[list[bytes], bytes]:
    """The bytes run_impact wrote before: per table, then pooled."""
    frames = [_whole(t) for t in tables]
    per_run = []
    for i, frame in enumerate(frames):
        result = analyze_impact(frame, metrics=metrics, **OPTIONS)
        runs = sorted({str(r) for r in frame["run_id"].dropna()})
        per_run.append(atomic_write_json(folder / f"{i}.json", impact_to_json(result, runs=runs)))
    combined = pd.concat(frames, ignore_index=True, sort=False)
    pooled = analyze_impact(combined, metrics=metrics, **OPTIONS)
    runs = sorted({str(r) for r in combined["run_id"].dropna()})
    path = atomic_write_json(folder / "pooled.json", impact_to_json(pooled, runs=runs))
    return [p.read_bytes() for p in per_run], path.read_bytes()


@pytest.mark.parametrize("metrics", ["key", "all", ["file.P@1", "read.recall"]])
def test_projected_reads_write_the_same_json(evaluated, tmp_path, metrics):
    # every metric: the example's run and one synthetic run (the permutation p-values of
    # ~60 metrics cost); the key family and a list: every run
    runs = evaluated[:1] + evaluated[-1:] if metrics == "all" else evaluated
    tables = [run / "retrieval_events" / "retrieval_metrics.parquet" for run in runs]
    names = table_column_names(tables[0])
    kept = impact_columns(names, metrics)
    assert kept is not None and len(kept) < len(names) and "source_document" not in kept
    if metrics == "key":
        assert "file.P@1" not in kept and "file.AP" in kept and "reward" in kept
    (tmp_path / "expected").mkdir()
    per_run, pooled = _expected(tables, metrics, tmp_path / "expected")
    out = run_impact(runs, metrics=metrics, pool=tmp_path / "pooled.json", **OPTIONS)
    assert out.written[:-1] == [t.parent / "retrieval_impact.json" for t in tables]
    assert [p.read_bytes() for p in out.written[:-1]] == per_run
    assert out.written[-1].read_bytes() == pooled


def test_projected_csv_read_equals_the_whole_read(evaluated, tmp_path):
    run = tmp_path / "csv_run"
    shutil.copytree(evaluated[0], run)
    events = run / "retrieval_events"
    frame = pd.read_parquet(events / "retrieval_metrics.parquet")
    csv = events / "retrieval_metrics.csv"
    frame.to_csv(csv, index=False)
    whole = read_metrics_table(csv)
    kept = impact_columns(table_column_names(csv), "key")
    assert kept is not None
    projected = read_metrics_table(csv, kept)
    assert list(projected.columns) == kept
    pd.testing.assert_frame_equal(projected, whole[kept])

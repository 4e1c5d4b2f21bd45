"""summary_record: what a Dask worker sends on instead of a whole metrics record."""

from __future__ import annotations

import json

import pandas as pd

from retrieval_lib.io import dumps_json
from retrieval_lib.metrics.stages import evaluate_documents
from retrieval_lib.metrics.summary import metrics_table, summarize_run, summary_record


def test_table_and_summary_are_the_same_from_summary_records(tmp_path):
    from retrieval_lib.events.document import find_documents, load_document
    from retrieval_lib.normalize import normalize_paths
    from retrieval_lib.synth import generate_runs

    # every kind of ground truth (chunks included), degraded trials, both layouts
    generate_runs(tmp_path / "data", n_tasks=22, seed=11)
    normalize_paths([tmp_path / "data" / "runs"], tmp_path / "data" / "benchmarks", out=tmp_path)
    paths = find_documents([tmp_path])
    docs = [load_document(p) for p in paths]
    records = evaluate_documents(docs, source_names=[p.name for p in paths])
    assert any(r["computable"] for r in records) and not all(r["computable"] for r in records)
    assert any(r["chunk_level"].get("computable") for r in records)
    slim = [summary_record(r) for r in records]

    pd.testing.assert_frame_equal(metrics_table(slim), metrics_table(records))
    assert dumps_json(summarize_run(slim)) == dumps_json(summarize_run(records))
    # every provenance and outcome field travels (the table may grow new columns from them)
    assert all(s["provenance"] == r["provenance"] for s, r in zip(slim, records, strict=True))
    assert all(s["outcome"] == r["outcome"] for s, r in zip(slim, records, strict=True))
    full = sum(len(json.dumps(r)) for r in records)
    assert sum(len(json.dumps(s)) for s in slim) < 0.75 * full

"""evaluate_run streams documents in batches and writes what a whole-run pass writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import retrieval_lib.metrics.summary as summary_module
from retrieval_lib.metrics.summary import evaluate_run, metrics_table, summarize_run


@pytest.fixture(scope="module")
def normalised(tmp_path_factory) -> Path:
    from retrieval_lib.normalize import normalize_paths
    from retrieval_lib.synth import generate_runs

    data = tmp_path_factory.mktemp("synth") / "data"
    generate_runs(data, n_tasks=30, seed=11)
    out = data.parent / "out"
    normalize_paths([data / "runs"], data / "benchmarks", out=out, workers=1)
    # one document that cannot be loaded, in the middle of a run
    run = sorted(out.iterdir())[0]
    docs = sorted((run / "retrieval_events").rglob("*.retrieval_events.json"))
    broken = docs[len(docs) // 2]
    broken.write_bytes(b"{" + b" " * (broken.stat().st_size - 1))  # same size, not JSON
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _evaluate(tree: Path, batch: int, monkeypatch) -> list:
    monkeypatch.setattr(summary_module, "EVALUATE_BATCH", batch)
    return [evaluate_run(run) for run in sorted(tree.iterdir())]


def test_small_batches_write_the_same_bytes_as_one_batch(normalised, tmp_path, monkeypatch):
    whole, streamed = tmp_path / "whole", tmp_path / "streamed"
    shutil.copytree(normalised, whole)
    shutil.copytree(normalised, streamed)
    results_whole = _evaluate(whole, 10**9, monkeypatch)
    results_streamed = _evaluate(streamed, 3, monkeypatch)
    assert _files(whole) == _files(streamed)
    for a, b in zip(results_whole, results_streamed, strict=True):
        assert (a.documents, a.computable, len(a.failures)) == (
            b.documents,
            b.computable,
            len(b.failures),
        )
    assert sum(len(r.failures) for r in results_streamed) == 1
    assert max(r.documents for r in results_streamed) > 3 * 5  # several batches per run


def test_table_and_summary_equal_those_of_all_records_at_once(normalised, tmp_path, monkeypatch):
    tree = tmp_path / "tree"
    shutil.copytree(normalised, tree)
    for result in _evaluate(tree, 4, monkeypatch):
        # the records, read back from the metrics files written beside the documents
        order = {p: i for i, p in enumerate(result.metrics_paths)}
        records = [json.loads(p.read_text()) for p in sorted(result.metrics_paths, key=order.get)]
        table = pd.read_parquet(result.table_path)
        expected = metrics_table(records)
        # the metrics files are written rounded to 6 digits, the table is not
        pd.testing.assert_frame_equal(table, expected, check_exact=False, rtol=0, atol=1e-6)
        written = json.loads(result.summary_path.read_text())
        summary = summarize_run(records)
        assert written["counts"]["documents"] == summary["counts"]["documents"] == result.documents
        assert written["counts"]["computable"] == summary["counts"]["computable"]
        assert written["counts"]["by_config"] == json.loads(
            json.dumps(summary["counts"]["by_config"])
        )
        assert written["runs"] == summary["runs"]
        assert result.computable == sum(1 for r in records if r["computable"])

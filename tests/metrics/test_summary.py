"""The tidy metrics table, the run summary and evaluate_run on hand-made documents."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.events.document import write_document
from retrieval_lib.metrics.stages import evaluate_documents, validate_metrics_record
from retrieval_lib.metrics.summary import (
    IDENTITY_COLUMNS,
    TABLE_OUTCOME_COLUMNS,
    evaluate_run,
    find_events_roots,
    metrics_table,
    summarize_run,
    table_metric_columns,
    validate_summary,
)


def _doc(
    task: str,
    config: str,
    gt: list[str],
    reads: list[str],
    *,
    trace: bool = True,
    mcp: bool = False,
    outcome: dict[str, Any] | None = None,
) -> dict[str, Any]:
    tool = "mcp__sourcegraph__sg_read_file" if mcp else "Read"
    events = [
        {
            "step_index": i,
            "tool_name": tool,
            "tool_category": "file_read",
            "is_mcp": mcp,
            "target_files": [f],
            "hits_ground_truth": f in gt,
            "matched_ground_truth_files": [f] if f in gt else [],
            "elapsed_seconds": float(i),
            "cumulative_tokens": 100 * (i + 1),
        }
        for i, f in enumerate(reads if trace else [])
    ]
    doc = {
        "schema_version": "1.1",
        "provenance": {
            "run_id": "run-7",
            "batch_timestamp": None,
            "task_name": task,
            "config_name": config,
            "benchmark": "suite",
            "trial_name": f"{task}__t1",
            "model": "m",
            "harness_version": "2.0",
            "is_latest_trial": True,
            "trials_for_pair": 1,
        },
        "coverage": {
            "has_trajectory": trace,
            "has_transcript": False,
            "has_ground_truth": bool(gt),
            "has_chunk_ground_truth": False,
            "trace_source": "trajectory" if trace else None,
            "degraded_reason": None if trace else "no trace files",
        },
        "ground_truth": {"files": sorted(gt)},
        "events": events,
    }
    if outcome is not None:
        doc["outcome"] = outcome
    return doc


def corpus() -> list[dict[str, Any]]:
    """Six documents over two configs; hand-derived AP / RR written beside each."""
    return [
        # baseline t1: ranking a, x; GT {a, b}: AP = (1/1)/2 = 0.5, RR = 1
        _doc(
            "t1",
            "baseline",
            ["a", "b"],
            ["a", "x"],
            outcome={
                "reward": 1.0,
                "passed": True,
                "errored": False,
                "timed_out": False,
                "agent_execution_seconds": 12.5,
                "total_tokens": 1000,
                "cost_usd": 0.25,
            },
        ),
        # baseline t2: ranking x, y, a; GT {a}: AP = 1/3, RR = 1/3
        _doc("t2", "baseline", ["a"], ["x", "y", "a"]),
        # baseline t3: ranking y; GT {a}: AP = 0, RR = 0
        _doc("t3", "baseline", ["a"], ["y"]),
        # baseline t4: no trace: not computable, excluded from every mean
        _doc("t4", "baseline", ["a"], [], trace=False),
        # mcp t1: ranking b, a; GT {a, b}: AP = 1, RR = 1
        _doc("t1", "mcp", ["a", "b"], ["b", "a"], mcp=True),
        # mcp t2: no ground truth: not computable
        _doc("t2", "mcp", [], ["a"], mcp=True),
    ]


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return evaluate_documents(corpus())


def test_table_columns_and_values(records: list[dict[str, Any]]) -> None:
    table = metrics_table(records)
    assert list(table.columns[: len(IDENTITY_COLUMNS)]) == list(IDENTITY_COLUMNS)
    assert list(table.columns[-len(TABLE_OUTCOME_COLUMNS) - 1 : -1]) == list(TABLE_OUTCOME_COLUMNS)
    assert len(table) == 6
    for column in table_metric_columns():
        assert table[column].dtype == np.float64, column
    assert table["file.AP"].tolist()[:3] == pytest.approx([0.5, 1 / 3, 0.0])
    assert math.isnan(table.loc[3, "file.AP"])  # no trace: NaN, not 0
    assert math.isnan(table.loc[5, "file.RR"])  # no ground truth: NaN, not 1
    assert table.loc[1, "file.ttfr_steps"] == 2.0  # a reached at step 2
    assert table.loc[1, "file.ttfr_tokens"] == 300.0
    assert table["computable"].tolist() == [True, True, True, False, True, False]
    assert table.loc[0, "reward"] == 1.0 and bool(table.loc[0, "passed"]) is True
    assert table.loc[0, "cost_usd"] == 0.25 and table.loc[0, "total_tokens"] == 1000.0
    assert pd.isna(table.loc[1, "reward"]) and pd.isna(table.loc[1, "passed"])
    assert table.loc[4, "evidence_type"] == "mcp"
    assert table.loc[3, "non_computable_reason"].startswith("no usable trace")
    assert table.loc[0, "taxonomy.missed_key_evidence"] == 1.0  # b never retrieved


def test_summary_statistics_match_pandas(records: list[dict[str, Any]]) -> None:
    summary = summarize_run(records)
    validate_summary(json.loads(json.dumps(summary)))
    # independent: straight from the nested records with pandas' own statistics
    for config in ("baseline", "mcp"):
        for metric in ("AP", "RR", "P@1", "nDCG@3"):
            values = pd.Series(
                [
                    r["file_level"]["metrics"][metric]
                    for r in records
                    if r["provenance"]["config_name"] == config and r["computable"]
                ],
                dtype="float64",
            )
            stats = summary["metrics"][config][f"file.{metric}"]
            assert stats["n"] == len(values)
            assert stats["mean"] == pytest.approx(values.mean(), abs=1e-12)
            assert stats["median"] == pytest.approx(values.median(), abs=1e-12)
            if len(values) > 1:
                assert stats["std"] == pytest.approx(values.std(ddof=1), abs=1e-12)
            else:
                assert stats["std"] is None
    # by hand: baseline AP over t1-t3 = (0.5 + 1/3 + 0) / 3, t4 excluded
    baseline_ap = summary["metrics"]["baseline"]["file.AP"]
    assert baseline_ap["n"] == 3
    # not rounded before aggregation: rounding 1/3 to 6 places first would be off by 1e-7
    assert baseline_ap["mean"] == pytest.approx((0.5 + 1 / 3) / 3, abs=1e-15)
    assert baseline_ap["median"] == pytest.approx(1 / 3)
    assert summary["metrics"]["mcp"]["file.AP"] == {"mean": 1.0, "median": 1.0, "std": None, "n": 1}


def test_summary_counts_and_taxonomy(records: list[dict[str, Any]]) -> None:
    summary = summarize_run(records)
    counts = summary["counts"]
    assert (counts["documents"], counts["computable"]) == (6, 4)
    assert counts["skipped"] == {"total": 2, "by_reason": {"no_ground_truth": 1, "no_trace": 1}}
    assert counts["chunk_capable"] == 0
    assert counts["by_config"]["baseline"]["documents"] == 4
    assert counts["by_config"]["baseline"]["tasks"] == 4
    assert counts["by_config"]["mcp"]["skipped"]["by_reason"] == {"no_ground_truth": 1}
    # baseline missed_key_evidence: t1 misses b, t2 none, t3 misses a -> 2 tasks, 2 files
    missed = summary["error_taxonomy"]["baseline"]["labels"]["missed_key_evidence"]
    assert summary["error_taxonomy"]["baseline"]["n"] == 3
    assert (missed["tasks_with_label"], missed["total_files"]) == (2, 2)
    assert missed["files_per_task"]["mean"] == pytest.approx(2 / 3)
    # irrelevant: t1 {x}, t2 {x, y}, t3 {y}
    irrelevant = summary["error_taxonomy"]["baseline"]["labels"]["irrelevant_retrieval"]
    assert (irrelevant["tasks_with_label"], irrelevant["total_files"]) == (3, 4)


def test_summary_slices(records: list[dict[str, Any]]) -> None:
    summary = summarize_run(records)
    baseline = summary["slices"]["baseline"]
    # t1-t3 have traces (all small, local); t4 has no trace and so no slice
    assert baseline["candidate_set_size_slice"]["small"]["documents"] == 3
    assert baseline["evidence_type"]["local"]["metrics"]["file.RR"]["n"] == 3
    assert baseline["evidence_type"]["local"]["metrics"]["file.RR"]["mean"] == pytest.approx(
        (1 + 1 / 3 + 0) / 3
    )
    mcp = summary["slices"]["mcp"]["evidence_type"]["mcp"]
    assert mcp["documents"] == 2  # the no-GT document has a trace, so a slice
    assert mcp["metrics"]["file.RR"]["n"] == 1


def _write_run(root: Path, docs: list[dict[str, Any]]) -> Path:
    events_dir = root / "retrieval_events"
    for doc in docs:
        prov = doc["provenance"]
        write_document(
            doc, events_dir / prov["config_name"] / f"{prov['task_name']}.retrieval_events.json"
        )
    return root


def test_evaluate_run_writes_valid_files(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "run-7", corpus())
    result = evaluate_run(run, k=[1, 3])
    assert (result.documents, result.computable, result.failures) == (6, 4, [])
    assert result.summary_path == run / "retrieval_events" / "run_retrieval_summary.json"
    assert result.table_path == run / "retrieval_events" / "retrieval_metrics.parquet"
    written = sorted((run / "retrieval_events").rglob("*.retrieval_metrics.json"))
    assert written == sorted(result.metrics_paths)
    assert (run / "retrieval_events" / "baseline" / "t2.retrieval_metrics.json").is_file()
    for path in written:
        validate_metrics_record(json.loads(path.read_text()), where=str(path))
    summary = json.loads(result.summary_path.read_text())
    validate_summary(summary)
    assert summary["k_values"] == [1, 3]
    assert summary["counts"]["invalid_documents"] == []
    # rounded to 6 places only when written; the in-memory records keep full precision
    assert summary["metrics"]["baseline"]["file.AP"]["mean"] == round((0.5 + 1 / 3) / 3, 6)
    table = pd.read_parquet(result.table_path)
    assert len(table) == 6
    assert table.loc[
        table["task_name"].eq("t2") & table["config_name"].eq("baseline"), "file.AP"
    ].item() == pytest.approx(1 / 3)
    record = json.loads(
        (run / "retrieval_events" / "baseline" / "t2.retrieval_metrics.json").read_text()
    )
    assert record["source_document"] == "t2.retrieval_events.json"
    assert record["file_level"]["metrics"]["AP"] == round(1 / 3, 6)


def test_written_json_is_deterministic(tmp_path: Path) -> None:
    first = _write_run(tmp_path / "a" / "run-7", corpus())
    evaluate_run(first)
    second = tmp_path / "b" / "run-7"
    shutil.copytree(first, second)
    for path in second.rglob("*.retrieval_metrics.json"):
        path.unlink()
    evaluate_run(second)
    evaluate_run(first)  # a second pass over the same folder changes nothing
    for path in sorted(first.rglob("*.json")):
        twin = second / path.relative_to(first)
        assert path.read_bytes() == twin.read_bytes(), path.name


def test_invalid_document_is_reported_not_dropped(tmp_path: Path) -> None:
    run = _write_run(tmp_path / "run-7", corpus()[:2])
    bad = run / "retrieval_events" / "baseline" / "broken.retrieval_events.json"
    bad.write_text(json.dumps({"schema_version": "2.0"}))
    result = evaluate_run(run)
    assert result.documents == 2
    assert [p.name for p, _ in result.failures] == ["broken.retrieval_events.json"]
    assert "major version 2" in result.failures[0][1]
    invalid = json.loads(result.summary_path.read_text())["counts"]["invalid_documents"]
    assert invalid[0]["document"] == "baseline/broken.retrieval_events.json"
    assert str(tmp_path) not in invalid[0]["error"]  # no absolute path: deterministic output


def test_no_documents_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "retrieval_events").mkdir()
    with pytest.raises(InputError, match="no retrieval-event documents"):
        evaluate_run(tmp_path)
    with pytest.raises(InputError, match="no retrieval-event documents"):
        find_events_roots([tmp_path / "retrieval_events"])
    with pytest.raises(InputError, match="not a folder"):
        find_events_roots([tmp_path / "missing"])


def test_find_events_roots_layouts(tmp_path: Path) -> None:
    run_a = _write_run(tmp_path / "runs" / "a", corpus()[:1])
    run_b = _write_run(tmp_path / "runs" / "b", corpus()[4:5])
    events_a = run_a / "retrieval_events"
    assert find_events_roots([run_a]) == [events_a]  # run folder
    assert find_events_roots([events_a]) == [events_a]  # events folder
    assert find_events_roots([tmp_path / "runs"]) == [events_a, run_b / "retrieval_events"]
    with pytest.raises(InputError, match="config folder"):
        find_events_roots([events_a / "baseline"])


def test_empty_records_give_an_empty_table() -> None:
    table = metrics_table([])
    assert len(table) == 0 and "file.P@5" in table.columns
    summary = summarize_run([])
    assert summary["counts"]["documents"] == 0 and summary["metrics"] == {}


def test_csv_table_without_pyarrow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real_find_spec = importlib.util.find_spec

    def no_pyarrow(name: str, *args: Any) -> Any:
        return None if name == "pyarrow" else real_find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", no_pyarrow)
    run = _write_run(tmp_path / "run-7", corpus())
    result = evaluate_run(run)
    assert result.table_path.name == "retrieval_metrics.csv"
    # no study tables either: a study reads this run's documents (study.loader)
    assert not list(result.table_path.parent.glob("study_*"))
    table = pd.read_csv(result.table_path)
    assert len(table) == 6
    assert table["file.AP"].iloc[:3].tolist() == pytest.approx([0.5, 1 / 3, 0.0])
    assert math.isnan(table["file.AP"].iloc[3])  # written empty, read back as NaN

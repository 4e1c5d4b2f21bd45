"""``retrieval-lib evaluate`` on hand-made runs and end to end on the real corpus."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from retrieval_lib.cli import main
from retrieval_lib.events.document import minimal_document, write_document
from retrieval_lib.metrics.stages import validate_metrics_record
from retrieval_lib.metrics.summary import validate_summary

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / ".." / "shared" / "corpus" / "csb"
needs_corpus = pytest.mark.skipif(
    not (CORPUS / "runs").is_dir(), reason="real corpus ../shared/corpus/csb is absent"
)


def _traced_doc(task: str, config: str, reads: list[str], gt: list[str]) -> dict[str, Any]:
    doc = minimal_document(run_id="run-x", task_name=task, config_name=config)
    doc["coverage"].update(
        has_trajectory=True,
        has_ground_truth=bool(gt),
        trace_source="trajectory",
        degraded_reason=None,
    )
    doc["ground_truth"]["files"] = sorted(gt)
    doc["events"] = [
        {
            "step_index": i,
            "tool_name": "Read",
            "tool_category": "file_read",
            "is_mcp": False,
            "target_files": [f],
            "hits_ground_truth": f in gt,
        }
        for i, f in enumerate(reads)
    ]
    return doc


def _make_run(root: Path) -> Path:
    events = root / "retrieval_events"
    # ranking b, a against GT {a}: RR = 1/2
    write_document(
        _traced_doc("t1", "baseline", ["b", "a"], ["a"]),
        events / "baseline" / "t1.retrieval_events.json",
    )
    write_document(
        minimal_document(run_id="run-x", task_name="t2", config_name="baseline"),
        events / "baseline" / "t2.retrieval_events.json",
    )
    return root


def test_evaluate_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _make_run(tmp_path / "run-x")
    assert main(["evaluate", str(run), "--k", "2,1"]) == 0
    out = capsys.readouterr().out
    events = run / "retrieval_events"
    assert f"{events}: 2 documents, 1 computable, 0 invalid" in out
    assert str(events / "run_retrieval_summary.json") in out
    assert str(events / "retrieval_metrics.parquet") in out
    record = json.loads((events / "baseline" / "t1.retrieval_metrics.json").read_text())
    assert record["k_values"] == [1, 2]
    assert record["file_level"]["metrics"]["RR"] == 0.5
    assert record["file_level"]["metrics"]["P@2"] == 0.5


def test_evaluate_folder_of_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _make_run(tmp_path / "runs" / "a")
    _make_run(tmp_path / "runs" / "b")
    assert main(["evaluate", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert out.count("2 documents, 1 computable") == 2
    assert (tmp_path / "runs" / "b" / "retrieval_events" / "run_retrieval_summary.json").is_file()


def test_no_documents_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no retrieval-event documents" in err and "Traceback" not in err


def test_bad_k_is_a_usage_error(tmp_path: Path) -> None:
    for bad in ("0", "a,b", "3,-1"):
        with pytest.raises(SystemExit) as excinfo:
            main(["evaluate", str(tmp_path), "--k", bad])
        assert excinfo.value.code == 2


def test_invalid_document_exit_1_rest_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _make_run(tmp_path / "run-x")
    (run / "retrieval_events" / "baseline" / "bad.retrieval_events.json").write_text("{not json")
    assert main(["evaluate", str(run)]) == 1
    captured = capsys.readouterr()
    assert "2 documents, 1 computable, 1 invalid" in captured.out
    assert "bad.retrieval_events.json" in captured.err and "not valid JSON" in captured.err
    assert (run / "retrieval_events" / "baseline" / "t1.retrieval_metrics.json").is_file()


def test_command_module_starts_light() -> None:
    code = (
        "import sys, retrieval_lib.cli.evaluate, retrieval_lib.metrics;"
        "heavy = [m for m in ('pandas', 'scipy', 'matplotlib', 'pyarrow') if m in sys.modules];"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the real corpus: normalise, then evaluate -------------------------------------------

DESIGN_RUN = "ccb_design_haiku_20260228_025547"
DJANGO = "django-modeladmin-impact-001"


@pytest.fixture(scope="module")
def corpus_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("csb_events")
    code = main(
        [
            "normalize",
            str(CORPUS / "runs"),
            "--tasks-root",
            str(CORPUS / "benchmarks"),
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    assert main(["evaluate", str(out)]) == 0
    return out


def _metrics(out: Path, config: str, task: str = DJANGO) -> dict[str, Any]:
    path = out / DESIGN_RUN / "retrieval_events" / config / f"{task}.retrieval_metrics.json"
    return json.loads(path.read_text())


@needs_corpus
def test_corpus_every_document_has_a_valid_metrics_file(corpus_out: Path) -> None:
    documents = sorted(corpus_out.rglob("*.retrieval_events.json"))
    assert len(documents) == 6  # 3 tasks x (baseline, MCP) in the corpus
    for doc in documents:
        metrics = doc.with_name(doc.name.replace("_events.json", "_metrics.json"))
        validate_metrics_record(json.loads(metrics.read_text()), where=str(metrics))
    summaries = sorted(corpus_out.rglob("run_retrieval_summary.json"))
    assert len(summaries) == 2
    for path in summaries:
        validate_summary(json.loads(path.read_text()), where=str(path))


@needs_corpus
def test_corpus_django_baseline_by_hand(corpus_out: Path) -> None:
    record = _metrics(corpus_out, "baseline-local-direct")
    level = record["file_level"]
    # Step 0 is `find /workspace -type f -name "*.py" | head -20`: 20 django/core files, no
    # GT. Step 1 (Grep) surfaces tests/modeladmin/tests.py, tests/admin_changelist/admin.py,
    # django/contrib/admin/options.py (ranks 21-23); step 2 adds docs/releases/1.5.txt and
    # docs/ref/contrib/admin/index.txt (ranks 24-25). Later steps add nothing new except the
    # agent's own submission.json (Write at step 9, read back at step 10), which is excluded.
    assert level["n_retrieved_files"] == 25
    assert "submission.json" not in level["ranked_files"]
    assert level["file_recall"] == 1.0  # all 5 GT files surfaced
    assert level["metrics"]["RR"] == round(1 / 21, 6)
    assert level["metrics"]["AP"] == round((1 / 21 + 2 / 22 + 3 / 23 + 4 / 24 + 5 / 25) / 5, 6)
    assert level["metrics"]["P@10"] == 0.0  # the first 10 are all django/core files
    assert level["context_efficiency"] == 0.2  # 5 / 25
    ttfr = level["ttfr"]
    # the transcript has no timestamps; its running token total at step 1 is 21241
    assert (ttfr["steps"], ttfr["seconds"], ttfr["tokens"]) == (1, None, 21241)
    # read ranking: options.py (4), tests.py (5), admin.py (6): all GT, 3 of 5
    read = record["read_level"]
    assert read["ranked_files"] == [
        "django/contrib/admin/options.py",
        "tests/modeladmin/tests.py",
        "tests/admin_changelist/admin.py",
    ]
    assert read["metrics"]["AP"] == 0.6  # (1/1 + 2/2 + 3/3) / 5
    # the only write is the agent's own answer file: no repository edit at all
    assert record["funnel"]["edited"] == {"files": 0, "ground_truth_hits": 0}
    assert record["funnel"]["agent_created_files"] == ["submission.json"]
    util = record["utilization"]
    assert util["util_read_overlap_with_relevant_files"] == 0.6
    assert util["util_write_overlap_with_relevant_files_proxy"] is None
    assert util["util_read_before_write_ratio"] is None
    assert util["reasons"]["util_read_before_write_ratio"] == "the agent edited no repository file"
    assert record["error_taxonomy"]["files"]["wrong_evidence_used"] == []
    assert record["error_taxonomy"]["counts"]["irrelevant_retrieval"] == 20
    assert record["calibration"]["candidate_set_size_slice"] == "large"
    assert record["calibration"]["evidence_type"] == "local"
    assert record["chunk_level"]["resolution"] == "file_level_only"
    assert record["outcome"]["reward"] == 1.0


@needs_corpus
def test_corpus_django_mcp_by_hand(corpus_out: Path) -> None:
    record = _metrics(corpus_out, "mcp-remote-direct")
    metrics = record["file_level"]["metrics"]
    # step 0 (sg_keyword_search) returns exactly the 5 GT files: ranks 1-5 relevant
    assert (metrics["P@5"], metrics["R@5"], metrics["AP"], metrics["RR"]) == (1.0, 1.0, 1.0, 1.0)
    assert metrics["P@10"] == 0.5  # 5 relevant in the top 10
    assert metrics["nDCG@10"] == 1.0
    ttfr = record["file_level"]["ttfr"]
    assert (ttfr["steps"], ttfr["seconds"], ttfr["tokens"]) == (0, 8.810244, 34091)
    # reads: options.py, admin_filters/tests.py, test_date_hierarchy.py, admin.py, tests.py
    # (options.py read twice): hits at ranks 1, 4, 5 of |GT| = 5
    assert record["read_level"]["metrics"]["AP"] == round((1 / 1 + 2 / 4 + 3 / 5) / 5, 6)
    assert record["calibration"]["evidence_type"] == "mcp"
    assert record["funnel"]["agent_created_files"] == ["submission.json"]


@needs_corpus
def test_corpus_without_ground_truth_is_not_computable(corpus_out: Path) -> None:
    record = _metrics(corpus_out, "baseline-local-direct", "envoy-routeconfig-dep-chain-001")
    assert record["computable"] is False
    assert record["non_computable_code"] == "no_ground_truth"
    assert "ground_truth_meta.json" in record["non_computable_reason"]
    assert "metrics" not in record["file_level"]
    summary = json.loads(
        (corpus_out / DESIGN_RUN / "retrieval_events" / "run_retrieval_summary.json").read_text()
    )
    assert summary["counts"]["documents"] == 4
    assert summary["counts"]["computable"] == 2
    assert summary["counts"]["skipped"]["by_reason"] == {"no_ground_truth": 2}
    # one computable document per config: n = 1, no std
    assert summary["metrics"]["mcp-remote-direct"]["file.AP"] == {
        "mean": 1.0,
        "median": 1.0,
        "std": None,
        "n": 1,
    }
    table = pd.read_parquet(
        corpus_out / DESIGN_RUN / "retrieval_events" / "retrieval_metrics.parquet"
    )
    assert len(table) == 4
    envoy = table[table["task_name"] == "envoy-routeconfig-dep-chain-001"]
    assert envoy["file.AP"].isna().all()
    assert table.loc[
        table["config_name"] == "baseline-local-direct", "file.RR"
    ].dropna().item() == (pytest.approx(1 / 21))


def _run_with_only_a_broken_document(root: Path) -> Path:
    folder = root / "retrieval_events" / "baseline"
    folder.mkdir(parents=True)
    (folder / "bad.retrieval_events.json").write_text("{not json")
    return root


@pytest.mark.parametrize("cluster", [[], ["--dask-workers", "1"]], ids=["local", "dask"])
def test_a_failing_run_is_reported_and_the_others_are_evaluated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: list[str]
) -> None:
    if cluster:
        pytest.importorskip("distributed")
    # a (fine), b (nothing loadable), c (fine): b must not stop c
    _make_run(tmp_path / "runs" / "a")
    _run_with_only_a_broken_document(tmp_path / "runs" / "b")
    _make_run(tmp_path / "runs" / "c")
    assert main(["evaluate", str(tmp_path / "runs"), *cluster]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("2 documents, 1 computable, 0 invalid") == 2
    assert "none of the 1 documents" in captured.err and "Traceback" not in captured.err
    for name, evaluated in (("a", True), ("b", False), ("c", True)):
        summary = tmp_path / "runs" / name / "retrieval_events" / "run_retrieval_summary.json"
        assert summary.is_file() is evaluated


def test_nothing_to_evaluate_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A raw run (no retrieval_events/) and a run whose retrieval_events/ holds no document:
    the clear error, exit 1, and not one file written or changed in either folder."""
    import shutil

    raw = REPO_ROOT / "examples" / "runs" / "official" / "csb_synth_haiku_20260301_091500"
    run = tmp_path / "raw"
    shutil.copytree(raw, run)
    empty = tmp_path / "empty"
    (empty / "retrieval_events").mkdir(parents=True)

    def listing() -> dict[str, bytes | None]:
        return {
            p.relative_to(tmp_path).as_posix(): p.read_bytes() if p.is_file() else None
            for p in tmp_path.rglob("*")
        }

    before = listing()
    for folder in (run, empty):
        assert main(["evaluate", str(folder)]) == 1
        err = capsys.readouterr().err
        assert "no retrieval-event documents" in err and "Traceback" not in err
    assert listing() == before

"""`retrieval-lib kb` end to end on the shipped example, plus errors and --help."""

from __future__ import annotations

import json

import pytest
from kb_testutils import REPO_ROOT

from retrieval_lib.cli import main
from retrieval_lib.kb.examples import EXAMPLE_RUNS

EXAMPLE = REPO_ROOT / "examples" / "kb"


def _ingest(db, run, as_json: bool):
    return main(
        [
            "kb",
            "ingest",
            str(EXAMPLE / run.results_file),
            "--golden",
            str(EXAMPLE / "golden.yaml"),
            "--chunks",
            str(EXAMPLE / run.chunks_file),
            "--chunker-version",
            run.chunker_version,
            "--config",
            str(EXAMPLE / run.config_file),
            "--run-id",
            run.run_id,
            "--db",
            str(db),
        ]
        + (["--json"] if as_json else [])
    )


@pytest.fixture
def example_db(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    db = tmp_path / "eval.sqlite"
    assert _ingest(db, EXAMPLE_RUNS[0], True) == 0
    ingested = json.loads(capsys.readouterr().out)
    assert _ingest(db, EXAMPLE_RUNS[1], False) == 0
    text = capsys.readouterr().out
    assert "ingested run 'bm25-paragraph-v2'" in text and "25 results" in text
    return db, ingested


def test_ingest_json_reports_summary_and_aggregate(example_db):
    _, ingested = example_db
    assert ingested["ingest"]["results"] == 25
    assert ingested["ingest"]["chunks"] == sum(1 for _ in (EXAMPLE / "chunks_v1.jsonl").open())
    assert ingested["aggregate"]["total_queries"] == 25


def test_runs_lists_both_runs_with_aggregates(example_db, capsys):
    db, _ = example_db
    assert main(["kb", "runs", "--db", str(db), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    # same created_at (SOURCE_DATE_EPOCH): in ingest order, not by run id (issue 21)
    assert [r["run_id"] for r in runs] == ["bm25-window200-v1", "bm25-paragraph-v2"]
    assert {r["created_at"] for r in runs} == {"2026-01-01T00:00:00Z"}
    assert {r["chunker_version"] for r in runs} == {"window200-v1", "paragraph-v2"}
    assert all(r["aggregate"]["total_queries"] == 25 and r["results"] == 25 for r in runs)
    assert main(["kb", "runs", "--db", str(db)]) == 0
    assert "bm25-window200-v1" in capsys.readouterr().out


def test_aggregate_json_matches_the_stored_aggregate(example_db, capsys):
    db, ingested = example_db
    assert main(["kb", "aggregate", EXAMPLE_RUNS[0].run_id, "--db", str(db), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == ingested["aggregate"]


def test_compare_uses_the_fallback_and_writes_a_report(example_db, capsys, tmp_path):
    db, _ = example_db
    out = tmp_path / "report.md"
    a, b = EXAMPLE_RUNS[0].run_id, EXAMPLE_RUNS[1].run_id
    assert main(["kb", "compare", a, b, "--db", str(db), "--json", "--report", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["deltas"]["chunker_version_match"] == "fallback_doc_span"
    assert (report["run_a"], report["run_b"]) == (a, b)
    assert len(report["per_query"]) == 25
    assert sum(report["deltas"]["kind_counts"].values()) == 25
    assert "Chunk matching: **fallback_doc_span**" in out.read_text()


def test_strict_chunker_version_exits_1_with_a_message(example_db, capsys):
    db, _ = example_db
    a, b = EXAMPLE_RUNS[0].run_id, EXAMPLE_RUNS[1].run_id
    code = main(["kb", "compare", a, b, "--db", str(db), "--strict-chunker-version"])
    err = capsys.readouterr().err
    assert code == 1
    assert "different chunker versions ('window200-v1' vs 'paragraph-v2')" in err
    assert "Traceback" not in err


def test_errors_are_one_line_messages(tmp_path, capsys):
    assert main(["kb", "runs", "--db", str(tmp_path / "absent.sqlite")]) == 1
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "q-001", "hits": [{"chunk_id": "x"}]}\n')
    db = tmp_path / "eval.sqlite"
    code = main(
        ["kb", "ingest", str(bad), "--golden", str(EXAMPLE / "golden.yaml"), "--db", str(db)]
    )
    err = capsys.readouterr().err
    assert code == 1 and f"{bad}:1:" in err and "'doc_id' must be a non-empty string" in err
    assert main(["kb", "aggregate", "nope", "--db", str(db)]) == 1
    assert "run 'nope' is not in" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["kb"], ["kb", "ingest"], ["kb", "aggregate"], ["kb", "compare"], ["kb", "runs"]]
)
def test_help_everywhere(argv, capsys):
    with pytest.raises(SystemExit) as caught:
        main([*argv, "--help"])
    assert caught.value.code == 0
    assert "usage: retrieval-lib kb" in capsys.readouterr().out


def test_aggregate_text_prints_every_rate_with_its_n(example_db, capsys):
    db, ingested = example_db
    assert main(["kb", "aggregate", EXAMPLE_RUNS[0].run_id, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    n = ingested["aggregate"]["denominators"]
    assert f"(n={n['refusal_correctness']})" in next(
        line for line in out.splitlines() if "refusal_correctness" in line
    )
    assert f"(n={n['hit_at_k']})" in next(line for line in out.splitlines() if "hit@5" in line)


@pytest.mark.parametrize("order", [(0, 1), (1, 0)], ids=["v1-then-v2", "v2-then-v1"])
def test_compare_keeps_the_order_the_user_typed(example_db, capsys, tmp_path, order):
    db, _ = example_db
    first, second = (EXAMPLE_RUNS[i].run_id for i in order)
    # each run's own refusal correctness, from `kb aggregate` (no comparison involved;
    # it does not depend on chunk ids): v1 refuses all 3 off-topic queries, v2 answers one
    rc = {}
    for run in EXAMPLE_RUNS:
        assert main(["kb", "aggregate", run.run_id, "--db", str(db), "--json"]) == 0
        rc[run.run_id] = json.loads(capsys.readouterr().out)["refusal_correctness"]
    assert rc == {"bm25-window200-v1": 1.0, "bm25-paragraph-v2": pytest.approx(2 / 3, abs=1e-4)}

    md = tmp_path / "compare.md"
    argv = ["kb", "compare", first, second, "--db", str(db), "--bootstrap", "50"]
    assert main([*argv, "--report", str(md)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{first} vs {second} (chunk matching: fallback_doc_span)"
    row = next(line.split() for line in out if line.split()[0] == "refusal_correctness")
    # "<metric>  <first> -> <second>  delta <second - first>"
    assert row[1:6] == [
        f"{rc[first]:.4f}",
        "->",
        f"{rc[second]:.4f}",
        "delta",
        f"{rc[second] - rc[first]:+.4f}",
    ]
    text = md.read_text()
    assert text.startswith(f"# Knowledge-base comparison: `{first}` vs `{second}`\n")
    assert f"- Run A (baseline): `{first}`" in text
    assert (
        f"| refusal_correctness | {rc[first]:.4f} | {rc[second]:.4f} | {rc[second] - rc[first]:+.4f} |"
        in text
    )

    assert main([*argv, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report).index("run_a") < list(report).index("run_b")
    assert (report["run_a"], report["run_b"]) == (first, second)
    assert report["aggregate_a"]["refusal_correctness"] == rc[first]
    assert report["aggregate_b"]["refusal_correctness"] == rc[second]
    delta = report["deltas"]["refusal_correctness"]
    assert delta == pytest.approx(rc[second] - rc[first], abs=1e-4)

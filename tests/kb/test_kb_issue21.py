"""Issue 21, item 7: `kb delete`, runs without an inventory, `kb runs` output and order,
and the `kb` extra running `kb compare`."""

from __future__ import annotations

import json
import math
import re
import sqlite3
import subprocess
import sys

import pytest
from kb_testutils import REPO_ROOT, golden_entry, hit, write_golden, write_jsonl

from retrieval_lib.cli import main
from retrieval_lib.kb.exceptions import RunExistsError, RunNotFoundError
from retrieval_lib.kb.golden import parse_golden
from retrieval_lib.kb.ingest import ingest_run
from retrieval_lib.kb.metrics import aggregate_from_records, compute_aggregate
from retrieval_lib.kb.records import Hit, QueryResult
from retrieval_lib.kb.store import KBStore
from retrieval_lib.lazylibs import EXTRA_OF_MODULE

EXAMPLE = REPO_ROOT / "examples" / "kb"
#: What the null reason of an unmatched run says (kb.definitions.NO_MATCH).
NO_MATCH = "no chunk inventory was ingested and no hit of the run names an expected chunk id"


def _small_run(tmp_path, chunk_ids=("c1", "c2")):
    golden = write_golden(
        tmp_path / "g.yaml",
        [golden_entry("q1", ["d1"], ["c1"]), golden_entry("q2", ["d2"], ["c2"])],
    )
    results = write_jsonl(
        tmp_path / "r.jsonl",
        [
            {"query_id": "q1", "hits": [hit(chunk_ids[0], "d1", 1)]},
            {"query_id": "q2", "hits": [hit(chunk_ids[1], "d2", 1)]},
        ],
    )
    return golden, results


def _table_counts(db, run_id):
    conn = sqlite3.connect(db)
    try:
        return {
            table: conn.execute(
                f"SELECT COUNT(*) FROM {table} WHERE run_id = ?", (run_id,)
            ).fetchone()[0]
            for table in ("eval_runs", "eval_query_results", "eval_chunks", "eval_run_columns")
        }
    finally:
        conn.close()


# -- kb delete ------------------------------------------------------------------------


def test_kb_delete_removes_the_run_its_results_chunks_columns_and_aggregate(tmp_path, capsys):
    golden, results = _small_run(tmp_path)
    chunks = write_jsonl(
        tmp_path / "chunks.jsonl",
        [
            {"chunk_id": "c1", "doc_id": "d1", "source_spans": [[0, 5]]},
            {"chunk_id": "c2", "doc_id": "d2", "source_spans": [[0, 5]]},
            {"chunk_id": "c3", "doc_id": "d2", "source_spans": [[5, 9]]},
        ],
    )
    db = tmp_path / "eval.sqlite"
    for run_id in ("keep-me", "drop-me"):
        argv = ["kb", "ingest", str(results), "--golden", str(golden), "--db", str(db)]
        assert main([*argv, "--chunks", str(chunks), "--run-id", run_id]) == 0
    before = _table_counts(db, "drop-me")
    # 1 run row, 2 results, 3 chunks, and some result columns
    assert before["eval_runs"] == 1 and before["eval_query_results"] == 2
    assert before["eval_chunks"] == 3 and before["eval_run_columns"] > 0
    capsys.readouterr()

    assert main(["kb", "delete", "drop-me", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "deleted run 'drop-me'" in out and "2 results" in out and "3 chunks" in out
    assert _table_counts(db, "drop-me") == dict.fromkeys(before, 0)
    assert _table_counts(db, "keep-me") == before  # the other run is untouched
    with KBStore(db, create=False) as store:
        assert store.run_ids() == ["keep-me"]
        assert store.integrity_check() == "ok"
        # the id is free again: the same results ingest under it
        ingest_run(store, results, golden, run_id="drop-me")
        assert store.run_ids() == ["keep-me", "drop-me"]


def test_kb_delete_unknown_run_is_one_line_with_did_you_mean(tmp_path, capsys):
    golden, results = _small_run(tmp_path)
    db = tmp_path / "eval.sqlite"
    with KBStore(db) as store:
        ingest_run(store, results, golden, run_id="bm25-paragraph-v2")
    capsys.readouterr()
    assert main(["kb", "delete", "bm25-paragraf-v2", "--db", str(db)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "'bm25-paragraf-v2' is not in" in err
    assert "did you mean 'bm25-paragraph-v2'?" in err
    with KBStore(db, create=False) as store:
        assert store.run_ids() == ["bm25-paragraph-v2"]  # nothing deleted


def test_delete_run_is_one_transaction(tmp_path):
    """A failure inside the delete leaves every table as it was."""
    golden, results = _small_run(tmp_path)
    db = tmp_path / "eval.sqlite"
    with KBStore(db) as store:
        ingest_run(store, results, golden, run_id="r1")
        before = _table_counts(db, "r1")
        # A trigger that fails after the cascade has removed the child rows.
        store.conn.execute(
            "CREATE TRIGGER no_delete AFTER DELETE ON eval_runs "
            "BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        with pytest.raises(Exception, match="refused"):
            store.delete_run("r1")
    assert _table_counts(db, "r1") == before


def test_reingest_message_names_kb_delete(tmp_path):
    golden, results = _small_run(tmp_path)
    db = tmp_path / "eval.sqlite"
    with KBStore(db) as store:
        summary = ingest_run(store, results, golden, run_id="r1")
        store.set_aggregate("r1", compute_aggregate(store, summary.run_id).to_json())
        with pytest.raises(RunExistsError) as info:
            ingest_run(store, results, golden, run_id="r1")
    assert f"retrieval-lib kb delete r1 --db {db}" in str(info.value)


def test_unknown_run_of_aggregate_suggests_close_ids(tmp_path):
    golden, results = _small_run(tmp_path)
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(store, results, golden, run_id="baseline-run")
        with pytest.raises(RunNotFoundError, match="did you mean 'baseline-run'"):
            compute_aggregate(store, "baseline-rnu")


# -- a run without a chunk inventory -----------------------------------------------------


def test_run_without_inventory_whose_hits_match_no_expected_chunk_is_null_not_zero():
    golden = parse_golden([golden_entry("q1", ["d1"], ["c1"]), golden_entry("q2", ["d2"], ["c2"])])
    # Another chunker named the chunks differently: no hit names c1 or c2.
    results = {
        "q1": QueryResult("q1", (Hit("d1:p0", "d1", 1, 1.0),)),
        "q2": QueryResult("q2", (Hit("d2:p0", "d2", 1, 1.0),)),
    }
    agg = aggregate_from_records(golden, results)
    assert all(math.isnan(v) for v in agg.hit_at_k.values()) and math.isnan(agg.mrr)
    assert agg.denominators["hit_at_k"] == 0
    assert NO_MATCH in agg.null_reasons["hit_at_k"]
    assert NO_MATCH in agg.null_reasons["mrr"]
    # documents still match: recall@1 = 1 for both queries
    assert agg.recall_at_k_doc[1] == 1.0
    # One expected chunk retrieved anywhere: the ids match, a plain miss stays a 0.
    results["q2"] = QueryResult("q2", (Hit("c1", "d2", 1, 1.0),))
    agg = aggregate_from_records(golden, results)
    assert agg.hit_at_k[1] == 0.0 and agg.mrr == 0.0 and agg.denominators["hit_at_k"] == 2
    # A run with no hits at all retrieved nothing: a miss (0), as before.
    empty = {q: QueryResult(q, ()) for q in ("q1", "q2")}
    assert aggregate_from_records(golden, empty).hit_at_k[5] == 0.0


def test_example_v2_run_ingested_without_chunks_prints_null_with_a_note(tmp_path, capsys):
    db = tmp_path / "eval.sqlite"
    argv = ["kb", "ingest", str(EXAMPLE / "results_v2.jsonl"), "--golden"]
    assert main([*argv, str(EXAMPLE / "golden.yaml"), "--db", str(db), "--json"]) == 0
    aggregate = json.loads(capsys.readouterr().out)["aggregate"]
    # the v2 chunker's ids are not the golden set's (v1): missing, not 0.0000 over 21 queries
    assert aggregate["hit_at_k"] == {"1": None, "3": None, "5": None, "10": None}
    assert aggregate["mrr"] is None
    assert NO_MATCH in aggregate["null_reasons"]["mrr"]
    # the same as with the v2 inventory: null plus a note
    assert main(["kb", "aggregate", aggregate_run_id(db), "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert re.search(r"hit@5\s+null", text) and "note: mrr:" in text


def aggregate_run_id(db):
    with KBStore(db, create=False) as store:
        return store.run_ids()[0]


# -- kb runs --------------------------------------------------------------------------


def test_kb_runs_prints_no_none_and_orders_one_second_by_ingest(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")  # every run in the same second
    golden, results = _small_run(tmp_path)
    db = tmp_path / "eval.sqlite"
    with KBStore(db) as store:
        for run_id in ("zeta", "alpha", "mid"):
            ingest_run(store, results, golden, run_id=run_id)
        ingest_run(store, results, golden, run_id="chunked", chunker_version="para-v1")
        assert store.run_ids() == ["zeta", "alpha", "mid", "chunked"]
    capsys.readouterr()
    assert main(["kb", "runs", "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["zeta", "alpha", "mid", "chunked"]
    assert not any("None" in line for line in lines)
    assert "chunker=para-v1" in lines[3] and "chunker" not in lines[0]
    assert main(["kb", "runs", "--db", str(db), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in rows] == ["zeta", "alpha", "mid", "chunked"]


# -- the kb extra ---------------------------------------------------------------------


def _extra_closure(name: str) -> set[str]:
    """``name`` and every extra it pulls in (``retrieval_lib[...]``), from pyproject.toml."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    seen: set[str] = set()
    todo = [name]
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for requirement in extras[extra]:
            match = re.fullmatch(r"retrieval_lib\[([^\]]+)\]\s*", requirement.split(";")[0])
            if match:
                todo.extend(e.strip() for e in match.group(1).split(","))
    return seen


_BLOCKED_RUN = """
import sys, importlib.abc
blocked = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from retrieval_lib.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_the_kb_extra_alone_runs_kb_compare(tmp_path):
    """Every optional library outside the `kb` extra (and what it pulls in) is hidden:
    ingesting and comparing the example runs still works."""
    installed = _extra_closure("kb")
    blocked = sorted(m for m, extra in EXTRA_OF_MODULE.items() if extra not in installed)
    assert "rank_bm25" not in blocked
    db = str(tmp_path / "eval.sqlite")
    for version in ("v1", "v2"):
        argv = [
            "kb",
            "ingest",
            str(EXAMPLE / f"results_{version}.jsonl"),
            "--golden",
            str(EXAMPLE / "golden.yaml"),
            "--chunks",
            str(EXAMPLE / f"chunks_{version}.jsonl"),
            "--chunker-version",
            version,
            "--run-id",
            version,
            "--db",
            db,
        ]
        subprocess.run([sys.executable, "-c", _BLOCKED_RUN, ",".join(blocked), *argv], check=True)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _BLOCKED_RUN,
            ",".join(blocked),
            *["kb", "compare", "v1", "v2", "--db", db, "--bootstrap", "200"],
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "v1 vs v2" in done.stdout

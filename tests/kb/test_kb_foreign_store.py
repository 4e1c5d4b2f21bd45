"""The kb store never changes a file it refuses, and an ingest stopped before its
aggregate is completed by the next one (issue 18, items 17 and 18)."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from kb_testutils import REPO_ROOT

from retrieval_lib.cli import main
from retrieval_lib.kb.examples import EXAMPLE_RUNS
from retrieval_lib.kb.ingest import ingest_run
from retrieval_lib.kb.store import KBStore

EXAMPLE = REPO_ROOT / "examples" / "kb"
RUN = EXAMPLE_RUNS[0]


def _ingest_args(db, run_id: str = RUN.run_id) -> list[str]:
    return [
        "kb",
        "ingest",
        str(EXAMPLE / RUN.results_file),
        "--golden",
        str(EXAMPLE / "golden.yaml"),
        "--chunks",
        str(EXAMPLE / RUN.chunks_file),
        "--chunker-version",
        RUN.chunker_version,
        "--run-id",
        run_id,
        "--db",
        str(db),
    ]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def foreign(tmp_path):
    """Somebody else's SQLite file (rollback journal, one table of its own)."""
    path = tmp_path / "foreign.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('keep me')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["kb", "runs"],
        ["kb", "aggregate", "r1"],
        ["kb", "compare", "a", "b"],
        "ingest",
    ],
    ids=["runs", "aggregate", "compare", "ingest"],
)
def test_a_foreign_sqlite_file_is_refused_with_its_bytes_untouched(
    foreign, command, capsys, tmp_path
):
    before = _digest(foreign)
    args = _ingest_args(foreign) if command == "ingest" else [*command, "--db", str(foreign)]
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "not a retrieval_lib kb store" in err
    assert _digest(foreign) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign.sqlite"]  # no -wal, -shm
    conn = sqlite3.connect(f"{foreign.as_uri()}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_a_newer_store_is_refused_untouched(tmp_path, capsys):
    path = tmp_path / "newer.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.execute("CREATE TABLE eval_runs (run_id TEXT)")
    conn.commit()
    conn.close()
    before = _digest(path)
    assert main(["kb", "runs", "--db", str(path)]) != 0
    assert "schema version 99" in capsys.readouterr().err
    assert _digest(path) == before


def test_kb_runs_on_an_empty_file_refuses_and_writes_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    for command in (["kb", "runs"], ["kb", "aggregate", "r1"]):
        assert main([*command, "--db", str(empty)]) != 0
        assert "empty file" in capsys.readouterr().err
        assert empty.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]


def test_kb_ingest_makes_a_new_store_in_an_empty_file(tmp_path, capsys):
    empty = tmp_path / "empty.sqlite"
    empty.touch()
    assert main(_ingest_args(empty)) == 0
    capsys.readouterr()
    with KBStore(empty, create=False) as store:
        assert store.run_ids() == [RUN.run_id]


def test_an_ingest_stopped_before_its_aggregate_is_completed_by_the_next(tmp_path, capsys):
    """``kb ingest`` killed between its commit and the aggregate: the run is stored with
    no aggregate. Ingesting the same files again completes it (exit 0)."""
    db = tmp_path / "eval.sqlite"
    with KBStore(db) as store:  # the commit of a killed `kb ingest`, and nothing after
        ingest_run(
            store,
            EXAMPLE / RUN.results_file,
            EXAMPLE / "golden.yaml",
            chunks_path=EXAMPLE / RUN.chunks_file,
            run_id=RUN.run_id,
            chunker_version=RUN.chunker_version,
        )
        assert store.get_run(RUN.run_id).aggregate is None
    assert main(_ingest_args(db)) == 0
    out = capsys.readouterr().out
    assert "stopped before its aggregate" in out and "25 results" in out
    with KBStore(db, create=False) as store:
        aggregate = store.get_run(RUN.run_id).aggregate
        assert aggregate is not None and aggregate["total_queries"] == 25
        assert store.count_rows(RUN.run_id)["results"] == 25  # nothing written twice
    # once aggregated, the run is immutable again
    assert main(_ingest_args(db)) != 0
    assert "runs are immutable" in capsys.readouterr().err


def test_other_inputs_for_a_run_without_aggregate_name_the_repair_command(tmp_path, capsys):
    db = tmp_path / "eval.sqlite"
    other = EXAMPLE_RUNS[1]
    with KBStore(db) as store:
        ingest_run(
            store,
            EXAMPLE / other.results_file,
            EXAMPLE / "golden.yaml",
            chunks_path=EXAMPLE / other.chunks_file,
            run_id=RUN.run_id,
        )
    assert main(_ingest_args(db)) != 0
    err = capsys.readouterr().err
    assert f"retrieval-lib kb aggregate {RUN.run_id} --db {db}" in err
    assert main(["kb", "aggregate", RUN.run_id, "--db", str(db)]) == 0


def test_the_library_refuses_a_second_ingest_but_names_the_repair(tmp_path):
    from retrieval_lib.kb.exceptions import RunExistsError

    db = tmp_path / "eval.sqlite"
    args = (EXAMPLE / RUN.results_file, EXAMPLE / "golden.yaml")
    with KBStore(db) as store:
        ingest_run(store, *args, run_id="r")
        with pytest.raises(RunExistsError, match="retrieval-lib kb aggregate r --db"):
            ingest_run(store, *args, run_id="r")
        resumed = ingest_run(store, *args, run_id="r", resume=True)
        assert resumed.resumed and resumed.results == 25
        assert store.count_rows("r")["results"] == 25

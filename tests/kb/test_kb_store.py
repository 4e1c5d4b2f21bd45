"""SQLite store: pragmas, migrations v1 -> v3, version guards, cascades."""

from __future__ import annotations

import sqlite3

import pytest

from retrieval_lib.kb.exceptions import KBError, RunNotFoundError, StoreSchemaError
from retrieval_lib.kb.store import SCHEMA_VERSION, KBStore

# Schema version 1 as it was released (runs and per-query results only).
V1_DDL = (
    "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL, "
    "description TEXT NOT NULL, applied_at TEXT NOT NULL)",
    "CREATE TABLE eval_runs (run_id TEXT PRIMARY KEY NOT NULL, suite TEXT, "
    "created_at TEXT NOT NULL, chunker_version TEXT, config_snapshot_json TEXT, "
    "golden_snapshot_json TEXT NOT NULL, aggregate_json TEXT)",
    "CREATE TABLE eval_query_results (run_id TEXT NOT NULL REFERENCES eval_runs(run_id) "
    "ON DELETE CASCADE, query_id TEXT NOT NULL, result_json TEXT NOT NULL, "
    "PRIMARY KEY (run_id, query_id))",
)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


def test_new_store_has_current_schema_wal_and_foreign_keys(tmp_path):
    with KBStore(tmp_path / "eval.sqlite") as store:
        assert store.schema_version == SCHEMA_VERSION == 4
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert {"eval_runs", "eval_query_results", "eval_chunks", "schema_migrations"} <= _tables(
            store.conn
        )
        assert _columns(store.conn, "eval_runs") == [
            "run_id",
            "suite",
            "created_at",
            "chunker_version",
            "config_snapshot_json",
            "golden_snapshot_json",
            "aggregate_json",
            "ingest_json",
        ]
        assert [v for v, _, _ in store.applied_migrations()] == [1, 2, 3, 4]
        assert store.integrity_check() == "ok"


def test_migration_from_v1_keeps_data_and_adds_chunk_inventory(tmp_path):
    """A database of schema version 1, built with that version's DDL, is migrated on open."""
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    with conn:
        for statement in V1_DDL:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (1, 'runs', '2026-01-01T00:00:00Z')")
        conn.execute(
            "INSERT INTO eval_runs VALUES ('r1', 's', '2026-01-01T00:00:00Z', 'v1', NULL, "
            "'{\"queries\": []}', NULL)"
        )
        conn.execute(
            "INSERT INTO eval_query_results VALUES ('r1', 'q1', "
            '\'{"query_id": "q1", "hits": [], "answer": null, "error": null}\')'
        )
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    with KBStore(path) as store:
        assert store.schema_version == 4
        assert [v for v, _, _ in store.applied_migrations()] == [1, 2, 3, 4]
        assert "eval_chunks" in _tables(store.conn)
        run = store.get_run("r1")
        assert (run.chunker_version, run.ingest) == ("v1", None)
        assert list(store.load_results("r1")) == ["q1"]
        assert store.load_columns("r1").query_ids == ["q1"]
        assert store.load_chunks("r1") == {}
        assert store.integrity_check() == "ok"
    # opening again applies nothing
    with KBStore(path) as store:
        assert len(store.applied_migrations()) == 4


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.sqlite"
    with KBStore(path) as store:
        store.conn.execute("PRAGMA user_version = 99")
    with pytest.raises(StoreSchemaError, match="schema version 99"):
        KBStore(path)


def test_foreign_database_is_refused(tmp_path):
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE something (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreSchemaError, match="not a retrieval_lib kb store"):
        KBStore(path)


def test_not_a_database_file_is_refused(tmp_path):
    path = tmp_path / "text.sqlite"
    path.write_text("hello, I am not SQLite" * 100)
    with pytest.raises(StoreSchemaError, match="as an SQLite database: file is not a database"):
        KBStore(path)


def test_missing_store_without_create(tmp_path):
    with pytest.raises(KBError, match="does not exist"):
        KBStore(tmp_path / "absent.sqlite", create=False)
    assert not (tmp_path / "absent.sqlite").exists()


def test_delete_cascades_to_results_and_chunks(tmp_path):
    with KBStore(tmp_path / "eval.sqlite") as store:
        with store.transaction():
            store.insert_run(
                run_id="r",
                suite=None,
                created_at="t",
                chunker_version=None,
                config_snapshot_json=None,
                golden_snapshot_json="{}",
                ingest_json=None,
            )
            store.insert_results("r", [("q", "{}")])
            store.insert_chunks("r", [("c", "d", "[[0, 1]]")])
        assert store.count_rows("r") == {"results": 1, "chunks": 1}
        store.delete_run("r")
        assert store.count_rows("r") == {"results": 0, "chunks": 0}
        with pytest.raises(RunNotFoundError):
            store.get_run("r")


def test_foreign_key_rejects_orphan_results(tmp_path):
    with KBStore(tmp_path / "eval.sqlite") as store, pytest.raises(sqlite3.IntegrityError):
        store.insert_results("no-such-run", [("q", "{}")])


def test_unknown_run_lists_known_runs(tmp_path):
    with KBStore(tmp_path / "eval.sqlite") as store:
        with pytest.raises(RunNotFoundError, match="the store has no runs"):
            store.get_run("x")
        with pytest.raises(RunNotFoundError):
            store.set_aggregate("x", "{}")


def test_a_locked_store_is_a_clear_error_and_writes_nothing(tmp_path):
    path = tmp_path / "eval.sqlite"
    with KBStore(path) as holder, KBStore(path, busy_timeout=0.1) as other:
        with (
            holder.transaction(),
            pytest.raises(KBError, match="cannot write to .*database is locked"),
            other.transaction(),
        ):
            pass
        with (
            pytest.raises(KBError, match="nothing was written: UNIQUE constraint failed"),
            other.transaction() as conn,
        ):
            conn.execute("INSERT INTO schema_migrations VALUES (1, 'x', 'y')")
        assert len(other.applied_migrations()) == SCHEMA_VERSION

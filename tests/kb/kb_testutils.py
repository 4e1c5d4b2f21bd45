"""Helpers shared by the knowledge-base tests (imported as `kb_testutils`): write inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def write_golden(path: Path, entries: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump(entries, sort_keys=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def hit(chunk: str, doc: str, rank: int, score: float = 1.0, spans=None) -> dict[str, Any]:
    out: dict[str, Any] = {"chunk_id": chunk, "doc_id": doc, "rank": rank, "score": score}
    if spans is not None:
        out["source_spans"] = spans
    return out


def golden_entry(
    qid: str, docs: list[str], chunks: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": qid, "query": f"question {qid}", "expected_doc_ids": docs}
    if chunks is not None:
        entry["expected_chunk_ids"] = chunks
    entry.update(extra)
    return entry


# The store's schema at version 2 (before the result columns), written out as it was
# released so that a test can build a database of that format without the package.
SCHEMA_V2_DDL = (
    "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY NOT NULL, "
    "description TEXT NOT NULL, applied_at TEXT NOT NULL)",
    "CREATE TABLE eval_runs (run_id TEXT PRIMARY KEY NOT NULL, suite TEXT, "
    "created_at TEXT NOT NULL, chunker_version TEXT, config_snapshot_json TEXT, "
    "golden_snapshot_json TEXT NOT NULL, aggregate_json TEXT, ingest_json TEXT)",
    "CREATE TABLE eval_query_results (run_id TEXT NOT NULL REFERENCES eval_runs(run_id) "
    "ON DELETE CASCADE, query_id TEXT NOT NULL, result_json TEXT NOT NULL, "
    "PRIMARY KEY (run_id, query_id))",
    "CREATE TABLE eval_chunks (run_id TEXT NOT NULL REFERENCES eval_runs(run_id) "
    "ON DELETE CASCADE, chunk_id TEXT NOT NULL, doc_id TEXT NOT NULL, "
    "source_spans_json TEXT NOT NULL, PRIMARY KEY (run_id, chunk_id)) WITHOUT ROWID",
)


def write_v2_store(path: Path, runs: dict[str, dict[str, Any]]) -> Path:
    """A schema-version-2 database at ``path`` holding ``runs``.

    ``runs`` maps a run id to ``{"golden": snapshot dict, "results": [result dicts],
    "chunks": [chunk dicts] (optional), "chunker_version": str | None}``; rows are
    written in the given order, as ingest at version 2 wrote them.
    """
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        for statement in SCHEMA_V2_DDL:
            conn.execute(statement)
        conn.executemany(
            "INSERT INTO schema_migrations VALUES (?, ?, '2026-01-01T00:00:00Z')",
            [(1, "runs and per-query results"), (2, "chunk inventory per run")],
        )
        for run_id, run in runs.items():
            conn.execute(
                "INSERT INTO eval_runs VALUES (?, 'suite', '2026-01-01T00:00:00Z', ?, NULL, ?, "
                "NULL, NULL)",
                (run_id, run.get("chunker_version"), orjson.dumps(run["golden"]).decode()),
            )
            conn.executemany(
                "INSERT INTO eval_query_results VALUES (?, ?, ?)",
                [(run_id, r["query_id"], orjson.dumps(r).decode()) for r in run["results"]],
            )
            conn.executemany(
                "INSERT INTO eval_chunks VALUES (?, ?, ?, ?)",
                [
                    (run_id, c["chunk_id"], c["doc_id"], orjson.dumps(c["source_spans"]).decode())
                    for c in run.get("chunks", ())
                ],
            )
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    return path

"""SQLite store of knowledge-base evaluation runs (standard-library ``sqlite3``).

Schema (version 4)::

    eval_runs(run_id TEXT PRIMARY KEY, suite, created_at, chunker_version,
              config_snapshot_json, golden_snapshot_json, aggregate_json,
              ingest_json)                                         -- ingest_json: v2
    eval_query_results(run_id REFERENCES eval_runs ON DELETE CASCADE, query_id,
                       result_json, PRIMARY KEY (run_id, query_id))
    eval_chunks(run_id REFERENCES eval_runs ON DELETE CASCADE, chunk_id, doc_id,
                source_spans_json, PRIMARY KEY (run_id, chunk_id))  -- v2
    eval_run_columns(run_id REFERENCES eval_runs ON DELETE CASCADE, name, part,
                     data BLOB, PRIMARY KEY (run_id, name, part))      -- v3
    schema_migrations(version PRIMARY KEY, description, applied_at)

``eval_run_columns`` holds the run's results once more in columns (query ids, errors,
answers, and per hit packed integer codes of chunk and document ids and its spans; see
:mod:`retrieval_lib.kb.columns`), which is what metrics and comparisons read: a few
megabytes decoded with ``numpy.frombuffer`` instead of a million JSON objects. A column
longer than 256 MB is split into ``part`` 0, 1, … . The columns are the only form the
metrics read: migration 3 builds them for every run already stored, from its JSON
documents, and migration 4 rebuilds those of an older format
(:data:`~retrieval_lib.kb.columns.COLUMNS_FORMAT`), so an old store is converted once,
when it is opened, never read through a second path.

``eval_query_results`` keeps its rowid on purpose: its rows (a JSON document of ~1 kB per
query) are too large for a ``WITHOUT ROWID`` table, where each would spill into an
overflow page of its own and quadruple the file. The small ``eval_chunks`` rows do not.

The database runs in WAL mode with foreign keys on. Every write that belongs together
happens in one ``BEGIN IMMEDIATE`` transaction (:meth:`KBStore.transaction`), so a failed
or killed ingest leaves the database exactly as it was. ``PRAGMA user_version`` and the
``schema_migrations`` table both record the schema version; opening an older store
applies the missing migrations, each in its own transaction, and a store newer than
this package is refused.
"""

from __future__ import annotations

import shlex
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from retrieval_lib.io import now_iso
from retrieval_lib.kb.exceptions import (
    KBError,
    RunExistsError,
    RunNotFoundError,
    StoreSchemaError,
)
from retrieval_lib.kb.records import ChunkRecord, QueryResult, RunRecord, paused_gc
from retrieval_lib.suggest import hint

if TYPE_CHECKING:  # imported when used: opening a store does not pull in numpy
    from retrieval_lib.kb.columns import RunColumns

__all__ = [
    "SCHEMA_VERSION",
    "MIGRATIONS",
    "Migration",
    "KBStore",
    "run_exists_message",
]

#: Rows fetched at a time when streaming a run's JSON documents.
_FETCH_ROWS = 2000
#: Largest blob written for one part of a column (SQLite's default limit is 1e9 bytes).
_PART_BYTES = 1 << 28


@dataclass(frozen=True)
class Migration:
    """One schema step: the statements that take version ``version - 1`` to ``version``.

    ``backfill``, when set, runs after the statements in the same transaction (to derive
    new tables from data already stored).
    """

    version: int
    description: str
    statements: tuple[str, ...]
    backfill: Callable[[sqlite3.Connection], None] | None = None


def _stream_results(conn: sqlite3.Connection, run_id: str) -> Iterator[QueryResult]:
    """The run's results in ingest (rowid) order, fetched in batches."""
    cursor = conn.execute(
        "SELECT result_json FROM eval_query_results WHERE run_id = ? ORDER BY rowid", (run_id,)
    )
    while rows := cursor.fetchmany(_FETCH_ROWS):
        for (text,) in rows:
            yield QueryResult.from_dict(orjson.loads(text))


def _insert_columns(conn: sqlite3.Connection, run_id: str, columns: Mapping[str, bytes]) -> None:
    conn.executemany(
        "INSERT INTO eval_run_columns (run_id, name, part, data) VALUES (?, ?, ?, ?)",
        (
            (run_id, name, part, data[offset : offset + _PART_BYTES])
            for name, data in sorted(columns.items())
            for part, offset in enumerate(range(0, max(len(data), 1), _PART_BYTES))
        ),
    )


def _rebuild_columns(conn: sqlite3.Connection) -> None:
    """Migrations 3 and 4: (re)build the columns of every run that has none, or has them
    in another format than :data:`~retrieval_lib.kb.columns.COLUMNS_FORMAT`, from its JSON
    documents."""
    from retrieval_lib.kb.columns import COLUMNS_FORMAT, RunColumnsBuilder, stored_format

    current = {
        run_id
        for run_id, meta in conn.execute(
            "SELECT run_id, data FROM eval_run_columns WHERE name = 'meta' AND part = 0"
        )
        if stored_format(meta) == COLUMNS_FORMAT
    }
    run_ids = [r for (r,) in conn.execute("SELECT run_id FROM eval_runs ORDER BY run_id")]
    for run_id in run_ids:
        if run_id in current:
            continue
        conn.execute("DELETE FROM eval_run_columns WHERE run_id = ?", (run_id,))
        builder = RunColumnsBuilder()
        with paused_gc():
            for result in _stream_results(conn, run_id):
                builder.add(result)
        _insert_columns(conn, run_id, builder.build().encode())


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "runs and per-query results",
        (
            """CREATE TABLE eval_runs (
                run_id TEXT PRIMARY KEY NOT NULL,
                suite TEXT,
                created_at TEXT NOT NULL,
                chunker_version TEXT,
                config_snapshot_json TEXT,
                golden_snapshot_json TEXT NOT NULL,
                aggregate_json TEXT
            )""",
            """CREATE TABLE eval_query_results (
                run_id TEXT NOT NULL REFERENCES eval_runs(run_id) ON DELETE CASCADE,
                query_id TEXT NOT NULL,
                result_json TEXT NOT NULL,
                PRIMARY KEY (run_id, query_id)
            )""",
        ),
    ),
    Migration(
        2,
        "chunk inventory per run and ingest provenance",
        (
            """CREATE TABLE eval_chunks (
                run_id TEXT NOT NULL REFERENCES eval_runs(run_id) ON DELETE CASCADE,
                chunk_id TEXT NOT NULL,
                doc_id TEXT NOT NULL,
                source_spans_json TEXT NOT NULL,
                PRIMARY KEY (run_id, chunk_id)
            ) WITHOUT ROWID""",
            "ALTER TABLE eval_runs ADD COLUMN ingest_json TEXT",
        ),
    ),
    Migration(
        3,
        "per-run result columns (packed hit arrays) for fast metrics",
        (
            """CREATE TABLE eval_run_columns (
                run_id TEXT NOT NULL REFERENCES eval_runs(run_id) ON DELETE CASCADE,
                name TEXT NOT NULL,
                part INTEGER NOT NULL,
                data BLOB NOT NULL,
                PRIMARY KEY (run_id, name, part)
            )""",
        ),
        _rebuild_columns,
    ),
    Migration(
        4,
        "result columns of an older format rebuilt from the JSON documents",
        (),
        _rebuild_columns,
    ),
)

#: The schema version this package writes.
SCHEMA_VERSION: int = MIGRATIONS[-1].version

_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY NOT NULL,
    description TEXT NOT NULL,
    applied_at TEXT NOT NULL
)"""


#: Ingest order: ``created_at`` has whole seconds (and is one fixed time under
#: ``SOURCE_DATE_EPOCH``), so runs of one second keep the order they were inserted in.
_INGEST_ORDER = "ORDER BY created_at, rowid"


def run_exists_message(run_id: str, path: str | Path) -> str:
    """Why ``run_id`` cannot be ingested again, naming the command that deletes it.

    Examples
    --------
    >>> run_exists_message("r1", "eval.sqlite")  # doctest: +NORMALIZE_WHITESPACE
    "run 'r1' already exists in eval.sqlite; runs are immutable: choose another --run-id,
    or delete the old run with `retrieval-lib kb delete r1 --db eval.sqlite`"
    """
    return (
        f"run {run_id!r} already exists in {path}; runs are immutable: choose another "
        f"--run-id, or delete the old run with "
        f"`retrieval-lib kb delete {shlex.quote(run_id)} --db {shlex.quote(str(path))}`"
    )


def _loads(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


class KBStore:
    """A connection to a knowledge-base evaluation store.

    Parameters
    ----------
    path
        Database file; created (and migrated to :data:`SCHEMA_VERSION`) when ``create``.
    create
        When False, a missing file is an error instead of a new empty store.
    busy_timeout
        Seconds to wait for another process's write lock before giving up.

    Examples
    --------
    >>> import tempfile, os
    >>> with KBStore(os.path.join(tempfile.mkdtemp(), "eval.sqlite")) as store:
    ...     store.schema_version, store.run_ids()
    (4, [])
    """

    def __init__(
        self,
        path: str | Path,
        *,
        create: bool = True,
        busy_timeout: float = 30.0,
    ) -> None:
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise KBError(f"knowledge-base store {self.path} does not exist")
        # A file that is there is looked at read-only first: a foreign or newer database
        # is refused with its bytes untouched (opening it to write would switch it to WAL).
        if self.path.exists():
            _probe(self.path, create=create)
        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(self.path, isolation_level=None, timeout=busy_timeout)
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute("PRAGMA journal_mode = WAL")
            # In WAL mode NORMAL is safe against a killed process (only power loss
            # can drop the last commits), and much faster than FULL.
            self.conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            raise StoreSchemaError(f"cannot open {self.path} as an SQLite database: {exc}") from exc
        try:
            self._migrate()
        except BaseException:
            self.conn.close()
            raise

    # -- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> KBStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; any exception rolls everything back.

        SQLite errors (a locked or full database, a constraint) become :class:`KBError`.
        """
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise KBError(f"cannot write to {self.path}: {exc}") from exc
        try:
            yield self.conn
        except sqlite3.Error as exc:
            self.conn.execute("ROLLBACK")
            raise KBError(f"database error in {self.path}, nothing was written: {exc}") from exc
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self.conn.execute("ROLLBACK")
            raise KBError(f"cannot commit to {self.path}, nothing was written: {exc}") from exc

    # -- schema ------------------------------------------------------------------------

    @property
    def schema_version(self) -> int:
        """``PRAGMA user_version`` of the database."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def applied_migrations(self) -> list[tuple[int, str, str]]:
        """Rows of ``schema_migrations``: (version, description, applied_at)."""
        return [
            (int(v), d, a)
            for v, d, a in self.conn.execute(
                "SELECT version, description, applied_at FROM schema_migrations ORDER BY version"
            )
        ]

    def _migrate(self) -> None:
        """Apply the missing migrations (:func:`_probe` has refused a foreign or newer file)."""
        for migration in MIGRATIONS:
            try:
                self._apply(migration)
            except (ValueError, KeyError, TypeError) as exc:  # a stored document is broken
                raise StoreSchemaError(
                    f"cannot open {self.path}: migration {migration.version} "
                    f"({migration.description}) failed, nothing was changed: {exc}"
                ) from exc

    def _apply(self, migration: Migration) -> None:
        """Apply one migration in its own transaction (a no-op when already applied)."""
        with self.transaction() as conn:
            # Re-read inside the write lock: another process may have migrated.
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) >= migration.version:
                return
            conn.execute(_MIGRATIONS_TABLE)
            for statement in migration.statements:
                conn.execute(statement)
            if migration.backfill is not None:
                migration.backfill(conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.description, now_iso()),
            )
            conn.execute(f"PRAGMA user_version = {int(migration.version)}")

    def integrity_check(self) -> str:
        """``PRAGMA integrity_check`` plus a foreign-key check; ``"ok"`` when sound."""
        result = self.conn.execute("PRAGMA integrity_check").fetchone()[0]
        if result != "ok":
            return str(result)
        violations = self.conn.execute("PRAGMA foreign_key_check").fetchall()
        return "ok" if not violations else f"foreign key violations: {violations[:5]}"

    # -- runs --------------------------------------------------------------------------

    def run_ids(self) -> list[str]:
        """Stored run ids in ingest order (oldest first; within one second, as ingested)."""
        return [r for (r,) in self.conn.execute(f"SELECT run_id FROM eval_runs {_INGEST_ORDER}")]

    def has_run(self, run_id: str) -> bool:
        """True when ``run_id`` is stored."""
        row = self.conn.execute("SELECT 1 FROM eval_runs WHERE run_id = ?", (run_id,)).fetchone()
        return row is not None

    def _run_from_row(self, row: tuple[Any, ...]) -> RunRecord:
        return RunRecord(*row[:4], *map(_loads, row[4:]))  # the JSON columns decoded

    _RUN_COLUMNS = (
        "run_id, suite, created_at, chunker_version, config_snapshot_json, "
        "golden_snapshot_json, aggregate_json, ingest_json"
    )

    def get_run(self, run_id: str) -> RunRecord:
        """The stored run ``run_id``.

        Raises
        ------
        RunNotFoundError
            Naming the runs that do exist.
        """
        row = self.conn.execute(
            f"SELECT {self._RUN_COLUMNS} FROM eval_runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if row is None:
            raise self._not_found(run_id)
        return self._run_from_row(row)

    def _not_found(self, run_id: str) -> RunNotFoundError:
        known = self.run_ids()
        shown = ", ".join(known[:20]) + (" …" if len(known) > 20 else "")
        return RunNotFoundError(
            f"run {run_id!r} is not in {self.path}"
            + hint(run_id, known)
            + (f" (runs: {shown})" if known else " (the store has no runs)")
        )

    def run_header(self, run_id: str) -> tuple[str | None, str]:
        """``(chunker_version, golden_snapshot_json)`` of a run, the snapshot undecoded.

        What metrics and comparisons need of ``eval_runs``; two runs of one golden set
        have the same snapshot text, which a caller can then decode once.

        Raises
        ------
        RunNotFoundError
            As :meth:`get_run`.
        """
        row = self.conn.execute(
            "SELECT chunker_version, golden_snapshot_json FROM eval_runs WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None:
            raise self._not_found(run_id)
        return row[0], row[1]

    def list_runs(self) -> list[RunRecord]:
        """Every stored run in ingest order (oldest first; within one second, as ingested)."""
        rows = self.conn.execute(
            f"SELECT {self._RUN_COLUMNS} FROM eval_runs {_INGEST_ORDER}"
        ).fetchall()
        return [self._run_from_row(r) for r in rows]

    def insert_run(
        self,
        *,
        run_id: str,
        suite: str | None,
        created_at: str,
        chunker_version: str | None,
        config_snapshot_json: str | None,
        golden_snapshot_json: str,
        ingest_json: str | None,
    ) -> None:
        """Insert an ``eval_runs`` row (call inside :meth:`transaction`)."""
        try:
            self.conn.execute(
                "INSERT INTO eval_runs (run_id, suite, created_at, chunker_version, "
                "config_snapshot_json, golden_snapshot_json, aggregate_json, ingest_json) "
                "VALUES (?, ?, ?, ?, ?, ?, NULL, ?)",
                (
                    run_id,
                    suite,
                    created_at,
                    chunker_version,
                    config_snapshot_json,
                    golden_snapshot_json,
                    ingest_json,
                ),
            )
        except sqlite3.IntegrityError as exc:
            raise RunExistsError(run_exists_message(run_id, self.path)) from exc

    def insert_chunks(self, run_id: str, rows: Iterable[tuple[str, str, str]]) -> None:
        """Insert ``(chunk_id, doc_id, source_spans_json)`` rows for ``run_id``."""
        self.conn.executemany(
            "INSERT INTO eval_chunks (run_id, chunk_id, doc_id, source_spans_json) "
            "VALUES (?, ?, ?, ?)",
            ((run_id, c, d, s) for c, d, s in rows),
        )

    def insert_results(self, run_id: str, rows: Iterable[tuple[str, str]]) -> None:
        """Insert ``(query_id, result_json)`` rows for ``run_id``."""
        self.conn.executemany(
            "INSERT INTO eval_query_results (run_id, query_id, result_json) VALUES (?, ?, ?)",
            ((run_id, q, r) for q, r in rows),
        )

    def insert_columns(self, run_id: str, columns: Mapping[str, bytes]) -> None:
        """Insert the run's result columns (call inside :meth:`transaction`)."""
        _insert_columns(self.conn, run_id, columns)

    def set_aggregate(self, run_id: str, aggregate_json: str) -> None:
        """``UPDATE eval_runs SET aggregate_json = ? WHERE run_id = ?`` (one transaction)."""
        with self.transaction() as conn:
            cursor = conn.execute(
                "UPDATE eval_runs SET aggregate_json = ? WHERE run_id = ?",
                (aggregate_json, run_id),
            )
            if cursor.rowcount != 1:
                raise self._not_found(run_id)

    def delete_run(self, run_id: str) -> dict[str, int]:
        """Delete a run with its aggregate, results, chunks and columns, in one transaction.

        The ``eval_runs`` row (which holds the aggregate and the snapshots) goes, and the
        foreign keys cascade to ``eval_query_results``, ``eval_chunks`` and
        ``eval_run_columns``; an error rolls everything back.

        Returns
        -------
        dict
            The run's row counts before deletion (:meth:`count_rows`).

        Raises
        ------
        RunNotFoundError
            ``run_id`` is not stored (the message suggests close run ids).

        Examples
        --------
        >>> import tempfile, os
        >>> with KBStore(os.path.join(tempfile.mkdtemp(), "eval.sqlite")) as store:
        ...     store.delete_run("r1")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        retrieval_lib.kb.exceptions.RunNotFoundError: run 'r1' is not in ... (the store has no runs)
        """
        with self.transaction() as conn:
            counts = self.count_rows(run_id)
            cursor = conn.execute("DELETE FROM eval_runs WHERE run_id = ?", (run_id,))
            if cursor.rowcount != 1:
                raise self._not_found(run_id)
        return counts

    # -- per-query results and chunks ----------------------------------------------------

    def load_results(self, run_id: str) -> dict[str, QueryResult]:
        """The run's results by query id (ordered by query id)."""
        self.get_run(run_id)
        rows = self.conn.execute(
            "SELECT query_id, result_json FROM eval_query_results WHERE run_id = ? "
            "ORDER BY query_id",
            (run_id,),
        )
        with paused_gc():
            return {q: QueryResult.from_dict(orjson.loads(r)) for q, r in rows}

    def load_chunks(self, run_id: str) -> dict[str, ChunkRecord]:
        """The run's chunk inventory by chunk id (empty when none was ingested)."""
        rows = self.conn.execute(
            "SELECT chunk_id, doc_id, source_spans_json FROM eval_chunks WHERE run_id = ? "
            "ORDER BY chunk_id",
            (run_id,),
        )
        with paused_gc():
            return {
                c: ChunkRecord(c, d, tuple(map(tuple, orjson.loads(spans)))) for c, d, spans in rows
            }

    def load_columns(self, run_id: str) -> RunColumns:
        """The run's result columns (what metrics and comparisons read).

        Raises
        ------
        RunNotFoundError
            As :meth:`get_run`.
        StoreSchemaError
            The columns are missing, incomplete or inconsistent.
        """
        parts: dict[str, list[bytes]] = {}
        for name, data in self.conn.execute(
            "SELECT name, data FROM eval_run_columns WHERE run_id = ? ORDER BY name, part",
            (run_id,),
        ):
            parts.setdefault(name, []).append(data)
        if not parts:
            self.get_run(run_id)
            raise StoreSchemaError(f"run {run_id!r} in {self.path} has no result columns")
        from retrieval_lib.kb.columns import RunColumns

        try:
            return RunColumns.decode(
                {
                    name: chunks[0] if len(chunks) == 1 else b"".join(chunks)
                    for name, chunks in parts.items()
                }
            )
        except (ValueError, orjson.JSONDecodeError) as exc:
            raise StoreSchemaError(
                f"the result columns of run {run_id!r} in {self.path} are damaged: {exc}"
            ) from exc

    def load_chunk_ids(self, run_id: str) -> set[str]:
        """Chunk ids of the run's inventory (empty when none was ingested)."""
        return {
            c
            for (c,) in self.conn.execute(
                "SELECT chunk_id FROM eval_chunks WHERE run_id = ?", (run_id,)
            )
        }

    def count_rows(self, run_id: str) -> dict[str, int]:
        """Row counts of the run in ``eval_query_results`` and ``eval_chunks``."""
        results = self.conn.execute(
            "SELECT COUNT(*) FROM eval_query_results WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
        chunks = self.conn.execute(
            "SELECT COUNT(*) FROM eval_chunks WHERE run_id = ?", (run_id,)
        ).fetchone()[0]
        return {"results": int(results), "chunks": int(chunks)}


#: The first 16 bytes of every SQLite 3 database file.
_SQLITE_HEADER = b"SQLite format 3\x00"


def _probe(path: Path, *, create: bool) -> None:
    """Refuse, without writing a byte, a file that is not a kb store this package reads.

    The file is opened read-only (``file:...?mode=ro``); an empty (0-byte) file is a new
    store only for a command that creates one (``create``: ``kb ingest``), any other
    command refuses it, so ``kb runs`` never writes a schema into it.

    Raises
    ------
    KBError
        The path is not a regular file or is empty (without ``create``).
    StoreSchemaError
        Not an SQLite database, a database without the kb schema, or a newer schema.
    """
    if not path.is_file():
        raise KBError(f"knowledge-base store {path} is not a regular file")
    size = path.stat().st_size
    if size == 0:
        if create:
            return
        raise KBError(
            f"knowledge-base store {path} is an empty file, not a store; only "
            "`retrieval-lib kb ingest` makes a new store (in a missing or empty file)"
        )
    try:
        with path.open("rb") as handle:
            header = handle.read(len(_SQLITE_HEADER))
    except OSError as exc:
        raise KBError(f"cannot read knowledge-base store {path}: {exc}") from exc
    if header != _SQLITE_HEADER:
        raise StoreSchemaError(
            f"cannot open {path} as an SQLite database: file is not a database "
            "(its header differs; left unchanged)"
        )
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreSchemaError(f"cannot open {path} as an SQLite database: {exc}") from exc
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = {
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        }
    except sqlite3.Error as exc:
        raise StoreSchemaError(f"{path} is not a readable SQLite database: {exc}") from exc
    finally:
        conn.close()
    if version > SCHEMA_VERSION:
        raise StoreSchemaError(
            f"{path} has schema version {version}; this retrieval_lib reads up to "
            f"{SCHEMA_VERSION}: upgrade retrieval_lib"
        )
    if version == 0 and tables - {"schema_migrations"}:
        raise StoreSchemaError(
            f"{path} holds tables {sorted(tables)} but no knowledge-base schema "
            "version: not a retrieval_lib kb store (left unchanged)"
        )
    if version == 0 and not create:
        raise KBError(
            f"{path} is an SQLite database without a knowledge-base schema; only "
            "`retrieval-lib kb ingest` makes a new store"
        )

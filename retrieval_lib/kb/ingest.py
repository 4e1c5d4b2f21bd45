"""Ingest one evaluation run (results JSONL + golden YAML + chunk inventory) into the store.

Results file: one JSON object per line::

    {"query_id": "q-001",
     "hits": [{"chunk_id": "c1", "doc_id": "d1", "rank": 1, "score": 0.83,
               "source_spans": [[120, 480]]}],
     "answer": {"text": "...", "grounded": true,
                "citations": [{"citation": "[#1]", "chunk_id": "c1"}]},
     "error": null}

``answer`` and ``error`` are optional, ``score`` and ``source_spans`` may be omitted;
further keys are kept. Ranks must be exactly 1..n within a line (the order the system
returned; scores are not used to order), chunk ids may not repeat within a line, spans
are half-open ``[start, end)`` character offsets with ``0 <= start < end``. Blank
lines are skipped. Every ``query_id`` must be a golden query id, at most once; golden
queries without a line count as failed queries.

Chunk inventory (``--chunks``): one ``{"chunk_id", "doc_id", "source_spans"}`` per line.
When given, every hit must name an inventory chunk of the same document, a hit without
spans takes the inventory's, and the expected chunks of the golden set get their spans
(stored in the run's golden snapshot) for the chunker-version fallback of
:func:`retrieval_lib.kb.compare.compare_runs`.

Besides one JSON document per query, the run is stored in columns
(:mod:`retrieval_lib.kb.columns`) for the metrics. Everything is written in one
transaction: a bad line leaves the database as it was, and so does a process killed
half-way.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import orjson

from retrieval_lib.io import file_sha256, now_iso
from retrieval_lib.kb.columns import RunColumnsBuilder
from retrieval_lib.kb.exceptions import IngestError, RunExistsError
from retrieval_lib.kb.golden import GoldenSet, load_golden
from retrieval_lib.kb.records import (
    Answer,
    ChunkRecord,
    Citation,
    Hit,
    QueryResult,
    Span,
    paused_gc,
)
from retrieval_lib.kb.store import KBStore, run_exists_message

__all__ = [
    "IngestSummary",
    "ingest_run",
    "parse_result",
    "parse_chunk",
    "read_chunk_inventory",
    "default_run_id",
    "check_run_id",
]

_BATCH = 2000
_MAX_LISTED = 20


@dataclass(frozen=True)
class IngestSummary:
    """What :func:`ingest_run` stored."""

    run_id: str
    results: int
    chunks: int
    golden_queries: int
    missing_queries: int
    results_sha256: str
    warnings: tuple[str, ...] = field(default_factory=tuple)
    #: The run was already stored by an ingest that stopped before its aggregate; nothing
    #: was written now (the caller computes the aggregate).
    resumed: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Every field but ``resumed``."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "resumed"}
        return {**out, "warnings": list(self.warnings)}


class _LineError(ValueError):
    """A problem with one line; the caller adds file and line number."""


def _spans(value: Any, what: str, *, required: bool) -> tuple[Span, ...]:
    if value is None:
        if required:
            raise _LineError(f"{what}: 'source_spans' is required")
        return ()
    if not isinstance(value, list) or (required and not value):
        raise _LineError(f"{what}: 'source_spans' must be a non-empty list of [start, end]")
    spans = []
    for span in value:
        if (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in span)
        ):
            raise _LineError(f"{what}: span {span!r} is not [start, end] with integers")
        start, end = span
        if not 0 <= start < end:
            raise _LineError(f"{what}: span {span!r} needs 0 <= start < end (half-open)")
        spans.append((start, end))
    return tuple(spans)


def _text(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise _LineError(f"{what}: {key!r} must be a non-empty string, got {value!r}")
    return value


def parse_chunk(obj: Any) -> ChunkRecord:
    """Validate one chunk-inventory object.

    Examples
    --------
    >>> parse_chunk({"chunk_id": "c1", "doc_id": "d1", "source_spans": [[0, 10]]})
    ChunkRecord(chunk_id='c1', doc_id='d1', source_spans=((0, 10),))
    """
    if not isinstance(obj, dict):
        raise _LineError(f"expected a JSON object, got {type(obj).__name__}")
    return ChunkRecord(
        _text(obj, "chunk_id", "chunk"),
        _text(obj, "doc_id", "chunk"),
        _spans(obj.get("source_spans"), "chunk", required=True),
    )


def _is_span_list(value: Any) -> bool:
    """Fast check of the common case ``[[start, end], ...]`` with 0 <= start < end."""
    if type(value) is not list:
        return False
    for span in value:
        if type(span) is not list or len(span) != 2:
            return False
        start, end = span
        if type(start) is not int or type(end) is not int or not 0 <= start < end:
            return False
    return True


def _where(query_id: str, position: int) -> str:
    return f"query {query_id!r} hit {position}"


def _parse_hit(
    raw: Any, query_id: str, position: int, inventory: Mapping[str, ChunkRecord] | None
) -> Hit:
    # The common, valid case is checked with cheap type tests; anything else goes through
    # the detailed checks below, which name the problem.
    if type(raw) is not dict:
        raise _LineError(f"{_where(query_id, position)}: expected an object")
    chunk_id = raw.get("chunk_id")
    doc_id = raw.get("doc_id")
    rank = raw.get("rank")
    score = raw.get("score")
    raw_spans = raw.get("source_spans")
    if not isinstance(chunk_id, str) or not chunk_id:
        chunk_id = _text(raw, "chunk_id", _where(query_id, position))
    if not isinstance(doc_id, str) or not doc_id:
        doc_id = _text(raw, "doc_id", _where(query_id, position))
    if type(rank) is not int or rank < 1:
        raise _LineError(
            f"{_where(query_id, position)}: 'rank' must be an integer >= 1, got {rank!r}"
        )
    if score is not None:
        if type(score) is int:
            score = float(score)
        elif type(score) is not float or not math.isfinite(score):
            raise _LineError(
                f"{_where(query_id, position)}: 'score' must be a finite number or null, got {score!r}"
            )
    if raw_spans is None:
        spans: tuple[Span, ...] = ()
    elif _is_span_list(raw_spans):
        spans = tuple((s, e) for s, e in raw_spans)
    else:
        spans = _spans(raw_spans, _where(query_id, position), required=False)
    if inventory is not None:
        chunk = inventory.get(chunk_id)
        if chunk is None:
            raise _LineError(
                f"{_where(query_id, position)}: chunk_id {chunk_id!r} is not in the chunk inventory"
            )
        if chunk.doc_id != doc_id:
            raise _LineError(
                f"{_where(query_id, position)}: doc_id {doc_id!r} differs from the inventory's {chunk.doc_id!r} "
                f"for chunk {chunk_id!r}"
            )
        spans = spans or chunk.source_spans
    return Hit(chunk_id, doc_id, rank, score, spans)


def parse_result(obj: Any, inventory: Mapping[str, ChunkRecord] | None = None) -> QueryResult:
    """Validate one results object into a :class:`QueryResult` (hits sorted by rank).

    Raises ``ValueError`` (an :class:`IngestError` once :func:`ingest_run` adds the line).

    Examples
    --------
    >>> r = parse_result({"query_id": "q1", "hits": [
    ...     {"chunk_id": "b", "doc_id": "d", "rank": 2, "score": 0.5},
    ...     {"chunk_id": "a", "doc_id": "d", "rank": 1, "score": 0.9}]})
    >>> [h.chunk_id for h in r.hits]
    ['a', 'b']
    """
    if not isinstance(obj, dict):
        raise _LineError(f"expected a JSON object, got {type(obj).__name__}")
    query_id = _text(obj, "query_id", "result")
    raw_hits = obj.get("hits")
    if not isinstance(raw_hits, list):
        raise _LineError(f"query {query_id!r}: 'hits' must be a list, got {raw_hits!r}")
    hits = [
        _parse_hit(raw, query_id, position, inventory) for position, raw in enumerate(raw_hits, 1)
    ]
    hits.sort(key=lambda h: h.rank)
    if [h.rank for h in hits] != list(range(1, len(hits) + 1)):
        raise _LineError(
            f"query {query_id!r}: ranks must be exactly 1..{len(hits)}, got "
            f"{sorted(h.rank for h in hits)}"
        )
    if len({h.chunk_id for h in hits}) != len(hits):
        raise _LineError(f"query {query_id!r}: a chunk_id appears twice in 'hits'")

    answer = None
    raw_answer = obj.get("answer")
    if raw_answer is not None:
        what = f"query {query_id!r} answer"
        if not isinstance(raw_answer, dict):
            raise _LineError(f"{what}: expected an object or null")
        text = raw_answer.get("text")
        grounded = raw_answer.get("grounded")
        if not isinstance(text, str):
            raise _LineError(f"{what}: 'text' must be a string")
        if not isinstance(grounded, bool):
            raise _LineError(f"{what}: 'grounded' must be true or false, got {grounded!r}")
        raw_citations = raw_answer.get("citations", [])
        if not isinstance(raw_citations, list):
            raise _LineError(f"{what}: 'citations' must be a list")
        citations = []
        for raw in raw_citations:
            if not isinstance(raw, dict) or not isinstance(raw.get("citation"), str):
                raise _LineError(f"{what}: citation {raw!r} needs a 'citation' string")
            cited = raw.get("chunk_id")
            if cited is not None and not isinstance(cited, str):
                raise _LineError(f"{what}: citation chunk_id must be a string or null")
            citations.append(Citation(raw["citation"], cited))
        answer = Answer(text, grounded, tuple(citations))
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise _LineError(f"query {query_id!r}: 'error' must be a string or null")
    extra = {k: v for k, v in obj.items() if k not in ("query_id", "hits", "answer", "error")}
    return QueryResult(query_id, tuple(hits), answer, error, extra)


def _json_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line


def _decode(path: Path, number: int, line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise IngestError(f"{path}:{number}: not valid JSON: {exc}") from exc


def _first_line(seen: dict[str, int], key: str, file: Path, number: int, what: str) -> None:
    """Record that ``key`` is on line ``number``; a key seen before is an :class:`IngestError`."""
    first = seen.setdefault(key, number)
    if first != number:
        raise IngestError(f"{file}:{number}: {what} {key!r} repeats line {first}")


def read_chunk_inventory(path: str | Path) -> dict[str, ChunkRecord]:
    """Read and validate a chunk-inventory JSONL file (chunk ids unique).

    Raises
    ------
    IngestError
        Naming the file and line of the first problem.
    """
    file = Path(path)
    inventory: dict[str, ChunkRecord] = {}
    first_line: dict[str, int] = {}
    with paused_gc():
        for number, line in _json_lines(file):
            try:
                chunk = parse_chunk(_decode(file, number, line))
            except _LineError as exc:
                raise IngestError(f"{file}:{number}: {exc}") from exc
            _first_line(first_line, chunk.chunk_id, file, number, "chunk_id")
            inventory[chunk.chunk_id] = chunk
    if not inventory:
        raise IngestError(f"{file}: the chunk inventory is empty")
    return inventory


def _sha256(path: Path) -> str:
    try:
        return file_sha256(path)
    except OSError as exc:
        raise IngestError(f"cannot read {path}: {exc.strerror or exc}") from exc


def default_run_id(results_path: str | Path, results_sha256: str) -> str:
    """``<results file stem>-<first 12 hex digits of its SHA-256>`` (stable per content)."""
    return f"{Path(results_path).stem}-{results_sha256[:12]}"


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def check_run_id(run_id: str) -> str:
    """``run_id`` if it is a usable run id, else :class:`IngestError` saying why.

    A run id is named on command lines, in logs and in reports: it must not be empty or only
    spaces, nor hold a control character (a newline, an escape, a NUL), which no terminal or
    report could show as the id. Any other text is allowed; reports show it as text
    (:mod:`retrieval_lib.safe_text`), never as markup.

    Examples
    --------
    >>> check_run_id("bm25 <v2>")
    'bm25 <v2>'
    >>> check_run_id("a\\nb")
    Traceback (most recent call last):
    ...
    retrieval_lib.kb.exceptions.IngestError: run id 'a\\nb' holds a control character (U+000A); choose a --run-id without one
    """
    if not run_id.strip():
        raise IngestError("run id must not be empty")
    bad = _CONTROL.search(run_id)
    if bad:
        raise IngestError(
            f"run id {run_id!r} holds a control character (U+{ord(bad.group()):04X}); "
            "choose a --run-id without one"
        )
    return run_id


def _read_config(path: Path) -> dict[str, Any]:
    try:
        config = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise IngestError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise IngestError(f"{path}: config is not valid JSON: {exc}") from exc
    if not isinstance(config, dict):
        raise IngestError(f"{path}: config must be a JSON object")
    return config


def _snapshot_golden(
    golden: GoldenSet, inventory: Mapping[str, ChunkRecord] | None
) -> tuple[GoldenSet, list[str]]:
    """Attach expected-chunk spans from ``inventory`` and list inconsistencies."""
    warnings: list[str] = []
    spans: dict[str, dict[str, Any]] = {}
    if inventory is not None:
        for query in golden:
            for chunk_id in query.expected_chunk_ids:
                chunk = inventory.get(chunk_id)
                if chunk is None:
                    continue
                spans[chunk_id] = {
                    "doc_id": chunk.doc_id,
                    "source_spans": [list(s) for s in chunk.source_spans],
                }
                if chunk.doc_id not in query.expected_doc_ids:
                    warnings.append(
                        f"golden {query.id!r}: expected chunk {chunk_id!r} belongs to "
                        f"{chunk.doc_id!r}, which is not in expected_doc_ids"
                    )
    snapshot = GoldenSet(
        queries=golden.queries,
        sha256=golden.sha256,
        source=golden.source,
        expected_chunk_spans=spans,
    )
    return snapshot, warnings


def _resume_or_refuse(
    store: KBStore, run_id: str, results_sha: str, golden: GoldenSet, *, resume: bool
) -> IngestSummary:
    """An existing run id: with ``resume``, the summary of a run an earlier ingest of the
    same results and golden set stored but did not aggregate (killed between its commit and
    the aggregate), so the caller completes the aggregate.

    Raises
    ------
    RunExistsError
        The run has an aggregate; or it has none but other inputs (or ``resume`` is off):
        the message then names the command that completes it (``retrieval-lib kb aggregate``).
    """
    record = store.get_run(run_id)
    if record.aggregate is not None:
        raise RunExistsError(run_exists_message(run_id, store.path))
    ingest = dict(record.ingest or {})
    same = (
        ingest.get("results_sha256") == results_sha and ingest.get("golden_sha256") == golden.sha256
    )
    if not (resume and same):
        where = f"{shlex.quote(run_id)} --db {shlex.quote(str(store.path))}"
        raise RunExistsError(
            f"run {run_id!r} already exists in {store.path}"
            + ("" if same else " (from other results or another golden set)")
            + " and has no aggregate: an earlier ingest stopped before it; "
            f"`retrieval-lib kb aggregate {where}` completes that run, "
            f"`retrieval-lib kb delete {where}` deletes it, "
            "or choose another --run-id"
        )
    return IngestSummary(
        run_id=run_id,
        results=int(ingest.get("results") or 0),
        chunks=int(ingest.get("chunks") or 0),
        golden_queries=len(golden),
        missing_queries=int(ingest.get("missing_query_count") or 0),
        results_sha256=results_sha,
        warnings=tuple(ingest.get("warnings") or ()),
        resumed=True,
    )


def _insert_run_row(
    store: KBStore,
    run_id: str,
    suite: str,
    chunker_version: str | None,
    config: dict[str, Any] | None,
    snapshot: GoldenSet,
    inventory: Mapping[str, ChunkRecord] | None,
) -> None:
    """The run's ``eval_runs`` row (snapshots, no ingest info yet) and its chunk inventory."""
    store.insert_run(
        run_id=run_id,
        suite=suite,
        created_at=now_iso(),
        chunker_version=chunker_version,
        config_snapshot_json=None
        if config is None
        else orjson.dumps(config, option=orjson.OPT_SORT_KEYS).decode(),
        golden_snapshot_json=orjson.dumps(
            snapshot.to_snapshot(), option=orjson.OPT_SORT_KEYS
        ).decode(),
        ingest_json=None,
    )
    if inventory is not None:
        store.insert_chunks(
            run_id,
            (
                (c.chunk_id, c.doc_id, orjson.dumps([list(s) for s in c.source_spans]).decode())
                for c in inventory.values()
            ),
        )


def _insert_results(
    store: KBStore,
    run_id: str,
    results_file: Path,
    golden: GoldenSet,
    inventory: Mapping[str, ChunkRecord] | None,
    progress: Callable[[int], None] | None,
) -> tuple[int, list[str]]:
    """Validate and store every result line (rows in batches, then the run's columns).

    Returns the number of results written and the golden query ids without a line.
    """
    seen: dict[str, int] = {}
    written = 0
    columns = RunColumnsBuilder()
    batch: list[tuple[str, str]] = []
    for number, line in _json_lines(results_file):
        try:
            result = parse_result(_decode(results_file, number, line), inventory)
        except _LineError as exc:
            raise IngestError(f"{results_file}:{number}: {exc}") from exc
        if result.query_id not in golden:
            raise IngestError(
                f"{results_file}:{number}: query_id {result.query_id!r} is not in the "
                f"golden set {golden.source}"
            )
        _first_line(seen, result.query_id, results_file, number, "query_id")
        columns.add(result)
        batch.append(
            (
                result.query_id,
                orjson.dumps(result.to_dict(), option=orjson.OPT_SORT_KEYS).decode(),
            )
        )
        if len(batch) >= _BATCH:
            store.insert_results(run_id, batch)
            written += len(batch)
            batch = []
            if progress is not None:
                progress(written)
    store.insert_results(run_id, batch)
    written += len(batch)
    store.insert_columns(run_id, columns.build().encode())
    return written, [q for q in golden.ids if q not in seen]


def ingest_run(
    store: KBStore,
    results_path: str | Path,
    golden_path: str | Path,
    *,
    chunks_path: str | Path | None = None,
    run_id: str | None = None,
    chunker_version: str | None = None,
    config_path: str | Path | None = None,
    suite: str | None = None,
    progress: Callable[[int], None] | None = None,
    resume: bool = False,
) -> IngestSummary:
    """Ingest a run in one transaction; see the module docstring for the formats.

    Parameters
    ----------
    store
        An open :class:`~retrieval_lib.kb.store.KBStore`.
    results_path, golden_path, chunks_path, config_path
        The run's results JSONL, the golden YAML (snapshotted into the run), the chunk
        inventory JSONL and a JSON config (snapshotted as ``config_snapshot_json``).
    run_id
        Defaults to :func:`default_run_id`; an existing id is an error (for a run
        without aggregate, the message names ``retrieval-lib kb aggregate``).
    resume
        A run stored by an earlier ingest of the same results and golden set that stopped
        before its aggregate is not an error: its summary is returned with ``resumed`` set
        (nothing is written), and the caller completes the aggregate (``kb ingest`` does).
    chunker_version
        Stored as is; compare uses it to choose exact or fallback matching.
    suite
        Defaults to the golden file's stem.
    progress
        Called with the number of result lines written so far, every 2,000 lines,
        inside the open transaction.

    Raises
    ------
    IngestError, GoldenSetError, RunExistsError
        The database is unchanged.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "g.yaml").write_text("- {id: q1, query: hours?, expected_doc_ids: [d1]}\\n")
    >>> _ = (d / "r.jsonl").write_text('{"query_id": "q1", "hits": []}\\n')
    >>> with KBStore(d / "eval.sqlite") as store:
    ...     ingest_run(store, d / "r.jsonl", d / "g.yaml", run_id="r1").results
    1
    """
    if run_id:
        check_run_id(run_id)
    results_file = Path(results_path)
    golden = load_golden(golden_path)
    inventory = read_chunk_inventory(chunks_path) if chunks_path is not None else None
    config = _read_config(Path(config_path)) if config_path is not None else None
    results_sha = _sha256(results_file)
    run_id = run_id or default_run_id(results_file, results_sha)
    if store.has_run(run_id):
        return _resume_or_refuse(store, run_id, results_sha, golden, resume=resume)
    snapshot, warnings = _snapshot_golden(golden, inventory)

    with store.transaction(), paused_gc():
        suite = suite if suite is not None else Path(golden_path).stem
        _insert_run_row(store, run_id, suite, chunker_version, config, snapshot, inventory)
        written, missing = _insert_results(store, run_id, results_file, golden, inventory, progress)
        ingest_info = {
            "results_path": str(results_file),
            "results_sha256": results_sha,
            "results": written,
            "chunks_path": None if chunks_path is None else str(chunks_path),
            "chunks": 0 if inventory is None else len(inventory),
            "config_path": None if config_path is None else str(config_path),
            "golden_path": str(golden_path),
            "golden_sha256": golden.sha256,
            "missing_query_count": len(missing),
            "missing_query_ids": missing[:_MAX_LISTED],
            "warnings": warnings[:_MAX_LISTED],
        }
        # Where the run came from (eval_runs.ingest_json): the ingest's last write.
        store.conn.execute(
            "UPDATE eval_runs SET ingest_json = ? WHERE run_id = ?",
            (orjson.dumps(ingest_info, option=orjson.OPT_SORT_KEYS).decode(), run_id),
        )
    return IngestSummary(
        run_id=run_id,
        results=written,
        chunks=0 if inventory is None else len(inventory),
        golden_queries=len(golden),
        missing_queries=len(missing),
        results_sha256=results_sha,
        warnings=tuple(warnings),
    )

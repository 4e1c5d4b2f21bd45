"""What a study reads of each event document, kept per run at evaluate time.

A study needs, of every event document, one row per tool call (:data:`EVENT_COLUMNS`: the
tool, its targets, the ground-truth files it matched and surfaced first, the time and
tokens it is credited with) and a few trial-level values the metrics table does not carry
(:data:`DOCUMENT_COLUMNS`). ``evaluate`` has every document in memory once; it computes
those rows there (:func:`document_rows`) and writes them beside the metrics table
(:class:`StudyRowsWriter`): ``study_events.parquet`` (the event rows without
``config_family``, which depends on the study's config mapping) and
``study_trials.parquet`` (one row per evaluated document). Both are hashed in the run's
completion record, so the study reads two small tables per run instead of decoding every
document again (``docs/contracts.md`` §6b).

Examples
--------
>>> from retrieval_lib.events.document import minimal_document
>>> doc = minimal_document(run_id="r", task_name="t", config_name="c")
>>> rows = document_rows(doc, "t.retrieval_events.json")
>>> rows["trial_id"], rows["values"]["has_ground_truth"], rows["events"]
('r/c/t', False, [])
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_lib.events.document import DOCUMENT_SUFFIX

__all__ = [
    "DOCUMENT_COLUMNS",
    "EVENT_COLUMNS",
    "STORED_EVENT_COLUMNS",
    "STUDY_EVENTS_FILENAME",
    "STUDY_TRIALS_FILENAME",
    "StudyRowsWriter",
    "document_rows",
    "document_values",
    "event_rows",
    "short_tool_name",
    "trial_id_of",
]

#: The run's event rows for the study (:data:`STORED_EVENT_COLUMNS`).
STUDY_EVENTS_FILENAME = "study_events.parquet"
#: The run's trial-level document values for the study (``trial_id`` +
#: :data:`DOCUMENT_COLUMNS`).
STUDY_TRIALS_FILENAME = "study_trials.parquet"

#: Columns of ``Study.events`` (one row per tool call), in order.
EVENT_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "run_id",
    "config_name",
    "config_family",
    "task_name",
    "model",
    "step_index",
    "tool_name",
    "tool",
    "tool_category",
    "is_mcp",
    "is_subagent",
    "is_error",
    "n_targets",
    "target_files",
    "hits_ground_truth",
    "matched_ground_truth_files",
    "first_found_ground_truth_files",
    "elapsed_seconds",
    "cumulative_tokens",
    "attributed_seconds",
    "attributed_tokens",
)
#: Columns of ``study_events.parquet``: :data:`EVENT_COLUMNS` without ``config_family``.
STORED_EVENT_COLUMNS: tuple[str, ...] = tuple(c for c in EVENT_COLUMNS if c != "config_family")
_FAMILY_AT = EVENT_COLUMNS.index("config_family")
#: Columns read from each document into ``Study.trials`` (beside the metrics table).
DOCUMENT_COLUMNS: tuple[str, ...] = (
    "trace_source",
    "transcript_truncated",
    "has_ground_truth",
    "ground_truth_source",
    "ground_truth_confidence",
    "n_ground_truth_files",
    "ground_truth_files",
    "output_tokens_placeholder",
    "harness_version_source",
)
#: Columns holding a tuple of paths (a list in Parquet).
LIST_COLUMNS = (
    "target_files",
    "matched_ground_truth_files",
    "first_found_ground_truth_files",
    "ground_truth_files",
)


def short_tool_name(tool_name: str) -> str:
    """The tool's name without its MCP server prefix and Sourcegraph ``sg_`` infix.

    Examples
    --------
    >>> short_tool_name("mcp__sourcegraph__sg_keyword_search"), short_tool_name("Read")
    ('keyword_search', 'Read')
    """
    name = str(tool_name)
    if name.startswith("mcp__"):
        name = name.split("__", 2)[-1]
        if name.startswith("sg_"):
            name = name[3:]
    return name


def _group_deltas(values: list[float | None], end: float | None) -> list[float]:
    """Each event's share of the growth of ``values`` until the next larger value.

    Consecutive events with the same value (parallel calls of one message) share the
    growth to the next distinct value equally; the last group grows to ``end`` (NaN when
    unknown or smaller). Unknown values give NaN.
    """
    out = [float("nan")] * len(values)
    i = 0
    n = len(values)
    while i < n:
        value = values[i]
        j = i + 1
        while j < n and values[j] == value:
            j += 1
        if value is not None:
            following = next((values[m] for m in range(j, n) if values[m] is not None), None)
            target = following if following is not None else end
            if target is not None and target >= value:
                share = (float(target) - float(value)) / (j - i)
                for m in range(i, j):
                    out[m] = share
        i = j
    return out


def event_rows(doc: Mapping[str, Any], trial_id: str, family: str) -> list[tuple[Any, ...]]:
    """The ``Study.events`` rows of one document (:data:`EVENT_COLUMNS` order).

    ``first_found_ground_truth_files`` lists the ground-truth files this call surfaced
    first in the trial (failed calls and writes surface nothing); ``attributed_seconds``
    and ``attributed_tokens`` are the growth of the elapsed time and of the running token
    total from this call to the next (parallel calls share it equally; the last call runs
    to the end of the agent's execution and its token total).
    """
    prov = doc["provenance"]
    outcome = doc.get("outcome") or {}
    events = sorted(doc["events"], key=lambda ev: ev["step_index"])
    seconds = _group_deltas(
        [ev.get("elapsed_seconds") for ev in events], outcome.get("agent_execution_seconds")
    )
    tokens = _group_deltas(
        [
            None if ev.get("cumulative_tokens") is None else float(ev["cumulative_tokens"])
            for ev in events
        ],
        None if outcome.get("total_tokens") is None else float(outcome["total_tokens"]),
    )
    seen: set[str] = set()
    rows = []
    for ev, sec, tok in zip(events, seconds, tokens, strict=True):
        matched = list(ev.get("matched_ground_truth_files") or [])
        retrieval = not ev.get("is_error") and ev["tool_category"] != "file_write"
        first = [f for f in matched if f not in seen] if retrieval else []
        seen.update(first)
        rows.append(
            (
                trial_id,
                prov["run_id"],
                prov["config_name"],
                family,
                prov["task_name"],
                prov.get("model"),
                ev["step_index"],
                ev["tool_name"],
                short_tool_name(ev["tool_name"]),
                ev["tool_category"],
                bool(ev["is_mcp"]),
                bool(ev.get("is_subagent", False)),
                bool(ev.get("is_error") or False),
                len(ev["target_files"]),
                tuple(ev["target_files"]),
                bool(ev["hits_ground_truth"]),
                tuple(matched),
                tuple(first),
                ev.get("elapsed_seconds"),
                ev.get("cumulative_tokens"),
                sec,
                tok,
            )
        )
    return rows


def document_values(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`DOCUMENT_COLUMNS` values of one document."""
    coverage = doc["coverage"]
    gt = doc["ground_truth"]
    outcome = doc.get("outcome") or {}
    prov = doc["provenance"]
    return {
        "trace_source": coverage.get("trace_source"),
        "transcript_truncated": bool(coverage.get("transcript_truncated") or False),
        "has_ground_truth": bool(coverage.get("has_ground_truth")),
        "ground_truth_source": gt.get("source"),
        "ground_truth_confidence": gt.get("confidence"),
        "n_ground_truth_files": len(gt.get("files") or []),
        "ground_truth_files": tuple(gt.get("files") or ()),
        "output_tokens_placeholder": bool(outcome.get("output_tokens_placeholder") or False),
        "harness_version_source": prov.get("harness_version_source"),
    }


def trial_id_of(run_id: Any, config: Any, document: str) -> str:
    """A study's trial id: ``<run>/<config>/<document name without its suffix>``.

    >>> trial_id_of("r", "c", "t__1.retrieval_events.json")
    'r/c/t__1'
    """
    return f"{run_id}/{config}/{document.removesuffix(DOCUMENT_SUFFIX)}"


def document_rows(doc: Mapping[str, Any], source_document: str) -> dict[str, Any]:
    """What the study reads of one document named ``source_document``: its trial id,
    its :func:`document_values` and its event rows (:data:`STORED_EVENT_COLUMNS` order)."""
    prov = doc["provenance"]
    trial_id = trial_id_of(prov["run_id"], prov["config_name"], source_document)
    rows = event_rows(doc, trial_id, "")
    return {
        "trial_id": trial_id,
        "values": document_values(doc),
        "events": [row[:_FAMILY_AT] + row[_FAMILY_AT + 1 :] for row in rows],
    }


def _schemas() -> tuple[Any, Any]:
    import pyarrow as pa

    text, paths = pa.string(), pa.list_(pa.string())
    types = {
        "step_index": pa.int64(),
        "is_mcp": pa.bool_(),
        "is_subagent": pa.bool_(),
        "is_error": pa.bool_(),
        "n_targets": pa.int64(),
        "hits_ground_truth": pa.bool_(),
        "elapsed_seconds": pa.float64(),
        "cumulative_tokens": pa.float64(),
        "attributed_seconds": pa.float64(),
        "attributed_tokens": pa.float64(),
        "transcript_truncated": pa.bool_(),
        "has_ground_truth": pa.bool_(),
        "n_ground_truth_files": pa.int64(),
        "output_tokens_placeholder": pa.bool_(),
    }

    def field(name: str) -> Any:
        return pa.field(name, paths if name in LIST_COLUMNS else types.get(name, text))

    events = pa.schema([field(c) for c in STORED_EVENT_COLUMNS])
    trials = pa.schema([field("trial_id"), *(field(c) for c in DOCUMENT_COLUMNS)])
    return events, trials


def _batch(schema: Any, columns: Sequence[Sequence[Any]]) -> Any:
    """One record batch of ``columns`` (a non-text value of a text column as its text)."""
    import pyarrow as pa

    def texts(values: Sequence[Any]) -> list[Any]:
        return [v if v is None or isinstance(v, str) else str(v) for v in values]

    arrays = [
        pa.array(texts(values) if f.type == pa.string() else list(values), type=f.type)
        for f, values in zip(schema, columns, strict=True)
    ]
    return pa.record_batch(arrays, schema=schema)


#: Rows buffered before they are written as one Parquet row group.
ROW_GROUP_ROWS = 65_536


class _StreamedTable:
    """One Parquet file written a row group at a time to a temporary file in the target's
    folder, renamed into place when finished (an atomic write that never holds the table)."""

    def __init__(self, target: Path, schema: Any) -> None:
        self.target, self.schema = target, schema
        self._batches: list[Any] = []
        self._rows = 0
        self._writer: Any = None
        self._tmp: str | None = None

    def add(self, batch: Any) -> None:
        self._batches.append(batch)
        self._rows += batch.num_rows
        if self._rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if self._writer is None:
            import secrets

            from retrieval_lib.io import temp_prefix

            self.target.parent.mkdir(parents=True, exist_ok=True)
            # a new name (created with the mode an ordinary open() gives), as mkstemp's
            self._tmp = str(
                self.target.parent / f"{temp_prefix(self.target.name)}{secrets.token_hex(4)}.tmp"
            )
            self._writer = pq.ParquetWriter(self._tmp, self.schema)
        if self._batches:
            table = pa.Table.from_batches(self._batches, schema=self.schema)
            self._writer.write_table(table, row_group_size=max(1, table.num_rows))
        self._batches, self._rows = [], 0

    def finish(self) -> Path:
        self._flush()
        self._writer.close()
        self._writer = None
        os.replace(str(self._tmp), self.target)
        return self.target

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            Path(str(self._tmp)).unlink(missing_ok=True)
        self._writer, self._batches = None, []


class StudyRowsWriter:
    """Collects :func:`document_rows` a batch at a time and writes
    ``study_events.parquet`` and ``study_trials.parquet`` into ``events_dir``, atomically
    (temporary files renamed when finished); rows are held as Arrow columns and written
    :data:`ROW_GROUP_ROWS` at a time, so memory does not grow with the run. Without
    pyarrow it writes nothing (the study then decodes the documents).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from retrieval_lib.events.document import minimal_document
    >>> writer = StudyRowsWriter(pathlib.Path(tempfile.mkdtemp()))
    >>> writer.add([document_rows(minimal_document(run_id="r", task_name="t",
    ...                                           config_name="c"), "t.retrieval_events.json")])
    >>> [p.name for p in writer.write()]
    ['study_events.parquet', 'study_trials.parquet']
    """

    def __init__(self, events_dir: Path) -> None:
        import importlib.util

        self.events_dir = Path(events_dir)
        self.enabled = importlib.util.find_spec("pyarrow") is not None
        self._tables: tuple[_StreamedTable, _StreamedTable] | None = None

    def _streams(self) -> tuple[_StreamedTable, _StreamedTable]:
        if self._tables is None:
            events_schema, trials_schema = _schemas()
            self._tables = (
                _StreamedTable(self.events_dir / STUDY_EVENTS_FILENAME, events_schema),
                _StreamedTable(self.events_dir / STUDY_TRIALS_FILENAME, trials_schema),
            )
        return self._tables

    def add(self, documents: Sequence[Mapping[str, Any]]) -> None:
        """Add the :func:`document_rows` of a batch of documents."""
        if not self.enabled or not documents:
            return
        events, trials = self._streams()
        rows = [row for doc in documents for row in doc["events"]]
        columns = list(zip(*rows, strict=True)) if rows else [()] * len(STORED_EVENT_COLUMNS)
        events.add(_batch(events.schema, columns))
        trial_columns: list[list[Any]] = [[doc["trial_id"] for doc in documents]]
        trial_columns += [[doc["values"][c] for doc in documents] for c in DOCUMENT_COLUMNS]
        trials.add(_batch(trials.schema, trial_columns))

    def write(self) -> list[Path]:
        """Finish both tables (renamed into place); the paths written. Disabled (no
        pyarrow, or :meth:`discard` called): removes an older evaluation's tables."""
        if not self.enabled:
            self.discard()
            for name in (STUDY_EVENTS_FILENAME, STUDY_TRIALS_FILENAME):
                (self.events_dir / name).unlink(missing_ok=True)
            return []
        return [table.finish() for table in self._streams()]

    def discard(self) -> None:
        """Write nothing: drop the rows and any temporary file."""
        self.enabled = False
        for table in self._tables or ():
            table.discard()
        self._tables = None

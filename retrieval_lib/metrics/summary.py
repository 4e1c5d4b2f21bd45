"""The tidy metrics table, the run summary and the run-level ``evaluate`` pipeline.

* :func:`metrics_table` turns metrics records (:func:`~retrieval_lib.metrics.stages.
  evaluate_documents`) into one DataFrame row per document, columns as
  ``docs/contracts.md`` §3 (NaN where a metric is not computable).
* :func:`summarize_run` aggregates the records into ``run_retrieval_summary.json``:
  counts, mean / median / sample std / n of every metric per config and per config × slice,
  and the error-taxonomy distribution. NaN values are left out and every figure says its n.
* :func:`evaluate_run` does all of it for one run folder and writes the files atomically.

Aggregation policy: every document (trial) is one observation. When a (task, config) pair
has several trials, each counts; ``counts.by_config.<config>.tasks`` says how many distinct
tasks stand behind the figures.

One module: the table, the summary and the writer (streamed by row groups through
:mod:`retrieval_lib.metrics.table_stream`) share one column model. The reader is
:mod:`retrieval_lib.metrics.table_files`.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from retrieval_lib import __version__
from retrieval_lib.completion import finish_evaluate
from retrieval_lib.errors import InputError, MetricError, RetrievalLibError
from retrieval_lib.events.document import EVENTS_DIRNAME, LEFT_OUT_FILENAME
from retrieval_lib.events.study_rows import StudyRowsWriter
from retrieval_lib.io import (
    atomic_write_bytes,
    atomic_write_text,
    dumps_json,
    lies_outside,
)
from retrieval_lib.metrics.stages import (
    DEFAULT_K,
    EVENTS_SUFFIX,
    TAXONOMY_LABELS,
    evaluate_documents,
    metrics_filename,
    normalize_k,
    ranking_metric_names,
    shipped_schema,
    validate_against,
)
from retrieval_lib.metrics.table_stream import ColumnSpool, write_parquet_groups

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EVENTS_DIRNAME",
    "IDENTITY_COLUMNS",
    "TABLE_OUTCOME_COLUMNS",
    "SUMMARY_FILENAME",
    "SUMMARY_SCHEMA_VERSION",
    "TABLE_BASENAME",
    "TEXT_COLUMNS",
    "EvaluateResult",
    "evaluate_document_files",
    "evaluate_run",
    "events_dir_of",
    "find_events_roots",
    "table_metric_columns",
    "metrics_table",
    "summarize_run",
    "summary_record",
    "write_run_outputs",
    "summary_schema",
    "validate_summary",
]

SUMMARY_SCHEMA_VERSION = "1.0"
SUMMARY_FILENAME = "run_retrieval_summary.json"
TABLE_BASENAME = "retrieval_metrics"
#: Decimal places of floats in the written JSON (values are rounded only when written).
WRITE_NDIGITS = 6

IDENTITY_COLUMNS: tuple[str, ...] = (
    "run_id",
    "config_name",
    "task_name",
    "trial_name",
    "benchmark",
    "model",
    "harness_version",
    "harness_version_source",
    "harness_version_unknown_reason",
    "is_latest_trial",
    "computable",
    "non_computable_reason",
    "candidate_set_size_slice",
    "evidence_type",
)
#: The outcome and provenance columns the writer puts in the metrics table, in order (the
#: outcomes an analysis uses are :data:`retrieval_lib.stats.columns.OUTCOME_COLUMNS`).
TABLE_OUTCOME_COLUMNS: tuple[str, ...] = (
    "reward",
    "passed",
    "errored",
    "timed_out",
    "agent_execution_seconds",
    "total_tokens",
    "cost_usd",
    "tokens_source",
    "cost_source",
    "started_at",
    # True when the document's output_tokens is a sum of stream placeholders (contracts §1)
    "output_tokens_placeholder",
)
_BOOLEAN_COLUMNS = (
    "is_latest_trial",
    "computable",
    "passed",
    "errored",
    "timed_out",
    "output_tokens_placeholder",
)
#: Identity and provenance columns that hold text: a reader of the CSV table reads them as
#: text (so a harness version "2.10" stays "2.10").
TEXT_COLUMNS: tuple[str, ...] = (
    *(c for c in IDENTITY_COLUMNS if c not in _BOOLEAN_COLUMNS),
    "tokens_source",
    "cost_source",
)
_FUNNEL_COLUMNS = (
    "funnel.surfaced_files",
    "funnel.surfaced_gt_hits",
    "funnel.read_files",
    "funnel.read_gt_hits",
    "funnel.edited_files",
    "funnel.edited_gt_hits",
)
_UTIL_COLUMNS = {
    "util.read_overlap": "util_read_overlap_with_relevant_files",
    "util.write_overlap_proxy": "util_write_overlap_with_relevant_files_proxy",
    "util.write_overlap_expected_edit": "util_write_overlap_with_expected_edit_files",
    "util.read_before_write_ratio": "util_read_before_write_ratio",
}
#: Slice dimensions of the summary, by identity column.
SLICE_COLUMNS = ("candidate_set_size_slice", "evidence_type")


def table_metric_columns(
    k: Iterable[int] = DEFAULT_K, *, include_taxonomy: bool = True
) -> list[str]:
    """The numeric metric columns the metrics table is written with for cut-offs ``k``, in order.

    What the writer puts in the table; to find the metric columns a table read back holds,
    see :func:`retrieval_lib.stats.columns.find_metric_columns`.

    Examples
    --------
    >>> table_metric_columns([5])[:6]
    ['file.P@5', 'file.R@5', 'file.F1@5', 'file.nDCG@5', 'file.AP', 'file.RR']
    """
    names = ranking_metric_names(k)
    columns = [f"file.{n}" for n in names]
    columns += ["file.recall", "file.context_efficiency"]
    columns += ["file.ttfr_seconds", "file.ttfr_steps", "file.ttfr_tokens"]
    columns += [f"read.{n}" for n in names] + ["read.recall", "read.context_efficiency"]
    columns += list(_FUNNEL_COLUMNS)
    columns += ["chunk.recall", "chunk.line_overlap_recall", "chunk.n_chunks"]
    columns += list(_UTIL_COLUMNS)
    columns += ["candidate_set_size"]
    if include_taxonomy:
        columns += [f"taxonomy.{label}" for label in TAXONOMY_LABELS]
    return columns


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _ranking_values(
    block: Mapping[str, Any], prefix: str, names: Sequence[str]
) -> dict[str, float]:
    if not block.get("computable"):
        return {}
    row = {f"{prefix}.{n}": _number(block["metrics"].get(n)) for n in names}
    row[f"{prefix}.recall"] = _number(block["file_recall"])
    row[f"{prefix}.context_efficiency"] = _number(block["context_efficiency"])
    return row


def _record_row(record: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    prov, calib = record["provenance"], record["calibration"]
    row: dict[str, Any] = {
        "run_id": prov.get("run_id"),
        "config_name": prov.get("config_name"),
        "task_name": prov.get("task_name"),
        "trial_name": prov.get("trial_name"),
        "benchmark": prov.get("benchmark"),
        "model": prov.get("model"),
        "harness_version": prov.get("harness_version"),
        "harness_version_source": prov.get("harness_version_source"),
        "harness_version_unknown_reason": prov.get("harness_version_unknown_reason"),
        "is_latest_trial": prov.get("is_latest_trial"),
        "computable": record["computable"],
        "non_computable_reason": record["non_computable_reason"],
        "candidate_set_size_slice": calib.get("candidate_set_size_slice"),
        "evidence_type": calib.get("evidence_type"),
    }
    row.update(_ranking_values(record["file_level"], "file", names))
    ttfr = record["file_level"].get("ttfr") or {}
    if ttfr.get("computable"):
        row["file.ttfr_seconds"] = _number(ttfr["seconds"])
        row["file.ttfr_steps"] = _number(ttfr["steps"])
        row["file.ttfr_tokens"] = _number(ttfr["tokens"])
    row.update(_ranking_values(record["read_level"], "read", names))
    funnel = record["funnel"]
    if funnel.get("computable"):
        for stage in ("surfaced", "read", "edited"):
            row[f"funnel.{stage}_files"] = _number(funnel[stage]["files"])
            row[f"funnel.{stage}_gt_hits"] = _number(funnel[stage]["ground_truth_hits"])
    chunk = record["chunk_level"]
    row["chunk.n_chunks"] = _number(chunk.get("n_chunks"))
    if chunk.get("computable"):
        row["chunk.recall"] = _number(chunk["recall"])
        overlap = chunk["line_overlap"]
        if overlap.get("computable"):
            row["chunk.line_overlap_recall"] = _number(overlap["recall"])
    util = record["utilization"]
    for column, key in _UTIL_COLUMNS.items():
        row[column] = _number(util.get(key))
    row["candidate_set_size"] = _number(calib.get("candidate_set_size"))
    taxonomy = record["error_taxonomy"]
    if taxonomy.get("computable"):
        for label in TAXONOMY_LABELS:
            row[f"taxonomy.{label}"] = _number(taxonomy["counts"][label])
    outcome = record.get("outcome") or {}
    for column in TABLE_OUTCOME_COLUMNS:
        row[column] = outcome.get(column)
    row["source_document"] = record.get("source_document")
    return row


def _common_k(records: Sequence[Mapping[str, Any]]) -> tuple[int, ...]:
    ks = {tuple(r["k_values"]) for r in records}
    if len(ks) > 1:
        raise MetricError(f"records were computed with different cut-offs: {sorted(ks)}")
    return normalize_k(ks.pop()) if ks else DEFAULT_K


def metrics_table(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per metrics record: identity, metric and outcome columns (contracts §3).

    Metric columns are float64 with NaN where a value is not computable; boolean
    columns use pandas' nullable ``boolean`` dtype; the last column, ``source_document``,
    names the events document.

    Examples
    --------
    >>> from retrieval_lib.events.document import minimal_document
    >>> from retrieval_lib.metrics.stages import evaluate_documents
    >>> records = evaluate_documents([minimal_document(run_id="r", task_name="t",
    ...                                                config_name="c")])
    >>> table = metrics_table(records)
    >>> table.loc[0, "computable"], bool(table["file.P@5"].isna().all())
    (np.False_, True)
    """
    ks = _common_k(records)
    return _batch_frame(_columns_of(records, ks), columns=_table_columns(ks))


def _columns_of(records: Sequence[Mapping[str, Any]], ks: tuple[int, ...]) -> dict[str, np.ndarray]:
    """The table's columns of ``records``: metrics and number outcomes float64 (NaN where
    absent or not a number), the others objects (:func:`_batch_frame` types them)."""
    import pandas as pd

    names = ranking_metric_names(ks)
    rows = [_record_row(r, names) for r in records]
    nan = float("nan")
    batch: dict[str, np.ndarray] = {}
    for column in table_metric_columns(ks):  # floats (``_number``) or absent: NaN
        batch[column] = np.fromiter((row.get(column, nan) for row in rows), np.float64, len(rows))
    part = pd.DataFrame.from_records(rows, columns=list(_FLOAT_OUTCOMES))
    for column in _FLOAT_OUTCOMES:  # as found in the trial's outcome: converted
        batch[column] = pd.to_numeric(part[column], errors="coerce").astype("float64").to_numpy()
    columns = _table_columns(ks)
    for column in columns:
        if column not in batch:
            batch[column] = _object_array([row[column] for row in rows])
    return {c: batch[c] for c in columns}


def _stats(values: np.ndarray) -> dict[str, Any]:
    """mean, median, sample std (ddof=1) and n of the non-NaN values."""
    finite = values[~np.isnan(values)]
    n = int(finite.size)
    return {
        "mean": float(finite.mean()) if n else None,
        "median": float(np.median(finite)) if n else None,
        "std": float(finite.std(ddof=1)) if n >= 2 else None,
        "n": n,
    }


def _missing(value: Any) -> bool:
    """What pandas' ``dropna`` drops: None, NaN, NA, NaT."""
    import pandas as pd

    return bool(pd.isna(value))


#: Reads one column of a run's metrics table: float64 for numbers, object otherwise.
ColumnReader = Callable[[str], np.ndarray]


def _frame_reader(frame: pd.DataFrame) -> ColumnReader:
    """A :data:`ColumnReader` of a table in memory."""

    def read(column: str) -> np.ndarray:
        series = frame[column]
        if column in SLICE_COLUMNS or column == "config_name":
            return series.to_numpy(dtype=object)
        return series.to_numpy(dtype=np.float64, na_value=np.nan)

    return read


def _taxonomy_distribution(read: ColumnReader, groups: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Per group (a row mask per config): the error-taxonomy distribution."""
    first = read(f"taxonomy.{TAXONOMY_LABELS[0]}")
    computable = {g: rows & ~np.isnan(first) for g, rows in groups.items()}
    out: dict[str, Any] = {
        g: {"n": int(rows.sum()), "labels": {}} for g, rows in computable.items()
    }
    for label in TAXONOMY_LABELS:
        values = read(f"taxonomy.{label}")
        for g, rows in computable.items():
            counts = values[rows]
            out[g]["labels"][label] = {
                "tasks_with_label": int((counts > 0).sum()),
                "total_files": int(counts.sum()),
                "files_per_task": _stats(counts),
            }
    return out


def summarize_run(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate metrics records into the content of ``run_retrieval_summary.json``.

    Returns counts (documents, computable, skipped by reason code, chunk-capable, per
    config), statistics of every metric per config and per config × slice (``mean``,
    ``median``, sample ``std`` with ddof=1, ``n``; NaN excluded, null when n is 0 or, for
    std, 1) and the error-taxonomy distribution per config. Values are not rounded here.

    Examples
    --------
    >>> from retrieval_lib.events.document import minimal_document
    >>> from retrieval_lib.metrics.stages import evaluate_documents
    >>> summary = summarize_run(evaluate_documents(
    ...     [minimal_document(run_id="r", task_name="t", config_name="c")]))
    >>> summary["counts"]["documents"], summary["counts"]["skipped"]["by_reason"]
    (1, {'no_trace;no_ground_truth': 1})
    """
    ks = _common_k(records)
    return _summarize(_frame_reader(metrics_table(records)), [_count_facts(r) for r in records], ks)


class _Facts(NamedTuple):
    """What the summary's counts read of one record (a few fields, not the record)."""

    config_name: Any
    task_name: Any
    run_id: Any
    computable: bool
    code: Any
    chunk_capable: bool


def _count_facts(r: Mapping[str, Any]) -> _Facts:
    prov = r["provenance"]
    return _Facts(
        prov["config_name"],
        prov["task_name"],
        prov["run_id"],
        bool(r["computable"]),
        None if r["computable"] else r["non_computable_code"],
        bool(r["coverage"].get("has_chunk_ground_truth") and r["chunk_level"].get("n_chunks")),
    )


def _summarize(
    read: ColumnReader, records: Sequence[_Facts], ks: tuple[int, ...]
) -> dict[str, Any]:
    """The summary from a reader of the run's table (a column at a time: memory of a
    few columns, not of the table) and each record's :class:`_Facts`."""
    numeric = table_metric_columns(ks, include_taxonomy=False)

    def counts_of(subset: Sequence[_Facts]) -> dict[str, Any]:
        skipped = Counter(r.code for r in subset if not r.computable)
        return {
            "documents": len(subset),
            "computable": sum(1 for r in subset if r.computable),
            "chunk_capable": sum(1 for r in subset if r.chunk_capable),
            "tasks": len({r.task_name for r in subset}),
            "skipped": {"total": sum(skipped.values()), "by_reason": dict(sorted(skipped.items()))},
        }

    configs = sorted({str(r.config_name) for r in records})
    by_config: dict[str, list[_Facts]] = {c: [] for c in configs}
    for r in records:
        if r.config_name in by_config:
            by_config[r.config_name].append(r)
    config_names = read("config_name")
    groups = {c: np.asarray(config_names == c, dtype=bool) for c in configs}
    # per config and slice dimension: each value's rows
    slice_rows: dict[str, dict[str, dict[str, np.ndarray]]] = {c: {} for c in configs}
    for dimension in SLICE_COLUMNS:
        column = read(dimension)
        for config, rows in groups.items():
            present = column[rows]
            found = sorted({v for v in present.tolist() if not _missing(v)})
            slice_rows[config][dimension] = {
                str(v): rows & np.asarray(column == v, dtype=bool) for v in found
            }
    metrics: dict[str, Any] = {c: {} for c in configs}
    slices: dict[str, Any] = {
        c: {
            d: {v: {"documents": int(m.sum()), "metrics": {}} for v, m in by_value.items()}
            for d, by_value in dims.items()
        }
        for c, dims in slice_rows.items()
    }
    for name in numeric:
        values = read(name)
        for config, rows in groups.items():
            metrics[config][name] = _stats(values[rows])
            for dimension, by_value in slice_rows[config].items():
                for value, value_rows in by_value.items():
                    cell = slices[config][dimension][value]["metrics"]
                    cell[name] = _stats(values[value_rows])
    taxonomy = _taxonomy_distribution(read, groups)
    overall = counts_of(records)
    overall["by_config"] = {c: counts_of(by_config[c]) for c in configs}
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "generator": {"name": "retrieval_lib", "version": __version__},
        "runs": sorted({str(r.run_id) for r in records}),
        "k_values": list(ks),
        "statistics": {
            "std": "sample standard deviation (ddof=1); null when n < 2",
            "missing": "non-computable values are excluded, never counted as 0; n is the "
            "number of values used",
            "unit": "one document (trial) is one observation",
            "mrr_map": "MRR is the mean of file.RR and MAP the mean of file.AP over the "
            "computable documents of a config",
        },
        "counts": overall,
        "metrics": metrics,
        "slices": slices,
        "error_taxonomy": taxonomy,
    }


def summary_schema() -> dict[str, Any]:
    """JSON Schema of ``run_retrieval_summary.json`` (shipped in the package)."""
    return shipped_schema("run_retrieval_summary")


def validate_summary(summary: Any, *, where: str = "run summary") -> None:
    """Validate a run summary (as written, i.e. JSON-safe) against the shipped schema.

    Raises
    ------
    SchemaError
        With the first failing location.
    """
    validate_against(summary, summary_schema(), where)


@dataclass(frozen=True)
class EvaluateResult:
    """What :func:`evaluate_run` computed and wrote for one events folder."""

    events_dir: Path
    #: Number of documents evaluated (invalid ones excluded).
    documents: int
    #: Number of documents with computable file-level metrics.
    computable: int
    #: The metrics files written beside the documents (empty in a result that a task
    #: of :mod:`retrieval_lib.run_many` sent back: :meth:`without_paths`).
    metrics_paths: list[Path]
    summary_path: Path
    table_path: Path
    seconds: float
    failures: list[tuple[Path, str]] = field(default_factory=list)
    #: Number of metrics files written beside the documents.
    metrics_files: int = -1

    def __post_init__(self) -> None:
        if self.metrics_files < 0:
            object.__setattr__(self, "metrics_files", len(self.metrics_paths))

    def without_paths(self) -> EvaluateResult:
        """This result without the list of metrics files (their number kept): what a
        worker sends back, small whatever the run's size."""
        return replace(self, metrics_paths=[])


def events_dir_of(path: Path) -> Path:
    """The events folder of ``path``: ``path/retrieval_events`` when there is one, else
    ``path`` itself (already an events folder).

    Raises
    ------
    InputError
        ``path`` is not a folder, or its ``retrieval_events`` is a symlink out of it.

    Examples
    --------
    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp())
    >>> events_dir_of(run) == run
    True
    >>> (run / "retrieval_events").mkdir()
    >>> events_dir_of(run).name
    'retrieval_events'
    """
    if not path.is_dir():
        raise InputError(f"not a folder: {path}")
    nested = path / EVENTS_DIRNAME
    if nested.is_dir():
        _refuse_link_out(nested, path)
        return nested
    return path


def _refuse_link_out(events_dir: Path, run_dir: Path) -> None:
    """Evaluate writes beside the documents: never through a link that leaves the run."""
    if lies_outside(events_dir, run_dir):
        raise InputError(
            f"{events_dir} is a symlink to {os.path.realpath(events_dir)}, outside the run "
            f"folder {run_dir}: refusing to write the metrics through it; remove the link"
        )


def _walk_documents(
    path: Path, left_out: Any = None, evaluated: set[Path] | None = None
) -> list[Path]:
    """Every entry named like a document below ``path``; symlinked folders not followed.
    A folder that cannot be listed and a symlinked ``retrieval_events`` are recorded in
    ``left_out`` (a ``runs.LeftOut``). With ``evaluated``, an evaluated ``retrieval_events`` folder (:func:`_has_record`) is
    added to it and not searched (thousands of evaluated runs: one entry each)."""
    found: list[Path] = []

    def unreadable(exc: OSError) -> None:
        if left_out is not None:
            left_out.add(exc.filename or str(path), f"cannot be listed ({exc.strerror or exc})")

    for folder, dirnames, filenames in os.walk(path, onerror=unreadable):
        base = Path(folder)
        if evaluated is not None and EVENTS_DIRNAME in dirnames:
            events = base / EVENTS_DIRNAME
            if not events.is_symlink() and _has_record(events):
                evaluated.add(events)
                dirnames.remove(EVENTS_DIRNAME)
        for name in dirnames:
            if name == EVENTS_DIRNAME and left_out is not None and (base / name).is_symlink():
                left_out.add(str(base / name), "a symlink; not followed")
            if name.endswith(EVENTS_SUFFIX) and (base / name).is_symlink():
                found.append(base / name)  # a link to a folder: named when loaded
        found.extend(base / name for name in filenames if name.endswith(EVENTS_SUFFIX))
    return sorted(found)


def _has_record(events_dir: Path) -> bool:
    """An evaluated events folder: it holds a completion record and a run summary."""
    from retrieval_lib.completion import COMPLETION_FILENAME

    return (events_dir / COMPLETION_FILENAME).is_file() and (
        events_dir / SUMMARY_FILENAME
    ).is_file()


def find_events_roots(paths: Iterable[str | Path], left_out: Any = None) -> list[Path]:
    """Events folders below ``paths``: a run folder, an events folder or a folder of runs.

    An events folder holds ``<config>/<task>.retrieval_events.json`` (or the documents
    directly); a run folder holds an ``retrieval_events/`` events folder. Searching a
    folder of runs, a sub-folder that cannot be listed is recorded in ``left_out`` (a
    :class:`~retrieval_lib.runs.LeftOut`), never skipped unseen.

    Raises
    ------
    InputError
        A path is not a folder, holds no documents, or is itself a config folder.
    """
    roots: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise InputError(f"not a folder: {path}")
        if (path / EVENTS_DIRNAME).is_dir():
            roots.add(events_dir_of(path))
            continue
        if path.name == EVENTS_DIRNAME and not path.is_symlink() and _has_record(path):
            roots.add(path)  # an evaluated events folder with its record: not searched
            continue
        if path.resolve().parent.name == EVENTS_DIRNAME:
            raise InputError(
                f"{path} is a config folder; pass the events folder above it "
                "so the run summary covers every config"
            )
        evaluated: set[Path] = set()
        found = _walk_documents(path, left_out, evaluated)
        roots.update(evaluated)
        if not found and not evaluated:
            raise InputError(
                f"no retrieval-event documents (*{EVENTS_SUFFIX}) found under {path}; "
                "run `retrieval-lib normalize` first"
            )
        # documents sit in <events>/<config>/ (or directly in a flat events folder)
        roots.update(path if doc.parent == path else doc.parent.parent for doc in found)
    return sorted(roots)


def summary_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a metrics record that :func:`metrics_table` and :func:`summarize_run` read.

    Small (no file lists), so a worker can send it on instead of the whole record; both
    functions give the same result from it as from the full record. Every top-level
    value and the small blocks (``provenance``, ``coverage``, ``calibration``,
    ``outcome``) are kept whole; of the per-stage blocks, the fields the table reads.
    """

    def keep(block: Mapping[str, Any], keys: Sequence[str]) -> dict[str, Any]:
        return {key: block[key] for key in keys if key in block}

    ranking = ("computable", "metrics", "file_recall", "context_efficiency", "ttfr")
    out = {key: value for key, value in record.items() if key not in _STAGE_BLOCKS}
    out["file_level"] = keep(record["file_level"], ranking)
    out["read_level"] = keep(record["read_level"], ranking)
    out["funnel"] = keep(record["funnel"], ("computable", "surfaced", "read", "edited"))
    out["chunk_level"] = keep(
        record["chunk_level"], ("computable", "n_chunks", "recall", "line_overlap")
    )
    out["utilization"] = keep(record["utilization"], tuple(_UTIL_COLUMNS.values()))
    out["error_taxonomy"] = keep(record["error_taxonomy"], ("computable", "counts"))
    return out


#: Key of the :func:`~retrieval_lib.events.study_rows.document_rows` that
#: :func:`evaluate_document_files` adds to each summary record (written by the run table
#: as the study's per-run tables; never in a metrics file).
STUDY_KEY = "_study_rows"

#: Blocks of a metrics record that :func:`summary_record` cuts down to what is read.
_STAGE_BLOCKS = (
    "file_level",
    "read_level",
    "funnel",
    "chunk_level",
    "utilization",
    "error_taxonomy",
)


def evaluate_document_files(
    doc_paths: Sequence[Path], ks: Sequence[int]
) -> list[tuple[dict[str, Any] | None, str | None]]:
    """Documents (one kernel call for all): write their metrics files; return per document
    its :func:`summary_record` and ``None``, or ``None`` and the reason it failed to load.
    Each summary record carries, under :data:`STUDY_KEY`, the document's
    :func:`~retrieval_lib.events.study_rows.document_rows` (the run table writes them)."""
    from retrieval_lib.events.document import load_document
    from retrieval_lib.events.study_rows import document_rows

    docs: list[dict[str, Any]] = []
    loaded: list[Path] = []
    errors: dict[Path, str] = {}
    for doc_path in map(Path, doc_paths):
        try:
            docs.append(load_document(doc_path))
            loaded.append(doc_path)
        except RetrievalLibError as exc:
            errors[doc_path] = str(exc)
    records = evaluate_documents(docs, ks, source_names=[p.name for p in loaded]) if docs else []
    by_path = dict(zip(loaded, records, strict=True))
    for doc_path, record in by_path.items():
        atomic_write_text(
            doc_path.with_name(metrics_filename(doc_path.name)),
            dumps_json(record, ndigits=WRITE_NDIGITS),
        )
    # what the study reads of each document, while it is in memory (events.study_rows)
    study = {p: document_rows(doc, p.name) for p, doc in zip(loaded, docs, strict=True)}
    return [
        (summary_record(by_path[p] | {STUDY_KEY: study[p]}), None)
        if p in by_path
        else (None, errors[p])
        for p in map(Path, doc_paths)
    ]


def _write_table(frame: pd.DataFrame, events_dir: Path) -> tuple[Path, list[Path]]:
    """Write the table (Parquet, else CSV); return it and the dataset files written."""
    if importlib.util.find_spec("pyarrow") is not None:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        dataset = _write_dataset(frame, events_dir)
        table = atomic_write_bytes(events_dir / f"{TABLE_BASENAME}.parquet", buffer.getvalue())
        return table, dataset
    return atomic_write_text(events_dir / f"{TABLE_BASENAME}.csv", frame.to_csv(index=False)), []


#: Folder of the run's part of the partitioned metrics dataset (one file per config).
DATASET_DIRNAME = f"{TABLE_BASENAME}_dataset"


def dataset_file_name(config: str) -> str:
    """File name of a config's part of the metrics dataset: ``<config>.parquet``, or,
    when that exceeds the 255-byte name limit, the config's first bytes, ``~``, 16 hex
    digits of its SHA-256 and ``.parquet`` (distinct configs keep distinct files).

    Examples
    --------
    >>> dataset_file_name("mcp-remote-direct")
    'mcp-remote-direct.parquet'
    >>> name = dataset_file_name("c" * 250)
    >>> len(name.encode()), name[-25:]
    (200, '~b31bdc6c1e222c18.parquet')
    """
    import hashlib

    from retrieval_lib.io import NAME_MAX

    name = f"{config}.parquet"
    if len(os.fsencode(name)) <= NAME_MAX:
        return name
    digest = hashlib.sha256(os.fsencode(config)).hexdigest()[:16]
    head = config
    while len(os.fsencode(head)) > 200 - len(f"~{digest}.parquet"):
        head = head[:-1]
    return f"{head}~{digest}.parquet"


def _write_dataset(frame: pd.DataFrame, events_dir: Path) -> list[Path]:
    """The table again, one Parquet file per config: ``<events>/retrieval_metrics_dataset/
    <config>.parquet`` (every column kept, ``run_id`` and ``config_name`` included), so
    the ``retrieval_events`` folders of many runs form one dataset partitioned by run and
    config. Files of configs the run no longer has are removed. A config name too long
    for a file name (:func:`dataset_file_name`) gets a shortened one; readers take the
    config from the ``config_name`` column, never from the file name."""
    from retrieval_lib.io import safe_join

    folder = events_dir / DATASET_DIRNAME
    written = []
    for config in sorted({str(c) for c in frame["config_name"].dropna()}):
        part = frame[frame["config_name"] == config].reset_index(drop=True)
        buffer = io.BytesIO()
        part.to_parquet(buffer, index=False)
        written.append(
            atomic_write_bytes(safe_join(folder, dataset_file_name(config)), buffer.getvalue())
        )
    _remove_stale_parts(folder, written)
    return written


def _remove_stale_parts(folder: Path, written: list[Path]) -> None:
    """Remove the dataset files of configs the run no longer has."""
    if folder.is_dir():
        kept = {p.resolve() for p in written}
        for stale in folder.glob("*.parquet"):
            if stale.resolve() not in kept:
                stale.unlink()


def evaluate_run(path: str | Path, k: Sequence[int] = DEFAULT_K) -> EvaluateResult:
    """Evaluate every document of a run and write the metrics files, summary and table.

    Parameters
    ----------
    path
        A run folder (holding ``retrieval_events/``) or an events folder.
    k
        Cut-offs of the P/R/F1/nDCG metrics.

    Returns
    -------
    EvaluateResult
        Records, written paths and the documents that failed to load (with the error);
        a document that fails is reported, not silently dropped, and the rest still run.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from retrieval_lib.events.document import minimal_document, write_document
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "retrieval_events"
    >>> _ = write_document(minimal_document(run_id="r", task_name="t", config_name="c"),
    ...                    root / "c" / "t.retrieval_events.json")
    >>> result = evaluate_run(root.parent)
    >>> result.documents, result.computable, result.summary_path.name
    (1, 0, 'run_retrieval_summary.json')
    """
    from retrieval_lib.completion import begin_evaluate

    started = time.perf_counter()
    ks = normalize_k(k)
    events_dir = events_dir_of(Path(path))
    # refuses an incomplete normalisation or no documents; marks the evaluation
    # incomplete until the end
    doc_paths = begin_evaluate(events_dir)
    # a batch at a time: documents and records of one batch in memory, never the run's
    table = _RunTable(events_dir)
    for start in range(0, len(doc_paths), EVALUATE_BATCH):
        batch = doc_paths[start : start + EVALUATE_BATCH]
        table.add(batch, evaluate_document_files(batch, ks))
    return table.write(events_dir, len(doc_paths), started=started)


def read_left_out(events_dir: Path) -> list[dict[str, str]]:
    """The entries normalisation left out of this run (``[]`` when none were).

    Read from ``normalize_left_out.json`` and copied into the run summary as
    ``counts.left_out`` so that every report built on the summary can list them. A file
    that cannot be read is itself reported as a row.

    Examples
    --------
    >>> import tempfile
    >>> read_left_out(Path(tempfile.mkdtemp()))
    []
    """
    import json

    from retrieval_lib.io import read_regular_bytes

    path = events_dir / LEFT_OUT_FILENAME
    if not os.path.lexists(path):
        return []
    try:
        data = json.loads(read_regular_bytes(path))
        rows = data["left_out"]
        return [{"path": str(row["path"]), "reason": str(row["reason"])} for row in rows]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [{"path": LEFT_OUT_FILENAME, "reason": f"cannot be read ({exc})"}]


def write_run_outputs(
    events_dir: Path,
    doc_paths: Sequence[Path],
    outcomes: Sequence[tuple[dict[str, Any] | None, str | None]],
    *,
    started: float | None = None,
) -> EvaluateResult:
    """Write the run summary and the metrics table of an evaluated events folder.

    ``outcomes`` holds, per document of ``doc_paths``, its (summary) record and ``None``,
    or ``None`` and the reason it could not be loaded; the metrics files are already
    written. ``started`` is the :func:`time.perf_counter` value the evaluation began at.
    """
    table = _RunTable(events_dir)
    for start in range(0, len(doc_paths), EVALUATE_BATCH):
        table.add(
            doc_paths[start : start + EVALUATE_BATCH], outcomes[start : start + EVALUATE_BATCH]
        )
    return table.write(events_dir, len(doc_paths), started=started)


class _RunTable:
    """A run's metrics table and summary counts, built a batch of records at a time.

    Keeps per document a few counting fields (:class:`_Facts`) and its metrics path; the
    rows go to a temporary file (:class:`~retrieval_lib.metrics.table_stream.ColumnSpool`),
    from which the table and each config's dataset part are written by row groups; the
    summary is read back from the table a column at a time. The bytes are those of
    :func:`metrics_table` and :func:`summarize_run` over all records at once. Where a text
    value is not a string (or a boolean not a boolean) or pyarrow is missing, the table is
    built whole in memory instead.
    """

    def __init__(self, events_dir: Path) -> None:
        self.facts: list[_Facts] = []
        self.ks: set[tuple[int, ...]] = set()
        self.metrics_paths: list[Path] = []
        self.failures: list[tuple[Path, str]] = []
        self.study = StudyRowsWriter(events_dir)
        self._spool: ColumnSpool | None = None
        #: Per text column, whether it holds a string: in the whole run (key None) and in
        #: each config's rows (for strings and None, all the column's type depends on).
        self._kinds: dict[Any, dict[str, bool]] = {}
        #: Every text value a string or None, every boolean column's a bool or None.
        self._plain = True
        self._interned: dict[Any, Any] = {}

    def _intern(self, value: Any) -> Any:
        return self._interned.setdefault(value, value) if isinstance(value, str) else value

    def add(
        self,
        doc_paths: Sequence[Path],
        outcomes: Sequence[tuple[dict[str, Any] | None, str | None]],
    ) -> None:
        records = []
        for doc_path, (record, error) in zip(doc_paths, outcomes, strict=True):
            if record is None:
                self.failures.append((doc_path, str(error)))
            else:
                records.append(record)
                self.metrics_paths.append(doc_path.with_name(metrics_filename(doc_path.name)))
        if not records:
            return
        study = [r[STUDY_KEY] for r in records if STUDY_KEY in r]
        if len(study) == len(records):
            self.study.add(study)
        else:
            self.study.discard()  # records made elsewhere: no study tables
        for record in records:
            facts = _count_facts(record)
            self.facts.append(
                facts._replace(**{f: self._intern(getattr(facts, f)) for f in _TEXT_FACTS})
            )
        self.ks |= {tuple(r["k_values"]) for r in records}
        if len(self.ks) > 1:
            return  # refused when written (as summarize_run refuses)
        batch = _columns_of(records, normalize_k(next(iter(self.ks))))
        self._note_kinds(batch)
        if self._spool is None:
            self._spool = ColumnSpool("config_name")
        self._spool.add(batch)

    def _note_kinds(self, batch: dict[str, np.ndarray]) -> None:
        """Whether the batch keeps the table plain, and which text columns hold text."""
        if not self._plain:
            return
        texts = [c for c, v in batch.items() if v.dtype == object and c not in _BOOLEAN_COLUMNS]
        self._plain = all(
            all(
                v is None or isinstance(v, bool if c in _BOOLEAN_COLUMNS else str)
                for v in batch[c].tolist()
            )
            for c in (*_BOOLEAN_COLUMNS, *texts)
        )
        if not self._plain:
            return
        configs = batch["config_name"]
        scopes: dict[Any, np.ndarray | None] = {None: None}
        scopes.update({c: configs == c for c in set(configs.tolist()) if c is not None})
        for scope, rows in scopes.items():
            kinds = self._kinds.setdefault(scope, {})
            for column in texts:
                values = batch[column] if rows is None else batch[column][rows]
                kinds[column] = kinds.get(column, False) or any(v is not None for v in values)

    def write(self, events_dir: Path, n_documents: int, *, started: float | None) -> EvaluateResult:
        try:
            return self._write(events_dir, n_documents, started)
        finally:
            self.study.discard()  # after an error: no temporary file left (else a no-op)

    def _write(self, events_dir: Path, n_documents: int, started: float | None) -> EvaluateResult:
        if not self.facts:
            raise InputError(
                f"none of the {n_documents} documents under {events_dir} could be loaded; "
                f"first error: {self.failures[0][1]}"
            )
        if len(self.ks) > 1:
            raise MetricError(f"records were computed with different cut-offs: {sorted(self.ks)}")
        ks = normalize_k(next(iter(self.ks)))
        assert self._spool is not None
        try:
            if self._plain and importlib.util.find_spec("pyarrow") is not None:
                summary, table_path, dataset = self._write_streamed(events_dir, ks)
            else:
                frame = self._whole_frame(ks)
                summary = _summarize(_frame_reader(frame), self.facts, ks)
                table_path, dataset = _write_table(frame, events_dir)
                del frame
        finally:
            self._spool.close()
        summary["counts"]["invalid_documents"] = [
            {
                "document": p.relative_to(events_dir).as_posix(),
                "error": message.replace(str(p), p.relative_to(events_dir).as_posix()),
            }
            for p, message in self.failures
        ]
        left_out = read_left_out(events_dir)
        if left_out:
            summary["counts"]["left_out"] = left_out
        summary_path = atomic_write_text(
            events_dir / SUMMARY_FILENAME, dumps_json(summary, ndigits=WRITE_NDIGITS)
        )
        written = [summary_path, table_path, *dataset, *self.study.write()]
        # last: the completion record names every file this evaluation wrote
        finish_evaluate(events_dir, self.metrics_paths, written, k=ks)
        return EvaluateResult(
            events_dir=events_dir,
            documents=n_documents - len(self.failures),
            computable=int(summary["counts"]["computable"]),
            metrics_paths=self.metrics_paths,
            summary_path=summary_path,
            table_path=table_path,
            seconds=0.0 if started is None else time.perf_counter() - started,
            failures=self.failures,
        )

    def _write_streamed(
        self, events_dir: Path, ks: tuple[int, ...]
    ) -> tuple[dict[str, Any], Path, list[Path]]:
        """Table and dataset written by row groups from the spool; the summary read back
        from the written table a column at a time."""
        from retrieval_lib.io import safe_join

        spool = self._spool
        assert spool is not None
        columns = _table_columns(ks)
        table_path = write_parquet_groups(
            events_dir / f"{TABLE_BASENAME}.parquet",
            self._schema(columns, None),
            spool.batches(),
            functools.partial(_batch_frame, columns=columns),
        )
        summary = _summarize_parquet(table_path, self.facts, ks)
        folder = events_dir / DATASET_DIRNAME
        dataset = [
            write_parquet_groups(
                safe_join(folder, dataset_file_name(config)),
                self._schema(columns, config),
                spool.batches(key=config),
                functools.partial(_batch_frame, columns=columns),
            )
            for config in sorted(spool.keys)
        ]
        _remove_stale_parts(folder, dataset)
        return summary, table_path, dataset

    def _schema(self, columns: list[str], scope: Any) -> Any:
        """The Arrow schema (pandas metadata included) ``to_parquet`` gives the whole
        table (``scope`` None) or config ``scope``'s rows of it: that of a small table
        holding text where the run (and the config's rows) does, None elsewhere (a text
        column's type depends only on that; pandas 3 types a config's rows as the run's
        column, pandas 2 from the rows' own values)."""
        import pyarrow as pa

        run = self._kinds[None]
        kinds: list[dict[str, bool]] = [run, {}]
        config: list[Any] = [None, None]
        if scope is not None:
            kinds = [self._kinds[scope], run, {}]
            config = [scope, f"{scope}~other", scope]
        example: dict[str, np.ndarray] = {}
        for column in columns:
            if column == "config_name" and scope is not None:
                example[column] = _object_array(config)
            elif column in run:
                example[column] = _object_array(["x" if k.get(column) else None for k in kinds])
            elif column in _BOOLEAN_COLUMNS:
                example[column] = _object_array([None] * len(kinds))
            else:
                example[column] = np.full(len(kinds), np.nan)
        frame = _batch_frame(example, columns=columns)
        if scope is not None:
            frame = frame[frame["config_name"] == scope].reset_index(drop=True)
        return pa.Schema.from_pandas(frame, preserve_index=False)

    def _whole_frame(self, ks: tuple[int, ...]) -> pd.DataFrame:
        """The whole table in memory (text columns' types inferred over the whole run)."""
        assert self._spool is not None
        parts: dict[str, list[np.ndarray]] = {}
        for batch in self._spool.batches():
            for column, values in batch.items():
                parts.setdefault(column, []).append(values)
        return _batch_frame(
            {c: np.concatenate(v) for c, v in parts.items()}, columns=_table_columns(ks)
        )


#: Text fields of :class:`_Facts`, kept once per distinct value.
_TEXT_FACTS = ("config_name", "task_name", "run_id", "code")


def _object_array(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _batch_frame(batch: Mapping[str, np.ndarray], *, columns: Sequence[str]) -> pd.DataFrame:
    """The table's rows of ``batch`` as :func:`metrics_table` types them: float64 numbers,
    text columns typed by pandas from their values, nullable booleans."""
    import pandas as pd

    texts = [c for c in columns if batch[c].dtype == object]
    text_frame = pd.DataFrame.from_records(
        list(zip(*(batch[c].tolist() for c in texts), strict=True)), columns=texts
    )
    data = {c: text_frame[c] if c in texts else batch[c] for c in columns}
    frame = pd.DataFrame(data, columns=list(columns))
    for column in _BOOLEAN_COLUMNS:
        frame[column] = frame[column].astype("boolean")
    return frame


def _summarize_parquet(
    path: Path, records: Sequence[_Facts], ks: tuple[int, ...]
) -> dict[str, Any]:
    """The summary of a written Parquet table, read a column at a time."""
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(path)

    def read(column: str) -> np.ndarray:
        values = handle.read(columns=[column]).column(0)
        if column in SLICE_COLUMNS or column == "config_name":
            return _object_array(values.to_pylist())
        return np.asarray(values.to_numpy(), dtype=np.float64)

    try:
        return _summarize(read, records, ks)
    finally:
        handle.close()


#: Documents evaluated at a time by :func:`evaluate_run`: memory is bounded by a batch
#: (documents, their records) and the run's table, not by the run's documents.
EVALUATE_BATCH = 128

#: Outcome columns of the table that are float64 (converted like the metric columns).
_FLOAT_OUTCOMES = ("reward", "agent_execution_seconds", "total_tokens", "cost_usd")


def _table_columns(ks: tuple[int, ...]) -> list[str]:
    return [*IDENTITY_COLUMNS, *table_metric_columns(ks), *TABLE_OUTCOME_COLUMNS, "source_document"]

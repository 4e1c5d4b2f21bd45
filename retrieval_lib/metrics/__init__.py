"""Retrieval metrics: the ranking kernel, stages 1-4 per document, the run summary and
the per-task metrics table (written by ``summary``, read back by ``table_files``).

The public names below are imported lazily on first use, so importing one submodule
(say :mod:`retrieval_lib.metrics.ranking`) does not load the others.

>>> from retrieval_lib.metrics import evaluate_documents, metrics_table, summarize_run
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> submodule that defines it.
_EXPORTS: dict[str, str] = {
    "evaluate_rankings": "ranking",
    "parse_metric": "ranking",
    "DEFAULT_K": "stages",
    "METRICS_SCHEMA_VERSION": "stages",
    "TAXONOMY_LABELS": "stages",
    "TraceView": "stages",
    "evaluate_document": "stages",
    "evaluate_documents": "stages",
    "metrics_schema": "stages",
    "validate_metrics_record": "stages",
    "SUMMARY_FILENAME": "summary",
    "EvaluateResult": "summary",
    "evaluate_run": "summary",
    "find_events_roots": "summary",
    "table_metric_columns": "summary",
    "metrics_table": "summary",
    "summarize_run": "summary",
    "summary_schema": "summary",
    "validate_summary": "summary",
    "find_metrics_tables": "table_files",
    "read_metrics_table": "table_files",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retrieval_lib.metrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"retrieval_lib.metrics.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

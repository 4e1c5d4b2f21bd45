"""RAG knowledge-base evaluation: SQLite run store, aggregate metrics, run comparison.

golden.yaml + results.jsonl (+ chunks.jsonl) ─► :mod:`~retrieval_lib.kb.ingest` ─►
:mod:`~retrieval_lib.kb.store` (SQLite, each run also in columns) ─►
:mod:`~retrieval_lib.kb.columns` (per-query values: the one evaluation path; records held
in memory are put into the same columns) ─► :mod:`~retrieval_lib.kb.metrics` (aggregates) /
:mod:`~retrieval_lib.kb.compare` ─► :mod:`~retrieval_lib.kb.report_md`. Cut-offs, match
modes and null reasons: :mod:`~retrieval_lib.kb.definitions`.

The public names below are imported lazily, so ``import retrieval_lib.kb.store`` does
not pull in numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "KBStore": "store",
    "SCHEMA_VERSION": "store",
    "GoldenQuery": "golden",
    "GoldenSet": "golden",
    "load_golden": "golden",
    "parse_golden": "golden",
    "ingest_run": "ingest",
    "IngestSummary": "ingest",
    "AggregateMetrics": "metrics",
    "compute_aggregate": "metrics",
    "store_aggregate": "metrics",
    "aggregate_from_records": "metrics",
    "CompareReport": "compare",
    "QueryComparison": "compare",
    "ComparisonKind": "compare",
    "compare_runs": "compare",
    "compare_records": "compare",
    "render_report_md": "report_md",
    "build_example": "examples",
    "build_example_store": "examples",
    "write_example": "examples",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'retrieval_lib.kb' has no attribute {name!r}")
    return getattr(importlib.import_module(f"retrieval_lib.kb.{module}"), name)


def __dir__() -> list[str]:
    return __all__

"""The run table and summary as ``evaluate`` built them before they were streamed (issue 20).

Frozen copy of the whole-run path of ``retrieval_lib.metrics.summary`` at a28738a: every
row of the run held in memory, the table typed over the whole run, written with
``DataFrame.to_parquet`` into one buffer, one Parquet file per config, and the summary
computed from the table in memory. Kept only as the oracle that the streamed path writes
the same bytes (tests/metrics/test_summary_oracle.py); not used by the library.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

import retrieval_lib.metrics.summary as current
from retrieval_lib import __version__
from retrieval_lib.metrics.stages import TAXONOMY_LABELS, normalize_k, ranking_metric_names
from retrieval_lib.metrics.summary import (
    _BOOLEAN_COLUMNS,
    _FLOAT_OUTCOMES,
    SLICE_COLUMNS,
    SUMMARY_SCHEMA_VERSION,
    _count_facts,
    _Facts,
    _table_columns,
)
from retrieval_lib.metrics.summary import table_metric_columns as metric_columns


def _stats(values: np.ndarray) -> dict[str, Any]:
    finite = values[~np.isnan(values)]
    n = int(finite.size)
    return {
        "mean": float(finite.mean()) if n else None,
        "median": float(np.median(finite)) if n else None,
        "std": float(finite.std(ddof=1)) if n >= 2 else None,
        "n": n,
    }


def _group_stats(frame: pd.DataFrame, columns: Sequence[str]) -> dict[str, Any]:
    return {c: _stats(frame[c].to_numpy(dtype=np.float64, na_value=np.nan)) for c in columns}


def _taxonomy_distribution(frame: pd.DataFrame) -> dict[str, Any]:
    computable = frame[frame[f"taxonomy.{TAXONOMY_LABELS[0]}"].notna()]
    labels = {}
    for label in TAXONOMY_LABELS:
        counts = computable[f"taxonomy.{label}"].to_numpy(dtype=np.float64)
        labels[label] = {
            "tasks_with_label": int((counts > 0).sum()),
            "total_files": int(counts.sum()),
            "files_per_task": _stats(counts),
        }
    return {"n": len(computable), "labels": labels}


def summarize(frame: pd.DataFrame, records: Sequence[_Facts], ks: tuple[int, ...]) -> dict:
    numeric = metric_columns(ks, include_taxonomy=False)

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
    metrics: dict[str, Any] = {}
    slices: dict[str, Any] = {}
    taxonomy: dict[str, Any] = {}
    taxonomy_columns = [f"taxonomy.{label}" for label in TAXONOMY_LABELS]
    read = [*dict.fromkeys([*SLICE_COLUMNS, *numeric, *taxonomy_columns])]
    config_names = frame["config_name"]
    frame = frame[read]
    for config in configs:
        group = frame[config_names == config]
        metrics[config] = _group_stats(group, numeric)
        slices[config] = {}
        for dimension in SLICE_COLUMNS:
            values = sorted(v for v in group[dimension].dropna().unique())
            slices[config][dimension] = {
                str(v): {
                    "documents": int((group[dimension] == v).sum()),
                    "metrics": _group_stats(group[group[dimension] == v], numeric),
                }
                for v in values
            }
        taxonomy[config] = _taxonomy_distribution(group)
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


class OldRunTable:
    """The whole run's rows in memory, as before (``_RunTable`` at a28738a)."""

    def __init__(self) -> None:
        self.facts: list[_Facts] = []
        self.ks: set[tuple[int, ...]] = set()
        self.numeric: dict[str, list[np.ndarray]] = {}
        self.values: dict[str, list[Any]] = {}

    def add(self, records: Sequence[Mapping[str, Any]]) -> None:
        self.facts.extend(_count_facts(r) for r in records)
        self.ks |= {tuple(r["k_values"]) for r in records}
        ks = normalize_k(next(iter(self.ks)))
        names = ranking_metric_names(ks)
        rows = [current._record_row(r, names) for r in records]
        nan = float("nan")
        for column in metric_columns(ks):
            self.numeric.setdefault(column, []).append(
                np.fromiter((row.get(column, nan) for row in rows), np.float64, len(rows))
            )
        part = pd.DataFrame.from_records(rows, columns=list(_FLOAT_OUTCOMES))
        for column in _FLOAT_OUTCOMES:
            values = pd.to_numeric(part[column], errors="coerce").astype("float64").to_numpy()
            self.numeric.setdefault(column, []).append(values)
        for column in _table_columns(ks):
            if column in self.numeric:
                continue
            kept = self.values.setdefault(column, [])
            kept.extend(row.get(column, nan) for row in rows)

    def frame(self) -> pd.DataFrame:
        ks = normalize_k(next(iter(self.ks)))
        columns = _table_columns(ks)
        texts = [c for c in columns if c in self.values]
        text_frame = pd.DataFrame.from_records(
            list(zip(*(self.values[c] for c in texts), strict=True)), columns=texts
        )
        data = {
            c: np.concatenate(self.numeric[c]) if c in self.numeric else text_frame[c]
            for c in columns
        }
        frame = pd.DataFrame(data, columns=columns)
        for column in _BOOLEAN_COLUMNS:
            frame[column] = frame[column].astype("boolean")
        return frame

    def outputs(self) -> tuple[dict[str, Any], bytes, dict[str, bytes]]:
        """The summary, the table's Parquet bytes and each config's dataset file bytes."""
        ks = normalize_k(next(iter(self.ks)))
        frame = self.frame()
        summary = summarize(frame, self.facts, ks)
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        parts = {}
        for config in sorted({str(c) for c in frame["config_name"].dropna()}):
            part = frame[frame["config_name"] == config].reset_index(drop=True)
            data = io.BytesIO()
            part.to_parquet(data, index=False)
            parts[config] = data.getvalue()
        return summary, buffer.getvalue(), parts

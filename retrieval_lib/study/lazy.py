"""Lazy reading of the partitioned metrics dataset: study-wide aggregates in flat memory.

``retrieval-lib evaluate`` writes, beside each run's ``retrieval_metrics.parquet``, the
same rows split by config under ``retrieval_events/retrieval_metrics_dataset/
<config>.parquet`` (contracts §3). Over many runs these files form one Parquet dataset
partitioned by run and config. :func:`metrics_dataset` opens it as a ``pyarrow.dataset``
(nothing read until scanned); :func:`aggregate_metrics` computes n, mean and sample std of
metric columns per group file by file, in record batches, merging the partial results
(Chan et al.'s pairwise update), so memory is bounded by one batch, not by the number of
trials. Given a ``distributed.Client``, the files are aggregated on its workers and only
the per-file partials (a few numbers per group and metric) travel to the driver.

Examples
--------
>>> from retrieval_lib.study.lazy import aggregate_metrics  # doctest: +SKIP
>>> aggregate_metrics(events_dirs, ["file.recall", "reward"], by=["config_name"])  # doctest: +SKIP
   config_name       metric     n      mean       std
0     baseline  file.recall  4210  0.412...  0.3...
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval_lib.errors import InputError

__all__ = ["aggregate_metrics", "dataset_files", "metrics_dataset"]

#: Partial aggregate of one group and metric: (n, mean, M2 = sum of squared deviations).
_Partial = tuple[int, float, float]


def dataset_files(events_dirs: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The per-config Parquet files of the given ``retrieval_events`` folders, sorted.

    Raises
    ------
    InputError
        A folder has no ``retrieval_metrics_dataset/`` (evaluated before it existed, or
        without pyarrow): evaluate it again.
    """
    from retrieval_lib.metrics.summary import DATASET_DIRNAME

    files: list[Path] = []
    for raw in events_dirs:
        folder = Path(raw) / DATASET_DIRNAME
        found = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
        if not found:
            raise InputError(
                f"{raw} has no {DATASET_DIRNAME}/: run `retrieval-lib evaluate` on it again "
                "(with pyarrow installed)"
            )
        files.extend(found)
    return files


def metrics_dataset(events_dirs: Iterable[str | os.PathLike[str]]) -> Any:
    """A ``pyarrow.dataset.Dataset`` over the runs' metrics files (read lazily).

    The schema is the union of the files' schemas (a column that is all null in one run
    takes its type from the others).
    """
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    files = [str(p) for p in dataset_files(events_dirs)]
    schema = pa.unify_schemas([pq.read_schema(f) for f in files])
    return ds.dataset(files, schema=schema, format="parquet")


def _merge(a: _Partial, b: _Partial) -> _Partial:
    """Chan et al.'s update: the (n, mean, M2) of two disjoint samples together."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    if n_b == 0:
        return a
    if n_a == 0:
        return b
    delta = mean_b - mean_a
    return n, mean_a + delta * n_b / n, m2_a + m2_b + delta * delta * n_a * n_b / n


def _partials_of_frame(
    frame: pd.DataFrame, columns: Sequence[str], by: Sequence[str]
) -> dict[tuple[Any, ...], dict[str, _Partial]]:
    out: dict[tuple[Any, ...], dict[str, _Partial]] = {}
    keys = frame[list(by)].astype("object").where(frame[list(by)].notna(), None)
    grouper: Any = list(by) if len(by) > 1 else by[0]
    for key, index in keys.groupby(grouper, dropna=False, sort=False).groups.items():
        group_key = key if isinstance(key, tuple) else (key,)
        rows = frame.loc[index]
        partial: dict[str, _Partial] = {}
        for column in columns:
            values = rows[column].to_numpy(dtype=np.float64, na_value=np.nan)
            values = values[~np.isnan(values)]
            if values.size:
                mean = float(values.mean())
                partial[column] = (int(values.size), mean, float(((values - mean) ** 2).sum()))
            else:
                partial[column] = (0, 0.0, 0.0)
        out[group_key] = partial
    return out


def _combine(
    total: dict[tuple[Any, ...], dict[str, _Partial]],
    part: dict[tuple[Any, ...], dict[str, _Partial]],
) -> None:
    for key, metrics in part.items():
        into = total.setdefault(key, {})
        for column, value in metrics.items():
            into[column] = _merge(into.get(column, (0, 0.0, 0.0)), value)


def _file_partials(
    path: str, columns: Sequence[str], by: Sequence[str], batch_rows: int
) -> dict[tuple[Any, ...], dict[str, _Partial]]:
    """The partial aggregates of one file, read one record batch at a time."""
    import pyarrow.parquet as pq

    total: dict[tuple[Any, ...], dict[str, _Partial]] = {}
    handle = pq.ParquetFile(path)
    present = set(handle.schema_arrow.names)
    missing = [c for c in (*by, *columns) if c not in present]
    if missing:
        raise InputError(f"{path} has no column(s) {', '.join(missing)}")
    for batch in handle.iter_batches(batch_size=batch_rows, columns=[*by, *columns]):
        _combine(total, _partials_of_frame(batch.to_pandas(), columns, by))
    return total


def aggregate_metrics(
    events_dirs: Iterable[str | os.PathLike[str]],
    columns: Sequence[str],
    by: Sequence[str] = ("config_name",),
    *,
    client: Any = None,
    batch_rows: int = 65_536,
) -> pd.DataFrame:
    """n, mean and sample std (ddof=1) of ``columns`` per ``by`` group, over many runs.

    NaN values are left out (as in the run summary); a group's std is NaN when n < 2.
    Reads only the needed columns, one record batch at a time; with ``client`` (a
    ``distributed.Client``) each file is aggregated on a worker.

    Returns
    -------
    pandas.DataFrame
        One row per group and metric: the ``by`` columns, ``metric``, ``n``, ``mean``,
        ``std``; sorted by group then metric order.
    """
    by, columns = list(by), list(columns)
    files = [str(p) for p in dataset_files(events_dirs)]
    total: dict[tuple[Any, ...], dict[str, _Partial]] = {}
    if client is not None:
        futures = client.map(
            _file_partials, files, columns=columns, by=by, batch_rows=batch_rows, pure=False
        )
        for future in futures:
            _combine(total, future.result())
            future.release()
    else:
        for path in files:
            _combine(total, _file_partials(path, columns, by, batch_rows))
    rows = []
    for key in sorted(total, key=lambda k: tuple((v is None, str(v)) for v in k)):
        for column in columns:
            n, mean, m2 = total[key].get(column, (0, 0.0, 0.0))
            rows.append(
                (
                    *key,
                    column,
                    n,
                    mean if n else float("nan"),
                    (m2 / (n - 1)) ** 0.5 if n >= 2 else float("nan"),
                )
            )
    return pd.DataFrame(rows, columns=[*by, "metric", "n", "mean", "std"])

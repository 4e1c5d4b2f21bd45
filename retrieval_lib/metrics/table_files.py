"""The per-task metrics table on disk: finding it and reading it back.

``retrieval-lib evaluate`` (:func:`~retrieval_lib.metrics.summary.evaluate_run`) writes
one table per run, ``<run>/retrieval_events/retrieval_metrics.parquet`` (or ``.csv``
without pyarrow); the impact stage, the run report and the study read it through
:func:`find_metrics_tables` and :func:`read_metrics_table`, so the reader lives beside
its writer and every reader reads it the same way (identity columns as text, floats to
the last bit, an unfinished evaluate refused).

Examples
--------
>>> import tempfile
>>> find_metrics_tables(tempfile.mkdtemp())  # doctest: +ELLIPSIS
Traceback (most recent call last):
retrieval_lib.errors.InputError: no retrieval metrics table (retrieval_metrics.parquet or ...
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pandas as pd

from retrieval_lib.errors import InputError
from retrieval_lib.metrics.summary import TABLE_BASENAME, TEXT_COLUMNS

__all__ = ["find_metrics_tables", "read_metrics_table", "table_column_names"]

#: The table files evaluate writes (:func:`~retrieval_lib.metrics.summary.evaluate_run`),
#: in the order a folder holding both is read: Parquet first.
_TABLE_NAMES = (f"{TABLE_BASENAME}.parquet", f"{TABLE_BASENAME}.csv")


def find_metrics_tables(path: str | os.PathLike[str]) -> list[Path]:
    """The per-task metrics tables ``retrieval-lib evaluate`` wrote for ``path``.

    ``path`` may be the table itself, a run folder (``<run>/retrieval_events/``), the
    ``retrieval_events`` folder, or a folder of runs (searched recursively). Where a
    folder holds both a Parquet and a CSV table, the Parquet one is used.

    Raises
    ------
    InputError
        When ``path`` does not exist or holds no table (evaluate has not been run), or
        (:class:`~retrieval_lib.completion.IncompleteOutputError`) a table's run is not
        completely evaluated or its files do not match its completion record.
    """
    from retrieval_lib.completion import check_evaluated

    root = Path(path)
    if not root.exists():
        raise InputError(f"{root} does not exist")
    if root.is_file():
        if root.name not in _TABLE_NAMES:
            raise InputError(
                f"{root} is not a retrieval metrics table ({' or '.join(_TABLE_NAMES)})"
            )
        check_evaluated(root.parent)
        return [root]
    found: dict[Path, Path] = {}
    for name in _TABLE_NAMES:  # parquet first: it wins over a CSV in the same folder
        for table in sorted(root.rglob(name)):
            found.setdefault(table.parent, table)
    if not found:
        raise InputError(
            f"no retrieval metrics table ({' or '.join(_TABLE_NAMES)}) under {root}: "
            f"run `retrieval-lib evaluate {root}` first"
        )
    for parent in sorted(found):
        # an interrupted evaluate, or files changed since: refused, naming the run
        check_evaluated(parent)
    return [found[parent] for parent in sorted(found)]


def table_column_names(path: str | os.PathLike[str]) -> list[str]:
    """The column names of a metrics table (Parquet schema or CSV header), not its rows."""
    table = Path(path)
    try:
        if table.suffix == ".parquet":
            import pyarrow.parquet as pq

            return [str(n) for n in pq.read_schema(table).names]
        return [str(n) for n in pd.read_csv(table, nrows=0).columns]
    except Exception as exc:  # read again (and refused with the reason) by read_metrics_table
        raise InputError(f"cannot read metrics table {table}: {exc}") from exc


def read_metrics_table(
    path: str | os.PathLike[str], columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """Read one per-task metrics table (Parquet or CSV) as written by ``evaluate``.

    ``columns``: only these (names the table has, e.g.
    :func:`retrieval_lib.stats.impact.impact_columns`), in table order; the values are
    those of a whole read.

    Raises
    ------
    InputError
        When the file cannot be read (or Parquet support is missing).
    """
    table = Path(path)
    wanted = None if columns is None else list(columns)
    try:
        if table.suffix == ".parquet":
            try:
                import pyarrow  # noqa: F401
            except ImportError:
                raise InputError(
                    f"{table} is Parquet but pyarrow is not installed "
                    "(pip install 'retrieval_lib[parquet]')"
                ) from None
            return pd.read_parquet(table, columns=wanted)
        # the floats evaluate wrote, to the last bit: pandas < 3 (the only pandas on
        # Python 3.10) reads them with a parser that can be one unit in the last place
        # off unless asked for round_trip; pandas 3 reads them exactly, and deprecates it
        precision: Literal["round_trip"] | None = (
            "round_trip" if pd.__version__.startswith("2.") else None
        )
        text = [c for c in TEXT_COLUMNS if wanted is None or c in wanted]
        frame = pd.read_csv(
            table, usecols=wanted, dtype={c: "string" for c in text}, float_precision=precision
        )
        return frame if wanted is None else frame[wanted]
    except InputError:
        raise
    except Exception as exc:  # any parser error becomes one clear message
        raise InputError(f"cannot read metrics table {table}: {exc}") from exc

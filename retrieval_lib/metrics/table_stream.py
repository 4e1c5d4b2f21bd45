"""A run's metrics table kept on disk while it is built, and written by row groups.

``evaluate`` produces the table a batch of documents at a time. :class:`ColumnSpool`
keeps each batch's columns (NumPy arrays) in an anonymous temporary file instead of
memory. :func:`write_parquet_groups` writes
a Parquet file from frames of at most :data:`ROW_GROUP_ROWS` rows, so the memory of
the write is bounded by one row group, not by the run.

A table of at most :data:`ROW_GROUP_ROWS` rows is one row group: the bytes of pandas'
``DataFrame.to_parquet(index=False)`` of the whole table (tested). A longer table has
several row groups of :data:`ROW_GROUP_ROWS` rows (the last shorter): the same
columns, types, values and pandas metadata, a different layout.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from retrieval_lib.io import atomic_output

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ROW_GROUP_ROWS", "ColumnSpool", "write_parquet_groups"]

#: Rows per row group of a written table: a bound on the rows held in memory while
#: writing (~1.5 KB per row of a metrics table; a 30,000-row table written by groups of 16,384
#: rows raised the peak by ~80 MB, by 4,096 rows ~22 MB).
ROW_GROUP_ROWS = 8_192


class ColumnSpool:
    """Batches of a table's columns, pickled to an anonymous temporary file.

    Each batch is a mapping of column name to a NumPy array (one value per row); the
    batches come back in order from :meth:`batches`, optionally only the rows whose
    ``key`` column equals a value (a config's part of the table).

    Examples
    --------
    >>> spool = ColumnSpool("config_name")
    >>> spool.add({"config_name": np.array(["a", "b"], dtype=object), "x": np.array([1.0, 2.0])})
    >>> spool.add({"config_name": np.array(["a"], dtype=object), "x": np.array([3.0])})
    >>> spool.rows, sorted(spool.keys)
    (3, ['a', 'b'])
    >>> [b["x"].tolist() for b in spool.batches(key="a")]
    [[1.0], [3.0]]
    >>> spool.close()
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self.rows = 0
        #: Distinct values of the key column (None left out).
        self.keys: set[Any] = set()
        # closed by close(); an anonymous file, gone with the process in any case
        self._file: IO[bytes] = tempfile.TemporaryFile(prefix="retrieval-lib-table-")  # noqa: SIM115
        # (offset, size, rows, key values of the batch)
        self._index: list[tuple[int, int, int, frozenset[Any]]] = []

    def add(self, columns: dict[str, np.ndarray]) -> None:
        """Append one batch (every array of the same length)."""
        data = pickle.dumps(columns, protocol=pickle.HIGHEST_PROTOCOL)
        offset = self._file.seek(0, 2)
        self._file.write(data)
        rows = len(columns[self.key])
        keys = frozenset(v for v in columns[self.key].tolist() if v is not None)
        self._index.append((offset, len(data), rows, keys))
        self.rows += rows
        self.keys |= keys

    def batches(self, key: Any = None) -> Iterator[dict[str, np.ndarray]]:
        """The batches in order; with ``key``, only their rows whose key column equals it."""
        for offset, size, _, keys in self._index:
            if key is not None and key not in keys:
                continue
            self._file.seek(offset)
            columns: dict[str, np.ndarray] = pickle.loads(self._file.read(size))
            if key is not None:
                rows = columns[self.key] == key
                columns = {name: values[rows] for name, values in columns.items()}
            yield columns

    def close(self) -> None:
        """Remove the temporary file."""
        self._file.close()


def _regroup(
    batches: Iterable[dict[str, np.ndarray]], rows: int
) -> Iterator[dict[str, np.ndarray]]:
    """The batches' rows again, as batches of exactly ``rows`` rows (the last shorter)."""
    pending: list[dict[str, np.ndarray]] = []
    held = 0
    for batch in batches:
        pending.append(batch)
        held += len(next(iter(batch.values()))) if batch else 0
        while held >= rows:
            joined = {c: np.concatenate([b[c] for b in pending]) for c in pending[0]}
            yield {c: v[:rows] for c, v in joined.items()}
            rest = {c: v[rows:] for c, v in joined.items()}
            held -= rows
            pending = [rest] if held else []
    if held:
        yield {c: np.concatenate([b[c] for b in pending]) for c in pending[0]}


def write_parquet_groups(
    path: Path,
    schema: Any,
    batches: Iterable[dict[str, np.ndarray]],
    to_frame: Callable[[dict[str, np.ndarray]], pd.DataFrame],
) -> Path:
    """Write ``batches`` (regrouped to :data:`ROW_GROUP_ROWS` rows, each made a frame by
    ``to_frame``) as one Parquet file with ``schema`` (a :class:`pyarrow.Schema` with its
    pandas metadata), atomically; the options of pandas' ``to_parquet`` (snappy, no index)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with atomic_output(path) as handle:
        writer = pq.ParquetWriter(handle, schema, compression="snappy")
        try:
            for group in _regroup(batches, ROW_GROUP_ROWS):
                frame = to_frame(group)
                table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
                writer.write_table(table)
                del frame, table
                # the pool keeps freed buffers for reuse: give them back between groups
                pa.default_memory_pool().release_unused()
        finally:
            writer.close()
    return path

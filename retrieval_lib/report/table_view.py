"""How a table looks in a report: no 0…n index, empty cells for missing, units in headers.

The analysis tables (:mod:`retrieval_lib.report.tables`, the kb compare rows) keep machine
names and NaN/None so they can be tested, joined and written as CSV. :func:`view` turns one
into what a reader sees, for any notebook:

* an unnamed index (0…n, or what is left of it after sorting) is dropped; a named index
  (``config_name``, ``trace_source``) becomes the first column(s);
* a missing value (NaN, None, ``pd.NA``) is an empty cell, never "nan" or "None";
* p-values (``p_value``, ``p_holm``, ``p_bh``, ``…_p``, ``…_p_holm``) below 0.001 read
  ``< 0.001``, never ``0.000`` (:func:`~retrieval_lib.report.display.p_text`);
* floats are shown with ``digits`` decimals, counts and ranks (``n``, ``n_…``, ``…_n``,
  ``…_rank``, ``wins``, ``losses``, ``ties``) as whole numbers even when a missing value
  made their column float;
* a column keeps its name in the API and the CSV tables (``cost_usd``, ``total_tokens``,
  ``agent_execution_seconds``: the unit is part of the name), so one outcome has one name
  in the API, the tables and the figures;
* text columns are left-aligned, numbers right-aligned; a cell wraps only in a column of
  explanations (:data:`WRAPPED_COLUMNS`, ``…_reason``) or of long texts (over
  :data:`WRAP_AFTER` characters), so ids and headers stay on one line.

The result renders as an HTML table in Jupyter and the HTML report, and as plain text
elsewhere; both are deterministic (no random ids), so nbval can compare them.

Examples
--------
>>> import pandas as pd
>>> t = pd.DataFrame({"metric": ["reward", "cost_usd"], "n": [3, 0],
...                   "mean": [0.5, float("nan")], "reason": [None, "no value"]})
>>> print(repr(view(t)))
metric    n   mean  reason
reward    3  0.500
cost_usd  0         no value
"""

from __future__ import annotations

import hashlib
import html
import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval_lib.report.display import p_text

__all__ = [
    "MAX_TABLE_ROWS",
    "WRAPPED_COLUMNS",
    "WRAP_AFTER",
    "TableView",
    "view",
]

#: The most rows a table shows in a report: a longer table shows its first rows and a note
#: naming the file (CSV/Parquet beside the report) that holds every row.
MAX_TABLE_ROWS = 50
#: Columns with a longer text than this wrap; the others keep each cell on one line.
WRAP_AFTER = 60
#: Columns of explanations, which always wrap (so is any ``…_reason`` column).
WRAPPED_COLUMNS: tuple[str, ...] = ("reason", "note", "notes", "not_computable")


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _cell(value: Any, digits: int) -> str:
    if _missing(value):
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


_COUNT_COLUMNS = ("n", "wins", "losses", "ties", "tests")


def _is_count(name: Any, column: pd.Series) -> bool:
    """A float column of whole numbers that holds counts (NaN forced it to float)."""
    text = str(name)
    if not (text in _COUNT_COLUMNS or text.startswith("n_") or text.endswith(("_n", "_rank"))):
        return False
    if not pd.api.types.is_float_dtype(column):
        return False
    values = column.dropna()
    return bool((values == values.round()).all())


def _is_p_value(name: Any) -> bool:
    """A column of p-values: ``p_value``, ``p_holm``, ``p_bh``, ``…_p``, ``…_p_holm``."""
    text = str(name)
    return text in ("p_value", "p_holm", "p_bh") or text.endswith(("_p", "_p_holm", "_p_bh"))


def _is_numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


@dataclass(frozen=True)
class TableView:
    """A table as shown to a reader: display strings, headers and column alignment.

    ``cells`` holds one list of strings per row; ``numeric`` says per column whether it
    is right-aligned. Jupyter shows :meth:`_repr_html_`; ``repr`` gives the plain text.
    """

    columns: list[str]
    cells: list[list[str]]
    numeric: list[bool]
    #: Shown under the table (plain text, escaped): e.g. which rows were left out and where
    #: they all are.
    note: str | None = None

    def _repr_html_(self) -> str:
        digest = hashlib.sha1(repr((self.columns, self.cells)).encode()).hexdigest()[:10]
        table_id = f"table-{digest}"
        rules = "".join(
            f"#{table_id} tr > :nth-child({i + 1}) {{text-align: "
            f"{'right' if numeric else 'left'}; white-space: "
            f"{'normal' if self._wraps(i) else 'nowrap'};}}"
            for i, numeric in enumerate(self.numeric)
        )
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>"
            for row in self.cells
        )
        note = f"<p><em>{html.escape(self.note)}</em></p>" if self.note else ""
        return (
            f"<style>{rules}</style>"
            f'<table id="{table_id}" class="dataframe">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{note}"
        )

    def _wraps(self, column: int) -> bool:
        name = self.columns[column]
        if name in WRAPPED_COLUMNS or name.endswith("_reason"):
            return True
        return any(len(row[column]) > WRAP_AFTER for row in self.cells)

    def __repr__(self) -> str:
        widths = [
            max([len(c), *(len(row[i]) for row in self.cells)]) for i, c in enumerate(self.columns)
        ]

        def line(values: list[str]) -> str:
            return "  ".join(
                v.rjust(w) if numeric else v.ljust(w)
                for v, w, numeric in zip(values, widths, self.numeric, strict=True)
            ).rstrip()

        lines = [line(self.columns), *(line(row) for row in self.cells)]
        return "\n".join([*lines, self.note] if self.note else lines)


def view(
    frame: pd.DataFrame,
    *,
    digits: int = 3,
    max_rows: int = MAX_TABLE_ROWS,
    source: str | None = None,
) -> TableView:
    """``frame`` as a reader sees it (see the module docstring); ``frame`` is not changed.

    At most ``max_rows`` rows are shown (:data:`MAX_TABLE_ROWS`): a longer table shows its
    first ``max_rows`` rows (sort it first to show the top ones) and a note saying how many
    were left out and naming ``source``, the file beside the report that holds every row.

    Examples
    --------
    >>> import pandas as pd
    >>> counts = pd.DataFrame({"a": [1, 2]}, index=pd.Index(["x", "y"], name="source"))
    >>> v = view(counts)
    >>> v.columns, v.cells
    (['source', 'a'], [['x', '1'], ['y', '2']])
    >>> "<th>source</th>" in v._repr_html_() and "<td>0</td>" not in v._repr_html_()
    True
    >>> view(pd.DataFrame({"p_value": [0.0004, 0.2], "wilcoxon_p": [1e-9, None]})).cells
    [['< 0.001', '< 0.001'], ['0.200', '']]
    >>> long = view(pd.DataFrame({"a": range(5)}), max_rows=2, source="tables/a.csv")
    >>> long.cells, long.note
    ([['0'], ['1']], 'the first 2 of 5 rows; every row is in tables/a.csv beside the report')
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    named = any(n is not None for n in frame.index.names)
    note = None
    if len(frame) > max_rows:
        where = source or "the tables"
        note = (
            f"the first {max_rows} of {len(frame)} rows; every row is in {where} beside the report"
        )
        frame = frame.iloc[:max_rows]
    shown = frame.reset_index(drop=not named)
    columns = [str(c) for c in shown.columns]
    numeric = [_is_numeric(shown[c]) for c in shown.columns]
    cells: list[list[str]] = []
    places = [0 if _is_count(c, shown[c]) else digits for c in shown.columns]
    p_columns = [_is_p_value(c) and _is_numeric(shown[c]) for c in shown.columns]
    for row in shown.itertuples(index=False, name=None):
        cells.append(
            [
                p_text(v, d) if is_p else _cell(v, d)
                for v, d, is_p in zip(row, places, p_columns, strict=True)
            ]
        )
    return TableView(columns=columns, cells=cells, numeric=numeric, note=note)

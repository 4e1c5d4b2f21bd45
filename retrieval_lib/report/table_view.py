"""How a table looks in a report: no 0…n index, empty cells for missing, units in headers.

The analysis tables (:mod:`retrieval_lib.report.tables`, the kb compare rows) keep machine
names and NaN/None so they can be tested, joined and written as CSV. :func:`view` turns one
into what a reader sees, for any notebook:

* an unnamed index (0…n, or what is left of it after sorting) is dropped; a named index
  (``config_name``, ``trace_source``) becomes the first column(s);
* a missing value (NaN, None, ``pd.NA``) is an empty cell, never "nan" or "None";
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

__all__ = [
    "WRAPPED_COLUMNS",
    "WRAP_AFTER",
    "TableView",
    "view",
]

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
        return (
            f"<style>{rules}</style>"
            f'<table id="{table_id}" class="dataframe">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
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

        return "\n".join([line(self.columns), *(line(row) for row in self.cells)])


def view(frame: pd.DataFrame, *, digits: int = 3) -> TableView:
    """``frame`` as a reader sees it (see the module docstring); ``frame`` is not changed.

    Examples
    --------
    >>> import pandas as pd
    >>> counts = pd.DataFrame({"a": [1, 2]}, index=pd.Index(["x", "y"], name="source"))
    >>> v = view(counts)
    >>> v.columns, v.cells
    (['source', 'a'], [['x', '1'], ['y', '2']])
    >>> "<th>source</th>" in v._repr_html_() and "<td>0</td>" not in v._repr_html_()
    True
    """
    named = any(n is not None for n in frame.index.names)
    shown = frame.reset_index(drop=not named)
    columns = [str(c) for c in shown.columns]
    numeric = [_is_numeric(shown[c]) for c in shown.columns]
    cells: list[list[str]] = []
    places = [0 if _is_count(c, shown[c]) else digits for c in shown.columns]
    for row in shown.itertuples(index=False, name=None):
        cells.append([_cell(v, d) for v, d in zip(row, places, strict=True)])
    return TableView(columns=columns, cells=cells, numeric=numeric)

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
* a column with a unit says it: ``cost_usd`` → ``cost (USD)``, ``agent_execution_seconds``
  → ``time (s)`` (see :data:`COLUMN_LABELS`, and :func:`label` for the rule); the same
  labels are used for metric names in the ``metric``, ``x`` and ``y`` columns;
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
metric      n   mean  reason
reward      3  0.500
cost (USD)  0         no value
"""

from __future__ import annotations

import hashlib
import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval_lib.report.display import p_text

__all__ = [
    "COLUMN_LABELS",
    "LABELLED_VALUE_COLUMNS",
    "WRAPPED_COLUMNS",
    "WRAP_AFTER",
    "TableView",
    "label",
    "view",
]

#: Display names of columns (and metric names) whose machine name hides a unit.
COLUMN_LABELS: Mapping[str, str] = {
    "cost_usd": "cost (USD)",
    "agent_execution_seconds": "time (s)",
    "total_tokens": "tokens",
}
#: Columns whose values are column or metric names, shown with the same labels.
LABELLED_VALUE_COLUMNS: tuple[str, ...] = ("metric", "x", "y")

#: Columns with a longer text than this wrap; the others keep each cell on one line.
WRAP_AFTER = 60
#: Columns of explanations, which always wrap (so is any ``…_reason`` column).
WRAPPED_COLUMNS: tuple[str, ...] = ("reason", "note", "notes", "not_computable")

_SUFFIX_UNITS = (("_usd", "USD"), ("_seconds", "s"), ("_ms", "ms"))


def label(name: Any) -> str:
    """The display name of a column: :data:`COLUMN_LABELS`, else a unit suffix spelt out.

    Examples
    --------
    >>> label("cost_usd"), label("mean_cost_usd"), label("wall_seconds"), label("file.AP")
    ('cost (USD)', 'mean_cost (USD)', 'wall (s)', 'file.AP')
    """
    text = str(name)
    if text in COLUMN_LABELS:
        return COLUMN_LABELS[text]
    for suffix, unit in _SUFFIX_UNITS:
        if text.endswith(suffix) and len(text) > len(suffix):
            stem = text[: -len(suffix)]
            return f"{COLUMN_LABELS.get(stem, stem)} ({unit})"
    return text


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
    >>> view(pd.DataFrame({"p_value": [0.0004, 0.2], "wilcoxon_p": [1e-9, None]})).cells
    [['< 0.001', '< 0.001'], ['0.200', '']]
    """
    named = any(n is not None for n in frame.index.names)
    shown = frame.reset_index(drop=not named)
    columns = [label(c) for c in shown.columns]
    numeric = [_is_numeric(shown[c]) for c in shown.columns]
    cells: list[list[str]] = []
    value_columns = [c in LABELLED_VALUE_COLUMNS for c in shown.columns]
    places = [0 if _is_count(c, shown[c]) else digits for c in shown.columns]
    p_columns = [_is_p_value(c) and _is_numeric(shown[c]) for c in shown.columns]
    for row in shown.itertuples(index=False, name=None):
        cells.append(
            [
                label(v)
                if relabel and isinstance(v, str)
                else (p_text(v, d) if is_p else _cell(v, d))
                for v, relabel, d, is_p in zip(row, value_columns, places, p_columns, strict=True)
            ]
        )
    return TableView(columns=columns, cells=cells, numeric=numeric)

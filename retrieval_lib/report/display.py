"""How a table looks in a report: one missing-value rule, readable numbers, no index.

Missing is one thing everywhere a report shows a value: ``None``, NaN (any float),
``pd.NA`` and ``NaT`` (:func:`is_missing`) are an empty cell or an empty text, never
"nan", "None", "<NA>" or "NaT".

**Numbers and intervals.** The analysis tables keep one number per column
(``reward_mean``, ``reward_ci_low``, ``reward_ci_high``) so they can be written, tested and
joined. A reader wants ``reward: 0.67 [0.33, 1.00]``: :func:`readable` merges each mean
with its interval into one text column and moves columns that hold one value in every row
into a caption.

>>> import pandas as pd
>>> t = pd.DataFrame({"pair": ["b vs t"] * 2, "metric": ["x", "y"], "n": [3, 0],
...     "mean": [0.5, float("nan")], "ci_low": [0.25, float("nan")], "ci_high": [0.75, float("nan")]})
>>> shown, caption = readable(t, constant=["pair"])
>>> shown.to_dict("list"), caption
({'metric': ['x', 'y'], 'n': [3, 0], 'mean [95% CI]': ['0.500 [0.250, 0.750]', '']}, 'pair: b vs t')

**Tables.** The analysis tables (:mod:`retrieval_lib.report.tables`, the kb compare rows)
keep machine names and NaN/None so they can be tested, joined and written as CSV.
:func:`view` turns one into what a reader sees, for any notebook:

* an unnamed index (0…n, or what is left of it after sorting) is dropped; a named index
  (``config_name``, ``trace_source``) becomes the first column(s);
* a missing value (:func:`is_missing`) is an empty cell;
* p-values (``p_value``, ``p_holm``, ``p_bh``, ``…_p``, ``…_p_holm``) below 0.001 read
  ``< 0.001``, never ``0.000`` (:func:`p_text`);
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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "MAX_TABLE_ROWS",
    "WRAPPED_COLUMNS",
    "WRAP_AFTER",
    "TableView",
    "ci_text",
    "is_missing",
    "n_label",
    "number_text",
    "p_text",
    "readable",
    "tool_table",
    "view",
]


def is_missing(value: Any) -> bool:
    """The one missing-value rule of a report: ``None``, NaN, ``pd.NA`` and ``NaT``.

    Any float NaN counts (Python or numpy, any width), and so does a numpy ``NaT``.
    Everything else (``0``, ``""``, ``False``, a text "nan") is a value.

    Examples
    --------
    >>> import numpy as np
    >>> [is_missing(v) for v in (None, float("nan"), np.float32("nan"), pd.NA, pd.NaT)]
    [True, True, True, True, True]
    >>> [is_missing(v) for v in (0, 0.0, "", False, "nan", pd.Timestamp(0))]
    [False, False, False, False, False, False]
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(value))
    return False


def number_text(value: Any, digits: int = 3) -> str:
    """A number as a reader wants it: thousands whole (``12,345``), others to ``digits``.

    Examples
    --------
    >>> number_text(378816.333), number_text(0.0901), number_text(None)
    ('378,816', '0.090', '')
    """
    if is_missing(value):
        return ""
    number = float(value)
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{digits}f}"


def p_text(value: Any, digits: int = 3) -> str:
    """A p-value as a reader wants it: below ``10**-digits`` it is ``"< 0.001"``, never 0.000.

    Examples
    --------
    >>> p_text(0.0004), p_text(1.4e-24), p_text(0.0167), p_text(1.0), p_text(None)
    ('< 0.001', '< 0.001', '0.017', '1.000', '')
    >>> p_text(0.0004, digits=4)
    '0.0004'
    """
    if is_missing(value):
        return ""
    number = float(value)
    floor = 10.0**-digits
    if number < floor:
        return f"< {floor:.{digits}f}"
    return f"{number:.{digits}f}"


def n_label(n: Any, trials: Any = None) -> str:
    """An ``n`` as a reader reads it: ``n=4``, or tasks with the trials beside them.

    Examples
    --------
    >>> n_label(4), n_label(40, 209), n_label(1, 1), n_label(None)
    ('n=4', '40 tasks, 209 trials', '1 task, 1 trial', '')
    """
    if is_missing(n):
        return ""
    if is_missing(trials):
        return f"n={int(n)}"
    from retrieval_lib.stats.clustered import n_text

    return n_text(n, trials)


def ci_text(
    mean: Any, low: Any, high: Any, digits: int = 3, n: Any = None, trials: Any = None
) -> str:
    """``mean [low, high]`` and ``(n=…)`` when given; the interval is left out when missing,
    everything when the mean is (but ``n=0`` is still said). With ``trials``, ``n`` counts
    tasks and is shown as ``(40 tasks, 209 trials)``.

    Examples
    --------
    >>> ci_text(0.5, 0.2, 0.8, 2), ci_text(1.0, float("nan"), float("nan"), 2), ci_text(None, 0, 1)
    ('0.50 [0.20, 0.80]', '1.00', '')
    >>> ci_text(0.5, 0.2, 0.8, 2, n=4), ci_text(None, None, None, n=0)
    ('0.50 [0.20, 0.80] (n=4)', 'n=0')
    >>> ci_text(0.5, 0.2, 0.8, 2, n=40, trials=209)
    '0.50 [0.20, 0.80] (40 tasks, 209 trials)'
    """
    count = n_label(n, trials)
    if is_missing(mean):
        return count
    text = number_text(mean, digits)
    if not is_missing(low) and not is_missing(high):
        text += f" [{number_text(low, digits)}, {number_text(high, digits)}]"
    return f"{text} ({count})" if count else text


def _ci_groups(
    columns: Sequence[str],
) -> list[tuple[str, str | None, str | None, str | None, str | None, str]]:
    """``(mean, low, high, n, trials, label)`` column names of every mean (interval, n and
    trials optional)."""
    names = set(columns)
    groups = []
    for column in columns:
        low: str | None
        high: str | None
        n: str | None
        if column in ("mean", "mean_delta"):
            # a plain ``n`` column stays: it counts the row, not only this mean
            low, high, n, label = "ci_low", "ci_high", None, column.replace("_", " ")
        elif column.endswith("_mean"):
            stem = column.removesuffix("_mean")
            low, high, n, label = f"{stem}_ci_low", f"{stem}_ci_high", f"{stem}_n", stem
        else:
            continue
        if not (low in names and high in names):
            low = high = None
        if n not in names:
            n = None
        trials = f"{n}_trials" if n is not None and f"{n}_trials" in names else None
        if low or n:
            groups.append((column, low, high, n, trials, label))
    return groups


def readable(
    frame: pd.DataFrame,
    *,
    constant: Sequence[str] = (),
    digits: int = 3,
    level: str = "95% CI",
) -> tuple[pd.DataFrame, str]:
    """A display copy of ``frame`` and a caption.

    Each ``<x>_mean`` (or ``mean`` / ``mean_delta``) with ``<x>_ci_low`` / ``<x>_ci_high``
    and/or ``<x>_n`` becomes one text column: ``<x> [level]`` holding ``mean [low, high]
    (n=…)`` when there is an interval, ``<x>`` holding ``mean (n=…)`` otherwise; with
    ``<x>_n_trials`` the n counts tasks and reads ``(40 tasks, 209 trials)`` (and
    ``<x>_n_tasks`` is dropped). A table with ``n_tasks`` and ``n_trials`` columns shows
    them as one ``n`` column (``40 tasks, 209 trials``) in place of ``n``. Columns named in
    ``constant`` that hold a single value are dropped and named in the caption (``name:
    value``); missing values show as empty cells. Row order and every other column are
    kept.

    Examples
    --------
    >>> t = pd.DataFrame({"metric": ["x"], "n": [2], "n_tasks": [2], "n_trials": [5],
    ...     "mean": [0.5], "ci_low": [0.25], "ci_high": [0.75]})
    >>> readable(t)[0].to_dict("list")
    {'metric': ['x'], 'n': ['2 tasks, 5 trials'], 'mean [95% CI]': ['0.500 [0.250, 0.750]']}
    """
    shown = frame.copy()
    captions = []
    for column in constant:
        if column in shown.columns and shown[column].astype(str).nunique() <= 1 and len(shown):
            captions.append(f"{column}: {shown[column].iloc[0]}")
            shown = shown.drop(columns=column)
    if {"n_tasks", "n_trials"} <= set(shown.columns):
        counts = [n_label(k, t) for k, t in zip(shown["n_tasks"], shown["n_trials"], strict=True)]
        anchor = "n" if "n" in shown.columns else "n_tasks"
        position = list(shown.columns).index(anchor)
        shown = shown.drop(columns=[c for c in ("n", "n_tasks", "n_trials") if c in shown])
        position = min(position, len(shown.columns))
        shown.insert(position, "n", counts)
    for mean, low, high, n, trials, label in _ci_groups(list(shown.columns)):
        dropped = {c for c in (mean, low, high, n, trials) if c}
        if n is not None and f"{n}_tasks" in shown.columns and trials:
            dropped.add(f"{n}_tasks")
        before = list(shown.columns)[: list(shown.columns).index(mean)]
        position = len([c for c in before if c not in dropped])
        empty = [None] * len(shown)
        text = [
            ci_text(m, lo, hi, digits, count, k)
            for m, lo, hi, count, k in zip(
                shown[mean],
                shown[low] if low else empty,
                shown[high] if high else empty,
                shown[n] if n else empty,
                shown[trials] if trials else empty,
                strict=True,
            )
        ]
        shown = shown.drop(columns=sorted(dropped))
        shown.insert(position, f"{label} [{level}]" if low else label, text)
    return shown.reset_index(drop=True), "; ".join(captions)


def tool_table(tools: pd.DataFrame) -> pd.DataFrame:
    """The tool-value table (:func:`retrieval_lib.study.analysis.tool_value`) as a reader
    reads it: calls, the ground-truth calls as ``k of n (share)``, files found first, and
    the attributed cost per call with its n.

    Examples
    --------
    >>> t = pd.DataFrame({"tool": ["Read"], "tool_category": ["file_read"], "calls": [4],
    ...     "trials": [2], "failed_calls": [0], "calls_with_ground_truth": [4],
    ...     "surfaced_ground_truth_calls": [3], "share_surfaced_ground_truth": [0.75],
    ...     "ground_truth_files_first_found": [2], "tokens_n": [4], "tokens_per_call": [1500.0],
    ...     "seconds_n": [0], "seconds_per_call": [float("nan")]})
    >>> row = tool_table(t).iloc[0]
    >>> row["surfaced ground truth"], row["tokens per call"], row["seconds per call"]
    ('3 of 4 (0.75)', '1,500 (n=4)', 'n=0')
    """
    keys = [c for c in ("config_family", "is_mcp", "tool", "tool_category") if c in tools.columns]
    out = tools[keys + ["calls", "trials", "failed_calls"]].copy()
    out["surfaced ground truth"] = [
        f"{int(k)} of {int(n)} ({share:.2f})" if n else "no call with ground truth"
        for k, n, share in zip(
            tools["surfaced_ground_truth_calls"],
            tools["calls_with_ground_truth"],
            tools["share_surfaced_ground_truth"],
            strict=True,
        )
    ]
    out["ground-truth files found first"] = tools["ground_truth_files_first_found"]
    out["tokens per call"] = [
        ci_text(m, None, None, 0, n)
        for m, n in zip(tools["tokens_per_call"], tools["tokens_n"], strict=True)
    ]
    out["seconds per call"] = [
        ci_text(m, None, None, 1, n)
        for m, n in zip(tools["seconds_per_call"], tools["seconds_n"], strict=True)
    ]
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- tables

#: The most rows a table shows in a report: a longer table shows its first rows and a note
#: naming the file (CSV/Parquet beside the report) that holds every row.
MAX_TABLE_ROWS = 50
#: Columns with a longer text than this wrap; the others keep each cell on one line.
WRAP_AFTER = 60
#: Columns of explanations, which always wrap (so is any ``…_reason`` column).
WRAPPED_COLUMNS: tuple[str, ...] = ("reason", "note", "notes", "not_computable")


def _cell(value: Any, digits: int) -> str:
    if is_missing(value):
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
    places = [0 if _is_count(c, shown[c]) else digits for c in shown.columns]
    p_columns = [_is_p_value(c) and _is_numeric(shown[c]) for c in shown.columns]
    cells = [
        [
            p_text(v, d) if is_p else _cell(v, d)
            for v, d, is_p in zip(row, places, p_columns, strict=True)
        ]
        for row in shown.itertuples(index=False, name=None)
    ]
    return TableView(columns=columns, cells=cells, numeric=numeric, note=note)

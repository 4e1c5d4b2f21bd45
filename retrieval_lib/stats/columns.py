"""Column conventions of the per-task metrics table, as the statistics read them.

The metrics table (``docs/contracts.md`` §3) has identity columns, retrieval-metric
columns carrying a stage prefix (``file.``, ``read.``, ``chunk.``, ``util.``) and outcome
columns. Metric columns are found generically, by prefix and numeric dtype, so a new
metric in the kernel needs no change here.

What is not a retrieval metric
------------------------------
* **Counts of ground truth** such as ``chunk.n_chunks`` (how many ground-truth chunks a
  task has) describe the task, not the retrieval: any prefixed column whose name after
  the stage prefix starts with ``n_`` is left out of :func:`find_metric_columns`.
* ``funnel.*`` counts (files surfaced, read, edited and their ground-truth hits) and
  ``candidate_set_size`` carry no stage prefix of :data:`METRIC_PREFIXES`: they are
  descriptive sizes, shown by the report but never correlated or tested.
* ``taxonomy.*`` counts (irrelevant retrieval, missed key evidence, ...) are outcomes
  *of* retrieval, per trial, derived from the same file sets as the metrics; testing them
  against the metrics would be circular, so they are not in the families either.

The default family
------------------
Correlation and comparison families default to :data:`KEY_METRICS` (those present in the
table): one metric per question (average precision, reciprocal rank of the first hit,
nDCG@10, recall@10, overall recall and context efficiency of the files surfaced, recall
of the files read, chunk recall). The multiple-testing correction is only as strong as its
family is honest: the near-duplicate cut-offs (``P@1``, ``R@3``, ``F1@5``, ...) would
inflate it without adding a question. ``metrics="all"`` widens it to every metric column.

**One metric, one test.** ``util.read_overlap`` (the seed's
``util_read_overlap_with_relevant_files``, ``|files read ∩ relevant| / |relevant|``) is by
definition ``read.recall`` and equal to it on every trial. Both stay in the documents and
tables under their names, but only ``read.recall`` is a key metric: listing both would
test one quantity twice and make Holm's family count it twice. :data:`IDENTICAL_METRICS`
records the identity.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"task_name": ["a"], "file.AP": [0.5], "read.R@5": [1.0], "reward": [1.0]})
>>> find_metric_columns(df)
['file.AP', 'read.R@5']
>>> find_metric_columns(pd.DataFrame({"chunk.recall": [0.5], "chunk.n_chunks": [4]}))
['chunk.recall']
>>> as_float(pd.Series([True, None, False], dtype=object)).tolist()
[1.0, nan, 0.0]
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd

from retrieval_lib.errors import StatisticsError

__all__ = [
    "IDENTICAL_METRICS",
    "KEY_METRICS",
    "METRIC_PREFIXES",
    "OUTCOME_COLUMNS",
    "BINARY_OUTCOMES",
    "SOURCE_COLUMNS",
    "as_float",
    "is_count_column",
    "find_metric_columns",
    "resolve_metrics",
    "require_columns",
]

#: Stage prefixes of retrieval-metric columns.
METRIC_PREFIXES: tuple[str, ...] = ("file.", "read.", "chunk.", "util.")

#: The default family of retrieval metrics for correlations and comparisons, in display
#: order (see the module notes).
KEY_METRICS: tuple[str, ...] = (
    "file.AP",
    "file.RR",
    "file.nDCG@10",
    "file.R@10",
    "file.recall",
    "file.context_efficiency",
    "read.recall",
    "chunk.recall",
)

#: Metric columns equal by definition on every trial: alias -> the key metric it equals.
IDENTICAL_METRICS: dict[str, str] = {"util.read_overlap": "read.recall"}

#: Outcome columns, in the order reports show them.
OUTCOME_COLUMNS: tuple[str, ...] = (
    "reward",
    "passed",
    "cost_usd",
    "agent_execution_seconds",
    "total_tokens",
)

#: Outcomes that are pass/fail (0/1) rather than continuous.
BINARY_OUTCOMES: frozenset[str] = frozenset({"passed"})

#: Where each trial's tokens and cost figures came from (kept beside the values).
SOURCE_COLUMNS: tuple[str, ...] = ("tokens_source", "cost_source")


def _is_metric_like(series: pd.Series) -> bool:
    """Numeric (not boolean) values, or an object column of numbers and missing values."""
    if pd.api.types.is_bool_dtype(series):
        return False
    if pd.api.types.is_numeric_dtype(series):
        return True
    if series.dtype == object:
        return all(
            v is None
            or (
                isinstance(v, (int, float, np.integer, np.floating))
                and not isinstance(v, (bool, np.bool_))
            )
            for v in series.tolist()
        )
    return False


def find_metric_columns(df: pd.DataFrame, prefixes: Iterable[str] = METRIC_PREFIXES) -> list[str]:
    """Names of the numeric retrieval-metric columns ``df`` holds, in table order.

    Found in the data; the columns the writer puts in a metrics table for given cut-offs
    are :func:`retrieval_lib.metrics.summary.table_metric_columns`.

    Parameters
    ----------
    df : pandas.DataFrame
        A per-task metrics table.
    prefixes : iterable of str
        Stage prefixes that mark a metric column.

    Returns
    -------
    list of str
        Columns whose name starts with one of ``prefixes`` and whose values are numbers
        or missing. Boolean flags (e.g. probe availability) and text columns (e.g. a
        resolution label) are not metrics. An all-missing column counts: a metric nobody
        could compute is still a metric, reported with n = 0.
    """
    prefixes = tuple(prefixes)
    return [
        str(column)
        for column in df.columns
        if str(column).startswith(prefixes)
        and not is_count_column(str(column))
        and _is_metric_like(df[column])
    ]


def is_count_column(column: str) -> bool:
    """Whether a prefixed column is a count of ground truth (``chunk.n_chunks``), not a metric.

    Examples
    --------
    >>> is_count_column("chunk.n_chunks"), is_count_column("chunk.recall")
    (True, False)
    """
    _, dot, name = column.partition(".")
    return bool(dot) and name.startswith("n_")


def resolve_metrics(df: pd.DataFrame, metrics: str | Iterable[str] = "key") -> list[str]:
    """The metric family of an analysis of ``df``.

    Parameters
    ----------
    df : pandas.DataFrame
        Per-task metrics table.
    metrics : "key", "all" or iterable of str
        ``"key"``: the :data:`KEY_METRICS` present in ``df`` (default); ``"all"``: every
        metric column (:func:`find_metric_columns`); a list: exactly those columns, in that
        order (each must be a metric column of ``df``; a name it lacks is refused with
        "did you mean" suggestions, not with the list of every column).

    Raises
    ------
    StatisticsError
        An unknown keyword, or a listed column that ``df`` lacks or that is not a metric.

    Examples
    --------
    >>> df = pd.DataFrame({"file.AP": [0.5], "file.P@1": [1.0], "chunk.n_chunks": [3]})
    >>> resolve_metrics(df), resolve_metrics(df, "all")
    (['file.AP'], ['file.AP', 'file.P@1'])
    """
    available = find_metric_columns(df)
    if isinstance(metrics, str):
        if metrics == "key":
            return [m for m in KEY_METRICS if m in available]
        if metrics == "all":
            return available
        raise StatisticsError(f"metrics must be 'key', 'all' or a list of columns, not {metrics!r}")
    chosen = list(dict.fromkeys(str(m) for m in metrics))
    absent = [m for m in chosen if m not in df.columns]
    if absent:
        from retrieval_lib.suggest import hint

        key = [m for m in KEY_METRICS if m in available]
        raise StatisticsError(
            "no metric column "
            + ", ".join(f"{m!r}{hint(m, available)}" for m in absent)
            + f" in the metrics table; its key metrics: {', '.join(key) or 'none'} "
            f"('all' takes all {len(available)} metric columns)"
        )
    not_metrics = [m for m in chosen if m not in available]
    if not_metrics:
        raise StatisticsError(
            f"not retrieval metric column(s): {', '.join(not_metrics)} (metrics carry a "
            f"stage prefix {', '.join(METRIC_PREFIXES)}, are numeric, and are not counts "
            "of ground truth)"
        )
    return chosen


def require_columns(df: pd.DataFrame, columns: Iterable[str], *, what: str = "table") -> None:
    """Raise :class:`StatisticsError` naming every column of ``columns`` absent from ``df``."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise StatisticsError(
            f"{what} lacks column(s) {', '.join(map(repr, missing))}; "
            f"available: {', '.join(map(str, df.columns))}"
        )


#: ``pandas.api.types.infer_dtype`` kinds (missing cells skipped) that convert to float
#: exactly as :func:`_scalar_to_float` does, cell by cell.
_NUMBER_KINDS = frozenset({"floating", "integer", "mixed-integer-float", "boolean", "empty"})


def _scalar_to_float(value: object) -> float:
    if value is None or value is pd.NA or value is pd.NaT:
        return math.nan
    if isinstance(value, (bool, np.bool_)):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(value)
    raise StatisticsError(f"value {value!r} is not numeric")


def as_float(series: pd.Series) -> pd.Series:
    """Return ``series`` as float64: booleans become 1.0/0.0, None/NA become NaN.

    Raises
    ------
    StatisticsError
        When a value is neither numeric, boolean nor missing (e.g. a string).
    """
    if pd.api.types.is_bool_dtype(series) and not isinstance(series.dtype, pd.BooleanDtype):
        return series.astype(float)
    if pd.api.types.is_numeric_dtype(series) and not isinstance(
        series.dtype, pd.api.extensions.ExtensionDtype
    ):
        return series.astype(float)
    if pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series):
        # nullable / Arrow-backed numbers and booleans: NA becomes NaN, in one pass
        return pd.Series(
            series.to_numpy(dtype=float, na_value=math.nan), index=series.index, dtype=float
        )
    if pd.api.types.infer_dtype(series, skipna=True) in _NUMBER_KINDS:
        # object cells that are all numbers, booleans or missing (the usual case): one pass
        return pd.Series(
            series.to_numpy(dtype=float, na_value=math.nan), index=series.index, dtype=float
        )
    try:
        return pd.Series(
            [_scalar_to_float(v) for v in series.tolist()], index=series.index, dtype=float
        )
    except StatisticsError as exc:
        raise StatisticsError(f"column {series.name!r}: {exc}") from None

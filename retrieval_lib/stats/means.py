"""Means with a bootstrap interval, per value or per task, and the calibration table.

:func:`mean_ci` is the one mean-with-CI of the run report and the study: the task is
the unit of inference when the tasks are given (repeated trials of a task are not
independent; :mod:`retrieval_lib.stats.clustered`, after Miller 2024, arXiv:2411.00640),
either aggregating each task's values first (``method="aggregate"``) or resampling tasks
with all their values (``method="cluster"``). :func:`mean_ci_row` gives it as a table row
with the columns :data:`MEAN_CI_COLUMNS`; :func:`calibration_table` computes it per
candidate-set size slice x evidence type. A value that cannot be computed is NaN with a
``reason``, never 0; the bootstrap is seeded, so the same inputs give the same numbers.
The intervals underneath are :mod:`retrieval_lib.stats.intervals`.

Examples
--------
>>> r = mean_ci([1.0, 0.0, 0.5], tasks=["x", "x", "y"], n_boot=200)
>>> (r.n, r.n_trials, r.mean)
(2, 3, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from retrieval_lib.errors import InputError, StatisticsError
from retrieval_lib.stats.intervals import bootstrap_mean_ci

__all__ = [
    "CALIBRATION_DIMENSIONS",
    "MEAN_CI_COLUMNS",
    "SIZE_SLICE_ORDER",
    "MeanCI",
    "calibration_table",
    "mean_ci",
    "mean_ci_row",
    "row_tasks",
]

#: The calibration slice columns of the metrics table.
CALIBRATION_DIMENSIONS: tuple[str, str] = ("candidate_set_size_slice", "evidence_type")
#: Display order of the candidate-set size slices.
SIZE_SLICE_ORDER: tuple[str, ...] = ("small", "medium", "large")


@dataclass(frozen=True)
class MeanCI:
    """Mean of the non-missing values with a percentile-bootstrap interval.

    ``ci_low``/``ci_high`` are NaN (with ``reason``) when fewer than two values (tasks)
    exist; ``mean`` is NaN when there is none. With tasks given to :func:`mean_ci`, ``n``
    counts tasks and ``n_trials`` the trials behind them; without, ``n_trials`` is None.
    """

    n: int
    mean: float
    ci_low: float
    ci_high: float
    reason: str | None
    n_trials: int | None = None


def mean_ci(
    values: Iterable[float] | np.ndarray | pd.Series,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    tasks: Iterable[Any] | np.ndarray | pd.Series | None = None,
    method: str = "aggregate",
) -> MeanCI:
    """Mean and ``1 - alpha`` percentile-bootstrap CI of the finite values.

    Without ``tasks`` every value is one observation. With ``tasks`` (the task of each
    value) the task is the unit: ``method="aggregate"`` averages each task's values first
    and gives the mean over tasks with a bootstrap of the task means
    (:func:`~retrieval_lib.stats.clustered.task_mean_ci`); ``method="cluster"`` gives the
    mean over the values with a cluster bootstrap that resamples tasks with all their
    values (:func:`~retrieval_lib.stats.clustered.cluster_bootstrap_mean`). ``n`` is then
    the number of tasks and ``n_trials`` the number of values.

    Parameters
    ----------
    values
        Observations; NaN/None are left out (missing is not zero).
    alpha
        Two-sided error rate: the interval holds the ``alpha/2`` and ``1 - alpha/2``
        quantiles of the bootstrap means.
    n_boot
        Bootstrap resamples (each draws ``n`` values with replacement).
    seed
        Seed of the bootstrap generator (see
        :func:`~retrieval_lib.stats.intervals.bootstrap_mean_ci`, which does the resampling).
    tasks
        The task of each value (same length), or None.
    method
        ``"aggregate"`` or ``"cluster"`` (only with ``tasks``).

    Examples
    --------
    >>> r = mean_ci([1.0, 1.0, 1.0])
    >>> (r.n, r.mean, r.ci_low, r.ci_high)
    (3, 1.0, 1.0, 1.0)
    >>> mean_ci([0.5]).reason
    'n=1: no interval from a single value'
    >>> r = mean_ci([1.0, 0.0, 0.5], tasks=["x", "x", "y"], n_boot=200)
    >>> (r.n, r.n_trials, r.mean)
    (2, 3, 0.5)
    """
    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}")
    if n_boot < 1:
        raise InputError(f"n_boot must be at least 1, got {n_boot}")
    if tasks is not None:
        from retrieval_lib.stats.clustered import cluster_bootstrap_mean, task_mean_ci

        if method not in ("aggregate", "cluster"):
            raise InputError(f"method must be 'aggregate' or 'cluster', not {method!r}")
        estimate = task_mean_ci if method == "aggregate" else cluster_bootstrap_mean
        try:
            r = estimate(
                pd.Series(list(values), dtype=object),
                pd.Series(list(tasks), dtype=object),
                alpha=alpha,
                n_boot=n_boot,
                seed=seed,
            )
        except StatisticsError as exc:
            raise InputError(str(exc)) from None
        return MeanCI(r.n_tasks, r.mean, r.ci_low, r.ci_high, r.reason, r.n_trials)
    array = pd.to_numeric(pd.Series(list(values), dtype=object), errors="coerce").to_numpy(
        dtype=np.float64
    )
    finite = array[np.isfinite(array)]
    n = int(finite.size)
    if n == 0:
        return MeanCI(0, math.nan, math.nan, math.nan, "no computable value")
    mean = float(finite.mean())
    if n == 1:
        return MeanCI(1, mean, math.nan, math.nan, "n=1: no interval from a single value")
    low, high = bootstrap_mean_ci(finite, n_boot=n_boot, seed=seed, alpha=alpha)
    return MeanCI(n, mean, low, high, None)


def row_tasks(table: pd.DataFrame) -> pd.Series:
    """The task of each row (the matched comparison's key); each row its own without one.

    Examples
    --------
    >>> row_tasks(pd.DataFrame({"x": [1, 2]})).tolist()
    ['row 0', 'row 1']
    """
    if "task_name" in table.columns:
        from retrieval_lib.stats.clustered import task_keys

        return task_keys(table)
    return pd.Series([f"row {i}" for i in range(len(table))], index=table.index)


def mean_ci_row(
    values: pd.Series,
    alpha: float,
    n_boot: int,
    seed: int,
    tasks: pd.Series | None = None,
    method: str = "aggregate",
) -> dict[str, Any]:
    """:func:`mean_ci` as one table row, keyed by :data:`MEAN_CI_COLUMNS`.

    ``n`` and ``n_tasks`` are the tasks (the values, without ``tasks``), ``n_trials`` the
    values behind them.

    Examples
    --------
    >>> row = mean_ci_row(pd.Series([1.0, 0.0, 0.5]), 0.05, 200, 0, pd.Series(["x", "x", "y"]))
    >>> row["n_tasks"], row["n_trials"], row["mean"]
    (2, 3, 0.5)
    """
    r = mean_ci(values, alpha=alpha, n_boot=n_boot, seed=seed, tasks=tasks, method=method)
    n_trials = r.n if r.n_trials is None else r.n_trials
    return {
        "n": r.n,
        "n_tasks": r.n,
        "n_trials": n_trials,
        "mean": r.mean,
        "ci_low": r.ci_low,
        "ci_high": r.ci_high,
        "reason": r.reason,
    }


#: Columns of a mean with its CI in a table (``n`` = ``n_tasks``), as :func:`mean_ci_row`.
MEAN_CI_COLUMNS = ["n", "n_tasks", "n_trials", "mean", "ci_low", "ci_high", "reason"]


def calibration_table(
    table: pd.DataFrame,
    metric: str,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean and CI of ``metric`` per candidate-set size slice × evidence type.

    Trials without a slice (no trace) are left out. The slice is a property of the trial
    (one task's trials may fall into different slices), so the mean is over the trials of
    the slice and its CI a cluster bootstrap resampling tasks with all their trials in the
    slice (:func:`~retrieval_lib.stats.clustered.cluster_bootstrap_mean`). Rows follow the
    size order small, medium, large, then evidence type alphabetically. Columns:
    ``candidate_set_size_slice, evidence_type, n, n_tasks, n_trials, mean, ci_low,
    ci_high, reason`` (``n`` = ``n_tasks``).

    Examples
    --------
    >>> t = pd.DataFrame({"candidate_set_size_slice": ["large", "small", "small", None],
    ...                   "evidence_type": ["mcp", "local", "local", None],
    ...                   "file.AP": [0.2, 0.4, 0.6, 0.9]})
    >>> calibration_table(t, "file.AP")[["candidate_set_size_slice", "n"]].values.tolist()
    [['small', 2], ['large', 1]]
    """
    size_col, evidence_col = CALIBRATION_DIMENSIONS
    columns = [size_col, evidence_col, *MEAN_CI_COLUMNS]
    if metric not in table.columns:
        return pd.DataFrame(columns=columns)
    sliced = table.dropna(subset=[size_col, evidence_col])
    tasks = row_tasks(sliced)
    order = {name: i for i, name in enumerate(SIZE_SLICE_ORDER)}
    keys = sorted(
        {(str(s), str(e)) for s, e in zip(sliced[size_col], sliced[evidence_col], strict=True)},
        key=lambda k: (order.get(k[0], len(order)), k[0], k[1]),
    )
    rows = []
    for size, evidence in keys:
        in_cell = (sliced[size_col].astype(str) == size) & (
            sliced[evidence_col].astype(str) == evidence
        )
        rows.append(
            {size_col: size, evidence_col: evidence}
            | mean_ci_row(
                sliced.loc[in_cell, metric], alpha, n_boot, seed, tasks[in_cell], method="cluster"
            )
        )
    return pd.DataFrame(rows, columns=columns)

"""The task as the unit of inference: per-task aggregation and the cluster bootstrap.

Repeated trials of one task share its difficulty: they are not independent observations.
Treating them as such inflates ``n``, narrows confidence intervals and shrinks p-values
(pseudo-replication: with every trial copied four times, a trial-level bootstrap CI
halves while a task-level one does not move). Every pooled estimate of the library uses
one of the two standard remedies (E. Miller, "Adding Error Bars to Evals: A Statistical
Approach to Language Model Evaluations", arXiv:2411.00640, 2024), both here:

* **aggregate first**: :func:`aggregate_by_task` (one row per task within each group of
  the estimate, the mean of each column over the task's trials with a value), then a
  statistic over tasks: :func:`task_mean_ci` (the mean over tasks, each counted once,
  with the percentile bootstrap of the task means), :func:`correlate_by_task`;
* **cluster bootstrap**: :func:`cluster_bootstrap_mean`, the mean over trials with a
  percentile interval from resampling *tasks* with all their trials. Used where the
  grouping is a property of the trial (a retrieval tier, a calibration slice), so one
  task's trials may fall into different groups: the estimate is about trials, its
  uncertainty about tasks.

The task key is the canonical ``task_name`` as text, as the matched comparison has it
(:func:`retrieval_lib.stats.paired.match_tasks`). Missing group keys (e.g. an unknown
``model``) form their own group, as in the matching (missing equals missing).

Examples
--------
>>> import pandas as pd
>>> trials = pd.DataFrame({"task_name": ["a", "a", "a", "b"],
...                        "reward": [1.0, 1.0, 0.0, 0.0]})
>>> aggregate_by_task(trials, ["reward"])[["task_name", "n_trials", "reward"]].values.tolist()
[['a', 3, 0.6666666666666666], ['b', 1, 0.0]]
>>> r = cluster_bootstrap_mean(trials["reward"], trials["task_name"], n_boot=200)
>>> (r.n_tasks, r.n_trials, r.mean)
(2, 4, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import (
    BINARY_OUTCOMES,
    OUTCOME_COLUMNS,
    as_float,
    require_columns,
    resolve_metrics,
)

__all__ = [
    "TASK_COLUMN",
    "ClusterMeanCI",
    "aggregate_by_task",
    "cluster_bootstrap_mean",
    "cluster_bootstrap_means",
    "correlate_by_task",
    "majority_pass",
    "n_text",
    "task_mean_ci",
    "task_mean_cis",
    "task_keys",
]

#: Column holding the canonical task (the matched comparison's task key).
TASK_COLUMN = "task_name"
_ONE_TASK = "one task: no interval from a single task"
_BOOT_CELLS = 4_000_000  # resampled task indices per chunk (bounds memory to ~32 MB)


def task_keys(trials: pd.DataFrame, task: str = TASK_COLUMN) -> pd.Series:
    """The canonical task key of each trial: ``task_name`` as text, as ``match_tasks`` has it.

    Examples
    --------
    >>> task_keys(pd.DataFrame({"task_name": ["x", 3]})).tolist()
    ['x', '3']
    """
    if task not in trials.columns:
        raise StatisticsError(f"the trial table has no {task!r} column to group tasks by")
    return trials[task].astype(str)


def n_text(n_tasks: Any, n_trials: Any) -> str:
    """How an ``n`` is shown: tasks, with the trial count beside it.

    Examples
    --------
    >>> n_text(40, 209), n_text(1, 1), n_text(3, 3)
    ('40 tasks, 209 trials', '1 task, 1 trial', '3 tasks, 3 trials')
    """
    tasks, trials = int(n_tasks), int(n_trials)
    return f"{tasks} task{'' if tasks == 1 else 's'}, {trials} trial{'' if trials == 1 else 's'}"


def aggregate_by_task(
    trials: pd.DataFrame,
    columns: Sequence[str],
    by: Sequence[str] = (),
    *,
    task: str = TASK_COLUMN,
) -> pd.DataFrame:
    """One row per task (within each ``by`` group): the mean of each column over its trials.

    Parameters
    ----------
    trials : pandas.DataFrame
        One row per trial.
    columns : sequence of str
        Numeric (or boolean) columns to average; booleans become 1.0/0.0 (a pass rate),
        missing values are left out of the mean (missing is not zero); a task without a
        value of a column has NaN there.
    by : sequence of str
        Group columns of the estimate (e.g. ``config_name``, ``model``); a missing key is
        its own group.
    task : str
        Task column (default ``task_name``, the matched comparison's key).

    Returns
    -------
    pandas.DataFrame
        Columns ``*by, task, n_trials``, then per column ``<column>`` (the task mean) and
        ``<column>:n_trials`` (trials with a value); sorted by the keys.

    Examples
    --------
    >>> t = pd.DataFrame({"config_name": ["b", "b", "b", "t"], "task_name": ["x", "x", "y", "x"],
    ...                   "reward": [1.0, None, 0.5, 0.0], "passed": [True, False, None, False]})
    >>> out = aggregate_by_task(t, ["reward", "passed"], by=["config_name"])
    >>> out[["config_name", "task_name", "n_trials", "reward", "reward:n_trials", "passed"]].values.tolist()
    [['b', 'x', 2, 1.0, 1, 0.5], ['b', 'y', 1, 0.5, 1, nan], ['t', 'x', 1, 0.0, 1, 0.0]]
    """
    by = list(by)
    columns = list(dict.fromkeys(columns))
    missing = [c for c in [*by, *columns] if c not in trials.columns]
    if missing:
        raise StatisticsError(f"the trial table has no column(s) {', '.join(missing)}")
    work = pd.DataFrame({name: trials[name].astype(object) for name in by}, index=trials.index)
    work[task] = task_keys(trials, task)
    for column in columns:
        work[column] = as_float(trials[column]).to_numpy(dtype=float)
    keys = [*by, task]
    out_columns = [*keys, "n_trials"]
    for column in columns:
        out_columns += [column, f"{column}:n_trials"]
    if work.empty:
        return pd.DataFrame(columns=out_columns)
    groups = work.groupby(keys, sort=True, dropna=False)
    out = groups.size().rename("n_trials").to_frame()
    if columns:
        means = groups[columns].mean()
        counts = groups[columns].count()
        for column in columns:
            out[column] = means[column].astype(float)
            out[f"{column}:n_trials"] = counts[column].astype("int64")
    out = out.reset_index()
    for name in by:  # keep missing keys missing (None), not NaN of another type
        out[name] = out[name].astype(object).where(out[name].notna(), None)
    return out[out_columns]


@dataclass(frozen=True)
class ClusterMeanCI:
    """Mean over trials with a task-cluster bootstrap interval.

    Attributes
    ----------
    n_tasks, n_trials : int
        Tasks and trials with a value (the estimate's ``n`` is ``n_tasks``).
    mean : float
        Mean over those trials (NaN when none).
    ci_low, ci_high : float
        Percentile interval of the bootstrap means (NaN with ``reason`` below two tasks).
    reason : str or None
        Why the interval (or the mean) is missing.
    """

    n_tasks: int
    n_trials: int
    mean: float
    ci_low: float
    ci_high: float
    reason: str | None


def cluster_bootstrap_mean(
    values: Iterable[Any] | np.ndarray | pd.Series,
    tasks: Iterable[Any] | np.ndarray | pd.Series,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> ClusterMeanCI:
    """Mean over trials and its cluster-bootstrap CI, resampling tasks with all their trials.

    Parameters
    ----------
    values : array-like
        One value per trial; missing (None/NaN) values are left out, and a task whose
        trials all lack a value is not a task of the estimate.
    tasks : array-like
        The task of each trial (same length as ``values``), e.g. :func:`task_keys`.
    alpha : float
        The interval holds the ``alpha/2`` and ``1 - alpha/2`` quantiles (linear
        interpolation, as :func:`~retrieval_lib.stats.intervals.bootstrap_mean_ci`).
    n_boot : int
        Bootstrap resamples.
    seed : int
        Seed of ``numpy.random.Generator(PCG64(seed))`` (``numpy.random.default_rng(seed)``).

    Returns
    -------
    ClusterMeanCI

    Notes
    -----
    With ``k`` tasks (sorted by key), ``S_j`` the sum and ``c_j`` the number of trial values
    of task ``j``, resample ``b`` draws ``u = rng.random(k)`` (the ``b``-th row of
    ``rng.random((n_boot, k))``, drawn in chunks of rows) and the tasks
    ``j_i = floor(k * u_i)``; its mean is ``sum(S[j]) / sum(c[j])``: every trial of a
    drawn task counts, once per draw. The estimate is the plain mean over trials
    ``sum(S) / sum(c)``. Vectorised: 50,000 tasks × 10,000 resamples is 5·10^8 draws
    (benchmark figures: ``benchmarks/README.md``). Reference: Miller (2024),
    arXiv:2411.00640, clustered standard errors.

    Raises
    ------
    StatisticsError
        ``values`` and ``tasks`` of different lengths, ``n_boot < 1`` or ``alpha``
        outside (0, 1).

    Examples
    --------
    >>> r = cluster_bootstrap_mean([1.0, 1.0, 0.0, 0.0, 1.0], ["a", "a", "b", "b", "c"],
    ...                            n_boot=500, seed=1)
    >>> (r.n_tasks, r.n_trials, r.mean), 0.0 <= r.ci_low < r.mean < r.ci_high <= 1.0
    ((3, 5, 0.6), True)
    >>> cluster_bootstrap_mean([0.5, None], ["a", "b"]).reason
    'one task: no interval from a single task'
    """
    return cluster_bootstrap_means([values], tasks, alpha=alpha, n_boot=n_boot, seed=seed)[0]


def task_mean_ci(
    values: Iterable[Any] | np.ndarray | pd.Series,
    tasks: Iterable[Any] | np.ndarray | pd.Series,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> ClusterMeanCI:
    """Aggregate first: the mean over tasks of each task's mean, with a bootstrap over tasks.

    Each task's value is the mean of its trials with a value (the rule of the matched
    comparison, ``combine="mean"``); the estimate is the mean of those task means and its
    interval the percentile bootstrap of
    :func:`~retrieval_lib.stats.intervals.bootstrap_mean_ci` over them, so ``n`` is the
    number of tasks. Without repeats it is the plain mean with the plain bootstrap.

    Parameters
    ----------
    values, tasks : array-like
        One value and one task per trial; missing values are left out.
    alpha, n_boot, seed
        As :func:`~retrieval_lib.stats.intervals.bootstrap_mean_ci`.

    Returns
    -------
    ClusterMeanCI
        ``mean`` is the mean of the task means.

    Examples
    --------
    >>> r = task_mean_ci([1.0, 1.0, 0.0, 0.0], ["a", "a", "a", "b"], n_boot=200)
    >>> (r.n_tasks, r.n_trials, round(r.mean, 4))
    (2, 4, 0.3333)
    """
    return task_mean_cis([values], tasks, alpha=alpha, n_boot=n_boot, seed=seed)[0]


def _shared_columns(
    columns: Sequence[Any], tasks: Any
) -> tuple[list[ClusterMeanCI | None], list[tuple[list[int], list[np.ndarray], np.ndarray, int]]]:
    """``(results, parts)``: ``results`` a slot per column, filled where a column has no
    value; ``parts`` the columns with the same finite rows, sharing one set of task codes:
    ``(members, their finite values, codes, k)``; a part of one task is a result already."""
    keys = pd.Series(list(tasks) if not isinstance(tasks, pd.Series) else tasks).astype(str)
    key_values = keys.to_numpy()
    results: list[ClusterMeanCI | None] = [None] * len(columns)
    parts: list[tuple[list[int], list[np.ndarray], np.ndarray, int]] = []
    seen: dict[bytes, int] = {}
    for j, values in enumerate(columns):
        array = as_float(
            pd.Series(list(values) if not isinstance(values, pd.Series) else values)
        ).to_numpy(dtype=float)
        if len(keys) != array.size:
            raise StatisticsError(
                f"values ({array.size}) and tasks ({len(keys)}) must have one entry per trial"
            )
        finite = np.isfinite(array)
        if not finite.any():
            results[j] = ClusterMeanCI(0, 0, math.nan, math.nan, math.nan, "no computable value")
            continue
        signature = np.packbits(finite).tobytes()
        if signature not in seen:
            codes, _ = pd.factorize(key_values[finite], sort=True)
            seen[signature] = len(parts)
            parts.append(([], [], codes, int(codes.max()) + 1))
        members, finite_values, _, _ = parts[seen[signature]]
        members.append(j)
        finite_values.append(array[finite])
    for members, finite_values, codes, k in parts:
        if k == 1:  # one task: the mean is the same by either rule, and no interval
            for j, v in zip(members, finite_values, strict=True):
                mean = float(np.bincount(codes, weights=v, minlength=1)[0] / codes.size)
                results[j] = ClusterMeanCI(1, codes.size, mean, math.nan, math.nan, _ONE_TASK)
    return results, [part for part in parts if part[3] > 1]


def cluster_bootstrap_means(
    columns: Sequence[Iterable[Any] | np.ndarray | pd.Series],
    tasks: Iterable[Any] | np.ndarray | pd.Series,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[ClusterMeanCI]:
    """:func:`cluster_bootstrap_mean` of several columns over the same trials and tasks.

    Columns whose values are missing on the same trials resample the same tasks (the draws
    depend only on the seed and the number of tasks), so they share one draw: each result
    equals its own :func:`cluster_bootstrap_mean` call (e.g. reward and pass rate of a tier).

    Examples
    --------
    >>> tasks = ["a", "a", "b", "c", "c"]
    >>> both = cluster_bootstrap_means([[1, 0, 1, 1, 0], [0.5, 0, 1, 1, 1]], tasks, n_boot=300)
    >>> both == [cluster_bootstrap_mean([1, 0, 1, 1, 0], tasks, n_boot=300),
    ...          cluster_bootstrap_mean([0.5, 0, 1, 1, 1], tasks, n_boot=300)]
    True
    """
    if n_boot < 1:
        raise StatisticsError(f"n_boot must be at least 1, not {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise StatisticsError(f"alpha must be between 0 and 1, not {alpha}")
    results, parts = _shared_columns(columns, tasks)
    for members, finite_values, codes, k in parts:
        n_trials = int(codes.size)
        counts = np.bincount(codes, minlength=k).astype(float)
        sums = [np.bincount(codes, weights=v, minlength=k) for v in finite_values]
        means_of = [float(total.sum() / counts.sum()) for total in sums]
        rng = np.random.Generator(np.random.PCG64(seed))
        means = np.empty((len(members), n_boot))
        equal = bool(np.all(counts == counts[0]))
        chunk = max(1, _BOOT_CELLS // k)
        gathered = np.empty((min(chunk, n_boot), k))
        for start in range(0, n_boot, chunk):
            stop = min(start + chunk, n_boot)
            drawn = rng.random((stop - start, k))
            drawn *= k
            idx = drawn.astype(np.intp)
            out = gathered[: stop - start]
            denominator: Any = k * counts[0]
            if not equal:
                np.take(counts, idx, mode="clip", out=out)
                denominator = out.sum(axis=1)
            for i, total in enumerate(sums):
                np.take(total, idx, mode="clip", out=out)
                means[i, start:stop] = out.sum(axis=1) / denominator
        for i, j in enumerate(members):
            low, high = np.quantile(means[i], [alpha / 2.0, 1.0 - alpha / 2.0])
            results[j] = ClusterMeanCI(k, n_trials, means_of[i], float(low), float(high), None)
    return [r for r in results if r is not None]


def task_mean_cis(
    columns: Sequence[Iterable[Any] | np.ndarray | pd.Series],
    tasks: Iterable[Any] | np.ndarray | pd.Series,
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> list[ClusterMeanCI]:
    """:func:`task_mean_ci` of several columns over the same trials and tasks; columns with
    a value on the same trials share one bootstrap draw
    (:func:`~retrieval_lib.stats.intervals.bootstrap_mean_cis`), so each result equals
    its own :func:`task_mean_ci` call.

    Examples
    --------
    >>> tasks = ["a", "a", "b", "c"]
    >>> task_mean_cis([[1, 0, 1, 0], [1, 1, 0, 0]], tasks, n_boot=200) == [
    ...     task_mean_ci([1, 0, 1, 0], tasks, n_boot=200),
    ...     task_mean_ci([1, 1, 0, 0], tasks, n_boot=200)]
    True
    """
    from retrieval_lib.stats.intervals import bootstrap_mean_cis

    results, parts = _shared_columns(columns, tasks)
    for members, finite_values, codes, k in parts:
        n_trials = int(codes.size)
        sizes = np.bincount(codes, minlength=k)
        task_means = [np.bincount(codes, weights=v, minlength=k) / sizes for v in finite_values]
        intervals = bootstrap_mean_cis(task_means, n_boot=n_boot, seed=seed, alpha=alpha)
        for j, values, (low, high) in zip(members, task_means, intervals, strict=True):
            results[j] = ClusterMeanCI(k, n_trials, float(values.mean()), low, high, None)
    return [r for r in results if r is not None]


def majority_pass(pass_rate: pd.Series) -> pd.Series:
    """A task's pass/fail from its pass rate: more than half passed; an even split is NaN.

    >>> majority_pass(pd.Series([1.0, 0.5, 1 / 3])).tolist()
    [1.0, nan, 0.0]
    """
    array = pass_rate.to_numpy(dtype=float)
    out = np.where(array > 0.5, 1.0, np.where(array < 0.5, 0.0, np.nan))
    return pd.Series(out, index=pass_rate.index)


def _task_table(
    rows: pd.DataFrame,
    columns: list[str],
    outcomes: list[str],
    group_by: Sequence[str],
    task: str,
) -> pd.DataFrame:
    """A row per task: column means, binary outcomes as the majority, ``errored`` if any
    trial was flagged."""
    agg = aggregate_by_task(rows, [*columns, "_flagged"], by=group_by, task=task)
    for outcome in outcomes:
        if outcome in BINARY_OUTCOMES:
            agg[outcome] = majority_pass(agg[outcome])
    agg["errored"] = agg["_flagged"] > 0  # a task with a flagged trial is flagged
    return agg


def _with_trials(result: pd.DataFrame, agg: pd.DataFrame, by: str | None) -> pd.DataFrame:
    """``result`` with ``n_trials`` after ``n``: the trials of the tasks of each row."""
    # each group's rows and each column's finite mask computed once, not per result row
    labels = None if by is None else agg[by].astype(str).to_numpy()
    rows_of = {
        group: np.arange(len(agg)) if labels is None else np.flatnonzero(labels == group)
        for group in set(result["group"])
    }
    finite = {c: np.isfinite(agg[c].to_numpy(float)) for c in {*result["x"], *result["y"]}}
    n_trials = agg["n_trials"].to_numpy()
    counts = []
    for group, x, y in result[["group", "x", "y"]].itertuples(index=False):
        rows = rows_of[group]
        counts.append(int(n_trials[rows][finite[x][rows] & finite[y][rows]].sum()))
    result.insert(list(result.columns).index("n") + 1, "n_trials", counts)
    return result


def correlate_by_task(
    df: pd.DataFrame,
    metrics: str | Sequence[str] = "key",
    outcomes: Iterable[str] | None = None,
    by: str | None = "config_name",
    min_n: int = 5,
    *,
    exclude_flagged: bool = False,
    task: str = TASK_COLUMN,
    seed: int = 0,
) -> pd.DataFrame:
    """:func:`~retrieval_lib.stats.correlation.correlate_metrics` over one value per task.

    Repeated trials are averaged per task first (within each ``by`` group, and over all
    trials for the pooled group), so every correlation's ``n`` counts tasks. A binary
    outcome (``passed``) becomes the task's majority result: passed when more than half of
    its trials passed, failed when fewer, left out on an even split (the rule of the
    matched McNemar test). An errored or timed-out trial marks its task as flagged
    (``n_flagged`` counts tasks); ``exclude_flagged`` leaves such trials out before
    averaging.

    Parameters
    ----------
    df : pandas.DataFrame
        One row per trial (needs ``task_name``).
    metrics, outcomes, by, min_n, exclude_flagged, seed
        As :func:`~retrieval_lib.stats.correlation.correlate_metrics` (``seed``: of the
        Monte Carlo permutation p-values).
    task : str
        Task column (default ``task_name``, the matched comparison's key).

    Returns
    -------
    pandas.DataFrame
        The columns of ``correlate_metrics`` with ``n_trials`` after ``n``: the trials of
        the ``n`` tasks (``n`` counts tasks with a value of both ``x`` and ``y``).

    Examples
    --------
    >>> df = pd.DataFrame({"config_name": ["a"] * 7,
    ...     "task_name": ["t1", "t1", "t2", "t3", "t4", "t5", "t5"],
    ...     "file.AP": [0.1, 0.3, 0.2, 0.3, 0.5, 0.9, 0.7],
    ...     "reward": [0.0, 0.0, 0.5, 0.4, 1.0, 1.0, 1.0]})
    >>> out = correlate_by_task(df, outcomes=["reward"], by=None)
    >>> out[["method", "n", "n_trials"]].values.tolist()
    [['pearson', 5, 7], ['spearman', 5, 7]]
    """
    from retrieval_lib.stats.correlation import (
        POOLED_GROUP,
        correlate_metrics,
        flagged_trials,
    )

    require_columns(df, [task])
    metric_list = resolve_metrics(df, metrics)
    outcome_list = [o for o in (OUTCOME_COLUMNS if outcomes is None else outcomes) if o in df]
    flagged = flagged_trials(df)
    rows = df.assign(_flagged=flagged.astype(float))
    if exclude_flagged:
        rows = rows[~flagged]
    columns = list(dict.fromkeys([*metric_list, *outcome_list]))

    pooled = _task_table(rows, columns, outcome_list, (), task)
    result = correlate_metrics(pooled, metric_list, outcome_list, by=None, min_n=min_n, seed=seed)
    parts = [_with_trials(result, pooled, None)]
    if by is not None:
        require_columns(df, [by])
        grouped = _task_table(rows, columns, outcome_list, [by], task)
        grouped[by] = grouped[by].astype("string").fillna("(none)")
        result = correlate_metrics(
            grouped, metric_list, outcome_list, by=by, min_n=min_n, seed=seed
        )
        result = result[result["group"] != POOLED_GROUP].reset_index(drop=True)
        parts.append(_with_trials(result, grouped, by))
    frames = [p for p in parts if not p.empty]
    if not frames:
        return parts[0]
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["group", "x", "y", "method"], kind="mergesort").reset_index(drop=True)

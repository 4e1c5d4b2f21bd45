"""Associations between retrieval metrics and task outcomes.

Every function returns a one-row tidy DataFrame with the stable columns
:data:`CORRELATION_COLUMNS`; :func:`correlate_metrics` stacks them for every metric ×
outcome, per config and pooled, and adds multiple-testing adjusted p-values. These are
**associations**, never causal effects: a retrieval metric that goes with a higher reward
says nothing about what retrieval would do to the reward if changed.

Conventions
-----------
* Rows where either value is missing are dropped pair by pair; ``n`` is what remains.
  Below ``min_n`` pairs (default 5), or when a column is constant, the row is
  ``computable=False`` with the ``reason``; ``r``, CI and p are NaN (never 0).
* **p-values** (``p_method``) come from the permutation distribution of the statistic
  (:func:`~retrieval_lib.stats.permutation.permutation_p`): ``"exact"`` (all n!
  pairings) up to n = 8, ``"monte_carlo"`` (10,000 seeded pairings, argument ``seed``) up
  to n = 100, scipy's ``"asymptotic"`` p above (its t approximation gives 1.4e-24 for a
  perfect Spearman correlation of n = 5, whose exact two-sided p is 2/120).
* 95% CIs by Fisher z: ``SE = 1/sqrt(n-3)`` for Pearson and point-biserial (Pearson r with
  a 0/1 outcome); the **Bonett–Wright (2000)** variance ``(1 + r^2/2) / (n-3)`` for
  Spearman (average ranks for ties), as ``1/(n-3)`` is too narrow for rank correlations.
  **A CI that cannot be computed is missing** (NaN) with the reason: |r| = 1, n <= 3, an
  AUC of 0 or 1. It is never the degenerate [1, 1]; the row stays ``computable``.
* AUC (method ``"auc"``): ``U / (n1 * n0)`` from ``scipy.stats.mannwhitneyu`` with a
  Hanley–McNeil (1982) CI, and ``rank_biserial = 2*AUC - 1`` (Cureton 1956; Kerby 2014);
  ``r``, ``ci_low`` and ``ci_high`` are NaN on an AUC row.
* Families (:func:`correlate_metrics`): Holm and Benjamini–Hochberg adjust the p-values
  within one **group** (a config, or the pooled table) and one **family of methods**:
  ``"rank"`` (Spearman for continuous outcomes, AUC for pass/fail) and ``"linear"``
  (Pearson, point-biserial). Spearman and Pearson of one metric × outcome test the same
  null hypothesis with two statistics; both in one family would double ``m`` for one
  question, so each family holds one test per cell. The rank family is the primary one
  (the report's heatmap marks it); the linear family is a sensitivity view.
* Errored or timed-out trials are kept (their reward is what the verifier gave) and
  counted in ``n_flagged``; ``exclude_flagged=True`` leaves them out.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"file.AP": [0.1, 0.2, 0.3, 0.5, 0.9],
...                    "reward": [0.0, 0.5, 0.4, 1.0, 1.0]})
>>> row = spearman(df, "file.AP", "reward").iloc[0]
>>> int(row["n"]), round(float(row["r"]), 4)
(5, 0.8721)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from retrieval_lib import lazylibs
from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import (
    BINARY_OUTCOMES,
    OUTCOME_COLUMNS,
    as_float,
    require_columns,
    resolve_metrics,
)
from retrieval_lib.stats.multiple import benjamini_hochberg, holm
from retrieval_lib.stats.permutation import N_RESAMPLES, permutation_p

__all__ = [
    "CORRELATION_COLUMNS",
    "FLAG_COLUMNS",
    "METHOD_FAMILY",
    "POOLED_GROUP",
    "auc",
    "correlate_metrics",
    "flagged_trials",
    "pearson",
    "point_biserial",
    "spearman",
]

#: Stable columns of every correlation result, in order.
CORRELATION_COLUMNS: tuple[str, ...] = (
    "x",
    "y",
    "method",
    "n",
    "r",
    "ci_low",
    "ci_high",
    "p_value",
    "p_method",
    "auc",
    "auc_ci_low",
    "auc_ci_high",
    "rank_biserial",
    "computable",
    "reason",
)

#: Multiple-testing family of each method (see the module notes).
METHOD_FAMILY: dict[str, str] = {
    "spearman": "rank",
    "auc": "rank",
    "pearson": "linear",
    "point_biserial": "linear",
}

#: Boolean columns that flag a trial as errored or timed out.
FLAG_COLUMNS: tuple[str, ...] = ("errored", "timed_out")

#: Value of the ``group`` column for the analysis over all configs together.
POOLED_GROUP = "(pooled)"

_Z_975 = 1.959963984540054  # standard normal 97.5% quantile
_R_ONE_TOL = 1e-12  # |r| within this of 1 is a perfect correlation (rounding of scipy's r)


def _row(x: str, y: str, method: str, n: int, **tested: Any) -> dict[str, object]:
    """A result row: the statistics ``tested`` gives (with their ``reason``, if any), or
    only ``reason`` and NaN statistics for a row that could not be computed."""
    row: dict[str, Any] = dict.fromkeys(CORRELATION_COLUMNS, math.nan)
    row.update(x=x, y=y, method=method, n=int(n), p_method=None, reason=None)
    row.update(tested, computable="p_value" in tested)
    row["rank_biserial"] = 2.0 * float(row["auc"]) - 1.0
    return row


def _frame(row: dict[str, object]) -> pd.DataFrame:
    return pd.DataFrame([row], columns=list(CORRELATION_COLUMNS))


def _columns(df: pd.DataFrame, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    require_columns(df, [x, y])
    return as_float(df[x]).to_numpy(), as_float(df[y]).to_numpy()


def _constant(values: np.ndarray, name: str) -> str | None:
    if values.size and np.all(values == values[0]):
        return f"{name} is constant ({values[0]:g}) over the n={values.size} pairs"
    return None


def _fisher_ci(r: float, n: int, variance_factor: float) -> tuple[tuple[float, float], str | None]:
    """95% CI of a correlation via Fisher z with ``var(z) = variance_factor / (n - 3)``.

    Missing, with the reason, where Fisher z is undefined: ``n <= 3`` or ``|r| = 1``.
    """
    if n <= 3:
        return (math.nan, math.nan), f"no CI: a Fisher-z CI needs n > 3 (n={n})"
    if abs(r) >= 1.0:
        return (math.nan, math.nan), f"no CI: |r| = 1 (n={n}), where Fisher z is infinite"
    z = math.atanh(r)
    half = _Z_975 * math.sqrt(variance_factor / (n - 3))
    return (math.tanh(z - half), math.tanh(z + half)), None


def _p_value(
    xs: np.ndarray, ys: np.ndarray, asymptotic: float, seed: int, n_resamples: int
) -> tuple[float, str]:
    """Permutation p of the association of ``xs`` and ``ys`` where n allows, else ``asymptotic``."""
    p_value, method = permutation_p(xs, ys, seed=seed, n_resamples=n_resamples)
    if method is None:
        return float(asymptotic), "asymptotic"
    return p_value, method


def _ranks(values: np.ndarray) -> np.ndarray:
    return np.asarray(lazylibs.scipy_stats().rankdata(values), dtype=float)


def _r_fields(
    statistic: float, n: int, p: tuple[float, str], bonett_wright: bool = False
) -> dict[str, Any]:
    """A tested correlation: r (exactly ±1 within rounding), its Fisher-z CI and p."""
    r = float(np.clip(statistic, -1.0, 1.0))
    r = float(np.sign(r)) if abs(r) >= 1.0 - _R_ONE_TOL else r
    ci, reason = _fisher_ci(r, n, 1.0 + r * r / 2.0 if bonett_wright else 1.0)
    return {
        "r": r,
        "ci_low": ci[0],
        "ci_high": ci[1],
        "p_value": p[0],
        "p_method": p[1],
        "reason": reason,
    }


def _pearson(xs: np.ndarray, ys: np.ndarray, seed: int, n_resamples: int) -> dict[str, Any]:
    res = lazylibs.scipy_stats().pearsonr(xs, ys)
    p = _p_value(xs, ys, float(res.pvalue), seed, n_resamples)
    return _r_fields(res.statistic, xs.size, p)


def _spearman(xs: np.ndarray, ys: np.ndarray, seed: int, n_resamples: int) -> dict[str, Any]:
    res = lazylibs.scipy_stats().spearmanr(xs, ys)
    p = _p_value(_ranks(xs), _ranks(ys), float(res.pvalue), seed, n_resamples)
    return _r_fields(res.statistic, xs.size, p, bonett_wright=True)


def _point_biserial(xs: np.ndarray, ys: np.ndarray, seed: int, n_resamples: int) -> dict[str, Any]:
    res = lazylibs.scipy_stats().pointbiserialr(ys.astype(bool), xs)
    p = _p_value(xs, ys, float(res.pvalue), seed, n_resamples)
    return _r_fields(res.statistic, xs.size, p)


def _hanley_mcneil_ci(area: float, n1: int, n0: int) -> tuple[tuple[float, float], str | None]:
    """95% CI of an AUC with the Hanley–McNeil (1982) standard error, clipped to [0, 1]."""
    if area <= 0.0 or area >= 1.0:
        return (math.nan, math.nan), (
            f"no CI: AUC = {area:g} (complete separation), where the Hanley-McNeil "
            "standard error is 0"
        )
    q1, q2 = area / (2.0 - area), 2.0 * area * area / (1.0 + area)
    variance = (
        area * (1.0 - area) + (n1 - 1) * (q1 - area * area) + (n0 - 1) * (q2 - area * area)
    ) / (n1 * n0)
    half = _Z_975 * math.sqrt(max(variance, 0.0))
    return (max(area - half, 0.0), min(area + half, 1.0)), None


def _auc(xs: np.ndarray, ys: np.ndarray, seed: int, n_resamples: int) -> dict[str, Any]:
    positives, negatives = xs[ys == 1.0], xs[ys == 0.0]
    n1, n0 = positives.size, negatives.size
    res = lazylibs.scipy_stats().mannwhitneyu(
        positives, negatives, alternative="two-sided", method="asymptotic"
    )
    area = float(res.statistic) / (n1 * n0)
    auc_ci, reason = _hanley_mcneil_ci(area, n1, n0)
    p_value, p_method = _p_value(_ranks(xs), ys, float(res.pvalue), seed, n_resamples)
    return {
        "p_value": p_value,
        "p_method": p_method,
        "auc": area,
        "auc_ci_low": auc_ci[0],
        "auc_ci_high": auc_ci[1],
        "reason": reason,
    }


_STATISTICS = {
    "spearman": _spearman,
    "pearson": _pearson,
    "point_biserial": _point_biserial,
    "auc": _auc,
}


def _method_row(
    method: str,
    x: str,
    y: str,
    xs: np.ndarray,
    ys: np.ndarray,
    min_n: int,
    seed: int,
    n_resamples: int,
) -> dict[str, object]:
    """The row of ``method`` over the complete pairs, or why it is not computable."""
    keep = ~(np.isnan(xs) | np.isnan(ys))
    xs, ys = xs[keep], ys[keep]
    if method in ("point_biserial", "auc"):
        values = set(np.unique(ys).tolist())
        if not values <= {0.0, 1.0}:
            raise StatisticsError(
                f"column {y!r} must be binary (0/1 or True/False); found values {sorted(values)}"
            )
    n = xs.size
    if n < min_n:
        return _row(x, y, method, n, reason=f"n={n} complete pairs is below the minimum of {min_n}")
    reason = _constant(xs, x) or _constant(ys, y)
    if reason:
        return _row(x, y, method, n, reason=reason)
    fields = _STATISTICS[method](xs, ys, seed, n_resamples)
    return _row(x, y, method, n, **fields)


def pearson(
    df: pd.DataFrame,
    x: str,
    y: str,
    *,
    min_n: int = 5,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> pd.DataFrame:
    """Pearson correlation of columns ``x`` and ``y`` with a Fisher-z 95% CI.

    Parameters
    ----------
    df : pandas.DataFrame
        Table holding both columns (booleans count as 0/1, None as missing).
    x, y : str
        Column names.
    min_n : int
        Fewest complete pairs for which the correlation is reported.
    seed, n_resamples
        Seed and size of the Monte Carlo permutation test (n from 9 to 100).

    Returns
    -------
    pandas.DataFrame
        One row with :data:`CORRELATION_COLUMNS`; the p-value is a permutation p up to
        n = 100 (``p_method``), scipy's t-distribution p above.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1, 2, 3, 4, 5], "b": [2, 4, 5, 4, 5]})
    >>> round(float(pearson(df, "a", "b")["r"].iloc[0]), 4)
    0.7746
    """
    return _frame(_method_row("pearson", x, y, *_columns(df, x, y), min_n, seed, n_resamples))


def spearman(
    df: pd.DataFrame,
    x: str,
    y: str,
    *,
    min_n: int = 5,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> pd.DataFrame:
    """Spearman rank correlation (average ranks for ties) with a Bonett–Wright 95% CI.

    Parameters
    ----------
    df, x, y, min_n, seed, n_resamples
        As :func:`pearson`.

    Returns
    -------
    pandas.DataFrame
        One row with :data:`CORRELATION_COLUMNS`. The CI is Fisher z with variance
        ``(1 + r**2 / 2) / (n - 3)`` (Bonett & Wright, 2000), missing at |r| = 1; the
        p-value is exact up to n = 8 (a perfect n = 5 gives 2/120), Monte Carlo up to
        n = 100, the t approximation above (``p_method``).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"a": [1, 2, 2, 4, 5], "b": [1, 3, 2, 4, 5]})
    >>> round(float(spearman(df, "a", "b")["r"].iloc[0]), 4)
    0.9747
    >>> row = spearman(pd.DataFrame({"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 5]}), "a", "b").iloc[0]
    >>> float(row["r"]), round(float(row["p_value"]), 4), row["p_method"], float(row["ci_low"])
    (1.0, 0.0167, 'exact', nan)
    """
    return _frame(_method_row("spearman", x, y, *_columns(df, x, y), min_n, seed, n_resamples))


def point_biserial(
    df: pd.DataFrame,
    x: str,
    binary: str,
    *,
    min_n: int = 5,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> pd.DataFrame:
    """Point-biserial correlation of metric ``x`` with a pass/fail column.

    Parameters
    ----------
    df : pandas.DataFrame
        Table holding both columns.
    x : str
        Metric column.
    binary : str
        Column of 0/1 or booleans (e.g. ``passed``).
    min_n, seed, n_resamples
        As :func:`pearson`.

    Returns
    -------
    pandas.DataFrame
        One row with :data:`CORRELATION_COLUMNS` (method ``"point_biserial"``; p as
        :func:`pearson`).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"m": [0.1, 0.4, 0.3, 0.8, 0.9], "passed": [0, 0, 1, 1, 1]})
    >>> round(float(point_biserial(df, "m", "passed")["r"].iloc[0]), 4)
    0.673
    """
    columns = _columns(df, x, binary)
    return _frame(_method_row("point_biserial", x, binary, *columns, min_n, seed, n_resamples))


def auc(
    df: pd.DataFrame,
    x: str,
    binary: str,
    *,
    min_n: int = 5,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> pd.DataFrame:
    """Mann–Whitney AUC of metric ``x`` for passing versus failing tasks.

    Parameters
    ----------
    df, x, min_n, seed, n_resamples
        As :func:`point_biserial`.
    binary : str
        Column of 0/1 or booleans; 1 is the "positive" (passing) class.

    Returns
    -------
    pandas.DataFrame
        One row with :data:`CORRELATION_COLUMNS` (method ``"auc"``): ``auc`` is
        ``U / (n1 * n0)`` = P(metric of a pass > metric of a fail) + 0.5 P(equal), with
        its CI in ``auc_ci_low``/``auc_ci_high`` (Hanley–McNeil standard error);
        ``rank_biserial = 2*auc - 1``; ``r``, ``ci_low``, ``ci_high`` are NaN (an AUC is
        not a correlation coefficient).

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"m": [0.1, 0.4, 0.3, 0.8, 0.9], "passed": [0, 0, 1, 1, 1]})
    >>> row = auc(df, "m", "passed").iloc[0]
    >>> float(row["auc"]), round(float(row["rank_biserial"]), 4), float(row["r"])
    (0.8333333333333334, 0.6667, nan)
    """
    return _frame(_method_row("auc", x, binary, *_columns(df, x, binary), min_n, seed, n_resamples))


def _methods_for(outcome: str) -> tuple[str, ...]:
    if outcome in BINARY_OUTCOMES:
        return ("point_biserial", "auc")
    return ("spearman", "pearson")


def flagged_trials(df: pd.DataFrame) -> np.ndarray:
    """Per row: errored or timed out (a missing flag counts as not flagged).

    >>> flagged_trials(pd.DataFrame({"errored": [True, None], "timed_out": [0, 1]})).tolist()
    [True, True]
    """
    flagged = np.zeros(len(df), dtype=bool)
    for column in FLAG_COLUMNS:
        if column in df.columns:
            flagged |= np.nan_to_num(as_float(df[column]).to_numpy(), nan=0.0) != 0.0
    return flagged


def _group_block(
    group: str,
    mask: np.ndarray,
    values: dict[str, np.ndarray],
    flagged: np.ndarray,
    metrics: list[str],
    outcomes: list[str],
    min_n: int,
    seed: int,
    n_resamples: int,
) -> pd.DataFrame:
    """The rows of one group, with Holm and BH adjusted p-values within each method family."""
    rows = []
    # outcome, then method, then metric: consecutive permutation tests share the
    # outcome's values, whose permuted copy is then built once (rows are sorted later)
    for outcome in outcomes:
        for method in _methods_for(outcome):
            for metric in metrics:
                xs, ys = values[metric][mask], values[outcome][mask]
                complete = ~(np.isnan(xs) | np.isnan(ys))
                row = _method_row(method, metric, outcome, xs, ys, min_n, seed, n_resamples)
                row["n_flagged"] = int(flagged[mask][complete].sum())
                row["family"] = METHOD_FAMILY[method]
                rows.append(row)
    block = pd.DataFrame(rows, columns=[*CORRELATION_COLUMNS, "n_flagged", "family"])
    block.insert(0, "group", group)
    block["p_holm"] = np.nan
    block["p_bh"] = np.nan
    for family in sorted(set(block["family"])):
        in_family = (block["family"] == family).to_numpy()
        p_values = block.loc[in_family, "p_value"].to_numpy(dtype=float)
        block.loc[in_family, "p_holm"] = holm(p_values)
        block.loc[in_family, "p_bh"] = benjamini_hochberg(p_values)
    return block


def correlate_metrics(
    df: pd.DataFrame,
    metrics: str | Sequence[str] = "key",
    outcomes: Iterable[str] = OUTCOME_COLUMNS,
    by: str | None = "config_name",
    min_n: int = 5,
    *,
    exclude_flagged: bool = False,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> pd.DataFrame:
    """Associate every retrieval metric with every outcome, per group and pooled.

    Parameters
    ----------
    df : pandas.DataFrame
        Per-task metrics table (one row per trial).
    metrics : "key", "all" or sequence of str
        The metric family (:func:`~retrieval_lib.stats.columns.resolve_metrics`):
        by default the key retrieval metrics present in ``df``.
    outcomes : iterable of str
        Outcome columns; those absent from ``df`` are skipped. Binary outcomes
        (``passed``) get point-biserial and AUC rows, the others Spearman and Pearson.
    by : str or None
        Grouping column (default ``config_name``); every group is analysed on its own and
        all rows together as group :data:`POOLED_GROUP`. ``None`` analyses the pooled
        table only.
    min_n : int
        Fewest complete pairs for a computable row.
    exclude_flagged : bool
        Leave errored and timed-out trials out (default: keep them, counted in
        ``n_flagged``).
    seed, n_resamples
        Seed and size of the Monte Carlo permutation tests (rows of 9 to 100 pairs); the
        same seed gives the same p-values.

    Returns
    -------
    pandas.DataFrame
        Columns ``group`` + :data:`CORRELATION_COLUMNS` + ``n_flagged, family, p_holm,
        p_bh``, sorted by group, x, y, method. ``n_flagged`` counts the errored or
        timed-out trials among the row's ``n``. The multiple-testing **family is one
        group × one method family** (``family``: ``"rank"`` = Spearman and AUC,
        ``"linear"`` = Pearson and point-biserial), i.e. one test per metric × outcome;
        non-computable rows are not part of it and keep NaN adjusted p-values.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"config_name": ["a"] * 5, "file.AP": [0.1, 0.2, 0.3, 0.5, 0.9],
    ...                    "reward": [0.0, 0.5, 0.4, 1.0, 1.0],
    ...                    "errored": [False, False, True, False, False]})
    >>> out = correlate_metrics(df, outcomes=["reward"])
    >>> out[["group", "method", "n", "n_flagged", "family"]].values.tolist()[:2]
    [['(pooled)', 'pearson', 5, 1, 'linear'], ['(pooled)', 'spearman', 5, 1, 'rank']]
    >>> int(correlate_metrics(df, outcomes=["reward"], exclude_flagged=True)["n"].iloc[0])
    4
    """
    metric_list = resolve_metrics(df, metrics)
    outcome_list = [o for o in outcomes if o in df.columns]
    flagged = flagged_trials(df)
    keep = ~flagged if exclude_flagged else np.ones(len(df), dtype=bool)
    groups: list[tuple[str, np.ndarray]] = [(POOLED_GROUP, keep)]
    if by is not None:
        require_columns(df, [by])
        labels = df[by].astype("string").fillna("(none)")
        for label in sorted(labels.unique()):
            groups.append((str(label), (labels == label).to_numpy(dtype=bool) & keep))

    # each column is converted to float once; groups are row masks over those arrays
    values = {c: as_float(df[c]).to_numpy() for c in dict.fromkeys([*metric_list, *outcome_list])}
    columns = ["group", *CORRELATION_COLUMNS, "n_flagged", "family", "p_holm", "p_bh"]
    frames = [
        _group_block(
            group, mask, values, flagged, metric_list, outcome_list, min_n, seed, n_resamples
        )
        for group, mask in groups
        if outcome_list and metric_list
    ]
    if not frames:
        return pd.DataFrame(columns=columns)
    out = pd.concat(frames, ignore_index=True)[columns]
    return out.sort_values(["group", "x", "y", "method"], kind="mergesort").reset_index(drop=True)

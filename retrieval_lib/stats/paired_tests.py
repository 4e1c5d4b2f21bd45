"""Paired statistics: tests of matched baseline-versus-treatment values.

The statistical half of a matched comparison (the matching is
:mod:`retrieval_lib.stats.paired`): :func:`paired_comparison` tests one metric's paired
deltas (treatment − baseline); :func:`compare_matched` does it for every metric of a
:class:`~retrieval_lib.stats.paired.MatchResult` and adds Holm-adjusted p-values;
:func:`mcnemar_exact` compares pass/fail. :func:`wilcoxon_signed_rank` is used on its own
by the reports and the kb compare; the intervals of a mean are :mod:`retrieval_lib.stats.means`.

Statistics of :func:`paired_comparison`
---------------------------------------
* **Missing is missing.** A metric missing on either side drops that task for that
  metric only; ``n`` says how many tasks remained and ``n_dropped`` how many were lost.
* **Degenerate is not tested.** ``tested`` (and its older alias ``computable``) is False,
  with the reason, when there are fewer than ``min_n`` (default 3) complete pairs, when
  the deltas are constant (zero variance: all zero, or all the same win), or when fewer
  than :data:`MIN_NONZERO_DELTAS` (6) deltas are non-zero (with 5 the exact two-sided
  Wilcoxon p cannot go below 2/32 = 0.0625). The row still carries ``n``, the means and
  median and the wins/losses/ties; the CI, p-values and effect sizes are NaN and stay out
  of Holm's family.
* mean and median of the deltas; 95% CI of the mean delta (``ci_method``): by default
  the **t interval** ``mean ± t(0.975, n-1) * sd / sqrt(n)`` of the per-task deltas
  (:func:`~retrieval_lib.stats.intervals.t_mean_ci`), exact for normal deltas and near
  nominal on bounded ones: in a seeded null simulation (issue 22; 600 studies per band,
  per-task pass probability from Beta(0.7, 0.7), 1–5 binary trials per task and side) it
  covered 0 in 96.2% (10–19 tasks), 96.5% (20–60) and 95.7% (61–200) of studies, the
  percentile bootstrap (too narrow at small n) in 90.7%, 94.5% and 95.2%, BCa in 93.3% at
  20–60. ``ci_method="bca"`` (scipy's BCa bootstrap, ``n_boot`` resamples, ``seed``) and
  ``"percentile"`` (:func:`~retrieval_lib.stats.intervals.bootstrap_mean_ci`) remain;
* Wilcoxon signed-rank test of the non-zero deltas (:func:`wilcoxon_signed_rank`: exact
  up to 50 untied or :data:`EXACT_MAX_N` (20) tied deltas, so binary rewards get an exact
  test too; else the normal approximation); ``wilcoxon_statistic`` is ``min(R+, R-)``;
* sign test: exact two-sided binomial test of #wins among non-zero deltas;
* matched-pairs rank-biserial correlation ``(R+ - R-) / (R+ + R-)`` (Kerby 2014) and
  Cohen's ``d_z = mean(delta) / sd(delta)`` (``ddof=1``);
* wins / losses / ties: deltas > 0, < 0, == 0 (a "win" is a larger treatment value,
  whatever the metric's direction: for cost or time larger is worse).
* Signs, zeros and ties (win/loss/tie counts, Wilcoxon, sign test, rank-biserial, the
  zero-variance check of d_z) use the deltas rounded to 12 decimals, so floating-point
  noise does not turn equal deltas into distinct ranks; means, medians, the bootstrap
  and d_z itself use the deltas unrounded.

Examples
--------
>>> row = paired_comparison([0.1, 0.5, 0.2, 0.4], [0.3, 0.9, 0.2, 0.7], n_boot=200).iloc[0]
>>> int(row["n"]), round(float(row["mean_delta"]), 3), int(row["wins"]), int(row["ties"])
(4, 0.225, 3, 1)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd

from retrieval_lib import lazylibs
from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import as_float
from retrieval_lib.stats.intervals import bootstrap_mean_ci, t_mean_ci
from retrieval_lib.stats.multiple import holm
from retrieval_lib.stats.paired import MatchResult
from retrieval_lib.stats.power import DEFAULT_EFFECTS, needed_column, tasks_needed

__all__ = [
    "CI_METHODS",
    "EXACT_MAX_N",
    "MIN_NONZERO_DELTAS",
    "MCNEMAR_COLUMNS",
    "PAIRED_COLUMNS",
    "WilcoxonResult",
    "compare_matched",
    "mcnemar_exact",
    "paired_comparison",
    "wilcoxon_signed_rank",
]

#: Stable columns of :func:`paired_comparison`, in order.
PAIRED_COLUMNS: tuple[str, ...] = (
    "metric",
    "n",
    "n_dropped",
    "mean_baseline",
    "mean_treatment",
    "mean_delta",
    "median_delta",
    "ci_low",
    "ci_high",
    "ci_method",
    "wins",
    "losses",
    "ties",
    "wilcoxon_statistic",
    "wilcoxon_p",
    "wilcoxon_method",
    "sign_test_p",
    "rank_biserial",
    "cohen_dz",
    "sd_delta",
    "ci_half_width",
    *(needed_column(effect) for effect in DEFAULT_EFFECTS),
    "tested",
    "computable",
    "reason",
)

#: Stable columns of :func:`mcnemar_exact`, in order.
MCNEMAR_COLUMNS: tuple[str, ...] = (
    "n",
    "both_pass",
    "baseline_only",
    "treatment_only",
    "neither",
    "p_value",
    "computable",
    "reason",
)

_SNAP_DECIMALS = 12  # deltas closer than this are equal for signs, zeros and ties


def _snap(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to :data:`_SNAP_DECIMALS` decimals, without overflow: rounding
    scales by ``10**12`` first, which turns a finite value beyond ~1.8e296 into infinity;
    such values (whose spacing is far coarser than 1e-12 anyway) are kept as they are."""
    with np.errstate(over="ignore", invalid="ignore"):
        snapped = np.round(values, _SNAP_DECIMALS)
    return np.where(np.isfinite(snapped), snapped, values)


#: Largest number of non-zero tied deltas whose Wilcoxon p-value is computed exactly (by
#: enumerating all ``2**n`` sign flips: 2**20 sums of 8 bytes = 8 MiB, a few ms).
EXACT_MAX_N = 20
_SCIPY_EXACT_MAX_N = 50  # untied samples up to this size use scipy's exact distribution

#: Fewest non-zero paired deltas for a test: with 6 the exact two-sided Wilcoxon p can
#: reach 2/64 = 0.031; with 5 it cannot go below 2/32 = 0.0625 > 0.05.
MIN_NONZERO_DELTAS = 6

#: Intervals of the mean paired delta (``ci_method``); ``"t"`` is the default.
CI_METHODS: tuple[str, ...] = ("t", "bca", "percentile")


class WilcoxonResult(NamedTuple):
    """Two-sided Wilcoxon signed-rank test of paired deltas.

    Attributes
    ----------
    statistic : float
        ``min(R+, R-)`` over the non-zero deltas (average ranks for tied ``|delta|``);
        NaN when every delta is zero.
    p_value : float
        Two-sided p-value; NaN when every delta is zero.
    method : str or None
        ``"exact"`` (exact null distribution), ``"normal_approx"``, or None when not
        computable (every delta zero).
    """

    statistic: float
    p_value: float
    method: str | None


def _signed_rank_null(doubled_ranks: np.ndarray) -> np.ndarray:
    """``2 * R+`` for every one of the ``2**n`` sign assignments (integers, exact)."""
    sums = np.zeros(1, dtype=np.int64)
    for rank in doubled_ranks:
        sums = np.concatenate([sums, sums + rank])
    return sums


def wilcoxon_signed_rank(
    deltas: Sequence[float] | np.ndarray, *, exact_max_n: int = EXACT_MAX_N
) -> WilcoxonResult:
    """Two-sided Wilcoxon signed-rank test, exact for small samples, ties included.

    Parameters
    ----------
    deltas : array-like of float
        Paired differences (treatment − baseline), all finite (drop missing pairs
        first). They are rounded to 12 decimals before zeros and ties are judged, so
        floating-point noise neither invents nor breaks a tie.
    exact_max_n : int
        Largest number of non-zero tied deltas tested exactly (default :data:`EXACT_MAX_N`).

    Returns
    -------
    WilcoxonResult
        ``(statistic, p_value, method)``; also a plain tuple.

    Notes
    -----
    Zeros are dropped (Wilcoxon's rule) and the ``n`` remaining ``|delta|`` ranked, tied
    values getting their average rank. Let ``w`` be the observed ``R+`` (sum of the
    ranks of positive deltas) and ``E = n(n+1)/4`` its null mean. The two-sided p-value
    is ``P(|W - E| >= |w - E|)``, which for this symmetric null is scipy's
    ``2 * min(P(W <= w), P(W >= w))`` capped at 1.

    * no tied ``|delta|`` and ``n <= 50``: scipy's exact null distribution,
      ``scipy.stats.wilcoxon(method="exact")``;
    * tied ``|delta|`` and ``n <= exact_max_n``: the exact null of these average ranks,
      all ``2**n`` sign assignments enumerated (ranks doubled to exact integers). This is
      the p-value of ``scipy.stats.wilcoxon(method=PermutationMethod(n_resamples=2**n))``
      (equal to 1e-12, a test checks it), which scipy computes by ranking every one of
      the ``2**n`` resamples: 149 s at n = 20 against 0.02 s here;
    * otherwise: ``z = (w - E -/+ 0.5) / sd`` with the tie-corrected
      ``sd**2 = n(n+1)(2n+1)/24 - sum(t**3 - t)/48`` (``t`` the sizes of tie groups) and
      a continuity correction of 0.5 towards ``E``; ``p = 2 * (1 - Phi(|z|))``
      (``scipy.stats.wilcoxon(method="asymptotic", correction=True)``).

    Examples
    --------
    >>> res = wilcoxon_signed_rank([1, 1, 1, 1, 1, -1])  # ranks all 3.5: P(<= 1 loss) = 7/64
    >>> float(res.statistic), round(res.p_value, 6), res.method
    (3.5, 0.21875, 'exact')
    >>> wilcoxon_signed_rank([0, 1, 2, 3, 4]).p_value  # zero dropped: 2 * 1/16
    0.125
    >>> wilcoxon_signed_rank([0.0, 0.0]).method is None
    True
    """
    stats = lazylibs.scipy_stats()
    values = np.asarray(deltas, dtype=float).reshape(-1)
    if not np.isfinite(values).all():
        raise StatisticsError("Wilcoxon deltas must be finite (drop missing pairs first)")
    if exact_max_n > 24:
        raise StatisticsError(f"exact_max_n={exact_max_n} would enumerate more than 2**24 signs")
    snapped = _snap(values)
    nonzero = snapped[snapped != 0]
    n = nonzero.size
    if n == 0:
        return WilcoxonResult(math.nan, math.nan, None)
    ranks = stats.rankdata(np.abs(nonzero))  # average ranks: multiples of 1/2
    r_plus = float(ranks[nonzero > 0].sum())
    statistic = min(r_plus, n * (n + 1) / 2.0 - r_plus)
    tied = np.unique(ranks).size < n
    if not tied and n <= _SCIPY_EXACT_MAX_N:
        res = stats.wilcoxon(nonzero, method="exact")
        return WilcoxonResult(statistic, float(res.pvalue), "exact")
    if not tied or n > exact_max_n:
        res = stats.wilcoxon(nonzero, method="asymptotic", correction=True)
        return WilcoxonResult(statistic, float(res.pvalue), "normal_approx")
    doubled = np.rint(2.0 * ranks).astype(np.int64)
    null = _signed_rank_null(doubled)  # 2 * R+ of every sign assignment
    twice_mean = n * (n + 1) // 2  # 2 * E, an integer
    observed = abs(int(np.rint(2.0 * r_plus)) - twice_mean)
    p_value = float(np.count_nonzero(np.abs(null - twice_mean) >= observed)) / null.size
    return WilcoxonResult(statistic, p_value, "exact")


def _rank_biserial(deltas: np.ndarray) -> float:
    stats = lazylibs.scipy_stats()
    nonzero = deltas[deltas != 0]
    if nonzero.size == 0:
        return math.nan
    ranks = stats.rankdata(np.abs(nonzero))
    total = ranks.sum()
    return float((ranks[nonzero > 0].sum() - ranks[nonzero < 0].sum()) / total)


def _degenerate(snapped: np.ndarray, n: int, min_n: int, min_nonzero: int) -> str | None:
    """Why the deltas cannot be tested (None when they can)."""
    if n < min_n:
        return f"n={n} matched pairs is below the minimum of {min_n}"
    if np.unique(snapped).size == 1:
        return f"the {n} paired deltas are constant (all {snapped[0]:g}): zero variance"
    nonzero = int(np.count_nonzero(snapped))
    if nonzero < min_nonzero:
        return (
            f"non-zero paired deltas: {nonzero} of {n}; a test needs {min_nonzero} "
            "(the fewest at which an exact two-sided Wilcoxon p can reach 0.05)"
        )
    return None


def _paired_row(
    a: Sequence[float] | np.ndarray | pd.Series,
    b: Sequence[float] | np.ndarray | pd.Series,
    metric: str,
    n_boot: int,
    seed: int,
    min_n: int,
    ci_method: str,
    min_nonzero: int,
) -> dict[str, object]:
    if n_boot < 1:
        raise StatisticsError(f"n_boot must be at least 1, not {n_boot}")
    if ci_method not in CI_METHODS:
        raise StatisticsError(
            f"ci_method must be one of {', '.join(CI_METHODS)}, not {ci_method!r}"
        )
    base = np.asarray(a, dtype=float).reshape(-1)
    treat = np.asarray(b, dtype=float).reshape(-1)
    if base.shape != treat.shape:
        raise StatisticsError(
            f"paired samples differ in length: {base.size} baseline vs {treat.size} treatment"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        deltas = treat - base
    # a missing value, an infinite one, or a difference that overflows (1e308 - -1e308):
    # that task is missing for the comparison (counted in n_dropped), never a crash
    keep = np.isfinite(base) & np.isfinite(treat) & np.isfinite(deltas)
    base, treat, deltas = base[keep], treat[keep], deltas[keep]
    # signs, zeros and ties are judged on deltas snapped to a 1e-12 grid, so that
    # floating-point noise (0.3 - 0.2 vs 0.2 - 0.1) neither breaks ties nor invents wins
    snapped = _snap(deltas)
    n = int(deltas.size)
    wins, losses = int((snapped > 0).sum()), int((snapped < 0).sum())
    row: dict[str, object] = dict.fromkeys(PAIRED_COLUMNS, math.nan)
    row.update(
        metric=metric,
        n=n,
        n_dropped=int((~keep).sum()),
        wins=wins,
        losses=losses,
        ties=n - wins - losses,
        ci_method=None,
        wilcoxon_method=None,
        tested=False,
        computable=False,
        reason=None,
    )
    if n:
        # descriptive: shown whether or not a test can run
        row["mean_baseline"] = float(base.mean())
        row["mean_treatment"] = float(treat.mean())
        row["mean_delta"] = float(deltas.mean())
        row["median_delta"] = float(np.median(deltas))
    planning = tasks_needed(deltas).iloc[0]
    for column in ("sd_delta", "ci_half_width", *map(needed_column, DEFAULT_EFFECTS)):
        row[column] = float(planning[column])
    reason = _degenerate(snapped, n, min_n, min_nonzero)
    if reason is not None:
        row["reason"] = reason
        return row

    stats = lazylibs.scipy_stats()
    if ci_method == "t":
        row["ci_low"], row["ci_high"] = t_mean_ci(deltas)
    else:
        row["ci_low"], row["ci_high"] = bootstrap_mean_ci(
            deltas, n_boot=n_boot, seed=seed, method=ci_method
        )
    row["ci_method"] = ci_method
    statistic, p_value, method = wilcoxon_signed_rank(snapped)
    row["wilcoxon_statistic"] = statistic
    row["wilcoxon_p"] = p_value
    row["wilcoxon_method"] = method
    row["sign_test_p"] = float(stats.binomtest(wins, wins + losses, 0.5).pvalue)
    row["rank_biserial"] = _rank_biserial(snapped)
    row["cohen_dz"] = float(deltas.mean()) / float(deltas.std(ddof=1))
    row["tested"] = True
    row["computable"] = True
    return row


def paired_comparison(
    a: Sequence[float] | np.ndarray | pd.Series,
    b: Sequence[float] | np.ndarray | pd.Series,
    *,
    n_boot: int = 10000,
    seed: int = 0,
    min_n: int = 3,
    metric: str = "",
    ci_method: str = "t",
    min_nonzero: int = MIN_NONZERO_DELTAS,
) -> pd.DataFrame:
    """Paired comparison of baseline values ``a`` and treatment values ``b`` (delta = b − a).

    Parameters
    ----------
    a, b : array-like of float
        Per-task values of the same tasks in the same order; NaN marks a missing value
        and drops that task (reported in ``n_dropped``), as does an infinite value or a
        pair whose difference overflows the float range.
    n_boot : int
        Bootstrap resamples of a ``"bca"`` or ``"percentile"`` CI.
    seed : int
        Seed of the bootstrap generator (``PCG64``).
    min_n : int
        Fewest complete pairs for a test.
    metric : str
        Value of the ``metric`` column.
    ci_method : {"t", "bca", "percentile"}
        Interval of the mean delta (module notes); ``ci_method`` column.
    min_nonzero : int
        Fewest non-zero deltas for a test (default :data:`MIN_NONZERO_DELTAS`).

    Returns
    -------
    pandas.DataFrame
        One row with :data:`PAIRED_COLUMNS`. Degenerate deltas (module notes) are not
        tested: ``tested`` and ``computable`` are False, the reason says why, CI,
        p-values and effect sizes are NaN, and ``n``, the means, median and counts are
        shown. ``sd_delta``, ``ci_half_width`` and ``n_needed_0.05`` / ``n_needed_0.10``
        (matched tasks for 80% power at alpha 0.05) come from
        :func:`~retrieval_lib.stats.power.tasks_needed`.

    Examples
    --------
    >>> row = paired_comparison([1, 2, 3], [2, 4, 6], n_boot=100).iloc[0]
    >>> float(row["mean_delta"]), float(row["median_delta"]), int(row["wins"]), bool(row["tested"])
    (2.0, 2.0, 3, False)
    >>> row["reason"]
    'non-zero paired deltas: 3 of 3; a test needs 6 (the fewest at which an exact two-sided Wilcoxon p can reach 0.05)'
    """
    row = _paired_row(a, b, metric, n_boot, seed, min_n, ci_method, min_nonzero)
    return pd.DataFrame([row], columns=list(PAIRED_COLUMNS))


def compare_matched(
    match: MatchResult,
    metrics: Sequence[str] | None = None,
    *,
    n_boot: int = 10000,
    seed: int = 0,
    min_n: int = 3,
    ci_method: str = "t",
    min_nonzero: int = MIN_NONZERO_DELTAS,
) -> pd.DataFrame:
    """:func:`paired_comparison` for every value column of ``match``, Holm-adjusted.

    Parameters
    ----------
    match : MatchResult
        Output of :func:`match_tasks`.
    metrics : sequence of str, optional
        Columns to compare; default every value column of the match.
    n_boot, seed, min_n, ci_method, min_nonzero
        As in :func:`paired_comparison` (the same seed for every metric).

    Returns
    -------
    pandas.DataFrame
        Columns ``baseline, treatment`` + :data:`PAIRED_COLUMNS` + ``wilcoxon_p_holm``:
        the Wilcoxon p-values adjusted by Holm over the **family of all metrics of this
        pair** (non-computable ones excluded). Rows in the order of ``metrics``.
    """
    names = list(metrics) if metrics is not None else list(match.value_columns)
    b_values, t_values = match.baseline_values, match.treatment_values
    options = (n_boot, seed, min_n, ci_method, min_nonzero)
    rows = [_paired_row(b_values[name], t_values[name], name, *options) for name in names]
    columns = ["baseline", "treatment", *PAIRED_COLUMNS, "wilcoxon_p_holm"]
    if not rows:
        return pd.DataFrame(columns=columns)
    out = pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))
    out.insert(0, "treatment", match.treatment)
    out.insert(0, "baseline", match.baseline)
    out["wilcoxon_p_holm"] = holm(out["wilcoxon_p"].to_numpy(dtype=float))
    return out[columns]


def mcnemar_exact(
    b_pass: Sequence[float] | np.ndarray | pd.Series,
    t_pass: Sequence[float] | np.ndarray | pd.Series,
    *,
    min_n: int = 3,
) -> pd.DataFrame:
    """Exact McNemar test of paired pass/fail outcomes (baseline vs treatment).

    Parameters
    ----------
    b_pass, t_pass : array-like
        Per-task pass (1/True) or fail (0/False) of each side, same tasks in the same
        order; NaN/None drops the task.
    min_n : int
        Fewest complete pairs for a computable test.

    Returns
    -------
    pandas.DataFrame
        One row with :data:`MCNEMAR_COLUMNS`: the 2×2 counts and the two-sided exact
        p-value ``min(1, 2 * P(X <= min(b, c)))``, X ~ Binomial(b + c, 1/2) over the
        discordant pairs. No discordant pair gives p = 1 (noted in ``reason``).

    Examples
    --------
    >>> row = mcnemar_exact([1, 1, 1, 1, 0], [0, 0, 0, 0, 0]).iloc[0]
    >>> int(row["baseline_only"]), float(row["p_value"])
    (4, 0.125)
    """
    stats = lazylibs.scipy_stats()
    base = as_float(pd.Series(list(b_pass), dtype=object)).to_numpy()
    treat = as_float(pd.Series(list(t_pass), dtype=object)).to_numpy()
    if base.shape != treat.shape:
        raise StatisticsError(
            f"paired samples differ in length: {base.size} baseline vs {treat.size} treatment"
        )
    keep = np.isfinite(base) & np.isfinite(treat)
    base, treat = base[keep], treat[keep]
    bad = sorted(set(np.unique(np.concatenate([base, treat])).tolist()) - {0.0, 1.0})
    if bad:
        raise StatisticsError(f"pass/fail values must be 0/1 or booleans; found {bad}")
    both = int(((base == 1) & (treat == 1)).sum())
    b_only = int(((base == 1) & (treat == 0)).sum())
    t_only = int(((base == 0) & (treat == 1)).sum())
    neither = int(((base == 0) & (treat == 0)).sum())
    n = int(base.size)
    row: dict[str, object] = {
        "n": n,
        "both_pass": both,
        "baseline_only": b_only,
        "treatment_only": t_only,
        "neither": neither,
        "p_value": math.nan,
        "computable": False,
        "reason": None,
    }
    if n < min_n:
        row["reason"] = f"n={n} matched pairs is below the minimum of {min_n}"
    else:
        discordant = b_only + t_only
        tail = stats.binom.cdf(min(b_only, t_only), discordant, 0.5) if discordant else 1.0
        row["p_value"] = float(min(1.0, 2.0 * tail))
        row["computable"] = True
        if not discordant:
            row["reason"] = "no discordant pairs: no evidence of a difference (p = 1)"
    return pd.DataFrame([row], columns=list(MCNEMAR_COLUMNS))

"""How many matched tasks would answer it: precision now and the sample size for a given effect.

From the per-task paired deltas of a matched comparison (treatment − baseline, one value
per task: the task is the unit), :func:`tasks_needed` gives ``n``, ``sd_delta``
(``ddof=1``), the half-width of the 95% t interval of the mean delta now,
``t(0.975, n-1) * sd_delta / sqrt(n)``, and ``n_needed_<effect>``: the number of matched
tasks a paired t-test (two-sided, level ``alpha``) needs to detect a mean delta of
``effect`` with probability ``power``, given the observed spread: the smallest
``n >= 2`` with ``P(|T| > t(1 - alpha/2, n-1)) >= power`` where ``T`` is noncentral t
with ``n - 1`` degrees of freedom and noncentrality ``d * sqrt(n)``, ``d = effect /
sd_delta``. This is the ceiling of ``pingouin.power_ttest(d=d, power=power,
alpha=alpha, contrast="paired")`` (``d = 0.5`` needs 33.4, i.e. 34 tasks). The defaults
ask for a reward difference of 0.05 and 0.10 at 80% power and alpha 0.05, the power
analysis that E. Miller, "Adding Error Bars to Evals" (arXiv:2411.00640, 2024)
recommends before running an eval.

The effects are in the units of the deltas (reward and pass rate: on [0, 1]). The
observed ``sd_delta`` is itself an estimate: with few tasks the answer is rough. Fewer
than 2 deltas or ``sd_delta = 0`` leave everything but ``n`` missing, with the reason.

Examples
--------
>>> row = tasks_needed([0.2, -0.1, 0.0, 0.3, -0.2, 0.1, 0.4, -0.3]).iloc[0]
>>> int(row["n"]), round(float(row["sd_delta"]), 3), round(float(row["ci_half_width"]), 3)
(8, 0.245, 0.205)
>>> int(row["n_needed_0.05"]), int(row["n_needed_0.10"])  # pingouin: 190.3 and 49.0
(191, 50)
>>> tasks_needed([0.1, 0.1, 0.1])["reason"].iloc[0]
'the paired deltas have zero variance (all 0.1): no spread to plan from'
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from retrieval_lib import lazylibs
from retrieval_lib.errors import StatisticsError

__all__ = ["DEFAULT_EFFECTS", "needed_column", "paired_n_for_power", "tasks_needed"]

#: Reward differences whose sample size :func:`tasks_needed` reports by default.
DEFAULT_EFFECTS: tuple[float, ...] = (0.05, 0.10)
_MAX_N = 10_000_000  # pingouin's upper bound of the search
_NORMAL_DOF = 100_000  # above these degrees of freedom the power uses the normal limit


def needed_column(effect: float) -> str:
    """Name of the column holding the tasks needed for ``effect``.

    Examples
    --------
    >>> needed_column(0.05), needed_column(0.1)
    ('n_needed_0.05', 'n_needed_0.10')
    """
    return f"n_needed_{effect:.2f}"


def _power(n: float, d: float, alpha: float) -> float:
    """Power of the two-sided paired t-test with ``n`` pairs at standardised effect ``d``."""
    stats = lazylibs.scipy_stats()
    dof = n - 1.0
    nc = d * math.sqrt(n)
    if dof > _NORMAL_DOF:  # scipy's noncentral t gives NaN there; it is normal to 1e-5
        z = float(stats.norm.ppf(1.0 - alpha / 2.0))
        return float(stats.norm.sf(z - nc) + stats.norm.cdf(-z - nc))
    tcrit = float(stats.t.ppf(1.0 - alpha / 2.0, dof))
    upper = float(stats.nct.sf(tcrit, dof, nc))
    lower = float(stats.nct.cdf(-tcrit, dof, nc))  # the far tail (nc >= 0): about 0
    if math.isnan(upper):  # scipy's noncentral t fails far in the tail: normal limit
        upper = float(stats.norm.sf(tcrit - nc))
    return upper + (0.0 if math.isnan(lower) else lower)


def paired_n_for_power(d: float, *, power: float = 0.8, alpha: float = 0.05) -> int | None:
    """Smallest number of pairs ``n >= 2`` at which a two-sided paired t-test has ``power``.

    Parameters
    ----------
    d : float
        Standardised effect ``mean delta / sd of the deltas`` (its sign does not matter).
    power, alpha : float
        Wanted power and significance level, both in (0, 1).

    Returns
    -------
    int or None
        None when even 10,000,000 pairs would not reach ``power`` (``d`` about 0).

    Examples
    --------
    >>> paired_n_for_power(0.5), paired_n_for_power(2.0)
    (34, 5)
    """
    if not (0.0 < power < 1.0 and 0.0 < alpha < 1.0):
        raise StatisticsError(f"power and alpha must be in (0, 1): {power}, {alpha}")
    d = abs(float(d))
    if not math.isfinite(d) or d == 0.0:
        return None
    if _power(2.0, d, alpha) >= power:
        return 2
    if _power(float(_MAX_N), d, alpha) < power:
        return None
    from scipy.optimize import brentq

    high = 4.0
    while _power(high, d, alpha) < power:  # bracket the root: power grows with n
        high *= 2.0
    root = brentq(lambda n: _power(n, d, alpha) - power, high / 2.0, high, xtol=1e-10)
    n = max(2, math.ceil(root - 1e-9))
    while _power(float(n), d, alpha) < power:  # guard against the root's rounding
        n += 1
    while n > 2 and _power(float(n - 1), d, alpha) >= power:
        n -= 1
    return n


def tasks_needed(
    deltas: Sequence[float] | np.ndarray,
    effects: Sequence[float] = DEFAULT_EFFECTS,
    *,
    power: float = 0.8,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Precision of the mean paired delta now, and the matched tasks needed for ``effects``.

    Parameters
    ----------
    deltas : array-like of float
        One paired delta per matched task; NaN entries are dropped.
    effects : sequence of float
        Mean deltas to detect, in the units of the deltas.
    power, alpha : float
        Power and two-sided significance level of the planned paired t-test.

    Returns
    -------
    pandas.DataFrame
        One row: ``n, sd_delta, ci_half_width``, one ``n_needed_<effect>`` column per
        effect (:func:`needed_column`; an integer number of tasks, or NaN), and
        ``reason`` (None when everything was computed).
    """
    stats = lazylibs.scipy_stats()
    values = np.asarray(deltas, dtype=float).reshape(-1)
    values = values[np.isfinite(values)]
    n = int(values.size)
    row: dict[str, object] = {"n": n, "sd_delta": math.nan, "ci_half_width": math.nan}
    row.update({needed_column(e): math.nan for e in effects})
    row["reason"] = None
    if n < 2:
        row["reason"] = f"n={n} paired deltas: a spread needs at least 2"
    elif np.unique(np.round(values, 12)).size == 1:
        row["reason"] = (
            f"the paired deltas have zero variance (all {values[0]:g}): no spread to plan from"
        )
    else:
        sd = float(values.std(ddof=1))
        row["sd_delta"] = sd
        row["ci_half_width"] = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        unreachable = []
        for effect in effects:
            needed = paired_n_for_power(effect / sd, power=power, alpha=alpha)
            if needed is None:
                unreachable.append(f"{effect:g}")
            else:
                row[needed_column(effect)] = float(needed)
        if unreachable:
            row["reason"] = f"effect {', '.join(unreachable)}: not reachable with 10^7 tasks"
    return pd.DataFrame([row])

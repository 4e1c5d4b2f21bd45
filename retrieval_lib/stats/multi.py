"""Several related samples: the Friedman test and pairwise Wilcoxon tests with Holm.

The omnibus test and its post-hoc pairs over **subjects** (our tasks), pingouin style: a
long-format DataFrame in (one row per subject × condition), a tidy DataFrame out
(``pingouin.friedman`` and ``pingouin.pairwise_tests(parametric=False, padjust="holm")``
are the references the tests compare with).

* :func:`friedman`: Friedman's chi-square over the subjects that have a value for every
  condition (listwise deletion, as pingouin), ranks within a subject averaged over ties,
  tie-corrected ``Q`` (scipy's ``friedmanchisquare``), Kendall's ``W = Q / (n (k - 1))``.
* :func:`pairwise_wilcoxon`: every pair of conditions on the same complete subjects,
  :func:`~retrieval_lib.stats.paired_tests.paired_comparison` (mean delta with its t
  interval, Wilcoxon signed-rank p exact with ties up to 20 non-zero deltas), p-values
  Holm-adjusted over the pairs (NaN-aware: untested pairs stay out of the family).

**Degenerate is not tested**, as everywhere in the library: ``tested`` is False with the
reason when fewer than 3 conditions (Friedman) or fewer than ``min_n`` complete subjects
remain, when every subject ties across all conditions (zero variance of ranks), or, for a
pair, under the rules of :func:`~retrieval_lib.stats.paired_tests.paired_comparison`
(fewer than 6 non-zero deltas, constant deltas).

Examples
--------
>>> import pandas as pd
>>> data = pd.DataFrame({"task": [t for t in "abcdef" for _ in range(3)],
...     "config": ["x", "y", "z"] * 6,
...     "reward": [0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1]})
>>> row = friedman(data, dv="reward", within="config", subject="task").iloc[0]
>>> int(row["n"]), int(row["k"]), round(float(row["Q"]), 4), bool(row["tested"])
(6, 3, 8.3333, True)
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from retrieval_lib import lazylibs
from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.intervals import t_mean_ci
from retrieval_lib.stats.multiple import holm
from retrieval_lib.stats.paired_tests import paired_comparison

__all__ = [
    "FRIEDMAN_COLUMNS",
    "PAIRWISE_COLUMNS",
    "complete_blocks",
    "friedman",
    "pairwise_wilcoxon",
]

#: Stable columns of :func:`friedman`.
FRIEDMAN_COLUMNS: tuple[str, ...] = (
    "dv",
    "n",
    "k",
    "n_dropped",
    "Q",
    "ddof1",
    "p_value",
    "W",
    "tested",
    "reason",
)

#: Stable columns of :func:`pairwise_wilcoxon`.
PAIRWISE_COLUMNS: tuple[str, ...] = (
    "dv",
    "A",
    "B",
    "n",
    "mean_A",
    "mean_B",
    "mean_delta",
    "ci_low",
    "ci_high",
    "wilcoxon_statistic",
    "wilcoxon_p",
    "p_holm",
    "rank_biserial",
    "wins",
    "losses",
    "ties",
    "tested",
    "reason",
)


def complete_blocks(
    data: pd.DataFrame, dv: str, within: str, subject: str
) -> tuple[pd.DataFrame, int]:
    """Wide table subject × condition of ``dv`` over the subjects with every condition.

    Conditions are the distinct values of ``within`` (sorted as strings); a subject with
    a missing (NaN) value or without a row for some condition is dropped (listwise).
    Several rows of one (subject, condition) are refused: aggregate them first (the task
    is the unit: average a task's trials).

    Returns
    -------
    (pandas.DataFrame, int)
        The complete wide table (rows sorted by subject) and the number of subjects dropped.

    Raises
    ------
    StatisticsError
        A missing column, or a (subject, condition) given twice.
    """
    missing = [c for c in (dv, within, subject) if c not in data.columns]
    if missing:
        raise StatisticsError(f"column(s) not in the data: {', '.join(missing)}")
    frame = data[[subject, within, dv]].copy()
    frame[within] = frame[within].astype(str)
    frame[subject] = frame[subject].astype(str)
    if frame.duplicated([subject, within]).any():
        raise StatisticsError(
            f"several rows of one ({subject}, {within}): aggregate them first (one value "
            f"per {subject} and {within})"
        )
    frame[dv] = pd.to_numeric(frame[dv], errors="coerce").astype(float)
    wide = frame.pivot(index=subject, columns=within, values=dv)
    wide = wide.reindex(columns=sorted(wide.columns)).sort_index()
    complete = wide.dropna(how="any")
    return complete, int(len(wide) - len(complete))


def friedman(
    data: pd.DataFrame,
    dv: str,
    within: str,
    subject: str,
    *,
    min_n: int = 3,
    blocks: tuple[pd.DataFrame, int] | None = None,
) -> pd.DataFrame:
    """Friedman test of ``dv`` across the conditions ``within`` over ``subject`` blocks.

    Parameters
    ----------
    data : pandas.DataFrame
        Long format: one row per (subject, condition).
    dv, within, subject : str
        Value, condition and subject (block) columns.
    min_n : int
        Fewest complete subjects for a test.
    blocks : (pandas.DataFrame, int), optional
        :func:`complete_blocks` of the same arguments, already made (not made again).

    Returns
    -------
    pandas.DataFrame
        One row, :data:`FRIEDMAN_COLUMNS`: ``n`` complete subjects, ``k`` conditions,
        ``n_dropped`` subjects without every condition, ``Q`` (tie-corrected chi-square),
        ``ddof1 = k - 1``, ``p_value`` (chi-square approximation), Kendall's ``W``;
        ``tested`` False with the reason when degenerate (module notes).

    Notes
    -----
    Ranks within a subject (average over ties), ``R_j`` the rank sums,
    ``Q = [12 / (n k (k + 1)) * sum(R_j^2) - 3 n (k + 1)] / C`` with the tie correction
    ``C = 1 - sum(t^3 - t) / (n k (k^2 - 1))``; ``p = P(chi2(k - 1) >= Q)``.
    """
    wide, dropped = blocks if blocks is not None else complete_blocks(data, dv, within, subject)
    n, k = wide.shape
    row: dict[str, object] = dict.fromkeys(FRIEDMAN_COLUMNS, math.nan)
    row.update(dv=dv, n=n, k=k, n_dropped=dropped, ddof1=k - 1, tested=False, reason=None)
    k_all = int(data[within].astype(str).nunique())
    values = np.round(wide.to_numpy(dtype=float), 12)
    if k_all < 3:
        row.update(k=k_all, reason=f"{k_all} condition(s): the Friedman test needs at least 3")
    elif n < min_n:
        row["reason"] = (
            f"{n} {subject} value(s) with every {within} is below the minimum of {min_n}"
        )
    elif all(np.unique(r).size == 1 for r in values):
        row["reason"] = f"every one of the {n} {subject}s ties across all {k} {within}s"
    else:
        result = lazylibs.scipy_stats().friedmanchisquare(*values.T)
        q = float(result.statistic)
        row.update(Q=q, p_value=float(result.pvalue), W=q / (n * (k - 1)), tested=True)
    return pd.DataFrame([row], columns=list(FRIEDMAN_COLUMNS))


def pairwise_wilcoxon(
    data: pd.DataFrame,
    dv: str,
    within: str,
    subject: str,
    *,
    padjust: str = "holm",
    min_n: int = 3,
    alpha: float = 0.05,
    blocks: tuple[pd.DataFrame, int] | None = None,
) -> pd.DataFrame:
    """Wilcoxon signed-rank test of every pair of conditions on the complete subjects.

    Parameters
    ----------
    data, dv, within, subject, min_n, blocks
        As :func:`friedman`.
    padjust : {"holm", "none"}
        Correction over the pairs (``p_holm``; with ``"none"`` it equals ``wilcoxon_p``).
    alpha : float
        Level of the t interval of the mean delta (``1 - alpha``).

    Returns
    -------
    pandas.DataFrame
        One row per pair ``A < B`` (conditions sorted as strings), :data:`PAIRWISE_COLUMNS`;
        ``mean_delta = mean(B - A)`` with its t interval over subjects, the Wilcoxon
        statistic ``min(R+, R-)`` and p, ``p_holm`` over the tested pairs,
        ``rank_biserial`` (positive: ``B`` larger). Untested pairs keep ``n``, means and
        counts, with the reason.

    Examples
    --------
    >>> import pandas as pd
    >>> data = pd.DataFrame({"s": list("abc") * 3, "c": ["x"] * 3 + ["y"] * 3 + ["z"] * 3,
    ...                      "v": [1, 2, 3, 2, 3, 4, 1, 2, 3]})
    >>> pairwise_wilcoxon(data, "v", "c", "s")[["A", "B", "n", "mean_delta", "tested"]].values.tolist()
    [['x', 'y', 3, 1.0, False], ['x', 'z', 3, 0.0, False], ['y', 'z', 3, -1.0, False]]
    """
    if padjust not in ("holm", "none"):
        raise StatisticsError(f"padjust must be 'holm' or 'none', not {padjust!r}")
    wide, _ = blocks if blocks is not None else complete_blocks(data, dv, within, subject)
    rows = []
    for a, b in itertools.combinations(list(wide.columns), 2):
        res = paired_comparison(
            wide[a].to_numpy(), wide[b].to_numpy(), min_n=min_n, metric=dv, n_boot=1
        ).iloc[0]
        low, high = (math.nan, math.nan)
        if bool(res["tested"]):
            low, high = t_mean_ci(wide[b].to_numpy() - wide[a].to_numpy(), alpha=alpha)
        rows.append(
            {
                "dv": dv,
                "A": a,
                "B": b,
                "n": int(res["n"]),
                "mean_A": float(res["mean_baseline"]),
                "mean_B": float(res["mean_treatment"]),
                "mean_delta": float(res["mean_delta"]),
                "ci_low": low,
                "ci_high": high,
                "wilcoxon_statistic": float(res["wilcoxon_statistic"]),
                "wilcoxon_p": float(res["wilcoxon_p"]),
                "p_holm": math.nan,
                "rank_biserial": float(res["rank_biserial"]),
                "wins": int(res["wins"]),
                "losses": int(res["losses"]),
                "ties": int(res["ties"]),
                "tested": bool(res["tested"]),
                "reason": res["reason"],
            }
        )
    out = pd.DataFrame(rows, columns=list(PAIRWISE_COLUMNS))
    if not out.empty:
        p = out["wilcoxon_p"].to_numpy(dtype=float)
        out["p_holm"] = holm(p) if padjust == "holm" else p
    return out

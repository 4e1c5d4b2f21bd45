"""Matched baseline-versus-treatment comparisons on the same tasks.

:func:`pair_configs` decides which configs are compared, deterministically;
:func:`match_tasks` lines up, for one pair, the tasks both configs ran with the same model
and a valid reward (harness versions equal or unknown), combining repeated trials. The
statistics of a match are :mod:`retrieval_lib.stats.paired_tests`.

Rules
-----
* **Matching.** A task (canonical ``task_name``) is matched when both configs have trials
  of it with the same ``model`` and each side has at least one trial with a finite
  ``reward``. A missing model (None/NaN) equals another missing one.
* **Harness version: unknown is not different.** Two known versions that differ never
  pair (``harness version differs: ...`` in ``unmatched``). A trial whose version is
  unknown (None/NaN: no usable trace, nothing else recorded it) differs from nothing: it
  joins the pair of the one known version of its task (or pairs with the other side's
  unknown trials when neither side knows one), and the pair is flagged
  ``harness_version_unverified`` with a ``harness_version_note`` saying which side and
  why (the table's ``harness_version_unknown_reason``, e.g. ``"baseline version unknown
  (no usable trace)"``). Where the known versions leave it ambiguous (several on one
  side), unknown trials are left out with the reason. ``strict_harness_version=True``
  keeps only pairs whose versions are both known and equal; the flagged pairs go to
  ``unmatched``. :meth:`MatchResult.summary_line` says how many pairs each rule keeps.
* **Repeated trials** of a (task, config, model, version) are combined per column by the
  mean over the trials with a valid reward, NaNs skipped (``combine="mean"``, default),
  or by taking the trial flagged ``is_latest_trial`` (``combine="latest"``). When several
  trials of one side are flagged latest (a pooled table of several runs, each flagging
  its own latest trial), the one with the latest ``started_at`` is taken; without a
  ``started_at`` column (or value) to decide, ``"latest"`` is refused with a
  :class:`~retrieval_lib.errors.StatisticsError` rather than picking by trial name. The
  trial counts are kept. Errored and timed-out trials are kept (their reward is what the
  verifier gave) and counted in ``errored_trials_*`` / ``timed_out_trials_*``.

Examples
--------
>>> pair_configs(["mcp-remote-direct", "baseline-local-direct"])
[('baseline-local-direct', 'mcp-remote-direct')]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pandas as pd

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import (
    OUTCOME_COLUMNS,
    find_metric_columns,
    require_columns,
)
from retrieval_lib.stats.matching import (
    MATCH_KEY_COLUMNS,
    UNKNOWN_REASON_COLUMN,
    UNMATCHED_COLUMNS,
    TaskMatcher,
)

__all__ = [
    "BASELINE_PREFIXES",
    "TREATMENT_PREFIXES",
    "MATCH_KEY_COLUMNS",
    "MatchResult",
    "UNKNOWN_REASON_COLUMN",
    "UNMATCHED_COLUMNS",
    "match_tasks",
    "matched_summary",
    "pair_configs",
]

#: Config names starting with these (case-insensitive) are baselines.
BASELINE_PREFIXES: tuple[str, ...] = ("baseline",)
#: Config names starting with these (case-insensitive) are treatments (MCP).
TREATMENT_PREFIXES: tuple[str, ...] = ("mcp", "sourcegraph")


# --------------------------------------------------------------------------- pairing


def pair_configs(
    config_names: Iterable[str], baseline: str | None = None, treatment: str | None = None
) -> list[tuple[str, str]]:
    """Decide which (baseline, treatment) config pairs to compare.

    Parameters
    ----------
    config_names : iterable of str
        Configs present in the data (duplicates allowed).
    baseline, treatment : str, optional
        Explicit choices. Given both, exactly that pair. Given one, it is paired with
        every config of the other kind found by name.

    Returns
    -------
    list of (str, str)
        Every baseline (name starts with ``baseline``) × every treatment (name starts
        with ``mcp`` or ``sourcegraph``), sorted; empty when no pair exists.

    Raises
    ------
    StatisticsError
        When an explicit config is not among ``config_names``, or both are the same.

    Examples
    --------
    >>> pair_configs(["mcp", "baseline", "sourcegraph_full", "other"])
    [('baseline', 'mcp'), ('baseline', 'sourcegraph_full')]
    >>> pair_configs(["a", "b"], baseline="b", treatment="a")
    [('b', 'a')]
    """
    names = sorted({str(n) for n in config_names})
    for label, chosen in (("baseline", baseline), ("treatment", treatment)):
        if chosen is not None and chosen not in names:
            from retrieval_lib.suggest import hint

            raise StatisticsError(
                f"{label} config {chosen!r} not found{hint(chosen, names)}; "
                f"configs present: {', '.join(names) or 'none'}"
            )
    if baseline is not None and baseline == treatment:
        raise StatisticsError(f"baseline and treatment are the same config {baseline!r}")
    baselines = (
        [baseline]
        if baseline is not None
        else [n for n in names if n.lower().startswith(BASELINE_PREFIXES) and n != treatment]
    )
    treatments = (
        [treatment]
        if treatment is not None
        else [n for n in names if n.lower().startswith(TREATMENT_PREFIXES) and n != baseline]
    )
    return sorted((b, t) for b in baselines for t in treatments if b != t)


# --------------------------------------------------------------------------- matching


def matched_summary(n_matched: int, n_unverified: int, *, strict: bool) -> str:
    """``"3 matched (1 with unverified harness version); strict: 2"`` and its strict form.

    ``n_matched`` counts the pairs kept by the rule used; ``n_unverified`` the pairs
    whose harness version is unverified (kept when lenient, left out when ``strict``).

    Examples
    --------
    >>> matched_summary(3, 1, strict=False)
    '3 matched (1 with unverified harness version); strict: 2'
    >>> matched_summary(2, 0, strict=False)
    '2 matched (harness version verified for all); strict: 2'
    >>> matched_summary(2, 1, strict=True)
    '2 matched (strict harness version; 1 with unverified harness version left out)'
    """
    if strict:
        return (
            f"{n_matched} matched (strict harness version; {n_unverified} with unverified "
            "harness version left out)"
        )
    detail = (
        f"{n_unverified} with unverified harness version"
        if n_unverified
        else "harness version verified for all"
    )
    return f"{n_matched} matched ({detail}); strict: {n_matched - n_unverified}"


@dataclass(frozen=True)
class MatchResult:
    """Tasks of one (baseline, treatment) pair, lined up.

    Attributes
    ----------
    baseline, treatment : str
        Config names.
    keys : pandas.DataFrame
        One row per matched task: ``task_name, model, harness_version``,
        ``harness_version_unverified`` (bool: a side's version is unknown, so equal
        versions are not verified), ``harness_version_note`` (which side and why, else
        None), ``benchmark``, ``n_trials_baseline``, ``n_trials_treatment`` (trials with a valid reward that
        were combined), ``errored_trials_*``, ``timed_out_trials_*``, ``flagged`` (any
        errored or timed-out trial on either side), ``tokens_source_*``, ``cost_source_*``.
    baseline_values, treatment_values : pandas.DataFrame
        Combined per-task values (float; NaN when missing), rows aligned with ``keys``.
    unmatched : pandas.DataFrame
        One row per (task, side, model, version) left out: ``task_name, side,
        config_name, model, harness_version, n_trials, reason``.
    combine : str
        Rule used for repeated trials (``"mean"`` or ``"latest"``).
    value_columns : tuple of str
        The columns of ``baseline_values`` / ``treatment_values``.
    strict_harness_version : bool
        Whether only pairs with known, equal versions were kept.
    n_unverified : int
        Pairs whose harness version is unverified: kept (and flagged) in ``keys``, or,
        in strict mode, left out (in ``unmatched``).
    """

    baseline: str
    treatment: str
    keys: pd.DataFrame
    baseline_values: pd.DataFrame
    treatment_values: pd.DataFrame
    unmatched: pd.DataFrame
    combine: str = "mean"
    value_columns: tuple[str, ...] = field(default=())
    strict_harness_version: bool = False
    n_unverified: int = 0

    @property
    def n_matched(self) -> int:
        """Number of matched tasks (under the rule used: lenient or strict)."""
        return len(self.keys)

    @property
    def n_matched_strict(self) -> int:
        """Matched tasks whose harness version is known and equal on both sides."""
        return len(self.keys) - int(self.keys["harness_version_unverified"].sum())

    def summary_line(self) -> str:
        """How many pairs each harness-version rule kept, in one line.

        Examples
        --------
        >>> df = pd.DataFrame({"config_name": ["b", "t", "b", "t"], "task_name": ["x", "x", "y", "y"],
        ...     "harness_version": ["1", "1", "1", None], "reward": [1.0, 0.0, 1.0, 1.0]})
        >>> match_tasks(df, "b", "t").summary_line()
        '2 matched (1 with unverified harness version); strict: 1'
        >>> match_tasks(df, "b", "t", strict_harness_version=True).summary_line()
        '1 matched (strict harness version; 1 with unverified harness version left out)'
        """
        return matched_summary(
            self.n_matched, self.n_unverified, strict=self.strict_harness_version
        )

    def per_task(self) -> pd.DataFrame:
        """Wide table: the keys, then ``baseline:<col>``, ``treatment:<col>``, ``delta:<col>``.

        ``delta`` is treatment − baseline and NaN whenever either side is missing.
        """
        parts = [self.keys.reset_index(drop=True)]
        b = self.baseline_values.reset_index(drop=True)
        t = self.treatment_values.reset_index(drop=True)
        columns: dict[str, pd.Series] = {}
        for col in self.value_columns:
            columns[f"baseline:{col}"] = b[col]
            columns[f"treatment:{col}"] = t[col]
            columns[f"delta:{col}"] = t[col] - b[col]
        parts.append(pd.DataFrame(columns, index=parts[0].index))
        out = pd.concat(parts, axis=1)
        out.insert(0, "treatment", self.treatment)
        out.insert(0, "baseline", self.baseline)
        return out


def match_tasks(
    df: pd.DataFrame,
    baseline: str,
    treatment: str,
    combine: str = "mean",
    value_columns: Sequence[str] | None = None,
    *,
    strict_harness_version: bool = False,
) -> MatchResult:
    """Line up the tasks that ``baseline`` and ``treatment`` both ran comparably.

    Vectorised over all tasks (:class:`~retrieval_lib.stats.matching.TaskMatcher`).

    Parameters
    ----------
    df : pandas.DataFrame
        Per-task metrics table (needs ``config_name``, ``task_name``, ``reward``; uses
        ``model``, ``harness_version``, ``errored``, ``timed_out``, ``benchmark``,
        ``tokens_source``, ``cost_source`` and ``is_latest_trial`` when present).
    baseline, treatment : str
        Config names.
    combine : {"mean", "latest"}
        How repeated trials of a task are combined (see the module notes).
    value_columns : sequence of str, optional
        Columns to carry; default: the outcomes present, then every metric column.
    strict_harness_version : bool
        Keep only pairs whose harness versions are both known and equal; a pair with an
        unknown version goes to ``unmatched`` with the reason (default: kept, flagged).

    Returns
    -------
    MatchResult

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({
    ...     "config_name": ["b", "t", "b", "t", "t"],
    ...     "task_name": ["x", "x", "y", "y", "z"],
    ...     "model": ["m"] * 5,
    ...     "reward": [1.0, 0.0, 0.5, 1.0, 1.0]})
    >>> m = match_tasks(df, "b", "t")
    >>> m.keys["task_name"].tolist(), m.unmatched["reason"].tolist()
    (['x', 'y'], ['not run by baseline config b'])
    """
    if combine not in ("mean", "latest"):
        raise StatisticsError(f"combine must be 'mean' or 'latest', not {combine!r}")
    require_columns(df, ["config_name", "task_name", "reward"], what="metrics table")
    present = set(df["config_name"].dropna().astype(str).unique().tolist())
    for label, name in (("baseline", baseline), ("treatment", treatment)):
        if name not in present:
            raise StatisticsError(
                f"{label} config {name!r} not in the table; configs: {', '.join(sorted(present))}"
            )
    if value_columns is None:
        value_columns = [c for c in OUTCOME_COLUMNS if c in df.columns] + find_metric_columns(df)
    value_columns = list(dict.fromkeys(value_columns))
    require_columns(df, value_columns, what="metrics table")

    matcher = TaskMatcher(df, baseline, treatment, combine, value_columns)
    matcher.match(strict_harness_version)
    # from no rows, a frame of object columns, as from records
    keys = pd.DataFrame(
        matcher.keys if matcher.picks["baseline"] else [], columns=list(MATCH_KEY_COLUMNS)
    )
    keys["harness_version_unverified"] = keys["harness_version_unverified"].astype(bool)
    unmatched = matcher.unmatched
    return MatchResult(
        baseline=baseline,
        treatment=treatment,
        keys=keys,
        baseline_values=matcher.values("baseline"),
        treatment_values=matcher.values("treatment"),
        unmatched=pd.DataFrame(
            unmatched if unmatched["task_name"] else [], columns=list(UNMATCHED_COLUMNS)
        ),
        combine=combine,
        value_columns=tuple(value_columns),
        strict_harness_version=strict_harness_version,
        n_unverified=matcher.n_unverified,
    )

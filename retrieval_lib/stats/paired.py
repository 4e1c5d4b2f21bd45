"""Matched baseline-versus-treatment comparisons on the same tasks.

Three steps, each usable on its own:

1. :func:`pair_configs` decides which configs are compared, deterministically.
2. :func:`match_tasks` lines up, for one pair, the tasks both configs ran with the same
   model and a valid reward (harness versions equal or unknown), combining repeated
   trials.
3. The paired statistics of a match are :mod:`retrieval_lib.stats.paired_tests`:
   ``paired_comparison`` tests one metric's paired deltas (treatment − baseline),
   ``compare_matched`` every metric of a :class:`MatchResult` with Holm-adjusted
   p-values, ``mcnemar_exact`` pass/fail.

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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import (
    OUTCOME_COLUMNS,
    SOURCE_COLUMNS,
    as_float,
    find_metric_columns,
    require_columns,
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

#: Columns of :attr:`MatchResult.keys`, in order.
MATCH_KEY_COLUMNS: tuple[str, ...] = (
    "task_name",
    "model",
    "harness_version",
    "harness_version_unverified",
    "harness_version_note",
    "benchmark",
    "n_trials_baseline",
    "n_trials_treatment",
    "trials_without_reward_baseline",
    "trials_without_reward_treatment",
    "errored_trials_baseline",
    "errored_trials_treatment",
    "timed_out_trials_baseline",
    "timed_out_trials_treatment",
    "flagged",
    *[f"{c}_baseline" for c in SOURCE_COLUMNS],
    *[f"{c}_treatment" for c in SOURCE_COLUMNS],
)

#: Columns of :attr:`MatchResult.unmatched` (a task one side ran that found no match), in order.
UNMATCHED_COLUMNS: tuple[str, ...] = (
    "task_name",
    "side",
    "config_name",
    "model",
    "harness_version",
    "n_trials",
    "reason",
)

#: Metrics-table column saying why a trial's harness version is unknown (used in notes).
UNKNOWN_REASON_COLUMN = "harness_version_unknown_reason"
_MISSING_KEY = "\x00missing"  # stands for None/NaN in grouping keys (None == None)


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


def _key_series(df: pd.DataFrame, column: str) -> pd.Series:
    if column not in df.columns:
        return pd.Series(_MISSING_KEY, index=df.index, dtype=object)
    values = df[column].astype(object)
    return values.where(values.notna(), _MISSING_KEY).map(str)


def _display_key(value: str) -> str | None:
    return None if value == _MISSING_KEY else value


def _latest_by_start(latest: pd.DataFrame) -> pd.DataFrame:
    """The one trial with the latest ``started_at`` among several flagged latest.

    Several runs pooled together each flag their own latest trial of a task; only the
    start time says which is the latest overall (a trial name says nothing about time).
    """
    where = ", ".join(sorted(str(t) for t in latest.get("trial_name", pd.Series()).dropna()))
    if "started_at" not in latest.columns:
        raise StatisticsError(
            f"combine='latest': {len(latest)} trials of task "
            f"{latest['task_name'].iloc[0]!r} are each flagged as the latest ({where}), "
            "as happens when several runs are pooled, and the table has no started_at "
            "column to choose between them; use combine='mean'"
        )
    started = pd.to_datetime(latest["started_at"], errors="coerce", utc=True)
    if started.isna().any():
        raise StatisticsError(
            f"combine='latest': {len(latest)} trials of task "
            f"{latest['task_name'].iloc[0]!r} are each flagged as the latest ({where}) and "
            "not all have a readable started_at to choose between them; use combine='mean'"
        )
    order = latest.assign(_started=started.to_numpy())
    keys = ["_started", "trial_name"] if "trial_name" in order.columns else ["_started"]
    # the latest start wins; equal starts fall back to trial name so the choice is stable
    return order.sort_values(keys, kind="mergesort").iloc[[-1]].drop(columns="_started")


class _VersionPlan(NamedTuple):
    """How the harness-version groups of one (task, model) are paired.

    ``pairs``: ``(version, baseline groups, treatment groups)`` per pair, ``version`` the
    known version of the pair or the missing key; ``left_out``: ``(side, group, reason)``.
    """

    pairs: list[tuple[str, list[str], list[str]]]
    left_out: list[tuple[str, str, str]]


def _versions_text(versions: Iterable[str]) -> str:
    return ", ".join(sorted(versions)) or "none"


def _plan_versions(
    baseline: Mapping[str, object], treatment: Mapping[str, object], names: dict[str, str]
) -> _VersionPlan:
    """Pair the harness-version groups of one task and model (both sides have trials).

    Known versions pair with the same known version; trials of unknown version join the
    one version they can belong to (their side knows no other), or pair among themselves
    when neither side knows its version. Two known versions that differ never pair.
    """
    groups = {"baseline": baseline, "treatment": treatment}
    known = {side: {v for v in g if v != _MISSING_KEY} for side, g in groups.items()}
    unknown = {side: _MISSING_KEY in g for side, g in groups.items()}
    common = known["baseline"] & known["treatment"]
    pairs: list[tuple[str, list[str], list[str]]] = []
    left_out: list[tuple[str, str, str]] = []

    def other(side: str) -> str:
        return "treatment" if side == "baseline" else "baseline"

    for side in ("baseline", "treatment"):
        if not known[other(side)]:
            continue
        for version in sorted(known[side] - common):
            left_out.append(
                (
                    side,
                    version,
                    f"harness version differs: {version} here, "
                    f"{_versions_text(known[other(side)])} in {other(side)} config "
                    f"{names[other(side)]}",
                )
            )
    all_known = known["baseline"] | known["treatment"]
    single: str | None = None
    if len(common) == 1:
        single = next(iter(common))
    elif len(all_known) == 1 and not (known["baseline"] and known["treatment"]):
        single = next(iter(all_known))  # only one side knows its version, and it is one
    if single is not None:
        # The unknown trials of a side join the pair when that side knows no other
        # version than the pair's: then they can only be it (or pair as unknown).
        chosen: dict[str, list[str]] = {}
        for side in ("baseline", "treatment"):
            chosen[side] = [single] if single in groups[side] else []
            if unknown[side] and known[side] <= {single}:
                chosen[side].append(_MISSING_KEY)
            elif unknown[side]:
                left_out.append(
                    (
                        side,
                        _MISSING_KEY,
                        "harness version unknown here and this config ran several "
                        f"({_versions_text(known[side])}): cannot tell which it is",
                    )
                )
        pairs.append((single, chosen["baseline"], chosen["treatment"]))
        return _VersionPlan(pairs, left_out)
    for version in sorted(common):
        pairs.append((version, [version], [version]))
    if not known["baseline"] and not known["treatment"]:
        pairs.append((_MISSING_KEY, [_MISSING_KEY], [_MISSING_KEY]))
        return _VersionPlan(pairs, left_out)
    ambiguous = (
        f"baseline ran {_versions_text(known['baseline'])}, "
        f"treatment ran {_versions_text(known['treatment'])}"
    )
    for side in ("baseline", "treatment"):
        if unknown[side]:
            left_out.append(
                (
                    side,
                    _MISSING_KEY,
                    f"harness version unknown here and the known versions leave it ambiguous "
                    f"({ambiguous})",
                )
            )
        if not known[other(side)] and known[side]:
            # the other side knows no version and this side ran several: which one pairs?
            for version in sorted(known[side]):
                left_out.append(
                    (
                        side,
                        version,
                        f"harness version of {other(side)} config {names[other(side)]} is "
                        f"unknown and this config ran several ({ambiguous})",
                    )
                )
    return _VersionPlan(pairs, left_out)


class _Groups:
    """Per-group facts of the pooled table, computed by one group-by (no per-task frame).

    A group is one (config, task, model, harness version); ``rows[g]`` are its row
    positions in table order, ``valid[g]`` those with a finite reward.
    """

    def __init__(self, work: pd.DataFrame, gid: np.ndarray, n_groups: int) -> None:
        order = np.argsort(gid, kind="stable")
        self.size = np.bincount(gid, minlength=n_groups)
        starts = np.concatenate([[0], np.cumsum(self.size)])
        self.order = order
        self.starts = starts
        reward = work["reward"].to_numpy(dtype=float)
        finite = np.isfinite(reward)
        self.finite = finite
        self.n_valid = np.bincount(gid, weights=finite, minlength=n_groups).astype(np.int64)
        valid_order = order[finite[order]]
        self.valid_order = valid_order
        self.valid_starts = np.concatenate([[0], np.cumsum(self.n_valid)])
        self.flag_sums = {
            col: (
                np.bincount(
                    gid,
                    weights=np.nan_to_num(as_float(work[col]).to_numpy(), nan=0.0),
                    minlength=n_groups,
                )
                if col in work.columns
                else np.zeros(n_groups)
            )
            for col in ("errored", "timed_out")
        }
        self.texts = {
            col: _Texts(work, gid, order, col)
            for col in ("benchmark", UNKNOWN_REASON_COLUMN, *SOURCE_COLUMNS)
        }

    def rows(self, g: int) -> np.ndarray:
        return self.order[self.starts[g] : self.starts[g + 1]]

    def valid_rows(self, g: int) -> np.ndarray:
        return self.valid_order[self.valid_starts[g] : self.valid_starts[g + 1]]


class _Texts:
    """The distinct non-missing values (as text) of one column in each group.

    With at most 62 distinct values in the column (the usual case: benchmarks, sources,
    reasons) each group holds a bit mask and a union of groups is an OR; otherwise a set.
    """

    def __init__(self, work: pd.DataFrame, gid: np.ndarray, order: np.ndarray, column: str):
        self.masks: np.ndarray | None = None
        self.sets: dict[int, set[str]] = {}
        self._joined: dict[int, str | None] = {0: None}
        n_groups = len(order) and int(gid.max()) + 1
        if column not in work.columns or not n_groups:
            self.masks = np.zeros(n_groups, dtype=np.int64)
            self.labels: list[str] = []
            return
        values = work[column]
        present = values.notna().to_numpy()
        text = np.full(len(values), None, dtype=object)
        text[present] = values[present].astype(object).map(str).to_numpy()
        codes, labels = pd.factorize(text, use_na_sentinel=True)
        self.labels = [str(v) for v in labels]
        if len(self.labels) <= 62:
            bits = np.where(codes >= 0, np.left_shift(1, np.maximum(codes, 0)), 0).astype(np.int64)
            starts = np.flatnonzero(np.r_[True, np.diff(gid[order]) != 0])
            self.masks = np.bitwise_or.reduceat(bits[order], starts)
            return
        for g, v in zip(gid[present].tolist(), text[present].tolist(), strict=True):
            self.sets.setdefault(g, set()).add(v)

    def values(self, gids: Iterable[int]) -> set[str]:
        if self.masks is None:
            out: set[str] = set()
            for g in gids:
                out |= self.sets.get(g, set())
            return out
        mask = 0
        for g in gids:
            mask |= int(self.masks[g])
        return {label for i, label in enumerate(self.labels) if mask >> i & 1}

    def joined(self, gids: Iterable[int]) -> str | None:
        """``"a|b"``: the values of these groups, sorted; None when there are none."""
        if self.masks is None:
            values = self.values(gids)
            return "|".join(sorted(values)) if values else None
        mask = 0
        for g in gids:
            mask |= int(self.masks[g])
        return self._mask_text(mask)

    def _mask_text(self, mask: int) -> str | None:
        if mask not in self._joined:
            labels = sorted(label for i, label in enumerate(self.labels) if mask >> i & 1)
            self._joined[mask] = "|".join(labels)
        return self._joined[mask]

    def joined_many(self, *gid_arrays: np.ndarray) -> list[str | None]:
        """:meth:`joined` of each row of groups (one group per array), for many at once."""
        if self.masks is None:
            return [self.joined(gs) for gs in zip(*(a.tolist() for a in gid_arrays), strict=True)]
        mask = np.zeros(len(gid_arrays[0]), dtype=np.int64)
        for a in gid_arrays:
            mask |= self.masks[a]
        unique, inverse = np.unique(mask, return_inverse=True)
        texts = [self._mask_text(int(m)) for m in unique.tolist()]
        return [texts[i] for i in inverse.tolist()]


def _nan_mean_rows(values: np.ndarray) -> np.ndarray:
    """Mean of each row skipping NaN, as ``DataFrame.mean(skipna=True)`` computes it.

    NaN are filled with 0 and each row is summed by numpy's reduction along the last
    (contiguous) axis, then divided by the count of non-NaN values: the same arithmetic
    (so the same bits) as pandas' ``nanops.nanmean`` on one column of values.
    """
    mask = np.isnan(values)
    filled = np.where(mask, 0.0, values)
    total = filled.sum(axis=-1, dtype=np.float64)
    count = (~mask).sum(axis=-1).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    return np.where(count == 0, np.nan, mean)


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

    One group-by of the pooled table gives every (config, task, model, harness version)
    group's counts, flags and texts; the per-task work is a few dictionary look-ups, and
    the means of repeated trials are computed for all tasks at once (the same arithmetic
    as ``DataFrame.mean``). No per-task frame is built: O(trials log trials).

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

    # Only the columns matching reads: a study's table has a hundred.
    needed = [
        "config_name",
        "task_name",
        "model",
        "harness_version",
        "trial_name",
        "reward",
        "is_latest_trial",
        "started_at",
        "errored",
        "timed_out",
        "benchmark",
        UNKNOWN_REASON_COLUMN,
        *SOURCE_COLUMNS,
        *value_columns,
    ]
    columns = [c for c in dict.fromkeys(needed) if c in df.columns]
    work = df.loc[df["config_name"].astype(str).isin([baseline, treatment]), columns].copy()
    for col in dict.fromkeys([*value_columns, "reward"]):
        work[col] = as_float(work[col])
    work["_task"] = work["task_name"].astype(str)
    work["_model"] = _key_series(work, "model")
    work["_harness"] = _key_series(work, "harness_version")
    # "unknown" and blank are how harnesses write a version they do not know
    blank = work["_harness"].str.strip().str.lower().isin(["", "unknown", "none", "nan"])
    work.loc[blank, "_harness"] = _MISSING_KEY
    has_trial_name = "trial_name" in work.columns
    if has_trial_name:
        work = work.sort_values(["_task", "trial_name"], kind="mergesort", na_position="last")
    work = work.reset_index(drop=True)

    # one group-by: group id per row, and each group's key
    grouped = work.groupby(["config_name", "_task", "_model", "_harness"], sort=True)
    gid = grouped.ngroup().to_numpy(dtype=np.int64)
    n_groups = int(gid.max()) + 1 if len(gid) else 0
    facts = _Groups(work, gid, n_groups)
    first = facts.order[facts.starts[:-1]]
    config_g = work["config_name"].astype(str).to_numpy(dtype=object)[first]
    task_g, model_g, harness_g = (
        work[c].to_numpy(dtype=object)[first] for c in ("_task", "_model", "_harness")
    )
    is_base = config_g == baseline
    # (task, model) of each group, numbered in sorted order (the order of the output)
    task_codes, _ = pd.factorize(task_g, sort=True)
    model_codes, model_uniques = pd.factorize(model_g, sort=True)
    pair_codes = task_codes.astype(np.int64) * max(len(model_uniques), 1) + model_codes
    _, key_g = np.unique(pair_codes, return_inverse=True)
    key_g = key_g.reshape(-1)
    n_keys = int(key_g.max()) + 1 if len(key_g) else 0

    # The common case, done for all tasks at once: one group on each side, the same known
    # version, a value to combine on both sides. Every other (task, model) goes through
    # the rules one by one below; a task is wholly one or the other.
    n_base = np.bincount(key_g[is_base], minlength=n_keys)
    n_treat = np.bincount(key_g[~is_base], minlength=n_keys)
    gb = np.full(n_keys, -1, dtype=np.int64)
    gt = np.full(n_keys, -1, dtype=np.int64)
    gb[key_g[is_base]] = np.flatnonzero(is_base)
    gt[key_g[~is_base]] = np.flatnonzero(~is_base)
    fast = (n_base == 1) & (n_treat == 1)
    fast[fast] &= (harness_g[gb[fast]] == harness_g[gt[fast]]) & (
        harness_g[gb[fast]] != _MISSING_KEY
    )
    latest_row = np.full(n_groups, -1, dtype=np.int64)
    if combine == "mean":
        fast[fast] &= (facts.n_valid[gb[fast]] > 0) & (facts.n_valid[gt[fast]] > 0)
    elif "is_latest_trial" not in work.columns:
        fast[:] = False
    else:
        latest_all = work["is_latest_trial"].fillna(False).astype(bool).to_numpy()
        n_latest = np.bincount(gid, weights=latest_all, minlength=n_groups)
        flagged_rows = np.flatnonzero(latest_all)
        latest_row[gid[flagged_rows][::-1]] = flagged_rows[::-1]  # first flagged per group
        fast[fast] &= (n_latest[gb[fast]] == 1) & (n_latest[gt[fast]] == 1)
        reward_all = work["reward"].to_numpy(dtype=float)
        fast[fast] &= np.isfinite(reward_all[latest_row[gb[fast]]]) & np.isfinite(
            reward_all[latest_row[gt[fast]]]
        )
    fast_keys = np.flatnonzero(fast)

    # (task, model) -> side -> harness version (or the missing key) -> group id
    by_task: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
    models_of: dict[tuple[str, str], set[str]] = {}  # (task, side) -> models that ran it
    slow_tasks = np.unique(task_codes[~fast[key_g]])
    in_slow = np.flatnonzero(np.isin(task_codes, slow_tasks))
    for g, base, task, model, harness in zip(
        in_slow.tolist(),
        is_base[in_slow].tolist(),
        task_g[in_slow].tolist(),
        model_g[in_slow].tolist(),
        harness_g[in_slow].tolist(),
        strict=True,
    ):
        side = "baseline" if base else "treatment"
        models_of.setdefault((task, side), set()).add(model)
        if fast[key_g[g]]:
            continue
        groups = by_task.setdefault((task, model), {"baseline": {}, "treatment": {}})
        groups[side][harness] = g
    slow_groups = np.flatnonzero(~fast[key_g])
    key_of_task = dict(
        zip(
            zip(task_g[slow_groups].tolist(), model_g[slow_groups].tolist(), strict=True),
            key_g[slow_groups].tolist(),
            strict=True,
        )
    )

    names = {"baseline": baseline, "treatment": treatment}
    size = facts.size
    trial_names = work["trial_name"].to_numpy(dtype=object) if has_trial_name else None
    latest_flags: np.ndarray | None = None
    if combine == "latest" and "is_latest_trial" in work.columns:
        latest_flags = work["is_latest_trial"].fillna(False).astype(bool).to_numpy()
    started: list[list[object] | None] = [None]  # parsed started_at, computed when needed

    def merged_rows(gids: list[int], valid: bool) -> np.ndarray:
        """Row positions of a side made of several groups, in the order of the old merge."""
        parts = [facts.valid_rows(g) if valid else facts.rows(g) for g in gids]
        if len(parts) == 1:
            return parts[0]
        rows = np.concatenate(parts)
        if trial_names is None:
            return rows
        names_ = trial_names[rows]
        missing = pd.isna(names_)
        keyed = sorted(
            range(len(rows)), key=lambda i: (bool(missing[i]), "" if missing[i] else names_[i])
        )
        return rows[np.asarray(keyed, dtype=np.int64)]

    def combine_latest(gids: list[int]) -> int | str:
        """Row of the latest trial of a side, or why there is none."""
        if latest_flags is None:
            return "no is_latest_trial column to pick the latest trial"
        rows = merged_rows(gids, valid=False)
        latest = rows[latest_flags[rows]]
        if len(latest) == 0:
            return "no trial is flagged as the latest"
        chosen = int(latest[0]) if len(latest) == 1 else _latest_of(latest)
        if not np.isfinite(facts_reward[chosen]):
            return "the latest trial has no valid reward"
        return chosen

    def _latest_of(latest: np.ndarray) -> int:
        fast = "started_at" in work.columns and trial_names is not None
        if fast:
            if started[0] is None:
                parsed = pd.to_datetime(work["started_at"], errors="coerce", utc=True)
                started[0] = list(parsed)
            times = [started[0][i] for i in latest]  # type: ignore[index]
            labels = trial_names[latest]  # type: ignore[index]
            fast = not any(pd.isna(t) for t in times) and not pd.isna(labels).any()
        if not fast:
            # the exact old decision (and its refusal) on the few rows concerned
            frame = work.iloc[latest]
            picked = _latest_by_start(frame)
            return int(picked.index[0])
        ranked = sorted(range(len(latest)), key=lambda i: (times[i], labels[i]))
        return int(latest[ranked[-1]])

    facts_reward = work["reward"].to_numpy(dtype=float)

    key_cols: dict[str, list[Any]] = {c: [] for c in MATCH_KEY_COLUMNS}
    b_pick: list[int | list[int]] = []  # a row (latest) or the group ids whose mean is taken
    t_pick: list[int | list[int]] = []
    unmatched: dict[str, list[object]] = {c: [] for c in UNMATCHED_COLUMNS}

    def leave_out(side: str, key: tuple[str, str, str], n_trials: int, reason: str) -> None:
        for col, value in zip(
            UNMATCHED_COLUMNS,
            (
                key[0],
                side,
                names[side],
                _display_key(key[1]),
                _display_key(key[2]),
                n_trials,
                reason,
            ),
            strict=True,
        ):
            unmatched[col].append(value)

    def version_note(sides: dict[str, list[int]]) -> str | None:
        parts = []
        for side, gids in sides.items():
            unknown = [g for g in gids if harness_g[g] == _MISSING_KEY]
            if not unknown:
                continue
            n_unknown = int(sum(size[g] for g in unknown))
            n_rows = int(sum(size[g] for g in gids))
            reasons: set[str] = set()
            for g in unknown:
                reasons |= facts.texts[UNKNOWN_REASON_COLUMN].values([g])
            why = "; ".join(sorted(reasons)) or "no version recorded"
            if n_unknown == n_rows:
                parts.append(f"{side} version unknown ({why})")
            else:
                parts.append(f"{side}: {n_unknown} of {n_rows} trials of unknown version ({why})")
        return "; ".join(parts) or None

    n_unverified = 0
    row_key: list[int] = []  # (task, model) number of each key row of the loop
    for (task, model), groups in sorted(by_task.items()):
        if not groups["baseline"] or not groups["treatment"]:
            ran = "baseline" if groups["baseline"] else "treatment"
            absent = "treatment" if ran == "baseline" else "baseline"
            other_models = sorted(m for m in models_of.get((task, absent), ()) if m != model)
            if other_models:
                reason = (
                    f"model differs: {_display_key(model) or 'none'} here, "
                    f"{', '.join(_display_key(m) or 'none' for m in other_models)} "
                    f"in {absent} config {names[absent]}"
                )
            else:
                reason = f"not run by {absent} config {names[absent]}"
            for harness, g in sorted(groups[ran].items()):
                leave_out(ran, (task, model, harness), int(size[g]), reason)
            continue
        plan = _plan_versions(groups["baseline"], groups["treatment"], names)
        for side, harness, reason in plan.left_out:
            leave_out(side, (task, model, harness), int(size[groups[side][harness]]), reason)
        for version, b_versions, t_versions in plan.pairs:
            sides = {
                "baseline": [groups["baseline"][v] for v in b_versions],
                "treatment": [groups["treatment"][v] for v in t_versions],
            }
            n_rows = {s: int(sum(size[g] for g in gids)) for s, gids in sides.items()}
            n_valid = {s: int(sum(facts.n_valid[g] for g in gids)) for s, gids in sides.items()}
            key = (task, model, version)
            note = version_note(sides)
            if note is not None and strict_harness_version:
                n_unverified += 1
                reason = f"harness version unverified (strict mode): {note}"
                leave_out("baseline", key, n_rows["baseline"], reason)
                leave_out("treatment", key, n_rows["treatment"], reason)
                continue
            picks: dict[str, int | list[int] | str] = {}
            for s, gids in sides.items():
                if combine == "latest":
                    picks[s] = combine_latest(gids)
                elif n_valid[s] == 0:
                    picks[s] = f"no trial with a valid reward ({n_rows[s]} trial(s))"
                else:
                    picks[s] = gids
            if isinstance(picks["baseline"], str) or isinstance(picks["treatment"], str):
                problems = [f"{s}: {p}" for s, p in picks.items() if isinstance(p, str)]
                reason = "; ".join(problems)
                leave_out("baseline", key, n_rows["baseline"], reason)
                leave_out("treatment", key, n_rows["treatment"], reason)
                continue
            n_unverified += note is not None
            flags = {
                (col, s): int(sum(facts.flag_sums[col][g] for g in gids))
                for col in ("errored", "timed_out")
                for s, gids in sides.items()
            }
            texts = facts.texts
            row: dict[str, object] = {
                "task_name": task,
                "model": _display_key(model),
                "harness_version": _display_key(version),
                "harness_version_unverified": note is not None,
                "harness_version_note": note,
                "benchmark": texts["benchmark"].joined([*sides["baseline"], *sides["treatment"]]),
                "n_trials_baseline": n_valid["baseline"] if combine == "mean" else 1,
                "n_trials_treatment": n_valid["treatment"] if combine == "mean" else 1,
                "trials_without_reward_baseline": n_rows["baseline"] - n_valid["baseline"],
                "trials_without_reward_treatment": n_rows["treatment"] - n_valid["treatment"],
                "errored_trials_baseline": flags[("errored", "baseline")],
                "errored_trials_treatment": flags[("errored", "treatment")],
                "timed_out_trials_baseline": flags[("timed_out", "baseline")],
                "timed_out_trials_treatment": flags[("timed_out", "treatment")],
                "flagged": bool(any(flags.values())),
                **{f"{c}_baseline": texts[c].joined(sides["baseline"]) for c in SOURCE_COLUMNS},
                **{f"{c}_treatment": texts[c].joined(sides["treatment"]) for c in SOURCE_COLUMNS},
            }
            for col in MATCH_KEY_COLUMNS:
                key_cols[col].append(row[col])
            b_pick.append(picks["baseline"])
            t_pick.append(picks["treatment"])
            row_key.append(key_of_task[(task, model)])

    # the common case's rows, column by column, merged in (task, model) order
    if len(fast_keys):
        fb, ft = gb[fast_keys], gt[fast_keys]
        texts = facts.texts
        fast_cols: dict[str, list[Any]] = {
            "task_name": task_g[fb].tolist(),
            "model": [_display_key(str(m)) for m in model_g[fb].tolist()],
            "harness_version": [str(h) for h in harness_g[fb].tolist()],
            "harness_version_unverified": [False] * len(fb),
            "harness_version_note": [None] * len(fb),
            "benchmark": texts["benchmark"].joined_many(fb, ft),
        }
        counts = {}
        for label, gs in (("baseline", fb), ("treatment", ft)):
            valid_n = facts.n_valid[gs]
            counts[label] = valid_n
            fast_cols[f"n_trials_{label}"] = (
                valid_n.tolist() if combine == "mean" else [1] * len(gs)
            )
        for label, gs in (("baseline", fb), ("treatment", ft)):
            fast_cols[f"trials_without_reward_{label}"] = (facts.size[gs] - counts[label]).tolist()
        any_flag = np.zeros(len(fb), dtype=bool)
        for col in ("errored", "timed_out"):
            for label, gs in (("baseline", fb), ("treatment", ft)):
                n_flag = facts.flag_sums[col][gs].astype(np.int64)
                any_flag |= n_flag != 0
                fast_cols[f"{col}_trials_{label}"] = n_flag.tolist()
        fast_cols["flagged"] = any_flag.tolist()
        for c in SOURCE_COLUMNS:
            fast_cols[f"{c}_baseline"] = texts[c].joined_many(fb)
            fast_cols[f"{c}_treatment"] = texts[c].joined_many(ft)
        order = np.argsort(
            np.concatenate([fast_keys, np.asarray(row_key, dtype=np.int64)]), kind="stable"
        )
        for col in MATCH_KEY_COLUMNS:
            merged = fast_cols[col] + key_cols[col]
            key_cols[col] = [merged[i] for i in order.tolist()]
        if combine == "mean":
            fast_b: list[int | list[int]] = [[g] for g in fb.tolist()]
            fast_t: list[int | list[int]] = [[g] for g in ft.tolist()]
        else:
            fast_b = latest_row[fb].tolist()
            fast_t = latest_row[ft].tolist()
        merged_b, merged_t = fast_b + b_pick, fast_t + t_pick
        b_pick = [merged_b[i] for i in order.tolist()]
        t_pick = [merged_t[i] for i in order.tolist()]

    values = work[value_columns].to_numpy(dtype=float) if value_columns else None

    def values_frame(picks: list[int | list[int]]) -> pd.DataFrame:
        if not picks:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in value_columns})
        out = np.full((len(picks), len(value_columns)), np.nan)
        if values is None:
            return pd.DataFrame(out, columns=value_columns)
        # the latest trial's own values; the means of all tasks' valid rows at once
        single = [i for i, p in enumerate(picks) if isinstance(p, int)]
        if single:
            out[single] = values[[picks[i] for i in single]]
        one = [i for i, p in enumerate(picks) if isinstance(p, list) and len(p) == 1]
        many = [i for i, p in enumerate(picks) if isinstance(p, list) and len(p) > 1]
        if not one and not many:
            return pd.DataFrame(out, columns=value_columns)
        # one group: its valid rows are a slice of the valid rows in group order
        groups_one = np.asarray([picks[i][0] for i in one], dtype=np.int64)  # type: ignore[index]
        starts = facts.valid_starts[groups_one].astype(np.int64)
        lengths_one = facts.n_valid[groups_one].astype(np.int64)
        segments = [merged_rows(picks[i], valid=True) for i in many]  # type: ignore[arg-type]
        lengths = np.concatenate(
            [
                lengths_one,
                np.fromiter((len(s) for s in segments), dtype=np.int64, count=len(segments)),
            ]
        )
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        within = np.arange(int(lengths_one.sum())) - np.repeat(offsets[: len(one)], lengths_one)
        flat = np.concatenate(
            [
                facts.valid_order[np.repeat(starts, lengths_one) + within],
                *segments,
            ]
        ).astype(np.int64)
        targets = np.asarray(one + many, dtype=np.int64)
        for k in np.unique(lengths):
            which = np.flatnonzero(lengths == k)
            index = offsets[which][:, None] + np.arange(k)[None, :]
            block = values[flat[index]]  # (tasks, k, columns)
            stacked = np.ascontiguousarray(block.transpose(0, 2, 1))  # (tasks, columns, k)
            out[targets[which]] = _nan_mean_rows(stacked)
        return pd.DataFrame(out, columns=value_columns)

    # from no rows, a frame of object columns, as from records
    keys = pd.DataFrame(key_cols if b_pick else [], columns=list(MATCH_KEY_COLUMNS))
    keys["harness_version_unverified"] = keys["harness_version_unverified"].astype(bool)
    return MatchResult(
        baseline=baseline,
        treatment=treatment,
        keys=keys,
        baseline_values=values_frame(b_pick),
        treatment_values=values_frame(t_pick),
        unmatched=pd.DataFrame(
            unmatched if unmatched["task_name"] else [], columns=list(UNMATCHED_COLUMNS)
        ),
        combine=combine,
        value_columns=tuple(value_columns),
        strict_harness_version=strict_harness_version,
        n_unverified=n_unverified,
    )

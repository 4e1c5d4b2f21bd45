"""Frozen copy of retrieval_lib/stats/paired.py before issue 20 (per-task frames): the
reference oracle of tests/stats/test_paired_equality.py and benchmarks/matching.py.

Matched baseline-versus-treatment comparisons on the same tasks.

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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

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


def _flag_counts(rows: pd.DataFrame, column: str) -> int:
    if column not in rows.columns:
        return 0
    return int(np.nansum(as_float(rows[column]).to_numpy()))


def _joined(rows: pd.DataFrame, column: str) -> str | None:
    if column not in rows.columns:
        return None
    values = sorted({str(v) for v in rows[column].dropna().tolist()})
    return "|".join(values) if values else None


@dataclass
class _Side:
    """Trials of one (task, model, version) in one config."""

    rows: pd.DataFrame
    valid: pd.DataFrame

    @property
    def n_trials(self) -> int:
        return len(self.rows)


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


def _combine(side: _Side, value_columns: Sequence[str], combine: str) -> pd.Series | str:
    """Combined values of one side, or the reason it cannot be combined."""
    if combine == "latest":
        if "is_latest_trial" not in side.rows.columns:
            return "no is_latest_trial column to pick the latest trial"
        latest = side.rows[side.rows["is_latest_trial"].fillna(False).astype(bool)]
        if latest.empty:
            return "no trial is flagged as the latest"
        chosen = latest.iloc[[0]] if len(latest) == 1 else _latest_by_start(latest)
        if not np.isfinite(chosen["reward"].to_numpy(dtype=float)).all():
            return "the latest trial has no valid reward"
        return chosen[list(value_columns)].iloc[0]
    if side.valid.empty:
        return f"no trial with a valid reward ({side.n_trials} trial(s))"
    return side.valid[list(value_columns)].mean(axis=0, skipna=True)


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
    baseline: dict[str, _Side], treatment: dict[str, _Side], names: dict[str, str]
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


def _merge_sides(entries: Sequence[_Side]) -> _Side:
    if len(entries) == 1:
        return entries[0]
    rows = pd.concat([e.rows for e in entries])
    valid = pd.concat([e.valid for e in entries])
    if "trial_name" in rows.columns:
        rows = rows.sort_values("trial_name", kind="mergesort", na_position="last")
        valid = valid.sort_values("trial_name", kind="mergesort", na_position="last")
    return _Side(rows=rows, valid=valid)


def _version_note(entries: dict[str, _Side]) -> str | None:
    """Why a pair's harness version is unverified, or None when both sides know it."""
    parts = []
    for side, entry in entries.items():
        unknown = entry.rows[entry.rows["_harness"] == _MISSING_KEY]
        if unknown.empty:
            continue
        reasons = (
            unknown[UNKNOWN_REASON_COLUMN].dropna().astype(str)
            if UNKNOWN_REASON_COLUMN in unknown.columns
            else pd.Series(dtype=str)
        )
        why = "; ".join(sorted(set(reasons))) or "no version recorded"
        if len(unknown) == len(entry.rows):
            parts.append(f"{side} version unknown ({why})")
        else:
            parts.append(
                f"{side}: {len(unknown)} of {len(entry.rows)} trials of unknown version ({why})"
            )
    return "; ".join(parts) or None


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
    present = set(df["config_name"].dropna().astype(str))
    for label, name in (("baseline", baseline), ("treatment", treatment)):
        if name not in present:
            raise StatisticsError(
                f"{label} config {name!r} not in the table; configs: {', '.join(sorted(present))}"
            )
    if value_columns is None:
        value_columns = [c for c in OUTCOME_COLUMNS if c in df.columns] + find_metric_columns(df)
    value_columns = list(dict.fromkeys(value_columns))
    require_columns(df, value_columns, what="metrics table")

    # Only the columns matching reads: a study's table has a hundred, and every per-task
    # subset below would copy them all.
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
    if "trial_name" in work.columns:
        work = work.sort_values(["_task", "trial_name"], kind="mergesort", na_position="last")

    # (task, model) -> side -> harness version (or the missing key) -> trials
    by_task: dict[tuple[str, str], dict[str, dict[str, _Side]]] = {}
    for group_key, rows in work.groupby(["config_name", "_task", "_model", "_harness"], sort=True):
        config, task, model, harness = (str(k) for k in group_key)
        valid = rows[np.isfinite(rows["reward"].to_numpy(dtype=float))]
        side = "baseline" if config == baseline else "treatment"
        groups = by_task.setdefault((task, model), {"baseline": {}, "treatment": {}})
        groups[side][harness] = _Side(rows=rows, valid=valid)

    names = {"baseline": baseline, "treatment": treatment}
    key_rows: list[dict[str, object]] = []
    b_rows: list[pd.Series] = []
    t_rows: list[pd.Series] = []
    unmatched: list[dict[str, object]] = []

    def leave_out(side: str, key: tuple[str, str, str], entry: _Side, reason: str) -> None:
        unmatched.append(
            {
                "task_name": key[0],
                "side": side,
                "config_name": names[side],
                "model": _display_key(key[1]),
                "harness_version": _display_key(key[2]),
                "n_trials": entry.n_trials,
                "reason": reason,
            }
        )

    n_unverified = 0
    for (task, model), groups in sorted(by_task.items()):
        if not groups["baseline"] or not groups["treatment"]:
            ran = "baseline" if groups["baseline"] else "treatment"
            absent = "treatment" if ran == "baseline" else "baseline"
            other_models = sorted(
                m for (t, m), g in by_task.items() if t == task and m != model and g[absent]
            )
            if other_models:
                reason = (
                    f"model differs: {_display_key(model) or 'none'} here, "
                    f"{', '.join(_display_key(m) or 'none' for m in other_models)} "
                    f"in {absent} config {names[absent]}"
                )
            else:
                reason = f"not run by {absent} config {names[absent]}"
            for harness, entry in sorted(groups[ran].items()):
                leave_out(ran, (task, model, harness), entry, reason)
            continue
        plan = _plan_versions(groups["baseline"], groups["treatment"], names)
        for side, harness, reason in plan.left_out:
            leave_out(side, (task, model, harness), groups[side][harness], reason)
        for version, b_versions, t_versions in plan.pairs:
            b_entry = _merge_sides([groups["baseline"][v] for v in b_versions])
            t_entry = _merge_sides([groups["treatment"][v] for v in t_versions])
            key = (task, model, version)
            note = _version_note({"baseline": b_entry, "treatment": t_entry})
            if note is not None and strict_harness_version:
                n_unverified += 1
                reason = f"harness version unverified (strict mode): {note}"
                leave_out("baseline", key, b_entry, reason)
                leave_out("treatment", key, t_entry, reason)
                continue
            b_values = _combine(b_entry, value_columns, combine)
            t_values = _combine(t_entry, value_columns, combine)
            if isinstance(b_values, str) or isinstance(t_values, str):
                problems = []
                if isinstance(b_values, str):
                    problems.append(f"baseline: {b_values}")
                if isinstance(t_values, str):
                    problems.append(f"treatment: {t_values}")
                reason = "; ".join(problems)
                leave_out("baseline", key, b_entry, reason)
                leave_out("treatment", key, t_entry, reason)
                continue
            n_unverified += note is not None
            errored_b = _flag_counts(b_entry.rows, "errored")
            errored_t = _flag_counts(t_entry.rows, "errored")
            timed_b = _flag_counts(b_entry.rows, "timed_out")
            timed_t = _flag_counts(t_entry.rows, "timed_out")
            key_rows.append(
                {
                    "task_name": task,
                    "model": _display_key(model),
                    "harness_version": _display_key(version),
                    "harness_version_unverified": note is not None,
                    "harness_version_note": note,
                    "benchmark": _joined(pd.concat([b_entry.rows, t_entry.rows]), "benchmark"),
                    "n_trials_baseline": len(b_entry.valid) if combine == "mean" else 1,
                    "n_trials_treatment": len(t_entry.valid) if combine == "mean" else 1,
                    "trials_without_reward_baseline": b_entry.n_trials - len(b_entry.valid),
                    "trials_without_reward_treatment": t_entry.n_trials - len(t_entry.valid),
                    "errored_trials_baseline": errored_b,
                    "errored_trials_treatment": errored_t,
                    "timed_out_trials_baseline": timed_b,
                    "timed_out_trials_treatment": timed_t,
                    "flagged": bool(errored_b or errored_t or timed_b or timed_t),
                    **{f"{c}_baseline": _joined(b_entry.rows, c) for c in SOURCE_COLUMNS},
                    **{f"{c}_treatment": _joined(t_entry.rows, c) for c in SOURCE_COLUMNS},
                }
            )
            b_rows.append(b_values)
            t_rows.append(t_values)

    key_columns = list(MATCH_KEY_COLUMNS)
    unmatched_columns = [
        "task_name",
        "side",
        "config_name",
        "model",
        "harness_version",
        "n_trials",
        "reason",
    ]

    def values_frame(rows: list[pd.Series]) -> pd.DataFrame:
        if not rows:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in value_columns})
        return pd.DataFrame([r.to_numpy(dtype=float) for r in rows], columns=value_columns)

    keys = pd.DataFrame(key_rows, columns=key_columns)
    keys["harness_version_unverified"] = keys["harness_version_unverified"].astype(bool)
    return MatchResult(
        baseline=baseline,
        treatment=treatment,
        keys=keys,
        baseline_values=values_frame(b_rows),
        treatment_values=values_frame(t_rows),
        unmatched=pd.DataFrame(unmatched, columns=unmatched_columns),
        combine=combine,
        value_columns=tuple(value_columns),
        strict_harness_version=strict_harness_version,
        n_unverified=n_unverified,
    )

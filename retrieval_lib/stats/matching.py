"""How the trials of two configs are lined up task by task: the engine of ``match_tasks``.

:func:`retrieval_lib.stats.paired.match_tasks` (the public entry, with the rules in its
module notes) builds a :class:`TaskMatcher`. Here are the parts it is made of: the facts of
each (config, task, model, harness version) group from one group-by (:class:`_Groups`, with
each group's texts as bit masks, :class:`_Texts`), the harness-version rules of one task
(:func:`_plan_versions`), the choice among several trials flagged latest, and the means of
repeated trials with ``DataFrame.mean``'s arithmetic (:func:`_nan_mean_rows`). One module:
the parts share private arrays.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({"config_name": ["b", "t"], "task_name": ["x", "x"],
...                    "reward": [1.0, 0.0]})
>>> m = TaskMatcher(df, "b", "t", "mean", ["reward"])
>>> m.match(strict_harness_version=False)
>>> m.keys["task_name"], m.values("treatment")["reward"].tolist()
(['x'], [0.0])
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import SOURCE_COLUMNS, as_float

__all__ = ["MATCH_KEY_COLUMNS", "TaskMatcher", "UNKNOWN_REASON_COLUMN", "UNMATCHED_COLUMNS"]

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
        there = f"{_versions_text(known[other(side)])} in {other(side)} config {names[other(side)]}"
        for version in sorted(known[side] - common):
            left_out.append((side, version, f"harness version differs: {version} here, {there}"))
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
                reason = (
                    "harness version unknown here and this config ran several "
                    f"({_versions_text(known[side])}): cannot tell which it is"
                )
                left_out.append((side, _MISSING_KEY, reason))
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
            why = f"the known versions leave it ambiguous ({ambiguous})"
            left_out.append((side, _MISSING_KEY, f"harness version unknown here and {why}"))
        if not known[other(side)] and known[side]:
            # the other side knows no version and this side ran several: which one pairs?
            reason = (
                f"harness version of {other(side)} config {names[other(side)]} is "
                f"unknown and this config ran several ({ambiguous})"
            )
            left_out.extend((side, version, reason) for version in sorted(known[side]))
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
    """The distinct non-missing values (as text) of one column in each group, as bit masks.

    Bit ``i`` of a group's mask says it holds label ``i``; a union of groups is an OR.
    The masks are int64 up to 62 labels (the usual case: benchmarks, sources, reasons) and
    Python integers of any width beyond.
    """

    def __init__(self, work: pd.DataFrame, gid: np.ndarray, order: np.ndarray, column: str):
        self._joined: dict[int, str | None] = {0: None}
        n_groups = len(order) and int(gid.max()) + 1
        self.masks = np.zeros(n_groups, dtype=np.int64)
        self.labels: list[str] = []
        if column not in work.columns or not n_groups:
            return
        values = work[column]
        present = values.notna().to_numpy()
        text = np.full(len(values), None, dtype=object)
        text[present] = values[present].astype(object).map(str).to_numpy()
        codes, labels = pd.factorize(text, use_na_sentinel=True)
        self.labels = [str(v) for v in labels]
        if len(self.labels) <= 62:
            bits = np.where(codes >= 0, np.left_shift(1, np.maximum(codes, 0)), 0).astype(np.int64)
        else:
            bits = np.array([1 << c if c >= 0 else 0 for c in codes.tolist()], dtype=object)
        starts = np.flatnonzero(np.r_[True, np.diff(gid[order]) != 0])
        self.masks = np.bitwise_or.reduceat(bits[order], starts)

    def values(self, gids: Iterable[int]) -> set[str]:
        mask = 0
        for g in gids:
            mask |= int(self.masks[g])
        return {label for i, label in enumerate(self.labels) if mask >> i & 1}

    def joined_rows(self, rows: np.ndarray, gids: np.ndarray, n_rows: int) -> list[str | None]:
        """Per output row, ``"a|b"``: the sorted values of its groups (``gids[rows == r]``);
        None when there are none."""
        mask = np.zeros(n_rows, dtype=self.masks.dtype)
        np.bitwise_or.at(mask, rows, self.masks[gids])
        unique, inverse = np.unique(mask, return_inverse=True)
        texts = []
        for m in unique.tolist():
            if m not in self._joined:
                labels = sorted(label for i, label in enumerate(self.labels) if m >> i & 1)
                self._joined[m] = "|".join(labels)
            texts.append(self._joined[m])
        return [texts[i] for i in inverse.reshape(-1).tolist()]


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


def _trial_frame(
    df: pd.DataFrame, baseline: str, treatment: str, value_columns: list[str]
) -> pd.DataFrame:
    """The two configs' rows with only the columns matching reads and its grouping keys."""
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
    return work


class TaskMatcher:
    """The trials of two configs lined up task by task: the engine of ``match_tasks``.

    One group-by of the pooled table gives every (config, task, model, harness version)
    group's counts, flags and texts (:class:`_Groups`). The common case (one group per
    side, the same known version, a value on both sides) is matched for all tasks at once
    with numpy; every other (task, model) goes through the version rules one by one, on
    group ids, never on frames. :meth:`match` fills :attr:`keys` (columns of
    ``MATCH_KEY_COLUMNS``), :attr:`picks` (per side, a row for ``"latest"`` or the group
    ids whose mean is taken), :attr:`unmatched` and :attr:`n_unverified`.
    """

    def __init__(
        self,
        df: pd.DataFrame,
        baseline: str,
        treatment: str,
        combine: str,
        value_columns: list[str],
    ) -> None:
        work = _trial_frame(df, baseline, treatment, value_columns)
        self.work, self.combine, self.value_columns = work, combine, value_columns
        self._values = work[value_columns].to_numpy(dtype=float) if value_columns else None
        self.names = {"baseline": baseline, "treatment": treatment}
        grouped = work.groupby(["config_name", "_task", "_model", "_harness"], sort=True)
        self.gid = grouped.ngroup().to_numpy(dtype=np.int64)
        self.n_groups = int(self.gid.max()) + 1 if len(self.gid) else 0
        self.facts = _Groups(work, self.gid, self.n_groups)
        first = self.facts.order[self.facts.starts[:-1]]
        config_g = work["config_name"].astype(str).to_numpy(dtype=object)[first]
        self.task_g, self.model_g, self.harness_g = (
            work[c].to_numpy(dtype=object)[first] for c in ("_task", "_model", "_harness")
        )
        self.is_base = config_g == baseline
        # (task, model) of each group, numbered in sorted order (the order of the output)
        self.task_codes, _ = pd.factorize(self.task_g, sort=True)
        model_codes, model_uniques = pd.factorize(self.model_g, sort=True)
        pair_codes = self.task_codes.astype(np.int64) * max(len(model_uniques), 1) + model_codes
        _, key_g = np.unique(pair_codes, return_inverse=True)
        self.key_g = key_g.reshape(-1)
        self.reward = work["reward"].to_numpy(dtype=float)
        has_trial_name = "trial_name" in work.columns
        self.trial_names = work["trial_name"].to_numpy(dtype=object) if has_trial_name else None
        self.latest_flags: np.ndarray | None = None
        if combine == "latest" and "is_latest_trial" in work.columns:
            self.latest_flags = work["is_latest_trial"].fillna(False).astype(bool).to_numpy()
        self._started: list[object] | None = None  # parsed started_at, computed when needed
        self.keys: dict[str, list[Any]] = {c: [] for c in MATCH_KEY_COLUMNS}
        self.picks: dict[str, list[int | list[int]]] = {"baseline": [], "treatment": []}
        self.unmatched: dict[str, list[object]] = {c: [] for c in UNMATCHED_COLUMNS}
        self.n_unverified = 0
        self._row_key: list[int] = []  # (task, model) number of each row of the rules
        # each row of the rules: ((task, model, version), note), and the groups of each side
        self._rule_keys: list[tuple[tuple[str, str, str], str | None]] = []
        self._ruled: dict[str, list[list[int]]] = {"baseline": [], "treatment": []}

    def match(self, strict_harness_version: bool) -> None:
        """Match every task: the common case at once, the rest by the rules, merged."""
        fast = self._common_case()
        by_task, models_of, key_of_task = self._rule_groups(fast)
        for (task, model), groups in sorted(by_task.items()):
            if not groups["baseline"] or not groups["treatment"]:
                self._one_side_only(task, model, groups, models_of)
                continue
            plan = _plan_versions(groups["baseline"], groups["treatment"], self.names)
            for side, harness, reason in plan.left_out:
                size = int(self.facts.size[groups[side][harness]])
                self._leave_out(side, (task, model, harness), size, reason)
            for version, b_versions, t_versions in plan.pairs:
                sides = {
                    "baseline": [groups["baseline"][v] for v in b_versions],
                    "treatment": [groups["treatment"][v] for v in t_versions],
                }
                if self._pair((task, model, version), sides, strict_harness_version):
                    self._row_key.append(key_of_task[(task, model)])
        self._fill_keys(np.flatnonzero(fast))

    def _common_case(self) -> np.ndarray:
        """Which (task, model) keys are the common case, and each group's latest row."""
        facts, key_g, is_base, harness_g = self.facts, self.key_g, self.is_base, self.harness_g
        n_keys = int(key_g.max()) + 1 if len(key_g) else 0
        n_base = np.bincount(key_g[is_base], minlength=n_keys)
        n_treat = np.bincount(key_g[~is_base], minlength=n_keys)
        gb = np.full(n_keys, -1, dtype=np.int64)
        gt = np.full(n_keys, -1, dtype=np.int64)
        gb[key_g[is_base]] = np.flatnonzero(is_base)
        gt[key_g[~is_base]] = np.flatnonzero(~is_base)
        self.gb, self.gt = gb, gt
        fast = (n_base == 1) & (n_treat == 1)
        fast[fast] &= (harness_g[gb[fast]] == harness_g[gt[fast]]) & (
            harness_g[gb[fast]] != _MISSING_KEY
        )
        self.latest_row = np.full(self.n_groups, -1, dtype=np.int64)
        if self.combine == "mean":
            fast[fast] &= (facts.n_valid[gb[fast]] > 0) & (facts.n_valid[gt[fast]] > 0)
        elif self.latest_flags is None:
            fast[:] = False
        else:
            latest_all = self.latest_flags
            n_latest = np.bincount(self.gid, weights=latest_all, minlength=self.n_groups)
            flagged_rows = np.flatnonzero(latest_all)
            # first flagged row per group
            self.latest_row[self.gid[flagged_rows][::-1]] = flagged_rows[::-1]
            fast[fast] &= (n_latest[gb[fast]] == 1) & (n_latest[gt[fast]] == 1)
            fast[fast] &= np.isfinite(self.reward[self.latest_row[gb[fast]]]) & np.isfinite(
                self.reward[self.latest_row[gt[fast]]]
            )
        return fast

    def _rule_groups(
        self, fast: np.ndarray
    ) -> tuple[
        dict[tuple[str, str], dict[str, dict[str, int]]],
        dict[tuple[str, str], set[str]],
        dict[tuple[str, str], int],
    ]:
        """For the tasks outside the common case: (task, model) -> side -> version -> group;
        (task, side) -> the models that ran it; (task, model) -> its key number."""
        by_task: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        models_of: dict[tuple[str, str], set[str]] = {}
        slow_tasks = np.unique(self.task_codes[~fast[self.key_g]])
        in_slow = np.flatnonzero(np.isin(self.task_codes, slow_tasks))
        facts = (
            a[in_slow].tolist() for a in (self.is_base, self.task_g, self.model_g, self.harness_g)
        )
        for g, base, task, model, harness in zip(in_slow.tolist(), *facts, strict=True):
            side = "baseline" if base else "treatment"
            models_of.setdefault((task, side), set()).add(model)
            if fast[self.key_g[g]]:
                continue
            groups = by_task.setdefault((task, model), {"baseline": {}, "treatment": {}})
            groups[side][harness] = g
        slow_groups = np.flatnonzero(~fast[self.key_g])
        tasks, models = self.task_g[slow_groups].tolist(), self.model_g[slow_groups].tolist()
        keys = self.key_g[slow_groups].tolist()
        key_of_task = dict(zip(zip(tasks, models, strict=True), keys, strict=True))
        return by_task, models_of, key_of_task

    def _one_side_only(
        self,
        task: str,
        model: str,
        groups: dict[str, dict[str, int]],
        models_of: dict[tuple[str, str], set[str]],
    ) -> None:
        """Leave out a (task, model) only one config ran, saying why."""
        ran = "baseline" if groups["baseline"] else "treatment"
        absent = "treatment" if ran == "baseline" else "baseline"
        other_models = sorted(m for m in models_of.get((task, absent), ()) if m != model)
        if other_models:
            reason = (
                f"model differs: {_display_key(model) or 'none'} here, "
                f"{', '.join(_display_key(m) or 'none' for m in other_models)} "
                f"in {absent} config {self.names[absent]}"
            )
        else:
            reason = f"not run by {absent} config {self.names[absent]}"
        for harness, g in sorted(groups[ran].items()):
            self._leave_out(ran, (task, model, harness), int(self.facts.size[g]), reason)

    def _pair(self, key: tuple[str, str, str], sides: dict[str, list[int]], strict: bool) -> bool:
        """Add the row of one pair of group lists, or leave both sides out; True if added."""
        facts, combine = self.facts, self.combine
        n_rows = {s: int(sum(facts.size[g] for g in gids)) for s, gids in sides.items()}
        n_valid = {s: int(sum(facts.n_valid[g] for g in gids)) for s, gids in sides.items()}
        note = self._version_note(sides)
        if note is not None and strict:
            self.n_unverified += 1
            reason = f"harness version unverified (strict mode): {note}"
        else:
            picks: dict[str, int | list[int] | str] = {
                s: self._combine_latest(gids)
                if combine == "latest"
                else gids
                if n_valid[s]
                else f"no trial with a valid reward ({n_rows[s]} trial(s))"
                for s, gids in sides.items()
            }
            reason = "; ".join(f"{s}: {p}" for s, p in picks.items() if isinstance(p, str))
        if reason:
            self._leave_out("baseline", key, n_rows["baseline"], reason)
            self._leave_out("treatment", key, n_rows["treatment"], reason)
            return False
        self.n_unverified += note is not None
        self._rule_keys.append((key, note))
        for s in ("baseline", "treatment"):
            self._ruled[s].append(sides[s])
            self.picks[s].append(picks[s])  # type: ignore[arg-type]
        return True

    def _leave_out(self, side: str, key: tuple[str, str, str], n_trials: int, reason: str) -> None:
        task, model, harness = key
        values = (task, side, self.names[side], _display_key(model), _display_key(harness))
        for col, value in zip(UNMATCHED_COLUMNS, (*values, n_trials, reason), strict=True):
            self.unmatched[col].append(value)

    def _version_note(self, sides: dict[str, list[int]]) -> str | None:
        """Which side's trials are of unknown version and why; None when all are known."""
        parts = []
        for side, gids in sides.items():
            unknown = [g for g in gids if self.harness_g[g] == _MISSING_KEY]
            if not unknown:
                continue
            n_unknown = int(sum(self.facts.size[g] for g in unknown))
            n_rows = int(sum(self.facts.size[g] for g in gids))
            reasons = self.facts.texts[UNKNOWN_REASON_COLUMN].values(unknown)
            why = "; ".join(sorted(reasons)) or "no version recorded"
            if n_unknown == n_rows:
                parts.append(f"{side} version unknown ({why})")
            else:
                parts.append(f"{side}: {n_unknown} of {n_rows} trials of unknown version ({why})")
        return "; ".join(parts) or None

    def _merged_rows(self, gids: list[int], valid: bool) -> np.ndarray:
        """Row positions of a side made of several groups, in the order of the old merge."""
        facts = self.facts
        parts = [facts.valid_rows(g) if valid else facts.rows(g) for g in gids]
        if len(parts) == 1:
            return parts[0]
        rows = np.concatenate(parts)
        if self.trial_names is None:
            return rows
        names_ = self.trial_names[rows]
        missing = pd.isna(names_)
        keyed = sorted(
            range(len(rows)), key=lambda i: (bool(missing[i]), "" if missing[i] else names_[i])
        )
        return rows[np.asarray(keyed, dtype=np.int64)]

    def _combine_latest(self, gids: list[int]) -> int | str:
        """Row of the latest trial of a side, or why there is none."""
        if self.latest_flags is None:
            return "no is_latest_trial column to pick the latest trial"
        rows = self._merged_rows(gids, valid=False)
        latest = rows[self.latest_flags[rows]]
        if len(latest) == 0:
            return "no trial is flagged as the latest"
        chosen = int(latest[0]) if len(latest) == 1 else self._latest_of(latest)
        if not np.isfinite(self.reward[chosen]):
            return "the latest trial has no valid reward"
        return chosen

    def _latest_of(self, latest: np.ndarray) -> int:
        """The row with the latest start among several flagged latest."""
        fast = "started_at" in self.work.columns and self.trial_names is not None
        if fast:
            if self._started is None:
                parsed = pd.to_datetime(self.work["started_at"], errors="coerce", utc=True)
                self._started = list(parsed)
            times = [self._started[i] for i in latest]
            labels = self.trial_names[latest]  # type: ignore[index]
            fast = not any(pd.isna(t) for t in times) and not pd.isna(labels).any()
        if not fast:
            # the exact old decision (and its refusal) on the few rows concerned
            picked = _latest_by_start(self.work.iloc[latest])
            return int(picked.index[0])
        ranked = sorted(range(len(latest)), key=lambda i: (times[i], labels[i]))
        return int(latest[ranked[-1]])

    def _fill_keys(self, fast_keys: np.ndarray) -> None:
        """The key columns and picks of every matched row, the common case's and the rules',
        in (task, model) order; sums and texts over each side's groups at once."""
        rules, n_fast = self._rule_keys, len(fast_keys)
        order = np.argsort(np.r_[fast_keys, self._row_key].astype(np.int64), kind="stable")
        at, n = order.tolist(), len(order)
        position = np.empty(n, dtype=np.int64)  # output row of each fast row, then rule row
        position[order] = np.arange(n)

        def merged(fast: list[Any], ruled: list[Any]) -> list[Any]:
            both = fast + ruled
            return [both[i] for i in at]

        facts, texts = self.facts, self.facts.texts
        members = {}  # side -> (output row of each member group, the group)
        for label, gs in (("baseline", self.gb[fast_keys]), ("treatment", self.gt[fast_keys])):
            if self.combine == "mean":
                fast_picks: list[Any] = [[g] for g in gs.tolist()]
            else:
                fast_picks = self.latest_row[gs].tolist()
            self.picks[label] = merged(fast_picks, self.picks[label])
            ruled = self._ruled[label]
            lengths = np.fromiter(map(len, ruled), np.int64, len(ruled))
            gids = np.fromiter(itertools.chain.from_iterable(ruled), np.int64, int(lengths.sum()))
            rows = np.r_[position[:n_fast], np.repeat(position[n_fast:], lengths)]
            members[label] = (rows, np.r_[gs, gids])

        def total(label: str, per_group: np.ndarray) -> np.ndarray:
            rows, gids = members[label]
            return np.bincount(rows, weights=per_group[gids], minlength=n).astype(np.int64)

        fb = self.gb[fast_keys]
        task, model, version = (
            merged(g[fb].tolist(), [r[0][i] for r in rules])
            for i, g in enumerate((self.task_g, self.model_g, self.harness_g))
        )
        notes = merged([None] * n_fast, [r[1] for r in rules])
        (b_rows, b_gids), (t_rows, t_gids) = members["baseline"], members["treatment"]
        cols: dict[str, list[Any]] = {
            "task_name": task,
            "model": [_display_key(m) for m in model],
            "harness_version": [_display_key(v) for v in version],
            "harness_version_unverified": [note is not None for note in notes],
            "harness_version_note": notes,
            "benchmark": texts["benchmark"].joined_rows(
                np.r_[b_rows, t_rows], np.r_[b_gids, t_gids], n
            ),
        }
        for label in members:
            valid = total(label, facts.n_valid)
            cols[f"n_trials_{label}"] = valid.tolist() if self.combine == "mean" else [1] * n
            cols[f"trials_without_reward_{label}"] = (total(label, facts.size) - valid).tolist()
        any_flag = np.zeros(n, dtype=bool)
        for col in ("errored", "timed_out"):
            for label in members:
                n_flag = total(label, facts.flag_sums[col])
                any_flag |= n_flag != 0
                cols[f"{col}_trials_{label}"] = n_flag.tolist()
        cols["flagged"] = any_flag.tolist()
        for c in SOURCE_COLUMNS:
            for label in members:
                cols[f"{c}_{label}"] = texts[c].joined_rows(*members[label], n)
        self.keys = {c: cols[c] for c in MATCH_KEY_COLUMNS}

    def values(self, side: str) -> pd.DataFrame:
        """The value columns of one side, a row per matched task (picked row or mean)."""
        picks, value_columns, facts = self.picks[side], self.value_columns, self.facts
        if not picks:
            return pd.DataFrame({c: pd.Series(dtype=float) for c in value_columns})
        out = np.full((len(picks), len(value_columns)), np.nan)
        values = self._values
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
        segments = [self._merged_rows(picks[i], valid=True) for i in many]  # type: ignore[arg-type]
        lengths = np.concatenate(
            [
                lengths_one,
                np.fromiter((len(s) for s in segments), dtype=np.int64, count=len(segments)),
            ]
        )
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        within = np.arange(int(lengths_one.sum())) - np.repeat(offsets[: len(one)], lengths_one)
        flat = np.concatenate(
            [facts.valid_order[np.repeat(starts, lengths_one) + within], *segments]
        ).astype(np.int64)
        targets = np.asarray(one + many, dtype=np.int64)
        for k in np.unique(lengths):
            which = np.flatnonzero(lengths == k)
            index = offsets[which][:, None] + np.arange(k)[None, :]
            block = values[flat[index]]  # (tasks, k, columns)
            stacked = np.ascontiguousarray(block.transpose(0, 2, 1))  # (tasks, columns, k)
            out[targets[which]] = _nan_mean_rows(stacked)
        return pd.DataFrame(out, columns=value_columns)

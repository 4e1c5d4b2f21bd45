"""The tables of a study, one function per question, each over the study's tidy tables.

Conventions (as in :mod:`retrieval_lib.report.tables`): the **task** is the unit of
inference — repeated trials of a task (within or across runs) are not independent
observations (:mod:`retrieval_lib.stats.clustered`; Miller 2024, arXiv:2411.00640); a
value that cannot be computed is NaN with a reason, never 0; every aggregate carries its
``n`` in tasks with the trials beside it (``*_n`` = ``*_n_tasks``, ``*_n_trials``);
confidence intervals of means are seeded percentile bootstrap intervals over tasks
(:func:`retrieval_lib.stats.means.mean_ci` with ``tasks``).

One module: short question-functions over the same tidy tables and helpers, some imported
by name by the study notebook.

Examples
--------
>>> import pandas as pd
>>> trials = pd.DataFrame({"model": ["m"] * 4, "config_family": ["b", "b", "t", "t"],
...     "config_name": ["b", "b", "t", "t"], "run_id": ["r"] * 4,
...     "task_name": ["x", "y", "x", "y"], "trial_id": list("abcd"),
...     "reward": [0.0, 1.0, 1.0, 1.0], "passed": [False, True, True, True],
...     "file.recall": [0.0, 0.6, 1.0, None]})
>>> retrieval_tiers(trials, n_boot=100)[["config_family", "tier", "n_trials"]].values.tolist()[:3]
[['b', '0', 1], ['b', '(0, 0.5)', 0], ['b', '[0.5, 1)', 1]]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "FLAG_RULES",
    "TIERS",
    "fit_lines",
    "flag_table",
    "is_in",
    "largest_deltas",
    "leaderboard",
    "matched_overview",
    "pairing_trials",
    "retrieval_tiers",
    "study_overview",
    "timeline_frame",
    "timeline_tasks",
    "tool_value",
    "with_flags",
]

#: Confidence flags: name → the rule that raises it (shown beside every flagged trial).
FLAG_RULES: Mapping[str, str] = {
    "no_trace": "no usable trace: neither trajectory nor transcript could be read "
    "(coverage.trace_source is null)",
    "truncated_trace": "the transcript was cut off (coverage.transcript_truncated)",
    "no_ground_truth": "no file-level ground truth (coverage.has_ground_truth is false)",
    "low_confidence_ground_truth": "ground truth only from a low-confidence source "
    "(ground_truth.confidence = low)",
    "placeholder_tokens": "output-token counts are per-message placeholders "
    "(outcome.output_tokens_placeholder)",
}

#: File-recall tiers: label and the half-open test of each.
TIERS: tuple[str, ...] = ("0", "(0, 0.5)", "[0.5, 1)", "1")
_AT_LEAST_HALF = "≥ 0.5 (cumulative)"
_NOT_COMPUTABLE = "not computable"


def _cis(
    sub: pd.DataFrame,
    alpha: float,
    n_boot: int,
    seed: int,
    tasks: pd.Series,
    method: str,
) -> dict[str, Any]:
    """:func:`_ci_columns` of ``reward`` and ``pass`` (rate) of ``sub``, as
    :func:`~retrieval_lib.stats.means.mean_ci` gives them with ``tasks`` and ``method``; the
    two share one bootstrap draw where they are missing on the same trials
    (:func:`~retrieval_lib.stats.clustered.task_mean_cis` / ``cluster_bootstrap_means``)."""
    from retrieval_lib.errors import InputError, StatisticsError
    from retrieval_lib.stats.clustered import cluster_bootstrap_means, task_mean_cis

    if not 0 < alpha < 1:
        raise InputError(f"alpha must be between 0 and 1, got {alpha}")
    if n_boot < 1:
        raise InputError(f"n_boot must be at least 1, got {n_boot}")
    estimate = task_mean_cis if method == "aggregate" else cluster_bootstrap_means
    columns = {"reward": sub["reward"], "pass": _as_bool_float(sub["passed"])}
    try:
        results = estimate(list(columns.values()), tasks, alpha=alpha, n_boot=n_boot, seed=seed)
    except StatisticsError as exc:
        raise InputError(str(exc)) from None
    out: dict[str, Any] = {}
    for prefix, r in zip(columns, results, strict=True):
        values = (r.n_tasks, r.n_tasks, r.n_trials, r.mean, r.ci_low, r.ci_high)
        out |= dict(zip(_ci_columns(prefix), values, strict=True))
    return out


def _ci_columns(prefix: str) -> list[str]:
    return [f"{prefix}_{s}" for s in ("n", "n_tasks", "n_trials", "mean", "ci_low", "ci_high")]


def _task_mean_n(values: pd.Series, tasks: pd.Series) -> tuple[float, int, int]:
    """Mean over tasks of each task's mean, tasks and trials with a value."""
    array = _numbers(values)
    ok = np.isfinite(array)
    if not ok.any():
        return math.nan, 0, 0
    per_task = pd.Series(array[ok]).groupby(tasks.to_numpy()[ok], sort=True).mean()
    return float(per_task.mean()), int(per_task.size), int(ok.sum())


def _numbers(values: pd.Series) -> np.ndarray:
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)


def _as_bool_float(values: pd.Series) -> pd.Series:
    """``passed`` as 1.0/0.0 with missing kept missing."""
    if pd.api.types.is_bool_dtype(values):  # numpy or nullable booleans: one pass
        return pd.Series(
            values.to_numpy(dtype=float, na_value=math.nan), index=values.index, name=values.name
        )
    return values.map(lambda v: math.nan if v is None or v is pd.NA or v != v else float(bool(v)))


def is_in(values: pd.Series, allowed: pd.Series) -> np.ndarray:
    """``values.isin(allowed)`` as a boolean array, in one C pass with pyarrow when it is
    installed (pandas' Arrow-string ``isin`` converts every cell to a Python object).

    Examples
    --------
    >>> is_in(pd.Series(["a", "b", None]), pd.Series(["b", "c"])).tolist()
    [False, True, False]
    """
    try:
        import pyarrow as pa
        import pyarrow.compute as pc
    except ImportError:  # pragma: no cover - pyarrow is in the study's extras
        return values.isin(allowed).to_numpy(dtype=bool)
    try:
        found = pc.is_in(pa.array(values, from_pandas=True), value_set=pa.array(allowed))
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return values.isin(allowed).to_numpy(dtype=bool)
    return found.to_numpy(zero_copy_only=False).astype(bool)


# --------------------------------------------------------------------------- overview


def plain_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its categorical columns (the names of ``Study.events``) as the text
    columns they were made from: what is written and what a table shows.

    Examples
    --------
    >>> names = pd.Series(["b", "a", None], dtype="str")
    >>> plain_text(pd.DataFrame({"x": names.astype("category")}))["x"].equals(names)
    True
    """
    columns = {
        str(name): column.astype(column.cat.categories.dtype)
        for name, column in frame.items()
        if isinstance(column.dtype, pd.CategoricalDtype)
    }
    return frame.assign(**columns) if columns else frame


def study_overview(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per run: models, raw configs and families, tasks and trials.

    Examples
    --------
    >>> t = pd.DataFrame({"run_id": ["r", "r"], "model": ["m", "m"],
    ...     "config_name": ["mcp", "baseline"],
    ...     "config_family": ["mcp-remote-direct", "baseline-local-direct"],
    ...     "task_name": ["x", "x"], "trial_id": ["a", "b"]})
    >>> study_overview(t)[["run_id", "configs", "tasks", "trials"]].values.tolist()
    [['r', 'baseline, mcp', 1, 2]]
    """
    rows = []
    for run_id, sub in trials.groupby(trials["run_id"].astype(str), sort=True):
        rows.append(
            {
                "run_id": run_id,
                "models": ", ".join(sorted(sub["model"].dropna().astype(str).unique())) or None,
                "configs": ", ".join(sorted(sub["config_name"].astype(str).unique())),
                "families": ", ".join(sorted(sub["config_family"].astype(str).unique())),
                "tasks": int(sub["task_name"].nunique()),
                "trials": len(sub),
            }
        )
    return pd.DataFrame(
        rows, columns=["run_id", "models", "configs", "families", "tasks", "trials"]
    )


# --------------------------------------------------------------------------- flags


def flag_table(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per (trial, confidence flag): ``trial_id, run_id, config_family, task_name,
    flag, rule`` (rules: :data:`FLAG_RULES`), sorted by trial then flag order.

    Examples
    --------
    >>> t = pd.DataFrame({"trial_id": ["a"], "run_id": ["r"], "config_family": ["b"],
    ...     "task_name": ["x"], "trace_source": [None], "transcript_truncated": [False],
    ...     "has_ground_truth": [False], "ground_truth_confidence": [None],
    ...     "output_tokens_placeholder": [False]})
    >>> flag_table(t)["flag"].tolist()
    ['no_trace', 'no_ground_truth']
    """
    has_gt = trials["has_ground_truth"].fillna(False).astype(bool)
    tests = {
        "no_trace": trials["trace_source"].isna(),
        "truncated_trace": trials["transcript_truncated"].fillna(False).astype(bool),
        "no_ground_truth": ~has_gt,
        "low_confidence_ground_truth": trials["ground_truth_confidence"].astype(object).eq("low")
        & has_gt,
        "placeholder_tokens": trials["output_tokens_placeholder"].fillna(False).astype(bool),
    }
    identity = ["trial_id", "run_id", "config_family", "task_name"]
    parts = [
        trials.loc[mask.to_numpy(), identity].assign(
            flag=flag, rule=FLAG_RULES[flag], _row=np.flatnonzero(mask.to_numpy()), _order=i
        )
        for i, (flag, mask) in enumerate(tests.items())
    ]
    table = pd.concat(parts, ignore_index=True).sort_values(["_row", "_order"], kind="mergesort")
    return table.drop(columns=["_row", "_order"]).reset_index(drop=True)


def with_flags(trials: pd.DataFrame) -> pd.DataFrame:
    """``trials`` with ``flags`` (the flag names, ``;``-joined, or None) and ``confidence_flagged``
    (any flag raised)."""
    table = flag_table(trials)
    joined = table.groupby("trial_id", sort=False)["flag"].agg(";".join)
    out = trials.copy()
    out["flags"] = out["trial_id"].map(joined).astype(object)
    out["flags"] = out["flags"].where(out["flags"].notna(), None)
    out["confidence_flagged"] = out["flags"].notna()
    return out


# --------------------------------------------------------------------------- leaderboard

#: The leaderboard's means of tokens, cost and time: trial column → column stem.
_COSTS = {
    "total_tokens": "tokens",
    "cost_usd": "cost_usd",
    "agent_execution_seconds": "time_seconds",
}


def leaderboard(
    trials: pd.DataFrame, *, alpha: float = 0.05, n_boot: int = 2000, seed: int = 0
) -> pd.DataFrame:
    """Model × config family: tasks, trials, reward and pass rate with CIs, cost, time.

    Aggregate first: the trials of each task (canonical ``task_name``, as the matched
    comparison keys it) are averaged, then every mean is over tasks and its CI a bootstrap
    of the task means, so a task repeated five times counts once. ``*_n`` (= ``*_n_tasks``)
    counts the tasks with a value, ``*_n_trials`` the trials behind them; a trial without
    a reward is not a 0.

    Columns: ``model, config_family, configs, runs, tasks, trials``, then for ``reward``
    and ``pass``: ``<x>_n, <x>_n_tasks, <x>_n_trials, <x>_mean, <x>_ci_low, <x>_ci_high``,
    then ``tokens_n, tokens_n_trials, tokens_mean, cost_usd_n, cost_usd_n_trials,
    cost_usd_mean, time_seconds_n, time_seconds_n_trials, time_seconds_mean`` (tokens:
    ``total_tokens``; time: ``agent_execution_seconds``; means over tasks too).

    Examples
    --------
    >>> t = pd.DataFrame({"model": ["m"] * 4, "config_family": ["b"] * 4,
    ...     "config_name": ["b"] * 4, "run_id": ["r"] * 4, "task_name": ["x", "x", "x", "y"],
    ...     "reward": [1.0, 1.0, 1.0, 0.0], "passed": [True, True, True, False]})
    >>> board = leaderboard(t, n_boot=100)
    >>> board[["tasks", "trials", "reward_n", "reward_n_trials"]].values.tolist()
    [[2, 4, 2, 4]]
    >>> float(board["reward_mean"].iloc[0])  # (1 + 1 + 1) / 3 for x, 0 for y: over tasks
    0.5
    """
    from retrieval_lib.stats.clustered import task_keys

    rows = []
    model = trials["model"].astype(object).where(trials["model"].notna(), "(unknown)")
    all_tasks = task_keys(trials)
    read = ["config_name", "run_id", "reward", "passed", *_COSTS]
    narrow = trials[[c for c in read if c in trials.columns]]  # no wide per-group copies
    for (model_name, family), sub in narrow.groupby([model, trials["config_family"]], sort=True):
        tasks = all_tasks.loc[sub.index]
        row: dict[str, Any] = {
            "model": model_name,
            "config_family": family,
            "configs": ", ".join(sorted(sub["config_name"].astype(str).unique())),
            "runs": int(sub["run_id"].nunique()),
            "tasks": int(tasks.nunique()),
            "trials": len(sub),
        }
        row |= _cis(sub, alpha, n_boot, seed, tasks, "aggregate")
        for column, stem in _COSTS.items():
            mean, n, n_trials = (
                _task_mean_n(sub[column], tasks) if column in sub else (math.nan, 0, 0)
            )
            row[f"{stem}_n"], row[f"{stem}_n_trials"], row[f"{stem}_mean"] = n, n_trials, mean
        rows.append(row)
    columns = [
        "model",
        "config_family",
        "configs",
        "runs",
        "tasks",
        "trials",
        *_ci_columns("reward"),
        *_ci_columns("pass"),
        *(f"{stem}_{s}" for stem in _COSTS.values() for s in ("n", "n_trials", "mean")),
    ]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------- tiers


def _tiers(values: np.ndarray) -> np.ndarray:
    """The :data:`TIERS` label of every value (non-finite: not computable)."""
    return np.select(
        [~np.isfinite(values), values <= 0.0, values < 0.5, values < 1.0],
        [_NOT_COMPUTABLE, "0", "(0, 0.5)", "[0.5, 1)"],
        default="1",
    ).astype(object)


def retrieval_tiers(
    trials: pd.DataFrame,
    metric: str = "file.recall",
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Reward and pass rate per config family and ``metric`` tier.

    Tiers of the share of ground-truth files retrieved: ``0``, ``(0, 0.5)``, ``[0.5, 1)``,
    ``1``, then the cumulative ``≥ 0.5`` view ("among trials that retrieved at least half
    of the ground-truth files") and the trials where ``metric`` is not computable. Every
    tier is listed, empty ones with ``n_trials = 0``. Supplementary views: rewards are
    shown as the verifier gave them.

    The tier is a property of the trial (one task's trials may land in different tiers):
    each mean is over the tier's trials, its CI a cluster bootstrap that resamples tasks
    with all their trials in the tier
    (:func:`~retrieval_lib.stats.clustered.cluster_bootstrap_mean`); ``*_n`` (=
    ``*_n_tasks``) counts tasks, ``*_n_trials`` trials.

    Columns: ``config_family, tier, n_tasks, n_trials``, then for ``reward`` and ``pass``:
    ``<x>_n, <x>_n_tasks, <x>_n_trials, <x>_mean, <x>_ci_low, <x>_ci_high``.
    """
    from retrieval_lib.stats.clustered import task_keys

    all_tasks = task_keys(trials)
    values = _numbers(trials[metric]) if metric in trials.columns else np.full(len(trials), np.nan)
    tiers = pd.Series(_tiers(values), index=trials.index)
    at_least_half = pd.Series(np.nan_to_num(values, nan=-1.0) >= 0.5, index=trials.index)
    families = trials["config_family"].astype(str)
    narrow = trials[["reward", "passed"]]  # the columns a tier's row reads (no wide copies)
    rows = []
    for family in sorted(families.unique()):
        in_family = families == family
        for tier in (*TIERS, _AT_LEAST_HALF, _NOT_COMPUTABLE):
            mask = in_family & (at_least_half if tier == _AT_LEAST_HALF else tiers == tier)
            sub = narrow[mask]
            tasks = all_tasks[mask]
            row = {
                "config_family": family,
                "tier": tier,
                "n_tasks": int(tasks.nunique()),
                "n_trials": len(sub),
            }
            row |= _cis(sub, alpha, n_boot, seed, tasks, "cluster")
            rows.append(row)
    columns = [
        "config_family",
        "tier",
        "n_tasks",
        "n_trials",
        *_ci_columns("reward"),
        *_ci_columns("pass"),
    ]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------- tools


def _finite_sum(values: pd.Series) -> float:
    """numpy's sum of the finite values (pandas' group-by sum compensates, numpy sums
    pairwise: the two differ in the last bits, and the study's outputs keep numpy's)."""
    finite = values.to_numpy(dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite.sum()) if finite.size else math.nan


def _finite_mean(values: pd.Series) -> float:
    """numpy's mean of the finite values (see :func:`_finite_sum`)."""
    finite = values.to_numpy(dtype=float)
    finite = finite[np.isfinite(finite)]
    return float(finite.mean()) if finite.size else math.nan


def _call_facts(events: pd.DataFrame, trials: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per call: its keys, trial, and what :func:`tool_value` sums (ground truth in its
    trial, surfaced it, failed, files first found, attributed tokens and seconds)."""
    ground_truth = trials.set_index("trial_id")["has_ground_truth"].fillna(False).astype(bool)
    has_gt = events["trial_id"].map(ground_truth).fillna(False).astype(bool).to_numpy()
    is_error = events["is_error"].astype(bool).to_numpy()
    surfaced = (
        has_gt
        & events["hits_ground_truth"].astype(bool).to_numpy()
        & ~is_error
        & (events["tool_category"] != "file_write").to_numpy(dtype=bool)
    )
    first = np.fromiter(
        map(len, events["first_found_ground_truth_files"].to_numpy(dtype=object)),
        dtype=np.int64,
        count=len(events),
    )
    tokens, seconds = _numbers(events["attributed_tokens"]), _numbers(events["attributed_seconds"])
    return plain_text(events[keys]).assign(
        _trial=events["trial_id"],
        _gt=has_gt.astype(np.int64),
        _surfaced=surfaced.astype(np.int64),
        _error=is_error.astype(np.int64),
        _first=first,
        _tokens=np.where(np.isfinite(tokens), tokens, np.nan),
        _seconds=np.where(np.isfinite(seconds), seconds, np.nan),
    )


def tool_value(events: pd.DataFrame, trials: pd.DataFrame, *, by: str = "tool") -> pd.DataFrame:
    """What each tool (``by="tool"``) or tool category (``by="category"``) brought.

    Per config family, MCP or local, and tool (with its category) or category:

    * ``calls``, ``trials`` (that made at least one call), ``failed_calls``;
    * ``calls_with_ground_truth``: calls in trials with file-level ground truth, and
      ``surfaced_ground_truth_calls`` among them: successful, non-write calls that
      surfaced a ground-truth file; ``share_surfaced_ground_truth`` is their ratio (NaN
      without ground truth);
    * ``ground_truth_files_first_found``: ground-truth files this tool surfaced first in
      their trial (each (trial, file) is credited once, to the first call that surfaced it);
    * ``tokens``/``seconds``: attributed growth of the running token total and of the
      elapsed time from each call to the next (``tokens_n``/``seconds_n`` calls had a value),
      and their means per call.

    Rows: MCP before local, then by calls (descending) and name.
    """
    if by not in ("tool", "category"):
        raise ValueError(f"by must be 'tool' or 'category', not {by!r}")
    keys = ["config_family", "is_mcp", *(["tool"] if by == "tool" else []), "tool_category"]
    sums = {  # output column: (column of _call_facts, aggregation); no value gives NaN, not 0
        "calls": ("_gt", "size"),
        "trials": ("_trial", "nunique"),
        "failed_calls": ("_error", "sum"),
        "calls_with_ground_truth": ("_gt", "sum"),
        "surfaced_ground_truth_calls": ("_surfaced", "sum"),
        "ground_truth_files_first_found": ("_first", "sum"),
        "tokens_n": ("_tokens", "count"),
        "tokens": ("_tokens", _finite_sum),
        "tokens_per_call": ("_tokens", _finite_mean),
        "seconds_n": ("_seconds", "count"),
        "seconds": ("_seconds", _finite_sum),
        "seconds_per_call": ("_seconds", _finite_mean),
    }
    names = list(sums)
    columns = [*keys, *names[:5], "share_surfaced_ground_truth", *names[5:]]
    if events.empty:
        return pd.DataFrame(columns=columns)
    # one pass per column over the events, one group-by (no per-group frames)
    agg = _call_facts(events, trials, keys).groupby(keys, sort=True).agg(**sums).reset_index()
    calls_gt = agg["calls_with_ground_truth"].to_numpy(dtype=float)
    agg["share_surfaced_ground_truth"] = np.where(
        calls_gt > 0,
        agg["surfaced_ground_truth_calls"].to_numpy(dtype=float)
        / np.where(calls_gt > 0, calls_gt, 1.0),
        math.nan,
    )
    name = "tool" if by == "tool" else "tool_category"
    out = agg[columns].sort_values(
        ["config_family", "is_mcp", "calls", name],
        ascending=[True, False, False, True],
        kind="mergesort",
    )
    return out.reset_index(drop=True)


# --------------------------------------------------------------------------- matching


def matched_overview(
    comparisons: pd.DataFrame, per_task: pd.DataFrame, metrics: Sequence[str]
) -> pd.DataFrame:
    """The matched comparison of each family pair and metric, descriptive below min n.

    Where a paired test ran, its row (``tested = True``) carries the mean delta, CI,
    Wilcoxon p (and Holm) and effect sizes. Where it did not (too few matched tasks), the
    row still shows ``n`` and the descriptive mean, min and max of the per-task deltas
    that exist, with ``tested = False`` and the reason no test is run.

    Columns: ``baseline, treatment, metric, n, tested, mean_delta, min_delta, max_delta,
    ci_low, ci_high, wins, losses, ties, wilcoxon_p, wilcoxon_p_holm, rank_biserial,
    reason``.
    """
    columns = [
        "baseline",
        "treatment",
        "metric",
        "n",
        "tested",
        "mean_delta",
        "min_delta",
        "max_delta",
        "ci_low",
        "ci_high",
        "wins",
        "losses",
        "ties",
        "wilcoxon_p",
        "wilcoxon_p_holm",
        "rank_biserial",
        "reason",
    ]
    rows = []
    for (base, treat), sub in comparisons.groupby(["baseline", "treatment"], sort=True):
        tasks = per_task[(per_task["baseline"] == base) & (per_task["treatment"] == treat)]
        by_metric: dict[Any, dict[Any, Any]] = {r["metric"]: r for r in sub.to_dict("records")}
        for metric in [m for m in metrics if m in by_metric]:
            row = by_metric[metric]
            column = f"delta:{metric}"
            deltas = _numbers(tasks[column]) if column in tasks.columns else np.array([])
            deltas = deltas[np.isfinite(deltas)]
            rounded = np.round(deltas, 12)
            tested = bool(row["computable"])
            out = {
                "baseline": base,
                "treatment": treat,
                "metric": metric,
                "n": int(deltas.size),
                "tested": tested,
                "mean_delta": float(deltas.mean()) if deltas.size else math.nan,
                "min_delta": float(deltas.min()) if deltas.size else math.nan,
                "max_delta": float(deltas.max()) if deltas.size else math.nan,
                "wins": int((rounded > 0).sum()),
                "losses": int((rounded < 0).sum()),
                "ties": int((rounded == 0).sum()),
            }
            for name in ("ci_low", "ci_high", "wilcoxon_p", "wilcoxon_p_holm", "rank_biserial"):
                out[name] = float(row[name]) if tested and name in row else math.nan
            if tested:
                out["reason"] = None
            elif deltas.size:
                out["reason"] = f"no test: {row['reason']}"
            else:
                out["reason"] = row["reason"]
            rows.append(out)
    return pd.DataFrame(rows, columns=columns)


def pairing_trials(trials: pd.DataFrame, per_task: pd.DataFrame) -> pd.DataFrame:
    """Every trial behind every matched task, one row per trial.

    Columns: ``baseline, treatment, task_name, model, harness_version, side, run_id,
    config_name, trial_id, trial_name, reward, passed, combined`` (``combined``: the trial had a valid
    reward, so it entered the task's mean), sorted by pair, task, side, run and trial.
    """
    key_columns = ["baseline", "treatment", "task_name", "model", "harness_version"]
    trial_columns = ["run_id", "config_name", "trial_id", "trial_name", "reward", "passed"]
    columns = [*key_columns, "side", *trial_columns, "combined"]
    if per_task.empty:
        return pd.DataFrame(columns=columns)
    keys = per_task[key_columns]
    sides = pd.concat(
        [keys.assign(side=side, config_family=keys[side]) for side in ("baseline", "treatment")],
        ignore_index=True,
    )
    candidates = trials[["config_family", "task_name", "model", "harness_version", *trial_columns]]
    merged = sides.merge(
        candidates, on=["config_family", "task_name"], how="inner", suffixes=("", "_trial")
    )
    model, trial_model = merged["model"].astype(object), merged["model_trial"].astype(object)
    version = merged["harness_version"].astype(object)
    trial_version = merged["harness_version_trial"].astype(object)
    same_model = (model == trial_model) | (model.isna() & trial_model.isna())
    # unknown versions never count as a difference (see stats.paired.match_tasks)
    fits = version.isna() | trial_version.isna() | (version == trial_version)
    out = merged[same_model & fits].copy()
    out["reward"] = pd.to_numeric(out["reward"], errors="coerce").astype(float)
    out["combined"] = np.isfinite(out["reward"].to_numpy())
    order = {"baseline": 0, "treatment": 1}
    out = out.sort_values(
        ["baseline", "treatment", "task_name", "model", "side", "run_id", "trial_id"],
        key=lambda s: s.map(order) if s.name == "side" else s,
        kind="mergesort",
    )
    return out[columns].reset_index(drop=True)


# --------------------------------------------------------------------------- correlations


def fit_lines(table: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Ordinary least-squares line ``y = intercept + slope * x`` of each scatter pair.

    ``pairs`` holds ``x`` and ``y`` column names (e.g. the strongest correlations). Uses
    the rows where both are finite; fewer than two points or a constant ``x`` give NaN
    with a reason. Columns: ``x, y, n, slope, intercept, reason``.

    Examples
    --------
    >>> t = pd.DataFrame({"a": [0.0, 1.0, 2.0], "b": [1.0, 3.0, 5.0]})
    >>> fit_lines(t, pd.DataFrame({"x": ["a"], "y": ["b"]}))[["n", "slope", "intercept"]].values.tolist()
    [[3.0, 2.0, 1.0]]
    """
    rows = []
    for pair in pairs[["x", "y"]].itertuples(index=False):
        x = _numbers(table[pair.x]) if pair.x in table.columns else np.array([])
        y = _numbers(table[pair.y]) if pair.y in table.columns else np.array([])
        ok = np.isfinite(x) & np.isfinite(y) if x.size and y.size else np.array([], dtype=bool)
        xs, ys = (x[ok], y[ok]) if ok.size else (np.array([]), np.array([]))
        row: dict[str, Any] = {"x": pair.x, "y": pair.y, "n": int(xs.size)}
        if xs.size < 2:
            row |= {"slope": math.nan, "intercept": math.nan, "reason": "fewer than 2 points"}
        elif np.ptp(xs) == 0:
            row |= {"slope": math.nan, "intercept": math.nan, "reason": f"{pair.x} is constant"}
        else:
            dx = xs - xs.mean()
            slope = float((dx * (ys - ys.mean())).sum() / (dx * dx).sum())
            row |= {
                "slope": slope,
                "intercept": float(ys.mean() - slope * xs.mean()),
                "reason": None,
            }
        rows.append(row)
    return pd.DataFrame(rows, columns=["x", "y", "n", "slope", "intercept", "reason"])


# --------------------------------------------------------------------------- timelines


def timeline_tasks(
    per_task: pd.DataFrame, requested: Iterable[str] = (), *, top: int = 2
) -> pd.DataFrame:
    """The matched tasks to draw timelines for: ``requested`` ones, else the ``top`` with the
    largest absolute reward difference (ties: task name).

    Returns the ``per_task`` rows chosen (with ``delta:reward``), in display order; a
    requested task that is not matched is skipped.
    """
    if per_task.empty:
        return per_task.copy()
    wanted = [t for t in requested if t]
    if wanted:
        chosen = per_task[per_task["task_name"].isin(wanted)]
        order = {name: i for i, name in enumerate(wanted)}
        return chosen.sort_values(
            "task_name", key=lambda s: s.map(order), kind="mergesort"
        ).reset_index(drop=True)
    return _largest_first(per_task, "delta:reward").head(top).reset_index(drop=True)


def _largest_first(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """``frame`` by the absolute value of ``column``, largest first, missing (or no
    ``column``) last; ties: task name."""
    size = pd.to_numeric(frame[column], errors="coerce").abs() if column in frame else np.nan
    ranked = frame.assign(_size=size).fillna({"_size": -1.0})
    return ranked.sort_values(
        ["_size", "task_name"], ascending=[False, True], kind="mergesort"
    ).drop(columns="_size")


def largest_deltas(deltas: pd.DataFrame, *, top: int = 30) -> pd.DataFrame:
    """The ``top`` rows of a per-task delta table with the largest absolute ``delta``
    (ties: task name), in their original order; missing deltas come last.

    Examples
    --------
    >>> d = pd.DataFrame({"task_name": list("abcd"), "delta": [0.1, -0.9, None, 0.5]})
    >>> largest_deltas(d, top=2)["task_name"].tolist()
    ['b', 'd']
    """
    if len(deltas) <= top:
        return deltas
    keep = _largest_first(deltas, "delta").head(top).index
    return deltas.loc[deltas.index.isin(keep)]


def representative_trial(trials: pd.DataFrame) -> str | None:
    """The trial a timeline shows for one side: the latest by start time, then trial id."""
    if trials.empty:
        return None
    column = trials["started_at"] if "started_at" in trials else pd.Series(None, index=trials.index)
    started = pd.to_datetime(column, errors="coerce", utc=True)
    order = trials.assign(_started=started).sort_values(
        ["_started", "trial_id"], na_position="first", kind="mergesort"
    )
    return str(order["trial_id"].iloc[-1])


def timeline_frame(events: pd.DataFrame, trial_id: str) -> pd.DataFrame:
    """One row per (call, file it touched) of one trial, for a timeline.

    Columns: ``step_index, elapsed_seconds, tool, tool_category, is_mcp, is_error, file,
    is_ground_truth, first_hit`` where ``file`` is None for a call without target files
    and ``first_hit`` marks the trial's first successful retrieval of a ground-truth file.
    """
    columns = [
        "step_index",
        "elapsed_seconds",
        "tool",
        "tool_category",
        "is_mcp",
        "is_error",
        "file",
        "is_ground_truth",
        "first_hit",
    ]
    sub = events[events["trial_id"] == trial_id].sort_values("step_index", kind="mergesort")
    rows = []
    first_done = False
    records: list[dict[Any, Any]] = sub.to_dict("records")
    for ev in records:
        matched = set(ev["matched_ground_truth_files"])
        first = bool(ev["first_found_ground_truth_files"]) and not first_done
        first_done = first_done or first
        for target in list(ev["target_files"]) or [None]:
            rows.append(
                {
                    "step_index": int(ev["step_index"]),
                    "elapsed_seconds": ev["elapsed_seconds"],
                    "tool": ev["tool"],
                    "tool_category": ev["tool_category"],
                    "is_mcp": bool(ev["is_mcp"]),
                    "is_error": bool(ev["is_error"]),
                    "file": target,
                    "is_ground_truth": target in matched,
                    "first_hit": first and target in matched,
                }
            )
    return pd.DataFrame(rows, columns=columns)

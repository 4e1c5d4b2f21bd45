"""Downstream impact of retrieval: outcome associations and matched config comparisons.

:func:`analyze_impact` runs the whole stage on one per-task metrics table (one row per
trial, ``docs/contracts.md`` §3) and returns an :class:`ImpactResult` of DataFrames;
:func:`impact_to_json` turns it into the deterministic ``retrieval_impact.json``
document; :func:`run_impact` reads each run's table, writes the document beside it and,
on request, one pooled analysis across runs. :func:`load_impact` reads a document back;
:func:`impact_for_run` loads a run's document when it was made with the wanted options
and computes the same analysis in memory otherwise (so the report shows what the JSON says).

What each part means
--------------------
* The **metric family** (by default the
  :data:`~retrieval_lib.stats.columns.KEY_METRICS` present; ``metrics="all"`` or a list)
  drives both the correlations and the comparisons, so the JSON and the report agree.
* ``correlations``: :func:`~retrieval_lib.stats.clustered.correlate_by_task`, over one
  value per task (the task is the unit of inference, Miller 2024, arXiv:2411.00640).
  Associations only; errored and timed-out trials are kept and counted in ``n_flagged``
  unless ``exclude_flagged``.
* ``comparisons``: per (baseline, treatment) pair from
  :func:`~retrieval_lib.stats.paired.pair_configs`, the matched tasks of
  :func:`~retrieval_lib.stats.paired.match_tasks` compared metric by metric
  (:func:`~retrieval_lib.stats.paired_tests.compare_matched`), deltas = treatment − baseline.
  Holm family: the outcomes and the metric family of one config pair.
* ``mcnemar``: pass/fail per matched task; with repeated trials a side passes a task when
  more than half of its trials passed, and an even split is left out (``n_split_excluded``).
* ``per_task``, ``unmatched`` and ``config_summary`` (over all trials, matched or not):
  see :class:`ImpactResult`.

Pooling across runs matches tasks by canonical task name, model and harness version
(:func:`~retrieval_lib.stats.paired.match_tasks`), whatever run they come from (a task run
in several runs is a repeated trial). ``combine="latest"`` over several runs needs
``started_at`` to tell which run's latest trial is the latest, else it is refused.

One module: the analysis, its JSON document (schema version, writer and reader) and the
run-by-run driver are one contract; a column added to the analysis is written and read here.

Examples
--------
>>> import pandas as pd
>>> df = pd.DataFrame({
...     "config_name": ["baseline"] * 3 + ["mcp"] * 3,
...     "task_name": ["a", "b", "c"] * 2,
...     "model": ["m"] * 6,
...     "reward": [0.0, 1.0, 0.5, 1.0, 1.0, 1.0],
...     "file.AP": [0.1, 0.5, 0.2, 0.6, 0.9, 0.4]})
>>> result = analyze_impact(df, n_boot=200)
>>> result.pairs[["baseline", "treatment", "n_matched"]].values.tolist()
[['baseline', 'mcp', 3]]
>>> row = result.comparisons.set_index("metric").loc["reward"]
>>> int(row["n"]), float(row["mean_delta"])
(3, 0.5)

"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval_lib import __version__
from retrieval_lib.errors import InputError, StatisticsError
from retrieval_lib.io import atomic_write_json, load_package_json
from retrieval_lib.stats.clustered import correlate_by_task, majority_pass
from retrieval_lib.stats.columns import (
    OUTCOME_COLUMNS,
    as_float,
    require_columns,
    resolve_metrics,
)
from retrieval_lib.stats.paired import (
    MATCH_KEY_COLUMNS,
    UNMATCHED_COLUMNS,
    MatchResult,
    match_tasks,
    pair_configs,
)
from retrieval_lib.stats.paired_tests import (
    MCNEMAR_COLUMNS,
    PAIRED_COLUMNS,
    compare_matched,
    mcnemar_exact,
)

__all__ = [
    "IMPACT_FILENAME",
    "IMPACT_SCHEMA_VERSION",
    "IMPACT_TABLES",
    "POOLED_FILENAME",
    "ImpactResult",
    "ImpactRun",
    "analyze_impact",
    "impact_for_run",
    "option_differences",
    "recorded_options",
    "impact_to_json",
    "json_records",
    "analyze_impact_columns",
    "load_impact",
    "load_impact_schema",
    "impact_columns",
    "run_impact",
]

IMPACT_SCHEMA_VERSION = "1.3"
IMPACT_FILENAME = "retrieval_impact.json"
POOLED_FILENAME = "retrieval_impact_pooled.json"
_INTERPRETATION = (
    "Correlations are associations between retrieval metrics and outcomes over tasks "
    "(repeated trials averaged per task), not causal effects. Matched comparisons report treatment minus baseline on tasks "
    "both configs ran with the same model and harness version (a version that could not be "
    "read is not a difference: such pairs are flagged harness_version_unverified)."
)


@dataclass(frozen=True)
class ImpactResult:
    """Every table of the impact analysis of one metrics table.

    Attributes
    ----------
    pairs : pandas.DataFrame
        ``baseline, treatment, n_matched, n_unmatched, n_flagged, n_harness_unverified,
        n_matched_strict`` per config pair: ``n_matched`` under the rule used,
        ``n_harness_unverified`` the pairs with an unknown harness version on a side (kept
        and flagged, or left out under ``strict_harness_version``), ``n_matched_strict``
        the pairs whose versions are known and equal.
    correlations : pandas.DataFrame
        Metric × outcome associations (see :func:`correlate_metrics`).
    comparisons : pandas.DataFrame
        Paired comparisons per pair and metric (see :func:`compare_matched`).
    mcnemar : pandas.DataFrame
        Exact McNemar test of pass/fail per pair.
    per_task : pandas.DataFrame
        Both sides' values for every matched task of every pair.
    unmatched : pandas.DataFrame
        Tasks left out of each pair, with the reason.
    config_summary : pandas.DataFrame
        ``config_name, column, n, mean, median`` of each outcome over all trials.
    params : dict
        Parameters and conventions of the analysis.
    """

    pairs: pd.DataFrame
    correlations: pd.DataFrame
    comparisons: pd.DataFrame
    mcnemar: pd.DataFrame
    per_task: pd.DataFrame
    unmatched: pd.DataFrame
    config_summary: pd.DataFrame
    params: dict[str, Any] = field(default_factory=dict)


def _config_summary(df: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for config, sub in df.groupby(df["config_name"].astype(str), sort=True):
        rows.append((config, "trials", len(sub), sub["task_name"].nunique(), math.nan, math.nan))
        for column in [c for c in OUTCOME_COLUMNS if c in df.columns]:
            values = as_float(sub[column])
            finite = values.to_numpy()[np.isfinite(values.to_numpy())]
            n_tasks = sub.loc[values.notna(), "task_name"].nunique()
            mean = float(finite.mean()) if finite.size else math.nan
            median = float(np.median(finite)) if finite.size else math.nan
            rows.append((config, column, int(finite.size), n_tasks, mean, median))
    return pd.DataFrame(rows, columns=["config_name", "column", "n", "n_tasks", "mean", "median"])


def _majority_mcnemar(match: MatchResult, min_pairs: int) -> pd.DataFrame:
    """McNemar's test of a pair's pass/fail, a side passing a task when most of its trials
    did; tasks whose trials split evenly are left out (``n_split_excluded``)."""
    if "passed" not in match.value_columns:
        test = pd.DataFrame([dict.fromkeys(MCNEMAR_COLUMNS, math.nan)])
        test["n"], test["computable"] = 0, False
        test["reason"] = "no 'passed' column in the metrics table"
        test["n_split_excluded"] = 0
        return test
    b_rate, t_rate = match.baseline_values["passed"], match.treatment_values["passed"]
    test = mcnemar_exact(majority_pass(b_rate), majority_pass(t_rate), min_n=min_pairs)
    test["n_split_excluded"] = int(((b_rate == 0.5) | (t_rate == 0.5)).sum())
    return test


def analyze_impact(
    df: pd.DataFrame,
    *,
    baseline: str | None = None,
    treatment: str | None = None,
    seed: int = 0,
    n_boot: int = 10000,
    min_n: int = 5,
    min_pairs: int = 3,
    combine: str = "mean",
    metrics: str | Sequence[str] = "key",
    exclude_flagged: bool = False,
    strict_harness_version: bool = False,
    correlate: bool = True,
) -> ImpactResult:
    """Correlate metrics with outcomes and compare paired configs on matched tasks.

    Parameters
    ----------
    df : pandas.DataFrame
        Per-task metrics table (one row per trial); needs ``config_name``, ``task_name``
        and ``reward``.
    baseline, treatment : str, optional
        Explicit configs; otherwise paired by name (:func:`pair_configs`).
    seed : int
        Seed of the Monte Carlo permutation p-values of the correlations and of a
        bootstrap CI (the same for every metric and pair).
    n_boot : int
        Bootstrap resamples (only for ``ci_method`` "bca" or "percentile" of a paired
        delta; the default t interval needs none).
    min_n : int
        Fewest complete pairs for a correlation.
    min_pairs : int
        Fewest matched tasks for a paired comparison (the seed's rule: 3).
    combine : {"mean", "latest"}
        Rule for repeated trials of a task. ``"latest"`` on a table of several runs
        needs a ``started_at`` column (each run flags its own latest trial).
    metrics : "key", "all" or sequence of str
        The retrieval-metric family of the correlations and comparisons (default: the
        key metrics, :func:`~retrieval_lib.stats.columns.resolve_metrics`).
    exclude_flagged : bool
        Leave errored and timed-out trials out of the correlations (default: keep them,
        counted in each row's ``n_flagged``).
    strict_harness_version : bool
        Match only tasks whose harness versions are known and equal on both sides
        (default: an unknown version is no difference; such pairs are kept and flagged
        ``harness_version_unverified`` in ``per_task``).
    correlate : bool
        Compute the correlations (``False``: an empty ``correlations`` table, for callers
        that correlate a wider table themselves, such as a study).

    Returns
    -------
    ImpactResult
        With no config pair, the comparison tables are empty and ``pairs`` says so.

    Raises
    ------
    StatisticsError
        No rows, an unknown config or metric, or ``combine="latest"`` over several runs
        without ``started_at``.
    """
    require_columns(df, ["config_name", "task_name", "reward"], what="metrics table")
    if df.empty:
        raise StatisticsError("the metrics table has no rows")
    if combine == "latest" and "started_at" not in df.columns and "run_id" in df.columns:
        run_ids = sorted({str(r) for r in df["run_id"].dropna()})
        if len(run_ids) > 1:
            raise StatisticsError(
                f"combine='latest' over {len(run_ids)} pooled runs ({', '.join(run_ids)}): "
                "each run flags its own latest trial and the table has no started_at column "
                "to tell which is the latest; use combine='mean'"
            )
    metric_list = resolve_metrics(df, metrics)
    outcome_list = [c for c in OUTCOME_COLUMNS if c in df.columns]
    pairs = pair_configs(df["config_name"].dropna().astype(str), baseline, treatment)
    correlations = (
        correlate_by_task(df, metric_list, min_n=min_n, exclude_flagged=exclude_flagged, seed=seed)
        if correlate
        else pd.DataFrame(columns=analyze_impact_columns()["correlations"])
    )

    pair_rows, comparisons, mcnemars, per_tasks, unmatched = [], [], [], [], []
    for b_name, t_name in pairs:
        match = match_tasks(
            df,
            b_name,
            t_name,
            combine=combine,
            value_columns=[*outcome_list, *metric_list],
            strict_harness_version=strict_harness_version,
        )
        comparisons.append(compare_matched(match, n_boot=n_boot, seed=seed, min_n=min_pairs))
        test = _majority_mcnemar(match, min_pairs)
        test.insert(0, "treatment", t_name)
        test.insert(0, "baseline", b_name)
        mcnemars.append(test)
        per_tasks.append(match.per_task())
        lost = match.unmatched.copy()
        lost.insert(0, "treatment", t_name)
        lost.insert(0, "baseline", b_name)
        unmatched.append(lost)
        pair_rows.append(
            {
                "baseline": b_name,
                "treatment": t_name,
                "n_matched": match.n_matched,
                "n_unmatched": int(match.unmatched["task_name"].nunique()),
                "n_flagged": int(match.keys["flagged"].sum()),
                "n_harness_unverified": match.n_unverified,
                "n_matched_strict": match.n_matched_strict,
            }
        )

    def stack(
        frames: list[pd.DataFrame], columns: Sequence[str], sort: Sequence[str]
    ) -> pd.DataFrame:
        frames = [f for f in frames if not f.empty]
        if not frames:
            return pd.DataFrame(columns=list(columns))
        out = pd.concat(frames, ignore_index=True)
        return out.sort_values(list(sort), kind="mergesort").reset_index(drop=True)

    params = {
        "baseline": baseline,
        "treatment": treatment,
        "seed": int(seed),
        "n_boot": int(n_boot),
        "min_n_correlation": int(min_n),
        "min_matched_pairs": int(min_pairs),
        "combine_repeated_trials": combine,
        "delta_ci": "t interval of the mean per-task delta: mean +- t(0.975, n-1) sd / sqrt(n)",
        "paired_test_minimum": "a paired test needs min_matched_pairs pairs, non-constant "
        "deltas and at least 6 non-zero deltas (the fewest at which an exact two-sided "
        "Wilcoxon p can reach 0.05); otherwise tested = false with the reason",
        "tasks_needed": "matched tasks for a paired t-test to detect a mean delta of 0.05 / "
        "0.10 at 80% power, alpha 0.05, given the sd of the per-task deltas",
        "correlation_p": "two-sided permutation p: exact (all n! pairings) for n <= 8, "
        "Monte Carlo (10,000 pairings, seed) for n <= 100, asymptotic above",
        "spearman_ci": "Fisher z with Bonett-Wright variance (1 + r^2/2)/(n-3); missing at "
        "|r| = 1 or n <= 3",
        "pearson_ci": "Fisher z with variance 1/(n-3); missing at |r| = 1 or n <= 3",
        "auc_ci": "Hanley-McNeil; missing at AUC 0 or 1",
        "correlation_p_adjust_family": "one group (config or pooled) x one method family: "
        "rank (spearman, auc) or linear (pearson, point_biserial); one test per metric x "
        "outcome",
        "comparison_p_adjust_family": "the outcomes and metrics of one config pair (Holm)",
        "matching": "same canonical task name and model (missing == missing), valid reward "
        "on both sides; known harness versions must be equal, an unknown one is no difference "
        "(the pair is flagged harness_version_unverified)",
        "strict_harness_version": bool(strict_harness_version),
        "wilcoxon": "zeros dropped, average ranks; exact by enumerating all 2^n sign flips "
        "for n <= 20 non-zero deltas (exact without ties up to 50), else normal approximation "
        "with tie-corrected variance and continuity correction",
        "metric_family": metrics if isinstance(metrics, str) else "custom",
        "metrics": metric_list,
        "outcomes": outcome_list,
        "flagged_trials_in_correlations": "excluded" if exclude_flagged else "kept",
        "correlation_unit": "task: repeated trials averaged per task and config (per task "
        "for the pooled group), passed by majority (an even split left out); n counts tasks",
    }
    columns = analyze_impact_columns()
    return ImpactResult(
        pairs=pd.DataFrame(pair_rows, columns=columns["pairs"]),
        correlations=correlations,
        comparisons=stack(comparisons, columns["comparisons"], ["baseline", "treatment", "metric"]),
        mcnemar=stack(mcnemars, columns["mcnemar"], ["baseline", "treatment"]),
        per_task=stack(
            per_tasks,
            columns["per_task"],
            ["baseline", "treatment", "task_name", "model", "harness_version"],
        ),
        unmatched=stack(
            unmatched,
            columns["unmatched"],
            ["baseline", "treatment", "task_name", "side", "model", "harness_version"],
        ),
        config_summary=_config_summary(df),
        params=params,
    )


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: NaN/NA -> None, numpy scalars -> Python."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return value
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def json_records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` as JSON-ready dicts (NaN/NA/inf as None, numpy scalars as Python).

    >>> json_records(pd.DataFrame({"a": [1.0, float("nan")], "b": ["x", None]}))
    [{'a': 1.0, 'b': 'x'}, {'a': None, 'b': None}]
    """
    columns = [str(c) for c in frame.columns]
    return [
        {col: _plain(value) for col, value in zip(columns, row, strict=True)}
        for row in frame.itertuples(index=False, name=None)
    ]


def impact_to_json(result: ImpactResult, *, runs: Iterable[str] = ()) -> dict[str, Any]:
    """The ``retrieval_impact.json`` document of ``result`` (stable keys, NaN as null).

    Parameters
    ----------
    result : ImpactResult
        Output of :func:`analyze_impact`.
    runs : iterable of str
        Run ids the analysis covers (recorded sorted).

    Returns
    -------
    dict
        Validates against ``retrieval_lib/stats/schema/retrieval_impact.schema.json``;
        every table is a list of records in the table's sorted order.
    """
    return {
        "schema_version": IMPACT_SCHEMA_VERSION,
        "generator": {"name": "retrieval_lib", "version": __version__},
        "interpretation": _INTERPRETATION,
        "runs": sorted({str(r) for r in runs}),
        "params": {
            k: _plain(v) if not isinstance(v, list) else v for k, v in result.params.items()
        },
        "pairs": json_records(result.pairs),
        "correlations": json_records(result.correlations),
        "comparisons": json_records(result.comparisons),
        "mcnemar": json_records(result.mcnemar),
        "per_task": json_records(result.per_task),
        "unmatched": json_records(result.unmatched),
        "config_summary": json_records(result.config_summary),
    }


def load_impact_schema() -> dict[str, Any]:
    """The JSON Schema of ``retrieval_impact.json`` shipped with the package."""
    schema: dict[str, Any] = load_package_json(
        "retrieval_lib.stats", "schema/retrieval_impact.schema.json"
    )
    return schema


# --------------------------------------------------------------------------- files


#: Columns of the metrics table no impact analysis reads (per-document paths, descriptive
#: counts): left out when a table is read for :func:`run_impact`.
_UNREAD_PREFIXES = ("funnel.", "taxonomy.")
_UNREAD_COLUMNS = frozenset({"source_document", "candidate_set_size"})


def impact_columns(names: Sequence[str], metrics: str | Sequence[str] = "key") -> list[str] | None:
    """The columns of a metrics table (named ``names``) that :func:`analyze_impact` with
    metric family ``metrics`` reads, in table order; ``None`` for all of them.

    Identity and outcome columns are kept; left out are the per-document path, the
    descriptive counts (``funnel.*``, ``taxonomy.*``, ``candidate_set_size``) and,
    for the ``"key"`` family or a list of columns the table has, the metric columns
    outside the family. ``"all"`` keeps every metric column; a list naming a column the
    table lacks keeps every column (the refusal then suggests from all of them).

    Examples
    --------
    >>> names = ["config_name", "task_name", "file.AP", "file.P@1", "funnel.read_files",
    ...          "reward", "source_document"]
    >>> impact_columns(names)
    ['config_name', 'task_name', 'file.AP', 'reward']
    >>> impact_columns(names, "all")
    ['config_name', 'task_name', 'file.AP', 'file.P@1', 'reward']
    >>> impact_columns(names, ["file.P@1"]), impact_columns(names, ["file.P@3"])
    (['config_name', 'task_name', 'file.P@1', 'reward'], None)
    """
    from retrieval_lib.stats.columns import KEY_METRICS, METRIC_PREFIXES

    if isinstance(metrics, str):
        family = set(KEY_METRICS) if metrics == "key" else None
    else:
        family = {str(m) for m in metrics}
        if not family <= set(names):
            return None
    return [
        name
        for name in names
        if name not in _UNREAD_COLUMNS
        and not name.startswith(_UNREAD_PREFIXES)
        and (family is None or not name.startswith(METRIC_PREFIXES) or name in family)
    ]


def _columns_read(table: Path, metrics: str | Sequence[str]) -> list[str] | None:
    """Only the columns the analysis reads (a table has ~150, the family a few); all of
    them when the names cannot be read (the read then fails with the reason)."""
    from retrieval_lib.metrics.table_files import table_column_names

    try:
        return impact_columns(table_column_names(table), metrics)
    except InputError:
        return None


@dataclass(frozen=True)
class ImpactRun:
    """What :func:`run_impact` analysed and wrote.

    Attributes
    ----------
    results : dict
        Metrics-table path -> :class:`ImpactResult`.
    written : list of pathlib.Path
        JSON files written, in order (per table, then the pooled one).
    pooled : ImpactResult or None
        The pooled analysis when requested.
    """

    results: dict[Path, ImpactResult]
    written: list[Path]
    pooled: ImpactResult | None = None


def _run_ids(df: pd.DataFrame, fallback: str) -> list[str]:
    if "run_id" in df.columns:
        ids = sorted({str(v) for v in df["run_id"].dropna().tolist()})
        if ids:
            return ids
    return [fallback]


def run_impact(
    paths: Sequence[str | os.PathLike[str]],
    *,
    pool: str | os.PathLike[str] | None = None,
    **options: Any,
) -> ImpactRun:
    """Analyse each run's metrics table and write ``retrieval_impact.json`` beside it.

    Parameters
    ----------
    paths : sequence of path
        Run folders, folders of runs, or metrics tables.
    pool : path, optional
        Also analyse all tables together and write the result here (a ``.json`` file
        name, or a folder that receives ``retrieval_impact_pooled.json``).
    **options
        Keyword arguments of :func:`analyze_impact` (``baseline``, ``treatment``, ``seed``,
        ``n_boot``, ``min_n``, ``min_pairs``, ``combine``, ``metrics``,
        ``exclude_flagged``, ``strict_harness_version``; the same defaults).

    Returns
    -------
    ImpactRun

    Raises
    ------
    InputError
        A path is missing or has no metrics table.
    StatisticsError
        An explicit config is absent from a table.
    """
    from retrieval_lib.metrics.table_files import find_metrics_tables, read_metrics_table

    tables: list[Path] = []
    for path in paths:
        for table in find_metrics_tables(path):
            if table not in tables:
                tables.append(table)
    metrics = options.get("metrics", "key")
    results: dict[Path, ImpactResult] = {}
    frames: list[pd.DataFrame] = []
    written: list[Path] = []
    all_runs: set[str] = set()
    for table in tables:
        df = read_metrics_table(table, _columns_read(table, metrics))
        if df.empty:
            raise InputError(f"metrics table {table} has no rows")
        try:
            result = analyze_impact(df, **options)
        except StatisticsError as exc:
            raise StatisticsError(f"{table}: {exc}") from exc
        results[table] = result
        frames.append(df)
        target = table.parent / IMPACT_FILENAME
        runs = _run_ids(df, table.parent.parent.name)
        all_runs.update(runs)
        atomic_write_json(target, impact_to_json(result, runs=runs))
        written.append(target)
    pooled = None
    if pool is not None:
        combined = pd.concat(frames, ignore_index=True, sort=False)
        try:
            pooled = analyze_impact(combined, **options)
        except StatisticsError as exc:
            raise StatisticsError(f"pooled analysis: {exc}") from exc
        target = Path(pool)
        if target.suffix.lower() != ".json":
            target = target / POOLED_FILENAME
        atomic_write_json(target, impact_to_json(pooled, runs=all_runs))
        written.append(target)
    return ImpactRun(results=results, written=written, pooled=pooled)


# --------------------------------------------------------------------------- reading back

#: Columns of the written tables that hold text (or None); the others are numbers.
_TEXT_RESULT_COLUMNS = frozenset(
    {
        "group",
        "x",
        "y",
        "method",
        "family",
        "reason",
        "baseline",
        "treatment",
        "metric",
        "wilcoxon_method",
        "p_method",
        "ci_method",
        "task_name",
        "model",
        "harness_version",
        "harness_version_note",
        "benchmark",
        "side",
        "config_name",
        "column",
        *(
            f"{c}_{side}"
            for c in ("tokens_source", "cost_source")
            for side in ("baseline", "treatment")
        ),
    }
)
_BOOL_RESULT_COLUMNS = frozenset({"computable", "tested", "flagged", "harness_version_unverified"})
#: The tables of an :class:`ImpactResult` (its fields but ``params``), in order.
IMPACT_TABLES: tuple[str, ...] = (
    "pairs",
    "correlations",
    "comparisons",
    "mcnemar",
    "per_task",
    "unmatched",
    "config_summary",
)


def _frame_from_records(records: list[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """A DataFrame of JSON records: null is NaN in number columns, None in text columns."""
    names = list(columns)
    for record in records:
        for key in record:
            if key not in names:
                names.append(key)
    # built like analyze_impact builds its tables, so text columns get the same dtype
    frame = pd.DataFrame(records, columns=names)
    for column in frame.columns:
        if column in _TEXT_RESULT_COLUMNS:
            continue
        if column in _BOOL_RESULT_COLUMNS:
            frame[column] = frame[column].astype(bool)
        else:
            try:
                frame[column] = pd.to_numeric(frame[column])
            except (TypeError, ValueError):
                continue  # a text column this version does not know: kept as written
            if not records:
                frame[column] = frame[column].astype(float)
    return frame


def _written_document(folder: Path) -> Path | None:
    """The ``retrieval_impact.json`` of a run folder or of its events folder, if written."""
    from retrieval_lib.metrics.summary import EVENTS_DIRNAME

    for candidate in (folder / IMPACT_FILENAME, folder / EVENTS_DIRNAME / IMPACT_FILENAME):
        if candidate.is_file():
            return candidate
    return None


def load_impact(path: str | os.PathLike[str]) -> ImpactResult:
    """Read a ``retrieval_impact.json`` back into an :class:`ImpactResult`.

    Parameters
    ----------
    path : path
        The JSON file, its folder (``<run>/retrieval_events``) or the run folder.

    Returns
    -------
    ImpactResult
        The tables as written: numbers as float/int (null as NaN), text as str/None, and
        ``params`` as recorded, plus ``params["runs"]`` (the document's run ids) and
        ``params["source"]`` (the file read).

    Raises
    ------
    InputError
        No document at ``path``, unreadable JSON, or a document of another schema version.

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> df = pd.DataFrame({"config_name": ["baseline"] * 3 + ["mcp"] * 3,
    ...     "task_name": ["a", "b", "c"] * 2, "reward": [0.0, 1.0, 0.5, 1.0, 1.0, 1.0]})
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> from retrieval_lib.io import atomic_write_json
    >>> _ = atomic_write_json(folder / IMPACT_FILENAME, impact_to_json(analyze_impact(df, n_boot=50)))
    >>> loaded = load_impact(folder)
    >>> float(loaded.comparisons.set_index("metric").loc["reward", "mean_delta"])
    0.5
    """
    import json

    from retrieval_lib.metrics.summary import EVENTS_DIRNAME

    target = Path(path)
    if target.is_dir():
        found = _written_document(target)
        if found is None:
            raise InputError(
                f"no {IMPACT_FILENAME} in {target} or {target / EVENTS_DIRNAME}: "
                f"run `retrieval-lib impact {target}` first"
            )
        target = found
    try:
        document = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"no such impact document: {target}") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read impact document {target}: {exc}") from None
    if not isinstance(document, dict) or document.get("schema_version") != IMPACT_SCHEMA_VERSION:
        found_version = document.get("schema_version") if isinstance(document, dict) else None
        raise InputError(
            f"{target} has schema version {found_version!r}, not {IMPACT_SCHEMA_VERSION}: "
            f"re-run `retrieval-lib impact` on the run"
        )
    template = analyze_impact_columns()
    params = dict(document.get("params") or {})
    values = [*(params.get("outcomes") or []), *(params.get("metrics") or [])]
    template["per_task"] = [
        "baseline",
        "treatment",
        *MATCH_KEY_COLUMNS,
        *(f"{side}:{v}" for v in values for side in ("baseline", "treatment", "delta")),
    ]
    tables = {
        key: _frame_from_records(list(document.get(key) or []), template[key])
        for key in IMPACT_TABLES
    }
    params["runs"] = list(document.get("runs") or [])
    params["source"] = str(target)
    return ImpactResult(**tables, params=params)


def analyze_impact_columns() -> dict[str, list[str]]:
    """The leading columns of each :class:`ImpactResult` table (as :func:`analyze_impact`)."""
    from retrieval_lib.stats.correlation import CORRELATION_COLUMNS

    return {
        "pairs": [
            "baseline",
            "treatment",
            "n_matched",
            "n_unmatched",
            "n_flagged",
            "n_harness_unverified",
            "n_matched_strict",
        ],
        "correlations": [
            "group",
            *(
                c
                for name in CORRELATION_COLUMNS
                for c in ((name, "n_trials") if name == "n" else (name,))
            ),
            "n_flagged",
            "family",
            "p_holm",
            "p_bh",
        ],
        "comparisons": ["baseline", "treatment", *PAIRED_COLUMNS, "wilcoxon_p_holm"],
        "mcnemar": ["baseline", "treatment", *MCNEMAR_COLUMNS, "n_split_excluded"],
        "per_task": ["baseline", "treatment", "task_name"],
        "unmatched": ["baseline", "treatment", *UNMATCHED_COLUMNS],
        "config_summary": ["config_name", "column", "n", "n_tasks", "mean", "median"],
    }


#: Recorded ``params`` of an impact document -> the :func:`analyze_impact` argument.
_RECORDED_OPTIONS = {
    "baseline": "baseline",
    "treatment": "treatment",
    "seed": "seed",
    "n_boot": "n_boot",
    "min_n_correlation": "min_n",
    "min_matched_pairs": "min_pairs",
    "combine_repeated_trials": "combine",
    "strict_harness_version": "strict_harness_version",
}


def recorded_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The :func:`analyze_impact` arguments an impact document was made with.

    Examples
    --------
    >>> recorded_options({"seed": 3, "n_boot": 300, "metric_family": "key",
    ...                   "flagged_trials_in_correlations": "kept"})
    {'seed': 3, 'n_boot': 300, 'metrics': 'key', 'exclude_flagged': False}
    """
    options = {arg: params[key] for key, arg in _RECORDED_OPTIONS.items() if key in params}
    family = params.get("metric_family")
    if family in ("key", "all"):
        options["metrics"] = family
    elif params.get("metrics") is not None:
        options["metrics"] = list(params["metrics"])
    if "flagged_trials_in_correlations" in params:
        options["exclude_flagged"] = params["flagged_trials_in_correlations"] == "excluded"
    return options


def option_differences(params: Mapping[str, Any], options: Mapping[str, Any]) -> list[str]:
    """``name: recorded -> wanted`` for each of ``options`` an analysis was not made with.

    ``params`` are an impact document's recorded parameters; an empty string or None
    means "the default" (for ``baseline``/``treatment``: paired by name).

    Examples
    --------
    >>> option_differences({"seed": 0, "n_boot": 10000, "baseline": None},
    ...                    {"seed": 7, "n_boot": 10000, "baseline": ""})
    ['seed: 0 -> 7']
    """
    recorded = recorded_options(params)
    differences = []
    for name, wanted in options.items():
        have = recorded.get(name)
        if (have in ("", None)) and (wanted in ("", None)):
            continue
        if have != wanted:
            differences.append(f"{name}: {have!r} -> {wanted!r}")
    return differences


def impact_for_run(
    run_dir: str | os.PathLike[str],
    table: pd.DataFrame | None = None,
    **options: Any,
) -> tuple[ImpactResult, str]:
    """The impact analysis of one run with ``options``: its written document if it was
    made with them, else computed in memory.

    Parameters
    ----------
    run_dir : path
        The run folder (or its ``retrieval_events`` folder).
    table : pandas.DataFrame, optional
        The run's metrics table, used only when the analysis is computed (read from the
        run otherwise).
    **options
        Keyword arguments of :func:`analyze_impact` (``baseline``, ``treatment``,
        ``seed``, ``n_boot``, ...). The run's ``retrieval_impact.json`` is used when it
        was made with these values; when one differs, the analysis is recomputed (in
        memory, nothing is written) with them and with the document's other options
        (metric family, minimum sizes, combining rule), and ``params["recomputed"]`` says
        which values differed. Without a document, the analysis is computed with
        ``options`` and the defaults that ``retrieval-lib impact`` uses.

    Returns
    -------
    (ImpactResult, str)
        The result and where it came from: the document's path, or ``"computed"``.

    Examples
    --------
    >>> import pandas as pd, tempfile, pathlib
    >>> df = pd.DataFrame({"config_name": ["baseline"] * 3 + ["mcp"] * 3,
    ...     "task_name": ["a", "b", "c"] * 2, "reward": [0.0, 1.0, 0.5, 1.0, 1.0, 1.0]})
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> from retrieval_lib.io import atomic_write_json
    >>> doc = impact_to_json(analyze_impact(df, n_boot=50))
    >>> _ = atomic_write_json(folder / IMPACT_FILENAME, doc)
    >>> impact_for_run(folder, df, n_boot=50)[1] == str(folder / IMPACT_FILENAME)
    True
    >>> result, source = impact_for_run(folder, df, n_boot=60)
    >>> source, result.params["n_boot"], result.params["recomputed"]
    ('computed', 60, 'retrieval_impact.json was made with other parameters (n_boot: 50 -> 60)')
    """
    from retrieval_lib.metrics.table_files import find_metrics_tables, read_metrics_table

    root = Path(run_dir)
    kept: dict[str, Any] = {}
    note = ""
    written = _written_document(root)
    if written is not None:
        loaded = load_impact(written)
        differences = option_differences(loaded.params, options)
        if not differences:
            return loaded, str(written)
        kept = recorded_options(loaded.params)
        note = f"{written.name} was made with other parameters ({'; '.join(differences)})"
        root = written.parent
    if table is None:
        table = read_metrics_table(find_metrics_tables(root)[0])
    result = analyze_impact(table, **{**kept, **options})
    if note:
        result.params["recomputed"] = note
    return result, "computed"

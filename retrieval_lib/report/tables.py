"""The small tables the run-analysis notebook shows, computed here so they are tested.

The notebook only arranges and plots; every number it shows comes from these functions
or from :mod:`retrieval_lib.metrics` / :mod:`retrieval_lib.stats`. Conventions:

* the **task** is the unit of inference (repeated trials of a task are not independent;
  :mod:`retrieval_lib.stats.clustered`, after Miller 2024, arXiv:2411.00640):
  :func:`quality_by_config` averages each task's trials first (mean over tasks, through
  :func:`retrieval_lib.stats.means.mean_ci`, which also gives the calibration table,
  :func:`retrieval_lib.stats.means.calibration_table`); ``n`` (and ``n_tasks``) counts
  tasks, ``n_trials`` the trials behind them. A table without ``task_name`` takes each
  row as its own task;
* a value that cannot be computed is NaN with a ``reason``, never 0, and every aggregate
  carries its ``n``;
* confidence intervals of means are percentile bootstrap intervals over tasks (the
  library's :func:`retrieval_lib.stats.intervals.bootstrap_mean_ci` over task means, or
  :func:`retrieval_lib.stats.clustered.cluster_bootstrap_mean`), seeded
  (``numpy.random.Generator(PCG64(seed))``), so the same inputs give the same numbers;
* no statistical test runs here: correlations and matched comparisons come from the
  run's ``retrieval_impact.json`` (:func:`retrieval_lib.stats.impact.impact_for_run`);
* :func:`write_tables` is the only writer, atomically, and only when asked.

One small function per table the run-analysis notebook shows, all under these conventions.

Examples
--------
>>> import pandas as pd
>>> table = pd.DataFrame({"config_name": ["a", "a", "a", "b"], "task_name": ["x", "x", "y", "x"],
...                       "file.AP": [0.5, 1.0, 0.25, None]})
>>> out = quality_by_config(table, ["file.AP"], n_boot=200)
>>> out[["config_name", "n_tasks", "n_trials", "mean"]].values.tolist()
[['a', 2, 3, 0.5], ['b', 0, 0, nan]]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from retrieval_lib.errors import InputError
from retrieval_lib.stats.columns import KEY_METRICS, OUTCOME_COLUMNS
from retrieval_lib.stats.means import MEAN_CI_COLUMNS, mean_ci_row, row_tasks

__all__ = [
    "KEY_METRICS",
    "OUTCOMES",
    "UTIL_METRICS",
    "RunData",
    "correlation_grid",
    "coverage_frame",
    "count_table",
    "degraded_reason_counts",
    "drilldown_table",
    "left_out_table",
    "funnel_table",
    "load_run_data",
    "overview_table",
    "non_computable_counts",
    "per_task_deltas",
    "power_table",
    "present",
    "quality_by_config",
    "strongest_pairs",
    "taxonomy_table",
    "write_tables",
]

#: The four utilisation probes (contracts §3 column names).
UTIL_METRICS: tuple[str, ...] = (
    "util.read_overlap",
    "util.write_overlap_proxy",
    "util.write_overlap_expected_edit",
    "util.read_before_write_ratio",
)
#: Outcomes the report relates retrieval to, in display order (the statistics' outcomes).
OUTCOMES: tuple[str, ...] = OUTCOME_COLUMNS
_FUNNEL_STAGES: tuple[str, ...] = ("surfaced", "read", "edited")
_TAXONOMY_PREFIX = "taxonomy."


@dataclass(frozen=True)
class RunData:
    """Everything the report reads about one evaluated run.

    Attributes
    ----------
    run_dir : pathlib.Path
        The run folder (holding ``retrieval_events/``).
    run_id : str
        Run id from the documents (the folder name when they disagree or are absent).
    table : pandas.DataFrame
        The per-trial metrics table (``retrieval_metrics.parquet`` / ``.csv``).
    documents : list of dict
        The retrieval-event documents (for coverage: trace and ground-truth sources).
    summary : dict
        ``run_retrieval_summary.json``.
    """

    run_dir: Path
    run_id: str
    table: pd.DataFrame
    documents: list[dict[str, Any]]
    summary: dict[str, Any]


def load_run_data(run_dir: str | Path) -> RunData:
    """Read the metrics table, summary and event documents of an evaluated run.

    Parameters
    ----------
    run_dir
        A run folder that ``retrieval-lib evaluate`` has processed, or its
        ``retrieval_events/`` folder.

    Raises
    ------
    InputError
        The folder is missing or was not evaluated (no metrics table or summary).

    Examples
    --------
    >>> load_run_data("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    retrieval_lib.errors.InputError: no such run folder: /nonexistent
    """
    import json

    from retrieval_lib.events.document import EVENTS_DIRNAME, load_documents
    from retrieval_lib.metrics.summary import SUMMARY_FILENAME
    from retrieval_lib.metrics.table_files import find_metrics_tables, read_metrics_table

    path = Path(run_dir)
    if not path.is_dir():
        raise InputError(f"no such run folder: {path}")
    events_dir = path / EVENTS_DIRNAME if (path / EVENTS_DIRNAME).is_dir() else path
    summary_path = events_dir / SUMMARY_FILENAME
    if not summary_path.is_file():
        raise InputError(
            f"{events_dir} has no {SUMMARY_FILENAME}; run `retrieval-lib evaluate {path}` first"
        )
    tables = find_metrics_tables(events_dir)
    table = read_metrics_table(tables[0])
    docs, _ = load_documents([events_dir])
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    run_ids = sorted({str(d["provenance"]["run_id"]) for d in docs})
    run_folder = events_dir.parent if events_dir.name == EVENTS_DIRNAME else events_dir
    run_id = run_ids[0] if len(run_ids) == 1 else run_folder.name
    return RunData(run_dir=run_folder, run_id=run_id, table=table, documents=docs, summary=summary)


def present(table: pd.DataFrame, columns: Iterable[str]) -> list[str]:
    """The ``columns`` that ``table`` has, in the given order.

    Examples
    --------
    >>> present(pd.DataFrame(columns=["b", "a"]), ["a", "c", "b"])
    ['a', 'b']
    """
    return [c for c in columns if c in table.columns]


def _configs(table: pd.DataFrame) -> list[tuple[str, pd.Series]]:
    """Each config of ``table`` (as text, sorted) with the mask of its rows."""
    names = table["config_name"].astype(str)
    return [(c, names == c) for c in sorted(table["config_name"].dropna().astype(str).unique())]


# --------------------------------------------------------------------------- coverage


def coverage_frame(docs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per document: where its trace and ground truth came from, and its gaps.

    Columns: ``config_name, task_name, trial_name, trace_source`` (``"none"`` without a
    trace), ``has_trajectory, has_transcript, ground_truth_source`` (``"none"``),
    ``ground_truth_confidence`` (``"none"``), ``n_ground_truth_files, degraded``,
    ``degraded_reasons`` (a list).

    Examples
    --------
    >>> from retrieval_lib.events.document import minimal_document
    >>> frame = coverage_frame([minimal_document(run_id="r", task_name="t", config_name="c")])
    >>> frame.loc[0, ["trace_source", "ground_truth_source"]].tolist()
    ['none', 'none']
    >>> frame.loc[0, "degraded_reasons"]
    ['no trace']
    """
    rows = []
    for doc in docs:
        prov, cov, gt = doc["provenance"], doc["coverage"], doc.get("ground_truth") or {}
        reasons = list(cov.get("degraded_reasons") or [])
        if not reasons and cov.get("degraded_reason"):
            reasons = [r.strip() for r in str(cov["degraded_reason"]).split(";") if r.strip()]
        rows.append(
            {
                "config_name": str(prov["config_name"]),
                "task_name": str(prov["task_name"]),
                "trial_name": prov.get("trial_name"),
                "trace_source": cov.get("trace_source") or "none",
                "has_trajectory": bool(cov.get("has_trajectory")),
                "has_transcript": bool(cov.get("has_transcript")),
                "ground_truth_source": gt.get("source") or "none",
                "ground_truth_confidence": gt.get("confidence") or "none",
                "n_ground_truth_files": len(gt.get("files") or ()),
                "degraded": bool(reasons),
                "degraded_reasons": reasons,
            }
        )
    columns = [
        "config_name",
        "task_name",
        "trial_name",
        "trace_source",
        "has_trajectory",
        "has_transcript",
        "ground_truth_source",
        "ground_truth_confidence",
        "n_ground_truth_files",
        "degraded",
        "degraded_reasons",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.sort_values(
        ["config_name", "task_name", "trial_name"], kind="mergesort"
    ).reset_index(drop=True)


def count_table(
    frame: pd.DataFrame, by: Sequence[str], *, columns: str = "config_name"
) -> pd.DataFrame:
    """Counts of rows per combination of ``by`` (rows) × ``columns`` values, with a total.

    Examples
    --------
    >>> frame = pd.DataFrame({"config_name": ["a", "a", "b"], "src": ["x", "y", "x"]})
    >>> count_table(frame, ["src"]).reset_index().values.tolist()
    [['x', 1, 1, 2], ['y', 1, 0, 1]]
    """
    if frame.empty:
        return pd.DataFrame(columns=[*by, "total"]).set_index(list(by))
    counts = frame.groupby([*by, columns], sort=True).size().unstack(columns, fill_value=0)
    counts = counts.astype("int64")
    counts.columns = [str(c) for c in counts.columns]
    counts["total"] = counts.sum(axis=1)
    counts.columns.name = None
    return counts


def degraded_reason_counts(coverage: pd.DataFrame) -> pd.DataFrame:
    """How many documents of each config carry each degraded reason (one row per reason).

    A document with two gaps counts once under each; documents without gaps are not
    counted. Empty (with the columns) when no document is degraded.

    Examples
    --------
    >>> cov = pd.DataFrame({"config_name": ["a", "b", "b"],
    ...                     "degraded_reasons": [["no trace"], ["no trace", "x"], []]})
    >>> degraded_reason_counts(cov).reset_index().values.tolist()
    [['no trace', 1, 1, 2], ['x', 0, 1, 1]]
    """
    exploded = coverage[["config_name", "degraded_reasons"]].explode("degraded_reasons")
    exploded = exploded.dropna(subset=["degraded_reasons"]).rename(
        columns={"degraded_reasons": "degraded_reason"}
    )
    return count_table(exploded, ["degraded_reason"])


def non_computable_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Trials whose file-level metrics are not computable, per reason and config.

    Examples
    --------
    >>> t = pd.DataFrame({"config_name": ["a", "a"], "computable": [True, False],
    ...                   "non_computable_reason": [None, "no trace"]})
    >>> non_computable_counts(t).reset_index().values.tolist()
    [['no trace', 1, 1]]
    """
    mask = ~table["computable"].fillna(False).astype(bool)
    skipped = table.loc[mask, ["config_name", "non_computable_reason"]].fillna(
        {"non_computable_reason": "(no reason recorded)"}
    )
    return count_table(skipped, ["non_computable_reason"])


def quality_by_config(
    table: pd.DataFrame,
    metrics: Sequence[str],
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Mean, bootstrap CI and n of each metric per config (one row per config × metric).

    Aggregate first: each task's trials are averaged, the mean is over tasks and the CI a
    bootstrap of the task means (:func:`~retrieval_lib.stats.clustered.task_mean_ci`), as
    the matched comparison averages repeats per task. Metrics absent from ``table`` are
    skipped. Columns: ``config_name, metric, n, n_tasks, n_trials, mean, ci_low, ci_high,
    reason`` (``n`` = ``n_tasks``: tasks with a value; ``n_trials``: trials with a value);
    the order follows ``metrics`` within sorted configs.
    """
    rows = []
    tasks = row_tasks(table)
    for config, in_config in _configs(table):
        for metric in present(table, metrics):
            rows.append(
                {"config_name": config, "metric": metric}
                | mean_ci_row(table.loc[in_config, metric], alpha, n_boot, seed, tasks[in_config])
            )
    return pd.DataFrame(rows, columns=["config_name", "metric", *MEAN_CI_COLUMNS])


# --------------------------------------------------------------------------- funnel


def funnel_table(table: pd.DataFrame) -> pd.DataFrame:
    """The surfaced → read → edited funnel per config (one row per config × stage).

    Columns: ``config_name, stage, n`` (trials with a trace), ``mean_files``,
    ``mean_ground_truth_hits`` and ``total_ground_truth_hits`` (over trials with file-level
    ground truth, ``n_with_ground_truth`` of them; NaN when none has).

    Examples
    --------
    >>> t = pd.DataFrame({"config_name": ["a", "a"],
    ...     "funnel.surfaced_files": [4, 2], "funnel.surfaced_gt_hits": [2, None],
    ...     "funnel.read_files": [2, 1], "funnel.read_gt_hits": [1, None],
    ...     "funnel.edited_files": [1, 0], "funnel.edited_gt_hits": [1, None]})
    >>> funnel_table(t)[["stage", "n", "mean_files", "total_ground_truth_hits"]].values.tolist()
    [['surfaced', 2, 3.0, 2.0], ['read', 2, 1.5, 1.0], ['edited', 2, 0.5, 1.0]]
    """
    rows = []
    for config, in_config in _configs(table):
        group = table[in_config]
        for stage in _FUNNEL_STAGES:
            files = pd.to_numeric(group[f"funnel.{stage}_files"], errors="coerce").dropna()
            hits = pd.to_numeric(group[f"funnel.{stage}_gt_hits"], errors="coerce").dropna()
            rows.append(
                {
                    "config_name": config,
                    "stage": stage,
                    "n": int(files.size),
                    "mean_files": float(files.mean()) if files.size else math.nan,
                    "n_with_ground_truth": int(hits.size),
                    "mean_ground_truth_hits": float(hits.mean()) if hits.size else math.nan,
                    "total_ground_truth_hits": float(hits.sum()) if hits.size else math.nan,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "config_name",
            "stage",
            "n",
            "mean_files",
            "n_with_ground_truth",
            "mean_ground_truth_hits",
            "total_ground_truth_hits",
        ],
    )


# --------------------------------------------------------------------------- taxonomy


def taxonomy_table(table: pd.DataFrame) -> pd.DataFrame:
    """Error-taxonomy labels per config: trials with the label, files, files per trial.

    ``n`` is the number of trials whose taxonomy is computable; ``share_with_label`` is
    ``trials_with_label / n`` (NaN when n is 0).

    Examples
    --------
    >>> t = pd.DataFrame({"config_name": ["a", "a", "a"],
    ...                   "taxonomy.missed_key_evidence": [2, 0, None]})
    >>> taxonomy_table(t).values.tolist()
    [['a', 'missed_key_evidence', 2, 1, 0.5, 2.0, 1.0]]
    """
    labels = [c for c in table.columns if c.startswith(_TAXONOMY_PREFIX)]
    rows = []
    for config, in_config in _configs(table):
        group = table[in_config]
        for column in labels:
            counts = pd.to_numeric(group[column], errors="coerce").dropna()
            n = int(counts.size)
            with_label = int((counts > 0).sum())
            rows.append(
                {
                    "config_name": config,
                    "label": column[len(_TAXONOMY_PREFIX) :],
                    "n": n,
                    "trials_with_label": with_label,
                    "share_with_label": with_label / n if n else math.nan,
                    "total_files": float(counts.sum()) if n else math.nan,
                    "files_per_trial": float(counts.mean()) if n else math.nan,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "config_name",
            "label",
            "n",
            "trials_with_label",
            "share_with_label",
            "total_files",
            "files_per_trial",
        ],
    )


# --------------------------------------------------------------------------- correlations


def _rank_method(outcome: str) -> str:
    from retrieval_lib.stats.columns import BINARY_OUTCOMES

    return "auc" if outcome in BINARY_OUTCOMES else "spearman"


def _rank_rows(correlations: pd.DataFrame, group: str) -> pd.DataFrame:
    """The rows of ``group`` whose method is the rank method of their outcome.

    An AUC row is shown on the correlation scale as what it is: ``method`` becomes
    ``"rank_biserial"`` and ``r`` / ``ci_low`` / ``ci_high`` its rank-biserial correlation
    ``2*AUC - 1`` and the AUC's CI mapped the same way (the ``auc`` columns stay).
    """
    wanted = correlations["y"].astype(str).map(_rank_method)
    rows = correlations[(correlations["group"] == group) & (correlations["method"] == wanted)]
    if "rank_biserial" not in rows.columns:
        return rows
    is_auc = (rows["method"] == "auc").to_numpy()
    if not is_auc.any():
        return rows
    rows = rows.copy()
    rows["r"] = rows["r"].astype(float)
    rows.loc[is_auc, "r"] = rows.loc[is_auc, "rank_biserial"].astype(float)
    for bound in ("ci_low", "ci_high"):
        if f"auc_{bound}" in rows.columns:
            rows[bound] = rows[bound].astype(float)
            rows.loc[is_auc, bound] = 2.0 * rows.loc[is_auc, f"auc_{bound}"].astype(float) - 1.0
    rows.loc[is_auc, "method"] = "rank_biserial"
    return rows


def correlation_grid(
    correlations: pd.DataFrame,
    group: str,
    *,
    alpha: float = 0.05,
    adjust: str = "p_holm",
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Metric × outcome grids of rank correlations for one group of ``correlate_metrics``.

    Continuous outcomes use Spearman's rho; binary ones (``passed``) the rank-biserial
    correlation ``2*AUC - 1``, so every cell is a rank correlation on the same scale.

    Returns
    -------
    (r, marks, n) : three DataFrames indexed by metric with one column per outcome
        ``r`` is NaN where not computable; ``marks`` holds ``"*"`` where the ``adjust``
        p-value is below ``alpha``, ``""`` where not, and ``"n/a"`` where not computable;
        ``n`` holds the complete pairs of each cell.

    Examples
    --------
    >>> c = pd.DataFrame({"group": ["g", "g"], "x": ["m", "m"], "y": ["reward", "passed"],
    ...     "method": ["spearman", "auc"], "n": [9, 9], "r": [0.8, float("nan")],
    ...     "rank_biserial": [float("nan"), 0.1], "computable": [True, True],
    ...     "p_holm": [0.01, 0.9]})
    >>> r, marks, n = correlation_grid(c, "g")
    >>> marks.loc["m"].tolist(), r.loc["m"].tolist()
    (['*', ''], [0.8, 0.1])
    """
    rows = _rank_rows(correlations, group)
    metrics = list(dict.fromkeys(rows["x"]))
    outcomes = list(dict.fromkeys(rows["y"]))
    r = pd.DataFrame(np.nan, index=metrics, columns=outcomes, dtype="float64")
    marks = pd.DataFrame("n/a", index=metrics, columns=outcomes, dtype=object)
    n = pd.DataFrame(0, index=metrics, columns=outcomes, dtype="int64")
    # rows as Any: pandas-stubs types itertuples() fields as a union of every scalar
    for row in cast(Any, rows).itertuples():
        n.loc[row.x, row.y] = int(row.n)
        if not bool(row.computable) or not np.isfinite(row.r):
            continue
        r.loc[row.x, row.y] = float(row.r)
        p = getattr(row, adjust)
        marks.loc[row.x, row.y] = "*" if p is not None and np.isfinite(p) and p < alpha else ""
    return r, marks, n


def strongest_pairs(correlations: pd.DataFrame, group: str, *, top: int = 4) -> pd.DataFrame:
    """The ``top`` computable rank correlations of ``group`` by absolute value.

    Ties in ``|r|`` are broken by metric then outcome name, so the choice is stable.

    Examples
    --------
    >>> c = pd.DataFrame({"group": ["g"] * 3, "x": ["a", "b", "c"], "y": ["reward"] * 3,
    ...     "method": ["spearman"] * 3, "r": [0.2, -0.9, 0.5], "computable": [True] * 3})
    >>> strongest_pairs(c, "g", top=2)["x"].tolist()
    ['b', 'c']
    """
    rows = _rank_rows(correlations, group)
    rows = rows[rows["computable"].astype(bool) & np.isfinite(rows["r"].astype(float))]
    ordered = rows.assign(_abs=rows["r"].astype(float).abs()).sort_values(
        ["_abs", "x", "y"], ascending=[False, True, True], kind="mergesort"
    )
    return ordered.drop(columns="_abs").head(top).reset_index(drop=True)


# --------------------------------------------------------------------------- matched pairs


def per_task_deltas(per_task: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per matched task: both sides' ``metric``, the delta and who did better.

    ``per_task`` is :attr:`ImpactResult.per_task` (or ``MatchResult.per_task()``); the
    delta is treatment − baseline. ``result`` is ``"treatment"`` (delta > 0),
    ``"baseline"`` (delta < 0), ``"tie"`` or ``"missing"`` (a side has no value). Higher is
    taken as better, so use it for reward and retrieval metrics, not cost or time.
    ``harness_version_unverified`` and ``harness_version_note`` follow when ``per_task``
    has them (a pair matched although a side's harness version is unknown).

    Examples
    --------
    >>> pt = pd.DataFrame({"baseline": ["b"] * 3, "treatment": ["t"] * 3,
    ...     "task_name": ["x", "y", "z"], "baseline:reward": [0.0, 1.0, None],
    ...     "treatment:reward": [1.0, 1.0, 0.5]})
    >>> per_task_deltas(pt, "reward")["result"].tolist()
    ['treatment', 'tie', 'missing']
    """
    columns = [
        "baseline",
        "treatment",
        "task_name",
        "baseline_value",
        "treatment_value",
        "delta",
        "result",
    ]
    if per_task.empty or f"baseline:{metric}" not in per_task.columns:
        return pd.DataFrame(columns=columns)
    b = pd.to_numeric(per_task[f"baseline:{metric}"], errors="coerce").astype("float64")
    t = pd.to_numeric(per_task[f"treatment:{metric}"], errors="coerce").astype("float64")
    delta = t - b
    result = np.select(
        [delta.isna(), delta > 0, delta < 0], ["missing", "treatment", "baseline"], default="tie"
    )
    out = pd.DataFrame(
        {
            "baseline": per_task["baseline"].to_numpy(),
            "treatment": per_task["treatment"].to_numpy(),
            "task_name": per_task["task_name"].to_numpy(),
            "baseline_value": b.to_numpy(),
            "treatment_value": t.to_numpy(),
            "delta": delta.to_numpy(),
            "result": result,
        },
        columns=columns,
    )
    if "harness_version_unverified" in per_task.columns:
        flags = per_task["harness_version_unverified"]
        out["harness_version_unverified"] = flags.fillna(False).astype(bool).to_numpy()
        notes = per_task.get("harness_version_note", pd.Series(None, index=per_task.index))
        out["harness_version_note"] = [None if pd.isna(n) else str(n) for n in notes]
    return out.sort_values(["baseline", "treatment", "task_name"], kind="mergesort").reset_index(
        drop=True
    )


# --------------------------------------------------------------------------- drill-down


def drilldown_table(
    table: pd.DataFrame, metrics: Sequence[str] = ("file.AP", "file.recall", "read.recall")
) -> pd.DataFrame:
    """One row per trial: task, config, the key metrics, outcome and why a gap exists.

    Columns: ``task_name, config_name, trial_name``, the present ``metrics``,
    ``reward, passed, cost_usd``, ``not_computable`` (the reason or ``""``); sorted by
    task, config and trial.

    Examples
    --------
    >>> t = pd.DataFrame({"task_name": ["b", "a"], "config_name": ["c", "c"],
    ...     "trial_name": ["b1", "a1"], "file.AP": [0.5, None], "reward": [1.0, 0.0],
    ...     "computable": [True, False], "non_computable_reason": [None, "no trace"]})
    >>> drilldown_table(t)[["task_name", "file.AP", "not_computable"]].values.tolist()
    [['a', nan, 'no trace'], ['b', 0.5, '']]
    """
    keep = ["task_name", "config_name", "trial_name", *present(table, metrics)]
    keep += present(table, ("reward", "passed", "cost_usd"))
    out = table[keep].copy()
    reasons = table.get("non_computable_reason")
    computable = table.get("computable")
    if reasons is not None and computable is not None:
        gap = ~computable.fillna(False).astype(bool)
        out["not_computable"] = np.where(
            gap, reasons.fillna("(no reason recorded)").astype(str), ""
        )
    else:
        out["not_computable"] = ""
    return out.sort_values(
        ["task_name", "config_name", "trial_name"], kind="mergesort"
    ).reset_index(drop=True)


# --------------------------------------------------------------------------- overview


def overview_table(summary: Mapping[str, Any]) -> pd.DataFrame:
    """Per-config counts of a run summary (``run_retrieval_summary.json``), with a total.

    Columns: ``documents`` (trials), ``tasks``, ``computable`` (file-level metrics),
    ``chunk_capable``, ``skipped``.

    Examples
    --------
    >>> s = {"counts": {"documents": 3, "tasks": 2, "computable": 2, "chunk_capable": 0,
    ...     "skipped": {"total": 1}, "by_config": {"a": {"documents": 3, "tasks": 2,
    ...     "computable": 2, "chunk_capable": 0, "skipped": {"total": 1}}}}}
    >>> overview_table(s).reset_index().values.tolist()
    [['a', 3, 2, 2, 0, 1], ['(all)', 3, 2, 2, 0, 1]]
    """
    columns = ["documents", "tasks", "computable", "chunk_capable", "skipped"]

    def row(counts: Mapping[str, Any]) -> list[int]:
        skipped = counts.get("skipped") or {}
        return [
            int(counts.get("documents", 0)),
            int(counts.get("tasks", 0)),
            int(counts.get("computable", 0)),
            int(counts.get("chunk_capable", 0)),
            int(skipped.get("total", 0)),
        ]

    counts = summary.get("counts") or {}
    by_config = counts.get("by_config") or {}
    index = [*sorted(by_config), "(all)"]
    data = [row(by_config[c]) for c in sorted(by_config)] + [row(counts)]
    return pd.DataFrame(data, index=pd.Index(index, name="config_name"), columns=columns)


def write_tables(frames: Mapping[str, pd.DataFrame], out_dir: str | Path) -> list[Path]:
    """Write each table as ``<out_dir>/<name>`` (CSV), atomically; return the paths.

    Parameters
    ----------
    frames
        File name (ending in ``.csv``, no folder part) -> table. Columns holding lists are
        written joined by ``"; "``.
    out_dir
        Folder to create if needed. Each file is replaced atomically
        (:func:`retrieval_lib.io.atomic_write_text`), so a reader never sees half a table.

    Raises
    ------
    InputError
        A name that is not a plain ``.csv`` file name.

    Examples
    --------
    >>> import tempfile
    >>> out = write_tables({"a.csv": pd.DataFrame({"x": [1], "tags": [["p", "q"]]})},
    ...                    tempfile.mkdtemp())
    >>> out[0].read_text().splitlines()
    ['x,tags', '1,p; q']
    """
    from retrieval_lib.io import atomic_write_text

    folder = Path(out_dir)
    written = []
    for name, frame in frames.items():
        if Path(name).name != name or not name.endswith(".csv"):
            raise InputError(f"table file name must be a plain .csv name, not {name!r}")
        plain = frame.copy()
        for column in plain.columns:
            if plain[column].map(lambda v: isinstance(v, (list, tuple))).any():
                plain[column] = plain[column].map(
                    lambda v: "; ".join(map(str, v)) if isinstance(v, (list, tuple)) else v
                )
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        atomic_write_text(target, plain.to_csv(index=False, lineterminator="\n"))
        written.append(target)
    return written


#: Columns of :func:`power_table`, in order.
POWER_COLUMNS: tuple[str, ...] = (
    "baseline",
    "treatment",
    "metric",
    "n",
    "sd_delta",
    "ci_half_width",
    "n_needed_0.05",
    "n_needed_0.10",
)


def power_table(
    comparisons: pd.DataFrame, metrics: Sequence[str] = ("reward", "passed")
) -> pd.DataFrame:
    """How many matched tasks would answer it, per config pair and outcome.

    From the matched comparison's rows (:func:`retrieval_lib.stats.paired_tests.compare_matched`):
    the matched tasks now (``n``), the spread of the per-task deltas (``sd_delta``), the 95%
    CI half-width of the mean delta and the matched tasks a paired t-test needs to detect a
    mean delta of 0.05 and 0.10 at 80% power, alpha 0.05 (:func:`retrieval_lib.stats.power.
    tasks_needed`). Missing where the deltas have no spread (n < 2 or all equal).

    Examples
    --------
    >>> c = pd.DataFrame({"baseline": ["b"] * 2, "treatment": ["t"] * 2,
    ...     "metric": ["passed", "reward"], "n": [20, 20], "sd_delta": [0.5, 0.3],
    ...     "ci_half_width": [0.234, 0.14], "n_needed_0.05": [788.0, 285.0],
    ...     "n_needed_0.10": [199.0, 73.0]})
    >>> power_table(c)[["metric", "n_needed_0.10"]].values.tolist()
    [['reward', 73.0], ['passed', 199.0]]
    """
    present = [c for c in POWER_COLUMNS if c in comparisons.columns]
    rows = comparisons[comparisons["metric"].isin(list(metrics))][present]
    order = {name: i for i, name in enumerate(metrics)}
    rows = rows.assign(_order=rows["metric"].map(order)).sort_values(
        ["baseline", "treatment", "_order"], kind="mergesort"
    )
    return rows.drop(columns="_order").reset_index(drop=True)


def left_out_table(summary: Mapping[str, Any]) -> pd.DataFrame:
    """What the run lost before its metrics, each with why (never dropped silently).

    Rows from the run summary (``run_retrieval_summary.json``): ``counts.left_out``, input
    entries normalisation skipped (a symlink loop, a folder it could not list, a file that
    is not a regular file), and ``counts.invalid_documents``, event documents evaluation
    could not read. Columns ``stage`` (normalize / evaluate), ``path``, ``reason``.

    Examples
    --------
    >>> summary = {"counts": {"left_out": [{"path": "cfg/loop", "reason": "a symlink loop"}],
    ...     "invalid_documents": [{"document": "cfg/t.retrieval_events.json", "error": "truncated"}]}}
    >>> left_out_table(summary).values.tolist()
    [['normalize', 'cfg/loop', 'a symlink loop'], ['evaluate', 'cfg/t.retrieval_events.json', 'truncated']]
    """
    counts = summary.get("counts") or {}
    rows = [
        ("normalize", str(entry.get("path", "")), str(entry.get("reason", "")))
        for entry in counts.get("left_out") or []
    ]
    rows += [
        ("evaluate", str(entry.get("document", "")), str(entry.get("error", "")))
        for entry in counts.get("invalid_documents") or []
    ]
    return pd.DataFrame(rows, columns=["stage", "path", "reason"])

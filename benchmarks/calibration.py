"""Calibration of the reports' statistics under the null (issue 22): false positives and coverage.

Simulates ``--studies`` null studies shaped like real agent benchmarks and runs, on each,
the **same library functions the study and run reports call**, then counts at
``alpha = 0.05``:

* **matched reward test** (false-positive rate): the ``reward`` row's ``wilcoxon_p`` of
  :func:`retrieval_lib.stats.paired.match_tasks` + :func:`retrieval_lib.stats.paired_tests.compare_matched`
  as :func:`retrieval_lib.stats.impact.analyze_impact` calls them (``combine="mean"``,
  ``n_boot`` 2000, ``seed`` 0, ``min_n`` 3). ``match_tasks`` costs ~3 ms per task, so by
  default the script forms the same per-task means itself and calls the same kernel
  (:func:`~retrieval_lib.stats.paired_tests.paired_comparison`); ``--check-matching K``
  proves the row equal to the full path on the first K studies, ``--full-matching`` runs
  the full path on every study;
* **matched delta 95% CI** (coverage of the true delta 0): the same row's ``ci_low`` /
  ``ci_high``;
* **leaderboard 95% reward CI** (coverage of the population mean reward):
  :func:`retrieval_lib.study.analysis.leaderboard` (``reward_ci_low`` / ``reward_ci_high``),
  both config rows of every study;
* **pooled retrieval–reward correlation** (false-positive rate):
  :func:`retrieval_lib.stats.clustered.correlate_by_task` as ``analyze_impact`` calls it
  (one value per task, permutation p-values; before issue 22: ``correlate_metrics`` over
  trials), the ``(pooled)`` Spearman row of ``file.recall`` × ``reward`` (the rank family
  is the report's primary one), raw ``p_value``.

Each library estimate is read by one small adapter function (``lib_*`` below): when the
library's columns or rules change, only those functions change. Beside each, a
**reference** computed here by a correct task-level method on the same simulated study
(``ref_*``): what the library should give once tasks are the unit of inference.

The null model (one study)
--------------------------
* ``n_tasks``: a size band drawn with equal probability (10–29, 30–79, 80–200 tasks), then
  uniform within it.
* Task difficulty: per-task pass probability ``p_i`` from ``Beta(0.7, 0.7)`` (population
  mean 0.5) or logit-normal, ``logit p_i ~ N(-0.5, 1.5^2)`` (population mean computed by
  Gauss–Hermite quadrature, ~0.42), one family per study (equal probability).
* Two configs, ``baseline`` and ``mcp``, with **no effect**: both draw from the same ``p_i``.
  Each (task, config) has 1–5 trials (uniform, independent of difficulty).
* Reward type per study (equal probability): binary (``reward ~ Bernoulli(p_i)``) or
  continuous (``reward ~ Beta(4 p_i, 4 (1 - p_i))``, mean ``p_i``). ``passed`` is
  ``reward >= 0.5``. 3% of trials have no reward (missing, MCAR).
* Retrieval metric ``file.recall``: per task a random effect ``u_i ~ N(0, 1)`` drawn
  **independently of the difficulty**, per trial ``logistic(a_config + u_i + e)`` with
  ``e ~ N(0, 0.8^2)`` and ``a_mcp = 0.3`` (MCP retrieves a little more: not a reward
  effect), rounded to a multiple of ``1/g_i`` with ``g_i`` ground-truth files (1–5) per
  task; 5% missing. Reward and retrieval are therefore independent, task by task, but both
  share the task cluster structure: trials of one task are correlated in both. Treating the
  trials as independent observations (pseudo-replication) inflates a trial-level test.

Estimands
---------
* Leaderboard: the reward the config gets on the benchmark's task **population**,
  ``mu = E[p_i]`` (0.5 for Beta(0.7, 0.7)). The leaderboard's ``reward_mean`` averages
  trials; with trial counts independent of difficulty (and rewards missing at random) its
  expectation is ``mu`` too, so ``mu`` is what both the trial-weighted and the
  task-weighted mean estimate. A CI that is to generalise beyond the tasks that happened
  to be run must cover ``mu``. (The JSON output also has the coverage of the
  conditional, in-sample target ``sum_i m_i p_i / sum_i m_i``, for reference.)
* Matched delta: ``E[treatment - baseline] = 0``, population and in-sample alike.
* Correlation and reward test: the null holds exactly; a rejection is a false positive.

Counting untested results
-------------------------
A test the library did not run (``computable`` false, a NaN p-value: e.g. every delta
zero) counts as **not rejected** in the false-positive rate (what a reader would see: no
significant result) and its share is reported as ``not run``. A CI the library did not
give (NaN bounds) is **left out** of the coverage and its share is reported as ``not run``.
A library call that raises is counted apart (``errors``) and its first message printed.

Usage::

    python benchmarks/calibration.py                       # 1,000 studies, a few minutes
    python benchmarks/calibration.py --studies 200 --workers 2

Results are printed and written to ``benchmarks/out/calibration.json`` (plus one CSV row
per study, ``calibration_studies.csv``).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

ALPHA = 0.05
METRIC = "file.recall"
BASELINE, TREATMENT = "baseline", "mcp"
BANDS: tuple[tuple[str, int, int], ...] = (
    ("10-29", 10, 29),
    ("30-79", 30, 79),
    ("80-200", 80, 200),
)
BETA_A = 0.7
LOGIT_MU, LOGIT_SD = -0.5, 1.5
CONT_KAPPA = 4.0
TRIALS_MAX = 5
REWARD_MISSING = 0.03
METRIC_MISSING = 0.05
U_SD, E_SD, A_MCP = 1.0, 0.8, 0.3


def logitnormal_mean(mu: float = LOGIT_MU, sd: float = LOGIT_SD, points: int = 80) -> float:
    """``E[logistic(Z)]`` for ``Z ~ N(mu, sd^2)`` by Gauss–Hermite quadrature."""
    x, w = np.polynomial.hermite_e.hermegauss(points)
    return float((w * (1.0 / (1.0 + np.exp(-(mu + sd * x))))).sum() / w.sum())


POP_MEAN = {"beta": BETA_A / (2 * BETA_A), "logitnormal": logitnormal_mean()}


# --------------------------------------------------------------------------- simulation


@dataclass(frozen=True)
class Study:
    """One simulated null study: its trial table and what is true about it."""

    index: int
    band: str
    n_tasks: int
    reward_type: str  # "binary" or "continuous"
    difficulty: str  # "beta" or "logitnormal"
    true_mean: float  # population mean reward (both configs)
    cond_mean: dict[str, float]  # in-sample target per config: sum m_i p_i / sum m_i
    trials: pd.DataFrame


def simulate(index: int, seed: int) -> Study:
    """The ``index``-th study of the run seeded ``seed`` (independent of worker layout)."""
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))
    band, low, high = BANDS[int(rng.integers(len(BANDS)))]
    n_tasks = int(rng.integers(low, high + 1))
    reward_type = "binary" if rng.random() < 0.5 else "continuous"
    difficulty = "beta" if rng.random() < 0.5 else "logitnormal"
    if difficulty == "beta":
        p = rng.beta(BETA_A, BETA_A, size=n_tasks)
    else:
        p = 1.0 / (1.0 + np.exp(-rng.normal(LOGIT_MU, LOGIT_SD, size=n_tasks)))
    u = rng.normal(0.0, U_SD, size=n_tasks)  # retrieval task effect, independent of p
    gt_files = rng.integers(1, 6, size=n_tasks)
    parts = []
    cond: dict[str, float] = {}
    for config, shift in ((BASELINE, 0.0), (TREATMENT, A_MCP)):
        m = rng.integers(1, TRIALS_MAX + 1, size=n_tasks)
        task = np.repeat(np.arange(n_tasks), m)
        pt = p[task]
        if reward_type == "binary":
            reward = (rng.random(task.size) < pt).astype(float)
        else:
            q = np.clip(pt, 0.01, 0.99)
            reward = rng.beta(CONT_KAPPA * q, CONT_KAPPA * (1.0 - q))
        passed = reward >= 0.5
        reward_missing = rng.random(task.size) < REWARD_MISSING
        reward[reward_missing] = np.nan
        latent = shift + u[task] + rng.normal(0.0, E_SD, size=task.size)
        g = gt_files[task]
        recall = np.round(g / (1.0 + np.exp(-latent))) / g
        recall[rng.random(task.size) < METRIC_MISSING] = np.nan
        ok = ~reward_missing
        cond[config] = float((pt[ok]).mean()) if ok.any() else math.nan
        parts.append(
            pd.DataFrame(
                {
                    "run_id": f"run-{config}",
                    "model": "model-x",
                    "config_name": config,
                    "config_family": config,
                    "task_name": [f"task-{i:03d}" for i in task],
                    "trial_id": [f"{config}-{i:03d}-{k}" for k, i in enumerate(task)],
                    "trial_name": [f"{config}-{i:03d}-{k}" for k, i in enumerate(task)],
                    "reward": reward,
                    "passed": pd.array(
                        np.where(reward_missing, None, passed).tolist(), dtype="boolean"
                    ),
                    METRIC: recall,
                }
            )
        )
    trials = pd.concat(parts, ignore_index=True)
    return Study(index, band, n_tasks, reward_type, difficulty, POP_MEAN[difficulty], cond, trials)


# --------------------------------------------------------------------------- estimates


@dataclass(frozen=True)
class Interval:
    """A 95% interval (NaN bounds: not given) and the reason when not given."""

    low: float
    high: float
    reason: str | None = None

    def covers(self, value: float) -> float:
        """1.0 / 0.0, or NaN when no interval was given."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return math.nan
        return float(self.low <= value <= self.high)


@dataclass(frozen=True)
class Test:
    """A p-value (NaN: test not run) and the reason when not run."""

    p: float
    reason: str | None = None

    def rejects(self, alpha: float = ALPHA) -> float:
        """1.0 / 0.0; a test that was not run does not reject (counted apart)."""
        return float(math.isfinite(self.p) and self.p < alpha)

    @property
    def run(self) -> bool:
        return math.isfinite(self.p)


def _f(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out if math.isfinite(out) else math.nan


# ---- library adapters: the only code that knows today's columns ----------------------


def lib_leaderboard_ci(trials: pd.DataFrame, n_boot: int) -> dict[str, Interval]:
    """Leaderboard 95% CI of the mean reward, per config (study.analysis.leaderboard)."""
    from retrieval_lib.study.analysis import leaderboard

    board = leaderboard(trials, alpha=ALPHA, n_boot=n_boot, seed=0)
    return {
        str(row["config_family"]): Interval(_f(row["reward_ci_low"]), _f(row["reward_ci_high"]))
        for row in board.to_dict("records")
    }


def _study_frame(trials: pd.DataFrame) -> pd.DataFrame:
    """The table the study hands to the stats functions (``Study._frame``): families as
    ``config_name``."""
    return trials.rename(columns={"config_name": "config_raw"}).rename(
        columns={"config_family": "config_name"}
    )


def _lib_matched_reward_row_full(trials: pd.DataFrame, n_boot: int) -> dict[str, Any]:
    """The ``reward`` row of the matched comparison, exactly as analyze_impact computes it:
    ``match_tasks`` (combine="mean", outcomes + metric family) then ``compare_matched``.

    ``match_tasks`` costs ~3 ms per task (pandas per task), most of the benchmark's time;
    :func:`_lib_matched_reward_row` gives the same row faster and ``--check-matching``
    proves it on the first studies.
    """
    from retrieval_lib.stats.columns import OUTCOME_COLUMNS
    from retrieval_lib.stats.paired import match_tasks
    from retrieval_lib.stats.paired_tests import compare_matched

    frame = _study_frame(trials)
    outcomes = [c for c in OUTCOME_COLUMNS if c in frame.columns]
    match = match_tasks(
        frame, BASELINE, TREATMENT, combine="mean", value_columns=[*outcomes, METRIC]
    )
    table = compare_matched(match, n_boot=n_boot, seed=0, min_n=3)
    row: dict[str, Any] = table.set_index("metric").loc["reward"].to_dict()
    return row


def _lib_matched_reward_row(trials: pd.DataFrame, n_boot: int) -> dict[str, Any]:
    """The same ``reward`` row through the same statistics kernel
    (:func:`~retrieval_lib.stats.paired_tests.paired_comparison`, which ``compare_matched``
    calls per metric with the same ``n_boot``, ``seed`` and ``min_n``), on the per-task
    means ``match_tasks`` forms: tasks run by both configs (one model, no harness
    versions here) with at least one valid reward per side, the mean of the valid
    rewards per side, tasks in ``match_tasks``'s order (sorted by task name)."""
    from retrieval_lib.stats.paired_tests import paired_comparison

    reward = pd.to_numeric(trials["reward"], errors="coerce")
    means = reward.groupby([trials["task_name"], trials["config_family"]], sort=True).mean()
    table = means.unstack("config_family").dropna()  # both sides have a valid reward
    table = table.sort_index(kind="mergesort")
    out = paired_comparison(
        table[BASELINE].to_numpy(),
        table[TREATMENT].to_numpy(),
        n_boot=n_boot,
        seed=0,
        min_n=3,
        metric="reward",
    )
    row: dict[str, Any] = out.iloc[0].to_dict()
    return row


def lib_matched_reward(
    trials: pd.DataFrame, n_boot: int, *, full: bool = False
) -> tuple[Test, Interval]:
    """Matched reward test (Wilcoxon p) and 95% CI of the mean per-task delta."""
    row = (_lib_matched_reward_row_full if full else _lib_matched_reward_row)(trials, n_boot)
    tested = bool(row.get("tested", row["computable"]))
    reason = None if tested else str(row["reason"])
    p = _f(row["wilcoxon_p"]) if tested else math.nan
    if tested and not math.isfinite(p):
        reason = str(row["reason"])
    test = Test(p, reason)
    ci = (
        Interval(_f(row["ci_low"]), _f(row["ci_high"]))
        if tested
        else Interval(math.nan, math.nan, reason)
    )
    return test, ci


def check_matching(index: int, seed: int, n_boot: int) -> str | None:
    """Compare the fast matched row with the full match_tasks path; the difference or None."""
    trials = simulate(index, seed).trials
    full = _lib_matched_reward_row_full(trials, n_boot)
    fast = _lib_matched_reward_row(trials, n_boot)
    for key in ("n", "mean_delta", "ci_low", "ci_high", "wilcoxon_p", "computable"):
        a, b = full[key], fast[key]
        same = (
            a == b
            or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
            or (isinstance(a, float) and isinstance(b, float) and abs(a - b) <= 1e-12)
        )
        if not same:
            return f"study {index}: {key} full={a!r} fast={b!r}"
    return None


def lib_pooled_correlation(trials: pd.DataFrame) -> Test:
    """Pooled Spearman file.recall × reward p-value, as the study computes its correlations."""
    from retrieval_lib.stats.clustered import correlate_by_task
    from retrieval_lib.stats.correlation import POOLED_GROUP

    # the report's path (stats.impact.analyze_impact): one value per task, permutation p
    table = correlate_by_task(_study_frame(trials), [METRIC], min_n=5, seed=0)
    pick = table[
        (table["group"] == POOLED_GROUP)
        & (table["x"] == METRIC)
        & (table["y"] == "reward")
        & (table["method"] == "spearman")
    ]
    if pick.empty:
        return Test(math.nan, "no pooled spearman row")
    row = pick.iloc[0]
    if not bool(row["computable"]):
        return Test(math.nan, str(row["reason"]))
    return Test(_f(row["p_value"]), None if math.isfinite(_f(row["p_value"])) else "p is NaN")


# ---- references: task-level methods written here -------------------------------------


def _task_means(trials: pd.DataFrame, column: str, by: list[str]) -> pd.Series:
    values = pd.to_numeric(trials[column], errors="coerce")
    return values.groupby([trials[c] for c in by], sort=True).mean().dropna()


def _t_interval(values: np.ndarray) -> Interval:
    from scipy import stats

    n = values.size
    if n < 2:
        return Interval(math.nan, math.nan, f"n={n}")
    sd = float(values.std(ddof=1))
    if sd == 0.0:
        return Interval(math.nan, math.nan, "zero variance")
    half = float(stats.t.ppf(1 - ALPHA / 2, n - 1)) * sd / math.sqrt(n)
    mean = float(values.mean())
    return Interval(mean - half, mean + half)


def ref_leaderboard_t(trials: pd.DataFrame) -> dict[str, Interval]:
    """Per config: t interval over the per-task mean rewards (tasks weighted equally)."""
    out = {}
    for config, sub in trials.groupby("config_family", sort=True):
        out[str(config)] = _t_interval(_task_means(sub, "reward", ["task_name"]).to_numpy())
    return out


def ref_leaderboard_cluster_boot(
    trials: pd.DataFrame, n_boot: int, seed: int = 0
) -> dict[str, Interval]:
    """Per config: percentile cluster bootstrap of the trial-weighted mean reward
    (resampling tasks with all their trials; the leaderboard's own estimator)."""
    out = {}
    for config, sub in trials.groupby("config_family", sort=True):
        reward = pd.to_numeric(sub["reward"], errors="coerce")
        ok = reward.notna()
        grouped = reward[ok].groupby(sub.loc[ok, "task_name"], sort=True)
        sums, counts = grouped.sum().to_numpy(), grouped.count().to_numpy()
        n = sums.size
        if n < 2:
            out[str(config)] = Interval(math.nan, math.nan, f"n={n} tasks")
            continue
        rng = np.random.Generator(np.random.PCG64(seed))
        idx = rng.integers(0, n, size=(n_boot, n))
        means = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
        low, high = np.quantile(means, [ALPHA / 2, 1 - ALPHA / 2])
        out[str(config)] = Interval(float(low), float(high))
    return out


def ref_matched(trials: pd.DataFrame) -> tuple[Test, Interval]:
    """Paired t-test and t interval on the per-task deltas of mean reward."""
    from scipy import stats

    means = _task_means(trials, "reward", ["task_name", "config_family"]).unstack()
    deltas = (means[TREATMENT] - means[BASELINE]).dropna().to_numpy()
    ci = _t_interval(deltas)
    if deltas.size < 2 or float(deltas.std(ddof=1)) == 0.0:
        return Test(math.nan, ci.reason), ci
    return Test(float(stats.ttest_1samp(deltas, 0.0).pvalue)), ci


def ref_correlation(trials: pd.DataFrame) -> Test:
    """Spearman of per-task mean file.recall and per-task mean reward (pooled configs)."""
    from scipy import stats

    x = _task_means(trials, METRIC, ["task_name"])
    y = _task_means(trials, "reward", ["task_name"])
    both = pd.concat([x, y], axis=1, join="inner").to_numpy()
    if both.shape[0] < 5 or np.ptp(both[:, 0]) == 0 or np.ptp(both[:, 1]) == 0:
        return Test(math.nan, "fewer than 5 tasks or constant")
    return Test(float(stats.spearmanr(both[:, 0], both[:, 1]).pvalue))


# --------------------------------------------------------------------------- one study


def _guard(errors: dict[str, str], name: str, call: Callable[[], Any], empty: Any) -> Any:
    try:
        return call()
    except Exception as exc:  # a crash is a finding: counted and reported, not fatal
        errors[name] = f"{type(exc).__name__}: {exc}"
        return empty


def run_study(args: tuple[int, int, int, bool]) -> dict[str, Any]:
    """Every estimate of one study, as one flat record."""
    index, seed, n_boot, full = args
    study = simulate(index, seed)
    t = study.trials
    errors: dict[str, str] = {}
    nan_i = Interval(math.nan, math.nan, "error")
    lib_board = _guard(errors, "lib_leaderboard", lambda: lib_leaderboard_ci(t, n_boot), {})
    lib_test, lib_ci = _guard(
        errors,
        "lib_matched",
        lambda: lib_matched_reward(t, n_boot, full=full),
        (Test(math.nan), nan_i),
    )
    lib_corr = _guard(errors, "lib_correlation", lambda: lib_pooled_correlation(t), Test(math.nan))
    ref_t = ref_leaderboard_t(t)
    ref_cb = ref_leaderboard_cluster_boot(t, n_boot)
    ref_test, ref_ci = ref_matched(t)
    ref_corr = ref_correlation(t)

    record: dict[str, Any] = {
        "study": index,
        "band": study.band,
        "reward_type": study.reward_type,
        "difficulty": study.difficulty,
        "n_tasks": study.n_tasks,
        "n_trials": len(t),
        "true_mean": study.true_mean,
    }

    def board(prefix: str, intervals: dict[str, Interval]) -> None:
        for config in (BASELINE, TREATMENT):
            ci = intervals.get(config, nan_i)
            record[f"{prefix}_{config}_covers"] = ci.covers(study.true_mean)
            record[f"{prefix}_{config}_covers_cond"] = ci.covers(study.cond_mean[config])
            record[f"{prefix}_{config}_width"] = ci.high - ci.low

    board("lib_board", lib_board)
    board("ref_board_t", ref_t)
    board("ref_board_cboot", ref_cb)
    for prefix, test, ci in (("lib", lib_test, lib_ci), ("ref", ref_test, ref_ci)):
        record[f"{prefix}_matched_reject"] = test.rejects()
        record[f"{prefix}_matched_run"] = test.run
        record[f"{prefix}_matched_reason"] = test.reason
        record[f"{prefix}_delta_covers"] = ci.covers(0.0)
        record[f"{prefix}_delta_width"] = ci.high - ci.low
    for prefix, test in (("lib", lib_corr), ("ref", ref_corr)):
        record[f"{prefix}_corr_reject"] = test.rejects()
        record[f"{prefix}_corr_run"] = test.run
        record[f"{prefix}_corr_reason"] = test.reason
    for name in ("lib_leaderboard", "lib_matched", "lib_correlation"):
        record[f"{name}_error"] = name in errors
    record["errors"] = json.dumps(errors, sort_keys=True) if errors else None
    return record


# --------------------------------------------------------------------------- summary

#: (label, kind, library column(s), reference columns {name: column(s)}, aim)
ESTIMATES: tuple[tuple[str, str, tuple[str, ...], dict[str, tuple[str, ...]]], ...] = (
    (
        "matched reward test: FPR",
        "fpr",
        ("lib_matched_reject",),
        {"paired t on task deltas": ("ref_matched_reject",)},
    ),
    (
        "pooled file.recall x reward Spearman: FPR",
        "fpr",
        ("lib_corr_reject",),
        {"Spearman on task means": ("ref_corr_reject",)},
    ),
    (
        "leaderboard 95% reward CI: coverage of mu",
        "coverage",
        ("lib_board_baseline_covers", "lib_board_mcp_covers"),
        {
            "t on task means": ("ref_board_t_baseline_covers", "ref_board_t_mcp_covers"),
            "cluster bootstrap": (
                "ref_board_cboot_baseline_covers",
                "ref_board_cboot_mcp_covers",
            ),
        },
    ),
    (
        "matched delta 95% CI: coverage of 0",
        "coverage",
        ("lib_delta_covers",),
        {"t on task deltas": ("ref_delta_covers",)},
    ),
)
_RUN_COLUMN = {
    "lib_matched_reject": "lib_matched_run",
    "ref_matched_reject": "ref_matched_run",
    "lib_corr_reject": "lib_corr_run",
    "ref_corr_reject": "ref_corr_run",
}
_ERROR_COLUMN = {
    "lib_matched_reject": "lib_matched_error",
    "lib_delta_covers": "lib_matched_error",
    "lib_corr_reject": "lib_correlation_error",
    "lib_board_baseline_covers": "lib_leaderboard_error",
}


def rate(frame: pd.DataFrame, columns: tuple[str, ...]) -> dict[str, float]:
    """Rate over studies with its Monte Carlo SE, and the share not run.

    Several columns (the two leaderboard rows of a study) are averaged per study first, so
    the SE is over independent studies.
    """
    values = frame[list(columns)].astype(float)
    per_study = values.mean(axis=1, skipna=True)  # NaN only when no column has a value
    if columns[0] in _RUN_COLUMN:
        not_run = 1.0 - float(frame[_RUN_COLUMN[columns[0]]].astype(float).mean())
    else:
        not_run = float(values.isna().to_numpy().mean())
    errored = frame[_ERROR_COLUMN[columns[0]]] if columns[0] in _ERROR_COLUMN else None
    errors = float(errored.astype(float).mean()) if errored is not None else 0.0
    if errored is not None:  # a crashed call is neither a result nor "not run"
        per_study = per_study[~errored.to_numpy(dtype=bool)]
        not_run = max(0.0, not_run - errors)
    valid = per_study.dropna()
    n = int(valid.size)
    mean = float(valid.mean()) if n else math.nan
    se = float(valid.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return {"rate": mean, "se": se, "n": n, "not_run": not_run, "errors": errors}


def summarise(frame: pd.DataFrame) -> list[dict[str, Any]]:
    cells: list[tuple[str, str, pd.DataFrame]] = [("all", "all", frame)]
    for band, _, _ in BANDS:
        cells.append((band, "all", frame[frame["band"] == band]))
    for kind in ("binary", "continuous"):
        cells.append(("all", kind, frame[frame["reward_type"] == kind]))
    for band, _, _ in BANDS:
        for kind in ("binary", "continuous"):
            sub = frame[(frame["band"] == band) & (frame["reward_type"] == kind)]
            cells.append((band, kind, sub))
    rows = []
    for label, kind, lib_cols, refs in ESTIMATES:
        for band, reward_type, sub in cells:
            if sub.empty:
                continue
            row: dict[str, Any] = {
                "estimate": label,
                "kind": kind,
                "band": band,
                "reward_type": reward_type,
                "studies": len(sub),
                "library": rate(sub, lib_cols),
            }
            row["references"] = {name: rate(sub, cols) for name, cols in refs.items()}
            rows.append(row)
    return rows


def _fmt(r: dict[str, float]) -> str:
    notes = []
    if r["not_run"] > 0:
        notes.append(f"not run {r['not_run']:.1%}")
    if r.get("errors", 0.0) > 0:
        notes.append(f"error {r['errors']:.1%}")
    if not math.isfinite(r["rate"]):
        text = "n/a"
    elif math.isfinite(r["se"]):
        text = f"{r['rate']:.3f} ± {r['se']:.3f}"
    else:
        text = f"{r['rate']:.3f}"
    return text + (f" ({'; '.join(notes)})" if notes else "")


def print_table(rows: list[dict[str, Any]]) -> None:
    current = None
    for row in rows:
        if row["estimate"] != current:
            current = row["estimate"]
            names = list(row["references"])
            print()
            print(f"## {current}")
            header = ["band", "reward", "studies", "library", *names]
            print("| " + " | ".join(header) + " |")
            print("|" + "---|" * len(header))
        cells = [
            row["band"],
            row["reward_type"],
            str(row["studies"]),
            _fmt(row["library"]),
            *(_fmt(r) for r in row["references"].values()),
        ]
        print("| " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", type=int, default=1000, help="null studies (default 1000)")
    parser.add_argument("--seed", type=int, default=22, help="simulation seed (default 22)")
    parser.add_argument("--workers", type=int, default=1, help="processes (default 1)")
    parser.add_argument(
        "--n-boot", type=int, default=2000, help="bootstrap resamples (study default 2000)"
    )
    parser.add_argument(
        "--check-matching",
        type=int,
        default=10,
        metavar="K",
        help="first K studies: check the fast matched path against match_tasks (default 10)",
    )
    parser.add_argument(
        "--full-matching",
        action="store_true",
        help="run match_tasks + compare_matched on every study (slow: ~3 ms per task)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args(argv)

    check_started = time.process_time()
    mismatches = [
        m
        for m in (check_matching(i, args.seed, args.n_boot) for i in range(args.check_matching))
        if m is not None
    ]
    check_cpu = time.process_time() - check_started
    for mismatch in mismatches:
        print(f"MATCHING MISMATCH: {mismatch}")

    started = time.perf_counter()
    cpu_started = time.process_time()
    load_start = os.getloadavg()
    jobs = [(i, args.seed, args.n_boot, args.full_matching) for i in range(args.studies)]
    if args.workers > 1:
        with multiprocessing.get_context("fork").Pool(args.workers) as pool:
            records = list(pool.imap(run_study, jobs, chunksize=4))
    else:
        records = [run_study(job) for job in jobs]
    frame = pd.DataFrame(records).sort_values("study", kind="mergesort")
    wall = time.perf_counter() - started
    rows = summarise(frame)

    print(
        f"calibration: {args.studies} null studies, seed {args.seed}, n_boot {args.n_boot}, "
        f"workers {args.workers}; alpha {ALPHA}; wall {wall:.1f} s "
        f"(parent CPU {time.process_time() - cpu_started:.1f} s); load {load_start[0]:.1f}"
    )
    print(
        f"matched path: {'match_tasks + compare_matched' if args.full_matching else 'fast'}; "
        f"checked against match_tasks on {args.check_matching} studies: "
        f"{len(mismatches)} mismatches ({check_cpu:.1f} s CPU)"
    )
    print(
        f"population mean reward mu: beta {POP_MEAN['beta']:.4f}, "
        f"logit-normal {POP_MEAN['logitnormal']:.4f}; rate ± Monte Carlo SE"
    )
    print_table(rows)
    errors = frame["errors"].dropna()
    if not errors.empty:
        print(f"\nlibrary errors in {errors.size} studies; first: {errors.iloc[0]}")
    reasons = {}
    for column in (
        "lib_matched_reason",
        "lib_corr_reason",
        "ref_matched_reason",
        "ref_corr_reason",
    ):
        counts = frame[column].dropna().value_counts()
        if not counts.empty:
            reasons[column] = {str(k): int(v) for k, v in counts.items()}
    if reasons:
        print("\nnot run, by reason:")
        for column, counts in reasons.items():
            for reason, count in counts.items():
                print(f"  {column}: {count} x {reason}")

    args.out.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "calibration",
        "studies": args.studies,
        "seed": args.seed,
        "n_boot": args.n_boot,
        "workers": args.workers,
        "alpha": ALPHA,
        "population_mean": POP_MEAN,
        "wall_seconds": wall,
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_start": list(load_start),
            "load_average_at_end": list(os.getloadavg()),
        },
        "matching_checked": args.check_matching,
        "matching_mismatches": mismatches,
        "full_matching": args.full_matching,
        "not_run_reasons": reasons,
        "errors": int(errors.size),
        "rows": rows,
    }
    target = args.out / "calibration.json"
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2, sort_keys=True, default=str) + "\n")
    tmp.replace(target)
    csv = args.out / "calibration_studies.csv"
    tmp = csv.with_suffix(".csv.tmp")
    frame.to_csv(tmp, index=False)
    tmp.replace(csv)
    print(f"\nwritten: {target}, {csv}")
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())

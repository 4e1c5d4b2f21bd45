"""The task as the unit: per-task aggregation and the cluster bootstrap, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.clustered import (
    aggregate_by_task,
    cluster_bootstrap_mean,
    n_text,
    task_keys,
)
from retrieval_lib.stats.paired import match_tasks


def _loop_cluster_bootstrap(values, tasks, *, n_boot, seed, alpha):
    """A hand-written resampler: one task at a time, every trial of a drawn task kept."""
    by_task: dict[str, list[float]] = {}
    for value, task in zip(values, tasks, strict=True):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        by_task.setdefault(str(task), []).append(float(value))
    names = sorted(by_task)
    k = len(names)
    rng = np.random.default_rng(seed)
    means = []
    for _ in range(n_boot):
        u = rng.random(k)  # the documented draws: row b of rng.random((n_boot, k))
        total, count = 0.0, 0
        for i in range(k):
            drawn = by_task[names[int(u[i] * k)]]
            for value in drawn:
                total += value
                count += 1
        means.append(total / count)
    means.sort()

    def quantile(q):  # linear interpolation (numpy's default, type 7)
        h = (n_boot - 1) * q
        lo = math.floor(h)
        hi = min(lo + 1, n_boot - 1)
        return means[lo] + (h - lo) * (means[hi] - means[lo])

    return quantile(alpha / 2), quantile(1 - alpha / 2)


def test_cluster_bootstrap_matches_a_hand_written_resampler():
    rng = np.random.default_rng(11)
    tasks, values = [], []
    for t in range(23):  # unequal clusters: 1-5 trials per task, a task-level difficulty
        p = rng.beta(0.7, 0.7)
        for _ in range(int(rng.integers(1, 6))):
            tasks.append(f"task-{t:02d}")
            values.append(float(rng.random() < p))
    values[3] = math.nan  # a trial without a value is left out, its task stays
    ours = cluster_bootstrap_mean(values, tasks, n_boot=3000, seed=5, alpha=0.1)
    low, high = _loop_cluster_bootstrap(values, tasks, n_boot=3000, seed=5, alpha=0.1)
    assert ours.ci_low == pytest.approx(low, abs=1e-12)
    assert ours.ci_high == pytest.approx(high, abs=1e-12)
    finite = [v for v in values if not math.isnan(v)]
    assert ours.mean == pytest.approx(sum(finite) / len(finite))
    assert (ours.n_tasks, ours.n_trials) == (23, len(finite))


def test_equal_clusters_match_the_hand_written_resampler_too():
    tasks = [t for t in "abcdefg" for _ in range(3)]
    values = [float((i * 7) % 5) / 4 for i in range(len(tasks))]
    ours = cluster_bootstrap_mean(values, tasks, n_boot=2000, seed=2)
    low, high = _loop_cluster_bootstrap(values, tasks, n_boot=2000, seed=2, alpha=0.05)
    assert (ours.ci_low, ours.ci_high) == pytest.approx((low, high), abs=1e-12)


def test_copying_every_trial_leaves_the_cluster_ci_and_narrows_a_trial_bootstrap():
    """Pseudo-replication: four copies of every trial halve a trial-level CI (1/sqrt(4));
    the cluster bootstrap resamples tasks, whose means the copies do not change."""
    from retrieval_lib.stats.intervals import bootstrap_mean_ci

    rng = np.random.default_rng(3)
    tasks = [f"t{i}" for i in range(30) for _ in range(2)]
    values = [float(v) for v in rng.random(len(tasks))]
    once = cluster_bootstrap_mean(values, tasks, n_boot=4000, seed=1)
    four = cluster_bootstrap_mean(values * 4, tasks * 4, n_boot=4000, seed=1)
    assert (four.n_tasks, four.n_trials) == (30, 240)
    assert four.mean == pytest.approx(once.mean)
    assert (four.ci_low, four.ci_high) == pytest.approx((once.ci_low, once.ci_high), abs=1e-12)
    trial_once = bootstrap_mean_ci(values, n_boot=4000, seed=1)
    trial_four = bootstrap_mean_ci(values * 4, n_boot=4000, seed=1)
    ratio = (trial_four[1] - trial_four[0]) / (trial_once[1] - trial_once[0])
    assert ratio == pytest.approx(0.5, abs=0.08)


def test_cluster_bootstrap_is_seeded_and_handles_edge_cases():
    values, tasks = [0.0, 1.0, 1.0, 0.5], ["a", "a", "b", "c"]
    assert cluster_bootstrap_mean(values, tasks, seed=4) == cluster_bootstrap_mean(
        values, tasks, seed=4
    )
    none = cluster_bootstrap_mean([None, math.nan], ["a", "b"])
    assert none.n_tasks == 0 and math.isnan(none.mean) and none.reason == "no computable value"
    one = cluster_bootstrap_mean([0.0, 1.0, None], ["a", "a", "b"])
    assert (one.n_tasks, one.n_trials, one.mean) == (1, 2, 0.5)
    assert math.isnan(one.ci_low) and "single task" in one.reason
    same = cluster_bootstrap_mean([1.0, 1.0, 1.0], ["a", "b", "c"])
    assert (same.ci_low, same.ci_high) == (1.0, 1.0)
    passed = cluster_bootstrap_mean(pd.Series([True, False, None], dtype=object), ["a", "b", "b"])
    assert (passed.n_trials, passed.mean) == (2, 0.5)
    with pytest.raises(StatisticsError, match="one entry per trial"):
        cluster_bootstrap_mean([1.0], ["a", "b"])
    with pytest.raises(StatisticsError, match="n_boot"):
        cluster_bootstrap_mean([1.0, 2.0], ["a", "b"], n_boot=0)
    with pytest.raises(StatisticsError, match="alpha"):
        cluster_bootstrap_mean([1.0, 2.0], ["a", "b"], alpha=1.0)


def test_aggregation_by_hand_on_a_small_table():
    trials = pd.DataFrame(
        {
            "config_name": ["b", "b", "b", "t", "t", "t", "t"],
            "model": ["m", "m", "m", "m", "m", None, None],
            "task_name": ["x", "x", "y", "x", "x", "x", "y"],
            "reward": [1.0, 0.0, 0.5, 1.0, None, 0.25, 0.75],
            "passed": [True, False, None, True, True, False, True],
        }
    )
    out = aggregate_by_task(trials, ["reward", "passed"], by=["config_name", "model"])
    rows = out.to_dict("records")
    # sorted by config, model (missing last), task; means over the trials with a value
    expected = [
        ("b", "m", "x", 2, 0.5, 2, 0.5, 2),
        ("b", "m", "y", 1, 0.5, 1, math.nan, 0),
        ("t", "m", "x", 2, 1.0, 1, 1.0, 2),
        ("t", None, "x", 1, 0.25, 1, 0.0, 1),
        ("t", None, "y", 1, 0.75, 1, 1.0, 1),
    ]
    assert len(rows) == len(expected)
    for row, (config, model, task, n, reward, n_reward, passed, n_passed) in zip(
        rows, expected, strict=True
    ):
        assert (row["config_name"], row["model"], row["task_name"]) == (config, model, task)
        assert row["n_trials"] == n
        assert row["reward"] == pytest.approx(reward)
        assert row["reward:n_trials"] == n_reward
        assert row["passed"] == pytest.approx(passed, nan_ok=True)
        assert row["passed:n_trials"] == n_passed


def test_the_task_key_is_the_matched_comparisons_task():
    trials = pd.DataFrame(
        {
            "config_name": ["b", "b", "t", "t"],
            "task_name": ["alpha-001", "alpha-001", "alpha-001", 7],
            "model": ["m"] * 4,
            "reward": [0.0, 1.0, 1.0, 0.5],
        }
    )
    match = match_tasks(trials[trials["task_name"] != 7], "b", "t")
    out = aggregate_by_task(trials, ["reward"], by=["config_name"])
    assert set(match.keys["task_name"]) <= set(out["task_name"])
    assert task_keys(trials).tolist() == ["alpha-001", "alpha-001", "alpha-001", "7"]
    side = out[(out["config_name"] == "b") & (out["task_name"] == "alpha-001")].iloc[0]
    assert side["reward"] == match.baseline_values["reward"].iloc[0] == 0.5
    assert int(side["n_trials"]) == int(match.keys["n_trials_baseline"].iloc[0]) == 2


def test_aggregation_refuses_missing_columns_and_keeps_empty_tables_typed():
    with pytest.raises(StatisticsError, match="no column"):
        aggregate_by_task(pd.DataFrame({"task_name": ["a"]}), ["reward"])
    empty = aggregate_by_task(pd.DataFrame({"task_name": [], "reward": []}), ["reward"])
    assert list(empty.columns) == ["task_name", "n_trials", "reward", "reward:n_trials"]


def test_n_text_says_tasks_and_trials():
    assert n_text(40, 209) == "40 tasks, 209 trials"
    assert n_text(1, 2) == "1 task, 2 trials"


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_joint_intervals_equal_one_call_per_column(seed):
    """cluster_bootstrap_means / task_mean_cis / bootstrap_mean_cis share a draw between
    columns missing on the same trials; every result must equal its own call exactly."""
    from retrieval_lib.stats.clustered import (
        cluster_bootstrap_means,
        task_mean_ci,
        task_mean_cis,
    )
    from retrieval_lib.stats.intervals import bootstrap_mean_ci, bootstrap_mean_cis

    rng = np.random.default_rng(seed)
    n = 300
    tasks = pd.Series([f"t{i}" for i in rng.integers(0, 90 if seed else 1, size=n)])
    a = rng.random(n)
    a[rng.random(n) < 0.1] = np.nan
    b = np.where(np.isnan(a), np.nan, (rng.random(n) < 0.5).astype(float))  # a's gaps
    c = rng.random(n)  # other gaps
    c[rng.random(n) < 0.2] = np.nan
    empty = np.full(n, np.nan)
    columns = [pd.Series(x) for x in (a, b, c, empty)]
    for joint, single in (
        (cluster_bootstrap_means, cluster_bootstrap_mean),
        (task_mean_cis, task_mean_ci),
    ):
        got = joint(columns, tasks, n_boot=400, seed=seed, alpha=0.1)
        want = [single(x, tasks, n_boot=400, seed=seed, alpha=0.1) for x in columns]
        assert got == want
    plain = [rng.random(50), rng.random(50)]
    assert bootstrap_mean_cis(plain, n_boot=700, seed=seed) == [
        bootstrap_mean_ci(x, n_boot=700, seed=seed) for x in plain
    ]

"""Study tables on small hand-made frames (values worked out by hand or by numpy)."""

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.events.study_rows import _group_deltas, short_tool_name
from retrieval_lib.report.display import ci_text, readable
from retrieval_lib.stats.means import mean_ci
from retrieval_lib.study.analysis import (
    FLAG_RULES,
    fit_lines,
    flag_table,
    leaderboard,
    matched_overview,
    timeline_tasks,
    with_flags,
)


def _trials(**columns):
    n = len(next(iter(columns.values())))
    base = {
        "trial_id": [f"t{i}" for i in range(n)],
        "run_id": ["r"] * n,
        "config_family": ["b"] * n,
        "config_name": ["b"] * n,
        "task_name": [f"task-{i}" for i in range(n)],
        "model": ["m"] * n,
        "trace_source": ["trajectory"] * n,
        "transcript_truncated": [False] * n,
        "has_ground_truth": [True] * n,
        "ground_truth_confidence": ["high"] * n,
        "output_tokens_placeholder": [False] * n,
    }
    base.update(columns)
    return pd.DataFrame(base)


def test_every_flag_names_its_rule():
    trials = _trials(
        trace_source=[None, "transcript", "merged", "trajectory", "trajectory", "trajectory"],
        transcript_truncated=[False, True, False, False, False, False],
        has_ground_truth=[True, True, False, True, True, True],
        ground_truth_confidence=["high", "high", None, "low", "high", "high"],
        output_tokens_placeholder=[False, False, False, False, True, False],
    )
    table = flag_table(trials)
    assert table[["trial_id", "flag"]].values.tolist() == [
        ["t0", "no_trace"],
        ["t1", "truncated_trace"],
        ["t2", "no_ground_truth"],
        ["t3", "low_confidence_ground_truth"],
        ["t4", "placeholder_tokens"],
    ]
    assert table["rule"].tolist() == [FLAG_RULES[f] for f in table["flag"]]
    flagged = with_flags(trials)
    assert flagged["confidence_flagged"].tolist() == [True] * 5 + [False]
    assert flagged["flags"].iloc[5] is None


def test_leaderboard_leaves_missing_rewards_out_and_says_n():
    trials = _trials(
        reward=[1.0, 0.0, None, 0.5],
        passed=[True, False, None, False],
        total_tokens=[100.0, None, 300.0, 200.0],
        cost_usd=[None, None, None, None],
        agent_execution_seconds=[10.0, 20.0, 30.0, 40.0],
    )
    row = leaderboard(trials, n_boot=400, seed=3).iloc[0]
    assert (row["trials"], row["reward_n"], row["pass_n"]) == (4, 3, 3)
    assert row["reward_mean"] == pytest.approx(0.5)
    assert row["pass_mean"] == pytest.approx(1 / 3)
    expected = mean_ci([1.0, 0.0, 0.5], n_boot=400, seed=3)
    assert (row["reward_ci_low"], row["reward_ci_high"]) == (expected.ci_low, expected.ci_high)
    assert (row["tokens_n"], row["tokens_mean"]) == (3, 200.0)
    assert row["cost_usd_n"] == 0 and math.isnan(row["cost_usd_mean"])


def test_fit_lines_agree_with_numpy_polyfit():
    rng = np.random.default_rng(7)
    x = rng.normal(size=40)
    y = 2.5 * x - 1.0 + rng.normal(scale=0.3, size=40)
    x[3] = np.nan  # left out pairwise
    table = pd.DataFrame({"a": x, "b": y, "c": np.ones(40)})
    fits = fit_lines(table, pd.DataFrame({"x": ["a", "c"], "y": ["b", "b"]}))
    ok = np.isfinite(x)
    slope, intercept = np.polyfit(x[ok], y[ok], 1)
    assert fits.loc[0, "n"] == 39
    assert fits.loc[0, "slope"] == pytest.approx(slope, rel=1e-12)
    assert fits.loc[0, "intercept"] == pytest.approx(intercept, rel=1e-12)
    assert math.isnan(fits.loc[1, "slope"]) and fits.loc[1, "reason"] == "c is constant"


def test_matched_overview_describes_what_cannot_be_tested():
    comparisons = pd.DataFrame(
        {
            "baseline": ["b", "b"],
            "treatment": ["t", "t"],
            "metric": ["reward", "cost_usd"],
            "computable": [False, False],
            "reason": ["n=2 matched pairs is below the minimum of 3"] * 2,
            "ci_low": [math.nan] * 2,
            "ci_high": [math.nan] * 2,
            "wilcoxon_p": [math.nan] * 2,
            "wilcoxon_p_holm": [math.nan] * 2,
            "rank_biserial": [math.nan] * 2,
        }
    )
    per_task = pd.DataFrame(
        {
            "baseline": ["b", "b"],
            "treatment": ["t", "t"],
            "task_name": ["x", "y"],
            "delta:reward": [0.5, -0.25],
            "delta:cost_usd": [math.nan, math.nan],
        }
    )
    table = matched_overview(comparisons, per_task, ["reward", "cost_usd"]).set_index("metric")
    reward = table.loc["reward"]
    assert (reward["n"], bool(reward["tested"])) == (2, False)
    assert reward["mean_delta"] == pytest.approx(0.125)
    assert (reward["min_delta"], reward["max_delta"]) == (-0.25, 0.5)
    assert (reward["wins"], reward["losses"], reward["ties"]) == (1, 1, 0)
    assert reward["reason"] == "no test: n=2 matched pairs is below the minimum of 3"
    cost = table.loc["cost_usd"]
    assert cost["n"] == 0 and math.isnan(cost["mean_delta"])
    assert cost["reason"] == "n=2 matched pairs is below the minimum of 3"


def test_timeline_tasks_take_the_requested_ones_in_order():
    per_task = pd.DataFrame({"task_name": ["a", "b", "c"], "delta:reward": [0.1, -0.9, None]})
    assert timeline_tasks(per_task)["task_name"].tolist() == ["b", "a"]
    assert timeline_tasks(per_task, ["c", "a", "zzz"])["task_name"].tolist() == ["c", "a"]


def _same(got, expected):
    return len(got) == len(expected) and all(
        (math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, expected, strict=True)
    )


def test_group_deltas_share_parallel_calls_and_run_to_the_end():
    # calls at 10, 10 (parallel: they share 10 -> 30), 30, unknown, 40; the agent ends at 100
    got = _group_deltas([10.0, 10.0, 30.0, None, 40.0], 100.0)
    assert _same(got, [10.0, 10.0, 10.0, math.nan, 60.0])
    assert _same(_group_deltas([5.0, 7.0], None), [2.0, math.nan])  # no end, no duration
    assert _same(_group_deltas([5.0, 7.0], 6.0), [2.0, math.nan])  # an end before the call


def test_short_tool_names():
    assert short_tool_name("mcp__sourcegraph__sg_nls_search") == "nls_search"
    assert short_tool_name("mcp__sourcegraph__deepsearch") == "deepsearch"
    assert short_tool_name("mcp__other__lookup") == "lookup"
    assert short_tool_name("Bash") == "Bash"


def test_readable_merges_intervals_and_captions_constant_columns():
    frame = pd.DataFrame(
        {
            "baseline": ["b", "b"],
            "metric": ["reward", "passed"],
            "reward_n": [2, 0],
            "reward_mean": [0.5, math.nan],
            "reward_ci_low": [0.0, math.nan],
            "reward_ci_high": [1.0, math.nan],
        }
    )
    shown, caption = readable(frame, constant=["baseline", "absent"], level="90% CI", digits=2)
    assert caption == "baseline: b"
    assert list(shown.columns) == ["metric", "reward [90% CI]"]
    assert shown["reward [90% CI]"].tolist() == ["0.50 [0.00, 1.00] (n=2)", "n=0"]
    assert ci_text(0.25, math.nan, 0.5) == "0.250"
    # a mean with an n but no interval: "mean (n=...)" under the plain name
    tokens = pd.DataFrame({"tokens_n": [3], "tokens_mean": [378816.3]})
    assert readable(tokens)[0].to_dict("list") == {"tokens": ["378,816 (n=3)"]}


def test_readable_shows_n_as_tasks_with_the_trials_beside_it():
    board = pd.DataFrame(
        {
            "reward_n": [40],
            "reward_n_tasks": [40],
            "reward_n_trials": [209],
            "reward_mean": [0.5],
            "reward_ci_low": [0.25],
            "reward_ci_high": [0.75],
        }
    )
    shown, _ = readable(board, digits=2)
    assert shown.to_dict("list") == {
        "reward [95% CI]": ["0.50 [0.25, 0.75] (40 tasks, 209 trials)"]
    }
    quality = pd.DataFrame(
        {"metric": ["x"], "n": [1], "n_tasks": [1], "n_trials": [3], "mean": [0.5]}
    )
    assert readable(quality)[0].to_dict("list") == {
        "metric": ["x"],
        "n": ["1 task, 3 trials"],
        "mean": [0.5],
    }

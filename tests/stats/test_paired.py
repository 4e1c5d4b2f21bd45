"""Config pairing, task matching and paired statistics against scipy, pingouin, statsmodels and hand values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.intervals import bootstrap_mean_ci, t_mean_ci
from retrieval_lib.stats.paired import match_tasks, pair_configs
from retrieval_lib.stats.paired_tests import (
    MCNEMAR_COLUMNS,
    MIN_NONZERO_DELTAS,
    PAIRED_COLUMNS,
    compare_matched,
    mcnemar_exact,
    paired_comparison,
    wilcoxon_signed_rank,
)


def brute_force_wilcoxon_p(deltas):
    """Two-sided exact signed-rank p by listing every sign assignment (itertools, no numpy tricks).

    Zeros dropped, average ranks of |d| for ties; p = share of the 2**n assignments whose
    R+ is at least as far from n(n+1)/4 as the observed one (Fractions: no rounding).
    """
    import itertools
    from fractions import Fraction

    values = [Fraction(str(d)) for d in deltas if d != 0]
    magnitudes = sorted(abs(v) for v in values)
    rank_of = {}
    for m in set(magnitudes):
        positions = [i + 1 for i, x in enumerate(magnitudes) if x == m]
        rank_of[m] = Fraction(sum(positions), len(positions))
    ranks = [rank_of[abs(v)] for v in values]
    n = len(values)
    centre = Fraction(n * (n + 1), 4)
    observed = abs(sum(r for r, v in zip(ranks, values, strict=True) if v > 0) - centre)
    hits = sum(
        abs(sum(r for r, s in zip(ranks, signs, strict=True) if s) - centre) >= observed
        for signs in itertools.product((False, True), repeat=n)
    )
    return hits / 2**n


def pingouin_paired(treatment, baseline, **wilcoxon_kwargs):
    """Adapter over pingouin 0.7.0 (columns W_val, p_val, RBC; eftype 'cohen_dz' is d_z)."""
    import pingouin

    w = pingouin.wilcoxon(
        np.asarray(treatment, float), np.asarray(baseline, float), **wilcoxon_kwargs
    )
    row = w.iloc[0]
    dz = pingouin.compute_effsize(treatment, baseline, paired=True, eftype="cohen_dz")
    return {
        "W": float(row["W_val"]),
        "p": float(row["p_val"]),
        "rbc": float(row["RBC"]),
        "dz": float(dz),
    }


# ----------------------------------------------------------------- pairing


def test_pair_configs_by_name_is_sorted_and_order_independent():
    names = [
        "mcp-remote-direct",
        "baseline-local-direct",
        "other",
        "baseline-local-artifact",
        "sourcegraph_full",
    ]
    expected = [
        ("baseline-local-artifact", "mcp-remote-direct"),
        ("baseline-local-artifact", "sourcegraph_full"),
        ("baseline-local-direct", "mcp-remote-direct"),
        ("baseline-local-direct", "sourcegraph_full"),
    ]
    assert pair_configs(names) == expected
    assert pair_configs(reversed(names)) == expected
    assert pair_configs(set(names)) == expected
    assert pair_configs(["MCP", "Baseline"]) == [("Baseline", "MCP")]


def test_pair_configs_explicit_and_half_explicit():
    names = ["baseline", "mcp", "mcp-2", "x"]
    assert pair_configs(names, baseline="x", treatment="baseline") == [("x", "baseline")]
    assert pair_configs(names, baseline="x") == [("x", "mcp"), ("x", "mcp-2")]
    assert pair_configs(names, treatment="x") == [("baseline", "x")]
    assert pair_configs(["a", "b"]) == []


def test_pair_configs_rejects_unknown_or_identical_configs():
    with pytest.raises(StatisticsError, match="'nope' not found"):
        pair_configs(["baseline", "mcp"], baseline="nope")
    with pytest.raises(StatisticsError, match="same config"):
        pair_configs(["baseline", "mcp"], baseline="mcp", treatment="mcp")


# ----------------------------------------------------------------- matching


def _row(
    config,
    task,
    reward,
    *,
    model="m",
    harness="1.0",
    ap=0.5,
    trial=None,
    errored=False,
    timed_out=False,
    latest=True,
    source="trajectory.final_metrics",
):
    return {
        "config_name": config,
        "task_name": task,
        "trial_name": trial or f"{task}__{config[:1]}",
        "benchmark": "suite",
        "model": model,
        "harness_version": harness,
        "is_latest_trial": latest,
        "reward": reward,
        "passed": None
        if reward is None or (isinstance(reward, float) and math.isnan(reward))
        else reward >= 1.0,
        "errored": errored,
        "timed_out": timed_out,
        "file.AP": ap,
        "tokens_source": source,
    }


@pytest.fixture
def trials():
    nan = float("nan")
    rows = [
        _row("baseline", "a", 1.0, ap=0.2),
        _row("mcp", "a", 1.0, ap=nan, source="transcript.result.modelUsage"),
        # repeated baseline trials of b: valid rewards 1.0 and 0.0 (mean 0.5), one errored trial
        # with no reward, which is flagged and not combined
        _row("baseline", "b", 1.0, trial="b__1", ap=0.4, latest=False),
        _row("baseline", "b", 0.0, trial="b__2", ap=0.6, timed_out=True, latest=True),
        _row("baseline", "b", nan, trial="b__3", ap=nan, errored=True, latest=False),
        _row("mcp", "b", 1.0, ap=0.9),
        _row("baseline", "c", 1.0),  # only baseline
        _row("baseline", "d", 1.0, model="m"),
        _row("mcp", "d", 1.0, model="other-model"),
        _row("baseline", "e", 1.0, harness="1.0"),
        _row("mcp", "e", 1.0, harness="2.0"),
        _row("baseline", "f", 1.0),
        _row("mcp", "f", nan),  # treatment without a valid reward
        _row("baseline", "g", 0.0, model=None, harness=None, ap=0.1),
        _row("mcp", "g", 1.0, model=None, harness=None, ap=0.3),
    ]
    return pd.DataFrame(rows)


def test_match_tasks_matches_reports_and_flags(trials):
    m = match_tasks(trials, "baseline", "mcp")
    assert m.keys["task_name"].tolist() == ["a", "b", "g"]
    keys = m.keys.set_index("task_name")
    assert keys.loc["b", "n_trials_baseline"] == 2 and keys.loc["b", "n_trials_treatment"] == 1
    assert keys.loc["b", "trials_without_reward_baseline"] == 1
    assert (
        keys.loc["b", "errored_trials_baseline"] == 1
        and keys.loc["b", "timed_out_trials_baseline"] == 1
    )
    assert keys.loc["b", "flagged"] and not keys.loc["a", "flagged"]
    assert pd.isna(keys.loc["g", "model"]) and pd.isna(keys.loc["g", "harness_version"])
    assert keys.loc["a", "tokens_source_treatment"] == "transcript.result.modelUsage"

    b = m.baseline_values.set_index(m.keys["task_name"])
    t = m.treatment_values.set_index(m.keys["task_name"])
    assert b.loc["b", "reward"] == 0.5 and b.loc["b", "passed"] == 0.5
    assert b.loc["b", "file.AP"] == pytest.approx(0.5)  # mean of 0.4 and 0.6
    assert math.isnan(t.loc["a", "file.AP"])  # missing stays missing

    reasons = {(r.task_name, r.side): r.reason for r in m.unmatched.itertuples()}
    assert reasons[("c", "baseline")] == "not run by treatment config mcp"
    assert reasons[("d", "baseline")].startswith("model differs: m here, other-model")
    assert reasons[("e", "baseline")].startswith("harness version differs: 1.0 here, 2.0")
    assert reasons[("e", "treatment")].startswith("harness version differs: 2.0 here, 1.0")
    assert reasons[("f", "treatment")] == "treatment: no trial with a valid reward (1 trial(s))"
    assert reasons[("f", "baseline")] == reasons[("f", "treatment")]
    assert m.unmatched["task_name"].nunique() == 4


def test_per_task_table_has_both_sides_and_delta(trials):
    per_task = match_tasks(trials, "baseline", "mcp").per_task().set_index("task_name")
    assert per_task.loc["b", "baseline:reward"] == 0.5
    assert per_task.loc["b", "treatment:reward"] == 1.0
    assert per_task.loc["b", "delta:reward"] == 0.5
    assert math.isnan(per_task.loc["a", "delta:file.AP"])
    assert set(per_task["baseline"]) == {"baseline"} and set(per_task["treatment"]) == {"mcp"}


def test_combine_latest_takes_the_flagged_trial(trials):
    m = match_tasks(trials, "baseline", "mcp", combine="latest")
    b = m.baseline_values.set_index(m.keys["task_name"])
    assert b.loc["b", "reward"] == 0.0 and b.loc["b", "file.AP"] == 0.6
    assert m.keys.set_index("task_name").loc["b", "n_trials_baseline"] == 1


def test_match_tasks_rejects_unknown_config_and_rule(trials):
    with pytest.raises(StatisticsError, match="'nope' not in the table"):
        match_tasks(trials, "baseline", "nope")
    with pytest.raises(StatisticsError, match="combine"):
        match_tasks(trials, "baseline", "mcp", combine="median")


def test_missing_metric_drops_the_task_for_that_metric_only(trials):
    m = match_tasks(trials, "baseline", "mcp")
    out = compare_matched(m, n_boot=100).set_index("metric")
    assert out.loc["reward", "n"] == 3
    assert out.loc["file.AP", "n"] == 2 and out.loc["file.AP", "n_dropped"] == 1
    assert not out.loc["file.AP", "computable"] and not out.loc["file.AP", "tested"]
    assert out.loc["file.AP", "reason"] == "n=2 matched pairs is below the minimum of 3"
    assert math.isnan(out.loc["file.AP", "wilcoxon_p"])  # never 0.0 or 1.0
    assert math.isnan(out.loc["file.AP", "ci_low"])
    assert np.isfinite(out.loc["file.AP", "mean_delta"])  # the deltas are still described


# ----------------------------------------------------------------- paired statistics


def test_paired_comparison_hand_values_small():
    # deltas [1, -2, 3, 4]: ranks 1..4, R+ = 8, R- = 2
    row = paired_comparison([0, 2, 0, 0], [1, 0, 3, 4], n_boot=500, min_nonzero=1).iloc[0]
    assert tuple(row.index) == PAIRED_COLUMNS
    assert row["n"] == 4 and (row["wins"], row["losses"], row["ties"]) == (3, 1, 0)
    assert row["mean_delta"] == 1.5 and row["median_delta"] == 2.0
    assert row["rank_biserial"] == pytest.approx(0.6)
    assert row["wilcoxon_statistic"] == 2.0
    assert row["wilcoxon_method"] == "exact"
    assert row["wilcoxon_p"] == pytest.approx(6 / 16)  # 2 * P(W+ <= 2) = 2 * 3/16
    assert row["sign_test_p"] == pytest.approx(10 / 16)  # 2 * (1 + 4) / 16
    assert row["cohen_dz"] == pytest.approx(1.5 / math.sqrt(7))  # sd^2 = 21/3
    assert row["computable"] and row["tested"] and row["reason"] is None
    # with the default minimum of 6 non-zero deltas the same four are not tested
    default = paired_comparison([0, 2, 0, 0], [1, 0, 3, 4]).iloc[0]
    assert not default["tested"] and "non-zero paired deltas: 4 of 4" in default["reason"]


def test_paired_comparison_matches_scipy_and_pingouin_without_ties():
    from scipy import stats

    rng = np.random.default_rng(5)
    base = rng.normal(size=15)
    treat = base + rng.normal(0.4, 1.0, size=15)
    row = paired_comparison(base, treat, n_boot=200).iloc[0]
    ref = pingouin_paired(treat, base)
    assert row["wilcoxon_method"] == "exact"
    assert row["wilcoxon_p"] == pytest.approx(ref["p"], rel=1e-12)
    assert row["wilcoxon_p"] == pytest.approx(
        stats.wilcoxon(treat - base, method="exact").pvalue, rel=1e-12
    )
    assert row["wilcoxon_statistic"] == ref["W"]
    assert row["rank_biserial"] == pytest.approx(ref["rbc"], abs=1e-12)
    assert row["cohen_dz"] == pytest.approx(ref["dz"], rel=1e-12)
    wins = int((treat > base).sum())
    assert row["sign_test_p"] == pytest.approx(stats.binomtest(wins, 15).pvalue)


def test_paired_comparison_with_ties_and_zeros_is_exact_at_small_n():
    # Before the review fix any tie or zero switched to the normal approximation, and
    # this test compared with pingouin's asymptotic p (0.0247 here); the reference is
    # now the exact permutation distribution of the 8 non-zero deltas.
    from scipy import stats

    base = np.array([2, 5, 5, 1, 9, 3, 4, 7, 6, 0], dtype=float)  # exact deltas:
    treat = np.array([4, 5, 7, 3, 9, 6, 2, 10, 8, 1], dtype=float)  # 2,0,2,2,0,3,-2,3,2,1
    row = paired_comparison(base, treat, n_boot=200).iloc[0]
    deltas = treat - base
    nonzero = deltas[deltas != 0]
    assert row["ties"] == 2 and row["wilcoxon_method"] == "exact"
    # |d| ranks: 1 -> 1; five 2s -> 4; two 3s -> 7.5; R- = 4 (the one -2)
    assert row["wilcoxon_statistic"] == 4.0
    assert row["wilcoxon_p"] == pytest.approx(brute_force_wilcoxon_p(nonzero), rel=1e-12)
    assert row["wilcoxon_p"] == pytest.approx(14 / 256, rel=1e-12)  # counted by hand below
    perm = stats.wilcoxon(nonzero, method=stats.PermutationMethod(n_resamples=10_000))
    assert row["wilcoxon_p"] == pytest.approx(perm.pvalue, rel=1e-12)
    ref = pingouin_paired(treat, base, method="asymptotic")
    assert row["rank_biserial"] == pytest.approx(ref["rbc"], abs=1e-12)
    assert row["cohen_dz"] == pytest.approx(ref["dz"], rel=1e-12)


def test_tied_example_p_by_hand():
    # ranks 1, 4, 4, 4, 4, 4, 7.5, 7.5 (sum 36, centre 18), observed R+ = 32, |32 - 18| = 14:
    # R+ >= 32 means R- <= 4: no negative sign (1 way), only the rank 1 (1 way), only one
    # of the five 4s (5 ways); {1, 4} sums to 5. So 7 of 256 per tail, 14 of 256 in all.
    assert brute_force_wilcoxon_p([1, 2, 2, 2, 2, -2, 3, 3]) == pytest.approx(14 / 256)


def test_all_zero_deltas_are_not_tested():
    row = paired_comparison([0.5, 1.0, 0.0, 0.25], [0.5, 1.0, 0.0, 0.25], n_boot=100).iloc[0]
    assert not row["computable"] and not row["tested"]
    assert row["n"] == 4 and row["mean_delta"] == 0.0 and row["ties"] == 4
    for column in ("ci_low", "ci_high", "wilcoxon_p", "sign_test_p", "cohen_dz", "rank_biserial"):
        assert math.isnan(row[column])
    assert row["reason"] == "the 4 paired deltas are constant (all 0): zero variance"


def test_all_equal_nonzero_deltas_are_not_tested():
    from scipy import stats

    deltas = np.ones(8)
    row = paired_comparison(np.zeros(8), deltas, n_boot=100).iloc[0]
    assert not row["tested"] and "constant (all 1): zero variance" in row["reason"]
    assert row["wins"] == 8 and row["mean_delta"] == 1.0 and math.isnan(row["ci_low"])
    # the building block still gives the exact p of five tied deltas
    res = wilcoxon_signed_rank(np.ones(5))
    assert res.method == "exact" and res.p_value == pytest.approx(2 / 32)
    perm = stats.wilcoxon(np.ones(5), method=stats.PermutationMethod(n_resamples=10_000))
    assert res.p_value == pytest.approx(perm.pvalue)


def test_three_tasks_with_one_nonzero_delta_is_not_a_test():
    # issue 22: n = 3, one non-zero delta showed tested, p = 1, rank-biserial -1, CI [min, max]
    row = paired_comparison([1.0, 0.5, 0.0], [1.0, 0.5, -0.5], n_boot=500).iloc[0]
    assert not row["tested"] and not row["computable"]
    assert row["n"] == 3 and row["mean_delta"] == pytest.approx(-0.5 / 3)
    assert (row["wins"], row["losses"], row["ties"]) == (0, 1, 2)
    for column in ("ci_low", "ci_high", "wilcoxon_p", "sign_test_p", "rank_biserial", "cohen_dz"):
        assert math.isnan(row[column])
    assert row["reason"] == (
        "non-zero paired deltas: 1 of 3; a test needs 6 (the fewest at which an "
        "exact two-sided Wilcoxon p can reach 0.05)"
    )


def test_minimum_nonzero_deltas_is_where_an_exact_wilcoxon_can_reach_005():
    from scipy import stats

    # five untied deltas all positive: the smallest two-sided p of n = 5 is 2/32 > 0.05
    assert stats.wilcoxon([1, 2, 3, 4, 5], method="exact").pvalue == pytest.approx(2 / 32)
    assert stats.wilcoxon([1, 2, 3, 4, 5, 6], method="exact").pvalue == pytest.approx(2 / 64)
    assert MIN_NONZERO_DELTAS == 6
    five = paired_comparison(np.zeros(7), [0, 0, 1, 2, 3, 4, 5]).iloc[0]
    six = paired_comparison(np.zeros(7), [0, 1, 2, 3, 4, 5, 6]).iloc[0]
    assert not five["tested"] and six["tested"]
    assert six["wilcoxon_p"] == pytest.approx(2 / 64)


def test_below_minimum_pairs_is_not_computable():
    row = paired_comparison([1.0, np.nan, 0.0], [0.0, 1.0, np.nan], n_boot=100).iloc[0]
    assert row["n"] == 1 and row["n_dropped"] == 2 and not row["computable"]
    assert row["reason"] == "n=1 matched pairs is below the minimum of 3"
    assert row["mean_delta"] == -1.0
    for column in ("ci_low", "wilcoxon_p", "cohen_dz", "sd_delta", "n_needed_0.05"):
        assert math.isnan(row[column])


def test_mean_delta_ci_is_the_t_interval_of_the_per_task_deltas():
    from scipy import stats

    rng = np.random.default_rng(2)
    base, treat = rng.random(20), rng.random(20)
    deltas = treat - base
    row = paired_comparison(base, treat).iloc[0]
    low, high = stats.t.interval(0.95, 19, loc=deltas.mean(), scale=stats.sem(deltas))
    assert row["ci_method"] == "t"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-12)
    assert row["ci_half_width"] == pytest.approx((high - low) / 2, rel=1e-12)
    assert t_mean_ci(deltas) == pytest.approx((low, high), rel=1e-12)


def test_mean_delta_ci_bca_is_scipys_bootstrap_with_the_same_seed():
    from scipy import stats

    rng = np.random.default_rng(4)
    base, treat = rng.random(25), rng.random(25)
    row = paired_comparison(base, treat, ci_method="bca", n_boot=3000, seed=7).iloc[0]
    ref = stats.bootstrap(
        (treat - base,), np.mean, n_resamples=3000, method="BCa", rng=np.random.default_rng(7)
    ).confidence_interval
    assert row["ci_method"] == "bca"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ref.low, ref.high), rel=1e-12)
    with pytest.raises(StatisticsError, match="ci_method"):
        paired_comparison(base, treat, ci_method="normal")


def test_percentile_bootstrap_is_seeded_and_matches_an_independent_resampling():
    rng = np.random.default_rng(2)
    base, treat = rng.random(20), rng.random(20)
    kwargs = {"n_boot": 2000, "ci_method": "percentile"}
    one = paired_comparison(base, treat, seed=42, **kwargs).iloc[0]
    two = paired_comparison(base, treat, seed=42, **kwargs).iloc[0]
    other = paired_comparison(base, treat, seed=43, **kwargs).iloc[0]
    assert (one["ci_low"], one["ci_high"]) == (two["ci_low"], two["ci_high"])
    assert (one["ci_low"], one["ci_high"]) != (other["ci_low"], other["ci_high"])
    assert one["ci_low"] < one["mean_delta"] < one["ci_high"]
    gen = np.random.Generator(np.random.PCG64(42))
    deltas = treat - base
    means = deltas[gen.integers(0, 20, size=(2000, 20))].mean(axis=1)
    assert (one["ci_low"], one["ci_high"]) == tuple(np.quantile(means, [0.025, 0.975]))


def test_matched_row_carries_the_tasks_needed():
    import pingouin

    rng = np.random.default_rng(8)
    base, treat = rng.random(30), rng.random(30)
    row = paired_comparison(base, treat).iloc[0]
    sd = float(np.std(treat - base, ddof=1))
    assert row["sd_delta"] == pytest.approx(sd)
    ref = pingouin.power_ttest(d=0.10 / sd, power=0.8, alpha=0.05, contrast="paired")
    assert row["n_needed_0.10"] == math.ceil(ref)


def test_bad_paired_input_is_an_error():
    with pytest.raises(StatisticsError, match="differ in length"):
        paired_comparison([1, 2, 3], [1, 2])
    with pytest.raises(StatisticsError, match="n_boot"):
        paired_comparison([1, 2, 3], [1, 2, 4], n_boot=0)


def test_compare_matched_holm_over_the_metric_family():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(9)
    rows = []
    for i in range(12):
        for config, shift in (("baseline", 0.0), ("mcp", 0.3)):
            rows.append(
                {
                    "config_name": config,
                    "task_name": f"t{i}",
                    "reward": float(rng.random() + shift > 0.6),
                    "file.AP": rng.random() + shift,
                    "file.RR": rng.random(),
                    "cost_usd": rng.random(),
                }
            )
    m = match_tasks(pd.DataFrame(rows), "baseline", "mcp")
    out = compare_matched(m, n_boot=200)
    assert out["metric"].tolist() == ["reward", "cost_usd", "file.AP", "file.RR"]
    p = out["wilcoxon_p"].to_numpy()
    ok = ~np.isnan(p)
    assert np.allclose(
        out["wilcoxon_p_holm"].to_numpy()[ok], multipletests(p[ok], method="holm")[1]
    )
    # an untested metric has no p and is not part of the family
    assert (np.isnan(p) == ~out["tested"].to_numpy(dtype=bool)).all()


# ----------------------------------------------------------------- McNemar


def test_mcnemar_exact_against_statsmodels():
    from statsmodels.stats.contingency_tables import mcnemar

    base = [1, 1, 1, 1, 1, 0, 0, 0, 1, 0, 1, 1]
    treat = [1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 1]
    row = mcnemar_exact(base, treat).iloc[0]
    assert tuple(row.index) == MCNEMAR_COLUMNS
    assert (row["both_pass"], row["baseline_only"], row["treatment_only"], row["neither"]) == (
        3,
        5,
        1,
        3,
    )
    ref = mcnemar([[3, 5], [1, 3]], exact=True)
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-12)
    assert row["p_value"] == pytest.approx(2 * (1 + 6) / 64)  # 2 * P(X <= 1), X ~ Bin(6, 1/2)


def test_mcnemar_edge_cases():
    same = mcnemar_exact([True, False, True], [True, False, True]).iloc[0]
    assert same["p_value"] == 1.0 and "no discordant" in same["reason"]
    small = mcnemar_exact([1, None], [0, 1]).iloc[0]
    assert small["n"] == 1 and not small["computable"] and math.isnan(small["p_value"])
    with pytest.raises(StatisticsError, match="0/1"):
        mcnemar_exact([0.5, 1, 0], [1, 1, 0])


def test_floating_point_noise_does_not_break_ties():
    base = np.array([0.1, 0.2, 0.3, 0.7, 0.6])
    treat = np.array([0.2, 0.3, 0.4, 0.8, 0.7])  # every delta is 0.1 up to rounding noise
    assert np.unique(treat - base).size > 1
    row = paired_comparison(base, treat, n_boot=100).iloc[0]
    assert (row["wins"], row["losses"], row["ties"]) == (5, 0, 0)
    # equal up to noise: constant deltas, not tested (not five distinct ranks)
    assert not row["tested"] and "constant" in row["reason"]
    res = wilcoxon_signed_rank(treat - base)
    assert res.method == "exact" and res.p_value == pytest.approx(2 / 32)
    noisy_zero = paired_comparison([0.3, 0.5, 0.25], [0.1 + 0.2, 0.5, 0.25], n_boot=100).iloc[0]
    assert noisy_zero["ties"] == 3 and math.isnan(noisy_zero["wilcoxon_p"])


# ----------------------------------------------------------------- exact Wilcoxon


def test_wilcoxon_reviewer_examples_are_exact():
    # binary reward deltas always tie: 5 wins and 1 loss, every |d| ranked 3.5;
    # P(at most one negative sign) = (1 + 6) / 64, doubled
    res = wilcoxon_signed_rank([1, 1, 1, 1, 1, -1])
    assert res == (3.5, pytest.approx(14 / 64), "exact")
    # the zero is dropped; 4 positive deltas: P(all positive) = 1/16, doubled
    res = wilcoxon_signed_rank([0, 1, 2, 3, 4])
    assert (res.statistic, res.p_value, res.method) == (0.0, 0.125, "exact")
    nothing = wilcoxon_signed_rank([0.0, 1e-15, -1e-14])
    assert math.isnan(nothing.statistic) and math.isnan(nothing.p_value)
    assert nothing.method is None


@pytest.mark.parametrize("seed", range(6))
def test_wilcoxon_matches_brute_force_and_scipy_permutation_on_tied_data(seed):
    from scipy import stats

    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    deltas = rng.integers(-3, 4, size=n).astype(float) / 2  # many ties and zeros
    if not deltas.any():
        deltas[0] = 1.0
    res = wilcoxon_signed_rank(deltas)
    assert res.method == "exact"
    assert res.p_value == pytest.approx(brute_force_wilcoxon_p(deltas), rel=1e-12)
    nonzero = deltas[deltas != 0]
    perm = stats.wilcoxon(nonzero, method=stats.PermutationMethod(n_resamples=10_000))
    assert res.p_value == pytest.approx(perm.pvalue, rel=1e-12)
    assert res.statistic == pytest.approx(stats.wilcoxon(nonzero).statistic)


@pytest.mark.parametrize("n", [5, 12, 20, 35])
def test_wilcoxon_without_ties_matches_scipy_exact(n):
    from scipy import stats

    rng = np.random.default_rng(n)
    deltas = rng.normal(0.3, 1.0, size=n)
    res = wilcoxon_signed_rank(deltas)
    ref = stats.wilcoxon(deltas, method="exact")
    assert res.method == "exact"
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    assert res.statistic == ref.statistic


def test_wilcoxon_at_fifty_untied_deltas_is_still_exact():
    # the largest untied sample tested exactly: |d| = 1..50 (no ties), the nine largest
    # and the 11th negative, so R- = (42 + ... + 50) + 11 = 414 + 11 = 425
    from scipy import stats

    negative = {11, *range(42, 51)}
    deltas = np.array([-k if k in negative else k for k in range(1, 51)], dtype=float)
    assert sum(negative) == 425
    res = wilcoxon_signed_rank(deltas)
    exact = stats.wilcoxon(deltas, method="exact").pvalue
    assert res.method == "exact"
    assert res.statistic == 425.0
    assert res.p_value == pytest.approx(exact, rel=1e-12)
    assert res.p_value == pytest.approx(0.03996834652842374, rel=1e-9)
    # the normal approximation would say 0.0407: the boundary is observable
    approx = stats.wilcoxon(deltas, method="asymptotic", correction=True).pvalue
    assert abs(approx - exact) > 5e-4


def test_sign_test_counts_only_the_non_zero_deltas():
    # deltas [1, 1, 1, 0, 0]: three wins, no loss, two ties left out of the sign test;
    # two-sided binomial P(3 of 3 or 0 of 3) = 2 / 8
    row = paired_comparison([0] * 5, [1, 1, 1, 0, 0], n_boot=100, min_nonzero=1).iloc[0]
    assert (row["wins"], row["losses"], row["ties"]) == (3, 0, 2)
    assert row["tested"]
    assert row["sign_test_p"] == 0.25


def test_wilcoxon_large_tied_sample_uses_the_tie_corrected_normal_approximation():
    from scipy import stats

    rng = np.random.default_rng(4)
    deltas = rng.integers(-2, 4, size=30).astype(float)
    nonzero = deltas[deltas != 0]
    assert nonzero.size > 20
    res = wilcoxon_signed_rank(deltas)
    assert res.method == "normal_approx"
    ref = stats.wilcoxon(nonzero, method="asymptotic", correction=True)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-12)
    # by hand: z = (R+ - E - 0.5 sign) / sd with the tie-corrected variance
    ranks = stats.rankdata(np.abs(nonzero))
    m = nonzero.size
    r_plus = ranks[nonzero > 0].sum()
    _, counts = np.unique(np.abs(nonzero), return_counts=True)
    var = m * (m + 1) * (2 * m + 1) / 24 - (counts**3 - counts).sum() / 48
    centre = m * (m + 1) / 4
    z = (abs(r_plus - centre) - 0.5) / math.sqrt(var)
    assert res.p_value == pytest.approx(2 * stats.norm.sf(z), rel=1e-9)
    # the first 20 of them are still exact: check against the null distribution of 2*R+
    # built by convolution (each doubled rank in or out with probability 1/2)
    small = nonzero[:20]
    doubled = [int(round(2 * r)) for r in stats.rankdata(np.abs(small))]
    counts = {0: 1}
    for rank in doubled:
        shifted = {}
        for total, ways in counts.items():
            shifted[total] = shifted.get(total, 0) + ways
            shifted[total + rank] = shifted.get(total + rank, 0) + ways
        counts = shifted
    centre2 = sum(doubled) / 2
    observed = abs(sum(d for d, v in zip(doubled, small, strict=True) if v > 0) - centre2)
    expected = sum(w for t, w in counts.items() if abs(t - centre2) >= observed) / 2**20
    exact = wilcoxon_signed_rank(small)
    assert exact.method == "exact" and exact.p_value == pytest.approx(expected, rel=1e-12)


def test_wilcoxon_refuses_missing_values():
    with pytest.raises(StatisticsError, match="finite"):
        wilcoxon_signed_rank([1.0, float("nan"), 2.0])


# ----------------------------------------------------------------- bootstrap


def test_bootstrap_mean_ci_against_an_independent_resampling_and_scipy():
    from scipy import stats

    values = np.array([0.2, 0.9, 0.4, 0.4, 1.0, 0.0, 0.7])
    low, high = bootstrap_mean_ci(values, n_boot=3000, seed=5, alpha=0.1)
    rng = np.random.default_rng(5)
    means = values[rng.integers(0, 7, size=(3000, 7))].mean(axis=1)
    assert (low, high) == tuple(np.quantile(means, [0.05, 0.95]))
    ref = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=40000,
        confidence_level=0.9,
        method="percentile",
        rng=np.random.default_rng(1),
    ).confidence_interval
    wide = bootstrap_mean_ci(values, n_boot=40000, seed=2, alpha=0.1)
    assert wide == pytest.approx((ref.low, ref.high), abs=0.01)


@pytest.mark.parametrize(
    ("values", "kwargs", "message"),
    [
        ([], {}, "no values"),
        ([1.0, float("nan")], {}, "finite"),
        ([1.0], {"n_boot": 0}, "n_boot"),
        ([1.0], {"alpha": 1.0}, "alpha"),
    ],
)
def test_bootstrap_mean_ci_refuses_bad_input(values, kwargs, message):
    with pytest.raises(StatisticsError, match=message):
        bootstrap_mean_ci(values, **kwargs)


# ----------------------------------------------------------------- latest across runs


def _two_runs(with_started_at):
    rows = []
    for run, stamp, rewards in (
        ("r1", "2026-01-02T00:00:00Z", (0.0, 1.0)),
        ("r2", "2026-01-01T00:00:00Z", (1.0, 0.0)),
    ):
        for config, reward in zip(("baseline", "mcp"), rewards, strict=True):
            for task in ("a", "b", "c"):
                row = {
                    "run_id": run,
                    "config_name": config,
                    "task_name": task,
                    # r2's trial names sort last: a pick by name would take r2
                    "trial_name": f"{task}__{'z' if run == 'r2' else 'a'}",
                    "is_latest_trial": True,
                    "reward": reward,
                }
                if with_started_at:
                    row["started_at"] = stamp
                rows.append(row)
    return pd.DataFrame(rows)


def test_latest_across_pooled_runs_picks_by_started_at():
    m = match_tasks(_two_runs(True), "baseline", "mcp", combine="latest")
    # r1 started later: baseline 0.0, mcp 1.0 on every task
    assert m.baseline_values["reward"].tolist() == [0.0, 0.0, 0.0]
    assert m.treatment_values["reward"].tolist() == [1.0, 1.0, 1.0]


def test_latest_across_pooled_runs_without_started_at_is_refused():
    with pytest.raises(StatisticsError, match="started_at"):
        match_tasks(_two_runs(False), "baseline", "mcp", combine="latest")


# ----------------------------------------------------------------- harness versions

NO_TRACE = "no usable trace"


def _trial(config, task, reward, harness, *, why=None, trial=None):
    row = _row(config, task, reward, harness=harness, trial=trial)
    row["harness_version_unknown_reason"] = why
    return row


@pytest.fixture
def versions():
    """Hand-made pairs: one side without a trace, both without, known versions that differ."""
    return pd.DataFrame(
        [
            # one side without a trace: baseline version unknown, treatment 2.1.62
            _trial("baseline", "one", 0.0, None, why=NO_TRACE),
            _trial("mcp", "one", 1.0, "2.1.62"),
            # both without a trace
            _trial("baseline", "both", 1.0, None, why=NO_TRACE),
            _trial("mcp", "both", 0.5, None, why="trace records no version"),
            # two known versions that differ
            _trial("baseline", "differ", 1.0, "2.1.50"),
            _trial("mcp", "differ", 1.0, "2.1.62"),
            # known and equal
            _trial("baseline", "same", 0.0, "2.1.62"),
            _trial("mcp", "same", 1.0, "2.1.62"),
        ]
    )


def test_unknown_harness_version_pairs_and_is_flagged(versions):
    m = match_tasks(versions, "baseline", "mcp")
    keys = m.keys.set_index("task_name")
    assert sorted(keys.index) == ["both", "one", "same"]
    assert keys["harness_version_unverified"].to_dict() == {
        "both": True,
        "one": True,
        "same": False,
    }
    # the pair of "one" takes the only known version; the note names the side and why
    assert keys.loc["one", "harness_version"] == "2.1.62"
    assert keys.loc["one", "harness_version_note"] == "baseline version unknown (no usable trace)"
    assert pd.isna(keys.loc["both", "harness_version"])
    assert keys.loc["both", "harness_version_note"] == (
        "baseline version unknown (no usable trace); "
        "treatment version unknown (trace records no version)"
    )
    assert pd.isna(keys.loc["same", "harness_version_note"])
    # the values are those of the trials (delta of "one" = 1 - 0)
    per_task = m.per_task().set_index("task_name")
    assert per_task.loc["one", "delta:reward"] == 1.0
    assert per_task.loc["both", "delta:reward"] == -0.5
    assert per_task["harness_version_unverified"].dtype == bool
    assert m.n_unverified == 2 and m.n_matched_strict == 1
    assert m.summary_line() == "3 matched (2 with unverified harness version); strict: 1"


def test_known_versions_that_differ_never_pair(versions):
    m = match_tasks(versions, "baseline", "mcp")
    reasons = {(r.task_name, r.side): r.reason for r in m.unmatched.itertuples()}
    assert reasons == {
        ("differ", "baseline"): "harness version differs: 2.1.50 here, 2.1.62 in treatment "
        "config mcp",
        ("differ", "treatment"): "harness version differs: 2.1.62 here, 2.1.50 in baseline "
        "config baseline",
    }


def test_strict_harness_version_keeps_only_known_equal_versions(versions):
    m = match_tasks(versions, "baseline", "mcp", strict_harness_version=True)
    assert m.keys["task_name"].tolist() == ["same"]
    assert not m.keys["harness_version_unverified"].any()
    lost = m.unmatched.set_index(["task_name", "side"])["reason"]
    assert (
        lost[("one", "baseline")]
        == lost[("one", "treatment")]
        == ("harness version unverified (strict mode): baseline version unknown (no usable trace)")
    )
    assert lost[("both", "treatment")].startswith("harness version unverified (strict mode): ")
    assert lost[("differ", "baseline")].startswith("harness version differs: 2.1.50 here")
    assert m.n_unverified == 2 and m.n_matched == m.n_matched_strict == 1
    assert m.summary_line() == (
        "1 matched (strict harness version; 2 with unverified harness version left out)"
    )


def test_unknown_trials_join_the_one_known_version_of_their_side():
    df = pd.DataFrame(
        [
            _trial("baseline", "x", 1.0, "2.1.62", trial="x__1"),
            _trial("baseline", "x", 0.0, "unknown", why=NO_TRACE, trial="x__2"),
            _trial("mcp", "x", 1.0, "2.1.62"),
        ]
    )
    m = match_tasks(df, "baseline", "mcp")
    row = m.keys.iloc[0]
    assert (row["harness_version"], int(row["n_trials_baseline"])) == ("2.1.62", 2)
    assert m.baseline_values["reward"].tolist() == [0.5]  # mean of both baseline trials
    assert (
        row["harness_version_note"]
        == "baseline: 1 of 2 trials of unknown version (no usable trace)"
    )
    assert m.unmatched.empty


def test_unknown_version_with_several_known_on_the_other_side_is_left_out_with_the_reason():
    df = pd.DataFrame(
        [
            _trial("baseline", "x", 1.0, None, why=NO_TRACE),
            _trial("mcp", "x", 1.0, "2.1.50", trial="x__1"),
            _trial("mcp", "x", 0.0, "2.1.62", trial="x__2"),
        ]
    )
    m = match_tasks(df, "baseline", "mcp")
    assert m.keys.empty and m.n_unverified == 0
    reasons = m.unmatched.set_index(["side", "harness_version"], drop=False)["reason"].tolist()
    assert len(reasons) == 3
    assert all("baseline ran none, treatment ran 2.1.50, 2.1.62" in r for r in reasons)
    assert m.summary_line() == "0 matched (harness version verified for all); strict: 0"


def test_without_a_reason_column_the_note_says_no_version_was_recorded():
    df = pd.DataFrame(
        [_row("baseline", "x", 1.0, harness=None), _row("mcp", "x", 1.0, harness="2.0")]
    )
    note = match_tasks(df, "baseline", "mcp").keys.loc[0, "harness_version_note"]
    assert note == "baseline version unknown (no version recorded)"


def test_unknown_trials_of_a_side_that_ran_several_versions_are_left_out():
    df = pd.DataFrame(
        [
            _trial("baseline", "x", 1.0, "2.1.50", trial="x__1"),
            _trial("baseline", "x", 0.0, "2.1.62", trial="x__2"),
            _trial("baseline", "x", 0.0, None, why=NO_TRACE, trial="x__3"),
            _trial("mcp", "x", 1.0, "2.1.62"),
        ]
    )
    m = match_tasks(df, "baseline", "mcp")
    # 2.1.62 pairs with itself, verified: the unknown trial may be 2.1.50 or 2.1.62
    row = m.keys.iloc[0]
    assert (row["harness_version"], bool(row["harness_version_unverified"])) == ("2.1.62", False)
    assert int(row["n_trials_baseline"]) == 1
    reasons = dict(
        zip(m.unmatched["harness_version"].fillna("?"), m.unmatched["reason"], strict=True)
    )
    assert reasons == {
        "2.1.50": "harness version differs: 2.1.50 here, 2.1.62 in treatment config mcp",
        "?": "harness version unknown here and this config ran several (2.1.50, 2.1.62): "
        "cannot tell which it is",
    }

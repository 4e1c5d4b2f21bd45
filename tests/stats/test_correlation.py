"""Correlations and multiple-testing corrections against pingouin, scipy, statsmodels and hand values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.columns import find_metric_columns
from retrieval_lib.stats.correlation import (
    CORRELATION_COLUMNS,
    POOLED_GROUP,
    auc,
    correlate_metrics,
    pearson,
    point_biserial,
    spearman,
)
from retrieval_lib.stats.multiple import benjamini_hochberg, holm

Z975 = 1.959963984540054


def pingouin_corr(x, y, method):
    """Adapter over pingouin 0.7.0's ``corr`` columns (n, r, CI95, p_val)."""
    import pingouin

    row = pingouin.corr(np.asarray(x, float), np.asarray(y, float), method=method).iloc[0]
    low, high = row["CI95"]
    return {
        "n": int(row["n"]),
        "r": float(row["r"]),
        "ci_low": low,
        "ci_high": high,
        "p": float(row["p_val"]),
    }


@pytest.fixture
def noisy_frame():
    rng = np.random.default_rng(7)
    x = rng.normal(size=30)
    y = 0.6 * x + rng.normal(size=30)
    x[[2, 11]] = np.nan  # pairwise dropping: 3 rows lost in all
    y[[11, 20]] = np.nan
    return pd.DataFrame({"file.AP": x, "reward": y})


def test_result_has_the_stable_columns(noisy_frame):
    # the columns written out (docs/contracts.md), not the module's own constant
    expected = (
        "x", "y", "method", "n", "r", "ci_low", "ci_high", "p_value", "p_method",
        "auc", "auc_ci_low", "auc_ci_high", "rank_biserial", "computable", "reason",
    )  # fmt: skip
    assert expected == CORRELATION_COLUMNS
    for func, method in ((spearman, "spearman"), (pearson, "pearson")):
        frame = func(noisy_frame, "file.AP", "reward")
        assert tuple(frame.columns) == expected and len(frame) == 1
        row = frame.iloc[0]
        # 30 rows, x missing at 2 and 11, y at 11 and 20: 27 complete pairs
        assert (row["x"], row["y"], row["method"], row["n"]) == ("file.AP", "reward", method, 27)
        # a correlation row leaves the AUC columns empty
        assert math.isnan(row["auc"]) and math.isnan(row["auc_ci_low"])
        assert math.isnan(row["rank_biserial"])


def test_pearson_matches_pingouin_including_ci_and_p(noisy_frame):
    ours = pearson(noisy_frame, "file.AP", "reward").iloc[0]
    ref = pingouin_corr(noisy_frame["file.AP"], noisy_frame["reward"], "pearson")
    assert ours["n"] == ref["n"] == 27
    assert ours["r"] == pytest.approx(ref["r"], abs=1e-12)
    # n = 27: a Monte Carlo permutation p, close to the t-distribution p of normal data
    assert ours["p_method"] == "monte_carlo"
    assert ours["p_value"] == pytest.approx(ref["p"], abs=0.01)
    # pingouin 0.7.0 rounds its CI95 to 2 decimals; scipy gives the same Fisher-z CI in full
    assert ours["ci_low"] == pytest.approx(ref["ci_low"], abs=0.005)
    assert ours["ci_high"] == pytest.approx(ref["ci_high"], abs=0.005)
    from scipy import stats

    complete = noisy_frame.dropna()
    ci = stats.pearsonr(complete["file.AP"], complete["reward"]).confidence_interval(0.95)
    assert (ours["ci_low"], ours["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert ours["computable"] and ours["reason"] is None


def test_spearman_with_ties_matches_pingouin_r_and_p_and_hand_ci():
    x = [1, 2, 2, 3, 4, 4, 4, 5, 6, 7, 7, 8]
    y = [2, 1, 3, 3, 5, 4, 6, 6, 8, 7, 9, 9]
    df = pd.DataFrame({"file.R@5": x, "cost_usd": y})
    ours = spearman(df, "file.R@5", "cost_usd").iloc[0]
    ref = pingouin_corr(x, y, "spearman")
    assert ours["r"] == pytest.approx(ref["r"], abs=1e-12)
    assert ours["p_method"] == "monte_carlo" and ours["p_value"] < 0.001
    assert ref["p"] < 1e-5  # the t approximation
    # Bonett-Wright CI by hand; pingouin uses the plain 1/(n-3), which must be narrower
    r, n = ours["r"], 12
    half = Z975 * math.sqrt((1 + r * r / 2) / (n - 3))
    assert ours["ci_low"] == pytest.approx(math.tanh(math.atanh(r) - half), abs=1e-12)
    assert ours["ci_high"] == pytest.approx(math.tanh(math.atanh(r) + half), abs=1e-12)
    plain = Z975 / math.sqrt(n - 3)
    assert ours["ci_low"] < math.tanh(math.atanh(r) - plain) - 0.01
    assert ours["ci_high"] > math.tanh(math.atanh(r) + plain)
    assert math.tanh(math.atanh(r) - plain) == pytest.approx(ref["ci_low"], abs=0.005)
    assert math.tanh(math.atanh(r) + plain) == pytest.approx(ref["ci_high"], abs=0.005)


def test_spearman_average_ranks_by_hand():
    # x ranks 1..5; y = [0, .5, .4, 1, 1] has ranks [1, 3, 2, 4.5, 4.5]
    # r = sum(dx*dy)/sqrt(sum dx^2 * sum dy^2) = 8.5 / sqrt(10 * 9.5)
    df = pd.DataFrame({"file.AP": [0.1, 0.2, 0.3, 0.5, 0.9], "reward": [0.0, 0.5, 0.4, 1.0, 1.0]})
    assert spearman(df, "file.AP", "reward")["r"].iloc[0] == pytest.approx(8.5 / math.sqrt(95))


def test_below_minimum_n_is_not_computable_never_zero():
    df = pd.DataFrame(
        {"file.AP": [0.1, 0.2, np.nan, 0.4, 0.5], "reward": [1.0, 0.0, 1.0, 1.0, np.nan]}
    )
    row = spearman(df, "file.AP", "reward").iloc[0]
    assert row["n"] == 3
    assert not row["computable"]
    assert math.isnan(row["r"]) and math.isnan(row["p_value"]) and math.isnan(row["ci_low"])
    assert "n=3" in row["reason"] and "minimum of 5" in row["reason"]
    assert pearson(df, "file.AP", "reward", min_n=3)["computable"].iloc[0]


def test_constant_column_is_not_computable():
    df = pd.DataFrame({"file.AP": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6], "reward": [1.0] * 6})
    for func in (spearman, pearson):
        row = func(df, "file.AP", "reward").iloc[0]
        assert not row["computable"] and math.isnan(row["r"])
        assert "reward is constant" in row["reason"]


def test_perfect_correlation_has_a_missing_ci_and_an_exact_p():
    # issue 22: r = 1.000, CI [1, 1] beside a p the t approximation made 1e-24
    df = pd.DataFrame({"a": [1, 2, 3, 4, 5, 6], "b": [2, 4, 6, 8, 10, 12]})
    for func in (pearson, spearman):
        row = func(df, "a", "b").iloc[0]
        assert row["r"] == pytest.approx(1.0)
        assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
        assert row["reason"] == "no CI: |r| = 1 (n=6), where Fisher z is infinite"
        assert row["computable"] and row["p_method"] == "exact"
        assert row["p_value"] == pytest.approx(2 / 720)


def test_fisher_ci_needs_more_than_three_pairs():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [1.0, 3.0, 2.0]})
    row = spearman(df, "a", "b", min_n=3).iloc[0]
    assert row["r"] == pytest.approx(0.5) and row["computable"]
    assert math.isnan(row["ci_low"]) and "n > 3" in row["reason"]
    assert row["p_value"] == pytest.approx(1.0)  # 2 * P(rho >= 0.5) = 2 * 3/6


def test_point_biserial_by_hand_and_against_scipy():
    from scipy import stats

    df = pd.DataFrame(
        {"m": [0.1, 0.4, 0.3, 0.8, 0.9, np.nan], "passed": [False, False, True, True, True, None]},
    )
    df["passed"] = df["passed"].astype(object)
    row = point_biserial(df, "m", "passed").iloc[0]
    # deviations from the means 0.5 and 0.6: sum of products 0.5, sums of squares 0.46 and 1.2
    assert row["r"] == pytest.approx(0.5 / math.sqrt(0.46 * 1.2))
    ref = stats.pearsonr(
        [0, 0, 1, 1, 1],
        [0.1, 0.4, 0.3, 0.8, 0.9],
        method=stats.PermutationMethod(n_resamples=np.inf),
    )
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert row["p_value"] == pytest.approx(0.4)  # 2 * 12/120 pairings at least as large
    assert row["n"] == 5 and row["method"] == "point_biserial"


def test_auc_with_ties_by_hand_and_against_scipy():
    from scipy import stats

    pos, neg = [0.5, 0.7, 0.9], [0.5, 0.2, 0.7]
    df = pd.DataFrame({"m": pos + neg, "passed": [1, 1, 1, 0, 0, 0]})
    row = auc(df, "m", "passed").iloc[0]
    # 0.5: tie(.5) + >.2 = 1.5; 0.7: >.5, >.2, tie(.7) = 2.5; 0.9: 3 -> 7 of 9
    area = 7 / 9
    assert row["auc"] == pytest.approx(area)
    u = stats.mannwhitneyu(pos, neg).statistic
    assert row["auc"] == pytest.approx(u / 9)  # U / (n1 * n0)
    # the rank-biserial correlation has its own column; r (a correlation) is empty
    assert row["rank_biserial"] == pytest.approx(2 * area - 1)
    assert math.isnan(row["r"]) and math.isnan(row["ci_low"]) and math.isnan(row["ci_high"])
    exact = stats.mannwhitneyu(pos, neg, method=stats.PermutationMethod(n_resamples=np.inf))
    assert row["p_method"] == "exact"
    assert row["p_value"] == pytest.approx(exact.pvalue, rel=1e-12)


def test_auc_ci_with_unequal_classes_by_hand_from_hanley_mcneil():
    # Hanley & McNeil (1982), eq. 2: with n_A abnormal (here: passing) and n_N normal cases,
    # SE^2 = [A(1 - A) + (n_A - 1)(Q1 - A^2) + (n_N - 1)(Q2 - A^2)] / (n_A n_N), where
    # Q1 = A / (2 - A) (two passes both above one fail) and Q2 = 2A^2 / (1 + A) (one pass
    # above two fails). Unequal class sizes, so swapping Q1 and Q2 changes the answer.
    from fractions import Fraction as F

    pos, neg = [0.5, 0.7, 0.9, 0.95], [0.5, 0.2]
    df = pd.DataFrame({"m": pos + neg, "passed": [1, 1, 1, 1, 0, 0]})
    row = auc(df, "m", "passed").iloc[0]
    # 0.5 ties 0.5 and beats 0.2 (1.5); 0.7, 0.9, 0.95 beat both (2 each): 7.5 of 8
    area = F(15, 16)
    assert row["auc"] == float(area)
    q1 = area / (2 - area)  # 15/17
    q2 = 2 * area * area / (1 + area)  # 225/248
    assert (q1, q2) == (F(15, 17), F(225, 248))
    n_pass, n_fail = 4, 2
    variance = (
        area * (1 - area) + (n_pass - 1) * (q1 - area**2) + (n_fail - 1) * (q2 - area**2)
    ) / (n_pass * n_fail)
    low = float(area) - Z975 * math.sqrt(variance)
    assert row["auc_ci_low"] == pytest.approx(low, rel=1e-12)
    assert row["auc_ci_low"] == pytest.approx(0.7213638240608198, rel=1e-12)
    assert row["auc_ci_high"] == 1.0  # 0.9375 + 0.2161 clipped to 1
    # with Q1 and Q2 swapped the lower bound would be 0.6717
    swapped = (area * (1 - area) + 3 * (q2 - area**2) + (q1 - area**2)) / 8
    assert float(area) - Z975 * math.sqrt(swapped) == pytest.approx(0.6717315895690126)


def test_auc_and_rank_biserial_against_mann_whitney_u_on_a_larger_sample():
    from scipy import stats

    rng = np.random.default_rng(12)
    m = np.round(rng.uniform(size=150), 2)  # ties
    passed = (m + rng.normal(scale=0.4, size=150) > 0.5).astype(int)
    row = auc(pd.DataFrame({"m": m, "passed": passed}), "m", "passed").iloc[0]
    ref = stats.mannwhitneyu(m[passed == 1], m[passed == 0], method="asymptotic")
    n1, n0 = int(passed.sum()), int((1 - passed).sum())
    assert row["auc"] == pytest.approx(ref.statistic / (n1 * n0), rel=1e-12)
    assert row["rank_biserial"] == pytest.approx(2 * ref.statistic / (n1 * n0) - 1, rel=1e-12)
    assert row["p_method"] == "asymptotic" and row["p_value"] == pytest.approx(ref.pvalue)
    assert row["auc_ci_low"] < row["auc"] < row["auc_ci_high"]


def test_perfectly_separating_auc_has_no_ci():
    df = pd.DataFrame({"m": [0.1, 0.2, 0.3, 0.8, 0.9], "passed": [0, 0, 0, 1, 1]})
    row = auc(df, "m", "passed").iloc[0]
    assert row["auc"] == 1.0 and row["rank_biserial"] == 1.0 and row["computable"]
    assert math.isnan(row["auc_ci_low"]) and "AUC = 1" in row["reason"]
    assert row["p_value"] == pytest.approx(2 / 10)  # 2 * 1 / C(5, 2) label sets


def test_non_binary_outcome_for_point_biserial_is_an_error():
    df = pd.DataFrame({"m": [0.1, 0.2, 0.3, 0.4, 0.5], "passed": [0, 1, 2, 0, 1]})
    with pytest.raises(StatisticsError, match="binary"):
        point_biserial(df, "m", "passed")


def test_missing_column_is_an_error():
    with pytest.raises(StatisticsError, match="file.nDCG@10"):
        spearman(pd.DataFrame({"reward": [1.0]}), "file.nDCG@10", "reward")


def test_metric_columns_are_found_by_prefix_and_dtype():
    df = pd.DataFrame(
        {
            "task_name": ["a", "b"],
            "file.P@5": [0.2, np.nan],
            "read.R@5": [None, None],
            "chunk.resolution": ["file_level_only", "chunk_level"],
            "util.probe_available": [True, False],
            "util.read_overlap": [0.5, 1.0],
            "reward": [1.0, 0.0],
            "files_read": [3, 4],
        }
    )
    assert find_metric_columns(df) == ["file.P@5", "read.R@5", "util.read_overlap"]


def _table(n_per_config=8, seed=3):
    rng = np.random.default_rng(seed)
    rows = []
    for config in ("baseline", "mcp"):
        for i in range(n_per_config):
            ap = rng.random()
            reward = float(ap + rng.normal(scale=0.3) > 0.5)
            rows.append(
                {
                    "config_name": config,
                    "task_name": f"t{i}",
                    "file.AP": ap,
                    "file.R@10": rng.random(),
                    "reward": reward,
                    "passed": bool(reward),
                    "cost_usd": rng.random(),
                    "total_tokens": int(rng.integers(100, 1000)),
                }
            )
    return pd.DataFrame(rows)


def test_correlate_metrics_groups_methods_and_adjustment_family():
    from statsmodels.stats.multitest import multipletests

    df = _table()
    out = correlate_metrics(df, min_n=5)
    assert list(out["group"].unique()) == [POOLED_GROUP, "baseline", "mcp"]
    # 2 metrics x (reward, cost_usd, total_tokens) x 2 methods + 2 metrics x passed x 2 methods
    assert out.groupby("group").size().tolist() == [16, 16, 16]
    assert set(out.loc[out["y"] == "passed", "method"]) == {"point_biserial", "auc"}
    assert set(out.loc[out["y"] == "reward", "method"]) == {"spearman", "pearson"}
    pooled = out[out["group"] == POOLED_GROUP]
    assert set(pooled["n"]) == {16}
    # family: one group x one method family (rank = spearman + auc, linear = pearson +
    # point-biserial), i.e. one test per metric x outcome cell: 2 metrics x 4 outcomes
    assert out.groupby(["group", "family"]).size().tolist() == [8] * 6
    expected_family = {"spearman": "rank", "auc": "rank", "pearson": "linear"}
    expected_family["point_biserial"] = "linear"
    assert (out["method"].map(expected_family) == out["family"]).all()
    for _, block in out.groupby(["group", "family"]):
        p = block["p_value"].to_numpy()
        ok = ~np.isnan(p)
        assert np.allclose(block["p_holm"].to_numpy()[ok], multipletests(p[ok], method="holm")[1])
        assert np.allclose(block["p_bh"].to_numpy()[ok], multipletests(p[ok], method="fdr_bh")[1])
    # one reference value: the pooled Spearman of file.AP with reward
    row = pooled[
        (pooled["x"] == "file.AP") & (pooled["y"] == "reward") & (pooled["method"] == "spearman")
    ]
    assert row["r"].iloc[0] == pytest.approx(
        pingouin_corr(df["file.AP"], df["reward"], "spearman")["r"]
    )


def test_correlate_metrics_small_groups_are_reported_not_dropped():
    df = _table(n_per_config=3)
    out = correlate_metrics(df, outcomes=["reward"], min_n=5)
    per_config = out[out["group"] != POOLED_GROUP]
    assert len(per_config) == 8 and not per_config["computable"].any()
    assert per_config["p_holm"].isna().all()
    assert (out.loc[out["group"] == POOLED_GROUP, "n"] == 6).all()


# ----------------------------------------------------------------- Holm / BH


def test_holm_and_bh_against_statsmodels_with_nans():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(11)
    for size in (1, 2, 7, 50):
        p = rng.random(size) ** 3
        p[rng.random(size) < 0.2] = np.nan
        if size > 3:
            p[1] = p[0]  # a tie
        ok = ~np.isnan(p)
        h, b = holm(p), benjamini_hochberg(p)
        assert np.isnan(h[~ok]).all() and np.isnan(b[~ok]).all()
        if ok.any():
            assert np.allclose(h[ok], multipletests(p[ok], method="holm")[1], atol=0, rtol=1e-12)
            assert np.allclose(b[ok], multipletests(p[ok], method="fdr_bh")[1], atol=0, rtol=1e-12)


def test_holm_and_bh_hand_values():
    # sorted 0.01, 0.03, 0.04: Holm 3*.01, max(.03, 2*.03), max(.06, 1*.04)
    assert holm([0.04, 0.01, 0.03]).tolist() == pytest.approx([0.06, 0.03, 0.06])
    # BH: .01*3/1, .03*3/2, .04*3/3 -> running minimum from the top: .03, .04, .04
    assert benjamini_hochberg([0.04, 0.01, 0.03]).tolist() == pytest.approx([0.04, 0.03, 0.04])
    assert holm([0.9, 0.8]).tolist() == [1.0, 1.0]
    assert holm([]).size == 0


def test_correlate_metrics_counts_flagged_trials_and_can_exclude_them():
    df = _table()
    df["errored"] = [False] * 16
    df["timed_out"] = [None] * 16
    df.loc[[0, 3], "errored"] = True  # two baseline trials
    df.loc[9, "timed_out"] = True  # one mcp trial
    df.loc[3, "file.R@10"] = np.nan  # a flagged trial missing one metric
    out = correlate_metrics(df, outcomes=["reward"]).set_index(["group", "x", "method"])
    assert out.loc[(POOLED_GROUP, "file.AP", "spearman"), ["n", "n_flagged"]].tolist() == [16, 3]
    assert out.loc[(POOLED_GROUP, "file.R@10", "spearman"), ["n", "n_flagged"]].tolist() == [15, 2]
    assert out.loc[("baseline", "file.AP", "pearson"), "n_flagged"] == 2
    assert out.loc[("mcp", "file.AP", "pearson"), "n_flagged"] == 1
    kept = df.drop(index=[0, 3, 9])
    excluded = correlate_metrics(df, outcomes=["reward"], exclude_flagged=True)
    excluded = excluded.set_index(["group", "x", "method"])
    row = excluded.loc[(POOLED_GROUP, "file.AP", "spearman")]
    assert (row["n"], row["n_flagged"]) == (13, 0)
    assert row["r"] == pytest.approx(
        pingouin_corr(kept["file.AP"], kept["reward"], "spearman")["r"]
    )


def test_correlate_metrics_default_family_is_the_key_metrics_without_counts():
    df = _table()
    df["file.P@1"] = np.linspace(0, 1, 16)
    df["chunk.n_chunks"] = np.arange(16)
    default = correlate_metrics(df, outcomes=["reward"])
    assert sorted(set(default["x"])) == ["file.AP", "file.R@10"]  # key metrics only
    wide = correlate_metrics(df, "all", outcomes=["reward"])
    assert sorted(set(wide["x"])) == ["file.AP", "file.P@1", "file.R@10"]  # never n_chunks
    with pytest.raises(StatisticsError, match="not retrieval metric"):
        correlate_metrics(df, ["chunk.n_chunks"], outcomes=["reward"])

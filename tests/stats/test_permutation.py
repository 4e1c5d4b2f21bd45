"""Exact and Monte Carlo permutation p-values of correlations against brute-force enumeration and scipy."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.correlation import (
    auc,
    correlate_metrics,
    pearson,
    point_biserial,
    spearman,
)
from retrieval_lib.stats.permutation import (
    EXACT_MAX_N,
    MONTE_CARLO_MAX_N,
    N_RESAMPLES,
    permutation_p,
)


def _ranks(values):
    """Average ranks, written out (no scipy): ties share the mean of their positions."""
    order = sorted(values)
    return [
        Fraction(sum(i + 1 for i, v in enumerate(order) if v == x), order.count(x)) for x in values
    ]


def _pearson_fraction(x, y):
    """Pearson r squared with its sign, in exact fractions (ties broken by no rounding)."""
    n = len(x)
    mx, my = sum(x, Fraction(0)) / n, sum(y, Fraction(0)) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return (1 if sxy >= 0 else -1) * sxy * sxy / (sxx * syy)


def brute_force_p(x, y, rank: bool):
    """Two-sided permutation p by listing every pairing with itertools.permutations.

    The statistic is Pearson's r (of the ranks when ``rank``) compared in exact fractions
    through its signed square; p = 2 * min(P(T <= t), P(T >= t)), capped at 1 (scipy's
    two-sided rule of permutation_test).
    """
    xs = [Fraction(str(v)) for v in x]
    ys = [Fraction(str(v)) for v in y]
    if rank:
        xs, ys = _ranks(xs), _ranks(ys)
    observed = _pearson_fraction(xs, ys)
    null = [
        _pearson_fraction(xs, [ys[i] for i in perm])
        for perm in itertools.permutations(range(len(ys)))
    ]
    less = sum(1 for t in null if t <= observed)
    greater = sum(1 for t in null if t >= observed)
    return min(1.0, 2 * min(less, greater) / len(null))


def _spearman_statistic(y):
    """Vectorised Spearman rho of every row of ``a`` with ``y`` (scipy's ranks), for scipy."""
    from scipy import stats

    ry = stats.rankdata(y)
    ry = (ry - ry.mean()) / np.linalg.norm(ry - ry.mean())

    def statistic(a, axis=-1):
        ra = stats.rankdata(a, axis=axis)
        ra = ra - ra.mean(axis=axis, keepdims=True)
        return (ra @ ry) / np.linalg.norm(ra, axis=axis)

    return statistic


def test_perfect_spearman_of_five_is_two_in_120():
    df = pd.DataFrame({"a": [1, 2, 3, 4, 5], "b": [10, 20, 30, 40, 50]})
    row = spearman(df, "a", "b").iloc[0]
    assert row["p_value"] == pytest.approx(2 / 120, abs=1e-15)
    assert row["p_method"] == "exact"
    # the old t approximation said 1.4e-24
    assert row["p_value"] > 0.01


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [5, 6, 7])
def test_exact_spearman_and_pearson_match_brute_force_with_ties(seed, n):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, size=n).astype(float) / 4  # ties on purpose
    y = np.round(0.5 * x + rng.normal(scale=0.3, size=n), 1)
    if len(set(x)) == 1 or len(set(y)) == 1:
        pytest.skip("constant column")
    df = pd.DataFrame({"x": x, "y": y})
    s, p = spearman(df, "x", "y").iloc[0], pearson(df, "x", "y").iloc[0]
    assert s["p_method"] == p["p_method"] == "exact"
    assert s["p_value"] == pytest.approx(brute_force_p(x, y, rank=True), abs=1e-12)
    assert p["p_value"] == pytest.approx(brute_force_p(x, y, rank=False), abs=1e-12)


def test_exact_p_matches_scipy_permutation_test_pairings():
    from scipy import stats

    x = np.array([0.1, 0.4, 0.2, 0.9, 0.5, 0.7, 0.3, 0.8])
    y = np.array([0.0, 0.5, 0.5, 1.0, 0.2, 1.0, 0.1, 0.6])
    df = pd.DataFrame({"x": x, "y": y})
    ref_s = stats.permutation_test(
        (x,),
        _spearman_statistic(y),
        permutation_type="pairings",
        n_resamples=np.inf,
        vectorized=True,
    )
    assert _spearman_statistic(y)(x) == pytest.approx(stats.spearmanr(x, y).statistic)
    ref_p = stats.pearsonr(x, y, method=stats.PermutationMethod(n_resamples=np.inf))
    assert spearman(df, "x", "y")["p_value"].iloc[0] == pytest.approx(ref_s.pvalue, abs=1e-12)
    assert pearson(df, "x", "y")["p_value"].iloc[0] == pytest.approx(ref_p.pvalue, abs=1e-12)


def test_exact_auc_p_matches_brute_force_and_mann_whitney_exact():
    from scipy import stats

    pos, neg = [0.9, 0.7, 0.8], [0.3, 0.75, 0.1, 0.2]
    labels = [1] * 3 + [0] * 4
    df = pd.DataFrame({"m": pos + neg, "passed": labels})
    row = auc(df, "m", "passed").iloc[0]
    assert row["p_method"] == "exact"
    assert row["p_value"] == pytest.approx(brute_force_p(pos + neg, labels, rank=True))
    ref = stats.mannwhitneyu(pos, neg, alternative="two-sided", method="exact")
    assert row["p_value"] == pytest.approx(ref.pvalue, abs=1e-12)
    # point-biserial: permutation p of Pearson against the 0/1 labels
    pb = point_biserial(df, "m", "passed").iloc[0]
    assert pb["p_value"] == pytest.approx(brute_force_p(pos + neg, labels, rank=False))


def test_monte_carlo_is_seeded_close_to_exact_and_to_scipy():
    from scipy import stats

    rng = np.random.default_rng(11)
    x = rng.normal(size=14)
    y = 0.4 * x + rng.normal(size=14)
    first = permutation_p(stats.rankdata(x), stats.rankdata(y), seed=3)
    assert first == permutation_p(stats.rankdata(x), stats.rankdata(y), seed=3)
    assert first[1] == "monte_carlo"
    # the exact p of n = 14 is out of reach; scipy's own Monte Carlo with 100,000 draws
    ref = stats.permutation_test(
        (x,),
        _spearman_statistic(y),
        permutation_type="pairings",
        vectorized=True,
        n_resamples=100_000,
        rng=np.random.default_rng(0),
    ).pvalue
    # Monte Carlo SE of 10,000 draws at p ~ 0.1: sqrt(p(1-p)/10^4) * 2 ~ 0.006
    assert first[0] == pytest.approx(ref, abs=0.02)
    assert permutation_p(stats.rankdata(x), stats.rankdata(y), seed=4)[0] != first[0]


def test_monte_carlo_agrees_with_exact_enumeration_at_n8():
    from scipy import stats

    x = stats.rankdata([3, 1, 4, 1, 5, 9, 2, 6])
    y = stats.rankdata([2, 7, 1, 8, 2, 8, 1, 8])
    exact, how = permutation_p(x, y)
    assert how == "exact"
    mc, how = permutation_p(x, y, exact_max_n=7)
    assert how == "monte_carlo"
    # Monte Carlo SE of the doubled tail at p ~ 0.63: 2 * sqrt(0.315 * 0.685 / 10^4) ~ 0.009
    assert mc == pytest.approx(exact, abs=0.03)


def test_thresholds_and_asymptotic_above():
    assert (EXACT_MAX_N, MONTE_CARLO_MAX_N, N_RESAMPLES) == (8, 100, 10_000)
    x = np.arange(float(MONTE_CARLO_MAX_N + 1))
    assert math.isnan(permutation_p(x, x)[0]) and permutation_p(x, x)[1] is None
    rng = np.random.default_rng(0)
    big = pd.DataFrame({"x": rng.normal(size=150), "y": rng.normal(size=150)})
    row = spearman(big, "x", "y").iloc[0]
    from scipy import stats

    assert row["p_method"] == "asymptotic"
    assert row["p_value"] == pytest.approx(stats.spearmanr(big["x"], big["y"]).pvalue)
    assert spearman(big.head(9), "x", "y")["p_method"].iloc[0] == "monte_carlo"


def test_permutation_p_refuses_bad_input():
    with pytest.raises(StatisticsError, match="length"):
        permutation_p([1, 2], [1, 2, 3])
    with pytest.raises(StatisticsError, match="finite"):
        permutation_p([1, 2, float("nan")], [1, 2, 3])
    with pytest.raises(StatisticsError, match="10!"):
        permutation_p([1, 2], [1, 2], exact_max_n=11)


def test_correlate_metrics_p_values_are_seeded_and_say_their_method():
    rng = np.random.default_rng(5)
    df = pd.DataFrame(
        {
            "config_name": ["a"] * 6 + ["b"] * 30,
            "file.AP": rng.uniform(size=36),
            "reward": rng.uniform(size=36),
        }
    )
    one = correlate_metrics(df, outcomes=["reward"], seed=1)
    assert one.equals(correlate_metrics(df, outcomes=["reward"], seed=1))
    methods = dict(zip(one["group"] + "/" + one["method"], one["p_method"], strict=True))
    assert methods["a/spearman"] == "exact" and methods["b/spearman"] == "monte_carlo"
    assert methods["(pooled)/pearson"] == "monte_carlo"

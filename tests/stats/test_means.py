"""Means with a bootstrap CI (per value, per task) and the calibration table."""

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.stats import means

# --------------------------------------------------------------------------- mean and CI


def test_mean_ci_leaves_missing_values_out():
    r = means.mean_ci([1.0, None, 3.0, float("nan")], n_boot=500)
    assert (r.n, r.mean) == (2, 2.0)
    assert 1.0 <= r.ci_low <= r.ci_high <= 3.0


def test_mean_ci_without_values_is_nan_with_reason():
    r = means.mean_ci([None, float("nan")])
    assert r.n == 0 and math.isnan(r.mean) and math.isnan(r.ci_low)
    assert r.reason == "no computable value"
    one = means.mean_ci([0.25])
    assert (one.n, one.mean) == (1, 0.25) and math.isnan(one.ci_high)
    assert one.reason.startswith("n=1")


def test_mean_ci_matches_scipy_percentile_bootstrap():
    scipy_stats = pytest.importorskip("scipy.stats")
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.55, 0.9, 0.2, 0.65, 0.5, 0.45])
    ours = means.mean_ci(values, alpha=0.1, n_boot=40000, seed=3)
    ref = scipy_stats.bootstrap(
        (values,),
        np.mean,
        confidence_level=0.9,
        n_resamples=40000,
        method="percentile",
        random_state=np.random.default_rng(11),
    ).confidence_interval
    # different random streams: the two Monte Carlo estimates agree to about 0.01
    assert ours.ci_low == pytest.approx(ref.low, abs=0.012)
    assert ours.ci_high == pytest.approx(ref.high, abs=0.012)
    assert ours.mean == pytest.approx(0.49)


def test_mean_ci_is_reproducible_and_narrows_with_alpha():
    values = [0.03, 0.21, 0.47, 0.5, 0.88, 0.97]  # irregular: every seed its own quantiles
    a = means.mean_ci(values, seed=7, n_boot=3000)
    b = means.mean_ci(values, seed=7, n_boot=3000)
    assert a == b
    # the seeded percentile bootstrap, resampled independently: 3000 draws of 6 indices
    rng = np.random.default_rng(7)
    draws = np.asarray(values)[rng.integers(0, 6, size=(3000, 6))].mean(axis=1)
    assert (a.n, a.mean) == (6, pytest.approx(3.06 / 6))
    assert (a.ci_low, a.ci_high) == pytest.approx(tuple(np.quantile(draws, [0.025, 0.975])))
    wide = means.mean_ci(values, alpha=0.01, seed=7, n_boot=3000)
    assert wide.ci_low < a.ci_low and wide.ci_high > a.ci_high


@pytest.mark.parametrize("kwargs", [{"alpha": 0.0}, {"alpha": 1.0}, {"n_boot": 0}])
def test_mean_ci_refuses_bad_settings(kwargs):
    with pytest.raises(InputError):
        means.mean_ci([1.0, 2.0], **kwargs)


def test_mean_ci_is_the_stats_bootstrap():
    from retrieval_lib.stats.intervals import bootstrap_mean_ci

    values = [0.3, None, 0.9, 0.1, 0.6, float("nan"), 0.2]
    r = means.mean_ci(values, alpha=0.2, n_boot=1500, seed=8)
    finite = [0.3, 0.9, 0.1, 0.6, 0.2]
    assert (r.ci_low, r.ci_high) == bootstrap_mean_ci(finite, n_boot=1500, seed=8, alpha=0.2)
    # and by hand: the generator's draws, the means, the 10% and 90% quantiles
    rng = np.random.default_rng(8)
    boot = np.array(finite)[rng.integers(0, 5, size=(1500, 5))].mean(axis=1)
    assert (r.ci_low, r.ci_high) == tuple(np.quantile(boot, [0.1, 0.9]))


# --------------------------------------------------------------------------- calibration


def test_calibration_orders_slices_by_size_and_skips_trials_without_slice():
    table = pd.DataFrame(
        {
            "candidate_set_size_slice": ["large", "small", "medium", "small", None],
            "evidence_type": ["local", "mcp", "local", "local", None],
            "file.AP": [0.3, 0.5, 0.7, 0.1, 0.9],
        }
    )
    out = means.calibration_table(table, "file.AP", n_boot=200)
    assert out[["candidate_set_size_slice", "evidence_type", "n"]].values.tolist() == [
        ["small", "local", 1],
        ["small", "mcp", 1],
        ["medium", "local", 1],
        ["large", "local", 1],
    ]
    assert out["mean"].tolist() == [0.1, 0.5, 0.7, 0.3]
    assert means.calibration_table(table, "absent").empty


def test_calibration_cluster_bootstrap_keeps_a_tasks_trials_together():
    from retrieval_lib.stats.clustered import cluster_bootstrap_mean

    table = pd.DataFrame(
        {
            "candidate_set_size_slice": ["small"] * 5 + ["large"],
            "evidence_type": ["local"] * 6,
            "task_name": ["x", "x", "x", "y", "z", "x"],
            "file.AP": [0.2, 0.4, 0.6, 1.0, 0.0, 0.9],
        }
    )
    out = means.calibration_table(table, "file.AP", n_boot=300, seed=1).set_index(
        "candidate_set_size_slice"
    )
    small = out.loc["small"]
    # the slice is per trial: the mean is over its 5 trials, n counts its 3 tasks
    assert (small["n"], small["n_tasks"], small["n_trials"]) == (3, 3, 5)
    assert small["mean"] == pytest.approx(2.2 / 5)
    hand = cluster_bootstrap_mean(
        [0.2, 0.4, 0.6, 1.0, 0.0], ["x", "x", "x", "y", "z"], n_boot=300, seed=1
    )
    assert (small["ci_low"], small["ci_high"]) == (hand.ci_low, hand.ci_high)
    assert (out.loc["large", "n"], out.loc["large", "n_trials"]) == (1, 1)

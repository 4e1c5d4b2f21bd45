"""Sample size and precision of a matched comparison against pingouin and scipy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from retrieval_lib.stats.power import needed_column, paired_n_for_power, tasks_needed


@pytest.mark.parametrize("d", [0.1, 0.2, 0.35, 0.5, 0.8, 1.2])
def test_paired_n_for_power_is_the_ceiling_of_pingouin(d):
    import pingouin

    ref = pingouin.power_ttest(d=d, power=0.8, alpha=0.05, contrast="paired")
    assert paired_n_for_power(d) == math.ceil(ref)


def test_half_a_standard_deviation_needs_34_pairs():
    # report-notes: pingouin.power_ttest(d=0.5, power=0.8, contrast="paired") = 33.4 pairs
    assert paired_n_for_power(0.5) == 34
    assert paired_n_for_power(-0.5) == 34


def test_tasks_needed_against_pingouin_and_a_hand_t_interval():
    import pingouin
    from scipy import stats

    rng = np.random.default_rng(3)
    deltas = np.clip(rng.normal(0.03, 0.3, size=25), -1, 1)
    deltas[4] = np.nan  # dropped
    row = tasks_needed(deltas).iloc[0]
    finite = deltas[np.isfinite(deltas)]
    sd = float(np.std(finite, ddof=1))
    assert row["n"] == 24
    assert row["sd_delta"] == pytest.approx(sd, rel=1e-12)
    assert row["ci_half_width"] == pytest.approx(stats.t.ppf(0.975, 23) * sd / math.sqrt(24))
    for effect in (0.05, 0.10):
        ref = pingouin.power_ttest(d=effect / sd, power=0.8, alpha=0.05, contrast="paired")
        assert row[needed_column(effect)] == math.ceil(ref)
    assert row["reason"] is None


@pytest.mark.parametrize(
    "deltas, reason",
    [([0.2], "at least 2"), ([], "at least 2"), ([0.0, 0.0, 0.0], "zero variance")],
)
def test_tasks_needed_is_missing_with_the_reason(deltas, reason):
    row = tasks_needed(deltas).iloc[0]
    assert row["n"] == len(deltas)
    for column in ("sd_delta", "ci_half_width", "n_needed_0.05", "n_needed_0.10"):
        assert math.isnan(row[column])
    assert reason in row["reason"]


def test_large_effects_need_few_pairs_and_never_fail():
    import pingouin

    # scipy's noncentral t returns NaN in some far tails; the search must not stop there
    for d in (3.0, 10.0, 40.0, 1e6):
        n = paired_n_for_power(d)
        assert n is not None and 2 <= n <= 5
        if d <= 10:
            assert n == max(2, math.ceil(pingouin.power_ttest(d=d, power=0.8, contrast="paired")))
    row = tasks_needed([0.1, 0.1, 0.1 + 1e-9, 0.1]).iloc[0]
    assert row["n_needed_0.05"] == 2

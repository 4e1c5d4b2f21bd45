"""Friedman and pairwise Wilcoxon with Holm (issue 19): against pingouin, scipy and by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.multi import complete_blocks, friedman, pairwise_wilcoxon


def _long(wide: dict[str, list[float]]) -> pd.DataFrame:
    n = len(next(iter(wide.values())))
    return pd.DataFrame(
        [
            {"task": f"t{i:02d}", "config": name, "v": values[i]}
            for name, values in wide.items()
            for i in range(n)
        ]
    )


def test_friedman_by_hand_on_a_small_table():
    # 4 tasks x 3 configs, no ties within a task:
    #   t0: 1 2 3 -> ranks 1 2 3 ; t1: 2 1 3 -> 2 1 3 ; t2: 1 3 2 -> 1 3 2 ; t3: 1 2 3 -> 1 2 3
    # rank sums R = (5, 8, 11); Q = 12/(n k (k+1)) * sum(R^2) - 3 n (k+1)
    #   = 12/(4*3*4) * (25 + 64 + 121) - 3*4*4 = 0.25 * 210 - 48 = 4.5 ; p = exp(-4.5/2)
    data = _long({"a": [1, 2, 1, 1], "b": [2, 1, 3, 2], "c": [3, 3, 2, 3]})
    row = friedman(data, "v", "config", "task").iloc[0]
    assert row["tested"] and row["n"] == 4 and row["k"] == 3 and row["ddof1"] == 2
    assert row["Q"] == pytest.approx(4.5)
    assert row["p_value"] == pytest.approx(math.exp(-4.5 / 2))  # chi2(2) survival
    assert row["W"] == pytest.approx(4.5 / (4 * 2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_friedman_equals_pingouin_and_scipy_with_ties(seed):
    pg = pytest.importorskip("pingouin")
    from scipy import stats

    rng = np.random.default_rng(seed)
    wide = {c: rng.integers(0, 3, size=15).astype(float) / 2 for c in ("x", "y", "z", "w")}
    data = _long(wide)
    ours = friedman(data, "v", "config", "task").iloc[0]
    ref = pg.friedman(data=data, dv="v", within="config", subject="task").iloc[0]
    assert ours["Q"] == pytest.approx(float(ref["Q"]), rel=1e-10)
    assert ours["p_value"] == pytest.approx(float(ref["p_unc"] if "p_unc" in ref else ref["p-unc"]))
    scipy_res = stats.friedmanchisquare(*[np.asarray(v) for v in wide.values()])
    assert ours["Q"] == pytest.approx(scipy_res.statistic)


def test_friedman_drops_tasks_without_every_config_listwise():
    data = _long({"a": [1, 2, 1, 1], "b": [2, 1, 3, 2], "c": [3, 3, 2, 3]})
    data = pd.concat(
        [data, pd.DataFrame([{"task": "t99", "config": "a", "v": 5.0}])], ignore_index=True
    )
    data.loc[(data["task"] == "t03") & (data["config"] == "b"), "v"] = np.nan
    row = friedman(data, "v", "config", "task").iloc[0]
    assert row["n"] == 3 and row["n_dropped"] == 2
    wide, dropped = complete_blocks(data, "v", "config", "task")
    assert list(wide.index) == ["t00", "t01", "t02"] and dropped == 2


@pytest.mark.parametrize(
    ("wide", "reason"),
    [
        ({"a": [1, 2, 3], "b": [2, 3, 4]}, "2 condition(s): the Friedman test needs at least 3"),
        ({"a": [1, 2], "b": [2, 3], "c": [0, 1]}, "2 task value(s) with every config"),
        ({"a": [1, 2, 3], "b": [1, 2, 3], "c": [1, 2, 3]}, "every one of the 3 tasks ties"),
    ],
)
def test_degenerate_friedman_is_untested_with_the_reason(wide, reason):
    row = friedman(_long(wide), "v", "config", "task").iloc[0]
    assert not row["tested"] and math.isnan(row["p_value"]) and reason in row["reason"]


def test_a_task_given_twice_for_one_config_is_refused():
    data = _long({"a": [1, 2, 3], "b": [1, 2, 3], "c": [1, 2, 3]})
    with pytest.raises(StatisticsError, match="aggregate them first"):
        friedman(pd.concat([data, data.head(1)]), "v", "config", "task")


def test_pairwise_wilcoxon_equals_pingouin_pairwise_tests_with_holm():
    pg = pytest.importorskip("pingouin")
    rng = np.random.default_rng(7)
    base = rng.normal(size=12)
    wide = {
        "a": base,
        "b": base + rng.normal(0.8, 0.5, size=12),
        "c": base + rng.normal(0.1, 0.5, size=12),
    }
    data = _long(wide)
    ours = pairwise_wilcoxon(data, "v", "config", "task")
    ref = pg.pairwise_tests(
        data=data, dv="v", within="config", subject="task", parametric=False, padjust="holm"
    )
    p_unc = "p_unc" if "p_unc" in ref else "p-unc"
    p_corr = "p_corr" if "p_corr" in ref else "p-corr"
    w_val = "W_val" if "W_val" in ref else "W-val"
    assert ours[["A", "B"]].values.tolist() == ref[["A", "B"]].values.tolist()
    assert ours["tested"].all()
    np.testing.assert_allclose(ours["wilcoxon_p"], ref[p_unc].astype(float), rtol=1e-10)
    np.testing.assert_allclose(ours["p_holm"], ref[p_corr].astype(float), rtol=1e-10)
    np.testing.assert_allclose(ours["wilcoxon_statistic"], ref[w_val].astype(float))
    # mean delta is B - A with a t interval over tasks
    from scipy import stats

    d = wide["b"] - wide["a"]
    half = stats.t.ppf(0.975, 11) * d.std(ddof=1) / math.sqrt(12)
    first = ours.iloc[0]
    assert first["mean_delta"] == pytest.approx(d.mean())
    assert (first["ci_low"], first["ci_high"]) == pytest.approx((d.mean() - half, d.mean() + half))


def test_an_untested_pair_stays_out_of_holms_family():
    # a vs b and b vs c: 8 non-zero deltas, tested; a vs c: c equals a on all but 2 tasks
    wide = {
        "a": [0, 0, 0, 0, 0, 0, 0, 0],
        "b": [1, 1, 1, 1, 1, 1, 2, 2],
        "c": [0, 0, 0, 0, 0, 0, 3, 5],
    }
    out = pairwise_wilcoxon(_long(wide), "v", "config", "task")
    ab, ac, bc = (out.iloc[i] for i in range(3))
    assert ab["tested"] and not ac["tested"] and bc["tested"]
    assert "non-zero paired deltas: 2 of 8" in ac["reason"] and math.isnan(ac["p_holm"])
    # Holm over the two tested pairs only: m = 2
    smaller, larger = sorted([ab["wilcoxon_p"], bc["wilcoxon_p"]])
    assert min(ab["p_holm"], bc["p_holm"]) == pytest.approx(min(1.0, 2 * smaller))
    assert ab["wilcoxon_p"] == pytest.approx(2 / 2**8)  # all 8 deltas +1: exact

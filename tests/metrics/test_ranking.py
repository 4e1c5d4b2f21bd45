"""Hand-computed values and input policies of the ranking-metric kernel."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import MetricError
from retrieval_lib.metrics.ranking import (
    METRICS,
    MeanScore,
    Metric,
    evaluate_rankings,
    non_computable_reason,
    parse_metric,
    rank_by_score,
)

KNOWN = "P@k, R[@k], F1@k, nDCG[@k], AP[@k], RR[@k], Hit[@k], R-Prec"
LOG2_3 = math.log2(3)
LOG2_5 = math.log2(5)
LOG2_6 = math.log2(6)

# Ranking 0: relevant {a, b, c, z} (R = 4); hits at ranks 1, 3, 5 of a 5-id ranking.
RANKING_MIXED = ["a", "x", "b", "y", "c"]
RELEVANT_MIXED = {"a", "b", "c", "z"}
# Ranking 1: a single relevant id at rank 3.
RANKING_LATE = ["x", "y", "b"]
RELEVANT_LATE = {"b"}


def _one(ranking, relevant, metric):
    return float(evaluate_rankings([ranking], [relevant], [metric])[metric][0])


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("P@1", 1.0),  # a relevant: 1/1
        ("P@3", 2 / 3),  # a, b in the top 3
        ("P@5", 3 / 5),
        ("P@10", 3 / 10),  # divides by k = 10 although only 5 ids were retrieved
        ("R@1", 1 / 4),
        ("R@3", 2 / 4),
        ("R@10", 3 / 4),
        ("R", 3 / 4),  # whole ranking: a, b, c of 4 relevant (z never retrieved)
        ("F1@1", 2 * 1 * (1 / 4) / (1 + 1 / 4)),  # = 2/5
        ("F1@3", 4 / 7),  # 2*(2/3)*(1/2) / (2/3 + 1/2)
        # DCG@3 = 1/log2(2) + 1/log2(4) = 1.5; ideal has min(3, 4) = 3 ids: 1 + 1/log2(3) + 1/2
        ("nDCG@3", 1.5 / (1.5 + 1 / LOG2_3)),
        # DCG@5 = 1 + 1/2 + 1/log2(6); ideal 4 ids: 1 + 1/log2(3) + 1/2 + 1/log2(5)
        ("nDCG@5", (1.5 + 1 / LOG2_6) / (1.5 + 1 / LOG2_3 + 1 / LOG2_5)),
        ("nDCG", (1.5 + 1 / LOG2_6) / (1.5 + 1 / LOG2_3 + 1 / LOG2_5)),
        ("AP", (1 / 1 + 2 / 3 + 3 / 5) / 4),  # = 17/30; z counts in the denominator
        ("AP@3", (1 / 1 + 2 / 3) / 4),  # = 5/12; still divided by R = 4
        ("RR", 1.0),
        ("RR@1", 1.0),
        ("Hit@1", 1.0),
        ("R-Prec", 2 / 4),  # top R = 4 is a, x, b, y: 2 relevant
    ],
)
def test_hand_computed_values_mixed_ranking(metric, expected):
    assert _one(RANKING_MIXED, RELEVANT_MIXED, metric) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("metric", "expected"),
    [
        ("RR", 1 / 3),
        ("RR@3", 1 / 3),
        ("RR@2", 0.0),  # first relevant is below the cut
        ("Hit@2", 0.0),
        ("Hit@3", 1.0),
        ("R-Prec", 0.0),  # R = 1: the top 1 is x
        ("AP", 1 / 3),  # precision 1/3 at the only relevant id, / R = 1
        ("nDCG@3", 1 / 2),  # DCG = 1/log2(4) = 0.5, ideal = 1/log2(2) = 1
        ("nDCG@2", 0.0),
        ("P@3", 1 / 3),
        ("F1@3", 2 * 1 / (3 + 1)),  # 2*hits/(k + R) = 1/2: P = 1/3, R = 1, 2PR/(P+R) = 1/2
    ],
)
def test_hand_computed_values_late_hit(metric, expected):
    assert _one(RANKING_LATE, RELEVANT_LATE, metric) == pytest.approx(expected, abs=1e-12)


def test_cutoff_larger_than_ranking():
    scores = evaluate_rankings([["a"]], [{"a", "b", "c"}], ["P@10", "nDCG@10", "R-Prec", "R@10"])
    assert scores["P@10"][0] == pytest.approx(1 / 10)  # 1 relevant / k
    # DCG = 1; ideal has min(10, 3) = 3 ids: 1 + 1/log2(3) + 1/2
    assert scores["nDCG@10"][0] == pytest.approx(1 / (1.5 + 1 / LOG2_3))
    assert scores["R-Prec"][0] == pytest.approx(1 / 3)  # divides by R = 3, not by 1 retrieved
    assert scores["R@10"][0] == pytest.approx(1 / 3)
    assert _one(["a"], {"a"}, "nDCG@10") == 1.0  # ideal is min(10, 1) = 1 id


ALL_FAMILIES = ["P@5", "R@5", "R", "F1@5", "nDCG@5", "nDCG", "AP", "AP@5", "RR", "RR@5", "Hit@5"]


def test_empty_ranking_scores_zero_everywhere():
    scores = evaluate_rankings([[]], [{"a", "b"}], [*ALL_FAMILIES, "R-Prec"])
    assert {name: float(values[0]) for name, values in scores.items()} == dict.fromkeys(
        [*ALL_FAMILIES, "R-Prec"], 0.0
    )
    assert scores.computable.tolist() == [True]
    assert scores.reasons == (None,)
    assert scores.n_retrieved.tolist() == [0]


def test_empty_or_missing_relevant_set_is_nan_with_reason():
    scores = evaluate_rankings(
        [["a", "b"], ["a"], ["a"], []], [set(), None, ["a"], []], [*ALL_FAMILIES, "R-Prec"]
    )
    for name in [*ALL_FAMILIES, "R-Prec"]:
        values = scores[name]
        assert np.isnan(values[0]) and np.isnan(values[1]) and np.isnan(values[3]), name
        assert values[2] == _one(["a"], ["a"], name), name  # rows do not affect each other
        # one relevant id at rank 1: P@5 = 1/5, F1@5 = 2*1/(5+1), every other metric 1
        assert values[2] == pytest.approx({"P@5": 1 / 5, "F1@5": 1 / 3}.get(name, 1.0)), name
    assert scores.computable.tolist() == [False, False, True, False]
    assert scores.reasons == (
        "empty relevant set: there is nothing to retrieve",
        "relevant set missing (None)",
        None,
        "empty relevant set: there is nothing to retrieve",
    )
    assert non_computable_reason(set()) == scores.reasons[0]
    assert non_computable_reason(None) == scores.reasons[1]
    assert non_computable_reason(["a"]) is None


def test_repeated_ids_count_once_at_first_position():
    # [x, x, a, x, b] is scored as [x, a, b]: hits at ranks 2 and 3.
    scores = evaluate_rankings([["x", "x", "a", "x", "b"]], [{"a", "b"}], ["P@3", "RR", "AP"])
    assert scores["P@3"][0] == pytest.approx(2 / 3)  # would be 1/3 with the repeats kept
    assert scores["RR"][0] == pytest.approx(1 / 2)
    assert scores["AP"][0] == pytest.approx((1 / 2 + 2 / 3) / 2)  # = 7/12
    assert scores.n_duplicates.tolist() == [2]
    assert scores.n_retrieved.tolist() == [3]


def test_repeated_relevant_ids_count_once_in_the_denominator():
    # relevant ["a", "a", "b"] is the set {a, b}: R = 2
    assert _one(["a"], ["a", "a", "b"], "R@1") == pytest.approx(1 / 2)
    assert evaluate_rankings([["a"]], [["a", "a", "b"]], ["AP"]).n_relevant.tolist() == [2]


def test_accepts_tuples_arrays_frozensets_and_non_string_ids():
    scores = evaluate_rankings(
        (("a", "b"), np.array(["c", "d"]), [3, 1, 2]),
        (frozenset({"b"}), ["d"], {1}),
        ["RR"],
    )
    assert scores["RR"].tolist() == [1 / 2, 1 / 2, 1 / 2]


def test_many_rankings_keep_their_rows():
    rankings = [RANKING_LATE, [], RANKING_MIXED, ["q"]]
    relevant = [RELEVANT_LATE, {"a"}, RELEVANT_MIXED, set()]
    rr = evaluate_rankings(rankings, relevant, ["RR"])["RR"]
    assert rr[:3].tolist() == [1 / 3, 0.0, 1.0]
    assert np.isnan(rr[3])


def test_zero_rankings_give_empty_arrays():
    scores = evaluate_rankings([], [], ["P@5", "AP"])
    assert scores["P@5"].shape == (0,) and scores["AP"].dtype == np.float64
    assert scores.n_rankings == 0


# -- result object -------------------------------------------------------------------------


def test_result_mapping_keys_aliases_and_read_only_arrays():
    scores = evaluate_rankings([RANKING_MIXED], [RELEVANT_MIXED], ["ndcg@3", "MAP", "AP", "mrr"])
    assert list(scores) == ["nDCG@3", "AP", "RR"]  # canonical, request order, duplicates merged
    assert scores.metrics == (Metric("nDCG", 3), Metric("AP"), Metric("RR"))
    assert scores["ndcg@3"] is scores["nDCG@3"]
    assert scores[Metric("AP")][0] == pytest.approx(17 / 30)
    assert "MRR" in scores and "P@5" not in scores and "bogus" not in scores
    with pytest.raises(KeyError):
        scores["P@5"]
    with pytest.raises(ValueError):
        scores["AP"][0] = 0.0
    assert dict(scores).keys() == {"nDCG@3", "AP", "RR"}


def test_repr_is_a_short_summary():
    scores = evaluate_rankings([["a"]] * 5000, [{"a"}] * 4999 + [set()], ["P@1", "AP"])
    assert (
        repr(scores) == "RankingScores(metrics=['P@1', 'AP'], n_rankings=5000, n_computable=4999)"
    )


def test_single_metric_name_is_accepted():
    assert list(evaluate_rankings([["a"]], [{"a"}], "Hit@1")) == ["Hit@1"]


def test_mean_skips_non_computable_rows_and_reports_n():
    scores = evaluate_rankings(
        [RANKING_MIXED, RANKING_LATE, ["a"]], [RELEVANT_MIXED, RELEVANT_LATE, []], ["RR"]
    )
    # (1 + 1/3) / 2 over the two computable rankings
    assert scores.mean("MRR") == MeanScore("RR", pytest.approx(2 / 3), 2, 1)
    nothing = evaluate_rankings([["a"]], [[]], ["RR"]).mean("RR")
    assert math.isnan(nothing.mean) and nothing.n == 0 and nothing.n_non_computable == 1


def test_to_frame_has_one_row_per_ranking():
    frame = evaluate_rankings(
        [RANKING_LATE, ["a", "a"]], [RELEVANT_LATE, None], ["RR", "P@1"]
    ).to_frame()
    assert isinstance(frame, pd.DataFrame)
    assert frame.columns.tolist() == [
        "RR",
        "P@1",
        "computable",
        "non_computable_reason",
        "n_relevant",
        "n_retrieved",
        "n_duplicates",
    ]
    assert frame["RR"].iloc[0] == pytest.approx(1 / 3) and math.isnan(frame["RR"].iloc[1])
    assert frame["computable"].tolist() == [True, False]
    assert pd.isna(frame["non_computable_reason"].iloc[0])
    assert frame["non_computable_reason"].iloc[1] == "relevant set missing (None)"
    assert frame["n_duplicates"].tolist() == [0, 1]


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rankings", "relevant", "message"),
    [
        ([["a"]], [{"a"}, {"b"}], "1 rankings but 2 relevant sets"),
        (["abc"], [{"a"}], "ranking 0: a ranking must be an ordered sequence of ids, got str"),
        ([["a"], {"a", "b"}], [{"a"}, {"a"}], "ranking 1: .* got set"),
        ([{"a": 1.0}], [{"a"}], "got dict .*rank_by_score"),
        ([["a"]], ["a"], "ranking 0: the relevant set must be a collection of ids, got str"),
        ([["a"]], [{"a": 1, "b": 0}], "got dict .*grade is positive"),
        ([["a"], [["unhashable"]]], [{"a"}, {"a"}], r"ranking 1: .*unhashable type: 'list'"),
        ([["a"]], [[["x"]]], r"ranking 0: .*unhashable"),
        ([["a"], 7], [{"a"}, {"a"}], "ranking 1: rankings must be sequences"),
        ("ab", "ab", "not strings"),
        ((r for r in [["a"]]), [{"a"}], "must be sequences"),
    ],
)
def test_bad_inputs_raise_metric_error(rankings, relevant, message):
    with pytest.raises(MetricError, match=message):
        evaluate_rankings(rankings, relevant, ["P@1"])


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ([], "no metrics requested; known metrics: " + re.escape(KNOWN)),
        (["P@5", "nope"], "'nope': unknown metric; known metrics: P@k, "),
        ([3], "a metric name must be a string, got int"),
        (3, "metrics must be a sequence of names or Metric objects, got 3"),
    ],
)
def test_bad_metric_lists_raise_metric_error(metrics, message):
    with pytest.raises(MetricError, match=message):
        evaluate_rankings([["a"]], [{"a"}], metrics)


# -- names and registry --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "family", "k", "canonical"),
    [
        ("P@5", "P", 5, "P@5"),
        ("precision@5", "P", 5, "P@5"),
        ("R@10", "R", 10, "R@10"),
        ("R", "R", None, "R"),
        ("f1@3", "F1", 3, "F1@3"),
        ("nDCG@10", "nDCG", 10, "nDCG@10"),
        ("NDCG", "nDCG", None, "nDCG"),
        ("AP", "AP", None, "AP"),
        ("map@100", "AP", 100, "AP@100"),
        ("RR", "RR", None, "RR"),
        ("MRR@10", "RR", 10, "RR@10"),
        ("Hit@5", "Hit", 5, "Hit@5"),
        ("Hit", "Hit", None, "Hit"),
        ("hit_rate@5", "Hit", 5, "Hit@5"),
        ("success@1", "Hit", 1, "Hit@1"),
        ("R-Prec", "R-Prec", None, "R-Prec"),
        ("Rprec", "R-Prec", None, "R-Prec"),
        ("r-precision", "R-Prec", None, "R-Prec"),
        (" P @ 5 ", "P", 5, "P@5"),
    ],
)
def test_parse_metric_accepts_names_and_aliases(name, family, k, canonical):
    metric = parse_metric(name)
    assert (metric.family, metric.k, metric.name, str(metric)) == (family, k, canonical, canonical)
    assert parse_metric(metric.name) == metric
    assert parse_metric(metric) is metric


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "BPref",
            "'BPref': unknown metric; known metrics: " + KNOWN,
        ),
        ("P", "P needs a cut-off, e.g. P@10"),
        ("F1", "F1 needs a cut-off"),
        ("R-Prec@5", "R-Prec takes no cut-off"),
        ("P@0", "must be a positive integer, got '0'"),
        ("P@-1", "must be a positive integer, got '-1'"),
        ("P@1.5", "must be a positive integer, got '1.5'"),
        ("P@", "must be a positive integer, got ''"),
        ("P@x", "must be a positive integer, got 'x'"),
        ("P@٣", "must be a positive integer"),  # a non-ASCII digit
        ("P@5@5", "must be a positive integer"),
        ("", "'': unknown metric"),
        (5, "must be a string, got int"),
    ],
)
def test_parse_metric_rejects_bad_names(name, message):
    with pytest.raises(MetricError, match=re.escape(message)) as raised:
        parse_metric(name)
    if isinstance(name, str):  # every bad name lists the known metrics
        assert str(raised.value).endswith("; known metrics: " + KNOWN)


@pytest.mark.parametrize(
    ("family", "k", "message"),
    [
        ("precision", 5, "unknown metric family 'precision'"),
        ("P", None, "needs a cut-off"),
        ("P", 0, "positive integer, got 0"),
        ("P", True, "positive integer, got True"),
        ("P", 2.0, "positive integer, got 2.0"),
        ("R-Prec", 3, "takes no cut-off"),
    ],
)
def test_metric_constructor_validates(family, k, message):
    with pytest.raises(MetricError, match=message):
        Metric(family, k)


def test_metric_is_frozen_hashable_and_normalises_numpy_k():
    metric = Metric("P", np.int64(5))
    assert metric.k == 5 and type(metric.k) is int
    assert {metric, Metric("P", 5)} == {Metric("P", 5)}
    with pytest.raises(AttributeError):
        metric.k = 3  # type: ignore[misc]


def test_registry_lists_every_family_with_its_definition():
    specs = list(METRICS.values())
    assert [spec.family for spec in specs] == list(METRICS)
    assert list(METRICS) == ["P", "R", "F1", "nDCG", "AP", "RR", "Hit", "R-Prec"]
    assert {spec.family: spec.cutoff for spec in specs} == {
        "P": "required",
        "R": "optional",
        "F1": "required",
        "nDCG": "optional",
        "AP": "optional",
        "RR": "optional",
        "Hit": "optional",
        "R-Prec": "none",
    }
    assert all(len(spec.definition) > 40 and spec.trec_eval for spec in specs)
    with pytest.raises(TypeError):
        METRICS["X"] = METRICS["P"]  # type: ignore[index]


def test_every_registered_family_is_computable():
    names = [f"{family}@3" if spec.cutoff != "none" else family for family, spec in METRICS.items()]
    scores = evaluate_rankings([RANKING_MIXED], [RELEVANT_MIXED], names)
    assert set(scores) == set(names) and all(np.isfinite(v[0]) for v in scores.values())


# -- rank_by_score -------------------------------------------------------------------------


def test_rank_by_score_orders_by_score_then_id_descending():
    items = [("a", 0.5), ("b", 0.9), ("c", 0.5), ("d", -1.0), ("e", float("inf"))]
    assert rank_by_score(items) == ["e", "b", "c", "a", "d"]
    assert rank_by_score({"doc2": 1, "doc10": 1}.items()) == ["doc2", "doc10"]  # "doc2" > "doc10"
    assert rank_by_score([(1, 0.5), (2, 0.5)]) == [2, 1]
    assert rank_by_score([("a", np.float32(0.1)), ("b", np.float64(0.2))]) == ["b", "a"]
    assert rank_by_score([]) == []


def test_rank_by_score_keeps_repeats_for_the_kernel_to_drop():
    ranking = rank_by_score([("a", 0.2), ("b", 0.5), ("a", 0.9)])
    assert ranking == ["a", "b", "a"]
    scores = evaluate_rankings([ranking], [{"b"}], ["RR"])
    assert scores["RR"][0] == 0.5 and scores.n_duplicates.tolist() == [1]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([("a", float("nan"))], "item 0: score of 'a' is NaN"),
        ([("a", 1.0), ("b", "high")], "item 1: score of 'b' is not a number"),
        ([("a", True)], "is not a number"),
        ([("a", 1.0, 2)], r"item 0: expected an \(id, score\) pair"),
        ([("a", 1.0), "ab"], r"item 1: expected an \(id, score\) pair, got 'ab'"),
        ([("a", 1.0), 5], r"item 1: expected an \(id, score\) pair, got 5"),
        ([("a", 1.0), (2, 1.0)], "ids cannot be ordered to break score ties"),
    ],
)
def test_rank_by_score_rejects_bad_items(items, message):
    with pytest.raises(MetricError, match=message):
        rank_by_score(items)


def test_rank_by_score_allows_mixed_id_types_without_ties():
    assert rank_by_score([("a", 1.0), (2, 2.0)]) == [2, "a"]


def test_rows_are_scored_independently_of_each_other():
    """Scoring 300 random rankings together equals scoring each alone (no cross-row leaks)."""
    rng = np.random.default_rng(3)
    names = ["P@3", "R@5", "F1@5", "nDCG@5", "nDCG", "AP", "AP@3", "RR", "RR@2", "Hit@3", "R-Prec"]
    rankings, relevant = [], []
    for _ in range(300):
        pool = [f"f{j}" for j in range(int(rng.integers(1, 30)))]
        rankings.append(list(rng.choice(pool, size=int(rng.integers(0, 25)))))  # with repeats
        n_relevant = min(len(pool), int(rng.integers(0, 6)))
        relevant.append(set(rng.choice(pool, size=n_relevant, replace=False)))
    together = evaluate_rankings(rankings, relevant, names)
    for i, (ranking, rel) in enumerate(zip(rankings, relevant, strict=True)):
        alone = evaluate_rankings([ranking], [rel], names)
        for name in names:
            np.testing.assert_array_equal(together[name][i : i + 1], alone[name], err_msg=name)
        assert together.n_duplicates[i] == len(ranking) - len(set(ranking))
    computable = together.computable
    assert computable.sum() > 200 and (~computable).sum() > 20
    assert all(not np.isnan(together[name][computable]).any() for name in names)

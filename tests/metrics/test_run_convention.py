"""The ranx / pytrec_eval calling convention (``evaluate_queries``), graded nDCG in the kernel and
the fast path of ``rank_by_score``, against pytrec_eval and ranx on random runs."""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest

from retrieval_lib.errors import MetricError
from retrieval_lib.metrics.ranking import evaluate_queries, evaluate_rankings, rank_by_score

pytrec_eval = pytest.importorskip("pytrec_eval")

PYTREC = {
    "P@3": "P_3",
    "R@10": "recall_10",
    "nDCG@5": "ndcg_cut_5",
    "nDCG": "ndcg",
    "AP": "map",
    "AP@5": "map_cut_5",
    "RR": "recip_rank",
    "Hit@3": "success_3",
    "R-Prec": "Rprec",
}


def _random_run(seed: int, *, graded: bool) -> tuple[dict, dict]:
    rng = random.Random(seed)
    run: dict[str, dict[str, float]] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in range(400):
        pool = [f"src/m{j:02d}.py" for j in range(rng.randint(1, 50))]
        retrieved = rng.sample(pool, rng.randint(0, len(pool)))
        ties = rng.random() < 0.5
        run[f"q{q}"] = {
            doc: float(rng.randint(0, 3)) if ties else rng.random() for doc in retrieved
        }
        judged = rng.sample(pool, rng.randint(1, len(pool)))
        qrels[f"q{q}"] = {
            doc: (rng.choice([0, 1, 2, 3]) if graded else rng.choice([0, 1])) for doc in judged
        }
    return run, qrels


@pytest.mark.parametrize("graded", [False, True])
def test_score_dict_runs_equal_pytrec_eval(graded):
    run, qrels = _random_run(7 + graded, graded=graded)
    mine = evaluate_queries(run, qrels, list(PYTREC))
    theirs = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC.values())).evaluate(run)
    compared = 0
    for qid, values in mine.items():
        relevant = any(g >= 1 for g in qrels[qid].values())
        for name, measure in PYTREC.items():
            if not relevant:
                assert math.isnan(values[name])  # missing, not 0
            elif qid in theirs:
                assert values[name] == pytest.approx(theirs[qid][measure], abs=1e-9), (qid, name)
                compared += 1
            else:  # an empty ranking: pytrec_eval leaves the query out, it scores 0
                assert run[qid] == {} and values[name] == 0.0
    assert compared > 2500


def test_list_runs_give_the_same_values_as_evaluate_rankings():
    run = {"a": ["x", "y", "z"], "b": ("y",)}
    qrels = {"a": {"z": 1, "w": 1}, "b": {"x": 1}, "c": {"x": 1}}
    scores = evaluate_queries(run, qrels, ["AP", "RR"])
    assert list(scores) == ["a", "b"]  # c is in the qrels only: not scored
    assert scores["a"] == {"AP": pytest.approx((1 / 3) / 2), "RR": pytest.approx(1 / 3)}
    assert scores.metric("RR") == {"a": pytest.approx(1 / 3), "b": 0.0}
    flat = evaluate_rankings([["x", "y", "z"], ["y"]], [{"z", "w"}, {"x"}], ["AP", "RR"])
    assert scores.rankings["AP"].tolist() == flat["AP"].tolist()


def test_queries_without_judgements_are_skipped_and_listed():
    scores = evaluate_queries({"q1": ["a"], "q2": ["b"]}, {"q1": {"a": 1}}, ["P@1"])
    assert list(scores) == ["q1"] and scores.skipped_not_in_qrels == ("q2",)


def test_equals_ranx():
    ranx = pytest.importorskip("ranx")
    run, qrels = _random_run(11, graded=False)
    # ranx breaks score ties its own way: untied queries with a relevant id only
    run = {
        q: docs
        for q, docs in run.items()
        if docs and any(qrels[q].values()) and len(set(docs.values())) == len(docs)
    }
    qrels = {q: qrels[q] for q in run}
    mine = evaluate_queries(run, qrels, ["P@3", "AP", "RR", "nDCG@5"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ranx_run = ranx.Run.from_dict(run)
        ranx.evaluate(ranx.Qrels.from_dict(qrels), ranx_run, ["precision@3", "map", "mrr"])
    for qid in run:
        assert mine[qid]["P@3"] == pytest.approx(ranx_run.scores["precision@3"][qid])
        assert mine[qid]["AP"] == pytest.approx(ranx_run.scores["map"][qid])
        assert mine[qid]["RR"] == pytest.approx(ranx_run.scores["mrr"][qid])


@pytest.mark.parametrize(
    ("rankings", "relevant", "words"),
    [
        ({"q1": ["a"]}, [{"a"}], "got a mapping"),
        ([["a"]], {"q1": {"a": 1}}, "got a mapping"),
    ],
)
def test_evaluate_rankings_refuses_dicts_naming_the_shapes(rankings, relevant, words):
    with pytest.raises(MetricError) as info:
        evaluate_rankings(rankings, relevant, ["RR"])
    message = str(info.value)
    assert words in message and "ranking 0" not in message
    assert "{qid: [id, ...]}" in message and "{qid: {id: score}}" in message


@pytest.mark.parametrize(
    ("run", "qrels", "words"),
    [
        ([["a"]], {"q": {"a": 1}}, "run must be a mapping keyed by query id"),
        ({"q": "abc"}, {"q": {"a": 1}}, "run['q'] is a str"),
        ({"q": {"a", "b"}}, {"q": {"a": 1}}, "run['q'] is a set"),
        ({"q": ["a"]}, {"q": ["a"]}, "qrels['q'] is a list"),
        ({"q": ["a"]}, {"q": {"a": "yes"}}, "the grade must be a number"),
        ({"q": {"a": "high"}}, {"q": {"a": 1}}, "not a number"),
        ({"q": {"a": float("nan")}}, {"q": {"a": 1}}, "is NaN"),
    ],
)
def test_evaluate_run_refuses_other_shapes(run, qrels, words):
    with pytest.raises(MetricError, match=None) as info:
        evaluate_queries(run, qrels, ["RR"])
    assert words in str(info.value)


def test_graded_ndcg_by_hand():
    # gains 3 (rank 2) and 1 (rank 3); ideal 3, 2, 1 (the judged but unretrieved 2 counts)
    scores = evaluate_queries({"q": ["x", "a", "b"]}, {"q": {"a": 3, "b": 1, "c": 2}}, ["nDCG"])
    dcg = 3 / math.log2(3) + 1 / math.log2(4)
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert scores["q"]["nDCG"] == pytest.approx(dcg / ideal)


def test_rank_by_score_fast_path_equals_the_careful_path():
    rng = random.Random(3)
    for _ in range(500):
        n = rng.randint(0, 30)
        scores = {f"d{rng.randint(0, 99):02d}": float(rng.randint(0, 4)) for _ in range(n)}
        if rng.random() < 0.5:
            scores = {doc: rng.random() for doc in scores}
        careful = sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
        expected = [doc for doc, _ in careful]
        assert rank_by_score(scores) == expected
        assert rank_by_score(scores.items()) == expected
        assert rank_by_score(list(scores.items())) == expected


@pytest.mark.parametrize(
    "scores",
    [
        {"a": 1, "b": 2.5, "c": True and 2},  # ints and floats mixed
        {"a": np.float64(0.5), "b": 0.7},
        {"a": 1.0, "b": float("inf"), "c": -float("inf")},
    ],
)
def test_rank_by_score_other_number_types_take_the_careful_path(scores):
    expected = [d for d, _ in sorted(scores.items(), key=lambda i: (i[1], i[0]), reverse=True)]
    assert rank_by_score(scores) == expected


def test_rank_by_score_still_refuses_nan_and_non_numbers():
    with pytest.raises(MetricError, match="NaN"):
        rank_by_score({"a": 1.0, "b": float("nan")})
    with pytest.raises(MetricError, match="not a number"):
        rank_by_score({"a": "1.0"})
    with pytest.raises(MetricError, match="cannot be ordered"):
        rank_by_score({"a": 1.0, 2: 1.0})


def test_score_dicts_with_ties_and_other_types_rank_as_the_careful_path():
    # the kernel ranks float-score dicts without sorting them; ints, numpy floats and ties
    # give the same values as rank_by_score's careful path
    qrels = {"q": {"b": 1, "d": 2}}
    for run in (
        {"q": {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.5}},
        {"q": {"a": 1, "b": 1, "c": 1, "d": 0.5}},
        {"q": {"a": np.float64(1.0), "b": 1.0, "c": 1.0, "d": 0.5}},
    ):
        scores = evaluate_queries(run, qrels, ["RR", "AP", "nDCG"])
        # order c, b, a, d (ties by id descending): b at 2, d at 4
        assert scores["q"]["RR"] == 0.5
        assert scores["q"]["AP"] == pytest.approx((1 / 2 + 2 / 4) / 2)
        ideal = 2 + 1 / math.log2(3)
        dcg = 1 / math.log2(3) + 2 / math.log2(5)
        assert scores["q"]["nDCG"] == pytest.approx(dcg / ideal)


def test_score_dict_ties_between_unorderable_ids_are_refused():
    with pytest.raises(MetricError, match="cannot be ordered"):
        evaluate_queries({"q": {"a": 1.0, 2: 1.0}}, {"q": {"a": 1}}, ["RR"])

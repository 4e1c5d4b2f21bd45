"""Aggregate metrics: every metric row of the seed's test plan, worked out by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kb_testutils import golden_entry, hit, write_golden, write_jsonl
from record_oracle import span_coverage

from retrieval_lib.kb.golden import parse_golden
from retrieval_lib.kb.ingest import ingest_run, parse_result
from retrieval_lib.kb.metrics import (
    AggregateMetrics,
    aggregate_from_records,
    compute_aggregate,
    store_aggregate,
)
from retrieval_lib.kb.records import Answer, Citation, Hit, QueryResult
from retrieval_lib.kb.store import KBStore


def _results(*rows: dict) -> dict[str, QueryResult]:
    parsed = [parse_result(r) for r in rows]
    return {r.query_id: r for r in parsed}


def _answer(text: str, grounded: bool = True, citations=()) -> dict:
    return {"text": text, "grounded": grounded, "citations": list(citations)}


@pytest.fixture
def ranks_1_4_miss():
    """Three queries whose expected chunk sits at rank 1, rank 4 and nowhere."""
    golden = parse_golden(
        [
            golden_entry("q1", ["d1"], ["c1"]),
            golden_entry("q2", ["d2"], ["c2"]),
            golden_entry("q3", ["d3"], ["c3"]),
        ]
    )
    results = _results(
        {"query_id": "q1", "hits": [hit("c1", "d1", 1), hit("x1", "dx", 2)]},
        {
            "query_id": "q2",
            "hits": [
                hit("x1", "dx", 1),
                hit("x2", "dx", 2),
                hit("x3", "dx", 3),
                hit("c2", "d2", 4),
            ],
        },
        {"query_id": "q3", "hits": [hit("x1", "dx", 1), hit("x2", "dx", 2)]},
    )
    return golden, results


def test_hit_at_k_on_ranks_1_4_and_miss(ranks_1_4_miss):
    agg = aggregate_from_records(*ranks_1_4_miss)
    # k=1 and k=3 see only q1; k=5 and k=10 see q1 and q2 (rank 4); q3 never.
    assert agg.hit_at_k == pytest.approx({1: 1 / 3, 3: 1 / 3, 5: 2 / 3, 10: 2 / 3})
    assert agg.denominators["hit_at_k"] == 3


def test_mrr_on_ranks_1_4_and_miss(ranks_1_4_miss):
    agg = aggregate_from_records(*ranks_1_4_miss)
    assert agg.mrr == pytest.approx((1 + 1 / 4 + 0) / 3)


def test_mrr_cuts_at_rank_10():
    golden = parse_golden([golden_entry("q1", ["d"], ["c"]), golden_entry("q2", ["d"], ["c"])])
    eleven = [hit(f"x{i}", "dx", i) for i in range(1, 11)] + [hit("c", "d", 11)]
    ten = [hit(f"x{i}", "dx", i) for i in range(1, 10)] + [hit("c", "d", 10)]
    agg = aggregate_from_records(
        golden, _results({"query_id": "q1", "hits": eleven}, {"query_id": "q2", "hits": ten})
    )
    assert agg.mrr == pytest.approx((0 + 1 / 10) / 2)
    assert agg.hit_at_k[10] == pytest.approx(0.5)


def test_queries_without_expected_chunks_are_not_in_hit_denominator():
    golden = parse_golden(
        [golden_entry("q1", ["d1"], ["c1"]), golden_entry("q2", ["d2"]), golden_entry("q3", [])]
    )
    results = _results(
        {"query_id": "q1", "hits": [hit("c1", "d1", 1)]},
        {"query_id": "q2", "hits": []},
        {"query_id": "q3", "hits": []},
    )
    agg = aggregate_from_records(golden, results)
    assert agg.hit_at_k[1] == 1.0 and agg.mrr == 1.0
    assert agg.denominators["hit_at_k"] == 1
    assert agg.denominators["recall_at_k_doc"] == 2


def test_recall_at_k_doc_counts_documents_of_the_top_k_hits():
    golden = parse_golden([golden_entry("q1", ["d1", "d2"]), golden_entry("q2", ["d9"])])
    results = _results(
        {
            "query_id": "q1",
            "hits": [hit("a", "d1", 1), hit("b", "d1", 2), hit("c", "d3", 3), hit("d", "d2", 4)],
        },
        {"query_id": "q2", "hits": [hit("e", "d9", 1)]},
    )
    agg = aggregate_from_records(golden, results)
    # q1: top-1 and top-3 hits cover d1 only (two of its hits are d1) -> 1/2; top-5 -> 2/2.
    # q2: always 1.
    assert agg.recall_at_k_doc == pytest.approx(
        {1: (0.5 + 1) / 2, 3: (0.5 + 1) / 2, 5: 1.0, 10: 1.0}
    )


def test_citation_coverage_broken_citation_is_zero():
    golden = parse_golden([golden_entry("q1", ["d1"], ["c1"])])
    results = _results(
        {
            "query_id": "q1",
            "hits": [hit("c1", "d1", 1)],
            "answer": _answer(
                "text [#1] [#2]",
                citations=[
                    {"citation": "[#1]", "chunk_id": "c1"},
                    {"citation": "[#2]", "chunk_id": "not-a-chunk"},
                ],
            ),
        }
    )
    agg = aggregate_from_records(golden, results, known_chunk_ids={"c1", "c2"})
    assert agg.citation_coverage == 0.0
    assert agg.denominators["citation_coverage"] == 1


def test_citation_coverage_counts_grounded_answers_only():
    golden = parse_golden(
        [
            golden_entry("q1", ["d1"], ["c1"]),
            golden_entry("q2", ["d1"], ["c1"]),
            golden_entry("q3", []),
        ]
    )
    good = [{"citation": "[#1]", "chunk_id": "c1"}]
    bad = [{"citation": "[#1]", "chunk_id": None}]
    results = _results(
        {"query_id": "q1", "hits": [hit("c1", "d1", 1)], "answer": _answer("a", citations=good)},
        {"query_id": "q2", "hits": [hit("c1", "d1", 1)], "answer": _answer("b", citations=bad)},
        {"query_id": "q3", "hits": [], "answer": _answer("no", grounded=False, citations=bad)},
    )
    agg = aggregate_from_records(golden, results, known_chunk_ids={"c1"})
    assert agg.citation_coverage == 0.5
    assert agg.denominators["citation_coverage"] == 2


def test_citations_resolve_against_retrieved_chunks_without_inventory():
    golden = parse_golden([golden_entry("q1", ["d1"], ["c1"]), golden_entry("q2", ["d2"], ["c2"])])
    results = _results(
        {
            "query_id": "q1",
            "hits": [hit("c1", "d1", 1)],
            "answer": _answer("a", citations=[{"citation": "[#1]", "chunk_id": "c2"}]),
        },
        {
            "query_id": "q2",
            "hits": [hit("c2", "d2", 1)],
            "answer": _answer("b", citations=[{"citation": "[#1]", "chunk_id": "c7"}]),
        },
    )
    agg = aggregate_from_records(golden, results)
    assert agg.citation_resolution == "retrieved_chunks"
    assert agg.citation_coverage == 0.5  # c2 was retrieved (by q2), c7 never


def test_groundedness_false_when_forbidden_string_appears():
    golden = parse_golden(
        [
            golden_entry("q1", ["d1"], ["c1"], must_contain=["Thursday"], forbidden=["Monday"]),
            golden_entry("q2", ["d1"], ["c1"], must_contain=["Thursday"], forbidden=["Monday"]),
        ]
    )
    results = _results(
        {"query_id": "q1", "hits": [hit("c1", "d1", 1)], "answer": _answer("on Thursday")},
        {"query_id": "q2", "hits": [hit("c1", "d1", 1)], "answer": _answer("Thursday or Monday")},
    )
    agg = aggregate_from_records(golden, results)
    assert agg.groundedness == 0.5


def test_groundedness_needs_every_must_contain_and_excludes_errors():
    golden = parse_golden(
        [
            golden_entry("q1", ["d1"], must_contain=["alpha", "beta"]),
            golden_entry("q2", ["d1"], must_contain=["alpha"]),
            golden_entry("q3", ["d1"], must_contain=["alpha"]),
        ]
    )
    results = _results(
        {"query_id": "q1", "hits": [], "answer": _answer("alpha only")},
        {"query_id": "q2", "hits": [], "answer": _answer("Alpha")},  # case-sensitive
        {"query_id": "q3", "hits": [], "answer": _answer("alpha"), "error": "timeout"},
    )
    agg = aggregate_from_records(golden, results)
    assert agg.groundedness == 0.0
    assert agg.denominators["groundedness"] == 2
    assert agg.failed_queries == 1


def test_refusal_correctness_is_one_when_every_should_refuse_query_refused():
    golden = parse_golden(
        [golden_entry("r1", []), golden_entry("r2", []), golden_entry("q1", ["d1"], ["c1"])]
    )
    results = _results(
        {"query_id": "r1", "hits": [], "answer": _answer("cannot say", grounded=False)},
        {"query_id": "r2", "hits": [hit("c1", "d1", 1)], "answer": _answer("no", grounded=False)},
        {"query_id": "q1", "hits": [hit("c1", "d1", 1)], "answer": _answer("yes")},
    )
    agg = aggregate_from_records(golden, results)
    assert agg.refusal_correctness == 1.0
    assert agg.denominators["refusal_correctness"] == 2


def test_refusal_correctness_counts_a_failed_should_refuse_query_as_not_refused():
    golden = parse_golden([golden_entry("r1", []), golden_entry("r2", [])])
    results = _results(
        {"query_id": "r1", "hits": [], "answer": _answer("no", grounded=False)},
        {"query_id": "r2", "hits": [], "error": "boom"},
    )
    assert aggregate_from_records(golden, results).refusal_correctness == 0.5


def test_refusal_correctness_is_null_for_a_run_without_answers():
    # a retrieval-only run cannot refuse: a should-refuse query makes the metric
    # missing (null, with the reason), not 0.0 ("did not refuse")
    golden = parse_golden([golden_entry("r1", []), golden_entry("q1", ["d1"], ["c1"])])
    results = _results(
        {"query_id": "r1", "hits": []},
        {"query_id": "q1", "hits": [hit("c1", "d1", 1)]},
    )
    agg = aggregate_from_records(golden, results)
    assert math.isnan(agg.refusal_correctness)
    stored = json.loads(agg.to_json())
    assert stored["refusal_correctness"] is None
    assert stored["null_reasons"]["refusal_correctness"] == (
        "the run has no answers, so it cannot refuse"
    )
    assert agg.hit_at_k[1] == 1.0  # the retrieval metrics are still there


def test_empty_result_rate_and_totals():
    golden = parse_golden([golden_entry(f"q{i}", ["d"]) for i in range(4)])
    results = _results(
        {"query_id": "q0", "hits": []},
        {"query_id": "q1", "hits": [hit("c", "d", 1)]},
        {"query_id": "q2", "hits": [], "error": "timeout"},
        # q3 has no line at all
    )
    agg = aggregate_from_records(golden, results)
    assert (agg.total_queries, agg.failed_queries) == (4, 2)
    assert agg.empty_result_rate == 0.5  # of the two queries that ran, one was empty
    assert agg.denominators["empty_result_rate"] == 2
    # failed and missing queries are misses for recall
    assert agg.recall_at_k_doc[10] == pytest.approx(1 / 4)


def test_nan_metrics_serialise_as_null(tmp_path):
    golden = parse_golden([golden_entry("q1", ["d1"], ["c1"])])
    results = _results({"query_id": "q1", "hits": [hit("c1", "d1", 1)]})  # no answer at all
    agg = aggregate_from_records(golden, results)
    assert math.isnan(agg.citation_coverage) and math.isnan(agg.groundedness)
    assert math.isnan(agg.refusal_correctness)
    stored = json.loads(agg.to_json())
    assert stored["citation_coverage"] is None
    assert stored["groundedness"] is None
    assert stored["refusal_correctness"] is None
    assert (
        stored["null_reasons"]["refusal_correctness"] == "the golden set has no should-refuse query"
    )
    assert stored["hit_at_k"]["1"] == 1.0
    # and through the database column
    g = write_golden(tmp_path / "g.yaml", [golden_entry("q1", ["d1"], ["c1"])])
    r = write_jsonl(tmp_path / "r.jsonl", [{"query_id": "q1", "hits": [hit("c1", "d1", 1)]}])
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(store, r, g, run_id="run")
        store_aggregate(store, "run", compute_aggregate(store, "run"))
        column = store.conn.execute("SELECT aggregate_json FROM eval_runs").fetchone()[0]
    assert "NaN" not in column
    assert json.loads(column)["citation_coverage"] is None


def test_rounding_to_four_decimals_happens_on_storage_only():
    golden = parse_golden([golden_entry(f"q{i}", ["d"], ["c"]) for i in range(3)])
    results = _results(
        {"query_id": "q0", "hits": [hit("c", "d", 1)]},
        {"query_id": "q1", "hits": []},
        {"query_id": "q2", "hits": []},
    )
    agg = aggregate_from_records(golden, results)
    assert agg.mrr == 1 / 3
    assert json.loads(agg.to_json())["mrr"] == 0.3333
    assert AggregateMetrics.from_dict(json.loads(agg.to_json())).mrr == 0.3333


def test_compute_aggregate_of_a_stored_run_by_hand_and_twice_identical(tmp_path):
    entries = [
        golden_entry(f"q{i}", [f"d{i % 3}"], [f"c{i}"], must_contain=["x"]) for i in range(20)
    ]
    entries.append(golden_entry("r", []))
    g = write_golden(tmp_path / "g.yaml", entries)
    rows = []
    for i in range(20):
        hits = [
            hit(f"c{(i + j) % 20}", f"d{(i + j) % 3}", j + 1, 1.0 / (j + 1)) for j in range(i % 7)
        ]
        rows.append({"query_id": f"q{i}", "hits": hits, "answer": _answer("x" if i % 2 else "y")})
    rows.append({"query_id": "r", "hits": [], "answer": _answer("no", grounded=False)})
    r = write_jsonl(tmp_path / "r.jsonl", rows)
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(store, r, g, run_id="run")
        first = compute_aggregate(store, "run")
        second = compute_aggregate(store, "run")
    assert first.to_json() == second.to_json()
    # by hand: q{i} has i % 7 hits starting with its own chunk c{i} (doc d{i % 3}) at
    # rank 1, so the 17 queries with i % 7 != 0 (all but 0, 7, 14) hit at every k
    assert first.hit_at_k == dict.fromkeys((1, 3, 5, 10), 17 / 20)
    assert first.mrr == 17 / 20
    assert first.recall_at_k_doc == dict.fromkeys((1, 3, 5, 10), 17 / 20)
    # zero hits: q0, q7, q14 and the should-refuse r, of 21 queries that ran
    assert first.empty_result_rate == 4 / 21
    # ten odd i answered "x"; the refusal has nothing it must contain, so it counts too
    assert first.groundedness == 11 / 21
    assert first.refusal_correctness == 1.0  # r answered grounded=False
    assert first.citation_coverage == 1.0  # 20 grounded answers, none with a citation
    assert (first.total_queries, first.failed_queries) == (21, 0)
    assert first.denominators == {
        "hit_at_k": 20,
        "mrr": 20,
        "recall_at_k_doc": 20,
        "citation_coverage": 20,
        "groundedness": 21,
        "empty_result_rate": 21,
        "refusal_correctness": 1,
    }
    assert json.loads(first.to_json())["empty_result_rate"] == 0.1905  # 4 / 21 rounded


def test_span_coverage_merges_and_intersects():
    assert span_coverage([(0, 10)], [(0, 20)]) == (10, 20)
    assert span_coverage([(0, 10), (5, 15)], [(0, 20)]) == (15, 20)
    assert span_coverage([(100, 200)], [(0, 50), (150, 250)]) == (50, 150)
    assert span_coverage([], [(0, 5)]) == (0, 5)


def test_records_round_trip():
    result = QueryResult(
        "q1",
        (Hit("c1", "d1", 1, 0.5, ((0, 10),)),),
        Answer("t", True, (Citation("[#1]", "c1"),)),
        None,
        {"latency_ms": 12},
    )
    assert QueryResult.from_dict(result.to_dict()) == result


def test_citation_markers_must_be_strict():
    golden = parse_golden([golden_entry(f"q{i}", ["d1"], ["c1"]) for i in range(7)])
    rows = []
    markers = ["[#1]", "[1]", "[#0]", "see chunk 1", "see [#1]", "[#1] above", " [#1]"]
    for i, marker in enumerate(markers):
        rows.append(
            {
                "query_id": f"q{i}",
                "hits": [hit("c1", "d1", 1)],
                "answer": _answer("t", citations=[{"citation": marker, "chunk_id": "c1"}]),
            }
        )
    agg = aggregate_from_records(golden, _results(*rows), known_chunk_ids={"c1"})
    # only the bare "[#1]" is a citation marker: one inside other text is not
    assert agg.citation_coverage == 1 / 7
    assert agg.denominators["citation_coverage"] == 7


spans_strategy = st.lists(
    st.tuples(st.integers(0, 60), st.integers(1, 30)).map(lambda t: (t[0], t[0] + t[1])),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(hit_spans=spans_strategy, expected_spans=spans_strategy)
def test_span_coverage_matches_character_sets(hit_spans, expected_spans):
    def chars(spans):
        return {i for s, e in spans for i in range(s, e)}

    covered, total = span_coverage(hit_spans, expected_spans)
    assert total == len(chars(expected_spans))
    assert covered == len(chars(hit_spans) & chars(expected_spans))


def test_hit_at_k_and_mrr_agree_with_pytrec_eval_on_random_runs():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = np.random.default_rng(11)
    entries, rows, qrels, run = [], [], {}, {}
    for i in range(300):
        expected = [f"c{j}" for j in rng.choice(40, size=int(rng.integers(1, 4)), replace=False)]
        retrieved = [f"c{j}" for j in rng.choice(40, size=int(rng.integers(0, 11)), replace=False)]
        entries.append(golden_entry(f"q{i}", ["d"], expected))
        rows.append(
            {"query_id": f"q{i}", "hits": [hit(c, "d", r) for r, c in enumerate(retrieved, 1)]}
        )
        qrels[f"q{i}"] = {c: 1 for c in expected}
        # pytrec_eval ranks by score; give rank r the score 100 - r
        run[f"q{i}"] = {c: float(100 - r) for r, c in enumerate(retrieved, 1)} or {"none": 0.0}
    agg = aggregate_from_records(parse_golden(entries), _results(*rows))
    measures = {"recip_rank", "success_1", "success_3", "success_5", "success_10"}
    reference = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)

    def mean(m):
        return sum(v[m] for v in reference.values()) / len(reference)

    assert agg.mrr == pytest.approx(mean("recip_rank"), abs=1e-12)
    for k in (1, 3, 5, 10):
        assert agg.hit_at_k[k] == pytest.approx(mean(f"success_{k}"), abs=1e-12)


def test_expected_chunks_missing_from_the_inventory_are_not_computable_not_misses(tmp_path):
    golden_rows = [
        golden_entry("q1", ["d1"], ["v1:a"]),  # v1 ids: not in this run's inventory
        golden_entry("q2", ["d1"], ["v2:b"]),
        golden_entry("q3", ["d1"], ["v1:a", "v2:c"]),  # one of them is: computable
    ]
    g = write_golden(tmp_path / "g.yaml", golden_rows)
    chunks = write_jsonl(
        tmp_path / "c.jsonl",
        [
            {"chunk_id": f"v2:{c}", "doc_id": "d1", "source_spans": [[i, i + 1]]}
            for i, c in enumerate("bcx")
        ],
    )
    rows = [
        {"query_id": "q1", "hits": [hit("v2:b", "d1", 1)]},
        {"query_id": "q2", "hits": [hit("v2:x", "d1", 1), hit("v2:b", "d1", 2)]},
        {"query_id": "q3", "hits": [hit("v2:x", "d1", 1)]},
    ]
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(
            store, write_jsonl(tmp_path / "r.jsonl", rows), g, chunks_path=chunks, run_id="r"
        )
        agg = compute_aggregate(store, "r")
    assert agg.denominators["mrr"] == 2  # q2 and q3
    assert agg.mrr == pytest.approx((1 / 2 + 0) / 2)
    assert agg.null_reasons["hit_at_k_excluded"] == (
        "1 query excluded: none of its expected chunks is in the run's chunk inventory "
        "(another chunker version?)"
    )
    # without an inventory the ids cannot be checked one by one: the run retrieved an
    # expected chunk (q2's v2:b), so its ids match and q1 is a plain miss
    plain = aggregate_from_records(parse_golden(golden_rows), _results(*rows))
    assert plain.denominators["mrr"] == 3
    assert plain.mrr == pytest.approx((0 + 1 / 2 + 0) / 3)
    # a run none of whose hits is an expected chunk cannot be matched at all (issue 21):
    # null with the reason, not 0
    alone = aggregate_from_records(parse_golden(golden_rows[:1]), _results(rows[0]))
    assert math.isnan(alone.mrr) and alone.denominators["mrr"] == 0
    assert "no chunk inventory was ingested" in alone.null_reasons["mrr"]

"""compare_runs: per-query kinds, chunker-version fallback, significance, snapshot."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from kb_testutils import golden_entry, hit, write_golden, write_jsonl
from scipy.stats import wilcoxon

from retrieval_lib.kb.compare import (
    ComparisonKind,
    compare_records,
    compare_runs,
    paired_delta_stats,
)
from retrieval_lib.kb.exceptions import ChunkerVersionMismatchError
from retrieval_lib.kb.golden import GoldenSet, parse_golden
from retrieval_lib.kb.ingest import ingest_run, parse_result
from retrieval_lib.kb.store import KBStore

SNAPSHOT = Path(__file__).resolve().parent / "snapshots" / "compare-1.json"


def _results(*rows):
    parsed = [parse_result(r) for r in rows]
    return {r.query_id: r for r in parsed}


def _ranked(qid: str, expected_rank: int | None, expected: str = "c", doc: str = "d") -> dict:
    """Hits with the expected chunk at ``expected_rank`` (None: absent) among fillers."""
    n = max(expected_rank or 0, 3)
    hits = []
    for rank in range(1, n + 1):
        if rank == expected_rank:
            hits.append(hit(expected, doc, rank))
        else:
            hits.append(hit(f"{qid}-filler{rank}", "filler", rank))
    return {"query_id": qid, "hits": hits}


def test_win_loss_draw_regression_on_synthetic_ranks():
    #            A rank, B rank  -> kind
    table = {
        "win-new": (None, 2, ComparisonKind.WIN),
        "win-rank": (3, 1, ComparisonKind.WIN),
        "loss": (1, 4, ComparisonKind.LOSS),
        "draw-same": (2, 2, ComparisonKind.DRAW),
        "draw-miss": (None, None, ComparisonKind.DRAW),
        "regression": (1, None, ComparisonKind.REGRESSION),
        "regression-cut": (5, 11, ComparisonKind.REGRESSION),  # rank 11 is beyond the top 10
    }
    golden = parse_golden([golden_entry(q, ["d"], ["c"]) for q in table])
    a = _results(*(_ranked(q, ra) for q, (ra, _, _) in table.items()))
    b = _results(*(_ranked(q, rb) for q, (_, rb, _) in table.items()))
    report = compare_records("A", "B", golden, golden, a, b)
    by_id = {q.query_id: q for q in report.per_query}
    for qid, (ra, rb, kind) in table.items():
        assert by_id[qid].kind is kind, qid
        assert by_id[qid].a_hit_rank == ra
        assert by_id[qid].b_hit_rank == (rb if rb is not None and rb <= 10 else None)
        assert by_id[qid].note
    assert by_id["draw-miss"].note == "miss on both sides"
    assert by_id["draw-same"].note == "same rank 2"
    assert by_id["regression"].note == "A's hit at rank 1 on expected chunk 'c' is lost in B"
    assert report.kind_counts() == {"Win": 2, "Loss": 1, "Draw": 2, "Regression": 2}
    assert report.deltas["chunker_version_match"] == "exact"
    # MRR delta: A = (0 + 1/3 + 1 + 1/2 + 0 + 1 + 1/5) / 7, B = (1/2 + 1 + 1/4 + 1/2) / 7
    mrr_a = (1 / 3 + 1 + 1 / 2 + 1 + 1 / 5) / 7
    mrr_b = (1 / 2 + 1 + 1 / 4 + 1 / 2) / 7
    assert report.deltas["mrr"] == pytest.approx(mrr_b - mrr_a)


def test_failed_and_missing_queries_are_misses_with_a_note():
    golden = parse_golden([golden_entry("q1", ["d"], ["c"]), golden_entry("q2", ["d"], ["c"])])
    a = _results(_ranked("q1", 1), _ranked("q2", 1))
    b = _results({"query_id": "q1", "hits": [], "error": "timeout"})
    report = compare_records("A", "B", golden, golden, a, b)
    kinds = {q.query_id: (q.kind, q.note) for q in report.per_query}
    assert kinds["q1"][0] is ComparisonKind.REGRESSION and "run B failed: timeout" in kinds["q1"][1]
    assert kinds["q2"][0] is ComparisonKind.REGRESSION and "no result in run B" in kinds["q2"][1]


def test_should_refuse_and_doc_level_queries():
    golden = parse_golden(
        [
            golden_entry("r-lost", []),
            golden_entry("r-won", []),
            golden_entry("r-both", []),
            golden_entry("doc", ["d1"]),
        ]
    )
    refuse = {"text": "no", "grounded": False, "citations": []}
    answer = {"text": "yes", "grounded": True, "citations": []}
    a = _results(
        {"query_id": "r-lost", "hits": [], "answer": refuse},
        {"query_id": "r-won", "hits": [], "answer": answer},
        {"query_id": "r-both", "hits": [], "answer": refuse},
        {"query_id": "doc", "hits": [hit("x", "d0", 1), hit("y", "d1", 2)]},
    )
    b = _results(
        {"query_id": "r-lost", "hits": [], "answer": answer},
        {"query_id": "r-won", "hits": [], "answer": refuse},
        {"query_id": "r-both", "hits": [], "answer": refuse},
        {"query_id": "doc", "hits": [hit("y", "d1", 1)]},
    )
    report = compare_records("A", "B", golden, golden, a, b)
    got = {q.query_id: (q.kind, q.criterion, q.a_hit_rank, q.b_hit_rank) for q in report.per_query}
    assert got["r-lost"] == (ComparisonKind.REGRESSION, "refusal", None, None)
    assert got["r-won"] == (ComparisonKind.WIN, "refusal", None, None)
    assert got["r-both"] == (ComparisonKind.DRAW, "refusal", None, None)
    assert got["doc"] == (ComparisonKind.WIN, "doc", 2, 1)


def _fallback_golden(expected_span: tuple[int, int]) -> GoldenSet:
    golden = parse_golden([golden_entry("q", ["doc"], ["v1:c0"])])
    return GoldenSet(
        golden.queries,
        expected_chunk_spans={"v1:c0": {"doc_id": "doc", "source_spans": [list(expected_span)]}},
    )


@pytest.mark.parametrize(
    ("b_span", "counts"),
    [
        ((50, 300), True),  # covers [50, 100): 50 of 100 characters = exactly 50%
        ((51, 300), False),  # 49 of 100 characters = 49%
        ((0, 100), True),
        ((100, 200), False),  # touches, no overlap
    ],
)
def test_fallback_counts_exactly_half_and_not_49_percent(b_span, counts):
    golden = _fallback_golden((0, 100))
    a = _results({"query_id": "q", "hits": [hit("v1:c0", "doc", 1, spans=[[0, 100]])]})
    b = _results(
        {
            "query_id": "q",
            "hits": [
                hit("v2:other", "doc9", 1, spans=[[0, 100]]),
                hit("v2:p", "doc", 2, spans=[list(b_span)]),
            ],
        }
    )
    report = compare_records(
        "A", "B", golden, golden, a, b, chunker_version_a="v1", chunker_version_b="v2"
    )
    assert report.deltas["chunker_version_match"] == "fallback_doc_span"
    query = report.per_query[0]
    assert query.a_hit_rank == 1
    if counts:
        assert (query.kind, query.b_hit_rank) == (ComparisonKind.LOSS, 2)
        assert report.aggregate_b.mrr == 0.5
    else:
        assert (query.kind, query.b_hit_rank) == (ComparisonKind.REGRESSION, None)
        assert report.aggregate_b.mrr == 0.0
    assert report.aggregate_b.chunk_match == "fallback_doc_span"


def test_fallback_requires_the_expected_document():
    golden = _fallback_golden((0, 100))
    a = _results({"query_id": "q", "hits": [hit("v1:c0", "doc", 1, spans=[[0, 100]])]})
    # same offsets, other document: spans of different documents are not comparable
    b = _results({"query_id": "q", "hits": [hit("v2:p", "other", 1, spans=[[0, 100]])]})
    report = compare_records(
        "A", "B", golden, golden, a, b, chunker_version_a="v1", chunker_version_b="v2"
    )
    assert report.per_query[0].kind is ComparisonKind.REGRESSION


def test_fallback_without_known_spans_is_not_comparable():
    golden = parse_golden([golden_entry("q", ["doc"], ["v1:c0"])])  # no spans known
    a = _results({"query_id": "q", "hits": [hit("v1:c0", "doc", 1, spans=[[0, 100]])]})
    b = _results({"query_id": "q", "hits": [hit("v2:p", "doc", 1, spans=[[0, 100]])]})
    report = compare_records(
        "A", "B", golden, golden, a, b, chunker_version_a="v1", chunker_version_b="v2"
    )
    query = report.per_query[0]
    assert (query.kind, query.criterion) == (ComparisonKind.DRAW, "not_comparable")
    assert query.note == "not comparable: in run A, no spans known for its expected chunks"
    assert math.isnan(report.aggregate_a.mrr)
    assert (
        report.aggregate_a.null_reasons["mrr"]
        == "no query is computable: no spans known for its expected chunks"
    )
    assert report.deltas["significance"]["mrr"]["n"] == 0


def test_strict_chunker_version_refuses(tmp_path):
    g = write_golden(tmp_path / "g.yaml", [golden_entry("q", ["d"], ["c"])])
    r = write_jsonl(tmp_path / "r.jsonl", [{"query_id": "q", "hits": [hit("c", "d", 1)]}])
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(store, r, g, run_id="a", chunker_version="v1")
        ingest_run(store, r, g, run_id="b", chunker_version="v2")
        ingest_run(store, r, g, run_id="c", chunker_version="v1")
        with pytest.raises(ChunkerVersionMismatchError, match="'v1' vs 'v2'"):
            compare_runs(store, "a", "b", strict_chunker_version=True)
        assert compare_runs(store, "a", "b").chunker_version_match == "fallback_doc_span"
        same = compare_runs(store, "a", "c", strict_chunker_version=True)
        assert same.chunker_version_match == "exact"


def test_fallback_uses_spans_from_the_chunk_inventory(tmp_path):
    g = write_golden(tmp_path / "g.yaml", [golden_entry("q", ["doc"], ["v1:c0"])])
    chunks_a = write_jsonl(
        tmp_path / "ca.jsonl",
        [
            {"chunk_id": "v1:c0", "doc_id": "doc", "source_spans": [[0, 100]]},
            {"chunk_id": "v1:c1", "doc_id": "doc", "source_spans": [[100, 200]]},
        ],
    )
    chunks_b = write_jsonl(
        tmp_path / "cb.jsonl",
        [
            {"chunk_id": "v2:p0", "doc_id": "doc", "source_spans": [[0, 40]]},
            {"chunk_id": "v2:p1", "doc_id": "doc", "source_spans": [[40, 200]]},
        ],
    )
    # hits carry no spans: they come from each run's inventory
    ra = write_jsonl(
        tmp_path / "a.jsonl",
        [{"query_id": "q", "hits": [hit("v1:c1", "doc", 1), hit("v1:c0", "doc", 2)]}],
    )
    rb = write_jsonl(
        tmp_path / "b.jsonl",
        [{"query_id": "q", "hits": [hit("v2:p0", "doc", 1), hit("v2:p1", "doc", 2)]}],
    )
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(store, ra, g, chunks_path=chunks_a, run_id="a", chunker_version="v1")
        ingest_run(store, rb, g, chunks_path=chunks_b, run_id="b", chunker_version="v2")
        report = compare_runs(store, "a", "b")
    query = report.per_query[0]
    # p0 covers 40% of [0, 100); p1 covers 60% -> rank 2 on both sides
    assert (query.a_hit_rank, query.b_hit_rank, query.kind) == (2, 2, ComparisonKind.DRAW)


def test_golden_snapshot_protects_old_comparisons(tmp_path):
    g = write_golden(tmp_path / "g.yaml", [golden_entry("q", ["d"], ["c1"])])
    r = write_jsonl(
        tmp_path / "r.jsonl", [{"query_id": "q", "hits": [hit("c1", "d", 1), hit("c2", "d", 2)]}]
    )
    with KBStore(tmp_path / "eval.sqlite") as store:
        ingest_run(store, r, g, run_id="a")
        ingest_run(store, r, g, run_id="b")
        before = compare_runs(store, "a", "b").to_json()
        write_golden(g, [golden_entry("q", ["d"], ["c2"])])  # a later edit of the golden file
        after = compare_runs(store, "a", "b").to_json()
    assert before == after
    assert json.loads(after)["aggregate_a"]["mrr"] == 1.0


def test_paired_delta_stats_against_scipy_and_resampling():
    rng = np.random.default_rng(42)
    deltas = rng.choice([-1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.0], size=60)
    stats = paired_delta_stats(deltas, n_bootstrap=4000, seed=7)
    assert stats["n"] == 60
    assert stats["mean_delta"] == pytest.approx(deltas.mean())
    # n = 60 with tied |deltas|: the tie-corrected normal approximation with continuity
    # correction (retrieval_lib.stats.paired_tests.wilcoxon_signed_rank, the one signed-rank test)
    reference = wilcoxon(deltas, zero_method="wilcox", correction=True, method="asymptotic")
    assert stats["wilcoxon"]["p_value"] == pytest.approx(reference.pvalue)
    assert stats["wilcoxon"]["statistic"] == pytest.approx(reference.statistic)
    assert stats["wilcoxon"]["n_nonzero"] == int(np.count_nonzero(deltas))
    # the multinomial shortcut has the distribution of plain resampling: same CI within MC error
    plain = np.random.default_rng(1).choice(deltas, size=(20000, 60)).mean(axis=1)
    low, high = np.quantile(plain, [0.025, 0.975])
    assert stats["ci_low"] == pytest.approx(low, abs=0.03)
    assert stats["ci_high"] == pytest.approx(high, abs=0.03)
    # seeded: identical on a second call
    assert paired_delta_stats(deltas, n_bootstrap=4000, seed=7) == stats


def test_paired_delta_stats_degenerate_inputs():
    zero = paired_delta_stats(np.zeros(5))
    assert zero["mean_delta"] == 0.0 and (zero["ci_low"], zero["ci_high"]) == (0.0, 0.0)
    assert math.isnan(zero["wilcoxon"]["p_value"])
    assert zero["wilcoxon"]["reason"] == "every paired delta is zero"
    empty = paired_delta_stats(np.array([np.nan, np.nan]))
    assert empty["n"] == 0 and empty["reason"] == "no query is computable on both sides"


def _snapshot_store(tmp_path: Path) -> KBStore:
    entries = [
        golden_entry("q-win", ["d1"], ["c1"], must_contain=["one"]),
        golden_entry("q-loss", ["d2"], ["c2"], must_contain=["two"]),
        golden_entry("q-draw", ["d3"], ["c3"]),
        golden_entry("q-miss", ["d4"], ["c4"]),
        golden_entry("q-regression", ["d5"], ["c5"], forbidden=["wrong"]),
        golden_entry("q-doc", ["d6", "d7"], forbidden=["wrong"]),
        golden_entry("q-refuse", []),
    ]
    g = write_golden(tmp_path / "g.yaml", entries)

    def answer(text, grounded=True, cite=None):
        cites = [] if cite is None else [{"citation": "[#1]", "chunk_id": cite}]
        return {"text": text, "grounded": grounded, "citations": cites}

    a = [
        {
            "query_id": "q-win",
            "hits": [hit("x", "dx", 1, 0.9)],
            "answer": answer("nothing", cite="x"),
        },
        {
            "query_id": "q-loss",
            "hits": [hit("c2", "d2", 1, 0.9), hit("x", "dx", 2, 0.5)],
            "answer": answer("two", cite="c2"),
        },
        {
            "query_id": "q-draw",
            "hits": [hit("x", "dx", 1, 0.9), hit("c3", "d3", 2, 0.8)],
            "answer": answer("three", cite="x"),
        },
        {"query_id": "q-miss", "hits": [], "answer": answer("no", grounded=False)},
        {
            "query_id": "q-regression",
            "hits": [hit("c5", "d5", 1, 0.7)],
            "answer": answer("five", cite="c5"),
        },
        {"query_id": "q-doc", "hits": [hit("y", "d6", 1, 0.3)], "answer": answer("six", cite="y")},
        {"query_id": "q-refuse", "hits": [], "answer": answer("no", grounded=False)},
    ]
    b = [
        {
            "query_id": "q-win",
            "hits": [hit("c1", "d1", 1, 0.9)],
            "answer": answer("one", cite="c1"),
        },
        {
            "query_id": "q-loss",
            "hits": [hit("x", "dx", 1, 0.9), hit("y", "dy", 2, 0.6), hit("c2", "d2", 3, 0.5)],
            "answer": answer("two", cite="broken"),
        },
        {
            "query_id": "q-draw",
            "hits": [hit("y", "dy", 1, 0.9), hit("c3", "d3", 2, 0.8)],
            "answer": answer("three", cite="y"),
        },
        {
            "query_id": "q-miss",
            "hits": [hit("x", "dx", 1, 0.1)],
            "answer": answer("no", grounded=False),
        },
        {"query_id": "q-regression", "hits": [], "error": "retriever timeout"},
        {
            "query_id": "q-doc",
            "hits": [hit("y", "d6", 1, 0.3), hit("z", "d7", 2, 0.2)],
            "answer": answer("wrong", cite="z"),
        },
        {
            "query_id": "q-refuse",
            "hits": [hit("x", "dx", 1, 0.2)],
            "answer": answer("made up", cite="x"),
        },
    ]
    store = KBStore(tmp_path / "eval.sqlite")
    ingest_run(store, write_jsonl(tmp_path / "a.jsonl", a), g, run_id="run-a", chunker_version="v1")
    ingest_run(store, write_jsonl(tmp_path / "b.jsonl", b), g, run_id="run-b", chunker_version="v1")
    return store


def test_compare_report_json_matches_snapshot(tmp_path):
    with _snapshot_store(tmp_path) as store:
        text = compare_runs(store, "run-a", "run-b", n_bootstrap=500, seed=3).to_json()
    if os.environ.get("KB_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOT.write_text(text, encoding="utf-8")
    assert SNAPSHOT.is_file(), f"missing snapshot {SNAPSHOT}; run with KB_UPDATE_SNAPSHOTS=1"
    assert text == SNAPSHOT.read_text(encoding="utf-8")


def test_snapshot_values_worked_out_by_hand():
    report = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    kinds = {q["query_id"]: q["kind"] for q in report["per_query"]}
    assert kinds == {
        "q-win": "Win",
        "q-loss": "Loss",
        "q-draw": "Draw",
        "q-miss": "Draw",
        "q-regression": "Regression",
        "q-doc": "Draw",
        "q-refuse": "Regression",
    }
    a, b = report["aggregate_a"], report["aggregate_b"]
    # chunk-level queries: q-win, q-loss, q-draw, q-miss, q-regression
    # A first ranks: miss, 1, 2, miss, 1; B: 1, 3, 2, miss, failed
    assert a["mrr"] == 0.5
    assert b["mrr"] == round((1 + 1 / 3 + 1 / 2) / 5, 4) == 0.3667
    assert report["deltas"]["mrr"] == -0.1333
    assert a["hit_at_k"] == {"1": 0.4, "3": 0.6, "5": 0.6, "10": 0.6}
    assert b["hit_at_k"] == {"1": 0.2, "3": 0.6, "5": 0.6, "10": 0.6}
    # recall@k_doc over the six queries with documents (q-doc expects d6 and d7)
    assert a["recall_at_k_doc"]["1"] == round(2.5 / 6, 4)
    assert a["recall_at_k_doc"]["10"] == round(3.5 / 6, 4)
    assert b["recall_at_k_doc"]["1"] == 0.25
    assert b["recall_at_k_doc"]["10"] == round(4 / 6, 4)
    assert report["deltas"]["recall_at_k_doc"]["10"] == round(4 / 6 - 3.5 / 6, 4)
    # citations resolve against retrieved chunks (no inventory); B's q-loss cites "broken"
    assert a["citation_coverage"] == 1.0 and a["denominators"]["citation_coverage"] == 5
    assert b["citation_coverage"] == 0.8 and b["denominators"]["citation_coverage"] == 5
    # groundedness: A's q-win lacks "one" (6/7); B's q-doc says the forbidden "wrong" and
    # q-regression failed (5/6)
    assert a["groundedness"] == round(6 / 7, 4)
    assert b["groundedness"] == round(5 / 6, 4)
    assert a["empty_result_rate"] == round(2 / 7, 4) and b["empty_result_rate"] == 0.0
    assert a["refusal_correctness"] == 1.0 and b["refusal_correctness"] == 0.0
    assert (a["failed_queries"], b["failed_queries"]) == (0, 1)
    assert report["deltas"]["chunker_version_match"] == "exact"
    assert report["deltas"]["kind_counts"] == {"Win": 1, "Loss": 1, "Draw": 3, "Regression": 2}

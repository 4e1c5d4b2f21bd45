"""The one evaluation path (columns) against the record-by-record oracle; store migrations.

``record_oracle`` computes the per-query values and the aggregate one
:class:`QueryResult` at a time. On randomised runs that exercise every branch (failed,
missing and empty queries, duplicate documents, several expected chunks, spans that
overlap, touch or are absent, unknown expected spans, partial inventories, broken
citations) the columnar path must give exactly the same values, bit for bit. A store of
an older format is migrated once when opened, on a copy of an old database built here
with the old schema's DDL.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from kb_testutils import write_jsonl, write_v2_store
from record_oracle import aggregate_records, doc_rank, evaluate_records, span_coverage

from retrieval_lib.kb.columns import RunColumns, evaluate_columns
from retrieval_lib.kb.compare import compare_records, compare_runs
from retrieval_lib.kb.definitions import MATCH_EXACT, MATCH_FALLBACK
from retrieval_lib.kb.exceptions import StoreSchemaError
from retrieval_lib.kb.golden import GoldenSet, parse_golden
from retrieval_lib.kb.ingest import ingest_run
from retrieval_lib.kb.metrics import (
    aggregate_from_columns,
    aggregate_from_records,
    compute_aggregate,
)
from retrieval_lib.kb.records import Answer, Citation, Hit, QueryResult
from retrieval_lib.kb.store import SCHEMA_VERSION, KBStore

N_DOCS = 6
DOC_LENGTH = 400


def _random_spans(rng: np.random.Generator, max_spans: int = 3) -> tuple[tuple[int, int], ...]:
    spans = []
    for _ in range(int(rng.integers(1, max_spans + 1))):
        start = int(rng.integers(0, DOC_LENGTH - 1))
        spans.append((start, start + int(rng.integers(1, 120))))
    return tuple(spans)


def _random_case(seed: int) -> dict[str, Any]:
    """A golden set with expected spans, an inventory and two runs (records)."""
    rng = np.random.default_rng(seed)
    # chunk pool: per document, chunks with random (possibly overlapping) spans
    pool = [(f"d{d}:c{j}", f"d{d}", _random_spans(rng)) for d in range(N_DOCS) for j in range(6)]
    spans = {
        chunk_id: {"doc_id": doc, "source_spans": [list(s) for s in chunk_spans]}
        for chunk_id, doc, chunk_spans in pool
        if rng.random() < 0.85  # some expected chunks have no known spans
    }
    entries = []
    for i in range(40):
        kind = rng.random()
        entry: dict[str, Any] = {"id": f"q{i:02d}", "query": f"question {i}"}
        if kind < 0.1:
            entry["expected_doc_ids"] = []  # should refuse
        elif kind < 0.25:
            entry["expected_doc_ids"] = [f"d{d}" for d in rng.choice(N_DOCS, 2, replace=False)]
        else:
            picks = rng.choice(len(pool), int(rng.integers(1, 4)), replace=False)
            chunk_ids = [pool[p][0] for p in picks]
            if rng.random() < 0.1:
                chunk_ids.append(f"unknown-{i}")
            entry["expected_chunk_ids"] = chunk_ids
            entry["expected_doc_ids"] = sorted({pool[p][1] for p in picks})
        entry["must_contain"] = ["alpha"] if rng.random() < 0.5 else []
        entry["forbidden"] = ["omega"] if rng.random() < 0.3 else []
        entries.append(entry)
    golden = parse_golden(entries)
    golden = GoldenSet(queries=golden.queries, expected_chunk_spans=spans)

    def run(run_seed: int) -> dict[str, QueryResult]:
        run_rng = np.random.default_rng(run_seed)
        results = {}
        for query in golden:
            roll = run_rng.random()
            if roll < 0.08:
                continue  # no result line
            n_hits = int(run_rng.integers(0, 13))
            hits = []
            for rank, p in enumerate(run_rng.choice(len(pool), n_hits, replace=False), 1):
                chunk_id, doc, chunk_spans = pool[p]
                style = run_rng.random()
                if style < 0.1:
                    hit_spans: tuple[tuple[int, int], ...] = ()
                elif style < 0.4:
                    hit_spans = _random_spans(run_rng, 4)
                else:
                    hit_spans = chunk_spans
                hits.append(Hit(chunk_id, doc, rank, float(run_rng.random()), hit_spans))
            error = "timeout" if roll > 0.92 else None
            answer = None
            if run_rng.random() < 0.8:
                text = " ".join(w for w in ("alpha", "omega", "answer") if run_rng.random() < 0.6)
                citations = tuple(
                    Citation(
                        str(run_rng.choice(["[#1]", "[#2]", "[1]", "#3"])),
                        None
                        if run_rng.random() < 0.1
                        else (
                            pool[int(run_rng.integers(len(pool)))][0]
                            if run_rng.random() < 0.7
                            else "broken"
                        ),
                    )
                    for _ in range(int(run_rng.integers(0, 3)))
                )
                answer = Answer(text, bool(run_rng.random() < 0.7), citations)
            results[query.id] = QueryResult(query.id, tuple(hits), answer, error)
        return results

    inventory = {c for c, _, _ in pool if rng.random() < 0.7}
    return {"golden": golden, "a": run(seed + 100), "b": run(seed + 200), "inventory": inventory}


def _plain(value: Any) -> Any:
    """Floats as exact reprs (NaN included) so that == compares bit for bit."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else float.hex(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _assert_same_per_query(old, new) -> None:
    assert new.query_ids == old.query_ids
    for k in old.hit_at_k:
        np.testing.assert_array_equal(new.hit_at_k[k], old.hit_at_k[k])
        np.testing.assert_array_equal(new.recall_at_k_doc[k], old.recall_at_k_doc[k])
    np.testing.assert_array_equal(new.reciprocal_rank, old.reciprocal_rank)
    assert new.first_hit_rank == old.first_hit_rank
    assert new.matched_chunk == old.matched_chunk
    assert new.not_computable == old.not_computable


@pytest.mark.parametrize("seed", range(25))
def test_columns_give_the_oracle_values_on_random_runs(seed):
    case = _random_case(seed)
    golden, spans = case["golden"], case["golden"].expected_chunk_spans
    for results in (case["a"], case["b"]):
        columns = RunColumns.from_results(results)
        assert RunColumns.decode(columns.encode()).query_ids == columns.query_ids
        columns = RunColumns.decode(columns.encode())  # exercise the stored form
        for mode, inventory in (
            (MATCH_EXACT, None),
            (MATCH_EXACT, case["inventory"]),
            (MATCH_FALLBACK, None),
        ):
            expected = evaluate_records(
                golden, results, mode=mode, expected_spans=spans, inventory_ids=inventory
            )
            got = evaluate_columns(
                golden, columns, mode=mode, expected_spans=spans, inventory_ids=inventory
            )
            _assert_same_per_query(expected, got)
            oracle = aggregate_records(golden, results, inventory, mode=mode, expected_spans=spans)
            agg = aggregate_from_columns(
                golden, columns, inventory, mode=mode, expected_spans=spans
            )
            assert _plain(agg.to_dict()) == _plain(oracle)
            in_memory = aggregate_from_records(
                golden, results, inventory, mode=mode, expected_spans=spans
            )
            assert _plain(in_memory.to_dict()) == _plain(oracle)
    # the random cases do reach the branches that matter
    fallback = evaluate_records(golden, case["a"], mode=MATCH_FALLBACK, expected_spans=spans)
    assert any(r is not None for r in fallback.first_hit_rank)
    assert any(math.isnan(v) for v in fallback.reciprocal_rank)


def test_random_cases_cover_partial_span_overlaps():
    """The fallback threshold is really exercised: some hit/chunk pairs land near 50%."""
    ratios = []
    for seed in range(5):
        case = _random_case(seed)
        spans = case["golden"].expected_chunk_spans
        for result in case["a"].values():
            for h in result.hits:
                for info in spans.values():
                    if info["doc_id"] == h.doc_id and h.source_spans:
                        covered, total = span_coverage(
                            h.source_spans, [tuple(s) for s in info["source_spans"]]
                        )
                        ratios.append(covered / total)
    ratios_array = np.array(ratios)
    assert ((ratios_array > 0.3) & (ratios_array < 0.7)).sum() > 20
    assert (ratios_array == 0).sum() > 20 and (ratios_array == 1).sum() > 20


def _result_rows(results: dict[str, QueryResult]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in results.values()]


def _chunk_rows(case: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for chunk_id, info in sorted(case["golden"].expected_chunk_spans.items()):
        rows.append({"chunk_id": chunk_id, **info})
    return rows


def _golden_file(path: Path, golden: GoldenSet) -> Path:
    path.write_bytes(orjson.dumps([q.to_dict() for q in golden]))
    return path


def _ingest_case(store: KBStore, tmp_path: Path, case: dict[str, Any]) -> dict[str, Any]:
    """Runs a (v1, inventory), b (v1, none) and c (v2, inventory); their stored records."""
    golden_path = _golden_file(tmp_path / "golden.yaml", case["golden"])
    chunks = write_jsonl(tmp_path / "chunks.jsonl", _chunk_rows(case))
    records = {}
    for name, version, with_chunks in (("a", "v1", True), ("b", "v1", False), ("c", "v2", True)):
        rows = _result_rows(case["a" if name == "a" else "b"])
        if with_chunks:  # the inventory must name every hit's chunk: keep only those hits
            known = {r["chunk_id"] for r in _chunk_rows(case)}
            for row in rows:
                row["hits"] = [h for h in row["hits"] if h["chunk_id"] in known]
                for rank, h in enumerate(row["hits"], 1):
                    h["rank"] = rank
        ingest_run(
            store,
            write_jsonl(tmp_path / f"{name}.jsonl", rows),
            golden_path,
            chunks_path=chunks if with_chunks else None,
            run_id=name,
            chunker_version=version,
        )
        # as stored: ingest fills in the spans of hits from the inventory
        records[name] = store.load_results(name)
    return records


def _in_memory_compare(store: KBStore, run_a: str, run_b: str, **kwargs: Any):
    """compare_records over the records of the JSON documents (the Python API route)."""
    a, b = store.get_run(run_a), store.get_run(run_b)
    return compare_records(
        run_a,
        run_b,
        GoldenSet.from_snapshot(a.golden_snapshot),
        GoldenSet.from_snapshot(b.golden_snapshot),
        store.load_results(run_a),
        store.load_results(run_b),
        chunks_a=store.load_chunk_ids(run_a) or None,
        chunks_b=store.load_chunk_ids(run_b) or None,
        chunker_version_a=a.chunker_version,
        chunker_version_b=b.chunker_version,
        **kwargs,
    )


def _assert_ranks_match_the_oracle(report, golden: GoldenSet, records: dict[str, Any]) -> None:
    """Every per-query rank of a compare is the oracle's, criterion by criterion."""
    spans = golden.expected_chunk_spans
    mode = report.chunker_version_match
    oracle = {
        side: evaluate_records(golden, records[side], mode=mode, expected_spans=spans)
        for side in ("a", "b")
    }
    for i, (query, row) in enumerate(zip(golden, report.per_query, strict=True)):
        ranks = (row.a_hit_rank, row.b_hit_rank)
        if row.criterion == "chunk":
            assert ranks == (oracle["a"].first_hit_rank[i], oracle["b"].first_hit_rank[i])
        elif row.criterion == "doc":
            assert ranks == tuple(doc_rank(query, records[s].get(query.id)) for s in ("a", "b"))
        else:
            assert ranks == (None, None)


@pytest.mark.parametrize("seed", range(6))
def test_store_and_in_memory_runs_give_the_oracle_values(tmp_path, seed):
    case = _random_case(seed)
    with KBStore(tmp_path / "eval.sqlite") as store:
        records = _ingest_case(store, tmp_path, case)
        golden = GoldenSet.from_snapshot(store.get_run("a").golden_snapshot)
        for run_a, run_b in (("a", "b"), ("a", "c"), ("c", "b")):
            stored = compare_runs(store, run_a, run_b, n_bootstrap=200, seed=seed)
            in_memory = _in_memory_compare(store, run_a, run_b, n_bootstrap=200, seed=seed)
            assert stored.to_json() == in_memory.to_json()
            pair = {"a": records[run_a], "b": records[run_b]}
            _assert_ranks_match_the_oracle(stored, golden, pair)
        for run_id in ("a", "b", "c"):
            oracle = aggregate_records(
                GoldenSet.from_snapshot(store.get_run(run_id).golden_snapshot),
                records[run_id],
                store.load_chunk_ids(run_id) or None,
            )
            assert _plain(compute_aggregate(store, run_id).to_dict()) == _plain(oracle)


def test_a_v2_store_is_migrated_once_when_opened(tmp_path):
    """A copy of a schema-version-2 database (no columns) gets them on open, once."""
    case = _random_case(7)
    snapshot = GoldenSet(
        queries=case["golden"].queries, expected_chunk_spans=case["golden"].expected_chunk_spans
    ).to_snapshot()
    original = write_v2_store(
        tmp_path / "v2.sqlite",
        {
            name: {"golden": snapshot, "results": _result_rows(case[name]), "chunker_version": v}
            for name, v in (("a", "v1"), ("b", "v2"))
        },
    )
    path = tmp_path / "copy.sqlite"
    shutil.copyfile(original, path)
    with KBStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION == 4
        assert [v for v, _, _ in store.applied_migrations()] == [1, 2, 3, 4]
        assert store.integrity_check() == "ok"
        for name in ("a", "b"):
            columns = store.load_columns(name)
            # rows in ingest order, exactly the run's result lines
            assert columns.query_ids == list(case[name])
            assert int(columns.hit_offsets[-1]) == sum(len(r.hits) for r in case[name].values())
        oracle = aggregate_records(case["golden"], case["a"])
        assert _plain(compute_aggregate(store, "a").to_dict()) == _plain(oracle)
        report = compare_runs(store, "a", "b", n_bootstrap=100)
        assert report.chunker_version_match == MATCH_FALLBACK
        _assert_ranks_match_the_oracle(report, case["golden"], case)
        # a fresh ingest of the same run stores the same columns as the migration did
        golden_path = _golden_file(tmp_path / "golden.yaml", case["golden"])
        ingest_run(
            store,
            write_jsonl(tmp_path / "a.jsonl", _result_rows(case["a"])),
            golden_path,
            run_id="a-again",
            chunker_version="v1",
        )
        assert store.load_columns("a-again").encode() == store.load_columns("a").encode()
        store.delete_run("a")
        left = store.conn.execute(
            "SELECT COUNT(*) FROM eval_run_columns WHERE run_id = 'a'"
        ).fetchone()[0]
        assert left == 0  # cascades with the run
    with KBStore(path) as store:  # opening again applies nothing
        assert len(store.applied_migrations()) == 4
    with sqlite3.connect(original) as conn:  # the original was only read
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
        tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master")}
        assert "eval_run_columns" not in tables


def test_a_failed_migration_leaves_the_store_as_it_was(tmp_path):
    case = _random_case(2)
    rows = _result_rows(case["a"])
    path = write_v2_store(
        tmp_path / "v2.sqlite",
        {"a": {"golden": case["golden"].to_snapshot(), "results": rows}},
    )
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE eval_query_results SET result_json = '{\"query_id\": 1' WHERE query_id = ?",
            (rows[-1]["query_id"],),
        )
    before = _dump(path)
    with pytest.raises(StoreSchemaError, match="migration 3 .* nothing was changed"):
        KBStore(path)
    assert _dump(path) == before  # schema, rows and user_version (opening only set WAL)


def _dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        return [f"user_version {version}", *conn.iterdump()]
    finally:
        conn.close()


def test_encoded_columns_hold_what_was_ingested():
    results = {
        "q1": QueryResult(
            "q1",
            (Hit("c1", "d1", 1, 0.5, ((0, 10), (20, 30))), Hit("c2", "d1", 2, None)),
            Answer("text [#1]", True, (Citation("[#1]", "c1"),)),
        ),
        "q2": QueryResult("q2", (Hit("c1", "d1", 1, 0.1, ((5, 6),)),), None, "boom"),
    }
    columns = RunColumns.decode(RunColumns.from_results(results).encode())
    assert columns.query_ids == ["q1", "q2"]
    assert columns.errors == [None, "boom"]
    assert columns.answers() == [("text [#1]", True, [("[#1]", "c1")]), None]
    assert columns.answer_grounded.tolist() == [1, -1]
    assert columns.citation_offsets.tolist() == [0, 1, 1]
    assert columns.hit_offsets.tolist() == [0, 2, 3]
    assert columns.chunk_ids == ["c1", "c2"] and columns.chunk_codes.tolist() == [0, 1, 0]
    assert columns.doc_ids == ["d1"] and columns.doc_codes.tolist() == [0, 0, 0]
    assert columns.span_offsets.tolist() == [0, 2, 2, 3]
    assert columns.spans.tolist() == [[0, 10], [20, 30], [5, 6]]
    with pytest.raises(ValueError, match="missing"):
        RunColumns.decode({"meta": b"{}"})


def test_spans_beyond_int32_are_stored_wide_and_still_match():
    big = 2**31 + 10
    results = {
        "q": QueryResult("q", (Hit("x", "d", 1, None, ((big, big + 60),)),)),
    }
    columns = RunColumns.from_results(results)
    meta = orjson.loads(columns.encode()["meta"])
    assert meta["dtypes"] == {"span_offsets": "<i4", "spans": "<i8"}
    decoded = RunColumns.decode(columns.encode())
    assert decoded.spans.tolist() == [[big, big + 60]]
    golden = GoldenSet(
        queries=parse_golden(
            [{"id": "q", "query": "x", "expected_doc_ids": ["d"], "expected_chunk_ids": ["e"]}]
        ).queries,
        expected_chunk_spans={"e": {"doc_id": "d", "source_spans": [[big, big + 100]]}},
    )
    spans = golden.expected_chunk_spans
    new = evaluate_columns(golden, decoded, mode=MATCH_FALLBACK, expected_spans=spans)
    old = evaluate_records(golden, results, mode=MATCH_FALLBACK, expected_spans=spans)
    assert new.first_hit_rank == old.first_hit_rank == [1]  # 60 of 100 characters
    assert new.matched_chunk == ["e"]


def test_columns_of_an_older_format_are_rebuilt_on_open(tmp_path):
    case = _random_case(3)
    golden_path = _golden_file(tmp_path / "golden.yaml", case["golden"])
    path = tmp_path / "eval.sqlite"
    with KBStore(path) as store:
        for name in ("a", "b"):
            ingest_run(
                store,
                write_jsonl(tmp_path / f"{name}.jsonl", _result_rows(case[name])),
                golden_path,
                run_id=name,
            )
        expected = compare_runs(store, "a", "b", n_bootstrap=100).to_json()
        current = {n: store.load_columns(n).encode() for n in ("a", "b")}
    # what a store written at schema version 3 with format-1 columns for run a looks like
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE eval_run_columns SET data = ? WHERE run_id = 'a' AND name = 'meta'",
            (b'{"format": "kb-run-columns/1"}',),
        )
        conn.execute("DELETE FROM eval_run_columns WHERE run_id = 'a' AND name = 'spans'")
        conn.execute("DELETE FROM schema_migrations WHERE version = 4")
        conn.execute("PRAGMA user_version = 3")
    with KBStore(path) as store:
        assert store.schema_version == 4
        assert {n: store.load_columns(n).encode() for n in ("a", "b")} == current
        assert compare_runs(store, "a", "b", n_bootstrap=100).to_json() == expected
        # a damaged column of the current format is an error, never a silent fallback
        store.conn.execute(
            "UPDATE eval_run_columns SET data = ? WHERE run_id = 'b' AND name = 'chunk_codes'",
            (b"\x00\x00",),
        )
        with pytest.raises(StoreSchemaError, match="damaged"):
            store.load_columns("b")
        store.conn.execute("DELETE FROM eval_run_columns WHERE run_id = 'b'")
        with pytest.raises(StoreSchemaError, match="no result columns"):
            store.load_columns("b")


def test_records_filed_under_another_query_id_are_refused():
    with pytest.raises(ValueError, match="filed under 'q2'"):
        RunColumns.from_results({"q2": QueryResult("q1", ())})

"""The shipped example: reproducible, consistent, and its metrics checked independently."""

from __future__ import annotations

import json
import sys

import pytest
import yaml
from kb_testutils import REPO_ROOT

from retrieval_lib.kb.compare import compare_runs
from retrieval_lib.kb.examples import (
    EXAMPLE_RUNS,
    build_example,
    build_example_store,
    chunk_paragraphs,
    example_files,
    load_corpus,
    write_example,
)
from retrieval_lib.kb.metrics import compute_aggregate
from retrieval_lib.kb.store import KBStore

EXAMPLE = REPO_ROOT / "examples" / "kb"
PACKAGED = REPO_ROOT / "retrieval_lib" / "kb" / "example_data"


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def example_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kb-example")
    db, a, b = build_example_store(folder / "eval.sqlite", folder / "files")
    return db, a, b, folder / "files"


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_both_committed_copies_are_exactly_what_build_example_writes(tmp_path):
    pytest.importorskip("rank_bm25")
    built = tmp_path / "built"
    build_example(built)
    generated = _files(built)
    assert generated == example_files()
    assert generated == [p for p in _files(EXAMPLE) if p != "README.md"]
    assert generated == [p for p in _files(PACKAGED) if p != "__pycache__"]
    for name in generated:
        data = (built / name).read_bytes()
        assert data == (EXAMPLE / name).read_bytes(), f"examples/kb/{name}"
        assert data == (PACKAGED / name).read_bytes(), f"example_data/{name}"


def test_write_example_copies_the_committed_example(tmp_path, example_store):
    written = tmp_path / "written"
    paths = write_example(written)
    assert paths["results_v1"] == written / "results_v1.jsonl"
    assert all(path.exists() for path in paths.values())
    # build_example_store ingests exactly these files
    assert _files(example_store[3]) == _files(written)
    assert _files(written) == [p for p in _files(EXAMPLE) if p != "README.md"]
    for name in _files(written):
        assert (written / name).read_bytes() == (EXAMPLE / name).read_bytes(), name


def test_the_example_store_needs_no_retriever(tmp_path, monkeypatch):
    # None in sys.modules makes `import rank_bm25` fail, as in an install without [kb]
    monkeypatch.setitem(sys.modules, "rank_bm25", None)
    db, run_a, run_b = build_example_store(tmp_path / "eval.sqlite")
    assert (tmp_path / "kb-example" / "results_v1.jsonl").is_file()
    with KBStore(db) as store:
        assert sorted(r.run_id for r in store.list_runs()) == sorted([run_a, run_b])
        assert store.count_rows(run_b)["results"] == 25
    with pytest.raises(ModuleNotFoundError, match=r"needs rank_bm25 \(pip install -e '\.\[kb\]'\)"):
        build_example(tmp_path / "regenerated")


def test_build_example_is_deterministic(tmp_path):
    pytest.importorskip("rank_bm25")
    first = build_example(tmp_path / "one")
    second = build_example(tmp_path / "two")
    for role, path in first.items():
        if path.is_file():
            assert path.read_bytes() == second[role].read_bytes(), role


def test_golden_set_shape_and_expected_chunks_hold_the_answer():
    golden = yaml.safe_load((EXAMPLE / "golden.yaml").read_text())
    assert len(golden) == 25
    assert sum(1 for q in golden if q["expected_doc_ids"] == []) == 3
    assert any(q["forbidden"] for q in golden)
    assert "means the system SHOULD REFUSE" in (EXAMPLE / "golden.yaml").read_text()
    chunks = {c["chunk_id"]: c for c in _jsonl(EXAMPLE / "chunks_v1.jsonl")}
    corpus = {p.stem: p.read_text() for p in (EXAMPLE / "corpus").glob("*.txt")}
    assert len(corpus) == 30
    for query in golden:
        if not query["expected_chunk_ids"]:
            continue
        for doc_id in query["expected_doc_ids"]:
            text = corpus[doc_id]
            phrase = query["must_contain"][0]
            start = text.find(phrase)
            assert start >= 0, (query["id"], doc_id)
            covered = set()
            for chunk_id in query["expected_chunk_ids"]:
                chunk = chunks[chunk_id]
                if chunk["doc_id"] == doc_id:
                    for s, e in chunk["source_spans"]:
                        covered.update(range(s, e))
            assert set(range(start, start + len(phrase))) <= covered, query["id"]


def test_paragraph_chunks_are_the_paragraphs():
    for doc_id, text in load_corpus().items():
        chunks = chunk_paragraphs(doc_id, text)
        assert [c.text for c in chunks] == [p.strip() for p in text.split("\n\n") if p.strip()]
        assert all(text[c.start : c.end] == c.text for c in chunks)


def test_v1_aggregate_matches_an_independent_count(example_store):
    db, run_a, _, _ = example_store
    golden = yaml.safe_load((EXAMPLE / "golden.yaml").read_text())
    results = {r["query_id"]: r for r in _jsonl(EXAMPLE / "results_v1.jsonl")}
    reciprocal, hit1 = [], []
    for query in golden:
        if not query["expected_chunk_ids"]:
            continue
        ids = [
            h["chunk_id"] for h in sorted(results[query["id"]]["hits"], key=lambda h: h["rank"])
        ][:10]
        rank = next((i for i, c in enumerate(ids, 1) if c in query["expected_chunk_ids"]), None)
        reciprocal.append(0.0 if rank is None else 1 / rank)
        hit1.append(rank == 1)
    refusals = [q for q in golden if not q["expected_doc_ids"]]
    refused = [not results[q["id"]]["answer"]["grounded"] for q in refusals]
    with KBStore(db) as store:
        agg = compute_aggregate(store, run_a)
    assert agg.mrr == pytest.approx(sum(reciprocal) / len(reciprocal))
    assert agg.hit_at_k[1] == pytest.approx(sum(hit1) / len(hit1))
    assert agg.refusal_correctness == pytest.approx(sum(refused) / len(refused)) == 1.0
    assert agg.denominators["hit_at_k"] == 21


def test_fallback_ranks_match_an_independent_overlap_computation(example_store):
    db, run_a, run_b, _ = example_store
    golden = {q["id"]: q for q in yaml.safe_load((EXAMPLE / "golden.yaml").read_text())}
    v1 = {c["chunk_id"]: c for c in _jsonl(EXAMPLE / "chunks_v1.jsonl")}
    results_b = {r["query_id"]: r for r in _jsonl(EXAMPLE / "results_v2.jsonl")}

    def chars(spans):
        return {i for s, e in spans for i in range(s, e)}

    def b_rank(query):
        for h in sorted(results_b[query["id"]]["hits"], key=lambda h: h["rank"])[:10]:
            for chunk_id in query["expected_chunk_ids"]:
                expected = v1[chunk_id]
                if h["doc_id"] != expected["doc_id"]:
                    continue
                want = chars(expected["source_spans"])
                if 2 * len(want & chars(h["source_spans"])) >= len(want):
                    return h["rank"]
        return None

    with KBStore(db) as store:
        report = compare_runs(store, run_a, run_b)
    assert report.chunker_version_match == "fallback_doc_span"
    checked = 0
    for row in report.per_query:
        query = golden[row.query_id]
        if query["expected_chunk_ids"]:
            assert row.criterion == "chunk"
            assert row.b_hit_rank == b_rank(query), row.query_id
            checked += 1
    assert checked == 21
    # the refusal threshold makes v2 answer the off-topic football query (see examples.py)
    assert {q.query_id: q.kind.value for q in report.per_query}["q-024"] == "Regression"
    assert report.aggregate_b.refusal_correctness == pytest.approx(2 / 3)


def test_example_run_ids_are_stable():
    assert [r.run_id for r in EXAMPLE_RUNS] == ["bm25-window200-v1", "bm25-paragraph-v2"]

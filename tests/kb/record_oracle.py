"""A record-by-record implementation of the kb per-query values and aggregates: the oracle.

The package computes the metrics once, over columns (:mod:`retrieval_lib.kb.columns`,
:mod:`retrieval_lib.kb.metrics`). This module computes them again the plain way, one
:class:`~retrieval_lib.kb.records.QueryResult` at a time, from the definitions in the
seed and in the module docstrings, so that the tests can check the columnar path against
it bit for bit. It is test code: nothing in the package imports it.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np

from retrieval_lib.kb.columns import PerQueryMetrics
from retrieval_lib.kb.definitions import (
    CITATION_MARKER,
    K_VALUES,
    MATCH_EXACT,
    MATCH_FALLBACK,
    MRR_CUTOFF,
    REASON_NO_INVENTORY_MATCH,
    REASON_NO_SPANS,
    REASON_NOT_IN_INVENTORY,
)
from retrieval_lib.kb.golden import GoldenQuery, GoldenSet
from retrieval_lib.kb.records import Hit, QueryResult, Span
from retrieval_lib.metrics.ranking import evaluate_rankings

# Stands for "the expected region, not retrieved" in fallback mode: never a real chunk id.
_EXPECTED_REGION = "\x00expected-region"


def _merged(spans: Iterable[Span]) -> list[Span]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def span_coverage(hit_spans: Iterable[Span], expected_spans: Iterable[Span]) -> tuple[int, int]:
    """Characters of ``expected_spans`` covered by ``hit_spans``, and the expected total.

    Both span lists are merged first (overlaps within a list count once).

    Examples
    --------
    >>> span_coverage([(0, 50)], [(0, 100)])
    (50, 100)
    >>> span_coverage([(0, 10), (5, 20)], [(15, 25), (40, 45)])
    (5, 15)
    """
    hits = _merged(hit_spans)
    expected = _merged(expected_spans)
    total = sum(e - s for s, e in expected)
    covered = 0
    i = 0
    for start, end in expected:
        while i < len(hits) and hits[i][1] <= start:
            i += 1
        j = i
        while j < len(hits) and hits[j][0] < end:
            covered += min(end, hits[j][1]) - max(start, hits[j][0])
            j += 1
    return covered, total


@dataclass(frozen=True, slots=True)
class ExpectedChunk:
    """An expected chunk with the document and spans it occupies."""

    chunk_id: str
    doc_id: str
    source_spans: tuple[Span, ...]


def span_match(hit: Hit, expected: Sequence[ExpectedChunk]) -> str | None:
    """The first expected chunk that ``hit`` matches under the doc + span fallback.

    A hit matches an expected chunk of the same document when its spans cover at least
    half of that chunk's characters (``2 * covered >= total``: exactly 50 % counts).

    Examples
    --------
    >>> e = [ExpectedChunk("v1:c0", "d1", ((0, 100),))]
    >>> span_match(Hit("v2:p0", "d1", 1, None, ((50, 300),)), e)
    'v1:c0'
    >>> span_match(Hit("v2:p0", "d1", 1, None, ((51, 300),)), e) is None
    True
    """
    for chunk in expected:
        if chunk.doc_id != hit.doc_id or not hit.source_spans:
            continue
        covered, total = span_coverage(hit.source_spans, chunk.source_spans)
        if total > 0 and 2 * covered >= total:
            return chunk.chunk_id
    return None


def expected_chunks_for(
    query: GoldenQuery, expected_spans: Mapping[str, Mapping[str, Any]]
) -> list[ExpectedChunk]:
    """The query's expected chunks whose document and spans are known."""
    chunks = []
    for chunk_id in query.expected_chunk_ids:
        info = expected_spans.get(chunk_id)
        if info and info.get("source_spans"):
            chunks.append(
                ExpectedChunk(
                    chunk_id, info["doc_id"], tuple((s[0], s[1]) for s in info["source_spans"])
                )
            )
    return chunks


def _relevance(
    query: GoldenQuery,
    result: QueryResult | None,
    mode: str,
    expected_spans: Mapping[str, Mapping[str, Any]],
    inventory_ids: AbstractSet[str] | None,
    unmatchable: bool = False,
) -> tuple[list[str], set[str], dict[str, str], str | None]:
    """Ranking (chunk ids in rank order), relevant set, hit chunk → matched expected chunk,
    and why the query is not computable (None when it is, or has no expected chunks)."""
    hits = () if result is None or result.failed else result.hits
    ranking = [h.chunk_id for h in hits]
    if not query.expected_chunk_ids:
        return ranking, set(), {}, None
    if mode == MATCH_EXACT:
        expected = set(query.expected_chunk_ids)
        if inventory_ids is not None and expected.isdisjoint(inventory_ids):
            return ranking, set(), {}, REASON_NOT_IN_INVENTORY
        if unmatchable:
            return ranking, set(), {}, REASON_NO_INVENTORY_MATCH
        return ranking, expected, {c: c for c in ranking if c in expected}, None
    regions = expected_chunks_for(query, expected_spans)
    if not regions:
        return ranking, set(), {}, REASON_NO_SPANS
    matched = {}
    for hit in hits:
        target = span_match(hit, regions)
        if target is not None:
            matched[hit.chunk_id] = target
    return ranking, set(matched) | {_EXPECTED_REGION}, matched, None


def evaluate_records(
    golden: GoldenSet,
    results: Mapping[str, QueryResult],
    *,
    mode: str = MATCH_EXACT,
    expected_spans: Mapping[str, Mapping[str, Any]] | None = None,
    inventory_ids: AbstractSet[str] | None = None,
) -> PerQueryMetrics:
    """Per-query hit@k, reciprocal rank (top 10) and recall@k_doc through the kernel.

    In exact mode with the run's chunk inventory (``inventory_ids``), a query none of
    whose expected chunk ids is in the inventory was chunked by another chunker: its
    chunk-level values are not computable (NaN, reason in ``not_computable``) rather
    than a miss.

    Examples
    --------
    >>> from retrieval_lib.kb.golden import parse_golden
    >>> g = parse_golden([{"id": "q", "query": "x", "expected_doc_ids": ["d"],
    ...                    "expected_chunk_ids": ["c2"]}])
    >>> r = {"q": QueryResult("q", (Hit("c1", "d", 1, None), Hit("c2", "d", 2, None)))}
    >>> pq = evaluate_records(g, r)
    >>> float(pq.reciprocal_rank[0]), pq.first_hit_rank
    (0.5, [2])
    """
    if mode not in (MATCH_EXACT, MATCH_FALLBACK):
        raise ValueError(f"unknown chunk-match mode {mode!r}")
    spans = expected_spans or {}
    rankings: list[list[str]] = []
    relevant: list[set[str]] = []
    first_rank: list[int | None] = []
    matched_chunk: list[str | None] = []
    not_computable: dict[str, str] = {}
    doc_rankings: dict[int, list[list[str]]] = {k: [] for k in K_VALUES}
    doc_relevant: list[set[str]] = []
    # Without an inventory, a run that retrieved chunks but no expected chunk id of the
    # golden set cannot be matched: every query's chunk-level values are missing.
    retrieved = {h.chunk_id for r in results.values() for h in r.hits}
    expected_ids = {c for q in golden for c in q.expected_chunk_ids}
    unmatchable = (
        mode == MATCH_EXACT
        and inventory_ids is None
        and bool(retrieved)
        and retrieved.isdisjoint(expected_ids)
    )
    for query in golden:
        result = results.get(query.id)
        ranking, rel, matches, reason = _relevance(
            query, result, mode, spans, inventory_ids, unmatchable
        )
        if reason is not None:
            not_computable[query.id] = reason
        rankings.append(ranking)
        relevant.append(rel)
        rank = next((i for i, c in enumerate(ranking[:MRR_CUTOFF], start=1) if c in matches), None)
        first_rank.append(rank)
        matched_chunk.append(matches[ranking[rank - 1]] if rank is not None else None)
        docs = [] if result is None or result.failed else [h.doc_id for h in result.hits]
        for k in K_VALUES:
            doc_rankings[k].append(list(dict.fromkeys(docs[:k])))
        doc_relevant.append(set(query.expected_doc_ids))

    n = len(rankings)
    names = [f"Hit@{k}" for k in K_VALUES] + [f"RR@{MRR_CUTOFF}"]
    chunk_values: Mapping[str, Any]
    doc_values: dict[int, np.ndarray]
    if n:
        chunk_values = evaluate_rankings(rankings, relevant, names)
        doc_values = {
            k: np.asarray(
                evaluate_rankings(doc_rankings[k], doc_relevant, [f"R@{k}"])[f"R@{k}"],
                dtype=float,
            )
            for k in K_VALUES
        }
    else:
        chunk_values = {name: np.empty(0) for name in names}
        doc_values = {k: np.empty(0) for k in K_VALUES}
    return PerQueryMetrics(
        query_ids=golden.ids,
        hit_at_k={k: np.asarray(chunk_values[f"Hit@{k}"], dtype=float) for k in K_VALUES},
        reciprocal_rank=np.asarray(chunk_values[f"RR@{MRR_CUTOFF}"], dtype=float),
        recall_at_k_doc=doc_values,
        first_hit_rank=first_rank,
        matched_chunk=matched_chunk,
        not_computable=not_computable,
    )


def _mean(values: Sequence[float]) -> tuple[float, int]:
    kept = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    return (float(kept.mean()) if kept.size else math.nan), int(kept.size)


def aggregate_records(
    golden: GoldenSet, results: Mapping[str, QueryResult], known_chunk_ids: Any = None, **how: Any
) -> dict[str, Any]:
    """The aggregate as :meth:`AggregateMetrics.to_dict` gives it, computed per record.

    ``how`` is ``mode`` and ``expected_spans``, as :func:`evaluate_records` takes them.
    """
    mode = how.get("mode", MATCH_EXACT)
    pq = evaluate_records(golden, results, inventory_ids=known_chunk_ids, **how)
    ran = {q.id: results[q.id] for q in golden if q.id in results and not results[q.id].failed}
    answered = {q: r.answer for q, r in ran.items() if r.answer is not None}
    if known_chunk_ids is None:
        known = {h.chunk_id for r in results.values() for h in r.hits}
    else:
        known = set(known_chunk_ids)

    def resolves(answer: Any) -> bool:
        return all(
            c.chunk_id is not None
            and c.chunk_id in known
            and CITATION_MARKER.fullmatch(c.citation) is not None
            for c in answer.citations
        )

    def sound(query: GoldenQuery, text: str) -> bool:
        return all(s in text for s in query.must_contain) and not any(
            s in text for s in query.forbidden
        )

    queries = {q.id: q for q in golden}
    grounded = [a for a in answered.values() if a.grounded]
    refusers = [q for q in golden if q.should_refuse]
    refused = [q for q in refusers if q.id in answered and not answered[q.id].grounded]

    def rate(hits: int, n: int) -> float:
        return hits / n if n else math.nan

    hit_at_k, recall = {}, {}
    for k in K_VALUES:
        hit_at_k[str(k)], n_chunk = _mean(pq.hit_at_k[k].tolist())
        recall[str(k)], n_doc = _mean(pq.recall_at_k_doc[k].tolist())
    mrr, _ = _mean(pq.reciprocal_rank.tolist())
    reasons: dict[str, str] = {}
    excluded = Counter(pq.not_computable.values())
    if n_chunk == 0:
        why = "no query has expected_chunk_ids"
        if excluded:
            why = "no query is computable: " + "; ".join(sorted(excluded))
        reasons["hit_at_k"] = reasons["mrr"] = why
    elif excluded:
        reasons["hit_at_k_excluded"] = "; ".join(
            f"{n} {'query' if n == 1 else 'queries'} excluded: {why}"
            for why, n in sorted(excluded.items())
        )
    if n_doc == 0:
        reasons["recall_at_k_doc"] = "no query has expected_doc_ids"
    if not grounded:
        reasons["citation_coverage"] = "no grounded answer"
    if not answered:
        reasons["groundedness"] = "no answer (retrieval-only run or every query failed)"
    if not ran:
        reasons["empty_result_rate"] = "no query ran without error"
    if not refusers:
        reasons["refusal_correctness"] = "the golden set has no should-refuse query"
    elif not answered:
        reasons["refusal_correctness"] = "the run has no answers, so it cannot refuse"
    return {
        "hit_at_k": hit_at_k,
        "mrr": mrr,
        "recall_at_k_doc": recall,
        "citation_coverage": rate(sum(map(resolves, grounded)), len(grounded)),
        "groundedness": rate(
            sum(sound(queries[q], a.text) for q, a in answered.items()), len(answered)
        ),
        "empty_result_rate": rate(sum(not r.hits for r in ran.values()), len(ran)),
        "refusal_correctness": rate(len(refused), len(refusers)) if answered else math.nan,
        "total_queries": len(golden),
        "failed_queries": len(golden) - len(ran),
        "denominators": {
            "citation_coverage": len(grounded),
            "empty_result_rate": len(ran),
            "groundedness": len(answered),
            "hit_at_k": n_chunk,
            "mrr": n_chunk,
            "recall_at_k_doc": n_doc,
            "refusal_correctness": len(refusers) if answered else 0,
        },
        "null_reasons": dict(sorted(reasons.items())),
        "chunk_match": mode,
        "citation_resolution": "retrieved_chunks" if known_chunk_ids is None else "chunk_inventory",
    }


def doc_rank(query: GoldenQuery, result: QueryResult | None) -> int | None:
    """Rank of the first top-10 hit on an expected document (the compare's doc criterion)."""
    if result is None or result.failed:
        return None
    expected = set(query.expected_doc_ids)
    return next((h.rank for h in result.hits[:MRR_CUTOFF] if h.doc_id in expected), None)

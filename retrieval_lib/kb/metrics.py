"""Aggregate metrics of a knowledge-base evaluation run (the seed's ``AggregateMetrics``).

Definitions (exactly the seed's; the denominators are stored in ``denominators``):

``hit_at_k`` (k = 1, 3, 5, 10)
    A query is a hit when one of its ``expected_chunk_ids`` is among the top-k hits.
    Mean over queries with non-empty ``expected_chunk_ids``.
``mrr``
    1 / rank of the first expected chunk, 0 when none is in the top 10. Same queries.
``recall_at_k_doc`` (k = 1, 3, 5, 10)
    Fraction of ``expected_doc_ids`` covered by the ``doc_id`` of the top-k *hits*
    (several hits of one document cover it once). Mean over queries with non-empty
    ``expected_doc_ids``.
``citation_coverage``
    Fraction of grounded answers (``answer.grounded`` true, no error) whose every
    citation resolves to a real chunk: its marker is strictly ``[#<n>]`` and its
    ``chunk_id`` is in the run's chunk inventory (or, when the run was ingested without
    one, among the chunks the run retrieved; ``citation_resolution`` says which). An
    answer without citations satisfies "every" vacuously. No grounded answer: null.
``groundedness``
    Fraction of answers (no error) containing every ``must_contain`` string and no
    ``forbidden`` string (case-sensitive substrings). No answer: null.
``empty_result_rate``
    Fraction of queries that ran (result line present, no error) with zero hits.
``refusal_correctness``
    Fraction of should-refuse queries (``expected_doc_ids: []``) whose answer refused
    (``grounded`` false). A should-refuse query that failed or has no answer did not
    refuse. Null when the golden set has no should-refuse query, or when the run has no
    answers at all (a retrieval-only run cannot refuse; that is missing, not 0).
``total_queries``, ``failed_queries``
    Golden queries of the run's snapshot; those with an error or without a result line.

A failed or missing query counts as a miss in ``hit_at_k``, ``mrr`` and
``recall_at_k_doc`` (the user got nothing). A query none of whose expected chunk ids is in
the run's chunk inventory (the run was chunked differently) is left out of ``hit_at_k`` and
``mrr`` and counted in ``null_reasons``, instead of scoring a meaningless 0 (``kb compare``
judges such runs by span overlap). A run ingested without a chunk inventory whose hits name
none of the golden set's expected chunk ids cannot be matched either: ``hit_at_k`` and
``mrr`` are then null, with the reason in ``null_reasons``. Metrics keep full precision;
only :meth:`AggregateMetrics.to_json` (storage, printing) rounds to 4 decimals, NaN as null.

Per-query values come from :func:`retrieval_lib.kb.columns.evaluate_columns` (stored runs
and records held in memory alike), where chunk matching is defined: ``hit_at_k``, ``mrr``
and ``recall_at_k_doc`` are the shared kernel's ``Hit@k``, ``RR@10`` and ``R@k`` over the
hits in rank order (scores play no part, so score ties need no policy), ``R@k`` over the
de-duplicated ``doc_id`` list of the top-k hits.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from retrieval_lib.io import dumps_json
from retrieval_lib.kb.columns import PerQueryMetrics, RunColumns, evaluate_columns
from retrieval_lib.kb.definitions import CITATION_MARKER, K_VALUES, MATCH_EXACT, STORAGE_DIGITS
from retrieval_lib.kb.golden import GoldenSet
from retrieval_lib.kb.records import QueryResult, paused_gc

__all__ = [
    "RATE_FIELDS",
    "AggregateMetrics",
    "aggregate_from_columns",
    "aggregate_from_records",
    "compute_aggregate",
    "store_aggregate",
]


#: The answer-level and result-level rates of :class:`AggregateMetrics`, in output order.
RATE_FIELDS = ("citation_coverage", "groundedness", "empty_result_rate", "refusal_correctness")


@dataclass(frozen=True)
class AggregateMetrics:
    """Aggregate metrics of one run; see the module docstring for the definitions.

    ``denominators`` gives the n behind every rate; ``null_reasons`` says why a metric
    is NaN; ``chunk_match`` is the chunk-matching mode the chunk-level metrics used.
    """

    hit_at_k: dict[int, float]
    mrr: float
    recall_at_k_doc: dict[int, float]
    citation_coverage: float
    groundedness: float
    empty_result_rate: float
    refusal_correctness: float
    total_queries: int
    failed_queries: int
    denominators: dict[str, int] = field(default_factory=dict)
    null_reasons: dict[str, str] = field(default_factory=dict)
    chunk_match: str = MATCH_EXACT
    citation_resolution: str = "chunk_inventory"

    def to_dict(self, ndigits: int | None = None) -> dict[str, Any]:
        """JSON-ready dict (k keys as strings); NaN stays NaN until serialised."""

        def r(x: float) -> float:
            return x if ndigits is None or math.isnan(x) else round(x, ndigits)

        return {
            "hit_at_k": {str(k): r(v) for k, v in sorted(self.hit_at_k.items())},
            "mrr": r(self.mrr),
            "recall_at_k_doc": {str(k): r(v) for k, v in sorted(self.recall_at_k_doc.items())},
            **{name: r(getattr(self, name)) for name in RATE_FIELDS},
            "total_queries": self.total_queries,
            "failed_queries": self.failed_queries,
            "denominators": dict(sorted(self.denominators.items())),
            "null_reasons": dict(sorted(self.null_reasons.items())),
            "chunk_match": self.chunk_match,
            "citation_resolution": self.citation_resolution,
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """Storage form: sorted keys, rounded to 4 decimals, NaN as null."""
        return dumps_json(self.to_dict(), ndigits=STORAGE_DIGITS, indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AggregateMetrics:
        """Rebuild from :meth:`to_dict` / stored JSON (null becomes NaN)."""

        def f(x: Any) -> float:
            return math.nan if x is None else float(x)

        rates: dict[str, Any] = {name: f(data[name]) for name in RATE_FIELDS}
        return cls(
            hit_at_k={int(k): f(v) for k, v in data["hit_at_k"].items()},
            mrr=f(data["mrr"]),
            recall_at_k_doc={int(k): f(v) for k, v in data["recall_at_k_doc"].items()},
            **rates,
            total_queries=int(data["total_queries"]),
            failed_queries=int(data["failed_queries"]),
            denominators=dict(data.get("denominators", {})),
            null_reasons=dict(data.get("null_reasons", {})),
            chunk_match=data.get("chunk_match", MATCH_EXACT),
            citation_resolution=data.get("citation_resolution", "chunk_inventory"),
        )

    def scalar_metrics(self) -> dict[str, float]:
        """Flat ``{"hit@1": …, "mrr": …, "recall_doc@1": …, …}`` view of the rates."""
        flat = {f"hit@{k}": v for k, v in sorted(self.hit_at_k.items())}
        flat["mrr"] = self.mrr
        flat.update({f"recall_doc@{k}": v for k, v in sorted(self.recall_at_k_doc.items())})
        flat.update({name: getattr(self, name) for name in RATE_FIELDS})
        return flat


def _mean(values: np.ndarray) -> tuple[float, int]:
    mask = ~np.isnan(values)
    n = int(mask.sum())
    return (float(values[mask].mean()) if n else math.nan), n


def _rate(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else math.nan


def aggregate_from_records(
    golden: GoldenSet,
    results: Mapping[str, QueryResult],
    known_chunk_ids: AbstractSet[str] | None = None,
    *,
    mode: str = MATCH_EXACT,
    expected_spans: Mapping[str, Mapping[str, Any]] | None = None,
) -> AggregateMetrics:
    """:func:`aggregate_from_columns` of in-memory records (put into columns first).

    Parameters
    ----------
    golden
        The run's golden set (its snapshot).
    results
        Results by query id; golden queries without an entry count as failed.
    known_chunk_ids, mode, expected_spans
        As :func:`aggregate_from_columns`.

    Examples
    --------
    >>> from retrieval_lib.kb.golden import parse_golden
    >>> from retrieval_lib.kb.records import Hit
    >>> g = parse_golden([{"id": "q", "query": "x", "expected_doc_ids": ["d"],
    ...                    "expected_chunk_ids": ["c1"]}])
    >>> agg = aggregate_from_records(g, {"q": QueryResult("q", (Hit("c1", "d", 1, 1.0),))})
    >>> agg.hit_at_k[1], agg.mrr, agg.total_queries
    (1.0, 1.0, 1)
    """
    return aggregate_from_columns(
        golden,
        RunColumns.from_results(results),
        known_chunk_ids,
        mode=mode,
        expected_spans=expected_spans,
    )


def aggregate_from_columns(
    golden: GoldenSet,
    run: RunColumns,
    known_chunk_ids: AbstractSet[str] | None = None,
    *,
    mode: str = MATCH_EXACT,
    expected_spans: Mapping[str, Mapping[str, Any]] | None = None,
    per_query: PerQueryMetrics | None = None,
) -> AggregateMetrics:
    """Compute :class:`AggregateMetrics` of a run given in columns.

    Parameters
    ----------
    golden
        The run's golden set (its snapshot); golden queries without a result line count
        as failed.
    run
        The run's results (:class:`~retrieval_lib.kb.columns.RunColumns`).
    known_chunk_ids
        The chunk inventory citations resolve against; None means "no inventory was
        ingested", and the chunks the run retrieved are used instead.
    mode, expected_spans
        Chunk-matching mode and, for the fallback, expected chunk spans.
    per_query
        :func:`~retrieval_lib.kb.columns.evaluate_columns` of the same inputs, when the
        caller already has it.

    Examples
    --------
    >>> from retrieval_lib.kb.golden import parse_golden
    >>> from retrieval_lib.kb.records import Answer, Citation
    >>> g = parse_golden([{"id": "q", "query": "x", "expected_doc_ids": ["d"],
    ...                    "must_contain": ["yes"]}])
    >>> run = RunColumns.from_results(
    ...     {"q": QueryResult("q", (), Answer("yes [#1]", True, (Citation("[#1]", "c1"),)))})
    >>> agg = aggregate_from_columns(g, run, {"c1"})
    >>> agg.groundedness, agg.citation_coverage, agg.empty_result_rate
    (1.0, 1.0, 1.0)
    """
    if per_query is None:
        per_query = evaluate_columns(
            golden, run, mode=mode, expected_spans=expected_spans, inventory_ids=known_chunk_ids
        )
    if per_query.query_ids != golden.ids:
        raise ValueError("per_query was computed for another golden set")
    denominators: dict[str, int] = {}
    null_reasons: dict[str, str] = {}
    hit_at_k, mrr, recall = _ranking_metrics(per_query, denominators, null_reasons)
    known = set(run.chunk_ids) if known_chunk_ids is None else known_chunk_ids
    counts = _count_answers(golden, run, known)
    answers = counts.answers
    denominators.update(
        citation_coverage=counts.grounded_answers,
        groundedness=answers,
        empty_result_rate=counts.ran,
        refusal_correctness=counts.should_refuse if answers else 0,
    )
    null_reasons.update(_answer_null_reasons(counts))

    return AggregateMetrics(
        hit_at_k=hit_at_k,
        mrr=mrr,
        recall_at_k_doc=recall,
        citation_coverage=_rate(counts.covered, counts.grounded_answers),
        groundedness=_rate(counts.grounded_ok, answers),
        empty_result_rate=_rate(counts.empty, counts.ran),
        refusal_correctness=_rate(counts.refused, counts.should_refuse) if answers else math.nan,
        total_queries=len(golden),
        failed_queries=counts.failed,
        denominators=denominators,
        null_reasons=null_reasons,
        chunk_match=mode,
        citation_resolution="retrieved_chunks" if known_chunk_ids is None else "chunk_inventory",
    )


def _ranking_metrics(
    per_query: PerQueryMetrics, denominators: dict[str, int], null_reasons: dict[str, str]
) -> tuple[dict[int, float], float, dict[int, float]]:
    """``hit_at_k``, ``mrr`` and ``recall_at_k_doc``: means of the per-query values.

    Fills in their ``denominators`` and, when a mean has no query or some queries were
    left out, ``null_reasons``.
    """
    hit_at_k = {}
    for k in K_VALUES:
        hit_at_k[k], denominators["hit_at_k"] = _mean(per_query.hit_at_k[k])
    mrr, denominators["mrr"] = _mean(per_query.reciprocal_rank)
    recall = {}
    for k in K_VALUES:
        recall[k], denominators["recall_at_k_doc"] = _mean(per_query.recall_at_k_doc[k])
    excluded = Counter(per_query.not_computable.values())
    if denominators["hit_at_k"] == 0:
        reason = (
            "no query has expected_chunk_ids"
            if not excluded
            else "no query is computable: " + "; ".join(sorted(excluded))
        )
        null_reasons["hit_at_k"] = null_reasons["mrr"] = reason
    elif excluded:
        null_reasons["hit_at_k_excluded"] = "; ".join(
            f"{n} {'query' if n == 1 else 'queries'} excluded: {why}"
            for why, n in sorted(excluded.items())
        )
    if denominators["recall_at_k_doc"] == 0:
        null_reasons["recall_at_k_doc"] = "no query has expected_doc_ids"
    return hit_at_k, mrr, recall


@dataclass(frozen=True)
class _AnswerCounts:
    """The counts behind the answer-level rates (and ``empty_result_rate``)."""

    failed: int  # golden queries with an error or without a result line
    ran: int
    empty: int  # ran, with zero hits
    answers: int
    grounded_answers: int
    covered: int  # grounded answers whose every citation resolves
    grounded_ok: int  # answers with every must_contain and no forbidden string
    should_refuse: int
    refused: int  # should-refuse queries whose answer refused


def _count_answers(golden: GoldenSet, run: RunColumns, known: AbstractSet[str]) -> _AnswerCounts:
    """Count, query by query, what the answer-level rates divide."""
    row_of = run.row_of()
    hit_counts = run.hit_counts().tolist()
    answer_of = run.answers()
    # The run's distinct citation markers, each matched once.
    markers = {m for m in run.citation_markers if CITATION_MARKER.fullmatch(m)}
    failed = ran = empty = answers = grounded_answers = covered = grounded_ok = 0
    should_refuse = refused = 0
    for query in golden:
        row = row_of.get(query.id)
        answer = None
        if row is None or run.errors[row] is not None:
            failed += 1
        else:
            ran += 1
            empty += not hit_counts[row]
            answer = answer_of[row]
        if answer is not None:
            text, grounded, citations = answer
            answers += 1
            grounded_ok += all(s in text for s in query.must_contain) and not any(
                s in text for s in query.forbidden
            )
            if grounded:
                grounded_answers += 1
                # every citation a strict marker naming a known chunk
                covered += all(c in markers and chunk in known for c, chunk in citations)
        if query.should_refuse:
            should_refuse += 1
            refused += answer is not None and not answer[1]
    return _AnswerCounts(
        failed, ran, empty, answers, grounded_answers, covered, grounded_ok, should_refuse, refused
    )


def _answer_null_reasons(counts: _AnswerCounts) -> dict[str, str]:
    """Why each answer-level rate (and ``empty_result_rate``) is null, when it is."""
    reasons = {}
    if counts.grounded_answers == 0:
        reasons["citation_coverage"] = "no grounded answer"
    if counts.answers == 0:
        reasons["groundedness"] = "no answer (retrieval-only run or every query failed)"
    if counts.ran == 0:
        reasons["empty_result_rate"] = "no query ran without error"
    if counts.should_refuse == 0:
        reasons["refusal_correctness"] = "the golden set has no should-refuse query"
    elif counts.answers == 0:
        reasons["refusal_correctness"] = "the run has no answers, so it cannot refuse"
    return reasons


# Decoding builds hundreds of thousands of acyclic objects (golden queries, ids); they are
# freed by reference counting when compute_aggregate returns, before the collector is back
# (else its first pass would scan them all).
@paused_gc()
def compute_aggregate(store: Any, run_id: str) -> AggregateMetrics:
    """Compute the aggregate of a stored run (exact chunk matching, its own golden snapshot).

    Parameters
    ----------
    store
        An open :class:`~retrieval_lib.kb.store.KBStore`.
    run_id
        The run.

    Examples
    --------
    >>> import tempfile, os
    >>> from retrieval_lib.kb import KBStore, build_example_store
    >>> db, a, _ = build_example_store(os.path.join(tempfile.mkdtemp(), "eval.sqlite"))
    >>> with KBStore(db) as store:
    ...     round(compute_aggregate(store, a).mrr, 4)
    0.9048
    """
    _, golden_text = store.run_header(run_id)
    golden = GoldenSet.from_snapshot_json(golden_text)
    inventory = store.load_chunk_ids(run_id) or None
    return aggregate_from_columns(golden, store.load_columns(run_id), inventory)


def store_aggregate(store: Any, run_id: str, aggregate: AggregateMetrics) -> None:
    """Write ``aggregate`` (rounded to 4 decimals, NaN as null) to ``eval_runs.aggregate_json``."""
    store.set_aggregate(run_id, aggregate.to_json())

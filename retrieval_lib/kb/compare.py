"""Compare two stored runs: metric deltas, per-query outcomes, and whether a delta is noise.

Chunk matching
    Equal ``chunker_version`` (both unset included) → ``"exact"``; different versions →
    ``"fallback_doc_span"`` (document + ≥50% span coverage, :mod:`retrieval_lib.kb.columns`)
    with the expected chunk spans of the golden snapshots, run A's first; with
    ``strict_chunker_version=True``, :class:`~retrieval_lib.kb.exceptions.ChunkerVersionMismatchError`
    instead. ``deltas["chunker_version_match"]`` records the mode; ``aggregate_a`` and
    ``aggregate_b`` are computed under it (in fallback mode their chunk-level metrics differ
    from the exact ones stored with each run).

Per-query kinds (each query gets exactly one, with a ``note``)
    The query set is run A's golden snapshot, then queries only in B's; a query is
    judged against A's entry when both have it (a differing entry is noted). A query's
    *rank* is the rank of its first relevant hit within the top 10, or a miss; a failed
    query or one without a result line is a miss.

    ==========================  ======================  ======================================
    A                           B                       kind
    ==========================  ======================  ======================================
    miss                        miss                    Draw, note "miss on both sides"
    miss                        hit at r                Win
    hit at r                    miss                    Regression (A's hit on expected chunk
                                                        X is lost in B)
    hit at r_a                  hit at r_b < r_a        Win   (rank improved)
    hit at r_a                  hit at r_b > r_a        Loss  (rank worsened; both still hit)
    hit at r                    hit at r                Draw, note "same rank r"
    ==========================  ======================  ======================================

    So the seed's overlapping "Loss (a found, b did not)" and "Regression (a hit but b
    miss for the same expected chunk)" are separated: losing the hit altogether is a
    Regression, doing worse while still hitting is a Loss. Queries without expected chunks
    are judged at the document level (first hit whose ``doc_id`` is expected) with the
    same table; should-refuse queries by refusal (``answer.grounded`` false): refused on
    A only → Regression, on B only → Win, both or neither → Draw (ranks None). In fallback
    mode a query whose expected chunks have no known spans, and in exact mode one none of
    whose expected chunk ids is in a run's chunk inventory, is a Draw noted "not
    comparable" and is left out of the statistics.

Beyond the seed, ``deltas["significance"]`` holds, for the per-query reciprocal rank
(top 10) and hit@k of queries computable on both sides, the mean paired delta (b − a),
a seeded percentile bootstrap confidence interval of it, and a two-sided Wilcoxon
signed-rank test (``zero_method="wilcox"``: zero deltas are dropped, ``n_nonzero`` says
how many remain).
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from retrieval_lib.io import dumps_json
from retrieval_lib.kb.columns import PerQueryMetrics, RunColumns, evaluate_columns
from retrieval_lib.kb.definitions import (
    K_VALUES,
    MATCH_EXACT,
    MATCH_FALLBACK,
    MRR_CUTOFF,
    STORAGE_DIGITS,
)
from retrieval_lib.kb.exceptions import ChunkerVersionMismatchError
from retrieval_lib.kb.golden import GoldenQuery, GoldenSet
from retrieval_lib.kb.metrics import RATE_FIELDS, AggregateMetrics, aggregate_from_columns
from retrieval_lib.kb.records import QueryResult, paused_gc

__all__ = [
    "ComparisonKind",
    "QueryComparison",
    "CompareReport",
    "compare_runs",
    "compare_records",
    "chunk_match_mode",
    "paired_delta_stats",
    "metric_deltas",
]


class ComparisonKind(str, enum.Enum):
    """Outcome of one query from run A to run B (see the module docstring)."""

    WIN = "Win"
    LOSS = "Loss"
    DRAW = "Draw"
    REGRESSION = "Regression"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)  # slots: 100,000 of them in a large compare
class QueryComparison:
    """One query's comparison. ``criterion``: ``chunk``, ``doc``, ``refusal`` or ``not_comparable``."""

    query_id: str
    kind: ComparisonKind
    a_hit_rank: int | None
    b_hit_rank: int | None
    note: str | None
    criterion: str = "chunk"

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "kind": self.kind.value,
            "a_hit_rank": self.a_hit_rank,
            "b_hit_rank": self.b_hit_rank,
            "note": self.note,
            "criterion": self.criterion,
        }


@dataclass(frozen=True)
class CompareReport:
    """The seed's ``CompareReport``: both aggregates, ``deltas`` (b − a) and per-query kinds."""

    run_a: str
    run_b: str
    aggregate_a: AggregateMetrics
    aggregate_b: AggregateMetrics
    deltas: dict[str, Any]
    per_query: list[QueryComparison]

    def to_dict(self, ndigits: int | None = None) -> dict[str, Any]:
        """JSON-ready dict; rounding (``ndigits``) only for storage/printing."""
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "aggregate_a": self.aggregate_a.to_dict(ndigits),
            "aggregate_b": self.aggregate_b.to_dict(ndigits),
            "deltas": self.deltas,
            "per_query": [q.to_dict() for q in self.per_query],
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """Sorted keys, 4 decimals, NaN as null."""
        return dumps_json(self.to_dict(), ndigits=STORAGE_DIGITS, indent=indent)

    @property
    def chunker_version_match(self) -> str:
        """``"exact"`` or ``"fallback_doc_span"``."""
        return str(self.deltas["chunker_version_match"])

    def kind_counts(self) -> dict[str, int]:
        """Number of queries per kind (every kind present, zero included)."""
        counts = Counter(q.kind.value for q in self.per_query)
        return {kind.value: counts.get(kind.value, 0) for kind in ComparisonKind}

    def metric_rows(self) -> list[dict[str, Any]]:
        """One row per rate: value in A and B, delta, and (where computed) CI and p-value.

        Full precision, NaN for missing; the notebook turns this into a table.
        """
        a = self.aggregate_a.scalar_metrics()
        b = self.aggregate_b.scalar_metrics()
        significance = self.deltas.get("significance", {})
        rows = []
        for name in a:
            stats = significance.get(name, {})
            wilcoxon = stats.get("wilcoxon") or {}
            rows.append(
                {
                    "metric": name,
                    "a": a[name],
                    "b": b[name],
                    "delta": b[name] - a[name],
                    "paired_n": stats.get("n"),
                    "mean_paired_delta": _nan(stats.get("mean_delta")),
                    "ci_low": _nan(stats.get("ci_low")),
                    "ci_high": _nan(stats.get("ci_high")),
                    "wilcoxon_p": _nan(wilcoxon.get("p_value")),
                }
            )
        return rows

    def per_query_rows(self) -> list[dict[str, Any]]:
        """Per-query comparisons as plain dicts (for a DataFrame)."""
        return [q.to_dict() for q in self.per_query]


def _nan(value: Any) -> float:
    return math.nan if value is None else float(value)


# -- statistics ---------------------------------------------------------------------------


def paired_delta_stats(
    deltas: np.ndarray,
    *,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Mean of paired deltas, seeded percentile bootstrap CI, Wilcoxon signed-rank test.

    The bootstrap is the library's one bootstrap of a mean,
    :func:`retrieval_lib.stats.intervals.bootstrap_mean_ci`: ``n_bootstrap`` resamples of
    the n deltas with replacement, ``alpha = 1 - confidence``.

    Examples
    --------
    >>> s = paired_delta_stats(np.array([0.5, 0.5, 1.0, 0.0, 0.5]), seed=1)
    >>> s["n"], s["mean_delta"], s["wilcoxon"]["n_nonzero"]
    (5, 0.5, 4)
    >>> s["ci_low"] <= 0.5 <= s["ci_high"]
    True
    """
    values = np.asarray(deltas, dtype=float)
    values = values[~np.isnan(values)]
    n = int(values.size)
    out: dict[str, Any] = {
        "n": n,
        "mean_delta": math.nan,
        "ci_low": math.nan,
        "ci_high": math.nan,
        "confidence": confidence,
        "n_bootstrap": n_bootstrap,
        "seed": seed,
        "wilcoxon": None,
        "reason": None,
    }
    if n == 0:
        out["reason"] = "no query is computable on both sides"
        return out
    from retrieval_lib.stats.intervals import bootstrap_mean_ci
    from retrieval_lib.stats.paired_tests import wilcoxon_signed_rank

    out["mean_delta"] = float(values.mean())
    out["ci_low"], out["ci_high"] = bootstrap_mean_ci(
        values, n_boot=n_bootstrap, seed=seed, alpha=1.0 - confidence
    )
    nonzero = int(np.count_nonzero(values))
    # The project's one signed-rank test: exact by enumeration for small n, ties included;
    # tie-corrected normal approximation for large n.
    result = wilcoxon_signed_rank(values) if nonzero else None
    out["wilcoxon"] = {
        "statistic": math.nan if result is None else float(result.statistic),
        "p_value": math.nan if result is None else float(result.p_value),
        "n_nonzero": nonzero,
        "zero_method": "wilcox",
        "alternative": "two-sided",
        "reason": None if nonzero else "every paired delta is zero",
    }
    return out


def metric_deltas(a: AggregateMetrics, b: AggregateMetrics) -> dict[str, Any]:
    """Per-metric ``b - a`` shaped like :class:`AggregateMetrics` (NaN when either side is)."""
    return {
        "hit_at_k": {str(k): b.hit_at_k[k] - a.hit_at_k[k] for k in K_VALUES},
        "mrr": b.mrr - a.mrr,
        "recall_at_k_doc": {str(k): b.recall_at_k_doc[k] - a.recall_at_k_doc[k] for k in K_VALUES},
        **{
            name: getattr(b, name) - getattr(a, name)
            for name in (*RATE_FIELDS, "total_queries", "failed_queries")
        },
    }


# -- per-query kinds ------------------------------------------------------------------------


class _Side:
    """One run of a comparison: id, golden set, chunker version, columns and chunk
    inventory (None: none)."""

    def __init__(
        self,
        run_id: str,
        golden: GoldenSet,
        chunker_version: str | None,
        run: RunColumns,
        chunks: AbstractSet[str] | None,
    ) -> None:
        self.run_id = run_id
        self.golden = golden
        self.chunker_version = chunker_version
        self.run = run
        self.chunks = chunks
        self.row_of = run.row_of()

    def side_notes(self, side: str, query_ids: list[str]) -> dict[str, str]:
        """Notes of the queries without a result or with an error in this run."""
        notes = {q: f"no result in run {side}" for q in set(query_ids) - self.row_of.keys()}
        notes.update(
            (q, f"run {side} failed: {error}")
            for q, error in zip(self.run.query_ids, self.run.errors, strict=True)
            if error is not None
        )
        return notes

    def doc_rank(self, query: GoldenQuery) -> int | None:
        row = self.row_of.get(query.id)
        if row is None or self.run.errors[row] is not None:
            return None
        expected = set(query.expected_doc_ids)
        start = int(self.run.hit_offsets[row])
        end = min(int(self.run.hit_offsets[row + 1]), start + MRR_CUTOFF)
        doc_ids = self.run.doc_ids
        codes = self.run.doc_codes[start:end].tolist()
        return next((i for i, code in enumerate(codes, 1) if doc_ids[code] in expected), None)

    def refused(self, query_id: str) -> bool:
        row = self.row_of.get(query_id)
        if row is None or self.run.errors[row] is not None:
            return False
        return int(self.run.answer_grounded[row]) == 0  # an answer that refused


def _rank_kind(
    a_rank: int | None, b_rank: int | None, a_chunk: str | None, b_chunk: str | None
) -> tuple[ComparisonKind, str]:
    if a_rank is None and b_rank is None:
        return ComparisonKind.DRAW, "miss on both sides"
    if a_rank is None:
        return ComparisonKind.WIN, f"found only by B (rank {b_rank})"
    if b_rank is None:
        what = f"expected chunk {a_chunk!r}" if a_chunk else "an expected document"
        return ComparisonKind.REGRESSION, f"A's hit at rank {a_rank} on {what} is lost in B"
    if b_rank < a_rank:
        return ComparisonKind.WIN, f"rank improved {a_rank} → {b_rank}"
    if b_rank > a_rank:
        return ComparisonKind.LOSS, f"rank worsened {a_rank} → {b_rank}"
    note = f"same rank {a_rank}"
    if a_chunk and b_chunk and a_chunk != b_chunk:
        note += f" (A matched {a_chunk!r}, B matched {b_chunk!r})"
    return ComparisonKind.DRAW, note


def chunk_match_mode(
    run_a: str,
    run_b: str,
    chunker_version_a: str | None,
    chunker_version_b: str | None,
    *,
    strict: bool = False,
) -> str:
    """``"exact"`` for equal chunker versions, else ``"fallback_doc_span"`` (or an error).

    Raises
    ------
    ChunkerVersionMismatchError
        When the versions differ and ``strict`` is set.

    Examples
    --------
    >>> chunk_match_mode("a", "b", "v1", "v2")
    'fallback_doc_span'
    """
    if chunker_version_a == chunker_version_b:
        return MATCH_EXACT
    if strict:
        raise ChunkerVersionMismatchError(
            f"runs {run_a!r} and {run_b!r} have different chunker versions "
            f"({chunker_version_a!r} vs {chunker_version_b!r}); chunk ids are not comparable. "
            "Drop --strict-chunker-version to compare by document and span overlap."
        )
    return MATCH_FALLBACK


def compare_records(
    run_a: str,
    run_b: str,
    golden_a: GoldenSet,
    golden_b: GoldenSet,
    results_a: Mapping[str, QueryResult],
    results_b: Mapping[str, QueryResult],
    *,
    chunks_a: AbstractSet[str] | None = None,
    chunks_b: AbstractSet[str] | None = None,
    chunker_version_a: str | None = None,
    chunker_version_b: str | None = None,
    strict_chunker_version: bool = False,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> CompareReport:
    """Compare two runs given in memory; :func:`compare_runs` reads them from the store.

    ``chunks_a``/``chunks_b`` are the chunk-inventory ids citations resolve against
    (None: no inventory). The records are put into columns
    (:meth:`~retrieval_lib.kb.columns.RunColumns.from_results`) and compared as stored
    runs are. See the module docstring for matching, kinds and statistics.
    """
    mode = chunk_match_mode(
        run_a, run_b, chunker_version_a, chunker_version_b, strict=strict_chunker_version
    )
    return _compare(
        _Side(run_a, golden_a, chunker_version_a, RunColumns.from_results(results_a), chunks_a),
        _Side(run_b, golden_b, chunker_version_b, RunColumns.from_results(results_b), chunks_b),
        mode,
        (n_bootstrap, confidence, seed),
    )


def _judge(
    query: GoldenQuery,
    i: int,
    side_a: _Side,
    side_b: _Side,
    pq_a: PerQueryMetrics,
    pq_b: PerQueryMetrics,
) -> tuple[ComparisonKind, str, int | None, int | None, str]:
    """One query judged: ``(kind, note, a_rank, b_rank, criterion)``.

    ``i`` is the query's position in the reference set (the rows of ``pq_a``/``pq_b``).
    A should-refuse query is judged by refusal, one without expected chunks at the
    document level, one whose chunks cannot be matched is not comparable (a draw), any
    other by the rank of its first expected chunk.
    """
    if query.should_refuse:
        a_ok, b_ok = side_a.refused(query.id), side_b.refused(query.id)
        criterion = "refusal"
        a_rank = b_rank = None
        if a_ok and not b_ok:
            kind, note = ComparisonKind.REGRESSION, "should refuse: A refused, B did not"
        elif b_ok and not a_ok:
            kind, note = ComparisonKind.WIN, "should refuse: B refused, A did not"
        else:
            kind = ComparisonKind.DRAW
            note = f"should refuse: refused on {'both sides' if a_ok else 'neither side'}"
    elif not query.expected_chunk_ids:
        criterion = "doc"
        a_rank, b_rank = side_a.doc_rank(query), side_b.doc_rank(query)
        kind, note = _rank_kind(a_rank, b_rank, None, None)
        note = "doc level (no expected chunks): " + note
    elif query.id in pq_a.not_computable or query.id in pq_b.not_computable:
        criterion = "not_comparable"
        a_rank = b_rank = None
        why = pq_a.not_computable.get(query.id) or pq_b.not_computable[query.id]
        which = "A" if query.id in pq_a.not_computable else "B"
        kind, note = ComparisonKind.DRAW, f"not comparable: in run {which}, {why}"
    else:
        criterion = "chunk"
        a_rank, b_rank = pq_a.first_hit_rank[i], pq_b.first_hit_rank[i]
        kind, note = _rank_kind(a_rank, b_rank, pq_a.matched_chunk[i], pq_b.matched_chunk[i])
    return kind, note, a_rank, b_rank, criterion


def _significance(
    pq_a: PerQueryMetrics, pq_b: PerQueryMetrics, n_bootstrap: int, confidence: float, seed: int
) -> dict[str, Any]:
    """Paired bootstrap CI and Wilcoxon test of the per-query MRR and hit@k deltas (B − A)."""
    pairs = {"mrr": (pq_a.reciprocal_rank, pq_b.reciprocal_rank)}
    pairs.update({f"hit@{k}": (pq_a.hit_at_k[k], pq_b.hit_at_k[k]) for k in K_VALUES})
    return {
        name: paired_delta_stats(b - a, n_bootstrap=n_bootstrap, confidence=confidence, seed=seed)
        for name, (a, b) in pairs.items()
    }


def _compare(
    side_a: _Side, side_b: _Side, mode: str, bootstrap: tuple[int, float, int]
) -> CompareReport:
    """The comparison of two runs; ``bootstrap`` is ``(n_bootstrap, confidence, seed)``."""
    golden_a, golden_b = side_a.golden, side_b.golden
    spans: dict[str, Any] = dict(golden_b.expected_chunk_spans)
    spans.update(golden_a.expected_chunk_spans)

    reference = GoldenSet(
        queries=tuple(golden_a.queries) + tuple(q for q in golden_b if q.id not in golden_a),
        expected_chunk_spans=spans,
    )
    pq_a, pq_b = (
        evaluate_columns(reference, s.run, mode=mode, expected_spans=spans, inventory_ids=s.chunks)
        for s in (side_a, side_b)
    )
    # Each aggregate uses its run's own golden snapshot; when that is the reference set
    # (the usual case) the per-query values above are reused.
    aggregate_a, aggregate_b = (
        aggregate_from_columns(
            side.golden,
            side.run,
            side.chunks,
            mode=mode,
            expected_spans=spans,
            per_query=pq if side.golden.queries == reference.queries else None,
        )
        for side, pq in ((side_a, pq_a), (side_b, pq_b))
    )

    reference_ids = reference.ids
    notes_a = side_a.side_notes("A", reference_ids)
    notes_b = side_b.side_notes("B", reference_ids)
    n_a = len(golden_a)  # the reference set is A's queries, then those only in B
    per_query: list[QueryComparison] = []
    for i, query in enumerate(reference):
        kind, note, a_rank, b_rank, criterion = _judge(query, i, side_a, side_b, pq_a, pq_b)
        notes = [note]
        entry_b = golden_b.get(query.id)
        if i >= n_a:
            notes.append("not in run A's golden set")
        elif entry_b is None:
            notes.append("not in run B's golden set")
        elif entry_b is not query and entry_b != query:
            notes.append("golden entry differs between the runs; judged by A's")
        notes += [n for n in (notes_a.get(query.id), notes_b.get(query.id)) if n is not None]
        per_query.append(
            QueryComparison(query.id, kind, a_rank, b_rank, "; ".join(notes), criterion)
        )

    deltas = metric_deltas(aggregate_a, aggregate_b)
    report = CompareReport(
        side_a.run_id, side_b.run_id, aggregate_a, aggregate_b, deltas, per_query
    )
    deltas.update(
        chunker_version_match=mode,
        chunker_version_a=side_a.chunker_version,
        chunker_version_b=side_b.chunker_version,
        kind_counts=report.kind_counts(),
        significance=_significance(pq_a, pq_b, *bootstrap),
    )
    return report


# Decoding builds hundreds of thousands of acyclic objects (golden queries, ids); they are
# freed by reference counting when compare_runs returns, before the collector is back
# (else its first pass would scan them all).
@paused_gc()
def compare_runs(
    store: Any,
    run_id_a: str,
    run_id_b: str,
    *,
    strict_chunker_version: bool = False,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> CompareReport:
    """Compare two stored runs (B against A; deltas are b − a).

    Parameters
    ----------
    store
        An open :class:`~retrieval_lib.kb.store.KBStore`.
    run_id_a, run_id_b
        The baseline and the candidate run.
    strict_chunker_version
        Refuse (``ChunkerVersionMismatchError``) instead of the doc + span fallback.
    n_bootstrap, confidence, seed
        Bootstrap resamples, CI level and RNG seed of ``deltas["significance"]``.

    Examples
    --------
    >>> import tempfile, os
    >>> from retrieval_lib.kb import KBStore, build_example_store
    >>> db, a, b = build_example_store(os.path.join(tempfile.mkdtemp(), "eval.sqlite"))
    >>> with KBStore(db) as store:
    ...     report = compare_runs(store, a, b)
    >>> report.chunker_version_match, report.kind_counts()
    ('fallback_doc_span', {'Win': 2, 'Loss': 7, 'Draw': 15, 'Regression': 1})
    """
    chunker_a, golden_text_a = store.run_header(run_id_a)
    chunker_b, golden_text_b = store.run_header(run_id_b)
    # Refuse before loading any results when strict matching is impossible.
    mode = chunk_match_mode(run_id_a, run_id_b, chunker_a, chunker_b, strict=strict_chunker_version)
    golden_a, golden_b = _golden_pair(golden_text_a, golden_text_b)
    del golden_text_a, golden_text_b  # tens of megabytes for a large golden set
    side_a, side_b = (
        _Side(
            run_id,
            golden,
            chunker,
            store.load_columns(run_id),
            store.load_chunk_ids(run_id) or None,
        )
        for run_id, golden, chunker in (
            (run_id_a, golden_a, chunker_a),
            (run_id_b, golden_b, chunker_b),
        )
    )
    return _compare(side_a, side_b, mode, (n_bootstrap, confidence, seed))


def _golden_pair(text_a: str, text_b: str) -> tuple[GoldenSet, GoldenSet]:
    """Both runs' golden sets; runs of one golden file share their query objects.

    Two snapshots of one golden file differ at most in ``expected_chunk_spans`` (each
    run's inventory): the queries are then decoded once, and the per-query check "same
    golden entry in both runs" becomes an identity test.
    """
    golden_a = GoldenSet.from_snapshot_json(text_a)
    if text_b == text_a:
        return golden_a, golden_a
    # One decoded snapshot at a time (each is ~1 kB of Python objects per query).
    snapshot_b = orjson.loads(text_b)
    queries_b = snapshot_b.get("queries", [])
    if len(queries_b) != len(golden_a) or any(
        q.to_dict() != entry for q, entry in zip(golden_a.queries, queries_b, strict=True)
    ):
        return golden_a, GoldenSet.from_snapshot(snapshot_b)
    return golden_a, GoldenSet(
        queries=golden_a.queries,
        sha256=snapshot_b.get("sha256"),
        source=snapshot_b.get("source"),
        expected_chunk_spans=dict(snapshot_b.get("expected_chunk_spans") or {}),
    )

"""A run's results in columns, and the per-query evaluation computed from them.

The one evaluation path of the knowledge-base metrics. Ingest stores each run in columns
(``eval_run_columns``, :mod:`retrieval_lib.kb.store`): per query its id, error and answer;
per hit, in query then rank order, integer codes of its ``chunk_id`` and ``doc_id`` (into
per-run dictionaries) and its spans, as packed little-endian arrays. Records held in memory
are put into the same columns (:meth:`RunColumns.from_results`). Scores and extra fields
are used by no metric and stay in the JSON documents only.

:func:`evaluate_columns` gives the per-query values (:class:`PerQueryMetrics`) that
:mod:`retrieval_lib.kb.metrics` aggregates and :mod:`retrieval_lib.kb.compare` pairs.
Which hit is relevant:

``"exact"``
    its ``chunk_id`` is an expected chunk id.
``"fallback_doc_span"``
    its ``doc_id`` is the document of an expected chunk and its spans cover at least
    half of that chunk's characters (``2 * covered >= total``; both span lists merged
    first, so overlaps count once). The first such expected chunk, in
    ``expected_chunk_ids`` order, is the one it matched. A query whose expected region is
    known but not retrieved is a miss (0); one whose expected chunks have no known spans
    is not computable (NaN, reason in ``not_computable``).

The ranking metrics come from the shared kernel
:func:`retrieval_lib.metrics.ranking.evaluate_rankings`. Hit@k, RR@10 and R@k (k <= 10) of
a query depend only on which of its positions 1..10 hold a relevant hit and on the size of
its relevant set (what ``R@k`` divides by; 0: not computable, NaN). Each distinct such
*pattern* (a few hundred at most) is scored once as a position-coded ranking and its values
are copied to the queries that have it. ``tests/kb/record_oracle.py`` computes the same
values record by record; the tests check both agree bit for bit on randomised runs.

Over 700 lines because the column layout and the evaluation over it share the packed
arrays and their dictionaries.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import accumulate, chain, islice, repeat
from typing import Any, cast

import numpy as np
import orjson

from retrieval_lib.kb.definitions import (
    K_VALUES,
    MATCH_EXACT,
    MATCH_MODES,
    MRR_CUTOFF,
    REASON_NO_INVENTORY_MATCH,
    REASON_NO_SPANS,
    REASON_NOT_IN_INVENTORY,
)
from retrieval_lib.kb.golden import GoldenSet
from retrieval_lib.kb.records import QueryResult
from retrieval_lib.metrics.ranking import evaluate_rankings

__all__ = [
    "COLUMNS_FORMAT",
    "PerQueryMetrics",
    "RunColumns",
    "RunColumnsBuilder",
    "evaluate_columns",
    "stored_format",
]

#: Format tag stored in the ``meta`` column. Opening a store whose columns have another
#: format rebuilds them from the JSON documents (a migration, once).
COLUMNS_FORMAT = "kb-run-columns/2"


def stored_format(meta: bytes) -> str | None:
    """The format tag of an encoded ``meta`` column (None when it has none).

    Examples
    --------
    >>> stored_format(b'{"format": "kb-run-columns/1", "rows": 0}')
    'kb-run-columns/1'
    """
    tag = orjson.loads(meta).get("format")
    return tag if isinstance(tag, str) else None


_INT32 = np.dtype("<i4")
_INT64 = np.dtype("<i8")
#: Columns stored as JSON lists, besides the ``meta`` object.
_JSON_COLUMNS = (
    "query_ids",
    "errors",
    "answer_texts",
    "citation_markers",
    "citation_chunk_ids",
    "chunk_ids",
    "doc_ids",
)
_ARRAY_COLUMNS: dict[str, np.dtype[Any]] = {
    "hit_offsets": _INT64,
    "answer_grounded": np.dtype("<i1"),
    "citation_offsets": _INT64,
    "citation_marker_codes": _INT32,
    "chunk_codes": _INT32,
    "doc_codes": _INT32,
    "span_offsets": _INT64,
    "spans": _INT64,
}

#: Span columns stored as int32 when every value fits (they do for documents < 2 GiB).
_NARROWABLE = ("span_offsets", "spans")


def _fits_int32(values: np.ndarray) -> bool:
    info = np.iinfo(np.int32)
    return values.size == 0 or (int(values.min()) >= info.min and int(values.max()) <= info.max)


#: An answer as the metrics read it: (text, grounded, [(citation, chunk_id), ...]).
AnswerColumn = tuple[str, bool, list[tuple[str, str | None]]]


@dataclass(frozen=True, eq=False)
class RunColumns:
    """One run's results in columns (rows in ingest order).

    Attributes
    ----------
    query_ids, errors
        Per row: the query id and its error message (None when it ran).
    answer_texts, answer_grounded
        Per row: the answer's text (None without an answer) and ``grounded`` as 1 / 0
        (-1 without an answer).
    citation_offsets, citation_marker_codes, citation_markers, citation_chunk_ids
        Row i's citations are ``citation_offsets[i]:citation_offsets[i + 1]``: per
        citation its marker (index into ``citation_markers``, the distinct markers) and
        the chunk id it names (None when it names none). Flat columns rather than nested
        lists: a few objects per run instead of three lists per answer.
    hit_offsets
        Row i's hits are ``hit_offsets[i]:hit_offsets[i + 1]``, in rank order (ranks
        are exactly 1..n, validated at ingest, so the position is the rank).
    chunk_codes, doc_codes
        Per hit: index into ``chunk_ids`` / ``doc_ids`` (every id any hit of the run
        names, failed queries included).
    span_offsets, spans
        Hit h's spans are rows ``span_offsets[h]:span_offsets[h + 1]`` of ``spans``
        (shape ``(n_spans, 2)``, half-open ``[start, end)``); stored as int32 when all
        values fit, else int64 (``meta["dtypes"]``).
    """

    query_ids: list[str]
    errors: list[str | None]
    answer_texts: list[str | None]
    answer_grounded: np.ndarray
    citation_offsets: np.ndarray
    citation_marker_codes: np.ndarray
    citation_markers: list[str]
    citation_chunk_ids: list[str | None]
    hit_offsets: np.ndarray
    chunk_codes: np.ndarray
    doc_codes: np.ndarray
    chunk_ids: list[str]
    doc_ids: list[str]
    span_offsets: np.ndarray
    spans: np.ndarray

    @property
    def n_rows(self) -> int:
        """Number of result lines."""
        return len(self.query_ids)

    def row_of(self) -> dict[str, int]:
        """Query id → row."""
        return {q: i for i, q in enumerate(self.query_ids)}

    def failed(self) -> np.ndarray:
        """True where the row carries an error."""
        return np.fromiter((e is not None for e in self.errors), dtype=bool, count=self.n_rows)

    def hit_counts(self) -> np.ndarray:
        """Hits per row (failed rows included)."""
        return np.diff(self.hit_offsets)

    def answers(self) -> list[AnswerColumn | None]:
        """Per row: ``(text, grounded, [(citation, chunk_id), ...])``, None without one."""
        markers = self.citation_markers
        marker_of = [markers[c] for c in self.citation_marker_codes.tolist()]
        pairs = list(zip(marker_of, self.citation_chunk_ids, strict=True))
        offsets = self.citation_offsets.tolist()
        return [
            None
            if grounded < 0
            else (cast(str, text), grounded == 1, pairs[offsets[i] : offsets[i + 1]])
            for i, (text, grounded) in enumerate(
                zip(self.answer_texts, self.answer_grounded.tolist(), strict=True)
            )
        ]

    def encode(self) -> dict[str, bytes]:
        """Column name → bytes, as stored in ``eval_run_columns``."""
        dtypes = dict(_ARRAY_COLUMNS)
        for name in _NARROWABLE:
            if _fits_int32(getattr(self, name)):
                dtypes[name] = _INT32
        meta = {
            "format": COLUMNS_FORMAT,
            "rows": self.n_rows,
            "hits": int(self.chunk_codes.size),
            "spans": int(self.spans.shape[0]),
            "dtypes": {name: dtypes[name].str for name in _NARROWABLE},
        }
        out = {"meta": orjson.dumps(meta, option=orjson.OPT_SORT_KEYS)}
        out.update((name, orjson.dumps(getattr(self, name))) for name in _JSON_COLUMNS)
        out.update(
            (name, np.ascontiguousarray(getattr(self, name), dtype=dtype).tobytes())
            for name, dtype in dtypes.items()
        )
        return out

    @classmethod
    def decode(cls, columns: Mapping[str, bytes]) -> RunColumns:
        """Inverse of :meth:`encode`.

        Raises
        ------
        ValueError
            A column is missing, the format tag is unknown or the sizes disagree.
        """
        missing = sorted({"meta", *_JSON_COLUMNS, *_ARRAY_COLUMNS} - set(columns))
        if missing:
            raise ValueError(f"run columns incomplete: missing {missing}")
        meta = orjson.loads(columns["meta"])
        if meta.get("format") != COLUMNS_FORMAT:
            raise ValueError(f"run columns of format {meta.get('format')!r}, not {COLUMNS_FORMAT}")
        dtypes = {**_ARRAY_COLUMNS, **{n: np.dtype(d) for n, d in meta.get("dtypes", {}).items()}}
        arrays: dict[str, Any] = {
            n: np.frombuffer(columns[n], dtype=dtypes[n]) for n in _ARRAY_COLUMNS
        }
        arrays["spans"] = arrays["spans"].reshape(-1, 2)
        decoded = cls(**{name: orjson.loads(columns[name]) for name in _JSON_COLUMNS}, **arrays)
        rows, hits = meta["rows"], meta["hits"]
        if not (
            len(decoded.query_ids) == len(decoded.errors) == len(decoded.answer_texts) == rows
            and decoded.answer_grounded.size == rows
            and decoded.citation_offsets.size == rows + 1
            and decoded.citation_marker_codes.size == len(decoded.citation_chunk_ids)
            and decoded.hit_offsets.size == rows + 1
            and decoded.chunk_codes.size == decoded.doc_codes.size == hits
            and decoded.span_offsets.size == hits + 1
            and decoded.spans.shape[0] == meta["spans"]
        ):
            raise ValueError("run columns disagree in size")
        return decoded

    @classmethod
    def from_results(cls, results: Mapping[str, QueryResult]) -> RunColumns:
        """Columns of in-memory results, keyed by query id (rows in the mapping's order).

        Raises
        ------
        ValueError
            A key is not the query id of its result.
        """
        builder = RunColumnsBuilder()
        for query_id, result in results.items():
            if result.query_id != query_id:
                raise ValueError(f"result of query {result.query_id!r} is filed under {query_id!r}")
            builder.add(result)
        return builder.build()


class RunColumnsBuilder:
    """Accumulates :class:`QueryResult` rows into :class:`RunColumns` (compact arrays)."""

    def __init__(self) -> None:
        self._query_ids: list[str] = []
        self._errors: list[str | None] = []
        self._answer_texts: list[str | None] = []
        self._answer_grounded = array("b")
        self._citation_offsets = array("q", [0])
        self._citation_marker_codes = array("i")
        self._citation_chunk_ids: list[str | None] = []
        self._marker_code: dict[str, int] = {}
        self._hit_offsets = array("q", [0])
        self._chunk_codes = array("i")
        self._doc_codes = array("i")
        self._span_offsets = array("q", [0])
        self._spans = array("q")
        self._chunk_code: dict[str, int] = {}
        self._doc_code: dict[str, int] = {}

    def add(self, result: QueryResult) -> None:
        """Append one result row."""
        self._query_ids.append(result.query_id)
        self._errors.append(result.error)
        answer = result.answer
        if answer is None:
            self._answer_texts.append(None)
            self._answer_grounded.append(-1)
        else:
            self._answer_texts.append(answer.text)
            self._answer_grounded.append(1 if answer.grounded else 0)
            for citation in answer.citations:
                code = self._marker_code.get(citation.citation)
                if code is None:
                    code = self._marker_code[citation.citation] = len(self._marker_code)
                self._citation_marker_codes.append(code)
                self._citation_chunk_ids.append(citation.chunk_id)
        self._citation_offsets.append(len(self._citation_chunk_ids))
        if result.hits:
            # Column-wise (zip over the named tuples) rather than hit by hit: C-level loops.
            chunk_ids, doc_ids, _, _, spans = zip(*result.hits, strict=True)
            for ids, code_of, codes in (
                (chunk_ids, self._chunk_code, self._chunk_codes),
                (doc_ids, self._doc_code, self._doc_codes),
            ):
                for value in ids:
                    if value not in code_of:
                        code_of[value] = len(code_of)
                codes.extend(map(code_of.__getitem__, ids))
            self._spans.extend(chain.from_iterable(chain.from_iterable(spans)))
            self._span_offsets.extend(
                islice(accumulate(map(len, spans), initial=self._span_offsets[-1]), 1, None)
            )
        self._hit_offsets.append(len(self._chunk_codes))

    def build(self) -> RunColumns:
        """The accumulated columns."""
        arrays: dict[str, Any] = {
            name: np.array(getattr(self, f"_{name}"), dtype=dtype)
            for name, dtype in _ARRAY_COLUMNS.items()
        }
        arrays["spans"] = arrays["spans"].reshape(-1, 2)
        return RunColumns(
            query_ids=list(self._query_ids),
            errors=list(self._errors),
            answer_texts=list(self._answer_texts),
            citation_markers=list(self._marker_code),
            citation_chunk_ids=list(self._citation_chunk_ids),
            chunk_ids=list(self._chunk_code),
            doc_ids=list(self._doc_code),
            **arrays,
        )


# -- selecting the hits of the queries being scored ---------------------------------------


@dataclass(frozen=True)
class _ScoredHits:
    """The hits that count for a list of golden queries (index g), flattened (missing and
    failed queries have none)."""

    query: np.ndarray  # per hit: g
    position: np.ndarray  # per hit: 1-based rank
    hit: np.ndarray  # per hit: index into the run's hit arrays


def _scored_hits(run: RunColumns, query_ids: Sequence[str]) -> _ScoredHits:
    row_of = run.row_of()
    rows = np.fromiter((row_of.get(q, -1) for q in query_ids), dtype=np.int64, count=len(query_ids))
    present = rows >= 0
    ran = present.copy()
    ran[present] = ~run.failed()[rows[present]]
    counts = run.hit_counts()
    n_hits = np.where(ran, counts[np.where(present, rows, 0)] if counts.size else 0, 0)
    first = np.cumsum(n_hits) - n_hits
    query = np.repeat(np.arange(len(query_ids), dtype=np.int64), n_hits)
    position = np.arange(query.size, dtype=np.int64) - first[query] + 1
    starts = run.hit_offsets[:-1][np.where(present, rows, 0)] if run.n_rows else n_hits
    hit = starts[query] + position - 1
    return _ScoredHits(query, position, hit)


# -- span matching over flattened spans ------------------------------------------------------


def _merge_spans(
    groups: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge overlapping or touching spans within each group.

    Returns the merged spans sorted by group, then start.
    """
    if groups.size == 0:
        return groups, starts, ends
    order = np.lexsort((starts, groups))
    groups, starts, ends = groups[order], starts[order], ends[order]
    new_group = np.empty(groups.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = groups[1:] != groups[:-1]
    # Running maximum of the ends within each group: offsetting each group by a constant
    # larger than any end makes one global cumulative maximum a per-group one.
    span = int(ends.max()) + 1
    group_rank = np.cumsum(new_group) - 1
    if int(group_rank[-1]) * span < 2**62:
        shifted = group_rank * span + ends
        running = np.maximum.accumulate(shifted) - group_rank * span
    else:  # offsets too large to shift: a plain loop (never reached with real documents)
        running = ends.copy()
        for i in range(1, ends.size):
            if not new_group[i]:
                running[i] = max(running[i - 1], ends[i])
    starts_block = new_group.copy()
    starts_block[1:] |= starts[1:] > running[:-1]
    block_starts = np.flatnonzero(starts_block)
    return (
        groups[block_starts],
        starts[block_starts],
        np.maximum.reduceat(ends, block_starts),
    )


def _group_slices(groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """First index and length of each group in a group-sorted array."""
    counts = np.bincount(groups, minlength=n_groups)
    return np.cumsum(counts) - counts, counts


def _expand(first: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For items i with ``counts[i]`` members starting at ``first[i]``: (item, member) pairs."""
    item = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    offset = np.arange(item.size, dtype=np.int64) - (np.cumsum(counts) - counts)[item]
    return item, first[item] + offset


@dataclass(frozen=True)
class _Regions:
    """Expected chunks with known spans of the scored queries (fallback mode)."""

    query: np.ndarray  # per region: g
    doc_code: np.ndarray  # per region: code in the run's doc dictionary, -1 when absent
    chunk_id: list[str]
    span_region: np.ndarray  # per merged span: region
    span_start: np.ndarray
    span_end: np.ndarray
    total: np.ndarray  # per region: characters in its merged spans


def _regions(
    golden: GoldenSet,
    expected_spans: Mapping[str, Mapping[str, Any]],
    doc_code_of: Mapping[str, int],
) -> tuple[_Regions, np.ndarray]:
    """Regions in query order (then ``expected_chunk_ids`` order), and per g whether any."""
    query: list[int] = []
    doc_code: list[int] = []
    chunk_ids: list[str] = []
    span_region: list[int] = []
    span_start: list[int] = []
    span_end: list[int] = []
    has_region = np.zeros(len(golden), dtype=bool)
    for g, golden_query in enumerate(golden):
        for chunk_id in golden_query.expected_chunk_ids:
            info = expected_spans.get(chunk_id)
            if not info or not info.get("source_spans"):
                continue
            has_region[g] = True
            region = len(chunk_ids)
            query.append(g)
            doc_code.append(doc_code_of.get(info["doc_id"], -1))
            chunk_ids.append(chunk_id)
            for span in info["source_spans"]:
                span_region.append(region)
                span_start.append(span[0])
                span_end.append(span[1])
    groups, starts, ends = _merge_spans(
        np.array(span_region, dtype=np.int64),
        np.array(span_start, dtype=np.int64),
        np.array(span_end, dtype=np.int64),
    )
    total = np.bincount(groups, weights=ends - starts, minlength=len(chunk_ids))
    regions = _Regions(
        query=np.array(query, dtype=np.int64),
        doc_code=np.array(doc_code, dtype=np.int64),
        chunk_id=chunk_ids,
        span_region=groups,
        span_start=starts,
        span_end=ends,
        total=total.astype(np.int64),
    )
    return regions, has_region


def _fallback_matches(
    run: RunColumns, scored: _ScoredHits, regions: _Regions
) -> tuple[np.ndarray, np.ndarray]:
    """Scored hits that match a region (doc + ≥50% span coverage) and the first region each.

    Returns (indices into the scored hits, region index), sorted by scored hit.
    """
    n_docs = max(len(run.doc_ids), 1)
    usable = np.flatnonzero(regions.doc_code >= 0)
    region_key = regions.query[usable] * n_docs + regions.doc_code[usable]
    # sorted by (query, doc), then region order: the first match of a hit is the first
    # region of its query in expected_chunk_ids order, as the definition says.
    order = usable[np.lexsort((usable, region_key))]
    sorted_key = regions.query[order] * n_docs + regions.doc_code[order]
    hit_key = scored.query * n_docs + run.doc_codes[scored.hit].astype(np.int64)
    low = np.searchsorted(sorted_key, hit_key, side="left")
    high = np.searchsorted(sorted_key, hit_key, side="right")
    pair_hit, pair_slot = _expand(low, high - low)
    pair_region = order[pair_slot]
    if pair_hit.size == 0:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty

    # The merged spans of the paired hits.
    run_hit = scored.hit[pair_hit]
    span_first = run.span_offsets[run_hit]
    span_count = run.span_offsets[run_hit + 1] - span_first
    hit_span_pair, hit_span_row = _expand(span_first, span_count)
    merged_pair, merged_start, merged_end = _merge_spans(
        hit_span_pair, run.spans[hit_span_row, 0], run.spans[hit_span_row, 1]
    )
    # Every merged hit span against every merged span of the pair's region; both lists
    # are disjoint after merging, so the summed overlaps are the covered characters.
    region_first, region_count = _group_slices(regions.span_region, len(regions.chunk_id))
    cross_span, cross_region_span = _expand(
        region_first[pair_region[merged_pair]], region_count[pair_region[merged_pair]]
    )
    overlap = np.minimum(merged_end[cross_span], regions.span_end[cross_region_span]) - np.maximum(
        merged_start[cross_span], regions.span_start[cross_region_span]
    )
    covered = np.bincount(
        merged_pair[cross_span],
        weights=np.maximum(overlap, 0),
        minlength=pair_hit.size,
    )
    total = regions.total[pair_region]
    match = (total > 0) & (2 * covered >= total)
    matched_hit, first = np.unique(pair_hit[match], return_index=True)
    return matched_hit, pair_region[match][first]


# -- per-query metrics -----------------------------------------------------------------------


@dataclass(frozen=True)
class PerQueryMetrics:
    """Per-query values of one run against a golden set, in golden order.

    Arrays hold NaN where the query is not applicable (no expected chunks, or in
    fallback mode no known spans for them; no expected documents for recall).
    ``first_hit_rank`` is the rank of the first relevant hit within the top 10 (None on
    a miss or when not applicable); ``matched_chunk`` the expected chunk it matched;
    ``not_computable`` says, per query id, why its chunk-level values are NaN although
    it has expected chunks.
    """

    query_ids: list[str]
    hit_at_k: dict[int, np.ndarray]
    reciprocal_rank: np.ndarray
    recall_at_k_doc: dict[int, np.ndarray]
    first_hit_rank: list[int | None]
    matched_chunk: list[str | None]
    not_computable: dict[str, str]


#: Deepest rank any metric here looks at (Hit@10, RR@10, R@10): relevant hits below it
#: change no value, so a pattern records only the relevant positions 1..10.
_DEPTH = 10


def _patterns(n_relevant: np.ndarray, query: np.ndarray, position: np.ndarray) -> np.ndarray:
    """Per query, ``n_relevant * 2**10 + mask``: the relevant-set size and, as bits, which
    of the positions 1..10 hold a relevant hit (``query``/``position`` list those hits)."""
    mask = np.zeros(n_relevant.size, dtype=np.int64)
    top = position <= _DEPTH
    np.bitwise_or.at(mask, query[top], np.left_shift(1, position[top] - 1))
    return n_relevant * (1 << _DEPTH) + mask


def _kernel_values(patterns: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """The kernel's value of each metric for each pattern (see :func:`_patterns`).

    Each distinct pattern is scored once, as the position-coded ranking ``(1, …, m)`` up
    to its last relevant position with relevant set ``{relevant positions} ∪ {-1, …}``
    (negative fillers bring the set to its size); rows are then copied per query.
    """
    distinct, inverse = np.unique(patterns, return_inverse=True)
    if distinct.size == 0:
        return {name: np.empty(0) for name in names}
    rankings: list[tuple[int, ...]] = []
    relevant: list[set[int]] = []
    for pattern in distinct.tolist():
        n_relevant, mask = divmod(pattern, 1 << _DEPTH)
        found = [p for p in range(1, _DEPTH + 1) if mask >> (p - 1) & 1]
        rankings.append(tuple(range(1, (found[-1] if found else 0) + 1)))
        relevant.append({*found, *range(-1, -(n_relevant - len(found)) - 1, -1)})
    scores = evaluate_rankings(rankings, relevant, names)
    return {name: np.asarray(scores[name], dtype=float)[inverse] for name in names}


def _exact_expected_chunks(
    golden: GoldenSet,
    run: RunColumns,
    n_chunks: int,
    inventory_ids: AbstractSet[str] | None,
    not_computable: dict[str, str],
) -> tuple[np.ndarray, np.ndarray]:
    """Exact matching: per query its number of relevant chunks, and the expected keys.

    Keys are ``query * n_chunks + chunk code``. A query whose chunk-level values cannot
    be computed (another chunker, see :func:`evaluate_columns`) gets 0 relevant chunks,
    no keys and its reason in ``not_computable``.
    """
    n = len(golden)
    chunk_code_of = {c: i for i, c in enumerate(run.chunk_ids)}
    chunk_lists = [q.expected_chunk_ids for q in golden]
    distinct, expected_chunk_keys, key_query = _expected_keys(chunk_lists, chunk_code_of, n_chunks)
    computable = distinct > 0
    if inventory_ids is not None:
        flat = list(chain.from_iterable(chunk_lists))
        known = np.fromiter(map(inventory_ids.__contains__, flat), dtype=bool, count=len(flat))
        owner = np.repeat(np.arange(n, dtype=np.int64), [len(c) for c in chunk_lists])
        excluded = computable & (np.bincount(owner[known], minlength=n) == 0)
        for g in np.flatnonzero(excluded).tolist():
            not_computable[golden.queries[g].id] = REASON_NOT_IN_INVENTORY
        computable &= ~excluded
        expected_chunk_keys = expected_chunk_keys[computable[key_query]]
    elif run.chunk_ids and expected_chunk_keys.size == 0:
        # No inventory, and the run retrieved chunks none of which is an expected one:
        # its chunk ids cannot be told apart from another chunker's, so every query's
        # chunk-level values are missing (not a 0 over every query).
        for g in np.flatnonzero(computable).tolist():
            not_computable[golden.queries[g].id] = REASON_NO_INVENTORY_MATCH
        computable[:] = False
    return np.where(computable, distinct, 0), expected_chunk_keys


def _first_relevant_hits(
    n: int,
    relevant_query: np.ndarray,
    relevant_position: np.ndarray,
    relevant_target: np.ndarray,
    target_names: Sequence[str],
) -> tuple[list[int | None], list[str | None]]:
    """Per query, the rank of its first relevant hit within the top 10 and the expected
    chunk it matched (None without one); relevant hits come in query, rank order."""
    in_top = relevant_position <= MRR_CUTOFF
    first_queries, first_index = np.unique(relevant_query[in_top], return_index=True)
    first_rank: list[int | None] = [None] * n
    matched_chunk: list[str | None] = [None] * n
    for g, rank, target in zip(
        first_queries.tolist(),
        relevant_position[in_top][first_index].tolist(),
        relevant_target[in_top][first_index].tolist(),
        strict=True,
    ):
        first_rank[g] = rank
        matched_chunk[g] = target_names[target]
    return first_rank, matched_chunk


def _first_hits_of_expected_docs(
    run: RunColumns, scored: _ScoredHits, n_docs: int, expected_doc_keys: np.ndarray
) -> np.ndarray:
    """Indices into ``scored`` of the hits that cover an expected document: a hit covers
    its document at the rank of the document's first hit (later hits of it add nothing)."""
    doc_key = scored.query * n_docs + run.doc_codes[scored.hit].astype(np.int64)
    _, first_of_doc = np.unique(doc_key, return_index=True)
    first_of_doc.sort()
    return first_of_doc[np.isin(doc_key[first_of_doc], expected_doc_keys)]


def evaluate_columns(
    golden: GoldenSet,
    run: RunColumns,
    *,
    mode: str = MATCH_EXACT,
    expected_spans: Mapping[str, Mapping[str, Any]] | None = None,
    inventory_ids: AbstractSet[str] | None = None,
) -> PerQueryMetrics:
    """Per-query hit@k, reciprocal rank (top 10) and recall@k_doc of ``run``.

    Parameters
    ----------
    golden
        The queries to score, in the order of the result arrays; a query without a
        result line, or whose line carries an error, is a miss.
    run
        The run's columns.
    mode
        ``"exact"`` or ``"fallback_doc_span"`` (see the module docstring).
    expected_spans
        ``chunk_id -> {"doc_id", "source_spans"}`` of expected chunks (fallback mode).
    inventory_ids
        The run's chunk inventory. In exact mode a query none of whose expected chunk ids
        is in it was chunked by another chunker: its chunk-level values are not
        computable (NaN, reason in ``not_computable``) rather than a miss. Without an
        inventory (None), a run that retrieved chunks but not one expected chunk id of
        the whole golden set cannot be matched at all: every query's chunk-level values
        are not computable (:data:`~retrieval_lib.kb.definitions.REASON_NO_INVENTORY_MATCH`).

    Examples
    --------
    >>> from retrieval_lib.kb.golden import parse_golden
    >>> from retrieval_lib.kb.records import Hit
    >>> g = parse_golden([{"id": "q", "query": "x", "expected_doc_ids": ["d"],
    ...                    "expected_chunk_ids": ["c2"]}])
    >>> run = RunColumns.from_results(
    ...     {"q": QueryResult("q", (Hit("c1", "d", 1, None), Hit("c2", "d", 2, None)))})
    >>> pq = evaluate_columns(g, run)
    >>> float(pq.reciprocal_rank[0]), pq.first_hit_rank
    (0.5, [2])
    """
    if mode not in MATCH_MODES:
        raise ValueError(f"unknown chunk-match mode {mode!r}")
    n = len(golden)
    scored = _scored_hits(run, golden.ids)
    n_chunks = max(len(run.chunk_ids), 1)
    n_docs = max(len(run.doc_ids), 1)
    doc_code_of = {d: i for i, d in enumerate(run.doc_ids)}
    not_computable: dict[str, str] = {}
    n_relevant_docs, expected_doc_keys, _ = _expected_keys(
        [q.expected_doc_ids for q in golden], doc_code_of, n_docs
    )
    if mode == MATCH_EXACT:
        n_relevant_chunks, expected_chunk_keys = _exact_expected_chunks(
            golden, run, n_chunks, inventory_ids, not_computable
        )
        codes = run.chunk_codes[scored.hit].astype(np.int64)
        relevant = np.flatnonzero(np.isin(scored.query * n_chunks + codes, expected_chunk_keys))
        relevant_target = codes[relevant]
        target_names = run.chunk_ids
    else:
        regions, has_region = _regions(golden, expected_spans or {}, doc_code_of)
        for g in np.flatnonzero(~has_region).tolist():
            query = golden.queries[g]
            if query.expected_chunk_ids:
                not_computable[query.id] = REASON_NO_SPANS
        relevant, relevant_target = _fallback_matches(run, scored, regions)
        target_names = regions.chunk_id
        matches_per_query = np.bincount(scored.query[relevant], minlength=n)
        n_relevant_chunks = np.where(has_region, matches_per_query + 1, 0)

    relevant_query = scored.query[relevant]
    relevant_position = scored.position[relevant]
    first_rank, matched_chunk = _first_relevant_hits(
        n, relevant_query, relevant_position, relevant_target, target_names
    )

    doc_relevant = _first_hits_of_expected_docs(run, scored, n_docs, expected_doc_keys)

    chunk_names = [f"Hit@{k}" for k in K_VALUES] + [f"RR@{MRR_CUTOFF}"]
    doc_names = [f"R@{k}" for k in K_VALUES]
    chunk_pattern = _patterns(n_relevant_chunks, relevant_query, relevant_position)
    doc_pattern = _patterns(
        n_relevant_docs, scored.query[doc_relevant], scored.position[doc_relevant]
    )
    values = _kernel_values(np.concatenate([chunk_pattern, doc_pattern]), chunk_names + doc_names)
    return PerQueryMetrics(
        query_ids=golden.ids,
        hit_at_k={k: values[f"Hit@{k}"][:n] for k in K_VALUES},
        reciprocal_rank=values[f"RR@{MRR_CUTOFF}"][:n],
        recall_at_k_doc={k: values[f"R@{k}"][n:] for k in K_VALUES},
        first_hit_rank=first_rank,
        matched_chunk=matched_chunk,
        not_computable=not_computable,
    )


def _expected_keys(
    id_lists: Sequence[Sequence[str]], code_of: Mapping[str, int], n_codes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Expected ids of each query as integer keys ``query * n_codes + code``.

    Returns the number of distinct ids per query (the relevant-set size), the keys of the
    ids the run's dictionary knows (others cannot be retrieved) and each key's query.
    """
    n = len(id_lists)
    distinct = np.fromiter(map(len, map(set, id_lists)), dtype=np.int64, count=n)
    flat = list(chain.from_iterable(id_lists))
    codes = np.fromiter(
        map(code_of.get, flat, repeat(-1, len(flat))), dtype=np.int64, count=len(flat)
    )
    owner = np.repeat(np.arange(n, dtype=np.int64), [len(ids) for ids in id_lists])
    known = codes >= 0
    return distinct, owner[known] * n_codes + codes[known], owner[known]

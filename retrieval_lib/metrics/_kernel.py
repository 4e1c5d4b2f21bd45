"""Vectorised core of the ranking metrics (private; use :mod:`retrieval_lib.metrics.ranking`).

The kernel works in two steps.

1. :func:`extract_hits` makes the only pass over the ids in Python. For each ranking it
   builds ``{id: rank}`` (one C-level ``dict(zip(...))``, which also detects repeated ids)
   and looks up each *relevant* id in it, so the per-ranking cost is one hash per retrieved
   id plus one lookup per relevant id. What comes out is a sparse table of *hits*: for
   every relevant retrieved id, its ranking (row) and its 1-based rank, sorted by row and
   rank. A dense ``n_rankings x max_len`` boolean matrix is never built: every metric
   below needs only the hits and the number of relevant ids per ranking.
2. :class:`HitTable` evaluates each metric as a handful of numpy operations over the hits
   (``bincount`` per row for counts and weighted sums), caching what several metrics share
   (hit counts per cut-off, the first hit of each row). No Python loop runs per metric per
   ranking.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from retrieval_lib.errors import MetricError

__all__ = ["GradedGains", "HitTable", "extract_hits"]

#: 1, 2, 3, ...: zipped with a ranking to number its ids without building a range per ranking.
_RANKS_FROM_ONE = range(1, sys.maxsize)

#: Types rejected as a ranking: strings (a sequence of characters) and unordered containers.
_NOT_RANKINGS = (str, bytes, set, frozenset, dict)

REASON_EMPTY = "empty relevant set: there is nothing to retrieve"
REASON_MISSING = "relevant set missing (None)"


@dataclass(frozen=True, eq=False)
class GradedGains:
    """Graded relevance of many rankings, in sparse form (for nDCG with graded gains).

    Attributes
    ----------
    rows, ranks, values
        Row, 1-based rank and gain of every retrieved id whose gain is not 0.
    ideal_rows, ideal_positions, ideal_values
        The ideal ranking of each row: its positive gains sorted descending, as row,
        1-based position and gain.
    """

    rows: np.ndarray
    ranks: np.ndarray
    values: np.ndarray
    ideal_rows: np.ndarray
    ideal_positions: np.ndarray
    ideal_values: np.ndarray


@dataclass(eq=False)
class HitTable:
    """Relevant retrieved ids of many rankings, in sparse form.

    Attributes
    ----------
    n_rankings
        Number of rankings (rows).
    hit_rows, hit_ranks
        Row and 1-based rank (after duplicate removal) of every relevant retrieved id,
        sorted by row, then rank.
    n_relevant
        Size of each ranking's relevant set (0 when empty or missing).
    n_retrieved
        Number of distinct ids in each ranking.
    n_duplicates
        Number of repeated ids removed from each ranking.
    relevant_missing
        True where the relevant set was ``None``.
    graded
        Graded gains when given (nDCG then uses them, as trec_eval's ``ndcg``); None
        means binary gain (1 for a relevant id).
    """

    n_rankings: int
    hit_rows: np.ndarray
    hit_ranks: np.ndarray
    n_relevant: np.ndarray
    n_retrieved: np.ndarray
    n_duplicates: np.ndarray
    relevant_missing: np.ndarray
    graded: GradedGains | None = None
    _counts_at: dict[int | None, np.ndarray] = field(default_factory=dict, repr=False)

    # -- shared intermediate results (computed once, on first use) ---------------------

    @property
    def computable(self) -> np.ndarray:
        """True where the relevant set is non-empty."""
        return self.n_relevant > 0

    @cached_property
    def _denominator(self) -> np.ndarray:
        # |relevant| with 0 replaced by 1, so non-computable rows divide without warnings;
        # their values are overwritten with NaN by the caller.
        return np.maximum(self.n_relevant, 1).astype(np.float64)

    def _sum_per_row(self, rows: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        """Per ranking: how many of ``rows`` are its (or the sum of their ``weights``)."""
        return np.bincount(rows, weights=weights, minlength=self.n_rankings)

    @cached_property
    def _hits_per_row(self) -> np.ndarray:
        return self._sum_per_row(self.hit_rows)

    @cached_property
    def _row_starts(self) -> np.ndarray:
        """Index in ``hit_rows`` of each row's first hit (hits are sorted by row)."""
        return np.cumsum(self._hits_per_row) - self._hits_per_row

    @cached_property
    def _first_rank(self) -> np.ndarray:
        """Rank of the first relevant id of each ranking; ``inf`` when there is none."""
        first = np.full(self.n_rankings, np.inf)
        with_hits = self._hits_per_row > 0
        first[with_hits] = self.hit_ranks[self._row_starts[with_hits]]
        return first

    @cached_property
    def _ordinals(self) -> np.ndarray:
        """1-based position of each hit among its row's hits (the i in 'i-th relevant')."""
        return np.arange(1, self.hit_rows.size + 1) - self._row_starts[self.hit_rows]

    @cached_property
    def _discount(self) -> np.ndarray:
        """``discount[r] = 1 / log2(r + 1)`` for every rank a hit or ideal list can reach."""
        longest = max(int(self.hit_ranks.max(initial=0)), int(self.n_relevant.max(initial=0)))
        if self.graded is not None:
            longest = max(
                longest,
                int(self.graded.ranks.max(initial=0)),
                int(self.graded.ideal_positions.max(initial=0)),
            )
        discount = np.zeros(longest + 1)
        discount[1:] = 1.0 / np.log2(np.arange(2, longest + 2))
        return discount

    @cached_property
    def _ideal_dcg(self) -> np.ndarray:
        """``ideal_dcg[m]``: DCG of m relevant ids on top (binary gain)."""
        return np.cumsum(self._discount)

    def _within(self, k: int | None) -> np.ndarray | slice:
        """Selector of the hits ranked at or above ``k`` (all hits when ``k`` is None)."""
        return slice(None) if k is None else self.hit_ranks <= k

    def counts_at(self, k: int | None) -> np.ndarray:
        """Relevant retrieved ids in the top ``k`` of each ranking (float64)."""
        if k not in self._counts_at:
            rows = self.hit_rows[self._within(k)]
            self._counts_at[k] = self._sum_per_row(rows).astype(np.float64)
        return self._counts_at[k]

    # -- metric formulas (trec_eval definitions, binary relevance) ---------------------

    def precision(self, k: int) -> np.ndarray:
        """P@k = relevant in top k / k (k, not the number retrieved, as trec_eval)."""
        return self.counts_at(k) / k

    def recall(self, k: int | None) -> np.ndarray:
        """R@k = relevant in top k / |relevant|."""
        return self.counts_at(k) / self._denominator

    def f1(self, k: int) -> np.ndarray:
        """F1@k = 2PR/(P+R), which simplifies to 2 * hits@k / (k + |relevant|)."""
        return 2.0 * self.counts_at(k) / (k + self.n_relevant)

    def hit(self, k: int | None) -> np.ndarray:
        """Hit@k = 1 when any relevant id is in the top k, else 0."""
        return (self.counts_at(k) > 0).astype(np.float64)

    def ndcg(self, k: int | None) -> np.ndarray:
        """nDCG@k with discount 1/log2(rank + 1): binary gain, or the graded gains if given."""
        if self.graded is not None:
            return self._graded_ndcg(self.graded, k)
        within = self._within(k)
        dcg = self._sum_per_row(self.hit_rows[within], self._discount[self.hit_ranks[within]])
        # Ideal ranking: min(k, |relevant|) relevant ids on top.
        ideal_length = self.n_relevant if k is None else np.minimum(self.n_relevant, k)
        ideal = self._ideal_dcg[ideal_length]
        return dcg / np.where(ideal > 0, ideal, 1.0)

    def _graded_ndcg(self, graded: GradedGains, k: int | None) -> np.ndarray:
        """trec_eval's ``ndcg``/``ndcg_cut_k``: gain = grade; ideal = positive grades sorted."""
        within = slice(None) if k is None else graded.ranks <= k
        gains = graded.values[within] * self._discount[graded.ranks[within]]
        dcg = self._sum_per_row(graded.rows[within], gains)
        top = slice(None) if k is None else graded.ideal_positions <= k
        ideal_gains = graded.ideal_values[top] * self._discount[graded.ideal_positions[top]]
        ideal = self._sum_per_row(graded.ideal_rows[top], ideal_gains)
        return np.divide(dcg, ideal, out=np.zeros(self.n_rankings), where=ideal > 0)

    def average_precision(self, k: int | None) -> np.ndarray:
        """AP@k = sum over relevant ids in the top k of precision at their rank / |relevant|."""
        within = self._within(k)
        precision_at_hit = self._ordinals[within] / self.hit_ranks[within]
        return self._sum_per_row(self.hit_rows[within], precision_at_hit) / self._denominator

    def reciprocal_rank(self, k: int | None) -> np.ndarray:
        """RR@k = 1 / rank of the first relevant id, 0 when none is in the top k."""
        first = self._first_rank
        limit = np.inf if k is None else k
        with np.errstate(divide="ignore"):
            return np.where(first <= limit, 1.0 / first, 0.0)

    def r_precision(self) -> np.ndarray:
        """R-Prec = relevant in the top |relevant| / |relevant|."""
        within = self.hit_ranks <= self.n_relevant[self.hit_rows]
        return self._sum_per_row(self.hit_rows[within]) / self._denominator


class _ScoreRanks:
    """``{id: rank}`` of a ``{id: float score}`` dict, looked up without sorting the ids.

    trec_eval's order is score descending, ties by id descending, so the rank of an id is 1
    + the number of higher scores (a bisection in the sorted scores) + the number of ids
    with the same score ordered after it (counted only when its score is tied). The kernel
    needs the ranks of the relevant (or graded) ids only, a few per ranking.
    """

    __slots__ = ("_ascending", "_n", "_scores")

    def __init__(self, scores: dict[Hashable, float]) -> None:
        self._scores = scores
        self._ascending = sorted(scores.values())
        self._n = len(self._ascending)

    def __len__(self) -> int:
        return self._n

    def get(self, item: Hashable) -> int | None:
        score = self._scores.get(item)
        if score is None:
            return None
        ascending = self._ascending
        right = bisect_right(ascending, score)
        rank = self._n - right + 1
        if right >= 2 and ascending[right - 2] == score:  # tied: ids descending break it
            after: Any = item
            try:
                rank += sum(
                    value == score and other > after for other, value in self._scores.items()
                )
            except TypeError as exc:
                raise MetricError(f"ids cannot be ordered to break score ties ({exc})") from None
        return rank


def _bad_input(row: int, what: str) -> MetricError:
    return MetricError(f"ranking {row}: {what}")


def extract_hits(
    rankings: Sequence[Sequence[Hashable]],
    relevant: Sequence[Collection[Hashable] | None],
    gains: Sequence[Mapping[Hashable, float]] | None = None,
    *,
    scored: bool = False,
) -> HitTable:
    """Find the rank of every relevant retrieved id, for all rankings in one pass.

    Parameters
    ----------
    rankings
        One sequence of ids per ranking, best first. Repeated ids keep their first rank.
    relevant
        One collection of relevant ids per ranking (same length as ``rankings``), or
        ``None`` where the relevant set is unknown.
    gains
        Optional graded gains, one ``{id: gain}`` per ranking (ids of gain 0 may be left
        out); nDCG then uses them instead of binary gain.

    Returns
    -------
    HitTable

    Raises
    ------
    MetricError
        Lengths differ, a ranking or relevant set is a string or mapping, or an id is
        unhashable.

    Examples
    --------
    >>> table = extract_hits([["a", "b", "a", "c"]], [{"c"}])
    >>> table.hit_ranks.tolist(), table.n_duplicates.tolist()
    ([3], [1])
    """
    n_rankings = _count_rankings(rankings, relevant, gains)
    hit_ranks: list[int] = []
    add_hits = hit_ranks.extend
    row_ends: list[int] = []
    end_row = row_ends.append
    n_relevant: list[int] = []
    add_n_relevant = n_relevant.append
    n_retrieved: list[int] = []
    add_n_retrieved = n_retrieved.append
    duplicates: dict[int, int] = {}
    missing: dict[int, bool] = {}
    graded_rows: list[tuple[list[int], list[float], list[float]]] = []

    row = -1
    try:
        for row, (ranking, relevant_ids) in enumerate(zip(rankings, relevant, strict=True)):
            rank_of = _rank_of(row, ranking, scored, duplicates)
            add_n_retrieved(len(rank_of))

            kind = type(relevant_ids)
            if kind is set or kind is frozenset:
                relevant_set: Collection[Hashable] = relevant_ids  # type: ignore[assignment]
            elif kind is list or kind is tuple:
                # The usual JSON-loaded input: skip the slower ABC check below.
                relevant_set = set(relevant_ids)  # type: ignore[arg-type]
            elif relevant_ids is None:
                missing[row] = True
                relevant_set = ()
            else:
                relevant_set = _other_relevant_set(row, relevant_ids)
            add_n_relevant(len(relevant_set))
            add_hits(filter(None, map(rank_of.get, relevant_set)))
            end_row(len(hit_ranks))
            if gains is not None:
                graded_rows.append(_graded_row(row, rank_of, gains[row]))
    except TypeError as exc:
        raise _bad_input(
            max(row, 0),
            f"rankings must be sequences and ids hashable ({exc})",
        ) from None

    rows, ranks = _sorted_hits(row_ends, hit_ranks, n_rankings)
    return HitTable(
        n_rankings=n_rankings,
        hit_rows=rows,
        hit_ranks=ranks,
        n_relevant=np.fromiter(n_relevant, dtype=np.int64, count=n_rankings),
        n_retrieved=np.fromiter(n_retrieved, dtype=np.int64, count=n_rankings),
        n_duplicates=_per_row(n_rankings, duplicates, np.int64),
        relevant_missing=_per_row(n_rankings, missing, bool),
        graded=None if gains is None else _graded_gains(graded_rows),
    )


def _count_rankings(
    rankings: Sequence[Sequence[Hashable]],
    relevant: Sequence[Collection[Hashable] | None],
    gains: Sequence[Mapping[Hashable, float]] | None,
) -> int:
    """The number of rankings, once every per-ranking input is known to have one entry each."""
    try:
        n_rankings = len(rankings)
        n_relevant_sets = len(relevant)
    except TypeError as exc:
        raise MetricError(f"rankings and relevant must be sequences ({exc})") from None
    if isinstance(rankings, (str, bytes)) or isinstance(relevant, (str, bytes)):
        raise MetricError("rankings and relevant must be sequences of collections, not strings")
    if n_rankings != n_relevant_sets:
        raise MetricError(
            f"got {n_rankings} rankings but {n_relevant_sets} relevant sets; "
            "there must be one relevant set per ranking"
        )

    if gains is not None and len(gains) != n_rankings:
        raise MetricError(f"got {n_rankings} rankings but {len(gains)} gain mappings")
    return n_rankings


def _rank_of(
    row: int, ranking: Any, scored: bool, duplicates: dict[int, int]
) -> dict[Hashable, int] | _ScoreRanks:
    """``{id: rank}`` of one ranking (first occurrences; repeats counted in ``duplicates``)."""
    rank_of: dict[Hashable, int] | _ScoreRanks
    if scored and type(ranking) is dict:
        rank_of = _ScoreRanks(ranking)
    elif isinstance(ranking, _NOT_RANKINGS):
        raise _bad_input(
            row,
            f"a ranking must be an ordered sequence of ids, got {type(ranking).__name__}"
            " (order scored items with rank_by_score)",
        )
    else:
        rank_of = dict(zip(ranking, _RANKS_FROM_ONE, strict=False))
    if len(rank_of) != len(ranking):
        # Repeated ids: rank the first occurrences only.
        rank_of = dict(zip(dict.fromkeys(ranking), _RANKS_FROM_ONE, strict=False))
        duplicates[row] = len(ranking) - len(rank_of)
    return rank_of


def _other_relevant_set(row: int, relevant_ids: Any) -> Collection[Hashable]:
    """A relevant set given as neither set, list, tuple nor ``None``."""
    if isinstance(relevant_ids, (str, bytes, Mapping)):
        raise _bad_input(
            row,
            "the relevant set must be a collection of ids, got "
            f"{type(relevant_ids).__name__} (for graded judgements pass the ids whose "
            "grade is positive)",
        )
    return set(relevant_ids)


def _sorted_hits(
    row_ends: list[int], hit_ranks: list[int], n_rankings: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row and rank of every hit, sorted by (row, rank): relevant ids come in set order."""
    ends = np.fromiter(row_ends, dtype=np.int64, count=n_rankings)
    counts = np.diff(ends, prepend=0)
    rows = np.repeat(np.arange(n_rankings, dtype=np.int64), counts)
    ranks = np.fromiter(hit_ranks, dtype=np.int64, count=len(hit_ranks))
    if ranks.size:
        stride = int(ranks.max()) + 1
        ordered = np.sort(rows * stride + ranks)
        rows, ranks = np.divmod(ordered, stride)
    return rows, ranks


def _per_row(n_rankings: int, values: dict[int, Any], dtype: type) -> np.ndarray:
    """An array of one value per ranking, zero (or ``False``) except at ``values``' rows."""
    array: np.ndarray = np.zeros(n_rankings, dtype=dtype)
    if values:
        array[list(values)] = list(values.values())
    return array


def _graded_row(
    row: int, rank_of: dict[Hashable, int] | _ScoreRanks, row_gains: Mapping[Hashable, float]
) -> tuple[list[int], list[float], list[float]]:
    """Ranks and gains of one ranking's retrieved graded ids, and its ideal gains."""
    if not isinstance(row_gains, Mapping):
        raise _bad_input(
            row, f"gains must be a mapping {{id: gain}}, got {type(row_gains).__name__}"
        )
    ranks: list[int] = []
    values: list[float] = []
    for doc, gain in row_gains.items():
        rank = rank_of.get(doc)
        if rank is not None and gain:
            ranks.append(rank)
            values.append(float(gain))
    ideal = sorted((float(g) for g in row_gains.values() if g > 0), reverse=True)
    return ranks, values, ideal


def _graded_gains(graded_rows: list[tuple[list[int], list[float], list[float]]]) -> GradedGains:
    def flat(index: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
        sizes = np.fromiter((len(r[index]) for r in graded_rows), dtype=np.int64)
        rows = np.repeat(np.arange(len(graded_rows), dtype=np.int64), sizes)
        values: np.ndarray = np.fromiter(
            (v for r in graded_rows for v in r[index]), dtype=dtype, count=int(sizes.sum())
        )
        return rows, values

    rows, ranks = flat(0, np.int64)
    _, values = flat(1, np.float64)
    ideal_rows, ideal_values = flat(2, np.float64)
    sizes = np.bincount(ideal_rows, minlength=len(graded_rows))
    starts = np.cumsum(sizes) - sizes
    ideal_positions = np.arange(1, ideal_rows.size + 1) - starts[ideal_rows]
    return GradedGains(rows, ranks, values, ideal_rows, ideal_positions, ideal_values)

"""Ranking metrics: one registry of named metrics, one vectorised kernel.

Metrics are named objects with an optional cut-off, written as in ir_measures:
``P@5``, ``R@10``, ``F1@3``, ``nDCG@10``, ``AP``, ``AP@10``, ``RR``, ``RR@10``, ``Hit@5``,
``R-Prec``. :func:`parse_metric` turns a name into a :class:`Metric`,
:data:`METRICS` holds the definition of each family, and :func:`evaluate_rankings`
computes any set of metrics for many rankings at once: the ids are read once, and every
metric is then a few numpy operations over all rankings (see
:mod:`retrieval_lib.metrics._kernel`). :func:`evaluate_queries` takes the calling
convention of ranx and pytrec_eval instead (``{qid: [id, ...]}`` or ``{qid: {id: score}}``
runs, ``{qid: {id: grade}}`` qrels) and returns values keyed by qid; nDCG then uses the
grades as gains, as trec_eval.

Definitions follow trec_eval (relevance is binary: an id is relevant when it is in the
ranking's relevant set). With ``hits@k`` the number of relevant ids in the top ``k`` and
``R = |relevant|``:

* ``P@k = hits@k / k``, dividing by ``k`` even when fewer than ``k`` ids were retrieved
  (trec_eval ``P_k``).
* ``R@k = hits@k / R``; ``R`` alone is recall over the whole ranking (``recall_k``).
* ``F1@k`` is the harmonic mean of P@k and R@k, ``2 * hits@k / (k + R)``; 0 when both are 0.
* ``nDCG@k = DCG@k / IDCG@k`` with gain 1 for a relevant id, discount ``1 / log2(rank + 1)``
  and the ideal ranking made of ``min(k, R)`` relevant ids; ``nDCG`` alone uses the whole
  ranking and ``R`` ideal ids (``ndcg_cut_k``, ``ndcg``).
* ``AP`` is the sum of the precision at the rank of each relevant retrieved id, divided by
  ``R`` (relevant ids never retrieved add 0); ``AP@k`` counts only the top ``k`` and still
  divides by ``R`` (``map``, ``map_cut_k``).
* ``RR`` is ``1 / rank`` of the first relevant id, 0 when none was retrieved; ``RR@k`` is 0
  when the first relevant id lies below rank ``k`` (``recip_rank``; the mean over queries is
  MRR).
* ``Hit@k`` is 1 when any relevant id is in the top ``k``, else 0 (``success_k``).
* ``R-Prec`` is the precision at rank ``R``: ``hits@R / R`` (``Rprec``).

Policies
--------
Order and ties
    The caller's order *is* the ranking: position 1 is the first id. Nothing is re-sorted,
    so two ids never tie. When a ranking comes from scores, build it with
    :func:`rank_by_score`, which orders by score descending, then id descending, exactly as
    trec_eval breaks ties.
Duplicates
    Only the first occurrence of an id counts. Later repeats are removed *before* ranks
    are assigned, so ``["a", "a", "b"]`` is scored as ``["a", "b"]`` (``b`` at rank 2). The
    number removed per ranking is reported in :attr:`RankingScores.n_duplicates`. Ids are
    compared by hash and equality, so normalise them (e.g. path keys) beforehand.
Empty or missing relevant set
    A ranking whose relevant set is empty cannot be scored: every metric is NaN (never 0.0
    or 1.0), :attr:`RankingScores.computable` is False and :attr:`RankingScores.reasons`
    says why. ``None`` instead of a set means the relevant set is unknown, with its own
    reason. Means over rankings skip non-computable rows and report their n.
Empty ranking
    With a non-empty relevant set, an empty ranking scores 0 for every metric.
Cut-off larger than the ranking
    Missing positions count as non-relevant: ``P@10`` of a 3-id ranking with 2 relevant is
    ``2 / 10``; ``R-Prec`` divides by ``R`` even when fewer than ``R`` ids were retrieved.
Relevant ids never retrieved
    They count in ``R`` (the denominators of recall, F1, AP, R-Prec and the ideal DCG).

A metric's definition, name and two calling conventions stay together, over the kernel.

Examples
--------
>>> scores = evaluate_rankings([["a", "x", "b"], ["y"]], [{"a", "b"}, set()], ["P@2", "AP"])
>>> scores["P@2"].tolist()
[0.5, nan]
>>> round(float(scores["AP"][0]), 4)  # (1/1 + 2/3) / 2
0.8333
>>> scores.reasons[1]
'empty relevant set: there is nothing to retrieve'
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from retrieval_lib.errors import MetricError
from retrieval_lib.metrics._kernel import REASON_EMPTY, REASON_MISSING, HitTable, extract_hits

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "METRICS",
    "MeanScore",
    "Metric",
    "MetricSpec",
    "QueryScores",
    "RankingScores",
    "evaluate_rankings",
    "evaluate_queries",
    "non_computable_reason",
    "parse_metric",
    "rank_by_score",
]

CutoffRule = Literal["required", "optional", "none"]


@dataclass(frozen=True)
class MetricSpec:
    """Definition of one metric family.

    Attributes
    ----------
    family
        Canonical family name, e.g. ``"nDCG"``.
    cutoff
        ``"required"`` (``P@k``), ``"optional"`` (``AP`` or ``AP@k``) or ``"none"``
        (``R-Prec``).
    definition
        What the metric computes, in words.
    trec_eval
        The equivalent trec_eval measure (``k`` stands for the cut-off).
    aliases
        Other accepted spellings of the family (matched case-insensitively).
    """

    family: str
    cutoff: CutoffRule
    definition: str
    trec_eval: str
    aliases: tuple[str, ...] = ()


_SPECS = (
    MetricSpec(
        "P",
        "required",
        "Precision at k: relevant ids in the top k divided by k (by k even when fewer than k "
        "ids were retrieved).",
        "P_k",
        ("precision",),
    ),
    MetricSpec(
        "R",
        "optional",
        "Recall at k: relevant ids in the top k divided by the number of relevant ids; "
        "without k, over the whole ranking.",
        "recall_k",
        ("recall",),
    ),
    MetricSpec(
        "F1",
        "required",
        "Harmonic mean of P@k and R@k, 2*hits@k/(k + |relevant|); 0 when both are 0.",
        "(from P_k and recall_k)",
    ),
    MetricSpec(
        "nDCG",
        "optional",
        "Normalised DCG at k: binary gain, discount 1/log2(rank+1), ideal ranking of "
        "min(k, |relevant|) relevant ids; without k, the whole ranking.",
        "ndcg_cut_k",
    ),
    MetricSpec(
        "AP",
        "optional",
        "Average precision: sum of the precision at each relevant retrieved id (within the "
        "top k if given) divided by the number of relevant ids. Its mean is MAP.",
        "map / map_cut_k",
        ("MAP",),
    ),
    MetricSpec(
        "RR",
        "optional",
        "Reciprocal rank of the first relevant id, 0 when none is retrieved (or none in the "
        "top k). Its mean is MRR.",
        "recip_rank",
        ("MRR",),
    ),
    MetricSpec(
        "Hit",
        "optional",
        "1 when any relevant id is in the top k (the whole ranking without k), else 0. Its "
        "mean is the hit rate.",
        "success_k",
        ("hit_rate", "success"),
    ),
    MetricSpec(
        "R-Prec",
        "none",
        "Precision at rank R = |relevant|: relevant ids in the top R divided by R.",
        "Rprec",
        ("Rprec", "R-Precision"),
    ),
)

#: Every metric family by canonical name, in display order.
METRICS: Mapping[str, MetricSpec] = MappingProxyType({spec.family: spec for spec in _SPECS})

_FAMILY_BY_SPELLING = {
    spelling.lower(): spec.family for spec in _SPECS for spelling in (spec.family, *spec.aliases)
}
_NAME_PATTERN = re.compile(r"^\s*(?P<family>[^@\s]+)\s*(?:@\s*(?P<k>\S*)\s*)?$")


def _known_families() -> str:
    """``P@k, R[@k], ...``: every family with its cut-off rule, for error messages."""
    forms = {"required": "{}@k", "optional": "{}[@k]", "none": "{}"}
    return ", ".join(forms[spec.cutoff].format(spec.family) for spec in _SPECS)


@dataclass(frozen=True)
class Metric:
    """One metric: a family from :data:`METRICS` and its cut-off.

    Parameters
    ----------
    family
        Canonical family name (``"P"``, ``"nDCG"``, ...).
    k
        Cut-off (a positive int), or None where the family allows it.

    Examples
    --------
    >>> Metric("nDCG", 10).name
    'nDCG@10'
    >>> Metric("AP").name
    'AP'
    """

    family: str
    k: int | None = None

    def __post_init__(self) -> None:
        spec = METRICS.get(self.family)
        if spec is None:
            raise MetricError(f"unknown metric family {self.family!r}; known: {', '.join(METRICS)}")
        if self.k is None:
            if spec.cutoff == "required":
                raise MetricError(f"{self.family} needs a cut-off, e.g. {self.family}@10")
            return
        if isinstance(self.k, bool) or not isinstance(self.k, numbers.Integral) or self.k < 1:
            raise MetricError(
                f"cut-off of {self.family} must be a positive integer, got {self.k!r}"
            )
        if spec.cutoff == "none":
            raise MetricError(f"{self.family} takes no cut-off (it is cut at |relevant|)")
        object.__setattr__(self, "k", int(self.k))

    @property
    def name(self) -> str:
        """Canonical name, e.g. ``"P@5"`` or ``"R-Prec"``."""
        return self.family if self.k is None else f"{self.family}@{self.k}"

    @property
    def spec(self) -> MetricSpec:
        """Definition of the metric's family."""
        return METRICS[self.family]

    def __str__(self) -> str:
        return self.name


def parse_metric(name: str | Metric) -> Metric:
    """Parse a metric name such as ``"nDCG@10"`` into a :class:`Metric`.

    Family names are matched case-insensitively and a few common aliases are accepted
    (``MAP`` → ``AP``, ``MRR`` → ``RR``, ``precision`` → ``P``, ``Rprec`` → ``R-Prec``, ...);
    the returned metric always carries the canonical spelling.

    Parameters
    ----------
    name
        ``"<family>"`` or ``"<family>@<k>"``; a :class:`Metric` is returned unchanged.

    Returns
    -------
    Metric

    Raises
    ------
    MetricError
        Unknown family, or a cut-off that is missing, not a positive integer or not allowed.

    Examples
    --------
    >>> parse_metric("ndcg@10")
    Metric(family='nDCG', k=10)
    >>> parse_metric("MRR@10").name
    'RR@10'
    """
    if isinstance(name, Metric):
        return name
    if not isinstance(name, str):
        raise MetricError(f"a metric name must be a string, got {type(name).__name__}")
    try:
        match = _NAME_PATTERN.match(name)
        family = _FAMILY_BY_SPELLING.get(match["family"].lower()) if match else None
        if match is None or family is None:
            raise MetricError("unknown metric")
        k_text = match["k"]
        if k_text is None:
            return Metric(family)
        if not k_text.isascii() or not k_text.isdigit() or int(k_text) < 1:
            raise MetricError(f"the cut-off must be a positive integer, got {k_text!r}")
        return Metric(family, int(k_text))
    except MetricError as exc:
        raise MetricError(f"{name!r}: {exc}; known metrics: {_known_families()}") from None


def non_computable_reason(relevant: Collection[Hashable] | None) -> str | None:
    """Why a ranking with this relevant set cannot be scored, or None when it can.

    Examples
    --------
    >>> non_computable_reason({"a.py"}) is None
    True
    >>> non_computable_reason([])
    'empty relevant set: there is nothing to retrieve'
    >>> non_computable_reason(None)
    'relevant set missing (None)'
    """
    if relevant is None:
        return REASON_MISSING
    if isinstance(relevant, (str, bytes, Mapping)):
        raise MetricError(
            f"the relevant set must be a collection of ids, got {type(relevant).__name__}"
        )
    return None if len(relevant) else REASON_EMPTY


@dataclass(frozen=True)
class MeanScore:
    """Mean of one metric over the computable rankings, with its n.

    Attributes
    ----------
    metric
        Canonical metric name.
    mean
        Mean over computable rankings (NaN when there are none).
    n
        Number of computable rankings averaged.
    n_non_computable
        Number of rankings left out because they could not be scored.
    """

    metric: str
    mean: float
    n: int
    n_non_computable: int


@dataclass(frozen=True, eq=False, repr=False)
class RankingScores(Mapping[str, np.ndarray]):
    """Per-ranking metric values, readable as ``{metric name: float64 array}``.

    Indexing accepts any spelling :func:`parse_metric` understands (``scores["ndcg@10"]``
    is ``scores["nDCG@10"]``). Arrays are read-only; row ``i`` belongs to ranking ``i``.

    Attributes
    ----------
    metrics
        The metrics computed, in request order (duplicates removed).
    scores
        Canonical metric name → one float64 value per ranking (NaN where not computable).
    computable
        True where the ranking could be scored (its relevant set is non-empty).
    reasons
        Why each ranking is not computable, None where it is.
    n_relevant
        Size of each ranking's relevant set.
    n_retrieved
        Number of distinct ids in each ranking.
    n_duplicates
        Number of repeated ids removed from each ranking.
    n_relevant_retrieved
        Number of relevant ids in each ranking (trec_eval's ``num_rel_ret``).
    """

    metrics: tuple[Metric, ...]
    scores: Mapping[str, np.ndarray]
    computable: np.ndarray
    reasons: tuple[str | None, ...]
    n_relevant: np.ndarray
    n_retrieved: np.ndarray
    n_duplicates: np.ndarray
    n_relevant_retrieved: np.ndarray

    def __getitem__(self, key: str | Metric) -> np.ndarray:
        try:
            name = parse_metric(key).name
        except MetricError:
            raise KeyError(key) from None
        return self.scores[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.scores)

    def __len__(self) -> int:
        return len(self.scores)

    # Mapping's __eq__ would compare arrays element-wise; identity is the useful notion.
    __eq__ = object.__eq__
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n_computable = int(self.computable.sum())
        return (
            f"RankingScores(metrics={list(self.scores)}, n_rankings={self.n_rankings}, "
            f"n_computable={n_computable})"
        )

    @property
    def n_rankings(self) -> int:
        """Number of rankings scored."""
        return int(self.computable.size)

    def mean(self, metric: str | Metric) -> MeanScore:
        """Mean of ``metric`` over the computable rankings, with n.

        Examples
        --------
        >>> scores = evaluate_rankings([["a"], ["b"], ["c"]], [{"a"}, {"a"}, []], ["RR"])
        >>> scores.mean("MRR")
        MeanScore(metric='RR', mean=0.5, n=2, n_non_computable=1)
        """
        name = parse_metric(metric).name
        values = self[name]
        n = int(self.computable.sum())
        mean = float(values[self.computable].mean()) if n else math.nan
        return MeanScore(name, mean, n, self.n_rankings - n)

    def to_frame(self) -> pd.DataFrame:
        """One row per ranking: the metric columns, then computability and counts.

        Examples
        --------
        >>> evaluate_rankings([["a", "b"]], [{"b"}], ["P@1", "RR"]).to_frame().columns.tolist()
        ['P@1', 'RR', 'computable', 'non_computable_reason', 'n_relevant', 'n_retrieved', 'n_duplicates']
        """
        import pandas as pd

        columns: dict[str, object] = dict(self.scores)
        columns["computable"] = self.computable
        columns["non_computable_reason"] = pd.array(self.reasons, dtype="string")
        columns["n_relevant"] = self.n_relevant
        columns["n_retrieved"] = self.n_retrieved
        columns["n_duplicates"] = self.n_duplicates
        return pd.DataFrame(columns)


#: The :class:`HitTable` method of each family taking a cut-off (R-Prec takes none).
_FORMULAS = {
    "P": HitTable.precision,
    "R": HitTable.recall,
    "F1": HitTable.f1,
    "nDCG": HitTable.ndcg,
    "AP": HitTable.average_precision,
    "RR": HitTable.reciprocal_rank,
    "Hit": HitTable.hit,
}


def _compute(table: HitTable, metric: Metric) -> np.ndarray:
    if metric.family == "R-Prec":
        return table.r_precision()
    return _FORMULAS[metric.family](table, metric.k)  # type: ignore[arg-type]  # P, F1: k given


def _requested_metrics(metrics: Sequence[str | Metric] | str | Metric) -> tuple[Metric, ...]:
    if isinstance(metrics, (str, Metric)):
        metrics = [metrics]
    try:
        parsed = [parse_metric(metric) for metric in metrics]
    except TypeError:
        raise MetricError(
            f"metrics must be a sequence of names or Metric objects, got {metrics!r}"
        ) from None
    if not parsed:
        raise MetricError(f"no metrics requested; known metrics: {_known_families()}")
    return tuple(dict.fromkeys(parsed))


_SHAPES = (
    "evaluate_rankings takes a list of rankings ([[id, ...], ...]) aligned with a list of "
    "relevant sets ([{id, ...}, ...]); evaluate_queries takes a run {qid: [id, ...]} or "
    "{qid: {id: score}} with qrels {qid: {id: grade}}"
)


def evaluate_rankings(
    rankings: Sequence[Sequence[Hashable]],
    relevant: Sequence[Collection[Hashable] | None],
    metrics: Sequence[str | Metric] | str | Metric,
    *,
    gains: Sequence[Mapping[Hashable, float]] | None = None,
) -> RankingScores:
    """Score many rankings with several metrics in one vectorised pass.

    Parameters
    ----------
    rankings
        One ordered sequence of ids per ranking, best first (lists, tuples, arrays). The
        order given is the ranking; repeated ids count once, at their first position.
    relevant
        One collection of relevant ids per ranking (set, list, ...), or None where the
        relevant set is unknown. Mappings are refused: pass the ids with a positive grade.
    metrics
        Metric names (``"nDCG@10"``, ``"AP"``, ...) or :class:`Metric` objects.
    gains
        Optional graded gains, one ``{id: gain}`` per ranking: nDCG then uses them as
        trec_eval's ``ndcg`` does (gain = grade, ideal = the positive grades sorted
        descending); every other metric stays binary on ``relevant``.

    Returns
    -------
    RankingScores
        ``{canonical name: float64 array}`` with one value per ranking, NaN where the
        relevant set is empty or missing, plus the ``computable`` mask and ``reasons``.

    Raises
    ------
    MetricError
        Unknown metric, different numbers of rankings and relevant sets, a string or
        unordered container given as a ranking, unhashable ids, or ``{qid: ...}``
        mappings (those go through :func:`evaluate_queries`).

    Examples
    --------
    >>> scores = evaluate_rankings(
    ...     [["a.py", "b.py", "c.py"], []], [["c.py", "z.py"], ["a.py"]], ["R@3", "RR", "nDCG@3"]
    ... )
    >>> scores["R@3"].tolist(), scores["RR"].tolist()
    ([0.5, 0.0], [0.3333333333333333, 0.0])
    >>> round(float(scores["nDCG@3"][0]), 4)  # (1/log2(4)) / (1 + 1/log2(3))
    0.3066
    """
    requested = _requested_metrics(metrics)
    if isinstance(rankings, Mapping) or isinstance(relevant, Mapping):
        raise MetricError(f"got a mapping: {_SHAPES}")
    return _scores_of(extract_hits(rankings, relevant, gains), requested)


def _scores_of(table: HitTable, requested: tuple[Metric, ...]) -> RankingScores:
    computable = table.computable
    not_computable = ~computable

    scores: dict[str, np.ndarray] = {}
    for metric in requested:
        values = _compute(table, metric)
        values[not_computable] = np.nan
        values.flags.writeable = False
        scores[metric.name] = values

    reasons: list[str | None] = [None] * table.n_rankings
    for row in np.flatnonzero(not_computable).tolist():
        reasons[row] = REASON_MISSING if table.relevant_missing[row] else REASON_EMPTY

    n_relevant_retrieved = table.counts_at(None).astype(np.int64)
    for array in (
        computable,
        table.n_relevant,
        table.n_retrieved,
        table.n_duplicates,
        n_relevant_retrieved,
    ):
        array.flags.writeable = False
    return RankingScores(
        metrics=requested,
        scores=MappingProxyType(scores),
        computable=computable,
        reasons=tuple(reasons),
        n_relevant=table.n_relevant,
        n_retrieved=table.n_retrieved,
        n_duplicates=table.n_duplicates,
        n_relevant_retrieved=n_relevant_retrieved,
    )


def _score_key(item: tuple[Hashable, float]) -> tuple[float, Hashable]:
    return item[1], item[0]


_FLOAT_ONLY = frozenset({float})


def _plain_float_scores(scores: Mapping[Hashable, float]) -> bool:
    """True when every score is a Python float and none is NaN (one C-level pass each)."""
    values = scores.values()
    if not set(map(type, values)) <= _FLOAT_ONLY:
        return False
    total = sum(values)
    return total == total  # NaN when a score is NaN (or inf - inf: the careful path decides)


def _rank_float_scores(scores: Mapping[Hashable, float]) -> list[Hashable] | None:
    """Fast path of :func:`rank_by_score` for ``{id: float}``; None when it does not apply.

    Validation is one C-level pass (the set of score types must be ``{float}``; their sum
    is NaN when any score is NaN). Without tied scores a sort of the ids by score is the
    ranking; with ties, a sort of ``(score, id)`` pairs breaks them by id descending.
    """
    if not _plain_float_scores(scores):
        return None  # the careful path validates and explains
    values = list(scores.values())
    if len(set(values)) == len(values):
        return sorted(scores, key=scores.__getitem__, reverse=True)
    try:
        return [item_id for _, item_id in sorted(zip(values, scores, strict=True), reverse=True)]
    except TypeError:
        return None  # ids that cannot be ordered: the careful path explains


def rank_by_score(
    items: Iterable[tuple[Hashable, float]] | Mapping[Hashable, float],
) -> list[Hashable]:
    """Order ``(id, score)`` pairs as trec_eval does: score descending, then id descending.

    Ids are compared with Python's ``<``; for string ids this is the byte order trec_eval's
    ``strcmp`` uses. An id listed twice appears twice (its higher-scored position first);
    :func:`evaluate_rankings` then keeps only that first occurrence.

    An ``{id: score}`` mapping (or its ``.items()``) whose scores are all Python floats
    takes a fast path: one type check over all scores and a plain sort.

    Parameters
    ----------
    items
        ``(id, score)`` pairs, or an ``{id: score}`` mapping (or its ``.items()``).

    Returns
    -------
    list
        The ids, best first.

    Raises
    ------
    MetricError
        A pair is malformed, a score is NaN or not a real number, or ids of different
        types cannot be ordered.

    Examples
    --------
    >>> rank_by_score([("a", 0.5), ("b", 0.9), ("c", 0.5)])
    ['b', 'c', 'a']
    >>> rank_by_score({"a": 0.5, "b": 0.9, "c": 0.5})
    ['b', 'c', 'a']
    """
    if type(items) is _DICT_ITEMS:
        items = items.mapping  # type: ignore[union-attr]
    if isinstance(items, Mapping):
        ranked = _rank_float_scores(items)
        if ranked is not None:
            return ranked
        items = items.items()
    pairs: list[tuple[Hashable, float]] = []
    for position, item in enumerate(items):
        try:
            if isinstance(item, (str, bytes)):
                raise TypeError("a string is not a pair")
            item_id, score = item
        except (TypeError, ValueError):
            raise MetricError(
                f"item {position}: expected an (id, score) pair, got {item!r}"
            ) from None
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            raise MetricError(f"item {position}: score of {item_id!r} is not a number: {score!r}")
        score = float(score)
        if math.isnan(score):
            raise MetricError(f"item {position}: score of {item_id!r} is NaN")
        pairs.append((item_id, score))
    try:
        pairs.sort(key=_score_key, reverse=True)
    except TypeError as exc:
        raise MetricError(f"ids cannot be ordered to break score ties ({exc})") from None
    return [item_id for item_id, _ in pairs]


_DICT_ITEMS: type = type({}.items())


@dataclass(frozen=True, eq=False, repr=False)
class QueryScores(Mapping[Hashable, dict[str, float]]):
    """Per-query values of a ``{qid: ...}`` run, readable as ``{qid: {metric: value}}``.

    The shape pytrec_eval's ``evaluate`` returns; NaN where a query cannot be scored.

    Attributes
    ----------
    qids
        The queries scored (in the run and in the qrels), in run order.
    rankings
        The same values as arrays aligned with ``qids`` (with ``computable``, ``reasons``
        and the counts).
    skipped_not_in_qrels
        Queries of the run without judgements (skipped, as trec_eval does).
    """

    qids: tuple[Hashable, ...]
    rankings: RankingScores
    skipped_not_in_qrels: tuple[Hashable, ...]

    def __getitem__(self, qid: Hashable) -> dict[str, float]:
        row = self._rows[qid]
        return {name: float(values[row]) for name, values in self.rankings.scores.items()}

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self.qids)

    def __len__(self) -> int:
        return len(self.qids)

    __eq__ = object.__eq__
    __hash__ = None  # type: ignore[assignment]

    @cached_property
    def _rows(self) -> dict[Hashable, int]:
        return {qid: row for row, qid in enumerate(self.qids)}

    def __repr__(self) -> str:
        return f"QueryScores(n_queries={len(self.qids)}, metrics={list(self.rankings.scores)})"

    def metric(self, name: str | Metric) -> dict[Hashable, float]:
        """``{qid: value}`` of one metric.

        Examples
        --------
        >>> evaluate_queries({"q1": ["a", "b"]}, {"q1": {"b": 1}}, ["RR"]).metric("MRR")
        {'q1': 0.5}
        """
        values = self.rankings[name]
        return dict(zip(self.qids, values.tolist(), strict=True))


def _ranking_of(qid: Hashable, entry: object) -> Sequence[Hashable]:
    if isinstance(entry, Mapping):
        return rank_by_score(entry)
    if isinstance(entry, (list, tuple)):
        return entry
    raise MetricError(
        f"run[{qid!r}] is a {type(entry).__name__}: each query of a run must be a list of "
        f"ids [id, ...] (best first) or a mapping {{id: score}}; {_SHAPES}"
    )


_BINARY_GRADES = frozenset({0, 1})
_INT_ONLY = frozenset({int})


def _judgements_of(qid: Hashable, entry: object) -> Mapping[Hashable, float]:
    if not isinstance(entry, Mapping):
        raise MetricError(
            f"qrels[{qid!r}] is a {type(entry).__name__}: each query of the qrels must be a "
            f"mapping {{id: grade}}; {_SHAPES}"
        )
    if set(map(type, entry.values())) <= _INT_ONLY:
        return entry
    for doc, grade in entry.items():
        if isinstance(grade, bool) or not isinstance(grade, numbers.Real) or grade != grade:
            raise MetricError(f"qrels[{qid!r}][{doc!r}]: the grade must be a number, got {grade!r}")
    return entry


def evaluate_queries(
    run: Mapping[Any, Sequence[Any] | Mapping[Any, float]],
    qrels: Mapping[Any, Mapping[Any, float]],
    metrics: Sequence[str | Metric] | str | Metric,
    *,
    relevance_level: float = 1,
) -> QueryScores:
    """Score a run in the ranx / pytrec_eval calling convention, per query.

    Parameters
    ----------
    run
        ``{qid: [id, ...]}`` (best first) or ``{qid: {id: score}}`` (ordered by
        :func:`rank_by_score`: score descending, ties by id descending, as trec_eval).
    qrels
        ``{qid: {id: grade}}``. An id is relevant when its grade is at least
        ``relevance_level`` (binary metrics); nDCG uses the grades as gains, as trec_eval.
    metrics
        Metric names (``"nDCG@10"``, ``"AP"``, ...) or :class:`Metric` objects.
    relevance_level
        Smallest grade that counts as relevant (trec_eval's ``-l``, default 1).

    Returns
    -------
    QueryScores
        ``{qid: {metric: value}}`` for the queries in both the run and the qrels (queries
        only in the run are skipped and listed in ``skipped_not_in_qrels``; queries only in
        the qrels are not scored, as trec_eval without ``-c``). A query without any
        relevant id is NaN with a reason (trec_eval would score it 0).

    Raises
    ------
    MetricError
        A run or qrels of another shape (the message names the expected shapes), a
        non-numeric score or grade, or an unknown metric.

    Examples
    --------
    >>> scores = evaluate_queries(
    ...     {"q1": {"a": 0.2, "b": 0.9}, "q2": ["x", "y"]},
    ...     {"q1": {"a": 2, "b": 0}, "q2": {"y": 1}},
    ...     ["RR", "P@1"],
    ... )
    >>> scores["q1"], scores["q2"]
    ({'RR': 0.5, 'P@1': 0.0}, {'RR': 0.5, 'P@1': 0.0})
    """
    requested = _requested_metrics(metrics)
    for name, value in (("run", run), ("qrels", qrels)):
        if not isinstance(value, Mapping):
            raise MetricError(f"{name} must be a mapping keyed by query id; {_SHAPES}")
    qids: list[Hashable] = []
    skipped: list[Hashable] = []
    rankings: list[Sequence[Hashable] | dict[Hashable, float]] = []
    relevant: list[list[Hashable]] = []
    gains: list[Mapping[Hashable, float]] = []
    graded = relevance_level != 1
    for qid, entry in run.items():
        judged = qrels.get(qid)
        if judged is None:
            skipped.append(qid)
            continue
        judged = _judgements_of(qid, judged)
        qids.append(qid)
        if type(entry) is dict and _plain_float_scores(entry):
            rankings.append(entry)  # ranked by the kernel without sorting every id
        else:
            rankings.append(_ranking_of(qid, entry))
        relevant.append([doc for doc, grade in judged.items() if grade >= relevance_level])
        gains.append(judged)
        if not graded and not set(judged.values()) <= _BINARY_GRADES:
            graded = True
    table = extract_hits(
        rankings,  # type: ignore[arg-type]  # float-score dicts: ranked by the kernel
        relevant,
        gains if graded else None,
        scored=True,
    )
    scores = _scores_of(table, requested)
    return QueryScores(qids=tuple(qids), rankings=scores, skipped_not_in_qrels=tuple(skipped))

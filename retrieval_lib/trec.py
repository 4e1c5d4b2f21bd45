"""TREC run and qrels files, scored with trec_eval's conventions by the metric kernel.

Format and conventions: ``docs/contracts.md`` §7. qrels lines are ``qid iter docno rel``
(integer grades), run lines ``qid Q0 docno rank score tag``; the rank column is ignored:
documents are ordered as trec_eval orders them, by score descending, ties by docno
descending (``strcmp``). Measures carry trec_eval's names (:data:`MEASURES`, cut-offs as
``P.5,10`` or ``P_5``), and every value comes from
:func:`retrieval_lib.metrics.ranking.evaluate_queries` (one code path for metrics). One
difference from trec_eval, as missing is not zero: a judged query without any relevant
document has no value for the ranking measures (trec_eval gives 0), is left out of their
``all`` mean and is named in :attr:`TrecEvaluation.not_computable`.

Examples
--------
>>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}}
>>> run = TrecRun({"q1": {"d1": 0.5, "d2": 0.9, "d3": 0.1}}, "demo")
>>> frame = evaluate(qrels, run, ["P.2", "recip_rank"]).frame
>>> frame.to_dict("records")[:2]
[{'measure': 'recip_rank', 'qid': 'q1', 'value': 0.5}, {'measure': 'P_2', 'qid': 'q1', 'value': 0.5}]
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from retrieval_lib.errors import InputError, MetricError, UsageError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from retrieval_lib.metrics.ranking import Metric

__all__ = [
    "COUNT_MEASURES",
    "DEFAULT_CUTOFFS",
    "MEASURES",
    "Qrels",
    "TrecEvaluation",
    "TrecRun",
    "evaluate",
    "format_trec_eval",
    "parse_measures",
    "read_qrels",
    "read_run",
]

Qrels = dict[str, dict[str, int]]
V = TypeVar("V")

_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)

#: trec_eval's default cut-offs of each parameterised measure (its ``-m P`` etc.).
DEFAULT_CUTOFFS: Mapping[str, tuple[int, ...]] = {
    "P": _CUTS,
    "recall": _CUTS,
    "ndcg_cut": _CUTS,
    "map_cut": _CUTS,
    "success": (1, 5, 10),
}

#: Counts, summed (not averaged) in the ``all`` row and printed as integers.
COUNT_MEASURES = ("num_ret", "num_rel", "num_rel_ret")

#: Supported trec_eval measures, in trec_eval's output order → the project metric family
#: (None for the counts). Parameterised ones take cut-offs.
MEASURES: Mapping[str, str | None] = {
    "num_ret": None,
    "num_rel": None,
    "num_rel_ret": None,
    "map": "AP",
    "Rprec": "R-Prec",
    "recip_rank": "RR",
    "P": "P",
    "recall": "R",
    "ndcg": "nDCG",
    "ndcg_cut": "nDCG",
    "map_cut": "AP",
    "success": "Hit",
}

_DEFAULT_MEASURES = ("num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "recip_rank", "P")
_NAME = re.compile(r"^(?P<name>[A-Za-z_]+?)(?:[._](?P<params>[0-9][0-9,]*))?$")


@dataclass(frozen=True)
class TrecRun:
    """A TREC run: ``{qid: {docno: score}}`` and its run tag (of the first line)."""

    scores: dict[str, dict[str, float]]
    run_id: str = ""


def _lines(path: str | Path) -> Iterable[tuple[int, list[str]]]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, expected a file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if fields:
            yield number, fields


def _read_pairs(
    path: str | Path, kind: str, layout: str, verb: str, parse: Callable[[str, list[str]], V]
) -> tuple[dict[str, dict[str, V]], list[str] | None]:
    """``{qid: {docno: parse(where, fields)}}`` of a TREC file of ``layout`` lines, and the
    fields of its first line; a wrong field count or a docno ``verb`` twice for a query
    is an :class:`InputError` at ``file:line``."""
    table: dict[str, dict[str, V]] = {}
    line_of: dict[tuple[str, str], int] = {}
    first: list[str] | None = None
    n_fields = len(layout.split())
    for number, fields in _lines(path):
        where = f"{path}:{number}"
        if len(fields) != n_fields:
            raise InputError(
                f"{where}: a {kind} line has {n_fields} fields '{layout}', got {len(fields)}"
            )
        qid, docno = fields[0], fields[2]
        value = parse(where, fields)
        entries = table.setdefault(qid, {})
        if docno in entries:
            raise InputError(
                f"{where}: {docno!r} is {verb} twice for query {qid!r} "
                f"(first on line {line_of[qid, docno]})"
            )
        entries[docno] = value
        line_of[qid, docno] = number
        first = first or fields
    return table, first


def _relevance(where: str, fields: list[str]) -> int:
    try:
        return int(fields[3])
    except ValueError:
        raise InputError(f"{where}: relevance must be an integer, got {fields[3]!r}") from None


def _score(where: str, fields: list[str]) -> float:
    try:
        score = float(fields[4])
    except ValueError:
        raise InputError(f"{where}: score must be a number, got {fields[4]!r}") from None
    if math.isnan(score):
        raise InputError(f"{where}: score is NaN")
    return score


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file ``qid iter docno rel`` into ``{qid: {docno: rel}}``.

    Raises
    ------
    InputError
        A line without 4 fields, a relevance that is not an integer, or a document judged
        twice for a query, named by ``file:line``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "qrels"
    >>> _ = path.write_text("q1 0 d1 2\\nq1 0 d2 0\\n")
    >>> read_qrels(path)
    {'q1': {'d1': 2, 'd2': 0}}
    """
    return _read_pairs(path, "qrels", "qid iter docno rel", "judged", _relevance)[0]


def read_run(path: str | Path) -> TrecRun:
    """Read a TREC run file ``qid Q0 docno rank score tag``.

    The rank column is ignored (trec_eval orders by score); the run id is the tag of the
    first line.

    Raises
    ------
    InputError
        A line without 6 fields, a score that is not a finite-or-infinite number (NaN),
        or a document retrieved twice for a query, named by ``file:line``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "run"
    >>> _ = path.write_text("q1 Q0 d1 1 0.9 bm25\\nq1 Q0 d2 2 0.4 bm25\\n")
    >>> read_run(path)
    TrecRun(scores={'q1': {'d1': 0.9, 'd2': 0.4}}, run_id='bm25')
    """
    scores, first = _read_pairs(path, "run", "qid Q0 docno rank score tag", "retrieved", _score)
    return TrecRun(scores, first[5] if first else "")


@dataclass(frozen=True)
class Measure:
    """One trec_eval measure with its cut-offs (empty for unparameterised ones)."""

    name: str
    cutoffs: tuple[int, ...] = ()

    def labels(self) -> list[tuple[str, Metric | None]]:
        """Output names (``P_5``) with the project metric computing each."""
        from retrieval_lib.metrics.ranking import Metric

        family = MEASURES[self.name]
        if not self.cutoffs:
            return [(self.name, None if family is None else Metric(family))]
        assert family is not None
        return [(f"{self.name}_{k}", Metric(family, k)) for k in self.cutoffs]


def supported_measures() -> str:
    """Every supported measure, for help and error messages."""
    return ", ".join(f"{name}[.k,...]" if name in DEFAULT_CUTOFFS else name for name in MEASURES)


def parse_measures(names: Sequence[str] | None) -> list[Measure]:
    """Parse trec_eval ``-m`` values (``map``, ``P.5,10``, ``P_5``, ``ndcg_cut``).

    Without names: trec_eval's default set restricted to the supported measures
    (num_ret, num_rel, num_rel_ret, map, Rprec, recip_rank, P). Measures come out in
    trec_eval's output order, a measure named twice once with the union of its cut-offs.

    Raises
    ------
    UsageError
        An unsupported measure (the message lists the supported ones) or a bad cut-off.

    Examples
    --------
    >>> [(m.name, m.cutoffs) for m in parse_measures(["P.5,10", "map", "P_20"])]
    [('map', ()), ('P', (5, 10, 20))]
    """
    cutoffs: dict[str, set[int]] = {}
    for text in names or _DEFAULT_MEASURES:
        match = _NAME.match(text.strip())
        name: str = match["name"] if match else ""
        if match is None or name not in MEASURES:
            raise UsageError(f"unsupported measure {text!r}; supported: {supported_measures()}")
        params = match["params"]
        if params is None:
            ks = DEFAULT_CUTOFFS.get(name, ())
        elif name not in DEFAULT_CUTOFFS:
            raise UsageError(f"measure {name!r} takes no parameters, got {text!r}")
        else:
            parts = params.split(",")
            if not all(p.isdigit() and int(p) > 0 for p in parts):
                raise UsageError(f"{text!r}: cut-offs must be positive integers, e.g. P.5,10")
            ks = tuple(int(p) for p in parts)
        cutoffs.setdefault(name, set()).update(ks)
    return [Measure(name, tuple(sorted(cutoffs[name]))) for name in MEASURES if name in cutoffs]


@dataclass(frozen=True)
class TrecEvaluation:
    """Per-query and ``all`` values of trec_eval measures.

    Attributes
    ----------
    frame
        Tidy rows ``measure, qid, value``: per query (queries in trec_eval's order, each
        query's measures in trec_eval's order), then the ``all`` rows. NaN where a query
        cannot be scored.
    run_id
        The run's tag.
    n_queries
        Number of queries scored (trec_eval's ``num_q``).
    not_computable
        Scored queries without any relevant document (their ranking measures are NaN).
    skipped
        Queries of the run without judgements (skipped, as trec_eval does).
    """

    frame: pd.DataFrame
    run_id: str
    n_queries: int
    not_computable: tuple[str, ...] = field(default=())
    skipped: tuple[str, ...] = field(default=())


def evaluate(
    qrels: Qrels,
    run: TrecRun | Mapping[str, Mapping[str, float]],
    measures: Sequence[str] | None = None,
    *,
    relevance_level: int = 1,
) -> TrecEvaluation:
    """Score a TREC run against qrels with trec_eval's measure names and conventions.

    Parameters
    ----------
    qrels
        ``{qid: {docno: rel}}`` (see :func:`read_qrels`).
    run
        A :class:`TrecRun` or ``{qid: {docno: score}}``.
    measures
        trec_eval measure names with optional cut-offs (``"P.5,10"``); None for trec_eval's
        default set (the supported part of it).
    relevance_level
        Smallest grade counted relevant by the binary measures (trec_eval's ``-l``).

    Returns
    -------
    TrecEvaluation
        Its ``frame`` has the columns ``measure, qid, value``.

    Raises
    ------
    UsageError
        An unsupported measure.
    """
    import numpy as np
    import pandas as pd

    from retrieval_lib.metrics.ranking import evaluate_queries

    parsed = parse_measures(measures)
    if not isinstance(run, TrecRun):
        run = TrecRun({qid: dict(docs) for qid, docs in run.items()})
    labels = [label for measure in parsed for label in measure.labels()]
    metrics = list(dict.fromkeys(metric for _, metric in labels if metric is not None))
    # trec_eval's query order: qid ascending (strcmp).
    ordered = {qid: run.scores[qid] for qid in sorted(run.scores)}
    try:
        scores = evaluate_queries(
            ordered, qrels, metrics or ["RR"], relevance_level=relevance_level
        )
    except MetricError as exc:
        raise InputError(str(exc)) from None
    table = scores.rankings
    qids = list(scores.qids)
    counts = {
        "num_ret": table.n_retrieved,
        "num_rel": table.n_relevant,
        "num_rel_ret": table.n_relevant_retrieved,
    }
    measure_names = [label for label, _ in labels]
    columns: list[np.ndarray] = []
    alls: list[float] = []
    for label, metric in labels:
        if metric is None:
            values = counts[label].astype(np.float64)
            alls.append(float(values.sum()))
        else:
            values = np.asarray(table[metric.name], dtype=np.float64)
            computable = values[table.computable]
            alls.append(float(computable.mean()) if computable.size else math.nan)
        columns.append(values)
    n_queries, names = len(qids), np.array(measure_names, dtype=object)
    per_query = np.column_stack(columns).ravel() if n_queries else np.zeros(0)
    frame = pd.DataFrame(
        {
            "measure": np.concatenate([np.tile(names, n_queries), names]),
            "qid": [*np.repeat(np.array(qids, dtype=object), len(names)), *["all"] * len(names)],
            "value": np.concatenate([per_query, alls]),
        }
    ).astype({"measure": object, "qid": object})
    not_computable = tuple(
        str(qid) for qid, ok in zip(qids, table.computable.tolist(), strict=True) if not ok
    )
    return TrecEvaluation(
        frame=frame,
        run_id=run.run_id,
        n_queries=n_queries,
        not_computable=not_computable,
        skipped=tuple(str(q) for q in scores.skipped_not_in_qrels),
    )


def _value_text(measure: str, value: float) -> str:
    if measure in COUNT_MEASURES:
        return str(int(value))
    return "nan" if math.isnan(value) else f"{value:.4f}"


def format_trec_eval(evaluation: TrecEvaluation, *, per_query: bool = False) -> str:
    r"""trec_eval's three-column output: ``measure<TAB>qid<TAB>value``.

    The measure is left-aligned in 22 characters, values have 4 decimals (counts are
    integers), the ``all`` rows start with ``runid`` and ``num_q``; per-query rows only
    with ``per_query`` (trec_eval's ``-q``).

    Examples
    --------
    >>> run = TrecRun({"q1": {"d1": 0.5}}, "demo")
    >>> text = format_trec_eval(evaluate({"q1": {"d1": 1}}, run, ["map"]))
    >>> [line.split("\t") for line in text.splitlines()]  # doctest: +NORMALIZE_WHITESPACE
    [['runid                 ', 'all', 'demo'], ['num_q                 ', 'all', '1'],
     ['map                   ', 'all', '1.0000']]
    """
    lines: list[str] = []
    frame = evaluation.frame
    rows = zip(
        frame["measure"].tolist(), frame["qid"].tolist(), frame["value"].tolist(), strict=True
    )
    all_lines = [
        f"{'runid':<22}\tall\t{evaluation.run_id}",
        f"{'num_q':<22}\tall\t{evaluation.n_queries}",
    ]
    n_per_query = len(frame) - len(frame) // (evaluation.n_queries + 1)
    for row, (measure, qid, value) in enumerate(rows):
        line = f"{measure:<22}\t{qid}\t{_value_text(measure, value)}"
        if row >= n_per_query:
            all_lines.append(line)
        elif per_query:
            lines.append(line)
    return "\n".join([*lines, *all_lines]) + "\n"

"""Typed records of a knowledge-base evaluation run (what one results line holds).

A results line (see :mod:`retrieval_lib.kb.ingest`) becomes a :class:`QueryResult`;
a chunk-inventory line a :class:`ChunkRecord`. Spans are ``(start, end)`` half-open
character offsets into the source document.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = [
    "Span",
    "Hit",
    "Citation",
    "Answer",
    "QueryResult",
    "ChunkRecord",
    "RunRecord",
    "paused_gc",
]

Span = tuple[int, int]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while building many small objects.

    Loading a run creates millions of tuples that never form cycles; each collection pass
    would rescan all of them, which made loading 100,000 queries 4x slower.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Hit(NamedTuple):
    """One retrieved chunk, ``rank`` 1-based (a named tuple: cheap to build in bulk)."""

    chunk_id: str
    doc_id: str
    rank: int
    score: float | None
    source_spans: tuple[Span, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "source_spans": [list(s) for s in self.source_spans]}


class Citation(NamedTuple):
    """A citation marker of an answer (``"[#1]"``) and the chunk it claims to cite."""

    citation: str
    chunk_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"citation": self.citation, "chunk_id": self.chunk_id}


@dataclass(frozen=True, slots=True)
class Answer:
    """A generated answer; ``grounded`` False means the system refused."""

    text: str
    grounded: bool
    citations: tuple[Citation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "grounded": self.grounded,
            "citations": [c.to_dict() for c in self.citations],
        }


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What the system returned for one golden query.

    ``hits`` are sorted by rank (ranks are exactly 1..n). ``answer`` is None for a
    retrieval-only run; ``error`` is the failure message of a failed query.
    ``extra`` keeps any additional fields of the results line.
    """

    query_id: str
    hits: tuple[Hit, ...]
    answer: Answer | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True when the line carries an error."""
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.extra)
        out.update(
            {
                "query_id": self.query_id,
                "hits": [h.to_dict() for h in self.hits],
                "answer": self.answer.to_dict() if self.answer is not None else None,
                "error": self.error,
            }
        )
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QueryResult:
        """Rebuild from :meth:`to_dict` output (trusted: validated at ingest)."""
        answer = data.get("answer")
        known = {"query_id", "hits", "answer", "error"}
        return cls(
            query_id=data["query_id"],
            hits=tuple(
                [
                    Hit(
                        h["chunk_id"],
                        h["doc_id"],
                        h["rank"],
                        h.get("score"),
                        tuple(map(tuple, h.get("source_spans") or ())),
                    )
                    for h in data["hits"]
                ]
            ),
            answer=None
            if answer is None
            else Answer(
                answer["text"],
                answer["grounded"],
                tuple(Citation(c["citation"], c.get("chunk_id")) for c in answer["citations"]),
            ),
            error=data.get("error"),
            extra={k: v for k, v in data.items() if k not in known},
        )


class ChunkRecord(NamedTuple):
    """One chunk of the run's inventory."""

    chunk_id: str
    doc_id: str
    source_spans: tuple[Span, ...]


@dataclass(frozen=True)
class RunRecord:
    """One stored run (the ``eval_runs`` row, JSON columns decoded)."""

    run_id: str
    suite: str | None
    created_at: str
    chunker_version: str | None
    config: Mapping[str, Any] | None
    golden_snapshot: Mapping[str, Any]
    aggregate: Mapping[str, Any] | None
    ingest: Mapping[str, Any] | None = None

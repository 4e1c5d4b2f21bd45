"""Golden queries of a RAG knowledge base: parse, validate and snapshot the YAML file.

The file is a YAML list of entries::

    - id: q-001
      query: "When is recycling collected?"
      expected_doc_ids: [waste-collection]
      expected_chunk_ids: ["waste-collection:w01"]
      must_contain: ["Thursday"]
      forbidden: ["Monday"]
      lang: en
      difficulty: easy

``id``, ``query`` and ``expected_doc_ids`` are required; the other keys default to an
empty list (``expected_chunk_ids``, ``must_contain``, ``forbidden``) or null (``lang``,
``difficulty``). ``expected_doc_ids: []`` means the system **should refuse** to answer:
such an entry may not list expected chunks. Unknown keys are errors (a typo such as
``expected_doc_id`` would otherwise silently turn a query into a should-refuse query).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from retrieval_lib.kb.exceptions import GoldenSetError

__all__ = ["GoldenQuery", "GoldenSet", "load_golden", "parse_golden"]

_REQUIRED = ("id", "query", "expected_doc_ids")
_LIST_FIELDS = ("expected_doc_ids", "expected_chunk_ids", "must_contain", "forbidden")
_OPTIONAL_TEXT = ("lang", "difficulty")
_KNOWN = frozenset(("id", "query", *_LIST_FIELDS, *_OPTIONAL_TEXT))
_NOT_JSON = object()


@dataclass(frozen=True, slots=True)
class GoldenQuery:
    """One golden query.

    Attributes
    ----------
    id, query
        Query id (unique in the set) and text.
    expected_doc_ids, expected_chunk_ids
        Relevant documents and chunks; an empty ``expected_doc_ids`` means "should refuse".
    must_contain, forbidden
        Strings an answer must contain / must not contain (case-sensitive substrings).
    lang, difficulty
        Free-form labels, or None.
    """

    id: str
    query: str
    expected_doc_ids: tuple[str, ...]
    expected_chunk_ids: tuple[str, ...] = ()
    must_contain: tuple[str, ...] = ()
    forbidden: tuple[str, ...] = ()
    lang: str | None = None
    difficulty: str | None = None

    @property
    def should_refuse(self) -> bool:
        """True when the golden set expects a refusal (``expected_doc_ids: []``)."""
        return not self.expected_doc_ids

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form, the same keys as the YAML entry."""
        return {
            "id": self.id,
            "query": self.query,
            "expected_doc_ids": list(self.expected_doc_ids),
            "expected_chunk_ids": list(self.expected_chunk_ids),
            "must_contain": list(self.must_contain),
            "forbidden": list(self.forbidden),
            "lang": self.lang,
            "difficulty": self.difficulty,
        }


@dataclass(frozen=True)
class GoldenSet:
    """An ordered, validated set of golden queries (ids unique).

    ``expected_chunk_spans`` maps an expected chunk id to ``{"doc_id", "source_spans"}``
    as resolved from the chunk inventory of the run the set was snapshotted with; the
    chunker-version fallback of :func:`retrieval_lib.kb.compare.compare_runs` uses it.
    """

    queries: tuple[GoldenQuery, ...]
    sha256: str | None = None
    source: str | None = None
    expected_chunk_spans: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    _by_id: dict[str, GoldenQuery] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {q.id: q for q in self.queries})

    def __len__(self) -> int:
        return len(self.queries)

    def __iter__(self) -> Iterator[GoldenQuery]:
        return iter(self.queries)

    def __contains__(self, query_id: object) -> bool:
        return query_id in self._by_id

    def get(self, query_id: str) -> GoldenQuery | None:
        """The query with ``query_id``, or None."""
        return self._by_id.get(query_id)

    @property
    def ids(self) -> list[str]:
        """Query ids in file order."""
        return [q.id for q in self.queries]

    def to_snapshot(self) -> dict[str, Any]:
        """The JSON snapshot stored with a run (queries, file hash, resolved chunk spans)."""
        return {
            "format": "kb-golden-snapshot/1",
            "source": self.source,
            "sha256": self.sha256,
            "queries": [q.to_dict() for q in self.queries],
            "expected_chunk_spans": {
                k: dict(v) for k, v in sorted(self.expected_chunk_spans.items())
            },
        }

    @classmethod
    def from_snapshot(cls, snapshot: Mapping[str, Any]) -> GoldenSet:
        """Rebuild a set from :meth:`to_snapshot` output (validated when it was taken)."""
        return cls._from_entries(snapshot, list(snapshot.get("queries", [])))

    @classmethod
    def from_snapshot_json(cls, text: str | bytes) -> GoldenSet:
        """:meth:`from_snapshot` of the JSON text of a snapshot, with less peak memory.

        Each decoded query entry (~1 kB of dicts and lists) is released as soon as its
        :class:`GoldenQuery` is built, instead of all entries living until the end.

        Examples
        --------
        >>> g = parse_golden([{"id": "q", "query": "x", "expected_doc_ids": ["d"]}])
        >>> import orjson
        >>> GoldenSet.from_snapshot_json(orjson.dumps(g.to_snapshot())).queries == g.queries
        True
        """
        snapshot = orjson.loads(text)
        return cls._from_entries(snapshot, snapshot.get("queries", []))

    @classmethod
    def _from_entries(cls, snapshot: Mapping[str, Any], entries: list[Any]) -> GoldenSet:
        """The set of ``snapshot`` whose query entries are ``entries``, each released
        (set to None) as soon as its query is built."""
        queries = []
        for i, q in enumerate(entries):
            queries.append(
                GoldenQuery(
                    q["id"],
                    q["query"],
                    tuple(q["expected_doc_ids"]),
                    tuple(q["expected_chunk_ids"]),
                    tuple(q["must_contain"]),
                    tuple(q["forbidden"]),
                    q.get("lang"),
                    q.get("difficulty"),
                )
            )
            entries[i] = None
        return cls(
            queries=tuple(queries),
            sha256=snapshot.get("sha256"),
            source=snapshot.get("source"),
            expected_chunk_spans=dict(snapshot.get("expected_chunk_spans") or {}),
        )


def _describe(index: int, entry: Any) -> str:
    if isinstance(entry, Mapping) and isinstance(entry.get("id"), str):
        return f"entry {index + 1} (id {entry['id']!r})"
    return f"entry {index + 1}"


def _string_list(value: Any, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise GoldenSetError(f"{where}: {key!r} must be a list of strings, got {value!r}")
    items = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise GoldenSetError(
                f"{where}: {key!r} must hold non-empty strings, got {item!r}"
                + (" (quote ids that look like numbers)" if isinstance(item, (int, float)) else "")
            )
        items.append(item)
    if len(set(items)) != len(items):
        raise GoldenSetError(f"{where}: {key!r} lists a value twice: {items!r}")
    return tuple(items)


def _parse_entry(index: int, entry: Any, source: str) -> GoldenQuery:
    where = f"{source}: {_describe(index, entry)}"
    if not isinstance(entry, Mapping):
        raise GoldenSetError(f"{where}: expected a mapping, got {type(entry).__name__}")
    unknown = sorted(str(k) for k in entry if k not in _KNOWN)
    if unknown:
        raise GoldenSetError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(_KNOWN)}")
    missing = [k for k in _REQUIRED if k not in entry]
    if missing:
        raise GoldenSetError(f"{where}: missing required key(s) {missing}")
    query_id = entry["id"]
    if not isinstance(query_id, str) or not query_id.strip():
        hint = " (quote ids that look like numbers)" if isinstance(query_id, (int, float)) else ""
        raise GoldenSetError(f"{where}: 'id' must be a non-empty string, got {query_id!r}{hint}")
    text = entry["query"]
    if not isinstance(text, str) or not text.strip():
        raise GoldenSetError(f"{where}: 'query' must be a non-empty string")
    if entry["expected_doc_ids"] is None:
        raise GoldenSetError(
            f"{where}: 'expected_doc_ids' is null; write [] for a should-refuse query"
        )
    lists = {key: _string_list(entry.get(key), key, where) for key in _LIST_FIELDS}
    labels: dict[str, str | None] = {}
    for key in _OPTIONAL_TEXT:
        value = entry.get(key)
        if value is not None and not isinstance(value, str):
            raise GoldenSetError(f"{where}: {key!r} must be a string or null, got {value!r}")
        labels[key] = value
    if not lists["expected_doc_ids"] and lists["expected_chunk_ids"]:
        raise GoldenSetError(
            f"{where}: expected_doc_ids is [] (should refuse) but expected_chunk_ids is not empty"
        )
    return GoldenQuery(
        id=query_id,
        query=text,
        expected_doc_ids=lists["expected_doc_ids"],
        expected_chunk_ids=lists["expected_chunk_ids"],
        must_contain=lists["must_contain"],
        forbidden=lists["forbidden"],
        lang=labels["lang"],
        difficulty=labels["difficulty"],
    )


def parse_golden(data: Any, *, source: str = "golden set") -> GoldenSet:
    """Validate parsed YAML data (a list of entries) into a :class:`GoldenSet`.

    Raises
    ------
    GoldenSetError
        On a non-list document, a malformed entry or a duplicate id; the message names
        the entry (position and id).

    Examples
    --------
    >>> s = parse_golden([{"id": "q1", "query": "hours?", "expected_doc_ids": ["d1"]},
    ...                   {"id": "q2", "query": "weather?", "expected_doc_ids": []}])
    >>> [q.should_refuse for q in s]
    [False, True]
    """
    if not isinstance(data, list):
        raise GoldenSetError(
            f"{source}: expected a YAML list of golden queries, got {type(data).__name__}"
        )
    if not data:
        raise GoldenSetError(f"{source}: the golden set is empty")
    queries: list[GoldenQuery] = []
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(data):
        query = _parse_entry(index, entry, source)
        if query.id in first_seen:
            raise GoldenSetError(
                f"{source}: duplicate id {query.id!r} in entry {index + 1} "
                f"(first used by entry {first_seen[query.id] + 1})"
            )
        first_seen[query.id] = index
        queries.append(query)
    return GoldenSet(queries=tuple(queries), source=source)


def load_golden(path: str | Path) -> GoldenSet:
    """Read and validate a golden-query YAML file.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "golden.yaml"
    >>> _ = p.write_text("- {id: q1, query: hours?, expected_doc_ids: [d1]}\\n")
    >>> load_golden(p).ids
    ['q1']
    """
    import yaml

    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise GoldenSetError(f"cannot read golden file {file}: {exc.strerror or exc}") from exc
    try:
        # A golden set written in JSON syntax (which YAML accepts) is read ~50x faster by
        # a JSON parser; that matters for generated sets of 100,000 queries.
        data = orjson.loads(raw) if raw.lstrip()[:1] == b"[" else _NOT_JSON
    except orjson.JSONDecodeError:
        data = _NOT_JSON
    if data is _NOT_JSON:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            data = yaml.load(raw, Loader=loader)  # noqa: S506 - a safe loader
        except yaml.YAMLError as exc:
            raise GoldenSetError(f"{file}: not valid YAML: {exc}") from exc
    parsed = parse_golden(data, source=str(file))
    return GoldenSet(
        queries=parsed.queries, sha256=hashlib.sha256(raw).hexdigest(), source=str(file)
    )

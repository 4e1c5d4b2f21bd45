"""The retrieval-event document: schema, validation, atomic writing and loading.

A document describes one trial (task x config) as seed 001 specifies, in
``schema_version`` "1.2" (1.0 plus optional fields; see ``docs/contracts.md``).
Loading accepts any ``1.x`` document and rejects other major versions with
:class:`~retrieval_lib.errors.UnsupportedSchemaVersion`.

Examples
--------
>>> from retrieval_lib.events.document import minimal_document, validate_document
>>> doc = minimal_document(run_id="r", task_name="t", config_name="baseline")
>>> validate_document(doc)  # no exception: valid
>>> doc["schema_version"]
'1.2'
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from retrieval_lib import EVENTS_SCHEMA_VERSION, __version__
from retrieval_lib.errors import InputError, SchemaError, UnsupportedSchemaVersion
from retrieval_lib.io import (
    atomic_write_bytes,
    load_package_json,
    os_reason,
    read_regular_bytes,
    safe_join,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DOCUMENT_SUFFIX",
    "EVENTS_DIRNAME",
    "LEFT_OUT_FILENAME",
    "METRICS_SUFFIX",
    "SUPPORTED_MAJOR",
    "document_filename",
    "document_path",
    "dumps_document",
    "encode_document",
    "events_frame",
    "find_documents",
    "iter_documents",
    "load_document",
    "load_documents",
    "load_schema",
    "minimal_document",
    "validate_document",
    "write_document",
]

#: The output folder of a run: documents, metrics, summary and impact files live in it.
EVENTS_DIRNAME = "retrieval_events"
DOCUMENT_SUFFIX = ".retrieval_events.json"
#: Suffix of the metrics file :mod:`retrieval_lib.metrics` writes beside a document (same
#: stem); named here so normalisation can remove a stale document together with it.
METRICS_SUFFIX = ".retrieval_metrics.json"
SUPPORTED_MAJOR = 1

#: Columns of the tidy events frame, in order.
EVENT_COLUMNS = (
    "run_id",
    "config_name",
    "task_name",
    "trial_name",
    "step_index",
    "tool_name",
    "tool_category",
    "is_mcp",
    "is_subagent",
    "n_target_files",
    "target_files",
    "hits_ground_truth",
    "matched_ground_truth_files",
    "elapsed_seconds",
    "cumulative_tokens",
)


def load_schema() -> dict[str, Any]:
    """Return the JSON Schema of the document (shipped in the package; read once)."""
    schema: dict[str, Any] = load_package_json(
        "retrieval_lib.events", "schema/retrieval_events.schema.json"
    )
    return schema


@functools.lru_cache(maxsize=1)
def _compiled_validator() -> Any:
    import fastjsonschema

    return fastjsonschema.compile(load_schema())


@functools.lru_cache(maxsize=1)
def _quick_check() -> Any:
    """The sound quick check of the shipped schema (:mod:`retrieval_lib.events.fast_check`)."""
    from retrieval_lib.events.fast_check import compile_check

    return compile_check(load_schema())  # the shipped schema compiles (tested)


def check_version(doc: Any, *, where: str = "document") -> None:
    """Raise :class:`UnsupportedSchemaVersion` unless ``doc`` declares a ``1.x`` version."""
    if not isinstance(doc, dict):
        raise SchemaError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    version = doc.get("schema_version")
    if not isinstance(version, str) or "." not in version:
        raise SchemaError(f"{where}: missing or malformed schema_version {version!r}")
    major = version.split(".", 1)[0]
    if major != str(SUPPORTED_MAJOR):
        raise UnsupportedSchemaVersion(
            f"{where}: schema_version {version!r} has major version {major}; this "
            f"retrieval_lib {__version__} reads major version {SUPPORTED_MAJOR} only"
        )


def validate_document(doc: Any, *, where: str = "document") -> None:
    """Validate ``doc`` against the shipped schema; raise :class:`SchemaError` if invalid.

    A quick exact-type pass (its version pattern admits major 1 only) decides most
    documents; the rest go to the version check and the full validator (error wording).
    """
    if _quick_check()(doc):
        return
    check_version(doc, where=where)
    import fastjsonschema  # a core dependency

    try:
        _compiled_validator()(doc)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise SchemaError(f"{where}: {exc.message}") from None


def minimal_document(*, run_id: str, task_name: str, config_name: str) -> dict[str, Any]:
    """A valid empty document (degraded: no trace, no ground truth); useful in tests."""
    return {
        "schema_version": EVENTS_SCHEMA_VERSION,
        "generator": {"name": "retrieval_lib", "version": __version__},
        "provenance": {
            "run_id": run_id,
            "batch_timestamp": None,
            "task_name": task_name,
            "config_name": config_name,
            "benchmark": None,
        },
        "coverage": {
            "has_trajectory": False,
            "has_transcript": False,
            "has_ground_truth": False,
            "has_chunk_ground_truth": False,
            "trace_source": None,
            "degraded_reason": "no trace",
        },
        "ground_truth": {"files": []},
        "events": [],
    }


#: Written by ``normalize`` in an events folder when it skipped input entries of the run
#: (``{"left_out": [{"path", "reason"}]}``); ``evaluate`` copies it into the run summary.
LEFT_OUT_FILENAME = "normalize_left_out.json"

#: Longest file-name stem in bytes: with the suffixes it stays under the usual 255.
MAX_STEM_BYTES = 200


def document_filename(task_name: str, trial_suffix: str | None = None) -> str:
    """File name of a document: ``<task>.retrieval_events.json`` or ``<task>__<id>...``.

    A stem too long for a file system is cut and completed with a hash of the whole
    stem, so distinct names stay distinct.

    Examples
    --------
    >>> document_filename("task-001", "abc1234")
    'task-001__abc1234.retrieval_events.json'
    >>> len(document_filename("t" * 400).encode()) <= 255
    True
    """
    stem = task_name if trial_suffix is None else f"{task_name}__{trial_suffix}"
    raw = stem.encode("utf-8")
    if len(raw) > MAX_STEM_BYTES:
        digest = hashlib.sha256(raw).hexdigest()[:16]
        head = raw[: MAX_STEM_BYTES - 17].decode("utf-8", errors="ignore")
        stem = f"{head}-{digest}"
    return stem + DOCUMENT_SUFFIX


def document_path(
    out_root: str | Path, config_name: str, task_name: str, trial_suffix: str | None = None
) -> Path:
    """Where a document goes under ``out_root``; no name can escape ``out_root``."""
    return safe_join(out_root, config_name, document_filename(task_name, trial_suffix))


def dumps_document(doc: dict[str, Any]) -> bytes:
    """Serialise a document deterministically (sorted keys, 2-space indent, NaN as null).

    orjson writes NaN and infinities as ``null`` itself, and numpy scalars with
    ``OPT_SERIALIZE_NUMPY``, so no pre-pass over the document is needed.
    """
    return orjson.dumps(
        doc,
        option=orjson.OPT_INDENT_2
        | orjson.OPT_SORT_KEYS
        | orjson.OPT_APPEND_NEWLINE
        | orjson.OPT_SERIALIZE_NUMPY,
    )


def encode_document(
    doc: dict[str, Any], *, where: str = "document", validate: bool = True
) -> bytes:
    """Validate ``doc`` (errors name ``where``) and serialise it (:func:`dumps_document`)."""
    if validate:
        validate_document(doc, where=where)
    return dumps_document(doc)


def write_document(doc: dict[str, Any], path: str | Path, *, validate: bool = True) -> Path:
    """Validate ``doc`` and write it atomically to ``path``."""
    return atomic_write_bytes(path, encode_document(doc, where=str(path), validate=validate))


def load_document(path: str | Path, *, validate: bool = True) -> dict[str, Any]:
    """Read one document; reject unknown major versions and invalid documents.

    Raises
    ------
    InputError
        The file is missing or not JSON.
    UnsupportedSchemaVersion
        Its major schema version is not 1.
    SchemaError
        It does not validate.
    """
    p = Path(path)
    try:
        data = read_regular_bytes(p)  # a FIFO or a link to /dev/zero: refused, not read
    except OSError as exc:
        raise InputError(f"cannot read {p}: {os_reason(exc)}") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{p} is not valid JSON: {exc}") from None
    if validate:
        validate_document(doc, where=str(p))
    else:
        check_version(doc, where=str(p))
    return doc


def find_documents(paths: Iterable[str | Path]) -> list[Path]:
    """Every ``*.retrieval_events.json`` given or found below the given folders, sorted.

    Every entry with the document suffix that is not a folder is listed, a symlink (to
    ``/dev/zero``, to nothing, a loop) and a FIFO included: :func:`load_document` then
    refuses it with the reason, so a reader names it instead of leaving it out unseen.

    Examples
    --------
    >>> import os, tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> os.symlink("/dev/zero", folder / "t.retrieval_events.json")
    >>> [p.name for p in find_documents([folder])]
    ['t.retrieval_events.json']
    """
    found: set[Path] = set()
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found.update(
                q for q in p.rglob("*" + DOCUMENT_SUFFIX) if q.is_symlink() or not q.is_dir()
            )
        elif p.is_file() or p.is_symlink() or p.exists():
            found.add(p)
        else:
            raise InputError(f"no such file or folder: {p}")
    return sorted(found)


def iter_documents(
    paths: Iterable[str | Path], *, validate: bool = True
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Yield ``(path, document)`` for every document under ``paths`` in sorted order."""
    for path in find_documents(paths):
        yield path, load_document(path, validate=validate)


def events_frame(docs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per event over ``docs``, with the document's identity columns.

    Examples
    --------
    >>> from retrieval_lib.events.document import minimal_document, events_frame
    >>> events_frame([minimal_document(run_id="r", task_name="t", config_name="c")]).shape
    (0, 15)
    """
    import pandas as pd

    rows = []
    for doc in docs:
        prov = doc["provenance"]
        for ev in doc["events"]:
            rows.append(
                (
                    prov["run_id"],
                    prov["config_name"],
                    prov["task_name"],
                    prov.get("trial_name"),
                    ev["step_index"],
                    ev["tool_name"],
                    ev["tool_category"],
                    ev["is_mcp"],
                    ev.get("is_subagent", False),
                    len(ev["target_files"]),
                    list(ev["target_files"]),
                    ev["hits_ground_truth"],
                    list(ev.get("matched_ground_truth_files", [])),
                    ev.get("elapsed_seconds"),
                    ev.get("cumulative_tokens"),
                )
            )
    frame = pd.DataFrame.from_records(rows, columns=list(EVENT_COLUMNS))
    frame["elapsed_seconds"] = frame["elapsed_seconds"].astype("float64")
    frame["cumulative_tokens"] = frame["cumulative_tokens"].astype("Int64")
    return frame


def load_documents(
    paths: Iterable[str | Path], *, validate: bool = True
) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """Load every document under ``paths``; return them and the tidy events frame."""
    docs = [doc for _, doc in iter_documents(paths, validate=validate)]
    return docs, events_frame(docs)

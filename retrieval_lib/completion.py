"""The completion record of a run's outputs: what was written, by which code, from what.

Every ``retrieval_events`` folder that ``normalize`` or ``evaluate`` writes carries
``completion_record.json`` (format, writers and checkers: ``docs/contracts.md`` §6). Each
step marks its part incomplete before it writes any output and writes the record again
last, naming every file it wrote with its size (the run-level files with a SHA-256 too),
so a step killed half-way, or outputs changed afterwards, are refused by the next command
(:func:`check_normalized`, :func:`check_evaluated`) or redone by ``study``
(:func:`problem`). A folder without a record is read as it is.

Examples
--------
>>> import tempfile, pathlib
>>> events = pathlib.Path(tempfile.mkdtemp()) / "retrieval_events"
>>> begin_normalize(events, run=None, tasks_root=None)
>>> problem(events, evaluated=False)
'its normalisation is incomplete (interrupted, or still running)'
>>> finish_normalize(events, [], failed_trials=[])
>>> problem(events, evaluated=False) is None
True
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from retrieval_lib import __version__
from retrieval_lib.errors import InputError
from retrieval_lib.events.document import (
    DOCUMENT_SUFFIX,
    EVENTS_DIRNAME,
    METRICS_SUFFIX,
    find_documents,
)
from retrieval_lib.io import atomic_write_json, file_sha256

__all__ = [
    "COMPLETION_FILENAME",
    "RECORD_VERSION",
    "IncompleteOutputError",
    "begin_evaluate",
    "begin_normalize",
    "check_evaluated",
    "check_normalized",
    "code_fingerprint",
    "finish_evaluate",
    "finish_normalize",
    "problem",
    "read_record",
    "remove_orphaned_temporaries",
    "set_inputs_fingerprint",
]

COMPLETION_FILENAME = "completion_record.json"
RECORD_VERSION = "1.0"
#: The run-level files of an evaluation (``metrics.summary``), and the impact document
#: made from them: removed when the run is normalised again.
SUMMARY_NAME = "run_retrieval_summary.json"
TABLE_NAMES = ("retrieval_metrics.parquet", "retrieval_metrics.csv")
DATASET_NAME = "retrieval_metrics_dataset"
IMPACT_NAME = "retrieval_impact.json"
#: The study's per-run tables (``events.study_rows``), written by ``evaluate``.
STUDY_NAMES = ("study_events.parquet", "study_trials.parquet")
#: The run-level files (the dataset folder apart): removed by a new normalisation.
_RUN_FILES = (SUMMARY_NAME, *TABLE_NAMES, IMPACT_NAME, *STUDY_NAMES)


class IncompleteOutputError(InputError):
    """A run's outputs are incomplete or do not match their completion record."""


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the package's own code and schemas (``bundled/`` data left out)."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        parts = path.relative_to(package).parts
        if path.suffix in (".py", ".json") and "__pycache__" not in parts and parts[0] != "bundled":
            digest.update(path.relative_to(package).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _generator() -> dict[str, str]:
    return {"name": "retrieval_lib", "version": __version__, "code": code_fingerprint()}


def read_record(events_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record of ``events_dir``; ``None`` when it has none.

    A record that cannot be read (not JSON, not an object) counts as an incomplete one.
    """
    path = Path(events_dir) / COMPLETION_FILENAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        return {"record_version": RECORD_VERSION, "normalize": {"complete": False}}
    return data


def _write(events_dir: Path, record: Mapping[str, Any]) -> None:
    atomic_write_json(events_dir / COMPLETION_FILENAME, dict(record))


def _text(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else str(Path(value).resolve())


def _new_record(
    run: str | os.PathLike[str] | None = None,
    tasks_root: str | os.PathLike[str] | None = None,
    normalize: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "record_version": RECORD_VERSION,
        "generator": _generator(),
        "run": _text(run),
        "inputs": {"tasks_root": _text(tasks_root), "fingerprint": None},
        "normalize": normalize,
        "evaluate": None,
    }


def begin_normalize(
    events_dir: str | os.PathLike[str],
    *,
    run: str | os.PathLike[str] | None,
    tasks_root: str | os.PathLike[str] | None,
) -> None:
    """Before a run's first document is written: mark the run incomplete, remove the
    outputs of an earlier evaluation (they describe other documents) and the temporary
    files a killed writer left."""
    folder = Path(events_dir)
    folder.mkdir(parents=True, exist_ok=True)
    _write(folder, _new_record(run, tasks_root, {"complete": False}))
    for name in _RUN_FILES:
        (folder / name).unlink(missing_ok=True)
    if (folder / DATASET_NAME).is_dir() and not (folder / DATASET_NAME).is_symlink():
        shutil.rmtree(folder / DATASET_NAME, ignore_errors=True)
    remove_orphaned_temporaries([folder])


def _sizes(
    events_dir: Path, paths: Iterable[str | os.PathLike[str]] | Mapping[str, int | None]
) -> dict[str, int]:
    """``{path relative to events_dir: size}``; a path is resolved only when it is not
    already below the resolved ``events_dir`` (the writers resolve; strings: per document).
    A mapping gives the sizes its writer wrote (``None``: look)."""
    root = str(events_dir.resolve())
    prefix = root.rstrip("/") + "/"
    known: Mapping[str, int | None] = paths if isinstance(paths, Mapping) else {}
    out: dict[str, int] = {}
    for raw in paths:
        path = os.path.normpath(raw)
        if not path.startswith(prefix):
            path = os.path.realpath(path)
            if not path.startswith(prefix):
                raise ValueError(f"{raw} is not in {root}")
        size = known.get(os.fspath(raw))
        out[path[len(prefix) :]] = os.stat(path).st_size if size is None else size
    return dict(sorted(out.items()))


def finish_normalize(
    events_dir: str | os.PathLike[str],
    documents: Iterable[str | os.PathLike[str]] | Mapping[str, int | None],
    *,
    failed_trials: Sequence[Mapping[str, Any]],
) -> None:
    """Last, once every document of the run is written and stale ones are removed:
    record the documents (path relative to ``events_dir`` and size: the bytes written
    when ``documents`` maps each path to them, else as found) and the failed trials."""
    folder = Path(events_dir)
    record = {**_new_record(), **(read_record(folder) or {})}
    record.update(
        {
            "record_version": RECORD_VERSION,
            "generator": _generator(),
            "normalize": {
                "complete": True,
                "documents": _sizes(folder, documents),
                "failed_trials": sorted(
                    (dict(f) for f in failed_trials), key=lambda f: str(f.get("trial"))
                ),
            },
            "evaluate": None,
        }
    )
    _write(folder, record)


def begin_evaluate(events_dir: str | os.PathLike[str]) -> list[Path]:
    """Before an evaluation writes anything: check the documents against the record
    (:func:`check_normalized`) and find them (:class:`InputError` when there are none:
    then nothing is written), mark the evaluation incomplete, and remove the impact
    document of the table about to be replaced and the temporary files a killed writer
    left. Returns the documents (:func:`~retrieval_lib.events.document.find_documents`)."""
    folder = Path(events_dir)
    check_normalized(folder)
    doc_paths = find_documents([folder])
    if not doc_paths:
        raise InputError(f"no retrieval-event documents (*{DOCUMENT_SUFFIX}) found under {folder}")
    record = read_record(folder)
    if record is None:
        record = _new_record()
    record["evaluate"] = {"complete": False}
    record.setdefault("inputs", {})["fingerprint"] = None
    _write(folder, record)
    # made from the table that is about to be replaced
    (folder / IMPACT_NAME).unlink(missing_ok=True)
    remove_orphaned_temporaries([folder])
    return doc_paths


def finish_evaluate(
    events_dir: str | os.PathLike[str],
    metrics_files: Iterable[str | os.PathLike[str]],
    run_files: Iterable[str | os.PathLike[str]],
    *,
    k: Sequence[int],
) -> None:
    """Last, once the metrics files, summary, table and dataset are written: record them
    (metrics files by size; the run-level files by size and SHA-256) and the cut-offs."""
    folder = Path(events_dir)
    root = folder.resolve()
    record = read_record(folder) or {"normalize": None, "run": None, "inputs": {}}
    files = {}
    for raw in run_files:
        path = Path(raw).resolve()
        files[path.relative_to(root).as_posix()] = {
            "size": path.stat().st_size,
            "sha256": file_sha256(path),
        }
    record["record_version"] = RECORD_VERSION
    record["generator"] = _generator()
    record["evaluate"] = {
        "complete": True,
        "k": [int(v) for v in k],
        "metrics_files": _sizes(folder, metrics_files),
        "files": dict(sorted(files.items())),
    }
    _write(folder, record)


def set_inputs_fingerprint(
    events_dir: str | os.PathLike[str], fingerprint: str, *, listing: str | None = None
) -> None:
    """Record the study's fingerprints of the run's inputs (``study.loader``): the full
    one (every input file) and ``listing``, the cheap one of the run folder's top level."""
    folder = Path(events_dir)
    record = read_record(folder)
    if record is None:
        return
    inputs = record.setdefault("inputs", {})
    inputs["fingerprint"] = fingerprint
    inputs["listing"] = listing
    _write(folder, record)


def _documents_problem(folder: Path, section: Mapping[str, Any]) -> str | None:
    listed = section.get("documents")
    if not isinstance(listed, dict):
        return "its completion record lists no documents"
    root = folder.resolve()
    # one pass keeping only counts and the problems (a run of 100,000 documents would
    # otherwise hold a path per document); the listed order decides which is named first
    present = 0
    changed: set[str] = set()
    extra: str | None = None
    for rel, path in _document_entries(root):
        if rel in listed:
            present += 1
            if path.is_symlink() or path.stat().st_size != listed[rel]:
                changed.add(rel)
        elif extra is None or rel < extra:
            extra = rel
    if present < len(listed) or changed:
        found = None if present == len(listed) else {rel for rel, _ in _document_entries(root)}
        for rel in listed:
            if found is not None and rel not in found:
                return f"document {rel} of its completion record is missing"
            if rel in changed:
                return f"document {rel} changed since it was written (size or type differs)"
    if extra is not None:
        return f"document {extra} is not in its completion record"
    return None


def _document_entries(root: Path) -> Iterator[tuple[str, Path]]:
    """``(path relative to root, path)`` of every entry below ``root`` named like a
    document that is a file or a symlink (symlinked folders not followed), one at a time
    (``Path.rglob`` would keep every path it yielded)."""
    for folder, dirnames, filenames in os.walk(root):
        base = Path(folder)
        prefix = base.relative_to(root).as_posix()
        for name in (*dirnames, *filenames):
            if not name.endswith(DOCUMENT_SUFFIX):
                continue
            path = base / name
            if path.is_file() or path.is_symlink():
                yield (name if prefix == "." else f"{prefix}/{name}"), path


def _evaluate_problem(folder: Path, section: Mapping[str, Any], *, full: bool) -> str | None:
    root = folder.resolve()
    for rel, size in (section.get("metrics_files") or {}).items() if full else ():
        path = root / rel
        if not path.is_file() or path.stat().st_size != size:
            return f"metrics file {rel} is missing or changed since it was written"
    for rel, facts in (section.get("files") or {}).items():
        path = root / rel
        if not path.is_file() or path.is_symlink():
            return f"{rel} of its completion record is missing"
        if path.stat().st_size != facts.get("size") or file_sha256(path) != facts.get("sha256"):
            return f"{rel} changed since it was written (truncated or rewritten)"
    return None


def problem(
    events_dir: str | os.PathLike[str], *, evaluated: bool = True, full: bool = True
) -> str | None:
    """Why the outputs of ``events_dir`` cannot be used as they are, or ``None``.

    ``evaluated``: the evaluation must be complete too. A folder without a record is
    accepted as it is (outputs not written by this machinery). ``full=False`` (the
    study's default check, with ``evaluated``) reads the record and checks only the
    run-level files it names (size and SHA-256: the summary, the metrics table and
    dataset, the study's per-run tables), not every document and metrics file: one
    record and a few files per run instead of a walk of the events folder.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> problem(pathlib.Path(tempfile.mkdtemp()), full=False) is None  # no record
    True
    """
    folder = Path(events_dir)
    record = read_record(folder)
    if record is None:
        return None
    normalize = record.get("normalize")
    if isinstance(normalize, dict):
        if not normalize.get("complete"):
            return "its normalisation is incomplete (interrupted, or still running)"
        found = _documents_problem(folder, normalize) if full or not evaluated else None
        if found:
            return found
    if not evaluated:
        return None
    evaluate = record.get("evaluate")
    if not isinstance(evaluate, dict):
        return "it is not evaluated since its last normalisation"
    if not evaluate.get("complete"):
        return "its evaluation is incomplete (interrupted, or still running)"
    return _evaluate_problem(folder, evaluate, full=full)


def _run_name(folder: Path) -> str:
    return folder.parent.name if folder.name == EVENTS_DIRNAME else folder.name


def _normalize_command(folder: Path, record: Mapping[str, Any] | None) -> str:
    record = record or {}
    inputs = record.get("inputs") or {}
    run = record.get("run")
    tasks = inputs.get("tasks_root") or "DIR"
    # outputs beside the run are <run>/retrieval_events; elsewhere <out>/<run_id>/...
    inside = run is not None and Path(run).resolve() == folder.resolve().parent
    out = "" if inside else f" --out {folder.resolve().parent.parent}"
    return f"retrieval-lib normalize {run or 'RUN'} --tasks-root {tasks}{out}"


def check_normalized(events_dir: str | os.PathLike[str]) -> None:
    """Refuse (:class:`IncompleteOutputError`, naming the run and the command that fixes
    it) a folder whose normalisation is incomplete or whose documents do not match."""
    folder = Path(events_dir)
    found = problem(folder, evaluated=False)
    if found:
        raise IncompleteOutputError(
            f"run {_run_name(folder)!r} ({folder}): {found}; its documents are not a complete "
            f"set: run `{_normalize_command(folder, read_record(folder))}` again"
        )


def check_evaluated(events_dir: str | os.PathLike[str]) -> None:
    """Refuse a folder whose evaluation is incomplete or whose files do not match its
    record, naming the run and the command that fixes it."""
    folder = Path(events_dir)
    check_normalized(folder)
    found = problem(folder)
    if found:
        raise IncompleteOutputError(
            f"run {_run_name(folder)!r} ({folder}): {found}; run "
            f"`retrieval-lib evaluate {folder}` again"
        )


def remove_orphaned_temporaries(roots: Iterable[str | os.PathLike[str]]) -> int:
    """Delete the temporary files (``.<name>.<random>.tmp``) that a writer killed in the
    middle of an atomic write left behind under ``roots``; return how many.

    Those of documents, metrics files, a run's summary, table, dataset files and its
    completion record are removed; others are kept. Call only when no writer is active
    under ``roots``.
    """
    run_files = {*_RUN_FILES, COMPLETION_FILENAME}
    removed = 0
    for root in roots:
        base = Path(root)
        if not base.is_dir():
            continue
        for path in base.rglob(".*.tmp"):
            name = path.name[1:].rsplit(".", 2)[0]
            ours = (
                name.endswith((DOCUMENT_SUFFIX, METRICS_SUFFIX))
                or name in run_files
                or (path.parent.name == DATASET_NAME and name.endswith(".parquet"))
            )
            if ours and path.is_file() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed += 1
    return removed

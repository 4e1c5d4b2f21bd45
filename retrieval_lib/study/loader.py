"""Build a study: bring every run up to date, then read them into tidy tables.

:func:`prepare_runs` normalises and evaluates the runs under the given paths that are not
yet evaluated, or whose inputs changed since (:func:`listing_fingerprint`; with ``verify``,
:func:`input_fingerprint`), and reuses the others. :func:`read_evaluated` reads evaluated
runs into the tables of a :class:`~retrieval_lib.study.core.Study` from their metrics
tables and the study tables ``evaluate`` wrote (:mod:`retrieval_lib.events.study_rows`).

Paths given may be raw run folders (or folders of runs) or folders that ``retrieval-lib
evaluate`` already processed (``<out>/<run_id>`` holding ``retrieval_events/``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from retrieval_lib import __version__
from retrieval_lib.completion import code_fingerprint, read_record
from retrieval_lib.errors import InputError, RetrievalLibError
from retrieval_lib.events.document import DOCUMENT_SUFFIX, EVENTS_DIRNAME, load_document
from retrieval_lib.events.study_rows import (
    DOCUMENT_COLUMNS,
    EVENT_COLUMNS,
    LIST_COLUMNS,
    STUDY_EVENTS_FILENAME,
    STUDY_TRIALS_FILENAME,
    document_values,
    event_rows,
    trial_id_of,
)
from retrieval_lib.metrics.stages import DEFAULT_K, normalize_k
from retrieval_lib.study.families import config_families

if TYPE_CHECKING:
    from retrieval_lib.runs import LeftOut

__all__ = [
    "PreparedRuns",
    "StudyTables",
    "documents_events",
    "input_fingerprint",
    "listing_fingerprint",
    "prepare_runs",
    "read_evaluated",
    "tasks_fingerprint",
]

#: Task-definition files that ground truth is read from (the rest of a task folder, such
#: as a repository checkout, does not change the analysis).
_TASK_FILES = ("task.toml", "instruction.md")
_TASK_FOLDERS = ("tests", "solution")

# --------------------------------------------------------------------------- fingerprints


def _walk_stats(root: Path, skip: str | None = None) -> Iterable[tuple[str, int, int]]:
    """``(relative path, size, mtime_ns)`` of every file below ``root``, sorted."""
    found: list[tuple[str, int, int]] = []
    for folder, dirs, files in os.walk(root):
        if skip is not None and skip in dirs:
            dirs.remove(skip)
        dirs.sort()
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            found.append((os.path.relpath(path, root), st.st_size, st.st_mtime_ns))
    return sorted(found)


def _task_stats(tasks_root: Path) -> Iterable[tuple[str, int, int]]:
    """Stats of the ground-truth files of every task under ``tasks_root`` (suite/task/...)."""
    found: list[tuple[str, int, int]] = []
    for suite in sorted(p for p in tasks_root.iterdir() if p.is_dir()):
        for task in sorted(p for p in suite.iterdir() if p.is_dir()):
            prefix = task.relative_to(tasks_root).as_posix()
            for name in _TASK_FILES:
                if (task / name).is_file():
                    st = (task / name).stat()
                    found.append((f"{prefix}/{name}", st.st_size, st.st_mtime_ns))
            for sub in _TASK_FOLDERS:
                if (task / sub).is_dir():
                    found.extend(
                        (f"{prefix}/{sub}/{rel}", size, mtime)
                        for rel, size, mtime in _walk_stats(task / sub)
                    )
    return found


def input_fingerprint(
    run_dir: str | Path,
    tasks_root: str | Path | None,
    k: Sequence[int] = DEFAULT_K,
    *,
    tasks_digest: str | None = None,
) -> str:
    """A hash of everything the evaluation of ``run_dir`` depends on.

    Every file of the run folder (its own ``retrieval_events/`` left out) by relative
    path, size and modification time; the ground-truth files of the task definitions
    (``task.toml``, ``instruction.md``, ``tests/``, ``solution/`` of each task); the
    tasks root's path; the library version, a hash of its code, and the cut-offs ``k``.
    ``tasks_digest`` is :func:`tasks_fingerprint` of ``tasks_root``, when the caller
    fingerprints many runs against one tasks root (it walks the task definitions once).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (run / "result.json").write_text("{}")
    >>> a = input_fingerprint(run, None)
    >>> _ = (run / "result.json").write_text("{ }")
    >>> a == input_fingerprint(run, None)
    False
    """
    walk = _walk_stats(Path(run_dir), skip=EVENTS_DIRNAME)
    lines = (f"run {rel}\0{size}\0{mtime}\n" for rel, size, mtime in walk)
    return _fingerprint(lines, tasks_root, k, tasks_digest)


def listing_fingerprint(
    run_dir: str | Path,
    tasks_root: str | Path | None,
    k: Sequence[int] = DEFAULT_K,
    *,
    tasks_digest: str | None = None,
) -> str:
    """The cheap fingerprint the study's default up-to-date check compares.

    As :func:`input_fingerprint`, but of the run folder's top level only: the name, type,
    size and modification time of each entry directly in ``run_dir`` (its own
    ``retrieval_events/`` left out), one ``scandir`` instead of a walk of every file. A
    trial or config folder added, removed or renamed at the top level, or a top-level
    file rewritten, changes it (a folder's modification time changes when its entries
    do); a file rewritten in place deeper inside the run does not: that needs the full
    check (``retrieval-lib study --verify``, :func:`prepare_runs` ``verify=True``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> a = listing_fingerprint(run, None)
    >>> (run / "trial-2").mkdir()
    >>> a == listing_fingerprint(run, None)
    False
    """
    return _fingerprint(_listing_lines(run_dir), tasks_root, k, tasks_digest)


def _listing_lines(run_dir: str | Path) -> Iterator[str]:
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except OSError as exc:
        yield f"unlisted {exc.strerror}\n"
        return
    for entry in entries:
        if entry.name == EVENTS_DIRNAME:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        yield f"run {entry.name}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\n"


def _fingerprint(
    run_lines: Iterable[str],
    tasks_root: str | Path | None,
    k: Sequence[int],
    tasks_digest: str | None,
) -> str:
    """The hash of the library (version, code, cut-offs), the run's ``run_lines`` and
    the task definitions: :func:`input_fingerprint` and :func:`listing_fingerprint`."""
    digest = hashlib.sha256()
    digest.update(
        f"retrieval_lib {__version__} {code_fingerprint()}; k={list(normalize_k(k))}\n".encode()
    )
    for line in run_lines:
        digest.update(line.encode("utf-8", "surrogateescape"))
    if tasks_root is not None:
        digest.update(f"tasks {tasks_digest or tasks_fingerprint(tasks_root)}\n".encode())
    return digest.hexdigest()


def tasks_fingerprint(tasks_root: str | Path) -> str:
    """A hash of the tasks root's path and of its tasks' ground-truth files (path, size,
    modification time): the part of :func:`input_fingerprint` that all runs share."""
    root = Path(tasks_root).resolve()
    digest = hashlib.sha256(f"tasks {root}\n".encode("utf-8", "surrogateescape"))
    for rel, size, mtime in _task_stats(root):
        digest.update(f"task {rel}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


# --------------------------------------------------------------------------- preparing


@dataclass
class PreparedRuns:
    """What :func:`prepare_runs` found, (re)built and reused.

    Attributes
    ----------
    events_dirs : list of pathlib.Path
        Every evaluated ``retrieval_events`` folder of the study, sorted.
    normalized, reused, given : list of str
        Run ids normalised and evaluated now, run ids whose outputs were up to date, and
        folders given already evaluated (read as they are).
    summary_line : str or None
        The normalisation summary when anything was normalised.
    """

    events_dirs: list[Path] = field(default_factory=list)
    normalized: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    given: list[str] = field(default_factory=list)
    summary_line: str | None = None
    evaluate_failures: list[tuple[str, str]] = field(default_factory=list)
    #: Input entries skipped while finding and normalising the runs, ``(path, reason)``
    #: (a symlink loop, a run folder that cannot be listed): each is also a log line.
    left_out: list[tuple[str, str]] = field(default_factory=list)

    def exclusion_rows(self) -> list[dict[str, Any]]:
        """Exclusion rows (stage ``discover``) for the entries left out outside every
        studied run: those inside a run are rows of its run summary already."""
        runs = [d.parent if d.name == EVENTS_DIRNAME else d for d in self.events_dirs]
        return [
            {"run_id": None, "trial_id": path, "stage": "discover", "reason": reason}
            for path, reason in self.left_out
            if not any(Path(path).is_relative_to(r) for r in runs)
        ]


def _read_fingerprint(events_dir: Path, key: str = "fingerprint") -> str | None:
    record = read_record(events_dir)
    inputs = record.get("inputs") if record else None
    value = inputs.get(key) if isinstance(inputs, dict) else None
    return value if isinstance(value, str) else None


def _is_evaluated(events_dir: Path, *, full: bool = True) -> bool:
    """Evaluated, and (when it has a completion record) completely, with its files
    unchanged since (:func:`retrieval_lib.completion.problem`; ``full=False``: the
    run-level files the study reads, not every document)."""
    from retrieval_lib.completion import problem
    from retrieval_lib.metrics.summary import SUMMARY_FILENAME, TABLE_BASENAME

    return (
        (events_dir / SUMMARY_FILENAME).is_file()
        and any((events_dir / f"{TABLE_BASENAME}{ext}").is_file() for ext in (".parquet", ".csv"))
        and problem(events_dir, full=full) is None
    )


def prepare_runs(
    paths: Sequence[str | os.PathLike[str]],
    tasks_root: str | os.PathLike[str] | None,
    *,
    out: str | os.PathLike[str] | None = None,
    workers: int = 1,
    k: Sequence[int] = DEFAULT_K,
    log: Callable[[str], None] | None = None,
    map_fn: Any = None,
    verify: bool = False,
) -> PreparedRuns:
    """Normalise and evaluate what is not yet up to date; return every evaluated folder.

    The up-to-date check reads one record per run (the completion record), the run
    folder's top-level listing (:func:`listing_fingerprint`) and hashes the run-level
    files the study reads (summary, metrics table and dataset, the study's per-run
    tables); ``verify`` makes it the full check: every input file's stats
    (:func:`input_fingerprint`) and every document and metrics file of the outputs.

    Parameters
    ----------
    paths
        Raw run folders or folders of runs (only read), and/or evaluated run folders.
    tasks_root
        Task definitions root for the runs that need normalising (``None``: no ground truth).
    out
        Output root: run ``R`` is written to ``<out>/R/retrieval_events/``; ``None`` writes
        inside each run (``<run>/retrieval_events/``, the seed's documented folder).
    workers
        Normalisation worker processes.
    k
        Cut-offs of the evaluation.
    log
        Receives one line per step (default: silent).
    map_fn
        A :class:`~retrieval_lib.distributed.DaskMapper`: trials are normalised and
        documents evaluated on its Dask cluster instead of ``workers`` processes.
    verify
        The full up-to-date check (a walk of every input and output file) instead of
        the record, the top-level listing and the hashed run-level files.

    Raises
    ------
    InputError
        A path does not exist, or holds neither runs nor evaluated outputs.
    """
    from retrieval_lib.metrics.summary import EvaluateResult
    from retrieval_lib.normalize import check_tasks_root
    from retrieval_lib.runs import LeftOut

    say = log or (lambda _line: None)
    check_tasks_root(tasks_root)
    prepared = PreparedRuns()
    left_out = LeftOut()
    raw_runs = _sort_given(paths, verify, prepared, left_out)
    out_root = Path(out) if out is not None else None
    root = Path(tasks_root) if tasks_root is not None else None
    stale = _stale_runs(raw_runs, root, out_root, k, verify, prepared)
    if prepared.reused:
        say(f"up to date, reused: {', '.join(prepared.reused)}")
    if stale:
        from retrieval_lib.completion import set_inputs_fingerprint

        report, evaluated = _normalize_and_evaluate(
            [run for run, *_ in stale], root, out_root, k, workers, map_fn
        )
        prepared.summary_line = report.summary_line()
        say(prepared.summary_line)
        left_out.update(report.left_out)
        for run, events_dir, fingerprint, listing in stale:
            outcome = evaluated.get(run.resolve())
            if not isinstance(outcome, EvaluateResult):  # no document, or the error
                why = NO_DOCUMENT if outcome is None else str(outcome)
                prepared.evaluate_failures.append((run.name, why))
                say(f"evaluate {run.name} failed: {why}")
                continue
            say(
                f"evaluated {run.name}: {outcome.documents} documents, {outcome.computable} computable"
            )
            # last: the completion record (normalize and evaluate wrote theirs) names the
            # inputs, so the run is reused next time while they and its files are unchanged
            set_inputs_fingerprint(events_dir, fingerprint, listing=listing)
            prepared.normalized.append(run.name)
            prepared.events_dirs.append(events_dir)
    prepared.events_dirs = sorted(set(prepared.events_dirs))
    prepared.left_out = left_out.entries()
    for line in left_out.lines():
        say(line)
    if not prepared.events_dirs:
        raise InputError("no evaluated run to study under " + ", ".join(map(str, paths)))
    return prepared


def _sort_given(
    paths: Sequence[str | os.PathLike[str]],
    verify: bool,
    prepared: PreparedRuns,
    left_out: LeftOut,
) -> list[Path]:
    """The raw runs found under ``paths``; evaluated folders given go into ``prepared``."""
    from retrieval_lib.metrics.summary import find_events_roots
    from retrieval_lib.runs import discover_runs

    raw_runs: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise InputError(f"no such run folder: {path}")
        runs = discover_runs([path.resolve()], left_out)
        if runs:
            raw_runs.extend(r for r in runs if r not in raw_runs)
            continue
        try:
            roots = find_events_roots([path])
        except InputError:
            raise InputError(
                f"{path} holds neither run folders with trials nor evaluated runs "
                "(retrieval_events/ with a metrics table)"
            ) from None
        for root in roots:
            if not _is_evaluated(root, full=verify):
                from retrieval_lib.completion import check_evaluated

                check_evaluated(root)  # names what is incomplete or changed, if anything
                raise InputError(f"{root} is not evaluated: run `retrieval-lib evaluate {root}`")
            prepared.given.append(str(root))
            prepared.events_dirs.append(root)
    return raw_runs


def _stale_runs(
    raw_runs: list[Path],
    tasks_root: Path | None,
    out_root: Path | None,
    k: Sequence[int],
    verify: bool,
    prepared: PreparedRuns,
) -> list[tuple[Path, Path, str, str]]:
    """Runs to redo, each with its events folder, full input and listing fingerprints; the
    runs up to date go into ``prepared`` as reused."""
    stale: list[tuple[Path, Path, str, str]] = []
    tasks_digest = tasks_fingerprint(tasks_root) if tasks_root is not None and raw_runs else None
    for run in sorted(raw_runs):
        events_dir = (out_root / run.name if out_root else run) / EVENTS_DIRNAME
        measure = input_fingerprint if verify else listing_fingerprint
        key = "fingerprint" if verify else "listing"
        found = measure(run, tasks_root, k, tasks_digest=tasks_digest)
        if _is_evaluated(events_dir, full=verify) and _read_fingerprint(events_dir, key) == found:
            prepared.reused.append(run.name)
            prepared.events_dirs.append(events_dir)
            continue
        # redone: both fingerprints as they are before the run is read
        full = input_fingerprint(run, tasks_root, k, tasks_digest=tasks_digest)
        listing = (
            listing_fingerprint(run, tasks_root, k, tasks_digest=tasks_digest) if verify else found
        )
        stale.append((run, events_dir, full, listing))
    return stale


#: Why a run that gave no document was not evaluated.
NO_DOCUMENT = "no document was written"


def _normalize_and_evaluate(
    runs: Sequence[Path],
    tasks_root: Path | None,
    out_root: Path | None,
    k: Sequence[int],
    workers: int,
    map_fn: Any,
) -> tuple[Any, dict[Path, Any]]:
    """:func:`retrieval_lib.run_many.normalize_many` of the stale runs on ``map_fn``, else
    on ``workers`` processes: each run evaluated as soon as it is normalised."""
    from retrieval_lib.parallel import pool_mapper
    from retrieval_lib.run_many import normalize_many

    with contextlib.ExitStack() as stack:
        mapper = map_fn if map_fn is not None else stack.enter_context(pool_mapper(workers))
        return normalize_many(runs, tasks_root, mapper=mapper, out=out_root, k=k)


# --------------------------------------------------------------------------- reading


def documents_events(
    documents: Sequence[Mapping[str, Any]], config_map: Mapping[str, str] | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The events table and a minimal trials table (``trial_id, config_family,
    has_ground_truth``) of documents already in memory (one run's report).

    Trial ids are ``<run>/<config>/<task>/<position>`` (the position keeps repeated trials
    of a task apart); events are in :data:`EVENT_COLUMNS` order, as in :func:`read_evaluated`.
    """
    mapping = config_families(config_map)
    event_data: list[tuple[Any, ...]] = []
    trials: list[tuple[str, str, bool]] = []
    for position, doc in enumerate(documents):
        prov = doc["provenance"]
        config = str(prov["config_name"])
        family = mapping.get(config.lower(), config)
        trial_id = f"{prov['run_id']}/{config}/{prov['task_name']}/{position}"
        has_truth = bool((doc.get("coverage") or {}).get("has_ground_truth"))
        trials.append((trial_id, family, has_truth))
        event_data.extend(event_rows(doc, trial_id, family))
    events = pd.DataFrame.from_records(event_data, columns=list(EVENT_COLUMNS))
    trials_frame = pd.DataFrame(trials, columns=["trial_id", "config_family", "has_ground_truth"])
    return events, trials_frame


@dataclass
class StudyTables:
    """The raw tables :func:`read_evaluated` builds (see :class:`~retrieval_lib.study.core.Study`)."""

    trials: pd.DataFrame
    events: pd.DataFrame
    exclusions: pd.DataFrame


def _config_folder(config: str) -> str:
    """The folder :func:`~retrieval_lib.events.document.document_path` wrote a config to."""
    from retrieval_lib.io import safe_component

    try:
        return safe_component(config)
    except RetrievalLibError:
        return config  # no document can be there: the read fails and is an exclusion


def read_evaluated(
    events_dirs: Sequence[str | os.PathLike[str]],
    config_map: Mapping[str, str] | None = None,
) -> StudyTables:
    """Read evaluated runs into the trials and events tables of a study.

    Every metrics-table row becomes one trial, joined with the coverage, ground-truth and
    outcome details the table does not carry and with its event rows: read from the
    run's ``study_trials.parquet`` and ``study_events.parquet`` (written by ``evaluate``,
    :mod:`retrieval_lib.events.study_rows`, hashed in the completion record), or, for a
    run evaluated without them (older code, no pyarrow), from its event documents. A
    document that cannot be read, or a table row without its document, is listed in
    ``exclusions`` with the reason, never dropped silently.

    Raises
    ------
    InputError
        Two folders hold the same run id, or no trial is left.
    IncompleteOutputError
        A run's evaluation is incomplete, or a file the study reads does not match its
        completion record (:func:`retrieval_lib.completion.problem`).
    """
    from retrieval_lib.metrics.table_files import read_metrics_table

    mapping = config_families(config_map)
    frames: list[pd.DataFrame] = []
    event_frames: list[pd.DataFrame] = []
    exclusions: list[dict[str, Any]] = []
    seen_runs: dict[str, Path] = {}
    for raw in events_dirs:
        events_dir = Path(raw)
        table = read_metrics_table(_metrics_table(events_dir))
        for run_id in sorted({str(r) for r in table["run_id"].dropna()}):
            if run_id in seen_runs and seen_runs[run_id] != events_dir:
                raise InputError(
                    f"run id {run_id!r} is in both {seen_runs[run_id]} and {events_dir}: "
                    "a study counts each run once"
                )
            seen_runs[run_id] = events_dir
        stored = _stored_rows(events_dir, table, mapping)
        details, run_events = stored or _decoded_rows(events_dir, table, mapping, exclusions)
        event_frames.append(run_events)
        extra = pd.DataFrame(details, index=table.index)
        # a column the metrics table already carries is taken from the table
        extra = extra.drop(columns=[c for c in extra.columns if c in table.columns])
        merged = pd.concat([extra, table], axis=1)
        frames.append(merged[merged["_ok"]].drop(columns="_ok"))
        exclusions.extend(_invalid_documents(events_dir))
    trials = pd.concat(frames, ignore_index=True, sort=False) if frames else pd.DataFrame()
    if trials.empty:
        raise InputError("the study has no readable trial")
    trials = trials.sort_values(
        ["run_id", "config_name", "task_name", "trial_id"], kind="mergesort"
    ).reset_index(drop=True)
    for column in DOCUMENT_COLUMNS:
        if column not in trials.columns:
            trials[column] = None
    events = _events_frame(event_frames)
    return StudyTables(
        trials=trials,
        events=events,
        exclusions=pd.DataFrame(exclusions, columns=["run_id", "trial_id", "stage", "reason"]),
    )


def _metrics_table(events_dir: Path) -> Path:
    """The run's metrics table, its run-level files checked against the completion
    record (size and SHA-256; not every document: :func:`prepare_runs` ``verify``)."""
    from retrieval_lib.completion import TABLE_NAMES, check_evaluated, problem
    from retrieval_lib.metrics.table_files import find_metrics_tables

    table = next((events_dir / n for n in TABLE_NAMES if (events_dir / n).is_file()), None)
    if table is None:
        return find_metrics_tables(events_dir)[0]  # searches below, or names what is missing
    if problem(events_dir, full=False) is not None:
        check_evaluated(events_dir)  # raises, naming the run and the command that fixes it
    return table


def _events_frame(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The runs' event rows as one table, its types set and rows in trial, step order."""
    kept = [f for f in frames if not f.empty]
    if kept:
        events = pd.concat(kept, ignore_index=True) if len(kept) > 1 else kept[0]
    else:
        events = pd.DataFrame.from_records([], columns=list(EVENT_COLUMNS))
    events = events[list(EVENT_COLUMNS)].assign(
        elapsed_seconds=events["elapsed_seconds"].astype("float64"),
        cumulative_tokens=pd.to_numeric(events["cumulative_tokens"]).astype("Float64"),
        attributed_seconds=events["attributed_seconds"].astype("float64"),
        attributed_tokens=events["attributed_tokens"].astype("float64"),
        # the text columns (the trial, run, config, model, tool of every call: 60% of the
        # table) as codes; analysis.plain_text gives the text back where it is written
        **{str(c): v.astype("category") for c, v in events.items() if v.dtype == "str"},
    )
    return events.sort_values(["trial_id", "step_index"], kind="mergesort").reset_index(drop=True)


def _stored_rows(
    events_dir: Path, table: pd.DataFrame, mapping: Mapping[str, str]
) -> tuple[dict[str, list[Any]], pd.DataFrame] | None:
    """The trial details (columns, in ``table`` order) and event rows of a run from its
    study tables; ``None`` when the run has none recorded (evaluated by older code, or
    without pyarrow) or they do not cover the table."""
    record = read_record(events_dir) or {}
    evaluate = record.get("evaluate")
    files = evaluate.get("files") if isinstance(evaluate, dict) else None
    if not isinstance(files, dict) or not all(
        name in files for name in (STUDY_EVENTS_FILENAME, STUDY_TRIALS_FILENAME)
    ):
        return None
    import pyarrow.parquet as pq

    try:
        stored = pq.read_table(events_dir / STUDY_TRIALS_FILENAME).to_pydict()
        stored_events = pq.read_table(events_dir / STUDY_EVENTS_FILENAME)
    except (OSError, ValueError) as exc:
        raise InputError(f"{events_dir}: its study tables cannot be read ({exc})") from None
    configs = [str(c) for c in table["config_name"].tolist()]
    ids = [
        trial_id_of(run, config, str(document))
        for run, config, document in zip(
            table["run_id"].tolist(), configs, table["source_document"].tolist(), strict=True
        )
    ]
    position = {trial_id: i for i, trial_id in enumerate(stored["trial_id"])}
    rows = [position.get(trial_id) for trial_id in ids]
    if any(row is None for row in rows):
        return None  # not this evaluation's tables: the documents are read instead
    families = {c: mapping.get(c.lower(), c) for c in set(configs)}
    details: dict[str, list[Any]] = {
        "trial_id": ids,
        "config_family": [families[c] for c in configs],
        "_ok": [True] * len(ids),
    }
    for column in DOCUMENT_COLUMNS:
        values = stored[column]
        if column in LIST_COLUMNS:
            details[column] = [tuple(values[i] or ()) for i in rows]
        else:
            details[column] = [values[i] for i in rows]
    data: dict[str, Any] = {}
    for name in stored_events.column_names:
        column = stored_events.column(name)
        data[name] = _tuples(column) if name in LIST_COLUMNS else column.to_pandas()
    events = pd.DataFrame(data)
    event_configs = events["config_name"].astype(str)
    event_families = {c: mapping.get(c.lower(), c) for c in event_configs.unique()}
    events.insert(
        EVENT_COLUMNS.index("config_family"), "config_family", event_configs.map(event_families)
    )
    return details, events


def _tuples(column: Any) -> list[tuple[Any, ...]]:
    """A Parquet list column as one tuple per row (null as an empty tuple); equal paths
    and equal tuples are one object each (a run reads the same files again and again)."""
    chunked = column.combine_chunks()
    encoded = chunked.flatten().dictionary_encode()
    names = encoded.dictionary.to_pylist()
    flat = [None if i is None else names[i] for i in encoded.indices.to_pylist()]
    offsets = chunked.offsets.to_numpy().tolist()
    shared: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    return [
        shared.setdefault(row, row)
        for row in (tuple(flat[a:b]) for a, b in zip(offsets[:-1], offsets[1:], strict=True))
    ]


def _decoded_rows(
    events_dir: Path,
    table: pd.DataFrame,
    mapping: Mapping[str, str],
    exclusions: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    """The trial details (in ``table`` order) and event rows of a run decoded from its
    event documents; a document that cannot be read is an exclusion."""
    details: list[dict[str, Any]] = []
    event_data: list[tuple[Any, ...]] = []
    for row in table[["run_id", "config_name", "source_document"]].itertuples(index=False):
        # the config folder is named as the writer names it (a backslash becomes "_")
        doc_path = events_dir / _config_folder(str(row.config_name)) / str(row.source_document)
        trial_id = trial_id_of(row.run_id, row.config_name, str(row.source_document))
        family = mapping.get(str(row.config_name).lower(), str(row.config_name))
        try:
            doc = load_document(doc_path, validate=False)
        except RetrievalLibError as exc:
            exclusions.append(
                {"run_id": row.run_id, "trial_id": trial_id, "stage": "read", "reason": str(exc)}
            )
            details.append({"trial_id": trial_id, "config_family": family, "_ok": False})
            continue
        details.append(
            {"trial_id": trial_id, "config_family": family, "_ok": True} | document_values(doc)
        )
        event_data.extend(event_rows(doc, trial_id, family))
    return details, pd.DataFrame.from_records(event_data, columns=list(EVENT_COLUMNS))


def _invalid_documents(events_dir: Path) -> list[dict[str, Any]]:
    """Trials a run lost: input entries its normalisation left out and documents its
    evaluation could not load (run summary), and trials whose normalisation failed
    (recorded by :func:`prepare_runs`)."""
    import json

    from retrieval_lib.metrics.summary import SUMMARY_FILENAME

    run_id = events_dir.parent.name if events_dir.name == EVENTS_DIRNAME else events_dir.name
    try:
        summary = json.loads((events_dir / SUMMARY_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary = None
    counts = (summary.get("counts") or {}) if isinstance(summary, dict) else {}
    normalize = (read_record(events_dir) or {}).get("normalize")
    failed = normalize.get("failed_trials") if isinstance(normalize, dict) else None
    rows = [
        (item.get("path"), "discover", f"left out by normalize: {item.get('reason')}")
        for item in counts.get("left_out") or []
    ]
    rows += [
        (str(item.get("document", "")).removesuffix(DOCUMENT_SUFFIX), "evaluate", item.get("error"))
        for item in counts.get("invalid_documents") or []
    ]
    rows += [(item.get("trial"), "normalize", item.get("error")) for item in failed or []]
    return [
        {"run_id": run_id, "trial_id": f"{run_id}/{name}", "stage": stage, "reason": reason}
        for name, stage, reason in rows
    ]

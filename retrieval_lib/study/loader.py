"""Build a study: bring every run up to date, then read them into tidy tables.

:func:`prepare_runs` normalises and evaluates the runs under the given paths that are not
yet evaluated, or whose inputs changed since (a fingerprint of every input file's path,
size and modification time, the task definitions' ground-truth files, the library version
and the cut-offs, kept in the run's completion record
``retrieval_events/completion_record.json``, :mod:`retrieval_lib.completion`); up-to-date
outputs whose files still match the record are reused as they are. :func:`read_evaluated`
reads evaluated runs into the tables of a :class:`~retrieval_lib.study.core.Study`, one
document at a time (memory grows with the number of events, not with the size of the
documents).

Paths given may be raw run folders (or folders of runs) or folders that ``retrieval-lib
evaluate`` already processed (``<out>/<run_id>`` holding ``retrieval_events/``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_lib import __version__
from retrieval_lib.completion import COMPLETION_FILENAME, code_fingerprint, read_record
from retrieval_lib.errors import InputError, RetrievalLibError
from retrieval_lib.events.document import DOCUMENT_SUFFIX, EVENTS_DIRNAME, load_document
from retrieval_lib.metrics.stages import DEFAULT_K, normalize_k
from retrieval_lib.study.families import config_families

__all__ = [
    "FINGERPRINT_FILENAME",
    "PreparedRuns",
    "StudyTables",
    "documents_events",
    "event_rows",
    "input_fingerprint",
    "prepare_runs",
    "read_evaluated",
    "short_tool_name",
    "tasks_fingerprint",
]

#: The study's fingerprint lives in the run's completion record (one file, one mechanism).
FINGERPRINT_FILENAME = COMPLETION_FILENAME
#: Task-definition files that ground truth is read from (the rest of a task folder, such
#: as a repository checkout, does not change the analysis).
_TASK_FILES = ("task.toml", "instruction.md")
_TASK_FOLDERS = ("tests", "solution")

#: Columns of ``Study.events`` (one row per tool call), in order.
EVENT_COLUMNS: tuple[str, ...] = (
    "trial_id",
    "run_id",
    "config_name",
    "config_family",
    "task_name",
    "model",
    "step_index",
    "tool_name",
    "tool",
    "tool_category",
    "is_mcp",
    "is_subagent",
    "is_error",
    "n_targets",
    "target_files",
    "hits_ground_truth",
    "matched_ground_truth_files",
    "first_found_ground_truth_files",
    "elapsed_seconds",
    "cumulative_tokens",
    "attributed_seconds",
    "attributed_tokens",
)
#: Columns read from each document into ``Study.trials`` (beside the metrics table).
DOCUMENT_COLUMNS: tuple[str, ...] = (
    "trace_source",
    "transcript_truncated",
    "has_ground_truth",
    "ground_truth_source",
    "ground_truth_confidence",
    "n_ground_truth_files",
    "ground_truth_files",
    "output_tokens_placeholder",
    "harness_version_source",
)


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


def _code_fingerprint() -> str:
    """A hash of the package's own code (:func:`retrieval_lib.completion.code_fingerprint`)."""
    return code_fingerprint()


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
    digest = hashlib.sha256()
    digest.update(
        f"retrieval_lib {__version__} {_code_fingerprint()}; k={list(normalize_k(k))}\n".encode()
    )
    for rel, size, mtime in _walk_stats(Path(run_dir), skip=EVENTS_DIRNAME):
        digest.update(f"run {rel}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
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
        rows = []
        for path, reason in self.left_out:
            inside = [r for r in runs if Path(path).is_relative_to(r)]
            if not inside:
                rows.append(
                    {"run_id": None, "trial_id": path, "stage": "discover", "reason": reason}
                )
        return rows


def _read_fingerprint(events_dir: Path) -> str | None:
    record = read_record(events_dir)
    inputs = record.get("inputs") if record else None
    value = inputs.get("fingerprint") if isinstance(inputs, dict) else None
    return value if isinstance(value, str) else None


def _is_evaluated(events_dir: Path) -> bool:
    """Evaluated, and (when it has a completion record) completely, with its files
    unchanged since (:func:`retrieval_lib.completion.problem`)."""
    from retrieval_lib.completion import problem
    from retrieval_lib.metrics.summary import SUMMARY_FILENAME, TABLE_BASENAME

    return (
        (events_dir / SUMMARY_FILENAME).is_file()
        and any((events_dir / f"{TABLE_BASENAME}{ext}").is_file() for ext in (".parquet", ".csv"))
        and problem(events_dir) is None
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
) -> PreparedRuns:
    """Normalise and evaluate what is not yet up to date; return every evaluated folder.

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

    Raises
    ------
    InputError
        A path does not exist, or holds neither runs nor evaluated outputs.
    """
    from retrieval_lib.metrics.summary import EvaluateResult, find_events_roots
    from retrieval_lib.normalize import check_tasks_root
    from retrieval_lib.runs import LeftOut, discover_runs

    say = log or (lambda _line: None)
    check_tasks_root(tasks_root)
    prepared = PreparedRuns()
    left_out = LeftOut()
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
            if not _is_evaluated(root):
                from retrieval_lib.completion import check_evaluated

                check_evaluated(root)  # names what is incomplete or changed, if anything
                raise InputError(f"{root} is not evaluated: run `retrieval-lib evaluate {root}`")
            prepared.given.append(str(root))
            prepared.events_dirs.append(root)

    out_root = Path(out) if out is not None else None
    stale: list[tuple[Path, Path, str]] = []
    tasks_digest = (
        tasks_fingerprint(Path(tasks_root)) if tasks_root is not None and raw_runs else None
    )
    for run in sorted(raw_runs):
        events_dir = (out_root / run.name if out_root else run) / EVENTS_DIRNAME
        fingerprint = input_fingerprint(run, _path(tasks_root), k, tasks_digest=tasks_digest)
        if _is_evaluated(events_dir) and _read_fingerprint(events_dir) == fingerprint:
            prepared.reused.append(run.name)
            prepared.events_dirs.append(events_dir)
        else:
            stale.append((run, events_dir, fingerprint))
    if prepared.reused:
        say(f"up to date, reused: {', '.join(prepared.reused)}")
    if stale:
        from retrieval_lib.completion import set_inputs_fingerprint

        report, evaluated = _normalize_and_evaluate(
            [run for run, _, _ in stale], _path(tasks_root), out_root, k, workers, map_fn
        )
        prepared.summary_line = report.summary_line()
        say(prepared.summary_line)
        left_out.update(report.left_out)
        for run, events_dir, fingerprint in stale:
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
            set_inputs_fingerprint(events_dir, fingerprint)
            prepared.normalized.append(run.name)
            prepared.events_dirs.append(events_dir)
    prepared.events_dirs = sorted(set(prepared.events_dirs))
    prepared.left_out = left_out.entries()
    for line in left_out.lines():
        say(line)
    if not prepared.events_dirs:
        raise InputError("no evaluated run to study under " + ", ".join(map(str, paths)))
    return prepared


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


def _path(value: str | os.PathLike[str] | None) -> Path | None:
    return None if value is None else Path(value)


# --------------------------------------------------------------------------- reading


def short_tool_name(tool_name: str) -> str:
    """The tool's name without its MCP server prefix and Sourcegraph ``sg_`` infix.

    Examples
    --------
    >>> short_tool_name("mcp__sourcegraph__sg_keyword_search"), short_tool_name("Read")
    ('keyword_search', 'Read')
    """
    name = str(tool_name)
    if name.startswith("mcp__"):
        name = name.split("__", 2)[-1]
        if name.startswith("sg_"):
            name = name[3:]
    return name


def _group_deltas(values: list[float | None], end: float | None) -> list[float]:
    """Each event's share of the growth of ``values`` until the next larger value.

    Consecutive events with the same value (parallel calls of one message) share the
    growth to the next distinct value equally; the last group grows to ``end`` (NaN when
    unknown or smaller). Unknown values give NaN.
    """
    out = [float("nan")] * len(values)
    i = 0
    n = len(values)
    while i < n:
        value = values[i]
        j = i + 1
        while j < n and values[j] == value:
            j += 1
        if value is not None:
            following = next((values[m] for m in range(j, n) if values[m] is not None), None)
            target = following if following is not None else end
            if target is not None and target >= value:
                share = (float(target) - float(value)) / (j - i)
                for m in range(i, j):
                    out[m] = share
        i = j
    return out


def event_rows(doc: Mapping[str, Any], trial_id: str, family: str) -> list[tuple[Any, ...]]:
    """The ``Study.events`` rows of one document (:data:`EVENT_COLUMNS` order).

    ``first_found_ground_truth_files`` lists the ground-truth files this call surfaced
    first in the trial (failed calls and writes surface nothing); ``attributed_seconds``
    and ``attributed_tokens`` are the growth of the elapsed time and of the running token
    total from this call to the next (parallel calls share it equally; the last call runs
    to the end of the agent's execution and its token total).
    """
    prov = doc["provenance"]
    outcome = doc.get("outcome") or {}
    events = sorted(doc["events"], key=lambda ev: ev["step_index"])
    seconds = _group_deltas(
        [ev.get("elapsed_seconds") for ev in events], outcome.get("agent_execution_seconds")
    )
    tokens = _group_deltas(
        [
            None if ev.get("cumulative_tokens") is None else float(ev["cumulative_tokens"])
            for ev in events
        ],
        None if outcome.get("total_tokens") is None else float(outcome["total_tokens"]),
    )
    seen: set[str] = set()
    rows = []
    for ev, sec, tok in zip(events, seconds, tokens, strict=True):
        matched = list(ev.get("matched_ground_truth_files") or [])
        retrieval = not ev.get("is_error") and ev["tool_category"] != "file_write"
        first = [f for f in matched if f not in seen] if retrieval else []
        seen.update(first)
        rows.append(
            (
                trial_id,
                prov["run_id"],
                prov["config_name"],
                family,
                prov["task_name"],
                prov.get("model"),
                ev["step_index"],
                ev["tool_name"],
                short_tool_name(ev["tool_name"]),
                ev["tool_category"],
                bool(ev["is_mcp"]),
                bool(ev.get("is_subagent", False)),
                bool(ev.get("is_error") or False),
                len(ev["target_files"]),
                tuple(ev["target_files"]),
                bool(ev["hits_ground_truth"]),
                tuple(matched),
                tuple(first),
                ev.get("elapsed_seconds"),
                ev.get("cumulative_tokens"),
                sec,
                tok,
            )
        )
    return rows


def _document_values(doc: Mapping[str, Any]) -> dict[str, Any]:
    coverage = doc["coverage"]
    gt = doc["ground_truth"]
    outcome = doc.get("outcome") or {}
    prov = doc["provenance"]
    return {
        "trace_source": coverage.get("trace_source"),
        "transcript_truncated": bool(coverage.get("transcript_truncated") or False),
        "has_ground_truth": bool(coverage.get("has_ground_truth")),
        "ground_truth_source": gt.get("source"),
        "ground_truth_confidence": gt.get("confidence"),
        "n_ground_truth_files": len(gt.get("files") or []),
        "ground_truth_files": tuple(gt.get("files") or ()),
        "output_tokens_placeholder": bool(outcome.get("output_tokens_placeholder") or False),
        "harness_version_source": prov.get("harness_version_source"),
    }


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
    trials: list[dict[str, Any]] = []
    for position, doc in enumerate(documents):
        prov = doc["provenance"]
        config = str(prov["config_name"])
        family = mapping.get(config.lower(), config)
        trial_id = f"{prov['run_id']}/{config}/{prov['task_name']}/{position}"
        trials.append(
            {
                "trial_id": trial_id,
                "config_family": family,
                "has_ground_truth": bool((doc.get("coverage") or {}).get("has_ground_truth")),
            }
        )
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


def _trial_id(run_id: str, config: str, document: str) -> str:
    return f"{run_id}/{config}/{document.removesuffix(DOCUMENT_SUFFIX)}"


def read_evaluated(
    events_dirs: Sequence[str | os.PathLike[str]],
    config_map: Mapping[str, str] | None = None,
) -> StudyTables:
    """Read evaluated runs into the trials and events tables of a study.

    Every metrics-table row becomes one trial, joined with its event document for the
    coverage, ground-truth and outcome details the table does not carry. A document that
    cannot be read, or a table row without its document, is listed in ``exclusions`` with
    the reason, never dropped silently.

    Raises
    ------
    InputError
        Two folders hold the same run id, or no trial is left.
    """
    from retrieval_lib.stats.impact import find_metrics_tables, read_metrics_table

    mapping = config_families(config_map)
    frames: list[pd.DataFrame] = []
    event_data: list[tuple[Any, ...]] = []
    exclusions: list[dict[str, Any]] = []
    seen_runs: dict[str, Path] = {}
    for raw in events_dirs:
        events_dir = Path(raw)
        table = read_metrics_table(find_metrics_tables(events_dir)[0])
        for run_id in sorted({str(r) for r in table["run_id"].dropna()}):
            if run_id in seen_runs and seen_runs[run_id] != events_dir:
                raise InputError(
                    f"run id {run_id!r} is in both {seen_runs[run_id]} and {events_dir}: "
                    "a study counts each run once"
                )
            seen_runs[run_id] = events_dir
        details: list[dict[str, Any]] = []
        for row in table[["run_id", "config_name", "source_document"]].itertuples(index=False):
            # the config folder is named as the writer names it (a backslash becomes "_")
            doc_path = events_dir / _config_folder(str(row.config_name)) / str(row.source_document)
            trial_id = _trial_id(str(row.run_id), str(row.config_name), str(row.source_document))
            family = mapping.get(str(row.config_name).lower(), str(row.config_name))
            try:
                doc = load_document(doc_path, validate=False)
            except RetrievalLibError as exc:
                exclusions.append(
                    {
                        "run_id": row.run_id,
                        "trial_id": trial_id,
                        "stage": "read",
                        "reason": str(exc),
                    }
                )
                details.append({"trial_id": trial_id, "config_family": family, "_ok": False})
                continue
            details.append(
                {"trial_id": trial_id, "config_family": family, "_ok": True} | _document_values(doc)
            )
            event_data.extend(event_rows(doc, trial_id, family))
        extra = pd.DataFrame(details, index=table.index)
        # a column the metrics table already carries is taken from the table
        extra = extra.drop(columns=[c for c in extra.columns if c in table.columns])
        merged = pd.concat([extra, table], axis=1)
        frames.append(merged[merged["_ok"]].drop(columns="_ok"))
        for _, invalid in _invalid_documents(events_dir).iterrows():
            exclusions.append({str(k): v for k, v in invalid.items()})
    trials = pd.concat(frames, ignore_index=True, sort=False) if frames else pd.DataFrame()
    if trials.empty:
        raise InputError("the study has no readable trial")
    trials = trials.sort_values(
        ["run_id", "config_name", "task_name", "trial_id"], kind="mergesort"
    )
    trials = trials.reset_index(drop=True)
    for column in DOCUMENT_COLUMNS:
        if column not in trials.columns:
            trials[column] = None
    events = pd.DataFrame.from_records(event_data, columns=list(EVENT_COLUMNS))
    events["elapsed_seconds"] = events["elapsed_seconds"].astype("float64")
    events["cumulative_tokens"] = pd.to_numeric(events["cumulative_tokens"]).astype("Float64")
    events["attributed_seconds"] = events["attributed_seconds"].astype("float64")
    events["attributed_tokens"] = events["attributed_tokens"].astype("float64")
    events = events.sort_values(["trial_id", "step_index"], kind="mergesort").reset_index(drop=True)
    return StudyTables(
        trials=trials,
        events=events,
        exclusions=pd.DataFrame(exclusions, columns=["run_id", "trial_id", "stage", "reason"]),
    )


def _invalid_documents(events_dir: Path) -> pd.DataFrame:
    """Trials a run lost: input entries its normalisation left out and documents its
    evaluation could not load (run summary), and trials whose normalisation failed
    (recorded by :func:`prepare_runs`)."""
    import json

    from retrieval_lib.metrics.summary import SUMMARY_FILENAME

    run_id = events_dir.parent.name if events_dir.name == EVENTS_DIRNAME else events_dir.name
    rows: list[dict[str, Any]] = []
    for name, key in ((SUMMARY_FILENAME, "invalid"), (COMPLETION_FILENAME, "failed")):
        try:
            data = json.loads((events_dir / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        if key == "failed":
            data = data.get("normalize")
            if not isinstance(data, dict):
                continue
        if key == "invalid":
            for item in (data.get("counts") or {}).get("left_out") or []:
                rows.append(
                    {
                        "run_id": run_id,
                        "trial_id": f"{run_id}/{item.get('path')}",
                        "stage": "discover",
                        "reason": f"left out by normalize: {item.get('reason')}",
                    }
                )
            for item in (data.get("counts") or {}).get("invalid_documents") or []:
                document = str(item.get("document", "")).removesuffix(DOCUMENT_SUFFIX)
                rows.append(
                    {
                        "run_id": run_id,
                        "trial_id": f"{run_id}/{document}",
                        "stage": "evaluate",
                        "reason": item.get("error"),
                    }
                )
        else:
            for item in data.get("failed_trials") or []:
                rows.append(
                    {
                        "run_id": run_id,
                        "trial_id": f"{run_id}/{item.get('trial')}",
                        "stage": "normalize",
                        "reason": item.get("error"),
                    }
                )
    return pd.DataFrame(rows, columns=["run_id", "trial_id", "stage", "reason"])

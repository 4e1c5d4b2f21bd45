"""Normalisation: from run folders to retrieval-event documents.

This module only orchestrates: trial discovery and ``result.json`` reading live in
:mod:`retrieval_lib.runs`, ground truth in :mod:`retrieval_lib.ground_truth`, trace
parsing in :mod:`retrieval_lib.traces`, event extraction in
:mod:`retrieval_lib.events.build`, and the document format in
:mod:`retrieval_lib.events.document`.

Output goes to ``<run>/retrieval_events/<config>/<task>.retrieval_events.json`` or,
with ``out``, to ``<out>/<run_id>/retrieval_events/<config>/...`` (the same layout, so
``retrieval-lib evaluate <out>/<run_id>`` works alike), plus
``normalize_left_out.json`` there when the walk skipped input entries of the run
(:func:`write_left_out`). Nothing else is written; input artifacts are never modified,
and no output goes through a symlink that leaves the run (or ``out``).

Why one module of this length: one trial's normalisation and the run-level orchestration
(planning, the pool, removing stale documents) share the trial job and its output record.

Examples
--------
>>> from retrieval_lib.normalize import normalize_run  # doctest: +SKIP
>>> report = normalize_run("runs/official/my_run", tasks_root="benchmarks")  # doctest: +SKIP
>>> report.trials, report.degraded  # doctest: +SKIP
(12, 1)
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import stat
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from retrieval_lib import EVENTS_SCHEMA_VERSION, __version__
from retrieval_lib.completion import begin_normalize, finish_normalize
from retrieval_lib.errors import InputError, RetrievalLibError
from retrieval_lib.events.build import build_events, summarize_events
from retrieval_lib.events.document import (
    DOCUMENT_SUFFIX,
    EVENTS_DIRNAME,
    LEFT_OUT_FILENAME,
    METRICS_SUFFIX,
    document_path,
    encode_document,
)
from retrieval_lib.ground_truth import GroundTruth, load_ground_truth_cached
from retrieval_lib.harness import (
    TRAJECTORY_SOURCE,
    resolve_harness_version,
    trajectory_agent_version,
    transcript_source,
)
from retrieval_lib.io import atomic_write_bytes, file_kind, lies_outside, os_reason, parse_iso_time
from retrieval_lib.paths import split_key
from retrieval_lib.runs import (
    LeftOut,
    Listings,
    TaskIndex,
    TrialRef,
    TrialResult,
    canonical_task_name,
    discover_runs,
    discover_trials,
    read_trial_result,
)
from retrieval_lib.traces.atif import parse_atif
from retrieval_lib.traces.merge import merge_traces
from retrieval_lib.traces.model import ParsedTrace
from retrieval_lib.traces.stream_json import parse_stream_json

__all__ = [
    "NormalizeReport",
    "TrialOutput",
    "build_document",
    "check_tasks_root",
    "normalize_paths",
    "normalize_run",
    "normalize_trial",
    "output_root",
]


#: Where a transcript may live inside a trial folder, in order of preference.
TRANSCRIPT_CANDIDATES = ("agent/claude-code.txt", "agent/command-1/stdout.txt")
TRAJECTORY_FILE = "agent/trajectory.json"


@dataclass
class TrialOutput:
    """What normalising one trial produced (small: safe to send between processes)."""

    trial_dir: str
    path: str | None
    task_name: str
    config_name: str
    n_events: int
    trace_bytes: int
    degraded_reason: str | None
    error: str | None = None
    #: No usable trace (degraded mode): neither trajectory nor transcript could be read.
    no_trace: bool = False
    #: The task has no file-level ground truth (a document is still written).
    no_ground_truth: bool = False
    #: Bytes of the document written (``None``: none written), for the completion record.
    document_bytes: int | None = None


@dataclass
class NormalizeReport:
    """Summary of a normalisation over one or more runs.

    Counts only, plus the trials that failed: what the report holds does not grow with
    the number of trials that succeeded (a run of 100,000 trials is summarised in a few
    hundred bytes). Add each :class:`TrialOutput` with :meth:`add`.
    """

    runs: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: Documents of an earlier pass that no longer correspond to a trial, deleted.
    removed_stale: int = 0
    trials: int = 0
    #: Trials that produced a document (every trial that did not fail).
    documents: int = 0
    events: int = 0
    trace_bytes: int = 0
    #: Documents in degraded mode: no usable trace.
    degraded: int = 0
    #: Documents of tasks without file-level ground truth (counted apart from degraded).
    without_ground_truth: int = 0
    #: Documents whose coverage lists any gap (``degraded_reason`` set).
    with_gaps: int = 0
    #: The trials that failed (no document), sorted by trial folder once the pass ends.
    failures: list[TrialOutput] = field(default_factory=list)
    #: Documents written per run folder (as given in :attr:`runs`).
    documents_by_run: dict[str, int] = field(default_factory=dict)
    #: Input entries the folder walks skipped, ``(path, reason)`` sorted by path: a
    #: symlink loop, a folder that cannot be listed, a trial-level ``result.json`` that
    #: is not a regular file. Never dropped silently: each is a warning line of the CLI
    #: and, per run, a row of ``normalize_left_out.json`` (see :data:`LEFT_OUT_FILENAME`).
    left_out: list[tuple[str, str]] = field(default_factory=list)

    def add(self, output: TrialOutput, run: str | None = None) -> None:
        """Count one trial's output (``run``: the run folder it belongs to)."""
        self.trials += 1
        if output.error:
            self.failures.append(output)
            return
        self.documents += 1
        self.events += output.n_events
        self.trace_bytes += output.trace_bytes
        self.degraded += bool(output.no_trace)
        self.without_ground_truth += bool(output.no_ground_truth)
        self.with_gaps += bool(output.degraded_reason)
        if run is not None:
            self.documents_by_run[run] = self.documents_by_run.get(run, 0) + 1

    def merge(self, other: NormalizeReport) -> None:
        """Add the counts of a report on other runs (e.g. one run done elsewhere)."""
        for counter in fields(self):
            if counter.type == "int":  # every count; ``seconds`` is the caller's
                setattr(
                    self, counter.name, getattr(self, counter.name) + getattr(other, counter.name)
                )
        self.failures.extend(other.failures)
        self.documents_by_run.update(other.documents_by_run)
        self.left_out = sorted(dict([*self.left_out, *other.left_out]).items())

    @property
    def failed(self) -> int:
        return len(self.failures)

    def counts_line(self) -> str:
        """The trial counts, e.g. ``6 trials: 6 documents (1 degraded: no trace; 1 without
        ground truth), 0 failed``.

        Degraded trials (no usable trace) and trials without file-level ground truth are
        counted apart; a trial lacking both is counted in both.
        """
        return (
            f"{self.trials} trials: {self.documents} documents ({self.degraded} degraded: "
            f"no trace; {self.without_ground_truth} without ground truth), {self.failed} failed"
        )

    def summary_line(self) -> str:
        mb = self.trace_bytes / 1e6
        rate = mb / self.seconds if self.seconds > 0 else float("nan")
        return (
            f"normalized {len(self.runs)} run(s), {self.counts_line()}; {self.events} events"
            + (f"; {self.removed_stale} stale document(s) removed" if self.removed_stale else "")
            + (f"; {len(self.left_out)} input entries left out" if self.left_out else "")
            + f"; {mb:.1f} MB of trace in "
            f"{self.seconds:.2f} s ({rate:.1f} MB/s)"
        )


def _trace_size(trial_dir: Path, relative: str, reasons: list[str]) -> int | None:
    """The size of ``trial_dir/relative`` when it is a regular file to parse, else ``None``.

    One that exists but is not (a FIFO, a device, a folder, a symlink loop or to nothing)
    is named in ``reasons``, never taken for a missing trace in silence.
    """
    path = f"{trial_dir}/{relative}"
    try:
        found = os.lstat(path)  # one system call for the usual cases: a file, or nothing
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        found = None  # the stat below says why
    try:
        if found is None or stat.S_ISLNK(found.st_mode):
            found = os.stat(path)
    except FileNotFoundError:
        reasons.append(f"{relative} is a symlink to nothing; not read")
        return None
    except (OSError, ValueError) as exc:
        reasons.append(f"{relative} cannot be read ({os_reason(exc)})")
        return None
    if stat.S_ISREG(found.st_mode):
        return found.st_size
    if not stat.S_ISDIR(found.st_mode):  # a folder named like a trace is no trace
        reasons.append(f"{relative} is {file_kind(found.st_mode)}, not a regular file; not read")
    return None


def _load_trace(trial_dir: Path) -> tuple[ParsedTrace | None, dict[str, Any], int]:
    """Parse the trial's traces; return the (merged) trace, coverage facts and bytes read."""
    reasons: list[str] = []
    trajectory: ParsedTrace | None = None
    transcript: ParsedTrace | None = None
    trace_bytes = 0
    truncated = False
    versions: list[tuple[str | None, str]] = []  # (harness version, where), trajectory first

    named: list[str] = []  # trace files there but not regular files
    traj_size = _trace_size(trial_dir, TRAJECTORY_FILE, named)
    if traj_size is not None:
        trace_bytes += traj_size
        traj_path = trial_dir / TRAJECTORY_FILE
        try:
            trajectory = parse_atif(traj_path, within=trial_dir)
        except RetrievalLibError as exc:
            reasons.append(f"trajectory.json unusable: {exc}")
            # the agent block may still name the version (e.g. its steps are what broke)
            versions.append((trajectory_agent_version(traj_path, trial_dir), TRAJECTORY_SOURCE))
        else:
            reasons.extend(f"trajectory: {w}" for w in trajectory.warnings)
            versions.append((trajectory.harness_version, TRAJECTORY_SOURCE))

    transcript_path = None
    for rel in TRANSCRIPT_CANDIDATES:
        size = _trace_size(trial_dir, rel, named)
        if size is not None:
            transcript_path = trial_dir / rel
            trace_bytes += size
            break
    reasons.extend(named)
    if transcript_path is not None:
        try:
            transcript = parse_stream_json(transcript_path, within=trial_dir)
        except RetrievalLibError as exc:
            reasons.append(f"{rel} unusable: {exc}")
        else:
            truncated = transcript.truncated
            reasons.extend(f"transcript ({rel}): {w}" for w in transcript.warnings)
            versions.append((transcript.harness_version, transcript_source(rel)))

    trace_state = "usable"
    if trajectory is None and transcript is None:
        usable_files = traj_size is not None or transcript_path is not None or bool(named)
        trace_state = "unusable" if usable_files else "absent"
        reasons.insert(
            0,
            "no usable trace"
            if usable_files
            else "no trace: neither agent/trajectory.json nor agent/claude-code.txt "
            "(or agent/command-1/stdout.txt) exists",
        )
        trace = None
    else:
        trace = merge_traces(trajectory, transcript)
        if trajectory is not None and transcript is not None:
            # The per-trace warnings are already listed; add what the join itself noticed.
            reasons.extend(
                f"merge: {w}"
                for w in trace.warnings
                if not w.startswith(("trajectory:", "transcript:"))
            )

    coverage = {
        "has_trajectory": trajectory is not None,
        "has_transcript": transcript is not None,
        "trace_source": trace.source if trace is not None else None,
        "transcript_truncated": truncated,
        "reasons": reasons,
        "trace_versions": versions,
        "trace_state": trace_state,
    }
    return trace, coverage, trace_bytes


def _outcome(result: TrialResult, trace: ParsedTrace | None) -> dict[str, Any]:
    totals = trace.totals if trace is not None else None
    if totals is not None and totals.total_tokens is not None:
        tokens = {
            "input_tokens": totals.input_tokens,
            "output_tokens": totals.output_tokens,
            "cache_read_tokens": totals.cache_read_tokens,
            "cache_creation_tokens": totals.cache_creation_tokens,
            "total_tokens": totals.total_tokens,
            "tokens_source": totals.source,
            "output_tokens_placeholder": totals.output_tokens_placeholder,
            "output_tokens_note": totals.output_tokens_note,
        }
    elif result.n_input_tokens is not None or result.n_output_tokens is not None:
        # result.json's n_input_tokens already includes the cached tokens (n_cache_tokens).
        total = (result.n_input_tokens or 0) + (result.n_output_tokens or 0)
        tokens = {
            "input_tokens": result.n_input_tokens,
            "output_tokens": result.n_output_tokens,
            "cache_read_tokens": result.n_cache_tokens,
            "cache_creation_tokens": None,
            "total_tokens": total,
            "tokens_source": "result.json.agent_result",
            # Harbor fills these from the trace's own per-step sums, which can be stream
            # placeholders; without a usable trace there is nothing to check them against.
            "output_tokens_placeholder": None,
            "output_tokens_note": None
            if result.n_output_tokens is None
            else "from result.json without a usable trace: whether the count is a stream "
            "placeholder cannot be checked",
        }
    else:
        tokens = {
            "input_tokens": None,
            "output_tokens": None,
            "cache_read_tokens": None,
            "cache_creation_tokens": None,
            "total_tokens": None,
            "tokens_source": None,
            "output_tokens_placeholder": None,
            "output_tokens_note": None,
        }
    if totals is not None and totals.cost_usd is not None:
        cost, cost_source = totals.cost_usd, totals.source
    elif result.cost_usd is not None:
        cost, cost_source = result.cost_usd, "result.json.agent_result"
    else:
        cost, cost_source = None, None
    return {
        "reward": result.reward,
        "passed": result.passed,
        "exception_type": result.exception_type,
        "errored": bool(result.errored),
        "timed_out": bool(result.timed_out),
        "agent_execution_seconds": result.agent_execution_seconds,
        **tokens,
        "cost_usd": cost,
        "cost_source": cost_source,
        "started_at": result.started_at,
    }


def build_document(
    trial: TrialRef,
    result: TrialResult,
    ground_truth: GroundTruth,
    benchmark: str | None,
    *,
    is_latest_trial: bool = True,
    trials_for_pair: int = 1,
) -> tuple[dict[str, Any], int]:
    """Build the document of one trial; return it and the number of trace bytes read."""
    trace, coverage, trace_bytes = _load_trace(trial.trial_dir)
    reasons: list[str] = list(coverage.pop("reasons"))
    harness = resolve_harness_version(
        trial.trial_dir,
        result_version=result.harness_version,
        trace_versions=coverage.pop("trace_versions"),
        trace_state=coverage.pop("trace_state"),
    )
    reasons.extend(harness.warnings)
    reasons.extend(f"result.json: {w}" for w in result.warnings)
    reasons.extend(f"ground truth: {w}" for w in ground_truth.warnings)
    if not ground_truth.task_dirs:
        reasons.append(f"no task definition found for task {result.task_name!r}")
    elif not ground_truth.files:
        reasons.append("no file-level ground truth in the task definition")

    # Repo folders under /workspace are recognised only when the ground truth names two
    # or more repos: a single-repo checkout sits directly at /workspace, and treating its
    # first folder as a repo name would break matches (django/contrib/... is a path there).
    gt_repos = sorted({repo for repo, _ in (split_key(k) for k in ground_truth.files) if repo})
    workspace_repos = gt_repos if len(gt_repos) >= 2 else []
    started = result.agent_execution_started_at or (trace.started_at if trace else None)
    events = (
        build_events(
            trace,
            ground_truth,
            agent_started_at=started,
            workspace_repos=workspace_repos,
            warnings=reasons,
        )
        if trace is not None
        else []
    )

    model = result.model or (trace.model if trace else None)
    trial_text, run_prefix = str(trial.trial_dir), f"{trial.run_dir}/"  # relative_to is slow
    doc: dict[str, Any] = {
        "schema_version": EVENTS_SCHEMA_VERSION,
        "generator": {"name": "retrieval_lib", "version": __version__},
        "provenance": {
            "run_id": trial.run_id,
            "batch_timestamp": trial.batch_timestamp,
            "task_name": result.task_name,
            "raw_task_name": result.raw_task_name,
            "trial_name": result.trial_name,
            "trial_path": trial_text[len(run_prefix) :]
            if trial_text.startswith(run_prefix)
            else trial.trial_dir.relative_to(trial.run_dir).as_posix(),
            "config_name": trial.config_name,
            "benchmark": benchmark,
            "model": model,
            "harness_version": harness.version,
            "harness_version_source": harness.source,
            "harness_version_unknown_reason": harness.unknown_reason,
            "is_latest_trial": is_latest_trial,
            "trials_for_pair": trials_for_pair,
        },
        "coverage": {
            **coverage,
            "has_ground_truth": bool(ground_truth.files),
            "has_chunk_ground_truth": bool(ground_truth.chunks),
            "degraded_reason": "; ".join(reasons) if reasons else None,
            "degraded_reasons": reasons,
        },
        "ground_truth": ground_truth.to_dict(),
        "events": events,
        "outcome": _outcome(result, trace),
        "summary": summarize_events(events, ground_truth.files),
    }
    return doc, trace_bytes


def _trial_suffixes(trials: Sequence[TrialRef]) -> list[str]:
    """File-name suffixes of the trials of one (config, task) pair, all distinct.

    The trial id (``<task>__<id>``) names a trial; where two trials share it (the same
    folder name under two batch timestamps or jobs), the batch timestamp or job name
    goes in front, and as a last resort the position.
    """
    ids = [t.trial_dir.name.rsplit("__", 1)[-1] for t in trials]
    suffixes = [
        f"{t.batch_timestamp or t.job_name or t.trial_dir.parent.name}__{trial_id}"
        if ids.count(trial_id) > 1
        else trial_id
        for t, trial_id in zip(trials, ids, strict=True)
    ]
    if len(set(suffixes)) < len(suffixes):
        suffixes = [f"{s}__{i}" for i, s in enumerate(suffixes)]
    return suffixes


def _normalize_one(
    trial: TrialRef,
    result: TrialResult,
    tasks_root: str | None,
    out_root: str,
    is_latest: bool,
    n_trials: int,
    suffix: str | None,
    pass_id: Any = None,
) -> TrialOutput:
    index = _task_index(tasks_root)
    # The cyclic collector is paused during the trial: its tens of thousands of decoded
    # trace containers live until it ends (then freed by reference counting, no cycles),
    # so collections meanwhile are wasted, a tenth of a trial's CPU (benchmarks/README.md).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        task_dirs, benchmark = index.lookup(result.task_name) if index else ([], None)
        ground_truth = load_ground_truth_cached(
            task_dirs, tasks_root=index.root if index else None, pass_id=pass_id
        )
        doc, trace_bytes = build_document(
            trial,
            result,
            ground_truth,
            benchmark,
            is_latest_trial=is_latest,
            trials_for_pair=n_trials,
        )
        target = document_path(out_root, trial.config_name, result.task_name, suffix)
        data = encode_document(doc, where=str(target))
        atomic_write_bytes(target, data)
        coverage = doc["coverage"]
        return TrialOutput(
            trial_dir=str(trial.trial_dir),
            path=str(target),
            task_name=result.task_name,
            config_name=trial.config_name,
            n_events=len(doc["events"]),
            trace_bytes=trace_bytes,
            degraded_reason=coverage["degraded_reason"],
            no_trace=coverage["trace_source"] is None,
            no_ground_truth=not coverage["has_ground_truth"],
            document_bytes=len(data),
        )
    except Exception as exc:  # one broken trial must not stop the run: record it, go on
        error = str(exc) if isinstance(exc, RetrievalLibError) else f"{type(exc).__name__}: {exc}"
        return TrialOutput(
            str(trial.trial_dir), None, result.task_name, trial.config_name, 0, 0, None, error
        )
    finally:
        if was_enabled:
            gc.enable()


_TASK_INDEX_CACHE: dict[str, TaskIndex] = {}


def _task_index(tasks_root: str | None) -> TaskIndex | None:
    """One index per worker process and root (the task tree is read-only input)."""
    if tasks_root is None:
        return None
    index = _TASK_INDEX_CACHE.get(tasks_root)
    if index is None:
        index = _TASK_INDEX_CACHE[tasks_root] = TaskIndex(Path(tasks_root))
    return index


def _normalize_star(args: tuple[Any, ...]) -> TrialOutput:
    return _normalize_one(*args)


def _read_result(trial: TrialRef) -> TrialResult:
    """:func:`read_trial_result`, and if it ever raises, a result named after the trial
    folder that says why: one trial's ``result.json`` never stops the other trials."""
    try:
        return read_trial_result(trial.trial_dir)
    except Exception as exc:  # a defect of ours on a hostile value: contained to this trial
        name = trial.trial_dir.name
        task = name.rsplit("__", 1)[0] if "__" in name else name
        return TrialResult(
            raw_task_name=task,
            task_name=canonical_task_name(task),
            trial_name=name,
            has_result_json=False,
            warnings=[f"result.json could not be read ({type(exc).__name__}: {exc})"],
        )


def _plan(
    trials: Sequence[TrialRef],
) -> list[tuple[TrialRef, TrialResult, bool, int, str | None]]:
    """Read every result.json, group trials by (config, task), mark the latest of each.

    Returns ``(trial, result, is_latest, trials_for_pair, file_suffix)`` per trial; the
    suffix is ``None`` for a pair's only trial (its document keeps the plain name).
    """
    results = [_read_result(t) for t in trials]
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, (trial, result) in enumerate(zip(trials, results, strict=True)):
        groups[(trial.config_name, result.task_name)].append(i)
    pairs: list[tuple[bool, int, str | None]] = [(True, 1, None)] * len(trials)
    for members in groups.values():
        if len(members) == 1:
            continue

        # Latest by start time, then trial folder name: deterministic even without times.
        def key(i: int) -> tuple[float, str]:
            moment = parse_iso_time(results[i].started_at)
            return (moment.timestamp() if moment else float("-inf"), trials[i].trial_dir.name)

        latest = max(members, key=key)
        for i, name in zip(members, _trial_suffixes([trials[i] for i in members]), strict=True):
            pairs[i] = (i == latest, len(members), name)
    return [(t, r, *pair) for t, r, pair in zip(trials, results, pairs, strict=True)]


def normalize_run(
    run_dir: str | Path,
    tasks_root: str | Path | None,
    *,
    out: str | Path | None = None,
    workers: int = 1,
    progress: bool = False,
) -> NormalizeReport:
    """Normalise every trial of one run folder.

    Parameters
    ----------
    run_dir
        A run folder (batch or archived job layout).
    tasks_root
        Root of the task definitions (``benchmarks/``); ``None`` means no ground truth.
    out
        Output root; default: inside the run folder (``<run>/retrieval_events``).
    workers
        Worker processes (1 = in process).
    progress
        Show a progress bar on stderr.
    """
    return normalize_paths([run_dir], tasks_root, out=out, workers=workers, progress=progress)


def output_root(run_dir: Path, out: str | Path | None) -> Path:
    """A run's output folder; refused when a symlink takes it out of the run (or ``out``).

    Raises
    ------
    InputError
        ``<run>/retrieval_events`` (or ``<out>/<run_id>/retrieval_events``, or a folder
        on the way) is a symlink to a place outside the run folder (or ``out``): writing
        there, and sweeping stale documents there, would touch files that are not ours.

    Examples
    --------
    >>> import tempfile
    >>> run = Path(tempfile.mkdtemp()) / "run1"
    >>> output_root(run, None) == run / "retrieval_events"
    True
    """
    if out is None:
        root = run_dir / EVENTS_DIRNAME
        boundary = run_dir
    else:
        from retrieval_lib.io import safe_component

        root = Path(out) / safe_component(run_dir.name) / EVENTS_DIRNAME
        boundary = Path(out)
    try:
        outside = lies_outside(root, boundary)
    except (OSError, ValueError, RuntimeError) as exc:
        raise InputError(f"output folder {root} cannot be checked: {exc}") from None
    if outside:
        raise InputError(
            f"output folder {root} is a symlink to {os.path.realpath(root)}, outside "
            f"{'the run folder' if out is None else '--out'} {boundary}: refusing to write "
            "or remove documents through it; remove the link (or use another --out)"
        )
    if out is None:
        return root
    from retrieval_lib.io import safe_join

    return safe_join(out, run_dir.name, EVENTS_DIRNAME)


def check_tasks_root(tasks_root: str | os.PathLike[str] | None) -> None:
    """Refuse a ``--tasks-root`` that is not a folder (``None``: no ground truth).

    Examples
    --------
    >>> check_tasks_root(None)
    >>> check_tasks_root("/no/such/folder")
    Traceback (most recent call last):
    ...
    retrieval_lib.errors.InputError: --tasks-root /no/such/folder is not a folder
    """
    if tasks_root is not None and not Path(tasks_root).is_dir():
        raise InputError(f"--tasks-root {tasks_root} is not a folder")


def normalize_paths(
    paths: Iterable[str | Path],
    tasks_root: str | Path | None,
    *,
    out: str | Path | None = None,
    workers: int = 1,
    progress: bool = False,
    map_fn: Callable[..., Iterable[tuple[Any, TrialOutput]]] | None = None,
    on_run_done: Callable[[str, Path, int], Any] | None = None,
) -> NormalizeReport:
    """Normalise every run found under ``paths`` (run folders or folders of runs).

    Runs are planned one at a time (their ``result.json`` files read) as the workers
    need trials, and each run's stale documents are removed as soon as its last trial is
    back, so memory holds the trials in flight and the report's counts, not every trial.

    ``map_fn(fn, jobs)``, when given, runs the trials instead of ``workers`` processes:
    it draws jobs from the iterator ``jobs`` as it needs them and yields ``(job,
    fn(job))`` for each, in any order (e.g. on a Dask cluster, see
    :mod:`retrieval_lib.distributed`). ``on_run_done(run, out_root, documents)`` is
    called as each run is complete (its stale documents removed), e.g. to evaluate it
    while the next runs are normalised.
    """
    start = time.perf_counter()
    check_tasks_root(tasks_root)
    left_out = LeftOut()
    listings: Listings = {}  # made while finding the runs, reused once to find their trials
    runs = find_input_runs(paths, out, left_out, listings)
    report = NormalizeReport(runs=[str(r) for r in runs])
    root = str(Path(tasks_root).resolve()) if tasks_root is not None else None
    if root is not None:
        # the index the trials use (built once here; forked workers inherit it): a suite
        # or task folder it had to skip is named with the run's own entries
        index = _task_index(root)
        if index is not None:
            left_out.update(index.left_out.entries())

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="trial", file=sys.stderr, leave=False)
    tracker = _RunTracker(report, bar, on_run_done, left_out, listings)
    jobs = tracker.jobs(runs, root, out)
    with contextlib.ExitStack() as stack:
        if bar is not None:
            stack.callback(bar.close)
        if map_fn is not None:
            done = map_fn(_normalize_star, jobs)
        else:
            from retrieval_lib.parallel import pool_mapper

            head = list(itertools.islice(jobs, 2))  # a single trial runs in process
            mapper = stack.enter_context(pool_mapper(workers if len(head) > 1 else 1))
            done = mapper.imap_unordered(_normalize_star, itertools.chain(head, jobs))
        for job, output in done:
            tracker.done(job, output)
    report.failures.sort(key=lambda o: o.trial_dir)
    report.left_out = left_out.entries()
    report.seconds = time.perf_counter() - start
    return report


class _RunTracker:
    """Plans the runs lazily into jobs and, as outputs come back, counts them and
    removes a run's stale documents once its last trial is done."""

    def __init__(
        self,
        report: NormalizeReport,
        bar: Any = None,
        on_run_done: Callable[[str, Path, int], Any] | None = None,
        left_out: LeftOut | None = None,
        listings: Listings | None = None,
    ):
        self.report = report
        self.bar = bar
        self.on_run_done = on_run_done
        self.left_out = left_out if left_out is not None else LeftOut()
        self.listings = listings
        # per output root (one per run): run folder, trials not back yet, documents written
        # (path: bytes)
        self.open: dict[str, tuple[str, list[int], dict[str, int | None]]] = {}
        self.pass_id = os.urandom(8)  # this pass's trials check a task's ground truth once

    def jobs(
        self, runs: Sequence[Path], tasks_root: str | None, out: str | Path | None
    ) -> Iterator[tuple[Any, ...]]:
        for run_dir in runs:
            out_root = output_root(run_dir, out)
            plan = _plan(discover_trials(run_dir, self.left_out, self.listings))
            key = str(out_root)
            # before any document is written: the run is incomplete until _close
            begin_normalize(out_root, run=run_dir, tasks_root=tasks_root)
            self.open[key] = (str(run_dir), [len(plan)], {})
            if self.bar is not None:
                self.bar.total += len(plan)
                self.bar.refresh()
            if not plan:
                self._close(key)
            for trial, result, is_latest, n, suffix in plan:
                yield (trial, result, tasks_root, key, is_latest, n, suffix, self.pass_id)

    def done(self, job: tuple[Any, ...], output: TrialOutput) -> None:
        key = job[3]
        run, remaining, written = self.open[key]
        self.report.add(output, run)
        if output.path:
            written[output.path] = output.document_bytes  # resolved already (document_path)
        remaining[0] -= 1
        if self.bar is not None:
            self.bar.update()
        if remaining[0] == 0:
            self._close(key)

    def _close(self, key: str) -> None:
        run, _, written = self.open.pop(key)
        self.report.removed_stale += _remove_stale_documents([Path(key)], written)
        write_left_out(Path(key), Path(run), self.left_out.entries(under=run))
        run_path = Path(run).resolve()
        failed = [
            {"trial": os.path.relpath(o.trial_dir, run_path), "error": o.error}
            for o in self.report.failures
            if Path(o.trial_dir).resolve().is_relative_to(run_path)
        ]
        # last: the record says the run's documents are complete, and which they are
        finish_normalize(Path(key), written, failed_trials=failed)
        if self.on_run_done is not None:
            self.on_run_done(run, Path(key), self.report.documents_by_run.get(run, 0))


def find_input_runs(
    paths: Iterable[str | Path],
    out: str | Path | None,
    left_out: LeftOut | None = None,
    listings: Listings | None = None,
) -> list[Path]:
    """The run folders under ``paths``, resolved (so that "." has a name: the run id is the
    run folder's name). Entries the search skipped are recorded in ``left_out``; the
    folders it listed in ``listings`` (see :func:`~retrieval_lib.runs.discover_runs`).

    Raises
    ------
    InputError
        No run folder with trials is found (naming the entries left out, if any), (with
        ``out``) two runs share a run id and would write to the same output folder, or a
        run's output folder is a symlink that leaves the run (or ``out``).
    """
    paths = list(paths)
    found = left_out if left_out is not None else LeftOut()
    runs = discover_runs([Path(p).resolve() for p in paths], found, listings)
    if not runs:
        skipped = "".join(f"; left out: {p}: {r}" for p, r in found.entries()[:5])
        raise InputError(
            "no run folders with trials found under " + ", ".join(map(str, paths)) + skipped
        )
    if out is not None:
        _refuse_colliding_run_ids(runs)
    for run in runs:
        output_root(run, out)  # refuses an output folder that a symlink takes elsewhere
    return runs


def write_left_out(out_root: Path, run_dir: Path, entries: Sequence[tuple[str, str]]) -> None:
    """Record the entries of one run that normalisation left out, paths relative to the run.

    ``<out_root>/normalize_left_out.json`` holds ``{"left_out": [{"path", "reason"}]}``;
    ``evaluate`` copies it into the run summary (``counts.left_out``). With nothing left
    out the file is removed, so an old list never outlives its cause.
    """
    from retrieval_lib.io import atomic_write_json

    target = out_root / LEFT_OUT_FILENAME
    if not entries:
        if target.is_symlink() or target.is_file():
            target.unlink()
        return
    rows = [
        {"path": os.path.relpath(path, run_dir) if path != str(run_dir) else ".", "reason": why}
        for path, why in entries
    ]
    atomic_write_json(target, {"left_out": rows})


def _refuse_colliding_run_ids(runs: Sequence[Path]) -> None:
    """Two runs with one folder name would share ``<out>/<run_id>``: refuse, never mix."""
    by_name: dict[str, list[Path]] = defaultdict(list)
    for run in runs:
        by_name[run.name].append(run)
    clashes = {name: found for name, found in by_name.items() if len(found) > 1}
    if clashes:
        name, found = sorted(clashes.items())[0]
        raise InputError(
            f"runs {', '.join(map(str, found))} share the run id {name!r} and would write to "
            "the same --out folder; normalise them separately (each with its own --out) or "
            "without --out"
        )


def _raise_unless_permission(error: OSError) -> None:
    if not isinstance(error, PermissionError):
        raise error


def _remove_stale_documents(out_roots: Sequence[Path], written: Collection[str]) -> int:
    """Delete documents (and their metrics files) a previous pass left in our output folders.

    A (task, config) pair that gained a trial is written as ``<task>__<id>`` files; the old
    ``<task>`` file would otherwise be counted as one more trial. Only files with our
    suffixes inside ``retrieval_events/`` output roots are touched. ``written`` holds the
    resolved paths of this pass's documents (:func:`document_path` resolves; no folder
    below a root may be a link, so resolving the root resolves every path found in it).
    """
    removed = 0
    for root in out_roots:
        if not root.is_dir() or lies_outside(root, root.parent):
            continue  # never sweep through a link out (find_input_runs refuses those runs)
        # symlinked folders are not entered; an unreadable one is skipped, as rglob did
        for folder, dirs, files in os.walk(root.resolve(), onerror=_raise_unless_permission):
            for name in [*dirs, *files]:
                path = os.path.join(folder, name)
                if name.endswith(DOCUMENT_SUFFIX) and path not in written:
                    Path(path).unlink(missing_ok=True)
                    Path(path[: -len(DOCUMENT_SUFFIX)] + METRICS_SUFFIX).unlink(missing_ok=True)
                    removed += 1
    return removed


def normalize_trial(
    trial_dir: str | Path,
    tasks_root: str | Path | None,
    *,
    run_dir: str | Path | None = None,
    config_name: str | None = None,
) -> dict[str, Any]:
    """Normalise one trial folder and return its document (nothing is written).

    ``run_dir`` defaults to the folder three levels up (true of both layouts) and
    ``config_name`` to the folder under the run.
    """
    trial_path = Path(trial_dir).resolve()
    if not trial_path.is_dir():
        raise InputError(f"no such trial folder: {trial_path}")
    # Both layouts put the trial three levels below its run folder:
    # <run>/<config>/<batch timestamp>/<trial> and <run>/<baseline|mcp>/<job>/<trial>.
    run_path = Path(run_dir).resolve() if run_dir is not None else trial_path.parents[2]
    trial = next(
        (t for t in discover_trials(run_path) if t.trial_dir.resolve() == trial_path), None
    )
    if trial is None:
        raise InputError(f"{trial_path} is not a trial folder of run {run_path}")
    if config_name is not None:
        trial = replace(trial, config_name=config_name)
    result = read_trial_result(trial.trial_dir)
    index = TaskIndex(Path(tasks_root)) if tasks_root is not None else None
    task_dirs, benchmark = index.lookup(result.task_name) if index else ([], None)
    ground_truth = load_ground_truth_cached(task_dirs, tasks_root=index.root if index else None)
    doc, _ = build_document(trial, result, ground_truth, benchmark)
    return doc


def default_workers() -> int:
    """Worker processes used by the CLI when ``--workers`` is not given."""
    return max(1, min(4, os.cpu_count() or 1))

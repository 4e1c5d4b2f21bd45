"""Scale-out on Dask: normalise and evaluate trials on a Dask cluster.

Optional (the ``[dask]`` extra); nothing here imports dask until a client is asked for,
so the rest of the package and the CLI never load it unless ``--scheduler`` or
``--dask-workers`` is given.

How work is distributed
-----------------------
The driver plans the work as without Dask (trial discovery, ``result.json`` reading,
the latest trial of each pair, file names), one run at a time as the cluster needs
trials, and sends each worker a *batch of trials*: per trial a few hundred bytes of
:class:`~retrieval_lib.runs.TrialRef` / ``TrialResult`` and the output path. The worker
reads the trace from the shared filesystem, builds the document and writes it atomically
under ``--out`` itself; only a :class:`~retrieval_lib.normalize.TrialOutput` (counts,
path, error) comes back, is counted and dropped. At most :data:`TASKS_PER_WORKER` tasks
per worker are in flight, so the driver (and a LocalCluster's scheduler, which lives in
its process) holds what is in flight, not every trial.

Evaluation: a run of at most :data:`EVALUATE_BATCH` documents is one task that calls
:func:`~retrieval_lib.metrics.summary.evaluate_run` on the worker; a larger run is split
into batches whose tasks write the metrics files and keep each document's
:func:`~retrieval_lib.metrics.summary.summary_record` (about 3 KB) on the worker, and one
last task receives them worker to worker and writes the run summary and the metrics
tables, byte for byte what the single-process path writes. The driver gets counts and
paths. For a study, each run is evaluated as soon as its last trial is normalised
(:func:`normalize_and_evaluate_dask`).

Faults: every task only writes its own files, atomically and idempotently (the same
input gives the same bytes), so a task that Dask reruns after its worker died neither
loses nor duplicates a document; temporary files a killed worker left half-written are
removed at the end. A trial that fails inside a task is reported as today (its
``TrialOutput.error``); a task that Dask gives up on (e.g. ``KilledWorker`` after its
worker died ``distributed.scheduler.allowed-failures`` times) marks its trials failed
with that cause, and the other tasks finish.

Examples
--------
>>> from retrieval_lib.distributed import DaskSpec, dask_mapper  # doctest: +SKIP
>>> with dask_mapper(DaskSpec(workers=2)) as map_fn:  # doctest: +SKIP
...     report = normalize_dask(["runs/"], "benchmarks", out="out", map_fn=map_fn)
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_lib.parallel import run_chunk

__all__ = [
    "DaskMapper",
    "DaskSpec",
    "RunEvaluation",
    "dask_client",
    "dask_mapper",
    "evaluate_dask",
    "normalize_dask",
    "remove_orphaned_temporaries",
]

#: Trials per task unless told: enough to amortise the scheduler's per-task cost
#: (about 1 ms against ~4 ms per trial), few enough that a rerun after a lost worker is
#: cheap and the last tasks of a run end together.
MAX_BATCH = 32
#: Tasks in flight per worker: enough to hide the round trip to the scheduler, few
#: enough that the driver and the scheduler hold almost nothing.
TASKS_PER_WORKER = 4
#: Seconds between two counts of the cluster's workers (the window follows them).
WORKER_RECOUNT_SECONDS = 2.0
#: Documents per evaluation task unless told: a run of up to this many documents is
#: evaluated whole by one task (``evaluate_run`` on a worker); a larger one in batches
#: of this many, plus one task writing its summary.
EVALUATE_BATCH = 128
#: Dask settings of a LocalCluster we start (its scheduler lives in this process, its
#: workers get them from their nannies). The statistical profiler (a stack sample every
#: 10 ms) cost ~9% of a worker's CPU on this work, and nobody looks at its output (no
#: dashboard); the event-loop health tick (20 ms) and the system monitor (500 ms) kept an
#: idle worker at 1.4% of a core and the driver at 2.0%, 0.6% and 0.8% with these.
CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


@dataclass(frozen=True)
class DaskSpec:
    """Where to run: a running scheduler's address, or a LocalCluster of ``workers``.

    ``batch_size`` is the number of trials (documents) per Dask task (default:
    :data:`MAX_BATCH` trials, :data:`EVALUATE_BATCH` documents).
    """

    scheduler: str | None = None
    workers: int | None = None
    batch_size: int | None = None
    #: Seconds to wait for the scheduler to answer.
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if (self.scheduler is None) == (self.workers is None):
            raise ValueError("give either a scheduler address or a number of workers")
        if self.workers is not None and self.workers < 1:
            raise ValueError("workers must be at least 1")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError("batch_size must be at least 1")


@contextlib.contextmanager
def dask_client(spec: DaskSpec) -> Iterator[Any]:
    """A ``distributed.Client`` for ``spec``; a LocalCluster it starts is closed on exit.

    The LocalCluster has ``spec.workers`` worker processes of one thread each (the work
    is pure Python, so threads would share one core), listening on 127.0.0.1 only,
    without a dashboard.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - depends on the environment
        from retrieval_lib.errors import InputError

        raise InputError(
            "--scheduler/--dask-workers need Dask: pip install 'retrieval_lib[dask]'"
        ) from exc
    if spec.scheduler is not None:
        from retrieval_lib.errors import InputError

        try:
            client = Client(spec.scheduler, timeout=spec.timeout)
        except (OSError, TimeoutError) as exc:
            raise InputError(f"cannot reach the Dask scheduler {spec.scheduler}: {exc}") from None
        with client:
            yield client
        return
    import dask

    with (
        dask.config.set(CLUSTER_CONFIG),  # the nannies hand it to their workers
        LocalCluster(
            n_workers=spec.workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            # its HTTP server (health checks) on a free port, not the default 8787
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _worker_count(client: Any) -> int:
    return len(client.scheduler_info().get("workers", {}))


class DaskMapper:
    """Runs ``fn`` over items on a Dask cluster, a batch of items per task, at most a
    window of tasks in flight.

    Items are drawn from their iterator only as tasks are submitted, and each task's
    results are released on the cluster once received, so neither the driver nor the
    scheduler holds more than the window, however many items there are.
    ``fn`` and the items must be picklable and importable on the workers.

    Parameters
    ----------
    client
        A ``distributed.Client``.
    batch_size
        Items per task (default: :data:`MAX_BATCH`).
    progress
        Show progress bars on stderr (:func:`evaluate_runs_dask`).
    window
        Tasks in flight at once (default: :data:`TASKS_PER_WORKER` per worker of the
        cluster, counted again as workers come and go; at least that many).
    """

    def __init__(
        self,
        client: Any,
        *,
        batch_size: int | None = None,
        progress: bool = False,
        window: int | None = None,
    ):
        self.client = client
        self.batch_size = batch_size
        self.progress = progress
        self.window = window
        #: Tasks submitted by the last call (for tests and benchmarks).
        self.last_tasks = 0

    def _limit(self) -> int:
        if self.window is not None:
            return self.window
        return TASKS_PER_WORKER * max(1, _worker_count(self.client))

    def imap_batches(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        on_error: Callable[[Any, BaseException], Any] | None = None,
    ) -> Iterator[tuple[list[Any], list[Any]]]:
        """Yield ``(batch, [fn(item) for item in batch])`` for every task, in the order
        tasks complete.

        A task that fails as a whole (its worker died too often, or ``fn`` raised) gives
        ``on_error(item, exception)`` per item, or re-raises without ``on_error``.
        """
        from distributed import as_completed

        size = self.batch_size or MAX_BATCH
        task = functools.partial(run_chunk, fn)
        stream = iter(items)
        pending: dict[str, tuple[Any, list[Any]]] = {}
        completed = as_completed()
        self.last_tasks = 0
        limit, counted = self._limit(), time.monotonic()

        def fill() -> None:
            nonlocal limit, counted
            if self.window is None and time.monotonic() - counted > WORKER_RECOUNT_SECONDS:
                limit, counted = self._limit(), time.monotonic()
            while len(pending) < limit:
                batch = list(itertools.islice(stream, size))
                if not batch:
                    return
                future = self.client.submit(task, batch, pure=False)
                pending[future.key] = (future, batch)
                completed.add(future)
                self.last_tasks += 1

        try:
            fill()
            for future in completed:
                _, batch = pending.pop(future.key)
                try:
                    results = future.result()
                except Exception as exc:
                    if on_error is None:
                        raise
                    results = [on_error(item, exc) for item in batch]
                finally:
                    future.release()
                fill()  # before handing the results over: the workers stay busy
                yield batch, results
        finally:
            for future, _ in pending.values():
                future.cancel()

    def imap_unordered(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        on_error: Callable[[Any, BaseException], Any] | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` for every item, in the order their tasks complete
        (see :meth:`imap_batches`)."""
        for batch, results in self.imap_batches(fn, items, on_error=on_error):
            yield from zip(batch, results, strict=True)


def _progress_bar(total: int | None, unit: str = "trial") -> Any:
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, leave=False)


@contextlib.contextmanager
def dask_mapper(spec: DaskSpec, *, progress: bool = False) -> Iterator[DaskMapper]:
    """A :class:`DaskMapper` on the cluster of ``spec`` (see :func:`dask_client`)."""
    with dask_client(spec) as client:
        yield DaskMapper(client, batch_size=spec.batch_size, progress=progress)


# --------------------------------------------------------------------------- pipelines


def remove_orphaned_temporaries(roots: Iterable[str | os.PathLike[str]]) -> int:
    """Delete the temporary files a writer killed in the middle of an atomic write left
    under ``roots`` (:func:`retrieval_lib.completion.remove_orphaned_temporaries`)."""
    from retrieval_lib.completion import remove_orphaned_temporaries as remove

    return remove(roots)


def _task_failure(exc: BaseException) -> str:
    return f"dask task failed: {type(exc).__name__}: {exc}"


def _failed_trial(trial: Any, task_name: str, exc: BaseException) -> Any:
    """The output of a trial whose task Dask gave up on (no document, the cause)."""
    from retrieval_lib.normalize import TrialOutput

    return TrialOutput(
        str(trial.trial_dir), None, task_name, trial.config_name, 0, 0, None, _task_failure(exc)
    )


def _failed_output(job: tuple[Any, ...], exc: BaseException) -> Any:
    trial, result = job[0], job[1]
    return _failed_trial(trial, result.task_name, exc)


def _failed_evaluation(doc_path: Any, exc: BaseException) -> tuple[None, str]:
    return None, _task_failure(exc)


def normalize_dask(
    paths: Iterable[str | Path],
    tasks_root: str | Path | None,
    *,
    map_fn: DaskMapper,
    out: str | Path | None = None,
    progress: bool = False,
) -> Any:
    """:func:`~retrieval_lib.normalize.normalize_paths` with the trials run by ``map_fn``.

    Writes the same documents; returns the same :class:`~retrieval_lib.normalize.
    NormalizeReport`. A run of at most :data:`WHOLE_RUN_TRIALS` trials (or the mapper's
    ``batch_size``) is one task; a larger one is spread over the cluster by trial.
    """
    report, _ = _normalize_runs(paths, tasks_root, map_fn, out, None, progress)
    return report


def normalize_and_evaluate_dask(
    paths: Iterable[str | Path],
    tasks_root: str | Path | None,
    k: Sequence[int],
    *,
    map_fn: DaskMapper,
    out: str | Path | None = None,
) -> tuple[Any, dict[Path, RunEvaluation | Exception]]:
    """Normalise the runs and evaluate each one as soon as its last trial is back.

    Returns the :class:`~retrieval_lib.normalize.NormalizeReport` and, per run folder
    that got documents, its :class:`RunEvaluation` or the error that stopped it. The
    files are those of :func:`normalize_dask` followed by :func:`evaluate_runs_dask`;
    only the barrier between the two is gone: a small run is normalised and evaluated
    by one task, a large run's evaluation starts when its last trial is back.
    """
    from retrieval_lib.metrics.stages import normalize_k

    return _normalize_runs(paths, tasks_root, map_fn, out, normalize_k(k), False)


def _normalize_runs(
    paths: Iterable[str | Path],
    tasks_root: str | Path | None,
    map_fn: DaskMapper,
    out: str | Path | None,
    ks: tuple[int, ...] | None,
    progress: bool,
) -> tuple[Any, dict[Path, RunEvaluation | Exception]]:
    """Small runs whole, one task each; then the large ones by trial (``ks``: evaluate
    too, with these cut-offs)."""
    from retrieval_lib.errors import InputError
    from retrieval_lib.normalize import NormalizeReport

    started = time.perf_counter()
    if tasks_root is not None and not Path(tasks_root).is_dir():
        raise InputError(f"--tasks-root {tasks_root} is not a folder")
    from retrieval_lib.runs import LeftOut

    found = LeftOut()  # entries the search for runs skipped: named in the report
    runs, small, large = _runs_by_size(paths, out, map_fn.batch_size or WHOLE_RUN_TRIALS, found)
    # absolute: the workers may run in another working directory
    root = str(Path(tasks_root).resolve()) if tasks_root is not None else None
    out_abs = str(Path(out).resolve()) if out is not None else None
    report = NormalizeReport(runs=[str(r) for r in runs], left_out=found.entries())
    results: dict[Path, RunEvaluation | Exception] = {}
    try:
        if small:
            bar = _progress_bar(sum(n for _, n in small)) if progress else None
            whole = functools.partial(_whole_run, tasks_root=root, out=out_abs, ks=ks)
            runner = DaskMapper(map_fn.client, batch_size=1, window=map_fn.window)
            try:
                for (run, n), (part, evaluation) in runner.imap_unordered(
                    whole, small, on_error=_failed_run
                ):
                    report.merge(part)
                    if evaluation is not None:
                        results[run] = _evaluation(evaluation)
                    if bar is not None:
                        bar.update(n)
            finally:
                if bar is not None:
                    bar.close()
        if large:
            part, evaluated = _normalize_by_trial(large, root, map_fn, out_abs, ks, progress)
            report.merge(part)
            results.update(evaluated)
    finally:
        # only now: no task writes under these folders any more
        _remove_temporaries(report, out)
    report.failures.sort(key=lambda o: o.trial_dir)
    report.seconds = time.perf_counter() - started
    return report, results


#: A run of at most this many trials (or the mapper's ``batch_size``, when given) is one
#: task: discovered, planned, normalised (and, for a study, evaluated) on one worker by
#: the single-process functions, so the driver neither reads its ``result.json`` files
#: nor handles its trials one by one; a larger run is spread over the cluster by trial.
WHOLE_RUN_TRIALS = 128


def _runs_by_size(
    paths: Iterable[str | Path], out: str | Path | None, limit: int, left_out: Any = None
) -> tuple[list[Path], list[tuple[Path, int]], list[Path]]:
    """Every run under ``paths``, then those of at most ``limit`` trials with their trial
    counts, and the larger ones (entries skipped on the way go to ``left_out``)."""
    from retrieval_lib.normalize import find_input_runs
    from retrieval_lib.runs import discover_trials

    runs = find_input_runs(paths, out, left_out)
    small: list[tuple[Path, int]] = []
    large: list[Path] = []
    for run in runs:
        n = len(discover_trials(run, left_out))
        if n <= limit:
            small.append((run, n))
        else:
            large.append(run)
    return runs, small, large


def _whole_run(
    run: tuple[Path, int], tasks_root: str | None, out: str | None, ks: tuple[int, ...] | None
) -> tuple[Any, RunEvaluation | str | None]:
    """On a worker: normalise one run as one process does (and evaluate it, given
    ``ks``); its report and evaluation (``None``: no document, a string: why it failed)."""
    from retrieval_lib.normalize import normalize_paths, output_root

    report = normalize_paths([run[0]], tasks_root, out=out)
    if ks is None or not report.documents:
        return report, None
    return report, _evaluate_whole(output_root(run[0], out), ks)


def _failed_run(run: tuple[Path, int], exc: BaseException) -> tuple[Any, None]:
    """A whole-run task Dask gave up on: each of its trials failed with that cause."""
    from retrieval_lib.normalize import NormalizeReport
    from retrieval_lib.runs import discover_trials

    report = NormalizeReport(runs=[str(run[0])])
    for trial in discover_trials(run[0]):
        # its result.json was never read: the trial folder names the task
        report.add(_failed_trial(trial, trial.trial_dir.name, exc))
    return report, None


def _normalize_by_trial(
    runs: Sequence[Path],
    tasks_root: str | None,
    map_fn: DaskMapper,
    out: str | None,
    ks: tuple[int, ...] | None,
    progress: bool,
) -> tuple[Any, dict[Path, RunEvaluation | Exception]]:
    """Large runs: trials in batches over the cluster (planned here, one run at a time);
    with ``ks``, each run evaluated as soon as its last trial is back."""
    from retrieval_lib.normalize import normalize_paths

    size = _evaluate_batch_size(map_fn)
    in_flight: dict[Path, Any] = {}
    split: dict[Path, Path] = {}
    results: dict[Path, RunEvaluation | Exception] = {}

    def collect(future: Any, run: Path) -> None:
        results[run] = _evaluation(future.result())
        future.release()

    def run_done(run: str, out_root: Path, documents: int) -> None:
        for finished in [r for r, f in in_flight.items() if f.done()]:
            collect(in_flight.pop(finished), finished)
        if ks is None or documents == 0:
            return
        if documents <= size:
            events_dir = out_root.resolve()
            in_flight[Path(run)] = map_fn.client.submit(_evaluate_whole, events_dir, ks, pure=False)
        else:
            split[Path(run)] = out_root

    def mapper(fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        return map_fn.imap_unordered(fn, jobs, on_error=_failed_output)

    try:
        report = normalize_paths(
            runs, tasks_root, out=out, progress=progress, map_fn=mapper, on_run_done=run_done
        )
        for run in list(in_flight):
            collect(in_flight.pop(run), run)
        if split:
            evaluated = evaluate_runs_dask(list(split.values()), ks or (), map_fn=map_fn)
            results.update(zip(split, evaluated, strict=True))
    finally:
        for future in in_flight.values():
            future.cancel()
    return report, results


def _remove_temporaries(report: Any, out: str | Path | None) -> None:
    from retrieval_lib.normalize import output_root

    remove_orphaned_temporaries(output_root(Path(run), out) for run in report.runs)


@dataclass
class RunEvaluation:
    """What evaluating one events folder on the cluster wrote (small: counts and the
    three run-level paths, no records)."""

    events_dir: Path
    documents: int
    computable: int
    metrics_files: int
    summary_path: Path
    table_path: Path
    failures: list[tuple[Path, str]]
    seconds: float = 0.0

    @classmethod
    def of(cls, result: Any) -> RunEvaluation:
        """The small part of an :class:`~retrieval_lib.metrics.summary.EvaluateResult`."""
        return cls(
            events_dir=result.events_dir,
            documents=result.documents,
            computable=result.computable,
            metrics_files=result.metrics_files,
            summary_path=result.summary_path,
            table_path=result.table_path,
            failures=result.failures,
            seconds=result.seconds,
        )


def _evaluation(outcome: RunEvaluation | str) -> RunEvaluation | Exception:
    """A whole-run evaluation's outcome in the driver: the error of one that failed."""
    from retrieval_lib.errors import InputError

    return InputError(outcome) if isinstance(outcome, str) else outcome


def _evaluate_whole(events_dir: Path, ks: Sequence[int]) -> RunEvaluation | str:
    """On a worker: evaluate a whole (small) run, as one process does; the reason it
    failed if it did."""
    from retrieval_lib.errors import RetrievalLibError
    from retrieval_lib.metrics.summary import evaluate_run

    try:
        return RunEvaluation.of(evaluate_run(events_dir, k=ks))
    except RetrievalLibError as exc:
        return str(exc)


def _write_outputs(events_dir: Path, doc_paths: Sequence[Path], *parts: Any) -> RunEvaluation:
    """On a worker: the run summary and table from every document's summary record."""
    from retrieval_lib.metrics.summary import write_run_outputs

    outcomes = [outcome for part in parts for outcome in part]
    return RunEvaluation.of(write_run_outputs(events_dir, doc_paths, outcomes))


def _run_documents(path: str | Path) -> tuple[Path, list[Path]]:
    """The absolute events folder of ``path`` and its documents (workers may run in
    another working directory)."""
    from retrieval_lib.completion import begin_evaluate
    from retrieval_lib.errors import InputError
    from retrieval_lib.events.document import find_documents
    from retrieval_lib.metrics.stages import EVENTS_SUFFIX
    from retrieval_lib.metrics.summary import events_dir_of

    events_dir = events_dir_of(Path(path)).resolve()
    begin_evaluate(events_dir)  # refuses an incomplete normalisation
    doc_paths = find_documents([events_dir])
    if not doc_paths:
        raise InputError(
            f"no retrieval-event documents (*{EVENTS_SUFFIX}) found under {events_dir}"
        )
    return events_dir, doc_paths


def _evaluate_batch_size(map_fn: DaskMapper) -> int:
    return map_fn.batch_size or EVALUATE_BATCH


def evaluate_dask(
    path: str | Path,
    k: Sequence[int],
    *,
    map_fn: DaskMapper,
    on_done: Callable[[int], Any] | None = None,
) -> RunEvaluation:
    """:func:`~retrieval_lib.metrics.summary.evaluate_run` on the cluster of ``map_fn``.

    A run of at most the batch size's documents is one task; a larger one is split:
    each task evaluates a batch of documents and writes their metrics files, and their
    summary records go, worker to worker, to one last task that writes the run summary
    and the metrics table. The driver receives only the returned :class:`RunEvaluation`.
    """
    from retrieval_lib.errors import InputError
    from retrieval_lib.metrics.stages import normalize_k

    started = time.perf_counter()
    events_dir, doc_paths = _run_documents(path)
    ks = normalize_k(k)
    size = _evaluate_batch_size(map_fn)
    if len(doc_paths) <= size:
        map_fn.last_tasks = 1
        whole = map_fn.client.submit(_evaluate_whole, events_dir, ks, pure=False)
        try:
            result = whole.result()
        finally:
            whole.release()
        if isinstance(result, str):
            raise InputError(result)
        if on_done is not None:
            on_done(len(doc_paths))
    else:
        result = _evaluate_split(events_dir, doc_paths, ks, map_fn, size, on_done)
    remove_orphaned_temporaries([result.events_dir])
    result.seconds = time.perf_counter() - started
    return result


def _evaluate_split(
    events_dir: Path,
    doc_paths: list[Path],
    ks: Sequence[int],
    map_fn: DaskMapper,
    size: int,
    on_done: Callable[[int], Any] | None,
) -> RunEvaluation:
    from distributed import as_completed

    from retrieval_lib.metrics.summary import evaluate_document_files

    spans = [(a, min(len(doc_paths), a + size)) for a in range(0, len(doc_paths), size)]
    map_fn.last_tasks = len(spans)
    fn = functools.partial(evaluate_document_files, ks=ks)
    futures = [map_fn.client.submit(fn, doc_paths[a:b], pure=False) for a, b in spans]
    try:
        span_of = {future.key: span for future, span in zip(futures, spans, strict=True)}
        errors: dict[str, BaseException] = {}
        for future in as_completed(futures):
            if future.status == "error":
                errors[future.key] = future.exception()
            if on_done is not None:
                a, b = span_of[future.key]
                on_done(b - a)
        # the records stay on the workers: the failed batches are replaced in the driver
        parts = [
            [_failed_evaluation(p, errors[f.key]) for p in doc_paths[a:b]] if f.key in errors else f
            for f, (a, b) in zip(futures, spans, strict=True)
        ]
        finish = map_fn.client.submit(_write_outputs, events_dir, doc_paths, *parts, pure=False)
        result: RunEvaluation = finish.result()
        finish.release()
    finally:
        for future in futures:
            future.release()
    return result


#: Large runs (split in several tasks) evaluated at once by :func:`evaluate_runs_dask`.
CONCURRENT_RUNS = 4


def evaluate_runs_dask(
    paths: Sequence[str | Path], k: Sequence[int], *, map_fn: DaskMapper
) -> Iterator[Any]:
    """:func:`evaluate_dask` of every path; yields each path's :class:`RunEvaluation`
    (or the ``RetrievalLibError`` it raised), in the order of ``paths``.

    Small runs go through the mapper's window, one task each; large ones (more documents
    than a batch) are split, a few at a time. Each run's summary and table are made from
    that run's records alone, so the files are those
    :func:`~retrieval_lib.metrics.summary.evaluate_run` writes.
    """
    from concurrent.futures import ThreadPoolExecutor

    from retrieval_lib.errors import RetrievalLibError
    from retrieval_lib.metrics.stages import normalize_k

    ks = normalize_k(k)
    size = _evaluate_batch_size(map_fn)
    bar = _progress_bar(None, "document") if map_fn.progress else None
    update = bar.update if bar is not None else None
    paths = list(paths)
    small: list[tuple[int, Path, int]] = []
    large: list[int] = []
    ready: dict[int, Any] = {}
    for i, path in enumerate(paths):
        try:
            events_dir, docs = _run_documents(path)
        except RetrievalLibError as exc:
            ready[i] = exc
            continue
        if len(docs) <= size:
            small.append((i, events_dir, len(docs)))
        else:
            large.append(i)

    def split(i: int) -> Any:
        try:
            return evaluate_dask(paths[i], ks, map_fn=map_fn, on_done=update)
        except RetrievalLibError as exc:
            return exc

    def whole(item: tuple[int, Path, int]) -> Any:
        return _evaluate_whole(item[1], ks)

    def failed(item: tuple[int, Path, int], exc: BaseException) -> str:
        return _task_failure(exc)

    next_out = 0
    try:
        with ThreadPoolExecutor(max_workers=CONCURRENT_RUNS) as pool:
            pending = {i: pool.submit(split, i) for i in large}
            # a separate mapper: the large runs' threads set their own last_tasks
            runner = DaskMapper(map_fn.client, batch_size=1, window=map_fn.window)
            for item, result in runner.imap_unordered(whole, small, on_error=failed):
                ready[item[0]] = _evaluation(result)
                if isinstance(result, RunEvaluation):
                    remove_orphaned_temporaries([result.events_dir])
                if update is not None:
                    update(item[2])
                while next_out < len(paths) and next_out in ready:
                    yield ready.pop(next_out)
                    next_out += 1
            for i, future in pending.items():
                ready[i] = future.result()
            while next_out < len(paths):
                yield ready.pop(next_out)
                next_out += 1
    finally:
        if bar is not None:
            bar.close()

"""Scale-out on Dask: the cluster, and what only Dask does.

Optional (the ``[dask]`` extra); nothing here imports dask until a client is asked for,
so the rest of the package and the CLI never load it unless ``--scheduler`` or
``--dask-workers`` is given.

What is here: the cluster (:class:`DaskSpec`, :func:`dask_client`: a running scheduler
or a LocalCluster of ours), :class:`DaskMapper` (a :class:`~retrieval_lib.parallel.Mapper`
on the client's ``concurrent.futures`` executor, its window following the cluster's
workers) and :func:`evaluate_split_runs`, large runs' evaluations split over tasks whose
summary records go worker to worker to the task that writes the run summary and table.
What runs where, and the small-run/large-run rule, are those of the process pool
(:mod:`retrieval_lib.run_many`). What crosses the network, the driver's flat memory and
the faults handled (a worker killed, a task Dask gives up on) are in ``docs/scale-out.md``.

Examples
--------
>>> from retrieval_lib.distributed import DaskSpec, dask_mapper  # doctest: +SKIP
>>> from retrieval_lib.run_many import normalize_many  # doctest: +SKIP
>>> with dask_mapper(DaskSpec(workers=2)) as mapper:  # doctest: +SKIP
...     report, _ = normalize_many(["runs/"], "benchmarks", out="out", mapper=mapper)
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_lib.errors import InputError, RetrievalLibError
from retrieval_lib.parallel import Mapper, task_failure

if TYPE_CHECKING:
    from retrieval_lib.metrics.summary import EvaluateResult

__all__ = [
    "DaskMapper",
    "DaskSpec",
    "dask_client",
    "dask_mapper",
    "evaluate_split_runs",
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
#: Dask settings of a LocalCluster we start (its scheduler lives in this process, its
#: workers get them from their nannies): the profiler cost ~9% of a worker's CPU, the
#: default tick and system monitor 1.4% of an idle worker's core (``docs/scale-out.md``).
CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.tick.interval": "1s",
    "distributed.admin.system-monitor.interval": "5s",
}


@dataclass(frozen=True)
class DaskSpec:
    """Where to run: a running scheduler's address, or a LocalCluster of ``workers``.

    ``batch_size`` is the number of trials (documents) per Dask task (default:
    :data:`MAX_BATCH` trials, ``run_many.EVALUATE_BATCH`` documents).
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
        raise InputError(
            "--scheduler/--dask-workers need Dask: pip install 'retrieval_lib[dask]'"
        ) from exc
    if spec.scheduler is not None:
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


class DaskMapper(Mapper):
    """A :class:`~retrieval_lib.parallel.Mapper` on a Dask cluster: the client's
    ``concurrent.futures`` executor, :data:`MAX_BATCH` items per task unless told, and
    a run's evaluation split over tasks (:func:`evaluate_split_runs`).

    Each task's result is released on the cluster once it has come back, so neither the
    driver nor the scheduler holds more than the window, however many items there are.
    ``fn`` and the items must be picklable and importable on the workers.

    Parameters
    ----------
    client
        A ``distributed.Client``.
    batch_size
        Items per task (default: :data:`MAX_BATCH`).
    progress
        Show progress bars on stderr.
    window
        Tasks in flight at once (default: :data:`TASKS_PER_WORKER` per worker of the
        cluster, counted again every :data:`WORKER_RECOUNT_SECONDS` as workers come and
        go; at least that many).
    """

    default_batch = MAX_BATCH
    splits_runs = True

    def __init__(
        self,
        client: Any,
        *,
        batch_size: int | None = None,
        progress: bool = False,
        window: int | None = None,
    ):
        super().__init__(
            client.get_executor(pure=False),
            window=window if window is not None else self._counted_window,
            batch_size=batch_size,
            progress=progress,
        )
        self.client = client
        self._window: tuple[int, float] | None = None

    def _counted_window(self) -> int:
        now = time.monotonic()
        if self._window is None or now - self._window[1] > WORKER_RECOUNT_SECONDS:
            workers = len(self.client.scheduler_info().get("workers", {}))
            self._window = (TASKS_PER_WORKER * max(1, workers), now)
        return self._window[0]


@contextlib.contextmanager
def dask_mapper(spec: DaskSpec, *, progress: bool = False) -> Iterator[DaskMapper]:
    """A :class:`DaskMapper` on the cluster of ``spec`` (see :func:`dask_client`)."""
    with dask_client(spec) as client:
        yield DaskMapper(client, batch_size=spec.batch_size, progress=progress)


# --------------------------------------------------------------------------- split runs


#: Large runs whose split evaluations are in flight at once (:func:`evaluate_split_runs`).
CONCURRENT_RUNS = 4


@dataclass
class _SplitRun:
    """One run's evaluation in flight: its batches' futures, then its last task."""

    key: Any
    events_dir: Path
    doc_paths: Sequence[Path]
    spans: list[tuple[int, int]]
    futures: list[Any]
    span_of: dict[str, tuple[int, int]]
    started: float
    errors: dict[str, BaseException]
    left: int
    finish: Any = None


def evaluate_split_runs(
    runs: Iterable[tuple[Any, Path, Sequence[Path]]],
    ks: Sequence[int],
    *,
    mapper: DaskMapper,
    size: int,
    on_done: Callable[[int], Any] | None = None,
) -> Iterator[tuple[Any, EvaluateResult | str]]:
    """:func:`~retrieval_lib.metrics.summary.evaluate_run` of each ``(key, events_dir,
    doc_paths)`` (absolute paths), split over the cluster of ``mapper``, ``size``
    documents per task; yields ``(key, result)`` as runs end (a string: why the run
    failed).

    Each task evaluates a batch of documents and writes their metrics files; their
    summary records stay on the workers and go, worker to worker, to one last task per
    run that writes the run summary and the metrics table: byte for byte what
    ``evaluate_run`` writes. The driver receives only the result, without its list of
    metrics files. A batch whose task Dask gave up on counts its documents as failed,
    with the cause. At most :data:`CONCURRENT_RUNS` runs are in flight (their records
    held by the workers), drawn from ``runs`` as others end. Called by
    :func:`retrieval_lib.run_many.evaluate_many` for runs of more than ``size``
    documents.
    """
    from distributed import as_completed

    from retrieval_lib.metrics.summary import evaluate_document_files

    client = mapper.client
    fn = functools.partial(evaluate_document_files, ks=tuple(ks))
    stream = iter(runs)
    open_runs: dict[Any, _SplitRun] = {}
    owner: dict[str, _SplitRun] = {}  # future key -> its run
    completed = as_completed()
    mapper.last_tasks = 0

    def start() -> None:
        while len(open_runs) < CONCURRENT_RUNS:
            entry = next(stream, None)
            if entry is None:
                return
            run = _submit_batches(client, fn, entry, size)
            mapper.last_tasks += len(run.futures)
            open_runs[run.key] = run
            for future in run.futures:
                owner[future.key] = run
                completed.add(future)

    try:
        start()
        for future in completed:
            run = owner.pop(future.key)
            if run.finish is None or future.key != run.finish.key:
                if future.status == "error":
                    run.errors[future.key] = future.exception()
                if on_done is not None:
                    a, b = run.span_of[future.key]
                    on_done(b - a)
                run.left -= 1
                if run.left == 0:
                    run.finish = _submit_last_task(client, run)
                    owner[run.finish.key] = run
                    completed.add(run.finish)
                continue
            del open_runs[run.key]
            result = _run_result(future, run)
            start()
            yield run.key, result
    finally:
        for run in open_runs.values():
            for future in [*run.futures, run.finish]:
                if future is not None:
                    future.cancel()


def _submit_batches(
    client: Any, fn: Callable[..., Any], entry: tuple[Any, Path, Sequence[Path]], size: int
) -> _SplitRun:
    """One run's documents submitted in batches of ``size``, one task each."""
    key, events_dir, doc_paths = entry
    spans = [(a, min(len(doc_paths), a + size)) for a in range(0, len(doc_paths), size)]
    futures = [client.submit(fn, doc_paths[a:b], pure=False) for a, b in spans]
    span_of = {f.key: span for f, span in zip(futures, spans, strict=True)}
    return _SplitRun(
        key, events_dir, doc_paths, spans, futures, span_of, time.perf_counter(), {}, len(spans)
    )


def _submit_last_task(client: Any, run: _SplitRun) -> Any:
    """The task writing the run's summary and table from its batches' records."""
    # the records stay on the workers: the failed batches are replaced in the driver
    parts = [
        [(None, task_failure(run.errors[f.key]))] * (b - a) if f.key in run.errors else f
        for f, (a, b) in zip(run.futures, run.spans, strict=True)
    ]
    return client.submit(_write_outputs, run.events_dir, run.doc_paths, *parts, pure=False)


def _run_result(future: Any, run: _SplitRun) -> EvaluateResult | str:
    """The result of a run's last task (a string: why it failed); its futures released."""
    from retrieval_lib.completion import remove_orphaned_temporaries

    try:
        result: EvaluateResult | str = future.result()
    except Exception as exc:  # e.g. KilledWorker: this run failed, the others go on
        result = str(exc) if isinstance(exc, RetrievalLibError) else task_failure(exc)
    finally:
        future.release()
        for part in run.futures:
            part.release()
    if not isinstance(result, str):
        remove_orphaned_temporaries([result.events_dir])
        result = replace(result, seconds=time.perf_counter() - run.started)
    return result


def _write_outputs(events_dir: Path, doc_paths: Sequence[Path], *parts: Any) -> EvaluateResult:
    """On a worker: the run summary and table from every document's summary record."""
    from retrieval_lib.metrics.summary import write_run_outputs

    outcomes = [outcome for part in parts for outcome in part]
    return write_run_outputs(events_dir, doc_paths, outcomes).without_paths()

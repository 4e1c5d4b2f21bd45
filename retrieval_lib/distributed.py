"""Scale-out on Dask: normalise and evaluate trials on a Dask cluster.

Optional (the ``[dask]`` extra); nothing here imports dask until a client is asked for,
so the rest of the package and the CLI never load it unless ``--scheduler`` or
``--dask-workers`` is given.

How work is distributed
-----------------------
The driver plans the work as today (trial discovery, ``result.json`` reading, the latest
trial of each pair, file names) and sends each worker a *batch of trials*: per trial a
few hundred bytes of :class:`~retrieval_lib.runs.TrialRef` / ``TrialResult`` and the
output path. The worker reads the trace from the shared filesystem, builds the document
and writes it atomically under ``--out`` itself; only a
:class:`~retrieval_lib.normalize.TrialOutput` (counts, path, error) comes back.
Evaluation works alike per document: the worker writes the metrics file beside the
document and keeps its :func:`~retrieval_lib.metrics.summary.summary_record` (about
3 KB); one last task per run receives them worker to worker and writes the run summary
and the metrics tables, byte for byte what the single-process path writes. The driver
gets counts and paths.

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
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
#: (about 1 ms), few enough that a rerun after a lost worker is cheap.
MAX_BATCH = 32
#: Documents per evaluation task unless told: evaluating one takes a few ms, and several
#: runs are in flight at once (:data:`CONCURRENT_RUNS`), so a run of up to this many
#: documents is one task (plus the one writing its summary).
EVALUATE_BATCH = 128


@dataclass(frozen=True)
class DaskSpec:
    """Where to run: a running scheduler's address, or a LocalCluster of ``workers``.

    ``batch_size`` is the number of trials (documents) per Dask task (default: at most
    :data:`MAX_BATCH`, fewer so that every worker gets at least four tasks).
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
    with (
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


def _run_batch(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return [fn(item) for item in items]


class DaskMapper:
    """``mapper(fn, items)``: ``[fn(i) for i in items]`` computed on a Dask cluster.

    Items go out in batches (one task each); results are collected as tasks complete
    (each released on the cluster once received) and returned in item order.
    ``fn`` and the items must be picklable and importable on the workers.

    Parameters
    ----------
    client
        A ``distributed.Client``.
    batch_size
        Items per task (default: see :class:`DaskSpec`).
    progress
        Show a progress bar on stderr that follows completed tasks (when the caller
        does not pass its own ``on_done``).
    """

    def __init__(self, client: Any, *, batch_size: int | None = None, progress: bool = False):
        self.client = client
        self.batch_size = batch_size
        self.progress = progress
        #: Tasks submitted by the last call (for tests and benchmarks).
        self.last_tasks = 0

    def _batches(self, n: int, whole: int | None = None) -> list[tuple[int, int]]:
        size = self.batch_size
        if size is None and whole is not None:
            size = whole
        elif size is None:
            workers = max(1, len(self.client.scheduler_info().get("workers", {})))
            size = max(1, min(MAX_BATCH, math.ceil(n / (4 * workers))))
        return [(start, min(n, start + size)) for start in range(0, n, size)]

    def submit(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        *,
        batched: bool = False,
        batch_size: int | None = None,
    ) -> tuple[list[Any], list[tuple[int, int]]]:
        """Submit ``fn`` over ``items`` in batches; return the futures and each one's
        ``(start, stop)`` span of ``items``. With ``batched``, ``fn`` takes a whole batch
        (a list) and returns the list of its results. ``batch_size`` replaces the default
        batch size (not one the mapper was given)."""
        spans = self._batches(len(items), batch_size)
        self.last_tasks = len(spans)
        task = fn if batched else functools.partial(_run_batch, fn)
        futures = self.client.map(task, [items[a:b] for a, b in spans], pure=False)
        return futures, spans

    def follow(
        self,
        futures: Sequence[Any],
        spans: Sequence[tuple[int, int]],
        on_done: Callable[[int], Any] | None = None,
    ) -> dict[int, BaseException]:
        """Wait for every future without fetching its result; ``on_done(n)`` as each
        task of ``n`` items ends; return the exception of each failed task by index."""
        from distributed import as_completed

        index = {future.key: i for i, future in enumerate(futures)}
        errors: dict[int, BaseException] = {}
        for future in as_completed(futures):
            i = index[future.key]
            if future.status == "error":
                errors[i] = future.exception()
            if on_done is not None:
                on_done(spans[i][1] - spans[i][0])
        return errors

    def __call__(
        self,
        fn: Callable[[Any], Any],
        items: Sequence[Any],
        on_done: Callable[[int], Any] | None = None,
        on_error: Callable[[Any, BaseException], Any] | None = None,
    ) -> list[Any]:
        """Apply ``fn`` to every item; ``on_done(n)`` after each task of ``n`` items.

        A task that fails as a whole (its worker died too often, or ``fn`` raised) gives
        ``on_error(item, exception)`` for each of its items, or re-raises without
        ``on_error``.
        """
        from distributed import as_completed

        items = list(items)
        if not items:
            return []
        futures, spans = self.submit(fn, items)
        index = {future.key: i for i, future in enumerate(futures)}
        results: list[Any] = [None] * len(items)
        bar = None
        if on_done is None and self.progress:
            bar = _progress_bar(len(items))
            on_done = bar.update
        try:
            for future in as_completed(futures):
                a, b = spans[index[future.key]]
                try:
                    results[a:b] = future.result()
                except Exception as exc:
                    if on_error is None:
                        raise
                    results[a:b] = [on_error(item, exc) for item in items[a:b]]
                future.release()
                if on_done is not None:
                    on_done(b - a)
        finally:
            if bar is not None:
                bar.close()
            for future in futures:
                future.release()
        return results


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
    """Delete the temporary files (``.<name>.<random>.tmp``) that a worker killed in the
    middle of an atomic write left behind under ``roots``; return how many.

    Those of documents, metrics files, and of a run's summary, table and dataset files
    (which the last task of a run's evaluation writes) are removed; others are kept.
    Call only when no writer is active under ``roots`` (after the run).
    """
    from retrieval_lib.events.document import DOCUMENT_SUFFIX, METRICS_SUFFIX
    from retrieval_lib.metrics.summary import DATASET_DIRNAME, SUMMARY_FILENAME, TABLE_BASENAME

    run_files = {SUMMARY_FILENAME, f"{TABLE_BASENAME}.parquet", f"{TABLE_BASENAME}.csv"}
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
                or (path.parent.name == DATASET_DIRNAME and name.endswith(".parquet"))
            )
            if ours and path.is_file():
                path.unlink(missing_ok=True)
                removed += 1
    return removed


def _failed_output(job: tuple[Any, ...], exc: BaseException) -> Any:
    from retrieval_lib.normalize import TrialOutput

    trial, result = job[0], job[1]
    return TrialOutput(
        str(trial.trial_dir),
        None,
        result.task_name,
        trial.config_name,
        0,
        0,
        None,
        f"dask task failed: {type(exc).__name__}: {exc}",
    )


def _failed_evaluation(doc_path: Any, exc: BaseException) -> tuple[None, str]:
    return None, f"dask task failed: {type(exc).__name__}: {exc}"


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
    NormalizeReport`.
    """
    from retrieval_lib.normalize import _out_root, normalize_paths

    def mapper(fn: Callable[[Any], Any], jobs: Sequence[Any], on_done: Any = None) -> list[Any]:
        return map_fn(fn, jobs, on_done=on_done, on_error=_failed_output)

    report = normalize_paths(paths, tasks_root, out=out, progress=progress, map_fn=mapper)
    remove_orphaned_temporaries(_out_root(Path(run), out) for run in report.runs)
    return report


@dataclass
class RunEvaluation:
    """What evaluating one events folder on the cluster wrote (small; no records)."""

    events_dir: Path
    documents: int
    computable: int
    metrics_paths: list[Path]
    summary_path: Path
    table_path: Path
    failures: list[tuple[Path, str]]
    seconds: float = 0.0


def _write_outputs(events_dir: Path, doc_paths: Sequence[Path], *parts: Any) -> RunEvaluation:
    """On a worker: the run summary and table from every document's summary record."""
    from retrieval_lib.metrics.summary import write_run_outputs

    outcomes = [outcome for part in parts for outcome in part]
    result = write_run_outputs(events_dir, doc_paths, outcomes)
    return RunEvaluation(
        events_dir=result.events_dir,
        documents=result.documents,
        computable=result.computable,
        metrics_paths=result.metrics_paths,
        summary_path=result.summary_path,
        table_path=result.table_path,
        failures=result.failures,
    )


def evaluate_dask(
    path: str | Path,
    k: Sequence[int],
    *,
    map_fn: DaskMapper,
    on_done: Callable[[int], Any] | None = None,
) -> RunEvaluation:
    """:func:`~retrieval_lib.metrics.summary.evaluate_run` on the cluster of ``map_fn``.

    Each task evaluates a batch of documents and writes their metrics files; their
    summary records go, worker to worker, to one last task that writes the run summary
    and the metrics table. The driver receives only the returned :class:`RunEvaluation`.
    """
    import time

    from retrieval_lib.errors import InputError
    from retrieval_lib.events.document import find_documents
    from retrieval_lib.metrics.stages import EVENTS_SUFFIX, normalize_k
    from retrieval_lib.metrics.summary import _events_dir, evaluate_document_files

    started = time.perf_counter()
    # absolute: the workers may run elsewhere, in another working directory
    events_dir = _events_dir(Path(path)).resolve()
    doc_paths = find_documents([events_dir])
    if not doc_paths:
        raise InputError(
            f"no retrieval-event documents (*{EVENTS_SUFFIX}) found under {events_dir}"
        )
    # a batch of documents goes through the metrics kernel in one call, as in one process
    fn = functools.partial(evaluate_document_files, ks=normalize_k(k))
    futures, spans = map_fn.submit(fn, doc_paths, batched=True, batch_size=EVALUATE_BATCH)
    try:
        errors = map_fn.follow(futures, spans, on_done)
        parts = [
            [_failed_evaluation(p, errors[i]) for p in doc_paths[a:b]] if i in errors else future
            for i, (future, (a, b)) in enumerate(zip(futures, spans, strict=True))
        ]
        finish = map_fn.client.submit(_write_outputs, events_dir, doc_paths, *parts, pure=False)
        result: RunEvaluation = finish.result()
    finally:
        for future in futures:
            future.release()
    remove_orphaned_temporaries([result.events_dir])
    result.seconds = time.perf_counter() - started
    return result


#: Runs whose documents are in flight at once in :func:`evaluate_runs_dask`.
CONCURRENT_RUNS = 4


def evaluate_runs_dask(
    paths: Sequence[str | Path], k: Sequence[int], *, map_fn: DaskMapper
) -> Iterator[Any]:
    """:func:`evaluate_dask` of every path, a few runs at a time so the cluster stays busy
    between runs; yields each path's result (or the ``RetrievalLibError`` it raised), in
    order.

    Each run's summary and table are still made from that run's records alone, so the
    files are those :func:`~retrieval_lib.metrics.summary.evaluate_run` writes.
    """
    from concurrent.futures import ThreadPoolExecutor

    from retrieval_lib.errors import RetrievalLibError

    def one(path: str | Path) -> Any:
        try:
            return evaluate_dask(path, k, map_fn=map_fn, on_done=bar.update if bar else None)
        except RetrievalLibError as exc:
            return exc

    paths = list(paths)
    bar = _progress_bar(None, "document") if map_fn.progress else None
    try:
        if len(paths) <= 1:
            yield from map(one, paths)
            return
        with ThreadPoolExecutor(max_workers=min(CONCURRENT_RUNS, len(paths))) as pool:
            yield from pool.map(one, paths)
    finally:
        if bar is not None:
            bar.close()

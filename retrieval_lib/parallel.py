"""A bounded, unordered parallel map over a stream of jobs, on any ``concurrent.futures``
executor: in process, a process pool whose workers die with the driver, or Dask's.

The jobs are drawn from their iterator only as workers free up (at most ``window`` chunks
in flight), so a caller that plans its jobs lazily, one run at a time, keeps only the
jobs in flight in memory, whatever their number.

Examples
--------
>>> from retrieval_lib.parallel import pool_mapper
>>> with pool_mapper(1) as mapper:
...     sorted(result for _, result in mapper.imap_unordered(abs, [-2, 1, -3]))
[1, 2, 3]
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import KW_ONLY, dataclass, field
from itertools import islice
from typing import Any, ClassVar, TypeVar

__all__ = [
    "InlineExecutor",
    "Mapper",
    "pool_mapper",
    "die_with_parent",
    "process_pool",
    "run_chunk",
    "task_failure",
    "windowed_map",
]

#: ``prctl`` option: the signal the kernel sends this process when its parent dies.
_PR_SET_PDEATHSIG = 1
#: Seconds between two checks of the parent-process watchdog.
WATCHDOG_SECONDS = 0.5


def _parent_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's (cannot be ours, but not gone)
        return True
    return True


def die_with_parent(driver_pid: int) -> None:
    """Worker initializer: end this process when the driver ``driver_pid`` dies.

    On Linux the kernel sends SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``);
    everywhere a daemon thread checks every :data:`WATCHDOG_SECONDS` that the parent is
    the one it started with and that the driver is alive, and ends the process otherwise
    (the parent may be a fork server rather than the driver). A driver killed with
    ``kill -9`` thus leaves no worker behind.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    parent = os.getppid()
    if parent == 1 or not _parent_alive(driver_pid):  # orphaned before prctl took effect
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_SECONDS)
            if os.getppid() != parent or not _parent_alive(driver_pid):
                os._exit(1)

    threading.Thread(target=watch, name="retrieval_lib-parent-watchdog", daemon=True).start()


def process_pool(workers: int) -> ProcessPoolExecutor:
    """A process pool of ``workers`` processes that end when this process dies
    (:func:`die_with_parent`)."""
    return ProcessPoolExecutor(
        max_workers=workers, initializer=die_with_parent, initargs=(os.getpid(),)
    )


J = TypeVar("J")


class InlineExecutor(Executor):
    """A ``concurrent.futures`` executor that runs each call at once, in this process.

    What one worker means: no process is started, the jobs run in order, and
    :func:`windowed_map` needs no other path for it.

    Examples
    --------
    >>> InlineExecutor().submit(abs, -3).result()
    3
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed over as a pool hands a worker's exception
            future.set_exception(exc)
        return future


def task_failure(exc: BaseException) -> str:
    """Why a task the executor gave up on failed (e.g. a pool whose worker died, Dask's
    ``KilledWorker``): the cause each of its items is reported with.

    Examples
    --------
    >>> task_failure(RuntimeError("worker lost"))
    'task failed: RuntimeError: worker lost'
    """
    return f"task failed: {type(exc).__name__}: {exc}"


def run_chunk(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(item) for item in items]``: one task of several items (picklable)."""
    return [fn(item) for item in items]


def windowed_map(
    executor: Executor,
    fn: Callable[[J], Any],
    items: Iterable[J],
    *,
    chunksize: int = 1,
    window: int | Callable[[], int],
    on_error: Callable[[J, BaseException], Any] | None = None,
) -> Iterator[tuple[list[J], list[Any]]]:
    """Yield ``(chunk, [fn(item) for item in chunk])`` for every chunk, as tasks complete.

    The one bounded map of the package, over any ``concurrent.futures``-style executor:
    the process pool (:func:`process_pool`), :class:`InlineExecutor`, or a Dask
    client's executor (:mod:`retrieval_lib.distributed`). Items are drawn from their
    iterator only as tasks are submitted, ``chunksize`` items per task, at most
    ``window`` tasks in flight (a callable is asked again before each refill, e.g. to
    follow a cluster's workers); the window is refilled before a chunk's results are
    handed over, so the workers stay busy while the caller works. A task that fails as a
    whole gives ``on_error(item, exception)`` per item, or re-raises without
    ``on_error``; the tasks still in flight are then cancelled.

    Examples
    --------
    >>> sorted(r for _, rs in windowed_map(InlineExecutor(), abs, [-1, 2], window=1) for r in rs)
    [1, 2]
    """
    stream = iter(items)
    task = functools.partial(run_chunk, fn)
    pending: dict[Future[list[Any]], list[J]] = {}

    def fill() -> None:
        wanted = max(1, window() if callable(window) else window)
        while len(pending) < wanted:
            chunk = list(islice(stream, chunksize))
            if not chunk:
                return
            pending[executor.submit(task, chunk)] = chunk

    try:
        fill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in [f for f in pending if f in done]:  # in submission order
                chunk = pending.pop(future)
                try:
                    results = future.result()
                except Exception as exc:
                    if on_error is None:
                        raise
                    results = [on_error(item, exc) for item in chunk]
                fill()
                yield chunk, results
    finally:
        for future in pending:
            future.cancel()


@dataclass(eq=False)
class Mapper:
    """Where many runs' work runs: an executor, items per task, tasks in flight.

    The process pool (:func:`pool_mapper`) and a Dask cluster
    (:class:`~retrieval_lib.distributed.DaskMapper`) are both one of these, so
    :mod:`retrieval_lib.run_many` has one way to run work on either.

    Parameters
    ----------
    executor
        A ``concurrent.futures``-style executor.
    window
        Tasks in flight at once (a callable is asked again before each refill).
    batch_size
        Items per task unless a call says otherwise (default: :attr:`default_batch`).
    progress
        Show progress bars on stderr.

    Examples
    --------
    >>> with pool_mapper(1) as mapper:
    ...     sorted(mapper.imap_unordered(abs, [-2, 1], batch_size=1))
    [(-2, 2), (1, 1)]
    >>> mapper.last_tasks
    2
    """

    #: Items per task when neither the mapper nor the call says.
    default_batch: ClassVar[int] = 8
    #: Whether a large run's evaluation is split over several tasks (the records of its
    #: documents then stay where they were computed): only a Dask cluster can.
    splits_runs: ClassVar[bool] = False

    executor: Executor
    _: KW_ONLY
    window: int | Callable[[], int]
    batch_size: int | None = None
    progress: bool = False
    #: Tasks of the last map (for tests and benchmarks).
    last_tasks: int = field(default=0, init=False)

    def imap_batches(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        batch_size: int | None = None,
        on_error: Callable[[Any, BaseException], Any] | None = None,
    ) -> Iterator[tuple[list[Any], list[Any]]]:
        """:func:`windowed_map` on this mapper's executor and window; ``batch_size``
        items per task (default: the mapper's)."""
        size = batch_size or self.batch_size or self.default_batch
        self.last_tasks = 0
        for batch, results in windowed_map(
            self.executor, fn, items, chunksize=size, window=self.window, on_error=on_error
        ):
            self.last_tasks += 1
            yield batch, results

    def imap_unordered(
        self,
        fn: Callable[[Any], Any],
        items: Iterable[Any],
        *,
        batch_size: int | None = None,
        on_error: Callable[[Any, BaseException], Any] | None = None,
    ) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` for every item, in the order their tasks complete
        (see :meth:`imap_batches`)."""
        for batch, results in self.imap_batches(
            fn, items, batch_size=batch_size, on_error=on_error
        ):
            yield from zip(batch, results, strict=True)


@contextlib.contextmanager
def pool_mapper(workers: int, *, progress: bool = False) -> Iterator[Mapper]:
    """A :class:`Mapper` on a :func:`process_pool` of ``workers`` (:class:`InlineExecutor`
    for one), at most ``4 * workers`` tasks in flight; the pool is shut down on exit.

    Examples
    --------
    >>> with pool_mapper(2) as mapper:
    ...     sorted(result for _, result in mapper.imap_unordered(abs, range(-3, 0)))
    [1, 2, 3]
    """
    executor = process_pool(workers) if workers > 1 else InlineExecutor()
    with executor:
        yield Mapper(executor, window=4 * workers if workers > 1 else 1, progress=progress)

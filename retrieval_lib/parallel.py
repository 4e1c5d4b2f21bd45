"""A bounded, unordered parallel map over a stream of jobs: in process or a process pool.

The jobs are drawn from their iterator only as workers free up (at most ``window`` chunks
in flight), so a caller that plans its jobs lazily, one run at a time, keeps only the
jobs in flight in memory, whatever their number.

Examples
--------
>>> from retrieval_lib.parallel import imap_unordered
>>> sorted(result for _, result in imap_unordered(abs, [-2, 1, -3], workers=1))
[1, 2, 3]
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from itertools import chain, islice
from typing import Any, TypeVar

__all__ = ["die_with_parent", "imap_unordered", "process_pool", "run_chunk"]

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


def run_chunk(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``[fn(item) for item in items]``: one task of several items (picklable)."""
    return [fn(item) for item in items]


def imap_unordered(
    fn: Callable[[J], Any],
    jobs: Iterable[J],
    *,
    workers: int,
    chunksize: int = 8,
    window: int | None = None,
) -> Iterator[tuple[J, Any]]:
    """Yield ``(job, fn(job))`` for every job, in the order they finish.

    ``workers`` > 1 runs ``fn`` in that many processes, ``chunksize`` jobs per task, at
    most ``window`` tasks (default ``4 * workers``) submitted at a time; with one worker,
    or a single job, everything runs in this process in order. ``fn`` and the jobs must
    be picklable for the pool; an exception ``fn`` raises ends the iteration.
    """
    stream = iter(jobs)
    head = list(islice(stream, 2))
    if workers <= 1 or len(head) < 2:
        for job in chain(head, stream):
            yield job, fn(job)
        return
    stream = chain(head, stream)
    limit = window or 4 * workers
    with process_pool(workers) as pool:
        pending: dict[Future[list[Any]], list[J]] = {}

        def fill() -> None:
            while len(pending) < limit:
                chunk = list(islice(stream, chunksize))
                if not chunk:
                    return
                pending[pool.submit(run_chunk, fn, chunk)] = chunk

        fill()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                chunk = pending.pop(future)
                yield from zip(chunk, future.result(), strict=True)
            fill()

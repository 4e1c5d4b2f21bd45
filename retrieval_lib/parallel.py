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

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from itertools import chain, islice
from typing import Any, TypeVar

__all__ = ["imap_unordered", "run_chunk"]

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
    with ProcessPoolExecutor(max_workers=workers) as pool:
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

"""retrieval_lib.parallel: the bounded, unordered map of normalisation's process pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval_lib.parallel import (
    InlineExecutor,
    Mapper,
    pool_mapper,
    process_pool,
    windowed_map,
)


def _square(x: int) -> int:
    return x * x


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three")
    return x


class _Counted:
    """An iterator that counts how many items were drawn from it."""

    def __init__(self, n: int):
        self.n = n
        self.drawn = 0

    def __iter__(self) -> Iterator[int]:
        for i in range(self.n):
            self.drawn += 1
            yield i


@pytest.mark.parametrize("workers", [1, 2])
def test_every_job_once_with_its_result(workers: int) -> None:
    with pool_mapper(workers) as mapper:
        pairs = list(mapper.imap_unordered(_square, range(50), batch_size=3))
    assert sorted(pairs) == [(i, i * i) for i in range(50)]


def test_one_worker_runs_in_order_in_process() -> None:
    with pool_mapper(1) as mapper:
        assert [job for job, _ in mapper.imap_unordered(_square, [3, 1, 2])] == [3, 1, 2]


def test_jobs_are_drawn_only_as_the_window_frees() -> None:
    jobs = _Counted(100)
    with process_pool(2) as pool:
        results = Mapper(pool, window=2, batch_size=3).imap_unordered(_square, jobs)
        next(results)
        # two chunks of three in flight; the first came back and one more chunk was sent
        # before its results were handed over: 9 drawn, not the 100 jobs
        assert jobs.drawn == 9
        assert len(list(results)) == 99
        assert jobs.drawn == 100


def test_a_failed_task_gives_each_of_its_items_the_cause_and_the_others_finish() -> None:
    errors = lambda item, exc: f"{item}: {exc}"  # noqa: E731
    pairs = [
        pair
        for chunk, results in windowed_map(
            InlineExecutor(), _fail_on_three, range(6), chunksize=2, window=2, on_error=errors
        )
        for pair in zip(chunk, results, strict=True)
    ]
    # in process the tasks complete in order; 2 shares the failed task of 3
    assert pairs == [(0, 0), (1, 1), (2, "2: three"), (3, "3: three"), (4, 4), (5, 5)]


def test_the_window_is_asked_again_before_each_refill() -> None:
    jobs = _Counted(10)
    asked: list[int] = []

    def window() -> int:
        asked.append(len(asked))
        return 1 if len(asked) == 1 else 3  # a cluster that grew after the first count

    stream = windowed_map(InlineExecutor(), _square, jobs, chunksize=1, window=window)
    next(stream)
    # first fill: 1 task; the refill before handing over its result: 3 tasks
    assert (len(asked), jobs.drawn) == (2, 4)
    assert sorted(r for _, rs in stream for r in rs) == [i * i for i in range(1, 10)]


def test_an_exception_in_the_pool_ends_the_iteration() -> None:
    with pool_mapper(2) as mapper, pytest.raises(ValueError, match="three"):
        list(mapper.imap_unordered(_fail_on_three, range(8), batch_size=1))


#: A driver that starts a pool of two workers, prints their pids and dies without any
#: cleanup (``os._exit``, like ``kill -9``: no atexit, no pool shutdown). ``{option}``:
#: the prctl option the workers set (0, an invalid one, leaves only the watchdog).
_ORPHANING_DRIVER = """
import os, sys, time
import retrieval_lib.parallel
retrieval_lib.parallel._PR_SET_PDEATHSIG = {option}
from retrieval_lib.parallel import process_pool

def pid_after(delay):
    time.sleep(delay)
    return os.getpid()

pool = process_pool(2)
futures = [pool.submit(pid_after, 0.5) for _ in range(4)]
print(" ".join(str(p) for p in sorted({{f.result() for f in futures}})), flush=True)
pool.submit(time.sleep, 600)
pool.submit(time.sleep, 600)
time.sleep(0.3)
os._exit(0)
"""


def _running(pid: int) -> bool:

    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not __import__("sys").platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("option", [1, 0], ids=["pdeathsig", "watchdog"])
def test_pool_workers_end_with_their_driver(option: int) -> None:
    """Item 15: a driver that dies without shutting its pool down leaves no worker."""
    import os
    import signal
    import subprocess
    import sys
    import time

    result = subprocess.run(
        [sys.executable, "-c", _ORPHANING_DRIVER.format(option=option)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    pids = [int(p) for p in result.stdout.split()]
    assert len(pids) == 2, result.stderr
    deadline = time.monotonic() + 5
    while any(_running(p) for p in pids):
        if time.monotonic() > deadline:
            for pid in pids:
                if _running(pid):
                    os.kill(pid, signal.SIGKILL)
            pytest.fail(f"workers {pids} outlived their driver by 5 s")
        time.sleep(0.05)

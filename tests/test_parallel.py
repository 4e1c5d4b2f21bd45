"""retrieval_lib.parallel: the bounded, unordered map of normalisation's process pool."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from retrieval_lib.parallel import imap_unordered


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
    pairs = list(imap_unordered(_square, range(50), workers=workers, chunksize=3))
    assert sorted(pairs) == [(i, i * i) for i in range(50)]


def test_one_worker_runs_in_order_in_process() -> None:
    assert [job for job, _ in imap_unordered(_square, [3, 1, 2], workers=1)] == [3, 1, 2]


def test_jobs_are_drawn_only_as_the_window_frees() -> None:
    jobs = _Counted(100)
    results = imap_unordered(_square, jobs, workers=2, chunksize=3, window=2)
    next(results)
    # two chunks of three in flight when the first result arrives, not the 100 jobs
    assert jobs.drawn == 6
    assert len(list(results)) == 99
    assert jobs.drawn == 100


def test_an_exception_in_the_pool_ends_the_iteration() -> None:
    with pytest.raises(ValueError, match="three"):
        list(imap_unordered(_fail_on_three, range(8), workers=2, chunksize=1))

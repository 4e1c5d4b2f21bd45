"""``--scheduler`` / ``--dask-workers``: the Dask options shared by normalize, evaluate, study.

Nothing here imports dask: :func:`dask_mapper` does, and only when an option was given.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

from retrieval_lib.cli._types import positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the mutually exclusive ``--scheduler ADDRESS`` and ``--dask-workers N``."""
    group = parser.add_argument_group(
        "Dask (optional, pip install 'retrieval_lib[dask]'; --workers is then unused)"
    )
    exclusive = group.add_mutually_exclusive_group()
    exclusive.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the trials on the Dask cluster of this running scheduler "
        "(e.g. tcp://10.0.0.5:8786); every worker must see the input and --out paths",
    )
    exclusive.add_argument(
        "--dask-workers",
        type=positive_int,
        metavar="N",
        help="run the trials on a local Dask cluster of N worker processes "
        "(started and closed by the command)",
    )
    group.add_argument(
        "--dask-batch",
        type=positive_int,
        metavar="N",
        help="at most N trials (for evaluate: documents) per Dask task; a run of at most N "
        "is one task (default: a run of up to 128 trials or documents is one task, a "
        "larger run goes in tasks of 32 trials or 128 documents)",
    )


@contextlib.contextmanager
def dask_mapper(args: argparse.Namespace, *, progress: bool = False) -> Iterator[Any]:
    """A :class:`~retrieval_lib.distributed.DaskMapper` for the options, or ``None``."""
    if args.scheduler is None and args.dask_workers is None:
        yield None
        return
    from retrieval_lib.distributed import DaskSpec
    from retrieval_lib.distributed import dask_mapper as mapper

    spec = DaskSpec(scheduler=args.scheduler, workers=args.dask_workers, batch_size=args.dask_batch)
    with mapper(spec, progress=progress) as map_fn:
        yield map_fn


@contextlib.contextmanager
def mapper(args: argparse.Namespace, *, workers: int = 1, progress: bool = False) -> Iterator[Any]:
    """Where the runs go: the Dask cluster of the options, else a process pool of
    ``workers`` (in process for one): a :class:`~retrieval_lib.parallel.Mapper`."""
    with dask_mapper(args, progress=progress) as on_dask:
        if on_dask is not None:
            yield on_dask
            return
    from retrieval_lib.parallel import pool_mapper

    with pool_mapper(workers, progress=progress) as on_pool:
        yield on_pool

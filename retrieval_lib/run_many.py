"""Normalise and evaluate many runs on a :class:`~retrieval_lib.parallel.Mapper`: the one
way the CLI and the study run them, on the process pool or a Dask cluster alike.

One rule sizes the work (``docs/scale-out.md``): a run of at most
:data:`WHOLE_RUN_TRIALS` trials (or the mapper's ``batch_size``) is one task, normalised
(and, for a study, evaluated) where the task runs, so the driver never reads its
``result.json`` files; a larger run is spread over the tasks by trial, planned here one run
at a time, and evaluated as soon as its last trial is back. A run of at most
:data:`EVALUATE_BATCH` documents is evaluated by one task; a larger one too on the process
pool, and split in batches on a Dask cluster
(:func:`retrieval_lib.distributed.evaluate_split_runs`). Every run's evaluation is an
:class:`~retrieval_lib.metrics.summary.EvaluateResult` without its list of metrics files, or
the :class:`~retrieval_lib.errors.RetrievalLibError` that stopped it.

Examples
--------
>>> from retrieval_lib.parallel import pool_mapper
>>> from retrieval_lib.run_many import normalize_many  # doctest: +SKIP
>>> with pool_mapper(2) as mapper:  # doctest: +SKIP
...     report, _ = normalize_many(["runs/"], "benchmarks", mapper=mapper, out="out")
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import Any, cast

from retrieval_lib.errors import InputError, RetrievalLibError
from retrieval_lib.metrics.summary import EvaluateResult
from retrieval_lib.parallel import Mapper, task_failure

__all__ = [
    "EVALUATE_BATCH",
    "WHOLE_RUN_TRIALS",
    "evaluate_many",
    "evaluate_one",
    "normalize_many",
    "run_documents",
]

#: A run of at most this many trials (or the mapper's ``batch_size``) is one task.
WHOLE_RUN_TRIALS = 128
#: A run of at most this many documents (or the mapper's ``batch_size``) is evaluated
#: by one task; a larger one is split on a mapper that :attr:`~Mapper.splits_runs`.
EVALUATE_BATCH = 128

#: One run's evaluation: what it wrote, or why it failed.
Evaluation = EvaluateResult | RetrievalLibError


def _evaluate_batch(mapper: Mapper) -> int:
    return mapper.batch_size or EVALUATE_BATCH


# --------------------------------------------------------------------------- evaluate


def evaluate_one(events_dir: str | Path, ks: Sequence[int]) -> EvaluateResult | str:
    """In a task: :func:`~retrieval_lib.metrics.summary.evaluate_run` of one run,
    without its list of metrics files; the reason it failed if it did (a string: any
    executor can send it back)."""
    from retrieval_lib.metrics.summary import evaluate_run
    from retrieval_lib.runs import printable_path

    try:
        return evaluate_run(events_dir, k=ks).without_paths()
    except RetrievalLibError as exc:
        return str(exc)
    except OSError as exc:
        # a file system refusal (no space, a name too long) costs this run only: named,
        # and the other runs are still evaluated
        where = f": {printable_path(exc.filename)!r}" if exc.filename else ""
        return f"{printable_path(events_dir)}: {exc.strerror or exc}{where}"


def _outcome(result: EvaluateResult | str) -> Evaluation:
    """A task's outcome in the driver: the error of one that failed."""
    return InputError(result) if isinstance(result, str) else result


def run_documents(path: str | Path) -> tuple[Path, list[Path]]:
    """The absolute events folder of ``path`` and its documents (a task may run in
    another working directory).

    Raises
    ------
    InputError
        Not a folder, an incomplete normalisation, or no document.
    """
    from retrieval_lib.completion import begin_evaluate
    from retrieval_lib.metrics.summary import events_dir_of

    events_dir = events_dir_of(Path(path)).resolve()
    return events_dir, begin_evaluate(events_dir)


def evaluate_many(
    paths: Sequence[str | Path], k: Sequence[int], *, mapper: Mapper
) -> Iterator[Evaluation]:
    """Evaluate every run of ``paths``; yield each one's :data:`Evaluation` in the order
    of ``paths``.

    The runs go through the mapper's window, one task each; on a mapper that
    :attr:`~retrieval_lib.parallel.Mapper.splits_runs`, a run of more documents than a
    batch is split instead, after the others (a few such runs at a time). The files are those
    :func:`~retrieval_lib.metrics.summary.evaluate_run` writes.
    """
    from retrieval_lib.completion import remove_orphaned_temporaries
    from retrieval_lib.metrics.stages import normalize_k

    ks = normalize_k(k)
    size = _evaluate_batch(mapper)
    paths = list(paths)
    whole: list[tuple[int, Path, int]] = []
    split: list[int] = []
    ready: dict[int, Evaluation] = {}
    for i, path in enumerate(paths):
        if not mapper.splits_runs:  # every run is one task: no need to count first
            whole.append((i, Path(path), 0))
            continue
        try:
            events_dir, doc_paths = run_documents(path)
        except RetrievalLibError as exc:
            ready[i] = exc
            continue
        documents = len(doc_paths)
        if documents > size:
            split.append(i)
        else:
            whole.append((i, events_dir, documents))

    def failed(item: tuple[int, Path, int], exc: BaseException) -> str:
        return task_failure(exc)

    next_out = 0

    def in_order() -> Iterator[Evaluation]:
        nonlocal next_out
        while next_out in ready:
            yield ready.pop(next_out)
            next_out += 1

    with _progress_bar(mapper.progress, None, "document") as bar:
        evaluate = partial(_evaluate_item, ks=ks)
        for item, result in mapper.imap_unordered(evaluate, whole, batch_size=1, on_error=failed):
            ready[item[0]] = outcome = _outcome(result)
            if isinstance(outcome, EvaluateResult):
                remove_orphaned_temporaries([outcome.events_dir])
            bar.update(item[2] or getattr(outcome, "documents", 0))
            yield from in_order()
        for i, result in _evaluate_split(paths, split, ks, mapper, bar, ready) if split else ():
            ready[i] = _outcome(result)
            yield from in_order()
        yield from in_order()  # runs whose documents could not be listed


def _evaluate_item(item: tuple[int, Path, int], ks: Sequence[int]) -> EvaluateResult | str:
    return evaluate_one(item[1], ks)


def _evaluate_split(
    paths: Sequence[str | Path],
    split: Sequence[int],
    ks: Sequence[int],
    mapper: Mapper,
    bar: Any,
    ready: dict[int, Evaluation],
) -> Iterator[tuple[int, EvaluateResult | str]]:
    """The runs ``split`` (indices into ``paths``), each split over the cluster; a run
    whose documents cannot be listed any more goes to ``ready`` with its error."""
    from retrieval_lib.distributed import DaskMapper, evaluate_split_runs

    def runs() -> Iterator[tuple[int, Path, list[Path]]]:
        for i in split:
            try:
                yield (i, *run_documents(paths[i]))
            except RetrievalLibError as exc:
                ready[i] = exc

    return evaluate_split_runs(
        runs(),
        ks,
        mapper=cast(DaskMapper, mapper),  # only a DaskMapper splits runs
        size=_evaluate_batch(mapper),
        on_done=bar.update,
    )


# --------------------------------------------------------------------------- normalise


def normalize_many(
    paths: Iterable[str | Path],
    tasks_root: str | Path | None,
    *,
    mapper: Mapper,
    out: str | Path | None = None,
    k: Sequence[int] | None = None,
    progress: bool = False,
) -> tuple[Any, dict[Path, Evaluation]]:
    """Normalise every run under ``paths`` on ``mapper`` (and, given the cut-offs ``k``,
    evaluate each one as soon as it is normalised).

    Returns the :class:`~retrieval_lib.normalize.NormalizeReport` and, with ``k``, per
    run folder that got documents, its :data:`Evaluation`. The files are those of
    :func:`~retrieval_lib.normalize.normalize_paths` followed by
    :func:`~retrieval_lib.metrics.summary.evaluate_run` of each run.
    """
    from retrieval_lib.completion import remove_orphaned_temporaries
    from retrieval_lib.metrics.stages import normalize_k
    from retrieval_lib.normalize import NormalizeReport, check_tasks_root, output_root
    from retrieval_lib.runs import LeftOut

    started = time.perf_counter()
    check_tasks_root(tasks_root)
    ks = normalize_k(k) if k is not None else None
    found = LeftOut()  # entries the search for runs skipped: named in the report
    runs, small, large = _runs_by_size(paths, out, mapper.batch_size or WHOLE_RUN_TRIALS, found)
    # absolute: the tasks may run in another working directory
    root = str(Path(tasks_root).resolve()) if tasks_root is not None else None
    out_abs = str(Path(out).resolve()) if out is not None else None
    report = NormalizeReport(runs=[str(r) for r in runs], left_out=found.entries())
    results: dict[Path, Evaluation] = {}
    try:
        if small:
            whole = partial(_whole_run, tasks_root=root, out=out_abs, ks=ks)
            with _progress_bar(progress, sum(n for _, n in small)) as bar:
                for (run, n), (part, evaluation) in mapper.imap_unordered(
                    whole, small, batch_size=1, on_error=_failed_run
                ):
                    report.merge(part)
                    if evaluation is not None:
                        results[run] = _outcome(evaluation)
                    bar.update(n)
        if large:
            part, evaluated = _normalize_by_trial(large, root, mapper, out_abs, ks, progress)
            report.merge(part)
            results.update(evaluated)
    finally:
        # only now: no task writes under these folders any more
        remove_orphaned_temporaries(output_root(Path(run), out) for run in report.runs)
    report.failures.sort(key=lambda o: o.trial_dir)
    report.seconds = time.perf_counter() - started
    return report, results


def _runs_by_size(
    paths: Iterable[str | Path], out: str | Path | None, limit: int, left_out: Any
) -> tuple[list[Path], list[tuple[Path, int]], list[Path]]:
    """Every run under ``paths``, then those of at most ``limit`` trials with their trial
    counts, and the larger ones (entries skipped on the way go to ``left_out``)."""
    from retrieval_lib.normalize import find_input_runs
    from retrieval_lib.runs import discover_trials

    listings: dict[str, Any] = {}  # made while finding the runs, reused to count trials
    runs = find_input_runs(paths, out, left_out, listings)
    small: list[tuple[Path, int]] = []
    large: list[Path] = []
    for run in runs:
        n = len(discover_trials(run, left_out, listings))
        if n <= limit:
            small.append((run, n))
        else:
            large.append(run)
    return runs, small, large


def _whole_run(
    run: tuple[Path, int], tasks_root: str | None, out: str | None, ks: tuple[int, ...] | None
) -> tuple[Any, EvaluateResult | str | None]:
    """In a task: normalise one run as one process does (and evaluate it, given ``ks``);
    its report and evaluation (``None``: no document, a string: why it failed)."""
    from retrieval_lib.normalize import normalize_paths, output_root

    report = normalize_paths([run[0]], tasks_root, out=out)
    if ks is None or not report.documents:
        return report, None
    return report, evaluate_one(output_root(run[0], out), ks)


def _failed_run(run: tuple[Path, int], exc: BaseException) -> tuple[Any, None]:
    """A whole-run task the executor gave up on: each of its trials failed with that
    cause."""
    from retrieval_lib.normalize import NormalizeReport
    from retrieval_lib.runs import discover_trials

    report = NormalizeReport(runs=[str(run[0])])
    for trial in discover_trials(run[0]):
        # its result.json was never read: the trial folder names the task
        report.add(_failed_trial(trial, trial.trial_dir.name, exc))
    return report, None


def _failed_trial(trial: Any, task_name: str, exc: BaseException) -> Any:
    """The output of a trial whose task the executor gave up on (no document, the cause)."""
    from retrieval_lib.normalize import TrialOutput

    return TrialOutput(
        str(trial.trial_dir), None, task_name, trial.config_name, 0, 0, None, task_failure(exc)
    )


def _failed_output(job: tuple[Any, ...], exc: BaseException) -> Any:
    return _failed_trial(job[0], job[1].task_name, exc)  # job: (trial, its result, ...)


def _normalize_by_trial(
    runs: Sequence[Path],
    tasks_root: str | None,
    mapper: Mapper,
    out: str | None,
    ks: tuple[int, ...] | None,
    progress: bool,
) -> tuple[Any, dict[Path, Evaluation]]:
    """Large runs: trials in batches over the mapper (planned here, one run at a time);
    with ``ks``, each run evaluated as soon as its last trial is back."""
    from retrieval_lib.normalize import normalize_paths

    size = _evaluate_batch(mapper)
    in_flight: dict[Path, Future[Any]] = {}
    split: dict[Path, Path] = {}
    results: dict[Path, Evaluation] = {}

    def run_done(run: str, out_root: Path, documents: int) -> None:
        for finished in [r for r, f in in_flight.items() if f.done()]:
            results[finished] = _outcome(in_flight.pop(finished).result())
        if ks is None or documents == 0:
            return
        if documents <= size or not mapper.splits_runs:
            in_flight[Path(run)] = mapper.executor.submit(evaluate_one, out_root.resolve(), ks)
        else:
            split[Path(run)] = out_root

    map_fn = partial(mapper.imap_unordered, on_error=_failed_output)
    try:
        report = normalize_paths(
            runs, tasks_root, out=out, progress=progress, map_fn=map_fn, on_run_done=run_done
        )
        for run in list(in_flight):
            results[run] = _outcome(in_flight.pop(run).result())
        if split:
            evaluated = evaluate_many(list(split.values()), ks or (), mapper=mapper)
            results.update(zip(split, evaluated, strict=True))
    finally:
        for future in in_flight.values():
            future.cancel()
    return report, results


def _progress_bar(shown: bool, total: int | None, unit: str = "trial") -> Any:
    """A tqdm bar on stderr; a disabled one (shows nothing) unless ``shown``."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, leave=False, disable=not shown)

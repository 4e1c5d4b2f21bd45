"""retrieval_lib.run_many on the process pool: the one way the CLI and the study
normalise and evaluate many runs (the Dask side: tests/test_distributed.py).

The reference is the single-process path, run in the same test: ``normalize_paths``
with one worker, then ``evaluate_run`` of each run; every file must be the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.metrics.summary import EvaluateResult, evaluate_run
from retrieval_lib.normalize import normalize_paths
from retrieval_lib.parallel import pool_mapper
from retrieval_lib.run_many import evaluate_many, normalize_many
from retrieval_lib.runs import discover_runs, discover_trials


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Synthetic runs of both layouts, and their single-process outputs."""
    from retrieval_lib.synth import generate_runs

    data = tmp_path_factory.mktemp("synth") / "data"
    generate_runs(data, n_tasks=10, seed=11)
    runs, tasks = data / "runs", data / "benchmarks"
    single = data / "single"
    normalize_paths([runs], tasks, out=single, workers=1)
    for run in sorted(single.iterdir()):
        evaluate_run(run)
    return runs, tasks, single


@pytest.mark.parametrize(
    ("workers", "batch_size"),
    [(1, None), (2, None), (2, 1)],  # in process; whole runs; every run by trial
)
def test_normalised_and_evaluated_on_the_pool_byte_for_byte(synth, tmp_path, workers, batch_size):
    runs, tasks, single = synth
    sizes = {run: len(discover_trials(run)) for run in discover_runs([runs.resolve()])}
    with pool_mapper(workers) as mapper:
        mapper.batch_size = batch_size
        report, evaluated = normalize_many([runs], tasks, mapper=mapper, out=tmp_path, k=(1, 3))
        if batch_size == 1:  # the runs spread by trial, one trial per task
            assert mapper.last_tasks == sum(sizes.values())
    assert (report.trials, report.failed) == (sum(sizes.values()), 0)
    assert sorted(evaluated) == sorted(sizes)
    for result in evaluated.values():
        # one result type, small: the number of metrics files, not their list
        assert isinstance(result, EvaluateResult) and result.metrics_paths == []
        assert result.metrics_files == result.documents > 0
    # evaluate_run's default cut-offs differ from k=(1, 3): evaluate again to compare
    with pool_mapper(workers) as mapper:
        again = list(evaluate_many(sorted(tmp_path.iterdir()), (1, 3, 5, 10), mapper=mapper))
    assert [r.documents for r in again] == [
        len(list(run.rglob("*.retrieval_events.json"))) for run in sorted(tmp_path.iterdir())
    ]
    assert _files(tmp_path) == _files(single)


def test_evaluate_many_yields_in_the_order_given_with_the_error_of_a_failed_run(synth, tmp_path):
    runs, tasks, single = synth
    good = sorted(single.iterdir())
    with pool_mapper(2) as mapper:
        results = list(evaluate_many([good[0], tmp_path / "missing", good[1]], (1,), mapper=mapper))
    assert [type(r) for r in results] == [EvaluateResult, InputError, EvaluateResult]
    assert [r.events_dir.parent.name for r in (results[0], results[2])] == [
        good[0].name,
        good[1].name,
    ]
    assert f"not a folder: {tmp_path / 'missing'}" == str(results[1])


def test_a_tasks_root_that_is_not_a_folder_is_refused_before_anything_runs(synth, tmp_path):
    runs, _, _ = synth
    with pool_mapper(1) as mapper, pytest.raises(InputError, match="is not a folder"):
        normalize_many([runs], tmp_path / "nowhere", mapper=mapper, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _listing(root: Path) -> dict[str, bytes | None]:
    """Every entry below ``root`` with its bytes (``None``: a folder)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else None
        for p in root.rglob("*")
    }


def test_evaluating_a_raw_run_fails_clearly_and_writes_nothing_in_it(tmp_path):
    import shutil

    from retrieval_lib.run_many import run_documents

    raw = Path(__file__).resolve().parents[1] / "examples" / "runs" / "official"
    run = tmp_path / "run"
    shutil.copytree(raw / "csb_synth_haiku_20260301_091500", run)
    before = _listing(run)
    assert before and not (run / "retrieval_events").exists()
    message = f"no retrieval-event documents (*.retrieval_events.json) found under {run}"
    with pool_mapper(1) as mapper:
        assert [str(r) for r in evaluate_many([run], (1,), mapper=mapper)] == [message]
    with pytest.raises(InputError) as excinfo:
        evaluate_run(run)
    assert str(excinfo.value) == message
    with pytest.raises(InputError, match="no retrieval-event documents"):
        run_documents(run)  # the Dask side's listing of a run's documents
    assert _listing(run) == before  # no completion_record.json, nothing else

"""Scale-out on Dask (retrieval_lib.distributed, --scheduler / --dask-workers).

The reference is always the single-process path run in the same test: every file it
writes must come out byte for byte the same through the cluster. The cluster tests use a
LocalCluster of two worker processes on 127.0.0.1 started by a module fixture; the fault
test starts ``dask scheduler`` and two ``dask worker`` processes itself and kills a
worker with SIGKILL while ``retrieval-lib normalize --scheduler`` runs, then (a third
worker having joined) another while ``retrieval-lib evaluate --scheduler`` runs.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from retrieval_lib.distributed import DaskMapper  # noqa: E402
from retrieval_lib.metrics.summary import evaluate_run  # noqa: E402
from retrieval_lib.normalize import normalize_paths  # noqa: E402
from retrieval_lib.run_many import evaluate_many, normalize_many  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "csb"


def _files(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` by relative path (temporary files included)."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _assert_same_tree(expected: Path, actual: Path) -> None:
    want, got = _files(expected), _files(actual)
    assert sorted(got) == sorted(want)
    differing = [name for name in want if want[name] != got[name]]
    assert differing == []


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Synthetic runs of both layouts: repeated trials, degraded trials, tasks without
    ground truth (generated, so the whole variety of documents is exercised)."""
    from retrieval_lib.synth import generate_runs

    data = tmp_path_factory.mktemp("synth") / "data"
    generate_runs(data, n_tasks=22, seed=7)
    return data / "runs", data / "benchmarks"


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        # its HTTP server (health checks) on a free port, not the default 8787
        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
    )
    dask_client = Client(cluster)
    try:
        yield dask_client
    finally:
        dask_client.close()
        cluster.close()


def _reference(runs: Path, tasks: Path, out: Path) -> None:
    normalize_paths([runs], tasks, out=out, workers=1)
    for run in sorted(out.iterdir()):
        evaluate_run(run)


def test_normalize_and_evaluate_on_a_cluster_are_byte_identical(synth, client, tmp_path):
    runs, tasks = synth
    _reference(runs, tasks, tmp_path / "single")

    mapper = DaskMapper(client, batch_size=1)  # one trial per task
    # every run spread over the cluster by trial (more trials than the batch size)
    report, _ = normalize_many([runs], tasks, out=tmp_path / "dask", mapper=mapper)
    assert report.trials == report.documents == mapper.last_tasks > 20
    assert report.failed == 0
    assert report.trials == len(list((tmp_path / "single").rglob("*.retrieval_events.json")))
    # what the driver keeps is counts, not one record per trial
    assert len(pickle.dumps(report)) < 2_000

    mapper = DaskMapper(client, batch_size=3)
    run_dirs = sorted((tmp_path / "dask").iterdir())
    documents = [len(list(run.rglob("*.retrieval_events.json"))) for run in run_dirs]
    # every run split in tasks of 3 documents, the runs in flight together, the results
    # in the order given
    results = list(evaluate_many(run_dirs, (1, 3, 5, 10), mapper=mapper))
    assert [r.documents for r in results] == documents and len(documents) > 1
    assert [r.events_dir.parent.name for r in results] == [run.name for run in run_dirs]
    assert mapper.last_tasks == sum(-(-n // 3) for n in documents)
    for result in results:
        # the run summary and table were written by a worker: no record, no list of
        # metrics files came back, only their number
        assert not hasattr(result, "records") and result.metrics_paths == []
        assert result.metrics_files == result.documents
        assert result.summary_path.is_file() and result.failures == []
    _assert_same_tree(tmp_path / "single", tmp_path / "dask")


def test_small_runs_are_normalised_and_evaluated_whole_on_a_cluster(synth, client, tmp_path):
    from retrieval_lib.run_many import WHOLE_RUN_TRIALS
    from retrieval_lib.runs import discover_runs, discover_trials

    runs, tasks = synth
    sizes = [len(discover_trials(run)) for run in discover_runs([runs])]
    assert sizes and max(sizes) <= WHOLE_RUN_TRIALS  # each run is one task
    _reference(runs, tasks, tmp_path / "single")
    report, evaluated = normalize_many(
        [runs], tasks, k=(1, 3, 5, 10), mapper=DaskMapper(client), out=tmp_path / "dask"
    )
    assert (report.trials, report.failed) == (sum(sizes), 0)
    assert sorted(evaluated) == sorted(discover_runs([runs.resolve()]))
    assert sum(e.documents for e in evaluated.values()) == report.documents
    _assert_same_tree(tmp_path / "single", tmp_path / "dask")


def test_a_whole_run_task_given_up_fails_each_of_its_trials_with_the_cause(synth):
    from retrieval_lib.run_many import _failed_run
    from retrieval_lib.runs import discover_runs, discover_trials

    run = discover_runs([synth[0]])[0]
    trials = discover_trials(run)
    report, evaluation = _failed_run((run, len(trials)), RuntimeError("worker lost"))
    assert evaluation is None
    assert (report.trials, report.documents, report.failed) == (len(trials), 0, len(trials))
    assert {o.trial_dir for o in report.failures} == {str(t.trial_dir) for t in trials}
    assert {o.error for o in report.failures} == {"task failed: RuntimeError: worker lost"}


@pytest.mark.skipif(not CORPUS.is_dir(), reason="real corpus ../shared/corpus/csb is absent")
def test_real_runs_through_the_cli_with_a_local_cluster(tmp_path):
    """``--dask-workers`` starts and closes its own LocalCluster; real CSB runs."""
    from retrieval_lib.cli import main

    args = [str(CORPUS / "runs"), "--tasks-root", str(CORPUS / "benchmarks")]
    assert main(["normalize", *args, "--out", str(tmp_path / "single"), "--workers", "1"]) == 0
    assert main(["evaluate", str(tmp_path / "single")]) == 0
    assert main(["normalize", *args, "--out", str(tmp_path / "dask"), "--dask-workers", "1"]) == 0
    assert main(["evaluate", str(tmp_path / "dask"), "--dask-workers", "1"]) == 0
    _assert_same_tree(tmp_path / "single", tmp_path / "dask")


def test_study_preparation_on_a_cluster(synth, client, tmp_path):
    from retrieval_lib.study.loader import prepare_runs, read_evaluated

    runs, tasks = synth
    single = prepare_runs([runs], tasks, out=tmp_path / "single")
    dask = prepare_runs(
        [runs], tasks, out=tmp_path / "dask", map_fn=DaskMapper(client, batch_size=4)
    )
    assert dask.normalized == single.normalized and len(single.normalized) == 2
    _assert_same_tree(tmp_path / "single", tmp_path / "dask")
    # ... so the second pass reuses them, and the study tables are the same
    again = prepare_runs([runs], tasks, out=tmp_path / "dask", map_fn=DaskMapper(client))
    assert again.reused == single.normalized and again.normalized == []
    a, b = read_evaluated(single.events_dirs), read_evaluated(dask.events_dirs)
    assert len(a.trials) > 20
    assert a.trials.equals(b.trials)
    assert a.events.equals(b.events)


def _explode(item: int) -> int:
    if item == 3:
        raise RuntimeError("trial 3 is broken")
    return item * 10


def test_a_failing_task_is_reported_and_the_others_finish(client):
    mapper = DaskMapper(client, batch_size=2)
    done: list[int] = []
    by_item = {}
    batches = mapper.imap_batches(
        _explode, range(7), on_error=lambda item, exc: f"failed {item}: {exc}"
    )
    for batch, batch_results in batches:
        by_item.update(zip(batch, batch_results, strict=True))
        done.append(len(batch))
    results = [by_item[item] for item in range(7)]
    # items 2 and 3 share a task: both are reported with the cause, the rest computed
    assert results == [
        0,
        10,
        "failed 2: trial 3 is broken",
        "failed 3: trial 3 is broken",
        40,
        50,
        60,
    ]
    assert sorted(done) == [1, 2, 2, 2]
    with pytest.raises(RuntimeError, match="trial 3 is broken"):
        list(mapper.imap_unordered(_explode, [3]))


def test_items_are_drawn_only_as_the_window_frees(client):
    drawn = []

    def items():
        for i in range(40):
            drawn.append(i)
            yield i

    mapper = DaskMapper(client, batch_size=2, window=3)
    stream = mapper.imap_unordered(_explode, items(), on_error=lambda item, exc: None)
    next(stream)
    # three tasks of two were in flight, the first came back and one more was sent
    assert len(drawn) == 8
    rest = list(stream)
    assert len(rest) == 39 and len(drawn) == 40 and mapper.last_tasks == 20


def _profiler_enabled() -> bool:
    import dask

    return dask.config.get("distributed.worker.profile.enabled")


def test_a_local_cluster_of_ours_runs_its_workers_without_the_profiler():
    from retrieval_lib.distributed import DaskSpec, dask_client

    with dask_client(DaskSpec(workers=1)) as started:
        assert list(started.run(_profiler_enabled).values()) == [False]


def test_orphaned_temporary_files_are_removed(tmp_path):
    from retrieval_lib.completion import remove_orphaned_temporaries

    events = tmp_path / "run" / "retrieval_events"
    folder = events / "baseline"
    dataset = events / "retrieval_metrics_dataset"
    folder.mkdir(parents=True)
    dataset.mkdir()
    keep = [
        folder / "t.retrieval_events.json",
        folder / ".notes.txt.abc123.tmp",  # not ours
        folder / ".t.parquet.abc123.tmp",  # not in the dataset folder
        dataset / "baseline.parquet",
    ]
    drop = [
        folder / ".t.retrieval_events.json.k2j_9x.tmp",
        folder / ".t.retrieval_metrics.json.0aa1bc.tmp",
        # the run summary, table and dataset part written by the last task of a run
        events / ".run_retrieval_summary.json.3qreylsp.tmp",
        events / ".retrieval_metrics.parquet.icg9u1zv.tmp",
        events / ".retrieval_metrics.csv.x_1.tmp",
        dataset / ".baseline-local-direct.parquet.f113h3d4.tmp",
    ]
    for path in keep + drop:
        path.write_text("x")
    assert remove_orphaned_temporaries([tmp_path / "run", tmp_path / "missing"]) == 6
    left = sorted(p for p in events.rglob("*") if p.is_file())
    assert left == sorted(keep)


def test_without_the_options_dask_is_never_imported(tmp_path):
    """normalize and evaluate without --scheduler/--dask-workers do not load dask."""
    runs = REPO / "tests" / "fixtures" / "runs" / "official"
    tasks = REPO / "tests" / "fixtures" / "tasks"
    code = (
        "import sys\n"
        "from retrieval_lib.cli import main\n"
        f"main(['normalize', {str(runs)!r}, '--tasks-root', {str(tasks)!r}, "
        f"'--out', {str(tmp_path)!r}, '--workers', '1', '--quiet'])\n"
        f"main(['evaluate', {str(tmp_path)!r}])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('dask', 'distributed', 'scipy', 'matplotlib')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert list(tmp_path.rglob("*.retrieval_metrics.json"))  # it did run


def test_an_unreachable_scheduler_is_an_input_error():
    import socket

    from retrieval_lib.distributed import DaskSpec, dask_client
    from retrieval_lib.errors import InputError

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        pytest.raises(InputError, match="cannot reach the Dask scheduler"),
        dask_client(DaskSpec(scheduler=f"tcp://127.0.0.1:{port}", timeout=1)),
    ):
        pass


def test_the_dask_options_exclude_each_other(capsys):
    from retrieval_lib.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["evaluate", ".", "--scheduler", "tcp://127.0.0.1:1", "--dask-workers", "2"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# --------------------------------------------------------------------------- kill -9


def _dask(*args: str, log: Path) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("dask")
    handle = log.open("w")
    return subprocess.Popen(
        [str(exe), *args], stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )


def _worker(address: str, name: str, folder: Path, *options: str) -> subprocess.Popen:
    """A ``dask worker`` of one thread without a nanny (so a killed worker stays dead)."""
    return _dask(
        "worker",
        address,
        "--name",
        name,
        "--nthreads",
        "1",
        "--no-nanny",
        "--host",
        "127.0.0.1",
        "--no-dashboard",
        "--local-directory",
        str(folder / name),
        *options,
        log=folder / f"{name}.log",
    )


@pytest.fixture
def dask_scheduler(tmp_path):
    """A ``dask scheduler`` process on 127.0.0.1 (free port): its address and a dict of
    processes holding it. Every process in the dict (the workers and commands the test
    adds included) is stopped at the end, the last added first."""
    scheduler_file = tmp_path / "scheduler.json"
    procs: dict[str, subprocess.Popen] = {}
    try:
        procs["scheduler"] = _dask(
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-dashboard",
            "--dashboard-address",
            "127.0.0.1:0",
            "--scheduler-file",
            str(scheduler_file),
            log=tmp_path / "scheduler.log",
        )
        deadline = time.monotonic() + 60
        while not scheduler_file.is_file() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        yield address, procs
    finally:
        # workers first (a worker whose scheduler is gone keeps trying to reconnect)
        for proc in reversed(procs.values()):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster_processes(dask_scheduler, tmp_path):
    """``dask scheduler`` and two ``dask worker`` processes (no nanny: a killed worker
    stays dead) on 127.0.0.1, free ports; all stopped at the end, including workers the
    test adds to the dict it gets."""
    address, procs = dask_scheduler
    for name in ("w0", "w1"):
        procs[name] = _worker(address, name, tmp_path)
    return address, procs


def _worker_names(watcher) -> dict[str, str]:
    """Address -> name of every worker the scheduler knows now."""
    return {a: w["name"] for a, w in watcher.scheduler_info()["workers"].items()}


def _wait_for_worker_names(watcher, names: set[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while set(_worker_names(watcher).values()) != names:
        assert time.monotonic() < deadline, f"workers {_worker_names(watcher)}, not {names}"
        time.sleep(0.05)


def _kill_a_busy_worker_mid_run(
    command: list[str], out: Path, pattern: str, at_least: int, watcher, procs
) -> tuple[str | None, int, subprocess.CompletedProcess]:
    """Run ``command`` and, once ``at_least`` files matching ``pattern`` are under ``out``
    while the scheduler shows a worker processing tasks, SIGKILL that worker. Return its
    name (None if the command ended first), how many such files there were at the kill,
    and the finished command."""
    names = _worker_names(watcher)
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim, written = None, 0
    try:
        deadline = time.monotonic() + 120
        while victim is None and run.poll() is None and time.monotonic() < deadline:
            written = len(list(out.rglob(pattern))) if out.is_dir() else 0
            busy = [a for a, keys in watcher.processing().items() if keys]
            if written >= at_least and busy:
                victim = names[busy[0]]
                os.kill(procs[victim].pid, signal.SIGKILL)
            else:
                time.sleep(0.02)
        stdout, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:  # the test failed: do not leave the command running
            run.kill()
            run.communicate()
    return victim, written, subprocess.CompletedProcess(command, run.returncode, stdout, stderr)


@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(tmp_path, cluster_processes):
    """``normalize --scheduler`` loses a worker mid-run; a third worker joins; then
    ``evaluate --scheduler --dask-batch 1`` loses one of the two mid-run as well. Every
    file written (documents, metrics files, run summaries, tables, the partitioned
    dataset) is the single-process one, byte for byte, and no temporary file is left."""
    from distributed import Client

    from retrieval_lib.events.document import DOCUMENT_SUFFIX, METRICS_SUFFIX
    from retrieval_lib.synth import generate_runs

    address, procs = cluster_processes
    data = tmp_path / "data"
    # traces padded to ~150 KB; six batch-layout runs (and the archived one) so that
    # evaluating one document per task lasts long enough to be interrupted
    generate_runs(data, n_tasks=40, seed=3, transcript_target_bytes=150_000, n_runs=6)
    runs, tasks = data / "runs", data / "benchmarks"
    single = tmp_path / "single"
    _reference(runs, tasks, single)
    total = len(list(single.rglob("*" + DOCUMENT_SUFFIX)))
    metrics_total = len(list(single.rglob("*" + METRICS_SUFFIX)))
    run_count = len(list(single.iterdir()))
    assert run_count == 7 and metrics_total == total > 400

    out = tmp_path / "dask"
    cli = [sys.executable, "-m", "retrieval_lib"]
    with Client(address, timeout="60s") as watcher:
        watcher.wait_for_workers(2, timeout=60)
        victim, written_at_kill, done = _kill_a_busy_worker_mid_run(
            [*cli, "normalize", str(runs), "--tasks-root", str(tasks), "--out", str(out)]
            + ["--scheduler", address, "--dask-batch", "1", "--quiet"],
            out,
            "*" + DOCUMENT_SUFFIX,
            total // 4,
            watcher,
            procs,
        )
        assert victim is not None, "normalize ended before a worker could be killed"
        assert procs[victim].wait(timeout=10) == -signal.SIGKILL
        assert total // 4 <= written_at_kill < total  # killed in the middle of the run
        assert done.returncode == 0, done.stderr
        assert f"{total} trials: {total} documents" in done.stdout

        # a third worker joins, so that two are there again when one is killed
        procs["w2"] = _worker(address, "w2", tmp_path)
        survivors = {"w0", "w1", "w2"} - {victim}
        _wait_for_worker_names(watcher, survivors)
        second, metrics_at_kill, done = _kill_a_busy_worker_mid_run(
            [*cli, "evaluate", str(out), "--scheduler", address, "--dask-batch", "1"],
            out,
            "*" + METRICS_SUFFIX,
            metrics_total // 4,
            watcher,
            procs,
        )
        assert second is not None, "evaluate ended before a worker could be killed"
        assert procs[second].wait(timeout=10) == -signal.SIGKILL
        assert second in survivors
        assert metrics_total // 4 <= metrics_at_kill < metrics_total  # in the middle
        assert done.returncode == 0, done.stderr
        # the scheduler lost the victim; the one left did the rest
        _wait_for_worker_names(watcher, survivors - {second})
    assert done.stdout.count(" 0 invalid, ") == run_count
    wrote = [int(n) for n in re.findall(r"wrote (\d+) metrics files", done.stdout)]
    assert len(wrote) == run_count and sum(wrote) == metrics_total
    # nothing lost, nothing twice, no temporary file left: the same tree, byte for byte
    assert [p for p in out.rglob("*") if p.name.startswith(".")] == []
    _assert_same_tree(single, out)


#: ``dask worker --preload``: the first worker about to rename a temporary file into a
#: path matching $STALL_PATTERN writes its pid and the temporary file's path to
#: $STALL_MARKER and stalls there (until it is killed), its temporary file on disk.
STALL_PRELOAD = """
import fnmatch, os, time

_replace = getattr(os.replace, "unpatched", os.replace)  # the worker imports this twice


def replace(src, dst, *args, **kwargs):
    if fnmatch.fnmatch(os.fsdecode(dst), os.environ["STALL_PATTERN"]):
        try:
            fd = os.open(os.environ["STALL_MARKER"], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, f"{os.getpid()}\\n{src}".encode())
            os.close(fd)
            time.sleep(600)
    return _replace(src, dst, *args, **kwargs)


replace.unpatched = _replace
os.replace = replace
"""


# the table is CSV and there is no dataset without pyarrow
_needs_pyarrow = pytest.mark.skipif(
    importlib.util.find_spec("pyarrow") is None, reason="pyarrow is absent"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "pattern",
    [
        "*/retrieval_events/run_retrieval_summary.json",
        pytest.param("*/retrieval_events/retrieval_metrics.parquet", marks=_needs_pyarrow),
        pytest.param(
            "*/retrieval_events/retrieval_metrics_dataset/*.parquet", marks=_needs_pyarrow
        ),
    ],
)
def test_a_worker_killed_while_writing_a_run_output_leaves_no_temporary_file(
    tmp_path, dask_scheduler, pattern, monkeypatch
):
    """The last task of a run's evaluation writes its summary, table and dataset; its
    worker is killed in the middle of one of these atomic writes (temporary file
    written, not yet renamed). The task reruns on the other worker, and the command
    still leaves exactly the single-process files."""
    from retrieval_lib.synth import generate_runs

    address, procs = dask_scheduler
    data = tmp_path / "data"
    generate_runs(data, n_tasks=12, seed=5)
    runs, tasks = data / "runs", data / "benchmarks"
    _reference(runs, tasks, tmp_path / "single")
    out = tmp_path / "dask"
    normalize_paths([runs], tasks, out=out, workers=1)

    preload = tmp_path / "stall_preload.py"
    preload.write_text(STALL_PRELOAD)
    marker = tmp_path / "stalled"
    monkeypatch.setenv("STALL_PATTERN", pattern)
    monkeypatch.setenv("STALL_MARKER", str(marker))
    for name in ("w0", "w1"):
        procs[name] = _worker(address, name, tmp_path, "--preload", str(preload))
    evaluate = subprocess.Popen(
        [sys.executable, "-m", "retrieval_lib", "evaluate", str(out), "--scheduler", address],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs["evaluate"] = evaluate  # stopped at the end should the test fail before
    deadline = time.monotonic() + 120
    while not marker.is_file() or not marker.read_text().endswith(".tmp"):
        assert evaluate.poll() is None, evaluate.communicate()
        assert time.monotonic() < deadline, "no worker wrote a run output"
        time.sleep(0.02)
    pid, temporary = marker.read_text().split("\n")
    victim = {proc.pid: name for name, proc in procs.items()}[int(pid)]
    assert victim in ("w0", "w1") and Path(temporary).is_file()  # stalled mid-write
    os.kill(procs[victim].pid, signal.SIGKILL)
    stdout, stderr = evaluate.communicate(timeout=120)
    assert procs[victim].wait(timeout=10) == -signal.SIGKILL
    assert evaluate.returncode == 0, stderr
    assert stdout.count(" 0 invalid, ") == 2
    assert not Path(temporary).exists()
    _assert_same_tree(tmp_path / "single", out)

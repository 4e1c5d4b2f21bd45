"""Interrupted work is visible (issue 18, items 15 and 16).

``kill -9`` of the driver of ``normalize --workers 2``, ``evaluate`` and ``study`` (process
pool, and a local Dask cluster where the dask extra is installed): no process of the
command is left after 5 s, and the next command either completes the run or refuses the
partial one by name, never a silent partial result. The commands are stalled at a known
point by a ``sitecustomize`` that wraps ``os.replace`` (every atomic write ends with
one): after ``STALL_AFTER`` renames into paths matching ``STALL_PATTERN`` the process
marks itself and sleeps, so the kill lands in the middle of the run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: ``retrieval_lib.completion.COMPLETION_FILENAME`` (contracts §6), read here as plain
#: JSON so the tests run against any version of the package.
COMPLETION_FILENAME = "completion_record.json"

pytestmark = pytest.mark.slow

STALL_SITECUSTOMIZE = """
import fnmatch, os, time

if os.environ.get("STALL_PATTERN"):
    _replace = os.replace
    _count = [0]

    def replace(src, dst, *args, **kwargs):
        result = _replace(src, dst, *args, **kwargs)
        if fnmatch.fnmatch(os.fsdecode(dst), os.environ["STALL_PATTERN"]):
            _count[0] += 1
            if _count[0] >= int(os.environ.get("STALL_AFTER", "1")):
                marker = os.environ["STALL_MARKER"] + "." + str(os.getpid())
                with open(marker, "w") as handle:
                    handle.write(os.fsdecode(dst))
                time.sleep(600)
        return result

    os.replace = replace
"""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two synthetic runs (batch and archived layout) of a few dozen trials each."""
    from retrieval_lib.synth import generate_runs

    root = tmp_path_factory.mktemp("interrupted") / "data"
    generate_runs(root, n_tasks=11, seed=11)
    return root / "runs", root / "benchmarks"


def read_record(events: Path) -> dict:
    return json.loads((events / COMPLETION_FILENAME).read_text())


def _descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "retrieval_lib", *map(str, args)]


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_command(*args), capture_output=True, text=True, timeout=300)


def _kill_when_stalled(
    args: list[str | Path], tmp_path: Path, pattern: str, after: int, *, min_procs: int = 0
) -> set[int]:
    """Start the command stalled after ``after`` writes matching ``pattern`` (in some
    process of it), ``kill -9`` its driver; return the descendants it had then."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(STALL_SITECUSTOMIZE)
    marker = tmp_path / "stalled"
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        STALL_PATTERN=pattern,
        STALL_AFTER=str(after),
        STALL_MARKER=str(marker),
    )
    log = (tmp_path / "killed.log").open("w")  # not a pipe: orphans would hold it open
    driver = subprocess.Popen(
        _command(*args), env=env, stdout=log, stderr=log, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("stalled.*")):
            assert driver.poll() is None, (tmp_path / "killed.log").read_text()
            assert time.monotonic() < deadline, "the command never stalled"
            time.sleep(0.02)
        time.sleep(0.3)  # the other workers reach their own stall
        family = _descendants(driver.pid)
        assert len(family) >= min_procs, family
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    except BaseException:
        os.killpg(driver.pid, signal.SIGKILL)
        raise
    finally:
        log.close()
        for leftover in tmp_path.glob("stalled.*"):
            leftover.unlink()
    return family


def _assert_all_gone(family: set[int], seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while any(_alive(pid) for pid in family):
        if time.monotonic() > deadline:
            alive = sorted(pid for pid in family if _alive(pid))
            for pid in alive:  # leave nothing behind for the next tests
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"processes {alive} outlived their killed driver by {seconds} s")
        time.sleep(0.05)


def _documents(out: Path) -> int:
    return len(list(out.rglob("*.retrieval_events.json")))


def _trials(runs: Path) -> int:
    from retrieval_lib.runs import discover_runs, discover_trials

    return sum(len(discover_trials(r)) for r in discover_runs([runs]))


# --------------------------------------------------------------------------- pool


def test_killed_normalize_leaves_no_worker_and_evaluate_refuses_the_partial_run(data, tmp_path):
    runs, tasks = data
    out = tmp_path / "out"
    family = _kill_when_stalled(
        ["normalize", runs, "--tasks-root", tasks, "--out", out, "--workers", "2", "--quiet"],
        tmp_path,
        "*.retrieval_events.json",
        3,
        min_procs=2,
    )
    _assert_all_gone(family)
    partial = _documents(out)
    assert 0 < partial < _trials(runs)
    incomplete = [
        d
        for d in sorted(out.glob("*/retrieval_events"))
        if not read_record(d)["normalize"]["complete"]
    ]
    assert incomplete
    # evaluate refuses the partial run by name, with the command that completes it
    result = _run("evaluate", out)
    assert result.returncode == 1
    name = incomplete[0].parent.name
    assert f"run {name!r}" in result.stderr
    assert "normalisation is incomplete" in result.stderr
    run = next(r for r in runs.rglob(name) if r.is_dir())
    assert f"retrieval-lib normalize {run} --tasks-root {tasks} --out {out}" in result.stderr
    assert not (incomplete[0] / "run_retrieval_summary.json").exists()
    assert "Traceback" not in result.stderr
    # impact finds no table of it; the next normalize completes the run
    assert _run("impact", out).returncode != 0
    assert _run("normalize", runs, "--tasks-root", tasks, "--out", out, "--quiet").returncode == 0
    assert _documents(out) == _trials(runs)
    assert _run("evaluate", out).returncode == 0


def test_killed_evaluate_is_refused_by_impact_and_redone_by_evaluate(data, tmp_path):
    runs, tasks = data
    out = tmp_path / "out"
    assert _run("normalize", runs, "--tasks-root", tasks, "--out", out, "--quiet").returncode == 0
    events = sorted(out.glob("*/retrieval_events"))
    # a complete evaluate first: its summary and table must not be used after the kill
    assert _run("evaluate", out).returncode == 0
    family = _kill_when_stalled(["evaluate", out], tmp_path, "*.retrieval_metrics.json", 5)
    _assert_all_gone(family)
    partial = [e for e in events if read_record(e)["evaluate"] == {"complete": False}]
    assert len(partial) == 1
    study = ["study", partial[0].parent, "--tasks-root", tasks, "--out", tmp_path / "s"]
    for command in (["impact", out], [*study, "--no-report"]):
        result = _run(*command)
        assert result.returncode != 0, (command, result.stdout)
        assert f"run {partial[0].parent.name!r}" in result.stderr, result.stderr
        assert "evaluation is incomplete" in result.stderr
        assert f"retrieval-lib evaluate {partial[0]}" in result.stderr
        assert "Traceback" not in result.stderr
    assert _run("evaluate", out).returncode == 0
    assert _run("impact", out, "--n-boot", "200").returncode == 0


def test_killed_study_leaves_no_worker_and_the_next_study_redoes_the_run(data, tmp_path):
    runs, tasks = data
    out = tmp_path / "out"
    args = ["study", runs, "--tasks-root", tasks, "--out", out, "--workers", "2", "--no-report"]
    family = _kill_when_stalled(args, tmp_path, "*.retrieval_events.json", 3, min_procs=2)
    _assert_all_gone(family)
    assert 0 < _documents(out) < _trials(runs)
    result = _run(*args)
    assert result.returncode == 0, result.stderr
    assert "up to date, reused" not in result.stdout
    assert _documents(out) == _trials(runs)
    import pandas as pd

    tables = out / "study" / "tables"
    trials = (
        pd.read_parquet(tables / "trials.parquet")
        if (tables / "trials.parquet").is_file()
        else pd.read_csv(tables / "trials.csv")
    )
    assert len(trials) == _trials(runs)


# --------------------------------------------------------------------------- Dask


_needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="the dask extra is absent"
)


@_needs_dask
def test_killed_dask_normalize_leaves_no_process_and_evaluate_refuses_the_partial_run(
    data, tmp_path
):
    runs, tasks = data
    out = tmp_path / "out"
    family = _kill_when_stalled(
        [
            "normalize",
            runs,
            "--tasks-root",
            tasks,
            "--out",
            out,
            "--dask-workers",
            "2",
            "--dask-batch",
            "4",
            "--quiet",
        ],
        tmp_path,
        "*.retrieval_events.json",
        3,
        min_procs=2,
    )
    _assert_all_gone(family)
    assert 0 < _documents(out) < _trials(runs)
    # a hidden temporary file a killed writer left: removed by the next (pool) normalize
    leftover = next(out.rglob("*.retrieval_events.json")).with_name(
        ".x.retrieval_events.json.abc123.tmp"
    )
    leftover.write_text("{")
    result = _run("evaluate", out)
    assert result.returncode == 1
    assert "normalisation is incomplete" in result.stderr
    assert _run("normalize", runs, "--tasks-root", tasks, "--out", out, "--quiet").returncode == 0
    assert not leftover.exists()
    assert _documents(out) == _trials(runs)


@_needs_dask
def test_killed_dask_study_leaves_no_process_and_the_next_study_completes(data, tmp_path):
    runs, tasks = data
    out = tmp_path / "out"
    args = ["study", runs, "--tasks-root", tasks, "--out", out, "--no-report"]
    family = _kill_when_stalled(
        [*args, "--dask-workers", "2", "--dask-batch", "4"],
        tmp_path,
        "*.retrieval_events.json",
        3,
        min_procs=2,
    )
    _assert_all_gone(family)
    result = _run(*args, "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert "up to date, reused" not in result.stdout
    assert _documents(out) == _trials(runs)
    for events in out.glob("*/retrieval_events"):
        assert json.loads((events / COMPLETION_FILENAME).read_text())["evaluate"]["complete"]

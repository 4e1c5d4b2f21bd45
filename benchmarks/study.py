"""A study of many synthetic trials from raw run folders to HTML: time and memory.

Generates runs in the real layout (``retrieval_lib.synth``: ``--runs`` batch runs over the
same tasks plus one archived run, about ``15.1 x --tasks`` trials), then measures:

* ``retrieval-lib study RUNS --tasks-root TASKS --out OUT --workers W`` in a subprocess,
  from raw folders to ``study.html`` (normalise, evaluate, pool, tables, notebook, HTML):
  wall time, and peak memory of the whole process tree (the CLI, its normalisation and
  evaluation workers and the notebook kernel), sampled from /proc every 50 ms;
* the same command again, with every run up to date (reused): the cost of pooling and
  rendering alone; the difference is normalisation and evaluation;
* the reference in the same run: reading every trace file and decoding its JSON with the
  standard library (the least any tool must do with these inputs), in CPU seconds.

**Archive workload** (``--archive N``): N trials over N/2 distinct tasks (50,000 at
100,000 trials), 3 models, 4 configs (two config families each of the ``-direct`` and
``-artifact`` kinds), in runs of at most 10,000 trials. The evaluated runs are made from
the event documents of a small synthetic generation (``synth --scale bench``, normalised
once): each archive trial copies one of them with its own run, config, model, task name
and a seeded reward, and every run is evaluated (``retrieval-lib evaluate``'s
``evaluate_run``). Timed: ``retrieval-lib study <evaluated runs> --out OUT`` from the
evaluated runs to ``study.html`` (CPU seconds of the whole process tree, from
``/proc/<pid>/stat`` of every process sampled, and its peak resident memory), and the HTML
size. Several ``--archive`` values (``--archive 10000 --archive 30000``) give the growth.

**Raw archive workload** (``--raw-archive N``): the same shape (N trials, N/2 tasks, 3
models, 4 configs, runs of at most 10,000 trials) as raw run folders in the batch layout
(``<run>/<config>/<timestamp>/<trial>/``, one timestamp folder per trial) plus a task
definition per task. Each task copies the definition of one task of a small ``synth
--scale bench`` generation (``task.toml`` rewritten with the new name, the other files hard
links) and each of its two trials that task's baseline or MCP trial of the generation: the
trace files (``agent/``) are hard links, so every trial's traces are parsed for real from
natural-size files, while ``result.json`` and ``verifier/reward.txt`` are written per trial
(task name, trial name, model, start time, a seeded reward). Timed:
``retrieval-lib study <runs> --tasks-root <tasks> --workers W --out OUT`` from the raw
folders to ``study.html`` (normalise, evaluate, study, notebook, HTML): wall and CPU
seconds of the whole tree, peak tree memory, the HTML size, the 1-minute load average
sampled during the run. Results in ``benchmarks/out/study_raw_archive.json``.

Usage::

    python benchmarks/study.py                      # ~10,000 trials over 10 runs
    python benchmarks/study.py --tasks 66 --quick   # ~1,000 trials
    python benchmarks/study.py --archive 10000 --archive 100000
    python benchmarks/study.py --raw-archive 10000 --workers 2

Results are printed and written to ``benchmarks/out/study.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from _measure import process_tree

HERE = Path(__file__).resolve().parent


def _measure(cmd: list[str]) -> dict[str, float | str]:
    """Run ``cmd``; wall seconds, CPU seconds of the tree, peak tree and single-process RSS,
    and its output."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks = [0.0, 0.0]
    cpu_seen: dict[int, float] = {}
    loads: list[float] = []

    def sample() -> None:
        while proc.poll() is None:
            tree = process_tree(proc.pid)
            sizes = [rss / 1e6 for rss, _ in tree.values()]
            peaks[0], peaks[1] = max(peaks[0], sum(sizes)), max(peaks[1], max(sizes))
            for pid, (_, seconds) in tree.items():
                if pid != proc.pid:  # the root's own figure comes from wait4 below
                    cpu_seen[pid] = max(cpu_seen.get(pid, 0.0), seconds)
            loads.append(os.getloadavg()[0])
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    before = os.times()
    output, _ = proc.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    after = os.times()
    # the root's CPU with every child it waited for, plus children still sampled alive
    # that nobody waited for (a kernel reaped by its own parent is in both: counted once
    # through the root, so only the sampled figures of processes not waited for are added)
    waited = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{output[-3000:]}")
    return {
        "seconds": seconds,
        "cpu_seconds": waited,
        "cpu_seconds_sampled_children": sum(cpu_seen.values()),
        "peak_tree_mb": peaks[0],
        "peak_process_mb": peaks[1],
        "load_1min": [min(loads, default=0.0), max(loads, default=0.0)],
        "output": output,
    }


def _decode_reference(runs: Path) -> tuple[float, int, float]:
    """CPU seconds to read and json-decode every trace; (seconds, files, MB)."""
    names = ("trajectory.json", "claude-code.txt", "stdout.txt")
    files = [p for p in runs.rglob("*") if p.name in names]
    start = time.process_time()
    size = 0
    for path in files:
        data = path.read_bytes()
        size += len(data)
        if path.name == "trajectory.json":
            json.loads(data)
            continue
        for line in data.split(b"\n"):
            if line.startswith(b"{"):
                with contextlib.suppress(ValueError):
                    json.loads(line)
    return time.process_time() - start, len(files), size / 1e6


ARCHIVE_MODELS = ("model-a", "model-b", "model-c")
#: (baseline config, treatment config) of each kind: a task runs both configs of one kind.
ARCHIVE_CONFIGS = (
    ("baseline-local-direct", "mcp-remote-direct"),
    ("baseline-local-artifact", "mcp-remote-artifact"),
)
ARCHIVE_RUN_TRIALS = 10_000


def _templates(root: Path) -> dict[bool, list[dict]]:
    """Event documents of a small synthetic generation, normalised once: by MCP or not."""
    import orjson

    from retrieval_lib.synth import generate_runs

    if not (root / "out").is_dir():
        generate_runs(root / "data", n_tasks=44, n_runs=1, scale="bench")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "retrieval_lib",
                "normalize",
                str(root / "data" / "runs"),
                "--tasks-root",
                str(root / "data" / "benchmarks"),
                "--out",
                str(root / "out"),
                "--workers",
                "1",
                "--quiet",
            ],
            check=True,
        )
    found: dict[bool, list[dict]] = {False: [], True: []}
    for path in sorted((root / "out").rglob("*.retrieval_events.json")):
        doc = orjson.loads(path.read_bytes())
        found[str(doc["provenance"]["config_name"]).startswith("mcp")].append(doc)
    return found


def make_archive(
    out: Path, trials: int, templates: dict[bool, list[dict]], seed: int = 0
) -> list[Path]:
    """Evaluated runs of ``trials`` trials over ``trials // 2`` tasks (see the module docstring)."""
    import random

    import orjson

    from retrieval_lib.metrics.summary import evaluate_run

    rng = random.Random(seed)
    n_tasks = trials // 2
    runs: dict[str, list[tuple[str, str, str, bool]]] = {}
    per_run_tasks = ARCHIVE_RUN_TRIALS // 2
    for task in range(n_tasks):
        model = ARCHIVE_MODELS[task % len(ARCHIVE_MODELS)]
        pair = ARCHIVE_CONFIGS[(task // len(ARCHIVE_MODELS)) % len(ARCHIVE_CONFIGS)]
        run_id = f"archive_{task // per_run_tasks:03d}"
        for config, mcp in ((pair[0], False), (pair[1], True)):
            runs.setdefault(run_id, []).append((f"task-{task:06d}", config, model, mcp))
    folders = []
    for run_id, rows in sorted(runs.items()):
        events = out / run_id / "retrieval_events"
        for position, (task, config, model, mcp) in enumerate(rows):
            pool = templates[mcp]
            doc = dict(pool[position % len(pool)])
            prov = dict(
                doc["provenance"],
                run_id=run_id,
                config_name=config,
                model=model,
                task_name=task,
                raw_task_name=task,
                trial_name=f"{task}__{position}",
            )
            reward = 1.0 if rng.random() < (0.55 if mcp else 0.45) else 0.0
            outcome = dict(doc["outcome"], reward=reward, passed=reward == 1.0)
            doc = dict(doc, provenance=prov, outcome=outcome)
            target = events / config / f"{task}.retrieval_events.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(orjson.dumps(doc))
        evaluate_run(events)
        folders.append(out / run_id)
    return folders


def _raw_templates(root: Path) -> list[tuple[str, list[Path], dict[bool, Path]]]:
    """A small synthetic generation (``synth --scale bench``): per task with a baseline and an
    MCP trial, ``(task name, its task-definition folders, {is MCP: trial folder})``."""
    from retrieval_lib.runs import TaskIndex, discover_runs, discover_trials, read_trial_result
    from retrieval_lib.synth import generate_runs

    if not (root / "data" / "runs").is_dir():
        generate_runs(root / "data", n_tasks=44, n_runs=1, scale="bench")
    index = TaskIndex(root / "data" / "benchmarks")
    trials: dict[str, dict[bool, Path]] = {}
    for run in discover_runs([root / "data" / "runs"]):
        for ref in discover_trials(run):
            task = read_trial_result(ref.trial_dir).task_name
            trials.setdefault(task, {}).setdefault(ref.config_name.startswith("mcp"), ref.trial_dir)
    return [
        (task, index.lookup(task)[0], pair)
        for task, pair in sorted(trials.items())
        if len(pair) == 2 and index.lookup(task)[0]
    ]


def _link_tree(source: Path, target: Path, rewrite: dict[str, bytes]) -> None:
    """``target`` as a copy of ``source`` made of hard links, but the files named in
    ``rewrite`` (paths relative to ``source``) written with the bytes given."""
    for folder, _, files in os.walk(source):
        relative = Path(folder).relative_to(source)
        (target / relative).mkdir(parents=True, exist_ok=True)
        for name in files:
            key = (relative / name).as_posix()
            if key in rewrite:
                (target / relative / name).write_bytes(rewrite[key])
            else:
                os.link(Path(folder) / name, target / relative / name)


def make_raw_archive(
    out: Path,
    trials: int,
    templates: list[tuple[str, list[Path], dict[bool, Path]]],
    seed: int = 0,
) -> None:
    """Raw run folders (``out/runs``) of ``trials`` trials over ``trials // 2`` tasks and the
    task definitions of those tasks (``out/benchmarks``); see ``--raw-archive``."""
    import random
    from datetime import datetime, timedelta

    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    per_run_tasks = ARCHIVE_RUN_TRIALS // 2
    base = datetime(2026, 3, 1, 9, 15, 0)
    for task_no in range(trials // 2):
        template, task_dirs, pair = templates[task_no % len(templates)]
        task = f"archive-task-{task_no:06d}"
        for folder in task_dirs:  # every suite folder of the template task, renamed
            toml = folder / "task.toml"
            rewrite = {}
            if toml.is_file():
                rewrite["task.toml"] = toml.read_bytes().replace(template.encode(), task.encode())
            _link_tree(folder, out / "benchmarks" / folder.parent.name / task, rewrite)
        model = ARCHIVE_MODELS[task_no % len(ARCHIVE_MODELS)]
        configs = ARCHIVE_CONFIGS[(task_no // len(ARCHIVE_MODELS)) % len(ARCHIVE_CONFIGS)]
        run = out / "runs" / f"archive_raw_{task_no // per_run_tasks:03d}"
        started = base + timedelta(minutes=task_no % per_run_tasks)
        for config, mcp in ((configs[0], False), (configs[1], True)):
            suffix = "".join(rng.choices(alphabet, k=6))
            raw_task = f"mcp_{task}_{suffix}" if mcp else task
            trial = f"{raw_task[:32]}__{''.join(rng.choices(alphabet, k=7))}"
            reward = 1.0 if rng.random() < (0.55 if mcp else 0.45) else 0.0
            source = pair[mcp]
            result = json.loads((source / "result.json").read_bytes())
            result.update(task_name=raw_task, trial_name=trial, started_at=started.isoformat())
            result["config"]["trial_name"] = trial
            result["config"]["agent"]["model_name"] = f"anthropic/{model}"
            result["agent_info"]["model_info"]["name"] = model
            result["verifier_result"] = {"rewards": {"reward": reward}}
            stamp = started.strftime("%Y-%m-%d__%H-%M-%S")
            rewrite = {
                "result.json": json.dumps(result, indent=4).encode(),
                "verifier/reward.txt": f"{reward}\n".encode(),
            }
            _link_tree(source, run / config / stamp / trial, rewrite)


def _save(results: list[dict[str, Any]], name: str) -> None:
    """Write ``results`` to ``benchmarks/out/<name>``."""
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / name).write_text(json.dumps(results, indent=2) + "\n")


def _print_rows(result: dict[str, Any]) -> None:
    for key, value in result.items():
        print(f"{key:28} {value}", flush=True)


def _made_once(data: Path, make: Callable[[], object]) -> float:
    """Make a workload's folder once (``data/complete`` marks it made); the seconds it took."""
    marker = data / "complete"
    if not marker.is_file():
        shutil.rmtree(data, ignore_errors=True)
        started = time.perf_counter()
        make()
        marker.write_text(f"{time.perf_counter() - started:.1f}\n")
    return float(marker.read_text())


def raw_archive(sizes: list[int], root: Path, workers: int) -> int:
    """The raw archive workload at each size: ``retrieval-lib study`` from raw run folders
    to HTML; prints and writes ``benchmarks/out/study_raw_archive.json``."""
    templates = _raw_templates(root / "templates")
    results = []
    for trials in sizes:
        data = root / f"raw_{trials}"
        make_seconds = _made_once(data, partial(make_raw_archive, data, trials, templates))
        reports = root / f"raw_reports_{trials}"
        shutil.rmtree(reports, ignore_errors=True)
        cli = [sys.executable, "-m", "retrieval_lib", "study", str(data / "runs")]
        cli += ["--tasks-root", str(data / "benchmarks"), "--workers", str(workers)]
        measured = _measure([*cli, "--out", str(reports)])
        html = reports / "study" / "study.html"
        wall, cpu = float(measured["seconds"]), float(measured["cpu_seconds"])
        result = {
            "trials": trials,
            "tasks": trials // 2,
            "templates": len(templates),
            "runs": len(list((data / "runs").iterdir())),
            "workers": workers,
            "make_seconds": make_seconds,
            "study_wall_seconds": round(wall, 1),
            "study_cpu_seconds": round(cpu, 1),
            "wall_over_cpu": round(wall / cpu, 2) if cpu else None,
            "peak_tree_mb": round(float(measured["peak_tree_mb"])),
            "peak_process_mb": round(float(measured["peak_process_mb"])),
            "html_mb": round(html.stat().st_size / 1e6, 2),
            "load_1min_during": measured["load_1min"],
            "load_average_after": os.getloadavg(),
            "output_tail": str(measured["output"]).splitlines()[-3:],
        }
        results.append(result)
        _print_rows(result)
        _save(results, "study_raw_archive.json")
    return 0


def _load_probe(runs: Path, verify: bool) -> dict[str, float | int]:
    """In this process: the up-to-date check (``prepare_runs``) and the read
    (``read_evaluated``) of the evaluated runs under ``runs``: CPU seconds of each and the
    peak resident memory (``ru_maxrss``)."""
    import inspect
    import resource

    from retrieval_lib.study.loader import prepare_runs, read_evaluated

    started = time.process_time()
    options = {"verify": True} if verify else {}
    if options and "verify" not in inspect.signature(prepare_runs).parameters:
        options = {}  # code before the one-record check: every check is the full one
    prepared = prepare_runs([runs], None, **options)
    checked = time.process_time()
    tables = read_evaluated(prepared.events_dirs)
    done = time.process_time()
    return {
        "check_cpu_seconds": round(checked - started, 2),
        "read_cpu_seconds": round(done - checked, 2),
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "trials": int(tables.trials.shape[0]),
        "events": int(tables.events.shape[0]),
    }


def _check_probe(runs: Path, tasks: Path, out: Path, verify: bool) -> dict[str, Any]:
    """In this process: ``prepare_runs`` of raw runs already up to date: its CPU seconds,
    peak memory and the directory entries it listed (``os.scandir`` calls' entries)."""
    import inspect
    import resource

    from retrieval_lib.study.loader import prepare_runs

    listed = [0]
    scandir = os.scandir

    class Counted:
        def __init__(self, path: Any = ".") -> None:
            self.inner = scandir(path)

        def __enter__(self) -> Any:
            return self

        def __exit__(self, *exc: Any) -> None:
            self.inner.close()

        def __iter__(self) -> Any:
            return self

        def __next__(self) -> Any:
            entry = next(self.inner)
            listed[0] += 1
            return entry

        def close(self) -> None:
            self.inner.close()

    os.scandir = Counted  # type: ignore[assignment]
    options = {"verify": True} if verify else {}
    if options and "verify" not in inspect.signature(prepare_runs).parameters:
        options = {}  # code before the one-record check: every check is the full one
    started = time.process_time()
    prepared = prepare_runs([runs], tasks, out=out, **options)
    seconds = time.process_time() - started
    os.scandir = scandir
    return {
        "check_cpu_seconds": round(seconds, 2),
        "entries_listed": listed[0],
        "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "reused": len(prepared.reused),
        "redone": len(prepared.normalized),
    }


def check_only(data: Path, out: Path, trials: int, workers: int) -> int:
    """The up-to-date check of raw runs that are up to date (default and ``--verify``)."""
    from retrieval_lib.study.loader import prepare_runs

    prepare_runs([data / "runs"], data / "benchmarks", out=out, workers=workers)
    results = []
    for verify in (False, True):
        probe = subprocess.run(
            [sys.executable, __file__, "--check-probe", str(data / "runs")]
            + [str(data / "benchmarks"), str(out)]
            + (["--verify"] if verify else []),
            check=True,
            capture_output=True,
            text=True,
        )
        result = {"trials": trials, "verify": verify, **json.loads(probe.stdout)}
        results.append(result)
        print(json.dumps(result), flush=True)
    _save(results, "study_check.json")
    return 0


def archive(sizes: list[int], root: Path, *, load_only: bool = False) -> int:
    """The archive workload at each size; prints and writes ``benchmarks/out/study_archive.json``."""
    templates = _templates(root / "templates")
    results = []
    for trials in sizes:
        data = root / f"archive_{trials}"
        make_seconds = _made_once(data, partial(make_archive, data / "runs", trials, templates))
        if load_only:
            for verify in (False, True):
                probe = subprocess.run(
                    [sys.executable, __file__, "--load-probe", str(data / "runs")]
                    + (["--verify"] if verify else []),
                    check=True,
                    capture_output=True,
                    text=True,
                )
                result = {"trials": trials, "verify": verify, **json.loads(probe.stdout)}
                results.append(result)
                print(json.dumps(result), flush=True)
            continue
        reports = root / f"reports_{trials}"
        shutil.rmtree(reports, ignore_errors=True)
        cli = [
            sys.executable,
            "-m",
            "retrieval_lib",
            "study",
            str(data / "runs"),
            "--tasks-root",  # required; every run is evaluated already, nothing is read there
            str(root / "templates" / "data" / "benchmarks"),
            "--out",
            str(reports),
        ]
        measured = _measure(cli)
        html = reports / "study" / "study.html"
        tables = reports / "study" / "tables"
        result = {
            "trials": trials,
            "tasks": trials // 2,
            "runs": len(list((data / "runs").iterdir())),
            "make_and_evaluate_seconds": make_seconds,
            "study_wall_seconds": round(float(measured["seconds"]), 1),
            "study_cpu_seconds": round(float(measured["cpu_seconds"]), 1),
            "peak_tree_mb": round(float(measured["peak_tree_mb"])),
            "peak_process_mb": round(float(measured["peak_process_mb"])),
            "html_mb": round(html.stat().st_size / 1e6, 2),
            "tables_mb": round(sum(p.stat().st_size for p in tables.iterdir()) / 1e6, 1),
            "load_average": os.getloadavg(),
            "output_tail": str(measured["output"]).splitlines()[-3:],
        }
        results.append(result)
        _print_rows(result)
        _save(results, "study_archive.json")
    if load_only:
        _save(results, "study_archive_load.json")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", type=int, default=663, help="tasks (default 663: ~10,000 trials)"
    )
    parser.add_argument("--runs", type=int, default=9, help="batch runs (plus one archived)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "study")
    parser.add_argument("--quick", action="store_true", help="keep the generated runs if present")
    parser.add_argument(
        "--archive",
        type=int,
        action="append",
        metavar="TRIALS",
        help="run the archive workload of TRIALS trials (repeatable) instead",
    )
    parser.add_argument(
        "--raw-archive",
        type=int,
        action="append",
        metavar="TRIALS",
        help="run the archive workload of TRIALS trials (repeatable) from raw run folders "
        "and task definitions to HTML, with --workers, instead",
    )
    parser.add_argument(
        "--load-only",
        action="store_true",
        help="with --archive: time only the up-to-date check and the read of the runs "
        "(default and --verify check), each in a subprocess",
    )
    parser.add_argument(
        "--check-only",
        action="store_true",
        help="raw runs: bring them up to date once, then time only the up-to-date check of "
        "every run (default and --verify), each in a subprocess",
    )
    parser.add_argument("--check-probe", nargs=3, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--load-probe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--verify", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.check_probe:
        runs, tasks, evaluated = args.check_probe
        print(json.dumps(_check_probe(runs, tasks, evaluated, args.verify)))
        return 0
    if args.load_probe:
        print(json.dumps(_load_probe(args.load_probe, args.verify)))
        return 0
    if args.raw_archive:
        return raw_archive(args.raw_archive, args.out / "archive", args.workers)
    if args.archive:
        return archive(args.archive, args.out / "archive", load_only=args.load_only)

    from retrieval_lib.synth import generate_runs

    data, out = args.out / "data", args.out / "reports"
    manifest = data / "synth_manifest.json"
    started = time.perf_counter()
    if not (args.quick and manifest.is_file()):
        generate_runs(data, n_tasks=args.tasks, n_runs=args.runs, scale="bench")
    generated = time.perf_counter() - started
    from retrieval_lib.runs import discover_runs, discover_trials

    trials = sum(len(discover_trials(run)) for run in discover_runs([data / "runs"]))
    if args.check_only:
        return check_only(data, args.out / "evaluated", trials, args.workers)
    shutil.rmtree(out, ignore_errors=True)
    cli = [
        sys.executable,
        "-m",
        "retrieval_lib",
        "study",
        str(data / "runs"),
        "--tasks-root",
        str(data / "benchmarks"),
        "--out",
        str(out),
        "--workers",
        str(args.workers),
    ]
    cold = _measure(cli)
    warm = _measure(cli)
    reference, n_files, trace_mb = _decode_reference(data / "runs")
    html = out / "study" / "study.html"
    result = {
        "trials": trials,
        "runs": args.runs + 1,
        "trace_files": n_files,
        "trace_mb": round(trace_mb, 1),
        "generate_seconds": round(generated, 1),
        "workers": args.workers,
        "cold_seconds": round(float(cold["seconds"]), 1),
        "cold_peak_tree_mb": round(float(cold["peak_tree_mb"])),
        "cold_peak_process_mb": round(float(cold["peak_process_mb"])),
        "warm_seconds": round(float(warm["seconds"]), 1),
        "warm_peak_tree_mb": round(float(warm["peak_tree_mb"])),
        "normalise_and_evaluate_seconds": round(float(cold["seconds"]) - float(warm["seconds"]), 1),
        "reference_decode_cpu_seconds": round(reference, 2),
        "cold_over_reference": round(float(cold["seconds"]) / reference, 1) if reference else None,
        "html_mb": round(html.stat().st_size / 1e6, 2),
        "load_average": os.getloadavg(),
        "cold_output_tail": str(cold["output"]).splitlines()[-3:],
    }
    (HERE / "out").mkdir(exist_ok=True)
    (HERE / "out" / "study.json").write_text(json.dumps(result, indent=2) + "\n")
    for key, value in result.items():
        print(f"{key:32} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

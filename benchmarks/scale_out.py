"""Scale-out on Dask: normalise + evaluate N synthetic trials, Dask vs the process pool.

Workload: one synthetic generation (``retrieval_lib.synth``, example scale: natural-size
traces, a few tens of KB per trial) replicated by hard links into as many run folders as
it takes to reach ``--trials`` (each copy is its own run id, so every trial is normalised
and evaluated; hard links keep the input small on disk). Each method then brings every
run up to date with :func:`retrieval_lib.study.loader.prepare_runs` (normalise + evaluate,
as ``retrieval-lib study`` does) in its own subprocess, one after the other:

| method | what runs |
|---|---|
| `pool-N` | ``workers=N``: a process pool (in process for N = 1) under the same rule as Dask (``run_many``): a run of ≤ 128 trials normalised and evaluated by one task |
| `dask-N` | ``--dask-workers N``: a LocalCluster of N one-thread worker processes |

Reported per method: wall seconds of ``prepare_runs`` (process and cluster start-up
apart), trials/s, CPU time of every process during ``prepare_runs``, the driver's peak
RSS and each worker's peak RSS (``ru_maxrss``), and the ratios that the issue sets aims
for: ``dask-2 / dask-1`` throughput and ``dask-N`` seconds (and CPU) per trial over
``pool-N``'s. Optionally (``--study``) a study of the first ``--study-trials`` trials
rendered to HTML from the Dask method's outputs.

Usage::

    python benchmarks/scale_out.py --trials 10000
    python benchmarks/scale_out.py --trials 100000 --methods dask-2   # the 100k figure
    python benchmarks/scale_out.py --trials 2000 --study --study-trials 2000

Results are printed and written to ``benchmarks/out/scale_out.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _replicate(base_runs: Path, dest: Path, trials: int) -> tuple[int, int, int]:
    """Hard-link copies of the runs under ``base_runs`` into ``dest`` until ``trials``
    trials exist; return (runs, trials, trace bytes)."""
    from retrieval_lib.runs import discover_runs, discover_trials

    runs = discover_runs([base_runs])
    per_run = [(run, len(discover_trials(run))) for run in runs]
    per_copy = sum(n for _, n in per_run)
    trace_bytes = sum(
        p.stat().st_size
        for p in base_runs.rglob("*")
        if p.is_file() and p.parent.name in ("agent", "command-1")
    )
    made, copies, bytes_total = 0, 0, 0
    while made < trials:
        for run, n in per_run:
            if made >= trials:
                break
            target = dest / f"{run.name}__c{copies:05d}"
            shutil.copytree(run, target, copy_function=os.link)
            made += n
        copies += 1
        bytes_total += trace_bytes
    return len(list(dest.iterdir())), made, int(bytes_total * made / (copies * per_copy))


def _own_usage() -> tuple[float, float]:
    """(peak RSS in MB, CPU seconds) of the calling process (run on each Dask worker)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def _warm_up() -> None:
    """Import what the tasks use, once per process, before the clock starts: a fixed
    cost of each new process (the pool's forked workers inherit it from the driver)."""
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import retrieval_lib.metrics.summary  # noqa: F401
    import retrieval_lib.normalize  # noqa: F401


def _cpu(usage: object) -> float:
    return usage.ru_utime + usage.ru_stime  # type: ignore[attr-defined]


def _child(args: argparse.Namespace) -> None:
    """One method, in its own process: prints a JSON line of its figures.

    CPU time counts from the start of ``prepare_runs`` to its end, in every process
    (driver, pool children or Dask workers); process start-up and the imports of
    :func:`_warm_up` are counted apart (``start_seconds``), as the cluster's start is.
    """
    import resource

    from retrieval_lib.study.loader import prepare_runs

    kind, n = args.child.split("-")
    workers = int(n)
    figures: dict[str, object] = {"method": args.child}
    t0 = time.perf_counter()
    _warm_up()
    if kind == "pool":
        figures["start_seconds"] = time.perf_counter() - t0
        driver0 = _cpu(resource.getrusage(resource.RUSAGE_SELF))
        start = time.perf_counter()
        prepared = prepare_runs([args.runs], args.tasks, out=args.out, workers=workers)
        figures["seconds"] = time.perf_counter() - start
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        figures["worker_peak_mb"] = children.ru_maxrss / 1024 if workers > 1 else None
        figures["worker_cpu_seconds"] = _cpu(children)
    else:
        from retrieval_lib.distributed import DaskSpec, dask_mapper

        with dask_mapper(DaskSpec(workers=workers, batch_size=args.dask_batch)) as map_fn:
            map_fn.client.run(_warm_up)
            figures["start_seconds"] = time.perf_counter() - t0
            before = map_fn.client.run(_own_usage)
            driver0 = _cpu(resource.getrusage(resource.RUSAGE_SELF))
            start = time.perf_counter()
            prepared = prepare_runs([args.runs], args.tasks, out=args.out, map_fn=map_fn)
            figures["seconds"] = time.perf_counter() - start
            after = map_fn.client.run(_own_usage)
            figures["worker_peak_mb"] = max(u[0] for u in after.values())
            figures["worker_cpu_seconds"] = sum(after[w][1] - before[w][1] for w in after)
    own = resource.getrusage(resource.RUSAGE_SELF)
    figures["driver_peak_mb"] = own.ru_maxrss / 1024
    figures["driver_cpu_seconds"] = _cpu(own) - driver0
    figures["cpu_seconds"] = figures["driver_cpu_seconds"] + figures["worker_cpu_seconds"]
    figures["runs"] = len(prepared.events_dirs)
    figures["failures"] = len(prepared.evaluate_failures)
    figures["summary"] = prepared.summary_line
    print("FIGURES=" + json.dumps(figures))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--tasks-per-copy", type=int, default=44, help="synthetic tasks")
    parser.add_argument("--methods", default="pool-2,dask-1,dask-2")
    parser.add_argument("--study", action="store_true", help="also render a study to HTML")
    parser.add_argument("--study-trials", type=int, default=10_000)
    parser.add_argument("--workdir", help="keep the data here (default: a temp folder)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dask-batch", type=int, help="trials per Dask task (default: 32)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--runs", help=argparse.SUPPRESS)
    parser.add_argument("--tasks", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args)
        return 0

    from retrieval_lib.synth import generate_runs

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rl-scale-"))
    results: dict[str, object] = {
        "load_average_before": os.getloadavg(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }
    try:
        base = work / "base"
        if not (base / "runs").is_dir():
            generate_runs(base, n_tasks=args.tasks_per_copy, seed=args.seed)
        runs = work / f"runs-{args.trials}"
        if not runs.is_dir():
            runs.mkdir()
            n_runs, n_trials, trace_bytes = _replicate(base / "runs", runs, args.trials)
            (work / f"runs-{args.trials}.json").write_text(
                json.dumps([n_runs, n_trials, trace_bytes])
            )
        n_runs, n_trials, trace_bytes = json.loads((work / f"runs-{args.trials}.json").read_text())
        results.update(
            runs=n_runs,
            trials=n_trials,
            trace_mb=trace_bytes / 1e6,
            trace_kb_per_trial=trace_bytes / n_trials / 1e3,
        )
        print(
            f"{n_trials} trials in {n_runs} runs, {trace_bytes / 1e6:.0f} MB of trace "
            f"({trace_bytes / n_trials / 1e3:.1f} KB per trial)"
        )
        methods = {}
        for method in filter(None, args.methods.split(",")):
            out = work / f"out-{method}"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [sys.executable, __file__, "--child", method, "--runs", str(runs)]
            cmd += ["--tasks", str(base / "benchmarks"), "--out", str(out)]
            if args.dask_batch:
                cmd += ["--dask-batch", str(args.dask_batch)]
            load = os.getloadavg()[0]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"{method} failed:\n{done.stderr[-3000:]}")
            figures = json.loads(done.stdout.rpartition("FIGURES=")[2])
            figures["trials_per_second"] = n_trials / figures["seconds"]
            figures["cpu_ms_per_trial"] = 1e3 * figures["cpu_seconds"] / n_trials
            figures["load_average_at_start"] = load
            methods[method] = figures
            print(
                f"{method:8s} {figures['seconds']:8.1f} s  {figures['trials_per_second']:7.1f} "
                f"trials/s  CPU {figures['cpu_ms_per_trial']:5.1f} ms/trial  "
                f"driver {figures['driver_peak_mb']:6.0f} MB  worker "
                f"{figures['worker_peak_mb'] or 0:6.0f} MB  load {load:.1f}"
            )
        results["methods"] = methods
        if "dask-1" in methods and "dask-2" in methods:
            results["dask2_over_dask1_throughput"] = (
                methods["dask-1"]["seconds"] / methods["dask-2"]["seconds"]
            )
            print(f"dask-2 / dask-1 throughput: {results['dask2_over_dask1_throughput']:.2f}x")
        for n in ("1", "2"):
            if f"dask-{n}" in methods and f"pool-{n}" in methods:
                ratio = methods[f"dask-{n}"]["seconds"] / methods[f"pool-{n}"]["seconds"]
                cpu = methods[f"dask-{n}"]["cpu_seconds"] / methods[f"pool-{n}"]["cpu_seconds"]
                results[f"dask{n}_over_pool{n}_seconds"] = ratio
                results[f"dask{n}_over_pool{n}_cpu"] = cpu
                print(f"dask-{n} / pool-{n} per trial: wall {ratio:.2f}, CPU {cpu:.2f}")
        if args.study:
            from retrieval_lib.report.study_report import run_study
            from retrieval_lib.study.loader import PreparedRuns

            dask_runs = [m for m in methods if m.startswith("dask")] or ["dask-2"]
            source = work / f"out-{dask_runs[-1]}"  # the last Dask method's (or a kept one)
            dirs, count = [], 0
            for events in sorted(source.glob("*/retrieval_events")):
                if count >= args.study_trials:
                    break
                dirs.append(events)
                count += len(list(events.rglob("*.retrieval_events.json")))
            start = time.perf_counter()
            report = run_study(
                [], None, work / "study-out", prepared=PreparedRuns(events_dirs=dirs), log=print
            )
            results["study"] = {
                "trials": count,
                "runs": len(dirs),
                "seconds": time.perf_counter() - start,
                "html": str(report.html),
            }
            print(f"study of {count} trials to HTML: {results['study']['seconds']:.1f} s")
        results["load_average_after"] = os.getloadavg()
        target = Path(__file__).with_name("out") / "scale_out.json"
        target.parent.mkdir(exist_ok=True)
        target.write_text(json.dumps(results, indent=2))
        print(f"wrote {target}")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

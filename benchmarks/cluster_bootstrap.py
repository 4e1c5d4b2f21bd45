"""The task-cluster bootstrap at scale: 50,000 tasks x 10,000 resamples.

Times :func:`retrieval_lib.stats.clustered.cluster_bootstrap_mean` on a seeded trial
table (``--tasks`` tasks, 1-5 trials each, so about 3x as many trials) against the
reference in the same run: the library's trial-level bootstrap
(:func:`retrieval_lib.stats.intervals.bootstrap_mean_ci`) of ``--tasks`` values with
the same number of resamples, i.e. the same number of drawn indices. Also times the
equal-cluster path (every task with 3 trials: one gather per draw instead of two) and
:func:`~retrieval_lib.stats.clustered.task_mean_ci` (aggregate first). CPU time
(``time.process_time``) and wall time; the median of ``--repeats``. Results are printed
and written to ``benchmarks/out/cluster_bootstrap.json``.

Usage::

    .venv/bin/python benchmarks/cluster_bootstrap.py                 # 50,000 x 10,000
    .venv/bin/python benchmarks/cluster_bootstrap.py --tasks 5000    # quicker
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
from _measure import cpu_and_wall

from retrieval_lib.stats.clustered import cluster_bootstrap_mean, task_mean_ci
from retrieval_lib.stats.intervals import bootstrap_mean_ci


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--n-boot", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "out"))
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    k = args.tasks
    sizes = rng.integers(1, 6, size=k)
    tasks = np.repeat(np.arange(k), sizes).astype(str)
    difficulty = rng.beta(0.7, 0.7, size=k)
    values = (rng.random(tasks.size) < np.repeat(difficulty, sizes)).astype(float)
    equal_tasks = np.repeat(np.arange(k), 3).astype(str)
    equal_values = rng.random(equal_tasks.size)
    reference = rng.random(k)
    n_boot = args.n_boot

    jobs = {
        "reference: bootstrap_mean_ci (trial-level, k values)": lambda: bootstrap_mean_ci(
            reference, n_boot=n_boot
        ),
        "cluster_bootstrap_mean (1-5 trials per task)": lambda: cluster_bootstrap_mean(
            values, tasks, n_boot=n_boot
        ),
        "cluster_bootstrap_mean (3 trials per task)": lambda: cluster_bootstrap_mean(
            equal_values, equal_tasks, n_boot=n_boot
        ),
        "task_mean_ci (aggregate first)": lambda: task_mean_ci(values, tasks, n_boot=n_boot),
    }
    results = {}
    for name, job in jobs.items():
        cpu, wall = cpu_and_wall(job, args.repeats)
        results[name] = {"cpu_s": cpu, "wall_s": wall}
    ref = results[next(iter(jobs))]["cpu_s"]
    print(
        f"{k:,} tasks ({tasks.size:,} trials) x {n_boot:,} resamples; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'method':58} {'CPU s':>8} {'wall s':>8} {'x reference':>12}")
    for name, r in results.items():
        r["ratio_cpu"] = r["cpu_s"] / ref if ref else float("nan")
        print(f"{name:58} {r['cpu_s']:8.2f} {r['wall_s']:8.2f} {r['ratio_cpu']:12.2f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    document = {
        "tasks": k,
        "trials": int(tasks.size),
        "n_boot": n_boot,
        "load_average": os.getloadavg()[0],
        "results": results,
    }
    (out / "cluster_bootstrap.json").write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()

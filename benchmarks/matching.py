"""``match_tasks`` on a pooled table of many tasks (issue 20): the vectorised matching
against the per-task implementation it replaced and a plain pandas group-by floor.

Workload (``tests/stats/matching_tables.random_pooled_table``, seeded): ``--tasks`` tasks
run by two baselines and two treatments. ``--shape archive`` (default): each task run by
one model (5% another) at one harness version (10% unknown), one or two trials per
config, the last flagged latest. ``--shape messy``: 1–12 trials per task and config,
several models, known / unknown / blank / differing harness versions, several trials
flagged latest with ``started_at``. Rewards and metrics with NaN, errored and timed-out
flags in both. One pair (baseline-a vs mcp-x) is matched.

Timed (CPU seconds, ``time.process_time``, inputs built before the clock starts):

* ``match_tasks`` (combine="mean" and "latest") on all tasks;
* the reference: the frozen per-task implementation (``tests/stats/paired_oracle.py``,
  the code before issue 20) on ``--reference-tasks`` tasks (it costs milliseconds per
  task), extrapolated per task, and the new code on the same subset, whose output must
  equal the reference's (checked, else the benchmark fails);
* the floor: ``groupby([config, task, model, version])[values].mean()`` of the same rows,
  the least any matching must do.

Usage::

    .venv/bin/python benchmarks/matching.py                     # 50,000 tasks
    .venv/bin/python benchmarks/matching.py --tasks 5000 --reference-tasks 500
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "stats"))


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50_000)
    parser.add_argument("--reference-tasks", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument(
        "--shape",
        choices=("archive", "messy"),
        default="archive",
        help="archive: one model and version per task, one or two trials per config; "
        "messy: every rule exercised (1-12 trials, mixed versions and models)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out" / "matching.json")
    args = parser.parse_args(argv)

    import paired_oracle
    import pandas as pd
    from matching_tables import random_pooled_table

    from retrieval_lib.stats.paired import match_tasks

    table = random_pooled_table(args.tasks, seed=args.seed, archive=args.shape == "archive")
    b, t = "baseline-a", "mcp-x"
    values = ["reward", "passed", "file.recall@10", "file.ap", "read.recall"]
    rows = {}
    for combine in ("mean", "latest"):
        times = []
        for _ in range(args.repeats):
            seconds, result = _cpu(lambda c=combine: match_tasks(table, b, t, combine=c))
            times.append(seconds)
        rows[f"match_tasks {combine}"] = {
            "cpu_s": min(times),
            "matched": result.n_matched,
            "unmatched_rows": len(result.unmatched),
        }
    work = table[table["config_name"].isin([b, t])].copy()
    work["model"] = work["model"].fillna("-")
    work["harness_version"] = work["harness_version"].fillna("-")
    work["passed"] = work["passed"].astype(float)
    floor = min(
        _cpu(
            lambda: work.groupby(["config_name", "task_name", "model", "harness_version"])[
                values
            ].mean()
        )[0]
        for _ in range(args.repeats)
    )
    rows["floor: pandas groupby mean"] = {"cpu_s": floor}

    tasks = sorted(table["task_name"].unique())[: args.reference_tasks]
    small = table[table["task_name"].isin(tasks)]
    old_s, old = _cpu(lambda: paired_oracle.match_tasks(small, b, t))
    new_s, new = _cpu(lambda: match_tasks(small, b, t))
    for name in ("keys", "baseline_values", "treatment_values", "unmatched"):
        pd.testing.assert_frame_equal(getattr(new, name), getattr(old, name), check_exact=True)
    per_task_old = old_s / len(tasks)
    rows[f"reference (per task), {len(tasks)} tasks"] = {
        "cpu_s": old_s,
        "extrapolated_cpu_s": per_task_old * args.tasks,
    }
    rows[f"match_tasks, same {len(tasks)} tasks"] = {"cpu_s": new_s}

    new_mean = rows["match_tasks mean"]["cpu_s"]
    print(f"{args.tasks:,} tasks, {len(table):,} trials, load average {os.getloadavg()[0]:.1f}")
    print(f"{'step':<42} {'CPU s':>9}")
    for name, row in rows.items():
        print(f"{name:<42} {row['cpu_s']:>9.3f}")
    print(
        f"reference per task {per_task_old * 1e3:.2f} ms -> {args.tasks:,} tasks "
        f"~{per_task_old * args.tasks:.0f} s; match_tasks is "
        f"{per_task_old * args.tasks / new_mean:.0f}x faster, {new_mean / floor:.1f}x the floor"
    )
    print(f"outputs equal to the reference on {len(tasks)} tasks: yes")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "tasks": args.tasks,
                "trials": len(table),
                "load_average": os.getloadavg(),
                "rows": rows,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

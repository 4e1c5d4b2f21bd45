"""Cost of exact and Monte Carlo permutation p-values in ``correlate_metrics``.

Workload: a per-trial metrics table shaped like a small benchmark run (``--tasks`` tasks,
three configs, 1–2 trials per task and config, task difficulty from Beta(0.7, 0.7)), the
8 key retrieval metrics and the 5 outcomes (binary ``passed``). Per config n is 50–100
(Monte Carlo permutation p-values), pooled it is above 100 (asymptotic).

Methods (CPU seconds, ``time.process_time``, best of ``--repeats``; inputs built first):

* ``correlate_metrics``: the library, every metric × outcome × method, per config and
  pooled, with permutation p-values where n <= 100;
* ``asymptotic_floor``: the same rows with scipy's asymptotic p only (``spearmanr``,
  ``pearsonr``, ``pointbiserialr``, ``mannwhitneyu``): what the p-values cost before
  issue 22, the reference of the ratio;
* ``scipy_permutation``: ``scipy.stats.permutation_test(permutation_type="pairings",
  n_resamples=10_000, vectorized=True)`` for the Spearman rows of one config, the
  documented reference for the same Monte Carlo test, timed per row.

Usage::

    python benchmarks/correlations.py              # 40 tasks
    python benchmarks/correlations.py --tasks 60 --repeats 5

Results are printed and written to ``benchmarks/out/correlations.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_lib.stats.columns import KEY_METRICS

HERE = Path(__file__).resolve().parent
KEY = list(KEY_METRICS)


def make_table(tasks: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for config in ("baseline", "mcp", "sourcegraph"):
        for t in range(tasks):
            difficulty = rng.beta(0.7, 0.7)
            for _ in range(int(rng.integers(1, 3))):
                row: dict[str, object] = {"config_name": config, "task_name": f"t{t}"}
                for metric in KEY:
                    row[metric] = float(np.clip(difficulty + rng.normal(scale=0.3), 0, 1))
                row["reward"] = float(rng.random() < difficulty)
                row["passed"] = row["reward"] == 1.0
                row["cost_usd"] = rng.gamma(2, 0.5)
                row["agent_execution_seconds"] = rng.gamma(3, 60)
                row["total_tokens"] = float(rng.integers(10_000, 1_000_000))
                rows.append(row)
    return pd.DataFrame(rows)


def asymptotic_floor(df: pd.DataFrame) -> int:
    """The same rows with scipy's asymptotic p-values only."""
    from scipy import stats

    count = 0
    groups = [df, *(sub for _, sub in df.groupby("config_name"))]
    for sub in groups:
        for outcome in ("reward", "passed", "cost_usd", "agent_execution_seconds", "total_tokens"):
            y = sub[outcome].to_numpy(dtype=float)
            for metric in KEY:
                x = sub[metric].to_numpy(dtype=float)
                if outcome == "passed":
                    stats.pointbiserialr(y.astype(bool), x)
                    stats.mannwhitneyu(x[y == 1], x[y == 0])
                else:
                    stats.spearmanr(x, y)
                    stats.pearsonr(x, y)
                count += 2
    return count


def scipy_permutation(df: pd.DataFrame) -> int:
    """scipy's Monte Carlo pairings test of Spearman's rho for one config's rows."""
    from scipy import stats

    sub = df[df["config_name"] == "baseline"]
    count = 0
    for outcome in ("reward", "cost_usd", "agent_execution_seconds", "total_tokens"):
        ry = stats.rankdata(sub[outcome].to_numpy(dtype=float))
        ry = (ry - ry.mean()) / np.linalg.norm(ry - ry.mean())

        def statistic(a: np.ndarray, axis: int = -1, ry: np.ndarray = ry) -> np.ndarray:
            ra = stats.rankdata(a, axis=axis)
            ra = ra - ra.mean(axis=axis, keepdims=True)
            return np.asarray((ra @ ry) / np.linalg.norm(ra, axis=axis))

        for metric in KEY:
            stats.permutation_test(
                (sub[metric].to_numpy(dtype=float),),
                statistic,
                permutation_type="pairings",
                n_resamples=10_000,
                vectorized=True,
                rng=np.random.default_rng(0),
            )
            count += 1
    return count


def _best(func, repeats: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeats):
        start = time.process_time()
        rows = func()
        times.append(time.process_time() - start)
    return min(times), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from retrieval_lib.stats.correlation import correlate_metrics

    df = make_table(args.tasks)
    correlate_metrics(df)  # imports and caches warmed
    asymptotic_floor(df)
    results = {}
    for name, func in (
        ("correlate_metrics", lambda: len(correlate_metrics(df))),
        ("asymptotic_floor", lambda: asymptotic_floor(df)),
        ("scipy_permutation", lambda: scipy_permutation(df)),
    ):
        seconds, rows = _best(func, args.repeats)
        results[name] = {"cpu_seconds": seconds, "rows": rows, "ms_per_row": 1e3 * seconds / rows}
    out = correlate_metrics(df)
    report = {
        "trials": len(df),
        "per_config": {str(k): int(v) for k, v in df.groupby("config_name").size().items()},
        "p_methods": {str(k): int(v) for k, v in out["p_method"].value_counts().items()},
        "results": results,
        "ratio_to_asymptotic_floor": results["correlate_metrics"]["cpu_seconds"]
        / results["asymptotic_floor"]["cpu_seconds"],
        "monte_carlo_speedup_per_row_vs_scipy": results["scipy_permutation"]["ms_per_row"]
        / results["correlate_metrics"]["ms_per_row"],
        "load_average": os.getloadavg(),
    }
    print(f"{report['trials']} trials, per config {report['per_config']}")
    print(f"p methods: {report['p_methods']}")
    for name, result in results.items():
        print(
            f"{name:>18}: {result['cpu_seconds']:.3f} s CPU for {result['rows']} rows "
            f"({result['ms_per_row']:.2f} ms/row)"
        )
    print(f"correlate_metrics / asymptotic floor: {report['ratio_to_asymptotic_floor']:.2f}x")
    print(f"load average: {report['load_average']}")
    target = HERE / "out" / "correlations.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

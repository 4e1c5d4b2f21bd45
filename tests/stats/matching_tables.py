"""Pooled metrics tables that exercise every matching rule (shared by the equality test
and ``benchmarks/matching.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def random_pooled_table(
    n_tasks: int, seed: int = 0, max_trials: int = 12, *, archive: bool = False
) -> pd.DataFrame:
    """A pooled table of two baselines and two treatments over ``n_tasks`` tasks.

    Repeated trials (1..``max_trials`` per side, so numpy's unrolled sums of 8 and more
    are used), several models, known / unknown / blank / differing harness versions with
    reasons, rewards and metric values with NaN, errored and timed-out flags, several
    trials flagged latest with ``started_at`` (ties included), benchmarks and sources.
    ``archive=True``: an archive's shape instead, each task run by one model (5% by
    another) at one harness version (10% unknown), one or two trials per config.
    """
    rng = np.random.default_rng(seed)
    rows: dict[str, list[object]] = {
        c: []
        for c in (
            "config_name",
            "task_name",
            "model",
            "harness_version",
            "trial_name",
            "reward",
            "is_latest_trial",
            "started_at",
            "errored",
            "timed_out",
            "benchmark",
            "harness_version_unknown_reason",
            "tokens_source",
            "cost_source",
            "passed",
            "file.recall@10",
            "file.ap",
            "read.recall",
        )
    }
    configs = ["baseline-a", "baseline-b", "mcp-x", "sourcegraph-y"]
    versions = ["1.0", "1.0", "1.0", "2.0", None, "unknown", " "]
    for t in range(n_tasks):
        task = f"task-{t:06d}"
        for config in configs:
            if rng.random() < 0.1:
                continue
            model = ["m1", "m1", "m2", None][int(rng.integers(4))]
            if rng.random() < 0.05:
                model = "m3"
            k = (
                int(rng.integers(1, max_trials + 1))
                if rng.random() < 0.3
                else int(rng.integers(1, 4))
            )
            if archive:
                model = ["m1", "m2"][t % 2] if rng.random() > 0.05 else "m3"
                k = int(rng.integers(1, 3))
            for _i in range(k):
                version = versions[int(rng.integers(len(versions)))]
                if archive:
                    version = "1.0" if rng.random() > 0.1 else None
                reward = float(rng.random()) if rng.random() > 0.1 else np.nan
                rows["config_name"].append(config)
                rows["task_name"].append(task)
                rows["model"].append(model)
                rows["harness_version"].append(version)
                rows["trial_name"].append(f"{task}__{config}__{int(rng.integers(20)):02d}")
                rows["reward"].append(reward)
                rows["is_latest_trial"].append(
                    _i == k - 1 if archive else [True, False, None][int(rng.integers(3))]
                )
                rows["started_at"].append(
                    f"2026-11-{1 + int(rng.integers(3)):02d}T10:{int(rng.integers(3)):02d}:00Z"
                )
                rows["errored"].append(bool(rng.random() < 0.1))
                rows["timed_out"].append(bool(rng.random() < 0.05))
                rows["benchmark"].append(["b1", "b2", None][int(rng.integers(3))])
                rows["harness_version_unknown_reason"].append(
                    None
                    if version not in (None, "unknown", " ")
                    else ["no usable trace", "no version recorded", None][int(rng.integers(3))]
                )
                rows["tokens_source"].append(["trace", "result", None][int(rng.integers(3))])
                rows["cost_source"].append(["trace", None][int(rng.integers(2))])
                rows["passed"].append(None if not np.isfinite(reward) else bool(reward > 0.5))
                for metric in ("file.recall@10", "file.ap", "read.recall"):
                    value = rng.random() * 10 ** float(rng.integers(-3, 4))
                    rows[metric].append(np.nan if rng.random() < 0.15 else value)
    order = rng.permutation(len(rows["task_name"]))
    return pd.DataFrame(rows).iloc[order].reset_index(drop=True)

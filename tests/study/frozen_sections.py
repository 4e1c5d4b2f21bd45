"""Frozen section values: every table ``compute_sections`` gives, as plain JSON values.

The archive-scale work of issue 20 rewrote the study's computations (vectorised
aggregation, shared bootstrap draws, no repeated copies); their outputs must not move.
``freeze`` wrote ``tests/study/frozen/<case>.json`` from the code before that rewrite
(main at ``a28738a``); ``test_frozen_sections.py`` compares today's tables with them.
Regenerate only for a deliberate change of a section's values::

    PYTHONPATH=. python -m tests.study.frozen_sections
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

FROZEN = Path(__file__).resolve().parent / "frozen"
#: Section tables that are the loaded tables, not computed by the study (the loader's own
#: tests cover them).
NOT_COMPUTED = ("trials", "timeline_events")
CSB = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "csb"


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return str(value)


def table_values(frame: pd.DataFrame) -> dict[str, Any]:
    """Columns and rows of ``frame`` as JSON values (NaN/NA as null)."""
    return {
        "columns": [str(c) for c in frame.columns],
        "rows": [[_plain(v) for v in row] for row in frame.itertuples(index=False, name=None)],
    }


def sections_values(study: Any) -> dict[str, Any]:
    """Every section table of ``study`` (and the impact parameters) as JSON values."""
    from retrieval_lib.study.sections import compute_sections

    sections = compute_sections(study)
    out = {
        name: table_values(frame)
        for name, frame in sorted(sections.tables.items())
        if name not in NOT_COMPUTED
    }
    params = dict(sections.impact_params)
    params.pop("config_map", None)
    out["_params"] = json.loads(json.dumps(params, default=str))
    return out


def replicated(study: Any, n_tasks: int = 240, seed: int = 20) -> Any:
    """A larger study made from ``study``'s trials (like ``benchmarks/study.py --archive``):
    ``n_tasks`` tasks, 3 models, two family pairs (direct, artifact), one task in five run
    twice on a side, seeded rewards (some missing), the template's flags and events kept."""
    from dataclasses import replace

    rng = np.random.default_rng(seed)
    trials, events = study.trials, study.events
    is_mcp = trials["config_family"].astype(str).str.startswith("mcp")
    pools = {False: trials[~is_mcp], True: trials[is_mcp]}
    kinds = (
        ("baseline-local-direct", "mcp-remote-direct"),
        ("baseline-local-artifact", "mcp-remote-artifact"),
    )
    rows, event_parts, counter = [], [], 0
    for task in range(n_tasks):
        model = ("model-a", "model-b", "model-c")[task % 3]
        pair = kinds[(task // 3) % 2]
        for family, mcp in ((pair[0], False), (pair[1], True)):
            for _ in range(2 if task % 5 == 0 and mcp == (task % 2 == 0) else 1):
                pool = pools[mcp]
                template = pool.iloc[counter % len(pool)]
                trial_id = f"rep/{counter:05d}"
                reward = float(rng.random() < (0.6 if mcp else 0.45))
                if rng.random() < 0.03:
                    reward = math.nan
                row = template.copy()
                row["trial_id"], row["trial_name"] = trial_id, f"t{task:04d}__{counter}"
                row["task_name"], row["model"] = f"task-{task:04d}", model
                row["config_name"], row["config_family"] = family, family
                row["run_id"] = f"run-{task // 80}"
                row["reward"] = reward
                row["passed"] = None if math.isnan(reward) else reward == 1.0
                rows.append(row)
                event_parts.append(
                    events[events["trial_id"] == template["trial_id"]].assign(
                        trial_id=trial_id, config_family=family
                    )
                )
                counter += 1
    new_trials = pd.DataFrame(rows).reset_index(drop=True).astype(trials.dtypes.to_dict())
    # the study's dtypes; a categorical (a name column) takes the new trials' names
    dtypes = {c: "category" if t == "category" else t for c, t in events.dtypes.items()}
    new_events = pd.concat(event_parts, ignore_index=True).astype(dtypes)
    return replace(study, trials=new_trials, events=new_events)


def studies(root: Path) -> dict[str, Any]:
    """The studies frozen: the bundled example, the csb corpus (if here), the hand-made one."""
    from retrieval_lib.report.pipeline import example_study
    from retrieval_lib.study import StudyOptions, load

    from . import synthetic

    found: dict[str, Any] = {"bundled": example_study(root / "bundled")}
    found["bundled_unflagged"] = found["bundled"].with_options(exclude_flagged=True, n_boot=500)
    found["replicated"] = replicated(found["bundled"]).with_options(n_boot=300)
    if CSB.is_dir():
        found["csb"] = load([CSB / "runs"], tasks_root=CSB / "benchmarks", out=root / "csb")
    runs, tasks = synthetic.build(root / "synthetic")
    found["synthetic"] = load(
        [runs], tasks_root=tasks, out=root / "synthetic_out", options=StudyOptions(n_boot=500)
    )
    return found


def freeze() -> None:
    import tempfile

    FROZEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, study in studies(Path(tmp)).items():
            text = json.dumps(sections_values(study), separators=(",", ":"), sort_keys=True)
            (FROZEN / f"{name}.json").write_text(text + "\n", encoding="utf-8")
            print(name, len(text), file=sys.stderr)


if __name__ == "__main__":
    freeze()

"""A small hand-made study: three runs, two models, legacy and current config names,
repeated trials. Every expected figure of the study tests is worked out from this file.

Tasks (ground truth): alpha-001 = {src/a.py, src/b.py}, beta-002 = {src/c.py},
gamma-003 = {src/d.py, src/e.py, src/f.py, src/g.py}. MCP trials name their task
``mcp_<task>_AbCdEf`` (canonicalised).

| run         | raw config            | model | task      | reward | calls (files surfaced)                |
|-------------|-----------------------|-------|-----------|--------|---------------------------------------|
| r1_current  | baseline-local-direct | m1    | alpha-001 | 0.0    | Grep (a, z), Read a                   |
| r1_current  | baseline-local-direct | m1    | beta-002  | 1.0    | Read c                                |
| r1_current  | mcp-remote-direct     | m1    | alpha-001 | 1.0    | keyword_search (a, b), read_file a    |
| r1_current  | mcp-remote-direct     | m1    | beta-002  | 1.0    | keyword_search (z)                    |
| r2_legacy   | baseline              | m1    | alpha-001 | 0.5    | Grep (y)                              |
| r2_legacy   | baseline              | m1    | gamma-003 | 0.0    | Read d                                |
| r2_legacy   | mcp                   | m1    | gamma-003 | 1.0    | keyword_search (d, e), read_file f    |
| r3_model2   | baseline-local-direct | m2    | alpha-001 | 0.0    | Read b                                |
| r3_model2   | mcp-remote-direct     | m2    | alpha-001 | 1.0    | keyword_search (a, b)   (batch 1)     |
| r3_model2   | mcp-remote-direct     | m2    | alpha-001 | 0.0    | keyword_search (z)      (batch 2)     |
| r3_model2   | mcp-remote-direct     | m2    | beta-002  | 1.0    | read_file c                           |

Every call is 10 s after the previous one (the first 10 s after the agent starts); the
agent runs 60 s. Harness version 2.1.62 everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

GROUND_TRUTH = {
    "alpha-001": ["src/a.py", "src/b.py"],
    "beta-002": ["src/c.py"],
    "gamma-003": ["src/d.py", "src/e.py", "src/f.py", "src/g.py"],
}

# (run, raw config, batch, task, model, reward, calls); a call is (tool, files)
TRIALS = [
    (
        "r1_current",
        "baseline-local-direct",
        "2026-01-01__00-00-00",
        "alpha-001",
        "m1",
        0.0,
        [("Grep", ["a", "z"]), ("Read", ["a"])],
    ),
    (
        "r1_current",
        "baseline-local-direct",
        "2026-01-01__00-00-00",
        "beta-002",
        "m1",
        1.0,
        [("Read", ["c"])],
    ),
    (
        "r1_current",
        "mcp-remote-direct",
        "2026-01-01__00-00-00",
        "alpha-001",
        "m1",
        1.0,
        [("keyword_search", ["a", "b"]), ("read_file", ["a"])],
    ),
    (
        "r1_current",
        "mcp-remote-direct",
        "2026-01-01__00-00-00",
        "beta-002",
        "m1",
        1.0,
        [("keyword_search", ["z"])],
    ),
    ("r2_legacy", "baseline", "2026-01-02__00-00-00", "alpha-001", "m1", 0.5, [("Grep", ["y"])]),
    ("r2_legacy", "baseline", "2026-01-02__00-00-00", "gamma-003", "m1", 0.0, [("Read", ["d"])]),
    (
        "r2_legacy",
        "mcp",
        "2026-01-02__00-00-00",
        "gamma-003",
        "m1",
        1.0,
        [("keyword_search", ["d", "e"]), ("read_file", ["f"])],
    ),
    (
        "r3_model2",
        "baseline-local-direct",
        "2026-01-03__00-00-00",
        "alpha-001",
        "m2",
        0.0,
        [("Read", ["b"])],
    ),
    (
        "r3_model2",
        "mcp-remote-direct",
        "2026-01-03__00-00-00",
        "alpha-001",
        "m2",
        1.0,
        [("keyword_search", ["a", "b"])],
    ),
    (
        "r3_model2",
        "mcp-remote-direct",
        "2026-01-03__01-00-00",
        "alpha-001",
        "m2",
        0.0,
        [("keyword_search", ["z"])],
    ),
    (
        "r3_model2",
        "mcp-remote-direct",
        "2026-01-03__00-00-00",
        "beta-002",
        "m2",
        1.0,
        [("read_file", ["c"])],
    ),
]


def _call(index: int, tool: str, files: list[str]) -> tuple[dict, dict]:
    paths = [f"src/{f}.py" for f in files]
    call_id = f"toolu_{index:03d}"
    if tool == "Grep":
        name, args = "Grep", {"pattern": "needle", "path": "/workspace"}
        content = "\n".join(f"/workspace/{p}" for p in paths)  # files_with_matches
    elif tool == "Read":
        name, args = "Read", {"file_path": f"/workspace/{paths[0]}"}
        content = "1\tline"
    elif tool == "keyword_search":
        name, args = "mcp__sourcegraph__sg_keyword_search", {"query": "needle"}
        content = json.dumps(
            {"blocks": [{"file": p, "repo": "github.com/org/repo", "chunks": []} for p in paths]}
        )
    else:
        name = "mcp__sourcegraph__sg_read_file"
        args = {"repo": "github.com/org/repo", "path": paths[0]}
        content = "1: line"
    return (
        {"tool_call_id": call_id, "function_name": name, "arguments": args},
        {"source_call_id": call_id, "content": content},
    )


def _trajectory(model: str, calls: list[tuple[str, list[str]]]) -> dict:
    steps = [
        {
            "step_id": 1,
            "timestamp": "2026-01-01T00:00:00.000Z",
            "source": "user",
            "message": "fix it",
        }
    ]
    for i, (tool, files) in enumerate(calls):
        call, result = _call(i, tool, files)
        steps.append(
            {
                "step_id": i + 2,
                "timestamp": f"2026-01-01T00:00:{10 * (i + 1):02d}.000Z",
                "source": "agent",
                "message": "",
                "metrics": {"prompt_tokens": 1000 * (i + 1), "completion_tokens": 10},
                "tool_calls": [call],
                "observation": {"results": [result]},
            }
        )
    return {
        "schema_version": "ATIF-v1.2",
        "session_id": "s",
        "agent": {"name": "claude-code", "version": "2.1.62", "model_name": model},
        "steps": steps,
    }


def build(root: Path) -> tuple[Path, Path]:
    """Write the study under ``root``; return ``(runs folder, tasks root)``."""
    tasks = root / "benchmarks"
    for task, files in GROUND_TRUTH.items():
        folder = tasks / "suite" / task / "tests"
        folder.mkdir(parents=True)
        (folder / "ground_truth.json").write_text(json.dumps({"files": files}))
    runs = root / "runs" / "official"
    for i, (run, config, batch, task, model, reward, calls) in enumerate(TRIALS):
        trial = runs / run / config / batch / f"{task}__trial{i:02d}"
        (trial / "agent").mkdir(parents=True)
        day = batch[:10]
        hour = batch[12:14]
        start = f"{day}T{hour}:00:00+00:00"
        end = f"{day}T{hour}:01:00+00:00"
        result = {
            "task_name": task if "mcp" not in config else f"mcp_{task}_AbCdEf",
            "trial_name": trial.name,
            "config": {"agent": {"model_name": f"anthropic/{model}"}},
            "agent_info": {"name": "claude-code", "version": "2.1.62"},
            "verifier_result": {"rewards": {"reward": reward}},
            "exception_info": None,
            "started_at": start,
            "agent_execution": {"started_at": start, "finished_at": end},
        }
        (trial / "result.json").write_text(json.dumps(result))
        trajectory = _trajectory(model, calls)
        for step in trajectory["steps"]:
            step["timestamp"] = step["timestamp"].replace("2026-01-01T00", f"{day}T{hour}")
        (trial / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    return runs, tasks

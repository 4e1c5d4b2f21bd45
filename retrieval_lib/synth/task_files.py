"""A synthetic task's definition folder(s) under ``benchmarks/``, in the shape of real
CodeScaleBench tasks: ``task.toml``, ``instruction.md``, ``tests/test.sh`` and the
ground-truth file(s) of the task's kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from retrieval_lib.synth.catalog import TaskSpec
from retrieval_lib.synth.repos import REPOS, file_lines, stable_hash, symbol_line

__all__ = ["patch_hunks", "task_definition_files"]


def _toml_string(value: str) -> str:
    return json.dumps(value)


def _task_toml(task: TaskSpec) -> str:
    main = task.repos[0]
    lines = [
        'version = "1.0"',
        "",
        "[metadata]",
        f"name = {_toml_string(task.name)}",
        f"description = {_toml_string(f'{task.kind} task about {task.symbol} in {main.upstream}')}",
        'license = "Apache-2.0"',
        "",
        "[task]",
        f"id = {_toml_string(task.name)}",
        f"repo = {_toml_string(main.upstream)}",
        f"category = {_toml_string(task.suite.split('_', 2)[-1])}",
        f"language = {_toml_string(main.language)}",
        f"pre_fix_rev = {_toml_string(main.revision)}",
        'difficulty = "hard"',
        f"time_limit_sec = {task.time_limit_sec}",
        "",
        "[task.metadata]",
        f"symbol = {_toml_string(task.symbol)}",
        'writable_paths = ["/workspace/"]',
        "",
        "[verification]",
        'type = "test"',
        'command = "bash /tests/test.sh"',
        f"reward_type = {_toml_string(task.reward_type)}",
        "",
        "[environment]",
        "build_timeout_sec = 900.0",
        "",
    ]
    return "\n".join(lines)


def _test_sh(task: TaskSpec) -> str:
    if task.kind == "none":
        return (
            "#!/bin/bash\n"
            "# Reward: checklist (0.0-1.0) — task-specific evaluation criteria\n"
            "set -e\n\n"
            'TRAJECTORY_PATH="${TRAJECTORY_PATH:-/logs/trajectory.jsonl}"\n'
            'OUTPUT_PATH="/logs/tac_result.json"\n\n'
            "cd /utils\n"
            'python_default /utils/eval.py --trajectory_path "$TRAJECTORY_PATH" '
            '--result_path "$OUTPUT_PATH" 2>&1 || echo \'{"score": 0}\' > "$OUTPUT_PATH"\n\n'
            "mkdir -p /logs/verifier\n"
            "SCORE=$(python3 -c \"import json; print(json.load(open('$OUTPUT_PATH')).get('score', 0))\")\n"
            'echo "$SCORE" > /logs/verifier/reward.txt\n'
        )
    return (
        "#!/bin/bash\n"
        f"# Reward: {task.reward_type} (0.0-1.0)\n"
        "set -e\n\n"
        "mkdir -p /logs/verifier\n"
        "cd /workspace\n"
        'python3 /tests/score.py > /logs/verifier/score.log 2>&1 || echo "0.0" > /logs/verifier/reward.txt\n'
    )


def patch_hunks(task: TaskSpec) -> list[tuple[str, str, int, list[str]]]:
    """``(repo, path, start, old lines)`` of the one hunk per edited file of a patch task."""
    hunks = []
    for repo, path in task.edit_files:
        profile = REPOS[repo]
        start = max(1, symbol_line(profile, path, task.symbol) - 3)
        hunks.append((repo, path, start, file_lines(profile, path, start, start + 6, task.symbol)))
    return hunks


def _diff(task: TaskSpec) -> str:
    parts = []
    for _repo, path, start, before in patch_hunks(task):
        after = list(before)
        changed = min(3, len(after) - 1)
        after[changed] = after[changed] + "  # updated"
        digest = f"{stable_hash(path) & 0xFFFFFFF:07x}"
        parts.append(f"diff --git a/{path} b/{path}\n")
        parts.append(f"index {digest}..{digest[::-1]} 100644\n")
        parts.append(f"--- a/{path}\n+++ b/{path}\n")
        parts.append(f"@@ -{start},{len(before)} +{start},{len(after)} @@\n")
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            if i == changed:
                parts.append(f"-{old}\n+{new}\n")
            else:
                parts.append(f" {old}\n")
    return "".join(parts)


def task_definition_files(task: TaskSpec, benchmarks_root: Path) -> dict[Path, str]:
    """The files of the task's folder(s) under ``benchmarks_root``, and their text.

    Examples
    --------
    >>> from retrieval_lib.synth.catalog import build_task
    >>> files = task_definition_files(build_task(0, 0), Path("benchmarks"))
    >>> sorted(p.name for p in files)[:2]
    ['ground_truth.json', 'instruction.md']
    """
    main_dir = benchmarks_root / task.task_dirs[0]
    gt_dir = benchmarks_root / task.task_dirs[-1]
    files: dict[Path, str] = {
        main_dir / "task.toml": _task_toml(task),
        main_dir / "instruction.md": task.instruction,
        main_dir / "tests" / "test.sh": _test_sh(task),
    }
    files.update(_ground_truth_files(task, main_dir, gt_dir))
    return files


def _json(value: Any) -> str:
    return json.dumps(value, indent=2) + "\n"


def _ground_truth_files(task: TaskSpec, main_dir: Path, gt_dir: Path) -> dict[Path, str]:
    """The file(s) holding the task's ground truth, in the shape of its kind."""
    tests = gt_dir / "tests"
    paths = [p for _, p in task.relevant]
    if task.kind == "bare_list":
        return {tests / "ground_truth.json": _json([*paths, paths[0]])}  # with a duplicate
    if task.kind in ("dict", "split"):
        return {tests / "ground_truth.json": _json(_files_ground_truth(task, paths))}
    if task.is_org:
        return {tests / "ground_truth.json": _json(_org_ground_truth(task))}
    if task.kind in ("defects", "defects_wrapped"):
        defects = _defects(task)
        value = {"defects": defects} if task.kind == "defects_wrapped" else defects
        return {tests / "expected_defects.json": _json(value)}
    if task.kind == "expected_changes":
        body = {
            "task_id": task.name,
            "expected_files": paths,
            "min_files_changed": len(paths),
        }
        return {tests / "expected_changes.json": _json(body)}
    if task.kind == "curator":
        return {
            tests / "ground_truth_agent.json": _json(_curator_ground_truth(task, paths)),
            tests / "ground_truth_meta.json": _json(_curator_meta(task, paths)),
        }
    if task.kind == "reference_patch":
        return {tests / "reference_fix.patch": _diff(task)}
    if task.kind == "solve_sh":
        return {main_dir / "solution" / "solve.sh": _solve_sh(task)}
    return {}


def _files_ground_truth(task: TaskSpec, paths: list[str]) -> dict[str, Any]:
    """``ground_truth.json`` as a dict of files (with symbols and edit files for ``dict``)."""
    body: dict[str, Any] = {"files": paths}
    if task.kind == "dict":
        body["symbols"] = [
            {"file": p, "symbol": task.symbol, "repo": task.repos[0].upstream} for p in paths[:2]
        ]
        body["expected_edit_files"] = [p for _, p in task.edit_files]
    body["description"] = f"Files relevant to {task.symbol}"
    return body


def _org_ground_truth(task: TaskSpec) -> dict[str, Any]:
    """``ground_truth.json`` of a multi-repository task: ``repo::path`` keys."""
    return {
        "files": [f"{r}::{p}" for r, p in task.relevant],
        "symbols": [
            {"file": p, "symbol": REPOS[r].symbols[0], "repo": r} for r, p in task.relevant[:3]
        ],
        "description": "Dependency chain across istio, go-control-plane and data-plane-api",
    }


def _defects(task: TaskSpec) -> list[dict[str, Any]]:
    """The entries of ``expected_defects.json``, one per ground-truth chunk."""
    return [
        {
            "id": f"D{i + 1}",
            "file": c.path,
            "line_start": c.line_start,
            "line_end": c.line_end,
            "defect_type": c.defect_type,
            "severity": "high" if i == 0 else "medium",
            "description": c.annotation,
        }
        for i, c in enumerate(task.chunks)
    ]


def _curator_ground_truth(task: TaskSpec, paths: list[str]) -> dict[str, Any]:
    """``ground_truth_agent.json``: files, a symbol and annotated chunks."""
    return {
        "files": paths,
        "symbols": [
            {"file": p, "symbol": task.symbol, "repo": task.repos[0].upstream} for p in paths[:1]
        ],
        "chunks": [
            {
                "file": c.path,
                "line_start": c.line_start,
                "line_end": c.line_end,
                "annotation": c.annotation,
            }
            for c in task.chunks
        ],
        "expected_edit_files": [],
    }


def _curator_meta(task: TaskSpec, paths: list[str]) -> dict[str, Any]:
    """``ground_truth_meta.json``: what the curator agent says about its ground truth."""
    return {
        "has_ground_truth": True,
        "has_chunk_ground_truth": True,
        "ground_truth_source": "curator_agent",
        "ground_truth_confidence": "medium",
        "task_name": task.name,
        "curator_agent_version": "2.0",
        "model": "claude-opus-4-6",
        "backend": "hybrid",
        "timestamp": "2026-03-04T00:11:31Z",
        "files_count": len(paths),
        "edit_files_count": 0,
        "chunks_count": len(task.chunks),
        "symbols_count": 1,
        "cost_usd": 0.36359250000000004,
        "elapsed_sec": 49.1,
        "exploration_notes": f"Traced {task.symbol} through its definition and callers.",
    }


def _solve_sh(task: TaskSpec) -> str:
    """``solution/solve.sh``: a script that applies the gold patch."""
    return (
        "#!/bin/bash\n"
        f"# Gold patch for {task.name}\n"
        "set -euo pipefail\n"
        "cd /workspace\n"
        "git apply --whitespace=nowarn <<'PATCH'\n"
        f"{_diff(task)}"
        "PATCH\n"
        'echo "gold patch applied"\n'
    )

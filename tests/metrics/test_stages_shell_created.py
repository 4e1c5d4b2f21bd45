"""Files the agent creates through the shell are agent-created, like ``Write``'s (issue 9).

One hand-made session, written once as an ATIF trajectory and once as a Claude Code
stream-json transcript, goes through the real parser, the event builder and the metric
stages. Every expected value is worked out by hand below.

Session (ground truth ``src/app.py``, ``src/util.py``):

====  ======================================================  ==============================
step  call                                                    effect
====  ======================================================  ==============================
0     Bash ``echo "TODO" > notes.md``                         creates notes.md
1     Bash ``cat notes.md``                                   reads an agent-created file
2     Bash ``cp src/app.py backup.py``                        creates backup.py (no read)
3     Bash ``cat backup.py``                                  reads an agent-created file
4     Bash ``cat > plan.md <<'EOF'`` (body "cat src/util.py")  creates plan.md; body not a read
5     Bash ``python run.py > /dev/null 2>&1``                 creates nothing
6     Bash ``cat src/util.py``                                reads ground truth (rank 1)
7     Bash ``echo patched > src/util.py``                     overwrites it after the read
8     Read ``plan.md``                                        reads an agent-created file
9     Bash ``cat other.py``                                   reads a non-relevant file (rank 2)
10    Bash ``echo x > src/app.py`` (is_error)                 a failed call creates nothing
11    Bash ``cat src/app.py``                                 reads ground truth (rank 3)
====  ======================================================  ==============================

Surfaced ranking: src/util.py, other.py, src/app.py (notes.md, backup.py and plan.md are
agent-created and dropped). With 2 relevant files:

* P@1 = 1, R@1 = 1/2; P@3 = 2/3, R@3 = 1; P@5 = 2/5 (3 retrieved, 2 relevant);
* AP = (1/1 + 2/3) / 2 = 5/6; RR = 1;
* nDCG@3 = (1 + 1/log2(4)) / (1 + 1/log2(3)) = 1.5 / 1.6309... ;
* file recall 1, context efficiency 2/3; the first relevant file at step 6.

Written files: notes.md (0), backup.py (2), plan.md (4), src/util.py (7). Agent-created:
backup.py, notes.md, plan.md. Repository edits: src/util.py only (ground truth, first seen
as a read), so the edit funnel step is 1 file with 1 ground-truth hit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from retrieval_lib.events.build import build_events
from retrieval_lib.events.document import validate_document
from retrieval_lib.ground_truth import GroundTruth
from retrieval_lib.metrics.stages import evaluate_document
from retrieval_lib.traces.atif import parse_atif
from retrieval_lib.traces.model import ParsedTrace
from retrieval_lib.traces.stream_json import parse_stream_json

GT = ["src/app.py", "src/util.py"]
HEREDOC = "cat > plan.md <<'EOF'\nstep 1: cat src/util.py\nEOF"
#: (tool, arguments, result, is_error)
CALLS: list[tuple[str, dict[str, Any], str, bool]] = [
    ("Bash", {"command": 'echo "TODO" > notes.md'}, "", False),
    ("Bash", {"command": "cat notes.md"}, "TODO", False),
    ("Bash", {"command": "cp src/app.py backup.py"}, "", False),
    ("Bash", {"command": "cat backup.py"}, "import os", False),
    ("Bash", {"command": HEREDOC}, "", False),
    ("Bash", {"command": "python run.py > /dev/null 2>&1"}, "", False),
    ("Bash", {"command": "cat src/util.py"}, "def f(): pass", False),
    ("Bash", {"command": "echo patched > src/util.py"}, "", False),
    ("Read", {"file_path": "/workspace/plan.md"}, "step 1: cat src/util.py", False),
    ("Bash", {"command": "cat other.py"}, "x = 1", False),
    ("Bash", {"command": "echo x > src/app.py"}, "Permission denied", True),
    ("Bash", {"command": "cat src/app.py"}, "import os", False),
]


def _write_atif(path: Path) -> None:
    steps: list[dict[str, Any]] = [{"step_id": 1, "source": "user", "message": "go"}]
    for index, (tool, arguments, result, is_error) in enumerate(CALLS):
        call_id = f"toolu_{index}"
        steps.append(
            {
                "step_id": index + 2,
                "timestamp": f"2026-01-01T00:00:{index + 1:02d}.000Z",
                "source": "agent",
                "message": "",
                "metrics": {"prompt_tokens": 100 * (index + 1), "completion_tokens": 10},
                "tool_calls": [
                    {"tool_call_id": call_id, "function_name": tool, "arguments": arguments}
                ],
                "observation": {"results": [{"source_call_id": call_id, "content": result}]},
                "extra": {
                    "tool_result_metadata": {
                        "raw_tool_result": {"tool_use_id": call_id, "is_error": is_error}
                    }
                },
            }
        )
    document = {
        "schema_version": "ATIF-v1.2",
        "session_id": "s-1",
        "agent": {"name": "claude-code", "version": "2.1.0", "model_name": "m"},
        "steps": steps,
    }
    path.write_text(json.dumps(document))


def _write_stream_json(path: Path) -> None:
    lines: list[dict[str, Any]] = [{"type": "system", "subtype": "init", "model": "m"}]
    for index, (tool, arguments, result, is_error) in enumerate(CALLS):
        call_id = f"toolu_{index}"
        lines.append(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_{index}",
                    "content": [
                        {"type": "tool_use", "id": call_id, "name": tool, "input": arguments}
                    ],
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
                "parent_tool_use_id": None,
            }
        )
        lines.append(
            {
                "type": "user",
                "message": {
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call_id,
                            "content": result,
                            "is_error": is_error,
                        }
                    ]
                },
                "parent_tool_use_id": None,
            }
        )
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def _document(trace: ParsedTrace) -> dict[str, Any]:
    events = build_events(trace, GroundTruth(files=GT))
    doc = {
        "schema_version": "1.2",
        "provenance": {
            "run_id": "run-1",
            "batch_timestamp": None,
            "task_name": "task-001",
            "config_name": "baseline-local-direct",
            "benchmark": "suite",
        },
        "coverage": {
            "has_trajectory": trace.source == "trajectory",
            "has_transcript": trace.source == "transcript",
            "has_ground_truth": True,
            "has_chunk_ground_truth": False,
            "trace_source": trace.source,
            "degraded_reason": None,
        },
        "ground_truth": {"files": GT},
        "events": events,
    }
    validate_document(doc)
    return doc


@pytest.fixture(params=["trajectory", "transcript"])
def doc(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    if request.param == "trajectory":
        path = tmp_path / "trajectory.json"
        _write_atif(path)
        trace = parse_atif(path)
    else:
        path = tmp_path / "claude-code.txt"
        _write_stream_json(path)
        trace = parse_stream_json(path)
    assert len(trace.tool_calls) == len(CALLS)
    return _document(trace)


def test_events_carry_the_created_files(doc: dict[str, Any]) -> None:
    events = doc["events"]
    created = [ev["created_files"] for ev in events]
    assert created == [
        ["notes.md"],
        [],
        ["backup.py"],  # the cp destination; its source is not read
        [],
        ["plan.md"],
        [],  # /dev/null and 2>&1 create nothing
        [],
        ["src/util.py"],
        [],
        [],
        [],  # the failed call created nothing
        [],
    ]
    # a pure write keeps the category "other" and has no targets
    assert (events[0]["tool_category"], events[0]["target_files"]) == ("other", [])
    assert (events[2]["tool_category"], events[2]["target_files"]) == ("other", [])
    # the here-document's body ("cat src/util.py") is text, not a command
    assert (events[4]["tool_category"], events[4]["target_files"]) == ("other", [])
    # the later cat of the created file is still a file_read event of that file
    assert (events[1]["tool_category"], events[1]["target_files"]) == ("file_read", ["notes.md"])
    assert events[10]["is_error"] is True


def test_shell_created_files_are_not_retrievals(doc: dict[str, Any]) -> None:
    record = evaluate_document(doc)
    file_level = record["file_level"]
    assert file_level["ranked_files"] == ["src/util.py", "other.py", "src/app.py"]
    metrics = file_level["metrics"]
    assert metrics["P@1"] == 1.0 and metrics["R@1"] == 0.5
    assert metrics["P@3"] == pytest.approx(2 / 3) and metrics["R@3"] == 1.0
    assert metrics["P@5"] == pytest.approx(2 / 5)
    assert metrics["AP"] == pytest.approx(5 / 6)
    assert metrics["RR"] == 1.0
    assert metrics["nDCG@3"] == pytest.approx(1.5 / (1 + 1 / math.log2(3)))
    assert file_level["file_recall"] == 1.0
    assert file_level["context_efficiency"] == pytest.approx(2 / 3)
    assert file_level["ttfr"]["steps"] == 6
    assert record["read_level"]["ranked_files"] == ["src/util.py", "other.py", "src/app.py"]


def test_funnel_lists_shell_created_files_apart(doc: dict[str, Any]) -> None:
    funnel = evaluate_document(doc)["funnel"]
    assert funnel["agent_created_files"] == ["backup.py", "notes.md", "plan.md"]
    assert funnel["surfaced"] == {"files": 3, "ground_truth_hits": 2}
    assert funnel["read"] == {"files": 3, "ground_truth_hits": 2}
    # src/util.py was read (step 6) before the shell overwrote it (step 7): an edit of a
    # ground-truth file, not an agent-created one
    assert funnel["edited"] == {"files": 1, "ground_truth_hits": 1}

"""Hand-made traps for the normalisation path: malformed, hostile or unusual inputs.

Every fixture is built here, in ``tmp_path``. The contract under test, for each trap: no
traceback, no silent zero, no lost data. Either the value is read correctly, or the
document says what was wrong (a warning that ends up in ``coverage.degraded_reason``),
or a broken input folder gives a one-line error naming the file; never a read outside
the trial or task folder, never a write outside the output folder.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from retrieval_lib.cli import main
from retrieval_lib.events.build import build_events
from retrieval_lib.events.document import find_documents, load_document
from retrieval_lib.ground_truth import load_ground_truth
from retrieval_lib.io import lies_outside
from retrieval_lib.normalize import normalize_paths
from retrieval_lib.runs import discover_runs, discover_trials, read_trial_result
from retrieval_lib.traces.atif import parse_atif
from retrieval_lib.traces.model import ParsedTrace, ToolCall
from retrieval_lib.traces.shell import parse_shell_command
from retrieval_lib.traces.stream_json import parse_stream_json

BATCH = "2026-02-28__03-13-55"
TRIAL = "demo-task-001__abcdefg"

RESULT: dict[str, Any] = {
    "task_name": "mcp_demo-task-001_AbC123",
    "trial_name": TRIAL,
    "config": {"agent": {"model_name": "anthropic/claude-x"}},
    "agent_info": {"name": "claude-code", "version": "2.1.62"},
    "verifier_result": {"rewards": {"reward": 1.0}},
    "started_at": "2026-02-28T03:14:00.000000Z",
    "agent_execution": {
        "started_at": "2026-02-28T03:15:00.000000Z",
        "finished_at": "2026-02-28T03:18:00.000000Z",
    },
    "agent_result": {"n_input_tokens": 100, "n_cache_tokens": 10, "n_output_tokens": 5},
}


def _line(obj: Any) -> str:
    return json.dumps(obj)


def _assistant(call_id: str, name: str, arguments: Any, message_id: str, tokens: int) -> str:
    block = {"type": "tool_use", "id": call_id, "name": name, "input": arguments}
    usage = {"input_tokens": tokens, "output_tokens": 2}
    return _line(
        {"type": "assistant", "message": {"id": message_id, "content": [block], "usage": usage}}
    )


def _user(call_id: str, content: Any) -> str:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    return _line({"type": "user", "message": {"content": [block]}})


INIT = _line({"type": "system", "subtype": "init", "model": "claude-x"})
RESULT_LINE = _line(
    {"type": "result", "total_cost_usd": 0.2, "modelUsage": {"m": {"inputTokens": 30}}}
)
# Two calls: Read src/a.py (message of 10 + 2 tokens), cat src/b.py (20 + 2 tokens).
TRANSCRIPT_LINES = [
    INIT,
    _assistant("t1", "Read", {"file_path": "/workspace/src/a.py"}, "m1", 10),
    _user("t1", "1 x"),
    _assistant("t2", "Bash", {"command": "cat src/b.py"}, "m2", 20),
    _user("t2", "y"),
    RESULT_LINE,
]
TRANSCRIPT = "\n".join(TRANSCRIPT_LINES) + "\n"


def _make_run(
    root: Path,
    *,
    result: Any = RESULT,
    transcript: str | bytes | None = TRANSCRIPT,
    trajectory: Any = None,
    ground_truth: Any = None,
) -> Path:
    """A run ``root/runs/run1`` with one trial and a task ``demo-task-001``; the trial."""
    trial = root / "runs" / "run1" / "baseline-local-direct" / BATCH / TRIAL
    (trial / "agent").mkdir(parents=True)
    if result is not None:
        raw = result if isinstance(result, bytes) else json.dumps(result).encode()
        (trial / "result.json").write_bytes(raw)
    if transcript is not None:
        raw = transcript if isinstance(transcript, bytes) else transcript.encode()
        (trial / "agent" / "claude-code.txt").write_bytes(raw)
    if trajectory is not None:
        raw = trajectory if isinstance(trajectory, bytes) else json.dumps(trajectory).encode()
        (trial / "agent" / "trajectory.json").write_bytes(raw)
    task = root / "tasks" / "suite" / "demo-task-001"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text("")
    gt = ground_truth if ground_truth is not None else {"files": ["src/a.py", "src/b.py"]}
    (task / "tests" / "ground_truth.json").write_text(json.dumps(gt))
    return trial


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue()


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


# ------------------------------------------------------------------ result.json


def _result(**changes: Any) -> dict[str, Any]:
    data = json.loads(json.dumps(RESULT))
    for key, value in changes.items():
        if value is None and key.startswith("drop_"):
            data.pop(key[5:], None)
        else:
            data[key] = value
    return data


RESULT_TRAPS = {
    # name: (result.json bytes, reward, errored, agent seconds, task_name, warning or None)
    "a list": (b"[1, 2]", None, False, None, "demo-task-001", "result.json is not a JSON object"),
    "a string": (b'"x"', None, False, None, "demo-task-001", "result.json is not a JSON object"),
    "empty file": (b"", None, False, None, "demo-task-001", "result.json is not valid JSON"),
    "UTF-8 BOM": (
        b"\xef\xbb\xbf" + json.dumps(RESULT).encode(),
        1.0,
        False,
        180.0,
        "demo-task-001",
        None,
    ),
    "latin-1 byte": (
        json.dumps(RESULT).encode()[:-1] + b', "note": "caf\xe9"}',
        1.0,
        False,
        180.0,
        "demo-task-001",
        "result.json is not valid UTF-8",
    ),
    "escaped lone surrogate in task_name": (
        json.dumps(_result(task_name="demo-task-001")).replace("demo-task-001", "demo\\udcff"),
        1.0,
        False,
        180.0,
        "demo\ufffd",
        "result.json holds 2 escaped lone surrogate(s); replaced by U+FFFD",
    ),
    "nested 100000 deep": (
        b'{"task_name": "demo-task-001", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}",
        None,
        False,
        None,
        "demo-task-001",
        "result.json is not usable JSON (nested too deeply)",
    ),
    "reward string": (
        _result(verifier_result={"rewards": {"reward": "1.0"}}),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "reward is the string '1.0'; read as 1",
    ),
    "reward NaN string": (
        _result(verifier_result={"rewards": {"reward": "NaN"}}),
        None,
        False,
        180.0,
        "demo-task-001",
        "reward is 'NaN', not a finite number",
    ),
    "reward NaN literal": (
        json.dumps(_result(verifier_result={"rewards": {"reward": float("nan")}})).encode(),
        None,
        False,
        180.0,
        "demo-task-001",
        "reward is nan, not a finite number",
    ),
    "reward null": (
        _result(verifier_result={"rewards": {"reward": None}}),
        None,
        False,
        180.0,
        "demo-task-001",
        "no reward recorded",
    ),
    "verifier_result null": (
        _result(verifier_result=None),
        None,
        False,
        180.0,
        "demo-task-001",
        "no reward recorded",
    ),
    "reward above 1": (
        _result(verifier_result={"rewards": {"reward": 2.5}}),
        2.5,
        False,
        180.0,
        "demo-task-001",
        "reward 2.5 lies outside [0, 1]",
    ),
    "agent_result nulls": (
        _result(agent_result={"n_input_tokens": None, "cost_usd": None}),
        1.0,
        False,
        180.0,
        "demo-task-001",
        None,
    ),
    "token count a string": (
        _result(agent_result={"n_input_tokens": "7"}),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "agent_result.n_input_tokens is '7', not a token",
    ),
    "token count 1e30": (
        json.dumps(_result(agent_result={"n_input_tokens": 10**30})).encode(),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "not a token count",
    ),
    "no microseconds, naive": (
        _result(
            agent_execution={
                "started_at": "2026-02-28T03:15:00",
                "finished_at": "2026-02-28T03:18:00Z",
            }
        ),
        1.0,
        False,
        180.0,
        "demo-task-001",
        None,
    ),
    "offsets": (
        _result(
            agent_execution={
                "started_at": "2026-02-28T05:15:00+02:00",
                "finished_at": "2026-02-28T03:18:00Z",
            }
        ),
        1.0,
        False,
        180.0,
        "demo-task-001",
        None,
    ),
    "garbage timestamp": (
        _result(agent_execution={"started_at": "yesterday", "finished_at": "2026-02-28T03:18:00Z"}),
        1.0,
        False,
        None,
        "demo-task-001",
        "agent_execution.started_at is 'yesterday', not an ISO 8601",
    ),
    "numeric timestamp": (
        _result(started_at=1700000000),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "result.json started_at is 1700000000, not an ISO 8601",
    ),
    "finished before started": (
        _result(
            agent_execution={
                "started_at": "2026-02-28T03:18:00Z",
                "finished_at": "2026-02-28T03:15:00Z",
            }
        ),
        1.0,
        False,
        None,
        "demo-task-001",
        "finished_at is before its started_at",
    ),
    "no task_name": (
        _result(drop_task_name=None),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "result.json has no task_name; using the trial folder name",
    ),
    "task_name unicode": (
        _result(task_name="Démo-Täsk-001"),
        1.0,
        False,
        180.0,
        "démo-täsk-001",
        None,
    ),
    "task_name path": (
        _result(task_name="../../etc/demo-task-001"),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "contains a path separator",
    ),
    "task_name ..": (_result(task_name=".."), 1.0, False, 180.0, "demo-task-001", "is '..'"),
    "task_name 400 chars": (
        _result(task_name="x" * 400),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "is longer than 200 bytes",
    ),
    "task_name control char": (
        _result(task_name="demo\x00task"),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "contains control characters",
    ),
    "task_name spaces, upper": (
        _result(task_name="  MCP_DEMO-TASK-001_AbC123 "),
        1.0,
        False,
        180.0,
        "demo-task-001",
        None,
    ),
    "exception_info string": (
        _result(exception_info="AgentTimeoutError"),
        1.0,
        True,
        180.0,
        "demo-task-001",
        "exception_info is the string",
    ),
    "exception_info prose": (
        _result(exception_info="it broke"),
        1.0,
        True,
        180.0,
        "demo-task-001",
        "exception_info is the string 'it broke'",
    ),
    "exception_info list": (
        _result(exception_info=["x"]),
        1.0,
        True,
        180.0,
        "demo-task-001",
        "exception_info is a JSON array ['x'], not an object",
    ),
    "exception_info empty list": (
        _result(exception_info=[]),
        1.0,
        False,
        180.0,
        "demo-task-001",
        "read as no exception",
    ),
    "exception_info without type": (
        _result(exception_info={"exception_message": "x"}),
        1.0,
        True,
        180.0,
        "demo-task-001",
        None,
    ),
}


def _result_bytes(raw: Any) -> bytes:
    if isinstance(raw, bytes):
        return raw
    return (raw if isinstance(raw, str) else json.dumps(raw)).encode()


@pytest.mark.parametrize("name", list(RESULT_TRAPS))
def test_result_json_traps(tmp_path: Path, name: str) -> None:
    raw, reward, errored, seconds, task_name, warning = RESULT_TRAPS[name]
    trial = tmp_path / TRIAL
    trial.mkdir()
    (trial / "result.json").write_bytes(_result_bytes(raw))
    result = read_trial_result(trial)
    assert result.reward == reward
    assert result.passed == (None if reward is None else reward >= 1.0)
    assert result.errored is errored
    assert result.agent_execution_seconds == seconds
    assert result.task_name == task_name
    if warning is None:
        assert result.warnings == []
    else:
        assert any(warning in w for w in result.warnings), result.warnings
    # The document is written and valid whatever the trap (huge ints, NaN, long names).
    trial_in_run = _make_run(tmp_path / "run", result=None)
    (trial_in_run / "result.json").write_bytes(_result_bytes(raw))
    report = normalize_paths(
        [tmp_path / "run" / "runs"], tmp_path / "run" / "tasks", out=tmp_path / "out"
    )
    assert (report.trials, report.failed) == (1, 0)
    doc = load_document(find_documents([tmp_path / "out"])[0])
    assert doc["outcome"]["reward"] == reward
    if warning is not None:
        assert warning in doc["coverage"]["degraded_reason"]


def test_exception_string_that_names_a_type_is_that_type(tmp_path: Path) -> None:
    trial = tmp_path / TRIAL
    _write(trial / "result.json", json.dumps(_result(exception_info="AgentTimeoutError")))
    result = read_trial_result(trial)
    assert (result.exception_type, result.timed_out) == ("AgentTimeoutError", True)
    _write(trial / "result.json", json.dumps(_result(exception_info="it broke")))
    assert read_trial_result(trial).exception_type == "UnknownException"


# ------------------------------------------------------------------ trajectory.json


def _step(number: int, calls: Any = None, results: Any = None, **extra: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "step_id": number,
        "timestamp": "2026-02-28T03:15:10.000Z",
        "source": "agent",
        "metrics": {"prompt_tokens": 10 * number, "completion_tokens": 2},
    }
    if calls is not None:
        step["tool_calls"] = calls
    if results is not None:
        step["observation"] = {"results": results}
    step.update(extra)
    return step


def _call(call_id: str, name: str = "Read", arguments: Any = None) -> dict[str, Any]:
    if arguments is None:
        arguments = {"file_path": "/workspace/src/a.py"}
    return {"tool_call_id": call_id, "function_name": name, "arguments": arguments}


def _trajectory(steps: Any, version: Any = "ATIF-v1.2", **extra: Any) -> dict[str, Any]:
    return {"schema_version": version, "agent": {"model_name": "m"}, "steps": steps, **extra}


def _ref(path: str) -> list[dict[str, Any]]:
    return [
        {
            "source_call_id": "t1",
            "content": "x",
            "subagent_trajectory_ref": [{"trajectory_path": path}],
        }
    ]


GOOD_STEPS = [_step(1, [_call("t1")], [{"source_call_id": "t1", "content": "x"}])]

TRAJECTORY_TRAPS: dict[str, tuple[Any, Any, str | None]] = {
    # name: (file content, expected [(tool, file_path arg, result, cumulative, timestamp)]
    #        or an error text, expected warning)
    "ATIF-v1.4": (
        _trajectory(GOOD_STEPS, "ATIF-v1.4"),
        [("Read", "/workspace/src/a.py", "x", 12, "2026-02-28T03:15:10.000Z")],
        None,
    ),
    "ATIF-v1.10": (
        _trajectory(GOOD_STEPS, "ATIF-v1.10"),
        [("Read", "/workspace/src/a.py", "x", 12, "2026-02-28T03:15:10.000Z")],
        None,
    ),
    "ATIF-v2.0": (
        _trajectory(GOOD_STEPS, "ATIF-v2.0"),
        "unsupported ATIF version 'ATIF-v2.0'",
        None,
    ),
    "schema_version missing": ({"steps": GOOD_STEPS}, "schema_version is None", None),
    "steps an object": (_trajectory({"a": 1}), "'steps' is not a list", None),
    "0-byte file": (b"", "is empty", None),
    "null": (b"null", "top level is not an object", None),
    "nested 5000 deep": (
        b'{"schema_version": "ATIF-v1.2", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        "is not valid JSON",
        None,
    ),
    "step without tool_calls": (_trajectory([_step(1)]), [], None),
    "tool_calls null": (_trajectory([_step(1, tool_calls=None)]), [], None),
    "arguments as JSON text": (
        _trajectory([_step(1, [_call("t1", "Read", json.dumps({"file_path": "/w/a.py"}))])]),
        [("Read", "/w/a.py", None, 12, "2026-02-28T03:15:10.000Z")],
        None,
    ),
    "arguments a list": (
        _trajectory([_step(1, [_call("t1", "Read", ["/w/a.py"])])]),
        [("Read", None, None, 12, "2026-02-28T03:15:10.000Z")],
        "step #1: arguments of Read are not a JSON object, dropped",
    ),
    "function_name missing": (
        _trajectory([_step(1, [{"tool_call_id": "t1", "arguments": {}}])]),
        [("unknown", None, None, 12, "2026-02-28T03:15:10.000Z")],
        "step #1: tool call without function_name",
    ),
    "duplicate tool_call_id": (
        _trajectory(
            [
                _step(
                    1,
                    [_call("t1"), _call("t1", "Grep", {"pattern": "x"})],
                    [{"source_call_id": "t1", "content": "x"}],
                )
            ]
        ),
        [
            ("Read", "/workspace/src/a.py", "x", 12, "2026-02-28T03:15:10.000Z"),
            ("Grep", None, "x", 12, "2026-02-28T03:15:10.000Z"),
        ],
        "step #1: tool_call_id t1 repeated",
    ),
    "content a list of blocks": (
        _trajectory(
            [
                _step(
                    1,
                    [_call("t1")],
                    [
                        {
                            "source_call_id": "t1",
                            "content": [
                                {"type": "text", "text": "a"},
                                [{"type": "text", "text": "b"}],
                                {"type": "image", "source": {}},
                            ],
                        }
                    ],
                )
            ]
        ),
        [("Read", "/workspace/src/a.py", "a\nb", 12, "2026-02-28T03:15:10.000Z")],
        None,
    ),
    "content null": (
        _trajectory([_step(1, [_call("t1")], [{"source_call_id": "t1", "content": None}])]),
        [("Read", "/workspace/src/a.py", None, 12, "2026-02-28T03:15:10.000Z")],
        None,
    ),
    "result for an unknown id": (
        _trajectory([_step(1, [_call("t1")], [{"source_call_id": "zz", "content": "x"}])]),
        [("Read", "/workspace/src/a.py", None, 12, "2026-02-28T03:15:10.000Z")],
        "1 observation result(s) match no tool call id",
    ),
    "timestamp missing": (
        _trajectory([_step(1, [_call("t1")], timestamp=None)]),
        [("Read", "/workspace/src/a.py", None, 12, None)],
        "1 step(s) with tool calls have no timestamp",
    ),
    "timestamp garbage": (
        _trajectory([_step(1, [_call("t1")], timestamp="soon")]),
        [("Read", "/workspace/src/a.py", None, 12, None)],
        "1 step timestamp(s) are not ISO 8601 (first at step #1)",
    ),
    "timestamps out of order": (
        _trajectory(
            [
                _step(1, [_call("t1")], timestamp="2026-02-28T03:19:00Z"),
                _step(2, [_call("t2")], timestamp="2026-02-28T03:16:00Z"),
            ]
        ),
        [
            ("Read", "/workspace/src/a.py", None, 12, "2026-02-28T03:19:00Z"),
            ("Read", "/workspace/src/a.py", None, 34, "2026-02-28T03:16:00Z"),
        ],
        "step timestamps go backwards 1 time(s) (first at step #2)",
    ),
    "metrics without counts": (
        _trajectory([_step(1, [_call("t1")], metrics={"prompt_tokens": "10"})]),
        [("Read", "/workspace/src/a.py", None, None, "2026-02-28T03:15:10.000Z")],
        "step #1: metrics carry no integer prompt_tokens or completion_tokens",
    ),
    "subagent file missing": (
        _trajectory([_step(1, [_call("t1", "Task", {})], _ref("sub.json"))]),
        [("Task", None, "x", 12, "2026-02-28T03:15:10.000Z")],
        "subagent trajectory 'sub.json' not found",
    ),
    "subagent ../../etc/passwd": (
        _trajectory([_step(1, [_call("t1", "Task", {})], _ref("../../../../../../etc/passwd"))]),
        [("Task", None, "x", 12, "2026-02-28T03:15:10.000Z")],
        "lies outside the trajectory folder, not followed",
    ),
    "subagent absolute path": (
        _trajectory([_step(1, [_call("t1", "Task", {})], _ref("/etc/passwd"))]),
        [("Task", None, "x", 12, "2026-02-28T03:15:10.000Z")],
        "lies outside the trajectory folder, not followed",
    ),
    "subagent path with NUL": (
        _trajectory([_step(1, [_call("t1", "Task", {})], _ref("a\x00b"))]),
        [("Task", None, "x", 12, "2026-02-28T03:15:10.000Z")],
        "is not a usable path",
    ),
    "latin-1 byte": (
        json.dumps(_trajectory(GOOD_STEPS)).encode()[:-1] + b', "x": "\xe9"}',
        [("Read", "/workspace/src/a.py", "x", 12, "2026-02-28T03:15:10.000Z")],
        "file holds bytes that are not UTF-8: replaced by U+FFFD",
    ),
    "escaped lone surrogate": (
        json.dumps(_trajectory(GOOD_STEPS)).encode()[:-1] + b', "x": "cut \\ud83d"}',
        [("Read", "/workspace/src/a.py", "x", 12, "2026-02-28T03:15:10.000Z")],
        "file holds 1 escaped lone surrogate(s): replaced by U+FFFD",
    ),
    "UTF-8 BOM": (
        b"\xef\xbb\xbf" + json.dumps(_trajectory(GOOD_STEPS)).encode(),
        [("Read", "/workspace/src/a.py", "x", 12, "2026-02-28T03:15:10.000Z")],
        None,
    ),
}


@pytest.mark.parametrize("name", list(TRAJECTORY_TRAPS))
def test_trajectory_traps(tmp_path: Path, name: str) -> None:
    content, expected, warning = TRAJECTORY_TRAPS[name]
    raw = content if isinstance(content, bytes) else json.dumps(content).encode()
    path = _write(tmp_path / "agent" / "trajectory.json", raw)
    if isinstance(expected, str):
        with pytest.raises(Exception, match=expected) as caught:
            parse_atif(path)
        assert type(caught.value).__module__.startswith("retrieval_lib")
        return
    trace = parse_atif(path)
    got = [
        (c.name, c.arguments.get("file_path"), c.result, c.cumulative_tokens, c.timestamp)
        for c in trace.tool_calls
    ]
    assert got == expected
    if warning is None:
        assert [w for w in trace.warnings if not w.startswith("no final_metrics")] == []
    else:
        assert any(warning in w for w in trace.warnings), trace.warnings


def test_trajectory_symlinked_out_of_its_folder_is_not_read(tmp_path: Path) -> None:
    secret = _write(tmp_path / "secret.json", json.dumps(_trajectory(GOOD_STEPS)))
    link = tmp_path / "trial" / "agent" / "trajectory.json"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret)
    with pytest.raises(Exception, match="is a symlink to a file outside") as caught:
        parse_atif(link)
    assert type(caught.value).__module__.startswith("retrieval_lib")
    # Inside the folder named by ``within`` (the trial), a symlink is fine.
    inner = _write(tmp_path / "trial" / "logs" / "t.json", json.dumps(_trajectory(GOOD_STEPS)))
    link.unlink()
    link.symlink_to(inner)
    assert len(parse_atif(link, within=tmp_path / "trial").tool_calls) == 1


def test_subagent_trajectory_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    """The subagent check is the package's one containment check (``io.lies_outside``)."""
    sub = json.dumps(_trajectory(GOOD_STEPS))
    _write(tmp_path / "agentx" / "sub.json", sub)  # a sibling whose name extends "agent"
    _write(tmp_path / "agent" / "inner" / "sub.json", sub)
    (tmp_path / "agent" / "linked.json").symlink_to(tmp_path / "agentx" / "sub.json")
    (tmp_path / "agent" / "alias").symlink_to(tmp_path / "agent" / "inner")
    outside = "lies outside the trajectory folder, not followed"
    for ref, warning in [
        ("../agentx/sub.json", outside),
        ("linked.json", outside),
        ("inner/../../agentx/sub.json", outside),
        ("alias/sub.json", None),
        ("inner/../inner/sub.json", None),
    ]:
        path = _write(
            tmp_path / "agent" / "trajectory.json",
            json.dumps(_trajectory([_step(1, [_call("t1", "Task", {})], _ref(ref))])),
        )
        trace = parse_atif(path)
        followed = not any(outside in w for w in trace.warnings)
        assert followed == (warning is None), (ref, trace.warnings)
        assert len(trace.tool_calls) == (2 if warning is None else 1), ref


# ------------------------------------------------------------------ transcripts


def _calls(lines: list[str]) -> str:
    return "\n".join([INIT, *lines, RESULT_LINE]) + "\n"


C_READ = _assistant("t7", "Read", {"file_path": "/w/c.py"}, "m9", 1)

TRANSCRIPT_TRAPS: dict[str, tuple[str | bytes, list[tuple[Any, ...]], str | None]] = {
    # name: (file content, [(tool, file_path arg, result, cumulative, parent)], warning)
    "UTF-8 BOM": (
        b"\xef\xbb\xbf" + TRANSCRIPT.encode(),
        [("Read", "/workspace/src/a.py", "1 x", 12, None), ("Bash", None, "y", 34, None)],
        None,
    ),
    "CRLF": (
        TRANSCRIPT.replace("\n", "\r\n"),
        [("Read", "/workspace/src/a.py", "1 x", 12, None), ("Bash", None, "y", 34, None)],
        None,
    ),
    "bare CR": (
        TRANSCRIPT.replace("\n", "\r"),
        [("Read", "/workspace/src/a.py", "1 x", 12, None), ("Bash", None, "y", 34, None)],
        None,
    ),
    "JSON lines that are not objects": (
        _calls(["[]", '"x"', "42", C_READ]),
        [("Read", "/w/c.py", None, 3, None)],
        "line 2: not JSON, skipped",
    ),
    "content a string or null": (
        _calls(
            [
                _line({"type": "assistant", "message": {"id": "m0", "content": "hi"}}),
                _line({"type": "user", "message": {"content": None}}),
                C_READ,
            ]
        ),
        [("Read", "/w/c.py", None, 3, None)],
        "1 API message(s) carry no usage",
    ),
    "tool_use without id": (
        _calls(
            [
                _line(
                    {
                        "type": "assistant",
                        "message": {
                            "id": "m9",
                            "content": [
                                {
                                    "type": "tool_use",
                                    "name": "Read",
                                    "input": {"file_path": "/w/c.py"},
                                }
                            ],
                        },
                    }
                )
            ]
        ),
        [("Read", "/w/c.py", None, None, None)],
        "1 tool_use block(s) without a string id",
    ),
    "tool_use without input": (
        _calls(
            [
                _line(
                    {
                        "type": "assistant",
                        "message": {
                            "id": "m9",
                            "content": [{"type": "tool_use", "id": "t7", "name": "Read"}],
                        },
                    }
                )
            ]
        ),
        [("Read", None, None, None, None)],
        "line 2: tool_use input is not a JSON object",
    ),
    "tool_use input as JSON text": (
        _calls([_assistant("t7", "Read", json.dumps({"file_path": "/w/c.py"}), "m9", 1)]),
        [("Read", "/w/c.py", None, 3, None)],
        None,
    ),
    "tool_result nested lists and images": (
        _calls(
            [
                C_READ,
                _user(
                    "t7",
                    [
                        [{"type": "text", "text": "a"}],
                        {"type": "image", "source": {"data": "AAAA"}},
                        {"type": "tool_result", "content": [{"type": "text", "text": "b"}]},
                    ],
                ),
            ]
        ),
        [("Read", "/w/c.py", "a\nb", 3, None)],
        None,
    ),
    "parent_tool_use_id unknown": (
        _calls(
            [
                _line(
                    {
                        "type": "assistant",
                        "parent_tool_use_id": "nope",
                        "message": {
                            "id": "m9",
                            "content": [
                                {
                                    "type": "tool_use",
                                    "id": "t7",
                                    "name": "Read",
                                    "input": {"file_path": "/w/c.py"},
                                }
                            ],
                        },
                    }
                )
            ]
        ),
        [("Read", "/w/c.py", None, None, "nope")],
        "parent_tool_use_id names 1 call id(s) not in the transcript (first: nope)",
    ),
    "usage with nulls": (
        _calls(
            [
                _line(
                    {
                        "type": "assistant",
                        "message": {
                            "id": "m9",
                            "content": [
                                {
                                    "type": "tool_use",
                                    "id": "t7",
                                    "name": "Read",
                                    "input": {"file_path": "/w/c.py"},
                                }
                            ],
                            "usage": {"input_tokens": None, "output_tokens": None},
                        },
                    }
                ),
                _assistant("t8", "Read", {"file_path": "/w/d.py"}, "m10", 5),
            ]
        ),
        [("Read", "/w/c.py", None, 0, None), ("Read", "/w/d.py", None, 7, None)],
        "1 API message(s) carry no usage",
    ),
    "interleaved garbage": (
        _calls(["garbage {", "{bad json", C_READ]),
        [("Read", "/w/c.py", None, 3, None)],
        "line 3: invalid JSON",
    ),
    "latin-1 byte in a result": (
        (INIT + "\n" + C_READ + "\n").encode()
        + _user("t7", "caf\u00e9").encode().replace(b"\\u00e9", b"\xe9")
        + b"\n",
        [("Read", "/w/c.py", "caf\ufffd", 3, None)],
        "line 3: bytes that are not UTF-8 replaced by U+FFFD",
    ),
    "escaped lone surrogate (string cut inside an emoji)": (
        _calls([C_READ, _user("t7", "x").replace('"x"', '"cut \\ud83d"')]),
        [("Read", "/w/c.py", "cut \ufffd", 3, None)],
        "line 3: 1 escaped lone surrogate(s) replaced by U+FFFD",
    ),
    "last line cut inside a UTF-8 character": (
        (INIT + "\n" + C_READ + "\n").encode() + _user("t7", "h\u00e9llo").encode()[:60] + b"\xc3",
        [("Read", "/w/c.py", None, 3, None)],
        "line 3 (last line) is cut off",
    ),
    "only banner lines": ("Welcome\n$ claude --print\n", [], "transcript has no JSON lines"),
    "NUL bytes": (b"\x00" * 100, [], "transcript has no JSON lines"),
    "token counts beyond 64 bits": (
        _calls(
            [
                _line(
                    {
                        "type": "assistant",
                        "message": {
                            "id": "m9",
                            "content": [
                                {
                                    "type": "tool_use",
                                    "id": "t7",
                                    "name": "Read",
                                    "input": {"file_path": "/w/c.py"},
                                }
                            ],
                            "usage": {"input_tokens": 18446744073709551615, "output_tokens": 1},
                        },
                    }
                )
            ]
        ),
        [("Read", "/w/c.py", None, 1, None)],
        None,
    ),
}


@pytest.mark.parametrize("name", list(TRANSCRIPT_TRAPS))
def test_transcript_traps(tmp_path: Path, name: str) -> None:
    content, expected, warning = TRANSCRIPT_TRAPS[name]
    path = _write(tmp_path / "agent" / "claude-code.txt", content)
    trace = parse_stream_json(path)
    got = [
        (c.name, c.arguments.get("file_path"), c.result, c.cumulative_tokens, c.parent_call_id)
        for c in trace.tool_calls
    ]
    assert got == expected
    if warning is None:
        assert trace.warnings == []
    else:
        assert any(warning in w for w in trace.warnings), trace.warnings


def test_result_line_with_null_model_usage_falls_back_and_says_so(tmp_path: Path) -> None:
    lines = [
        *TRANSCRIPT_LINES[:-1],
        _line({"type": "result", "modelUsage": None, "total_cost_usd": 0.5}),
    ]
    trace = parse_stream_json(_write(tmp_path / "claude-code.txt", "\n".join(lines)))
    assert (trace.totals.total_tokens, trace.totals.cost_usd) == (None, 0.5)
    assert "the result line carries no token counts (modelUsage, usage)" in trace.warnings


def test_ten_megabyte_line(tmp_path: Path) -> None:
    big = "x" * (10 * 1024 * 1024)
    trace = parse_stream_json(_write(tmp_path / "c.txt", _calls([C_READ, _user("t7", big)])))
    assert len(trace.tool_calls[0].result or "") == len(big)
    assert trace.warnings == []


def test_merge_leaves_out_transcript_calls_without_id(tmp_path: Path) -> None:
    from retrieval_lib.traces.merge import merge_traces

    trajectory = parse_atif(_write(tmp_path / "t.json", json.dumps(_trajectory(GOOD_STEPS))))
    id_less = _line(
        {
            "type": "assistant",
            "message": {
                "id": "m1",
                "content": [
                    {
                        "type": "tool_use",
                        "name": "Read",
                        "input": {"file_path": "/workspace/src/a.py"},
                    }
                ],
            },
        }
    )
    sub = _line(
        {
            "type": "assistant",
            "parent_tool_use_id": "t1",
            "message": {
                "id": "m2",
                "content": [{"type": "tool_use", "id": "t9", "name": "Grep", "input": {}}],
            },
        }
    )
    transcript = parse_stream_json(_write(tmp_path / "c.txt", _calls([id_less, sub])))
    merged = merge_traces(trajectory, transcript)
    # The id-less Read is the trajectory's t1 seen again: counted once, never twice.
    assert [(c.call_id, c.name) for c in merged.tool_calls] == [("t1", "Read"), ("t9", "Grep")]
    assert any("1 transcript call(s) without a call id left out" in w for w in merged.warnings)


# ------------------------------------------------------------------ Bash commands

BASH_TRAPS = {
    # command: [(category, program, paths, line_range)]
    "echo $(cat src/a.py)": [("file_read", "cat", ["src/a.py"], None)],
    "echo `cat src/a.py`": [("file_read", "cat", ["src/a.py"], None)],
    "wc -l $(find src -name '*.py')": [
        ("file_search", "find", ["src"], None),
        ("file_read", "wc", [], None),
    ],
    "echo '$(cat src/a.py)'": [],  # single quotes: literal text, nothing runs
    "echo $((1 + 2))": [],
    "cat <<'EOF' > notes.txt\nsrc/a.py\nEOF": [],
    "FOO=1 cat src/a.py": [("file_read", "cat", ["src/a.py"], None)],
    "sudo cat src/a.py": [("file_read", "cat", ["src/a.py"], None)],
    "env X=1 sudo -u me cat src/a.py": [("file_read", "cat", ["src/a.py"], None)],
    "cat src/*.py": [("file_read", "cat", [], None)],
    "cat ~/src/a.py": [("file_read", "cat", [], None)],
    "cat 'src/my file.py'": [("file_read", "cat", ["src/my file.py"], None)],
    "cat src/my\\ file.py": [("file_read", "cat", ["src/my file.py"], None)],
    "cd src && sed -n '5,9p' a.py": [("file_read", "sed", ["src/a.py"], (5, 9))],
    "cat /etc/passwd": [("file_read", "cat", ["/etc/passwd"], None)],
    "cat '": [],
    "cat $(": [],
    "echo " + "$(" * 500 + "cat a" + ")" * 500: [],
    "a;" * 5000: [],
}


@pytest.mark.parametrize("command", list(BASH_TRAPS), ids=lambda c: c[:40])
def test_bash_command_traps(command: str) -> None:
    reads = parse_shell_command(command)
    assert [(r.category, r.program, r.paths, r.line_range) for r in reads] == BASH_TRAPS[command]


def _event(name: str, arguments: dict[str, Any], result: str | None = None) -> dict[str, Any]:
    gt = SimpleNamespace(files=["src/a.py", "src/b.py"])
    call = ToolCall("t1", name, arguments, result=result)
    return build_events(ParsedTrace("transcript", [call]), gt)[0]


def test_paths_outside_the_workspace_are_not_targets() -> None:
    event = _event("Bash", {"command": "cat /etc/passwd /workspace/../etc/shadow ~/x.py"})
    assert (event["tool_category"], event["target_files"]) == ("file_read", [])


# ------------------------------------------------------------------ MCP results

KEYWORD = "mcp__sourcegraph__sg_keyword_search"
MCP_TRAPS: dict[str, tuple[str, list[str], list[dict[str, Any]]]] = {
    # name: (result text, target_files, file_ranges)
    "blocks an object": (json.dumps({"blocks": {"file": "src/a.py"}}), ["src/a.py"], []),
    "file a number": (json.dumps({"blocks": [{"file": 42, "chunks": []}]}), [], []),
    "string line numbers": (
        json.dumps(
            {
                "blocks": [
                    {
                        "file": "src/a.py",
                        "chunks": [
                            {"startLine": "3", "endLine": "9"},
                            {"startLine": "x", "endLine": "y"},
                            {"startLine": 9, "endLine": 2},
                            {"startLine": 1.5, "endLine": True},
                        ],
                    }
                ]
            }
        ),
        ["src/a.py"],
        [{"file": "src/a.py", "line_start": 3, "line_end": 9}],
    ),
    "line numbers beyond 64 bits": (
        json.dumps(
            {
                "blocks": [
                    {
                        "file": "src/a.py",
                        "chunks": [{"startLine": 5, "endLine": 18446744073709551615}],
                    }
                ]
            }
        ),
        ["src/a.py"],
        [{"file": "src/a.py", "line_start": 5, "line_end": 1_000_000_000}],
    ),
    "nested 100000 deep": ("[" * 100000 + "]" * 100000, [], []),
    "nested 70 deep": (
        json.dumps({"a": json.loads("[" * 70 + '{"file": "src/a.py"}' + "]" * 70)}),
        [],
        [],
    ),
    "error string": ("Error: rate limited", [], []),
    "JSON scalar": (json.dumps("src/a.py"), [], []),
    "paths escaping the repository": (
        json.dumps(
            {
                "blocks": [
                    {"path": "../../etc/passwd"},
                    {"file": "/etc/passwd"},
                    {"file": "src/b.py", "repo": 5},
                ]
            }
        ),
        ["src/b.py"],
        [],
    ),
}


@pytest.mark.parametrize("name", list(MCP_TRAPS))
def test_mcp_result_traps(name: str) -> None:
    text, targets, ranges = MCP_TRAPS[name]
    event = _event(KEYWORD, {"query": "x"}, result=text)
    assert event["tool_category"] == "code_search"
    assert event["target_files"] == targets
    assert event["file_ranges"] == ranges


def test_huge_mcp_result_keeps_every_file() -> None:
    blocks = [
        {"file": f"src/f{i}.py", "chunks": [{"startLine": 1, "endLine": 2}]} for i in range(20000)
    ]
    event = _event(KEYWORD, {"query": "x"}, result=json.dumps({"blocks": blocks}))
    assert len(event["target_files"]) == 20000


def test_non_sourcegraph_mcp_tools() -> None:
    read = _event("mcp__filesystem__read_file", {"path": "/workspace/src/a.py"})
    assert (read["tool_category"], read["target_files"], read["is_mcp"]) == (
        "file_read",
        ["src/a.py"],
        True,
    )
    other = _event("mcp__github__create_issue", {"title": "x"}, result='{"path": "src/b.py"}')
    assert (other["tool_category"], other["target_files"]) == ("other", [])


def test_read_with_huge_offset_and_limit_is_capped() -> None:
    event = _event("Read", {"file_path": "/workspace/src/a.py", "offset": 2**63, "limit": 2**63})
    assert event["file_ranges"] == []  # starts beyond any real file
    event = _event("Read", {"file_path": "/workspace/src/a.py", "offset": 1, "limit": 2**63})
    assert event["file_ranges"] == [
        {"file": "src/a.py", "line_start": 1, "line_end": 1_000_000_000}
    ]


# ------------------------------------------------------------------ layouts


def test_layout_traps(tmp_path: Path) -> None:
    trial = _make_run(tmp_path)
    batch = trial.parent
    run = tmp_path / "runs" / "run1"
    # A trial folder that is a symlink to a real trial elsewhere: a trial.
    elsewhere = tmp_path / "elsewhere" / "demo-task-001__zzzzzzz"
    elsewhere.mkdir(parents=True)
    _write(elsewhere / "result.json", json.dumps(_result(started_at="2026-02-28T04:00:00Z")))
    _write(elsewhere / "agent" / "claude-code.txt", TRANSCRIPT)
    (batch / "demo-task-001__zzzzzzz").symlink_to(elsewhere)
    # A symlink loop, a broken symlink, a plain file and a hidden folder: not trials.
    (batch / "loop__1234567").symlink_to(batch)
    (batch / "broken__1234567").symlink_to(tmp_path / "nowhere")
    _write(batch / "file__1234567", "x")
    (batch / ".hidden__1234567" / "agent").mkdir(parents=True)
    # A previous normalisation inside the run: never a trial.
    old = run / "retrieval_events" / "baseline-local-direct" / "x__1234567"
    (old / "agent").mkdir(parents=True)
    # An archived job folder whose result.json looks like a trial's.
    job = run / "mcp" / "job_mcp-remote-direct"
    _write(job / "result.json", json.dumps({"task_name": "demo-task-001", "n_total_trials": 1}))
    _write(job / "demo-task-001__qqqqqqq" / "result.json", json.dumps(RESULT))
    (job / "demo-task-001__qqqqqqq" / "agent").mkdir()

    found = [(t.config_name, t.trial_dir.relative_to(run).as_posix()) for t in discover_trials(run)]
    assert found == [
        ("baseline-local-direct", f"baseline-local-direct/{BATCH}/demo-task-001__abcdefg"),
        ("baseline-local-direct", f"baseline-local-direct/{BATCH}/demo-task-001__zzzzzzz"),
        ("mcp-remote-direct", "mcp/job_mcp-remote-direct/demo-task-001__qqqqqqq"),
    ]
    # Runs nested at unexpected depths are found; hidden folders are not searched.
    deep = tmp_path / "runs" / "a" / "b" / "c" / "d" / "run2"
    (deep / "cfg" / BATCH / TRIAL / "agent").mkdir(parents=True)
    hidden = tmp_path / "runs" / ".cache" / "run3"
    (hidden / "cfg" / BATCH / TRIAL / "agent").mkdir(parents=True)
    assert discover_runs([tmp_path / "runs"]) == [deep, run]

    out = tmp_path / "out"
    report = normalize_paths([run], tmp_path / "tasks", out=out)
    assert (report.trials, report.failed) == (3, 0)
    # The broken symlink is skipped alone, and named (issue 18: nothing left out unseen).
    assert report.left_out == [
        (str(batch / "broken__1234567"), "a symlink to nothing (No such file or directory)")
    ]
    left = json.loads((out / "run1" / "retrieval_events" / "normalize_left_out.json").read_text())
    assert left == {
        "left_out": [
            {
                "path": f"baseline-local-direct/{BATCH}/broken__1234567",
                "reason": "a symlink to nothing (No such file or directory)",
            }
        ]
    }
    docs = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.retrieval_events.json"))
    assert docs == [
        "run1/retrieval_events/baseline-local-direct/demo-task-001__abcdefg.retrieval_events.json",
        "run1/retrieval_events/baseline-local-direct/demo-task-001__zzzzzzz.retrieval_events.json",
        "run1/retrieval_events/mcp-remote-direct/demo-task-001.retrieval_events.json",
    ]
    # Normalising again in place leaves the earlier output alone and finds no new trials.
    assert normalize_paths([run], tmp_path / "tasks").trials == 3
    assert normalize_paths([run], tmp_path / "tasks").trials == 3


def test_files_symlinked_out_of_the_trial_are_never_read(tmp_path: Path) -> None:
    trial = _make_run(tmp_path, result=None, transcript=None)
    secret = tmp_path / "secret"
    _write(secret / "result.json", json.dumps(RESULT))
    _write(secret / "claude-code.txt", TRANSCRIPT)
    _write(secret / "reward.txt", "1.0")
    (trial / "result.json").symlink_to(secret / "result.json")
    (trial / "agent" / "claude-code.txt").symlink_to(secret / "claude-code.txt")
    (trial / "verifier").mkdir()
    (trial / "verifier" / "reward.txt").symlink_to(secret / "reward.txt")
    result = read_trial_result(trial)
    assert result.warnings == ["result.json is a symlink out of the trial folder; not read"]
    assert (result.reward, result.has_result_json) == (None, False)
    report = normalize_paths([tmp_path / "runs"], tmp_path / "tasks", out=tmp_path / "out")
    doc = load_document(find_documents([tmp_path / "out"])[0])
    assert report.failed == 0
    assert doc["events"] == []
    assert "is a symlink to a file outside" in doc["coverage"]["degraded_reason"]


def test_folder_name_that_is_not_utf8_is_named_and_its_siblings_go_on(tmp_path: Path) -> None:
    # Issue 18 (fuzz): the whole command used to stop at the first such name, losing every
    # other run; now that trial alone is left out, named with its bytes escaped.
    trial = _make_run(tmp_path)
    bad = os.fsdecode(os.fsencode(trial.parent) + b"/demo-task-001__ab\xffcdef")
    shutil.copytree(trial, bad)
    code, err = _cli(
        "normalize",
        str(tmp_path / "runs"),
        "--tasks-root",
        str(tmp_path / "tasks"),
        "--out",
        str(tmp_path / "out"),
        "--workers",
        "1",
    )
    assert code == 1  # something was left out
    shown = f"{trial.parent}/demo-task-001__ab\\xffcdef"
    reason = (
        "folder name 'demo-task-001__ab\\\\xffcdef' is not valid UTF-8; "
        "rename it to normalise this trial"
    )
    assert err == f"left out: {shown}: {reason}\n"
    events = tmp_path / "out" / "run1" / "retrieval_events"
    docs = sorted(p.name for p in events.rglob("*.retrieval_events.json"))
    assert docs == ["demo-task-001.retrieval_events.json"]
    left = json.loads((events / "normalize_left_out.json").read_text(encoding="utf-8"))
    assert left == {
        "left_out": [
            {
                "path": f"baseline-local-direct/{BATCH}/demo-task-001__ab\\xffcdef",
                "reason": reason,
            }
        ]
    }


def test_lies_outside_follows_symlinks_at_any_level(tmp_path: Path) -> None:
    trial = tmp_path / "trial"
    _write(trial / "agent" / "claude-code.txt", "x")
    _write(tmp_path / "elsewhere" / "claude-code.txt", "x")
    assert not lies_outside(trial / "agent" / "claude-code.txt", trial)
    assert not lies_outside(trial / "agent" / "missing.txt", trial)
    (trial / "linked").symlink_to(tmp_path / "elsewhere")  # a folder link out
    assert lies_outside(trial / "linked" / "claude-code.txt", trial)
    (trial / "inner").symlink_to(trial / "agent")  # a link that stays inside
    assert not lies_outside(trial / "inner" / "claude-code.txt", trial)
    assert lies_outside(trial / "agent" / ".." / ".." / "elsewhere" / "claude-code.txt", trial)
    assert lies_outside(tmp_path / "elsewhere" / "claude-code.txt", trial)


def test_unreadable_trace_folder_gives_a_document_that_says_so(tmp_path: Path) -> None:
    trial = _make_run(tmp_path, transcript=None)
    (trial / "agent" / "claude-code.txt").mkdir()  # a folder where a file belongs
    (trial / "agent" / "trajectory.json").mkdir()
    report = normalize_paths([tmp_path / "runs"], tmp_path / "tasks", out=tmp_path / "out")
    doc = load_document(find_documents([tmp_path / "out"])[0])
    assert report.failed == 0
    assert doc["coverage"]["degraded_reason"].startswith("no trace")


def test_permission_denied_result_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trial = _make_run(tmp_path)
    result = trial / "result.json"
    result.chmod(0)
    if os.geteuid() == 0:
        # root reads a chmod 000 file: refuse the read the way the kernel refuses another
        # user, so that CI (root in a container) runs this test too
        import retrieval_lib.runs

        real_read = retrieval_lib.runs.read_regular_bytes

        def read_bytes(path: Path, limit: int | None = None, **options: Any) -> bytes:
            if Path(path) == result:
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_read(path, limit, **options)

        monkeypatch.setattr(retrieval_lib.runs, "read_regular_bytes", read_bytes)
    try:
        warning = read_trial_result(trial).warnings[0]
        assert warning == "result.json unreadable (Permission denied)"
    finally:
        result.chmod(0o644)


def test_result_json_that_no_one_can_read(tmp_path: Path) -> None:
    # a folder where the file belongs: open() fails for every user, root included
    trial = _make_run(tmp_path)
    (trial / "result.json").unlink()
    (trial / "result.json").mkdir()
    result = read_trial_result(trial)
    assert result.warnings[0] == "result.json unreadable (Is a directory)"
    assert result.task_name == trial.name.split("__")[0] and result.reward is None


# ------------------------------------------------------------------ ground truth

PATCH = """diff --git a/old.py b/new.py
similarity index 90%
rename from old.py
rename to new.py
--- a/old.py
+++ b/new.py
@@ -1,2 +1,2 @@
-a
+b
\\ No newline at end of file
diff --git a/pure_old.py b/pure_new.py
similarity index 100%
rename from pure_old.py
rename to pure_new.py
diff --git a/img.png b/img.png
Binary files a/img.png and b/img.png differ
"""

GT_TRAPS: dict[str, tuple[dict[str, Any], list[str], str | None, str | None]] = {
    # name: ({relative file: content}, files, source, warning)
    "task.toml only": ({}, [], None, None),
    "files null": (
        {"tests/ground_truth.json": {"files": None}},
        [],
        None,
        "tests/ground_truth.json: files is null; no file list",
    ),
    "unsafe and duplicate paths": (
        {
            "tests/ground_truth.json": {
                "files": [
                    "../secret.py",
                    "src/../../x.py",
                    "/etc/passwd",
                    "/workspace/src/a.py",
                    "src\\c.py",
                    "SRC/A.py",
                    "src/a.py",
                    "",
                    None,
                ]
            }
        },
        ["src/a.py", "src/c.py"],
        "tests/ground_truth.json",
        "dropped 5 placeholder or non-repository entries",
    ),
    "UTF-8 BOM": (
        {"tests/ground_truth.json": b"\xef\xbb\xbf" + b'{"files": ["src/a.py"]}'},
        ["src/a.py"],
        "tests/ground_truth.json",
        None,
    ),
    "latin-1 byte": (
        {"tests/ground_truth.json": b'{"files": ["src/caf\xe9.py"]}'},
        ["src/caf\ufffd.py"],
        "tests/ground_truth.json",
        "tests/ground_truth.json is not valid UTF-8",
    ),
    "escaped lone surrogate": (
        {"tests/ground_truth.json": b'{"files": ["src/a\\udcff.py"]}'},
        ["src/a\ufffd.py"],
        "tests/ground_truth.json",
        "tests/ground_truth.json holds 1 escaped lone surrogate(s); replaced by U+FFFD",
    ),
    "nested 100000 deep": (
        {"tests/ground_truth.json": b'{"files": ' + b"[" * 100000 + b"]" * 100000 + b"}"},
        [],
        None,
        "tests/ground_truth.json is not usable JSON (nested too deeply)",
    ),
    "defects wrapper of the wrong type": (
        {"tests/expected_defects.json": {"defects": {"file": "a.py"}}},
        [],
        None,
        "tests/expected_defects.json: expected a list of defects",
    ),
    "patch with renames and a binary file": (
        {"tests/reference_fix.patch": PATCH},
        ["img.png", "new.py", "old.py", "pure_new.py", "pure_old.py"],
        "tests/reference_fix.patch",
        None,
    ),
    "huge instruction.md": (
        {"instruction.md": "Fix src/foo.py. " + "word " * 2_000_000},
        ["src/foo.py"],
        "instruction.md",
        None,
    ),
}


@pytest.mark.parametrize("name", list(GT_TRAPS))
def test_ground_truth_traps(tmp_path: Path, name: str) -> None:
    files, expected, source, warning = GT_TRAPS[name]
    task = tmp_path / "suite" / "task-001"
    _write(task / "task.toml", "")
    for relative, content in files.items():
        data = content if isinstance(content, (str, bytes)) else json.dumps(content)
        _write(task / relative, data)
    gt = load_ground_truth([task], tasks_root=tmp_path)
    assert (list(gt.files), gt.source) == (expected, source)
    if warning is None:
        assert gt.warnings == []
    else:
        assert any(warning in w for w in gt.warnings), gt.warnings


def test_ground_truth_symlinked_out_of_the_task_is_not_read(tmp_path: Path) -> None:
    task = tmp_path / "suite" / "task-001"
    _write(task / "task.toml", "")
    secret = _write(tmp_path / "secret.json", json.dumps({"files": ["src/a.py"]}))
    (task / "tests").mkdir()
    (task / "tests" / "ground_truth.json").symlink_to(secret)
    gt = load_ground_truth([task], tasks_root=tmp_path)
    assert list(gt.files) == []
    assert gt.warnings == ["tests/ground_truth.json is a symlink out of the task folder; not read"]


# ------------------------------------------------------------------ end to end


def test_normalize_evaluate_impact_survive_a_run_full_of_traps(tmp_path: Path) -> None:
    """Many trapped trials in one run: every command exits 0 and every document is valid."""
    root = tmp_path / "r"
    _make_run(root)
    batch = root / "runs" / "run1" / "baseline-local-direct" / BATCH
    traps: dict[str, dict[str, Any]] = {
        "reward-str": {"result": _result(verifier_result={"rewards": {"reward": "0.5"}})},
        "latin1": {"transcript": TRANSCRIPT.encode()[:-1] + b'\n{"x": "\xe9"}\n'},
        "trajectory-null": {"trajectory": b"null", "transcript": None},
        "big-ints": {
            "transcript": _calls(
                [
                    _line(
                        {
                            "type": "assistant",
                            "message": {
                                "id": "m9",
                                "content": [
                                    {
                                        "type": "tool_use",
                                        "id": "t7",
                                        "name": "Read",
                                        "input": {
                                            "file_path": "/w/a.py",
                                            "offset": 2**63,
                                            "limit": 2**64 - 1,
                                        },
                                    }
                                ],
                                "usage": {"input_tokens": 2**64 - 1},
                            },
                        }
                    )
                ]
            )
        },
        "passwd-ref": {
            "transcript": None,
            "trajectory": _trajectory(
                [_step(1, [_call("t1", "Task", {})], _ref("../../../../etc/passwd"))]
            ),
        },
        "long-name": {"result": _result(task_name="y" * 300)},
    }
    for index, (name, parts) in enumerate(traps.items()):
        trial = batch / f"demo-task-001__trap{index:03d}"
        (trial / "agent").mkdir(parents=True)
        result = parts.get("result", _result(trial_name=name))
        _write(trial / "result.json", json.dumps(result))
        for key, file in (("transcript", "claude-code.txt"), ("trajectory", "trajectory.json")):
            content = parts.get(key, TRANSCRIPT if key == "transcript" else None)
            if content is not None:
                data = content if isinstance(content, (str, bytes)) else json.dumps(content)
                _write(trial / "agent" / file, data)
    # The same trials under an MCP config, so impact has pairs to compare.
    mcp = root / "runs" / "run1" / "mcp-remote-direct"
    mcp.mkdir()
    shutil.copytree(batch, mcp / BATCH, symlinks=True)

    out = tmp_path / "out"
    code, err = _cli(
        "normalize",
        str(root / "runs"),
        "--tasks-root",
        str(root / "tasks"),
        "--out",
        str(out),
        "--workers",
        "1",
        "--quiet",
    )
    assert (code, err) == (0, "")
    docs = find_documents([out])
    assert len(docs) == 2 * (len(traps) + 1)
    for path in docs:
        load_document(path)
    assert all(p.resolve().is_relative_to(out.resolve()) for p in out.rglob("*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "r"]  # nothing else written
    code, err = _cli("evaluate", str(out / "run1"))
    assert (code, err) == (0, "")
    code, err = _cli("impact", str(out / "run1"))
    assert code == 0, err


# ------------------------------------------------------------------ normalisation
# (found by this sweep, fixed in retrieval_lib/normalize.py)


def test_same_trial_folder_name_in_two_batches_gives_two_documents(tmp_path: Path) -> None:
    trial = _make_run(tmp_path)
    twin = trial.parent.parent / "2026-03-01__00-00-00" / trial.name
    _write(twin / "result.json", json.dumps(_result(started_at="2026-03-01T00:00:00Z")))
    _write(twin / "agent" / "claude-code.txt", TRANSCRIPT)
    report = normalize_paths([tmp_path / "runs"], tmp_path / "tasks", out=tmp_path / "out")
    assert report.trials == 2
    assert len(find_documents([tmp_path / "out"])) == 2


def test_agent_folder_symlinked_out_of_the_trial_is_not_read(tmp_path: Path) -> None:
    trial = _make_run(tmp_path, transcript=None)
    outside = tmp_path / "outside"
    _write(outside / "claude-code.txt", TRANSCRIPT)
    (trial / "agent").rmdir()
    (trial / "agent").symlink_to(outside)
    normalize_paths([tmp_path / "runs"], tmp_path / "tasks", out=tmp_path / "out")
    doc = load_document(find_documents([tmp_path / "out"])[0])
    assert doc["events"] == []

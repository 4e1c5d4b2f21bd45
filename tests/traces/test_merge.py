"""Tests of the id-based merge of a trajectory and a transcript.

The fixture pair describes one trial: two parallel Reads written in the order A, B in the
transcript and B, A in the trajectory, a Task whose subagent calls only the transcript
records, and a Write whose result only the transcript has.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.traces.atif import parse_atif
from retrieval_lib.traces.merge import merge_traces
from retrieval_lib.traces.model import ParsedTrace, SessionTotals, ToolCall
from retrieval_lib.traces.stream_json import parse_stream_json

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def merged() -> ParsedTrace:
    return merge_traces(
        parse_atif(FIXTURES / "merge_trajectory.json"),
        parse_stream_json(FIXTURES / "merge_transcript.txt"),
    )


def test_order_follows_trajectory_with_transcript_only_calls_inserted(merged):
    assert merged.source == "merged"
    assert [(c.order, c.call_id, c.source) for c in merged.tool_calls] == [
        (0, "toolu_B", "merged"),
        (1, "toolu_A", "merged"),
        (2, "toolu_T", "merged"),
        (3, "toolu_S1", "transcript"),
        (4, "toolu_S2", "transcript"),
        (5, "toolu_W", "merged"),
    ]


def test_parallel_calls_keep_their_own_results(merged):
    by_id = {c.call_id: c for c in merged.tool_calls}
    # A position join would hand A's slot the transcript's first call's data and swap them.
    assert by_id["toolu_A"].result == "A-CONTENT"
    assert by_id["toolu_B"].result == "B-CONTENT"
    assert by_id["toolu_A"].arguments == {"file_path": "/workspace/a.py"}
    assert by_id["toolu_A"].structured_result["file"]["filePath"] == "/workspace/a.py"
    assert by_id["toolu_B"].structured_result["file"]["filePath"] == "/workspace/b.py"
    # Timestamps from the trajectory (steps 3 and 2), error flags from the transcript.
    assert by_id["toolu_A"].timestamp == "2026-02-28T03:15:13.000Z"
    assert by_id["toolu_B"].timestamp == "2026-02-28T03:15:12.000Z"
    assert by_id["toolu_A"].is_error is False and by_id["toolu_A"].is_sidechain is False


def test_subagent_attribution_and_missing_result_from_transcript(merged):
    by_id = {c.call_id: c for c in merged.tool_calls}
    assert by_id["toolu_S1"].parent_call_id == "toolu_T"
    assert by_id["toolu_S2"].parent_call_id == "toolu_T"
    assert by_id["toolu_S1"].timestamp is None
    assert by_id["toolu_T"].parent_call_id is None
    # The trajectory has no observation for the Write (step 5): the transcript fills it.
    assert by_id["toolu_W"].result == "File created successfully at: /workspace/out.json"
    assert by_id["toolu_W"].timestamp == "2026-02-28T03:15:30.000Z"


def test_cumulative_tokens_prefer_the_transcript(merged):
    # Transcript running totals: msg_1 1540, msg_2 +1720, subagent +55 and +66, msg_3 +1910
    # (the trajectory alone would give 5170 for the Write: it does not see the subagent).
    assert [c.cumulative_tokens for c in merged.tool_calls] == [
        1540, 1540, 3260, 3315, 3381, 5291,
    ]  # fmt: skip


def test_totals_and_metadata(merged):
    assert merged.totals.source == "transcript.result.modelUsage"
    assert merged.totals.total_tokens == 320 + 121 + 5200 + 650
    assert merged.started_at == "2026-02-28T03:15:10.000Z"
    assert (merged.model, merged.harness_version) == ("claude-haiku-4-5-20251001", "2.1.62")
    assert merged.lines_total == 15 and merged.truncated is False
    assert merged.warnings == [
        "joined 4 call(s) on id; 2 only in the transcript (inserted after the call "
        "preceding them), 0 only in the trajectory"
    ]


def test_totals_fall_back_to_trajectory_without_result_line():
    trajectory = ParsedTrace(
        "trajectory",
        [ToolCall("a", "Read", {}, timestamp="t0")],
        totals=SessionTotals(total_tokens=99, source="trajectory.final_metrics"),
    )
    transcript = ParsedTrace(
        "transcript",
        [ToolCall("a", "Read", {}, source="transcript")],
        totals=SessionTotals(total_tokens=7, source="transcript.messages(deduplicated)"),
        truncated=True,
    )
    merged = merge_traces(trajectory, transcript)
    assert merged.totals.source == "trajectory.final_metrics"
    assert merged.totals.total_tokens == 99
    assert merged.truncated is True


def test_transcript_only_call_before_any_joined_call_goes_first():
    trajectory = ParsedTrace(
        "trajectory",
        [
            ToolCall("b", "Grep", {"pattern": "x"}, timestamp="t1", cumulative_tokens=10),
            ToolCall("c", "Read", {}, timestamp="t2", order=1, cumulative_tokens=20),
        ],
    )
    transcript = ParsedTrace(
        "transcript",
        [
            ToolCall("a", "Glob", {"pattern": "*"}, source="transcript", cumulative_tokens=5),
            ToolCall("b", "Grep", {}, result="hit", order=1, source="transcript",
                     cumulative_tokens=12),
        ],
    )  # fmt: skip
    merged = merge_traces(trajectory, transcript)
    assert [(c.call_id, c.order) for c in merged.tool_calls] == [("a", 0), ("b", 1), ("c", 2)]
    b = merged.tool_calls[1]
    assert b.arguments == {"pattern": "x"}  # the trajectory's arguments win when present
    assert b.result == "hit"
    # "c" is not in the transcript: it keeps the trajectory's figure, with a warning.
    assert [c.cumulative_tokens for c in merged.tool_calls] == [5, 12, 20]
    assert merged.warnings == [
        "joined 1 call(s) on id; 1 only in the transcript (inserted after the call "
        "preceding them), 1 only in the trajectory",
        "1 call(s) have no running token total in the transcript and keep the trajectory's",
    ]


def test_trajectory_tokens_used_when_transcript_has_none():
    trajectory = ParsedTrace("trajectory", [ToolCall("a", "Read", {}, cumulative_tokens=42)])
    transcript = ParsedTrace("transcript", [ToolCall("a", "Read", {}, source="transcript")])
    merged = merge_traces(trajectory, transcript)
    assert merged.tool_calls[0].cumulative_tokens == 42
    assert merged.warnings == []


def test_single_trace_returned_unchanged():
    only = parse_stream_json(FIXTURES / "merge_transcript.txt")
    assert merge_traces(None, only) is only
    trajectory = parse_atif(FIXTURES / "merge_trajectory.json")
    assert merge_traces(trajectory, None) is trajectory


def test_no_trace_at_all_is_input_error():
    with pytest.raises(InputError, match="both the trajectory and the transcript are missing"):
        merge_traces(None, None)


def test_placeholder_flag_follows_the_chosen_totals() -> None:
    placeholder = SessionTotals(
        output_tokens=7,
        total_tokens=100,
        source="trajectory.steps(deduplicated)",
        output_tokens_placeholder=True,
        output_tokens_note="placeholders",
    )
    model_usage = SessionTotals(
        output_tokens=26,
        total_tokens=119,
        source="transcript.result.modelUsage",
        output_tokens_placeholder=False,
    )
    no_result = SessionTotals(
        output_tokens=3,
        total_tokens=50,
        source="transcript.messages(deduplicated)",
        output_tokens_placeholder=True,
    )
    trajectory = ParsedTrace("trajectory", [], totals=placeholder)
    # the transcript's result line wins, with its (trusted) figure
    merged = merge_traces(trajectory, ParsedTrace("transcript", [], totals=model_usage))
    assert (merged.totals.output_tokens, merged.totals.output_tokens_placeholder) == (26, False)
    # without a result line the trajectory's totals are kept, flag and note included
    merged = merge_traces(trajectory, ParsedTrace("transcript", [], totals=no_result))
    assert (merged.totals.output_tokens, merged.totals.output_tokens_placeholder) == (7, True)
    assert merged.totals.output_tokens_note == "placeholders"

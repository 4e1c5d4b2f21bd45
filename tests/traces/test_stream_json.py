"""Tests of the Claude Code stream-json parser on real transcripts and hand-made fixtures.

Expected values on real files were read off the raw JSON lines by hand (line numbers are
given) or come from the harness's own ``task_metrics.json`` beside the trace.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.traces.stream_json import parse_stream_json

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "csb"
DESIGN_RUN = CORPUS / "runs" / "official" / "ccb_design_haiku_20260228_025547"
DJANGO_TRANSCRIPT = (
    DESIGN_RUN / "baseline-local-direct" / "2026-02-28__03-13-55"
    / "django-modeladmin-impact-001__8pRTT8b" / "agent" / "claude-code.txt"
)  # fmt: skip
ENVOY_TRANSCRIPT = (
    DESIGN_RUN / "baseline-local-direct" / "2026-02-28__03-16-35"
    / "envoy-routeconfig-dep-chain-001__n3htrBo" / "agent" / "claude-code.txt"
)  # fmt: skip
LLAMACPP_TRANSCRIPT = (
    CORPUS / "runs" / "official" / "ccb_test_haiku_022326" / "baseline"
    / "ccb_test_llamacpp-context-window-search-001_baseline-local-direct"
    / "llamacpp-context-window-search-0__2q8iH3W" / "agent" / "claude-code.txt"
)  # fmt: skip

needs_corpus = pytest.mark.skipif(
    not DJANGO_TRANSCRIPT.is_file(), reason="real run corpus ../shared/corpus/csb is absent"
)


# --- real transcripts -------------------------------------------------------------------


@needs_corpus
def test_django_transcript_calls_in_order():
    trace = parse_stream_json(DJANGO_TRANSCRIPT)
    # tool_use blocks on lines 4, 5, 11, 13, 17, 19, 21, 25, 29, 33, 37 of the file.
    assert [call.name for call in trace.tool_calls] == [
        "Bash", "Grep", "Grep", "Bash", "Read", "Read", "Read", "Grep", "Bash", "Write", "Read",
    ]  # fmt: skip
    # Same counts as the harness's task_metrics.json (tool_calls_by_name).
    assert Counter(call.name for call in trace.tool_calls) == {
        "Bash": 3, "Grep": 3, "Read": 4, "Write": 1,
    }  # fmt: skip
    assert [call.order for call in trace.tool_calls] == list(range(11))
    assert {call.source for call in trace.tool_calls} == {"transcript"}
    assert trace.source == "transcript"
    assert trace.model == "claude-haiku-4-5-20251001"
    assert trace.harness_version == "2.1.62"
    assert trace.started_at is None
    assert (trace.lines_total, trace.lines_skipped, trace.truncated) == (41, 0, False)
    assert trace.warnings == []


@needs_corpus
def test_django_transcript_results_joined_by_id():
    trace = parse_stream_json(DJANGO_TRANSCRIPT)
    grep = trace.tool_calls[1]
    assert grep.call_id == "toolu_017RQnfCXzjpvvCtyBEZnp5N"
    assert grep.arguments == {
        "pattern": "get_list_filter", "type": "py", "output_mode": "files_with_matches",
    }  # fmt: skip
    assert grep.result == (
        "Found 3 files\ntests/modeladmin/tests.py\ntests/admin_changelist/admin.py\n"
        "django/contrib/admin/options.py"
    )
    assert grep.structured_result == {
        "mode": "files_with_matches",
        "filenames": [
            "tests/modeladmin/tests.py",
            "tests/admin_changelist/admin.py",
            "django/contrib/admin/options.py",
        ],
        "numFiles": 3,
    }
    assert grep.is_error is False  # no is_error flag on a Grep result: not an error
    bash = trace.tool_calls[3]  # line 14 carries "is_error": false
    assert (
        bash.result
        == "/workspace/docs/ref/contrib/admin/index.txt\n/workspace/docs/releases/1.5.txt"
    )
    assert bash.is_error is False
    first_read = trace.tool_calls[4]
    assert first_read.arguments == {
        "file_path": "/workspace/django/contrib/admin/options.py", "limit": 50,
    }  # fmt: skip
    assert first_read.result.startswith("     1\u2192import copy\n     2\u2192import enum\n")
    assert first_read.structured_result["file"]["filePath"] == (
        "/workspace/django/contrib/admin/options.py"
    )
    assert all(call.parent_call_id is None for call in trace.tool_calls)
    assert all(call.timestamp is None for call in trace.tool_calls)


@needs_corpus
def test_django_transcript_cumulative_tokens_by_hand():
    trace = parse_stream_json(DJANGO_TRANSCRIPT)
    # usage (input + cache creation + cache read + output) of each distinct message,
    # copied from the assistant lines 2, 9, 15, 23, 27, 31, 35:
    msg_1 = 9 + 5170 + 16055 + 7
    msg_2 = 13 + 786 + 21225 + 1
    msg_3 = 13 + 441 + 22011 + 6
    msg_4 = 13 + 2415 + 22452 + 1
    msg_5 = 12 + 1731 + 24867 + 1
    msg_6 = 12 + 594 + 26598 + 3
    msg_7 = 12 + 449 + 27192 + 4
    calls = trace.tool_calls
    assert calls[0].cumulative_tokens == calls[1].cumulative_tokens == msg_1
    assert calls[4].cumulative_tokens == msg_1 + msg_2 + msg_3  # first Read
    assert calls[10].cumulative_tokens == (msg_1 + msg_2 + msg_3 + msg_4 + msg_5 + msg_6 + msg_7)


@needs_corpus
def test_django_transcript_totals_from_model_usage():
    totals = parse_stream_json(DJANGO_TRANSCRIPT).totals
    # result line 41: modelUsage of the one model.
    assert totals.source == "transcript.result.modelUsage"
    assert totals.input_tokens == 1513
    assert totals.output_tokens == 2771
    assert totals.cache_read_tokens == 188041  # = task_metrics.json cache_read_tokens
    assert totals.cache_creation_tokens == 11893  # = task_metrics.json cache_creation_tokens
    assert totals.total_tokens == 1513 + 2771 + 188041 + 11893
    assert totals.cost_usd == pytest.approx(0.049038349999999994)  # = task_metrics cost_usd
    assert totals.duration_seconds == pytest.approx(57.687)
    assert totals.num_turns == 12


@needs_corpus
def test_envoy_and_llamacpp_transcripts_match_task_metrics():
    envoy = parse_stream_json(ENVOY_TRANSCRIPT)
    assert Counter(call.name for call in envoy.tool_calls) == {
        "Read": 5, "Glob": 2, "Bash": 2, "Grep": 2, "Write": 1,
    }  # fmt: skip
    assert envoy.totals.cost_usd == pytest.approx(0.0583406)
    assert envoy.totals.cache_read_tokens == 212096
    assert envoy.totals.cache_creation_tokens == 17352

    llamacpp = parse_stream_json(LLAMACPP_TRANSCRIPT)
    assert Counter(call.name for call in llamacpp.tool_calls) == {"Bash": 18, "WebFetch": 2}
    assert llamacpp.harness_version == "2.1.50"
    # Lines 6 and 35 are the two tool_results flagged "is_error": true.
    errors = [call for call in llamacpp.tool_calls if call.is_error]
    assert [call.call_id for call in errors] == [
        "toolu_013j8jKsKaPX1qJ2nYSL5GYv",
        "toolu_01G9EjZXyfxoK4fLQqECVzSq",
    ]
    assert errors[0].result.startswith("write EPROTO")
    assert errors[1].result == "connect ECONNREFUSED 127.0.0.1:3000"


@needs_corpus
def test_real_transcript_cut_mid_line(tmp_path):
    lines = DJANGO_TRANSCRIPT.read_bytes().split(b"\n")
    # Keep lines 1..19 and half of line 20 (the result of the second Read), no newline.
    cut = tmp_path / "claude-code.txt"
    cut.write_bytes(b"\n".join(lines[:19]) + b"\n" + lines[19][: len(lines[19]) // 2])
    trace = parse_stream_json(cut)
    assert trace.truncated is True
    assert (trace.lines_total, trace.lines_skipped) == (20, 1)
    assert any(w.startswith("line 20 (last line) is cut off") for w in trace.warnings)
    assert [call.name for call in trace.tool_calls] == [
        "Bash",
        "Grep",
        "Grep",
        "Bash",
        "Read",
        "Read",
    ]
    assert trace.tool_calls[4].result.startswith("     1\u2192import copy")
    assert trace.tool_calls[5].result is None
    assert trace.tool_calls[5].is_error is None
    # No result line: totals from the three distinct messages so far, cost unknown.
    assert trace.totals.source == "transcript.messages(deduplicated)"
    assert trace.totals.cost_usd is None
    assert trace.totals.input_tokens == 9 + 13 + 13
    assert trace.totals.cache_read_tokens == 16055 + 21225 + 22011
    assert trace.totals.total_tokens == (9 + 5170 + 16055 + 7) + (13 + 786 + 21225 + 1) + (
        13 + 441 + 22011 + 6
    )


@needs_corpus
def test_banner_before_real_stream_changes_nothing_but_counts(tmp_path):
    stdout = tmp_path / "stdout.txt"
    stdout.write_bytes(b"+ set -e\nStarting agent...\n" + DJANGO_TRANSCRIPT.read_bytes())
    with_banner = parse_stream_json(stdout)
    plain = parse_stream_json(DJANGO_TRANSCRIPT)
    assert with_banner.tool_calls == plain.tool_calls
    assert (with_banner.lines_total, with_banner.lines_skipped) == (43, 2)
    assert with_banner.warnings == [
        "skipped 2 non-JSON line(s) before the first JSON line (banner)"
    ]


# --- hand-made fixtures -----------------------------------------------------------------


def test_truncated_last_line_keeps_earlier_lines():
    trace = parse_stream_json(FIXTURES / "stream_truncated.txt")
    assert trace.truncated is True
    assert (trace.lines_total, trace.lines_skipped) == (5, 1)
    assert trace.warnings[0].startswith("line 5 (last line) is cut off")
    assert [(c.call_id, c.result) for c in trace.tool_calls] == [
        ("toolu_1", "     1\u2192import os"),
        ("toolu_2", None),
    ]
    assert trace.tool_calls[0].structured_result == {
        "type": "text", "file": {"filePath": "/workspace/a.py", "startLine": 1, "numLines": 1},
    }  # fmt: skip
    # msg_A: 10 + 100 + 1000 + 5; msg_B: 12 + 50 + 1100 + 7
    assert [c.cumulative_tokens for c in trace.tool_calls] == [1115, 1115 + 1169]
    assert trace.totals.source == "transcript.messages(deduplicated)"
    assert (trace.totals.input_tokens, trace.totals.output_tokens) == (22, 12)
    assert (trace.totals.cache_creation_tokens, trace.totals.cache_read_tokens) == (150, 2100)
    assert trace.totals.total_tokens == 2284
    assert trace.totals.cost_usd is None and trace.totals.num_turns is None


def test_cut_line_followed_only_by_blank_lines_is_still_the_last_line(tmp_path):
    # Lines 1 and 3 (after the blank line 2) hold content; line 3 is cut and only
    # whitespace lines (" \t", "\r", "") follow it: it is the last line, not a middle one.
    tool_use = (
        '{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use",'
        '"id":"t1","name":"Read","input":{}}],"usage":{"input_tokens":3}}}'
    )
    transcript = tmp_path / "claude-code.txt"
    transcript.write_bytes(tool_use.encode() + b'\n\n{"type":"user","mess\n \t\n\r\n\n')
    trace = parse_stream_json(transcript)
    assert trace.truncated is True
    assert (trace.lines_total, trace.lines_skipped) == (2, 1)
    assert trace.warnings[0].startswith("line 3 (last line) is cut off")
    assert [(c.call_id, c.cumulative_tokens) for c in trace.tool_calls] == [("t1", 3)]


def test_garbage_middle_line_is_skipped_with_its_line_number():
    trace = parse_stream_json(FIXTURES / "stream_garbage_middle.txt")
    assert trace.truncated is False
    assert (trace.lines_total, trace.lines_skipped) == (7, 1)
    assert len(trace.warnings) == 1 and trace.warnings[0].startswith("line 3: invalid JSON")
    glob, bash = trace.tool_calls
    assert glob.result == "/workspace/a.py\n/workspace/b.py"
    assert glob.structured_result["filenames"] == ["/workspace/a.py", "/workspace/b.py"]
    assert (bash.result, bash.is_error) == ("/bin/bash: frobnicate: command not found", True)


def test_totals_sum_model_usage_over_models():
    totals = parse_stream_json(FIXTURES / "stream_garbage_middle.txt").totals
    # haiku {100, 50, 2000, 300} + sonnet {20, 10, 0, 0}
    assert totals.source == "transcript.result.modelUsage"
    assert (totals.input_tokens, totals.output_tokens) == (120, 60)
    assert (totals.cache_read_tokens, totals.cache_creation_tokens) == (2000, 300)
    assert totals.total_tokens == 2480
    assert totals.cost_usd == pytest.approx(0.012)
    assert (totals.duration_seconds, totals.num_turns) == (1.5, 3)


def test_command1_stdout_banner_lines_are_skipped_and_noted():
    trace = parse_stream_json(FIXTURES / "command1_stdout.txt")
    assert (trace.lines_total, trace.lines_skipped) == (7, 3)
    assert trace.warnings == ["skipped 3 non-JSON line(s) before the first JSON line (banner)"]
    assert trace.truncated is False
    assert [call.name for call in trace.tool_calls] == ["Grep"]
    assert trace.tool_calls[0].result.splitlines()[1] == "django/contrib/admin/options.py"
    assert trace.harness_version == "2.1.62"
    assert trace.totals.cost_usd == pytest.approx(0.003)


def test_tool_result_content_as_list_of_blocks():
    call = parse_stream_json(FIXTURES / "stream_list_content.txt").tool_calls[0]
    assert call.name == "mcp__sourcegraph__sg_keyword_search"
    # The two text blocks joined by a newline; the image block carries no text.
    assert call.result == (
        '{"blocks":[{"file":"django/contrib/admin/options.py",'
        '"repo":"github.com/sg-evals/django--674eda1c"}]}\n(1 result)'
    )


def test_repeated_message_usage_is_counted_once():
    trace = parse_stream_json(FIXTURES / "stream_repeated_usage.txt")
    # msg_A on 3 lines (5 + 200 + 3000 + 1); msg_B on 2 lines whose output goes 2 -> 40,
    # max kept (6 + 30 + 3200 + 40); msg_C once (7 + 10 + 3230 + 90).
    msg_a, msg_b, msg_c = 3206, 3276, 3337
    assert [(c.call_id, c.cumulative_tokens) for c in trace.tool_calls] == [
        ("toolu_1", msg_a),
        ("toolu_2", msg_a + msg_b),
        ("toolu_3", msg_a + msg_b),
    ]
    # Parallel calls answered in reverse order still get their own results.
    assert [(c.call_id, c.result) for c in trace.tool_calls[1:]] == [
        ("toolu_2", "A"),
        ("toolu_3", "B"),
    ]
    totals = trace.totals
    assert totals.total_tokens == msg_a + msg_b + msg_c
    assert (totals.input_tokens, totals.output_tokens) == (5 + 6 + 7, 1 + 40 + 90)
    assert totals.cache_read_tokens == 3000 + 3200 + 3230
    assert totals.cache_creation_tokens == 200 + 30 + 10


def test_subagent_calls_carry_parent_tool_use_id():
    trace = parse_stream_json(FIXTURES / "merge_transcript.txt")
    assert [(c.call_id, c.parent_call_id) for c in trace.tool_calls] == [
        ("toolu_A", None),
        ("toolu_B", None),
        ("toolu_T", None),
        ("toolu_S1", "toolu_T"),
        ("toolu_S2", "toolu_T"),
        ("toolu_W", None),
    ]
    task = trace.tool_calls[2]
    assert task.result == "c.py calls f"  # list content of one text block
    # Subagent messages count in the running total: msg_2 total 3260, then +55, +66.
    assert [c.cumulative_tokens for c in trace.tool_calls[2:5]] == [3260, 3315, 3381]


def test_empty_file_gives_empty_trace_with_warning(tmp_path):
    empty = tmp_path / "claude-code.txt"
    empty.write_bytes(b"")
    trace = parse_stream_json(empty)
    assert trace.tool_calls == []
    assert (trace.lines_total, trace.lines_skipped, trace.truncated) == (0, 0, False)
    assert trace.warnings == ["transcript is empty: no lines"]
    assert trace.totals.source is None and trace.totals.total_tokens is None


def test_only_banner_lines(tmp_path):
    banner = tmp_path / "stdout.txt"
    banner.write_text("bash: no job control in this shell\n+ claude -p task\n")
    trace = parse_stream_json(banner)
    assert trace.tool_calls == []
    assert (trace.lines_total, trace.lines_skipped) == (2, 2)
    assert "transcript has no JSON lines" in trace.warnings


def test_non_json_line_after_stream_started_is_named(tmp_path):
    lines = (FIXTURES / "stream_list_content.txt").read_text().splitlines()
    lines.insert(2, "Killed")
    path = tmp_path / "claude-code.txt"
    path.write_text("\n".join(lines) + "\n")
    trace = parse_stream_json(path)
    assert trace.warnings == ["line 3: not JSON, skipped"]
    assert trace.truncated is False
    assert trace.tool_calls[0].result.endswith("(1 result)")


def test_byte_order_mark_does_not_hide_the_first_line(tmp_path):
    path = tmp_path / "claude-code.txt"
    path.write_bytes(b"\xef\xbb\xbf" + (FIXTURES / "stream_list_content.txt").read_bytes())
    trace = parse_stream_json(path)
    assert trace.harness_version == "2.1.62"  # from the init line, line 1
    assert trace.lines_skipped == 0 and trace.warnings == []


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="transcript not found"):
        parse_stream_json(tmp_path / "nope.txt")
    with pytest.raises(InputError, match="is a directory"):
        parse_stream_json(tmp_path)


@needs_corpus
def test_model_usage_output_tokens_are_not_placeholders():
    totals = parse_stream_json(DJANGO_TRANSCRIPT).totals
    # modelUsage outputTokens 2771; the 8 distinct messages' per-line usage.output_tokens
    # are stream placeholders: 7 + 1 + 6 + 1 + 1 + 3 + 4 + 6 = 29.
    assert (totals.source, totals.output_tokens) == ("transcript.result.modelUsage", 2771)
    assert totals.output_tokens_placeholder is False
    assert totals.output_tokens_note == (
        "per-message usage.output_tokens (stream placeholders) sum to 29; "
        "output_tokens is the result line's modelUsage total"
    )


def test_without_result_line_output_tokens_are_placeholders():
    totals = parse_stream_json(FIXTURES / "stream_repeated_usage.txt").totals
    # no result line: 1 + 40 + 90 summed from per-message usage
    assert totals.source == "transcript.messages(deduplicated)"
    assert totals.output_tokens == 131
    assert totals.output_tokens_placeholder is True
    assert totals.output_tokens_note.startswith("no result line: output_tokens 131 is the sum")

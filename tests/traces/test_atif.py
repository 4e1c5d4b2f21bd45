"""Tests of the Harbor ATIF trajectory parser on real trajectories and hand-made fixtures.

Expected values on real files were read off the raw steps by hand (step ids are given)
or come from the harness's own ``task_metrics.json`` beside the trace, which was
computed from the transcript and so checks the message deduplication independently.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from retrieval_lib.errors import InputError, UnsupportedSchemaVersion
from retrieval_lib.traces.atif import UnsupportedATIFVersion, parse_atif

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "csb"
DESIGN_RUN = CORPUS / "runs" / "official" / "ccb_design_haiku_20260228_025547"
DJANGO_TRAJECTORY = (
    DESIGN_RUN / "mcp-remote-direct" / "2026-02-28__03-14-34"
    / "mcp_django-modeladmin-impact-001__ECYjuLv" / "agent" / "trajectory.json"
)  # fmt: skip
ENVOY_TRAJECTORY = (
    DESIGN_RUN / "mcp-remote-direct" / "2026-02-28__03-17-27"
    / "mcp_envoy-routeconfig-dep-chain-__PuAfTWR" / "agent" / "trajectory.json"
)  # fmt: skip
LLAMACPP_TRAJECTORY = (
    CORPUS / "runs" / "official" / "ccb_test_haiku_022326" / "mcp"
    / "ccb_test_llamacpp-context-window-search-001_mcp-remote-direct"
    / "sgonly_llamacpp-context-window-s__fpDEuhC" / "agent" / "trajectory.json"
)  # fmt: skip

needs_corpus = pytest.mark.skipif(
    not DJANGO_TRAJECTORY.is_file(), reason="real run corpus ../shared/corpus/csb is absent"
)

KEYWORD = "mcp__sourcegraph__sg_keyword_search"


# --- real trajectories ------------------------------------------------------------------


@needs_corpus
def test_django_trajectory_calls():
    trace = parse_atif(DJANGO_TRAJECTORY)
    assert trace.source == "trajectory"
    assert len(trace.tool_calls) == 28
    # Counts equal task_metrics.json tool_calls_by_name.
    assert Counter(call.name for call in trace.tool_calls) == {
        KEYWORD: 10,
        "mcp__sourcegraph__sg_read_file": 7,
        "mcp__sourcegraph__sg_find_references": 1,
        "mcp__sourcegraph__sg_nls_search": 1,
        "mcp__sourcegraph__sg_list_files": 7,
        "Write": 1,
        "Read": 1,
    }
    # Steps 4, 5, 8, 11, 14 carry the first five calls.
    assert [call.name for call in trace.tool_calls[:5]] == [
        KEYWORD, KEYWORD, "mcp__sourcegraph__sg_read_file",
        "mcp__sourcegraph__sg_find_references", KEYWORD,
    ]  # fmt: skip
    assert [call.name for call in trace.tool_calls[-2:]] == ["Write", "Read"]
    assert [call.order for call in trace.tool_calls] == list(range(28))
    assert trace.model == "claude-haiku-4-5-20251001"
    assert trace.harness_version == "2.1.62"
    assert trace.started_at == "2026-02-28T03:15:10.067Z"  # step 1


@needs_corpus
def test_django_trajectory_first_call_result_from_observation_results():
    first = parse_atif(DJANGO_TRAJECTORY).tool_calls[0]
    assert first.call_id == "toolu_019TMpCnBp3vuiC7dxB3yTDY"
    assert first.arguments == {
        "query": "repo:^github.com/sg-evals/django--674eda1c$ def get_list_filter"
    }
    assert first.timestamp == "2026-02-28T03:15:14.150Z"  # step 4
    assert first.is_sidechain is False
    assert first.is_error is None  # ATIF has no error flag and step 4 has no metadata
    assert first.result.startswith(
        '{"blocks":[{"chunks":[{"content":"180: \\n181:     def get_list_filter('
    )
    # the result is JSON text naming the files under "file"
    assert json.loads(first.result)["blocks"][0]["file"]


@needs_corpus
def test_django_trajectory_write_metadata():
    write = parse_atif(DJANGO_TRAJECTORY).tool_calls[26]
    assert write.name == "Write"
    assert write.call_id == "toolu_01QJ9tuJ4NLLPvWDztAJZwNo"
    assert write.result.startswith("File created successfully at: /workspace/submission.json")
    # step 72 extra.tool_result_metadata: raw result present without an error flag
    assert write.is_error is False
    assert write.structured_result["type"] == "create"
    assert write.structured_result["filePath"] == "/workspace/submission.json"


@needs_corpus
def test_django_trajectory_cumulative_tokens_by_hand():
    calls = parse_atif(DJANGO_TRAJECTORY).tool_calls
    # Message 1 spans steps 2-5 (prompt 26879, cache creation 6729; completion 7 on the
    # placeholder steps, 483 on step 5). Message 2 spans steps 6-8 (33612, 2854, 433).
    msg_1 = 26879 + 6729 + 483
    msg_2 = 33612 + 2854 + 433
    assert calls[0].cumulative_tokens == calls[1].cumulative_tokens == msg_1
    assert calls[2].cumulative_tokens == msg_1 + msg_2
    tokens = [call.cumulative_tokens for call in calls]
    assert tokens == sorted(tokens)


@needs_corpus
def test_django_trajectory_totals_deduplicated():
    trace = parse_atif(DJANGO_TRAJECTORY)
    totals = trace.totals
    # final_metrics.total_prompt_tokens 3401053 is the plain per-step sum; the distinct
    # messages give the figures of task_metrics.json (computed from the transcript):
    # input 200, cache creation 27629, cache read 1085607.
    assert totals.source == "trajectory.steps(deduplicated)"
    assert totals.input_tokens == 200
    assert totals.cache_creation_tokens == 27629
    assert totals.cache_read_tokens == 1085607
    assert totals.total_tokens == 200 + 1085607 + 27629 + totals.output_tokens
    assert totals.cost_usd is None
    assert trace.warnings == []  # a corrected harness quirk, not a gap in the data


@needs_corpus
def test_envoy_and_llamacpp_trajectories():
    envoy = parse_atif(ENVOY_TRAJECTORY)
    assert Counter(call.name for call in envoy.tool_calls) == {
        KEYWORD: 5,
        "mcp__sourcegraph__sg_list_files": 1,
        "mcp__sourcegraph__sg_read_file": 5,
        "Write": 1,
    }
    # task_metrics.json: input 88, cache creation 39379, cache read 409407
    assert (envoy.totals.input_tokens, envoy.totals.cache_creation_tokens) == (88, 39379)
    assert envoy.totals.cache_read_tokens == 409407

    llamacpp = parse_atif(LLAMACPP_TRAJECTORY)
    assert [call.name for call in llamacpp.tool_calls] == [
        KEYWORD,
        "mcp__sourcegraph__sg_commit_search",
        "mcp__sourcegraph__sg_commit_search",
        KEYWORD,
    ]
    assert llamacpp.harness_version == "2.1.50"
    assert llamacpp.tool_calls[0].result == '{"blocks":[]}'


# --- hand-made fixtures -----------------------------------------------------------------


def test_result_in_later_step_and_content_parts():
    trace = parse_atif(FIXTURES / "atif_late_result.json")
    grep, read = trace.tool_calls
    assert (grep.call_id, grep.name, read.call_id, read.name) == ("c1", "Grep", "c2", "Read")
    assert grep.arguments == {"pattern": "foo"}  # stored as JSON text in the file
    assert grep.result == "Found 1 file\nx.py"  # from step 3, not the decoy content
    assert read.result == "line one\nline two"  # text parts joined, image part dropped
    assert grep.timestamp == read.timestamp == "2026-01-01T00:00:01.000Z"
    assert grep.is_sidechain is True and grep.is_error is None
    # one message on step 2: prompt 1000 + cache creation 80 + completion 50
    assert grep.cumulative_tokens == read.cumulative_tokens == 1130
    assert trace.started_at == "2026-01-01T00:00:00.000Z"
    assert (trace.model, trace.harness_version) == ("claude-sonnet-4-5", "2.2.0")
    assert trace.warnings == []


def test_trusted_final_metrics_with_cost():
    totals = parse_atif(FIXTURES / "atif_late_result.json").totals
    # No repeated messages: final_metrics is trusted as written.
    assert totals.source == "trajectory.final_metrics"
    assert totals.input_tokens == 2200 - 2000
    assert (totals.output_tokens, totals.cache_read_tokens) == (80, 2000)
    assert totals.cache_creation_tokens == 100
    assert totals.total_tokens == 2200 + 100 + 80
    assert totals.cost_usd == pytest.approx(0.03)


def test_repeated_metrics_are_one_message():
    trace = parse_atif(FIXTURES / "merge_trajectory.json")
    # Steps 2 and 3 repeat message 1 (prompt 1010, creation 500), completion 1 then 30.
    assert [c.cumulative_tokens for c in trace.tool_calls] == [
        1540, 1540, 1540 + 1720, 1540 + 1720 + 1910,
    ]  # fmt: skip
    totals = trace.totals
    assert totals.source == "trajectory.steps(deduplicated)"
    assert totals.input_tokens == (1010 + 1600 + 1800) - (1000 + 1500 + 1700)
    assert totals.output_tokens == 30 + 20 + 60
    assert totals.cache_creation_tokens == 500 + 100 + 50
    assert totals.total_tokens == 5170
    assert trace.tool_calls[3].result is None  # step 5 has no observation


def test_message_interrupted_by_sidechain_step_is_counted_once(tmp_path):
    def step(number, prompt, completion, call_id, sidechain):
        return {
            "step_id": number,
            "source": "agent",
            "timestamp": f"2026-01-01T00:00:0{number}.000Z",
            "extra": {"is_sidechain": sidechain},
            "metrics": {"prompt_tokens": prompt, "completion_tokens": completion},
            "tool_calls": [{"tool_call_id": call_id, "function_name": "Read", "arguments": {}}],
        }

    document = {
        "schema_version": "ATIF-v1.2",
        "steps": [
            step(1, 100, 1, "main_1", False),  # message 1, placeholder completion
            step(2, 50, 5, "side_1", True),  # a subagent's message in between
            step(3, 100, 20, "main_2", False),  # message 1 again, final completion
        ],
    }
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(document))
    trace = parse_atif(path)
    assert [c.is_sidechain for c in trace.tool_calls] == [False, True, False]
    # message 1 = 100 + 20 (first), the sidechain message = 50 + 5 (second)
    assert [c.cumulative_tokens for c in trace.tool_calls] == [120, 175, 120]
    assert trace.totals.total_tokens == 175
    assert trace.totals.output_tokens == 25


def test_subagent_refs_resolved_embedded_and_file():
    trace = parse_atif(FIXTURES / "atif_subagent.json")
    assert [(c.call_id, c.parent_call_id) for c in trace.tool_calls] == [
        ("call_T1", None),
        ("sub1_G", "call_T1"),  # embedded subagent_trajectories[trajectory_id="sub-1"]
        ("sub1_R", "call_T1"),
        ("call_T2", None),
        ("sub2_L", "call_T2"),  # trajectory_path atif_subagent_child.json
        ("call_T3", None),
    ]
    assert [c.order for c in trace.tool_calls] == list(range(6))
    assert trace.tool_calls[4].timestamp == "2026-03-01T00:00:06.000Z"
    # Running total over the spliced order: 110, +44, +66, +320, +77, +505.
    assert [c.cumulative_tokens for c in trace.tool_calls] == [110, 154, 220, 540, 617, 1122]
    assert "subagent trajectory 'lost-session' could not be resolved" in trace.warnings
    # Totals are the parent's own (no final_metrics: distinct messages 110 + 320 + 505).
    assert trace.totals.total_tokens == 935


def test_major_version_2_is_rejected():
    with pytest.raises(UnsupportedATIFVersion, match="ATIF-v2.0") as caught:
        parse_atif(FIXTURES / "atif_v2.json")
    assert isinstance(caught.value, InputError)
    assert isinstance(caught.value, UnsupportedSchemaVersion)


def test_invalid_json_is_input_error():
    with pytest.raises(InputError, match=r"atif_invalid\.json is not valid JSON"):
        parse_atif(FIXTURES / "atif_invalid.json")


def test_empty_file_is_input_error(tmp_path):
    path = tmp_path / "trajectory.json"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="is empty"):
        parse_atif(path)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "top level is not an object"),
        ({"steps": []}, "schema_version is None"),
        ({"schema_version": "1.4", "steps": []}, "schema_version is '1.4'"),
        ({"schema_version": "ATIF-v1.2", "steps": {}}, "'steps' is not a list"),
    ],
)
def test_not_an_atif_document(tmp_path, document, message):
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match=message):
        parse_atif(path)


def test_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError, match="trajectory not found"):
        parse_atif(tmp_path / "trajectory.json")


# --- placeholder output-token counts ------------------------------------------------------


@needs_corpus
def test_llamacpp_old_trajectory_output_tokens_are_flagged_as_placeholders():
    totals = parse_atif(LLAMACPP_TRAJECTORY).totals
    # Its 11 agent steps are 3 API messages whose steps repeat one completion figure:
    # steps 2-5 say 4, steps 6-9 say 2, steps 10-11 say 1. No message carries a final
    # count; the distinct sum is 4 + 2 + 1 = 7 and final_metrics (and result.json) say
    # 26 = 4*4 + 2*4 + 1*2, the per-step sum of the same placeholders.
    assert totals.source == "trajectory.steps(deduplicated)"
    assert totals.output_tokens == 7
    assert totals.output_tokens_placeholder is True
    note = totals.output_tokens_note
    assert "none of the 3 API message(s) carries a final count" in note
    assert "total_completion_tokens says 26 (the per-step sum" in note


@needs_corpus
def test_django_trajectory_output_tokens_carry_final_counts():
    totals = parse_atif(DJANGO_TRAJECTORY).totals
    # 24 distinct messages; 2 of them repeat one figure on every step ([1, 1, 1] and
    # [2, 2, 2, 2, 2]); the others end in a larger final count (e.g. [7, 7, 7, 483]).
    assert totals.output_tokens_placeholder is False
    assert totals.output_tokens_note.startswith(
        "2 of 24 API message(s) carry only a stream placeholder completion count"
    )
    assert "total_completion_tokens says 5599" in totals.output_tokens_note


def test_repeated_message_with_a_final_count_is_not_a_placeholder():
    totals = parse_atif(FIXTURES / "merge_trajectory.json").totals
    # message 1: completion 1 then 30 (final count present); messages 2, 3: one step each.
    assert totals.output_tokens == 30 + 20 + 60
    assert totals.output_tokens_placeholder is False
    # final_metrics.total_completion_tokens 111 = 1 + 30 + 20 + 60, the per-step sum
    assert totals.output_tokens_note == (
        "final_metrics.total_completion_tokens says 111 "
        "(the per-step sum, which counts a message once per step)"
    )


def test_trusted_final_metrics_output_tokens_are_not_placeholders():
    totals = parse_atif(FIXTURES / "atif_late_result.json").totals
    assert totals.source == "trajectory.final_metrics"
    assert (totals.output_tokens_placeholder, totals.output_tokens_note) == (False, None)


def test_placeholder_only_messages_without_final_metrics(tmp_path):
    def step(step_id: int, prompt: int, completion: int, call: str) -> dict:
        return {
            "step_id": step_id,
            "source": "agent",
            "message": "",
            "metrics": {"prompt_tokens": prompt, "completion_tokens": completion},
            "tool_calls": [{"tool_call_id": call, "function_name": "Read", "arguments": {}}],
        }

    document = {
        "schema_version": "ATIF-v1.2",
        "session_id": "s",
        "agent": {"name": "claude-code", "version": "1"},
        "steps": [step(1, 100, 3, "a"), step(2, 100, 3, "b"), step(3, 150, 5, "c"),
                  step(4, 150, 5, "d"), step(5, 150, 5, "e")],
    }  # fmt: skip
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps(document))
    totals = parse_atif(path).totals
    # two messages ([3, 3] and [5, 5, 5]): output 3 + 5 = 8, both placeholders
    assert totals.output_tokens == 8
    assert totals.output_tokens_placeholder is True
    assert totals.output_tokens_note == (
        "per-message completion_tokens are stream placeholders: none of the 2 API "
        "message(s) carries a final count (2 repeat one figure on every step); "
        "output_tokens 8 is their sum, the true output count is unknown"
    )


def test_step_clock_validates_every_timestamp_and_orders_by_instant(tmp_path):
    # Why no string-ordering shortcut: a plain-form string can be an impossible date
    # (02-30), and zones make text order differ from time order (the +02:00 step is
    # text-later but one hour earlier). Expected: an independent datetime rule.
    from datetime import datetime, timezone

    stamps = [
        "2026-02-28T03:15:10.000Z",
        "2026-02-30T03:15:11.000Z",  # impossible date, plain form
        "2026-02-28T04:15:12.000+02:00",  # 02:15:12 UTC: backwards
        "2026-02-28T03:15:13.000Z",
        "2026-02-28T03:15:12.999Z",  # text and time both earlier: backwards
        "2026-02-28 03:15:14Z",  # other form, later
        "2026-02-28T03:15:14.5Z",  # fraction of one digit, later still
    ]
    steps = [
        {"step_id": n, "source": "agent", "timestamp": stamp,
         "tool_calls": [{"tool_call_id": f"t{n}", "function_name": "Read", "arguments": {}}]}
        for n, stamp in enumerate(stamps, start=1)
    ]  # fmt: skip
    path = tmp_path / "trajectory.json"
    path.write_text(json.dumps({"schema_version": "ATIF-v1.2", "steps": steps}))
    trace = parse_atif(path)

    def instant(text):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace(".5+", ".500+"))
        except ValueError:
            return None
        return moment.astimezone(timezone.utc)

    unparseable, backwards, latest = [], [], None
    for number, stamp in enumerate(stamps, start=1):
        moment = instant(stamp)
        if moment is None:
            unparseable.append(number)
        elif latest is not None and moment < latest:
            backwards.append(number)
        else:
            latest = moment
    assert (unparseable, backwards) == ([2], [3, 5])
    assert [c.timestamp for c in trace.tool_calls] == [
        None if n in unparseable else s for n, s in enumerate(stamps, start=1)
    ]
    assert "1 step timestamp(s) are not ISO 8601 (first at step #2)" in " ".join(trace.warnings)
    assert "step timestamps go backwards 2 time(s) (first at step #3)" in " ".join(trace.warnings)

"""The harness version of a trial: which artifact names it, and why it is unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_lib.harness import (
    RESULT_JSON_SOURCE,
    TRAJECTORY_SOURCE,
    known_version,
    resolve_harness_version,
    trajectory_agent_version,
)

TRANSCRIPT = "agent/claude-code.txt init line"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2.1.62", "2.1.62"),
        (" 2.1.50\n", "2.1.50"),
        ("unknown", None),
        ("UNKNOWN", None),
        ("", None),
        ("  ", None),
        ("null", None),
        (None, None),
        (2.1, None),
        ({"v": 1}, None),
    ],
)
def test_known_version(value, expected):
    assert known_version(value) == expected


def test_the_first_artifact_that_names_a_version_wins_in_order(tmp_path):
    (tmp_path / "task_metrics.json").write_text(json.dumps({"agent_version": "9.9.9"}))
    traces = [("2.1.62", TRAJECTORY_SOURCE), ("2.1.62", TRANSCRIPT)]
    found = resolve_harness_version(
        tmp_path, result_version="2.1.62", trace_versions=traces, trace_state="usable"
    )
    assert (found.version, found.source, found.unknown_reason) == (
        "2.1.62",
        RESULT_JSON_SOURCE,
        None,
    )
    assert found.warnings == ()  # task_metrics.json is not read once a version is known
    found = resolve_harness_version(
        tmp_path,
        result_version=None,
        trace_versions=[(None, TRAJECTORY_SOURCE), ("2.1.62", TRANSCRIPT)],
        trace_state="usable",
    )
    assert (found.version, found.source) == ("2.1.62", TRANSCRIPT)


def test_disagreeing_artifacts_keep_the_first_and_say_so(tmp_path):
    found = resolve_harness_version(
        tmp_path,
        result_version="2.1.50",
        trace_versions=[("2.1.62", TRAJECTORY_SOURCE)],
        trace_state="usable",
    )
    assert (found.version, found.source) == ("2.1.50", RESULT_JSON_SOURCE)
    assert found.warnings == (
        "harness version 2.1.62 in agent/trajectory.json agent.version differs from 2.1.50 in "
        "result.json agent_info.version; using 2.1.50",
    )


@pytest.mark.parametrize(
    ("content", "version", "source"),
    [
        ({"agent_version": "2.0.1"}, "2.0.1", "task_metrics.json agent_version"),
        (
            {"harness_version": "unknown", "agent_info": {"version": "2.0.2"}},
            "2.0.2",
            "task_metrics.json agent_info.version",
        ),
        # the CodeScaleBench fields hold no version
        ({"task_id": "t", "reward": 1.0, "mcp_servers": ["sourcegraph"]}, None, None),
    ],
)
def test_task_metrics_json_is_the_last_resort(tmp_path, content, version, source):
    (tmp_path / "task_metrics.json").write_text(json.dumps(content))
    found = resolve_harness_version(
        tmp_path, result_version=None, trace_versions=[], trace_state="absent"
    )
    assert (found.version, found.source) == (version, source)
    assert found.unknown_reason == (None if version else "no trace")


def test_an_unreadable_task_metrics_json_is_no_version(tmp_path):
    (tmp_path / "task_metrics.json").write_text("{not json")
    found = resolve_harness_version(
        tmp_path, result_version="unknown", trace_versions=[], trace_state="unusable"
    )
    assert (found.version, found.source, found.unknown_reason) == (None, None, "no usable trace")


def test_the_reason_follows_the_trace_state(tmp_path):
    reasons = {
        state: resolve_harness_version(
            tmp_path,
            result_version=None,
            trace_versions=[(None, TRAJECTORY_SOURCE)],
            trace_state=state,
        ).unknown_reason
        for state in ("usable", "unusable", "absent")
    }
    assert reasons == {
        "usable": "trace records no version",
        "unusable": "no usable trace",
        "absent": "no trace",
    }


def test_trajectory_agent_version_reads_raw_json_only(tmp_path: Path):
    path = tmp_path / "trajectory.json"
    path.write_text(
        json.dumps({"schema_version": "ATIF-v9", "agent": {"version": "2.2.0"}, "steps": "broken"})
    )
    assert trajectory_agent_version(path) == "2.2.0"
    path.write_text('{"agent": {"version": "2.2.0"}, "steps": [{"step_id": 1, "mess')  # cut off
    assert trajectory_agent_version(path) == "2.2.0"  # the agent block comes before the cut
    path.write_text('{"schema_version": "ATIF-v1.2", "agent": {"name": "claude-co')
    assert trajectory_agent_version(path) is None  # cut inside the agent block
    path.write_text(json.dumps({"agent": {"version": "unknown"}}))
    assert trajectory_agent_version(path) is None
    assert trajectory_agent_version(tmp_path / "missing.json") is None


def test_version_files_that_symlink_out_of_the_trial_are_not_read(tmp_path: Path):
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"agent": {"version": "6.6.6"}, "harness_version": "6.6.6"}))
    trial = tmp_path / "trial"
    (trial / "agent").mkdir(parents=True)
    (trial / "agent" / "trajectory.json").symlink_to(outside)
    (trial / "task_metrics.json").symlink_to(outside)
    assert trajectory_agent_version(trial / "agent" / "trajectory.json", trial) is None
    found = resolve_harness_version(
        trial, result_version=None, trace_versions=[], trace_state="unusable"
    )
    assert (found.version, found.unknown_reason) == (None, "no usable trace")


def test_a_cut_off_corpus_trajectory_still_gives_its_version(tmp_path: Path):
    corpus = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "csb"
    found = sorted(corpus.rglob("mcp_django-modeladmin-impact-001__*/agent/trajectory.json"))
    if not found:
        pytest.skip("../shared/corpus/csb is not here")
    cut = tmp_path / "trajectory.json"
    cut.write_bytes(found[0].read_bytes()[:3000])
    assert trajectory_agent_version(cut, tmp_path) == "2.1.62"

"""Retrieval events from tool calls: hand-made calls for each tool shape, and real trials.

Expected values on the corpus were worked out by hand from the raw files (jq over
``trajectory.json``, reading ``claude-code.txt``), not with this package.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from retrieval_lib.events.build import build_events, summarize_events
from retrieval_lib.ground_truth import GroundTruth
from retrieval_lib.traces.model import ParsedTrace, ToolCall

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = REPO_ROOT / ".." / "shared" / "corpus" / "csb"
DESIGN_RUN = CORPUS / "runs" / "official" / "ccb_design_haiku_20260228_025547"
DJANGO_MCP = (
    DESIGN_RUN
    / "mcp-remote-direct/2026-02-28__03-14-34/mcp_django-modeladmin-impact-001__ECYjuLv"
    / "agent/trajectory.json"
)
DJANGO_BASELINE = (
    DESIGN_RUN
    / "baseline-local-direct/2026-02-28__03-13-55/django-modeladmin-impact-001__8pRTT8b"
    / "agent/claude-code.txt"
)
DJANGO_GT_FILE = (
    CORPUS / "benchmarks/ccb_design/django-modeladmin-impact-001/tests/ground_truth.json"
)
DJANGO_GT = [
    "django/contrib/admin/options.py",
    "tests/admin_changelist/admin.py",
    "tests/modeladmin/tests.py",
    "docs/releases/1.5.txt",
    "docs/ref/contrib/admin/index.txt",
]
DJANGO_REPO = "github.com/sg-evals/django--674eda1c"

needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"real run corpus not found at {CORPUS}"
)


def gt(*files: str) -> GroundTruth:
    return GroundTruth(files=list(files))


def run(*calls: ToolCall, ground_truth: GroundTruth | None = None, **kwargs: Any) -> list[dict]:
    trace = ParsedTrace("transcript", list(calls))
    return build_events(trace, ground_truth or gt(), **kwargs)


def single(call: ToolCall, ground_truth: GroundTruth | None = None, **kwargs: Any) -> dict:
    events = run(call, ground_truth=ground_truth, **kwargs)
    assert len(events) == 1
    return events[0]


def mcp_json(value: Any) -> str:
    return orjson.dumps(value).decode()


# --------------------------------------------------------------------------- local tools


def test_read_with_offset_and_limit() -> None:
    call = ToolCall(
        "r1", "Read", {"file_path": "/workspace/src/App.py", "offset": 100, "limit": 50}
    )
    event = single(call, gt("src/app.py"))
    assert event["tool_category"] == "file_read"
    assert event["target_files"] == ["src/app.py"]
    assert event["target_sources"] == {"src/app.py": "argument"}
    assert event["file_ranges"] == [{"file": "src/app.py", "line_start": 100, "line_end": 149}]
    assert event["hits_ground_truth"] is True
    assert event["matched_ground_truth_files"] == ["src/app.py"]
    assert event["arguments"] == {"file_path": "/workspace/src/App.py", "offset": 100, "limit": 50}


def test_read_range_is_clipped_to_the_lines_returned() -> None:
    structured = {"type": "text", "file": {"filePath": "/workspace/a.py", "numLines": 30}}
    call = ToolCall("r", "Read", {"file_path": "/workspace/a.py", "limit": 200})
    call.structured_result = structured
    assert single(call)["file_ranges"] == [{"file": "a.py", "line_start": 1, "line_end": 30}]


def test_read_without_limit_has_no_range() -> None:
    event = single(ToolCall("r", "Read", {"file_path": "/workspace/a.py"}))
    assert (event["target_files"], event["file_ranges"]) == (["a.py"], [])


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("Write", {"file_path": "/workspace/pkg/new.py", "content": "x = 1\n" * 5000}),
        ("Edit", {"file_path": "/workspace/pkg/new.py", "old_string": "a", "new_string": "b"}),
        ("MultiEdit", {"file_path": "/workspace/pkg/new.py", "edits": []}),
        ("NotebookEdit", {"notebook_path": "/workspace/pkg/new.py", "new_source": ""}),
    ],
)
def test_writes_keep_their_file(name: str, arguments: dict) -> None:
    event = single(ToolCall("w", name, arguments), gt("pkg/new.py"))
    assert event["tool_category"] == "file_write"
    assert event["target_files"] == ["pkg/new.py"]
    assert event["matched_ground_truth_files"] == ["pkg/new.py"]
    # file contents are not salient
    assert "content" not in event["arguments"] and "new_source" not in event["arguments"]


def test_grep_files_with_matches_text() -> None:
    result = (
        "Found 3 files\ntests/modeladmin/tests.py\ntests/admin_changelist/admin.py\nDjango/x.py"
    )
    call = ToolCall("g", "Grep", {"pattern": "get_list_filter", "path": "/workspace"}, result)
    event = single(call, gt("tests/modeladmin/tests.py"))
    assert event["tool_category"] == "code_search"
    assert event["target_files"] == [
        "tests/modeladmin/tests.py",
        "tests/admin_changelist/admin.py",
        "django/x.py",
    ]
    assert set(event["target_sources"].values()) == {"result"}
    assert event["target_symbols"] == ["get_list_filter"]
    assert event["matched_ground_truth_files"] == ["tests/modeladmin/tests.py"]


def test_grep_prefers_structured_filenames() -> None:
    call = ToolCall("g", "Grep", {"pattern": "a|b"}, "Found 1 file\nignored.py")
    call.structured_result = {"mode": "files_with_matches", "filenames": ["/workspace/real.py"]}
    event = single(call)
    assert event["target_files"] == ["real.py"]
    assert event["target_symbols"] == []  # "a|b" is not an identifier


def test_grep_content_mode_lines_and_context() -> None:
    result = "\n".join(
        [
            "/workspace/pkg/a-1-b/mod.py-9-    context before",
            "pkg/a-1-b/mod.py:10:    def target():",
            "/workspace/pkg/a-1-b/mod.py-11-        pass",
            "--",
            "docs/guide.txt:3:target here",
            "no line number here",
        ]
    )
    call = ToolCall(
        "g", "Grep", {"pattern": "target", "output_mode": "content", "-n": True}, result
    )
    event = single(call)
    assert event["target_files"] == ["pkg/a-1-b/mod.py", "docs/guide.txt"]
    assert event["file_ranges"] == [
        {"file": "pkg/a-1-b/mod.py", "line_start": 9, "line_end": 11},
        {"file": "docs/guide.txt", "line_start": 3, "line_end": 3},
    ]


def test_grep_content_without_line_numbers() -> None:
    call = ToolCall(
        "g",
        "Grep",
        {"pattern": "x", "output_mode": "content", "-n": False},
        "src/a.py:x = 1\nsrc/a.py-context\nlib/b.py:    x()\nnot a path: x",
    )
    event = single(call)
    assert (event["target_files"], event["file_ranges"]) == (["src/a.py", "lib/b.py"], [])


def test_grep_on_one_file() -> None:
    call = ToolCall(
        "g",
        "Grep",
        {"pattern": "foo", "path": "/workspace/src/one.py", "output_mode": "content"},
        "12:foo = 1\n13-bar\n40:foo()",
    )
    event = single(call)
    assert event["target_files"] == ["src/one.py"]
    assert event["target_sources"] == {"src/one.py": "argument"}
    assert event["file_ranges"] == [
        {"file": "src/one.py", "line_start": 12, "line_end": 13},
        {"file": "src/one.py", "line_start": 40, "line_end": 40},
    ]


def test_grep_count_mode_and_directory_path() -> None:
    call = ToolCall(
        "g",
        "Grep",
        {"pattern": "x", "path": "/workspace/src", "output_mode": "count"},
        "src/a.py:3\nsrc/b.py:0\n\nFound 3 total occurrences across 1 file.",
    )
    # the directory argument is not a target; a file with 0 matches is not returned
    assert single(call)["target_files"] == ["src/a.py"]


def test_glob() -> None:
    call = ToolCall("g", "Glob", {"pattern": "**/*.go", "path": "/workspace"}, "")
    call.result = "/workspace/istio/a.go\n/workspace/istio/b.go\n(Results are truncated. Consider a more specific path)"
    event = single(call, workspace_repos=["istio", "envoy"])
    assert event["tool_category"] == "file_search"
    assert event["target_files"] == ["istio::a.go", "istio::b.go"]
    none = single(ToolCall("g", "Glob", {"pattern": "*.zz"}, "No files found"))
    assert none["target_files"] == []


def test_error_results_contribute_no_result_targets() -> None:
    grep = ToolCall("g", "Grep", {"pattern": "x", "path": "src/a.py"}, "Found 1 file\nb.py", True)
    event = single(grep)
    assert event["target_files"] == ["src/a.py"]  # the argument still counts
    assert event["is_error"] is True
    mcp = ToolCall(
        "m",
        "mcp__sourcegraph__sg_keyword_search",
        {"query": "x"},
        mcp_json({"blocks": [{"file": "a.py", "repo": DJANGO_REPO}]}),
        is_error=True,
    )
    assert single(mcp)["target_files"] == []


# --------------------------------------------------------------------------- MCP tools


def test_mcp_keyword_search_uses_the_file_key() -> None:
    # pitfall 2: blocks name files under "file", not "path"
    result = mcp_json(
        {
            "blocks": [
                {
                    "file": "django/contrib/admin/options.py",
                    "repo": DJANGO_REPO,
                    "chunks": [
                        {"startLine": 1109, "endLine": 1112, "content": "path: fake/x.py"},
                        {"startLine": 106, "endLine": 109, "content": "..."},
                    ],
                },
                {"file": "tests/other.py", "repo": DJANGO_REPO, "chunks": []},
            ]
        }
    )
    call = ToolCall(
        "k", "mcp__sourcegraph__sg_keyword_search", {"query": "get_list_filter"}, result
    )
    event = single(call, gt("django/contrib/admin/options.py"))
    # single-repo ground truth: every MCP target drops its repo (one key style per document)
    assert event["target_files"] == ["django/contrib/admin/options.py", "tests/other.py"]
    assert event["matched_ground_truth_files"] == ["django/contrib/admin/options.py"]
    assert event["file_ranges"] == [
        {"file": "django/contrib/admin/options.py", "line_start": 106, "line_end": 109},
        {"file": "django/contrib/admin/options.py", "line_start": 1109, "line_end": 1112},
    ]
    assert event["is_mcp"] is True
    assert event["arguments"] == {"query": "get_list_filter"}


def test_mcp_list_files_skips_directories() -> None:
    result = mcp_json(
        {
            "files": [
                {"isDirectory": True, "path": "pkg/sub/"},
                {"isDirectory": False, "path": "pkg/a.py"},
                {"isDirectory": True, "path": "pkg/noslash"},
                {"isDirectory": False, "path": "pkg/b.py"},
            ]
        }
    )
    call = ToolCall(
        "l", "mcp__sourcegraph__sg_list_files", {"repo": "github.com/o/pkg", "path": "pkg"}, result
    )
    event = single(call)
    assert event["tool_category"] == "file_search"
    assert event["target_files"] == ["pkg/a.py", "pkg/b.py"]


def test_mcp_read_file_argument_and_range() -> None:
    call = ToolCall(
        "r",
        "mcp__sourcegraph__read_file",
        {
            "repo": "github.com/sg-evals/istio--4c1f845d",
            "path": "pilot/x.go",
            "startLine": 5,
            "endLine": 9,
        },
        mcp_json({"content": "5: see other/file.go\n"}),
    )
    event = single(call, gt("istio::pilot/x.go", "envoy::api/x.proto"))
    assert event["target_files"] == ["istio::pilot/x.go"]
    assert event["file_ranges"] == [{"file": "istio::pilot/x.go", "line_start": 5, "line_end": 9}]
    assert event["hits_ground_truth"] is True


def test_mcp_symbol_navigation() -> None:
    result = mcp_json(
        {
            "fileBlocks": [
                {
                    "file": "a/b.py",
                    "repo": "github.com/o/r",
                    "chunks": [{"startLine": 3, "endLine": 4}],
                },
                {"file": "c/d.py", "repo": "github.com/o/r", "chunks": []},
            ]
        }
    )
    call = ToolCall(
        "f",
        "mcp__sourcegraph__sg_find_references",
        {"repo": "github.com/o/r", "path": "a/b.py", "symbol": "do_it"},
        result,
    )
    event = single(call)
    assert event["tool_category"] == "symbol_navigation"
    assert event["target_files"] == ["a/b.py", "c/d.py"]
    assert event["target_sources"] == {"a/b.py": "argument", "c/d.py": "result"}
    assert event["target_symbols"] == ["do_it"]


def test_mcp_unparseable_and_prose_results() -> None:
    for result in ("not json at all", '{"blocks": [', "[1, 2", "", '"just a string"'):
        call = ToolCall("k", "mcp__sourcegraph__sg_nls_search", {"query": "q"}, result)
        assert single(call)["target_files"] == [], result
    prose = mcp_json({"answer": "The bug is in src/server.py and lib/util.py, see path: x.py"})
    deep = single(ToolCall("d", "mcp__sourcegraph__sg_deepsearch", {"query": "q"}, prose))
    assert (deep["tool_category"], deep["target_files"]) == ("deep_search", [])
    # but a structured path field in a deep-search answer does count
    sources = mcp_json(
        {"answer": "...", "sources": [{"path": "src/server.py", "repo": "github.com/o/r"}]}
    )
    deep = single(ToolCall("d", "mcp__sourcegraph__deepsearch_read", {}, sources))
    assert deep["target_files"] == ["src/server.py"]


def test_mcp_diff_results_name_files_in_fields() -> None:
    result = mcp_json(
        {
            "repository": {"name": "github.com/o/r"},
            "fileDiffs": [
                {"oldPath": "src/old_name.py", "newPath": "src/new_name.py", "hunks": []},
                {"oldPath": "src/gone.py", "newPath": "/dev/null"},
            ],
        }
    )
    call = ToolCall(
        "c", "mcp__sourcegraph__sg_compare_revisions", {"repo": "github.com/o/r"}, result
    )
    event = single(call)
    assert event["tool_category"] == "commit_search"
    # newPath wins over oldPath; a deleted file's /dev/null names no file
    assert event["target_files"] == ["src/new_name.py"]


def test_mcp_other_tools_have_no_targets() -> None:
    repos = mcp_json({"repos": [{"name": "github.com/o/r", "path": "x.py"}]})
    event = single(ToolCall("l", "mcp__sourcegraph__sg_list_repos", {"query": "r"}, repos))
    assert (event["tool_category"], event["is_mcp"], event["target_files"]) == ("other", True, [])


# --------------------------------------------------------------------------- Bash


def test_bash_reads_union_targets_and_take_the_first_category() -> None:
    call = ToolCall(
        "b",
        "Bash",
        {"command": "cd /workspace/pkg && sed -n '10,20p' a.py && grep -n foo b.py c.py"},
        "...",
    )
    event = single(call, gt("pkg/c.py"))
    assert event["tool_name"] == "Bash"
    assert event["tool_category"] == "file_read"
    assert event["target_files"] == ["pkg/a.py", "pkg/b.py", "pkg/c.py"]
    assert event["file_ranges"] == [{"file": "pkg/a.py", "line_start": 10, "line_end": 20}]
    assert event["matched_ground_truth_files"] == ["pkg/c.py"]
    assert event["target_symbols"] == ["foo"]


def test_bash_find_output_lists_files() -> None:
    call = ToolCall(
        "b",
        "Bash",
        {"command": "cd /workspace && find ./src -name '*.py' 2>/dev/null | head -5"},
        "./src/a.py\n./src/deep/b.py\nfind: './src/locked': Permission denied\n./other/c.py",
    )
    event = single(call)
    assert event["tool_category"] == "file_search"
    # the start folder is not a file; names outside the start folder are not find's output
    assert event["target_files"] == ["src/a.py", "src/deep/b.py"]


def test_bash_grep_rn_output_and_structured_stdout() -> None:
    call = ToolCall("b", "Bash", {"command": "grep -rn needle /workspace/src | head"}, "ignored")
    call.structured_result = {
        "stdout": "/workspace/src/x.py:4:needle\n/workspace/src/y.py:8:needle = 1",
        "stderr": "grep: /workspace/src/z.py: Permission denied",
    }
    event = single(call)
    assert event["target_files"] == ["src/x.py", "src/y.py"]
    assert event["file_ranges"] == [
        {"file": "src/x.py", "line_start": 4, "line_end": 4},
        {"file": "src/y.py", "line_start": 8, "line_end": 8},
    ]


def test_bash_grep_without_line_numbers() -> None:
    call = ToolCall(
        "b", "Bash", {"command": "grep -r needle src"}, "src/x.py:needle\nsrc/y.md:a needle"
    )
    assert single(call)["target_files"] == ["src/x.py", "src/y.md"]


def test_bash_non_reads_are_other_with_no_targets() -> None:
    for command in ("python -m pytest tests/test_a.py", "sed -i 's/a/b/' x.py", "cat <<EOF > a.py"):
        event = single(ToolCall("b", "Bash", {"command": command}, "tests/test_a.py ok"))
        assert (event["tool_category"], event["target_files"]) == ("other", []), command


def test_go_to_definition_and_malformed_arguments() -> None:
    result = mcp_json({"fileBlocks": [{"file": "lib/def.py", "repo": "github.com/o/r"}]})
    call = ToolCall("d", "mcp__sourcegraph__go_to_definition", {"symbol": "Thing"}, result)
    event = single(call)
    assert (event["tool_category"], event["target_files"], event["target_symbols"]) == (
        "symbol_navigation",
        ["lib/def.py"],
        ["Thing"],
    )
    broken = ToolCall("x", "Read", "not a dict")  # type: ignore[arg-type]
    event = single(broken)
    assert (event["tool_category"], event["target_files"], event["arguments"]) == (
        "file_read",
        [],
        {},
    )


def test_task_and_other_tools() -> None:
    event = single(ToolCall("t", "Task", {"prompt": "look at src/x.py", "description": "d"}))
    assert (event["tool_category"], event["is_mcp"], event["target_files"]) == ("other", False, [])
    assert event["arguments"] == {}


def test_long_command_argument_is_cut() -> None:
    command = "cat a.py && echo " + "x" * 5000
    event = single(ToolCall("b", "Bash", {"command": command}))
    assert event["arguments"]["command"].startswith("cat a.py && echo xxx")
    assert event["arguments"]["command"].endswith(f"…[{len(command) - 2000} chars cut]")
    assert event["target_files"] == ["a.py"]


def test_integer_arguments_are_kept_within_64_bits_only() -> None:
    # the document writer stores -2**63 .. 2**64 - 1; one past either end is not kept
    args = {"offset": -(2**63), "limit": 2**64 - 1, "startLine": 2**64, "endLine": -(2**63) - 1}
    warnings: list[str] = []
    event = single(ToolCall("r", "Read", {"file_path": "a.py", **args}), warnings=warnings)
    assert event["arguments"] == {
        "file_path": "a.py",
        "offset": -9223372036854775808,
        "limit": 18446744073709551615,
        "startLine": None,
        "endLine": None,
    }
    assert warnings == [
        "tool call #0 (Read): argument startLine (Integer exceeds 64-bit range) not kept",
        "tool call #0 (Read): argument endLine (Integer exceeds 64-bit range) not kept",
    ]


# --------------------------------------------------------------------------- multi-repo


def test_multi_repo_keys_from_local_and_mcp_tools() -> None:
    ground_truth = gt("istio::pilot/x.go", "go-control-plane::envoy/route.pb.go")
    local = ToolCall("r", "Read", {"file_path": "/workspace/istio/pilot/x.go"})
    relative = ToolCall(
        "g",
        "Grep",
        {"pattern": "Route"},
        "Found 2 files\ngo-control-plane/envoy/route.pb.go\nistio/other.go",
    )
    remote = ToolCall(
        "m",
        "mcp__sourcegraph__sg_keyword_search",
        {"query": "Route"},
        mcp_json(
            {
                "blocks": [
                    {
                        "file": "envoy/route.pb.go",
                        "repo": "github.com/sg-evals/go-control-plane--71637ad6",
                    }
                ]
            }
        ),
    )
    events = run(
        local,
        relative,
        remote,
        ground_truth=ground_truth,
        workspace_repos=["istio", "go-control-plane"],
    )
    assert events[0]["target_files"] == ["istio::pilot/x.go"]
    assert events[1]["target_files"] == ["go-control-plane::envoy/route.pb.go", "istio::other.go"]
    assert events[2]["target_files"] == ["go-control-plane::envoy/route.pb.go"]
    assert [e["hits_ground_truth"] for e in events] == [True, True, True]


# --------------------------------------------------------------------------- timing, subagents


def test_elapsed_seconds_subagents_tokens_and_step_index() -> None:
    calls = [
        ToolCall(
            "a",
            "Read",
            {"file_path": "x.py"},
            timestamp="2026-02-28T03:15:14.150Z",
            cumulative_tokens=10,
        ),
        ToolCall(
            "b", "Read", {"file_path": "y.py"}, timestamp="2026-02-28T03:15:10", parent_call_id="t1"
        ),
        ToolCall(
            "c", "Read", {"file_path": "z.py"}, timestamp="2026-02-28T03:15:09Z", is_sidechain=True
        ),
        ToolCall("d", "Read", {"file_path": "w.py"}, timestamp="garbage"),
    ]
    events = run(*calls, agent_started_at="2026-02-28T03:15:10.000")  # naive: UTC
    assert [e["step_index"] for e in events] == [0, 1, 2, 3]
    assert events[0]["elapsed_seconds"] == pytest.approx(4.15)
    assert events[1]["elapsed_seconds"] == 0.0
    assert events[2]["elapsed_seconds"] is None  # before the start: unknown, not 0
    assert events[3]["elapsed_seconds"] is None
    assert [e["is_subagent"] for e in events] == [False, True, True, False]
    assert [e["cumulative_tokens"] for e in events] == [10, None, None, None]
    assert [e["tool_call_id"] for e in events] == ["a", "b", "c", "d"]


def test_trace_start_is_the_fallback_start() -> None:
    call = ToolCall("a", "Read", {"file_path": "x.py"}, timestamp="2026-02-28T03:15:14Z")
    trace = ParsedTrace("trajectory", [call], started_at="2026-02-28T03:15:10Z")
    assert build_events(trace, gt())[0]["elapsed_seconds"] == 4.0
    assert (
        build_events(trace, gt(), agent_started_at="2026-02-28T03:15:12Z")[0]["elapsed_seconds"]
        == 2.0
    )


def test_no_trace_gives_no_events() -> None:
    assert build_events(None, gt("a.py")) == []
    assert summarize_events([], ["a.py"]) == {
        "total_events": 0,
        "mcp_events": 0,
        "local_events": 0,
        "unique_files_accessed": 0,
        "ground_truth_files_hit": 0,
        "first_ground_truth_hit_step": None,
        "events_by_category": {
            "file_read": 0,
            "file_search": 0,
            "code_search": 0,
            "symbol_navigation": 0,
            "commit_search": 0,
            "deep_search": 0,
            "file_write": 0,
            "other": 0,
        },
    }


def test_summary_ignores_writes_for_access_and_hits() -> None:
    calls = [
        ToolCall("w", "Write", {"file_path": "a.py", "content": ""}),
        ToolCall("t", "TodoWrite", {"todos": []}),
        ToolCall("r", "Read", {"file_path": "b.py"}),
        ToolCall("r2", "Read", {"file_path": "a.py"}),
    ]
    events = run(*calls, ground_truth=gt("a.py", "b.py"))
    summary = summarize_events(events, ["a.py", "b.py"])
    assert summary["first_ground_truth_hit_step"] == 2
    assert summary["ground_truth_files_hit"] == 2
    assert summary["unique_files_accessed"] == 2
    assert summary["events_by_category"]["file_write"] == 1
    assert summary["events_by_category"]["other"] == 1
    assert (summary["total_events"], summary["local_events"], summary["mcp_events"]) == (4, 4, 0)


def test_event_field_set_matches_the_contract() -> None:
    event = single(ToolCall("a", "Read", {"file_path": "x.py"}))
    assert set(event) == {
        "step_index",
        "tool_name",
        "tool_category",
        "is_mcp",
        "is_subagent",
        "tool_call_id",
        "arguments",
        "target_files",
        "target_sources",
        "target_symbols",
        "file_ranges",
        "hits_ground_truth",
        "matched_ground_truth_files",
        "is_error",
        "elapsed_seconds",
        "cumulative_tokens",
        "created_files",  # 1.2
    }


# --------------------------------------------------------------------------- real trials


@pytest.fixture(scope="module")
def django_gt() -> GroundTruth:
    assert json.loads(DJANGO_GT_FILE.read_text()) == DJANGO_GT
    return GroundTruth(files=sorted(DJANGO_GT))


@needs_corpus
def test_django_mcp_trial(django_gt: GroundTruth) -> None:
    from retrieval_lib.traces.atif import parse_atif

    trace = parse_atif(DJANGO_MCP)
    events = build_events(trace, django_gt, agent_started_at="2026-02-28T03:15:10.067Z")
    assert len(events) == 28
    by_category = summarize_events(events, django_gt.files)["events_by_category"]
    # by hand from the function names: 10 keyword_search + 1 nls_search; 7 read_file + 1
    # Read; 7 list_files; 1 find_references; 1 Write
    assert by_category == {
        "file_read": 8,
        "file_search": 7,
        "code_search": 11,
        "symbol_navigation": 1,
        "commit_search": 0,
        "deep_search": 0,
        "file_write": 1,
        "other": 0,
    }
    # the very first call, a keyword search, surfaces all five ground-truth files
    first = events[0]
    assert first["tool_name"] == "mcp__sourcegraph__sg_keyword_search"
    assert first["tool_category"] == "code_search"
    assert first["target_files"] == [
        "tests/admin_changelist/admin.py",
        "django/contrib/admin/options.py",
        "tests/modeladmin/tests.py",
        "docs/ref/contrib/admin/index.txt",
        "docs/releases/1.5.txt",
    ]
    assert sorted(first["matched_ground_truth_files"]) == sorted(DJANGO_GT)
    assert {
        "file": "django/contrib/admin/options.py",
        "line_start": 1109,
        "line_end": 1112,
    } in first["file_ranges"]
    # step timestamp 03:15:14.150 minus the trajectory's first step 03:15:10.067
    assert first["elapsed_seconds"] == pytest.approx(4.083)

    # list_files on tests/admin_changelist: six files, no folders
    listing = events[6]
    assert listing["tool_name"] == "mcp__sourcegraph__sg_list_files"
    assert listing["target_files"] == [
        "tests/admin_changelist/__init__.py",
        "tests/admin_changelist/admin.py",
        "tests/admin_changelist/models.py",
        "tests/admin_changelist/test_date_hierarchy.py",
        "tests/admin_changelist/tests.py",
        "tests/admin_changelist/urls.py",
    ]
    # list_files on django/contrib/admin: 21 entries, 6 of them folders
    assert len(events[14]["target_files"]) == 15
    assert not any(t.endswith("/") for t in events[14]["target_files"])
    # list_files on a file path returns {"files": []}: nothing invented
    assert events[10]["target_files"] == []

    # find_references: argument file plus the files of its fileBlocks
    refs = events[3]
    assert refs["tool_category"] == "symbol_navigation"
    assert refs["target_files"] == [
        "django/contrib/admin/options.py",
        "tests/admin_changelist/admin.py",
        "tests/modeladmin/tests.py",
    ]
    assert refs["target_symbols"] == ["get_list_filter"]

    # read_file of tests/admin_changelist/admin.py lines 170-195
    assert events[21]["target_files"] == ["tests/admin_changelist/admin.py"]
    assert events[21]["file_ranges"] == [
        {"file": "tests/admin_changelist/admin.py", "line_start": 170, "line_end": 195}
    ]
    assert events[26]["tool_category"] == "file_write"
    assert events[26]["target_files"] == ["submission.json"]

    summary = summarize_events(events, django_gt.files)
    assert summary["first_ground_truth_hit_step"] == 0
    assert summary["ground_truth_files_hit"] == 5
    assert (summary["mcp_events"], summary["local_events"]) == (26, 2)


@needs_corpus
def test_django_baseline_trial(django_gt: GroundTruth) -> None:
    from retrieval_lib.traces.stream_json import parse_stream_json

    events = build_events(parse_stream_json(DJANGO_BASELINE), django_gt)
    assert [(e["tool_name"], e["tool_category"]) for e in events] == [
        ("Bash", "file_search"),  # find /workspace -type f -name "*.py" | head -20
        ("Grep", "code_search"),
        ("Grep", "code_search"),
        ("Bash", "code_search"),  # find docs ... -exec grep -l get_list_filter
        ("Read", "file_read"),
        ("Read", "file_read"),
        ("Read", "file_read"),
        ("Grep", "code_search"),
        ("Bash", "code_search"),  # find ... -exec grep -l ... | sort
        ("Write", "file_write"),
        ("Read", "file_read"),
    ]
    # find | head -20 lists 20 python files under django/core, none in the ground truth
    assert len(events[0]["target_files"]) == 20
    assert events[0]["target_files"][0] == "django/core/asgi.py"
    assert events[0]["hits_ground_truth"] is False
    # the first Grep (type py) finds the three python ground-truth files
    assert events[1]["target_files"] == [
        "tests/modeladmin/tests.py",
        "tests/admin_changelist/admin.py",
        "django/contrib/admin/options.py",
    ]
    # find -exec grep -l over docs prints the two documentation files
    assert events[3]["target_files"] == [
        "docs/ref/contrib/admin/index.txt",
        "docs/releases/1.5.txt",
    ]
    # Read limit 50 of options.py
    assert events[4]["file_ranges"] == [
        {"file": "django/contrib/admin/options.py", "line_start": 1, "line_end": 50}
    ]
    # content-mode Grep with 3 lines of context: options.py hit at 498, 863, 1110
    options_ranges = [
        r for r in events[7]["file_ranges"] if r["file"] == "django/contrib/admin/options.py"
    ]
    assert options_ranges == [
        {"file": "django/contrib/admin/options.py", "line_start": 495, "line_end": 501},
        {"file": "django/contrib/admin/options.py", "line_start": 860, "line_end": 866},
        {"file": "django/contrib/admin/options.py", "line_start": 1107, "line_end": 1113},
    ]
    assert sorted(events[7]["target_files"]) == sorted(DJANGO_GT)
    summary = summarize_events(events, django_gt.files)
    assert summary["first_ground_truth_hit_step"] == 1
    assert summary["ground_truth_files_hit"] == 5
    assert summary["events_by_category"]["file_read"] == 4
    assert summary["events_by_category"]["code_search"] == 5
    assert summary["events_by_category"]["file_search"] == 1
    # transcript lines carry no timestamps
    assert all(e["elapsed_seconds"] is None for e in events)


ENVOY_BASELINE = (
    DESIGN_RUN
    / "baseline-local-direct/2026-02-28__03-16-35/envoy-routeconfig-dep-chain-001__n3htrBo"
    / "agent/claude-code.txt"
)
ENVOY_MCP = (
    DESIGN_RUN
    / "mcp-remote-direct/2026-02-28__03-17-27/mcp_envoy-routeconfig-dep-chain-__PuAfTWR"
    / "agent/trajectory.json"
)
# The task's own ground truth has no file list; these two keys are picked by hand from
# the curator's exploration notes to exercise multi-repo matching.
ENVOY_GT = GroundTruth(
    files=[
        "go-control-plane::envoy/config/route/v3/route.pb.go",
        "istio::pilot/pkg/networking/core/httproute.go",
    ]
)
ENVOY_REPOS = ["data-plane-api", "go-control-plane", "istio"]


@needs_corpus
def test_envoy_multi_repo_baseline_trial() -> None:
    from retrieval_lib.traces.stream_json import parse_stream_json

    events = build_events(parse_stream_json(ENVOY_BASELINE), ENVOY_GT, workspace_repos=ENVOY_REPOS)
    assert [e["tool_category"] for e in events] == [
        "file_read",
        "file_search",
        "file_search",
        "code_search",  # grep -rn ... | head: BusyBox rejected --include, printed usage
        "code_search",
        "code_search",
        "code_search",
        "file_read",
        "file_read",
        "file_read",
        "file_read",
        "file_write",
    ]
    assert events[3]["target_files"] == []  # a folder operand and an error message
    # Grep results are relative to /workspace: the first folder is the repository
    assert events[5]["target_files"] == [
        "istio::pilot/pkg/networking/grpcgen/grpcgen.go",
        "istio::pilot/pkg/networking/grpcgen/rds.go",
        "istio::pilot/pkg/networking/core/route/route_test.go",
        "istio::pilot/pkg/networking/core/route/route.go",
        "istio::pilot/pkg/networking/core/httproute.go",
        "istio::pilot/pkg/networking/core/gateway.go",
        "istio::pilot/pkg/networking/core/fake.go",
        "istio::pilot/pkg/networking/core/configgen.go",
    ]
    assert events[5]["matched_ground_truth_files"] == [
        "istio::pilot/pkg/networking/core/httproute.go"
    ]
    # Read limit 200 of a 173-line file: the structured result says 173 lines came back
    assert events[10]["file_ranges"] == [
        {
            "file": "data-plane-api::envoy/config/route/v3/route.proto",
            "line_start": 1,
            "line_end": 173,
        }
    ]
    summary = summarize_events(events, ENVOY_GT.files)
    assert summary["first_ground_truth_hit_step"] == 1  # Glob **/route.pb.go
    assert summary["ground_truth_files_hit"] == 2


@needs_corpus
def test_envoy_multi_repo_mcp_trial() -> None:
    from retrieval_lib.traces.atif import parse_atif

    events = build_events(parse_atif(ENVOY_MCP), ENVOY_GT, workspace_repos=ENVOY_REPOS)
    assert len(events) == 12
    listing = events[4]  # list_files istio pilot/pkg/xds: 48 files besides its folders
    assert listing["tool_category"] == "file_search"
    assert len(listing["target_files"]) == 48
    assert all(t.startswith("istio::pilot/pkg/xds/") for t in listing["target_files"])
    # the go-control-plane keyword search hits the ground-truth route.pb.go
    assert events[1]["matched_ground_truth_files"] == [
        "go-control-plane::envoy/config/route/v3/route.pb.go"
    ]
    assert events[0]["matched_ground_truth_files"] == []


def test_summary_ignores_failed_calls_like_the_metrics_do() -> None:
    events = [
        {
            "step_index": 0,
            "is_mcp": False,
            "tool_category": "file_read",
            "is_error": True,
            "target_files": ["a.py"],
            "matched_ground_truth_files": ["a.py"],
        },
        {
            "step_index": 1,
            "is_mcp": False,
            "tool_category": "code_search",
            "is_error": False,
            "target_files": ["b.py", "a.py"],
            "matched_ground_truth_files": ["a.py"],
        },
    ]
    summary = summarize_events(events, ["a.py"])
    # the failed Read of a.py at step 0 retrieved nothing: first hit is step 1
    assert summary["first_ground_truth_hit_step"] == 1
    assert (summary["unique_files_accessed"], summary["ground_truth_files_hit"]) == (2, 1)


# --------------------------------------------------------------------------- shell-created files


def test_bash_write_is_an_other_event_with_created_files() -> None:
    event = single(ToolCall("b", "Bash", {"command": "echo x > /workspace/notes.md"}))
    assert (event["tool_category"], event["target_files"]) == ("other", [])
    assert event["created_files"] == ["notes.md"]


def test_bash_creation_outside_the_repository_or_failed_creates_nothing() -> None:
    assert (
        single(ToolCall("b", "Bash", {"command": "pytest > /tmp/out.txt 2>&1"}))["created_files"]
        == []
    )
    assert (
        single(ToolCall("b", "Bash", {"command": "ls > /logs/agent/x.txt"}))["created_files"] == []
    )
    failed = ToolCall("b", "Bash", {"command": "echo x > a.md"}, result="denied", is_error=True)
    assert single(failed)["created_files"] == []
    # unknown (None) is not a failure: the file was written
    assert single(ToolCall("b", "Bash", {"command": "echo x > a.md"}))["created_files"] == ["a.md"]


def test_created_ground_truth_key_and_read_in_the_same_call() -> None:
    # the created path is matched to the ground-truth key like any target
    call = ToolCall("b", "Bash", {"command": "cd /testbed && grep -n foo src/a.py > src/hits.txt"})
    event = single(call, ground_truth=gt("src/hits.txt"))
    assert event["created_files"] == ["src/hits.txt"]
    # grep into a file is a write, not a read (unchanged rule): no targets
    assert event["target_files"] == []
    call = ToolCall("b", "Bash", {"command": "cat src/a.py; echo y > b.md"}, result="x")
    event = single(call, ground_truth=gt("src/a.py"))
    assert (event["tool_category"], event["target_files"]) == ("file_read", ["src/a.py"])
    assert event["created_files"] == ["b.md"]


def test_listed_output_naming_a_file_the_command_created_is_not_a_target() -> None:
    call = ToolCall(
        "b",
        "Bash",
        {"command": "touch new.py; find . -name '*.py'"},
        result="./new.py\n./old.py\n",
        is_error=False,
    )
    event = single(call)
    assert event["created_files"] == ["new.py"]
    # find's output still names old.py; new.py is the command's own file
    assert event["target_files"] == ["old.py"]


def test_a_read_of_a_file_created_earlier_in_the_line_under_another_spelling() -> None:
    # /workspace/n.md and n.md are one key: the cat reads the command's own file
    call = ToolCall("b", "Bash", {"command": "echo x > /workspace/n.md && cat n.md a.py"})
    event = single(call)
    assert event["created_files"] == ["n.md"]
    assert event["target_files"] == ["a.py"]
    # read first, then overwritten under another spelling: the read stays
    call = ToolCall("b", "Bash", {"command": "cat n.md; echo x > /workspace/n.md"})
    event = single(call)
    assert (event["target_files"], event["created_files"]) == (["n.md"], ["n.md"])
    # a failed call created nothing, so its read is kept
    call = ToolCall("b", "Bash", {"command": "echo x > /workspace/n.md; cat n.md"}, is_error=True)
    event = single(call)
    assert (event["target_files"], event["created_files"]) == (["n.md"], [])

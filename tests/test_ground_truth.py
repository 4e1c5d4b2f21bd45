"""Tests of retrieval_lib.ground_truth: every source of the chain, on fixtures and the corpus.

Expected values were worked out by hand from the fixture files under
tests/fixtures/tasks/ and from the real task definitions in ../shared/corpus/csb.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_lib.errors import GroundTruthError
from retrieval_lib.ground_truth import GroundTruth, load_ground_truth
from retrieval_lib.task_text import extract_paths_from_text, parse_unified_diff

REPO_ROOT = Path(__file__).resolve().parents[1]
TASKS = REPO_ROOT / "tests" / "fixtures" / "tasks"
SUITE = TASKS / "fixture_suite"
CORPUS_BENCHMARKS = REPO_ROOT / ".." / "shared" / "corpus" / "csb" / "benchmarks"

needs_corpus = pytest.mark.skipif(
    not CORPUS_BENCHMARKS.is_dir(), reason="real corpus ../shared/corpus/csb is absent"
)


def load(name: str) -> GroundTruth:
    return load_ground_truth([SUITE / name], tasks_root=TASKS)


def chunk(file: str, start: int, end: int, annotation: str | None = None) -> dict:
    return {"file": file, "line_start": start, "line_end": end, "annotation": annotation}


# ------------------------------------------------------------------ source 1 and variants


def test_bare_list_dedupes_and_drops_placeholders() -> None:
    gt = load("gt-bare-list-001")
    # "src/Core/Engine.py", "./src/core/engine.py" and "/workspace/src/core/engine.py" are one file
    assert gt.files == ["lib/util.go", "src/core/engine.py"]
    assert (gt.source, gt.confidence) == ("tests/ground_truth.json", "high")
    assert gt.expected_edit_files is None
    assert gt.chunks is None
    assert gt.files
    assert gt.task_dirs == ["fixture_suite/gt-bare-list-001"]
    assert len(gt.warnings) == 1
    assert "dropped 5" in gt.warnings[0] and "'/tmp/scratch.txt'" in gt.warnings[0]


def test_object_form_with_symbols_edits_and_chunks() -> None:
    gt = load("gt-object-001")
    assert gt.files == ["docs/readme.md", "pkg/a.go", "pkg/b.go"]
    assert gt.expected_edit_files == ["pkg/a.go"]
    assert gt.symbols == [
        {"file": None, "symbol": "Helper", "repo": None},
        {"file": "pkg/a.go", "symbol": "Run", "repo": None},  # the duplicate went
    ]
    assert gt.chunks == [chunk("pkg/a.go", 10, 20, "Run body"), chunk("pkg/b.go", 5, 5)]
    assert gt.confidence == "high"


def test_ground_truth_json_declaring_medium_gives_no_edit_files(tmp_path: Path) -> None:
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "ground_truth.json").write_text(
        json.dumps({"files": ["a.py"], "expected_edit_files": ["a.py"], "confidence": "Medium"})
    )
    gt = load_ground_truth([task])
    assert (gt.files, gt.confidence, gt.expected_edit_files) == (["a.py"], "medium", None)
    assert gt.task_dirs == [task.as_posix()]  # no tasks_root: folders as given


def test_curator_variant_takes_confidence_and_origin_from_meta() -> None:
    gt = load("gt-curator-001")
    assert gt.files == ["src/server.c", "src/server.h"]
    assert (gt.source, gt.confidence, gt.origin) == (
        "tests/ground_truth_agent.json",
        "medium",
        "curator_agent",
    )
    assert gt.chunks == [
        chunk("src/server.c", 100, 140, "accept loop"),
        chunk("src/server.h", 12, 12),
    ]
    # the curator file lists an edit file, but medium confidence is not an edit source
    assert gt.expected_edit_files is None
    assert gt.symbols == [{"file": "src/server.c", "symbol": "serve", "repo": "acme/server"}]


def test_dependency_chain_steps(tmp_path: Path) -> None:
    """The dependency-chain format the real envoy verifier reads: steps[{repo, file, line}]."""
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    steps = [
        {"step": 1, "repo": "istio/istio", "file": "pilot/pkg/networking/core/httproute.go",
         "line": 136, "context": "buildSidecarOutboundHTTPRouteConfig"},
        {"step": 2, "repo": "github.com/envoyproxy/go-control-plane",
         "file": "./envoy/config/route/v3/route.pb.go", "line": 29},
        {"step": 3, "repo": "envoyproxy/data-plane-api",
         "file": "envoy/config/route/v3/route.proto"},
    ]  # fmt: skip
    (task / "tests" / "ground_truth.json").write_text(json.dumps({"steps": steps}))
    gt = load_ground_truth([task])
    assert gt.files == [
        "data-plane-api::envoy/config/route/v3/route.proto",
        "go-control-plane::envoy/config/route/v3/route.pb.go",
        "istio::pilot/pkg/networking/core/httproute.go",
    ]
    assert gt.chunks == [
        chunk("go-control-plane::envoy/config/route/v3/route.pb.go", 29, 29),
        chunk("istio::pilot/pkg/networking/core/httproute.go", 136, 136),
    ]


def test_curator_without_meta_is_medium(tmp_path: Path) -> None:
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "ground_truth_agent.json").write_text('{"files": ["x/y.go"]}')
    gt = load_ground_truth([task])
    assert (gt.files, gt.confidence, gt.origin) == (["x/y.go"], "medium", None)


def test_unknown_meta_confidence_is_reported(tmp_path: Path) -> None:
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "ground_truth_agent.json").write_text('{"files": ["x/y.go"]}')
    (task / "tests" / "ground_truth_meta.json").write_text(
        '{"ground_truth_confidence": "verified"}'
    )
    gt = load_ground_truth([task])
    assert gt.confidence == "medium"
    assert gt.warnings == [
        "tests/ground_truth_meta.json: unknown ground_truth_confidence 'verified'; using 'medium'"
    ]


def test_org_repo_qualified_keys() -> None:
    gt = load("org-crossrepo-001")
    assert gt.files == [
        "data-plane-api::envoy/config/route/v3/route.proto",
        "go-control-plane::envoy/config/route/v3/route.pb.go",
        "istio::pilot/pkg/xds/rds.go",  # "Istio::pilot//pkg/xds/rds.go" was the same file
    ]
    assert gt.symbols == [
        {"file": "pilot/pkg/xds/rds.go", "symbol": "BuildRoutes", "repo": "istio/istio"}
    ]


def test_oracle_answer_wins_and_task_spec_gives_symbols() -> None:
    gt = load("org-oracle-001")
    # django/django and github.com/sg-evals/django--674eda1c are both "django"
    assert gt.files == [
        "django::django/contrib/admin/filters.py",
        "django::tests/admin_filters/tests.py",
    ]
    assert (gt.source, gt.confidence) == ("tests/oracle_answer.json", "high")
    assert gt.symbols == [
        {
            "file": "django/contrib/admin/views/main.py",
            "symbol": "ChangeList",
            "repo": "django/django",
        }
    ]


def test_task_spec_required_files() -> None:
    gt = load("org-taskspec-001")
    assert gt.files == [
        "client-go::tools/cache/reflector.go",
        "kubernetes::pkg/scheduler/scheduler.go",
    ]
    assert (gt.source, gt.confidence) == ("tests/task_spec.json", "high")
    assert gt.symbols == [
        {
            "file": "pkg/scheduler/scheduler.go",
            "symbol": "Scheduler",
            "repo": "github.com/kubernetes/kubernetes",
        }
    ]


# ------------------------------------------------------------------ sources 2 to 6


def test_expected_defects_list() -> None:
    gt = load("defects-list-001")
    assert gt.files == ["app/controllers/users_controller.rb", "app/models/user.rb"]
    assert gt.chunks == [
        chunk("app/controllers/users_controller.rb", 7, 7, "missing_auth"),
        chunk("app/models/user.rb", 40, 52, "sql_injection"),  # listed twice, kept once
    ]
    assert (gt.source, gt.confidence, gt.expected_edit_files) == (
        "tests/expected_defects.json",
        "high",
        None,
    )


def test_expected_defects_wrapper_and_reversed_range() -> None:
    gt = load("defects-wrapped-001")
    assert gt.files == ["src/parser.c"]
    assert gt.chunks == [chunk("src/parser.c", 198, 210, "overflow")]


def test_expected_changes() -> None:
    gt = load("changes-001")
    expected = ["pkg/kubelet/kubelet.go", "staging/src/k8s.io/api/core/v1/types.go"]
    assert gt.files == expected
    assert gt.expected_edit_files == expected
    assert (gt.source, gt.confidence) == ("tests/expected_changes.json", "high")


def test_reference_fix_patch() -> None:
    gt = load("patch-001")
    # the hunk lines "--- a removed ..." / "+++ an added ..." are content, not headers;
    # the new file, the deleted file and the binary-only section all count
    assert gt.files == ["assets/logo.png", "docs/new_page.md", "lib/old.py", "lib/parser.py"]
    assert gt.expected_edit_files == gt.files
    assert gt.chunks == [
        chunk("docs/new_page.md", 1, 3),
        chunk("lib/old.py", 1, 2),  # deleted file: old-side range
        chunk("lib/parser.py", 10, 16, "class Parser:"),
        chunk("lib/parser.py", 51, 52, "def helper():"),
    ]
    assert (gt.source, gt.confidence) == ("tests/reference_fix.patch", "high")


def test_expected_diff_with_timestamps() -> None:
    gt = load("diff-001")
    assert gt.files == ["src/main.rs"]
    assert gt.chunks == [chunk("src/main.rs", 3, 4)]
    assert gt.source == "tests/expected.diff"


def test_solve_sh_gold_patch() -> None:
    gt = load("solve-001")
    assert gt.files == ["django/db/models/query.py"]
    assert gt.expected_edit_files == ["django/db/models/query.py"]
    assert gt.chunks == [chunk("django/db/models/query.py", 100, 103, "class QuerySet:")]
    assert (gt.source, gt.confidence) == ("solution/solve.sh", "medium")


def test_instruction_md_extraction() -> None:
    gt = load("instruction-001")
    assert gt.files == [
        "src/engine/readme.md",
        "src/engine/scheduler.java",
        "src/engine/util/clock.java",
        "tests/engine/test_scheduler.py",
    ]
    assert (gt.source, gt.confidence, gt.expected_edit_files) == ("instruction.md", "medium", None)


def test_test_sh_extraction_is_low_confidence() -> None:
    gt = load("testsh-001")
    assert gt.files == ["src/api/handler.py", "tests/unit/test_api.py"]
    assert (gt.source, gt.confidence) == ("tests/test.sh", "low")


# ------------------------------------------------------------------ chain behaviour


def test_malformed_higher_source_falls_through() -> None:
    gt = load("malformed-001")
    assert gt.files == ["src/ok.py"]
    assert gt.source == "tests/expected_changes.json"
    assert gt.warnings == [
        "tests/ground_truth.json is not valid JSON (Expecting value at line 2); skipped"
    ]


def test_placeholder_only_source_falls_through() -> None:
    gt = load("placeholders-001")
    assert gt.files == ["x/y.py"]
    assert gt.source == "tests/expected.patch"
    assert "dropped 4" in gt.warnings[0]


def test_split_task_merges_folders() -> None:
    dirs = [TASKS / "ccb_fixture" / "split-task-001", TASKS / "csb_fixture" / "split-task-001"]
    gt = load_ground_truth(dirs, tasks_root=TASKS)
    # the curator file in the second folder outranks instruction.md in the first
    assert gt.files == ["cmd/tool/main.go", "internal/cfg/cfg.go"]
    assert (gt.source, gt.confidence, gt.origin) == (
        "tests/ground_truth_agent.json",
        "high",
        "curator_agent",
    )
    assert gt.task_dirs == ["ccb_fixture/split-task-001", "csb_fixture/split-task-001"]


def test_meta_without_file_list_continues_the_chain() -> None:
    dirs = [TASKS / "ccb_fixture" / "meta-only-001", TASKS / "csb_fixture" / "meta-only-001"]
    gt = load_ground_truth(dirs, tasks_root=TASKS)
    assert gt.files == ["pkg/router/router_test.go"]
    assert (gt.source, gt.confidence, gt.origin) == ("tests/test.sh", "low", None)
    assert len(gt.warnings) == 1
    assert "files_count=4" in gt.warnings[0] and "continuing down the chain" in gt.warnings[0]


def test_same_file_in_two_folders_that_differ(tmp_path: Path) -> None:
    first, second = tmp_path / "old" / "t", tmp_path / "new" / "t"
    for folder, files in ((first, ["a.py"]), (second, ["b.py"])):
        (folder / "tests").mkdir(parents=True)
        (folder / "tests" / "ground_truth.json").write_text(json.dumps(files))
    gt = load_ground_truth([first, second], tasks_root=tmp_path)
    assert gt.files == ["a.py"]
    assert gt.warnings == [
        "tests/ground_truth.json differs between task folders old/t, new/t; using the one in old/t"
    ]


def test_edit_files_from_a_lower_source_when_files_come_from_above(tmp_path: Path) -> None:
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "ground_truth.json").write_text('["a.py", "b.py"]')
    (task / "tests" / "expected.patch").write_text(
        "--- a/b.py\n+++ b/b.py\n@@ -4,2 +4,3 @@\n x\n+y\n z\n"
    )
    gt = load_ground_truth([task])
    assert gt.files == ["a.py", "b.py"]
    assert gt.source == "tests/ground_truth.json"
    assert gt.expected_edit_files == ["b.py"]
    # chunks of the lower source are kept for files of the winning source
    assert gt.chunks == [chunk("b.py", 4, 6)]


def test_empty_task_folder_and_no_folders(tmp_path: Path) -> None:
    gt = load_ground_truth([tmp_path])
    assert (gt.files, gt.source, gt.confidence) == ([], None, None)
    assert gt.warnings == []
    assert load_ground_truth([]) == GroundTruth()


def test_missing_task_folder_raises(tmp_path: Path) -> None:
    with pytest.raises(GroundTruthError, match="cannot be read"):
        load_ground_truth([tmp_path / "absent"])


def test_no_caching_between_calls(tmp_path: Path) -> None:
    task = tmp_path / "t"
    (task / "tests").mkdir(parents=True)
    target = task / "tests" / "ground_truth.json"
    target.write_text('["a.py"]')
    assert load_ground_truth([task]).files == ["a.py"]
    target.write_text('["b.py"]')
    assert load_ground_truth([task]).files == ["b.py"]


def test_to_dict_block() -> None:
    block = load("solve-001").to_dict()
    assert block == {
        "files": ["django/db/models/query.py"],
        "symbols": [],
        "source": "solution/solve.sh",
        "confidence": "medium",
        "task_dir": ["fixture_suite/solve-001"],
        "expected_edit_files": ["django/db/models/query.py"],
        "chunks": [chunk("django/db/models/query.py", 100, 103, "class QuerySet:")],
    }
    assert "chunks" not in load("changes-001").to_dict()


# ------------------------------------------------------------------ helpers


def test_parse_unified_diff_pure_deletion_hunk() -> None:
    files, chunks = parse_unified_diff("--- a/k.py\n+++ b/k.py\n@@ -7,2 +6,0 @@\n-a\n-b\n")
    assert files == ["k.py"]
    assert chunks == [chunk("k.py", 6, 6)]


def test_extract_paths_rejects_verifier_and_output_paths() -> None:
    text = (
        "cat /tests/ground_truth.json /logs/verifier/reward.txt /workspace/chain.json "
        "/tmp/x/y.py /app/src/z.py https://github.com/a/b/blob/main/c/d.py "
        "src/**/*.go path/to/file.py {repo}/a/b.py and /workspace/pkg/ok.go"
    )
    assert extract_paths_from_text(text) == ["pkg/ok.go"]


# ------------------------------------------------------------------ real corpus


@needs_corpus
def test_corpus_django_bare_list() -> None:
    gt = load_ground_truth(
        [CORPUS_BENCHMARKS / "ccb_design" / "django-modeladmin-impact-001"],
        tasks_root=CORPUS_BENCHMARKS,
    )
    # the five entries of the file, sorted
    assert gt.files == [
        "django/contrib/admin/options.py",
        "docs/ref/contrib/admin/index.txt",
        "docs/releases/1.5.txt",
        "tests/admin_changelist/admin.py",
        "tests/modeladmin/tests.py",
    ]
    assert (gt.source, gt.confidence, gt.warnings) == ("tests/ground_truth.json", "high", [])
    assert gt.task_dirs == ["ccb_design/django-modeladmin-impact-001"]


@needs_corpus
def test_corpus_envoy_has_no_file_ground_truth() -> None:
    """Only a curator meta (no file list) and a verifier script that names no repo file.

    test.sh mentions /workspace/chain.json (the agent's answer), /tests/ground_truth.json,
    /tests/sgonly_verifier_wrapper.sh, /tmp/.sg_only_mode and /logs/verifier/reward.txt:
    none is a repository file, so the chain ends without files. The real ground truth
    (/tests/ground_truth.json inside the container) is not part of the task definition.
    """
    dirs = [
        CORPUS_BENCHMARKS / "ccb_design" / "envoy-routeconfig-dep-chain-001",
        CORPUS_BENCHMARKS / "csb_sdlc_design" / "envoy-routeconfig-dep-chain-001",
    ]
    gt = load_ground_truth(dirs, tasks_root=CORPUS_BENCHMARKS)
    assert (gt.files, gt.source, gt.confidence) == ([], None, None)
    assert len(gt.warnings) == 1
    assert "ground_truth_confidence=medium" in gt.warnings[0]
    assert "files_count=5" in gt.warnings[0]
    test_sh = (dirs[0] / "tests" / "test.sh").read_text()
    assert extract_paths_from_text(test_sh) == []


@needs_corpus
def test_corpus_llamacpp_has_no_ground_truth() -> None:
    gt = load_ground_truth(
        [CORPUS_BENCHMARKS / "ccb_test" / "llamacpp-context-window-search-001"],
        tasks_root=CORPUS_BENCHMARKS,
    )
    assert (gt.files, gt.source, gt.confidence, gt.chunks) == ([], None, None, None)
    assert (gt.expected_edit_files, gt.symbols, gt.warnings) == (None, [], [])

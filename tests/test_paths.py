"""Tests of retrieval_lib.paths: every normalisation rule, repo names and ground-truth matching."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_lib.paths import (
    GroundTruthMatcher,
    make_key,
    normalize_path,
    repo_short_name,
    split_key,
)

ENVOY_REPOS = ("istio", "go-control-plane", "data-plane-api")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        # workspace roots
        ("/workspace/django/contrib/admin/options.py", "django/contrib/admin/options.py"),
        ("/repo_full/django/db/models/base.py", "django/db/models/base.py"),
        ("/testbed/src/main.c", "src/main.c"),
        ("/workspace", None),
        ("/workspace/", None),
        # duplicate slashes, dot segments, dot-dot
        ("/workspace//django/./x.py", "django/x.py"),
        ("./django//contrib/./admin/options.py", "django/contrib/admin/options.py"),
        ("django/contrib/../db/models.py", "django/db/models.py"),
        ("../outside.py", None),
        ("a/../../outside.py", None),
        # case, whitespace, quotes, backticks
        ("Django/Contrib/Admin/Options.PY", "django/contrib/admin/options.py"),
        ('  "/workspace/tests/modeladmin/tests.py"\n', "tests/modeladmin/tests.py"),
        ("'src/x.py'", "src/x.py"),
        ("`/workspace/tests/admin_changelist/admin.py`", "tests/admin_changelist/admin.py"),
        # Windows
        ("django\\contrib\\admin\\options.py", "django/contrib/admin/options.py"),
        ("C:\\workspace\\django\\x.py", "django/x.py"),
        # directories: the trailing slash goes
        ("django/contrib/", "django/contrib"),
        ("/workspace/istio/pilot/pkg/networking/core/", "istio/pilot/pkg/networking/core"),
        # only a leading root is a root
        ("src/workspace/x.py", "src/workspace/x.py"),
        ("/workspace/workspace/x.py", "workspace/x.py"),
        ("workspace_tools/x.py", "workspace_tools/x.py"),
        ("WORKSPACE", "workspace"),
        ("/workspacefoo/x.py", "workspacefoo/x.py"),
        # diff prefixes are NOT stripped unless the caller says so
        ("a/b/c.py", "a/b/c.py"),
        ("b/django/x.py", "b/django/x.py"),
        # outside the repository
        ("", None),
        ("   ", None),
        ("/dev/null", None),
        ("/tmp/scratch.py", None),
        ("/logs/verifier/reward.txt", None),
        ("/tests/test.sh", None),
        ("/root/.claude/settings.json", None),
        ("/proc/self/status", None),
        ("/usr/lib/python3.11/json/__init__.py", None),
        ("/home/user/notes.md", None),
        ("~/notes.md", None),
        ("/", None),
        # the repository's own tests folder is a repo path
        ("tests/modeladmin/tests.py", "tests/modeladmin/tests.py"),
        # other absolute paths only lose the leading slash
        ("/app/src/x.py", "app/src/x.py"),
        # URL forms
        ("file:///workspace/django/x.py", "django/x.py"),
        ("file://localhost/workspace/x.py", "x.py"),
        (
            "https://sourcegraph.com/github.com/sg-evals/django--674eda1c@674eda1c/-/blob/django/x.py#L10-20",
            "django::django/x.py",
        ),
        (
            "github.com/envoyproxy/go-control-plane/-/blob/envoy/a.pb.go",
            "go-control-plane::envoy/a.pb.go",
        ),
        ("https://github.com/django/django/blob/main/django/x.py?plain=1", "django::django/x.py"),
        (
            "https://raw.githubusercontent.com/ggerganov/llama.cpp/master/src/llama.cpp",
            "llama.cpp::src/llama.cpp",
        ),
        ("https://example.com/page", None),
        # GitHub workflow folders are ordinary repo paths
        (".github/workflows/ci.yml", ".github/workflows/ci.yml"),
        # idempotence on keys
        ("Istio::pilot//x.go", "istio::pilot/x.go"),
        # a pytest node id is not a repo key
        ("tests/x.py::test_foo", "tests/x.py::test_foo"),
    ],
)
def test_normalize_path_rules(raw: str, expected: str | None) -> None:
    assert normalize_path(raw) == expected


def test_none_input() -> None:
    assert normalize_path(None) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a/django/x.py", "django/x.py"),
        ("b/django/x.py", "django/x.py"),
        ("a/b/c.py", "b/c.py"),
        ("/dev/null", None),
        ("a", "a"),  # a bare file named "a" is not a prefix
        ("c/x.py", "c/x.py"),
    ],
)
def test_from_diff_strips_a_b(raw: str, expected: str | None) -> None:
    assert normalize_path(raw, from_diff=True) == expected


def test_multi_repo_workspace_folders() -> None:
    assert (
        normalize_path("/workspace/istio/pilot/pkg/xds/rds.go", workspace_repos=ENVOY_REPOS)
        == "istio::pilot/pkg/xds/rds.go"
    )
    assert (
        normalize_path(
            "/workspace//go-control-plane/./envoy/config/route/v3/route.pb.go",
            workspace_repos=ENVOY_REPOS,
        )
        == "go-control-plane::envoy/config/route/v3/route.pb.go"
    )
    # relative paths are relative to the workspace root
    assert (
        normalize_path(
            "data-plane-api/envoy/config/route/v3/route.proto", workspace_repos=ENVOY_REPOS
        )
        == "data-plane-api::envoy/config/route/v3/route.proto"
    )
    # workspace_repos given as full names are compared by short name
    assert (
        normalize_path(
            "/workspace/istio/x.go", workspace_repos=["github.com/sg-evals/istio--4c1f845d"]
        )
        == "istio::x.go"
    )
    # a file at the workspace root is not in any repository
    assert normalize_path("/workspace/chain.json", workspace_repos=ENVOY_REPOS) == "chain.json"
    # the repository folder itself names no file
    assert normalize_path("/workspace/istio", workspace_repos=ENVOY_REPOS) is None


def test_repo_argument_qualifies_the_key() -> None:
    assert (
        normalize_path(
            "django/contrib/admin/options.py", repo="github.com/sg-evals/django--674eda1c"
        )
        == "django::django/contrib/admin/options.py"
    )
    # the repo argument never strips a folder: django/django has a django/ folder
    assert normalize_path("/workspace/django/x.py", repo="django/django") == "django::django/x.py"
    # a workspace repo folder wins over the repo argument
    assert (
        normalize_path("/workspace/istio/x.go", repo="other", workspace_repos=ENVOY_REPOS)
        == "istio::x.go"
    )
    # an explicit repo wins over the repo named by a URL
    assert (
        normalize_path(
            "github.com/ggerganov/llama.cpp/-/blob/src/a.cpp", repo="sg-evals/llama.cpp--56399714"
        )
        == "llama.cpp::src/a.cpp"
    )


def test_extra_roots() -> None:
    assert normalize_path("/app/src/x.py", extra_roots=["/app"]) == "src/x.py"
    assert normalize_path("/srv/checkout/x.py", extra_roots=["/srv/checkout/"]) == "x.py"


@pytest.mark.parametrize(
    ("repo", "expected"),
    [
        ("github.com/sg-evals/django--674eda1c", "django"),
        ("github.com/envoyproxy/go-control-plane", "go-control-plane"),
        ("django/django", "django"),
        ("github.com/sg-evals/django--674eda1c@674eda1c03a3187905f48afee0f15226aa62fdf3", "django"),
        ("github.com/sg-evals/llama.cpp--56399714", "llama.cpp"),
        ("https://github.com/Istio/Istio.git", "istio"),
        ("Django", "django"),
        ("github.com/org/my--repo", "my--repo"),  # "--" not followed by hex stays
        # a commit suffix has 6 to 40 lowercase hex digits: 6 is one, 5 is part of the name
        ("github.com/sg-evals/django--674eda", "django"),
        ("github.com/sg-evals/django--674ed", "django--674ed"),
        ("github.com/sg-evals/django--" + "a" * 40, "django"),
        ("github.com/sg-evals/django--" + "a" * 41, "django--" + "a" * 41),
        ("", ""),
    ],
)
def test_repo_short_name(repo: str, expected: str) -> None:
    assert repo_short_name(repo) == expected


def test_split_and_make_key() -> None:
    assert split_key("istio::pilot/x.go") == ("istio", "pilot/x.go")
    assert split_key("pilot/x.go") == (None, "pilot/x.go")
    assert split_key("llama.cpp::src/a.cpp") == ("llama.cpp", "src/a.cpp")
    assert split_key("tests/x.py::test_foo") == (None, "tests/x.py::test_foo")
    # a host-qualified repository before "::" is a key, not a pytest node id
    assert split_key("github.com/org/repo::x.py") == ("github.com/org/repo", "x.py")
    assert normalize_path("github.com/org/repo::x.py") == "repo::x.py"
    assert make_key("istio", "a.go") == "istio::a.go"
    assert make_key(None, "a.go") == "a.go"


class TestGroundTruthMatcher:
    def test_exact(self) -> None:
        matcher = GroundTruthMatcher(["django/x.py", "tests/y.py"])
        assert matcher.match("django/x.py") == "django/x.py"
        assert matcher.match("django/z.py") is None

    def test_qualified_target_matches_single_repo_plain_gt(self) -> None:
        matcher = GroundTruthMatcher(["django/contrib/admin/options.py"])
        assert matcher.match("django::django/contrib/admin/options.py") == (
            "django/contrib/admin/options.py"
        )
        # any repo is accepted without a repo restriction (mirrors are renamed)
        assert matcher.match("llama.cpp::django/contrib/admin/options.py") == (
            "django/contrib/admin/options.py"
        )

    def test_repo_restriction(self) -> None:
        matcher = GroundTruthMatcher(["django/x.py"], repos=["django/django"])
        assert matcher.match("django::django/x.py") == "django/x.py"
        assert matcher.match("flask::django/x.py") is None

    def test_qualified_target_does_not_match_other_repo(self) -> None:
        matcher = GroundTruthMatcher(["istio::pilot/x.go", "go-control-plane::envoy/a.go"])
        assert matcher.match("istio::pilot/x.go") == "istio::pilot/x.go"
        assert matcher.match("go-control-plane::pilot/x.go") is None

    def test_qualified_target_vs_plain_gt_in_multi_repo_gt(self) -> None:
        # the plain key is ambiguous when the GT names two repositories
        matcher = GroundTruthMatcher(["readme.md", "istio::a.go", "go-control-plane::b.go"])
        assert matcher.match("istio::readme.md") is None
        # ... but fine when the only named repository is the target's
        matcher = GroundTruthMatcher(["readme.md", "istio::a.go"])
        assert matcher.match("istio::readme.md") == "readme.md"
        assert matcher.match("envoy::readme.md") is None

    def test_plain_target_matches_unambiguous_qualified_gt(self) -> None:
        matcher = GroundTruthMatcher(["istio::pilot/x.go", "go-control-plane::envoy/a.go"])
        assert matcher.match("pilot/x.go") == "istio::pilot/x.go"
        assert matcher.match("envoy/a.go") == "go-control-plane::envoy/a.go"

    def test_plain_target_ambiguous(self) -> None:
        matcher = GroundTruthMatcher(["istio::go.mod", "go-control-plane::go.mod"])
        assert matcher.match("go.mod") is None
        assert matcher.match("istio::go.mod") == "istio::go.mod"

    def test_plain_target_with_repo_folder(self) -> None:
        matcher = GroundTruthMatcher(["istio::go.mod", "go-control-plane::go.mod"])
        assert matcher.match("istio/go.mod") == "istio::go.mod"
        assert matcher.match("other/go.mod") is None

    def test_empty_ground_truth(self) -> None:
        matcher = GroundTruthMatcher([])
        assert len(matcher) == 0
        assert matcher.match("x.py") is None
        assert matcher.match("r::x.py") is None

    def test_contains(self) -> None:
        matcher = GroundTruthMatcher(["a.py", "b.py"])
        assert "r::a.py" in matcher
        assert "c.py" not in matcher
        assert matcher.keys == frozenset({"a.py", "b.py"})

    def test_qualified_key_matches_its_unqualified_ground_truth(self) -> None:
        matcher = GroundTruthMatcher(["tests/t.py"])
        assert matcher.match("django::tests/t.py") == "tests/t.py"
        assert matcher.match("tests/u.py") is None


def test_gt_and_tool_paths_meet() -> None:
    """The three ways the django ground truth appears in real traces all give its key."""
    gt_key = normalize_path("django/contrib/admin/options.py")
    matcher = GroundTruthMatcher([gt_key])
    local_read = normalize_path("/workspace/django/contrib/admin/options.py")
    mcp_read = normalize_path(
        "django/contrib/admin/options.py", repo="github.com/sg-evals/django--674eda1c"
    )
    diff_path = normalize_path("b/django/contrib/admin/options.py", from_diff=True)
    assert [matcher.match(k) for k in (local_read, mcp_read, diff_path)] == [gt_key] * 3


_segment = st.text(alphabet="abcXYZ_-.09", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)


@given(
    st.lists(_segment, min_size=1, max_size=5),
    st.sampled_from(["", "/workspace/", "./", "/testbed//", "file:///repo_full/"]),
)
def test_normalize_is_idempotent(segments: list[str], prefix: str) -> None:
    key = normalize_path(prefix + "/".join(segments))
    assert key == "/".join(segments).lower()
    assert normalize_path(key) == key


@pytest.mark.parametrize(
    ("raw", "repo", "expected"),
    [
        ("::a.py", None, "a.py"),  # empty repo part of a key
        ("a.py", "::", "a.py"),  # a repo "name" that would make the key ambiguous
        ("a.py", "/", "a.py"),  # a repo that shortens to nothing
        ("a.py", "github.com/o/r", "r::a.py"),
    ],
)
def test_degenerate_repo_names_give_plain_keys(raw: str, repo: str | None, expected: str) -> None:
    assert normalize_path(raw, repo=repo) == expected

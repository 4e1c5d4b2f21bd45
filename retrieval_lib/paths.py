"""Canonical path keys: the one representation in which tool targets and ground truth meet.

Every file a tool touches and every ground-truth file is reduced to a *key*:

* a repo-relative path, lowercased, ``/``-separated, without ``.`` segments, duplicate or
  trailing slashes (``django/contrib/admin/options.py``), or
* in a multi-repo workspace, ``"<repo_short>::<path>"`` (``istio::pilot/pkg/xds/rds.go``),
  where ``<repo_short>`` is :func:`repo_short_name` of the repository.

:func:`normalize_path` builds keys, :func:`split_key` takes them apart, and
:class:`GroundTruthMatcher` decides which ground-truth key (if any) a target key stands for.

Rules of :func:`normalize_path`, in the order they apply:

1. ``None``, empty and whitespace-only strings, and ``/dev/null`` give ``None``.
2. Surrounding whitespace, quotes (``'``, ``"``) and backticks are stripped; backslashes
   become ``/``; a Windows drive (``C:``) is dropped; the result is lowercased.
3. URL forms are unwrapped: ``file://<path>``; Sourcegraph
   ``[https://][sourcegraph.host/]<host>/<org>/<repo>[@rev]/-/blob/<path>``; GitHub
   ``[https://]github.com/<org>/<repo>/(blob|tree|raw)/<ref>/<path>`` and
   ``raw.githubusercontent.com/<org>/<repo>/<ref>/<path>``. The repository named by the URL
   qualifies the key unless the caller passes ``repo``. ``#fragment`` and ``?query`` go.
   Any other URL (``https://example.com/x``) gives ``None``.
4. ``.`` and empty segments are dropped and ``..`` resolved; a path that climbs above its
   start (``../x.py``) is outside the repository and gives ``None``.
5. Absolute paths under a workspace root (:data:`WORKSPACE_ROOTS`: ``/workspace``,
   ``/repo_full``, ``/testbed``, plus any ``extra_roots`` of the caller, e.g. ``/app``) lose
   that root; the bare root itself (``/workspace``) gives ``None``. Absolute paths whose
   first folder is in :data:`NON_REPO_ROOTS` (``/tmp``, ``/logs``, ``/tests``, ``/root``,
   ``/proc``, ...: the verifier's, the agent's and the OS's folders) and ``~/...`` give
   ``None``. Any other absolute path only loses its leading ``/``.
   Only a *leading* root counts: ``src/workspace/x.py`` stays ``src/workspace/x.py``, and
   the relative ``tests/...`` of a repository is kept (only the absolute ``/tests/`` is the
   verifier's folder).
6. With ``from_diff=True`` (paths read from a unified diff) a leading ``a/`` or ``b/`` goes.
   Without it ``a/b/c.py`` is a real path and stays.
7. Multi-repo: when the first folder is one of ``workspace_repos`` (compared by
   :func:`repo_short_name`), the key becomes ``"<that folder>::<rest>"``. Callers pass
   ``workspace_repos`` only for workspaces that hold several repositories in sub-folders;
   relative paths are taken as relative to the workspace root (the agent's working folder).
   Otherwise, when ``repo`` is given, the key is ``"<repo_short_name(repo)>::<path>"``.
   A path that names only the repository folder (``/workspace/istio``) gives ``None``.
8. Input that already is a key (``django::x.py``) normalises to itself: the function is
   idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from functools import lru_cache

__all__ = [
    "KEY_SEPARATOR",
    "NON_REPO_ROOTS",
    "WORKSPACE_ROOTS",
    "GroundTruthMatcher",
    "make_key",
    "normalize_path",
    "repo_short_name",
    "split_key",
]

KEY_SEPARATOR = "::"
"""Separator between the short repository name and the path in a multi-repo key."""

WORKSPACE_ROOTS: tuple[str, ...] = ("/workspace", "/repo_full", "/testbed")
"""Absolute folders that hold the repository checkout in benchmark containers."""

NON_REPO_ROOTS: frozenset[str] = frozenset(
    {
        # verifier and harness folders
        "tests",
        "logs",
        "utils",
        "installed-agent",
        "oracle",
        # agent home and scratch
        "tmp",
        "root",
        "home",
        # operating system
        "proc",
        "sys",
        "dev",
        "etc",
        "usr",
        "var",
        "bin",
        "sbin",
        "lib",
        "lib64",
        "opt",
        "mnt",
        "run",
        "boot",
        "nix",
    }
)
"""First folders of absolute paths that are clearly not repository files (give ``None``)."""

_QUOTE_CHARS = " \t\r\n\"'`"
_DRIVE_RE = re.compile(r"^[a-z]:/")
_SOURCEGRAPH_URL_RE = re.compile(
    r"^(?:[a-z][a-z0-9+.-]*://)?(?:[^/]*sourcegraph[^/]*/)?"
    r"(?P<repo>[^@#?]+?)(?:@[^/]+)?/-/(?:blob|tree|raw)/(?P<path>[^#?]*)"
)
_GITHUB_URL_RE = re.compile(
    r"^(?:https?://)?(?:www\.)?(?P<repo>github\.com/[^/]+/[^/]+)/(?:blob|tree|raw)/[^/]+/"
    r"(?P<path>[^#?]*)"
)
_GITHUB_RAW_RE = re.compile(
    r"^(?:https?://)?raw\.githubusercontent\.com/(?P<org>[^/]+)/(?P<name>[^/]+)/[^/]+/"
    r"(?P<path>[^#?]*)"
)
_COMMIT_SUFFIX_RE = re.compile(r"--[0-9a-f]{6,40}$")


@lru_cache(maxsize=4096)
def repo_short_name(repo: str) -> str:
    """Short, lowercase name of a repository: the last path part without host, org or revision.

    Strips a URL scheme, ``.git``, an ``@<revision>`` and the ``--<hex commit>`` suffix of
    mirrored repositories (``django--674eda1c``).

    Parameters
    ----------
    repo
        ``github.com/<org>/<name>``, ``<org>/<name>``, a URL or a bare name.

    Returns
    -------
    str
        The short name, ``""`` for an empty input.

    Examples
    --------
    >>> repo_short_name("github.com/sg-evals/django--674eda1c")
    'django'
    >>> repo_short_name("github.com/envoyproxy/go-control-plane")
    'go-control-plane'
    >>> repo_short_name("django/django")
    'django'
    """
    name = repo.strip().strip(_QUOTE_CHARS).replace("\\", "/").lower()
    name = name.split("://", 1)[-1].rstrip("/")
    name = name.rsplit("/", 1)[-1]
    name = name.split("@", 1)[0].removesuffix(".git")
    return _COMMIT_SUFFIX_RE.sub("", name)


def _looks_like_repo(prefix: str) -> bool:
    """Whether the text before ``::`` names a repository (not e.g. a pytest node's file)."""
    if not prefix:
        return False
    if "/" not in prefix:
        return True
    first = prefix.split("/", 1)[0]
    # host-qualified names such as github.com/org/repo
    return "." in first and prefix.count("/") <= 3


def split_key(key: str) -> tuple[str | None, str]:
    """Split a path key into ``(repo_short, path)``; ``repo_short`` is ``None`` for plain keys.

    Examples
    --------
    >>> split_key("istio::pilot/pkg/xds/rds.go")
    ('istio', 'pilot/pkg/xds/rds.go')
    >>> split_key("django/contrib/admin/options.py")
    (None, 'django/contrib/admin/options.py')
    """
    repo, sep, path = key.partition(KEY_SEPARATOR)
    if not sep or not _looks_like_repo(repo):
        return None, key
    return repo, path


def make_key(repo: str | None, path: str) -> str:
    """Join an (already normalised) short repo name and path into a key.

    Examples
    --------
    >>> make_key("istio", "pilot/x.go"), make_key(None, "pilot/x.go")
    ('istio::pilot/x.go', 'pilot/x.go')
    """
    return f"{repo}{KEY_SEPARATOR}{path}" if repo else path


def _unwrap_url(text: str) -> tuple[str, str | None]:
    """Return ``(path, repo)`` for URL forms, ``(text, None)`` for anything else."""
    if text.startswith("file://"):
        rest = text[len("file://") :]
        if rest.startswith("localhost/"):
            rest = rest[len("localhost") :]
        return rest, None
    if "/-/" in text:
        match = _SOURCEGRAPH_URL_RE.match(text)
        if match:
            return match["path"], match["repo"]
    if "github" in text:
        match = _GITHUB_URL_RE.match(text)
        if match:
            return match["path"], match["repo"]
        match = _GITHUB_RAW_RE.match(text)
        if match:
            return match["path"], f"github.com/{match['org']}/{match['name']}"
    return text, None


def _clean_segments(path: str) -> list[str] | None:
    """Split on ``/``, drop empty and ``.`` segments, resolve ``..`` (None if it escapes)."""
    segments: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not segments:
                return None
            segments.pop()
            continue
        segments.append(segment)
    return segments


def _root_segments(roots: Iterable[str]) -> list[list[str]]:
    cleaned = []
    for root in roots:
        segments = _clean_segments(root.strip().replace("\\", "/").lower())
        if segments:
            cleaned.append(segments)
    return cleaned


_DEFAULT_ROOTS = _root_segments(WORKSPACE_ROOTS)


def _inside_checkout(segments: list[str], extra_roots: Collection[str]) -> list[str] | None:
    """An absolute path's segments below its checkout root (rule 5 of the module
    docstring); None for a root itself or a folder that holds no repository files."""
    roots = _DEFAULT_ROOTS + _root_segments(extra_roots) if extra_roots else _DEFAULT_ROOTS
    for root in roots:
        if segments[: len(root)] == root:
            return segments[len(root) :] or None
    if segments[0] in NON_REPO_ROOTS:
        return None
    return segments


def normalize_path(
    raw: str | None,
    *,
    repo: str | None = None,
    workspace_repos: Collection[str] = (),
    from_diff: bool = False,
    extra_roots: Collection[str] = (),
) -> str | None:
    """Normalise a raw path (tool argument, tool output, ground-truth entry) into a key.

    The rules are listed in the module docstring.

    Parameters
    ----------
    raw
        The path as written by a tool, a trace or a task definition.
    repo
        Repository the path belongs to when the source says so separately (MCP tools give
        ``repo`` and ``path``); the key is then ``"<repo_short>::<path>"``.
    workspace_repos
        Repositories checked out side by side under the workspace root (multi-repo tasks).
    from_diff
        ``True`` when ``raw`` comes from a unified diff, so ``a/`` / ``b/`` are prefixes.
    extra_roots
        Further absolute checkout roots to strip (e.g. ``("/app",)``).

    Returns
    -------
    str or None
        The key, or ``None`` when the input names no repository file.

    Examples
    --------
    >>> normalize_path("/workspace//Django/./contrib/admin/options.py ")
    'django/contrib/admin/options.py'
    >>> normalize_path("/workspace/istio/pilot/x.go", workspace_repos=["istio", "go-control-plane"])
    'istio::pilot/x.go'
    >>> normalize_path("pilot/x.go", repo="github.com/sg-evals/istio--4c1f845d")
    'istio::pilot/x.go'
    >>> normalize_path("b/django/db/models.py", from_diff=True)
    'django/db/models.py'
    >>> normalize_path("/tmp/scratch.py") is None
    True
    """
    if raw is None:
        return None
    text = raw.strip(_QUOTE_CHARS)
    if not text:
        return None
    text = text.replace("\\", "/").lower()
    if text == "/dev/null":
        return None

    if text.startswith(KEY_SEPARATOR):
        text = text[len(KEY_SEPARATOR) :]  # a key with an empty repo part
    key_repo, key_path = split_key(text)
    if key_repo is not None:
        # already a key (idempotence); the key's own repo wins over the caller's
        repo, text = key_repo, key_path
    elif "://" in text or "/-/" in text or "github" in text:
        text, url_repo = _unwrap_url(text)
        if "://" in text:
            return None  # a web address, not a file
        if repo is None:
            repo = url_repo

    if _DRIVE_RE.match(text):
        text = text[2:]
    if text.startswith("~"):
        return None
    is_absolute = text.startswith("/")
    segments = _clean_segments(text)
    if not segments:
        return None

    if is_absolute:
        inside = _inside_checkout(segments, extra_roots)
        if inside is None:
            return None
        segments = inside
    elif from_diff and len(segments) > 1 and segments[0] in ("a", "b"):
        segments = segments[1:]

    if workspace_repos and segments[0] in {repo_short_name(n) for n in workspace_repos}:
        if len(segments) == 1:
            return None  # the repository folder itself, not a file in it
        return make_key(segments[0], "/".join(segments[1:]))

    path = "/".join(segments)
    short = repo_short_name(repo) if repo else ""
    if short and KEY_SEPARATOR not in short:
        return make_key(short, path)
    return path  # no repository, or a "name" that would make the key ambiguous


class GroundTruthMatcher:
    """Map target keys to the ground-truth key they stand for, with dictionary lookups only.

    Matching rules, tried in order:

    1. exact key equality;
    2. a ``repo::path`` target matches a plain ``path`` ground-truth key when the ground
       truth is single-repo: no qualified ground-truth key names another repository (and,
       when ``repos`` is given, ``repo`` is one of them);
    3. a plain ``path`` target matches a ``repo::path`` ground-truth key when exactly one
       ground-truth key has that path (otherwise it is ambiguous and does not match);
    4. a plain target whose first folder is a ground-truth repo (``istio/pilot/x.go``, as
       read inside ``/workspace/istio/`` without ``workspace_repos``) matches
       ``istio::pilot/x.go``.

    Parameters
    ----------
    gt_keys
        Normalised ground-truth keys.
    repos
        Optional repositories of a single-repo task; when given, rule 2 requires the
        target's repo to be one of them (compared by :func:`repo_short_name`).

    Examples
    --------
    >>> m = GroundTruthMatcher(["django/contrib/admin/options.py"])
    >>> m.match("django::django/contrib/admin/options.py")
    'django/contrib/admin/options.py'
    >>> m2 = GroundTruthMatcher(["istio::pilot/x.go", "go-control-plane::pilot/x.go"])
    >>> m2.match("pilot/x.go") is None, m2.match("istio/pilot/x.go")
    (True, 'istio::pilot/x.go')
    """

    __slots__ = ("_exact", "_plain_by_path", "_qualified_by_path", "_gt_repos", "_allowed")

    def __init__(self, gt_keys: Iterable[str], *, repos: Collection[str] | None = None) -> None:
        self._exact: frozenset[str] = frozenset(gt_keys)
        self._plain_by_path: dict[str, str] = {}
        qualified: dict[str, list[str]] = {}
        gt_repos: set[str] = set()
        for key in sorted(self._exact):
            repo, path = split_key(key)
            if repo is None:
                self._plain_by_path[path] = key
            else:
                gt_repos.add(repo)
                qualified.setdefault(path, []).append(key)
        # a plain path also in the ground truth as a plain key never gets here (rule 1)
        self._qualified_by_path: dict[str, str] = {
            path: keys[0] for path, keys in qualified.items() if len(keys) == 1
        }
        self._gt_repos: frozenset[str] = frozenset(gt_repos)
        self._allowed: frozenset[str] | None = (
            frozenset(repo_short_name(r) for r in repos) if repos is not None else None
        )

    @property
    def keys(self) -> frozenset[str]:
        """The ground-truth keys."""
        return self._exact

    def __len__(self) -> int:
        return len(self._exact)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.match(key) is not None

    def match(self, key: str) -> str | None:
        """Return the ground-truth key ``key`` matches, or ``None``."""
        if key in self._exact:
            return key
        repo, path = split_key(key)
        if repo is not None:
            plain = self._plain_by_path.get(path)
            if plain is None or (self._gt_repos and not self._gt_repos <= {repo}):
                return None
            if self._allowed is not None and repo not in self._allowed:
                return None
            return plain
        found = self._qualified_by_path.get(path)
        if found is not None:
            return found
        if self._gt_repos:
            first, sep, rest = path.partition("/")
            if sep and first in self._gt_repos:
                candidate = make_key(first, rest)
                if candidate in self._exact:
                    return candidate
        return None

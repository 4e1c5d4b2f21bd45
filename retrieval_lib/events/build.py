"""Parsed tool calls to retrieval events (``docs/contracts.md`` §1 ``events`` and ``summary``).

:func:`build_events` turns every tool call of a :class:`~retrieval_lib.traces.model.ParsedTrace`
into one event dict, in trace order; :func:`summarize_events` computes the document's
``summary`` block.

Where target files come from
----------------------------
Arguments (``target_sources`` ``"argument"``):

* ``Read`` ``file_path`` (``offset``/``limit`` give ``file_ranges``), ``Write``/``Edit``/
  ``MultiEdit`` ``file_path``, ``NotebookEdit`` ``notebook_path``;
* ``Grep`` ``path`` when it names a file (an extension, no glob);
* MCP ``read_file``, ``find_references`` and ``go_to_definition`` ``path`` with ``repo``
  (``startLine``/``endLine`` of ``read_file`` give a range);
* read-only Bash commands (:mod:`retrieval_lib.traces.shell`): the files of ``cat``,
  ``sed -n``, ``head`` ..., and the file operands of ``grep``/``find``/``ls``.

Files a Bash command writes through the shell (``echo x > f``, ``tee``, ``cp``/``mv``
destinations, ``touch``, ``cat > f <<EOF``; see
:class:`~retrieval_lib.traces.shell.ShellCommand`) go to the event's ``created_files``,
never to its targets, and only when the call did not fail. A result line naming a file the
same command created is dropped from the targets. The event keeps the category of its
read-only command, or ``other``.

Results (``"result"``), never from an error result:

* ``Grep``: the structured result's ``filenames`` when present, else the text:
  ``files_with_matches`` lines, ``content`` lines ``path:N:text`` / ``path-N-text`` (with
  per-file line ranges), ``count`` lines ``path:N``;
* ``Glob``: one path a line (``filenames`` when structured);
* MCP tools of a retrieval category: the JSON result parsed structurally. Every object
  with a ``file``/``path``/``filePath``/``newPath`` string names a file (``isDirectory`` entries and
  paths ending in ``/`` are folders and skipped), qualified by the nearest ``repo``/
  ``repository``; its ``chunks[].startLine/endLine`` are ranges. This covers
  ``list_files`` (``files[].path``), ``keyword_search``/``nls_search`` (``blocks[].file``),
  ``find_references``/``go_to_definition`` (``fileBlocks[].file``) and any result of
  commit, diff or deep search that names files in fields; prose is never mined.
  Non-JSON results contribute nothing;
* Bash: the standard output of a command whose output is a file list (``find``,
  ``grep -l``, ``grep -rn``, ``rg --files`` ...; see ``ShellRead.output_format``).

Symbols (``target_symbols``): the ``symbol`` argument of MCP symbol navigation, and the
pattern of a ``Grep`` call or shell ``grep``/``rg`` when it is a plain identifier.

Every raw path goes through :func:`retrieval_lib.paths.normalize_path` once per task and
then through :class:`retrieval_lib.paths.GroundTruthMatcher`, so that a target that stands
for a ground-truth file is written exactly as the ground-truth key.

Why one module of this length: one short rule per tool for where its target files come
from (the list above), sharing the path normalisation and the merging of line spans.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, TypeGuard

import orjson

from retrieval_lib.io import parse_iso_time
from retrieval_lib.paths import GroundTruthMatcher, normalize_path, split_key
from retrieval_lib.traces.model import ParsedTrace, ToolCall
from retrieval_lib.traces.shell import ShellRead, analyze_shell_command, looks_like_file
from retrieval_lib.traces.tools import TOOL_CATEGORIES, classify_tool

if TYPE_CHECKING:
    from retrieval_lib.ground_truth import GroundTruth

__all__ = ["SALIENT_ARGUMENTS", "build_events", "summarize_events"]

#: Argument names copied into an event's ``arguments`` (everything else, e.g. file
#: contents of ``Write``, stays in the trace).
SALIENT_ARGUMENTS: Final[tuple[str, ...]] = (
    "command",
    "endLine",
    "file_path",
    "glob",
    "limit",
    "notebook_path",
    "offset",
    "output_mode",
    "path",
    "pattern",
    "query",
    "repo",
    "repos",
    "startLine",
    "symbol",
)
_SALIENT_NAMES: Final = frozenset(SALIENT_ARGUMENTS)
#: Longest string argument kept verbatim; longer ones (heredoc scripts) are cut.
MAX_ARGUMENT_CHARS: Final = 2000
#: Line numbers above this are not believed (no source file has a billion lines); it also
#: keeps every number within the 64-bit integers the document writer stores.
MAX_LINE_NUMBER: Final = 1_000_000_000

_IDENTIFIER_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_FOUND_HEADER_RE: Final = re.compile(r"^Found \d+ ")  # "Found 3 files", "Found 9 total ..."
_MATCH_LINE_RE: Final = re.compile(r":(\d+):")
_CONTEXT_LINE_RE: Final = re.compile(r"-(\d+)-")
_BARE_LINES_RE: Final = re.compile(r"^(\d+)[:-]", re.MULTILINE)
# "path:N:text" (a match) or "path-N-text" (a context line), path = shortest prefix. The
# prefix grows a whole run of non-separators at a time (the lookahead + backreference is
# an atomic group, which Python 3.10 lacks), not a character at a time.
_NUMBERED_LINE_RE: Final = re.compile(r"^((?:(?=([^\n:-]+))\2|[:-])+?)([:-])(\d+)\3", re.MULTILINE)
# Fields that name a file in MCP results; the first present in an object wins (a
# diff's newPath before its oldPath).
_PATH_KEYS: Final = ("file", "path", "filePath", "file_path", "filename", "newPath", "oldPath")
_REPO_KEYS: Final = ("repo", "repository", "repoName")
# ``\s`` matches exactly the characters ``str.isspace`` calls whitespace
_WHITESPACE_RE: Final = re.compile(r"\s")
_MAX_JSON_DEPTH: Final = 64


#: Raw paths longer than this are normalised without being remembered.
_MEMO_MAX_CHARS: Final = 512
#: Distinct raw paths remembered per task; any further ones are normalised every time.
_MEMO_MAX_PATHS: Final = 256


#: :func:`analyze_shell_command` remembered (pure; agents repeat commands); only read.
_analyzed: Final = functools.lru_cache(maxsize=4096)(analyze_shell_command)


@functools.lru_cache(maxsize=16384)
def _normalized(raw: str, repo: str | None, workspace_repos: tuple[str, ...]) -> str | None:
    """:func:`normalize_path` remembered across the trials of a process: the trials of a
    task (and the tasks of a repository) name the same files again and again. A pure
    function of its arguments, so remembering it changes no key."""
    return normalize_path(raw, repo=repo, workspace_repos=workspace_repos)


class _TaskPaths(dict[tuple[str, str | None], str | None]):
    """The keys of a task's raw paths: ``paths[raw, repo]``, computed on first lookup.

    One key style per document: repo-qualified keys (``repo::path``) only when the task
    is multi-repo (its ground truth names repos, or repo folders sit side by side in
    the workspace). Otherwise an MCP target's repo is dropped, so the same file reached
    by a local tool and by an MCP tool is one key, matched or not.
    """

    __slots__ = ("_matcher", "_qualify_repos", "_workspace_repos")

    def __init__(self, gt_keys: Iterable[str], workspace_repos: Collection[str]) -> None:
        super().__init__()
        gt_keys = list(gt_keys)
        self._matcher = GroundTruthMatcher(gt_keys)
        self._workspace_repos = tuple(workspace_repos)
        self._qualify_repos = bool(self._workspace_repos) or any(split_key(k)[0] for k in gt_keys)

    def __missing__(self, raw_repo: tuple[str, str | None]) -> str | None:
        raw, repo = raw_repo
        if len(raw) <= _MEMO_MAX_CHARS:
            key = _normalized(raw, repo or None, self._workspace_repos)
        else:
            key = normalize_path(raw, repo=repo or None, workspace_repos=self._workspace_repos)
        if key is not None:
            if not self._qualify_repos:
                key = split_key(key)[1]
            key = self._matcher.match(key) or key
        if len(raw) <= _MEMO_MAX_CHARS and len(self) < _MEMO_MAX_PATHS:
            self[raw_repo] = key
        return key


#: One :class:`_TaskPaths` per ground truth and workspace, i.e. per task: its trials (in
#: every run of a process) name the same files, each normalised and matched once. At
#: most 512 tasks x 256 paths are kept.
_task_paths: Final = functools.lru_cache(maxsize=512)(_TaskPaths)


class _Targets:
    """Target files (first-seen order, first source wins) and their line ranges."""

    __slots__ = ("files", "ranges", "_paths")

    def __init__(self, paths: _TaskPaths) -> None:
        self._paths = paths
        self.files: dict[str, str] = {}
        self.ranges: dict[str, list[tuple[int, int]]] = {}

    def key(self, raw: str) -> str | None:
        """The key of a raw path, without adding it."""
        return self._paths[raw, None]

    def add(self, raw: Any, source: str, repo: Any = None) -> str | None:
        if not isinstance(raw, str) or not raw:
            return None
        key = self._paths[raw, repo if isinstance(repo, str) else None]
        if key is not None:
            self.files.setdefault(key, source)
        return key

    def add_range(self, key: str | None, start: Any, end: Any) -> None:
        """Add lines ``start..end`` (1-based, inclusive) read or hit in file ``key``.

        Line numbers written as decimal strings (``"12"``, some MCP servers) are read;
        anything else, an empty span or a start beyond :data:`MAX_LINE_NUMBER` is ignored,
        and an end beyond it is cut there (a huge ``limit`` means "to the end").
        """
        if key is None:
            return
        if type(start) is not int or type(end) is not int:
            start, end = _line_number(start), _line_number(end)
            if start is None or end is None:
                return
        if 1 <= start <= end and start <= MAX_LINE_NUMBER:
            self.ranges.setdefault(key, []).append((start, min(end, MAX_LINE_NUMBER)))

    def add_lines(self, key: str, numbers: list[int]) -> None:
        """Add single lines (positive ints from a regex match) as one-line spans."""
        self.ranges.setdefault(key, []).extend((n, n) for n in numbers if n >= 1)

    def file_ranges(self) -> list[dict[str, Any]]:
        """Each file's spans, sorted, overlapping or adjacent ones merged."""
        out: list[dict[str, Any]] = []
        for key in self.files:
            spans = self.ranges.get(key)
            if not spans:
                continue
            spans.sort()
            start, end = spans[0]
            for span_start, span_end in spans:
                if span_start > end + 1:
                    out.append({"file": key, "line_start": start, "line_end": end})
                    start, end = span_start, span_end
                elif span_end > end:
                    end = span_end
            out.append({"file": key, "line_start": start, "line_end": end})
        return out


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _line_number(value: Any) -> int | None:
    if isinstance(value, int):
        return None if isinstance(value, bool) else value
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 12:
        return int(value)
    return None


def _salient_arguments(
    arguments: dict[str, Any], dropped: list[str] | None = None
) -> dict[str, Any]:
    """The arguments worth keeping in an event, as JSON-safe copies.

    A value the document cannot hold (nested deeper than the writer follows, an integer
    beyond 64 bits) becomes ``None`` and its name and reason go to ``dropped``: one bad
    argument costs that argument, never the event or the trial.
    """
    out: dict[str, Any] = {}
    for name, value in arguments.items():
        if name not in _SALIENT_NAMES:
            continue
        if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
            value = f"{value[:MAX_ARGUMENT_CHARS]}…[{len(value) - MAX_ARGUMENT_CHARS} chars cut]"
        elif type(value) is int and -(2**63) <= value < 2**64:
            pass  # what orjson writes as it is; any other int is cut below
        elif isinstance(value, (dict, list, int)) and not isinstance(value, bool):
            # nested values are rare here (repos lists); keep JSON-safe copies of scalars
            try:
                value = orjson.loads(orjson.dumps(value, default=str))
            except orjson.JSONEncodeError as exc:  # "Recursion limit reached", huge int
                if dropped is not None:
                    dropped.append(f"{name} ({exc})")
                value = None
        out[name] = value
    return out


# --------------------------------------------------------------------------- local tools


def _read_targets(call: ToolCall, targets: _Targets) -> None:
    args = call.arguments
    key = targets.add(args.get("file_path"), "argument")
    limit = args.get("limit")
    if key is None or not _is_int(limit) or limit <= 0:
        return  # without a limit the whole file (or its first chunk) was read: no range
    offset = args.get("offset")
    start = offset if _is_int(offset) and offset >= 1 else 1
    end = start + min(limit, MAX_LINE_NUMBER) - 1
    structured = call.structured_result
    if isinstance(structured, dict) and isinstance(structured.get("file"), dict):
        num_lines = structured["file"].get("numLines")
        if _is_int(num_lines) and num_lines > 0:
            end = min(end, start + num_lines - 1)
    targets.add_range(key, start, end)


def _result_lines(text: str) -> Iterator[str]:
    for line in text.splitlines():
        line = line.rstrip()
        if line:
            yield line


def _path_list_lines(text: str) -> Iterator[str]:
    """Lines of a Grep/Glob file list, without its header and notes."""
    for line in _result_lines(text):
        if _FOUND_HEADER_RE.match(line) or line.startswith(("No files found", "No matches")):
            continue
        if line.startswith(("(Results are truncated", "[", "(")):
            continue
        yield line.strip()


def _split_numbered(line: str) -> tuple[str, int] | None:
    """Split ``path<sep>N<sep>text`` at the first separator whose prefix is a file path.

    Slow path for lines whose first ``:N:``/``-N-`` does not follow a file name (a folder
    such as ``pkg/a-1-b/`` contains ``-1-``).
    """
    for regex in (_MATCH_LINE_RE, _CONTEXT_LINE_RE):
        for match in regex.finditer(line):
            prefix = line[: match.start()]
            if looks_like_file(prefix):
                return prefix, int(match.group(1))
    return None


def _content_lines(
    text: str, targets: _Targets, *, single_file_key: str | None, cwd: str | None = None
) -> None:
    """Files and line numbers of grep ``-n`` style output (match and context lines).

    The common case is one regex pass over the whole text; each distinct path prefix is
    checked and normalised once.
    """
    numbers_by_prefix: dict[str, list[int]] = {}
    if single_file_key is not None:
        numbers = [int(n) for n in _BARE_LINES_RE.findall(text)]
        if numbers:
            numbers_by_prefix[""] = numbers
    else:
        for prefix, _run, _sep, number in _NUMBERED_LINE_RE.findall(text):
            found = numbers_by_prefix.get(prefix)
            if found is None:
                if not looks_like_file(prefix):
                    # a line's first ":N:"/"-N-" is not after a file name: split line by line
                    numbers_by_prefix = {}
                    for line in text.splitlines():
                        split = _split_numbered(line)
                        if split is not None:
                            numbers_by_prefix.setdefault(split[0], []).append(split[1])
                    break
                found = numbers_by_prefix[prefix] = []
            found.append(int(number))
        if not numbers_by_prefix:
            # no line numbers at all (Grep with "-n": false): "path:text" match lines
            # still name their file; "path-text" context lines are ambiguous and skipped
            for line in text.splitlines():
                prefix = line.partition(":")[0]
                if prefix != line and looks_like_file(prefix):
                    targets.add(_join_cwd(prefix, cwd), "result")
    for prefix, numbers in numbers_by_prefix.items():
        key = single_file_key if not prefix else targets.add(_join_cwd(prefix, cwd), "result")
        if key is not None:
            targets.add_lines(key, numbers)


def _count_lines(text: str, targets: _Targets, cwd: str | None = None) -> None:
    for line in _result_lines(text):
        raw, sep, count = line.rpartition(":")
        if sep and count.strip().isdigit() and int(count) > 0 and raw:
            targets.add(_join_cwd(raw, cwd), "result")


def _grep_targets(call: ToolCall, targets: _Targets) -> None:
    args = call.arguments
    path_arg = args.get("path")
    single_file_key = None
    if isinstance(path_arg, str) and looks_like_file(path_arg):
        single_file_key = targets.add(path_arg, "argument")
    if call.is_error or (call.result is None and call.structured_result is None):
        return
    structured = call.structured_result if isinstance(call.structured_result, dict) else {}
    mode = args.get("output_mode") or structured.get("mode") or "files_with_matches"
    filenames = structured.get("filenames")
    if isinstance(filenames, list) and filenames:
        for name in filenames:
            targets.add(name, "result")
    content = structured.get("content")
    text = content if isinstance(content, str) else call.result
    if not isinstance(text, str):
        return
    if mode == "content":
        _content_lines(text, targets, single_file_key=single_file_key)
    elif mode == "count":
        if single_file_key is None:
            _count_lines(text, targets)
    elif not filenames:
        for line in _path_list_lines(text):
            targets.add(line, "result")


def _glob_targets(call: ToolCall, targets: _Targets) -> None:
    if call.is_error:
        return
    structured = call.structured_result
    if isinstance(structured, dict) and isinstance(structured.get("filenames"), list):
        for name in structured["filenames"]:
            targets.add(name, "result")
        return
    if isinstance(call.result, str):
        for line in _path_list_lines(call.result):
            targets.add(line, "result")


# --------------------------------------------------------------------------- MCP tools


def _repo_of(node: dict[str, Any], inherited: str | None) -> str | None:
    for name in _REPO_KEYS:
        value = node.get(name)
        if value is None:
            continue
        if type(value) is str and value:
            return value
        if type(value) is dict:
            inner = value.get("name")
            if type(inner) is str and inner:
                return inner
    return inherited


def _collect_json_files(node: Any, repo: str | None, depth: int, targets: _Targets) -> None:
    """Add the file (qualified by ``repo``) and ``chunks`` line ranges of each file-naming object."""
    if depth > _MAX_JSON_DEPTH:
        return
    if type(node) is list:
        for item in node:
            if type(item) is dict or type(item) is list:
                _collect_json_files(item, repo, depth + 1, targets)
        return
    if type(node) is not dict or node.get("isDirectory") is True:
        return  # folders of list_files: not files, and they hold nothing else
    repo = _repo_of(node, repo)
    path = None
    for name in _PATH_KEYS:
        value = node.get(name)
        if type(value) is str:
            path = value
            break
    if path and not path.endswith("/"):
        key = targets.add(path, "result", repo)
        chunks = node.get("chunks")
        if type(chunks) is list:
            for chunk in chunks:
                if type(chunk) is dict:
                    targets.add_range(key, chunk.get("startLine"), chunk.get("endLine"))
        if "startLine" in node and "endLine" in node:
            targets.add_range(key, node["startLine"], node["endLine"])
    for name, value in node.items():
        if (type(value) is dict or type(value) is list) and name != "chunks":
            _collect_json_files(value, repo, depth + 1, targets)


def _mcp_targets(call: ToolCall, base_name: str, targets: _Targets) -> None:
    args = call.arguments
    repo_arg = args.get("repo") if isinstance(args.get("repo"), str) else None
    if base_name in ("read_file", "find_references", "go_to_definition"):
        key = targets.add(args.get("path"), "argument", repo_arg)
        if base_name == "read_file":
            targets.add_range(key, args.get("startLine"), args.get("endLine"))
    if call.is_error or not isinstance(call.result, str) or base_name == "read_file":
        return  # read_file returns file content, which names no other file
    text = call.result.strip()
    if not text.startswith(("{", "[")):
        return
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError:
        return
    # a file without a repo of its own or of an enclosing object is in the argument's
    _collect_json_files(document, repo_arg or None, 0, targets)


# --------------------------------------------------------------------------- Bash


def _join_cwd(raw: str, cwd: str | None) -> str:
    if cwd and not raw.startswith("/"):
        return f"{cwd.rstrip('/')}/{raw}"
    return raw


def _bash_stdout(call: ToolCall) -> str | None:
    structured = call.structured_result
    if isinstance(structured, dict) and isinstance(structured.get("stdout"), str):
        return structured["stdout"]
    return call.result if isinstance(call.result, str) else None


def _listed_path(line: str, read: ShellRead, starts: list[str]) -> str | None:
    """A ``find``/``grep -l`` output line as a path (``starts``: ``read.paths``, normalised)."""
    path = line.strip()
    if not path or _WHITESPACE_RE.search(path):
        return None  # messages ("find: ...: Permission denied") have spaces; paths rarely
    if read.cwd and not path.startswith("/"):
        path = posixpath.join(read.cwd, path)
    if "//" in path or "/." in path or path.startswith(".") or path.endswith("/"):
        path = posixpath.normpath(path)  # else normpath would leave it as it is
    # find prints every name under one of its start folders: anything else is a message
    if read.program == "find" and starts:
        for start in starts:
            if _is_under(path, start):
                return path
        return None
    return path


def _is_under(path: str, start: str) -> bool:
    if start == ".":
        return not path.startswith("/")
    if start == "/":
        return True
    return path == start or path.startswith(start + "/")


def _bash_targets(
    call: ToolCall,
    reads: list[ShellRead],
    targets: _Targets,
    skip: Sequence[Collection[str]] = (),
) -> list[str]:
    """Targets and symbols of a Bash call's reads; ``skip[i]``: keys read ``i`` must drop."""
    symbols: list[str] = []
    for index, read in enumerate(reads):
        dropped = skip[index] if index < len(skip) else ()
        for raw in read.paths:
            if read.category == "file_read" or looks_like_file(raw):
                if dropped and targets.key(raw) in dropped:
                    continue
                key = targets.add(raw, "argument")
                if read.line_range is not None:
                    targets.add_range(key, *read.line_range)
        if read.category == "code_search" and read.pattern and _IDENTIFIER_RE.match(read.pattern):
            symbols.append(read.pattern)
    formatted = [r for r in reads if r.output_format is not None]
    if call.is_error or len(formatted) != 1:
        return symbols
    read = formatted[0]
    stdout = _bash_stdout(call)
    if not stdout:
        return symbols
    if read.output_format == "paths":
        starts = [posixpath.normpath(start) for start in read.paths]
        for line in _result_lines(stdout):
            path = _listed_path(line, read, starts)
            if path is not None:
                targets.add(path, "result")
    elif read.output_format == "count":
        _count_lines(stdout, targets, read.cwd)
    elif read.output_format == "grep":
        _content_lines(stdout, targets, single_file_key=None, cwd=read.cwd)
    return symbols


# --------------------------------------------------------------------------- events


def build_events(
    trace: ParsedTrace | None,
    ground_truth: GroundTruth,
    *,
    agent_started_at: str | None = None,
    workspace_repos: Collection[str] = (),
    warnings: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Turn a parsed trace into retrieval events, one per tool call, in trace order.

    Parameters
    ----------
    trace
        The parsed (possibly merged) trace; ``None`` gives ``[]``.
    ground_truth
        The task's ground truth; only ``ground_truth.files`` (normalised keys) is used.
    agent_started_at
        ISO 8601 start of the agent (``agent_execution.started_at``); when ``None`` the
        trace's own ``started_at`` is used. Naive times are taken as UTC.
    workspace_repos
        Repositories checked out side by side under the workspace root (multi-repo tasks),
        passed to :func:`retrieval_lib.paths.normalize_path`.
    warnings
        Receives one line per argument that could not be kept (nested too deeply, an
        integer beyond 64 bits); the argument is ``None`` in its event.

    Returns
    -------
    list of dict
        Events with the fields of ``docs/contracts.md`` §1, in the order of
        ``trace.tool_calls``; ``step_index`` is the position in that list.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from retrieval_lib.traces.model import ParsedTrace, ToolCall
    >>> call = ToolCall("t1", "Read", {"file_path": "/workspace/src/app.py", "limit": 20})
    >>> gt = SimpleNamespace(files=["src/app.py"])
    >>> event = build_events(ParsedTrace("transcript", [call]), gt)[0]
    >>> event["tool_category"], event["target_files"], event["file_ranges"]
    ('file_read', ['src/app.py'], [{'file': 'src/app.py', 'line_start': 1, 'line_end': 20}])
    """
    if trace is None:
        return []
    gt_files = list(ground_truth.files)
    gt_set = frozenset(gt_files)
    paths = _task_paths(tuple(gt_files), tuple(workspace_repos))
    started = parse_iso_time(agent_started_at) or parse_iso_time(trace.started_at)
    events: list[dict[str, Any]] = []
    dropped: list[str] = []
    for step_index, call in enumerate(trace.tool_calls):
        events.append(_event(step_index, call, paths, gt_set, started, dropped))
        if dropped:
            if warnings is not None:
                warnings.extend(
                    f"tool call #{step_index} ({call.name}): argument {what} not kept"
                    for what in dropped
                )
            dropped.clear()
    return events


def _event(
    step_index: int,
    call: ToolCall,
    paths: _TaskPaths,
    gt_set: frozenset[str],
    started: datetime | None,
    dropped: list[str] | None = None,
) -> dict[str, Any]:
    info = classify_tool(call.name)
    category: str = info.category
    targets = _Targets(paths)
    symbols: list[str] = []
    created: list[str] = []
    if not isinstance(call.arguments, dict):
        call = replace(call, arguments={})  # a malformed trace entry: no arguments to use
    args = call.arguments
    if info.is_mcp:
        if category != "other":
            _mcp_targets(call, info.base_name, targets)
        symbol = args.get("symbol")
        if category == "symbol_navigation" and isinstance(symbol, str) and symbol:
            symbols.append(symbol)
    elif info.base_name == "Read":
        _read_targets(call, targets)
    elif info.base_name == "Grep":
        _grep_targets(call, targets)
        pattern = args.get("pattern")
        if isinstance(pattern, str) and _IDENTIFIER_RE.match(pattern):
            symbols.append(pattern)
    elif info.base_name == "Glob":
        _glob_targets(call, targets)
    elif category == "file_write":
        targets.add(args.get("file_path") or args.get("notebook_path"), "argument")
    elif info.base_name == "Bash":
        command = args.get("command")
        if isinstance(command, str):
            shell = (
                _analyzed(command)
                if len(command) <= MAX_ARGUMENT_CHARS
                else analyze_shell_command(command)
            )
            made = (
                [paths[raw, None] for raw in shell.created]
                if shell.created and call.is_error is not True  # a failed call created nothing
                else []
            )
            if shell.reads:
                category = shell.reads[0].category
                # a file the line created before a read is not read from the repository
                # (the parser compares spellings; this compares keys: /workspace/n.md = n.md)
                skip = [{k for k in made[:n] if k is not None} for n in shell.created_before]
                symbols = _bash_targets(call, shell.reads, targets, skip)
            if made:
                created = list(dict.fromkeys(k for k in made if k is not None))
                for key in created:
                    # the command made it: an output line naming it is not a retrieval
                    if targets.files.get(key) == "result":
                        del targets.files[key]
                        targets.ranges.pop(key, None)

    target_files = list(targets.files)
    matched = [t for t in target_files if t in gt_set]
    elapsed = None
    if started is not None and (at := parse_iso_time(call.timestamp)) is not None:
        seconds = (at - started).total_seconds()
        # A call before the agent's start means the two clocks disagree (the start
        # comes from result.json, the call time from the trace). Clamping to 0 would
        # invent an instant retrieval, so the time is unknown instead.
        elapsed = seconds if seconds >= 0 else None
    return {
        "step_index": step_index,
        "tool_name": call.name,
        "tool_category": category,
        "is_mcp": info.is_mcp,
        "is_subagent": call.parent_call_id is not None or bool(call.is_sidechain),
        "tool_call_id": call.call_id,
        "arguments": _salient_arguments(args, dropped),
        "target_files": target_files,
        "target_sources": targets.files,  # the targets end with the event: no copy
        "target_symbols": list(dict.fromkeys(symbols)) if len(symbols) > 1 else symbols,
        "file_ranges": targets.file_ranges() if targets.ranges else [],
        "hits_ground_truth": bool(matched),
        "matched_ground_truth_files": matched,
        "is_error": call.is_error,
        "elapsed_seconds": elapsed,
        "cumulative_tokens": call.cumulative_tokens,
        "created_files": created,
    }


def summarize_events(events: list[dict[str, Any]], ground_truth_files: Sequence[str]) -> dict:
    """Compute the document's ``summary`` block from its events.

    Writes are not retrieval: ``unique_files_accessed``, ``ground_truth_files_hit`` and
    ``first_ground_truth_hit_step`` count the targets of every event except ``file_write``
    events and failed calls (``is_error``), as the metric stages do. Unlike the metrics,
    the summary keeps files the agent created itself (it describes the trace, not the
    retrieval ranking). ``events_by_category`` has every category, zeros included.

    Parameters
    ----------
    events
        Events as returned by :func:`build_events`.
    ground_truth_files
        The document's ``ground_truth.files``.

    Returns
    -------
    dict
        ``total_events``, ``mcp_events``, ``local_events``, ``unique_files_accessed``,
        ``ground_truth_files_hit``, ``first_ground_truth_hit_step`` (``None`` when no
        event hit the ground truth) and ``events_by_category``.

    Examples
    --------
    >>> events = [
    ...     {"step_index": 0, "is_mcp": True, "tool_category": "code_search",
    ...      "target_files": ["a.py", "b.py"], "matched_ground_truth_files": ["b.py"]},
    ... ]
    >>> s = summarize_events(events, ["b.py"])
    >>> s["unique_files_accessed"], s["ground_truth_files_hit"], s["first_ground_truth_hit_step"]
    (2, 1, 0)
    """
    gt = set(ground_truth_files)
    by_category = dict.fromkeys(TOOL_CATEGORIES, 0)
    accessed: set[str] = set()
    hit: set[str] = set()
    first_hit: int | None = None
    mcp = 0
    for event in events:
        category = event["tool_category"]
        by_category[category] = by_category.get(category, 0) + 1
        mcp += bool(event["is_mcp"])
        if category == "file_write" or event.get("is_error") is True:
            continue  # a write is not retrieval; a failed call retrieved nothing
        accessed.update(event["target_files"])
        if not gt.isdisjoint(event.get("matched_ground_truth_files", ())):
            hit.update(gt.intersection(event["matched_ground_truth_files"]))
            if first_hit is None or event["step_index"] < first_hit:
                first_hit = event["step_index"]
    return {
        "total_events": len(events),
        "mcp_events": mcp,
        "local_events": len(events) - mcp,
        "unique_files_accessed": len(accessed),
        "ground_truth_files_hit": len(hit),
        "first_ground_truth_hit_step": first_hit,
        "events_by_category": by_category,
    }

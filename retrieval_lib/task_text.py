"""File paths read out of task texts: unified diffs, diffs inside shell scripts, prose.

Used by :mod:`retrieval_lib.ground_truth` for its diff sources (``reference_fix.patch``,
the gold patch in ``solution/solve.sh``) and its path-extraction sources
(``instruction.md``, ``tests/test.sh``).

Path extraction from ``instruction.md`` / ``tests/test.sh`` (source 6) keeps a token only
when it looks like a repository path: at least one ``/``, a file name with a known source or
documentation extension (:data:`EXTRACTABLE_EXTENSIONS`), no glob or template characters,
not part of a URL, and, for absolute paths, under a workspace root. Verifier and system
paths (``/tests/``, ``/logs/``, ``/tmp/``, ...) normalise to nothing, and files directly in
the workspace root with an output-like extension (``/workspace/answer.json``,
``/workspace/chain.json``) are the agent's answer files, not repository files.
"""

from __future__ import annotations

import re
from typing import Any

from retrieval_lib.paths import WORKSPACE_ROOTS, normalize_path

__all__ = [
    "EXTRACTABLE_EXTENSIONS",
    "embedded_diffs",
    "extract_paths_from_text",
    "is_placeholder",
    "looks_like_diff",
    "parse_unified_diff",
]

# fmt: off
EXTRACTABLE_EXTENSIONS: frozenset[str] = frozenset([
    "py", "pyi", "pyx", "go", "proto", "rs", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx",
    "cu", "java", "kt", "kts", "scala", "groovy", "gradle", "js", "jsx", "mjs", "cjs", "ts",
    "tsx", "vue", "svelte", "rb", "php", "cs", "fs", "swift", "m", "mm", "sh", "bash", "zsh",
    "pl", "pm", "lua", "r", "jl", "ex", "exs", "erl", "hrl", "hs", "ml", "mli", "clj", "dart",
    "zig", "nim", "sql", "html", "htm", "css", "scss", "less", "json", "yaml", "yml", "toml",
    "xml", "ini", "cfg", "conf", "bzl", "bazel", "cmake", "mk", "tf", "hcl", "thrift",
    "graphql", "md", "rst", "txt", "adoc",
])
# fmt: on
"""File extensions that path extraction (source 6) accepts."""

_OUTPUT_EXTENSIONS = frozenset({"json", "jsonl", "md", "txt", "yaml", "yml", "csv", "log"})
_PLACEHOLDERS = frozenset(
    {"", "...", "…", "todo", "tbd", "fixme", "n/a", "na", "none", "null", "placeholder", "path"}
)


def is_placeholder(raw: str) -> bool:
    """True for a path entry that stands for no file (``""``, ``"..."``, ``"TODO"``,
    ``"<path>"``, ``path/to/...``, a glob or template).

    Examples
    --------
    >>> is_placeholder("path/to/file.py"), is_placeholder("src/app.py")
    (True, False)
    """
    text = raw.strip().strip("\"'`").strip().lower()
    if text in _PLACEHOLDERS or set(text) <= {".", "…", "/"}:
        return True
    if any(ch in text for ch in "<>{}*"):
        return True
    return text.startswith(("path/to/", "/path/to/"))


# --------------------------------------------------------------------------- diffs

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@ ?(.*)$")


def _diff_path(header_value: str) -> str | None:
    """Path of a ``---``/``+++`` header (drops the tab-separated timestamp)."""
    value = header_value.split("\t", 1)[0].rstrip()
    if value.startswith('"') and value.endswith('"') and len(value) > 1:
        value = value[1:-1]
    return normalize_path(value, from_diff=True)


#: Most digits a hunk-header number may have: below 2**63 (what a document can store),
#: and far below Python's limit on converting digit strings to integers.
_MAX_HUNK_DIGITS = 18


def _hunk_chunk(
    file: str, match: re.Match[str], deleted: bool, old_length: int, new_length: int
) -> dict[str, Any]:
    """The chunk record of one hunk header: its new-side line range (old side for a
    deleted file), at least the one line at its start (a pure deletion ``+c,0``)."""
    start, length = (int(match[1]), old_length) if deleted else (int(match[3]), new_length)
    start = max(start, 1)
    return {
        "file": file,
        "line_start": start,
        "line_end": max(start + length - 1, start),
        "annotation": match[5].strip() or None,
    }


def parse_unified_diff(
    text: str, warnings: list[str] | None = None
) -> tuple[list[str], list[dict[str, Any]]]:
    """Files and new-side hunk ranges of a unified diff.

    Hunk bodies are skipped by their line counts, so a removed line that starts with
    ``--`` is never mistaken for a file header. Chunks are new-file line ranges; a
    deleted file (``+++ /dev/null``) counts under its old name with its old-file ranges;
    a renamed (or copied) file counts under its old name too, the one the agent's
    checkout holds, before its new name;
    a pure deletion hunk (``+c,0``) gives the one-line range at ``c``. A hunk header
    with a number of more than 18 digits gives no range (its file still counts); it is
    counted in ``warnings`` when given.

    Returns
    -------
    tuple
        ``(files, chunks)``: keys in first-seen order (deduplicated) and
        ``{"file", "line_start", "line_end", "annotation"}`` records.

    Examples
    --------
    >>> diff = "--- a/x.py\\n+++ b/x.py\\n@@ -1,2 +1,3 @@ def f():\\n a\\n+b\\n c\\n"
    >>> parse_unified_diff(diff)
    (['x.py'], [{'file': 'x.py', 'line_start': 1, 'line_end': 3, 'annotation': 'def f():'}])
    """
    files: dict[str, None] = {}
    chunks: list[dict[str, Any]] = []
    old_path: str | None = None
    current: str | None = None
    git_new: str | None = None
    current_deleted = False
    old_left = new_left = 0
    out_of_range = 0
    for line in text.splitlines():
        if old_left > 0 or new_left > 0:
            tag = line[:1]  # "" (an empty line) is context; "\\": "\\ No newline at end of file"
            if tag in ("-", " ", ""):
                old_left -= 1
            if tag in ("+", " ", ""):
                new_left -= 1
            if tag in ("-", "+", " ", "", "\\"):
                continue
            old_left = new_left = 0  # malformed hunk: resynchronise on headers
        if line.startswith("diff --git "):
            if git_new is not None and current is None:
                files.setdefault(git_new, None)  # previous section had no ---/+++ (binary)
            rest = line[len("diff --git ") :]
            cut = rest.rfind(" b/")
            git_new = _diff_path(rest[cut + 1 :]) if cut >= 0 else None
            current = old_path = None
        elif line.startswith("--- "):
            old_path = _diff_path(line[4:])
        elif line.startswith("+++ "):
            new_path = _diff_path(line[4:])
            current = new_path or old_path
            current_deleted = new_path is None
            if new_path is not None and old_path is not None and old_path != new_path:
                files.setdefault(old_path, None)  # renamed: the checkout holds the old name
            if current is not None:
                files.setdefault(current, None)
        elif line.startswith(("rename from ", "copy from ")) and current is None:
            source = normalize_path(line.split(" from ", 1)[1].strip())
            if source is not None:
                files.setdefault(source, None)
        elif line.startswith("@@ "):
            match = _HUNK_RE.match(line)
            if match is None:
                continue
            if any(len(match[i] or "") > _MAX_HUNK_DIGITS for i in (1, 2, 3, 4)):
                out_of_range += 1  # a line number no file has: no range, no body count
                old_left = new_left = 0
                continue
            old_left = int(match[2]) if match[2] is not None else 1
            new_left = int(match[4]) if match[4] is not None else 1
            if current is not None:
                chunks.append(_hunk_chunk(current, match, current_deleted, old_left, new_left))
    if git_new is not None and current is None:
        files.setdefault(git_new, None)
    if out_of_range and warnings is not None:
        warnings.append(
            f"{out_of_range} hunk header(s) with a line number of more than "
            f"{_MAX_HUNK_DIGITS} digits: no line range taken from them"
        )
    return list(files), chunks


_HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def embedded_diffs(script: str) -> list[str]:
    """Bodies of heredocs that contain a unified diff; the whole script as a fallback."""
    lines = script.splitlines()
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        match = _HEREDOC_RE.search(lines[i])
        if match is None:
            i += 1
            continue
        terminator = match[2]
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != terminator:
            body.append(lines[i])
            i += 1
        i += 1
        text = "\n".join(body)
        if looks_like_diff(text):
            bodies.append(text)
    if not bodies and looks_like_diff(script):
        bodies.append(script)
    return bodies


def looks_like_diff(text: str) -> bool:
    return bool(
        re.search(r"^diff --git ", text, re.M)
        or (re.search(r"^--- \S", text, re.M) and re.search(r"^\+\+\+ \S", text, re.M))
    )


# --------------------------------------------------------------------------- extraction

# Characters that end a path token inside a whitespace-separated word.
_TOKEN_BREAK_RE = re.compile(r"['\"`()\[\]<>=,;|&]+")
_LINE_SUFFIX_RE = re.compile(r":\d+(?:[:-]\d+)*$|#L\d+(?:-L?\d+)?$")
_PATH_FULL_RE = re.compile(r"/?(?:[\w.-]+/)+[\w.-]*[\w-]\.([A-Za-z0-9]+)")


def extract_paths_from_text(text: str) -> list[str]:
    """Repository-looking file paths mentioned in free text or a script, as keys.

    See the module docstring for the heuristic. Keys come in first-mention order.

    Examples
    --------
    >>> extract_paths_from_text(
    ...     "Fix `django/contrib/admin/options.py:120`; write /workspace/answer.json; "
    ...     "see https://github.com/django/django/blob/main/setup.py and /logs/verifier/reward.txt"
    ... )
    ['django/contrib/admin/options.py']
    """
    keys: dict[str, None] = {}
    for word in text.split():
        if "/" not in word or "." not in word:
            continue  # cheap filter first: most words are not paths
        for raw in _TOKEN_BREAK_RE.split(word):
            key = _path_token_key(raw)
            if key is not None:
                keys.setdefault(key, None)
    return list(keys)


def _path_token_key(raw: str) -> str | None:
    """Key of one candidate token, or ``None`` when it is not a repository path."""
    if "/" not in raw or "." not in raw:
        return None
    token = _LINE_SUFFIX_RE.sub("", raw.strip("*").rstrip(".:!?"))
    if "://" in token or token.lower().startswith(("github.com/", "www.")):
        return None  # part of a URL
    if any(ch in token for ch in "$*{}~\\"):
        return None  # shell variable, glob, template or escape: not a concrete path
    match = _PATH_FULL_RE.fullmatch(token)
    if match is None:
        return None
    extension = match[1].lower()
    if extension not in EXTRACTABLE_EXTENSIONS or is_placeholder(token):
        return None
    key = normalize_path(token)
    if key is None:
        return None
    if token.startswith("/"):
        if not _under_workspace_root(token):
            return None  # absolute, outside any checkout root: not a repository path
        if "/" not in key and extension in _OUTPUT_EXTENSIONS:
            return None  # /workspace/<answer>.json: the agent's output file
    return key


def _under_workspace_root(token: str) -> bool:
    lowered = token.lower()
    return any(lowered == root or lowered.startswith(root + "/") for root in WORKSPACE_ROOTS)

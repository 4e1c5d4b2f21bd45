"""A simulated coding agent: what it searches, reads and writes in one trial.

:func:`plan_trial` decides, from a latent skill and a seeded RNG, which relevant files
the agent's searches surface, which it reads, and what it writes, then renders each
step as the tool call a real Claude Code agent makes: ``Grep``/``Glob``/``Read``/``Bash``
for local (baseline) agents, Sourcegraph MCP tools for MCP agents, ``Task`` subagents
with nested calls, ``TodoWrite``, ``Write``/``Edit``. The result is a list of
:class:`Message` objects (one per API message) whose :class:`Call` objects carry the
exact tool input, the tool result in the transcript's shapes, and the ground-truth
facts of the call (files named in arguments, files returned, files read, files written)
expressed as normalised keys. :mod:`retrieval_lib.synth.formats` writes the messages as
``claude-code.txt`` and ``trajectory.json``.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from typing import Any

from retrieval_lib.synth.catalog import TaskSpec
from retrieval_lib.synth.repos import REPOS, RepoProfile, file_lines, symbol_line, total_lines

__all__ = ["Call", "Message", "TrialPlan", "category_of", "plan_trial"]

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

SYSTEM_REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be "
    "considered malware. You CAN and SHOULD provide analysis of malware, what it is doing. But "
    "you MUST refuse to improve or augment the code. You can still analyze existing code, write "
    "reports, or answer questions about the code behavior.\n</system-reminder>\n"
)

_LOCAL_CATEGORIES = {
    "Read": "file_read",
    "Glob": "file_search",
    "Grep": "code_search",
    "Write": "file_write",
    "Edit": "file_write",
    "MultiEdit": "file_write",
    "NotebookEdit": "file_write",
}
_MCP_CATEGORIES = {
    "read_file": "file_read",
    "list_files": "file_search",
    "keyword_search": "code_search",
    "nls_search": "code_search",
    "find_references": "symbol_navigation",
    "go_to_definition": "symbol_navigation",
    "commit_search": "commit_search",
    "diff_search": "commit_search",
    "compare_revisions": "commit_search",
    "deepsearch": "deep_search",
    "deepsearch_read": "deep_search",
}
_SHELL_CATEGORIES = {
    "cat": "file_read",
    "head": "file_read",
    "tail": "file_read",
    "sed": "file_read",
    "grep": "code_search",
    "rg": "code_search",
    "find": "file_search",
    "ls": "file_search",
}


def category_of(name: str, tool_input: dict[str, Any]) -> str:
    """Retrieval category of a tool call (input-formats.md), Bash by its first program.

    Examples
    --------
    >>> category_of("mcp__sourcegraph__sg_keyword_search", {})
    'code_search'
    >>> category_of("Bash", {"command": "sed -n '1,20p' /workspace/a.py"})
    'file_read'
    """
    if name.startswith("mcp__"):
        tool = name.split("__", 2)[-1]
        tool = tool[3:] if tool.startswith("sg_") else tool
        return _MCP_CATEGORIES.get(tool, "other")
    if name == "Bash":
        program = str(tool_input.get("command", "")).split(" ", 1)[0]
        return _SHELL_CATEGORIES.get(program, "other")
    return _LOCAL_CATEGORIES.get(name, "other")


@dataclass
class Call:
    """One tool call with its result, as the agent made it."""

    id: str
    name: str
    input: dict[str, Any]
    content: Any
    """``tool_result.content`` in the transcript: a string, or text blocks (MCP, Task)."""
    tool_use_result: Any
    is_error: bool | None
    """``tool_result.is_error``; ``None`` when the harness omits the key."""
    is_mcp: bool
    category: str
    parent_id: str | None = None
    arg_keys: list[str] = field(default_factory=list)
    result_keys: list[str] = field(default_factory=list)
    read_keys: list[str] = field(default_factory=list)
    write_keys: list[str] = field(default_factory=list)
    latency: float = 0.5
    children: list[Message] = field(default_factory=list)

    @property
    def text_content(self) -> str:
        """The result as one string (the ATIF observation's content before stripping)."""
        if isinstance(self.content, list):
            return "\n".join(block.get("text", "") for block in self.content)
        return self.content


@dataclass
class Message:
    """One API message of the agent: optional thinking and text, then tool calls."""

    id: str
    thinking: str | None
    signature: str
    text: str | None
    calls: list[Call]
    parent_id: str | None = None
    output_tokens: int = 0
    input_tokens: int = 0
    cache_creation: int = 0
    cache_read: int = 0
    placeholder_output: int = 1
    start: float = 0.0
    """Seconds after the agent started when the message began streaming."""


@dataclass
class TrialPlan:
    """Everything one trial's traces contain, before serialisation."""

    messages: list[Message]
    relevant_keys: list[str]
    submitted_keys: list[str]
    coverage: float
    final_text: str
    duration: float


_CAT_PREFIXES: list[str] = []
_SG_PREFIXES: list[str] = []


def _cat_prefixes(start: int, end: int) -> list[str]:
    """``cat -n``-style prefixes of Claude Code's Read output (``"     1→"``)."""
    while len(_CAT_PREFIXES) <= end:
        _CAT_PREFIXES.append(f"{len(_CAT_PREFIXES):>6}\u2192")
    return _CAT_PREFIXES[start : end + 1]


def _sg_prefixes(start: int, end: int) -> list[str]:
    """Sourcegraph read_file line prefixes (``"1: "``)."""
    while len(_SG_PREFIXES) <= end:
        _SG_PREFIXES.append(f"{len(_SG_PREFIXES)}: ")
    return _SG_PREFIXES[start : end + 1]


class _Ids:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def token(self, n: int) -> str:
        return "".join(self.rng.choices(_ID_ALPHABET, k=n))

    def tool(self) -> str:
        return "toolu_01" + self.token(22)

    def message(self) -> str:
        return "msg_01" + self.token(22)

    def signature(self, n_bytes: int) -> str:
        return base64.b64encode(self.rng.randbytes(n_bytes)).decode("ascii")


@dataclass(frozen=True)
class _File:
    repo: str
    path: str

    @property
    def profile(self) -> RepoProfile:
        return REPOS[self.repo]


#: The search styles answered by a Sourcegraph MCP search tool of the same name.
_SOURCEGRAPH_SEARCHES = ("keyword_search", "nls_search", "find_references")


class _Builder:
    """Renders abstract actions (search, list, read, write) as concrete tool calls."""

    def __init__(
        self,
        task: TaskSpec,
        rng: random.Random,
        *,
        mcp: bool,
        sg_infix: bool,
        span: tuple[int, int],
    ) -> None:
        self.task = task
        self.rng = rng
        self.ids = _Ids(rng)
        self.mcp = mcp
        self.prefix = "mcp__sourcegraph__sg_" if sg_infix else "mcp__sourcegraph__"
        self.span = span
        self.org = task.is_org
        self.relevant_files: frozenset[_File] = frozenset()
        self.all_files: tuple[_File, ...] = ()

    # -- naming --------------------------------------------------------------------------
    def key(self, f: _File) -> str:
        return self.task.key(f.repo, f.path)

    def local_path(self, f: _File) -> str:
        return f"/workspace/{f.repo}/{f.path}" if self.org else f"/workspace/{f.path}"

    def relative_path(self, f: _File) -> str:
        return f"{f.repo}/{f.path}" if self.org else f.path

    def call(
        self, name: str, tool_input: dict[str, Any], content: Any, result: Any, **kw: Any
    ) -> Call:
        is_mcp = name.startswith("mcp__")
        return Call(
            id=self.ids.tool(),
            name=name,
            input=tool_input,
            content=content,
            tool_use_result=result,
            is_error=kw.pop("is_error", None),
            is_mcp=is_mcp,
            category=category_of(name, tool_input),
            latency=kw.pop("latency", round(self.rng.uniform(0.2, 2.5 if is_mcp else 0.9), 3)),
            **kw,
        )

    def message(
        self,
        calls: list[Call],
        thinking: str | None = None,
        text: str | None = None,
        parent: str | None = None,
    ) -> Message:
        """One API message holding ``calls`` (made by the subagent ``parent`` if given)."""
        for c in calls:
            c.parent_id = parent
        return Message(
            id=self.ids.message(),
            thinking=thinking,
            signature=self.ids.signature(self.rng.randint(48, 120)) if thinking else "",
            text=text,
            calls=calls,
            parent_id=parent,
            output_tokens=self.rng.randint(60, 520),
            placeholder_output=self.rng.choice((1, 1, 2, 3, 4, 6, 7)),
        )

    # -- shell ---------------------------------------------------------------------------
    def bash(self, command: str, stdout: str, *, description: str | None = None, **kw: Any) -> Call:
        tool_input: dict[str, Any] = {"command": command}
        if description:
            tool_input["description"] = description
        result = {
            "stdout": stdout,
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
        return self.call("Bash", tool_input, stdout, result, is_error=False, **kw)

    # -- searches ------------------------------------------------------------------------
    def _snippet(
        self, f: _File, around: int, symbol: str | None, width: int = 3
    ) -> tuple[int, int, list[str]]:
        last = total_lines(f.profile, f.path)
        start = max(1, around - 1)
        end = min(last, start + width)
        return start, end, file_lines(f.profile, f.path, start, end, symbol)

    def search(self, files: list[_File], style: str) -> Call:
        """A search whose result lists ``files`` (in order)."""
        keys = [self.key(f) for f in files]
        if style in _SOURCEGRAPH_SEARCHES:
            return self._sourcegraph_search(files, keys, style)
        render = {
            "grep_files": self._grep_files,
            "grep_content": self._grep_content,
            "bash_grep": self._bash_grep,
            "glob": self._glob,
            "bash_find": self._bash_find,
            "list_files": self._list_files,
        }.get(style)
        if render is None:
            raise ValueError(f"unknown search style {style!r}")
        return render(files, keys)

    def _grep_files(self, files: list[_File], keys: list[str]) -> Call:
        """A ``Grep`` listing the files that match (``files_with_matches``)."""
        symbol = self.task.symbol
        names = [self.relative_path(f) for f in files]
        tool_input: dict[str, Any] = {"pattern": symbol, "output_mode": "files_with_matches"}
        if self.rng.random() < 0.4 and not self.org:
            tool_input = {
                "pattern": symbol,
                "type": self.task.repos[0].language[:2],
                "output_mode": "files_with_matches",
            }
        content = f"Found {len(names)} files\n" + "\n".join(names) if names else "No files found"
        result = {"mode": "files_with_matches", "filenames": names, "numFiles": len(names)}
        return self.call("Grep", tool_input, content, result, result_keys=keys)

    def _grep_content(self, files: list[_File], keys: list[str]) -> Call:
        """A ``Grep`` with two lines of context around each match."""
        symbol = self.task.symbol
        out: list[str] = []
        for f in files:
            where = symbol_line(f.profile, f.path, symbol)
            start, end, lines = self._snippet(f, where - 2, symbol, width=5)
            for number, line in zip(range(start, end + 1), lines, strict=True):
                if number == where:
                    out.append(f"{self.relative_path(f)}:{number}:{line}")
                else:
                    out.append(f"{self.local_path(f)}-{number}-{line}")
            out.append("--")
        text = "\n".join(out[:-1])
        tool_input = {"pattern": symbol, "output_mode": "content", "context": 2}
        result = {
            "mode": "content",
            "numFiles": 0,
            "filenames": [],
            "content": text,
            "numLines": len(out) - 1 if out else 0,
        }
        return self.call("Grep", tool_input, text or "No matches found", result, result_keys=keys)

    def _bash_grep(self, files: list[_File], keys: list[str]) -> Call:
        """``grep -rn`` through ``Bash``: one matching line per file."""
        symbol = self.task.symbol
        out = []
        for f in files:
            where = symbol_line(f.profile, f.path, symbol)
            line = file_lines(f.profile, f.path, where, where, symbol)[0]
            out.append(f"{self.local_path(f)}:{where}:{line}")
        root = "/workspace"
        command = f'grep -rn "{symbol}" {root} | head -30'
        return self.bash(command, "\n".join(out), result_keys=keys)

    def _glob(self, files: list[_File], keys: list[str]) -> Call:
        """A ``Glob`` of the files' base names."""
        # A brace pattern of base names: every file with one of them matches.
        wanted = list(dict.fromkeys(f.path.rsplit("/", 1)[-1] for f in files))
        pattern = "/workspace/**/{" + ",".join(wanted) + "}"
        matched = [f for f in self.all_files if f.path.rsplit("/", 1)[-1] in wanted]
        names = [self.local_path(f) for f in matched]
        result = {
            "filenames": names,
            "durationMs": self.rng.randint(8, 60),
            "numFiles": len(names),
            "truncated": False,
        }
        return self.call(
            "Glob",
            {"pattern": pattern},
            "\n".join(names),
            result,
            result_keys=[self.key(f) for f in matched],
        )

    def _bash_find(self, files: list[_File], keys: list[str]) -> Call:
        """``find`` through ``Bash``, listing the files."""
        exts = list(dict.fromkeys(f.path.rsplit(".", 1)[-1] for f in files if "." in f.path))
        tests = " -o ".join(f'-name "*.{ext}"' for ext in exts)
        command = f"find /workspace -type f \\( {tests} \\) | head -20"
        return self.bash(
            command,
            "\n".join(self.local_path(f) for f in files),
            description="Check the structure of the repository",
            result_keys=keys,
        )

    def _sourcegraph_search(self, files: list[_File], keys: list[str], style: str) -> Call:
        """A Sourcegraph keyword, natural-language or find-references search."""
        symbol = self.task.symbol
        blocks = []
        for f in files:
            chunks = []
            where = symbol_line(f.profile, f.path, symbol)
            for centre in sorted({where, where + self.rng.randint(20, 300)}):
                if centre > total_lines(f.profile, f.path) - 2:
                    continue
                start, end, lines = self._snippet(f, centre, symbol)
                content = "".join(
                    f"{n}: {line}\n" for n, line in zip(range(start, end + 1), lines, strict=True)
                )
                chunks.append(
                    {
                        "content": content + f"{end + 1}: ",
                        "endLine": end + 1,
                        "startLine": start,
                    }
                )
            blocks.append(
                {
                    "chunks": chunks,
                    "file": f.path,
                    "repo": f.profile.sg_repo,
                    "type": "" if style == "find_references" else "file",
                    "url": f"https://sourcegraph.sourcegraph.com/{f.profile.sg_repo}/-/blob/{f.path}",
                }
            )
        scope = "repo:github.com/sg-evals/" if self.org else f"repo:^{self.task.repos[0].sg_repo}$"
        if style == "find_references":
            anchor = (
                files[0] if files else _File(self.task.repos[0].short, self.task.repos[0].files[0])
            )
            tool_input = {"repo": anchor.profile.sg_repo, "path": anchor.path, "symbol": symbol}
            body = {"fileBlocks": blocks}
        elif style == "nls_search":
            tool_input = {"query": f"{scope} where is {symbol} called and overridden"}
            body = {"blocks": blocks}
        else:
            tool_input = {"query": f"{scope} {symbol}"}
            body = {"blocks": blocks}
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
        block = [{"type": "text", "text": text}]
        return self.call(self.prefix + style, tool_input, block, block, result_keys=keys)

    def _list_files(self, files: list[_File], keys: list[str]) -> Call:
        """Sourcegraph's ``list_files`` of the folder of the first relevant file."""
        # The real listing of one folder: its files and sub-folders.
        anchor = next((f for f in files if f in self.relevant_files), files[0])
        directory = anchor.path.rsplit("/", 1)[0] if "/" in anchor.path else ""
        prefix = f"{directory}/" if directory else ""
        listed: list[_File] = []
        folders: set[str] = set()
        for f in self.all_files:
            if f.repo != anchor.repo or not f.path.startswith(prefix):
                continue
            rest = f.path[len(prefix) :]
            if "/" in rest:
                folders.add(prefix + rest.split("/", 1)[0] + "/")
            else:
                listed.append(f)
        entries = [{"isDirectory": True, "path": d} for d in sorted(folders)]
        entries += [{"isDirectory": False, "path": f.path} for f in listed]
        text = json.dumps({"files": entries}, separators=(",", ":"))
        block = [{"type": "text", "text": text}]
        tool_input = {"repo": anchor.profile.sg_repo, "path": directory}
        return self.call(
            self.prefix + "list_files",
            tool_input,
            block,
            block,
            result_keys=[self.key(f) for f in listed],
        )

    def empty_search(self) -> Call:
        symbol = self.task.symbol
        if self.mcp:
            query = f"repo:^{self.task.repos[0].sg_repo}$ {symbol.replace('_', ' ')} deprecated"
            block = [{"type": "text", "text": '{"blocks":[]}'}]
            return self.call(self.prefix + "keyword_search", {"query": query}, block, block)
        return self.call(
            "Grep",
            {"pattern": f"{symbol}_deprecated", "output_mode": "files_with_matches"},
            "No files found",
            {"mode": "files_with_matches", "filenames": [], "numFiles": 0},
        )

    # -- reads ---------------------------------------------------------------------------
    def read(self, f: _File, style: str, *, whole: bool = False) -> Call:
        symbol = self.task.symbol if f in self.relevant_files else None
        last = total_lines(f.profile, f.path)
        span = self.rng.randint(*self.span)
        if whole:
            start, end = 1, min(last, 2000)
        elif symbol is not None:
            start = max(1, symbol_line(f.profile, f.path, symbol) - self.rng.randint(5, 20))
            end = min(last, start + span - 1)
        else:
            start, end = 1, min(last, span)
        lines = file_lines(f.profile, f.path, start, end, symbol)
        key = self.key(f)
        common: dict[str, Any] = {"arg_keys": [key], "read_keys": [key]}
        if style == "mcp":
            numbered = "\n".join(map(str.__add__, _sg_prefixes(start, end), lines)) + "\n"
            body = {
                "content": numbered + f"{end + 1}: ",
                "url": (
                    f"https://sourcegraph.sourcegraph.com/{f.profile.sg_repo}@{f.profile.revision}"
                    f"/-/blob/{f.path}%3FL{start}-{end}"
                ),
            }
            text = json.dumps(body, separators=(",", ":"), ensure_ascii=False)
            block = [{"type": "text", "text": text}]
            arguments = {
                "repo": f.profile.sg_repo,
                "path": f.path,
                "startLine": start,
                "endLine": end,
            }
            return self.call(self.prefix + "read_file", arguments, block, block, **common)
        raw = "\n".join(lines)
        if style == "sed":
            command = f"sed -n '{start},{end}p' {self.local_path(f)}"
            return self.bash(command, raw, **common)
        if style == "head" and last <= 400:
            # A short file: agents simply cat it.
            whole_file = file_lines(f.profile, f.path, 1, last, symbol)
            return self.bash(f"cat {self.local_path(f)}", "\n".join(whole_file), **common)
        if style == "head":
            lines = (
                lines if start == 1 else file_lines(f.profile, f.path, 1, end - start + 1, symbol)
            )
            return self.bash(
                f"head -n {len(lines)} {self.local_path(f)}", "\n".join(lines), **common
            )
        tool_input: dict[str, Any] = {"file_path": self.local_path(f)}
        if start > 1:
            tool_input["offset"] = start
        if not whole or end < last:
            tool_input["limit"] = end - start + 1
        numbered = "\n".join(map(str.__add__, _cat_prefixes(start, end), lines))
        result = {
            "type": "text",
            "file": {
                "filePath": self.local_path(f),
                "content": raw,
                "numLines": len(lines),
                "startLine": start,
                "totalLines": last,
            },
        }
        return self.call("Read", tool_input, numbered + SYSTEM_REMINDER, result, **common)

    # -- writes --------------------------------------------------------------------------
    def write(self, file_path: str, content: str, key: str) -> Call:
        result: dict[str, Any] = {
            "type": "create",
            "filePath": file_path,
            "content": content,
            "structuredPatch": [],
            "originalFile": None,
        }
        return self.call(
            "Write",
            {"file_path": file_path, "content": content},
            f"File created successfully at: {file_path}",
            result,
            write_keys=[key],
            arg_keys=[key],
        )

    def edit(self, f: _File) -> Call:
        symbol = self.task.symbol
        where = symbol_line(f.profile, f.path, symbol)
        old = file_lines(f.profile, f.path, where, where, symbol)[0]
        new = old.replace(symbol, f"{symbol}_v2") if symbol in old else old + "  # updated"
        path = self.local_path(f)
        snippet = "\n".join(
            f"{n:>6}\u2192{line}"
            for n, line in zip(
                range(where - 2, where + 3),
                [
                    *file_lines(f.profile, f.path, where - 2, where - 1),
                    new,
                    *file_lines(f.profile, f.path, where + 1, where + 2),
                ],
                strict=False,
            )
        )
        content = (
            f"The file {path} has been updated. Here's the result of running `cat -n` on a "
            f"snippet of the edited file:\n{snippet}"
        )
        result = {
            "filePath": path,
            "oldString": old,
            "newString": new,
            "originalFile": None,
            "structuredPatch": [
                {
                    "oldStart": where,
                    "oldLines": 1,
                    "newStart": where,
                    "newLines": 1,
                    "lines": [f"-{old}", f"+{new}"],
                }
            ],
            "userModified": False,
            "replaceAll": False,
        }
        key = self.key(f)
        return self.call(
            "Edit",
            {"file_path": path, "old_string": old, "new_string": new},
            content,
            result,
            write_keys=[key],
            arg_keys=[key],
        )

    def todo(self) -> Call:
        todos = [
            {
                "content": f"Search for {self.task.symbol} definitions and callers",
                "status": "in_progress",
                "activeForm": "Searching the code base",
            },
            {
                "content": "Read the relevant files",
                "status": "pending",
                "activeForm": "Reading the relevant files",
            },
            {
                "content": "Write the result",
                "status": "pending",
                "activeForm": "Writing the result",
            },
        ]
        content = (
            "Todos have been modified successfully. Ensure that you continue to use the todo list "
            "to track your progress. Please proceed with the current tasks if applicable"
        )
        return self.call(
            "TodoWrite", {"todos": todos}, content, {"oldTodos": [], "newTodos": todos}
        )


_THOUGHTS = (
    "Let me understand the task. I need to find where `{symbol}` is defined and used, then {goal}.",
    "The search found some candidates. I should read the definition first and then check the callers.",
    "I have looked at the main files. Let me check the remaining matches to make sure nothing is missed.",
    "Now I have enough context. Let me {goal}.",
)
_TEXTS = (
    "I'll start by searching the code base for `{symbol}`.",
    "Let me look at the files that mention it:",
    "Let me read the relevant parts of these files:",
    "Now let me {goal}:",
)


def _thinking(rng: random.Random, template: str, task: TaskSpec, goal: str) -> str:
    text = template.format(symbol=task.symbol, goal=goal)
    if rng.random() < 0.5:
        text += (
            f"\n\nThe repository is {task.repos[0].upstream}; paths should be repository-relative."
        )
    return text


#: What the agent is asked to produce, by the task's kind of output (said in its thoughts).
_GOALS = {
    "submission": "write the list of files to /workspace/submission.json",
    "edit": "make the change",
    "review": "write the review to /workspace/review.json",
    "answer": "write the answer",
}


def plan_trial(
    task: TaskSpec,
    rng: random.Random,
    *,
    mcp: bool,
    skill: float,
    sg_infix: bool = True,
    read_span: tuple[int, int] = (20, 50),
    pad_bytes: int = 0,
    allow_subagent: bool = True,
    force_subagent: bool = False,
) -> TrialPlan:
    """Plan one trial's agent behaviour (see the module docstring).

    ``skill`` in [0, 1] drives how many relevant files are surfaced and read; ``pad_bytes``
    adds whole-file reads of irrelevant files until the results total about that many
    bytes (for realistic trace sizes).

    Examples
    --------
    >>> from retrieval_lib.synth.catalog import build_task
    >>> plan = plan_trial(build_task(0, 0), random.Random(1), mcp=False, skill=0.8)
    >>> plan.messages[-1].calls
    []
    """
    b = _Builder(task, rng, mcp=mcp, sg_infix=sg_infix, span=read_span)
    relevant = [_File(r, p) for r, p in task.relevant]
    b.relevant_files = frozenset(relevant)
    b.all_files = tuple(_File(p.short, path) for p in task.repos for path in p.files)
    noise = [f for f in b.all_files if f not in b.relevant_files]
    goal = _GOALS[task.output]

    surfaced, to_read, noise_reads = _choose_files(rng, relevant, noise, skill)
    styles, use_subagent = _search_styles(
        rng, mcp=mcp, allow_subagent=allow_subagent, force_subagent=force_subagent
    )
    buckets = _search_buckets(rng, surfaced, noise, len(styles) + (1 if use_subagent else 0))
    messages = _search_messages(b, goal, styles, buckets)
    if use_subagent:
        messages.append(_subagent_message(b, buckets[len(styles)], to_read))
    messages += _read_messages(b, goal, to_read + noise_reads)
    _pad(b, messages, noise, pad_bytes)

    final_calls, submitted_files = _output_calls(b, relevant, surfaced, to_read, noise)
    if final_calls:
        messages.append(
            b.message(
                final_calls,
                thinking=_thinking(rng, _THOUGHTS[3], task, goal),
                text=_TEXTS[3].format(goal=goal),
            )
        )
        check = _output_check(b, final_calls[0])
        if check is not None:
            messages.append(check)
    summary_files = "\n".join(f"- `{b.relative_path(f)}`" for f in submitted_files) or "- (none)"
    final_text = f"I've completed the task for `{task.symbol}`. Files involved:\n\n{summary_files}"
    messages.append(b.message([], thinking="The work is done. Let me summarise.", text=final_text))

    relevant_keys = sorted({b.key(f) for f in relevant})
    _assign_tokens_and_times(messages, rng)
    return TrialPlan(
        messages=messages,
        relevant_keys=relevant_keys,
        submitted_keys=sorted({b.key(f) for f in submitted_files}),
        coverage=_coverage(b, relevant_keys, submitted_files),
        final_text=final_text,
        duration=messages[-1].start + 3.0,
    )


def _choose_files(
    rng: random.Random, relevant: list[_File], noise: list[_File], skill: float
) -> tuple[list[_File], list[_File], list[_File]]:
    """The relevant files the searches surface, those of them read, and irrelevant reads."""
    surfaced = [f for f in relevant if rng.random() < 0.3 + 0.65 * skill]
    if not surfaced and rng.random() < 0.5 + 0.5 * skill:
        surfaced = [rng.choice(relevant)]
    to_read = [f for f in surfaced if rng.random() < 0.45 + 0.55 * skill]
    noise_reads = rng.sample(noise, k=min(len(noise), rng.randint(1, 2)))
    return surfaced, to_read, noise_reads


def _search_styles(
    rng: random.Random, *, mcp: bool, allow_subagent: bool, force_subagent: bool
) -> tuple[list[str], bool]:
    """The searches the agent runs, in order, and whether it also asks a subagent."""
    if mcp:
        styles = ["keyword_search", "nls_search"]
        if rng.random() < 0.5:
            styles.append("list_files")
        if rng.random() < 0.4:
            styles.append("find_references")
    else:
        styles = ["grep_files", rng.choice(["grep_content", "bash_grep"])]
        if rng.random() < 0.5:
            styles.append("glob")
    use_subagent = allow_subagent and not mcp and (force_subagent or rng.random() < 0.25)
    return styles, use_subagent


def _search_buckets(
    rng: random.Random, surfaced: list[_File], noise: list[_File], n: int
) -> dict[int, list[_File]]:
    """The files each of ``n`` searches returns: each surfaced file by one of them, among
    irrelevant hits."""
    buckets: dict[int, list[_File]] = {i: [] for i in range(n)}
    for f in surfaced:
        buckets[rng.randrange(len(buckets))].append(f)
    for files in buckets.values():
        for extra in rng.sample(noise, k=min(len(noise), rng.randint(1, 3))):
            files.insert(rng.randint(0, len(files)), extra)
    return buckets


def _search_messages(
    b: _Builder, goal: str, styles: list[str], buckets: dict[int, list[_File]]
) -> list[Message]:
    """The search phase: an optional look at the layout, then one message per search."""
    rng, task = b.rng, b.task
    messages: list[Message] = []
    first: list[Call] = []
    if not b.mcp and rng.random() < 0.5:
        all_files = list(b.all_files)
        first.append(
            b.search(rng.sample(all_files, k=min(len(all_files), rng.randint(6, 12))), "bash_find")
        )
    messages.append(
        b.message(
            first or [b.search(buckets[0], styles[0])],
            thinking=_thinking(rng, _THOUGHTS[0], task, goal),
            text=_TEXTS[0].format(symbol=task.symbol),
        )
    )
    start_style = 0 if first else 1
    if first:
        messages[-1].calls.append(b.search(buckets[0], styles[0]))
    if rng.random() < 0.2:
        messages.append(b.message([b.todo()]))
    for i in range(start_style, len(styles)):
        calls = [b.search(buckets[i], styles[i])]
        if rng.random() < 0.15:
            calls.append(b.empty_search())
        messages.append(
            b.message(
                calls,
                thinking=_thinking(rng, _THOUGHTS[1], task, goal) if rng.random() < 0.35 else None,
                text=_TEXTS[1] if rng.random() < 0.5 else None,
            )
        )
    return messages


def _subagent_message(b: _Builder, inner_files: list[_File], to_read: list[_File]) -> Message:
    """A ``Task`` call to an Explore subagent that searches for callers and reads one file."""
    rng, task = b.rng, b.task
    task_call = b.call(
        "Task",
        {
            "description": f"Find callers of {task.symbol}",
            "prompt": f"Search the repository for every caller and override of `{task.symbol}` and report the file paths.",
            "subagent_type": "Explore",
        },
        None,
        None,
        latency=0.0,
    )
    inner: list[Message] = [
        b.message(
            [b.search(inner_files, "grep_files")],
            text="Searching for callers.",
            parent=task_call.id,
        ),
    ]
    inner_reads = [f for f in inner_files if f in to_read][:1] or inner_files[:1]
    if inner_reads:
        inner.append(b.message([b.read(inner_reads[0], "read")], parent=task_call.id))
    inner.append(
        b.message(
            [],
            text=f"Found {len(inner_files)} files mentioning `{task.symbol}`.",
            parent=task_call.id,
        )
    )
    task_call.children = inner
    summary = "Files that reference `{}`:\n{}".format(
        task.symbol, "\n".join(f"- {b.relative_path(f)}" for f in inner_files)
    )
    blocks = [{"type": "text", "text": summary}]
    n_inner_calls = sum(len(m.calls) for m in inner)
    task_call.content = blocks
    task_call.tool_use_result = {
        "status": "completed",
        "prompt": task_call.input["prompt"],
        "agentId": b.ids.token(8).lower(),
        "content": blocks,
        "totalDurationMs": rng.randint(8000, 40000),
        "totalTokens": rng.randint(20000, 60000),
        "totalToolUseCount": n_inner_calls,
    }
    task_call.latency = round(sum(c.latency for m in inner for c in m.calls) + 2.0 * len(inner), 3)
    return b.message([task_call], text="Let me use an agent to find all the callers.")


def _read_messages(b: _Builder, goal: str, reads: list[_File]) -> list[Message]:
    """The read phase, in a shuffled order, one to three reads in parallel per message."""
    rng, task, mcp = b.rng, b.task, b.mcp
    messages: list[Message] = []
    rng.shuffle(reads)
    read_style = "mcp" if mcp else "read"
    i = 0
    while i < len(reads):
        group = reads[i : i + rng.choice((1, 2, 2, 3))]
        i += len(group)
        calls = []
        for f in group:
            style = read_style
            if not mcp:
                roll = rng.random()
                style = "sed" if roll < 0.15 else ("head" if roll < 0.22 else "read")
            calls.append(b.read(f, style))
        messages.append(
            b.message(
                calls,
                thinking=_thinking(rng, _THOUGHTS[2], task, goal) if rng.random() < 0.35 else None,
                text=_TEXTS[2] if rng.random() < 0.5 else None,
            )
        )
    return messages


def _pad(b: _Builder, messages: list[Message], noise: list[_File], pad_bytes: int) -> None:
    """Whole-file reads of irrelevant files until the trace is big enough."""
    produced = sum(_result_size(c) for m in messages for c in m.calls)
    while produced < pad_bytes:
        f = b.rng.choice(noise)
        call = b.read(f, "mcp" if b.mcp else "read", whole=True)
        produced += _result_size(call)
        messages.append(b.message([call], text="Let me read the whole file for context:"))


def _output_calls(
    b: _Builder,
    relevant: list[_File],
    surfaced: list[_File],
    to_read: list[_File],
    noise: list[_File],
) -> tuple[list[Call], list[_File]]:
    """The calls that write the task's output, and the files the output names."""
    rng, task = b.rng, b.task
    read_relevant = [f for f in relevant if f in to_read]
    submitted_files = list(read_relevant) + [
        f for f in surfaced if f not in to_read and rng.random() < 0.5
    ]
    if rng.random() < 0.6:
        submitted_files.append(rng.choice(noise))
    final_calls: list[Call] = []
    if task.output == "submission":
        names = [f"{f.repo}::{f.path}" if task.is_org else f.path for f in submitted_files]
        final_calls.append(
            b.write(
                "/workspace/submission.json", json.dumps(names, indent=2) + "\n", "submission.json"
            )
        )
    elif task.output == "review":
        review = [
            {
                "file": b.relative_path(f),
                "line": symbol_line(f.profile, f.path, task.symbol),
                "description": f"Possible defect near {task.symbol}",
            }
            for f in submitted_files
        ]
        final_calls.append(
            b.write("/workspace/review.json", json.dumps(review, indent=2) + "\n", "review.json")
        )
    elif task.output == "answer":
        answer = {
            "pr_number": rng.randint(6000, 9999),
            "title": f"Fix {task.symbol} for llama 3.1 rope scaling",
        }
        final_calls.append(
            b.write("/workspace/answer.json", json.dumps(answer, indent=2) + "\n", "answer.json")
        )
    else:
        submitted_files = [
            f for f in relevant if (f.repo, f.path) in set(task.edit_files) and f in to_read
        ]
        final_calls = [_edit_call(b, f) for f in submitted_files]
    return final_calls, submitted_files


def _edit_call(b: _Builder, f: _File) -> Call:
    """The change to one file: an ``Edit``, or for an MCP agent a ``Write`` of the region."""
    if not b.mcp:
        return b.edit(f)
    symbol = b.task.symbol
    where = symbol_line(f.profile, f.path, symbol)
    body = "\n".join(file_lines(f.profile, f.path, max(1, where - 5), where + 5, symbol)) + "\n"
    return b.write(b.local_path(f), body, b.key(f))


def _output_check(b: _Builder, written: Call) -> Message | None:
    """Sometimes the agent checks the file it wrote: validates its JSON or reads it back."""
    rng = b.rng
    if written.name != "Write" or not rng.random() < 0.4:
        return None
    path = written.input["file_path"]
    if rng.random() < 0.5:
        return b.message(
            [
                b.bash(
                    f"python3 -m json.tool {path} > /dev/null && echo valid",
                    "valid",
                    description="Validate the JSON output",
                )
            ]
        )
    content = written.input["content"]
    numbered = "\n".join(
        f"{n:>6}\u2192{line}" for n, line in enumerate(content.split("\n"), start=1)
    )
    lines = content.split("\n")
    verify = b.call(
        "Read",
        {"file_path": path},
        numbered + SYSTEM_REMINDER,
        {
            "type": "text",
            "file": {
                "filePath": path,
                "content": content,
                "numLines": len(lines),
                "startLine": 1,
                "totalLines": len(lines),
            },
        },
        arg_keys=list(written.write_keys),
        read_keys=list(written.write_keys),
    )
    return b.message([verify], text="Let me verify the file:")


def _coverage(b: _Builder, relevant_keys: list[str], submitted_files: list[_File]) -> float:
    """The share of the expected files the output names (the edited ones for an edit task)."""
    task = b.task
    if task.output == "edit":
        expected = {task.key(r, p) for r, p in task.edit_files}
        done = {b.key(f) for f in submitted_files}
        return len(expected & done) / len(expected) if expected else 0.0
    return len({b.key(f) for f in submitted_files} & set(relevant_keys)) / len(relevant_keys)


def _result_size(call: Call) -> int:
    """Approximate bytes a call adds to its main trace.

    A local result appears twice in a transcript (``content`` and ``tool_use_result``); an
    MCP result is counted once, since MCP trials mostly keep only a trajectory.
    """
    if isinstance(call.tool_use_result, dict) and "file" in call.tool_use_result:
        return 2 * len(call.tool_use_result["file"]["content"]) + 64
    return len(call.text_content) * (1 if call.is_mcp else 2) + 64


def _assign_tokens_and_times(messages: list[Message], rng: random.Random) -> None:
    """Running context size per message (so usage grows) and start times."""

    def walk(msgs: list[Message], context: int, clock: float) -> float:
        pending = rng.randint(4000, 7000)
        for msg in msgs:
            clock += round(rng.uniform(1.2, 3.8), 3)
            msg.start = clock
            msg.input_tokens = rng.randint(3, 14)
            msg.cache_read = context
            msg.cache_creation = pending
            context += pending
            clock += 0.25 * (1 + len(msg.calls)) + (0.3 if msg.thinking else 0.0)
            pending = msg.output_tokens
            for call in msg.calls:
                if call.children:
                    clock = walk(call.children, rng.randint(11000, 14000), clock)
                else:
                    clock += call.latency
                pending += max(8, len(call.text_content) // 4)
        return clock

    walk(messages, rng.randint(15000, 17000), rng.uniform(3.5, 6.0))

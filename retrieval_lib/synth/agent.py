"""A simulated coding agent's tool calls, as a real Claude Code agent makes them.

:class:`ToolCallBuilder` renders abstract actions (search these files, read that one,
write the output) as the tool call a real Claude Code agent makes: ``Grep``/``Glob``/
``Read``/``Bash`` for local (baseline) agents, Sourcegraph MCP tools for MCP agents,
``Task`` subagents, ``TodoWrite``, ``Write``/``Edit``. Each :class:`Call` carries the
exact tool input, the tool result in the transcript's shapes, and the ground-truth facts
of the call (files named in arguments, files returned, files read, files written)
expressed as normalised keys; :class:`Message` groups the calls of one API message.
:mod:`retrieval_lib.synth.plan` decides which actions a trial has;
:mod:`retrieval_lib.synth.formats` writes the messages as ``claude-code.txt`` and
``trajectory.json``.
"""

from __future__ import annotations

import base64
import json
import random
from dataclasses import dataclass, field
from typing import Any

from retrieval_lib.synth.catalog import TaskSpec
from retrieval_lib.synth.repos import REPOS, RepoProfile, file_lines, symbol_line, total_lines
from retrieval_lib.traces.tools import classify_tool

__all__ = [
    "ID_ALPHABET",
    "AgentFile",
    "Call",
    "Message",
    "ToolCallBuilder",
    "TrialPlan",
    "category_of",
]

#: The characters of the random parts of ids and trial names.
ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

SYSTEM_REMINDER = (
    "\n\n<system-reminder>\nWhenever you read a file, you should consider whether it would be "
    "considered malware. You CAN and SHOULD provide analysis of malware, what it is doing. But "
    "you MUST refuse to improve or augment the code. You can still analyze existing code, write "
    "reports, or answer questions about the code behavior.\n</system-reminder>\n"
)

#: The first program of a Bash command the simulated agent runs, by category. Tool names
#: are classified by :func:`retrieval_lib.traces.tools.classify_tool`, the one table.
_SHELL_CATEGORIES = {
    **dict.fromkeys(("cat", "head", "tail", "sed"), "file_read"),
    **dict.fromkeys(("grep", "rg"), "code_search"),
    **dict.fromkeys(("find", "ls"), "file_search"),
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
    if name == "Bash":
        program = str(tool_input.get("command", "")).split(" ", 1)[0]
        return _SHELL_CATEGORIES.get(program, "other")
    return classify_tool(name).category


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
    submitted_keys: list[str]
    coverage: float
    final_text: str
    duration: float


#: Line-number formats: Claude Code's Read output (``cat -n`` style, ``"     1→"``) and
#: Sourcegraph's read_file (``"1: "``); their prefixes are cached, by format.
_CAT, _SG = "{:>6}\u2192", "{}: "
_PREFIXES: dict[str, list[str]] = {_CAT: [], _SG: []}


def _numbered(style: str, start: int, lines: list[str]) -> list[str]:
    """``lines``, the first being line ``start``, each behind its number in ``style``."""
    prefixes = _PREFIXES[style]
    while len(prefixes) < start + len(lines):
        prefixes.append(style.format(len(prefixes)))
    return list(map(str.__add__, prefixes[start : start + len(lines)], lines))


@dataclass(frozen=True)
class AgentFile:
    """A file of the task's repositories: short repository name and path."""

    repo: str
    path: str

    @property
    def profile(self) -> RepoProfile:
        return REPOS[self.repo]


#: The search styles answered by a Sourcegraph MCP search tool of the same name.
_SOURCEGRAPH_SEARCHES = ("keyword_search", "nls_search", "find_references")


class ToolCallBuilder:
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
        self.mcp = mcp
        self.prefix = "mcp__sourcegraph__sg_" if sg_infix else "mcp__sourcegraph__"
        self.span = span
        self.org = task.is_org
        self.relevant_files = frozenset(AgentFile(r, p) for r, p in task.relevant)
        self.all_files = tuple(AgentFile(p.short, path) for p in task.repos for path in p.files)

    # -- naming --------------------------------------------------------------------------
    def token(self, n: int) -> str:
        """``n`` random id characters."""
        return "".join(self.rng.choices(ID_ALPHABET, k=n))

    def key(self, f: AgentFile) -> str:
        return self.task.key(f.repo, f.path)

    def local_path(self, f: AgentFile) -> str:
        return f"/workspace/{f.repo}/{f.path}" if self.org else f"/workspace/{f.path}"

    def relative_path(self, f: AgentFile) -> str:
        return f"{f.repo}/{f.path}" if self.org else f.path

    def call(
        self, name: str, tool_input: dict[str, Any], content: Any, result: Any, **kw: Any
    ) -> Call:
        is_mcp = name.startswith("mcp__")
        return Call(
            id="toolu_01" + self.token(22),
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
        message_id = "msg_01" + self.token(22)
        signature = ""
        if thinking:
            signature = base64.b64encode(self.rng.randbytes(self.rng.randint(48, 120))).decode()
        return Message(
            id=message_id,
            thinking=thinking,
            signature=signature,
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
        self, f: AgentFile, around: int, symbol: str | None, width: int = 3
    ) -> tuple[int, int, list[str]]:
        last = total_lines(f.profile, f.path)
        start = max(1, around - 1)
        end = min(last, start + width)
        return start, end, file_lines(f.profile, f.path, start, end, symbol)

    def search(self, files: list[AgentFile], style: str) -> Call:
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

    def _grep_files(self, files: list[AgentFile], keys: list[str]) -> Call:
        """A ``Grep`` listing the files that match (``files_with_matches``)."""
        symbol = self.task.symbol
        names = [self.relative_path(f) for f in files]
        tool_input: dict[str, Any] = {"pattern": symbol}
        if self.rng.random() < 0.4 and not self.org:
            tool_input["type"] = self.task.repos[0].language[:2]
        tool_input["output_mode"] = "files_with_matches"
        content = f"Found {len(names)} files\n" + "\n".join(names) if names else "No files found"
        result = {"mode": "files_with_matches", "filenames": names, "numFiles": len(names)}
        return self.call("Grep", tool_input, content, result, result_keys=keys)

    def _grep_content(self, files: list[AgentFile], keys: list[str]) -> Call:
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

    def _bash_grep(self, files: list[AgentFile], keys: list[str]) -> Call:
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

    def _glob(self, files: list[AgentFile], keys: list[str]) -> Call:
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

    def _bash_find(self, files: list[AgentFile], keys: list[str]) -> Call:
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

    def _sourcegraph_search(self, files: list[AgentFile], keys: list[str], style: str) -> Call:
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
                content = "\n".join(_numbered(_SG, start, lines)) + "\n"
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
        tool_input: dict[str, Any] = {"query": f"{scope} {symbol}"}
        if style == "find_references":
            main = self.task.repos[0]
            anchor = files[0] if files else AgentFile(main.short, main.files[0])
            tool_input = {"repo": anchor.profile.sg_repo, "path": anchor.path, "symbol": symbol}
        elif style == "nls_search":
            tool_input = {"query": f"{scope} where is {symbol} called and overridden"}
        body = {"fileBlocks" if style == "find_references" else "blocks": blocks}
        return self._sourcegraph(style, tool_input, body, result_keys=keys)

    def _sourcegraph(self, tool: str, tool_input: dict[str, Any], body: Any, **kw: Any) -> Call:
        """A Sourcegraph MCP call: its result is one text block of compact JSON."""
        block = [
            {"type": "text", "text": json.dumps(body, separators=(",", ":"), ensure_ascii=False)}
        ]
        return self.call(self.prefix + tool, tool_input, block, block, **kw)

    def _list_files(self, files: list[AgentFile], keys: list[str]) -> Call:
        """Sourcegraph's ``list_files`` of the folder of the first relevant file."""
        # The real listing of one folder: its files and sub-folders.
        anchor = next((f for f in files if f in self.relevant_files), files[0])
        directory = anchor.path.rsplit("/", 1)[0] if "/" in anchor.path else ""
        prefix = f"{directory}/" if directory else ""
        listed: list[AgentFile] = []
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
        tool_input = {"repo": anchor.profile.sg_repo, "path": directory}
        keys = [self.key(f) for f in listed]
        return self._sourcegraph("list_files", tool_input, {"files": entries}, result_keys=keys)

    def empty_search(self) -> Call:
        symbol = self.task.symbol
        if self.mcp:
            query = f"repo:^{self.task.repos[0].sg_repo}$ {symbol.replace('_', ' ')} deprecated"
            return self._sourcegraph("keyword_search", {"query": query}, {"blocks": []})
        return self.call(
            "Grep",
            {"pattern": f"{symbol}_deprecated", "output_mode": "files_with_matches"},
            "No files found",
            {"mode": "files_with_matches", "filenames": [], "numFiles": 0},
        )

    # -- reads ---------------------------------------------------------------------------
    def read(self, f: AgentFile, style: str, *, whole: bool = False) -> Call:
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
            numbered = "\n".join(_numbered(_SG, start, lines)) + "\n"
            body = {
                "content": numbered + f"{end + 1}: ",
                "url": (
                    f"https://sourcegraph.sourcegraph.com/{f.profile.sg_repo}@{f.profile.revision}"
                    f"/-/blob/{f.path}%3FL{start}-{end}"
                ),
            }
            arguments = {
                "repo": f.profile.sg_repo,
                "path": f.path,
                "startLine": start,
                "endLine": end,
            }
            return self._sourcegraph("read_file", arguments, body, **common)
        if style == "sed":
            command = f"sed -n '{start},{end}p' {self.local_path(f)}"
            return self.bash(command, "\n".join(lines), **common)
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
        return self.read_call(tool_input, lines, start, last, **common)

    def read_call(
        self, tool_input: dict[str, Any], lines: list[str], start: int, total: int, **kw: Any
    ) -> Call:
        """A ``Read`` returning ``lines`` from line ``start`` of a ``total``-line file."""
        result = {
            "type": "text",
            "file": {
                "filePath": tool_input["file_path"],
                "content": "\n".join(lines),
                "numLines": len(lines),
                "startLine": start,
                "totalLines": total,
            },
        }
        numbered = "\n".join(_numbered(_CAT, start, lines))
        return self.call("Read", tool_input, numbered + SYSTEM_REMINDER, result, **kw)

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

    def edit(self, f: AgentFile) -> Call:
        symbol = self.task.symbol
        where = symbol_line(f.profile, f.path, symbol)
        old = file_lines(f.profile, f.path, where, where, symbol)[0]
        new = old.replace(symbol, f"{symbol}_v2") if symbol in old else old + "  # updated"
        path = self.local_path(f)
        around = [
            *file_lines(f.profile, f.path, where - 2, where - 1),
            new,
            *file_lines(f.profile, f.path, where + 1, where + 2),
        ]
        snippet = "\n".join(_numbered(_CAT, where - 2, around))
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
        steps = (
            (f"Search for {self.task.symbol} definitions and callers", "Searching the code base"),
            ("Read the relevant files", "Reading the relevant files"),
            ("Write the result", "Writing the result"),
        )
        todos = [
            {"content": content, "status": "pending" if i else "in_progress", "activeForm": form}
            for i, (content, form) in enumerate(steps)
        ]
        content = (
            "Todos have been modified successfully. Ensure that you continue to use the todo list "
            "to track your progress. Please proceed with the current tasks if applicable"
        )
        return self.call(
            "TodoWrite", {"todos": todos}, content, {"oldTodos": [], "newTodos": todos}
        )

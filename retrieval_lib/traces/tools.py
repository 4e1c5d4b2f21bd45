"""Tool names to retrieval categories.

Every tool call of a trace gets one category (see ``docs/contracts.md`` §1). Local Claude
Code tools are matched by their exact name; MCP tools (``mcp__<server>__<tool>``) by the
tool part, with Sourcegraph's optional ``sg_`` infix removed, so that
``mcp__sourcegraph__sg_keyword_search`` and ``mcp__sourcegraph__keyword_search`` are the
same tool. Unknown tools are ``"other"``; unknown MCP tools keep ``is_mcp=True``.

Bash calls are ``"other"`` here: :mod:`retrieval_lib.events.build` re-classifies the
read-only shell commands with :mod:`retrieval_lib.traces.shell`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal, get_args

ToolCategory = Literal[
    "file_read",
    "file_search",
    "code_search",
    "symbol_navigation",
    "commit_search",
    "deep_search",
    "file_write",
    "other",
]

#: Every category an event can carry, in the contract's order.
TOOL_CATEGORIES: Final[tuple[ToolCategory, ...]] = get_args(ToolCategory)

#: Categories that count as retrieval (writes and ``other`` do not).
RETRIEVAL_CATEGORIES: Final[frozenset[str]] = frozenset(TOOL_CATEGORIES) - {"file_write", "other"}

_LOCAL_TOOLS: Final[dict[str, ToolCategory]] = {
    "Read": "file_read",
    "Glob": "file_search",
    "Grep": "code_search",
    "Write": "file_write",
    "Edit": "file_write",
    "MultiEdit": "file_write",
    "NotebookEdit": "file_write",
}

_MCP_TOOLS: Final[dict[str, ToolCategory]] = {
    "read_file": "file_read",
    "list_files": "file_search",
    "list_repos": "other",
    "get_contributor_repos": "other",
    "find_references": "symbol_navigation",
    "go_to_definition": "symbol_navigation",
    "keyword_search": "code_search",
    "nls_search": "code_search",
    "commit_search": "commit_search",
    "diff_search": "commit_search",
    "compare_revisions": "commit_search",
    "deepsearch": "deep_search",
    "deepsearch_read": "deep_search",
}

_MCP_PREFIX: Final = "mcp__"


@dataclass(frozen=True)
class ToolInfo:
    """How one raw tool name is classified.

    Attributes
    ----------
    category
        One of :data:`TOOL_CATEGORIES`.
    is_mcp
        ``True`` for any ``mcp__<server>__<tool>`` name.
    base_name
        The name that decided the category: the local tool name, or the MCP tool part
        without the ``sg_`` infix, lowercased (``"keyword_search"``).
    server
        The MCP server name (``"sourcegraph"``), ``None`` for local tools.
    """

    category: ToolCategory
    is_mcp: bool
    base_name: str
    server: str | None = None


@lru_cache(maxsize=4096)
def classify_tool(name: str) -> ToolInfo:
    """Classify a raw tool name into a retrieval category.

    Parameters
    ----------
    name
        The tool name as recorded in the trace.

    Returns
    -------
    ToolInfo
        Category, MCP flag and base name. Never raises: unknown names are ``"other"``.

    Examples
    --------
    >>> classify_tool("mcp__sourcegraph__sg_keyword_search")
    ToolInfo(category='code_search', is_mcp=True, base_name='keyword_search', server='sourcegraph')
    >>> classify_tool("Read").category
    'file_read'
    >>> classify_tool("mcp__github__create_issue").category
    'other'
    """
    if name.startswith(_MCP_PREFIX):
        server, sep, tool = name[len(_MCP_PREFIX) :].partition("__")
        if not sep:
            # "mcp__tool" without a server part: still an MCP call.
            server, tool = "", server
        base = tool.lower()
        if base.startswith("sg_"):
            base = base[3:]
        return ToolInfo(_MCP_TOOLS.get(base, "other"), True, base, server or None)
    return ToolInfo(_LOCAL_TOOLS.get(name, "other"), False, name, None)

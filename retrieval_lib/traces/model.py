"""Trace-neutral records produced by the trace parsers and consumed by the event builder.

Both parsers (:mod:`retrieval_lib.traces.atif` for ``agent/trajectory.json`` and
:mod:`retrieval_lib.traces.stream_json` for ``agent/claude-code.txt``) return a
:class:`ParsedTrace`; :mod:`retrieval_lib.traces.merge` joins two of them on the
tool-call id. Nothing here knows about ground truth, metrics or files on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

TraceSource = Literal["trajectory", "transcript", "merged"]


@dataclass(slots=True)
class ToolCall:
    """One tool invocation and its result, in execution order.

    Attributes
    ----------
    call_id
        The tool-call id (``tool_call_id`` in ATIF, ``tool_use.id`` in stream-json);
        ``None`` only when the trace carries none.
    name
        Raw tool name, e.g. ``"Read"`` or ``"mcp__sourcegraph__sg_keyword_search"``.
    arguments
        The call's input object as recorded (never mutated).
    result
        The tool result as text (JSON results stay JSON text), ``None`` when the trace
        has no result for this call (e.g. the agent was killed).
    is_error
        ``True`` when the trace marks the result as an error, ``None`` when unknown.
    timestamp
        ISO 8601 timestamp of the call (ATIF steps carry one; stream-json lines do not).
    parent_call_id
        The Task call id this call ran under (``parent_tool_use_id``), ``None`` at top level.
    is_sidechain
        ATIF ``extra.is_sidechain`` when present (another subagent marker).
    cumulative_tokens
        Running total of tokens (input + cache creation + cache read + output) over the
        distinct API messages up to and including the message that issued this call;
        ``None`` when the trace has no usage.
    order
        Position of the call in its source trace (0-based, counting tool calls only).
    source
        Which trace the record came from.
    """

    call_id: str | None
    name: str
    arguments: dict[str, Any]
    result: str | None = None
    is_error: bool | None = None
    timestamp: str | None = None
    parent_call_id: str | None = None
    is_sidechain: bool | None = None
    cumulative_tokens: int | None = None
    order: int = 0
    source: TraceSource = "trajectory"
    # Structured tool result where the trace offers one (stream-json ``tool_use_result``).
    structured_result: Any = None


@dataclass
class SessionTotals:
    """Session-level usage and cost as the trace itself reports them."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    duration_seconds: float | None = None
    num_turns: int | None = None
    #: Where the figures came from, e.g. ``"transcript.result.modelUsage"``,
    #: ``"trajectory.final_metrics"``, ``"transcript.messages(deduplicated)"``.
    source: str | None = None
    #: ``True`` when ``output_tokens`` is built from per-message stream placeholders (the
    #: true output count is unknown), ``False`` when it comes from a session total or from
    #: per-message counts that carry final figures, ``None`` when there is no count.
    output_tokens_placeholder: bool | None = None
    #: Why: which figures are placeholders and what the trace's other totals say.
    output_tokens_note: str | None = None


@dataclass
class ParsedTrace:
    """Everything the event builder needs from one trace file (or a merge of two)."""

    source: TraceSource
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: Timestamp of the first step/line (agent start) when known.
    started_at: str | None = None
    model: str | None = None
    harness_version: str | None = None
    totals: SessionTotals = field(default_factory=SessionTotals)
    #: Human-readable notes on gaps: truncated last line, unparseable lines, ...
    warnings: list[str] = field(default_factory=list)
    #: True when the file ended in a line that did not parse (agent killed mid-write).
    truncated: bool = False
    lines_total: int = 0
    lines_skipped: int = 0

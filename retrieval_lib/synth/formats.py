"""Serialise a planned trial as the files a real Harbor / Claude Code trial leaves.

* :func:`transcript_lines`: ``agent/claude-code.txt`` (stream-json, one content block per
  line, usage repeated over the lines of one API message, ``parent_tool_use_id`` inside
  subagents, a closing ``result`` line with ``total_cost_usd`` and ``modelUsage``).
* :func:`trajectory_bytes`: ``agent/trajectory.json`` (ATIF-v1.2, one step per content
  block, ``observation.results[].source_call_id``, parallel calls in the reverse order of
  the transcript, per-message metrics repeated over steps).
* :func:`harbor_task`, :func:`indent4`: a piece and the layout of Harbor's JSON documents
  (a trial's ``result.json``, made in :mod:`retrieval_lib.synth.trial`; job files).

The byte layout follows the real files: transcripts are compact UTF-8 JSON lines;
trajectories are indented by two spaces with non-ASCII escaped and no final newline;
``result.json`` is indented by four spaces, no final newline.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson

from retrieval_lib.synth.agent import Call, Message, TrialPlan

__all__ = [
    "LineInfo",
    "SessionMeta",
    "Totals",
    "all_messages",
    "harbor_task",
    "indent4",
    "iso_us",
    "totals",
    "trajectory_bytes",
    "transcript_lines",
]

#: Prices (USD per token) used for ``total_cost_usd``: Haiku 4.5, 1-hour cache writes.
PRICE_INPUT = 1e-6
PRICE_OUTPUT = 5e-6
PRICE_CACHE_READ = 1e-7
PRICE_CACHE_WRITE = 2e-6

LOCAL_TOOLS = [
    "Task", "TaskOutput", "Bash", "Glob", "Grep", "ExitPlanMode", "Read", "Edit", "Write",
    "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "TaskStop", "AskUserQuestion",
    "Skill", "EnterPlanMode", "EnterWorktree", "ToolSearch",
]  # fmt: skip
MCP_TOOL_NAMES = [
    "keyword_search", "nls_search", "read_file", "list_files", "list_repos", "find_references",
    "go_to_definition", "commit_search", "diff_search", "compare_revisions", "deepsearch",
]  # fmt: skip


def uuid4(rng: random.Random) -> str:
    """A random-looking UUID4 string drawn from ``rng`` (deterministic)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def iso_ms(moment: datetime) -> str:
    """ATIF timestamp: ``2026-02-28T03:15:10.067Z``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_us(moment: datetime) -> str:
    """``result.json`` timestamp: ``2026-02-28T03:13:55.249744`` (naive, microseconds)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")


@dataclass(frozen=True)
class SessionMeta:
    """Identity of one agent session."""

    session_id: str
    model: str
    version: str
    mcp: bool
    sg_infix: bool
    instruction: str
    agent_start: datetime
    """``agent_execution.started_at`` of the trial."""


@dataclass(frozen=True)
class Totals:
    """Token totals and cost over distinct API messages."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_creation_tokens: int
    cost_usd: float
    distinct_messages: int


def all_messages(messages: list[Message]) -> Iterator[Message]:
    """``messages`` and their subagents' messages, each right after the message of its call."""
    for msg in messages:
        yield msg
        for call in msg.calls:
            yield from all_messages(call.children)


def _sums(messages: list[Message]) -> Totals:
    inp = sum(m.input_tokens for m in messages)
    out = sum(m.output_tokens for m in messages)
    cr = sum(m.cache_read for m in messages)
    cc = sum(m.cache_creation for m in messages)
    cost = inp * PRICE_INPUT + out * PRICE_OUTPUT + cr * PRICE_CACHE_READ + cc * PRICE_CACHE_WRITE
    return Totals(inp, out, cr, cc, cost, len(messages))


def totals(plan: TrialPlan) -> Totals:
    """The session's totals (subagents included), as the transcript's ``result`` line has them."""
    return _sums(list(all_messages(plan.messages)))


# --------------------------------------------------------------------------------------
# Transcript (stream-json)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineInfo:
    """What one transcript line carries: ``tool_use`` / ``tool_result`` of a call, or other."""

    kind: str
    call_id: str | None = None


def _message_usage(msg: Message) -> dict[str, Any]:
    """The ``usage`` of an assistant line (output tokens: the streaming placeholder)."""
    return {
        "input_tokens": msg.input_tokens,
        "cache_creation_input_tokens": msg.cache_creation,
        "cache_read_input_tokens": msg.cache_read,
        "cache_creation": {
            "ephemeral_5m_input_tokens": 0,
            "ephemeral_1h_input_tokens": msg.cache_creation,
        },
        "output_tokens": msg.placeholder_output,
        "service_tier": "standard",
        "inference_geo": "not_available",
    }


def _final_usage(
    input_tokens: int, cache_creation: int, cache_read: int, output_tokens: int
) -> dict[str, Any]:
    """A message's usage once it is complete (the ``result`` line's for the session)."""
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_creation,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output_tokens,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
        "cache_creation": {
            "ephemeral_1h_input_tokens": cache_creation,
            "ephemeral_5m_input_tokens": 0,
        },
        "inference_geo": "",
        "iterations": [],
        "speed": "standard",
    }


def _dump_line(value: Any) -> bytes:
    return orjson.dumps(value) + b"\n"


def transcript_lines(
    plan: TrialPlan, meta: SessionMeta, rng: random.Random
) -> list[tuple[bytes, LineInfo]]:
    """The transcript as ``(line bytes, info)`` pairs, ending with the ``result`` line.

    Examples
    --------
    >>> from datetime import datetime
    >>> from retrieval_lib.synth.plan import plan_trial
    >>> from retrieval_lib.synth.catalog import build_task
    >>> plan = plan_trial(build_task(0, 0), random.Random(1), mcp=False, skill=0.8)
    >>> meta = SessionMeta("s", "claude-haiku-4-5-20251001", "2.1.62", False, True, "x", datetime(2026, 3, 1))
    >>> lines = transcript_lines(plan, meta, random.Random(2))
    >>> lines[0][1].kind, lines[-1][1].kind
    ('system', 'result')
    """
    out: list[tuple[bytes, LineInfo]] = [(_dump_line(_init_line(meta, rng)), LineInfo("system"))]
    _emit_messages(out, plan.messages, None, meta, rng, {"rate_limit_done": False})
    out.append((_dump_line(_result_line(plan, meta, rng)), LineInfo("result")))
    return out


#: Slash commands the ``init`` line lists.
_SLASH_COMMANDS = [
    "debug", "compact", "context", "cost", "init", "pr-comments", "release-notes", "review",
    "security-review", "insights",
]  # fmt: skip


def _init_line(meta: SessionMeta, rng: random.Random) -> dict[str, Any]:
    """The ``system``/``init`` line: the session's tools, MCP servers and model."""
    tools = list(LOCAL_TOOLS)
    mcp_servers: list[dict[str, str]] = []
    if meta.mcp:
        prefix = "mcp__sourcegraph__sg_" if meta.sg_infix else "mcp__sourcegraph__"
        tools += [prefix + name for name in MCP_TOOL_NAMES]
        mcp_servers = [{"name": "sourcegraph", "status": "connected"}]
    return {
        "type": "system",
        "subtype": "init",
        "cwd": "/workspace",
        "session_id": meta.session_id,
        "tools": tools,
        "mcp_servers": mcp_servers,
        "model": meta.model,
        "permissionMode": "bypassPermissions",
        "slash_commands": list(_SLASH_COMMANDS),
        "apiKeySource": "none",
        "claude_code_version": meta.version,
        "output_style": "default",
        "agents": ["general-purpose", "statusline-setup", "Explore", "Plan"],
        "skills": ["debug"],
        "plugins": [],
        "uuid": uuid4(rng),
        "fast_mode_state": "off",
    }


def _emit_messages(
    out: list[tuple[bytes, LineInfo]],
    messages: list[Message],
    parent: str | None,
    meta: SessionMeta,
    rng: random.Random,
    state: dict[str, bool],
) -> None:
    """Append each message's lines: one assistant line per block, the session's first
    rate-limit event, then each call's subagent lines and result."""
    for msg in messages:
        out.extend(_assistant_lines(msg, parent, meta, rng))
        if msg.calls and not state["rate_limit_done"]:
            state["rate_limit_done"] = True
            out.append((_dump_line(_rate_limit_event(meta, rng)), LineInfo("rate_limit_event")))
        for call in msg.calls:
            if call.children:
                _emit_messages(out, call.children, call.id, meta, rng, state)
            out.append(
                (
                    _dump_line(_tool_result_line(call, parent, meta, rng)),
                    LineInfo("tool_result", call.id),
                )
            )


def _assistant_lines(
    msg: Message, parent: str | None, meta: SessionMeta, rng: random.Random
) -> list[tuple[bytes, LineInfo]]:
    """One ``assistant`` line per content block (thinking, text, each tool use)."""
    blocks: list[tuple[dict[str, Any], str | None]] = []
    if msg.thinking:
        blocks.append(
            ({"type": "thinking", "thinking": msg.thinking, "signature": msg.signature}, None)
        )
    if msg.text:
        blocks.append(({"type": "text", "text": msg.text}, None))
    for call in msg.calls:
        tool_use = {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": call.input,
            "caller": {"type": "direct"},
        }
        blocks.append((tool_use, call.id))
    usage = _message_usage(msg)
    out = []
    for block, call_id in blocks:
        line = {
            "type": "assistant",
            "message": {
                "model": meta.model,
                "id": msg.id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage,
                "context_management": None,
            },
            "parent_tool_use_id": parent,
            "session_id": meta.session_id,
            "uuid": uuid4(rng),
        }
        out.append((_dump_line(line), LineInfo("tool_use" if call_id else "assistant", call_id)))
    return out


def _rate_limit_event(meta: SessionMeta, rng: random.Random) -> dict[str, Any]:
    """The ``rate_limit_event`` line Claude Code writes after the first tool use."""
    return {
        "type": "rate_limit_event",
        "rate_limit_info": {
            "status": "allowed",
            "resetsAt": int(meta.agent_start.timestamp()) // 3600 * 3600 + 18000,
            "rateLimitType": "five_hour",
            "overageStatus": "rejected",
            "overageDisabledReason": "org_level_disabled_until",
            "isUsingOverage": False,
        },
        "uuid": uuid4(rng),
        "session_id": meta.session_id,
    }


def _tool_result_line(
    call: Call, parent: str | None, meta: SessionMeta, rng: random.Random
) -> dict[str, Any]:
    """The ``user`` line carrying a call's ``tool_result`` and ``tool_use_result``."""
    return {
        "type": "user",
        "message": {"role": "user", "content": [_raw_result(call)]},
        "parent_tool_use_id": parent,
        "session_id": meta.session_id,
        "uuid": uuid4(rng),
        "tool_use_result": call.tool_use_result,
    }


def _result_line(plan: TrialPlan, meta: SessionMeta, rng: random.Random) -> dict[str, Any]:
    """The closing ``result`` line: duration, turns, the session's usage and cost."""
    t = totals(plan)
    main = _sums(plan.messages)
    duration_ms = int(plan.duration * 1000)
    n_calls = sum(len(m.calls) for m in plan.messages)
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "duration_ms": duration_ms,
        "duration_api_ms": int(duration_ms * rng.uniform(0.45, 0.8)),
        "num_turns": n_calls + 1,
        "result": plan.final_text,
        "stop_reason": None,
        "session_id": meta.session_id,
        "total_cost_usd": t.cost_usd,
        "usage": _final_usage(
            main.input_tokens,
            main.cache_creation_tokens,
            main.cache_read_tokens,
            main.output_tokens,
        ),
        "modelUsage": {
            meta.model: {
                "inputTokens": t.input_tokens,
                "outputTokens": t.output_tokens,
                "cacheReadInputTokens": t.cache_read_tokens,
                "cacheCreationInputTokens": t.cache_creation_tokens,
                "webSearchRequests": 0,
                "costUSD": t.cost_usd,
                "contextWindow": 200000,
                "maxOutputTokens": 32000,
            }
        },
        "permission_denials": [],
        "uuid": uuid4(rng),
    }


# --------------------------------------------------------------------------------------
# Trajectory (ATIF)
# --------------------------------------------------------------------------------------


def _metrics(msg: Message, last: bool) -> dict[str, Any]:
    """A step's metrics; ``extra`` is the message's usage without input and output tokens:
    the streamed usage, or on the message's last step the final one."""
    if last:
        tokens = (msg.input_tokens, msg.cache_creation, msg.cache_read, msg.output_tokens)
        usage = _final_usage(*tokens)
    else:
        usage = _message_usage(msg)
    return {
        "prompt_tokens": msg.input_tokens + msg.cache_read,
        "completion_tokens": msg.output_tokens if last else msg.placeholder_output,
        "cached_tokens": msg.cache_read,
        "extra": {k: v for k, v in usage.items() if k not in ("input_tokens", "output_tokens")},
    }


def _observation_content(call: Call) -> str:
    text = call.text_content.strip()
    if call.is_mcp:
        return text
    return text + "\n\n[metadata] " + json.dumps(call.tool_use_result)


def _raw_result(call: Call) -> dict[str, Any]:
    raw: dict[str, Any] = {"tool_use_id": call.id, "type": "tool_result", "content": call.content}
    if call.is_error is not None:
        raw["is_error"] = call.is_error
    return raw


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _escape_unit(match: re.Match[str]) -> str:
    encoded = match.group().encode("utf-16-be")
    return "".join(f"\\u{encoded[i] << 8 | encoded[i + 1]:04x}" for i in range(0, len(encoded), 2))


def ascii_json(text: str) -> str:
    """Escape non-ASCII characters of JSON text as ``\\uXXXX`` (like ``ensure_ascii``).

    Examples
    --------
    >>> ascii_json('"a\u2192b"')
    '"a\\\\u2192b"'
    """
    if text.isascii():
        return text
    # The arrow of Read output is by far the most frequent non-ASCII character.
    text = text.replace("\u2192", "\\u2192")
    return text if text.isascii() else _NON_ASCII.sub(_escape_unit, text)


def trajectory_bytes(plan: TrialPlan, meta: SessionMeta) -> tuple[bytes, list[Call]]:
    """The ATIF document and the tool calls in the order of its steps."""
    steps: list[dict[str, Any]] = []
    order: list[Call] = []
    first = meta.agent_start + timedelta(seconds=plan.messages[0].start - 0.9)
    steps.append(
        {
            "step_id": 1,
            "timestamp": iso_ms(first),
            "source": "user",
            "message": meta.instruction,
            "extra": {"is_sidechain": False},
        }
    )
    _emit_steps(steps, order, plan.messages, False, meta)
    document = {
        "schema_version": "ATIF-v1.2",
        "session_id": meta.session_id,
        "agent": {
            "name": "claude-code",
            "version": meta.version,
            "model_name": meta.model,
            "extra": {"cwds": ["/workspace"], "git_branches": ["master"]},
        },
        "steps": steps,
        "final_metrics": _final_metrics(steps),
    }
    text = ascii_json(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode("utf-8"))
    return text.encode("ascii"), order


def _emit_steps(
    steps: list[dict[str, Any]],
    order: list[Call],
    messages: list[Message],
    sidechain: bool,
    meta: SessionMeta,
) -> None:
    """Append one agent step per block of each message (thinking, text, then its tool calls
    in reverse order), a subagent's steps right after its ``Task`` call."""
    for msg in messages:
        kinds: list[tuple[str, Call | None]] = []
        if msg.thinking:
            kinds.append(("thinking", None))
        if msg.text:
            kinds.append(("text", None))
        kinds += [("tool", call) for call in reversed(msg.calls)]
        for k, (kind, call) in enumerate(kinds):
            last = k == len(kinds) - 1
            when = meta.agent_start + timedelta(seconds=msg.start + 0.21 * k)
            step: dict[str, Any] = {
                "step_id": len(steps) + 1,
                "timestamp": iso_ms(when),
                "source": "agent",
                "model_name": meta.model,
            }
            extra: dict[str, Any] = {}
            if last:
                extra["stop_reason"] = "tool_use" if msg.calls else "end_turn"
            extra["cwd"] = "/workspace"
            extra["is_sidechain"] = sidechain
            if kind == "thinking":
                step["message"] = ""
                step["reasoning_content"] = "null"
            elif kind == "text":
                step["message"] = msg.text
            else:
                assert call is not None
                order.append(call)
                _fill_tool_step(step, extra, call)
            step["metrics"] = _metrics(msg, last)
            step["extra"] = extra
            steps.append(step)
            if call is not None and call.children:
                _emit_steps(steps, order, call.children, True, meta)


def _fill_tool_step(step: dict[str, Any], extra: dict[str, Any], call: Call) -> None:
    """A tool call's step: the call, its observation, and (local tools) the raw result."""
    step["message"] = f"Executed {call.name} {call.id}"
    step["tool_calls"] = [
        {
            "tool_call_id": call.id,
            "function_name": call.name,
            "arguments": call.input,
        }
    ]
    step["observation"] = {
        "results": [{"source_call_id": call.id, "content": _observation_content(call)}]
    }
    extra["tool_use_name"] = call.name
    if not call.is_mcp:
        metadata = {
            "tool_use_result": call.tool_use_result,
            "raw_tool_result": _raw_result(call),
        }
        extra["tool_result_metadata"] = metadata
        extra["metadata"] = metadata
    extra["raw_arguments"] = call.input


def _final_metrics(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The document's ``final_metrics``: token sums over the agent steps."""
    agent_steps = [s for s in steps if "metrics" in s]
    return {
        "total_prompt_tokens": sum(s["metrics"]["prompt_tokens"] for s in agent_steps),
        "total_completion_tokens": sum(s["metrics"]["completion_tokens"] for s in agent_steps),
        "total_cached_tokens": sum(s["metrics"]["cached_tokens"] for s in agent_steps),
        "total_steps": len(steps),
        "extra": {
            "service_tiers": ["standard"],
            "total_cache_creation_input_tokens": sum(
                s["metrics"]["extra"]["cache_creation_input_tokens"] for s in agent_steps
            ),
            "total_cache_read_input_tokens": sum(
                s["metrics"]["extra"]["cache_read_input_tokens"] for s in agent_steps
            ),
        },
    }


# --------------------------------------------------------------------------------------
# JSON documents of Harbor (result.json, job files)
# --------------------------------------------------------------------------------------


def harbor_task(path: str) -> dict[str, Any]:
    """The ``task`` entry of a Harbor trial or job config."""
    return {
        "path": path,
        "git_url": None,
        "git_commit_id": None,
        "overwrite": False,
        "download_dir": None,
        "source": None,
    }


def indent4(value: Any) -> bytes:
    """``json.dumps(value, indent=4)`` bytes, produced with orjson (strings hold no newlines).

    Examples
    --------
    >>> indent4({"a": [1, {}], "b": "\u00e9"}) == json.dumps({"a": [1, {}], "b": "\u00e9"}, indent=4).encode()
    True
    """
    text = ascii_json(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode("utf-8"))
    lines = text.split("\n")
    return "\n".join(" " * (len(line) - len(line.lstrip(" "))) + line for line in lines).encode(
        "ascii"
    )

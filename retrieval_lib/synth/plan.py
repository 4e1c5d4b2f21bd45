"""What a simulated coding agent does in one trial: what it searches, reads and writes.

:func:`plan_trial` decides, from a latent skill and a seeded RNG, which relevant files
the agent's searches surface, which it reads, and what it writes, and renders each step
with :class:`~retrieval_lib.synth.agent.ToolCallBuilder`. The result is a
:class:`~retrieval_lib.synth.agent.TrialPlan`: the list of
:class:`~retrieval_lib.synth.agent.Message` objects (one per API message) with their
calls, token counts and start times, and the facts the output contains.
"""

from __future__ import annotations

import json
import random
from typing import Any

from retrieval_lib.synth.agent import (
    AgentFile,
    Call,
    Message,
    ToolCallBuilder,
    TrialPlan,
)
from retrieval_lib.synth.catalog import TaskSpec
from retrieval_lib.synth.repos import file_lines, symbol_line

__all__ = ["plan_trial"]


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


def _maybe_commented(b: ToolCallBuilder, calls: list[Call], goal: str, phase: int) -> Message:
    """A message of ``calls``, sometimes with the thought and the text of ``phase``."""
    rng = b.rng
    thinking = _thinking(rng, _THOUGHTS[phase], b.task, goal) if rng.random() < 0.35 else None
    return b.message(calls, thinking=thinking, text=_TEXTS[phase] if rng.random() < 0.5 else None)


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
    b = ToolCallBuilder(task, rng, mcp=mcp, sg_infix=sg_infix, span=read_span)
    relevant = [AgentFile(r, p) for r, p in task.relevant]
    noise = [f for f in b.all_files if f not in b.relevant_files]
    goal = _GOALS[task.output]

    surfaced, to_read, noise_reads = _choose_files(rng, relevant, noise, skill)
    styles, use_subagent = _search_styles(rng, mcp=mcp, force_subagent=force_subagent)
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
        submitted_keys=sorted({b.key(f) for f in submitted_files}),
        coverage=_coverage(b, relevant_keys, submitted_files),
        final_text=final_text,
        duration=messages[-1].start + 3.0,
    )


def _choose_files(
    rng: random.Random, relevant: list[AgentFile], noise: list[AgentFile], skill: float
) -> tuple[list[AgentFile], list[AgentFile], list[AgentFile]]:
    """The relevant files the searches surface, those of them read, and irrelevant reads."""
    surfaced = [f for f in relevant if rng.random() < 0.3 + 0.65 * skill]
    if not surfaced and rng.random() < 0.5 + 0.5 * skill:
        surfaced = [rng.choice(relevant)]
    to_read = [f for f in surfaced if rng.random() < 0.45 + 0.55 * skill]
    noise_reads = rng.sample(noise, k=min(len(noise), rng.randint(1, 2)))
    return surfaced, to_read, noise_reads


def _search_styles(
    rng: random.Random, *, mcp: bool, force_subagent: bool
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
    use_subagent = not mcp and (force_subagent or rng.random() < 0.25)
    return styles, use_subagent


def _search_buckets(
    rng: random.Random, surfaced: list[AgentFile], noise: list[AgentFile], n: int
) -> dict[int, list[AgentFile]]:
    """The files each of ``n`` searches returns: each surfaced file by one of them, among
    irrelevant hits."""
    buckets: dict[int, list[AgentFile]] = {i: [] for i in range(n)}
    for f in surfaced:
        buckets[rng.randrange(len(buckets))].append(f)
    for files in buckets.values():
        for extra in rng.sample(noise, k=min(len(noise), rng.randint(1, 3))):
            files.insert(rng.randint(0, len(files)), extra)
    return buckets


def _search_messages(
    b: ToolCallBuilder, goal: str, styles: list[str], buckets: dict[int, list[AgentFile]]
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
        messages.append(_maybe_commented(b, calls, goal, 1))
    return messages


def _subagent_message(
    b: ToolCallBuilder, inner_files: list[AgentFile], to_read: list[AgentFile]
) -> Message:
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
        "agentId": b.token(8).lower(),
        "content": blocks,
        "totalDurationMs": rng.randint(8000, 40000),
        "totalTokens": rng.randint(20000, 60000),
        "totalToolUseCount": n_inner_calls,
    }
    task_call.latency = round(sum(c.latency for m in inner for c in m.calls) + 2.0 * len(inner), 3)
    return b.message([task_call], text="Let me use an agent to find all the callers.")


def _read_messages(b: ToolCallBuilder, goal: str, reads: list[AgentFile]) -> list[Message]:
    """The read phase, in a shuffled order, one to three reads in parallel per message."""
    rng, mcp = b.rng, b.mcp
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
        messages.append(_maybe_commented(b, calls, goal, 2))
    return messages


def _pad(
    b: ToolCallBuilder, messages: list[Message], noise: list[AgentFile], pad_bytes: int
) -> None:
    """Whole-file reads of irrelevant files until the trace is big enough."""
    produced = sum(_result_size(c) for m in messages for c in m.calls)
    while produced < pad_bytes:
        f = b.rng.choice(noise)
        call = b.read(f, "mcp" if b.mcp else "read", whole=True)
        produced += _result_size(call)
        messages.append(b.message([call], text="Let me read the whole file for context:"))


def _output_calls(
    b: ToolCallBuilder,
    relevant: list[AgentFile],
    surfaced: list[AgentFile],
    to_read: list[AgentFile],
    noise: list[AgentFile],
) -> tuple[list[Call], list[AgentFile]]:
    """The calls that write the task's output, and the files the output names."""
    rng, task = b.rng, b.task
    read_relevant = [f for f in relevant if f in to_read]
    submitted_files = list(read_relevant) + [
        f for f in surfaced if f not in to_read and rng.random() < 0.5
    ]
    if rng.random() < 0.6:
        submitted_files.append(rng.choice(noise))
    value: Any
    if task.output == "edit":
        edited = [f for f in relevant if (f.repo, f.path) in set(task.edit_files) and f in to_read]
        return [_edit_call(b, f) for f in edited], edited
    if task.output == "submission":
        value = [f"{f.repo}::{f.path}" if task.is_org else f.path for f in submitted_files]
    elif task.output == "review":
        value = [
            {
                "file": b.relative_path(f),
                "line": symbol_line(f.profile, f.path, task.symbol),
                "description": f"Possible defect near {task.symbol}",
            }
            for f in submitted_files
        ]
    else:
        value = {
            "pr_number": rng.randint(6000, 9999),
            "title": f"Fix {task.symbol} for llama 3.1 rope scaling",
        }
    name = f"{task.output}.json"
    return [
        b.write(f"/workspace/{name}", json.dumps(value, indent=2) + "\n", name)
    ], submitted_files


def _edit_call(b: ToolCallBuilder, f: AgentFile) -> Call:
    """The change to one file: an ``Edit``, or for an MCP agent a ``Write`` of the region."""
    if not b.mcp:
        return b.edit(f)
    symbol = b.task.symbol
    where = symbol_line(f.profile, f.path, symbol)
    body = "\n".join(file_lines(f.profile, f.path, max(1, where - 5), where + 5, symbol)) + "\n"
    return b.write(b.local_path(f), body, b.key(f))


def _output_check(b: ToolCallBuilder, written: Call) -> Message | None:
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
    lines = written.input["content"].split("\n")
    verify = b.read_call(
        {"file_path": path},
        lines,
        1,
        len(lines),
        arg_keys=list(written.write_keys),
        read_keys=list(written.write_keys),
    )
    return b.message([verify], text="Let me verify the file:")


def _coverage(
    b: ToolCallBuilder, relevant_keys: list[str], submitted_files: list[AgentFile]
) -> float:
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

"""One trial's files: the agent's planned work written as traces, ``result.json`` and
``verifier/reward.txt``, and the facts those files contain.

:class:`TrialWriter` plans a trial (:func:`retrieval_lib.synth.plan.plan_trial`),
writes its files in the shape its :class:`Variant` asks for (transcript, trajectory,
both or none; cut off; behind shell banner lines) and returns its
:class:`~retrieval_lib.synth.manifest.TrialFacts`. :mod:`retrieval_lib.synth.generator`
decides which trials a generation has and where they go.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from retrieval_lib.synth.agent import Call, TrialPlan
from retrieval_lib.synth.catalog import TaskSpec
from retrieval_lib.synth.formats import (
    SessionMeta,
    all_messages,
    harbor_task,
    indent4,
    iso_us,
    totals,
    trajectory_bytes,
    transcript_lines,
    uuid4,
)
from retrieval_lib.synth.manifest import CallFacts, TrialFacts
from retrieval_lib.synth.plan import plan_trial

__all__ = [
    "BASELINE_CONFIG",
    "MCP_CONFIG",
    "MODEL",
    "TrialSpec",
    "TrialWriter",
    "Variant",
    "Writer",
]

BASELINE_CONFIG = "baseline-local-direct"
MCP_CONFIG = "mcp-remote-direct"
MODEL = "claude-haiku-4-5-20251001"
#: Harness (Claude Code) versions: batch runs, and the older archived run.
HARNESS_VERSION = "2.1.62"
ARCHIVED_HARNESS_VERSION = "2.1.50"

_BANNER = (
    "bash: cannot set terminal process group (-1): Inappropriate ioctl for device\n"
    "bash: no job control in this shell\n"
    "npm warn deprecated @anthropic-ai/claude-code-cli@0.2.0: use @anthropic-ai/claude-code\n"
)

_MCP_PREAMBLE = (
    "# IMPORTANT: Source Code Access\n\n"
    "**Local source files are not present.** Your workspace does not contain source code. "
    "You **MUST** use Sourcegraph MCP tools to discover, read, and understand code before "
    "making any changes.\n\n"
    "{targets}\n\n"
    "## Tool Selection\n\n"
    "| Goal | Tool |\n|------|------|\n"
    "| Exact symbol/string | `sg_keyword_search` |\n"
    "| Concepts/semantic search | `sg_nls_search` |\n"
    "| Trace usage/callers | `sg_find_references` |\n"
    "| Read full file | `sg_read_file` |\n"
    "| Browse structure | `sg_list_files` |\n\n---\n\n"
)


@dataclass(frozen=True)
class Variant:
    transcript: bool
    trajectory: bool
    stdout_banner: bool = False
    truncated: bool = False
    subagent: bool = False


class Writer:
    """Plain (non-atomic) writes: generated data is disposable, and speed matters here."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files = 0
        self.bytes = 0
        self._made: set[Path] = set()

    def _folder(self, folder: Path) -> None:
        if folder not in self._made:
            folder.mkdir(parents=True, exist_ok=True)
            if len(self._made) > 512:  # only recent folders matter: keep memory flat
                self._made.clear()
            self._made.add(folder)

    def write(self, path: Path, *chunks: bytes | str) -> None:
        """Write ``chunks`` (text as UTF-8) one after the other to ``path``, and count them."""
        self._folder(path.parent)
        with open(path, "wb") as handle:
            for chunk in chunks:
                data = chunk.encode("utf-8") if isinstance(chunk, str) else chunk
                handle.write(data)
                self.bytes += len(data)
        self.files += 1


def _reward(rng: random.Random, task: TaskSpec, coverage: float) -> float:
    raw = 0.05 + 0.9 * coverage + rng.gauss(0.0, 0.15)
    if task.reward_type == "binary":
        return 1.0 if raw >= 0.6 else 0.0
    return round(min(1.0, max(0.0, raw)), 2)


def _instruction_for(task: TaskSpec, mcp: bool) -> str:
    if not mcp:
        return task.instruction
    targets = "\n".join(
        f"**Target Repository:** `{profile.sg_repo}`\n"
        f"- Use `repo:^{profile.sg_repo}$` filter in keyword_search\n"
        f"- Use `{profile.sg_repo}` as the `repo` parameter for find_references/read_file"
        for profile in task.repos
    )
    return _MCP_PREAMBLE.format(targets=targets) + task.instruction


def _trial_facts(
    present: list[Call], results_present: set[str], gt: set[str], call_facts: bool
) -> dict[str, Any]:
    """Facts of the calls present in a trial's trace(s), in trace order."""
    hits: list[list[str]] = []  # ground truth a non-write call names (arguments, result)
    for c in present:
        named = [*c.arg_keys, *(c.result_keys if c.id in results_present else [])]
        hits.append([] if c.category == "file_write" else [k for k in named if k in gt])
    first_hit = next((i for i, keys in enumerate(hits) if keys), None)
    files_read = {k for c in present for k in c.read_keys}
    return {
        "tool_calls": len(present),
        "tool_calls_by_name": dict(sorted(Counter(c.name for c in present).items())),
        "tool_calls_by_category": dict(sorted(Counter(c.category for c in present).items())),
        "mcp_calls": sum(1 for c in present if c.is_mcp),
        "subagent_calls": sum(1 for c in present if c.parent_id is not None),
        "surfaced_gt_files": sorted({k for keys in hits for k in keys}),
        "read_gt_files": sorted(files_read & gt),
        "files_read": sorted(files_read),
        "written_files": sorted({k for c in present for k in c.write_keys}),
        "first_gt_hit_step": first_hit,
        "first_gt_hit_call_id": None if first_hit is None else present[first_hit].id,
        "calls": [_call_facts(c, c.id in results_present) for c in present] if call_facts else [],
    }


def _call_facts(call: Call, has_result: bool) -> CallFacts:
    return CallFacts(
        id=call.id,
        name=call.name,
        category=call.category,
        is_mcp=call.is_mcp,
        is_subagent=call.parent_id is not None,
        argument_files=list(dict.fromkeys(call.arg_keys)),
        result_files=list(dict.fromkeys(call.result_keys)) if has_result else [],
        read_files=list(call.read_keys),
        written_files=list(call.write_keys),
        result_in_trace=has_result,
    )


@dataclass(frozen=True)
class TrialSpec:
    """Who one trial is and where it goes: its task, run, config, folder, start and variant.

    ``trial_dir`` is in the batch folder ``batch_ts`` of a batch-layout run, or in a job
    folder of the archived run (``batch_ts`` ``None``), whose older harness
    (:data:`ARCHIVED_HARNESS_VERSION`) names the MCP tools without the ``sg_`` infix.
    """

    task: TaskSpec
    run_id: str
    config: str
    raw_name: str
    trial_dir: Path
    batch_ts: str | None
    start: datetime
    variant: Variant
    repeat: int = 0
    pair_count: int = 1


@dataclass
class _Traces:
    """What a trial's written traces hold: their files and the calls present in them."""

    files: list[str] = field(default_factory=list)
    present: list[Call] = field(default_factory=list)
    results_present: set[str] = field(default_factory=set)
    transcript_tool_uses: int | None = None
    trajectory_tool_steps: int | None = None
    banner_lines: int = 0
    truncated: bool = False


def _phases(
    rng: random.Random, start: datetime, duration: float, time_limit_sec: int, truncated: bool
) -> dict[str, tuple[datetime, datetime]]:
    """``result.json``'s phases (start, end) of seeded lengths; a truncated trial's agent
    runs to its time limit."""
    env_end = start + timedelta(seconds=rng.uniform(2.5, 20.0))
    setup_end = env_end + timedelta(seconds=rng.uniform(8.0, 35.0))
    agent_start = setup_end + timedelta(microseconds=rng.randint(20, 60))
    agent_seconds = time_limit_sec if truncated else duration + rng.uniform(1.0, 6.0)
    agent_end = agent_start + timedelta(seconds=agent_seconds)
    verifier_end = agent_end + timedelta(seconds=rng.uniform(0.2, 9.0))
    finished = verifier_end + timedelta(seconds=rng.uniform(8.0, 25.0))
    return {
        "trial": (start, finished),
        "environment_setup": (start + timedelta(microseconds=600), env_end),
        "agent_setup": (env_end + timedelta(microseconds=30), setup_end),
        "agent_execution": (agent_start, agent_end),
        "verifier": (agent_end + timedelta(microseconds=60), verifier_end),
    }


def _timeout_exception(task: TaskSpec, agent_end: datetime) -> dict[str, Any]:
    """``result.json``'s ``exception_info`` of an agent that ran out of time."""
    return {
        "exception_type": "AgentTimeoutError",
        "exception_message": f"Agent execution timed out after {float(task.time_limit_sec)} seconds",
        "exception_traceback": (
            "Traceback (most recent call last):\n"
            '  File "/harbor/trial/trial.py", line 214, in _execute_agent\n'
            "    await asyncio.wait_for(self._agent.run(...), timeout=timeout)\n"
            "asyncio.exceptions.TimeoutError\n"
        ),
        "occurred_at": iso_us(agent_end),
    }


def _agent_result(plan: TrialPlan, variant: Variant) -> dict[str, Any]:
    """``result.json``'s ``agent_result``: token sums only when the trial has a trace.

    Harbor sums per ATIF step, so a message's usage counts once per content block.
    """
    prompt = cached = completion = 0
    for msg in all_messages(plan.messages):
        blocks = (1 if msg.thinking else 0) + (1 if msg.text else 0) + len(msg.calls)
        prompt += blocks * (msg.input_tokens + msg.cache_read)
        cached += blocks * msg.cache_read
        completion += (blocks - 1) * msg.placeholder_output + msg.output_tokens
    traced = variant.transcript or variant.trajectory
    return {
        "n_input_tokens": prompt if traced else None,
        "n_cache_tokens": cached if traced else None,
        "n_output_tokens": completion if traced else None,
        "cost_usd": None,
        "rollout_details": None,
        "metadata": None,
    }


#: The trace a reader should take a trial's calls from, by (transcript, trajectory).
_EXPECTED_SOURCE = {
    (True, True): "merged",
    (False, True): "trajectory",
    (True, False): "transcript",
}


@dataclass(frozen=True)
class TrialWriter:
    """Writes trials with ``writer`` (in its folder), with the generation's sizes."""

    writer: Writer
    read_span: tuple[int, int]
    target_bytes: int
    call_facts: bool

    def write(self, rng: random.Random, s: TrialSpec) -> TrialFacts:
        """Plan one trial, write its files, and return the facts they contain."""
        task, mcp, batch = s.task, s.config == MCP_CONFIG, s.batch_ts is not None
        version = HARNESS_VERSION if batch else ARCHIVED_HARNESS_VERSION
        skill = min(1.0, rng.betavariate(2.0, 2.0) + (0.05 if mcp else 0.0))
        plan = plan_trial(
            task,
            rng,
            mcp=mcp,
            skill=skill,
            sg_infix=batch,
            read_span=self.read_span,
            pad_bytes=self.target_bytes,
            force_subagent=s.variant.subagent,
        )
        reward = _reward(rng, task, plan.coverage)
        phases = _phases(rng, s.start, plan.duration, task.time_limit_sec, s.variant.truncated)
        agent_start, agent_end = phases["agent_execution"]
        exception_info = None
        if s.variant.truncated:
            reward = 0.0
            exception_info = _timeout_exception(task, agent_end)
        meta = SessionMeta(
            session_id=uuid4(rng),
            model=MODEL,
            version=version,
            mcp=mcp,
            sg_infix=batch,
            instruction=_instruction_for(task, mcp),
            agent_start=agent_start,
        )
        self.writer.write(s.trial_dir / "agent" / "instruction.txt", meta.instruction)
        traces = self._write_traces(rng, plan, meta, s)
        self._write_result(rng, s, plan, reward, exception_info, phases)
        self.writer.write(
            s.trial_dir / "verifier" / "reward.txt",
            f"{reward}\n" if task.reward_type == "binary" else f"{reward:.2f}\n",
        )
        facts = _trial_facts(
            traces.present, traces.results_present, set(task.gt_files), self.call_facts
        )
        complete = totals(plan) if traces.files and not traces.truncated else None
        return TrialFacts(
            run_id=s.run_id,
            layout="batch" if batch else "archived",
            config_name=s.config,
            trial_dir=s.trial_dir.relative_to(self.writer.root).as_posix(),
            trial_name=s.trial_dir.name,
            task_name=task.name,
            raw_task_name=s.raw_name,
            benchmark=task.suite,
            batch_timestamp=s.batch_ts,
            started_at=iso_us(s.start),
            model=MODEL,
            # result.json says "unknown": only a trace tells the harness version.
            harness_version=version if traces.files else None,
            repeat_index=s.repeat,
            trials_for_pair=s.pair_count,
            is_latest_trial=s.repeat == s.pair_count - 1,
            trace_files=traces.files,
            has_transcript=s.variant.transcript,
            has_trajectory=s.variant.trajectory,
            transcript_truncated=traces.truncated,
            banner_lines=traces.banner_lines,
            expected_trace_source=_EXPECTED_SOURCE.get(
                (s.variant.transcript, s.variant.trajectory)
            ),
            gt_files=task.gt_files,
            reward=reward,
            exception_type=exception_info["exception_type"] if exception_info else None,
            skill=round(skill, 4),
            coverage=round(plan.coverage, 4),
            transcript_tool_uses=traces.transcript_tool_uses,
            trajectory_tool_steps=traces.trajectory_tool_steps,
            submitted_files=plan.submitted_keys,
            parallel_groups=[
                [c.id for c in m.calls] for m in all_messages(plan.messages) if len(m.calls) > 1
            ]
            if traces.files
            else [],
            # The session totals exist only where the trace reports them in full.
            cost_usd=complete.cost_usd if complete and s.variant.transcript else None,
            input_tokens=complete.input_tokens if complete else None,
            output_tokens=complete.output_tokens if complete else None,
            cache_read_tokens=complete.cache_read_tokens if complete else None,
            cache_creation_tokens=complete.cache_creation_tokens if complete else None,
            distinct_messages=complete.distinct_messages if complete else None,
            agent_execution_seconds=round((agent_end - agent_start).total_seconds(), 6),
            **facts,
        )

    def _write_traces(
        self, rng: random.Random, plan: TrialPlan, meta: SessionMeta, s: TrialSpec
    ) -> _Traces:
        """Write the trial's transcript and/or trajectory, as its variant says."""
        traces = _Traces()
        if s.variant.transcript:
            self._write_transcript(rng, plan, meta, s, traces)
        if s.variant.trajectory:
            data, steps = trajectory_bytes(plan, meta)
            self.writer.write(s.trial_dir / "agent" / "trajectory.json", data)
            traces.files.append("agent/trajectory.json")
            traces.trajectory_tool_steps = len(steps)
            traces.present = steps
            traces.results_present = {c.id for c in traces.present}
        return traces

    def _write_transcript(
        self, rng: random.Random, plan: TrialPlan, meta: SessionMeta, s: TrialSpec, traces: _Traces
    ) -> None:
        """Write the transcript, cut off part-way through a line when the agent timed out."""
        lines = transcript_lines(plan, meta, rng)
        if s.variant.truncated:
            cut = max(4, int(len(lines) * rng.uniform(0.55, 0.8)))
            kept = lines[:cut]
            partial, info = lines[cut]
            chunks = [line for line, _ in kept] + [partial[: max(10, len(partial) // 2)]]
            surviving = kept
            traces.truncated = True
        else:
            chunks = [line for line, _ in lines]
            surviving = lines
        call_ids = {info.call_id for _, info in surviving if info.kind == "tool_use"}
        traces.results_present = {
            info.call_id for _, info in surviving if info.kind == "tool_result" and info.call_id
        }
        # Transcript order: a message's calls, then their subagents' calls.
        in_order = (c for m in all_messages(plan.messages) for c in m.calls)
        traces.present = [c for c in in_order if c.id in call_ids]
        traces.transcript_tool_uses = len(traces.present)
        if s.variant.stdout_banner:
            traces.banner_lines = _BANNER.count("\n")
            rel = "agent/command-1/stdout.txt"
            chunks.insert(0, _BANNER.encode("utf-8"))
        else:
            rel = "agent/claude-code.txt"
        self.writer.write(s.trial_dir / rel, *chunks)
        traces.files.append(rel)

    def _write_result(
        self,
        rng: random.Random,
        s: TrialSpec,
        plan: TrialPlan,
        reward: float,
        exception_info: dict[str, Any] | None,
        phases: dict[str, tuple[datetime, datetime]],
    ) -> None:
        """Write the trial's ``result.json``, with the real file's keys and key order."""
        task_path = (
            f"/tmp/{s.raw_name}"
            if s.config == MCP_CONFIG
            else f"/home/runner/CodeScaleBench/benchmarks/{s.task.task_dirs[0]}"
        )
        trials_dir = f"runs/staging/{s.run_id}/{s.config}/{s.trial_dir.parent.name}"
        document = {
            "id": uuid4(rng),
            "task_name": s.raw_name,
            "trial_name": s.trial_dir.name,
            "trial_uri": f"file:///home/runner/CodeScaleBench/{trials_dir}/{s.trial_dir.name}",
            "task_id": {"path": task_path},
            "source": None,
            "task_checksum": f"{rng.getrandbits(256):064x}",
            "config": {
                "task": harbor_task(task_path),
                "trial_name": s.trial_dir.name,
                "trials_dir": trials_dir,
                "timeout_multiplier": 10.0,
                "agent": {
                    "name": None,
                    "import_path": "agents.claude_baseline_agent:BaselineClaudeCodeAgent",
                    "model_name": f"anthropic/{MODEL}",
                    "override_timeout_sec": None,
                    "override_setup_timeout_sec": None,
                    "max_timeout_sec": None,
                    "kwargs": {},
                },
                "environment": {
                    "type": "docker",
                    "import_path": None,
                    "force_build": False,
                    "delete": True,
                    "override_cpus": None,
                    "override_memory_mb": None,
                    "override_storage_mb": None,
                    "override_gpus": None,
                    "kwargs": {},
                },
                "verifier": {
                    "override_timeout_sec": None,
                    "max_timeout_sec": None,
                    "disable": False,
                },
                "job_id": uuid4(rng),
            },
            "agent_info": {
                "name": "claude-code",
                "version": "unknown",
                "model_info": {"name": MODEL, "provider": "anthropic"},
            },
            "agent_result": _agent_result(plan, s.variant),
            "verifier_result": {"rewards": {"reward": reward}},
            "exception_info": exception_info,
            "started_at": iso_us(phases["trial"][0]),
            "finished_at": iso_us(phases["trial"][1]),
        }
        for phase in ("environment_setup", "agent_setup", "agent_execution", "verifier"):
            start, end = phases[phase]
            document[phase] = {"started_at": iso_us(start), "finished_at": iso_us(end)}
        self.writer.write(s.trial_dir / "result.json", indent4(document))

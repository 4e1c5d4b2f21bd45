"""The manifest of a synthetic generation: what was written, and the facts each trial holds.

:func:`retrieval_lib.synth.generate_runs` returns a :class:`SynthManifest` and saves it as
``synth_manifest.json`` beside the runs. Tests check the whole pipeline against these
facts (ground truth, files surfaced / read / written, reward, tokens, ...).

Examples
--------
>>> m = SynthManifest(params={}, tasks=[], runs=[], trials=[], files_written=2,
...                   bytes_written=1_500_000)
>>> m.summary()
'0 tasks, 0 runs, 0 trials, 2 files, 1.50 MB'
>>> text = b"".join(m.iter_json())
>>> text.rstrip() == orjson.dumps(m.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
True
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

__all__ = [
    "MANIFEST_NAME",
    "CallFacts",
    "RunFacts",
    "SynthManifest",
    "TaskFacts",
    "TrialFacts",
]

#: File name of the saved manifest, at the top of the output folder.
MANIFEST_NAME = "synth_manifest.json"


@dataclass
class CallFacts:
    """Ground truth of one tool call (normalised keys, see contracts §2)."""

    id: str
    name: str
    category: str
    is_mcp: bool
    is_subagent: bool
    argument_files: list[str]
    result_files: list[str]
    read_files: list[str]
    written_files: list[str]
    result_in_trace: bool


@dataclass
class TaskFacts:
    """One task definition and its expected ground truth."""

    name: str
    suite: str
    task_dirs: list[str]
    gt_kind: str
    gt_source: str | None
    gt_confidence: str | None
    gt_files: list[str]
    expected_edit_files: list[str]
    gt_chunks: list[dict[str, Any]]
    """Line ranges: expected defects (annotation = description), curator chunks, patch hunks."""
    symbol: str
    repos: list[str]
    reward_type: str


@dataclass
class TrialFacts:
    """What one trial's files contain, worked out while generating them."""

    run_id: str
    layout: str
    config_name: str
    trial_dir: str
    trial_name: str
    task_name: str
    raw_task_name: str
    benchmark: str
    batch_timestamp: str | None
    started_at: str
    model: str
    harness_version: str | None
    repeat_index: int
    trials_for_pair: int
    is_latest_trial: bool
    trace_files: list[str]
    has_transcript: bool
    has_trajectory: bool
    transcript_truncated: bool
    banner_lines: int
    expected_trace_source: str | None
    gt_files: list[str]
    reward: float | None
    exception_type: str | None
    skill: float
    coverage: float
    tool_calls: int
    tool_calls_by_name: dict[str, int]
    tool_calls_by_category: dict[str, int]
    mcp_calls: int
    subagent_calls: int
    transcript_tool_uses: int | None
    trajectory_tool_steps: int | None
    surfaced_gt_files: list[str]
    """Ground-truth keys named by a non-write call's arguments or (present) result."""
    read_gt_files: list[str]
    files_read: list[str]
    """Keys of every file read (Read, read_file, ``sed -n``/``head``): lowercase paths,
    ``repo::path`` in multi-repo tasks."""
    written_files: list[str]
    submitted_files: list[str]
    first_gt_hit_call_id: str | None
    first_gt_hit_step: int | None
    """0-based index among the trace's tool calls (trajectory order when present)."""
    parallel_groups: list[list[str]]
    """Tool-call ids issued in one message, in transcript order (trajectory reverses them)."""
    cost_usd: float | None
    """The transcript's ``total_cost_usd``; ``None`` without a complete transcript."""
    input_tokens: int | None
    """Session totals over distinct API messages (subagents included); ``None`` when no
    trace reports them in full (no trace, or a transcript cut off before its result)."""
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_creation_tokens: int | None
    distinct_messages: int | None
    agent_execution_seconds: float
    calls: list[CallFacts] = field(default_factory=list)
    """Per call, in the trace's order (empty unless call facts were requested)."""


@dataclass
class RunFacts:
    """One run folder."""

    run_id: str
    layout: str
    path: str
    configs: list[str]
    n_trials: int
    job_dirs: list[str] = field(default_factory=list)


@dataclass
class SynthManifest:
    """What :func:`generate_runs` wrote (also saved as ``synth_manifest.json``)."""

    params: dict[str, Any]
    tasks: list[TaskFacts]
    runs: list[RunFacts]
    trials: list[TrialFacts]
    files_written: int
    """Files written, the manifest itself excluded."""
    bytes_written: int
    """Bytes written, the manifest itself excluded."""
    out_dir: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the machine-specific ``out_dir``)."""
        data = asdict(self)
        data.pop("out_dir")
        return data

    def iter_json(self) -> Iterator[bytes]:
        """``synth_manifest.json`` in pieces, one trial at a time (no full copy in memory).

        The bytes equal ``orjson.dumps(self.to_dict(), option=OPT_INDENT_2 | OPT_SORT_KEYS)``
        plus a final newline: sorted keys and two-space indent, as ``retrieval_lib.io``.
        """
        option = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
        head = {
            "bytes_written": self.bytes_written,
            "files_written": self.files_written,
            "params": self.params,
            "runs": [asdict(run) for run in self.runs],
            "tasks": [asdict(task) for task in self.tasks],
        }
        # "trials" sorts last: open its list where the head object closes.
        yield orjson.dumps(head, option=option)[:-2] + b',\n  "trials": ['
        for index, trial in enumerate(self.trials):
            body = orjson.dumps(asdict(trial), option=option).replace(b"\n", b"\n    ")
            yield (b",\n    " if index else b"\n    ") + body
        yield b"\n  ]\n}\n" if self.trials else b"]\n}\n"

    def summary(self) -> str:
        """One line: tasks, runs, trials, files and bytes."""
        return (
            f"{len(self.tasks)} tasks, {len(self.runs)} runs, {len(self.trials)} trials, "
            f"{self.files_written} files, {self.bytes_written / 1e6:.2f} MB"
        )

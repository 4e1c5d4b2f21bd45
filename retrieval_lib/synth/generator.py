"""Generate synthetic benchmark runs in the real Harbor layout, with their ground truth.

:func:`generate_runs` writes, under ``out_dir``:

* ``benchmarks/<suite>/<task>/``: task definitions with eleven kinds of ground truth
  (see :data:`retrieval_lib.synth.catalog.GT_KINDS`);
* ``runs/official/<run_id>/<config>/<YYYY-MM-DD__HH-MM-SS>/<trial>/``: batch-layout runs
  for ``baseline-local-direct`` and ``mcp-remote-direct``;
* ``runs/official/archive/<run_id>/{baseline|mcp}/<job_name>/<trial>/``: one run in the
  archived job layout, whose job folders hold a job-level ``config.json`` and
  ``result.json`` that are not trials;
* ``synth_manifest.json`` and ``README.md``: what was generated, and the facts each
  trial's files contain (ground truth, files surfaced/read/written, reward, ...), so
  tests can check the whole pipeline against known answers.

Everything is a function of the arguments: the same call writes byte-identical files
(seeded RNGs, fixed base dates, no wall clock). Files are written one trial at a time,
so memory does not grow with the number of trials (apart from the small manifest).
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from retrieval_lib.errors import InputError
from retrieval_lib.synth.agent import Call, Message, TrialPlan, plan_trial
from retrieval_lib.synth.catalog import TaskSpec, build_task
from retrieval_lib.synth.formats import (
    SessionMeta,
    atif_call_order,
    indent4,
    iso_us,
    result_json_bytes,
    totals,
    trajectory_bytes,
    transcript_lines,
    uuid4,
)
from retrieval_lib.synth.manifest import (
    MANIFEST_NAME,
    CallFacts,
    RunFacts,
    SynthManifest,
    TaskFacts,
    TrialFacts,
)
from retrieval_lib.synth.readme import readme_text
from retrieval_lib.synth.task_files import patch_hunks, write_task_definition

__all__ = [
    "BASELINE_CONFIG",
    "MCP_CONFIG",
    "SCALES",
    "CallFacts",
    "RunFacts",
    "SynthManifest",
    "TaskFacts",
    "TrialFacts",
    "generate_runs",
]

BASELINE_CONFIG = "baseline-local-direct"
MCP_CONFIG = "mcp-remote-direct"
MODEL = "claude-haiku-4-5-20251001"
#: Harness (Claude Code) versions: batch runs, and the older archived run.
HARNESS_VERSION = "2.1.62"
ARCHIVED_HARNESS_VERSION = "2.1.50"
BATCH_BASE = datetime(2026, 3, 1, 9, 15, 0)
ARCHIVE_BASE = datetime(2026, 2, 28, 0, 6, 30)
_ARCHIVED_KINDS = ("solve_sh", "none")

#: Presets of the CLI's ``--scale``: tasks, read span (lines) and call-level facts.
SCALES: dict[str, dict[str, Any]] = {
    "example": {"n_tasks": 10, "read_span": (8, 24), "call_facts": True},
    "bench": {"n_tasks": 200, "read_span": (60, 300), "call_facts": False},
}

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


# --------------------------------------------------------------------------------------
# Trial variants
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Variant:
    transcript: bool
    trajectory: bool
    stdout_banner: bool = False
    truncated: bool = False
    subagent: bool = False


_BASELINE_SPECIAL = {
    1: _Variant(True, True, subagent=True),
    3: _Variant(True, False, truncated=True),
    5: _Variant(False, False),
    6: _Variant(True, False, stdout_banner=True),
}
_MCP_SPECIAL = {0: _Variant(True, True), 4: _Variant(True, True)}


def _variant(rng: random.Random, position: int, config: str, first_run: bool) -> _Variant:
    special = _BASELINE_SPECIAL if config == BASELINE_CONFIG else _MCP_SPECIAL
    if first_run and position < 8:
        return special.get(position, _Variant(config == BASELINE_CONFIG, config != BASELINE_CONFIG))
    roll = rng.random()
    if config == BASELINE_CONFIG:
        if roll < 0.08:
            return _Variant(True, True)
        if roll < 0.11:
            return _Variant(True, False, truncated=True)
        if roll < 0.13:
            return _Variant(False, False)
        if roll < 0.17:
            return _Variant(True, False, stdout_banner=True)
        return _Variant(True, False)
    return _Variant(True, True) if roll < 0.15 else _Variant(False, True)


# --------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------


class _Writer:
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

    def write(self, path: Path, data: bytes | str) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self._folder(path.parent)
        with open(path, "wb") as handle:
            handle.write(data)
        self.files += 1
        self.bytes += len(data)

    def write_lines(self, path: Path, chunks: list[bytes]) -> None:
        self._folder(path.parent)
        with open(path, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
                self.bytes += len(chunk)
        self.files += 1


#: What a generation writes at the top of its folder; anything else there is left alone.
GENERATED_ENTRIES: tuple[str, ...] = ("benchmarks", "runs", "README.md", MANIFEST_NAME)


def _prepare_out_dir(out_dir: Path) -> None:
    """Create ``out_dir``, or clear an earlier generation's entries from it.

    Entries a generation writes (:data:`GENERATED_ENTRIES`) are replaced only when a
    ``synth_manifest.json`` shows they came from an earlier generation; otherwise the
    folder is refused. Other entries (for example ``examples/kb/``) are never touched.
    """
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir} exists and is not a folder")
    out_dir.mkdir(parents=True, exist_ok=True)
    present = [name for name in GENERATED_ENTRIES if (out_dir / name).exists()]
    if not present:
        return
    if not (out_dir / MANIFEST_NAME).is_file():
        raise InputError(
            f"refusing to write into {out_dir}: it already has {', '.join(present)} but no "
            f"{MANIFEST_NAME} from an earlier generation"
        )
    for name in present:
        target = out_dir / name
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()


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


def _walk_calls(messages: list[Message], transcript_order: bool) -> list[Call]:
    calls: list[Call] = []
    for msg in messages:
        ordered = msg.calls if transcript_order else atif_call_order(msg)
        if transcript_order:
            calls.extend(ordered)
            for call in ordered:
                calls.extend(_walk_calls(call.children, True))
        else:
            for call in ordered:
                calls.append(call)
                calls.extend(_walk_calls(call.children, False))
    return calls


def _parallel_groups(messages: list[Message]) -> list[list[str]]:
    groups: list[list[str]] = []
    for msg in messages:
        if len(msg.calls) > 1:
            groups.append([c.id for c in msg.calls])
        for call in msg.calls:
            groups.extend(_parallel_groups(call.children))
    return groups


def _trial_facts(
    present: list[Call], results_present: set[str], gt: set[str], call_facts: bool
) -> dict[str, Any]:
    """Facts of the calls present in a trial's trace(s), in trace order."""
    by_name: Counter[str] = Counter()
    by_category: Counter[str] = Counter()
    surfaced: set[str] = set()
    read: set[str] = set()
    files_read: set[str] = set()
    written: set[str] = set()
    first_hit: tuple[int, str] | None = None
    facts: list[CallFacts] = []
    for index, call in enumerate(present):
        by_name[call.name] += 1
        by_category[call.category] += 1
        has_result = call.id in results_present
        targets = list(call.arg_keys) + (list(call.result_keys) if has_result else [])
        files_read.update(call.read_keys)
        read.update(k for k in call.read_keys if k in gt)
        written.update(call.write_keys)
        if call.category != "file_write":
            hits = [k for k in targets if k in gt]
            surfaced.update(hits)
            if hits and first_hit is None:
                first_hit = (index, call.id)
        if call_facts:
            facts.append(
                CallFacts(
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
            )
    return {
        "tool_calls": len(present),
        "tool_calls_by_name": dict(sorted(by_name.items())),
        "tool_calls_by_category": dict(sorted(by_category.items())),
        "mcp_calls": sum(1 for c in present if c.is_mcp),
        "subagent_calls": sum(1 for c in present if c.parent_id is not None),
        "surfaced_gt_files": sorted(surfaced),
        "read_gt_files": sorted(read),
        "files_read": sorted(files_read),
        "written_files": sorted(written),
        "first_gt_hit_step": first_hit[0] if first_hit else None,
        "first_gt_hit_call_id": first_hit[1] if first_hit else None,
        "calls": facts,
    }


def generate_runs(
    out_dir: str | Path,
    *,
    n_tasks: int | None = None,
    seed: int = 0,
    transcript_target_bytes: int | None = None,
    n_runs: int = 1,
    scale: str = "example",
    call_facts: bool | None = None,
) -> SynthManifest:
    """Write synthetic tasks and runs under ``out_dir`` and return what was written.

    Parameters
    ----------
    out_dir
        Destination folder: created if missing; if it holds an earlier generation (a
        ``synth_manifest.json``), that generation's ``runs/``, ``benchmarks/``, manifest
        and README are replaced; any other non-empty folder is refused.
    n_tasks
        Number of tasks (default: the scale's, 10 for ``"example"``, 200 for ``"bench"``);
        ground-truth kinds cycle every eleven tasks, so eleven or more cover them all. Tasks of the ``solve_sh`` and ``none`` kinds go to the archived-layout
        run, the others to the batch-layout run(s).
    seed
        Seed of every random choice.
    transcript_target_bytes
        Pad each trace with whole-file reads of irrelevant files until it is about this
        big (for benchmarks); ``None`` leaves traces at their natural size.
    n_runs
        Number of batch-layout runs (each covers the same tasks; the archived run is
        always added once).
    scale
        ``"example"`` (short reads, call-level facts) or ``"bench"`` (longer reads, no
        call-level facts, so the manifest stays small).
    call_facts
        Override the scale's choice of per-call facts in the manifest.

    Returns
    -------
    SynthManifest
        Also written to ``out_dir/synth_manifest.json``.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     manifest = generate_runs(Path(tmp) / "synth", n_tasks=3)
    >>> len(manifest.tasks), sorted({t.config_name for t in manifest.trials})
    (3, ['baseline-local-direct', 'mcp-remote-direct'])
    """
    n_tasks = _checked_n_tasks(scale, n_tasks, n_runs, transcript_target_bytes)
    preset = SCALES[scale]
    want_calls = preset["call_facts"] if call_facts is None else call_facts
    out = Path(out_dir)
    _prepare_out_dir(out)
    writer = _Writer(out)

    tasks = [build_task(i, seed) for i in range(n_tasks)]
    for task in tasks:
        for path in write_task_definition(task, out / "benchmarks"):
            writer.files += 1
            writer.bytes += path.stat().st_size
    archived = [t for t in tasks if t.kind in _ARCHIVED_KINDS] or [tasks[-1]]
    batch = [t for t in tasks if t not in archived] or list(tasks)

    context = _Context(out, writer, seed, preset["read_span"], transcript_target_bytes, want_calls)
    runs, trials = context.all_runs(n_runs, batch, archived)

    manifest = SynthManifest(
        params={
            "n_tasks": n_tasks,
            "seed": seed,
            "n_runs": n_runs,
            "scale": scale,
            "transcript_target_bytes": transcript_target_bytes,
            "call_facts": want_calls,
        },
        tasks=[_task_facts(t) for t in tasks],
        runs=runs,
        trials=trials,
        files_written=writer.files,
        bytes_written=writer.bytes,
        out_dir=out,
    )
    _write_readme_and_manifest(manifest, writer)
    return manifest


def _checked_n_tasks(
    scale: str, n_tasks: int | None, n_runs: int, transcript_target_bytes: int | None
) -> int:
    """The number of tasks to generate (the scale's by default), once the arguments are
    checked."""
    if scale not in SCALES:
        raise InputError(f"unknown scale {scale!r}; choose one of {sorted(SCALES)}")
    if n_tasks is None:
        n_tasks = int(SCALES[scale]["n_tasks"])
    if n_tasks < 1 or n_runs < 1:
        raise InputError("n_tasks and n_runs must be at least 1")
    if transcript_target_bytes is not None and transcript_target_bytes < 0:
        raise InputError("transcript_target_bytes must not be negative")
    return n_tasks


def _write_readme_and_manifest(manifest: SynthManifest, writer: _Writer) -> None:
    """Write README.md, then the manifest (which counts the README among the files)."""
    out = writer.root
    readme = readme_text(manifest, is_example=_is_example(manifest.params))
    writer.write(out / "README.md", readme)
    manifest.files_written = writer.files
    manifest.bytes_written = writer.bytes
    with open(out / MANIFEST_NAME, "wb") as handle:
        for piece in manifest.iter_json():
            handle.write(piece)


def _task_facts(task: TaskSpec) -> TaskFacts:
    return TaskFacts(
        name=task.name,
        suite=task.suite,
        task_dirs=list(task.task_dirs),
        gt_kind=task.kind,
        gt_source=task.gt_source,
        gt_confidence=task.gt_confidence,
        gt_files=task.gt_files,
        expected_edit_files=task.expected_edit_keys
        if task.kind in ("dict", "expected_changes", "reference_patch", "solve_sh")
        else [],
        gt_chunks=[
            {
                "file": task.key(c.repo, c.path),
                "line_start": c.line_start,
                "line_end": c.line_end,
                "annotation": c.annotation,
                "defect_type": c.defect_type,
            }
            for c in task.chunks
        ]
        + [
            # New-side line range of each patch hunk (same length as the old side here).
            {
                "file": task.key(repo, path),
                "line_start": start,
                "line_end": start + len(lines) - 1,
                "annotation": None,
                "defect_type": None,
            }
            for repo, path, start, lines in (
                patch_hunks(task) if task.kind in ("reference_patch", "solve_sh") else []
            )
        ],
        symbol=task.symbol,
        repos=[p.short for p in task.repos],
        reward_type=task.reward_type,
    )


@dataclass(frozen=True)
class _TrialSpec:
    """Who one trial is and where it goes: its task, run, config, names, start and variant."""

    task: TaskSpec
    run_id: str
    layout: str
    config: str
    trial_dir: Path
    raw_name: str
    trial_name: str
    batch_ts: str | None
    start: datetime
    variant: _Variant
    version: str
    sg_infix: bool
    trials_dir: str
    repeat: int
    pair_count: int


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


@dataclass(frozen=True)
class _Timeline:
    """The ends of a trial's phases (environment, agent setup, agent, verifier, trial)."""

    start: datetime
    env_end: datetime
    setup_end: datetime
    agent_start: datetime
    agent_end: datetime
    verifier_end: datetime
    finished: datetime

    @classmethod
    def draw(
        cls,
        rng: random.Random,
        start: datetime,
        duration: float,
        time_limit_sec: float,
        variant: _Variant,
    ) -> _Timeline:
        """Seeded phase lengths; a truncated trial's agent runs to its time limit."""
        env_end = start + timedelta(seconds=rng.uniform(2.5, 20.0))
        setup_end = env_end + timedelta(seconds=rng.uniform(8.0, 35.0))
        agent_start = setup_end + timedelta(microseconds=rng.randint(20, 60))
        if variant.truncated:
            agent_end = agent_start + timedelta(seconds=time_limit_sec)
        else:
            agent_end = agent_start + timedelta(seconds=duration + rng.uniform(1.0, 6.0))
        verifier_end = agent_end + timedelta(seconds=rng.uniform(0.2, 9.0))
        finished = verifier_end + timedelta(seconds=rng.uniform(8.0, 25.0))
        return cls(start, env_end, setup_end, agent_start, agent_end, verifier_end, finished)

    def phases(self) -> dict[str, tuple[datetime, datetime]]:
        """The phases as ``result.json`` reports them (start, end)."""
        return {
            "trial": (self.start, self.finished),
            "environment_setup": (self.start + timedelta(microseconds=600), self.env_end),
            "agent_setup": (self.env_end + timedelta(microseconds=30), self.setup_end),
            "agent_execution": (self.agent_start, self.agent_end),
            "verifier": (self.agent_end + timedelta(microseconds=60), self.verifier_end),
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


def _agent_result(plan: TrialPlan, variant: _Variant) -> dict[str, Any]:
    """``result.json``'s ``agent_result``: token sums only when the trial has a trace."""
    prompt: int | None = None
    cached: int | None = None
    completion: int | None = None
    if variant.transcript or variant.trajectory:
        prompt, cached, completion = _atif_sums(plan)
    return {
        "n_input_tokens": prompt,
        "n_cache_tokens": cached,
        "n_output_tokens": completion,
        "cost_usd": None,
        "rollout_details": None,
        "metadata": None,
    }


def _expected_source(variant: _Variant) -> str | None:
    """The trace a reader should take the trial's calls from."""
    if variant.trajectory and variant.transcript:
        return "merged"
    if variant.trajectory:
        return "trajectory"
    if variant.transcript:
        return "transcript"
    return None


class _Context:
    """Shared state of one generation: output folder, seed, sizes."""

    def __init__(
        self,
        out: Path,
        writer: _Writer,
        seed: int,
        read_span: tuple[int, int],
        target_bytes: int | None,
        call_facts: bool,
    ) -> None:
        self.out = out
        self.writer = writer
        self.seed = seed
        self.read_span = read_span
        self.target_bytes = target_bytes or 0
        self.call_facts = call_facts

    # -- runs ----------------------------------------------------------------------------
    def all_runs(
        self, n_runs: int, batch: list[TaskSpec], archived: list[TaskSpec]
    ) -> tuple[list[RunFacts], list[TrialFacts]]:
        """``n_runs`` batch-layout runs of ``batch``, then the archived run of ``archived``."""
        runs: list[RunFacts] = []
        trials: list[TrialFacts] = []
        for run_index in range(n_runs):
            run, run_trials = self.batch_run(run_index, batch)
            runs.append(run)
            trials.extend(run_trials)
        run, run_trials = self.archived_run(archived)
        runs.append(run)
        trials.extend(run_trials)
        return runs, trials

    def batch_run(self, run_index: int, tasks: list[TaskSpec]) -> tuple[RunFacts, list[TrialFacts]]:
        base = BATCH_BASE + timedelta(days=run_index)
        run_id = f"csb_synth_haiku_{base:%Y%m%d_%H%M%S}"
        run_dir = self.out / "runs" / "official" / run_id
        rng = random.Random(f"run:{self.seed}:{run_index}")
        jobs: list[tuple[TaskSpec, str, int, datetime, _Variant]] = []
        repeats: list[tuple[TaskSpec, str]] = []
        for position, task in enumerate(tasks):
            for offset, config in ((0, BASELINE_CONFIG), (40, MCP_CONFIG)):
                start = base + timedelta(seconds=150 * position + offset)
                jobs.append(
                    (task, config, 0, start, _variant(rng, position, config, run_index == 0))
                )
            if (run_index == 0 and position == 2) or (position >= 8 and rng.random() < 0.03):
                repeats.append((task, BASELINE_CONFIG))
        end = base + timedelta(seconds=150 * len(tasks) + 60)
        for k, (task, config) in enumerate(repeats):
            jobs.append((task, config, 1, end + timedelta(seconds=150 * k), _Variant(True, False)))
        pair_counts = Counter((t.name, c) for t, c, *_ in jobs)
        facts = []
        for task, config, repeat, start, variant in jobs:
            batch_ts = f"{start:%Y-%m-%d__%H-%M-%S}"
            trial_rng = random.Random(
                f"trial:{self.seed}:{run_index}:{task.index}:{config}:{repeat}"
            )
            mcp = config == MCP_CONFIG
            raw_name = (
                f"mcp_{task.name}_{''.join(trial_rng.choices(_ALNUM, k=6))}" if mcp else task.name
            )
            trial_name = f"{raw_name[:32]}__{''.join(trial_rng.choices(_ALNUM, k=7))}"
            trial_dir = run_dir / config / batch_ts / trial_name
            facts.append(
                self.trial(
                    trial_rng,
                    _TrialSpec(
                        task=task,
                        run_id=run_id,
                        layout="batch",
                        config=config,
                        trial_dir=trial_dir,
                        raw_name=raw_name,
                        trial_name=trial_name,
                        batch_ts=batch_ts,
                        start=start + timedelta(microseconds=trial_rng.randint(100000, 900000)),
                        variant=variant,
                        version=HARNESS_VERSION,
                        sg_infix=True,
                        trials_dir=f"runs/staging/{run_id}/{config}/{batch_ts}",
                        repeat=repeat,
                        pair_count=pair_counts[(task.name, config)],
                    ),
                )
            )
        run = RunFacts(
            run_id=run_id,
            layout="batch",
            path=run_dir.relative_to(self.out).as_posix(),
            configs=[BASELINE_CONFIG, MCP_CONFIG],
            n_trials=len(facts),
        )
        return run, facts

    def archived_run(self, tasks: list[TaskSpec]) -> tuple[RunFacts, list[TrialFacts]]:
        run_id = f"csb_synth_haiku_{ARCHIVE_BASE:%m%d%y}"
        run_dir = self.out / "runs" / "official" / "archive" / run_id
        facts = []
        job_dirs = []
        for position, task in enumerate(tasks):
            for offset, (config, group) in (
                (0, (BASELINE_CONFIG, "baseline")),
                (3, (MCP_CONFIG, "mcp")),
            ):
                start = ARCHIVE_BASE + timedelta(seconds=200 * position + offset)
                trial_rng = random.Random(f"archived:{self.seed}:{task.index}:{config}")
                mcp = config == MCP_CONFIG
                raw_name = f"sgonly_{task.name}" if mcp else task.name
                trial_name = f"{raw_name[:32]}__{''.join(trial_rng.choices(_ALNUM, k=7))}"
                job_name = f"{task.suite}_{task.name}_{config}"
                job_dir = run_dir / group / job_name
                trial = self.trial(
                    trial_rng,
                    _TrialSpec(
                        task=task,
                        run_id=run_id,
                        layout="archived",
                        config=config,
                        trial_dir=job_dir / trial_name,
                        raw_name=raw_name,
                        trial_name=trial_name,
                        batch_ts=None,
                        start=start + timedelta(microseconds=trial_rng.randint(100000, 900000)),
                        variant=_Variant(not mcp, mcp),
                        version=ARCHIVED_HARNESS_VERSION,
                        sg_infix=False,
                        trials_dir=f"runs/staging/{run_id}/{config}/{job_name}",
                        repeat=0,
                        pair_count=1,
                    ),
                )
                facts.append(trial)
                job_dirs.append(job_dir.relative_to(self.out).as_posix())
                self._job_files(trial_rng, job_dir, job_name, run_id, config, task, trial)
        run = RunFacts(
            run_id=run_id,
            layout="archived",
            path=run_dir.relative_to(self.out).as_posix(),
            configs=[BASELINE_CONFIG, MCP_CONFIG],
            n_trials=len(facts),
            job_dirs=job_dirs,
        )
        return run, facts

    def _job_files(
        self,
        rng: random.Random,
        job_dir: Path,
        job_name: str,
        run_id: str,
        config: str,
        task: TaskSpec,
        trial: TrialFacts,
    ) -> None:
        task_path = f"/home/runner/CodeScaleBench/benchmarks/{task.task_dirs[0]}"
        job_config = {
            "job_name": job_name,
            "jobs_dir": f"runs/staging/{run_id}/{config}",
            "n_attempts": 1,
            "timeout_multiplier": 10.0,
            "debug": False,
            "orchestrator": {
                "type": "local",
                "n_concurrent_trials": 4,
                "quiet": False,
                "retry": {"max_retries": 0},
            },
            "environment": {"type": "docker", "force_build": False, "delete": True},
            "verifier": {"override_timeout_sec": None, "max_timeout_sec": None, "disable": False},
            "agents": [
                {
                    "name": None,
                    "import_path": "agents.claude_baseline_agent:BaselineClaudeCodeAgent",
                    "model_name": f"anthropic/{MODEL}",
                    "kwargs": {},
                }
            ],
            "datasets": [],
            "tasks": [
                {
                    "path": task_path,
                    "git_url": None,
                    "git_commit_id": None,
                    "overwrite": False,
                    "download_dir": None,
                    "source": None,
                }
            ],
        }
        started = datetime.strptime(trial.started_at, "%Y-%m-%dT%H:%M:%S.%f")
        reward = trial.reward
        job_result = {
            "id": uuid4(rng),
            "started_at": iso_us(started - timedelta(seconds=1.5)),
            "finished_at": iso_us(started + timedelta(seconds=trial.agent_execution_seconds + 90)),
            "n_total_trials": 1,
            "stats": {
                "n_trials": 1,
                "n_errors": 0 if trial.exception_type is None else 1,
                "evals": {
                    f"claude-code__{MODEL}__{task.suite}": {
                        "n_trials": 1,
                        "n_errors": 0 if trial.exception_type is None else 1,
                        "metrics": [{"mean": reward}],
                        "reward_stats": {"reward": {str(reward): [trial.trial_name]}},
                        "exception_stats": {},
                    }
                },
            },
        }
        self.writer.write(job_dir / "config.json", indent4(job_config))
        self.writer.write(job_dir / "result.json", indent4(job_result))

    # -- one trial -----------------------------------------------------------------------
    def trial(self, rng: random.Random, s: _TrialSpec) -> TrialFacts:
        """Plan one trial, write its files, and return the facts they contain."""
        task, mcp = s.task, s.config == MCP_CONFIG
        skill = min(1.0, rng.betavariate(2.0, 2.0) + (0.05 if mcp else 0.0))
        plan = plan_trial(
            task,
            rng,
            mcp=mcp,
            skill=skill,
            sg_infix=s.sg_infix,
            read_span=self.read_span,
            pad_bytes=self.target_bytes,
            force_subagent=s.variant.subagent,
            allow_subagent=True,
        )
        reward = _reward(rng, task, plan.coverage)
        times = _Timeline.draw(rng, s.start, plan.duration, task.time_limit_sec, s.variant)
        exception_info = None
        if s.variant.truncated:
            reward = 0.0
            exception_info = _timeout_exception(task, times.agent_end)
        meta = SessionMeta(
            session_id=uuid4(rng),
            model=MODEL,
            version=s.version,
            mcp=mcp,
            sg_infix=s.sg_infix,
            instruction=_instruction_for(task, mcp),
            agent_start=times.agent_start,
        )
        self.writer.write(s.trial_dir / "agent" / "instruction.txt", meta.instruction)
        traces = self._write_traces(rng, plan, meta, s)
        self._write_result(rng, s, plan, reward, exception_info, times)
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
            layout=s.layout,
            config_name=s.config,
            trial_dir=s.trial_dir.relative_to(self.out).as_posix(),
            trial_name=s.trial_name,
            task_name=task.name,
            raw_task_name=s.raw_name,
            benchmark=task.suite,
            batch_timestamp=s.batch_ts,
            started_at=iso_us(s.start),
            model=MODEL,
            # result.json says "unknown": only a trace tells the harness version.
            harness_version=s.version if traces.files else None,
            repeat_index=s.repeat,
            trials_for_pair=s.pair_count,
            is_latest_trial=s.repeat == s.pair_count - 1,
            trace_files=traces.files,
            has_transcript=s.variant.transcript,
            has_trajectory=s.variant.trajectory,
            transcript_truncated=traces.truncated,
            banner_lines=traces.banner_lines,
            expected_trace_source=_expected_source(s.variant),
            gt_files=task.gt_files,
            reward=reward,
            exception_type=exception_info["exception_type"] if exception_info else None,
            skill=round(skill, 4),
            coverage=round(plan.coverage, 4),
            transcript_tool_uses=traces.transcript_tool_uses,
            trajectory_tool_steps=traces.trajectory_tool_steps,
            submitted_files=plan.submitted_keys,
            parallel_groups=_parallel_groups(plan.messages) if traces.files else [],
            # The session totals exist only where the trace reports them in full.
            cost_usd=complete.cost_usd if complete and s.variant.transcript else None,
            input_tokens=complete.input_tokens if complete else None,
            output_tokens=complete.output_tokens if complete else None,
            cache_read_tokens=complete.cache_read_tokens if complete else None,
            cache_creation_tokens=complete.cache_creation_tokens if complete else None,
            distinct_messages=complete.distinct_messages if complete else None,
            agent_execution_seconds=round((times.agent_end - times.agent_start).total_seconds(), 6),
            **facts,
        )

    def _write_traces(
        self, rng: random.Random, plan: TrialPlan, meta: SessionMeta, s: _TrialSpec
    ) -> _Traces:
        """Write the trial's transcript and/or trajectory, as its variant says."""
        traces = _Traces()
        if s.variant.transcript:
            self._write_transcript(rng, plan, meta, s, traces)
        if s.variant.trajectory:
            data, order = trajectory_bytes(plan, meta)
            self.writer.write(s.trial_dir / "agent" / "trajectory.json", data)
            traces.files.append("agent/trajectory.json")
            traces.trajectory_tool_steps = len(order)
            traces.present = _walk_calls(plan.messages, False)
            traces.results_present = {c.id for c in traces.present}
        return traces

    def _write_transcript(
        self, rng: random.Random, plan: TrialPlan, meta: SessionMeta, s: _TrialSpec, traces: _Traces
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
        traces.present = [c for c in _walk_calls(plan.messages, True) if c.id in call_ids]
        traces.transcript_tool_uses = len(traces.present)
        if s.variant.stdout_banner:
            traces.banner_lines = _BANNER.count("\n")
            rel = "agent/command-1/stdout.txt"
            self.writer.write_lines(s.trial_dir / rel, [_BANNER.encode("utf-8"), *chunks])
        else:
            rel = "agent/claude-code.txt"
            self.writer.write_lines(s.trial_dir / rel, chunks)
        traces.files.append(rel)

    def _write_result(
        self,
        rng: random.Random,
        s: _TrialSpec,
        plan: TrialPlan,
        reward: float,
        exception_info: dict[str, Any] | None,
        times: _Timeline,
    ) -> None:
        """Write the trial's ``result.json``."""
        task_path = (
            f"/tmp/{s.raw_name}"
            if s.config == MCP_CONFIG
            else f"/home/runner/CodeScaleBench/benchmarks/{s.task.task_dirs[0]}"
        )
        self.writer.write(
            s.trial_dir / "result.json",
            result_json_bytes(
                rng=rng,
                task_name=s.raw_name,
                trial_name=s.trial_name,
                trial_uri=f"file:///home/runner/CodeScaleBench/runs/staging/{s.trials_dir.split('/', 2)[-1]}/{s.trial_name}",
                task_path=task_path,
                trials_dir=s.trials_dir,
                model=MODEL,
                agent_result=_agent_result(plan, s.variant),
                reward=reward,
                exception_info=exception_info,
                phases=times.phases(),
            ),
        )


_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _atif_sums(plan: TrialPlan) -> tuple[int, int, int]:
    """Harbor's ``agent_result`` token sums: per ATIF step, so repeated usage double-counts."""
    prompt = cached = completion = 0

    def walk(messages: list[Message]) -> None:
        nonlocal prompt, cached, completion
        for msg in messages:
            blocks = (1 if msg.thinking else 0) + (1 if msg.text else 0) + len(msg.calls)
            prompt += blocks * (msg.input_tokens + msg.cache_read)
            cached += blocks * msg.cache_read
            completion += (blocks - 1) * msg.placeholder_output + msg.output_tokens
            for call in msg.calls:
                walk(call.children)

    walk(plan.messages)
    return prompt, cached, completion


def _is_example(params: dict[str, Any]) -> bool:
    """Whether ``params`` are those of the bundled examples/ folder."""
    return params == {
        "n_tasks": SCALES["example"]["n_tasks"],
        "seed": 0,
        "n_runs": 1,
        "scale": "example",
        "transcript_target_bytes": None,
        "call_facts": True,
    }

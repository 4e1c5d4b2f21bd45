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

Which trials a generation has, and where they go, is decided here; each trial's files
are written by :class:`retrieval_lib.synth.trial.TrialWriter`, the README by
:mod:`retrieval_lib.synth.readme`, task definitions by :mod:`retrieval_lib.synth.task_files`.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from retrieval_lib.errors import InputError
from retrieval_lib.synth.agent import ID_ALPHABET
from retrieval_lib.synth.catalog import TaskSpec, build_task
from retrieval_lib.synth.formats import harbor_task, indent4, iso_us, uuid4
from retrieval_lib.synth.manifest import (
    MANIFEST_NAME,
    RunFacts,
    SynthManifest,
    TaskFacts,
    TrialFacts,
)
from retrieval_lib.synth.readme import readme_text
from retrieval_lib.synth.task_files import patch_hunks, task_definition_files
from retrieval_lib.synth.trial import (
    BASELINE_CONFIG,
    MCP_CONFIG,
    MODEL,
    TrialSpec,
    TrialWriter,
    Variant,
    Writer,
)

__all__ = ["SCALES", "generate_runs"]

BATCH_BASE = datetime(2026, 3, 1, 9, 15, 0)
ARCHIVE_BASE = datetime(2026, 2, 28, 0, 6, 30)
_ARCHIVED_KINDS = ("solve_sh", "none")

#: Presets of the CLI's ``--scale``: tasks, read span (lines) and call-level facts.
SCALES: dict[str, dict[str, Any]] = {
    "example": {"n_tasks": 10, "read_span": (8, 24), "call_facts": True},
    "bench": {"n_tasks": 200, "read_span": (60, 300), "call_facts": False},
}


#: The first eight tasks' trials of the first run (by position) have fixed variants, so
#: small generations cover every trace shape; later ones are drawn.
_BASELINE_SPECIAL = {
    1: Variant(True, True, subagent=True),
    3: Variant(True, False, truncated=True),
    5: Variant(False, False),
    6: Variant(True, False, stdout_banner=True),
}
_MCP_SPECIAL = {0: Variant(True, True), 4: Variant(True, True)}


def _variant(rng: random.Random, position: int, config: str, first_run: bool) -> Variant:
    special = _BASELINE_SPECIAL if config == BASELINE_CONFIG else _MCP_SPECIAL
    if first_run and position < 8:
        return special.get(position, Variant(config == BASELINE_CONFIG, config != BASELINE_CONFIG))
    roll = rng.random()
    if config == BASELINE_CONFIG:
        if roll < 0.08:
            return Variant(True, True)
        if roll < 0.11:
            return Variant(True, False, truncated=True)
        if roll < 0.13:
            return Variant(False, False)
        if roll < 0.17:
            return Variant(True, False, stdout_banner=True)
        return Variant(True, False)
    return Variant(True, True) if roll < 0.15 else Variant(False, True)


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
    writer = Writer(out)

    tasks = [build_task(i, seed) for i in range(n_tasks)]
    for task in tasks:
        for path, text in task_definition_files(task, out / "benchmarks").items():
            writer.write(path, text)
    archived = [t for t in tasks if t.kind in _ARCHIVED_KINDS] or [tasks[-1]]
    batch = [t for t in tasks if t not in archived] or list(tasks)

    trials = TrialWriter(writer, preset["read_span"], transcript_target_bytes or 0, want_calls)
    made = [_batch_run(trials, seed, run_index, batch) for run_index in range(n_runs)]
    made.append(_archived_run(trials, seed, archived))

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
        runs=[run for run, _ in made],
        trials=[trial for _, run_trials in made for trial in run_trials],
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


def _write_readme_and_manifest(manifest: SynthManifest, writer: Writer) -> None:
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
    chunks = [
        (c.repo, c.path, c.line_start, c.line_end, c.annotation, c.defect_type) for c in task.chunks
    ]
    if task.kind in ("reference_patch", "solve_sh"):
        # New-side line range of each patch hunk (same length as the old side here).
        for repo, path, start, lines in patch_hunks(task):
            chunks.append((repo, path, start, start + len(lines) - 1, None, None))
    return TaskFacts(
        name=task.name,
        suite=task.suite,
        task_dirs=list(task.task_dirs),
        gt_kind=task.kind,
        gt_source=task.gt_source,
        gt_confidence=task.gt_confidence,
        gt_files=task.gt_files,
        expected_edit_files=sorted({task.key(r, p) for r, p in task.edit_files})
        if task.kind in ("dict", "expected_changes", "reference_patch", "solve_sh")
        else [],
        gt_chunks=[
            {
                "file": task.key(repo, path),
                "line_start": start,
                "line_end": end,
                "annotation": annotation,
                "defect_type": defect_type,
            }
            for repo, path, start, end, annotation, defect_type in chunks
        ],
        symbol=task.symbol,
        repos=[p.short for p in task.repos],
        reward_type=task.reward_type,
    )


def _trial_name(rng: random.Random, raw_name: str) -> str:
    """A trial folder's name: the task's, cut to 32 characters, and a random suffix."""
    return f"{raw_name[:32]}__{''.join(rng.choices(ID_ALPHABET, k=7))}"


def _batch_run(
    trials: TrialWriter, seed: int, run_index: int, tasks: list[TaskSpec]
) -> tuple[RunFacts, list[TrialFacts]]:
    """A batch-layout run: every task under both configs, then a few baseline repeats."""
    base = BATCH_BASE + timedelta(days=run_index)
    run_id = f"csb_synth_haiku_{base:%Y%m%d_%H%M%S}"
    run_dir = trials.writer.root / "runs" / "official" / run_id
    rng = random.Random(f"run:{seed}:{run_index}")
    jobs: list[tuple[TaskSpec, str, int, datetime, Variant]] = []
    repeats: list[tuple[TaskSpec, str]] = []
    for position, task in enumerate(tasks):
        for offset, config in ((0, BASELINE_CONFIG), (40, MCP_CONFIG)):
            start = base + timedelta(seconds=150 * position + offset)
            jobs.append((task, config, 0, start, _variant(rng, position, config, run_index == 0)))
        if (run_index == 0 and position == 2) or (position >= 8 and rng.random() < 0.03):
            repeats.append((task, BASELINE_CONFIG))
    end = base + timedelta(seconds=150 * len(tasks) + 60)
    for k, (task, config) in enumerate(repeats):
        jobs.append((task, config, 1, end + timedelta(seconds=150 * k), Variant(True, False)))
    pair_counts = Counter((t.name, c) for t, c, *_ in jobs)
    facts = []
    for task, config, repeat, start, variant in jobs:
        batch_ts = f"{start:%Y-%m-%d__%H-%M-%S}"
        trial_rng = random.Random(f"trial:{seed}:{run_index}:{task.index}:{config}:{repeat}")
        raw_name = task.name
        if config == MCP_CONFIG:
            raw_name = f"mcp_{task.name}_{''.join(trial_rng.choices(ID_ALPHABET, k=6))}"
        trial_dir = run_dir / config / batch_ts / _trial_name(trial_rng, raw_name)
        spec = TrialSpec(
            task=task,
            run_id=run_id,
            config=config,
            raw_name=raw_name,
            trial_dir=trial_dir,
            batch_ts=batch_ts,
            start=start + timedelta(microseconds=trial_rng.randint(100000, 900000)),
            variant=variant,
            repeat=repeat,
            pair_count=pair_counts[(task.name, config)],
        )
        facts.append(trials.write(trial_rng, spec))
    path = run_dir.relative_to(trials.writer.root).as_posix()
    return RunFacts(run_id, "batch", path, [BASELINE_CONFIG, MCP_CONFIG], len(facts)), facts


def _archived_run(
    trials: TrialWriter, seed: int, tasks: list[TaskSpec]
) -> tuple[RunFacts, list[TrialFacts]]:
    """The archived-layout run: one job folder per task and config, each with one trial."""
    run_id = f"csb_synth_haiku_{ARCHIVE_BASE:%m%d%y}"
    run_dir = trials.writer.root / "runs" / "official" / "archive" / run_id
    facts = []
    job_dirs = []
    for position, task in enumerate(tasks):
        for offset, config, group in ((0, BASELINE_CONFIG, "baseline"), (3, MCP_CONFIG, "mcp")):
            start = ARCHIVE_BASE + timedelta(seconds=200 * position + offset)
            trial_rng = random.Random(f"archived:{seed}:{task.index}:{config}")
            mcp = config == MCP_CONFIG
            raw_name = f"sgonly_{task.name}" if mcp else task.name
            job_dir = run_dir / group / f"{task.suite}_{task.name}_{config}"
            spec = TrialSpec(
                task=task,
                run_id=run_id,
                config=config,
                raw_name=raw_name,
                trial_dir=job_dir / _trial_name(trial_rng, raw_name),
                batch_ts=None,
                start=start + timedelta(microseconds=trial_rng.randint(100000, 900000)),
                variant=Variant(not mcp, mcp),
            )
            trial = trials.write(trial_rng, spec)
            facts.append(trial)
            job_dirs.append(job_dir.relative_to(trials.writer.root).as_posix())
            _write_job_files(trials.writer, trial_rng, job_dir, spec, trial)
    path = run_dir.relative_to(trials.writer.root).as_posix()
    configs = [BASELINE_CONFIG, MCP_CONFIG]
    return RunFacts(run_id, "archived", path, configs, len(facts), job_dirs), facts


def _write_job_files(
    writer: Writer, rng: random.Random, job_dir: Path, spec: TrialSpec, trial: TrialFacts
) -> None:
    """An archived job folder's own ``config.json`` and ``result.json`` (not a trial)."""
    job_config = {
        "job_name": job_dir.name,
        "jobs_dir": f"runs/staging/{spec.run_id}/{spec.config}",
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
        "tasks": [harbor_task(f"/home/runner/CodeScaleBench/benchmarks/{spec.task.task_dirs[0]}")],
    }
    started = datetime.strptime(trial.started_at, "%Y-%m-%dT%H:%M:%S.%f")
    reward = trial.reward
    n_errors = 0 if trial.exception_type is None else 1
    job_result = {
        "id": uuid4(rng),
        "started_at": iso_us(started - timedelta(seconds=1.5)),
        "finished_at": iso_us(started + timedelta(seconds=trial.agent_execution_seconds + 90)),
        "n_total_trials": 1,
        "stats": {
            "n_trials": 1,
            "n_errors": n_errors,
            "evals": {
                f"claude-code__{MODEL}__{spec.task.suite}": {
                    "n_trials": 1,
                    "n_errors": n_errors,
                    "metrics": [{"mean": reward}],
                    "reward_stats": {"reward": {str(reward): [trial.trial_name]}},
                    "exception_stats": {},
                }
            },
        },
    }
    writer.write(job_dir / "config.json", indent4(job_config))
    writer.write(job_dir / "result.json", indent4(job_result))


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

"""The README.md of a synthetic generation: how to regenerate it, its layout, its tasks
and trials, and how to read its manifest."""

from __future__ import annotations

from pathlib import Path

from retrieval_lib.synth.manifest import SynthManifest, TrialFacts

__all__ = ["readme_text"]

_INTRO = [
    "# Synthetic benchmark runs (generated)",
    "",
    "Everything in this folder was written by `retrieval_lib.synth.generate_runs`: the",
    "tasks, runs and traces are synthetic but have the structure of real CodeScaleBench /",
    "Harbor run artifacts (same folder layouts, file names, JSON keys and id styles).",
    "Do not edit these files by hand; regenerate them instead (this replaces `runs/`,",
    "`benchmarks/`, `README.md` and `synth_manifest.json` and leaves any other entry of",
    "the folder, such as `kb/`, alone):",
    "",
]

_LAYOUT = [
    "The same arguments always produce byte-identical files.",
    "",
    "## Layout",
    "",
    "- `benchmarks/<suite>/<task>/`: task definitions (`task.toml`, `instruction.md`,",
    "  `tests/`, `solution/`), one ground-truth kind per task (table below).",
    "- `runs/official/<run_id>/<config>/<YYYY-MM-DD__HH-MM-SS>/<trial>/`: batch layout.",
    "- `runs/official/archive/<run_id>/{baseline|mcp}/<job_name>/<trial>/`: archived job",
    "  layout; each job folder also has a job-level `config.json` and `result.json`",
    "  (not trials).",
    "- Each trial: `result.json`, `verifier/reward.txt`, `agent/instruction.txt` and its",
    "  traces: `agent/claude-code.txt` (stream-json transcript), `agent/trajectory.json`",
    "  (ATIF-v1.2), or the older `agent/command-1/stdout.txt` (transcript behind shell",
    "  banner lines).",
    "- `synth_manifest.json`: the facts each trial's files contain (ground-truth files,",
    "  which of them the agent surfaced, read and wrote, tool-call counts, first",
    "  ground-truth hit, reward, token totals), for end-to-end tests.",
    "",
    "## Tasks",
    "",
]

_BEHAVIOUR = [
    "",
    "## How the agents behave",
    "",
    "Each trial draws a latent skill; the skill sets how many relevant files the agent's",
    "searches surface and how many of those it reads. The reward follows the share of",
    "the ground truth the agent submitted or edited, plus noise, so retrieval and outcome",
    "are correlated but not perfectly. Baseline agents use Grep, Glob, Read and Bash",
    "(`find`, `grep -rn`, `sed -n`, `head`), sometimes a `Task` subagent; MCP agents use",
    "Sourcegraph `keyword_search`, `nls_search`, `list_files`, `find_references` and",
    "`read_file`, then write locally. In MCP transcripts, tool results are lists of text",
    "blocks, as Claude Code writes them; in trajectories they are strings.",
    "",
    "## Reading the manifest",
    "",
    "- File keys are lowercase repository-relative paths; in the multi-repo (org) task they",
    "  are `repo::path` with the short repository name (`istio::pilot/pkg/xds/rds.go`).",
    "  `gt_files` holds the keys a ground-truth loader should produce for the task.",
    "- `surfaced_gt_files`: ground-truth keys named by any non-write call's arguments or",
    "  result; `read_gt_files`: those read (Read, `read_file`, `sed -n`, `head`);",
    "  `written_files`: files written (Write, Edit).",
    "- `tool_calls`, `calls` and `first_gt_hit_step` count every tool call present in the",
    "  trace, in the trajectory's order when there is one (parallel calls reversed), else",
    "  the transcript's; calls after the cut of a truncated transcript are absent.",
    "- Token totals and `cost_usd` are the session totals over distinct API messages;",
    "  they are `null` when no trace reports them in full (no trace, or a transcript cut",
    "  off before its `result` line). `harness_version` is `null` without a trace.",
    "",
]


def readme_text(manifest: SynthManifest, *, is_example: bool) -> str:
    """The README of ``manifest``'s generation (``is_example``: the bundled examples/).

    Examples
    --------
    >>> from retrieval_lib.synth.manifest import SynthManifest
    >>> params = {"n_tasks": 1, "seed": 0, "n_runs": 1, "scale": "example",
    ...           "transcript_target_bytes": None, "call_facts": True}
    >>> text = readme_text(SynthManifest(params=params, tasks=[], runs=[], trials=[],
    ...                                  files_written=0, bytes_written=0, out_dir=Path(".")),
    ...                    is_example=False)
    >>> text.splitlines()[10]
    'retrieval-lib synth --out DIR --tasks 1 --seed 0 --runs 1 --scale example'
    """
    out = [
        *_INTRO,
        "```bash",
        "retrieval-lib synth --out examples --scale example" if is_example else _command(manifest),
        "```",
        "",
        *_LAYOUT,
        *_task_table(manifest),
        *_trial_table(manifest),
        *_BEHAVIOUR,
    ]
    return "\n".join(out)


def _command(manifest: SynthManifest) -> str:
    """The ``retrieval-lib synth`` command that regenerates the folder."""
    params = manifest.params
    command = (
        f"retrieval-lib synth --out DIR --tasks {params['n_tasks']} --seed {params['seed']} "
        f"--runs {params['n_runs']} --scale {params['scale']}"
    )
    if params["transcript_target_bytes"]:
        command += f" --transcript-mb {params['transcript_target_bytes'] / 1e6:g}"
    return command


def _task_table(manifest: SynthManifest) -> list[str]:
    """One row per task: its suite folders, kind of ground truth, source and file count."""
    out = [
        "| task | suite folder(s) | ground truth | source | files |",
        "|---|---|---|---|---|",
    ]
    for task in manifest.tasks:
        out.append(
            f"| {task.name} | {', '.join(task.task_dirs)} | {task.gt_kind} | "
            f"{task.gt_source or '-'} | {len(task.gt_files)} |"
        )
    return out


def _trial_table(manifest: SynthManifest) -> list[str]:
    """One row per trial: its run, config, traces, reward and what is special about it."""
    out = [
        "",
        "## Trials",
        "",
        "| run | config | trial | traces | reward | note |",
        "|---|---|---|---|---|---|",
    ]
    for trial in manifest.trials:
        traces = ", ".join(Path(p).name for p in trial.trace_files) or "-"
        out.append(
            f"| {trial.run_id} | {trial.config_name} | {trial.trial_name} | {traces} | "
            f"{trial.reward} | {'; '.join(_notes(trial))} |"
        )
    return out


def _notes(trial: TrialFacts) -> list[str]:
    """What a reader of the trial's files should know about them."""
    notes = []
    if trial.transcript_truncated:
        notes.append("transcript cut off (agent timed out)")
    if trial.banner_lines:
        notes.append("transcript in command-1/stdout.txt after banner lines")
    if not trial.trace_files:
        notes.append("no trace")
    if trial.has_transcript and trial.has_trajectory:
        notes.append("both traces (merge)")
    if trial.trials_for_pair > 1:
        notes.append(f"repeat {trial.repeat_index + 1} of {trial.trials_for_pair}")
    if trial.subagent_calls:
        notes.append(f"{trial.subagent_calls} subagent calls")
    return notes

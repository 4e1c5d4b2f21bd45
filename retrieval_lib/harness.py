"""The harness (agent) version of a trial, from whichever artifact records it.

Matched comparisons pair trials of the same harness version, so the document records the
version, where it was read (``provenance.harness_version_source``) or why none was
(``provenance.harness_version_unknown_reason``); ``docs/contracts.md`` §1. The artifacts,
the first that names a version winning (a warning when a later one names another):
``result.json`` ``agent_info.version`` (unless "unknown" or empty, as in every trial of
the real archives); ``agent/trajectory.json`` ``agent.version``, read from the raw JSON
even when the trajectory is unusable (:func:`trajectory_agent_version`); the transcript's
init line (``claude_code_version``); ``task_metrics.json`` (:data:`TASK_METRICS_FILE`:
``harness_version``, ``agent_version`` or ``agent_info.version``; the CodeScaleBench file
records none of them).

Examples
--------
>>> known_version(" 2.1.62 "), known_version("unknown"), known_version(""), known_version(3)
('2.1.62', None, None, None)
>>> import pathlib, tempfile
>>> trial = pathlib.Path(tempfile.mkdtemp())
>>> found = resolve_harness_version(
...     trial, result_version=None, trace_versions=[("2.1.62", "agent/claude-code.txt init line")],
...     trace_state="usable")
>>> found.version, found.source, found.unknown_reason
('2.1.62', 'agent/claude-code.txt init line', None)
>>> missing = resolve_harness_version(trial, result_version=None, trace_versions=[],
...     trace_state="unusable")
>>> missing.version, missing.source, missing.unknown_reason
(None, None, 'no usable trace')
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from retrieval_lib.io import lies_outside, read_regular_bytes

__all__ = [
    "RESULT_JSON_SOURCE",
    "TASK_METRICS_FILE",
    "TRAJECTORY_SOURCE",
    "HarnessVersion",
    "known_version",
    "resolve_harness_version",
    "transcript_source",
    "trajectory_agent_version",
]

#: ``harness_version_source`` of a version read from ``result.json``.
RESULT_JSON_SOURCE = "result.json agent_info.version"
#: ``harness_version_source`` of a version read from the ATIF trajectory's agent block.
TRAJECTORY_SOURCE = "agent/trajectory.json agent.version"
#: The harness's per-trial metrics file beside ``result.json``.
TASK_METRICS_FILE = "task_metrics.json"
#: Keys of ``task_metrics.json`` that may hold the version, in order (dotted = nested).
_TASK_METRICS_KEYS = ("harness_version", "agent_version", "agent_info.version")
_UNKNOWN_WORDS = frozenset({"unknown", "none", "null", "n/a", "na"})
_AGENT_BLOCK_RE = re.compile(r'"agent"\s*:\s*(?=\{)')
_AGENT_BLOCK_WINDOW = 65536  # the agent block sits at the top of trajectory.json

TraceState = Literal["usable", "unusable", "absent"]


def known_version(value: Any) -> str | None:
    """``value`` as a version string, or None when it is missing or says "unknown"."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or text.lower() in _UNKNOWN_WORDS:
        return None
    return text


def transcript_source(relative_path: str) -> str:
    """``harness_version_source`` of a version read from a transcript's init line.

    Examples
    --------
    >>> transcript_source("agent/claude-code.txt")
    'agent/claude-code.txt init line'
    """
    return f"{relative_path} init line"


@dataclass(frozen=True)
class HarnessVersion:
    """A trial's harness version and where it was read.

    Attributes
    ----------
    version : str or None
        The version, or None when no artifact records one.
    source : str or None
        Where it was read (``"result.json agent_info.version"``,
        ``"agent/trajectory.json agent.version"``, ``"<transcript> init line"`` or
        ``"task_metrics.json <key>"``); None when unknown.
    unknown_reason : str or None
        Why it is unknown (``"no trace"``, ``"no usable trace"`` or ``"trace records no
        version"``); None when known.
    warnings : tuple of str
        Artifacts that name another version than the one used.
    """

    version: str | None
    source: str | None
    unknown_reason: str | None = None
    warnings: tuple[str, ...] = field(default=())


def _nested(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def trajectory_agent_version(path: Path, within: Path | None = None) -> str | None:
    """``agent.version`` of a trajectory file's agent block, decoded on its own, or None.

    Used when the trajectory as a whole is unusable: the agent block at the top of the
    file may still be readable even when the steps are broken or the file was cut off
    (an agent killed mid-run leaves exactly that). Only the first 64 KiB are read. A file
    that symlinks out of ``within`` (the trial folder) is not read.
    """
    try:
        if within is not None and lies_outside(path, within):
            return None
        head = read_regular_bytes(path, limit=_AGENT_BLOCK_WINDOW).decode(
            "utf-8-sig", errors="replace"
        )
    except (OSError, ValueError, RuntimeError):
        return None
    steps = head.find('"steps"')
    found = _AGENT_BLOCK_RE.search(head, 0, steps if steps >= 0 else len(head))
    if found is None:
        return None
    try:
        block, _ = json.JSONDecoder().raw_decode(head, found.end())
    except (ValueError, RecursionError):
        return None
    return known_version(_nested(block, "version"))


def _task_metrics_version(trial_dir: Path) -> tuple[str, str] | None:
    path = trial_dir / TASK_METRICS_FILE
    if not path.is_file() or lies_outside(path, trial_dir):
        return None
    try:
        data = json.loads(read_regular_bytes(path).decode("utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None
    for key in _TASK_METRICS_KEYS:
        version = known_version(_nested(data, key))
        if version is not None:
            return version, f"{TASK_METRICS_FILE} {key}"
    return None


def resolve_harness_version(
    trial_dir: Path,
    *,
    result_version: str | None,
    trace_versions: Sequence[tuple[str | None, str]],
    trace_state: TraceState,
) -> HarnessVersion:
    """The trial's harness version, from the first artifact that records one.

    Parameters
    ----------
    trial_dir : pathlib.Path
        The trial folder (``task_metrics.json`` is read from it when needed).
    result_version : str or None
        ``result.json`` ``agent_info.version`` (None when absent or "unknown").
    trace_versions : sequence of (str or None, str)
        ``(version, source)`` read from the traces, trajectory first.
    trace_state : {"usable", "unusable", "absent"}
        Whether the trial has a usable trace, only unusable trace files, or none; it
        words the reason when no version is found.

    Returns
    -------
    HarnessVersion
    """
    named = [(result_version, RESULT_JSON_SOURCE), *trace_versions]
    candidates = [(v, s) for v, s in ((known_version(v), s) for v, s in named) if v]
    if not candidates:
        from_metrics = _task_metrics_version(trial_dir)
        if from_metrics is not None:
            candidates.append(from_metrics)
    if not candidates:
        reason = {
            "usable": "trace records no version",
            "unusable": "no usable trace",
            "absent": "no trace",
        }[trace_state]
        return HarnessVersion(None, None, reason)
    version, source = candidates[0]
    warnings = tuple(
        f"harness version {other} in {where} differs from {version} in {source}; using {version}"
        for other, where in candidates[1:]
        if other != version
    )
    return HarnessVersion(version, source, None, warnings)

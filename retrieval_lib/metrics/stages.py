"""Retrieval metric stages 1-4 of seed 001 over retrieval-event documents.

Each document (one trial, ``docs/contracts.md`` §1) becomes one metrics record, the content
of ``<task>.retrieval_metrics.json``:

1. **File level** (``file_level``): P/R/F1/nDCG at every K, AP, RR, file-level recall,
   context efficiency and time-to-first-relevant (seconds, step, running tokens) over the
   *surfaced* ranking; the same ranking metrics over the files actually *read*
   (``read_level``) and the funnel surfaced → read → edited (``funnel``).
2. **Chunk level** (``chunk_level``): file-match chunk recall (``validity:
   "file_match_only"``) and, where events carry line ranges, line-overlap chunk recall
   (``validity: "line_overlap"``).
3. **Utilisation probes** (``utilization``): the four ``util_*`` probes of the seed with
   their availability flags and a reason for every null.
   ``util_read_overlap_with_relevant_files`` (``util.read_overlap`` in the table),
   ``|files read ∩ relevant| / |relevant|``, is by definition the recall of the read
   ranking (``read.recall``) and equal to it on every trial; the seed's name is kept, but
   only ``read.recall`` is in the key-metric family of the statistics
   (:data:`retrieval_lib.stats.columns.KEY_METRICS`), so it is tested once.
4. **Error taxonomy** (``error_taxonomy``) and **calibration slices** (``calibration``).

Every ranking metric comes from :func:`retrieval_lib.metrics.ranking.evaluate_rankings`,
called once per ranking kind for all documents at once.

Policies (the choices the seed leaves open)
-------------------------------------------
* **Surfaced ranking**: the first-seen order of unique target files over retrieval events,
  i.e. every event except ``file_write`` events and ``other`` events without targets, in
  ``step_index`` order. An event with ``is_error`` true did nothing and is skipped
  everywhere (a failed ``Read`` of a file that does not exist yet is not evidence, and a
  refused ``Write`` neither creates nor edits a file).
* **Agent-created files**: a file whose first appearance (over all non-failed events) is a
  ``file_write`` event of the ``Write`` tool, or the ``created_files`` of a Bash event
  (``echo x > notes.md``, ``tee``, a ``cp``/``mv`` destination, ``touch``, a
  here-document; events schema 1.2), was created by the agent (its own
  ``submission.json``, a new test file). It is dropped from the surfaced and read rankings
  even when read later (``cat notes.md``), and listed in ``funnel.agent_created_files``.
  Within one event the targets come before the created files, so a file read and then
  overwritten by the shell was retrieved.
* **Read ranking**: first-seen order of ``file_read`` targets, agent-created files dropped.
* **Edited** (repository edits): every file that is a target of a successful
  ``file_write`` event or in the ``created_files`` of a successful Bash event, except agent-created files that are neither ground truth nor
  expected edit files. An answer file such as ``submission.json`` is an artefact of the
  task, not an edit of the repository: counting it would give every answer-file task a
  ``wrong_evidence_used`` entry and a write probe of 0.0 where "no repository writes"
  (null) is the truth. The funnel, the probes and the taxonomy use this set; the
  agent-created files are listed apart (``funnel.agent_created_files``).
* **Whole-file reads**: a ``file_read`` event that names a file without a line range
  (``Read`` without ``limit``, ``cat``, MCP ``read_file`` without lines) read the whole
  file, so line-overlap chunk recall counts every chunk of that file as covered.
* **Missing is not zero**: a document without a usable trace or without file-level ground
  truth gets ``{"computable": false, "reason": ...}`` markers, never 0.0 or 1.0. Within a
  computable stage a value that cannot exist (context efficiency of an empty ranking, TTFR
  when no relevant file was reached, write probes without writes) is ``null`` beside a
  reason.

The four stages share the trace view (:class:`TraceView`) and the not-computable reasons.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from retrieval_lib import __version__
from retrieval_lib.errors import MetricError, SchemaError
from retrieval_lib.events.document import DOCUMENT_SUFFIX as EVENTS_SUFFIX
from retrieval_lib.events.document import METRICS_SUFFIX
from retrieval_lib.io import load_package_json
from retrieval_lib.metrics.ranking import evaluate_rankings

__all__ = [
    "AGENT_CREATE_TOOLS",
    "DEFAULT_K",
    "METRICS_SCHEMA_VERSION",
    "TAXONOMY_LABELS",
    "TraceView",
    "candidate_set_size_slice",
    "evaluate_document",
    "evaluate_documents",
    "file_level_reason",
    "has_usable_trace",
    "metrics_schema",
    "metrics_filename",
    "normalize_k",
    "ranking_metric_names",
    "shipped_schema",
    "validate_metrics_record",
]

#: Version of the ``*.retrieval_metrics.json`` format (its JSON Schema is shipped).
METRICS_SCHEMA_VERSION = "1.0"
#: Cut-offs of the file-level ranking metrics unless the caller gives others.
DEFAULT_K: tuple[int, ...] = (1, 3, 5, 10)
#: Tools whose first touch of a file means the agent created that file.
AGENT_CREATE_TOOLS: frozenset[str] = frozenset({"Write"})
#: The five error labels of seed 001, in the seed's order.
TAXONOMY_LABELS: tuple[str, ...] = (
    "irrelevant_retrieval",
    "missed_key_evidence",
    "wrong_evidence_used",
    "unused_correct_retrieval",
    "ambiguity_near_miss",
)
#: Reason codes of a non-computable file level (the summary groups skipped documents by them).
NO_TRACE = "no_trace"
NO_GROUND_TRUTH = "no_ground_truth"


def normalize_k(k: Iterable[int]) -> tuple[int, ...]:
    """Validate the cut-offs: positive integers, deduplicated and sorted.

    Examples
    --------
    >>> normalize_k([10, 1, 5, 5])
    (1, 5, 10)
    """
    values: set[int] = set()
    for value in k:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise MetricError(f"cut-off K must be a positive integer, got {value!r}")
        values.add(int(value))
    if not values:
        raise MetricError("at least one cut-off K is needed")
    return tuple(sorted(values))


def ranking_metric_names(k: Iterable[int] = DEFAULT_K) -> list[str]:
    """Kernel metric names of the file and read stages, in column order.

    Examples
    --------
    >>> ranking_metric_names([1, 5])
    ['P@1', 'R@1', 'F1@1', 'nDCG@1', 'P@5', 'R@5', 'F1@5', 'nDCG@5', 'AP', 'RR']
    """
    names = [f"{m}@{cut}" for cut in normalize_k(k) for m in ("P", "R", "F1", "nDCG")]
    return [*names, "AP", "RR"]


def metrics_filename(events_filename: str) -> str:
    """Name of the metrics file for an events document (same base name).

    Examples
    --------
    >>> metrics_filename("django-001.retrieval_events.json")
    'django-001.retrieval_metrics.json'
    """
    if events_filename.endswith(EVENTS_SUFFIX):
        return events_filename[: -len(EVENTS_SUFFIX)] + METRICS_SUFFIX
    if events_filename.endswith(".json"):
        return events_filename[: -len(".json")] + METRICS_SUFFIX
    return events_filename + METRICS_SUFFIX


def candidate_set_size_slice(size: int) -> str:
    """Calibration slice of a candidate set: small (≤5), medium (6–20) or large (>20).

    Examples
    --------
    >>> [candidate_set_size_slice(n) for n in (0, 5, 6, 20, 21)]
    ['small', 'small', 'medium', 'medium', 'large']
    """
    if size <= 5:
        return "small"
    if size <= 20:
        return "medium"
    return "large"


def _directory_of(key: str) -> tuple[str | None, str]:
    """``(repo or None, directory)`` of a normalised key (``a::x/y.py`` → ``("a", "x")``)."""
    repo, sep, path = key.rpartition("::")
    return (repo if sep else None, path.rpartition("/")[0])


def _near_misses(candidates: Iterable[str], ground_truth: Iterable[str]) -> set[str]:
    """Candidates lying in a directory that holds a ground-truth file.

    A side without a repo matches any repo: a single-repo ground truth is written as plain
    paths while MCP tools name files ``repo::path``, and both denote the same folder.
    """
    repos_by_dir: dict[str, set[str | None]] = {}
    for key in ground_truth:
        repo, directory = _directory_of(key)
        repos_by_dir.setdefault(directory, set()).add(repo)
    found = set()
    for key in candidates:
        repo, directory = _directory_of(key)
        repos = repos_by_dir.get(directory)
        if repos is not None and (repo is None or None in repos or repo in repos):
            found.add(key)
    return found


@dataclass(frozen=True)
class TraceView:
    """The file-level facts of one document's events, derived once.

    Attributes
    ----------
    ranked_files
        Surfaced ranking: unique retrieval targets in first-seen order (agent-created dropped).
    read_files
        Unique ``file_read`` targets in first-seen order (agent-created dropped).
    written_files
        Unique targets of successful ``file_write`` events and ``created_files`` of
        successful events, in first-seen order.
    agent_created_files
        Files whose first appearance is a ``Write`` or a shell creation (sorted).
    first_relevant_event
        The first retrieval event reaching a ground-truth file, with that file, or ``None``.
    first_read_step, first_write_step
        Step index of the first read / write of each file.
    ranges
        Line ranges per file declared by retrieval events (``file_ranges``).
    whole_file_reads
        Files a ``file_read`` event named without a line range (read in full).
    mcp_events
        Number of events that are MCP tool calls.
    """

    ranked_files: tuple[str, ...]
    read_files: tuple[str, ...]
    written_files: tuple[str, ...]
    agent_created_files: tuple[str, ...]
    first_relevant_event: tuple[Mapping[str, Any], str] | None
    first_read_step: Mapping[str, int]
    first_write_step: Mapping[str, int]
    ranges: Mapping[str, tuple[tuple[int, int], ...]]
    mcp_events: int
    whole_file_reads: frozenset[str] = frozenset()

    @classmethod
    def from_document(cls, doc: Mapping[str, Any]) -> TraceView:
        """Derive the view from a document's ``events`` and ``ground_truth.files``.

        Examples
        --------
        >>> doc = {"ground_truth": {"files": ["a.py"]}, "events": [
        ...     {"step_index": 0, "tool_name": "Grep", "tool_category": "code_search",
        ...      "is_mcp": False, "target_files": ["b.py", "a.py"]},
        ...     {"step_index": 1, "tool_name": "Write", "tool_category": "file_write",
        ...      "is_mcp": False, "target_files": ["out.json"]}]}
        >>> view = TraceView.from_document(doc)
        >>> view.ranked_files, view.written_files, view.agent_created_files
        (('b.py', 'a.py'), ('out.json',), ('out.json',))
        """
        events = sorted(doc.get("events") or (), key=lambda ev: ev["step_index"])
        ground_truth = set(doc.get("ground_truth", {}).get("files") or ())

        # a file is agent-created when its first (non-failed) appearance is a Write or a
        # shell command that wrote it (``created_files``); within one event the targets
        # come first (``cat f; echo x > f`` read f before overwriting it)
        first_touch: dict[str, bool] = {}
        for ev in events:
            if _failed(ev):
                continue
            creates = ev["tool_category"] == "file_write" and ev["tool_name"] in AGENT_CREATE_TOOLS
            for target in ev["target_files"]:
                first_touch.setdefault(target, creates)
            for target in ev.get("created_files") or ():
                first_touch.setdefault(target, True)
        created = {f for f, creates in first_touch.items() if creates}

        ranked: dict[str, None] = {}
        first_read: dict[str, int] = {}  # the files read, in first-seen order
        first_write: dict[str, int] = {}  # the files written, in first-seen order
        ranges: dict[str, list[tuple[int, int]]] = {}
        whole_reads: set[str] = set()
        first_relevant: tuple[Mapping[str, Any], str] | None = None
        for ev in events:
            category = ev["tool_category"]
            targets = ev["target_files"]
            if _failed(ev):
                continue
            writes = targets if category == "file_write" else ()
            for target in [*(ev.get("created_files") or ()), *writes]:
                first_write.setdefault(target, ev["step_index"])
            if category == "file_write":
                continue
            if category == "other" and not targets:
                continue
            spans = ev.get("file_ranges") or ()
            for target in targets:
                if target in created:
                    continue
                ranked.setdefault(target, None)
                if category == "file_read":
                    first_read.setdefault(target, ev["step_index"])
                if first_relevant is None and target in ground_truth:
                    first_relevant = (ev, target)
            if category == "file_read":
                with_range = {span["file"] for span in spans}
                whole_reads.update(t for t in targets if t not in created and t not in with_range)
            for span in spans:
                if span["file"] not in created:
                    ranges.setdefault(span["file"], []).append(
                        (int(span["line_start"]), int(span["line_end"]))
                    )
        return cls(
            ranked_files=tuple(ranked),
            read_files=tuple(first_read),
            written_files=tuple(first_write),
            agent_created_files=tuple(sorted(created)),
            first_relevant_event=first_relevant,
            first_read_step=first_read,
            first_write_step=first_write,
            ranges={f: tuple(spans) for f, spans in ranges.items()},
            mcp_events=sum(1 for ev in events if ev.get("is_mcp")),
            whole_file_reads=frozenset(whole_reads),
        )


def _failed(ev: Mapping[str, Any]) -> bool:
    return ev.get("is_error") is True


def _repository_edits(doc: Mapping[str, Any], view: TraceView) -> tuple[str, ...]:
    """Written files minus agent-created artefacts that are not ground truth or edit targets."""
    keep = set(doc["ground_truth"].get("files") or ()) | set(
        doc["ground_truth"].get("expected_edit_files") or ()
    )
    created = set(view.agent_created_files)
    return tuple(f for f in view.written_files if f not in created or f in keep)


def _not_computable(reason: str, **extra: Any) -> dict[str, Any]:
    return {"computable": False, "reason": reason, **extra}


def _is_ground_truth_gap(reason: str) -> bool:
    return "ground truth" in reason.lower() or "ground_truth" in reason.lower()


def _coverage_detail(
    coverage: Mapping[str, Any], *, ground_truth: bool | None = None
) -> str | None:
    """The coverage gaps as one string; ``ground_truth`` keeps only (or drops) GT gaps."""
    reasons = [str(r) for r in coverage.get("degraded_reasons") or ()]
    if not reasons and coverage.get("degraded_reason"):
        reasons = [str(coverage["degraded_reason"])]
    if ground_truth is not None:
        chosen = [r for r in reasons if _is_ground_truth_gap(r) == ground_truth]
        reasons = chosen or reasons
    return "; ".join(reasons) if reasons else None


def has_usable_trace(doc: Mapping[str, Any]) -> bool:
    """True when the document has a trace its events came from (not degraded).

    Examples
    --------
    >>> has_usable_trace({"coverage": {"trace_source": None, "has_transcript": False}})
    False
    """
    coverage = doc["coverage"]
    return coverage.get("trace_source") is not None and bool(
        coverage.get("has_trajectory") or coverage.get("has_transcript")
    )


def _has_file_ground_truth(doc: Mapping[str, Any]) -> bool:
    return bool(doc["coverage"].get("has_ground_truth")) and bool(doc["ground_truth"].get("files"))


def _with_detail(text: str, detail: str | None) -> str:
    return f"{text}: {detail}" if detail else text


def _trace_reason(doc: Mapping[str, Any]) -> str:
    detail = _coverage_detail(doc["coverage"], ground_truth=False)
    return _with_detail("no usable trace (degraded mode)", detail)


def _ground_truth_reason(doc: Mapping[str, Any]) -> str:
    detail = _coverage_detail(doc["coverage"], ground_truth=True)
    return _with_detail("no file-level ground truth", detail)


def _file_level_gate(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    """``None`` when file-level metrics are computable, else ``(code, reason)``."""
    has_trace, has_gt = has_usable_trace(doc), _has_file_ground_truth(doc)
    if has_trace and has_gt:
        return None
    if not has_trace and not has_gt:
        detail = _coverage_detail(doc["coverage"])
        return (
            f"{NO_TRACE};{NO_GROUND_TRUTH}",
            _with_detail("no usable trace (degraded mode); no file-level ground truth", detail),
        )
    if not has_trace:
        return NO_TRACE, _trace_reason(doc)
    return NO_GROUND_TRUTH, _ground_truth_reason(doc)


def file_level_reason(doc: Mapping[str, Any]) -> str | None:
    """Why a document's file-level metrics cannot be computed, None when they can.

    Examples
    --------
    >>> file_level_reason({"coverage": {"trace_source": "trajectory", "has_trajectory": True,
    ...     "has_ground_truth": True}, "ground_truth": {"files": ["a.py"]}}) is None
    True
    """
    gate = _file_level_gate(doc)
    return None if gate is None else gate[1]


def _ranking_block(
    ranking: Sequence[str],
    ground_truth: set[str],
    scores: Mapping[str, float],
    *,
    kind: str,
) -> dict[str, Any]:
    relevant_retrieved = sum(1 for f in ranking if f in ground_truth)
    block: dict[str, Any] = {
        "computable": True,
        "reason": None,
        "ranking": kind,
        "ranked_files": list(ranking),
        "n_ground_truth_files": len(ground_truth),
        "n_retrieved_files": len(ranking),
        "n_relevant_retrieved": relevant_retrieved,
        "metrics": dict(scores),
        "file_recall": relevant_retrieved / len(ground_truth),
    }
    if ranking:
        block["context_efficiency"] = relevant_retrieved / len(ranking)
        block["context_efficiency_reason"] = None
    else:
        block["context_efficiency"] = None
        block["context_efficiency_reason"] = f"no files were {kind}"
    return block


def _ttfr(view: TraceView) -> dict[str, Any]:
    if view.first_relevant_event is None:
        return _not_computable("no retrieval event reached a ground-truth file")
    event, target = view.first_relevant_event
    seconds = event.get("elapsed_seconds")
    tokens = event.get("cumulative_tokens")
    return {
        "computable": True,
        "reason": None,
        "file": target,
        "tool_name": event["tool_name"],
        "steps": int(event["step_index"]),
        "seconds": None if seconds is None else float(seconds),
        "seconds_reason": None if seconds is not None else "the trace has no time for this step",
        "tokens": None if tokens is None else int(tokens),
        "tokens_reason": None
        if tokens is not None
        else "the trace has no running token total for this step",
    }


def _funnel(doc: Mapping[str, Any], view: TraceView | None) -> dict[str, Any]:
    if view is None:
        return _not_computable(_trace_reason(doc))
    has_gt = _has_file_ground_truth(doc)
    ground_truth = set(doc["ground_truth"]["files"])

    def step(files: Sequence[str]) -> dict[str, Any]:
        hits = sum(1 for f in files if f in ground_truth) if has_gt else None
        return {"files": len(files), "ground_truth_hits": hits}

    return {
        "computable": True,
        "reason": None,
        "surfaced": step(view.ranked_files),
        "read": step(view.read_files),
        "edited": step(_repository_edits(doc, view)),
        "agent_created_files": list(view.agent_created_files),
        "ground_truth_hits_reason": None if has_gt else _ground_truth_reason(doc),
    }


def _chunk_level(doc: Mapping[str, Any], view: TraceView | None) -> dict[str, Any]:
    chunks = doc["ground_truth"].get("chunks") or []
    if not doc["coverage"].get("has_chunk_ground_truth") or not chunks:
        reason = (
            "coverage declares chunk ground truth but ground_truth.chunks is empty"
            if doc["coverage"].get("has_chunk_ground_truth")
            else "no chunk-level ground truth"
        )
        return _not_computable(reason, resolution="file_level_only", validity="unsupported")
    if view is None:
        return _not_computable(
            _trace_reason(doc),
            resolution="chunk_level",
            validity="unsupported",
            n_chunks=len(chunks),
        )
    accessed = set(view.ranked_files)
    covered_by_file = sum(1 for c in chunks if c["file"] in accessed)
    block: dict[str, Any] = {
        "computable": True,
        "reason": None,
        "resolution": "chunk_level",
        "validity": "file_match_only",
        "n_chunks": len(chunks),
        "covered_chunks": covered_by_file,
        "recall": covered_by_file / len(chunks),
    }
    if not view.ranges and not view.whole_file_reads:
        block["line_overlap"] = _not_computable(
            "no retrieval event carries line ranges or reads a whole file",
            validity="unsupported",
        )
        return block

    def overlaps(chunk: Mapping[str, Any]) -> bool:
        if chunk["file"] in view.whole_file_reads:
            return True
        start, end = int(chunk["line_start"]), int(chunk["line_end"])
        return any(lo <= end and hi >= start for lo, hi in view.ranges.get(chunk["file"], ()))

    covered_by_lines = sum(1 for c in chunks if overlaps(c))
    block["line_overlap"] = {
        "computable": True,
        "reason": None,
        "validity": "line_overlap",
        "covered_chunks": covered_by_lines,
        "chunks_with_ranges": sum(
            1 for c in chunks if c["file"] in view.ranges or c["file"] in view.whole_file_reads
        ),
        "recall": covered_by_lines / len(chunks),
    }
    return block


def _utilization(doc: Mapping[str, Any], view: TraceView | None) -> dict[str, Any]:
    ground_truth = set(doc["ground_truth"]["files"])
    expected_edit = set(doc["ground_truth"].get("expected_edit_files") or ())
    has_gt = _has_file_ground_truth(doc)
    block: dict[str, Any] = {
        "probe_available": has_gt,
        "probe_unavailable_reason": None if has_gt else _ground_truth_reason(doc),
        "expected_edit_probe_available": bool(expected_edit),
        "expected_edit_probe_unavailable_reason": None
        if expected_edit
        else "ground_truth.expected_edit_files is absent or empty",
        "n_files_read": None,
        "n_files_written": None,
        "n_read_before_write": None,
    }
    values: dict[str, float | None] = dict.fromkeys(
        (
            "util_read_overlap_with_relevant_files",
            "util_write_overlap_with_relevant_files_proxy",
            "util_write_overlap_with_expected_edit_files",
            "util_read_before_write_ratio",
        )
    )
    reasons: dict[str, str] = {}
    if view is None:
        reasons = dict.fromkeys(values, _trace_reason(doc))
    else:
        read, written = set(view.read_files), set(_repository_edits(doc, view))
        read_before = sum(
            1
            for f in written
            if f in view.first_read_step and view.first_read_step[f] < view.first_write_step[f]
        )
        block.update(
            n_files_read=len(read), n_files_written=len(written), n_read_before_write=read_before
        )
        no_writes = None if written else "the agent edited no repository file"
        no_gt = block["probe_unavailable_reason"]
        no_edit_files = block["expected_edit_probe_unavailable_reason"]
        # per probe: why it is null (None when it is not), its numerator and denominator
        probes = (
            (no_gt, len(read & ground_truth), len(ground_truth)),
            (no_gt or no_writes, len(written & ground_truth), len(ground_truth)),
            (no_edit_files or no_writes, len(written & expected_edit), len(expected_edit)),
            (no_writes, read_before, len(written)),
        )
        for name, (reason, part, whole) in zip(values, probes, strict=True):
            if reason:
                reasons[name] = reason
            else:
                values[name] = part / whole
    block.update(values)
    block["reasons"] = reasons
    return block


def _error_taxonomy(doc: Mapping[str, Any], view: TraceView | None) -> dict[str, Any]:
    if view is None:
        return _not_computable(_trace_reason(doc))
    if not _has_file_ground_truth(doc):
        return _not_computable(_ground_truth_reason(doc))
    ground_truth = set(doc["ground_truth"]["files"])
    retrieved = set(view.ranked_files)
    written = set(_repository_edits(doc, view))
    files = {
        "irrelevant_retrieval": retrieved - ground_truth,
        "missed_key_evidence": ground_truth - retrieved,
        "wrong_evidence_used": written - ground_truth,
        "unused_correct_retrieval": (retrieved & ground_truth) - written,
        "ambiguity_near_miss": _near_misses(retrieved - ground_truth, ground_truth),
    }
    return {
        "computable": True,
        "reason": None,
        "counts": {label: len(files[label]) for label in TAXONOMY_LABELS},
        "files": {label: sorted(files[label]) for label in TAXONOMY_LABELS},
    }


def _calibration(doc: Mapping[str, Any], view: TraceView | None) -> dict[str, Any]:
    if view is None:
        return _not_computable(
            _trace_reason(doc),
            candidate_set_size=None,
            candidate_set_size_slice=None,
            evidence_type=None,
            mcp_events=None,
        )
    size = len(view.ranked_files)
    return {
        "computable": True,
        "reason": None,
        "candidate_set_size": size,
        "candidate_set_size_slice": candidate_set_size_slice(size),
        "evidence_type": "mcp" if view.mcp_events else "local",
        "mcp_events": view.mcp_events,
    }


def _batched_scores(
    rankings: Sequence[Sequence[str]], relevant: Sequence[set[str]], names: Sequence[str]
) -> list[dict[str, float]]:
    """One kernel call for all rankings; one ``{metric: value}`` dict per ranking."""
    if not rankings:
        return []
    table = evaluate_rankings(rankings, relevant, names)
    columns = [np.asarray(table[name], dtype=np.float64) for name in names]
    return [
        {name: float(column[row]) for name, column in zip(names, columns, strict=True)}
        for row in range(len(rankings))
    ]


def evaluate_documents(
    docs: Sequence[Mapping[str, Any]],
    k: Sequence[int] = DEFAULT_K,
    *,
    source_names: Sequence[str | None] | None = None,
) -> list[dict[str, Any]]:
    """Run stages 1-4 on every document; return one metrics record per document.

    Parameters
    ----------
    docs
        Retrieval-event documents (already validated, e.g. by
        :func:`retrieval_lib.events.document.load_document`).
    k
        Cut-offs of the P/R/F1/nDCG metrics.
    source_names
        Optional file name of each document, recorded as ``source_document``.

    Returns
    -------
    list of dict
        Records in the order of ``docs``; the shape of ``*.retrieval_metrics.json``.

    Examples
    --------
    >>> doc = {"schema_version": "1.1",
    ...     "provenance": {"run_id": "r", "task_name": "t", "config_name": "c",
    ...                    "batch_timestamp": None, "benchmark": None},
    ...     "coverage": {"has_trajectory": True, "has_transcript": False,
    ...                  "has_ground_truth": True, "has_chunk_ground_truth": False,
    ...                  "trace_source": "trajectory", "degraded_reason": None},
    ...     "ground_truth": {"files": ["a.py", "b.py"]},
    ...     "events": [{"step_index": 0, "tool_name": "Read", "tool_category": "file_read",
    ...                 "is_mcp": False, "target_files": ["x.py"], "hits_ground_truth": False},
    ...                {"step_index": 1, "tool_name": "Read", "tool_category": "file_read",
    ...                 "is_mcp": False, "target_files": ["a.py"], "hits_ground_truth": True}]}
    >>> record = evaluate_documents([doc], k=[1, 2])[0]
    >>> record["file_level"]["metrics"]["RR"], record["file_level"]["metrics"]["P@2"]
    (0.5, 0.5)
    >>> record["file_level"]["file_recall"]
    0.5
    """
    ks = normalize_k(k)
    names = ranking_metric_names(ks)
    if source_names is not None and len(source_names) != len(docs):
        raise MetricError("source_names must give one name per document")
    views = [TraceView.from_document(doc) if has_usable_trace(doc) else None for doc in docs]
    gates = [_file_level_gate(doc) for doc in docs]
    computable = [i for i, gate in enumerate(gates) if gate is None]
    ground_truths = [set(docs[i]["ground_truth"]["files"]) for i in computable]
    scored = [cast(TraceView, views[i]) for i in computable]  # the gate requires a trace
    surfaced = _batched_scores([v.ranked_files for v in scored], ground_truths, names)
    read = _batched_scores([v.read_files for v in scored], ground_truths, names)
    scores = {i: (surfaced[j], read[j]) for j, i in enumerate(computable)}

    records = []
    for i, doc in enumerate(docs):
        view, gate = views[i], gates[i]
        if gate is None:
            assert view is not None  # the gate requires a trace
            ground_truth = set(doc["ground_truth"]["files"])
            file_level = _ranking_block(
                view.ranked_files, ground_truth, scores[i][0], kind="surfaced"
            )
            file_level["ttfr"] = _ttfr(view)
            read_level = _ranking_block(view.read_files, ground_truth, scores[i][1], kind="read")
        else:
            file_level = _not_computable(gate[1])
            read_level = _not_computable(gate[1])
        records.append(
            {
                "schema_version": METRICS_SCHEMA_VERSION,
                "generator": {"name": "retrieval_lib", "version": __version__},
                "events_schema_version": doc["schema_version"],
                "source_document": None if source_names is None else source_names[i],
                "provenance": dict(doc["provenance"]),
                "coverage": dict(doc["coverage"]),
                "computable": gate is None,
                "non_computable_code": None if gate is None else gate[0],
                "non_computable_reason": None if gate is None else gate[1],
                "k_values": list(ks),
                "file_level": file_level,
                "read_level": read_level,
                "funnel": _funnel(doc, view),
                "chunk_level": _chunk_level(doc, view),
                "utilization": _utilization(doc, view),
                "error_taxonomy": _error_taxonomy(doc, view),
                "calibration": _calibration(doc, view),
                "outcome": dict(doc["outcome"]) if doc.get("outcome") else None,
            }
        )
    return records


def evaluate_document(doc: Mapping[str, Any], k: Sequence[int] = DEFAULT_K) -> dict[str, Any]:
    """Metrics record of a single document (see :func:`evaluate_documents`)."""
    return evaluate_documents([doc], k)[0]


@functools.cache
def shipped_schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``retrieval_lib/metrics/schema/<name>.schema.json``, read once."""
    schema: dict[str, Any] = load_package_json(
        "retrieval_lib.metrics", f"schema/{name}.schema.json"
    )
    return schema


def metrics_schema() -> dict[str, Any]:
    """JSON Schema of ``*.retrieval_metrics.json`` (shipped in the package)."""
    return shipped_schema("retrieval_metrics")


def validate_metrics_record(record: Any, *, where: str = "metrics record") -> None:
    """Validate a metrics record (as written, i.e. JSON-safe) against the shipped schema.

    Raises
    ------
    SchemaError
        With the first failing location.

    Examples
    --------
    >>> from retrieval_lib.events.document import minimal_document
    >>> from retrieval_lib.io import json_safe
    >>> record = evaluate_document(minimal_document(run_id="r", task_name="t",
    ...                                             config_name="c"))
    >>> validate_metrics_record(json_safe(record))
    """
    validate_against(record, metrics_schema(), where)


def validate_against(value: Any, schema: Mapping[str, Any], where: str) -> None:
    """Check ``value`` against the JSON Schema ``schema`` (Draft 2020-12).

    Raises
    ------
    SchemaError
        The first error by location, naming ``where`` and the location in ``value``.

    Examples
    --------
    >>> validate_against({"k": 1}, {"type": "object"}, "record")
    >>> validate_against(1, {"type": "string"}, "cfg")
    Traceback (most recent call last):
    retrieval_lib.errors.SchemaError: cfg: at (root): 1 is not of type 'string'
    """
    import jsonschema

    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(value),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    if errors:
        first = errors[0]
        location = "/".join(str(p) for p in first.absolute_path) or "(root)"
        raise SchemaError(f"{where}: at {location}: {first.message}")

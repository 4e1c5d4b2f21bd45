"""Parser for Harbor ATIF trajectories (``agent/trajectory.json``, ``ATIF-v1.x``).

Tool calls come from ``steps[].tool_calls[]`` and their results from
``steps[].observation.results[]``, joined on ``source_call_id`` wherever the result appears
(never from ``observation.content``, which does not hold the tool output).

Token accounting
----------------
Claude Code writes one API message as several agent steps (thinking, text, one per tool
call) that repeat the message's ``metrics``; the last step of the message carries the final
``completion_tokens`` while the earlier ones carry a stream placeholder. Agent steps whose
*input side* is identical (``prompt_tokens``, ``cached_tokens``,
``extra.cache_creation_input_tokens``, ``extra.cache_read_input_tokens``) therefore belong to
one message, counted once, at its first step; its completion is the maximum over its steps.
A new API request differs on the input side (the prompt grows), so distinct messages are
not merged; keying on the figures rather than on adjacency also keeps a message whole when
steps of parallel subagents interleave with it. Comparing whole ``metrics`` dicts would not
work: the last step's dict carries other fields. In the corpus this reproduces the
harness's own deduplicated figures (``task_metrics.json``) exactly.

In these trajectories ``prompt_tokens`` is ``input_tokens + cache_read_input_tokens``
(cached reads included, cache *creation* not: e.g. 26879 = 8 + 26871 while the message
created 6729 cache tokens), so the tokens of one message are
``prompt_tokens + cache_creation_input_tokens + completion_tokens``, the same quantity as the
transcript's ``input + cache_creation + cache_read + output``.

Why one module of this length: the step reader, the subagent resolution and the token
accounting are one format's rules (shared helpers: :mod:`retrieval_lib.traces.stream_json`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from retrieval_lib.errors import InputError, UnsupportedSchemaVersion
from retrieval_lib.io import finite_number, lies_outside, parse_iso_time
from retrieval_lib.safe_text import describe_value
from retrieval_lib.traces.model import ParsedTrace, SessionTotals, ToolCall
from retrieval_lib.traces.stream_json import (
    content_text,
    loads_repaired,
    read_trace_bytes,
    token_count,
    token_count_or_none,
)

__all__ = ["UnsupportedATIFVersion", "parse_atif"]

#: Nested subagent trajectories deeper than this are not followed (guards against cycles).
_MAX_SUBAGENT_DEPTH = 8


class UnsupportedATIFVersion(InputError, UnsupportedSchemaVersion):
    """A trajectory declares an ATIF major version other than 1."""


def _object(mapping: dict[str, Any], key: str) -> dict[str, Any]:
    """``mapping[key]`` when it is a JSON object, else an empty dict."""
    value = mapping.get(key)
    return value if isinstance(value, dict) else {}


def parse_atif(path: str | Path, *, within: str | Path | None = None) -> ParsedTrace:
    """Parse a Harbor ATIF trajectory into a :class:`ParsedTrace`.

    Parameters
    ----------
    path
        ``agent/trajectory.json``; any ``schema_version`` ``"ATIF-v1.x"`` is accepted.
    within
        Folder the file must lie in once symlinks are resolved (the trial folder);
        default: the file's own folder. Subagent files must lie in the trajectory's folder.

    Returns
    -------
    ParsedTrace
        ``source="trajectory"``, ``started_at`` the first step's timestamp, ``model`` and
        ``harness_version`` from ``agent.model_name`` / ``agent.version``. One
        :class:`ToolCall` per ``tool_calls[]`` entry in step order, with the step's
        ``timestamp`` and ``extra.is_sidechain``; ``result`` is the matching
        ``observation.results[].content`` (a list of content parts is joined to text);
        ``is_error`` and ``structured_result`` come from the step's
        ``extra.tool_result_metadata`` when Claude Code recorded it (``is_error`` is
        ``None`` otherwise: ATIF has no error flag).

        ``cumulative_tokens`` of a call is the running sum over distinct API messages (see
        the module docstring), up to and including the message that issued the call, of
        ``prompt_tokens + cache_creation_input_tokens + completion_tokens``.

        Subagents: a result's ``subagent_trajectory_ref`` is resolved against the root's
        ``subagent_trajectories`` (by ``trajectory_id``) or a ``trajectory_path`` inside
        the trajectory's folder; the subagent's calls are inserted after the parent call
        with ``parent_call_id`` set to it, and the running token total then includes the
        subagent's messages. Unresolvable refs give a warning.

        ``totals`` come from ``final_metrics`` (``source="trajectory.final_metrics"``;
        ``input_tokens`` is the uncached part ``total_prompt_tokens -
        total_cached_tokens``). When ``final_metrics`` equals the plain per-step sum and so
        counts repeated message usage several times (as in the Claude Code trajectories
        of the corpus), the totals are recomputed from distinct messages instead
        (``source="trajectory.steps(deduplicated)"``; cost from the messages'
        ``metrics.cost_usd`` when every message has one, else ``None``). Without
        ``final_metrics`` the same recomputation applies, with a warning.

    Raises
    ------
    InputError
        When the file is missing, unreadable, empty, not valid JSON or not an ATIF
        trajectory; :class:`UnsupportedATIFVersion` (an :class:`InputError`) when the
        major version is not 1.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> doc = {"schema_version": "ATIF-v1.2", "agent": {"name": "claude-code",
    ...        "version": "2.1.62", "model_name": "m"}, "steps": [
    ...     {"step_id": 1, "timestamp": "2026-02-28T03:15:10.067Z", "source": "agent",
    ...      "metrics": {"prompt_tokens": 10, "completion_tokens": 2},
    ...      "tool_calls": [{"tool_call_id": "t1", "function_name": "Read",
    ...                      "arguments": {"file_path": "/a.py"}}],
    ...      "observation": {"results": [{"source_call_id": "t1", "content": "x"}]}}]}
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "trajectory.json").write_text(json.dumps(doc))
    >>> trace = parse_atif(folder / "trajectory.json")
    >>> [(c.name, c.result, c.timestamp, c.cumulative_tokens) for c in trace.tool_calls]
    [('Read', 'x', '2026-02-28T03:15:10.067Z', 12)]
    """
    trace_path = path if isinstance(path, Path) else Path(path)
    load_warnings: list[str] = []
    document = _load_document(trace_path, load_warnings, within)
    parser = _TrajectoryParser(trace_path.parent, set(), 0, trace_path)
    parser.warnings.extend(load_warnings)
    return parser.parse(document, trace_path)


def _load_document(
    path: Path, warnings: list[str] | None = None, within: str | Path | None = None
) -> dict[str, Any]:
    """Read, decode and version-check one trajectory file.

    Bytes that are not UTF-8 (a tool output copied raw) and escaped lone surrogates (a
    string cut inside an emoji) are replaced rather than losing the whole trajectory; the
    replacement is noted in ``warnings``.
    """
    data = read_trace_bytes(path, "trajectory", within)
    if not data or data.isspace():  # strip() would copy the whole file
        raise InputError(f"trajectory {path} is empty: not an ATIF trajectory")
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        repaired = loads_repaired(data)
        if repaired is None:
            raise InputError(f"trajectory {path} is not valid JSON: {exc}") from exc
        document, what = repaired
        if warnings is not None:
            warnings.append(f"file holds {what}: replaced by U+FFFD")
    if not isinstance(document, dict):
        raise InputError(f"trajectory {path} is not an ATIF trajectory: top level is not an object")
    _check_version(document, str(path))
    return document


def _check_version(document: dict[str, Any], where: str) -> None:
    version = document.get("schema_version")
    if not isinstance(version, str) or not version.startswith("ATIF-v"):
        raise InputError(
            f"trajectory {where} is not an ATIF trajectory: schema_version is "
            f"{describe_value(version)}, "
            "expected 'ATIF-v1.x'"
        )
    major = version[len("ATIF-v") :].split(".", 1)[0]
    if major != "1":
        raise UnsupportedATIFVersion(
            f"trajectory {where} has unsupported ATIF version {version!r}: "
            "only ATIF-v1.x can be read"
        )


class _Clock:
    """Step timestamps seen so far: which were missing, unreadable or went backwards."""

    __slots__ = ("backwards", "latest", "missing", "unparseable")

    def __init__(self) -> None:
        self.latest: datetime | None = None
        self.missing = 0
        self.unparseable: list[int] = []
        self.backwards: list[int] = []

    def read(self, value: Any, number: int) -> str | None:
        """A step's timestamp when it is ISO 8601, else ``None`` (counted when unreadable)."""
        if value is None:
            return None
        moment = parse_iso_time(value)
        if moment is None:
            self.unparseable.append(number)
            return None
        if self.latest is not None and moment < self.latest:
            self.backwards.append(number)
        else:
            self.latest = moment
        return value

    def warnings(self) -> list[str]:
        notes = []
        if self.missing:
            notes.append(
                f"{self.missing} step(s) with tool calls have no timestamp: "
                "their calls have no elapsed time"
            )
        if self.unparseable:
            notes.append(
                f"{len(self.unparseable)} step timestamp(s) are not ISO 8601 (first at step "
                f"#{self.unparseable[0]}): their calls have no elapsed time"
            )
        if self.backwards:
            notes.append(
                f"step timestamps go backwards {len(self.backwards)} time(s) (first at step "
                f"#{self.backwards[0]}): elapsed times follow the recorded clock"
            )
        return notes


class _TrajectoryParser:
    """Parses one trajectory document and, recursively, the subagents it references.

    ``seen``: the resolved trajectory files followed, shared with the subagents' parsers;
    the ``root`` file joins it only when a subagent file is referenced (most trajectories
    reference none, and resolving costs a system call per path component).
    """

    def __init__(self, folder: Path, seen: set[Path], depth: int, root: Path) -> None:
        self.folder = folder
        self.seen = seen
        self.root = root
        self.depth = depth
        self.warnings: list[str] = []

    def parse(self, document: dict[str, Any], where: Path | str) -> ParsedTrace:
        steps = document.get("steps")
        if not isinstance(steps, list):
            raise InputError(f"trajectory {where} is not an ATIF trajectory: 'steps' is not a list")
        agent = _object(document, "agent")

        calls: list[ToolCall] = []
        call_message: list[int | None] = []  # message position of each call
        usage = _MessageUsage()
        results: dict[str, Any] = {}
        call_ids: set[str] = set()
        subagent_refs: dict[str, list[Any]] = {}
        metadata: dict[str, dict[str, Any]] = {}
        started_at: str | None = None
        clock = _Clock()
        current_message: int | None = None

        warnings = self.warnings
        for number, step in enumerate(steps, start=1):
            if not isinstance(step, dict):
                warnings.append(f"step #{number} is not an object, skipped")
                continue
            raw_time = step.get("timestamp")
            timestamp = clock.read(raw_time, number)
            if started_at is None:
                started_at = timestamp
            metrics = step.get("metrics")
            if isinstance(metrics, dict) and step.get("source") == "agent":
                position = usage.add(metrics, number, warnings)
                if position is not None:
                    current_message = position

            tool_calls = step.get("tool_calls")
            if tool_calls and raw_time is None:
                clock.missing += 1
            if isinstance(tool_calls, list):
                extra = _object(step, "extra")
                sidechain = extra.get("is_sidechain")
                if not isinstance(sidechain, bool):
                    sidechain = None
                step_call_ids: list[str] = []
                for entry in tool_calls:
                    call = self._tool_call(entry, number, timestamp, sidechain)
                    if call is None:
                        continue
                    call_id = call.call_id
                    if call_id is not None:
                        if call_id in call_ids:
                            warnings.append(
                                f"step #{number}: tool_call_id {call_id} repeated; "
                                "both calls kept, a result joins to each"
                            )
                        call_ids.add(call_id)
                        step_call_ids.append(call_id)
                    call.order = len(calls)
                    calls.append(call)
                    # A call belongs to the latest message seen (its own step's, normally).
                    call_message.append(current_message)
                self._collect_metadata(extra, step_call_ids, metadata)

            observation = step.get("observation")
            if isinstance(observation, dict):
                self._take_results(observation, number, results, subagent_refs)

        self.warnings.extend(clock.warnings())
        self._join_results(calls, results, metadata)
        has_usage = usage.add_cumulative_tokens(calls, call_message)
        if subagent_refs:
            calls = self._splice_subagents(calls, subagent_refs, document, has_usage)

        # A subagent's own totals are not reported: the caller only splices its calls.
        totals = (
            usage.totals(document.get("final_metrics"), self.warnings)
            if self.depth == 0
            else SessionTotals()
        )
        model = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
        version = agent.get("version") if isinstance(agent.get("version"), str) else None
        return ParsedTrace(
            source="trajectory",
            tool_calls=calls,
            started_at=started_at,
            model=model,
            harness_version=version,
            totals=totals,
            warnings=self.warnings,
        )

    def _take_results(
        self,
        observation: dict[str, Any],
        number: int,
        results: dict[str, Any],
        subagent_refs: dict[str, list[Any]],
    ) -> None:
        """A step's observation results by call id (the first wins), and subagent references."""
        found = observation.get("results")
        if not isinstance(found, list):
            return
        for result in found:
            if not isinstance(result, dict):
                continue
            call_id = result.get("source_call_id")
            if not isinstance(call_id, str):
                self.warnings.append(
                    f"step #{number}: observation result without source_call_id, skipped"
                )
                continue
            if call_id in results:
                self.warnings.append(f"step #{number}: second result for call {call_id} ignored")
                continue
            results[call_id] = content_text(result.get("content"))
            ref = result.get("subagent_trajectory_ref")
            if ref:
                subagent_refs[call_id] = ref if isinstance(ref, list) else [ref]

    def _tool_call(
        self, entry: Any, number: int, timestamp: str | None, sidechain: bool | None
    ) -> ToolCall | None:
        if not isinstance(entry, dict):
            self.warnings.append(f"step #{number}: tool call is not an object, skipped")
            return None
        call_id = entry.get("tool_call_id")
        name = entry.get("function_name")
        if not isinstance(name, str):
            self.warnings.append(f"step #{number}: tool call without function_name")
            name = "unknown"
        arguments = entry.get("arguments")
        if isinstance(arguments, str):
            # Some writers store the arguments as JSON text.
            try:
                arguments = orjson.loads(arguments)
            except orjson.JSONDecodeError:
                arguments = None
        if not isinstance(arguments, dict):
            if entry.get("arguments") not in (None, {}):
                self.warnings.append(
                    f"step #{number}: arguments of {name} are not a JSON object, dropped"
                )
            arguments = {}
        call_id = call_id if isinstance(call_id, str) else None
        return ToolCall(call_id, name, arguments, timestamp=timestamp, is_sidechain=sidechain)

    @staticmethod
    def _collect_metadata(
        extra: dict[str, Any], step_call_ids: list[str], metadata: dict[str, dict[str, Any]]
    ) -> None:
        """Claude Code's ``extra.tool_result_metadata``: raw result flags and structure."""
        found = extra.get("tool_result_metadata")
        if not isinstance(found, dict):
            return
        raw = _object(found, "raw_tool_result")
        call_id = raw.get("tool_use_id")
        if not isinstance(call_id, str):
            if len(step_call_ids) != 1:
                return
            call_id = step_call_ids[0]
        metadata.setdefault(call_id, {"raw": raw, "structured": found.get("tool_use_result")})

    def _join_results(
        self,
        calls: list[ToolCall],
        results: dict[str, Any],
        metadata: dict[str, dict[str, Any]],
    ) -> None:
        matched: set[str] = set()
        for call in calls:
            if call.call_id is None:
                continue
            if call.call_id in results:
                matched.add(call.call_id)
                call.result = results[call.call_id]
            meta = metadata.get(call.call_id)
            if meta is not None:
                flag = meta["raw"].get("is_error")
                if isinstance(flag, bool):
                    call.is_error = flag
                elif call.result is not None and meta["raw"]:
                    call.is_error = False
                call.structured_result = meta["structured"]
        orphans = len(results) - len(matched)
        if orphans:
            self.warnings.append(f"{orphans} observation result(s) match no tool call id")

    def _splice_subagents(
        self,
        calls: list[ToolCall],
        refs: dict[str, list[Any]],
        document: dict[str, Any],
        has_usage: bool,
    ) -> list[ToolCall]:
        """Insert each resolvable subagent's calls after the call that spawned it.

        The running token total is recomputed over the spliced order: each call adds the
        tokens its own trajectory spent since that trajectory's previous call.
        """
        embedded: dict[str, Any] = {
            sub["trajectory_id"]: sub
            for sub in document.get("subagent_trajectories") or []
            if isinstance(sub, dict) and isinstance(sub.get("trajectory_id"), str)
        }
        spliced: list[tuple[ToolCall, int | None]] = []
        previous = 0
        for call in calls:
            increment = None
            if call.cumulative_tokens is not None:
                increment = call.cumulative_tokens - previous
                previous = call.cumulative_tokens
            spliced.append((call, increment))
            for ref in refs.get(call.call_id or "", []):
                sub_trace = self._resolve(ref, embedded)
                if sub_trace is None:
                    continue
                sub_previous = 0
                for sub_call in sub_trace.tool_calls:
                    sub_increment = None
                    if sub_call.cumulative_tokens is not None:
                        sub_increment = sub_call.cumulative_tokens - sub_previous
                        sub_previous = sub_call.cumulative_tokens
                    parent = sub_call.parent_call_id or call.call_id
                    spliced.append((replace(sub_call, parent_call_id=parent), sub_increment))
        out: list[ToolCall] = []
        running = 0
        for position, (call, increment) in enumerate(spliced):
            call.order = position
            if has_usage or increment is not None:
                running += increment or 0
                call.cumulative_tokens = running
            out.append(call)
        return out

    def _resolve(self, ref: Any, embedded: dict[str, Any]) -> ParsedTrace | None:
        if not isinstance(ref, dict):
            self.warnings.append("subagent_trajectory_ref is not an object, ignored")
            return None
        label = ref.get("trajectory_id") or ref.get("trajectory_path") or ref.get("session_id")
        if self.depth >= _MAX_SUBAGENT_DEPTH:
            self.warnings.append(
                f"subagent trajectory {describe_value(label)} nested too deep, not followed"
            )
            return None
        sub_document: dict[str, Any] | None = None
        sub_folder = self.folder
        where: str = label if isinstance(label, str) else describe_value(label)
        trajectory_id = ref.get("trajectory_id")
        trajectory_path = ref.get("trajectory_path")
        if isinstance(trajectory_id, str) and trajectory_id in embedded:
            sub_document = embedded[trajectory_id]
            where = f"embedded subagent {trajectory_id}"
            if not isinstance(sub_document.get("steps"), list):
                self.warnings.append(f"{where} has no steps list, ignored")
                return None
        elif isinstance(trajectory_path, str):
            try:
                candidate = (self.folder / trajectory_path).resolve()
                is_file = candidate.is_file()
                outside = lies_outside(self.folder / trajectory_path, self.folder)
            except (OSError, ValueError, RuntimeError):  # NUL byte, symlink loop
                self.warnings.append(
                    f"subagent trajectory path {trajectory_path!r} is not a usable path"
                )
                return None
            if outside:
                self.warnings.append(
                    f"subagent trajectory {trajectory_path!r} lies outside the trajectory "
                    "folder, not followed"
                )
                return None
            if not self.seen:
                self.seen.add(self.root.resolve())
            if candidate in self.seen:
                self.warnings.append(
                    f"subagent trajectory {trajectory_path!r} repeats, not followed"
                )
                return None
            if not is_file:
                self.warnings.append(f"subagent trajectory {trajectory_path!r} not found")
                return None
            try:
                sub_document = _load_document(candidate)
            except InputError as exc:
                self.warnings.append(f"subagent trajectory unreadable: {exc}")
                return None
            self.seen.add(candidate)
            sub_folder = candidate.parent
            where = str(candidate)
        else:
            self.warnings.append(
                f"subagent trajectory {describe_value(label)} could not be resolved"
            )
            return None
        child = _TrajectoryParser(sub_folder, self.seen, self.depth + 1, self.root)
        try:
            sub_trace = child.parse(sub_document, where)
        except InputError as exc:
            self.warnings.append(f"subagent trajectory unreadable: {exc}")
            return None
        self.warnings.extend(f"subagent {label}: {message}" for message in child.warnings)
        return sub_trace


class _MessageUsage:
    """Token usage per API message, agent steps with one input side counted once."""

    def __init__(self) -> None:
        self.tokens: list[list[int]] = []  # [prompt, cache creation, completion, cached]
        self.costs: list[float | None] = []
        # [steps, completion figures differ] per message: a message whose steps all repeat
        # one completion figure never received its final count (a stream placeholder)
        self.shape: list[list[int]] = []
        self.naive = [0, 0]  # per-step sums of prompt and completion tokens
        self.by_signature: dict[tuple[Any, ...], int] = {}

    def add(self, metrics: dict[str, Any], number: int, warnings: list[str]) -> int | None:
        """Take one agent step's metrics; the position of the message it belongs to.

        ``None`` (with a warning) when the metrics carry no token count at all: such a step
        is not an API message with zero tokens, and counting it as one would add a silent
        zero and could merge it with another usage-less step.
        """
        prompt = metrics.get("prompt_tokens")
        completion = metrics.get("completion_tokens")
        if type(prompt) is not int and type(completion) is not int:
            if metrics:
                warnings.append(
                    f"step #{number}: metrics carry no integer prompt_tokens or "
                    "completion_tokens; its usage is unknown"
                )
            return None
        metrics_extra = _object(metrics, "extra")
        prompt = token_count(prompt)
        completion = token_count(completion)
        cached = token_count(metrics.get("cached_tokens"))
        creation = token_count(metrics_extra.get("cache_creation_input_tokens"))
        naive = self.naive
        naive[0] += prompt
        naive[1] += completion
        cache_read = metrics_extra.get("cache_read_input_tokens")
        if cache_read is not None and token_count_or_none(cache_read) is None:
            # a list, an object, a negative or absurd number: this field only is lost
            warnings.append(
                f"step #{number} metrics.extra.cache_read_input_tokens is "
                f"{describe_value(cache_read)}, not a token count; ignored"
            )
            cache_read = None
        signature = (prompt, cached, creation, cache_read)
        cost = metrics.get("cost_usd")
        if cost is not None:
            cost = finite_number(cost)
        current_message = self.by_signature.get(signature)
        if current_message is None:
            current_message = len(self.tokens)
            self.by_signature[signature] = current_message
            self.tokens.append([prompt, creation, completion, cached])
            self.costs.append(cost)
            self.shape.append([1, 0, completion])
        else:
            tokens = self.tokens[current_message]
            shape = self.shape[current_message]
            shape[0] += 1
            if completion != shape[2]:
                shape[1] = 1
            if completion > tokens[2]:
                tokens[2] = completion
            if cost is not None:
                known = self.costs[current_message]
                self.costs[current_message] = cost if known is None else max(known, cost)
        return current_message

    def add_cumulative_tokens(self, calls: list[ToolCall], call_message: list[int | None]) -> bool:
        """Give each call the running total up to its message; ``False``: no usage at all."""
        if not self.tokens:
            return False
        running: list[int] = []
        total = 0
        for prompt, creation, completion, _cached in self.tokens:
            total += prompt + creation + completion
            running.append(total)
        for call, position in zip(calls, call_message, strict=True):
            if position is not None:
                call.cumulative_tokens = running[position]
        return True

    def totals(self, final_metrics: Any, warnings: list[str]) -> SessionTotals:
        """Session totals from ``final_metrics``, unless it double-counts repeated usage.

        When the totals are the per-message sums, ``output_tokens_placeholder`` tells
        whether their completion counts are stream placeholders (see
        :func:`_placeholder_verdict`).
        """
        message_tokens, message_costs, naive = self.tokens, self.costs, self.naive
        distinct: SessionTotals | None = None
        if message_tokens:
            prompt, creation, completion, cached = (
                sum(column) for column in zip(*message_tokens, strict=True)
            )
            known_costs = [cost for cost in message_costs if cost is not None]
            distinct = SessionTotals(
                input_tokens=prompt - cached,
                output_tokens=completion,
                cache_read_tokens=cached,
                cache_creation_tokens=creation,
                total_tokens=prompt + creation + completion,
                # A cost is only a total when every message reports one.
                cost_usd=sum(known_costs) if len(known_costs) == len(message_costs) else None,
                source="trajectory.steps(deduplicated)",
            )
            stated = (
                token_count_or_none(final_metrics.get("total_completion_tokens"))
                if isinstance(final_metrics, dict)
                else None
            )
            distinct.output_tokens_placeholder, distinct.output_tokens_note = _placeholder_verdict(
                self.shape, completion, stated, naive[1]
            )
        if not isinstance(final_metrics, dict):
            if distinct is not None:
                warnings.append("no final_metrics: totals summed over distinct messages")
                return distinct
            return SessionTotals()

        prompt_total = token_count_or_none(final_metrics.get("total_prompt_tokens"))
        completion_total = token_count_or_none(final_metrics.get("total_completion_tokens"))
        if (
            distinct is not None
            and [prompt_total, completion_total] == naive
            and [prompt, completion] != naive
        ):
            # Not a gap in the data, so no warning: the source names the recomputation.
            return distinct

        extra = _object(final_metrics, "extra")
        cached_total = token_count_or_none(final_metrics.get("total_cached_tokens"))
        creation_total = token_count_or_none(extra.get("total_cache_creation_input_tokens"))
        parts = [p for p in (prompt_total, creation_total, completion_total) if p is not None]
        return SessionTotals(
            input_tokens=prompt_total - cached_total
            if prompt_total is not None and cached_total is not None
            else prompt_total,
            output_tokens=completion_total,
            cache_read_tokens=cached_total,
            cache_creation_tokens=creation_total,
            total_tokens=sum(parts) if parts else None,
            cost_usd=finite_number(final_metrics.get("total_cost_usd")),
            source="trajectory.final_metrics",
            output_tokens_placeholder=None if completion_total is None else False,
        )


def _placeholder_verdict(
    message_shape: list[list[int]], completion: int, stated: int | None, per_step: int
) -> tuple[bool, str | None]:
    """Whether a per-message completion sum is made of stream placeholders, and why.

    Claude Code writes one API message as several steps; only the last carries the final
    completion count, the others a stream placeholder. A message with two or more steps
    that all repeat one figure never received its final count. When no message shows a
    final count and at least one shows only a placeholder, the sum is a placeholder: the
    true output count is unknown (e.g. the llamacpp MCP trial: messages [4,4,4,4],
    [2,2,2,2], [1,1] give 7; its ``total_completion_tokens`` 26 is the per-step sum of the
    same placeholders, 4*4 + 2*4 + 1*2). Single-step messages prove nothing either way.
    """
    n_messages = len(message_shape)
    final = sum(1 for steps, varied, _ in message_shape if varied)
    only_placeholder = sum(1 for steps, varied, _ in message_shape if steps > 1 and not varied)
    stated_text = ""
    if stated is not None and stated != completion:
        kind = (
            " (the per-step sum, which counts a message once per step)"
            if stated == per_step
            else ""
        )
        stated_text = f"; final_metrics.total_completion_tokens says {stated}{kind}"
    if only_placeholder and not final:
        return True, (
            f"per-message completion_tokens are stream placeholders: none of the "
            f"{n_messages} API message(s) carries a final count ({only_placeholder} repeat "
            f"one figure on every step); output_tokens {completion} is their sum, the true "
            f"output count is unknown{stated_text}"
        )
    if only_placeholder:
        return False, (
            f"{only_placeholder} of {n_messages} API message(s) carry only a stream "
            f"placeholder completion count: output_tokens {completion} undercounts them"
            f"{stated_text}"
        )
    return False, (stated_text[2:] if stated_text else None)

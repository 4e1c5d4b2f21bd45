"""Join a trajectory and a transcript of the same trial into one :class:`ParsedTrace`.

Calls are joined on the tool-call id, never by position: parallel calls appear in
different orders in the two files, and a position join swaps their results.
"""

from __future__ import annotations

from dataclasses import replace

from retrieval_lib.errors import InputError
from retrieval_lib.traces.model import ParsedTrace, SessionTotals, ToolCall

__all__ = ["merge_traces"]


def merge_traces(trajectory: ParsedTrace | None, transcript: ParsedTrace | None) -> ParsedTrace:
    """Merge the parsed trajectory and transcript of one trial.

    Parameters
    ----------
    trajectory
        Result of :func:`retrieval_lib.traces.atif.parse_atif`, or ``None``.
    transcript
        Result of :func:`retrieval_lib.traces.stream_json.parse_stream_json`, or ``None``.

    Returns
    -------
    ParsedTrace
        When only one trace is given, that trace unchanged. Otherwise
        ``source="merged"``:

        - Calls follow the trajectory's order, joined to the transcript's calls on the
          call id. A joined call keeps the trajectory's timestamp, ``is_sidechain``,
          arguments and result, takes ``parent_call_id`` (subagent attribution) from the
          transcript, and fills whatever the trajectory lacks (result, ``is_error``,
          ``structured_result``, empty arguments) from the transcript. Its ``source`` is
          ``"merged"``.
        - Calls only in the transcript (e.g. subagent calls the trajectory omits) are
          inserted after the last trajectory call that precedes them in transcript order
          (before every trajectory call when none does), or after their parent Task call
          when that comes later in the trajectory, keeping transcript order among
          themselves; their ``source`` stays ``"transcript"``. Calls only in the
          trajectory stay where they are. Transcript calls without a call id are left
          out (with a warning) when the trajectory has calls: they cannot be joined, and
          keeping them would count the same call twice.
        - ``cumulative_tokens``: the transcript's deduplicated running total when the
          transcript carries usage, else the trajectory's; a call the preferred trace has
          no figure for takes the other trace's figure, and a warning counts them.
        - ``totals``: the transcript's when they come from its result line, else the
          trajectory's when it has any, else the transcript's deduplicated messages.
        - ``order`` is the final position. ``warnings`` keep both traces' warnings
          (prefixed) and, when the traces disagree, how many calls were joined or found
          in one trace only.
        - ``truncated``, ``lines_total`` and ``lines_skipped`` come from the transcript.

    Raises
    ------
    InputError
        When both traces are ``None``.

    Examples
    --------
    >>> from retrieval_lib.traces.model import ParsedTrace, ToolCall
    >>> trajectory = ParsedTrace("trajectory", [
    ...     ToolCall("a", "Read", {"file_path": "/x"}, result="x", timestamp="t1"),
    ...     ToolCall("b", "Grep", {"pattern": "p"}, result="y", timestamp="t2", order=1)])
    >>> transcript = ParsedTrace("transcript", [
    ...     ToolCall("b", "Grep", {"pattern": "p"}, result="y", is_error=False, source="transcript"),
    ...     ToolCall("a", "Read", {"file_path": "/x"}, result="x", is_error=True, order=1,
    ...              source="transcript")])
    >>> merged = merge_traces(trajectory, transcript)
    >>> [(c.call_id, c.timestamp, c.is_error, c.order) for c in merged.tool_calls]
    [('a', 't1', True, 0), ('b', 't2', False, 1)]
    """
    if trajectory is None and transcript is None:
        raise InputError("no trace to merge: both the trajectory and the transcript are missing")
    if trajectory is None:
        return transcript  # type: ignore[return-value]  # not None: checked above
    if transcript is None:
        return trajectory

    warnings = [f"trajectory: {message}" for message in trajectory.warnings]
    warnings.extend(f"transcript: {message}" for message in transcript.warnings)

    final = _merged_calls(trajectory.tool_calls, transcript.tool_calls, warnings)

    return ParsedTrace(
        source="merged",
        tool_calls=final,
        started_at=trajectory.started_at or transcript.started_at,
        model=trajectory.model or transcript.model,
        harness_version=trajectory.harness_version or transcript.harness_version,
        totals=_pick_totals(trajectory.totals, transcript.totals),
        warnings=warnings,
        truncated=transcript.truncated or trajectory.truncated,
        lines_total=transcript.lines_total,
        lines_skipped=transcript.lines_skipped,
    )


def _merged_calls(
    trajectory_calls: list[ToolCall], transcript_calls: list[ToolCall], warnings: list[str]
) -> list[ToolCall]:
    """The calls in trajectory order, joined on id, transcript-only calls inserted."""
    transcript_by_id: dict[str, ToolCall] = {}
    for call in transcript_calls:
        if call.call_id is not None:
            transcript_by_id.setdefault(call.call_id, call)
    inserted_after, unjoinable = _place_transcript_only(trajectory_calls, transcript_calls)
    prefer_transcript_tokens = any(call.cumulative_tokens is not None for call in transcript_calls)
    only_transcript = sum(len(calls) for calls in inserted_after.values())
    merged_calls: list[ToolCall] = list(inserted_after.pop(None, []))
    joined = 0
    fallback_tokens = 0
    for call in trajectory_calls:
        partner = transcript_by_id.get(call.call_id) if call.call_id is not None else None
        if partner is None:
            merged_calls.append(call)
        else:
            joined += 1
            merged_calls.append(_join(call, partner, prefer_transcript_tokens))
        if (
            prefer_transcript_tokens
            and (partner is None or partner.cumulative_tokens is None)
            and call.cumulative_tokens is not None
        ):
            fallback_tokens += 1
        if call.call_id is not None:
            merged_calls.extend(inserted_after.pop(call.call_id, []))
    final = [replace(call, order=position) for position, call in enumerate(merged_calls)]

    only_trajectory = len(trajectory_calls) - joined
    if only_transcript or only_trajectory:
        warnings.append(
            f"joined {joined} call(s) on id; {only_transcript} only in the transcript "
            f"(inserted after the call preceding them), {only_trajectory} only in the trajectory"
        )
    if unjoinable:
        warnings.append(
            f"{unjoinable} transcript call(s) without a call id left out: they cannot be "
            "joined to the trajectory, whose record of them is kept"
        )
    if fallback_tokens:
        warnings.append(
            f"{fallback_tokens} call(s) have no running token total in the transcript and "
            "keep the trajectory's"
        )
    return final


def _place_transcript_only(
    trajectory_calls: list[ToolCall], transcript_calls: list[ToolCall]
) -> tuple[dict[str | None, list[ToolCall]], int]:
    """Transcript-only calls grouped by the trajectory call id they follow (``None``: the
    start), and the number of transcript calls left out for want of an id."""
    trajectory_position: dict[str | None, int] = {}
    for position, call in enumerate(trajectory_calls):
        if call.call_id is not None:
            trajectory_position.setdefault(call.call_id, position)
    trajectory_ids = trajectory_position.keys()
    inserted_after: dict[str | None, list[ToolCall]] = {}
    anchor: str | None = None
    unjoinable = 0
    for call in transcript_calls:
        if call.call_id is not None and call.call_id in trajectory_ids:
            anchor = call.call_id
        elif call.call_id is None and trajectory_calls:
            # Without an id a transcript call cannot be told apart from the trajectory's
            # record of the same call: adding it would count that call twice.
            unjoinable += 1
        else:
            # A subagent call never goes before the Task call that spawned it.
            parent = call.parent_call_id
            after = anchor
            if parent in trajectory_position and (
                after is None or trajectory_position[parent] > trajectory_position[after]
            ):
                after = parent
            inserted_after.setdefault(after, []).append(call)
    return inserted_after, unjoinable


def _join(call: ToolCall, partner: ToolCall, prefer_transcript_tokens: bool) -> ToolCall:
    """One trajectory call completed from its transcript twin (same call id)."""
    preferred, other = (
        (partner.cumulative_tokens, call.cumulative_tokens)
        if prefer_transcript_tokens
        else (call.cumulative_tokens, partner.cumulative_tokens)
    )
    return replace(
        call,
        arguments=call.arguments or partner.arguments,
        result=call.result if call.result is not None else partner.result,
        is_error=call.is_error if call.is_error is not None else partner.is_error,
        structured_result=call.structured_result
        if call.structured_result is not None
        else partner.structured_result,
        parent_call_id=partner.parent_call_id
        if partner.parent_call_id is not None
        else call.parent_call_id,
        cumulative_tokens=preferred if preferred is not None else other,
        source="merged",
    )


def _pick_totals(trajectory: SessionTotals, transcript: SessionTotals) -> SessionTotals:
    """Transcript result-line totals first, then the trajectory's, then the transcript's."""
    if transcript.source is not None and transcript.source.startswith("transcript.result"):
        return transcript
    if trajectory.source is not None:
        return trajectory
    return transcript

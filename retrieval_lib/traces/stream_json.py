"""Parser for Claude Code stream-json transcripts (``agent/claude-code.txt``).

A transcript is JSON Lines: one object per line, each assistant line carrying one content
block of one API message. Older harnesses left the same stream in
``agent/command-1/stdout.txt`` behind shell banner lines that are not JSON; those are
skipped and counted. The file is parsed line by line so that a transcript whose last line
was cut off (agent killed mid-write) still yields every call that was written before it.

Token accounting
----------------
Consecutive assistant lines repeat the ``message.id`` and ``usage`` of the API message they
belong to, so usage is deduplicated by message id. When a message id repeats with different
figures, the field-wise maximum is kept: stream lines may carry placeholder counts (notably
``output_tokens``) that later lines of the same message overwrite with larger ones.

Why one module of this length: the line reader, the usage deduplication and the totals'
fallbacks are one format's rules; the ATIF parser reuses its content and repair helpers.
"""

from __future__ import annotations

import errno
import os
import re
from itertools import accumulate
from pathlib import Path
from typing import Any

import orjson

from retrieval_lib.errors import InputError
from retrieval_lib.io import NotRegularFileError, lies_outside, read_regular_bytes
from retrieval_lib.traces.model import ParsedTrace, SessionTotals, ToolCall

__all__ = [
    "content_text",
    "loads_repaired",
    "parse_stream_json",
    "read_trace_bytes",
    "token_count",
    "token_count_or_none",
]

#: Per-line warnings beyond this many are summarised in one line.
_MAX_LINE_WARNINGS = 20

#: Usage fields of one API message, in the order kept in the per-message lists.
_USAGE_FIELDS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)

#: ``modelUsage`` fields of the result line, mapped to :class:`SessionTotals` attributes.
_MODEL_USAGE_FIELDS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheReadInputTokens", "cache_read_tokens"),
    ("cacheCreationInputTokens", "cache_creation_tokens"),
)


def read_trace_bytes(path: str | Path, what: str, within: str | Path | None = None) -> bytes:
    """Read a whole trace file (minus any UTF-8 BOM); OS errors become :class:`InputError`.

    The file must lie inside ``within`` (default: its own folder) once symlinks are
    resolved: a trace that is a symlink to ``/etc/passwd`` is refused, never read.

    Examples
    --------
    >>> import tempfile
    >>> trace = Path(tempfile.mkdtemp()) / "t.jsonl"
    >>> _ = trace.write_bytes(b"\\xef\\xbb\\xbf{}")
    >>> read_trace_bytes(trace, "transcript")
    b'{}'
    """
    file_path = path if isinstance(path, Path) else Path(path)
    try:
        folder = within if within is not None else file_path.parent
        data = None
        if not lies_outside(os.path.dirname(file_path), folder):
            try:  # the usual case: one open, which refuses a symlink (checked below)
                data = read_regular_bytes(file_path, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.EMLINK):
                    raise
        if data is None:
            if lies_outside(file_path, folder):
                raise InputError(
                    f"{what} {file_path} is a symlink to a file outside {folder}; not read"
                )
            data = read_regular_bytes(file_path)  # a FIFO or a device: refused, never waited on
    except FileNotFoundError as exc:
        raise InputError(f"{what} not found: {file_path}") from exc
    except IsADirectoryError as exc:
        raise InputError(f"{what} is a directory, not a file: {file_path}") from exc
    except NotRegularFileError as exc:
        raise InputError(f"{what} {file_path} {exc.strerror}; not read") from exc
    except OSError as exc:
        raise InputError(f"cannot read {what} {file_path}: {exc.strerror or exc}") from exc
    except (ValueError, RuntimeError) as exc:  # NUL byte in the path, symlink loop
        raise InputError(f"cannot read {what} {file_path}: {exc}") from exc
    # A UTF-8 byte order mark would hide the first line from the JSON decoder.
    return data[3:] if data.startswith(b"\xef\xbb\xbf") else data


def content_text(content: Any) -> str | None:
    """Tool-result content as text.

    Strings pass through; a list of content blocks becomes the ``"\\n"``-joined texts of
    its text blocks (image blocks carry no text); any other JSON value is serialised, so
    JSON results stay JSON text. ``None`` stays ``None`` (no result recorded).

    Examples
    --------
    >>> content_text([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}])
    'a\\nb'
    >>> content_text({"k": 1})
    '{"k":1}'
    """
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        _collect_texts(content, texts, 0)
        return "\n".join(texts)
    try:
        return orjson.dumps(content).decode()
    except orjson.JSONEncodeError:  # nested deeper than orjson follows, a 400-digit integer
        return None


#: Nesting followed inside a list of content blocks (writers nest at most two levels).
_MAX_CONTENT_DEPTH = 16


def _collect_texts(blocks: list[Any], texts: list[str], depth: int) -> None:
    """Texts of content blocks in order: strings, ``text`` blocks, nested lists and the
    ``content`` of nested ``tool_result`` blocks; image and other blocks carry no text."""
    if depth > _MAX_CONTENT_DEPTH:
        return
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, list):
            _collect_texts(block, texts, depth + 1)
        elif isinstance(block, dict):
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
            else:
                inner = block.get("content")
                if isinstance(inner, str):
                    texts.append(inner)
                elif isinstance(inner, list):
                    _collect_texts(inner, texts, depth + 1)


def token_count_or_none(value: Any) -> int | None:
    """An integer token count, or ``None`` when absent, not an integer or impossible.

    Examples
    --------
    >>> token_count_or_none(12), token_count_or_none(True), token_count_or_none(-1)
    (12, None, None)
    """
    return value if type(value) is int and 0 <= value < _MAX_TOKENS else None


#: Token counts at or above this are not believed (no session spends 2**53 tokens); it
#: keeps every running total within the 64-bit integers the document writer stores.
_MAX_TOKENS = 2**53


def token_count(value: Any) -> int:
    """A token count where absent, non-integer or impossible counts as 0.

    Examples
    --------
    >>> token_count(12), token_count(True), token_count(2**53), token_count(None)
    (12, 0, 0, 0)
    """
    return value if type(value) is int and 0 <= value < _MAX_TOKENS else 0


def _sum_present(values: list[Any]) -> Any:
    """Sum of the values that are present; ``None`` when none is (missing is not zero)."""
    present = [v for v in values if v is not None]
    return sum(present) if present else None


class _LineWarnings:
    """Collects per-line warnings, summarising beyond :data:`_MAX_LINE_WARNINGS`."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.suppressed = 0

    def add(self, message: str) -> None:
        if len(self.messages) < _MAX_LINE_WARNINGS:
            self.messages.append(message)
        else:
            self.suppressed += 1

    def finish(self) -> list[str]:
        if self.suppressed:
            return [*self.messages, f"{self.suppressed} more line warning(s) not shown"]
        return self.messages


def parse_stream_json(path: str | Path, *, within: str | Path | None = None) -> ParsedTrace:
    """Parse a Claude Code stream-json transcript into a :class:`ParsedTrace`.

    Parameters
    ----------
    path
        ``agent/claude-code.txt``, or the older ``agent/command-1/stdout.txt`` whose JSON
        lines follow non-JSON shell banner lines.

    within
        Folder the file must lie in once symlinks are resolved (the trial folder);
        default: the file's own folder.

    Returns
    -------
    ParsedTrace
        ``source="transcript"``. One :class:`ToolCall` per ``tool_use`` block in file
        order, joined to its ``tool_result`` by id (never by position): ``result`` is the
        result text (a list of text blocks is joined with newlines), ``is_error`` is the
        block's flag (``False`` when a result exists without the flag, as in the API;
        ``None`` when there is no result), ``structured_result`` the line's top-level
        ``tool_use_result`` (only when the line carries exactly one result),
        ``parent_call_id`` the line's ``parent_tool_use_id`` (subagent calls), and
        ``timestamp`` is ``None`` (lines carry no timestamps).

        ``cumulative_tokens`` of a call is the running sum, over the distinct API messages
        (by ``message.id``, in order of first appearance) up to and including the message
        that issued the call, of ``input_tokens + cache_creation_input_tokens +
        cache_read_input_tokens + output_tokens``; a repeated message id contributes once,
        with the field-wise maximum of its repeats. It is ``None`` for every call when no
        line carries usage.

        ``totals`` come from the ``result`` line: ``modelUsage`` summed over models
        (``source="transcript.result.modelUsage"``), with ``total_cost_usd``,
        ``duration_ms`` and ``num_turns``; without ``modelUsage`` the result line's own
        ``usage`` (``"transcript.result.usage"``); without a result line (agent killed)
        the deduplicated message usage (``"transcript.messages(deduplicated)"``, cost
        ``None``).

        Leading non-JSON lines are counted in ``lines_skipped`` and noted once in
        ``warnings``; a malformed line elsewhere is skipped with a warning naming its line
        number; a malformed last line sets ``truncated=True``. ``lines_total`` counts
        non-blank lines.

    Raises
    ------
    InputError
        When the file is missing or unreadable.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> lines = [
    ...     '{"type":"system","subtype":"init","model":"m","claude_code_version":"2.1.62"}',
    ...     '{"type":"assistant","message":{"id":"msg1","content":[{"type":"tool_use",'
    ...     '"id":"t1","name":"Read","input":{"file_path":"/a.py"}}],'
    ...     '"usage":{"input_tokens":3,"output_tokens":2}},"parent_tool_use_id":null}',
    ...     '{"type":"user","message":{"content":[{"type":"tool_result",'
    ...     '"tool_use_id":"t1","content":"1 x"}]}}',
    ... ]
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "claude-code.txt").write_text("\\n".join(lines) + "\\n")
    >>> trace = parse_stream_json(folder / "claude-code.txt")
    >>> [(c.name, c.result, c.cumulative_tokens) for c in trace.tool_calls]
    [('Read', '1 x', 5)]
    >>> trace.harness_version, trace.totals.source
    ('2.1.62', 'transcript.messages(deduplicated)')
    """
    data = read_trace_bytes(path, "transcript", within)
    warnings: list[str] = []
    transcript = _Transcript()
    transcript.read(data, warnings)
    transcript.join_calls(warnings)
    return ParsedTrace(
        source="transcript",
        tool_calls=transcript.calls,
        started_at=None,
        model=transcript.init_model or transcript.model,
        harness_version=transcript.harness_version,
        totals=transcript.totals(warnings),
        warnings=warnings,
        truncated=transcript.truncated,
        lines_total=transcript.lines_total,
        lines_skipped=transcript.lines_skipped,
    )


class _Transcript:
    """What the JSON lines of one transcript add up to: calls, results, usage per message."""

    def __init__(self) -> None:
        self.line_warnings = _LineWarnings()
        self.calls: list[ToolCall] = []
        self.call_message_index: list[int] = []
        self.seen_call_ids: set[str] = set()
        # message id -> position in message_usage; usage per message is
        # [input, cache creation, cache read, output] or None when the message carried none.
        self.message_index: dict[str, int] = {}
        self.message_usage: list[list[int] | None] = []
        self.last_usage: list[dict[str, Any] | None] = []  # per message, the usage merged last
        self.messages_without_id = 0
        self.tool_uses_without_id = 0
        self.results: dict[str, tuple[str | None, Any]] = {}
        self.structured: dict[str, Any] = {}
        self.duplicate_results = 0
        self.result_lines: list[dict[str, Any]] = []
        self.model: str | None = None
        self.init_model: str | None = None
        self.harness_version: str | None = None

    def read(self, data: bytes, warnings: list[str]) -> None:
        """Decode each line and take it by type; count and warn about lines that are not."""
        line_warnings = self.line_warnings
        lines_total = 0
        lines_skipped = 0
        leading_banner = 0
        seen_json = False
        truncated = False
        # Lines end in "\n" (or "\r\n": JSON ignores the "\r"); a file written with bare
        # "\r" line ends would otherwise be one line. Lines are decoded from views of
        # ``data``: splitting it would copy the whole file.
        newline = b"\n" if b"\n" in data or b"\r" not in data else b"\r"
        view = memoryview(data)
        size = len(data)
        index = end = -1
        content_end: int | None = None  # where the last line with content ends
        while end < size:
            start = end + 1
            end = data.find(newline, start)
            if end < 0:
                end = size
            index += 1
            if not data.startswith(b"{", start):
                stripped = data[start:end].strip()
                if not stripped:
                    continue
                if not stripped.startswith(b"{"):
                    lines_total += 1
                    lines_skipped += 1
                    if seen_json:
                        line_warnings.add(f"line {index + 1}: not JSON, skipped")
                    else:
                        leading_banner += 1
                    continue
            lines_total += 1
            try:
                obj = orjson.loads(view[start:end])
            except orjson.JSONDecodeError as error:
                repaired = loads_repaired(data[start:end])
                if repaired is None:
                    lines_skipped += 1
                    if content_end is None:
                        content_end = len(data.rstrip())
                    if end >= content_end:
                        truncated = True
                        warnings.append(
                            f"line {index + 1} (last line) is cut off ({error}); "
                            "transcript truncated, earlier lines kept"
                        )
                    else:
                        line_warnings.add(f"line {index + 1}: invalid JSON ({error}), skipped")
                    continue
                obj, what = repaired
                line_warnings.add(f"line {index + 1}: {what} replaced by U+FFFD")
            if not isinstance(obj, dict):
                lines_skipped += 1
                line_warnings.add(f"line {index + 1}: JSON value is not an object, skipped")
                continue
            seen_json = True
            line_type = obj.get("type")
            if line_type == "assistant":
                if not self.add_assistant(obj, index + 1):
                    lines_skipped += 1
            elif line_type == "user":
                self.add_user(obj, index + 1)
            elif line_type == "system":
                if obj.get("subtype") == "init":
                    if isinstance(obj.get("model"), str):
                        self.init_model = obj["model"]
                    if isinstance(obj.get("claude_code_version"), str):
                        self.harness_version = obj["claude_code_version"]
            elif line_type == "result":
                self.result_lines.append(obj)

        if leading_banner:
            warnings.insert(
                0, f"skipped {leading_banner} non-JSON line(s) before the first JSON line (banner)"
            )
        warnings.extend(line_warnings.finish())
        if lines_total == 0:
            warnings.append("transcript is empty: no lines")
        elif not seen_json:
            warnings.append("transcript has no JSON lines")
        self.lines_total = lines_total
        self.lines_skipped = lines_skipped
        self.seen_json = seen_json
        self.truncated = truncated

    def add_assistant(self, obj: dict[str, Any], line: int) -> bool:
        """Take one assistant line's usage and tool_use blocks; ``False``: skipped."""
        message = obj.get("message")
        if not isinstance(message, dict):
            self.line_warnings.add(f"line {line}: assistant line without a message, skipped")
            return False
        if self.model is None and isinstance(message.get("model"), str):
            self.model = message["model"]
        # The message's position by id (new ones appended).
        msg_id = message.get("id")
        position = self.message_index.get(msg_id) if isinstance(msg_id, str) else None
        if position is None:
            position = len(self.message_usage)
            self.message_usage.append(None)
            self.last_usage.append(None)
            if isinstance(msg_id, str):
                self.message_index[msg_id] = position
            else:
                self.messages_without_id += 1
        usage = message.get("usage")
        # Repeated lines of one message usually repeat its usage verbatim: skip those.
        if isinstance(usage, dict) and usage != self.last_usage[position]:
            self._merge_usage(position, usage)
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self._add_tool_use(block, obj.get("parent_tool_use_id"), position, line)
        return True

    def _merge_usage(self, position: int, usage: dict[str, Any]) -> None:
        """Merge a message line's usage into its message's (field-wise maximum)."""
        values = list(map(usage.get, _USAGE_FIELDS))
        if int not in map(type, values):
            return  # no count at all: not a usage
        self.last_usage[position] = usage
        counts = list(map(token_count, values))
        known = self.message_usage[position]
        self.message_usage[position] = counts if known is None else list(map(max, known, counts))

    def _add_tool_use(self, block: dict[str, Any], parent: Any, position: int, line: int) -> None:
        line_warnings = self.line_warnings
        call_id = block.get("id")
        if isinstance(call_id, str):
            if call_id in self.seen_call_ids:
                line_warnings.add(f"line {line}: tool_use id {call_id} repeated, kept the first")
                return
            self.seen_call_ids.add(call_id)
        else:
            call_id = None
            self.tool_uses_without_id += 1
        arguments = block.get("input")
        if isinstance(arguments, str):
            arguments = _json_object_text(arguments)
        if not isinstance(arguments, dict):
            line_warnings.add(f"line {line}: tool_use input is not a JSON object, dropped")
            arguments = {}
        name = block.get("name")
        if not isinstance(name, str):
            line_warnings.add(f"line {line}: tool_use without a name")
        self.calls.append(
            ToolCall(
                call_id=call_id,
                name=name if isinstance(name, str) else "unknown",
                arguments=arguments,
                parent_call_id=parent if isinstance(parent, str) else None,
                order=len(self.calls),
                source="transcript",
            )
        )
        self.call_message_index.append(position)

    def add_user(self, obj: dict[str, Any], line: int) -> None:
        """Take one user line's tool_result blocks (the first result per call id wins)."""
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return
        results = self.results
        n_results = 0
        first_id = None
        for block in content:
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            n_results += 1
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                self.line_warnings.add(f"line {line}: tool_result without tool_use_id, skipped")
            elif call_id in results:
                self.duplicate_results += 1
            else:
                results[call_id] = (content_text(block.get("content")), block.get("is_error"))
            if n_results == 1:
                first_id = call_id
        if n_results == 1 and isinstance(first_id, str) and "tool_use_result" in obj:
            self.structured.setdefault(first_id, obj["tool_use_result"])

    def join_calls(self, warnings: list[str]) -> None:
        """Give the calls their results and running token totals; warn about what is off."""
        calls = self.calls
        if self.tool_uses_without_id:
            warnings.append(
                f"{self.tool_uses_without_id} tool_use block(s) without a string id: "
                "their results cannot be joined"
            )
        unknown_parents = sorted(
            {c.parent_call_id for c in calls if c.parent_call_id is not None} - self.seen_call_ids
        )
        if unknown_parents:
            warnings.append(
                f"parent_tool_use_id names {len(unknown_parents)} call id(s) not in the "
                f"transcript (first: {unknown_parents[0]}): their calls are kept as subagent calls"
            )
        _attach_results(calls, self.results, self.structured, warnings)
        if self.duplicate_results:
            warnings.append(
                f"{self.duplicate_results} repeated tool_result(s) ignored (kept the first)"
            )
        if self.messages_without_id:
            warnings.append(
                f"{self.messages_without_id} assistant line(s) without message id: "
                "their usage could not be deduplicated"
            )
        _attach_cumulative_tokens(calls, self.call_message_index, self.message_usage, warnings)

    def totals(self, warnings: list[str]) -> SessionTotals:
        """Session totals: from the last result line, else summed from the messages."""
        result_lines = self.result_lines
        if len(result_lines) > 1:
            warnings.append(f"{len(result_lines)} result lines: totals taken from the last one")
        totals = (
            _totals_from_result(result_lines[-1])
            if result_lines
            else _totals_from_messages(self.message_usage)
        )
        _flag_output_placeholders(totals, self.message_usage)
        if result_lines and totals.total_tokens is None:
            warnings.append("the result line carries no token counts (modelUsage, usage)")
        if not result_lines and self.seen_json:
            warnings.append(
                "no result line: totals summed from deduplicated messages, cost unknown"
            )
        return totals


#: A ``\\uD800``-``\\uDFFF`` escape that is not half of a surrogate pair. JavaScript writers
#: (Claude Code) emit these when a string is cut inside an emoji; they are valid JSON text
#: but no Unicode string can hold them, so orjson rejects the whole value.
_LONE_SURROGATE_RE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def loads_repaired(data: bytes) -> tuple[Any, str] | None:
    """``data`` parsed after repairing what orjson cannot take, and what was repaired.

    Bytes that are not UTF-8 and escaped lone surrogates become U+FFFD. Returns ``None``
    when there is nothing to repair or the JSON is still invalid (then it is broken, or
    cut off). Only called after a failed parse, so valid input pays nothing.

    Examples
    --------
    >>> loads_repaired(b'{"a": "x\\\\ud83d"}')
    ({'a': 'x\ufffd'}, '1 escaped lone surrogate(s)')
    >>> loads_repaired(b'{"a": 1}') is None
    True
    """
    repairs: list[str] = []
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        data = data.decode("utf-8", errors="replace").encode("utf-8")
        repairs.append("bytes that are not UTF-8")
    if b"\\u" in data:
        data, count = _LONE_SURROGATE_RE.subn(rb"\\ufffd", data)
        if count:
            repairs.append(f"{count} escaped lone surrogate(s)")
    if not repairs:
        return None
    try:
        return orjson.loads(data), " and ".join(repairs)
    except orjson.JSONDecodeError:
        return None


def _json_object_text(text: str) -> Any:
    """A JSON object written as text (some writers serialise tool inputs), else ``None``."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _attach_results(
    calls: list[ToolCall],
    results: dict[str, tuple[str | None, Any]],
    structured: dict[str, Any],
    warnings: list[str],
) -> None:
    """Join results to calls on the tool-call id; warn about results without a call."""
    matched = 0
    for call in calls:
        if call.call_id is None:
            continue
        found = results.get(call.call_id)
        if found is not None:
            matched += 1
            call.result, flag = found
            call.is_error = flag if isinstance(flag, bool) else False
        if call.call_id in structured:
            call.structured_result = structured[call.call_id]
    orphans = len(results) - matched
    if orphans:
        warnings.append(f"{orphans} tool_result(s) match no tool_use id in the transcript")


def _attach_cumulative_tokens(
    calls: list[ToolCall],
    call_message_index: list[int],
    message_usage: list[list[int] | None],
    warnings: list[str],
) -> None:
    """Give each call the running token total up to and including its message."""
    missing = message_usage.count(None)
    if missing == len(message_usage):
        return
    running = list(accumulate(0 if usage is None else sum(usage) for usage in message_usage))
    for call, position in zip(calls, call_message_index, strict=True):
        call.cumulative_tokens = running[position]
    if missing:
        warnings.append(
            f"{missing} API message(s) carry no usage: running token totals exclude them"
        )


def _flag_output_placeholders(totals: SessionTotals, message_usage: list[list[int] | None]) -> None:
    """Set ``output_tokens_placeholder`` and its note on the chosen totals.

    The ``usage.output_tokens`` of assistant lines are stream placeholders (a few tokens
    per message; the corpus's django baseline sums to 29 where ``modelUsage`` says 2771):
    output counts summed from them are flagged, the ``result`` line's totals are not.
    """
    if totals.output_tokens is None:
        return
    known = [usage[3] for usage in message_usage if usage is not None]
    per_message = sum(known) if known else None
    if totals.source == "transcript.messages(deduplicated)":
        totals.output_tokens_placeholder = True
        totals.output_tokens_note = (
            f"no result line: output_tokens {totals.output_tokens} is the sum of per-message "
            "usage.output_tokens, which are stream placeholders; the true output count is "
            "unknown"
        )
        return
    totals.output_tokens_placeholder = False
    if per_message is not None and per_message != totals.output_tokens:
        where = "modelUsage" if totals.source == "transcript.result.modelUsage" else "usage"
        totals.output_tokens_note = (
            f"per-message usage.output_tokens (stream placeholders) sum to {per_message}; "
            f"output_tokens is the result line's {where} total"
        )


def _totals_from_result(result: dict[str, Any]) -> SessionTotals:
    """Session totals from the transcript's ``result`` line."""
    totals = SessionTotals()
    model_usage = result.get("modelUsage")
    if isinstance(model_usage, dict) and model_usage:
        per_model = [usage for usage in model_usage.values() if isinstance(usage, dict)]
        for source_name, attribute in _MODEL_USAGE_FIELDS:
            setattr(
                totals,
                attribute,
                _sum_present([token_count_or_none(usage.get(source_name)) for usage in per_model]),
            )
        model_cost = _sum_present([_json_number(usage.get("costUSD")) for usage in per_model])
        totals.source = "transcript.result.modelUsage"
    else:
        usage = result.get("usage")
        model_cost = None
        if isinstance(usage, dict):
            totals.input_tokens = token_count_or_none(usage.get("input_tokens"))
            totals.output_tokens = token_count_or_none(usage.get("output_tokens"))
            totals.cache_read_tokens = token_count_or_none(usage.get("cache_read_input_tokens"))
            totals.cache_creation_tokens = token_count_or_none(
                usage.get("cache_creation_input_tokens")
            )
            totals.source = "transcript.result.usage"
    totals.total_tokens = _sum_present(
        [
            totals.input_tokens,
            totals.output_tokens,
            totals.cache_read_tokens,
            totals.cache_creation_tokens,
        ]
    )
    cost = _json_number(result.get("total_cost_usd"))
    totals.cost_usd = cost if cost is not None else model_cost
    duration_ms = _json_number(result.get("duration_ms"))
    if duration_ms is not None:
        totals.duration_seconds = duration_ms / 1000.0
    totals.num_turns = token_count_or_none(result.get("num_turns"))
    if totals.source is None:
        totals.source = "transcript.result"
    return totals


def _json_number(value: Any) -> float | None:
    """A JSON number (not a boolean) as a float, else ``None``."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _totals_from_messages(message_usage: list[list[int] | None]) -> SessionTotals:
    """Session totals summed over distinct messages (no result line); cost unknown."""
    known = [usage for usage in message_usage if usage is not None]
    if not known:
        return SessionTotals()
    input_tokens, cache_creation, cache_read, output = (
        sum(column) for column in zip(*known, strict=True)
    )
    return SessionTotals(
        input_tokens=input_tokens,
        output_tokens=output,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_creation,
        total_tokens=input_tokens + output + cache_read + cache_creation,
        source="transcript.messages(deduplicated)",
    )

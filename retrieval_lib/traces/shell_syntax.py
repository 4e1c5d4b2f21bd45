"""Shell syntax: a command line as words, operators, pipelines and redirections.

The syntactic half of reading a Bash tool call, with no knowledge of any program:
:func:`tokenize` splits a command line into words and operators (quotes and escapes
removed, comments dropped, here-document bodies skipped), :func:`split_pipelines` groups
the tokens into pipelines of :class:`SimpleCommand` (separators ``&&``, ``||``, ``;``,
``&``, newlines and parentheses end a pipeline, ``|`` a stage; output redirections are
taken out of the words), and :func:`command_substitutions` finds the bodies of ``$(...)``
and backtick substitutions. What a command reads or writes is decided in
:mod:`retrieval_lib.traces.shell`.

The tokenizer is our own (a few dozen lines) rather than :mod:`shlex`: shlex returns a
quoted ``';'`` and the operator ``;`` as the same token, which would split
``grep ';' f.c`` in two.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

_WORD: Final = 0
_OP: Final = 1
_SEPARATORS: Final = frozenset({"&&", "||", ";", "&", "\n", "(", ")", ";;"})
_GROUP_WORDS: Final = frozenset({"{", "}", "!", "then", "do", "else", "elif", "fi", "done"})
_PIPES: Final = frozenset({"|", "|&"})
_OUTPUT_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>"})
_OPERATOR_CHARS: Final = frozenset("|&;<>()\n")
_NULL_SINKS: Final = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})


# A run of characters with no quoting, operator, comment or substitution meaning.
_PLAIN_RUN_RE: Final = re.compile(r"[^\s'\"\\$`#|&;<>()]+")


_DOUBLE_QUOTED_RUN_RE: Final = re.compile(r'[^"\\]+')


class Unparseable(Exception):
    """Raised for input the tokenizer cannot follow."""


def tokenize(text: str) -> list[tuple[int, str, bool]]:
    """Split a command line into ``(kind, value, quoted)`` tokens.

    Words have quotes and escapes removed; ``quoted`` tells whether any part was quoted
    or escaped (such a word is never an operator or a glob). Raises ``Unparseable``.
    """
    tokens: list[tuple[int, str, bool]] = []
    buf: list[str] = []
    heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs) awaiting a body
    in_word = False
    quoted = False
    i = 0
    n = len(text)

    def flush() -> None:
        nonlocal in_word, quoted
        if in_word:
            tokens.append((_WORD, "".join(buf), quoted))
            buf.clear()
            in_word = False
            quoted = False

    while i < n:
        plain = _PLAIN_RUN_RE.match(text, i)
        if plain is not None:
            buf.append(plain.group())
            in_word = True
            i = plain.end()
            continue
        ch = text[i]
        if ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                raise Unparseable("unbalanced single quote")
            buf.append(text[i + 1 : end])
            in_word = quoted = True
            i = end + 1
        elif ch == '"':
            i = _double_quoted(text, i + 1, buf)
            in_word = quoted = True
        elif ch == "\\":
            if i + 1 < n and text[i + 1] == "\n":  # line continuation
                i += 2
                continue
            if i + 1 < n:
                buf.append(text[i + 1])
            in_word = quoted = True
            i += 2
        elif ch == "$" and i + 1 < n and text[i + 1] == "(":
            # Command substitution: keep it inside the word (it is never a known path).
            end = _substitution_end(text, i)
            buf.append(text[i:end])
            in_word = True
            i = end
        elif ch == "`":
            end = text.find("`", i + 1)
            if end < 0:
                raise Unparseable("unbalanced backquote")
            buf.append(text[i : end + 1])
            in_word = True
            i = end + 1
        elif ch == "#" and not in_word:
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif ch in " \t\r":
            flush()
            i += 1
        elif ch in _OPERATOR_CHARS:
            if ch in "<>" and in_word and not quoted and "".join(buf).isdigit():
                # "2>" / "2>&1": the digits are a file descriptor, not a word.
                buf.clear()
                in_word = False
            flush()
            i = _operator(text, i, tokens, heredocs)
        else:
            buf.append(ch)
            in_word = True
            i += 1
    flush()
    return tokens


def _operator(
    text: str, i: int, tokens: list[tuple[int, str, bool]], heredocs: list[tuple[str, bool]]
) -> int:
    """Append the operator at ``i`` to ``tokens`` (and a heredoc's delimiter, whose body is
    skipped at the end of its line); return the index after it."""
    op = _read_operator(text, i)
    tokens.append((_OP, op, False))
    i += len(op)
    if op in ("<<", "<<-"):
        # the delimiter word follows; the body starts after the end of this line
        i, delimiter = _heredoc_delimiter(text, i)
        tokens.append((_WORD, delimiter, True))  # the redirect's operand
        heredocs.append((delimiter, op == "<<-"))
    elif op == "\n" and heredocs:
        i = _skip_heredoc_bodies(text, i, heredocs)
        heredocs.clear()
    return i


def _double_quoted(text: str, i: int, buf: list[str]) -> int:
    """Append the text of the double-quoted string starting at ``i`` (after its opening
    quote) to ``buf``, with its escapes resolved; return the index after the closing quote."""
    n = len(text)
    while True:
        run = _DOUBLE_QUOTED_RUN_RE.match(text, i)
        if run is not None:
            buf.append(run.group())
            i = run.end()
        if i >= n:
            raise Unparseable("unbalanced double quote")
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
            if text[i + 1] != "\n":
                buf.append(text[i + 1])
            i += 2
            continue
        buf.append(c)
        i += 1


def _substitution_end(text: str, i: int) -> int:
    """The index after the ``)`` that closes the ``$(`` at ``i`` (nested parentheses
    counted)."""
    n = len(text)
    depth = 0
    while i < n:
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise Unparseable("unbalanced $(")


def _heredoc_delimiter(text: str, i: int) -> tuple[int, str]:
    """Read the delimiter word after ``<<``; returns the index after it and the word.

    Quotes and backslashes only say that the body is not expanded: ``'EOF'``, ``"EOF"``
    and ``\\EOF`` all end at a line ``EOF``.
    """
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    start = i
    while i < n and text[i] not in " \t\r" and text[i] not in _OPERATOR_CHARS:
        if text[i] in "'\"":
            end = text.find(text[i], i + 1)
            if end < 0:
                raise Unparseable("unbalanced quote in a here-document delimiter")
            i = end + 1
        else:
            i += 1
    delimiter = "".join(c for c in text[start:i] if c not in "'\"\\")
    if not delimiter:
        raise Unparseable("here-document without delimiter")
    return i, delimiter


def _skip_heredoc_bodies(text: str, i: int, heredocs: list[tuple[str, bool]]) -> int:
    """Skip the bodies of the pending here-documents, which start at ``text[i]``.

    Each body ends at a line equal to its delimiter (leading tabs removed for ``<<-``); a
    body without one runs to the end of the text, as bash reads it.
    """
    n = len(text)
    for delimiter, strip_tabs in heredocs:
        while i < n:
            end = text.find("\n", i)
            line = text[i:] if end < 0 else text[i:end]
            i = n if end < 0 else end + 1
            if strip_tabs:
                line = line.lstrip("\t")
            if line.rstrip("\r") == delimiter:
                break
    return i


_OPERATORS_BY_LENGTH: Final = (
    ("&>>", "<<-", "<<<"),
    ("&&", "||", ";;", "|&", ">>", ">|", "&>", ">&", "<&", "<<", "<>"),
    ("|", "&", ";", "<", ">", "(", ")", "\n"),
)


def _read_operator(text: str, i: int) -> str:
    for group in _OPERATORS_BY_LENGTH:
        for op in group:
            if text.startswith(op, i):
                return op
    return text[i]  # pragma: no cover - every operator char is in the last group


# --------------------------------------------------------------------------- structure


@dataclass
class SimpleCommand:
    """One simple command: its words and whether it writes through a redirection."""

    words: list[str]
    quoted: list[bool]
    writes_file: bool = False
    #: ``(word, quoted)`` of every output redirection to a file (not a device).
    redirect_targets: list[tuple[str, bool]] = field(default_factory=list)


def split_pipelines(tokens: list[tuple[int, str, bool]]) -> list[list[SimpleCommand]]:
    """Group tokens into pipelines (lists of simple commands).

    Examples
    --------
    >>> pipelines = split_pipelines(tokenize("cd src && grep -n 'a;b' x.py | head > o.txt"))
    >>> [[stage.words for stage in stages] for stages in pipelines]
    [[['cd', 'src']], [['grep', '-n', 'a;b', 'x.py'], ['head']]]
    >>> pipelines[1][1].redirect_targets
    [('o.txt', False)]
    """
    pipelines: list[list[SimpleCommand]] = []
    stages: list[SimpleCommand] = []
    current = SimpleCommand([], [])
    pending_redirect: str | None = None

    def end_stage() -> None:
        nonlocal current
        if current.words or current.writes_file:
            stages.append(current)
        current = SimpleCommand([], [])

    for kind, value, quoted in tokens:
        if kind == _WORD:
            if pending_redirect is not None:
                if pending_redirect in _OUTPUT_REDIRECTS and value not in _NULL_SINKS:
                    current.writes_file = True
                    current.redirect_targets.append((value, quoted))
                elif pending_redirect == ">&" and not value.isdigit() and value != "-":
                    current.writes_file = True  # ">& file" is "&> file"
                    current.redirect_targets.append((value, quoted))
                pending_redirect = None
                continue
            if not current.words and not quoted and value in _GROUP_WORDS:
                continue  # "{ cat a; }", "if ...; then cat a; fi": the body still runs
            current.words.append(value)
            current.quoted.append(quoted)
        elif value in _PIPES:
            end_stage()
        elif value in _SEPARATORS:
            end_stage()
            if stages:
                pipelines.append(stages)
                stages = []
        else:  # a redirection operator: its target is the next word
            pending_redirect = value
    end_stage()
    if stages:
        pipelines.append(stages)
    return pipelines


# --------------------------------------------------------------------------- substitutions


def command_substitutions(command: str) -> list[str]:
    """Bodies of the outermost ``$(...)`` and backtick substitutions, in order.

    Single-quoted text is literal; ``$((`` (arithmetic) is not a command. An unbalanced
    substitution ends the scan: what follows cannot be told apart reliably.
    """
    bodies: list[str] = []
    index, length = 0, len(command)
    in_single = in_double = False
    while index < length:
        char = command[index]
        if char == "\\" and not in_single:
            index += 2
            continue
        if char == "'" and not in_double:
            in_single = not in_single
        elif char == '"' and not in_single:
            in_double = not in_double
        elif not in_single and command.startswith("$(", index):
            if command.startswith("$((", index):
                index += 3
                continue
            depth, end = 1, index + 2
            while end < length and depth:
                depth += {"(": 1, ")": -1}.get(command[end], 0)
                end += 1
            if depth:
                break
            bodies.append(command[index + 2 : end - 1])
            index = end
            continue
        elif char == "`" and not in_single:
            end = command.find("`", index + 1)
            if end < 0:
                break
            bodies.append(command[index + 1 : end])
            index = end + 1
            continue
        index += 1
    return bodies

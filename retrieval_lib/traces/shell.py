"""Read-only shell commands in Bash tool calls, as file reads and searches.

Baseline agents often read code with ``cat``, ``sed -n``, ``grep -rn`` or ``find`` through
the Bash tool (reference pitfall 7). :func:`parse_shell_command` recognises those commands
and returns what they read, without running anything.

Rules, chosen to never invent a path:

* The command is split on ``&&``, ``||``, ``;``, ``&``, newlines and parentheses into
  simple commands, and on ``|`` into pipeline stages. Only the first stage of a pipeline
  reads the files it names; a later stage reads its standard input, so it counts only when
  it names files itself (``xargs grep PATTERN`` yields a ``code_search`` without paths).
* ``cd DIR`` / ``pushd DIR`` set the working directory for the relative paths of the
  following commands; after ``cd`` with no argument, ``~`` or a variable the directory is
  unknown and relative paths are dropped.
* Redirections are removed; a simple command that redirects its output into a file (not
  ``/dev/null``) writes, so it is not a read. Writers (``sed -i``, ``tee``, ``rm``,
  ``python``, ``find -delete`` ...) are never reads.
* Operands with globs, ``~``, ``$`` or command substitution are not paths we can know.
* A here-document's body is text, not commands: it is skipped up to its delimiter line.
* An unbalanced quote or any other input the tokenizer cannot follow yields ``[]``; the
  function never raises.

:func:`analyze_shell_command` also lists the files the command line creates through the
shell (redirections, ``tee``, ``cp``/``mv`` destinations, ``touch``, here-documents; see
:class:`ShellCommand`), and drops reads of files an earlier command of the line created.

Why one module of this length: one short parser per program (``cat``, ``sed``, ``head``,
``grep``, ``find``, ``awk``, ``git`` ...), sharing the option parser and the working-directory
tracking. The tokenizer (words, operators, pipelines, redirections, here-documents) is
:mod:`retrieval_lib.traces.shell_syntax`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from retrieval_lib.traces.shell_syntax import (
    SimpleCommand,
    Unparseable,
    command_substitutions,
    split_pipelines,
    tokenize,
)

ShellCategory = Literal["file_read", "code_search", "file_search"]
#: How the command's standard output can be read back for file names: ``"paths"`` (one
#: path a line: ``find``, ``grep -l``, ``rg --files``), ``"grep"`` (``path:N:text`` or
#: ``path:text`` lines of a grep over several files or a folder), ``"count"`` (``path:N``
#: of ``grep -c``), or ``None``.
OutputFormat = Literal["paths", "grep", "count"]


@dataclass(frozen=True)
class ShellRead:
    """One read-only command found in a shell command line.

    Attributes
    ----------
    category
        ``"file_read"`` (cat, head, tail, sed, awk, nl, wc, less, git show),
        ``"code_search"`` (grep, rg, git grep, find -exec grep) or ``"file_search"``
        (find, ls, tree, rg --files, git ls-files).
    program
        The program name (``"grep"``, ``"sed"``, ...).
    paths
        The path operands, resolved against the ``cd`` directory when one is known, in
        command order. For ``file_read`` these are files; for searches they can be
        directories (use :func:`looks_like_file` to tell).
    line_range
        ``(first, last)`` 1-based lines read when the command says (``head -n 20``,
        ``sed -n '10,40p'``), else ``None``.
    pattern
        The search pattern (grep/rg pattern, find ``-name`` pattern), else ``None``.
    cwd
        The directory the command ran in when a ``cd`` set it, else ``None``.
    output_format
        How the standard output lists files, set only when this read is the only thing
        the whole command line prints (see :data:`OutputFormat`).
    """

    category: ShellCategory
    program: str
    paths: list[str] = field(default_factory=list)
    line_range: tuple[int, int] | None = None
    pattern: str | None = None
    cwd: str | None = None
    output_format: OutputFormat | None = None


# --------------------------------------------------------------------------- helpers

_GLOB_CHARS: Final = frozenset("*?[{")
_WRAPPERS: Final = frozenset({"sudo", "command", "builtin", "nohup", "exec", "time", "nice"})
_EXTENSION_RE: Final = re.compile(r"\.[A-Za-z0-9_+-]{1,12}$")
_SED_RANGE_RE: Final = re.compile(r"^\s*(\d+)\s*(?:,\s*(\d+|\$)\s*)?[pP]\s*;?\s*$")
_SED_RANGE_QUIT_RE: Final = re.compile(r"^\s*(\d+)\s*,\s*(\d+)\s*p\s*;\s*\d+\s*q\s*$")


def looks_like_file(path: str) -> bool:
    """Tell whether a search operand names a file rather than a directory.

    A path counts as a file when its last component has an extension and it has no
    trailing slash or glob character (directories rarely have extensions; files without
    one, like ``Makefile``, are missed rather than invented).

    Examples
    --------
    >>> looks_like_file("django/contrib/admin/options.py"), looks_like_file("tests/")
    (True, False)
    """
    if not path or path.endswith("/") or not _GLOB_CHARS.isdisjoint(path):
        return False
    base = path.rsplit("/", 1)[-1]
    return base not in (".", "..") and bool(_EXTENSION_RE.search(base)) and base[0] != "."


def _literal_path(word: str, quoted: bool) -> bool:
    """Whether an operand is a literal path (no glob, variable, ``~`` or substitution)."""
    if not word or word == "-" or "$" in word or "`" in word:
        return False
    if word.startswith("~"):
        return False
    return quoted or _GLOB_CHARS.isdisjoint(word)


class _Cwd:
    """The working directory the command line has moved to (``None`` = agent's own)."""

    __slots__ = ("path", "known")

    def __init__(self) -> None:
        self.path: str | None = None
        self.known = True

    def change(self, target: str | None) -> None:
        if target is None or not _literal_path(target, True) or target == "-":
            self.path, self.known = None, False
            return
        if target.startswith("/"):
            self.path, self.known = posixpath.normpath(target), True
        elif self.known:
            base = self.path
            self.path = posixpath.normpath(posixpath.join(base, target)) if base else target
        # relative cd from an unknown directory: still unknown

    def resolve(self, path: str) -> str | None:
        if path.startswith("/"):
            return path
        if not self.known:
            return None
        if self.path is None:
            return path
        return posixpath.normpath(posixpath.join(self.path, path))


def _operands(words: list[str], quoted: list[bool], cwd: _Cwd) -> list[str]:
    out: list[str] = []
    for word, q in zip(words, quoted, strict=True):
        if _literal_path(word, q):
            resolved = cwd.resolve(word)
            if resolved is not None:
                out.append(resolved)
    return out


def _strip_wrappers(words: list[str], quoted: list[bool]) -> tuple[list[str], list[bool]]:
    """Drop ``VAR=value`` prefixes and wrappers such as ``sudo``, ``env``, ``timeout 30``."""
    i = 0
    n = len(words)
    while i < n:
        word = words[i]
        if "=" in word and not quoted[i] and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
        elif word in _WRAPPERS:
            i += 1
            while i < n and words[i].startswith("-"):
                # sudo -u USER, nice -n 10: options whose value is the next word
                takes_value = words[i] in ("-u", "-g", "-n", "-C", "-D", "-h", "-p", "-U")
                i += 2 if takes_value else 1
        elif word == "env":
            i += 1
            while i < n and (words[i].startswith("-") or "=" in words[i]):
                i += 1
        elif word == "timeout":
            i += 1
            while i < n and words[i].startswith("-"):
                i += 1
            i += 1  # the duration
        else:
            break
    return words[i:], quoted[i:]


def _program_name(word: str) -> str:
    return word.rsplit("/", 1)[-1]


# --------------------------------------------------------------------------- programs


def _parse_options(
    words: list[str],
    quoted: list[bool],
    *,
    short_with_arg: str,
    long_with_arg: frozenset[str],
) -> tuple[dict[str, list[str]], list[tuple[str, bool]]]:
    """Split argv (without the program) into options and operands, GNU style.

    Short options are keyed ``"-x"``, long ones ``"--name"``; flags get ``[""]``.
    """
    options: dict[str, list[str]] = {}
    operands: list[tuple[str, bool]] = []
    i = 0
    n = len(words)
    while i < n:
        word = words[i]
        if word == "-" or not word.startswith("-"):
            operands.append((word, quoted[i]))
            i += 1
            continue
        if word == "--":
            operands.extend(zip(words[i + 1 :], quoted[i + 1 :], strict=True))
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            if not eq and name in long_with_arg and i + 1 < n:
                value = words[i + 1]
                i += 1
            options.setdefault(name, []).append(value)
            i += 1
            continue
        # a cluster of short options, e.g. -rnA3 or -n 20 or -20 (head/tail)
        j = 1
        while j < len(word):
            letter = word[j]
            if letter.isdigit():
                options.setdefault("-#", []).append(word[j:])
                break
            if letter in short_with_arg:
                value = word[j + 1 :]
                if not value and i + 1 < n:
                    value = words[i + 1]
                    i += 1
                options.setdefault("-" + letter, []).append(value)
                break
            options.setdefault("-" + letter, []).append("")
            j += 1
        i += 1
    return options, operands


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None


def _parse_head_tail(
    program: str, words: list[str], quoted: list[bool], cwd: _Cwd
) -> ShellRead | None:
    options, operands = _parse_options(
        words, quoted, short_with_arg="nc", long_with_arg=frozenset({"--lines", "--bytes"})
    )
    counts = options.get("-n") or options.get("--lines") or options.get("-#")
    count_text = counts[-1] if counts else None
    line_range = None
    if program == "head" and "-c" not in options and "--bytes" not in options:
        count = 10 if count_text is None else _int(count_text.lstrip("+"))
        if count is not None and count > 0:
            line_range = (1, count)
    if not operands:
        return None  # reads standard input
    # tail's range depends on the file's length, which a command line does not tell.
    files = [w for w, q in operands]
    return ShellRead(
        "file_read", program, _operands(files, [q for _, q in operands], cwd), line_range
    )


def _parse_sed(words: list[str], quoted: list[bool], cwd: _Cwd) -> ShellRead | None:
    options, operands = _parse_options(
        words,
        quoted,
        short_with_arg="efl",
        long_with_arg=frozenset({"--expression", "--file", "--line-length"}),
    )
    if "-i" in options or any(k.startswith("--in-place") for k in options):
        return None
    scripts = options.get("-e", []) + options.get("--expression", [])
    if not scripts and "-f" not in options and "--file" not in options:
        if not operands:
            return None
        scripts = [operands[0][0]]
        operands = operands[1:]
    if not operands:
        return None  # reads standard input
    if any(re.search(r"(^|[;}\s/])[wW]\s+\S", s) for s in scripts):
        return None  # the "w file" command writes
    # without -s, sed numbers the lines of all its files as one stream
    separate = len(operands) == 1 or "-s" in options or "--separate" in options
    line_range = _sed_print_range(scripts, options) if separate else None
    files = [w for w, _ in operands]
    return ShellRead(
        "file_read", "sed", _operands(files, [q for _, q in operands], cwd), line_range
    )


def _sed_print_range(scripts: list[str], options: dict[str, list[str]]) -> tuple[int, int] | None:
    """The lines ``sed -n 'A,Bp'`` prints, ``None`` for any other script."""
    quiet = "-n" in options or "--quiet" in options or "--silent" in options
    if not quiet or len(scripts) != 1:
        return None
    match = _SED_RANGE_RE.match(scripts[0]) or _SED_RANGE_QUIT_RE.match(scripts[0])
    if not match:
        return None
    first = int(match.group(1))
    last_text = match.group(2)
    if last_text is None:
        return (first, first)
    if last_text == "$":
        return None
    return (first, max(first, int(last_text)))


def _piped_line_range(words: list[str], quoted: list[bool]) -> tuple[int, int] | None:
    """Lines kept by ``| head -n N`` or ``| sed -n 'A,Bp'`` reading standard input."""
    program = _program_name(words[0])
    if program == "head":
        options, operands = _parse_options(
            words[1:], quoted[1:], short_with_arg="nc", long_with_arg=frozenset({"--lines"})
        )
        if operands or "-c" in options or "--bytes" in options:
            return None
        text = (options.get("-n") or options.get("--lines") or options.get("-#") or ["10"])[-1]
        count = _int(text)
        return (1, count) if count is not None and count > 0 else None
    if program == "sed":
        options, operands = _parse_options(
            words[1:], quoted[1:], short_with_arg="efl", long_with_arg=frozenset({"--expression"})
        )
        if "-i" in options or "-f" in options:
            return None
        scripts = options.get("-e", []) + options.get("--expression", [])
        if not scripts and operands:
            scripts = [operands[0][0]]
            operands = operands[1:]
        return None if operands else _sed_print_range(scripts, options)
    return None


_GREP_SHORT_ARGS: Final = "efmABCdD"
_GREP_LONG_ARGS: Final = frozenset(
    {
        "--regexp",
        "--file",
        "--max-count",
        "--after-context",
        "--before-context",
        "--context",
        "--include",
        "--exclude",
        "--exclude-dir",
        "--exclude-from",
        "--devices",
        "--directories",
        "--binary-files",
        "--label",
        "--color",
        "--colour",
    }
)
_RG_SHORT_ARGS: Final = "efgtTmABCMjrEd"
_RG_LONG_ARGS: Final = frozenset(
    {
        "--regexp",
        "--file",
        "--glob",
        "--iglob",
        "--type",
        "--type-not",
        "--type-add",
        "--max-count",
        "--after-context",
        "--before-context",
        "--context",
        "--max-columns",
        "--threads",
        "--replace",
        "--encoding",
        "--max-depth",
        "--max-filesize",
        "--sort",
        "--sortr",
        "--colors",
        "--color",
        "--path-separator",
        "--pre",
        "--pre-glob",
        "--context-separator",
        "--field-match-separator",
        "--ignore-file",
    }
)


def _parse_grep(
    program: str, words: list[str], quoted: list[bool], cwd: _Cwd, *, first_stage: bool
) -> ShellRead | None:
    is_rg = program in ("rg", "ag", "ack")
    options, operands = _parse_options(
        words,
        quoted,
        short_with_arg=_RG_SHORT_ARGS if is_rg else _GREP_SHORT_ARGS,
        long_with_arg=_RG_LONG_ARGS if is_rg else _GREP_LONG_ARGS,
    )
    if is_rg and "--files" in options:
        paths = _operands([w for w, _ in operands], [q for _, q in operands], cwd)
        return ShellRead("file_search", program, paths, None, None, cwd.path, "paths")
    patterns = options.get("-e", []) + options.get("--regexp", [])
    if not patterns and "-f" not in options and "--file" not in options:
        if not operands:
            return None
        patterns = [operands[0][0]]
        operands = operands[1:]
    files = [w for w, _ in operands]
    paths = _operands(files, [q for _, q in operands], cwd)
    recursive = is_rg or any(k in options for k in ("-r", "-R", "--recursive"))
    if not first_stage and not paths:
        # A later pipeline stage greps its standard input: a filter, not a read.
        return None
    output: OutputFormat | None = None
    lists_names = any(k in options for k in ("-l", "-L", "--files-with-matches"))
    shows_names = (recursive or len(paths) > 1 or "-H" in options) and "-h" not in options
    if lists_names:
        output = "paths"
    elif "-c" in options or "--count" in options:
        output = "count" if shows_names else None
    elif shows_names:  # "path:N:text" with -n, "path:text" without
        output = "grep"
    return ShellRead("code_search", program, paths, None, patterns[0], cwd.path, output)


def _parse_find(words: list[str], quoted: list[bool], cwd: _Cwd) -> ShellRead | None:
    starts: list[tuple[str, bool]] = []
    i = 0
    n = len(words)
    while i < n and words[i].startswith("-") and words[i] in ("-H", "-L", "-P"):
        i += 1
    while i < n and not (
        (words[i].startswith("-") and len(words[i]) > 1) or words[i] in ("(", "!", ",")
    ):
        starts.append((words[i], quoted[i]))
        i += 1
    pattern: str | None = None
    grep_read: ShellRead | None = None
    output: OutputFormat | None = "paths"
    while i < n:
        word = words[i]
        if word in ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls"):
            return None
        if word in ("-name", "-iname", "-path", "-ipath", "-wholename", "-regex", "-iregex"):
            if i + 1 < n and pattern is None:
                pattern = words[i + 1]
            i += 2
            continue
        if word in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < n and words[end] not in (";", "+"):
                end += 1
            inner = [w for w in words[i + 1 : end] if w != "{}"]
            inner_quoted = [
                q for w, q in zip(words[i + 1 : end], quoted[i + 1 : end], strict=True) if w != "{}"
            ]
            name = _program_name(inner[0]) if inner else ""
            if name in ("grep", "egrep", "fgrep", "rg"):
                grep_read = _parse_grep(name, inner[1:], inner_quoted[1:], cwd, first_stage=True)
                if grep_read is None:
                    return None
                lists = any(o in inner[1:] for o in ("-l", "-L")) or any(
                    w.startswith("-") and not w.startswith("--") and "l" in w for w in inner[1:]
                )
                output = "paths" if lists else None
            elif name in ("ls", "stat", "file", "echo", "basename") or (
                name in _FILE_READERS
                # the reader must read, not write, its file ("sed -i" does not)
                and _parse_stage([*inner, "f.txt"], [*inner_quoted, False], cwd, first=True)
            ):
                output = None
            else:
                return None  # -exec of anything else may write (rm, sed -i, chmod, ...)
            i = end + 1
            continue
        i += 1
    start_paths = _operands([w for w, _ in starts], [q for _, q in starts], cwd) if starts else []
    if not starts:
        start_paths = [cwd.path or "."] if cwd.known else []
    if grep_read is not None:
        return ShellRead(
            "code_search", "find", start_paths, None, grep_read.pattern, cwd.path, output
        )
    return ShellRead("file_search", "find", start_paths, None, pattern, cwd.path, output)


def _parse_simple_reader(
    program: str, words: list[str], quoted: list[bool], cwd: _Cwd, short_with_arg: str
) -> ShellRead | None:
    _, operands = _parse_options(
        words, quoted, short_with_arg=short_with_arg, long_with_arg=frozenset()
    )
    if not operands:
        return None  # reads standard input
    files = [w for w, _ in operands]
    return ShellRead("file_read", program, _operands(files, [q for _, q in operands], cwd))


def _parse_awk(words: list[str], quoted: list[bool], cwd: _Cwd) -> ShellRead | None:
    options, operands = _parse_options(
        words, quoted, short_with_arg="Ffv", long_with_arg=frozenset()
    )
    if "-f" not in options:
        if not operands:
            return None
        program_text = operands[0][0]
        operands = operands[1:]
        if "system(" in program_text or re.search(r"print[f]?[^;}]*>\s*\"", program_text):
            return None  # the awk program writes or runs commands
    # "var=value" operands are assignments, not files
    files = [(w, q) for w, q in operands if not re.match(r"^[A-Za-z_]\w*=", w)]
    if not files:
        return None  # reads standard input
    return ShellRead(
        "file_read", "awk", _operands([w for w, _ in files], [q for _, q in files], cwd)
    )


def _parse_git(words: list[str], quoted: list[bool], cwd: _Cwd) -> ShellRead | None:
    i = 0
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in ("-C", "-c") else 1
    if i >= len(words):
        return None
    sub, rest, rest_quoted = words[i], words[i + 1 :], quoted[i + 1 :]
    if sub == "grep":
        read = _parse_grep("grep", rest, rest_quoted, cwd, first_stage=True)
        if read is None:
            return None
        return ShellRead("code_search", "git grep", read.paths, None, read.pattern, cwd.path)
    if sub == "show":
        paths = [w.split(":", 1)[1] for w in rest if ":" in w and not w.startswith("-")]
        paths = [p for p in paths if p and _literal_path(p, True)]
        if not paths:
            return None
        resolved = [r for r in (cwd.resolve(p) for p in paths) if r is not None]
        return ShellRead("file_read", "git show", resolved)
    if sub == "ls-files":
        operands = [(w, q) for w, q in zip(rest, rest_quoted, strict=True) if not w.startswith("-")]
        paths = _operands([w for w, _ in operands], [q for _, q in operands], cwd)
        return ShellRead("file_search", "git ls-files", paths, None, None, cwd.path, "paths")
    return None


_FILE_READERS: Final = frozenset(
    {"cat", "head", "tail", "sed", "nl", "wc", "less", "more", "bat", "batcat", "awk", "gawk"}
)
_GREPS: Final = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "zgrep"})
_LISTERS: Final = frozenset({"ls", "tree", "dir"})


def _parse_stage(
    words: list[str], quoted: list[bool], cwd: _Cwd, *, first: bool
) -> ShellRead | None:
    """Classify one pipeline stage (``words[0]`` is the program)."""
    program = _program_name(words[0])
    args, args_quoted = words[1:], quoted[1:]
    if program == "xargs":
        # xargs runs its command on the piped names: a search, but over unknown files.
        i = 0
        while i < len(args) and args[i].startswith("-"):
            i += 2 if args[i] in ("-I", "-n", "-P", "-d", "-L", "-s", "-E") else 1
        if i < len(args) and _program_name(args[i]) in _GREPS:
            read = _parse_grep(
                _program_name(args[i]), args[i + 1 :], args_quoted[i + 1 :], cwd, first_stage=True
            )
            if read is not None:
                return ShellRead("code_search", read.program, [], None, read.pattern, cwd.path)
        return None
    if program in _GREPS:
        return _parse_grep(program, args, args_quoted, cwd, first_stage=first)
    if program in _FILE_READERS:
        if program in ("head", "tail"):
            read = _parse_head_tail(program, args, args_quoted, cwd)
        elif program == "sed":
            read = _parse_sed(args, args_quoted, cwd)
        elif program in ("awk", "gawk"):
            read = _parse_awk(args, args_quoted, cwd)
        elif program == "nl":
            read = _parse_simple_reader(program, args, args_quoted, cwd, "bdfhilnsvw")
        else:
            read = _parse_simple_reader(program, args, args_quoted, cwd, "")
        if read is None or (not first and not read.paths):
            return None
        return read
    if program == "find" and first:
        return _parse_find(args, args_quoted, cwd)
    if program in _LISTERS and first:
        options, operands = _parse_options(
            args,
            args_quoted,
            short_with_arg="ITwL" if program == "ls" else "ILPo",
            long_with_arg=frozenset({"--ignore", "--hide", "--width"}),
        )
        paths = _operands([w for w, _ in operands], [q for _, q in operands], cwd)
        if not operands:
            paths = [cwd.path or "."] if cwd.known else []
        return ShellRead("file_search", program, paths, None, None, cwd.path)
    if program == "git" and first:
        return _parse_git(args, args_quoted, cwd)
    return None


_READER_WORD_RE: Final = re.compile(
    r"(?<![\w.-])(?:"
    + "|".join(sorted(map(re.escape, _FILE_READERS | _GREPS | _LISTERS | {"find", "git"})))
    + r")(?![\w.-])"
)

# Stages after a path-listing command that keep its lines intact.
_LINE_FILTERS: Final = frozenset({"head", "tail", "sort", "uniq", "grep", "egrep", "fgrep", "cat"})
_NO_OUTPUT: Final = frozenset(
    {"cd", "pushd", "popd", "export", "set", "true", "unset", "source", "touch", "mkdir"}
)


#: Command substitutions nested deeper than this are not looked into.
_MAX_SUBSTITUTION_DEPTH = 4


@dataclass(frozen=True)
class ShellCommand:
    """What one shell command line reads and creates.

    Attributes
    ----------
    reads
        The read-only commands, as :func:`parse_shell_command` returns them (minus reads
        of files created earlier in the same line, as spelt there).
    created
        Paths (resolved against the ``cd`` directory, normalised, command order, no
        duplicates) of the files the line writes through the shell: output redirections
        (``>``, ``>>``, ``>|``, ``&>``, ``2> f``), ``tee [-a] FILE...``, ``touch FILE...``
        (not ``touch -c``), the destination of ``cp``/``mv`` and ``cat > f <<EOF``
        here-documents. A ``cp``/``mv`` destination is a folder (so the file is
        ``DST/basename(SRC)``) when it ends in ``/``, is ``.`` or ``..``, comes from
        ``-t DIR``, follows several sources, or has no ``.`` in its name while the source
        has an extension; ``-T`` makes it a file. Devices (``/dev/null`` ...) and
        ``2>&1`` create nothing; nor do operands with globs, variables or ``~``, ``mv``
        or recursive ``cp`` of a source without extension (it may be a folder, whose
        files are unknown), or commands inside a substitution. Paths outside the
        repository (``/tmp/x``) are kept here; the event builder drops them.
    """

    reads: list[ShellRead]
    created: list[str]
    #: For each read, how many entries of ``created`` the line had made before it ran
    #: (so a caller that normalises paths differently can still drop reads of them).
    created_before: list[int] = field(default_factory=list)


#: A command line that may write a file: a creating program or an output redirection
#: other than ``2>&1`` / ``> /dev/null``.
_WRITE_HINT_RE: Final = re.compile(r"(?<![\w.-])(?:tee|cp|mv|touch)(?![\w.-])|>(?!&\d)(?!\s*/dev/)")


def _created_path(word: str, quoted: bool, cwd: _Cwd) -> str | None:
    if not _literal_path(word, quoted) or word.endswith("/") or word.startswith("/dev/"):
        return None
    resolved = cwd.resolve(word)
    return posixpath.normpath(resolved) if resolved is not None else None


def _has_extension(path: str) -> bool:
    return bool(_EXTENSION_RE.search(posixpath.basename(path)))


def _tee_or_touch_targets(
    program: str, words: list[str], quoted: list[bool], cwd: _Cwd
) -> list[str]:
    options, operands = _parse_options(
        words,
        quoted,
        short_with_arg="drt" if program == "touch" else "",
        long_with_arg=frozenset({"--date", "--reference"}) if program == "touch" else frozenset(),
    )
    if program == "touch" and ("-c" in options or "--no-create" in options):
        return []
    return [p for p in (_created_path(w, q, cwd) for w, q in operands) if p is not None]


def _copy_targets(program: str, words: list[str], quoted: list[bool], cwd: _Cwd) -> list[str]:
    options, operands = _parse_options(
        words,
        quoted,
        short_with_arg="tS",
        long_with_arg=frozenset({"--target-directory", "--suffix"}),
    )
    target_dirs = options.get("-t") or options.get("--target-directory") or []
    target_dir = target_dirs[-1] if target_dirs else None
    recursive = program == "cp" and any(
        flag in options for flag in ("-r", "-R", "-a", "--recursive", "--archive")
    )
    if target_dir:
        sources, destination, dest_quoted, folder = operands, target_dir, True, True
    else:
        if len(operands) < 2:
            return []
        sources = operands[:-1]
        destination, dest_quoted = operands[-1]
        folder = (
            "-T" not in options
            and "--no-target-directory" not in options
            and (
                len(sources) > 1
                or destination.endswith("/")
                or posixpath.basename(destination) in (".", "..")
                or ("." not in posixpath.basename(destination) and _has_extension(sources[0][0]))
            )
        )
    if not _literal_path(destination, dest_quoted):
        return []
    out: list[str] = []
    for source, source_quoted in sources:
        if not _literal_path(source, source_quoted) or source.endswith("/"):
            continue
        if (program == "mv" or recursive) and not _has_extension(source):
            continue  # perhaps a folder: the files it brings are unknown
        target = posixpath.join(destination, posixpath.basename(source)) if folder else destination
        path = _created_path(target, True, cwd)
        if path is not None:
            out.append(path)
    return out


def _created_by(stage: SimpleCommand, words: list[str], quoted: list[bool], cwd: _Cwd) -> list[str]:
    """Files one simple command writes: its redirections, then its program's targets."""
    out = [p for p in (_created_path(w, q, cwd) for w, q in stage.redirect_targets) if p]
    if words:
        program = _program_name(words[0])
        if program in ("tee", "touch"):
            out.extend(_tee_or_touch_targets(program, words[1:], quoted[1:], cwd))
        elif program in ("cp", "mv"):
            out.extend(_copy_targets(program, words[1:], quoted[1:], cwd))
    return out


def parse_shell_command(command: str) -> list[ShellRead]:
    """Find the read-only file reads and searches in a shell command line.

    Parameters
    ----------
    command
        The ``command`` argument of a Bash tool call.

    Returns
    -------
    list of ShellRead
        One entry per reading command, in command order; ``[]`` when the command reads
        nothing we can name, writes, or cannot be parsed. Never raises.

    Examples
    --------
    >>> read = parse_shell_command("cd /workspace/src && sed -n '10,40p' app.py")[0]
    >>> read.category, read.paths, read.line_range
    ('file_read', ['/workspace/src/app.py'], (10, 40))
    >>> [r.category for r in parse_shell_command("grep -rn foo src | head; rm -rf x")]
    ['code_search']
    """
    return _parse_command(command, 0, writes=False).reads


def analyze_shell_command(command: str) -> ShellCommand:
    """Find the reads and the files a shell command line creates.

    Same reads as :func:`parse_shell_command`, except that a file an earlier command of
    the same line created is not read from the repository (``echo x > n.md && cat n.md``
    reads nothing); ``created`` lists the files written through the shell (see
    :class:`ShellCommand`). Never raises.

    Examples
    --------
    >>> result = analyze_shell_command("cp a.py src/ && echo x > notes.md && cat notes.md")
    >>> result.reads, result.created
    ([], ['src/a.py', 'notes.md'])
    >>> analyze_shell_command("pytest -q > /tmp/out.txt 2>&1").created
    ['/tmp/out.txt']
    """
    return _parse_command(command, 0, writes=True)


_EMPTY: Final = ShellCommand([], [], [])


def _parse_command(command: str, depth: int, *, writes: bool) -> ShellCommand:
    if not command or not isinstance(command, str):
        return _EMPTY
    reads_possible = _READER_WORD_RE.search(command) is not None
    writes_possible = writes and _WRITE_HINT_RE.search(command) is not None
    if not reads_possible and not writes_possible:
        return _EMPTY  # fast path: no reading or writing program is named at all
    inner: list[ShellRead] = []
    if reads_possible and ("$(" in command or "`" in command):
        # Commands inside a substitution run too ("wc -l $(find src -name '*.py')",
        # "echo `cat f`"); what they print is consumed by the outer command, so their
        # output is never read back for file names. What they write is not looked for.
        inner = (
            [
                replace(read, output_format=None)
                for body in command_substitutions(command)
                for read in _parse_command(body, depth + 1, writes=False).reads
            ]
            if depth < _MAX_SUBSTITUTION_DEPTH
            else []
        )
    outer = _parse_outer(command, writes=writes)
    if not inner:
        return outer
    # a substitution runs before its command's redirections
    return ShellCommand(inner + outer.reads, outer.created, [0] * len(inner) + outer.created_before)


def _parse_outer(command: str, *, writes: bool) -> ShellCommand:
    try:
        pipelines = split_pipelines(tokenize(command))
    except Unparseable:
        return _EMPTY
    except Exception:  # noqa: BLE001 - a malformed command line must never break a trial
        return _EMPTY
    reads: list[ShellRead] = []
    created: list[str] = []
    created_set: set[str] = set()
    created_before: list[int] = []
    output_pipelines = 0
    last_output_read: ShellRead | None = None
    last_output_ok = False
    cwd = _Cwd()
    for stages in pipelines:
        produced = False
        for position, stage in enumerate(stages):
            words, quoted = _strip_wrappers(stage.words, stage.quoted)
            if writes:
                try:
                    made = _created_by(stage, words, quoted, cwd)
                except Exception:  # noqa: BLE001 - one odd stage must not lose the others
                    made = []
                for path in made:
                    if path not in created_set:
                        created_set.add(path)
                        created.append(path)
            if not words:
                continue
            program = _program_name(words[0])
            if position == 0 and program in ("cd", "pushd") and len(stages) == 1:
                cwd.change(words[1] if len(words) > 1 else None)
                continue
            if position == 0 and program in _NO_OUTPUT:
                continue
            if position == 0:
                produced = True
            if stage.writes_file:
                continue
            try:
                read = _parse_stage(words, quoted, cwd, first=position == 0)
            except Exception:  # noqa: BLE001 - one odd stage must not lose the others
                read = None
            if read is None:
                continue
            if created_set and read.paths:
                # a file this command line created earlier is not read from the repository
                kept = [p for p in read.paths if posixpath.normpath(p) not in created_set]
                if not kept:
                    continue
                if len(kept) != len(read.paths):
                    read = replace(read, paths=kept)
            if read.cwd != cwd.path:
                read = replace(read, cwd=cwd.path)
            if position == 0:
                if (
                    len(stages) > 1
                    and read.program in ("cat", "nl")
                    and len(read.paths) == 1
                    and read.line_range is None
                ):
                    # "nl -ba f.py | sed -n '100,200p'": the agent sees only those lines
                    next_words, next_quoted = _strip_wrappers(stages[1].words, stages[1].quoted)
                    if next_words:
                        piped = _piped_line_range(next_words, next_quoted)
                        if piped is not None:
                            read = replace(read, line_range=piped)
                reads.append(read)
                created_before.append(len(created))
                last_output_read = read
                last_output_ok = (
                    all(
                        _program_name(_strip_wrappers(s.words, s.quoted)[0][0] or "")
                        in _LINE_FILTERS
                        for s in stages[1:]
                        if _strip_wrappers(s.words, s.quoted)[0]
                    )
                    and not stages[-1].writes_file
                )
            else:
                reads.append(read)
                created_before.append(len(created))
        if produced and not stages[-1].writes_file:
            output_pipelines += 1  # a pipeline redirected into a file prints nothing
    return ShellCommand(
        _with_output_format(reads, output_pipelines, last_output_read, last_output_ok),
        created,
        created_before,
    )


def _with_output_format(
    reads: list[ShellRead],
    output_pipelines: int,
    last_output_read: ShellRead | None,
    last_output_ok: bool,
) -> list[ShellRead]:
    """Keep ``output_format`` only when one listing pipeline is all the command prints."""
    if not reads:
        return reads
    keep = (
        output_pipelines == 1
        and len(reads) == 1
        and reads[0] is last_output_read
        and last_output_ok
        and reads[0].output_format is not None
    )
    return [
        r if (keep or r.output_format is None) else replace(r, output_format=None) for r in reads
    ]

"""Run discovery: run folders, trial folders in both layouts, trial results, task folders.

Two run layouts occur (``docs/input-formats.md``):

* batch: ``<run>/<config_name>/<YYYY-MM-DD__HH-MM-SS>/<trial>/``
* archived job: ``<run>/{baseline|mcp}/<job_name>/<trial>/``; the job folder holds its own
  ``config.json`` and ``result.json`` describing the job.

Both put a trial three levels below its run folder. A folder at that level is a trial when
it has an ``agent/`` folder or a ``result.json`` with ``trial_name`` or ``task_name`` (a
job's ``result.json`` has ``n_total_trials``/``stats`` instead). A folder with sub-folders
named like trials (``<name>__<id>``) is a job or batch folder and its ``result.json`` is not
even read. Output folders (``retrieval_events/``) and hidden folders are skipped.

In the archived layout the config name is taken from the job name's last ``_`` part when
that part begins with the group folder's name (``ccb_test_<task>_mcp-remote-direct`` under
``mcp/`` gives ``mcp-remote-direct``, the name the batch layout uses), else it is the group
folder's name (``baseline``/``mcp``).

Discovery, ``result.json`` reading and task lookup share one module: the ``result.json``
loader decides what a trial folder is, and all three canonicalise task names.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

import orjson

from retrieval_lib.errors import InputError
from retrieval_lib.io import (
    finite_number,
    lies_outside,
    os_reason,
    parse_iso_time,
    read_regular_bytes,
)
from retrieval_lib.safe_text import describe_value

__all__ = [
    "OUTPUT_DIRNAMES",
    "LeftOut",
    "Listings",
    "TaskIndex",
    "TrialRef",
    "TrialResult",
    "canonical_task_name",
    "discover_runs",
    "discover_trials",
    "printable_path",
    "read_trial_result",
    "without_lone_surrogates",
]

OUTPUT_DIRNAMES: frozenset[str] = frozenset({"retrieval_events", "__pycache__", "node_modules"})
"""Folder names that never hold trials (our own output and tool caches)."""

_BATCH_TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}__\d{2}-\d{2}-\d{2}$")
# one or more config prefixes, leaving at least one character
_TASK_PREFIXES_RE = re.compile(
    r"^(?:mcp_|sgonly_|sg_only_|baseline_)+(?=.)", re.IGNORECASE | re.ASCII | re.DOTALL
)
_RANDOM_SUFFIX_RE = re.compile(r"^(?P<task>.+-\d+(?:-[A-Za-z][A-Za-z0-9]*)?)_[A-Za-z0-9]{6}$")
_MAX_SEARCH_DEPTH = 8


def canonical_task_name(raw: str) -> str:
    """Task name as in the task-definition folder: config prefixes and random suffix removed.

    Strips (repeatedly) the ``mcp_``, ``sgonly_``, ``sg_only_`` and ``baseline_`` prefixes,
    then a trailing ``_<6 letters or digits>`` when what remains is a plausible task name
    (ends in ``-<number>``, optionally followed by one ``-<word>`` such as ``-ds``), and
    lowercases.

    Examples
    --------
    >>> canonical_task_name("mcp_django-modeladmin-impact-001_1Q2fNL")
    'django-modeladmin-impact-001'
    >>> canonical_task_name("sgonly_llamacpp-context-window-search-001")
    'llamacpp-context-window-search-001'
    >>> canonical_task_name("my_task_abcdef")  # no task-like remainder: kept
    'my_task_abcdef'
    """
    name = _TASK_PREFIXES_RE.sub("", raw.strip(), count=1)
    match = _RANDOM_SUFFIX_RE.match(name)
    if match is not None:
        name = match["task"]
    return name.lower()


@dataclass(frozen=True)
class TrialRef:
    """Where one trial lives and which run/config/batch it belongs to."""

    run_dir: Path
    run_id: str
    config_name: str
    batch_timestamp: str | None
    trial_dir: Path
    layout: Literal["batch", "archive"]
    job_name: str | None


# --------------------------------------------------------------------------- discovery


class LeftOut:
    """Input entries a folder walk could not use, each with why: nothing is dropped silently.

    A folder that cannot be listed (permissions), a symlink loop, a symlink to nothing,
    a trial-level folder whose ``result.json`` cannot be read: the walk skips only that
    entry, goes on with its siblings, and records it here (one reason per path, the
    first one found). :meth:`lines` gives the warning lines the CLI prints.

    Examples
    --------
    >>> left = LeftOut()
    >>> left.add("runs/loop", "a symlink loop")
    >>> left.add("runs/loop", "a symlink loop")  # recorded once
    >>> left.entries()
    [('runs/loop', 'a symlink loop')]
    >>> left.lines()
    ['left out: runs/loop: a symlink loop']
    """

    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}

    def add(self, path: str | os.PathLike[str], reason: str) -> None:
        self._reasons.setdefault(printable_path(path), reason)

    def update(self, entries: Iterable[tuple[str, str]]) -> None:
        for path, reason in entries:
            self.add(path, reason)

    def entries(self, under: str | os.PathLike[str] | None = None) -> list[tuple[str, str]]:
        """``(path, reason)`` pairs sorted by path (only those below ``under`` when given)."""
        items = sorted(self._reasons.items())
        if under is None:
            return items
        prefix = printable_path(under).rstrip("/") + "/"
        return [(p, r) for p, r in items if p.startswith(prefix) or p == prefix[:-1]]

    def lines(self) -> list[str]:
        return [f"left out: {path}: {reason}" for path, reason in self.entries()]

    def __len__(self) -> int:
        return len(self._reasons)


def printable_path(path: str | bytes | os.PathLike[str]) -> str:
    """``path`` as text any UTF-8 writer can store: bytes of a name that is not UTF-8
    (decoded by Python as lone surrogates) are shown as ``\\xNN`` escapes.

    Examples
    --------
    >>> printable_path(os.fsdecode(b"runs/mcp-\\xff-remote/t__1"))
    'runs/mcp-\\\\xff-remote/t__1'
    >>> printable_path("runs/ok")
    'runs/ok'
    """
    text = os.fsdecode(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")
    return text


#: Folder listings of one search (``None``: the folder could not be listed), by path.
Listings: TypeAlias = dict[str, list[os.DirEntry[str]] | None]


@dataclass(frozen=True)
class _Search:
    """What a walk records as it goes: entries left out, and (``listings``) the folders
    it listed, kept (``keep``, :func:`discover_runs`) or each taken once (reused)."""

    left_out: LeftOut | None = None
    listings: Listings | None = None
    keep: bool = False


def _listing(path: str | Path, search: _Search) -> list[os.DirEntry[str]] | None:
    """The entries of ``path``; ``None``, recorded in ``left_out``, when it cannot be listed."""
    key = os.fspath(path)
    listings = search.listings
    if listings is not None and key in listings:
        return listings[key] if search.keep else listings.pop(key)
    try:
        with os.scandir(path) as scan:
            entries: list[os.DirEntry[str]] | None = list(scan)
    except OSError as exc:
        if search.left_out is not None:
            search.left_out.add(path, f"cannot be listed ({os_reason(exc)})")
        entries = None
    if search.keep and listings is not None:
        listings[key] = entries
    return entries


def _subdirs(path: str | Path, search: _Search) -> list[os.DirEntry[str]]:
    """Visible sub-folders of ``path`` sorted by name (``[]`` when it cannot be listed);
    a bad entry (a symlink loop, a symlink to nothing) is skipped alone, into ``left_out``.
    """
    found: list[os.DirEntry[str]] = []
    left_out = search.left_out
    for entry in _listing(path, search) or ():
        if entry.name.startswith(".") or entry.name in OUTPUT_DIRNAMES:
            continue
        try:
            if entry.is_dir(follow_symlinks=True):
                found.append(entry)
            elif left_out is not None and entry.is_symlink() and not os.path.exists(entry.path):
                left_out.add(entry.path, _dangling_reason(entry.path))
        except OSError as exc:
            if left_out is not None:
                left_out.add(entry.path, os_reason(exc))
    return sorted(found, key=lambda e: e.name)


def _dangling_reason(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        reason = os_reason(exc)
        return reason if exc.errno == errno.ELOOP else f"a symlink to nothing ({reason})"
    return "a symlink that cannot be followed"


def _is_trial_dir(path: str, search: _Search) -> bool:
    """A trial folder has ``agent/`` or a trial-level ``result.json`` (see module doc).

    One whose ``agent/`` cannot be reached and that cannot be listed, or whose
    ``result.json`` cannot be read while it has no ``agent/``, may be a trial: it goes to
    ``left_out``, never dropped without a word. (A folder that may be searched but not
    listed, whose ``agent/`` is reached by name, is a trial: its files can be read.)
    """
    # The usual trial: its agent/ is a folder, found with one stat rather than a listing
    # (five system calls); the listing decides the rest and names what cannot be read.
    try:
        if stat.S_ISDIR(os.stat(f"{path}/agent").st_mode):
            return True
    except (OSError, ValueError):
        pass
    entries = _listing(path, search)
    left_out = search.left_out
    if entries is None:
        return False
    has_result = holds_trials = False
    for entry in entries:
        try:
            if entry.name == "agent" and entry.is_dir():
                return True
            if entry.name == "result.json":
                has_result = True
            elif "__" in entry.name and entry.is_dir():
                holds_trials = True
        except OSError as exc:
            if left_out is not None:
                left_out.add(entry.path, os_reason(exc))
    if holds_trials or not has_result:
        return False  # a job or batch folder (it holds trial folders), or nothing
    data, problem = _load_json_object(Path(path), "result.json")
    if data is None:
        if left_out is not None and problem is not None:
            left_out.add(path, f"{problem}, and no agent/ folder: not read as a trial")
        return False
    return "trial_name" in data or "task_name" in data


def _archive_config_name(group: str, job_name: str) -> str:
    last = job_name.rsplit("_", 1)[-1]
    return last if last != job_name and last.lower().startswith(group.lower()) else group


def _not_utf8(run_dir: Path, *names: str) -> str | None:
    """Why a trial cannot be normalised because a folder name on its path is not UTF-8
    (the names name the output and go in it), or ``None`` when every name is UTF-8."""
    for name in (run_dir.name, *names):
        if not name.isascii() and (shown := printable_path(name)) != name:
            return f"folder name {shown!r} is not valid UTF-8; rename it to normalise this trial"
    return None


def _walk_trials(run_dir: Path, search: _Search) -> Iterator[tuple[str, str, str, bool]]:
    """``(level1, level2, trial folder, is_batch)`` names of every trial-like folder."""
    for level1 in _subdirs(run_dir, search):
        for level2 in _subdirs(level1.path, search):
            is_batch = bool(_BATCH_TIMESTAMP_RE.match(level2.name))
            for level3 in _subdirs(level2.path, search):
                if _is_trial_dir(level3.path, search):
                    yield level1.name, level2.name, level3.name, is_batch


def _iter_trials(run_dir: Path, search: _Search) -> Iterator[TrialRef]:
    left_out = search.left_out
    for level1, level2, level3, is_batch in _walk_trials(run_dir, search):
        trial_dir = run_dir.joinpath(level1, level2, level3)  # one pathlib join, not three
        why = _not_utf8(run_dir, level1, level2, level3)
        if why is not None:
            # named, never silently dropped; its siblings and the other runs go on
            if left_out is not None:
                left_out.add(trial_dir, why)
            continue
        yield TrialRef(
            run_dir=run_dir,
            run_id=run_dir.name,
            config_name=level1 if is_batch else _archive_config_name(level1, level2),
            batch_timestamp=level2 if is_batch else None,
            trial_dir=trial_dir,
            layout="batch" if is_batch else "archive",
            job_name=None if is_batch else level2,
        )


def discover_trials(
    run_dir: Path, left_out: LeftOut | None = None, listings: Listings | None = None
) -> list[TrialRef]:
    """Every trial of one run folder, in both layouts, sorted by path.

    Parameters
    ----------
    run_dir
        A run folder (``runs/official/<run_id>``).
    left_out
        Receives the entries skipped on the way (a symlink loop, a folder that cannot be
        listed, an unreadable trial-level ``result.json``, a trial whose folder names are
        not UTF-8: named with its bytes as ``\\xNN``); their siblings are still found.
    listings
        The listings :func:`discover_runs` kept in the same pass: each folder listed there
        is not listed again, and its listing is dropped once used.

    Returns
    -------
    list of TrialRef
        Sorted by (config, batch or job, trial folder) name; [] for a folder without trials.

    Examples
    --------
    >>> discover_trials(Path("runs/official/ccb_design_haiku_20260228_025547"))  # doctest: +SKIP
    [TrialRef(..., config_name='baseline-local-direct', batch_timestamp='2026-02-28__03-13-55', ...)]
    """
    return list(_iter_trials(Path(run_dir), _Search(left_out, listings)))


def discover_runs(
    paths: Sequence[Path], left_out: LeftOut | None = None, listings: Listings | None = None
) -> list[Path]:
    """Run folders under ``paths``; each path is a run folder or a folder of runs (any depth).

    A folder is a run when a trial sits three levels below it; otherwise its sub-folders
    are searched (hidden and output folders skipped, symlink loops cut, at most
    8 levels deep). A folder that cannot be listed and a bad entry (a symlink loop, a
    symlink to nothing) are skipped alone, recorded in ``left_out``, and their siblings
    are still searched. Deciding that a folder of runs is not itself a run lists every
    folder three levels below it (the batch folders of its runs); with ``listings``, every
    listing is kept there for :func:`discover_trials` to reuse.

    Raises
    ------
    InputError
        When a path does not exist or is not a folder.

    Examples
    --------
    >>> discover_runs([Path("runs")])  # doctest: +SKIP
    [PosixPath('runs/official/archive/ccb_test_haiku_022326'), PosixPath('runs/official/ccb_design_...')]
    """
    found: dict[str, Path] = {}
    seen: set[str] = set()
    search = _Search(left_out, listings, keep=True)

    def visit(folder: Path, depth: int) -> None:
        real = os.path.realpath(folder)
        if real in seen or depth > _MAX_SEARCH_DEPTH:
            return
        seen.add(real)
        if next(_walk_trials(folder, search), None) is not None:  # a trial-like folder
            if _not_utf8(folder) is None:
                found.setdefault(real, folder)
            else:  # a run named in bytes that are not UTF-8: each of its trials is named
                for _ in _iter_trials(folder, search):
                    pass
            return
        for child in _subdirs(folder, search):
            visit(folder / child.name, depth + 1)

    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise InputError(f"run path {path} does not exist or is not a folder")
        visit(path, 0)
    return sorted(found.values(), key=lambda p: p.as_posix())


# --------------------------------------------------------------------------- results


@dataclass
class TrialResult:
    """Identity and outcome of one trial, from its ``result.json``.

    ``passed`` is ``reward >= 1.0``: full credit. Partial-credit tasks (reward 0.67) are
    not passed, and ``reward > 0`` would call them passed; use ``reward`` for partial
    credit. ``passed`` and ``reward`` are ``None`` when no reward was recorded (missing is
    not zero). ``errored`` is true when ``exception_info`` names an exception;
    ``timed_out`` when that exception is ``AgentTimeoutError``.
    """

    raw_task_name: str
    task_name: str
    trial_name: str
    model: str | None = None
    harness_version: str | None = None
    reward: float | None = None
    passed: bool | None = None
    exception_type: str | None = None
    errored: bool = False
    timed_out: bool = False
    started_at: str | None = None
    finished_at: str | None = None
    agent_execution_started_at: str | None = None
    agent_execution_seconds: float | None = None
    n_input_tokens: int | None = None
    n_cache_tokens: int | None = None
    n_output_tokens: int | None = None
    cost_usd: float | None = None
    has_result_json: bool = True
    warnings: list[str] = field(default_factory=list)


#: Largest count or line number we pass on: the output writer stores 64-bit integers only.
_MAX_COUNT = 2**63 - 1


def _load_json_object(folder: Path, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """``folder/name`` as a JSON object, or ``(None, problem)`` saying why it is not one.

    A UTF-8 byte order mark is accepted; bytes that are not UTF-8 are replaced (and said
    so in the problem text, with the object still returned); a file whose real location
    lies outside ``folder`` (a symlink out of the trial) is not read.
    """
    path = os.path.join(folder, name)  # a string: this runs once per trial
    try:
        try:  # a file that is no symlink lies in its folder: no lstat needed
            raw = read_regular_bytes(path, follow_symlinks=False)
        except OSError:  # a symlink (or missing, ...): the checked read decides
            if lies_outside(path, folder):
                return None, f"{name} is a symlink out of the trial folder; not read"
            raw = read_regular_bytes(path)
    except FileNotFoundError:
        return None, f"{name} missing"
    except (OSError, ValueError, RuntimeError) as exc:  # permissions, a folder, a loop
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return None, f"{name} unreadable ({reason})"
    # orjson reads what the json module reads or refuses it (a BOM, bad UTF-8, a lone
    # surrogate, NaN, 1e400), but integers beyond 64 bits as floats: 19 digits go to json.
    data, replaced = None, None
    with contextlib.suppress(orjson.JSONDecodeError):
        if _LONG_DIGIT_RUN not in raw.translate(_DIGITS_AS_ZERO):
            data = orjson.loads(raw)
    if data is None:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            text = raw.decode("utf-8-sig", errors="replace")
            replaced = (
                f"{name} is not valid UTF-8 ({exc.reason} at byte {exc.start}); bad bytes replaced"
            )
        text, surrogates = without_lone_surrogates(text)
        if surrogates:
            replaced = f"{name} holds {surrogates} escaped lone surrogate(s); replaced by U+FFFD"
        try:
            data = json.loads(text)
        except ValueError as exc:
            return None, f"{name} is not valid JSON ({exc})"
        except RecursionError:
            return None, f"{name} is not usable JSON (nested too deeply)"
    if not isinstance(data, dict):
        return None, f"{name} is not a JSON object"
    return data, replaced


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGIT_RUN = b"0" * 19
_LONE_SURROGATE_RE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def without_lone_surrogates(text: str) -> tuple[str, int]:
    """JSON ``text`` with escaped lone surrogates (``"\\ud83d"``) replaced by ``"\\ufffd"``.

    The standard JSON decoder turns such an escape into a string no UTF-8 writer can
    store, so a document carrying it could not be written. Returns the text and the
    number of replacements.

    Examples
    --------
    >>> without_lone_surrogates('{"a": "cut \\\\ud83d", "b": "\\\\ud83d\\\\ude00"}')
    ('{"a": "cut \\\\ufffd", "b": "\\\\ud83d\\\\ude00"}', 1)
    """
    if "\\u" not in text:
        return text, 0
    return _LONE_SURROGATE_RE.subn(r"\\ufffd", text)


def _get(data: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _checked_number(value: Any, where: str, warnings: list[str]) -> float | None:
    """A finite number from ``value``; anything else present gives a warning and ``None``.

    A string holding a finite decimal number (``"1.0"``) is read, with a warning: some
    writers quote numbers, and dropping the value would lose a recorded outcome.
    """
    if value is None:
        return None
    number = finite_number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            parsed = math.nan
        if math.isfinite(parsed):
            warnings.append(f"{where} is the string {describe_value(value)}; read as {parsed:g}")
            return parsed
    warnings.append(f"{where} is {describe_value(value)}, not a finite number; ignored")
    return None


def _checked_count(value: Any, where: str, warnings: list[str]) -> int | None:
    """A token count (a non-negative number below 2**63, truncated to an integer)."""
    if value is None:
        return None
    number = finite_number(value)
    if number is not None and 0 <= number <= _MAX_COUNT:
        return int(number)
    warnings.append(f"{where} is {describe_value(value)}, not a token count; ignored")
    return None


def _checked_time(value: Any, where: str, warnings: list[str]) -> str | None:
    """An ISO 8601 timestamp string; a present value that is not one is warned about."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str) and parse_iso_time(value) is not None:
        return value
    warnings.append(f"{where} is {describe_value(value)}, not an ISO 8601 timestamp; ignored")
    return None


def _trial_folder_task(trial_dir: Path) -> str:
    name = trial_dir.name
    return name.rsplit("__", 1)[0] if "__" in name else name


_CONTROL_CHARACTER_RE = re.compile(r"[\x00-\x1f]")
#: A task name is a folder name: at most this many UTF-8 bytes, leaving room in a
#: document's file name for the trial suffix and ``.retrieval_events.json``.
_MAX_TASK_NAME_BYTES = 200


def _unusable_task_name(name: str) -> str | None:
    """Why ``name`` cannot name a task-definition folder, or ``None`` when it can."""
    if name in (".", ".."):
        return f"is {name!r}"
    if "/" in name or "\\" in name:
        return "contains a path separator"
    if _CONTROL_CHARACTER_RE.search(name):
        return "contains control characters"
    if len(name.encode("utf-8")) > _MAX_TASK_NAME_BYTES:
        return f"is longer than {_MAX_TASK_NAME_BYTES} bytes"
    return None


#: Largest reward magnitude still read: rewards are scores in [0, 1] (a value somewhat
#: outside is kept with a warning, e.g. a percentage); anything beyond this (``1e308``) is
#: a broken value that would overflow every sum and difference taken over it: ignored.
_MAX_PLAUSIBLE_REWARD = 100.0


def _reward_from_file(trial_dir: Path) -> float | None:
    path = trial_dir / "verifier" / "reward.txt"
    try:
        if lies_outside(path, trial_dir):
            return None  # a symlink out of the trial folder: never read
        text = read_regular_bytes(path, limit=4096).decode("utf-8-sig").strip()
        reward = finite_number(float(text))
    except (OSError, UnicodeDecodeError, ValueError, RuntimeError):
        return None
    return reward if reward is not None and abs(reward) <= _MAX_PLAUSIBLE_REWARD else None


def _exception_type(info: Any, warnings: list[str]) -> str | None:
    """The exception a trial ended with (``None``: it ended normally).

    An object names it under ``exception_type`` (``"UnknownException"`` when it does not);
    a bare string is taken as the type when it looks like one; any other non-empty value
    still means the trial failed, with a warning.
    """
    if info is None:
        return None
    if isinstance(info, dict):
        return _text(info.get("exception_type")) or "UnknownException"
    if isinstance(info, str) and info.strip():
        name = info.strip()
        warnings.append(f"exception_info is the string {describe_value(info)}, not an object")
        return name if _EXCEPTION_NAME_RE.match(name) else "UnknownException"
    if not info:  # "", [], 0, false
        warnings.append(f"exception_info is {describe_value(info)}; read as no exception")
        return None
    warnings.append(
        f"exception_info is {describe_value(info)}, not an object; trial counted as errored"
    )
    return "UnknownException"


_EXCEPTION_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def read_trial_result(trial_dir: Path) -> TrialResult:
    """Read a trial's ``result.json``; never raises on bad input.

    A missing or unparseable ``result.json`` gives a result named after the trial folder
    (its ``__<id>`` cut; the name may be truncated) with a warning; so does a
    ``task_name`` that cannot name a task folder (a path, control characters, too long).
    When ``result.json`` has no reward, ``verifier/reward.txt`` is used if it holds a
    number (with a warning). A value of the wrong type (a reward ``"NaN"``, a timestamp
    ``17``, a negative token count) is ignored with a warning naming the field; so is an
    out-of-range number (``1e400``, ``NaN``, a 400-digit integer, a reward beyond ±100,
    which no score in [0, 1] comes near); a reward written as a numeric string is read,
    with a warning. A UTF-8 byte order mark is
    accepted; a ``result.json`` that is a symlink out of the trial folder is not read.

    Examples
    --------
    >>> r = read_trial_result(Path("no/such/trial__abc1234"))
    >>> r.task_name, r.reward, r.passed, r.warnings[0]
    ('trial', None, None, 'result.json missing')
    """
    trial_dir = trial_dir if isinstance(trial_dir, Path) else Path(trial_dir)
    warnings: list[str] = []
    data, problem = _load_json_object(trial_dir, "result.json")
    if problem is not None:
        warnings.append(problem)

    if data is None:
        folder_task = _trial_folder_task(trial_dir)
        reward = _reward_from_file(trial_dir)
        if reward is not None:
            warnings.append("reward taken from verifier/reward.txt")
        return TrialResult(
            raw_task_name=folder_task,
            task_name=canonical_task_name(folder_task),
            trial_name=trial_dir.name,
            reward=reward,
            passed=None if reward is None else reward >= 1.0,
            has_result_json=False,
            warnings=warnings,
        )

    raw_task, task_name = _task_names(data, trial_dir, warnings)
    trial_name = _text(data.get("trial_name")) or trial_dir.name
    model = _text(_get(data, "config", "agent", "model_name"))
    if model is not None:
        model = model.split("/", 1)[1] if model.startswith("anthropic/") else model
    else:
        model = _text(_get(data, "agent_info", "model_info", "name"))
    version = _text(_get(data, "agent_info", "version"))
    if version is not None and version.strip().lower() == "unknown":
        version = None
    exception_type = _exception_type(data.get("exception_info"), warnings)
    reward = _checked_reward(data, trial_dir, exception_type, warnings)
    agent_start, seconds = _agent_timing(data, warnings)
    agent_result = _object(data.get("agent_result"))
    counts = {
        name: _checked_count(agent_result.get(name), f"result.json agent_result.{name}", warnings)
        for name in ("n_input_tokens", "n_cache_tokens", "n_output_tokens")
    }
    cost = _checked_number(
        agent_result.get("cost_usd"), "result.json agent_result.cost_usd", warnings
    )
    if cost is not None and cost < 0:
        warnings.append(f"result.json agent_result.cost_usd is negative ({cost:g}); ignored")
        cost = None
    return TrialResult(
        raw_task_name=raw_task,
        task_name=task_name or canonical_task_name(raw_task),
        trial_name=trial_name,
        model=model,
        harness_version=version,
        reward=reward,
        passed=None if reward is None else reward >= 1.0,
        exception_type=exception_type,
        errored=exception_type is not None,
        timed_out=exception_type == "AgentTimeoutError",
        started_at=_checked_time(data.get("started_at"), "result.json started_at", warnings),
        finished_at=_checked_time(data.get("finished_at"), "result.json finished_at", warnings),
        agent_execution_started_at=agent_start,
        agent_execution_seconds=seconds,
        n_input_tokens=counts["n_input_tokens"],
        n_cache_tokens=counts["n_cache_tokens"],
        n_output_tokens=counts["n_output_tokens"],
        cost_usd=cost,
        has_result_json=True,
        warnings=warnings,
    )


def _task_names(
    data: dict[str, Any], trial_dir: Path, warnings: list[str]
) -> tuple[str, str | None]:
    """The raw and canonical task name, from ``task_name`` or else the trial folder."""
    raw_task = _text(data.get("task_name"))
    task_name = canonical_task_name(raw_task) if raw_task is not None else None
    if raw_task is None:
        raw_task = _trial_folder_task(trial_dir)
        task_name = canonical_task_name(raw_task)
        warnings.append("result.json has no task_name; using the trial folder name")
    elif (why := _unusable_task_name(task_name or "")) is not None:
        task_name = canonical_task_name(_trial_folder_task(trial_dir))
        warnings.append(
            f"result.json task_name {describe_value(raw_task)} {why}, so it cannot name a task "
            f"folder; using the trial folder name {task_name!r}"
        )
    return raw_task, task_name


def _checked_reward(
    data: dict[str, Any], trial_dir: Path, exception_type: str | None, warnings: list[str]
) -> float | None:
    """The reward from ``result.json``, else ``verifier/reward.txt``; absurd ones dropped."""
    reward = _checked_number(
        _get(data, "verifier_result", "rewards", "reward"),
        "result.json verifier_result.rewards.reward",
        warnings,
    )
    if reward is None:
        reward = _reward_from_file(trial_dir)
        if reward is not None:
            warnings.append("result.json has no reward; reward taken from verifier/reward.txt")
        elif exception_type is None:
            # An errored trial often has no verdict; a finished one should have one.
            warnings.append("no reward recorded (result.json nor verifier/reward.txt)")
    if reward is not None and abs(reward) > _MAX_PLAUSIBLE_REWARD:
        warnings.append(f"reward {reward:g} is absurd (beyond ±{_MAX_PLAUSIBLE_REWARD:g}); ignored")
        reward = None
    elif reward is not None and not 0.0 <= reward <= 1.0:
        warnings.append(f"reward {reward:g} lies outside [0, 1]")
    return reward


def _agent_timing(data: dict[str, Any], warnings: list[str]) -> tuple[str | None, float | None]:
    """The agent's start time and its run time in seconds (``None`` when negative)."""
    execution = _object(data.get("agent_execution"))
    agent_start, agent_end = (
        _checked_time(execution.get(key), f"result.json agent_execution.{key}", warnings)
        for key in ("started_at", "finished_at")
    )
    start_moment, end_moment = parse_iso_time(agent_start), parse_iso_time(agent_end)
    seconds = None
    if start_moment is not None and end_moment is not None:
        seconds = (end_moment - start_moment).total_seconds()
        if seconds < 0:
            warnings.append(
                "result.json agent_execution.finished_at is before its started_at; duration unknown"
            )
            seconds = None
    return agent_start, seconds


# --------------------------------------------------------------------------- task folders


class TaskIndex:
    """Index of ``<tasks_root>/<suite>/<task>/`` folders, built once.

    ``tasks_root`` may also be a single suite folder (its children hold ``task.toml``).
    Lookups are case-insensitive and canonicalise the name first.

    Examples
    --------
    >>> index = TaskIndex(Path("benchmarks"))  # doctest: +SKIP
    >>> index.lookup("mcp_envoy-routeconfig-dep-chain-001_AbC123")  # doctest: +SKIP
    ([PosixPath('benchmarks/ccb_design/envoy-...'), PosixPath('benchmarks/csb_sdlc_design/envoy-...')], 'ccb_design')
    """

    def __init__(self, tasks_root: Path) -> None:
        self.root = Path(tasks_root)
        if not self.root.is_dir():
            raise InputError(f"tasks root {self.root} does not exist or is not a folder")
        #: Entries of the task tree skipped (a symlink loop, a suite that cannot be listed).
        self.left_out = LeftOut()
        self._tasks: dict[str, list[tuple[bool, str, Path]]] = {}
        search = _Search(self.left_out)
        for suite in _subdirs(self.root, search):
            suite_path = self.root / suite.name
            if (suite_path / "task.toml").is_file():  # tasks_root is itself a suite folder
                self._add(suite.name, self.root.name, suite_path)
                continue
            for task in _subdirs(suite_path, search):
                self._add(task.name, suite.name, suite_path / task.name)
        for folders in self._tasks.values():  # suites with task.toml first, then by name
            folders.sort(key=lambda item: (not item[0], item[1]))

    def _add(self, task: str, suite: str, path: Path) -> None:
        if printable_path(task + suite) != task + suite:
            return  # not UTF-8: no task name in a result.json can name it
        has_toml = (path / "task.toml").is_file()
        self._tasks.setdefault(task.lower(), []).append((has_toml, suite, path))

    def __len__(self) -> int:
        return len(self._tasks)

    def lookup(self, task_name: str) -> tuple[list[Path], str | None]:
        """Folders of a task (primary first) and its suite; ``([], None)`` when none.

        The suite is the first folder's: one with ``task.toml`` when any has it. A name
        cut short (the trial-folder fallback) resolves when exactly one task starts with it.
        """
        folders = self._tasks.get(task_name.strip().lower())
        if not folders:  # a raw name (prefixed, suffixed), or one cut short
            canonical = canonical_task_name(task_name)
            folders = self._tasks.get(canonical)
            if not folders and len(canonical) >= 16:
                matches = [name for name in self._tasks if name.startswith(canonical)]
                folders = self._tasks[matches[0]] if len(matches) == 1 else None
        if not folders:
            return [], None
        return [path for _, _, path in folders], folders[0][1]

"""Small I/O helpers shared by every layer: atomic writes, canonical JSON, timestamps.

Writes are atomic (a temporary file in the destination folder, then ``os.replace``),
JSON is written with sorted keys so the same input gives byte-identical output, and
timestamps honour ``SOURCE_DATE_EPOCH`` for reproducible builds.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import math
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

from retrieval_lib.errors import InputError, UnsafePathError

__all__ = [
    "load_package_json",
    "atomic_output",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_write_json",
    "dumps_json",
    "json_safe",
    "now_iso",
    "NotRegularFileError",
    "parse_iso_time",
    "read_regular_bytes",
    "safe_component",
    "safe_join",
    "temp_prefix",
    "NAME_MAX",
]


def json_safe(value: Any, ndigits: int | None = None) -> Any:
    """Return ``value`` with NaN/inf turned into ``None`` and numpy scalars into Python ones.

    Floats are rounded to ``ndigits`` when given (rounding happens only when writing).

    Examples
    --------
    >>> json_safe({"a": float("nan"), "b": [1.23456, 2]}, ndigits=2)
    {'a': None, 'b': [1.23, 2]}
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v, ndigits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v, ndigits) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        with contextlib.suppress(ValueError, AttributeError):
            value = value.item()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, ndigits) if ndigits is not None else value
    return value


def dumps_json(value: Any, *, ndigits: int | None = None, indent: int | None = 2) -> str:
    """Serialise ``value`` deterministically (sorted keys, NaN as null, trailing newline)."""
    return (
        json.dumps(
            json_safe(value, ndigits),
            indent=indent,
            sort_keys=True,
            ensure_ascii=False,
            allow_nan=False,
        )
        + "\n"
    )


@functools.lru_cache(maxsize=1)
def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: Longest file name (in bytes) the usual file systems (ext4, XFS, btrfs, tmpfs) accept.
NAME_MAX = 255
_TEMP_TAIL_BYTES = 96  # of a long name, the end kept in its temporary name (its suffixes)


def temp_prefix(name: str) -> str:
    """The prefix of the hidden temporary file an atomic write of ``name`` uses.

    ``.<name>.`` (then 8 random characters and ``.tmp``) while that fits in
    :data:`NAME_MAX` bytes; for a longer name (a 240-character config folder gives a
    248-byte dataset file name) ``.<16 hex digits of its SHA-256>~<its last bytes>.``,
    so the temporary name stays short and still ends like the target (``.parquet``,
    ``.retrieval_events.json``: how the sweep of orphaned temporaries recognises them).

    Examples
    --------
    >>> temp_prefix("run_retrieval_summary.json")
    '.run_retrieval_summary.json.'
    >>> long = temp_prefix("c" * 240 + ".parquet")
    >>> len(long) + len("abcdefgh.tmp") <= NAME_MAX, long.endswith("ccc.parquet.")
    (True, True)
    """
    prefix = f".{name}."
    if len(os.fsencode(prefix)) + len("12345678.tmp") <= NAME_MAX:
        return prefix
    digest = hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    tail = name
    while len(os.fsencode(tail)) > _TEMP_TAIL_BYTES:
        tail = tail[1:]
    return f".{digest}~{tail}."


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (temp file in the same folder, then rename).

    The temporary file's name stays within :data:`NAME_MAX` bytes whatever the length of
    the target's name (:func:`temp_prefix`).
    """
    with atomic_output(path) as handle:
        handle.write(data)
    return Path(path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` with, piece by piece; ``path`` appears only whole.

    The pieces go to a temporary file in the same folder (its name within
    :data:`NAME_MAX` bytes, :func:`temp_prefix`), renamed over ``path`` when the block
    ends without an exception and removed otherwise: for an output too large to hold
    in memory at once (a run's metrics table).

    Examples
    --------
    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "out.bin"
    >>> with atomic_output(target) as handle:
    ...     _ = handle.write(b"ab")
    ...     target.exists()
    False
    >>> target.read_bytes()
    b'ab'
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=temp_prefix(target.name), suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates the file 0600; give it the mode an ordinary open() would.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            # No fsync: rename is atomic against a crashed or killed process, which is
            # the failure we guard against; fsync per file would dominate run time.
            yield handle
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(
    path: str | os.PathLike[str], value: Any, *, ndigits: int | None = None
) -> Path:
    """Write ``value`` as deterministic JSON to ``path`` atomically."""
    return atomic_write_text(path, dumps_json(value, ndigits=ndigits))


def now_iso() -> str:
    """Current UTC time as ISO 8601, or ``SOURCE_DATE_EPOCH`` when that is set."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip():
        try:
            moment = datetime.fromtimestamp(int(epoch), tz=timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise InputError(
                f"SOURCE_DATE_EPOCH must be a whole number of seconds since 1970, got {epoch!r}"
            ) from None
    else:
        moment = datetime.now(tz=timezone.utc)
    return moment.replace(microsecond=0).isoformat().replace("+00:00", "Z")


# The ISO 8601 forms every supported Python reads alike: a date, an optional time (hours,
# minutes, seconds, any number of fractional digits), an optional ``Z`` or ``+HH[:MM]``.
# ``datetime.fromisoformat`` alone accepts more on 3.11+ than on 3.10 (``Z``, 7+ digit
# fractions, ``+HHMM``), so the same trace would parse differently by interpreter.
_ISO_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:(?P<sep>[T ])(?P<clock>\d{2}(?::\d{2}(?::\d{2})?)?)(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)


def parse_iso_time(value: Any) -> datetime | None:
    """Parse an ISO 8601 timestamp to an aware datetime (naive times are UTC); None if not one.

    The same on Python 3.10 to 3.13: ``Z`` is UTC, fractions beyond microseconds are
    truncated, ``+HHMM`` and ``+HH`` offsets are read as ``+HH:MM``.

    Examples
    --------
    >>> parse_iso_time("2026-01-02T03:04:05.1234567Z").isoformat()
    '2026-01-02T03:04:05.123456+00:00'
    >>> parse_iso_time("2026-01-02 03:04+0130").isoformat()
    '2026-01-02T03:04:00+01:30'
    >>> parse_iso_time("2026-01-02").isoformat(), parse_iso_time("yesterday")
    ('2026-01-02T00:00:00+00:00', None)
    """
    if not isinstance(value, str):
        return None
    match = _ISO_TIME.fullmatch(value.strip())
    if match is None:
        return None
    text = match["date"]
    if match["clock"]:
        text += "T" + match["clock"]
        if match["fraction"]:
            text += "." + match["fraction"][:6].ljust(6, "0")
    zone = match["zone"]
    if zone:
        if zone in "Zz":
            zone = "+00:00"
        elif len(zone) == 3:
            zone += ":00"
        elif ":" not in zone:
            zone = f"{zone[:3]}:{zone[3:]}"
        if not match["clock"]:
            text += "T00:00"
        text += zone
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:  # out-of-range fields: month 13, hour 25, offset 24:00
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def safe_component(part: str) -> str:
    """``part`` as the single path component :func:`safe_join` writes it under.

    Separators (``/`` and ``\\``) and NUL become ``_``. Readers that look a name up on
    disk (a config folder of an events folder) must use this too, or a name with a
    backslash is written under one name and looked for under another.

    Raises
    ------
    UnsafePathError
        ``part`` is empty, ``.`` or ``..``.

    Examples
    --------
    >>> safe_component("mcp" + chr(92) + "remote"), safe_component("a/b")
    ('mcp_remote', 'a_b')
    """
    name = str(part).replace("/", "_").replace("\\", "_").replace("\x00", "_")
    if name in ("", ".", ".."):
        raise UnsafePathError(f"unsafe path component {part!r}")
    return name


def safe_join(root: str | os.PathLike[str], *parts: str) -> Path:
    """Join ``parts`` under ``root`` and refuse any result that escapes ``root``.

    Each part is reduced to a single safe path component: separators, ``..`` and
    leading dots cannot steer a write elsewhere.

    Examples
    --------
    >>> safe_join("/out", "cfg", "../../etc/passwd").as_posix()
    '/out/cfg/.._.._etc_passwd'
    """
    base = Path(root).resolve()
    cleaned = [safe_component(part) for part in parts]
    candidate = base.joinpath(*cleaned).resolve()
    if base != candidate and base not in candidate.parents:
        raise UnsafePathError(f"{candidate} escapes {base}")
    return candidate


class NotRegularFileError(OSError):
    """An input path that is not a regular file (a FIFO, a device, a socket, a folder).

    An :class:`OSError` whose ``strerror`` says what the path is, so every reader that
    already reports OS errors names it without a special case.
    """


def file_kind(mode: int) -> str:
    """What a ``st_mode`` describes, for messages ("a FIFO", "a character device", ...).

    Examples
    --------
    >>> import stat
    >>> file_kind(stat.S_IFIFO), file_kind(stat.S_IFREG)
    ('a FIFO', 'a regular file')
    """
    for test, kind in (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def read_regular_bytes(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most ``limit``); anything else is refused unread.

    The file is opened without blocking and checked with ``fstat`` before any byte is
    read, so a FIFO (which would wait forever for a writer) or a device such as
    ``/dev/zero`` (which never ends) is refused at once, and a path swapped for one
    between a check and the read is caught too.

    Raises
    ------
    NotRegularFileError
        The path is a FIFO, a device or a socket (``strerror`` says which).
    IsADirectoryError
        The path is a folder.
    OSError
        Any other reason it cannot be opened (missing, permissions, a symlink loop).

    Examples
    --------
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.mkfifo(os.path.join(folder, "result.json"))
    >>> read_regular_bytes(os.path.join(folder, "result.json"))
    Traceback (most recent call last):
    ...
    retrieval_lib.io.NotRegularFileError: [Errno 22] is a FIFO, not a regular file: ...
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                errno.EINVAL, f"is {file_kind(mode)}, not a regular file", os.fspath(path)
            )
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1  # the file object owns it now
            return handle.read() if limit is None else handle.read(limit)
    finally:
        if fd >= 0:
            os.close(fd)


@functools.cache
def load_package_json(package: str, relative_path: str) -> Any:
    """Read a JSON file shipped inside ``package`` (e.g. a JSON Schema), cached.

    Examples
    --------
    >>> load_package_json("retrieval_lib.events", "schema/retrieval_events.schema.json")["title"]
    'Retrieval-event document'
    """
    from importlib import resources

    text = resources.files(package).joinpath(relative_path).read_text(encoding="utf-8")
    return json.loads(text)

"""Small I/O helpers shared by every layer: atomic writes, canonical JSON, timestamps,
the one path-containment check (:func:`lies_outside`).

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
import random
import re
import stat
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
    "file_sha256",
    "finite_number",
    "json_safe",
    "lies_outside",
    "now_iso",
    "os_reason",
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

    The temporary file's name fits :data:`NAME_MAX` (:func:`temp_prefix`); it is created
    with ``O_EXCL`` and mode ``0o666``, so the umask (and a folder's default ACL) applies
    as for an ordinary ``open()``. A missing folder is created.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> atomic_write_bytes(folder / "sub" / "a.json", b"{}").read_bytes()
    b'{}'
    >>> sorted(p.name for p in (folder / "sub").iterdir())  # no temporary file left
    ['a.json']
    """
    target = os.fspath(path)
    fd, tmp = _open_temporary(target)
    try:
        try:
            # No fsync: rename is atomic against a crashed or killed process, which is
            # the failure we guard against; fsync per file would dominate run time.
            written = os.write(fd, data)
            while written < len(data):  # a short write: the rest
                written += os.write(fd, memoryview(data)[written:])
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path if isinstance(path, Path) else Path(target)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` with, piece by piece; ``path`` appears only whole.

    The pieces go to a temporary file made as :func:`atomic_write_bytes` makes it, renamed
    over ``path`` when the block ends without an exception and removed otherwise: for an
    output too large to hold in memory at once (a run's metrics table).

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
    target = os.fspath(path)
    fd, tmp = _open_temporary(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


#: Random temporary names tried before an atomic write gives up (as ``tempfile``).
_TEMP_ATTEMPTS = 100


def _open_temporary(target: str) -> tuple[int, str]:
    """``(descriptor, name)`` of a new temporary file beside ``target``, its folder made
    when missing."""
    folder, name = os.path.split(target)
    prefix = os.path.join(folder, temp_prefix(name))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for attempt in range(_TEMP_ATTEMPTS):
        # ``.<name>.<8 hex digits>.tmp``, the shape completion.remove_orphaned_temporaries
        # sweeps; ``random`` is reseeded in a forked child and O_EXCL settles any clash
        tmp = f"{prefix}{random.getrandbits(32):08x}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except FileNotFoundError:
            if attempt or not folder or os.path.isdir(folder):
                raise
            os.makedirs(folder, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                return os.open(tmp, flags, 0o666), tmp
    raise FileExistsError(errno.EEXIST, "no free temporary file name", prefix)


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


# ISO 8601 as every supported Python reads it alike (``fromisoformat`` alone accepts ``Z``,
# 7+ fraction digits and ``+HHMM`` on 3.11+ only): a date, an optional time, a zone.
_ISO_TIME = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:(?P<sep>[T ])(?P<clock>\d{2}(?::\d{2}(?::\d{2})?)?)(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
)


# The forms traces (zoned) and result.json (naive) write, which ``fromisoformat`` reads
# alike on 3.10 to 3.13 once ``Z`` is spelt ``+00:00``: no rewriting needed.
_PLAIN_ISO_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3}(?:\d{3})?)?(?:Z|[+-]\d{2}:\d{2})?",
    re.ASCII,
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
    return _parse_iso_text(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=4096)  # a trial's times are read by its parser, then its events
def _parse_iso_text(value: str) -> datetime | None:
    if _PLAIN_ISO_TIME.fullmatch(value):
        text = value[:-1] + "+00:00" if value[-1] == "Z" else value
    else:
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


def lies_outside(path: str | os.PathLike[str], folder: str | os.PathLike[str]) -> bool:
    """Whether ``path`` really lies outside ``folder`` once symlinks are resolved.

    The package's one containment check: a trial's files, a trace, a subagent
    trajectory, an output folder. Containment is by whole components (``/a/bc`` is not
    in ``/a/b``); ``path`` need not exist (the part that does is resolved). A path below
    ``folder`` by name, without ``..``, is resolved only if a component below ``folder``
    is a symlink (one ``lstat`` each).

    Raises
    ------
    ValueError
        A NUL byte in a path that has to be resolved (callers also catch ``OSError``
        and ``RuntimeError``, which resolving a symlink loop raises on some Pythons).

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / "trial").mkdir()
    >>> (root / "trial" / "result.json").symlink_to("/etc/hostname")
    >>> lies_outside(root / "trial" / "result.json", root / "trial")
    True
    >>> lies_outside(root / "trial" / "agent" / "x.txt", root / "trial")
    False
    """
    # String operations, not pathlib: this runs for every file a trial reads.
    path_text, folder_text = os.fspath(path), os.fspath(folder).rstrip("/")
    if path_text.startswith(folder_text + "/"):
        parts = path_text[len(folder_text) + 1 :].split("/")
        if ".." not in parts:
            current = folder_text
            for part in parts:
                current = f"{current}/{part}"
                if os.path.islink(current):
                    break
            else:
                return False
    real_folder = os.path.realpath(folder_text or "/")
    real_path = os.path.realpath(path_text)
    return os.path.commonpath([real_folder, real_path]) != real_folder


def finite_number(value: Any) -> float | None:
    """A finite float from a JSON number read from an input; ``None`` for anything else.

    Booleans, strings, NaN, infinities and an integer beyond float range (a 400-digit
    number) are not numbers here.

    Examples
    --------
    >>> finite_number(3), finite_number(0.5), finite_number(True), finite_number("1")
    (3.0, 0.5, None, None)
    >>> finite_number(float("inf")), finite_number(10**400)
    (None, None)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


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
    leading dots cannot steer a write elsewhere. The result is resolved (symlinks
    followed).

    The resolved folder (``root`` and every part but the last) is remembered per process
    when it is a folder, not a symlink, and checked on each call by its (device, inode):
    the same folder, still no symlink; the last part is resolved in full only when it is
    a symlink (two system calls a call).

    Examples
    --------
    >>> safe_join("/out", "cfg", "../../etc/passwd").as_posix()
    '/out/cfg/.._.._etc_passwd'
    """
    cleaned = [safe_component(part) for part in parts]
    if cleaned:
        root_text = os.fspath(root)
        key = (root_text, *cleaned[:-1])
        known = _RESOLVED_FOLDERS.get(key)
        if known is not None:
            folder, identity = known
            try:
                still = _identity(os.path.join(root_text, *cleaned[:-1]))
            except (OSError, ValueError):
                still = None
            if still == identity:
                candidate = os.path.join(folder, cleaned[-1])
                try:
                    is_link = stat.S_ISLNK(os.lstat(candidate).st_mode)
                except FileNotFoundError:
                    is_link = False
                except (OSError, ValueError):
                    is_link = True  # let the full resolution say what is wrong
                if not is_link:
                    return folder / cleaned[-1]  # cheaper than parsing candidate again
    base = Path(root).resolve()
    candidate_path = base.joinpath(*cleaned).resolve()
    if lies_outside(candidate_path, base):
        raise UnsafePathError(f"{candidate_path} escapes {base}")
    if cleaned:
        _remember_folder(root, cleaned[:-1], base)
    return candidate_path


#: ``(root, *folder parts) -> (resolved folder, its identity)``.
_RESOLVED_FOLDERS: dict[tuple[str, ...], tuple[Path, tuple[int, int]]] = {}
_MAX_RESOLVED_FOLDERS = 4096


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the folder ``path``; ``None`` for a symlink (it may be re-pointed
    in place: resolved each time) or anything else."""
    found = os.lstat(path)
    return (found.st_dev, found.st_ino) if stat.S_ISDIR(found.st_mode) else None


def _remember_folder(root: str | os.PathLike[str], parts: list[str], base: Path) -> None:
    """Remember the resolved ``root/parts`` folder for :func:`safe_join` (if it exists and
    lies inside ``base``)."""
    root_text = os.fspath(root)
    try:
        identity = _identity(os.path.join(root_text, *parts))
        folder = base.joinpath(*parts).resolve()
    except (OSError, ValueError, RuntimeError):
        return  # not there yet (the write creates it) or unusable: resolve next time too
    if identity is None or lies_outside(folder, base):
        return
    if len(_RESOLVED_FOLDERS) >= _MAX_RESOLVED_FOLDERS:
        _RESOLVED_FOLDERS.clear()
    _RESOLVED_FOLDERS[(root_text, *parts)] = (folder, identity)


class NotRegularFileError(OSError):
    """An input path that is not a regular file (a FIFO, a device, a socket, a folder);
    its ``strerror`` says what it is, so readers that report OS errors name it as is."""


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, in hex (read in 1 MiB blocks).

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a"
    >>> _ = path.write_bytes(b"")
    >>> file_sha256(path)[:16]
    'e3b0c44298fc1c14'
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


def os_reason(exc: Exception) -> str:
    """A short reason for an error reaching a path, for messages: a symlink loop named as one.

    Examples
    --------
    >>> import errno
    >>> os_reason(OSError(errno.ELOOP, "Too many levels of symbolic links"))
    'a symlink loop'
    >>> os_reason(OSError(errno.EACCES, "Permission denied")), os_reason(ValueError("NUL byte"))
    ('Permission denied', 'NUL byte')
    """
    if getattr(exc, "errno", None) == errno.ELOOP:
        return "a symlink loop"
    return getattr(exc, "strerror", None) or str(exc)


def read_regular_bytes(
    path: str | os.PathLike[str], limit: int | None = None, *, follow_symlinks: bool = True
) -> bytes:
    """The bytes of a regular file (at most ``limit``); anything else is refused unread
    (with ``follow_symlinks=False``, a symlink too: ``OSError``).

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
    flags |= 0 if follow_symlinks else os.O_NOFOLLOW
    fd = os.open(path, flags)
    try:
        found = os.fstat(fd)
        mode = found.st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                errno.EINVAL, f"is {file_kind(mode)}, not a regular file", os.fspath(path)
            )
        # fstat's size plus one byte (to see the end), then on should the file have grown;
        # a file system that applies O_NONBLOCK to a regular file gets a blocking retry.
        # A read short of what was asked that completes fstat's size is the end (one
        # system call fewer per file); one short of the size (a network or FUSE file
        # system may return less) reads on.
        size = found.st_size
        chunks: list[bytes] = []
        total = 0
        want = size + 1 if limit is None else min(size + 1, limit)
        while want > 0:
            try:
                chunk = os.read(fd, want)
            except BlockingIOError:
                os.set_blocking(fd, True)
                continue
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total == size and len(chunk) < want:
                break
            if limit is not None:
                want = limit - total
            else:
                want = size + 1 - total if total <= size else _READ_CHUNK
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


#: Bytes asked of each read after the first (a file that grew since it was measured).
_READ_CHUNK = 1 << 20


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

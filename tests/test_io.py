import json
import math
import os
from datetime import datetime, timedelta, timezone

import pytest

from retrieval_lib.errors import UnsafePathError
from retrieval_lib.io import (
    atomic_write_json,
    dumps_json,
    json_safe,
    lies_outside,
    now_iso,
    parse_iso_time,
    safe_join,
)


def test_json_safe_turns_nan_and_inf_into_null_and_rounds_only_when_asked():
    value = {"a": float("nan"), "b": [1.23456, float("inf")], "c": 2}
    assert json_safe(value) == {"a": None, "b": [1.23456, None], "c": 2}
    assert json_safe(value, ndigits=2) == {"a": None, "b": [1.23, None], "c": 2}


def test_json_safe_converts_numpy_scalars():
    np = pytest.importorskip("numpy")
    out = json_safe({"x": np.float64(0.5), "n": np.int64(3), "nan": np.float64("nan")})
    assert out == {"x": 0.5, "n": 3, "nan": None}
    assert type(out["n"]) is int


def test_dumps_json_is_deterministic_with_sorted_keys():
    assert dumps_json({"b": 1, "a": 2}) == '{\n  "a": 2,\n  "b": 1\n}\n'


def test_atomic_write_leaves_no_temp_file(tmp_path):
    target = tmp_path / "sub" / "x.json"
    atomic_write_json(target, {"k": math.pi}, ndigits=3)
    assert json.loads(target.read_text()) == {"k": 3.142}
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_now_iso_honours_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    assert now_iso() == "1970-01-02T00:00:00Z"


@pytest.mark.parametrize("part", ["..", ".", ""])
def test_safe_join_refuses_traversal_components(tmp_path, part):
    with pytest.raises(UnsafePathError):
        safe_join(tmp_path, "cfg", part)


def test_safe_join_flattens_separators_so_names_cannot_escape(tmp_path):
    p = safe_join(tmp_path, "cfg", "../../etc/passwd")
    assert p.parent == (tmp_path / "cfg").resolve()
    assert p.name == ".._.._etc_passwd"


def test_atomic_write_gives_the_file_the_usual_mode(tmp_path):
    import os

    target = tmp_path / "x.txt"
    atomic_write_json(target, {})
    mask = os.umask(0)
    os.umask(mask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~mask


# ----------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-02T03:04:05Z", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
        ("2026-01-02T03:04:05.5z", datetime(2026, 1, 2, 3, 4, 5, 500000, tzinfo=timezone.utc)),
        # 3.10's fromisoformat refuses 7 fraction digits, 3.11+ truncates: we truncate
        (
            "2026-01-02T03:04:05.1234567Z",
            datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc),
        ),
        ("2026-01-02 03:04:05,25", datetime(2026, 1, 2, 3, 4, 5, 250000, tzinfo=timezone.utc)),
        (
            "2026-01-02T03:04+0130",
            datetime(2026, 1, 2, 3, 4, tzinfo=timezone(timedelta(hours=1, minutes=30))),
        ),
        (
            "2026-01-02T03:04:05-05",
            datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(-timedelta(hours=5))),
        ),
        ("  2026-01-02T03  ", datetime(2026, 1, 2, 3, tzinfo=timezone.utc)),
        ("2026-01-02", datetime(2026, 1, 2, tzinfo=timezone.utc)),
        ("2026-01-02Z", datetime(2026, 1, 2, tzinfo=timezone.utc)),
        # result.json's naive form: UTC, like every naive time
        (
            "2026-03-01T19:13:10.624996",
            datetime(2026, 3, 1, 19, 13, 10, 624996, tzinfo=timezone.utc),
        ),
        ("2026-03-01T19:13:10.624", datetime(2026, 3, 1, 19, 13, 10, 624000, tzinfo=timezone.utc)),
    ],
)
def test_parse_iso_time_reads_the_same_forms_on_every_python(text, expected):
    moment = parse_iso_time(text)
    assert moment == expected and moment.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-01-02T25:00",
        "2026-01-02T03:04:05+2400",
        "2026-02-30T19:13:10.624996",
        17,
        None,
    ],
)
def test_parse_iso_time_gives_none_for_what_is_not_a_timestamp(text):
    assert parse_iso_time(text) is None


def test_lies_outside_edge_cases(tmp_path, monkeypatch):
    """Containment by whole components, through symlinks at any level, with ``..``."""
    root = tmp_path / "a"
    (root / "b" / "inner").mkdir(parents=True)
    (root / "bc").mkdir()
    (root / "b" / "inner" / "f.txt").write_text("x")
    (root / "bc" / "f.txt").write_text("x")
    b = root / "b"
    # plain paths below the folder, existing or not, and the folder itself
    assert not lies_outside(b / "inner" / "f.txt", b)
    assert not lies_outside(b / "missing" / "deeper.txt", b)
    assert not lies_outside(b, b)
    assert not lies_outside(str(b / "inner") + "/", str(b) + "/")  # trailing slashes
    # a sibling whose name starts with the folder's name is not inside it
    assert lies_outside(root / "bc" / "f.txt", b)
    assert lies_outside(str(root / "bc"), str(b))
    # ``..``: out and back in is inside, out and elsewhere is outside
    assert not lies_outside(b / "inner" / ".." / "inner" / "f.txt", b)
    assert lies_outside(b / ".." / "bc" / "f.txt", b)
    assert lies_outside(b / "inner" / ".." / ".." / "b" / ".." / "bc", b)
    # symlinks: a file or a folder link out is outside, a link that stays in is inside
    (b / "out_file").symlink_to(root / "bc" / "f.txt")
    (b / "out_dir").symlink_to(root / "bc")
    (b / "in_dir").symlink_to(b / "inner")
    (b / "inner" / "up").symlink_to("..")  # relative, resolves to b itself
    assert lies_outside(b / "out_file", b)
    assert lies_outside(b / "out_dir" / "f.txt", b)
    assert lies_outside(b / "out_dir" / "missing.txt", b)
    assert not lies_outside(b / "in_dir" / "f.txt", b)
    assert not lies_outside(b / "inner" / "up" / "inner" / "f.txt", b)
    # a folder reached through a symlink: what counts is where it really is
    (tmp_path / "alias").symlink_to(b)
    assert not lies_outside(tmp_path / "alias" / "inner" / "f.txt", b)
    assert not lies_outside(b / "inner" / "f.txt", tmp_path / "alias")
    assert lies_outside(root / "bc" / "f.txt", tmp_path / "alias")
    # a dangling link is followed by name: where it points decides
    (b / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    assert lies_outside(b / "dangling", b)
    # relative paths are taken from the working folder
    monkeypatch.chdir(root)
    assert not lies_outside("b/inner/f.txt", "b")
    assert lies_outside("bc/f.txt", "b")
    assert lies_outside("b/out_dir/f.txt", os.fspath(b))
    # the filesystem root holds everything
    assert not lies_outside(b / "out_file", "/")


def test_safe_join_refuses_a_component_that_is_a_symlink_out(tmp_path):
    root, elsewhere = tmp_path / "out", tmp_path / "outside"
    root.mkdir()
    elsewhere.mkdir()
    (root / "cfg").symlink_to(elsewhere)
    (root / "inner").symlink_to(root / "real")  # stays inside: fine
    with pytest.raises(UnsafePathError, match="escapes"):
        safe_join(root, "cfg", "x.json")
    assert safe_join(root, "inner", "x.json") == (root / "real" / "x.json").resolve()
    (tmp_path / "outer").mkdir()  # a sibling whose name extends "out" is still outside
    (root / "sib").symlink_to(tmp_path / "outer")
    with pytest.raises(UnsafePathError):
        safe_join(root, "sib")


# ------------------------------------------------- safe_join's remembered folders


def test_safe_join_remembers_a_folder_but_follows_it_when_it_is_swapped(tmp_path):
    """The resolved folder is reused only while root and folder are the same folders."""
    import os

    real_a, real_b = tmp_path / "a", tmp_path / "b"
    (real_a / "cfg").mkdir(parents=True)
    (real_b / "cfg").mkdir(parents=True)
    root = tmp_path / "out"
    root.symlink_to(real_a)
    assert safe_join(root, "cfg", "x.json") == real_a.resolve() / "cfg" / "x.json"
    assert safe_join(root, "cfg", "y.json") == real_a.resolve() / "cfg" / "y.json"  # cached
    root.unlink()
    root.symlink_to(real_b)  # the same names now lead elsewhere: resolved again
    assert safe_join(root, "cfg", "x.json") == real_b.resolve() / "cfg" / "x.json"
    os.rename(real_b / "cfg", real_b / "old")
    (real_b / "cfg").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(UnsafePathError):  # the folder became a link out of the root
        safe_join(root, "cfg", "x.json")


def test_safe_join_refuses_a_known_folder_moved_out_and_linked_back(tmp_path):
    """The folder is the same one (same inode) but now reached through a link that leaves
    the root: refused, not written through."""
    import os

    root, outside = tmp_path / "out", tmp_path / "outside"
    (root / "cfg").mkdir(parents=True)
    outside.mkdir()
    assert safe_join(root, "cfg", "x.json") == (root / "cfg" / "x.json").resolve()  # remembered
    os.rename(root / "cfg", outside / "cfg")
    (root / "cfg").symlink_to(outside / "cfg")
    with pytest.raises(UnsafePathError):
        safe_join(root, "cfg", "x.json")


def test_safe_join_refuses_a_target_that_is_a_link_out_even_in_a_known_folder(tmp_path):
    (tmp_path / "cfg").mkdir()
    assert safe_join(tmp_path, "cfg", "a.json").parent == (tmp_path / "cfg").resolve()
    (tmp_path / "cfg" / "b.json").symlink_to("/etc/hostname")
    with pytest.raises(UnsafePathError):
        safe_join(tmp_path, "cfg", "b.json")
    (tmp_path / "cfg" / "c.json").symlink_to(tmp_path / "cfg" / "a.json")  # a link inside
    assert safe_join(tmp_path, "cfg", "c.json") == (tmp_path / "cfg" / "a.json").resolve()


def test_atomic_write_creates_missing_folders_and_replaces_in_one_rename(tmp_path):
    from retrieval_lib.io import atomic_write_bytes

    target = tmp_path / "x" / "y" / "doc.retrieval_events.json"
    assert atomic_write_bytes(target, b"1") == target
    (tmp_path / "x" / "y" / "keep").write_text("k")
    atomic_write_bytes(str(target), b"2" * 100_000)
    assert target.read_bytes() == b"2" * 100_000
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name, "keep"]


def test_atomic_write_leaves_the_target_and_no_temporary_when_the_write_fails(tmp_path):
    from retrieval_lib.io import atomic_write_bytes

    target = tmp_path / "doc.json"
    target.write_bytes(b"old")

    with pytest.raises(TypeError):  # not bytes: fails after the temporary file exists
        atomic_write_bytes(target, 123)  # type: ignore[arg-type]
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-28T03:15:10.067Z",
        "2026-02-28T03:15:10Z",
        "2026-02-28T03:15:10.123456Z",
        "2026-02-28T03:15:10.123456+05:30",
        "2026-02-28T03:15:10-01:00",
        "2026-02-28T23:59:59.999+00:00",
        "2026-13-28T03:15:10.067Z",  # month 13
        "2026-02-30T03:15:10Z",  # no such day
        "2026-02-28T25:15:10Z",
        "2026-02-28T03:15:10.067+24:00",
        "2026-02-28T03:15:10.06Z",  # two fraction digits: the general path
        "2026-02-28T03:15:10.0671234Z",
        "\u0662026-02-28T03:15:10Z",  # a non-ASCII digit
    ],
)
def test_parse_iso_time_plain_form_reads_as_the_general_rules_do(text):
    # a leading space sends the same text through the general rewriting path
    assert parse_iso_time(text) == parse_iso_time(" " + text)
    assert parse_iso_time(text) is None or parse_iso_time(text).tzinfo is not None


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 300_000])
@pytest.mark.parametrize("limit", [None, 1, 4096, 10**7])
def test_read_regular_bytes_returns_what_a_plain_read_returns(tmp_path, size, limit):
    from retrieval_lib.io import read_regular_bytes

    path = tmp_path / "f.bin"
    data = bytes(i % 251 for i in range(size))
    path.write_bytes(data)
    with open(path, "rb") as handle:
        expected = handle.read() if limit is None else handle.read(limit)
    assert read_regular_bytes(path, limit) == expected


def test_read_regular_bytes_reads_to_the_end_of_a_file_that_grew(tmp_path, monkeypatch):
    import os

    from retrieval_lib import io

    path = tmp_path / "f.bin"
    path.write_bytes(b"a" * 10)
    real_fstat = os.fstat

    def stale_fstat(fd):  # the size seen before the file grew to 10 bytes
        found = real_fstat(fd)
        return os.stat_result((*found[:6], 3, *found[7:10]))

    monkeypatch.setattr(io.os, "fstat", stale_fstat)
    assert io.read_regular_bytes(path) == b"a" * 10
    assert io.read_regular_bytes(path, limit=5) == b"a" * 5


@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_read_regular_bytes_reads_on_after_short_reads(tmp_path, monkeypatch, piece):
    # a network or FUSE file system may return fewer bytes than asked before the end
    import os

    from retrieval_lib import io

    path = tmp_path / "f.bin"
    data = bytes(i % 251 for i in range(10_000))
    path.write_bytes(data)
    real_read = os.read
    monkeypatch.setattr(io.os, "read", lambda fd, n: real_read(fd, min(n, piece)))
    assert io.read_regular_bytes(path) == data
    assert io.read_regular_bytes(path, limit=5000) == data[:5000]


def test_read_regular_bytes_reads_a_whole_file_in_one_call(tmp_path, monkeypatch):
    import os

    from retrieval_lib import io

    path = tmp_path / "f.bin"
    path.write_bytes(b"x" * 5000)
    calls: list[int] = []
    real_read = os.read

    def counted(fd, n):
        calls.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(io.os, "read", counted)
    assert io.read_regular_bytes(path) == b"x" * 5000
    assert calls == [5001]  # the short read that completes fstat's size is the end


def test_atomic_write_tries_another_name_when_a_temporary_name_is_taken(tmp_path, monkeypatch):
    from retrieval_lib import io

    draws = iter([0xABCDEF01, 0xABCDEF01, 0x12345678])
    monkeypatch.setattr(io.random, "getrandbits", lambda bits: next(draws))
    io.atomic_write_bytes(tmp_path / "a.json", b"1")
    (tmp_path / ".b.json.abcdef01.tmp").write_bytes(b"someone else's")  # taken
    io.atomic_write_bytes(tmp_path / "b.json", b"2")
    assert (tmp_path / "b.json").read_bytes() == b"2"
    assert (tmp_path / ".b.json.abcdef01.tmp").read_bytes() == b"someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".b.json.abcdef01.tmp",
        "a.json",
        "b.json",
    ]

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

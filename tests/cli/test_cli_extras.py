"""A command whose optional libraries are missing fails with one line naming the extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import retrieval_lib.cli.kb as kb_command
from retrieval_lib import lazylibs
from retrieval_lib.cli import main

# Runs the CLI in a fresh interpreter in which the named top-level modules cannot be
# imported, as when the extra was never installed: a None entry in sys.modules makes
# `import scipy` (and `import scipy.stats`) raise ModuleNotFoundError and find_spec
# report the module absent.
_BLOCKED_CLI = textwrap.dedent(
    """
    import sys
    for name in sys.argv[1].split(","):
        sys.modules[name] = None
    from retrieval_lib.cli import main
    sys.exit(main(sys.argv[2:]))
    """
)


def _blocked_cli(blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_CLI, blocked, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("blocked", "args", "line"),
    [
        (
            "scipy",
            ["impact", "some/run"],
            "retrieval-lib impact needs the 'stats' extra: pip install 'retrieval_lib[stats]' "
            "(not installed: scipy)",
        ),
        (
            "pingouin",
            ["impact", "some/run"],
            "retrieval-lib impact needs the 'stats' extra: pip install 'retrieval_lib[stats]' "
            "(not installed: pingouin)",
        ),
        (
            "papermill,seaborn",
            ["report", "some/run"],
            "retrieval-lib report needs the 'notebooks' extra: "
            "pip install 'retrieval_lib[notebooks]' (not installed: papermill, seaborn)",
        ),
        (
            "scipy,papermill",
            ["demo", "--out", "nowhere"],
            "retrieval-lib demo needs the 'notebooks' and 'stats' extras: "
            "pip install 'retrieval_lib[notebooks,stats]' (not installed: scipy, papermill)",
        ),
    ],
)
def test_missing_extra_is_one_line_before_any_work(tmp_path, blocked, args, line):
    proc = subprocess.run(
        [sys.executable, "-c", _BLOCKED_CLI, blocked, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [line]
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []  # nothing was written


def test_blocked_library_does_not_stop_commands_that_do_not_need_it():
    proc = _blocked_cli("scipy,pingouin,papermill,matplotlib,seaborn", "synth", "--help")
    assert proc.returncode == 0 and "usage: retrieval-lib synth" in proc.stdout


def test_optional_import_failing_inside_a_command_names_the_extra(monkeypatch, capsys, tmp_path):
    # kb is not in COMMAND_LIBRARIES (most of its sub-commands need no extra): an optional
    # import failing while it runs is reported the same way, as one line.
    def needs_scipy(args):
        import scipy_not_here  # noqa: F401  (stands for a failed `from scipy import stats`)

    def fails(args):
        raise ModuleNotFoundError("No module named 'scipy'", name="scipy")

    monkeypatch.setattr(kb_command, "run", fails)
    assert main(["kb", "runs", "--db", str(tmp_path / "x.sqlite")]) == 1
    err = capsys.readouterr().err
    assert err == (
        "retrieval-lib kb needs the 'stats' extra: pip install 'retrieval_lib[stats]' "
        "(not installed: scipy)\n"
    )
    # an ImportError of anything else is a bug: it is not dressed up as a missing extra
    monkeypatch.setattr(kb_command, "run", needs_scipy)
    with pytest.raises(ModuleNotFoundError):
        main(["kb", "runs", "--db", str(tmp_path / "x.sqlite")])


def test_lazylibs_raise_missing_extra_error(monkeypatch):
    lazylibs.pingouin.cache_clear()
    monkeypatch.setitem(sys.modules, "pingouin", None)  # import of pingouin halted
    try:
        with pytest.raises(lazylibs.MissingExtraError) as exc:
            lazylibs.pingouin()
        assert (exc.value.module, exc.value.extra) == ("pingouin", "stats")
    finally:
        lazylibs.pingouin.cache_clear()

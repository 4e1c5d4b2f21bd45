"""Exit codes as documented, for every command (issue 21, item 5 and its acceptance).

0 success, 1 failure (bad input, a failed check or report), 2 usage error (a missing
argument, an unknown or mistyped option, a value of the wrong form or out of range,
``report`` without a run folder). Every error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import pytest

from retrieval_lib.cli import build_parser, main

# Every command and nested command, as its argv prefix.
COMMANDS = [
    ["normalize"],
    ["validate"],
    ["evaluate"],
    ["impact"],
    ["report"],
    ["run"],
    ["study"],
    ["demo"],
    ["synth"],
    ["kb"],
    ["kb", "ingest"],
    ["kb", "aggregate"],
    ["kb", "compare"],
    ["kb", "runs"],
    ["kb", "delete"],
    ["trec-eval"],
    ["export-trec"],
]


def _exit(argv: list[str]) -> int:
    """The exit code of ``retrieval-lib ARGV`` run in this process."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def _one_line_error(err: str, command: str) -> None:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"retrieval-lib {command}: error: ".replace("  ", " ")), err


def test_the_list_covers_every_command():
    parser = build_parser()
    top = next(a for a in parser._actions if a.dest == "command").choices
    listed = {argv[0] for argv in COMMANDS}
    assert listed == set(top)
    kb = next(a for a in top["kb"]._actions if a.choices and a.dest != "help").choices
    assert {argv[1] for argv in COMMANDS if len(argv) == 2} == set(kb)


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_help_exits_0(argv, capsys):
    assert _exit([*argv, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: retrieval-lib {' '.join(argv)}")


@pytest.mark.parametrize(
    "argv", [a for a in COMMANDS if a not in (["demo"], ["kb", "runs"])], ids=" ".join
)
def test_a_missing_required_argument_is_a_usage_error(argv, capsys, tmp_path, monkeypatch):
    # demo and kb runs take no required argument; report needs a run folder or run_dir
    # in -f
    monkeypatch.chdir(tmp_path)
    assert _exit(argv) == 2
    _one_line_error(capsys.readouterr().err, " ".join(argv))  # argparse names the subcommand


def test_report_without_a_path_is_a_usage_error(capsys, tmp_path, monkeypatch):
    # issue 21, item 5: it used to exit 1
    monkeypatch.chdir(tmp_path)
    assert _exit(["report"]) == 2
    err = capsys.readouterr().err
    _one_line_error(err, "report")
    assert "give an evaluated run folder (PATH) or run_dir" in err


# A wrong value of each command: (argv, documented exit code, a word of the message).
WRONG_VALUES = [
    (["normalize", "RUN", "--tasks-root", "T", "--workers", "0"], 2, "--workers"),
    (["validate", "no/such/file.json"], 1, "no such file"),
    (["evaluate", "RUN", "--k", "x"], 2, "--k"),
    (["impact", "RUN", "--seed", "-1"], 2, "at least 0"),
    (["impact", "RUN", "--n-boot", "0"], 2, "at least 1"),
    (["impact", "RUN", "--combine", "median"], 2, "--combine"),
    (["report", "no/such/run"], 1, "no such run folder"),
    (["report", "--notebook", "no_such_notebook"], 1, "unknown notebook"),
    (["run", "RUN", "--tasks-root", "T", "--workers", "0"], 2, "--workers"),
    (["study", "RUN", "--tasks-root", "T", "--workers", "-2"], 2, "--workers"),
    (["study", "RUN", "--tasks-root", "T", "--config-map", "nofamily"], 1, "NAME=FAMILY"),
    (["synth", "--out", "x", "--seed", "-1"], 2, "at least 0"),
    (["synth", "--out", "x", "--scale", "huge"], 2, "--scale"),
    (["kb", "compare", "a", "b", "--bootstrap", "0"], 2, "at least 1"),
    (["kb", "compare", "a", "b", "--seed", "x"], 2, "--seed"),
    (["kb", "aggregate", "r", "--db", "no/such/dir/eval.sqlite"], 1, ""),
    (["kb", "runs", "--db", "no/such/dir/eval.sqlite"], 1, ""),
    (["kb", "delete", "r", "--db", "no/such/dir/eval.sqlite"], 1, "does not exist"),
    (["trec-eval", "no/qrels", "no/run"], 1, "no such file"),
    (["trec-eval", "q", "r", "-m", "bpref"], 2, "unsupported measure 'bpref'; supported:"),
    (["trec-eval", "q", "r", "-m", "P.x"], 2, "unsupported measure"),
    (["trec-eval", "q", "r", "-l", "0"], 2, "at least 1"),
    (["export-trec", "no/such/run", "--out", "x"], 1, "no such file or folder"),
    (["export-trec", "run", "--out", "x", "--config-map", "nofamily"], 1, "NAME=FAMILY"),
]


@pytest.mark.parametrize(("argv", "code", "word"), WRONG_VALUES, ids=lambda v: str(v))
def test_a_wrong_value_exits_as_documented_in_one_line(
    argv, code, word, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert _exit(argv) == code
    err = capsys.readouterr().err
    # a usage error names the (nested) command, a failure the top-level one
    command = " ".join(argv[:2]) if argv[0] == "kb" and code == 2 else argv[0]
    _one_line_error(err, command)
    assert word in err


def test_demo_into_a_file_fails_in_one_line(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert _exit(["demo", "--out", str(blocker)]) == 1
    _one_line_error(capsys.readouterr().err, "demo")


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["normalize", "RUN", "--tasks-root", "T", "--wokers", "2"], "--workers"),
        (["validate", "x.json", "--quiet"], ""),
        (["evaluate", "RUN", "--kk", "1"], "--k"),
        (["impact", "RUN", "--seeed", "3"], "--seed"),
        (["impact", "RUN", "--nboot", "3"], "--n-boot"),
        (["report", "RUN", "--notebok", "x"], "--notebook"),
        (
            ["run", "RUN", "--tasks-root", "T", "--strict-harnes-version"],
            "--strict-harness-version",
        ),
        (["study", "RUN", "--tasks-root", "T", "--no-reprot"], "--no-report"),
        (["demo", "--outt", "x"], "--out"),
        (["synth", "--out", "x", "--sed", "1"], "--seed"),
        (["kb", "ingest", "r.jsonl", "--golden", "g.yaml", "--chunk", "c"], ""),
        (["kb", "compare", "a", "b", "--bootstarp", "5"], "--bootstrap"),
        (["kb", "runs", "--jsn"], "--json"),
        (["kb", "delete", "r", "--jsno"], "--json"),
        (["trec-eval", "q", "r", "--per-querry"], "--per-query"),
        (["export-trec", "run", "--out", "x", "--confg-map", "a=b"], "--config-map"),
    ],
    ids=lambda v: str(v),
)
def test_a_mistyped_option_is_a_usage_error_with_a_suggestion(
    argv, suggestion, capsys, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert _exit(argv) == 2
    err = capsys.readouterr().err
    command = " ".join(argv[:2]) if argv[0] == "kb" else argv[0]
    _one_line_error(err, command)
    if suggestion:
        assert f"did you mean '{suggestion}'" in err

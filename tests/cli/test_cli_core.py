"""The CLI skeleton: --version, --help on every command, exit codes, validate."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from retrieval_lib import __version__
from retrieval_lib.cli import COMMAND_MODULES, build_parser, main
from retrieval_lib.events.document import minimal_document


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retrieval_lib", *args], capture_output=True, text=True
    )


def test_version_flag():
    proc = _cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"retrieval-lib {__version__}"


def test_every_command_module_is_registered():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    # a module is named after its command, "-" written "_" (trec_eval: trec-eval)
    expected = {m.rsplit(".", 1)[1].replace("_", "-") for m in COMMAND_MODULES}
    assert set(sub.choices) == expected


@pytest.mark.parametrize("module", COMMAND_MODULES)
def test_help_on_every_command_exits_zero(module, capsys):
    name = module.rsplit(".", 1)[1].replace("_", "-")
    with pytest.raises(SystemExit) as exc:
        main([name, "--help"])
    assert exc.value.code == 0
    assert "usage: retrieval-lib " + name in capsys.readouterr().out


def test_unknown_command_is_a_usage_error():
    assert _cli("frobnicate").returncode == 2


def test_validate_accepts_good_and_flags_bad_documents(tmp_path):
    good = tmp_path / "a.retrieval_events.json"
    good.write_text(json.dumps(minimal_document(run_id="r", task_name="a", config_name="c")))
    bad = tmp_path / "b.retrieval_events.json"
    doc = minimal_document(run_id="r", task_name="b", config_name="c")
    doc["schema_version"] = "3.0"
    bad.write_text(json.dumps(doc))
    assert main(["validate", str(good)]) == 0
    proc = _cli("validate", str(tmp_path))
    assert proc.returncode == 1
    assert "1 valid, 1 invalid" in proc.stdout
    assert "major version 3" in proc.stdout


def test_validate_of_a_missing_path_fails_cleanly(tmp_path):
    proc = _cli("validate", str(tmp_path / "missing.json"))
    assert proc.returncode == 1
    assert "no such file" in proc.stderr and "Traceback" not in proc.stderr


def test_a_negative_seed_is_a_usage_error():
    proc = _cli("impact", ".", "--seed", "-1")
    assert proc.returncode == 2
    assert "must be an integer of at least 0" in proc.stderr


def test_an_unwritable_output_is_a_clean_failure(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    run = tmp_path / "r1" / "baseline" / "2026-01-01__00-00-00" / "t__aaaaaaa"
    (run / "agent").mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"task_name": "t", "trial_name": "t__aaaaaaa"}))
    proc = _cli(
        "normalize",
        str(tmp_path / "r1"),
        "--tasks-root",
        str(tmp_path),
        "--out",
        str(blocker / "sub"),
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "Not a directory" in proc.stderr  # the trial is reported failed, with the cause


def test_a_bad_source_date_epoch_is_named(monkeypatch):
    from retrieval_lib.errors import InputError
    from retrieval_lib.io import now_iso

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "abc")
    with pytest.raises(InputError, match="SOURCE_DATE_EPOCH"):
        now_iso()

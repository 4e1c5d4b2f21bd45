"""The README as a new user reads it (issue 21, item 8).

Without an activation step, the README's ``retrieval-lib ...`` lines gave "command not
found"; the study API snippet failed from the project root without saying its paths were
placeholders; ``jupyter lab`` as root exited ("Use --allow-root") while the README test
added the flag silently; ``study`` on the corpus overwrote the demo's ``reports/study/``;
no expected durations; no word on the extra the ``kb`` commands need.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_readme_commands import documented_commands

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
ENVIRONMENT_COMMANDS = {"retrieval-lib", "jupyter", "pip", "python", "pytest"}


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_environment_is_activated_before_a_bare_command():
    commands = [c for c in documented_commands() if c.source.startswith("README.md")]
    activation = next(
        (i for i, c in enumerate(commands) if c.text in (". .venv/bin/activate",)), None
    )
    assert activation is not None, "no `. .venv/bin/activate` line"
    for command in commands[:activation]:
        for segment in command.text.split(" && "):
            program = shlex.split(segment)[0]
            assert program not in ENVIRONMENT_COMMANDS, (
                f"{command.source}: `{program}` before the activation line is "
                "'command not found' for a user"
            )
    # the first two commands (install + demo, install + tests) come before it and work
    # without it
    assert activation >= 2


def test_the_readme_names_expected_durations_for_the_demo_and_the_tests():
    intro = README[: README.index("## What it does")]
    assert re.search(r"demo itself\s+\d+[–-]\d+\s+minutes", intro)
    assert re.search(r"test suite takes .*minutes", intro, flags=re.S)


def test_allow_root_is_explained_where_jupyter_lab_is_started():
    lab = _section("Exploring in JupyterLab")
    assert "jupyter lab" in lab and "--allow-root" in lab and "root" in lab


def test_the_kb_section_names_its_extra():
    kb = _section("RAG knowledge-base evaluation")
    assert "'.[kb]'" in kb


def test_each_set_of_runs_has_its_own_output_folder():
    """demo, run and study write <out>/study/: two input sets must not share an --out."""
    inputs_by_out: dict[str, set[str]] = {}
    for command in documented_commands():
        if command.synopsis:
            continue
        for segment in command.text.split(" && "):
            argv = shlex.split(segment)
            name = Path(argv[0]).name
            if name != "retrieval-lib" or len(argv) < 2 or argv[1] not in ("demo", "run", "study"):
                continue
            out = argv[argv.index("--out") + 1] if "--out" in argv else "reports"
            paths = [a for a in argv[2:] if not a.startswith("-")]
            inputs = "demo" if argv[1] == "demo" else paths[0]
            inputs_by_out.setdefault(out.rstrip("/"), set()).add(inputs)
    assert inputs_by_out, "no demo/run/study command found"
    shared = {out: inputs for out, inputs in inputs_by_out.items() if len(inputs) > 1}
    assert not shared, f"one --out for several input sets: {shared}"
    assert "say so before replacing it" in README


def test_python_snippets_run_from_the_project_root_or_say_they_are_placeholders(tmp_path):
    blocks = _python_blocks()
    assert blocks
    runnable = [b for b in blocks if "placeholder" not in b.splitlines()[0]]
    placeholders = [b for b in blocks if "placeholder" in b.splitlines()[0]]
    # a placeholder block names its placeholder paths on its first line
    for block in placeholders:
        first = block.splitlines()[0]
        for path in re.findall(r'"([\w./-]+/[\w./-]+)"', block):
            if not path.startswith("examples/"):
                assert path.split("/")[0] in first, (path, first)
    study_blocks = [b for b in runnable if "retrieval_lib.study import load" in b]
    assert study_blocks, "the study API snippet is not runnable"
    project = tmp_path / "project"
    project.mkdir()
    (project / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    script = study_blocks[0].replace("\nstudy.", "\n_ = study.")
    done = subprocess.run(
        [sys.executable, "-c", script + "\nprint(len(study.trials), 'trials')\n"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^\d+ trials$", done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("readme", ["README.md", "examples/kb/README.md"])
def test_readmes_using_the_cli_say_the_environment_is_activated(readme):
    text = (REPO / readme).read_text(encoding="utf-8")
    if "retrieval-lib " in text:
        assert ".venv/bin/activate" in text

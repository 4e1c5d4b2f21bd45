"""Issue 18, items 5-14: no input silently lost, no write outside the documented outputs,
and one bad value costs only its own field.

Every test builds its runs and task definitions under ``tmp_path`` (small copies of the
shapes in ``tests/fixtures``); nothing outside ``tmp_path`` is written. Tests that need a
file mode another user would meet (mode 000) simulate the refusal when run as root and
have a real ``chmod`` twin that runs only as a normal user.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from retrieval_lib.cli import main
from retrieval_lib.errors import InputError
from retrieval_lib.events.document import find_documents, load_document
from retrieval_lib.ground_truth import load_ground_truth
from retrieval_lib.metrics.summary import evaluate_run
from retrieval_lib.normalize import normalize_paths
from retrieval_lib.runs import LeftOut, discover_runs, discover_trials
from retrieval_lib.task_text import parse_unified_diff

REPO = Path(__file__).resolve().parents[1]
ATIF = REPO / "tests" / "traces" / "fixtures" / "merge_trajectory.json"
BATCH = "2026-01-01__00-00-00"
is_root = os.geteuid() == 0


def _trial(
    run: Path,
    config: str,
    name: str,
    task: str,
    *,
    result: Any = None,
    trajectory: Any = None,
) -> Path:
    """One trial folder ``run/config/BATCH/name`` with a result.json and an agent/ folder."""
    folder = run / config / BATCH / name
    (folder / "agent").mkdir(parents=True)
    if result is None:
        result = {
            "task_name": task,
            "trial_name": name,
            "verifier_result": {"rewards": {"reward": 1.0}},
            "started_at": "2026-01-01T00:00:00Z",
        }
    raw = result if isinstance(result, str) else json.dumps(result)
    (folder / "result.json").write_text(raw)
    if trajectory is not None:
        (folder / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    return folder


def _task(root: Path, name: str, files: dict[str, str] | None = None) -> Path:
    folder = root / "suite" / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text("")
    for relative, text in (files or {"tests/ground_truth.json": '{"files": ["b.py"]}'}).items():
        (folder / relative).write_text(text)
    return folder


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _names(out: Path) -> list[str]:
    return sorted(p.name for p in find_documents([out]))


# ----------------------------------------------------------------- 5. a symlink loop


def test_a_self_loop_beside_runs_hides_no_run_and_is_named(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _trial(runs / "r1", "baseline", "t-001__aaaaaaa", "t-001")
    _trial(runs / "r2", "baseline", "t-001__bbbbbbb", "t-001")
    (runs / "loop").symlink_to("loop")  # ln -s loop runs/loop
    left = LeftOut()
    assert discover_runs([runs], left) == [runs / "r1", runs / "r2"]
    assert left.entries() == [(str(runs / "loop"), "a symlink loop")]

    code, out, err = _cli("normalize", str(runs), "--tasks-root", str(tmp_path), "--workers", "1")
    assert f"left out: {runs / 'loop'}: a symlink loop" in err
    assert "2 trials: 2 documents" in out and "1 input entries left out" in out
    assert code == 1  # something was skipped: the exit status says so


@pytest.mark.parametrize("level", ["config", "batch"])
def test_a_self_loop_inside_a_run_keeps_every_sibling_trial(tmp_path: Path, level: str) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    _trial(run, "baseline", "t-002__bbbbbbb", "t-002")
    _trial(run, "mcp", "t-001__ccccccc", "t-001")
    folder = run / "baseline" if level == "config" else run / "baseline" / BATCH
    (folder / "aaa-loop").symlink_to("aaa-loop")  # sorts first: hid everything after it
    left = LeftOut()
    trials = discover_trials(run, left)
    assert len(trials) == 3
    assert left.entries() == [(str(folder / "aaa-loop"), "a symlink loop")]
    report = normalize_paths([run], None, out=tmp_path / "out")
    assert (report.trials, report.documents) == (3, 3)
    assert report.left_out == [(str(folder / "aaa-loop"), "a symlink loop")]
    recorded = json.loads(
        (tmp_path / "out" / "r1" / "retrieval_events" / "normalize_left_out.json").read_text()
    )
    relative = folder.relative_to(run).as_posix() + "/aaa-loop"
    assert recorded == {"left_out": [{"path": relative, "reason": "a symlink loop"}]}
    # evaluate carries the list into the run summary, so every report can show it
    result = evaluate_run(tmp_path / "out" / "r1")
    summary = json.loads(result.summary_path.read_text())
    assert summary["counts"]["left_out"] == [{"path": relative, "reason": "a symlink loop"}]


# --------------------------------------------------------- 6. loops in a task folder


def test_a_symlink_loop_in_a_task_folder_fails_no_trial(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    task = _task(tasks, "t-001")
    (task / "loop").symlink_to("loop")
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    _trial(run, "baseline", "t-001__bbbbbbb", "t-001")
    report = normalize_paths([run], tasks, out=tmp_path / "out")
    assert (report.trials, report.failed) == (2, 0)
    for path in find_documents([tmp_path / "out"]):
        doc = load_document(path)
        assert doc["ground_truth"]["files"] == ["b.py"]
        assert "ground truth: loop skipped (a symlink loop)" in doc["coverage"]["degraded_reasons"]


def test_a_symlink_loop_inside_tests_keeps_the_ground_truth(tmp_path: Path) -> None:
    task = _task(tmp_path / "tasks", "t-001")
    (task / "tests" / "aaa").symlink_to("aaa")
    gt = load_ground_truth([task])
    assert gt.files == ["b.py"] and gt.source == "tests/ground_truth.json"
    assert "tests/aaa skipped (a symlink loop)" in gt.warnings


def test_a_fifo_in_tests_is_named_not_read(tmp_path: Path) -> None:
    task = _task(tmp_path / "tasks", "t-001", {"tests/expected_changes.json": "{}"})
    os.mkfifo(task / "tests" / "ground_truth.json")
    gt = load_ground_truth([task])
    assert "tests/ground_truth.json skipped (a FIFO, not read)" in gt.warnings


# ------------------------------------------------------- 7. an unreadable run folder


def _deny_listing(
    monkeypatch: pytest.MonkeyPatch, denied: Path, *, searchable: bool = False
) -> None:
    """os.scandir refuses ``denied``, and os.stat what lies below it, as the kernel refuses
    a non-root user a mode-000 folder; ``searchable``: a mode-100 one (no listing, but
    what lies below is reached by name)."""
    import retrieval_lib.runs as runs_module

    real_scandir, real_stat = os.scandir, os.stat
    inside = os.fspath(denied) + os.sep

    def refused(path: Any) -> PermissionError:
        return PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == os.fspath(denied):
            raise refused(path)
        return real_scandir(path)

    def stat(path: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).startswith(inside):
            raise refused(path)
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(runs_module.os, "scandir", scandir)
    if not searchable:
        monkeypatch.setattr(runs_module.os, "stat", stat)


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    runs = tmp_path / "runs"
    _trial(runs / "good", "baseline", "t-001__aaaaaaa", "t-001")
    _trial(runs / "locked", "baseline", "t-001__bbbbbbb", "t-001")
    return runs, runs / "locked"


def test_an_unreadable_run_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs, locked = _two_runs(tmp_path)
    _deny_listing(monkeypatch, locked)
    report = normalize_paths([runs], None, out=tmp_path / "out")
    assert report.runs == [str(runs / "good")]
    assert report.left_out == [(str(locked), "cannot be listed (Permission denied)")]
    assert "1 input entries left out" in report.summary_line()


@pytest.mark.skipif(is_root, reason="root reads mode-000 folders; simulated in the test above")
def test_an_unreadable_run_folder_is_named_for_real(tmp_path: Path) -> None:
    runs, locked = _two_runs(tmp_path)
    locked.chmod(0)
    try:
        code, _, err = _cli("normalize", str(runs), "--tasks-root", str(tmp_path), "--out",
                            str(tmp_path / "out"), "--workers", "1")  # fmt: skip
    finally:
        locked.chmod(0o755)
    assert f"left out: {locked}: cannot be listed (Permission denied)" in err
    assert code == 1


def test_an_unreadable_trial_folder_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    locked = _trial(run, "baseline", "t-002__bbbbbbb", "t-002")
    _deny_listing(monkeypatch, locked)
    left = LeftOut()
    assert [t.trial_dir.name for t in discover_trials(run, left)] == ["t-001__aaaaaaa"]
    assert left.entries() == [(str(locked), "cannot be listed (Permission denied)")]


def test_a_trial_folder_that_can_be_searched_but_not_listed_is_normalised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # discovery finds agent/ by name, as the readers do
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    hidden = _trial(run, "baseline", "t-002__bbbbbbb", "t-002")
    _deny_listing(monkeypatch, hidden, searchable=True)
    left = LeftOut()
    assert [t.trial_dir.name for t in discover_trials(run, left)] == [
        "t-001__aaaaaaa",
        "t-002__bbbbbbb",
    ]
    assert left.entries() == []
    report = normalize_paths([run], None, out=tmp_path / "out")
    assert report.documents == 2 and report.failed == 0


def test_discovery_finds_a_trial_by_its_agent_folder_without_listing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "r1"
    trial = _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    listed: list[str] = []
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert [t.trial_dir for t in discover_trials(run)] == [trial]
    assert str(trial) not in listed and str(trial.parent) in listed


# ------------------------------------------- 8. an output folder linked out of the run


def test_an_events_folder_linked_out_of_the_run_is_refused_untouched(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    target = tmp_path / "precious"
    (target / "baseline").mkdir(parents=True)
    keep = target / "baseline" / "other.retrieval_events.json"
    keep.write_text("not ours")
    (run / "retrieval_events").symlink_to(target)
    with pytest.raises(InputError, match="outside the run folder .*refusing to write"):
        normalize_paths([run], None)
    assert keep.read_text() == "not ours"  # the stale sweep never deleted through the link
    assert sorted(p.name for p in target.rglob("*")) == ["baseline", "other.retrieval_events.json"]
    code, _, err = _cli("normalize", str(run), "--tasks-root", str(tmp_path), "--workers", "1")
    assert code != 0 and "refusing to write" in err
    # evaluate refuses to write its metrics through the link too
    with pytest.raises(InputError, match="refusing to write the metrics"):
        evaluate_run(run)
    assert keep.read_text() == "not ours"


def test_an_out_folder_linked_elsewhere_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    out = tmp_path / "out"
    (out / "r1").mkdir(parents=True)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "x.retrieval_events.json").write_text("not ours")
    (out / "r1" / "retrieval_events").symlink_to(target)
    with pytest.raises(InputError, match="outside --out"):
        normalize_paths([run], None, out=out)
    assert [p.name for p in target.iterdir()] == ["x.retrieval_events.json"]


# ---------------------------------------------------------- 9. FIFOs are never read


def test_a_fifo_named_result_json_does_not_hang_normalize(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    fifo_trial = _trial(run, "baseline", "t-002__bbbbbbb", "t-002")
    (fifo_trial / "result.json").unlink()
    os.mkfifo(fifo_trial / "result.json")
    bare = run / "baseline" / BATCH / "t-003__ccccccc"  # no agent/: only the FIFO
    bare.mkdir()
    os.mkfifo(bare / "result.json")
    command = [sys.executable, "-m", "retrieval_lib", "normalize", str(run), "--tasks-root",
               str(tmp_path), "--out", str(tmp_path / "out"), "--workers", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "2 trials: 2 documents" in done.stdout, done.stderr
    assert f"left out: {bare}: result.json unreadable (is a FIFO, not a regular file)" in (
        done.stderr
    )
    doc = load_document(
        tmp_path / "out" / "r1" / "retrieval_events" / "baseline" / "t-002.retrieval_events.json"
    )
    assert (
        "result.json: result.json unreadable (is a FIFO, not a regular file)"
        in doc["coverage"]["degraded_reasons"]
    )


def test_fifo_traces_and_reward_are_named_not_waited_on(tmp_path: Path) -> None:
    run = tmp_path / "r1"
    trial = _trial(run, "baseline", "t-001__aaaaaaa", "t-001", result={"task_name": "t-001"})
    os.mkfifo(trial / "agent" / "trajectory.json")
    os.mkfifo(trial / "agent" / "claude-code.txt")
    (trial / "verifier").mkdir()
    os.mkfifo(trial / "verifier" / "reward.txt")
    command = [sys.executable, "-c", "import sys; from retrieval_lib.normalize import "
               "normalize_trial; d = normalize_trial(sys.argv[1], None); import json; "
               "print(json.dumps(d['coverage']['degraded_reasons']))", str(trial)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    reasons = json.loads(done.stdout)
    assert reasons[0] == "no usable trace"
    assert "agent/trajectory.json is a FIFO, not a regular file; not read" in reasons
    assert "agent/claude-code.txt is a FIFO, not a regular file; not read" in reasons


# ------------------------------------------------ 10. a config name with a backslash


def test_a_config_name_with_a_backslash_is_read_back_by_the_study(tmp_path: Path) -> None:
    from retrieval_lib.study.loader import read_evaluated

    run = tmp_path / "r1"
    _trial(run, "base\\line", "t-001__aaaaaaa", "t-001")
    _trial(run, "mcp", "t-001__bbbbbbb", "t-001")
    normalize_paths([run], None, out=tmp_path / "out")
    events = tmp_path / "out" / "r1" / "retrieval_events"
    assert sorted(p.name for p in events.iterdir() if p.is_dir()) == ["base_line", "mcp"]
    evaluate_run(events)
    tables = read_evaluated([events])
    assert sorted(tables.trials["config_name"]) == ["base\\line", "mcp"]
    assert tables.exclusions.empty


# --------------------------------------------- 11. an integer beyond float range


def test_a_400_digit_integer_in_result_json_costs_only_its_field(tmp_path: Path) -> None:
    huge = "9" * 400
    bad = (
        '{"task_name": "t-001", "trial_name": "t-001__aaaaaaa", "verifier_result": '
        f'{{"rewards": {{"reward": {huge}}}}}, "agent_result": {{"n_input_tokens": {huge}, '
        f'"cost_usd": {huge}}}}}'
    )
    _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", "t-001", result=bad)
    _trial(tmp_path / "r2", "baseline", "t-001__bbbbbbb", "t-001")
    report = normalize_paths([tmp_path / "r1", tmp_path / "r2"], None, out=tmp_path / "out")
    assert (report.trials, report.documents, report.failed) == (2, 2, 0)
    doc = load_document(
        tmp_path / "out" / "r1" / "retrieval_events" / "baseline" / "t-001.retrieval_events.json"
    )
    assert doc["outcome"]["reward"] is None and doc["outcome"]["input_tokens"] is None
    assert doc["provenance"]["task_name"] == "t-001"
    reasons = doc["coverage"]["degraded_reasons"]
    assert (
        "result.json: result.json agent_result.n_input_tokens is an integer of 400 digits, "
        "not a token count; ignored" in reasons
    )
    assert any("verifier_result.rewards.reward is an integer of 400 digits" in r for r in reasons)


# ------------------------------------- 12. wrong types and absurd nesting in a trace


def test_a_list_for_cache_read_tokens_costs_only_that_field(tmp_path: Path) -> None:
    trajectory = json.loads(ATIF.read_text())
    trajectory["steps"][1]["metrics"]["extra"]["cache_read_input_tokens"] = [1, 2]
    _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", "t-001", trajectory=trajectory)
    report = normalize_paths([tmp_path / "r1"], None, out=tmp_path / "out")
    assert (report.documents, report.failed) == (1, 0)
    doc = load_document(find_documents([tmp_path / "out"])[0])
    assert [e["tool_name"] for e in doc["events"]][:2] == ["Read", "Read"]  # the calls kept
    assert (
        "trajectory: step #2 metrics.extra.cache_read_input_tokens is a JSON array [1, 2], "
        "not a token count; ignored"
    ) in doc["coverage"]["degraded_reasons"]


def test_a_tool_argument_nested_300_deep_costs_only_that_argument(tmp_path: Path) -> None:
    deep: Any = {"end": 1}
    for _ in range(300):
        deep = {"n": deep}
    trajectory = json.loads(ATIF.read_text())
    call = trajectory["steps"][1]["tool_calls"][0]
    call["function_name"] = "mcp__sourcegraph__sg_read_file"
    call["arguments"] = {"repo": "github.com/o/r", "path": deep}
    _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", "t-001", trajectory=trajectory)
    report = normalize_paths([tmp_path / "r1"], None, out=tmp_path / "out")
    assert (report.documents, report.failed) == (1, 0)
    doc = load_document(find_documents([tmp_path / "out"])[0])
    first = doc["events"][0]
    assert first["tool_name"] == "mcp__sourcegraph__sg_read_file"
    assert first["arguments"] == {"repo": "github.com/o/r", "path": None}
    assert (
        "tool call #0 (mcp__sourcegraph__sg_read_file): argument path "
        "(Recursion limit reached) not kept" in doc["coverage"]["degraded_reasons"]
    )


# ---------------------------------------- 13. out-of-range numbers in task definitions


@pytest.mark.parametrize(
    ("relative", "text", "warning"),
    [
        (
            "tests/ground_truth.json",
            '{"files": ["b.py"], "chunks": [{"file": "b.py", "start_line": 1e30}]}',
            "tests/ground_truth.json: skipped 1 line range(s) with a line number out of range",
        ),
        (
            "tests/expected.diff",
            "--- a/b.py\n+++ b/b.py\n@@ -1,1 +" + "9" * 5000 + ",1 @@\n-x\n+y\n",
            "tests/expected.diff: 1 hunk header(s) with a line number of more than 18 digits",
        ),
    ],
    ids=["start_line-1e30", "hunk-5000-digits"],
)
def test_a_bad_line_number_in_a_task_costs_only_that_range(
    tmp_path: Path, relative: str, text: str, warning: str
) -> None:
    tasks = tmp_path / "tasks"
    task = _task(tasks, "t-001", {"tests/ground_truth.json": '{"files": ["b.py"]}'})
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    _trial(run, "baseline", "t-001__bbbbbbb", "t-001")
    first = normalize_paths([run], tasks, out=tmp_path / "out")
    assert (first.documents, first.failed) == (2, 0)
    names = _names(tmp_path / "out")
    if relative != "tests/ground_truth.json":
        (task / "tests" / "ground_truth.json").unlink()
    (task / relative).write_text(text)
    second = normalize_paths([run], tasks, out=tmp_path / "out")
    assert (second.documents, second.failed, second.removed_stale) == (2, 0, 0)
    assert _names(tmp_path / "out") == names  # nothing deleted as stale
    for path in find_documents([tmp_path / "out"]):
        doc = load_document(path)
        assert doc["ground_truth"]["files"] == ["b.py"]
        assert doc["ground_truth"].get("chunks", []) == []
        assert any(warning in reason for reason in doc["coverage"]["degraded_reasons"])


def test_parse_unified_diff_keeps_the_file_of_a_hunk_with_absurd_numbers() -> None:
    warnings: list[str] = []
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +" + "1" * 19 + " @@\n+y\n@@ -5,2 +6,2 @@\n a\n b\n"
    files, chunks = parse_unified_diff(diff, warnings)
    assert files == ["x.py"]
    assert chunks == [{"file": "x.py", "line_start": 6, "line_end": 7, "annotation": None}]
    assert len(warnings) == 1


# ------------------------------------------- 14. event documents that are symlinks


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "dangling"])
def test_a_document_that_is_not_a_regular_file_is_named_by_evaluate(
    tmp_path: Path, kind: str
) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    normalize_paths([run], None)
    # documents without a completion record (made by hand or by older code) are read as
    # they are: every entry named like a document is evaluated or named
    (run / "retrieval_events" / "completion_record.json").unlink()
    odd = run / "retrieval_events" / "baseline" / "odd.retrieval_events.json"
    if kind == "dev-zero":
        odd.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to(tmp_path / "nowhere")
    command = [sys.executable, "-m", "retrieval_lib", "evaluate", str(run)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert "1 documents, 0 computable, 1 invalid" in done.stdout, done.stderr
    assert f"invalid document: {odd}: cannot read {odd}:" in done.stderr
    assert done.returncode == 1
    summary = json.loads((run / "retrieval_events" / "run_retrieval_summary.json").read_text())
    assert [d["document"] for d in summary["counts"]["invalid_documents"]] == [
        "baseline/odd.retrieval_events.json"
    ]


@pytest.mark.parametrize("kind", ["dev-zero", "dangling"])
def test_a_document_link_beside_a_completion_record_is_named_by_evaluate(
    tmp_path: Path, kind: str
) -> None:
    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    normalize_paths([run], None)
    odd = run / "retrieval_events" / "baseline" / "odd.retrieval_events.json"
    odd.symlink_to("/dev/zero" if kind == "dev-zero" else str(tmp_path / "nowhere"))
    code, _, err = _cli("evaluate", str(run))
    assert code == 1
    assert "document baseline/odd.retrieval_events.json is not in its completion record" in err


def test_the_study_names_an_unreadable_run_and_a_loop_inside_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_lib.study.core import load

    runs, locked = _two_runs(tmp_path)
    loop = runs / "good" / "baseline" / "aaa-loop"
    loop.symlink_to("aaa-loop")
    _deny_listing(monkeypatch, locked)
    lines: list[str] = []
    study = load([runs], None, out=tmp_path / "out", workers=1, log=lines.append)
    assert f"left out: {locked}: cannot be listed (Permission denied)" in lines
    assert f"left out: {loop}: a symlink loop" in lines
    rows = study.exclusions.to_dict("records")
    assert {
        "run_id": None,
        "trial_id": str(locked),
        "stage": "discover",
        "reason": "cannot be listed (Permission denied)",
    } in rows
    assert {
        "run_id": "good",
        "trial_id": "good/baseline/aaa-loop",
        "stage": "discover",
        "reason": "left out by normalize: a symlink loop",
    } in rows


def test_a_symlink_loop_in_a_suite_folder_hides_no_task(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    _task(tasks, "t-001")
    (tasks / "suite" / "aaa-loop").symlink_to("aaa-loop")  # sorted before the task
    _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", "t-001")
    report = normalize_paths([tmp_path / "r1"], tasks, out=tmp_path / "out")
    doc = load_document(find_documents([tmp_path / "out"])[0])
    assert doc["ground_truth"]["files"] == ["b.py"]
    assert report.left_out == [(str(tasks.resolve() / "suite" / "aaa-loop"), "a symlink loop")]


def test_evaluate_over_a_folder_of_runs_names_one_it_cannot_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, locked = _two_runs(tmp_path)
    normalize_paths([runs], None)
    denied = locked / "retrieval_events"
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == os.fspath(denied):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)  # os.walk lists folders with os.scandir
    code, out, err = _cli("evaluate", str(runs))
    assert f"left out: {denied}: cannot be listed (Permission denied)" in err
    assert str(runs / "good" / "retrieval_events") in out
    assert code == 1


def test_the_run_report_lists_what_was_left_out(tmp_path: Path) -> None:
    from retrieval_lib.report.tables import left_out_table, load_run_data

    run = tmp_path / "r1"
    _trial(run, "baseline", "t-001__aaaaaaa", "t-001")
    _trial(run, "mcp", "t-001__ccccccc", "t-001")
    (run / "baseline" / BATCH / "aaa-loop").symlink_to("aaa-loop")
    normalize_paths([run], None, out=tmp_path / "out")
    evaluate_run(tmp_path / "out" / "r1")
    table = left_out_table(load_run_data(tmp_path / "out" / "r1").summary)
    assert table.values.tolist() == [["normalize", f"baseline/{BATCH}/aaa-loop", "a symlink loop"]]

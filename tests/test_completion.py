"""The completion record of a run's outputs (issue 18, items 15 and 16; contracts §6)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from retrieval_lib.completion import (
    COMPLETION_FILENAME,
    IncompleteOutputError,
    check_evaluated,
    problem,
    read_record,
    remove_orphaned_temporaries,
)
from retrieval_lib.metrics.summary import evaluate_run
from retrieval_lib.normalize import normalize_paths


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from retrieval_lib.synth import generate_runs

    data = tmp_path_factory.mktemp("completion") / "data"
    generate_runs(data, n_tasks=11, seed=3)
    return data / "runs", data / "benchmarks"


@pytest.fixture
def evaluated(synth, tmp_path) -> list[Path]:
    runs, tasks = synth
    out = tmp_path / "out"
    normalize_paths([runs], tasks, out=out, workers=1)
    events = sorted(out.glob("*/retrieval_events"))
    for folder in events:
        evaluate_run(folder)
    return events


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_the_record_names_every_file_written_with_its_size_and_code(evaluated, synth):
    runs, tasks = synth
    folder = evaluated[0]
    record = read_record(folder)
    assert record["record_version"] == "1.0"
    run = Path(record["run"])
    assert run.name == folder.parent.name and run.is_relative_to(runs.resolve())
    assert (run / "result.json").is_file() or any(run.rglob("result.json"))
    assert record["inputs"]["tasks_root"] == str(tasks.resolve())
    assert len(record["generator"]["code"]) == 16
    documents = {
        p.relative_to(folder).as_posix(): p.stat().st_size
        for p in folder.rglob("*.retrieval_events.json")
    }
    assert record["normalize"]["complete"] is True
    assert record["normalize"]["documents"] == documents
    assert record["normalize"]["failed_trials"] == []
    evaluate = record["evaluate"]
    assert evaluate["complete"] is True and evaluate["k"] == [1, 3, 5, 10]
    assert set(evaluate["metrics_files"]) == {
        rel.replace(".retrieval_events.json", ".retrieval_metrics.json") for rel in documents
    }
    table = folder / "retrieval_metrics.parquet"
    if table.is_file():
        assert evaluate["files"]["retrieval_metrics.parquet"] == {
            "size": table.stat().st_size,
            "sha256": hashlib.sha256(table.read_bytes()).hexdigest(),
        }
    assert "run_retrieval_summary.json" in evaluate["files"]
    assert problem(folder) is None


def test_a_new_normalisation_removes_the_outputs_of_the_earlier_evaluate(evaluated, synth):
    """Item 15: the summary and table of an earlier evaluate do not survive a later
    normalize, so impact cannot use them."""
    from retrieval_lib.stats.impact import run_impact

    runs, tasks = synth
    out = evaluated[0].parent.parent
    (evaluated[0] / "retrieval_impact.json").write_text("{}")
    normalize_paths([runs], tasks, out=out, workers=1)
    for folder in evaluated:
        assert not (folder / "run_retrieval_summary.json").exists()
        assert not list(folder.glob("retrieval_metrics.*"))
        assert not (folder / "retrieval_metrics_dataset").exists()
        assert not (folder / "retrieval_impact.json").exists()
        assert not list(folder.glob("study_*.parquet"))
        assert read_record(folder)["evaluate"] is None
    with pytest.raises(Exception, match="run `retrieval-lib evaluate"):
        run_impact([out], n_boot=100)


def test_evaluate_refuses_an_interrupted_normalisation_by_name(evaluated, synth):
    runs, tasks = synth
    folder = evaluated[0]
    record_path = folder / COMPLETION_FILENAME
    record = read_record(folder)
    run_path = record["run"]
    record["normalize"] = {"complete": False}
    import json

    record_path.write_text(json.dumps(record))
    with pytest.raises(IncompleteOutputError) as caught:
        evaluate_run(folder)
    message = str(caught.value)
    run = folder.parent.name
    assert f"run {run!r}" in message and "normalisation is incomplete" in message
    assert (
        f"retrieval-lib normalize {run_path} --tasks-root {tasks.resolve()} "
        f"--out {folder.parent.parent.resolve()}"
    ) in message


def test_evaluate_refuses_a_document_truncated_after_normalize(evaluated):
    folder = evaluated[0]
    doc = sorted(folder.rglob("*.retrieval_events.json"))[0]
    _truncate(doc)
    with pytest.raises(IncompleteOutputError, match="changed since it was written"):
        evaluate_run(folder)


def test_impact_refuses_a_truncated_table_naming_the_run(evaluated):
    """Item 16 (impact side): a truncated table is refused with the run and the fix."""
    from retrieval_lib.metrics.table_files import find_metrics_tables

    folder = evaluated[0]
    table = next(folder.glob("retrieval_metrics.*"))
    _truncate(table)
    with pytest.raises(IncompleteOutputError) as caught:
        find_metrics_tables(folder.parent)
    assert f"run {folder.parent.name!r}" in str(caught.value)
    assert f"retrieval-lib evaluate {folder}" in str(caught.value)
    evaluate_run(folder)  # the fix the message names
    check_evaluated(folder)


def test_the_study_redoes_a_run_whose_table_was_truncated(synth, tmp_path):
    """Item 16: a truncated retrieval_metrics.parquet is not "up to date, reused"."""
    from retrieval_lib.study.loader import prepare_runs, read_evaluated

    runs, tasks = synth
    out = tmp_path / "out"
    first = prepare_runs([runs], tasks, out=out)
    assert first.normalized and not first.reused
    again = prepare_runs([runs], tasks, out=out)
    assert sorted(again.reused) == sorted(first.normalized)
    folder = first.events_dirs[0]
    _truncate(next(folder.glob("retrieval_metrics.*")))
    third = prepare_runs([runs], tasks, out=out)
    assert third.normalized == [folder.parent.name]
    assert read_evaluated(third.events_dirs).trials.shape[0] > 0


def test_the_study_redoes_a_run_whose_document_was_truncated(synth, tmp_path):
    """Item 16: a truncated events document is redone by the full check (``verify``), not
    silently an exclusion. The default check does not look at documents (issue 20: one
    record per run); the study does not read them either (its per-run tables are hashed),
    so the default study is the one made before the truncation."""
    from retrieval_lib.study.loader import prepare_runs, read_evaluated

    runs, tasks = synth
    out = tmp_path / "out"
    first = prepare_runs([runs], tasks, out=out)
    before = read_evaluated(first.events_dirs)
    n_trials = before.trials.shape[0]
    folder = first.events_dirs[0]
    _truncate(sorted(folder.rglob("*.retrieval_events.json"))[0])
    default = prepare_runs([runs], tasks, out=out)
    assert default.normalized == [] and sorted(default.reused) == sorted(first.normalized)
    unchanged = read_evaluated(default.events_dirs)
    assert unchanged.exclusions.empty
    assert unchanged.trials.equals(before.trials) and unchanged.events.equals(before.events)
    again = prepare_runs([runs], tasks, out=out, verify=True)
    assert again.normalized == [folder.parent.name]
    tables = read_evaluated(again.events_dirs)
    assert tables.exclusions.empty
    assert tables.trials.shape[0] == n_trials


@pytest.mark.parametrize("name", ["study_events.parquet", "study_trials.parquet"])
def test_the_study_redoes_a_run_whose_study_table_was_truncated(synth, tmp_path, name):
    """Issue 20: the per-run tables the study reads instead of the documents are hashed:
    the default check redoes a run whose table is truncated; read alone, it is refused."""
    from retrieval_lib.study.loader import prepare_runs, read_evaluated

    runs, tasks = synth
    out = tmp_path / "out"
    first = prepare_runs([runs], tasks, out=out)
    folder = first.events_dirs[0]
    assert name in read_record(folder)["evaluate"]["files"]
    _truncate(folder / name)
    with pytest.raises(IncompleteOutputError, match=f"{name} changed since it was written"):
        read_evaluated([folder])
    again = prepare_runs([runs], tasks, out=out)
    assert again.normalized == [folder.parent.name]
    assert read_evaluated(again.events_dirs).exclusions.empty


def test_the_default_check_reads_one_record_per_run_not_every_file(synth, tmp_path, monkeypatch):
    """Issue 20: with every run up to date, neither the run folders nor the documents are
    walked (the full check does both); a trial added at a run's top level is still seen,
    a file rewritten deep inside a run only by the full check."""
    import os

    import retrieval_lib.completion as completion
    import retrieval_lib.study.loader as loader

    runs, tasks = synth
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    out = tmp_path / "out"
    first = loader.prepare_runs([copy], tasks, out=out)
    walked: list[str] = []
    walk, documents = loader._walk_stats, completion._documents_problem

    def walk_stats(root, skip=None):
        walked.append("task" if Path(root).resolve().is_relative_to(tasks.resolve()) else "run")
        return walk(root, skip)

    def documents_problem(*args):
        walked.append("documents")
        return documents(*args)

    monkeypatch.setattr(loader, "_walk_stats", walk_stats)
    monkeypatch.setattr(completion, "_documents_problem", documents_problem)
    again = loader.prepare_runs([copy], tasks, out=out)
    assert sorted(again.reused) == sorted(first.normalized) and not again.normalized
    # only the task definitions are walked (once for all runs), never a run or documents
    assert walked.count("task") == len(list(tasks.glob("*/*/tests"))) + len(
        list(tasks.glob("*/*/solution"))
    )
    assert "run" not in walked and "documents" not in walked
    monkeypatch.undo()
    # a file rewritten deep inside a run: seen only by the full check
    run = Path(read_record(first.events_dirs[0])["run"])
    deep = sorted(run.rglob("result.json"))[0]
    assert deep.parent.parent != run
    deep.write_text(deep.read_text(encoding="utf-8") + " ", encoding="utf-8")
    os.utime(deep, ns=(1_000_000_000, 1_000_000_000))
    assert loader.prepare_runs([copy], tasks, out=out).normalized == []
    assert loader.prepare_runs([copy], tasks, out=out, verify=True).normalized == [run.name]
    # an entry added at the top level of a run: seen by the default check
    shutil.copytree(sorted(p for p in run.iterdir() if p.is_dir())[0], run / "added-config")
    assert loader.prepare_runs([copy], tasks, out=out).normalized == [run.name]


def test_an_evaluated_folder_given_to_the_study_is_checked(evaluated):
    from retrieval_lib.study.loader import prepare_runs

    folder = evaluated[0]
    _truncate(folder / "run_retrieval_summary.json")
    with pytest.raises(IncompleteOutputError, match="retrieval-lib evaluate"):
        prepare_runs([folder.parent], None)


def test_the_study_reads_failed_trials_from_the_record(synth, tmp_path, monkeypatch):
    import retrieval_lib.normalize as normalize
    from retrieval_lib.study.loader import prepare_runs, read_evaluated

    runs, tasks = synth
    copy = tmp_path / "runs"
    shutil.copytree(runs, copy)
    result = sorted(p for p in copy.rglob("result.json") if (p.parent / "agent").is_dir())[0]
    build = normalize.build_document

    def failing(trial, *args, **kwargs):
        if trial.trial_dir == result.parent:
            raise ValueError("broken on purpose")
        return build(trial, *args, **kwargs)

    monkeypatch.setattr(normalize, "build_document", failing)
    out = tmp_path / "out"
    prepared = prepare_runs([copy], tasks, out=out)
    failed = [
        (d, f) for d in prepared.events_dirs for f in read_record(d)["normalize"]["failed_trials"]
    ]
    assert len(failed) == 1
    folder, entry = failed[0]
    run = Path(read_record(folder)["run"])
    assert entry["trial"] == result.parent.relative_to(run).as_posix()
    assert entry["error"] == "ValueError: broken on purpose"
    exclusions = read_evaluated(prepared.events_dirs).exclusions
    assert list(exclusions["stage"]) == ["normalize"]


def test_temporaries_of_the_record_and_outputs_are_removed(tmp_path):
    folder = tmp_path / "retrieval_events"
    (folder / "c").mkdir(parents=True)
    ours = [
        folder / f".{COMPLETION_FILENAME}.x1.tmp",
        folder / "c" / ".t.retrieval_events.json.x2.tmp",
        folder / ".retrieval_impact.json.x3.tmp",
        folder / ".study_events.parquet.x5.tmp",
    ]
    other = folder / ".notes.txt.x4.tmp"
    for path in [*ours, other]:
        path.write_text("partial")
    assert remove_orphaned_temporaries([folder]) == 4
    assert [p for p in ours if p.exists()] == [] and other.exists()


def test_study_verify_on_the_command_line_redoes_a_run_whose_document_was_truncated(
    synth, tmp_path, capsys
):
    from retrieval_lib.cli import main

    runs, tasks = synth
    out = tmp_path / "out"
    argv = ["study", str(runs), "--tasks-root", str(tasks), "--out", str(out), "--no-report"]
    assert main(argv) == 0
    folder = sorted(out.glob("*/retrieval_events"))[0]
    _truncate(sorted(folder.rglob("*.retrieval_events.json"))[0])
    capsys.readouterr()
    assert main(argv) == 0
    assert "up to date, reused: " in capsys.readouterr().out
    assert main([*argv, "--verify"]) == 0
    said = capsys.readouterr().out
    assert "normalized 1 run(s)" in said and f"evaluated {folder.parent.name}:" in said


@pytest.mark.parametrize(
    "content", [b"\xff\xfe not UTF-8", b"{not json", b"[1, 2]", b"1" * 5000], ids=repr
)
def test_an_unreadable_record_counts_as_an_incomplete_normalisation(tmp_path, content):
    (tmp_path / COMPLETION_FILENAME).write_bytes(content)
    assert read_record(tmp_path) == {"record_version": "1.0", "normalize": {"complete": False}}
    assert problem(tmp_path, evaluated=False) == (
        "its normalisation is incomplete (interrupted, or still running)"
    )

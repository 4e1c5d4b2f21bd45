"""Ground truth read once per task per process, re-read when the task folder changes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import retrieval_lib.ground_truth as gt_module
from retrieval_lib.ground_truth import load_ground_truth, load_ground_truth_cached


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    monkeypatch.setattr(gt_module, "_CACHE", type(gt_module._CACHE)())


@pytest.fixture
def reads(monkeypatch):
    """Count the files ground truth reads."""
    seen: list[str] = []
    real = gt_module.read_regular_bytes

    def counting(path):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(gt_module, "read_regular_bytes", counting)
    return seen


def _task(root: Path, files: list[str]) -> Path:
    task = root / "task"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "ground_truth.json").write_text(str(files).replace("'", '"'))
    (task / "instruction.md").write_text("Fix `src/x.py`.\n")
    return task


def test_a_second_load_reads_nothing_and_equals_a_fresh_load(tmp_path, reads, monkeypatch):
    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    task = _task(tmp_path, ["src/a.py"])
    first = load_ground_truth_cached([task], tasks_root=tmp_path)
    assert reads, "the first load reads the task's files"
    n = len(reads)
    second = load_ground_truth_cached([task], tasks_root=tmp_path)
    assert len(reads) == n  # nothing read again
    assert second == first == load_ground_truth([task], tasks_root=tmp_path)
    second.files.append("changed by a caller")
    assert load_ground_truth_cached([task], tasks_root=tmp_path).files == ["src/a.py"]


def test_a_file_rewritten_in_place_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    task = _task(tmp_path, ["src/a.py"])
    gt_file = task / "tests" / "ground_truth.json"
    assert load_ground_truth_cached([task]).files == ["src/a.py"]
    with open(gt_file, "w") as fh:  # same inode, same folder entries
        fh.write('["src/b.py"]')
    stat = gt_file.stat()
    os.utime(gt_file, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert load_ground_truth_cached([task]).files == ["src/b.py"]


def test_same_size_rewrite_with_another_mtime_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    task = _task(tmp_path, ["src/a.py"])
    gt_file = task / "tests" / "ground_truth.json"
    assert load_ground_truth_cached([task]).files == ["src/a.py"]
    gt_file.write_text('["src/c.py"]')  # same length as before
    os.utime(gt_file, ns=(1, 1))
    assert load_ground_truth_cached([task]).files == ["src/c.py"]


def test_a_file_added_or_removed_is_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    task = _task(tmp_path, [])
    # no file-level ground truth yet: the instruction's path is the fallback source
    before = load_ground_truth_cached([task])
    (task / "tests" / "ground_truth.json").unlink()
    (task / "tests" / "expected_changes.json").write_text('{"expected_files": ["src/z.py"]}')
    after = load_ground_truth_cached([task])
    assert after == load_ground_truth([task])
    assert after != before and after.files == ["src/z.py"]


def test_a_task_changed_just_now_is_not_kept(tmp_path, reads):
    # the default window: files written a moment ago may change again unnoticed
    task = _task(tmp_path, ["src/a.py"])
    load_ground_truth_cached([task])
    n = len(reads)
    load_ground_truth_cached([task])
    assert len(reads) == 2 * n
    assert not gt_module._CACHE


def test_an_unreadable_folder_is_refused_every_time(tmp_path, monkeypatch):
    from retrieval_lib.errors import GroundTruthError

    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    for _ in range(2):
        with pytest.raises(GroundTruthError):
            load_ground_truth_cached([tmp_path / "missing"])


def test_the_cache_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    monkeypatch.setattr(gt_module, "CACHE_SIZE", 3)
    for i in range(5):
        load_ground_truth_cached([_task(tmp_path / str(i), [f"src/{i}.py"])])
    assert len(gt_module._CACHE) == 3


def test_within_one_pass_a_task_is_checked_once_and_an_edit_is_seen_next_pass(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    task = _task(tmp_path, ["src/a.py"])
    checks: list[int] = []
    real = gt_module._fingerprint
    monkeypatch.setattr(gt_module, "_fingerprint", lambda p: checks.append(1) or real(p))
    assert load_ground_truth_cached([task], pass_id="p1").files == ["src/a.py"]
    n = len(checks)  # the first load fingerprints what it read
    assert load_ground_truth_cached([task], pass_id="p1").files == ["src/a.py"]
    assert len(checks) == n  # same pass: no stat at all
    gt_file = task / "tests" / "ground_truth.json"
    gt_file.write_text('["src/b.py"]')
    os.utime(gt_file, ns=(1, 1))
    # an edit during the pass is not seen by that pass (the documented contract) ...
    assert load_ground_truth_cached([task], pass_id="p1").files == ["src/a.py"]
    # ... but by the next pass, and by a call without a pass id
    assert load_ground_truth_cached([task], pass_id="p2").files == ["src/b.py"]
    gt_file.write_text('["src/c.py"]')
    os.utime(gt_file, ns=(2, 2))
    assert load_ground_truth_cached([task]).files == ["src/c.py"]


def test_normalise_checks_each_task_once_per_pass(tmp_path, monkeypatch):
    from retrieval_lib.normalize import normalize_paths
    from retrieval_lib.synth import generate_runs

    monkeypatch.setattr(gt_module, "_RACY_NS", 0)
    generate_runs(tmp_path / "d", n_tasks=3, seed=1)
    runs, tasks = tmp_path / "d" / "runs", tmp_path / "d" / "benchmarks"
    normalize_paths([runs], tasks, out=tmp_path / "o1")  # fills the cache
    passes: list[object] = []
    real = gt_module.load_ground_truth_cached

    def spy(task_dirs, *, tasks_root=None, pass_id=None):
        passes.append(pass_id)
        return real(task_dirs, tasks_root=tasks_root, pass_id=pass_id)

    monkeypatch.setattr("retrieval_lib.normalize.load_ground_truth_cached", spy)
    checks: list[int] = []
    fingerprint = gt_module._fingerprint
    monkeypatch.setattr(gt_module, "_fingerprint", lambda p: checks.append(1) or fingerprint(p))
    report = normalize_paths([runs], tasks, out=tmp_path / "o2")
    normalize_paths([runs], tasks, out=tmp_path / "o3")
    assert len(passes) == 2 * report.trials and len(set(passes)) == 2 and None not in passes
    tasks_seen = {p.name for p in tasks.glob("*/*") if p.is_dir()}
    assert report.trials > len(tasks_seen)  # some task has several trials
    assert len(checks) == 2 * len(tasks_seen)  # one fingerprint per task per pass

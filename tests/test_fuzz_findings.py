"""Issue 18: the failure classes ``benchmarks/fuzz.py`` found beyond items 1-18.

a. an out-of-range reward (``1e308``, ``1e400``, ``NaN``/``Infinity``, a huge integer)
   must not abort the study ("Wilcoxon deltas must be finite");
b. a 240-character config folder made the hidden temporary name of the dataset file
   exceed 255 bytes, and the OS error ended ``evaluate`` for every run;
c. a config folder whose name is not UTF-8 made ``normalize`` refuse the whole command;
d. ``agent -> agent`` (a symlink loop) inside a trial must name the trial, never drop it.

Every test builds its runs under ``tmp_path``; nothing outside it is written.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from retrieval_lib.cli import main
from retrieval_lib.io import atomic_write_bytes
from retrieval_lib.metrics.summary import evaluate_run
from retrieval_lib.normalize import normalize_paths
from retrieval_lib.runs import LeftOut, discover_runs, discover_trials, read_trial_result
from retrieval_lib.stats.paired_tests import paired_comparison, wilcoxon_signed_rank

BATCH = "2026-01-01__00-00-00"
NAME_MAX = 255  # bytes in a file name (ext4, XFS, btrfs, tmpfs)


def _trial(run: Path, config: str, name: str, *, reward: Any = 1.0, agent: bool = True) -> Path:
    """``run/config/BATCH/name`` with a result.json (``reward`` written verbatim when a
    string, so JSON literals such as ``NaN`` and ``1e400`` reach the reader as text)."""
    folder = run / config / BATCH / name
    folder.mkdir(parents=True)
    if agent:
        (folder / "agent").mkdir()
    task = name.split("__")[0]
    value = reward if isinstance(reward, str) else json.dumps(reward)
    (folder / "result.json").write_text(
        f'{{"task_name": "{task}", "trial_name": "{name}", '
        f'"verifier_result": {{"rewards": {{"reward": {value}}}}}}}'
    )
    return folder


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# ------------------------------------------------------------ a. out-of-range rewards


@pytest.mark.parametrize(
    ("literal", "warning"),
    [
        ("1e308", "reward 1e+308 is absurd (beyond ±100); ignored"),
        ("-1e300", "reward -1e+300 is absurd (beyond ±100); ignored"),
        ("1e400", "reward is inf, not a finite number; ignored"),
        ("NaN", "reward is nan, not a finite number; ignored"),
        ("-Infinity", "reward is -inf, not a finite number; ignored"),
        ("9" * 400, "reward is an integer of 400 digits, not a finite number; ignored"),
    ],
)
def test_an_out_of_range_reward_is_missing_with_a_warning(
    tmp_path: Path, literal: str, warning: str
) -> None:
    folder = _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", reward=literal)
    result = read_trial_result(folder)
    assert result.reward is None and result.passed is None
    assert result.task_name == "t-001"  # the trial is kept, only the field is missing
    assert any(w.endswith(warning) for w in result.warnings), result.warnings


def test_a_reward_slightly_out_of_range_is_kept_with_a_warning(tmp_path: Path) -> None:
    folder = _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", reward=100)
    result = read_trial_result(folder)
    assert result.reward == 100.0 and "reward 100 lies outside [0, 1]" in result.warnings


def test_an_absurd_reward_txt_is_not_read(tmp_path: Path) -> None:
    folder = _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", reward="null")
    (folder / "verifier").mkdir()
    (folder / "verifier" / "reward.txt").write_text("1e308\n")
    assert read_trial_result(folder).reward is None


def test_paired_comparison_drops_a_pair_whose_delta_overflows() -> None:
    base = [0.0, 0.1, 0.2, 0.0, 0.3, 0.1, 0.2, -1e308]
    treat = [1.0, 0.5, 0.9, 0.7, 0.8, 0.9, 1.0, 1e308]  # last delta: inf
    row = paired_comparison(base, treat, n_boot=10, metric="reward").iloc[0]
    assert (int(row["n"]), int(row["n_dropped"])) == (7, 1)
    kept = np.array(treat[:7]) - np.array(base[:7])
    assert row["mean_delta"] == pytest.approx(kept.mean())
    expected = stats.wilcoxon(kept, method="exact").pvalue
    assert row["wilcoxon_p"] == pytest.approx(expected)


def test_wilcoxon_ranks_huge_finite_deltas_without_overflow() -> None:
    # rounding to 12 decimals multiplies by 1e12: 1e300 used to become inf and raise
    deltas = [1e300, 2e300, 3e300, -4e300, 5e300, 6e300]
    res = wilcoxon_signed_rank(deltas)
    expected = stats.wilcoxon([1, 2, 3, -4, 5, 6], method="exact")
    assert res.p_value == pytest.approx(expected.pvalue)
    assert res.statistic == pytest.approx(expected.statistic)


def test_the_study_survives_an_absurd_reward(tmp_path: Path) -> None:
    from retrieval_lib.study.core import load

    runs = tmp_path / "runs"
    for i in range(1, 8):
        _trial(runs / "r1", "baseline", f"t-00{i}__aaaaaa{i}", reward=0.0)
        reward = "1e308" if i == 1 else "1.0"
        _trial(runs / "r1", "mcp", f"t-00{i}__bbbbbb{i}", reward=reward)
    study = load([runs], None, out=tmp_path / "out", workers=1, log=lambda line: None)
    trials = study.trials.set_index("trial_name")
    assert len(trials) == 14  # the trial with the absurd reward is kept
    assert math.isnan(trials.loc["t-001__bbbbbb1", "reward"])
    assert trials.loc["t-002__bbbbbb2", "reward"] == 1.0


# ------------------------------------------------------- b. long names, short temp names


def test_the_temporary_name_of_a_long_file_name_stays_short(tmp_path: Path) -> None:
    from retrieval_lib.io import temp_prefix

    name = "c" * 240 + ".parquet"  # 248 bytes: `.<name>.<8 random>.tmp` was 262
    prefix = temp_prefix(name)
    assert len(os.fsencode(prefix)) + len("abcdefgh.tmp") <= NAME_MAX
    assert prefix.startswith(".") and prefix.endswith("c.parquet.")
    assert atomic_write_bytes(tmp_path / name, b"x").read_bytes() == b"x"
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary left behind
    # a short name keeps the readable form
    assert temp_prefix("run_retrieval_summary.json") == ".run_retrieval_summary.json."


def test_a_240_character_config_is_evaluated(tmp_path: Path) -> None:
    config = "c" * 240
    _trial(tmp_path / "r1", config, "t-001__aaaaaaa")
    _trial(tmp_path / "r1", "mcp", "t-001__bbbbbbb")
    normalize_paths([tmp_path / "r1"], None, out=tmp_path / "out")
    result = evaluate_run(tmp_path / "out" / "r1")
    names = sorted(
        p.name for p in result.table_path.parent.joinpath("retrieval_metrics_dataset").iterdir()
    )
    assert names == [f"{config}.parquet", "mcp.parquet"]


def test_a_config_too_long_for_a_dataset_file_name_is_evaluated(tmp_path: Path) -> None:
    import pandas as pd

    config = "d" * 250  # `<config>.parquet` alone would be 258 bytes
    _trial(tmp_path / "r1", config, "t-001__aaaaaaa")
    normalize_paths([tmp_path / "r1"], None, out=tmp_path / "out")
    result = evaluate_run(tmp_path / "out" / "r1")
    (written,) = result.table_path.parent.joinpath("retrieval_metrics_dataset").iterdir()
    assert len(os.fsencode(written.name)) <= NAME_MAX and written.name.endswith(".parquet")
    assert pd.read_parquet(written)["config_name"].tolist() == [config]


def test_one_run_failing_with_an_os_error_does_not_stop_evaluate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrieval_lib.metrics.summary as summary

    for run in ("r1", "r2"):
        _trial(tmp_path / run, "baseline", "t-001__aaaaaaa")
        normalize_paths([tmp_path / run], None, out=tmp_path / "out")
    real = summary.evaluate_run

    def flaky(path: Any, k: Any = (1,)) -> Any:
        if "r1" in str(path):
            raise OSError(36, "File name too long", str(path) + "/x")
        return real(path, k=k)

    monkeypatch.setattr(summary, "evaluate_run", flaky)
    code, out, err = _cli("evaluate", str(tmp_path / "out" / "r1"), str(tmp_path / "out" / "r2"))
    assert code == 1
    assert f"{tmp_path / 'out' / 'r2' / 'retrieval_events'}: 1 documents" in out
    assert f"error: {tmp_path / 'out' / 'r1'}" in err and "File name too long" in err


# ------------------------------------------------------------- c. names not in UTF-8


def test_a_non_utf8_config_names_its_trials_and_the_others_go_on(tmp_path: Path) -> None:
    bad = os.fsdecode(b"mcp-\xff\xfe-remote")
    _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa")
    _trial(tmp_path / "r1", bad, "t-001__bbbbbbb")
    _trial(tmp_path / "r2", "baseline", "t-001__ccccccc")
    left = LeftOut()
    trials = discover_trials(tmp_path / "r1", left)
    assert [t.trial_dir.name for t in trials] == ["t-001__aaaaaaa"]
    shown = f"{tmp_path}/r1/mcp-\\xff\\xfe-remote/{BATCH}/t-001__bbbbbbb"
    reason = "folder name 'mcp-\\\\xff\\\\xfe-remote' is not valid UTF-8; rename it to normalise this trial"
    assert left.entries() == [(shown, reason)]

    code, out, err = _cli(
        "normalize",
        str(tmp_path / "r1"),
        str(tmp_path / "r2"),
        "--tasks-root",
        str(tmp_path),
        "--out",
        str(tmp_path / "out"),
        "--workers",
        "1",
    )
    assert code == 1  # something was left out: the exit status says so
    assert "normalized 2 run(s), 2 trials: 2 documents" in out
    assert f"left out: {shown}: {reason}" in err
    recorded = json.loads(
        (tmp_path / "out" / "r1" / "retrieval_events" / "normalize_left_out.json").read_text()
    )
    assert recorded == {
        "left_out": [{"path": f"mcp-\\xff\\xfe-remote/{BATCH}/t-001__bbbbbbb", "reason": reason}]
    }


def test_a_run_named_in_non_utf8_bytes_is_named_and_the_others_go_on(tmp_path: Path) -> None:
    bad_run = tmp_path / "runs" / os.fsdecode(b"run-\xe9")
    _trial(bad_run, "baseline", "t-001__aaaaaaa")
    _trial(tmp_path / "runs" / "good", "baseline", "t-001__bbbbbbb")
    left = LeftOut()
    assert discover_runs([tmp_path / "runs"], left) == [tmp_path / "runs" / "good"]
    assert [p for p, _ in left.entries()] == [
        f"{tmp_path}/runs/run-\\xe9/baseline/{BATCH}/t-001__aaaaaaa"
    ]


# ------------------------------------------------------- d. agent -> agent in a trial


@pytest.mark.parametrize("with_result", [True, False])
def test_an_agent_symlink_loop_names_the_trial(tmp_path: Path, with_result: bool) -> None:
    folder = _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa", agent=False)
    (folder / "agent").symlink_to("agent")
    if not with_result:
        (folder / "result.json").unlink()
    _trial(tmp_path / "r1", "baseline", "t-002__bbbbbbb")
    left = LeftOut()
    trials = discover_trials(tmp_path / "r1", left)
    assert (str(folder / "agent"), "a symlink loop") in left.entries()
    if with_result:  # still a trial (its result.json says so), normalised without agent/
        assert [t.trial_dir.name for t in trials] == ["t-001__aaaaaaa", "t-002__bbbbbbb"]
        report = normalize_paths([tmp_path / "r1"], None, out=tmp_path / "out")
        assert (report.trials, report.documents, report.failed) == (2, 2, 0)
    else:  # nothing says it is a trial: not normalised, but named
        assert [t.trial_dir.name for t in trials] == ["t-002__bbbbbbb"]


# ------------------------------------------- e. a study with no baseline/treatment pair


def test_a_study_without_any_matched_task_completes(tmp_path: Path) -> None:
    # e.g. one config only, or every task renamed: found at 500 fuzz trials, where a run
    # holds 2-3 trials; `study` stopped with "no per-task delta of 'reward'; known: none"
    from retrieval_lib.study.core import load

    runs = tmp_path / "runs"
    _trial(runs / "r1", "mcp", "t-001__aaaaaaa", reward=1.0)
    _trial(runs / "r1", "mcp", "t-002__bbbbbbb", reward=0.0)
    (tmp_path / "tasks").mkdir()
    study = load([runs], None, out=tmp_path / "out", workers=1, log=lambda line: None)
    pairs = study.pairs()
    assert pairs.empty and list(pairs.columns[-2:]) == ["delta:reward", "delta:passed"]
    code, out, err = _cli(
        "study",
        str(runs),
        "--tasks-root",
        str(tmp_path / "tasks"),
        "--out",
        str(tmp_path / "study"),
        "--workers",
        "1",
        "--no-report",
    )
    assert code == 0, err
    assert (tmp_path / "study" / "study" / "tables" / "trials.parquet").is_file()


# ------------------------------- f. values nested ~1,000 deep shown in a warning or error


def test_a_deeply_nested_schema_version_costs_only_the_trace(tmp_path: Path) -> None:
    # 10,000 fuzz trials: `schema_version` = a list ~1,000 deep; `repr` of it in the error
    # message raised RecursionError, reported as a bare Python exception
    deep = "[" * 990 + "]" * 990
    folder = _trial(tmp_path / "r1", "baseline", "t-001__aaaaaaa")
    (folder / "agent" / "trajectory.json").write_text(f'{{"schema_version": {deep}, "steps": []}}')
    _trial(tmp_path / "r1", "baseline", "t-002__bbbbbbb")
    report = normalize_paths([tmp_path / "r1"], None, out=tmp_path / "out")
    assert (report.trials, report.documents, report.failed) == (2, 2, 0)
    doc = json.loads(
        (tmp_path / "out/r1/retrieval_events/baseline/t-001.retrieval_events.json").read_text()
    )
    reasons = " ".join(doc["coverage"]["degraded_reasons"])
    assert (
        "schema_version is a JSON array [[[[...]]]]" in reasons and "RecursionError" not in reasons
    )


def test_a_deeply_nested_ground_truth_confidence_is_a_warning(tmp_path: Path) -> None:
    from retrieval_lib.ground_truth import load_ground_truth

    task = tmp_path / "tasks" / "suite" / "t-001"
    (task / "tests").mkdir(parents=True)
    (task / "task.toml").write_text("")
    (task / "tests" / "ground_truth.json").write_text('{"files": ["b.py"]}')
    deep = "[" * 300 + "]" * 300  # any message showing it stays short
    (task / "tests" / "ground_truth_meta.json").write_text(f'{{"ground_truth_confidence": {deep}}}')
    truth = load_ground_truth([task])
    assert truth.files == ["b.py"]
    assert any(
        "unknown ground_truth_confidence a JSON array [[[[...]]]]" in w for w in truth.warnings
    )
    assert all(len(w) < 400 for w in truth.warnings), truth.warnings

"""``retrieval-lib impact``: hand-made tables, errors, start-up cost and the real corpus end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from retrieval_lib.cli import main

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / ".." / "shared" / "corpus" / "csb"


def _table(run_id: str = "run-x") -> pd.DataFrame:
    rows = []
    for i in range(5):
        for config, reward, ap in (
            ("baseline-local-direct", float(i % 2), 0.1 * i),
            ("mcp-remote-direct", 1.0, 0.1 * i + 0.3),
        ):
            rows.append(
                {
                    "run_id": run_id,
                    "config_name": config,
                    "task_name": f"task-{i}",
                    "model": "m",
                    "harness_version": "1",
                    "file.AP": ap,
                    "reward": reward,
                    "passed": reward == 1.0,
                    "agent_execution_seconds": 10.0 + i,
                }
            )
    return pd.DataFrame(rows)


def _write(tmp_path: Path, df: pd.DataFrame) -> Path:
    folder = tmp_path / df["run_id"].iloc[0] / "retrieval_events"
    folder.mkdir(parents=True)
    df.to_parquet(folder / "retrieval_metrics.parquet")
    return folder.parent


def test_impact_command_writes_and_summarises(tmp_path, capsys):
    run = _write(tmp_path, _table())
    pooled = tmp_path / "pooled.json"
    code = main(["impact", str(run), "--n-boot", "200", "--seed", "3", "--pool", str(pooled)])
    out = capsys.readouterr().out
    assert code == 0
    written = run / "retrieval_events" / "retrieval_impact.json"
    assert written.is_file() and pooled.is_file()
    assert f"wrote {written}" in out and f"wrote {pooled}" in out
    assert (
        "baseline-local-direct vs mcp-remote-direct: 5 matched (harness version verified for "
        "all); strict: 5; 0 unmatched" in out
    )
    # rewards: baseline 0,1,0,1,0 vs 1 everywhere -> mean delta 0.6 over 5 tasks, 3 of
    # them non-zero: described, not tested (an exact Wilcoxon p could not reach 0.05)
    assert (
        "reward: mean delta +0.6, n=5, not tested (non-zero paired deltas: 3 of 5; "
        "a test needs 6 (the fewest at which an exact two-sided Wilcoxon p can reach 0.05))" in out
    )
    doc = json.loads(written.read_text())
    assert doc["params"]["seed"] == 3 and doc["params"]["n_boot"] == 200


def test_impact_command_strict_harness_version(tmp_path, capsys):
    table = _table()
    # task-0: baseline version unknown (no usable trace); task-1: both unknown;
    # task-2: known versions that differ
    table.loc[
        (table["task_name"] == "task-0") & table["config_name"].str.startswith("b"),
        "harness_version",
    ] = None
    table.loc[table["task_name"] == "task-1", "harness_version"] = None
    table.loc[
        (table["task_name"] == "task-2") & table["config_name"].str.startswith("m"),
        "harness_version",
    ] = "2"
    table["harness_version_unknown_reason"] = table["harness_version"].map(
        lambda v: "no usable trace" if pd.isna(v) else None
    )
    run = _write(tmp_path, table)
    written = run / "retrieval_events" / "retrieval_impact.json"
    assert main(["impact", str(run), "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert (
        "baseline-local-direct vs mcp-remote-direct: 4 matched (2 with unverified harness "
        "version); strict: 2; 1 unmatched" in out
    )
    doc = json.loads(written.read_text())
    notes = {r["task_name"]: r["harness_version_note"] for r in doc["per_task"]}
    assert notes == {
        "task-0": "baseline version unknown (no usable trace)",
        "task-1": "baseline version unknown (no usable trace); "
        "treatment version unknown (no usable trace)",
        "task-3": None,
        "task-4": None,
    }
    assert doc["params"]["strict_harness_version"] is False

    assert main(["impact", str(run), "--n-boot", "50", "--strict-harness-version"]) == 0
    out = capsys.readouterr().out
    assert (
        "baseline-local-direct vs mcp-remote-direct: 2 matched (strict harness version; 2 with "
        "unverified harness version left out); 3 unmatched" in out
    )
    doc = json.loads(written.read_text())
    assert [r["task_name"] for r in doc["per_task"]] == ["task-3", "task-4"]
    assert doc["params"]["strict_harness_version"] is True
    assert doc["pairs"][0]["n_harness_unverified"] == 2


def test_impact_command_metric_family_and_flagged_option(tmp_path, capsys):
    table = _table().assign(**{"file.P@1": 0.5, "chunk.n_chunks": 4})
    table["file.P@1"] = table["file.AP"] ** 2
    table["errored"] = [i == 0 for i in range(len(table))]  # task-0 baseline errored
    run = _write(tmp_path, table)
    written = run / "retrieval_events" / "retrieval_impact.json"
    assert main(["impact", str(run), "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    assert "  metric family (key, 1): file.AP\n" in out
    # correlations are over tasks: 2 groups hold task-0 with its errored trial (pooled,
    # baseline) x 3 outcomes (reward, passed, agent_execution_seconds) x 2 methods, less
    # the pooled passed rows (task-0 passed on one side of two: an even split, left out)
    assert "; 10 include errored/timed-out trials (n_flagged)" in out
    doc = json.loads(written.read_text())
    assert doc["params"]["metrics"] == ["file.AP"] and doc["params"]["metric_family"] == "key"
    spearman = [r for r in doc["correlations"] if r["method"] == "spearman"]
    assert {r["x"] for r in spearman} == {"file.AP"}
    pooled = next(r for r in spearman if r["group"] == "(pooled)" and r["y"] == "reward")
    # 10 trials of 5 tasks: n counts tasks
    assert (pooled["n"], pooled["n_trials"], pooled["n_flagged"], pooled["family"]) == (
        5,
        10,
        1,
        "rank",
    )
    assert main(["impact", str(run), "--n-boot", "50", "--metrics", "all"]) == 0
    doc = json.loads(written.read_text())
    assert doc["params"]["metrics"] == ["file.AP", "file.P@1"]  # never chunk.n_chunks
    assert (
        main(["impact", str(run), "--n-boot", "50", "--metrics", "file.P@1", "--exclude-flagged"])
        == 0
    )
    doc = json.loads(written.read_text())
    assert doc["params"]["metrics"] == ["file.P@1"]
    pooled = next(
        r
        for r in doc["correlations"]
        if r["group"] == "(pooled)" and r["y"] == "reward" and r["method"] == "spearman"
    )
    # task-0 keeps its other trial: still 5 tasks, now 9 trials
    assert (pooled["n"], pooled["n_trials"], pooled["n_flagged"]) == (5, 9, 0)
    capsys.readouterr()
    assert main(["impact", str(run), "--metrics", "chunk.n_chunks"]) == 1
    assert "not retrieval metric column(s): chunk.n_chunks" in capsys.readouterr().err


def test_impact_command_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["impact", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("retrieval-lib impact: error: no retrieval metrics table")
    assert "retrieval-lib evaluate" in err
    run = _write(tmp_path, _table())
    assert main(["impact", str(run), "--baseline", "nope"]) == 1
    assert "baseline config 'nope' not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["impact", str(run), "--n-boot", "0"])
    assert usage.value.code == 2


def test_impact_command_module_does_not_import_scipy():
    code = "import sys, retrieval_lib.cli.impact; print('scipy' in sys.modules, 'pandas' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]


def _result_rewards() -> dict[tuple[str, str], float]:
    """Reward of every (canonical task, config) read straight from the corpus' result.json files."""
    tasks = (
        "django-modeladmin-impact-001",
        "envoy-routeconfig-dep-chain-001",
        "llamacpp-context-window-search-001",
    )
    rewards = {}
    for path in sorted((CORPUS / "runs").rglob("result.json")):
        data = json.loads(path.read_text())
        if "verifier_result" not in data:
            continue  # a job-level result.json
        task = next(t for t in tasks if t in data["task_name"])
        side = "mcp" if ("/mcp" in path.as_posix()) else "baseline"
        rewards[(task, side)] = float(data["verifier_result"]["rewards"]["reward"])
    return rewards


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real corpus not found at {CORPUS}")
def test_normalize_evaluate_impact_on_the_real_corpus(tmp_path, capsys):
    expected = _result_rewards()
    assert expected[("envoy-routeconfig-dep-chain-001", "mcp")] == 0.67
    out = tmp_path / "out"
    runs = CORPUS / "runs" / "official"
    assert (
        main(
            [
                "normalize",
                str(runs),
                "--tasks-root",
                str(CORPUS / "benchmarks"),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    assert main(["evaluate", str(out)]) == 0
    assert (
        main(["impact", str(out), "--n-boot", "500", "--pool", str(tmp_path / "pooled.json")]) == 0
    )
    printed = capsys.readouterr().out
    assert "n=2, not tested (n=2 matched pairs is below the minimum of 3)" in printed

    per_run = sorted(out.rglob("retrieval_impact.json"))
    assert [p.parent.parent.name for p in per_run] == [
        "ccb_design_haiku_20260228_025547",
        "ccb_test_haiku_022326",
    ]
    pooled = json.loads((tmp_path / "pooled.json").read_text())
    documents = [json.loads(p.read_text()) for p in per_run] + [pooled]
    for doc in documents:
        assert [(p["baseline"], p["treatment"]) for p in doc["pairs"]] == [
            ("baseline-local-direct", "mcp-remote-direct")
        ]
        assert doc["unmatched"] == []
        # no correlation reaches the minimum n of 5 on three tasks per config
        assert doc["correlations"] and all(not r["computable"] for r in doc["correlations"])
        assert all("below the minimum of 5" in r["reason"] for r in doc["correlations"])
        assert max(r["n"] for r in doc["correlations"]) < 5
        for row in doc["per_task"]:
            assert row["baseline:reward"] == expected[(row["task_name"], "baseline")]
            assert row["treatment:reward"] == expected[(row["task_name"], "mcp")]
    design, test_run = documents[0], documents[1]
    assert [r["task_name"] for r in design["per_task"]] == [
        "django-modeladmin-impact-001",
        "envoy-routeconfig-dep-chain-001",
    ]
    assert [r["task_name"] for r in test_run["per_task"]] == ["llamacpp-context-window-search-001"]
    assert [r["task_name"] for r in pooled["per_task"]] == sorted({t for t, _ in expected})
    reward = next(r for r in pooled["comparisons"] if r["metric"] == "reward")
    # issue 22: three tasks, one non-zero delta: described, not tested (no p of 1, no
    # rank-biserial of -1, no CI of [min, max])
    assert reward["n"] == 3 and reward["tested"] is False and reward["computable"] is False
    assert reward["mean_delta"] == pytest.approx((0.67 - 1.0) / 3)
    assert (reward["wins"], reward["losses"], reward["ties"]) == (0, 1, 2)
    for column in ("wilcoxon_p", "rank_biserial", "ci_low", "ci_high"):
        assert reward[column] is None
    assert "non-zero paired deltas: 1 of 3" in reward["reason"]
    small = next(r for r in design["comparisons"] if r["metric"] == "reward")
    assert small["n"] == 2 and small["computable"] is False
    assert small["mean_delta"] == pytest.approx((0.67 - 1.0) / 2)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real corpus not found at {CORPUS}")
def test_design_run_without_the_django_mcp_trajectory_still_matches_both_tasks(tmp_path, capsys):
    # A copy of the corpus (input artifacts are read-only) whose django MCP trial lost its
    # only trace: its harness version is unknown, which must not unmatch the task.
    corpus = tmp_path / "csb"
    shutil.copytree(CORPUS, corpus)
    for path in [corpus, *corpus.rglob("*")]:  # the copy keeps the read-only modes
        path.chmod(path.stat().st_mode | 0o200)
    design = corpus / "runs" / "official" / "ccb_design_haiku_20260228_025547"
    (trajectory,) = design.glob("mcp-remote-direct/*/mcp_django-*/agent/trajectory.json")
    trajectory.unlink()
    out = tmp_path / "out"
    tasks = str(corpus / "benchmarks")
    assert (
        main(["normalize", str(design), "--tasks-root", tasks, "--out", str(out), "--quiet"]) == 0
    )
    assert main(["evaluate", str(out)]) == 0
    assert main(["impact", str(out), "--n-boot", "200"]) == 0
    printed = capsys.readouterr().out
    assert (
        "baseline-local-direct vs mcp-remote-direct: 2 matched (1 with unverified harness "
        "version); strict: 1; 0 unmatched" in printed
    )
    doc = json.loads((out / design.name / "retrieval_events" / "retrieval_impact.json").read_text())
    rows = {r["task_name"]: r for r in doc["per_task"]}
    assert sorted(rows) == ["django-modeladmin-impact-001", "envoy-routeconfig-dep-chain-001"]
    django = rows["django-modeladmin-impact-001"]
    assert django["harness_version"] == "2.1.62"  # the baseline's transcript init line
    assert django["harness_version_unverified"] is True
    assert django["harness_version_note"] == "treatment version unknown (no trace)"
    assert (django["baseline:reward"], django["treatment:reward"]) == (1.0, 1.0)
    assert rows["envoy-routeconfig-dep-chain-001"]["harness_version_unverified"] is False
    assert doc["unmatched"] == []

    # strict: only envoy, whose versions are read on both sides (2.1.62 and 2.1.62)
    assert main(["impact", str(out), "--n-boot", "200", "--strict-harness-version"]) == 0
    printed = capsys.readouterr().out
    assert "1 matched (strict harness version; 1 with unverified harness version left out)" in (
        printed
    )

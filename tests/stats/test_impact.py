"""The impact analysis, its JSON document and the per-run / pooled file workflow."""

from __future__ import annotations

import json
import math

import jsonschema
import numpy as np
import pandas as pd
import pytest
import scipy.stats

from retrieval_lib.errors import InputError, StatisticsError
from retrieval_lib.metrics.table_files import find_metrics_tables, read_metrics_table
from retrieval_lib.stats.correlation import POOLED_GROUP
from retrieval_lib.stats.impact import (
    IMPACT_FILENAME,
    analyze_impact,
    impact_for_run,
    impact_to_json,
    load_impact,
    load_impact_schema,
    run_impact,
)
from retrieval_lib.stats.paired import match_tasks
from retrieval_lib.stats.paired_tests import compare_matched


def _trial(
    run,
    config,
    task,
    reward,
    *,
    ap,
    trial="1",
    passed=None,
    errored=False,
    model="m",
    harness="2.10",
):
    return {
        "run_id": run,
        "config_name": config,
        "task_name": task,
        "trial_name": f"{task}__{trial}",
        "benchmark": "suite",
        "model": model,
        "harness_version": harness,
        "is_latest_trial": True,
        "file.AP": ap,
        "file.R@10": ap / 2 if not math.isnan(ap) else ap,
        "util.read_overlap": 1.0 - ap if not math.isnan(ap) else ap,
        "reward": reward,
        "passed": (reward >= 1.0) if passed is None else passed,
        "errored": errored,
        "timed_out": False,
        "agent_execution_seconds": 100.0 * (1 + ap if not math.isnan(ap) else 1),
        "total_tokens": 1000.0,
        "cost_usd": float("nan"),
    }


@pytest.fixture
def table():
    rows = []
    rewards = {
        "t0": (0.0, 1.0),
        "t1": (1.0, 1.0),
        "t2": (0.0, 0.0),
        "t3": (0.5, 1.0),
        "t4": (1.0, 0.0),
        "t5": (0.0, 1.0),
    }
    for i, (task, (rb, rt)) in enumerate(sorted(rewards.items())):
        rows.append(_trial("r1", "baseline", task, rb, ap=0.1 * i))
        rows.append(_trial("r1", "mcp", task, rt, ap=0.1 * i + 0.2))
    # t1 has a second mcp trial that failed: mean reward 0.5, an even pass split
    rows.append(_trial("r1", "mcp", "t1", 0.0, ap=0.3, trial="2", errored=True))
    rows.append(_trial("r1", "baseline", "only-baseline", 1.0, ap=0.9))
    return pd.DataFrame(rows)


def test_analyze_impact_tables(table):
    result = analyze_impact(table, n_boot=500, seed=1)
    assert result.pairs.to_dict("records") == [
        {
            "baseline": "baseline",
            "treatment": "mcp",
            "n_matched": 6,
            "n_unmatched": 1,
            "n_flagged": 1,
            "n_harness_unverified": 0,
            "n_matched_strict": 6,
        }
    ]
    # the comparisons are exactly those of the building blocks
    metrics = ["reward", "passed", "agent_execution_seconds", "total_tokens", "cost_usd"]
    metrics += ["file.AP", "file.R@10"]  # the key metrics of the table (not util.read_overlap)
    direct = compare_matched(match_tasks(table, "baseline", "mcp"), metrics, n_boot=500, seed=1)
    expected = direct.sort_values("metric", kind="mergesort").reset_index(drop=True)
    pd.testing.assert_frame_equal(result.comparisons, expected)
    reward = result.comparisons.set_index("metric").loc["reward"]
    # deltas: t0 +1, t1 -0.5 (mcp mean 0.5), t2 0, t3 +0.5, t4 -1, t5 +1
    assert reward["n"] == 6 and reward["mean_delta"] == pytest.approx(1.0 / 6)
    assert (reward["wins"], reward["losses"], reward["ties"]) == (3, 2, 1)
    cost = result.comparisons.set_index("metric").loc["cost_usd"]
    assert cost["n"] == 0 and not cost["computable"] and math.isnan(cost["mean_delta"])

    # McNemar on majority pass: t1's mcp trials split 1/1 and it is left out
    mc = result.mcnemar.iloc[0]
    assert mc["n_split_excluded"] == 1 and mc["n"] == 5
    # remaining: t0 (0,1), t2 (0,0), t3 (0,1), t4 (1,0), t5 (0,1)
    assert (mc["both_pass"], mc["baseline_only"], mc["treatment_only"], mc["neither"]) == (
        0,
        1,
        3,
        1,
    )
    assert mc["p_value"] == pytest.approx(2 * 5 / 16)

    per_task = result.per_task.set_index("task_name")
    assert per_task.loc["t1", "n_trials_treatment"] == 2 and per_task.loc["t1", "flagged"]
    assert per_task.loc["t1", "treatment:reward"] == 0.5
    assert result.unmatched[["task_name", "side"]].values.tolist() == [
        ["only-baseline", "baseline"]
    ]
    # unmatched trials still count in the per-config aggregates
    summary = result.config_summary.set_index(["config_name", "column"])
    assert summary.loc[("baseline", "trials"), "n"] == 7
    assert summary.loc[("baseline", "reward"), "mean"] == pytest.approx(3.5 / 7)
    assert summary.loc[("mcp", "cost_usd"), "n"] == 0

    corr = result.correlations
    assert set(corr["group"]) == {POOLED_GROUP, "baseline", "mcp"}
    pooled = corr[
        (corr["group"] == POOLED_GROUP) & (corr["x"] == "file.AP") & (corr["y"] == "reward")
    ]
    # the task is the unit: 14 trials of 7 tasks (t1 has two mcp trials, only-baseline one)
    assert set(pooled["n"]) == {7} and set(pooled["n_trials"]) == {14}
    mcp = corr[(corr["group"] == "mcp") & (corr["x"] == "file.AP") & (corr["y"] == "reward")]
    assert set(mcp["n"]) == {6} and set(mcp["n_trials"]) == {7}
    # per task over all its trials (pooled): file.AP and reward means, worked out by hand
    ap = [0.1, (0.1 + 0.3 + 0.3) / 3, 0.3, 0.4, 0.5, 0.6, 0.9]
    reward = [0.5, 2 / 3, 0.0, 0.75, 0.5, 0.5, 1.0]
    rho = pooled.set_index("method").loc["spearman", "r"]
    assert rho == pytest.approx(scipy.stats.spearmanr(ap, reward).statistic)


def test_analyze_impact_without_a_pair_and_bad_input(table):
    lone = table[table["config_name"] == "baseline"]
    result = analyze_impact(lone, n_boot=10)
    assert result.pairs.empty and result.comparisons.empty and result.per_task.empty
    assert not result.correlations.empty
    with pytest.raises(StatisticsError, match="'nope' not found"):
        analyze_impact(table, baseline="nope")
    with pytest.raises(StatisticsError, match="reward"):
        analyze_impact(table.drop(columns=["reward"]))


def test_json_document_is_schema_valid_and_null_for_nan(table):
    document = impact_to_json(analyze_impact(table, n_boot=200), runs=["r1"])
    text = json.dumps(document, allow_nan=False)  # no NaN survives
    jsonschema.validate(json.loads(text), load_impact_schema())
    reward = next(r for r in document["comparisons"] if r["metric"] == "cost_usd")
    assert reward["mean_delta"] is None and reward["computable"] is False
    assert document["runs"] == ["r1"]
    assert "not causal" in document["interpretation"]
    keys = [(r["baseline"], r["treatment"], r["metric"]) for r in document["comparisons"]]
    assert keys == sorted(keys)


def _write_run(root, df, *, csv=False):
    folder = root / df["run_id"].iloc[0] / "retrieval_events"
    folder.mkdir(parents=True)
    path = folder / ("retrieval_metrics.csv" if csv else "retrieval_metrics.parquet")
    if csv:
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path)
    return path


def test_run_impact_writes_beside_each_table_byte_identically(tmp_path, table):
    parquet = _write_run(tmp_path / "a", table)
    csv = _write_run(tmp_path / "b", table, csv=True)
    first = run_impact([tmp_path / "a", csv], n_boot=300, seed=5)
    assert first.written == [parquet.parent / IMPACT_FILENAME, csv.parent / IMPACT_FILENAME]
    one = [p.read_bytes() for p in first.written]
    run_impact([tmp_path / "a", csv], n_boot=300, seed=5)
    assert [p.read_bytes() for p in first.written] == one
    # Parquet and CSV give the same document
    assert one[0] == one[1]
    run_impact([tmp_path / "a"], n_boot=300, seed=6)
    assert first.written[0].read_bytes() != one[0]


def test_csv_keeps_version_text(tmp_path, table):
    path = _write_run(tmp_path, table, csv=True)
    assert set(read_metrics_table(path)["harness_version"]) == {"2.10"}


def test_csv_keeps_every_text_column_of_the_writer_as_text(tmp_path):
    # the identity and provenance columns metrics_table writes as text, listed by hand
    text = [
        "run_id", "config_name", "task_name", "trial_name", "benchmark", "model",
        "harness_version", "harness_version_source", "harness_version_unknown_reason",
        "non_computable_reason", "candidate_set_size_slice", "evidence_type",
        "tokens_source", "cost_source",
    ]  # fmt: skip
    df = pd.DataFrame({c: ["007", "1.50"] for c in text} | {"file.AP": [0.5, 0.25]})
    path = tmp_path / "retrieval_metrics.csv"
    df.to_csv(path, index=False)
    back = read_metrics_table(path)
    assert {c: back[c].tolist() for c in text} == {c: ["007", "1.50"] for c in text}
    assert back["file.AP"].tolist() == [0.5, 0.25]


def test_missing_table_is_a_clear_error(tmp_path):
    (tmp_path / "run" / "retrieval_events").mkdir(parents=True)
    with pytest.raises(InputError, match="run `retrieval-lib evaluate"):
        run_impact([tmp_path / "run"])
    with pytest.raises(InputError, match="does not exist"):
        find_metrics_tables(tmp_path / "absent")
    bad = tmp_path / "x" / "retrieval_metrics.csv"
    bad.parent.mkdir()
    bad.write_bytes(b"\x00\x01garbage")
    with pytest.raises(InputError):
        run_impact([bad])


def test_pooled_analysis_matches_tasks_across_runs(tmp_path):
    # run 1 has only the baseline of u0..u2, run 2 only the mcp trials: no pair per run
    # can be matched, the pooled analysis matches them by task name and model
    r1 = pd.DataFrame(
        [_trial("r1", "baseline", f"u{i}", float(i % 2), ap=0.2 * i) for i in range(3)]
    )
    r2 = pd.DataFrame([_trial("r2", "mcp", f"u{i}", 1.0, ap=0.2 * i + 0.1) for i in range(3)])
    r2.loc[2, "model"] = "another-model"
    _write_run(tmp_path, r1)
    _write_run(tmp_path, r2)
    out = run_impact([tmp_path], n_boot=100, pool=tmp_path / "pooled")
    assert out.written[-1] == tmp_path / "pooled" / "retrieval_impact_pooled.json"
    assert all(res.pairs.empty for res in out.results.values())
    pooled = json.loads(out.written[-1].read_text())
    assert pooled["runs"] == ["r1", "r2"]
    assert [r["task_name"] for r in pooled["per_task"]] == ["u0", "u1"]
    assert {r["task_name"]: r["reason"].split(":")[0] for r in pooled["unmatched"]} == {
        "u2": "model differs"
    }
    reward = next(r for r in pooled["comparisons"] if r["metric"] == "reward")
    assert reward["n"] == 2 and reward["computable"] is False


def test_impact_handles_nullable_dtypes_of_the_metrics_table(table):
    typed = table.copy()
    for column in ("passed", "errored", "timed_out", "is_latest_trial"):
        typed[column] = typed[column].astype("boolean")
    typed.loc[0, "passed"] = pd.NA
    result = analyze_impact(typed, n_boot=100)
    passed = result.comparisons.set_index("metric").loc["passed"]
    assert passed["n"] == 5
    assert np.isfinite(passed["mean_delta"])


def test_default_family_is_the_key_metrics_and_all_widens_it(table):
    wide = table.assign(**{"file.P@1": table["file.AP"] ** 2, "chunk.n_chunks": 3})
    default = analyze_impact(wide, n_boot=50)
    # the KEY_METRICS present, in order; util.read_overlap is read.recall, not a key metric
    key = ["file.AP", "file.R@10"]
    assert default.params["metrics"] == key and default.params["metric_family"] == "key"
    assert set(default.correlations["x"]) == set(key)
    outcomes = ["reward", "passed", "cost_usd", "agent_execution_seconds", "total_tokens"]
    assert sorted(default.comparisons["metric"]) == sorted([*outcomes, *key])
    # the Holm family of a pair is those 7 rows: recompute it from their raw p-values
    from statsmodels.stats.multitest import multipletests

    p = default.comparisons["wilcoxon_p"].to_numpy(dtype=float)
    ok = ~np.isnan(p)
    assert np.allclose(
        default.comparisons["wilcoxon_p_holm"].to_numpy()[ok],
        multipletests(p[ok], method="holm")[1],
    )
    every = analyze_impact(wide, n_boot=50, metrics="all")
    assert every.params["metrics"] == ["file.AP", "file.R@10", "util.read_overlap", "file.P@1"]
    assert "chunk.n_chunks" not in set(every.comparisons["metric"])  # a count, never a metric
    listed = analyze_impact(wide, n_boot=50, metrics=["file.P@1"])
    assert set(listed.correlations["x"]) == {"file.P@1"}
    assert listed.params["metric_family"] == "custom"


def test_correlation_rows_count_flagged_trials(table):
    result = analyze_impact(table, n_boot=50)
    corr = result.correlations.set_index(["group", "x", "y", "method"])
    # one errored trial (mcp t1, trial 2): its task t1 is flagged, among 7 pooled tasks
    assert corr.loc[(POOLED_GROUP, "file.AP", "reward", "spearman"), "n_flagged"] == 1
    assert corr.loc[("mcp", "file.AP", "reward", "spearman"), "n_flagged"] == 1
    assert corr.loc[("baseline", "file.AP", "reward", "spearman"), "n_flagged"] == 0
    excluded = analyze_impact(table, n_boot=50, exclude_flagged=True).correlations
    row = excluded.set_index(["group", "x", "y", "method"]).loc[
        (POOLED_GROUP, "file.AP", "reward", "spearman")
    ]
    # t1 keeps its two other trials: still 7 tasks, now 13 trials
    assert (row["n"], row["n_trials"], row["n_flagged"]) == (7, 13, 0)


def test_written_document_loads_back_to_the_same_tables(tmp_path, table):
    _write_run(tmp_path, table)
    run_impact([tmp_path], n_boot=200, seed=4)
    run_dir = tmp_path / "r1"
    loaded = load_impact(run_dir)
    computed = analyze_impact(table, n_boot=200, seed=4)
    for name in ("pairs", "correlations", "comparisons", "mcnemar", "per_task", "unmatched"):
        pd.testing.assert_frame_equal(
            getattr(loaded, name), getattr(computed, name), check_dtype=False, obj=name
        )
    assert loaded.params["n_boot"] == 200 and loaded.params["runs"] == ["r1"]
    via_run, source = impact_for_run(run_dir, n_boot=200, seed=4)
    assert source.endswith("retrieval_impact.json")  # made with these options: shown as is
    assert via_run.comparisons.equals(loaded.comparisons)


def test_a_document_made_with_other_options_is_recomputed_with_the_given_ones(tmp_path, table):
    # issue 21, item 1: a report with seed 7 / 500 resamples / swapped configs used to show
    # the document written with seed 4 / 200 resamples
    _write_run(tmp_path, table)
    run_impact([tmp_path], n_boot=200, seed=4, metrics="all", min_n=4)
    run_dir = tmp_path / "r1"
    result, source = impact_for_run(run_dir, n_boot=150, seed=7)
    assert source == "computed"
    assert result.params["recomputed"] == (
        "retrieval_impact.json was made with other parameters (n_boot: 200 -> 150; seed: 4 -> 7)"
    )
    # the document's other options (metric family, minimum n) are kept
    expected = analyze_impact(table, n_boot=150, seed=7, metrics="all", min_n=4)
    pd.testing.assert_frame_equal(result.comparisons, expected.comparisons)
    pd.testing.assert_frame_equal(result.correlations, expected.correlations)
    swapped, source = impact_for_run(run_dir, baseline="mcp", treatment="baseline", seed=4)
    assert source == "computed"
    assert "baseline: None -> 'mcp'; treatment: None -> 'baseline'" in swapped.params["recomputed"]
    assert list(swapped.pairs[["baseline", "treatment"]].iloc[0]) == ["mcp", "baseline"]
    # an empty string is "the default", as None
    _, source = impact_for_run(run_dir, baseline="", treatment=None, seed=4, n_boot=200)
    assert source.endswith("retrieval_impact.json")


def test_impact_for_run_computes_when_no_document_exists(tmp_path, table):
    _write_run(tmp_path, table)
    result, source = impact_for_run(tmp_path / "r1", n_boot=100, seed=2)
    assert source == "computed"
    expected = analyze_impact(table, n_boot=100, seed=2)
    pd.testing.assert_frame_equal(result.comparisons, expected.comparisons)
    with pytest.raises(InputError, match="retrieval-lib impact"):
        load_impact(tmp_path / "r1")


def test_load_impact_refuses_other_schema_versions(tmp_path):
    path = tmp_path / IMPACT_FILENAME
    path.write_text(json.dumps({"schema_version": "1.0"}))
    with pytest.raises(InputError, match="schema version '1.0'"):
        load_impact(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="cannot read"):
        load_impact(path)


def test_latest_is_refused_when_pooling_runs_without_started_at(tmp_path, table):
    table = table[table["trial_name"] != "t1__2"]  # one trial per task and config
    other = table.assign(run_id="r2")
    _write_run(tmp_path, table)
    _write_run(tmp_path, other)
    with pytest.raises(StatisticsError, match="pooled analysis: combine='latest' over 2"):
        run_impact([tmp_path], n_boot=50, combine="latest", pool=tmp_path / "pooled.json")
    both = pd.concat([table, other], ignore_index=True)
    with pytest.raises(StatisticsError, match="started_at"):
        analyze_impact(both, combine="latest")


def test_load_impact_keeps_unknown_text_columns_as_written(tmp_path, table):
    document = impact_to_json(analyze_impact(table, n_boot=50), runs=["r1"])
    for row in document["comparisons"]:
        row["note"] = f"about {row['metric']}"
    (tmp_path / IMPACT_FILENAME).write_text(json.dumps(document))
    loaded = load_impact(tmp_path).comparisons.set_index("metric")
    assert loaded.loc["reward", "note"] == "about reward"
    assert loaded.loc["reward", "mean_delta"] == pytest.approx(1.0 / 6)


def test_impact_tables_are_the_tables_of_an_impact_result():
    import dataclasses

    from retrieval_lib.stats.impact import IMPACT_TABLES, ImpactResult

    names = [f.name for f in dataclasses.fields(ImpactResult)]
    assert names == [*IMPACT_TABLES, "params"]

"""Tables of the run-analysis report, against hand-computed values and scipy."""

import math

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.events.document import minimal_document
from retrieval_lib.report import tables
from retrieval_lib.stats import means
from retrieval_lib.stats.correlation import CORRELATION_COLUMNS, correlate_metrics


def _doc(config, task, *, trace=None, gt_source=None, confidence=None, reasons=(), files=()):
    doc = minimal_document(run_id="r", task_name=task, config_name=config)
    doc["coverage"].update(
        trace_source=trace,
        has_trajectory=trace in ("trajectory", "merged"),
        has_transcript=trace in ("transcript", "merged"),
        degraded_reasons=list(reasons),
        degraded_reason="; ".join(reasons) or None,
    )
    doc["ground_truth"].update(files=list(files), source=gt_source, confidence=confidence)
    return doc


# --------------------------------------------------------------------------- coverage


def test_coverage_counts_trace_and_ground_truth_sources_per_config():
    docs = [
        _doc(
            "base",
            "t1",
            trace="transcript",
            gt_source="tests/ground_truth.json",
            confidence="high",
            files=["a.py"],
        ),
        _doc("base", "t2", trace=None, reasons=["no trace"]),
        _doc(
            "mcp",
            "t1",
            trace="merged",
            gt_source="tests/ground_truth.json",
            confidence="high",
            files=["a.py"],
        ),
        _doc(
            "mcp",
            "t2",
            trace="trajectory",
            gt_source="solution/solve.sh",
            confidence="low",
            reasons=["transcript truncated", "no result line"],
        ),
    ]
    cov = tables.coverage_frame(docs)
    assert cov["trace_source"].tolist() == ["transcript", "none", "merged", "trajectory"]
    traces = tables.count_table(cov, ["trace_source"])
    assert traces.loc["none"].tolist() == [1, 0, 1]
    assert traces["total"].sum() == 4
    gt = tables.count_table(cov, ["ground_truth_source", "ground_truth_confidence"])
    assert gt.loc[("tests/ground_truth.json", "high")].tolist() == [1, 1, 2]
    assert gt.loc[("solution/solve.sh", "low")].tolist() == [0, 1, 1]
    assert gt.loc[("none", "none")].tolist() == [1, 0, 1]
    degraded = tables.degraded_reason_counts(cov)
    # a trial with two gaps counts under each; trials without gaps are not counted
    assert degraded.to_dict("index") == {
        "no result line": {"base": 0, "mcp": 1, "total": 1},
        "no trace": {"base": 1, "mcp": 0, "total": 1},
        "transcript truncated": {"base": 0, "mcp": 1, "total": 1},
    }


def test_coverage_splits_a_legacy_joined_degraded_reason():
    doc = _doc("c", "t", trace="transcript")
    doc["coverage"].pop("degraded_reasons")
    doc["coverage"]["degraded_reason"] = "a; b"
    assert tables.coverage_frame([doc]).loc[0, "degraded_reasons"] == ["a", "b"]


def test_no_degraded_trial_gives_an_empty_table():
    cov = tables.coverage_frame([_doc("c", "t", trace="transcript")])
    assert tables.degraded_reason_counts(cov).empty


def test_non_computable_counts_name_the_reason():
    table = pd.DataFrame(
        {
            "config_name": ["a", "a", "b"],
            "computable": pd.array([True, False, False], dtype="boolean"),
            "non_computable_reason": [None, "no trace", None],
        }
    )
    out = tables.non_computable_counts(table)
    assert out.to_dict("index") == {
        "(no reason recorded)": {"a": 0, "b": 1, "total": 1},
        "no trace": {"a": 1, "b": 0, "total": 1},
    }


def test_quality_by_config_gives_n_mean_and_reason():
    table = pd.DataFrame(
        {
            "config_name": ["b", "a", "a", "a"],
            "file.AP": [None, 0.2, 0.4, 0.9],
            "file.RR": [1.0, 1.0, 0.5, None],
        }
    )
    out = tables.quality_by_config(table, ["file.AP", "file.RR", "not.a.column"], n_boot=300)
    assert out[["config_name", "metric", "n"]].values.tolist() == [
        ["a", "file.AP", 3],
        ["a", "file.RR", 2],
        ["b", "file.AP", 0],
        ["b", "file.RR", 1],
    ]
    assert out["mean"].tolist()[:2] == pytest.approx([0.5, 0.75])
    assert math.isnan(out.loc[2, "mean"]) and out.loc[2, "reason"] == "no computable value"
    assert out.loc[3, "mean"] == 1.0 and math.isnan(out.loc[3, "ci_low"])


# --------------------------------------------------------------------------- funnel, taxonomy


def test_funnel_table_by_hand():
    table = pd.DataFrame(
        {
            "config_name": ["a", "a", "a"],
            "funnel.surfaced_files": [10, 4, None],  # third trial: no trace
            "funnel.surfaced_gt_hits": [3, None, None],  # second: no ground truth
            "funnel.read_files": [5, 2, None],
            "funnel.read_gt_hits": [2, None, None],
            "funnel.edited_files": [1, 0, None],
            "funnel.edited_gt_hits": [0, None, None],
        }
    )
    out = tables.funnel_table(table).set_index("stage")
    assert out.loc["surfaced", ["n", "mean_files", "n_with_ground_truth"]].tolist() == [2, 7.0, 1]
    assert out.loc["read", "mean_ground_truth_hits"] == 2.0
    assert out.loc["edited", "total_ground_truth_hits"] == 0.0  # a real zero, from one trial


def test_funnel_without_ground_truth_is_nan_not_zero():
    table = pd.DataFrame(
        {
            "config_name": ["a"],
            **{
                f"funnel.{s}_{k}": [None if k == "gt_hits" else 2]
                for s in ("surfaced", "read", "edited")
                for k in ("files", "gt_hits")
            },
        }
    )
    out = tables.funnel_table(table)
    assert out["n_with_ground_truth"].tolist() == [0, 0, 0]
    assert (
        out["mean_ground_truth_hits"].isna().all() and out["total_ground_truth_hits"].isna().all()
    )


def test_taxonomy_table_counts_trials_and_files():
    table = pd.DataFrame(
        {
            "config_name": ["a", "a", "a", "b"],
            "taxonomy.irrelevant_retrieval": [3, 0, None, None],
            "taxonomy.missed_key_evidence": [1, 1, None, None],
        }
    )
    out = tables.taxonomy_table(table).set_index(["config_name", "label"])
    row = out.loc[("a", "irrelevant_retrieval")]
    assert (row["n"], row["trials_with_label"], row["share_with_label"]) == (2, 1, 0.5)
    assert (row["total_files"], row["files_per_trial"]) == (3.0, 1.5)
    assert out.loc[("a", "missed_key_evidence"), "share_with_label"] == 1.0
    assert out.loc[("b", "missed_key_evidence"), "n"] == 0
    assert math.isnan(out.loc[("b", "missed_key_evidence"), "share_with_label"])


# --------------------------------------------------------------------------- correlations


def _table_for_correlation():
    rng = np.random.default_rng(0)
    ap = rng.uniform(0, 1, 12)
    return pd.DataFrame(
        {
            "config_name": ["a"] * 6 + ["b"] * 6,
            "file.AP": ap,
            "file.RR": rng.uniform(0, 1, 12),
            "reward": ap * 0.9 + rng.normal(0, 0.05, 12),
            "passed": ap > 0.5,
            "cost_usd": [np.nan] * 12,
        }
    )


def test_correlation_grid_uses_rank_methods_and_marks_adjusted_significance():
    from scipy import stats

    table = _table_for_correlation()
    corr = correlate_metrics(table, outcomes=["reward", "passed", "cost_usd"])
    r, marks, n = tables.correlation_grid(corr, "(pooled)", alpha=0.05)
    assert list(r.columns) == ["cost_usd", "passed", "reward"]
    rho = stats.spearmanr(table["file.AP"], table["reward"]).statistic
    assert r.loc["file.AP", "reward"] == pytest.approx(rho)
    # passed: rank-biserial 2*AUC-1, here perfect separation by construction
    assert r.loc["file.AP", "passed"] == pytest.approx(1.0)
    assert marks.loc["file.AP", "cost_usd"] == "n/a" and math.isnan(r.loc["file.AP", "cost_usd"])
    assert n.loc["file.AP", "reward"] == 12
    holm = corr.set_index(["group", "x", "y", "method"]).loc[
        ("(pooled)", "file.AP", "reward", "spearman"), "p_holm"
    ]
    assert marks.loc["file.AP", "reward"] == ("*" if holm < 0.05 else "")


def test_strongest_pairs_sorted_by_absolute_r():
    corr = correlate_metrics(_table_for_correlation(), outcomes=["reward"])
    top = tables.strongest_pairs(corr, "(pooled)", top=1)
    pooled = corr[(corr["group"] == "(pooled)") & (corr["method"] == "spearman")]
    best = pooled.loc[pooled["r"].abs().idxmax()]
    assert top[["x", "y"]].values.tolist() == [[best["x"], best["y"]]]


def test_correlation_helpers_accept_an_empty_table():
    empty = pd.DataFrame(columns=["group", *CORRELATION_COLUMNS, "p_holm", "p_bh"])
    assert tables.strongest_pairs(empty, "(pooled)").empty
    r, marks, n = tables.correlation_grid(empty, "(pooled)")
    assert r.empty and marks.empty and n.empty


# --------------------------------------------------------------------------- matched pairs


def test_per_task_deltas_by_hand():
    per_task = pd.DataFrame(
        {
            "baseline": ["b"] * 4,
            "treatment": ["t"] * 4,
            "task_name": ["d", "c", "b", "a"],
            "baseline:reward": [0.5, 1.0, 0.2, np.nan],
            "treatment:reward": [0.25, 1.0, 0.7, 1.0],
        }
    )
    out = tables.per_task_deltas(per_task, "reward")
    assert out["task_name"].tolist() == ["a", "b", "c", "d"]
    assert out["result"].tolist() == ["missing", "treatment", "tie", "baseline"]
    assert out["delta"].tolist()[1:] == pytest.approx([0.5, 0.0, -0.25])
    assert tables.per_task_deltas(per_task, "file.AP").empty
    assert "harness_version_unverified" not in out.columns  # only when the input has it


def test_per_task_deltas_carry_the_harness_version_flag_and_note():
    per_task = pd.DataFrame(
        {
            "baseline": ["b"] * 2,
            "treatment": ["t"] * 2,
            "task_name": ["y", "x"],
            "harness_version_unverified": [True, False],
            "harness_version_note": ["baseline version unknown (no usable trace)", None],
            "baseline:reward": [0.0, 1.0],
            "treatment:reward": [1.0, 1.0],
        }
    )
    out = tables.per_task_deltas(per_task, "reward").set_index("task_name")
    assert out["harness_version_unverified"].to_dict() == {"x": False, "y": True}
    assert out.loc["y", "harness_version_note"] == "baseline version unknown (no usable trace)"
    assert pd.isna(out.loc["x", "harness_version_note"])


def test_write_tables_writes_plain_csv_atomically_and_refuses_paths(tmp_path):
    frames = {
        "one.csv": pd.DataFrame({"a": [1, 2], "reasons": [["x", "y"], []]}),
        "two.csv": pd.DataFrame({"b": [0.5]}),
    }
    out = tables.write_tables(frames, tmp_path / "deep" / "tables")
    assert out == [
        tmp_path / "deep" / "tables" / "one.csv",
        tmp_path / "deep" / "tables" / "two.csv",
    ]
    assert out[0].read_text() == "a,reasons\n1,x; y\n2,\n"
    assert out[1].read_text() == "b\n0.5\n"
    assert sorted(p.name for p in out[0].parent.iterdir()) == ["one.csv", "two.csv"]  # no temp
    with pytest.raises(InputError, match="plain .csv"):
        tables.write_tables({"../escape.csv": frames["two.csv"]}, tmp_path)
    with pytest.raises(InputError, match="plain .csv"):
        tables.write_tables({"x.txt": frames["two.csv"]}, tmp_path)


# --------------------------------------------------------------------------- overview, drill-down


def test_overview_table_from_a_summary():
    summary = {
        "counts": {
            "documents": 5,
            "tasks": 3,
            "computable": 3,
            "chunk_capable": 1,
            "skipped": {"total": 2},
            "by_config": {
                "mcp": {
                    "documents": 2,
                    "tasks": 2,
                    "computable": 2,
                    "chunk_capable": 1,
                    "skipped": {"total": 0},
                },
                "base": {
                    "documents": 3,
                    "tasks": 3,
                    "computable": 1,
                    "chunk_capable": 0,
                    "skipped": {"total": 2},
                },
            },
        }
    }
    out = tables.overview_table(summary)
    assert out.index.tolist() == ["base", "mcp", "(all)"]
    assert out.loc["(all)"].tolist() == [5, 3, 3, 1, 2]
    assert out.loc["base", "skipped"] == 2


def test_drilldown_names_why_a_metric_is_missing():
    table = pd.DataFrame(
        {
            "task_name": ["t2", "t1", "t1"],
            "config_name": ["a", "b", "a"],
            "trial_name": ["x", "y", "z"],
            "file.AP": [0.5, np.nan, 0.25],
            "reward": [1.0, 0.0, 0.5],
            "computable": pd.array([True, False, True], dtype="boolean"),
            "non_computable_reason": [None, "no file-level ground truth", None],
        }
    )
    out = tables.drilldown_table(table)
    assert out[["task_name", "config_name"]].values.tolist() == [
        ["t1", "a"],
        ["t1", "b"],
        ["t2", "a"],
    ]
    assert out["not_computable"].tolist() == ["", "no file-level ground truth", ""]
    assert "file.recall" not in out.columns  # absent metrics are skipped, not invented


def test_load_run_data_refuses_an_unevaluated_folder(tmp_path):
    with pytest.raises(InputError, match="evaluate"):
        tables.load_run_data(tmp_path)


# --------------------------------------------------------------------------- the task as the unit


def test_quality_by_config_averages_repeated_trials_per_task_first():
    from retrieval_lib.stats.intervals import bootstrap_mean_ci

    table = pd.DataFrame(
        {
            "config_name": ["a"] * 6 + ["b"],
            "task_name": ["x", "x", "x", "y", "z", "z", "x"],
            "file.AP": [0.0, 0.0, 0.3, 0.9, 0.5, None, 0.2],
        }
    )
    out = tables.quality_by_config(table, ["file.AP"], n_boot=400, seed=2).set_index("config_name")
    a = out.loc["a"]
    # task means x 0.1, y 0.9, z 0.5 -> 0.5 over 3 tasks and 5 trials with a value
    # (a trial-level mean would say 0.34 with n = 5)
    assert (a["n"], a["n_tasks"], a["n_trials"]) == (3, 3, 5)
    assert a["mean"] == pytest.approx(0.5)
    low, high = bootstrap_mean_ci([0.1, 0.9, 0.5], n_boot=400, seed=2)
    assert (a["ci_low"], a["ci_high"]) == pytest.approx((low, high))
    assert (out.loc["b", "n"], out.loc["b", "n_trials"]) == (1, 1)


def test_copies_of_every_trial_leave_the_report_intervals_alone():
    rng = np.random.default_rng(4)
    table = pd.DataFrame(
        {
            "config_name": ["a"] * 24,
            "task_name": [f"t{i // 2}" for i in range(24)],
            "file.AP": rng.random(24),
            "candidate_set_size_slice": ["small"] * 24,
            "evidence_type": ["local"] * 24,
        }
    )
    copies = pd.concat([table] * 4, ignore_index=True)
    for compute in (
        lambda t: tables.quality_by_config(t, ["file.AP"], n_boot=500),
        lambda t: means.calibration_table(t, "file.AP", n_boot=500),
    ):
        once, four = compute(table).iloc[0], compute(copies).iloc[0]
        assert once["n"] == four["n"] == 12 and four["n_trials"] == 4 * once["n_trials"]
        assert (four["ci_low"], four["ci_high"]) == pytest.approx((once["ci_low"], once["ci_high"]))

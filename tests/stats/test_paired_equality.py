"""The vectorised ``match_tasks`` gives exactly what the per-task implementation gave.

``paired_oracle.py`` is a frozen copy of ``retrieval_lib/stats/paired.py`` before issue 20
(per-task frames). Every field of the two results is compared exactly (values to the bit,
dtypes, column order, notes, reasons), or both refuse with the same message, on the
bundled example study, on the real sample ../shared/corpus/csb and on random pooled tables.
"""

from __future__ import annotations

from pathlib import Path

import paired_oracle
import pandas as pd
import pytest
from matching_tables import random_pooled_table

from retrieval_lib.errors import StatisticsError
from retrieval_lib.stats.paired import match_tasks, pair_configs

CSB = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "csb"


def _outcome(fn, df, b, t, **kwargs):
    try:
        return fn(df, b, t, **kwargs)
    except StatisticsError as exc:
        return f"refused: {exc}"


def assert_same_matching(df: pd.DataFrame, **kwargs: object) -> int:
    """Compare new and old on every config pair, both combine rules, lenient and strict."""
    compared = 0
    for b, t in pair_configs(df["config_name"].dropna().astype(str)):
        for combine in ("mean", "latest"):
            for strict in (False, True):
                opts = dict(combine=combine, strict_harness_version=strict, **kwargs)
                new = _outcome(match_tasks, df, b, t, **opts)
                old = _outcome(paired_oracle.match_tasks, df, b, t, **opts)
                if isinstance(old, str) or isinstance(new, str):
                    assert new == old
                    continue
                for name in ("keys", "baseline_values", "treatment_values", "unmatched"):
                    pd.testing.assert_frame_equal(
                        getattr(new, name), getattr(old, name), check_exact=True, obj=name
                    )
                for name in (
                    "baseline",
                    "treatment",
                    "combine",
                    "value_columns",
                    "strict_harness_version",
                    "n_unverified",
                ):
                    assert getattr(new, name) == getattr(old, name), name
                assert new.summary_line() == old.summary_line()
                pd.testing.assert_frame_equal(new.per_task(), old.per_task(), check_exact=True)
                compared += 1
    return compared


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_pooled_tables_match_exactly(seed):
    df = random_pooled_table(60, seed=seed)
    assert assert_same_matching(df) > 0


def test_archive_shaped_table_matches_exactly():
    # mostly the vectorised common case: one version, one model, latest flags consistent
    df = random_pooled_table(300, seed=11, archive=True)
    assert assert_same_matching(df) > 0


def test_random_table_without_started_at_or_trial_names():
    df = random_pooled_table(60, seed=5)
    assert assert_same_matching(df.drop(columns=["started_at"])) > 0
    assert assert_same_matching(df.drop(columns=["trial_name", "is_latest_trial"])) > 0


def test_unparseable_start_is_refused_the_same_way():
    df = random_pooled_table(40, seed=7)
    df.loc[df.index[::7], "started_at"] = "not a time"
    assert assert_same_matching(df) >= 0


def test_explicit_value_columns_and_empty_matches():
    df = random_pooled_table(30, seed=3)
    assert assert_same_matching(df, value_columns=["reward", "file.ap"]) > 0
    only = df[df["config_name"].isin(["baseline-a", "mcp-x"])].copy()
    only.loc[only["config_name"] == "mcp-x", "task_name"] = "elsewhere"
    assert assert_same_matching(only) > 0


def test_bundled_study_matches_exactly(tmp_path):
    from retrieval_lib.report.pipeline import bundled_examples
    from retrieval_lib.study import load

    found = bundled_examples()
    assert found is not None
    runs, tasks = found
    study = load([runs], tasks_root=tasks, out=tmp_path)
    assert assert_same_matching(study._frame()) > 0


@pytest.mark.skipif(not CSB.is_dir(), reason="../shared/corpus/csb is not here")
def test_csb_corpus_matches_exactly(tmp_path):
    from retrieval_lib.study import load

    study = load([CSB / "runs"], tasks_root=CSB / "benchmarks", out=tmp_path)
    assert assert_same_matching(study._frame()) > 0


def test_columns_of_more_than_62_distinct_texts_match_exactly():
    # more labels than an int64 bit mask holds: the masks are Python integers
    df = random_pooled_table(60, seed=4)
    df["benchmark"] = [f"bench-{i % 97}" for i in range(len(df))]
    df["harness_version_unknown_reason"] = [f"reason {i % 70}" for i in range(len(df))]
    assert assert_same_matching(df) > 0

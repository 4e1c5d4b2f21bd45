"""The study's sections computed once by ``retrieval-lib study`` and read back by the
notebook (``study.sections``), on the hand-made study of ``synthetic.py``.

Expected values are the hand-worked ones of ``test_synthetic_study.py`` (read back from the
files, not recomputed), and every stored table equals what the in-memory study gives.
"""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.report.study_report import run_study
from retrieval_lib.study import StudyOptions
from retrieval_lib.study.sections import read_sections

from . import synthetic


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("sections")
    runs, tasks = synthetic.build(root)
    report = run_study(
        [runs], tasks, root / "out", report=False, log=lambda _l: None, params={"n_boot": 500}
    )
    return root, report


def test_the_command_writes_the_sections_and_the_trial_tables(written):
    _root, report = written
    tables = report.study_dir / "tables"
    names = {p.name for p in tables.iterdir()}
    assert {"trials.parquet", "events.parquet", "metrics.parquet", "pairs.parquet"} <= names
    assert {"sections.json", "section_leaderboard_all.parquet"} <= names
    assert "section_impact_per_task.parquet" in names
    # the trial-level tables are written once, the index points at them
    assert not {"section_trials.parquet", "section_pairs.parquet"} & names


def test_sections_are_read_without_the_runs(written):
    root, report = written
    # the reader needs only the tables folder: the evaluated runs may be gone
    copy = root / "copy"
    shutil.copytree(report.study_dir / "tables", copy / "tables")
    sections = read_sections(copy / "tables", options=StudyOptions(n_boot=500))
    per_task = sections.impact().per_task.set_index(["task_name", "model"])
    # hand-worked in test_synthetic_study: alpha-001/m1 baseline 0.25 over 2 trials, mcp 1.0
    row = per_task.loc[("alpha-001", "m1")]
    assert (row["n_trials_baseline"], row["n_trials_treatment"]) == (2, 1)
    assert row["baseline:reward"] == pytest.approx(0.25)
    reward = sections.matched().set_index("metric").loc["reward"]
    assert reward["mean_delta"] == pytest.approx(0.5625)
    assert sections.family_pairs() == [("baseline-local-direct", "mcp-remote-direct")]
    assert len(sections.trials) == 11
    shown = sections.timeline_trials([], top=2)
    assert shown["task_name"].tolist() == ["gamma-003", "alpha-001"]
    frame = sections.timeline(shown.iloc[0]["treatment_trial"])
    assert frame["file"].tolist() == ["src/d.py", "src/e.py", "src/f.py"]
    assert frame["first_hit"].tolist() == [True, True, False]
    # ground-truth files come back as tuples (the timeline cell takes sets of them)
    assert isinstance(sections.trials["ground_truth_files"].iloc[0], tuple)


def test_every_stored_table_equals_the_in_memory_study(written):
    _root, report = written
    study = report.study
    sections = read_sections(report.study_dir / "tables")
    checks = {
        "leaderboard": (sections.leaderboard(), study.leaderboard()),
        "unflagged": (
            sections.with_options(exclude_flagged=True).leaderboard(),
            study.with_options(exclude_flagged=True).leaderboard(),
        ),
        "matched": (sections.matched(), study.matched()),
        "tiers": (sections.tiers("file.recall"), study.tiers("file.recall")),
        "tools": (sections.tool_value("tool"), study.tool_value("tool")),
        "categories": (sections.tool_value("category"), study.tool_value("category")),
        "overview": (sections.overview(), study.overview()),
        "flags": (sections.flags(), study.flags()),
        "pairs": (sections.pairs(), study.pairs()),
        "calibration": (sections.calibration("file.recall"), study.calibration("file.recall")),
        "comparisons": (sections.impact().comparisons, study.impact().comparisons),
        "correlations": (sections.impact().correlations, study.impact().correlations),
        "unmatched": (sections.impact().unmatched, study.impact().unmatched),
        "family_comparisons": (sections.family_comparisons(), study.family_comparisons()),
        "compare_table": (sections.compare().table, study.compare().table),
        "friedman": (sections.compare().friedman, study.compare().friedman),
        "model_effects": (sections.model_effects(), study.model_effects()),
    }
    for name, (stored, computed) in checks.items():
        pd.testing.assert_frame_equal(
            stored.reset_index(drop=True),
            computed.reset_index(drop=True),
            check_dtype=False,
            check_categorical=False,
            obj=name,
        )
    assert sections.impact().params["metrics"] == study.impact().params["metrics"]
    assert sections.compare().to_latex() == study.compare().to_latex()


def test_other_options_or_another_timeline_are_refused_not_recomputed(written):
    _root, report = written
    tables = report.study_dir / "tables"
    with pytest.raises(InputError, match="other options"):
        read_sections(tables, options=StudyOptions(n_boot=500, seed=7))
    sections = read_sections(tables)
    with pytest.raises(InputError, match="cannot be recomputed"):
        sections.with_options(min_pairs=1)
    with pytest.raises(InputError, match="timeline"):
        sections.timeline_trials(["beta-002"])


def test_a_folder_without_sections_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="no study sections"):
        read_sections(tmp_path)

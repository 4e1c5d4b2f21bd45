"""The study on the real sample in ../shared/corpus/csb: two runs pooled, three matched tasks.

Rewards from the trials' result.json: django 1.0 (baseline) vs 1.0 (MCP), envoy 1.0 vs
0.67 (0.666... in the file), llamacpp 0.0 vs 0.0; the llamacpp pair lives in the second
run (ccb_test_haiku_022326), so only pooling matches all three.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from retrieval_lib.cli import main
from retrieval_lib.study import load

CSB = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "csb"
pytestmark = pytest.mark.skipif(not CSB.is_dir(), reason="../shared/corpus/csb is not here")


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = tmp_path_factory.mktemp("csb-study")
    return load([CSB / "runs"], tasks_root=CSB / "benchmarks", out=out)


def test_pooling_matches_the_three_tasks_of_both_runs(study):
    per_task = study.impact().per_task.set_index("task_name")
    assert sorted(per_task.index) == [
        "django-modeladmin-impact-001",
        "envoy-routeconfig-dep-chain-001",
        "llamacpp-context-window-search-001",
    ]
    assert per_task.loc["envoy-routeconfig-dep-chain-001", "delta:reward"] == pytest.approx(
        0.67 - 1.0, abs=0.01
    )
    assert per_task.loc["django-modeladmin-impact-001", "delta:reward"] == 0.0
    assert per_task.loc["llamacpp-context-window-search-001", "delta:reward"] == 0.0
    runs = study.pairs().groupby("task_name")["run_id"].unique().map(sorted).to_dict()
    assert runs["llamacpp-context-window-search-001"] == ["ccb_test_haiku_022326"]
    reward = study.matched().set_index("metric").loc["reward"]
    # issue 22: three tasks, one non-zero delta is described, not tested
    assert not bool(reward["tested"]) and int(reward["n"]) == 3
    assert reward["mean_delta"] == pytest.approx((0.67 - 1.0) / 3, abs=0.01)
    assert "non-zero paired deltas: 1 of 3" in reward["reason"]


def test_each_run_alone_is_below_the_minimum_and_shows_its_deltas_untested(tmp_path):
    study = load(
        [CSB / "runs" / "official" / "ccb_design_haiku_20260228_025547"],
        tasks_root=CSB / "benchmarks",
        out=tmp_path,
    )
    reward = study.matched().set_index("metric").loc["reward"]
    assert int(reward["n"]) == 2 and not bool(reward["tested"])
    assert reward["mean_delta"] == pytest.approx((0.0 + (0.67 - 1.0)) / 2, abs=0.01)
    assert reward["reason"].startswith("no test: n=2")


def test_tool_value_counts_the_mcp_keyword_search_of_the_django_trial(study):
    # event 0 of the django MCP trial (sg_keyword_search) surfaced all five ground-truth
    # files: they are first found by keyword_search
    events = study.events
    django = events[events["trial_id"].str.contains("mcp-remote-direct/django")]
    first = django.iloc[0]
    assert first["tool"] == "keyword_search" and len(first["first_found_ground_truth_files"]) == 5
    assert first["elapsed_seconds"] == pytest.approx(8.810244, abs=1e-6)


def test_the_cli_writes_the_study_report_and_leaves_the_corpus_untouched(tmp_path, capsys):
    before = _tree_digest(CSB)
    argv = [
        "study",
        str(CSB / "runs"),
        "--tasks-root",
        str(CSB / "benchmarks"),
        "--out",
        str(tmp_path),
        "--no-report",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "study: 6 trials in 2 run(s), 3 matched task(s)" in out
    names = sorted(p.name for p in (tmp_path / "study" / "tables").iterdir())
    trial_level = [f"{n}.parquet" for n in ("events", "metrics", "pairs", "tools", "trials")]
    assert set(trial_level) <= set(names)
    assert {"compare.md", "compare.tex"} <= set(names)
    # and every section the notebook shows, computed once (study.sections)
    assert "sections.json" in names and "section_impact_per_task.parquet" in names
    exported = {*trial_level, "sections.json", "compare.md", "compare.tex"}
    assert all(n in exported or n.startswith("section_") for n in names)
    assert _tree_digest(CSB) == before

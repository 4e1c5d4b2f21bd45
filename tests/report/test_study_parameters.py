"""``study``: parameters checked with or without a report; a warning before a study of
other runs is replaced (issue 21, items 2 and 8)."""

from __future__ import annotations

import pytest

from retrieval_lib.cli import main
from retrieval_lib.report.pipeline import bundled_examples
from retrieval_lib.report.study_report import run_study

pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def example():
    found = bundled_examples()
    if found is None:
        pytest.skip("the bundled example runs are missing")
    runs, tasks = found
    one = runs / "official" / "csb_synth_haiku_20260301_091500"
    other = runs / "official" / "archive" / "csb_synth_haiku_022826"
    assert one.is_dir() and other.is_dir()
    return one, other, tasks


@pytest.mark.parametrize("text", ["min_pairs: 0", "n_boot: -5", "alpha: 0", 'timeline_x: "foo"'])
def test_study_no_report_checks_its_parameters_before_anything_runs(
    example, tmp_path, capsys, text
):
    # min_pairs: 0 used to end in "no values to bootstrap"; timeline_x: "foo" was accepted
    one, _, tasks = example
    params = tmp_path / "p.yaml"
    params.write_text(text + "\n")
    out = tmp_path / "out"
    argv = ["study", str(one), "--tasks-root", str(tasks), "--out", str(out), "-f", str(params)]
    assert main([*argv, "--no-report"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "must be" in err
    assert not out.exists()


def test_a_study_of_other_runs_is_replaced_with_a_warning_first(example, tmp_path):
    one, other, tasks = example
    out = tmp_path / "out"
    lines: list[str] = []
    first = run_study([one], tasks, out, report=False, log=lines.append, params={"min_pairs": 1})
    assert not [line for line in lines if line.startswith("warning")]
    # the smallest documented min_pairs works (the matched comparison is tested)
    assert first.study.impact().comparisons["computable"].any()
    lines.clear()
    run_study([one], tasks, out, report=False, log=lines.append)  # the same study: no word
    assert not [line for line in lines if line.startswith("warning")]
    lines.clear()
    run_study([other], tasks, out, report=False, log=lines.append)
    warnings = [line for line in lines if line.startswith("warning")]
    assert warnings == [
        f"warning: {out / 'study'}/ holds the study of other runs ({one.resolve()}); replacing "
        f"it with the study of {other.resolve()} (give another --out to keep both)"
    ]
    assert lines.index(warnings[0]) == 0  # said before the runs are prepared

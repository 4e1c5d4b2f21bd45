"""The pipeline on the bundled example: preparing it, evaluating it, the impact parameters."""

import json
from pathlib import Path

import pytest

from retrieval_lib.errors import InputError, ReportError
from retrieval_lib.report import pipeline

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def _manifest(root: Path) -> dict:
    return json.loads((root / "synth_manifest.json").read_text(encoding="utf-8"))


def test_bundled_examples_are_the_committed_folder():
    found = pipeline.bundled_examples()
    if not (EXAMPLES / "synth_manifest.json").is_file():
        assert found is None
        pytest.skip("examples/ has no synthetic runs in this checkout")
    assert found == (EXAMPLES / "runs", EXAMPLES / "benchmarks")


def test_prepare_example_runs_copies_and_replaces_an_earlier_copy(tmp_path):
    out = tmp_path / "example_data"
    runs, tasks = pipeline.prepare_example_runs(out)
    assert (runs, tasks) == (out / "runs", out / "benchmarks")
    manifest = _manifest(out)
    assert manifest["trials"]
    for trial in manifest["trials"]:
        assert (out / trial["trial_dir"] / "result.json").is_file(), trial["trial_dir"]
    (runs / "stale.txt").write_text("left over")
    pipeline.prepare_example_runs(out)
    assert not (runs / "stale.txt").exists()
    assert _manifest(out) == manifest


def test_prepare_example_runs_refuses_a_foreign_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="refusing"):
        pipeline.prepare_example_runs(tmp_path)


def test_example_run_evaluates_the_largest_run(tmp_path):
    run_dir = pipeline.example_run(tmp_path)
    events = run_dir / "retrieval_events"
    assert (events / "run_retrieval_summary.json").is_file()
    summary = json.loads((events / "run_retrieval_summary.json").read_text(encoding="utf-8"))
    source = pipeline.bundled_examples()
    manifest = _manifest(source[0].parent if source else tmp_path / "example_data")
    per_run: dict[str, int] = {}
    for trial in manifest["trials"]:
        per_run[trial["run_id"]] = per_run.get(trial["run_id"], 0) + 1
    largest = max(sorted(per_run), key=lambda r: per_run[r])
    assert run_dir.name == largest
    assert summary["counts"]["documents"] == per_run[largest]
    # nothing is written next to the example runs themselves
    if source is not None:
        assert not list(source[0].rglob("retrieval_events"))


def test_run_pipeline_hands_seed_and_n_boot_to_the_impact_analysis(tmp_path):
    source = pipeline.bundled_examples()
    if source is None:
        pytest.skip("needs the committed example runs")
    runs, tasks = source
    one_run = sorted((runs / "official").glob("csb_synth_*"))[0]
    results = pipeline.run_pipeline(
        [one_run],
        tasks,
        tmp_path,
        params={"seed": 5, "n_boot": 300},
        report=False,
        log=lambda line: None,
    )
    assert [r.run_id for r in results] == [one_run.name]
    assert results[0].html is None
    impact = json.loads(
        (tmp_path / one_run.name / "retrieval_events" / "retrieval_impact.json").read_text()
    )
    assert (impact["params"]["seed"], impact["params"]["n_boot"]) == (5, 300)


def test_run_pipeline_checks_parameters_before_normalising(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ReportError, match="unknown parameter.*sede"):
        pipeline.run_pipeline([tmp_path], None, out, params={"sede": 1})
    with pytest.raises(ReportError, match="must be an integer of at least 0"):
        pipeline.run_pipeline([tmp_path], None, out, params={"seed": "1"})
    assert not out.exists()


def test_run_pipeline_strict_harness_version_and_its_summary_line(tmp_path):
    source = pipeline.bundled_examples()
    if source is None:
        pytest.skip("needs the committed example runs")
    runs, tasks = source
    run = runs / "official" / "csb_synth_haiku_20260301_091500"
    # istio-config-option-001's baseline trial has no trace, so its version is unknown
    lines: dict[bool, list[str]] = {False: [], True: []}
    for strict in (False, True):
        pipeline.run_pipeline(
            [run],
            tasks,
            tmp_path / str(strict),
            params={"n_boot": 100, "strict_harness_version": strict},
            report=False,
            log=lines[strict].append,
        )
    prefix = f"matched {run.name}, baseline-local-direct vs mcp-remote-direct: "
    assert prefix + "8 matched (1 with unverified harness version); strict: 7" in lines[False]
    assert (
        prefix + "7 matched (strict harness version; 1 with unverified harness version left out)"
        in lines[True]
    )
    impact = json.loads(
        (tmp_path / "True" / run.name / "retrieval_events" / "retrieval_impact.json").read_text()
    )
    assert impact["params"]["strict_harness_version"] is True
    assert "istio-config-option-001" not in {r["task_name"] for r in impact["per_task"]}
    assert {r["reason"] for r in impact["unmatched"]} == {
        "harness version unverified (strict mode): baseline version unknown (no trace)"
    }

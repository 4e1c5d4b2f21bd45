"""End-to-end normalisation on the real corpus and on hand-made run folders."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.events.document import find_documents, load_document
from retrieval_lib.normalize import normalize_paths, normalize_trial

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus" / "csb"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"real corpus not found at {CORPUS}")
DESIGN = "ccb_design_haiku_20260228_025547"


def _tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def corpus_out(tmp_path_factory):
    if not CORPUS.is_dir():
        pytest.skip(f"real corpus not found at {CORPUS}")
    out = tmp_path_factory.mktemp("norm")
    before = _tree_digest(CORPUS)
    report = normalize_paths([CORPUS / "runs"], CORPUS / "benchmarks", out=out, workers=1)
    assert _tree_digest(CORPUS) == before, "normalisation must not touch its input"
    return out, report


def _doc(out: Path, run: str, config: str, task: str) -> dict:
    return load_document(out / run / "retrieval_events" / config / f"{task}.retrieval_events.json")


@needs_corpus
def test_every_corpus_trial_yields_one_valid_document(corpus_out):
    out, report = corpus_out
    assert (report.trials, report.failed) == (6, 0)
    docs = find_documents([out])
    assert len(docs) == 6
    for path in docs:
        load_document(path)  # validates


@needs_corpus
def test_provenance_of_the_archived_layout_and_prefixed_mcp_names(corpus_out):
    out, _ = corpus_out
    doc = _doc(
        out, "ccb_test_haiku_022326", "mcp-remote-direct", "llamacpp-context-window-search-001"
    )
    prov = doc["provenance"]
    # Values read off result.json by hand: task_name "sgonly_llamacpp-context-window-search-001".
    assert prov["raw_task_name"] == "sgonly_llamacpp-context-window-search-001"
    assert prov["batch_timestamp"] is None
    assert prov["benchmark"] == "ccb_test"
    assert prov["model"] == "claude-haiku-4-5-20251001"
    assert doc["coverage"]["has_ground_truth"] is False
    assert "no file-level ground truth" in doc["coverage"]["degraded_reason"]


@needs_corpus
def test_mcp_trial_finds_its_ground_truth_in_the_first_keyword_search(corpus_out):
    out, _ = corpus_out
    doc = _doc(out, DESIGN, "mcp-remote-direct", "django-modeladmin-impact-001")
    assert doc["provenance"]["raw_task_name"] == "mcp_django-modeladmin-impact-001_1Q2fNL"
    assert doc["provenance"]["batch_timestamp"] == "2026-02-28__03-14-34"
    first = doc["events"][0]
    assert first["tool_name"] == "mcp__sourcegraph__sg_keyword_search"
    # The block files of steps[3] (step_id 4) of trajectory.json, in order.
    assert first["target_files"] == [
        "tests/admin_changelist/admin.py",
        "django/contrib/admin/options.py",
        "tests/modeladmin/tests.py",
        "docs/ref/contrib/admin/index.txt",
        "docs/releases/1.5.txt",
    ]
    assert sorted(first["matched_ground_truth_files"]) == doc["ground_truth"]["files"]
    # 03:15:14.150Z (step timestamp) - 03:15:05.339756 (agent_execution.started_at).
    assert first["elapsed_seconds"] == pytest.approx(8.810244)
    assert doc["summary"]["first_ground_truth_hit_step"] == 0
    # task_metrics.json beside the trial: tool_calls_total 28, tool_calls_mcp 26.
    assert (doc["summary"]["total_events"], doc["summary"]["mcp_events"]) == (28, 26)


@needs_corpus
def test_baseline_transcript_outcome_prefers_the_trace_totals(corpus_out):
    out, _ = corpus_out
    doc = _doc(out, DESIGN, "baseline-local-direct", "django-modeladmin-impact-001")
    outcome = doc["outcome"]
    # result.json: reward 1.0, agent_execution 03:14:20.867411 -> 03:15:24.713264.
    assert outcome["reward"] == 1.0 and outcome["passed"] is True
    assert outcome["agent_execution_seconds"] == pytest.approx(63.845853)
    # The transcript's result line: total_cost_usd 0.04903835 (result.json says null).
    assert outcome["cost_usd"] == pytest.approx(0.04903835)
    assert outcome["cost_source"].startswith("transcript")
    assert doc["coverage"]["trace_source"] == "transcript"
    assert doc["summary"]["total_events"] == 11


def _write_trial(run: Path, config: str, batch: str, trial: str, task: str, started: str, reward):
    folder = run / config / batch / trial
    (folder / "agent").mkdir(parents=True)
    result = {
        "task_name": task,
        "trial_name": trial,
        "config": {"agent": {"model_name": "anthropic/m1"}},
        "agent_info": {"name": "claude-code", "version": "1.0.0"},
        "verifier_result": {"rewards": {"reward": reward}},
        "exception_info": None,
        "started_at": started,
        "agent_execution": {"started_at": started, "finished_at": started},
    }
    (folder / "result.json").write_text(json.dumps(result))
    return folder


def test_repeated_trials_keep_one_document_each_and_mark_the_latest(tmp_path):
    run = tmp_path / "runs" / "official" / "r1"
    _write_trial(
        run,
        "baseline",
        "2026-01-01__00-00-00",
        "t-001__aaaaaaa",
        "t-001",
        "2026-01-01T00:00:00",
        1.0,
    )
    _write_trial(
        run,
        "baseline",
        "2026-01-02__00-00-00",
        "t-001__bbbbbbb",
        "t-001",
        "2026-01-02T00:00:00",
        0.0,
    )
    out = tmp_path / "out"
    report = normalize_paths([tmp_path / "runs"], None, out=out)
    assert report.trials == 2
    names = sorted(p.name for p in find_documents([out]))
    assert names == ["t-001__aaaaaaa.retrieval_events.json", "t-001__bbbbbbb.retrieval_events.json"]
    latest = {
        p.name: load_document(p)["provenance"]["is_latest_trial"] for p in find_documents([out])
    }
    assert latest == {
        "t-001__aaaaaaa.retrieval_events.json": False,
        "t-001__bbbbbbb.retrieval_events.json": True,
    }


def test_a_trial_without_trace_is_degraded_not_dropped(tmp_path):
    run = tmp_path / "r1"
    folder = _write_trial(
        run, "mcp", "2026-01-01__00-00-00", "t-002__ccccccc", "t-002", "2026-01-01T00:00:00", None
    )
    doc = normalize_trial(folder, None)
    assert doc["events"] == []
    assert doc["coverage"]["trace_source"] is None
    assert doc["coverage"]["degraded_reason"].startswith("no trace")
    assert doc["outcome"]["reward"] is None  # missing, not 0


def test_a_hostile_task_name_cannot_write_outside_the_output(tmp_path):
    run = tmp_path / "r1"
    _write_trial(
        run,
        "baseline",
        "2026-01-01__00-00-00",
        "x__ddddddd",
        "../../../escaped",
        "2026-01-01T00:00:00",
        1.0,
    )
    out = tmp_path / "out"
    normalize_paths([run], None, out=out)
    written = [p for p in tmp_path.rglob("*.retrieval_events.json")]
    assert written and all(out.resolve() in p.resolve().parents for p in written)


def test_cli_normalize_reports_a_missing_tasks_root_as_failure(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrieval_lib",
            "normalize",
            str(tmp_path),
            "--tasks-root",
            str(tmp_path / "nope"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "is not a folder" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_normalize_without_tasks_root_is_a_usage_error(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "retrieval_lib", "normalize", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2


def test_a_second_pass_removes_documents_that_became_stale(tmp_path):
    run = tmp_path / "runs" / "r1"
    _write_trial(
        run,
        "baseline",
        "2026-01-01__00-00-00",
        "t-003__aaaaaaa",
        "t-003",
        "2026-01-01T00:00:00",
        1.0,
    )
    out = tmp_path / "out"
    normalize_paths([run], None, out=out)
    single = out / "r1" / "retrieval_events" / "baseline" / "t-003.retrieval_events.json"
    assert single.is_file()
    metrics = single.with_name("t-003.retrieval_metrics.json")
    metrics.write_text("{}")  # as `retrieval-lib evaluate` would have written
    # the pair gains a trial: both are written as <task>__<id>, the old file must go
    _write_trial(
        run,
        "baseline",
        "2026-01-02__00-00-00",
        "t-003__bbbbbbb",
        "t-003",
        "2026-01-02T00:00:00",
        0.0,
    )
    report = normalize_paths([run], None, out=out)
    assert report.removed_stale == 1
    assert not single.exists() and not metrics.exists()
    assert sorted(p.name for p in find_documents([out])) == [
        "t-003__aaaaaaa.retrieval_events.json",
        "t-003__bbbbbbb.retrieval_events.json",
    ]


def test_runs_sharing_a_name_are_refused_with_out(tmp_path):
    for stage in ("official", "staging"):
        _write_trial(
            tmp_path / "runs" / stage / "r1",
            "baseline",
            "2026-01-01__00-00-00",
            "t__aaaaaaa",
            "t",
            "2026-01-01T00:00:00",
            1.0,
        )
    with pytest.raises(InputError, match="share the run id 'r1'"):
        normalize_paths([tmp_path / "runs"], None, out=tmp_path / "out")
    # without --out each run writes inside itself: no clash
    assert normalize_paths([tmp_path / "runs"], None).trials == 2


def test_normalizing_dot_gives_the_folder_name_as_run_id(tmp_path, monkeypatch):
    run = tmp_path / "my_run"
    _write_trial(
        run, "baseline", "2026-01-01__00-00-00", "t__aaaaaaa", "t", "2026-01-01T00:00:00", 1.0
    )
    monkeypatch.chdir(run)
    normalize_paths(["."], None, out=tmp_path / "out")
    (doc_path,) = find_documents([tmp_path / "out"])
    assert load_document(doc_path)["provenance"]["run_id"] == "my_run"


def test_an_unexpected_error_in_one_trial_is_recorded_and_the_run_goes_on(tmp_path, monkeypatch):
    import retrieval_lib.normalize as normalize_module

    run = tmp_path / "r1"
    _write_trial(
        run, "baseline", "2026-01-01__00-00-00", "ok__aaaaaaa", "ok", "2026-01-01T00:00:00", 1.0
    )
    _write_trial(
        run, "baseline", "2026-01-01__00-00-00", "bad__bbbbbbb", "bad", "2026-01-01T00:00:00", 1.0
    )
    real = normalize_module.build_document

    def flaky(trial, result, *args, **kwargs):
        if result.task_name == "bad":
            raise RuntimeError("boom")
        return real(trial, result, *args, **kwargs)

    monkeypatch.setattr(normalize_module, "build_document", flaky)
    report = normalize_paths([run], None, out=tmp_path / "out")
    assert (report.trials, report.failed) == (2, 1)
    (failed,) = report.failures
    assert failed.task_name == "bad" and failed.error == "RuntimeError: boom"
    assert [p.name for p in find_documents([tmp_path / "out"])] == ["ok.retrieval_events.json"]


def test_the_cycle_collector_is_paused_per_trial_and_restored_after_a_failure(
    tmp_path, monkeypatch
):
    import gc

    import retrieval_lib.normalize as normalize_module

    run = tmp_path / "r1"
    for name, task in (("ok__aaaaaaa", "ok"), ("bad__bbbbbbb", "bad")):
        _write_trial(run, "baseline", "2026-01-01__00-00-00", name, task, "2026-01-01T00:00:00", 1)
    real = normalize_module.build_document
    seen = []

    def watching(trial, result, *args, **kwargs):
        seen.append(gc.isenabled())
        if result.task_name == "bad":
            raise RuntimeError("boom")
        return real(trial, result, *args, **kwargs)

    monkeypatch.setattr(normalize_module, "build_document", watching)
    assert gc.isenabled()
    report = normalize_paths([run], None, out=tmp_path / "out")
    assert (report.trials, report.failed, seen) == (2, 1, [False, False])
    assert gc.isenabled()  # back on, the failing trial included
    gc.disable()  # a caller that switched it off keeps it off
    try:
        normalize_paths([run], None, out=tmp_path / "out2")
        assert not gc.isenabled()
    finally:
        gc.enable()


@needs_corpus
def test_harness_version_and_its_source_on_the_corpus(corpus_out):
    out, _ = corpus_out
    # By hand: every result.json says agent_info.version "unknown"; the transcripts' init
    # lines say claude_code_version 2.1.62 (design) and 2.1.50 (llamacpp), the trajectories'
    # agent blocks the same.
    expected = {
        (DESIGN, "baseline-local-direct", "django-modeladmin-impact-001"): (
            "2.1.62",
            "agent/claude-code.txt init line",
        ),
        (DESIGN, "mcp-remote-direct", "django-modeladmin-impact-001"): (
            "2.1.62",
            "agent/trajectory.json agent.version",
        ),
        (DESIGN, "mcp-remote-direct", "envoy-routeconfig-dep-chain-001"): (
            "2.1.62",
            "agent/trajectory.json agent.version",
        ),
        ("ccb_test_haiku_022326", "baseline-local-direct", "llamacpp-context-window-search-001"): (
            "2.1.50",
            "agent/claude-code.txt init line",
        ),
        ("ccb_test_haiku_022326", "mcp-remote-direct", "llamacpp-context-window-search-001"): (
            "2.1.50",
            "agent/trajectory.json agent.version",
        ),
    }
    for (run, config, task), (version, source) in expected.items():
        prov = _doc(out, run, config, task)["provenance"]
        assert (prov["harness_version"], prov["harness_version_source"]) == (version, source)
        assert prov["harness_version_unknown_reason"] is None


def _with_result_version(folder: Path, version: str) -> None:
    result = json.loads((folder / "result.json").read_text())
    result["agent_info"]["version"] = version
    (folder / "result.json").write_text(json.dumps(result))


def test_harness_version_from_a_trajectory_that_is_otherwise_unusable(tmp_path):
    folder = _write_trial(
        tmp_path / "r1",
        "mcp",
        "2026-01-01__00-00-00",
        "t-003__ddddddd",
        "t-003",
        "2026-01-01T00:00:00",
        1.0,
    )
    _with_result_version(folder, "unknown")
    trajectory = {
        "schema_version": "ATIF-v1.2",
        "agent": {"name": "claude-code", "version": "2.1.62", "model_name": "m1"},
        "steps": "not a list",
    }
    (folder / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    doc = normalize_trial(folder, None)
    prov = doc["provenance"]
    assert doc["coverage"]["trace_source"] is None  # no usable trace ...
    assert doc["coverage"]["degraded_reason"].startswith("no usable trace")
    # ... but the agent block still names the version
    assert (prov["harness_version"], prov["harness_version_source"]) == (
        "2.1.62",
        "agent/trajectory.json agent.version",
    )
    assert prov["harness_version_unknown_reason"] is None


def test_harness_version_unknown_says_why(tmp_path):
    run = tmp_path / "r1"
    no_trace = _write_trial(run, "mcp", "b", "t-004__eeeeeee", "t-004", "2026-01-01T00:00:00", 1.0)
    _with_result_version(no_trace, "unknown")
    broken = _write_trial(run, "mcp", "b", "t-005__fffffff", "t-005", "2026-01-01T00:00:00", 1.0)
    _with_result_version(broken, "")
    (broken / "agent" / "trajectory.json").write_text('{"agent": {"name": "claude-code", "ver')
    reasons = {
        "no trace": normalize_trial(no_trace, None)["provenance"],
        "no usable trace": normalize_trial(broken, None)["provenance"],
    }
    for reason, prov in reasons.items():
        assert prov["harness_version"] is None and prov["harness_version_source"] is None
        assert prov["harness_version_unknown_reason"] == reason
    # cut off after its agent block (an agent killed mid-run): the version is still read
    (broken / "agent" / "trajectory.json").write_text('{"agent": {"version": "2.1.62"}, "ste')
    prov = normalize_trial(broken, None)["provenance"]
    assert (prov["harness_version"], prov["harness_version_source"]) == (
        "2.1.62",
        "agent/trajectory.json agent.version",
    )


def test_result_json_version_wins_and_a_disagreeing_trace_is_a_degraded_reason(tmp_path):
    folder = _write_trial(
        tmp_path / "r1", "baseline", "b", "t-006__ggggggg", "t-006", "2026-01-01T00:00:00", 1.0
    )
    init = {"type": "system", "subtype": "init", "model": "m1", "claude_code_version": "2.1.62"}
    (folder / "agent" / "claude-code.txt").write_text(json.dumps(init) + "\n")
    doc = normalize_trial(folder, None)
    prov = doc["provenance"]
    assert (prov["harness_version"], prov["harness_version_source"]) == (
        "1.0.0",
        "result.json agent_info.version",
    )
    assert (
        "harness version 2.1.62 in agent/claude-code.txt init line differs from 1.0.0 in "
        "result.json agent_info.version; using 1.0.0"
    ) in doc["coverage"]["degraded_reasons"]


# The corpus (MANIFEST.tsv): 3 tasks x 2 configs = 6 trials, each with a trace (django and
# envoy baseline: claude-code.txt, their MCP twins: trajectory.json; llamacpp baseline:
# claude-code.txt, MCP: trajectory.json). File-level ground truth: only django
# (tests/ground_truth.json); envoy has only ground_truth_meta.json (no files) and llamacpp
# only task.toml/test.sh, so 2 x 2 = 4 trials have none.
@needs_corpus
def test_summary_counts_trials_without_ground_truth_apart_from_degraded(corpus_out):
    _, report = corpus_out
    assert report.counts_line() == (
        "6 trials: 6 documents (0 degraded: no trace; 4 without ground truth), 0 failed"
    )
    assert report.summary_line().startswith(
        "normalized 2 run(s), 6 trials: 6 documents (0 degraded: no trace; "
        "4 without ground truth), 0 failed; "
    )


@needs_corpus
def test_cli_summary_line_with_one_trace_removed(tmp_path):
    import shutil

    runs = tmp_path / "runs"
    shutil.copytree(CORPUS / "runs", runs)
    trial = next(runs.rglob("django-modeladmin-impact-001__8pRTT8b"))
    (trial / "agent" / "claude-code.txt").unlink()  # the django baseline loses its only trace
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "retrieval_lib",
            "normalize",
            str(runs),
            "--tasks-root",
            str(CORPUS / "benchmarks"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("normalized"))
    # django baseline: degraded (no trace) but it has ground truth; the 4 envoy/llamacpp
    # trials still lack ground truth: the two counts stay apart.
    assert line.startswith(
        "normalized 2 run(s), 6 trials: 6 documents (1 degraded: no trace; "
        "4 without ground truth), 0 failed; "
    )


@needs_corpus
def test_placeholder_output_tokens_are_flagged_in_outcome_and_metrics_table(corpus_out):
    from retrieval_lib.metrics.stages import evaluate_documents
    from retrieval_lib.metrics.summary import metrics_table

    out, _ = corpus_out
    llamacpp = "llamacpp-context-window-search-001"
    doc = _doc(out, "ccb_test_haiku_022326", "mcp-remote-direct", llamacpp)
    outcome = doc["outcome"]
    # 3 API messages with completion [4,4,4,4], [2,2,2,2], [1,1]: 7 distinct, 26 per step
    # (result.json n_output_tokens 26): both are sums of stream placeholders.
    assert outcome["output_tokens"] == 7
    assert outcome["tokens_source"] == "trajectory.steps(deduplicated)"
    assert outcome["output_tokens_placeholder"] is True
    assert "says 26" in outcome["output_tokens_note"]
    # the baseline twin's transcript has modelUsage (outputTokens 5069): not a placeholder
    baseline = _doc(out, "ccb_test_haiku_022326", "baseline-local-direct", llamacpp)["outcome"]
    assert (baseline["output_tokens"], baseline["output_tokens_placeholder"]) == (5069, False)

    docs = [load_document(p) for p in find_documents([out])]
    table = metrics_table(evaluate_documents(docs))
    flags = {
        (row.config_name, row.task_name): row.output_tokens_placeholder
        for row in table.itertuples()
    }
    assert str(table["output_tokens_placeholder"].dtype) == "boolean"
    # only the llamacpp MCP trial (old trajectory) is flagged among the 6
    assert flags == {
        (config, task): (config, task) == ("mcp-remote-direct", llamacpp)
        for config in ("baseline-local-direct", "mcp-remote-direct")
        for task in ("django-modeladmin-impact-001", "envoy-routeconfig-dep-chain-001", llamacpp)
    }


def test_merging_reports_adds_every_count_and_keeps_the_failures() -> None:
    from retrieval_lib.normalize import NormalizeReport, TrialOutput

    a, b = NormalizeReport(runs=["r1"]), NormalizeReport(runs=["r2"])
    a.add(TrialOutput("r1/t1", "r1/x.json", "t1", "c", 3, 100, "gap", no_trace=True), "r1")
    b.add(TrialOutput("r2/t2", "r2/y.json", "t2", "c", 5, 50, None, no_ground_truth=True), "r2")
    b.add(TrialOutput("r2/t3", None, "t3", "c", 0, 0, None, "broken"), "r2")
    b.removed_stale, b.seconds = 2, 9.0
    a.merge(b)
    assert (a.trials, a.documents, a.failed, a.events, a.trace_bytes) == (3, 2, 1, 8, 150)
    assert (a.degraded, a.without_ground_truth, a.with_gaps, a.removed_stale) == (1, 1, 1, 2)
    assert a.documents_by_run == {"r1": 1, "r2": 1}
    assert [o.trial_dir for o in a.failures] == ["r2/t3"]
    assert a.seconds == 0.0  # the merged pass's own time is the caller's to set

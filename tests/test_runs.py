"""Tests of retrieval_lib.runs: task names, run/trial discovery, result.json, task folders.

Expected values come from the hand-made tree under tests/fixtures/runs/ and from the real
runs in ../shared/corpus/csb (read from their result.json files by hand).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from retrieval_lib.errors import InputError
from retrieval_lib.runs import (
    TaskIndex,
    TrialRef,
    canonical_task_name,
    discover_runs,
    discover_trials,
    read_trial_result,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
RUNS = REPO_ROOT / "tests" / "fixtures" / "runs"
TASKS = REPO_ROOT / "tests" / "fixtures" / "tasks"
CORPUS = REPO_ROOT / ".." / "shared" / "corpus" / "csb"

needs_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="real corpus ../shared/corpus/csb is absent"
)

BATCH_RUN = RUNS / "official" / "batch_run_20260101"
ARCHIVE_RUN = RUNS / "official" / "archive" / "archive_run_022326"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("mcp_django-modeladmin-impact-001_1Q2fNL", "django-modeladmin-impact-001"),
        ("sgonly_llamacpp-context-window-search-001", "llamacpp-context-window-search-001"),
        ("sg_only_envoy-routeconfig-dep-chain-001", "envoy-routeconfig-dep-chain-001"),
        ("baseline_Django-Admin-001", "django-admin-001"),
        ("mcp_sgonly_ccx-compliance-057-ds_Ab12Cd", "ccx-compliance-057-ds"),
        ("envoy-routeconfig-dep-chain-001", "envoy-routeconfig-dep-chain-001"),
        # the suffix is only stripped from a task-like remainder
        ("my_task_abcdef", "my_task_abcdef"),
        ("task-001_abcdefg", "task-001_abcdefg"),  # 7 characters: not the random suffix
        ("mcp_", "mcp_"),
    ],
)
def test_canonical_task_name(raw: str, expected: str) -> None:
    assert canonical_task_name(raw) == expected


# ------------------------------------------------------------------ discovery


def test_discover_runs_from_the_runs_root() -> None:
    # "staging" holds no trials; .cache and retrieval_events are never searched
    assert discover_runs([RUNS]) == [ARCHIVE_RUN, BATCH_RUN]


def test_discover_runs_accepts_run_folders_and_deduplicates() -> None:
    assert discover_runs([BATCH_RUN, RUNS / "official", BATCH_RUN]) == [ARCHIVE_RUN, BATCH_RUN]
    assert discover_runs([RUNS / "staging"]) == []


def test_discover_runs_missing_path(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        discover_runs([tmp_path / "nope"])


def test_discover_runs_survives_symlink_loop(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "loop").symlink_to(tmp_path)
    assert discover_runs([tmp_path]) == []


def test_discover_trials_batch_layout() -> None:
    trials = discover_trials(BATCH_RUN)
    base = "baseline-local-direct/2026-01-01__00-00-00"
    mcp = "mcp-remote-direct/2026-01-01__00-10-00"
    assert [t.trial_dir.relative_to(BATCH_RUN).as_posix() for t in trials] == [
        f"{base}/alpha-task-001__AAAAAAA",  # has agent/ and result.json
        f"{base}/alpha-task-001__ZZZZZZZ",  # result.json only
        f"{mcp}/mcp_alpha-task-001__BBBBBBB",  # result.json only
        f"{mcp}/mcp_beta-task-with-a-very-long-n__CCCCCCC",  # agent/ only
    ]
    assert trials[0] == TrialRef(
        run_dir=BATCH_RUN,
        run_id="batch_run_20260101",
        config_name="baseline-local-direct",
        batch_timestamp="2026-01-01__00-00-00",
        trial_dir=BATCH_RUN / base / "alpha-task-001__AAAAAAA",
        layout="batch",
        job_name=None,
    )
    assert {(t.config_name, t.batch_timestamp, t.layout) for t in trials[2:]} == {
        ("mcp-remote-direct", "2026-01-01__00-10-00", "batch")
    }


def test_discover_trials_archive_layout_skips_job_files() -> None:
    trials = discover_trials(ARCHIVE_RUN)
    assert [(t.config_name, t.job_name, t.trial_dir.name) for t in trials] == [
        (
            "baseline-local-direct",
            "ccb_fix_beta-task-001_baseline-local-direct",
            "beta-task-001__DDDDDDD",
        ),
        (
            "mcp-remote-direct",
            "ccb_fix_beta-task-001_mcp-remote-direct",
            "sgonly_beta-task-001__FFFFFFF",
        ),
        # the job name's last part does not start with "mcp": the group folder names it
        ("mcp", "legacy_job_sourcegraph_full", "beta-task-001__GGGGGGG"),
    ]
    assert {(t.layout, t.batch_timestamp, t.run_id) for t in trials} == {
        ("archive", None, "archive_run_022326")
    }


def test_discover_trials_on_an_empty_folder(tmp_path: Path) -> None:
    assert discover_trials(tmp_path) == []


def test_discovery_is_fast_on_thousands_of_trials(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "big_run"
    body = json.dumps({"task_name": "t-001", "trial_name": "t"})
    for config in ("baseline-local-direct", "mcp-remote-direct"):
        batch = run / config / "2026-01-01__00-00-00"
        for i in range(1500):
            trial = batch / f"task-{i:04d}__abcdefg"
            trial.mkdir(parents=True)
            (trial / "result.json").write_text(body)
    start = time.perf_counter()
    runs = discover_runs([tmp_path / "runs"])
    trials = discover_trials(runs[0])
    elapsed = time.perf_counter() - start
    assert runs == [run]
    assert len(trials) == 3000
    assert trials[0].trial_dir.name == "task-0000__abcdefg"
    # generous bound (about 0.2 s on an idle core) so that a loaded CI machine does not flake
    assert elapsed < 5.0, f"discovery of 3000 trials took {elapsed:.2f}s"


# ------------------------------------------------------------------ result.json


def test_read_trial_result_full() -> None:
    result = read_trial_result(
        BATCH_RUN / "baseline-local-direct/2026-01-01__00-00-00/alpha-task-001__AAAAAAA"
    )
    assert (result.raw_task_name, result.task_name) == ("alpha-task-001", "alpha-task-001")
    assert result.trial_name == "alpha-task-001__AAAAAAA"
    assert result.model == "claude-haiku-4-5-20251001"  # "anthropic/" stripped
    assert result.harness_version == "2.1.62"
    assert (result.reward, result.passed) == (1.0, True)
    assert (result.exception_type, result.errored, result.timed_out) == (None, False, False)
    # 00:00:10.000000 -> 00:01:40.500000
    assert result.agent_execution_seconds == pytest.approx(90.5)
    assert result.agent_execution_started_at == "2026-01-01T00:00:10.000000"
    assert result.started_at == "2026-01-01T00:00:00.000000"
    assert (result.n_input_tokens, result.n_cache_tokens, result.n_output_tokens) == (
        1200,
        1000,
        80,
    )
    assert result.cost_usd is None
    assert result.warnings == []
    assert result.has_result_json


def test_partial_credit_is_not_passed() -> None:
    result = read_trial_result(
        BATCH_RUN / "baseline-local-direct/2026-01-01__00-00-00/alpha-task-001__ZZZZZZZ"
    )
    assert (result.reward, result.passed) == (0.5, False)


def test_timeout_without_reward() -> None:
    result = read_trial_result(
        BATCH_RUN / "mcp-remote-direct/2026-01-01__00-10-00/mcp_alpha-task-001__BBBBBBB"
    )
    assert result.raw_task_name == "mcp_alpha-task-001_q9XyZ1"
    assert result.task_name == "alpha-task-001"
    assert (result.reward, result.passed) == (None, None)  # missing is not zero
    assert (result.exception_type, result.errored, result.timed_out) == (
        "AgentTimeoutError",
        True,
        True,
    )
    assert result.harness_version is None  # "unknown"
    assert result.cost_usd == 0.125


def test_missing_result_json_uses_folder_name() -> None:
    result = read_trial_result(
        BATCH_RUN
        / "mcp-remote-direct/2026-01-01__00-10-00/mcp_beta-task-with-a-very-long-n__CCCCCCC"
    )
    assert result.raw_task_name == "mcp_beta-task-with-a-very-long-n"
    assert result.task_name == "beta-task-with-a-very-long-n"
    assert result.trial_name == "mcp_beta-task-with-a-very-long-n__CCCCCCC"
    assert (result.reward, result.passed, result.model) == (None, None, None)
    assert result.warnings == ["result.json missing"]
    assert not result.has_result_json


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        ('{"task_name": "x-001", ', "result.json is not valid JSON"),
        ("[1, 2]", "result.json is not a JSON object"),
    ],
)
def test_unparseable_result_json(tmp_path: Path, content: str, warning: str) -> None:
    trial = tmp_path / "x-001__abcdefg"
    (trial / "verifier").mkdir(parents=True)
    (trial / "result.json").write_text(content)
    (trial / "verifier" / "reward.txt").write_text("0.75\n")
    result = read_trial_result(trial)
    assert result.task_name == "x-001"
    assert result.warnings[0].startswith(warning)
    assert result.warnings[1] == "reward taken from verifier/reward.txt"
    assert (result.reward, result.passed) == (0.75, False)


def test_result_without_task_name_or_model(tmp_path: Path) -> None:
    trial = tmp_path / "y-002__abcdefg"
    trial.mkdir()
    (trial / "result.json").write_text(
        json.dumps(
            {
                "agent_info": {"version": "2.0.1", "model_info": {"name": "claude-x"}},
                "verifier_result": {"rewards": {"reward": True}},  # not a number
                "exception_info": {"exception_message": "no type"},
                "agent_result": {"n_input_tokens": None, "cost_usd": float("nan")},
            }
        ).replace("NaN", "null")
    )
    result = read_trial_result(trial)
    assert result.task_name == "y-002"
    assert result.model == "claude-x"
    assert result.harness_version == "2.0.1"
    assert (result.reward, result.passed) == (None, None)
    assert (result.exception_type, result.errored, result.timed_out) == (
        "UnknownException",
        True,
        False,
    )
    assert (result.n_input_tokens, result.cost_usd, result.agent_execution_seconds) == (
        None,
        None,
        None,
    )
    # A reward of the wrong type is dropped, but never silently.
    assert result.warnings == [
        "result.json has no task_name; using the trial folder name",
        "result.json verifier_result.rewards.reward is True, not a finite number; ignored",
    ]


# ------------------------------------------------------------------ task folders


def test_task_index_lookup() -> None:
    index = TaskIndex(TASKS)
    dirs, suite = index.lookup("mcp_split-task-001_AbCdE1")
    assert dirs == [
        TASKS / "ccb_fixture" / "split-task-001",
        TASKS / "csb_fixture" / "split-task-001",
    ]
    assert suite == "ccb_fixture"  # the folder with task.toml
    dirs, suite = index.lookup("GT-Object-001")
    assert (dirs, suite) == ([TASKS / "fixture_suite" / "gt-object-001"], "fixture_suite")
    assert index.lookup("no-such-task-001") == ([], None)
    assert index.lookup("sgonly_changes-001") == (
        [TASKS / "fixture_suite" / "changes-001"],
        "fixture_suite",
    )


def test_task_index_on_a_suite_folder() -> None:
    index = TaskIndex(TASKS / "fixture_suite")
    # only folders with task.toml are recognised when the root is itself a suite
    assert index.lookup("gt-bare-list-001") == (
        [TASKS / "fixture_suite" / "gt-bare-list-001"],
        "fixture_suite",
    )


def test_task_index_missing_root(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="tasks root"):
        TaskIndex(tmp_path / "absent")


def test_task_index_resolves_truncated_names(tmp_path: Path) -> None:
    for name in ("alpha-context-window-search-001", "alpha-context-window-search-002"):
        (tmp_path / "suite" / name).mkdir(parents=True)
    (tmp_path / "suite" / "beta-unique-long-task-name-001").mkdir()
    index = TaskIndex(tmp_path)
    # unique prefix resolves, ambiguous prefix does not
    assert index.lookup("beta-unique-long-task-na") == (
        [tmp_path / "suite" / "beta-unique-long-task-name-001"],
        "suite",
    )
    assert index.lookup("alpha-context-window-search-0") == ([], None)


# ------------------------------------------------------------------ real corpus


@needs_corpus
def test_corpus_trials_in_both_layouts() -> None:
    runs = discover_runs([CORPUS / "runs"])
    design = CORPUS / "runs/official/ccb_design_haiku_20260228_025547"
    test = CORPUS / "runs/official/ccb_test_haiku_022326"
    assert runs == [design, test]
    refs = [(t.run_id, t.config_name, t.batch_timestamp, t.layout, t.job_name, t.trial_dir.name)
            for run in runs for t in discover_trials(run)]  # fmt: skip
    d, x = "ccb_design_haiku_20260228_025547", "ccb_test_haiku_022326"
    job = "ccb_test_llamacpp-context-window-search-001_"
    assert refs == [
        (d, "baseline-local-direct", "2026-02-28__03-13-55", "batch", None,
         "django-modeladmin-impact-001__8pRTT8b"),
        (d, "baseline-local-direct", "2026-02-28__03-16-35", "batch", None,
         "envoy-routeconfig-dep-chain-001__n3htrBo"),
        (d, "mcp-remote-direct", "2026-02-28__03-14-34", "batch", None,
         "mcp_django-modeladmin-impact-001__ECYjuLv"),
        (d, "mcp-remote-direct", "2026-02-28__03-17-27", "batch", None,
         "mcp_envoy-routeconfig-dep-chain-__PuAfTWR"),
        (x, "baseline-local-direct", None, "archive", job + "baseline-local-direct",
         "llamacpp-context-window-search-0__2q8iH3W"),
        (x, "mcp-remote-direct", None, "archive", job + "mcp-remote-direct",
         "sgonly_llamacpp-context-window-s__fpDEuhC"),
    ]  # fmt: skip


@needs_corpus
def test_corpus_results_and_task_lookup() -> None:
    index = TaskIndex(CORPUS / "benchmarks")
    rows = []
    for run in discover_runs([CORPUS / "runs"]):
        for trial in discover_trials(run):
            result = read_trial_result(trial.trial_dir)
            dirs, suite = index.lookup(result.task_name)
            rows.append(
                (
                    result.raw_task_name,
                    result.task_name,
                    result.reward,
                    result.passed,
                    suite,
                    len(dirs),
                )
            )
            assert result.model == "claude-haiku-4-5-20251001"
            assert result.harness_version is None  # "unknown" in every corpus trial
            assert result.warnings == []
    assert rows == [
        ("django-modeladmin-impact-001", "django-modeladmin-impact-001", 1.0, True, "ccb_design", 1),
        ("envoy-routeconfig-dep-chain-001", "envoy-routeconfig-dep-chain-001", 1.0, True, "ccb_design", 2),
        ("mcp_django-modeladmin-impact-001_1Q2fNL", "django-modeladmin-impact-001", 1.0, True, "ccb_design", 1),
        # partial credit: 2 of 3 chain steps
        ("mcp_envoy-routeconfig-dep-chain-001_yTp2Rn", "envoy-routeconfig-dep-chain-001", 0.67, False, "ccb_design", 2),
        ("llamacpp-context-window-search-001", "llamacpp-context-window-search-001", 0.0, False, "ccb_test", 1),
        ("sgonly_llamacpp-context-window-search-001", "llamacpp-context-window-search-001", 0.0, False, "ccb_test", 1),
    ]  # fmt: skip


@needs_corpus
def test_corpus_mcp_django_result_fields() -> None:
    trial = (
        CORPUS / "runs/official/ccb_design_haiku_20260228_025547/mcp-remote-direct"
        "/2026-02-28__03-14-34/mcp_django-modeladmin-impact-001__ECYjuLv"
    )
    result = read_trial_result(trial)
    # agent_execution 03:15:05.339756 -> 03:16:07.970058
    assert result.agent_execution_seconds == pytest.approx(62.630302)
    assert (result.n_input_tokens, result.n_cache_tokens, result.n_output_tokens) == (
        3401053,
        3400414,
        5599,
    )
    assert result.cost_usd is None
    assert result.started_at == "2026-02-28T03:14:34.586121"


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        # where orjson and the json module differ; read_trial_result must give json's value
        (b'{"n": 18446744073709551616, "m": -9223372036854775809}', None),  # beyond 64 bits
        (b'{"n": 9223372036854775807, "f": 12345678901234567890.5}', None),
        (b'{"n": NaN, "i": -Infinity, "e": 1e400}', None),
        (b'{"a": 1, "a": 2}', None),
        (b"\xef\xbb\xbf" + b'{"a": [1.5, "\\u00e9"]}', None),
        (b'{"a": "cut \\ud83d", "b": "\\ud83d\\ude00"}', "1 escaped lone surrogate(s)"),
        (b'{"a": "\xff"}', "is not valid UTF-8 (invalid start byte at byte 7)"),
        (b'{"a": ' + b"[" * 500 + b"]" * 500 + b"}", None),  # orjson's depth limit: 1024
    ],
)
def test_result_json_is_read_as_the_json_module_reads_it(
    tmp_path: Path, raw: bytes, problem: str | None
) -> None:
    from retrieval_lib.runs import _load_json_object

    (tmp_path / "result.json").write_bytes(raw)
    data, found = _load_json_object(tmp_path, "result.json")
    text = raw.decode("utf-8-sig", errors="replace").replace('\\ud83d"', '\\ufffd"')
    assert repr(data) == repr(json.loads(text))  # repr: an int stays an int, nan is nan
    assert (found is None) if problem is None else (problem in str(found))


def test_result_json_nested_beyond_both_decoders(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_bytes(b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}")
    from retrieval_lib.runs import _load_json_object

    assert _load_json_object(tmp_path, "result.json") == (
        None,
        "result.json is not usable JSON (nested too deeply)",
    )


def test_result_json_linked_inside_the_trial_is_read(tmp_path: Path) -> None:
    trial = tmp_path / "z-003__abcdefg"
    (trial / "kept").mkdir(parents=True)
    (trial / "kept" / "result.json").write_text('{"task_name": "z-003", "trial_name": "t"}')
    (trial / "result.json").symlink_to("kept/result.json")
    result = read_trial_result(trial)
    assert (result.task_name, result.trial_name, result.has_result_json) == ("z-003", "t", True)


def test_listings_kept_by_discover_runs_are_reused_once_by_discover_trials(tmp_path, monkeypatch):
    # a folder of two runs (batch layout, two batches each): deciding that "official" is
    # not a run lists every batch folder; the trial search must not list them again
    for run in ("run_a", "run_b"):
        for batch in ("2026-03-01__10-00-00", "2026-03-01__11-00-00"):
            (tmp_path / "official" / run / "cfg" / batch / f"t-{batch[-2:]}__abc" / "agent").mkdir(
                parents=True
            )
    listed: list[str] = []
    real_scandir = os.scandir

    def counting_scandir(path):
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", counting_scandir)
    plain = [discover_trials(r) for r in discover_runs([tmp_path])]
    plain_listed = sorted(listed)
    listed.clear()
    listings: dict = {}
    runs = discover_runs([tmp_path], listings=listings)
    shared = [discover_trials(r, listings=listings) for r in runs]

    def batches(paths):
        return [p for p in paths if p.endswith(("10-00-00", "11-00-00"))]

    assert shared == plain  # the same trials, the same order
    assert len(listed) == len(set(listed))  # no folder listed twice
    assert len(batches(listed)) == 4
    assert len(batches(plain_listed)) == 10  # each batch twice, each run's first once more
    assert not [p for p in listings if "run_a" in p or "run_b" in p]  # used listings freed

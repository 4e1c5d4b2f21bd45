"""`kb compare A B C ...` (issue 19): every run against the reference run, Holm over runs x
metrics; the two-run compare stays what it was (tests/kb/test_kb_cli.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from kb_testutils import REPO_ROOT

from retrieval_lib.cli import main
from retrieval_lib.kb.compare import compare_runs
from retrieval_lib.kb.compare_many import compare_many
from retrieval_lib.kb.examples import EXAMPLE_RUNS
from retrieval_lib.kb.store import KBStore

EXAMPLE = REPO_ROOT / "examples" / "kb"
V1, V2 = EXAMPLE_RUNS[0].run_id, EXAMPLE_RUNS[1].run_id
HOSTILE = "v2 | <b>copy</b> [x](javascript:1)"


def _ingest(db, run, run_id):
    argv = ["kb", "ingest", str(EXAMPLE / run.results_file), "--golden",
            str(EXAMPLE / "golden.yaml"), "--chunks", str(EXAMPLE / run.chunks_file),
            "--chunker-version", run.chunker_version, "--config",
            str(EXAMPLE / run.config_file), "--run-id", run_id, "--db", str(db)]  # fmt: skip
    assert main(argv) == 0


@pytest.fixture
def three_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    db = tmp_path / "eval.sqlite"
    _ingest(db, EXAMPLE_RUNS[0], V1)
    _ingest(db, EXAMPLE_RUNS[1], V2)
    _ingest(db, EXAMPLE_RUNS[1], HOSTILE)  # a third run: v2's results again
    capsys.readouterr()
    return db


def test_each_run_is_the_two_run_compare_and_holm_spans_runs_and_metrics(three_runs):
    pg = pytest.importorskip("pingouin")
    with KBStore(three_runs, create=False) as store:
        many = compare_many(store, V1, [V2, HOSTILE], n_bootstrap=50)
        singles = {r: compare_runs(store, V1, r, n_bootstrap=50) for r in (V2, HOSTILE)}
    summary = many.summary()
    assert summary["run"].unique().tolist() == [V2, HOSTILE]
    for run, report in singles.items():
        rows = summary[summary["run"] == run]
        expected = report.metric_rows()
        assert rows["metric"].tolist() == [r["metric"] for r in expected]
        np.testing.assert_allclose(rows["b"], [r["b"] for r in expected])
        np.testing.assert_allclose(rows["delta"], [r["delta"] for r in expected])
        np.testing.assert_allclose(rows["wilcoxon_p"], [r["wilcoxon_p"] for r in expected])
    p = summary["wilcoxon_p"].to_numpy(dtype=float)
    assert np.isfinite(p).sum() >= 4  # the ranking metrics of both runs
    _, reference = pg.multicomp(p, method="holm")
    np.testing.assert_allclose(summary["p_holm"], reference)
    # the copy of v2 gives exactly v2's comparison
    a = summary[summary["run"] == V2].reset_index(drop=True)
    b = summary[summary["run"] == HOSTILE].reset_index(drop=True)
    np.testing.assert_allclose(a["delta"], b["delta"])


def test_the_cli_compares_every_run_and_writes_an_escaped_report(three_runs, capsys, tmp_path):
    md = tmp_path / "many.md"
    argv = ["kb", "compare", V1, V2, HOSTILE, "--db", str(three_runs), "--bootstrap", "50"]
    assert main([*argv, "--report", str(md)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"2 runs against {V1} (p Holm-adjusted over runs x metrics)"
    assert f"{V1} vs {V2} (chunk matching: fallback_doc_span)" in out
    assert any("p_holm=" in line for line in out)
    text = md.read_text(encoding="utf-8")
    assert "<b>" not in text and "](javascript" not in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert all(line.count("|") in (9, 6) for line in table)  # no pipe of a name leaks
    assert main([*argv, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reference"] == V1 and data["runs"] == [V2, HOSTILE]
    assert len(data["comparisons"]) == 2 and {"p_holm"} <= set(data["summary"][0])


@pytest.mark.parametrize(
    ("runs", "message"),
    [([V2, V1], "is the reference"), ([V2, V2], "given twice")],
)
def test_bad_run_lists_are_one_line_errors(three_runs, capsys, runs, message):
    code = main(["kb", "compare", V1, *runs, "--db", str(three_runs)])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err


def test_two_runs_stay_the_two_run_compare(three_runs, capsys):
    assert main(["kb", "compare", V1, V2, "--db", str(three_runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_a"] == V1 and data["run_b"] == V2 and "summary" not in data
    assert not math.isnan(data["deltas"]["mrr"])

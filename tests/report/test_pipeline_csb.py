"""``retrieval-lib run`` on the real CodeScaleBench sample: both reports render.

The sample has three tasks (corpus README): django-modeladmin-impact-001 with a ground-truth
file list, envoy-routeconfig-dep-chain-001 with no file-level ground truth, and
llamacpp-context-window-search-001 with no retrieval ground truth at all. Most statistics
are therefore not computable; the report must say why instead of failing.
"""

import json
from pathlib import Path

import pytest

pytest.importorskip("papermill")

from retrieval_lib.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CSB = REPO / ".." / "shared" / "corpus" / "csb"
DESIGN_RUN = "ccb_design_haiku_20260228_025547"
TEST_RUN = "ccb_test_haiku_022326"

pytestmark = pytest.mark.skipif(
    not (CSB / "runs").is_dir(), reason=f"the real-run corpus is absent ({CSB.resolve()})"
)


def _tree(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*")}


def _outputs(notebook: Path) -> list[dict]:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return [out for cell in nb["cells"] for out in cell.get("outputs", [])]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("csb_reports")
    before = _tree(CSB)
    code = main(
        [
            "run",
            str(CSB / "runs"),
            "--tasks-root",
            str(CSB / "benchmarks"),
            "--out",
            str(out),
            "-f",
            str(REPO / "params" / "example.yaml"),
        ]
    )
    assert code == 0
    assert _tree(CSB) == before  # the corpus is only read
    return out


@pytest.mark.parametrize("run_id", [DESIGN_RUN, TEST_RUN])
def test_each_run_gets_a_clean_report(rendered, run_id):
    html = rendered / run_id / "run_analysis.html"
    assert html.is_file()
    outputs = _outputs(rendered / run_id / "run_analysis.ipynb")
    assert not [o for o in outputs if o["output_type"] == "error"]
    # quiet: no warning or other stderr text in the report
    assert not [o for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"]
    text = html.read_text(encoding="utf-8")
    assert f"run: {run_id}" in text
    assert "<script" not in text.lower()
    assert (rendered / run_id / "tables" / "drilldown.csv").is_file()


def test_missing_ground_truth_is_explained_not_zeroed(rendered):
    text = (rendered / TEST_RUN / "run_analysis.html").read_text(encoding="utf-8")
    # llamacpp-context-window-search-001 has no retrieval ground truth in either config
    assert "no file-level ground truth" in text
    assert "no retrieval metric is computable for any config" in text
    # one matched task: below the minimum of three for a paired comparison
    assert "n=1 matched pairs is below the minimum of 3" in text
    assert "No correlation is computable" in text


def test_design_run_computes_what_its_one_ground_truth_task_allows(rendered):
    events = rendered / DESIGN_RUN / "retrieval_events"
    summary = json.loads((events / "run_retrieval_summary.json").read_text(encoding="utf-8"))
    # 2 tasks x 2 configs; only django-modeladmin-impact-001 has a ground-truth file list
    assert summary["counts"]["documents"] == 4
    assert summary["counts"]["computable"] == 2
    drill = (rendered / DESIGN_RUN / "tables" / "drilldown.csv").read_text(encoding="utf-8")
    rows = {line.split(",")[0] + "/" + line.split(",")[1]: line for line in drill.splitlines()[1:]}
    assert (
        "no file-level ground truth"
        in rows["envoy-routeconfig-dep-chain-001/baseline-local-direct"]
    )
    assert (
        "no file-level ground truth" not in rows["django-modeladmin-impact-001/mcp-remote-direct"]
    )


def _answer(notebook: Path) -> str:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "Answer(" in "".join(c["source"]))
    return "".join(cell["outputs"][0]["data"]["text/plain"])


def test_every_report_opens_with_the_answer(rendered):
    # the test run has one matched task: the answer says it cannot answer, and why
    answer = _answer(rendered / TEST_RUN / "run_analysis.ipynb")
    assert answer.startswith(
        "- Reward, mcp-remote-direct vs baseline-local-direct: the data cannot answer this "
        "(1 matched task; n=1 matched pairs is below the minimum of 3)"
    )
    assert "no tool call surfaced a ground-truth file first" in answer
    # the design run: django's mcp trial found its 5 ground-truth files with keyword_search
    # and the baseline's with Grep (5 each, of 10)
    design = _answer(rendered / DESIGN_RUN / "run_analysis.ipynb")
    assert "were Grep (local) and keyword_search (MCP), with 5 of the 10" in design
    for report in (
        rendered / TEST_RUN / "run_analysis.html",
        rendered / DESIGN_RUN / "run_analysis.html",
        rendered / "study" / "study.html",
    ):
        text = report.read_text(encoding="utf-8")
        assert 'id="Answer"' in text
        assert text.index('id="Answer"') < text.index("Caveat: correlations are associations")
    study = _answer(rendered / "study" / "study.ipynb")
    assert study.startswith("- Reward, mcp-remote-direct vs baseline-local-direct: ")
    assert "(3 matched tasks" in study or "on 3 matched tasks" in study

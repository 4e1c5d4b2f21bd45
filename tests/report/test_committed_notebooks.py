"""The committed notebooks and parameter files: clean metadata, outputs, matching parameters."""

import json
from pathlib import Path

import pytest

from retrieval_lib.report.params import check_parameters, load_params_file, notebook_parameters

REPO = Path(__file__).resolve().parents[2]
RUN_ANALYSIS = REPO / "notebooks" / "run_analysis.ipynb"


def _nb(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _assert_executed_and_stripped(nb: dict, min_checked_cells: int) -> None:
    """Executed without error, no papermill timestamps or stderr, PNG figures only, and at
    least ``min_checked_cells`` cells whose output nbval compares."""
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert set(nb["metadata"]) <= {"kernelspec", "language_info"}  # no papermill timestamps
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(set(c["metadata"]) <= {"tags"} for c in code)
    assert all(c["execution_count"] is not None for c in code)
    outputs = [o for c in code for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    assert not [o for o in outputs if o["output_type"] == "stream" and o["name"] == "stderr"]
    mimes = {m for o in outputs for m in o.get("data", {})}
    assert "image/svg+xml" not in mimes and "image/png" in mimes
    sources = ["".join(c["source"]) for c in code]
    assert sum("# NBVAL_CHECK_OUTPUT" in s for s in sources) >= min_checked_cells


def test_run_analysis_is_committed_executed_and_stripped():
    _assert_executed_and_stripped(_nb(RUN_ANALYSIS), 10)


def test_template_documents_every_parameter_and_both_files_pass_the_check():
    spec = notebook_parameters(RUN_ANALYSIS)
    template = load_params_file(REPO / "params" / "template.yaml")
    assert list(template) == list(spec)
    for name in ("template.yaml", "example.yaml"):
        values = load_params_file(REPO / "params" / name)
        assert check_parameters(values, spec) == values
    # every parameter is annotated with a type and a help text
    assert all(p.type_name and p.help for p in spec.values())


def test_kb_example_parameters_match_the_kb_notebook():
    kb = REPO / "notebooks" / "kb_compare.ipynb"
    if not kb.is_file():
        pytest.skip("notebooks/kb_compare.ipynb is not in this checkout")
    values = load_params_file(REPO / "params" / "kb_example.yaml")
    assert check_parameters(values, notebook_parameters(kb)) == values


STUDY = REPO / "notebooks" / "study.ipynb"


def test_study_notebook_is_committed_executed_and_stripped():
    nb = _nb(STUDY)
    _assert_executed_and_stripped(nb, 12)
    headings = [
        "".join(c["source"]).splitlines()[0] for c in nb["cells"] if c["cell_type"] == "markdown"
    ]
    assert [h for h in headings if h.startswith("## ")] == [
        "## Answer",
        "## 1. The study",
        "## 2. Leaderboard",
        "## 3. Matched comparison across runs",
        "## 4. Retrieval-conditioned views",
        "## 5. Tool value",
        "## 6. Confidence flags",
        "## 7. Retrieval and outcomes",
        "## 8. Calibration slices across runs",
        "## 9. Trial timelines",
        "## 10. Every config family compared",
    ]


def test_study_parameter_file_documents_every_parameter():
    spec = notebook_parameters(STUDY)
    values = load_params_file(REPO / "params" / "study.yaml")
    assert list(values) == list(spec)
    assert check_parameters(values, spec) == values
    assert all(p.type_name and p.help for p in spec.values())

"""The report shows the run's retrieval_impact.json (made with its parameters), and writes
nothing into the run.

Review finding: the notebook used to re-run the impact analysis on a narrower metric set
with its own bootstrap size, so its Holm-adjusted p-values disagreed with the JSON, and
with ``output_dir`` empty it wrote CSV tables into the input run folder.
"""

import json
from pathlib import Path

import pytest

papermill = pytest.importorskip("papermill")

from retrieval_lib.report import tables  # noqa: E402
from retrieval_lib.report.display import view  # noqa: E402
from retrieval_lib.report.params import resolve_notebook  # noqa: E402
from retrieval_lib.report.pipeline import example_run  # noqa: E402
from retrieval_lib.stats.correlation import POOLED_GROUP  # noqa: E402
from retrieval_lib.stats.impact import load_impact, run_impact  # noqa: E402


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _text_outputs(nb: dict) -> str:
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def test_notebook_shows_the_written_impact_document_and_writes_nothing(tmp_path):
    run_dir = example_run(tmp_path / "work")
    # the document was written with the report's seed and resamples (with other values
    # the report recomputes it: tests/report/test_report_parameters_used.py)
    run_impact([run_dir], seed=3, n_boot=300)
    before = _files(run_dir)
    executed = tmp_path / "executed.ipynb"
    papermill.execute_notebook(
        str(resolve_notebook("run_analysis")),
        str(executed),
        parameters={"run_dir": str(run_dir), "output_dir": "", "seed": 3, "n_boot": 300},
        kernel_name="python3",
        progress_bar=False,
        cwd=str(tmp_path),
    )
    assert _files(run_dir) == before  # no report_tables/, nothing rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["executed.ipynb", "work"]
    text = _text_outputs(json.loads(executed.read_text(encoding="utf-8")))
    assert "impact analysis: retrieval_events/retrieval_impact.json (seed 3, 300 bootstrap" in text
    assert "key retrieval metrics: file.AP, file.RR, file.nDCG@10" in text
    assert "output_dir is empty: no file written" in text
    # the strongest pooled associations shown are those of the JSON, p_holm included
    impact = load_impact(run_dir)
    strongest = tables.strongest_pairs(impact.correlations, POOLED_GROUP, top=4)
    columns = [
        "x",
        "y",
        "method",
        "n",
        "n_trials",
        "n_flagged",
        "r",
        "ci_low",
        "ci_high",
        "p_value",
        "p_holm",
    ]
    # as the notebook shows it (report.display: 3 decimals, no index column)
    assert repr(view(strongest[columns])) in text

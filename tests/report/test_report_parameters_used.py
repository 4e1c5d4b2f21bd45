"""A report uses the parameters it is given and replaces its own earlier outputs.

Issue 21, item 1: ``report RUN -f swap.yaml`` (baseline and treatment swapped, seed 7,
other resamples) exited 0 and rendered the cached comparison of retrieval_impact.json;
``treatment: "no-such-config"`` was not refused. Item 4: a failed report followed by a
successful one left ``<name>.failed.ipynb`` beside the new HTML.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("papermill")
nbformat = pytest.importorskip("nbformat")

from retrieval_lib.cli import main  # noqa: E402
from retrieval_lib.errors import ReportError  # noqa: E402
from retrieval_lib.report import render_report  # noqa: E402


def _text(nb_path: Path) -> str:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain") or ""
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    from retrieval_lib.report.pipeline import example_run
    from retrieval_lib.stats.impact import run_impact

    run_dir = example_run(tmp_path_factory.mktemp("work"))
    run_impact([run_dir], seed=0, n_boot=300)  # the cached analysis: seed 0, paired by name
    return run_dir


def test_a_report_with_other_parameters_recomputes_and_says_so(evaluated_run, tmp_path, capsys):
    params = tmp_path / "swap.yaml"
    params.write_text(
        'baseline: "mcp-remote-direct"\ntreatment: "baseline-local-direct"\nseed: 7\nn_boot: 150\n'
    )
    cached = (evaluated_run / "retrieval_events" / "retrieval_impact.json").read_bytes()
    out = tmp_path / "out"
    assert main(["report", str(evaluated_run), "-f", str(params), "--out", str(out)]) == 0
    text = _text(out / evaluated_run.name / "run_analysis.ipynb")
    assert "impact analysis: computed (seed 7, 150 bootstrap resamples)" in text
    assert (
        "retrieval_impact.json was made with other parameters (baseline: None -> "
        "'mcp-remote-direct'; treatment: None -> 'baseline-local-direct'; seed: 0 -> 7; "
        "n_boot: 300 -> 150): recomputed with this report's parameters"
    ) in text
    assert "mcp-remote-direct vs baseline-local-direct" in text  # the swapped pair
    # nothing is written into the evaluated run
    assert (evaluated_run / "retrieval_events" / "retrieval_impact.json").read_bytes() == cached
    # the same parameters as the cache: the cache is shown
    params.write_text("seed: 0\nn_boot: 300\n")
    assert main(["report", str(evaluated_run), "-f", str(params), "--out", str(out)]) == 0
    text = _text(out / evaluated_run.name / "run_analysis.ipynb")
    assert "impact analysis: retrieval_events/retrieval_impact.json (seed 0, 300 bootstrap" in text
    assert "recomputed" not in text


def test_an_unknown_config_is_refused_before_the_notebook_runs(evaluated_run, tmp_path, capsys):
    params = tmp_path / "bad.yaml"
    params.write_text('treatment: "mcp-remote-direkt"\n')
    out = tmp_path / "out"
    # a bad value in a parameter file is a failure (1), as for impact --treatment nope
    assert main(["report", str(evaluated_run), "-f", str(params), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert (
        "treatment config 'mcp-remote-direkt' not found (did you mean 'mcp-remote-direct'?)" in err
    )
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing ran, no .failed.ipynb


@pytest.mark.parametrize("text", ["n_boot: 0", "alpha: 1.5", "seed: -1", "Alpha: 0.1"])
def test_a_bad_parameter_fails_before_the_notebook_runs(evaluated_run, tmp_path, capsys, text):
    params = tmp_path / "bad.yaml"
    params.write_text(text + "\n")
    out = tmp_path / "out"
    assert main(["report", str(evaluated_run), "-f", str(params), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def _notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell("fail: bool = False  # raise in the next cell")
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell('if fail:\n    raise ValueError("asked to")')]
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, str(path))
    return path


def test_a_successful_report_removes_the_failed_notebook_of_the_same_report(tmp_path):
    nb = _notebook(tmp_path / "tiny.ipynb")
    out = tmp_path / "out"
    with pytest.raises(ReportError, match="asked to"):
        render_report(nb, {"fail": True}, out)
    assert (out / "tiny.failed.ipynb").is_file()
    result = render_report(nb, {"fail": False}, out)
    assert result.html.is_file() and result.notebook.is_file()
    assert sorted(p.name for p in out.iterdir()) == ["tiny.html", "tiny.ipynb"]


def test_two_renders_of_the_same_input_are_byte_identical(tmp_path):
    # papermill gives its injected parameters cell a random id; the notebook and the HTML
    # (an id attribute per cell) carried it, so two renders of one input differed.
    nb = _notebook(tmp_path / "tiny.ipynb")
    first = render_report(nb, {"fail": False}, tmp_path / "out")
    saved = first.notebook.read_bytes(), first.html.read_bytes()
    second = render_report(nb, {"fail": False}, tmp_path / "out")
    assert (second.notebook.read_bytes(), second.html.read_bytes()) == saved
    cells = nbformat.read(str(second.notebook), as_version=4).cells
    assert [c.id for c in cells] == ["c0", "injected-parameters", "c1"]

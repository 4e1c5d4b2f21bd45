"""``retrieval-lib report`` on tiny notebooks: success, a failing cell, bad parameters."""

import json

import pytest

pytest.importorskip("papermill")
nbformat = pytest.importorskip("nbformat")

from retrieval_lib.cli import main  # noqa: E402


def _notebook(path, *cells):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell(
        'label: str = "x"  # what to print\nrepeat: int = 1  # how often'
    )
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, *(nbformat.v4.new_code_cell(c) for c in cells)]
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i}"
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, str(path))
    return path


def test_report_renders_a_notebook_and_prints_the_html_path(tmp_path, capfd):
    nb = _notebook(tmp_path / "tiny.ipynb", 'print(label * repeat + "-rendered")')
    params = tmp_path / "p.yaml"
    params.write_text('label: "ab"\nrepeat: 3\n')
    code = main(
        ["report", "--notebook", str(nb), "-f", str(params), "--out", str(tmp_path / "out")]
    )
    assert code == 0
    html = tmp_path / "out" / "tiny" / "tiny.html"
    # capfd: the kernel is another process writing to the same file descriptors
    captured = capfd.readouterr()
    assert captured.out.strip() == str(html.resolve())
    assert "without encryption" not in captured.err
    assert "IPKernelApp" not in captured.err
    text = html.read_text(encoding="utf-8")
    assert "ababab-rendered" in text
    assert "print(label" not in text  # code hidden
    assert "<script" not in text.lower()
    executed = json.loads((tmp_path / "out" / "tiny" / "tiny.ipynb").read_text())
    assert "papermill" not in executed["metadata"]  # timestamps stripped
    assert all("papermill" not in c["metadata"] for c in executed["cells"])
    assert executed["metadata"]["kernelspec"]["name"] == "python3"


def test_a_failing_cell_exits_nonzero_naming_the_cell_and_the_error(tmp_path, capsys):
    nb = _notebook(
        tmp_path / "broken.ipynb",
        "value = 1",
        '# the next line fails on purpose\nraise ValueError("deliberate failure")',
    )
    code = main(["report", "--notebook", str(nb), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert "broken.ipynb: cell" in err
    assert 'raise ValueError("deliberate failure")' in err or "raise ValueError('deliberate" in err
    assert "ValueError: deliberate failure" in err
    assert "Traceback" not in err
    assert (tmp_path / "out" / "broken" / "broken.failed.ipynb").is_file()
    assert not (tmp_path / "out" / "broken" / "broken.html").exists()


def test_unknown_parameter_fails_before_anything_runs(tmp_path, capsys):
    nb = _notebook(tmp_path / "tiny.ipynb", "open('ran', 'w').close()")
    params = tmp_path / "p.yaml"
    params.write_text("lable: y\n")
    code = main(
        ["report", "--notebook", str(nb), "-f", str(params), "--out", str(tmp_path / "out")]
    )
    assert code == 1
    err = capsys.readouterr().err
    assert "unknown parameter(s) for tiny.ipynb: 'lable' (did you mean 'label'?)" in err
    assert not (tmp_path / "out").exists()


def test_wrong_type_fails(tmp_path, capsys):
    nb = _notebook(tmp_path / "tiny.ipynb", "pass")
    params = tmp_path / "p.yaml"
    params.write_text("repeat: '3'\n")
    assert main(["report", "--notebook", str(nb), "-f", str(params), "--out", str(tmp_path)]) == 1
    assert "parameter 'repeat' of tiny.ipynb must be int" in capsys.readouterr().err


def test_report_refuses_a_run_folder_that_was_not_evaluated(tmp_path, capsys):
    run = tmp_path / "my_run"
    run.mkdir()
    assert main(["report", str(run), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "has not been evaluated" in err and "retrieval-lib evaluate" in err


def test_run_analysis_needs_a_run(tmp_path, capsys):
    assert main(["report", "--out", str(tmp_path)]) == 2  # a usage error (issue 21)
    assert "give an evaluated run folder" in capsys.readouterr().err


def test_parameter_line_with_two_equals_signs_is_refused(tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell('x: str = ""  # empty = default')
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    path = tmp_path / "eq.ipynb"
    nbformat.write(nb, str(path))
    assert main(["report", "--notebook", str(path), "--out", str(tmp_path / "o")]) == 1
    assert "more than one '='" in capsys.readouterr().err


def test_parameters_cell_with_a_syntax_error_is_a_clear_error(tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x: int = (1  # unclosed")
    cell.metadata["tags"] = ["parameters"]
    nb.cells = [cell]
    path = tmp_path / "syntax.ipynb"
    nbformat.write(nb, str(path))
    assert main(["report", "--notebook", str(path), "--out", str(tmp_path / "o")]) == 1
    assert "parameters cell is not valid Python" in capsys.readouterr().err


def test_strict_harness_version_flag_of_report_needs_a_notebook_with_that_parameter(
    tmp_path, capsys
):
    nb = _notebook(tmp_path / "tiny.ipynb", "print(label)")
    code = main(["report", "--notebook", str(nb), "--strict-harness-version"])
    assert code == 1
    assert "tiny.ipynb has no strict_harness_version parameter" in capsys.readouterr().err


def test_strict_harness_version_flag_of_run_sets_the_parameter(tmp_path, monkeypatch):
    from retrieval_lib.report import pipeline

    seen = {}

    def fake_pipeline(paths, tasks_root, out, *, params, workers):
        seen.update(params)
        return []

    monkeypatch.setattr(pipeline, "run_pipeline", fake_pipeline)
    params = tmp_path / "p.yaml"
    params.write_text("seed: 3\n")
    args = ["run", str(tmp_path), "--tasks-root", str(tmp_path), "-f", str(params)]
    assert main(args) == 0
    assert seen == {"seed": 3}
    assert main([*args, "--strict-harness-version"]) == 0
    assert seen == {"seed": 3, "strict_harness_version": True}

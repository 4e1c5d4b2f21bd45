import json

import pytest

from retrieval_lib.errors import ReportError
from retrieval_lib.report.params import check_parameters, load_params_file, notebook_parameters


def _notebook(tmp_path, source):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"tags": ["parameters"]},
                "source": source,
                "outputs": [],
                "execution_count": None,
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps(nb))
    return path


def test_parameters_cell_is_parsed_with_types_and_help(tmp_path):
    path = _notebook(
        tmp_path,
        'run_dir: str = ""  # evaluated run folder\nseed: int = 0  # RNG seed\nalpha = 0.05\n',
    )
    spec = notebook_parameters(path)
    assert list(spec) == ["run_dir", "seed", "alpha"]
    assert (spec["run_dir"].type_name, spec["run_dir"].help) == ("str", "evaluated run folder")
    assert spec["alpha"].type_name is None and spec["alpha"].default == "0.05"


def test_parameters_are_what_papermill_reads():
    from papermill import inspect_notebook

    from retrieval_lib.report import resolve_notebook

    for name in ("run_analysis", "kb_compare"):
        notebook = resolve_notebook(name)
        spec = notebook_parameters(notebook)
        expected = inspect_notebook(str(notebook))
        assert list(spec) == list(expected)
        for key, p in expected.items():
            assert (spec[key].type_name, spec[key].default, spec[key].help) == (
                p["inferred_type_name"],
                p["default"],
                p["help"],
            )


@pytest.mark.parametrize(
    "line",
    ["x: str | None = None  # help", 'x: str = "a"  # the b = c rule'],
)
def test_a_line_papermill_cannot_read_is_refused(tmp_path, line):
    # papermill would drop it (a log line at most) and then refuse x as unknown
    with pytest.raises(ReportError, match=r"papermill cannot read line 2 .*: x: str"):
        notebook_parameters(_notebook(tmp_path, f"seed: int = 0  # s\n{line}\n"))


def test_unknown_names_fail_instead_of_warning(tmp_path):
    spec = notebook_parameters(_notebook(tmp_path, "seed: int = 0  # s\n"))
    with pytest.raises(ReportError, match="unknown parameter.*sede"):
        check_parameters({"sede": 1}, spec)


@pytest.mark.parametrize(
    ("annotation", "value", "ok"),
    [
        ("int", 3, True),
        ("int", True, False),
        ("int", "3", False),
        ("float", 2, True),
        ("str", 42, False),
        ("Optional[str]", None, True),
        ("Optional[str]", 3, False),
        ("list[str]", ["a"], True),
        ("list[str]", ["a", 1], False),
        ("bool", "no", False),
    ],
)
def test_values_are_checked_against_annotations(tmp_path, annotation, value, ok):
    spec = notebook_parameters(_notebook(tmp_path, f"x: {annotation} = None  # help\n"))
    if ok:
        assert check_parameters({"x": value}, spec) == {"x": value}
    else:
        with pytest.raises(ReportError, match="must be"):
            check_parameters({"x": value}, spec)


def test_yaml_params_keep_quoted_strings(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text('run_id: "0042"\nseed: 7\n')
    assert load_params_file(path) == {"run_id": "0042", "seed": 7}


def test_yaml_params_must_be_a_mapping(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ReportError, match="mapping"):
        load_params_file(path)


def test_notebook_without_parameters_cell_is_an_error(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    with pytest.raises(ReportError, match="parameters"):
        notebook_parameters(path)

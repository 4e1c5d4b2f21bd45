"""One parameter model (issue 21, items 2, 3 and 6): the schema, its checks, its files.

The notebooks' parameters cells, the parameter files of params/ and the CLI options
that set the same quantities all come from retrieval_lib.report.params.SCHEMAS; a bad
value is refused before anything runs, in the same way everywhere.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_lib.errors import ReportError, StatisticsError
from retrieval_lib.report.params import (
    SCHEMAS,
    check_parameters,
    check_schema,
    load_params_file,
    render_parameter_cell,
    schema_defaults,
)

REPO = Path(__file__).resolve().parents[2]


def _parameters_cell(name: str) -> str:
    nb = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
    return "".join(cells[0]["source"]).rstrip("\n")


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_notebook_parameters_cell_is_the_schema(name):
    assert _parameters_cell(name) == render_parameter_cell(name)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_papermill_reads_the_schema_from_the_cell(name):
    from retrieval_lib.report.params import notebook_parameters, resolve_notebook

    spec = notebook_parameters(resolve_notebook(name))
    assert [(p.name, p.type_name) for p in spec.values()] == [
        (p.name, p.type) for p in SCHEMAS[name]
    ]


@pytest.mark.parametrize(("file", "name"), [("template", "run_analysis"), ("study", "study")])
def test_the_template_files_give_every_parameter_with_its_default(file, name):
    values = load_params_file(REPO / "params" / f"{file}.yaml")
    assert list(values) == [p.name for p in SCHEMAS[name]]
    assert values == schema_defaults(name)
    assert check_schema(values, name) == values


@pytest.mark.parametrize(
    ("name", "param", "value"),
    [
        ("run_analysis", "n_boot", 0),
        ("run_analysis", "n_boot", -5),
        ("run_analysis", "alpha", 1.5),
        ("run_analysis", "alpha", 0),
        ("run_analysis", "alpha", 1),
        ("run_analysis", "seed", -1),
        ("study", "min_pairs", 0),
        ("study", "n_boot", 0),
        ("study", "alpha", -0.1),
        ("study", "seed", -1),
        ("study", "timeline_x", "foo"),
        ("kb_compare", "n_bootstrap", 0),
        ("kb_compare", "seed", -3),
        ("study", "config_map", {"a": 1}),
    ],
)
def test_out_of_range_values_are_refused_before_anything_runs(name, param, value):
    # issue 21, item 2: these failed inside a notebook cell, or were accepted
    from retrieval_lib.report.params import notebook_parameters, resolve_notebook

    spec = notebook_parameters(resolve_notebook(name))
    with pytest.raises(ReportError, match=rf"parameter '{param}' of {name}.ipynb must be"):
        check_parameters({param: value}, spec, notebook=f"{name}.ipynb")
    with pytest.raises(ReportError, match=f"parameter '{param}'"):
        check_schema({param: value}, name)


def test_the_messages_say_what_is_allowed():
    with pytest.raises(ReportError) as caught:
        check_schema({"alpha": 1.5}, "study")
    assert str(caught.value) == (
        "parameter 'alpha' of study must be a number above 0 and below 1, not 1.5"
    )
    with pytest.raises(ReportError) as caught:
        check_schema({"timeline_x": "foo"}, "study")
    assert "must be one of 'step', 'seconds', not 'foo'" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alpha: 5e-2", 0.05),
        ("alpha: 5.0e-2", 0.05),
        ("alpha: .05", 0.05),
        ("alpha: 0.05", 0.05),
        ("n_boot: 1e3", 1000),
        ("n_boot: 1.0e+3", 1000),
        ("n_boot: 2000", 2000),
        ("seed: 0", 0),
    ],
)
def test_yaml_numbers_in_any_form(tmp_path, text, expected):
    # issue 21, item 2: `alpha: 5e-2` was refused ("must be float, got str")
    path = tmp_path / "p.yaml"
    path.write_text(text + "\n")
    name = text.split(":")[0]
    checked = check_schema(load_params_file(path), "study")
    assert checked[name] == expected
    assert type(checked[name]) is type(expected)


@pytest.mark.parametrize("text", ["n_boot: 1.25e1", "n_boot: 1.5", 'seed: "7"', "alpha: .nan"])
def test_not_every_number_fits(tmp_path, text):
    path = tmp_path / "p.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ReportError, match="must be"):
        check_schema(load_params_file(path), "study")


def test_unknown_names_get_a_did_you_mean():
    from retrieval_lib.report.params import notebook_parameters, resolve_notebook

    spec = notebook_parameters(resolve_notebook("run_analysis"))
    with pytest.raises(ReportError) as caught:
        check_parameters({"Alpha": 0.1, "n_bot": 3}, spec, notebook="run_analysis.ipynb")
    message = str(caught.value)
    assert "'Alpha' (did you mean 'alpha'?)" in message
    assert "'n_bot' (did you mean 'n_boot'?)" in message


def test_relative_paths_resolve_against_the_parameter_file(tmp_path, monkeypatch):
    # issue 21, item 3: db_path resolved against the output folder, run_dir against the
    # working directory
    folder = tmp_path / "conf"
    folder.mkdir()
    path = folder / "p.yaml"
    path.write_text(
        'run_dir: "runs/r1"\ntasks_root: "../tasks"\noutput_dir: "out"\n'
        'db_path: "kb/eval.sqlite"\nstudy_manifest: "s/study_manifest.json"\n'
        'baseline: "runs/x"\nempty_path: ""\n'
    )
    monkeypatch.chdir(tmp_path)
    values = load_params_file(path)
    base = folder.resolve()
    assert values["run_dir"] == str(base / "runs" / "r1")
    assert values["tasks_root"] == str(base / ".." / "tasks")
    assert values["output_dir"] == str(base / "out")
    assert values["db_path"] == str(base / "kb" / "eval.sqlite")
    assert values["study_manifest"] == str(base / "s" / "study_manifest.json")
    assert values["baseline"] == "runs/x"  # not a path parameter
    absolute = tmp_path / "abs"
    path.write_text(f'run_dir: "{absolute}"\noutput_dir: ""\n')
    assert load_params_file(path) == {"run_dir": str(absolute), "output_dir": ""}


# -- the command line uses the same ranges ----------------------------------------------


def _option_type(argv_prefix: list[str], option: str):
    from retrieval_lib.cli import build_parser

    parser = build_parser()
    for word in argv_prefix:
        sub = next(a for a in parser._actions if a.choices and word in a.choices)
        parser = sub.choices[word]
    return next(a for a in parser._actions if option in a.option_strings).type


@pytest.mark.parametrize(
    ("prefix", "option", "parameter"),
    [
        (["impact"], "--seed", "seed"),
        (["impact"], "--n-boot", "n_boot"),
        (["kb", "compare"], "--seed", "seed"),
        (["kb", "compare"], "--bootstrap", "n_bootstrap"),
        (["synth"], "--seed", "seed"),
    ],
)
def test_cli_options_accept_exactly_what_the_parameter_accepts(prefix, option, parameter):
    import argparse

    schema = {p.name: p for s in SCHEMAS.values() for p in s}[parameter]
    parse = _option_type(prefix, option)
    for text in ["-5", "-1", "0", "1", "2", "7", "1e3", "2.5", "x"]:
        try:
            schema_value = schema.check(float(text) if "e" in text or "." in text else text)
        except (ReportError, ValueError):
            schema_value = None
        try:
            cli_value = parse(text)
        except argparse.ArgumentTypeError:
            cli_value = None
        if text.lstrip("-").isdigit():
            try:
                schema_value = schema.check(int(text))
            except ReportError:
                schema_value = None
        assert cli_value == schema_value, (option, text)


# -- metric and config names --------------------------------------------------------------


def _metrics_frame():
    import pandas as pd

    columns = {
        f"{stage}.{name}": [0.5, 0.25]
        for stage in ("file", "read", "chunk")
        for name in ("AP", "RR", "recall", "nDCG@10", "nDCG@5", "R@10", "P@1", "P@5")
    }
    return pd.DataFrame({"config_name": ["a", "b"], "task_name": ["t", "t"], **columns})


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [("file.ap", "file.AP"), ("file.recal", "file.recall"), ("nDGC@10", "file.nDCG@10")],
)
def test_a_mistyped_metric_gets_a_suggestion_not_every_column(name, suggestion):
    # issue 21, item 6: `impact --metrics file.ap` listed ~100 column names
    from retrieval_lib.stats.columns import resolve_metrics

    frame = _metrics_frame()
    with pytest.raises(StatisticsError) as caught:
        resolve_metrics(frame, [name])
    message = str(caught.value)
    assert "(did you mean " in message and f"'{suggestion}'" in message.split("?")[0]
    assert "config_name" not in message and "chunk.P@5" not in message
    assert "all 24 metric columns" in message


def test_a_mistyped_config_gets_a_suggestion():
    from retrieval_lib.stats.paired import pair_configs

    with pytest.raises(StatisticsError, match="did you mean 'mcp-remote-direct'"):
        pair_configs(["baseline-local-direct", "mcp-remote-direct"], treatment="mcp-remote-direkt")

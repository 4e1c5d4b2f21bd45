"""The files the package ships (notebooks, parameter files, example runs), found by name."""

from pathlib import Path

import pytest

from retrieval_lib import bundled
from retrieval_lib.errors import ReportError
from retrieval_lib.report import load_params_file, resolve_notebook, resolve_params_file

REPO = Path(__file__).resolve().parents[1]


def test_every_top_level_notebook_and_parameter_file_is_shipped():
    assert bundled.notebook_names() == sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
    assert bundled.params_names() == sorted(p.stem for p in (REPO / "params").glob("*.yaml"))
    for name in bundled.notebook_names():
        shipped = resolve_notebook(name)
        assert shipped.read_bytes() == (REPO / "notebooks" / f"{name}.ipynb").read_bytes()


def test_shipped_example_runs_are_the_committed_examples():
    root = bundled.examples_dir()
    for name in ("runs", "benchmarks", "synth_manifest.json"):
        assert (root / name).resolve() == (REPO / "examples" / name).resolve()
    assert not (root / "kb").exists()  # the kb example ships once, in retrieval_lib.kb


def test_parameter_files_by_name_or_path(tmp_path):
    assert (
        resolve_params_file("example").read_bytes() == (REPO / "params/example.yaml").read_bytes()
    )
    assert load_params_file("kb_example")["run_a"] == "bm25-window200-v1"
    own = tmp_path / "mine.yaml"
    own.write_text('seed: 3\nrun_dir: "0042"\n', encoding="utf-8")
    assert resolve_params_file(str(own)) == own
    # a relative path parameter resolves against the parameter file's folder (issue 21)
    assert load_params_file(own) == {"seed": 3, "run_dir": str(tmp_path / "0042")}
    # a missing path is a path (the read fails with its name), not a shipped name
    with pytest.raises(ReportError, match="cannot read parameter file"):
        load_params_file(tmp_path / "missing.yaml")
    with pytest.raises(ReportError, match=r"no parameter file 'nope'.*example, kb_example"):
        load_params_file("nope")

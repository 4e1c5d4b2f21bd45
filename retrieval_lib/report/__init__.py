"""Notebook reports: parameter checking, papermill execution and self-contained HTML.

* :mod:`~retrieval_lib.report.params`: the notebook's annotated ``parameters`` cell, YAML
  parameter files, name and type checks (unknown names fail);
* :mod:`~retrieval_lib.report.execute`: papermill execution (kernel ``python3``) and HTML;
* :mod:`~retrieval_lib.report.html`: self-contained HTML (code hidden, no script, no CDN);
* :mod:`~retrieval_lib.report.tables` and :mod:`~retrieval_lib.report.figures`: what the
  run-analysis notebook shows (tables computed and tested here; PNG figures);
* :mod:`~retrieval_lib.report.pipeline`: normalize → evaluate → impact → report, and the
  bundled example.

Heavy imports (papermill, nbconvert, matplotlib, scipy) happen inside the functions that
need them.
"""

from retrieval_lib.report.execute import ReportResult, render_report
from retrieval_lib.report.params import (
    NotebookParameter,
    check_parameters,
    load_params_file,
    notebook_parameters,
    notebooks_dir,
    resolve_notebook,
    resolve_params_file,
)
from retrieval_lib.report.pipeline import (
    PipelineResult,
    bundled_examples,
    example_run,
    prepare_example_runs,
    run_pipeline,
)

__all__ = [
    "NotebookParameter",
    "PipelineResult",
    "ReportResult",
    "bundled_examples",
    "check_parameters",
    "example_run",
    "load_params_file",
    "notebook_parameters",
    "notebooks_dir",
    "prepare_example_runs",
    "render_report",
    "resolve_notebook",
    "resolve_params_file",
    "run_pipeline",
]

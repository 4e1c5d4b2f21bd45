"""``retrieval-lib report``: execute a parameterised notebook and render HTML."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "report",
        help="render the analysis notebook of evaluated runs to HTML (papermill)",
        description=(
            "For each PATH (a run folder that `retrieval-lib evaluate` has processed, i.e. "
            "with retrieval_events/), execute the notebook with kernel python3 and write "
            "<out>/<run_id>/<notebook>.ipynb and a self-contained .html (code hidden, figures "
            "embedded, nothing loaded from the network), then print the HTML path. Parameter "
            "names, types and ranges are checked before anything runs: unknown names fail. "
            "Relative paths in the parameter file are relative to that file's folder. "
            "Without PATH, run_analysis uses run_dir from the parameter file (neither: "
            "usage error, exit 2); other notebooks (--notebook kb_compare) need no PATH and "
            "write <out>/<notebook>/. A run's retrieval_impact.json made with other "
            "baseline/treatment/seed/n_boot values than the report's is recomputed (in "
            "memory) with the report's values, and the report says so."
        ),
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="evaluated run folder")
    parser.add_argument(
        "-f",
        "--parameters",
        metavar="YAML",
        help="parameter file: a path, or the name of a shipped one (example, kb_example, template)",
    )
    parser.add_argument(
        "--out", default="reports", metavar="DIR", help="output root (default: reports/)"
    )
    parser.add_argument(
        "--notebook",
        default="run_analysis",
        metavar="NAME",
        help="name of a shipped notebook (run_analysis, kb_compare, ...) or a path to an .ipynb",
    )
    parser.add_argument(
        "--strict-harness-version",
        action="store_true",
        help="run_analysis: match only tasks whose harness versions are known and equal "
        "(the parameter strict_harness_version)",
    )
    return parser


def _evaluated_run(raw: str) -> Path:
    """The run folder of ``raw`` after checking that ``retrieval-lib evaluate`` has run."""
    from retrieval_lib.errors import ReportError
    from retrieval_lib.events.document import EVENTS_DIRNAME
    from retrieval_lib.metrics.summary import SUMMARY_FILENAME

    path = Path(raw).resolve()
    if not path.is_dir():
        raise ReportError(f"no such run folder: {path}")
    events = path / EVENTS_DIRNAME if (path / EVENTS_DIRNAME).is_dir() else path
    if not (events / SUMMARY_FILENAME).is_file():
        raise ReportError(
            f"{path} has not been evaluated (no {EVENTS_DIRNAME}/{SUMMARY_FILENAME}); run "
            f"`retrieval-lib evaluate {raw}` first, or `retrieval-lib run` on the raw run"
        )
    return events.parent if events.name == EVENTS_DIRNAME else events


def _check_configs(run_dir: Path, values: dict[str, Any]) -> None:
    """Refuse a baseline or treatment config the run does not have (with "did you mean"),
    before the notebook runs."""
    if not (values.get("baseline") or values.get("treatment")):
        return
    from retrieval_lib.errors import ReportError, StatisticsError
    from retrieval_lib.metrics.table_files import find_metrics_tables, read_metrics_table
    from retrieval_lib.stats.paired import pair_configs

    table = read_metrics_table(find_metrics_tables(run_dir)[0])
    try:
        pair_configs(
            table["config_name"].dropna().astype(str),
            values.get("baseline") or None,
            values.get("treatment") or None,
        )
    except StatisticsError as exc:
        raise ReportError(f"{run_dir.name}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.errors import ReportError, UsageError
    from retrieval_lib.report import (
        check_parameters,
        load_params_file,
        notebook_parameters,
        render_report,
        resolve_notebook,
    )

    notebook = resolve_notebook(args.notebook)
    spec = notebook_parameters(notebook)
    base = load_params_file(args.parameters) if args.parameters else {}
    if args.strict_harness_version:
        if "strict_harness_version" not in spec:
            raise ReportError(f"{notebook.name} has no strict_harness_version parameter")
        base["strict_harness_version"] = True
    # Refuse unknown names, bad types and out-of-range values before executing anything.
    base = check_parameters(base, spec, notebook=notebook.name)
    out_root = Path(args.out)
    if "run_dir" not in spec:
        if args.paths:
            raise UsageError(f"{notebook.name} takes no run folder; give its parameters with -f")
        targets = [(out_root / notebook.stem, dict(base))]
    else:
        raws = args.paths or ([str(base["run_dir"])] if base.get("run_dir") else [])
        if not raws:
            raise UsageError(
                "give an evaluated run folder (PATH) or run_dir in the parameter file (-f)"
            )
        run_dirs = [_evaluated_run(raw) for raw in raws]
        targets = [(out_root / d.name, {**base, "run_dir": str(d)}) for d in run_dirs]
        for run_dir, (_, values) in zip(run_dirs, targets, strict=True):
            _check_configs(run_dir, values)
    for folder, values in targets:
        if "output_dir" in spec and not values.get("output_dir"):
            values["output_dir"] = str(folder.resolve())
        result = render_report(notebook, values, folder, name=notebook.stem)
        print(result.html)
    return 0

"""``retrieval-lib study``: many runs pooled into one analysis and report."""

from __future__ import annotations

import argparse

from retrieval_lib.cli._dask import add_arguments as add_dask_arguments
from retrieval_lib.cli._dask import dask_mapper
from retrieval_lib.cli._types import add_whole_job_options


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "study",
        help="pool many runs (models x configs x dates) into one analysis and report",
        description=(
            "Normalise and evaluate the runs under PATH that are not yet up to date (outputs "
            "under --out/<run_id>/ are reused when their inputs did not change), pool every "
            "trial by config family, and render --out/study/study.{ipynb,html} with its "
            "tables (study/tables/). Input runs are only read."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="run folder, folder of runs, or evaluated run"
    )
    add_whole_job_options(
        parser,
        parameters_help="study notebook parameter file: a path, or the name of a shipped one "
        "(study)",
    )
    parser.add_argument(
        "--config-map",
        action="append",
        default=[],
        metavar="NAME=FAMILY",
        help="count raw config NAME as config family FAMILY (repeatable; extends the default "
        "mapping: baseline -> baseline-local-direct, mcp and sourcegraph_full -> "
        "mcp-remote-direct)",
    )
    parser.add_argument(
        "--no-report", action="store_true", help="stop after the tables (no notebook, no HTML)"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every input file and every document of each run to decide what is up "
        "to date (default: each run's completion record, the run folder's top-level listing "
        "and the hashed files the study reads; a file rewritten deeper inside a run is "
        "noticed only with --verify)",
    )
    add_dask_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.report import load_params_file
    from retrieval_lib.report.study_report import run_study
    from retrieval_lib.study.families import parse_config_map

    params = load_params_file(args.parameters) if args.parameters else {}
    if args.strict_harness_version:
        params["strict_harness_version"] = True
    config_map = parse_config_map(args.config_map)
    prepared = None
    with dask_mapper(args) as map_fn:
        if map_fn is not None:
            # The runs are brought up to date on the cluster; the (small) study tables
            # and the report are made here once the cluster is closed.
            from retrieval_lib.report.study_report import check_study_inputs
            from retrieval_lib.study.loader import prepare_runs

            check_study_inputs(params, config_map, not args.no_report)
            prepared = prepare_runs(
                args.paths,
                args.tasks_root,
                out=args.out,
                log=print,
                map_fn=map_fn,
                verify=args.verify,
            )
    result = run_study(
        args.paths,
        args.tasks_root,
        args.out,
        params=params,
        config_map=config_map,
        workers=args.workers,
        report=not args.no_report,
        prepared=prepared,
        verify=args.verify,
    )
    if result.html is None:
        print(f"study tables: {result.study_dir / 'tables'}")
    return 0

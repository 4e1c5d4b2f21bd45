"""``retrieval-lib study``: many runs pooled into one analysis and report."""

from __future__ import annotations

import argparse

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
    return parser


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.report import load_params_file
    from retrieval_lib.report.study_report import run_study
    from retrieval_lib.study.families import parse_config_map

    params = load_params_file(args.parameters) if args.parameters else {}
    if args.strict_harness_version:
        params["strict_harness_version"] = True
    config_map = parse_config_map(args.config_map)
    result = run_study(
        args.paths,
        args.tasks_root,
        args.out,
        params=params,
        config_map=config_map,
        workers=args.workers,
        report=not args.no_report,
    )
    if result.html is None:
        print(f"study tables: {result.study_dir / 'tables'}")
    return 0

"""``retrieval-lib run``: normalize -> evaluate -> impact -> report in one go."""

from __future__ import annotations

import argparse

from retrieval_lib.cli._types import add_whole_job_options


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "run",
        help="normalize, evaluate, analyse impact and render the report of every run",
        description=(
            "The whole job: for each run found under PATH, write event documents, metrics, "
            "the impact analysis and the HTML report under --out/<run_id>/. Input runs are "
            "only read."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run folder or folder of runs")
    add_whole_job_options(
        parser,
        parameters_help="notebook parameter file: a path, or the name of a shipped one "
        "(example, template)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.report import load_params_file
    from retrieval_lib.report.pipeline import run_pipeline

    params = load_params_file(args.parameters) if args.parameters else {}
    if args.strict_harness_version:
        params["strict_harness_version"] = True
    run_pipeline(args.paths, args.tasks_root, args.out, params=params, workers=args.workers)
    return 0

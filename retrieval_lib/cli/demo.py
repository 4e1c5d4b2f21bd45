"""``retrieval-lib demo``: the whole job on the example runs that ship with the project."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "demo",
        help="run the whole job on the bundled example runs (the README's main command)",
        description=(
            "Write the bundled example runs and task definitions to DIR/example_data "
            "(deterministic generator), then normalize, evaluate, analyse and report them: "
            "the study pooling both runs into DIR/study/, each run into DIR/<run_id>/."
        ),
    )
    parser.add_argument(
        "--out", default="reports", metavar="DIR", help="output root (default: reports/)"
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from retrieval_lib.report.pipeline import prepare_example_runs, run_pipeline

    runs, tasks = prepare_example_runs(Path(args.out) / "example_data")
    run_pipeline([runs], tasks, args.out)
    return 0

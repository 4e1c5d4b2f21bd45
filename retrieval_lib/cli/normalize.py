"""``retrieval-lib normalize``: run folders to retrieval-event documents."""

from __future__ import annotations

import argparse
import sys

from retrieval_lib.cli._dask import add_arguments as add_dask_arguments
from retrieval_lib.cli._dask import mapper
from retrieval_lib.cli._types import positive_int


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "normalize",
        help="normalise agent traces of run folders into retrieval-event documents",
        description=(
            "Discover trials under each PATH (a run folder or a folder of runs, batch or "
            "archived job layout), parse their traces, load ground truth from --tasks-root "
            "and write <run>/retrieval_events/<config>/<task>.retrieval_events.json "
            "(or the same layout under --out/<run_id>/)."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="run folder or folder of runs")
    parser.add_argument(
        "--tasks-root",
        required=True,
        metavar="DIR",
        help="root of the task definitions (benchmarks/<suite>/<task>/)",
    )
    parser.add_argument("--out", metavar="DIR", help="write under DIR instead of inside the runs")
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="worker processes (default: cores, max 4)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar, no per-trial errors")
    add_dask_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.normalize import default_workers
    from retrieval_lib.run_many import normalize_many

    progress = not args.quiet and sys.stderr.isatty()
    workers = args.workers if args.workers is not None else default_workers()
    with mapper(args, workers=workers) as on:
        report, _ = normalize_many(
            args.paths, args.tasks_root, mapper=on, out=args.out, progress=progress
        )
    if not args.quiet:
        for output in report.failures:
            print(f"failed: {output.trial_dir}: {output.error}", file=sys.stderr)
        for path, reason in report.left_out:
            print(f"left out: {path}: {reason}", file=sys.stderr)
    print(report.summary_line())
    # an entry left out may be a lost trial: as for a failed one, the exit status says so
    return 1 if report.failed or report.left_out else 0

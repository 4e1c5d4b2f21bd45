"""``retrieval-lib evaluate``: retrieval metrics, run summary and tidy table of runs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrieval_lib.cli._dask import add_arguments as add_dask_arguments
from retrieval_lib.cli._dask import mapper


def parse_k(text: str) -> tuple[int, ...]:
    """Parse ``--k 1,3,5,10`` into sorted unique positive integers (argparse type).

    Examples
    --------
    >>> parse_k("10,1,5")
    (1, 5, 10)
    """
    values = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise argparse.ArgumentTypeError(
                f"--k takes positive integers separated by commas, got {text!r}"
            )
        values.append(int(part))
    return tuple(sorted(set(values)))


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "evaluate",
        help="compute retrieval metrics (stages 1-4) and the run summary from event documents",
        description=(
            "For each run under PATH (a run folder holding retrieval_events/, an events "
            "folder, or a folder of runs) write <task>.retrieval_metrics.json beside every "
            "<task>.retrieval_events.json, and run_retrieval_summary.json plus "
            "retrieval_metrics.parquet (CSV without pyarrow) in the events folder."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="run folder, events folder or folder of runs"
    )
    parser.add_argument(
        "--k",
        type=parse_k,
        default=(1, 3, 5, 10),
        metavar="K,...",
        help="cut-offs of P/R/F1/nDCG (default: 1,3,5,10)",
    )
    add_dask_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    """Evaluate every root; one that fails is reported and the others still run."""
    from retrieval_lib.errors import RetrievalLibError
    from retrieval_lib.metrics.summary import find_events_roots
    from retrieval_lib.run_many import evaluate_many
    from retrieval_lib.runs import LeftOut

    left_out = LeftOut()
    roots = find_events_roots(args.paths, left_out)
    for line in left_out.lines():  # a folder of runs with one that cannot be listed
        print(line, file=sys.stderr)
    failed = len(left_out)
    with mapper(args, progress=sys.stderr.isatty()) as on:
        results = evaluate_many(roots, args.k, mapper=on)
        for result in results:
            if isinstance(result, RetrievalLibError):
                print(f"retrieval-lib evaluate: error: {result}", file=sys.stderr)
                failed += 1
            else:
                failed += _print_result(result)
    return 1 if failed else 0


def _print_result(result: Any) -> int:
    """Print what one evaluation wrote; return its number of invalid documents."""
    print(
        f"{result.events_dir}: {result.documents} documents, {result.computable} "
        f"computable, {len(result.failures)} invalid, {result.seconds:.2f} s"
    )
    print(f"  wrote {result.metrics_files} metrics files beside the event documents")
    print(f"  wrote {result.summary_path}")
    print(f"  wrote {result.table_path}")
    for path, message in result.failures:
        print(f"invalid document: {path}: {message}", file=sys.stderr)
    return len(result.failures)

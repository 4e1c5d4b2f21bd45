"""``retrieval-lib synth``: write synthetic benchmark runs in the real layout."""

from __future__ import annotations

import argparse

from retrieval_lib.cli._types import positive_int
from retrieval_lib.report.params import SEED


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "synth",
        help="generate synthetic runs and tasks (example data, benchmarks)",
        description=(
            "Write deterministic synthetic benchmark runs under DIR: task definitions in "
            "benchmarks/, run folders in runs/official/ (batch and archived job layouts, "
            "claude-code.txt transcripts and ATIF trajectory.json files), a README.md and "
            "synth_manifest.json with the facts each trial contains. The same arguments "
            "always give byte-identical files. 'retrieval-lib synth --out examples --scale "
            "example' regenerates the bundled examples/ folder."
        ),
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument(
        "--tasks",
        type=positive_int,
        default=None,
        metavar="N",
        help="number of tasks (default: 10 for --scale example, 200 for bench)",
    )
    parser.add_argument(
        "--seed", type=SEED.cli_type(), default=0, metavar="S", help="random seed (default 0)"
    )
    parser.add_argument(
        "--runs", type=positive_int, default=1, metavar="N", help="batch-layout runs (default 1)"
    )
    parser.add_argument(
        "--scale",
        choices=("example", "bench"),
        default="example",
        help="example: short reads, per-call facts; bench: longer reads (default example)",
    )
    parser.add_argument(
        "--transcript-mb",
        type=float,
        default=None,
        metavar="X",
        help="pad every trace to about X MB with whole-file reads (for benchmarks)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from retrieval_lib.errors import InputError
    from retrieval_lib.synth import generate_runs

    if args.transcript_mb is not None and args.transcript_mb < 0:
        raise InputError("--transcript-mb must not be negative")
    target = int(args.transcript_mb * 1_000_000) if args.transcript_mb else None
    began = time.perf_counter()
    manifest = generate_runs(
        Path(args.out),
        n_tasks=args.tasks,
        seed=args.seed,
        n_runs=args.runs,
        scale=args.scale,
        transcript_target_bytes=target,
    )
    elapsed = time.perf_counter() - began
    print(Path(args.out))
    print(f"{manifest.summary()} in {elapsed:.1f} s")
    return 0

"""argparse value types shared by the sub-commands (bad values are usage errors, exit 2)."""

from __future__ import annotations

import argparse


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def positive_int(text: str) -> int:
    """An integer ≥ 1 (resample counts, minimum sizes, workers)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_whole_job_options(parser: argparse.ArgumentParser, *, parameters_help: str) -> None:
    """The options ``run`` and ``study`` share: tasks root, output root, parameter file,
    normalisation workers and the harness-version rule."""
    parser.add_argument("--tasks-root", required=True, metavar="DIR", help="task definitions root")
    parser.add_argument(
        "--out", default="reports", metavar="DIR", help="output root (default: reports/)"
    )
    parser.add_argument("-f", "--parameters", metavar="YAML", help=parameters_help)
    parser.add_argument(
        "--workers", type=positive_int, default=1, metavar="N", help="normalisation workers"
    )
    parser.add_argument(
        "--strict-harness-version",
        action="store_true",
        help="match only tasks whose harness versions are known and equal on both sides "
        "(the report parameter strict_harness_version; default: an unknown version is no "
        "difference, such pairs are kept and flagged)",
    )

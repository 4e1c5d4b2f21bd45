"""``retrieval-lib export-trec``: what the agents retrieved, as TREC run and qrels files."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "export-trec",
        help="write TREC run and qrels files of normalised runs (per run and config family)",
        description=(
            "For every run and config family of the retrieval-event documents under PATH, "
            "write DIR/<run_id>/<family>.run (each trial's retrieved files in order of first "
            "retrieval) and DIR/<run_id>/<family>.qrels (its ground-truth files), for "
            "trec_eval, ranx or ir_measures (docs/contracts.md section 7). Inputs are only read."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="normalised run, events folder or folder of runs"
    )
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder")
    parser.add_argument(
        "--config-map",
        action="append",
        default=[],
        metavar="NAME=FAMILY",
        help="count raw config NAME as config family FAMILY (repeatable)",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.study.families import parse_config_map
    from retrieval_lib.trec_export import export_trec

    config_map = parse_config_map(args.config_map)
    for files in export_trec(args.paths, args.out, config_map=config_map):
        print(
            f"{files.run_id} / {files.family}: {files.n_queries} trials, {files.n_judged} "
            f"judged -> {files.run_path}, {files.qrels_path}"
        )
    return 0

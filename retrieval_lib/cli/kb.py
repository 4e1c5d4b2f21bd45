"""``retrieval-lib kb``: RAG knowledge-base evaluation runs in an SQLite store.

Sub-commands: ``ingest`` (one run, one transaction, then its aggregate), ``aggregate RUN``
(recompute and store), ``compare A B`` (deltas, per-query kinds, significance, optional
Markdown report), ``runs`` (list runs with their aggregates, in ingest order) and
``delete RUN`` (a run with its results, chunks and aggregate, in one transaction). ``--json`` prints the
machine-readable structures (4 decimals, NaN as null) to stdout.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from retrieval_lib.report.params import N_BOOT, SEED

_DEFAULT_DB = "eval.sqlite"


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=_DEFAULT_DB,
        metavar="PATH",
        help=f"SQLite store of evaluation runs (default: {_DEFAULT_DB})",
    )


def _add_ingest(commands: argparse._SubParsersAction) -> None:
    """The ``kb ingest`` sub-command: results, golden set, chunk inventory, run metadata."""
    ingest = commands.add_parser(
        "ingest",
        help="store one run (one transaction) and its aggregate",
        description=(
            "Validate RESULTS (one JSON object per line: query_id, hits[chunk_id, doc_id, "
            "rank, score, source_spans], optional answer{text, grounded, citations} and "
            "error) against the golden set and store it, with a snapshot of the golden set, "
            "the chunk inventory and the config, in one transaction: a bad line leaves the "
            "store unchanged and the error names the line. Then compute and store the "
            "run's aggregate."
        ),
    )
    ingest.add_argument(
        "results", metavar="RESULTS.jsonl", help="the run's results, one JSON object per line"
    )
    ingest.add_argument(
        "--golden", required=True, metavar="golden.yaml", help="golden queries (YAML list)"
    )
    _db_option(ingest)
    ingest.add_argument(
        "--chunks",
        metavar="chunks.jsonl",
        help="chunk inventory {chunk_id, doc_id, source_spans} per line: citations resolve "
        "against it, expected chunks get their spans from it",
    )
    ingest.add_argument(
        "--run-id", metavar="ID", help="run id (default: <results stem>-<sha256[:12]>)"
    )
    ingest.add_argument("--chunker-version", metavar="V", help="chunker version of the run")
    ingest.add_argument(
        "--config", metavar="config.json", help="run configuration (JSON object) to snapshot"
    )
    ingest.add_argument(
        "--suite", metavar="NAME", help="suite name (default: the golden file's stem)"
    )
    ingest.add_argument(
        "--json", action="store_true", help="print the ingest summary and aggregate as JSON"
    )


def _add_compare(commands: argparse._SubParsersAction) -> None:
    """The ``kb compare`` sub-command: the runs, chunker-version policy, bootstrap, report."""
    compare = commands.add_parser(
        "compare",
        help="compare run B (and further runs C...) against run A",
        description=(
            "Per-metric deltas (B − A), per-query Win/Loss/Draw/Regression, a paired "
            "bootstrap CI and Wilcoxon test per ranking metric. Runs with different "
            "chunker versions are matched by document + ≥50% span overlap "
            "(deltas.chunker_version_match = fallback_doc_span) unless "
            "--strict-chunker-version is given."
        ),
    )
    compare.add_argument("run_a", metavar="A", help="baseline run id")
    compare.add_argument("run_b", metavar="B", help="candidate run id")
    compare.add_argument(
        "more_runs",
        nargs="*",
        metavar="C",
        help="further candidate runs: each run is compared with A, the Wilcoxon p-values "
        "Holm-adjusted over every run and metric (two runs: the two-run compare)",
    )
    _db_option(compare)
    compare.add_argument(
        "--strict-chunker-version",
        action="store_true",
        help="refuse to compare runs with different chunker versions",
    )
    compare.add_argument("--report", metavar="out.md", help="also write a Markdown report")
    compare.add_argument(
        "--bootstrap",
        type=N_BOOT.cli_type(),
        default=2000,
        metavar="N",
        help="bootstrap resamples (default 2000)",
    )
    compare.add_argument(
        "--seed", type=SEED.cli_type(), default=0, help="bootstrap RNG seed (default 0)"
    )
    compare.add_argument("--json", action="store_true", help="print the CompareReport as JSON")


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "kb",
        help="RAG knowledge-base evaluation: ingest runs, aggregate, compare",
        description=(
            "Store RAG evaluation runs (results JSONL + golden YAML + chunk inventory) in "
            "SQLite, compute hit@k, MRR, recall@k_doc, citation coverage, groundedness, "
            "empty-result rate and refusal correctness, and compare two runs."
        ),
    )
    commands = parser.add_subparsers(dest="kb_command", metavar="KB_COMMAND")
    commands.required = True

    _add_ingest(commands)

    _add_plain(commands, "aggregate")
    _add_compare(commands)
    _add_plain(commands, "delete")
    _add_plain(commands, "runs")
    return parser


#: The ``kb`` sub-commands that take at most a RUN, ``--db`` and ``--json``:
#: name -> (help, description, RUN's help or None without RUN, --json's help).
_PLAIN_COMMANDS: dict[str, tuple[str, str, str | None, str]] = {
    "aggregate": (
        "recompute a run's aggregate metrics and store them",
        "Compute the aggregate metrics of RUN from its stored results and golden "
        "snapshot, write them to eval_runs.aggregate_json (4 decimals, NaN as null) "
        "and print them.",
        "run id",
        "print AggregateMetrics as JSON",
    ),
    "delete": (
        "delete a run with its results, chunks and aggregate",
        "Delete RUN from the store: its row (snapshots and aggregate), its per-query "
        "results, chunk inventory and result columns, in one transaction. An unknown "
        "run id changes nothing and is an error naming the close run ids.",
        "run id (as `kb runs` lists it)",
        "print what was deleted as JSON",
    ),
    "runs": (
        "list stored runs with their aggregates",
        "List the runs of the store in ingest order (oldest first) with their stored "
        "aggregates; the chunker version is shown only when one was recorded.",
        None,
        "print the runs as a JSON list",
    ),
}


def _add_plain(commands: argparse._SubParsersAction, name: str) -> None:
    help_text, description, run_help, json_help = _PLAIN_COMMANDS[name]
    command = commands.add_parser(name, help=help_text, description=description)
    if run_help is not None:
        command.add_argument("run_id", metavar="RUN", help=run_help)
    _db_option(command)
    command.add_argument("--json", action="store_true", help=json_help)


def _summary_table(aggregate: Any) -> str:
    from retrieval_lib.kb.report_md import format_value

    lines = []
    # Every rate with the n behind it (hit@k and recall_doc@k share one denominator).
    denominator_key = {"hit": "hit_at_k", "recall_doc": "recall_at_k_doc"}
    for name, value in aggregate.scalar_metrics().items():
        family = name.split("@", 1)[0]
        n = aggregate.denominators.get(denominator_key.get(family, family))
        suffix = f"  (n={n})" if n is not None else ""
        lines.append(f"  {name:<20} {format_value(value):<7}{suffix}")
    lines.append(f"  {'total_queries':<20} {aggregate.total_queries}")
    lines.append(f"  {'failed_queries':<20} {aggregate.failed_queries}")
    for name, why in sorted(aggregate.null_reasons.items()):
        lines.append(f"  note: {name}: {why}")
    return "\n".join(lines)


def _run_ingest(args: argparse.Namespace) -> int:
    from retrieval_lib.io import dumps_json
    from retrieval_lib.kb.ingest import ingest_run
    from retrieval_lib.kb.metrics import STORAGE_DIGITS, compute_aggregate, store_aggregate
    from retrieval_lib.kb.store import KBStore

    with KBStore(args.db) as store:
        summary = ingest_run(
            store,
            args.results,
            args.golden,
            chunks_path=args.chunks,
            run_id=args.run_id,
            chunker_version=args.chunker_version,
            config_path=args.config,
            suite=args.suite,
            resume=True,  # a run stored by an ingest killed before its aggregate
        )
        aggregate = compute_aggregate(store, summary.run_id)
        store_aggregate(store, summary.run_id, aggregate)
    if args.json:
        payload = {"ingest": summary.to_dict(), "aggregate": aggregate.to_dict()}
        sys.stdout.write(dumps_json(payload, ndigits=STORAGE_DIGITS))
        return 0
    if summary.resumed:
        print(
            f"run {summary.run_id!r} was already stored by an earlier ingest of the same "
            "results that stopped before its aggregate; the aggregate is now complete"
        )
    print(
        f"ingested run {summary.run_id!r} into {args.db}: {summary.results} results, "
        f"{summary.chunks} chunks, {summary.missing_queries} of {summary.golden_queries} "
        "golden queries without a result"
    )
    for warning in summary.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(_summary_table(aggregate))
    return 0


def _run_aggregate(args: argparse.Namespace) -> int:
    from retrieval_lib.kb.metrics import compute_aggregate, store_aggregate
    from retrieval_lib.kb.store import KBStore

    with KBStore(args.db, create=False) as store:
        aggregate = compute_aggregate(store, args.run_id)
        store_aggregate(store, args.run_id, aggregate)
    if args.json:
        sys.stdout.write(aggregate.to_json(indent=2))
    else:
        print(f"run {args.run_id!r}")
        print(_summary_table(aggregate))
    return 0


def _run_compare(args: argparse.Namespace) -> int:
    """``kb compare A B``, or ``A B C ...``: every run against A, p Holm-adjusted over runs
    and metrics (:mod:`retrieval_lib.kb.compare_many`)."""
    from retrieval_lib.io import atomic_write_text, dumps_json
    from retrieval_lib.kb.compare import compare_runs
    from retrieval_lib.kb.definitions import STORAGE_DIGITS
    from retrieval_lib.kb.report_md import render_report_md
    from retrieval_lib.kb.store import KBStore

    options: dict[str, Any] = {
        "strict_chunker_version": args.strict_chunker_version,
        "n_bootstrap": args.bootstrap,
        "seed": args.seed,
    }
    many = bool(args.more_runs)
    result: Any
    with KBStore(args.db, create=False) as store:
        if many:
            from retrieval_lib.kb.compare_many import compare_many

            result = compare_many(store, args.run_a, [args.run_b, *args.more_runs], **options)
        else:
            result = compare_runs(store, args.run_a, args.run_b, **options)
    if args.report:
        atomic_write_text(args.report, result.to_markdown() if many else render_report_md(result))
    if args.json:
        sys.stdout.write(dumps_json(result.to_dict(), ndigits=STORAGE_DIGITS))
        return 0
    if many:
        summary = result.summary()
        print(
            f"{len(result.reports)} runs against {args.run_a} (p Holm-adjusted over runs x metrics)"
        )
    for report in result.reports if many else [result]:
        print(f"{args.run_a} vs {report.run_b} (chunk matching: {report.chunker_version_match})")
        if many:
            rows = summary[summary["run"] == report.run_b].to_dict("records")
        else:
            rows = report.metric_rows()
        _print_metric_rows(rows, report.kind_counts())
    if args.report:
        print(f"report written to {args.report}")
    return 0


def _print_metric_rows(rows: list[dict[Any, Any]], kind_counts: dict[str, int]) -> None:
    """One line per metric row of a kb comparison (A -> B, delta, CI and p where paired;
    ``p_holm`` when the row has it), then the outcome counts."""
    from retrieval_lib.kb.report_md import format_ci, format_value

    for row in rows:
        ci = ""
        if row["paired_n"]:
            ci = f"  CI {format_ci(row)}  p={format_value(row['wilcoxon_p'])}"
            if "p_holm" in row:
                ci += f"  p_holm={format_value(row['p_holm'])}"
        print(
            f"  {row['metric']:<20} {format_value(row['a'])} -> {format_value(row['b'])}  "
            f"delta {format_value(row['delta'], signed=True)}{ci}"
        )
    print("  " + ", ".join(f"{k}: {v}" for k, v in kind_counts.items()))


def _run_runs(args: argparse.Namespace) -> int:
    from retrieval_lib.io import dumps_json
    from retrieval_lib.kb.store import KBStore

    with KBStore(args.db, create=False) as store:
        rows: list[dict[str, Any]] = [
            {
                "run_id": r.run_id,
                "suite": r.suite,
                "created_at": r.created_at,
                "chunker_version": r.chunker_version,
                **store.count_rows(r.run_id),  # results, chunks
                "aggregate": r.aggregate,
            }
            for r in store.list_runs()
        ]
    if args.json:
        sys.stdout.write(dumps_json(rows))
        return 0
    if not rows:
        print(f"no runs in {args.db}")
    for row in rows:
        print(_run_line(row))
    return 0


def _run_line(row: dict[str, Any]) -> str:
    """One line of ``kb runs``: only what was recorded (no ``None`` placeholders)."""
    from retrieval_lib.kb.report_md import format_value

    agg = row["aggregate"]
    if not agg:
        summary = "aggregate not computed (`retrieval-lib kb aggregate RUN` computes it)"
    else:
        summary = "hit@5 {} mrr {} recall_doc@5 {}".format(
            *(
                format_value(v)
                for v in (agg["hit_at_k"].get("5"), agg["mrr"], agg["recall_at_k_doc"].get("5"))
            )
        )
    parts = [str(row["run_id"]), str(row["created_at"])]
    if row["suite"] is not None:
        parts.append(f"suite={row['suite']}")
    if row["chunker_version"] is not None:
        parts.append(f"chunker={row['chunker_version']}")
    parts += [f"results={row['results']}", f"chunks={row['chunks'] or 'none'}", summary]
    return "  ".join(parts)


def _run_delete(args: argparse.Namespace) -> int:
    from retrieval_lib.io import dumps_json
    from retrieval_lib.kb.store import KBStore

    with KBStore(args.db, create=False) as store:
        counts = store.delete_run(args.run_id)
    if args.json:
        sys.stdout.write(dumps_json({"deleted": args.run_id, **counts}))
        return 0
    print(
        f"deleted run {args.run_id!r} from {args.db}: its aggregate, {counts['results']} "
        f"results and {counts['chunks']} chunks"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    handlers = {
        "ingest": _run_ingest,
        "aggregate": _run_aggregate,
        "compare": _run_compare,
        "runs": _run_runs,
        "delete": _run_delete,
    }
    return handlers[args.kb_command](args)

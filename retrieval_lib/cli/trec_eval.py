"""``retrieval-lib trec-eval``: score a TREC run against qrels, printed as trec_eval does."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from retrieval_lib.trec import supported_measures

    parser = subparsers.add_parser(
        "trec-eval",
        help="score a TREC run file against a qrels file with trec_eval's measures and output",
        description=(
            "Read QRELS ('qid iter docno rel', graded allowed) and RUN ('qid Q0 docno rank "
            "score tag'; documents ordered by score descending, ties by docno descending, "
            "the rank column ignored) and print trec_eval's three columns "
            "'measure<TAB>qid<TAB>value'. Queries of the run without judgements are "
            "skipped; 'all' is the mean over the scored queries (the sum for num_*). A "
            "query without relevant documents has no value (trec_eval would print 0). "
            f"Measures: {supported_measures()}."
        ),
    )
    parser.add_argument("qrels", metavar="QRELS", help="TREC qrels file")
    parser.add_argument("run_file", metavar="RUN", help="TREC run file")
    parser.add_argument(
        "-m",
        "--measure",
        action="append",
        default=[],
        metavar="MEASURE",
        help="a measure, with cut-offs as in trec_eval (P.5,10); repeatable (default: "
        "num_ret num_rel num_rel_ret map Rprec recip_rank P)",
    )
    parser.add_argument(
        "-q", "--per-query", action="store_true", help="also print each query's values"
    )
    parser.add_argument(
        "-l",
        "--relevance-level",
        type=_level,
        default=1,
        metavar="N",
        help="smallest grade counted relevant by the binary measures (default 1)",
    )
    return parser


def _level(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from retrieval_lib.trec import (
        evaluate,
        format_trec_eval,
        parse_measures,
        read_qrels,
        read_run,
    )

    measures = [m for text in args.measure for m in text.split()] or None
    parse_measures(measures)  # a usage error before any file is read
    evaluation = evaluate(
        read_qrels(args.qrels),
        read_run(args.run_file),
        measures,
        relevance_level=args.relevance_level,
    )
    sys.stdout.write(format_trec_eval(evaluation, per_query=args.per_query))
    if evaluation.not_computable:
        print(
            "retrieval-lib trec-eval: note: no relevant documents (ranking measures left "
            f"out of 'all'): {', '.join(evaluation.not_computable)}",
            file=sys.stderr,
        )
    return 0

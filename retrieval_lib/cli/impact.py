"""``retrieval-lib impact``: outcome associations and matched baseline-vs-MCP comparisons.

Reads each run's per-task metrics table (written by ``retrieval-lib evaluate``), writes
``retrieval_impact.json`` beside it and prints a compact summary; ``--pool OUT`` also
writes one analysis over all runs together.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from retrieval_lib.cli._types import positive_int
from retrieval_lib.report.params import N_BOOT, SEED

#: Comparisons the summary prints for each pair, when present.
HEADLINE_METRICS = ("reward", "passed", "cost_usd", "agent_execution_seconds", "total_tokens")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``impact`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser(
        "impact",
        help="relate retrieval metrics to outcomes and compare baseline vs MCP on matched tasks",
        description=(
            "Correlate retrieval metrics with task outcomes (associations, not causes) and "
            "compare baseline and treatment (MCP) configs on matched tasks with paired "
            "statistics. Writes <run>/retrieval_events/retrieval_impact.json for each run "
            "(run `retrieval-lib evaluate` first)."
        ),
    )
    parser.add_argument(
        "paths", nargs="+", metavar="PATH", help="run folder, folder of runs, or metrics table"
    )
    parser.add_argument(
        "--baseline", metavar="CONFIG", help="baseline config (default: names starting 'baseline')"
    )
    parser.add_argument(
        "--treatment",
        metavar="CONFIG",
        help="treatment config (default: names starting 'mcp' or 'sourcegraph')",
    )
    parser.add_argument(
        "--seed",
        type=SEED.cli_type(),
        default=0,
        metavar="N",
        help="seed of the permutation p-values and bootstraps (default 0)",
    )
    parser.add_argument(
        "--n-boot",
        type=N_BOOT.cli_type(),
        default=10000,
        metavar="N",
        help="bootstrap resamples (default 10000)",
    )
    parser.add_argument(
        "--min-n",
        type=positive_int,
        default=5,
        metavar="N",
        help="fewest complete pairs for a correlation (default 5)",
    )
    parser.add_argument(
        "--combine",
        choices=("mean", "latest"),
        default="mean",
        help="how repeated trials of a task are combined (default mean)",
    )
    parser.add_argument(
        "--metrics",
        type=_metric_family,
        default="key",
        metavar="key|all|LIST",
        help=(
            "retrieval metrics to correlate and compare (their multiple-testing family): "
            "'key' (default: file.AP, file.RR, file.nDCG@10, file.R@10, file.recall, "
            "file.context_efficiency, read.recall, chunk.recall), "
            "'all' metric columns, or a comma-separated list"
        ),
    )
    parser.add_argument(
        "--exclude-flagged",
        action="store_true",
        help="leave errored and timed-out trials out of the correlations "
        "(default: keep them, counted in each row's n_flagged)",
    )
    parser.add_argument(
        "--strict-harness-version",
        action="store_true",
        help="match only tasks whose harness versions are known and equal on both sides "
        "(default: a version that could not be read is no difference; such pairs are kept "
        "and flagged harness_version_unverified)",
    )
    parser.add_argument(
        "--pool",
        metavar="OUT",
        help="also write a pooled analysis of all runs (a .json file or a folder)",
    )
    return parser


def _metric_family(text: str) -> str | list[str]:
    value = text.strip()
    if value in ("key", "all"):
        return value
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give 'key', 'all' or a comma-separated list of metrics")
    return names


def _fmt(value: Any, *, signed: bool = True) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{float(value):+.3g}" if signed else f"{float(value):.3g}"


def summarize(result: Any, label: str) -> list[str]:
    """Summary lines of one :class:`~retrieval_lib.stats.impact.ImpactResult`."""
    from retrieval_lib.stats.paired import matched_summary

    lines = [label]
    if result.pairs.empty:
        lines.append("  no baseline/treatment config pair (use --baseline/--treatment)")
    comparisons = result.comparisons
    strict = bool(result.params.get("strict_harness_version", False))
    for pair in result.pairs.itertuples(index=False):
        matched = matched_summary(
            int(pair.n_matched), int(pair.n_harness_unverified), strict=strict
        )
        lines.append(
            f"  {pair.baseline} vs {pair.treatment}: {matched}; "
            f"{pair.n_unmatched} unmatched, {pair.n_flagged} flagged (errored/timed out)"
        )
        rows = comparisons[
            (comparisons["baseline"] == pair.baseline)
            & (comparisons["treatment"] == pair.treatment)
        ].set_index("metric")
        for metric in HEADLINE_METRICS:
            if metric not in rows.index:
                continue
            row = rows.loc[metric]
            if not row["computable"]:
                # not tested: the deltas are still described (n, mean), the reason follows
                reason = str(row["reason"])
                described = (
                    f"mean delta {_fmt(row['mean_delta'])}, n={int(row['n'])}, "
                    if int(row["n"])
                    else ""
                )
                lines.append(f"    {metric}: {described}not tested ({reason})")
                continue
            lines.append(
                f"    {metric}: mean delta {_fmt(row['mean_delta'])} "
                f"[95% CI {_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}], n={int(row['n'])}, "
                f"Wilcoxon p={_fmt(row['wilcoxon_p'], signed=False)} "
                f"(Holm {_fmt(row['wilcoxon_p_holm'], signed=False)})"
            )
    corr = result.correlations
    if not corr.empty:
        computable = int(corr["computable"].sum())
        flagged = int((corr["n_flagged"] > 0).sum()) if "n_flagged" in corr.columns else 0
        lines.append(
            f"  correlations: {computable} of {len(corr)} computable "
            "(associations, not causal effects)"
            + (f"; {flagged} include errored/timed-out trials (n_flagged)" if flagged else "")
        )
    metrics = result.params.get("metrics") or []
    lines.append(
        f"  metric family ({result.params.get('metric_family', 'key')}, {len(metrics)}): "
        + (", ".join(metrics) or "none")
    )
    return lines


def run(args: argparse.Namespace) -> int:
    """Execute ``retrieval-lib impact``."""
    from retrieval_lib.stats.impact import run_impact

    outcome = run_impact(
        args.paths,
        baseline=args.baseline,
        treatment=args.treatment,
        seed=args.seed,
        n_boot=args.n_boot,
        min_n=args.min_n,
        combine=args.combine,
        pool=args.pool,
        metrics=args.metrics,
        exclude_flagged=args.exclude_flagged,
        strict_harness_version=args.strict_harness_version,
    )
    for (table, result), written in zip(outcome.results.items(), outcome.written, strict=False):
        print("\n".join(summarize(result, f"{table}:")))
        print(f"  wrote {written}")
    if outcome.pooled is not None:
        print("\n".join(summarize(outcome.pooled, "pooled over all runs:")))
        print(f"  wrote {outcome.written[-1]}")
    return 0

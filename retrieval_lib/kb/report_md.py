"""Render a :class:`~retrieval_lib.kb.compare.CompareReport` as one Markdown page.

For people, not machines (use ``CompareReport.to_json`` for that). Numbers are shown with
4 decimals, missing values as ``null``. Run ids, chunker versions, query ids and notes come
from the inputs: they are shown as text (:mod:`retrieval_lib.safe_text`), never as Markdown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from retrieval_lib.kb.compare import CompareReport, ComparisonKind
from retrieval_lib.kb.definitions import MATCH_FALLBACK
from retrieval_lib.safe_text import markdown_code, markdown_text

__all__ = ["render_report_md", "format_ci", "format_value"]


def format_value(value: Any, *, signed: bool = False) -> str:
    """``null`` for None/NaN, 4 decimals for floats, ``str`` otherwise.

    Examples
    --------
    >>> format_value(float("nan")), format_value(0.123456), format_value(0.5, signed=True)
    ('null', '0.1235', '+0.5000')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, float):
        return f"{value:+.4f}" if signed else f"{value:.4f}"
    if isinstance(value, int) and not isinstance(value, bool) and signed:
        return f"{value:+d}"
    return str(value)


def format_ci(row: Mapping[Any, Any]) -> str:
    """``[ci_low, ci_high]`` of a metric row (signed, 4 decimals); empty when not paired.

    Examples
    --------
    >>> format_ci({"paired_n": 3, "ci_low": -0.1, "ci_high": 0.25}), format_ci({"paired_n": 0})
    ('[-0.1000, +0.2500]', '')
    """
    if not row["paired_n"]:
        return ""
    return (
        f"[{format_value(row['ci_low'], signed=True)}, {format_value(row['ci_high'], signed=True)}]"
    )


_KIND_DEFINITIONS = (
    "- **Win**: B hits and A misses, or both hit and B's first hit ranks higher.\n"
    "- **Loss**: both hit, B's first hit ranks lower than A's.\n"
    "- **Regression**: A hits and B misses (A's hit on its expected chunk is lost).\n"
    '- **Draw**: same rank on both sides, a miss on both sides (note "miss on both '
    'sides"), or not comparable.\n'
    "\n"
    "A rank is that of the first relevant hit within the top 10. Queries without expected "
    "chunks are judged at document level; should-refuse queries by whether the answer "
    "refused (refused in A only: Regression; in B only: Win)."
)


def render_report_md(report: CompareReport) -> str:
    """Markdown summary: aggregate deltas with CIs, kind counts, Wins/Losses/Regressions.

    Examples
    --------
    >>> from retrieval_lib.kb.golden import parse_golden
    >>> from retrieval_lib.kb.records import QueryResult, Hit
    >>> from retrieval_lib.kb.compare import compare_records
    >>> g = parse_golden([{"id": "q1", "query": "x", "expected_doc_ids": ["d"],
    ...                    "expected_chunk_ids": ["c"]}])
    >>> a = {"q1": QueryResult("q1", ())}
    >>> b = {"q1": QueryResult("q1", (Hit("c", "d", 1, 1.0),))}
    >>> md = render_report_md(compare_records("A", "B", g, g, a, b))
    >>> "| q1 | null | 1 |" in md
    True
    """
    lines = _header_lines(report) + _aggregate_lines(report) + _outcome_lines(report)
    return "\n".join(lines) + "\n"


def _header_lines(report: CompareReport) -> list[str]:
    """Title, the two runs (chunker version, queries, failures) and the chunk matching."""
    deltas = report.deltas
    run_a, run_b = markdown_code(report.run_a), markdown_code(report.run_b)
    lines = [
        f"# Knowledge-base comparison: {run_a} vs {run_b}",
        "",
        f"- Run A (baseline): {run_a}, chunker version "
        f"{markdown_code(format_value(deltas.get('chunker_version_a')))}, "
        f"{report.aggregate_a.total_queries} queries, "
        f"{report.aggregate_a.failed_queries} failed",
        f"- Run B (candidate): {run_b}, chunker version "
        f"{markdown_code(format_value(deltas.get('chunker_version_b')))}, "
        f"{report.aggregate_b.total_queries} queries, "
        f"{report.aggregate_b.failed_queries} failed",
        f"- Chunk matching: **{report.chunker_version_match}**",
    ]
    if report.chunker_version_match == MATCH_FALLBACK:
        lines.append(
            "  (chunker versions differ: a hit counts when its document is expected and its "
            "spans cover at least 50% of an expected chunk's characters; the chunk-level "
            "figures below differ from the exact ones stored with each run)"
        )
    return lines


def _aggregate_lines(report: CompareReport) -> list[str]:
    """The aggregate metrics table (A, B, delta, paired statistics), denominators, nulls."""
    lines = [
        "",
        "## Aggregate metrics (delta = B − A)",
        "",
        "Paired columns: per-query deltas over the queries computable on both sides, with a "
        "seeded bootstrap confidence interval and a Wilcoxon signed-rank p-value.",
        "",
        "| metric | A | B | delta | paired n | 95% CI of paired delta | Wilcoxon p |",
        "|---|---|---|---|---|---|---|",
    ]
    denominators_a = report.aggregate_a.denominators
    for row in report.metric_rows():
        lines.append(
            f"| {row['metric']} | {format_value(row['a'])} | {format_value(row['b'])} | "
            f"{format_value(row['delta'], signed=True)} | "
            f"{'' if row['paired_n'] is None else row['paired_n']} | {format_ci(row)} | "
            f"{format_value(row['wilcoxon_p']) if row['paired_n'] else ''} |"
        )
    lines += [
        "",
        "Denominators (A / B): "
        + ", ".join(
            f"{name} {denominators_a.get(name, 0)} / {report.aggregate_b.denominators.get(name, 0)}"
            for name in sorted(set(denominators_a) | set(report.aggregate_b.denominators))
        )
        + ".",
    ]
    reasons = {
        f"{side} {name}": why
        for side, agg in (("A", report.aggregate_a), ("B", report.aggregate_b))
        for name, why in sorted(agg.null_reasons.items())
    }
    if reasons:
        lines += ["", "Missing values:"] + [f"- {k}: {v}" for k, v in reasons.items()]
    return lines


def _outcome_lines(report: CompareReport) -> list[str]:
    """Per-query kind counts, their definitions and the Wins, Losses, Regressions tables."""
    counts = report.kind_counts()
    lines = [
        "",
        "## Per-query outcomes",
        "",
        " · ".join(f"{kind}: {count}" for kind, count in counts.items()),
        "",
        _KIND_DEFINITIONS,
    ]
    for kind, title in (
        (ComparisonKind.WIN, "Wins"),
        (ComparisonKind.LOSS, "Losses"),
        (ComparisonKind.REGRESSION, "Regressions"),
    ):
        rows = [q for q in report.per_query if q.kind is kind]
        lines += ["", f"### {title} ({len(rows)})", ""]
        if not rows:
            lines.append("None.")
            continue
        lines += ["| query | A rank | B rank | note |", "|---|---|---|---|"]
        lines += [
            f"| {markdown_text(q.query_id)} | {format_value(q.a_hit_rank)} | "
            f"{format_value(q.b_hit_rank)} | {markdown_text(q.note or '')} |"
            for q in rows
        ]
    return lines

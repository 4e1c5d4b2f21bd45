"""Compare several stored runs against one reference run (issue 19, "kb compare of N runs").

Each candidate is compared with the reference exactly as the two-run compare does
(:func:`retrieval_lib.kb.compare.compare_runs`: chunk matching, per-query kinds, paired
bootstrap CI and Wilcoxon test per ranking metric); this module only puts the reports side
by side and corrects the Wilcoxon p-values for the many comparisons: **Holm over every
(candidate, metric) with a p-value** (``p_holm``), NaN-aware (untested rows stay out of the
family). The two-run ``kb compare A B`` is unchanged.

Examples
--------
>>> import json, tempfile, pathlib
>>> from retrieval_lib.kb.store import KBStore
>>> from retrieval_lib.kb.ingest import ingest_run
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "g.yaml").write_text(
...     "- {id: q1, query: x, expected_doc_ids: [d1], expected_chunk_ids: [c1]}\\n")
>>> def line(rank):  # the relevant chunk c1 at ``rank``, misses before it
...     hits = [{"chunk_id": f"c0{i}", "doc_id": "d0", "rank": i} for i in range(1, rank)]
...     hits.append({"chunk_id": "c1", "doc_id": "d1", "rank": rank})
...     return json.dumps({"query_id": "q1", "hits": hits}) + "\\n"
>>> for name, rank in (("a", 3), ("b", 1), ("c", 2)):
...     _ = (d / f"{name}.jsonl").write_text(line(rank))
>>> with KBStore(d / "eval.sqlite") as s:
...     for name in "abc":
...         _ = ingest_run(s, d / f"{name}.jsonl", d / "g.yaml", run_id=name)
...     many = compare_many(s, "a", ["b", "c"], n_bootstrap=50)
>>> many.summary()[["run", "metric", "a", "b"]].query("metric == 'mrr'").values.tolist()
[['b', 'mrr', 0.3333333333333333, 1.0], ['c', 'mrr', 0.3333333333333333, 0.5]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval_lib.kb.compare import CompareReport, compare_runs
from retrieval_lib.kb.exceptions import KBError

__all__ = ["MultiCompareReport", "SUMMARY_COLUMNS", "compare_many"]

#: Columns of :meth:`MultiCompareReport.summary`.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "reference",
    "run",
    "chunker_version_match",
    "metric",
    "a",
    "b",
    "delta",
    "paired_n",
    "mean_paired_delta",
    "ci_low",
    "ci_high",
    "wilcoxon_p",
    "p_holm",
)


@dataclass(frozen=True)
class MultiCompareReport:
    """Every candidate compared with the reference: one :class:`CompareReport` each."""

    reference: str
    reports: list[CompareReport]

    def summary(self) -> pd.DataFrame:
        """One row per (candidate, metric): reference value ``a``, candidate value ``b``,
        ``delta = b - a``, the paired statistics and ``p_holm`` (Holm over every
        (candidate, metric) Wilcoxon p of the table)."""
        from retrieval_lib.stats.multiple import holm

        rows = [
            {
                "reference": self.reference,
                "run": r.run_b,
                "chunker_version_match": r.chunker_version_match,
                **row,
            }
            for r in self.reports
            for row in r.metric_rows()
        ]
        out = pd.DataFrame(rows, columns=[c for c in SUMMARY_COLUMNS if c != "p_holm"])
        out["p_holm"] = holm(out["wilcoxon_p"].to_numpy(dtype=float)) if len(out) else []
        return out[list(SUMMARY_COLUMNS)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the reference, each report's dict and the summary with ``p_holm``."""
        from retrieval_lib.stats.impact import json_records

        return {
            "reference": self.reference,
            "runs": [r.run_b for r in self.reports],
            "comparisons": [r.to_dict() for r in self.reports],
            "summary": json_records(self.summary()),
        }

    def to_markdown(self) -> str:
        """A Markdown page: the summary table (names escaped), then each candidate's kinds."""
        from retrieval_lib.kb.report_md import format_ci, format_value
        from retrieval_lib.safe_text import markdown_code, markdown_text

        summary = self.summary()
        lines = [
            f"# Knowledge-base comparison: {len(self.reports)} runs against "
            f"{markdown_code(self.reference)}",
            "",
            "Deltas are run − reference. CI: paired percentile bootstrap over queries; "
            "p: two-sided Wilcoxon signed-rank; p (Holm): Holm-adjusted over every run and "
            "metric of this table.",
            "",
            "| run | metric | reference | run value | delta | CI | p | p (Holm) |",
            "|---|---|---:|---:|---:|---|---:|---:|",
        ]
        for row in summary.to_dict("records"):
            lines.append(
                f"| {markdown_text(row['run'])} | {markdown_text(row['metric'])} | "
                f"{format_value(row['a'])} | {format_value(row['b'])} | "
                f"{format_value(row['delta'], signed=True)} | {format_ci(row)} | "
                f"{format_value(row['wilcoxon_p'])} | {format_value(row['p_holm'])} |"
            )
        lines += ["", "| run | Win | Loss | Draw | Regression |", "|---|---:|---:|---:|---:|"]
        for r in self.reports:
            counts = r.kind_counts()
            lines.append(
                f"| {markdown_text(r.run_b)} | {counts['Win']} | {counts['Loss']} | "
                f"{counts['Draw']} | {counts['Regression']} |"
            )
        return "\n".join(lines) + "\n"


def compare_many(
    store: Any,
    reference: str,
    runs: Sequence[str],
    *,
    strict_chunker_version: bool = False,
    n_bootstrap: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> MultiCompareReport:
    """Compare each of ``runs`` with ``reference`` (deltas: run − reference).

    Raises
    ------
    KBError
        No candidate run, a run given twice, or the reference among the candidates
        (and whatever :func:`~retrieval_lib.kb.compare.compare_runs` raises: unknown run,
        differing chunker versions under ``strict_chunker_version``).
    """
    candidates = [str(r) for r in runs]
    if not candidates:
        raise KBError("kb compare needs at least one run to compare with the reference")
    if reference in candidates:
        raise KBError(f"run {reference!r} is the reference; it cannot also be a candidate")
    duplicates = sorted({r for r in candidates if candidates.count(r) > 1})
    if duplicates:
        raise KBError(f"run(s) given twice: {', '.join(duplicates)}")
    reports = [
        compare_runs(
            store,
            reference,
            run,
            strict_chunker_version=strict_chunker_version,
            n_bootstrap=n_bootstrap,
            confidence=confidence,
            seed=seed,
        )
        for run in candidates
    ]
    return MultiCompareReport(reference, reports)

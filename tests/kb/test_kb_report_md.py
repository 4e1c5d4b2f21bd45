"""Markdown report: sections, null for missing values, one table row per non-draw query."""

from __future__ import annotations

from kb_testutils import golden_entry

from retrieval_lib.kb.compare import compare_records
from retrieval_lib.kb.golden import parse_golden
from retrieval_lib.kb.ingest import parse_result
from retrieval_lib.kb.report_md import format_value, render_report_md


def _results(*rows):
    return {r.query_id: r for r in (parse_result(x) for x in rows)}


def _hits(*pairs):
    return [{"chunk_id": c, "doc_id": d, "rank": i} for i, (c, d) in enumerate(pairs, start=1)]


def test_report_lists_wins_losses_regressions_and_prints_null():
    golden = parse_golden(
        [
            golden_entry("win", ["d"], ["c"]),
            golden_entry("loss", ["d"], ["c"]),
            golden_entry("reg|pipe", ["d"], ["c"]),
            golden_entry("draw", ["d"], ["c"]),
        ]
    )
    a = _results(
        {"query_id": "win", "hits": _hits(("x", "e"))},
        {"query_id": "loss", "hits": _hits(("c", "d"))},
        {"query_id": "reg|pipe", "hits": _hits(("c", "d"))},
        {"query_id": "draw", "hits": []},
    )
    b = _results(
        {"query_id": "win", "hits": _hits(("c", "d"))},
        {"query_id": "loss", "hits": _hits(("x", "e"), ("c", "d"))},
        {"query_id": "reg|pipe", "hits": []},
        {"query_id": "draw", "hits": []},
    )
    md = render_report_md(compare_records("base", "cand", golden, golden, a, b))
    assert md.startswith("# Knowledge-base comparison: `base` vs `cand`\n")
    assert "- Chunk matching: **exact**" in md
    # no answers at all: citation coverage is null on both sides, delta null
    assert "| citation_coverage | null | null | null |" in md
    assert "| mrr | 0.5000 | 0.3750 | -0.1250 | 4 |" in md
    assert "Win: 1 · Loss: 1 · Draw: 1 · Regression: 1" in md
    assert "### Wins (1)" in md and "| win | null | 1 | found only by B (rank 1) |" in md
    assert "### Losses (1)" in md and "| loss | 1 | 2 | rank worsened 1 → 2 |" in md
    assert "### Regressions (1)" in md and "| reg&#124;pipe | 1 | null |" in md
    assert "B citation_coverage: no grounded answer" in md
    assert "| draw |" not in md  # draws are counted, not listed


def test_format_value():
    assert format_value(None) == "null"
    assert format_value(float("nan")) == "null"
    assert format_value(0.123456) == "0.1235"
    assert format_value(-0.5, signed=True) == "-0.5000"
    assert format_value(3, signed=True) == "+3"
    assert format_value("v1") == "v1"

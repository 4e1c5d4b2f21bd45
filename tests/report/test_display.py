"""report.display: what a reader sees of a table (no index, blanks for missing, units)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from retrieval_lib.report.display import (
    ci_text,
    is_missing,
    n_label,
    number_text,
    p_text,
    view,
)


def test_a_default_index_is_dropped_and_missing_values_are_blank():
    frame = pd.DataFrame(
        {
            "config_name": ["a", "b", "c"],
            "n": [2, 0, 1],
            "mean": [0.25, math.nan, 1.0],
            "reason": [None, "no trial", pd.NA],
        }
    )
    shown = view(frame)
    assert shown.columns == ["config_name", "n", "mean", "reason"]
    assert shown.cells == [
        ["a", "2", "0.250", ""],
        ["b", "0", "", "no trial"],
        ["c", "1", "1.000", ""],
    ]
    assert shown.numeric == [False, True, True, False]
    page = shown._repr_html_()
    assert "None" not in page and "nan" not in page.lower() and "<NA>" not in page
    assert "<th></th>" not in page  # no index header cell
    assert page.count("<tr>") == 4  # one header row, three body rows
    text = repr(shown)
    assert "None" not in text and "nan" not in text and text.splitlines()[0].startswith("config")


def test_a_named_index_becomes_the_first_columns():
    counts = pd.DataFrame(
        {"base": [1, 0], "total": [1, 0]},
        index=pd.MultiIndex.from_tuples([("gt.json", "high"), ("patch", "low")], names=["s", "c"]),
    )
    shown = view(counts)
    assert shown.columns == ["s", "c", "base", "total"]
    assert shown.cells[1] == ["patch", "low", "0", "0"]


def test_outcomes_keep_their_api_names_in_headers_and_metric_columns():
    frame = pd.DataFrame(
        {
            "metric": ["cost_usd", "total_tokens"],
            "cost_usd": [0.1234, np.nan],
            "agent_execution_seconds": [12.0, 3.5],
            "total_tokens": [5, 6],
        }
    )
    shown = view(frame, digits=2)
    # one name per outcome: the API's, whose unit is part of the name
    assert shown.columns == ["metric", "cost_usd", "agent_execution_seconds", "total_tokens"]
    assert shown.cells[0] == ["cost_usd", "0.12", "12.00", "5"]
    assert shown.cells[1][0] == "total_tokens"


def test_html_is_escaped_and_deterministic():
    frame = pd.DataFrame({"note": ["<b>x</b> & y"], "n": [1]})
    first, second = view(frame)._repr_html_(), view(frame.copy())._repr_html_()
    assert first == second
    assert "&lt;b&gt;x&lt;/b&gt; &amp; y" in first
    other = view(pd.DataFrame({"note": ["z"], "n": [1]}))._repr_html_()
    assert first.split('id="')[1][:16] != other.split('id="')[1][:16]  # ids per table


def test_counts_stay_whole_numbers_when_a_gap_made_them_float():
    frame = pd.DataFrame(
        {"n": [3.0, np.nan], "n_flagged": [1.0, 0.0], "a_hit_rank": [np.nan, 2.0], "r": [0.5, 2.0]}
    )
    assert view(frame).cells == [["3", "1", "", "0.500"], ["", "0", "2", "2.000"]]


def test_a_sorted_unnamed_index_is_dropped_too_and_only_long_texts_wrap():
    frame = pd.DataFrame({"id": ["b-task-001", "a-task-002"], "why": ["x" * 70, ""]})
    shown = view(frame.sort_values("id"))
    assert shown.columns == ["id", "why"]
    assert [row[0] for row in shown.cells] == ["a-task-002", "b-task-001"]
    page = shown._repr_html_()
    assert ":nth-child(1) {text-align: left; white-space: nowrap;}" in page
    assert ":nth-child(2) {text-align: left; white-space: normal;}" in page


def test_explanations_always_wrap():
    page = view(pd.DataFrame({"metric": ["x"], "reason": ["short"]}))._repr_html_()
    assert ":nth-child(1) {text-align: left; white-space: nowrap;}" in page
    assert ":nth-child(2) {text-align: left; white-space: normal;}" in page


def test_a_long_table_shows_its_first_rows_and_names_the_file_with_all():
    from retrieval_lib.report.display import MAX_TABLE_ROWS

    frame = pd.DataFrame({"task": [f"t{i}" for i in range(MAX_TABLE_ROWS + 7)]})
    shown = view(frame, source="tables/<pairing>.csv")
    assert [row[0] for row in shown.cells] == [f"t{i}" for i in range(MAX_TABLE_ROWS)]
    page = shown._repr_html_()
    assert page.count("<tr>") == MAX_TABLE_ROWS + 1  # the header and 50 rows
    assert (
        f"the first {MAX_TABLE_ROWS} of {MAX_TABLE_ROWS + 7} rows; every row is in "
        "tables/&lt;pairing&gt;.csv beside the report"
    ) in page
    assert view(frame.head(MAX_TABLE_ROWS)).note is None  # at the bound: every row, no note


# the one missing-value rule: every kind of missing, in every place a report shows a value
_MISSING = [None, math.nan, np.float32("nan"), pd.NA, pd.NaT, np.datetime64("NaT")]


def test_every_kind_of_missing_is_missing_and_nothing_else_is():
    assert [is_missing(v) for v in _MISSING] == [True] * len(_MISSING)
    values = [0, 0.0, -0.0, "", "nan", "None", False, pd.Timestamp(0), np.float32(1.5)]
    assert [is_missing(v) for v in values] == [False] * len(values)


def test_every_kind_of_missing_shows_empty_in_text_and_tables():
    for value in _MISSING:
        assert number_text(value) == ""
        assert p_text(value) == ""
        assert n_label(value) == ""
        assert ci_text(value, 0.1, 0.9, n=3) == "n=3"
        assert ci_text(0.5, value, 0.9, digits=1) == "0.5"
    # a column of each kind (object columns keep NaT, np.float32 NaN as they are)
    frame = pd.DataFrame({"v": pd.Series(_MISSING, dtype=object)})
    assert view(frame).cells == [[""]] * len(_MISSING)
    when = pd.DataFrame({"t": pd.to_datetime(["2026-01-01", None])})
    assert view(when).cells == [["2026-01-01 00:00:00"], [""]]

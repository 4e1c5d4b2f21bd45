"""The Answer section: sentences generated from the report's numbers, escaped, linked."""

from __future__ import annotations

import math
import re

import nbformat
import pandas as pd
import pytest

from retrieval_lib.report.answer import (
    RUN_SECTIONS,
    STUDY_SECTIONS,
    Answer,
    answer_markdown,
    answer_table,
    first_found_by_tool,
    section_anchor,
)
from retrieval_lib.safe_text import markdown_text
from retrieval_lib.stats.impact import ImpactResult, analyze_impact
from retrieval_lib.study.loader import documents_events

pytest.importorskip("scipy")

# 6 tasks, one trial each side; reward deltas (mcp - baseline) 0.1, 0.2, 0.3, 0.4, 0.5, -0.6
# -> mean 0.9 / 6 = 0.15; Wilcoxon: R- = 6 (the rank of |-0.6|), and 14 of the 64 sign
# patterns have a rank sum <= 6, so the exact two-sided p is 28/64 = 0.4375
_REWARD_B = [0.4, 0.3, 0.2, 0.1, 0.0, 0.9]
_REWARD_T = [0.5, 0.5, 0.5, 0.5, 0.5, 0.3]
_RECALL_B = [0.2, 0.5, 0.1, 0.3, 0.9, 0.4]
_RECALL_T = [0.6, 0.5, 0.7, 0.2, 0.9, 0.8]


def _table(baseline: str = "baseline", treatment: str = "mcp", tasks: int = 6) -> pd.DataFrame:
    names = [f"t{i}" for i in range(tasks)]
    return pd.DataFrame(
        {
            "config_name": [baseline] * tasks + [treatment] * tasks,
            "task_name": names * 2,
            "model": ["m"] * (2 * tasks),
            "reward": _REWARD_B[:tasks] + _REWARD_T[:tasks],
            "file.recall": _RECALL_B[:tasks] + _RECALL_T[:tasks],
        }
    )


def _sentence(table: pd.DataFrame, topic: str) -> str:
    rows = table.loc[table["topic"] == topic, "sentence"]
    assert len(rows) == 1, table
    return str(rows.iloc[0])


def test_reward_sentence_states_the_matched_difference_with_ci_p_and_n() -> None:
    impact = analyze_impact(_table(), n_boot=500, min_pairs=3)
    answer = answer_table(impact, sections=RUN_SECTIONS)
    row = impact.comparisons.set_index("metric").loc["reward"]
    sentence = _sentence(answer, "reward")
    assert "on 6 matched tasks" in sentence
    assert "mean difference (mcp − baseline) is +0.150" in sentence
    assert f"[{float(row['ci_low']):+.3f}, {float(row['ci_high']):+.3f}]" in sentence
    assert "Wilcoxon p = 0.438" in sentence
    assert f"Holm-adjusted p = {float(row['wilcoxon_p_holm']):.3f}" in sentence
    assert "no difference detected at the 0.05 level" in sentence
    assert answer.loc[answer["topic"] == "reward", "section"].iloc[0] == "Matched comparison"


def test_too_few_matched_tasks_say_the_data_cannot_answer() -> None:
    impact = analyze_impact(_table(tasks=2), n_boot=200, min_pairs=3)
    answer = answer_table(impact, sections=RUN_SECTIONS)
    sentence = _sentence(answer, "reward")
    assert "the data cannot answer this (2 matched tasks;" in sentence
    assert "observed mean difference is +0.150" in sentence  # deltas 0.1 and 0.2
    caveats = answer.loc[answer["topic"] == "caveat", "sentence"].tolist()
    assert any("has 2 matched tasks, below the minimum of 3" in c for c in caveats)


def test_no_pair_of_configs_is_said() -> None:
    table = _table().assign(config_name=["alpha"] * 6 + ["beta"] * 6)
    impact = analyze_impact(table, n_boot=200)
    sentence = _sentence(answer_table(impact, sections=RUN_SECTIONS), "reward")
    assert sentence.startswith("Reward: no baseline/treatment pair could be formed")
    assert "alpha, beta" in sentence


def _impact_with_correlations(rows: list[dict]) -> ImpactResult:
    base = analyze_impact(_table(), n_boot=200)
    columns = [
        "group",
        "x",
        "y",
        "method",
        "n",
        "n_trials",
        "r",
        "ci_low",
        "ci_high",
        "p_value",
        "computable",
        "reason",
        "p_holm",
    ]
    return ImpactResult(
        pairs=base.pairs,
        correlations=pd.DataFrame(rows, columns=columns),
        comparisons=base.comparisons,
        mcnemar=base.mcnemar,
        per_task=base.per_task,
        unmatched=base.unmatched,
        config_summary=base.config_summary,
        params={**base.params, "metrics": ["file.recall", "file.AP", "read.recall"]},
    )


def test_association_picks_the_smallest_holm_p_then_the_largest_r() -> None:
    nan = math.nan
    rows = [
        # pooled reward rows: file.AP has the smallest Holm p
        {
            "group": "(pooled)",
            "x": "file.recall",
            "y": "reward",
            "method": "spearman",
            "n": 30,
            "r": 0.61,
            "ci_low": 0.3,
            "ci_high": 0.8,
            "p_value": 0.001,
            "computable": True,
            "reason": None,
            "p_holm": 0.02,
        },
        {
            "group": "(pooled)",
            "x": "file.AP",
            "y": "reward",
            "method": "spearman",
            "n": 30,
            "n_trials": 71,
            "r": -0.55,
            "ci_low": -0.75,
            "ci_high": -0.2,
            "p_value": 0.0001,
            "computable": True,
            "reason": None,
            "p_holm": 0.0004,
        },
        # a larger r but in a config group, and a linear method: both ignored
        {
            "group": "mcp",
            "x": "read.recall",
            "y": "reward",
            "method": "spearman",
            "n": 15,
            "r": 0.99,
            "ci_low": 0.9,
            "ci_high": 1.0,
            "p_value": 1e-9,
            "computable": True,
            "reason": None,
            "p_holm": 1e-8,
        },
        {
            "group": "(pooled)",
            "x": "read.recall",
            "y": "reward",
            "method": "pearson",
            "n": 30,
            "r": 0.95,
            "ci_low": 0.9,
            "ci_high": 0.98,
            "p_value": 1e-9,
            "computable": True,
            "reason": None,
            "p_holm": 1e-8,
        },
        {
            "group": "(pooled)",
            "x": "read.recall",
            "y": "reward",
            "method": "spearman",
            "n": 3,
            "r": nan,
            "ci_low": nan,
            "ci_high": nan,
            "p_value": nan,
            "computable": False,
            "reason": "n=3 complete pairs is below the minimum of 5",
            "p_holm": nan,
        },
    ]
    sentence = _sentence(
        answer_table(_impact_with_correlations(rows), sections=STUDY_SECTIONS), "association"
    )
    assert "most associated with reward over all configs pooled is file.AP" in sentence
    assert "Spearman ρ = -0.550 (95% CI [-0.750, -0.200])" in sentence
    assert "n = 30 tasks (71 trials)" in sentence
    assert "Holm-adjusted p < 0.001 (significant after Holm)" in sentence
    assert "not a causal effect" in sentence


def test_association_that_cannot_be_estimated_says_why() -> None:
    nan = math.nan
    rows = [
        {
            "group": "(pooled)",
            "x": "file.recall",
            "y": "reward",
            "method": "spearman",
            "n": 3,
            "r": nan,
            "ci_low": nan,
            "ci_high": nan,
            "p_value": nan,
            "computable": False,
            "reason": "n=3 complete pairs is below the minimum of 5",
            "p_holm": nan,
        },
    ]
    sentence = _sentence(
        answer_table(_impact_with_correlations(rows), sections=STUDY_SECTIONS), "association"
    )
    assert "can be estimated (n=3 complete pairs is below the minimum of 5)" in sentence


def test_first_found_sums_over_families_and_categories() -> None:
    tools = pd.DataFrame(
        {
            "config_family": ["b", "b", "t", "t"],
            "tool": ["Bash", "Bash", "search", "Read"],
            "is_mcp": [False, False, True, False],
            "ground_truth_files_first_found": [2, 3, 5, 0],
        }
    )
    found = first_found_by_tool(tools)
    # Bash 2 + 3 = 5 ties search 5; names break the tie; Read 0 last
    assert found[["tool", "first_found"]].values.tolist() == [
        ["Bash", 5],
        ["search", 5],
        ["Read", 0],
    ]
    assert found["share"].tolist() == [0.5, 0.5, 0.0]
    impact = analyze_impact(_table(), n_boot=200)
    sentence = _sentence(answer_table(impact, sections=STUDY_SECTIONS, tools=tools), "first_found")
    assert (
        "the tools that first surfaced a ground-truth file most often were Bash (local) and search (MCP), with 5 of the 10"
        in sentence
    )
    assert "(50%)" in sentence
    none = _sentence(
        answer_table(
            impact, sections=STUDY_SECTIONS, tools=tools.assign(ground_truth_files_first_found=0)
        ),
        "first_found",
    )
    assert "no tool call surfaced a ground-truth file first" in none


def _rendered(markdown: str) -> str:
    from nbconvert import HTMLExporter

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(markdown)]
    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    return body


HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "![k](secret.txt)",
    "[x](javascript:alert(1))",
    "a`</code><svg onload=alert(1)>",
    "$^^$ and $_{$",
    "**bold** _it_ # head",
]


@pytest.mark.parametrize("name", HOSTILE)
def test_names_in_the_answer_render_as_text(name: str) -> None:
    impact = analyze_impact(_table(baseline="baseline", treatment=f"mcp {name}"), n_boot=200)
    tools = pd.DataFrame({"tool": [name], "is_mcp": [True], "ground_truth_files_first_found": [1]})
    markdown = answer_markdown(answer_table(impact, sections=RUN_SECTIONS, tools=tools))
    body = _rendered(markdown)
    main = body[body.index("<main") :] if "<main" in body else body
    assert not re.search(r"<(img|svg|script|strong|em|h1)\b", main)
    assert 'href="javascript' not in main
    assert "secret.txt" not in re.findall(r'src="([^"]*)"', main)
    # the name is shown literally (HTML-escaped), once per sentence that names it
    assert name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in main


def test_markdown_text_round_trips_plain_text() -> None:
    text = "file.AP +0.5 (95% CI [0.1, 0.9]) 50% a_b *c* #d"
    body = _rendered(markdown_text(text))
    assert text.replace("&", "&amp;") in body


@pytest.mark.parametrize("sections", [RUN_SECTIONS, STUDY_SECTIONS])
def test_section_links_point_at_the_headings_nbconvert_renders(sections) -> None:
    headings = [h for h in vars(sections).values() if h]
    body = _rendered("\n\n".join(f"## {h}" for h in headings))
    for heading in headings:
        assert f'id="{section_anchor(heading)[1:]}"' in body


def test_answer_display_shows_markdown_and_plain_sentences() -> None:
    table = pd.DataFrame(
        {"topic": ["reward"], "sentence": ["Reward: x <b>"], "section": ["Matched comparison"]}
    )
    shown = Answer(table)
    assert repr(shown) == "- Reward: x <b>"
    assert (
        shown._repr_markdown_()
        == "- Reward&#58; x &#60;b&#62; ([Matched comparison](#Matched-comparison))"
    )


def test_documents_events_credit_each_file_to_its_first_finder() -> None:
    def event(step, tool, category, files, mcp=False, error=False):
        return {
            "step_index": step,
            "tool_name": tool,
            "tool_category": category,
            "is_mcp": mcp,
            "is_error": error,
            "target_files": files,
            "hits_ground_truth": bool(set(files) & {"a.py", "b.py"}),
            "matched_ground_truth_files": [f for f in files if f in ("a.py", "b.py")],
        }

    doc = {
        "provenance": {"run_id": "r", "config_name": "mcp", "task_name": "t", "model": "m"},
        "coverage": {"has_ground_truth": True},
        "outcome": {},
        "events": [
            event(2, "Grep", "code_search", ["a.py", "c.py"]),
            event(1, "mcp__sg__search", "code_search", ["b.py"], mcp=True, error=True),
            event(3, "Read", "file_read", ["a.py", "b.py"]),
        ],
    }
    events, trials = documents_events([doc, doc])
    assert trials["trial_id"].tolist() == ["r/mcp/t/0", "r/mcp/t/1"]
    first = events.groupby("tool")["first_found_ground_truth_files"].apply(
        lambda s: sorted(f for files in s for f in files)
    )
    # the failed MCP call surfaces nothing; Grep finds a.py first, Read then finds b.py
    assert first.to_dict() == {"Grep": ["a.py", "a.py"], "Read": ["b.py", "b.py"], "search": []}


@pytest.mark.parametrize(
    ("notebook", "sections"),
    [("run_analysis.ipynb", RUN_SECTIONS), ("study.ipynb", STUDY_SECTIONS)],
)
def test_the_notebooks_open_with_the_answer_and_have_every_linked_section(notebook, sections):
    from pathlib import Path

    nb = nbformat.read(Path(__file__).resolve().parents[2] / "notebooks" / notebook, as_version=4)
    headings = [
        c.source.splitlines()[0].removeprefix("## ")
        for c in nb.cells
        if c.cell_type == "markdown" and c.source.startswith("## ")
    ]
    assert headings[0] == "Answer"
    assert {h for h in vars(sections).values() if h} <= set(headings)
    answer_cell = next(c for c in nb.cells if c.cell_type == "code" and "Answer(" in c.source)
    text = answer_cell.outputs[0]["data"]["text/plain"]
    assert text.startswith("- Reward, ") and "Caveat: correlations are associations" in text


def test_tasks_needed_sentence_states_precision_and_planning_from_the_spread() -> None:
    pingouin = pytest.importorskip("pingouin")
    impact = analyze_impact(_table(), n_boot=200, min_pairs=3)
    sentence = _sentence(answer_table(impact, sections=RUN_SECTIONS), "tasks_needed")
    # deltas 0.1..0.5, -0.6: sd (ddof 1) = sqrt(0.775 / 5) = 0.3937; t(0.975, 5) = 2.5706,
    # so the half-width is 2.5706 * 0.3937 / sqrt(6) = 0.413
    assert "the 95% CI of the mean reward difference is ±0.413 on 6 matched tasks" in sentence
    assert "(sd 0.394)" in sentence
    sd = math.sqrt(0.775 / 5)
    needed = [
        math.ceil(pingouin.power_ttest(d=effect / sd, power=0.8, alpha=0.05, contrast="paired"))
        for effect in (0.05, 0.10)
    ]
    assert f"needs about {needed[0]:,} matched tasks to detect a difference of 0.05" in sentence
    assert f"and {needed[1]:,} for 0.10" in sentence

"""The Answer that opens a report: what its numbers say, in a few sentences.

:func:`answer_table` writes it from the tables the report shows below, one sentence per
question, each with the heading of the section it comes from:

* ``reward`` and ``passed``: the matched difference (treatment − baseline) of every compared
  pair with its CI, the Holm-adjusted p and the number of matched tasks, or why it cannot
  be answered (too few matched tasks, a degenerate test);
* ``tasks_needed``: the CI half-width of the reward difference now, and the matched tasks
  a paired test needs to detect a difference of 0.05 and 0.10 at 80% power given the
  observed spread of the per-task differences;
* ``retrieval``: whether the key retrieval metrics differ between the configs (Holm);
* ``association``: the retrieval metric most associated with reward (pooled over configs),
  with its estimate, CI and n;
* ``first_found``: the tool that first found ground-truth files most often;
* ``caveat``: what limits the answer (unmatched tasks, flagged trials, unverified harness
  versions, confidence flags) and, always, that associations are not causal.

:func:`answer_markdown` renders it as Markdown, each sentence escaped as text and linked to
its section; :class:`Answer` displays it in a notebook.

Examples
--------
>>> import pandas as pd
>>> from retrieval_lib.stats.impact import analyze_impact
>>> df = pd.DataFrame({
...     "config_name": ["baseline"] * 6 + ["mcp"] * 6,
...     "task_name": list("abcdef") * 2,
...     "model": ["m"] * 12,
...     "reward": [0.4, 0.3, 0.2, 0.1, 0.0, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3],
...     "file.recall": [0.2, 0.5, 0.1, 0.3, 0.9, 0.4, 0.6, 0.5, 0.7, 0.2, 0.9, 0.8]})
>>> impact = analyze_impact(df, n_boot=200, min_pairs=5)
>>> table = answer_table(impact, sections=RUN_SECTIONS)
>>> print(table.loc[table["topic"] == "reward", "sentence"].iloc[0])  # doctest: +ELLIPSIS
Reward, mcp vs baseline: on 6 matched tasks the mean difference (mcp − baseline) is +0.150 ...
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from retrieval_lib.report.display import is_missing
from retrieval_lib.safe_text import markdown_text
from retrieval_lib.stats.columns import OUTCOME_COLUMNS

if TYPE_CHECKING:
    from retrieval_lib.stats.impact import ImpactResult

__all__ = [
    "ANSWER_COLUMNS",
    "RUN_SECTIONS",
    "STUDY_SECTIONS",
    "Answer",
    "AnswerSections",
    "answer_markdown",
    "answer_table",
    "first_found_by_tool",
    "section_anchor",
]

#: Stable columns of :func:`answer_table`, in order.
ANSWER_COLUMNS: tuple[str, ...] = ("topic", "sentence", "section")

_POOLED_GROUP = "(pooled)"  # stats.correlation.POOLED_GROUP (kept literal: no scipy import)


@dataclass(frozen=True)
class AnswerSections:
    """The headings (exact text, without ``#``) of the sections the sentences come from.

    ``tools`` and ``flags`` may be ``None`` when the report has no such section; the
    sentences that would link there are then linked to ``overview``.
    """

    overview: str
    matched: str
    outcomes: str
    tools: str | None = None
    flags: str | None = None


#: Sections of ``notebooks/run_analysis.ipynb``.
RUN_SECTIONS = AnswerSections(
    overview="The run",
    matched="Matched comparison",
    outcomes="Retrieval and outcomes",
    tools="Tools that found ground truth first",
)
#: Sections of ``notebooks/study.ipynb``.
STUDY_SECTIONS = AnswerSections(
    overview="1. The study",
    matched="3. Matched comparison across runs",
    outcomes="7. Retrieval and outcomes",
    tools="5. Tool value",
    flags="6. Confidence flags",
)


def section_anchor(heading: str) -> str:
    """The ``id`` nbconvert's HTML and JupyterLab give a Markdown heading.

    Examples
    --------
    >>> section_anchor("3. Matched comparison across runs")
    '#3.-Matched-comparison-across-runs'
    """
    return "#" + heading.strip().replace(" ", "-")


# --------------------------------------------------------------------------- numbers


def _signed(value: float, digits: int = 3) -> str:
    if abs(value) >= 1000:
        return f"{value:+,.0f}"
    return f"{value:+.{digits}f}"


def _p(value: Any) -> str:
    if is_missing(value):
        return "p not computable"
    p = float(value)
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def _ci(low: Any, high: Any, level: float) -> str:
    if is_missing(low) or is_missing(high):
        return f"no {level:.0%} CI"
    return f"{level:.0%} CI [{_signed(float(low))}, {_signed(float(high))}]"


def _truthy(value: Any) -> bool:
    return not is_missing(value) and bool(value)


def _tasks(n: Any) -> str:
    count = 0 if is_missing(n) else int(n)
    return f"{count} matched task" + ("" if count == 1 else "s")


# --------------------------------------------------------------------------- sentences


def _of_pair(table: pd.DataFrame, pair: Any) -> pd.DataFrame:
    """The rows of ``table`` that belong to ``pair`` (its baseline and treatment)."""
    return table[(table["baseline"] == pair.baseline) & (table["treatment"] == pair.treatment)]


def _comparison_row(comparisons: pd.DataFrame, pair: Any, metric: str) -> pd.Series | None:
    rows = _of_pair(comparisons, pair)
    rows = rows[rows["metric"] == metric]
    return None if rows.empty else rows.iloc[0]


def _tested(row: pd.Series) -> bool:
    flag = row["tested"] if "tested" in row.index else row.get("computable")
    return _truthy(flag) and not is_missing(row.get("wilcoxon_p"))


def _holm(row: pd.Series) -> Any:
    return row.get("wilcoxon_p_holm", row.get("p_holm"))


def _observed_mean(per_task: pd.DataFrame, pair: Any, metric: str) -> float:
    """Mean of the per-task deltas of ``metric`` that exist (NaN when none)."""
    column = f"delta:{metric}"
    if per_task.empty or column not in per_task.columns:
        return math.nan
    values = pd.to_numeric(_of_pair(per_task, pair)[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def _outcome_sentence(
    label: str,
    row: pd.Series | None,
    pair: Any,
    per_task: pd.DataFrame,
    *,
    alpha: float,
    level: float,
    extra: str = "",
) -> str:
    who = f"{pair.treatment} vs {pair.baseline}"
    if row is None:
        return f"{label}, {who}: not compared (no matched task has the value on both sides)."
    n = row.get("n")
    if not _tested(row):
        reason = row.get("reason")
        why = str(reason) if not is_missing(reason) and str(reason) else "no test could be run"
        mean: Any = row.get("mean_delta")
        if is_missing(mean):
            mean = _observed_mean(per_task, pair, str(row["metric"]))
        seen = (
            f"; the observed mean difference is {_signed(float(mean))}"
            if not is_missing(mean)
            else ""
        )
        return (
            f"{label}, {who}: the data cannot answer this ({_tasks(n)}; {why}){seen}; "
            "the per-task differences are listed in the section."
        )
    mean, p_holm = float(row["mean_delta"]), _holm(row)
    if not is_missing(p_holm) and float(p_holm) < alpha:
        verdict = f"a difference at the {alpha:g} level after Holm: {pair.treatment} " + (
            "higher" if mean > 0 else "lower" if mean < 0 else "different"
        )
    else:
        verdict = (
            f"no difference detected at the {alpha:g} level after Holm "
            "(not evidence that there is none)"
        )
    return (
        f"{label}, {who}: on {_tasks(n)} the mean difference ({pair.treatment} − "
        f"{pair.baseline}) is {_signed(mean)} ({_ci(row.get('ci_low'), row.get('ci_high'), level)}), "
        f"Wilcoxon {_p(row.get('wilcoxon_p'))}, Holm-adjusted {_p(p_holm)}"
        f"{extra}: {verdict}."
    )


def _power_sentence(row: pd.Series | None, pair: Any, label: str) -> str | None:
    """How precise the matched difference is now and how many tasks would answer it."""
    if row is None or "sd_delta" not in row.index:
        return None
    who = f"{pair.treatment} vs {pair.baseline}"
    n = row.get("n")
    needed: list[Any] = [row.get("n_needed_0.05"), row.get("n_needed_0.10")]
    if is_missing(row.get("sd_delta")):
        return (
            f"Tasks needed, {who}: how many matched tasks would detect a {label.lower()} "
            f"difference cannot be estimated from {_tasks(n)} (no spread of per-task "
            "differences to plan from)."
        )
    if any(is_missing(v) for v in needed):
        return (
            f"Tasks needed, {who}: with the observed spread of the per-task differences "
            f"(sd {float(row['sd_delta']):.3f}) a difference of 0.05 or 0.10 is out of reach "
            "of any practical number of matched tasks."
        )
    return (
        f"Tasks needed, {who}: the 95% CI of the mean {label.lower()} difference is "
        f"±{float(row['ci_half_width']):.3f} on {_tasks(n)}; with the observed spread of the "
        f"per-task differences (sd {float(row['sd_delta']):.3f}), a paired test at 80% power "
        f"(α = 0.05) needs about {int(needed[0]):,} matched tasks to detect a difference of "
        f"0.05 and {int(needed[1]):,} for 0.10."
    )


def _mcnemar_text(impact: ImpactResult, pair: Any) -> str:
    table = impact.mcnemar
    if table.empty or "baseline" not in table.columns:
        return ""
    rows = _of_pair(table, pair)
    if rows.empty or not _truthy(rows.iloc[0].get("computable")):
        return ""
    return f"; exact McNemar {_p(rows.iloc[0]['p_value'])}"


def _retrieval_sentence(
    comparisons: pd.DataFrame, pair: Any, metrics: list[str], *, alpha: float, level: float
) -> str:
    who = f"{pair.treatment} vs {pair.baseline}"
    rows = _of_pair(comparisons, pair)
    rows = rows[rows["metric"].isin(metrics)]
    if rows.empty:
        return f"Retrieval, {who}: no key retrieval metric was compared."
    tested = rows[[_tested(r) for _, r in rows.iterrows()]]
    untested = len(rows) - len(tested)
    if tested.empty:
        reasons = sorted({str(r) for r in rows["reason"].dropna() if str(r)})
        why = reasons[0] if reasons else "no test could be run"
        return (
            f"Retrieval, {who}: whether the {len(rows)} key retrieval metrics differ cannot be "
            f"answered ({why})."
        )
    holm_p = pd.to_numeric(tested.apply(_holm, axis=1), errors="coerce")
    differing = tested[holm_p < alpha]
    untested_text = f"; {untested} could not be tested" if untested else ""
    if differing.empty:
        return (
            f"Retrieval, {who}: none of the {len(tested)} tested key retrieval metrics differs "
            f"at the {alpha:g} level after Holm{untested_text}."
        )
    listed = "; ".join(
        f"{r.metric} {_signed(float(r.mean_delta))} ({_ci(r.ci_low, r.ci_high, level)})"
        for r in differing.itertuples(index=False)
    )
    return (
        f"Retrieval, {who}: {len(differing)} of the {len(tested)} tested key retrieval metrics "
        f"differ at the {alpha:g} level after Holm: {listed}{untested_text}."
    )


def _association_sentence(
    correlations: pd.DataFrame, metrics: list[str], *, outcome: str, alpha: float, level: float
) -> str:
    if correlations.empty:
        return f"Retrieval and {outcome}: no association was estimated."
    rows = correlations[
        (correlations.get("group", _POOLED_GROUP) == _POOLED_GROUP)
        & (correlations["y"] == outcome)
        & (correlations["x"].isin(metrics))
        & (correlations["method"].isin(["spearman", "kendall"]))
    ]
    computable = rows[rows["computable"].astype(bool)] if not rows.empty else rows
    if computable.empty:
        reasons = sorted({str(r) for r in rows.get("reason", pd.Series(dtype=object)).dropna()})
        why = reasons[0] if reasons else f"no key retrieval metric and {outcome} together"
        return (
            f"Retrieval and {outcome}: no association of a key retrieval metric with {outcome} "
            f"can be estimated ({why})."
        )
    ranked = computable.assign(
        _p=pd.to_numeric(computable.get("p_holm", computable["p_value"]), errors="coerce"),
        _abs=pd.to_numeric(computable["r"], errors="coerce").abs(),
    ).sort_values(["_p", "_abs", "x"], ascending=[True, False, True], kind="mergesort")
    best = ranked.iloc[0]
    # correlations count tasks (repeated trials averaged per task), ``n_trials`` beside them
    n_text = f"n = {int(best['n'])} tasks"
    if "n_trials" in best.index and not is_missing(best["n_trials"]):
        n_text += f" ({int(best['n_trials'])} trials)"
    significant = not is_missing(best["_p"]) and float(best["_p"]) < alpha
    verdict = "significant after Holm" if significant else "not significant after Holm"
    name = "Spearman ρ" if best["method"] == "spearman" else "Kendall τ"
    return (
        f"Retrieval and {outcome}: the key retrieval metric most associated with {outcome} over "
        f"all configs pooled is {best['x']}, {name} = {_signed(float(best['r']))} "
        f"({_ci(best['ci_low'], best['ci_high'], level)}), {n_text}, Holm-adjusted "
        f"{_p(best['_p'])} ({verdict}); an association, not a causal effect."
    )


def first_found_by_tool(tools: pd.DataFrame) -> pd.DataFrame:
    """Ground-truth files each tool surfaced first, summed over config families and tool
    categories (from :func:`retrieval_lib.study.analysis.tool_value` by tool).

    Columns ``tool, is_mcp, first_found, share``; rows by ``first_found`` descending, then
    name. ``share`` is the tool's part of all first finds (NaN when there are none).

    Examples
    --------
    >>> tools = pd.DataFrame({"tool": ["Grep", "search", "Grep"], "is_mcp": [False, True, False],
    ...     "ground_truth_files_first_found": [3, 5, 4]})
    >>> first_found_by_tool(tools).values.tolist()
    [['Grep', False, 7, 0.5833333333333334], ['search', True, 5, 0.4166666666666667]]
    """
    columns = ["tool", "is_mcp", "first_found", "share"]
    if tools.empty:
        return pd.DataFrame(columns=columns)
    summed = (
        tools.groupby(["tool", "is_mcp"], sort=True)["ground_truth_files_first_found"]
        .sum()
        .rename("first_found")
        .reset_index()
    )
    total = int(summed["first_found"].sum())
    summed["first_found"] = summed["first_found"].astype(int)
    summed["share"] = summed["first_found"] / total if total else math.nan
    ordered = summed.sort_values(
        ["first_found", "tool", "is_mcp"], ascending=[False, True, True], kind="mergesort"
    )
    return ordered[columns].reset_index(drop=True)


def _tool_sentence(tools: pd.DataFrame) -> str:
    found = first_found_by_tool(tools)
    total = int(found["first_found"].sum()) if not found.empty else 0
    if total == 0:
        return (
            "First finds: no tool call surfaced a ground-truth file first (no trial with "
            "file-level ground truth found one)."
        )
    top = found[found["first_found"] == found["first_found"].iloc[0]]
    names = " and ".join(f"{r.tool} ({'MCP' if r.is_mcp else 'local'})" for r in top.itertuples())
    count = int(top["first_found"].iloc[0])
    if len(top) > 1:
        return (
            f"First finds: the tools that first surfaced a ground-truth file most often were "
            f"{names}, with {count} of the {total} ground-truth files found each "
            f"({count / total:.0%})."
        )
    return (
        f"First finds: the tool that first surfaced a ground-truth file most often was {names}, "
        f"with {count} of the {total} ground-truth files found ({count / total:.0%})."
    )


def _caveats(
    impact: ImpactResult,
    *,
    min_pairs: int,
    strict: bool,
    n_confidence_flagged: int | None,
    exclude_flagged: bool,
) -> list[tuple[str, str]]:
    matched: list[str] = []
    pair: Any
    for pair in impact.pairs.itertuples(index=False):
        who = f"{pair.treatment} vs {pair.baseline}"
        n = int(pair.n_matched)
        if n < min_pairs:
            matched.append(
                f"Caveat: {who} has {_tasks(n)}, below the minimum of {min_pairs} "
                "for a test; its differences are described, not tested."
            )
        if int(getattr(pair, "n_unmatched", 0) or 0):
            matched.append(
                f"Caveat: {int(pair.n_unmatched)} task(s) of {who} could not be matched "
                "and are not in the comparison (listed with the reason)."
            )
        if int(getattr(pair, "n_flagged", 0) or 0):
            matched.append(
                f"Caveat: {int(pair.n_flagged)} of the {_tasks(n)} of {who} include "
                "errored or timed-out trials (kept: their reward is the verifier's)."
            )
        unverified = int(getattr(pair, "n_harness_unverified", 0) or 0)
        if unverified and not strict:
            matched.append(
                f"Caveat: {unverified} of the {_tasks(n)} of {who} have a harness "
                "version that could not be read (matched on what is known and flagged "
                "harness_version_unverified)."
            )
    out = [("matched", text) for text in matched]
    if n_confidence_flagged:
        what = "left out of every section" if exclude_flagged else "kept"
        out.append(
            (
                "flags",
                f"Caveat: {n_confidence_flagged} trial(s) carry a confidence flag (thin "
                f"retrieval evidence) and are {what}.",
            )
        )
    out.append(
        (
            "outcomes",
            "Caveat: correlations are associations over the runs' tasks, not causal "
            "effects; only the matched comparison compares configs on the same tasks.",
        )
    )
    return out


def answer_table(
    impact: ImpactResult,
    *,
    sections: AnswerSections,
    tools: pd.DataFrame | None = None,
    alpha: float = 0.05,
    level: float = 0.95,
    min_pairs: int | None = None,
    n_confidence_flagged: int | None = None,
    exclude_flagged: bool = False,
    outcome: str = "reward",
) -> pd.DataFrame:
    """The report's answer, one sentence per row (:data:`ANSWER_COLUMNS`).

    Parameters
    ----------
    impact : ImpactResult
        The analysis the report shows (:func:`retrieval_lib.stats.impact.analyze_impact`).
    sections : AnswerSections
        Headings of the report's sections (:data:`RUN_SECTIONS`, :data:`STUDY_SECTIONS`).
    tools : pandas.DataFrame, optional
        :func:`retrieval_lib.study.analysis.tool_value` by tool; no first-finds sentence
        without it.
    alpha, level
        Significance level of the tests (Holm-adjusted p compared with it) and confidence
        level of the intervals shown.
    min_pairs : int, optional
        Fewest matched tasks for a test (default: ``impact.params["min_matched_pairs"]``, else 5).
    n_confidence_flagged, exclude_flagged
        Confidence-flagged trials in the report and whether they were left out.
    outcome : str
        The outcome of the association sentence.

    Returns
    -------
    pandas.DataFrame
        ``topic`` (reward, passed, tasks_needed, retrieval, association, first_found,
        caveat),
        ``sentence`` (plain text, names unescaped) and ``section`` (a heading of
        ``sections``).
    """
    params: Mapping[str, Any] = impact.params or {}
    floor = int(min_pairs if min_pairs is not None else params.get("min_matched_pairs", 5) or 5)
    strict = bool(params.get("strict_harness_version", False))
    metrics = [str(m) for m in params.get("metrics", []) if str(m) not in OUTCOME_COLUMNS]
    rows: list[tuple[str, str, str]] = []
    if impact.pairs.empty:
        rows.append(("reward", _no_pair_sentence(impact), sections.matched))
    for pair in impact.pairs.itertuples(index=False):
        rows += [
            (topic, text, sections.matched)
            for topic, text in _pair_sentences(impact, pair, metrics, alpha=alpha, level=level)
        ]
    rows.append(
        (
            "association",
            _association_sentence(
                impact.correlations, metrics, outcome=outcome, alpha=alpha, level=level
            ),
            sections.outcomes,
        )
    )
    if tools is not None:
        rows.append(("first_found", _tool_sentence(tools), sections.tools or sections.overview))
    target = {
        "matched": sections.matched,
        "outcomes": sections.outcomes,
        "flags": sections.flags or sections.overview,
    }
    for where, text in _caveats(
        impact,
        min_pairs=floor,
        strict=strict,
        n_confidence_flagged=n_confidence_flagged,
        exclude_flagged=exclude_flagged,
    ):
        rows.append(("caveat", text, target[where]))
    return pd.DataFrame(rows, columns=list(ANSWER_COLUMNS))


def _no_pair_sentence(impact: ImpactResult) -> str:
    """Why the report cannot say whether a config changes the reward: no pair formed."""
    configs = sorted(
        {str(c) for c in impact.config_summary.get("config_name", pd.Series(dtype=object))}
    )
    listed = ", ".join(configs) if configs else "none"
    return (
        "Reward: no baseline/treatment pair could be formed (configs: "
        f"{listed}), so the report cannot say whether a config changes the reward."
    )


def _pair_sentences(
    impact: ImpactResult, pair: Any, metrics: list[str], *, alpha: float, level: float
) -> list[tuple[str, str]]:
    """``(topic, sentence)`` of one baseline/treatment pair: reward, pass rate, tasks
    needed, retrieval."""
    comparisons = impact.comparisons
    out: list[tuple[str, str]] = []
    for topic, label in (("reward", "Reward"), ("passed", "Pass rate")):
        row = _comparison_row(comparisons, pair, topic)
        extra = _mcnemar_text(impact, pair) if topic == "passed" and row is not None else ""
        if topic == "passed" and row is None:
            continue
        text = _outcome_sentence(
            label, row, pair, impact.per_task, alpha=alpha, level=level, extra=extra
        )
        out.append((topic, text))
    power = _power_sentence(_comparison_row(comparisons, pair, "reward"), pair, "Reward")
    if power is not None:
        out.append(("tasks_needed", power))
    if metrics:
        out.append(
            ("retrieval", _retrieval_sentence(comparisons, pair, metrics, alpha=alpha, level=level))
        )
    return out


def answer_markdown(answer: pd.DataFrame) -> str:
    """The answer as a Markdown list, each sentence escaped as text and linked to its
    section.

    Examples
    --------
    >>> t = pd.DataFrame({"topic": ["reward"], "sentence": ["Reward: *x*"], "section": ["The run"]})
    >>> answer_markdown(t)
    '- Reward&#58; &#42;x&#42; ([The run](#The-run))'
    """
    lines = [
        f"- {markdown_text(str(sentence))} ([{markdown_text(str(section))}]"
        f"({section_anchor(str(section))}))"
        for sentence, section in zip(answer["sentence"], answer["section"], strict=True)
    ]
    return "\n".join(lines)


class Answer:
    """A notebook display of :func:`answer_table`: Markdown in the rendered report, the
    plain sentences as text (what ``repr`` and nbval see)."""

    def __init__(self, table: pd.DataFrame) -> None:
        self.table = table

    def _repr_markdown_(self) -> str:
        return answer_markdown(self.table)

    def __repr__(self) -> str:
        return "\n".join(f"- {s}" for s in self.table["sentence"])

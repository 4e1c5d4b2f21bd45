"""Every config family against every other: matched effects, Friedman, a ranx-style table.

Issue 19 ("N config families", "Models × configs"), over a study's analysed trials
(``config_family`` the condition): :func:`family_comparisons` (each family against the
reference family, or every pair, on matched tasks), :func:`compare_families` →
:class:`FamilyComparison` (per model: Friedman, pairwise Wilcoxon and the ranx-style table,
exported to Markdown and LaTeX), :func:`model_effects` and :func:`model_interactions` (each
family's effect per model, and the difference of differences between models). They share
the reference family, the pairing of families and the escaping of names (:func:`latex_text`).
"""

from __future__ import annotations

import itertools
import math
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from retrieval_lib.errors import StatisticsError

if TYPE_CHECKING:
    from retrieval_lib.stats.paired import MatchResult

__all__ = [
    "FamilyComparison",
    "comparison_pairs",
    "compare_families",
    "family_comparisons",
    "family_matches",
    "latex_text",
    "model_effects",
    "model_interactions",
    "model_match",
    "reference_family",
    "write_comparison",
]

UNKNOWN_MODEL = "(unknown)"
_LATEX_SPECIALS = str.maketrans(
    {
        "&": r"\&",
        "%": r"\%",
        "$": r"\$",
        "#": r"\#",
        "_": r"\_",
        "{": r"\{",
        "}": r"\}",
        "~": r"\textasciitilde{}",
        "^": r"\textasciicircum{}",
        "\\": r"\textbackslash{}",
    }
)
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]+")


def latex_text(name: Any) -> str:
    """``name`` as LaTeX text: every special character (``& % $ # _ { } ~ ^ \\``) escaped,
    control characters (newlines, tabs) turned into a space.

    Examples
    --------
    >>> latex_text("mcp_remote & 50%")
    'mcp\\\\_remote \\\\& 50\\\\%'
    """
    return _CONTROL_RE.sub(" ", str(name)).translate(_LATEX_SPECIALS)


# --------------------------------------------------------------------------- pairs


def reference_family(
    families: Iterable[str], reference: str | None = None, baseline: str | None = None
) -> str:
    """The family every other is compared with: ``reference`` if given, else ``baseline``
    if given, else the first (sorted) family whose name starts with ``baseline``, else the
    first family.

    Raises
    ------
    StatisticsError
        No family, or a chosen family that is not in the study.

    Examples
    --------
    >>> reference_family(["mcp-remote-direct", "baseline-local-direct", "hybrid"])
    'baseline-local-direct'
    """
    names = sorted({str(f) for f in families})
    if not names:
        raise StatisticsError("no config family in the study")
    for label, chosen in (("reference family", reference), ("baseline family", baseline)):
        if chosen:
            if chosen not in names:
                from retrieval_lib.suggest import hint

                raise StatisticsError(
                    f"{label} {chosen!r} not found{hint(chosen, names)}; families: "
                    f"{', '.join(names)}"
                )
            return chosen
    baselines = [n for n in names if n.lower().startswith("baseline")]
    return (baselines or names)[0]


def comparison_pairs(
    families: Iterable[str], reference: str, *, all_pairs: bool = False
) -> list[tuple[str, str]]:
    """(reference, family) for every other family; with ``all_pairs`` every pair ``(a, b)``,
    ``a < b`` except that the reference always comes first.

    Examples
    --------
    >>> comparison_pairs(["c", "a", "b"], "b")
    [('b', 'a'), ('b', 'c')]
    >>> comparison_pairs(["c", "a", "b"], "b", all_pairs=True)
    [('b', 'a'), ('b', 'c'), ('a', 'c')]
    """
    names = sorted({str(f) for f in families})
    first = [(reference, f) for f in names if f != reference]
    pairs = itertools.combinations(names, 2) if all_pairs else ()
    return first + [(a, b) for a, b in pairs if reference not in (a, b)]


def family_matches(
    trials: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    metrics: Sequence[str],
    *,
    combine: str = "mean",
    strict_harness_version: bool = False,
) -> dict[tuple[str, str], MatchResult]:
    """The matched tasks of each pair of families present, over every model at once.

    The matching key holds the model, so the tasks one model matched are the rows of these
    matches with that model (:func:`model_match`): :func:`family_comparisons`,
    :func:`model_effects` and :func:`model_interactions` can share one matching per pair.
    """
    from retrieval_lib.stats.paired import match_tasks

    # the matching groups by config_name: here the family
    frame = trials.rename(columns={"config_name": "config_raw", "config_family": "config_name"})
    present = set(frame["config_name"].astype(str))
    return {
        (base, treat): match_tasks(
            frame,
            base,
            treat,
            combine=combine,
            value_columns=list(metrics),
            strict_harness_version=strict_harness_version,
        )
        for base, treat in pairs
        if base in present and treat in present
    }


def model_match(match: MatchResult, model: str) -> MatchResult:
    """The matched tasks of ``match`` whose model is ``model`` (:data:`UNKNOWN_MODEL`: the
    trials without a model), as matching that model's trials alone gives them (``unmatched``
    is not kept: its reasons name the other models).

    Raises
    ------
    StatisticsError
        A strict-harness-version match (its left-out pairs are not counted per model).
    """
    from dataclasses import replace

    if match.strict_harness_version:
        raise StatisticsError("model_match: a strict-harness-version match cannot be split")
    mask = (_models(match.keys) == model).to_numpy()
    return replace(
        match,
        keys=match.keys[mask],
        baseline_values=match.baseline_values[mask],
        treatment_values=match.treatment_values[mask],
        unmatched=match.unmatched.iloc[0:0],
        n_unverified=int(match.keys["harness_version_unverified"].to_numpy(dtype=bool)[mask].sum()),
    )


def _matched(
    trials: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    metrics: Sequence[str],
    combine: str,
    strict_harness_version: bool,
    min_pairs: int,
    matches: Mapping[tuple[str, str], MatchResult] | None,
    model: str | None = None,
) -> tuple[pd.DataFrame, dict[tuple[str, str], pd.DataFrame]]:
    """Compare each pair present in ``trials``; a pair of ``matches`` (made over every model)
    is reused, restricted to ``model`` when one is given."""
    from retrieval_lib.stats.paired_tests import compare_matched

    present = set(trials["config_family"].astype(str))
    parts, per_task = [], {}
    for base, treat in pairs:
        if base not in present or treat not in present:
            continue
        match = None if matches is None else matches.get((base, treat))
        if match is not None and not set(metrics) <= set(match.value_columns):
            match = None  # made without a metric compared here
        if match is not None and model is not None:
            match = None if match.strict_harness_version else model_match(match, model)
        if match is None:
            match = family_matches(
                trials,
                [(base, treat)],
                metrics,
                combine=combine,
                strict_harness_version=strict_harness_version,
            )[(base, treat)]
        parts.append(compare_matched(match, list(metrics), min_n=min_pairs, n_boot=1))
        per_task[(base, treat)] = match.per_task()
    if not parts:
        return pd.DataFrame(), per_task
    return pd.concat(parts, ignore_index=True), per_task


_EFFECT_COLUMNS = [
    "reference",
    "family",
    "metric",
    "n",
    "mean_reference",
    "mean_family",
    "mean_delta",
    "ci_low",
    "ci_high",
    "wins",
    "losses",
    "ties",
    "wilcoxon_p",
    "wilcoxon_p_holm",
    "p_holm",
    "rank_biserial",
    "tested",
    "reason",
]


def _effects(table: pd.DataFrame) -> pd.DataFrame:
    from retrieval_lib.stats.multiple import holm

    if table.empty:
        return pd.DataFrame(columns=_EFFECT_COLUMNS)
    out = table.rename(
        columns={
            "baseline": "reference",
            "treatment": "family",
            "mean_baseline": "mean_reference",
            "mean_treatment": "mean_family",
        }
    )
    out["p_holm"] = holm(out["wilcoxon_p"].to_numpy(dtype=float))
    return out


def family_comparisons(
    trials: pd.DataFrame,
    metrics: Sequence[str],
    *,
    reference: str | None = None,
    baseline: str | None = None,
    all_pairs: bool = False,
    combine: str = "mean",
    strict_harness_version: bool = False,
    min_pairs: int = 3,
    matches: Mapping[tuple[str, str], MatchResult] | None = None,
) -> pd.DataFrame:
    """Matched comparison of every family with the reference (or of every pair).

    Parameters
    ----------
    trials : pandas.DataFrame
        A study's analysed trials (``config_family``, ``config_name``, ``task_name``,
        ``model``, ``reward`` and the metric columns).
    metrics : sequence of str
        Value columns compared (e.g. ``reward``, ``passed``, the key metrics).
    reference, baseline : str, optional
        Reference family (:func:`reference_family`).
    all_pairs : bool
        Every pair of families, not only the reference against each.
    combine, strict_harness_version, min_pairs
        As in :func:`~retrieval_lib.stats.paired.match_tasks` and the paired tests.
    matches : mapping, optional
        :func:`family_matches` of these trials under the same options, reused (a pair
        missing or without a metric is matched here).

    Returns
    -------
    pandas.DataFrame
        ``reference, family, metric, n, mean_reference, mean_family, mean_delta, ci_low,
        ci_high, wins, losses, ties, wilcoxon_p, wilcoxon_p_holm, p_holm, rank_biserial,
        tested, reason`` (deltas: family − reference; ``reference`` is the first family of
        the pair). ``p_holm``: Holm over every tested (pair, metric) row of the table;
        ``wilcoxon_p_holm``: Holm over one pair's metrics.
    """
    families = sorted(trials["config_family"].astype(str).unique())
    ref = reference_family(families, reference, baseline)
    pairs = comparison_pairs(families, ref, all_pairs=all_pairs)
    table, _ = _matched(trials, pairs, metrics, combine, strict_harness_version, min_pairs, matches)
    return _effects(table)[_EFFECT_COLUMNS]


# --------------------------------------------------------------------------- models


def _models(trials: pd.DataFrame) -> pd.Series:
    model = (
        trials["model"].astype(object) if "model" in trials else pd.Series(None, index=trials.index)
    )
    return model.where(model.notna(), UNKNOWN_MODEL).astype(str)


def _matched_by_model(
    trials: pd.DataFrame,
    metrics: Sequence[str],
    reference: str | None,
    baseline: str | None,
    combine: str,
    strict_harness_version: bool,
    min_pairs: int,
    matches: Mapping[tuple[str, str], MatchResult] | None = None,
) -> tuple[str, dict[str, tuple[pd.DataFrame, dict[tuple[str, str], pd.DataFrame]]]]:
    """The reference family, and per model (sorted) the matched comparisons of every family
    against it on that model's trials: ``(table, per-task deltas)`` of :func:`_matched`
    (``matches``, made over every model, reused for each model's rows)."""
    models = _models(trials)
    ref = reference_family(trials["config_family"].astype(str).unique(), reference, baseline)
    by_model = {}
    for model in sorted(models.unique()):
        sub = trials[models == model]
        pairs = comparison_pairs(sub["config_family"].astype(str).unique(), ref)
        by_model[model] = _matched(
            sub, pairs, metrics, combine, strict_harness_version, min_pairs, matches, model
        )
    return ref, by_model


def model_effects(
    trials: pd.DataFrame,
    metrics: Sequence[str],
    *,
    reference: str | None = None,
    baseline: str | None = None,
    combine: str = "mean",
    strict_harness_version: bool = False,
    min_pairs: int = 3,
    matches: Mapping[tuple[str, str], MatchResult] | None = None,
) -> pd.DataFrame:
    """The matched effect of each family against the reference, per model.

    Columns: ``model`` + the columns of :func:`family_comparisons`; ``p_holm`` is Holm over
    every tested (model, family, metric) row. Sorted by family, metric, model so the models
    of one effect are side by side. ``matches``: :func:`family_matches` of these trials
    (every model) under the same options, whose rows of each model are reused.
    """
    _, by_model = _matched_by_model(
        trials, metrics, reference, baseline, combine, strict_harness_version, min_pairs, matches
    )
    parts = [table.assign(model=model) for model, (table, _) in by_model.items() if not table.empty]
    columns = ["model", *_EFFECT_COLUMNS]
    if not parts:
        return pd.DataFrame(columns=columns)
    out = _effects(pd.concat(parts, ignore_index=True))[columns]
    order = {name: i for i, name in enumerate(metrics)}
    out = out.sort_values(
        ["family", "metric", "model"],
        key=lambda col: col.map(order) if col.name == "metric" else col,
        kind="mergesort",
    )
    return out.reset_index(drop=True)


_INTERACTION_COLUMNS = [
    "reference",
    "family",
    "metric",
    "model_a",
    "model_b",
    "n",
    "effect_a",
    "effect_b",
    "diff_of_diff",
    "ci_low",
    "ci_high",
    "ci_method",
    "tested",
    "reason",
]


def model_interactions(
    trials: pd.DataFrame,
    metrics: Sequence[str] = ("reward",),
    *,
    reference: str | None = None,
    baseline: str | None = None,
    combine: str = "mean",
    strict_harness_version: bool = False,
    min_pairs: int = 3,
    alpha: float = 0.05,
    matches: Mapping[tuple[str, str], MatchResult] | None = None,
) -> pd.DataFrame:
    """Does a family's effect differ by model? The difference of differences with its CI.

    For each family (vs the reference), metric and pair of models ``a < b``: the tasks both
    models matched (each model's matched per-task deltas, a task's harness versions
    averaged), ``diff_of_diff = mean over tasks of (delta_b - delta_a)``, ``effect_a`` /
    ``effect_b`` the mean deltas over those same tasks, and the ``1 - alpha`` **t interval
    over tasks** (paired by task: the task is the unit). Fewer than ``max(min_pairs, 2)``
    common tasks, or constant differences, leave it untested with the reason.
    ``matches``: :func:`family_matches` of these trials (every model), reused per model.

    Columns: ``reference, family, metric, model_a, model_b, n, effect_a, effect_b,
    diff_of_diff, ci_low, ci_high, ci_method, tested, reason``.

    Examples
    --------
    >>> t = pd.DataFrame({"model": ["m1"] * 8 + ["m2"] * 8,
    ...     "config_family": (["b"] * 4 + ["t"] * 4) * 2, "config_name": (["b"] * 4 + ["t"] * 4) * 2,
    ...     "task_name": list("wxyz") * 4,
    ...     "reward": [0, 0, 0, 0, 1, 1, 0, 1] + [0, 0, 0, 0, 0, 1, 0, 0]})
    >>> row = model_interactions(t).iloc[0]
    >>> int(row["n"]), float(row["effect_a"]), float(row["effect_b"]), float(row["diff_of_diff"])
    (4, 0.75, 0.25, -0.5)
    """
    from retrieval_lib.stats.intervals import t_mean_ci

    ref, by_model = _matched_by_model(
        trials, metrics, reference, baseline, combine, strict_harness_version, min_pairs, matches
    )
    deltas: dict[tuple[str, str], pd.DataFrame] = {
        (model, family): frame
        for model, (_, per_task) in by_model.items()
        for (_, family), frame in per_task.items()
    }
    rows = []
    families = sorted({f for _, f in deltas})
    need = max(min_pairs, 2)
    model_pairs = list(itertools.combinations(by_model, 2))
    for family, metric, (a, b) in itertools.product(families, metrics, model_pairs):
        row: dict[str, Any] = dict.fromkeys(_INTERACTION_COLUMNS, math.nan)
        row.update(
            reference=ref,
            family=family,
            metric=metric,
            model_a=a,
            model_b=b,
            ci_method=None,
            tested=False,
            reason=None,
        )
        per = []
        for model in (a, b):
            found = deltas.get((model, family))
            if found is None or found.empty:
                per.append(pd.Series(dtype=float))
                continue
            values = pd.to_numeric(found[f"delta:{metric}"], errors="coerce")
            per.append(values.groupby(found["task_name"].astype(str)).mean().dropna())
        both = pd.concat(per, axis=1, join="inner").dropna()
        n = len(both)
        row["n"] = n
        if n:
            da, db = both.iloc[:, 0].to_numpy(float), both.iloc[:, 1].to_numpy(float)
            dd = db - da
            row.update(
                effect_a=float(da.mean()),
                effect_b=float(db.mean()),
                diff_of_diff=float(dd.mean()),
            )
            if n < need:
                row["reason"] = f"{n} task(s) matched by both models; a CI needs {need}"
            elif np.unique(np.round(dd, 12)).size == 1:
                row["reason"] = f"the {n} differences of differences are constant"
            else:
                low, high = t_mean_ci(dd, alpha=alpha)
                row.update(ci_low=low, ci_high=high, ci_method="t", tested=True)
        else:
            row["reason"] = "no task matched by both models"
        rows.append(row)
    return pd.DataFrame(rows, columns=_INTERACTION_COLUMNS)


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class FamilyComparison:
    """The N-family comparison of a study (:func:`compare_families`).

    Attributes
    ----------
    table : pandas.DataFrame
        Long: ``model, letter, config_family, metric, n, mean, ci_low, ci_high, best,
        higher_than`` (``higher_than``: the letters of the rows of the same model this one is
        significantly higher than, ``""`` when none).
    friedman : pandas.DataFrame
        ``model`` + :data:`~retrieval_lib.stats.multi.FRIEDMAN_COLUMNS`, per model and metric.
    pairwise : pandas.DataFrame
        ``model`` + :data:`~retrieval_lib.stats.multi.PAIRWISE_COLUMNS` with ``p_holm`` over
        every pair × metric of the model.
    metrics : list of str
    alpha : float
    n_boot, seed : int
        Bootstrap of the mean CIs.
    """

    table: pd.DataFrame
    friedman: pd.DataFrame
    pairwise: pd.DataFrame
    metrics: list[str] = field(default_factory=list)
    alpha: float = 0.05
    n_boot: int = 2000
    seed: int = 0

    @property
    def caption(self) -> str:
        """What the markers mean: the test, the correction and the threshold."""
        return self._caption("<")

    def _caption(self, lt: str) -> str:
        level = round(100 * (1 - self.alpha), 6)
        return (
            f"Mean over the tasks every config family ran (per model and metric; n = tasks) "
            f"with a {level:g}% percentile-bootstrap CI over tasks. A superscript letter marks "
            f"each row this one is significantly higher than: two-sided Wilcoxon signed-rank "
            f"test on the same tasks, Holm-adjusted over every pair and metric of the model, "
            f"p {lt} {self.alpha:g}. Bold: the highest mean."
        )

    def wide(self) -> pd.DataFrame:
        """One row per (model, family), one text column per metric: ``mean [low, high]``
        with the markers as ``^a,b``."""
        _, body = self._cells(mark=lambda s: f" ^{s}", bold=str, escape=str, missing="")
        return pd.DataFrame(body, columns=["model", "letter", "config_family", *self.metrics])

    def _cells(
        self, mark: Any, bold: Any, escape: Any, missing: str
    ) -> tuple[list[str], list[list[str]]]:
        """Header and rows: per metric ``mean [low, high]`` (the best mean in ``bold``) and the
        ``mark`` of the letters the row is higher than; ``missing`` without a mean."""
        header = ["Model", "Row", "Config family", *[escape(m) for m in self.metrics]]
        body = []
        records = self.table.to_dict("records")
        keyed = {(r["model"], r["config_family"], r["metric"]): r for r in records}
        for model, letter, family in sorted(
            {(r["model"], r["letter"], r["config_family"]) for r in records}
        ):
            line = [escape(model), letter, escape(family)]
            for metric in self.metrics:
                rec = keyed.get((model, family, metric))
                if rec is None or not math.isfinite(rec["mean"]):
                    line.append(missing)
                    continue
                text = bold(_number(rec["mean"])) if rec["best"] else _number(rec["mean"])
                if math.isfinite(rec["ci_low"]):
                    text += f" [{_number(rec['ci_low'])}, {_number(rec['ci_high'])}]"
                line.append(text + (mark(rec["higher_than"]) if rec["higher_than"] else ""))
            body.append(line)
        return header, body

    def to_markdown(self) -> str:
        """The table as GitHub Markdown (names escaped), the caption below it."""
        from retrieval_lib.safe_text import markdown_text

        header, body = self._cells(
            mark=lambda s: f"<sup>{s}</sup>",
            bold=lambda s: f"**{s}**",
            escape=markdown_text,
            missing="–",
        )
        lines = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join(["---"] * 3 + [":---:"] * len(self.metrics)) + "|",
            *("| " + " | ".join(line) + " |" for line in body),
            "",
            self._caption("&lt;"),
        ]
        return "\n".join(lines) + "\n"

    def to_latex(self) -> str:
        """The table as a LaTeX ``table`` with a ``tabular`` (no package needed; every
        special character of a name escaped)."""
        header, body = self._cells(
            mark=lambda s: f"$^{{{s}}}$",
            bold=lambda s: f"\\textbf{{{s}}}",
            escape=latex_text,
            missing="--",
        )
        spec = "lll" + "c" * len(self.metrics)
        lines = [
            "\\begin{table}",
            "\\centering",
            f"\\caption{{{latex_text(self._caption('LT')).replace(' LT ', ' $<$ ')}}}",
            f"\\begin{{tabular}}{{{spec}}}",
            "\\hline",
            " & ".join(header) + " \\\\",
            "\\hline",
            *(" & ".join(line) + " \\\\" for line in body),
            "\\hline",
            "\\end{tabular}",
            "\\end{table}",
        ]
        return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    return f"{value:.3f}"


def _letters(n: int) -> list[str]:
    return [string.ascii_lowercase[i % 26] * (i // 26 + 1) for i in range(n)]


#: Columns of the ranx-style table of :func:`compare_families`.
_TABLE_COLUMNS = [
    "model",
    "letter",
    "config_family",
    "metric",
    "n",
    "mean",
    "ci_low",
    "ci_high",
    "best",
    "higher_than",
]


def _family_means(
    wide: pd.DataFrame, families: list[str], metric: str, n_boot: int, seed: int, alpha: float
) -> list[dict[str, Any]]:
    """Each family's mean over the complete tasks, with its bootstrap CI (from n = 2)."""
    from retrieval_lib.stats.intervals import bootstrap_mean_ci

    out: list[dict[str, Any]] = []
    for family in families:
        values = wide[family].to_numpy(dtype=float) if family in wide else np.array([])
        low = high = math.nan
        if values.size >= 2:
            low, high = bootstrap_mean_ci(values, n_boot=n_boot, seed=seed, alpha=alpha)
        out.append(
            {
                "config_family": family,
                "metric": metric,
                "n": int(values.size),
                "mean": float(values.mean()) if values.size else math.nan,
                "ci_low": low,
                "ci_high": high,
            }
        )
    return out


def _mark_winners(
    rows: pd.DataFrame, pairs: pd.DataFrame, letters: dict[str, str], alpha: float
) -> None:
    """The ranx-style marks: letters of the families each is significantly above, and best."""
    significant = (
        pairs[pairs["tested"].astype(bool) & (pairs["p_holm"] < alpha)]
        if not pairs.empty
        else pairs
    )
    higher: dict[tuple[str, str], list[str]] = {}
    for rec in significant.to_dict("records"):
        winner, loser = (rec["B"], rec["A"]) if rec["mean_delta"] > 0 else (rec["A"], rec["B"])
        if rec["mean_delta"] == 0:
            continue
        higher.setdefault((winner, rec["dv"]), []).append(letters[loser])
    rows["higher_than"] = [
        ",".join(sorted(higher.get((f, m), [])))
        for f, m in zip(rows["config_family"], rows["metric"], strict=True)
    ]
    best = rows.groupby("metric")["mean"].transform("max")
    rows["best"] = rows["mean"].notna() & (rows["mean"] == best)


def _stacked(frames: list[pd.DataFrame], columns: list[str]) -> pd.DataFrame:
    return (
        pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
    )


def compare_families(
    trials: pd.DataFrame,
    metrics: Sequence[str],
    *,
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    min_pairs: int = 3,
) -> FamilyComparison:
    """Friedman, pairwise Wilcoxon (Holm) and the ranx-style table, per model.

    Per model, over the tasks every family ran (a task is kept for a metric only when every
    family has a value: listwise): the Friedman test per metric
    (:func:`~retrieval_lib.stats.multi.friedman`, three or more families), the pairwise
    Wilcoxon tests with Holm over every pair × metric of the model
    (:func:`~retrieval_lib.stats.multi.pairwise_wilcoxon`), and the table in the spirit of
    ranx's ``compare``: one row per family with a letter, the mean per metric with a seeded
    percentile-bootstrap CI over tasks, the letters of the rows it is significantly
    **higher** than (Holm-adjusted p < ``alpha``), the highest mean in bold. Unlike the
    matched pairs, harness versions are not separated.

    Parameters
    ----------
    trials : pandas.DataFrame
        A study's analysed trials. Trials without a finite ``reward`` are left out (as the
        matching does); each (model, family, task) is the mean over its trials.
    metrics : sequence of str
        Columns compared (``passed`` as a pass rate).
    alpha, n_boot, seed, min_pairs
        Threshold of the markers and level of the CIs; bootstrap of the mean CIs; fewest
        complete tasks for a test.

    Returns
    -------
    FamilyComparison
    """
    from retrieval_lib.stats.clustered import aggregate_by_task
    from retrieval_lib.stats.multi import (
        FRIEDMAN_COLUMNS,
        PAIRWISE_COLUMNS,
        complete_blocks,
        friedman,
        pairwise_wilcoxon,
    )
    from retrieval_lib.stats.multiple import holm

    metrics = [m for m in dict.fromkeys(metrics) if m in trials.columns]
    reward = pd.to_numeric(trials["reward"], errors="coerce")
    valid = trials[np.isfinite(reward.to_numpy(dtype=float))].copy()
    valid["model"] = _models(valid)
    per_task = aggregate_by_task(valid, metrics, by=["model", "config_family"])
    table_rows, omnibus, posthoc = [], [], []
    for model in sorted(valid["model"].unique()):
        sub = per_task[per_task["model"] == model]
        families = sorted(sub["config_family"].astype(str).unique())
        letters = dict(zip(families, _letters(len(families)), strict=True))
        model_pairs = []
        model_rows: list[dict[str, Any]] = []
        for metric in metrics:
            of = (sub, metric, "config_family", "task_name")  # data, dv, within, subject
            blocks = complete_blocks(*of)  # made once for both tests
            omnibus.append(friedman(*of, min_n=min_pairs, blocks=blocks).assign(model=model))
            pairwise = pairwise_wilcoxon(*of, min_n=min_pairs, alpha=alpha, blocks=blocks)
            model_pairs.append(pairwise.assign(model=model))
            wide, _ = blocks
            model_rows.extend(
                {"model": model, "letter": letters[row["config_family"]], **row}
                for row in _family_means(wide, families, metric, n_boot, seed, alpha)
            )
        pairs = pd.concat(model_pairs, ignore_index=True) if model_pairs else pd.DataFrame()
        if not pairs.empty:
            pairs["p_holm"] = holm(pairs["wilcoxon_p"].to_numpy(dtype=float))
            posthoc.append(pairs)
        rows = pd.DataFrame(model_rows)
        if rows.empty:
            continue
        _mark_winners(rows, pairs, letters, alpha)
        table_rows.append(rows)
    return FamilyComparison(
        table=_stacked(table_rows, _TABLE_COLUMNS),
        friedman=_stacked(omnibus, ["model", *FRIEDMAN_COLUMNS]),
        pairwise=_stacked(posthoc, ["model", *PAIRWISE_COLUMNS]),
        metrics=metrics,
        alpha=alpha,
        n_boot=n_boot,
        seed=seed,
    )


def write_comparison(comparison: FamilyComparison, folder: Any) -> list[Any]:
    """Write ``compare.md`` and ``compare.tex`` (the comparison table) into ``folder``,
    atomically; returns the paths written."""
    from pathlib import Path

    from retrieval_lib.io import atomic_write_text

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    return [
        atomic_write_text(target / "compare.md", comparison.to_markdown()),
        atomic_write_text(target / "compare.tex", comparison.to_latex()),
    ]

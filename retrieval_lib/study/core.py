"""The :class:`Study`: many runs pooled, with the tables and analyses a report shows.

A study is the unit of analysis across runs, models, configs and dates. Trials are
pooled by **config family** (:mod:`retrieval_lib.study.families`), so a legacy ``mcp``
run and a current ``mcp-remote-direct`` run count as one treatment. Matching follows the
seed: canonical task, model and harness version, a valid reward on both sides; repeated
trials of a task (within or across runs) are combined by their mean and counted.

Examples
--------
>>> from retrieval_lib.study import load
>>> from retrieval_lib.report.pipeline import bundled_examples
>>> runs, tasks = bundled_examples()  # doctest: +SKIP
>>> study = load([runs], tasks_root=tasks, out="study_out")  # doctest: +SKIP
>>> study.leaderboard()[["model", "config_family", "trials", "reward_mean"]]  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from retrieval_lib.errors import InputError
from retrieval_lib.lazylibs import STATS_LIBRARIES, require
from retrieval_lib.metrics.stages import DEFAULT_K
from retrieval_lib.study import analysis
from retrieval_lib.study.families import config_families, pair_families
from retrieval_lib.study.loader import PreparedRuns, prepare_runs, read_evaluated

if TYPE_CHECKING:
    from retrieval_lib.stats.impact import ImpactResult
    from retrieval_lib.study.compare import FamilyComparison

__all__ = ["Study", "StudyOptions", "load", "load_evaluated"]

#: Identity columns of the long ``metrics`` table.
_LONG_ID = ("trial_id", "run_id", "config_name", "config_family", "task_name", "model")
#: Columns of :meth:`Study.timeline_trials`.
_TIMELINE_COLUMNS = (
    "baseline",
    "treatment",
    "task_name",
    "model",
    "delta_reward",
    "baseline_trial",
    "treatment_trial",
)


@dataclass(frozen=True)
class StudyOptions:
    """How a study matches and resamples (the notebook's and CLI's parameters).

    Attributes
    ----------
    seed, n_boot, alpha
        Bootstrap seed and resamples; ``1 - alpha`` intervals and the significance level.
    min_pairs
        Fewest matched tasks for a paired test (the seed's 3).
    combine
        Repeated trials of a task: ``"mean"`` (default) or ``"latest"``.
    metrics
        Retrieval-metric family: ``"key"``, ``"all"`` or a list.
    baseline, treatment
        Explicit config families to compare (default: paired by name).
    exclude_flagged
        Leave trials with a confidence flag out of every analysis.
    strict_harness_version
        Keep only pairs whose harness versions are both known and equal (default: an
        unknown version is no difference; such pairs are flagged
        ``harness_version_unverified``).
    reference_family
        The family every other one is compared with in :meth:`Study.family_comparisons`
        and :meth:`Study.model_effects` (default: ``baseline``, else the first family
        named ``baseline*``; :func:`retrieval_lib.study.compare.reference_family`).
    all_pairs
        :meth:`Study.family_comparisons` compares every pair of families, not only each
        with the reference.
    """

    seed: int = 0
    n_boot: int = 2000
    alpha: float = 0.05
    min_pairs: int = 3
    combine: str = "mean"
    metrics: str | tuple[str, ...] = "key"
    baseline: str | None = None
    treatment: str | None = None
    exclude_flagged: bool = False
    strict_harness_version: bool = False
    reference_family: str | None = None
    all_pairs: bool = False


@dataclass(frozen=True)
class Study:
    """Many evaluated runs pooled into tidy tables.

    **Convention.** Attributes (no parentheses) are the study's data: the tables it was
    loaded with and plain views of them that take no parameter and compute no statistic
    (``trials``, ``events``, ``exclusions``, ``metrics``, ``analysed``, ``config_map``,
    ``sources``, ``options``). Methods (parentheses) compute an analysis, whether or not
    they take parameters: ``overview()``, ``flags()``, ``leaderboard()``, ``tiers()``,
    ``tool_value()``, ``family_pairs()``, ``impact()``, ``pairs()``, ``matched()``,
    ``calibration()``, ``timeline_trials()``, ``timeline()``.

    Attributes
    ----------
    trials : pandas.DataFrame
        One row per trial: the run's metrics-table columns (identity, every metric,
        outcomes) plus ``trial_id``, ``config_family``, coverage and ground-truth details
        (``trace_source``, ``transcript_truncated``, ``has_ground_truth``,
        ``ground_truth_source``, ``ground_truth_confidence``, ``output_tokens_placeholder``)
        and the confidence ``flags`` / ``confidence_flagged``.
    events : pandas.DataFrame
        One row per tool call (:data:`retrieval_lib.events.study_rows.EVENT_COLUMNS`); the
        names (trial, run, config, model, tool) are categoricals when read from runs.
    exclusions : pandas.DataFrame
        Trials left out before the analysis (normalisation or reading failed), with why.
    config_map : dict
        Raw config name → family used (the default mapping with the study's additions).
    sources : list of str
        The evaluated ``retrieval_events`` folders read.
    options : StudyOptions
        Matching and resampling parameters.
    """

    trials: pd.DataFrame
    events: pd.DataFrame
    exclusions: pd.DataFrame
    config_map: dict[str, str] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    options: StudyOptions = field(default_factory=StudyOptions)

    # ------------------------------------------------------------------ views

    @property
    def analysed(self) -> pd.DataFrame:
        """The trials every analysis uses (without flagged ones when ``exclude_flagged``)."""
        if self.options.exclude_flagged:
            return self.trials[~self.trials["confidence_flagged"]].reset_index(drop=True)
        return self.trials

    def with_options(self, **changes: Any) -> Study:
        """The same study with other :class:`StudyOptions` (the tables are shared)."""
        return replace(self, options=replace(self.options, **changes))

    @functools.cached_property
    def metrics(self) -> pd.DataFrame:
        """Long table: one row per (trial, metric) with ``value`` (NaN: not computable,
        the reason in ``trials.non_computable_reason``)."""
        from retrieval_lib.stats.columns import find_metric_columns

        columns = find_metric_columns(self.trials)
        return self.trials.melt(
            id_vars=list(_LONG_ID), value_vars=columns, var_name="metric", value_name="value"
        )

    def overview(self) -> pd.DataFrame:
        """One row per run: models, configs, families, tasks, trials."""
        return analysis.study_overview(self.trials)

    def flags(self) -> pd.DataFrame:
        """One row per (trial, confidence flag) with the rule that raised it."""
        return analysis.flag_table(self.trials)

    # ------------------------------------------------------------------ analyses

    def _frame(self) -> pd.DataFrame:
        """Analysed trials with ``config_name`` = family (what the stats functions group by)."""
        frame = self.analysed.rename(columns={"config_name": "config_raw"})
        return frame.rename(columns={"config_family": "config_name"})

    def _resampling(self) -> dict[str, Any]:
        """The options' ``alpha``, ``n_boot`` and ``seed`` as keyword arguments."""
        o = self.options
        return {"alpha": o.alpha, "n_boot": o.n_boot, "seed": o.seed}

    def leaderboard(self) -> pd.DataFrame:
        """Model × config family, repeats averaged per task first
        (:func:`retrieval_lib.study.analysis.leaderboard`)."""
        return analysis.leaderboard(self.analysed, **self._resampling())

    def tiers(self, metric: str = "file.recall") -> pd.DataFrame:
        """Reward and pass rate by retrieval tier per family (task-cluster bootstrap CIs)."""
        return analysis.retrieval_tiers(self.analysed, metric, **self._resampling())

    def tool_value(self, by: str = "tool") -> pd.DataFrame:
        """What each tool or category brought (:func:`retrieval_lib.study.analysis.tool_value`)."""
        analysed = self.analysed
        events = self.events[analysis.is_in(self.events["trial_id"], analysed["trial_id"])]
        return analysis.tool_value(events, analysed, by=by)

    def family_pairs(self) -> list[tuple[str, str]]:
        """The (baseline, treatment) families compared."""
        o = self.options
        return pair_families(self.analysed["config_family"].astype(str), o.baseline, o.treatment)

    def impact(self) -> ImpactResult:
        """Correlations over one value per task (per family, and pooled) and matched
        comparisons of each family pair (computed once per study and options)."""
        return self._impact_result

    @functools.cached_property
    def _impact_result(self) -> ImpactResult:
        """Matched comparisons per family pair and correlations over all trials, one result."""
        from retrieval_lib.stats.clustered import correlate_by_task
        from retrieval_lib.stats.columns import OUTCOME_COLUMNS, resolve_metrics
        from retrieval_lib.stats.impact import ImpactResult, analyze_impact, analyze_impact_columns

        o = self.options
        frame = self._frame()
        family = o.metrics if isinstance(o.metrics, str) else list(o.metrics)
        metrics = resolve_metrics(frame, family)
        pairs = self.family_pairs()
        parts = [
            analyze_impact(
                frame[frame["config_name"].isin([base, treat])],
                baseline=base,
                treatment=treat,
                seed=o.seed,
                n_boot=o.n_boot,
                min_pairs=o.min_pairs,
                combine=o.combine,
                metrics=metrics,
                correlate=False,
                strict_harness_version=o.strict_harness_version,
            )
            for base, treat in pairs
        ]
        templates = analyze_impact_columns()

        def stack(name: str) -> pd.DataFrame:
            frames = [getattr(p, name) for p in parts if not getattr(p, name).empty]
            if not frames:
                return pd.DataFrame(columns=templates[name])
            return pd.concat(frames, ignore_index=True)

        params: dict[str, Any] = dict(parts[0].params) if parts else {}
        params |= {
            "seed": o.seed,
            "n_boot": o.n_boot,
            "min_matched_pairs": o.min_pairs,
            "combine_repeated_trials": o.combine,
            "metric_family": o.metrics if isinstance(o.metrics, str) else "custom",
            "metrics": metrics,
            "outcomes": [c for c in OUTCOME_COLUMNS if c in frame.columns],
            "config_map": dict(self.config_map),
            "family_pairs": [list(p) for p in pairs],
            "confidence_flagged_trials": "excluded" if o.exclude_flagged else "kept",
        }
        return ImpactResult(
            pairs=stack("pairs"),
            correlations=correlate_by_task(frame, metrics, min_n=5),
            comparisons=stack("comparisons"),
            mcnemar=stack("mcnemar"),
            per_task=stack("per_task"),
            unmatched=stack("unmatched"),
            config_summary=stack("config_summary"),
            params=params,
        )

    def pairs(self, deltas: Sequence[str] = ("reward", "passed")) -> pd.DataFrame:
        """Every trial behind every matched task, with its task's deltas.

        One row per trial (:func:`~retrieval_lib.study.analysis.pairing_trials`: ``baseline,
        treatment, task_name, model, harness_version, side, run_id, config_name, trial_id,
        trial_name, reward, passed, combined``) plus, for each name of ``deltas``, the
        column ``delta:<name>``: the task's treatment value minus its baseline value
        (repeated trials combined as ``options.combine`` says, as in
        ``impact().per_task``), the same on every trial of the task.

        Parameters
        ----------
        deltas
            Outcomes or metrics whose per-task delta to add (``"reward"``, ``"passed"``,
            ``"cost_usd"``, ``"file.recall"``, …: those of ``impact().per_task``).

        Raises
        ------
        InputError
            A name that has no per-task delta (with a "did you mean"). With no matched
            task at all there is no delta to name: the columns are added, all missing.
        """
        if isinstance(deltas, str):
            deltas = [deltas]
        per_task = self.impact().per_task
        trials = analysis.pairing_trials(self.analysed, per_task)
        wanted = [f"delta:{name}" for name in dict.fromkeys(deltas)]
        known = [c.removeprefix("delta:") for c in per_task.columns if c.startswith("delta:")]
        # no task is matched (no baseline/treatment pair): no name to check against
        for column in wanted if known or not per_task.empty else ():
            if column not in per_task.columns:
                from retrieval_lib.suggest import hint

                name = column.removeprefix("delta:")
                raise InputError(
                    f"no per-task delta of {name!r}{hint(name, known)}; "
                    f"known: {', '.join(known) or 'none'}"
                )
        if per_task.empty or not wanted:  # every trial's delta is missing
            return trials.assign(**{c: pd.Series(dtype=float) for c in wanted})
        keys = ["baseline", "treatment", "task_name", "model", "harness_version"]
        merged = trials.merge(
            per_task[[*keys, *wanted]], on=keys, how="left", validate="many_to_one"
        )
        return merged[[*trials.columns, *wanted]]

    def matched(self) -> pd.DataFrame:
        """Matched comparison per pair and metric, descriptive where no test runs."""
        result = self.impact()
        names = ["reward", "passed", *result.params["metrics"], *result.params["outcomes"]]
        return analysis.matched_overview(
            result.comparisons, result.per_task, list(dict.fromkeys(names))
        )

    # ------------------------------------------------ every config family (issue 19)

    def _compare_metrics(self, metrics: Sequence[str] | None) -> list[str]:
        from retrieval_lib.stats.columns import resolve_metrics

        if metrics is not None:
            return list(metrics)
        o = self.options
        chosen = resolve_metrics(
            self.analysed, o.metrics if isinstance(o.metrics, str) else list(o.metrics)
        )
        return list(dict.fromkeys(["reward", "passed", *chosen]))

    @functools.cached_property
    def _family_matches(self) -> dict[tuple[str, str], Any]:
        """One matching per compared family pair over every model, shared by
        :meth:`family_comparisons`, :meth:`model_effects` and :meth:`model_interactions`."""
        from retrieval_lib.study.compare import comparison_pairs, family_matches, reference_family

        o = self.options
        families = self.analysed["config_family"].astype(str).unique()
        reference = reference_family(families, o.reference_family, o.baseline)
        return family_matches(
            self.analysed,
            comparison_pairs(families, reference, all_pairs=o.all_pairs),
            self._compare_metrics(None),
            combine=o.combine,
            strict_harness_version=o.strict_harness_version,
        )

    def _matched_options(self) -> dict[str, Any]:
        """The options of the matched family comparisons, and the matching they share."""
        o = self.options
        return {
            "reference": o.reference_family,
            "baseline": o.baseline,
            "combine": o.combine,
            "strict_harness_version": o.strict_harness_version,
            "min_pairs": o.min_pairs,
            "matches": self._family_matches,
        }

    def family_comparisons(self, metrics: Sequence[str] | None = None) -> pd.DataFrame:
        """Every family against the reference family (every pair with ``all_pairs``) on
        matched tasks, Holm over pairs × metrics
        (:func:`retrieval_lib.study.compare.family_comparisons`)."""
        from retrieval_lib.study.compare import family_comparisons

        return family_comparisons(
            self.analysed,
            self._compare_metrics(metrics),
            all_pairs=self.options.all_pairs,
            **self._matched_options(),
        )

    def compare(self, metrics: Sequence[str] | None = None) -> FamilyComparison:
        """Friedman test, pairwise Wilcoxon with Holm and the ranx-style comparison table of
        every config family, per model (``.to_markdown()``, ``.to_latex()``;
        :func:`retrieval_lib.study.compare.compare_families`)."""
        from retrieval_lib.study.compare import compare_families

        return compare_families(
            self.analysed,
            self._compare_metrics(metrics),
            min_pairs=self.options.min_pairs,
            **self._resampling(),
        )

    def model_effects(self, metrics: Sequence[str] | None = None) -> pd.DataFrame:
        """The matched effect of each family (vs the reference) per model, side by side
        (:func:`retrieval_lib.study.compare.model_effects`)."""
        from retrieval_lib.study.compare import model_effects

        return model_effects(
            self.analysed, self._compare_metrics(metrics), **self._matched_options()
        )

    def model_interactions(self, metrics: Sequence[str] = ("reward",)) -> pd.DataFrame:
        """Does a family's effect differ by model: difference of differences with a t
        interval over tasks (:func:`retrieval_lib.study.compare.model_interactions`)."""
        from retrieval_lib.study.compare import model_interactions

        return model_interactions(
            self.analysed, list(metrics), alpha=self.options.alpha, **self._matched_options()
        )

    def calibration(self, metric: str) -> pd.DataFrame:
        """``metric`` by candidate-set size × evidence type: mean over the slice's trials, CI
        by the task-cluster bootstrap, ``n`` in tasks (:func:`~retrieval_lib.stats.means.calibration_table`)."""
        from retrieval_lib.stats.means import calibration_table

        return calibration_table(self.analysed, metric, **self._resampling())

    def timeline_trials(self, tasks: Sequence[str] = (), top: int = 2) -> pd.DataFrame:
        """For each timeline task: the pair and the trial shown on each side.

        Columns: ``baseline, treatment, task_name, model, delta_reward, baseline_trial,
        treatment_trial``.
        """
        per_task = self.impact().per_task
        chosen = analysis.timeline_tasks(per_task, tasks, top=top)
        trials = self.analysed
        rows = []
        for task in chosen.to_dict("records"):
            row = {c: task[c] for c in ("baseline", "treatment", "task_name", "model")}
            row["delta_reward"] = task.get("delta:reward")
            for side in ("baseline", "treatment"):
                mask = (trials["config_family"] == task[side]) & (
                    trials["task_name"] == task["task_name"]
                )
                if pd.notna(task["model"]):
                    mask &= trials["model"] == task["model"]
                row[f"{side}_trial"] = analysis.representative_trial(trials[mask])
            rows.append(row)
        return pd.DataFrame(rows, columns=list(_TIMELINE_COLUMNS))

    def timeline(self, trial_id: str) -> pd.DataFrame:
        """Timeline rows of one trial (:func:`retrieval_lib.study.analysis.timeline_frame`)."""
        return analysis.timeline_frame(self.events, trial_id)


# --------------------------------------------------------------------------- loading


def load_evaluated(
    events_dirs: Sequence[str | os.PathLike[str]],
    *,
    config_map: Mapping[str, str] | None = None,
    options: StudyOptions | None = None,
) -> Study:
    """A :class:`Study` of runs that ``retrieval-lib evaluate`` has processed.

    Parameters
    ----------
    events_dirs
        ``retrieval_events`` folders (or run folders holding one).
    config_map
        Additions to the default config-family mapping.
    options
        Matching and resampling parameters.

    Raises
    ------
    MissingExtraError
        As :func:`load`: a study needs the ``stats`` extra.
    """
    from retrieval_lib.metrics.summary import find_events_roots

    require(STATS_LIBRARIES, "retrieval_lib.study.load_evaluated")
    roots = find_events_roots([Path(p) for p in events_dirs])
    tables = read_evaluated(roots, config_map)
    return Study(
        trials=analysis.with_flags(tables.trials),
        events=tables.events,
        exclusions=tables.exclusions,
        config_map=config_families(config_map),
        sources=[str(r) for r in roots],
        options=options or StudyOptions(),
    )


def load(
    paths: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    tasks_root: str | os.PathLike[str] | None = None,
    *,
    out: str | os.PathLike[str] | None = None,
    config_map: Mapping[str, str] | None = None,
    options: StudyOptions | None = None,
    workers: int = 1,
    k: Sequence[int] = DEFAULT_K,
    log: Callable[[str], None] | None = None,
    verify: bool = False,
) -> Study:
    """Normalise and evaluate what is not yet up to date, then pool every trial.

    Parameters
    ----------
    paths
        Run folders, folders of runs, or evaluated run folders.
    tasks_root
        Task definitions root (ground truth) for runs that need normalising.
    out
        Output root of normalisation and evaluation (``<out>/<run_id>/retrieval_events``);
        ``None`` writes inside each run's own ``retrieval_events/`` folder.
    config_map
        Additions to the default config-family mapping (``{"NAME": "FAMILY"}``).
    options
        Matching and resampling parameters (:class:`StudyOptions`).
    workers
        Normalisation worker processes.
    k
        Cut-offs of the evaluation.
    log
        Receives one line per step.
    verify
        The full up-to-date check (every input file and document of each run) instead
        of one record per run (:func:`~retrieval_lib.study.loader.prepare_runs`).

    Returns
    -------
    Study

    Raises
    ------
    MissingExtraError
        scipy or pingouin is not installed: like ``retrieval-lib study``, a study needs
        the ``stats`` extra (``pip install 'retrieval_lib[stats]'``).
    InputError
        Missing paths, nothing to study, or two runs sharing a run id.
    """
    require(STATS_LIBRARIES, "retrieval_lib.study.load")
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    prepared: PreparedRuns = prepare_runs(
        list(paths), tasks_root, out=out, workers=workers, k=k, log=log, verify=verify
    )
    loaded = load_evaluated(prepared.events_dirs, config_map=config_map, options=options)
    outside_runs = prepared.exclusion_rows()  # e.g. a run folder that cannot be listed
    if not outside_runs:
        return loaded
    extra = pd.DataFrame(outside_runs, columns=list(loaded.exclusions.columns))
    frames = [f for f in (loaded.exclusions, extra) if not f.empty]
    return replace(loaded, exclusions=pd.concat(frames, ignore_index=True))

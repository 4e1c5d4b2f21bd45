"""Statistics of downstream impact: outcome associations and matched config comparisons.

One function per statistical test, each returning a tidy DataFrame with stable columns:

* :mod:`retrieval_lib.stats.correlation`: ``spearman``, ``pearson``, ``point_biserial``,
  ``auc``, ``correlate_metrics`` (associations, never causal claims), with p-values from
  :mod:`retrieval_lib.stats.permutation` (``permutation_p``: exact up to n = 8, seeded
  Monte Carlo up to n = 100, asymptotic above);
* :mod:`retrieval_lib.stats.paired`: ``pair_configs``, ``match_tasks`` (which configs and
  tasks are compared);
* :mod:`retrieval_lib.stats.paired_tests`: ``paired_comparison``, ``compare_matched``,
  ``mcnemar_exact``, ``wilcoxon_signed_rank`` (exact up to 20 non-zero tied deltas, 50
  untied); a paired test needs ``MIN_NONZERO_DELTAS`` (6) non-zero deltas;
* :mod:`retrieval_lib.stats.intervals`: ``t_mean_ci`` (the t interval of the mean delta),
  ``bootstrap_mean_ci`` (the library's one bootstrap of a mean, percentile or BCa);
* :mod:`retrieval_lib.stats.power`: ``tasks_needed`` (the CI half-width now and the
  matched tasks needed for a reward difference of 0.05 / 0.10 at 80% power);
* :mod:`retrieval_lib.stats.columns`: ``KEY_METRICS`` (the default metric family),
  ``find_metric_columns``, ``resolve_metrics``;
* :mod:`retrieval_lib.stats.multiple`: ``holm``, ``benjamini_hochberg``;
* :mod:`retrieval_lib.stats.impact`: ``analyze_impact``, ``impact_to_json``, ``run_impact``,
  ``load_impact``, ``impact_for_run``.

scipy is imported inside the functions that need it.
"""

from __future__ import annotations

from retrieval_lib.stats.columns import KEY_METRICS, find_metric_columns, resolve_metrics
from retrieval_lib.stats.correlation import (
    auc,
    correlate_metrics,
    pearson,
    point_biserial,
    spearman,
)
from retrieval_lib.stats.impact import (
    ImpactResult,
    analyze_impact,
    impact_for_run,
    impact_to_json,
    load_impact,
    run_impact,
)
from retrieval_lib.stats.intervals import bootstrap_mean_ci, t_mean_ci
from retrieval_lib.stats.multiple import benjamini_hochberg, holm
from retrieval_lib.stats.paired import MatchResult, match_tasks, pair_configs
from retrieval_lib.stats.paired_tests import (
    WilcoxonResult,
    compare_matched,
    mcnemar_exact,
    paired_comparison,
    wilcoxon_signed_rank,
)
from retrieval_lib.stats.permutation import permutation_p
from retrieval_lib.stats.power import tasks_needed

__all__ = [
    "KEY_METRICS",
    "ImpactResult",
    "MatchResult",
    "WilcoxonResult",
    "analyze_impact",
    "auc",
    "benjamini_hochberg",
    "bootstrap_mean_ci",
    "compare_matched",
    "correlate_metrics",
    "holm",
    "impact_for_run",
    "impact_to_json",
    "load_impact",
    "match_tasks",
    "mcnemar_exact",
    "find_metric_columns",
    "pair_configs",
    "paired_comparison",
    "pearson",
    "permutation_p",
    "point_biserial",
    "resolve_metrics",
    "run_impact",
    "spearman",
    "t_mean_ci",
    "tasks_needed",
    "wilcoxon_signed_rank",
]

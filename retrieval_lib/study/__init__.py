"""Studies: many runs (models × configs × dates) pooled into one analysis.

* :mod:`~retrieval_lib.study.families`: config families (legacy and current names);
* :mod:`~retrieval_lib.study.loader`: bring runs up to date, read them into tidy tables;
* :mod:`~retrieval_lib.study.analysis`: the tables of each question (leaderboard, tiers,
  tool value, confidence flags, matched comparison, timelines);
* :mod:`~retrieval_lib.study.core`: :class:`Study`, :func:`load`;
* :mod:`~retrieval_lib.study.sections`: every table of the study report computed once,
  written beside it and read back by the notebook.

Examples
--------
>>> from retrieval_lib.study import load  # doctest: +SKIP
>>> study = load(["runs/official"], tasks_root="benchmarks", out="reports")  # doctest: +SKIP
>>> study.leaderboard()  # doctest: +SKIP
"""

from retrieval_lib.study.core import Study, StudyOptions, load, load_evaluated
from retrieval_lib.study.families import DEFAULT_CONFIG_FAMILIES, family_of, pair_families

__all__ = [
    "DEFAULT_CONFIG_FAMILIES",
    "Study",
    "StudyOptions",
    "family_of",
    "load",
    "load_evaluated",
    "pair_families",
]

"""A study's sections computed once, written beside the report and read back by the notebook.

``retrieval-lib study`` pools the runs into a :class:`~retrieval_lib.study.core.Study`,
computes every table the study notebook shows (:func:`compute_sections`) and writes them
with the trial-level tables to ``<out>/study/tables/`` (:func:`write_sections`: Parquet,
an index ``sections.json``). The notebook kernel then reads those files
(:func:`read_sections`) instead of loading the study a second time: the
:class:`StudySections` it gets answers the same calls as a ``Study`` (``leaderboard()``,
``impact()``, ``tool_value(by)``, ``timeline(trial_id)``, ...) from the stored tables.
Event rows are kept only for the trials a timeline shows.

Examples
--------
>>> from retrieval_lib.study.sections import compute_sections, read_sections  # doctest: +SKIP
>>> write_sections(compute_sections(study), "out/study/tables")  # doctest: +SKIP
>>> read_sections("out/study/tables").leaderboard()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from retrieval_lib.errors import InputError
from retrieval_lib.events.study_rows import LIST_COLUMNS
from retrieval_lib.study import analysis

if TYPE_CHECKING:
    from retrieval_lib.stats.impact import ImpactResult
    from retrieval_lib.study.compare import FamilyComparison
    from retrieval_lib.study.core import Study, StudyOptions

__all__ = [
    "SECTIONS_FILENAME",
    "SECTIONS_VERSION",
    "StudySections",
    "compute_sections",
    "read_sections",
    "timeline_requests",
    "write_sections",
]

SECTIONS_FILENAME = "sections.json"
SECTIONS_VERSION = "1"
#: Metrics the calibration section shows when the trials have them.
CALIBRATION_METRICS = ("file.AP", "file.recall")


def timeline_requests(text: str) -> list[str]:
    """The notebook's ``timeline_tasks`` parameter as a list of task names.

    >>> timeline_requests(" a, b ,,")
    ['a', 'b']
    """
    return [t.strip() for t in text.split(",") if t.strip()]


@dataclass(frozen=True)
class StudySections:
    """Every table of the study notebook, computed once (see the module docstring).

    Attributes
    ----------
    tables : dict of str to pandas.DataFrame
        The section tables by name (``leaderboard_all``, ``leaderboard_unflagged``,
        ``matched``, ``tiers``, ``tools``, ``tool_categories``, ``flags``, ``overview``,
        ``exclusions``, ``pairs``, ``timeline_trials``, ``timeline_events``,
        ``calibration:<metric>``, ``impact_<table>``) and ``trials``.
    impact_params : dict
        ``ImpactResult.params``.
    options : StudyOptions
        The options the sections were computed with (``exclude_flagged`` may be switched
        by :meth:`with_options`: both leaderboards are kept).
    timeline_tasks : tuple of str
        The ``timeline_tasks`` the timelines were chosen with (empty: the top ones).
    timeline_top : int
        How many timeline tasks were chosen when none was requested.
    """

    tables: dict[str, pd.DataFrame]
    impact_params: dict[str, Any]
    options: StudyOptions
    timeline_tasks: tuple[str, ...] = ()
    timeline_top: int = 2
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    # ---------------------------------------------------------------- the Study's calls

    @property
    def trials(self) -> pd.DataFrame:
        """Every trial (``Study.trials``)."""
        return self.tables["trials"]

    @property
    def analysed(self) -> pd.DataFrame:
        """The trials every analysis used (``Study.analysed``)."""
        if self.options.exclude_flagged:
            return self.trials[~self.trials["confidence_flagged"]].reset_index(drop=True)
        return self.trials

    @property
    def exclusions(self) -> pd.DataFrame:
        """Trials left out before the analysis, with why."""
        return self.tables["exclusions"]

    def pairs(self) -> pd.DataFrame:
        """Every trial behind every matched task, with the per-task reward and pass deltas
        (``Study.pairs()``)."""
        return self.tables["pairs"]

    def with_options(self, **changes: Any) -> StudySections:
        """The same sections under other options: only ``exclude_flagged`` can change
        (the leaderboard is stored both ways); every other section was computed once."""
        other = set(changes) - {"exclude_flagged"}
        if other:
            raise InputError(
                f"the stored study sections cannot be recomputed with {sorted(other)}: "
                "run `retrieval-lib study` with those parameters"
            )
        return replace(self, options=replace(self.options, **changes), _cache={})

    def overview(self) -> pd.DataFrame:
        """One row per run."""
        return self.tables["overview"]

    def flags(self) -> pd.DataFrame:
        """One row per (trial, confidence flag)."""
        return self.tables["flags"]

    def leaderboard(self) -> pd.DataFrame:
        """Model × config family (with or without flagged trials, as the options say)."""
        key = "leaderboard_unflagged" if self.options.exclude_flagged else "leaderboard_all"
        return self.tables[key]

    def tiers(self, metric: str = "file.recall") -> pd.DataFrame:
        """Reward and pass rate by retrieval tier (``file.recall`` only is stored)."""
        if metric != "file.recall":
            raise InputError(f"the stored study sections have tiers by file.recall, not {metric}")
        return self.tables["tiers"]

    def tool_value(self, by: str = "tool") -> pd.DataFrame:
        """What each tool (``by="tool"``) or category (``by="category"``) brought."""
        names = {"tool": "tools", "category": "tool_categories"}
        if by not in names:
            raise InputError(f"tool_value by {by!r}: expected 'tool' or 'category'")
        return self.tables[names[by]]

    def family_pairs(self) -> list[tuple[str, str]]:
        """The (baseline, treatment) families compared."""
        return [(str(b), str(t)) for b, t in self.impact_params.get("family_pairs", [])]

    def impact(self) -> ImpactResult:
        """The matched comparisons and correlations (``Study.impact()``)."""
        if "impact" not in self._cache:
            from retrieval_lib.stats.impact import IMPACT_TABLES, ImpactResult

            self._cache["impact"] = ImpactResult(  # kept as impact_<name>.parquet
                **{name: self.tables[f"impact_{name}"] for name in IMPACT_TABLES},
                params=dict(self.impact_params),
            )
        result: ImpactResult = self._cache["impact"]
        return result

    def matched(self) -> pd.DataFrame:
        """Matched comparison per pair and metric."""
        return self.tables["matched"]

    def family_comparisons(self) -> pd.DataFrame:
        """Every family against the reference (``Study.family_comparisons()``)."""
        return self.tables["family_comparisons"]

    def compare(self) -> FamilyComparison:
        """The N-family comparison (``Study.compare()``), rebuilt from its stored tables."""
        from retrieval_lib.study.compare import FamilyComparison

        meta = dict(self.impact_params.get("compare", {}))
        return FamilyComparison(
            table=self.tables["compare_table"],
            friedman=self.tables["compare_friedman"],
            pairwise=self.tables["compare_pairwise"],
            metrics=list(meta.get("metrics", [])),
            alpha=float(meta.get("alpha", 0.05)),
            n_boot=int(meta.get("n_boot", 2000)),
            seed=int(meta.get("seed", 0)),
        )

    def model_effects(self) -> pd.DataFrame:
        """Each family's matched effect per model (``Study.model_effects()``)."""
        return self.tables["model_effects"]

    def model_interactions(self) -> pd.DataFrame:
        """Difference of differences between models (``Study.model_interactions()``)."""
        return self.tables["model_interactions"]

    def calibration(self, metric: str) -> pd.DataFrame:
        """``metric`` by candidate-set size × evidence type."""
        key = f"calibration:{metric}"
        if key not in self.tables:
            raise InputError(f"the stored study sections have no calibration of {metric}")
        return self.tables[key]

    def timeline_trials(self, tasks: Sequence[str] = (), top: int = 2) -> pd.DataFrame:
        """The timeline tasks chosen when the sections were computed (the same request
        must be given: the events of other trials are not stored)."""
        requested = tuple(t for t in tasks if t)
        if requested != self.timeline_tasks or (not requested and top != self.timeline_top):
            raise InputError(
                f"the stored study sections draw timelines for {list(self.timeline_tasks) or 'the top'} "
                f"tasks (top={self.timeline_top}), not {list(requested)} (top={top}): run "
                "`retrieval-lib study` with that timeline_tasks"
            )
        return self.tables["timeline_trials"]

    def timeline(self, trial_id: str) -> pd.DataFrame:
        """Timeline rows of one of the trials :meth:`timeline_trials` shows."""
        return analysis.timeline_frame(self.tables["timeline_events"], trial_id)


def compute_sections(
    study: Study, timeline_tasks: Sequence[str] = (), *, timeline_top: int = 2
) -> StudySections:
    """Compute every table of the study notebook once.

    Parameters
    ----------
    study
        The pooled study.
    timeline_tasks, timeline_top
        Which matched tasks get a timeline (the notebook's ``timeline_tasks``; empty: the
        ``timeline_top`` with the largest reward difference).
    """
    requested = tuple(t for t in timeline_tasks if t)
    impact = study.impact()
    shown = study.timeline_trials(list(requested), top=timeline_top)
    ids = {str(v) for v in shown[["baseline_trial", "treatment_trial"]].stack().dropna()}
    events = analysis.plain_text(study.events[study.events["trial_id"].isin(ids)])
    events = events.reset_index(drop=True)
    tables: dict[str, pd.DataFrame] = {
        "trials": study.trials,
        "overview": study.overview(),
        "exclusions": study.exclusions,
        "flags": study.flags(),
        "leaderboard_all": study.with_options(exclude_flagged=False).leaderboard(),
        "leaderboard_unflagged": study.with_options(exclude_flagged=True).leaderboard(),
        "matched": study.matched(),
        "pairs": study.pairs(),
        "tiers": study.tiers("file.recall"),
        "tools": study.tool_value("tool"),
        "tool_categories": study.tool_value("category"),
        "timeline_trials": shown,
        "timeline_events": events,
    }
    for metric in CALIBRATION_METRICS:
        if metric in study.analysed.columns:
            tables[f"calibration:{metric}"] = study.calibration(metric)
    from retrieval_lib.stats.impact import IMPACT_TABLES

    for name in IMPACT_TABLES:
        tables[f"impact_{name}"] = getattr(impact, name)
    comparison = study.compare()
    tables |= {
        "family_comparisons": study.family_comparisons(),
        "compare_table": comparison.table,
        "compare_friedman": comparison.friedman,
        "compare_pairwise": comparison.pairwise,
        "model_effects": study.model_effects(),
        "model_interactions": study.model_interactions(),
    }
    params = dict(impact.params)
    params["family_pairs"] = [list(p) for p in study.family_pairs()]
    params["compare"] = {
        "metrics": list(comparison.metrics),
        "alpha": comparison.alpha,
        "n_boot": comparison.n_boot,
        "seed": comparison.seed,
    }
    return StudySections(
        tables=tables,
        impact_params=params,
        options=study.options,
        timeline_tasks=requested,
        timeline_top=timeline_top,
    )


def _storable(frame: pd.DataFrame) -> pd.DataFrame:
    """Sequence cells as lists (Parquet list columns)."""
    columns = {
        c: frame[c].map(lambda v: list(v) if isinstance(v, (tuple, set, frozenset)) else v)
        for c in frame.columns
        if frame[c].dtype == object
    }
    return frame.assign(**columns) if columns else frame


def _restored(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet's arrays back as tuples in the sequence columns."""
    for column in LIST_COLUMNS:
        if column in frame.columns:
            frame[column] = frame[column].map(
                lambda v: tuple(v.tolist()) if isinstance(v, np.ndarray) else v
            )
    return frame


def write_sections(
    sections: StudySections, folder: str | os.PathLike[str], *, skip: Sequence[str] = ()
) -> list[Path]:
    """Write every section table (Parquet) and the index ``sections.json`` atomically.

    ``skip``: tables already written beside them under their own name (``trials``,
    ``pairs``, ``tools``: the study's ``<name>.parquet``), referenced by the index instead
    of written twice.

    Raises
    ------
    InputError
        pyarrow is not installed.
    """
    import importlib.util
    import io

    from retrieval_lib.io import atomic_write_bytes, atomic_write_json

    if importlib.util.find_spec("pyarrow") is None:
        raise InputError("the study sections need pyarrow (pip install 'retrieval_lib[parquet]')")
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    files: dict[str, str] = {}
    for name, frame in sections.tables.items():
        if name in skip:
            files[name] = f"{name}.parquet"
            continue
        buffer = io.BytesIO()
        _storable(frame).to_parquet(buffer, index=False)
        files[name] = "section_" + name.replace(":", "__") + ".parquet"
        written.append(atomic_write_bytes(target / files[name], buffer.getvalue()))
    options = {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(sections.options).items()
    }
    index = {
        "sections_version": SECTIONS_VERSION,
        "files": files,
        "impact_params": sections.impact_params,
        "options": options,
        "timeline_tasks": list(sections.timeline_tasks),
        "timeline_top": sections.timeline_top,
    }
    written.append(atomic_write_json(target / SECTIONS_FILENAME, index))
    return written


def read_sections(
    folder: str | os.PathLike[str], *, options: StudyOptions | None = None
) -> StudySections:
    """Read what :func:`write_sections` wrote (the ``tables/`` folder, or the study folder
    or manifest beside it).

    ``options``: the options the reader expects (the notebook's parameters); the stored
    sections must have been computed with them.

    Raises
    ------
    InputError
        No readable sections index, a table it names is missing, or other options.
    """
    from retrieval_lib.study.core import StudyOptions

    target = Path(folder)
    if target.is_file():
        target = target.parent
    if not (target / SECTIONS_FILENAME).is_file() and (target / "tables").is_dir():
        target = target / "tables"
    try:
        index = json.loads((target / SECTIONS_FILENAME).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"no study sections at {target}: run `retrieval-lib study` (with pyarrow) first"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the study sections index {target}: {exc}") from None
    if not isinstance(index, dict) or index.get("sections_version") != SECTIONS_VERSION:
        raise InputError(f"{target / SECTIONS_FILENAME} is not a study sections index")
    tables: dict[str, pd.DataFrame] = {}
    for name, file in dict(index["files"]).items():
        path = target / str(file)
        try:
            tables[str(name)] = _restored(pd.read_parquet(path))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read study table {path}: {exc}") from None
    raw = dict(index.get("options") or {})
    if isinstance(raw.get("metrics"), list):
        raw["metrics"] = tuple(raw["metrics"])
    stored = StudyOptions(**raw)
    if options is not None and options != stored:
        differ = sorted(k for k, v in vars(options).items() if getattr(stored, k) != v)
        raise InputError(
            f"the study sections in {target} were computed with other options ({', '.join(differ)}): "
            "run `retrieval-lib study` with these parameters"
        )
    return StudySections(
        tables=tables,
        impact_params=dict(index.get("impact_params") or {}),
        options=stored,
        timeline_tasks=tuple(index.get("timeline_tasks") or ()),
        timeline_top=int(index.get("timeline_top", 2)),
    )

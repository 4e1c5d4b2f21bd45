"""The study report: many runs pooled into ``<out>/study/study.{ipynb,html}`` and its tables.

:func:`run_study` brings every run up to date (:func:`retrieval_lib.study.loader.prepare_runs`
reuses what is already evaluated), writes the study manifest (which evaluated folders,
which config families), the tidy tables (``trials``, ``events``, ``metrics``, ``pairs``,
``tools``: Parquet, CSV without pyarrow), the comparison of every config family
(``compare.md``, ``compare.tex``) and renders ``notebooks/study.ipynb``.
:func:`retrieval_lib.report.pipeline.example_study` is the study of the bundled example
runs (the notebook's default).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_lib.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

    from retrieval_lib.study import Study, StudyOptions

__all__ = [
    "MANIFEST_FILENAME",
    "STUDY_DIRNAME",
    "StudyReport",
    "check_study_inputs",
    "read_manifest",
    "replaced_study_warning",
    "run_study",
    "study_parameters",
    "write_study_tables",
]

STUDY_DIRNAME = "study"
MANIFEST_FILENAME = "study_manifest.json"
#: StudyOptions fields that are not notebook parameters (every other one is, by its name).
_NOT_PARAMETERS = ("combine", "metrics")


@dataclass(frozen=True)
class StudyReport:
    """What :func:`run_study` wrote, and the pooled study when no report was rendered
    (``None`` after a report: it is released before the notebook kernel starts, which
    reads the tables written from it)."""

    study_dir: Path
    manifest: Path
    tables: list[Path]
    html: Path | None
    notebook: Path | None
    study: Study | None


def study_options(values: Mapping[str, Any]) -> StudyOptions:
    """:class:`~retrieval_lib.study.StudyOptions` from notebook parameter values
    (empty strings mean "default")."""
    from retrieval_lib.study import StudyOptions

    chosen = {
        f.name: values[f.name]
        for f in fields(StudyOptions)
        if f.name not in _NOT_PARAMETERS and values.get(f.name) not in ("", None)
    }
    return StudyOptions(**chosen)


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a study manifest (``study_manifest.json``, or the folder holding it)."""
    import json

    target = Path(path)
    if target.is_dir():
        target = target / MANIFEST_FILENAME
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            f"no study manifest at {target}: run `retrieval-lib study` first"
        ) from None
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read study manifest {target}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("events_dirs"), list):
        raise InputError(f"{target} is not a study manifest (no events_dirs list)")
    return data


def replaced_study_warning(
    study_dir: str | os.PathLike[str],
    paths: Sequence[str | os.PathLike[str]],
    tasks_root: str | os.PathLike[str] | None,
) -> str | None:
    """The warning to give before ``study_dir`` is replaced by the study of other inputs.

    ``None`` when ``study_dir`` holds no study, or the study of the same run paths and
    tasks root (an update of the same study).

    Examples
    --------
    >>> import json, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> replaced_study_warning(folder, ["runs"], None) is None
    True
    >>> _ = (folder / MANIFEST_FILENAME).write_text(json.dumps(
    ...     {"events_dirs": [], "paths": ["/data/a"], "tasks_root": None}))
    >>> replaced_study_warning(folder, ["/data/a"], None) is None
    True
    >>> print(replaced_study_warning(folder, ["/data/b"], None))  # doctest: +ELLIPSIS
    warning: .../ holds the study of other runs (/data/a); replacing it with the study of /data/b (give another --out to keep both)
    """
    folder = Path(study_dir)
    if not (folder / MANIFEST_FILENAME).is_file():
        return None
    try:
        previous = read_manifest(folder)
    except InputError:
        return f"warning: {folder}/ holds an unreadable study manifest; replacing it"
    new_paths = sorted(str(Path(p).resolve()) for p in paths)
    new_root = None if tasks_root is None else str(Path(tasks_root).resolve())
    old_paths = sorted(str(p) for p in previous.get("paths") or [])
    if old_paths == new_paths and previous.get("tasks_root") == new_root:
        return None
    return (
        f"warning: {folder}/ holds the study of other runs ({', '.join(old_paths) or '?'}); "
        f"replacing it with the study of {', '.join(new_paths)} (give another --out to keep "
        "both)"
    )


def _write_frame(frame: pd.DataFrame, folder: Path, name: str) -> Path:
    import importlib.util
    import io

    from retrieval_lib.io import atomic_write_bytes, atomic_write_text

    if importlib.util.find_spec("pyarrow") is not None:
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return atomic_write_bytes(folder / f"{name}.parquet", buffer.getvalue())
    flat = frame.copy()
    for column in flat.columns:
        if flat[column].map(lambda v: isinstance(v, (list, tuple))).any():
            flat[column] = flat[column].map(
                lambda v: "|".join(map(str, v)) if isinstance(v, (list, tuple)) else v
            )
    return atomic_write_text(folder / f"{name}.csv", flat.to_csv(index=False))


def write_study_tables(
    study: Study,
    folder: str | os.PathLike[str],
    *,
    computed: Mapping[str, pd.DataFrame] | None = None,
) -> list[Path]:
    """Write the study's tidy tables (``trials, events, metrics, pairs, tools``) atomically.

    Parquet when pyarrow is installed, else CSV (list columns ``|``-joined). ``computed``:
    the ``pairs`` and ``tools`` tables already computed (the study's sections), so they are
    not computed again.
    """
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    from retrieval_lib.study.analysis import plain_text

    # the sequence columns hold tuples: pyarrow writes them as list columns as it would
    # lists (the CSV fallback joins both), so no per-event conversion is made
    known = computed or {}
    frames = {
        "trials": study.trials,
        "events": plain_text(study.events),
        "pairs": known["pairs"] if "pairs" in known else study.pairs(),
        "tools": known["tools"] if "tools" in known else study.tool_value("tool"),
    }
    written = [_write_frame(frame, target, name) for name, frame in frames.items()]
    written.append(_write_metrics(study, target))
    return written


def _write_metrics(study: Study, folder: Path) -> Path:
    """The long ``metrics`` table, melted and written a slice of trials at a time (the
    whole long table is trials × metrics rows: never held at once with pyarrow)."""
    import importlib.util

    if importlib.util.find_spec("pyarrow") is None:
        return _write_frame(study.metrics, folder, "metrics")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from retrieval_lib.io import atomic_write_bytes
    from retrieval_lib.stats.columns import find_metric_columns

    trials = study.trials
    columns = find_metric_columns(trials)
    ids = ["trial_id", "run_id", "config_name", "config_family", "task_name", "model"]
    sink = pa.BufferOutputStream()
    writer = None
    step = 5000
    for start in range(0, max(len(trials), 1), step):
        part = trials.iloc[start : start + step].melt(
            id_vars=ids, value_vars=columns, var_name="metric", value_name="value"
        )
        table = pa.Table.from_pandas(part.astype({"value": "float64"}), preserve_index=False)
        if writer is None:
            writer = pq.ParquetWriter(sink, table.schema)
        writer.write_table(table.cast(writer.schema))
    if writer is not None:
        writer.close()
    return atomic_write_bytes(folder / "metrics.parquet", sink.getvalue().to_pybytes())


def _release_freed_memory() -> None:
    """Return the memory the computation freed to the system (glibc's heap and pyarrow's
    pool keep it otherwise: at 100,000 trials 854 MB, 422 MB with both returned), so
    the process tree's peak is not this process's high-water mark plus the notebook
    kernel. A no-op where ``malloc_trim`` does not exist."""
    import ctypes
    import ctypes.util
    import gc

    import pyarrow

    gc.collect()
    pyarrow.default_memory_pool().release_unused()
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        trim = None
    if trim is not None:
        trim(0)


def study_parameters() -> dict[str, Any]:
    """The study notebook's parameter spec (name → :class:`NotebookParameter`)."""
    from retrieval_lib.report.params import notebook_parameters, resolve_notebook

    return notebook_parameters(resolve_notebook("study"))


def run_study(
    paths: Sequence[str | os.PathLike[str]],
    tasks_root: str | os.PathLike[str] | None,
    out: str | os.PathLike[str],
    *,
    params: Mapping[str, Any] | None = None,
    config_map: Mapping[str, str] | None = None,
    workers: int = 1,
    report: bool = True,
    log: Callable[[str], None] = print,
    prepared: Any = None,
    verify: bool = False,
) -> StudyReport:
    """Bring the runs up to date, pool them and render ``<out>/study/study.{ipynb,html}``.

    Parameters
    ----------
    paths
        Run folders, folders of runs, or evaluated run folders (only read).
    tasks_root
        Task definitions root.
    out
        Output root: runs go to ``<out>/<run_id>/``, the study to ``<out>/study/``.
    params
        Study notebook parameters (checked before anything runs); ``study_manifest`` and
        ``output_dir`` are set here.
    config_map
        Additions to the default config-family mapping (merged over ``params["config_map"]``).
    workers
        Normalisation workers.
    report
        Render the notebook (``False``: stop after the tables).
    log
        Receives one line per step.
    prepared
        A :class:`~retrieval_lib.study.loader.PreparedRuns` already made (``run`` passes
        its own, so nothing is prepared twice).
    verify
        The full up-to-date check: every input file and every document of each run
        (default: its completion record, top-level listing and hashed run-level files;
        :func:`~retrieval_lib.study.loader.prepare_runs`).

    Raises
    ------
    InputError, ReportError
        Bad inputs or parameters (before anything runs), or a failing notebook cell.
    """
    from retrieval_lib.study import load_evaluated
    from retrieval_lib.study.loader import prepare_runs

    values, mapping, notebook = check_study_inputs(params, config_map, report)
    out_root = Path(out)
    study_dir = out_root / STUDY_DIRNAME
    warning = replaced_study_warning(study_dir, paths, tasks_root)
    if warning:  # said before the (slow) preparation: Ctrl-C still keeps the old study
        log(warning)
    if prepared is None:
        prepared = prepare_runs(
            list(paths), tasks_root, out=out_root, workers=workers, log=log, verify=verify
        )
    study = load_evaluated(prepared.events_dirs, config_map=mapping, options=study_options(values))
    manifest = _write_manifest(study_dir, prepared.events_dirs, paths, tasks_root, mapping)
    written = _write_tables(study, study_dir, values, needed=notebook is not None)
    log(
        f"study: {len(study.trials)} trials in {study.trials['run_id'].nunique()} run(s), "
        f"{len(study.impact().per_task)} matched task(s); tables in {study_dir / 'tables'}"
    )
    if notebook is None:
        return StudyReport(study_dir, manifest, written, None, None, study)
    from retrieval_lib.report.execute import render_report

    del study  # the kernel runs beside this process and reads the tables: let the study go
    _release_freed_memory()
    run_values = dict(values)
    run_values["study_manifest"] = str(manifest.resolve())
    run_values["output_dir"] = str(study_dir.resolve())
    run_values["config_map"] = mapping
    rendered = render_report(notebook, run_values, study_dir)
    log(f"study report: {rendered.html}")
    return StudyReport(study_dir, manifest, written, rendered.html, rendered.notebook, None)


def check_study_inputs(
    params: Mapping[str, Any] | None, config_map: Mapping[str, str] | None, report: bool
) -> tuple[dict[str, Any], dict[str, str], Path | None]:
    """The study's parameters and config map, checked before anything runs, and the study
    notebook (``None`` without a report).

    Raises
    ------
    InputError, ReportError
        A bad parameter or config-map entry.
    """
    from retrieval_lib.report.params import check_parameters, check_schema, resolve_notebook
    from retrieval_lib.study.families import config_families

    values = dict(params or {})
    notebook = resolve_notebook("study") if report else None
    if notebook is not None:
        values = check_parameters(values, study_parameters(), notebook=notebook.name)
    else:  # the parameters still set the study's options: the same checks
        values = check_schema(values, "study")
    mapping = dict(values.get("config_map") or {})
    mapping.update(config_map or {})
    config_families(mapping)  # refuse a bad entry before the slow part
    return values, mapping, notebook


def _write_manifest(
    study_dir: Path,
    events_dirs: Sequence[str | os.PathLike[str]],
    paths: Sequence[str | os.PathLike[str]],
    tasks_root: str | os.PathLike[str] | None,
    mapping: dict[str, str],
) -> Path:
    """Write the study manifest (what the study pooled, and how); return its path."""
    from retrieval_lib.io import atomic_write_json, now_iso

    return atomic_write_json(
        study_dir / MANIFEST_FILENAME,
        {
            "events_dirs": [str(Path(p).resolve()) for p in events_dirs],
            "paths": [str(Path(p).resolve()) for p in paths],
            "tasks_root": None if tasks_root is None else str(Path(tasks_root).resolve()),
            "config_map": mapping,
            "created": now_iso(),
        },
    )


def _write_tables(
    study: Study, study_dir: Path, values: Mapping[str, Any], *, needed: bool
) -> list[Path]:
    """Write the study's tables, every section the notebook shows and the comparison export.

    With pyarrow the sections are computed here once: the notebook reads them (never the
    runs), and the trial-level tables and ``compare.{md,tex}`` reuse them. Without pyarrow
    only the tables are written; that is an error when a report is ``needed``.
    """
    import importlib.util

    from retrieval_lib.study.compare import write_comparison

    tables = study_dir / "tables"
    if importlib.util.find_spec("pyarrow") is None:
        if needed:
            raise InputError(
                "the study report needs pyarrow (pip install 'retrieval_lib[notebooks]')"
            )
        return write_study_tables(study, tables) + write_comparison(study.compare(), tables)
    from retrieval_lib.study.sections import compute_sections, timeline_requests, write_sections

    sections = compute_sections(study, timeline_requests(str(values.get("timeline_tasks") or "")))
    _release_freed_memory()  # what the sections' computation freed, before the writes' peak
    written = write_study_tables(study, tables, computed=sections.tables)
    written += write_sections(sections, tables, skip=("trials", "pairs", "tools"))
    return written + write_comparison(sections.compare(), tables)  # compare.{md,tex}

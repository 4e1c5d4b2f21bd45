"""Execute a parameterised notebook with papermill and render it to HTML.

The kernel is always ``python3`` (a kernelspec with an absolute path breaks elsewhere),
the working directory is the output folder, and a failing cell becomes a
:class:`~retrieval_lib.errors.ReportError` that names the cell and the error.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_lib.errors import ReportError
from retrieval_lib.report.params import check_parameters, notebook_parameters

__all__ = ["KERNEL_ARGUMENTS", "ReportResult", "render_report"]

#: Command-line options of the report's kernel: its own log is silenced (the cells' output
#: stays). It only ever says "running over TCP without encryption" (how papermill's local,
#: HMAC-signed kernel always runs) or "KeyboardInterrupt caught" at shutdown; a kernel that
#: fails ends the execution, which :func:`render_report` reports.
KERNEL_ARGUMENTS = ("--IPKernelApp.log_level=CRITICAL",)


@dataclass(frozen=True)
class ReportResult:
    """Paths of a rendered report."""

    notebook: Path
    html: Path


#: The id of the cell papermill inserts with the parameters (its own is random, so two
#: renders of the same input would differ in bytes).
INJECTED_CELL_ID = "injected-parameters"


def _strip_volatile_metadata(nb: Any) -> None:
    """Drop papermill's timestamps and durations; give the injected cell a fixed id."""
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", ()):
            cell["id"] = INJECTED_CELL_ID


def _first_line(source: str) -> str:
    """The first line of a cell that is not blank or a comment (to name the cell)."""
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return stripped[:80]
    return source.strip()[:80]


def render_report(
    notebook: str | Path,
    parameters: dict[str, Any],
    out_dir: str | Path,
    *,
    name: str | None = None,
    timeout: int = 600,
) -> ReportResult:
    """Check ``parameters``, execute ``notebook`` into ``out_dir``, write HTML beside it.

    Returns the paths of ``<out_dir>/<name>.ipynb`` and ``<out_dir>/<name>.html``, each
    replaced atomically; a ``<name>.failed.ipynb`` left by an earlier failed execution of
    the same report is removed once the new one is written.

    The parameters are checked against the notebook's ``parameters`` cell first (unknown
    names and ill-typed values fail before anything runs); the kernel is ``python3`` and
    its working directory ``out_dir``. Volatile papermill metadata (timestamps) is dropped.

    Raises
    ------
    ReportError
        Unknown or ill-typed parameters, or a cell that failed: the message names the cell
        (index and first line) and the error, and the partly executed notebook is kept as
        ``<out_dir>/<name>.failed.ipynb``.

    Examples
    --------
    >>> from retrieval_lib.report import render_report, resolve_notebook
    >>> result = render_report(resolve_notebook("run_analysis"), {"seed": 1},
    ...                        "reports/example")  # doctest: +SKIP
    >>> result.html.name  # doctest: +SKIP
    'run_analysis.html'
    """
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from retrieval_lib.io import atomic_write_text
    from retrieval_lib.report.html import write_html

    nb_path = Path(notebook).resolve()
    spec = notebook_parameters(nb_path)
    parameters = check_parameters(parameters, spec, notebook=nb_path.name)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stem = name or nb_path.stem
    out_nb = out / f"{stem}.ipynb"
    failed = out / f"{stem}.failed.ipynb"
    tmp_nb = out / f".{stem}.executing.ipynb"
    # papermill logs every cell at INFO; keep the CLI's output to the paths it prints.
    logging.getLogger("papermill").setLevel(logging.WARNING)
    env_backup = os.environ.get("PYDEVD_DISABLE_FILE_VALIDATION")
    os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    try:
        papermill.execute_notebook(
            str(nb_path),
            str(tmp_nb),
            parameters=parameters,
            kernel_name="python3",
            progress_bar=False,
            cwd=str(out),
            execution_timeout=timeout,
            extra_arguments=list(KERNEL_ARGUMENTS),
        )
    except PapermillExecutionError as exc:
        if tmp_nb.exists():
            tmp_nb.replace(failed)
        raise ReportError(
            f"{nb_path.name}: cell {exc.cell_index} (0-based, {_first_line(exc.source)!r}) "
            f"failed: {exc.ename}: {exc.evalue}; "
            f"the partly executed notebook is {failed}"
        ) from None
    except Exception as exc:  # kernel death, timeout, missing kernel
        tmp_nb.unlink(missing_ok=True)
        raise ReportError(
            f"{nb_path.name}: execution failed: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if env_backup is None:
            os.environ.pop("PYDEVD_DISABLE_FILE_VALIDATION", None)
        else:
            os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = env_backup
    nb = nbformat.read(str(tmp_nb), as_version=4)
    _strip_volatile_metadata(nb)
    atomic_write_text(out_nb, nbformat.writes(nb))
    tmp_nb.unlink(missing_ok=True)
    html = write_html(nb, out / f"{stem}.html", title=stem)
    # The new report replaces every earlier output of the same report, a failed one too.
    failed.unlink(missing_ok=True)
    return ReportResult(notebook=out_nb, html=html)

"""Notebook parameters: read the annotated ``parameters`` cell, load YAML files, check.

papermill only warns about unknown parameter names; we refuse them, and we check each
value against the annotation of its line in the notebook's ``parameters`` cell
(``run_dir: str = ""  # help``; ``Optional[X]`` also takes None), as papermill's own
parser reads the cell.

Examples
--------
>>> from retrieval_lib.report.params import NotebookParameter, check_parameters
>>> spec = {"seed": NotebookParameter("seed", "int", "0", "RNG seed")}
>>> check_parameters({"seed": 3}, spec)
{'seed': 3}
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_lib.errors import ReportError

__all__ = [
    "NotebookParameter",
    "check_parameters",
    "load_params_file",
    "notebook_parameters",
    "notebooks_dir",
    "resolve_notebook",
    "resolve_params_file",
]


@dataclass(frozen=True)
class NotebookParameter:
    """One line of a notebook's ``parameters`` cell."""

    name: str
    type_name: str | None
    default: str
    help: str


def notebooks_dir() -> Path:
    """Folder of the notebooks that ship with the package (:mod:`retrieval_lib.bundled`)."""
    from retrieval_lib.bundled import notebooks_dir as shipped

    return shipped()


def resolve_notebook(name_or_path: str) -> Path:
    """A shipped notebook by name (``run_analysis``, ``kb_compare``, ...) or an .ipynb path."""
    from retrieval_lib.bundled import notebook_names

    path = Path(name_or_path)
    if path.suffix == ".ipynb":
        if not path.is_file():
            raise ReportError(f"no such notebook: {path}")
        return path.resolve()
    shipped = notebooks_dir() / f"{name_or_path}.ipynb"
    if not shipped.is_file():
        raise ReportError(
            f"unknown notebook {name_or_path!r}; shipped notebooks: {notebook_names()}"
        )
    return shipped


def resolve_params_file(name_or_path: str) -> Path:
    """A parameter file: a path to a YAML file, or the name of a shipped one (``example``).

    Examples
    --------
    >>> resolve_params_file("template").name
    'template.yaml'
    """
    from retrieval_lib.bundled import params_dir, params_names

    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists() or len(path.parts) > 1:
        return path
    shipped = params_dir() / f"{name_or_path}.yaml"
    if not shipped.is_file():
        raise ReportError(
            f"no parameter file {name_or_path!r}: give a path to a .yaml file or a shipped "
            f"name: {', '.join(params_names())}"
        )
    return shipped


# The start of a parameter line: a name, then an annotation or "=".
_ASSIGNMENT = re.compile(r"\s*([A-Za-z_]\w*)\s*[:=]")


def notebook_parameters(notebook: str | Path) -> dict[str, NotebookParameter]:
    """The ``parameters``-tagged cell of ``notebook`` as papermill reads it.

    Names, annotations, defaults and help come from papermill's parser of the Python
    parameters cell (``PythonTranslator.inspect``, what ``papermill.inspect_notebook``
    runs for a notebook with a python kernel; notebooks always run with kernel
    ``python3``). papermill skips, with at most a log line, a line it cannot parse (an
    ``=`` in the help comment, a ``str | None`` annotation): such a line is refused here,
    as is a cell that is not valid Python.
    """
    import nbformat

    from retrieval_lib import lazylibs

    lazylibs.papermill()  # the extra's check: papermill is what executes the notebook
    from papermill.translators import PythonTranslator

    try:
        nb = nbformat.read(str(notebook), as_version=4)
    except (OSError, ValueError) as exc:  # nbformat.reader.NotJSONError is a ValueError
        raise ReportError(f"cannot read notebook {notebook}: {exc}") from None
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not cells:
        raise ReportError(f"{notebook} has no cell tagged 'parameters'")
    try:  # papermill's parser does not check syntax: Python's compiler does
        compile(cells[0].source, f"{notebook} (parameters cell)", "exec")
    except SyntaxError as exc:
        raise ReportError(
            f"{notebook}: the parameters cell is not valid Python (line {exc.lineno}: {exc.msg})"
        ) from None
    found = PythonTranslator.inspect(cells[0])
    params = {
        p.name: NotebookParameter(
            p.name,
            None if p.inferred_type_name == "None" else p.inferred_type_name,
            p.default,
            p.help,
        )
        for p in found
    }
    for number, line in enumerate(cells[0].source.splitlines(), start=1):
        match = _ASSIGNMENT.match(line)
        if match and match.group(1) not in params:
            why = (
                "it has more than one '=' (keep '=' out of the help comment)"
                if line.count("=") > 1
                else "write Optional[X], not X | None"
            )
            raise ReportError(
                f"{notebook}: papermill cannot read line {number} of the parameters cell; "
                f"{why}: {line.strip()}"
            )
    return params


_TYPE_CHECKS: dict[str, Any] = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "dict": lambda v: isinstance(v, dict),
}


def check_parameters(
    values: dict[str, Any], spec: dict[str, NotebookParameter], *, notebook: str = "notebook"
) -> dict[str, Any]:
    """Refuse unknown names and values whose type does not match the annotation."""
    unknown = sorted(set(values) - set(spec))
    if unknown:
        raise ReportError(
            f"unknown parameter(s) for {notebook}: {', '.join(unknown)}; "
            f"known: {', '.join(sorted(spec))}"
        )
    for name, value in values.items():
        type_name = spec[name].type_name
        if type_name is None:
            continue
        compact = type_name.replace(" ", "")
        optional = compact.startswith("Optional[") and compact.endswith("]")
        base = compact[len("Optional[") : -1] if optional else compact
        if value is None and optional:
            continue
        check = _TYPE_CHECKS.get(base)
        if check is not None and not check(value):
            raise ReportError(
                f"parameter {name!r} of {notebook} must be {type_name}, "
                f"got {type(value).__name__} {value!r}"
            )
    return values


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML parameter file (a mapping of parameter name to value).

    ``path`` may also name a shipped parameter file (:func:`resolve_params_file`).
    """
    import yaml

    p = resolve_params_file(str(path))
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"cannot read parameter file {p}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ReportError(f"parameter file {p} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ReportError(f"parameter file {p} must hold a mapping, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}

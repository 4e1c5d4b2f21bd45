"""Notebook parameters: one typed schema, the ``parameters`` cell, YAML files, checks.

Every parameter of a shipped notebook is a :class:`Parameter` of :data:`SCHEMAS` (type,
default, help, range, choices, whether it is a path). From it come the notebook's
``parameters`` cell (:func:`render_parameter_cell`; a test asserts the committed cells
and ``params/template.yaml`` / ``params/study.yaml`` agree), the check of a parameter
file (:func:`check_parameters`, before anything runs) and the command-line options that
set the same quantity (:meth:`Parameter.cli_type`: ``impact --seed``, ``--n-boot``,
``kb compare --bootstrap``, ``synth --seed``), so a value is refused in the same way
everywhere.

papermill only warns about unknown parameter names; we refuse them (with "did you
mean" suggestions) and check each value against the annotation of its line in the
``parameters`` cell, as papermill's own parser reads it, then against the schema
(:func:`check_parameters`). Relative paths in a parameter file resolve against the
file's folder (:func:`load_params_file`).

Its length is mostly :data:`SCHEMAS`, the declaration of every notebook parameter (data).

Examples
--------
>>> from retrieval_lib.report.params import NotebookParameter, check_parameters
>>> spec = {"seed": NotebookParameter("seed", "int", "0", "RNG seed")}
>>> check_parameters({"seed": 3}, spec)
{'seed': 3}
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from retrieval_lib.errors import ReportError
from retrieval_lib.suggest import hint

__all__ = [
    "ALPHA",
    "MIN_PAIRS",
    "N_BOOT",
    "PATH_PARAMETERS",
    "SCHEMAS",
    "SEED",
    "NotebookParameter",
    "Parameter",
    "check_parameters",
    "check_schema",
    "load_params_file",
    "notebook_parameters",
    "notebooks_dir",
    "render_parameter_cell",
    "resolve_notebook",
    "resolve_params_file",
    "schema_defaults",
]


@dataclass(frozen=True)
class Parameter:
    """One parameter of the schema: what it is, its range and choices.

    ``minimum``/``maximum`` bound a number (``exclusive`` makes both bounds strict);
    ``choices`` lists the allowed strings; ``path`` marks a file or folder, which a
    parameter file gives relative to its own folder.

    Examples
    --------
    >>> SEED.check(7), N_BOOT.check("1e3"), ALPHA.check("5e-2")
    (7, 1000, 0.05)
    >>> ALPHA.check(1.5)
    Traceback (most recent call last):
    ...
    retrieval_lib.errors.ReportError: parameter 'alpha' must be a number above 0 and below 1, not 1.5
    """

    name: str
    type: str  # "str", "int", "float", "bool" or "dict" (of str to str)
    default: Any
    help: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive: bool = False
    choices: tuple[str, ...] = ()
    path: bool = False

    def requirement(self) -> str:
        """What a valid value is, in words (``an integer of at least 1``)."""
        kind = {
            "int": "an integer",
            "float": "a number",
            "str": "a string",
            "bool": "true or false",
            "dict": "a mapping of strings to strings",
        }[self.type]
        if self.choices:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        low, high = self.minimum, self.maximum
        fmt = _number_text
        if low is not None and high is not None:
            if self.exclusive:
                return f"{kind} above {fmt(low)} and below {fmt(high)}"
            return f"{kind} from {fmt(low)} to {fmt(high)}"
        if low is not None:
            return f"{kind} {'above' if self.exclusive else 'of at least'} {fmt(low)}"
        if high is not None:
            return f"{kind} {'below' if self.exclusive else 'of at most'} {fmt(high)}"
        return kind

    def check(self, value: Any, *, where: str = "") -> Any:
        """``value`` converted to the parameter's type and checked; :class:`ReportError` if not.

        An integer is accepted for a float, an integral float (``1e4``) for an integer,
        and a string that is a number with an exponent (``"5e-2"``, which PyYAML reads
        as a string) for either; another string (``"3"``, quoted) is not a number.
        """
        place = f" of {where}" if where else ""
        coerced = _coerce(value, self.type)
        if coerced is _INVALID or not self._in_range(coerced):
            raise ReportError(
                f"parameter {self.name!r}{place} must be {self.requirement()}, not {value!r}"
            )
        return coerced

    def _in_range(self, value: Any) -> bool:
        if self.choices:
            return value in self.choices
        if self.type not in ("int", "float"):
            return True
        if self.minimum is not None and (
            value <= self.minimum if self.exclusive else value < self.minimum
        ):
            return False
        return not (
            self.maximum is not None
            and (value >= self.maximum if self.exclusive else value > self.maximum)
        )

    def cli_type(self) -> Callable[[str], Any]:
        """An argparse ``type=`` that applies :meth:`check` (a bad value is a usage error)."""
        import argparse

        def parse(text: str) -> Any:
            value: Any = text.strip()
            if self.type in ("int", "float") and _NUMBER.fullmatch(value):
                value = int(value) if re.fullmatch(r"[-+]?[0-9]+", value) else float(value)
            try:
                return self.check(value)
            except ReportError:
                raise argparse.ArgumentTypeError(
                    f"must be {self.requirement()}, not {text!r}"
                ) from None

        parse.__name__ = self.type  # argparse names the type in its message
        return parse

    def literal(self) -> str:
        """The default as Python source in the notebook's parameters cell."""
        if self.type == "str":
            return json.dumps(self.default)
        return repr(self.default)

    def bounds(self) -> str:
        """The numeric range in words (``at least 1``, ``above 0, below 1``), or ``""``.

        No ``=`` sign: papermill cannot read a parameter line with a second ``=``.
        """
        parts = []
        if self.minimum is not None:
            parts.append(
                f"{'above' if self.exclusive else 'at least'} {_number_text(self.minimum)}"
            )
        if self.maximum is not None:
            parts.append(f"{'below' if self.exclusive else 'at most'} {_number_text(self.maximum)}")
        return ", ".join(parts)

    def cell_line(self) -> str:
        """The line of this parameter in the notebook's ``parameters`` cell (help, then the
        range in brackets)."""
        bounds = f" [{self.bounds()}]" if self.bounds() else ""
        return f"{self.name}: {self.type} = {self.literal()}  # {self.help}{bounds}"


_INVALID = object()
_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
#: A number with an exponent: what YAML 1.2 reads as a float and PyYAML (YAML 1.1, which
#: needs a ".") as a string.
_EXPONENT_NUMBER = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)[eE][-+]?[0-9]+")


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _coerce(value: Any, type_name: str) -> Any:
    if type_name in ("int", "float"):
        if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip()):
            value = float(value)  # "5e-2": a number for YAML 1.2, a string for PyYAML
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _INVALID
        if isinstance(value, float) and not math.isfinite(value):
            return _INVALID
        if type_name == "float":
            return float(value)
        if isinstance(value, float):
            return int(value) if value.is_integer() else _INVALID
        return value
    if type_name == "str":
        return value if isinstance(value, str) else _INVALID
    if type_name == "bool":
        return value if isinstance(value, bool) else _INVALID
    if type_name == "dict":
        if value is None:
            return {}
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            return dict(value)
        return _INVALID
    raise ValueError(f"unknown parameter type {type_name!r}")


#: Parameters that mean the same in every notebook and command (same range everywhere).
SEED = Parameter(
    "seed",
    "int",
    0,
    "seed of every bootstrap (the same inputs give the same report)",
    minimum=0,
)
N_BOOT = Parameter(
    "n_boot",
    "int",
    2000,
    "bootstrap resamples for every CI of a mean and of a paired delta",
    minimum=1,
)
ALPHA = Parameter(
    "alpha",
    "float",
    0.05,
    "significance level of adjusted p-values; mean CIs are 1 - alpha intervals",
    minimum=0,
    maximum=1,
    exclusive=True,
)
MIN_PAIRS = Parameter(
    "min_pairs",
    "int",
    3,
    "fewest matched tasks for a paired test (below it the deltas are shown, untested)",
    minimum=1,
)


#: The parameters of each shipped notebook, in the order of its ``parameters`` cell.
SCHEMAS: dict[str, tuple[Parameter, ...]] = {
    "run_analysis": (
        Parameter(
            "run_dir",
            "str",
            "",
            "evaluated run folder (holds retrieval_events/); empty: the bundled example run, "
            "prepared in a temporary folder",
            path=True,
        ),
        Parameter(
            "tasks_root",
            "str",
            "",
            "task definitions root the run was normalised with (provenance only); empty: not given",
            path=True,
        ),
        Parameter(
            "output_dir",
            "str",
            "",
            "folder that receives the report's CSV tables (in tables/); empty: no file is "
            "written (display only)",
            path=True,
        ),
        Parameter(
            "baseline",
            "str",
            "",
            "baseline config of the matched comparison; empty: paired by name (baseline* vs "
            "mcp*/sourcegraph*)",
        ),
        Parameter(
            "treatment",
            "str",
            "",
            "treatment config of the matched comparison; empty: paired by name",
        ),
        Parameter(
            "strict_harness_version",
            "bool",
            False,
            "match only tasks whose harness versions are known and equal; False: an unknown "
            "version is no difference (pairs flagged)",
        ),
        replace(
            SEED,
            help="seed of every bootstrap (the same inputs give the same report); a "
            "retrieval_impact.json made with other values is recomputed",
        ),
        replace(N_BOOT, help="bootstrap resamples for the CIs of means, slices and paired deltas"),
        replace(
            ALPHA,
            help="significance level of adjusted p-values; per-config mean CIs are 1 - alpha "
            "intervals",
        ),
    ),
    "study": (
        Parameter(
            "study_manifest",
            "str",
            "",
            "study_manifest.json written by `retrieval-lib study` (absolute path); empty: "
            "the bundled example runs",
            path=True,
        ),
        Parameter(
            "output_dir",
            "str",
            "",
            "folder that receives the section tables (in tables/); empty: no file is written",
            path=True,
        ),
        Parameter(
            "config_map",
            "dict",
            {},
            'extra config families, {"raw config name": "family"}, over the default mapping',
        ),
        Parameter(
            "baseline",
            "str",
            "",
            "baseline config family of the matched comparison; empty: paired by name",
        ),
        Parameter(
            "treatment",
            "str",
            "",
            "treatment config family; empty: paired by name (direct with direct, artifact "
            "with artifact)",
        ),
        Parameter(
            "reference_family",
            "str",
            "",
            "config family every other is compared with (section 10); empty: the baseline family",
        ),
        Parameter(
            "all_pairs",
            "bool",
            False,
            "compare every pair of config families, not only each with the reference "
            "(Holm over pairs x metrics)",
        ),
        SEED,
        N_BOOT,
        ALPHA,
        MIN_PAIRS,
        Parameter(
            "exclude_flagged",
            "bool",
            False,
            "leave trials with a confidence flag out of every section",
        ),
        Parameter(
            "strict_harness_version",
            "bool",
            False,
            "pair only trials whose harness versions are both known and equal (default: "
            "unknown is no difference, flagged)",
        ),
        Parameter(
            "timeline_tasks",
            "str",
            "",
            "comma-separated matched tasks to draw timelines for; empty: the 2 with the "
            "largest reward difference",
        ),
        Parameter(
            "timeline_x",
            "str",
            "step",
            "x axis of the timelines: step or seconds",
            choices=("step", "seconds"),
        ),
    ),
    "kb_compare": (
        Parameter(
            "db_path",
            "str",
            "",
            "SQLite store of evaluation runs (absolute path); empty: build the shipped "
            "Harbor Town example in a temporary folder",
            path=True,
        ),
        Parameter("run_a", "str", "bm25-window200-v1", "baseline run id (A)"),
        Parameter("run_b", "str", "bm25-paragraph-v2", "candidate run id (B); deltas are B - A"),
        Parameter(
            "strict_chunker_version",
            "bool",
            False,
            "refuse differing chunker versions (no span fallback)",
        ),
        replace(
            N_BOOT,
            name="n_bootstrap",
            help="bootstrap resamples for the confidence intervals",
        ),
        replace(SEED, help="seed of the bootstrap random generator"),
        Parameter(
            "output_dir",
            "str",
            "",
            "if set (absolute path): write compare_report.json, compare_report.md and "
            "per_query.csv there",
            path=True,
        ),
    ),
}

#: Names of the parameters that are files or folders (in any notebook).
PATH_PARAMETERS: frozenset[str] = frozenset(
    p.name for schema in SCHEMAS.values() for p in schema if p.path
)


def schema_defaults(notebook: str) -> dict[str, Any]:
    """The default value of every parameter of a shipped notebook (by name).

    Examples
    --------
    >>> schema_defaults("run_analysis")["n_boot"]
    2000
    """
    return {p.name: p.default for p in SCHEMAS[notebook]}


def check_schema(values: Mapping[str, Any], notebook: str) -> dict[str, Any]:
    """``values`` checked against the schema of a shipped notebook alone (no notebook
    read, papermill not needed): what ``study --no-report`` applies to its parameters.

    Examples
    --------
    >>> check_schema({"alpha": "5e-2"}, "study")
    {'alpha': 0.05}
    >>> check_schema({"Alpha": 0.1}, "study")
    Traceback (most recent call last):
    ...
    retrieval_lib.errors.ReportError: unknown parameter(s) for study: 'Alpha' (did you mean 'alpha'?); known: study_manifest, output_dir, config_map, baseline, treatment, reference_family, all_pairs, seed, n_boot, alpha, min_pairs, exclude_flagged, strict_harness_version, timeline_tasks, timeline_x
    """
    schema = {p.name: p for p in SCHEMAS[notebook]}
    _refuse_unknown(values, schema, notebook)
    return {name: schema[name].check(value, where=notebook) for name, value in values.items()}


def _refuse_unknown(values: Mapping[str, Any], known: Mapping[str, Any], notebook: str) -> None:
    unknown = sorted(set(values) - set(known))
    if unknown:
        described = ", ".join(f"{name!r}{hint(name, known)}" for name in unknown)
        raise ReportError(
            f"unknown parameter(s) for {notebook}: {described}; known: {', '.join(known)}"
        )


def render_parameter_cell(notebook: str) -> str:
    """The ``parameters`` cell of a shipped notebook, as the schema defines it."""
    return "\n".join(p.cell_line() for p in SCHEMAS[notebook])


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
    values: Mapping[str, Any], spec: Mapping[str, NotebookParameter], *, notebook: str = "notebook"
) -> dict[str, Any]:
    """The checked values: unknown names, ill-typed and out-of-range values are refused.

    Names must be parameters of ``spec`` (a near miss gets a "did you mean"). Each value
    must fit the annotation of its line; for a shipped notebook (``notebook`` names it:
    ``run_analysis.ipynb``) it is also checked against :data:`SCHEMAS` (range, choices)
    and converted (``"5e-2"`` -> 0.05, ``1e4`` -> 10000). Returns a new dict.
    """
    _refuse_unknown(values, spec, notebook)
    schema = {p.name: p for p in SCHEMAS.get(Path(notebook).stem, ())}
    checked: dict[str, Any] = {}
    for name, value in values.items():
        type_name = spec[name].type_name
        if name in schema and schema[name].type == (type_name or "").replace(" ", ""):
            checked[name] = schema[name].check(value, where=notebook)
            continue
        checked[name] = value
        if type_name is None:
            continue
        compact = type_name.replace(" ", "")
        optional = compact.startswith("Optional[") and compact.endswith("]")
        base = compact[len("Optional[") : -1] if optional else compact
        if value is None and optional:
            continue
        if base in ("int", "float"):
            coerced = _coerce(value, base)
            if coerced is not _INVALID:
                checked[name] = coerced
                continue
        check = _TYPE_CHECKS.get(base)
        if check is not None and not check(value):
            raise ReportError(
                f"parameter {name!r} of {notebook} must be {type_name}, "
                f"got {type(value).__name__} {value!r}"
            )
    return checked


def _yaml_loader() -> Any:
    """PyYAML's safe loader that also reads YAML 1.2 numbers (``5e-2``, ``1e4``) as floats."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    # PyYAML follows YAML 1.1, where a float needs a "."; appended last, this resolver
    # only sees what no other rule (int, bool, null, ...) took.
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(f"^{_EXPONENT_NUMBER.pattern}$"),
        list("-+.0123456789"),
    )
    return Loader


def load_params_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML parameter file (a mapping of parameter name to value).

    ``path`` may also name a shipped parameter file (:func:`resolve_params_file`).
    Numbers may take any YAML form (``5e-2`` is 0.05). A relative path given for a
    path parameter (:data:`PATH_PARAMETERS`) is made absolute against the file's folder;
    an empty one stays empty (it means "the default").

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "p.yaml").write_text('alpha: 5e-2\\nrun_dir: "runs/r1"\\n')
    >>> values = load_params_file(folder / "p.yaml")
    >>> values["alpha"], values["run_dir"] == str(folder.resolve() / "runs" / "r1")
    (0.05, True)
    """
    import yaml

    p = resolve_params_file(str(path))
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_yaml_loader())
    except OSError as exc:
        raise ReportError(f"cannot read parameter file {p}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ReportError(f"parameter file {p} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ReportError(f"parameter file {p} must hold a mapping, got {type(data).__name__}")
    values = {str(k): v for k, v in data.items()}
    folder = p.resolve().parent
    for name in PATH_PARAMETERS & set(values):
        value = values[name]
        if isinstance(value, str) and value:
            target = Path(value).expanduser()
            values[name] = str(target if target.is_absolute() else folder / target)
    return values

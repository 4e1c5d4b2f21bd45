"""Files that ship inside the package: notebooks, parameter files and the example runs.

In the source tree, ``notebooks``, ``params`` and ``examples/{runs,benchmarks,
synth_manifest.json}`` in this folder are symbolic links to the project's top-level
``notebooks/``, ``params/`` and ``examples/`` (one copy of every file). A wheel holds
copies of the files (``[tool.setuptools.package-data]`` in ``pyproject.toml``); an
editable install reads them in place. Either way they are found here with
:mod:`importlib.resources`, never relative to a checkout.

A new ``notebooks/<name>.ipynb`` or ``params/<name>.yaml`` ships by being there: the
package-data globs pick it up, and ``retrieval-lib report --notebook <name>`` /
``-f <name>`` find it by name.

Examples
--------
>>> "run_analysis" in notebook_names() and "template" in params_names()
True
>>> examples_dir().joinpath("runs").is_dir()
True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from retrieval_lib.errors import InputError

__all__ = [
    "examples_dir",
    "notebook_names",
    "notebooks_dir",
    "params_dir",
    "params_names",
]


def _folder(name: str) -> Path:
    # An installed package is always unpacked on disk (pip never installs a zipped wheel),
    # so the resource folder is a real path that papermill and shutil can use. Resolved:
    # in a checkout, paths then name the top-level folder the link points to.
    path = Path(str(resources.files(__name__) / name)).resolve()
    if not path.is_dir():
        raise InputError(
            f"the package's {name} folder is missing at {path}; reinstall retrieval_lib"
        )
    return path


def notebooks_dir() -> Path:
    """Folder of the shipped notebooks (``<name>.ipynb``)."""
    return _folder("notebooks")


def params_dir() -> Path:
    """Folder of the shipped parameter files (``<name>.yaml``)."""
    return _folder("params")


def examples_dir() -> Path:
    """Folder of the example runs: ``runs/``, ``benchmarks/`` and ``synth_manifest.json``."""
    return _folder("examples")


def notebook_names() -> list[str]:
    """Names of the shipped notebooks, sorted."""
    return sorted(p.stem for p in notebooks_dir().glob("*.ipynb"))


def params_names() -> list[str]:
    """Names of the shipped parameter files, sorted."""
    return sorted(p.stem for p in params_dir().glob("*.yaml"))

"""Optional third-party libraries, imported on first use and named by the extra that installs them.

The core (normalisation, metrics, the CLI's start) needs none of them: scipy, pingouin,
papermill, matplotlib and seaborn cost seconds to import. Code that needs one calls the
function of this module (``lazylibs.scipy_stats()``); the import happens once and is
cached. A library that is not installed raises :class:`MissingExtraError`, which says
which extra of ``retrieval_lib`` installs it; the CLI prints it as one line:

    retrieval-lib impact needs the 'stats' extra: pip install 'retrieval_lib[stats]'

:data:`EXTRA_OF_MODULE` maps every optional top-level module to its extra, so a plain
``import`` of one of them that fails is reported the same way (:func:`missing_extra`).

Examples
--------
>>> EXTRA_OF_MODULE["scipy"], EXTRA_OF_MODULE["papermill"]
('stats', 'notebooks')
>>> str(MissingExtraError("scipy", "stats"))
"needs the 'stats' extra (scipy is not installed): pip install 'retrieval_lib[stats]'"
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Iterable
from types import ModuleType

from retrieval_lib.errors import RetrievalLibError

__all__ = [
    "EXTRA_OF_MODULE",
    "MissingExtraError",
    "missing_extra",
    "missing_modules",
    "require",
    "STATS_LIBRARIES",
    "papermill",
    "pingouin",
    "scipy_stats",
]

#: Optional top-level module -> the extra of retrieval_lib that installs it.
EXTRA_OF_MODULE: dict[str, str] = {
    "scipy": "stats",
    "pingouin": "stats",
    "pyarrow": "parquet",
    "matplotlib": "notebooks",
    "seaborn": "notebooks",
    "papermill": "notebooks",
    "nbformat": "notebooks",
    "nbconvert": "notebooks",
    "ipykernel": "notebooks",
    "rank_bm25": "kb",
}


#: What every statistical analysis needs (the ``stats`` extra): ``retrieval-lib impact``
#: and ``study`` check for them before they start, :func:`retrieval_lib.study.load` too.
STATS_LIBRARIES: tuple[str, ...] = ("scipy", "pingouin")


class MissingExtraError(RetrievalLibError):
    """An optional library is not installed; ``extra`` names what to install.

    ``what``, when given, names what needs it (``retrieval_lib.study.load``).
    """

    def __init__(self, module: str, extra: str, what: str | None = None) -> None:
        self.module = module
        self.extra = extra
        super().__init__(
            (f"{what} " if what else "")
            + f"needs the '{extra}' extra ({module} is not installed): "
            f"pip install 'retrieval_lib[{extra}]'"
        )


def require(modules: Iterable[str], what: str) -> None:
    """Raise :class:`MissingExtraError` for the first of ``modules`` that is not installed.

    Nothing is imported (:func:`missing_modules`); the message names ``what`` and the
    extra to install, as the CLI does for a command.

    Examples
    --------
    >>> require(["json"], "this example")
    >>> EXTRA_OF_MODULE["no_such_module_xyz"] = "stats"
    >>> require(["no_such_module_xyz"], "this example")
    Traceback (most recent call last):
    ...
    retrieval_lib.lazylibs.MissingExtraError: this example needs the 'stats' extra (no_such_module_xyz is not installed): pip install 'retrieval_lib[stats]'
    >>> del EXTRA_OF_MODULE["no_such_module_xyz"]
    """
    for module in missing_modules(modules):
        raise MissingExtraError(module, EXTRA_OF_MODULE.get(module, "stats"), what)


def missing_extra(exc: ImportError) -> MissingExtraError | None:
    """The :class:`MissingExtraError` for a failed import of an optional library, else None.

    Examples
    --------
    >>> missing_extra(ModuleNotFoundError("No module named 'scipy'", name="scipy")).extra
    'stats'
    >>> missing_extra(ModuleNotFoundError("No module named 'numpy'", name="numpy")) is None
    True
    """
    top = (exc.name or "").split(".", 1)[0]
    extra = EXTRA_OF_MODULE.get(top)
    return MissingExtraError(top, extra) if extra is not None else None


def missing_modules(modules: Iterable[str]) -> list[str]:
    """Those of ``modules`` (top-level names) that are not installed, without importing any."""

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):  # a broken or half-imported package
            return True

    return [name for name in modules if absent(name)]


def _load(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        error = missing_extra(exc)
        if error is None:
            raise
        raise error from None


@functools.cache
def scipy_stats() -> ModuleType:
    """``scipy.stats`` (extra ``stats``)."""
    return _load("scipy.stats")


@functools.cache
def pingouin() -> ModuleType:
    """``pingouin`` (extra ``stats``)."""
    return _load("pingouin")


@functools.cache
def papermill() -> ModuleType:
    """``papermill`` (extra ``notebooks``)."""
    return _load("papermill")

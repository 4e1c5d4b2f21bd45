"""Command-line interface ``retrieval-lib``.

Each sub-command lives in its own module under :mod:`retrieval_lib.cli` (named after the
command, ``-`` written ``_``: ``trec_eval`` is ``trec-eval``) exposing
``register(subparsers) -> argparse.ArgumentParser`` and ``run(args) -> int``. Modules
import their heavy dependencies inside ``run`` so ``retrieval-lib --help`` and
``retrieval-lib normalize`` start fast.

Exit codes: 0 success, 1 failure (a :class:`~retrieval_lib.errors.RetrievalLibError`
or a failed check), 2 usage error (argparse: a missing required argument, an unknown
option, a value of the wrong form or out of range; or a
:class:`~retrieval_lib.errors.UsageError` raised by a command, such as ``report``
without a run folder). Every error is one line on stderr, never a traceback.

A command whose optional libraries are missing stops before doing any work, with one
line naming the extra that installs them (:data:`COMMAND_LIBRARIES`); an optional
library found missing later (another sub-command path) is reported the same way.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from retrieval_lib import __version__
from retrieval_lib.errors import RetrievalLibError, UsageError
from retrieval_lib.lazylibs import STATS_LIBRARIES

#: Sub-command modules, in the order ``--help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "retrieval_lib.cli.normalize",
    "retrieval_lib.cli.validate",
    "retrieval_lib.cli.evaluate",
    "retrieval_lib.cli.impact",
    "retrieval_lib.cli.report",
    "retrieval_lib.cli.run",
    "retrieval_lib.cli.study",
    "retrieval_lib.cli.demo",
    "retrieval_lib.cli.synth",
    "retrieval_lib.cli.kb",
    "retrieval_lib.cli.trec_eval",
    "retrieval_lib.cli.export_trec",
)


_NOTEBOOK_LIBRARIES: tuple[str, ...] = (
    "papermill",
    "nbformat",
    "nbconvert",
    "ipykernel",
    "matplotlib",
    "seaborn",
)

#: Optional libraries (top-level modules) each command needs, checked before it starts;
#: :data:`retrieval_lib.lazylibs.EXTRA_OF_MODULE` names the extra of each.
#: ``study`` needs what :func:`retrieval_lib.study.load` needs (the same rule for both).
COMMAND_LIBRARIES: dict[str, tuple[str, ...]] = {
    "impact": STATS_LIBRARIES,
    "report": (*STATS_LIBRARIES, *_NOTEBOOK_LIBRARIES),
    "run": (*STATS_LIBRARIES, *_NOTEBOOK_LIBRARIES),
    "study": STATS_LIBRARIES,  # its report's libraries: checked when it renders one
    "demo": (*STATS_LIBRARIES, *_NOTEBOOK_LIBRARIES),
}


def _missing_extras_message(command: str, modules: Sequence[str]) -> str:
    from retrieval_lib.lazylibs import EXTRA_OF_MODULE

    extras = sorted({EXTRA_OF_MODULE[m] for m in modules})
    named = " and ".join(f"'{e}'" for e in extras)
    plural = "extras" if len(extras) > 1 else "extra"
    return (
        f"retrieval-lib {command} needs the {named} {plural}: "
        f"pip install 'retrieval_lib[{','.join(extras)}]' "
        f"(not installed: {', '.join(modules)})"
    )


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line: the error and where the usage is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, sub in action.choices.items()
    }


def _unknown_arguments(
    parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: Sequence[str]
) -> None:
    """Exit 2 naming the arguments the command does not take, with "did you mean"."""
    from retrieval_lib.suggest import hint

    command = _subparsers(parser)[args.command]
    # a nested command (kb compare): its own options
    nested = _subparsers(command)
    chosen = next(
        (nested[v] for v in vars(args).values() if isinstance(v, str) and v in nested), None
    )
    target = chosen or command
    options = [s for action in target._actions for s in action.option_strings]
    described = " ".join(
        f"{word}{hint(word.split('=')[0], options)}" if word.startswith("-") else word
        for word in unknown
    )
    target.error(f"unrecognized arguments: {described}")


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every sub-command registered."""
    parser = _Parser(
        prog="retrieval-lib",
        description=(
            "Evaluate retrieval in coding-agent runs and RAG knowledge bases: "
            "normalise traces, compute metrics, relate them to outcomes, report."
        ),
    )
    parser.add_argument("--version", action="version", version=f"retrieval-lib {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        sub = module.register(subparsers)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    from retrieval_lib.lazylibs import MissingExtraError, missing_extra, missing_modules

    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unknown_arguments(parser, args, unknown)  # exits 2, as argparse does
    absent = missing_modules(COMMAND_LIBRARIES.get(args.command, ()))
    if absent:
        print(_missing_extras_message(args.command, absent), file=sys.stderr)
        return 1
    try:
        return int(args._run(args) or 0)
    except (MissingExtraError, ImportError) as exc:
        error = exc if isinstance(exc, MissingExtraError) else missing_extra(exc)
        if error is None:
            raise
        print(_missing_extras_message(args.command, [error.module]), file=sys.stderr)
        return 1
    except RetrievalLibError as exc:
        print(f"retrieval-lib {args.command}: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    except OSError as exc:  # an unwritable --out, a folder given where a file is expected
        where = f" {exc.filename!r}" if exc.filename else ""
        print(f"retrieval-lib {args.command}: error:{where} {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

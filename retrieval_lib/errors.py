"""Exception hierarchy of retrieval_lib.

Every error the library raises on bad input derives from :class:`RetrievalLibError`,
so the CLI can turn it into a one-line message and exit code 1 instead of a traceback.
"""

from __future__ import annotations


class RetrievalLibError(Exception):
    """Base class of every error raised deliberately by retrieval_lib."""


class InputError(RetrievalLibError):
    """An input file or folder is missing, unreadable or malformed."""


class SchemaError(RetrievalLibError):
    """A document does not validate against its JSON Schema."""


class UnsupportedSchemaVersion(SchemaError):
    """A document declares a major schema version this package cannot read."""


class GroundTruthError(InputError):
    """A task definition's ground truth is malformed."""


class MetricError(RetrievalLibError):
    """A metric name or parameter is invalid, or its inputs are inconsistent."""


class StatisticsError(RetrievalLibError):
    """A statistical analysis cannot be carried out as requested."""


class KBError(RetrievalLibError):
    """An error of the RAG knowledge-base evaluation store or its inputs."""


class ReportError(RetrievalLibError):
    """A notebook report could not be parameterised, executed or rendered."""


class UnsafePathError(RetrievalLibError):
    """A computed output path would escape its output folder."""


class UsageError(RetrievalLibError):
    """A command was called wrongly (a missing argument, options that do not go together):
    the CLI reports it in one line with exit code 2, as argparse does its own."""

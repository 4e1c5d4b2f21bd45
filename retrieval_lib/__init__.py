"""retrieval_lib: retrieval evaluation for coding-agent traces and RAG knowledge bases.

The package is layered; data flows one way::

    traces -> events -> metrics -> stats -> tables/figures -> notebooks/reports

Importing the package is cheap: heavy dependencies (scipy, matplotlib, papermill)
are imported inside the functions that need them.
"""

from __future__ import annotations

__version__ = "0.1.0"

#: Version of the retrieval-event document this package writes.
EVENTS_SCHEMA_VERSION = "1.2"

__all__ = ["__version__", "EVENTS_SCHEMA_VERSION"]

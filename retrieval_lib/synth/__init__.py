"""Synthetic benchmark runs in the real Harbor / Claude Code layout.

:func:`generate_runs` writes task definitions, run folders (batch and archived job
layouts) with ``claude-code.txt`` transcripts and ATIF ``trajectory.json`` files, and a
manifest of the facts every trial's files contain. The bundled ``examples/`` folder is
its output for ``retrieval-lib synth --out examples --scale example``.
"""

from retrieval_lib.synth.generator import SCALES, generate_runs
from retrieval_lib.synth.manifest import (
    CallFacts,
    RunFacts,
    SynthManifest,
    TaskFacts,
    TrialFacts,
)

__all__ = [
    "SCALES",
    "CallFacts",
    "RunFacts",
    "SynthManifest",
    "TaskFacts",
    "TrialFacts",
    "generate_runs",
]

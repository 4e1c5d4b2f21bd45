"""Definitions the knowledge-base evaluation shares: cut-offs, match modes, null reasons.

It imports nothing of the package, so every kb module can import it without a cycle.

Examples
--------
>>> K_VALUES, MRR_CUTOFF
((1, 3, 5, 10), 10)
>>> bool(CITATION_MARKER.fullmatch("[#2]")), bool(CITATION_MARKER.fullmatch("[2]"))
(True, False)
"""

from __future__ import annotations

import re

__all__ = [
    "K_VALUES",
    "MRR_CUTOFF",
    "CITATION_MARKER",
    "MATCH_EXACT",
    "MATCH_FALLBACK",
    "MATCH_MODES",
    "STORAGE_DIGITS",
    "REASON_NO_SPANS",
    "REASON_NOT_IN_INVENTORY",
    "REASON_NO_INVENTORY_MATCH",
]

#: The k of ``hit_at_k`` and ``recall_at_k_doc``.
K_VALUES: tuple[int, ...] = (1, 3, 5, 10)
#: ``mrr`` looks at the top 10 hits; so do the compare's per-query ranks.
MRR_CUTOFF = 10
#: A citation marker is strictly ``[#<n>]`` (n >= 1), as the seed's tightened regex:
#: ``[1]``, prose or code-like brackets are not citations.
CITATION_MARKER = re.compile(r"\[#[1-9][0-9]*\]")
#: Chunk matching by ``chunk_id`` (both runs chunked alike).
MATCH_EXACT = "exact"
#: Chunk matching by document and span overlap (runs chunked differently).
MATCH_FALLBACK = "fallback_doc_span"
MATCH_MODES = (MATCH_EXACT, MATCH_FALLBACK)
#: Decimals kept in storage and printing (computation keeps full precision).
STORAGE_DIGITS = 4
#: Why a query's chunk-level values are not computable (``null_reasons``, compare notes).
REASON_NO_SPANS = "no spans known for its expected chunks"
REASON_NOT_IN_INVENTORY = (
    "none of its expected chunks is in the run's chunk inventory (another chunker version?)"
)
#: A run ingested without a chunk inventory whose hits name none of the golden set's
#: expected chunk ids: its chunk ids cannot be matched, so hit@k and MRR are missing, not 0.
REASON_NO_INVENTORY_MATCH = (
    "no chunk inventory was ingested and no hit of the run names an expected chunk id of "
    "the golden set, so its chunk ids cannot be matched (another chunker version? "
    "ingest the run with --chunks)"
)

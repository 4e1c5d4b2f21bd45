"""Suggestions ("did you mean") for mistyped names (parameters, metrics, configs).

Examples
--------
>>> did_you_mean("nDGC@10", ["file.nDCG@10", "file.AP", "read.recall"])
['file.nDCG@10']
>>> hint("Alpha", ["alpha", "seed"])
" (did you mean 'alpha'?)"
>>> hint("zzz", ["alpha", "seed"])
''
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "hint"]


def did_you_mean(name: str, candidates: Iterable[str], *, n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` closest to ``name`` (best first; none if nothing is close).

    The comparison ignores case; a name without a stage prefix (``nDGC@10``) is also
    compared with the part of each candidate after its first ``.`` (``file.nDCG@10``).
    A match apart from case is the only suggestion.
    """
    names = list(dict.fromkeys(str(c) for c in candidates))
    wanted = str(name).lower()
    exact = [c for c in names if c.lower() == wanted]
    if exact:
        return exact[:n]
    scores: dict[str, float] = {}
    for candidate in names:
        forms = [candidate.lower()]
        if "." not in wanted and "." in candidate:
            forms.append(candidate.partition(".")[2].lower())
        scores[candidate] = max(
            difflib.SequenceMatcher(None, wanted, form).ratio() for form in forms
        )
    close = sorted((c for c, s in scores.items() if s >= 0.75), key=lambda c: (-scores[c], c))
    return close[:n]


def hint(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` or ``''``: a suffix for an error message about ``name``."""
    found = did_you_mean(name, candidates)
    if not found:
        return ""
    return f" (did you mean {' or '.join(repr(f) for f in found)}?)"

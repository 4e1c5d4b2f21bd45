"""Multiple-testing corrections (Holm, Benjamini–Hochberg): pingouin's ``multicomp``.

A p-value that is NaN (a test that was not computable) is not part of the family: it
stays NaN and does not count towards the number of tests ``m`` (pingouin's rule too).

Examples
--------
>>> holm([0.01, 0.04, 0.03]).round(4).tolist()
[0.03, 0.06, 0.06]
>>> benjamini_hochberg([0.01, 0.04, 0.03, float("nan")]).round(4).tolist()
[0.03, 0.04, 0.04, nan]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retrieval_lib import lazylibs

__all__ = ["holm", "benjamini_hochberg"]


def _multicomp(p_values: Sequence[float] | np.ndarray, method: str) -> np.ndarray:
    p = np.asarray(p_values, dtype=float).reshape(-1)
    if p.size == 0:
        return p
    _, adjusted = lazylibs.pingouin().multicomp(p, method=method)
    return np.asarray(adjusted, dtype=float)


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error rate).

    With the non-NaN p-values sorted ascending, ``p_(1) <= ... <= p_(m)``, the adjusted
    value is ``max_{j<=i} min(1, (m - j + 1) * p_(j))``, in the input order; NaN entries
    stay NaN (``pingouin.multicomp(method="holm")``).

    Examples
    --------
    >>> holm([0.01, 0.02]).tolist()
    [0.02, 0.02]
    """
    return _multicomp(p_values, "holm")


def benjamini_hochberg(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate, "q-values").

    With the non-NaN p-values sorted ascending, the adjusted value of rank ``i`` is
    ``min_{j>=i} min(1, m / j * p_(j))``, in the input order; NaN entries stay NaN
    (``pingouin.multicomp(method="fdr_bh")``).

    Examples
    --------
    >>> benjamini_hochberg([0.01, 0.02, 0.03]).tolist()
    [0.03, 0.03, 0.03]
    """
    return _multicomp(p_values, "fdr_bh")

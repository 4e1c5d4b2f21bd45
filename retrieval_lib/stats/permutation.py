"""Permutation p-values of an association, exact for small samples, seeded Monte Carlo above.

Every association the library tests (Pearson's r, Spearman's rho, the point-biserial r and
the Mann–Whitney AUC) is, for fixed marginal values, an increasing function of the
cross product ``S = sum((x - mean(x)) * y)``: Pearson's r is ``S / (|x - mean x| * |y -
mean y|)`` and both norms stay the same whatever the pairing; Spearman's rho is Pearson's r
of the (average) ranks; the Mann–Whitney U of a 0/1 ``y`` is ``sum(rank(x) * y) -
n1 (n1 + 1) / 2``. The null hypothesis "no association" makes every pairing of the ``x``
values with the ``y`` values equally likely, so the null distribution of ``S`` over the
pairings gives the p-value of every one of these statistics (on ranks where the
statistic is a rank statistic; ties are conditioned on, as they were observed).

:func:`permutation_p` enumerates all ``n!`` pairings up to :data:`EXACT_MAX_N` (8), draws
:data:`N_RESAMPLES` (10,000) seeded random pairings up to :data:`MONTE_CARLO_MAX_N` (100)
(the same ``n`` and seed give the same pairings and p-value), and leaves larger samples
to the caller's asymptotic p-value, accurate at that size. The two-sided p-value is
scipy's (``scipy.stats.permutation_test(..., permutation_type="pairings")``):
``min(1, 2 * min(P(S <= s), P(S >= s)))``; the Monte Carlo estimate counts the observed
pairing in (``(k + 1) / (B + 1)``, never 0). Comparisons use a tolerance of ``1e-9``
relative to the scale of ``S``, so floating-point noise does not split equal values.

Examples
--------
>>> permutation_p([1, 2, 3, 4, 5], [2, 4, 6, 8, 10])
(0.016666666666666666, 'exact')
>>> p, method = permutation_p(list(range(12)), [0, 1, 3, 2, 4, 6, 5, 7, 9, 8, 11, 10])
>>> method, p < 0.001
('monte_carlo', True)
>>> permutation_p(list(range(101)), list(range(101)))
(nan, None)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

from retrieval_lib.errors import StatisticsError

__all__ = [
    "EXACT_MAX_N",
    "MONTE_CARLO_MAX_N",
    "N_RESAMPLES",
    "permutation_p",
]

#: Largest n whose p-value enumerates all n! pairings (8! = 40,320).
EXACT_MAX_N = 8
#: Largest n given a Monte Carlo permutation p-value; above it the asymptotic p is used.
MONTE_CARLO_MAX_N = 100
#: Random pairings drawn for a Monte Carlo p-value.
N_RESAMPLES = 10_000

_REL_TOL = 1e-9


@functools.lru_cache(maxsize=16)
def _all_pairings(n: int) -> np.ndarray:
    """Every permutation of ``range(n)``, one per row (read-only, cached)."""
    out = np.array(list(itertools.permutations(range(n))), dtype=np.intp).reshape(-1, n)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _random_pairings(n: int, n_resamples: int, seed: int) -> np.ndarray:
    """``n_resamples`` random permutations of ``range(n)`` from ``PCG64(seed)`` (cached).

    32-bit indices: at most 8 cached draws of 10,000 × 100 take 32 MB.
    """
    rng = np.random.Generator(np.random.PCG64(seed))
    out = rng.permuted(np.tile(np.arange(n, dtype=np.int32), (n_resamples, 1)), axis=1)
    out.setflags(write=False)
    return out


_GATHERED: dict[tuple[bytes, int, int, int], np.ndarray] = {}  # the last y under its pairings


def _permuted(ys: np.ndarray, pairings: np.ndarray, key: tuple[bytes, int, int, int]) -> np.ndarray:
    """``ys[pairings]``, kept for the next call with the same ``ys``.

    :func:`~retrieval_lib.stats.correlation.correlate_metrics` tests every metric against
    one outcome in a row: the gather of the outcome under the pairings (the costly part) is
    then done once per outcome, not once per metric.
    """
    hit = _GATHERED.get(key)
    if hit is None:
        _GATHERED.clear()
        hit = _GATHERED[key] = ys[pairings]
    return hit


def permutation_p(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    exact_max_n: int = EXACT_MAX_N,
    monte_carlo_max_n: int = MONTE_CARLO_MAX_N,
) -> tuple[float, str | None]:
    """Two-sided permutation p-value of the association of ``x`` and ``y``.

    Parameters
    ----------
    x, y : array-like of float
        Paired finite values (ranks for a rank statistic, see the module notes).
    seed : int
        Seed of the Monte Carlo pairings.
    n_resamples : int
        Random pairings of the Monte Carlo test (at least 1,000).
    exact_max_n : int
        Largest n enumerated exactly (at most 10: 10! = 3.6 million pairings).
    monte_carlo_max_n : int
        Largest n given a Monte Carlo p-value.

    Returns
    -------
    (float, str or None)
        The p-value and ``"exact"`` or ``"monte_carlo"``; ``(nan, None)`` above
        ``monte_carlo_max_n`` (the caller's asymptotic p applies).

    Raises
    ------
    StatisticsError
        Samples of different lengths or non-finite values, ``exact_max_n > 10`` or
        ``n_resamples < 1000``.
    """
    xs = np.asarray(x, dtype=float).reshape(-1)
    ys = np.asarray(y, dtype=float).reshape(-1)
    if xs.shape != ys.shape:
        raise StatisticsError(f"paired samples differ in length: {xs.size} vs {ys.size}")
    if not (np.isfinite(xs).all() and np.isfinite(ys).all()):
        raise StatisticsError("permutation p-values need finite values (drop missing pairs)")
    if exact_max_n > 10:
        raise StatisticsError(f"exact_max_n={exact_max_n} would enumerate more than 10! pairings")
    if n_resamples < 1000:
        raise StatisticsError(f"n_resamples must be at least 1000, not {n_resamples}")
    n = xs.size
    if n > monte_carlo_max_n:
        return math.nan, None
    centred = xs - xs.mean()
    observed = float(centred @ ys)
    tolerance = _REL_TOL * max(float(np.abs(centred).sum() * np.abs(ys).max()), 1e-300)
    if n <= exact_max_n:
        key = (ys.tobytes(), n, 0, 0)
        # einsum, not BLAS: a threaded matmul is slower than this on a busy machine
        null = np.einsum("ij,j->i", _permuted(ys, _all_pairings(n), key), centred)
        less = np.count_nonzero(null <= observed + tolerance)
        greater = np.count_nonzero(null >= observed - tolerance)
        return float(min(1.0, 2.0 * min(less, greater) / null.size)), "exact"
    key = (ys.tobytes(), n, n_resamples, seed)
    permuted = _permuted(ys, _random_pairings(n, n_resamples, seed), key)
    null = np.einsum("ij,j->i", permuted, centred)
    less = np.count_nonzero(null <= observed + tolerance) + 1
    greater = np.count_nonzero(null >= observed - tolerance) + 1
    return float(min(1.0, 2.0 * min(less, greater) / (n_resamples + 1))), "monte_carlo"

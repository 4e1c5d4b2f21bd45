"""Intervals of a mean: the t interval and the library's one bootstrap of a mean.

:func:`t_mean_ci` (the default CI of a mean paired delta), :func:`bootstrap_mean_ci`
(percentile or scipy's BCa, seeded) and :func:`bootstrap_mean_cis` (several columns of one
length, drawn once); used by :mod:`~retrieval_lib.stats.means`,
:mod:`~retrieval_lib.stats.clustered`, :mod:`~retrieval_lib.stats.paired_tests`, the
reports and the kb compare.

Examples
--------
>>> bootstrap_mean_ci([2.0, 2.0, 2.0], n_boot=50)
(2.0, 2.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from retrieval_lib import lazylibs
from retrieval_lib.errors import StatisticsError

__all__ = ["bootstrap_mean_ci", "bootstrap_mean_cis", "t_mean_ci"]

_BOOT_CELLS = 4_000_000  # bootstrap index cells drawn per chunk (bounds memory)


def t_mean_ci(values: Sequence[float] | np.ndarray, *, alpha: float = 0.05) -> tuple[float, float]:
    """Student-t ``1 - alpha`` CI of the mean: ``mean ± t(1 - alpha/2, n-1) * sd / sqrt(n)``.

    Parameters
    ----------
    values : array-like of float
        Finite observations (one per task), at least 2.
    alpha : float
        One minus the confidence level.

    Returns
    -------
    (float, float)
        Lower and upper bound; zero-variance values give ``(mean, mean)``.

    Raises
    ------
    StatisticsError
        Fewer than 2 values, a non-finite value or ``alpha`` outside (0, 1).

    Examples
    --------
    >>> low, high = t_mean_ci([1.0, 2.0, 3.0])  # 2 ± 4.303 * 1 / sqrt(3)
    >>> round(low, 4), round(high, 4)
    (-0.4841, 4.4841)
    """
    data = np.asarray(values, dtype=float).reshape(-1)
    if not 0.0 < alpha < 1.0:
        raise StatisticsError(f"alpha must be between 0 and 1, not {alpha}")
    if data.size < 2:
        raise StatisticsError(f"a t interval needs at least 2 values, not {data.size}")
    if not np.isfinite(data).all():
        raise StatisticsError("t-interval values must be finite (drop missing values first)")
    stats = lazylibs.scipy_stats()
    mean = float(data.mean())
    half = float(stats.t.ppf(1.0 - alpha / 2.0, data.size - 1)) * float(data.std(ddof=1))
    half /= math.sqrt(data.size)
    return mean - half, mean + half


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 10000,
    seed: int = 0,
    alpha: float = 0.05,
    method: str = "percentile",
) -> tuple[float, float]:
    """Bootstrap ``1 - alpha`` CI of the mean, resampling values with replacement.

    The one bootstrap of a mean in retrieval_lib: paired deltas here and the per-config
    means of the reports (:func:`retrieval_lib.stats.means.mean_ci`) both use it.

    Parameters
    ----------
    values : array-like of float
        Finite observations (the caller drops missing values; NaN is refused).
    n_boot : int
        Resamples; each draws ``len(values)`` indices from
        ``numpy.random.Generator(PCG64(seed))`` (the stream of
        ``numpy.random.default_rng(seed)``), in chunks that bound memory.
    seed : int
        Generator seed.
    alpha : float
        The interval holds the ``alpha/2`` and ``1 - alpha/2`` quantiles (linear
        interpolation) of the bootstrap means.
    method : {"percentile", "bca"}
        ``"percentile"`` (default): the quantiles above. ``"bca"``: the bias-corrected and
        accelerated interval of ``scipy.stats.bootstrap(method="BCa", n_resamples=n_boot,
        rng=numpy.random.default_rng(seed))``, closer to nominal coverage at small n;
        constant values give ``(mean, mean)``.

    Returns
    -------
    (float, float)
        Lower and upper bound.

    Raises
    ------
    StatisticsError
        No values, a non-finite value, ``n_boot < 1``, ``alpha`` outside (0, 1) or an
        unknown ``method``.

    Examples
    --------
    >>> bootstrap_mean_ci([2.0, 2.0, 2.0], n_boot=50)
    (2.0, 2.0)
    >>> low, high = bootstrap_mean_ci([0.0, 1.0, 0.0, 1.0], n_boot=2000, seed=1)
    >>> 0.0 <= low < 0.5 < high <= 1.0
    True
    """
    if method not in ("percentile", "bca"):
        raise StatisticsError(f"method must be 'percentile' or 'bca', not {method!r}")
    if method == "percentile":
        return bootstrap_mean_cis([values], n_boot=n_boot, seed=seed, alpha=alpha)[0]
    data = _checked([values], n_boot, alpha)[0]
    if np.unique(data).size == 1:
        return float(data[0]), float(data[0])
    res = lazylibs.scipy_stats().bootstrap(
        (data,),
        np.mean,
        n_resamples=n_boot,
        confidence_level=1.0 - alpha,
        method="BCa",
        rng=np.random.default_rng(seed),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def bootstrap_mean_cis(
    columns: Sequence[Sequence[float] | np.ndarray],
    *,
    n_boot: int = 10000,
    seed: int = 0,
    alpha: float = 0.05,
) -> list[tuple[float, float]]:
    """:func:`bootstrap_mean_ci` (percentile) of several columns of one length, drawn once.

    The resampled indices depend only on the seed, the length and ``n_boot``, so columns of
    one length share them: each interval equals its own :func:`bootstrap_mean_ci` call, for
    the cost of one draw (e.g. a group's reward and pass rate over the same tasks).

    Raises
    ------
    StatisticsError
        As :func:`bootstrap_mean_ci`, or columns of different lengths.

    Examples
    --------
    >>> a, b = [0.0, 1.0, 1.0, 0.0], [0.5, 0.5, 1.0, 0.0]
    >>> bootstrap_mean_cis([a, b], n_boot=300, seed=2) == [
    ...     bootstrap_mean_ci(a, n_boot=300, seed=2), bootstrap_mean_ci(b, n_boot=300, seed=2)]
    True
    """
    if len(columns) == 0:
        return []
    data = _checked(columns, n_boot, alpha)
    n = data[0].size
    rng = np.random.Generator(np.random.PCG64(seed))
    means = np.empty((len(data), n_boot))
    chunk = max(1, _BOOT_CELLS // n)
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        for j, values in enumerate(data):
            means[j, start:stop] = values[idx].mean(axis=1)
    out = []
    for row in means:
        low, high = np.quantile(row, [alpha / 2.0, 1.0 - alpha / 2.0])
        out.append((float(low), float(high)))
    return out


def _checked(
    columns: Sequence[Sequence[float] | np.ndarray], n_boot: int, alpha: float
) -> list[np.ndarray]:
    """The columns as float arrays, refused unless finite, non-empty and of one length."""
    data = [np.asarray(c, dtype=float).reshape(-1) for c in columns]
    if n_boot < 1:
        raise StatisticsError(f"n_boot must be at least 1, not {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise StatisticsError(f"alpha must be between 0 and 1, not {alpha}")
    if any(d.size != data[0].size for d in data):
        raise StatisticsError("bootstrap_mean_cis: the columns must have one length")
    if data[0].size == 0:
        raise StatisticsError("no values to bootstrap")
    if not all(np.isfinite(d).all() for d in data):
        raise StatisticsError("bootstrap values must be finite (drop missing values first)")
    return data

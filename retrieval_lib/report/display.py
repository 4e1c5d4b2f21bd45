"""Readable versions of the library's tables, for showing in a report (no computation).

The analysis tables keep one number per column (``reward_mean``, ``reward_ci_low``,
``reward_ci_high``) so they can be written, tested and joined. A reader wants
``reward: 0.67 [0.33, 1.00]``: :func:`readable` merges each mean with its interval into one
text column and moves columns that hold one value in every row into a caption.

Examples
--------
>>> import pandas as pd
>>> t = pd.DataFrame({"pair": ["b vs t"] * 2, "metric": ["x", "y"], "n": [3, 0],
...     "mean": [0.5, float("nan")], "ci_low": [0.25, float("nan")], "ci_high": [0.75, float("nan")]})
>>> shown, caption = readable(t, constant=["pair"])
>>> shown.to_dict("list"), caption
({'metric': ['x', 'y'], 'n': [3, 0], 'mean [95% CI]': ['0.500 [0.250, 0.750]', '']}, 'pair: b vs t')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pandas as pd

__all__ = ["ci_text", "readable"]


def ci_text(mean: Any, low: Any, high: Any, digits: int = 3) -> str:
    """``mean [low, high]``; the interval is left out when missing, everything when the mean is.

    Examples
    --------
    >>> ci_text(0.5, 0.2, 0.8, 2), ci_text(1.0, float("nan"), float("nan"), 2), ci_text(None, 0, 1)
    ('0.50 [0.20, 0.80]', '1.00', '')
    """

    def missing(value: Any) -> bool:
        return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))

    if missing(mean):
        return ""
    text = f"{float(mean):.{digits}f}"
    if not missing(low) and not missing(high):
        text += f" [{float(low):.{digits}f}, {float(high):.{digits}f}]"
    return text


def _ci_groups(columns: Sequence[str]) -> list[tuple[str, str, str, str]]:
    """``(mean column, low, high, label)`` for every mean with both interval columns."""
    names = set(columns)
    groups = []
    for column in columns:
        if column in ("mean", "mean_delta"):
            low, high, label = "ci_low", "ci_high", column.replace("_", " ")
        elif column.endswith("_mean"):
            stem = column.removesuffix("_mean")
            low, high, label = f"{stem}_ci_low", f"{stem}_ci_high", stem
        else:
            continue
        if low in names and high in names:
            groups.append((column, low, high, label))
    return groups


def readable(
    frame: pd.DataFrame,
    *,
    constant: Sequence[str] = (),
    digits: int = 3,
    level: str = "95% CI",
) -> tuple[pd.DataFrame, str]:
    """A display copy of ``frame`` and a caption.

    Each ``<x>_mean`` (or ``mean`` / ``mean_delta``) with ``<x>_ci_low`` / ``<x>_ci_high``
    becomes one text column ``<x> [level]``; columns named in ``constant`` that hold a
    single value are dropped and named in the caption (``name: value``); missing values
    show as empty cells. The row order and every other column are kept.
    """
    shown = frame.copy()
    captions = []
    for column in constant:
        if column in shown.columns and shown[column].astype(str).nunique() <= 1 and len(shown):
            captions.append(f"{column}: {shown[column].iloc[0]}")
            shown = shown.drop(columns=column)
    for mean, low, high, label in _ci_groups(list(shown.columns)):
        position = list(shown.columns).index(mean)
        text = [
            ci_text(m, lo, hi, digits)
            for m, lo, hi in zip(shown[mean], shown[low], shown[high], strict=True)
        ]
        shown = shown.drop(columns=[mean, low, high])
        shown.insert(position, f"{label} [{level}]", text)
    return shown.reset_index(drop=True), "; ".join(captions)

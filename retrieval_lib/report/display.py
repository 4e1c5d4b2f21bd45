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

__all__ = ["ci_text", "n_label", "number_text", "p_text", "readable", "tool_table"]


def number_text(value: Any, digits: int = 3) -> str:
    """A number as a reader wants it: thousands whole (``12,345``), others to ``digits``.

    Examples
    --------
    >>> number_text(378816.333), number_text(0.0901), number_text(None)
    ('378,816', '0.090', '')
    """
    if _missing(value):
        return ""
    number = float(value)
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{digits}f}"


def p_text(value: Any, digits: int = 3) -> str:
    """A p-value as a reader wants it: below ``10**-digits`` it is ``"< 0.001"``, never 0.000.

    Examples
    --------
    >>> p_text(0.0004), p_text(1.4e-24), p_text(0.0167), p_text(1.0), p_text(None)
    ('< 0.001', '< 0.001', '0.017', '1.000', '')
    >>> p_text(0.0004, digits=4)
    '0.0004'
    """
    if _missing(value):
        return ""
    number = float(value)
    floor = 10.0**-digits
    if number < floor:
        return f"< {floor:.{digits}f}"
    return f"{number:.{digits}f}"


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def n_label(n: Any, trials: Any = None) -> str:
    """An ``n`` as a reader reads it: ``n=4``, or tasks with the trials beside them.

    Examples
    --------
    >>> n_label(4), n_label(40, 209), n_label(1, 1), n_label(None)
    ('n=4', '40 tasks, 209 trials', '1 task, 1 trial', '')
    """
    if _missing(n):
        return ""
    if _missing(trials):
        return f"n={int(n)}"
    from retrieval_lib.stats.clustered import n_text

    return n_text(n, trials)


def ci_text(
    mean: Any, low: Any, high: Any, digits: int = 3, n: Any = None, trials: Any = None
) -> str:
    """``mean [low, high]`` and ``(n=…)`` when given; the interval is left out when missing,
    everything when the mean is (but ``n=0`` is still said). With ``trials``, ``n`` counts
    tasks and is shown as ``(40 tasks, 209 trials)``.

    Examples
    --------
    >>> ci_text(0.5, 0.2, 0.8, 2), ci_text(1.0, float("nan"), float("nan"), 2), ci_text(None, 0, 1)
    ('0.50 [0.20, 0.80]', '1.00', '')
    >>> ci_text(0.5, 0.2, 0.8, 2, n=4), ci_text(None, None, None, n=0)
    ('0.50 [0.20, 0.80] (n=4)', 'n=0')
    >>> ci_text(0.5, 0.2, 0.8, 2, n=40, trials=209)
    '0.50 [0.20, 0.80] (40 tasks, 209 trials)'
    """
    count = n_label(n, trials)
    if _missing(mean):
        return count
    text = number_text(mean, digits)
    if not _missing(low) and not _missing(high):
        text += f" [{number_text(low, digits)}, {number_text(high, digits)}]"
    return f"{text} ({count})" if count else text


def _ci_groups(
    columns: Sequence[str],
) -> list[tuple[str, str | None, str | None, str | None, str | None, str]]:
    """``(mean, low, high, n, trials, label)`` column names of every mean (interval, n and
    trials optional)."""
    names = set(columns)
    groups = []
    for column in columns:
        n: str | None
        if column in ("mean", "mean_delta"):
            # a plain ``n`` column stays: it counts the row, not only this mean
            low, high, n, label = "ci_low", "ci_high", None, column.replace("_", " ")
        elif column.endswith("_mean"):
            stem = column.removesuffix("_mean")
            low, high, n, label = f"{stem}_ci_low", f"{stem}_ci_high", f"{stem}_n", stem
        else:
            continue
        has_ci = low in names and high in names
        has_n = n is not None and n in names
        trials = f"{n}_trials" if n is not None else None
        has_trials = has_n and trials in names
        if has_ci or has_n:
            groups.append(
                (
                    column,
                    low if has_ci else None,
                    high if has_ci else None,
                    n if has_n else None,
                    trials if has_trials else None,
                    label,
                )
            )
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
    and/or ``<x>_n`` becomes one text column: ``<x> [level]`` holding ``mean [low, high]
    (n=…)`` when there is an interval, ``<x>`` holding ``mean (n=…)`` otherwise; with
    ``<x>_n_trials`` the n counts tasks and reads ``(40 tasks, 209 trials)`` (and
    ``<x>_n_tasks`` is dropped). A table with ``n_tasks`` and ``n_trials`` columns shows
    them as one ``n`` column (``40 tasks, 209 trials``) in place of ``n``. Columns named in
    ``constant`` that hold a single value are dropped and named in the caption (``name:
    value``); missing values show as empty cells. Row order and every other column are
    kept.

    Examples
    --------
    >>> t = pd.DataFrame({"metric": ["x"], "n": [2], "n_tasks": [2], "n_trials": [5],
    ...     "mean": [0.5], "ci_low": [0.25], "ci_high": [0.75]})
    >>> readable(t)[0].to_dict("list")
    {'metric': ['x'], 'n': ['2 tasks, 5 trials'], 'mean [95% CI]': ['0.500 [0.250, 0.750]']}
    """
    shown = frame.copy()
    captions = []
    for column in constant:
        if column in shown.columns and shown[column].astype(str).nunique() <= 1 and len(shown):
            captions.append(f"{column}: {shown[column].iloc[0]}")
            shown = shown.drop(columns=column)
    if {"n_tasks", "n_trials"} <= set(shown.columns):
        counts = [n_label(k, t) for k, t in zip(shown["n_tasks"], shown["n_trials"], strict=True)]
        anchor = "n" if "n" in shown.columns else "n_tasks"
        position = list(shown.columns).index(anchor)
        shown = shown.drop(columns=[c for c in ("n", "n_tasks", "n_trials") if c in shown])
        position = min(position, len(shown.columns))
        shown.insert(position, "n", counts)
    for mean, low, high, n, trials, label in _ci_groups(list(shown.columns)):
        dropped = {c for c in (mean, low, high, n, trials) if c}
        if n is not None and f"{n}_tasks" in shown.columns and trials:
            dropped.add(f"{n}_tasks")
        before = list(shown.columns)[: list(shown.columns).index(mean)]
        position = len([c for c in before if c not in dropped])
        empty = [None] * len(shown)
        text = [
            ci_text(m, lo, hi, digits, count, k)
            for m, lo, hi, count, k in zip(
                shown[mean],
                shown[low] if low else empty,
                shown[high] if high else empty,
                shown[n] if n else empty,
                shown[trials] if trials else empty,
                strict=True,
            )
        ]
        shown = shown.drop(columns=sorted(dropped))
        shown.insert(position, f"{label} [{level}]" if low else label, text)
    return shown.reset_index(drop=True), "; ".join(captions)


def tool_table(tools: pd.DataFrame) -> pd.DataFrame:
    """The tool-value table (:func:`retrieval_lib.study.analysis.tool_value`) as a reader
    reads it: calls, the ground-truth calls as ``k of n (share)``, files found first, and
    the attributed cost per call with its n.

    Examples
    --------
    >>> t = pd.DataFrame({"tool": ["Read"], "tool_category": ["file_read"], "calls": [4],
    ...     "trials": [2], "failed_calls": [0], "calls_with_ground_truth": [4],
    ...     "surfaced_ground_truth_calls": [3], "share_surfaced_ground_truth": [0.75],
    ...     "ground_truth_files_first_found": [2], "tokens_n": [4], "tokens_per_call": [1500.0],
    ...     "seconds_n": [0], "seconds_per_call": [float("nan")]})
    >>> row = tool_table(t).iloc[0]
    >>> row["surfaced ground truth"], row["tokens per call"], row["seconds per call"]
    ('3 of 4 (0.75)', '1,500 (n=4)', 'n=0')
    """
    keys = [c for c in ("config_family", "is_mcp", "tool", "tool_category") if c in tools.columns]
    out = tools[keys + ["calls", "trials", "failed_calls"]].copy()
    out["surfaced ground truth"] = [
        f"{int(k)} of {int(n)} ({share:.2f})" if n else "no call with ground truth"
        for k, n, share in zip(
            tools["surfaced_ground_truth_calls"],
            tools["calls_with_ground_truth"],
            tools["share_surfaced_ground_truth"],
            strict=True,
        )
    ]
    out["ground-truth files found first"] = tools["ground_truth_files_first_found"]
    out["tokens per call"] = [
        ci_text(m, None, None, 0, n)
        for m, n in zip(tools["tokens_per_call"], tools["tokens_n"], strict=True)
    ]
    out["seconds per call"] = [
        ci_text(m, None, None, 1, n)
        for m, n in zip(tools["seconds_per_call"], tools["seconds_n"], strict=True)
    ]
    return out.reset_index(drop=True)

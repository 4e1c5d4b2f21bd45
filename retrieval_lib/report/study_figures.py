"""Figures of the study report (PNG, Agg), drawn from the tables of :mod:`retrieval_lib.study`.

Each function returns a :class:`matplotlib.figure.Figure` or ``None`` when there is
nothing to draw (the notebook then says why); :func:`retrieval_lib.report.figures.show`
displays either. No number is computed here beyond placing what the tables hold.

Examples
--------
>>> import pandas as pd
>>> from retrieval_lib.report.figures import png
>>> board = pd.DataFrame({"model": ["m"], "config_family": ["b"], "reward_n": [3],
...     "reward_mean": [0.5], "reward_ci_low": [0.2], "reward_ci_high": [0.8],
...     "pass_n": [3], "pass_mean": [0.3], "pass_ci_low": [0.0], "pass_ci_high": [0.7]})
>>> png(plot_leaderboard(board))[:4] == b"\\x89PNG"
True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from retrieval_lib.report.display import n_label
from retrieval_lib.report.figures import colours_for, error_bars, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "CATEGORY_MARKERS",
    "plot_leaderboard",
    "plot_scatter_fits",
    "plot_tiers",
    "plot_timelines",
    "plot_tool_value",
]

#: Marker of each tool category in the timelines.
CATEGORY_MARKERS: dict[str, str] = {
    "file_read": "o",
    "file_search": "s",
    "code_search": "D",
    "symbol_navigation": "^",
    "commit_search": "v",
    "deep_search": "P",
    "file_write": "X",
    "other": ".",
}
_MAX_TIMELINE_FILES = 28


def plot_leaderboard(board: pd.DataFrame) -> Figure | None:
    """Mean reward and pass rate per model × config family, with bootstrap CIs and n."""
    data = board[board["reward_n"].fillna(0) > 0]
    if data.empty:
        return None
    labels = [f"{m}\n{f}" for m, f in zip(data["model"], data["config_family"], strict=True)]
    fig, axes = new_figure(0.55 * len(data) + 1.6, ncols=2, sharey=True)
    y = np.arange(len(data))
    for ax, prefix, title in ((axes[0], "reward", "mean reward"), (axes[1], "pass", "pass rate")):
        mean = data[f"{prefix}_mean"]
        ax.barh(
            y,
            mean,
            xerr=error_bars(data[f"{prefix}_ci_low"], mean, data[f"{prefix}_ci_high"]),
            color="#4c72b0",
            alpha=0.85,
            capsize=3,
        )
        trials = data.get(f"{prefix}_n_trials", pd.Series(None, index=data.index))
        for yy, (value, n, k) in enumerate(zip(mean, data[f"{prefix}_n"], trials, strict=True)):
            if not math.isnan(value):
                ax.annotate(
                    f"{value:.2f} ({n_label(n, k)})",
                    (0.02, yy),
                    xycoords=("axes fraction", "data"),
                    va="center",
                    fontsize=9,
                    color="white",
                    fontweight="bold",
                )
        ax.set_xlim(0, 1.05)
        ax.set_xlabel(f"{title} (bars: bootstrap CI)")
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    fig.suptitle("Leaderboard: model × config family")
    return fig


def plot_tiers(tiers: pd.DataFrame, tier_order: tuple[str, ...]) -> Figure | None:
    """Mean reward per file-recall tier, one bar per config family, n above each bar."""
    data = tiers[tiers["tier"].isin(tier_order) & (tiers["reward_n"] > 0)]
    if data.empty:
        return None
    families = sorted(data["config_family"].unique())
    colours = colours_for(families)
    fig, ax = new_figure(3.8)
    width = 0.8 / len(families)
    x = np.arange(len(tier_order))
    for i, family in enumerate(families):
        sub = data[data["config_family"] == family].set_index("tier").reindex(list(tier_order))
        pos = x - 0.4 + width * (i + 0.5)
        mean = sub["reward_mean"]
        ax.bar(
            pos,
            mean.fillna(0),
            width,
            color=colours[family],
            label=family,
            yerr=error_bars(sub["reward_ci_low"], mean, sub["reward_ci_high"]),
            capsize=3,
        )
        trials = sub["reward_n_trials"] if "reward_n_trials" in sub else [None] * len(sub)
        for p, value, n, k in zip(pos, mean, sub["reward_n"], trials, strict=True):
            if not (isinstance(n, float) and math.isnan(n)) and n:
                ax.annotate(
                    n_label(n, k).replace(", ", "\n"),
                    (p, 0 if math.isnan(value) else value),
                    xytext=(0, 3),
                    textcoords="offset points",
                    ha="center",
                    fontsize=8,
                )
    ax.set_xticks(x, [f"recall {t}" for t in tier_order])
    ax.set_ylim(0, 1.25)
    ax.set_ylabel("mean reward")
    ax.set_title("Reward by file-recall tier (bars: bootstrap CI; empty tier: no bar)")
    ax.legend(loc="upper left", frameon=False)
    return fig


def plot_tool_value(tools: pd.DataFrame, top: int = 14) -> Figure | None:
    """Calls per tool and the share of them that surfaced a ground-truth file."""
    data = tools[tools["calls"] > 0].head(top)
    if data.empty:
        return None
    labels = [
        f"{t} ({c}) · {f}"
        for t, c, f in zip(data["tool"], data["tool_category"], data["config_family"], strict=True)
    ]
    fig, axes = new_figure(0.36 * len(data) + 1.6, ncols=2, sharey=True)
    y = np.arange(len(data))
    colours = ["#dd8452" if m else "#4c72b0" for m in data["is_mcp"]]
    axes[0].barh(y, data["calls"], color=colours)
    axes[0].set_xlabel("calls")
    share = data["share_surfaced_ground_truth"]
    axes[1].barh(y, share.fillna(0), color=colours)
    for yy, (value, n) in enumerate(zip(share, data["calls_with_ground_truth"], strict=True)):
        text = "n/a" if math.isnan(value) else f"{value:.2f}"
        axes[1].annotate(
            f"{text} of {int(n)}",
            (0 if math.isnan(value) else value, yy),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    axes[1].set_xlim(0, 1.2)
    axes[1].set_xlabel("share of calls that surfaced a ground-truth file")
    axes[0].set_yticks(y, labels)
    axes[0].invert_yaxis()
    fig.suptitle("Tool value (orange: MCP tools, blue: local tools)")
    return fig


def plot_scatter_fits(
    table: pd.DataFrame, pairs: pd.DataFrame, fits: pd.DataFrame, *, hue: str = "config_name"
) -> Figure | None:
    """Scatter plots of the strongest pairs with their fitted line and r [95% CI]."""
    if pairs.empty:
        return None
    groups = sorted(table[hue].dropna().astype(str).unique())
    colours = colours_for(groups)
    fig, axes = new_figure(3.6, ncols=len(pairs), squeeze=False)
    rows: list[dict[Any, Any]] = pairs.to_dict("records")
    lines: list[dict[Any, Any]] = fits.to_dict("records")
    for ax, row, fit in zip(axes[0], rows, lines, strict=True):
        for group in groups:
            sub = table[table[hue].astype(str) == group]
            x = pd.to_numeric(sub[row["x"]], errors="coerce").astype(float)
            yv = pd.to_numeric(sub[row["y"]], errors="coerce").astype(float)
            ok = x.notna() & yv.notna()
            ax.scatter(x[ok], yv[ok], s=22, alpha=0.7, color=colours[group], label=group)
        slope, intercept = float(fit["slope"]), float(fit["intercept"])
        if not math.isnan(slope):
            xs = pd.to_numeric(table[row["x"]], errors="coerce").astype(float).dropna()
            line = np.linspace(float(xs.min()), float(xs.max()), 2)
            ax.plot(line, intercept + slope * line, color="black", lw=1.2)
        ax.set_xlabel(row["x"])
        ax.set_ylabel(str(row["y"]))
        ax.set_title(
            f"r={row['r']:+.2f} [{row['ci_low']:+.2f}, {row['ci_high']:+.2f}]\n"
            f"{row['method']}, n={int(row['n'])}",
            fontsize=10,
        )
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=max(len(groups), 1), frameon=False)
    return fig


def _timeline_axis(
    ax: Any, frame: pd.DataFrame, files: list[str], gt: set[str], x: str, title: str
) -> None:
    rows = {name: i for i, name in enumerate(files)}
    for i, name in enumerate(files):
        if name in gt:
            ax.axhspan(i - 0.5, i + 0.5, color="#f6e3b4", zorder=0)
    xcol = "step_index" if x == "step" else "elapsed_seconds"
    for category, sub in frame.groupby("tool_category", sort=True):
        sub = sub[sub["file"].isin(rows)]
        if sub.empty:
            continue
        colour = [
            "#c44e52" if e else ("#dd8452" if m else "#4c72b0")
            for e, m in zip(sub["is_error"], sub["is_mcp"], strict=True)
        ]
        ax.scatter(
            sub[xcol],
            sub["file"].map(rows),
            marker=CATEGORY_MARKERS.get(str(category), "."),
            c=colour,
            s=36,
            label=category,
            zorder=3,
        )
    first = frame[frame["first_hit"]]
    if not first.empty:
        fx = first[xcol].iloc[0]
        if fx == fx:
            ax.axvline(fx, color="#55a868", lw=1.2, ls="--", zorder=2)
            ax.annotate("first ground-truth hit", (fx, -0.6), fontsize=8, color="#55a868")
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step" if x == "step" else "seconds since the agent started")


def plot_timelines(
    baseline: pd.DataFrame,
    treatment: pd.DataFrame,
    ground_truth: list[str],
    *,
    titles: tuple[str, str],
    x: str = "step",
) -> Figure | None:
    """Baseline and treatment side by side: one row per file touched, markers by category.

    Ground-truth rows are shaded; the first ground-truth hit is a dashed line; calls
    without a file sit on the ``(no file)`` row; MCP calls are orange, local blue, failed
    red. At most 28 files are drawn (ground truth first, then the most touched).
    """
    frames = [f.assign(file=f["file"].fillna("(no file)")) for f in (baseline, treatment)]
    if all(f.empty for f in frames):
        return None
    gt = set(ground_truth)
    counts = pd.concat(frames)["file"].value_counts()
    touched = set(counts.index)
    ordered = sorted(gt & touched) + sorted(
        (f for f in touched if f not in gt and f != "(no file)"), key=lambda f: (-counts[f], f)
    )
    ordered += sorted(gt - touched)  # never-touched ground truth: an empty shaded row
    files = ordered[:_MAX_TIMELINE_FILES] + (["(no file)"] if "(no file)" in touched else [])
    fig, axes = new_figure(0.28 * len(files) + 2.2, ncols=2, width=13, sharey=True)
    for ax, frame, title in zip(axes, frames, titles, strict=True):
        _timeline_axis(ax, frame, files, gt, x, title)
    axes[0].set_yticks(
        range(len(files)), [f if len(f) < 60 else "…" + f[-58:] for f in files], fontsize=8
    )
    axes[0].invert_yaxis()
    handles: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
    fig.legend(
        list(handles.values()),
        list(handles),
        loc="outside lower center",
        ncol=len(handles),
        frameon=False,
    )
    hidden = len(ordered) - _MAX_TIMELINE_FILES
    fig.suptitle(
        "Files touched over time (shaded: ground truth)"
        + (f"; {hidden} more files not shown" if hidden > 0 else "")
    )
    return fig

"""Figures of the reports: matplotlib/seaborn on the Agg backend, PNG only.

Every function takes a table from :mod:`retrieval_lib.report.tables` (or
:mod:`retrieval_lib.stats`, or a kb comparison's rows for ``plot_kb_*``) and returns a
:class:`matplotlib.figure.Figure` (constrained layout), or ``None`` when there is nothing
to draw (the notebook then prints why). :func:`png` renders PNG bytes (never SVG: its
output differs from run to run, and nbval compares it as text); :func:`show` displays them.
Names from inputs are labels, never math text (:func:`png`, :func:`names_as_text`).
matplotlib and seaborn are imported inside the functions.

Examples
--------
>>> import pandas as pd
>>> q = pd.DataFrame({"config_name": ["a"], "metric": ["file.AP"], "n": [3], "mean": [0.5],
...                   "ci_low": [0.2], "ci_high": [0.8], "reason": [None]})
>>> png(plot_quality(q))[:8] == b"\\x89PNG\\r\\n\\x1a\\n"
True
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from retrieval_lib.kb.definitions import MRR_CUTOFF
from retrieval_lib.report.display import n_label
from retrieval_lib.safe_text import markdown_text, plot_label

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DPI",
    "KB_KIND_COLOURS",
    "plot_calibration",
    "plot_correlation_heatmap",
    "plot_funnel",
    "plot_kb_metric_deltas",
    "plot_kb_rank_changes",
    "plot_paired_deltas",
    "plot_quality",
    "plot_scatter_pairs",
    "plot_taxonomy",
    "plot_wins_losses",
    "colours_for",
    "error_bars",
    "names_as_text",
    "new_figure",
    "png",
    "setup",
    "show",
]

#: Resolution of the rendered PNGs (a 10-inch figure is 1000 px wide).
DPI = 100
_WIDTH = 10.0


def setup() -> None:
    """Select the Agg backend and the report's style (call before plotting).

    Safe to call repeatedly; keeps fonts large enough to read in a 1280-px-wide page.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    matplotlib.rcParams.update(
        {
            "figure.dpi": DPI,
            "savefig.dpi": DPI,
            "figure.constrained_layout.use": True,
            "axes.titlesize": 12,
            "axes.labelsize": 11,
            "xtick.labelsize": 10,
            "ytick.labelsize": 10,
            "legend.fontsize": 10,
            "svg.hashsalt": "retrieval_lib",
        }
    )
    names_as_text()


def names_as_text() -> None:
    """Turn matplotlib's math text off for every later label (``text.parse_math``).

    A label built from an input name (a config ``cfg $^^$``, a tool ``$_{$``) is then drawn
    as it is instead of failing as a math expression; see :mod:`retrieval_lib.safe_text`.
    """
    import matplotlib

    matplotlib.rcParams["text.parse_math"] = False


def png(fig: Figure) -> bytes:
    """Render ``fig`` to PNG bytes (tight bounding box) and close it.

    Every text of the figure is drawn as plain text (math text off, also for the tick labels
    created while drawing), so a ``$`` in a name never makes the figure fail.

    Examples
    --------
    >>> import matplotlib.pyplot as plt
    >>> fig, ax = plt.subplots()
    >>> _ = ax.set_title("config $^^$"), ax.set_xticks([0], ["tool $_{$"])
    >>> png(fig)[:4] == b"\\x89PNG"
    True
    """
    import io

    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    for text in fig.findobj(Text):
        text.set_parse_math(False)
    buffer = io.BytesIO()
    try:
        with matplotlib.rc_context({"text.parse_math": False}):
            fig.savefig(
                buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None}
            )
    finally:
        plt.close(fig)
    return buffer.getvalue()


def show(fig: Figure | None, note: str = "nothing to plot") -> Any:
    """A displayable PNG image of ``fig``, or ``note`` as text when ``fig`` is None.

    ``note`` may hold names (a metric, a config): it is shown as text, never as Markdown.
    """
    from IPython.display import Image, Markdown

    if fig is None:
        return Markdown(f"*{markdown_text(note)}*")
    return Image(data=png(fig), format="png")


def new_figure(height: float, ncols: int = 1, width: float = _WIDTH, **kwargs: Any) -> Any:
    """A row of ``ncols`` axes, ``width`` x ``height`` inches, constrained layout.

    Returns matplotlib's ``(figure, axes)``; ``kwargs`` go to ``plt.subplots``.

    Examples
    --------
    >>> fig, axes = new_figure(2.0, ncols=2)
    >>> len(axes), fig.get_size_inches().tolist()
    (2, [10.0, 2.0])
    >>> import matplotlib.pyplot as plt; plt.close(fig)
    """
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(width, height), layout="constrained", **kwargs)


def colours_for(names: list[str]) -> dict[str, Any]:
    """One colour of seaborn's colour-blind palette per name, in the order given.

    Examples
    --------
    >>> colours = colours_for(["baseline", "mcp"])
    >>> list(colours), colours["baseline"] != colours["mcp"]
    (['baseline', 'mcp'], True)
    """
    import seaborn as sns

    colours = sns.color_palette("colorblind", max(len(names), 1))
    return {name: colours[i] for i, name in enumerate(names)}


def error_bars(low: pd.Series, mean: pd.Series, high: pd.Series) -> np.ndarray:
    """Asymmetric error-bar lengths (matplotlib's ``xerr``/``yerr``); 0 where the interval
    is missing.

    Examples
    --------
    >>> error_bars(pd.Series([0.1, None]), pd.Series([0.5, 0.5]), pd.Series([0.7, None]))
    array([[0.4, 0. ],
           [0.2, 0. ]])
    """
    lower = (mean - low).to_numpy(dtype=float)
    upper = (high - mean).to_numpy(dtype=float)
    return np.nan_to_num(np.vstack([lower, upper]), nan=0.0)


def _side_by_side(
    data: pd.DataFrame, by: str, index: str, order: list[Any]
) -> list[tuple[Any, Any, pd.DataFrame, np.ndarray, float]]:
    """Per value of ``by`` (sorted): the value, its colour, its rows indexed by ``order``
    (values of ``index``), their positions on the category axis (the values side by side
    within 0.8 around 0, 1, ...) and the width of one bar."""
    names = sorted(data[by].unique())
    colours = colours_for(names)
    width = 0.8 / len(names)
    return [
        (
            name,
            colours[name],
            data[data[by] == name].set_index(index).reindex(order),
            np.arange(len(order)) + (j - (len(names) - 1) / 2) * width,
            width,
        )
        for j, name in enumerate(names)
    ]


def _note(ax: Any, text: str, xy: Any, offset: tuple[float, float], **kwargs: Any) -> None:
    """``text`` at ``offset`` points from ``xy``, in small type unless ``fontsize`` is given."""
    ax.annotate(text, xy, xytext=offset, textcoords="offset points", **{"fontsize": 8, **kwargs})


def plot_quality(
    quality: pd.DataFrame, *, title: str = "Retrieval quality per config"
) -> Figure | None:
    """Dot-and-whisker chart: mean and CI of each metric per config, labelled with n.

    ``quality`` is :func:`~retrieval_lib.report.tables.quality_by_config`. Metrics with no
    value in any config are left out; None when nothing is left.
    """
    data = quality[quality["n"] > 0]
    if data.empty:
        return None
    metrics = list(dict.fromkeys(data["metric"]))
    groups = _side_by_side(data, "config_name", "metric", metrics)
    fig, ax = new_figure(0.55 * len(metrics) * len(groups) ** 0.5 + 1.6)
    for config, colour, rows, y, _ in groups:
        ok = rows["n"].notna().to_numpy()
        ax.errorbar(
            rows["mean"][ok],
            y[ok],
            xerr=error_bars(rows["ci_low"], rows["mean"], rows["ci_high"])[:, ok],
            fmt="o",
            capsize=3,
            color=colour,
            label=config,
        )
        for yy, (_, row) in zip(y[ok], rows[ok].iterrows(), strict=True):
            _note(
                ax, n_label(row["n"], row.get("n_trials")), (row["mean"], yy), (6, 4), color=colour
            )
    ax.set_yticks(range(len(metrics)), metrics)
    ax.invert_yaxis()
    ax.set_xlim(-0.05, 1.1)
    ax.set_xlabel("mean over tasks (bars: bootstrap CI over task means)")
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=len(groups), frameon=False)
    return fig


def plot_funnel(funnel: pd.DataFrame) -> Figure | None:
    """Grouped bars of mean files and mean ground-truth hits per funnel stage and config."""
    data = funnel[funnel["n"] > 0]
    if data.empty:
        return None
    stages = list(dict.fromkeys(data["stage"]))
    groups = _side_by_side(data, "config_name", "stage", stages)
    fig, axes = new_figure(3.6, ncols=2, sharex=True)
    for ax, column, n_col, label in (
        (axes[0], "mean_files", "n", "files per trial"),
        (axes[1], "mean_ground_truth_hits", "n_with_ground_truth", "ground-truth files per trial"),
    ):
        for config, colour, rows, x, width in groups:
            values = rows[column].to_numpy(dtype=float)
            bars = ax.bar(x, np.nan_to_num(values), width, color=colour, label=config)
            for bar, value, n in zip(bars, values, rows[n_col], strict=True):
                text = "n/a" if math.isnan(value) else f"{value:.1f}\nn={int(n)}"
                top = (bar.get_x() + bar.get_width() / 2, bar.get_height())
                _note(ax, text, top, (0, 2), ha="center", va="bottom")
        ax.set_xticks(range(len(stages)), stages)
        ax.set_ylabel(label)
        ax.margins(y=0.25)
        if data[column].isna().all():
            ax.set_ylim(0, 1)
            ax.text(
                0.5,
                0.5,
                "not computable:\nno trial has file-level ground truth",
                transform=ax.transAxes,
                ha="center",
                va="center",
            )
    axes[0].set_title("Files at each stage")
    axes[1].set_title("Ground-truth files at each stage")
    axes[0].legend(loc="upper right", frameon=False)
    return fig


def plot_taxonomy(taxonomy: pd.DataFrame) -> Figure | None:
    """Horizontal bars: share of trials with each error label, per config (with n)."""
    data = taxonomy[taxonomy["n"] > 0]
    if data.empty:
        return None
    labels = list(dict.fromkeys(data["label"]))
    groups = _side_by_side(data, "config_name", "label", labels)
    fig, ax = new_figure(0.5 * len(labels) * len(groups) ** 0.5 + 1.6)
    for config, colour, rows, y, height in groups:
        bars = ax.barh(y, rows["share_with_label"].fillna(0), height, color=colour, label=config)
        for bar, k, n in zip(bars, rows["trials_with_label"], rows["n"], strict=True):
            end = (bar.get_width(), bar.get_y() + bar.get_height() / 2)
            _note(ax, f"{int(k)}/{int(n)}", end, (3, 0), va="center")
    ax.set_yticks(range(len(labels)), [label.replace("_", " ") for label in labels])
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of trials with the label (trials with label / trials with taxonomy)")
    ax.set_title("Error taxonomy")
    ax.legend(loc="lower right", frameon=False)
    return fig


def plot_calibration(calibration: pd.DataFrame, metric: str) -> Figure | None:
    """Bars per candidate-set size slice × evidence type, each with its CI and n."""
    data = calibration[calibration["n"] > 0]
    if data.empty:
        return None
    sizes = list(dict.fromkeys(data["candidate_set_size_slice"]))
    groups = _side_by_side(data, "evidence_type", "candidate_set_size_slice", sizes)
    fig, ax = new_figure(3.8, width=min(_WIDTH, 3.0 + 1.6 * len(sizes) * len(groups)))
    for kind, colour, rows, x, width in groups:
        means = rows["mean"].to_numpy(dtype=float)
        bars = ax.bar(
            x,
            np.nan_to_num(means),
            width,
            yerr=error_bars(rows["ci_low"], rows["mean"], rows["ci_high"]),
            capsize=4,
            color=colour,
            label=f"evidence: {kind}",
        )
        trials = rows["n_trials"] if "n_trials" in rows else pd.Series(None, index=rows.index)
        for bar, mean, n, k, high in zip(
            bars, means, rows["n"], trials, rows["ci_high"], strict=True
        ):
            if math.isnan(mean):
                continue
            top = (bar.get_x() + bar.get_width() / 2, high if not math.isnan(high) else mean)
            text = f"{mean:.2f}\n" + n_label(n, k).replace(", ", "\n")
            _note(ax, text, top, (0, 3), ha="center", va="bottom")
    ax.set_xticks(range(len(sizes)), [f"{s} candidate set" for s in sizes])
    ax.set_ylim(0, 1.3)
    ax.set_ylabel(f"mean {metric}")
    ax.set_title(f"{metric} by candidate-set size and evidence type (bars: bootstrap CI)")
    ax.legend(loc="upper right", frameon=False)
    return fig


def plot_correlation_heatmap(
    grids: list[tuple[str, pd.DataFrame, pd.DataFrame]], *, alpha: float, adjust: str
) -> Figure | None:
    """One heatmap per group: rank correlation of metric × outcome, ``*`` when significant.

    ``grids`` holds ``(group, r, marks)`` from
    :func:`~retrieval_lib.report.tables.correlation_grid`; cells that are not computable
    are grey and read ``n/a``.
    """
    import seaborn as sns

    grids = [(g, r, m) for g, r, m in grids if not r.empty]
    if not any(np.isfinite(r.to_numpy(dtype=float)).any() for _, r, _ in grids):
        return None
    n_rows = max(len(r.index) for _, r, _ in grids)
    fig, axes = new_figure(
        0.42 * n_rows + 2.2, ncols=len(grids), width=max(_WIDTH, 4.2 * len(grids)), squeeze=False
    )
    for ax, (group, r, marks) in zip(axes[0], grids, strict=True):
        text = r.map(lambda v: "" if math.isnan(v) else f"{v:+.2f}") + marks
        sns.heatmap(
            r,
            ax=ax,
            vmin=-1,
            vmax=1,
            cmap="vlag",
            annot=text.to_numpy(),
            fmt="",
            annot_kws={"fontsize": 8},
            cbar=ax is axes[0][-1],
            linewidths=0.5,
            linecolor="white",
        )
        ax.set_facecolor("#dddddd")
        ax.set_title(group)
        ax.set_xticklabels([t.get_text() for t in ax.get_xticklabels()], rotation=30, ha="right")
        if ax is not axes[0][0]:
            ax.set_yticklabels([])
    fig.suptitle(
        f"Rank correlation with outcomes (* = {adjust.replace('p_', '')}-adjusted p < {alpha:g}; grey = not computable)"
    )
    return fig


def plot_scatter_pairs(
    table: pd.DataFrame, pairs: pd.DataFrame, *, hue: str = "config_name"
) -> Figure | None:
    """Scatter plots of the strongest metric–outcome pairs (``strongest_pairs`` rows)."""
    if pairs.empty:
        return None
    configs = sorted(table[hue].dropna().astype(str).unique())
    colours = colours_for(configs)
    fig, axes = new_figure(3.4, ncols=len(pairs), squeeze=False)
    # rows as Any: pandas-stubs types itertuples() fields as a union of every scalar
    for ax, row in zip(axes[0], cast(Any, pairs).itertuples(), strict=True):
        for config in configs:
            sub = table[table[hue].astype(str) == config]
            x = pd.to_numeric(sub[row.x], errors="coerce").astype(float)
            y = pd.to_numeric(sub[row.y], errors="coerce").astype(float)
            ok = x.notna() & y.notna()
            ax.scatter(x[ok], y[ok], s=28, alpha=0.8, color=colours[config], label=config)
        ax.set_xlabel(row.x)
        ax.set_ylabel(row.y)
        count = n_label(row.n, getattr(row, "n_trials", None))
        ax.set_title(f"r={row.r:+.2f} ({row.method}), {count}", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(configs), frameon=False)
    return fig


def plot_paired_deltas(comparisons: pd.DataFrame, metrics: list[str]) -> Figure | None:
    """Forest plot: mean paired delta (treatment − baseline) with its CI, per metric."""
    rows = comparisons[comparisons["metric"].isin(metrics) & comparisons["computable"].astype(bool)]
    if rows.empty:
        return None
    pairs = list(dict.fromkeys(zip(rows["baseline"], rows["treatment"], strict=True)))
    # as tall as the most rows one pair draws (metrics without a test are not drawn)
    n_rows = int(rows.groupby(["baseline", "treatment"])["metric"].nunique().max())
    fig, axes = new_figure(0.45 * n_rows + 1.8, ncols=len(pairs), squeeze=False)
    for ax, (base, treat) in zip(axes[0], pairs, strict=True):
        sub = rows[(rows["baseline"] == base) & (rows["treatment"] == treat)]
        sub = sub.set_index("metric").reindex([m for m in metrics if m in set(sub["metric"])])
        y = np.arange(len(sub))
        ax.errorbar(
            sub["mean_delta"],
            y,
            xerr=error_bars(sub["ci_low"], sub["mean_delta"], sub["ci_high"]),
            fmt="o",
            capsize=3,
        )
        for yy, (_, row) in zip(y, sub.iterrows(), strict=True):
            text = f"n={int(row['n'])}, {int(row['wins'])}W/{int(row['losses'])}L"
            _note(ax, text, (row["mean_delta"], yy), (0, 6), ha="center")
        ax.axvline(0, color="grey", lw=1)
        ax.set_yticks(y, list(sub.index))
        ax.invert_yaxis()
        ax.set_xlabel(f"mean delta ({treat} − {base})")
        ax.set_title("Matched tasks: paired deltas (bars: 95% t interval)")
    return fig


def plot_wins_losses(
    deltas: pd.DataFrame, metric: str, *, shown: pd.DataFrame | None = None
) -> Figure | None:
    """Horizontal bars of each matched task's delta on ``metric`` (green: treatment better).

    The title counts every row of ``deltas`` (the table the report shows beside the chart);
    ``shown`` (a subset of its rows, e.g. the largest deltas) is what is drawn, and the
    title then says how many of how many are shown.
    """
    drawn = deltas if shown is None else shown
    data = drawn[drawn["result"] != "missing"]
    if data.empty:
        return None
    colours = {"treatment": "#2a9d8f", "baseline": "#e76f51", "tie": "#8d99ae"}
    fig, ax = new_figure(0.32 * len(data) + 1.4)
    y = np.arange(len(data))
    ax.barh(y, data["delta"], color=[colours[r] for r in data["result"]])
    ax.axvline(0, color="grey", lw=1)
    ax.set_yticks(y, data["task_name"])
    ax.invert_yaxis()
    base, treat = data["baseline"].iloc[0], data["treatment"].iloc[0]
    ax.set_xlabel(f"{metric}: {treat} − {base}")
    counts = deltas["result"].value_counts()
    with_delta = int(len(deltas) - counts.get("missing", 0))
    title = (
        f"Per-task {metric} deltas over {with_delta} matched tasks: treatment better "
        f"{counts.get('treatment', 0)}, baseline better {counts.get('baseline', 0)}, "
        f"ties {counts.get('tie', 0)}"
    )
    if len(data) < with_delta:
        title += f"\n({len(data)} of {with_delta} shown: the largest |delta|)"
    ax.set_title(title)
    return fig


# --------------------------------------------------------------------------- kb compare

#: Colour of each per-query outcome of :func:`retrieval_lib.kb.compare.compare_runs`.
KB_KIND_COLOURS: dict[str, str] = {
    "Win": "#0072B2",
    "Loss": "#E69F00",
    "Draw": "#999999",
    "Regression": "#D55E00",
}


def plot_kb_metric_deltas(metrics: pd.DataFrame) -> Figure | None:
    """Forest plot of a kb comparison's metric deltas (B − A), one row per metric.

    ``metrics`` is ``pd.DataFrame(report.metric_rows()).set_index("metric")`` of
    :meth:`retrieval_lib.kb.compare.CompareReport.metric_rows`, top row first. A metric with
    a paired mean is a circle with its bootstrap CI and the Wilcoxon p-value beside it ("all
    deltas 0" when the test has no p); one with only the aggregate delta is a grey square;
    one with neither is labelled "null" at 0. None when there is no metric.

    Examples
    --------
    >>> m = pd.DataFrame({"delta": [0.1, float("nan")], "mean_paired_delta": [0.1, float("nan")],
    ...     "ci_low": [0.0, float("nan")], "ci_high": [0.2, float("nan")],
    ...     "wilcoxon_p": [0.03, float("nan")]}, index=pd.Index(["hit_rate@1", "mrr"], name="metric"))
    >>> png(plot_kb_metric_deltas(m))[:4] == b"\\x89PNG"
    True
    """
    import matplotlib.pyplot as plt

    if metrics.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(metrics) + 1.2))
    positions = range(len(metrics))[::-1]
    for y, (_, row) in zip(positions, metrics.iterrows(), strict=True):
        if pd.notna(row["mean_paired_delta"]):
            ax.errorbar(
                row["mean_paired_delta"],
                y,
                xerr=[
                    [row["mean_paired_delta"] - row["ci_low"]],
                    [row["ci_high"] - row["mean_paired_delta"]],
                ],
                fmt="o",
                color="#0072B2",
                capsize=4,
            )
            label = f"p={row['wilcoxon_p']:.3f}" if pd.notna(row["wilcoxon_p"]) else "all deltas 0"
            _note(ax, label, (row["ci_high"], y), (6, -3), fontsize=9)
        elif pd.notna(row["delta"]):
            ax.plot(row["delta"], y, "s", color="#999999")
        else:
            _note(ax, "null", (0, y), (6, -3), fontsize=9, color="#999999")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_yticks(list(positions), [plot_label(m) for m in metrics.index])
    ax.margins(x=0.12)
    ax.set_xlabel("B − A")
    ax.set_title(
        "Metric deltas: paired mean with 95% bootstrap CI (circles), aggregate delta only (squares)"
    )
    return fig


def plot_kb_rank_changes(
    per_query: pd.DataFrame,
    kind_counts: dict[str, int],
    run_a: str,
    run_b: str,
    *,
    cutoff: int = MRR_CUTOFF,
) -> Figure | None:
    """Each ranked query's first relevant rank in A and B, beside the outcome counts.

    Left: one line per query judged by rank (``criterion`` ``chunk`` or ``doc`` in
    ``per_query``, the rows of :meth:`~retrieval_lib.kb.compare.CompareReport.per_query_rows`)
    from its rank in run A to its rank in run B, coloured by its outcome
    (:data:`KB_KIND_COLOURS`), a miss drawn below rank ``cutoff`` (the kb metrics' MRR
    cut-off) and a small vertical jitter so equal lines stay visible. Right: the number of
    queries of each outcome (``kind_counts``, every query). The run ids are labels
    (:func:`~retrieval_lib.safe_text.plot_label`). None when there is no query at all.

    Examples
    --------
    >>> q = pd.DataFrame({"criterion": ["chunk"], "kind": ["Win"], "a_hit_rank": [None],
    ...                   "b_hit_rank": [2]})
    >>> fig = plot_kb_rank_changes(q, {"Win": 1, "Loss": 0}, "a", "b")
    >>> fig.axes[0].get_title(), png(fig)[:4] == b"\\x89PNG"
    ('Rank change per query (n = 1)', True)
    """
    import matplotlib.pyplot as plt

    ranked = per_query[per_query["criterion"].isin(["chunk", "doc"])].reset_index(drop=True)
    if ranked.empty and not any(kind_counts.values()):
        return None
    miss = cutoff + 1.5
    fig, (ax, bars) = plt.subplots(1, 2, figsize=(11, 5.5), gridspec_kw={"width_ratios": [2, 1]})
    for i, row in ranked.iterrows():
        jitter = (cast(int, i) % 7 - 3) * 0.06
        a = row["a_hit_rank"] if pd.notna(row["a_hit_rank"]) else miss
        b = row["b_hit_rank"] if pd.notna(row["b_hit_rank"]) else miss
        ax.plot(
            [0, 1], [a + jitter, b + jitter], "-o", color=KB_KIND_COLOURS[row["kind"]], alpha=0.75
        )
    ax.set_xticks([0, 1], [f"A\n{plot_label(run_a)}", f"B\n{plot_label(run_b)}"])
    ax.set_yticks(
        list(range(1, cutoff + 1)) + [miss], [str(r) for r in range(1, cutoff + 1)] + ["miss"]
    )
    ax.set_ylim(miss + 0.8, 0.3)
    ax.set_ylabel("first relevant rank")
    ax.legend(
        handles=[
            plt.Line2D([], [], color=c, marker="o", label=k) for k, c in KB_KIND_COLOURS.items()
        ],
        loc="lower center",
        ncols=4,
        fontsize=9,
    )
    ax.set_title(f"Rank change per query (n = {len(ranked)})")
    bars.bar(
        list(kind_counts),
        list(kind_counts.values()),
        color=[KB_KIND_COLOURS[k] for k in kind_counts],
    )
    bars.set_title("Outcome per query (all queries)")
    for x, n in enumerate(kind_counts.values()):
        bars.annotate(str(n), (x, n), ha="center", va="bottom")
    return fig

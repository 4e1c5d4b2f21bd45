"""Report figures: PNG only, closed after rendering, None when there is nothing to draw."""

import io

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("seaborn")
PIL = pytest.importorskip("PIL.Image")

from retrieval_lib.report import figures, tables  # noqa: E402
from retrieval_lib.stats import means  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module", autouse=True)
def _agg():
    figures.setup()


def _table():
    rng = np.random.default_rng(1)
    n = 16
    configs = ["baseline-local-direct"] * 8 + ["mcp-remote-direct"] * 8
    ap = rng.uniform(0, 1, n)
    return pd.DataFrame(
        {
            "config_name": configs,
            "task_name": [f"task-{i % 8}" for i in range(n)],
            "candidate_set_size_slice": ["small", "medium"] * 8,
            "evidence_type": ["local"] * 8 + ["mcp"] * 8,
            "file.AP": ap,
            "file.recall": rng.uniform(0, 1, n),
            "reward": ap + rng.normal(0, 0.1, n),
            "funnel.surfaced_files": rng.integers(5, 20, n),
            "funnel.surfaced_gt_hits": rng.integers(0, 4, n),
            "funnel.read_files": rng.integers(1, 5, n),
            "funnel.read_gt_hits": rng.integers(0, 3, n),
            "funnel.edited_files": rng.integers(0, 2, n),
            "funnel.edited_gt_hits": rng.integers(0, 2, n),
            "taxonomy.missed_key_evidence": rng.integers(0, 3, n),
        }
    )


def _size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    return PIL.open(io.BytesIO(data)).size


def test_every_figure_renders_to_a_readable_png_and_is_closed():
    import matplotlib.pyplot as plt

    from retrieval_lib.stats.correlation import correlate_metrics

    table = _table()
    quality = tables.quality_by_config(table, ["file.AP", "file.recall"], n_boot=200)
    corr = correlate_metrics(table, outcomes=["reward"])
    grids = [
        (g, *tables.correlation_grid(corr, g)[:2]) for g in ["(pooled)", "baseline-local-direct"]
    ]
    per_task = pd.DataFrame(
        {
            "baseline": ["b"] * 3,
            "treatment": ["t"] * 3,
            "task_name": ["x", "y", "z"],
            "baseline:reward": [0.1, 0.5, 0.9],
            "treatment:reward": [0.4, 0.5, 0.2],
        }
    )
    comparisons = pd.DataFrame(
        {
            "baseline": ["b"],
            "treatment": ["t"],
            "metric": ["reward"],
            "n": [3],
            "mean_delta": [-0.13],
            "ci_low": [-0.7],
            "ci_high": [0.3],
            "wins": [1],
            "losses": [1],
            "computable": [True],
        }
    )
    made = {
        "quality": figures.plot_quality(quality),
        "funnel": figures.plot_funnel(tables.funnel_table(table)),
        "taxonomy": figures.plot_taxonomy(tables.taxonomy_table(table)),
        "calibration": figures.plot_calibration(
            means.calibration_table(table, "file.AP", n_boot=200), "file.AP"
        ),
        "heatmap": figures.plot_correlation_heatmap(grids, alpha=0.05, adjust="p_holm"),
        "scatter": figures.plot_scatter_pairs(
            table, tables.strongest_pairs(corr, "(pooled)", top=2)
        ),
        "deltas": figures.plot_paired_deltas(comparisons, ["reward"]),
        "wins": figures.plot_wins_losses(tables.per_task_deltas(per_task, "reward"), "reward"),
    }
    for name, fig in made.items():
        assert fig is not None, name
        width, height = _size(figures.png(fig))
        # a 1000-px-wide page region at 100 dpi; tight bbox trims only the white margin
        assert 400 <= width <= 1300, (name, width)
        assert 150 <= height <= 1600, (name, height)
    assert plt.get_fignums() == []


def test_figures_return_none_without_data():
    empty_quality = pd.DataFrame(
        {
            "config_name": ["a"],
            "metric": ["file.AP"],
            "n": [0],
            "mean": [np.nan],
            "ci_low": [np.nan],
            "ci_high": [np.nan],
            "reason": ["no computable value"],
        }
    )
    assert figures.plot_quality(empty_quality) is None
    assert (
        figures.plot_calibration(
            means.calibration_table(
                pd.DataFrame({"candidate_set_size_slice": [], "evidence_type": [], "file.AP": []}),
                "file.AP",
            ),
            "file.AP",
        )
        is None
    )
    all_nan = pd.DataFrame(np.nan, index=["file.AP"], columns=["reward"])
    marks = pd.DataFrame("n/a", index=["file.AP"], columns=["reward"])
    assert (
        figures.plot_correlation_heatmap(
            [("(pooled)", all_nan, marks)], alpha=0.05, adjust="p_holm"
        )
        is None
    )
    assert (
        figures.plot_scatter_pairs(_table(), pd.DataFrame(columns=["x", "y", "r", "n", "method"]))
        is None
    )


def test_show_gives_png_image_or_a_note():
    from IPython.display import Image, Markdown

    shown = figures.show(
        figures.plot_quality(tables.quality_by_config(_table(), ["file.AP"], n_boot=50))
    )
    assert isinstance(shown, Image) and shown.format == "png" and shown.data[:8] == PNG_MAGIC
    note = figures.show(None, "no trial has a trace")
    assert isinstance(note, Markdown) and "no trial has a trace" in note.data


def test_wins_losses_title_counts_the_whole_table_and_says_what_is_drawn():
    from retrieval_lib.study.analysis import largest_deltas

    # 40 matched tasks: 23 treatment better, 13 baseline better, 4 ties (+1 without a delta)
    deltas = [0.1 * (i + 1) for i in range(23)] + [-0.05 * (i + 1) for i in range(13)] + [0.0] * 4
    results = ["treatment"] * 23 + ["baseline"] * 13 + ["tie"] * 4
    frame = pd.DataFrame(
        {
            "baseline": "b",
            "treatment": "t",
            "task_name": [f"task{i:02d}" for i in range(41)],
            "delta": [*deltas, np.nan],
            "result": [*results, "missing"],
        }
    )
    drawn = largest_deltas(frame, top=30)
    fig = figures.plot_wins_losses(frame, "reward", shown=drawn)
    title = fig.axes[0].get_title()
    assert "over 40 matched tasks: treatment better 23, baseline better 13, ties 4" in title
    assert "(30 of 40 shown: the largest |delta|)" in title
    assert len(fig.axes[0].patches) == 30
    whole = figures.plot_wins_losses(frame, "reward").axes[0].get_title()
    assert "shown" not in whole and "over 40 matched tasks" in whole
    import matplotlib.pyplot as plt

    plt.close("all")


# --------------------------------------------------------------------------- kb compare


def _kb_metrics() -> pd.DataFrame:
    nan = float("nan")
    return pd.DataFrame(
        {
            "delta": [0.2, 0.1, -0.05, nan],
            "mean_paired_delta": [0.25, 0.0, nan, nan],
            "ci_low": [0.1, 0.0, nan, nan],
            "ci_high": [0.4, 0.0, nan, nan],
            "wilcoxon_p": [0.0312, nan, nan, nan],
        },
        index=pd.Index(["hit_rate@1", "mrr@10", "refusal_rate", "cite\nrate"], name="metric"),
    )


def test_kb_metric_deltas_draw_each_kind_of_row_where_its_values_say():
    import matplotlib.pyplot as plt

    fig = figures.plot_kb_metric_deltas(_kb_metrics())
    ax = fig.axes[0]
    # top row first: hit_rate@1 at y=3 ... the metric without any value at y=0
    ticks = {t.get_text(): y for t, y in zip(ax.get_yticklabels(), ax.get_yticks(), strict=True)}
    assert ticks == {"hit_rate@1": 3, "mrr@10": 2, "refusal_rate": 1, "cite\\x0arate": 0}
    # circles at the paired means, their bars from ci_low to ci_high
    circles = [line for line in ax.lines if line.get_marker() == "o"]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in circles] == [(0.25, 3), (0.0, 2)]
    bars = [c for c in ax.collections if len(c.get_segments()) == 1]
    spans = sorted(tuple(c.get_segments()[0][:, 0]) for c in bars)
    assert spans == [(0.0, 0.0), (0.1, 0.4)]
    # the aggregate-only delta is a grey square at -0.05
    squares = [line for line in ax.lines if line.get_marker() == "s"]
    assert [(line.get_xdata()[0], line.get_ydata()[0]) for line in squares] == [(-0.05, 1)]
    notes = {t.get_text(): t.xy for t in ax.texts}
    assert notes == {"p=0.031": (0.4, 3), "all deltas 0": (0.0, 2), "null": (0, 0)}
    assert _size(figures.png(fig))[0] > 0
    assert figures.plot_kb_metric_deltas(_kb_metrics().iloc[:0]) is None
    plt.close("all")


def test_kb_rank_changes_draw_a_line_per_ranked_query_and_every_outcome_count():
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    per_query = pd.DataFrame(
        {
            "criterion": ["chunk", "doc", "refusal", "chunk"],
            "kind": ["Win", "Regression", "Win", "Draw"],
            "a_hit_rank": [3, 1, None, None],
            "b_hit_rank": [1, None, None, None],
        }
    )
    counts = {"Win": 2, "Loss": 0, "Draw": 1, "Regression": 1}
    fig = figures.plot_kb_rank_changes(per_query, counts, "run $a$", "run\nb", cutoff=10)
    lines, bars = fig.axes
    drawn = [line for line in lines.lines if len(line.get_xdata()) == 2]
    # 3 ranked queries (the refusal is not ranked); a miss sits at 10 + 1.5; jitter (i % 7 - 3) * 0.06
    ys = [tuple(np.round(line.get_ydata(), 6)) for line in drawn]
    assert ys == [(2.82, 0.82), (0.88, 11.38), (11.44, 11.44)]
    colours = [mcolors.to_hex(line.get_color()).upper() for line in drawn]
    assert colours == ["#0072B2", "#D55E00", "#999999"]
    assert lines.get_title() == "Rank change per query (n = 3)"
    assert [t.get_text() for t in lines.get_xticklabels()] == ["A\nrun $a$", "B\nrun\\x0ab"]
    assert lines.get_yticklabels()[-1].get_text() == "miss"
    assert [p.get_height() for p in bars.patches] == [2, 0, 1, 1]
    assert [t.get_text() for t in bars.texts] == ["2", "0", "1", "1"]
    assert _size(figures.png(fig))[0] > 0
    empty = per_query.iloc[:0]
    assert figures.plot_kb_rank_changes(empty, dict.fromkeys(counts, 0), "a", "b") is None
    plt.close("all")

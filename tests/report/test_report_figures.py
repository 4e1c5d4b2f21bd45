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

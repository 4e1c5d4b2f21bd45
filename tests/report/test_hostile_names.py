"""Issue 18, items 1-4 at unit level: hostile names in what the reports format.

* the Markdown the notebooks build around names (the run analysis' "no pair" note, the
  study's captions and timeline headings, the kb summary and ``compare_report.md``) holds no
  live tag, no image and no link once rendered by nbconvert's Markdown renderer;
* the HTML export reads no local file and allows no script, even for a Markdown output
  written without escaping;
* a figure whose config, model, task or tool name holds ``$^^$`` or ``$_{$`` renders.

The reports themselves, rendered end to end with hostile names and opened in Chromium, are
tested in ``test_hostile_reports.py``.
"""

from __future__ import annotations

import base64
import re
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from retrieval_lib.kb.compare import compare_records
from retrieval_lib.kb.golden import parse_golden
from retrieval_lib.kb.ingest import parse_result
from retrieval_lib.kb.report_md import render_report_md
from retrieval_lib.report.display import readable
from retrieval_lib.safe_text import markdown_emphasis, markdown_strong

nbformat = pytest.importorskip("nbformat")
mistune_filter = pytest.importorskip("nbconvert.filters.markdown_mistune")

IMG = "<img src=x onerror=alert(1)>"
SVG = "<svg onload=alert(1)>"
LINK = "[c](javascript:alert(1))"
FILE = "![k](secret.txt)"
CODE = "a`</code><img src=x onerror=alert(1)>![x](/etc/hostname)"
MATH = "$^^$ $_{$"


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)


def _rendered(markdown: str) -> _Tags:
    parser = _Tags()
    parser.feed(mistune_filter.markdown2html_mistune(markdown))
    return parser


def _assert_inert(markdown: str, allowed: set[str]) -> None:
    shown = _rendered(markdown)
    assert set(shown.tags) <= allowed, (markdown, shown.tags)
    assert not [a for a in shown.attrs if a[0].startswith("on") or a[0] in ("src", "href")]
    assert "![" not in markdown and "](" not in markdown and "<img" not in markdown


def test_item1_no_pair_note_shows_config_names_as_text():
    configs = [f"base {IMG} {FILE}", f"mcp {LINK} {MATH}"]
    # the run-analysis notebook: markdown_emphasis(f"No baseline/treatment pair among ...")
    note = markdown_emphasis(f"No baseline/treatment pair among the configs {configs}.")
    _assert_inert(note, {"p", "em"})


def test_item2_study_caption_and_timeline_heading_show_names_as_text():
    frame = pd.DataFrame(
        {
            "baseline": [f"baseline {IMG}"] * 2,
            "treatment": [f"mcp {SVG} {LINK} {FILE}"] * 2,
            "metric": ["reward", "passed"],
            "mean": [0.5, 0.25],
        }
    )
    _, caption = readable(frame, constant=("baseline", "treatment"))
    assert IMG in caption  # the caption carries the raw names ...
    _assert_inert(markdown_emphasis(caption), {"p", "em"})  # ... shown as text
    heading = f"{markdown_strong(f'task {IMG} {FILE} {MATH}')} (reward delta +0.50)"
    _assert_inert(heading, {"p", "strong"})


def test_item3_kb_report_md_keeps_hostile_run_ids_and_versions_in_code_spans():
    golden = parse_golden([{"id": f"q{IMG}", "query": "x", "expected_doc_ids": ["d"]}])
    a = {f"q{IMG}": parse_result({"query_id": f"q{IMG}", "hits": []})}
    b = {
        f"q{IMG}": parse_result(
            {"query_id": f"q{IMG}", "hits": [{"chunk_id": "c", "doc_id": "d", "rank": 1}]}
        )
    }
    report = compare_records(CODE, f"b {LINK}", golden, golden, a, b)
    report.deltas["chunker_version_a"] = CODE
    md = render_report_md(report)
    shown = _rendered(md)
    assert not {"img", "svg", "script", "iframe"} & set(shown.tags), shown.tags
    assert not [a for a in shown.attrs if a[0].startswith("on") or a[0] == "src"]
    # nbconvert's heading anchor is the only link: to the page itself
    assert [v for k, v in shown.attrs if k == "href" and not (v or "").startswith("#")] == []
    # the names are shown whole, inside code spans
    heading = mistune_filter.markdown2html_mistune(md.splitlines()[0])
    assert heading.count("<code>") == 2 and "&lt;/code&gt;&lt;img" in heading


def test_item3_kb_ingest_refuses_a_run_id_with_a_control_character():
    from retrieval_lib.kb.exceptions import IngestError
    from retrieval_lib.kb.ingest import check_run_id

    assert check_run_id(CODE) == CODE  # any text is a run id; reports show it as text
    with pytest.raises(IngestError, match=r"control character \(U\+000A\)"):
        check_run_id("run\n<script>")
    with pytest.raises(IngestError, match="must not be empty"):
        check_run_id("  ")


def test_html_export_embeds_no_local_file_and_allows_no_script(tmp_path, monkeypatch):
    from retrieval_lib.report.html import CONTENT_SECURITY_POLICY, notebook_to_html

    secret = b"SECRET-MARKER-4f1c\n"
    (tmp_path / "secret.txt").write_bytes(secret)
    monkeypatch.chdir(tmp_path)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    # a Markdown output as an unescaped notebook would have written it
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/markdown": f"*{FILE}* {LINK}"})
    ]
    nb.cells = [cell]
    page = notebook_to_html(nb, title="t")
    assert "SECRET-MARKER" not in page
    assert base64.b64encode(secret).decode()[:16] not in page
    assert "data:text/plain" not in page
    head = page[: page.lower().index("</head>")]
    assert f'content="{CONTENT_SECURITY_POLICY}"' in head
    assert "script-src" not in CONTENT_SECURITY_POLICY  # default-src 'none' covers scripts
    assert CONTENT_SECURITY_POLICY.startswith("default-src 'none';")
    assert not re.search(r"<script\b", page, re.IGNORECASE)


# ----------------------------------------------------------------------------- item 4


@pytest.fixture
def math_text_on():
    """Plot as a notebook that never called ``figures.setup()`` would: math text on."""
    matplotlib = pytest.importorskip("matplotlib")
    pytest.importorskip("seaborn")
    matplotlib.use("Agg", force=True)
    with matplotlib.rc_context({"text.parse_math": True}):
        yield


def test_item4_report_figures_with_math_in_names_render(math_text_on):
    import matplotlib.pyplot as plt

    from retrieval_lib.report import figures, tables
    from retrieval_lib.stats import means

    rng = np.random.default_rng(1)
    n = 16
    configs = ["baseline $^^$"] * 8 + ["mcp $_{$"] * 8
    table = pd.DataFrame(
        {
            "config_name": configs,
            "task_name": [f"task $^^$ {i % 8}" for i in range(n)],
            "candidate_set_size_slice": ["small", "medium"] * 8,
            "evidence_type": ["local"] * 8 + ["mcp $_{$"] * 8,
            "file.AP": rng.uniform(0, 1, n),
            "funnel.surfaced_files": rng.integers(5, 20, n),
            "funnel.surfaced_gt_hits": rng.integers(0, 4, n),
            "funnel.read_files": rng.integers(1, 5, n),
            "funnel.read_gt_hits": rng.integers(0, 3, n),
            "funnel.edited_files": rng.integers(0, 2, n),
            "funnel.edited_gt_hits": rng.integers(0, 2, n),
            "taxonomy.missed_key_evidence": rng.integers(0, 3, n),
        }
    )
    per_task = pd.DataFrame(
        {
            "baseline": ["baseline $^^$"] * 3,
            "treatment": ["mcp $_{$"] * 3,
            "task_name": ["x $^^$", "y $_{$", "z"],
            "baseline:reward": [0.1, 0.5, 0.9],
            "treatment:reward": [0.4, 0.5, 0.2],
        }
    )
    made = [
        figures.plot_quality(tables.quality_by_config(table, ["file.AP"], n_boot=50)),
        figures.plot_funnel(tables.funnel_table(table)),
        figures.plot_taxonomy(tables.taxonomy_table(table)),
        figures.plot_calibration(means.calibration_table(table, "file.AP", n_boot=50), "file.AP"),
        figures.plot_wins_losses(tables.per_task_deltas(per_task, "reward"), "reward"),
    ]
    for fig in made:
        assert fig is not None
        assert figures.png(fig)[:4] == b"\x89PNG"
    assert plt.get_fignums() == []


def test_item4_study_figures_with_math_in_names_render(math_text_on):
    from retrieval_lib.report import figures, study_figures

    board = pd.DataFrame(
        {
            "model": ["model $^^$"],
            "config_family": ["family $_{$"],
            "reward_n": [3],
            "reward_mean": [0.5],
            "reward_ci_low": [0.2],
            "reward_ci_high": [0.8],
            "pass_n": [3],
            "pass_mean": [0.3],
            "pass_ci_low": [0.0],
            "pass_ci_high": [0.7],
        }
    )
    tools = pd.DataFrame(
        {
            "tool": ["mcp__sg__search $^^$", "Read $_{$"],
            "tool_category": ["code_search", "file_read"],
            "config_family": ["mcp $_{$", "baseline $^^$"],
            "is_mcp": [True, False],
            "calls": [4, 2],
            "share_surfaced_ground_truth": [0.5, float("nan")],
            "calls_with_ground_truth": [4, 0],
        }
    )
    timeline = pd.DataFrame(
        {
            "step_index": [0, 1],
            "elapsed_seconds": [0.0, 1.0],
            "file": ["src/$^^$.py", None],
            "tool_category": ["file_read", "other $_{$"],
            "is_mcp": [False, True],
            "is_error": [False, False],
            "first_hit": [True, False],
        }
    )
    made = [
        study_figures.plot_leaderboard(board),
        study_figures.plot_tool_value(tools),
        study_figures.plot_timelines(
            timeline, timeline, ["src/$^^$.py"], titles=("baseline $^^$: t1", "mcp $_{$: t2")
        ),
    ]
    for fig in made:
        assert fig is not None
        assert figures.png(fig)[:4] == b"\x89PNG"

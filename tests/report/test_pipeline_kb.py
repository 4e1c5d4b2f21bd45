"""``retrieval-lib report --notebook kb_compare -f params/kb_example.yaml`` renders the KB example."""

from pathlib import Path

import pytest

pytest.importorskip("papermill")

from retrieval_lib.cli import main  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_kb_compare_report_from_the_example_parameters(tmp_path, capsys):
    if not (REPO / "notebooks" / "kb_compare.ipynb").is_file():
        pytest.skip("notebooks/kb_compare.ipynb is not in this checkout")
    code = main(
        [
            "report",
            "--notebook",
            "kb_compare",
            "-f",
            str(REPO / "params" / "kb_example.yaml"),
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    folder = tmp_path / "kb_compare"
    html = folder / "kb_compare.html"
    assert capsys.readouterr().out.strip() == str(html.resolve())
    text = html.read_text(encoding="utf-8")
    # both example runs of params/kb_example.yaml are compared
    assert "bm25-window200-v1" in text and "bm25-paragraph-v2" in text
    assert "<script" not in text.lower() and "data:image/png;base64," in text
    # the CLI points the notebook's output_dir at the report folder
    assert (folder / "compare_report.json").is_file()

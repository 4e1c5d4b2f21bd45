"""The HTML report in headless Chromium: sections and figures render, nothing is fetched.

The report is rendered once (``retrieval-lib report`` on the evaluated bundled example) and
opened three ways: through a small harness page that inspects it from an iframe (images
decoded, section headings, resources the page fetched), directly for console messages, and
for a screenshot. Chromium is Debian's ``chromium`` (``.ci/run`` installs it when missing).
"""

import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("papermill")
PIL = pytest.importorskip("PIL.Image")

from retrieval_lib.cli import main  # noqa: E402
from retrieval_lib.report.pipeline import example_run  # noqa: E402

pytestmark = pytest.mark.browser

SECTIONS = (
    "The run",
    "Coverage",
    "Retrieval quality per config",
    "Surfaced → read → edited",
    "Utilisation probes",
    "Error taxonomy",
    "Calibration slices",
    "Retrieval and outcomes",
    "Matched comparison",
    "Per-task drill-down",
)


def _chromium() -> str | None:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


_MISSING_CHROMIUM = (
    "headless Chromium not found (/usr/bin/chromium); install Debian's chromium "
    "(apt-get install chromium), as .ci/run does, to run the browser test"
)


def chromium_or_skip(found: str | None, environ: dict[str, str]) -> str:
    """The Chromium path; without one, skip locally but fail in CI (``CI`` set).

    CI installs Chromium (``.ci/run``), so a missing browser there is a broken setup, not
    a reason to pass silently.
    """
    if found is not None:
        return found
    if environ.get("CI"):
        pytest.fail(f"CI is set but {_MISSING_CHROMIUM}", pytrace=False)
    pytest.skip(_MISSING_CHROMIUM, allow_module_level=True)


def test_missing_chromium_fails_in_ci_and_skips_elsewhere():
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        chromium_or_skip(None, {"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match="headless Chromium not found"):
        chromium_or_skip(None, {})
    assert chromium_or_skip("/usr/bin/chromium", {"CI": "1"}) == "/usr/bin/chromium"


CHROMIUM = chromium_or_skip(_chromium(), dict(os.environ))


def _browse(url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        # Nothing can reach the network even if the page asked for it.
        "--host-resolver-rules=MAP * ~NOTFOUND",
        *extra,
        url,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def _inspect(html: Path, tmp_path: Path) -> dict:
    """Open ``html`` in an iframe of a harness page; its images, headings, text, fetches."""
    harness = tmp_path / "harness.html"
    harness.write_text(
        f"""<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="report" src="{html.as_uri()}" width="1280" height="2000"></iframe>
<script>
document.getElementById("report").addEventListener("load", function () {{
  var doc = this.contentDocument, win = this.contentWindow;
  var images = Array.from(doc.images);
  document.getElementById("result").textContent = JSON.stringify({{
    images: images.length,
    decoded: images.filter(function (i) {{ return i.complete && i.naturalWidth > 0; }}).length,
    png: images.filter(function (i) {{ return i.src.indexOf("data:image/png;base64,") === 0; }}).length,
    headings: Array.from(doc.querySelectorAll("h1, h2")).map(function (h) {{
      return h.textContent.replace("\\u00b6", "").trim(); }}),
    text: doc.body.innerText,
    resources: win.performance.getEntriesByType("resource").map(function (e) {{ return e.name; }})
  }});
}});
</script></body></html>""",
        encoding="utf-8",
    )
    done = _browse(
        harness.as_uri(),
        tmp_path / "profile",
        "--allow-file-access-from-files",
        "--virtual-time-budget=10000",
        "--dump-dom",
    )
    match = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.DOTALL)
    assert match, done.stderr[-2000:]
    return json.loads(
        match.group(1)
        .replace("&quot;", '"')
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("browser")
    run_dir = example_run(root / "runs")
    assert main(["report", str(run_dir), "--out", str(root / "reports")]) == 0
    html = root / "reports" / run_dir.name / "run_analysis.html"
    executed = json.loads(html.with_suffix(".ipynb").read_text(encoding="utf-8"))
    n_png = sum(
        "image/png" in out.get("data", {})
        for cell in executed["cells"]
        for out in cell.get("outputs", [])
    )
    return html, n_png


def test_html_requests_nothing_remote(report):
    html, _ = report
    text = html.read_text(encoding="utf-8")
    assert "<script" not in text.lower()
    assert not re.findall(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text, re.IGNORECASE)
    assert not re.findall(r"""url\(\s*["']?(?:https?:)?//""", text, re.IGNORECASE)
    assert not re.findall(r"@import\s", text)


def test_page_renders_sections_and_every_figure(report, tmp_path):
    html, n_png = report
    assert (
        n_png >= 10
    )  # quality, funnel, probes, taxonomy, 2 slices, heatmap, scatter, deltas, wins
    result = _inspect(html, tmp_path)
    assert result["images"] == n_png == result["png"] == result["decoded"]
    for section in SECTIONS:
        assert section in result["headings"], (section, result["headings"])
    assert result["resources"] == []  # the page fetched nothing (data: images are not fetches)


def test_page_logs_no_console_message(report, tmp_path):
    html, _ = report
    done = _browse(
        html.as_uri(),
        tmp_path / "profile",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=5000",
        "--dump-dom",
    )
    assert "Retrieval quality per config" in done.stdout
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []


def test_screenshot_is_not_blank(report, tmp_path):
    html, _ = report
    shot = tmp_path / "report.png"
    _browse(html.as_uri(), tmp_path / "profile", f"--screenshot={shot}", "--window-size=1280,4000")
    assert shot.is_file()
    image = PIL.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert image.size == (1280, 4000)
    # text, tables and the first figures: many distinct colours, not a white page
    assert len(image.getcolors(maxcolors=1 << 20) or []) > 200


# --------------------------------------------------------------------------- the study report

STUDY_SECTIONS = (
    "Answer",
    "1. The study",
    "2. Leaderboard",
    "3. Matched comparison across runs",
    "4. Retrieval-conditioned views",
    "5. Tool value",
    "6. Confidence flags",
    "7. Retrieval and outcomes",
    "8. Calibration slices across runs",
    "9. Trial timelines",
)
CSB = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "csb"


@pytest.fixture(scope="module")
def study_report(tmp_path_factory):
    if not CSB.is_dir():
        pytest.skip("../shared/corpus/csb is not beside this checkout")
    out = tmp_path_factory.mktemp("study-browser")
    params = Path(__file__).resolve().parents[2] / "params" / "study.yaml"
    argv = [
        "study",
        str(CSB / "runs"),
        "--tasks-root",
        str(CSB / "benchmarks"),
        "--out",
        str(out),
        "-f",
        str(params),
    ]
    assert main(argv) == 0
    html = out / "study" / "study.html"
    executed = json.loads(html.with_suffix(".ipynb").read_text(encoding="utf-8"))
    n_png = sum(
        "image/png" in o.get("data", {}) for c in executed["cells"] for o in c.get("outputs", [])
    )
    return html, n_png


def test_study_page_shows_every_section_and_figure(study_report, tmp_path):
    html, n_png = study_report
    # leaderboard, wins/losses, tiers, tool value, 2 calibration slices, 2 timelines (the
    # correlation figures have nothing computable on this corpus, and no paired test runs:
    # 3 matched tasks with one non-zero reward delta are described, not tested)
    assert n_png >= 8
    result = _inspect(html, tmp_path)
    assert result["images"] == n_png == result["decoded"]
    for section in STUDY_SECTIONS:
        assert section in result["headings"], (section, result["headings"])
    assert result["resources"] == []
    # the three matched tasks of the corpus, pooled across its two runs
    for task in (
        "django-modeladmin-impact-001",
        "envoy-routeconfig-dep-chain-001",
        "llamacpp-context-window-search-001",
    ):
        assert task in result["text"]
    text = html.read_text(encoding="utf-8")
    assert "<script" not in text.lower()

"""Issue 18 acceptance: the three reports with hostile names in every name field.

The bundled example run is copied with hostile names: both config folders (HTML with
handlers, a Markdown image of ``secret.txt``, a ``javascript:`` link, backticks, ``$`` math),
a task (folder, result files and its task definition) and an MCP tool; the treatment config
does not look like one, so the run analysis shows its "no baseline/treatment pair" note with
both names, and the study maps it to a hostile family name so that captions, pair tables and
the timeline heading carry them. The kb store gets two runs whose ids and chunker versions
close code spans and carry handlers, ``javascript:`` links and images of ``/etc/hostname``.
``secret.txt`` (a marker) lies in the working directory and beside the runs.

``run``, ``study`` and ``report --notebook kb_compare`` render the three reports. Checked
without a browser: no element or attribute a name could have made (every image a PNG
figure of the report, no SVG, no link off the page, no ``on…`` attribute, no script), no
local file embedded (marker, base64), the names shown as text, and the page's
Content-Security-Policy. Checked in headless Chromium (marked ``browser``) on copies
*without* that policy, so that the escaping alone is tested: no handler fires (the names set
``document.title``), and the elements are the report's own; a control page with the same
handler proves the check can fail.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("papermill")
yaml = pytest.importorskip("yaml")

from retrieval_lib.cli import main  # noqa: E402
from retrieval_lib.safe_text import visible  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_RUN = "csb_synth_haiku_20260301_091500"
PWN = "document.title='pwned'"
SECRET = b"SECRET-MARKER-7d0e-hostile-report\n"

CONFIG_B = f"baseline-local-direct <img src=x onerror={PWN}> ![k](secret.txt) $^^$"
CONFIG_T = f"treatment <svg onload={PWN}> [c](javascript:{PWN}) `x` $_{{$"
FAMILY_T = f"mcp <svg onload={PWN}> ![f](secret.txt) `y` $_{{$"
TASK_OLD = "django-impact-001"
# a task name ends in "-<digits>" (runs.canonical_task_name); everything before is hostile
TASK = f"django-impact <img src=x onerror={PWN}> ![t](secret.txt) $_{{$-001"
TOOL_OLD = "sg_read_file"
TOOL = f"sg_read_file<svg onload={PWN}>$^^$"
RUN_A = f"a`</code><img src=x onerror={PWN}>![x](/etc/hostname)"
RUN_B = f"b [c](javascript:{PWN}) $^^$ <svg onload={PWN}>"
CHUNKER_A = f"v1 `</code><img src=x onerror={PWN}>"
CHUNKER_B = "v2 $_{$ ![h](secret.txt) ``"


def _rewrite(root: Path, pairs: list[tuple[str, str]]) -> None:
    """Replace each old name by the new one in every file's bytes and every path name."""
    for path in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            new = data
            for old, name in pairs:
                new = new.replace(old.encode(), name.encode())
            if new != data:
                path.write_bytes(new)
        renamed = path.name
        for old, name in pairs:
            renamed = renamed.replace(old, name)
        if renamed != path.name:
            path.rename(path.with_name(renamed))


def _hostile_runs(root: Path) -> tuple[Path, Path]:
    from retrieval_lib.report.pipeline import bundled_examples

    source = bundled_examples()
    if source is None:
        pytest.skip("the bundled example runs are not in this checkout")
    runs, tasks = source
    run = root / "runs" / EXAMPLE_RUN
    shutil.copytree(runs / "official" / EXAMPLE_RUN, run)
    shutil.copytree(tasks, root / "benchmarks")
    _rewrite(run, [(TASK_OLD, TASK), (TOOL_OLD, TOOL)])
    _rewrite(root / "benchmarks", [(TASK_OLD, TASK)])
    (run / "baseline-local-direct").rename(run / CONFIG_B)
    (run / "mcp-remote-direct").rename(run / CONFIG_T)
    (root / "runs" / "secret.txt").write_bytes(SECRET)
    return run, root / "benchmarks"


def _hostile_kb(root: Path) -> Path:
    from retrieval_lib.kb.examples import EXAMPLE_RUNS, write_example
    from retrieval_lib.kb.ingest import ingest_run
    from retrieval_lib.kb.metrics import compute_aggregate, store_aggregate
    from retrieval_lib.kb.store import KBStore

    folder = root / "kb-example"
    write_example(folder)
    db = root / "eval.sqlite"
    with KBStore(db) as store:
        for run, run_id, chunker in zip(
            EXAMPLE_RUNS, (RUN_A, RUN_B), (CHUNKER_A, CHUNKER_B), strict=True
        ):
            ingest_run(
                store,
                folder / run.results_file,
                folder / "golden.yaml",
                chunks_path=folder / run.chunks_file,
                run_id=run_id,
                chunker_version=chunker,
                config_path=folder / run.config_file,
            )
            store_aggregate(store, run_id, compute_aggregate(store, run_id))
    return db


def _params(path: Path, values: dict) -> str:
    path.write_text(yaml.safe_dump(values, allow_unicode=True), encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    """The three reports rendered from hostile inputs, ``secret.txt`` in the working dir."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "secret.txt").write_bytes(SECRET)
    run, tasks = _hostile_runs(root)
    db = _hostile_kb(root)
    out = root / "reports"
    before = Path.cwd()
    os.chdir(root)
    started = time.perf_counter()
    try:
        fast = _params(root / "run.yaml", {"n_boot": 200})
        assert (
            main(["run", str(run), "--tasks-root", str(tasks), "--out", str(out), "-f", fast]) == 0
        )
        study = {
            "config_map": {CONFIG_T: FAMILY_T},
            "n_boot": 200,
            "timeline_tasks": TASK,
        }
        study_params = _params(root / "study.yaml", study)
        argv = ["study", str(root / "runs"), "--tasks-root", str(tasks), "--out", str(out)]
        assert main([*argv, "-f", study_params]) == 0
        print(f"+ study: {time.perf_counter() - started:.1f} s")
        kb = {"db_path": str(db), "run_a": RUN_A, "run_b": RUN_B, "n_bootstrap": 200, "seed": 0}
        kb_params = _params(root / "kb.yaml", kb)
        assert main(["report", "--notebook", "kb_compare", "-f", kb_params, "--out", str(out)]) == 0
    finally:
        os.chdir(before)
    print(f"three hostile reports rendered in {time.perf_counter() - started:.1f} s")
    return {
        "run_analysis": out / EXAMPLE_RUN / "run_analysis.html",
        "study": out / "study" / "study.html",
        "kb_compare": out / "kb_compare" / "kb_compare.html",
    }


#: The names each report must show (as text) somewhere.
SHOWN = {
    "run_analysis": [CONFIG_B, CONFIG_T, TASK],  # tools are not named in its text
    # the tool value table names an MCP tool without its server prefix ("sg_")
    "study": [CONFIG_B, CONFIG_T, FAMILY_T, TASK, TOOL.removeprefix("sg_")],
    "kb_compare": [RUN_A, RUN_B, CHUNKER_A, CHUNKER_B],
}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_data(self, data):
        self.text.append(data)


def _executed_pngs(html: Path) -> int:
    executed = json.loads(html.with_suffix(".ipynb").read_text(encoding="utf-8"))
    return sum(
        "image/png" in out.get("data", {})
        for cell in executed["cells"]
        for out in cell.get("outputs", [])
    )


def _embedded_file_markers() -> list[str]:
    """Text and base64 forms of the local files a name points at."""
    markers = [SECRET.decode().strip()]
    contents = [SECRET]
    hostname = Path("/etc/hostname")
    if hostname.is_file():
        contents.append(hostname.read_bytes())
    for content in contents:
        markers.append(base64.b64encode(content).decode())
    return markers


@pytest.mark.parametrize("name", ["run_analysis", "study", "kb_compare"])
def test_report_holds_names_as_text_and_no_element_or_file_of_theirs(reports, name):
    from retrieval_lib.report.html import CONTENT_SECURITY_POLICY

    html = reports[name]
    page_text = html.read_text(encoding="utf-8")
    page = _Page()
    page.feed(page_text)
    tags = [tag for tag, _ in page.elements]
    for forbidden in ("script", "iframe", "object", "embed", "svg", "math", "form", "base"):
        assert forbidden not in tags, (name, forbidden)
    handlers = [(t, a) for t, a in page.elements if any(k.startswith("on") for k in a)]
    assert handlers == [], (name, handlers[:3])
    images = [a.get("src", "") for t, a in page.elements if t == "img"]
    assert all(src.startswith("data:image/png;base64,") for src in images), name
    assert len(images) == _executed_pngs(html), name  # only the report's own figures
    links = [a["href"] for t, a in page.elements if t == "a" and "href" in a]
    assert [h for h in links if not h.startswith("#")] == [], name
    values = " ".join(v for _, a in page.elements for v in a.values()).lower()
    assert "javascript:" not in values and "pwned" not in values, name
    for marker in _embedded_file_markers():
        assert marker not in page_text, (name, marker[:20])
    assert f'content="{CONTENT_SECURITY_POLICY}"' in page_text
    text = "".join(page.text)
    for shown in SHOWN[name]:
        assert visible(shown) in text, (name, shown)


# ---------------------------------------------------------------------- headless Chromium


def _chromium() -> str | None:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


_CONTROL_PAGE = f"<!DOCTYPE html><title>control</title><p><img src=x onerror={PWN}></p>"

_HARNESS = """<!DOCTYPE html><html><body><pre id="result">pending</pre>
{frames}
<script>
var frames = Array.from(document.querySelectorAll("iframe")), results = {{}}, left = frames.length;
function inspect(frame) {{
  var doc = frame.contentDocument, all = Array.from(doc.querySelectorAll("*"));
  results[frame.id] = {{
    title: doc.title,
    handlers: all.filter(function (e) {{
      return Array.from(e.attributes).some(function (a) {{ return a.name.indexOf("on") === 0; }});
    }}).length,
    foreign_images: Array.from(doc.images).filter(function (i) {{
      return i.src.indexOf("data:image/png;base64,") !== 0; }}).length,
    svg: doc.querySelectorAll("svg").length,
    scripts: doc.querySelectorAll("script, iframe, object, embed").length,
    links: Array.from(doc.querySelectorAll("a[href]")).filter(function (a) {{
      return a.getAttribute("href").charAt(0) !== "#"; }}).length,
    text: doc.body ? doc.body.innerText.length : 0
  }};
}}
frames.forEach(function (frame) {{
  frame.addEventListener("load", function () {{
    // handlers of images that failed run before load; give queued tasks one more turn
    setTimeout(function () {{
      inspect(frame);
      left -= 1;
      if (left === 0) {{ document.getElementById("result").textContent = JSON.stringify(results); }}
    }}, 200);
  }});
}});
</script></body></html>"""


@pytest.mark.browser
def test_no_handler_fires_in_chromium(reports, tmp_path):
    chromium = _chromium()
    if chromium is None:  # as test_browser.py: CI installs Chromium (.ci/run), so fail there
        message = "headless Chromium not found (/usr/bin/chromium); apt-get install chromium"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {message}", pytrace=False)
        pytest.skip(message)
    frames = {}
    for name, html in reports.items():
        # the escaping alone is under test: a copy without the page's script-blocking policy,
        # beside the original so that relative references resolve the same way
        bare = html.with_name(f"{name}.no-csp.html")
        text = html.read_text(encoding="utf-8")
        bare.write_text(
            re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", text),
            encoding="utf-8",
        )
        assert "Content-Security-Policy" not in bare.read_text(encoding="utf-8")
        frames[name] = bare
    control = tmp_path / "control.html"
    control.write_text(_CONTROL_PAGE, encoding="utf-8")
    frames["control"] = control
    harness = tmp_path / "harness.html"
    harness.write_text(
        _HARNESS.format(
            frames="\n".join(
                f'<iframe id="{name}" src="{path.as_uri()}" width="1280" height="800"></iframe>'
                for name, path in frames.items()
            )
        ),
        encoding="utf-8",
    )
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--allow-file-access-from-files",
        "--virtual-time-budget=15000",
        "--dump-dom",
        harness.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    match = re.search(r'<pre id="result">(.*?)</pre>', done.stdout, re.DOTALL)
    assert match and match.group(1) != "pending", done.stderr[-2000:]
    results = json.loads(
        match.group(1)
        .replace("&quot;", '"')
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
    )
    # the control page's handler fired: the check sees a handler that runs
    assert results["control"]["title"] == "pwned"
    for name in reports:
        seen = results[name]
        assert seen["title"] == name, (name, seen)  # no handler changed it
        assert seen["handlers"] == seen["svg"] == seen["scripts"] == 0, (name, seen)
        assert seen["foreign_images"] == seen["links"] == 0, (name, seen)
        assert seen["text"] > 1000, (name, seen)  # the report rendered

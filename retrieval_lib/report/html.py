"""Self-contained HTML from an executed notebook: code hidden, figures embedded, no network.

nbconvert's templates load require.js, MathJax and mermaid from a CDN; a report must open
offline and request nothing, so every ``<script>`` is removed (the report needs none: PNG
figures and HTML tables are static).

Names from inputs are escaped where the notebooks format them (:mod:`retrieval_lib.safe_text`);
two more layers keep a name that slipped through from doing harm:

* nbconvert does not embed images that Markdown points at (``embed_images=False``): a
  ``![x](secret.txt)`` never reads a local file into the report;
* the page carries a Content-Security-Policy (:data:`CONTENT_SECURITY_POLICY`) that allows
  no script at all (no ``<script>``, no ``onerror=`` handler, no ``javascript:`` URL), images
  only as ``data:`` URIs and nothing fetched.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from retrieval_lib.io import atomic_write_text

__all__ = ["CONTENT_SECURITY_POLICY", "notebook_to_html", "write_html"]

#: The report's Content-Security-Policy: no script, no fetch, inline styles and data: images.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; "
    "form-action 'none'; base-uri 'none'"
)
_CSP_META = f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">'
_HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)

_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.DOTALL | re.IGNORECASE)
_CDN_ATTRS = (
    "mathjax_url",
    "require_js_url",
    "jquery_url",
    "jupyter_widgets_base_url",
    "widget_renderer_url",
    "mermaid_js_url",
    "mermaid_layout_elk_js_url",
)


def notebook_to_html(nb: Any, *, title: str | None = None) -> str:
    """Render an executed notebook node to a static, self-contained HTML page.

    Code is hidden, figures are embedded as PNG ``data:`` URIs, every ``<script>`` is removed
    and the page's Content-Security-Policy (:data:`CONTENT_SECURITY_POLICY`) allows no script
    and no fetch.
    """
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name="lab",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=False,
    )
    for attr in _CDN_ATTRS:
        if exporter.has_trait(attr):
            setattr(exporter, attr, "")
    resources = {"metadata": {"name": title}} if title else None
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    body = _SCRIPT.sub("", body)
    head = _HEAD.search(body)
    if head is None:  # nbconvert's lab template always has one
        raise ValueError("nbconvert wrote a page without <head>")
    return body[: head.end()] + _CSP_META + body[head.end() :]


def write_html(nb: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Render ``nb`` and write the HTML atomically to ``path``."""
    return atomic_write_text(path, notebook_to_html(nb, title=title))

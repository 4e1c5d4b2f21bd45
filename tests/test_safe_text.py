"""safe_text: a hostile name rendered by nbconvert's Markdown renderer is text, never markup.

The check is independent of the escaping: the Markdown is rendered by the renderer the HTML
report uses (nbconvert's mistune filter) and by a CommonMark reference (markdown-it-py, when
installed), the result parsed with ``html.parser``; the only elements allowed are the ones the
template around the name creates, and the text the reader sees is the name itself.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser

import pytest

from retrieval_lib.safe_text import (
    html_text,
    markdown_code,
    markdown_emphasis,
    markdown_strong,
    markdown_text,
    plot_label,
    visible,
)

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "<svg onload=alert(1)>",
    "![k](secret.txt)",
    "![x](/etc/hostname)",
    "[click](javascript:alert(1))",
    "<javascript:alert(1)>",
    "a`</code><img src=x onerror=alert(1)>![x](/etc/hostname)",
    "``</code><script>alert(1)</script>",
    "`",
    "cfg $^^$ and $_{$",
    "$$x$$ \\(y\\) \\[z\\]",
    "*em* _em_ **strong** ~~del~~",
    "a | b | c",
    "# heading",
    "line\n<script>alert(1)</script>\n# h",
    "&lt;img src=x onerror=alert(1)&gt;",
    "https://example.org www.example.org me@example.org",
    "<!-- comment -->",
    "\\`not code\\`",
    "run <b>1</b>\u2028x",
]


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)

    def handle_data(self, data):
        self.text += data

    def handle_comment(self, data):
        self.tags.append("<!--")


def _parse(markup: str) -> _Elements:
    parser = _Elements()
    parser.feed(markup)
    parser.close()
    return parser


def _renderers():
    renderers = []
    try:
        from nbconvert.filters.markdown_mistune import markdown2html_mistune
    except ImportError:  # pragma: no cover - nbconvert is a dev dependency
        pass
    else:
        renderers.append(("nbconvert", markdown2html_mistune))
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        pass
    else:
        md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table")
        renderers.append(("commonmark", md.render))
    if not renderers:
        pytest.skip("neither nbconvert nor markdown-it-py is installed")
    return renderers


@pytest.mark.parametrize("name", HOSTILE)
def test_markdown_text_renders_as_the_name_and_nothing_else(name):
    for label, render in _renderers():
        shown = _parse(render(f"config {markdown_text(name)} here"))
        assert shown.tags == ["p"], (label, name, shown.tags)
        assert shown.attrs == [], (label, name)
        assert shown.text.strip() == f"config {visible(name)} here", (label, name)


@pytest.mark.parametrize("name", HOSTILE)
def test_emphasis_and_strong_keep_only_their_own_element(name):
    for label, render in _renderers():
        em = _parse(render(markdown_emphasis(name)))
        strong = _parse(render(f"{markdown_strong(name)} (reward delta +1.00)"))
        assert em.tags == ["p", "em"], (label, name, em.tags)
        assert strong.tags == ["p", "strong"], (label, name, strong.tags)
        assert em.text.strip() == visible(name)
        assert strong.text.strip() == f"{visible(name)} (reward delta +1.00)"


@pytest.mark.parametrize("name", HOSTILE)
def test_markdown_code_is_one_code_span_holding_the_name(name):
    for label, render in _renderers():
        shown = _parse(render(f"- **A** {markdown_code(name)}: chunker {markdown_code(name)}"))
        assert shown.tags == ["ul", "li", "strong", "code", "code"], (label, name, shown.tags)
        assert shown.attrs == []
        assert shown.text.strip() == f"A {visible(name)}: chunker {visible(name)}", (label, name)


def test_markdown_table_cell_stays_one_cell():
    for label, render in _renderers():
        if label != "nbconvert":
            continue  # CommonMark has no tables
        table = "| query | note |\n|---|---|\n" + f"| {markdown_text('a | b')} | x |\n"
        shown = _parse(render(table))
        assert shown.tags.count("td") == 2, shown.tags


def test_html_text_is_inert_in_text_and_attributes():
    for name in HOSTILE:
        shown = _parse(f'<p title="{html_text(name)}">{html_text(name)}</p>')
        assert shown.tags == ["p"]
        assert shown.attrs == [("title", visible(name))]
        assert shown.text == visible(name)
    assert html_text("a\"b'c") == "a&quot;b&#x27;c"
    assert html.unescape(html_text("x<y")) == "x<y"


def test_control_characters_are_made_visible():
    assert visible("a\nb\r\x00\x1b\x7f\u2028") == "a\\x0ab\\x0d\\x00\\x1b\\x7f\\u2028"
    assert plot_label("t\nx $^^$") == "t\\x0ax $^^$"


def test_markdown_code_fence_is_longer_than_any_backtick_run():
    assert markdown_code("plain") == "`plain`"
    assert markdown_code("a`b") == "`` a`b ``"
    assert markdown_code("```") == "```` ``` ````"
    assert markdown_code(" lead") == "`  lead `"  # one padding space is stripped


# --------------------------------------------------------------------------- describe_value


def test_describe_value_gives_the_exact_size_of_a_huge_integer():
    from retrieval_lib.safe_text import describe_value

    # 10**k has k + 1 digits, 10**k - 1 has k (worked out by hand); beyond 4,300 digits
    # ``str`` refuses, so the size must not come from it
    for k in (20, 21, 399, 400, 4299, 5000, 20_000):
        assert describe_value(10**k) == f"an integer of {k + 1} digits"
        assert describe_value(10**k - 1) == f"an integer of {k} digits"
        assert describe_value(-(10**k)) == f"an integer of {k + 1} digits"
    # 2**64 is the first integer beyond 64 bits: 18446744073709551616, 20 digits
    assert describe_value(2**64) == "an integer of 20 digits"
    assert describe_value(2**64 - 1) == "18446744073709551615"


def test_describe_value_names_a_container_and_shows_its_start_briefly():
    import json

    from retrieval_lib.safe_text import describe_value

    assert describe_value([1, 2]) == "a JSON array [1, 2]"
    assert describe_value({"a": None}) == "a JSON object {'a': None}"
    deep = describe_value(json.loads("[" * 500 + "]" * 500))
    assert deep == "a JSON array [[[[...]]]]"
    wide = describe_value({f"key{i}": "v" * 100 for i in range(100)})
    assert wide.startswith("a JSON object {'key0': 'vvv") and len(wide) <= 80
    assert describe_value([10**5000]) == "a JSON array [<an integer of 5001 digits>]"
    assert (
        describe_value("x" * 10_000).startswith("'xxx") and len(describe_value("x" * 10_000)) <= 60
    )

"""Names from inputs shown as text, never as markup: one rule for Markdown, HTML and plots.

A run, config, model, task, tool or trial name, a kb run id or a file path comes from files
anyone can write. Formatted raw into Markdown, ``<img src=x onerror=...>`` runs script in
the reader's browser, ``![k](secret.txt)`` makes nbconvert embed a local file into the
report and ``[x](javascript:...)`` makes a link; in a matplotlib label, ``$^^$`` is parsed
as math text. So every name reaches a report through one of :func:`markdown_text`,
:func:`markdown_code`, :func:`html_text` or :func:`plot_label`, which all first make control
characters visible (:func:`visible`): a newline in a name must not start a Markdown block
nor a second plot line. Standard library only, so that every layer can use it.

Examples
--------
>>> markdown_text("![k](secret.txt)")
'&#33;&#91;k&#93;(secret.txt)'
>>> markdown_code("a`</code>")
'`` a`</code> ``'
>>> html_text('<img src=x onerror="alert(1)">')
'&lt;img src=x onerror=&quot;alert(1)&quot;&gt;'
>>> plot_label("cfg $^^$\\n2")
'cfg $^^$\\\\x0a2'
"""

from __future__ import annotations

import html
import re
import reprlib
from typing import Any

__all__ = [
    "describe_value",
    "html_text",
    "markdown_code",
    "markdown_emphasis",
    "markdown_strong",
    "markdown_text",
    "plot_label",
    "visible",
]

#: C0 and C1 control characters, DEL, and the Unicode line/paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: What Markdown (CommonMark + GFM tables/strikethrough/autolinks, nbconvert's math) could
#: read as syntax inside a line: HTML, links and images, emphasis, code, math, table cells,
#: headings, autolinks.
_MARKDOWN_SYNTAX = "\\`*_~[]<>&|$#!:@"
_MARKDOWN_ENTITIES = {ord(c): f"&#{ord(c)};" for c in _MARKDOWN_SYNTAX}
_WWW = re.compile(r"(www)\.", re.IGNORECASE)
_BACKTICKS = re.compile("`+")


def _digits(number: int) -> int:
    """How many decimal digits ``number`` has, without ``str`` (which refuses beyond 4,300)."""
    number = abs(number)
    digits = max(1, int((number.bit_length() - 1) * 0.30102999566398120))
    while 10**digits <= number:
        digits += 1
    while digits > 1 and 10 ** (digits - 1) > number:
        digits -= 1
    return digits


class _ValueRepr(reprlib.Repr):
    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 64:
            return f"<an integer of {_digits(x)} digits>"
        return super().repr_int(x, level)


_VALUE_REPR = _ValueRepr()
_VALUE_REPR.maxlevel = 3
_VALUE_REPR.maxstring = 60
_VALUE_REPR.maxother = 60
_VALUE_REPR.maxlong = 60
#: The longest preview of a container's content in :func:`describe_value`.
_PREVIEW = 60


def describe_value(value: Any) -> str:
    """What an unexpected value read from an input is, in a few words, for a warning or error
    message about an input field.

    Safe and short for any JSON value: a container is named (``a JSON object`` / ``a JSON
    array``) with a preview of its start, nested beyond 3 levels as ``...`` (a plain
    ``repr`` of a list nested 1,000 deep raises ``RecursionError``) and cut to 60
    characters; an integer beyond 64 bits is given by its size (a plain ``repr`` of one
    beyond 4,300 digits raises ``ValueError``); a long string is cut in the middle;
    anything else is its ``repr``.

    Examples
    --------
    >>> describe_value("ATIF-v2.0"), describe_value(None), describe_value(1.5)
    ("'ATIF-v2.0'", 'None', '1.5')
    >>> describe_value({"a": 1}), describe_value([1, 2])
    ("a JSON object {'a': 1}", 'a JSON array [1, 2]')
    >>> import json
    >>> describe_value(json.loads("[" * 900 + "]" * 900))
    'a JSON array [[[[...]]]]'
    >>> describe_value(10**400), describe_value(-(10**5000))
    ('an integer of 401 digits', 'an integer of 5001 digits')
    >>> len(describe_value("x" * 10_000)) <= 60
    True
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {_digits(value)} digits"
    text = _VALUE_REPR.repr(value)
    if isinstance(value, (dict, list)):
        if len(text) > _PREVIEW:
            text = text[: _PREVIEW - 3] + "..."
        return f"a JSON {'object' if isinstance(value, dict) else 'array'} {text}"
    return text


def visible(name: Any) -> str:
    r"""``str(name)`` with every control character written as ``\xNN`` (``\uNNNN``).

    Examples
    --------
    >>> visible("a\nb\tc"), visible(3)
    ('a\\x0ab\\x09c', '3')
    """
    text = str(name)

    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    return _CONTROL.sub(escape, text)


def markdown_text(name: Any) -> str:
    """``name`` as inline Markdown text: shown literally, never read as Markdown or HTML.

    Each character Markdown could read as syntax becomes a numeric character reference
    (CommonMark: an entity is never syntax) and so does the dot of ``www.``; the rest (letters,
    digits, spaces, ``-./,()`` and non-ASCII) stays as it is.

    Examples
    --------
    >>> markdown_text("base-line 1.2 (a/b)")
    'base-line 1.2 (a/b)'
    >>> markdown_text("<svg onload=alert(1)>")
    '&#60;svg onload=alert(1)&#62;'
    >>> markdown_text("[x](javascript:go) www.example.org")
    '&#91;x&#93;(javascript&#58;go) www&#46;example.org'
    """
    return _WWW.sub(r"\1&#46;", visible(name).translate(_MARKDOWN_ENTITIES))


def markdown_emphasis(text: Any) -> str:
    """``*text*``: a caption or a note in italics, its content shown as text.

    Examples
    --------
    >>> markdown_emphasis("pair: a vs [x](javascript:alert(1))")
    '*pair&#58; a vs &#91;x&#93;(javascript&#58;alert(1))*'
    """
    return f"*{markdown_text(text)}*"


def markdown_strong(text: Any) -> str:
    """``**text**``: a heading in bold, its content shown as text.

    Examples
    --------
    >>> markdown_strong("<b>task</b>")
    '**&#60;b&#62;task&#60;/b&#62;**'
    """
    return f"**{markdown_text(text)}**"


def markdown_code(name: Any) -> str:
    """``name`` as a Markdown code span that nothing in it can close.

    The fence is one backtick longer than the longest run of backticks in ``name``, and a
    space pads each side (CommonMark strips one space on each side of a padded span).
    Inside a code span ``<``, ``&``, ``$`` and ``[`` are text.

    Examples
    --------
    >>> markdown_code("run-1"), markdown_code("a``b")
    ('`run-1`', '``` a``b ```')
    >>> markdown_code("")
    '` `'
    """
    text = visible(name)
    if not text:
        return "` `"
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    if longest or text.startswith((" ", "`")) or text.endswith((" ", "`")):
        return f"{fence} {text} {fence}"
    return f"{fence}{text}{fence}"


def html_text(name: Any) -> str:
    """``name`` as HTML text or a quoted attribute value (``<``, ``>``, ``&``, quotes escaped).

    Examples
    --------
    >>> html_text("a & <b>")
    'a &amp; &lt;b&gt;'
    """
    return html.escape(visible(name), quote=True)


def plot_label(name: Any) -> str:
    """``name`` for a matplotlib label drawn with math text off (control characters visible).

    With ``text.parse_math`` off a ``$`` is an ordinary character; the report's figure
    functions draw with it off (:func:`retrieval_lib.report.figures.names_as_text`).

    Examples
    --------
    >>> plot_label("tool $_{$"), plot_label("a\\nb")
    ('tool $_{$', 'a\\\\x0ab')
    """
    return visible(name)

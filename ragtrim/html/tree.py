"""lxml tree primitives shared by fragment cleaning (``ragtrim.html.markup``) and main-content extraction
(``ragtrim.html.extract``): parsing, element tests, dropping, per-element text statistics and rendering to text.

Everything here is iterative (no Python recursion over the tree), so deeply nested input cannot hit RecursionError;
``parse_html`` raises ``TooDeep`` for documents nested deeper than libxml2's limit.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from lxml import etree

from ragtrim.errors import InputError
from ragtrim.text.scripts import latin_equivalent_len

# Never content, in any mode.
JUNK_TAGS = frozenset({
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "applet", "button",
    "input", "select", "option", "textarea", "link", "meta", "head", "title", "img", "picture", "video", "audio",
    "source", "track", "map", "area", "math",
})
CODE_TAGS = frozenset({"script", "style", "noscript", "template"})
# Boilerplate containers by tag.
BOILERPLATE_TAGS = frozenset({"nav", "aside", "footer", "header", "menu", "dialog", "form"})
PAGE_BOILERPLATE_TAGS = frozenset({"nav", "aside", "footer", "menu", "dialog"})
"""On whole pages headers stay: the article's own header often holds its title."""
_BOILERPLATE_ROLES = frozenset({
    "navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog", "menu", "menubar",
})
BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "div",
    "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
    "hr", "html", "li", "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "ul", "br",
})
# Removed without a mention in the report: every page has them, and their scripts/styles are counted first.
_UNCOUNTED = frozenset({"head", "meta", "link", "title", "source", "track", "area"})

_DISPLAY_NONE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_SURROGATES = re.compile("[\ud800-\udfff]")
# Commas of every script: ASCII, Arabic, small and vertical forms, ideographic (、, half-width ､) and full-width.
_COMMAS = re.compile(r"[,\u060c\ufe50\ufe51\ufe10\ufe11\u2e41\u2e34\u2e32\u3001\uff0c\uff64]")
# libxml2's HTML parser keeps these in text nodes, but lxml refuses to set them (ValueError: a fuzzed "\x0b").
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


# -- parsing and dropping -------------------------------------------------------------------------------------------
class TooDeep(InputError):
    """The document is nested deeper than the parser allows; the caller uses the regex fallback."""


def parse_html(text: str) -> Any:
    """The root element of ``text`` parsed by libxml2's forgiving HTML parser (None when it holds no element);
    raises ``TooDeep`` when the nesting exceeds the parser's limit."""
    parser = etree.HTMLParser(
        encoding="utf-8", huge_tree=True, remove_comments=True, remove_pis=True, no_network=True,
        default_doctype=False,
    )
    # Parsing bytes avoids lxml's refusal of str with an encoding declaration; lone surrogates from already
    # decoded non-UTF-8 text (``errors="surrogateescape"``) become U+FFFD instead of crashing.
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        data = _SURROGATES.sub("\ufffd", text).encode("utf-8")
    root = etree.fromstring(data, parser)
    for err in parser.error_log:
        if err.type_name == "ERR_RESOURCE_LIMIT" or "depth" in err.message.lower():
            raise TooDeep(err.message)
    return root


def tag_of(el: Any) -> str:
    """The element's tag name; "" for comments and processing instructions."""
    tag = el.tag  # libxml2's HTML parser already lower-cases tag names
    return tag if isinstance(tag, str) else ""


def drop_element(el: Any) -> None:
    """Remove ``el`` and its subtree, keeping its tail text in place."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    if tail:
        prev = el.getprevious()
        if prev is not None:
            prev.tail = _XML_INVALID.sub("", (prev.tail or "") + tail)
        else:
            parent.text = _XML_INVALID.sub("", (parent.text or "") + tail)
    parent.remove(el)


def class_hints(el: Any) -> str:
    """The element's class and id, the names that hint at its role ("sidebar", "article-body")."""
    return f"{el.get('class') or ''} {el.get('id') or ''}".strip()


def is_hidden(el: Any) -> bool:
    """``hidden``, ``aria-hidden="true"`` or an inline ``display:none`` / ``visibility:hidden``."""
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    return bool(style) and _DISPLAY_NONE.search(style) is not None


def drop_where(root: Any, removed: Counter[str], pred: Any, label: Any = None) -> None:
    """Drop every element matching ``pred`` (outermost first; descendants of dropped ones are skipped)."""
    doomed: list[Any] = []
    skip_depth = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        if event == "start":
            if skip_depth:
                skip_depth += 1
            elif el is not root and pred(el):
                doomed.append(el)
                skip_depth = 1
        elif skip_depth:
            skip_depth -= 1
    for el in doomed:
        name = label(el) if label else tag_of(el)
        if name and name not in _UNCOUNTED:
            removed[name] += 1
        drop_element(el)


# -- measuring ------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class TextStats:
    """Text, link text and commas of an element's subtree (whitespace collapsed), and its links, paragraphs and
    list items. Lengths are in Latin-letter equivalents (``ragtrim.text.scripts.latin_equivalent_len``: a Han or
    Kana character counts 3, a Hangul syllable 2), so every threshold in characters means as much text in any
    script."""

    text_chars: int = 0
    link_chars: int = 0
    block_child_chars: int = 0
    commas: int = 0
    links: int = 0
    paragraphs: int = 0  # <p> elements in the subtree, itself included
    list_items: int = 0  # <li> elements in the subtree, itself included

    @property
    def own_chars(self) -> int:
        return self.text_chars - self.block_child_chars

    @property
    def link_density(self) -> float:
        return self.link_chars / self.text_chars if self.text_chars else 0.0


def _nchars(s: str | None) -> int:
    if not s:
        return 0
    return latin_equivalent_len(" ".join(s.split()))


def measure(root: Any) -> dict[Any, TextStats]:
    """Text length, link text length and commas for every element, in one iterative pass."""
    stats: dict[Any, TextStats] = {}
    stack: list[tuple[Any, TextStats]] = []
    link_depth = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = tag_of(el)
        if event == "start":
            st = TextStats()
            n = _nchars(el.text)
            st.text_chars = n
            st.commas = len(_COMMAS.findall(el.text)) if el.text else 0
            if tag == "a":
                link_depth += 1
                st.links = 1
            st.paragraphs = int(tag == "p")
            st.list_items = int(tag == "li")
            if link_depth:
                st.link_chars = n
            stack.append((el, st))
            stats[el] = st
        else:
            _, st = stack.pop()
            if tag == "a":
                link_depth -= 1
            if stack:
                parent = stack[-1][1]
                tail = _nchars(el.tail)
                parent.text_chars += st.text_chars + tail
                parent.link_chars += st.link_chars + (tail if link_depth else 0)
                parent.commas += st.commas + (len(_COMMAS.findall(el.tail)) if el.tail else 0)
                parent.links += st.links
                parent.paragraphs += st.paragraphs
                parent.list_items += st.list_items
                if tag in BLOCK_TAGS:
                    parent.block_child_chars += st.text_chars
    return stats


# -- rendering ------------------------------------------------------------------------------------------------------
def render_text(root: Any, keep_tables: bool = True) -> str:
    """Text with one line per block element, whitespace collapsed (kept inside ``pre``), a table row's cells
    tab-separated (so the sentence splitter and the compressor still see a row of cells: ``Pro\t200 GB``)."""
    out: list[str] = []
    pre_depth = 0

    def emit(s: str | None) -> None:
        if s:
            out.append(s if pre_depth else _collapse(s))

    skip = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = tag_of(el)
        if event == "start":
            if skip or (not keep_tables and tag == "table"):
                skip += 1
                continue
            if tag == "pre":
                pre_depth += 1
            if tag in ("td", "th"):
                out.append(_CELL)
            elif tag == "br" or tag in BLOCK_TAGS:
                out.append("\n")
            emit(el.text)
        else:
            if skip:
                skip -= 1
                if skip:
                    continue
                emit(el.tail if el is not root else None)
                continue
            if tag == "pre":
                pre_depth -= 1
            if tag in BLOCK_TAGS and tag not in ("td", "th", "br"):
                out.append("\n")
            if el is not root:
                emit(el.tail)
    return tidy("".join(out))


def _collapse(s: str) -> str:
    """HTML whitespace: runs become one space, kept at the edges so inline neighbours stay apart."""
    core = " ".join(s.split())
    if not core:
        return " "
    return (" " if s[0].isspace() else "") + core + (" " if s[-1].isspace() else "")


_CELL = "\x1f"
"""Marks where a table cell starts while a page is rendered; ``tidy`` turns it into a tab between cells."""


def tidy(text: str) -> str:
    """One space between words, no empty lines, no zero-width spaces; table cells (``_CELL``) tab-separated."""
    if "\u200b" in text:
        text = text.replace("\u200b", "")
    lines = (_tidy_line(line) if _CELL in line else " ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def _tidy_line(line: str) -> str:
    """A table row: its cells, whitespace collapsed in each, joined by tabs (what precedes the first cell, and empty
    cells at the end, dropped)."""
    parts = [" ".join(p.split()) for p in line.split(_CELL)]
    head, row = parts[0], parts[1:]
    while row and not row[-1]:
        row.pop()
    return "\t".join(([head] if head else []) + row)


# -- boilerplate ----------------------------------------------------------------------------------------------------
def is_boilerplate_tag(el: Any, tags: frozenset[str] | set[str] = BOILERPLATE_TAGS) -> bool:
    """Junk or hidden elements, boilerplate ``tags`` (fragments: ``BOILERPLATE_TAGS``; pages:
    ``PAGE_BOILERPLATE_TAGS``) and boilerplate ARIA roles."""
    tag = tag_of(el)
    if tag in JUNK_TAGS or not tag:
        return True
    if tag in tags:
        return True
    role = (el.get("role") or "").lower()
    if role in _BOILERPLATE_ROLES:
        return True
    return is_hidden(el)


"""What is markup, and markup cleaned without main-content selection: the cheap HTML detectors, fragment cleaning
(boilerplate tags, cookie banners and link-dense blocks dropped, all other text kept), and the linear-time regex
fallback for documents nested deeper than libxml2's limit.

Main-content extraction for whole pages is ``ragtrim.html.extract``.
"""

from __future__ import annotations

import html as _html
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal

from ragtrim.html.tree import (
    BLOCK_TAGS,
    CODE_TAGS,
    JUNK_TAGS,
    TooDeep,
    class_hints,
    drop_where,
    is_boilerplate_tag,
    measure,
    parse_html,
    render_text,
    tag_of,
    tidy,
)

ExtractMethod = Literal["page", "fragment", "fallback", "plain"]

# A chunk counts as HTML only if it contains something that is unmistakably markup: a known tag name right after
# '<' (no space: "a < b" stays plain text), a comment, or a doctype. The regex runs before any parsing.
_KNOWN_TAGS = (
    "a|abbr|address|article|aside|b|blockquote|body|br|button|caption|center|code|dd|del|details|dialog|div|dl|dt|"
    "em|embed|fieldset|figcaption|figure|font|footer|form|h[1-6]|head|header|hr|html|i|iframe|img|input|label|li|"
    "link|main|mark|menu|meta|nav|noscript|ol|option|p|pre|q|s|script|section|select|small|span|strike|strong|"
    "style|sub|summary|sup|svg|table|tbody|td|template|textarea|tfoot|th|thead|time|title|tr|tt|u|ul|video"
)
_HTML_RE = re.compile(rf"<(?:/?(?:{_KNOWN_TAGS})(?=[\s/>])|!--|!doctype\b)", re.IGNORECASE)
_KNOWN_TAG_NAMES = frozenset(
    [t for t in _KNOWN_TAGS.split("|") if not t.startswith("h[")] + [f"h{i}" for i in range(1, 7)]
)
_PAGE_RE = re.compile(r"<(?:html|body|!doctype)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Extraction:
    """The text of an HTML input and what was removed to get it.

    ``removed`` counts removed elements by tag name (``"link-dense"`` for link-dense blocks, ``"hinted"`` for
    blocks removed because of class/id hints, ``"outside-main"`` for blocks outside the chosen main content).
    """

    text: str
    method: ExtractMethod
    removed: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


def looks_like_html(text: str) -> bool:
    """True when ``text`` contains real markup; plain text such as ``"a < b and c > d"`` gives False."""
    return "<" in text and _HTML_RE.search(text) is not None


def looks_like_page(text: str) -> bool:
    """True for whole documents: a doctype, ``<html>`` or ``<body>`` tag in the text."""
    return _PAGE_RE.search(text) is not None


# Tags that prose about HTML names ("put it in the <title> element") and that cleaning deletes together with the
# words between them. A chunk whose only markup is such bare tags is prose, unless tags are as common as words.
_MENTIONED_TAGS = frozenset({
    "title", "head", "script", "style", "meta", "link", "noscript", "svg", "template", "iframe", "img", "input",
    "button", "select", "option", "textarea", "video", "embed",
})
# Possessive: a "<name" that meets another "<" before any ">" fails once instead of trying every split of the name.
_ANY_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*+)([^<>]*+)>")
_WORDS_PER_MENTION = 2
"""A chunk of bare mentioned tags is still markup when it has at most this many words (outside tags) per tag."""


def reads_as_markup(text: str) -> bool:
    """True when the markup in ``text`` is there to be rendered, not talked about.

    ``looks_like_html`` finds any known tag; this also asks what the tags are doing. A page (doctype, ``<html>``,
    ``<body>``), a comment, a tag with attributes, or a tag that structures or formats text (``<p>``, ``<div>``,
    ``<li>``, ``<br>``, ``<b>``, ``<a>``, ``<span>``, ...) make it markup. A chunk whose only tags are bare head or
    embedded-content tags (``<title>``, ``<script>``, ``<meta>``, ``<img>``, ...) is prose about HTML ("Use the
    <title> element, e.g. <title>My page</title>, in the head.") and stays plain text, since cleaning would delete
    the words between them; unless it is tag-dense (at most ``_WORDS_PER_MENTION`` words outside tags per tag,
    as in ``"<title>Buses</title>"``).
    """
    if "<!--" in text or looks_like_page(text):
        return True
    tags = 0
    for m in _ANY_TAG.finditer(text):
        name = m.group(2).lower()
        if name not in _KNOWN_TAG_NAMES:
            continue
        attrs = m.group(3).strip()
        if name not in _MENTIONED_TAGS or (attrs and attrs != "/"):
            return True
        tags += 1
    if not tags:  # known tags that _ANY_TAG cannot see (an unclosed "<p" at the end): leave it to the cleaner
        return True
    words = len(_ANY_TAG.sub(" ", text).split())
    return words <= _WORDS_PER_MENTION * tags



# -- fragment cleaning ----------------------------------------------------------------------------------------------
_BANNER_HINTS = re.compile(r"cookie|consent|gdpr|newsletter|subscribe|paywall", re.IGNORECASE)


def _is_cookie_or_banner(el: Any) -> bool:
    hints = class_hints(el)
    return bool(hints) and _BANNER_HINTS.search(hints) is not None


def _drop_link_dense(root: Any, removed: Counter[str], *, max_density: float = 0.5, min_links: int = 3) -> None:
    stats = measure(root)

    def link_dense(el: Any) -> bool:
        tag = tag_of(el)
        if tag not in ("ul", "ol", "div", "section", "table", "p", "dl", "span"):
            return False
        st = stats.get(el)
        if st is None or st.links < 2:
            return False
        return st.link_density > max_density and (st.links >= min_links or st.link_density > 0.9)

    drop_where(root, removed, link_dense, lambda _el: "link-dense")


def parse_markup(text: str, method: ExtractMethod) -> tuple[Any, Counter[str]] | Extraction:
    """The parsed tree of ``text`` with scripts, styles and templates dropped, and the count of what was dropped;
    or, when there is no tree to clean, the finished ``Extraction``: the regex fallback for documents nested deeper
    than the parser allows, the unescaped text (as ``method``) when the parser finds no element."""
    try:
        root = parse_html(text)
    except TooDeep:
        return strip_tags_fallback(text)
    if root is None:
        return Extraction(tidy(_html.unescape(text)), method)
    removed: Counter[str] = Counter()
    drop_where(root, removed, lambda el: tag_of(el) in CODE_TAGS)
    return root, removed


def clean_fragment(text: str, *, keep_tables: bool = True) -> Extraction:
    """Strip boilerplate tags (script/style/nav/header/footer/aside/menus/forms/cookie banners) and link-dense blocks
    from an HTML fragment and return its text; no main-content selection."""
    # Scripts/styles go first (parse_markup) so those inside <head> are reported, then boilerplate tags and banners.
    parsed = parse_markup(text, "fragment")
    if isinstance(parsed, Extraction):
        return parsed
    root, removed = parsed
    drop_where(root, removed, lambda el: is_boilerplate_tag(el) or _is_cookie_or_banner(el),
               lambda el: "cookie-banner" if tag_of(el) not in JUNK_TAGS and _is_cookie_or_banner(el) else tag_of(el))
    if text.count("<a ") + text.count("<A ") >= 2:  # a link-dense block needs links; skip the measuring pass
        _drop_link_dense(root, removed)
    return Extraction(render_text(root, keep_tables), "fragment", MappingProxyType(dict(removed)))


# -- fallback -------------------------------------------------------------------------------------------------------
_FALLBACK_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "head", "nav", "footer", "aside")
# Where a dropped block or a comment may start; the rest of each match is found by ``_fallback_drops``.
_FALLBACK_DROP_OPEN = re.compile(rf"<(?:({'|'.join(_FALLBACK_DROP_TAGS)})\b|!--)", re.IGNORECASE)
_FALLBACK_BLOCK_OPEN = re.compile(rf"</?(?:{'|'.join(sorted(BLOCK_TAGS))})\b", re.IGNORECASE)
_FALLBACK_TAG = re.compile(r"</?[a-zA-Z!][^<>]*>")


@lru_cache(maxsize=64)
def _closing_tag(name: str) -> re.Pattern[str]:
    return re.compile(rf"</{re.escape(name)}\s*>", re.IGNORECASE)


class _NextMatch:
    """The first match of a pattern at or after a position, remembered while later queries can reuse it.

    Queries come with rising positions, so each stretch of text is searched once: a run of 40,000 unclosed
    ``<script>`` tags costs one search instead of one per tag (``.*?</script>`` made the fallback quadratic)."""

    __slots__ = ("_found", "_pattern", "_searched_from")

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self._pattern = pattern
        self._searched_from = -1
        self._found: re.Match[str] | None = None

    def at_or_after(self, text: str, pos: int) -> re.Match[str] | None:
        found = self._found
        if self._searched_from < 0 or pos < self._searched_from or (found is not None and pos > found.start()):
            found = self._found = self._pattern.search(text, pos)
            self._searched_from = pos
        return found


_GT = re.compile(">")
_COMMENT_END = re.compile("-->")


def _fallback_drops(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, what)`` of each dropped block (``<script ...>...</script>`` and the like, by tag name) and
    comment, leftmost first: what ``re.finditer`` gives for
    ``<(script|style|...)\\b[^>]*>.*?</\\1\\s*>|<!--.*?-->`` (IGNORECASE, DOTALL), in one pass."""
    out: list[tuple[int, int, str]] = []
    next_gt = _NextMatch(_GT)
    next_comment_end = _NextMatch(_COMMENT_END)
    closers: dict[str, _NextMatch] = {}
    pos = 0
    while (m := _FALLBACK_DROP_OPEN.search(text, pos)) is not None:
        start, name = m.start(), m.group(1)
        pos = start + 1  # unless a match below moves past it
        if name is None:
            close = next_comment_end.at_or_after(text, start + 4)
            if close is not None:
                out.append((start, close.end(), "comment"))
                pos = close.end()
            continue
        gt = next_gt.at_or_after(text, m.end())
        if gt is None:
            continue
        key = name.lower()
        closer = closers.get(key)
        if closer is None:
            closer = closers[key] = _NextMatch(_closing_tag(key))
        close = closer.at_or_after(text, gt.end())
        if close is not None:
            out.append((start, close.end(), key))
            pos = close.end()
    return out


def _block_tag_spans(text: str) -> list[tuple[int, int]]:
    """Spans of ``</?(block tag)\\b[^>]*>`` as ``re.finditer`` gives them; the ``[^>]*>`` part is the next ``>``,
    found once per tag instead of rescanned from every unclosed ``<div``."""
    out: list[tuple[int, int]] = []
    pos = 0
    while (m := _FALLBACK_BLOCK_OPEN.search(text, pos)) is not None:
        gt = text.find(">", m.end())
        if gt < 0:  # no later tag can close either
            break
        out.append((m.start(), gt + 1))
        pos = gt + 1
    return out


def _replace_spans(text: str, spans: list[tuple[int, int]], by: str) -> str:
    parts: list[str] = []
    pos = 0
    for a, b in spans:
        parts.append(text[pos:a])
        parts.append(by)
        pos = b
    parts.append(text[pos:])
    return "".join(parts)


def strip_tags_fallback(text: str) -> Extraction:
    """Linear-time cleaning for input the parser cannot hold (nesting deeper than libxml2's limit).

    Drops script/style/head/nav/footer/aside blocks and comments, turns block tags into line breaks, removes other
    tags and decodes entities. No main-content selection. Every step is one pass over the text (unclosed blocks
    and comments stay in place, as with the regexes the steps replace).
    """
    drops = _fallback_drops(text)
    dropped = Counter(what for _, _, what in drops)
    body = _replace_spans(text, [(a, b) for a, b, _ in drops], " ")
    body = _replace_spans(body, _block_tag_spans(body), "\n")
    body = _FALLBACK_TAG.sub("", body)
    return Extraction(tidy(_html.unescape(body)), "fallback", MappingProxyType(dict(dropped)))


def describe_removed(removed: Mapping[str, int]) -> str:
    """``{"nav": 1, "script": 2}`` -> ``"nav, 2 scripts"`` (most frequent first, then by name)."""
    parts = []
    for name, n in sorted(removed.items(), key=lambda kv: (-kv[1], kv[0])):
        parts.append(name if n == 1 else f"{n} {name}s")
    return ", ".join(parts)

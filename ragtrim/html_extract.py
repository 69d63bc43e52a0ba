"""Pure HTML-to-text functions: a cheap HTML detector, fragment cleaning, and main-content extraction for pages.

Everything here is iterative (no Python recursion over the tree), so deeply nested input cannot hit RecursionError.
Documents nested deeper than libxml2's limit fall back to a linear-time regex tag stripper (``method="fallback"``).

Main-content extraction (``extract_main_content``) is a readability-style scorer written for this project:

1. Parse with lxml (libxml2's forgiving HTML parser); drop never-content tags (script, style, svg, forms' controls,
   media) and hidden elements (``hidden``, ``aria-hidden``, ``display:none``).
2. Drop boilerplate containers: ``nav``/``aside``/``footer``/``menu``/``dialog`` and ARIA landmarks for navigation,
   banners, footers and dialogs, and elements whose class/id names a boilerplate role (menu, sidebar, share, related,
   comment, cookie, newsletter, ...) unless the name also says content (article, body, post, entry, story, ...).
3. Score every block whose own text is at least 25 characters: 1 + commas + one point per 100 characters (max 3);
   add the score to its parent, half to its grandparent and a decaying share further up. Containers start from a tag
   prior and a class/id hint weight; the final score is discounted by the container's link density.
4. Take the best container, climb to an ancestor when several strong candidates share it or a parent scores higher,
   and add siblings that score well or are plain low-link paragraphs.
5. Clean the chosen subtree: remove link-dense and list-like blocks, blocks with negative hints, and the page title.
6. Render text with one line per block (headings, paragraphs, list items, table rows) and entities decoded.
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

from lxml import etree

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

# Never content, in any mode.
_JUNK_TAGS = frozenset({
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "applet", "button",
    "input", "select", "option", "textarea", "link", "meta", "head", "title", "img", "picture", "video", "audio",
    "source", "track", "map", "area", "math",
})
_CODE_TAGS = frozenset({"script", "style", "noscript", "template"})
# Boilerplate containers by tag.
_BOILERPLATE_TAGS = frozenset({"nav", "aside", "footer", "header", "menu", "dialog", "form"})
_BOILERPLATE_ROLES = frozenset({
    "navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog", "menu", "menubar",
})
_BLOCK_TAGS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "div",
    "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header",
    "hr", "html", "li", "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "ul", "br",
})
# Removed without a mention in the report: every page has them, and their scripts/styles are counted first.
_UNCOUNTED = frozenset({"head", "meta", "link", "title", "source", "track", "area"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_SCORABLE = frozenset({"p", "pre", "td", "blockquote", "div", "section", "article", "main", "dd", "font", "center"})

# Class/id hints. Negative names mark boilerplate roles; positive names mark the story itself.
_NEGATIVE_HINTS = re.compile(
    r"(?:^|[\s_-])(?:ad|ads|advert\w*|banner|breadcrumbs?|byline|combx|comments?|comment-\w+|community|consent|"
    r"contact|cookies?|cookie\w*|disqus|extra|foot|footer|footnote|gdpr|header|hidden|masthead|media|menu|meta|"
    r"modal|more|nav|navbar|navigation|newsletter|outbrain|pager|pagination|popular|popup|promo\w*|recirc\w*|"
    r"recommend\w*|related|remark|rss|scroll|share|sharing|shopping|shoutbox|sidebar|skyscraper|social|"
    r"sponsor\w*|subscribe|subscription|tags?|taboola|tool|toolbar|tools|trending|tweet|twitter|widget|"
    r"signup|sign-up|login|author-bio|bio|caption|credit|print|skip|teaser|most-\w+|read-more|readmore|"
    r"inline-ad|newsletter\w*|paywall|overlay)(?=$|[\s_-])",
    re.IGNORECASE,
)
_POSITIVE_HINTS = re.compile(
    r"article|body|content|entry|h-entry|hentry|main|page|post|story|text|blog|prose|rich-text|richtext",
    re.IGNORECASE,
)
# Names that mark a block as boilerplate strongly enough to remove it before scoring (unless also positive).
_UNLIKELY_HINTS = re.compile(
    r"-ad-|ai2html|banner|breadcrumb|combx|comment|community|cover-wrap|disqus|extra|footer|gdpr|header|legends|"
    r"menu|related|remark|replies|rss|shoutbox|sidebar|skyscraper|social|sponsor|supplemental|ad-break|agegate|"
    r"pagination|pager|popup|yom-remote|cookie|consent|newsletter|subscribe|share|sharing|outbrain|taboola|"
    r"recirc|recommend|trending|most-popular|promo|navbar|navigation|signup|paywall|modal|overlay",
    re.IGNORECASE,
)
_MAYBE_CONTENT = re.compile(r"and|article|body|column|content|main|shadow|story|entry|post", re.IGNORECASE)
_DISPLAY_NONE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_WS = re.compile(r"\s+")
_SURROGATES = re.compile("[\ud800-\udfff]")
_COMMAS = re.compile(r"[,\u060c\ufe50\ufe10\ufe11\u2e41\u2e34\u2e32\uff0c]")


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


# -- parsing --------------------------------------------------------------------------------------------------------
class _TooDeep(Exception):
    """The document is nested deeper than the parser allows; the caller uses the regex fallback."""


def _parse(text: str) -> Any:
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
            raise _TooDeep(err.message)
    return root


def _tag(el: Any) -> str:
    tag = el.tag  # libxml2's HTML parser already lower-cases tag names
    return tag if isinstance(tag, str) else ""


def _drop(el: Any) -> None:
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


# libxml2's HTML parser keeps these in text nodes, but lxml refuses to set them (ValueError: a fuzzed "\x0b").
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _hints(el: Any) -> str:
    return f"{el.get('class') or ''} {el.get('id') or ''}".strip()


def _is_hidden(el: Any) -> bool:
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    return bool(style) and _DISPLAY_NONE.search(style) is not None


def _drop_where(root: Any, removed: Counter[str], pred: Any, label: Any = None) -> None:
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
        name = label(el) if label else _tag(el)
        if name and name not in _UNCOUNTED:
            removed[name] += 1
        _drop(el)


# -- measuring ------------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Stats:
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
    return len(" ".join(s.split()))


def _measure(root: Any) -> dict[Any, _Stats]:
    """Text length, link text length and commas for every element, in one iterative pass."""
    stats: dict[Any, _Stats] = {}
    stack: list[tuple[Any, _Stats]] = []
    link_depth = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = _tag(el)
        if event == "start":
            st = _Stats()
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
                if tag in _BLOCK_TAGS:
                    parent.block_child_chars += st.text_chars
    return stats


def _class_weight(el: Any) -> int:
    hints = _hints(el)
    if not hints:
        return 0
    weight = 0
    if _NEGATIVE_HINTS.search(hints):
        weight -= 25
    if _POSITIVE_HINTS.search(hints):
        weight += 25
    return weight


def _tag_prior(tag: str) -> float:
    if tag in ("div", "article", "main", "section"):
        return 5.0
    if tag in ("pre", "td", "blockquote"):
        return 3.0
    if tag in ("address", "ol", "ul", "dl", "dd", "dt", "li", "form"):
        return -3.0
    if tag in _HEADINGS or tag == "th":
        return -5.0
    return 0.0


# -- rendering ------------------------------------------------------------------------------------------------------
def _render(root: Any, keep_tables: bool = True) -> str:
    """Text with one line per block element, whitespace collapsed (kept inside ``pre``), table cells tab-separated."""
    out: list[str] = []
    pre_depth = 0

    def emit(s: str | None) -> None:
        if s:
            out.append(s if pre_depth else _collapse(s))

    skip = 0
    for event, el in etree.iterwalk(root, events=("start", "end")):
        tag = _tag(el)
        if event == "start":
            if skip or (not keep_tables and tag == "table"):
                skip += 1
                continue
            if tag == "pre":
                pre_depth += 1
            if tag in ("td", "th"):
                out.append("\t")
            elif tag == "br" or tag in _BLOCK_TAGS:
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
            if tag in _BLOCK_TAGS and tag not in ("td", "th", "br"):
                out.append("\n")
            if el is not root:
                emit(el.tail)
    return _tidy("".join(out))


def _collapse(s: str) -> str:
    """HTML whitespace: runs become one space, kept at the edges so inline neighbours stay apart."""
    core = " ".join(s.split())
    if not core:
        return " "
    return (" " if s[0].isspace() else "") + core + (" " if s[-1].isspace() else "")


def _tidy(text: str) -> str:
    if "\u200b" in text:
        text = text.replace("\u200b", "")
    lines = (" ".join(line.split()) for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


# -- fragment cleaning ----------------------------------------------------------------------------------------------
_PAGE_BOILERPLATE_TAGS = frozenset({"nav", "aside", "footer", "menu", "dialog"})
"""On whole pages headers stay: the article's own header often holds its title."""
_BANNER_HINTS = re.compile(r"cookie|consent|gdpr|newsletter|subscribe|paywall", re.IGNORECASE)


def _is_boilerplate_tag(el: Any, tags: frozenset[str] | set[str] = _BOILERPLATE_TAGS) -> bool:
    """Junk or hidden elements, boilerplate ``tags`` (fragments: ``_BOILERPLATE_TAGS``; pages:
    ``_PAGE_BOILERPLATE_TAGS``) and boilerplate ARIA roles."""
    tag = _tag(el)
    if tag in _JUNK_TAGS or not tag:
        return True
    if tag in tags:
        return True
    role = (el.get("role") or "").lower()
    if role in _BOILERPLATE_ROLES:
        return True
    return _is_hidden(el)


def _is_cookie_or_banner(el: Any) -> bool:
    hints = _hints(el)
    return bool(hints) and _BANNER_HINTS.search(hints) is not None


def _drop_link_dense(root: Any, removed: Counter[str], *, max_density: float = 0.5, min_links: int = 3) -> None:
    stats = _measure(root)

    def link_dense(el: Any) -> bool:
        tag = _tag(el)
        if tag not in ("ul", "ol", "div", "section", "table", "p", "dl", "span"):
            return False
        st = stats.get(el)
        if st is None or st.links < 2:
            return False
        return st.link_density > max_density and (st.links >= min_links or st.link_density > 0.9)

    _drop_where(root, removed, link_dense, lambda _el: "link-dense")


def clean_fragment(text: str, *, keep_tables: bool = True) -> Extraction:
    """Strip boilerplate tags (script/style/nav/header/footer/aside/menus/forms/cookie banners) and link-dense blocks
    from an HTML fragment and return its text; no main-content selection."""
    try:
        root = _parse(text)
    except _TooDeep:
        return strip_tags_fallback(text)
    if root is None:
        return Extraction(_tidy(_html.unescape(text)), "fragment")
    removed: Counter[str] = Counter()
    # One pass: scripts/styles first so those inside <head> are reported, then boilerplate tags and banners.
    _drop_where(root, removed, lambda el: _tag(el) in _CODE_TAGS)
    _drop_where(root, removed, lambda el: _is_boilerplate_tag(el) or _is_cookie_or_banner(el),
                lambda el: "cookie-banner" if _tag(el) not in _JUNK_TAGS and _is_cookie_or_banner(el) else _tag(el))
    if text.count("<a ") + text.count("<A ") >= 2:  # a link-dense block needs links; skip the measuring pass
        _drop_link_dense(root, removed)
    return Extraction(_render(root, keep_tables), "fragment", MappingProxyType(dict(removed)))


# -- main-content extraction ----------------------------------------------------------------------------------------
def _is_unlikely(el: Any, stats: Mapping[Any, _Stats], total_chars: int) -> bool:
    tag = _tag(el)
    if tag in ("body", "a", "html", "main", "article"):
        return False
    hints = _hints(el)
    if not hints:
        return False
    if not _UNLIKELY_HINTS.search(hints) or _MAYBE_CONTENT.search(hints):
        return False
    # A wrapper holding most of the page cannot be boilerplate, whatever its class says ("page-ad-margins").
    st = stats.get(el)
    return st is None or st.text_chars <= 0.5 * total_chars


def _score_candidates(root: Any, stats: Mapping[Any, _Stats]) -> dict[Any, float]:
    scores: dict[Any, float] = {}

    def init(el: Any) -> None:
        if el not in scores:
            scores[el] = _tag_prior(_tag(el)) + _class_weight(el)

    for el in root.iter():
        tag = _tag(el)
        if tag not in _SCORABLE:
            continue
        st = stats.get(el)
        if st is None:
            continue
        own = st.own_chars if tag not in ("p", "pre", "td", "blockquote") else st.text_chars
        if own < 25:
            continue
        # Count commas and length of the own text only for containers, the whole text for paragraphs.
        score = 1.0 + min(st.commas, 30 if tag in ("p", "pre", "blockquote") else 10) + min(own // 100, 3)
        if st.link_density > 0.5:
            continue
        level = 0
        anc = el.getparent()
        while anc is not None and level < 5:
            if _tag(anc) in ("html",):
                break
            init(anc)
            divider = 1 if level == 0 else (2 if level == 1 else level * 3)
            scores[anc] += score / divider
            anc = anc.getparent()
            level += 1
        if tag not in ("p", "pre", "td", "blockquote"):
            init(el)
            scores[el] += score
    for el in scores:
        st = stats.get(el)
        if st is not None:
            scores[el] *= 1.0 - st.link_density
    return scores


def _pick_top(root: Any, scores: Mapping[Any, float]) -> Any:
    if not scores:
        return None
    ranked = sorted(scores.items(), key=lambda kv: -kv[1])
    top, top_score = ranked[0]
    # Several strong candidates inside one ancestor: the ancestor is the article (readability's heuristic).
    alternatives = [el for el, s in ranked[1:6] if s >= 0.75 * top_score]
    if len(alternatives) >= 3:
        parent = top.getparent()
        while parent is not None and _tag(parent) not in ("body", "html"):
            inside = sum(1 for alt in alternatives if _is_ancestor(parent, alt))
            if inside >= 3:
                top = parent
                break
            parent = parent.getparent()
    # Climb while the parent scores higher than the current node (the story is split over several children).
    last = scores.get(top, 0.0)
    threshold = last / 3
    parent = top.getparent()
    while parent is not None and _tag(parent) not in ("body", "html"):
        ps = scores.get(parent)
        if ps is None:
            parent = parent.getparent()
            continue
        if ps < threshold:
            break
        if ps > last:
            top = parent
            break
        last = ps
        parent = parent.getparent()
    # An only child says nothing on its own; its parent is the real container.
    parent = top.getparent()
    while parent is not None and _tag(parent) not in ("body", "html") and len(parent) == 1:
        top = parent
        parent = top.getparent()
    return top


def _is_ancestor(anc: Any, el: Any) -> bool:
    cur = el.getparent()
    while cur is not None:
        if cur is anc:
            return True
        cur = cur.getparent()
    return False


def _gather(top: Any, scores: Mapping[Any, float], stats: Mapping[Any, _Stats]) -> list[Any]:
    """The top candidate plus siblings that score well or read like paragraphs."""
    parent = top.getparent()
    if parent is None:
        return [top]
    top_score = scores.get(top, 0.0)
    threshold = max(10.0, top_score * 0.2)
    top_class = top.get("class") or ""
    kept = []
    for sib in parent:
        if sib is top:
            kept.append(sib)
            continue
        tag = _tag(sib)
        if not tag:
            continue
        bonus = top_score * 0.2 if top_class and (sib.get("class") or "") == top_class else 0.0
        if scores.get(sib, -1e9) + bonus >= threshold:
            kept.append(sib)
            continue
        st = stats.get(sib)
        if st is None:
            continue
        if tag == "p" or (tag in ("div", "section", "blockquote", "ul", "ol") and st.own_chars >= 0.8 * st.text_chars):
            text = _WS.sub(" ", "".join(sib.itertext())).strip()
            if len(text) > 80 and st.link_density < 0.25 or 0 < len(text) <= 80 and st.link_density == 0 and re.search(r"\.( |$)", text):
                kept.append(sib)
    return kept


def _clean_content(node: Any, removed: Counter[str]) -> None:
    """Readability-style conditional cleaning inside the chosen content."""
    pre_stats = _measure(node)
    total = pre_stats[node].text_chars
    def small(el: Any) -> bool:
        st = pre_stats.get(el)
        return st is None or st.text_chars <= 0.5 * total

    _drop_where(node, removed, lambda el: (_tag(el) in ("h1", "form", "fieldset", "header", "figure") and small(el))
                or (_tag(el) in ("div", "section", "ul", "ol", "p", "span", "table", "aside", "li")
                    and _is_unlikely(el, pre_stats, total)),
                lambda el: _tag(el) if _tag(el) in ("h1", "form", "fieldset", "header", "figure") else "hinted")
    stats = _measure(node)

    def doomed(el: Any) -> bool:
        tag = _tag(el)
        if tag not in ("div", "section", "ul", "ol", "table", "dl", "p"):
            return False
        st = stats.get(el)
        if st is None:
            return False
        if st.text_chars == 0:
            return tag != "p"
        weight = _class_weight(el)
        if weight < 0:
            return True
        if tag == "p":
            return st.links >= 2 and st.link_density > 0.7
        if st.commas >= 10:
            return False
        # Counted once for the whole tree by _measure: a Counter over el.iter() per element cost depth x size.
        p = st.paragraphs
        li = st.list_items - 100 if tag in ("ul", "ol") else st.list_items
        if tag not in ("ul", "ol") and li > p and p < 3 and st.link_density > 0.3:
            return True
        if st.text_chars < 25 and st.links > 0:
            return True
        if weight < 25 and st.link_density > 0.33 and st.links >= 2:
            return True
        return weight >= 25 and st.link_density > 0.5
    _drop_where(node, removed, doomed, lambda _el: "link-dense")


def extract_main_content(text: str, *, keep_tables: bool = True, min_text_chars: int = 0) -> Extraction:
    """The main text of a whole page (article body without menus, sidebars, footers, comments, banners).

    When the scorer finds nothing with at least ``min_text_chars`` characters, the page is cleaned as a fragment.
    """
    try:
        root = _parse(text)
    except _TooDeep:
        return strip_tags_fallback(text)
    if root is None:
        return Extraction(_tidy(_html.unescape(text)), "page")
    removed: Counter[str] = Counter()
    _drop_where(root, removed, lambda el: _tag(el) in _CODE_TAGS)
    _drop_where(root, removed, lambda el: _is_boilerplate_tag(el, _PAGE_BOILERPLATE_TAGS))
    pre_stats = _measure(root)
    full_text_chars = pre_stats[root].text_chars if root in pre_stats else 0
    _drop_where(root, removed, lambda el: _is_unlikely(el, pre_stats, full_text_chars), lambda _el: "hinted")
    stats = _measure(root)
    scores = _score_candidates(root, stats)
    top = _pick_top(root, scores)
    if top is None:
        return clean_fragment(text, keep_tables=keep_tables)
    nodes = _gather(top, scores, stats)
    container = etree.Element("div")
    for node in nodes:
        copy = _detach_copy(node)
        container.append(copy)
    _clean_content(container, removed)
    out = _render(container, keep_tables)
    if len(out) < max(min_text_chars, 1):
        return clean_fragment(text, keep_tables=keep_tables)
    kept_chars = len(out)
    if full_text_chars > kept_chars:
        removed["outside-main"] += 1
    return Extraction(out, "page", MappingProxyType(dict(removed)))


def _detach_copy(node: Any) -> Any:
    """``node`` moved out of its tree without its tail (the tail belongs to the surrounding page)."""
    parent = node.getparent()
    if parent is not None:
        parent.remove(node)
    node.tail = None
    return node


# -- fallback -------------------------------------------------------------------------------------------------------
_FALLBACK_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "head", "nav", "footer", "aside")
# Where a dropped block or a comment may start; the rest of each match is found by ``_fallback_drops``.
_FALLBACK_DROP_OPEN = re.compile(rf"<(?:({'|'.join(_FALLBACK_DROP_TAGS)})\b|!--)", re.IGNORECASE)
_FALLBACK_BLOCK_OPEN = re.compile(rf"</?(?:{'|'.join(sorted(_BLOCK_TAGS))})\b", re.IGNORECASE)
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
    return Extraction(_tidy(_html.unescape(body)), "fallback", MappingProxyType(dict(dropped)))


def describe_removed(removed: Mapping[str, int]) -> str:
    """``{"nav": 1, "script": 2}`` -> ``"nav, 2 scripts"`` (most frequent first, then by name)."""
    parts = []
    for name, n in sorted(removed.items(), key=lambda kv: (-kv[1], kv[0])):
        parts.append(name if n == 1 else f"{n} {name}s")
    return ", ".join(parts)

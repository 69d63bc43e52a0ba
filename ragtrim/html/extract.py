"""Pure HTML-to-text functions: a cheap HTML detector, fragment cleaning, and main-content extraction for pages.

Everything here is iterative (no Python recursion over the tree), so deeply nested input cannot hit RecursionError.
Documents nested deeper than libxml2's limit fall back to a linear-time regex tag stripper (``method="fallback"``).
This module is the main-content extractor; the detectors, fragment cleaning and the fallback are
``ragtrim.html.markup``, the lxml tree primitives both use ``ragtrim.html.tree``.

Main-content extraction (``extract_main_content``) is a readability-style scorer written for this project:

1. Parse with lxml (libxml2's forgiving HTML parser); drop never-content tags (script, style, svg, forms' controls,
   media) and hidden elements (``hidden``, ``aria-hidden``, ``display:none``).
2. Drop boilerplate containers: ``nav``/``aside``/``footer``/``menu``/``dialog`` and ARIA landmarks for navigation,
   banners, footers and dialogs, and elements whose class/id names a boilerplate role (menu, sidebar, share, related,
   comment, cookie, newsletter, ...) unless the name also says content (article, body, post, entry, story, ...).
3. Score every block whose own text is at least 25 characters: 1 + commas + one point per 100 characters (max 3);
   characters are counted in Latin-letter equivalents (a Han or Kana character 3, a Hangul syllable 2) and commas
   in every script (、 and ，among them);
   add the score to its parent, half to its grandparent and a decaying share further up. Containers start from a tag
   prior and a class/id hint weight; the final score is discounted by the container's link density.
4. Take the best container, climb to an ancestor when several strong candidates share it or a parent scores higher,
   and add siblings that score well or are plain low-link paragraphs (a short one only when it ends a sentence: a
   full stop, ؟ ۔ । ॥ before a space or the end, or 。！？｡ anywhere).
5. Clean the chosen subtree: remove link-dense and list-like blocks, blocks with negative hints, and the page title.
6. Render text with one line per block (headings, paragraphs, list items, table rows) and entities decoded.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from lxml import etree

from ragtrim.html.markup import Extraction, clean_fragment, parse_markup
from ragtrim.html.tree import (
    PAGE_BOILERPLATE_TAGS,
    TextStats,
    class_hints,
    drop_where,
    is_boilerplate_tag,
    measure,
    render_text,
    tag_of,
)
from ragtrim.text.scripts import latin_equivalent_len

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
_WS = re.compile(r"\s+")
# A short paragraph beside the story is kept when it reads as a sentence: a full stop, or (in scripts other than
# Latin) its own stop, followed by a space or the end; the full-width stops need no space after them.
_SENTENCE_END = re.compile(r"[.!?\u061f\u06d4\u0964\u0965](?: |$)|[\u3002\uff01\uff1f\uff61]")


def _class_weight(el: Any) -> int:
    hints = class_hints(el)
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



# -- main-content extraction ----------------------------------------------------------------------------------------
def _is_unlikely(el: Any, stats: Mapping[Any, TextStats], total_chars: int) -> bool:
    tag = tag_of(el)
    if tag in ("body", "a", "html", "main", "article"):
        return False
    hints = class_hints(el)
    if not hints:
        return False
    if not _UNLIKELY_HINTS.search(hints) or _MAYBE_CONTENT.search(hints):
        return False
    # A wrapper holding most of the page cannot be boilerplate, whatever its class says ("page-ad-margins").
    st = stats.get(el)
    return st is None or st.text_chars <= 0.5 * total_chars


def _score_candidates(root: Any, stats: Mapping[Any, TextStats]) -> dict[Any, float]:
    scores: dict[Any, float] = {}

    def init(el: Any) -> None:
        if el not in scores:
            scores[el] = _tag_prior(tag_of(el)) + _class_weight(el)

    for el in root.iter():
        tag = tag_of(el)
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
            if tag_of(anc) in ("html",):
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
        while parent is not None and tag_of(parent) not in ("body", "html"):
            inside = sum(1 for alt in alternatives if _is_ancestor(parent, alt))
            if inside >= 3:
                top = parent
                break
            parent = parent.getparent()
    # Climb while the parent scores higher than the current node (the story is split over several children).
    last = scores.get(top, 0.0)
    threshold = last / 3
    parent = top.getparent()
    while parent is not None and tag_of(parent) not in ("body", "html"):
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
    while parent is not None and tag_of(parent) not in ("body", "html") and len(parent) == 1:
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


def _gather(top: Any, scores: Mapping[Any, float], stats: Mapping[Any, TextStats]) -> list[Any]:
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
        tag = tag_of(sib)
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
            size = latin_equivalent_len(text)
            if size > 80 and st.link_density < 0.25 or 0 < size <= 80 and st.link_density == 0 and _SENTENCE_END.search(text):
                kept.append(sib)
    return kept


def _clean_content(node: Any, removed: Counter[str]) -> None:
    """Readability-style conditional cleaning inside the chosen content."""
    pre_stats = measure(node)
    total = pre_stats[node].text_chars
    def small(el: Any) -> bool:
        st = pre_stats.get(el)
        return st is None or st.text_chars <= 0.5 * total

    drop_where(node, removed, lambda el: (tag_of(el) in ("h1", "form", "fieldset", "header", "figure") and small(el))
                or (tag_of(el) in ("div", "section", "ul", "ol", "p", "span", "table", "aside", "li")
                    and _is_unlikely(el, pre_stats, total)),
                lambda el: tag_of(el) if tag_of(el) in ("h1", "form", "fieldset", "header", "figure") else "hinted")
    stats = measure(node)

    def doomed(el: Any) -> bool:
        tag = tag_of(el)
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
        # Counted once for the whole tree by measure: a Counter over el.iter() per element cost depth x size.
        p = st.paragraphs
        li = st.list_items - 100 if tag in ("ul", "ol") else st.list_items
        if tag not in ("ul", "ol") and li > p and p < 3 and st.link_density > 0.3:
            return True
        if st.text_chars < 25 and st.links > 0:
            return True
        if weight < 25 and st.link_density > 0.33 and st.links >= 2:
            return True
        return weight >= 25 and st.link_density > 0.5
    drop_where(node, removed, doomed, lambda _el: "link-dense")


def extract_main_content(text: str, *, keep_tables: bool = True, min_text_chars: int = 0) -> Extraction:
    """The main text of a whole page (article body without menus, sidebars, footers, comments, banners).

    When the scorer finds nothing with at least ``min_text_chars`` characters, the page is cleaned as a fragment.
    """
    parsed = parse_markup(text, "page")
    if isinstance(parsed, Extraction):
        return parsed
    root, removed = parsed
    drop_where(root, removed, lambda el: is_boilerplate_tag(el, PAGE_BOILERPLATE_TAGS))
    pre_stats = measure(root)
    full_text_chars = pre_stats[root].text_chars if root in pre_stats else 0
    drop_where(root, removed, lambda el: _is_unlikely(el, pre_stats, full_text_chars), lambda _el: "hinted")
    stats = measure(root)
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
    out = render_text(container, keep_tables)
    if len(out) < max(min_text_chars, 1):
        return clean_fragment(text, keep_tables=keep_tables)
    kept_chars = latin_equivalent_len(out)  # the unit of measure()'s text_chars
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

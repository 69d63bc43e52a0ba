"""``ragtrim.html.markup``: telling markup from prose that mentions tags, fragment cleaning, and the linear-time
fallback for markup the parser cannot take."""

from __future__ import annotations

import html as std_html
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragtrim.html.extract import extract_main_content
from ragtrim.html.markup import (
    clean_fragment,
    describe_removed,
    looks_like_html,
    looks_like_page,
    reads_as_markup,
    strip_tags_fallback,
)
from ragtrim.stages.html import HtmlCleaner
from tests.html.sample_page import PAGE, run


class TestLooksLikeHtml:
    @pytest.mark.parametrize("text", [
        "a < b and c > d", "1<2 and 3>2", "x <= y -> z", "", "plain words only", "<3 love", "if (a<b) {}",
        "emails like <john@example.com>",
    ])
    def test_plain_text_is_not_html(self, text: str) -> None:
        assert not looks_like_html(text)

    @pytest.mark.parametrize("text", [
        "<p>hi</p>", "text <br/> more", "<DIV class='x'>a</DIV>", "<!-- c -->", "<!doctype html>", "a<b>bold</b>",
    ])
    def test_markup_is_html(self, text: str) -> None:
        assert looks_like_html(text)

    def test_page_detection(self) -> None:
        assert looks_like_page(PAGE)
        assert looks_like_page("<body><p>x</p></body>")
        assert not looks_like_page("<div><p>x</p></div>")


class TestExtractFunctions:
    def test_fallback_strips_tags_and_code(self) -> None:
        result = strip_tags_fallback("<div><script>a<b</script><p>x &amp; y</p><!-- c --><br>z</div>")
        assert result.text == "x & y\nz" and result.method == "fallback"
        assert dict(result.removed) == {"script": 1, "comment": 1}

    def test_describe_removed(self) -> None:
        assert describe_removed(Counter({"script": 2, "nav": 1, "footer": 1})) == "2 scripts, footer, nav"
        assert describe_removed({}) == ""

    def test_fragment_and_page_on_empty_markup(self) -> None:
        assert clean_fragment("<div></div>").text == ""
        assert extract_main_content("<html><body></body></html>").text == ""


class TestProseAboutTags:
    """Prose that mentions tags once lost the words between them ("Use the , in the head.")."""

    PROSE = "Use the <title> element, e.g. <title>My page</title>, in the head."

    def test_prose_mentioning_tags_is_untouched(self) -> None:
        texts, removals = run([self.PROSE, "Put scripts in a <script> tag or link a <style> sheet from <head>."])
        assert texts == [self.PROSE, "Put scripts in a <script> tag or link a <style> sheet from <head>."]
        assert removals == []

    @pytest.mark.parametrize("text", [
        "<p>hi</p>", "text <br/> more", "a<b>bold</b>", "<title>Buses</title>", "<script>alert(1)</script>",
        "Hello <script src=x></script> world", "<!-- c --> words and more words here", "<i>a</i>",
        "<body><title>x</title> many words follow here in a page</body>",
    ])
    def test_real_markup(self, text: str) -> None:
        assert reads_as_markup(text)

    @pytest.mark.parametrize("text", [
        PROSE, "The <meta> tag and the <link> tag go in the document head, not the body.",
        "An <img> needs alt text.",
    ])
    def test_mentions(self, text: str) -> None:
        assert not reads_as_markup(text)


    def test_unclosed_tag_names_cost_linear_time(self) -> None:
        # "<aaaa...<" made the tag pattern try every split of the name (8,000 letters: 1.4 s).
        assert reads_as_markup("<title>x</title> <" + "a" * 200_000 + "<" + " word" * 10) is False


# The fallback's former regexes: the reference its one-pass rewrite must agree with.
_OLD_DROP = re.compile(
    r"<(script|style|noscript|template|svg|head|nav|footer|aside)\b[^>]*>.*?</\1\s*>|<!--.*?-->",
    re.IGNORECASE | re.DOTALL,
)
_OLD_BLOCK = re.compile(r"</?(?:address|article|aside|blockquote|body|br|caption|center|dd|details|dialog|div|dl|dt|"
                        r"fieldset|figcaption|figure|footer|form|h1|h2|h3|h4|h5|h6|header|hr|html|li|main|menu|nav|"
                        r"ol|p|pre|section|summary|table|tbody|td|tfoot|th|thead|tr|ul)\b[^>]*>", re.IGNORECASE)
_OLD_TAG = re.compile(r"</?[a-zA-Z!][^<>]*>")


def _old_fallback(text: str) -> tuple[str, dict[str, int]]:
    dropped = Counter(m.group(1).lower() if m.group(1) else "comment" for m in _OLD_DROP.finditer(text))
    body = _OLD_TAG.sub("", _OLD_BLOCK.sub("\n", _OLD_DROP.sub(" ", text)))
    lines = (" ".join(line.split()) for line in std_html.unescape(body).split("\n"))
    return "\n".join(line for line in lines if line), dict(dropped)


_SOUP = ["<script>", "</script>", "<SCRIPT a=1>", "</script >", "<style>", "</STYLE>", "<!--", "-->", "<!-- x -->",
         "<div>", "</div>", "<div", "<p class='a'>", "</p>", ">", "<", "text ", "&amp;", "\n", "<br/>", "<nav>",
         "</nav>", "<head>", "</head>", "<b>", "</b>", "<aside x>", "</aside>", "<svgx>", "<script", "</scriptx>"]


class TestFallbackIsLinear:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.sampled_from(_SOUP), max_size=40).map("".join))
    def test_same_result_as_the_former_regexes(self, text: str) -> None:
        result = strip_tags_fallback(text)
        assert (result.text, dict(result.removed)) == _old_fallback(text)

    @pytest.mark.parametrize("tail", ["<script>x", "<!--x", "<style a=1>y", "<div"])
    def test_deep_nesting_then_unclosed_blocks(self, tail: str) -> None:
        # 181 KiB of this took 25-51 s: every unclosed block rescanned the rest of the text.
        html = "<div>" * 10_000 + tail * 8_000
        result = HtmlCleaner().clean(html)
        assert result.method == "fallback"
